"""scikit-learn's estimator checks over every public estimator, found by discovery.

The run reports 7 skips: scikit-learn's own array-API check, skipped by
scikit-learn unless the environment sets ``SCIPY_ARRAY_API=1`` (the
estimators take numpy and scipy.sparse input only).
"""

import inspect
import warnings

import numpy as np
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


def test_every_estimator_and_wrapper_says_it_needs_y():
    # The searches and boosting copied the wrapped estimator's type and score
    # tags but left target_tags.required False, while they refuse y=None.
    from sklearn.preprocessing import StandardScaler
    from sklearn.utils import get_tags

    X = np.random.default_rng(0).normal(size=(50, 2))
    for inner in (dp_glm_sklearn.DPLinearRegression(), dp_glm_sklearn.DPLogisticRegression(),
                  make_pipeline(StandardScaler(), dp_glm_sklearn.DPLinearRegression())):
        # (a Pipeline's own tags say it needs no y)
        grid = {"max_iter": [5, 10]} if not hasattr(inner, "steps") else {
            "dplinearregression__max_iter": [5, 10]}
        for wrapper in (dp_glm_sklearn.DPGridSearchCV(inner, grid),
                        dp_glm_sklearn.DPRandomizedSearchCV(inner, grid),
                        dp_glm_sklearn.DPConfidenceBoosting(inner)):
            assert get_tags(wrapper).target_tags.required, type(wrapper).__name__
            with pytest.raises(ValueError, match="requires y to be passed"):
                wrapper.fit(X, None)


def _with_own_accountant():
    own = dict(accountant=dp_glm_sklearn.PrivacyAccountant(epsilon=float("inf"), delta=0.5))
    yield dp_glm_sklearn.DPLinearRegression(**own)
    yield dp_glm_sklearn.DPLogisticRegression(**own)
    yield dp_glm_sklearn.DPGridSearchCV(**INIT_PARAMS["DPGridSearchCV"](), **own)


#: The checks that fit twice with one integer seed and compare the models.
SAME_SEED_REFIT_CHECKS = {"check_fit_idempotent", "check_supervised_y_2d",
                          "check_regressor_data_not_an_array", "check_regressors_int",
                          "check_classifier_data_not_an_array"}


@pytest.mark.parametrize("estimator", list(_with_own_accountant()), ids=lambda e: type(e).__name__)
def test_estimator_checks_with_an_accountant_of_ones_own(estimator):
    """On a ledger of the user's an integer seed draws a new noise stream per
    fit (two releases sharing noise would cancel it: docs/randomness.md), so
    the estimators are tagged non-deterministic there (the tag said
    deterministic), and the only checks that fail are those that refit with
    one seed and expect the same model; scikit-learn runs them whatever the tag."""
    from sklearn.utils import get_tags
    from sklearn.utils.estimator_checks import check_estimator

    assert get_tags(estimator).non_deterministic
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(estimator, on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert set(failed) <= SAME_SEED_REFIT_CHECKS
    assert "check_fit_idempotent" in failed  # the new stream, seen
    for exception in failed.values():
        assert isinstance(exception, AssertionError) and "Not equal" in str(exception)


@pytest.mark.parametrize("Est", [dp_glm_sklearn.DPHuberRegressor,
                                 dp_glm_sklearn.DPConfidenceBoosting])
def test_the_determinism_tag_follows_the_accountant(Est):
    from sklearn.utils import get_tags

    make = (lambda **kw: Est(dp_glm_sklearn.DPHuberRegressor(), **kw)) if Est is \
        dp_glm_sklearn.DPConfidenceBoosting else Est
    assert not get_tags(make()).non_deterministic  # the built-in default replays a seed
    own = dp_glm_sklearn.PrivacyAccountant(epsilon=1.0)
    assert get_tags(make(accountant=own)).non_deterministic
    with dp_glm_sklearn.default_accountant(own):
        assert get_tags(make()).non_deterministic
    assert not get_tags(make(accountant=dp_glm_sklearn.get_default_accountant())).non_deterministic
