"""Checks of X and y before a fit charges anything.

``validate_data`` wrapped so that bad input is refused before the charge and
no error quotes a value of the data: dates, times and durations (which
numpy and scikit-learn would silently turn into nanoseconds since 1970) are
refused, naming the column; pandas' missing values get a clear error; the
errors scikit-learn and numpy raise with values in them are replaced by
ones that show none.  Everything here runs on the data before the charge
and decides nothing but whether the fit goes on.
"""

import datetime
import re
import types
from numbers import Number

import numpy as np
import scipy.sparse as sp
from sklearn import get_config
from sklearn.utils.validation import validate_data

from ._objective import canonical_rows
from ._sklearn_compat import num_samples


def _refuse_array_api(data, name, what):
    """Refuse array-API input (torch, array-api-strict, ...) under scikit-learn's
    ``array_api_dispatch=True``: the estimators compute with numpy and scipy
    only, and scikit-learn's check failed on it with a TypeError from inside
    the array library ("'dtype' must be a dtype").  Without dispatch such an
    array is converted with ``np.asarray``, as scikit-learn converts it."""
    if (get_config().get("array_api_dispatch", False) and not isinstance(data, np.ndarray)
            and not sp.issparse(data) and hasattr(data, "__array_namespace__")):
        raise TypeError(
            f"{name}: {what} is an array of the array API ({type(data).__module__}."
            f"{type(data).__name__}), which is not supported: the estimators compute with "
            "numpy and scipy only. Convert it with np.asarray (on the CPU) first, or turn "
            "array_api_dispatch off. Nothing was charged.")


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
        _refuse_array_api(data, name, what)
        data = _dtyped(data, name, what)
        if data is None:  # checked here already, or refused by scikit-learn's own check
            continue
        _refuse_temporal(data, name, what)
        _refuse_pandas_missing(data, name, what)
        if what == "X" and _is_text_dtype(getattr(data, "dtype", None)):
            # scikit-learn's own check (dtype="numeric") refuses text arrays;
            # the float dtypes asked for here would convert "1.5" silently.
            raise ValueError(f"{name}: X is an array of text; X must hold numbers. Convert "
                             "it to numbers explicitly first.")
    try:
        with np.errstate(all="ignore"):
            return validate_data(estimator, *args, **kwargs)
    except (ValueError, TypeError) as exc:
        error = _unquoted(exc, name)
        # numpy's "could not convert string to float" and pandas' "Cannot cast
        # str dtype to float64" (a frame of extension dtypes): name the columns.
        columns = (_non_numeric_columns(args[0]) if args and re.match(
            r"could not convert|Cannot cast \S+ dtype to float", str(exc)) else [])
        if error is None and not columns:
            raise
        if columns:
            error = ValueError(
                f"{name}: X and y must be numeric; a value could not be converted to "
                "float (not shown here: it is a value of the data). If it is in X: the "
                f"columns of X whose dtype is not numeric are {', '.join(columns)}; encode "
                "them as numbers first, "
                "with public parameters (OneHotEncoder(categories=[...]) for categories: "
                "user guide section 6).")
    raise error


def shown_dtype(dtype):
    """``dtype`` as an error message may show it: numpy's text dtypes without
    their width (``<U16``: the length of the longest value, data)."""
    return "text" if _is_text_dtype(dtype) else str(dtype)


def _is_text_dtype(dtype):
    """Whether ``dtype`` is one of numpy's text dtypes: fixed-width str and
    bytes (kinds ``U``, ``S``) or numpy 2's variable-width ``StringDType`` (``T``)."""
    return getattr(dtype, "kind", None) in ("U", "S", "T")


def _column_names(X):
    """The column names of a pandas, polars or pyarrow table (its schema), or None."""
    columns = _frame_schema(X)
    return None if columns is None else [str(name) for name, _ in columns]


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


def _frame_schema(data):
    """``[(column name, dtype), ...]`` of a pandas, polars or pyarrow frame, or
    None.  The schema, not the values: the same for neighbouring data sets."""
    dtypes = getattr(data, "dtypes", None)  # a pandas DataFrame
    schema = getattr(data, "schema", None)
    if hasattr(dtypes, "items"):
        return list(dtypes.items())
    if hasattr(schema, "items"):  # a polars DataFrame
        return list(schema.items())
    if hasattr(schema, "names") and hasattr(schema, "types"):  # a pyarrow Table
        return list(zip(schema.names, schema.types, strict=True))
    return None


def _schema(data):
    """:func:`_frame_schema`, or ``[(name, dtype)]`` of one array or Series;
    None for other data."""
    columns = _frame_schema(data)
    if columns is None and hasattr(data, "dtype"):
        return [(getattr(data, "name", None), data.dtype)]
    return columns


def _non_numeric_columns(data):
    """Names and dtypes of the columns of a frame whose dtype is not numeric
    (objects, strings, categories), as ``"'city' (category)"``; [] for other data."""
    columns = _schema(data)
    if not columns or (len(columns) == 1 and columns[0][0] is None):
        return []
    shown = []
    for column, dtype in columns:
        if type(dtype).__module__.startswith("pyarrow"):
            import pyarrow.types as pa_types

            numeric = any(check(dtype) for check in (
                pa_types.is_integer, pa_types.is_floating, pa_types.is_boolean,
                pa_types.is_decimal))
        else:
            try:
                numeric = np.dtype(dtype).kind in "biuf"
            except TypeError:  # pandas' extension and polars' dtypes
                numeric = bool(getattr(dtype, "_is_numeric", False)) or (
                    callable(getattr(dtype, "is_numeric", None)) and dtype.is_numeric())
        if not numeric:
            shown.append(f"{column!r} ({dtype})")
    return shown


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
    frame = hasattr(getattr(data, "dtypes", None), "items")  # a pandas DataFrame
    polars_frame = not frame and hasattr(getattr(data, "schema", None), "items")
    columns = _schema(data)
    if columns is None:
        return
    # Columns of objects are looked at in one block (one pass, however many
    # columns), and one by one only to name the culprit.  A pandas categorical
    # column by its categories (its schema: every value is one of them, or
    # missing), without reading its values.
    categorical = {i for i, (_, dtype) in enumerate(columns) if _categories(dtype) is not None}
    objects = [i for i, (_, dtype) in enumerate(columns)
               if _of_python_objects(dtype) and i not in categorical]

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
        elif position in categorical and _temporal_categories(_categories(dtype)):
            found = "holds dates, times, durations, periods or intervals (its categories)"
        elif position in suspects:
            found = "holds dates, times or durations"
        else:
            continue
        raise _temporal_error(name, what, where, found)


def _categories(dtype):
    """The categories of a pandas ``CategoricalDtype`` (None for other dtypes)."""
    if type(dtype).__name__ == "CategoricalDtype" and type(dtype).__module__.startswith("pandas"):
        return dtype.categories
    return None


def _temporal_categories(categories):
    """Whether pandas categories (an Index) are, or hold, dates, times, durations,
    periods or intervals."""
    return _temporal(categories.dtype) or (
        _of_python_objects(categories.dtype)
        and _holds_temporal_objects(np.asarray(categories, dtype=object)))


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
                          "converted to float (not shown here: it is a value of the data). "
                          "If the text is in X, turn it into numbers first with a public, "
                          "row-wise step in a Pipeline (a HashingVectorizer for documents, a "
                          "OneHotEncoder given its categories for a text column); a regressor's "
                          "y must be numbers.")
    if message.startswith("setting an array element with a sequence"):
        return ValueError(f"{name}: X and y must be arrays of numbers; an entry is itself "
                          "a sequence (rows of different lengths, or cells holding lists).")
    head, marker, _ = message.partition("contains NaN.")
    if marker and head.startswith("Input") and "does not accept missing values" in message:
        # scikit-learn's advice (a non-DP estimator, an imputer in the
        # pipeline) would fit something on the private data without noise.
        return ValueError(
            f"{name}: {head}{marker} Drop those rows, or fill them with values chosen "
            "without looking at this data: an imputer fitted on it (SimpleImputer's mean, "
            "say) computes its fill values from the private data without noise.")
    # pandas' pd.NA, met by the NaN check, or converted to float among objects
    # (an object array or a list holding it).
    if message == "boolean value of NA is ambiguous" or (
            message.startswith("float() argument must be") and "NAType" in message):
        # (scikit-learn's own steps fail on pd.NA too: a SimpleImputer with its
        # default missing_values raises this very error.)
        return ValueError(f"{name}: Input contains pandas' missing value pd.NA, which "
                          "scikit-learn's steps do not take by default (a SimpleImputer "
                          "neither, unless given missing_values=pd.NA): replace it with np.nan "
                          "first (np.where(pd.isna(X), np.nan, X)), then drop those rows or "
                          "impute with public values, or put SimpleImputer(missing_values=pd.NA, "
                          "strategy='constant', fill_value=...) first in the Pipeline.")
    return None


def _fit_n_samples(X, y, name):
    """The number of rows of a ``fit``'s X; y=None is refused in scikit-learn's words."""
    if y is None:
        raise ValueError(f"This {name} estimator requires y to be passed, "
                         "but the target y is None.")
    check_sparse_structure(X)  # (before anything indexes or converts it)
    return _n_samples(X, name)


def _n_samples(X, name, what="X"):
    """The number of rows of X (or y); a scalar is refused without quoting it.

    (scikit-learn's message names the scalar, which would be the data.)  A
    ValueError, as scikit-learn's check_array raises for a scalar or None.
    """
    expected = "a 2-D X" if what == "X" else "a 1-D y"
    if X is None:
        raise ValueError(f"{name}: {what} is None; expected {expected}.")
    scalar = isinstance(X, (Number, np.generic, str, bytes)) or (
        isinstance(X, np.ndarray) and X.ndim == 0)
    if not scalar:
        try:
            return num_samples(X)
        except TypeError as exc:
            if "got scalar" not in str(exc):
                raise
    raise ValueError(f"{name}: {what} is a scalar (not shown: it is a value of the data); "
                     f"expected {expected}.")


def check_sparse_structure(X):
    """Refuse a CSR, CSC or COO matrix whose index arrays are invalid (changed
    in place: scipy checks them only when the matrix is built), before
    anything converts it: a CSC matrix's conversion to CSR wrote out of
    bounds through an index of -1 or 10**6 (heap corruption, a crash), and
    a fit trained on what it left.  Other formats are checked by scipy as it
    converts them."""
    if not sp.issparse(X):
        return
    if X.ndim != 2:
        # scipy's sparse arrays may be 1-D (or n-D COO); the structure check
        # below assumed two axes and failed with an IndexError of its own.
        raise ValueError(f"Expected 2D input, got a sparse array of shape {X.shape} instead: "
                         "reshape it to (n_samples, n_features). Nothing was charged.")
    if X.format in ("csr", "csc"):
        major, minor = X.shape if X.format == "csr" else X.shape[::-1]
        indptr, indices = X.indptr, X.indices
        nnz = int(indptr[-1]) if len(indptr) else -1
        ok = (len(indptr) == major + 1 and indptr[0] == 0 and bool(np.all(np.diff(indptr) >= 0))
              and nnz <= min(len(indices), len(X.data))
              and (nnz == 0 or (indices[:nnz].min() >= 0 and indices[:nnz].max() < minor)))
    elif X.format == "coo":
        row, col = X.row, X.col
        ok = len(row) == len(col) == len(X.data) and (len(row) == 0 or (
            row.min() >= 0 and row.max() < X.shape[0] and col.min() >= 0
            and col.max() < X.shape[1]))
    else:
        return
    if not ok:
        raise ValueError("Input X is a malformed sparse matrix: its index arrays are "
                         "inconsistent or point outside its shape (changed in place after the "
                         "matrix was built?). Nothing was charged.")


def _duplicates_summed(X):
    """Validated X with a sparse matrix's duplicate stored entries summed.

    Summed here, before the charge (the fit sums them anyway): each entry was
    checked finite, their sum need not be (two entries of 1e308 released a
    NaN model after the charge), so a sum that is not raises a ValueError.
    """
    if not sp.issparse(X):
        return X
    X = X.tocsr()
    check_sparse_structure(X)  # (a preprocessing step's output is checked here too)
    X = canonical_rows(X)
    if not np.isfinite(X.data).all():
        raise ValueError(
            f"Input X contains infinity or a value too large for {X.dtype!r} "
            "(after summing duplicate entries of the sparse matrix).")
    return X
