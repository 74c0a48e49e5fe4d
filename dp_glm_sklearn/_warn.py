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
# filters, the last one out restores them.
_SILENCE_LOCK = threading.Lock()
_silence = {"depth": 0, "saved": None}


@contextlib.contextmanager
def silenced():
    """Hide every warning while the block runs, in every thread.

    Blocks may nest and may run concurrently in several threads: the
    filters are "ignore" while any of them runs and are restored when the
    last one ends.  (Code outside the library that changes the filters
    meanwhile, with its own ``catch_warnings``, can still interleave.)
    """
    with _SILENCE_LOCK:
        if _silence["depth"] == 0:
            saved = warnings.catch_warnings()
            saved.__enter__()
            warnings.simplefilter("ignore")
            _silence["saved"] = saved
        _silence["depth"] += 1
    try:
        yield
    finally:
        with _SILENCE_LOCK:
            _silence["depth"] -= 1
            if _silence["depth"] == 0:
                saved, _silence["saved"] = _silence["saved"], None
                saved.__exit__(None, None, None)


def _reset_silence_in_child():
    """A forked child: no block runs in it, so its filters are the user's again."""
    global _SILENCE_LOCK
    _SILENCE_LOCK = threading.Lock()
    saved, _silence["saved"] = _silence["saved"], None
    _silence["depth"] = 0
    if saved is not None:
        saved.__exit__(None, None, None)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_silence_in_child)
