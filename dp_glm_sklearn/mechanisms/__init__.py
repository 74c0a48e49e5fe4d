"""Training mechanisms: each turns a :class:`GLMObjective` into coefficients.

Every mechanism has two halves: ``calibrate`` (public quantities only: it
fixes the noise and states the privacy cost as events) and ``train`` (reads
the data, adds the noise through :mod:`dp_glm_sklearn.privacy.noise`).
"""

import numpy as np

from ..privacy.events import GaussianEvent
from ._common import Calibration
from ._solver import solve_constrained_erm
from .noisy_gd import calibrate_noisy_gd, noisy_gd

#: Public names accepted by the estimators' ``method`` parameter.
MECHANISMS = ("noisy_gd",)


def calibrate(method, problem, epsilon, delta, *, max_iter):
    """Calibrate ``method`` on ``problem`` at (epsilon, delta); no data read."""
    if method == "noisy_gd":
        return calibrate_noisy_gd(problem, epsilon, delta, max_iter)
    if method == "non_private":
        # epsilon = inf: no noise, no guarantee; the accountant is charged an
        # infinite cost, which only an infinite budget accepts.
        return Calibration(sigma=0.0, events=(GaussianEvent(mu=np.inf, label="non_private"),))
    raise ValueError(f"Unknown method {method!r}; expected one of {MECHANISMS}.")


def train(method, objective, calibration, rng):
    """Run ``method``; returns ``(theta, n_iter)``."""
    if method == "noisy_gd":
        return noisy_gd(objective, calibration, rng)
    if method == "non_private":
        return solve_constrained_erm(objective, objective.problem.norm_bound)
    raise ValueError(f"Unknown method {method!r}; expected one of {MECHANISMS}.")
