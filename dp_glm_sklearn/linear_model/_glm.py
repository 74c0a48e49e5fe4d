"""The three DP estimators: each only picks a loss and encodes its labels."""

import math
from numbers import Real

import numpy as np
from scipy.special import expit, log_expit, log_softmax, softmax
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets, type_of_target

from .._base import _BaseDPGLM
from .._doc import format_doc
from .._objective import _MAX_BOUND
from .._sklearn_compat import Interval, InvalidParameterError, float_or_inf
from .._validation import shown_dtype
from .._warn import silenced, warn_user
from ..losses import HuberLoss, LogisticLoss, MultinomialLoss, SquaredLoss
from ..privacy.accountant import PrivacyLeakWarning

# The parameters every estimator shares, in three blocks so that each class
# docstring can list its own parameters where its __init__ signature has them:
# after feature_norm (y_bound, threshold) or after l2_regularization (classes).
_PARAMS_HEAD = """epsilon : float in (0, 1e300] or inf, default=1.0
        Privacy parameter epsilon of the (epsilon, delta)-DP guarantee of one
        ``fit``. ``np.inf`` trains without noise (no privacy) and solves the
        constrained problem exactly; only an accountant with an infinite
        budget accepts it. A finite epsilon above 1e300 is refused at ``fit``.

    delta : float in (0, 1), default=None
        Privacy parameter delta. ``None`` uses ``min(1e-5, n_samples**-1.5)``,
        well below ``1/n_samples`` (n is public under replace-one adjacency),
        and at most the delta of the accountant charged (where a fit at
        epsilon then costs exactly epsilon).

    feature_norm : float in [1e-100, 1e100] or None, default=None
        Public bound X on the Euclidean norm of a row of X. Rows with a
        larger norm are scaled down to it before training (clipping);
        ``predict`` and the other methods use rows as given. ``None`` (not
        stated) is 1.0, with a warning: it suits rows normalized to unit norm, e.g. by
        :class:`sklearn.preprocessing.Normalizer`, a row-wise transform that
        is private in itself. The bounds the training derives from this one
        and ``norm_bound`` (the norm of a row with its intercept feature; for
        ``"jl"``, and for ``"auto"``, which considers it, ``2 * norm_bound``
        and the projected rows' larger norm) must lie in [1e-100, 1e100] too.
        Never estimate it from the data you protect: a bound read from the
        data leaks it."""

_PARAMS_BODY = """norm_bound : float in [1e-100, 1e100] or "auto", default={norm_bound}
        Public radius B of the constraint ball ``||w|| <= B`` on the
        coefficients (an intercept b counts as ``b / c``: it is the coefficient
        of a constant feature ``c = feature_norm / 2`` appended to each row). The
        sensitivity of the mechanisms grows with B for the squared loss; the
        solution is searched within B (``"noisy_gd"`` releases a model of norm
        at most B; ``"output_perturbation"`` adds its noise to such a model, and
        ``"jl"`` maps back a model of norm at most 2B in the projected space, so
        theirs can be larger). {norm_bound_note} ``"auto"`` chooses
        B privately within the same (epsilon, delta): the paper's private grid
        search over radii ``unit * 2^j`` (Algorithm 4, with
        :class:`~dp_glm_sklearn.DPGridSearchCV`; ``unit`` is ``Y / X_aug`` for
        regression and ``1 / X_aug`` for classification, the number of radii
        follows the paper's Theorem 8), selecting on the absolute error
        (regressors) or the Brier score (classifiers) of the validation part
        rather than the paper's clipped loss; the choice is ``norm_bound_``.

    fit_intercept : bool, default=True
        Whether to fit an intercept, as the coefficient of a constant public
        feature ``c = feature_norm / 2`` appended to each row (so a row with
        its constant has norm at most ``X_aug = 1.118 * feature_norm``).

    max_iter : int in [1, 1e6], default=None
        Number of noisy gradient steps T of ``"noisy_gd"`` and ``"jl"``.
        ``None`` uses ``clip(round(n_samples * mu / 10), 5, 100)`` with mu
        the Gaussian DP parameter of (epsilon, delta), a rule fitted on
        ``benchmarks/tune_max_iter.py`` (``n_samples * mu / 5`` for the
        Huber loss, whose steps are less noisy); for the logistic loss the cap is a
        compute budget, ``clip(5e6 / n, 50, 100)`` (50 steps from n = 1e5:
        pass ``max_iter=100`` for a smaller optimization error, see
        :func:`~dp_glm_sklearn.mechanisms.noisy_gd.default_max_iter`).
        Privacy holds for any T: the noise per step
        grows like ``sqrt(T)`` to keep the same (epsilon, delta). The
        default (at most 100 steps of size 1/smoothness) can leave an
        optimization error even when the noise is negligible (a large
        epsilon, a large ``norm_bound``);
        ``epsilon=np.inf`` solves the constrained problem exactly.
        ``"output_perturbation"`` ignores it, with a warning (its solver runs
        to a certified accuracy).

    method : {{"auto", "noisy_gd", "jl", "output_perturbation"}}, default="auto"
        Training mechanism (Arora et al. 2022), each (epsilon, delta)-DP:

        - ``"auto"``: ``"noisy_gd"`` or ``"jl"``, whichever has the smaller
          bound in Theorems 1 and 2 for the public n, d, epsilon, delta and
          bounds (:func:`dp_glm_sklearn.mechanisms.auto.choose_method`):
          ``"noisy_gd"`` in low dimension, ``"jl"`` once the number of
          features is large next to ``(n * epsilon)**(2/3)``. The choice
          reads no data and is shown in ``method_``. On the synthetic
          benchmark (``benchmarks/rates.py``, signal rank 5) it was within
          1.25x of the best of the three methods at all 48 points (never
          worse than 1.18x; always ``"noisy_gd"``: 79%, up to 16x); on designs
          whose signal spreads over 20 or 50 directions, 85% and 81% (always
          ``"noisy_gd"``: 90% and 94%); the worst points are 2.7x (rank 20)
          and 6.3x (rank 50) worse for the squared loss with d >= 1000, where
          ``"noisy_gd"`` is the better choice.
        - ``"noisy_gd"``: noisy projected gradient descent with averaged
          iterates (Algorithm 1); best in low dimension.
        - ``"jl"``: a random projection of the rows to ``projection_dim``
          dimensions, then noisy gradient descent there (Algorithm 2);
          dimension-free.
        - ``"output_perturbation"``: the L2-regularized constrained risk
          minimizer, solved to a certified accuracy, plus Gaussian noise
          (Algorithm 3); dimension-free; never chosen by ``"auto"``, worth
          trying for the logistic loss at large n, where the default step
          count is capped (it won at n = 1e5, epsilon 2, on one of the
          benchmark's designs; see :mod:`dp_glm_sklearn.mechanisms.auto`).

    projection_dim : int >= 1, default=None
        Dimension k of the random projection of ``method="jl"``. At
        n_features or more nothing is projected and the fit is that of
        ``method="noisy_gd"``. ``None`` takes k of order ``(n epsilon)**(2/3)`` from
        the paper's Theorem 2
        (:func:`dp_glm_sklearn.mechanisms.auto.default_projection_dim`; twice
        that for the squared loss, whose bound favours too few directions), or
        n_features when no projection has a smaller excess-risk bound.

    l2_regularization : float > 0, default=None
        Strength lambda of the ``lambda / 2 ||w||**2`` term of
        ``method="output_perturbation"``; the noise scales like ``1 / lambda``.
        ``None`` takes it from the paper's Theorems 3 and 5
        (:func:`dp_glm_sklearn.mechanisms.auto.default_l2`)."""

_PARAMS_TAIL = """random_state : int, RandomState instance, Generator or None, default=None
        Seeds the noise (a :class:`numpy.random.Generator`). ``None`` draws
        the seed from the operating system, as a deployment should. An
        integer used again by a fit charged to the same accountant of yours
        draws another stream of it, so that no two releases share their
        noise (docs/randomness.md).

    accountant : PrivacyAccountant, default=None
        Accountant charged by every ``fit``, of this estimator and of every
        clone of it (``GridSearchCV``, ``cross_val_score``; give these a
        data-independent split, ``cv=KFold(5)``: a classifier's default
        ``cv=5`` stratifies on the labels, which puts the folds outside the
        guarantee, user guide section 4). ``None`` uses the process-wide
        default accountant (infinite budget)."""

_SHARED_ATTRIBUTES = """n_features_in_ : int
        Number of features seen during fit.

    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during fit, when X has string column names.

    n_iter_ : int
        Number of gradient steps (or solver iterations) run. For
        ``"output_perturbation"``, the public a-priori bound on the solver's
        steps: the actual count depends on the data and is not released.

    method_ : str
        The mechanism that trained the model: the one ``method="auto"``
        chose, ``"non_private"`` when ``epsilon=np.inf``.

    projection_dim_ : int or None
        With ``method_ == "jl"``, the dimension k of the random projection;
        ``n_features_in_`` when k would reach it, in which case nothing was
        projected and the fit is Noisy GD's on the original features.  None
        for the other methods.

    norm_bound_ : float
        The radius B used (the chosen one when ``norm_bound="auto"``).

    privacy_events_ : list of privacy events
        What the fit released, as events an independent accountant can
        compose (a single ``GaussianEvent(mu)`` for the mechanisms here; two
        when ``norm_bound="auto"``: the search and the refit). The model a
        search or boosting publishes as ``best_estimator_`` carries the
        wrapper's events (a ``RandomStoppingEvent`` for a random search).

    privacy_spent_ : tuple (epsilon, delta)
        The guarantee of this fit, derived from ``privacy_events_`` (of
        publishing this model: for a search's ``best_estimator_``, the
        search's)."""

_REGRESSION_NOTES = """Notes
    -----
    Privacy: neighboring data sets differ in one record (replace-one
    adjacency, n public). Rows are clipped to ``feature_norm`` and labels to
    ``y_bound``; then Gaussian noise calibrated exactly (analytic Gaussian
    mechanism, Gaussian DP composition) is added to each gradient step
    (``"noisy_gd"``, ``"jl"``) or once to the solution
    (``"output_perturbation"``). Labels outside ``y_bound`` are clipped, not rejected:
    an error would itself reveal a record.

    ``predict`` applies the linear model to X as given (no clipping)."""


def _params(**body):
    """The three shared parameter blocks, for :func:`_fill`."""
    return dict(params_head=_PARAMS_HEAD, params_body=_PARAMS_BODY.format(**body),
                params_tail=_PARAMS_TAIL)


def _fill(**blocks):
    def decorate(cls):
        cls.__doc__ = format_doc(cls.__doc__, **blocks)
        return cls

    return decorate


def _sorted_labels(function, *arrays):
    """``function(*arrays)`` (np.unique, np.setdiff1d, scikit-learn's target
    check: they sort the labels), labels that cannot be sorted refused by a
    message of their own (numpy's TypeError compares "instances of 'int' and
    'str'"); a missing label (None among strings) is named as such."""
    try:
        return function(*arrays)
    except TypeError as exc:
        error = exc
    labels = np.asarray(arrays[0], dtype=object).ravel()
    if any(label is None or (isinstance(label, float) and label != label) for label in labels):
        raise ValueError("y contains missing labels (None or NaN); drop those rows first.")
    if len({type(label) for label in labels}) <= 1:
        # One type, refused as such (scikit-learn's "labels represented as
        # bytes are not supported", which quotes no label), not "mixed".
        raise error
    raise ValueError(
        "y mixes labels of different types (such as strings and numbers) that cannot be "
        "compared; give labels of one type.")


class _DPRegressorBase(RegressorMixin, _BaseDPGLM):
    _parameter_constraints: dict = {
        **_BaseDPGLM._parameter_constraints,
        "y_bound": [Interval(Real, 0, np.inf, closed="neither"), tuple, list, np.ndarray,
                    None],
    }

    def _y_interval(self):
        if self.y_bound is None:  # not stated: [-1, 1], with a warning (_plan_warnings)
            return -1.0, 1.0
        if isinstance(self.y_bound, (tuple, list, np.ndarray)):
            ok = np.ndim(self.y_bound) == 1 and len(self.y_bound) == 2 and all(
                isinstance(v, Real) and math.isfinite(float_or_inf(v)) for v in self.y_bound
            )
            if not ok or not self.y_bound[0] < self.y_bound[1]:
                raise InvalidParameterError(
                    f"The 'y_bound' parameter of {type(self).__name__} must be a positive "
                    "float Y (labels in [-Y, Y]) or a pair (low, high) of finite floats with "
                    f"low < high. Got {self.y_bound!r} instead."
                )
            return float_or_inf(self.y_bound[0]), float_or_inf(self.y_bound[1])
        if not (isinstance(self.y_bound, Real) and 0 < self.y_bound < np.inf):
            # (Also under skip_parameter_validation: a negative Y inverted the
            # interval and understated output perturbation's sensitivity.)
            raise InvalidParameterError(
                f"The 'y_bound' parameter of {type(self).__name__} must be a positive "
                "float Y (labels in [-Y, Y]) or a pair (low, high) of finite floats with "
                f"low < high. Got {self.y_bound!r} instead.")
        return -float_or_inf(self.y_bound), float_or_inf(self.y_bound)

    def _get_loss(self):
        raise NotImplementedError

    def _bound_warnings(self):
        """Warnings that a public bound was not stated, or that ``norm_bound``
        is far too small for the label range: parameters only."""
        warnings = super()._bound_warnings() + self._reach_warning()
        if self.y_bound is not None:
            return warnings
        return [*warnings, (
            f"{type(self).__name__}: y_bound was not given, so the labels are clipped "
            "to [-1, 1]. State the public range of the labels, e.g. y_bound=(low, high) "
            "from the data's documentation (never from the data itself); labels outside "
            "it are clipped. y_bound=1.0 keeps [-1, 1] without this warning.")]

    #: ``norm_bound`` warns when the predictions' reach is below this share of
    #: the labels' half-range.
    _SMALL_REACH = 0.1

    def _reach_warning(self):
        """How far ``norm_bound`` B lets the model move a prediction: with an
        intercept, the intercept alone moves it at most ``B * c`` (c =
        ``feature_norm / 2``, its constant feature) from the centre of
        ``y_bound``, where the labels are centred; without one, a row at
        ``feature_norm`` reaches ``B * feature_norm`` (about that: ``"jl"``
        constrains its model in the projected space, at radius 2B).  Under a tenth of the
        labels' half-range Y (without an intercept, the largest |label|), the
        model can hardly fit them: a default B = 10 on labels in dollars
        predicted a near-constant, even at epsilon=inf, and on a claim cost
        that is mostly 0 with y_bound=(0, 1e5) the intercept must move the
        predictions from 50,000 to near 0 (a user trial's B = 1.8e4, suggested
        by a rule counting the features too, still gave R^2 -41)."""
        if not isinstance(self.norm_bound, Real) or isinstance(self.norm_bound, bool):
            return []
        try:
            _, half_range, centre = self._public_loss()
            scale = (self._intercept_feature(1) if self.fit_intercept
                     else float(self._feature_norm()))
            reach = float(self.norm_bound) * float(scale)
        except (ValueError, TypeError, OverflowError):
            return []  # malformed bounds: refused with their own errors
        if not (math.isfinite(reach) and reach < self._SMALL_REACH * half_range):
            return []
        if self.fit_intercept:
            where = (f"the intercept move a prediction about norm_bound * feature_norm / 2 "
                     f"= {reach:.3g} from {centre:.6g}, the centre of y_bound on which the "
                     f"labels are centred, under a tenth of their half-range {half_range:.6g}")
            remedy = "the intercept alone can then reach the ends of y_bound"
        else:
            where = (f"a prediction reach about norm_bound * feature_norm = {reach:.3g} in "
                     "absolute value (no intercept), under a tenth of the largest |label| "
                     f"y_bound allows, {half_range:.6g}")
            remedy = "a row at feature_norm can then reach the ends of y_bound"
        suggested = min(half_range * float(self.norm_bound) / reach, _MAX_BOUND)
        return [f"{type(self).__name__}: norm_bound={self.norm_bound!r} lets {where}: the "
                "model can hardly fit the labels, whatever epsilon. Raise norm_bound towards "
                f"{suggested:.3g} ({remedy}), or use norm_bound='auto'."]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # scikit-learn's check_regressors_train wants R^2 > 0.5: the default
        # bounds (feature_norm=1, y_bound=1) clip its data (DPLinearRegression
        # fails even at epsilon=inf), and the noise can cost that much at
        # epsilon=1 (DPHuberRegressor reached it at 11 of 40 seeds).
        tags.regressor_tags.poor_score = True
        return tags

    def _check_targets(self, y, *, warn=True):
        self._y_interval()  # a malformed y_bound raises before any charge
        if not (np.issubdtype(y.dtype, np.number) or y.dtype == bool):
            # validate_data converts object arrays only; strings would fail later.
            raise ValueError(f"y must be numeric for {type(self).__name__}; got dtype "
                             f"{shown_dtype(y.dtype)}.")

    def _public_loss(self, classes=None):
        """``(loss, y_bound, y_offset)``: labels are centred on the public interval."""
        low, high = self._y_interval()
        if self.fit_intercept:  # the intercept absorbs the offset
            return self._get_loss(), (high - low) / 2, (low + high) / 2
        return self._get_loss(), max(abs(low), abs(high)), 0.0

    def _encode_targets(self, y):
        loss, y_bound, offset = self._public_loss()
        y = np.asarray(y, dtype=np.float64)
        if self.fit_intercept:
            # Clipped after centring, so that |y| <= y_bound holds in floats
            # too: high - offset can round above (high - low) / 2, and then a
            # label at the bound would switch the gradient code (and its
            # time) away from the Gram path, a channel on one record.
            y = np.clip(y - offset, -y_bound, y_bound)
        else:
            y = np.clip(y, *self._y_interval())
        return loss, y, y_bound, offset

    def _set_coef(self, theta, problem, y_offset, dtype=np.float64):
        super()._set_coef(theta, problem, y_offset, dtype)
        self.coef_ = self.coef_.ravel()
        self.intercept_ = self.intercept_[0]  # a numpy scalar of the model's dtype

    def predict(self, X):
        """Predict with the linear model ``X @ coef_ + intercept_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        return self._decision(X).ravel()


@_fill(**_params(
    norm_bound="10.0",
    norm_bound_note=("Scale it with the label range: with ``\"noisy_gd\"``, "
                     "``|prediction - m| <= B * X_aug``, m the midpoint of ``y_bound`` "
                     "(0 without an intercept, where ``X_aug`` is ``feature_norm``)."),
), attributes=_SHARED_ATTRIBUTES, notes=_REGRESSION_NOTES)
class DPLinearRegression(_DPRegressorBase):
    """Differentially private least squares regression.

    Minimizes the average squared loss ``(y - <w, x> - b)**2 / 2`` over the
    ball ``||(w, b)|| <= norm_bound`` with an (epsilon, delta)-DP guarantee.

    Parameters
    ----------
    {params_head}

    y_bound : float > 0, (low, high) or None, default=None
        Public range of the labels: a float Y means [-Y, Y]. Labels outside
        are clipped to it. Its half-width must lie in [1e-100, 1e100]. Take
        it from domain knowledge, never from the data.
        ``None`` (not stated) is [-1, 1], with a warning. With an intercept,
        labels are centred on the range's midpoint, so the intercept (which
        counts in the norm ball) is about the distance of the labels' mean
        from it: a range far wider on one side than the labels need costs
        accuracy.

    {params_body}

    {params_tail}

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Coefficients, in the float dtype of the training X (float32 or
        float64; training itself runs in float64; float64 if the model
        exceeds float32's range).

    intercept_ : numpy float
        Intercept, of the same dtype.

    {attributes}

    See Also
    --------
    DPHuberRegressor : DP regression robust to outliers.
    sklearn.linear_model.LinearRegression : the non-private estimator.

    {notes}

    Examples
    --------
    >>> import numpy as np
    >>> from dp_glm_sklearn import DPLinearRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(5000, 3)) / 2
    >>> y = X @ [0.5, -0.5, 0.25] + 0.05 * rng.normal(size=5000)
    >>> reg = DPLinearRegression(epsilon=1.0, feature_norm=1.5, y_bound=1.0,
    ...                          norm_bound=1.0, random_state=0).fit(X, y)
    >>> epsilon, delta = reg.privacy_spent_  # delta: the default n**-1.5
    >>> round(epsilon, 6), bool(delta == 5000 ** -1.5)
    (1.0, True)
    >>> bool(reg.score(X, y) > 0.9)
    True
    """

    _parameter_constraints: dict = {**_DPRegressorBase._parameter_constraints}

    def __init__(self, *, epsilon=1.0, delta=None, feature_norm=None, y_bound=None,
                 norm_bound=10.0, fit_intercept=True, max_iter=None, method="auto",
                 projection_dim=None, l2_regularization=None,
                 random_state=None, accountant=None):
        self.epsilon = epsilon
        self.delta = delta
        self.feature_norm = feature_norm
        self.y_bound = y_bound
        self.norm_bound = norm_bound
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.method = method
        self.projection_dim = projection_dim
        self.l2_regularization = l2_regularization
        self.random_state = random_state
        self.accountant = accountant

    def _get_loss(self):
        return SquaredLoss()

    #: ``norm_bound`` warns when the ball's reach, ``norm_bound * X_aug``, is
    #: more than this many times the labels' half-range Y (see
    #: :meth:`_large_reach_warning`).  Not lower: the best radius of
    #: ``benchmarks/model_selection.py``'s synthetic data reaches 3.1 Y (its
    #: rows are shorter than ``feature_norm`` and not aligned with the model).
    _LARGE_REACH = 5.0

    def _bound_warnings(self):
        return super()._bound_warnings() + self._large_reach_warning()

    def _large_reach_warning(self):
        """Least squares' per-example gradient is bounded by ``(B X_aug + Y)
        X_aug`` (SPEC 3), so its noise grows with the ball's reach ``B X_aug``,
        the largest prediction a row at ``feature_norm`` gets from the centre
        of ``y_bound`` (from 0 without an intercept).  Far beyond the labels'
        half-range Y the noise is mostly paid for predictions no label needs:
        on unit-scale labels the default ``norm_bound=10`` (reach 11.2 at
        ``feature_norm=1``) gave a median test R^2 of -0.92 at n = 1000,
        epsilon 1, against 0.61 with ``norm_bound=1`` (0.73 non-private; d =
        5, 5 seeds: a one-off check); a user trial's labels in [-1, 1] with
        ``feature_norm=3.5``, R^2 -25 against 0.18 with ``norm_bound="auto"``;
        another's log incomes at a reach of 6.5 Y, R^2 -0.06 against 0.17 with
        a radius 4x smaller.  Parameters only; not for ``epsilon=inf``.
        """
        if (not isinstance(self.norm_bound, Real) or isinstance(self.norm_bound, bool)
                or not (isinstance(self.epsilon, Real) and self.epsilon < math.inf)):
            return []
        try:
            _, half_range, _ = self._public_loss()
            reach = float(self.norm_bound) * self._augmented_feature_norm()
        except (ValueError, TypeError, OverflowError):
            return []  # malformed bounds: refused with their own errors
        if not (math.isfinite(reach) and reach > self._LARGE_REACH * half_range):
            return []
        origin, labels = (("the centre of y_bound", "the labels' half-range")
                          if self.fit_intercept else ("0", "the largest |label| y_bound allows"))
        radius = float(self.norm_bound)
        return [f"DPLinearRegression: norm_bound={radius!r} lets a prediction reach "
                f"norm_bound * X_aug = {reach:.3g} from {origin}, {reach / half_range:.3g} "
                f"times {labels}, {half_range:.6g}, for a row at feature_norm. Least "
                "squares' noise grows with that reach (its gradient bound is (norm_bound * "
                "X_aug + Y) * X_aug), so bounds much larger than the data need cost "
                "accuracy: lower feature_norm towards the rows' typical norm (longer rows "
                "are clipped), or norm_bound towards the coefficients' norm if it is known "
                "to be smaller; or use norm_bound='auto', or DPHuberRegressor, whose noise "
                "does not grow with norm_bound."]


@_fill(**_params(
    norm_bound="10.0",
    norm_bound_note=("Scale it with the label range: with ``\"noisy_gd\"``, "
                     "``|prediction - m| <= B * X_aug``, m the midpoint of ``y_bound`` "
                     "(0 without an intercept, where ``X_aug`` is ``feature_norm``)."),
), attributes=_SHARED_ATTRIBUTES, notes=_REGRESSION_NOTES)
class DPHuberRegressor(_DPRegressorBase):
    """Differentially private Huber regression.

    Minimizes the average Huber loss of the residual ``r = y - <w, x> - b``
    (``r**2 / 2`` for ``|r| <= threshold``, linear beyond) over the ball
    ``||(w, b)|| <= norm_bound``. Its gradient is bounded by ``threshold``,
    so with ``method="noisy_gd"`` the noise does not grow with
    ``norm_bound`` as for least squares (with ``"jl"`` and
    ``"output_perturbation"`` the projection size and the default
    regularization depend on it).

    Porting from :class:`sklearn.linear_model.HuberRegressor`: its
    ``epsilon`` (the loss's shape, 1.35) is ``threshold`` here, in the
    units of y; ``epsilon`` here is the privacy parameter. Code passing
    ``epsilon=1.35`` runs, at that privacy level, with the default threshold.

    Parameters
    ----------
    {params_head}

    y_bound : float > 0, (low, high) or None, default=None
        Public range of the labels: a float Y means [-Y, Y]. Labels outside
        are clipped to it. Its half-width must lie in [1e-100, 1e100].
        ``None`` (not stated) is [-1, 1], with a warning.
        With an intercept, labels are centred on the range's midpoint (see
        DPLinearRegression).

    threshold : float in [1e-100, 1e100], default=None
        Residual size M where the loss turns from quadratic to linear, in the
        units of y. ``None`` means a quarter of the public label range,
        ``(high - low) / 4`` (``Y / 2`` for ``y_bound=Y``): residuals larger
        than that are treated as outliers. Unlike scikit-learn's
        ``HuberRegressor.epsilon`` it is not relative to an estimated scale
        (estimating the scale would need privacy budget), hence a default in
        the units of the public ``y_bound``. The noise is proportional to M
        (the gradient bound is ``min(M, B X_aug + Y) X_aug``, at most ``M
        X_aug``, with ``X_aug`` the norm of a row with its intercept feature),
        not to ``B X_aug + Y`` as for least squares, which is why this estimator is often the better
        choice for bounded regression targets.

    {params_body}

    {params_tail}

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Coefficients, in the float dtype of the training X (float32 or
        float64; training itself runs in float64; float64 if the model
        exceeds float32's range).

    intercept_ : numpy float
        Intercept, of the same dtype.

    {attributes}

    See Also
    --------
    DPLinearRegression : DP least squares.
    sklearn.linear_model.HuberRegressor : the non-private estimator.

    {notes}

    Examples
    --------
    >>> import numpy as np
    >>> from dp_glm_sklearn import DPHuberRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(5000, 3)) / 2
    >>> y = X @ [0.5, -0.5, 0.25] + 0.05 * rng.standard_cauchy(size=5000)
    >>> reg = DPHuberRegressor(epsilon=1.0, feature_norm=2.0, y_bound=2.0,
    ...                        norm_bound=2.0, threshold=0.5, random_state=0)
    >>> reg.fit(X, y).coef_.round(1)
    array([ 0.5, -0.5,  0.3])
    """

    _parameter_constraints: dict = {
        **_DPRegressorBase._parameter_constraints,
        "threshold": [Interval(Real, 0, np.inf, closed="neither"), None],
    }

    def __init__(self, *, epsilon=1.0, delta=None, feature_norm=None, y_bound=None,
                 threshold=None, norm_bound=10.0, fit_intercept=True, max_iter=None,
                 method="auto", projection_dim=None, l2_regularization=None,
                 random_state=None, accountant=None):
        self.epsilon = epsilon
        self.delta = delta
        self.feature_norm = feature_norm
        self.y_bound = y_bound
        self.threshold = threshold
        self.norm_bound = norm_bound
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.method = method
        self.projection_dim = projection_dim
        self.l2_regularization = l2_regularization
        self.random_state = random_state
        self.accountant = accountant

    def _get_loss(self):
        if self.threshold is None:
            low, high = self._y_interval()
            return HuberLoss((high - low) / 4.0)
        return HuberLoss(float_or_inf(self.threshold))


@_fill(**_params(
    norm_bound="10.0",
    norm_bound_note=("It caps how confident the model can get: with ``\"noisy_gd\"``, "
                     "``|logit| <= B * X_aug``."),
), attributes=_SHARED_ATTRIBUTES)
class DPLogisticRegression(ClassifierMixin, _BaseDPGLM):
    """Differentially private logistic regression (binary and multinomial).

    Minimizes the average logistic loss (multinomial cross-entropy for more
    than two classes: ONE model, trained with one budget, not one-vs-rest
    with a split budget) over the ball ``||W|| <= norm_bound``.

    Parameters
    ----------
    {params_head}

    {params_body}

    classes : array-like, default=None
        The public set of class labels, at least two. ``None`` reads them from ``y``, which
        reveals which labels occur in the data (a :class:`PrivacyLeakWarning`
        says so); declare them to avoid that leak.

    {params_tail}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels, sorted: the declared ``classes`` as numpy reads them
        (their values and dtype, not y's: ``classes=[0, 1]`` predicts ints
        for a boolean y), or those read from ``y``.

    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Coefficients (one row for two classes), in the float dtype of the
        training X (float32 or float64; training itself runs in float64;
        float64 if the model exceeds float32's range).

    intercept_ : ndarray of shape (1,) or (n_classes,)
        Intercepts, of the same dtype.

    {attributes}

    See Also
    --------
    sklearn.linear_model.LogisticRegression : the non-private estimator.

    Notes
    -----
    Privacy: replace-one adjacency with n public. Rows are clipped to
    ``feature_norm``; Gaussian noise calibrated exactly (analytic Gaussian
    mechanism, Gaussian DP composition) is added to each step of noisy
    gradient descent (``"noisy_gd"``, ``"jl"``) or once to the solution
    (``"output_perturbation"``). The logistic loss is 1-Lipschitz in the
    score, so with ``"noisy_gd"`` the noise does not depend on
    ``norm_bound`` (with ``"jl"`` and ``"output_perturbation"`` the
    projection size and the default regularization do).

    Examples
    --------
    >>> import numpy as np
    >>> from dp_glm_sklearn import DPLogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(5000, 2))
    >>> y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> clf = DPLogisticRegression(epsilon=1.0, feature_norm=3.0, classes=[0, 1],
    ...                            random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.95)
    True
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
    """

    _parameter_constraints: dict = {
        **_BaseDPGLM._parameter_constraints,
        "classes": ["array-like", None],
    }

    def __init__(self, *, epsilon=1.0, delta=None, feature_norm=None, norm_bound=10.0,
                 fit_intercept=True, max_iter=None, method="auto",
                 projection_dim=None, l2_regularization=None, classes=None,
                 random_state=None, accountant=None):
        self.epsilon = epsilon
        self.delta = delta
        self.feature_norm = feature_norm
        self.norm_bound = norm_bound
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.method = method
        self.projection_dim = projection_dim
        self.l2_regularization = l2_regularization
        self.classes = classes
        self.random_state = random_state
        self.accountant = accountant

    def _is_classifier(self):
        return True

    def _declared_classes(self):
        """The declared ``classes`` as a sorted 1-D array of unique labels.

        Raises an InvalidParameterError (a ValueError) if they are not 1-D:
        flattening ``[[0, 1]]`` would guess what was meant.
        """
        if isinstance(self.classes, (set, frozenset)):
            raise InvalidParameterError(
                "The 'classes' parameter of DPLogisticRegression must be a sequence of class "
                f"labels such as [0, 1]; got a {type(self.classes).__name__}, which is "
                "unordered: pass a list.")
        try:
            classes = np.asarray(self.classes)
            if classes.dtype == object and classes.ndim == 1:
                # An object array (pandas' unique()) holds labels as a list does.
                classes = np.asarray(classes.tolist())
        except ValueError:  # ragged nested sequences
            classes = None
        if classes is not None and classes.ndim == 1 and classes.dtype.kind == "U" and len(
                {isinstance(c, str) for c in self.classes}) > 1:
            # np.asarray would turn [0, "a"] into ["0", "a"]: label 0 then matches none.
            raise InvalidParameterError(
                "The 'classes' parameter of DPLogisticRegression mixes strings and "
                f"numbers ({list(self.classes)!r}); give labels of one type, as in y."
            )
        if classes is None or classes.ndim != 1:
            shape = "a ragged nested sequence" if classes is None else f"shape {classes.shape}"
            raise InvalidParameterError(
                "The 'classes' parameter of DPLogisticRegression must be 1-D, a "
                f"sequence of class labels such as [0, 1]; got {shape}."
            )
        try:
            if classes.dtype.kind in "fc" and not np.isfinite(classes).all():
                raise ValueError("a class label is NaN or infinite")
            classes = np.unique(classes)
            kind = type_of_target(classes)
        except (TypeError, ValueError) as exc:  # labels that cannot be sorted, NaN
            raise InvalidParameterError(
                "The 'classes' parameter of DPLogisticRegression must hold discrete class "
                "labels of one type that can be sorted (integers, whole-number floats, strings "
                f"or booleans); got {list(self.classes)!r} ({exc})."
            ) from None
        if classes.size < 2:
            raise InvalidParameterError(
                "The 'classes' parameter of DPLogisticRegression must hold at least 2 "
                f"distinct labels; got {classes.tolist()!r}.")
        if kind not in ("binary", "multiclass"):
            # Refused here, from the parameter alone: accepted, a label 0.5
            # would pass as a class and then fail scikit-learn's target check
            # in y, so one record would decide whether fit raises.
            raise InvalidParameterError(
                "The 'classes' parameter of DPLogisticRegression must hold discrete class "
                "labels (integers, whole-number floats, strings or booleans, as scikit-learn's "
                f"classifiers accept); got {classes.tolist()!r}, of type {kind!r}."
            )
        return classes

    def _validated(self, X, y, *, warn=True):
        if self.classes is not None:
            self._declared_classes()  # a parameter: refused before the data are read
        return super()._validated(X, y, warn=warn)

    def _check_targets(self, y, *, warn=True):
        """The classes: declared (every label must be one), or read from y.

        Reading them from y warns (:class:`PrivacyLeakWarning`) unless
        ``warn=False`` (a search reads them once and warns once).
        """
        if self.classes is None:
            # Floating-point errors ignored: scikit-learn's check casts y to
            # int, and numpy warns "invalid value encountered in cast" for a
            # label of 1e308, a warning shown for one data set and not its
            # neighbour.
            with np.errstate(all="ignore"):
                _sorted_labels(check_classification_targets, y)
                classes = _sorted_labels(np.unique, y)
            if warn:
                warn_user(
                    "DPLogisticRegression read the set of classes from y, which reveals "
                    "which labels occur in the data; pass classes=[...] (public) to avoid it.",
                    PrivacyLeakWarning,
                )
        else:
            # Labels among declared discrete classes pass scikit-learn's
            # target check whatever they are: only membership is checked.
            classes = self._declared_classes()
            # The message names the public classes only: echoing the offending
            # labels would release values of the private data.  (numpy before
            # 1.25 warns that comparing labels of another type, say int y
            # with string classes, "failed"; the result is right.)
            with silenced():
                unknown = _sorted_labels(np.setdiff1d, y, classes).size
            if unknown:  # else: the error below
                raise ValueError(
                    "y contains labels not in the declared 'classes' parameter "
                    f"{classes.tolist()}; every label must be one of them. (Inside "
                    "scikit-learn's VotingClassifier, StackingClassifier, BaggingClassifier, "
                    "OneVsRestClassifier, or cross_val_predict with method='predict_proba', "
                    "'decision_function' or 'predict_log_proba', y is re-encoded as 0, ..., "
                    "k-1: declare those; OutputCodeClassifier passes -1 and 1: declare "
                    "[-1, 1].)"
                )
        if classes.size < 2:  # (read from y: declared ones are checked as a parameter)
            # A label read from y is a value of the private data: not shown.
            raise ValueError(
                "DPLogisticRegression needs at least 2 classes; got "
                f"{classes.size} class{'' if classes.size == 1 else 'es'} (read from y)."
            )
        return classes

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # check_classifiers_train wants accuracy > 0.83: the default Noisy GD
        # reaches it, output perturbation's noise often does not at epsilon=1.
        tags.classifier_tags.poor_score = True
        return tags

    def _public_loss(self, classes):
        """``(loss, y_bound, y_offset)`` for these classes (labels need no bound)."""
        if len(classes) == 2:
            return LogisticLoss(), 0.0, 0.0
        return MultinomialLoss(len(classes)), 0.0, 0.0

    def _encode_targets(self, y):
        classes = self._check_targets(y, warn=False)  # fit's _validated warned
        self.classes_ = classes
        codes = np.searchsorted(classes, y).astype(np.float64)
        loss, y_bound, offset = self._public_loss(classes)
        return loss, (2.0 * codes - 1.0 if classes.size == 2 else codes), y_bound, offset

    def decision_function(self, X):
        """Raw scores ``X @ coef_.T + intercept_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            For two classes, the score of ``classes_[1]``.
        """
        scores = self._decision(X)
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X):
        """Predict class labels.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        scores = self.decision_function(X)
        idx = (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(axis=1)
        return self.classes_[idx]

    def predict_proba(self, X):
        """Class probabilities.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            # expit(-z), not 1 - expit(z), which is 0 from z = 37 (float64).
            return np.column_stack([expit(-scores), expit(scores)])
        return softmax(scores, axis=1)

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`, computed from the scores.

        ``log_expit`` and ``log_softmax`` of the scores, not the log of
        rounded probabilities: confidently wrong rows get their finite log
        probability (``log(1 - expit(z))`` is ``-inf`` from z = 17 in float32
        and z = 37 in float64).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return np.column_stack([log_expit(-scores), log_expit(scores)])
        return log_softmax(scores, axis=1)
