"""Private model selection (SPEC sections 5 and 6).

- :class:`DPGridSearchCV`: every candidate of a grid trained on one part of
  the data, one chosen privately on the other (the paper's Algorithm 4 for
  any parameters);
- :class:`DPRandomizedSearchCV`: random search with random stopping, whose
  cost hardly grows with the number of candidates.

Both are (epsilon, delta)-DP in total and charge the accountant once, before
reading any data.  The privacy argument (parallel composition of the
training and validation parts, recorded as one Gaussian event) is in
:mod:`dp_glm_sklearn.model_selection._search`.
"""

from ._search import DPGridSearchCV, DPRandomizedSearchCV

__all__ = ["DPGridSearchCV", "DPRandomizedSearchCV"]
