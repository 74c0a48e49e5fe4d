"""Probes of the preprocessing steps, run before a search's charge.

Before anything is charged, a search fits the steps before the DP estimator
on the data (on all of it and on each training part) and validates their
output as the DP estimator will see it, so that bad input fails while
nothing is spent.  What the probes warn is not shown, and their errors are
replaced by messages that quote no value or private count of the data.
"""

import numpy as np
import scipy.sparse as sp
from joblib import parallel_config
from sklearn import config_context
from sklearn.base import clone
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils import check_array

from .._sklearn_compat import safe_indexing
from .._validation import _column_names, _duplicates_summed, _unquoted
from .._warn import silenced
from ._pickling import pickling_failure
from ._slot import _fresh, _runs, _step_seeds, _transform

#: Beginnings of scikit-learn's input-validation messages that quote no value
#: of the data, nor a count that a preprocessing step could make private.
_SAFE_STEP_ERRORS = ("Input X contains", "Input contains", "Input y contains",
                     "Found array with dim",
                     # OneHotEncoder's, from its settings alone (sparse_output
                     # with pandas or polars output).  (Not set_output's "The
                     # transformer outputs a scipy sparse matrix": whether a
                     # ColumnTransformer's output is sparse depends on its density.)
                     "Pandas output does not support sparse data",
                     "Polars output does not support sparse data")

#: Beginnings of scikit-learn's refusals of sparse input as such (check_array's
#: and StandardScaler's), shown when the first step raises them on a sparse X
#: (:func:`_refuses_sparse_layout`).
_SPARSE_LAYOUT_ERRORS = ("Sparse data was passed", "Cannot center sparse matrices",
                         "A sparse matrix was passed, but dense data is required")

#: Beginning of numpy's message for an object in X that is not a number: it
#: names the object's type only (the bare estimator raises it too).
_SAFE_TYPE_ERRORS = ("float() argument must be",)

#: Beginnings of scikit-learn's messages that quote shapes or sample counts:
#: public for the data given, private after a step that drops rows or
#: selects features on the data.
_SHAPE_ERRORS = ("Found array with", "Found input variables with inconsistent")


class _UnusableOutput(Exception):
    """The steps' output on a part is one the DP estimator cannot take (worded generically)."""


def _usable_output(Xt, fitted_on=None, rows=None):
    """``(n_features, column names or None)`` of ``Xt``; raises
    :class:`_UnusableOutput` unless the DP estimator can be fitted on ``Xt``
    (as its ``_validated`` checks X), or, given what it was ``fitted_on``
    (such a pair), predict on ``Xt``: as many features, and the same column
    names in the same order (a ``pd.get_dummies`` step gave the validation
    part other columns of the same number, and predict quoted them, values
    of single records, after the charge); and ``rows`` rows if given (a step
    adding or dropping rows by their values withheld the selection after the
    charge, whether it did telling of those records)."""
    columns = _column_names(Xt)
    try:
        with config_context(assume_finite=False):
            Xt = _duplicates_summed(check_array(Xt, accept_sparse="csr",
                                                dtype=[np.float64, np.float32]))
    except (ValueError, TypeError):
        raise _UnusableOutput() from None
    if fitted_on is not None and (Xt.shape[1], columns) != fitted_on:
        raise _UnusableOutput()
    if rows is not None and Xt.shape[0] != rows:
        raise _UnusableOutput()
    return Xt.shape[1], columns


def _probe_head(head, X, y, parts, dumps, refit, steps_seed):
    """Fit the preprocessing ``head`` on X and on each training part.

    Returns ``(Xt, widths)``: X transformed, and the numbers of features the
    head gives the training parts (a step fitted on the data, such as
    ``PCA(n_components=0.9)``, can give a part more than all rows), at
    which the candidates' public plans are checked too.

    Probes before the charge: what they warn is not shown (it may depend on
    one record, and in the random search on K; the fits warn later).  Their
    errors are replaced by ones that quote no data: a step's own message may
    (a ``OneHotEncoder`` names the unknown category, often the rarest, most
    identifying value; a lookup in a ``FunctionTransformer`` raises a
    ``KeyError`` naming the key; a step after one that drops rows states
    the private number of rows kept).  Nor do they say which setting of the
    grid failed, or how: where a setting starts to fail can depend on the
    data (a ``VarianceThreshold`` grid would bracket the largest variance).

    ``dumps``: how worker processes will pickle the fitted candidates back
    (None: no worker processes); each head fitted on a part goes through it,
    and with ``refit`` the head fitted on all rows too (the refit runs in a
    worker as well), and one that cannot (a step keeping a lock) is refused
    here.

    ``steps_seed``: the steps' ``random_state`` left at None are seeded from
    it (:func:`~._slot._step_seeds`), as in the candidates and the refit:
    a random step draws here what it will draw there.
    """
    steps = ", ".join(type(step).__name__ for _, step in head.steps)
    fitted = []
    try:
        # (joblib's parallel_config(verbose=...) off, as in the candidates: with a
        # step parameter drawn from a distribution there is one probe per drawn
        # candidate, and the progress lines would count the random search's K.)
        with silenced(), np.errstate(all="ignore"), parallel_config(verbose=0):
            whole = _seeded(clone(head), steps_seed)
            Xt = whole.fit_transform(_fresh(X, head.steps), y)  # (a step may work in place)
            if refit and dumps is not None:
                fitted.append(whole)
            widths = set()
            for train, val in parts:
                # What the DP estimator gets, in a candidate's fit and in its
                # validation: a step can leave a training part with no
                # feature, or scale a validation part to inf.
                part = _seeded(clone(head), steps_seed)
                fitted_on = _usable_output(part.fit_transform(safe_indexing(X, train),
                                                              safe_indexing(y, train)),
                                           rows=len(train))
                _usable_output(_transform(part, safe_indexing(X, val)), fitted_on, rows=len(val))
                widths.add(fitted_on[0])
                if dumps is not None:
                    fitted.append(part)
    except Exception as exc:
        safe = (isinstance(exc, ValueError) and str(exc).startswith(_SAFE_STEP_ERRORS)
                or isinstance(exc, TypeError) and str(exc).startswith(_SAFE_TYPE_ERRORS)
                or _refuses_sparse_layout(head, X, exc))
        # A new error, raised outside this block: the original stays out of
        # its context (a step may have raised it while handling another).
        error = type(exc)(str(exc)) if safe else _unquoted(
            exc, f"the preprocessing steps ({steps})") or ValueError(
            f"The preprocessing steps before the DP estimator ({steps}) failed on the data, "
            "or gave an output the DP estimator cannot take (no feature, a NaN or an inf), "
            "on all of it or on a training or validation part of the search, for some "
            "setting of the grid, before anything was charged. What failed is not shown: it "
            "may tell values of the data. Check the grid's settings against the data's public "
            "shape, or fit the steps on the data yourself to see why.")
    else:
        for part in fitted:
            try:
                dumps(part)
            except Exception as exc:
                error = TypeError(
                    f"The preprocessing steps before the DP estimator ({steps}), fitted on "
                    f"the data, cannot be pickled ({pickling_failure(exc)}), which the "
                    "search's worker processes need to send the fitted candidates back "
                    "(n_jobs > 1 on a process backend). Nothing was charged. Use n_jobs=1 or "
                    "joblib's threading backend.")
                break
        else:
            return Xt, widths
    raise error


def _refuses_sparse_layout(head, X, exc):
    """Whether ``exc`` is the first step's refusal of a sparse X as such.

    Only its layout, public, decides that: the message is one of
    :data:`_SPARSE_LAYOUT_ERRORS` and the first step (the one that sees X as
    given) raises the very same on zeros of X's shape, format and dtype.  A
    message from a later step could follow a choice made on the data (a
    ``ColumnTransformer``'s dense or sparse output), and a step failing
    alike on zeros in general does not fail alike on the data: on zeros
    every ``VarianceThreshold`` setting fails, on the data the first that
    does brackets the largest variance.
    """
    if not (sp.issparse(X) and str(exc).startswith(_SPARSE_LAYOUT_ERRORS)):
        return False
    first = head
    while isinstance(first, Pipeline):  # (a nested Pipeline's first step sees X too)
        steps = [step for _, step in first.steps if _runs(step)]
        if not steps:
            return False
        first = steps[0]
    if not _checks_layout_first(first):
        return False
    try:
        with silenced(), np.errstate(all="ignore"), parallel_config(verbose=0):
            clone(first).fit_transform(type(X)(X.shape, dtype=X.dtype))
    except Exception as again:
        return type(again) is type(exc) and str(again) == str(exc)
    return False


def _checks_layout_first(step):
    """Whether ``step`` is a scikit-learn step that refuses a sparse X before
    any code of the user's, or any choice made on the data, can run: a
    ``FunctionTransformer`` that validates without accepting sparse input
    (its function runs after the check), or a step of another scikit-learn
    class whose parameters are plain values.  Not passthrough, a user's
    class (it may raise the message on some values only), a composite (its
    parts may see input made from the data), nor a step holding an
    estimator or a function (``SelectFromModel(user_estimator)``)."""
    if not type(step).__module__.startswith("sklearn."):
        return False
    if isinstance(step, FunctionTransformer):
        return bool(step.validate) and not step.accept_sparse

    def plain(value):
        return value is None or isinstance(value, (bool, int, float, str)) or (
            isinstance(value, (tuple, list)) and all(map(plain, value)))

    return all(plain(value) for value in step.get_params(deep=False).values())


def _seeded(head, steps_seed):
    """``head`` with the ``random_state`` its steps leave at None seeded from
    ``steps_seed`` (None: as it is)."""
    if steps_seed is not None:
        head.set_params(**_step_seeds(head.steps, steps_seed))
    return head


def _validated_after(head, probe, Xt, y):
    """``probe._validated(Xt, y)``; after preprocessing, its shape errors quote no count."""
    try:
        return probe._validated(Xt, y, warn=False)
    except ValueError as exc:
        if head is None or not str(exc).startswith(_SHAPE_ERRORS):
            raise
        error = ValueError(
            f"{type(probe).__name__} cannot be fitted on the output of the preprocessing "
            "steps before it (too few samples or features, or a number of rows other than "
            "y's); the counts are not shown: after preprocessing they may depend on the data.")
    raise error
