"""Private hyperparameter search (SPEC sections 5 and 6).

Every search here has the shape of the paper's Algorithm 4:

1. split the data, data-independently (a seeded permutation; n is public),
   into a training part S1 and a validation part S2;
2. train candidates on S1 with DP estimators whose budget the wrapper sets;
3. select one candidate on S2 with a private selection mechanism run on a
   score of bounded sensitivity (per-example losses clipped at a public
   level, or 0/1 errors).

**Parallel composition, and the one event recorded.**  Under replace-one
adjacency a changed record lies in S1 or in S2, never in both.

- In S1: the K candidate trainings are Gaussian mechanisms, each
  ``mu_c``-GDP; together they are exactly ``sqrt(K) * mu_c``-GDP (SPEC
  section 2).  The selection sees S1 only through the candidates and S2 is the
  same on both neighbours, so it is post-processing: the whole search is
  ``sqrt(K) * mu_c``-GDP for this pair.
- In S2: the candidates have the same distribution on both neighbours, and
  given them the selection is ``epsilon_sel``-bounded-range (the
  exponential mechanism and GEM are; see
  :mod:`dp_glm_sklearn.privacy.selection`), hence
  ``bounded_range_gdp_mu(epsilon_sel) = pure_dp_gdp_mu(epsilon_sel / 2)``-GDP
  (:func:`~dp_glm_sklearn.privacy.selection.bounded_range_gdp_mu`, with its
  proof).  The pair (candidates, choice) is a mixture of these conditional
  mechanisms over the candidates, whose law does not depend on S2; it is
  therefore GDP with the same mu, by the mixture argument below (it need
  not be bounded-range itself: the conditional loss intervals move with
  the candidates).

So the search is ``max(sqrt(K) mu_c, bounded_range_gdp_mu(epsilon_sel))``-GDP:
the max of the two parts, not their sum.  This holds for every split; the split
is drawn independently of the data, and a mixture of mu-GDP mechanisms over
data-independent randomness (even if that randomness is published) is
mu-GDP: an optimal test spends type-I error ``a_s`` on split ``s`` and errs
with ``sum_s p_s T_s(a_s) >= sum_s p_s G_mu(a_s) >= G_mu(sum_s p_s a_s)`` by
convexity of ``G_mu``.  The wrappers give both parts the whole
Gaussian budget ``mu_search``: ``mu_c = mu_search / sqrt(K)`` and
``epsilon_sel = gdp_bounded_range_epsilon(mu_search) = 2 *
gdp_pure_epsilon(mu_search)``, and record (and charge the accountant)
ONE ``GaussianEvent(mu_search)``.  That event dominates both parts, composes
exactly with the library's other releases, and is (epsilon, delta)-DP at any
delta the accountant measures.  The price of expressing the selection in GDP
is that it runs at ``epsilon_sel`` below ``epsilon`` (1.15 for a total of
(3, 1e-5) without refit; treating the selection as merely epsilon-DP, as an
earlier version did, would halve that to 0.58); charging
``ApproxDPEvent(epsilon, delta)`` instead would let the selection run at
``epsilon`` but would use up ``delta`` of the accountant's budget for good and
could not be composed at a smaller delta at all.

With ``refit=True`` the winner is trained again on all the data, a further
Gaussian release composed sequentially: with ``mu = gdp_mu(epsilon, delta)``
the refit gets ``mu_refit = sqrt(refit_share) * mu`` and the search
``mu_search = sqrt(1 - refit_share) * mu`` (``refit_share`` a public
parameter in (0, 1), default ``_REFIT_SHARE``), so that the whole ``fit`` is
``sqrt(mu_search**2 + mu_refit**2) = mu``-GDP, (epsilon, delta)-DP (SPEC
section 2: exact composition).  Without refit, ``mu_search = mu``.

**What is released.**  The chosen candidate and its parameters; the
parameter grid; public calibration numbers.  No validation score, rank or
selection probability (all are functions of unnoised data) is stored or
shown anywhere.
"""

import inspect
import itertools
import math
import os
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from scipy.special import log_expit, log_softmax
from scipy.stats import rv_discrete
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.model_selection import ParameterGrid
from sklearn.pipeline import Pipeline
from sklearn.utils import get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import (
    check_consistent_length,
    check_is_fitted,
    column_or_1d,
    indexable,
)

from .._base import (
    _clones_draw_nothing,
    _IndependentNoiseOnCloneMixin,
    _n_samples,
    _rng,
    _unquoted,
    default_delta,
)
from .._sklearn_compat import (
    HasMethods,
    Interval,
    StrOptions,
    VisualBlock,
    fit_context,
    num_samples,
    safe_indexing,
    validate_params,
)
from .._warn import silenced, warn_user
from ..privacy.accountant import (
    PrivacyAccountant,
    PrivacyLeakWarning,
    _check_release,
    _DefaultAccountantMixin,
)
from ..privacy.calibration import gdp_epsilon, gdp_mu, gdp_sigma
from ..privacy.events import GaussianEvent, RandomStoppingEvent, compose, total_mu
from ..privacy.noise import add_gaussian_noise
from ..privacy.selection import (
    bounded_range_gdp_mu,
    exponential_mechanism,
    gdp_bounded_range_epsilon,
    generalized_exponential_mechanism,
    random_stopping_mu,
    random_stopping_refit_mu,
    sample_stopping_count,
)

__all__ = ["DPGridSearchCV", "DPRandomizedSearchCV"]

#: Relative slack allowed between what a candidate reports it spent and what
#: the wrapper pre-paid (the two go through the same float computations).
_PREPAID_RTOL = 1e-12

#: Share of the GDP budget (of mu**2) that DPGridSearchCV gives the refit
#: (``refit=True``); the search gets the rest.  Any share in (0, 1) is private
#: (exact GDP composition); the share is a utility trade-off.  On
#: ``benchmarks/model_selection.py`` (128 runs per cell, validation_fraction
#: 0.3, intercept feature c = X) a share of 0.8 helped on small data
#: (diabetes, 331 records, where the selection is close to a uniform draw
#: and only the refit's budget matters: R^2 0.09 against 0.05 at epsilon 1,
#: 0.27 against 0.25 at 3) and hurt where the selection has signal
#: (synthetic, 15000 records, epsilon 3: R^2 0.62, below the defaults' 0.64,
#: against 0.645 with 0.5): noisier candidates favour smaller norm bounds
#: than the refit would.  0.5 keeps the search better than the defaults
#: where searching can help.
_REFIT_SHARE = 0.5

#: Default validation_fraction of DPGridSearchCV and DPRandomizedSearchCV:
#: 0.5, as specified (issue 5).  A smaller validation part trains the
#: candidates on more records, closer to the refit; the selection needs fewer
#: (its score has sensitivity ``1 / n_val``).  On
#: ``benchmarks/model_selection.py`` (refit share 0.5, 128 runs per cell, with
#: the earlier intercept feature c = X) 0.3 against 0.5 raised the synthetic
#: R^2 at epsilon 3 from 0.62 to 0.645 and changed no other cell by more than
#: noise: with many records, pass ``validation_fraction=0.3``.
_VALIDATION_FRACTION = 0.5
# A random search checks the public plan of every combination of its listed
# values (and one public draw of each distribution) before the charge, up to
# _MAX_CHECKED_COMBINATIONS; beyond, every pair of values of two parameters,
# up to _MAX_CHECKED_PAIRS (a few ms each); else each value once.  A tier
# that sets the preprocessing steps in more than _MAX_CHECKED_STEP_SETTINGS
# ways is skipped: each is fitted on the data (on X and on each part).
_MAX_CHECKED_COMBINATIONS = 256
_MAX_CHECKED_PAIRS = 1024
_MAX_CHECKED_STEP_SETTINGS = 64

#: Scores of bounded sensitivity a search can select on.
SCORINGS = ("accuracy", "loss", "neg_mean_absolute_error", "neg_mean_squared_error")


def _child_seeds(rng, count, random_state):
    """The ``random_state`` each candidate is fitted with.

    With ``random_state=None`` every candidate draws its noise from its own
    OS-seeded generator (``None``): deriving 32-bit integer seeds from one
    generator would put all the candidates' noise in a space of 2**32 values,
    small enough to search. An integer ``random_state`` (for reproducibility,
    not for releases) derives 32-bit integer seeds from ``rng``; a Generator
    or RandomState derives generators with 128-bit seeds.  Whatever the
    seed, ``_fit_jobs`` takes it out of the fitted candidate again.
    """
    if random_state is None:
        return [None] * count
    if isinstance(random_state, Integral):
        return [int(seed) for seed in rng.integers(2**32, size=count)]
    # A Generator or RandomState (maybe OS-seeded): keep its entropy, 128
    # bits per child, rather than cutting it down to 32-bit seeds.
    return [np.random.default_rng(rng.integers(2**32, size=4)) for _ in range(count)]


# -- the DP estimator inside the searched estimator --------------------------------------
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
    fitted = list(dict.fromkeys(
        f"{name!r} ({type(step).__name__})" for name, step in steps
        if isinstance(step, BaseEstimator) and get_tags(step).requires_fit))
    if fitted:
        warn_user(
            f"{type(search).__name__}: the Pipeline step(s) {', '.join(fitted)} before the DP "
            "estimator are fitted on the private data without noise; what they learn (a "
            "StandardScaler's means and variances, an encoder's categories) is published in "
            "best_estimator_ and is not covered by privacy_spent_. Use row-wise transforms "
            "with public parameters (e.g. a FunctionTransformer acting on each row alone) "
            "to keep the whole fit private.",
            PrivacyLeakWarning,
        )


def _validate_candidates(estimator, candidates, slot):
    """Check every candidate's parameters of the DP estimator before anything is charged.

    An invalid value in the grid (say ``norm_bound=-1``) would otherwise raise
    only when its candidate is trained, after the whole budget was spent.
    """
    expected = type(slot.owner(estimator))
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
        # scikit-learn's declarative checks, of every step with them.
        parts = [candidate, *candidate.get_params(deep=True).values()]
        for part in parts:
            if isinstance(part, BaseEstimator) and hasattr(part, "_parameter_constraints"):
                validate_params(part)
        if hasattr(owner, "_y_interval") and not is_classifier(owner):
            owner._y_interval()  # a malformed y_bound


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
    params = estimator.get_params(deep=True)
    keys = [k for k in params if k == "epsilon" or k.endswith("__epsilon")]
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
            raise ValueError(
                f"The DP estimator of 'estimator' is {prefix[:-2]!r}, inside a "
                f"{type(node).__name__}; DP searches take the DP estimator itself, or a "
                "Pipeline (Pipelines may nest) whose last step it is. Other meta-estimators "
                "fit a copy of it, whose privacy the search cannot check."
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


def _head(estimator):
    """The steps before the DP estimator as one (unfitted or fitted) Pipeline, or None."""
    steps = _preprocessing(estimator)
    return Pipeline([(f"step{i}", step) for i, (_, step) in enumerate(steps)]) if steps else None


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


def _warn_overridden(search, owner):
    """Warn when the wrapped estimator sets a parameter the search overrides
    (to neither its default nor the search's own value)."""
    def differs(value, other):
        return value is not other and not (np.isscalar(value) and value == other)

    set_ = [f"{k}={getattr(owner, k)!r}" for k, default in _search_defaults(owner).items()
            if differs(getattr(owner, k), default)
            and differs(getattr(owner, k), getattr(search, k, default))]
    if set_:
        warn_user(
            f"{type(search).__name__} sets epsilon, delta and random_state of every fit "
            f"it makes from its own parameters; the estimator's {', '.join(set_)} "
            "is ignored.",
            UserWarning,
        )


def _check_scoring(estimator, slot, scoring):
    """Raise if ``scoring`` cannot be computed for ``estimator`` (before any charge)."""
    owner = slot.owner(estimator)
    if scoring == "accuracy" and not is_classifier(estimator):
        raise ValueError(
            f"scoring='accuracy' needs a classifier; got {type(estimator).__name__}. "
            f"Use one of {[s for s in SCORINGS if s != 'accuracy']}."
        )
    if scoring in ("neg_mean_absolute_error", "neg_mean_squared_error"):
        _regression_interval(owner, scoring)


# -- bounded validation scores ---------------------------------------------------
def _regression_interval(owner, scoring):
    if not hasattr(owner, "_y_interval"):
        raise ValueError(
            f"scoring={scoring!r} needs a DP regressor with a public 'y_bound'; "
            f"got {type(owner).__name__}."
        )
    return owner._y_interval()


def _augmented_feature_norm(owner):
    X = float(owner.feature_norm)
    c = owner._intercept_feature(owner.n_features_in_)
    return math.hypot(X, c)


def _glm_loss_bound(owner):
    """Sup of the training loss over the constraint ball and the public bounds.

    ``|z| <= B * X_aug`` for every clipped row; the loss is then at most
    ``phi(B X_aug + Y)`` for squared and Huber losses (residual bound),
    ``log(1 + e^{B X_aug})`` for the logistic loss and
    ``log(1 + (K - 1) e^{sqrt(2) B X_aug})`` for the multinomial loss
    (``|z_k - z_y| <= ||w_k - w_y|| X <= sqrt(2) ||W|| X``).  This is the
    paper's Delta(B) (Assumption 2); the per-example losses are clipped at it,
    so it is their exact bound whatever the model.
    """
    B = float(getattr(owner, "norm_bound_", owner.norm_bound))
    bz = B * _augmented_feature_norm(owner)
    if is_classifier(owner):
        k = len(owner.classes_)
        if k == 2:
            return float(np.logaddexp(0.0, bz))
        return float(np.logaddexp(0.0, math.log(k - 1) + math.sqrt(2.0) * bz))
    low, high = owner._y_interval()
    y_bound = (high - low) / 2 if owner.fit_intercept else max(abs(low), abs(high))
    loss = owner._get_loss()
    return float(loss.value(np.array([[bz + y_bound]]), np.zeros(1))[0])


def _glm_losses(owner, X, y):
    """Per-example training loss of a fitted DP GLM on (transformed) rows."""
    if is_classifier(owner):
        classes = owner.classes_
        known = np.isin(y, classes)
        codes = np.searchsorted(classes, np.where(known, y, classes[0]))
        # In float64 whatever the model's dtype: a float32 model's log
        # probabilities are coarser (the loss is clipped to its bound anyway).
        scores = np.asarray(owner.decision_function(X), dtype=np.float64)
        log_p = (np.column_stack([log_expit(-scores), log_expit(scores)]) if scores.ndim == 1
                 else log_softmax(scores, axis=1))[np.arange(len(codes)), codes]
        return np.where(known, -log_p, np.inf)
    low, high = owner._y_interval()
    residual = owner.predict(X) - np.clip(np.asarray(y, dtype=np.float64), low, high)
    return owner._get_loss().value(residual[:, None], np.zeros(len(residual)))


def _validation_losses(estimator, slot, scoring, X, y):
    """Per-example losses in ``[0, bound]`` and the public ``bound``.

    The mean of n such losses has replace-one sensitivity ``bound / n``.
    Validation rows are not clipped: a huge one overflows the prediction or
    the loss to inf or NaN, which the clip to ``[0, bound]`` turns into the
    bound.  numpy's floating-point warnings, and the warnings of a user's
    steps transforming the validation rows, are not shown: whether they
    appear depends on one private record, once per candidate they would
    count the random search's secret K, and under warnings-as-errors one
    would raise after the charge.
    """
    with silenced(), np.errstate(all="ignore"):
        return _clipped_losses(estimator, slot, scoring, X, y)


def _clipped_losses(estimator, slot, scoring, X, y):
    if scoring == "accuracy":
        losses = (np.asarray(estimator.predict(X)) != np.asarray(y)).astype(np.float64)
        return losses, 1.0
    owner = slot.owner(estimator)
    if scoring == "loss":
        head = _head(estimator)  # fitted: the Pipelines' steps before the DP estimator
        if head is not None:
            X = head.transform(X)
        bound = _glm_loss_bound(owner)
        losses = _glm_losses(owner, X, y)
    else:
        low, high = _regression_interval(owner, scoring)
        pred = np.clip(np.asarray(estimator.predict(X), dtype=np.float64), low, high)
        error = np.abs(pred - np.clip(np.asarray(y, dtype=np.float64), low, high))
        if scoring == "neg_mean_absolute_error":
            losses, bound = error, high - low
        else:
            losses, bound = error**2, (high - low) ** 2
    losses = np.nan_to_num(losses, nan=bound, posinf=bound)
    return np.clip(losses, 0.0, bound), float(bound)


#: Beginnings of scikit-learn's input-validation messages that quote no value
#: of the data, nor a count that a preprocessing step could make private.
_SAFE_STEP_ERRORS = ("Input X contains", "Input contains", "Input y contains",
                     "Found array with dim")

#: Beginning of numpy's message for an object in X that is not a number: it
#: names the object's type only (the bare estimator raises it too).
_SAFE_TYPE_ERRORS = ("float() argument must be",)

#: Beginnings of scikit-learn's messages that quote shapes or sample counts:
#: public for the data given, private after a step that drops rows or
#: selects features on the data.
_SHAPE_ERRORS = ("Found array with", "Found input variables with inconsistent")


def _probe_head(head, X, y, parts):
    """Fit the preprocessing ``head`` on X (returned transformed) and on each training part.

    Probes before the charge: what they warn is not shown (it may depend on
    one record, and in the random search on K; the fits warn later).  Their
    errors are replaced by ones that quote no data: a step's own message may
    (a ``OneHotEncoder`` names the unknown category, often the rarest, most
    identifying value; a lookup in a ``FunctionTransformer`` raises a
    ``KeyError`` naming the key; a step after one that drops rows states
    the private number of rows kept).  Nor do they say which setting of the
    grid failed, or how: where a setting starts to fail can depend on the
    data (a ``VarianceThreshold`` grid would bracket the largest variance).
    """
    steps = ", ".join(type(step).__name__ for _, step in head.steps)
    try:
        with silenced(), np.errstate(all="ignore"):
            Xt = clone(head).fit_transform(X, y)
            for train, val in parts:
                part = clone(head).fit(safe_indexing(X, train), safe_indexing(y, train))
                part.transform(safe_indexing(X, val))
            return Xt
    except Exception as exc:
        safe = (isinstance(exc, ValueError) and str(exc).startswith(_SAFE_STEP_ERRORS)
                or isinstance(exc, TypeError) and str(exc).startswith(_SAFE_TYPE_ERRORS))
        # A new error, raised outside this block: the original stays out of
        # its context (a step may have raised it while handling another).
        error = type(exc)(str(exc)) if safe else _unquoted(
            exc, f"the preprocessing steps ({steps})") or ValueError(
            f"The preprocessing steps before the DP estimator ({steps}) failed on the data, "
            "on all of it or on a training part of the search, for some setting of the grid, "
            "before anything was charged. What failed is not shown: it may tell values of "
            "the data. Check the grid's settings against the data's public shape, or fit the "
            "steps on the data yourself to see why.")
    raise error


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


# -- training candidates -------------------------------------------------------------
def _fit_candidate(estimator, params, slot, X, y, parent_pid):
    """Fit one candidate; the search has pre-paid its privacy cost.

    The candidate charges a fresh, infinite accountant created here (in the
    worker process when run in parallel), which is thrown away: the user's
    accountant receives the wrapper's single charge instead.
    """
    estimator.set_params(**params)
    estimator.set_params(**{slot.key("accountant"): PrivacyAccountant()})
    # No warning of a fit is shown, nor numpy's floating-point warnings: a
    # user's step can warn on one private record (a FunctionTransformer's
    # check_inverse, a transform overflowing), after the search's charge.
    # The DP estimator's own warnings (an unused option) were shown before
    # the charge, by _check_public_plans.
    with np.errstate(all="ignore"):
        if os.getpid() == parent_pid:
            estimator.fit(X, y)  # in the parent's threads: _fit_jobs silences them
        else:
            # One task at a time per worker process: its filters are its own.
            with silenced():
                estimator.fit(X, y)
    return estimator


def _check_prepaid(estimator, slot, mu):
    """Raise if a fitted candidate released more than the ``mu``-GDP paid for."""
    events = slot.owner(estimator).privacy_events_
    spent = total_mu(events)
    if spent is None or spent > mu * (1.0 + _PREPAID_RTOL):
        raise RuntimeError(
            f"a candidate released {events!r}, more than the GaussianEvent(mu={mu!r}) "
            "the search paid for; its result is withheld."
        )


def _restore_accountant(estimator, slot, accountant):
    """Give the chosen estimator back an accountant: the search's if it had
    one, else its own original parameter, so that refitting it is charged
    like any fit."""
    value = accountant if accountant is not None else slot.accountant
    estimator.set_params(**{slot.key("accountant"): value})
    return estimator


def _candidate_privacy(mu, delta, who="each candidate", remedy="use fewer candidates"):
    """(epsilon, mu) of a candidate trained at GDP budget ``mu`` and ``delta``.

    The candidate is given ``epsilon = gdp_epsilon(mu, delta)``; the mu it
    then calibrates to, ``gdp_mu(epsilon, delta)``, is what the search pays.
    ``who`` and ``remedy`` word the error for the fit concerned.
    """
    if mu == math.inf:
        return math.inf, math.inf
    epsilon = gdp_epsilon(mu, delta)
    if epsilon <= 0.0:
        raise ValueError(
            f"The budget is too small for {who}: its share is mu={mu:.3g}-GDP, which is "
            f"(0, {delta:.3g})-DP already, so no epsilon > 0 can be given to it. Raise "
            f"epsilon{', ' + remedy + ',' if remedy else ''} or lower delta if it is large."
        )
    return epsilon, gdp_mu(epsilon, delta)


# -- the searches -------------------------------------------------------------------
def _search_estimator_has(attr):
    def check(self):
        if hasattr(self, "best_estimator_"):
            getattr(self.best_estimator_, attr)
        else:
            getattr(self.estimator, attr)
        return True

    return check


#: The Parameters shared by the searches, in three pieces so that each
#: class lists its parameters in the order of its signature.
_PARAMS_BUDGET = """epsilon : float in (0, inf], default=1.0
        Total privacy budget of ``fit``: the whole search (every candidate
        and the selection, plus the refit when ``refit=True``) is
        (epsilon, delta)-DP. ``np.inf`` runs without privacy.

    delta : float in (0, 1), default=None
        Total delta. ``None`` uses ``min(1e-5, n_samples**-1.5)``.

    scoring : {{"accuracy", "loss", "neg_mean_absolute_error", \
"neg_mean_squared_error"}}, default=None
        Score of bounded sensitivity the selection uses, computed on the
        validation part (``n_val`` records):

        - ``"accuracy"``: 0/1 errors, sensitivity ``1 / n_val``;
        - ``"loss"``: the estimator's training loss, each per-example loss
          clipped at its sup over the constraint ball (paper's Delta(B),
          which grows with ``norm_bound``), sensitivity ``Delta(B) / n_val``
          per candidate;
        - ``"neg_mean_absolute_error"``, ``"neg_mean_squared_error"``
          (regression): the error of the prediction clipped to the public
          label interval ``y_bound``, sensitivity ``(high - low) / n_val``
          and ``(high - low)**2 / n_val``.

        ``None`` means ``"accuracy"`` for classifiers and
        ``"neg_mean_absolute_error"`` for regressors (on the benchmark the
        absolute error's smaller range made it the sharper private score)."""

_PARAMS_SPLIT = """validation_fraction : float in (0, 1), default={validation_fraction}
        Fraction of the samples (a seeded random permutation, independent of
        the data) held out for the selection.

    refit : bool, default=False
        What serves ``predict``, ``score`` and the other delegated methods.

        - ``False``: the chosen candidate itself, as it was trained on the
          training part (``1 - validation_fraction`` of the samples) with
          the per-candidate budget ``candidate_privacy_``, is
          ``best_estimator_``. The search gets the whole budget and no
          record is used twice.
        - ``True``: the chosen parameters are trained again on all the data
          and that model is ``best_estimator_``. The refit is a further
          release and is charged too: the search and the refit share the
          budget (see Notes), the total staying (epsilon, delta).

        Refitting trades a noisier search for a final model trained on
        every record at a larger budget than any candidate; on
        ``benchmarks/model_selection.py`` it gave the better test metric on
        every data set and epsilon, by far the most on small data
        (diabetes, 331 records), where a candidate trained on part of the
        records at a fraction of the budget is very noisy."""

_REFIT_REMEDY = "raise refit_share"

#: The largest mean number of candidates of DPRandomizedSearchCV.
_MAX_MEAN_CANDIDATES = 1000.0

_PARAMS_RUN = """n_jobs : int, default=None
        Candidates trained in parallel by joblib (``-1``: all cores; 0 is
        refused, before anything is charged). Every candidate runs pre-paid,
        so worker processes never charge an accountant.

    random_state : int, RandomState instance, Generator or None, default=None
        Seeds the split, the candidates' noise and the selection. ``None``
        draws from the operating system.

    accountant : PrivacyAccountant, default=None
        Accountant charged once per ``fit``, before any data is read.
        ``None`` uses the DP estimator's own ``accountant`` if it has one,
        else the process-wide default. Giving both, different, is an error."""

_SHARED_ATTRIBUTES = """best_estimator_ : estimator
        The model that ``predict`` and ``score`` use: the chosen candidate
        as trained on the training part (``refit=False``), or its refit on
        all the data (``refit=True``). Its ``accountant`` parameter is the
        search's accountant if one was given, else the one of ``estimator``,
        so that refitting it is charged like any fit; its ``privacy_spent_``
        is its own share of the budget (``candidate_privacy_`` without
        refit).

    best_params_ : dict
        Parameters of the chosen candidate.

    best_index_ : int
        Index of the chosen candidate in ``cv_results_["params"]``.

    cv_results_ : dict of arrays
        ``"params"`` and one ``"param_<name>"`` masked array per parameter,
        ``"selected"`` (the chosen candidate), and ``"score_sensitivity"``
        (public). No validation score: it would leak.

    privacy_events_ : list of GaussianEvent
        What ``fit`` released: one event for the search (see Notes) and one
        for the refit.

    privacy_spent_ : tuple (epsilon, delta)
        Guarantee of ``fit``, derived from ``privacy_events_``.

    candidate_privacy_ : tuple (epsilon, delta)
        Budget each candidate was trained with.

    selection_epsilon_ : float
        Epsilon of the selection (pure DP, and bounded-range: see Notes)."""


class _BaseDPSearch(_IndependentNoiseOnCloneMixin, _DefaultAccountantMixin, MetaEstimatorMixin,
                    BaseEstimator):
    """Machinery shared by the DP searches; not for direct use."""

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "predict"])],
        "epsilon": [Interval(Real, 0, np.inf, closed="right")],
        "delta": [Interval(Real, 0, 1, closed="neither"), None],
        "scoring": [StrOptions(set(SCORINGS)), None],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "refit": ["boolean"],
        # joblib's meaning: -1 all cores, -2 all but one, ...; 0 has none.
        "n_jobs": [Interval(Integral, None, -1, closed="right"),
                   Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state", np.random.Generator],
        "accountant": [PrivacyAccountant, None],
    }

    # -- helpers -------------------------------------------------------------
    def _scoring(self):
        if self.scoring is not None:
            return self.scoring
        return "accuracy" if is_classifier(self.estimator) else "neg_mean_absolute_error"

    def _accountant(self, slot):
        if self.accountant is not None:
            if slot.accountant is not None and slot.accountant is not self.accountant:
                raise ValueError(
                    "The search and its estimator were given different accountants; "
                    "give the accountant to one of them."
                )
            return self.accountant
        return slot.accountant if slot.accountant is not None else self._default_accountant()

    def _check_budget(self, slot, events, delta):
        """The accountant to charge, once it is known to afford ``events``.

        The first step of every fit, before any data value is read and
        before anything is drawn from ``random_state`` (a refusal leaves a
        user's generator as it was).  ``events`` are the fit's cost at
        ``(self.epsilon, delta)``.
        """
        accountant = self._accountant(slot)
        _check_release(accountant, events, float(self.epsilon), delta)
        return accountant

    def _charge(self, accountant, slot, events, source, X, y, candidates, parts, fits):
        """The fit's one charge, made safely; returns :meth:`_prepare`'s ``(X, y, fixed)``.

        ``accountant`` comes from :meth:`_check_budget`: the budget was
        checked before any data value was read.  The input is validated here
        (bad input raises and releases nothing), and only then are ``events``
        spent (the charge checks the budget again, atomically).  ``fits``
        lists the public ``(n_samples, epsilon, delta)`` of the fits to come
        (candidates, chunks, refit).
        """
        X, y, fixed = self._prepare(slot, X, y, candidates, parts, fits)
        accountant._record(events, source=source)
        return X, y, fixed

    def _prepare(self, slot, X, y, candidates, parts, fits):
        """Check everything bad input could break, before the charge.

        Returns ``(X, y, fixed)``: X and y made indexable, and the parameters
        every fit gets besides its budget and its own ``candidates`` entry.  A
        classifier that does not declare its classes gets them here, read
        from y once (one :class:`PrivacyLeakWarning`, and every candidate
        knows every class, even one absent from its part of the data); a
        candidate that declares them keeps its own.  X is validated as the DP
        estimator of each candidate will see it: directly, or after the
        preprocessing steps of the Pipelines ending in it (fitted here on
        clones, once per distinct setting of those steps, then thrown away),
        and y against each distinct setting of the DP estimator.  ``parts``
        lists the ``(train, validation)`` row indices the fit will use (drawn
        before the charge: they do not depend on the data): each distinct
        setting of the preprocessing steps is also fitted on each training
        part and applied to its validation part, as the candidates will be,
        so that a step failing there (say, a ``OneHotEncoder`` meeting a
        category absent from its training part) fails before the charge.
        Last, each distinct setting of the DP estimator goes through the
        public half of its fit (bounds, options and calibration, at each
        of the ``fits``' sizes and budgets), so that a value it refuses is
        refused here; the warnings of that half (an unused option) are
        shown here, so that under warnings-as-errors they raise before the
        charge.  The fits themselves show no warning (a step can warn on one
        record).
        """
        owner = slot.owner(self.estimator)
        _warn_overridden(self, owner)
        possible = self._possible_candidates(candidates, slot)
        _warn_fitted_preprocessing(self, slot, possible)
        _check_scoring(self.estimator, slot, self._scoring())
        _n_samples(y, type(self).__name__, what="y")
        X, y = indexable(X, y)
        check_consistent_length(X, y)
        if np.ndim(y) != 1:
            # One label per row: a column y broadcast against the predictions
            # made each validation loss an n_val x n_val matrix, in which one
            # record moves a row and a column (twice the declared sensitivity).
            y = column_or_1d(y, warn=True)
        if not hasattr(owner, "_validated"):
            return X, y, {}
        shape = getattr(X, "shape", None)
        if shape is not None and len(shape) == 2 and shape[1] == 0:
            # Public (X as given); a step's own message could not say so.
            raise ValueError(f"Found array with 0 feature(s) (shape={tuple(shape)}) while a "
                             f"minimum of 1 is required by {type(self).__name__}.")
        # Parts are public: norm_bound="auto" needs 2 samples in each training part.
        smallest = min((len(train) for train, _ in parts), default=None)
        heads, checked, probed, plans = {}, {}, set(), []
        # Every value that could be drawn, then the draws: whether the random
        # search refuses a listed value must not depend on its secret K.
        for params in itertools.chain(possible, candidates):
            own = {k: v for k, v in params.items() if slot.owns(k)}
            rest = {k: v for k, v in params.items() if not slot.owns(k)}
            own_key, head_key = _params_key(own), _params_key(rest)
            if (head_key, own_key) in probed:
                continue
            probed.add((head_key, own_key))
            candidate = _with_params(self.estimator, params)
            head = _head(candidate)
            if head is None:
                Xt = X
            elif head_key not in heads:
                Xt = heads[head_key] = _probe_head(head, X, y, parts)
            else:
                Xt = heads[head_key]
            probe = clone(slot.owner(candidate))
            if probe.get_params().get("norm_bound") == "auto" and smallest is not None \
                    and smallest < 2:
                raise ValueError(
                    f"norm_bound='auto' needs at least 2 samples to train on; a training "
                    f"part of {type(self).__name__} has {smallest} (n_samples="
                    f"{num_samples(X)})."
                )
            # The validation reads the estimator's classes only (its other
            # parameters act in the public plan): once per preprocessing
            # setting and classes.
            key = (head_key, _value_key(probe.get_params().get("classes")))
            if key not in checked:
                with silenced():
                    # Not shown: one per distinct drawn candidate, they would
                    # count the random search's secret K.
                    checked[key] = _validated_after(head, probe, Xt, y)
            X_checked, y_checked = checked[key]
            plans.append((probe, X_checked.shape[1]))
        fixed = {}
        if is_classifier(owner) and any(
                slot.owner(_with_params(self.estimator, params)).classes is None
                for params in possible):
            # Whether classes are read from y (one PrivacyLeakWarning) depends
            # on the candidates that could be drawn, not on those drawn.
            reader = clone(plans[-1][0]).set_params(classes=None)
            fixed = {slot.key("classes"): reader._check_targets(y_checked, warn=True)}
        self._check_public_plans(plans, fits, fixed.get(slot.key("classes")))
        return X, y, fixed

    def _check_public_plans(self, plans, fits, classes):
        """Run the public half of each ``(probe, n_features)``'s fits; show their warnings.

        (n_features is counted after preprocessing fitted on all rows; a step
        fitted on the data can give a training part other counts.)
        """
        caught = []
        for probe, n_features in plans:
            own = probe._declared_classes() if is_classifier(probe) \
                and probe.classes is not None else classes
            for fit_probe, n_samples, epsilon, delta in _public_fits(probe, fits):
                method = fit_probe._check_public_plan(n_samples, n_features, epsilon, delta,
                                                      own)
                caught += [(UserWarning, m)
                           for m in fit_probe._unused_options(method, n_features)]
        self._show_candidate_warnings(caught)

    def _possible_candidates(self, candidates, slot):
        """The settings checked before the charge besides the candidates themselves."""
        return candidates

    def _validation_size(self, n_samples):
        """Size of the validation part, from the public n; raises before any charge."""
        n_val = int(round(self.validation_fraction * n_samples))
        if not 1 <= n_val <= n_samples - 1:
            raise ValueError(
                f"validation_fraction={self.validation_fraction!r} leaves {n_val} of "
                f"{n_samples} samples for validation; both parts need at least one sample."
            )
        return n_val

    def _split(self, n_samples, rng):
        n_val = self._validation_size(n_samples)
        permutation = rng.permutation(n_samples)
        return permutation[n_val:], permutation[:n_val]

    def _fit_all(self, slot, candidates, fixed, X, y, seeds):
        """Fit ``clone(estimator)`` with each candidate's params on (X, y), in parallel."""
        return self._fit_jobs(slot, [(params, fixed, X, y, seed)
                                     for params, seed in zip(candidates, seeds, strict=True)])

    def _fit_jobs(self, slot, jobs):
        """Fit ``clone(estimator)`` once per ``(params, fixed, X, y, seed)``, in parallel."""
        delayed_jobs = []
        for params, fixed, X, y, seed in jobs:
            extra = {slot.key("random_state"): seed} if slot.has_random_state else {}
            est = clone(self.estimator)
            # Do not ship the user's accountant to workers; _fit_candidate
            # installs a throwaway one there.
            est.set_params(**{slot.key("accountant"): None})
            # fixed first: a candidate's own classes win over those read from y
            # (the budget keys cannot be in params: _check_grid_keys).
            delayed_jobs.append(delayed(_fit_candidate)(
                est, {**fixed, **_cloned(params), **extra}, slot, X, y, os.getpid()))
        # Silenced here, around all the candidates: the warnings filters are
        # process-wide, so the threading backend's workers are silenced too
        # (_fit_candidate silences a worker process itself).
        with silenced():
            fitted = Parallel(n_jobs=self.n_jobs)(delayed_jobs)
        if slot.has_random_state:
            # The child seed decides the candidate's noise: whoever holds it
            # can subtract the noise from the released model.  It must not
            # stay in a public parameter of best_estimator_ (get_params,
            # pickles); the parameter goes back to the user's own object,
            # here in the parent (a worker process has only a copy of it: a
            # copied generator would replay the noise of the user's fits).
            for est in fitted:
                est.set_params(**{slot.key("random_state"): slot.random_state})
        return fitted

    def _show_candidate_warnings(self, caught):
        """Show each distinct warning of the fits' public plans once.

        Candidates repeat their warnings (the same unused option in every
        fit).  The number of candidates is public here; see
        ``DPRandomizedSearchCV`` for a search where it is not.
        """
        for category, message in dict.fromkeys(caught):
            warn_user(message, category)

    def _validation_utilities(self, fitted, slot, X_val, y_val):
        scoring = self._scoring()
        n_val = num_samples(X_val)
        utilities, sensitivities = [], []
        for est in fitted:
            losses, bound = _validation_losses(est, slot, scoring, X_val, y_val)
            if losses.shape != (n_val,):  # the sensitivity bound / n_val needs one per row
                raise RuntimeError(
                    f"a candidate's validation losses have shape {losses.shape}, not "
                    f"({n_val},): one loss per validation row is needed for the declared "
                    "sensitivity; the selection is withheld.")
            utilities.append(-losses.mean())
            sensitivities.append(bound / n_val)
        return np.asarray(utilities), np.asarray(sensitivities)

    def _fits(self, plan, n_train, n_samples):
        """The public ``(n_samples, epsilon, delta)`` of the candidates and the refit."""
        fits = [(n_train, plan["candidate_epsilon"], plan["candidate_delta"])]
        if self.refit:
            fits.append((n_samples, plan["refit_epsilon"], plan["refit_delta"]))
        return fits

    def _fit_candidates(self, slot, plan, fixed, jobs):
        """Fit each ``(params, X, y, seed)`` at the plan's candidate budget, pre-paid."""
        budget = {**fixed, slot.key("epsilon"): plan["candidate_epsilon"],
                  slot.key("delta"): plan["candidate_delta"]}
        fitted = self._fit_jobs(slot, [(params, budget, X, y, seed)
                                       for params, X, y, seed in jobs])
        for est in fitted:
            _check_prepaid(est, slot, plan["mu_candidate"])
        return fitted

    def _refit(self, params, slot, X, y, plan, rng, fixed):
        fixed = {**fixed, slot.key("epsilon"): plan["refit_epsilon"],
                 slot.key("delta"): plan["refit_delta"]}
        (est,) = self._fit_all(slot, [params], fixed, X, y, _child_seeds(rng, 1, self.random_state))
        _check_prepaid(est, slot, plan["mu_refit"])
        return est

    def _set_privacy(self, plan):
        """``candidate_privacy_``, ``privacy_events_`` and ``privacy_spent_`` from the plan."""
        self.candidate_privacy_ = (float(plan["candidate_epsilon"]), plan["candidate_delta"])
        self.privacy_events_ = list(plan["events"])
        self.privacy_spent_ = (float(compose(self.privacy_events_, plan["delta"])), plan["delta"])

    def _set_results(self, candidates, best, sensitivities):
        """``cv_results_`` with public content only."""
        results = {"params": list(candidates)}
        names = sorted({k for params in candidates for k in params})
        for name in names:
            given = {i: params[name] for i, params in enumerate(candidates) if name in params}
            column = np.ma.MaskedArray(np.empty(len(candidates), dtype=_column_dtype(given)),
                                       mask=True)
            for i, value in given.items():
                column[i] = value
            results[f"param_{name}"] = column
        results["selected"] = np.arange(len(candidates)) == best
        results["score_sensitivity"] = np.asarray(sensitivities, dtype=np.float64)
        self.cv_results_ = results

    # -- delegation ----------------------------------------------------------
    @available_if(_search_estimator_has("predict"))
    def predict(self, X):
        """Predict with the chosen estimator."""
        check_is_fitted(self)
        return self.best_estimator_.predict(X)

    @available_if(_search_estimator_has("predict_proba"))
    def predict_proba(self, X):
        """Class probabilities of the chosen estimator."""
        check_is_fitted(self)
        return self.best_estimator_.predict_proba(X)

    @available_if(_search_estimator_has("predict_log_proba"))
    def predict_log_proba(self, X):
        """Log class probabilities of the chosen estimator."""
        check_is_fitted(self)
        return self.best_estimator_.predict_log_proba(X)

    @available_if(_search_estimator_has("decision_function"))
    def decision_function(self, X):
        """Decision function of the chosen estimator."""
        check_is_fitted(self)
        return self.best_estimator_.decision_function(X)

    @available_if(_search_estimator_has("transform"))
    def transform(self, X):
        """Transform with the chosen estimator."""
        check_is_fitted(self)
        return self.best_estimator_.transform(X)

    @available_if(_search_estimator_has("score"))
    def score(self, X, y, sample_weight=None):
        """Score of the chosen estimator on (X, y), by the search's ``scoring``.

        With ``scoring=None``, the chosen estimator's own ``score`` (R^2 or
        accuracy), as scikit-learn's searches do.  Otherwise the score the
        selection used: the accuracy, or minus the mean of the bounded
        per-example losses (predictions and labels clipped to ``y_bound``,
        losses clipped at their bound; see ``scoring``), weighted by
        ``sample_weight`` if given.

        Not private with respect to (X, y): score public or held-out test data.
        """
        check_is_fitted(self)
        best = self.best_estimator_
        if self.scoring is None:
            if sample_weight is None:
                return best.score(X, y)
            return best.score(X, y, sample_weight=sample_weight)
        y = column_or_1d(y, warn=True)
        check_consistent_length(X, y, sample_weight)
        weights = None if sample_weight is None else column_or_1d(sample_weight).astype(np.float64)
        if self.scoring == "accuracy":  # as accuracy_score computes it
            return float(np.average(np.asarray(best.predict(X)) == y, weights=weights))
        losses, _ = _clipped_losses(best, _find_dp_slot(best), self.scoring, X, y)
        return -float(np.average(losses, weights=weights))

    @property
    def classes_(self):
        """Class labels of the chosen estimator."""
        check_is_fitted(self)
        return self.best_estimator_.classes_

    def _best_estimator_attribute(self, name):
        """``best_estimator_.<name>``; AttributeError (so hasattr is False) when unfitted."""
        try:
            check_is_fitted(self)
        except Exception as exc:  # NotFittedError
            raise AttributeError(f"{type(self).__name__} object has no {name} attribute.") from exc
        return getattr(self.best_estimator_, name)

    @property
    def n_features_in_(self):
        """Number of features seen during ``fit``."""
        return self._best_estimator_attribute("n_features_in_")

    @property
    def feature_names_in_(self):
        """Names of the features seen during ``fit`` (when X had string column names)."""
        return self._best_estimator_attribute("feature_names_in_")

    def _sk_visual_block_(self):
        """The HTML diagram shows ``best_estimator_`` once fitted, as scikit-learn's searches."""
        if VisualBlock is None:  # scikit-learn moved it: its default diagram instead
            raise AttributeError("_sk_visual_block_")
        key = "best_estimator_" if hasattr(self, "best_estimator_") else "estimator"
        shown = getattr(self, key)
        return VisualBlock("parallel", [shown], names=[f"{key}: {type(shown).__name__}"],
                           name_details=[str(shown)])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        sub = get_tags(self.estimator)
        tags.estimator_type = sub.estimator_type
        tags.classifier_tags = sub.classifier_tags
        tags.regressor_tags = sub.regressor_tags
        tags.input_tags.sparse = sub.input_tags.sparse
        return tags


class DPGridSearchCV(_BaseDPSearch):
    """Differentially private search over a parameter grid.

    Replaces :class:`sklearn.model_selection.GridSearchCV`, whose k-fold
    cross-validation reuses every record k times and reports raw scores.
    Here each candidate of the grid is trained once, on a training part of
    the data, by a DP estimator whose budget the search sets, and one
    candidate is chosen privately on the held-out validation part (Arora
    et al. 2022, Algorithm 4). The whole ``fit`` is
    (epsilon, delta)-DP and charges the accountant once.

    Parameters
    ----------
    estimator : estimator
        A DP estimator of this library, or a Pipeline ending in one (grid
        keys such as ``"dpl__norm_bound"``; Pipelines may nest). Other
        meta-estimators (``TransformedTargetRegressor``, ensembles) fit a
        copy of the DP estimator and are refused. Its ``epsilon``, ``delta``,
        ``accountant`` and ``random_state`` are set by the search.

    param_grid : dict or list of dicts
        As in GridSearchCV. It may not contain the privacy parameters.

    {budget}

    selection : {{"gem", "exponential"}}, default="gem"
        The private selection: the generalized exponential mechanism
        (Raskhodnikova and Smith 2016), for scores whose sensitivities differ
        between candidates, or the exponential mechanism (report-noisy-max)
        at the largest sensitivity. When all candidates share one
        sensitivity, GEM's normalized score is the exponential mechanism's
        at half the epsilon, so ``"gem"`` then runs the exponential
        mechanism.

    {split}

    refit_share : float in (0, 1), default={refit_share}
        With ``refit=True``, the share of the GDP budget (of ``mu**2``) that
        the refit gets; the search gets the rest. Ignored without refit. Any
        value is private; it trades the quality of the final model against
        that of the selection. On very small data, where the candidates
        are too noisy to rank the parameters, a larger share (0.8) gave
        the better model on ``benchmarks/model_selection.py``; where the
        selection has signal, 0.5 did.

    {run}

    Attributes
    ----------
    {attributes}

    See Also
    --------
    DPRandomizedSearchCV : random search with random stopping, whose cost
        does not grow with the number of candidates.

    Notes
    -----
    Privacy (replace-one adjacency, n public). The split is a permutation
    drawn from ``random_state`` alone. With K candidates and
    ``mu = gdp_mu(epsilon, delta)`` (multiplied by ``sqrt(1 - s)`` when
    ``refit=True``, the refit getting ``sqrt(s) * mu``, ``s = refit_share``),
    each candidate is trained at ``mu / sqrt(K)`` (exact GDP composition on
    the training part) and the selection runs at
    ``epsilon_sel = 2 log(Phi(mu/2) / Phi(-mu/2))``, the largest epsilon
    whose bounded-range mechanisms (the exponential mechanism and GEM are
    epsilon-bounded-range) ``mu``-GDP dominates. A record is in one part only, so the search is
    ``mu``-GDP (parallel composition: the max of the two parts, see
    :mod:`dp_glm_sklearn.model_selection`), recorded as one
    ``GaussianEvent(mu)``. The budget is checked before any data is read;
    a refused search raises ``BudgetExceededError`` and trains nothing.

    The wall-clock time of ``fit`` depends on the data only as the
    candidates' training does.

    Examples
    --------
    >>> import numpy as np
    >>> from dp_glm_sklearn import DPGridSearchCV, DPLogisticRegression, PrivacyAccountant
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(4000, 3))
    >>> y = (X @ [1.0, -1.0, 0.5] > 0).astype(int)
    >>> acc = PrivacyAccountant(epsilon=2.0, delta=1e-5)
    >>> search = DPGridSearchCV(
    ...     DPLogisticRegression(feature_norm=4.0, classes=[0, 1]),
    ...     {{"norm_bound": [0.1, 1.0, 10.0]}}, epsilon=1.0, delta=1e-5,
    ...     accountant=acc, random_state=0).fit(X, y)
    >>> search.best_params_
    {{'norm_bound': 10.0}}
    >>> epsilon, delta = search.privacy_spent_
    >>> round(epsilon, 6), delta
    (1.0, 1e-05)
    >>> bool(search.score(X, y) > 0.9)
    True
    >>> "mean_test_score" in search.cv_results_   # no raw score is kept
    False
    """

    # Set by fit_auto_norm_bound on the search it runs: the wording of the
    # "budget too small" error and the source of its ledger entry.
    _candidate_words = ()
    _ledger_source = None

    _parameter_constraints: dict = {
        **_BaseDPSearch._parameter_constraints,
        "param_grid": [dict, list],
        "selection": [StrOptions({"gem", "exponential"})],
        "refit_share": [Interval(Real, 0, 1, closed="neither")],
    }

    def __init__(self, estimator, param_grid, *, epsilon=1.0, delta=None, scoring=None,
                 selection="gem", validation_fraction=_VALIDATION_FRACTION, refit=False,
                 refit_share=_REFIT_SHARE, n_jobs=None, random_state=None, accountant=None):
        self.estimator = estimator
        self.param_grid = param_grid
        self.epsilon = epsilon
        self.delta = delta
        self.scoring = scoring
        self.selection = selection
        self.validation_fraction = validation_fraction
        self.refit = refit
        self.refit_share = refit_share
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.accountant = accountant

    def _plan(self, n_candidates, n_samples):
        """Public calibration: per-candidate budget, selection epsilon, events."""
        delta = default_delta(n_samples) if self.delta is None else float(self.delta)
        mu = gdp_mu(float(self.epsilon), delta)
        share = float(self.refit_share) if self.refit else 0.0
        mu_search, mu_refit = mu * math.sqrt(1.0 - share), mu * math.sqrt(share)
        candidate_epsilon, mu_candidate = _candidate_privacy(
            mu_search / math.sqrt(n_candidates), delta, *self._candidate_words)
        selection_epsilon = gdp_bounded_range_epsilon(mu_search)
        mu_event = max(math.sqrt(n_candidates) * mu_candidate,
                       bounded_range_gdp_mu(selection_epsilon))
        events = [GaussianEvent(
            mu=mu_event,
            label=f"DPGridSearchCV: {n_candidates} candidates || selection "
                  f"(epsilon={selection_epsilon:.4g})",
        )]
        plan = dict(delta=delta, candidate_epsilon=candidate_epsilon, candidate_delta=delta,
                    mu_candidate=mu_candidate, selection_epsilon=selection_epsilon, events=events)
        if self.refit:
            refit_epsilon, mu_refit_paid = _candidate_privacy(mu_refit, delta, "the refit",
                                                              _REFIT_REMEDY)
            events.append(GaussianEvent(mu=mu_refit_paid, label="DPGridSearchCV: refit"))
            plan.update(refit_epsilon=refit_epsilon, refit_delta=delta, mu_refit=mu_refit_paid)
        return plan

    @fit_context(prefer_skip_nested_validation=False)
    @_clones_draw_nothing
    def fit(self, X, y):
        """Train every candidate on the training part and select one privately.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Targets.

        Returns
        -------
        self : object

        Raises
        ------
        BudgetExceededError
            If the accountant cannot afford (epsilon, delta); nothing is
            trained.
        """
        candidates = list(ParameterGrid(self.param_grid))
        if not candidates:
            raise ValueError("The 'param_grid' parameter must contain at least one candidate.")
        slot = _find_dp_slot(self.estimator)
        _check_grid_keys(candidates, slot)
        _validate_candidates(self.estimator, candidates, slot)
        n_samples = _n_samples(X, type(self).__name__)
        self._validation_size(n_samples)
        plan = self._plan(len(candidates), n_samples)
        source = self._ledger_source or f"{type(self).__name__}(K={len(candidates)})"
        accountant = self._check_budget(slot, plan["events"], plan["delta"])
        rng = _rng(self.random_state)
        train, val = self._split(n_samples, rng)  # data-independent: drawn before the charge
        X, y, fixed = self._charge(accountant, slot, plan["events"], source, X, y, candidates,
                                   parts=[(train, val)],
                                   fits=self._fits(plan, len(train), n_samples))
        X_tr, y_tr = safe_indexing(X, train), safe_indexing(y, train)
        X_val, y_val = safe_indexing(X, val), safe_indexing(y, val)
        seeds = _child_seeds(rng, len(candidates), self.random_state)
        fitted = self._fit_candidates(slot, plan, fixed, [
            (params, X_tr, y_tr, seed) for params, seed in zip(candidates, seeds, strict=True)])

        utilities, sensitivities = self._validation_utilities(fitted, slot, X_val, y_val)
        best = self._select(utilities, sensitivities, plan["selection_epsilon"], rng)
        del utilities  # never stored

        best_estimator = fitted[best]
        if self.refit:
            best_estimator = self._refit(candidates[best], slot, X, y, plan, rng, fixed)
        self.best_index_ = int(best)
        self.best_params_ = dict(candidates[best])
        self.best_estimator_ = _restore_accountant(best_estimator, slot, self.accountant)
        self._set_results(candidates, best, sensitivities)
        self.selection_epsilon_ = float(plan["selection_epsilon"])
        self._set_privacy(plan)
        return self

    def _select(self, utilities, sensitivities, epsilon, rng):
        if self.selection == "gem" and np.ptp(sensitivities) > 0:
            index, _ = generalized_exponential_mechanism(utilities, sensitivities, epsilon, rng)
        else:
            index, _ = exponential_mechanism(utilities, sensitivities.max(), epsilon, rng)
        return index


DPGridSearchCV.__doc__ = DPGridSearchCV.__doc__.format(
    budget=_PARAMS_BUDGET.format(),
    split=_PARAMS_SPLIT.format(validation_fraction=_VALIDATION_FRACTION),
    run=_PARAMS_RUN.format(),
    attributes=_SHARED_ATTRIBUTES,
    refit_share=_REFIT_SHARE)


def _check_distributions(param_distributions):
    """Return the distributions as a list of dicts; raise on a malformed one."""
    dists = param_distributions if isinstance(param_distributions, list) else [
        param_distributions]
    if not dists:
        raise ValueError("The 'param_distributions' parameter must not be empty.")
    for dist in dists:
        if not isinstance(dist, dict):
            raise ValueError(
                f"The 'param_distributions' parameter must be a dict or a list of dicts; "
                f"got {dist!r}."
            )
        for name, values in dist.items():
            ok = hasattr(values, "rvs") or (
                not isinstance(values, str) and hasattr(values, "__len__") and len(values) > 0)
            if not ok:
                raise ValueError(
                    f"Parameter {name!r} of 'param_distributions' must be a non-empty "
                    f"sequence or a distribution with an rvs method; got {values!r}."
                )
    return dists


def _checked_options(dists):
    """Per dict of ``dists``: ``{name: values}`` to check before the charge.

    Every value of a list; for a distribution, one public draw (a fixed
    seed, independent of the data and of the search's own draws) and, for a
    discrete scipy distribution, the finite ends of its support.
    """
    check_rng = np.random.default_rng(0)
    checked = []
    for dist in dists:
        options = {}
        for name in sorted(dist):
            values = dist[name]
            if not hasattr(values, "rvs"):
                options[name] = list(values)
            else:
                options[name] = [values.rvs(random_state=check_rng)]
                if isinstance(getattr(values, "dist", None), rv_discrete):
                    options[name] += [int(end) if float(end).is_integer() else float(end)
                                      for end in values.support() if np.isfinite(end)]
        checked.append(options)
    return checked


def _validate_distributions(estimator, dists, slot):
    """Check every listed value (and one draw of every distribution) before the charge.

    A bad value would otherwise raise only if it happened to be drawn, after
    the whole budget was spent.
    """
    for options in _checked_options(dists):
        _validate_candidates(estimator, _one_change_settings(options), slot)


def _combined_settings(options, is_own):
    """Settings to check: every combination of ``options``, if at most
    ``_MAX_CHECKED_COMBINATIONS``; else every pair of values of two
    parameters (the others at their first option), if at most
    ``_MAX_CHECKED_PAIRS``; else each value once (:func:`_one_change_settings`).
    A tier is used only if it sets the preprocessing steps (the parameters
    not ``is_own``, which are fitted on the data for each distinct setting)
    in at most ``_MAX_CHECKED_STEP_SETTINGS`` ways.
    """
    names = list(options)

    def affordable(settings):
        steps = {_params_key({k: v for k, v in s.items() if not is_own(k)}) for s in settings}
        return len(steps) <= _MAX_CHECKED_STEP_SETTINGS

    if math.prod(len(options[name]) for name in names) <= _MAX_CHECKED_COMBINATIONS:
        full = list(ParameterGrid({name: options[name] for name in names}))
        if affordable(full):
            return full
    base = {name: values[0] for name, values in options.items()}
    pairs = [{**base, a: u, b: v}
             for i, a in enumerate(names) for b in names[i + 1:]
             for u in options[a] for v in options[b]]
    if pairs and len(pairs) <= _MAX_CHECKED_PAIRS and affordable(pairs):
        return pairs
    return _one_change_settings(options)


def _one_change_settings(options):
    """Settings taking each option of each parameter once, the others at their first option.

    Every setting is one a draw from the same dict could give (a step
    listed with its own parameters is set together with them); their number
    is the total number of options, not their product, and at least one (the
    estimator's own settings, when every parameter is a distribution).
    """
    base = {name: values[0] for name, values in options.items()}
    return [{**base, name: value} for name, values in options.items()
            for value in values] or [base]


def _sample_params(dists, rng):
    """One draw, with replacement, independent of the data."""
    dist = dists[int(rng.integers(len(dists)))]
    params = {}
    for name in sorted(dist):
        values = dist[name]
        if hasattr(values, "rvs"):
            params[name] = values.rvs(random_state=rng)
        else:
            values = list(values)
            params[name] = values[int(rng.integers(len(values)))]
    return params


class DPRandomizedSearchCV(_BaseDPSearch):
    """Differentially private random search with random stopping.

    Draws a random number K of candidates (K secret, with mean
    ``mean_candidates``), trains each on the training part and scores it on
    the validation part with Gaussian noise, and keeps only the candidate
    with the best noisy score (Papernot and Steinke 2022; Liu and Talwar
    2019). Its privacy cost hardly depends on how many
    candidates are tried: each run gets a budget a few times smaller than
    the total, where a grid of K candidates divides it by ``sqrt(K)``.

    Parameters
    ----------
    estimator : estimator
        A DP estimator of this library, or a Pipeline ending in one
        (Pipelines may nest), as in :class:`DPGridSearchCV`.

    param_distributions : dict or list of dicts
        Parameter names mapped to lists (drawn uniformly, with replacement)
        or to distributions with an ``rvs`` method (``scipy.stats``). A list
        of dicts: one dict is drawn uniformly first.

    {budget}

    mean_candidates : float in (1, 1000], default=10.0
        Expected number of candidates tried. Time and memory grow with the
        number drawn, whose distribution has a long tail: means above 1000
        are refused.

    stopping : {{"logarithmic", "geometric"}}, default="logarithmic"
        Distribution of the number of candidates (truncated negative binomial
        of shape 0 or 1); the logarithmic one costs less privacy at the same
        mean.

    {split}

    {run}

    Attributes
    ----------
    best_estimator_ : estimator
        The chosen candidate (or its refit on all the data).

    best_params_ : dict
        Its parameters.

    best_index_ : int
        Always 0: ``cv_results_`` holds the chosen candidate only.

    cv_results_ : dict
        ``"params"`` (one entry, the chosen candidate) and ``"selected"``.
        The other candidates, and how many there were, stay secret: the
        guarantee of random stopping holds only if they are never released.
        So do the warnings of the candidates' public plans (an unused
        option): the search shows none (their number, or which ones appear,
        would tell how many ran). No search shows the warnings of its fits.

    privacy_events_ : list of events
        ``RandomStoppingEvent(mu_run, mean_candidates, stopping)`` for the
        search (priced from its Renyi DP curve at whatever delta a ledger is
        measured), and a ``GaussianEvent`` for the refit.

    privacy_spent_ : tuple (epsilon, delta)
        Guarantee of ``fit``, derived from ``privacy_events_``.

    candidate_privacy_ : tuple (epsilon, delta)
        Budget each candidate was trained with.

    See Also
    --------
    DPGridSearchCV : exhaustive search over a small grid.

    Notes
    -----
    Privacy (replace-one adjacency, n public). One run trains a candidate on
    the training part at ``mu_run``-GDP and releases its validation score
    (sensitivity ``D``) plus ``N(0, (D / mu_run)^2)``; a record is in one
    part only, so a run is ``mu_run``-GDP (parallel composition). The best
    of K runs, K drawn from ``stopping`` and kept secret, is
    (epsilon, delta)-DP by
    :func:`~dp_glm_sklearn.privacy.selection.random_stopping_epsilon`
    (Papernot and Steinke 2022, Theorem 2, via dp-accounting's RDP
    accountant), and ``mu_run`` is the largest for which it is at most the
    budget. The event charged is a ``RandomStoppingEvent``: the accountant
    prices it from its RDP curve at the accountant's own delta, composed
    with the rest of the ledger by :func:`~dp_glm_sklearn.privacy.compose`;
    at a delta below the search's it costs more than ``epsilon`` (a search at
    (2, 1e-5) costs about 2.13 at 1e-6), never ``inf``. With ``refit=True``
    the search gets (epsilon/2, delta/2) and the refit the largest Gaussian
    budget with which the two still compose to (epsilon, delta)
    (:func:`~dp_glm_sklearn.privacy.selection.random_stopping_refit_mu`: at
    least that of (epsilon/2, delta/2), more by the joint RDP composition of
    the two; at (2, 1e-5) about 24% more mu with ``mean_candidates=10``, 31%
    with 4, 19% with 30).

    K is secret from the results, but the running time of ``fit`` grows
    with K; do not publish it.

    Examples
    --------
    >>> import numpy as np
    >>> from dp_glm_sklearn import DPLinearRegression, DPRandomizedSearchCV
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(5000, 3)) / 2
    >>> y = X @ [0.5, -0.5, 0.25] + 0.05 * rng.normal(size=5000)
    >>> search = DPRandomizedSearchCV(
    ...     DPLinearRegression(feature_norm=1.5, y_bound=1.0),
    ...     {{"norm_bound": [0.3, 1.0, 3.0, 10.0]}}, epsilon=2.0, delta=1e-5,
    ...     mean_candidates=4, random_state=0).fit(X, y)
    >>> epsilon, delta = search.privacy_spent_
    >>> round(epsilon, 6), delta
    (2.0, 1e-05)
    >>> len(search.cv_results_["params"])
    1
    """

    _parameter_constraints: dict = {
        **_BaseDPSearch._parameter_constraints,
        "param_distributions": [dict, list],
        # K's tail is heavy (the logarithmic law's above all): at a mean of
        # 1e9 the candidates drawn before the charge did not fit in memory.
        "mean_candidates": [Interval(Real, 1, _MAX_MEAN_CANDIDATES, closed="right")],
        "stopping": [StrOptions({"logarithmic", "geometric"})],
    }

    def __init__(self, estimator, param_distributions, *, epsilon=1.0, delta=None,
                 scoring=None, mean_candidates=10.0, stopping="logarithmic",
                 validation_fraction=_VALIDATION_FRACTION, refit=False, n_jobs=None,
                 random_state=None, accountant=None):
        self.estimator = estimator
        self.param_distributions = param_distributions
        self.epsilon = epsilon
        self.delta = delta
        self.scoring = scoring
        self.mean_candidates = mean_candidates
        self.stopping = stopping
        self.validation_fraction = validation_fraction
        self.refit = refit
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.accountant = accountant

    def _show_candidate_warnings(self, caught):
        """Show none: K is secret (see ``cv_results_``)."""

    def _plan(self, n_samples):
        delta = default_delta(n_samples) if self.delta is None else float(self.delta)
        epsilon = float(self.epsilon)
        if self.refit:
            epsilon_search, delta_search = epsilon / 2.0, delta / 2.0
        else:
            epsilon_search, delta_search = epsilon, delta
        mean, stopping = float(self.mean_candidates), self.stopping
        try:
            mu_run = random_stopping_mu(epsilon_search, delta_search, mean, stopping)
        except ValueError:
            if not self.refit:
                raise
            raise ValueError(  # random_stopping_mu's message would quote epsilon / 2
                f"epsilon={epsilon!r} is too small: with refit=True the search gets half of "
                f"it, below what random stopping with mean={mean!r} costs even for runs "
                "that reveal nothing; raise epsilon, lower mean_candidates, or use "
                "refit=False.") from None
        candidate_epsilon, mu_paid = _candidate_privacy(mu_run, delta_search,
                                                        remedy="lower mean_candidates")
        # The runs' GDP parameter, not an (epsilon, delta) pair: a ledger
        # measured at any delta can price the search, where an
        # ApproxDPEvent(epsilon, delta_search) costs inf below delta_search.
        events = [RandomStoppingEvent(
            mu=mu_paid, mean=mean, stopping=stopping,
            label=f"DPRandomizedSearchCV: random stopping ({stopping}, mean {mean:g})",
        )]
        plan = dict(delta=delta, candidate_epsilon=candidate_epsilon,
                    candidate_delta=delta_search, mu_candidate=mu_paid, events=events)
        if self.refit:
            mu_refit = random_stopping_refit_mu(mu_paid, mean, epsilon, delta, stopping)
            refit_epsilon, mu_refit_paid = _candidate_privacy(mu_refit, delta / 2.0, "the refit",
                                                              "use refit=False")
            events.append(GaussianEvent(mu=mu_refit_paid, label="DPRandomizedSearchCV: refit"))
            plan.update(refit_epsilon=refit_epsilon, refit_delta=delta / 2.0,
                        mu_refit=mu_refit_paid)
        return plan

    def _possible_candidates(self, candidates, slot):
        # What could be drawn, not the draws: which were drawn depends on K,
        # which the search keeps secret.  A value may be refused only next
        # to another (output perturbation with a huge l2_regularization):
        # combinations of the checked options (_combined_settings).
        return [setting for options in _checked_options(
                    _check_distributions(self.param_distributions))
                for setting in _combined_settings(options, slot.owns)]

    @fit_context(prefer_skip_nested_validation=False)
    @_clones_draw_nothing
    def fit(self, X, y):
        """Try a random number of random candidates; keep the best, privately.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Targets.

        Returns
        -------
        self : object

        Raises
        ------
        BudgetExceededError
            If the accountant cannot afford (epsilon, delta); nothing is
            trained.
        """
        dists = _check_distributions(self.param_distributions)
        slot = _find_dp_slot(self.estimator)
        _check_grid_keys(dists, slot)
        _validate_distributions(self.estimator, dists, slot)
        n_samples = _n_samples(X, type(self).__name__)
        self._validation_size(n_samples)
        plan = self._plan(n_samples)
        # The split, K and the candidates do not depend on the data: drawn
        # before the charge, so that a value a distribution draws outside its
        # parameter's range fails before anything is spent.  (An error here
        # says nothing of the data; K is only kept out of what a fit shows.)
        accountant = self._check_budget(slot, plan["events"], plan["delta"])
        rng = _rng(self.random_state)
        if rng is self.random_state:
            # A user's Generator: draw a fixed number of values from it, not a
            # number that grows with the secret K.
            rng = np.random.default_rng(rng.integers(2**32, size=4, dtype=np.uint64))
        train, val = self._split(n_samples, rng)
        count = sample_stopping_count(self.mean_candidates, self.stopping, rng)
        candidates = [_sample_params(dists, rng) for _ in range(count)]
        _validate_candidates(self.estimator, candidates, slot)
        X, y, fixed = self._charge(accountant, slot, plan["events"], type(self).__name__, X, y,
                                   candidates, parts=[(train, val)],
                                   fits=self._fits(plan, len(train), n_samples))
        X_tr, y_tr = safe_indexing(X, train), safe_indexing(y, train)
        X_val, y_val = safe_indexing(X, val), safe_indexing(y, val)
        seeds = _child_seeds(rng, count, self.random_state)
        fitted = self._fit_candidates(slot, plan, fixed, [
            (params, X_tr, y_tr, seed) for params, seed in zip(candidates, seeds, strict=True)])

        utilities, sensitivities = self._validation_utilities(fitted, slot, X_val, y_val)
        noisy = [add_gaussian_noise(u, gdp_sigma(d, plan["mu_candidate"]), rng)
                 for u, d in zip(utilities, sensitivities, strict=True)]
        best = int(np.argmax(noisy))
        del utilities, noisy

        best_estimator = fitted[best]
        if self.refit:
            best_estimator = self._refit(candidates[best], slot, X, y, plan, rng, fixed)
        self.best_index_ = 0
        self.best_params_ = dict(candidates[best])
        self.best_estimator_ = _restore_accountant(best_estimator, slot, self.accountant)
        self._set_results([candidates[best]], 0, sensitivities[best:best + 1])
        del candidates, fitted
        self._set_privacy(plan)
        return self


DPRandomizedSearchCV.__doc__ = DPRandomizedSearchCV.__doc__.format(
    budget=_PARAMS_BUDGET.format(),
    split=_PARAMS_SPLIT.format(validation_fraction=_VALIDATION_FRACTION),
    run=_PARAMS_RUN.format())


# -- norm_bound="auto": the paper's private grid over the norm bound ---------------------
def auto_norm_bound_grid(n_train, epsilon, smoothness, unit):
    """Radii of the private grid search over ``norm_bound`` (public quantities only).

    In the paper's normalization (rows of norm 1, loss at zero at most 1)
    Algorithm 4 tries ``B_j = 2^j`` and Theorem 8 (Appendix D.3 of Arora et al. 2022)
    takes ``K = log max(sqrt(n / H), (n eps)^(2/3) / sqrt(H))`` radii: beyond
    ``2^K`` the excess-risk bound of a candidate exceeds that of the zero
    model.  Here ``K = ceil(log2(...))`` (at least 2), with n the size of the
    training part, and the radii are ``unit * 2^j`` for ``j = -1, ..., K - 2``:
    ``unit`` converts the normalization back (``Y / X_aug`` for regression,
    a model that just reaches the label bound; ``1 / X_aug`` for
    classification, a logit of 1), and the grid starts one octave below it
    because on small noisy data the best radius is below ``||w*||``.

    Parameters
    ----------
    n_train : int
        Size of the training part.
    epsilon : float
        Total epsilon, in ``(0, inf]``.
    smoothness : float
        Smoothness H of the loss in the prediction (1 squared, 1/4 logistic).
    unit : float
        Scale of the radii, ``> 0``.

    Returns
    -------
    radii : list of float

    Examples
    --------
    >>> from dp_glm_sklearn.model_selection._search import auto_norm_bound_grid
    >>> auto_norm_bound_grid(165, 3.0, 1.0, 1.0)
    [0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
    """
    n_eps = n_train * min(float(epsilon), 1e6)
    size = max(math.sqrt(n_train / smoothness), n_eps ** (2.0 / 3.0) / math.sqrt(smoothness))
    k = max(2, math.ceil(math.log2(size)))
    return [float(unit * 2.0**j) for j in range(-1, k - 1)]


@_clones_draw_nothing
def _auto_norm_bound_search(estimator, n_samples, epsilon, delta):
    """The unfitted :class:`DPGridSearchCV` that ``norm_bound="auto"`` runs
    on ``n_samples`` records at (epsilon, delta); public, as its grid."""
    c = estimator._intercept_feature(0)
    x_aug = math.hypot(float(estimator.feature_norm), c)
    if is_classifier(estimator):
        smoothness, unit = 0.25, 1.0 / x_aug
    else:
        loss, y_bound, _ = estimator._public_loss()
        smoothness, unit = loss.smoothness, y_bound / x_aug
    search = DPGridSearchCV(
        clone(estimator).set_params(norm_bound=1.0, accountant=None,
                                    **_search_defaults(estimator)),
        {"norm_bound": None},  # set below, once the split size is known
        epsilon=epsilon, delta=delta, refit=True, random_state=estimator.random_state,
        accountant=estimator._accountant(),
    )
    n_train = n_samples - int(round(search.validation_fraction * n_samples))
    search.param_grid = {"norm_bound": auto_norm_bound_grid(max(n_train, 1), epsilon,
                                                            smoothness, unit)}
    search._ledger_source = (f"{type(estimator).__name__}(norm_bound='auto', "
                             f"K={len(search.param_grid['norm_bound'])})")
    search._candidate_words = ("each radius norm_bound='auto' tries", "give a fixed norm_bound")
    return search


def _public_fits(probe, fits):
    """``(estimator, n_samples, epsilon, delta)`` of each fit ``probe`` will run,
    one per entry of ``fits``; a ``norm_bound="auto"`` probe runs its own
    search, whose candidates and refit are listed at each radius of its grid
    (its budget split is checked too: it raises as that search would)."""
    for n_samples, epsilon, delta in fits:
        if probe.get_params().get("norm_bound") != "auto":
            yield probe, n_samples, epsilon, delta
            continue
        inner = _auto_norm_bound_search(probe, n_samples, epsilon, delta)
        radii = inner.param_grid["norm_bound"]
        n_train = n_samples - inner._validation_size(n_samples)
        inner_fits = inner._fits(inner._plan(len(radii), n_samples), n_train, n_samples)
        for radius in radii:
            at_radius = clone(inner.estimator).set_params(norm_bound=radius)
            for inner_fit in inner_fits:
                yield at_radius, *inner_fit


def fit_auto_norm_bound(estimator, X, y):
    """``fit`` of a DP GLM with ``norm_bound="auto"``: called by its template.

    Runs :class:`DPGridSearchCV` over ``norm_bound`` on the radii of
    :func:`auto_norm_bound_grid`, with the estimator's total (epsilon, delta),
    accountant and random state, the default scoring and ``refit=True``;
    then takes over the refitted winner's fitted attributes.  The refit is
    explicit (the search's default is ``refit=False``): an estimator fitted
    on ``(X, y)`` should be trained on all of it, and on
    ``benchmarks/model_selection.py`` the refitted model was the better one.
    The chosen radius is
    ``norm_bound_``; ``privacy_events_`` and ``privacy_spent_`` are those of
    the whole search, (epsilon, delta) in total.

    Unlike the paper's Algorithm 4, the selection uses the search's default
    score (accuracy, or the absolute error of predictions clipped to
    ``y_bound``), whose sensitivity does not grow with the radius, rather
    than the loss clipped at ``Delta(B)`` with the generalized exponential
    mechanism and the zero model: on ``benchmarks/model_selection.py`` the
    latter's penalties on large radii made it choose radii far too small.
    """
    _n_samples(y, type(estimator).__name__, what="y")
    X, y = indexable(X, y)
    n_samples = num_samples(X)
    if n_samples < 2:
        raise ValueError(
            f"norm_bound='auto' needs at least 2 samples (one to train on and one to "
            f"choose the radius with); got n_samples={n_samples}."
        )
    epsilon, delta = estimator._target_privacy(n_samples)
    search = _auto_norm_bound_search(estimator, n_samples, epsilon, delta)
    search.fit(X, y)
    best = search.best_estimator_
    # A refit replaces every fitted attribute: none of an earlier fit (say
    # feature_names_in_ of a DataFrame) may survive.
    for name in [name for name in vars(estimator) if name.endswith("_")
                 and not name.startswith("_")]:
        delattr(estimator, name)
    for name, value in vars(best).items():
        if name.endswith("_") and not name.startswith("_"):
            setattr(estimator, name, value)
    estimator.norm_bound_ = float(search.best_params_["norm_bound"])
    estimator.privacy_events_ = list(search.privacy_events_)
    estimator.privacy_spent_ = search.privacy_spent_
    return estimator
