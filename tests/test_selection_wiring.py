"""Every wrapper runs its private selection at the budget it records.

The selection primitives are tested on their own in ``test_selection.py``, and
the recorded events in ``test_model_selection.py``; this module checks the
wiring between the two.  Each test replaces the primitive a wrapper really
calls (the name bound in the wrapper's module) by a spy that records its
arguments and calls through, fits, and compares

- the epsilon (for random stopping: the noise scale of the noisy scores)
  passed with what the fitted object records: ``selection_epsilon_``, the
  epsilon stated in the event's label, and the epsilon the recorded Gaussian
  event can pay for (``gdp_bounded_range_epsilon(mu)``: docstring of
  ``dp_glm_sklearn.model_selection._search``);
- the sensitivities passed with the public bounds the object reports
  (``cv_results_["score_sensitivity"]``, ``score_sensitivity_``) and with the
  documented formulas of public quantities only (``1 / n_val`` for accuracy,
  ``(high - low) / n_val`` for the absolute error, ``Delta(B) / n_val`` with
  ``Delta(B) = log(1 + e^{B X_aug})`` for the clipped logistic loss,
  ``X_aug = sqrt(X^2 + (X / 2)^2)``: ``docs/privacy.md``);
- the recorded event's mu with the composition the class docstrings state:
  ``max(sqrt(K) mu_candidate, bounded_range_gdp_mu(epsilon_sel))`` for
  ``DPGridSearchCV`` and ``norm_bound="auto"``,
  ``max(mu_candidate, bounded_range_gdp_mu(epsilon_sel))`` for
  ``DPConfidenceBoosting``, and the per-run mu of ``RandomStoppingEvent``
  for ``DPRandomizedSearchCV``.

The GDP conversions are written out here from the formulas of the docstrings
(``epsilon_sel = 2 log(Phi(mu/2) / Phi(-mu/2))``, ``bounded_range_gdp_mu(eps)
= 2 Phi^{-1}(e^{eps/2} / (1 + e^{eps/2}))``) rather than imported, so that a
wrong conversion in the library cannot hide a wrong wiring.  Deterministic:
nothing here depends on the noise drawn.
"""

import inspect
import math
import re

import numpy as np
import pytest
from scipy.special import expit, log_ndtr, ndtri

from dp_glm_sklearn import (
    DPConfidenceBoosting,
    DPGridSearchCV,
    DPLinearRegression,
    DPLogisticRegression,
    DPRandomizedSearchCV,
    _base,
)
from dp_glm_sklearn.model_selection import _boosting, _random, _search
from dp_glm_sklearn.model_selection._auto import auto_norm_bound_grid
from dp_glm_sklearn.privacy import (
    GaussianEvent,
    RandomStoppingEvent,
    gdp_epsilon,
    gdp_mu,
    selection,
)
from dp_glm_sklearn.privacy.selection import random_stopping_epsilon

DELTA = 1e-5
FEATURE_NORM = 4.0  # classifier; the regressor's is 1.5
X_AUG = math.hypot(FEATURE_NORM, FEATURE_NORM / 2)  # intercept feature c = X / 2
Y_BOUND = 2.0
GRID = {"norm_bound": [0.3, 3.0, 30.0]}
RTOL = 1e-12  # the same float computations on both sides: rounding only


# -- the documented conversions, written out ------------------------------------------
def br_epsilon(mu):
    """Largest bounded-range epsilon a mu-GDP event pays for: 2 log(Phi(mu/2) / Phi(-mu/2))."""
    return 2.0 * float(log_ndtr(mu / 2.0) - log_ndtr(-mu / 2.0))


def br_mu(epsilon):
    """GDP mu of an epsilon-bounded-range mechanism: 2 Phi^-1(e^{eps/2} / (1 + e^{eps/2}))."""
    return -2.0 * float(ndtri(expit(-epsilon / 2.0)))


def logistic_loss_bound(norm_bound):
    """Delta(B) = sup of the logistic loss on the ball: log(1 + e^{B X_aug})."""
    return float(np.logaddexp(0.0, norm_bound * X_AUG))


def label_epsilon(event):
    """The selection epsilon an event's label states ("selection (epsilon=1.234)")."""
    match = re.search(r"selection \(epsilon=([0-9.eE+-]+)\)", event.label)
    assert match, event.label
    return float(match.group(1))


# -- spies ------------------------------------------------------------------------------
def spy(monkeypatch, module, name):
    """Replace ``module.name`` by a wrapper that records its bound arguments."""
    original = getattr(module, name)
    signature = inspect.signature(original)
    calls = []

    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        calls.append(dict(bound.arguments))
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def selection_spies(monkeypatch, module):
    return (spy(monkeypatch, module, "generalized_exponential_mechanism"),
            spy(monkeypatch, module, "exponential_mechanism"))


# -- data ---------------------------------------------------------------------------
def _clf(**kw):
    return DPLogisticRegression(feature_norm=FEATURE_NORM, classes=[0, 1], max_iter=20, **kw)


def _reg(**kw):
    return DPLinearRegression(feature_norm=1.5, y_bound=Y_BOUND, max_iter=20, **kw)


def _n_val(n, fraction=0.5):
    return int(round(fraction * n))


# -- DPGridSearchCV ------------------------------------------------------------------
# (selection, scoring, estimator, primitive called, bound(B): n_val x the sensitivity of
# the candidate with norm_bound B)
GRID_CASES = {
    "gem-loss": ("gem", "loss", "clf", "gem", logistic_loss_bound),
    "exponential-loss": ("exponential", "loss", "clf", "exponential", logistic_loss_bound),
    "gem-accuracy": ("gem", "accuracy", "clf", "exponential", lambda B: 1.0),
    "exponential-accuracy": ("exponential", "accuracy", "clf", "exponential", lambda B: 1.0),
    "gem-absolute-error": ("gem", None, "reg", "exponential", lambda B: 2 * Y_BOUND),
}


def _check_grid_record(search, epsilon, mu_search, selection_epsilon, n_candidates):
    """The search's record against the docstring (class Notes) and the epsilon used."""
    assert search.selection_epsilon_ == pytest.approx(selection_epsilon, rel=RTOL)
    assert search.selection_epsilon_ == pytest.approx(br_epsilon(mu_search), rel=1e-9)
    event = search.privacy_events_[0]
    assert isinstance(event, GaussianEvent)
    assert label_epsilon(event) == pytest.approx(selection_epsilon, rel=1e-3)
    # One candidate: mu_search / sqrt(K); the recorded mu is the max of the parts.
    mu_candidate = gdp_mu(search.candidate_privacy_[0], search.candidate_privacy_[1])
    assert mu_candidate == pytest.approx(mu_search / math.sqrt(n_candidates), rel=1e-9)
    assert event.mu == pytest.approx(
        max(math.sqrt(n_candidates) * mu_candidate, br_mu(selection_epsilon)), rel=1e-9)
    # The event pays for the selection that ran, and for no more than the budget.
    assert br_mu(selection_epsilon) <= event.mu * (1 + 1e-9)
    assert selection_epsilon <= br_epsilon(event.mu) * (1 + 1e-9)
    assert event.mu == pytest.approx(mu_search, rel=1e-9)
    assert search.privacy_spent_[0] == pytest.approx(epsilon, rel=1e-9)


@pytest.mark.parametrize("case", sorted(GRID_CASES))
@pytest.mark.parametrize("refit", [False, True])
def test_grid_search_selects_at_the_recorded_epsilon_and_bounds(
        clf_data, reg_data, monkeypatch, case, refit):
    selection, scoring, kind, primitive, bound = GRID_CASES[case]
    gem_calls, em_calls = selection_spies(monkeypatch, _search)
    calibrations = spy(monkeypatch, _base, "calibrate")
    estimator, (X, y) = (_clf(), clf_data) if kind == "clf" else (_reg(), reg_data)
    epsilon, share = 1.5, 0.3
    search = DPGridSearchCV(estimator, GRID, epsilon=epsilon, delta=DELTA, scoring=scoring,
                            selection=selection, refit=refit,
                            **({"refit_share": share} if refit else {}),
                            random_state=0).fit(X, y)

    calls = gem_calls if primitive == "gem" else em_calls
    assert len(calls) == 1 and len(gem_calls) + len(em_calls) == 1
    (call,) = calls
    K, n_val = len(GRID["norm_bound"]), _n_val(len(X))
    mu = gdp_mu(epsilon, DELTA)
    mu_search = mu * math.sqrt(1 - share) if refit else mu
    _check_grid_record(search, epsilon, mu_search, call["epsilon"], K)

    # Sensitivities: what ran = what cv_results_ reports = the public formula.
    expected = np.array([bound(B) / n_val for B in GRID["norm_bound"]])
    reported = search.cv_results_["score_sensitivity"]
    np.testing.assert_allclose(reported, expected, rtol=RTOL)
    if primitive == "gem":
        assert np.ptp(expected) > 0  # the case where GEM is the mechanism
        np.testing.assert_allclose(call["sensitivities"], reported, rtol=RTOL)
    else:
        # The exponential mechanism at the largest sensitivity (class docstring).
        assert call["sensitivity"] == pytest.approx(expected.max(), rel=RTOL)
    # The utilities are the bounded scores the sensitivities are about.
    utilities = np.asarray(call["utilities"])
    assert utilities.shape == (K,)
    assert np.all(utilities <= 0) and np.all(-utilities <= expected * n_val)

    if refit:
        assert len(search.privacy_events_) == 2
        refit_event = search.privacy_events_[1]
        assert refit_event.mu == pytest.approx(mu * math.sqrt(share), rel=1e-9)
        assert math.hypot(search.privacy_events_[0].mu, refit_event.mu) == pytest.approx(
            mu, rel=1e-9)
    else:
        assert len(search.privacy_events_) == 1
    # Every fit (and every plan checked before the charge) is calibrated at the recorded
    # per-candidate budget, or the refit's, which trains last; the published model
    # states the whole search's cost.
    fits = np.array([gdp_mu(call["epsilon"], call["delta"]) for call in calibrations])
    mu_candidate = gdp_mu(*search.candidate_privacy_)
    at_candidate = np.isclose(fits, mu_candidate, rtol=1e-12, atol=0)
    assert at_candidate.sum() >= K
    if refit:
        refit_mu = search.privacy_events_[1].mu
        assert fits[-1] == pytest.approx(refit_mu, rel=1e-12)
        assert np.all(at_candidate | np.isclose(fits, refit_mu, rtol=1e-12, atol=0))
    else:
        assert np.all(at_candidate)
    assert search.best_estimator_.privacy_events_ == search.privacy_events_
    assert search.best_estimator_.privacy_spent_ == search.privacy_spent_


# -- DPRandomizedSearchCV ------------------------------------------------------------
@pytest.mark.parametrize("refit", [False, True])
@pytest.mark.parametrize("scoring, kind", [(None, "reg"), ("accuracy", "clf")])
def test_randomized_search_noise_scale_is_the_recorded_run_mu(
        clf_data, reg_data, monkeypatch, refit, scoring, kind):
    rnm_calls = spy(monkeypatch, _random, "gaussian_report_noisy_max")
    noise_calls = spy(monkeypatch, selection, "add_gaussian_noise")
    gem_calls, em_calls = selection_spies(monkeypatch, _search)
    estimator, (X, y) = (_clf(), clf_data) if kind == "clf" else (_reg(), reg_data)
    epsilon, mean = 2.0, 4.0
    search = DPRandomizedSearchCV(estimator, GRID, epsilon=epsilon, delta=DELTA,
                                  scoring=scoring, mean_candidates=mean, refit=refit,
                                  random_state=3).fit(X, y)

    assert not gem_calls and not em_calls  # the selection is the noisy argmax
    run_event = search.privacy_events_[0]
    assert isinstance(run_event, RandomStoppingEvent)
    assert run_event.mean == mean and run_event.stopping == "logarithmic"
    # Each run: a candidate trained at mu_run and its score plus N(0, (D / mu_run)^2).
    mu_run = run_event.mu
    assert gdp_mu(*search.candidate_privacy_) == pytest.approx(mu_run, rel=1e-12)
    n_val = _n_val(len(X))
    D = (1.0 if scoring == "accuracy" else 2 * Y_BOUND) / n_val
    np.testing.assert_allclose(search.cv_results_["score_sensitivity"], [D], rtol=RTOL)
    # One report-noisy-max over the K runs' bounded scores, each at sensitivity D and mu_run.
    (rnm,) = rnm_calls
    assert rnm["mu"] == mu_run
    count = len(rnm["utilities"])
    np.testing.assert_allclose(rnm["sensitivities"], [D] * count, rtol=RTOL)
    assert np.all((-D * n_val <= rnm["utilities"]) & (rnm["utilities"] <= 0))
    # It adds N(0, (D / mu_run)^2) to each score, both divided by the common D.
    assert len(noise_calls) == count
    for call, u in zip(noise_calls, rnm["utilities"], strict=True):
        assert call["sigma"] == pytest.approx(1.0 / mu_run, rel=RTOL)
        assert call["value"] == pytest.approx(u / D, rel=RTOL)
    # mu_run is the largest with which the best of the runs costs the search's budget:
    # the whole (epsilon, delta), or (epsilon/2, delta/2) when the refit gets the rest.
    eps_search, delta_search = (epsilon / 2, DELTA / 2) if refit else (epsilon, DELTA)
    spent = random_stopping_epsilon(mu_run, mean, delta_search)
    assert spent <= eps_search * (1 + 1e-9) and spent == pytest.approx(eps_search, rel=1e-6)
    assert search.privacy_spent_[0] <= epsilon * (1 + 1e-9)
    assert len(search.privacy_events_) == (2 if refit else 1)


# -- DPConfidenceBoosting ------------------------------------------------------------
@pytest.mark.parametrize("scoring, kind, norm_bound", [
    (None, "reg", 3.0), ("accuracy", "clf", 3.0), ("loss", "clf", 2.0)])
def test_boosting_selects_at_the_recorded_epsilon_and_bound(
        clf_data, reg_data, monkeypatch, scoring, kind, norm_bound):
    em_calls = spy(monkeypatch, _boosting, "exponential_mechanism")
    search_gem, search_em = selection_spies(monkeypatch, _search)
    calibrations = spy(monkeypatch, _base, "calibrate")
    estimator = (_clf if kind == "clf" else _reg)(norm_bound=norm_bound)
    X, y = clf_data if kind == "clf" else reg_data
    epsilon, m = 1.5, 3
    boosted = DPConfidenceBoosting(estimator, n_models=m, epsilon=epsilon, delta=DELTA,
                                   scoring=scoring, random_state=0).fit(X, y)

    assert not search_gem and not search_em
    (call,) = em_calls  # report-noisy-max: the exponential mechanism, once
    mu = gdp_mu(epsilon, DELTA)
    selection_epsilon = call["epsilon"]
    assert boosted.selection_epsilon_ == pytest.approx(selection_epsilon, rel=RTOL)
    assert boosted.selection_epsilon_ == pytest.approx(br_epsilon(mu), rel=1e-9)
    (event,) = boosted.privacy_events_
    assert label_epsilon(event) == pytest.approx(selection_epsilon, rel=1e-3)
    # Every model at the full budget; the event is the max of the two parts.
    mu_candidate = gdp_mu(*boosted.candidate_privacy_)
    assert mu_candidate == pytest.approx(mu, rel=1e-9)
    assert event.mu == pytest.approx(max(mu_candidate, br_mu(selection_epsilon)), rel=1e-9)
    assert br_mu(selection_epsilon) <= event.mu * (1 + 1e-9)
    assert boosted.privacy_spent_[0] == pytest.approx(epsilon, rel=1e-9)
    # Each model was trained at the full budget; the kept one states the whole fit's cost.
    fits = [gdp_mu(call["epsilon"], call["delta"]) for call in calibrations]
    assert len(fits) >= m and fits == pytest.approx([mu_candidate] * len(fits), rel=1e-12)
    assert boosted.best_estimator_.privacy_events_ == boosted.privacy_events_
    assert boosted.best_estimator_.privacy_spent_ == boosted.privacy_spent_

    # Sensitivity: what ran = score_sensitivity_ = the public bound / size of the held-out chunk.
    n_val = int(boosted.chunk_sizes_[-1])
    assert n_val == len(X) // (m + 1)
    bound = {"reg": 2 * Y_BOUND, "clf": 1.0}[kind]
    if scoring == "loss":
        bound = logistic_loss_bound(norm_bound)
    assert boosted.score_sensitivity_ == pytest.approx(bound / n_val, rel=RTOL)
    assert call["sensitivity"] == pytest.approx(boosted.score_sensitivity_, rel=RTOL)
    utilities = np.asarray(call["utilities"])
    assert utilities.shape == (m,) and np.all((-bound <= utilities) & (utilities <= 0))


# -- norm_bound="auto" ----------------------------------------------------------------
@pytest.mark.parametrize("kind", ["reg", "clf"])
def test_auto_norm_bound_selects_at_the_epsilon_its_events_pay_for(
        clf_data, reg_data, monkeypatch, kind):
    gem_calls, em_calls = selection_spies(monkeypatch, _search)
    epsilon = 2.0
    if kind == "clf":
        est, (X, y) = _clf(norm_bound="auto", epsilon=epsilon, delta=DELTA), clf_data
        smoothness, unit, score_bound = 0.25, 1.0 / X_AUG, 1.0
    else:
        est, (X, y) = _reg(norm_bound="auto", epsilon=epsilon, delta=DELTA), reg_data
        smoothness, unit, score_bound = 1.0, Y_BOUND / math.hypot(1.5, 0.75), 2 * Y_BOUND
    est.set_params(random_state=0).fit(X, y)

    # The default scoring has one sensitivity for every radius: "gem" runs the
    # exponential mechanism (DPGridSearchCV docstring), once.
    assert not gem_calls
    (call,) = em_calls
    n = len(X)
    n_val = _n_val(n)
    grid = auto_norm_bound_grid(n - n_val, epsilon, smoothness, unit)
    K = len(grid)
    assert np.shape(call["utilities"]) == (K,)
    assert est.norm_bound_ in grid
    assert call["sensitivity"] == pytest.approx(score_bound / n_val, rel=RTOL)

    # Refit on all the data at the default refit_share 0.5: the search gets
    # mu_search = sqrt(1 - 0.5) mu, the selection br_epsilon(mu_search).
    mu = gdp_mu(epsilon, DELTA)
    mu_search = mu * math.sqrt(0.5)
    selection_epsilon = call["epsilon"]
    assert selection_epsilon == pytest.approx(br_epsilon(mu_search), rel=1e-9)
    search_event, refit_event = est.privacy_events_
    assert label_epsilon(search_event) == pytest.approx(selection_epsilon, rel=1e-3)
    mu_candidate = gdp_mu(gdp_epsilon(mu_search / math.sqrt(K), DELTA), DELTA)
    assert search_event.mu == pytest.approx(
        max(math.sqrt(K) * mu_candidate, br_mu(selection_epsilon)), rel=1e-9)
    assert br_mu(selection_epsilon) <= search_event.mu * (1 + 1e-9)
    assert refit_event.mu == pytest.approx(mu * math.sqrt(0.5), rel=1e-9)
    assert math.hypot(search_event.mu, refit_event.mu) == pytest.approx(mu, rel=1e-9)
    assert est.privacy_spent_[0] == pytest.approx(epsilon, rel=1e-9)
