"""The training problem: public constants apart from the data that uses them.

:class:`PublicProblem` holds everything a mechanism may look at *before* it
touches data (n, d, the loss, the public bounds) and derives the constants of
SPEC section 3 from them.  :class:`GLMObjective` adds the clipped data and is
the only code that reads X during training: every full-batch gradient is a
sum of :meth:`GLMObjective.block_grad` over row blocks (SPEC section 10: the
same kernel maps over the chunks of a distributed array).

Parameters are a matrix ``theta`` of shape ``(d + 1, K)`` when an intercept
is fitted (last row: the coefficient of the constant public feature ``c``)
and ``(d, K)`` otherwise.
"""

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.utils.extmath import row_norms
from threadpoolctl import ThreadpoolController

try:  # threadpoolctl >= 3.6 tracks which thread controls OpenBLAS
    from threadpoolctl import OpenBLASController
except ImportError:  # pragma: no cover
    OpenBLASController = None

from .losses import SquaredLoss

# Rows per block of the gradient kernel.  A dense block of about 2 MB stays in
# cache between the two products ``X_b @ W`` and ``X_b.T @ D``, so each step
# reads X from memory once; smaller blocks cost more in Python overhead than
# they gain in cache (benchmarks/speed.py).  Sparse blocks have a fixed number
# of rows, not of stored values: the blocks (hence the order in which partial
# sums are added, and the threading below) must depend on the public shape
# (n, d) only, never on the data's sparsity pattern.  A block is a slice of X,
# so its memory is at most that of X.  Its scores are (rows, K): with many
# classes a block has fewer rows, so that its scores take at most
# _SCORE_BLOCK_BYTES (an n x K score matrix of a million declared classes ran
# out of memory after the charge); the scores need not stay in cache, and
# smaller blocks made a fit with K = 20,000 classes twice as slow.
_BLOCK_BYTES = 2**21
_SPARSE_BLOCK_ROWS = 2**13
_SCORE_BLOCK_BYTES = 2**25
# A pass over a dense X of at least _PARALLEL_BYTES (a sparse X of at least
# _SPARSE_PARALLEL_ROWS rows) is cut into _N_GROUPS groups of
# blocks shared between threads (as many as BLAS has), BLAS itself limited to
# one thread: one thread per core streams its own part of X.  BLAS threading
# inside each small product is slower, and much slower when another process
# keeps a core busy (its threads wait for each other).  Below that size,
# threads cost more than they save.
_PARALLEL_BYTES = 4 * 2**20
_SPARSE_PARALLEL_ROWS = 4 * _SPARSE_BLOCK_ROWS
_N_GROUPS = 16
# The squared loss's gradient is ``(A^T A theta - A^T y) / n`` (A: the clipped
# rows with their constant feature): with at most this many parameters, the
# Gram matrix A^T A costs about as much as a few passes over X (one BLAS
# ``syrk``, compute-bound) and every later step costs O(d^2) instead of O(nd).
_GRAM_MAX_PARAMS = 256
# Beyond that, with dense X, a fit announcing T passes (expect_passes) uses it
# for up to _GRAM_PARAMS_PER_PASS * T parameters (building it costs about k / 13
# passes, measured at d = 300..2000 on benchmarks/speed.py's data), if the
# groups' partial k x k sums (and a few k x k temporaries) take at most a
# quarter of X's memory.
_GRAM_PARAMS_PER_PASS = 12


#: Largest public bound (feature_norm, norm_bound, y_bound) a problem accepts.
_MAX_BOUND = 1e100


class PublicBoundsError(ValueError):
    """A public problem's bounds are outside ``[1 / _MAX_BOUND, _MAX_BOUND]``
    (the estimators re-raise it naming their own parameters)."""


@dataclass(frozen=True)
class PublicProblem:
    """Public description of a GLM training problem (no data).

    Attributes
    ----------
    loss : loss object from :mod:`dp_glm_sklearn.losses`
    n_samples, n_features : int
        Public sizes (replace-one adjacency: n is public).
    feature_norm : float
        X: every row is clipped to ``||x|| <= X``.
    intercept_feature : float
        c, the constant feature appended to each row (0 when no intercept).
    y_bound : float
        Y: labels are clipped to ``[-Y, Y]`` (after public centering); 0 for
        classification.
    norm_bound : float
        B: radius of the constraint ball on ``theta`` (intercept included).
    """

    loss: object
    n_samples: int
    n_features: int
    feature_norm: float
    intercept_feature: float
    y_bound: float
    norm_bound: float

    def __post_init__(self):
        # Infinite constants would calibrate infinite noise (or NaN) and
        # disable the safety net (nothing exceeds G = inf), and bounds beyond
        # 1e100 let scores overflow even on tamed rows
        # (tame_exponents_and_norms): refuse them here, when the problem is
        # built from the public parameters, before training.  A smoothness
        # rounded to 0 (feature_norm ~1e-160) would divide by zero in the
        # step size.
        # Bounds below 1e-100 (a Huber threshold of 1e-300, a radius of
        # 1e-200) underflow the output-perturbation constants to 0 instead.
        threshold = getattr(self.loss, "threshold", None)
        # (A negative or NaN bound is refused too: under scikit-learn's
        # skip_parameter_validation, y_bound=-0.5 gave a gradient bound G
        # below a record's gradient, and output perturbation, which has no
        # safety net, calibrated to it.)
        scales = [self.feature_norm, self.norm_bound,
                  *([self.y_bound] if self.y_bound != 0 else []),
                  *([threshold] if threshold is not None else [])]
        try:
            finite = (0 < self.lipschitz < math.inf and 0 < self.smoothness < math.inf
                      and all(1 / _MAX_BOUND <= s <= _MAX_BOUND for s in scales))
        except OverflowError:
            finite = False
        if not finite:
            shown = "" if threshold is None else f", threshold={threshold!r}"
            raise PublicBoundsError(
                "The public bounds are too large or too small: each of "
                f"feature_norm={self.feature_norm!r}, norm_bound={self.norm_bound!r}, "
                f"y_bound={self.y_bound!r}{shown} must lie between {1 / _MAX_BOUND:g} and "
                f"{_MAX_BOUND:g} (y_bound may be 0), and the gradient bound and smoothness "
                "they give must be finite positive floats. Rescale the data so that the "
                "bounds are moderate.")

    @property
    def fit_intercept(self):
        return self.intercept_feature > 0

    @property
    def n_outputs(self):
        return self.loss.n_outputs

    @property
    def theta_shape(self):
        return (self.n_features + int(self.fit_intercept), self.n_outputs)

    @property
    def augmented_norm(self):
        """Bound on the norm of a clipped row with its constant feature."""
        return float(np.hypot(self.feature_norm, self.intercept_feature))

    @property
    def lipschitz(self):
        """G: bound on every per-example gradient norm on the constraint set."""
        xa = self.augmented_norm
        return float(self.loss.derivative_bound(self.norm_bound, xa, self.y_bound) * xa)

    @property
    def smoothness(self):
        """Smoothness of the empirical risk in theta: h * X_aug**2."""
        return float(self.loss.smoothness * self.augmented_norm**2)


def canonical_rows(X):
    """X with each sparse row's duplicate stored entries summed (a copy if needed).

    Duplicates add up in every product but not in row norms taken from
    ``X.data``: a row stored as k copies of v would be clipped as if its norm
    were ``sqrt(k) |v|`` instead of ``k |v|``, and its gradient would exceed G.
    Dense X and canonical sparse X are returned as they are. Whether X is
    canonical is checked here, not read from scipy's ``has_canonical_format``:
    scipy caches that flag, and a caller who changed ``X.indices`` in place
    after it was cached (by an earlier fit, or by reading it) kept it True
    over duplicates, which then passed unclipped.
    """
    if sp.issparse(X) and not _sorted_without_duplicates(X):
        X = X.tocsr(copy=True)
        # The copy keeps the cached flags: clear them, or scipy skips the work.
        X.has_sorted_indices = False
        X.has_canonical_format = False
        X.sum_duplicates()
    return X


#: Stored entries a canonical-format check reads at once.
_CANONICAL_BLOCK = 2**20


def _sorted_without_duplicates(X):
    """Whether a CSR matrix's column indices increase strictly within each
    row (scipy's canonical format), checked from its arrays (a few MB at a
    time).  Other sparse formats are not taken as canonical."""
    if X.format != "csr":
        return False
    indices, indptr = X.indices, np.asarray(X.indptr, dtype=np.int64)
    nnz = indptr[-1]
    if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or nnz > len(indices):
        return False
    # A row starts at each indptr value; its first entry need not exceed the
    # previous row's last.
    for lo in range(1, int(nnz), _CANONICAL_BLOCK):
        hi = min(int(nnz), lo + _CANONICAL_BLOCK)
        rising = indices[lo:hi] > indices[lo - 1:hi - 1]
        starts = indptr[np.searchsorted(indptr, lo):np.searchsorted(indptr, hi)]
        rising[starts - lo] = True
        if not np.all(rising):
            return False
    return True



# Rows whose largest |entry| exceeds max(feature_norm, 1) * 2**_TAME_EXPONENT
# are tamed (tame_exponents_and_norms).
_TAME_EXPONENT = 128


#: Entries (rows x columns) of the blocks of huge rows tame_exponents_and_norms
#: reads at once: 8 MB of float64.
_TAME_BLOCK_ENTRIES = 2**20


def _tame_limit(feature_norm):
    return max(float(feature_norm), 1.0) * 2.0**_TAME_EXPONENT


def tame_exponents_and_norms(X, feature_norm):
    """``(exponents, norms)``: how to tame X's huge rows, and the float64 norms of the tamed rows.

    A row is huge when its largest |entry| m exceeds
    ``limit = max(feature_norm, 1) * 2**128``; it is tamed by multiplying it
    by the power of two ``2**-e`` that brings m into ``[2, 4) * feature_norm``
    (``exponents[i] = e``, 0 for the other rows; ``exponents`` is None when
    no row is huge).  A tamed row's norm stays above feature_norm, so the row
    is still clipped, and its clipped version ``feature_norm * x / ||x||``
    depends only on its direction, which a power of two keeps exactly
    (barring the underflow of entries some 2**1000 times smaller than m):
    training sees the same clipped row as before.  X itself is never
    copied or changed; the kernels tame each block as they read it
    (:func:`tamed_block`), so a huge row costs one block's copy, not X's
    (time and memory that one record could otherwise change 20-fold).

    Why: a row such as ``[1.7e308, 1.7e308]`` (any entry above ~1e154) has an
    infinite norm in float64, and large rows infinite scores ``x @ theta``
    (computed before the clipping scale is applied); the scale is then 0 and
    the gradient NaN (0 * inf), which one record would carry into the release.
    After taming every entry is at most ``limit``, so squared norms (at most
    ``d * limit**2``) are finite while feature_norm < ~1e115 / sqrt(d), scores
    while ``||theta|| < ~1e269 / (max(feature_norm, 1) sqrt(d))``, and the
    clipping scale (at least ``min(feature_norm, 1) * 2**-128 / sqrt(d)``) is
    a normal float.

    The norms are needed anyway; taken first, they show whether any row can
    be huge (a row's norm is at least its largest |entry|, and overflows to
    inf when that entry does): usual data costs nothing more, and only the
    rows whose norm exceeds the limit are looked at again.  X of another
    dtype (float32) has entries below ``2**128 <= limit``.
    """
    norms = _row_norms_float64(X)
    limit = _tame_limit(feature_norm)
    if X.dtype != np.float64 or norms.size == 0 or norms.max() <= limit:
        return None, norms
    candidates = np.flatnonzero(norms > limit)
    exponents = np.zeros(norms.shape, dtype=int)
    # Those rows only, a block at a time (at most about 8 MB of a dense block,
    # or as many rows of a sparse X): a copy of all of them, after the
    # charge, could fail there, telling how many rows are huge.
    per_block = max(1, _TAME_BLOCK_ENTRIES // max(X.shape[1], 1))
    for first in range(0, len(candidates), per_block):
        rows = candidates[first:first + per_block]
        sub = X[rows]
        if sp.issparse(sub):
            sub = sp.csr_matrix(sub)
            m = np.zeros(len(rows))
            np.maximum.at(m, np.repeat(np.arange(len(rows)), np.diff(sub.indptr)),
                          np.abs(sub.data))
        else:
            m = np.maximum(sub.max(axis=1), -sub.min(axis=1))
        # m * 2**-e in [2, 4) * feature_norm (up to rounding of the logs, which
        # avoid m / feature_norm = inf).  ldexp is exact, 2**-e itself may
        # underflow.  The logs only of the rows that are tamed (all have m > 0).
        e = np.zeros(len(rows), dtype=int)
        huge = m > limit
        e[huge] = (np.floor(np.log2(m[huge]) - np.log2(feature_norm)) - 1).astype(int)
        if huge.any():
            exponents[rows] = e
            norms[rows] = _row_norms_float64(_ldexp_rows(sub, e))
    if not exponents.any():
        return None, norms
    return exponents, norms


def clip_scales(norms, bound):
    """Per-row scales ``min(1, bound / ||x_i||)`` that clip rows of these norms to
    ``bound`` (1 for a row of norm 0)."""
    with np.errstate(divide="ignore"):
        scale = np.minimum(1.0, bound / norms)
    scale[norms == 0] = 1.0
    return scale


def _ldexp_rows(Xb, e):
    """A copy of the rows ``Xb`` times ``2**-e`` (exact; sparse comes back as CSR)."""
    if sp.issparse(Xb):
        Xb = sp.csr_matrix(Xb, copy=True)
        Xb.data = np.ldexp(Xb.data, -np.repeat(e, np.diff(Xb.indptr)))
        return Xb
    return np.ldexp(Xb, -e[:, None])


def _row_slice(X, rows):
    """``X[rows]`` for a slice; a CSR slice shares X's data and indices (no copy)."""
    if isinstance(rows, slice) and sp.issparse(X) and X.format == "csr":
        start, stop = rows.start, rows.stop
        a, b = X.indptr[start], X.indptr[stop]
        # Set after construction: scipy's constructor copies ("prunes") a
        # view that is a small part of its base array.
        out = type(X)((stop - start, X.shape[1]), dtype=X.dtype)
        out.indptr = X.indptr[start:stop + 1] - a
        out.indices = X.indices[a:b]
        out.data = X.data[a:b]
        out.has_sorted_indices = X.has_sorted_indices
        return out
    return X[rows]


def _transposed(Xb):
    """``Xb.T`` of a CSR block as a CSC view of the same arrays (built as
    :func:`_row_slice` builds its views: scipy's constructor copies them)."""
    out = sp.csc_matrix((Xb.shape[1], Xb.shape[0]), dtype=Xb.dtype)
    out.indptr, out.indices, out.data = Xb.indptr, Xb.indices, Xb.data
    out.has_sorted_indices = Xb.has_sorted_indices
    return out


def tamed_block(X, exponents, rows):
    """``X[rows]``, its huge rows tamed (``exponents`` from :func:`tame_exponents_and_norms`)."""
    Xb = _row_slice(X, rows)
    if exponents is not None:
        e = exponents[rows]
        if e.any():
            Xb = _ldexp_rows(Xb, e)
    return Xb


def _row_norms_float64(X, block_rows=2**14):
    """Euclidean row norms computed in float64 whatever X's dtype.

    The clipping scale ``min(1, X / ||x||)`` must use the norm of the row the
    kernel actually multiplies (converted to float64): a norm rounded in
    float32 can be short by ~1e-7 relative, and a clipped row (hence a
    per-example gradient) would then exceed its public bound by as much.
    Dense X is converted block by block, so no float64 copy of X is made.
    """
    if X.dtype == np.float64:
        return row_norms(X)
    n = X.shape[0]
    if sp.issparse(X):
        return _sparse_row_norms_float64(X.tocsr(), block_rows)
    out = np.empty(n)
    for start in range(0, n, block_rows):
        block = np.asarray(X[start:start + block_rows], dtype=np.float64)
        out[start:start + block_rows] = np.sqrt(np.einsum("ij,ij->i", block, block))
    return out


def _sparse_row_norms_float64(X, block_rows, block_entries=2**20):
    """:func:`_row_norms_float64` of a CSR X, a block of rows at a time.

    A block holds at most ``block_rows`` rows and ``block_entries`` stored
    entries (or one row's): the float64 temporaries are bounded by public
    sizes, not by X's number of non-zeros (they are made after the charge;
    a copy of all of them could fail there, telling that number).
    """
    n, indptr = X.shape[0], X.indptr
    out = np.zeros(n)
    start = 0
    while start < n:
        stop = int(np.searchsorted(indptr, indptr[start] + block_entries, side="right")) - 1
        stop = min(max(stop, start + 1), start + block_rows, n)
        a, b = int(indptr[start]), int(indptr[stop])
        if b > a:
            squares = X.data[a:b].astype(np.float64)
            squares *= squares
            starts = indptr[start:stop] - a
            filled = np.diff(indptr[start:stop + 1]) > 0
            sums = np.zeros(stop - start)
            sums[filled] = np.add.reduceat(squares, starts[filled])
            out[start:stop] = np.sqrt(sums)
        start = stop
    return out


def block_rows(problem, sparse):
    """Rows per block of the gradient kernel, from the public shape and storage."""
    score_rows = _SCORE_BLOCK_BYTES // (8 * problem.n_outputs)
    if sparse:
        return max(1, min(_SPARSE_BLOCK_ROWS, score_rows))
    return max(1, min(_BLOCK_BYTES // (8 * max(problem.n_features, 1)), score_rows))


def sequential_terms(problem):
    """A public bound on the terms any floating-point sum of a pass adds in sequence.

    A score adds ``d + 1`` products; a gradient (or Gram) coordinate adds a
    block's rows inside BLAS, then each group adds its blocks in order and
    the groups are added in order (:meth:`GLMObjective._map_blocks`); the
    Gram path then adds ``d + 1`` products per coordinate.  With the unit
    roundoff u, a sum of m terms computed in any order is within
    ``(m - 1) u / (1 - (m - 1) u)`` times the sum of the terms' absolute
    values of the exact one (Higham, *Accuracy and Stability of Numerical
    Algorithms*, 2002, section 4.2): the bound the output perturbation's
    certificate uses.  The maximum over dense and sparse storage.
    """
    n = problem.n_samples
    chain = max(rows + -(-n // rows) for rows in (block_rows(problem, False),
                                                   block_rows(problem, True)))
    return chain + _N_GROUPS + 2 * (problem.n_features + 1)


class GLMObjective:
    """Empirical risk ``(1/n) sum_i phi(<theta, x_i>, y_i)`` on clipped rows.

    Rows are clipped to the public ``feature_norm`` by a per-row scale
    ``s_i = min(1, X / ||x_i||)`` applied inside the kernel, so X is never
    copied (a float32 X stays float32: each block is converted to float64 on
    the fly).  ``y`` must already be clipped/encoded by the caller.
    """

    def __init__(self, problem, X, y):
        self.problem = problem
        # The one place rows are made canonical; huge rows are tamed block by
        # block as the kernel reads them (_block), and by JL's projection.
        X = canonical_rows(X)
        self.X = X
        self.y = y
        self._row_dim = X.shape[1]
        self._exponents, self.row_scale, clipped_norms = self._clipping(X)
        c = problem.intercept_feature
        self.aug_norms = np.sqrt(clipped_norms**2 + c**2)
        n, d = X.shape
        # Blocks and threading from the public shape only (see _SPARSE_BLOCK_ROWS).
        self.block_size = block_rows(problem, sp.issparse(X))
        if sp.issparse(X):
            self._parallel = n >= _SPARSE_PARALLEL_ROWS
        else:
            self._parallel = X.nbytes >= _PARALLEL_BYTES
        self._lipschitz = problem.lipschitz  # constants: read once, not per block
        self._max_aug_norm = float(self.aug_norms.max()) if n else 0.0
        k = d + int(problem.fit_intercept)
        gram_possible = type(problem.loss) is SquaredLoss and n >= 2 * k
        self._gram_ok = gram_possible and k <= _GRAM_MAX_PARAMS
        # (expect_passes may turn the Gram path on for larger k.)
        self._gram_larger_ok = (gram_possible and not sp.issparse(X)
                                and (_N_GROUPS + 4) * 8 * k * k <= X.nbytes / 4)
        # Labels within the public bound: with ||theta|| <= B every residual is
        # at most B X_aug + Y, so the safety net provably rescales nothing.
        self._labels_bounded = bool(n) and float(np.max(np.abs(y))) <= problem.y_bound
        self._gram_cache = None
        self._views = {}  # sparse row blocks, by (start, stop): see _block

    def _clipping(self, X):
        """``(exponents, row_scale, clipped_norms)``: how the kernel tames and clips
        each row of X (``s_i = min(1, feature_norm / ||x_i||)``) and the norms
        of the clipped rows."""
        exponents, norms = tame_exponents_and_norms(X, self.problem.feature_norm)
        scale = clip_scales(norms, self.problem.feature_norm)
        return exponents, scale, scale * norms

    def _on_rows(self, theta):
        """The parameters as they act on the stored rows (here: theta itself).

        A subclass whose rows are not in theta's coordinates (JL's
        ``ProjectedObjective``) maps them here and back in :meth:`_from_rows`,
        and turns the Gram path off (:meth:`_gram` is in theta's coordinates).
        """
        return theta

    def _from_rows(self, grad):
        """A gradient with respect to :meth:`_on_rows`'s parameters, in theta's
        coordinates (here: itself)."""
        return grad

    # -- the kernel ---------------------------------------------------------
    def _block(self, rows, keep=True):
        """Rows of X (tamed, as float64) and their clipping scales.

        ``keep``: a CSR view of X is kept for the next passes (the passes'
        blocks; the Gram path's, read once, are not)."""
        key = (rows.start, rows.stop) if isinstance(rows, slice) else None
        if key in self._views:
            return self._views[key][0], self.row_scale[rows]
        Xb = tamed_block(self.X, self._exponents, rows)
        if Xb.dtype != np.float64:
            Xb = Xb.astype(np.float64)  # one conversion serves both products
        elif keep and key is not None and sp.issparse(Xb) and Xb.format == "csr" \
                and np.shares_memory(Xb.data, self.X.data):
            # A view of X (float64 rows, none tamed): kept, with its transpose,
            # for the next passes (scipy's constructors copy such views).
            self._views[key] = (Xb, _transposed(Xb))
        return Xb, self.row_scale[rows]

    def _transpose(self, rows, Xb):
        """``Xb.T`` for the rows ``Xb`` of :meth:`_block` (a kept view if it has one)."""
        key = (rows.start, rows.stop) if isinstance(rows, slice) else None
        return self._views[key][1] if key in self._views else Xb.T

    def _scores(self, Xb, sb, theta):
        p = self.problem
        d = self._row_dim
        Z = np.asarray(Xb @ theta[:d], dtype=np.float64)
        Z *= sb[:, None]
        if p.fit_intercept:
            Z += p.intercept_feature * theta[d]
        return Z

    def _add_block_grad(self, rows, theta, clip, out, with_value=False):
        """``out += block_grad(rows, theta, clip)``, with few temporaries.

        Returns the block's summed loss with ``with_value=True`` (from the same
        scores, before the derivative overwrites them), else 0.
        """
        p = self.problem
        d = self._row_dim
        Xb, sb = self._block(rows)
        Z = self._scores(Xb, sb, theta)
        y = self.y[rows]
        # Optional hooks of the loss (the interface is duck-typed): the same
        # numbers as value and derivative, overwriting the scores.
        fused = getattr(p.loss, "_value_and_derivative_inplace", None)
        if with_value and fused is not None:
            values, D = fused(Z, y)
            value = float(values.sum())
        else:
            value = float(p.loss.value(Z, y).sum()) if with_value else 0.0
            inplace = getattr(p.loss, "_derivative_inplace", p.loss.derivative)
            D = inplace(Z, y)
        if clip:
            self._clip(D, rows)
        if p.fit_intercept:
            out[d] += p.intercept_feature * D.sum(axis=0)
        out[:d] += self._transpose(rows, Xb) @ (D * sb[:, None])
        return value

    def _clip(self, D, rows):
        """Scale rows of D so that each per-example gradient has norm <= G.

        A per-example gradient whose norm is not finite (NaN or inf, e.g. from
        an overflow) is set to 0: ``NaN > G`` is False, so scaling alone would
        let a NaN through into the released sum.
        """
        G = self._lipschitz
        if D.shape[0] == 0:
            return
        if D.shape[1] == 1:
            # |D_i| * aug_i <= max|D| * max(aug) <= G (rounding is monotone):
            # then no row needs scaling, and the per-row check is skipped.  A
            # NaN in D or in the norms makes the product NaN and the test False.
            if max(D.max(), -D.min()) * self._max_aug_norm <= G:
                return
            dnorm = np.abs(D[:, 0])
        else:
            # Same fast test as above, on squared row norms from einsum (no
            # temporary); its rounding differs from np.linalg.norm's by a few
            # ulps, covered by the slack.  Failing it falls through to the
            # exact row-by-row check below.
            sq = np.einsum("ij,ij->i", D, D)
            if sq.max() * (1.0 + 1e-12) * self._max_aug_norm**2 <= G * G:
                return
            dnorm = np.linalg.norm(D, axis=1)
        gnorm = dnorm * self.aug_norms[rows]
        finite = np.isfinite(gnorm)
        over = finite & (gnorm > G)
        if over.any():  # never with correct constants
            D[over] *= (G / gnorm[over])[:, None]
        if not finite.all():
            D[~finite] = 0.0

    def block_grad(self, rows, theta, clip=True):
        """Sum of per-example gradients over ``rows`` (a slice), shape of theta.

        With ``clip=True`` each per-example gradient is scaled to norm at most
        G (the safety net of SPEC section 3) by reweighting its row; with
        correct constants the scale is always 1.
        """
        on_rows = self._on_rows(theta)
        grad = np.zeros(on_rows.shape)
        self._add_block_grad(rows, on_rows, clip, grad)
        return self._from_rows(grad)

    # -- passes over the data -------------------------------------------------
    def _blocks(self):
        n = self.problem.n_samples
        for start in range(0, n, self.block_size):
            yield slice(start, min(start + self.block_size, n))

    def _map_blocks(self, work, wait=False):
        """``[work(group) for group in groups]``: one pass over X, maybe threaded.

        A large X is cut into ``_N_GROUPS`` contiguous groups of blocks (a
        small one into one group); the groups, hence the order in which
        partial results are summed, depend only on the data's size, so a fit
        gives the same numbers whatever the threads.  BLAS is limited to one
        thread during the pass and the groups are shared between as many
        threads as BLAS had; one such pass runs at a time, since that limit is
        process-wide, and a pass that finds another one running runs serially
        without touching the limit (``wait=True``: waits for it instead; no
        work function may start a pass itself).
        """
        blocks = list(self._blocks())
        n_groups = min(_N_GROUPS, len(blocks)) if self._parallel else 1
        groups = [blocks[g[0]:g[-1] + 1]
                  for g in np.array_split(np.arange(len(blocks)), n_groups)]
        if not _PASS_LOCK.acquire(blocking=wait):
            return [work(g) for g in groups]
        try:
            blas = _blas_controller()
            n_threads = min(_blas_threads(blas), n_groups)
            with _one_blas_thread(blas):
                if n_threads <= 1:
                    return [work(g) for g in groups]
                results = [None] * n_groups
                todo = iter(range(n_groups))
                todo_lock = threading.Lock()

                # Each worker runs with the caller's numpy error state (e.g.
                # "ignore" during a fit), not numpy's default: set explicitly,
                # since a worker thread does not inherit it (numpy before 2.0
                # keeps it per thread, numpy 2 in a context variable).
                errstate = dict(np.geterr(), call=np.geterrcall())

                def run():  # each thread takes the next group until none is left
                    with np.errstate(**errstate):
                        while True:
                            with todo_lock:
                                i = next(todo, None)
                            if i is None:
                                return
                            results[i] = work(groups[i])

                futures = [_executor().submit(run) for _ in range(n_threads - 1)]
                run()
                for f in futures:
                    f.result()
                return results
        finally:
            _PASS_LOCK.release()

    def expect_passes(self, n_passes):
        """Announce ``n_passes`` calls of :meth:`gradient` (a public step count).

        Enough of them pay for the squared loss's Gram matrix beyond
        ``_GRAM_MAX_PARAMS`` parameters (see ``_GRAM_PARAMS_PER_PASS``).  The
        choice reads the public shape, dtype size and step count only.
        """
        k = int(np.prod(self.problem.theta_shape))
        if self._gram_larger_ok and k <= _GRAM_PARAMS_PER_PASS * int(n_passes):
            self._gram_ok = True

    def gradient(self, theta, clip=True):
        """Average gradient over the data set (one pass over X).

        For the squared loss with few parameters the gradient comes from the
        Gram matrix of the clipped rows instead (built by one pass, the first
        time), the same quantity up to rounding: with ``clip=True`` only when
        ``||theta|| <= norm_bound`` and the labels are within ``y_bound``,
        where the safety net provably changes nothing.
        """
        if self._gram_ok and (not clip or (self._labels_bounded and np.linalg.norm(theta)
                                           <= self.problem.norm_bound)):
            gram, rhs = self._gram()
            return (gram @ theta - rhs) / self.problem.n_samples

        return self._gradient_pass(theta, clip, with_value=False)[1]

    def _gradient_pass(self, theta, clip, with_value):
        """``(average loss or 0, average gradient)`` from one pass over X."""

        on_rows = self._on_rows(theta)

        def work(blocks):
            total, g = 0.0, np.zeros(on_rows.shape)
            for rows in blocks:
                total += self._add_block_grad(rows, on_rows, clip, g, with_value)
            return total, g

        parts = self._map_blocks(work)
        grad = parts[0][1]
        for _, part in parts[1:]:
            grad += part
        grad = self._from_rows(grad)
        grad /= self.problem.n_samples
        return _ordered_sum(total for total, _ in parts) / self.problem.n_samples, grad

    def _gram(self):
        """``(A^T A, A^T y)``, A the clipped rows with their constant feature (cached)."""
        if self._gram_cache is None:
            p = self.problem
            d, c = p.n_features, p.intercept_feature
            k = d + int(p.fit_intercept)

            # Quarter blocks: the scaled copy A of each one stays small next to
            # X; whole blocks when a quarter has fewer than k rows (A^T A costs
            # a k x k product whatever the rows).
            quarter = max(1, self.block_size // 4)
            step = self.block_size if quarter < k else quarter

            def work(blocks):
                gram, rhs = np.zeros((k, k)), np.zeros((k, 1))
                for rows in (slice(i, min(i + step, b.stop))
                             for b in blocks for i in range(b.start, b.stop, step)):
                    Xb, sb = self._block(rows, keep=False)
                    yb = self.y[rows]
                    if sp.issparse(Xb):
                        A = sp.csr_matrix(Xb.multiply(sb[:, None]))
                        gram[:d, :d] += (A.T @ A).toarray()
                    else:
                        A = Xb * sb[:, None]
                        gram[:d, :d] += A.T @ A
                    rhs[:d, 0] += A.T @ yb
                    if p.fit_intercept:
                        colsum = np.asarray(A.sum(axis=0)).ravel()
                        gram[:d, d] += c * colsum
                        gram[d, :d] += c * colsum
                        gram[d, d] += c * c * len(yb)
                        rhs[d, 0] += c * yb.sum()
                return gram, rhs

            # Waits for a pass of another thread rather than run beside it
            # with BLAS threads: A^T A's rounding depends on them.
            parts = self._map_blocks(work, wait=True)
            gram, rhs = parts[0]
            for g, r in parts[1:]:
                gram += g
                rhs += r
            self._gram_cache = (gram, rhs)
        return self._gram_cache

    def value_and_gradient(self, theta):
        """``(value(theta), gradient(theta, clip=False))`` in one pass over X (same numbers)."""
        if self._gram_ok:
            return self.value(theta), self.gradient(theta, clip=False)
        return self._gradient_pass(theta, clip=False, with_value=True)

    def value(self, theta):
        """Average loss over the data set."""

        on_rows = self._on_rows(theta)

        def work(blocks):
            total = 0.0
            for rows in blocks:
                Xb, sb = self._block(rows)
                total += self.problem.loss.value(self._scores(Xb, sb, on_rows),
                                                 self.y[rows]).sum()
            return total

        return _ordered_sum(self._map_blocks(work)) / self.problem.n_samples


def _ordered_sum(values):
    """``((0 + v1) + v2) + ...`` in float64, in order.

    Not the built-in ``sum``: from Python 3.12 it compensates the rounding of
    exact floats but not of numpy floats, so the fused pass (Python floats)
    and ``value`` (numpy floats) would differ in the last bit, and a fit's
    numbers would depend on the Python version.
    """
    total = 0.0
    for value in values:
        total += float(value)
    return total


# -- threads --------------------------------------------------------------------
_LOCK = threading.Lock()
_PASS_LOCK = threading.Lock()
_STATE = {"pid": None, "executor": None, "blas": None, "limiter": None}


def _executor():
    """A process-wide thread pool, made anew after a fork (threads do not survive it)."""
    with _LOCK:
        if _STATE["pid"] != os.getpid():
            _STATE["executor"] = ThreadPoolExecutor(max_workers=os.cpu_count() or 1,
                                                    thread_name_prefix="dp_glm_sklearn")
            _STATE["pid"] = os.getpid()
        return _STATE["executor"]


def _blas_controller():
    """threadpoolctl's view of the BLAS libraries (inspected once: it is slow)."""
    with _LOCK:
        if _STATE["blas"] is None:
            _STATE["blas"] = ThreadpoolController().select(user_api="blas")
        return _STATE["blas"]


class _one_blas_thread:
    """``blas.limit(limits=1)`` for one pass, remembered for a fork (see below)."""

    def __init__(self, blas):
        self._blas = blas

    def __enter__(self):
        # (threadpoolctl's own __enter__/__exit__ also track which thread
        # controls OpenBLAS: without them the limit does not hold in a
        # thread other than the main one.)
        _STATE["limiter"] = self._blas.limit(limits=1, user_api="blas").__enter__()

    def __exit__(self, *exc):
        limiter, _STATE["limiter"] = _STATE["limiter"], None
        limiter.__exit__(*exc)


def _reset_after_fork():
    """A forked child has none of the parent's threads: a lock one of them held
    (a pass in progress) would never be released, and the Gram build, which
    waits for it, would hang after the charge.  New locks and pool; BLAS back
    to the threads it had before a pass limited it."""
    global _LOCK, _PASS_LOCK
    _LOCK, _PASS_LOCK = threading.Lock(), threading.Lock()
    limiter = _STATE["limiter"]
    _STATE.update(pid=None, executor=None, blas=None, limiter=None)
    if limiter is not None:
        limiter.restore_original_limits()
        # That made this thread the one that controls OpenBLAS (threadpoolctl
        # >= 3.6), for good: release it, or passes in other threads of the
        # child could not limit BLAS.
        clear = getattr(OpenBLASController, "clear_controlling_thread", None)
        if clear is not None:
            clear(force=True)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _blas_threads(blas):
    """Threads BLAS would use now (honours ``threadpool_limits`` and the environment)."""
    return max([lib.num_threads for lib in blas.lib_controllers] or [1])
