"""A differentially private score of a fitted model on private data.

A test score computed on records that are themselves private (a held-out
part of the data set) is a statistic of those records; published as is, it
is outside every guarantee of the fits.  :func:`dp_score` releases it with
Gaussian noise instead, charged to the accountant like a fit.

Privacy.  The score is the mean of per-record losses clipped to ``[0, b]``
with a public ``b`` (the searches' validation scores,
:mod:`._scores`), so replacing one of the n records moves it by at most
``b / n``; adding ``N(0, sigma**2)`` with ``sigma = (b / n) / mu`` is the
Gaussian mechanism of sensitivity ``b / n``, which is mu-GDP, and ``mu =
gdp_mu(epsilon, delta)`` makes it (epsilon, delta)-DP (SPEC section 2).  The
model is fixed (trained on other records, or released already): the
guarantee is for (X, y).
"""


from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import is_classifier
from sklearn.feature_extraction import DictVectorizer, FeatureHasher
from sklearn.feature_extraction.text import CountVectorizer, HashingVectorizer
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted, column_or_1d

from .._base import checked_privacy, warn_large_delta
from .._randomness import _release_rng, _streams_given_back_if_refused
from .._sklearn_compat import InvalidParameterError, num_samples, safe_indexing
from .._validation import (
    _column_names,
    _is_text_dtype,
    _refuse_array_api,
    check_sparse_structure,
)
from ..privacy.accountant import PrivacyAccountant, _check_release
from ..privacy.calibration import gdp_mu, gdp_sigma
from ..privacy.events import GaussianEvent
from ..privacy.noise import add_gaussian_noise
from ._scores import _SCORINGS_NOTE, SCORINGS, _check_scoring, _score_bound, _validation_losses
from ._search import _BaseDPSearch
from ._slot import _find_dp_slot, _parts, _runs


def _record_step(estimator):
    """The index in a Pipeline ``estimator`` (at its top level) of its first
    step that runs, if that step takes one record per item, documents or
    dicts: one of scikit-learn's text vectorizers, a ``DictVectorizer`` or a
    ``FeatureHasher``, which transform each record alone; else None.  (A
    step of another kind, even one whose tags say it takes such records, is
    not taken.)"""
    if not isinstance(estimator, Pipeline):
        return None
    index = next((i for i, (_, step) in enumerate(estimator.steps) if _runs(step)), None)
    records = (HashingVectorizer, CountVectorizer, DictVectorizer, FeatureHasher)
    return index if index is not None and isinstance(estimator.steps[index][1], records) \
        else None


def _records_read_once(estimator, index, X):
    """``(rest, rows, failed)``: each record of X put through the step
    ``index`` (:func:`_record_step`) alone, read once; ``rest`` the
    Pipeline of the steps after it, ``rows`` their input (a failed record's
    row is a copy of another's), ``failed`` the records whose step raised,
    scored as the bound.  A record may be readable once only (an iterator in
    a dict's value, tokens for a callable analyzer): scoring the batch and,
    when it failed, the records again, read the exhausted ones as empty, and
    one record moved every other loss (a score of 1.0 to 0.5)."""
    steps = estimator.steps
    first, rest = steps[index][1], Pipeline(steps[index + 1:])
    n_samples = num_samples(X)
    rows, failed = [], np.zeros(n_samples, dtype=bool)
    for i in range(n_samples):
        try:
            with np.errstate(all="ignore"):
                row = first.transform(safe_indexing(X, [i]))
            if row.shape[0] != 1:
                raise ValueError("not one row")
            rows.append(row)
        except Exception:  # (which record failed, and why, is not shown)
            failed[i] = True
            rows.append(None)
    good = next((row for row in rows if row is not None), None)
    if good is None:
        return rest, None, failed
    rows = [good if row is None else row for row in rows]
    stacked = sp.vstack(rows, format="csr") if sp.issparse(good) else np.vstack(rows)
    return rest, stacked, failed


def _refuse_read_once_records(estimator):
    """Refuse, from its parameters, a step that reads records which may be
    read only once: a text vectorizer with ``input="file"`` (open files) or
    a ``FeatureHasher`` whose records are iterables (``input_type`` other
    than ``"dict"``: a generator).  When one record fails, the others are
    read again (:func:`_total_losses`): exhausted, they scored as empty, and
    one record moved every other loss (a score from 1.0 to 0.5 over 10
    records, five times the bound of a record's effect)."""
    for step in _parts(estimator):
        if (isinstance(step, (HashingVectorizer, CountVectorizer)) and step.input == "file"
                or isinstance(step, FeatureHasher) and step.input_type != "dict"):
            what = (f"{type(step).__name__}(input='file')" if hasattr(step, "input")
                    else f"FeatureHasher(input_type={step.input_type!r})")
            raise ValueError(
                f"dp_score cannot score a model with {what}: its records (open files, "
                "iterables) may be read only once, and dp_score reads each record again when "
                "another one fails. Give the documents' contents (input='content'), lists "
                "of tokens joined into text for a HashingVectorizer, or dicts "
                "(input_type='dict'). Nothing was charged.")


def _checked_layout(estimator, X, record_step):
    """X, its layout checked against the model before the charge (public facts).

    The layout of an array, a sparse matrix or a frame (its dimensions,
    width, text dtype, column names) is its schema, the same for
    neighbouring data sets: a layout the model cannot score is refused here,
    instead of charging for a score in which every record counts as the
    bound.  Column names must be those of the fit, in its order (stricter
    than a Pipeline whose ColumnTransformer selects columns by name).  Sparse X is returned as CSR,
    whose rows :func:`_total_losses` can take one at a time (COO, DIA and
    BSR cannot be indexed by row: every record counted as the bound the
    moment one failed).  A list of rows has no schema, only records: its
    width read from the first record made that one record decide whether
    dp_score raised, and not reading it charged for a score of bounds; it
    is refused, by its type, for the caller to convert.  ``record_step``:
    :func:`_record_step` of ``estimator``.
    """
    if isinstance(X, np.matrix):
        raise TypeError("dp_score does not take np.matrix; convert X with np.asarray. "
                        "Nothing was charged.")
    _refuse_read_once_records(estimator)
    if record_step is not None:
        # One record per item (a document, a dict): a list is converted item
        # by item (np.asarray would split equal-length sequences into columns).
        if isinstance(X, (list, tuple)):
            items = np.empty(len(X), dtype=object)
            items[:] = list(X)
            X = items
        if len(getattr(X, "shape", ())) != 1:
            raise ValueError(
                f"dp_score: the model's first step "
                f"({type(estimator.steps[record_step][1]).__name__}) takes one "
                "record per item (a document or a dict): give X as a list, a 1-D array or a "
                "Series of them. Nothing was charged.")
        return X
    if sp.issparse(X):
        check_sparse_structure(X)  # (before scipy converts it)
        X = X.tocsr()
    shape = getattr(X, "shape", None)
    if shape is None:
        raise TypeError(
            f"dp_score needs X as an array, a sparse matrix or a data frame, whose layout "
            f"is checked against the model before the charge; got a {type(X).__name__}. "
            "Convert it first (np.asarray(X)). Nothing was charged.")
    if len(shape) != 2:
        raise ValueError(f"dp_score needs X of shape (n_samples, n_features); got an X of "
                         f"{len(shape)} dimension(s); nothing was charged.")
    if _is_text_dtype(getattr(X, "dtype", None)):
        raise ValueError("dp_score: X is an array of text; X must hold numbers. Nothing "
                         "was charged.")
    expected = getattr(estimator, "n_features_in_", None)
    if expected is not None and int(shape[1]) != expected:
        raise ValueError(f"X has {int(shape[1])} features, but the model was fitted on "
                         f"{expected}; nothing was charged.")
    names = getattr(estimator, "feature_names_in_", None)
    columns = _column_names(X)
    if names is not None and columns is None:
        # (A Pipeline selecting columns by name fails on every row of an array:
        # a charge for a score of bounds.)
        raise ValueError("dp_score: the model was fitted on a table with column names "
                         f"({list(names)}); give X as a table with those columns. Nothing "
                         "was charged.")
    if names is not None and columns is not None and columns != [str(c) for c in names]:
        raise ValueError("dp_score: the column names of X differ from those the model was "
                         f"fitted on ({list(names)}), or are in another order; nothing "
                         "was charged.")
    return X


def _total_losses(estimator, slot, scoring, X, y, bound):
    """One loss in ``[0, bound]`` per record, whatever the records hold.

    A record whose loss cannot be computed (a NaN in its row, a category
    its encoder was not given, a label that is not a number, a step that
    turns it into several rows) gets the bound, as a record whose
    prediction overflows does: an error would tell something of one record
    (maybe quote it) outside the release.

    The other records' losses must not change with it.  They are computed
    in one batch of all the rows (a copy in row order, whatever X's memory
    layout), and a batch of another shape rounds differently in the last
    bits: a record on the public model's decision boundary flips its 0/1
    loss (scoring every row alone after one failed moved a score of 1000
    records from 1.0 to 0.0).  So when the batch fails, the rows are tried
    one at a time only to find those that fail; each is replaced by the
    first row that does not, the batch of the same shape is scored again,
    and the replaced rows get the bound.  (Such a record makes the call
    slower: time is not protected, docs/privacy.md.)
    """
    n_samples = len(y)
    order = np.arange(n_samples)

    def batch(rows):
        losses, _ = _validation_losses(estimator, slot, scoring, safe_indexing(X, rows), y[rows])
        losses = np.asarray(losses, dtype=np.float64)
        if losses.shape != (len(rows),):  # a step that adds or drops rows: failed too
            raise ValueError("not one loss per record")
        return losses

    try:
        losses = batch(order)
    except Exception:  # (which record failed, and why, is not shown)
        scored = np.zeros(n_samples, dtype=bool)
        for i in range(n_samples):
            try:
                batch(order[i:i + 1])
                scored[i] = True
            except Exception:
                pass
        losses = np.full(n_samples, float(bound))
        if scored.any():
            rows = np.where(scored, order, int(np.argmax(scored)))
            try:
                losses = np.where(scored, batch(rows), bound)
            except Exception:  # only in the batch: steps mixing rows, outside the guarantee
                pass
    return np.clip(losses, 0.0, bound)


def _served(estimator):
    """The model ``estimator`` predicts with: a search's or boosting's
    ``best_estimator_``, also as the last step of (nested) Pipelines, which
    are rebuilt around it (fitted steps, nothing refitted)."""
    if isinstance(estimator, _BaseDPSearch):
        check_is_fitted(estimator, "best_estimator_")
        return estimator.best_estimator_
    if isinstance(estimator, Pipeline) and estimator.steps:
        name, last = estimator.steps[-1]
        served = _served(last)
        if served is not last:
            return Pipeline([*estimator.steps[:-1], (name, served)])
    return estimator


def _check_label_kind(classes, y):
    """Refuse labels of numbers for classes of text, or the reverse, from
    their dtypes (public) before the charge: no label would be a class, and
    every record would score as an error (scikit-learn refuses such a mix).
    A y of dtype object, whose kind only its values tell, is not checked."""
    def kind(dtype):
        if dtype is None:
            return None
        if not isinstance(dtype, np.dtype):
            numpy_dtype = getattr(dtype, "numpy_dtype", None)  # pandas' nullable numbers
            if isinstance(numpy_dtype, np.dtype) and numpy_dtype.kind in "biuf":
                return "numbers"
            name = str(dtype).lower()  # pandas' str/string (numpy or arrow), polars' String
            if name.startswith(("str", "string", "large_string", "utf8")):
                return "text"
            is_numeric = getattr(dtype, "is_numeric", None)  # polars
            try:
                return "numbers" if callable(is_numeric) and is_numeric() else None
            except Exception:
                return None
        if dtype.kind in "biuf":
            return "numbers"
        return {"U": "text", "S": "bytes"}.get(dtype.kind)
    classes = np.asarray(classes)
    class_kind = kind(classes.dtype) or next(
        (name for name, t in (("text", str), ("bytes", bytes))
         if all(isinstance(c, t) for c in classes.tolist())), None)
    y_kind = kind(getattr(y, "dtype", None))
    if None not in (class_kind, y_kind) and class_kind != y_kind:
        raise ValueError(
            f"dp_score: y holds {y_kind} (dtype {y.dtype}) but the model's classes are "
            f"{class_kind} ({classes.tolist()!r}): no label would be a class, and every "
            "record would score as an error. Encode y as the model's classes. Nothing was "
            "charged.")


def dp_score(estimator, X, y, *, scoring=None, epsilon=1.0, delta=None, accountant=None,
             random_state=None):
    """Score a fitted DP model on private data, with (epsilon, delta)-DP.

    The score of a model on a held-out part of a private data set is a
    statistic of those records; ``estimator.score`` releases it exactly.
    This returns the same kind of score with Gaussian noise calibrated to
    its sensitivity, charged to the accountant: the budget is checked before
    the data is read, the charge recorded before the value is released.
    Losses are clipped to a public bound (below), so the score estimated is
    that of the clipped losses; a record whose loss cannot be computed (a
    NaN in its row, a category its encoder was not given) counts as the
    bound, without an error.

    Parameters
    ----------
    estimator : fitted DP estimator, or a fitted Pipeline ending in one
        The model to score (it is not refitted); a fitted search or
        :class:`DPConfidenceBoosting`, alone or as the last step of a
        Pipeline, is scored through its ``best_estimator_``.  Its steps
        must transform each row on its own (scikit-learn's fitted
        transformers do); a step mixing rows
        (centring them on their mean, say) lets one record move the others'
        losses, beyond the sensitivity the noise is for.
    X : array-like of shape (n_samples, n_features), or of shape (n_samples,)
        The private evaluation rows.  ``n_samples`` is public, and so is the
        layout of an array, sparse matrix or frame (its width, column names
        and dtype), checked against the model before the charge: a model
        fitted on a table with column names needs a table with the same
        columns.  A list of rows is refused (its layout is its records':
        convert it first).  For a Pipeline whose first step takes one
        record per item (a text vectorizer such as ``HashingVectorizer``, a
        ``DictVectorizer``), X is those items: a list, a 1-D array or a Series.
    y : array or Series of shape (n_samples,)
        Their labels (a list is refused: its dtype would be inferred from
        all its labels; convert it first).
    scoring : {"accuracy", "neg_brier_score", "loss", "neg_mean_absolute_error", \
"neg_mean_squared_error"} or None, default=None
        The score, as in :class:`DPGridSearchCV`: ``"accuracy"`` (0/1
        errors, bound 1), ``"neg_brier_score"`` (minus the squared error of
        the predicted probabilities; bound 1 for two classes, 2 for more),
        ``"loss"`` (the model's training loss, clipped at its supremum over
        the constraint ball), the absolute or squared error of the
        predictions clipped to the regressor's ``y_bound`` (bound: the range
        or its square).  ``None``: ``"accuracy"`` for a classifier (what its
        ``score`` reports; the searches select on the Brier score),
        ``"neg_mean_absolute_error"`` for a regressor.
    epsilon : float in (0, 1e300] or inf, default=1.0
        Privacy budget of this release; ``inf`` releases the score without
        noise, which only an accountant with an infinite budget accepts.
    delta : float in (0, 1) or None, default=None
        ``None``: ``min(1e-5, n_samples**-1.5, the accountant's delta)``.
    accountant : PrivacyAccountant or None, default=None
        Charged once; ``None`` charges the DP estimator's own accountant
        (its ``accountant`` parameter, else the default accountant).
    random_state : int, Generator, RandomState or None, default=None
        Seeds the noise (``None``: the operating system).  An integer used
        again on the same accountant of yours draws another stream of it;
        on the built-in default accountant it draws the same noise every
        time, and two such scores at two epsilons give the exact score back
        (docs/randomness.md): use None for what you publish.

    Returns
    -------
    score : float
        Accuracy (``"accuracy"``) or minus the mean clipped loss, plus
        Gaussian noise of standard deviation ``(bound / n_samples) / mu``
        with ``mu = gdp_mu(epsilon, delta)``; not clipped to the score's
        range (clipping it is free post-processing, but biased).  The bound
        decides the noise: on 1,500 records at epsilon 0.3 (delta 1e-6, mu
        0.077), a label range of width 9.2 gives a standard deviation of 0.73
        for the squared error (bound 85), as large as a typical error there,
        against 0.08 for the absolute error (bound 9.2) and 0.009 for the
        accuracy (bound 1).  A score's sign can then flip: a noisy
        ``"neg_mean_squared_error"`` may come out positive.

    Raises
    ------
    BudgetExceededError
        If the accountant cannot afford the release; the data is not read.

    Examples
    --------
    >>> import numpy as np
    >>> from dp_glm_sklearn import DPLogisticRegression, PrivacyAccountant
    >>> from dp_glm_sklearn.model_selection import dp_score
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(4000, 3)) / 2
    >>> y = (X[:, 0] + 0.5 * rng.normal(size=4000) > 0).astype(int)
    >>> acc = PrivacyAccountant(epsilon=2.0, delta=1e-6)
    >>> clf = DPLogisticRegression(epsilon=1.0, feature_norm=2.0, classes=[0, 1],
    ...                            accountant=acc, random_state=0).fit(X[:3000], y[:3000])
    >>> round(dp_score(clf, X[3000:], y[3000:], epsilon=0.5, random_state=0), 3)
    0.712
    >>> round(acc.spent()[0], 2)  # the fit and the score, composed
    1.14

    (``clf.score`` gives 0.713 without noise: publishing it would not be
    private.  The noise here has a standard deviation of 0.008.)
    """
    if isinstance(estimator, type) or not hasattr(estimator, "get_params"):
        # (Not an estimator: _find_dp_slot failed on its get_params, naming nothing.
        # Its type only: arguments given in the wrong order may put data here.)
        what = f"the class {estimator.__name__}" if isinstance(estimator, type) \
            else f"a {type(estimator).__name__}"
        raise InvalidParameterError(
            "The 'estimator' parameter of dp_score must be a fitted DP estimator of this "
            "library, a fitted Pipeline ending in one, or a fitted DPGridSearchCV, "
            f"DPRandomizedSearchCV or DPConfidenceBoosting. Got {what} instead. "
            "Nothing was charged.")
    estimator = _served(estimator)
    try:
        slot = _find_dp_slot(estimator)
    except ValueError:
        raise ValueError(
            f"dp_score cannot score a {type(estimator).__name__}: it takes a fitted DP "
            "estimator of this library or a fitted Pipeline whose last step is one (a fitted "
            "DPGridSearchCV, DPRandomizedSearchCV or DPConfidenceBoosting, alone or as a "
            "Pipeline's last step, is scored through its best_estimator_). Other "
            "meta-estimators hold copies of the DP estimator "
            "whose losses it cannot bound.") from None
    owner = slot.owner(estimator)
    check_is_fitted(owner)
    if scoring is None:
        scoring = "accuracy" if is_classifier(estimator) else "neg_mean_absolute_error"
    if not (isinstance(scoring, str) and scoring in SCORINGS):
        raise InvalidParameterError(
            f"The 'scoring' parameter of dp_score must be a str among {list(SCORINGS)} "
            f"({_SCORINGS_NOTE}) or None. Got {scoring!r} instead.")
    _check_scoring(estimator, slot, scoring)
    if not (accountant is None or isinstance(accountant, PrivacyAccountant)):
        raise InvalidParameterError(
            "The 'accountant' parameter of dp_score must be an instance of "
            f"'PrivacyAccountant' or None. Got {accountant!r} instead.")
    if not (random_state is None
            or isinstance(random_state, (np.random.RandomState, np.random.Generator))
            or (isinstance(random_state, Integral) and not isinstance(random_state, bool)
                and 0 <= random_state <= 2**32 - 1)):
        # (As the estimators' random_state; a SeedSequence or a list of ints
        # numpy would take, 2**40, -1 or a str failed in numpy's words.)
        raise InvalidParameterError(
            "The 'random_state' parameter of dp_score must be an int in the range "
            "[0, 4294967295], an instance of 'numpy.random.RandomState', a "
            f"numpy.random.Generator or None. Got {random_state!r} instead.")
    if accountant is None:
        accountant = owner._accountant()  # its accountant parameter, else the default
    # Array-API input under dispatch: refused here, before the charge (each
    # prediction would fail, and every record would count as the bound).
    _refuse_array_api(X, "dp_score", "X")
    _refuse_array_api(y, "dp_score", "y")
    n_samples = num_samples(X)
    if n_samples < 1 or num_samples(y) != n_samples:
        raise ValueError(f"dp_score needs X and y with the same number of rows, at least 1; "
                         f"got {n_samples} and {num_samples(y)}.")
    # Shapes are public: checked before the budget.  A y of shape (n, 1) made
    # every loss an n x n array (broadcast), one record moving a row and a
    # column of it: twice the sensitivity charged for.
    if not hasattr(y, "shape"):
        # A list's dtype is inferred from all its labels: one text label among
        # numbers made every label text, so no prediction matched (every loss
        # moved with one record).  An array's or a Series' dtype is its own.
        raise TypeError(
            f"dp_score needs y as an array or a pandas/polars Series (a dtype of its own); "
            f"got a {type(y).__name__}, whose type numpy would infer from all its labels. "
            "Convert it first (np.asarray(y)). Nothing was charged.")
    y_shape = np.shape(y)
    if not (len(y_shape) == 1 or (len(y_shape) == 2 and y_shape[1] == 1)):
        raise ValueError(f"dp_score needs y of shape (n_samples,) or (n_samples, 1); got "
                         f"shape {y_shape}.")
    if is_classifier(owner):
        _check_label_kind(owner.classes_, y)
    record_step = _record_step(estimator)
    X = _checked_layout(estimator, X, record_step)
    epsilon, delta = checked_privacy("dp_score", epsilon, delta, n_samples,
                                     lambda: accountant.delta)
    warn_large_delta(None, delta, n_samples, name="dp_score")
    mu = gdp_mu(epsilon, delta)
    events = [GaussianEvent(mu=mu, label=f"dp_score({scoring})")]
    bound = _score_bound(estimator, slot, scoring)  # public: the model's bounds
    # The one calibration (rounded up; refuses a scale that underflows to 0,
    # which would release the exact score), before the charge.
    sigma = gdp_sigma(bound / n_samples, mu)
    _check_release(accountant, events, epsilon, delta)  # before the data is read
    with _streams_given_back_if_refused(accountant):
        rng = _release_rng(random_state, accountant)  # (an unusable random_state fails here)
        if record_step is not None:
            rest, rows, failed = _records_read_once(estimator, record_step, X)
            losses = np.full(len(failed), float(bound)) if rows is None else np.where(
                failed, bound, _total_losses(rest, _find_dp_slot(rest), scoring, rows,
                                             column_or_1d(y), bound))
        else:
            losses = _total_losses(estimator, slot, scoring, X, column_or_1d(y), bound)
        accountant._record(events, source=f"dp_score(scoring={scoring!r})")
    score = (1.0 if scoring == "accuracy" else 0.0) - float(np.mean(losses))
    return float(add_gaussian_noise(score, sigma, rng))
