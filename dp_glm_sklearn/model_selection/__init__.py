"""Private model selection: a private replacement for scikit-learn's searches.

- :class:`DPGridSearchCV`: every candidate of a grid trained on one part of
  the data, one chosen privately on the other (the paper's Algorithm 4 for
  any parameters);
- :class:`DPRandomizedSearchCV`: random search with random stopping, whose
  cost hardly grows with the number of candidates;
- :class:`DPConfidenceBoosting`: the same estimator trained on disjoint
  chunks, the best model chosen privately on a held-out chunk (the paper's
  confidence boosting, Appendix E);
- :func:`dp_score`: a fitted model's score on private data, with noise,
  charged like a fit;
- :func:`leaky_steps`: the preprocessing steps of a Pipeline that learn from
  the data without noise (what the searches warn about).

All are (epsilon, delta)-DP in total and charge the accountant once, before
reading any data.  The privacy argument (parallel composition of the
training and validation parts, recorded as one Gaussian event) is in
:mod:`dp_glm_sklearn.model_selection._search` and
:mod:`dp_glm_sklearn.model_selection._boosting`.
"""

from ._boosting import DPConfidenceBoosting
from ._dp_score import dp_score
from ._random import DPRandomizedSearchCV
from ._search import DPGridSearchCV
from ._slot import leaky_steps

__all__ = ["DPConfidenceBoosting", "DPGridSearchCV", "DPRandomizedSearchCV", "dp_score",
           "leaky_steps"]
