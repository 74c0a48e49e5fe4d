"""The one ``fit`` template shared by every DP estimator.

``fit`` always runs the same steps, in this order:

1. validate the parameters (nothing is read from the data);
2. check that the accountant can afford the release (needs only the public
   n and the target (epsilon, delta)), before any data value is read;
3. validate the data and encode the labels (regression labels clipped to
   ``y_bound``);
4. calibrate the mechanism (public quantities only) and charge the
   accountant, atomically; a refusal raises and trains nothing;
5. train (rows are clipped to ``feature_norm`` inside the gradient kernel,
   :class:`~dp_glm_sklearn._objective.GLMObjective`, without copying X), then
   set the fitted attributes and the privacy record.

Concrete estimators (``linear_model/_glm.py``) say which loss they minimize
and how labels are checked, encoded and decoded: the regressors through one
shared base (``_get_loss``, ``_y_interval``), the classifier by overriding
``_check_targets``, ``_public_loss`` and ``_encode_targets``.  The checks of
the data (step 3) are in :mod:`dp_glm_sklearn._validation`; which generator
a fit draws its noise from, in :mod:`dp_glm_sklearn._randomness`.
"""

import math
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn import config_context
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ._objective import _MAX_BOUND, GLMObjective, PublicBoundsError, PublicProblem
from ._randomness import (
    _IndependentNoiseOnCloneMixin,
    _release_rng,
    _streams_given_back_if_refused,
)
from ._sklearn_compat import (
    RANDOM_STATE,
    Interval,
    InvalidParameterError,
    StrOptions,
    fit_context,
    float_or_inf,
)
from ._validation import (
    _duplicates_summed,
    _fit_n_samples,
    _validate_data_quietly,
    check_sparse_structure,
)
from ._warn import warn_user
from .mechanisms import (
    MECHANISMS,
    calibrate,
    draw_public,
    reserve_working_memory,
    resolve,
    train,
)
from .mechanisms.noisy_gd import default_steps
from .privacy.accountant import (
    PrivacyAccountant,
    _check_release,
    _DefaultAccountantMixin,
    _replays_seeds,
)
from .privacy.calibration import gdp_mu
from .privacy.events import GaussianEvent, compose


def default_delta(n_samples, budget_delta=1.0):
    """Default delta: ``min(1e-5, n**-1.5, budget_delta)``, well below ``1/n``.

    A mechanism that publishes each record with probability delta is
    (0, delta)-DP, so delta must be small next to ``1/n``; ``n**-1.5`` leaves
    an expected ``n**-0.5`` such leaks at worst, and 1e-5 caps it for small n.
    ``budget_delta`` is the delta of the accountant the fit is charged to (0,
    a pure-DP ledger, is ignored): at most it, a fit at epsilon costs that
    accountant exactly epsilon, so ``PrivacyAccountant(epsilon=1, delta=1e-6)``
    affords one default fit at ``epsilon=1`` (at 1e-5 it cost 1.14 at 1e-6,
    and was refused).
    """
    cap = budget_delta if 0.0 < budget_delta < 1e-5 else 1e-5
    return float(min(cap, max(n_samples, 1) ** -1.5))


#: The most noisy gradient steps a fit takes (max_iter).
MAX_ITER = 10**6

#: The largest finite epsilon a fit takes.  The Gaussian-DP conversions and
#: the accountant's sums of mu**2 overflow near the largest float; epsilon = inf
#: (no noise) is accepted as such.
MAX_FINITE_EPSILON = 1e300


def target_privacy(owner, n_samples):
    """``(epsilon, delta)`` of a fit of ``owner`` (an estimator or a search) on n samples.

    :func:`checked_privacy` of ``owner``'s ``epsilon`` and ``delta``; the
    accountant's delta (``owner._accountant_delta()``) is read only for
    ``delta=None``.
    """
    return checked_privacy(type(owner).__name__, owner.epsilon, owner.delta, n_samples,
                           owner._accountant_delta)


def _too_large(epsilon):
    """Whether a real ``epsilon`` is finite and above :data:`MAX_FINITE_EPSILON`
    (compared as a Python float: a float32 would cast the cap to inf, with a
    warning; an int beyond floats, 10**400, is too large)."""
    try:
        return MAX_FINITE_EPSILON < float(epsilon) < np.inf
    except OverflowError:
        return True


def _fits_replay_seeds(accountant):
    """Whether a fixed integer ``random_state`` gives the same fit every time:
    only when the fit is charged to the built-in default accountant (``accountant()``
    resolves it); a ledger of the user's draws a new noise stream per release
    (docs/randomness.md).  For the ``non_deterministic`` estimator tag, which
    must not raise: an accountant that cannot be resolved counts as not replaying."""
    try:
        return _replays_seeds(accountant())
    except Exception:
        return False


def checked_privacy(name, epsilon, delta, n_samples, budget_delta):
    """``(epsilon, delta)`` of a release by ``name`` on n samples, checked.

    epsilon must be in (0, :data:`MAX_FINITE_EPSILON`] or inf; ``delta=None``
    is :func:`default_delta` (at most ``budget_delta()``, the delta of the
    accountant charged, called only then), else it must be in (0, 1).  Refused
    here, before anything is charged, also under skip_parameter_validation.
    """
    if isinstance(epsilon, Real) and _too_large(epsilon):
        raise InvalidParameterError(
            f"The 'epsilon' parameter of {name} must be at most "
            f"{MAX_FINITE_EPSILON:g}, or inf for no noise; got {epsilon!r}.")
    if not (isinstance(epsilon, Real) and not isinstance(epsilon, bool) and epsilon > 0):
        raise InvalidParameterError(
            f"The 'epsilon' parameter of {name} must be a float in the range (0.0, inf]. "
            f"Got {epsilon!r} instead.")
    if delta is None:
        delta = default_delta(n_samples, budget_delta())
    elif not (isinstance(delta, Real) and not isinstance(delta, bool) and 0.0 < delta < 1.0):
        # (Also under skip_parameter_validation: delta = 0 divided by zero in
        # the rule choosing the method.)
        raise InvalidParameterError(
            f"The 'delta' parameter of {name} must be a float in the range "
            f"(0.0, 1.0) or None. Got {delta!r} instead.")
    return float(epsilon), float(delta)


def warn_large_delta(owner, delta, n_samples, name=None):
    """Warn when the ``delta`` of ``owner``'s fit on n samples is not below ``1/n``.

    Called once per fit the user asked for (not for a search's candidates,
    nor for the search ``norm_bound="auto"`` runs), with the fit's
    :func:`target_privacy` delta.  n is public: the warning says nothing of
    the data.
    """
    if delta * n_samples >= 1.0:
        warn_user(
            f"{name or type(owner).__name__}: delta={delta:.3g} is not below 1/n = "
            f"{1.0 / n_samples:.3g} (n = {n_samples}): a mechanism publishing one record "
            "chosen at random, in the clear, meets such a delta. Choose delta well below "
            "1/n (delta=None is min(1e-5, n**-1.5, the accountant's delta)).",
            UserWarning,
        )


class _BaseDPGLM(_IndependentNoiseOnCloneMixin, _DefaultAccountantMixin, BaseEstimator):
    """Base class of the DP GLM estimators; not for direct use."""

    _parameter_constraints: dict = {
        "epsilon": [Interval(Real, 0, np.inf, closed="right")],
        "delta": [Interval(Real, 0, 1, closed="neither"), None],
        "feature_norm": [Interval(Real, 0, np.inf, closed="neither"), None],
        "norm_bound": [Interval(Real, 0, np.inf, closed="neither"), StrOptions({"auto"})],
        "fit_intercept": ["boolean"],
        # At most a million steps: beyond, a fit charged at once would run
        # for hours (and max_iter = 2**64 failed after the charge).
        "max_iter": [Interval(Integral, 1, MAX_ITER, closed="both"), None],
        "method": [StrOptions(set(MECHANISMS))],
        "projection_dim": [Interval(Integral, 1, None, closed="left"), None],
        "l2_regularization": [Interval(Real, 0, None, closed="neither"), None],
        "random_state": RANDOM_STATE,
        "accountant": [PrivacyAccountant, None],
    }

    # (Under scikit-learn's metadata routing, score's sample_weight request is
    # left unset, as scikit-learn's estimators leave theirs: False broke
    # Pipeline.score, which routes sample_weight=None always, and WARN warned
    # on every Pipeline.score.  A sample_weight routed by cross_validate
    # without set_score_request then fails when the first fold is scored,
    # after its fit: user guide, section 3.)

    # -- hooks for concrete estimators ------------------------------------
    def _encode_targets(self, y):
        """Return ``(loss, y_encoded, y_bound, y_offset)``; set label attributes."""
        raise NotImplementedError

    def _check_targets(self, y, *, warn=True):
        """Raise on labels the estimator cannot train on (before any charge)."""
        raise NotImplementedError

    def _public_loss(self, classes=None):
        """``(loss, y_bound, y_offset)`` from the parameters (and a classifier's classes)."""
        raise NotImplementedError

    def _validated(self, X, y, *, warn=True):
        """``(X, y)`` validated for ``fit``; bad input raises here, before the charge.

        Sets ``n_features_in_`` (and ``feature_names_in_``) for this X, as
        scikit-learn's ``validate_data`` does.  ``warn=False`` silences the
        warning of a classifier reading its classes from y.
        """
        # Finiteness is checked whatever scikit-learn's assume_finite says: a
        # NaN or inf would be trained on after the charge and released.
        check_sparse_structure(X)  # (before scipy converts it)
        with config_context(assume_finite=False):
            X, y = _validate_data_quietly(self, X, y, accept_sparse="csr",
                                          dtype=[np.float64, np.float32],
                                          y_numeric=not self._is_classifier())
        if not self._is_classifier() and y.dtype.kind == "f" and not np.all(np.isfinite(y)):
            # scikit-learn's NaN check passes None in an array of objects,
            # which its conversion to numbers then makes a NaN: trained on,
            # after the charge, it gave a model of NaNs (adversarial check).
            raise ValueError(f"{type(self).__name__}: Input y contains NaN or infinity (a "
                             "missing value such as None); drop or impute those rows first.")
        X = _duplicates_summed(X)
        self._check_targets(y, warn=warn)
        return X, y

    # -- the template -------------------------------------------------------
    def _accountant(self):
        if self.accountant is not None:
            return self.accountant
        return self._default_accountant()

    def _accountant_delta(self):
        return self._accountant().delta

    def _plan_warnings(self, method, n_features):
        """Warnings about the parameters, before the charge: an option that does nothing
        for the method that trains, and the public bounds not stated (_bound_warnings)."""
        unused = []
        if self.projection_dim is not None and method != "jl":
            unused.append(f"projection_dim is used by method='jl' only, not {method!r}")
        elif self.projection_dim is not None and self.projection_dim >= n_features:
            unused.append(f"projection_dim={self.projection_dim} >= n_features={n_features}: "
                          "'jl' does not project and trains as Noisy GD")
        if self.max_iter is not None and method == "non_private":
            unused.append("max_iter is unused with epsilon=inf: the problem is solved "
                          "exactly over the ball, without noise")
        if self.max_iter is not None and method == "output_perturbation":
            unused.append("max_iter is used by method='noisy_gd' and 'jl' only, not "
                          "'output_perturbation' (its solver runs to a certified accuracy)")
        if self.l2_regularization is not None and method != "output_perturbation":
            unused.append("l2_regularization is used by method='output_perturbation' only, "
                          f"not {method!r}")
        return [f"{type(self).__name__}: {message}." for message in unused] + \
            self._bound_warnings()

    def _feature_norm(self):
        """The public bound on the rows' norm: ``feature_norm`` (1.0 when not given)."""
        return 1.0 if self.feature_norm is None else float_or_inf(self.feature_norm)

    def _bound_warnings(self):
        """Warnings that a public bound was not stated: parameters only."""
        if self.feature_norm is not None:
            return []
        return [f"{type(self).__name__}: feature_norm was not given, so rows of X with a "
                "norm above 1 are scaled down to 1 for training (predict uses them as "
                "given). State the public bound on the "
                "rows' Euclidean norm after public preprocessing, e.g. features scaled by "
                "ranges from the data's documentation (never from the data itself); rows "
                "beyond it are clipped. feature_norm=1.0 keeps 1 without this warning."]

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, **fit_params):
        """Fit the model with an (epsilon, delta)-DP guarantee.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data. Rows with norm above ``feature_norm`` are scaled
            down to it (clipping); nothing is computed from X without noise.
        y : array-like of shape (n_samples,)
            Targets.
        **fit_params : none accepted
            There is no ``sample_weight``: a weight scales one record's
            influence, hence the sensitivity the noise is calibrated to.
            Any keyword raises a TypeError saying so, before anything is
            read or charged.

        Returns
        -------
        self : object
            Fitted estimator.

        Raises
        ------
        BudgetExceededError
            If the accountant cannot afford (epsilon, delta); nothing is
            trained and the estimator is left as it was (unfitted, or with
            its previous fit).
        """
        if fit_params:
            raise TypeError(
                f"{type(self).__name__}.fit takes X and y only; got {sorted(fit_params)}. "
                "There is no sample_weight: a weight scales one record's influence, hence "
                "the sensitivity the noise is calibrated to.")
        # (y is checked first: norm_bound="auto" reads it first.)
        n_samples = _fit_n_samples(X, y, type(self).__name__)
        accountant = self._accountant()
        epsilon, delta = target_privacy(self, n_samples)
        warn_large_delta(self, delta, n_samples)
        # Fail fast, before any data value is read: every mechanism is
        # calibrated to exactly (epsilon, delta), i.e. one mu-GDP release.
        _check_release(accountant, [GaussianEvent(mu=gdp_mu(epsilon, delta))], epsilon, delta)
        if isinstance(self.norm_bound, str):
            if self.norm_bound != "auto":  # (under skip_parameter_validation: any text ran "auto")
                raise InvalidParameterError(
                    f"The 'norm_bound' parameter of {type(self).__name__} must be a float in the "
                    f"range (0.0, inf) or 'auto'. Got {self.norm_bound!r} instead.")
            # "auto": the paper's private grid search over B (SPEC 5), one
            # Gaussian event of the same total cost; the search validates the
            # data before it charges anything, as the direct path does here.
            from .model_selection._auto import fit_auto_norm_bound

            return fit_auto_norm_bound(self, X, y)

        # A fit that fails leaves the estimator as it was, unfitted or with its
        # previous fit intact, whether it was refused before the charge (bad
        # input, a bound, an option under warnings-as-errors, or another fit
        # on the same accountant got there first) or failed after it (the
        # charge stays recorded): nothing read from this X and y stays behind.
        state = dict(self.__dict__)
        try:
            X, y = self._validated(X, y)
            # numpy's floating-point errors are ignored from here to the
            # release: under a process-wide np.seterr(all="raise") or "warn",
            # whether one occurs (say, a product underflowing) depends on one
            # record.
            with np.errstate(all="ignore"):
                loss, y_enc, y_bound, y_offset = self._encode_targets(y)
            sparse = sp.issparse(X)
            problem, method, calibration = self._public_plan(
                X.shape[0], X.shape[1], loss, y_bound, epsilon, delta, sparse=sparse)
            for message in self._plan_warnings(method, problem.n_features):
                warn_user(message, UserWarning)
            # Before the charge: a random_state numpy refuses (under
            # skip_parameter_validation) then fails with nothing spent.
            with _streams_given_back_if_refused(accountant):
                rng = _release_rng(self.random_state, accountant)
                calibration = draw_public(method, problem, calibration, rng, sparse=sparse)
                accountant._record(calibration.events,
                                   source=f"{type(self).__name__}(method={method!r})")
            with np.errstate(all="ignore"):
                theta, n_iter = train(method, GLMObjective(problem, X, y_enc), calibration,
                                      rng)
                # (float32 X: a noisy theta beyond float32's range becomes inf
                # here, not an error after the charge under np.seterr("raise").)
                self._set_coef(theta, problem, y_offset, X.dtype)
            self.norm_bound_ = problem.norm_bound
            self.n_iter_ = int(n_iter)
            self.method_ = method
            self.projection_dim_ = (int(calibration.params["projection_dim"])
                                    if method == "jl" else None)
            self.privacy_events_ = list(calibration.events)
            self.privacy_spent_ = (float(compose(self.privacy_events_, delta)), delta)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(state)
            raise
        return self

    def _public_plan(self, n_samples, n_features, loss, y_bound, epsilon, delta,
                     sparse=None, copies=1):
        """``(problem, method, calibration)``: the half of fit that reads no data.

        Everything here is a function of public quantities (the shape and
        storage of X, the parameters, the budget); a bound or option it
        refuses is refused before the charge, and the searches call it for
        each candidate (:meth:`_check_public_plan`) before theirs.
        ``sparse``: whether X is sparse (None: not known, the working memory
        of either storage is reserved); ``copies``: how many such fits a
        search runs at once (the memory of each is reserved).
        """
        # (Also under skip_parameter_validation: max_iter 2**40 ran for ever and
        # 2.5 ran 2 steps; projection_dim -5 raised "math domain error" from
        # method="auto", NaN "cannot convert float NaN".)
        self._check_count("max_iter", MAX_ITER)
        self._check_count("projection_dim")
        try:
            problem = PublicProblem(
                loss=loss,
                n_samples=n_samples,
                n_features=n_features,
                feature_norm=self._feature_norm(),
                intercept_feature=self._intercept_feature(n_features),
                y_bound=y_bound,
                norm_bound=float_or_inf(self.norm_bound),
            )
            max_iter = (default_steps(problem, gdp_mu(epsilon, delta))
                        if self.max_iter is None else int(self.max_iter))  # True is 1
            # "auto" is resolved by a pure rule of public quantities (SPEC 4.4).
            method = resolve(self.method, problem, epsilon, delta,
                             projection_dim=self.projection_dim)
            calibration = calibrate(method, problem, epsilon, delta, max_iter=max_iter,
                                    projection_dim=self.projection_dim,
                                    l2=self.l2_regularization)
        except PublicBoundsError:
            raise ValueError(self._bounds_message()) from None
        # Memory the training will need, sized by public quantities: a fit (or
        # a search's candidate) too large for it fails here, before the charge.
        reserve_working_memory(method, problem, calibration, sparse=sparse, copies=copies)
        return problem, method, calibration

    def _check_count(self, name, high=None):
        """Refuse parameter ``name`` unless it is None or an int in [1, high]."""
        value = getattr(self, name)
        if value is None or (isinstance(value, Integral) and not isinstance(value, bool)
                             and 1 <= value and (high is None or value <= high)):
            return
        closing = "inf)" if high is None else f"{high}]"
        raise InvalidParameterError(
            f"The {name!r} parameter of {type(self).__name__} must be an int in the range "
            f"[1, {closing} or None. Got {value!r} instead.")

    def _bounds_message(self):
        """A refused public bound, in the words of the estimator's own parameters."""
        params = self.get_params(deep=False)
        given = ", ".join(f"{name}={params[name]!r}" + (" (1.0)" if params[name] is None and
                                                         name == "feature_norm" else "")
                          for name in ("feature_norm", "norm_bound", "y_bound", "threshold")
                          if name in params)
        return (
            f"The public bounds of {type(self).__name__} are too large or too small: "
            f"{given}. Each bound, and each bound the training derives from them (the "
            f"norm of a row with its intercept feature; twice norm_bound for "
            f"method='jl'; the default Huber threshold), must lie between "
            f"{1 / _MAX_BOUND:g} and {_MAX_BOUND:g}, and the gradient bound and "
            "smoothness they give must be finite. Rescale the data so that the bounds "
            "are moderate.")

    def _check_public_plan(self, n_samples, n_features, epsilon, delta, classes=None,
                           sparse=None, copies=1):
        """Raise what :meth:`_public_plan` would raise in ``fit``; return the method.

        ``sparse=None`` (X's storage not known) reserves the memory of either;
        ``copies`` fits running at once reserve ``copies`` times as much."""
        loss, y_bound, _ = self._public_loss(classes)
        return self._public_plan(n_samples, n_features, loss, y_bound, epsilon, delta,
                                 sparse, copies)[1]

    def _intercept_feature(self, n_features):
        """The constant public feature c appended to each row (SPEC 1).

        ``c = feature_norm / 2``.  c enters the sensitivity and the step
        through ``||x_aug|| <= sqrt(X**2 + c**2)`` (1.12 X here, 1.41 X with
        ``c = X``), and the intercept b costs ``|b| / c`` of the norm budget
        B.  A model (w, b) needs scores up to ``||theta|| ||x_aug||``, which is
        smallest when ``c / X = |b| / ||w||`` (Cauchy-Schwarz); that ratio is
        not public, and intercepts comparable to half the coefficient norm
        are the common case for centered labels and standardized features.
        Measured (benchmarks/utility.py and rates.py): c = X / 2 is better
        than c = X on every data set at epsilon >= 0.3 (noise falls by about
        a third), and c = 0.3 X starts to lose on diabetes, whose intercept
        is large.
        """
        if not self.fit_intercept:
            return 0.0
        return 0.5 * self._feature_norm()

    def _augmented_feature_norm(self):
        """``X_aug = sqrt(feature_norm**2 + c**2)``: the norm bound of a clipped
        row with its constant feature (``feature_norm`` without an intercept)."""
        return math.hypot(self._feature_norm(), self._intercept_feature(0))

    def _set_coef(self, theta, problem, y_offset, dtype=np.float64):
        """``coef_`` and ``intercept_`` from theta, in X's dtype (float32 X: float32 model,
        as scikit-learn's linear models; training itself runs in float64)."""
        d = problem.n_features
        coef = theta[:d].T  # (K, d)
        intercept = (problem.intercept_feature * theta[d] if problem.fit_intercept
                     else np.zeros(theta.shape[1]))
        intercept = intercept + y_offset
        if dtype != np.float64 and not all(
                np.all(np.abs(a) <= np.finfo(dtype).max) for a in (coef, intercept)):
            # Bounds beyond float32's range (y_bound near 1e39) made the model
            # inf in X's dtype: kept in float64 (the released values, as they are).
            dtype = np.float64
        self.coef_ = coef.astype(dtype, copy=False)
        self.intercept_ = intercept.astype(dtype, copy=False)

    def _is_classifier(self):
        return False

    def _decision(self, X):
        check_is_fitted(self)
        X = _validate_data_quietly(self, X, accept_sparse="csr",
                                   dtype=[np.float64, np.float32], reset=False)
        return np.asarray(X @ self.coef_.T) + self.intercept_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.non_deterministic = not _fits_replay_seeds(self._accountant)
        return tags
