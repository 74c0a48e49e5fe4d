"""scikit-learn's estimator checks over every public estimator, found by discovery.

The run reports 7 skips: scikit-learn's own array-API check, skipped by
scikit-learn unless the environment sets ``SCIPY_ARRAY_API=1`` (the
estimators take numpy and scipy.sparse input only).
"""

import inspect
import warnings

import pytest
from sklearn.base import BaseEstimator
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer
from sklearn.utils.estimator_checks import parametrize_with_checks

import dp_glm_sklearn
from dp_glm_sklearn import PrivacyLeakWarning


def all_estimators():
    """Every public BaseEstimator subclass exported by the package."""
    return sorted(
        (name, obj)
        for name, obj in vars(dp_glm_sklearn).items()
        if inspect.isclass(obj) and issubclass(obj, BaseEstimator) and not name.startswith("_")
    )


#: checks that cannot pass for a noisy estimator, each with its reason (none so far).
EXPECTED_FAILED_CHECKS = {}

#: Init parameters of estimators that cannot be built without arguments
#: (meta-estimators), by class name. Some checks fit on 10 samples: a small
#: validation part leaves every class in the training part.
INIT_PARAMS = {
    "DPGridSearchCV": lambda: dict(
        estimator=dp_glm_sklearn.DPLogisticRegression(), param_grid={"norm_bound": [1.0, 10.0]},
        validation_fraction=0.2,
        random_state=0,
    ),
    "DPRandomizedSearchCV": lambda: dict(
        estimator=dp_glm_sklearn.DPLogisticRegression(),
        param_distributions={"norm_bound": [1.0, 10.0]},
        mean_candidates=2.0,
        validation_fraction=0.2,
        random_state=0,
    ),
    "DPConfidenceBoosting": lambda: dict(
        estimator=dp_glm_sklearn.DPLogisticRegression(), n_models=2, random_state=0,
    ),
}


def _instances():
    for name, Est in all_estimators():
        yield Est(**INIT_PARAMS.get(name, dict)())
    # A search over a Pipeline: its preprocessing probes must raise the
    # errors the checks expect (a TypeError for a dict in X, 0 features).
    yield dp_glm_sklearn.DPGridSearchCV(
        make_pipeline(Normalizer(), dp_glm_sklearn.DPLogisticRegression()),
        {"dplogisticregression__norm_bound": [1.0, 10.0]}, validation_fraction=0.2,
        random_state=0)


def test_discovery_finds_the_estimators():
    names = {name for name, _ in all_estimators()}
    assert {"DPLinearRegression", "DPLogisticRegression", "DPHuberRegressor"} <= names


def _with_listed_checks(mark):
    """``mark`` with its checks in a list: scikit-learn before 1.9 passes a
    generator, which pytest deprecates (an error from pytest 10)."""
    names, values = mark.args
    return pytest.mark.parametrize(names, list(values), **mark.kwargs)


@_with_listed_checks(parametrize_with_checks(
    list(_instances()),
    expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS.get(type(est).__name__, {}),
))
def test_sklearn_compatible_estimator(estimator, check):
    with warnings.catch_warnings():
        # The checks fit classifiers without declaring classes; the warning
        # that the label set is read from the data is expected there.
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        check(estimator)


def test_every_dp_estimator_declares_it_may_score_poorly():
    # scikit-learn's check_regressors_train / check_classifiers_train demand
    # R^2 > 0.5 / accuracy > 0.83 unless poor_score is set.  DPHuberRegressor
    # did not set it and passed only at check_estimator's fixed seed 0 (it
    # scored above 0.5 at 11 of 40 seeds); DPLogisticRegression with output
    # perturbation failed at 16 of 20 seeds.
    from sklearn.utils import get_tags

    for est in (dp_glm_sklearn.DPLinearRegression(), dp_glm_sklearn.DPHuberRegressor()):
        assert get_tags(est).regressor_tags.poor_score
    assert get_tags(dp_glm_sklearn.DPLogisticRegression()).classifier_tags.poor_score
