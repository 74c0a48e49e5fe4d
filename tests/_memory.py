"""Memory measurement shared by test modules (imported as ``_memory``, like ``privacy/_audit``)."""

import tracemalloc


def traced_peak(fit):
    """Peak memory (bytes) traced by tracemalloc while ``fit()`` runs; numpy
    reports its arrays' allocations to it, touched or not."""
    tracemalloc.start()
    try:
        fit()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
