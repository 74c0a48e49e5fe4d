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

    First tries L-BFGS without the constraint (exact when the constraint is
    inactive); otherwise runs accelerated projected gradient (FISTA with
    adaptive restart) until the gradient mapping norm is below ``tol``.
    Returns ``(theta, n_iter)``.
    """
    shape = objective.problem.theta_shape

    def fun(flat):
        theta = flat.reshape(shape)
        value, grad = objective.value_and_gradient(theta)
        value = value + 0.5 * l2 * float(np.sum(theta**2))
        grad = grad + l2 * theta
        return value, grad.ravel()

    res = minimize(
        fun, np.zeros(np.prod(shape)), jac=True, method="L-BFGS-B",
        options={"maxiter": max_iter, "gtol": tol, "ftol": 0.0, "maxcor": LBFGS_PAIRS},
    )
    theta = res.x.reshape(shape)
    n_iter = int(res.nit)
    inside = np.linalg.norm(theta) <= radius
    if inside and gradient_mapping_norm(objective, theta, radius, l2) <= tol:
        return theta, n_iter
    return _fista(objective, project_ball(theta, radius), radius, l2, tol, max_iter, n_iter)


def _fista(objective, theta, radius, l2, tol, max_iter, n_iter):
    L = objective.problem.smoothness + l2
    y, t = theta.copy(), 1.0
    for it in range(max_iter):
        g = objective.gradient(y, clip=False) + l2 * y
        new = project_ball(y - g / L, radius)
        if np.linalg.norm(L * (y - new)) <= tol:
            return new, n_iter + it + 1
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        momentum = (t - 1.0) / t_new
        if np.sum((y - new) * (new - theta)) > 0:  # adaptive restart
            momentum, t_new = 0.0, 1.0
        y = new + momentum * (new - theta)
        theta, t = new, t_new
    return theta, n_iter + max_iter
