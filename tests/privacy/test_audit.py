"""Black-box audits of the privacy claim of each mechanism (SPEC section 8).

For each mechanism, neighbors S and S' differ in one record that reaches the
sensitivity bound: for the training mechanisms, a test-only linear loss
(:class:`_audit.CanaryLoss`) driven through the mechanism functions directly
(not reachable from the public API); for the selection mechanisms, scores
that move by their full sensitivity in opposite directions. The mechanism runs
``n_runs`` times on each side, each run with its own seed; each output is
reduced to a statistic (the coordinate along the canary's gradient, or the
chosen index); :func:`_audit.audit` turns the two samples into a lower
confidence bound on the privacy parameter (threshold chosen on half the runs,
Clopper-Pearson at ``ALPHA`` on the other half): ``mu_lb`` for the Gaussian
mechanisms, ``epsilon_lb`` for the pure-DP selections.

Gaussian mechanisms (Noisy GD, Noisy GD multinomial, JL, output
perturbation) are audited at epsilon = 8, delta = 1e-5 (mu = 1.666) with
4000 runs per side, in settings where the output is exactly Gaussian and the
statistic sufficient, so a correct implementation concentrates just below
mu. The selections are audited at the epsilon their events state,
epsilon = 3, on the event "the audited candidate is chosen", fixed in
advance, so every run is counted: the exponential mechanism on two
candidates (15000 runs per side), GEM on a data-independent anchor, a crowd
of 33 and the audited candidate (30000 runs per side; see ``gem_case``: with
two candidates GEM is only epsilon/2-DP, with K it is
``gem_worst_case_epsilon(epsilon, K)``-DP, which tends to epsilon). Pure-DP
audits rest on rarer events, hence more runs. The model-selection wrappers
record a selection at epsilon as ``bounded_range_gdp_mu(epsilon)``-GDP; that
claim is audited too (``exponential_mechanism_gdp``: the centred two-candidate
pair, on which it is exact; 15000 runs per side).

False-failure probabilities, per test, over the choice of seeds (exact
binomial sums over the evaluation half, averaged over simulated threshold
choices: ``_audit.gaussian_audit_probability``; for the selections, the same
sums at the fixed test, from the exact selection probabilities:
``_audit.binary_audit_probability``):

- ``test_audit_passes``: ``lower bound <= claimed`` fails with probability at
  most ``ALPHA = 1e-3`` by construction (about 2e-6 for the Gaussian cases,
  below 1e-9 for the selections); ``lower bound > 0.6 claimed`` (the claim
  is not loose either) fails with probability below 1e-12.
- ``test_audit_detects_less_noise``: with 25% less noise the true parameter
  is ``claimed / 0.75``; ``lower bound > claimed`` fails with probability
  at most about 3e-5 (each Gaussian case: a Monte Carlo average over the
  threshold's draws, dominated by rare ones: 2.5e-5 with 200 draws, as
  ``benchmarks/audit.py`` prints, 3e-6 to 8e-6 with 2000-5000), 6e-6
  (exponential mechanism) and 2.4e-6
  (GEM), below 1e-12 for the exponential mechanism's GDP claim (whose
  ``lower bound <= claimed`` fails with probability 1.5e-6).

The seeds are fixed, so the outcome is deterministic; these numbers say how
unlucky the fixed seeds would have to be. Summed over the file: about 1.2e-4
as computed (at most 9e-3 counting every ``<=`` check at its worst case
``ALPHA``). ``benchmarks/audit.py`` prints these probabilities. The other
tests are exact (no sampling) or state their own.
"""

import math

import numpy as np
import pytest
from _audit import (
    audit,
    canary_neighbors,
    collect,
    exponential_mechanism_case,
    exponential_mechanism_gdp_case,
    gem_case,
    gem_worst_case_epsilon,
    jl_case,
    noisy_gd_case,
    output_perturbation_case,
)
from scipy.special import logsumexp

from dp_glm_sklearn.losses import LogisticLoss, MultinomialLoss
from dp_glm_sklearn.privacy.calibration import gdp_mu
from dp_glm_sklearn.privacy.noise import _audit_noise_multiplier
from dp_glm_sklearn.privacy.selection import gem_normalized_scores

EPSILON, DELTA = 8.0, 1e-5  # the Gaussian mechanisms
SELECTION_EPSILON = 3.0
# Chosen for the power check at these run counts (benchmarks/audit.py): the
# log-odds of candidate 0 on S (exponential mechanism), the crowd size (GEM).
SELECTION_LOG_ODDS = -3.625
GEM_CROWD = 33
ALPHA = 1e-3

#: name -> (factory() -> AuditCase, runs per side). Adding a mechanism is one
#: entry here (and a factory in _audit.py).
CASES = {
    "noisy_gd": (lambda: noisy_gd_case(EPSILON, DELTA), 4000),
    "noisy_gd_multinomial": (
        lambda: noisy_gd_case(EPSILON, DELTA, MultinomialLoss(3), n_features=2, n_samples=3),
        4000,
    ),
    "jl": (lambda: jl_case(EPSILON, DELTA), 4000),
    "output_perturbation": (lambda: output_perturbation_case(EPSILON, DELTA), 4000),
    "exponential_mechanism": (
        lambda: exponential_mechanism_case(SELECTION_EPSILON, SELECTION_LOG_ODDS), 15000
    ),
    "gem": (lambda: gem_case(SELECTION_EPSILON, GEM_CROWD), 30000),
    # The GDP claim the model-selection wrappers record for a selection.
    "exponential_mechanism_gdp": (lambda: exponential_mechanism_gdp_case(SELECTION_EPSILON),
                                  15000),
}
SELECTIONS = ["exponential_mechanism", "gem"]


@pytest.mark.parametrize("name", CASES)
def test_audit_passes(name):
    factory, n_runs = CASES[name]
    case = factory()
    result = audit(*collect(case.run, n_runs, seed=1), case.claimed, alpha=ALPHA,
                   bound=case.bound, test=case.test)
    assert result.lower_bound <= case.claimed <= case.stated, result
    # Not a vacuous pass: the audit sees most of the claimed parameter.
    assert result.lower_bound > 0.6 * case.claimed, result


@pytest.mark.parametrize("name", CASES)
def test_audit_detects_less_noise(name):
    factory, n_runs = CASES[name]
    case = factory()
    result = audit(*collect(case.run_less_noise, n_runs, seed=2), case.claimed, alpha=ALPHA,
                   bound=case.bound, test=case.test)
    assert result.lower_bound > case.claimed, result


@pytest.mark.parametrize("name", ["noisy_gd", "noisy_gd_multinomial", "jl",
                                  "output_perturbation"])
def test_gaussian_cases_state_the_target_mu(name):
    case = CASES[name][0]()
    assert case.claimed == pytest.approx(gdp_mu(EPSILON, DELTA), rel=1e-9)


@pytest.mark.parametrize("name", SELECTIONS)
def test_selection_cases_audit_the_stated_epsilon(name):
    """Exact probabilities of the audited event: near the stated epsilon, never above it.

    The audits' neighbors must come close to the claim (else a 25% error
    could hide) and the claim must be the stated one, not a sharper bound.
    """
    case = CASES[name][0]()
    assert case.claimed == case.stated == SELECTION_EPSILON
    fpr, tpr = case.exact_rates()
    assert 0.85 * case.claimed < math.log(tpr / fpr) <= case.claimed
    fpr, tpr = case.exact_rates(less_noise=True)
    assert math.log(tpr / fpr) > 1.2 * case.claimed


@pytest.mark.parametrize("epsilon", [0.5, 3.0, 8.0])
def test_gem_case_attains_the_worst_case_on_k_candidates(epsilon):
    """GEM on K candidates is exactly gem_worst_case_epsilon(epsilon, K)-DP, which tends to epsilon.

    Lower half of the claim: the anchor-and-crowd neighbors reach it (as the
    audited candidate's score on S tends to -inf, here ``gap = 80 / epsilon``).
    """
    previous = 0.0
    for k in (2, 3, 5, 20, 200, 5000):
        fpr, tpr = gem_case(epsilon, k - 2, gap=80.0 / epsilon).exact_rates()
        worst = gem_worst_case_epsilon(epsilon, k)
        assert math.log(tpr / fpr) == pytest.approx(worst, rel=1e-9)
        assert previous < worst < epsilon
        previous = worst
    assert gem_worst_case_epsilon(epsilon, 2) == epsilon / 2
    assert gem_worst_case_epsilon(epsilon, 5000) > 0.99 * epsilon


def _gem_log_probabilities(u, d, epsilon):
    x = epsilon * gem_normalized_scores(u, d, epsilon) / 2.0
    return x - logsumexp(x)


@pytest.mark.parametrize("k", [3, 4, 6])
def test_gem_never_exceeds_the_worst_case_on_k_candidates(k):
    """Upper half: on random extreme neighbors the privacy loss stays below eps_K.

    Exact (log-space) probabilities of the library's GEM; sensitivities
    include 0 (data-independent scores), every score moves by +-D or
    uniformly within it.
    """
    rng = np.random.default_rng(7)
    for epsilon in (1.0, 8.0):
        bound = gem_worst_case_epsilon(epsilon, k)
        worst = 0.0
        for _ in range(300):
            d = rng.choice([0.0, 0.5, 1.0, 2.0], size=k)
            u = rng.normal(0.0, 2.0, size=k)
            move = rng.choice([-1.0, 1.0], size=k) if rng.random() < 0.5 else rng.uniform(
                -1.0, 1.0, size=k)
            lp = _gem_log_probabilities(u, d, epsilon)
            lq = _gem_log_probabilities(u + move * d, d, epsilon)
            finite = np.isfinite(lp)
            np.testing.assert_array_equal(finite, np.isfinite(lq))
            worst = max(worst, float(np.max(np.abs(lp[finite] - lq[finite]))))
        assert worst <= bound * (1 + 1e-9)
        # The search reaches beyond the two-candidate bound (a check that it
        # explores, not of privacy).  Seeded, so deterministic: it cannot fail
        # by chance at a given code.  Over 40 other seeds per (k, epsilon) the
        # smallest worst / epsilon was 0.536 (k = 3, epsilon = 8), none below
        # 0.5: a seed drawn at random fails with probability below 7.2% (the 95%
        # upper bound from 0 of 40), the risk a change of the draws runs.
        assert worst > epsilon / 2


def test_canary_reaches_the_sensitivity_bound():
    """The changed record moves the clipped gradient by exactly 2 G / n, anywhere."""
    for loss, kw in [(LogisticLoss(), {}), (MultinomialLoss(3), {"n_features": 2})]:
        problem, objectives, _ = canary_neighbors(loss, **kw)
        theta = np.random.default_rng(0).normal(size=problem.theta_shape)
        diff = objectives[1].gradient(theta) - objectives[0].gradient(theta)
        expected = 2 * problem.lipschitz / problem.n_samples
        assert np.linalg.norm(diff) == pytest.approx(expected, rel=1e-12)
        assert problem.lipschitz == pytest.approx(
            loss.derivative_bound(problem.norm_bound, problem.augmented_norm, 0.0)
            * problem.augmented_norm
        )


def test_noise_hook_is_restored():
    """The power check's hook leaves the library's noise untouched afterwards."""
    case = noisy_gd_case(EPSILON, DELTA)
    before = case.run(0, np.random.default_rng(5))
    with _audit_noise_multiplier(0.75):
        scaled = case.run(0, np.random.default_rng(5))
    assert case.run(0, np.random.default_rng(5)) == before != scaled
    assert case.run_less_noise(0, np.random.default_rng(5)) == scaled


@pytest.mark.parametrize("shift", [0.0, 1.0])
def test_audit_statistics_are_valid_on_known_gaussians(shift):
    """The harness itself: on N(0, 1) vs N(shift, 1) it bounds mu from below.

    False-failure probability: at most 1e-3 for the first assertion; the
    second (the bound is within 0.5 of the truth) fails with probability
    below 1e-6 at 2000 counted runs per side.
    """
    rng = np.random.default_rng(3)
    result = audit(rng.normal(0, 1, 4000), rng.normal(shift, 1, 4000), claimed=shift)
    assert result.lower_bound <= shift
    assert result.lower_bound > shift - 0.5
