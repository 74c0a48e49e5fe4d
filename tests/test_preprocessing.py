"""PublicRangeScaler: public ranges onto [-1, 1], row by row, nothing learned."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.pipeline import make_pipeline

from dp_glm_sklearn import (
    DPGridSearchCV,
    DPLogisticRegression,
    PrivacyAccountant,
    PrivacyLeakWarning,
    PublicRangeScaler,
    leaky_steps,
)

LOW, HIGH = np.array([18.0, 0.0, -5.0]), np.array([90.0, 80.0, 5.0])


def _rows(n=50, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(LOW - 10, HIGH + 10, size=(n, 3))


def test_each_range_maps_onto_minus_one_one_row_by_row():
    X = np.array([LOW, HIGH, (LOW + HIGH) / 2, LOW + 0.25 * (HIGH - LOW)])
    out = PublicRangeScaler(low=LOW, high=HIGH).fit_transform(X)
    np.testing.assert_allclose(out, [[-1, -1, -1], [1, 1, 1], [0, 0, 0], [-0.5, -0.5, -0.5]])
    # Each row alone: a subset's transform is the transform's subset.
    X = _rows()
    scaler = PublicRangeScaler(low=LOW, high=HIGH).fit(X)
    np.testing.assert_array_equal(scaler.transform(X[7:9]), scaler.transform(X)[7:9])


def test_values_outside_the_range_are_clipped_unless_asked_not_to():
    X = _rows()
    clipped = PublicRangeScaler(low=LOW, high=HIGH).fit_transform(X)
    assert clipped.min() == -1.0 and clipped.max() == 1.0  # some rows lie outside
    assert np.all(np.linalg.norm(clipped, axis=1) <= np.sqrt(3) + 1e-12)
    raw = PublicRangeScaler(low=LOW, high=HIGH, clip=False).fit_transform(X)
    np.testing.assert_allclose(raw, (X - (LOW + HIGH) / 2) / ((HIGH - LOW) / 2))
    np.testing.assert_array_equal(np.clip(raw, -1, 1), clipped)


def test_fit_learns_nothing_from_the_values():
    # Two data sets of the same width leave the same state: nothing of the
    # records is kept, and scikit-learn's tags say no fit is needed.
    a = PublicRangeScaler(low=LOW, high=HIGH).fit(_rows(seed=1))
    b = PublicRangeScaler(low=LOW, high=HIGH).fit(_rows(n=7, seed=2) * 1e6)
    assert vars(a).keys() == vars(b).keys()
    for key in vars(a):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
    unfitted = PublicRangeScaler(low=LOW, high=HIGH)
    np.testing.assert_array_equal(unfitted.transform(_rows()), a.transform(_rows()))
    assert not hasattr(unfitted, "n_features_in_")  # transform did not fit it


def test_a_pipeline_of_it_is_private_as_a_whole():
    rng = np.random.default_rng(0)
    X = _rows(n=400)
    y = (X[:, 0] + rng.normal(0, 10, 400) > 54).astype(int)
    model = make_pipeline(PublicRangeScaler(low=LOW, high=HIGH),
                          DPLogisticRegression(feature_norm=np.sqrt(3), classes=[0, 1]))
    assert leaky_steps(model) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        DPGridSearchCV(model, {"dplogisticregression__norm_bound": [1.0, 5.0]},
                       accountant=PrivacyAccountant(), random_state=0).fit(X, y)
    fitted = model.set_params(dplogisticregression__accountant=PrivacyAccountant()).fit(X, y)
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.predict_proba(X), fitted.predict_proba(X))


def test_dtypes_and_sparse_input():
    X = _rows()
    assert PublicRangeScaler(low=LOW, high=HIGH).fit_transform(
        X.astype(np.float32)).dtype == np.float32
    symmetric = PublicRangeScaler(low=-HIGH, high=HIGH)
    Xs = sp.random(30, 3, density=0.4, format="csr", random_state=0) * 100
    out = symmetric.fit_transform(Xs)
    assert sp.issparse(out)
    np.testing.assert_allclose(out.toarray(), symmetric.fit_transform(Xs.toarray()))
    with pytest.raises(ValueError, match="symmetric around 0"):
        PublicRangeScaler(low=LOW, high=HIGH).fit_transform(Xs)
    nan = X.copy()
    nan[0, 1] = np.nan
    out = PublicRangeScaler(low=LOW, high=HIGH).fit_transform(nan)
    assert np.isnan(out[0, 1]) and np.isfinite(np.delete(out.ravel(), 1)).all()


@pytest.mark.parametrize("params, match", [
    (dict(low=[0, 0], high=[1, 1, 1]), "'low' parameter .* has 2 values; X has 3"),
    (dict(low=1.0, high=1.0), "low < high"),
    (dict(low=0.0, high=np.inf), "finite ranges"),
    (dict(low="a", high=1.0), "'low' parameter .* must be a float or an array-like"),
    (dict(low=True, high=2.0), "'low' parameter"),
    (dict(low=[[0, 0, 0]], high=1.0), "'low' parameter"),
    (dict(clip="yes"), "'clip' parameter .* must be a bool"),
])
def test_bad_ranges_are_refused_naming_the_parameter(params, match):
    with pytest.raises(ValueError, match=match):
        PublicRangeScaler(**params).fit(_rows())


def test_a_subclass_is_flagged_as_learning():
    # Its fit may learn (a review's subclass took the data's minima and
    # maxima and published them unflagged): only PublicRangeScaler itself is
    # tagged as needing no fit.
    class DataRangeScaler(PublicRangeScaler):
        def fit(self, X, y=None):
            self.low, self.high = np.min(X, axis=0), np.max(X, axis=0)
            return super().fit(X, y)

    clf = DPLogisticRegression(feature_norm=1.5, classes=[0, 1])
    assert leaky_steps(make_pipeline(DataRangeScaler(), clf)) == [
        "'datarangescaler' (DataRangeScaler)"]
    assert leaky_steps(make_pipeline(PublicRangeScaler(), clf)) == []


def test_ranges_near_the_float_limit_do_not_overflow():
    # (low + high) / 2 overflowed to inf: every value came out -1 or 0.
    out = PublicRangeScaler(low=-1e308, high=1e308).fit_transform([[-1e308, 5e307, 1e308]])
    np.testing.assert_allclose(out, [[-1.0, 0.5, 1.0]])
    out = PublicRangeScaler(low=1e308, high=1.7e308).fit_transform([[1.35e308, 1.7e308, 1e308]])
    np.testing.assert_allclose(out, [[0.0, 1.0, -1.0]])
