"""Warnings reported at the user's line, however deep in the library they arise."""

import contextlib
import os
import sys
import threading
import warnings

import joblib
import sklearn

#: Code whose frames a warning skips: this package, scikit-learn (its
#: ``_fit_context`` wrapper, meta-estimators, model selection) and joblib.
_INTERNAL_DIRS = tuple(
    os.path.dirname(os.path.abspath(path)) + os.sep
    for path in (__file__, sklearn.__file__, joblib.__file__)
)


def warn_user(message, category):
    """``warnings.warn`` attributed to the first caller outside the library.

    A fixed ``stacklevel`` points at the right line for one call path only:
    a fit reached through ``fit``'s validation wrapper, a search or
    ``norm_bound="auto"`` is nested more or less deeply.  Walking the stack to
    the first frame outside this package, scikit-learn and joblib makes the
    warning name the user's own call (and lets filters keyed on the user's
    module work).
    """
    frame, level = sys._getframe(0), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_INTERNAL_DIRS):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


# -- silencing warnings across threads ---------------------------------------------
# warnings.catch_warnings saves the process-wide filter list on entry and puts
# it back on exit.  Two such blocks in two threads (two searches fitted
# concurrently) then interleave: the first to exit unsilences the other one,
# which shows warnings it promised to hide, and the last to exit reinstates
# "ignore" for good.  silenced() shares one catch_warnings among all the
# library's blocks in the process: the first block in saves the user's
# filters, the last one out restores them.  This orders the library's own
# blocks only: any other catch_warnings running in another thread meanwhile
# (scikit-learn's input validation opens one in every fit and predict) can
# still interleave with them, until Python's filters are per-context
# (3.14's context-aware warnings).  Fit concurrently in processes, not
# threads, where that matters.
_SILENCE_LOCK = threading.Lock()
_silence = {"depths": {}, "saved": None}  # depths: open blocks by thread


@contextlib.contextmanager
def silenced():
    """Hide every warning while the block runs, in every thread.

    Blocks may nest and may run concurrently in several threads: the
    filters are "ignore" while any of them runs and are restored when the
    last one ends.  Code outside these blocks that swaps the filters
    meanwhile (another ``catch_warnings``, in another thread) can still
    interleave with them: see the comment above.
    """
    thread = threading.get_ident()
    with _SILENCE_LOCK:
        depths = _silence["depths"]
        if not depths:
            saved = warnings.catch_warnings()
            saved.__enter__()
            warnings.simplefilter("ignore")
            _silence["saved"] = saved
        depths[thread] = depths.get(thread, 0) + 1
    try:
        yield
    finally:
        with _SILENCE_LOCK:
            depths = _silence["depths"]
            depths[thread] -= 1
            if not depths[thread]:
                del depths[thread]
            if not depths and _silence["saved"] is not None:
                saved, _silence["saved"] = _silence["saved"], None
                saved.__exit__(None, None, None)


def _reset_silence_in_child():
    """A forked child runs only the thread that forked: only its blocks stay
    open; if it had none, the child's filters are the user's again."""
    global _SILENCE_LOCK
    _SILENCE_LOCK = threading.Lock()
    thread = threading.get_ident()
    mine = _silence["depths"].get(thread, 0)
    _silence["depths"] = {thread: mine} if mine else {}
    if not mine and _silence["saved"] is not None:
        saved, _silence["saved"] = _silence["saved"], None
        saved.__exit__(None, None, None)


if hasattr(os, "register_at_fork"):
    # The lock is held across the fork (taken before, released after in the
    # parent), so the child never copies a half-done entry or exit.
    os.register_at_fork(before=lambda: _SILENCE_LOCK.acquire(),
                        after_in_parent=lambda: _SILENCE_LOCK.release(),
                        after_in_child=_reset_silence_in_child)
