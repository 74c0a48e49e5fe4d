"""The DP estimator inside a searched estimator, and the searched parameters.

A search wraps a DP estimator of this library, alone or as the last step of
(possibly nested) Pipelines.  This module finds it (:class:`_DPSlot`, where
its privacy parameters live), reads the preprocessing steps before it,
clones the estimator with a candidate's parameters, and makes hashable keys
and ``cv_results_`` columns of parameter values.  Before anything is charged,
it refuses grid keys that would set the budget and candidates that move,
replace or misconfigure the DP estimator, and warns of preprocessing steps
that learn from the data and of estimator parameters the search overrides.
"""

import inspect
import re
import zlib
from dataclasses import dataclass
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.compose import ColumnTransformer, TransformedTargetRegressor, make_column_selector
from sklearn.feature_extraction.text import (
    CountVectorizer,
    HashingVectorizer,
    TfidfTransformer,
    TfidfVectorizer,
)
from sklearn.impute import SimpleImputer
from sklearn.kernel_approximation import RBFSampler
from sklearn.model_selection import ParameterGrid
from sklearn.pipeline import FeatureUnion, Pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    OneHotEncoder,
    OrdinalEncoder,
    PolynomialFeatures,
)
from sklearn.random_projection import GaussianRandomProjection, SparseRandomProjection
from sklearn.utils import get_tags

from .._sklearn_compat import validate_params
from .._warn import warn_user
from ..privacy.accountant import PrivacyLeakWarning, get_default_accountant


@dataclass(frozen=True)
class _DPSlot:
    """Where the DP estimator's privacy parameters live in ``estimator``."""

    prefix: str  # "" or "step__"
    has_random_state: bool
    accountant: object  # the value of its accountant parameter
    random_state: object = None  # the value of its random_state parameter

    def key(self, name):
        return self.prefix + name

    def owns(self, name):
        """Whether the searched parameter ``name`` is one of the DP estimator's own
        (the others set preprocessing steps before it)."""
        return name.startswith(self.prefix)

    def owner(self, estimator):
        """The DP estimator object inside ``estimator`` (fitted or not)."""
        if not self.prefix:
            return estimator
        return estimator.get_params(deep=True)[self.prefix[:-2]]


def _warn_fitted_preprocessing(search, slot, candidates):
    """Warn when a Pipeline step before the DP estimator learns from the data.

    Such a step (a ``StandardScaler``: means and variances) is fitted on the
    private data without noise and published in ``best_estimator_``; no
    privacy figure of the search covers it.  Steps that scikit-learn tags as
    needing no fit (``FunctionTransformer``, ``Normalizer``) learn nothing;
    the guarantee also needs them to act row by row (a function centring the
    columns makes every row depend on every record), which no tag can tell.
    The warning depends on the estimator only, not on the data.
    """
    steps = [step for params in [{}, *candidates]  # the estimator's and each candidate's
             for step in _preprocessing(_with_params(search.estimator, params))]
    fitted = _leaky(steps)
    if fitted:
        density = any(isinstance(part, ColumnTransformer) and part.sparse_threshold > 0
                      for _, step in steps for part in _parts(step))
        warn_user(
            f"{type(search).__name__}: the Pipeline step(s) {', '.join(fitted)} before the DP "
            "estimator are fitted on the private data without noise; what they learn (a "
            "StandardScaler's means and variances, the categories an encoder finds, the "
            "vocabulary of a text vectorizer: every token of every record, names included) "
            "is published in best_estimator_ and is not covered by privacy_spent_. Use "
            "row-wise transforms with public parameters (e.g. a FunctionTransformer acting on "
            "each row alone, a OneHotEncoder given its categories, a HashingVectorizer for "
            "text) to keep the whole fit private. A "
            "step of your own whose fit learns nothing says so with scikit-learn's tag "
            "requires_fit=False (in its __sklearn_tags__)."
            + (" A ColumnTransformer with sparse_threshold > 0 chooses a sparse or dense "
               "output from the data's density when a part is sparse: set "
               "sparse_threshold=0." if density else ""),
            PrivacyLeakWarning,
        )


def leaky_steps(estimator):
    """The steps before the DP estimator that learn from the data they are fitted on.

    A ``Pipeline`` fits its steps on the private data without noise, and
    what they learn (a ``StandardScaler``'s means and variances, the
    categories a ``OneHotEncoder`` finds) is published with the model,
    outside its ``privacy_spent_``.  The searches warn about such steps
    (a ``PrivacyLeakWarning``); a plain ``Pipeline.fit`` cannot, so check it
    here before fitting.  The answer depends on the estimator's settings
    only, never on data, and follows what scikit-learn's tags and the steps'
    structure tell: an empty list is no proof (a step tagged as needing no
    fit must also transform each row alone, which no tag says). A step of
    your own whose ``fit`` learns nothing is taken as learning unless its
    ``__sklearn_tags__`` set ``requires_fit=False``, scikit-learn's tag
    for that (it also lets scikit-learn use the step unfitted).

    Parameters
    ----------
    estimator : estimator
        A DP estimator, or a ``Pipeline`` (Pipelines may nest) whose last
        step is one; or a search or ``DPConfidenceBoosting``, for the
        estimator it fits in each setting of its grid (a random search: in
        each setting it checks before the charge); or a
        ``TransformedTargetRegressor`` around one of these (its
        ``transformer``, fitted on the labels, is listed if it learns).

    Returns
    -------
    steps : list of str
        Each part that learns, as ``'set_params key' (class)``: the steps,
        and inside ``Pipeline``, ``FeatureUnion`` and ``ColumnTransformer``
        steps the parts that learn; a ``ColumnTransformer`` that picks a
        sparse or dense output from the data's density
        (``sparse_threshold > 0``) is named itself.

    Raises
    ------
    TypeError
        If ``estimator`` is not an estimator.
    ValueError
        If ``estimator`` holds no DP estimator where a search would look
        for it.

    Examples
    --------
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import Normalizer, StandardScaler
    >>> from dp_glm_sklearn import DPLogisticRegression, leaky_steps
    >>> leaky_steps(make_pipeline(StandardScaler(), DPLogisticRegression()))
    ["'standardscaler' (StandardScaler)"]
    >>> leaky_steps(make_pipeline(Normalizer(), DPLogisticRegression()))
    []
    """
    from ._search import _BaseDPSearch  # (here: _search imports this module)

    settings, search = [{}], None
    if isinstance(estimator, _BaseDPSearch):  # the estimator it fits, in every setting
        search, estimator = estimator, estimator.estimator
    if not hasattr(estimator, "get_params"):
        raise TypeError(f"leaky_steps takes an estimator; got a {type(estimator).__name__}.")
    if search is None:
        # A TransformedTargetRegressor, alone or last in (nested) Pipelines,
        # which the searches refuse but a plain fit runs: its regressor fits
        # on y transformed by a transformer fitted on y (a StandardScaler's
        # mean and scale of the private labels, unnoised).
        head, prefix, last = [], "", estimator
        while isinstance(last, Pipeline) and last.steps:
            head += [(prefix + name, step) for name, step in last.steps[:-1]]
            prefix += last.steps[-1][0] + "__"
            last = last.steps[-1][1]
        if isinstance(last, TransformedTargetRegressor):
            transformer = last.transformer
            # (a search's parts are listed relative to the estimator it fits)
            inner = "regressor__estimator__" if isinstance(last.regressor, _BaseDPSearch) \
                else "regressor__"
            return _leaky(head) + [
                f"'{prefix}{inner}{part[1:]}" for part in leaky_steps(last.regressor)] + (
                [f"'{prefix}transformer' ({type(transformer).__name__})"]
                if transformer is not None and _learns(transformer) else [])
    slot = _find_dp_slot(estimator)
    if hasattr(search, "param_grid"):
        settings += list(ParameterGrid(search.param_grid))
    elif hasattr(search, "param_distributions"):  # (its public enumeration)
        settings += search._possible_candidates(None, slot)
    return _leaky([step for params in settings
                   for step in _preprocessing(_with_params(estimator, params))])


def _leaky(steps):
    """:func:`leaky_steps` of ``(parameter path, step)`` pairs, each part once."""
    return list(dict.fromkeys(
        where for name, step in steps if _learns(step) for where in _learning_parts(name, step)))


def _learning_parts(path, step):
    """Where ``step`` (at ``path``, a ``set_params`` key) learns from the data:
    the parts of its containers that do, each as ``'path' (class)``, or
    ``step`` itself (a ColumnTransformer choosing sparse or dense output, or
    columns by a function of X)."""
    parts = _children(step)
    if parts is not None:
        found = [where for name, part in parts if _learns(part)
                 for where in _learning_parts(f"{path}__{name}", part)]
        if isinstance(step, ColumnTransformer):
            found += [f"'{path}__{name}' (columns chosen by a function of X)"
                      for name, _, columns in step.transformers if _by_function(columns)]
            if step.sparse_threshold > 0:
                found.append(f"{path!r} (ColumnTransformer, sparse_threshold="
                             f"{step.sparse_threshold})")
        return found or [f"{path!r} ({type(step).__name__})"]
    return [f"{path!r} ({type(step).__name__})"]


def _children(step):
    """``[(name, part), ...]`` of a Pipeline's steps, a FeatureUnion's parts or
    a ColumnTransformer's (its remainder last, named "remainder"), the names
    their ``set_params`` keys take; None for any other step."""
    if isinstance(step, Pipeline):
        return list(step.steps)
    if isinstance(step, FeatureUnion):
        return list(step.transformer_list)
    if isinstance(step, ColumnTransformer):
        return [(name, part) for name, part, _ in step.transformers] + [
            ("remainder", step.remainder)]
    return None


def _by_function(columns):
    """Whether a ColumnTransformer's ``columns`` are chosen by a function of X
    (other than ``make_column_selector``, which reads names and dtypes only)."""
    return callable(columns) and not isinstance(columns, make_column_selector)


def _parts(step):
    """``step`` and the estimators inside it, at any depth."""
    if not isinstance(step, BaseEstimator):
        return [step]
    return [step, *step.get_params(deep=True).values()]


#: Steps whose fit reads the shape and dtype of X only (and draws from their
#: random_state), transforming each row alone: nothing learnt from the values.
_SHAPE_ONLY = (PolynomialFeatures, GaussianRandomProjection, SparseRandomProjection)


def _learns(step):
    """Whether fitting ``step`` learns from the data, as far as its tags and structure tell.

    Containers are looked into: a Pipeline or FeatureUnion learns if a part
    does; a ColumnTransformer too, or when its ``sparse_threshold`` is
    positive (it then picks a sparse or dense output from the density of its
    parts' outputs, when one is sparse) or a part's columns are chosen by a
    function of X other than ``make_column_selector`` (which reads names and
    dtypes only).  ``"passthrough"``, ``"drop"`` and
    None learn nothing; nor does a ``OneHotEncoder`` or ``OrdinalEncoder``
    given its ``categories`` (public: ``categories_`` is what was declared,
    cast to the column's dtype, which must be public too, and each row is
    encoded alone) that groups no rare ones
    (``min_frequency`` and ``max_categories`` None: they count), nor a
    ``CountVectorizer`` given its ``vocabulary``, a ``TfidfVectorizer`` given
    it with ``use_idf=False``, a ``TfidfTransformer`` with ``use_idf=False``, nor a
    ``SimpleImputer(strategy="constant", keep_empty_features=True)`` without
    ``add_indicator`` (it keeps the column's dtype, which must be public: an
    array or a table, not lists whose cells' types vary), nor the steps of
    :data:`_SHAPE_ONLY` or an ``RBFSampler`` with a numeric ``gamma``
    (``"scale"`` reads the variance of X).  Any other
    step learns unless tagged as needing no fit (a step that is not a
    scikit-learn estimator included).
    """
    if step is None or isinstance(step, str):  # "passthrough", "drop"
        return False
    parts = _children(step)
    if parts is not None:
        return any(_learns(part) for _, part in parts) or isinstance(
            step, ColumnTransformer) and (step.sparse_threshold > 0 or any(
                _by_function(columns) for _, _, columns in step.transformers))
    if type(step) in (OneHotEncoder, OrdinalEncoder):  # (a subclass may learn more)
        return (isinstance(step.categories, str) or step.min_frequency is not None
                or step.max_categories is not None)
    if type(step) is HashingVectorizer:  # (stateless; scikit-learn 1.6's tags say it needs a fit)
        return False
    if type(step) is CountVectorizer:  # given its vocabulary, it counts each document alone
        return step.vocabulary is None
    if type(step) is TfidfVectorizer:  # and without idf weights, learned from the counts
        return step.vocabulary is None or step.use_idf
    if type(step) is TfidfTransformer:
        return step.use_idf
    if type(step) in _SHAPE_ONLY or (type(step) is RBFSampler and step.gamma != "scale"):
        return False  # (fitted on the shape and dtype, and random_state: public)
    if type(step) is SimpleImputer:
        # A constant fill learns nothing, if it keeps the columns that are all
        # missing (from scikit-learn 1.8 keep_empty_features=False drops them)
        # and adds no indicator (which keeps the columns that have a gap).
        return not (step.strategy == "constant" and step.keep_empty_features
                    and not step.add_indicator)
    try:
        return get_tags(step).requires_fit
    except Exception:  # a step scikit-learn cannot read tags of: it may learn
        return True


def _validate_candidates(estimator, candidates, slot, accountant=None, secret_count=False):
    """Check every candidate's parameters of the DP estimator before anything is charged.

    An invalid value in the grid (say ``norm_bound=-1``) would otherwise raise
    only when its candidate is trained, after the whole budget was spent.
    ``accountant``: the search's own (None: it has none, and charges the DP
    estimator's); a grid replacing the DP estimator by one with another
    accountant is refused (that one would record nothing).  ``secret_count``:
    the number of candidates is secret (the random search), and a Pipeline
    caching its steps (``memory``) is refused too.
    """
    charged = accountant if accountant is not None else slot.accountant
    template = slot.owner(estimator)
    expected = type(template)
    for params in candidates:
        candidate = _with_params(estimator, params)
        if _find_dp_slot(candidate).prefix != slot.prefix:
            raise ValueError(
                f"The parameter grid moves or replaces the DP estimator ({params!r}); "
                "the grid may change its parameters, not the estimator itself."
            )
        owner = slot.owner(candidate)
        if type(owner) is not expected:
            raise ValueError(
                f"The parameter grid replaces the DP estimator {expected} by {type(owner)} "
                f"({params!r}); the grid may change its parameters only."
            )
        own = owner.get_params(deep=False).get("accountant")
        if (own is not None and own is not charged and own is not slot.accountant
                and not (charged is None and own is get_default_accountant())):
            # (It would be charged nothing: the search charges one. The template's
            # own, if not the search's, is refused later with both named.)
            raise ValueError(
                f"The parameter grid replaces the DP estimator by one charging another "
                f"accountant ({params!r}); the search charges one accountant for all its "
                "candidates: give it to the search or to the estimator, not in the grid."
            )
        if own is None and charged is None and hasattr(owner, "_default_accountant"):
            # The search charges a default: refused, as the estimator's own fit
            # would be, if it carries one that is gone.
            owner._default_accountant()
        _refuse_callbacks(candidate)
        if secret_count:
            _refuse_caching(candidate)
            _refuse_verbose(candidate)
        try:
            _check_parameters(candidate, owner)
        except (TypeError, ValueError) as exc:
            try:  # (an error of the template's, same parameter, is not the grid's)
                _check_parameters(estimator, template)
            except (TypeError, ValueError) as template_exc:
                if _failing_parameter(template_exc) == _failing_parameter(exc):
                    raise exc from None
            raise _with_message(exc, f"{exc} (in the candidate {params!r} of the search's "
                                     "grid)") from None


def _refuse_callbacks(estimator):
    """Refuse scikit-learn callbacks (``set_callbacks``, scikit-learn 1.9+) on
    ``estimator`` or any estimator inside it.

    ``clone`` copies them into every fit a search or boosting runs, and each
    fit hands them the fitted estimator: every candidate (DPRandomizedSearchCV's
    charge covers the winner alone, and their number is secret) and the
    preprocessing steps fitted on each part of the data (probes included),
    none of which is released otherwise.
    """
    for part in _parts(estimator):
        callbacks = getattr(part, "_skl_callbacks", None) if isinstance(part, BaseEstimator) \
            else None
        if callbacks:
            names = ", ".join(sorted({type(callback).__name__ for callback in callbacks}))
            raise ValueError(
                f"{type(part).__name__} in the searched estimator has scikit-learn callbacks "
                f"({names}). A search fits copies of it on parts of the data (the random "
                "search a secret number of times) and the callbacks would receive every "
                "fitted copy, which the privacy charge does not cover. Nothing was charged. "
                "Remove them with set_callbacks() before the search.")


def _refuse_caching(estimator):
    """Refuse a Pipeline that caches its fitted steps (``memory``), inside
    ``estimator`` too: the cache keeps one entry per distinct step fitted, so
    its size counts the random search's secret number of candidates."""
    for part in _parts(estimator):
        if isinstance(part, Pipeline) and part.memory is not None:
            raise ValueError(
                "DPRandomizedSearchCV: a Pipeline in the searched estimator caches its fitted "
                "steps (memory is set); the cache would keep a copy of the steps of every "
                "candidate, whose number is secret. Nothing was charged. Set memory=None.")


def _refuse_verbose(estimator):
    """Refuse a ``verbose`` setting in ``estimator`` (a Pipeline's, a
    ColumnTransformer's, a step's): it prints a line or more per fit, so
    the random search's output would count its secret number of candidates."""
    for part in _parts(estimator):
        if not isinstance(part, BaseEstimator):
            continue
        verbose = part.get_params(deep=False).get("verbose")
        if verbose is not None and verbose is not False and verbose != 0:
            raise ValueError(
                f"DPRandomizedSearchCV: {type(part).__name__} in the searched estimator has "
                f"verbose={verbose!r}; it would print for every candidate, whose number is "
                "secret. Nothing was charged. Set verbose to 0 or False.")


def _failing_parameter(exc):
    """The ``'name' parameter of Class`` an InvalidParameterError names (its
    whole message if it names none; the value it quotes may be a copy's)."""
    found = re.match(r"The '([^']*)' parameter of (\w+)", str(exc))
    return found.groups() if found else str(exc)


def _check_parameters(estimator, owner):
    """scikit-learn's declarative checks of every step of ``estimator`` that
    has them, and the DP estimator ``owner``'s label bound."""
    for part in _parts(estimator):
        if isinstance(part, BaseEstimator) and hasattr(part, "_parameter_constraints"):
            validate_params(part)
    if hasattr(owner, "_y_interval") and not is_classifier(owner):
        owner._y_interval()  # a malformed y_bound


def _with_message(exc, message):
    """An exception of ``exc``'s type saying ``message`` (a ValueError or a
    TypeError if that type cannot be made from a message alone, or does
    not show it: its arguments, and so its pickle, are another's)."""
    try:
        new = type(exc)(message)
        if str(new) == message:
            return new
    except Exception:  # (the fallback below)
        pass
    return (ValueError if isinstance(exc, ValueError) else TypeError)(message)


def _column_dtype(values):
    """numpy's dtype for a ``cv_results_`` column of these values if 1-D numeric, else object.

    As scikit-learn's searches (1.5+): numbers give a numeric column, so a
    DataFrame of ``cv_results_`` can sort and plot it; strings, None,
    sequences and estimators stay objects.
    """
    try:
        array = np.asarray(list(values.values()))
    except (ValueError, TypeError):
        return object
    return array.dtype if array.ndim == 1 and array.dtype.kind in "biuf" else object


def _params_key(params):
    """A hashable key for a dict of parameters (values by :func:`_value_key`)."""
    return tuple(sorted((name, _value_key(value)) for name, value in params.items()))


def _value_key(value):
    """Equal for equal plain values (numbers, strings, None, and lists, tuples
    and dicts of them); otherwise the object's identity.  Not its repr: numpy
    and scikit-learn shorten long ones, so two different step objects or
    arrays could share a key, and the second would go unchecked.
    """
    if value is None or isinstance(value, (str, bytes, bool, int, float, np.generic)):
        return (type(value).__name__, repr(value))
    if isinstance(value, np.ndarray):  # by content: clone copies arrays
        return ("ndarray", value.dtype.str, value.shape, _value_key(value.tolist())
                if value.dtype == object else value.tobytes())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_value_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(k), _value_key(v)) for k, v in value.items())))
    return ("id", id(value))


def _with_params(estimator, params):
    """A clone of ``estimator`` with ``params`` set to clones of their values.

    As scikit-learn's searches do: a step object listed in a grid is shared
    by every candidate that uses it, and fitting it in place would let one
    candidate's fit overwrite another's (and change the user's grid).
    """
    return clone(estimator).set_params(**_cloned(params))


def _cloned(params):
    return {name: clone(value, safe=False) for name, value in params.items()}


def _find_dp_slot(estimator):
    if isinstance(estimator, type):  # (has fit and predict, as its instances do)
        raise TypeError(
            f"The 'estimator' parameter must be an estimator instance, such as "
            f"{estimator.__name__}(...); got the class {estimator.__name__} itself.")
    params = estimator.get_params(deep=True)
    keys = [k for k in params if k == "epsilon" or k.endswith("__epsilon")]
    # Other estimators have an epsilon too (SVR's margin, HuberRegressor's
    # threshold, inside an RFE step): the DP estimator's comes with delta and
    # accountant.
    dp_keys = [k for k in keys if all(k[: -len("epsilon")] + name in params
                                      for name in ("delta", "accountant"))]
    if len(dp_keys) == 1:
        keys = dp_keys
    if len(keys) != 1:
        raise ValueError(
            "The 'estimator' parameter must contain exactly one DP estimator (one "
            f"parameter named 'epsilon' or '<step>__epsilon'); found {keys or 'none'}."
        )
    prefix = keys[0][: -len("epsilon")]
    missing = [prefix + k for k in ("delta", "accountant") if prefix + k not in params]
    if missing:
        raise ValueError(
            f"The DP estimator in 'estimator' has no parameter(s) {missing}; "
            "DP searches need estimators with epsilon, delta and accountant parameters."
        )
    node = estimator
    for name in prefix.split("__")[:-1]:
        if not (isinstance(node, Pipeline) and node.steps[-1][0] == name):
            hint = (" To model a transformed target, transform y yourself with a fixed "
                    "public function (np.log1p, say) and state y_bound on the transformed "
                    "scale; predict, then apply the inverse." if "Target" in type(node).__name__
                    else "")
            raise ValueError(
                f"The DP estimator of 'estimator' is {prefix[:-2]!r}, inside a "
                f"{type(node).__name__}; DP searches take the DP estimator itself, or a "
                "Pipeline (Pipelines may nest) whose last step it is. Other meta-estimators "
                f"fit a copy of it, whose privacy the search cannot check.{hint}"
            )
        node = node.steps[-1][1]
    return _DPSlot(prefix, prefix + "random_state" in params, params[prefix + "accountant"],
                   params.get(prefix + "random_state"))


def _preprocessing(estimator):
    """The steps before the DP estimator as ``(parameter path, step)`` pairs.

    ``estimator`` is the DP estimator or a chain of Pipelines ending in it
    (:func:`_find_dp_slot`); nested Pipelines are flattened, in the order a
    fit runs them.
    """
    steps, path = [], ""
    while isinstance(estimator, Pipeline):
        steps += [(path + name, step) for name, step in estimator.steps[:-1]]
        path += estimator.steps[-1][0] + "__"
        estimator = estimator.steps[-1][1]
    return steps


def _step_seeds(steps, seed):
    """``{parameter path: int}``: a seed for each ``random_state`` left at None in
    ``steps`` (``(parameter path, step)`` pairs: :func:`_preprocessing`'s, or
    a :func:`_head`'s ``steps``) and the estimators inside them.

    Each is drawn from ``seed`` (:func:`~dp_glm_sklearn._randomness._steps_seed`)
    by the step's position and the parameter's path within it, so the same
    step gets the same seed in a candidate and in its :func:`_head` (whose
    steps are renamed), in every candidate and the refit.
    """
    seeds = {}
    for position, (path, step) in enumerate(steps):
        if not isinstance(step, BaseEstimator):
            continue
        params = step.get_params(deep=True)
        for key, value in params.items():
            owner = key[:-len("random_state")]  # "" or "<path>__"
            if (value is None and (key == "random_state" or key.endswith("__random_state"))
                    and params.get(owner + "shuffle", True) is not False):
                # (None is left where it means "no shuffle": scikit-learn's
                # splitters, and a TargetEncoder(shuffle=False) building
                # one, refuse a seed without shuffling.)
                drawn = np.random.SeedSequence(
                    seed, spawn_key=(position, zlib.crc32(key.encode()))).generate_state(1)
                seeds[f"{path}__{key}"] = int(drawn[0])
    return seeds


def _head(estimator):
    """The steps before the DP estimator as one (unfitted or fitted) Pipeline, or None."""
    steps = _preprocessing(estimator)
    return Pipeline([(f"step{i}", step) for i, (_, step) in enumerate(steps)]) if steps else None


def _runs(step):
    """Whether a Pipeline step runs (not None or ``"passthrough"``)."""
    return not (step is None or (isinstance(step, str) and step == "passthrough"))


def _transform(head, X):
    """X through the fitted steps of ``head`` (:func:`_head`), each step's own
    ``transform``, as the Pipelines holding the DP estimator run them in
    ``predict``; not ``head.transform``, which checks that its last step has
    fitted attributes: a stateless step of the user's, whose ``fit`` returns
    ``self`` and sets nothing, failed that check, and the searches refused a
    Pipeline that predicts.  (A step that is itself a Pipeline ending in such
    a step still fails its own check, in predict too: refused before the charge.)"""
    for _, step in head.steps:
        if _runs(step):
            X = step.transform(X)
    return X


def _fresh(X, steps):
    """X, or a copy of it for a fit or a scoring pass through ``steps`` (the
    preprocessing before the DP estimator) if one of them may write to its
    input (:func:`_may_write`).

    A step that works in place (pandas' ``df[col] = np.log(df[col])``)
    changed the caller's X in the probes, and the one training part every
    candidate reads: the second candidate took the log of a log, and a
    failure after the charge came at K >= 2, telling the random search's
    secret K.  scikit-learn's searches index a fresh copy for every fit too.
    A numpy array or sparse matrix is copied; a pandas object under
    copy-on-write (pandas 3) and a polars frame are cloned without copying
    their data; other data (pyarrow tables, which cannot change, lists)
    are given as they are.
    """
    if not _may_write(steps):
        return X
    if isinstance(X, np.ndarray) or sp.issparse(X):
        return X.copy()
    if hasattr(X, "iloc"):  # pandas
        return X.copy(deep=not _pandas_copy_on_write())
    if type(X).__module__.startswith("polars") and hasattr(X, "clone"):
        # (polars has in-place methods too: replace_column, df[i, c] = v.)
        return X.clone()
    return X


def _pandas_copy_on_write():
    """Whether pandas copies a frame's data before any change (pandas 3, or the option)."""
    import pandas as pd

    try:
        return int(pd.__version__.split(".")[0]) >= 3 or pd.get_option(
            "mode.copy_on_write") is True
    except Exception:  # (an unknown version string or option: copy)
        return False


def _may_write(steps):
    """Whether a step of ``steps`` (``(path, step)`` pairs) may write to its
    input: a user's function (a ``FunctionTransformer``'s, unless None or a
    numpy ufunc such as ``np.log``, which return new arrays) or class (not
    scikit-learn's), or a scikit-learn step told ``copy=False``.
    scikit-learn's own steps otherwise leave their input alone."""
    for _, step in steps:
        for part in _parts(step):
            if not isinstance(part, BaseEstimator):
                continue
            if isinstance(part, FunctionTransformer):
                if not (part.func is None or isinstance(part.func, np.ufunc)):
                    return True
            elif not type(part).__module__.startswith("sklearn."):
                return True
            if part.get_params(deep=False).get("copy", True) is False:
                return True
    return False


def _refuse_fit_params(search, fit_params):
    """A search's ``fit`` takes X and y only, as its DP estimator's does."""
    if fit_params:
        raise TypeError(
            f"{type(search).__name__}.fit takes X and y only; got {sorted(fit_params)}. "
            "There is no sample_weight: a weight scales one record's influence, hence the "
            "sensitivity the noise is calibrated to. Nothing was charged.")


def _check_grid_keys(candidates, slot):
    reserved = {slot.key(k) for k in ("epsilon", "delta", "accountant", "random_state")}
    for params in candidates:
        bad = sorted(reserved & set(params))
        if bad:
            raise ValueError(
                f"The parameter grid may not set {bad}: the search sets the budget, "
                "the accountant and the seed of every candidate itself."
            )


#: Parameters of the DP estimator that a search sets for every fit it makes.
_SET_BY_SEARCH = ("epsilon", "delta", "random_state")


def _search_defaults(owner):
    """The constructor defaults of the parameters in :data:`_SET_BY_SEARCH`."""
    parameters = inspect.signature(type(owner)).parameters
    return {k: parameters[k].default for k in _SET_BY_SEARCH if k in parameters}


def _warn_overridden(search, owners):
    """Warn when a DP estimator of the search (the wrapped one, or one given
    as a value of the grid) sets a parameter the search overrides (to neither
    its default nor the search's own value); once per distinct setting."""
    def differs(value, other):
        return value is not other and not (np.isscalar(value) and value == other)

    shown = set()
    own, searchs = getattr(owners[0], "random_state", None), getattr(search, "random_state", None)
    if own is not None and (own is searchs or (
            isinstance(own, Integral) and isinstance(searchs, Integral) and own == searchs)):
        # Put back in best_estimator_ as given: the search's own seed, or its
        # generator in the state the search left it, published with the model.
        warn_user(
            f"The estimator's random_state is {type(search).__name__}'s own "
            f"({own!r}): best_estimator_ keeps the estimator's random_state as given, so a "
            "published best_estimator_ would carry the seed, or the generator state, the "
            "search drew its noise from. Leave the estimator's random_state at None.",
            PrivacyLeakWarning)
    for owner in owners:
        set_ = [f"{k}={getattr(owner, k)!r}" for k, default in _search_defaults(owner).items()
                if differs(getattr(owner, k), default)
                and differs(getattr(owner, k), getattr(search, k, default))]
        if set_ and tuple(set_) not in shown:
            shown.add(tuple(set_))
            warn_user(
                f"{type(search).__name__} sets epsilon, delta and random_state of every fit "
                f"it makes from its own parameters; the estimator's {', '.join(set_)} "
                "is ignored.",
                UserWarning,
            )
