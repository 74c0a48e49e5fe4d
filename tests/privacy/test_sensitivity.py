"""Sensitivity bounds hold on adversarial neighbor pairs (SPEC sections 3 and 8).

Neighbors S, S' (replace-one: same n, one record changed) are searched by
hypothesis, steered by ``target`` towards the largest ratio of the observed
change to the claimed sensitivity: rows far beyond ``feature_norm`` or exactly
on it, labels far beyond ``y_bound``, coefficients anywhere in (and on) the
constraint ball. Data goes through the estimators' own preprocessing
(validation, label encoding and clipping to ``y_bound``, row clipping to
``feature_norm``): ``fit`` runs up to the training step, where a stub
captures the objective and the calibration it would have trained with.

Checked for each loss (squared, logistic, multinomial, Huber):

- the declared constants hold: on the ball, without the safety net, the
  average gradient moves by at most ``2 G / n``, G computed from the public
  bounds only; the calibration uses exactly that sensitivity;
- the safety net: with per-example clipping the bound holds at any theta,
  also outside the ball where the declared constants need not hold;
- Noisy GD releases only that statistic: every noise draw perturbs
  ``grad L(theta_t; S)`` with the calibrated sigma, and the neighbor's
  gradient at the same ``theta_t`` is within the sensitivity; also at the
  default number of steps, whose first steps query extrapolated (momentum)
  points.

These are deterministic checks (no false failures): a counterexample is a bug.
"""

import importlib
from contextlib import contextmanager
from dataclasses import replace
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings, target
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.utils.extmath import row_norms

from dp_glm_sklearn import (
    DPHuberRegressor,
    DPLinearRegression,
    DPLogisticRegression,
    PrivacyAccountant,
)
from dp_glm_sklearn._objective import GLMObjective
from dp_glm_sklearn.privacy import noise

# The mechanism modules themselves: the tests observe their noise and projection draws.
noisy_gd_module = importlib.import_module("dp_glm_sklearn.mechanisms.noisy_gd")
jl_module = importlib.import_module("dp_glm_sklearn.mechanisms.jl")
op_module = importlib.import_module("dp_glm_sklearn.mechanisms.output_perturbation")

KINDS = ["squared", "huber", "logistic", "multinomial"]
N_CLASSES = 4  # for the multinomial case
RTOL = 1e-9

# Coordinates of rows and labels: far beyond any bound drawn below.
_coords = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)
_bounds = st.floats(0.1, 10.0)


@st.composite
def _cases(draw, kind, method="noisy_gd"):
    """An estimator and a replace-one neighbor pair (X, y), (X', y')."""
    n = draw(st.integers(1, 6))
    d = draw(st.integers(1, 3))
    feature_norm = draw(_bounds)
    common = dict(
        epsilon=1.0, delta=1e-6, feature_norm=feature_norm, norm_bound=draw(_bounds),
        fit_intercept=draw(st.booleans()), method=method,
        accountant=PrivacyAccountant(epsilon=np.inf),
    )
    if method != "output_perturbation":  # its solver has no step count
        common["max_iter"] = 3
    if method == "jl":
        common["projection_dim"] = draw(st.integers(1, d))
    if method == "output_perturbation":
        common["l2_regularization"] = draw(st.floats(0.1, 10.0))
    if kind in ("squared", "huber"):
        y_bound = draw(st.one_of(
            _bounds, st.tuples(st.floats(-10, 10), _bounds).map(lambda t: (t[0], t[0] + t[1]))
        ))
        labels = _coords
        if kind == "squared":
            est = DPLinearRegression(y_bound=y_bound, **common)
        else:
            est = DPHuberRegressor(y_bound=y_bound, threshold=draw(_bounds), **common)
    else:
        classes = [0, 1] if kind == "logistic" else list(range(N_CLASSES))
        labels = st.sampled_from(classes)
        est = DPLogisticRegression(classes=classes, **common)

    # Rows as drawn (often far beyond feature_norm), or rescaled onto the bound.
    def row(raw, mode):
        norm = np.linalg.norm(raw)
        if mode == "on_bound" and norm > 0:
            return raw * (feature_norm / norm)
        return raw

    modes = st.sampled_from(["raw", "on_bound"])
    X = np.array([row(draw(arrays(float, d, elements=_coords)), draw(modes)) for _ in range(n)])
    y = np.array(draw(st.lists(labels, min_size=n, max_size=n)), dtype=float)
    i = draw(st.integers(0, n - 1))
    X2, y2 = X.copy(), y.copy()
    X2[i] = row(draw(arrays(float, d, elements=_coords)), draw(modes))
    y2[i] = draw(labels)
    return est, (X, y), (X2, y2)


def _thetas(draw, shape, radius):
    """Coefficients in the ball of ``radius``, often on its boundary."""
    raw = draw(arrays(float, shape, elements=st.floats(-1, 1)))
    norm = np.linalg.norm(raw)
    direction = raw / norm if norm > 1e-6 else np.zeros(shape)
    scale = draw(st.one_of(st.just(1.0), st.floats(0.0, 1.0)))
    return direction * radius * scale


@contextmanager
def _captured_training():
    """Run ``fit`` up to training; record (objective, calibration) instead of training."""
    captured = []

    def stub(method, objective, calibration, rng):
        captured.append((objective, calibration))
        return np.zeros(objective.problem.theta_shape), 0

    with mock.patch("dp_glm_sklearn._base.train", stub):
        yield captured


def _objectives(est, S, S_prime):
    with _captured_training() as captured:
        est.fit(*S)
        est.fit(*S_prime)
    (obj, cal), (obj2, cal2) = captured
    return obj, obj2, cal, cal2


def _public(problem):
    return {**vars(problem), "loss": repr(problem.loss)}


def _check_preprocessing(objective):
    """Rows used are within feature_norm, labels within y_bound."""
    p = objective.problem
    used_norms = objective.row_scale * row_norms(objective._block(slice(None))[0])
    assert np.all(used_norms <= p.feature_norm * (1 + RTOL))
    if p.y_bound > 0:
        assert np.all(np.abs(objective.y) <= p.y_bound * (1 + RTOL))


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_average_gradient_sensitivity(kind, data):
    est, S, S_prime = data.draw(_cases(kind))
    obj, obj2, cal, cal2 = _objectives(est, S, S_prime)
    p = obj.problem
    # The calibration depends on public quantities only, and uses 2 G / n.
    assert _public(p) == _public(obj2.problem)
    assert cal == cal2
    sensitivity = 2.0 * p.lipschitz / p.n_samples
    assert cal.params["sensitivity"] == pytest.approx(sensitivity, rel=1e-12)
    _check_preprocessing(obj)
    _check_preprocessing(obj2)

    theta = _thetas(data.draw, p.theta_shape, p.norm_bound)
    # The declared constants, without the safety net, on the ball.
    change = np.linalg.norm(obj.gradient(theta, clip=False) - obj2.gradient(theta, clip=False))
    target(change / sensitivity, label="change / (2G/n) on the ball, unclipped")
    assert change <= sensitivity * (1 + RTOL)
    # The safety net, anywhere (here up to 100 times the radius).
    far = _thetas(data.draw, p.theta_shape, 100 * p.norm_bound)
    change = np.linalg.norm(obj.gradient(far, clip=True) - obj2.gradient(far, clip=True))
    target(change / sensitivity, label="change / (2G/n) anywhere, clipped")
    assert change <= sensitivity * (1 + RTOL)


class _Recording:
    """Proxy of a GLMObjective that records every gradient the mechanism asks for."""

    def __init__(self, objective):
        self._objective = objective
        self.problem = objective.problem
        self.calls = []

    def gradient(self, theta, clip=True):
        g = self._objective.gradient(theta, clip=clip)
        self.calls.append((np.array(theta), clip, g.copy()))
        return g

    def __getattr__(self, name):
        return getattr(self._objective, name)


def _spy_noise(module):
    """Patch ``module.add_gaussian_noise`` to record (value, sigma) of every draw."""
    released = []

    def spy(value, sigma, rng):
        released.append((np.array(value), sigma))
        return noise.add_gaussian_noise(value, sigma, rng)

    return mock.patch.object(module, "add_gaussian_noise", spy), released


def _run_gradient_mechanism(method, objective, calibration, rng):
    """Run noisy GD or JL on ``objective``; return what they released and at which theta.

    Returns ``(recording, released, phi)``: the objective the noisy steps read
    (the projected one for JL) wrapped in a :class:`_Recording`, the (value,
    sigma) of every noise draw, and JL's projection (None for noisy GD).
    """
    patch_noise, released = _spy_noise(noisy_gd_module)
    # A fit's calibration carries the projection it drew before its charge;
    # without it, JL draws one here from ``rng``, through the spy below.
    calibration = replace(calibration, params={
        key: value for key, value in calibration.params.items() if key != "projection"})
    seen = {}
    real_noisy_gd, real_draw = noisy_gd_module.noisy_gd, jl_module.draw_projection

    def recording_noisy_gd(obj, cal, rng):
        seen["recording"] = _Recording(obj)
        return real_noisy_gd(seen["recording"], cal, rng)

    def recording_draw(*args, **kwargs):
        seen["phi"] = real_draw(*args, **kwargs)
        return seen["phi"]

    with patch_noise, mock.patch.object(jl_module, "noisy_gd", recording_noisy_gd), \
            mock.patch.object(jl_module, "draw_projection", recording_draw):
        if method == "jl":
            jl_module.jl(objective, calibration, rng)
        else:
            recording_noisy_gd(objective, calibration, rng)
    return seen["recording"], released, seen.get("phi")


@pytest.mark.parametrize("method", ["noisy_gd", "jl"])
@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=25, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_gradient_mechanisms_release_only_bounded_statistics(kind, method, data, seed):
    """Each noise draw perturbs a statistic of sensitivity <= the calibrated one.

    For JL the statistic is the gradient on the projected rows: the neighbor
    is projected by the same (data-independent) matrix, and the projected
    rows must be clipped to ``(1 + alpha) X``.
    """
    est, S, S_prime = data.draw(_cases(kind, method))
    target(_check_gradient_releases(method, *_objectives(est, S, S_prime)[:3], seed),
           label=f"{method}: released change / sensitivity")


def _check_gradient_releases(method, obj, obj2, cal, seed):
    """Run noisy GD or JL on ``obj``: every noise draw has the calibrated sigma and
    perturbs the gradient at a point of the ball, which ``obj2`` moves by at most
    the sensitivity.  Returns the largest change / sensitivity."""
    recording, released, phi = _run_gradient_mechanism(method, obj, cal,
                                                       np.random.default_rng(seed))
    p = recording.problem
    sensitivity = cal.params["sensitivity"]
    assert sensitivity == pytest.approx(2.0 * p.lipschitz / p.n_samples, rel=1e-12)
    if method == "jl" and cal.params["projection_dim"] == obj.problem.n_features:
        # k = d: no projection, Noisy GD on the original problem.
        assert phi is None and p is obj.problem and cal.params["alpha"] == 0.0
        neighbor = obj2
    elif method == "jl":
        alpha = cal.params["alpha"]
        assert p.feature_norm == pytest.approx((1 + alpha) * obj.problem.feature_norm)
        assert p.norm_bound == pytest.approx(2 * obj.problem.norm_bound)
        _check_preprocessing(recording._objective)  # projected rows within (1 + alpha) X
        neighbor = GLMObjective(p, jl_module.project_rows(obj2.X, phi, obj.problem.feature_norm),
                                obj2.y)
    else:
        neighbor = obj2
    assert len(released) == len(recording.calls) == cal.params["max_iter"]
    worst = 0.0
    for (theta, clip, grad), (value, sigma) in zip(recording.calls, released, strict=True):
        assert clip and sigma == cal.sigma
        np.testing.assert_array_equal(value, grad)
        assert np.linalg.norm(theta) <= p.norm_bound * (1 + RTOL)
        change = np.linalg.norm(neighbor.gradient(theta) - value)
        worst = max(worst, change / sensitivity)
        assert change <= sensitivity * (1 + RTOL)
        # The declared constants hold without the safety net too.
        change = np.linalg.norm(neighbor.gradient(theta, clip=False)
                                - recording._objective.gradient(theta, clip=False))
        assert change <= sensitivity * (1 + RTOL)
    return worst


def _default_step_case(kind, method):
    """A fit at the default number of steps whose first steps use momentum
    (n = 2000, epsilon = 8), and a neighbor with a record far beyond the bounds.
    The labels follow a model of norm 5 outside the ball of radius 0.5, so the
    iterates reach its boundary and the extrapolation would leave it."""
    rng = np.random.default_rng(0)
    n, d = 2000, 5
    X = rng.standard_normal((n, d))
    score = X @ np.full(d, 5.0 / np.sqrt(d))
    common = dict(epsilon=8.0, delta=1e-6, feature_norm=3.0, norm_bound=0.5, method=method,
                  accountant=PrivacyAccountant(epsilon=np.inf))
    if method == "jl":
        common["projection_dim"] = 3
    if kind in ("squared", "huber"):
        est = (DPLinearRegression if kind == "squared" else DPHuberRegressor)(
            y_bound=2.0, **common)
        y = np.clip(score, -2.0, 2.0)
    else:
        classes = [0, 1] if kind == "logistic" else list(range(N_CLASSES))
        est = DPLogisticRegression(classes=classes, **common)
        y = np.digitize(score, np.quantile(score, np.linspace(0, 1, len(classes) + 1)[1:-1]))
    X2, y2 = X.copy(), y.copy()
    X2[0] = 50.0
    y2[0] = -100.0 if kind in ("squared", "huber") else (y[0] + 1) % len(classes)
    return est, (X, y), (X2, y2)


@pytest.mark.parametrize("method", ["noisy_gd", "jl"])
@pytest.mark.parametrize("kind", KINDS)
def test_momentum_steps_release_only_bounded_statistics(kind, method):
    """The same on the estimators' default path: momentum steps, then plain ones.

    The hypothesis test above runs 3 steps on at most 6 records, where the
    momentum schedule is always empty; here the extrapolated query points are
    in the ball and their noise has the calibrated sigma too.
    """
    obj, obj2, cal, _ = _objectives(*_default_step_case(kind, method))
    assert 0 < cal.params["momentum_steps"] <= cal.params["max_iter"] == 100
    assert _check_gradient_releases(method, obj, obj2, cal, seed=0) > 0


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=25, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_output_perturbation_minimizers_within_sensitivity(kind, data, seed):
    """The value output perturbation perturbs moves by at most its calibrated sensitivity.

    ``2 G / (lambda n) + 2 e``: the exact minimizers are ``2 G / (lambda n)``
    apart at most, and the certified solver is within ``e`` of each.
    """
    est, S, S_prime = data.draw(_cases(kind, "output_perturbation"))
    obj, obj2, cal, _ = _objectives(est, S, S_prime)
    patch_noise, released = _spy_noise(op_module)
    with patch_noise:
        op_module.output_perturbation(obj, cal, np.random.default_rng(seed))
        op_module.output_perturbation(obj2, cal, np.random.default_rng(seed))
    (value, sigma), (value2, sigma2) = released
    assert sigma == sigma2 == cal.sigma
    p = obj.problem
    lam = cal.params["l2"]
    main = 2.0 * p.lipschitz / (lam * p.n_samples)
    assert cal.params["sensitivity"] == pytest.approx(main + 2 * cal.params["accuracy"])
    for v in (value, value2):
        assert np.linalg.norm(v) <= p.norm_bound * (1 + RTOL)
    change = np.linalg.norm(value - value2)
    target(change / cal.params["sensitivity"], label="output perturbation change / sensitivity")
    assert change <= cal.params["sensitivity"] * (1 + RTOL)


@pytest.mark.parametrize("kind", ["squared", "huber"])
def test_labels_are_clipped_to_y_bound(kind):
    """A label far outside y_bound counts as a label on the bound."""
    cls = DPLinearRegression if kind == "squared" else DPHuberRegressor
    est = cls(y_bound=(-1.0, 3.0), fit_intercept=False, max_iter=2,
              accountant=PrivacyAccountant(epsilon=np.inf))
    X = np.ones((3, 1))
    obj, obj2, _, _ = _objectives(est, (X, np.array([0.0, 1.0, 1e9])),
                                  (X, np.array([0.0, 1.0, 3.0])))
    np.testing.assert_array_equal(obj.y, obj2.y)
    assert obj.problem.y_bound == 3.0
