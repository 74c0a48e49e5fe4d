"""DPRandomizedSearchCV: private random search with random stopping.

The search class and the handling of its ``param_distributions``: checking
them, the settings checked before the charge (every listed value, one public
draw of each distribution, and combinations of them within the
``_MAX_CHECKED_*`` limits), and the draws of the candidates.  The machinery
shared with the other searches, and the argument for the split (parallel
composition), are in :mod:`dp_glm_sklearn.model_selection._search`; the
privacy of random stopping is argued in the class's Notes.
"""

import math
from collections.abc import Mapping, Set
from numbers import Real

import numpy as np
from joblib import effective_n_jobs
from scipy.stats import rv_continuous, rv_discrete
from sklearn.base import BaseEstimator, is_classifier
from sklearn.model_selection import ParameterGrid

from .._base import target_privacy
from .._doc import format_doc
from .._randomness import (
    _clones_draw_nothing,
    _release_rng,
    _steps_seed,
    _streams_given_back_if_refused,
)
from .._sklearn_compat import Interval, StrOptions, fit_context, validated_even_if_skipped
from .._validation import _fit_n_samples
from .._warn import warn_user
from ..privacy.events import GaussianEvent, RandomStoppingEvent
from ..privacy.selection import (
    gaussian_report_noisy_max,
    random_stopping_mu,
    random_stopping_refit_mu,
    sample_stopping_count,
)
from ._scores import _CLASSIFIER_SCORINGS
from ._search import (
    _PARAMS_BUDGET,
    _PARAMS_RUN,
    _PARAMS_SPLIT,
    _VALIDATION_FRACTION,
    _all_too_large,
    _BaseDPSearch,
    _candidate_privacy,
    _child_seeds,
    _radius_searched,
    _restore_accountant,
    _without_large_reach,
)
from ._slot import (
    _check_grid_keys,
    _children,
    _find_dp_slot,
    _params_key,
    _refuse_fit_params,
    _validate_candidates,
    _with_params,
)

__all__ = ["DPRandomizedSearchCV"]


# A random search checks the public plan of every combination of its listed
# values (and one public draw of each distribution) before the charge, up to
# _MAX_CHECKED_COMBINATIONS; beyond, every pair of values of two parameters,
# up to _MAX_CHECKED_PAIRS (a few ms each); else each value once.  A tier
# that sets the preprocessing steps in more than _MAX_CHECKED_STEP_SETTINGS
# ways is skipped: each is fitted on the data (on X and on each part).
_MAX_CHECKED_COMBINATIONS = 256
_MAX_CHECKED_PAIRS = 1024
_MAX_CHECKED_STEP_SETTINGS = 64

#: The largest mean number of candidates of DPRandomizedSearchCV.
_MAX_MEAN_CANDIDATES = 1000.0


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
            if not hasattr(values, "rvs") and isinstance(values, (Set, Mapping)):
                # (scikit-learn refuses them too.) A set of strings iterates in
                # an order that changes with PYTHONHASHSEED: the same seed drew
                # other candidates in another process.
                raise TypeError(
                    f"Parameter {name!r} of 'param_distributions' is a "
                    f"{type(values).__name__}, whose order is not fixed: give its values "
                    "as a list or a tuple (a seeded search draws by position).")
            ok = hasattr(values, "rvs") or (
                not isinstance(values, (str, bytes)) and hasattr(values, "__len__")
                and len(values) > 0)
            if not ok:
                raise ValueError(
                    f"Parameter {name!r} of 'param_distributions' must be a non-empty "
                    f"sequence or a distribution with an rvs method; got {values!r}."
                )
    # Each sequence read once, here: a user's sequence read at every draw
    # counted the secret number of candidates.
    return [{name: values if hasattr(values, "rvs") else list(values)
             for name, values in dist.items()} for dist in dists]


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


def _validate_distributions(estimator, dists, slot, accountant=None):
    """Check every listed value (and one draw of every distribution) before the charge.

    A bad value would otherwise raise only if it happened to be drawn, after
    the whole budget was spent.
    """
    for options in _checked_options(dists):
        _validate_candidates(estimator, _one_change_settings(options), slot, accountant,
                             secret_count=True)


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
        full = list(ParameterGrid(options))
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


#: Public bounds whose None means "not stated" (a warning, decided before any draw).
_BOUNDS = ("feature_norm", "y_bound")


#: Parameters of scikit-learn's steps that decide whether :func:`._slot._learns`
#: takes a step as learning from the data (an encoder's categories and
#: grouping, an imputer's strategy and kept columns, an RBF map's gamma, a
#: ColumnTransformer's parts, remainder and sparse output).
_LEARNING_PARAMETERS = frozenset({
    "categories", "min_frequency", "max_categories", "strategy", "keep_empty_features",
    "add_indicator", "gamma", "sparse_threshold", "remainder", "transformers",
    "transformer_list", "steps"})


#: The learning settings whose numbers all learn alike (a number learns, None or
#: "scale" do not): a scipy distribution over one, which draws numbers only,
#: decides it as the enumeration does (see :func:`_draws_alike_to_the_enumeration`).
#: Not ``sparse_threshold``, which learns above 0 only: a continuous distribution
#: underflows to 0 (beta(1e-4, 1) in 93% of its draws).
_NUMERIC_LEARNING_PARAMETERS = frozenset({"min_frequency", "max_categories", "gamma"})


def _draws_alike_to_the_enumeration(dist):
    """Whether ``dist`` is one of scipy's own distributions, frozen or not, which
    draw numbers only: a number decides a setting of
    :data:`_NUMERIC_LEARNING_PARAMETERS` as every other number does.  Not a
    user's, nor a user's subclass of scipy's classes (frozen, it is wrapped
    in scipy's own frozen class): its draws may be anything."""
    family = getattr(dist, "dist", dist)
    return (isinstance(family, (rv_continuous, rv_discrete))
            and type(dist).__module__.startswith("scipy.stats")
            and type(family).__module__.startswith("scipy.stats"))


def _step_keys(estimator, prefix=""):
    """The ``set_params`` keys of the steps of ``estimator``'s Pipelines,
    FeatureUnions and ColumnTransformers, at any depth (a step may be None
    or a string: "passthrough", "drop")."""
    keys = set()
    for name, part in _children(estimator) or ():
        keys.add(prefix + name)
        keys |= _step_keys(part, f"{prefix}{name}__")
    return keys


def _refuse_drawn_structure(estimator, dists, slot, scoring):
    """Refuse a distribution (an object with ``rvs``) over what the search must
    know of every candidate before the draw, from the public settings alone:
    the steps (the DP estimator, the Pipelines holding it, the preprocessing
    steps and the estimators inside them) and the steps' parameters that
    decide whether a step learns from the data (:data:`_LEARNING_PARAMETERS`:
    the searches warn of such a step before the charge), the DP estimator's
    ``classes`` (read from y once, or not), and what sets the scale of a
    regressor's scores (``y_bound``; a Huber ``threshold`` with
    ``scoring="loss"``).  A distribution's public draw may agree with itself
    while the secret draws differ: the warnings and refusals would then
    depend on the draws, that is on the secret number of candidates.  A list
    of values (drawn uniformly) is checked value by value instead, and a
    scipy distribution over a numeric learning setting
    (:func:`_draws_alike_to_the_enumeration`) too; other parameters (a
    ``PCA``'s ``n_components``, the DP estimator's ``norm_bound``) may come
    from any distribution.  The keys are those of the template and of every
    setting of the public enumeration."""
    names = slot.prefix[:-2].split("__") if slot.prefix else []
    structure = {"__".join(names[:i]) for i in range(1, len(names) + 1)}
    structure.add(slot.key("classes"))
    scales = set()
    if scoring not in _CLASSIFIER_SCORINGS and not is_classifier(estimator):
        scales = {slot.key("y_bound"), *([slot.key("threshold")] if scoring == "loss" else [])}
    learning = set()
    _add_structure(estimator, slot, structure, learning)
    _refuse_drawn(dists, scales, structure, learning, scoring)  # (before any draw is set)
    # Every setting the public enumeration holds: a step a listed value puts in
    # place has parts of its own, which may be drawn.
    for options in _checked_options(dists):
        for setting in _one_change_settings(options):
            _add_structure(_with_params(estimator, setting), slot, structure, learning)
    _refuse_drawn(dists, scales, structure, learning, scoring)


def _add_structure(shape, slot, structure, learning):
    """Add the step keys and estimator-valued keys of ``shape`` to ``structure``,
    and its learning settings to ``learning`` (not the DP estimator's own)."""
    params = shape.get_params(deep=True)
    structure |= {key for key in _step_keys(shape) if not slot.owns(key)}
    structure |= {key for key, value in params.items()
                  if not slot.owns(key) and isinstance(value, BaseEstimator)}
    learning |= {key for key in params if not slot.owns(key)
                 and key.rsplit("__", 1)[-1] in _LEARNING_PARAMETERS}


def _refuse_drawn(dists, scales, structure, learning, scoring):
    """Raise for the first key of ``dists`` drawn from a distribution that
    :func:`_refuse_drawn_structure` refuses."""
    for dist in dists:
        for key in sorted(dist):
            if not hasattr(dist[key], "rvs"):
                continue
            if key in scales:
                raise ValueError(
                    f"param_distributions draws {key!r} from a distribution: each "
                    f"candidate's {scoring!r} clips the validation labels to its own y_bound "
                    "(with scoring='loss', scores its own loss), so scores of candidates drawn "
                    "with different values cannot be compared (the narrowest interval would "
                    "always win). Keep it the same for every candidate.")
            if key in structure or key in learning and not (
                    key.rsplit("__", 1)[-1] in _NUMERIC_LEARNING_PARAMETERS
                    and _draws_alike_to_the_enumeration(dist[key])):
                raise ValueError(
                    f"param_distributions draws {key!r} from a distribution; the search must "
                    "know each possible value before its secret draws (the steps and their "
                    "settings that decide whether one learns from the data, to warn of it; "
                    "the DP estimator and its classes, to check them). Give the values as a "
                    "list (drawn uniformly). Nothing was charged.")


def _sample_params(dists, rng):
    """One draw, with replacement, independent of the data."""
    dist = dists[int(rng.integers(len(dists)))]
    params = {}
    for name in sorted(dist):
        values = dist[name]
        if hasattr(values, "rvs"):
            params[name] = values.rvs(random_state=rng)
            if params[name] is None and name.rsplit("__", 1)[-1] in _BOUNDS:
                # The unstated-bound warning is decided from one public draw
                # (_warn_unstated_bounds), never from these: refused before
                # the charge instead of fitted with the default silently.
                raise ValueError(
                    f"The distribution of {name!r} drew None: a distribution must draw "
                    "public bounds; list None among the values to mean 'not stated'. "
                    "Nothing was charged.")
        else:
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
        Expected number of candidates tried (in place of
        ``RandomizedSearchCV``'s fixed ``n_iter``: a number of candidates
        known in advance would cost privacy in proportion to it). Time and memory grow with the
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
        The chosen candidate (or its refit on all the data). Its DP
        estimator's ``privacy_events_`` and ``privacy_spent_`` are the
        search's: publishing the model costs the whole search.

    best_params_ : dict
        Its parameters.

    best_index_ : int
        Always 0: ``cv_results_`` holds the chosen candidate only.

    cv_results_ : dict
        ``"params"`` (one entry, the chosen candidate), one
        ``"param_<name>"`` masked array per parameter, ``"selected"`` and
        ``"score_sensitivity"`` (public, of the chosen candidate's score).
        The other candidates, and how many there were, stay secret: the
        guarantee of random stopping holds only if they are never released.
        So do the warnings of the candidates' public plans (an unused
        option): the search shows none (their number, or which ones appear,
        would tell how many ran), except that a ``feature_norm`` or
        ``y_bound`` is not stated in a setting that could be drawn
        (decided from ``param_distributions`` alone, not from the draws).
        No search shows the warnings of its fits.

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
    with K; do not publish it.  Nor can the search hide what the estimator's
    own code does at each fit outside itself: a preprocessing step drawing
    from numpy's global generator without a ``random_state`` parameter, or
    counting its fits in an object shared by its copies, counts the
    candidates (steps with a ``random_state`` are seeded; callbacks and
    ``Pipeline`` caching are refused: user guide, section 5).

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
        """Show none: which appear depends on the draws, hence on K, which is
        secret (see ``cv_results_``; the planned fits include the drawn
        candidates).  :meth:`_warn_unstated_bounds` shows the warnings that
        depend on the template alone."""

    def _warn_unstated_bounds(self, slot):
        """Warn that a public bound (``feature_norm``, a regressor's ``y_bound``)
        was not stated when a setting that could be drawn has none.  The
        settings looked at are those checked before the charge
        (:meth:`_possible_candidates`: every listed value, a public draw of
        each distribution), a function of ``param_distributions`` only, never
        the draws: K stays secret."""
        messages, searched, key = {}, {}, slot.key("norm_bound")
        settings = list(self._possible_candidates(None, slot))
        for setting in settings + [{key: low} for low in self._lowest_radii(key)]:
            owner = slot.owner(_with_params(self.estimator, setting))
            bound_warnings = getattr(owner, "_bound_warnings", None)
            found = bound_warnings() if bound_warnings else []
            if _radius_searched(slot, setting, owner):
                # Not "far too large" unless every one is (_check_public_plans).
                found = _without_large_reach(owner, found, searched)
            messages.update(dict.fromkeys(found))
        messages.update(dict.fromkeys(_all_too_large(searched)))
        for message in messages:
            warn_user(message, UserWarning)

    def _lowest_radii(self, key):
        """The lower end of each distribution of ``norm_bound`` (``key``) that
        states one (scipy's ``support()``), finite and positive: with the
        listed values and the public draws, what decides whether every
        radius that could be drawn is far too large.  Parameters only."""
        spaces = self.param_distributions
        for space in spaces if isinstance(spaces, (list, tuple)) else [spaces]:
            support = getattr(space.get(key), "support", None)
            try:
                low = float(support()[0]) if callable(support) else None
            except Exception:  # (a support() of another kind: not used)
                low = None
            if low is not None and 0.0 < low < math.inf:
                yield low

    def _plan(self, n_samples):
        epsilon, delta = target_privacy(self, n_samples)
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
                f"it, below the least that the accounting of random stopping with "
                f"mean={mean!r} certifies (over dp-accounting's Renyi orders) however little "
                "the runs reveal; raise epsilon, lower mean_candidates, or use "
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

    def _parallel_fits(self, candidates, parts):
        # joblib's workers, not capped by the number of candidates: K is
        # secret, and whether the reservation fails must not depend on it.
        return max(1, effective_n_jobs(self.n_jobs))

    @fit_context(prefer_skip_nested_validation=False)
    @validated_even_if_skipped
    @_clones_draw_nothing
    def fit(self, X, y, **fit_params):
        """Try a random number of random candidates; keep the best, privately.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Targets.
        **fit_params : none accepted
            There is no ``sample_weight`` (a weight scales one record's
            influence, hence the sensitivity); any keyword raises a
            TypeError saying so, before anything is read or charged.

        Returns
        -------
        self : object

        Raises
        ------
        BudgetExceededError
            If the accountant cannot afford (epsilon, delta); nothing is
            trained.
        """
        _refuse_fit_params(self, fit_params)
        dists = _check_distributions(self.param_distributions)
        slot = _find_dp_slot(self.estimator)
        _check_grid_keys(dists, slot)
        _refuse_drawn_structure(self.estimator, dists, slot, self._scoring())
        _validate_distributions(self.estimator, dists, slot, self.accountant)
        self._warn_unstated_bounds(slot)
        n_samples = _fit_n_samples(X, y, type(self).__name__)
        self._validation_size(n_samples)
        plan = self._plan(n_samples)
        self._warn_large_delta(plan["delta"], n_samples)
        # The split, K and the candidates do not depend on the data: drawn
        # before the charge, so that a value a distribution draws outside its
        # parameter's range fails before anything is spent.  (An error here
        # says nothing of the data; K is only kept out of what a fit shows.)
        accountant = self._check_budget(slot, plan["events"], plan["delta"])
        # The stream is given back on a refusal only before K is drawn: a
        # search refused after (a drawn candidate, or the data, refused) may
        # have told something of its K, which a later search must not draw again.
        with _streams_given_back_if_refused(accountant):
            rng = _release_rng(self.random_state, accountant)
        if rng is self.random_state:
            # A user's Generator: draw a fixed number of values from it, not a
            # number that grows with the secret K.
            rng = np.random.default_rng(rng.integers(2**32, size=4, dtype=np.uint64))
        steps_seed = _steps_seed(self.random_state, rng)
        train, val = self._split(n_samples, rng)
        count = sample_stopping_count(self.mean_candidates, self.stopping, rng)
        candidates = [_sample_params(dists, rng) for _ in range(count)]
        _validate_candidates(self.estimator, candidates, slot, self.accountant,
                             secret_count=True)
        X, y, fixed, [(X_tr, y_tr), (X_val, y_val)] = self._charge(
            accountant, slot, plan["events"], type(self).__name__, X, y, candidates,
            parts=[(train, val)], fits=self._fits(plan, len(train), n_samples),
            rows=[train, val], steps_seed=steps_seed)
        seeds = _child_seeds(rng, count, self.random_state)
        fitted = self._fit_candidates(slot, plan, fixed, [
            (params, X_tr, y_tr, seed) for params, seed in zip(candidates, seeds, strict=True)],
            steps_seed)

        utilities, sensitivities = self._validation_utilities(fitted, slot, X_val, y_val)
        best = gaussian_report_noisy_max(utilities, sensitivities, plan["mu_candidate"], rng)
        del utilities

        best_estimator = fitted[best]
        if self.refit:
            best_estimator = self._refit(candidates[best], slot, X, y, plan, rng, fixed,
                                         steps_seed)
        self.best_index_ = 0
        self.best_params_ = dict(candidates[best])
        self.best_estimator_ = _restore_accountant(best_estimator, slot, self.accountant)
        self._set_results([candidates[best]], 0, sensitivities[best:best + 1])
        del candidates, fitted
        self._set_privacy(plan, slot)
        return self


DPRandomizedSearchCV.__doc__ = format_doc(
    DPRandomizedSearchCV.__doc__,
    budget=_PARAMS_BUDGET.format(),
    split=_PARAMS_SPLIT.format(validation_fraction=_VALIDATION_FRACTION),
    run=_PARAMS_RUN.format())
