"""Differentially private generalized linear models for scikit-learn.

Implements Arora, Bassily, Guzmán, Menart, Ullah, "Differentially Private
Generalized Linear Models Revisited" (NeurIPS 2022) with exact Gaussian noise
calibration and a privacy accountant that every fit, clones included, charges.
"""

from .linear_model import DPHuberRegressor, DPLinearRegression, DPLogisticRegression
from .model_selection import (
    DPConfidenceBoosting,
    DPGridSearchCV,
    DPRandomizedSearchCV,
    dp_score,
    leaky_steps,
)
from .preprocessing import PublicRangeScaler
from .privacy.accountant import (
    BudgetExceededError,
    PrivacyAccountant,
    PrivacyLeakWarning,
    default_accountant,
    get_default_accountant,
)

__version__ = "0.1.0"

__all__ = [
    "BudgetExceededError",
    "DPConfidenceBoosting",
    "DPGridSearchCV",
    "DPHuberRegressor",
    "DPLinearRegression",
    "DPLogisticRegression",
    "DPRandomizedSearchCV",
    "PrivacyAccountant",
    "PrivacyLeakWarning",
    "PublicRangeScaler",
    "default_accountant",
    "dp_score",
    "get_default_accountant",
    "leaky_steps",
]
