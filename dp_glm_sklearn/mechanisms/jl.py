"""JL projection + noisy GD (paper Algorithm 2, SPEC section 4.2).

Draw a data-independent ``Phi`` in R^{k x d}, map every (clipped) row x to
``Phi x``, clip the projected rows to ``(1 + alpha) X``, run noisy projected GD
(:func:`~dp_glm_sklearn.mechanisms.noisy_gd.noisy_gd`) in R^k with
constraint radius 2B and output ``w = Phi^T w_k`` (not projected: its norm
may exceed B, as the paper notes).

Privacy: Phi does not depend on the data, so the mechanism is noisy GD on
the data set ``{(clip(Phi x_i), y_i)}``, where replacing one record of S
replaces one projected record.  Every projected row has norm at most
``(1 + alpha) X`` *by clipping* (the JL norm guarantee holds only with high
probability; the clipping makes the proof exact), so the calibration of
noisy GD on the projected public problem (:func:`~.auto.jl_problem`) applies
verbatim; ``Phi^T`` is post-processing.

No projection when ``k >= d``: a k x d projection with k >= d reduces no
dimension and only adds distortion (and the radius 2B, and rows clipped at
``(1 + alpha) X``).  The identity is a data-independent map too, so the JL
method with ``k = d`` is Noisy GD (Algorithm 1) on the original problem, with
that calibration; the default k (Theorem 2's bound, minimized over ``1..d``)
is d exactly when no projection has a smaller bound than Noisy GD's.

Memory: the projection is Gaussian (a dense k x d matrix) when ``k d`` is
at most 2**22 entries (32 MB), and otherwise a sparse random projection with
about 16 non-zeros per column (``O(d)`` memory).  The choice depends on the
sizes only, not on how X is stored, so dense and sparse X give the same
projection and noise, and models equal up to floating-point rounding (the
sums run in another order: measured up to 5e-13 relative).
Dense X is projected once into a dense n x k array (smaller than X, since
k < d), allocated before the charge (:func:`draw_public`) and filled by row
blocks.  Sparse X is never projected as a whole: each pass reads it with the
coefficients ``Phi^T w`` (:class:`ProjectedObjective`), in O(n + d) memory
beyond X and Phi (and per-thread partial gradients of the model's size),
where an n x k array would take ``8 n k`` bytes (11 GB for n = 1e6,
k = 1408) and a pass over it n k operations.  No n x d dense
array is ever formed.
"""

import math
from dataclasses import replace

import numpy as np
import scipy.sparse as sp
from sklearn.random_projection import GaussianRandomProjection

from .._objective import GLMObjective, clip_scales, tame_exponents_and_norms, tamed_block
from ..privacy.calibration import gdp_mu
from ._common import Calibration
from .auto import jl_distortion, jl_problem, projection_dim_used
from .noisy_gd import calibrate_noisy_gd, noisy_gd

__all__ = ["ProjectedObjective", "calibrate_jl", "draw_projection", "jl", "project_rows"]

# Largest dense Gaussian projection (k * d entries, 32 MB); above it the
# projection is sparse.
_MAX_DENSE_ENTRIES = 2**22
# A sparse projection puts about this many non-zeros in each column (at least),
# so that sparse rows (a few large entries) keep their norm: the relative
# variance of ||Phi x||**2 is about 2 / k + sum_j x_j**4 / (||x||**4 density k).
_MIN_NONZEROS_PER_COLUMN = 16
# Rows per block when projecting: temporaries stay near 4 MB.
_BLOCK_BYTES = 4 * 2**20


def calibrate_jl(problem, epsilon, delta, max_iter, projection_dim=None):
    """Noise for the JL method on ``problem`` at (epsilon, delta); reads no data.

    ``projection_dim=None`` takes k from Theorem 2 with the constants as
    implemented (:func:`~.auto.default_projection_dim`); k is capped at d,
    and ``k = d`` means no projection: the calibration of Noisy GD on
    ``problem`` itself (module docstring).
    The calibration is that of noisy GD with ``max_iter`` steps on the
    projected public problem (:func:`~.auto.jl_problem`): sensitivity
    ``2 G_k / n`` with ``G_k`` the gradient bound for rows of norm
    ``(1 + alpha) X`` on the ball of radius 2B.

    Returns
    -------
    Calibration
        ``params`` holds ``projection_dim``, ``alpha``, ``max_iter``,
        ``sensitivity`` and the projected ``problem``.
    """
    if projection_dim is not None and not 1 <= int(projection_dim):
        raise ValueError(f"projection_dim must be an integer >= 1, got {projection_dim!r}.")
    k = projection_dim_used(problem, gdp_mu(epsilon, delta), projection_dim)
    if k == problem.n_features:
        projected, alpha = problem, 0.0
    else:
        projected, alpha = jl_problem(problem, k), jl_distortion(problem.n_samples, k)
    inner = calibrate_noisy_gd(projected, epsilon, delta, max_iter)
    (event,) = inner.events
    params = dict(inner.params, projection_dim=k, alpha=alpha, problem=projected)
    return Calibration(sigma=inner.sigma, events=(replace(event, label="jl"),), params=params)


def projection_density(k, d, capped=True):
    """The sparse projection's share of non-zero entries, ``max(1 / sqrt(d), 16 / k)``
    (capped at 1 unless ``capped=False``)."""
    density = max(1.0 / np.sqrt(d), _MIN_NONZEROS_PER_COLUMN / k)
    return min(1.0, density) if capped else density


def draw_projection(projection_dim, n_features, rng, sparse):
    """A random ``k x d`` JL matrix.

    Gaussian (``N(0, 1/k)`` entries, dense, from
    :class:`sklearn.random_projection.GaussianRandomProjection`) or sparse
    (Achlioptas / Li et al.: independent entries, ``+-1 / sqrt(density k)``
    with probability ``density / 2`` each and 0 otherwise, CSR) with
    ``density = max(1 / sqrt(d), 16 / k)`` capped at 1.  Data-independent:
    it depends only on the sizes and on ``rng``.

    The sparse matrix is drawn here row by row (a binomial count, then that
    many distinct columns), in memory proportional to its non-zeros, about
    16 d.  scikit-learn's ``SparseRandomProjection`` draws the same law but
    took 7 GB and 30 s for d = 1e6, k = 890 (1.5 s and 0.45 GB here).
    """
    k, d = int(projection_dim), int(n_features)
    seed = int(rng.integers(np.iinfo(np.int32).max))
    if not sparse:
        shape_only = sp.csr_matrix((1, d))  # fit reads nothing but n_features
        return GaussianRandomProjection(k, random_state=seed).fit(shape_only).components_
    density = projection_density(k, d)
    draw = np.random.default_rng(seed)
    counts = draw.binomial(d, density, size=k)
    index_type = np.int32 if max(d, counts.sum()) <= np.iinfo(np.int32).max else np.int64
    indptr = np.zeros(k + 1, dtype=index_type)  # one type: scipy would copy to unify
    np.cumsum(counts, out=indptr[1:])
    indices = np.empty(indptr[-1], dtype=index_type)
    for row, count in enumerate(counts):
        indices[indptr[row]:indptr[row + 1]] = np.sort(draw.choice(d, count, replace=False))
    data = draw.integers(0, 2, size=indptr[-1]) * 2.0 - 1.0
    data /= np.sqrt(density * k)
    return sp.csr_matrix((data, indices, indptr), shape=(k, d))


def draw_public(problem, calibration, rng, sparse=False):
    """The calibration with JL's projection drawn (``params["projection"]``)
    and, for dense X (``sparse=False``), the n x k array of projected rows
    allocated (``workspace["projected_rows"]``).

    The projection is data-independent, so it is drawn before the
    accountant is charged: one too large for memory (a hashed d of 2**22
    and more) then fails with nothing spent.  It is the first draw
    :func:`jl` makes from ``rng``, so drawing it here changes no output.
    (A search's candidates draw theirs after the search's one charge: their
    seeds come after it.)

    A sparse Phi is stored as CSC: its transpose, the CSR ``d x k`` matrix
    that :func:`project_rows` multiplies by and the output ``Phi^T w_k``
    reads, is then a view, so the one copy sized by d (the conversion) is
    made here, before the charge, not after it.

    Dense X is projected into an n x k array, a function of the public
    sizes, so it is taken here too.  Sparse X is never projected as a whole
    (:class:`ProjectedObjective`).
    """
    k, d = calibration.params["projection_dim"], problem.n_features
    if k == d:
        return calibration
    phi = draw_projection(k, d, rng, sparse=k * d > _MAX_DENSE_ENTRIES)
    if sp.issparse(phi):
        phi = phi.tocsc()
    calibration = replace(calibration, params={**calibration.params, "projection": phi})
    if sparse:
        return calibration
    rows = np.empty((problem.n_samples, k))
    return replace(calibration, workspace={**calibration.workspace, "projected_rows": rows})


def project_rows(X, phi, feature_norm, out=None):
    """``diag(s) X Phi^T`` with ``s_i = min(1, X / ||x_i||)`` (rows clipped first).

    Returns a dense ``n x k`` array, ``out`` if given (else a new one), for
    dense and sparse X alike (:func:`jl` itself projects dense X only; sparse
    X goes through :class:`ProjectedObjective`).  Works on row blocks, so
    temporaries stay small.

    Nothing overflows: huge rows are tamed block by block
    (:func:`~.._objective.tame_exponents_and_norms`), so the row norms (taken
    in float64, as by the objective, also for float32 X) and the entries of
    ``X Phi^T`` (computed in float64, before the scale) are finite.
    """
    exponents, norms = tame_exponents_and_norms(X, feature_norm)
    scale = clip_scales(norms, feature_norm)
    if out is None:
        out = np.empty((X.shape[0], phi.shape[0]))
    for rows, prod in _projected_blocks(X, exponents, phi):
        out[rows] = prod * scale[rows, None]
    return out


def _projected_blocks(X, exponents, phi):
    """``(rows, X[rows] Phi^T)`` by row blocks (X's huge rows tamed; float64, dense).

    Phi is transposed once, in the format the products want (not once per
    block): a view for the CSC Phi of :func:`draw_public`, a local copy for
    a CSR one.  A block of output (and, for dense X, of X) is about 4 MB.
    """
    n, d = X.shape
    k = phi.shape[0]
    phi_t = phi.T.tocsr() if sp.issparse(phi) else phi.T
    block = max(1, _BLOCK_BYTES // (8 * (k if sp.issparse(X) else max(d, k))))
    for start in range(0, n, block):
        rows = slice(start, min(start + block, n))
        prod = tamed_block(X, exponents, rows) @ phi_t
        yield rows, prod.toarray() if sp.issparse(prod) else np.asarray(prod)


class ProjectedObjective(GLMObjective):
    """:class:`GLMObjective` on the projected rows ``r_i s_i Phi x_i``, never formed.

    ``s_i = min(1, X / ||x_i||)`` clips the original row, ``r_i`` clips the
    projected one to the projected problem's feature norm ``(1 + alpha) X``
    (its norm raised by a rounding bound, see ``_clipping``):
    the same data set as :func:`project_rows` gives, so the same mechanism
    and the same privacy proof.  By linearity a score is
    ``r_i s_i <x_i, Phi^T w>`` and the gradient's row part is
    ``Phi (sum_i D_i r_i s_i x_i)``: each pass reads the stored X with the
    coefficients ``Phi^T w`` (a vector of size d) and maps the summed
    gradient back through Phi once, instead of reading an n x k array.  For
    sparse X this takes a few n-vectors and one ``(d + 1) x K`` partial
    gradient per group of blocks instead of ``8 n k`` bytes, and a pass
    costs X's non-zeros and Phi's twice instead of n k.  The projected norms
    ``||s_i Phi x_i||`` are computed once, block by block, at construction.
    (Dense X keeps :func:`project_rows`: its n x k rows are smaller than X,
    and a pass over them is cheaper than one over X.)
    """

    def __init__(self, problem, X, y, phi, feature_norm):
        # phi: k x d; its transpose maps w to the coefficients on the rows.
        self._phi, self._original_norm = phi, float(feature_norm)
        super().__init__(problem, X, y)
        # The Gram matrix would be of the stored rows (d x d), not in theta's
        # coordinates (k): the path is off.
        self._gram_ok = self._gram_larger_ok = False

    def _clipping(self, X):
        exponents, norms = tame_exponents_and_norms(X, self._original_norm)
        first = clip_scales(norms, self._original_norm)
        projected = np.empty(X.shape[0])
        for rows, prod in _projected_blocks(X, exponents, self._phi):
            projected[rows] = np.sqrt(np.einsum("ij,ij->i", prod, prod))
        projected *= first
        second = clip_scales(projected, self.problem.feature_norm)
        # The kernel's safety net reads these norms, but a record's gradient
        # is computed as Phi (x_i c_i), summed in another order than x_i Phi^T
        # (measured 10 ulps above G).  Each computed vector is within
        # gamma_m || |Phi| |x_i| || <= m u ||Phi||_F ||x_i|| |c_i| of the exact
        # one (m <= d the row's non-zeros; Higham 2002, section 3.5), so their
        # norms differ by at most twice that, and ||x_i|| s_i r_i is at most the
        # projected bound.  The norms are raised by that relative bound (with
        # a factor 2 to spare; ||Phi||_F, about sqrt(d), is public): about
        # 1e-10 at d = 4000, 1e-6 at d = 1e6, so the net holds.
        d = X.shape[1]
        phi = self._phi
        entries = phi.data if sp.issparse(phi) else phi
        frobenius = math.sqrt(float(np.vdot(entries, entries)))  # (no copy; to ~nnz u)
        slack = 1.0 + 4.0 * 2.0**-53 * d * frobenius
        return exponents, first * second, second * projected * slack

    def _on_rows(self, theta):
        return _back_through(self._phi, theta)

    def _from_rows(self, grad):
        k, d = self._phi.shape
        out = np.empty((k + grad.shape[0] - d,) + grad.shape[1:])
        out[:k] = np.asarray(self._phi @ grad[:d])
        out[k:] = grad[d:]
        return out


def jl(objective, calibration, rng):
    """Run the JL method; return ``(theta, n_iter)`` in the original coordinates.

    Draws Phi (unless :func:`draw_public` did, before the charge), and runs
    :func:`~dp_glm_sklearn.mechanisms.noisy_gd.noisy_gd` on the clipped
    rows projected (dense X: :func:`project_rows`; sparse X: read through
    Phi, :class:`ProjectedObjective`), an objective of the projected public
    problem whose kernel clips the projected rows to ``(1 + alpha) X``.  The
    output is
    ``theta = [Phi^T w_k ; w_intercept]``.  With ``k = d`` there is no
    projection: this is :func:`noisy_gd` on ``objective``.
    """
    problem = objective.problem
    params = calibration.params
    k, d = params["projection_dim"], problem.n_features
    if k == d:
        return noisy_gd(objective, calibration, rng)
    sparse = sp.issparse(objective.X)
    if "projection" not in params:
        calibration = draw_public(problem, calibration, rng, sparse=sparse)
        params = calibration.params
    phi = params["projection"]
    if sparse:
        projected = ProjectedObjective(params["problem"], objective.X, objective.y, phi,
                                       problem.feature_norm)
    else:
        projected = GLMObjective(params["problem"],
                                 project_rows(objective.X, phi, problem.feature_norm,
                                              out=calibration.workspace.get("projected_rows")),
                                 objective.y)
    theta_k, n_iter = noisy_gd(projected, calibration, rng)
    return _back_through(phi, theta_k), n_iter


def _back_through(phi, theta_k):
    """``[Phi^T w_k ; w_intercept]``: coefficients in R^k (and an intercept row)
    as they act on the original d features."""
    k, d = phi.shape
    theta = np.empty((d + theta_k.shape[0] - k,) + theta_k.shape[1:])
    theta[:d] = np.asarray(phi.T @ theta_k[:k])
    theta[d:] = theta_k[k:]
    return theta
