"""Confidence boosting (Arora et al. 2022, Appendix E).

Train the same DP estimator on ``m`` disjoint chunks of the data and keep the
model that a private selection on one more, held-out chunk finds best.  A
single private fit is good *in expectation*; by Markov's inequality each of
the ``m`` independent models is within twice its expected excess risk with
probability at least 1/2, so all ``m`` miss that with probability at most
``2**-m``, and the selection finds a good one among them.  The paper's
Algorithm ("Boosting") splits S into ``m + 1`` equal chunks, trains
``w_i = A(S_i)`` for ``i <= m`` and returns
``argmax_i (-L(w_i; S_{m+1}) + noise)`` (report-noisy-max).

**Privacy: parallel composition, one event.**  The split is a seeded
permutation, independent of the data (n is public).  Under replace-one
adjacency a changed record lies in exactly one chunk.

- In a training chunk ``S_i``: only ``w_i`` sees it, a ``mu``-GDP release;
  the other models and the held-out chunk have the same distribution on both
  neighbours and the selection is post-processing, so the whole fit is
  ``mu``-GDP for this pair.
- In the held-out chunk: the models have the same distribution on both
  neighbours, and given them the selection (the exponential mechanism) is
  ``epsilon_sel``-bounded-range, hence
  ``bounded_range_gdp_mu(epsilon_sel) = pure_dp_gdp_mu(epsilon_sel / 2)``-GDP
  (:func:`~dp_glm_sklearn.privacy.selection.bounded_range_gdp_mu`); the pair
  (models, choice), a mixture of these over models whose law does not depend
  on the chunk, is GDP with the same mu (convexity of the Gaussian trade-off
  curve, as for the split in :mod:`dp_glm_sklearn.model_selection._search`).

So the fit is ``max(mu, bounded_range_gdp_mu(epsilon_sel))``-GDP.  With
``mu = gdp_mu(epsilon, delta)``, every model is trained at the full (epsilon,
delta) (they compose in parallel, not sequentially) and the selection runs at
``epsilon_sel = gdp_bounded_range_epsilon(mu) = 2 * gdp_pure_epsilon(mu)``;
ONE ``GaussianEvent(mu)`` is recorded and charged, before any data value is read, exactly as
:class:`~dp_glm_sklearn.model_selection.DPGridSearchCV` does (see
:mod:`dp_glm_sklearn.model_selection._search` for why a Gaussian event).
"""

from numbers import Integral

import numpy as np

from .._base import target_privacy
from .._randomness import (
    _clones_draw_nothing,
    _release_rng,
    _steps_seed,
    _streams_given_back_if_refused,
)
from .._sklearn_compat import Interval, fit_context, validated_even_if_skipped
from .._validation import _fit_n_samples
from ..privacy.calibration import gdp_mu, gdp_parallel
from ..privacy.events import GaussianEvent
from ..privacy.selection import (
    bounded_range_gdp_mu,
    exponential_mechanism,
    gdp_bounded_range_epsilon,
)
from ._search import _BaseDPSearch, _candidate_privacy, _child_seeds, _restore_accountant
from ._slot import _find_dp_slot, _refuse_fit_params, _validate_candidates

__all__ = ["DPConfidenceBoosting"]


class DPConfidenceBoosting(_BaseDPSearch):
    """Confidence boosting: the best of several DP models on disjoint chunks.

    Splits the data into ``n_models + 1`` equal chunks (a seeded random
    permutation, independent of the data), trains a clone of ``estimator`` on
    each of the first ``n_models`` chunks, and keeps the one that the
    exponential mechanism (report-noisy-max) finds best on the last, held-out
    chunk, with a validation score of bounded sensitivity (Arora et al.
    2022, "Differentially private generalized linear models revisited",
    Appendix E). This is not ensemble boosting: one of the models is kept,
    and nothing is averaged.

    Use it to turn a DP estimator that is good on average into one that is
    good with high probability: if each model misses twice its expected
    excess risk with probability at most 1/2 (Markov's inequality), all
    ``n_models`` miss it with probability at most ``2**-n_models``. The
    price is data: each model sees ``1 / (n_models + 1)`` of the records,
    so its noise, relative to the signal, is ``n_models + 1`` times larger
    than a single fit's on all the data. It pays off when failures of a
    single fit come from its own randomness (a bad draw of the noise or of
    a random projection) rather than from too little data. Where the noise
    dominates, a plain fit is better: on ``benchmarks/model_selection.py``
    (diabetes, breast_cancer, and a synthetic regression with 15,000
    records, default parameters, epsilon 1 to 10) boosting with 3 models
    was worse than a single fit in median and in the 10th percentile.

    A wrapper rather than an option of :class:`DPGridSearchCV`: it fits and
    predicts like the estimator it wraps (in a Pipeline, under ``clone``),
    and its candidates share their parameters and differ in their data,
    where a search's candidates share their data and differ in their
    parameters.

    Parameters
    ----------
    estimator : estimator
        A DP estimator of this library, or a Pipeline ending in one
        (Pipelines may nest), as in :class:`DPGridSearchCV`. Its
        ``epsilon``, ``delta``, ``accountant`` and ``random_state`` are set
        by the wrapper.

    n_models : int >= 2, default=3
        Number of models m, each trained on its own chunk; the data are
        split into ``m + 1`` chunks of equal size (up to one record), the
        last one held out for the selection. With the Markov argument above,
        3 models leave a probability of at most 1/8 that none is good.

    epsilon : float in (0, 1e300] or inf, default=1.0
        Total privacy budget of ``fit``: the models and the selection
        together are (epsilon, delta)-DP. Every model is trained at this
        full budget (each record is in one chunk only). ``np.inf`` runs
        without privacy; a finite epsilon above 1e300 is refused at ``fit``.

    delta : float in (0, 1), default=None
        Total delta. ``None`` uses ``min(1e-5, n_samples**-1.5)``, and at
        most the delta of the accountant charged.

    scoring : {"accuracy", "neg_brier_score", "loss", "neg_mean_absolute_error", \
"neg_mean_squared_error"}, default=None
        Score of bounded sensitivity computed on the held-out chunk
        (``n_val`` records), as in :class:`DPGridSearchCV`: ``"loss"`` is
        the paper's choice (the training loss clipped at its bound over the
        constraint ball, sensitivity ``Delta(B) / n_val``); ``None`` means
        ``"neg_brier_score"`` (the squared error of the predicted
        probabilities; sensitivity ``1 / n_val`` for two classes,
        ``2 / n_val`` for more) for classifiers (``"accuracy"`` for one
        without ``predict_proba``) and
        ``"neg_mean_absolute_error"`` (predictions and labels clipped to the
        public ``y_bound``, sensitivity ``(high - low) / n_val``) for
        regressors.

    n_jobs : int, default=None
        Models trained in parallel by joblib (``-1``: all cores, ``-2`` all
        but one, as in joblib; 0 and more than 1024 workers are refused).
        They run pre-paid, so worker processes never charge an accountant.

    random_state : int, RandomState instance, Generator or None, default=None
        Seeds the split, the models' noise and the selection. ``None``
        draws from the operating system. An integer used again by a fit
        charged to the same accountant of yours draws another stream of it
        (docs/randomness.md).

    accountant : PrivacyAccountant, default=None
        Accountant charged once per ``fit``, before any data is read.
        ``None`` uses the DP estimator's own ``accountant`` if it has one,
        else the process-wide default. Giving both, different, is an error.

    Attributes
    ----------
    best_estimator_ : estimator
        The chosen model, trained on its chunk only; ``predict``, ``score``
        and the other delegated methods use it. Its ``accountant`` parameter
        is the wrapper's accountant if one was given, else the one of
        ``estimator``, so that refitting it is charged like any fit. Its DP
        estimator's ``privacy_events_`` and ``privacy_spent_`` are the
        wrapper's: the model was chosen with the held-out chunk.

    best_index_ : int
        Index of its chunk, in ``range(n_models)``.

    chunk_sizes_ : ndarray of shape (n_models + 1,)
        Sizes of the chunks, the held-out one last (public: n is).

    score_sensitivity_ : float
        Sensitivity of the validation score (public).

    privacy_events_ : list of GaussianEvent
        One event for the whole fit (see Notes).

    privacy_spent_ : tuple (epsilon, delta)
        Guarantee of ``fit``, derived from ``privacy_events_``.

    candidate_privacy_ : tuple (epsilon, delta)
        Budget each model was trained with.

    selection_epsilon_ : float
        Epsilon of the selection (the exponential mechanism: pure DP, and
        bounded-range).

    See Also
    --------
    DPGridSearchCV : private choice among different parameters.

    Notes
    -----
    Privacy (replace-one adjacency, n public). A changed record is in one
    chunk only: in a training chunk it affects one model, a
    ``mu``-GDP release with ``mu = gdp_mu(epsilon, delta)``; in the held-out
    chunk it affects only the selection, run at
    ``epsilon_sel = 2 log(Phi(mu/2) / Phi(-mu/2))``, the largest epsilon
    whose bounded-range mechanisms (the exponential mechanism is one)
    ``mu``-GDP dominates. So ``fit`` is ``mu``-GDP (parallel
    composition), recorded as one ``GaussianEvent(mu)``. The budget is
    checked before any data is read; a refused fit raises
    ``BudgetExceededError`` and trains nothing. No validation score, nor
    anything else computed from the held-out chunk without noise, is kept.

    The paper trains each model at ``epsilon / 2`` and selects with Laplace
    noise; here the models get the whole budget and the selection is the
    exponential mechanism, which is report-noisy-max with Gumbel noise, with
    the accounting above.

    Examples
    --------
    >>> import numpy as np
    >>> from dp_glm_sklearn import DPConfidenceBoosting, DPLinearRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(8000, 3)) / 2
    >>> y = X @ [0.5, -0.5, 0.25] + 0.05 * rng.normal(size=8000)
    >>> boosted = DPConfidenceBoosting(
    ...     DPLinearRegression(feature_norm=1.5, y_bound=1.0, norm_bound=1.0),
    ...     n_models=3, epsilon=2.0, delta=1e-5, random_state=0).fit(X, y)
    >>> epsilon, delta = boosted.privacy_spent_
    >>> round(epsilon, 6), delta
    (2.0, 1e-05)
    >>> boosted.chunk_sizes_.tolist()
    [2000, 2000, 2000, 2000]
    >>> bool(boosted.score(X, y) > 0.9)
    True
    """

    _parameter_constraints: dict = {
        key: value for key, value in _BaseDPSearch._parameter_constraints.items()
        if key not in ("validation_fraction", "refit")
    } | {"n_models": [Interval(Integral, 2, None, closed="left")]}

    def __init__(self, estimator, *, n_models=3, epsilon=1.0, delta=None, scoring=None,
                 n_jobs=None, random_state=None, accountant=None):
        self.estimator = estimator
        self.n_models = n_models
        self.epsilon = epsilon
        self.delta = delta
        self.scoring = scoring
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.accountant = accountant

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Each model trains on one of n_models + 1 disjoint chunks: on the
        # estimator checks' small data sets (a few dozen rows per chunk) the
        # chosen model misses their accuracy threshold (the single fit meets it).
        if tags.classifier_tags is not None:
            tags.classifier_tags.poor_score = True
        if tags.regressor_tags is not None:
            tags.regressor_tags.poor_score = True
        return tags

    def _plan(self, n_samples):
        """Public calibration: each model's budget, the selection's, the event."""
        epsilon, delta = target_privacy(self, n_samples)
        mu = gdp_mu(epsilon, delta)
        candidate_epsilon, mu_candidate = _candidate_privacy(mu, delta, "each model", None)
        selection_epsilon = gdp_bounded_range_epsilon(mu)
        event = GaussianEvent(
            mu=gdp_parallel(mu_candidate, bounded_range_gdp_mu(selection_epsilon)),
            label=f"DPConfidenceBoosting: {self.n_models} models on disjoint chunks || "
                  f"selection (epsilon={selection_epsilon:.4g})",
        )
        return dict(delta=delta, candidate_epsilon=candidate_epsilon, candidate_delta=delta,
                    mu_candidate=mu_candidate, selection_epsilon=selection_epsilon,
                    events=[event])

    @fit_context(prefer_skip_nested_validation=False)
    @validated_even_if_skipped
    @_clones_draw_nothing
    def fit(self, X, y, **fit_params):
        """Train one model per chunk and keep the best one, chosen privately.

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
        slot = _find_dp_slot(self.estimator)
        _validate_candidates(self.estimator, [{}], slot, self.accountant)  # before the charge
        n_samples = _fit_n_samples(X, y, type(self).__name__)
        m = self.n_models
        if n_samples < m + 1:
            raise ValueError(
                f"n_models={m} needs at least n_models + 1 = {m + 1} samples (one chunk per "
                f"model and one held out); got n_samples={n_samples}."
            )
        plan = self._plan(n_samples)
        self._warn_large_delta(plan["delta"], n_samples)
        accountant = self._check_budget(slot, plan["events"], plan["delta"])
        with _streams_given_back_if_refused(accountant):
            rng = _release_rng(self.random_state, accountant)
            steps_seed = _steps_seed(self.random_state, rng)
            chunks = np.array_split(rng.permutation(n_samples), m + 1)  # before the charge
            X, y, fixed, taken = self._charge(
                accountant, slot, plan["events"], f"{type(self).__name__}(n_models={m})", X, y,
                ({},), parts=[(chunk, chunks[m]) for chunk in chunks[:m]],
                fits=[(size, plan["candidate_epsilon"], plan["candidate_delta"])
                      for size in sorted({len(c) for c in chunks[:m]})],
                rows=chunks, steps_seed=steps_seed)
        seeds = _child_seeds(rng, m, self.random_state)
        fitted = self._fit_candidates(slot, plan, fixed, [
            ({}, X_chunk, y_chunk, seed)
            for (X_chunk, y_chunk), seed in zip(taken[:m], seeds, strict=True)
        ], steps_seed)

        X_val, y_val = taken[m]
        del taken  # the training chunks
        utilities, sensitivities = self._validation_utilities(fitted, slot, X_val, y_val)
        # Same parameters, same public bound: one common sensitivity.
        best, _ = exponential_mechanism(utilities, float(sensitivities.max()),
                                        plan["selection_epsilon"], rng)
        del utilities  # never stored

        self.best_index_ = int(best)
        self.best_estimator_ = _restore_accountant(fitted[best], slot, self.accountant)
        del fitted
        self.chunk_sizes_ = np.array([len(chunk) for chunk in chunks])
        self.score_sensitivity_ = float(sensitivities.max())
        self.selection_epsilon_ = float(plan["selection_epsilon"])
        self._set_privacy(plan, slot)
        return self
