"""One record with astronomically large (finite) entries changes nothing.

Such a row is clipped to ``feature_norm`` like any other, so the released
model must be finite and the same as for a row of the same direction and
moderate size.  Before rows were tamed (``_objective.tame_exponents_and_norms``), the row's
norm (or its scores ``x @ theta``) overflowed to inf, its clipping scale
became 0 and its gradient NaN (0 * inf), which the safety net let through:
the model came out all NaN, and one record told neighbouring data sets apart.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from dp_glm_sklearn import (
    DPHuberRegressor,
    DPLinearRegression,
    DPLogisticRegression,
    PrivacyAccountant,
)
from dp_glm_sklearn._objective import (
    GLMObjective,
    PublicProblem,
    _row_norms_float64,
    tame_exponents_and_norms,
    tamed_block,
)
from dp_glm_sklearn.losses import LogisticLoss

N, D = 40, 4
METHODS = [
    dict(method="noisy_gd", max_iter=5),
    dict(method="jl", projection_dim=2, max_iter=5),
    dict(method="output_perturbation"),
]
ESTIMATORS = {
    "logistic-binary": (DPLogisticRegression, dict(classes=[0, 1]), 2),
    "logistic-3-class": (DPLogisticRegression, dict(classes=[0, 1, 2]), 3),
    "linear": (DPLinearRegression, {}, None),
    "huber": (DPHuberRegressor, {}, None),
}
# (format, dtype, huge values of c); c = 10 is the reference.
FORMATS = [
    ("dense", np.float64, (1e200, 1.7e308)),
    ("dense", np.float32, (1e30, 3e38)),
    ("csr", np.float64, (1e200, 1.7e308)),
]


def _data(n_classes):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D))
    if n_classes is None:
        y = np.clip(X @ [0.5, -0.5, 0.25, 0.0], -1, 1)
    else:
        y = np.arange(N) % n_classes
    return X, y


def _fit(name, params, fmt, dtype, c):
    cls, extra, n_classes = ESTIMATORS[name]
    X, y = _data(n_classes)
    X[0] = c
    X = X.astype(dtype)
    if fmt == "csr":
        X = sp.csr_matrix(X)
    est = cls(epsilon=1.0, feature_norm=1.0, random_state=0, **extra, **params)
    return est.fit(X, y)


@pytest.mark.parametrize("fmt, dtype, huge", FORMATS, ids=lambda v: getattr(v, "__name__", v))
@pytest.mark.parametrize("params", METHODS, ids=lambda p: p["method"])
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_huge_row_gives_the_model_of_a_moderate_one(name, params, fmt, dtype, huge):
    ref = _fit(name, params, fmt, dtype, 10.0)
    assert np.all(np.isfinite(ref.coef_))
    for c in huge:
        est = _fit(name, params, fmt, dtype, c)
        assert np.all(np.isfinite(est.coef_)) and np.all(np.isfinite(est.intercept_))
        np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-9, atol=0)
        np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("fmt", ["dense", "csr", "csc"])
def test_huge_rows_are_tamed_block_by_block_never_copying_x(fmt):
    to = {"dense": np.asarray, "csr": sp.csr_matrix, "csc": sp.csc_matrix}[fmt]
    X = np.arange(12.0).reshape(4, 3) - 5
    plain = to(X)
    assert tame_exponents_and_norms(plain, 1.0)[0] is None  # nothing huge
    assert tamed_block(plain, None, slice(0, 4)) is not None
    X32 = to(np.full((2, 3), 3e38, dtype=np.float32))
    assert tame_exponents_and_norms(X32, 1.0)[0] is None  # float32 never exceeds the limit
    X[1] = [-1.7e308, 1e300, 0.0]
    huge = to(X)
    exponents, norms = tame_exponents_and_norms(huge, 1.0)
    assert exponents.tolist()[0] == 0 and exponents[1] > 1000 and not exponents[2:].any()
    tamed = tamed_block(huge, exponents, slice(0, 4))
    dense = tamed.toarray() if sp.issparse(tamed) else tamed
    before = huge.toarray() if sp.issparse(huge) else huge
    np.testing.assert_array_equal(np.delete(dense, 1, 0), np.delete(before, 1, 0))
    m = np.abs(dense[1]).max()
    assert 2.0 <= m < 4.0
    np.testing.assert_array_equal(dense[1] / m, before[1] / 1.7e308)  # same direction
    np.testing.assert_array_equal(before[1], [-1.7e308, 1e300, 0.0])  # input untouched
    np.testing.assert_array_equal(norms, _row_norms_float64(tamed))
    # A block without a huge row is X's own rows (a view for dense X).
    block = tamed_block(huge, exponents, slice(2, 4))
    assert fmt != "dense" or np.shares_memory(block, huge)


def test_a_huge_row_costs_one_block_not_a_copy_of_x():
    # Taming copied the whole of X when one row was huge: memory (and time)
    # that one record changed 20-fold.  Now the objective holds X itself.
    X = np.random.default_rng(0).normal(size=(50, 4))
    X[3] = 1.7e308
    obj = _objective(X)
    assert obj.X is X and np.isfinite(obj.aug_norms).all()
    rows, scales = obj._block(slice(0, 50))
    np.testing.assert_array_equal(np.delete(rows, 3, 0), np.delete(X, 3, 0))
    assert np.all(np.linalg.norm(rows * scales[:, None], axis=1) <= 1.0 * (1 + 1e-12))


def _objective(X):
    problem = PublicProblem(LogisticLoss(), X.shape[0], X.shape[1], 1.0, 0.5, 0.0, 10.0)
    return GLMObjective(problem, X, np.ones(X.shape[0]))


def test_clip_zeroes_non_finite_per_example_gradients():
    obj = _objective(np.ones((4, 2)))
    G = obj.problem.lipschitz
    for D in (np.array([[0.1], [np.nan], [np.inf], [1e6]]),
              np.array([[0.1, 0.0], [np.nan, 0.0], [0.0, -np.inf], [1e6, 1e6]])):
        D = D.copy()
        obj._clip(D, slice(0, 4))
        assert np.isfinite(D).all()
        np.testing.assert_array_equal(D[1:3], 0.0)
        assert D[0, 0] == 0.1
        gnorm = np.linalg.norm(D, axis=1) * obj.aug_norms
        assert np.all(gnorm <= G * (1 + 1e-12)) and gnorm[3] > 0.99 * G


def test_clip_fast_path_sees_nan():
    # The one-column fast path compares max|D| * max norm with G: NaN must not pass it.
    obj = _objective(np.full((3, 2), 0.1))
    D = np.array([[0.0], [np.nan], [0.0]])
    obj._clip(D, slice(0, 3))
    np.testing.assert_array_equal(D, 0.0)


@pytest.mark.parametrize("kwargs", [dict(feature_norm=1e200),
                                    dict(feature_norm=1e10, norm_bound=1e300),
                                    dict(y_bound=(-1.7e308, 1.7e308)),
                                    dict(norm_bound=1e150),
                                    dict(feature_norm=1e-300)])
def test_extreme_public_bounds_are_refused(kwargs):
    X, y = _data(None)
    est = DPLinearRegression(epsilon=1.0, method="noisy_gd", **kwargs)
    with pytest.raises(ValueError, match="feature_norm.*norm_bound.*y_bound"):
        est.fit(X, y)
    assert not hasattr(est, "coef_")
    with pytest.raises(ValueError, match="between 1e-100 and 1e\\+100"):
        PublicProblem(LogisticLoss(), 10, 2, 1e200, 0.0, 0.0, 1.0)


@pytest.mark.parametrize("sparse", [False, True])
def test_taming_warns_about_nothing(sparse):
    # log2 of an all-zero row warned "divide by zero", only when a huge row
    # was present too: a message that depended on two private rows.
    X = np.array([[1e300, -1e300], [0.0, 0.0], [1.0, 2.0]])
    X = sp.csr_matrix(X) if sparse else X
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exponents, norms = tame_exponents_and_norms(X, 1.0)
        tamed_block(X, exponents, slice(0, 3))
    assert np.all(np.isfinite(norms))


def _warnings_of(func, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        func(*args)
    return sorted({(w.category.__name__, str(w.message)) for w in caught})


@pytest.mark.parametrize("fmt, dtype, huge", FORMATS, ids=lambda v: getattr(v, "__name__", v))
@pytest.mark.parametrize("params", METHODS, ids=lambda p: p["method"])
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_huge_row_shows_the_warnings_of_a_moderate_one(name, params, fmt, dtype, huge):
    # Entries of both signs: their sum in the finiteness check overflowed,
    # and numpy warned "overflow (or invalid value) encountered in reduce"
    # for this data set and not for its neighbour.
    signs = np.array([1.0, 1.0, -1.0, -1.0])
    expected = _warnings_of(_fit, name, params, fmt, dtype, 10.0 * signs)
    for c in huge:
        assert _warnings_of(_fit, name, params, fmt, dtype, c * signs) == expected


def _wrappers(name):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    from dp_glm_sklearn import DPConfidenceBoosting, DPGridSearchCV, DPRandomizedSearchCV

    cls, extra, _ = ESTIMATORS[name]
    base = cls(feature_norm=1.0, max_iter=5, **extra)
    grid = {"norm_bound": [1.0, 4.0]}
    scorings = [None, "loss"] if cls is DPLogisticRegression else [
        None, "loss", "neg_mean_squared_error"]
    # An accountant of the test's own (shared by its wrappers): a random-stopping
    # event left in the process-wide default ledger makes every later fit
    # compose by PLD (slow).
    kw = dict(epsilon=1.0, random_state=0, accountant=PrivacyAccountant())
    wrappers = [DPGridSearchCV(base, grid, scoring=s, **kw) for s in scorings]
    wrappers += [
        DPRandomizedSearchCV(base, grid, **kw),
        DPConfidenceBoosting(base, n_models=2, **kw),
        cls(feature_norm=1.0, max_iter=5, norm_bound="auto", **kw, **extra),
        DPGridSearchCV(make_pipeline(FunctionTransformer(), base),
                       {f"{type(base).__name__.lower()}__norm_bound": [1.0, 4.0]},
                       scoring="loss", **kw),
        # A user's transform (public parameters) that overflows on a huge row.
        DPGridSearchCV(make_pipeline(FunctionTransformer(lambda Z: np.tanh(Z * 10.0)), base),
                       {f"{type(base).__name__.lower()}__norm_bound": [1.0, 4.0]}, **kw),
    ]
    return wrappers


@pytest.mark.parametrize("name", ["logistic-binary", "logistic-3-class", "linear", "huber"])
def test_searches_warn_about_no_huge_validation_row(name):
    # Validation rows are scored unclipped: a huge one overflowed the
    # predictions or the losses, and numpy's warning told whether the record
    # was there (and, for the random search, how many candidates were tried).
    cls, extra, n_classes = ESTIMATORS[name]
    X, y = _data(n_classes)
    X = np.repeat(X, 3, axis=0)  # 120 rows, every part holds a huge one
    y = np.repeat(y, 3)
    X[::4] = 1.7e308 * (-1.0) ** np.arange(D)
    for wrapper in _wrappers(name):
        shown = _warnings_of(wrapper.fit, X, y)
        assert [w for w in shown if w[0] == "RuntimeWarning"] == [], type(wrapper).__name__


@pytest.mark.parametrize("params", METHODS, ids=lambda p: p["method"])
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_numpys_error_mode_does_not_let_one_record_raise(name, params):
    # Under np.seterr(all="raise") (or "warn"), a finite record with a tiny
    # entry made a product underflow in training: the fit raised (after the
    # charge) for this data set and not for its neighbour.
    cls, extra, n_classes = ESTIMATORS[name]
    X, y = _data(n_classes)
    X[0] = [1e-300, 1.0, -1.0, 0.5]
    acc = PrivacyAccountant()
    with np.errstate(all="raise"):
        est = cls(epsilon=1.0, feature_norm=1.0, random_state=0, accountant=acc, **extra,
                  **params).fit(X, y)
    assert np.all(np.isfinite(est.coef_)) and len(acc.history) == 1


@pytest.mark.parametrize("dtype, value", [(np.float64, 1e308), (np.float32, 3e38)])
def test_duplicate_sparse_entries_summing_to_inf_are_refused_before_the_charge(dtype, value):
    # Each stored entry is finite, so validation passed; their sum (taken by
    # the fit, after the charge) was inf, and the model released was NaN:
    # one record told apart with certainty.
    rng = np.random.default_rng(0)
    n, d = 50, 3
    dense = (rng.normal(size=(n, d)) / 3).astype(dtype)
    rows = [[(0, value), (0, value), (1, 0.5)]] + [list(enumerate(row)) for row in dense[1:]]
    indptr = np.cumsum([0] + [len(r) for r in rows])
    X = sp.csr_matrix((np.array([v for r in rows for _, v in r], dtype=dtype),
                       np.array([j for r in rows for j, _ in r]), indptr), shape=(n, d))
    assert np.isfinite(X.data).all() and not X.has_canonical_format
    acc = PrivacyAccountant(epsilon=5.0, delta=1e-3)
    with pytest.raises(ValueError, match="Input X contains infinity"):
        DPLinearRegression(accountant=acc).fit(X, np.zeros(n))
    assert acc.history == []
