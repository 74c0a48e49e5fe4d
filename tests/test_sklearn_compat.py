"""The private scikit-learn helpers: one module imports them, and its fallbacks work.

A library that imports a private scikit-learn name stops importing when a
release moves it.  ``dp_glm_sklearn._sklearn_compat`` is the only module
that may import one, and it falls back to its own versions; these tests
check the fallbacks agree with scikit-learn, and run the package on them in
a subprocess where the private names have been removed.
"""

import ast
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn import config_context
from sklearn.base import BaseEstimator, clone
from sklearn.linear_model import LogisticRegression
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import _num_samples

from dp_glm_sklearn import (
    DPConfidenceBoosting,
    DPGridSearchCV,
    DPHuberRegressor,
    DPLinearRegression,
    DPLogisticRegression,
    DPRandomizedSearchCV,
    PrivacyAccountant,
)
from dp_glm_sklearn import _sklearn_compat as compat

PACKAGE = pathlib.Path(compat.__file__).parent


def _private_sklearn_imports(path):
    """``(module, name)`` of every private scikit-learn name a source file imports."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sklearn"):
            private_module = any(part.startswith("_") for part in node.module.split("."))
            for alias in node.names:
                if private_module or alias.name.startswith("_"):
                    found.append((node.module, alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("sklearn") and "._" in alias.name:
                    found.append((alias.name, None))
    return found


def test_only_the_compat_module_imports_private_sklearn_names():
    offenders = {
        str(path.relative_to(PACKAGE)): names
        for path in PACKAGE.rglob("*.py")
        if path.name != "_sklearn_compat.py" and (names := _private_sklearn_imports(path))
    }
    assert offenders == {}
    # The scan itself finds what it must.
    assert _private_sklearn_imports(PACKAGE / "_sklearn_compat.py")


def _instances():
    return [
        DPLinearRegression(),
        DPLogisticRegression(),
        DPHuberRegressor(),
        DPGridSearchCV(DPLinearRegression(), {"norm_bound": [1.0]}),
        DPRandomizedSearchCV(DPLinearRegression(), {"norm_bound": [1.0]}),
        DPConfidenceBoosting(DPLinearRegression()),
    ]


PROBES = [
    -1, 0, 1, 2, 3, 2**32, -0.5, 0.0, 0.3, 1.0, 1.5, 1e300, np.inf, -np.inf, np.nan,
    True, False, np.bool_(True), np.int64(4), np.float32(0.25), None, "auto", "gem",
    "exponential", "loss", "accuracy", "noisy_gd", "geometric", "nope", "", [1.0, 2.0],
    (0.0, 1.0), {"a": [1]}, np.array([1.0, 2.0]), np.random.RandomState(0),
    np.random.default_rng(0), PrivacyAccountant(), LogisticRegression(), object(),
]


def _accepts(validate, estimator, name, value):
    estimator = clone(estimator).set_params(**{name: value})
    try:
        validate(estimator)
    except (ValueError, TypeError) as exc:
        assert name in str(exc)  # the message names the parameter
        return False
    return True


@pytest.mark.parametrize("estimator", _instances(), ids=lambda e: type(e).__name__)
def test_fallback_validation_agrees_with_sklearn(estimator):
    for name in estimator._parameter_constraints:
        for value in PROBES:
            theirs = _accepts(BaseEstimator._validate_params, estimator, name, value)
            ours = _accepts(_fallback_validate, estimator, name, value)
            assert ours == theirs, (name, value)


def _fallback_validate(estimator):
    """The fallback validator, run on fallback copies of the declared constraints."""
    converted = {}
    for name, entries in type(estimator)._parameter_constraints.items():
        converted[name] = [_to_fallback(c) for c in entries]
    shadow = type("Shadow", (), {"_parameter_constraints": converted,
                                 "get_params": lambda self, deep=False: estimator.get_params(deep)})
    try:
        compat._validate_params_fallback(shadow())
    except compat.InvalidParameterError as exc:
        raise ValueError(str(exc).replace("Shadow", type(estimator).__name__)) from None


def _to_fallback(constraint):
    kind = type(constraint).__name__
    if kind == "Interval":
        return compat._Interval(constraint.type, constraint.left, constraint.right,
                                closed=constraint.closed)
    if kind == "StrOptions":
        return compat._StrOptions(constraint.options)
    if kind == "HasMethods":
        return compat._HasMethods(constraint.methods)
    return constraint


def test_fallback_error_names_the_parameter_and_its_range():
    with pytest.raises(ValueError, match=r"'epsilon' parameter of DPLinearRegression must be "
                                         r"a float in the range \(0, inf\]. Got -1 instead"):
        _fallback_validate(DPLinearRegression(epsilon=-1))


@pytest.mark.parametrize(
    "data",
    [np.arange(12.0).reshape(6, 2), list(range(6)), tuple(range(6)),
     pd.DataFrame({"a": range(6), "b": 1.0}), pd.Series(range(6), index=range(10, 16)),
     sp.csr_matrix(np.eye(6))],
    ids=["ndarray", "list", "tuple", "DataFrame", "Series", "csr"],
)
def test_fallback_indexing_agrees_with_sklearn(data):
    rows = np.array([4, 0, 2])
    assert compat._num_samples_fallback(data) == _num_samples(data) == 6
    ours, theirs = compat._safe_indexing_fallback(data, rows), _safe_indexing(data, rows)
    assert type(ours) is type(theirs)
    to_array = (lambda a: a.toarray()) if sp.issparse(data) else np.asarray
    np.testing.assert_array_equal(to_array(ours), to_array(theirs))


def _run_on(fallbacks):
    script = textwrap.dedent(
        f"""
        import sys
        import numpy as np, pandas as pd
        import dp_glm_sklearn  # imports every scikit-learn module the package uses
        import sklearn.base
        if {fallbacks}:
            # One missing name is enough: the package then uses every fallback.
            # (sklearn.base calls _fit_context only while it is being imported.)
            del sklearn.base._fit_context
            for name in [m for m in sys.modules if m.startswith("dp_glm_sklearn")]:
                del sys.modules[name]
        from dp_glm_sklearn import (DPConfidenceBoosting, DPGridSearchCV,
                                    DPLinearRegression, DPLogisticRegression, _sklearn_compat)
        print("fallbacks", _sklearn_compat.USING_FALLBACKS)
        rng = np.random.default_rng(0)
        X = pd.DataFrame(rng.normal(size=(400, 3)), columns=["a", "b", "c"])
        y = X["a"] - X["b"] + 0.1 * rng.normal(size=400)
        reg = DPLinearRegression(epsilon=2.0, feature_norm=4.0, y_bound=4.0, norm_bound=2.0,
                                 random_state=0)
        print("linear", reg.fit(X, y).score(X, y), list(reg.feature_names_in_))
        search = DPGridSearchCV(reg, {{"norm_bound": [1.0, 2.0]}}, epsilon=2.0, random_state=0)
        print("search", search.fit(X, y).best_index_, search.score(X, y))
        boost = DPConfidenceBoosting(reg, n_models=2, epsilon=2.0, random_state=0)
        print("boost", boost.fit(X, y).best_index_, boost.score(X, y))
        clf = DPLogisticRegression(epsilon=2.0, feature_norm=4.0, classes=[False, True],
                                   random_state=0)
        print("logistic", clf.fit(X, y > 0).classes_.tolist(), clf.score(X, y > 0))
        for bad in (DPLinearRegression(epsilon=-1), DPLinearRegression(method="magic"),
                    DPGridSearchCV(reg, {{}}, selection="best")):
            try:
                bad.fit(X, y)
            except ValueError as exc:
                print("refused:", exc)
        import sklearn
        with sklearn.config_context(skip_parameter_validation=True):
            try:
                DPLinearRegression(method="magic").fit(X, y)
            except ValueError as exc:
                print("unvalidated:", exc)
            try:
                DPGridSearchCV(reg, {{}}, selection="best").fit(X, y)
            except ValueError as exc:
                print("search refused:", exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, cwd=PACKAGE.parent)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_package_works_on_the_fallbacks():
    """Remove a private name from scikit-learn, import the package afresh, and use it.

    Every fit gives the same model as on scikit-learn's own helpers, and bad
    parameters are refused with a message naming them.
    """
    ours, theirs = _run_on(fallbacks=True), _run_on(fallbacks=False)
    assert (ours[0], theirs[0]) == ("fallbacks True", "fallbacks False")
    assert ours[1:5] == theirs[1:5]
    assert ours[1].startswith("linear 0.") and ours[1].endswith("['a', 'b', 'c']")
    assert ours[4].startswith("logistic [False, True] 0.")
    assert ours[5].startswith("refused: The 'epsilon' parameter of DPLinearRegression must be")
    assert ours[6].startswith("refused: The 'method' parameter of DPLinearRegression must be")
    assert ours[7].startswith("refused: The 'selection' parameter of DPGridSearchCV must be")
    # scikit-learn's skip_parameter_validation is honoured by the fallbacks too.
    assert ours[8] == theirs[8] and ours[8].startswith("unvalidated: Unknown method 'magic'")
    # ... but the searches validate their own parameters even then.
    # (scikit-learn lists the options in the set's order, which changes between runs)
    refused = "search refused: The 'selection' parameter of DPGridSearchCV must be a str among"
    assert ours[9].startswith(refused) and theirs[9].startswith(refused)


def test_a_fitted_searchs_diagram_shows_best_estimator():
    # As scikit-learn's GridSearchCV: the template before fit, the chosen
    # model (with the parameters and budget it was trained with) after.
    X = np.random.default_rng(0).normal(size=(60, 2))
    y = (X[:, 0] > 0).astype(int)
    search = DPGridSearchCV(DPLogisticRegression(classes=[0, 1]), {"norm_bound": [1.0, 5.0]},
                            random_state=0, accountant=PrivacyAccountant())
    assert "best_estimator_: DPLogisticRegression" not in search._repr_html_()
    search.fit(X, y)
    assert "best_estimator_: DPLogisticRegression" in search._repr_html_()


@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_random_state_is_refused_before_the_charge(value):
    # numpy reads True as the seed 1: meant as "random", it fixed the noise
    # (a known seed, no privacy), estimators and searches alike (edge-case
    # trial).  Booleans are refused as they are for epsilon or max_iter.
    from dp_glm_sklearn import (
        DPConfidenceBoosting,
        DPGridSearchCV,
        DPLinearRegression,
        DPRandomizedSearchCV,
        PrivacyAccountant,
    )
    from dp_glm_sklearn._sklearn_compat import InvalidParameterError
    from dp_glm_sklearn.model_selection import dp_score

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = X @ [0.1, 0.2, 0.3]
    acc = PrivacyAccountant(epsilon=100.0)
    model = DPLinearRegression(feature_norm=3.0, y_bound=1.0, accountant=PrivacyAccountant())
    model.fit(X, y)
    base = DPLinearRegression(feature_norm=3.0, y_bound=1.0)
    fits = [lambda: DPLinearRegression(feature_norm=3.0, y_bound=1.0, random_state=value,
                                       accountant=acc).fit(X, y),
            lambda: DPGridSearchCV(base, {"norm_bound": [1.0, 2.0]}, random_state=value,
                                   accountant=acc).fit(X, y),
            lambda: DPGridSearchCV(clone(base).set_params(random_state=value),
                                   {"norm_bound": [1.0]}, accountant=acc).fit(X, y),
            lambda: DPRandomizedSearchCV(base, {"norm_bound": [1.0, 2.0]}, random_state=value,
                                         accountant=acc).fit(X, y),
            lambda: DPConfidenceBoosting(base, random_state=value, accountant=acc).fit(X, y),
            lambda: dp_score(model, X, y, epsilon=1.0, random_state=value, accountant=acc)]
    for fit in fits:
        with pytest.raises(InvalidParameterError, match=f"'random_state'.*Got {value}"):
            fit()
        # Without the parameter checks too (they skip random_state): the
        # seed is refused where the noise's generator is made, before the charge.
        with config_context(skip_parameter_validation=True):
            with pytest.raises(InvalidParameterError,
                               match=f"random_state={value} is not a seed|Got {value} instead"):
                fit()
    assert acc.history == []


def test_array_api_input_under_dispatch_gets_a_clear_error_before_the_charge(monkeypatch):
    # scikit-learn's check failed on array-api-strict input with "'dtype' must
    # be a dtype" from inside the array library (edge-case trial).  Faked
    # here: dispatch on, and an array object exposing __array_namespace__.
    import dp_glm_sklearn._validation as validation
    from dp_glm_sklearn import DPLinearRegression, PrivacyAccountant

    class APIArray:
        def __init__(self, a):
            self.a, self.shape, self.ndim, self.dtype = a, a.shape, a.ndim, a.dtype

        def __array_namespace__(self, api_version=None):
            return np

        def __array__(self, dtype=None, copy=None):
            return self.a

        def __len__(self):
            return len(self.a)

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 3)), rng.normal(size=50)
    model = DPLinearRegression(feature_norm=3.0, y_bound=3.0, accountant=PrivacyAccountant())
    model.fit(X, y)
    acc = PrivacyAccountant(epsilon=1.0)
    monkeypatch.setattr(validation, "get_config", lambda: {"array_api_dispatch": True},
                        raising=False)
    from dp_glm_sklearn.model_selection import dp_score

    for call in (lambda: DPLinearRegression(feature_norm=3.0, y_bound=3.0,
                                            accountant=acc).fit(APIArray(X), y),
                 lambda: model.predict(APIArray(X)),
                 # (dp_score scored every record as its bound, charged)
                 lambda: dp_score(model, APIArray(X), y, accountant=acc)):
        with pytest.raises(TypeError, match=r"X is an array of the array API .*APIArray.*"
                                            r"np.asarray.*Nothing was charged"):
            call()
    assert acc.history == []
    model.predict(X)  # numpy input: fine
    monkeypatch.setattr(validation, "get_config", lambda: {"array_api_dispatch": False})
    np.testing.assert_array_equal(model.predict(APIArray(X)), model.predict(X))
