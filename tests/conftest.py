"""Fixtures shared by several test modules."""

import numpy as np
import pytest


@pytest.fixture(scope="session")
def reg_data():
    """A small linear regression: 1200 rows, 3 features of norm about 0.9."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1200, 3)) / 2
    y = X @ [0.5, -0.5, 0.25] + 0.1 * rng.normal(size=1200)
    return X, y
