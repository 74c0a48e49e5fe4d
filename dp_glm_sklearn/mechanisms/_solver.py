"""Accurate solver for the constrained (optionally L2-regularized) ERM.

Used without noise for ``epsilon=np.inf`` and, in output perturbation, as the
optimizer whose inexactness is certified (SPEC section 4.3).
"""

import numpy as np
from scipy.optimize import minimize

from ._common import project_ball


def gradient_mapping_norm(objective, theta, radius, l2=0.0):
    """``||L (theta - Proj(theta - grad F(theta) / L))||`` with L the smoothness.

    Zero exactly at the constrained minimizer of ``F = risk + l2/2 ||theta||^2``.
    """
    L = objective.problem.smoothness + l2
    g = objective.gradient(theta, clip=False) + l2 * theta
    return float(L * np.linalg.norm(theta - project_ball(theta - g / L, radius)))


#: Pairs of vectors L-BFGS keeps (its ``maxcor``); also sizes the working
#: memory reserved before the charge (:func:`..mechanisms.working_memory`).
LBFGS_PAIRS = 30


def solve_constrained_erm(objective, radius, l2=0.0, tol=1e-10, max_iter=20000):
    """Minimize ``risk(theta) + l2/2 ||theta||^2`` over ``||theta|| <= radius``.

    The minimizer is the unconstrained minimizer ``theta(m)`` of
    ``risk + m/2 ||theta||^2`` for the multiplier ``m = l2`` when it lies in
    the ball, else for the ``m > l2`` with ``||theta(m)|| = radius`` (KKT);
    ``||theta(m)||`` decreases in m and is at most ``||grad risk(0)|| / m``.
    First L-BFGS at ``m = l2`` from 0: a point in the ball is the answer
    (FISTA polishes it where L-BFGS stalled short of ``tol`` from rounding).
    That L-BFGS is given up as soon as an iterate is ``_FAR`` radii from 0
    (the constraint is then almost surely active; without a minimizer, on
    separable data, it crawled for 14,634 iterations).  Otherwise
    :func:`_multiplier_path` finds the m with ``||theta(m)|| = radius`` by
    warm-started L-BFGS, and accelerated projected gradient (FISTA with
    adaptive restart; ``max_iter`` steps of its own) finishes if its point
    does not yet have a gradient mapping norm below ``tol``.  Returns
    ``(theta, n_iter)``, n_iter counting L-BFGS's evaluations and FISTA's
    steps (the multiplier path runs on what the first L-BFGS left of
    ``max_iter`` evaluations; the certificate's own gradients are not
    counted).
    """
    theta, n_iter = _lbfgs(objective, l2, np.zeros(objective.problem.theta_shape), tol,
                           max_iter, give_up=_FAR * radius)
    outside = None
    if theta is not None:
        if not np.linalg.norm(theta) <= radius:
            outside = theta if np.all(np.isfinite(theta)) else None
        elif gradient_mapping_norm(objective, theta, radius, l2) <= tol:
            return theta, n_iter
        else:  # inside, where L-BFGS stalled short of tol (rounding): FISTA finishes
            return _fista(objective, theta, radius, l2, tol, max_iter, n_iter)
    theta, used = _multiplier_path(objective, radius, l2, tol, max(max_iter - n_iter, 1),
                                   outside)
    n_iter += used
    if gradient_mapping_norm(objective, theta, radius, l2) <= tol:
        return theta, n_iter
    return _fista(objective, project_ball(theta, radius), radius, l2, tol, max_iter, n_iter)


#: The first, unconstrained L-BFGS gives up beyond this many radii from 0.
_FAR = 2.0


class _GaveUp(Exception):
    """An L-BFGS iterate went beyond ``give_up``; carries the evaluations made."""

    def __init__(self, evaluations):
        super().__init__()
        self.evaluations = evaluations


def _lbfgs(objective, m, theta0, tol, max_iter, give_up=None):
    """Unconstrained L-BFGS on ``risk + m/2 ||theta||^2`` from ``theta0``.

    Returns ``(theta, evaluations)`` (passes over the data), or ``(None,
    evaluations)`` if a point with norm above ``give_up`` was evaluated.
    """
    shape = theta0.shape
    evaluations = 0

    def fun(flat):
        nonlocal evaluations
        evaluations += 1
        theta = flat.reshape(shape)
        if give_up is not None and not np.linalg.norm(theta) <= give_up:
            raise _GaveUp(evaluations)
        value, grad = objective.value_and_gradient(theta)
        value = value + 0.5 * m * float(np.sum(theta**2))
        grad = grad + m * theta
        return value, grad.ravel()

    try:
        res = minimize(
            fun, theta0.ravel(), jac=True, method="L-BFGS-B",
            options={"maxiter": max(max_iter, 1), "gtol": tol, "ftol": 0.0,
                     "maxcor": LBFGS_PAIRS},
        )
    except _GaveUp as stop:
        return None, stop.evaluations
    return res.x.reshape(shape), evaluations


def _multiplier_path(objective, radius, l2, tol, max_iter, outside=None):
    """A point near the constrained minimizer (see :func:`solve_constrained_erm`).

    Starts at ``m = ||grad risk(0)|| / radius`` (inside the ball).  Given
    ``outside``, the minimizer at ``m = l2``, outside the ball, the two
    bracket the multiplier; otherwise m is divided by 10, down to l2, until
    ``theta(m)`` leaves the ball or is the minimizer.  The bracket closes by
    a secant on ``1/||theta(m)||`` (nearly linear in m; Illinois rule,
    bisection where the secant leaves the bracket).  Starting near the sphere
    avoids the unconstrained problem, which has no minimizer on separable
    data.  Returns ``(theta, n_iter)``; the caller certifies theta.
    """
    shape = objective.problem.theta_shape
    zero = np.zeros(shape)
    top = float(np.linalg.norm(objective.gradient(zero, clip=False))) / radius
    if not np.isfinite(top):
        return zero, 0
    m = max(top, l2)
    theta, n_iter = _lbfgs(objective, m, zero, tol, max_iter)
    if outside is not None and m > l2:
        return _secant(objective, radius, l2, tol, max_iter, n_iter, (l2, outside), (m, theta))
    while m > l2 and n_iter < max_iter:
        if gradient_mapping_norm(objective, theta, radius, l2) <= tol:
            return theta, n_iter
        low = m / 10.0
        if (low - l2) * radius <= tol / 2:
            # theta(low) and theta(l2) differ in gradient by at most
            # (low - l2) radius inside the ball: the last step is to l2.
            low = l2
        cand, used = _lbfgs(objective, low, theta, tol, max_iter - n_iter)
        n_iter += used
        if not np.linalg.norm(cand) <= radius:
            return _secant(objective, radius, l2, tol, max_iter, n_iter,
                           (low, cand), (m, theta))
        m, theta = low, cand
    return theta, n_iter


#: The secant stops within this relative distance of the sphere, or after
#: this many steps; FISTA then finishes from the projected point.
_SPHERE_RTOL = 1e-10
_SECANT_STEPS = 30


def _secant(objective, radius, l2, tol, max_iter, n_iter, outside, inside):
    """Close the bracket ``(m, theta(m))`` outside / inside the ball."""
    (lo, theta_lo), (hi, theta_hi) = outside, inside

    def gap(theta):  # < 0 outside the ball, >= 0 inside
        return 1.0 / np.linalg.norm(theta) - 1.0 / radius

    h_lo, h_hi = gap(theta_lo), gap(theta_hi)
    best, side = theta_lo, 0
    for _ in range(_SECANT_STEPS):
        if n_iter >= max_iter:
            break
        m = lo + (hi - lo) * (-h_lo) / (h_hi - h_lo)
        if not lo < m < hi:
            m = 0.5 * (lo + hi)
        start = theta_lo if -h_lo < h_hi else theta_hi
        best, used = _lbfgs(objective, m, start, tol, max_iter - n_iter)
        n_iter += used
        h = gap(best)
        point = project_ball(best, radius)
        if gradient_mapping_norm(objective, point, radius, l2) <= tol:
            return point, n_iter
        if np.array_equal(best, start) or not abs(h) * radius > _SPHERE_RTOL:
            break  # on the sphere to L-BFGS's accuracy: FISTA finishes
        if h < 0:
            lo, h_lo, theta_lo = m, h, best
            if side < 0:
                h_hi /= 2.0  # Illinois: the inside end was kept twice
            side = -1
        else:
            hi, h_hi, theta_hi = m, h, best
            if side > 0:
                h_lo /= 2.0
            side = 1
    return project_ball(best, radius), n_iter


def _fista(objective, theta, radius, l2, tol, max_iter, n_iter):
    L = objective.problem.smoothness + l2
    y, t = theta.copy(), 1.0
    for it in range(max_iter):
        g = objective.gradient(y, clip=False) + l2 * y
        new = project_ball(y - g / L, radius)
        # The test is the certificate at y (maybe outside the ball); new is
        # returned only if it holds there too.
        if np.linalg.norm(L * (y - new)) <= tol and gradient_mapping_norm(
                objective, new, radius, l2) <= tol:
            return new, n_iter + it + 1
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        momentum = (t - 1.0) / t_new
        if np.sum((y - new) * (new - theta)) > 0:  # adaptive restart
            momentum, t_new = 0.0, 1.0
        y = new + momentum * (new - theta)
        theta, t = new, t_new
    return theta, n_iter + max_iter
