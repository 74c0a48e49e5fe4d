"""Pieces shared by the mechanisms: projection and the calibration record."""

from dataclasses import dataclass, field

import numpy as np


def project_ball(theta, radius):
    """Euclidean (Frobenius) projection onto ``{||theta|| <= radius}``."""
    norm = np.linalg.norm(theta)
    if norm > radius:
        return theta * (radius / norm)
    return theta


@dataclass(frozen=True)
class Calibration:
    """What a mechanism decided before touching data.

    ``sigma`` is the standard deviation of each noise draw, ``events`` the
    privacy cost of the whole release (what the accountant is charged), and
    ``params`` any other public quantity the mechanism fixed (step count,
    projection dimension, regularization...).  ``workspace`` holds memory
    allocated before the charge and filled with data during training (JL's
    projected rows): not public once trained on, so kept out of ``params``
    and of the repr.
    """

    sigma: float
    events: tuple
    params: dict = field(default_factory=dict)
    workspace: dict = field(default_factory=dict, repr=False, compare=False)
