"""Fixtures shared by several test modules."""

import numpy as np
import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (a seed derived from each
# test), so a CI result is reproducible; no example database is written.  The
# price: a run explores no new examples (load another profile to search more).
settings.register_profile("dp_glm_sklearn", derandomize=True, database=None)
settings.load_profile("dp_glm_sklearn")


@pytest.fixture(scope="session")
def reg_data():
    """A small linear regression: 1200 rows, 3 features of norm about 0.9."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1200, 3)) / 2
    y = X @ [0.5, -0.5, 0.25] + 0.1 * rng.normal(size=1200)
    return X, y


@pytest.fixture(scope="session")
def clf_data():
    """A small binary classification: 1200 rows, 4 features, labels 0 and 1."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1200, 4))
    y = (X @ [1.5, -1.0, 0.5, 0.0] + 0.3 * rng.normal(size=1200) > 0).astype(int)
    return X, y

