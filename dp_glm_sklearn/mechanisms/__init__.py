"""Training mechanisms: each turns a :class:`GLMObjective` into coefficients.

Every mechanism has two halves: ``calibrate`` (public quantities only: it
fixes the noise and states the privacy cost as events) and ``train`` (reads
the data, adds the noise through :mod:`dp_glm_sklearn.privacy.noise`).

``"auto"`` is not a mechanism but a rule (:func:`.auto.choose_method`):
:func:`resolve` turns it into one of the three before calibration.
"""

import numpy as np

from .._objective import _N_GROUPS, _SPARSE_PARALLEL_ROWS
from ..privacy.events import GaussianEvent
from ._common import Calibration
from ._solver import LBFGS_PAIRS, solve_constrained_erm
from .auto import choose_method

# Aliases keep the package attributes ``jl``, ``noisy_gd`` and
# ``output_perturbation`` bound to the submodules, not to their functions.
from .jl import calibrate_jl, projection_density
from .jl import draw_public as _draw_public_jl
from .jl import jl as _train_jl
from .noisy_gd import calibrate_noisy_gd
from .noisy_gd import noisy_gd as _train_noisy_gd
from .output_perturbation import calibrate_output_perturbation
from .output_perturbation import output_perturbation as _train_output_perturbation

#: Public names accepted by the estimators' ``method`` parameter.
MECHANISMS = ("noisy_gd", "jl", "output_perturbation", "auto")


def resolve(method, problem, epsilon, delta, *, projection_dim=None):
    """The concrete mechanism for ``method`` (``"auto"``: :func:`.auto.choose_method`).

    ``epsilon = inf`` trains without noise whatever the method
    (``"non_private"``).  Reads no data.
    """
    if not np.isfinite(epsilon):
        return "non_private"
    if method == "auto":
        return choose_method(problem, epsilon, delta, projection_dim=projection_dim)
    if method not in MECHANISMS:
        raise ValueError(f"Unknown method {method!r}; expected one of {MECHANISMS}.")
    return method


def calibrate(method, problem, epsilon, delta, *, max_iter, projection_dim=None, l2=None):
    """Calibrate ``method`` on ``problem`` at (epsilon, delta); no data read."""
    if method == "noisy_gd":
        return calibrate_noisy_gd(problem, epsilon, delta, max_iter)
    if method == "jl":
        return calibrate_jl(problem, epsilon, delta, max_iter, projection_dim)
    if method == "output_perturbation":
        return calibrate_output_perturbation(problem, epsilon, delta, l2)
    if method == "non_private":
        # epsilon = inf: no noise, no guarantee; the accountant is charged an
        # infinite cost, which only an infinite budget accepts.
        return Calibration(sigma=0.0, events=(GaussianEvent(mu=np.inf, label="non_private"),))
    raise ValueError(f"Unknown method {method!r}; expected one of {MECHANISMS[:-1]} "
                     "(resolve 'auto' first).")


def draw_public(method, problem, calibration, rng, *, sparse=False):
    """``calibration`` with the data-independent randomness of ``method`` drawn.

    Called before the accountant is charged (JL's projection, whose size
    depends on n_features only, and for dense X, ``sparse=False``, its
    projected rows); the draws are those :func:`train` would make first, so
    the release is the same.  Other methods draw nothing here.
    """
    if method == "jl":
        return _draw_public_jl(problem, calibration, rng, sparse=sparse)
    return calibration


#: Vectors of theta's size a gradient pass or a step may hold at once: one
#: partial gradient per group of blocks, the iterates, the average, the noise
#: and temporaries.
_PASS_VECTORS = _N_GROUPS + 16

#: Vectors of n entries the objective holds or makes once (the row norms,
#: clipping scales, clipped and augmented norms, the exponents of huge rows).
_ROW_VECTORS = 6


def working_memory(method, problem, calibration, *, sparse=None):
    """Bytes of the largest arrays :func:`train` allocates, from public sizes only.

    An estimate (within a small factor) of what a fit needs beyond its data:
    the objective's vectors of n entries (norms and clipping scales of the
    rows), L-BFGS's ``2 * 30`` pairs and a few more vectors for output
    perturbation and the noiseless fit, the per-group partial gradients and
    the step's vectors for the gradient methods, and JL's projection (about
    ``max(16 d, k sqrt(d))`` non-zeros, drawn after the charge by a search's
    candidates) and its ``n x k`` projected rows for dense X
    (``sparse=False``); sparse X (``sparse=True``) is read through the
    projection instead, with a few n-vectors and, per group of blocks, a
    partial gradient of the coefficients' size on the rows (``(d + 1) K``).
    ``sparse=None`` (X's storage not known yet): the larger of the two.
    """
    p = int(np.prod(problem.theta_shape))
    rows_held = 8 * _ROW_VECTORS * problem.n_samples  # the objective's, every method
    if method in ("output_perturbation", "non_private"):
        return rows_held + 8 * (2 * LBFGS_PAIRS + 16) * p
    k, d = calibration.params.get("projection_dim"), problem.n_features
    if method != "jl" or k == d:  # (k = d: JL projects nothing, it is Noisy GD)
        return rows_held + 8 * _PASS_VECTORS * p
    projected = calibration.params["problem"]
    if sparse is None:
        return max(working_memory(method, problem, calibration, sparse=flag)
                   for flag in (False, True))
    nonzeros = k * d * projection_density(k, d, capped=False)
    n = problem.n_samples
    if sparse:
        # The projected norms and scales (n each), the coefficients on the
        # rows, their gradient (one partial per group of blocks) and its
        # image through Phi.
        groups = _N_GROUPS if n >= _SPARSE_PARALLEL_ROWS else 1
        rows = 4 * n + (groups + 3) * p
    else:
        rows = n * k
    return int(rows_held + 8 * (_PASS_VECTORS * np.prod(projected.theta_shape) + p
                                + rows + 3 * nonzeros))


def reserve_working_memory(method, problem, calibration, *, sparse=None, copies=1):
    """Raise :class:`MemoryError` now, before the charge, if :func:`working_memory`
    cannot be allocated ``copies`` times at once (fits running in parallel; the
    memory is taken and given back untouched)."""
    size = copies * working_memory(method, problem, calibration, sparse=sparse)
    try:
        np.empty(size, dtype=np.uint8)
    except (MemoryError, ValueError):  # (ValueError: beyond numpy's largest array)
        times = f" for each of {copies} fits running at once" if copies > 1 else ""
        raise MemoryError(
            f"method={method!r} needs about {size / copies / 2**30:.3g} GiB of working "
            f"memory for {problem.n_samples} samples and "
            f"{int(np.prod(problem.theta_shape))} coefficients{times}, which cannot be "
            "allocated; nothing was charged.") from None


def train(method, objective, calibration, rng):
    """Run ``method``; returns ``(theta, n_iter)``."""
    if method == "noisy_gd":
        return _train_noisy_gd(objective, calibration, rng)
    if method == "jl":
        return _train_jl(objective, calibration, rng)
    if method == "output_perturbation":
        return _train_output_perturbation(objective, calibration, rng)
    if method == "non_private":
        return solve_constrained_erm(objective, objective.problem.norm_bound)
    raise ValueError(f"Unknown method {method!r}; expected one of {MECHANISMS[:-1]} "
                     "(resolve 'auto' first).")
