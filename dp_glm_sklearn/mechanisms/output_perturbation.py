r"""Constrained regularized ERM + output perturbation (paper Algorithm 3, SPEC 4.3).

``w~ = argmin_{||w|| <= B} F_S(w)``, ``F_S(w) = L(w; S) + (lambda / 2) ||w||**2``;
the release is ``w_a + N(0, sigma**2 I)`` where ``w_a`` is the solver's
approximation of ``w~``, certified to satisfy ``||w_a - w~|| <= e`` with the
public accuracy ``e = r * 2 G / (lambda n)``, ``r = 1e-3``, or more where
floating-point rounding needs it (*Rounding* below).

Privacy proof
-------------
*Exact minimizers.* Let S, S' differ in record i (z_i replaced by z_i').
``F_S`` is lambda-strongly convex (L convex plus the regularizer); ``w~``
and ``w~'`` minimize ``F_S`` and ``F_S'`` over the ball C, so the
first-order conditions give ``<grad F_S(w~), w~' - w~> >= 0`` and
``<grad F_S'(w~'), w~ - w~'> >= 0``.  Adding the strong-monotonicity
inequality ``<grad F_S(w~') - grad F_S(w~), w~' - w~> >= lambda ||w~' - w~||**2``::

    lambda ||w~' - w~||**2 <= <grad F_S(w~') - grad F_S'(w~'), w~' - w~>
                            = (1/n) <grad l(w~'; z_i) - grad l(w~'; z_i'), w~' - w~>
                           <= (2 G / n) ||w~' - w~||,

because ``w~'`` lies in C, where every per-example gradient has norm at most
G (SPEC section 3).  So ``||w~ - w~'|| <= 2 G / (lambda n)``.

*Inexact solver.* For F lambda-strongly convex and L-smooth on C (here
``L = H + lambda``), the gradient mapping
``g(w) = L (w - Proj_C(w - grad F(w) / L))`` satisfies, for w in C,
``||w - w~|| <= (2 / lambda) ||g(w)||``.  Proof: with ``w+ = w - g(w)/L``,
smoothness (descent lemma between w and w+), strong convexity (between w
and any x in C) and the projection inequality
``<grad F(w) - g(w), x - w+> >= 0`` give, for every x in C,
``F(x) >= F(w+) + <g(w), x - w> + ||g(w)||**2 / (2L) + (lambda/2) ||x - w||**2``;
at ``x = w~`` the left side is at most ``F(w+)``, so
``(lambda/2) ||w - w~||**2 <= <g(w), w - w~> <= ||g(w)|| ||w - w~||``.
:func:`certified_minimizer` returns a point of C where the computed
``(2 / lambda) ||g|| <= e / 2``, or, if the certificate is not met, the
result of enough projected gradient steps from a point of C: one step with
step size ``1 / L`` contracts the distance to ``w~`` by ``1 - lambda / L``
(the map ``w -> w - grad F(w) / L`` of a lambda-strongly convex L-smooth F
is ``(1 - lambda/L)``-Lipschitz and the projection is 1-Lipschitz; ``w~`` is
its fixed point), so ``ceil(log(4 B / e) / -log(1 - lambda / L))`` steps
from distance ``<= 2B`` guarantee ``e / 2`` a priori in exact arithmetic.

*Rounding.* Computed in floats, the gradient mapping is within a public
``A`` (:func:`rounding_allowance`) of the exact one, and e is at least
``8 A / lambda``, i.e. ``A <= lambda e / 8`` (e is ``r`` times the main
term, raised where the floats need it).  A certificate met in floats then
gives ``||w_a - w~|| <= (2 / lambda) (lambda e / 4 + A) <= 3 e / 4``; the
steps' rounding, contracted like the distance, adds at most ``A / lambda
<= e / 8`` to the a-priori ``e / 2``.  (Without the floor a step that
rounded back to w certified any point within rounding of ``w~``: with a
Huber threshold of 1e-9, 1e5 rows, 10 features and unit bounds, the
certificate's tolerance ``lambda e / 4`` was 25 times below ``L u B``, the
rounding of one coordinate at the ball's radius; the floor would raise e
about 5000-fold there, beyond :data:`MAX_ACCURACY_RATIO`, so the method is
refused.)  The floor is active from about 1e7 rows (a pass's chain of
sequential additions), with a Huber threshold far below the residuals, or
with very many features at such n (a score's dot product).  Either way
``||w_a - w~|| <= e`` on *every* data set, hence on both neighbors, and

    ||w_a(S) - w_a(S')|| <= 2 G / (lambda n) + 2 e = Delta,

the sensitivity the Gaussian noise is calibrated to (SPEC section 2, one
release: ``sigma = Delta / mu``).

*No safety net needed.* The argument evaluates per-example gradients only
at ``w~'`` (in C), and the certificate and the steps use the gradient of the
true objective at points of C; on C the loss constants bound every
per-example gradient by G, so the solver uses unclipped gradients (clipping
would change the objective whose minimizer is certified).  Iterates of the
fast solver may leave C; only the returned point, in C, matters.

The number of solver iterations depends on the data and is not reported:
``n_iter`` is the public a-priori step bound.
"""

import math
import sys

import numpy as np

from .._objective import sequential_terms
from ..losses import SquaredLoss
from ..privacy.calibration import gaussian_sigma, gdp_mu
from ..privacy.events import GaussianEvent
from ..privacy.noise import add_gaussian_noise
from ._common import Calibration, project_ball
from ._solver import solve_constrained_erm
from .auto import OPTIMIZATION_ACCURACY_RATIO, default_l2

__all__ = [
    "calibrate_output_perturbation",
    "certified_minimizer",
    "guaranteed_steps",
    "output_perturbation",
]

#: Above this a-priori step bound, output perturbation is refused before the
#: charge: so many gradient passes could not finish.
MAX_GUARANTEED_STEPS = 10**15


def calibrate_output_perturbation(problem, epsilon, delta, l2=None):
    """Noise for output perturbation on ``problem`` at (epsilon, delta); reads no data.

    ``l2=None`` takes lambda from Theorem 3 (smooth losses) or Theorem 5
    (Lipschitz losses), whichever bound is smaller, with the constants as
    implemented (:func:`~.auto.default_l2`).  The sensitivity is
    ``2 G / (lambda n) + 2 e`` with ``e = 1e-3 * 2 G / (lambda n)`` the
    certified solver accuracy, or ``8 A / lambda`` where the rounding bound A
    (:func:`rounding_allowance`) needs more (module docstring, *Rounding*;
    refused beyond :data:`MAX_ACCURACY_RATIO` of the main term), and
    ``sigma = Delta / mu`` (one Gaussian release, SPEC section 2).

    Returns
    -------
    Calibration
        ``params`` holds ``l2``, ``accuracy`` (e), ``sensitivity`` and
        ``max_steps`` (the a-priori step bound).
    """
    mu = gdp_mu(epsilon, delta)
    lam = default_l2(problem, mu) if l2 is None else float(l2)
    if not lam > 0 and mu == math.inf:  # no noise: the regularizer is optional
        lam = 0.0
    elif not 0 < lam < math.inf:
        # (An infinite default, at bounds such as feature_norm=1e100 with
        # norm_bound=1e-100, would release the constant 0.)
        raise ValueError(
            f"l2_regularization must be > 0, got {l2!r}." if l2 is not None else
            f"The default l2_regularization of method='output_perturbation' is {lam} at "
            "these bounds (far apart scales); pass a finite l2_regularization > 0, or "
            "rescale the data so that the bounds are moderate.")
    if lam > 0:
        main = 2.0 * problem.lipschitz / (lam * problem.n_samples)
        nominal = OPTIMIZATION_ACCURACY_RATIO * main
        if main == math.inf:
            # Overflow (a subnormal l2_regularization such as 5e-324): the
            # noise would be infinite.
            raise ValueError(
                f"method='output_perturbation' with l2_regularization={lam:.3g} at these "
                "bounds has an infinite sensitivity 2 G / (l2_regularization n); pass a "
                "larger l2_regularization (or None for the default), or rescale the data "
                "so that the bounds are moderate.")
        if not nominal >= sys.float_info.min:
            # Underflow (l2_regularization=1e300 with feature_norm=1e-100): a
            # sensitivity of 0 would release the minimizer without noise as
            # if it revealed nothing, which its last bits need not; a
            # subnormal or zero accuracy (1e-3 of it) cannot be certified.
            raise ValueError(
                f"method='output_perturbation' with l2_regularization={lam:.3g} at these "
                "bounds has a sensitivity near or below the smallest normal float (far apart "
                "scales); pass a smaller l2_regularization, or rescale the data so that the "
                "bounds are moderate.")
        # Within 1e-3 of the main term, unless the floats cannot certify that
        # (module docstring, *Rounding*): n ~ 1e7 rows, or a tiny Huber threshold.
        floor = 8.0 * rounding_allowance(problem, lam) / lam
        if not floor <= MAX_ACCURACY_RATIO * main:
            raise ValueError(
                f"method='output_perturbation' cannot certify its solver's accuracy in "
                f"float64 at these bounds: rounding alone would take {floor / main:.3g} times "
                f"the sensitivity's main term (more than {MAX_ACCURACY_RATIO}). The ratio "
                "grows with n_samples and with how far apart the scales of feature_norm, "
                "norm_bound, y_bound, l2_regularization and (DPHuberRegressor) threshold "
                "are, e.g. a Huber threshold far below the label range. Use "
                "method='noisy_gd', or bounds of closer scales.")
        accuracy = max(nominal, floor)
        sensitivity = main + 2.0 * accuracy
    else:
        accuracy, sensitivity = 0.0, math.inf
    if mu == math.inf:
        sigma, event_mu = 0.0, math.inf
    else:
        # sigma is rounded up, so the noise drawn is at most mu-GDP: the event
        # records mu itself (recomputed from sigma, rounded up, it came out a
        # few units above mu, and privacy_spent_ one unit above epsilon at
        # epsilon ~ 1e15).
        sigma = gaussian_sigma(sensitivity, epsilon, delta)
        event_mu = mu
    max_steps = guaranteed_steps(problem, lam, accuracy)
    if max_steps > MAX_GUARANTEED_STEPS:
        # The certificate usually holds after a few steps, but when the
        # tolerance it needs is below the floats' resolution (a Huber
        # threshold of 1e-30) only the a-priori bound ends the loop.
        raise ValueError(
            f"method='output_perturbation' would need up to {max_steps:.3g} gradient steps "
            f"(more than {MAX_GUARANTEED_STEPS:.0e}) to certify its solver's accuracy at "
            f"these bounds (regularization {lam:.3g} against smoothness "
            f"{problem.smoothness:.3g}: a Huber threshold far below the residuals, or "
            "l2_regularization too small). Use method='noisy_gd', or a larger threshold "
            "or l2_regularization.")
    params = {
        "l2": lam,
        "accuracy": accuracy,
        "sensitivity": sensitivity,
        "max_steps": max_steps,
    }
    return Calibration(sigma=float(sigma),
                       events=(GaussianEvent(mu=float(event_mu), label="output_perturbation"),),
                       params=params)


#: The largest accuracy e, as a fraction of the sensitivity's main term
#: ``2 G / (lambda n)``, that the floats may force (the sensitivity is then at
#: most 1.1 times the main term; module docstring, *Rounding*); beyond it the
#: method is refused before the charge.
MAX_ACCURACY_RATIO = 0.05


def rounding_allowance(problem, l2):
    """A public bound on the floating-point error of the certificate's gradient mapping.

    ``||g_computed - g(w)||`` for any w in the ball, where g is the gradient
    mapping of the exact objective (module docstring, *Rounding*); u is the
    unit roundoff ``2**-53``, m the longest chain of sequential additions of
    a pass (:func:`~dp_glm_sklearn._objective.sequential_terms`), each bound
    doubled (for ``gamma_m = m u / (1 - m u)`` and the few operations
    around the sums):

    - the gradient sums per-example gradients whose norms average at most
      G: ``2 (m + 8) u G``;
    - a score's rounding, at most ``(d + 1) u X_aug B``, moves a per-example
      gradient by at most ``h X_aug`` times it: ``2 (d + 8) u H B``; with the
      squared loss's Gram matrix the products ``A^T A theta`` are summed in
      the long chain instead: ``2 (m + 8) u H B``;
    - the regularizer's gradient, ``2 u lambda B``;
    - the step ``L fl(Proj(w - g / L))``: the subtraction and the division
      (``u (B + 2 ||g|| / L)``) and the projection, within ``24 u`` times
      ``max(B, ||w - g / L||)`` of the exact one (:func:`_project_inside`):
      ``2 * 32 u (L B + G + lambda B)``, since ``||g|| <= G + lambda B``.

    Smaller sources are left to the factor 2 of each term: the loss
    derivatives' own rounding (``expit``, ``exp``, a softmax's pairwise
    sum over K classes: a few u relative each), clipping scales a few u
    relative above ``X / ||x||`` (G a few u larger), the Gram path's sums
    over quarter blocks (a shorter chain than m), and the certificate's own
    norm (relative error ``p u``, times ``tol``: it matters only beyond
    ``p ~ 1e14``).  Underflow is not modelled: the public bounds lie in
    [1e-100, 1e100] (:class:`~dp_glm_sklearn._objective.PublicProblem`).
    """
    u = _U
    B, G, H = problem.norm_bound, problem.lipschitz, problem.smoothness
    m = sequential_terms(problem)
    score_chain = m if isinstance(problem.loss, SquaredLoss) else problem.n_features
    gradient = 2.0 * u * ((m + 8) * G + (score_chain + 8) * H * B + l2 * B)
    step = 2.0 * 32.0 * u * ((H + l2) * B + G + l2 * B)
    return gradient + step


def guaranteed_steps(problem, l2, accuracy):
    """Projected gradient steps that bring any point of the ball within ``accuracy / 2``.

    ``ceil(log(4 B / accuracy) / -log(1 - lambda / L))`` with
    ``L = H + lambda``; 0 when ``lambda = 0`` (no guarantee is needed then:
    only the noiseless ``epsilon = inf`` case uses it).
    """
    if not (l2 > 0 and accuracy > 0):
        return 0
    L = problem.smoothness + l2
    rate = -math.log1p(-l2 / L) if l2 < L else math.inf
    steps = max(0.0, math.log(4.0 * problem.norm_bound / accuracy)) / rate
    return int(math.ceil(steps)) if math.isfinite(steps) else math.inf  # inf: refused


#: Unit roundoff of float64.
_U = 2.0**-53


def _project_inside(theta, radius):
    """The projection onto the ball ``||theta|| <= radius``, computed so that the
    result lies in the ball in exact arithmetic and within ``24 u radius`` of the
    exact projection, whatever the number p of coordinates.

    :func:`~._common.project_ball` takes the norm from a BLAS dot, whose error
    can grow like ``p u``; here the rounded squares are added exactly
    (``math.fsum``), so the norm is within ``2 u`` (relative), and the scale
    stops ``16 u`` short of the radius, which covers that and the rounding of
    the scaling.  (The certificate of :func:`certified_minimizer` needs its
    point in the ball, and its error independent of p.)
    """
    top = float(np.max(np.abs(theta))) if theta.size else 0.0
    if not 0.0 < top < math.inf:
        return project_ball(theta, radius)  # 0: inside; inf or NaN: the caller's to handle
    # Scaled by a power of two (exact) so that the squares neither overflow
    # (fsum raises on an intermediate overflow) nor underflow.
    e = math.frexp(top)[1]
    unit = np.ldexp(theta, -e)
    norm = math.sqrt(math.fsum(np.square(unit).ravel()))
    inside = radius * (1.0 - 16.0 * _U)
    try:
        limit = math.ldexp(inside, -e)
    except OverflowError:  # tiny theta, a large radius: inside
        limit = math.inf
    if norm <= limit:
        return theta
    return unit * (inside / norm)


def certified_minimizer(objective, l2, accuracy, max_steps):
    """A point ``w`` of the ball with ``||w - w~|| <= accuracy / 2`` (module docstring).

    Runs the accurate solver of :mod:`._solver`, then checks the
    gradient-mapping certificate at the point it will return; while the
    certificate fails, takes projected gradient steps (at most
    ``max_steps``, after which the a-priori contraction bound holds).
    ``accuracy = 0`` (no regularization, no noise) returns the solver's
    point.
    """
    problem = objective.problem
    radius = problem.norm_bound
    L = problem.smoothness + l2
    tol = l2 * accuracy / 4.0  # (2 / lambda) * ||g|| <= accuracy / 2
    theta, _ = solve_constrained_erm(objective, radius, l2=l2,
                                     tol=tol if tol > 0 else 1e-10)
    theta = _project_inside(theta, radius)
    if not np.all(np.isfinite(theta)):
        # The solver broke down (L-BFGS at gradients of 1e100); the a-priori
        # bound holds from any point of the ball, the centre among them.
        theta = np.zeros_like(theta)
    if not accuracy > 0:
        return theta
    for _ in range(max_steps):
        grad = objective.gradient(theta, clip=False) + l2 * theta
        step = _project_inside(theta - grad / L, radius)
        if L * np.linalg.norm(theta - step) <= tol:
            return theta
        theta = step
    return theta


def output_perturbation(objective, calibration, rng):
    """Release ``w_a + N(0, sigma**2 I)``; returns ``(theta, max_steps)``.

    ``w_a`` is :func:`certified_minimizer` of the lambda-regularized
    constrained risk; the noise is drawn by
    :func:`~dp_glm_sklearn.privacy.noise.add_gaussian_noise`.  The release
    is not projected back onto the ball, although that is free
    post-processing and never moves it away from a point of the ball in
    Euclidean distance: the projection shrinks the whole vector, the signal
    with the noise, and the risk goes by the distance in the directions the
    data use.  On ``benchmarks/rates.py --quick`` it raised output
    perturbation's excess risk 1.4-5x at d = 1000 (signal rank 5), while it
    helped a user trial's 13-feature model with a tiny ``l2_regularization``
    (R^2 -82 to -10).
    """
    p = calibration.params
    theta = certified_minimizer(objective, p["l2"], p["accuracy"], p["max_steps"])
    return add_gaussian_noise(theta, calibration.sigma, rng), p["max_steps"]
