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

from dataclasses import dataclass

import numpy as np
from sklearn.utils.extmath import row_norms

# Rows per block of the gradient kernel: a block of about 4 MB of float64
# stays in cache between the two products ``X_b @ W`` and ``X_b.T @ D``.
_BLOCK_BYTES = 4 * 2**20


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


class GLMObjective:
    """Empirical risk ``(1/n) sum_i phi(<theta, x_i>, y_i)`` on clipped rows.

    Rows are clipped to the public ``feature_norm`` by a per-row scale
    ``s_i = min(1, X / ||x_i||)`` applied inside the kernel, so X is never
    copied.  ``y`` must already be clipped/encoded by the caller.
    """

    def __init__(self, problem, X, y):
        self.problem = problem
        self.X = X
        self.y = y
        norms = row_norms(X)
        with np.errstate(divide="ignore"):
            self.row_scale = np.minimum(1.0, problem.feature_norm / norms)
        self.row_scale[norms == 0] = 1.0
        c = problem.intercept_feature
        self.aug_norms = np.sqrt((self.row_scale * norms) ** 2 + c**2)
        n, d = X.shape
        self.block_size = max(1, _BLOCK_BYTES // (8 * max(d, 1)))

    def _scores(self, Xb, sb, theta):
        p = self.problem
        d = p.n_features
        Z = Xb @ theta[:d]
        Z = np.asarray(Z, dtype=np.float64) * sb[:, None]
        if p.fit_intercept:
            Z += p.intercept_feature * theta[d]
        return Z

    def block_grad(self, rows, theta, clip=True):
        """Sum of per-example gradients over ``rows`` (a slice), shape of theta.

        With ``clip=True`` each per-example gradient is scaled to norm at most
        G (the safety net of SPEC section 3) by reweighting its row; with
        correct constants the scale is always 1.
        """
        p = self.problem
        d = p.n_features
        Xb, sb = self.X[rows], self.row_scale[rows]
        D = p.loss.derivative(self._scores(Xb, sb, theta), self.y[rows])
        if clip:
            dnorm = np.abs(D[:, 0]) if D.shape[1] == 1 else np.linalg.norm(D, axis=1)
            gnorm = dnorm * self.aug_norms[rows]
            with np.errstate(divide="ignore", invalid="ignore"):
                r = np.where(gnorm > p.lipschitz, p.lipschitz / gnorm, 1.0)
            D *= r[:, None]
        grad = np.empty_like(theta)
        grad[:d] = Xb.T @ (D * sb[:, None])
        if p.fit_intercept:
            grad[d] = p.intercept_feature * D.sum(axis=0)
        return grad

    def _blocks(self):
        n = self.problem.n_samples
        for start in range(0, n, self.block_size):
            yield slice(start, min(start + self.block_size, n))

    def gradient(self, theta, clip=True):
        """Average gradient over the data set (one pass over X)."""
        g = np.zeros_like(theta)
        for rows in self._blocks():
            g += self.block_grad(rows, theta, clip=clip)
        return g / self.problem.n_samples

    def value(self, theta):
        """Average loss over the data set."""
        total = 0.0
        for rows in self._blocks():
            Xb, sb = self.X[rows], self.row_scale[rows]
            total += self.problem.loss.value(self._scores(Xb, sb, theta), self.y[rows]).sum()
        return total / self.problem.n_samples

    def per_sample_loss(self, theta):
        """Loss of each sample (used by private selection, after clipping)."""
        out = np.empty(self.problem.n_samples)
        for rows in self._blocks():
            Xb, sb = self.X[rows], self.row_scale[rows]
            out[rows] = self.problem.loss.value(self._scores(Xb, sb, theta), self.y[rows])
        return out
