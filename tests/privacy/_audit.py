"""Black-box privacy audits: the statistics, and test-only neighbors (SPEC section 8).

An audit runs a mechanism many times on each of two neighboring data sets S
and S' (each run with its own seed), reduces every output to one number (a
*statistic*, e.g. the coordinate of the coefficients along the canary's
gradient) and treats "the statistic exceeds a threshold" as a test of
H0 = "the data was S" against H1 = "the data was S'".

Any mu-GDP mechanism satisfies, for every test,
``TPR <= Phi(Phi^-1(FPR) + mu)``, so a one-sided lower confidence bound
``TPR_lo`` on the true positive rate and an upper bound ``FPR_hi`` on the
false positive rate give a lower confidence bound on mu::

    mu_lb = Phi^-1(TPR_lo) - Phi^-1(FPR_hi)

An epsilon-DP mechanism satisfies ``TPR <= exp(epsilon) FPR``, whence
``epsilon_lb = log(TPR_lo / FPR_hi)``.

The threshold (and which side of it means "S'") is chosen on the first half
of the runs of each side (maximizing the same bound, at a stricter level) and
the rates are counted on the second half, so the threshold is independent of
the counts. When the test is fixed before any run (the selection audits: "the
audited candidate is chosen"), no runs are spent on choosing it and all of
them are counted. Each rate gets a one-sided
Clopper-Pearson bound at level ``alpha / 2``: the lower bound exceeds the
true parameter only if one of the two bounds fails, with probability at most
``alpha`` whatever the threshold. This is the *false-failure probability* of
``mu_lb <= mu`` on a correct implementation.

Everything here is for tests and benchmarks; nothing is reachable from the
public API of the library.
"""

import dataclasses
import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from unittest import mock

import numpy as np
from scipy.stats import beta, binom, norm

from dp_glm_sklearn._objective import GLMObjective, PublicProblem
from dp_glm_sklearn.losses import LogisticLoss
from dp_glm_sklearn.mechanisms.jl import calibrate_jl, jl, project_rows
from dp_glm_sklearn.mechanisms.noisy_gd import calibrate_noisy_gd, noisy_gd
from dp_glm_sklearn.mechanisms.output_perturbation import (
    calibrate_output_perturbation,
    output_perturbation,
)
from dp_glm_sklearn.privacy.events import total_mu
from dp_glm_sklearn.privacy.noise import _audit_noise_multiplier
from dp_glm_sklearn.privacy.selection import (
    GEM_BETA,
    bounded_range_gdp_mu,
    exponential_mechanism,
    exponential_mechanism_probabilities,
    gem_probabilities,
    generalized_exponential_mechanism,
)

# The module itself: the JL audit fixes its (data-independent) projection.
_jl_module = importlib.import_module("dp_glm_sklearn.mechanisms.jl")

#: Noise factor of the power check: 25% less noise than calibrated.
NOISE_FACTOR = 0.75

__all__ = [
    "AuditCase",
    "AuditResult",
    "CanaryLoss",
    "audit",
    "binary_audit_probability",
    "canary_neighbors",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "collect",
    "exponential_mechanism_case",
    "exponential_mechanism_gdp_case",
    "gaussian_audit_probability",
    "gdp_lower_bound",
    "gem_case",
    "gem_worst_case_epsilon",
    "jl_case",
    "noisy_gd_case",
    "output_perturbation_case",
    "pure_dp_lower_bound",
]

# Level of the confidence bounds that choose the threshold, relative to alpha.
_SELECTION_LEVEL = 1e-4


# -- confidence bounds ---------------------------------------------------------
def clopper_pearson_upper(k, m, level):
    """One-sided upper bound on a binomial rate: P(rate > bound) <= level.

    ``k`` successes out of ``m`` trials (arrays broadcast).

    Examples
    --------
    >>> round(float(clopper_pearson_upper(0, 100, 0.05)), 4)
    0.0295
    """
    k = np.asarray(k, dtype=float)
    with np.errstate(invalid="ignore"):
        bound = beta.ppf(1.0 - level, k + 1.0, m - k)
    return np.where(k >= m, 1.0, bound)


def clopper_pearson_lower(k, m, level):
    """One-sided lower bound on a binomial rate: P(rate < bound) <= level.

    Examples
    --------
    >>> round(float(clopper_pearson_lower(100, 100, 0.05)), 4)
    0.9705
    """
    k = np.asarray(k, dtype=float)
    with np.errstate(invalid="ignore"):
        bound = beta.ppf(level, k, m - k + 1.0)
    return np.where(k <= 0, 0.0, bound)


def gdp_lower_bound(tpr, fpr):
    """``Phi^-1(TPR) - Phi^-1(FPR)``: the mu a test with these rates proves."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return norm.ppf(tpr) - norm.ppf(fpr)


def pure_dp_lower_bound(tpr, fpr):
    """``log(TPR / FPR)``: the epsilon (at delta = 0) a test with these rates proves."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(tpr) - np.log(fpr)


# -- the audit -----------------------------------------------------------------
@dataclass(frozen=True)
class AuditResult:
    """Outcome of one audit.

    ``lower_bound`` is mu_lb (or epsilon_lb), a lower confidence bound at
    level ``1 - alpha`` on the privacy parameter of the mechanism;
    ``claimed`` is the parameter the library states.
    """

    lower_bound: float
    claimed: float
    threshold: float
    sign: int
    tpr_lo: float
    fpr_hi: float
    n_runs: int
    alpha: float

    @property
    def ratio(self):
        return self.lower_bound / self.claimed


def _rates(null, alt, thresholds, sign):
    """Fractions of ``sign * stat > t`` on each side, for every threshold."""
    null = np.sort(sign * np.asarray(null))
    alt = np.sort(sign * np.asarray(alt))
    fp = null.size - np.searchsorted(null, thresholds, side="right")
    tp = alt.size - np.searchsorted(alt, thresholds, side="right")
    return fp, tp


def _bound(fp, tp, m_null, m_alt, alpha, bound):
    fpr_hi = clopper_pearson_upper(fp, m_null, alpha / 2)
    tpr_lo = clopper_pearson_lower(tp, m_alt, alpha / 2)
    return bound(tpr_lo, fpr_hi), tpr_lo, fpr_hi


def _select_test(sel_null, sel_alt, alpha, bound):
    """Threshold and orientation maximizing a confidence bound on these runs.

    The bound is taken at the stricter level ``alpha * _SELECTION_LEVEL``:
    it penalizes thresholds in the tails, where the counts are small and
    the largest of many noisy bounds is most often a lucky one (on Gaussian
    statistics at mu ~ 2 this halves the spread of the audit's result).
    """
    alpha = alpha * _SELECTION_LEVEL
    best = (-np.inf, 0.0, 1)
    for sign in (1, -1):
        candidates = np.unique(sign * np.concatenate([sel_null, sel_alt]))
        fp, tp = _rates(sel_null, sel_alt, candidates, sign)
        values, _, _ = _bound(fp, tp, sel_null.size, sel_alt.size, alpha, bound)
        values = np.where(np.isnan(values), -np.inf, values)
        i = int(np.argmax(values))
        if values[i] > best[0]:
            best = (float(values[i]), float(candidates[i]), sign)
    return best[1], best[2]


def audit(null, alt, claimed, *, alpha=1e-3, bound=gdp_lower_bound, test=None):
    """Lower confidence bound on the privacy parameter from two samples of a statistic.

    Parameters
    ----------
    null, alt : array-like of float
        The statistic on runs with data S (``null``) and S' (``alt``), one
        independent run (own seed) each. Without ``test``, the first half of
        each selects the threshold and the second half is counted.
    claimed : float
        The privacy parameter the library states (mu, or epsilon with
        ``bound=pure_dp_lower_bound``).
    alpha : float, default=1e-3
        Probability that the returned lower bound exceeds the true parameter
        (each Clopper-Pearson bound is taken at ``alpha / 2``).
    bound : callable, default=gdp_lower_bound
        ``(tpr, fpr) -> parameter``.
    test : (threshold, sign) or None, default=None
        A test fixed before the runs (it must not depend on them): "S'" when
        ``sign * stat > threshold``. Every run is then counted.

    Returns
    -------
    AuditResult

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> res = audit(rng.normal(0, 1, 4000), rng.normal(1.5, 1, 4000), claimed=1.5)
    >>> 1.0 < res.lower_bound <= 1.5
    True
    """
    null, alt = np.asarray(null, float), np.asarray(alt, float)
    if test is None:
        h0, h1 = null.size // 2, alt.size // 2
        threshold, sign = _select_test(null[:h0], alt[:h1], alpha, bound)
        eval_null, eval_alt = null[h0:], alt[h1:]
    else:
        threshold, sign = float(test[0]), int(test[1])
        eval_null, eval_alt = null, alt
    fp, tp = _rates(eval_null, eval_alt, np.array([threshold]), sign)
    value, tpr_lo, fpr_hi = _bound(fp, tp, eval_null.size, eval_alt.size, alpha, bound)
    value = float(value[0])
    return AuditResult(
        lower_bound=-np.inf if np.isnan(value) else value,
        claimed=float(claimed),
        threshold=threshold,
        sign=sign,
        tpr_lo=float(tpr_lo[0]),
        fpr_hi=float(fpr_hi[0]),
        n_runs=int(null.size + alt.size),
        alpha=float(alpha),
    )


def gaussian_audit_probability(shift, level, n_runs, *, alpha=1e-3, n_draws=200, seed=0):
    """``P(mu_lb > level)`` for an audit of ``n_runs`` runs per side of a Gaussian statistic.

    The statistic is ``N(0, 1)`` on S and ``N(shift, 1)`` on S' (the exact
    law of the canary statistic of a Gaussian mechanism with GDP parameter
    ``shift``). The probability is exact given the threshold (binomial sums
    over the evaluation half) and averaged over ``n_draws`` simulated
    selection halves, which is how the threshold varies. With
    ``shift = level`` it is the false-failure probability of the check
    ``mu_lb <= mu`` (at most ``alpha``); with ``shift = mu / 0.75`` and
    ``level = mu``, one minus it is the false-failure probability of the
    power check.
    """
    rng = np.random.default_rng(seed)
    h = n_runs // 2
    m = n_runs - h
    counts = np.arange(m + 1)
    fpr_hi = clopper_pearson_upper(counts, m, alpha / 2)
    tpr_lo = clopper_pearson_lower(counts, m, alpha / 2)
    # mu_lb > level  <=>  tpr_lo > Phi(level + Phi^-1(fpr_hi)); tpr_lo increases with tp.
    needed = norm.cdf(level + norm.ppf(fpr_hi))
    tp_min = np.searchsorted(tpr_lo, needed, side="right")
    total = 0.0
    for _ in range(n_draws):
        t, sign = _select_test(rng.normal(0.0, 1.0, h), rng.normal(shift, 1.0, h), alpha,
                               gdp_lower_bound)
        fpr = norm.sf(t) if sign == 1 else norm.cdf(-t)
        tpr = norm.sf(t - shift) if sign == 1 else norm.cdf(-t - shift)
        total += np.sum(binom.pmf(counts, m, fpr) * binom.sf(tp_min - 1, m, tpr))
    return total / n_draws


def binary_audit_probability(tpr, fpr, level, n_runs, *, alpha=1e-3, bound="pure",
                             split=False):
    """``P(lower bound > level)`` for an audit of a binary statistic.

    The event has probability ``fpr`` on S and ``tpr`` on S'; exact binomial
    sums over the counted runs of each side: all ``n_runs`` for a test fixed
    in advance (``audit(..., test=...)``), the ``n_runs - n_runs // 2`` of
    the evaluation half with ``split=True`` (the right orientation is then
    assumed chosen). ``bound`` is ``"pure"`` (``log(TPR_lo / FPR_hi)``) or
    ``"gdp"``.
    """
    m = n_runs - n_runs // 2 if split else n_runs
    counts = np.arange(m + 1)
    fpr_hi = clopper_pearson_upper(counts, m, alpha / 2)
    tpr_lo = clopper_pearson_lower(counts, m, alpha / 2)
    if bound == "pure":
        needed = np.exp(level) * fpr_hi
    else:
        needed = norm.cdf(level + norm.ppf(fpr_hi))
    tp_min = np.searchsorted(tpr_lo, needed, side="right")
    return float(np.sum(binom.pmf(counts, m, fpr) * binom.sf(tp_min - 1, m, tpr)))


def collect(run, n_runs, seed):
    """Statistics of ``n_runs`` runs on each neighbor.

    ``run(side, rng) -> float`` runs the mechanism on S (``side=0``) or S'
    (``side=1``) with the Generator ``rng``; run ``i`` of side ``s`` is seeded
    with ``(seed, s, i)``, so every run has its own seed.
    """
    out = np.empty((2, n_runs))
    for side in (0, 1):
        for i in range(n_runs):
            out[side, i] = run(side, np.random.default_rng([seed, side, i]))
    return out[0], out[1]


# -- test-only neighbors ---------------------------------------------------------
class CanaryLoss:
    """Test-only linear "loss" whose derivative always has norm exactly ``bound``.

    ``phi(z, y) = -bound * y * <z, v>`` for a unit vector ``v`` in R^K and a
    label ``y`` in {-1, +1}: the derivative in z is the constant
    ``-bound * y * v``. Flipping one label moves the average gradient by
    exactly ``2 * bound * ||x_aug|| / n``, the sensitivity bound ``2 G / n``,
    whatever theta is, and the output of noisy GD is exactly Gaussian as long
    as the projection does not bind. ``smoothness`` and ``n_outputs`` are
    those of the loss it stands in for (they set the step and the shapes).
    """

    name = "canary"

    def __init__(self, bound, n_outputs=1, smoothness=1.0):
        self.bound = float(bound)
        self.n_outputs = int(n_outputs)
        self.smoothness = float(smoothness)
        v = np.zeros(self.n_outputs)
        v[0] = 1.0
        if self.n_outputs > 1:
            v[:2] = [1.0, -1.0]
        self.direction = v / np.linalg.norm(v)

    def value(self, z, y):
        return -self.bound * y * (z @ self.direction)

    def derivative(self, z, y):
        return -self.bound * np.outer(y, self.direction)

    def derivative_bound(self, norm_bound, feature_norm, y_bound):
        return self.bound

    def __repr__(self):
        return f"CanaryLoss(bound={self.bound!r}, n_outputs={self.n_outputs})"


def canary_neighbors(base_loss, *, n_samples=2, n_features=1, feature_norm=1.0,
                     intercept_feature=1.0, y_bound=0.0, norm_bound=1e6, row_scale=3.0):
    """Neighbors S, S' whose changed record reaches the sensitivity bound.

    The canary loss takes the declared derivative bound of ``base_loss`` on
    the public problem (so the calibration is the one ``base_loss`` gets).
    Every row is ``row_scale * feature_norm * e_1`` (``row_scale > 1``: the
    feature clipping must bring it back to the bound); S' flips the label of
    the last record. ``norm_bound`` is huge so that the projection never
    binds.

    Returns
    -------
    problem : PublicProblem
    objectives : (GLMObjective, GLMObjective)
        On S and on S'.
    direction : ndarray of the shape of theta
        Unit vector along ``grad L(S') - grad L(S)``.
    """
    probe = PublicProblem(base_loss, n_samples, n_features, feature_norm, intercept_feature,
                          y_bound, norm_bound)
    bound = base_loss.derivative_bound(norm_bound, probe.augmented_norm, y_bound)
    loss = CanaryLoss(bound, base_loss.n_outputs, base_loss.smoothness)
    problem = PublicProblem(loss, n_samples, n_features, feature_norm, intercept_feature,
                            y_bound, norm_bound)
    X = np.zeros((n_samples, n_features))
    X[:, 0] = row_scale * feature_norm
    y = np.ones(n_samples)
    y_prime = y.copy()
    y_prime[-1] = -1.0
    objectives = (GLMObjective(problem, X, y), GLMObjective(problem, X, y_prime))
    zero = np.zeros(problem.theta_shape)
    diff = objectives[1].gradient(zero) - objectives[0].gradient(zero)
    return problem, objectives, diff / np.linalg.norm(diff)


# -- audited mechanisms ------------------------------------------------------------
@dataclass(frozen=True)
class AuditCase:
    """A mechanism set up for an audit.

    ``run(side, rng) -> float`` runs it on S (``side=0``) or S' (``side=1``)
    and returns the statistic; ``run_less_noise`` is the same with 25% less
    noise (the power check). ``claimed`` is the parameter audited, in the
    units of ``bound``; ``stated`` is what the library's privacy event says
    (``claimed <= stated`` when a sharper bound holds for the neighbors used).
    ``test`` is the test fixed in advance, if any (see :func:`audit`);
    ``exact_rates(less_noise=False) -> (fpr, tpr)``, for the selections, the
    exact probabilities of that test's event on S and S' (from the library's
    ``*_probabilities``): ``log(tpr / fpr)`` is the most any audit of this
    event can show.
    """

    run: Callable
    run_less_noise: Callable
    claimed: float
    stated: float
    bound: Callable = gdp_lower_bound
    test: tuple | None = None
    exact_rates: Callable | None = None


def _with_less_noise(run):
    def run_less_noise(side, rng):
        with _audit_noise_multiplier(NOISE_FACTOR):
            return run(side, rng)

    return run_less_noise


def _gaussian_case(run, calibration):
    mu = total_mu(calibration.events)
    return AuditCase(run, _with_less_noise(run), mu, mu)


def noisy_gd_case(epsilon, delta, base_loss=None, **neighbors):
    """Noisy GD (SPEC 4.1) on canary neighbors with the constants of ``base_loss``.

    T = 2 steps: the released average (of the last iterate only,
    ``T - T // 2 = 1``) is ``-eta (2 grad + noise_0 + noise_1)``, so both
    noisy gradients enter with equal weights, the statistic is sufficient
    and it carries the full ``sqrt(T)`` of the composition.
    """
    base_loss = LogisticLoss() if base_loss is None else base_loss
    problem, objectives, direction = canary_neighbors(base_loss, **neighbors)
    calibration = calibrate_noisy_gd(problem, epsilon, delta, max_iter=2)

    def run(side, rng):
        theta, _ = noisy_gd(objectives[side], calibration, rng)
        return float(np.vdot(theta, direction))

    return _gaussian_case(run, calibration)


def jl_case(epsilon, delta):
    """The JL method (SPEC 4.2) with d = 2, k = 1 and an adversarial projection.

    The privacy proof holds for every data-independent ``Phi`` (it is noisy
    GD on the projected rows), so the audit fixes the worst case: ``Phi``
    stretches the canary row threefold, beyond ``(1 + alpha) X``, and only
    the clipping of projected rows keeps the sensitivity. The statistic reads
    the projected coefficients back from ``theta = [Phi^T w_k; w_0]`` (a
    pseudo-inverse) along the canary's projected gradient.
    """
    problem, objectives, _ = canary_neighbors(LogisticLoss(), n_features=2)
    calibration = calibrate_jl(problem, epsilon, delta, max_iter=2, projection_dim=1)
    alpha = calibration.params["alpha"]
    phi = np.array([[3.0 * (1.0 + alpha), 0.5]])
    projected = calibration.params["problem"]
    sides = [GLMObjective(projected, project_rows(o.X, phi, problem.feature_norm), o.y)
             for o in objectives]
    zero = np.zeros(projected.theta_shape)
    u = (sides[1].gradient(zero) - sides[0].gradient(zero)).ravel()
    # theta = M w_k with M = diag(Phi^T, 1); <theta, v> = <w_k, u> for v = pinv(M^T) u.
    M = np.zeros((problem.theta_shape[0], projected.theta_shape[0]))
    M[:2, :1] = phi.T
    M[2, 1] = 1.0
    v = np.linalg.pinv(M.T) @ (u / np.linalg.norm(u))

    def run(side, rng):
        with mock.patch.object(_jl_module, "draw_projection", lambda *args, **kw: phi):
            theta, _ = jl(objectives[side], calibration, rng)
        return float(theta.ravel() @ v)

    return _gaussian_case(run, calibration)


def output_perturbation_case(epsilon, delta, l2=1.0):
    """Output perturbation (SPEC 4.3) on canary neighbors.

    With the linear canary loss the regularized minimizer is
    ``-grad L / lambda`` (inside the ball of radius 100), so the minimizers
    of S and S' are ``2 G / (lambda n)`` apart, the main term of the
    calibrated sensitivity (the rest, ``2 e``, is the certified solver
    accuracy, 0.2% of it).
    """
    problem, objectives, direction = canary_neighbors(LogisticLoss(), norm_bound=100.0)
    calibration = calibrate_output_perturbation(problem, epsilon, delta, l2=l2)

    def run(side, rng):
        theta, _ = output_perturbation(objectives[side], calibration, rng)
        return float(np.vdot(theta, direction))

    return _gaussian_case(run, calibration)


#: The test of the selection audits: the statistic is 1 when the audited
#: candidate (index 0) is chosen, and "S'" is decided when it is.
SELECTION_TEST = (0.5, 1)


def _selection_case(select, probabilities, utilities, epsilon):
    """An audit case for a selection ``select(u, factor, rng) -> (index, event)``.

    ``factor`` is 1 for the mechanism as the library runs it, ``NOISE_FACTOR``
    for 25% less noise; ``probabilities(u, factor)`` are its exact selection
    probabilities. The statistic is the indicator of candidate 0.
    """
    def run_at(factor):
        def run(side, rng):
            index, _ = select(utilities[side], factor, rng)
            return float(index == 0)

        return run

    def exact_rates(less_noise=False):
        factor = NOISE_FACTOR if less_noise else 1.0
        return tuple(float(probabilities(u, factor)[0]) for u in utilities)

    _, event = select(utilities[0], 1.0, np.random.default_rng(0))
    return AuditCase(run_at(1.0), run_at(NOISE_FACTOR), epsilon, event.epsilon,
                     bound=pure_dp_lower_bound, test=SELECTION_TEST, exact_rates=exact_rates)


def exponential_mechanism_case(epsilon, log_odds=-3.0):
    """The exponential mechanism on two candidates (epsilon-DP, audited at epsilon).

    Scores of sensitivity 1 move by 1 in opposite directions: S has
    ``u = (0, c)``, S' has ``(1, c - 1)``, so the log-odds of candidate 0
    go from ``log_odds`` (``c = -2 log_odds / epsilon``) to
    ``log_odds + epsilon``. The privacy loss of "candidate 0 is chosen"
    tends to epsilon as ``log_odds -> -inf``; ``log_odds`` trades it against
    the counts.

    No neighbors do better, with any number of candidates: for an event E of
    probability ``q`` on S, ``P'(E)`` is largest when every score in E rises
    by 1 and every other falls by 1, which gives ``P'(E) = e^eps q /
    (e^eps q + 1 - q)``, the two-candidate curve. 25% less noise (Gumbel
    scale ``2 / epsilon`` in the report-noisy-max view) is the mechanism at
    ``epsilon / 0.75``.
    """
    c = -2.0 * log_odds / epsilon
    utilities = (np.array([0.0, c]), np.array([1.0, c - 1.0]))

    def select(u, factor, rng):
        return exponential_mechanism(u, 1.0, epsilon / factor, rng)

    def probabilities(u, factor):
        return exponential_mechanism_probabilities(u, 1.0, epsilon / factor)

    return _selection_case(select, probabilities, utilities, epsilon)


def exponential_mechanism_gdp_case(epsilon):
    """The exponential mechanism audited in Gaussian DP, at its bounded-range mu.

    The model-selection wrappers record a selection run at epsilon as
    ``bounded_range_gdp_mu(epsilon) = pure_dp_gdp_mu(epsilon / 2)``-GDP (the
    mechanism is epsilon-bounded-range; proof in
    :func:`~dp_glm_sklearn.privacy.selection.bounded_range_gdp_mu`).  The
    worst bounded-range pair is the centred one, and the exponential
    mechanism reaches it: two candidates whose log-odds go from
    ``-epsilon / 2`` on S to ``+epsilon / 2`` on S' (randomized response at
    ``epsilon / 2``), so the test "candidate 0 is chosen" has exactly
    ``Phi^-1(TPR) - Phi^-1(FPR) = mu``: the audit is tight.  25% less noise
    (epsilon / 0.75) has a larger mu, which the audit must see.
    """
    case = exponential_mechanism_case(epsilon, log_odds=-epsilon / 2.0)
    mu = bounded_range_gdp_mu(epsilon)
    return dataclasses.replace(case, claimed=mu, stated=mu, bound=gdp_lower_bound)


def gem_worst_case_epsilon(epsilon, n_candidates):
    """Exact privacy parameter of the generalized exponential mechanism on K candidates.

    ``eps_K = epsilon / 2 + log((K - 1) / (1 + (K - 2) e^(-epsilon / 2)))``:
    ``epsilon / 2`` for two candidates, increasing to ``epsilon`` as K grows
    (for small epsilon, about ``epsilon (1 - 1 / (2 (K - 1)))``).

    Upper bound. Write ``z_k = exp(epsilon s_k / 2)`` for the normalized
    scores on S (``s_k <= 0``, and ``s_k = 0`` for a best penalized score,
    so some ``z_k = 1``), ``z'_k`` on S', and ``Z, Z'`` for the sums; every
    ``s_k`` moves by at most 1. Let i be the released candidate and ``m != i``
    a candidate with ``s'_m = 0``. Then ``Z <= z_i + 1 + R`` with ``R`` the
    sum over the other K - 2, ``Z' >= e^(epsilon/2) z_i + 1 + e^(-epsilon/2)
    R`` at the largest move of ``s_i``, and ``P'(i) / P(i) =
    e^(epsilon/2) z_i Z / (z_i Z')`` is largest as ``z_i -> 0`` and
    ``R -> K - 2``, which is ``e^(eps_K)``. If i is the only candidate with
    ``s'_i = 0``, then ``s_i >= -1`` and the same steps give
    ``epsilon / 2 + log((K - 1 + e^(-epsilon/2)) / (1 + (K - 1) e^(-epsilon/2)))``,
    smaller.

    Attained (in the limit) by the neighbors of :func:`gem_case` with
    ``n_crowd = K - 2`` and ``gap -> inf``.
    """
    k = int(n_candidates)
    if k < 2:
        return 0.0
    return epsilon / 2.0 + math.log((k - 1) / (1.0 + (k - 2) * math.exp(-epsilon / 2.0)))


def gem_case(epsilon, n_crowd=33, gap=1.0):
    """The generalized exponential mechanism, audited at the epsilon its event states.

    With ``a_k = u_k - t D_k`` the penalized scores, the normalized score
    ``s_k = min_j (a_k - a_j) / (D_k + D_j)`` is measured against the best
    candidates, which move too; with a common sensitivity GEM is the
    exponential mechanism at epsilon / 2, and on K candidates it is only
    ``gem_worst_case_epsilon(epsilon, K)``-DP. What reaches epsilon is a
    data-independent *anchor* (``D = 0``: the zero model of SPEC section 5)
    that stays on top, and a *crowd* of ``n_crowd`` candidates that share the
    top with it on S and all fall by their full sensitivity on S', while the
    audited candidate 0 rises by its own:

    ====================  ========  ===========  =============
    candidate             D         a on S       a on S'
    ====================  ========  ===========  =============
    0 (audited)           1         -gap         1 - gap
    1 .. n_crowd (crowd)  1         0            -1
    anchor (last)         0         0            0
    ====================  ========  ===========  =============

    (up to the common shift ``-t``: the utilities are the table's ``a`` for
    the data-dependent scores and ``-t`` for the anchor). So ``s_0`` rises
    from ``-gap`` to ``1 - gap`` (``gap >= 1``) and every crowd score falls
    from 0 to -1, while the anchor stays at 0: ``P'(0) / P(0) = e^(epsilon/2) (1 + n_crowd +
    e^(-gap epsilon/2)) / (1 + n_crowd e^(-epsilon/2) + e^((1 - gap) epsilon/2))``,
    which tends to ``e^epsilon`` as the crowd grows. One validation record
    does this: its clipped loss is maximal for candidate 0 and 0 for the
    crowd on S, the reverse on S'. ``gap = 1`` gives the best trade-off
    between this ratio and the counts; ``n_crowd`` is chosen for the number
    of runs (``benchmarks/audit.py``).

    25% less noise is the same normalized scores sampled at
    ``epsilon / 0.75``: the mechanism at ``epsilon / 0.75`` with ``beta``
    lowered so that the penalty ``t = 2 ln(K / beta) / epsilon`` is unchanged.
    """
    k = int(n_crowd) + 2
    t = 2.0 * math.log(k / GEM_BETA) / epsilon
    sensitivities = np.r_[np.ones(k - 1), 0.0]
    crowd = np.ones(k - 2)
    # u - t D = a - t: the table shifted by -t, and |u(S) - u(S')| = D exactly.
    utilities = (np.r_[-gap, 0.0 * crowd, -t], np.r_[1.0 - gap, -crowd, -t])

    def beta_at(factor):
        # 2 ln(k / beta) / (epsilon / factor) = t
        return GEM_BETA if factor == 1.0 else k * math.exp(-epsilon * t / (2.0 * factor))

    def select(u, factor, rng):
        return generalized_exponential_mechanism(u, sensitivities, epsilon / factor, rng,
                                                 beta=beta_at(factor))

    def probabilities(u, factor):
        return gem_probabilities(u, sensitivities, epsilon / factor, beta=beta_at(factor))

    return _selection_case(select, probabilities, utilities, epsilon)
