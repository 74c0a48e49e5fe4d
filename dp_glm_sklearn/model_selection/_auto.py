"""``norm_bound="auto"``: the paper's private grid over the norm bound.

The radii of the grid (:func:`auto_norm_bound_grid`, Theorem 8 of Arora et
al. 2022), the :class:`DPGridSearchCV` that a DP GLM with
``norm_bound="auto"`` runs over them, the public list of the fits that search
will run (checked before any charge), and :func:`fit_auto_norm_bound`, the
``fit`` of such an estimator.
"""

import math

from sklearn.base import clone, is_classifier
from sklearn.utils.validation import indexable

from .._base import target_privacy
from .._randomness import _clones_draw_nothing
from .._sklearn_compat import num_samples
from .._validation import _n_samples
from ..privacy.accountant import PrivacyAccountant
from ._search import DPGridSearchCV
from ._slot import _search_defaults


def auto_norm_bound_grid(n_train, epsilon, smoothness, unit):
    """Radii of the private grid search over ``norm_bound`` (public quantities only).

    In the paper's normalization (rows of norm 1, loss at zero at most 1)
    Algorithm 4 tries ``B_j = 2^j`` and Theorem 8 (Appendix D.3 of Arora et al. 2022)
    takes ``K = log max(sqrt(n / H), (n eps)^(2/3) / sqrt(H))`` radii: beyond
    ``2^K`` the excess-risk bound of a candidate exceeds that of the zero
    model.  Here ``K = ceil(log2(...))`` (at least 2), with n the size of the
    training part, and the radii are ``unit * 2^j`` for ``j = -1, ..., K - 2``:
    ``unit`` converts the normalization back (``Y / X_aug`` for regression,
    a model that just reaches the label bound; ``1 / X_aug`` for
    classification, a logit of 1), and the grid starts one octave below it
    because on small noisy data the best radius is below ``||w*||``.

    Parameters
    ----------
    n_train : int
        Size of the training part.
    epsilon : float
        Total epsilon, in ``(0, inf]``.
    smoothness : float
        Smoothness H of the loss in the prediction (1 squared, 1/4 logistic).
    unit : float
        Scale of the radii, ``> 0``.

    Returns
    -------
    radii : list of float

    Examples
    --------
    >>> from dp_glm_sklearn.model_selection._auto import auto_norm_bound_grid
    >>> auto_norm_bound_grid(165, 3.0, 1.0, 1.0)
    [0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
    """
    n_eps = n_train * min(float(epsilon), 1e6)
    size = max(math.sqrt(n_train / smoothness), n_eps ** (2.0 / 3.0) / math.sqrt(smoothness))
    k = max(2, math.ceil(math.log2(size)))
    return [float(unit * 2.0**j) for j in range(-1, k - 1)]


@_clones_draw_nothing
def _auto_norm_bound_search(estimator, n_samples, epsilon, delta, accountant=None):
    """The unfitted :class:`DPGridSearchCV` that ``norm_bound="auto"`` runs
    on ``n_samples`` records at (epsilon, delta); public, as its grid.
    ``accountant``: the one it charges (None: the estimator's)."""
    x_aug = estimator._augmented_feature_norm()
    if is_classifier(estimator):
        smoothness, unit = 0.25, 1.0 / x_aug
    else:
        loss, y_bound, _ = estimator._public_loss()
        smoothness, unit = loss.smoothness, y_bound / x_aug
    search = DPGridSearchCV(
        clone(estimator).set_params(norm_bound=1.0, accountant=None,
                                    **_search_defaults(estimator)),
        {"norm_bound": None},  # set below, once the split size is known
        epsilon=epsilon, delta=delta, refit=True, random_state=estimator.random_state,
        accountant=estimator._accountant() if accountant is None else accountant,
    )
    n_train = n_samples - int(round(search.validation_fraction * n_samples))
    search.param_grid = {"norm_bound": auto_norm_bound_grid(max(n_train, 1), epsilon,
                                                            smoothness, unit)}
    search._ledger_source = (f"{type(estimator).__name__}(norm_bound='auto', "
                             f"K={len(search.param_grid['norm_bound'])})")
    search._candidate_words = ("each radius norm_bound='auto' tries", "give a fixed norm_bound")
    search._event_name = f"{type(estimator).__name__}(norm_bound='auto')"
    search._inner = True
    return search


def _public_fits(probe, fits):
    """``(estimator, n_samples, epsilon, delta)`` of each fit ``probe`` will run,
    one per entry of ``fits``; a ``norm_bound="auto"`` probe runs its own
    search, whose candidates and refit are listed at each radius of its grid
    (its budget split is checked too: it raises as that search would)."""
    for n_samples, epsilon, delta in fits:
        if probe.get_params().get("norm_bound") != "auto":
            yield probe, n_samples, epsilon, delta
            continue
        # (A plan charges nothing: its accountant is not the probe's, which may
        # be a default that is gone where the search that runs it has its own.)
        inner = _auto_norm_bound_search(probe, n_samples, epsilon, delta,
                                        accountant=PrivacyAccountant())
        radii = inner.param_grid["norm_bound"]
        n_train = n_samples - inner._validation_size(n_samples)
        inner_fits = inner._fits(inner._plan(len(radii), n_samples), n_train, n_samples)
        for radius in radii:
            at_radius = clone(inner.estimator).set_params(norm_bound=radius)
            for inner_fit in inner_fits:
                yield at_radius, *inner_fit


def fit_auto_norm_bound(estimator, X, y):
    """``fit`` of a DP GLM with ``norm_bound="auto"``: called by its template.

    Runs :class:`DPGridSearchCV` over ``norm_bound`` on the radii of
    :func:`auto_norm_bound_grid`, with the estimator's total (epsilon, delta),
    accountant and random state, the default scoring and ``refit=True``;
    then takes over the refitted winner's fitted attributes.  The refit is
    explicit (the search's default is ``refit=False``): an estimator fitted
    on ``(X, y)`` should be trained on all of it, and on
    ``benchmarks/model_selection.py`` the refitted model was the better one.
    The chosen radius is
    ``norm_bound_``; ``privacy_events_`` and ``privacy_spent_`` are those of
    the whole search, (epsilon, delta) in total.

    Unlike the paper's Algorithm 4, the selection uses the search's default
    score (the Brier score of a classifier's probabilities, or the absolute
    error of predictions clipped to ``y_bound``), whose sensitivity does not
    grow with the radius, rather
    than the loss clipped at ``Delta(B)`` with the generalized exponential
    mechanism and the zero model: on ``benchmarks/model_selection.py`` the
    latter's penalties on large radii made it choose radii far too small.
    """
    _n_samples(y, type(estimator).__name__, what="y")
    X, y = indexable(X, y)
    n_samples = num_samples(X)
    if n_samples < 2:
        raise ValueError(
            f"norm_bound='auto' needs at least 2 samples (one to train on and one to "
            f"choose the radius with); got n_samples={n_samples}."
        )
    epsilon, delta = target_privacy(estimator, n_samples)
    search = _auto_norm_bound_search(estimator, n_samples, epsilon, delta)
    search.fit(X, y)
    best = search.best_estimator_
    # A refit replaces every fitted attribute: none of an earlier fit (say
    # feature_names_in_ of a DataFrame) may survive.
    for name in [name for name in vars(estimator) if name.endswith("_")
                 and not name.startswith("_")]:
        delattr(estimator, name)
    for name, value in vars(best).items():
        if name.endswith("_") and not name.startswith("_"):
            setattr(estimator, name, value)
    estimator.norm_bound_ = float(search.best_params_["norm_bound"])
    estimator.privacy_events_ = list(search.privacy_events_)
    estimator.privacy_spent_ = search.privacy_spent_
    return estimator
