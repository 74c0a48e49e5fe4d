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

import itertools
import math
import os
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from joblib import effective_n_jobs, parallel_config
from joblib.parallel import get_active_backend
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.metrics import accuracy_score
from sklearn.model_selection import ParameterGrid
from sklearn.utils import get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import (
    check_consistent_length,
    check_is_fitted,
    column_or_1d,
    indexable,
)

from .._base import _fits_replay_seeds, target_privacy, warn_large_delta
from .._doc import format_doc
from .._randomness import (
    _clones_draw_nothing,
    _IndependentNoiseOnCloneMixin,
    _release_rng,
    _steps_seed,
    _streams_given_back_if_refused,
)
from .._sklearn_compat import (
    RANDOM_STATE,
    HasMethods,
    Interval,
    InvalidParameterError,
    StrOptions,
    VisualBlock,
    fit_context,
    num_samples,
    safe_indexing,
    validated_even_if_skipped,
)
from .._validation import _fit_n_samples, _n_samples
from .._warn import silenced, warn_user
from ..privacy.accountant import (
    PrivacyAccountant,
    _check_release,
    _DefaultAccountantMixin,
)
from ..privacy.calibration import (
    gdp_composed,
    gdp_mu,
    gdp_parallel,
    gdp_per_release,
    gdp_release_budget,
    gdp_split,
)
from ..privacy.events import GaussianEvent, compose, total_mu
from ..privacy.selection import (
    bounded_range_gdp_mu,
    exponential_mechanism,
    gdp_bounded_range_epsilon,
    generalized_exponential_mechanism,
)
from ._pickling import pickling_failure, worker_pickling_check
from ._probe import _probe_head, _validated_after
from ._scores import (
    _SCORINGS_NOTE,
    SCORINGS,
    _check_comparable_scores,
    _check_scoring,
    _clipped_losses,
    _planned_loss_bound,
    _validation_losses,
)
from ._slot import (
    _check_grid_keys,
    _cloned,
    _column_dtype,
    _find_dp_slot,
    _fresh,
    _head,
    _params_key,
    _preprocessing,
    _refuse_fit_params,
    _step_seeds,
    _validate_candidates,
    _value_key,
    _warn_fitted_preprocessing,
    _warn_overridden,
    _with_message,
    _with_params,
)

__all__ = ["DPGridSearchCV"]

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
#: where searching can help.  A sweep on the current benchmark (4 data sets x
#: 3 epsilons, ``benchmarks/README.md``) agrees: 0.65 gains less than a
#: cell's noise on small data, and synthetic at epsilon 3 falls from 0.662 to
#: 0.625 between 0.65 and 0.75.
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


class _Scorings(StrOptions):
    """The scorings a private search can select on, saying why there are no others."""

    def __str__(self):  # in SCORINGS' order, not a set's (which varies between runs)
        return f"a str among {list(SCORINGS)} ({_SCORINGS_NOTE})"


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


# -- training candidates -------------------------------------------------------------
def _fit_candidate(estimator, params, slot, X, y, parent_pid, steps_seed):
    """Fit one candidate; the search has pre-paid its privacy cost.

    The candidate charges a fresh, infinite accountant created here (in the
    worker process when run in parallel), which is thrown away: the user's
    accountant receives the wrapper's single charge instead.  The
    ``random_state`` its preprocessing steps leave at None are seeded from
    ``steps_seed`` for the fit, as in the probes (:func:`._slot._step_seeds`),
    and set back to None after it.
    """
    estimator.set_params(**params)
    estimator.set_params(**{slot.key("accountant"): PrivacyAccountant()})
    steps = _preprocessing(estimator)
    seeds = {} if steps_seed is None else _step_seeds(steps, steps_seed)
    estimator.set_params(**seeds)
    # No warning of a fit is shown, nor numpy's floating-point warnings: a
    # user's step can warn on one private record (a FunctionTransformer's
    # check_inverse, a transform overflowing), after the search's charge.
    # The DP estimator's own warnings (an unused option) were shown before
    # the charge, by _check_public_plans.
    # joblib's parallel_config(verbose=...) reaches the Parallel of a step (a
    # ColumnTransformer's), whose progress lines would count the fits: off.
    if steps:
        # Its own copy of the part for steps that may work in place (the DP
        # estimators and scikit-learn's steps read X only: no copy for them).
        # In a worker process the part may be a read-only memory map
        # (joblib's, for large arrays): X and y are made writable for the steps.
        X = _fresh(X, steps)
        if os.getpid() != parent_pid:
            X, y = _writable(X), _writable(y)
    with np.errstate(all="ignore"), parallel_config(verbose=0):
        if os.getpid() == parent_pid:
            estimator.fit(X, y)  # in the parent's threads: _fit_jobs silences them
        else:
            # One task at a time per worker process: its filters are its own.
            with silenced():
                estimator.fit(X, y)
    estimator.set_params(**dict.fromkeys(seeds))  # the user's None back
    return estimator


def _writable(a):
    """``a``, or a writable copy of it if it is a read-only numpy array (or a
    sparse matrix over one; other types, pandas' included, as they are)."""
    values = a.data if sp.issparse(a) else a
    if isinstance(values, np.ndarray) and not values.flags.writeable:
        return a.copy()
    return a


def _radius_searched(slot, params, owner):
    """Whether the ``norm_bound`` of the setting ``params`` (whose DP estimator
    is ``owner``) is searched: set by the grid or the distributions, or
    ``"auto"``, whose radii the library picks."""
    return slot.key("norm_bound") in params or owner.get_params().get("norm_bound") == "auto"


def _without_large_reach(estimator, messages, searched):
    """``messages`` without ``estimator``'s warning that its (searched)
    ``norm_bound`` is far larger than its labels need (``DPLinearRegression``
    only), which is kept in ``searched`` by radius for :func:`_all_too_large`."""
    check = getattr(estimator, "_large_reach_warning", None)
    large = check() if check is not None else []
    searched[estimator.get_params().get("norm_bound")] = large
    return [m for m in messages if m not in large]


def _all_too_large(searched):
    """The smallest radius's far-too-large warning when every searched radius
    of ``searched`` (radius: its warnings) has one; else none.  ("auto" picks
    its own radii, the smallest of them small: never all too large.)"""
    radii = {radius: large for radius, large in searched.items()
             if isinstance(radius, Real) and not isinstance(radius, bool)}
    if not radii or not all(radii.values()) or len(radii) < len(searched):
        return []
    return radii[min(radii)]


def _planned_fits(plans, fits, classes, train_sizes):
    """Every fit the plans will run, before the charge: ``(estimator, n_samples,
    epsilon, delta, n_features, classes, sparse, on_part)``.

    A plan is ``(probe, n_features, part_widths, sparse)``: the numbers of
    features after preprocessing fitted on all rows and on each training
    part (empty without preprocessing).  A fit on a training part (its size
    in ``train_sizes``; ``on_part``: one of the candidates, which run in
    parallel) is planned at each part's width, the refit at all rows'.
    ``classes`` are those read from y, for probes declaring none.
    """
    # Imported here: _auto builds a DPGridSearchCV, so it imports this module.
    from ._auto import _public_fits

    for probe, n_features, part_widths, sparse in plans:
        own = probe._declared_classes() if is_classifier(probe) \
            and probe.classes is not None else classes
        for fit in fits:
            on_part = fit[0] in train_sizes
            widths = sorted(part_widths) if part_widths and on_part else [n_features]
            for width in widths:
                for fit_probe, n_samples, epsilon, delta in _public_fits(probe, [fit]):
                    yield fit_probe, n_samples, epsilon, delta, width, own, sparse, on_part


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
    epsilon, mu_paid = gdp_release_budget(mu, delta)
    if epsilon <= 0.0:
        raise ValueError(
            f"The budget is too small for {who}: its share is mu={mu:.3g}-GDP, which is "
            f"(0, {delta:.3g})-DP already, so no epsilon > 0 can be given to it. Raise "
            f"epsilon{', ' + remedy + ',' if remedy else ''} or lower delta if it is large."
        )
    return epsilon, mu_paid


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
_PARAMS_BUDGET = """epsilon : float in (0, 1e300] or inf, default=1.0
        Total privacy budget of ``fit``: the whole search (every candidate
        and the selection, plus the refit when ``refit=True``) is
        (epsilon, delta)-DP. ``np.inf`` runs without privacy; a finite
        epsilon above 1e300 is refused at ``fit``.

    delta : float in (0, 1), default=None
        Total delta. ``None`` uses ``min(1e-5, n_samples**-1.5)``, and at
        most the delta of the accountant charged.

    scoring : {{"accuracy", "neg_brier_score", "loss", "neg_mean_absolute_error", \
"neg_mean_squared_error"}}, default=None
        Score of bounded sensitivity the selection uses, computed on the
        validation part (``n_val`` records):

        - ``"accuracy"``: 0/1 errors, sensitivity ``1 / n_val``;
        - ``"neg_brier_score"`` (classifiers): the squared error of the
          predicted probabilities, as scikit-learn's ``brier_score_loss``,
          in ``[0, 1]`` for two classes (sensitivity ``1 / n_val``) and
          ``[0, 2]`` for more (``2 / n_val``);
        - ``"loss"``: the estimator's training loss, each per-example loss
          clipped at its sup over the constraint ball (paper's Delta(B),
          which grows with ``norm_bound``), sensitivity ``Delta(B) / n_val``
          per candidate;
        - ``"neg_mean_absolute_error"``, ``"neg_mean_squared_error"``
          (regression): the error of the prediction clipped to the public
          label interval ``y_bound``, sensitivity ``(high - low) / n_val``
          and ``(high - low)**2 / n_val``.

        ``None`` means ``"neg_brier_score"`` for classifiers
        (``"accuracy"`` for one without ``predict_proba``) and
        ``"neg_mean_absolute_error"`` for regressors.  The Brier score is a
        proper score: it rewards probabilities that are right, where the
        accuracy hardly moves with ``norm_bound`` (not at all where every
        candidate predicts the majority class of an imbalanced outcome), so
        it often cannot rank radii; the absolute error's smaller range made
        it the sharper private score for regressors on
        ``benchmarks/model_selection.py``."""

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
        records at a fraction of the budget is very noisy.  The default,
        ``False``, keeps the search to one release of the whole budget; for
        a model to use, pass ``refit=True`` (in two user trials the chosen
        candidate of ``refit=False`` did worse than the untuned defaults:
        test AUC 0.790 against 0.813 at epsilon 1, log loss 0.832 against
        0.822)."""

_REFIT_REMEDY = "raise refit_share"

#: The most workers a search starts (n_jobs).
_MAX_N_JOBS = 1024

_PARAMS_RUN = """n_jobs : int, default=None
        Candidates trained in parallel by joblib (``-1``: all cores, ``-2``
        all but one, as in joblib; 0 and more than 1024 workers are refused,
        before anything is charged).
        Every candidate runs pre-paid, so worker processes never charge an
        accountant. Each fit already spreads its passes over X across the
        BLAS threads, so on large data ``n_jobs > 1`` can be slower (a user
        trial on two cores: 17 s with ``n_jobs=2`` against 14 s with
        ``None``); it helps when the candidates are many small fits.

    random_state : int, RandomState instance, Generator or None, default=None
        Seeds the split, the candidates' noise and the selection. ``None``
        draws from the operating system. An integer used again by a fit
        charged to the same accountant of yours draws another stream of it
        (docs/randomness.md).

    accountant : PrivacyAccountant, default=None
        Accountant charged once per ``fit``, before any data is read.
        ``None`` uses the DP estimator's own ``accountant`` if it has one,
        else the process-wide default. Giving both, different, is an error."""

_SHARED_ATTRIBUTES = """best_estimator_ : estimator
        The model that ``predict`` and ``score`` use: the chosen candidate
        as trained on the training part (``refit=False``), or its refit on
        all the data (``refit=True``). Its ``accountant`` parameter is the
        search's accountant if one was given, else the one of ``estimator``,
        so that refitting it is charged like any fit. Its DP estimator's
        ``privacy_events_`` and ``privacy_spent_`` are the search's: the
        model was chosen with the validation part, so publishing it costs
        the whole search (its own training's share is ``candidate_privacy_``
        without refit, the refit's event with it). They are the search's
        events, not further ones: do not add them to the search's again.

    best_params_ : dict
        Parameters of the chosen candidate.

    best_index_ : int
        Index of the chosen candidate in ``cv_results_["params"]``.

    cv_results_ : dict of arrays
        ``"params"`` and one ``"param_<name>"`` masked array per parameter,
        ``"selected"`` (the chosen candidate), and ``"score_sensitivity"``
        (public). No validation score: it would leak.

    privacy_events_ : list of GaussianEvent
        What ``fit`` released: one event for the search (see Notes) and,
        with ``refit=True``, one for the refit.

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
        "scoring": [_Scorings(set(SCORINGS)), None],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "refit": ["boolean"],
        # joblib's meaning: -1 all cores, -2 all but one, ...; 0 has none.
        # At most 1024 workers: joblib fails to start 2**31 of them (say) after
        # the charge.
        "n_jobs": [Interval(Integral, None, -1, closed="right"),
                   Interval(Integral, 1, _MAX_N_JOBS, closed="both"), None],
        "random_state": RANDOM_STATE,
        "accountant": [PrivacyAccountant, None],
    }

    @property
    def best_score_(self):
        """Not kept: scikit-learn's searches' best validation score is raw, not private."""
        raise AttributeError(
            f"{type(self).__name__} has no best_score_: a validation score computed "
            "without noise is not private, so none is kept (nor any in cv_results_). "
            "To score the chosen model on held-out private data, release the score with "
            "noise: dp_score(search, X_test, y_test, epsilon=..., accountant=...).")

    #: True for the search norm_bound="auto" runs: its estimator warned already.
    _inner = False

    # -- helpers -------------------------------------------------------------
    def _warn_large_delta(self, delta, n_samples):
        if not self._inner:
            warn_large_delta(self, delta, n_samples)

    def _scoring(self):
        if self.scoring is not None:
            return self.scoring
        if not is_classifier(self.estimator):
            return "neg_mean_absolute_error"
        return "neg_brier_score" if hasattr(self.estimator, "predict_proba") else "accuracy"

    def _accountant_delta(self):
        return self._accountant(_find_dp_slot(self.estimator)).delta

    def _accountant(self, slot):
        if self.accountant is not None:
            if slot.accountant is not None and slot.accountant is not self.accountant:
                raise ValueError(
                    "The search and its estimator were given different accountants; "
                    "give the accountant to one of them."
                )
            return self.accountant
        if slot.accountant is not None:
            return slot.accountant
        # The default of this process, unless the search or its estimator
        # carries one from a block that is gone or in another process: then
        # the estimator's own fit would be refused, and so is the search's
        # (it charged this process's unlimited default, unrecorded).
        owner = slot.owner(self.estimator)
        if isinstance(owner, _DefaultAccountantMixin):
            owner._default_accountant()
        return self._default_accountant()

    def _check_budget(self, slot, events, delta):
        """The accountant to charge, once it is known to afford ``events``.

        The first step of every fit, before any data value is read and
        before anything is drawn from ``random_state`` (a refusal leaves a
        user's generator as it was).  ``events`` are the fit's cost at
        ``(self.epsilon, delta)``.
        """
        # joblib would fail after the charge (2**31 workers overflow a C int):
        # checked here also under skip_parameter_validation, and for the
        # n_jobs of a joblib.parallel_config(...) behind n_jobs=None (the value
        # Parallel uses, by the rule for an explicit one).
        n_jobs, where = self.n_jobs, ""
        if n_jobs is None:
            n_jobs, where = get_active_backend()[1], " (joblib's parallel_config)"
        if isinstance(n_jobs, Integral) and (n_jobs == 0 or n_jobs > _MAX_N_JOBS):
            raise InvalidParameterError(
                f"The 'n_jobs' parameter{where} of {type(self).__name__} must be an int in "
                f"the range [1, {_MAX_N_JOBS}], a negative int or None. Got {n_jobs!r} "
                "instead.")
        accountant = self._accountant(slot)
        _check_release(accountant, events, float(self.epsilon), delta)
        return accountant

    def _check_workers_receive(self, dumps, sent):
        """Raise, before the charge, if worker processes could not receive what
        ``sent`` lists, ``(what, called, obj)``, pickled by ``dumps``
        (:func:`._pickling.worker_pickling_check`): one that could not failed
        after the charge (an estimator that does not pickle, records holding a
        lock in an object array or a pandas index).  Arrays of numbers are
        skipped (:mod:`._pickling`)."""
        for what, called, obj in sent:
            try:
                dumps(obj)
            except Exception as exc:
                raise TypeError(
                    f"{type(self).__name__} with n_jobs={self.n_jobs!r} fits its candidates "
                    f"in worker processes ({type(get_active_backend()[0]).__name__}), which "
                    f"receive {what} pickled; pickling {called} failed "
                    f"({pickling_failure(exc)}). Nothing was charged. Make {called} "
                    "picklable, or use n_jobs=1 or joblib's threading backend.") from None

    def _charge(self, accountant, slot, events, source, X, y, candidates, parts, fits, rows,
                steps_seed):
        """The fit's one charge, made safely; returns :meth:`_prepare`'s ``(X, y, fixed)``
        and the ``(X, y)`` of each of ``rows`` (arrays of row indices).

        ``accountant`` comes from :meth:`_check_budget`: the budget was
        checked before any data value was read.  The input is validated here
        (bad input raises and releases nothing), and only then are ``events``
        spent (the charge checks the budget again, atomically).  ``fits``
        lists the public ``(n_samples, epsilon, delta)`` of the fits to come
        (candidates, chunks, refit).  The ``rows`` (the parts, drawn before)
        are taken before the charge too: they are copies, and a copy too
        large for memory fails while nothing is spent.  ``steps_seed``: that
        of the fits' preprocessing (:func:`~dp_glm_sklearn._randomness._steps_seed`).
        """
        X, y, fixed = self._prepare(slot, X, y, candidates, parts, fits, steps_seed)
        taken = [(safe_indexing(X, part), safe_indexing(y, part)) for part in rows]
        accountant._record(events, source=source)
        return X, y, fixed, taken

    def _prepare(self, slot, X, y, candidates, parts, fits, steps_seed):
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
        possible = self._possible_candidates(candidates, slot)
        # (The wrapped estimator's, then those a grid value replaces it by,
        # from the public settings, not the random search's draws.  Only
        # replaced ones: a candidate built from the template holds a deep copy
        # of its generator, which "differs" from the search's own.)
        _warn_overridden(self, [owner, *(
            slot.owner(_with_params(self.estimator, params)) for params in possible
            if any(isinstance(value, BaseEstimator) for value in params.values()))])
        _warn_fitted_preprocessing(self, slot, possible)
        _check_scoring(self.estimator, slot, self._scoring())
        _check_comparable_scores(self.estimator, possible, slot, self._scoring(),
                                 "param_distributions" if hasattr(self, "param_distributions")
                                 else "param_grid")
        dumps = worker_pickling_check(self.n_jobs)
        if dumps is not None:
            estimator = clone(self.estimator).set_params(**{slot.key("accountant"): None})
            self._check_workers_receive(dumps, [(
                "the estimator and the candidates' parameters", "them",
                (estimator, list(itertools.chain(possible, candidates))))])
        _n_samples(y, type(self).__name__, what="y")
        X, y = indexable(X, y)
        check_consistent_length(X, y)
        if dumps is not None:
            self._check_workers_receive(dumps, [("the training data", "X", X),
                                                ("the training data", "y", y)])
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
        train_sizes = {len(train) for train, _ in parts}
        refits = any(fit[0] not in train_sizes for fit in fits)  # (a fit on all rows)
        heads, checked, probed, plans = {}, {}, set(), []
        searched_radii = set()  # the plans whose norm_bound is searched (see below)
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
                Xt, widths = X, set()
            elif head_key not in heads:
                Xt, widths = heads[head_key] = _probe_head(head, X, y, parts, dumps, refits,
                                                           steps_seed)
            else:
                Xt, widths = heads[head_key]
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
            # The candidates are checked at each training part's width and the
            # refit at all rows' (a step fitted on the data can give a part
            # more features than all rows, and a plan refused at that width
            # failed after the charge).  (JL's working memory depends on X's
            # storage; after preprocessing it may differ between parts: None,
            # either.)
            if _radius_searched(slot, params, probe):
                searched_radii.add(len(plans))
            plans.append((probe, X_checked.shape[1], frozenset(widths),
                          sp.issparse(X_checked) if head is None else None))
        fixed = {}
        if is_classifier(owner) and any(
                slot.owner(_with_params(self.estimator, params)).classes is None
                for params in possible):
            # Whether classes are read from y (one PrivacyLeakWarning) depends
            # on the candidates that could be drawn, not on those drawn.
            reader = clone(plans[-1][0]).set_params(classes=None)
            fixed = {slot.key("classes"): reader._check_targets(y_checked, warn=True)}
        self._check_public_plans(plans, fits, fixed.get(slot.key("classes")), train_sizes,
                                 self._parallel_fits(candidates, parts), searched_radii)
        # The candidates' fits (a refit has all the rows), scored on the validation part.
        scored = [fit for fit in fits if fit[0] in train_sizes]
        self._check_loss_bounds(plans, scored, fixed.get(slot.key("classes")),
                                 max(len(val) for _, val in parts), train_sizes)
        return X, y, fixed

    def _check_public_plans(self, plans, fits, classes, train_sizes, parallel,
                            searched_radii=frozenset()):
        """Run the public half of each planned fit (:func:`_planned_fits`); show
        their warnings.  The working memory of ``parallel`` candidates is
        reserved at once (of one refit).  For the plans of ``searched_radii``
        (indices: a ``norm_bound`` set by the grid or the distributions, or
        ``"auto"``, whose radii the library picks) a radius's warning that it
        is far larger than the labels need is not shown: the range is
        searched, and the selection weighs it, unless every searched radius
        is (then the smallest one's is shown)."""
        caught, searched = [], {}
        for index, plan in enumerate(plans):
            for fit_probe, n_samples, epsilon, delta, width, own, sparse, on_part in \
                    _planned_fits([plan], fits, classes, train_sizes):
                method = fit_probe._check_public_plan(n_samples, width, epsilon, delta, own,
                                                      sparse, parallel if on_part else 1)
                messages = fit_probe._plan_warnings(method, width)
                if index in searched_radii:
                    messages = _without_large_reach(fit_probe, messages, searched)
                caught += [(UserWarning, m) for m in messages]
        caught += [(UserWarning, m) for m in _all_too_large(searched)]
        self._show_candidate_warnings(caught)

    def _check_loss_bounds(self, plans, fits, classes, n_val, train_sizes):
        """With ``scoring="loss"``, raise unless every candidate's score is finite
        whatever the validation rows.

        Each of the ``n_val`` validation losses is clipped to ``[0, Delta(B)]``
        (:func:`~._scores._glm_loss_bound`, public); the selection needs
        their mean finite.  A bound that is inf, or so large that their sum
        overflows for some rows and not others, would fail the fit after the
        charge, on some data only.  (The other scorings' bounds are at most
        ``(2 * 1e100)**2``: the estimators refuse larger ``y_bound``.)  The
        sum of ``n_val`` values in ``[0, bound]`` is at most ``n_val * bound``
        times ``1 + n_val * 2**-53`` in floating point: ``2 * n_val * bound``
        finite leaves room for that.
        """
        if self._scoring() != "loss":
            return
        for fit_probe, *_, width, own, _, _ in _planned_fits(plans, fits, classes,
                                                             train_sizes):
            bound = _planned_loss_bound(fit_probe, width, own)
            if math.isfinite(2.0 * n_val * bound):  # Python floats: inf, no warning
                continue
            y_bound = "" if is_classifier(fit_probe) else f", y_bound={fit_probe._y_interval()}"
            raise ValueError(
                f"scoring='loss' clips each validation loss at its sup over the constraint "
                f"ball, here {bound:.4g} for norm_bound={float(fit_probe.norm_bound)!r}, "
                f"feature_norm={fit_probe._feature_norm()!r}{y_bound} "
                f"({type(fit_probe).__name__}); the mean of the n_val={n_val} validation "
                "losses would overflow. Lower norm_bound or feature_norm, or use another "
                "scoring. Nothing was charged.")

    def _possible_candidates(self, candidates, slot):
        """The settings checked before the charge besides the candidates themselves."""
        return candidates

    def _parallel_fits(self, candidates, parts):
        """How many candidate fits may run at once (public): joblib's workers, at
        most one per candidate and training part."""
        return max(1, min(effective_n_jobs(self.n_jobs), len(candidates) * len(parts)))

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

    def _fit_all(self, slot, candidates, fixed, X, y, seeds, steps_seed):
        """Fit ``clone(estimator)`` with each candidate's params on (X, y), in parallel."""
        return self._fit_jobs(slot, [(params, fixed, X, y, seed)
                                     for params, seed in zip(candidates, seeds, strict=True)],
                              steps_seed)

    def _fit_jobs(self, slot, jobs, steps_seed):
        """Fit ``clone(estimator)`` once per ``(params, fixed, X, y, seed)``, in parallel,
        the preprocessing steps' ``random_state`` left at None seeded from
        ``steps_seed`` (:func:`_fit_candidate`)."""
        delayed_jobs = []
        for params, fixed, X, y, seed in jobs:
            extra = {slot.key("random_state"): seed} if slot.has_random_state else {}
            est = clone(self.estimator)
            # Do not ship the user's accountant to workers; _fit_candidate
            # installs a throwaway one there.
            est.set_params(**{slot.key("accountant"): None})
            # fixed first: a candidate's own classes win over those read from y
            # (the budget keys cannot be in params: _check_grid_keys) ...
            merged = {**fixed, **_cloned(params), **extra}
            classes = slot.key("classes")
            if classes in fixed and merged[classes] is None:
                # ... but classes=None in the grid means the classes read once
                # from all of y: read again from a candidate's training part,
                # a class absent from it failed the fit after the charge, with
                # a probability that depends on the private labels.
                merged[classes] = fixed[classes]
            delayed_jobs.append(delayed(_fit_candidate)(
                est, merged, slot, X, y, os.getpid(), steps_seed))
        # Silenced here, around all the candidates: the warnings filters are
        # process-wide, so the threading backend's workers are silenced too
        # (_fit_candidate silences a worker process itself).
        with silenced():
            # verbose=0 whatever joblib's parallel_config says: its progress
            # lines count the tasks, i.e. the random search's secret K.
            fitted = Parallel(n_jobs=self.n_jobs, verbose=0)(delayed_jobs)
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
            failed = False
            try:
                with parallel_config(verbose=0):  # (as in _fit_candidate)
                    losses, bound = _validation_losses(est, slot, scoring, X_val, y_val)
            except Exception:
                failed = True
            if failed:
                # After the charge: a step's own message may quote the data (a
                # get_dummies step's unseen columns, when the validation part
                # is scored in blocks of rows the probes did not try).  Raised
                # outside the except block: the original is not its context.
                raise RuntimeError(
                    f"{type(self).__name__}: a candidate failed on the validation part "
                    "after the charge (the budget is spent). What failed is not shown: it "
                    "may tell values of the data. Preprocessing steps must transform each "
                    "row alone, to the same columns whatever the rows.")
            if losses.shape != (n_val,):  # the sensitivity bound / n_val needs one per row
                # (The shape is not shown: a step adding or dropping rows by
                # their values would make it a count of private records.)
                raise RuntimeError(
                    f"{type(self).__name__}: a candidate's validation losses are not one per "
                    "validation row, which the declared sensitivity needs; the selection is "
                    "withheld (the budget is spent). Preprocessing steps must transform each "
                    "row alone, to one row.")
            utilities.append(-losses.mean())
            sensitivities.append(bound / n_val)
        return np.asarray(utilities), np.asarray(sensitivities)

    def _fits(self, plan, n_train, n_samples):
        """The public ``(n_samples, epsilon, delta)`` of the candidates and the refit."""
        fits = [(n_train, plan["candidate_epsilon"], plan["candidate_delta"])]
        if self.refit:
            fits.append((n_samples, plan["refit_epsilon"], plan["refit_delta"]))
        return fits

    def _fit_candidates(self, slot, plan, fixed, jobs, steps_seed):
        """Fit each ``(params, X, y, seed)`` at the plan's candidate budget, pre-paid."""
        budget = {**fixed, slot.key("epsilon"): plan["candidate_epsilon"],
                  slot.key("delta"): plan["candidate_delta"]}
        fitted = self._fit_jobs(slot, [(params, budget, X, y, seed)
                                       for params, X, y, seed in jobs], steps_seed)
        for est in fitted:
            _check_prepaid(est, slot, plan["mu_candidate"])
        return fitted

    def _refit(self, params, slot, X, y, plan, rng, fixed, steps_seed):
        fixed = {**fixed, slot.key("epsilon"): plan["refit_epsilon"],
                 slot.key("delta"): plan["refit_delta"]}
        (est,) = self._fit_all(slot, [params], fixed, X, y,
                               _child_seeds(rng, 1, self.random_state), steps_seed)
        _check_prepaid(est, slot, plan["mu_refit"])
        return est

    def _set_privacy(self, plan, slot):
        """``candidate_privacy_``, ``privacy_events_`` and ``privacy_spent_`` from the plan.

        The DP estimator in ``best_estimator_`` gets the search's
        ``privacy_events_`` and ``privacy_spent_`` too, as ``norm_bound="auto"``
        gives its estimator: the model was chosen with the validation part (and
        without refit trained at a candidate's share only), so what publishing
        it costs is the whole search, not its own fit's share.
        """
        self.candidate_privacy_ = (float(plan["candidate_epsilon"]), plan["candidate_delta"])
        self.privacy_events_ = list(plan["events"])
        self.privacy_spent_ = (float(compose(self.privacy_events_, plan["delta"])), plan["delta"])
        model = slot.owner(self.best_estimator_)
        model.privacy_events_ = list(self.privacy_events_)
        model.privacy_spent_ = self.privacy_spent_

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
        """Predict with the chosen estimator (``best_estimator_.predict``).

        Post-processing of the released model: no further cost to the training data.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Data to predict.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Predicted targets or class labels.
        """
        check_is_fitted(self)
        return self.best_estimator_.predict(X)

    @available_if(_search_estimator_has("predict_proba"))
    def predict_proba(self, X):
        """Class probabilities of the chosen estimator (``best_estimator_.predict_proba``).

        Post-processing of the released model: no further cost to the training data.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Data to score.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Probabilities of the classes, in the order of ``classes_``.
        """
        check_is_fitted(self)
        return self.best_estimator_.predict_proba(X)

    @available_if(_search_estimator_has("predict_log_proba"))
    def predict_log_proba(self, X):
        """Log class probabilities of the chosen estimator (``best_estimator_.predict_log_proba``).

        Post-processing of the released model: no further cost to the training data.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Data to score.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            Logarithms of the probabilities, in the order of ``classes_``.
        """
        check_is_fitted(self)
        return self.best_estimator_.predict_log_proba(X)

    @available_if(_search_estimator_has("decision_function"))
    def decision_function(self, X):
        """Decision function of the chosen estimator (``best_estimator_.decision_function``).

        Post-processing of the released model: no further cost to the training data.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Data to score.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            Margins: one column for two classes, one per class otherwise.
        """
        check_is_fitted(self)
        return self.best_estimator_.decision_function(X)

    @available_if(_search_estimator_has("transform"))
    def transform(self, X):
        """Transform with the chosen estimator (``best_estimator_.transform``).

        Post-processing of the released model: no further cost to the training data.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Data to transform.

        Returns
        -------
        X_new : ndarray
            ``X`` transformed by the chosen estimator.
        """
        check_is_fitted(self)
        return self.best_estimator_.transform(X)

    @available_if(_search_estimator_has("score"))
    def score(self, X, y, sample_weight=None):
        """Score of the chosen estimator on (X, y), by ``scoring``.

        With ``scoring=None``, the chosen estimator's own ``score`` (R^2 or
        accuracy), as scikit-learn's searches do: for a classifier the
        accuracy, not the Brier score the selection used.  Otherwise the
        score the selection used: the accuracy, or minus the mean of the
        bounded per-example losses (the Brier score of the probabilities;
        predictions and labels clipped to ``y_bound``; losses clipped at
        their bound; see ``scoring``), weighted by ``sample_weight`` if given.
        Labels that are NaN or infinite, not class labels, or not among
        ``classes_`` (``"neg_brier_score"`` and ``"loss"``), and non-finite
        weights are refused, as scikit-learn's metrics refuse them.

        Released without noise: a statistic of (X, y), with no guarantee for
        them.  Score public data here; for a held-out part of the private
        data use ``dp_score(search, X_test, y_test, epsilon=..., accountant=...)``,
        which adds noise and charges it.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Test data.
        y : array-like of shape (n_samples,)
            Their targets or class labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the test samples.

        Returns
        -------
        score : float
            The score (higher is better).
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
        if weights is not None and not np.all(np.isfinite(weights)):
            raise ValueError("Input sample_weight contains NaN or infinity.")
        if weights is not None and len(weights) and not np.any(weights):
            # (scikit-learn's metrics' words; np.average raised a ZeroDivisionError)
            raise ValueError("Sample weights must contain at least one non-zero number.")
        if self.scoring == "accuracy":  # scikit-learn's checks of y_true (NaN, label types)
            return float(accuracy_score(y, best.predict(X), sample_weight=weights))
        # Public test data: bad labels are refused, as scikit-learn's metrics refuse
        # them (the selection, on private data, scores them at the bound instead).
        slot = _find_dp_slot(best)
        if is_classifier(best):
            check_classification_targets(y)
            if not np.isin(y, slot.owner(best).classes_).all():
                raise ValueError(f"y contains labels that are not in classes_; "
                                 f"scoring={self.scoring!r} needs the model's classes.")
        else:
            y = np.asarray(y, dtype=np.float64)
            if not np.all(np.isfinite(y)):
                raise ValueError("Input y contains NaN or infinity.")
        losses, _ = _clipped_losses(best, slot, self.scoring, X, y)
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
        # The DP estimators need y, and the searches refuse y=None (a
        # Pipeline's own tags say it does not need one).
        tags.target_tags.required = True
        tags.non_deterministic = not _fits_replay_seeds(
            lambda: self._accountant(_find_dp_slot(self.estimator)))
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
        keys ``"<step name>__norm_bound"``, such as
        ``"dplinearregression__norm_bound"`` in a ``make_pipeline``; Pipelines may nest). Other
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
        sensitivity, GEM would amount to the exponential mechanism at half
        the epsilon, so ``"gem"`` then runs the exponential mechanism at the
        full selection epsilon.

    {split}

    refit_share : float in (0, 1), default={refit_share}
        With ``refit=True``, the share of the GDP budget (of ``mu**2``) that
        the refit gets; the search gets the rest. Ignored without refit (a value
        other than the default then warns). Any
        value is private; it trades the quality of the final model against
        that of the selection. On very small data, where the candidates
        are too noisy to rank the parameters, a larger share (0.65) gave
        slightly better models on ``benchmarks/model_selection.py``
        (diabetes, 331 records); above 0.7 the candidates of the synthetic
        data set (15,000 records) became too noisy to rank the grid.

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

    Differences from ``GridSearchCV``: no ``cv`` (one data-independent
    split, ``validation_fraction``; k folds would use every record k
    times), and no ``best_score_`` or scores in ``cv_results_`` (a
    validation score computed without noise is not private); hence no
    ``n_splits_``, ``return_train_score``, ``multimetric_`` (one bounded
    ``scoring``, no list or dict) or ``scorer_``.  No ``refit_time_`` nor
    timings in ``cv_results_`` (they depend on the data through the
    training), no ``error_score`` (a candidate that fails after the charge
    withholds the selection: which one failed may tell of the data), no
    ``verbose`` or ``pre_dispatch``, and ``fit`` takes no ``sample_weight``.

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
    #: Names the search in its events' labels (norm_bound="auto" names itself).
    _event_name = "DPGridSearchCV"
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
        epsilon, delta = target_privacy(self, n_samples)
        mu = gdp_mu(epsilon, delta)
        share = float(self.refit_share) if self.refit else 0.0
        mu_search, mu_refit = gdp_split(mu, share)
        candidate_epsilon, mu_candidate = _candidate_privacy(
            gdp_per_release(mu_search, n_candidates), delta, *self._candidate_words)
        selection_epsilon = gdp_bounded_range_epsilon(mu_search)
        mu_event = gdp_parallel(gdp_composed(mu_candidate, n_candidates),
                                bounded_range_gdp_mu(selection_epsilon))
        events = [GaussianEvent(
            mu=mu_event,
            label=f"{self._event_name}: {n_candidates} candidates || selection "
                  f"(epsilon={selection_epsilon:.4g})",
        )]
        plan = dict(delta=delta, candidate_epsilon=candidate_epsilon, candidate_delta=delta,
                    mu_candidate=mu_candidate, selection_epsilon=selection_epsilon, events=events)
        if self.refit:
            refit_epsilon, mu_refit_paid = _candidate_privacy(mu_refit, delta, "the refit",
                                                              _REFIT_REMEDY)
            events.append(GaussianEvent(mu=mu_refit_paid, label=f"{self._event_name}: refit"))
            plan.update(refit_epsilon=refit_epsilon, refit_delta=delta, mu_refit=mu_refit_paid)
        return plan

    @fit_context(prefer_skip_nested_validation=False)
    @validated_even_if_skipped
    @_clones_draw_nothing
    def fit(self, X, y, **fit_params):
        """Train every candidate on the training part and select one privately.

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
        try:
            candidates = list(ParameterGrid(self.param_grid))
        except (TypeError, ValueError) as exc:  # (scikit-learn's words name no parameter)
            raise _with_message(exc, f"The 'param_grid' parameter of {type(self).__name__}: "
                                     f"{exc}") from None
        if not candidates:
            raise ValueError("The 'param_grid' parameter must contain at least one candidate.")
        slot = _find_dp_slot(self.estimator)
        _check_grid_keys(candidates, slot)
        _validate_candidates(self.estimator, candidates, slot, self.accountant)
        if len(candidates) == 1:
            spent = ("split between the candidate with its selection and the refit "
                     "(refit_share)" if self.refit else "spent on training it on the training "
                     "part alone (the validation part serves a selection with one choice)")
            warn_user(
                f"The 'param_grid' of {type(self).__name__} has one candidate "
                f"({candidates[0]!r}): there is nothing to select, and the budget is {spent}. "
                "Fitting the estimator itself at the same epsilon trains it once, on all the "
                "data, with the whole budget.", UserWarning)
        if not self.refit and self.refit_share != _REFIT_SHARE:
            warn_user(f"{type(self).__name__}: refit_share={self.refit_share!r} is used with "
                      "refit=True only; without a refit the search gets the whole budget.",
                      UserWarning)
        n_samples = _fit_n_samples(X, y, type(self).__name__)
        self._validation_size(n_samples)
        plan = self._plan(len(candidates), n_samples)
        self._warn_large_delta(plan["delta"], n_samples)
        source = self._ledger_source or f"{type(self).__name__}(K={len(candidates)})"
        accountant = self._check_budget(slot, plan["events"], plan["delta"])
        with _streams_given_back_if_refused(accountant):
            rng = _release_rng(self.random_state, accountant)
            steps_seed = _steps_seed(self.random_state, rng)
            train, val = self._split(n_samples, rng)  # data-independent: before the charge
            X, y, fixed, [(X_tr, y_tr), (X_val, y_val)] = self._charge(
                accountant, slot, plan["events"], source, X, y, candidates,
                parts=[(train, val)], fits=self._fits(plan, len(train), n_samples),
                rows=[train, val], steps_seed=steps_seed)
        seeds = _child_seeds(rng, len(candidates), self.random_state)
        fitted = self._fit_candidates(slot, plan, fixed, [
            (params, X_tr, y_tr, seed) for params, seed in zip(candidates, seeds, strict=True)],
            steps_seed)

        utilities, sensitivities = self._validation_utilities(fitted, slot, X_val, y_val)
        best = self._select(utilities, sensitivities, plan["selection_epsilon"], rng)
        del utilities  # never stored

        best_estimator = fitted[best]
        if self.refit:
            best_estimator = self._refit(candidates[best], slot, X, y, plan, rng, fixed,
                                         steps_seed)
        self.best_index_ = int(best)
        self.best_params_ = dict(candidates[best])
        self.best_estimator_ = _restore_accountant(best_estimator, slot, self.accountant)
        self._set_results(candidates, best, sensitivities)
        self.selection_epsilon_ = float(plan["selection_epsilon"])
        self._set_privacy(plan, slot)
        return self

    def _select(self, utilities, sensitivities, epsilon, rng):
        if self.selection == "gem" and np.ptp(sensitivities) > 0:
            index, _ = generalized_exponential_mechanism(utilities, sensitivities, epsilon, rng)
        else:
            index, _ = exponential_mechanism(utilities, sensitivities.max(), epsilon, rng)
        return index


DPGridSearchCV.__doc__ = format_doc(
    DPGridSearchCV.__doc__,
    budget=_PARAMS_BUDGET.format(),
    split=_PARAMS_SPLIT.format(validation_fraction=_VALIDATION_FRACTION),
    run=_PARAMS_RUN.format(),
    attributes=_SHARED_ATTRIBUTES,
    refit_share=_REFIT_SHARE)
