"""Bounded validation scores: what the searches select on.

The scorings a search accepts (:data:`SCORINGS`) and the per-example
validation losses behind them, each clipped to ``[0, bound]`` with a public
``bound`` (0/1 errors; the Brier score of the predicted probabilities; the
errors of predictions clipped to the public label interval; the GLM's
training loss clipped at its sup over the constraint ball, the paper's
Delta(B)), so that a mean over ``n_val`` rows has
replace-one sensitivity ``bound / n_val``.
"""

import math

import numpy as np
from scipy.special import log_expit, log_softmax
from sklearn.base import clone, is_classifier

from .._objective import _SCORE_BLOCK_BYTES
from .._sklearn_compat import safe_indexing
from .._warn import silenced
from ._slot import _fresh, _head, _preprocessing, _transform, _with_params

#: Scores of bounded sensitivity a search can select on.
SCORINGS = ("accuracy", "neg_brier_score", "loss", "neg_mean_absolute_error",
            "neg_mean_squared_error")

#: Why these and no others, for the refusal of another ``scoring``.
_SCORINGS_NOTE = (
    "'neg_brier_score': the squared error of a classifier's predicted probabilities, "
    "as scikit-learn's brier_score_loss (the searches' default for classifiers); "
    "'loss': the model's own loss, clipped, e.g. the log loss of DPLogisticRegression; "
    "a score whose sensitivity has no public bound, such as 'roc_auc' (it depends on "
    "the class counts) or 'r2', cannot be selected on privately")

#: The scorings that need a classifier.
_CLASSIFIER_SCORINGS = ("accuracy", "neg_brier_score")


def _check_scoring(estimator, slot, scoring):
    """Raise if ``scoring`` cannot be computed for ``estimator`` (before any charge)."""
    owner = slot.owner(estimator)
    if scoring in _CLASSIFIER_SCORINGS and not is_classifier(estimator):
        raise ValueError(
            f"scoring={scoring!r} needs a classifier; got {type(estimator).__name__}. "
            f"Use one of {[s for s in SCORINGS if s not in _CLASSIFIER_SCORINGS]}."
        )
    if scoring == "neg_brier_score" and not hasattr(estimator, "predict_proba"):
        raise ValueError(
            f"scoring='neg_brier_score' needs a classifier with predict_proba; "
            f"{type(estimator).__name__} has none. Use scoring='accuracy'."
        )
    if scoring in ("neg_mean_absolute_error", "neg_mean_squared_error"):
        _regression_interval(owner, scoring)


def _score_scale(owner, scoring):
    """What sets the scale of ``owner``'s ``scoring`` losses, besides the model.

    A regressor's scores clip labels (and predictions) to its ``y_bound``,
    and ``"loss"`` is its own loss function (a Huber threshold): candidates
    whose scales differ score different things, and the smallest interval
    or threshold would always win.  None for a classifier's accuracy and
    Brier score."""
    if scoring in _CLASSIFIER_SCORINGS or is_classifier(owner):
        return None
    scale = owner._y_interval()
    return (scale, repr(owner._get_loss())) if scoring == "loss" else scale


def _check_comparable_scores(estimator, candidates, slot, scoring, what="grid"):
    """Refuse candidates whose ``scoring`` losses have different scales
    (:func:`_score_scale`), before any charge; ``candidates`` are parameter
    dicts applied to ``estimator``.  Public: the settings only."""
    scales = {}
    for params in candidates:
        owner = slot.owner(_with_params(estimator, params))
        scales.setdefault(_score_scale(owner, scoring), params)
    if len(scales) > 1:
        first, second = list(scales.values())[:2]
        same_interval = len({scale[0] for scale in scales}) == 1 if scoring == "loss" else False
        why = ("with scoring='loss' each candidate is scored by its own loss, so their "
               "scores cannot be compared: a Huber loss with a smaller threshold is smaller "
               "on the same residuals (the smallest threshold would always win); select on "
               "an error that does not depend on it, such as the default scoring"
               if same_interval else
               f"each candidate's {scoring!r} clips the validation labels to its own "
               "y_bound (and with scoring='loss' scores its own loss), so their scores "
               "cannot be compared (the narrowest interval would always win)")
        keep = ("Search the threshold with another scoring" if same_interval else
                "Keep y_bound the same for every candidate and search the other parameters")
        raise ValueError(
            f"The search's {what} changes y_bound (or the loss's threshold with "
            f"scoring='loss') between candidates ({first!r} and {second!r}): {why}. {keep}."
        )


def _regression_interval(owner, scoring):
    if not hasattr(owner, "_y_interval"):
        raise ValueError(
            f"scoring={scoring!r} needs a DP regressor with a public 'y_bound'; "
            f"got {type(owner).__name__}."
        )
    return owner._y_interval()


def _glm_loss_bound(owner):
    """Sup of the training loss over the constraint ball and the public bounds.

    ``|z| <= B * X_aug`` for every clipped row; the loss is then at most
    ``phi(B X_aug + Y)`` for squared and Huber losses (residual bound),
    ``log(1 + e^{B X_aug})`` for the logistic loss and
    ``log(1 + (K - 1) e^{sqrt(2) B X_aug})`` for the multinomial loss
    (``|z_k - z_y| <= ||w_k - w_y|| X <= sqrt(2) ||W|| X``).  This is the
    paper's Delta(B) (Assumption 2).  It bounds the losses of a model in the
    ball; a JL candidate's released ``Phi^T w`` may lie outside it, and the
    per-example losses are clipped at Delta(B), so Delta(B) bounds them for
    every candidate.
    """
    B = float(getattr(owner, "norm_bound_", owner.norm_bound))
    bz = B * owner._augmented_feature_norm()
    if is_classifier(owner):
        k = len(owner.classes_)
        if k == 2:
            return float(np.logaddexp(0.0, bz))
        return float(np.logaddexp(0.0, math.log(k - 1) + math.sqrt(2.0) * bz))
    low, high = owner._y_interval()
    y_bound = (high - low) / 2 if owner.fit_intercept else max(abs(low), abs(high))
    loss = owner._get_loss()
    return float(loss.value(np.array([[bz + y_bound]]), np.zeros(1))[0])


def _planned_loss_bound(probe, n_features, classes):
    """:func:`_glm_loss_bound` of a fit of ``probe`` to come, before the charge.

    ``probe`` is the unfitted DP estimator at a fixed ``norm_bound``, to be
    fitted on ``n_features`` features with ``classes`` (None for a
    regressor).  Overflow gives inf, silently.
    """
    stand_in = clone(probe)  # with the attributes _glm_loss_bound reads from a fitted model
    stand_in.n_features_in_ = n_features
    if classes is not None:
        stand_in.classes_ = classes
    with np.errstate(all="ignore"):
        return _glm_loss_bound(stand_in)


def _class_codes(classes, y):
    """``(known, codes)``: which labels are among the sorted ``classes``, and
    each label's index there (0 for an unknown one, whose loss is its bound)."""
    known = np.isin(y, classes)
    return known, np.searchsorted(classes, np.where(known, y, classes[0]))


def _glm_losses(owner, X, y):
    """Per-example training loss of a fitted DP GLM on (transformed) rows."""
    if is_classifier(owner):
        known, codes = _class_codes(owner.classes_, y)
        # In float64 whatever the model's dtype: a float32 model's log
        # probabilities are coarser (the loss is clipped to its bound anyway).
        scores = np.asarray(owner.decision_function(X), dtype=np.float64)
        log_p = (np.column_stack([log_expit(-scores), log_expit(scores)]) if scores.ndim == 1
                 else log_softmax(scores, axis=1))[np.arange(len(codes)), codes]
        return np.where(known, -log_p, np.inf)
    low, high = owner._y_interval()
    residual = owner.predict(X) - np.clip(np.asarray(y, dtype=np.float64), low, high)
    return owner._get_loss().value(residual[:, None], np.zeros(len(residual)))


def _brier_losses(estimator, classes, X, y):
    """Per-example Brier score of a fitted classifier's probabilities.

    ``(p - y)**2`` for two classes (``p`` the probability of the second, ``y``
    1 for it and 0 for the first), in ``[0, 1]``, as scikit-learn's
    ``brier_score_loss``; ``sum_k (p_k - [y = k])**2`` for more, in ``[0, 2]``.
    ``classes``: the DP estimator's ``classes_``, the columns of the
    probabilities.  A label outside them gets the bound (its clip)."""
    known, codes = _class_codes(classes, y)
    proba = np.asarray(estimator.predict_proba(X), dtype=np.float64)
    if len(classes) == 2:
        losses = (proba[:, 1] - codes) ** 2
    else:
        proba[np.arange(len(codes)), codes] -= 1.0
        losses = np.einsum("ij,ij->i", proba, proba)
    return np.where(known, losses, np.inf)


def _validation_losses(estimator, slot, scoring, X, y):
    """Per-example losses in ``[0, bound]`` and the public ``bound``.

    The mean of n such losses has replace-one sensitivity ``bound / n``.
    Validation rows are not clipped: a huge one overflows the prediction or
    the loss to inf or NaN, which the clip to ``[0, bound]`` turns into the
    bound.  numpy's floating-point warnings, and the warnings of a user's
    steps transforming the validation rows, are not shown: whether they
    appear depends on one private record, once per candidate they would
    count the random search's secret K, and under warnings-as-errors one
    would raise after the charge.
    """
    owner = slot.owner(estimator)
    classes = getattr(owner, "classes_", ())
    rows = max(1, _SCORE_BLOCK_BYTES // (8 * max(len(classes), 1)))
    with silenced(), np.errstate(all="ignore"):
        if len(y) <= rows:
            # (Steps that work in place get a copy: the part is scored once per
            # candidate.  The blocks below are copies already.)
            return _clipped_losses(estimator, slot, scoring,
                                   _fresh(X, _preprocessing(estimator)), y)
        # Many classes: the scores (n_val x K) in blocks of rows, as in training
        # (a million declared classes asked for GBs here, after the charge).
        # Predictions are row by row; a user's step whose transform mixes rows
        # (outside the guarantee anyway: _slot) would see blocks, not the part.
        parts = [_clipped_losses(estimator, slot, scoring, safe_indexing(X, block),
                                 safe_indexing(y, block))
                 for block in np.array_split(np.arange(len(y)), -(-len(y) // rows))]
        return np.concatenate([losses for losses, _ in parts]), parts[0][1]


def _score_bound(estimator, slot, scoring):
    """The public bound of a fitted model's per-example ``scoring`` losses."""
    if scoring == "accuracy":
        return 1.0
    owner = slot.owner(estimator)
    if scoring == "neg_brier_score":
        return 1.0 if len(owner.classes_) == 2 else 2.0
    if scoring == "loss":
        return _glm_loss_bound(owner)
    low, high = _regression_interval(owner, scoring)
    return float(high - low if scoring == "neg_mean_absolute_error" else (high - low) ** 2)


def _clipped_losses(estimator, slot, scoring, X, y):
    bound = _score_bound(estimator, slot, scoring)
    if scoring == "accuracy":
        losses = (np.asarray(estimator.predict(X)) != np.asarray(y)).astype(np.float64)
        return losses, bound
    owner = slot.owner(estimator)
    if scoring == "neg_brier_score":
        losses = _brier_losses(estimator, owner.classes_, X, y)
    elif scoring == "loss":
        head = _head(estimator)  # fitted: the Pipelines' steps before the DP estimator
        if head is not None:
            X = _transform(head, X)
        losses = _glm_losses(owner, X, y)
    else:
        low, high = _regression_interval(owner, scoring)
        pred = np.clip(np.asarray(estimator.predict(X), dtype=np.float64), low, high)
        error = np.abs(pred - np.clip(np.asarray(y, dtype=np.float64), low, high))
        losses = error if scoring == "neg_mean_absolute_error" else error**2
    losses = np.nan_to_num(losses, nan=bound, posinf=bound)
    return np.clip(losses, 0.0, bound), float(bound)
