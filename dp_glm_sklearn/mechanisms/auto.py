"""Excess-risk bounds of the three mechanisms and the ``method="auto"`` rule (SPEC 4.4).

Everything here is a pure function of public quantities (n, d, the loss and
its constants, the bounds X, Y, B, and the GDP parameter ``mu`` of the target
(epsilon, delta)); nothing reads data.  The same formulas fix the default
projection dimension of the JL method (Theorem 2) and the default
regularization of output perturbation (Theorems 3 and 5), so the rule and the
mechanisms agree on what they optimize.

Notation (SPEC sections 1-3, as implemented in :class:`PublicProblem`):
``G = problem.lipschitz`` bounds every per-example gradient on the ball
``||theta|| <= B``; ``H = problem.smoothness = h X_aug**2``; ``p`` is the
number of coordinates of theta (``(d + 1) K`` with an intercept) and ``K``
the number of raw scores.  Every mechanism here is one mu-GDP release, so the
papers' ``sqrt(log(1/delta)) / epsilon`` becomes ``1 / mu`` exactly
(:func:`~dp_glm_sklearn.privacy.calibration.gdp_mu`).

The bounds are on the *privacy and optimization* part of the excess
empirical risk (what Table 1 of Arora et al. 2022 compares); the statistical
term ``~ G B / sqrt(n)`` of the non-private problem is common to all three
and left out.  They are upper bounds up to the stated constants, not
predictions; ``benchmarks/rates.py`` measures how well the rule they imply
picks the best mechanism.
"""

import math

import numpy as np
from scipy.stats import chi2

from .._objective import PublicProblem
from ..privacy.calibration import gdp_mu
from .noisy_gd import default_max_iter

__all__ = [
    "OPTIMIZATION_ACCURACY_RATIO",
    "choose_method",
    "default_l2",
    "default_projection_dim",
    "global_lipschitz",
    "jl_distortion",
    "jl_problem",
    "jl_risk_bound",
    "noisy_gd_risk_bound",
    "output_perturbation_risk_bound",
    "risk_bounds",
]

#: Output perturbation solves the regularized problem to within
#: ``OPTIMIZATION_ACCURACY_RATIO * 2 G / (lambda n)`` (certified), and adds
#: twice that to the sensitivity (SPEC 4.3): 0.2% more noise.
OPTIMIZATION_ACCURACY_RATIO = 1e-3


def _n_params(problem):
    return int(np.prod(problem.theta_shape))


def noisy_gd_risk_bound(problem, mu, max_iter=None, distance=None):
    """Excess-risk bound of noisy projected GD (Theorem 1), noise as calibrated.

    Projected gradient descent from 0 with step ``1 / H``, ``T`` steps and
    averaged iterates, with Gaussian gradient noise of variance
    ``sigma**2`` per coordinate, has excess empirical risk at most::

        H r**2 / (2 T) + p sigma**2 / (2 H)

    with r the distance from 0 to the comparator (``distance``, default B).
    The calibration of :func:`~dp_glm_sklearn.mechanisms.noisy_gd.calibrate_noisy_gd`
    gives ``sigma**2 = T (2 G / n)**2 / mu**2``.  ``max_iter=None`` uses the
    number of steps the estimators use by default
    (:func:`~dp_glm_sklearn.mechanisms.noisy_gd.default_max_iter`);
    ``max_iter="optimal"`` balances the two terms, which leaves
    ``2 r G sqrt(p) / (n mu)``, the rate ``G B sqrt(d log(1/delta)) / (n epsilon)``
    of Theorem 1 (whose proof takes ``T = n``).

    Examples
    --------
    >>> from dp_glm_sklearn._objective import PublicProblem
    >>> from dp_glm_sklearn.losses import LogisticLoss
    >>> pb = PublicProblem(LogisticLoss(), 10000, 99, 1.0, 0.0, 0.0, 4.0)
    >>> round(noisy_gd_risk_bound(pb, mu=1.0, max_iter="optimal"), 4)
    0.008
    >>> round(noisy_gd_risk_bound(pb, mu=1.0, max_iter=100), 4)
    0.0208
    """
    if mu == math.inf:
        return 0.0
    r = problem.norm_bound if distance is None else float(distance)
    n, G, H, p = problem.n_samples, problem.lipschitz, problem.smoothness, _n_params(problem)
    if isinstance(max_iter, str) and max_iter == "optimal":
        return 2.0 * r * G * math.sqrt(p) / (n * mu)
    T = default_max_iter(n, mu) if max_iter is None else int(max_iter)
    sigma2 = T * (2.0 * G / n) ** 2 / mu**2
    return H * r**2 / (2.0 * T) + p * sigma2 / (2.0 * H)


# -- JL method (Algorithm 2, Theorem 2) ------------------------------------------------
def jl_distortion(n_samples, projection_dim):
    """alpha such that projected rows are clipped to ``(1 + alpha) X``.

    For a Gaussian projection with ``N(0, 1/k)`` entries,
    ``||Phi x||**2 / ||x||**2`` follows ``chi2(k) / k``; alpha is chosen so
    that a row of norm X is clipped with probability ``1 / n`` (about one row
    in the data set, at worst).  The choice affects accuracy only: the
    clipping keeps the privacy proof exact whatever alpha is.

    Examples
    --------
    >>> round(jl_distortion(10000, 400), 3)
    0.133
    """
    k = int(projection_dim)
    q = chi2.isf(1.0 / max(int(n_samples), 1), k) / k
    return float(max(0.0, math.sqrt(q) - 1.0)) if np.isfinite(q) else 0.0


def jl_problem(problem, projection_dim):
    """The public problem in the projected space (SPEC 4.2).

    ``projection_dim`` features clipped to ``(1 + alpha) X``, the same
    intercept feature (the constant coordinate is not projected), the same
    loss and labels, and the constraint radius ``2 B``.
    """
    k = int(projection_dim)
    alpha = jl_distortion(problem.n_samples, k)
    return PublicProblem(
        loss=problem.loss,
        n_samples=problem.n_samples,
        n_features=k,
        feature_norm=(1.0 + alpha) * problem.feature_norm,
        intercept_feature=problem.intercept_feature,
        y_bound=problem.y_bound,
        norm_bound=2.0 * problem.norm_bound,
    )


def jl_risk_bound(problem, mu, projection_dim, max_iter=None):
    """Excess-risk bound of the JL method with ``k = projection_dim`` (Theorem 2).

    Noisy GD on the projected problem (:func:`jl_problem`: rows clipped to
    ``(1 + alpha) X``, radius 2B, comparator ``Phi w*`` at distance about
    ``||w*|| <= B`` from 0) plus the distortion of the comparator: for a
    Gaussian projection, ``<Phi w, Phi x> - <w, x>`` has mean 0 and variance
    ``(||w||**2 ||x||**2 + <w, x>**2) / k <= 2 B**2 X**2 / k``, so a loss with
    curvature at most h in the score loses at most ``h B**2 X**2 / k``::

        h B**2 X**2 / k + noisy_gd_risk_bound(jl_problem(problem, k), mu, max_iter, B)
    """
    k = int(projection_dim)
    B = problem.norm_bound
    distortion = problem.loss.smoothness * (B * problem.feature_norm) ** 2 / k
    return distortion + noisy_gd_risk_bound(jl_problem(problem, k), mu, max_iter, distance=B)


def default_projection_dim(problem, mu):
    """Projection dimension k of Theorem 2, with the constants as implemented.

    The k in ``1..d`` that minimizes :func:`jl_risk_bound` with the number of
    steps of Theorem 2 (``max_iter="optimal"``): the distortion term falls
    like ``1 / k`` and the noise term ``4 B G_k sqrt(k) / (n mu)`` grows like
    ``sqrt(k)``, so the minimizer is of order ``(n mu)**(2/3)`` (Theorem 2's
    ``(n epsilon)**(2/3)`` up to its constants), capped at d.

    Examples
    --------
    >>> from dp_glm_sklearn._objective import PublicProblem
    >>> from dp_glm_sklearn.losses import LogisticLoss
    >>> pb = PublicProblem(LogisticLoss(), 10000, 10000, 1.0, 1.0, 0.0, 10.0)
    >>> default_projection_dim(pb, mu=0.5)
    429
    """
    d = problem.n_features
    if mu == math.inf:
        return d

    def bound(k):
        return jl_risk_bound(problem, mu, k, max_iter="optimal")

    # The bound is unimodal in k: a geometric grid, then the integers around its best.
    grid = np.unique(np.clip(np.round(np.geomspace(1, d, 60)), 1, d).astype(int))
    i = int(np.argmin([bound(k) for k in grid]))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    candidates = np.unique(np.linspace(lo, hi, min(hi - lo + 1, 64)).astype(int))
    return int(min(candidates, key=bound))


# -- output perturbation (Algorithm 3, Theorems 3 and 5) ------------------------------
def global_lipschitz(problem):
    """Bound on every per-example gradient on all of R^p (not just the ball).

    Finite for losses with a bounded derivative (logistic, multinomial,
    Huber): ``sup |phi'| * X_aug``; ``inf`` for the squared loss.  The
    Lipschitz bound of output perturbation (Theorem 5) needs it because the
    noisy output leaves the ball.
    """
    xa = problem.augmented_norm
    return float(problem.loss.derivative_bound(math.inf, xa, problem.y_bound) * xa)


def _output_noise_scale(problem, mu):
    """``sigma * lambda`` of output perturbation: sigma is this over lambda."""
    sensitivity_times_l2 = 2.0 * problem.lipschitz / problem.n_samples * (
        1.0 + 2.0 * OPTIMIZATION_ACCURACY_RATIO)
    return sensitivity_times_l2 / mu


def _output_perturbation_terms(problem, mu):
    """``(a, c, e)``: the bound is ``lambda a + min(c / lambda**2, e / lambda)``."""
    B, K = problem.norm_bound, problem.n_outputs
    s = _output_noise_scale(problem, mu)
    a = B**2 / 2.0
    # Smooth: E[phi(z + <xi, x>)] - phi(z) <= h E||xi^T x||**2 / 2 <= H K sigma**2 / 2.
    c = problem.smoothness * K * s**2 / 2.0
    # Lipschitz: |phi(z + delta) - phi(z)| <= (G_glob / X_aug) ||delta||, and
    # E||xi^T x|| <= sqrt(K) sigma X_aug.
    e = global_lipschitz(problem) * math.sqrt(K) * s
    return a, c, e


def default_l2(problem, mu):
    """Regularization lambda of Theorem 3 (smooth) or 5 (Lipschitz), as implemented.

    The regularized minimizer is within ``lambda ||w*||**2 / 2 <= lambda B**2 / 2``
    of the best risk; the noise ``sigma = 2 G / (lambda n mu)`` (the
    sensitivity of SPEC 4.3 over mu) costs at most ``H K sigma**2 / 2`` (the
    loss is h-smooth in the score and ``<xi, x> ~ N(0, sigma**2 ||x||**2)``,
    whatever d is) or, for a loss with a bounded derivative,
    ``G_glob sqrt(K) sigma``.  Minimizing each sum over lambda:

    * smooth (Theorem 3): ``lambda = (2 H K s**2 / B**2)**(1/3)``, bound
      ``3 lambda B**2 / 4``;
    * Lipschitz (Theorem 5): ``lambda = sqrt(2 G_glob sqrt(K) s) / B``, bound
      ``lambda B**2``;

    with ``s = 2 G (1 + 2 r) / (n mu)`` (r the certified accuracy ratio).  The
    smaller bound wins.  Without noise (``mu = inf``) the best lambda is 0.

    Examples
    --------
    >>> from dp_glm_sklearn._objective import PublicProblem
    >>> from dp_glm_sklearn.losses import SquaredLoss
    >>> pb = PublicProblem(SquaredLoss(), 10000, 50, 1.0, 1.0, 1.0, 2.0)
    >>> round(default_l2(pb, mu=1.0), 4)
    0.0106
    """
    if mu == math.inf:
        return 0.0
    return _best_l2(problem, mu)[0]


def _best_l2(problem, mu):
    a, c, e = _output_perturbation_terms(problem, mu)
    options = []
    if c > 0:
        lam = (2.0 * c / a) ** (1.0 / 3.0)
        options.append((lam, 1.5 * a * lam))
    if np.isfinite(e) and e > 0:
        lam = math.sqrt(e / a)
        options.append((lam, 2.0 * a * lam))
    if not options:  # zero noise: any small lambda; no bound to trade against
        return 0.0, 0.0
    return min(options, key=lambda o: o[1])


def output_perturbation_risk_bound(problem, mu, l2=None):
    """Excess-risk bound of output perturbation with regularization ``l2``.

    ``lambda B**2 / 2 + min(H K sigma**2 / 2, G_glob sqrt(K) sigma)`` with
    ``sigma = 2 G (1 + 2 r) / (lambda n mu)`` (r the certified optimization
    accuracy ratio); ``l2=None`` uses :func:`default_l2`.  Dimension-free:
    for a GLM the noise acts only through ``<xi, x>``.
    """
    if mu == math.inf:
        return 0.0
    if l2 is None:
        return _best_l2(problem, mu)[1]
    a, c, e = _output_perturbation_terms(problem, mu)
    return float(a * l2 + min(c / l2**2, e / l2))


# -- the rule -------------------------------------------------------------------------
def risk_bounds(problem, epsilon, delta, *, max_iter=None, projection_dim=None, l2=None):
    """The three bounds at (epsilon, delta): ``{method: bound}``.

    ``max_iter``, ``projection_dim`` and ``l2`` are the estimator's settings
    (``None``: the defaults it would use: :func:`default_max_iter`,
    :func:`default_projection_dim`, :func:`default_l2`).
    """
    mu = gdp_mu(epsilon, delta)
    k = default_projection_dim(problem, mu) if projection_dim is None else int(projection_dim)
    k = min(k, problem.n_features)
    return {
        "noisy_gd": noisy_gd_risk_bound(problem, mu, max_iter),
        "jl": jl_risk_bound(problem, mu, k, max_iter),
        "output_perturbation": output_perturbation_risk_bound(problem, mu, l2),
    }


def choose_method(problem, epsilon, delta, *, max_iter=None, projection_dim=None, l2=None):
    """The mechanism with the smallest excess-risk bound (SPEC 4.4).

    Compares :func:`noisy_gd_risk_bound`, :func:`jl_risk_bound` and
    :func:`output_perturbation_risk_bound`, each with the noise as calibrated
    and the parameters the estimator will use (steps T, projection
    dimension k, regularization lambda).  The privacy terms reproduce Table 1
    of Arora et al. (2022): ``~ G B sqrt(d) / (n mu)`` for Noisy GD against
    ``~ (n mu)**(-2/3)`` for the dimension-free methods on smooth losses (so
    Noisy GD in low dimension, ``d < (n epsilon)**(2/3)`` roughly) and, for
    Lipschitz losses, ``~ G B / sqrt(n mu)`` for output perturbation (better
    than Noisy GD when ``epsilon < d / n`` roughly).  The optimization term
    ``H B**2 / (2 T)`` of gradient descent with a finite number of steps is
    included: output perturbation solves its problem to certified accuracy
    and has none.  Ties go to the earlier of noisy_gd, output_perturbation,
    jl.

    Parameters
    ----------
    problem : PublicProblem
        Public description of the problem (no data).
    epsilon, delta : float
        Target privacy of the fit (epsilon finite).
    max_iter, projection_dim, l2 : int, int, float or None, default=None
        The estimator's settings of T, k and lambda (``None``: its defaults).

    Returns
    -------
    method : {"noisy_gd", "jl", "output_perturbation"}

    Examples
    --------
    >>> from dp_glm_sklearn._objective import PublicProblem
    >>> from dp_glm_sklearn.losses import LogisticLoss
    >>> low = PublicProblem(LogisticLoss(), 100000, 10, 1.0, 1.0, 0.0, 2.0)
    >>> choose_method(low, 1.0, 1e-6, max_iter=1000)
    'noisy_gd'

    With the default number of steps (at most 100), Noisy GD's optimization
    term ``H B**2 / (2 T)`` dominates at this n, and the exactly solved
    output perturbation wins:

    >>> choose_method(low, 1.0, 1e-6)
    'output_perturbation'
    >>> high = PublicProblem(LogisticLoss(), 10000, 10000, 1.0, 1.0, 0.0, 10.0)
    >>> choose_method(high, 1.0, 1e-6, max_iter=1000)
    'output_perturbation'
    """
    bounds = risk_bounds(problem, epsilon, delta, max_iter=max_iter,
                         projection_dim=projection_dim, l2=l2)
    order = ("noisy_gd", "output_perturbation", "jl")
    return min(order, key=lambda m: (bounds[m], order.index(m)))
