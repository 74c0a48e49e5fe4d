"""Noisy projected gradient descent (paper Algorithm 1, SPEC section 4.1)."""

import numpy as np

from ..privacy.calibration import gaussian_sigma
from ..privacy.events import GaussianEvent
from ..privacy.noise import add_gaussian_noise
from ._common import Calibration, project_ball


def default_max_iter(n_samples, mu):
    """Default number of steps: ``T = clip(round(n * mu / 10), 5, cap(n))``.

    ``mu`` is the GDP parameter of the target (epsilon, delta). More steps
    reduce the optimization error but each step gets noise growing like
    ``sqrt(T)``; on the benchmark (``benchmarks/tune_max_iter.py``, diabetes
    and breast_cancer at epsilon 0.1..10) the best T grew like ``n * mu / 10``.

    The cap is a compute budget, ``cap(n) = clip(3e6 / n, 30, 100)``: 100
    steps up to n = 30,000, then about 3 million per-example gradients in
    all, and never fewer than 30 steps. Each step is a full pass over X, so
    this keeps a fit within about 2x of scikit-learn's non-private lbfgs
    for n = 1e5..1e6 (``benchmarks/speed.py``); at such n the noise is small
    and 30 steps reach about the accuracy of 100 (benchmarks/README.md).
    Pass ``max_iter`` to trade time for a smaller optimization error.
    """
    cap = float(np.clip(3e6 / max(n_samples, 1), 30, 100))
    return int(np.clip(np.round(n_samples * min(mu, 1e6) / 10.0), 5, round(cap)))


def calibrate_noisy_gd(problem, epsilon, delta, max_iter):
    """Noise for ``max_iter`` full-batch steps on ``problem`` at (epsilon, delta).

    Each step releases the average gradient, whose replace-one L2-sensitivity
    is ``2 G / n`` (every per-example gradient has norm at most G on the
    constraint set, and the safety net enforces it).  The ``max_iter`` steps
    are an adaptive composition of Gaussian mechanisms, exactly
    ``mu``-GDP with ``mu = sqrt(T) * (2 G / n) / sigma``; sigma is chosen so
    that this ``mu`` is (epsilon, delta)-DP (SPEC section 2).
    """
    sensitivity = 2.0 * problem.lipschitz / problem.n_samples
    sigma = gaussian_sigma(sensitivity, epsilon, delta, n_compositions=max_iter)
    mu = np.inf if sigma == 0 else np.sqrt(max_iter) * sensitivity / sigma
    event = GaussianEvent(mu=float(mu), label="noisy_gd")
    return Calibration(
        sigma=float(sigma),
        events=(event,),
        params={"max_iter": int(max_iter), "sensitivity": sensitivity},
    )


def noisy_gd(objective, calibration, rng):
    """Run noisy projected GD; return the average of the last half of the iterates.

    ``w_{t+1} = Proj_B(w_t - eta (grad L(w_t) + N(0, sigma^2 I)))`` with the
    fixed step ``eta = 1 / H`` (H the public smoothness of the empirical risk)
    and ``w_0 = 0``.  The output averages the iterates ``w_{T/2+1} .. w_T``
    (suffix averaging, Shamir & Zhang 2013) rather than all of them: the
    first steps from ``w_0 = 0`` are far from the optimum and averaging them
    in costs accuracy.  Which iterates are averaged is post-processing of the
    released noisy gradients, so privacy is unchanged.
    """
    problem = objective.problem
    T = calibration.params["max_iter"]
    step = 1.0 / problem.smoothness
    theta = np.zeros(problem.theta_shape)
    average = np.zeros_like(theta)
    first_averaged = T // 2
    for t in range(T):
        noisy_grad = add_gaussian_noise(objective.gradient(theta), calibration.sigma, rng)
        theta = project_ball(theta - step * noisy_grad, problem.norm_bound)
        if t >= first_averaged:
            average += theta
    return average / (T - first_averaged), T
