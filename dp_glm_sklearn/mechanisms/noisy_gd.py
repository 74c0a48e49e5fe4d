"""Noisy projected gradient descent (paper Algorithm 1, SPEC section 4.1)."""

import math

import numpy as np

from ..losses import HuberLoss, LogisticLoss, MultinomialLoss
from ..privacy.calibration import gaussian_sigma, gdp_mu
from ..privacy.events import GaussianEvent
from ..privacy.noise import add_gaussian_noise
from ._common import Calibration, project_ball

#: ``c`` in the number of momentum steps ``K = ceil(c (H R / (sigma sqrt(p)))**(2/3))``
#: (:func:`momentum_steps`); fitted on ``benchmarks/rates.py`` (1.0 to 2.0 all
#: within 1.3x of each other there).
MOMENTUM_CONSTANT = 1.5
#: Fewer momentum steps than this gain little and amplify the noise of the
#: first steps: the mechanism is then plain projected GD.
MIN_MOMENTUM_STEPS = 10


def default_max_iter(n_samples, mu, compute_capped=False, rate=0.1):
    """Default number of steps: ``T = clip(round(rate * n * mu), 5, cap)``.

    ``mu`` is the GDP parameter of the target (epsilon, delta). More steps
    reduce the optimization error but each step gets noise growing like
    ``sqrt(T)``; on the benchmark (``benchmarks/tune_max_iter.py``, diabetes
    and breast_cancer at epsilon 0.3..10) the best T grew like ``n * mu / 10``
    (``rate=0.1``, the squared and logistic losses).  The Huber loss takes
    twice as many (``rate=0.2``, see :func:`step_rule`).
    The cap is 100 steps: at large ``n * mu`` the noise is small and the
    steps are accelerated (:func:`momentum_steps`), but the fixed step
    ``1 / H`` is set by the worst-case curvature and real data are flatter,
    so the optimization error decides. Beyond 100 the rule no longer holds
    (linear regression at n = 2e4..1e5, d = 100: 1000 steps were often
    worse than 100), and ``max_iter`` buys the rest where the data are flat.

    ``compute_capped=True`` (the logistic losses, see :func:`default_steps`)
    lowers the cap to a compute budget, ``clip(5e6 / n, 50, 100)``: 100
    steps up to n = 50,000, then about 5 million per-example gradients in
    all, and never fewer than 50 steps. Each step is a full pass over X, so
    this keeps a logistic fit at about 2-2.5x the time of scikit-learn's
    non-private lbfgs for n = 1e5..1e6 with two threads (1.6-2.5x on the
    machines measured; ``benchmarks/speed.py``), at a price in accuracy: on
    ``benchmarks/rates.py`` at n = 1e5 (d = 100; 5 seeds) 100 steps have
    2-30x less excess risk than 50 on flat designs, and a data set twice as
    large can then give a worse model (n = 5e4 with 100 steps against 1e5
    with 50). Pass ``max_iter=100`` for the smaller optimization error.
    """
    cap = float(np.clip(5e6 / max(n_samples, 1), 50, 100)) if compute_capped else 100.0
    return int(np.clip(np.round(rate * n_samples * min(mu, 1e6)), 5, round(cap)))


def step_rule(loss):
    """``dict(compute_capped=..., rate=...)`` of :func:`default_max_iter` for ``loss``.

    The logistic and multinomial losses are compute-capped (below).  The
    Huber loss takes ``rate=0.2``: its per-example gradient is bounded by
    ``threshold * X_aug`` rather than least squares' ``(B X_aug + Y) X_aug``
    while its curvature bound is the same, so each step is less noisy next to
    the progress it makes, and twice the squared loss's steps did better
    on the benchmarks where the rule changes T (``benchmarks/README.md``, tune_max_iter
    section: diabetes, the utility protocol, 20 splits x 5 seeds, median
    R^2 0.246 / 0.388 / 0.463 at epsilon 0.3 / 1 / 3 with ``n mu / 10``
    against 0.259 / 0.425 / 0.469; ``benchmarks/rates.py``'s Huber design,
    median excess risk 0.44 / 0.070 / 0.34 against 0.34 / 0.040 / 0.15 at n =
    1000 / 3000 / 3000, d = 100 / 100 / 1000, epsilon 0.5).  For least
    squares the same doubling did worse there.
    """
    return dict(compute_capped=isinstance(loss, (LogisticLoss, MultinomialLoss)),
                rate=0.2 if isinstance(loss, HuberLoss) else 0.1)


def default_steps(problem, mu):
    """The default ``max_iter`` of ``problem`` at GDP parameter ``mu``.

    :func:`default_max_iter` with the loss's :func:`step_rule`:
    compute-capped for the logistic and
    multinomial losses only, where the time of a logistic fit is held to a small
    multiple of scikit-learn's lbfgs, while linear fits (one pass for the
    Gram matrix, then cheap steps, up to 256 parameters: 0.5-0.8x ``Ridge``
    at n >= 1e5, d = 100) and Huber fits (0.7x ``HuberRegressor`` with two
    threads, 0.8-1.3x with one) keep 100 steps (``benchmarks/speed.py``).  Depends on
    the loss, n and mu only, so the JL method's projected problem gets the
    same T.
    """
    return default_max_iter(problem.n_samples, mu, **step_rule(problem.loss))


def momentum_steps(problem, sigma, max_iter):
    """How many of the ``max_iter`` steps use momentum: a public schedule.

    Nesterov's method from 0 is within ``2 H r**2 / k**2`` of the optimum
    after k exact steps, but with noisy gradients the momentum carries every
    past noise forward and the error it accumulates grows like ``k p sigma**2
    / H`` (inexact-oracle analysis: Devolder, Glineur & Nesterov 2014; p
    coordinates, per-coordinate noise sigma).  The two balance at
    ``k ~ (H r / (sigma sqrt(p)))**(2/3)``, so with ``r = R``, the radius of
    the ball::

        K = ceil(MOMENTUM_CONSTANT * (H R / (sigma sqrt(p)))**(2/3)),

    capped at ``max_iter`` (all of them when ``sigma = 0``) and set to 0 when
    below :data:`MIN_MOMENTUM_STEPS`.  After K steps the momentum is dropped
    (a restart at a fixed, public step): plain projected GD, whose noise does
    not accumulate, continues from the accelerated point.  Everything here
    is public (the bounds, p, sigma, T), so the schedule reveals nothing.
    """
    if sigma == 0:
        return int(max_iter)
    p = int(np.prod(problem.theta_shape))
    ratio = problem.smoothness * problem.norm_bound / (sigma * math.sqrt(p))
    k = min(int(max_iter), math.ceil(MOMENTUM_CONSTANT * ratio ** (2.0 / 3.0)))
    return k if k >= MIN_MOMENTUM_STEPS else 0


def calibrate_noisy_gd(problem, epsilon, delta, max_iter):
    """Noise for ``max_iter`` full-batch steps on ``problem`` at (epsilon, delta).

    Each step releases the average gradient, whose replace-one L2-sensitivity
    is ``2 G / n`` (every per-example gradient has norm at most G on the
    constraint set, and the safety net enforces it).  The ``max_iter`` steps
    are an adaptive composition of Gaussian mechanisms, exactly
    ``mu``-GDP with ``mu = sqrt(T) * (2 G / n) / sigma``; sigma is chosen so
    that this ``mu`` is (epsilon, delta)-DP (SPEC section 2).  The number of
    momentum steps (:func:`momentum_steps`) is fixed here from public
    quantities; it does not enter the noise.
    """
    sensitivity = 2.0 * problem.lipschitz / problem.n_samples
    sigma = gaussian_sigma(sensitivity, epsilon, delta, n_compositions=max_iter)
    # sigma is rounded up from gdp_mu(epsilon, delta), so the steps are at most
    # that mu-GDP: the event records it (recomputed from sigma, rounded up, it
    # came out a few units above, and privacy_spent_ one unit above epsilon
    # at epsilon ~ 1e15).
    event = GaussianEvent(mu=gdp_mu(epsilon, delta), label="noisy_gd")
    return Calibration(
        sigma=float(sigma),
        events=(event,),
        params={"max_iter": int(max_iter), "sensitivity": sensitivity,
                "momentum_steps": momentum_steps(problem, sigma, max_iter)},
    )


def noisy_gd(objective, calibration, rng):
    """Run noisy projected GD, accelerated at first; return a suffix average.

    With the fixed step ``eta = 1 / H`` (H the public smoothness of the
    empirical risk), ``w_0 = w_{-1} = 0`` and, for ``t < T``::

        v_t     = Proj_B(w_t + beta_t (w_t - w_{t-1}))
        w_{t+1} = Proj_B(v_t - eta (grad L(v_t) + N(0, sigma^2 I)))

    with the momentum ``beta_t = t / (t + 3)`` (FISTA's schedule, Beck &
    Teboulle 2009; Chambolle & Dossal 2015) for ``t < K`` and ``beta_t = 0``
    from then on, K = ``calibration.params["momentum_steps"]``
    (:func:`momentum_steps`; absent or 0: plain projected GD, SPEC 4.1's
    recursion).  The extrapolated point is projected onto the ball before the
    gradient is queried, so every query point lies in the constraint set.
    The output averages the iterates ``w_{T/2+1} .. w_T`` (suffix averaging,
    Shamir & Zhang 2013) rather than all of them: the first steps from
    ``w_0 = 0`` are far from the optimum and averaging them in costs
    accuracy.

    Privacy is that of SPEC 4.1: step t releases one noisy average gradient
    at a point of the ball, chosen from earlier releases only, with noise of
    the calibrated sigma; the momentum (a public schedule), the projections
    and the choice of the averaged iterates are post-processing of those T
    releases.
    """
    problem = objective.problem
    T = calibration.params["max_iter"]
    K = calibration.params.get("momentum_steps", 0)
    # Public: may switch the squared loss to its Gram matrix (optional hook).
    getattr(objective, "expect_passes", lambda n_passes: None)(T)
    step = 1.0 / problem.smoothness
    radius = problem.norm_bound
    theta = np.zeros(problem.theta_shape)
    previous = theta
    average = np.zeros_like(theta)
    first_averaged = T // 2
    for t in range(T):
        query = theta
        if 0 < t < K:
            query = project_ball(theta + (t / (t + 3.0)) * (theta - previous), radius)
        noisy_grad = add_gaussian_noise(objective.gradient(query), calibration.sigma, rng)
        previous, theta = theta, project_ball(query - step * noisy_grad, radius)
        if t >= first_averaged:
            average += theta
    return average / (T - first_averaged), T
