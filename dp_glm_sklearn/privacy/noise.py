"""The one place where the randomness that protects privacy is drawn.

Every mechanism of the library perturbs a released statistic through
:func:`add_gaussian_noise`, draws a selection's index through
:func:`sample_index` and random stopping's secret number of candidates
through :func:`sample_count`; calibration (how large ``sigma`` must
be, which probabilities, which stopping distribution) lives in
:mod:`dp_glm_sklearn.privacy.calibration` and
:mod:`dp_glm_sklearn.privacy.selection`, and nowhere else.  Randomness that
does not depend on the data and protects nothing by itself (the searches'
splits and seeds, JL's projection matrix) is drawn where it is used, from the
same generator.

Randomness comes from a :class:`numpy.random.Generator` (PCG64; Gaussian
draws by numpy's ziggurat method, in float64); with ``random_state=None`` it
is seeded with 128 bits of the operating system's entropy at every fit.
Floating-point Gaussian samplers are not exactly Gaussian (Mironov 2012, on
the Laplace case; Jin et al. 2022, "Are we there yet? Timing and
floating-point attacks on differential privacy systems"): the low-order bits
of a sampled double can, in principle, reveal more than the ideal mechanism.
The library does not implement a discrete or exact sampler, nor snapping:
the guarantee it states is that of the ideal continuous mechanism.  The
attacks read the unrounded noisy value; rounding released coefficients to a
grid well above the float resolution of the noise (post-processing) is a
mitigation users can apply, not a proof.  ``docs/randomness.md`` has the
details (seeding, what is and is not protected).
"""

from contextlib import contextmanager

import numpy as np

# Test-only hook for the privacy audit's power check (SPEC section 8): a
# multiplier on every noise draw.  Nothing in the public API can change it.
_AUDIT_NOISE_MULTIPLIER = 1.0


def add_gaussian_noise(value, sigma, rng):
    """Return ``value + N(0, sigma**2 I)`` (a new array).

    ``sigma == 0`` (epsilon = inf) returns a copy of ``value`` untouched.
    """
    value = np.asarray(value, dtype=np.float64)
    if sigma == 0:
        return value.copy()
    scale = sigma * _AUDIT_NOISE_MULTIPLIER
    return value + rng.normal(0.0, scale, size=value.shape)


def sample_index(probabilities, rng):
    """Index drawn from ``probabilities`` by inverting the CDF with one uniform."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {rng!r}.")
    cdf = np.cumsum(probabilities)
    index = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    return min(index, len(probabilities) - 1)


def sample_count(gamma, shape, rng):
    """A count K >= 1: geometric with success probability ``gamma`` (``shape=1``),
    else logarithmic with parameter ``1 - gamma`` (``shape=0``)."""
    if shape == 1.0:
        return int(rng.geometric(gamma))
    return int(rng.logseries(1.0 - gamma))


@contextmanager
def _audit_noise_multiplier(factor):
    """Scale all noise by ``factor`` inside the block. For tests only."""
    global _AUDIT_NOISE_MULTIPLIER
    old = _AUDIT_NOISE_MULTIPLIER
    _AUDIT_NOISE_MULTIPLIER = float(factor)
    try:
        yield
    finally:
        _AUDIT_NOISE_MULTIPLIER = old
