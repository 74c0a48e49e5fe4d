"""Warnings reported at the user's line, however deep in the library they arise."""

import os
import sys
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
