"""Tests of the private selection mechanisms (dp_glm_sklearn.privacy.selection)."""

import math
import sys

import numpy as np
import pytest
from scipy.special import expit, logsumexp, ndtri

from dp_glm_sklearn.privacy import PureDPEvent, gdp_delta
from dp_glm_sklearn.privacy import selection as sel
from dp_glm_sklearn.privacy.selection import (
    bounded_range_gdp_mu,
    exponential_mechanism,
    exponential_mechanism_probabilities,
    gaussian_report_noisy_max,
    gdp_bounded_range_epsilon,
    gdp_pure_epsilon,
    gem_normalized_scores,
    gem_probabilities,
    generalized_exponential_mechanism,
    pure_dp_gdp_mu,
    random_stopping_epsilon,
    random_stopping_mu,
    sample_stopping_count,
)

EPSILONS = [0.05, 0.3, 1.0, 3.0, 8.0]


def _pure_dp_delta(e, epsilon):
    """delta(e) of randomized response, the worst epsilon-DP mechanism."""
    return max(0.0, (math.exp(epsilon) - math.exp(e)) / (1.0 + math.exp(epsilon)))


# -- pure DP as GDP --------------------------------------------------------------------
@pytest.mark.parametrize("epsilon", EPSILONS)
def test_pure_dp_is_dominated_by_its_gdp_mu(epsilon):
    mu = pure_dp_gdp_mu(epsilon)
    grid = np.linspace(0.0, epsilon, 401)
    # f-DP domination <=> the privacy profile lies below for every e >= 0.
    assert all(_pure_dp_delta(e, epsilon) <= gdp_delta(e, mu) * (1 + 1e-9) + 1e-15 for e in grid)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_pure_dp_gdp_mu_is_the_smallest(epsilon):
    # A slightly smaller mu no longer dominates randomized response.
    mu = pure_dp_gdp_mu(epsilon) * (1 - 1e-3)
    grid = np.linspace(0.0, epsilon, 2001)
    assert any(_pure_dp_delta(e, epsilon) > gdp_delta(e, mu) for e in grid)


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 3.0])
def test_randomized_response_profile_matches_dp_accounting(epsilon):
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    common = pytest.importorskip("dp_accounting.pld.common")
    dist = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(epsilon, 0.0))
    for e in [0.0, epsilon / 3, epsilon / 2]:
        assert dist.get_delta_for_epsilon(e) == pytest.approx(_pure_dp_delta(e, epsilon), abs=1e-6)


@pytest.mark.parametrize("mu", [1e-4, 0.1, 0.7, 2.0, 10.0])
def test_gdp_pure_epsilon_inverts_pure_dp_gdp_mu(mu):
    assert pure_dp_gdp_mu(gdp_pure_epsilon(mu)) == pytest.approx(mu, rel=1e-10)


def test_conversion_edge_cases():
    assert pure_dp_gdp_mu(0.0) == 0.0 and gdp_pure_epsilon(0.0) == 0.0
    assert pure_dp_gdp_mu(math.inf) == math.inf and gdp_pure_epsilon(math.inf) == math.inf
    assert pure_dp_gdp_mu(40.0) > pure_dp_gdp_mu(30.0)  # no overflow to inf
    with pytest.raises(ValueError, match="epsilon"):
        pure_dp_gdp_mu(-1.0)


# -- bounded range as GDP ------------------------------------------------------------------
def _two_point_pair(a, epsilon):
    """(p, q) = (P(1), Q(1)) of the two-output pair with privacy losses a + epsilon and a."""
    b = a + epsilon
    q = -math.expm1(a) / (math.exp(b) - math.exp(a))
    return math.exp(b) * q, q


def _two_point_delta(e, p, q):
    """delta(e) of the pair (P, Q) = ((p, 1 - p), (q, 1 - q)), both orders."""
    forward = max(0.0, p - math.exp(e) * q) + max(0.0, (1 - p) - math.exp(e) * (1 - q))
    backward = max(0.0, q - math.exp(e) * p) + max(0.0, (1 - q) - math.exp(e) * (1 - p))
    return max(forward, backward)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_bounded_range_gdp_mu_dominates_every_extreme_pair(epsilon):
    # Every epsilon-BR pair is a post-processing of a two-point pair with
    # losses in [a, a + epsilon], a in [-epsilon, 0] (bounded_range_gdp_mu's
    # proof); check those pairs directly, through their privacy profiles.
    mu = bounded_range_gdp_mu(epsilon)
    es = np.linspace(0.0, epsilon, 201)
    worst_probit_gap = 0.0
    for a in np.linspace(-epsilon, 0.0, 401)[1:-1]:
        p, q = _two_point_pair(a, epsilon)
        worst_probit_gap = max(worst_probit_gap, float(ndtri(p) - ndtri(q)))
        for e in es:
            assert _two_point_delta(e, p, q) <= gdp_delta(e, mu) * (1 + 1e-9) + 1e-15
    # The worst pair is the centred one, randomized response at epsilon / 2.
    assert worst_probit_gap <= mu * (1 + 1e-12)
    assert worst_probit_gap == pytest.approx(mu, rel=1e-6)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_bounded_range_gdp_mu_is_the_smallest(epsilon):
    mu = bounded_range_gdp_mu(epsilon) * (1 - 1e-3)
    p, q = _two_point_pair(-epsilon / 2, epsilon)  # randomized response at epsilon / 2
    assert any(_two_point_delta(e, p, q) > gdp_delta(e, mu) for e in np.linspace(0, epsilon, 2001))


def test_bounded_range_conversion_values_and_inverse():
    for epsilon in EPSILONS:
        assert bounded_range_gdp_mu(epsilon) == pytest.approx(pure_dp_gdp_mu(epsilon / 2))
        # A bounded-range mechanism costs far less GDP than a generic pure-DP one.
        assert bounded_range_gdp_mu(epsilon) < 0.65 * pure_dp_gdp_mu(epsilon)
    for mu in [1e-4, 0.1, 0.7, 2.0, 10.0]:
        epsilon = gdp_bounded_range_epsilon(mu)
        assert epsilon == pytest.approx(2 * gdp_pure_epsilon(mu))
        assert bounded_range_gdp_mu(epsilon) == pytest.approx(mu, rel=1e-10)
    assert bounded_range_gdp_mu(0.0) == 0.0 and gdp_bounded_range_epsilon(0.0) == 0.0
    assert bounded_range_gdp_mu(math.inf) == math.inf
    assert gdp_bounded_range_epsilon(math.inf) == math.inf
    with pytest.raises(ValueError, match="epsilon"):
        bounded_range_gdp_mu(-1.0)


def test_probit_of_expit_has_the_shape_the_proof_uses():
    # psi = Phi^{-1} o expit: psi' even and nonincreasing in |x| (the lemma
    # behind the centred worst case); and Sampford's bound on the Mills ratio.
    from scipy.special import erfcx

    x = np.linspace(0.0, 30.0, 30001)
    psi = -ndtri(expit(-x))  # Phi^{-1}(expit(x)), accurate in the tail
    slope = expit(x) * expit(-x) / (np.exp(-psi**2 / 2) / math.sqrt(2 * math.pi))
    assert np.all(np.diff(slope) <= 1e-12 * slope[1:])
    assert slope[0] == pytest.approx(math.sqrt(2 * math.pi) / 4)
    z = np.linspace(0.0, 50.0, 50001)
    mills = math.sqrt(math.pi / 2) * erfcx(z / math.sqrt(2))
    assert np.all(mills < 4 / (3 * z + np.sqrt(z**2 + 8)))


# -- neighbouring score vectors ----------------------------------------------------------
def _neighbours(rng, d, n_pairs=300):
    """Pairs (u, u') with |u_j - u'_j| <= d_j: random and extreme (corners).

    The checks that the pairs come near a bound (``worst > c * epsilon``) are
    seeded; their false-failure probabilities, over the seed, are stated where
    they are made.  With one common sensitivity a corner whose shifts have both
    signs moves the log-probabilities of the exponential mechanism by amounts
    spanning exactly ``epsilon`` (``(epsilon / (2 delta)) * 2 delta``): all 150
    corners (6 candidates) have one sign with probability ``(2 / 2**6)**150 <
    1e-225``.
    """
    k = len(d)
    for t in range(n_pairs):
        u = rng.normal(scale=3 * d.max(), size=k)
        if t % 2:
            shift = rng.choice([-1.0, 1.0], size=k) * d  # a corner of the box
        else:
            shift = rng.uniform(-1.0, 1.0, size=k) * d
        yield u, u + shift


def _max_log_ratio(p, q):
    """max_i |log p_i - log q_i|; a probability 0 on one side only is infinite."""
    with np.errstate(divide="ignore"):
        lp, lq = np.log(p), np.log(q)
    both_zero = (p == 0) & (q == 0)
    return float(np.max(np.abs(np.where(both_zero, 0.0, lp - lq))))


def _gem_log_probabilities(u, d, epsilon):
    logits = epsilon * gem_normalized_scores(u, d, epsilon) / 2
    return logits - logsumexp(logits)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 5.0])
def test_exponential_mechanism_obeys_epsilon_on_neighbours(epsilon):
    rng = np.random.default_rng(0)
    delta = 0.01
    worst = 0.0
    for u, v in _neighbours(rng, np.full(6, delta)):
        p = exponential_mechanism_probabilities(u, delta, epsilon)
        q = exponential_mechanism_probabilities(v, delta, epsilon)
        worst = max(worst, _max_log_ratio(p, q))
    assert worst <= epsilon * (1 + 1e-9)
    # The extreme pairs come close to the bound, so a mechanism that dropped
    # the factor 2 (twice the epsilon) would fail the same check.  A corner with
    # shifts of both signs spans epsilon, so its largest |log ratio| exceeds
    # epsilon / 2 unless the span is centred on 0 exactly: false failure only
    # if no corner has both signs, P < 1e-225 (_neighbours).
    assert worst > 0.5 * epsilon


def test_neighbour_check_catches_a_mechanism_without_the_factor_two():
    rng = np.random.default_rng(1)
    delta, epsilon = 0.01, 1.0
    worst = 0.0
    for u, v in _neighbours(rng, np.full(6, delta)):
        p = exponential_mechanism_probabilities(u, delta / 2, epsilon)  # wrong: eps u / Delta
        q = exponential_mechanism_probabilities(v, delta / 2, epsilon)
        worst = max(worst, _max_log_ratio(p, q))
    # The wrong mechanism spans 2 epsilon on a corner with both signs: this
    # fails only if no corner has both, P < 1e-225 (_neighbours).
    assert worst > epsilon


def test_exponential_mechanism_probabilities_formula():
    u = np.array([0.1, 0.5, 0.2])
    p = exponential_mechanism_probabilities(u, 0.05, 2.0)
    logits = 2.0 * u / (2 * 0.05)
    np.testing.assert_allclose(p, np.exp(logits - logsumexp(logits)), rtol=1e-12)
    assert p.sum() == pytest.approx(1.0)
    # Huge utilities do not overflow.
    assert np.isfinite(exponential_mechanism_probabilities(u * 1e6, 1e-6, 10.0)).all()
    # epsilon = inf: the best, uniformly over ties.
    np.testing.assert_array_equal(
        exponential_mechanism_probabilities([1.0, 3.0, 3.0], 1.0, math.inf), [0, 0.5, 0.5])
    np.testing.assert_allclose(exponential_mechanism_probabilities(u, 1.0, 0.0), 1 / 3)


def test_exponential_mechanism_samples_its_probabilities():
    # Chi-square goodness of fit with 2 degrees of freedom at threshold 18.4:
    # a correct sampler fails with probability 1e-4 (seeded, so deterministic).
    u = np.array([0.0, 0.3, 0.5])
    p = exponential_mechanism_probabilities(u, 0.1, 1.0)
    rng = np.random.default_rng(2)
    n = 4000
    counts = np.bincount([exponential_mechanism(u, 0.1, 1.0, rng)[0] for _ in range(n)],
                         minlength=3)
    chi2 = float(((counts - n * p) ** 2 / (n * p)).sum())
    assert chi2 < 18.4


def test_exponential_mechanism_returns_its_event():
    index, event = exponential_mechanism([1.0, 2.0], 1.0, 0.5, np.random.default_rng(0),
                                         label="pick")
    assert index in (0, 1)
    assert event == PureDPEvent(epsilon=0.5, label="pick")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(utilities=[], sensitivity=1.0, epsilon=1.0), "utilities"),
        (dict(utilities=[1.0, np.nan], sensitivity=1.0, epsilon=1.0), "utilities"),
        (dict(utilities=[[1.0]], sensitivity=1.0, epsilon=1.0), "utilities"),
        (dict(utilities=[1.0], sensitivity=0.0, epsilon=1.0), "sensitivity"),
        (dict(utilities=[1.0], sensitivity=-1.0, epsilon=1.0), "sensitivity"),
        (dict(utilities=[1.0], sensitivity=1.0, epsilon=-1.0), "epsilon"),
    ],
)
def test_exponential_mechanism_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        exponential_mechanism_probabilities(**kwargs)


def test_selection_needs_a_generator():
    with pytest.raises(TypeError, match="Generator"):
        exponential_mechanism([1.0, 2.0], 1.0, 1.0, 0)


# -- generalized exponential mechanism ----------------------------------------------------
SENSITIVITY_SETS = [
    np.array([0.01, 0.02, 0.04, 0.08, 0.16]),
    np.array([0.0, 0.01, 0.3, 0.3, 1.0]),  # a zero-sensitivity (zero model) pair
    np.full(4, 0.05),
]


@pytest.mark.parametrize("d", SENSITIVITY_SETS)
def test_gem_normalized_scores_have_sensitivity_one(d):
    rng = np.random.default_rng(3)
    for u, v in _neighbours(rng, d):
        u[d == 0] = v[d == 0] = -0.7  # a data-independent score
        s = gem_normalized_scores(u, d, 1.0)
        t = gem_normalized_scores(v, d, 1.0)
        assert np.all(s <= 0.0) and s.max() == 0.0
        assert np.max(np.abs(s - t)) <= 1.0 + 1e-9


@pytest.mark.parametrize("d", SENSITIVITY_SETS)
@pytest.mark.parametrize("epsilon", [0.2, 1.0, 4.0])
def test_gem_obeys_epsilon_on_neighbours(d, epsilon):
    rng = np.random.default_rng(4)
    worst = 0.0
    for u, v in _neighbours(rng, d):
        u[d == 0] = v[d == 0] = -0.7
        # In log space: far-off candidates underflow to probability 0.
        lp, lq = _gem_log_probabilities(u, d, epsilon), _gem_log_probabilities(v, d, epsilon)
        np.testing.assert_allclose(gem_probabilities(u, d, epsilon), np.exp(lp), atol=1e-12)
        worst = max(worst, float(np.max(np.abs(lp - lq))))
    assert worst <= epsilon * (1 + 1e-9)
    # The extreme pairs come near the bound.  False failure: every one of the
    # 300 (independent) pairs must stay at or below 0.25 epsilon; simulated on
    # 3000 pairs per case (other seeds), a pair does so with probability at most
    # 0.52 (common sensitivity, epsilon 0.2; 0.03 to 0.11 otherwise), so
    # P < 0.52**300 < 1e-85.  Over 200 other seeds per case, the smallest worst
    # was 0.40 epsilon.
    assert worst > 0.25 * epsilon


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
@pytest.mark.parametrize("beta", [0.05, 0.2])
def test_gem_utility_guarantee_holds_exactly(epsilon, beta):
    # Raskhodnikova and Smith: with probability >= 1 - beta the chosen i has
    # -u_i <= min_j (-u_j + 4 D_j ln(K / beta) / epsilon); checked on the
    # exact probabilities, no sampling.
    rng = np.random.default_rng(5)
    d = np.array([0.0, 0.01, 0.02, 0.05, 0.1, 0.2])
    k = len(d)
    for _ in range(200):
        losses = rng.uniform(0.0, 1.0, size=k)
        p = gem_probabilities(-losses, d, epsilon, beta)
        target = np.min(losses + 4 * d * math.log(k / beta) / epsilon)
        assert p[losses > target].sum() <= beta


def test_gem_with_common_sensitivity_is_the_exponential_mechanism_at_half_epsilon():
    u = np.array([0.3, 0.1, 0.25, 0.0])
    np.testing.assert_allclose(gem_probabilities(u, np.full(4, 0.02), 2.0),
                               exponential_mechanism_probabilities(u, 0.02, 1.0), rtol=1e-12)


def test_gem_penalizes_imprecise_scores():
    # Two nearly equal scores: the one with the larger sensitivity loses.
    p = gem_probabilities([-0.20, -0.19], [0.001, 0.05], 1.0)
    assert p[0] > 0.9


def test_gem_zero_sensitivity_pairs_and_infinite_epsilon():
    # Two data-independent scores: the worse one gets probability 0.
    p = gem_probabilities([-1.0, -2.0, -1.5], [0.0, 0.0, 0.1], 1.0)
    assert p[1] == 0.0 and p[0] > 0
    p = gem_probabilities([-0.3, -0.1, -0.2], [0.1, 0.1, 0.1], math.inf)
    np.testing.assert_array_equal(p, [0.0, 1.0, 0.0])


def test_generalized_exponential_mechanism_returns_its_event():
    index, event = generalized_exponential_mechanism([-1.0, -0.5], [0.1, 0.2], 0.7,
                                                     np.random.default_rng(0))
    assert index in (0, 1) and event == PureDPEvent(0.7, "generalized exponential mechanism")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(sensitivities=[0.1, -0.1]), "sensitivities"),
        (dict(sensitivities=[0.1, 0.1, 0.1]), "sensitivities"),
        (dict(sensitivities=[0.1, np.inf]), "sensitivities"),
        (dict(epsilon=0.0), "epsilon"),
        (dict(beta=1.0), "beta"),
        (dict(beta=0.0), "beta"),
    ],
)
def test_gem_rejects_bad_input(kwargs, match):
    args = dict(utilities=[1.0, 2.0], sensitivities=[0.1, 0.2], epsilon=1.0)
    with pytest.raises(ValueError, match=match):
        gem_normalized_scores(**{**args, **kwargs})


# -- random stopping -------------------------------------------------------------------
@pytest.mark.parametrize("stopping", ["logarithmic", "geometric"])
@pytest.mark.parametrize("epsilon", [1.0, 3.0])
def test_random_stopping_mu_meets_the_budget(stopping, epsilon):
    mu = random_stopping_mu(epsilon, 1e-5, 10.0, stopping)
    spent = random_stopping_epsilon(mu, 10.0, 1e-5, stopping)
    assert spent <= epsilon and spent == pytest.approx(epsilon, rel=1e-6)


def test_random_stopping_costs_less_than_composing_its_mean():
    from dp_glm_sklearn.privacy import gdp_mu

    # Ten candidates in a grid: mu / sqrt(10) each; random stopping with mean
    # 10 affords each run much more.
    assert random_stopping_mu(3.0, 1e-5, 10.0) > 1.5 * gdp_mu(3.0, 1e-5) / math.sqrt(10)


def test_random_stopping_refuses_a_budget_below_its_floor():
    with pytest.raises(ValueError, match="random stopping"):
        random_stopping_mu(1e-4, 1e-5, 10.0)


@pytest.mark.parametrize("stopping", ["logarithmic", "geometric"])
def test_stopping_count_has_the_requested_mean(stopping):
    # The sample mean of 4000 draws is within 5 (estimated) standard errors of
    # the mean.  False failure: the t statistic of these skewed counts has
    # heavier tails than the normal's 5.7e-7 at 5; the two-sided Edgeworth
    # expansion (Hall 1987, order 1/n) gives 2.3e-6 (logarithmic; skewness 3.6,
    # excess kurtosis 21) and 1.1e-6 (geometric).  Simulated over 500,000
    # seeds each: |t| > 4 in 1.3e-4 and 8e-5 of them (normal: 6.3e-5), > 4.5
    # in 1.8e-5 and 1.4e-5, > 5 in none.
    rng = np.random.default_rng(6)
    draws = np.array([sample_stopping_count(5.0, stopping, rng) for _ in range(4000)])
    assert draws.min() >= 1
    assert abs(draws.mean() - 5.0) < 5 * draws.std() / math.sqrt(len(draws))


@pytest.mark.parametrize("shape", [0.0, 1.0])
@pytest.mark.parametrize("mean", [1.5, 10.0, 100.0])
def test_stopping_gamma_is_conservative_for_dp_accounting(shape, mean):
    rdp = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")
    gamma = sel._stopping_gamma(mean, shape)
    assert sel._stopping_mean(gamma, shape) <= mean
    assert gamma >= rdp._gamma_truncated_negative_binomial(shape, mean)


def test_stopping_rejects_bad_input():
    with pytest.raises(ValueError, match="stopping"):
        sample_stopping_count(5.0, "poisson", np.random.default_rng(0))
    with pytest.raises(ValueError, match="mean"):
        random_stopping_epsilon(0.3, 1.0, 1e-5)


# -- bounded range on neighbours (what the GDP conversion of the searches uses) ------------
def _log_ratio_range(lp, lq):
    """max_i - min_i of log p_i - log q_i over the common support (both must agree on it)."""
    assert np.array_equal(np.isneginf(lp), np.isneginf(lq))
    diff = (lp - lq)[~np.isneginf(lp)]
    return float(np.ptp(diff))


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 5.0])
def test_exponential_mechanism_is_bounded_range_on_neighbours(epsilon):
    rng = np.random.default_rng(5)
    delta = 0.01
    worst = 0.0
    for u, v in _neighbours(rng, np.full(6, delta)):
        lp = np.log(exponential_mechanism_probabilities(u, delta, epsilon))
        lq = np.log(exponential_mechanism_probabilities(v, delta, epsilon))
        worst = max(worst, _log_ratio_range(lp, lq))
    assert worst <= epsilon * (1 + 1e-9)
    # Corners with shifts of both signs span epsilon exactly: the bound is not
    # loose.  False failure only if no corner has both signs, P < 1e-225.
    assert worst > 0.9 * epsilon


@pytest.mark.parametrize("d", SENSITIVITY_SETS)
@pytest.mark.parametrize("epsilon", [0.2, 1.0, 4.0])
def test_gem_is_bounded_range_on_neighbours(d, epsilon):
    rng = np.random.default_rng(6)
    worst = 0.0
    for u, v in _neighbours(rng, d):
        u[d == 0] = v[d == 0] = -0.7
        lp, lq = _gem_log_probabilities(u, d, epsilon), _gem_log_probabilities(v, d, epsilon)
        worst = max(worst, _log_ratio_range(lp, lq))
    assert worst <= epsilon * (1 + 1e-9)


def test_pure_dp_gdp_mu_stays_finite_and_valid_for_large_epsilon():
    # a* = expit(-eps) underflowed: mu was inf from epsilon 745, and a grid
    # search or boosting at epsilon 1e4 was charged GaussianEvent(mu=inf),
    # refused by a budget equal to its own epsilon.
    import numpy as np

    from dp_glm_sklearn import DPGridSearchCV, DPLinearRegression, PrivacyAccountant
    from dp_glm_sklearn.privacy.selection import gdp_pure_epsilon, pure_dp_gdp_mu

    for epsilon in (700.0, 745.0, 2283.0, 1e4, 1e6):
        mu = pure_dp_gdp_mu(epsilon)
        assert math.isfinite(mu) and gdp_pure_epsilon(mu) >= epsilon
        assert mu <= math.sqrt(8 * epsilon) * (1 + 1e-6)  # 2 Phi^-1(1 - e^-eps) < sqrt(8 eps)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    acc = PrivacyAccountant(epsilon=1e4, delta=1e-6)
    search = DPGridSearchCV(DPLinearRegression(), {"norm_bound": [1.0, 2.0]}, epsilon=1e4,
                            delta=1e-6, accountant=acc, random_state=0).fit(X, X[:, 0])
    assert search.privacy_spent_[0] <= 1e4 and acc.spent()[0] <= 1e4


# -- Gaussian report-noisy-max ----------------------------------------------------------
@pytest.mark.parametrize("sensitivities", [(1.0, 1.0), (0.5, 2.0), (1e-300, 3e-300)])
def test_gaussian_report_noisy_max_has_the_gaussian_selection_probability(sensitivities):
    # argmax(u_j + N(0, (d_j / mu)^2)) over two scores picks 1 with probability
    # Phi(mu (u_1 - u_0) / sqrt(d_0^2 + d_1^2)); scaling the scores and noise
    # by a common factor must not change it, however small the sensitivities.
    d0, d1 = sensitivities
    mu, gap = 2.0, 0.4 * math.hypot(d0, d1)
    expected = 0.5 * math.erfc(-mu * gap / math.hypot(d0, d1) / math.sqrt(2.0))  # 0.788
    rng = np.random.default_rng(7)
    trials = 20000
    hits = sum(gaussian_report_noisy_max([0.0, gap], [d0, d1], mu, rng) for _ in range(trials))
    # 5 standard errors (sd 0.0029): false-failure probability below 1e-6.
    assert abs(hits / trials - expected) <= 5 * math.sqrt(expected * (1 - expected) / trials)


def test_gaussian_report_noisy_max_draws_one_normal_per_score():
    # The same standard normals as the explicit u_j + N(0, (d_j / mu)^2): the
    # common scaling changes no choice (ties aside), and the generator
    # advances by one draw per score.
    utilities = np.random.default_rng(0).normal(size=(200, 5))
    sensitivities = [0.1, 0.2, 0.05, 0.3, 0.1]
    for i, u in enumerate(utilities):
        chosen = gaussian_report_noisy_max(u, sensitivities, 3.0, np.random.default_rng(i))
        rng = np.random.default_rng(i)
        explicit = [u_j + rng.normal(0.0, d_j / 3.0)
                    for u_j, d_j in zip(u, sensitivities, strict=True)]
        assert chosen == int(np.argmax(explicit))
    # A zero sensitivity adds no noise to its (constant) score; a huge mu
    # with tiny sensitivities selects the best score.
    assert gaussian_report_noisy_max([0.0, 1.0], [0.0, 0.0], 1.0, np.random.default_rng(0)) == 1
    assert gaussian_report_noisy_max([1e-300, 0.0, 2e-300], 1e-302, 1e150,
                                     np.random.default_rng(0)) == 2
    with pytest.raises(ValueError, match="mu must be"):
        gaussian_report_noisy_max([0.0, 1.0], 1.0, 0.0, np.random.default_rng(0))


def test_gaussian_report_noisy_max_never_raises_on_extreme_ratios(monkeypatch):
    # A sensitivity ratio whose noise scale would underflow (1e-310 / 1e15) is
    # raised to the smallest safe one, not refused: the random search selects
    # after its charge.  Floating-point errors are ignored (the scores are
    # private): under np.seterr(all="raise") the divisions underflowed.
    for d in ([1e-310, 1.0], [1.0, 5e-324]):
        for u in ([0.0, 0.5], [1e-310, 0.0]):
            with np.errstate(all="raise"):
                index = gaussian_report_noisy_max(u, d, 1e15, np.random.default_rng(0))
            assert index in (0, 1)
    # A positive sensitivity always gets noise, also where mu * the smallest
    # normal float underflows (mu < 2**-53).
    sigmas, add_noise = [], sel.add_gaussian_noise

    def record(value, sigma, rng):
        sigmas.append(sigma)
        return add_noise(value, sigma, rng)

    monkeypatch.setattr(sel, "add_gaussian_noise", record)
    gaussian_report_noisy_max([0.0, 0.0], [1e-300, 1e30], 1e-17, np.random.default_rng(0))
    assert len(sigmas) == 2 and min(sigmas) > 0.0


def test_pure_dp_conversions_round_on_the_safe_side():
    # pure_dp_gdp_mu must never be below the exact smallest mu (it was 11%
    # below at epsilon = 1e-15, and -0.0 at 1e-300: expit(-eps) rounds to
    # 1/2), and gdp_pure_epsilon never above the exact largest epsilon (a
    # selection run at it must stay within mu; it was 2.2e-11 relative above
    # at mu = 1e-5).  Exact values by 80-digit arithmetic; deterministic.
    import mpmath

    with mpmath.workdps(80):
        for epsilon in np.logspace(-300, 2, 120):  # (tanh(eps/2) is 1 at 80 digits beyond)
            exact = 2 * mpmath.sqrt(2) * mpmath.erfinv(mpmath.tanh(mpmath.mpf(epsilon) / 2))
            mu = pure_dp_gdp_mu(float(epsilon))
            assert exact <= mu <= exact * (1 + 1e-13)
            assert bounded_range_gdp_mu(2 * float(epsilon)) == mu
        for mu in np.logspace(-300, 3, 120):
            m = mpmath.mpf(mu)
            # log(Phi(mu/2) / Phi(-mu/2)); the same for small mu, where the
            # ratio is 1 to 80 digits
            exact = (2 * mpmath.atanh(mpmath.erf(m / (2 * mpmath.sqrt(2)))) if mu < 1
                     else mpmath.log(mpmath.ncdf(m / 2) / mpmath.ncdf(-m / 2)))
            epsilon = gdp_pure_epsilon(float(mu))
            assert exact * (1 - 1e-13) <= epsilon <= exact
            # (lowered until its inverse is within mu: by up to 1.2e-12 relative
            # at mu = 1000, where pure_dp_gdp_mu starts above the exact value)
            assert 2 * epsilon * (1 - 1e-11) <= gdp_bounded_range_epsilon(float(mu)) <= 2 * epsilon
            assert bounded_range_gdp_mu(gdp_bounded_range_epsilon(float(mu))) <= mu


def test_pure_dp_conversions_stay_safe_on_subnormals_and_beyond_the_floats():
    # Subnormals: the relative rounding-down did nothing to an absolute error
    # (gdp_pure_epsilon(1e-323) was 1e-323, exact 7.9e-324), and halving a
    # subnormal epsilon rounded down (bounded_range_gdp_mu(5e-324) was 0).
    # Huge mu: gdp_pure_epsilon was inf from mu ~ 3.8e154, above an exact
    # value that may still be a float (adversarial check).
    import mpmath

    with mpmath.workdps(60):
        def exact_epsilon(mu):
            x = mpmath.mpf(mu) / 2
            if x > 1e100:  # -log Phi(-x), asymptotically (log Phi(x) ~ 0)
                return x * x / 2 + mpmath.log(x) + mpmath.log(mpmath.sqrt(2 * mpmath.pi))
            return 2 * mpmath.atanh(mpmath.erf(x / mpmath.sqrt(2)))

        def exact_mu(epsilon):
            return 2 * mpmath.sqrt(2) * mpmath.erfinv(mpmath.tanh(mpmath.mpf(epsilon) / 2))

        for k in (1, 2, 3, 10, 99, 2**20):
            tiny = k * math.ulp(0.0)
            assert gdp_pure_epsilon(tiny) <= exact_epsilon(tiny)
            assert pure_dp_gdp_mu(tiny) >= exact_mu(tiny)
            assert bounded_range_gdp_mu(tiny) >= exact_mu(mpmath.mpf(tiny) / 2)
        for mu in (2.6e154, 3.7923007632436704e154, 4e154, 1e300):
            assert gdp_pure_epsilon(mu) <= exact_epsilon(mu)
            assert math.isfinite(gdp_pure_epsilon(mu))
        mu = pure_dp_gdp_mu(sys.float_info.max)
        assert exact_epsilon(mu) >= sys.float_info.max
        # (2 * gdp_pure_epsilon overflowed to inf, whose inverse is inf > mu.)
        assert gdp_bounded_range_epsilon(3e154) == sys.float_info.max
        assert bounded_range_gdp_mu(sys.float_info.max) <= 3e154


def test_random_stopping_helpers_refuse_invalid_numbers():
    # random_stopping_refit_mu(nan or -1, ...) treated the search as free.
    for mu_run in (math.nan, -1.0):
        with pytest.raises(ValueError, match="mu_run"):
            sel.random_stopping_refit_mu(mu_run, 10.0, 1.0, 1e-5)
    with pytest.raises(ValueError, match="delta"):
        random_stopping_mu(1.0, 1.0, 10.0)
    for bad in (None, "1.0", math.nan, -1.0):
        with pytest.raises(ValueError, match="mu must be"):
            gdp_bounded_range_epsilon(bad)


def test_the_random_stopping_floor_names_mean_candidates():
    with pytest.raises(ValueError, match=r"below 0\.00928.*mean_candidates"):
        random_stopping_mu(0.001, 1e-5, 10.0)
