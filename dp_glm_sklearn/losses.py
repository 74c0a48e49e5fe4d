"""GLM losses with their public constants (SPEC section 3).

A loss knows only its per-sample value and derivative in the raw prediction
``z = <w, x>`` (a vector of K raw scores for the multinomial loss), and two
constants that come from public bounds only:

``derivative_bound(norm_bound, feature_norm, y_bound)``
    ``sup |phi'(z, y)|`` over the constraint set ``||w|| <= B``, ``||x|| <= X``,
    ``|y| <= Y`` (for the multinomial loss, the sup of the Euclidean norm of the
    K-vector ``phi'``).  Times the feature norm it is the Lipschitz constant G
    of the per-example loss; it sets the *sensitivity*.
``smoothness``
    ``sup phi''(z, y)`` (a bound on the Hessian's operator norm in z); times
    ``X**2`` it is the smoothness of the empirical risk in w; it sets the *step*.

The two are kept apart on purpose: one decides privacy, the other only speed.
Nothing here ever looks at data to compute a constant.
"""

import numpy as np
from scipy.special import expit, log_expit, softmax

__all__ = ["SquaredLoss", "LogisticLoss", "MultinomialLoss", "HuberLoss"]


class _GLMLoss:
    """Shared interface. ``z`` has shape (n, K); ``y`` is 1-D."""

    name = ""
    #: sup of phi'' in z (operator norm for the multinomial loss).
    smoothness = 1.0
    #: number of raw scores per sample.
    n_outputs = 1

    def value(self, z, y):  # pragma: no cover - interface
        raise NotImplementedError

    def derivative(self, z, y):  # pragma: no cover - interface
        raise NotImplementedError

    def derivative_bound(self, norm_bound, feature_norm, y_bound):  # pragma: no cover
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}()"


class SquaredLoss(_GLMLoss):
    """``phi(z, y) = (z - y)**2 / 2``.

    Smooth but not Lipschitz on R: on the ball ``|z| <= B X`` and with
    ``|y| <= Y``, ``|phi'| = |z - y| <= B X + Y`` (paper's Lemma 2 is looser).
    """

    name = "squared"
    smoothness = 1.0

    def value(self, z, y):
        return 0.5 * (z[:, 0] - y) ** 2

    def derivative(self, z, y):
        return z - y[:, None]

    def derivative_bound(self, norm_bound, feature_norm, y_bound):
        return norm_bound * feature_norm + y_bound


class LogisticLoss(_GLMLoss):
    """``phi(z, y) = log(1 + exp(-y z))`` with ``y`` in {-1, +1}.

    ``|phi'| = sigmoid(-y z) <= 1`` everywhere; ``phi'' <= 1/4``.
    """

    name = "logistic"
    smoothness = 0.25

    def value(self, z, y):
        return -log_expit(y * z[:, 0])

    def derivative(self, z, y):
        y = y[:, None]
        return -y * expit(-y * z)

    def _derivative_inplace(self, z, y):
        """:meth:`derivative`, overwriting z (same bits: negation is exact)."""
        y = y[:, None]
        np.multiply(y, z, out=z)
        np.negative(z, out=z)
        expit(z, out=z)
        z *= y
        np.negative(z, out=z)
        return z

    def derivative_bound(self, norm_bound, feature_norm, y_bound):
        return 1.0


class MultinomialLoss(_GLMLoss):
    """``phi(z, y) = -log softmax(z)_y`` for K classes, ``y`` an integer code.

    The derivative in z is ``p - e_y`` with ``p = softmax(z)``; its Euclidean
    norm is at most ``sqrt(2)`` (``||p - e_y||^2 = (1 - p_y)^2 + sum_{k != y}
    p_k^2 <= 2 (1 - p_y)^2``).  The Hessian ``diag(p) - p p^T`` has operator
    norm at most 1/2.
    """

    name = "multinomial"
    smoothness = 0.5

    def __init__(self, n_classes):
        self.n_outputs = int(n_classes)

    def value(self, z, y):
        return self._value_and_derivative_inplace(z.copy(), y)[0]

    def derivative(self, z, y):
        p = softmax(z, axis=1)
        p[np.arange(z.shape[0]), y.astype(np.intp)] -= 1.0
        return p

    def _derivative_inplace(self, z, y):
        """:meth:`derivative`, overwriting z: scipy's softmax, step by step, in place."""
        return self._value_and_derivative_inplace(z, y, with_value=False)[1]

    def _value_and_derivative_inplace(self, z, y, with_value=True):
        """``(value(z, y), derivative(z, y))`` from one exponential of z, overwriting z.

        The value is ``max_k z_k + log(sum_k exp(z_k - max)) - z_y``, the
        derivative scipy's softmax (minus the one-hot label) step by step.
        """
        rows, idx = np.arange(z.shape[0]), y.astype(np.intp)
        # Row maxima by a loop over the K columns: max is exact, so these are
        # np.max(z, axis=1)'s values, 6x faster than numpy's reduction over
        # rows of a few elements.
        zmax = z[:, 0].copy()
        for k in range(1, z.shape[1]):
            np.maximum(zmax, z[:, k], out=zmax)
        value = zmax - z[rows, idx] if with_value else None
        z -= zmax[:, None]
        np.exp(z, out=z)
        total = np.sum(z, axis=1, keepdims=True)
        if with_value:
            value += np.log(total[:, 0])
        z /= total
        z[rows, idx] -= 1.0
        return value, z

    def derivative_bound(self, norm_bound, feature_norm, y_bound):
        return np.sqrt(2.0)

    def __repr__(self):
        return f"MultinomialLoss(n_classes={self.n_outputs})"


class HuberLoss(_GLMLoss):
    """Huber loss with threshold M on the residual ``r = z - y``.

    ``phi = r**2 / 2`` if ``|r| <= M`` else ``M |r| - M**2 / 2``;
    ``|phi'| = min(|r|, M) <= min(M, B X + Y)``; ``phi'' <= 1``.
    """

    name = "huber"
    smoothness = 1.0

    def __init__(self, threshold):
        self.threshold = float(threshold)

    def value(self, z, y):
        r = np.abs(z[:, 0] - y)
        m = self.threshold
        return np.where(r <= m, 0.5 * r**2, m * r - 0.5 * m**2)

    def derivative(self, z, y):
        return np.clip(z - y[:, None], -self.threshold, self.threshold)

    def derivative_bound(self, norm_bound, feature_norm, y_bound):
        # |r| <= B X + Y on the constraint set, so the smaller bound holds too.
        return min(self.threshold, norm_bound * feature_norm + y_bound)

    def __repr__(self):
        return f"HuberLoss(threshold={self.threshold!r})"
