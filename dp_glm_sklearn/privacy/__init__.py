"""Privacy calibration, selection, events and accounting: every privacy
number of the library comes from this package.

- :mod:`~dp_glm_sklearn.privacy.calibration`: exact Gaussian calibration
  (the analytic Gaussian mechanism and Gaussian DP), and dividing and composing Gaussian-DP budgets;
- :mod:`~dp_glm_sklearn.privacy.selection`: private selection (exponential
  mechanism, GEM, Gaussian report-noisy-max) and random stopping;
- :mod:`~dp_glm_sklearn.privacy.noise`: the one place where the randomness
  that protects privacy is drawn;
- :mod:`~dp_glm_sklearn.privacy.events`: what a release costs, and the
  composition of a ledger of releases;
- :mod:`~dp_glm_sklearn.privacy.accountant`: a budget shared by the releases
  of an analysis.
"""

from .accountant import (
    BudgetExceededError,
    PrivacyAccountant,
    PrivacyLeakWarning,
    SpendRecord,
    default_accountant,
    get_default_accountant,
)
from .calibration import gaussian_sigma, gdp_delta, gdp_epsilon, gdp_mu
from .events import (
    ApproxDPEvent,
    GaussianEvent,
    PureDPEvent,
    RandomStoppingEvent,
    compose,
    total_mu,
)

__all__ = [
    "ApproxDPEvent",
    "BudgetExceededError",
    "GaussianEvent",
    "PrivacyAccountant",
    "PrivacyLeakWarning",
    "PureDPEvent",
    "RandomStoppingEvent",
    "SpendRecord",
    "compose",
    "default_accountant",
    "gaussian_sigma",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "get_default_accountant",
    "total_mu",
]
