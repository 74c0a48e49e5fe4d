"""The private scikit-learn helpers this package uses: imported here only, each with a fallback.

scikit-learn may move or remove a private name in any release; a library
that imports one directly then stops importing altogether (diffprivlib
0.6.6 does not import with scikit-learn 1.9).  Every private name the
package needs is imported in this module and nowhere else, so a future
break has one place to fix, and until then the package keeps working on
the fallbacks below:

- ``Interval``, ``StrOptions``, ``HasMethods`` and :func:`validate_params`:
  the declarative parameter checks of ``_parameter_constraints`` (``Interval``
  refusing bools, unlike scikit-learn's own);
- ``fit_context``: the decorator that validates the parameters before
  ``fit`` (scikit-learn's ``_fit_context``; :func:`validated_even_if_skipped`
  adds the validation under ``skip_parameter_validation``);
- ``safe_indexing`` and ``num_samples``: row selection and row count of an
  array, a sparse matrix, a DataFrame or a list;
- ``InvalidParameterError``: scikit-learn's error for a parameter outside
  its constraints (a ValueError and a TypeError);
- ``VisualBlock``: the HTML diagram's block, used by the searches to show
  ``best_estimator_`` (None if it cannot be imported: the diagram is then
  scikit-learn's default one).

If any one of the private imports fails, all fallbacks are used together:
scikit-learn's validator does not know the fallback constraint objects.
``USING_FALLBACKS`` says which set is in use.  The fallbacks accept and
reject the same values as scikit-learn for the constraints this package
declares (``tests/test_sklearn_compat.py`` checks both, and runs the
estimators on the fallbacks).
"""

import functools
import math
from numbers import Integral, Real

import numpy as np
from sklearn import get_config

try:  # scikit-learn >= 1.7, then 1.6
    from sklearn.utils._repr_html.estimator import _VisualBlock as VisualBlock
except ImportError:  # pragma: no cover - depends on the installed version
    try:
        from sklearn.utils._estimator_html_repr import _VisualBlock as VisualBlock
    except ImportError:
        VisualBlock = None

try:
    from sklearn.base import _fit_context as fit_context
    from sklearn.utils import _safe_indexing as safe_indexing
    from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
    from sklearn.utils._param_validation import InvalidParameterError as _SklearnIPE
    from sklearn.utils._param_validation import validate_parameter_constraints as _sk_check
    from sklearn.utils.validation import _num_samples as num_samples

    USING_FALLBACKS = False
except ImportError:  # pragma: no cover - exercised in a subprocess by the tests
    USING_FALLBACKS = True


def float_or_inf(value):
    """``float(value)``, but an int or Fraction beyond floats (10**400) becomes
    +-inf instead of raising OverflowError (an error naming no parameter)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


class InvalidParameterError(ValueError, TypeError):
    """A parameter outside its declared constraints (as scikit-learn's error of that name)."""


class _Interval:
    """Numbers of ``type`` between ``left`` and ``right`` (``None``: unbounded).

    ``True`` and ``False`` are refused: to Python a bool is an int (and
    scikit-learn's ``Interval`` accepts one), but ``epsilon=True`` or
    ``max_iter=True`` is a mistake, not a budget of 1 or one step.
    """

    def __init__(self, type, left, right, *, closed):
        self.type, self.left, self.right, self.closed = type, left, right, closed

    def is_satisfied_by(self, value):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, self.type):
            return False
        if isinstance(value, float) and math.isnan(value):
            return False
        left = -math.inf if self.left is None else self.left
        right = math.inf if self.right is None else self.right
        above = value >= left if self.closed in ("left", "both") else value > left
        below = value <= right if self.closed in ("right", "both") else value < right
        return bool(above and below)

    def __str__(self):
        kind = "an int" if self.type is Integral else "a float"
        left = "-inf" if self.left is None else self.left
        right = "inf" if self.right is None else self.right
        opening = "[" if self.closed in ("left", "both") and self.left is not None else "("
        closing = "]" if self.closed in ("right", "both") and self.right is not None else ")"
        return f"{kind} in the range {opening}{left}, {right}{closing}"


class _StrOptions:
    """One of a set of strings."""

    def __init__(self, options):
        self.options = set(options)

    def is_satisfied_by(self, value):
        return isinstance(value, str) and value in self.options

    def __str__(self):
        return "a str among {" + ", ".join(repr(o) for o in sorted(self.options)) + "}"


class _HasMethods:
    """An object with all of the named methods."""

    def __init__(self, methods):
        self.methods = [methods] if isinstance(methods, str) else list(methods)

    def is_satisfied_by(self, value):
        return all(callable(getattr(value, name, None)) for name in self.methods)

    def __str__(self):
        return "an object implementing " + " and ".join(repr(m) for m in self.methods)


def _satisfies(constraint, value):
    """Whether ``value`` meets one entry of a ``_parameter_constraints`` list."""
    if constraint is None:
        return value is None
    if constraint == "boolean":
        return isinstance(value, (bool, np.bool_))
    if constraint == "random_state":
        return (value is None or isinstance(value, np.random.RandomState)
                or (isinstance(value, Integral) and 0 <= value <= 2**32 - 1))
    if constraint == "array-like":
        return any(hasattr(value, a) for a in ("__len__", "shape", "__array__")) and (
            not np.isscalar(value))
    if isinstance(constraint, type):
        return isinstance(value, constraint)
    return constraint.is_satisfied_by(value)


def _describe(constraint):
    if constraint is None:
        return "None"
    if isinstance(constraint, str):
        return {"boolean": "an instance of 'bool'",
                "random_state": "an int in the range [0, 4294967295], an instance of "
                                "'numpy.random.RandomState' or None",
                "array-like": "an array-like"}[constraint]
    if isinstance(constraint, type):
        return f"an instance of {constraint.__name__!r}"
    return str(constraint)


def _validate_params_fallback(estimator):
    """Raise :class:`InvalidParameterError` naming the parameter and what it may be."""
    _check_constraints_fallback(estimator._parameter_constraints,
                                estimator.get_params(deep=False), type(estimator).__name__)


def _check_constraints_fallback(parameter_constraints, params, caller_name):
    for name, constraints in parameter_constraints.items():
        if constraints == "no_validation" or name not in params:
            continue
        value = params[name]
        if any(_satisfies(c, value) for c in constraints):
            continue
        allowed = [_describe(c) for c in constraints]
        allowed = allowed[0] if len(allowed) == 1 else (
            ", ".join(allowed[:-1]) + " or " + allowed[-1])
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller_name} must be {allowed}. "
            f"Got {value!r} instead."
        )


def _fit_context_fallback(*, prefer_skip_nested_validation):
    """Validate the estimator's parameters, then run the decorated ``fit``.

    As scikit-learn's, it validates nothing under
    ``sklearn.config_context(skip_parameter_validation=True)``.
    """

    def decorator(fit):
        @functools.wraps(fit)
        def wrapper(estimator, *args, **kwargs):
            if not get_config().get("skip_parameter_validation", False):
                _validate_params_fallback(estimator)
            return fit(estimator, *args, **kwargs)

        return wrapper

    return decorator


def _num_samples_fallback(x):
    shape = getattr(x, "shape", None)
    if shape is not None and len(shape) > 0:
        return int(shape[0])
    if hasattr(x, "__len__") and not isinstance(x, str):
        return len(x)
    raise TypeError(f"Expected a sequence or array-like, got {type(x).__name__}.")


def _safe_indexing_fallback(x, indices):
    if x is None:
        return None
    if hasattr(x, "iloc"):  # pandas
        return x.iloc[np.asarray(indices)]
    if isinstance(x, (list, tuple)):
        return [x[i] for i in np.asarray(indices)]
    return x[np.asarray(indices)]


def validate_params(estimator):
    """Check ``estimator``'s parameters against its ``_parameter_constraints``."""
    if USING_FALLBACKS:
        _validate_params_fallback(estimator)
    else:
        estimator._validate_params()


def validated_even_if_skipped(fit):
    """Decorate ``fit`` to validate the parameters under
    ``skip_parameter_validation=True`` too (placed below ``fit_context``,
    which validates them otherwise), but ``random_state``, which numpy
    checks when it draws.  For the searches: each of their other parameters
    decides what a release costs or how it is scored, and an unvalidated
    one failed after the charge (``scoring``) or was silently replaced
    (``selection``).  (``random_state``: ``norm_bound="auto"`` passes the
    estimator's own to its search, which must take what the estimator
    takes under that option.)"""

    @functools.wraps(fit)
    def wrapper(estimator, *args, **kwargs):
        if get_config().get("skip_parameter_validation", False):
            constraints = {name: constraint for name, constraint
                           in estimator._parameter_constraints.items()
                           if name != "random_state"}
            check = _check_constraints_fallback if USING_FALLBACKS else _sk_check
            check(constraints, estimator.get_params(deep=False), type(estimator).__name__)
        return fit(estimator, *args, **kwargs)

    return wrapper


if USING_FALLBACKS:
    Interval, StrOptions, HasMethods = _Interval, _StrOptions, _HasMethods
    fit_context = _fit_context_fallback
    num_samples, safe_indexing = _num_samples_fallback, _safe_indexing_fallback
else:  # scikit-learn's own class, which callers may catch by name
    InvalidParameterError = _SklearnIPE  # noqa: F811

    class Interval(Interval):  # noqa: F811 (scikit-learn's, refusing bools as _Interval does)
        """scikit-learn's ``Interval``, refusing ``True`` and ``False`` (see :class:`_Interval`)."""

        def is_satisfied_by(self, val):
            if isinstance(val, (bool, np.bool_)):
                return False
            if isinstance(val, Real) and not isinstance(val, (int, float, np.number)):
                # A Fraction: scikit-learn's check calls np.isnan on it, which
                # raises a TypeError naming no parameter.  Judged as a float.
                val = float_or_inf(val)
            return super().is_satisfied_by(val)


#: The ``random_state`` constraint: scikit-learn's ``"random_state"`` (an int in
#: [0, 2**32 - 1], a RandomState or None) and a numpy Generator, without
#: ``True`` and ``False``: numpy reads True as the seed 1, and meant as
#: "random" it would fix the noise, a known seed that removes the privacy.
RANDOM_STATE = [Interval(Integral, 0, 2**32 - 1, closed="both"), np.random.RandomState,
                np.random.Generator, None]
