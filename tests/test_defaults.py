"""Defaults chosen by benchmark, and the fast paths of the gradient kernel.

- ``default_max_iter``: the rule ``clip(round(n mu / 10), 5, 100)``, and for the
  logistic losses the compute cap ``cap(n) = clip(5e6 / n, 50, 100)`` in place of 100.
- ``DPHuberRegressor(threshold=None)``: a quarter of the public label range.
- ``GLMObjective`` (``dp_glm_sklearn/_objective.py``): the blocked, threaded
  and Gram-matrix gradients against a plain numpy reference written here; the
  same numbers whatever the number of threads; the safety net (row clipping to
  ``feature_norm`` and per-example gradient clipping to G) on every path.

All checks are deterministic (no false failures). The module constants that
choose a path (block size, the size from which passes are threaded, the Gram
matrix limit) are shrunk with ``monkeypatch`` so that small data takes every
path in a few milliseconds.
"""

import copy
import os
import signal
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit, logsumexp, softmax
from sklearn.datasets import load_diabetes
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from dp_glm_sklearn import (
    DPHuberRegressor,
    DPLinearRegression,
    DPLogisticRegression,
    PrivacyAccountant,
)
from dp_glm_sklearn import _objective as objective_module
from dp_glm_sklearn._objective import GLMObjective, PublicProblem
from dp_glm_sklearn.losses import HuberLoss, LogisticLoss, MultinomialLoss, SquaredLoss
from dp_glm_sklearn.mechanisms import jl as jl_module
from dp_glm_sklearn.mechanisms.noisy_gd import default_max_iter, default_steps

# -- default_max_iter -----------------------------------------------------------------


def test_default_max_iter_floor_is_5():
    assert default_max_iter(10, 0.1) == 5
    assert default_max_iter(100, 1.0) == 10  # round(n mu / 10) between the limits
    assert default_max_iter(1, 1e-3) == 5
    assert default_max_iter(0, 1.0) == 5


@pytest.mark.parametrize("n", [1_000, 10_000, 20_000, 30_000, 50_000])
def test_default_max_iter_is_100_up_to_n_5e4_when_n_mu_is_large(n):
    assert default_max_iter(n, 10.0) == 100
    assert default_max_iter(n, np.inf) == 100  # mu is capped before use
    assert default_max_iter(n, 1000.0 / n) == 100  # n mu / 10 = 100 exactly


@pytest.mark.parametrize("n", [100_000, 300_000, 1_000_000, 10**8])
def test_default_max_iter_is_50_from_n_1e5_when_compute_capped(n):
    for mu in (0.01, 0.5, 1.0, 10.0, np.inf):
        assert default_max_iter(n, mu, compute_capped=True) == 50
        assert default_max_iter(n, mu) == 100


def test_default_max_iter_cap_between_5e4_and_1e5_is_5e6_over_n():
    assert default_max_iter(62_500, 10.0, compute_capped=True) == 80
    assert default_max_iter(80_000, 10.0, compute_capped=True) == 62
    # below the cap the n * mu / 10 rule still holds
    assert default_max_iter(80_000, 0.005, compute_capped=True) == 40


@pytest.mark.parametrize("capped", [False, True])
@pytest.mark.parametrize("n", [1, 7, 50, 331, 426, 2_000, 30_000, 45_000, 100_000, 10**6])
def test_default_max_iter_is_monotone_in_mu_and_within_limits(n, capped):
    mus = np.concatenate([np.geomspace(1e-4, 1e4, 200), [1e7, np.inf]])
    steps = np.array([default_max_iter(n, mu, compute_capped=capped) for mu in mus])
    assert np.all(np.diff(steps) >= 0)
    assert steps.min() >= 5 and steps.max() <= 100
    assert all(isinstance(int(s), int) for s in steps)


def test_default_max_iter_without_the_compute_cap_never_falls_with_n():
    # More data must not mean fewer steps: at large n mu the optimization
    # error decides, and halving the steps made a linear fit on 1e5 rows
    # worse than one on 5e4 (R^2 0.50 against 0.82, d = 200, epsilon = 100).
    ns = np.unique(np.geomspace(1, 1e8, 400).astype(int))
    for mu in (0.01, 0.3, 1.0, 10.0, np.inf):
        steps = [default_max_iter(n, mu) for n in ns]
        assert np.all(np.diff(steps) >= 0)


@pytest.mark.parametrize("loss, capped", [
    (SquaredLoss(), False), (HuberLoss(1.0), False),
    (LogisticLoss(), True), (MultinomialLoss(3), True)])
def test_default_steps_cap_the_logistic_losses_only(loss, capped):
    problem = PublicProblem(loss, 200_000, 10, 1.0, 1.0, 1.0, 2.0)
    assert default_steps(problem, 1.0) == (50 if capped else 100)
    small = PublicProblem(loss, 1_000, 10, 1.0, 1.0, 1.0, 2.0)
    # the n mu / 10 rule below both caps; n mu / 5 for the Huber loss
    assert default_steps(small, 0.3) == (60 if isinstance(loss, HuberLoss) else 30)


@pytest.mark.parametrize("threshold", [0.01, 1.0, 1e6])
def test_default_steps_of_the_huber_loss_are_twice_the_squared_losses(threshold):
    # The rule of the Huber loss is n mu / 5 whatever its threshold (public
    # or not, it does not enter T), within the same limits of 5 and 100 steps.
    for n, mu in [(100, 0.01), (331, 0.3), (331, 1.0), (1000, 0.2), (10**5, 1.0)]:
        huber = default_steps(PublicProblem(HuberLoss(threshold), n, 10, 1.0, 1.0, 1.0, 2.0), mu)
        squared = default_steps(PublicProblem(SquaredLoss(), n, 10, 1.0, 1.0, 1.0, 2.0), mu)
        assert huber == int(np.clip(round(n * mu / 5), 5, 100))
        assert squared == int(np.clip(round(n * mu / 10), 5, 100))


def test_estimators_use_the_capped_default():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100_000, 2))
    y = (X[:, 0] > 0).astype(int)
    clf = DPLogisticRegression(epsilon=1.0, feature_norm=3.0, classes=[0, 1],
                               random_state=0).fit(X, y)
    assert clf.n_iter_ == 50
    explicit = DPLogisticRegression(epsilon=1.0, feature_norm=3.0, classes=[0, 1],
                                    max_iter=100, random_state=0).fit(X, y)
    assert explicit.n_iter_ == 100
    # Linear and Huber fits are not compute-capped.
    for reg in (DPLinearRegression, DPHuberRegressor):
        model = reg(epsilon=1.0, feature_norm=3.0, y_bound=1.0, method="noisy_gd",
                    random_state=0).fit(X, y)
        assert model.n_iter_ == 100


# -- DPHuberRegressor's default threshold -------------------------------------------------


@pytest.fixture(scope="module")
def diabetes():
    X, y = load_diabetes(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def test_huber_default_threshold_is_a_quarter_of_the_label_range(diabetes):
    X, y = diabetes
    kw = dict(epsilon=np.inf, feature_norm=3.5, y_bound=(25.0, 346.0), norm_bound=40.0)
    default = DPHuberRegressor(**kw).fit(X, y)
    explicit = DPHuberRegressor(threshold=(346.0 - 25.0) / 4, **kw).fit(X, y)
    np.testing.assert_array_equal(default.coef_, explicit.coef_)
    assert default.intercept_ == explicit.intercept_
    assert default.get_params()["threshold"] is None  # fit writes no parameter


@pytest.mark.parametrize("y_bound,threshold", [((25.0, 346.0), 80.25), (170.0, 85.0)],
                         ids=["interval", "symmetric"])
def test_huber_default_threshold_private_fits(diabetes, y_bound, threshold):
    """Same noise (sigma is proportional to the threshold) and same loss: same bits."""
    X, y = diabetes
    kw = dict(epsilon=1.0, feature_norm=3.5, y_bound=y_bound, norm_bound=40.0,
              random_state=0)
    default = DPHuberRegressor(**kw).fit(X, y)
    explicit = DPHuberRegressor(threshold=threshold, **kw).fit(X, y)
    np.testing.assert_array_equal(default.coef_, explicit.coef_)
    assert default.intercept_ == explicit.intercept_
    # a slightly different threshold gives a different fit, so the check can fail
    other = DPHuberRegressor(threshold=0.99 * threshold, **kw).fit(X, y)
    assert not np.allclose(default.coef_, other.coef_, rtol=1e-6)


# -- the gradient kernel: reference ------------------------------------------------------

N, D, FEATURE_NORM, INTERCEPT = 600, 6, 2.0, 1.5
LOSSES = {
    "squared": SquaredLoss(),
    "logistic": LogisticLoss(),
    "huber": HuberLoss(0.7),
    "multinomial": MultinomialLoss(3),
}
INPUTS = ("float64", "float32", "csr")


def _data(kind, loss, seed=0):
    """X with a tenth of its rows far outside ``FEATURE_NORM``, and labels for ``loss``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=0.6, size=(N, D))
    X[::10] *= 20.0
    X[np.abs(X) < 0.3] = 0.0  # some zeros (sparse input), one all-zero row
    X[7] = 0.0
    if isinstance(loss, MultinomialLoss):
        y = rng.integers(0, loss.n_outputs, N).astype(float)
    elif isinstance(loss, LogisticLoss):
        y = rng.choice([-1.0, 1.0], N)
    else:
        y = rng.uniform(-2.0, 2.0, N)
    if kind == "float32":
        X = X.astype(np.float32)
    elif kind == "csr":
        X = sp.csr_matrix(X)
    return X, y


def _problem(loss, intercept, y_bound=2.0, norm_bound=3.0, n=N):
    return PublicProblem(loss=loss, n_samples=n, n_features=D, feature_norm=FEATURE_NORM,
                         intercept_feature=intercept, y_bound=y_bound, norm_bound=norm_bound)


def _derivative(loss, Z, y):
    """phi'(z, y), written independently of ``dp_glm_sklearn.losses``."""
    if isinstance(loss, MultinomialLoss):
        P = softmax(Z, axis=1)
        P[np.arange(len(y)), y.astype(int)] -= 1.0
        return P
    z = Z[:, 0]
    if isinstance(loss, LogisticLoss):
        d = -y * expit(-y * z)
    elif isinstance(loss, HuberLoss):
        d = np.clip(z - y, -loss.threshold, loss.threshold)
    else:
        d = z - y
    return d[:, None]


def _loss_values(loss, Z, y):
    if isinstance(loss, MultinomialLoss):
        return logsumexp(Z, axis=1) - Z[np.arange(len(y)), y.astype(int)]
    r = Z[:, 0] - y
    if isinstance(loss, LogisticLoss):
        return np.logaddexp(0.0, -y * Z[:, 0])
    if isinstance(loss, HuberLoss):
        m = loss.threshold
        return np.where(np.abs(r) <= m, 0.5 * r**2, m * np.abs(r) - 0.5 * m**2)
    return 0.5 * r**2


def _reference(problem, X, y, theta, clip_rows=True, clip_gradients=True):
    """Average gradient and per-sample losses with plain numpy on a materialized A.

    A holds the rows clipped to ``feature_norm`` (in float64) and the constant
    feature; each per-example gradient ``phi'_i a_i`` is scaled to norm <= G.
    """
    X = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
    if clip_rows:
        norms = np.linalg.norm(X, axis=1)
        X = X * np.minimum(1.0, problem.feature_norm / np.maximum(norms, 1e-300))[:, None]
    if problem.fit_intercept:
        X = np.hstack([X, np.full((len(X), 1), problem.intercept_feature)])
    Z = X @ theta
    Dv = _derivative(problem.loss, Z, y)
    if clip_gradients:
        gnorm = np.linalg.norm(Dv, axis=1) * np.linalg.norm(X, axis=1)
        Dv = Dv * np.minimum(1.0, problem.lipschitz / np.maximum(gnorm, 1e-300))[:, None]
    return X.T @ Dv / len(y), _loss_values(problem.loss, Z, y)


def _theta(problem, radius, seed=1):
    theta = np.random.default_rng(seed).normal(size=problem.theta_shape)
    return theta * (radius / np.linalg.norm(theta))


def _lying(loss, factor=0.3):
    """``loss`` with a derivative bound ``factor`` times too small (a wrong constant)."""
    base = type(loss)
    cls = type(f"Lying{base.__name__}", (base,), {
        "derivative_bound": lambda self, *args: factor * base.derivative_bound(self, *args)})
    lying = copy.copy(loss)
    lying.__class__ = cls
    return lying


class _CountingExecutor:
    """Wraps the library's thread pool and counts the work sent to other threads."""

    def __init__(self, executor):
        self.executor = executor
        self.submitted = 0

    def submit(self, fn, *args):
        self.submitted += 1
        return self.executor.submit(fn, *args)


@pytest.fixture
def small_paths(monkeypatch):
    """Small blocks and threaded passes from any size, no Gram matrix; a thread counter."""
    monkeypatch.setattr(objective_module, "_BLOCK_BYTES", 8 * D * 29)  # 29-row blocks
    monkeypatch.setattr(objective_module, "_SPARSE_BLOCK_ROWS", 29)
    monkeypatch.setattr(objective_module, "_PARALLEL_BYTES", 0)
    monkeypatch.setattr(objective_module, "_SPARSE_PARALLEL_ROWS", 0)
    monkeypatch.setattr(objective_module, "_GRAM_MAX_PARAMS", 0)
    counter = _CountingExecutor(objective_module._executor())
    monkeypatch.setattr(objective_module, "_executor", lambda: counter)
    return counter


def _tolerance(kind):
    # float32 X: the clipping scales are computed from float32 row norms.
    return dict(rtol=1e-6, atol=1e-9) if kind == "float32" else dict(rtol=1e-11, atol=1e-14)


def _check_all_paths(problem, X, y, theta, expected, kind, counter):
    """The default one-block pass, small blocks serially, and small blocks on 2 and 4
    threads all give ``expected``; the threaded ones the same bits as the serial one."""
    one_pass = GLMObjective(problem, X, y)
    one_pass.block_size, one_pass._parallel = N, False  # one block, no threads
    np.testing.assert_allclose(one_pass.gradient(theta), expected,
                               **_tolerance(kind))
    obj = GLMObjective(problem, X, y)
    assert obj._parallel and obj.block_size < N / 16
    results = {}
    for threads in (1, 2, 4):
        before = counter.submitted
        with threadpool_limits(limits=threads, user_api="blas"):
            results[threads] = [obj.gradient(theta) for _ in range(2)]
        assert (counter.submitted > before) == (threads > 1)  # the path was taken
    np.testing.assert_allclose(results[1][0], expected, **_tolerance(kind))
    for threads, (first, again) in results.items():
        np.testing.assert_array_equal(first, again)
        np.testing.assert_array_equal(first, results[1][0], err_msg=f"{threads} threads")
    return obj


# -- the gradient kernel: tests -------------------------------------------------------------


@pytest.mark.parametrize("intercept", [0.0, INTERCEPT], ids=["no_intercept", "intercept"])
@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("name", list(LOSSES))
def test_blocked_and_threaded_gradient_equal_numpy_reference(name, kind, intercept,
                                                             small_paths):
    loss = LOSSES[name]
    X, y = _data(kind, loss)
    problem = _problem(loss, intercept)
    theta = _theta(problem, problem.norm_bound)
    expected, losses = _reference(problem, X, y, theta)
    # Row clipping matters here, so the comparison can fail.
    assert not np.allclose(expected, _reference(problem, X, y, theta, clip_rows=False)[0])
    obj = _check_all_paths(problem, X, y, theta, expected, kind, small_paths)
    with threadpool_limits(limits=2, user_api="blas"):
        np.testing.assert_allclose(obj.value(theta), losses.mean(), **_tolerance(kind))
        # The solver's fused pass gives the same numbers as the two passes.
        value, grad = obj.value_and_gradient(theta)
        assert value == obj.value(theta)
        np.testing.assert_array_equal(grad, obj.gradient(theta, clip=False))


@pytest.mark.parametrize("n", [10, 5_000, 40_000])
def test_block_partition_depends_on_the_shape_only(n):
    """Blocks and threading (the order of the floating-point sums) are the same for
    two sparse data sets of one shape whatever their numbers of non-zeros."""
    problem = PublicProblem(loss=LogisticLoss(), n_samples=n, n_features=50,
                            feature_norm=1.0, intercept_feature=0.5, y_bound=0.0,
                            norm_bound=2.0)
    y = np.ones(n)
    plans = set()
    for density in (0.001, 0.05, 1.0):
        X = sp.random(n, 50, density=density, format="csr", random_state=0)
        obj = GLMObjective(problem, X, y)
        plans.add((obj.block_size, obj._parallel, len(list(obj._blocks()))))
    assert len(plans) == 1, plans


@pytest.mark.parametrize("n", [300, 2**15 + 1])
def test_jl_projected_rows_are_dense_whatever_the_sparsity(n):
    """Sparse X times a sparse Phi is a dense n x k array, for a nearly empty and a
    full X of one shape alike (CSR, its memory would be set by the non-zeros)."""
    phi = jl_module.draw_projection(8, 40, np.random.default_rng(0), sparse=True)
    for density in (0.01, 1.0):
        X = sp.random(n, 40, density=density, format="csr", random_state=1)
        P = jl_module.project_rows(X, phi, 1.0)
        assert isinstance(P, np.ndarray) and P.shape == (n, 8), density


@pytest.mark.parametrize("intercept", [0.0, INTERCEPT], ids=["no_intercept", "intercept"])
@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("name", list(LOSSES))
def test_safety_net_reweights_rows_on_every_path(name, kind, intercept, small_paths):
    """With a derivative bound 0.3x too small, every path scales the gradients down to G."""
    loss = _lying(LOSSES[name])
    X, y = _data(kind, loss)
    problem = _problem(loss, intercept)
    theta = _theta(problem, problem.norm_bound)
    expected, _ = _reference(problem, X, y, theta)
    unclipped, _ = _reference(problem, X, y, theta, clip_gradients=False)
    assert not np.allclose(expected, unclipped)  # the net does change something
    _check_all_paths(problem, X, y, theta, expected, kind, small_paths)
    # and no per-example gradient exceeds G (rows 0, 10, ... are far outside the bound)
    obj = GLMObjective(problem, X, y)
    for i in range(0, 200, 10):
        g = obj.block_grad(slice(i, i + 1), theta)
        assert np.linalg.norm(g) <= problem.lipschitz * (1 + 1e-12)
    with threadpool_limits(limits=2, user_api="blas"):  # clip=False: the net is off
        np.testing.assert_allclose(obj.gradient(theta, clip=False), unclipped,
                                   **_tolerance(kind))


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_float32_per_example_gradients_within_g_to_float64_precision(sparse):
    """Clipping scales come from float64 norms of the float32 rows: no row exceeds G.

    (With norms rounded in float32 this failed by up to ~1e-7 relative.)
    """
    rng = np.random.default_rng(0)
    n = 2000
    X = (rng.normal(size=(n, D)) * rng.uniform(1, 1e3, size=(n, 1))).astype(np.float32)
    problem = PublicProblem(loss=LogisticLoss(), n_samples=n, n_features=D,
                            feature_norm=1.3, intercept_feature=0.0, y_bound=0.0,
                            norm_bound=100.0)
    obj = GLMObjective(problem, sp.csr_matrix(X) if sparse else X, np.ones(n))
    worst = 0.0
    for i in range(n):
        x = X[i].astype(np.float64)
        theta = (-100.0 * x / np.linalg.norm(x))[:, None]  # phi' = -1 up to e^-130
        worst = max(worst, np.linalg.norm(obj.block_grad(slice(i, i + 1), theta)))
    assert worst <= problem.lipschitz * (1 + 1e-12)


@pytest.mark.parametrize("intercept", [0.0, INTERCEPT], ids=["no_intercept", "intercept"])
@pytest.mark.parametrize("kind", INPUTS)
def test_gram_path_equals_blocked_gradient(kind, intercept, monkeypatch):
    loss = SquaredLoss()
    X, y = _data(kind, loss)
    problem = _problem(loss, intercept)
    blocked = GLMObjective(problem, X, y)
    monkeypatch.setattr(objective_module, "_PARALLEL_BYTES", 0)  # a threaded Gram build
    monkeypatch.setattr(objective_module, "_BLOCK_BYTES", 8 * D * 61)
    monkeypatch.setattr(objective_module, "_SPARSE_BLOCK_ROWS", 61)
    monkeypatch.setattr(objective_module, "_SPARSE_PARALLEL_ROWS", 0)
    gram = GLMObjective(problem, X, y)
    assert gram._gram_ok
    blocked._gram_ok = False  # this one takes the blocked path
    for radius in (0.0, 1.0, problem.norm_bound):
        theta = _theta(problem, radius, seed=int(10 * radius))
        expected, _ = _reference(problem, X, y, theta)
        g = gram.gradient(theta)
        assert gram._gram_cache is not None  # the Gram path was taken
        scale = np.abs(expected).max()
        np.testing.assert_allclose(g, blocked.gradient(theta), rtol=1e-10, atol=1e-12 * scale)
        np.testing.assert_allclose(g, expected, **_tolerance(kind))
    # the same bits whatever the threads (the Gram matrix built anew each time)
    theta = _theta(problem, 1.0)
    grads = []
    for threads in (1, 2, 4):
        with threadpool_limits(limits=threads, user_api="blas"):
            grads.append(GLMObjective(problem, X, y).gradient(theta))
    for g in grads[1:]:
        np.testing.assert_array_equal(g, grads[0])


def test_enough_announced_passes_pay_for_a_larger_gram_matrix(monkeypatch):
    """Above _GRAM_MAX_PARAMS the Gram path needs dense X, k <= 12 x the
    announced steps and partial sums within a quarter of X's memory.

    The choice reads only public quantities; the gradient it gives is the
    blocked pass's up to rounding, and noisy GD announces its T.
    """
    rng = np.random.default_rng(0)
    n, d = 30000, 299  # k = 300 parameters with the intercept; X 72 MB
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    y = np.clip(X @ rng.normal(size=d), -1.0, 1.0)
    problem = PublicProblem(SquaredLoss(), n, d, 1.5, 0.75, 1.0, 2.0)
    obj = GLMObjective(problem, X, y)
    assert not obj._gram_ok
    obj.expect_passes(24)  # 12 x 24 = 288 < 300: not worth it
    assert not obj._gram_ok
    theta = _theta(problem, 1.0)
    blocked = obj.gradient(theta)
    obj.expect_passes(25)  # 300 <= 12 x 25
    assert obj._gram_ok
    np.testing.assert_allclose(obj.gradient(theta), blocked, rtol=1e-10,
                               atol=1e-12 * np.abs(blocked).max())
    assert obj._gram_cache is not None
    # Not for sparse X, nor when the partial sums (20 x 0.7 MB) would exceed a
    # quarter of X (n = 2000: X is 4.8 MB), nor for another loss.
    for other in (GLMObjective(problem, sp.csr_matrix(X), y),
                  GLMObjective(PublicProblem(SquaredLoss(), 2000, d, 1.5, 0.75, 1.0, 2.0),
                               X[:2000], y[:2000]),
                  GLMObjective(PublicProblem(LogisticLoss(), n, d, 1.5, 0.75, 0.0, 2.0),
                               X, np.where(y > 0, 1.0, -1.0))):
        other.expect_passes(10**6)
        assert not other._gram_ok
    # A Gram build waits for another thread's pass (run beside it, with BLAS
    # threads, A^T A rounded differently): then the same bits as alone.
    import threading

    late = GLMObjective(problem, X, y)
    late.expect_passes(25)
    result = {}
    assert objective_module._PASS_LOCK.acquire(blocking=False)
    try:
        worker = threading.Thread(target=lambda: result.update(g=late.gradient(theta)))
        worker.start()
        worker.join(timeout=0.5)
        assert worker.is_alive() and "g" not in result  # waiting for the lock
    finally:
        objective_module._PASS_LOCK.release()
    worker.join(timeout=60)
    np.testing.assert_array_equal(result["g"], obj.gradient(theta))
    # Noisy GD announces its steps: a fit takes the Gram path at k = 300, T = 100.
    from dp_glm_sklearn import DPLinearRegression

    seen = []
    original = GLMObjective.expect_passes

    def spy(self, n_passes):
        original(self, n_passes)
        seen.append((n_passes, self._gram_ok))

    monkeypatch.setattr(GLMObjective, "expect_passes", spy)
    DPLinearRegression(feature_norm=1.5, y_bound=1.0, norm_bound=2.0, max_iter=100,
                       method="noisy_gd", random_state=0).fit(X, y)
    assert seen == [(100, True)]


@pytest.mark.parametrize("kind", INPUTS)
def test_gram_path_not_taken_where_the_safety_net_could_act(kind):
    """Labels beyond y_bound or theta outside the ball: the per-row net is applied."""
    loss = SquaredLoss()
    X, y = _data(kind, loss)
    # Labels beyond the public bound (a caller's bug): the net must act.
    y_wild = y.copy()
    y_wild[::7] *= 50.0
    problem = _problem(loss, INTERCEPT, y_bound=2.0, norm_bound=0.5)
    obj = GLMObjective(problem, X, y_wild)
    assert obj._gram_ok and not obj._labels_bounded
    theta = _theta(problem, 0.5)
    expected, _ = _reference(problem, X, y_wild, theta)
    unclipped, _ = _reference(problem, X, y_wild, theta, clip_gradients=False)
    assert not np.allclose(expected, unclipped)
    np.testing.assert_allclose(obj.gradient(theta), expected, **_tolerance(kind))
    assert obj._gram_cache is None
    # without the net (clip=False) the Gram path may serve: the unclipped gradient
    np.testing.assert_allclose(obj.gradient(theta, clip=False), unclipped, rtol=1e-6,
                               atol=1e-9 * np.abs(unclipped).max())
    # theta outside the ball, labels within their bound
    obj = GLMObjective(problem, X, y)
    theta = _theta(problem, 40.0)
    expected, _ = _reference(problem, X, y, theta)
    unclipped, _ = _reference(problem, X, y, theta, clip_gradients=False)
    assert not np.allclose(expected, unclipped)
    np.testing.assert_allclose(obj.gradient(theta), expected, **_tolerance(kind))
    assert obj._gram_cache is None  # not built for nothing
    np.testing.assert_allclose(obj.gradient(theta, clip=False), unclipped, rtol=1e-6,
                               atol=1e-9 * np.abs(unclipped).max())
    assert obj._gram_cache is not None


@pytest.mark.parametrize("name", ["logistic", "squared"])
def test_sparse_duplicate_entries_are_summed_before_clipping(name):
    """A CSR row stored as k copies of one entry has norm k |v|, not sqrt(k) |v|.

    Row norms taken from ``X.data`` would see sqrt(k) |v|; the objective and the
    fit template sum duplicates first, so no per-example gradient exceeds G and
    the fit equals the one on the canonical matrix.
    """
    k, d = 100, 3
    data = np.r_[np.full(k, 1.0), [0.5, -0.2]]
    indices = np.r_[np.zeros(k, dtype=int), [1, 2]]
    indptr = np.array([0, k, k + 1, k + 2])
    X = sp.csr_matrix((data, indices, indptr), shape=(3, d))
    assert not X.has_canonical_format
    loss = LOSSES[name]
    problem = PublicProblem(loss=loss, n_samples=3, n_features=d, feature_norm=1.0,
                            intercept_feature=0.0, y_bound=1.0, norm_bound=10.0)
    y = np.array([1.0, 1.0, -1.0])
    obj = GLMObjective(problem, X, y)
    theta = np.zeros((d, 1))
    theta[0, 0] = -10.0  # pushes the first row's derivative to its bound
    g = obj.block_grad(slice(0, 1), theta)
    # The clipped row has norm 1, so the gradient reaches G (it would be 10 G
    # with norms from the unsummed X.data).
    assert np.linalg.norm(g) == pytest.approx(problem.lipschitz, rel=1e-3)
    assert np.linalg.norm(g) <= problem.lipschitz * (1 + 1e-12)
    canonical = X.copy()
    canonical.sum_duplicates()
    np.testing.assert_allclose(g, GLMObjective(problem, canonical, y).block_grad(slice(0, 1),
                                                                                  theta))
    assert not X.has_canonical_format  # the caller's matrix is left as it was
    est = DPLogisticRegression(classes=[0, 1], feature_norm=1.0, random_state=0)
    a = est.fit(X, [0, 1, 1]).coef_
    b = DPLogisticRegression(classes=[0, 1], feature_norm=1.0, random_state=0).fit(
        canonical, [0, 1, 1]).coef_
    np.testing.assert_array_equal(a, b)


def test_duplicates_under_a_stale_scipy_flag_are_summed():
    """scipy caches ``has_canonical_format``: a caller who changed ``X.indices``
    in place after it was cached kept it True over duplicate entries, which
    were then clipped by the norm of their stored entries (sqrt(k) |v| for k
    copies of v) and summed in the products: the per-example gradient
    exceeded G (10 G here). The format is checked from X's arrays."""
    k, d = 100, 3
    X = sp.csr_matrix((np.r_[np.full(k, 1.0), [0.5, -0.2]],
                       np.r_[np.arange(k) % d, [1, 2]], np.array([0, k, k + 1, k + 2])),
                      shape=(3, d))
    X.indices[:k] = 0  # the first row: k copies of 1 in column 0 (norm k)
    X.has_canonical_format = True  # as cached before such a change in place
    problem = PublicProblem(loss=LOSSES["logistic"], n_samples=3, n_features=d,
                            feature_norm=1.0, intercept_feature=0.0, y_bound=1.0,
                            norm_bound=10.0)
    theta = np.zeros((d, 1))
    theta[:, 0] = -10.0
    g = GLMObjective(problem, X, np.array([1.0, 1.0, -1.0])).block_grad(slice(0, 1), theta)
    assert np.linalg.norm(g) <= problem.lipschitz * (1 + 1e-12)
    assert np.linalg.norm(g) == pytest.approx(problem.lipschitz, rel=1e-3)


def test_the_canonical_format_check_agrees_with_a_row_by_row_reference(monkeypatch):
    """Across row and block boundaries (blocks of 4 entries here), for
    empty rows, unsorted rows and duplicates, int32 and int64 indices."""
    monkeypatch.setattr(objective_module, "_CANONICAL_BLOCK", 4)
    rng = np.random.default_rng(0)
    for trial in range(400):
        n, d = rng.integers(1, 8), rng.integers(1, 6)
        A = sp.random(n, d, density=rng.uniform(0, 1), format="csr", random_state=trial)
        if A.nnz and trial % 2:
            A.indices[:] = rng.integers(0, d, size=A.nnz)  # often unsorted or duplicated
        if trial % 3 == 0:
            A.indices = A.indices.astype(np.int64)
            A.indptr = A.indptr.astype(np.int64)
        reference = all(np.all(np.diff(A.indices[A.indptr[i]:A.indptr[i + 1]]) > 0)
                        for i in range(n))
        assert objective_module._sorted_without_duplicates(A) == reference
        canonical = objective_module.canonical_rows(A)
        assert objective_module._sorted_without_duplicates(canonical)
        np.testing.assert_allclose(canonical.toarray(), A.toarray())


@pytest.mark.parametrize("fmt, change", [
    ("csc", lambda X: X.indices.__setitem__(0, -1)),
    ("csc", lambda X: X.indices.__setitem__(0, 10**6)),
    ("coo", lambda X: X.row.__setitem__(0, 99)),
    ("csr", lambda X: X.indptr.__setitem__(3, 0)),
])
def test_malformed_index_arrays_of_any_format_are_refused_before_scipy_converts_them(
        fmt, change):
    # scipy's CSC-to-CSR conversion, run by the input check before the CSR
    # checks, wrote out of bounds through a bad index (heap corruption or a
    # crash) and the fit was charged (final diff review).
    from dp_glm_sklearn import DPGridSearchCV
    from dp_glm_sklearn.model_selection import dp_score

    rng = np.random.default_rng(0)
    y = rng.normal(size=50)
    good = DPLinearRegression(feature_norm=1.0, y_bound=1.0, epsilon=1.0,
                              accountant=PrivacyAccountant()).fit(
        sp.random(50, 5, density=0.4, format="csr", random_state=0), y)
    acc = PrivacyAccountant(epsilon=10.0)
    for fit in (lambda X: DPLinearRegression(feature_norm=1.0, y_bound=1.0, epsilon=1.0,
                                             accountant=acc).fit(X, y),
                lambda X: DPGridSearchCV(DPLinearRegression(feature_norm=1.0, y_bound=1.0),
                                         {"norm_bound": [1.0, 2.0]}, epsilon=1.0,
                                         accountant=acc).fit(X, y),
                lambda X: dp_score(good, X, y, epsilon=1.0, accountant=acc)):
        X = sp.random(50, 5, density=0.4, format=fmt, random_state=0)
        change(X)
        with pytest.raises(ValueError, match="malformed sparse matrix.*Nothing was charged"):
            fit(X)
    assert acc.history == []


@pytest.mark.parametrize("make", ["coo_array", "csr_array"])
def test_a_1d_sparse_array_gets_the_2d_error_before_the_charge(make):
    # scipy's sparse arrays may be 1-D: the structure check unpacked two axes
    # and failed with an IndexError or "not enough values to unpack".
    from dp_glm_sklearn import DPGridSearchCV
    from dp_glm_sklearn.model_selection import dp_score

    if not hasattr(sp, make):
        pytest.skip(f"scipy has no {make}")
    try:
        X = getattr(sp, make)(np.arange(1.0, 31.0))
    except (TypeError, ValueError):
        X = None
    if X is None or X.ndim != 1:  # (scipy before 1.13 made it a row: shape (1, 30))
        pytest.skip("this scipy has no 1-D sparse arrays")
    y = np.linspace(-1, 1, 30)
    good = DPLinearRegression(feature_norm=1.0, y_bound=1.0, epsilon=1.0,
                              accountant=PrivacyAccountant()).fit(np.ones((30, 1)), y)
    acc = PrivacyAccountant(epsilon=10.0)
    for fit in (lambda: DPLinearRegression(feature_norm=1.0, y_bound=1.0, accountant=acc).fit(X, y),
                lambda: DPGridSearchCV(DPLinearRegression(feature_norm=1.0, y_bound=1.0),
                                       {"norm_bound": [1.0, 2.0]}, epsilon=1.0,
                                       accountant=acc).fit(X, y),
                lambda: dp_score(good, X, y, epsilon=1.0, accountant=acc)):
        with pytest.raises(ValueError, match=r"Expected 2D input.*shape \(30,\)"):
            fit()
    assert acc.history == []


@pytest.mark.parametrize("index", [9, -1])
def test_a_column_index_out_of_range_is_refused_before_the_charge(index):
    # scipy checks the indices when the matrix is built, not after a change in
    # place: the fit charged, then released a NaN model (9) or corrupted the
    # heap (-1).
    X = sp.csr_matrix((np.ones(4), np.array([0, 1, 0, 1]), np.array([0, 2, 4])), shape=(2, 4))
    X.indices[1] = index
    acc = PrivacyAccountant(epsilon=10.0)
    with pytest.raises(ValueError, match="malformed sparse matrix.*Nothing was charged"):
        DPLogisticRegression(feature_norm=1.0, classes=[0, 1], accountant=acc).fit(X, [0, 1])
    assert acc.history == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_during_a_pass_can_fit():
    # The pass lock was process-wide and survived a fork: a child forked
    # while another thread's pass held it hung in its first Gram build (a
    # squared-loss fit), after the charge.  Here this thread holds the lock
    # at the fork; the child must fit within its alarm.
    from dp_glm_sklearn import DPLinearRegression, PrivacyAccountant

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 3)), rng.normal(size=200)
    assert objective_module._PASS_LOCK.acquire(blocking=False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
            pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.alarm(30)  # the old code hangs: end the child
                DPLinearRegression(random_state=0, accountant=PrivacyAccountant()).fit(X, y)
                code = 0
            finally:
                os._exit(code)
    finally:
        objective_module._PASS_LOCK.release()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_pass_workers_run_with_the_callers_numpy_error_state():
    # Worker threads started with numpy's default error state (overflow
    # warns), so a fit's np.errstate(all="ignore") did not cover their part
    # of a pass: which rows warned depended on the data.
    problem = PublicProblem(SquaredLoss(), 70000, 8, 1.0, 0.0, 0.0, 1.0)
    X = np.random.default_rng(0).normal(size=(70000, 8))
    obj = GLMObjective(problem, X, np.zeros(70000))
    assert obj._parallel
    import threading

    first_two = threading.Barrier(2, timeout=30)  # two groups run in two threads
    calls = []

    def work(blocks):
        calls.append(None)
        if len(calls) <= 2:
            first_two.wait()
        return threading.get_ident(), np.geterr()["over"]

    with threadpool_limits(limits=2, user_api="blas"), np.errstate(all="ignore"):
        states = obj._map_blocks(work)
    assert len({ident for ident, _ in states}) == 2
    assert {state for _, state in states} == {"ignore"}


@pytest.mark.parametrize("huge_row", [False, True], ids=["plain", "a tamed row"])
def test_sparse_row_blocks_are_kept_as_views_and_give_the_same_gradient(huge_row, monkeypatch):
    """CSR row blocks and their transposes are built once (scipy's constructors
    copied each block's arrays at every pass) as views of X: later passes give
    the same bits, and a block with a tamed (copied) row is not kept."""
    monkeypatch.setattr(objective_module, "_SPARSE_BLOCK_ROWS", 64)
    rng = np.random.default_rng(0)
    n, d = 300, 40
    X = sp.random(n, d, density=0.2, format="csr", random_state=1)
    if huge_row:
        X.data[X.indptr[5]] = 1e300
    y = rng.integers(0, 2, n)
    problem = PublicProblem(loss=LogisticLoss(), n_samples=n, n_features=d,
                            feature_norm=1.0, intercept_feature=0.5, y_bound=0.0,
                            norm_bound=10.0)
    theta = rng.normal(size=(d + 1, 1))
    obj = GLMObjective(problem, X, y)
    first = obj.gradient(theta)
    kept = obj._views
    assert len(kept) == 5 - huge_row  # (the block of row 5 is a tamed copy)
    for Xb, XbT in kept.values():
        assert np.shares_memory(Xb.data, X.data) and XbT.data is Xb.data
        np.testing.assert_array_equal(XbT.toarray(), Xb.toarray().T)
    np.testing.assert_array_equal(obj.gradient(theta), first)
    fresh = GLMObjective(problem, X, y)
    fresh._views = _NeverKept()
    np.testing.assert_array_equal(fresh.gradient(theta), first)


class _NeverKept(dict):
    def __setitem__(self, key, value):
        pass


def test_row_norms_and_taming_work_in_blocks_bounded_by_public_sizes(monkeypatch):
    """Float32 sparse norms and the taming of huge rows made arrays the size
    of X's non-zeros and of all huge rows, after the charge: under a memory
    limit the failure told those counts (red-team review, session 31).  In
    blocks they give the same norms and exponents."""
    X = sp.random(500, 30, density=0.1, format="csr", random_state=2, dtype=np.float64)
    X.data *= 1e3
    X.data[X.indptr[7]:X.indptr[9]] = 1e300  # huge rows, tamed
    X.data[X.indptr[400]] = -1e305
    X32 = X.copy()
    X32.data = np.clip(X.data, -3e38, 3e38).astype(np.float32)
    whole = np.sqrt(np.asarray(X32.astype(np.float64).multiply(X32.astype(np.float64))
                               .sum(axis=1)).ravel())
    for block_rows, block_entries in [(2**14, 2**20), (7, 5), (1, 1), (64, 3)]:
        got = objective_module._sparse_row_norms_float64(X32, block_rows, block_entries)
        np.testing.assert_allclose(got, whole, rtol=1e-15)
    assert objective_module._sparse_row_norms_float64(sp.csr_matrix((4, 3)), 2, 2).tolist() \
        == [0.0] * 4
    expected = objective_module.tame_exponents_and_norms(X, 1.0)
    monkeypatch.setattr(objective_module, "_TAME_BLOCK_ENTRIES", 30)  # one row a block
    blocked = objective_module.tame_exponents_and_norms(X, 1.0)
    assert expected[0] is not None and np.count_nonzero(expected[0]) == 3
    np.testing.assert_array_equal(blocked[0], expected[0])
    np.testing.assert_array_equal(blocked[1], expected[1])
    dense = X.toarray()
    np.testing.assert_array_equal(objective_module.tame_exponents_and_norms(dense, 1.0)[0],
                                  expected[0])


@pytest.mark.parametrize("method", ["noisy_gd", "output_perturbation", "jl"])
def test_the_reserved_memory_counts_the_objectives_row_vectors(method):
    """A tall, narrow X passed the reservation, was charged, then failed on the
    objective's n-vectors (norms, scales): they are counted now."""
    from dp_glm_sklearn.mechanisms import _ROW_VECTORS, working_memory

    sizes = []
    for n in (10_000, 1_000_000):
        est = DPLinearRegression(method=method, feature_norm=1.0, y_bound=1.0,
                                 projection_dim=2 if method == "jl" else None)
        problem, chosen, calibration = est._public_plan(n, 4, SquaredLoss(), 1.0, 1.0, 1e-6,
                                                        sparse=True)
        sizes.append(working_memory(chosen, problem, calibration, sparse=True))
    assert sizes[1] - sizes[0] >= 8 * _ROW_VECTORS * (1_000_000 - 10_000)
