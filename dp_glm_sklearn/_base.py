"""The one ``fit`` template shared by every DP estimator.

``fit`` always runs the same steps, in this order:

1. validate the parameters (nothing is read from the data);
2. check that the accountant can afford the release (needs only the public
   n and the target (epsilon, delta)), before any data value is read;
3. validate the data and encode the labels (regression labels clipped to
   ``y_bound``);
4. calibrate the mechanism (public quantities only) and charge the
   accountant, atomically; a refusal raises and trains nothing;
5. train (rows are clipped to ``feature_norm`` inside the gradient kernel,
   :class:`~dp_glm_sklearn._objective.GLMObjective`, without copying X), then
   set the fitted attributes and the privacy record.

Concrete estimators (``linear_model/_glm.py``) say which loss they minimize
and how labels are checked, encoded and decoded: the regressors through one
shared base (``_get_loss``, ``_y_interval``), the classifier by overriding
``_check_targets``, ``_public_loss`` and ``_encode_targets``.
"""

import datetime
import functools
import os
import threading
import types
import weakref
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn import config_context
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from ._objective import (
    _MAX_BOUND,
    GLMObjective,
    PublicBoundsError,
    PublicProblem,
    canonical_rows,
)
from ._sklearn_compat import (
    Interval,
    InvalidParameterError,
    StrOptions,
    fit_context,
    num_samples,
)
from ._warn import warn_user
from .mechanisms import (
    MECHANISMS,
    calibrate,
    draw_public,
    reserve_working_memory,
    resolve,
    train,
)
from .mechanisms.noisy_gd import default_steps
from .privacy.accountant import PrivacyAccountant, _check_release, _DefaultAccountantMixin
from .privacy.calibration import gdp_mu
from .privacy.events import GaussianEvent, compose


def default_delta(n_samples, budget_delta=1.0):
    """Default delta: ``min(1e-5, n**-1.5, budget_delta)``, well below ``1/n``.

    A mechanism that publishes each record with probability delta is
    (0, delta)-DP, so delta must be small next to ``1/n``; ``n**-1.5`` leaves
    an expected ``n**-0.5`` such leaks at worst, and 1e-5 caps it for small n.
    ``budget_delta`` is the delta of the accountant the fit is charged to (0,
    a pure-DP ledger, is ignored): at most it, a fit at epsilon costs that
    accountant exactly epsilon, so ``PrivacyAccountant(epsilon=1, delta=1e-6)``
    affords one default fit at ``epsilon=1`` (at 1e-5 it cost 1.14 at 1e-6,
    and was refused).
    """
    cap = budget_delta if 0.0 < budget_delta < 1e-5 else 1e-5
    return float(min(cap, max(n_samples, 1) ** -1.5))


#: The most noisy gradient steps a fit takes (max_iter).
MAX_ITER = 10**6

#: The largest finite epsilon a fit takes.  The Gaussian-DP conversions and
#: the accountant's sums of mu**2 overflow near the largest float; epsilon = inf
#: (no noise) is accepted as such.
MAX_FINITE_EPSILON = 1e300


def target_privacy(owner, n_samples):
    """``(epsilon, delta)`` of a fit of ``owner`` (an estimator or a search) on n samples.

    ``delta=None`` is :func:`default_delta` (at most the delta of the
    accountant ``owner`` charges, its ``_accountant_delta()``); a finite epsilon above
    :data:`MAX_FINITE_EPSILON` is refused here, before anything is charged.
    """
    epsilon = float(owner.epsilon)
    if MAX_FINITE_EPSILON < epsilon < np.inf:
        raise ValueError(
            f"The 'epsilon' parameter of {type(owner).__name__} must be at most "
            f"{MAX_FINITE_EPSILON:g}, or inf for no noise; got {owner.epsilon!r}.")
    if owner.delta is None:
        delta = default_delta(n_samples, owner._accountant_delta())
    else:
        delta = float(owner.delta)
    if not 0.0 < delta < 1.0:
        # (Also under skip_parameter_validation: delta = 0 divided by zero in
        # the rule choosing the method.)
        raise InvalidParameterError(
            f"The 'delta' parameter of {type(owner).__name__} must be a float in the range "
            f"(0.0, 1.0) or None. Got {owner.delta!r} instead.")
    return epsilon, delta


def warn_large_delta(owner, delta, n_samples):
    """Warn when the ``delta`` of ``owner``'s fit on n samples is not below ``1/n``.

    Called once per fit the user asked for (not for a search's candidates,
    nor for the search ``norm_bound="auto"`` runs), with the fit's
    :func:`target_privacy` delta.  n is public: the warning says nothing of
    the data.
    """
    if delta * n_samples >= 1.0:
        warn_user(
            f"{type(owner).__name__}: delta={delta:.3g} is not below 1/n = "
            f"{1.0 / n_samples:.3g} (n = {n_samples}): a mechanism publishing one record "
            "chosen at random, in the clear, meets such a delta. Choose delta well below "
            "1/n (delta=None is min(1e-5, n**-1.5, the accountant's delta)).",
            UserWarning,
        )


def _validate_data_quietly(estimator, *args, **kwargs):
    """``validate_data``, without quoting values of the data in its errors.

    Errors are replaced by :func:`_unquoted`'s.  Floating-point warnings are
    silenced: the finiteness check sums X, and one row of huge finite entries
    of both signs makes the sum overflow and numpy warn "invalid value
    encountered in reduce", a message shown for one data set and not for its
    neighbour.  The check itself is unaffected (a non-finite sum is followed
    by an element-wise check).
    """
    name = type(estimator).__name__
    for data, what in zip(args, ("X", "y"), strict=False):  # (predict passes X alone)
        data = _dtyped(data, name, what)
        if data is None:  # checked here already, or refused by scikit-learn's own check
            continue
        _refuse_temporal(data, name, what)
        _refuse_pandas_missing(data, name, what)
    try:
        with np.errstate(all="ignore"):
            return validate_data(estimator, *args, **kwargs)
    except (ValueError, TypeError) as exc:
        error = _unquoted(exc, name)
        if error is None:
            raise
    raise error


def _dtyped(data, name, what):
    """``data`` with a dtype, as :func:`_refuse_temporal` reads it, or None.

    pandas, polars and pyarrow data, numpy and sparse arrays are returned as
    they are.  Anything else scikit-learn converts with numpy, reading no
    dtype from it, and numpy silently turns ``np.datetime64`` and
    ``np.timedelta64`` scalars among numbers into numbers: an object
    exposing ``__array__`` is returned as the array it exposes, and a
    sequence (a list, tuple, deque, ``UserList``: anything with ``len`` and
    indexing, as numpy reads sequences) is checked here, item by item, and
    None returned.  Rows that are numpy arrays, or expose one, are judged by
    their dtype (as objects, one of datetime64[ns] became Python ints, and
    numbers became objects of 32 bytes each); the other items are looked at as one
    array of their objects (pandas Series, 0-d arrays, lists of numbers and
    dates alike), row by row if that array cannot be made (ragged rows, or
    not enough memory for it: the check is never skipped).  scikit-learn
    converts the sequence itself (converting it for scikit-learn, with
    np.asarray, changed what it trains on: float32 scalars gave a float32
    model, True with "1.5" strings).  None is also returned for what is
    neither (a generator, a set), for text, which scikit-learn's check
    refuses, and for a ``range`` (whole numbers).
    """
    if (hasattr(data, "dtype") or hasattr(data, "dtypes") or hasattr(data, "schema")
            or sp.issparse(data)):
        return data
    if _exposes_array(data):
        try:
            return np.asarray(data)  # what numpy (and so scikit-learn) reads from it
        except (ValueError, TypeError):  # scikit-learn's conversion fails and says so
            return None
    if (isinstance(data, (str, bytes, range))  # text scikit-learn refuses; whole numbers
            or not (hasattr(data, "__len__") and hasattr(data, "__getitem__"))):
        return None
    try:
        items = data if type(data) is list else list(data)  # references: no copy of values
    except Exception:  # (a sequence that cannot be read: numpy fails on it too)
        return None
    arrays, others = _array_items(items)
    found = any(_temporal(item.dtype) or (item.dtype.kind == "O" and item.size > 0
                                          and _holds_temporal_objects(item))
                for item in arrays)
    if not found and others:
        try:
            found = _holds_temporal_objects(_object_view(others))
        except (ValueError, TypeError, MemoryError):
            found = any(_item_holds_temporal(item) for item in others)
    if found:
        raise _temporal_error(name, what, what, "holds dates, times or durations")
    return None


#: Items numpy reads as scalars whatever else they define (its own scalars
#: and bytes have the buffer protocol, its scalars ``__array__``).
_READ_AS_SCALARS = (np.generic, int, float, complex, str, bytes)

#: What makes numpy read an object as the array it exposes.
_ARRAY_ATTRS = ("__array__", "__array_interface__", "__array_struct__")
_ARRAY_ATTRS_SET = frozenset(_ARRAY_ATTRS)


def _array_items(items):
    """``(arrays, others)``: the items numpy reads as arrays (numpy arrays, and
    objects exposing one: as objects, their datetime64[ns] values would be
    Python ints), converted, and the other items.

    Whether an item exposes an array is decided once per type (a long list
    of numbers costs one pass over the types), and item by item only for
    types whose instances may expose one of their own (numpy reads an
    ``__array__`` set on an instance, or one a ``__getattr__`` returns for
    some instances only).  Subclasses of list and tuple are rows like any
    other: numpy reads one exposing an array as that array.
    """
    exposing, by_dict, by_lookup = set(), set(), set()
    for kind in _distinct_types(items):
        if issubclass(kind, _READ_AS_SCALARS) or kind is list or kind is tuple:
            continue  # (a list or a tuple itself exposes no array)
        if _exposes_array(next(item for item in items if type(item) is kind)):
            exposing.add(id(kind))
        elif _looks_up_attributes(kind):
            by_lookup.add(id(kind))
        elif getattr(kind, "__dictoffset__", 0):
            by_dict.add(id(kind))
    if not (exposing or by_dict or by_lookup):
        return [], items

    def read_as_array(item):
        key = id(type(item))
        if key in exposing:
            return True
        if key in by_dict:
            return not _ARRAY_ATTRS_SET.isdisjoint(getattr(item, "__dict__", ()))
        return key in by_lookup and any(hasattr(item, attr) for attr in _ARRAY_ATTRS)

    arrays, others = [], []
    for item in items:
        (arrays if read_as_array(item) else others).append(item)
    return [np.asarray(item) for item in arrays], others


def _looks_up_attributes(kind):
    """Whether instances of ``kind`` may expose an array each of their own,
    though the first did not: a class of its MRO written in Python defines
    ``__getattr__``, ``__getattribute__`` or one of the array attributes
    (as a function, a cached one, a property, a slot: whatever it is), or
    it is a module (whose ``__getattr__`` lives in each instance's dict).
    C types (tuple's, Decimal's) have no such hook."""
    own = {name: type.__dict__[name].__get__ for name in ("__dict__", "__flags__", "__mro__")}
    mro = own["__mro__"](kind)  # (type's own: not a metaclass's)
    return types.ModuleType in mro or any(
        own["__flags__"](kind_) & _HEAP_TYPE and _has_lookup_hook(own["__dict__"](kind_))
        for kind_ in mro)


def _has_lookup_hook(namespace):
    """Whether a class's own ``namespace`` defines an attribute hook or an
    array attribute, or replaces ``__dict__`` (which then hides the dict
    that holds an instance's own attributes)."""
    return not _LOOKUP_HOOKS.isdisjoint(namespace) or (
        "__dict__" in namespace
        and not isinstance(namespace["__dict__"], types.GetSetDescriptorType))


#: ``Py_TPFLAGS_HEAPTYPE``: a class created by a class statement (or ``type()``).
_HEAP_TYPE = 1 << 9
_LOOKUP_HOOKS = frozenset({"__getattr__", "__getattribute__", *_ARRAY_ATTRS})


def _distinct_types(values):
    """The distinct types of ``values``, in one C-level pass (by their ids if
    one is not hashable: its metaclass may define ``__eq__`` alone)."""
    try:
        return set(map(type, values))
    except TypeError:
        kinds = list(map(type, values))
        return list(dict(zip(map(id, kinds), kinds, strict=True)).values())


def _exposes_array(data):
    """Whether numpy reads ``data`` as an array it exposes (``__array__``, the
    array interface, or the buffer protocol: a 2-D memoryview cannot be
    listed) rather than as a sequence."""
    if any(hasattr(data, attr) for attr in _ARRAY_ATTRS):
        return True
    try:
        memoryview(data)
    except TypeError:
        return False
    return True


def _object_view(items):
    """The items of a sequence as one array of their objects (8 bytes a value
    for lists of Python numbers, which exist already)."""
    return np.asarray(items, dtype=object)


def _item_holds_temporal(item):
    """:func:`_holds_temporal_objects` of one item of a sequence (a row of X,
    a label of y); a ragged row, which scikit-learn refuses, holds none."""
    if isinstance(item, _TEMPORAL_SCALARS):
        return True
    try:
        return _holds_temporal_objects(np.asarray(item, dtype=object))
    except (ValueError, TypeError):
        return False


def _of_objects(dtype):
    """Whether a column of ``dtype`` holds Python objects (numpy's object
    dtype, pandas' strings and categoricals: kind ``O``)."""
    return getattr(dtype, "kind", "O") == "O"


def _refuse_pandas_missing(data, name, what):
    """Refuse a missing value (pd.NA, None, NaN) in a pandas object of objects,
    strings or another extension dtype.

    scikit-learn's NaN check compares such values with themselves: pd.NA
    raised "boolean value of NA is ambiguous" (with numpy < 1.25, an
    AttributeError).  Numeric columns, pandas' nullable ones included, are
    left to that check (it converts them, pd.NA to NaN), and not copied.
    """
    isna = getattr(data, "isna", None)
    dtypes = getattr(data, "dtypes", getattr(data, "dtype", None))  # (a pandas array: dtype)
    if not callable(isna) or dtypes is None:
        return
    if hasattr(dtypes, "items"):  # a DataFrame: its columns of objects or strings
        # (by position: labels such as True and False would select rows)
        positions = [i for i, dtype in enumerate(dtypes) if _of_objects(dtype)]
        missing = bool(positions) and bool(data.iloc[:, positions].isna().to_numpy().any())
    elif _of_objects(dtypes):  # a Series or an array
        missing = bool(np.asarray(isna()).any())
    else:
        return
    if missing:
        raise ValueError(f"{name}: Input {what} contains NaN or another missing value "
                         "(pd.NA, None); drop or impute those rows first.")


#: Scalars of dates, times and durations, as they sit in arrays of objects
#: (numpy converts np.datetime64 and np.timedelta64 to numbers silently).
_TEMPORAL_SCALARS = (np.datetime64, np.timedelta64, datetime.date, datetime.time,
                     datetime.timedelta)

#: Names of pyarrow's temporal types, as in pandas' ArrowDtype and pyarrow's schemas.
_ARROW_TEMPORAL = ("timestamp", "date32", "date64", "time32", "time64", "duration")


def _temporal(dtype):
    """Whether ``dtype`` holds dates, times, durations, periods or intervals.

    numpy's and pandas' datetime64/timedelta64 (kind ``M``/``m``), pandas'
    Period and Interval dtypes, polars' temporal dtypes, pyarrow's (also
    inside pandas' ArrowDtype, or as a dictionary's values).
    """
    if getattr(dtype, "kind", None) in ("m", "M"):
        return True
    if type(dtype).__name__ in ("PeriodDtype", "IntervalDtype"):
        return True
    is_temporal = getattr(dtype, "is_temporal", None)  # polars
    if callable(is_temporal) and is_temporal():
        return True
    arrow = getattr(dtype, "pyarrow_dtype", dtype)  # pandas' ArrowDtype
    return (type(arrow).__module__.startswith("pyarrow")
            and any(word in str(arrow) for word in _ARROW_TEMPORAL))


def _holds_temporal_objects(values):
    """Whether an array of objects holds a date, time or duration (by the
    distinct types of its values: a C-level pass, no copy of numbers; arrays
    among the values, such as 0-d ones from a list of rows, by their own)."""
    values = np.ravel(np.asarray(values, dtype=object))
    kinds = _distinct_types(values)
    if any(issubclass(kind, _TEMPORAL_SCALARS) for kind in kinds):
        return True
    # (A proxy, weakref's or wrapt's, passes for what it points to, for
    # isinstance and for the float() of scikit-learn's conversion.)
    disguised = _disguised_kinds(values, kinds)
    if disguised and any(id(type(value)) in disguised and isinstance(value, _TEMPORAL_SCALARS)
                         for value in values):
        return True
    return (disguised or any(issubclass(kind, np.ndarray) for kind in kinds)) and any(
        isinstance(value, np.ndarray) and (_temporal(value.dtype) or (
            value.dtype.kind == "O" and value.size and _holds_temporal_objects(value)))
        for value in values)


def _disguised_kinds(values, kinds):
    """Ids of the types among ``kinds`` whose instances claim another class
    (proxies); numbers, text and numpy's scalars are taken at their word."""
    disguised = set()
    for kind in kinds:
        if issubclass(kind, _READ_AS_SCALARS) and kind.__module__ in ("builtins", "numpy"):
            continue
        sample = next(value for value in values if type(value) is kind)
        if getattr(sample, "__class__", kind) is not kind:
            disguised.add(id(kind))
    return disguised


def _refuse_temporal(data, name, what):
    """Refuse dates, durations, periods and intervals in X or y, naming the column.

    scikit-learn converts a datetime column alone to nanoseconds since 1970
    (about 1.6e18), which clipping to ``feature_norm`` makes a useless
    feature without a word; mixed with numbers it fails in numpy's words.
    Column names and dtypes are the data's schema, the same for neighbouring
    data sets; dates among objects (a column of ``np.datetime64`` scalars,
    which numpy turns into numbers) are found by the types of the values, as
    the conversion to numbers reads them (a list as an array of its
    objects, by :func:`_dtyped`).
    """
    dtypes = getattr(data, "dtypes", None)  # a pandas DataFrame
    schema = getattr(data, "schema", None)
    frame = hasattr(dtypes, "items")
    polars_frame = not frame and hasattr(schema, "items")
    if frame:
        columns = list(dtypes.items())
    elif polars_frame:
        columns = list(schema.items())
    elif hasattr(schema, "names") and hasattr(schema, "types"):  # a pyarrow Table
        columns = list(zip(schema.names, schema.types, strict=True))
    elif hasattr(data, "dtype"):
        columns = [(getattr(data, "name", None), data.dtype)]
    else:
        return
    # Columns of objects are looked at in one block (one pass, however many
    # columns), and one by one only to name the culprit.
    objects = [i for i, (_, dtype) in enumerate(columns) if _of_python_objects(dtype)]

    def block(positions):
        if frame:
            return data.iloc[:, positions].to_numpy(dtype=object)
        if polars_frame:
            return np.asarray(data.select([columns[i][0] for i in positions]), dtype=object)
        return data

    suspects = set()
    if objects and _holds_temporal_objects(block(objects)):
        suspects = {i for i in objects if not (frame or polars_frame)
                    or _holds_temporal_objects(block([i]))}
    for position, (column, dtype) in enumerate(columns):
        where = f"column {column!r} of {what}" if column is not None else what
        if _temporal(dtype):
            found = f"has dtype {dtype}"
        elif position in suspects:
            found = "holds dates, times or durations"
        else:
            continue
        raise _temporal_error(name, what, where, found)


def _of_python_objects(dtype):
    """Whether a column of ``dtype`` holds Python objects, as numpy's object
    dtype and pandas' strings and categoricals do (kind ``O``) and polars'
    ``Object`` does (np.datetime64 values among them become numbers)."""
    return getattr(dtype, "kind", None) == "O" or (
        type(dtype).__name__ == "Object" and type(dtype).__module__.startswith("polars"))


def _temporal_error(name, what, where, found):
    return ValueError(
        f"{name}: {where} {found}; {what} must hold numbers. Dates, durations, periods "
        "and intervals are not converted (a date would become nanoseconds since 1970): "
        "encode them as numbers with public bounds first.")


def _unquoted(exc, name):
    """A ValueError saying what ``exc`` says without the data it quotes, or None.

    numpy's "could not convert string to float: 'alice-91234'" names a value
    of the private data; scikit-learn's "Expected 2D array, got 1D array
    instead: array=[31. 45. 62.] ..." and "Complex data not supported
    [[...]]" print the whole column or array.  The error returned says what
    is wrong (in scikit-learn's words, which its estimator checks look for),
    shows no value, and is to be raised outside the ``except`` block, so that
    it does not chain ``exc``.
    """
    message = str(exc)
    head, marker, tail = message.partition("\narray=")
    if marker:
        _, advice, rest = tail.partition("Reshape your data")
        return ValueError(f"{name}: {head} (the values are not shown: they are the data). "
                          f"{advice}{rest}".rstrip())
    if message.startswith("Complex data not supported"):
        return ValueError(f"{name}: Complex data not supported (the values are not shown: "
                          "they are the data).")
    if message.startswith("could not convert"):
        return ValueError(f"{name}: X and y must be numeric; a value could not be "
                          "converted to float (not shown here: it is a value of the data).")
    if message.startswith("setting an array element with a sequence"):
        return ValueError(f"{name}: X and y must be arrays of numbers; an entry is itself "
                          "a sequence (rows of different lengths, or cells holding lists).")
    if message == "boolean value of NA is ambiguous":  # pandas' pd.NA, met by the NaN check
        return ValueError(f"{name}: Input contains NaN (pandas' missing value pd.NA); "
                          "drop or impute those rows first.")
    return None


def _fit_n_samples(X, y, name):
    """The number of rows of a ``fit``'s X; y=None is refused in scikit-learn's words."""
    if y is None:
        raise ValueError(f"This {name} estimator requires y to be passed, "
                         "but the target y is None.")
    return _n_samples(X, name)


def _n_samples(X, name, what="X"):
    """The number of rows of X (or y); a scalar is refused without quoting it.

    (scikit-learn's message names the scalar, which would be the data.)
    """
    try:
        return num_samples(X)
    except TypeError as exc:
        if "got scalar" not in str(exc):
            raise
    raise TypeError(f"{name}: {what} is a scalar (not shown: it is a value of the data); "
                    f"expected {'a 2-D X' if what == 'X' else 'a 1-D y'}.")


def _rng(random_state):
    """A numpy Generator from ``random_state`` (None: seeded by the OS)."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        # 128 bits drawn from it: a 31-bit seed would leave 2**31 noise draws to try.
        return np.random.default_rng(random_state.randint(2**32, size=4, dtype=np.uint64))
    return np.random.default_rng(random_state)


def _duplicates_summed(X):
    """Validated X with a sparse matrix's duplicate stored entries summed.

    Summed here, before the charge (the fit sums them anyway): each entry was
    checked finite, their sum need not be (two entries of 1e308 released a
    NaN model after the charge), so a sum that is not raises a ValueError.
    """
    if not sp.issparse(X):
        return X
    X = canonical_rows(X)
    if not np.isfinite(X.data).all():
        raise ValueError(
            f"Input X contains infinity or a value too large for {X.dtype!r} "
            "(after summing duplicate entries of the sparse matrix).")
    return X


def _independent_child(random_state, *, os_entropy=False):
    """A generator of the same kind, seeded with 128 bits drawn from ``random_state``
    (and 128 bits of OS entropy with ``os_entropy=True``)."""
    entropy = [int(word) for word in _rng(random_state).integers(2**32, size=4,
                                                                   dtype=np.uint64)]
    if os_entropy:
        entropy += [int(word) for word in np.random.SeedSequence().generate_state(4)]
    seed = np.random.SeedSequence(entropy)
    if isinstance(random_state, np.random.RandomState):
        return np.random.RandomState(np.random.MT19937(seed))
    return np.random.default_rng(seed)


# Set while a search fits (see _clones_draw_nothing), in the thread that clones.
_SEARCHING = threading.local()
_GENERATORS = (np.random.Generator, np.random.RandomState)
# The estimators whose random_state is a generator, by id (hashing an estimator
# may fail or mix up equal ones), as weak references: at a fork, their
# generators become copies the parent and every sibling share.
_GENERATOR_HOLDERS = {}
# Copied generators: id(generator) -> {id(estimator): weak reference} of the
# estimators marked with it, so that a copy handed to another estimator
# (set_params, a search giving its fitted candidates the user's random_state
# back) stays marked as a copy while any of them still holds it.
_COPIED = {}
# Held while _COPIED changes: a holder's callback emptying and dropping a
# generator's entry between another thread's lookup and store orphaned the
# new holder (re-entrant: a callback can run in the thread holding it).
_COPIED_LOCK = threading.RLock()


def _is_copied(generator):
    # A holder that is alive and holds this very object: the id is not reused.
    return any(holder is not None and holder.__dict__.get("_copied_generator") is generator
               for holder in (ref() for ref in list(_COPIED.get(id(generator), {}).values())))


def _register_copy(generator, holder):
    key, holder_key = id(generator), id(holder)

    def forget(ref):
        with _COPIED_LOCK:
            holders = _COPIED.get(key)
            if holders is not None and holders.get(holder_key) is ref:
                del holders[holder_key]
                if not holders:
                    _COPIED.pop(key, None)

    ref = weakref.ref(holder, forget)
    with _COPIED_LOCK:
        _COPIED.setdefault(key, {})[holder_key] = ref


def _mark_generators_copied_after_fork():
    global _COPIED_LOCK
    _COPIED_LOCK = threading.RLock()  # another thread may have held it at the fork
    for ref in list(_GENERATOR_HOLDERS.values()):
        estimator = ref()
        if estimator is not None:
            estimator._mark_copied_generator()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_mark_generators_copied_after_fork)


def _clones_draw_nothing(fit):
    """Decorate a search's ``fit``: its clones leave the user's generators alone.

    A search clones its estimator a number of times that may depend on what
    it keeps secret (the random search's K).  Were each clone to draw its
    child generator from a generator the user gave the wrapped estimator,
    that generator's state would count the clones.  The search's clones need
    no generator of their own: every fit they make gets its seed from the
    search, and its probes draw no noise.  So during the search, clones
    copy the generator as scikit-learn's ``clone`` does, drawing nothing.
    """

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        previous = getattr(_SEARCHING, "active", False)
        _SEARCHING.active = True
        try:
            return fit(self, *args, **kwargs)
        finally:
            _SEARCHING.active = previous

    return wrapper


class _IndependentNoiseOnCloneMixin:
    """Clones of an estimator seeded with a generator draw independent noise.

    ``sklearn.base.clone`` deep-copies a ``Generator`` or ``RandomState``
    given as ``random_state``, so every clone would replay the same stream:
    ``cross_val_score``, ``GridSearchCV`` or a ``VotingClassifier`` would then
    fit models with the same noise on overlapping data, whose differences
    cancel it, while the accountant charges them as independent releases.
    Here each clone gets its own generator instead, seeded with 128 bits
    drawn from the original's (which advances it): a seeded generator still
    makes a sequence of clones reproducible.  An integer seed is kept as
    given (it is for reproducibility, not for releases: docs/randomness.md).

    A generator that arrived by unpickling (or ``copy.deepcopy``) is a copy
    of one that other copies share, in the same state: a joblib worker
    process gets one with each task, and ``MultiOutputRegressor`` or
    ``OneVsRestClassifier`` clone it there, once per output or class, so
    their clones drew the same child seed and every output's model the same
    noise.  Clones of such a copy mix 128 bits of OS entropy into their seed:
    independent noise, not reproducible.

    The mark (``_copied_generator``: the very object ``random_state`` holds)
    is set on unpickling and, for the estimators alive at the time, in a
    forked child; it is never pickled, and any new ``random_state``
    (``set_params``, a search putting the user's back) drops it.
    """

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name == "random_state" and self.__dict__.get("_copied_generator") is not value:
            self.__dict__.pop("_copied_generator", None)
            if isinstance(value, _GENERATORS):
                if _is_copied(value):  # a copy handed over stays a copy
                    self._mark_copied_generator()
                key = id(self)
                if key not in _GENERATOR_HOLDERS:
                    _GENERATOR_HOLDERS[key] = weakref.ref(
                        self, lambda ref, key=key: _GENERATOR_HOLDERS.pop(key, None))

    def _mark_copied_generator(self):
        generator = self.__dict__.get("random_state")
        if isinstance(generator, _GENERATORS):
            self.__dict__["_copied_generator"] = generator
            _register_copy(generator, self)

    def __getstate__(self):
        # A copy: from Python 3.11 object.__getstate__ returns __dict__ itself,
        # and popping there unmarked the live estimator being pickled.
        state = dict(super().__getstate__())
        state.pop("_copied_generator", None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._mark_copied_generator()

    def __sklearn_clone__(self):
        new = super().__sklearn_clone__()
        state = getattr(self, "random_state", None)
        if isinstance(state, _GENERATORS) and not getattr(_SEARCHING, "active", False):
            copied = state is self.__dict__.get("_copied_generator")
            new.random_state = _independent_child(state, os_entropy=copied)
        return new


class _BaseDPGLM(_IndependentNoiseOnCloneMixin, _DefaultAccountantMixin, BaseEstimator):
    """Base class of the DP GLM estimators; not for direct use."""

    _parameter_constraints: dict = {
        "epsilon": [Interval(Real, 0, np.inf, closed="right")],
        "delta": [Interval(Real, 0, 1, closed="neither"), None],
        "feature_norm": [Interval(Real, 0, np.inf, closed="neither")],
        "norm_bound": [Interval(Real, 0, np.inf, closed="neither"), StrOptions({"auto"})],
        "fit_intercept": ["boolean"],
        # At most a million steps: beyond, a fit charged at once would run
        # for hours (and max_iter = 2**64 failed after the charge).
        "max_iter": [Interval(Integral, 1, MAX_ITER, closed="both"), None],
        "method": [StrOptions(set(MECHANISMS))],
        "projection_dim": [Interval(Integral, 1, None, closed="left"), None],
        "l2_regularization": [Interval(Real, 0, None, closed="neither"), None],
        "random_state": ["random_state", np.random.Generator],
        "accountant": [PrivacyAccountant, None],
    }

    # (Under scikit-learn's metadata routing, score's sample_weight request is
    # left unset, as scikit-learn's estimators leave theirs: False broke
    # Pipeline.score, which routes sample_weight=None always, and WARN warned
    # on every Pipeline.score.  A sample_weight routed by cross_validate
    # without set_score_request then fails when the first fold is scored,
    # after its fit: user guide, section 3.)

    # -- hooks for concrete estimators ------------------------------------
    def _encode_targets(self, y):
        """Return ``(loss, y_encoded, y_bound, y_offset)``; set label attributes."""
        raise NotImplementedError

    def _check_targets(self, y, *, warn=True):
        """Raise on labels the estimator cannot train on (before any charge)."""
        raise NotImplementedError

    def _public_loss(self, classes=None):
        """``(loss, y_bound, y_offset)`` from the parameters (and a classifier's classes)."""
        raise NotImplementedError

    def _validated(self, X, y, *, warn=True):
        """``(X, y)`` validated for ``fit``; bad input raises here, before the charge.

        Sets ``n_features_in_`` (and ``feature_names_in_``) for this X, as
        scikit-learn's ``validate_data`` does.  ``warn=False`` silences the
        warning of a classifier reading its classes from y.
        """
        # Finiteness is checked whatever scikit-learn's assume_finite says: a
        # NaN or inf would be trained on after the charge and released.
        with config_context(assume_finite=False):
            X, y = _validate_data_quietly(self, X, y, accept_sparse="csr",
                                          dtype=[np.float64, np.float32],
                                          y_numeric=not self._is_classifier())
        if not self._is_classifier() and y.dtype.kind == "f" and not np.all(np.isfinite(y)):
            # scikit-learn's NaN check passes None in an array of objects,
            # which its conversion to numbers then makes a NaN: trained on,
            # after the charge, it gave a model of NaNs (adversarial check).
            raise ValueError(f"{type(self).__name__}: Input y contains NaN or infinity (a "
                             "missing value such as None); drop or impute those rows first.")
        X = _duplicates_summed(X)
        self._check_targets(y, warn=warn)
        return X, y

    # -- the template -------------------------------------------------------
    def _accountant(self):
        if self.accountant is not None:
            return self.accountant
        return self._default_accountant()

    def _accountant_delta(self):
        return self._accountant().delta

    def _unused_options(self, method, n_features):
        """Warnings that an option does nothing for the method that trains."""
        unused = []
        if self.projection_dim is not None and method != "jl":
            unused.append(f"projection_dim is used by method='jl' only, not {method!r}")
        elif self.projection_dim is not None and self.projection_dim >= n_features:
            unused.append(f"projection_dim={self.projection_dim} >= n_features={n_features}: "
                          "'jl' does not project and trains as Noisy GD")
        if self.max_iter is not None and method == "output_perturbation":
            unused.append("max_iter is used by method='noisy_gd' and 'jl' only, not "
                          "'output_perturbation' (its solver runs to a certified accuracy)")
        if self.l2_regularization is not None and method != "output_perturbation":
            unused.append("l2_regularization is used by method='output_perturbation' only, "
                          f"not {method!r}")
        return [f"{type(self).__name__}: {message}." for message in unused]

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, **fit_params):
        """Fit the model with an (epsilon, delta)-DP guarantee.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data. Rows with norm above ``feature_norm`` are scaled
            down to it (clipping); nothing is computed from X without noise.
        y : array-like of shape (n_samples,)
            Targets.
        **fit_params : none accepted
            There is no ``sample_weight``: a weight scales one record's
            influence, hence the sensitivity the noise is calibrated to.
            Any keyword raises a TypeError saying so, before anything is
            read or charged.

        Returns
        -------
        self : object
            Fitted estimator.

        Raises
        ------
        BudgetExceededError
            If the accountant cannot afford (epsilon, delta); nothing is
            trained and the estimator is left as it was (unfitted, or with
            its previous fit).
        """
        if fit_params:
            raise TypeError(
                f"{type(self).__name__}.fit takes X and y only; got {sorted(fit_params)}. "
                "There is no sample_weight: a weight scales one record's influence, hence "
                "the sensitivity the noise is calibrated to.")
        # (y is checked first: norm_bound="auto" reads it first.)
        n_samples = _fit_n_samples(X, y, type(self).__name__)
        accountant = self._accountant()
        epsilon, delta = target_privacy(self, n_samples)
        warn_large_delta(self, delta, n_samples)
        # Fail fast, before any data value is read: every mechanism is
        # calibrated to exactly (epsilon, delta), i.e. one mu-GDP release.
        _check_release(accountant, [GaussianEvent(mu=gdp_mu(epsilon, delta))], epsilon, delta)
        if isinstance(self.norm_bound, str):
            if self.norm_bound != "auto":  # (under skip_parameter_validation: any text ran "auto")
                raise InvalidParameterError(
                    f"The 'norm_bound' parameter of {type(self).__name__} must be a float in the "
                    f"range (0.0, inf) or 'auto'. Got {self.norm_bound!r} instead.")
            # "auto": the paper's private grid search over B (SPEC 5), one
            # Gaussian event of the same total cost; the search validates the
            # data before it charges anything, as the direct path does here.
            from .model_selection._auto import fit_auto_norm_bound

            return fit_auto_norm_bound(self, X, y)

        # A fit that fails leaves the estimator as it was, unfitted or with its
        # previous fit intact, whether it was refused before the charge (bad
        # input, a bound, an option under warnings-as-errors, or another fit
        # on the same accountant got there first) or failed after it (the
        # charge stays recorded): nothing read from this X and y stays behind.
        state = dict(self.__dict__)
        try:
            X, y = self._validated(X, y)
            # numpy's floating-point errors are ignored from here to the
            # release: under a process-wide np.seterr(all="raise") or "warn",
            # whether one occurs (say, a product underflowing) depends on one
            # record.
            with np.errstate(all="ignore"):
                loss, y_enc, y_bound, y_offset = self._encode_targets(y)
            sparse = sp.issparse(X)
            problem, method, calibration = self._public_plan(
                X.shape[0], X.shape[1], loss, y_bound, epsilon, delta, sparse=sparse)
            for message in self._unused_options(method, problem.n_features):
                warn_user(message, UserWarning)
            # Before the charge: a random_state numpy refuses (under
            # skip_parameter_validation) then fails with nothing spent.
            rng = _rng(self.random_state)
            calibration = draw_public(method, problem, calibration, rng, sparse=sparse)
            accountant._record(calibration.events,
                               source=f"{type(self).__name__}(method={method!r})")
            with np.errstate(all="ignore"):
                theta, n_iter = train(method, GLMObjective(problem, X, y_enc), calibration,
                                      rng)
                # (float32 X: a noisy theta beyond float32's range becomes inf
                # here, not an error after the charge under np.seterr("raise").)
                self._set_coef(theta, problem, y_offset, X.dtype)
            self.norm_bound_ = problem.norm_bound
            self.n_iter_ = int(n_iter)
            self.method_ = method
            self.privacy_events_ = list(calibration.events)
            self.privacy_spent_ = (float(compose(self.privacy_events_, delta)), delta)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(state)
            raise
        return self

    def _public_plan(self, n_samples, n_features, loss, y_bound, epsilon, delta,
                     sparse=None, copies=1):
        """``(problem, method, calibration)``: the half of fit that reads no data.

        Everything here is a function of public quantities (the shape and
        storage of X, the parameters, the budget); a bound or option it
        refuses is refused before the charge, and the searches call it for
        each candidate (:meth:`_check_public_plan`) before theirs.
        ``sparse``: whether X is sparse (None: not known, the working memory
        of either storage is reserved); ``copies``: how many such fits a
        search runs at once (the memory of each is reserved).
        """
        if self.max_iter is not None and not (
                isinstance(self.max_iter, Integral) and not isinstance(self.max_iter, bool)
                and 1 <= self.max_iter <= MAX_ITER):
            # (Also under skip_parameter_validation: 2**40 steps ran for ever,
            # and max_iter=2.5 ran 2.)
            raise InvalidParameterError(
                f"The 'max_iter' parameter of {type(self).__name__} must be an int in the "
                f"range [1, {MAX_ITER}] or None. Got {self.max_iter!r} instead.")
        try:
            problem = PublicProblem(
                loss=loss,
                n_samples=n_samples,
                n_features=n_features,
                feature_norm=float(self.feature_norm),
                intercept_feature=self._intercept_feature(n_features),
                y_bound=y_bound,
                norm_bound=float(self.norm_bound),
            )
            max_iter = (default_steps(problem, gdp_mu(epsilon, delta))
                        if self.max_iter is None else int(self.max_iter))  # True is 1
            # "auto" is resolved by a pure rule of public quantities (SPEC 4.4).
            method = resolve(self.method, problem, epsilon, delta,
                             projection_dim=self.projection_dim)
            calibration = calibrate(method, problem, epsilon, delta, max_iter=max_iter,
                                    projection_dim=self.projection_dim,
                                    l2=self.l2_regularization)
        except PublicBoundsError:
            raise ValueError(self._bounds_message()) from None
        # Memory the training will need, sized by public quantities: a fit (or
        # a search's candidate) too large for it fails here, before the charge.
        reserve_working_memory(method, problem, calibration, sparse=sparse, copies=copies)
        return problem, method, calibration

    def _bounds_message(self):
        """A refused public bound, in the words of the estimator's own parameters."""
        params = self.get_params(deep=False)
        given = ", ".join(f"{name}={params[name]!r}" for name in
                          ("feature_norm", "norm_bound", "y_bound", "threshold")
                          if name in params)
        return (
            f"The public bounds of {type(self).__name__} are too large or too small: "
            f"{given}. Each bound, and each bound the training derives from them (the "
            f"norm of a row with its intercept feature; twice norm_bound for "
            f"method='jl'; the default Huber threshold), must lie between "
            f"{1 / _MAX_BOUND:g} and {_MAX_BOUND:g}, and the gradient bound and "
            "smoothness they give must be finite. Rescale the data so that the bounds "
            "are moderate.")

    def _check_public_plan(self, n_samples, n_features, epsilon, delta, classes=None,
                           sparse=None, copies=1):
        """Raise what :meth:`_public_plan` would raise in ``fit``; return the method.

        ``sparse=None`` (X's storage not known) reserves the memory of either;
        ``copies`` fits running at once reserve ``copies`` times as much."""
        loss, y_bound, _ = self._public_loss(classes)
        return self._public_plan(n_samples, n_features, loss, y_bound, epsilon, delta,
                                 sparse, copies)[1]

    def _intercept_feature(self, n_features):
        """The constant public feature c appended to each row (SPEC 1).

        ``c = feature_norm / 2``.  c enters the sensitivity and the step
        through ``||x_aug|| <= sqrt(X**2 + c**2)`` (1.12 X here, 1.41 X with
        ``c = X``), and the intercept b costs ``|b| / c`` of the norm budget
        B.  A model (w, b) needs scores up to ``||theta|| ||x_aug||``, which is
        smallest when ``c / X = |b| / ||w||`` (Cauchy-Schwarz); that ratio is
        not public, and intercepts comparable to half the coefficient norm
        are the common case for centered labels and standardized features.
        Measured (benchmarks/utility.py and rates.py): c = X / 2 is better
        than c = X on every data set at epsilon >= 0.3 (noise falls by about
        a third), and c = 0.3 X starts to lose on diabetes, whose intercept
        is large.
        """
        if not self.fit_intercept:
            return 0.0
        return 0.5 * float(self.feature_norm)

    def _set_coef(self, theta, problem, y_offset, dtype=np.float64):
        """``coef_`` and ``intercept_`` from theta, in X's dtype (float32 X: float32 model,
        as scikit-learn's linear models; training itself runs in float64)."""
        d = problem.n_features
        coef = theta[:d].T  # (K, d)
        intercept = (problem.intercept_feature * theta[d] if problem.fit_intercept
                     else np.zeros(theta.shape[1]))
        self.coef_ = coef.astype(dtype, copy=False)
        self.intercept_ = (intercept + y_offset).astype(dtype, copy=False)

    def _is_classifier(self):
        return False

    def _decision(self, X):
        check_is_fitted(self)
        X = _validate_data_quietly(self, X, accept_sparse="csr",
                                   dtype=[np.float64, np.float32], reset=False)
        return np.asarray(X @ self.coef_.T) + self.intercept_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.non_deterministic = False  # deterministic given random_state
        return tags
