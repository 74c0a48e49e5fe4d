"""Exact calibration of the Gaussian mechanism (SPEC section 2).

Every privacy number of the library comes from the privacy package: this
module calibrates Gaussian noise and divides and composes Gaussian-DP budgets
(``gdp_*``), :mod:`~dp_glm_sklearn.privacy.selection` prices private
selection and random stopping, :mod:`~dp_glm_sklearn.privacy.events`
composes a ledger.  The functions are pure and work on scalars.

A mechanism that adds :math:`N(0, \\sigma^2 I)` to a statistic of
L2-sensitivity :math:`\\Delta` is :math:`\\mu`-GDP with
:math:`\\mu = \\Delta / \\sigma` (Dong, Roth and Su, 2019, "Gaussian
differential privacy").  :math:`T` adaptive compositions of
:math:`\\mu_t`-GDP mechanisms are exactly :math:`\\sqrt{\\sum_t \\mu_t^2}`-GDP.
A :math:`\\mu`-GDP mechanism is :math:`(\\varepsilon, \\delta)`-DP for every
:math:`\\varepsilon \\ge 0` with (Balle and Wang, 2018, "Improving the
Gaussian mechanism for differential privacy", Theorem 8)

.. math::

    \\delta(\\varepsilon; \\mu) = \\Phi(-\\varepsilon/\\mu + \\mu/2)
        - e^{\\varepsilon} \\Phi(-\\varepsilon/\\mu - \\mu/2),

and this curve is tight: no smaller delta holds for that epsilon.
"""

import math
import numbers
import sys

import numpy as np
from scipy.optimize import brentq
from scipy.special import erfcx, log_ndtr, ndtri

from .._sklearn_compat import float_or_inf

__all__ = [
    "gaussian_sigma",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_composed",
    "gdp_mu",
    "gdp_mu_of_noise",
    "gdp_parallel",
    "gdp_per_release",
    "gdp_release_budget",
    "gdp_sigma",
    "gdp_split",
]

_INF = math.inf
#: Four units in the last place: the float error allowed for each term of
#: the privacy profile in the error bound of ``_gdp_log_delta``.
_ULPS = 4.0 * 2.0**-52


def _check_real(name, value, *, low=0.0, high=_INF, low_open=False, allow_inf=True):
    """Return ``value`` as a float, or raise a ValueError naming the range."""
    left = "(" if low_open else "["
    right = "]" if allow_inf or high != _INF else ")"
    valid = f"a number in {left}{low}, {high}{right}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be {valid}, got {value!r}.")
    number = float_or_inf(value)  # (10**400: inf, refused above a finite high)
    if (
        math.isnan(number)
        or number < low
        or (low_open and number == low)
        or number > high
        or (number == _INF and not allow_inf)
    ):
        raise ValueError(f"{name} must be {valid}, got {value!r}.")
    return number


def _check_delta(delta):
    return _check_real("delta", delta, high=1.0)


def _log1mexp(x):
    """``log(1 - exp(x))`` for ``x < 0``, accurate at both ends."""
    if x > -math.log(2.0):
        return math.log(-math.expm1(x))
    return math.log1p(-math.exp(x))


def _gdp_log_delta(epsilon, mu, *, margin=0.0):
    """``log delta(epsilon; mu)`` for finite ``epsilon >= 0`` and ``0 < mu < inf``.

    Both terms of the difference are kept as logarithms (``log_ndtr`` is
    accurate far into the tails), so the result keeps its relative accuracy
    where delta is tiny, i.e. for large epsilon or small mu.

    ``margin = m`` adds ``m`` times a bound on the float error of the result
    (a first-order bound: a few units in the last place of each term, and
    their amplification by ``log(1 - exp(x))`` near ``x = 0``).  Against
    50-digit arithmetic the error never exceeded 0.19 of the bound for
    epsilon in [1e-3, 100], delta in [1e-15, 0.5] and mu near the root.
    The solvers use the bound so that float error cannot put a calibrated
    mu, or a reported epsilon, on the unsafe side (SPEC section 2).
    ``mu = 0`` (no release, delta 0) gives ``-inf``: the solvers reach it at
    epsilon 0 and deltas below about 1e-16 (it divided by zero).
    """
    if mu == 0.0:
        return -_INF
    a = -epsilon / mu + mu / 2.0
    log_first = float(log_ndtr(a))
    if log_first == -_INF and margin == 0.0:
        # a below about -1.9e154 (mu <= ~1e-154, or epsilon / mu >= ~1e154):
        # delta <= Phi(a), whose log is below -1e308.  (Both terms -inf would
        # make the ratio NaN, which gdp_delta turned into delta = 1.  The
        # solvers, margin > 0, keep the NaN: their bracketing fails on it and
        # they take the tail bound.)
        return -_INF
    log_second = float(log_ndtr(a - mu))
    # log of (exp(eps) Phi(a - mu)) / Phi(a), which is < 0 in exact arithmetic.
    if margin == 0.0 and mu <= _SMALL_MU:
        # The difference of the two logs cancels (gdp_delta(0, 1e-16) was 0,
        # and 16% low at mu = 1e-15): it is the integral of d log Phi / dt.
        log_ratio = epsilon + _log_ndtr_difference(a, mu)
    else:
        log_ratio = epsilon + log_second - log_first
    if log_ratio >= 0.0:
        # Rounding (tiny epsilon and mu): the exact ratio is below 1 but too
        # close to tell.  delta <= Phi(a) always: the solvers get that bound.
        return log_first if margin > 0.0 else -_INF
    value = log_first + _log1mexp(log_ratio)
    if margin == 0.0:
        return value
    # log_ndtr(z) has slope of order |z| + 1, and its argument is rounded.
    ratio_error = _ULPS * (epsilon + abs(log_second) + abs(log_first)
                           + (abs(a) + mu) * (abs(a) + mu + 1.0))
    error = (_ULPS * (abs(log_first) + abs(value))
             + ratio_error * math.exp(log_ratio) / -math.expm1(log_ratio))
    return min(value + margin * error, log_first)


#: Below this mu, gdp_delta takes log Phi(a - mu) - log Phi(a) by quadrature.
_SMALL_MU = 4.0
_GAUSS_LEGENDRE = np.polynomial.legendre.leggauss(12)


def _log_ndtr_difference(a, mu):
    """``log Phi(a - mu) - log Phi(a)`` for small ``mu``, to relative precision.

    Minus the integral over ``[a - mu, a]`` of the inverse Mills ratio
    ``phi(t) / Phi(t)`` (the derivative of ``log Phi``), which is smooth:
    Gauss-Legendre quadrature on 12 nodes is accurate to about 1e-15
    (relative) on an interval of width at most :data:`_SMALL_MU` (8 was too
    wide: 3.6e-12).
    """
    nodes, weights = _GAUSS_LEGENDRE
    t = (a - mu / 2.0) + (mu / 2.0) * nodes
    # phi(t) / Phi(t) = 1 / (sqrt(pi/2) erfcx(-t / sqrt 2)), accurate for t <= 0
    # (a difference of logs of size t**2 / 2 is not); for t > 0, Phi(t) >= 1/2.
    negative, positive = np.minimum(t, 0.0), np.maximum(t, 0.0)  # (np.where computes both)
    ratio = np.where(
        t <= 0.0,
        1.0 / (math.sqrt(math.pi / 2.0) * erfcx(-negative / math.sqrt(2.0))),
        np.exp(-0.5 * positive * positive - 0.5 * math.log(2.0 * math.pi)
               - log_ndtr(positive)))
    return -(mu / 2.0) * float(weights @ ratio)


def _bracket_root(func, start):
    """Return ``lo < hi`` (positive) with ``func(lo) < 0 <= func(hi)``.

    ``func`` must be nondecreasing on ``(0, inf)``, negative near 0 and
    positive for large arguments.  The bracket is found by doubling and
    halving from ``start``, so both ends stay within a factor 2 of the root.
    """
    lo = hi = start
    for _ in range(2000):
        if func(hi) >= 0.0:
            break
        lo, hi = hi, 2.0 * hi
    else:  # pragma: no cover - unreachable for the validated inputs
        raise RuntimeError("could not bracket the root from above")
    for _ in range(2000):
        if func(lo) < 0.0:
            break
        lo, hi = lo / 2.0, lo
    else:  # pragma: no cover
        raise RuntimeError("could not bracket the root from below")
    return lo, hi


def _solve(func, start):
    lo, hi = _bracket_root(func, start)
    # xtol is tiny so that brentq's relative tolerance (4 machine epsilons)
    # decides: roots span many orders of magnitude.
    return float(brentq(func, lo, hi, xtol=1e-300, maxiter=500))


def gdp_delta(epsilon, mu):
    """Delta of a mu-GDP mechanism at a given epsilon.

    Computes the tight privacy profile
    ``delta(eps; mu) = Phi(-eps/mu + mu/2) - exp(eps) Phi(-eps/mu - mu/2)``
    in log space, so it stays accurate when delta is tiny, and for
    ``mu <= 4`` takes the difference of the two terms' logarithms by
    quadrature, so it stays accurate when mu is tiny: within about 2e-12
    of the exact value (relative; 2.3e-12 at worst measured, just above mu =
    4) on grids of mu from 5e-324 to 30 and epsilon / mu from 0 to 35,
    against 80-digit arithmetic.  (The calibration does not use it: :func:`gdp_mu` and
    :func:`gdp_epsilon` bound their rounding.)

    Parameters
    ----------
    epsilon : float
        Privacy loss level, in ``[0, inf]``.
    mu : float
        GDP parameter of the mechanism, in ``[0, inf]``.

    Returns
    -------
    delta : float
        The smallest delta such that the mechanism is (epsilon, delta)-DP.
        ``mu = 0`` gives 0 (the output is independent of the data),
        ``mu = inf`` gives 1 (no privacy), and otherwise ``epsilon = inf``
        gives 0.

    Examples
    --------
    >>> from dp_glm_sklearn.privacy import gdp_delta
    >>> round(gdp_delta(1.0, 1.0), 4)
    0.1269
    """
    epsilon = _check_real("epsilon", epsilon)
    mu = _check_real("mu", mu)
    if mu == 0.0:
        return 0.0
    if mu == _INF:
        return 1.0
    if epsilon == _INF:
        return 0.0
    return min(1.0, math.exp(_gdp_log_delta(epsilon, mu)))


def gdp_mu(epsilon, delta):
    """Largest mu such that every mu-GDP mechanism is (epsilon, delta)-DP.

    Solves ``gdp_delta(epsilon, mu) = delta`` for ``mu`` with Brent's method,
    on the logarithm of delta so that small deltas are matched to relative
    precision.  ``gdp_delta`` is increasing in ``mu``, so the root is unique.
    The root is taken of an upper bound on the float value of log delta, so
    rounding can only make mu smaller (relative change below 1e-9 at
    epsilon >= 0.01 and delta >= 1e-15).  For mu >= 1e8 the result stays
    within the (valid, looser) tail bound that :func:`gdp_epsilon` uses
    there, and from epsilon = 1e300 it is that bound's inverse in closed
    form (within 1e-9 of the exact mu).

    Parameters
    ----------
    epsilon : float
        Target epsilon, in ``[0, inf]``.
    delta : float
        Target delta, in ``[0, 1]``.

    Returns
    -------
    mu : float
        ``inf`` when ``epsilon = inf`` or ``delta = 1`` (no constraint), 0 when
        ``delta = 0`` (no Gaussian mechanism is (epsilon, 0)-DP).

    Examples
    --------
    >>> from dp_glm_sklearn.privacy import gdp_mu
    >>> round(gdp_mu(1.0, 1e-5), 4)
    0.2681
    """
    epsilon = _check_real("epsilon", epsilon)
    delta = _check_delta(delta)
    if epsilon == _INF or delta == 1.0:
        return _INF
    if delta == 0.0:
        return 0.0
    if epsilon >= _TAIL_EPSILON:
        # The profile's bracket overflows near the largest float: invert the
        # (valid) tail bound, mu (z + mu / 2) (1 + 1e-9) = epsilon, directly.
        z = -float(ndtri(delta))
        target = epsilon / (1.0 + 2e-9)
        mu = math.sqrt(2.0) * math.sqrt(target + z * z / 2.0) - z
    else:
        # Where epsilon is far below delta's quantile (epsilon 1e-20 at delta
        # 1e-16) the profile's cancellation made the root up to 2e5 times too
        # small (noise too large, not unsafe): never below the valid floor.
        mu = max(_profile_mu(epsilon, delta), _zero_epsilon_mu(delta))
    if mu >= _TAIL_MU:
        # gdp_epsilon takes the (looser) tail bound there: stay within it,
        # so that gdp_epsilon(gdp_mu(eps, delta), delta) <= eps still holds.
        while _tail_epsilon(mu, delta) > epsilon:
            mu *= 1.0 - 1e-9
    else:
        # The accountant measures a release with gdp_epsilon: where that (a
        # valid upper bound) comes back an ulp above epsilon (at epsilon
        # 7e14), step mu down (smaller mu is always safe), so that a fit at
        # the whole budget is accepted and privacy_spent_ <= epsilon.  Only
        # by ulps: below epsilon 1e-10 gdp_epsilon is not monotone in mu
        # everywhere (5% above epsilon at (1e-12, 1e-30)), and chasing it
        # made mu 4.5 times smaller than the root.
        for _ in range(64):
            if gdp_epsilon(mu, delta) <= epsilon:
                break
            mu = math.nextafter(mu, 0.0)
    return mu


def _profile_mu(epsilon, delta):
    """:func:`gdp_mu` by the exact privacy profile (below ``_TAIL_EPSILON``)."""
    log_target = math.log(delta)
    # Twice the error bound here and once in gdp_epsilon: a calibrated mu is
    # safe against float error, and gdp_epsilon(gdp_mu(eps, delta), delta)
    # does not come back above eps.
    mu = _solve(lambda mu: _gdp_log_delta(epsilon, mu, margin=2.0) - log_target, start=1.0)
    for _ in range(64):  # brentq's last ulps
        if _gdp_log_delta(epsilon, mu, margin=2.0) <= log_target:
            break
        mu = math.nextafter(mu, 0.0)
    else:
        # Only in extreme corners (epsilon near 1e-300, where the error bound
        # dwarfs the function): halve until safe; smaller mu is always safe,
        # and mu = 0 (no release) ends the loop.
        while mu > 0.0 and _gdp_log_delta(epsilon, mu, margin=2.0) > log_target:
            mu /= 2.0
    return mu


def gdp_epsilon(mu, delta):
    """Smallest epsilon such that every mu-GDP mechanism is (epsilon, delta)-DP.

    ``gdp_delta`` is decreasing in epsilon, so this is 0 when
    ``gdp_delta(0, mu) <= delta`` and otherwise the unique root of
    ``gdp_delta(epsilon, mu) = delta``, found with Brent's method in log space.
    For mu beyond about 1e8 (epsilon beyond 5e15), where the profile's
    arithmetic cancels, and where the root cannot be bracketed (mu below
    about 1e-154), a valid bound up to 2e-8 (relative) above it is returned
    instead: ``mu (z + mu / 2)``, ``z = -Phi^-1(delta)``.

    Parameters
    ----------
    mu : float
        GDP parameter, in ``[0, inf]``.
    delta : float
        Target delta, in ``[0, 1]``.

    Returns
    -------
    epsilon : float
        0 when ``mu = 0`` or ``delta = 1``; ``inf`` when ``mu = inf`` or
        (for ``mu > 0``) ``delta = 0``.

    Examples
    --------
    >>> from dp_glm_sklearn.privacy import gdp_epsilon
    >>> round(gdp_epsilon(1.0, 1e-5), 4)
    4.3772
    """
    mu = _check_real("mu", mu)
    delta = _check_delta(delta)
    if mu == 0.0 or delta == 1.0:
        return 0.0
    if mu == _INF or delta == 0.0:
        return _INF
    if mu <= _zero_epsilon_mu(delta):
        return 0.0  # gdp_mu's floor, in closed form
    log_target = math.log(delta)
    if _gdp_log_delta(0.0, mu, margin=1.0) <= log_target:
        return 0.0
    # Negated so that the function is increasing, as _solve expects.
    try:
        epsilon = _solve(lambda eps: log_target - _gdp_log_delta(eps, mu, margin=1.0),
                         start=1.0)
    except RuntimeError:  # mu beyond about 1e-154 .. 1e154: the profile over/underflows
        return _tail_epsilon(mu, delta)
    for _ in range(64):  # brentq's last ulps
        if _gdp_log_delta(epsilon, mu, margin=1.0) <= log_target:
            break
        epsilon = math.nextafter(epsilon, _INF)
    else:
        return max(epsilon, _tail_epsilon(mu, delta))
    if mu >= _TAIL_MU:
        # -eps/mu + mu/2 cancels for huge mu (from about 3.3e8 the root came
        # out below the truth, e.g. at mu = 1e12, delta = 0.5): the tail
        # bound is valid.  gdp_mu applies the same switch.
        return max(epsilon, _tail_epsilon(mu, delta))
    return epsilon


#: From this mu on, gdp_epsilon also takes the tail bound (and gdp_mu keeps
#: its mu within it), well below where the profile's cancellation starts.
_TAIL_MU = 1e8
_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _zero_epsilon_mu(delta):
    """A mu whose Gaussian mechanism is (0, delta)-DP, hence (epsilon, delta)-DP
    for every epsilon: delta(0; m) = P(|N(0, 1)| <= m / 2) <= m phi(0), so
    m = delta sqrt(2 pi) (the factor covers the product's rounding)."""
    return delta * _SQRT_2PI * (1.0 - 1e-14)


#: From this epsilon on (mu about 1.4e150), gdp_mu inverts the tail bound in
#: closed form: the search for a bracket overflowed from about 4e307.
_TAIL_EPSILON = 1e300


def _tail_epsilon(mu, delta):
    """A valid, looser epsilon for ``gdp_epsilon``'s extreme cases.

    ``delta(eps; mu) <= Phi(-eps / mu + mu / 2)`` (the profile's first
    term), which is ``delta`` at ``eps = mu (z + mu / 2)``, ``z = -Phi^-1(delta)``;
    rounded up by a relative 1e-9, and inf if that overflows.
    """
    z = -float(ndtri(delta))
    with np.errstate(over="ignore"):
        epsilon = float(np.float64(mu) * (z + mu / 2.0)) * (1.0 + 1e-9)
    return max(0.0, epsilon) if math.isfinite(epsilon) else _INF


def _check_calibration_args(sensitivity, epsilon, delta, n_compositions):
    sensitivity = _check_real("sensitivity", sensitivity, allow_inf=False)
    epsilon = _check_real("epsilon", epsilon, low_open=True)
    delta = _check_real("delta", delta, high=1.0, low_open=True)
    return sensitivity, epsilon, delta, _check_count(n_compositions)


def _check_count(n_compositions):
    if (
        isinstance(n_compositions, bool)
        or not isinstance(n_compositions, numbers.Integral)
        or n_compositions < 1
    ):
        raise ValueError(f"n_compositions must be an integer >= 1, got {n_compositions!r}.")
    return int(n_compositions)


#: Relative step that puts a product or quotient of a few rounded factors on
#: the safe side of its exact value (each rounding is within 2**-53).
_UP = 1.0 + 2.0**-50


def _rounded_up(value):
    """``value``, a product or quotient of a few rounded factors, stepped above
    its exact value: relatively, and on subnormals, where rounding errors are
    absolute, by a few of the smallest floats."""
    value *= _UP
    if 0.0 < value < sys.float_info.min:
        value += 4.0 * math.ulp(0.0)
    return value


def gaussian_sigma(sensitivity, epsilon, delta, n_compositions=1):
    """Noise scale of a Gaussian mechanism composed ``n_compositions`` times.

    Each of the ``T = n_compositions`` adaptive releases adds
    ``N(0, sigma^2 I)`` to a statistic of L2-sensitivity ``sensitivity``; the
    whole is ``sqrt(T) * sensitivity / sigma``-GDP, and this returns the
    smallest ``sigma`` that makes it (epsilon, delta)-DP:
    ``sigma = sqrt(T) * sensitivity / gdp_mu(epsilon, delta)``.

    Parameters
    ----------
    sensitivity : float
        L2-sensitivity of each released statistic, in ``[0, inf)``.
    epsilon : float
        Target epsilon of the whole composition, in ``(0, inf]``.
    delta : float
        Target delta of the whole composition, in ``(0, 1]``.
    n_compositions : int, default=1
        Number ``T >= 1`` of releases, each with the same ``sigma``.

    Returns
    -------
    sigma : float
        Standard deviation of the noise of each release; 0 when
        ``epsilon = inf``, ``delta = 1`` or ``sensitivity = 0``.

    Examples
    --------
    >>> from dp_glm_sklearn.privacy import gaussian_sigma
    >>> round(gaussian_sigma(1.0, epsilon=1.0, delta=1e-5), 4)
    3.7306
    """
    sensitivity, epsilon, delta, n_compositions = _check_calibration_args(
        sensitivity, epsilon, delta, n_compositions
    )
    return gdp_sigma(sensitivity, gdp_mu(epsilon, delta), n_compositions)


def gdp_sigma(sensitivity, mu, n_compositions=1):
    """Noise scale making ``n_compositions`` releases of ``sensitivity`` together mu-GDP.

    ``sigma = sqrt(T) * sensitivity / mu``; 0 when ``mu = inf`` or
    ``sensitivity = 0``.  :func:`gaussian_sigma` is this at
    ``mu = gdp_mu(epsilon, delta)``.

    Raises ValueError when that quotient underflows to 0 for a finite
    ``mu`` and a positive sensitivity (a tiny sensitivity at a huge
    epsilon): no noise would be added, and a release without noise is not
    mu-GDP for any finite mu.
    """
    sensitivity = _check_real("sensitivity", sensitivity, allow_inf=False)
    mu = _check_real("mu", mu, low_open=True)
    n_compositions = _check_count(n_compositions)
    if mu == _INF or sensitivity == 0.0:
        return 0.0
    # (Rounded up: more noise than the exact quotient, never less.)
    sigma = _rounded_up(math.sqrt(n_compositions) * sensitivity / mu)
    if sigma == 0.0:
        raise ValueError(
            f"The noise scale underflows to 0 (sensitivity {sensitivity:.3g} at mu={mu:.3g}-GDP): "
            "a release at this epsilon would add no noise. Lower epsilon, or rescale the data "
            "so that the public bounds are moderate.")
    return sigma


def gdp_mu_of_noise(sensitivity, sigma, n_compositions=1):
    """GDP parameter of ``n_compositions`` releases of ``sensitivity`` each plus
    ``N(0, sigma^2 I)``: ``sqrt(T) * sensitivity / sigma``, inf when ``sigma = 0``."""
    sensitivity = _check_real("sensitivity", sensitivity, allow_inf=False)
    sigma = _check_real("sigma", sigma)
    n_compositions = _check_count(n_compositions)
    if sigma == 0:
        return _INF
    # Rounded up (the mu recorded is never below that of the noise drawn),
    # and not to 0 for a positive sensitivity.
    mu = _rounded_up(math.sqrt(n_compositions) * sensitivity / sigma)
    return float(mu if mu > 0.0 or sensitivity == 0.0 else math.ulp(0.0))


# -- dividing and composing Gaussian-DP budgets ---------------------------------------
# Adaptive composition of mu_t-GDP releases is exactly sqrt(sum mu_t^2)-GDP;
# releases computed on disjoint parts of the data compose to the largest
# mu_t (parallel composition, replace-one adjacency: one record is in one part).


def gdp_split(mu, share):
    """Two sequential budgets ``(mu sqrt(1 - share), mu sqrt(share))``: together mu-GDP."""
    return mu * math.sqrt(1.0 - share), mu * math.sqrt(share)


def gdp_per_release(mu, count):
    """Budget ``mu / sqrt(count)`` of each of ``count`` releases that together are mu-GDP."""
    return mu / math.sqrt(count)


def gdp_composed(mu, count):
    """GDP parameter ``sqrt(count) * mu`` of ``count`` adaptive mu-GDP releases
    (rounded up)."""
    return mu if count == 1 else _rounded_up(math.sqrt(count) * mu)


def gdp_parallel(*mus):
    """GDP parameter of releases on disjoint parts of the data: the largest."""
    return max(mus)


def gdp_release_budget(mu, delta):
    """``(epsilon, mu_paid)`` to give a release of GDP budget ``mu`` measured at ``delta``.

    The release is asked for ``epsilon = gdp_epsilon(mu, delta)``, and is
    calibrated to ``mu_paid = gdp_mu(epsilon, delta)``, which the round trip's
    safe-side rounding keeps within a few ulps of mu: ``mu_paid`` is what the
    caller must account.  ``(0, inf)`` when mu-GDP is already ``(0,
    delta)``-DP: no budget to give (the caller refuses it; an infinite mu
    keeps a caller that did not from recording a free release); ``(inf,
    inf)`` when ``mu = inf``.
    """
    if mu == _INF:
        return _INF, _INF
    epsilon = gdp_epsilon(mu, delta)
    if epsilon <= 0.0:
        return 0.0, _INF
    return epsilon, gdp_mu(epsilon, delta)


def papers_sigma(sensitivity, epsilon, delta, n_compositions=1):
    """The papers' noise scale, for comparison only.

    The papers add noise of variance ``8 G^2 T log(1/delta) / (n^2 eps^2)``
    to a gradient average whose L2-sensitivity is ``2 G / n``.  In terms of
    that sensitivity (the same convention as :func:`gaussian_sigma`) this is
    ``sigma = sqrt(2 T log(1/delta)) * sensitivity / epsilon``.

    .. warning::
       Never use this to add noise.  It is kept only so that the tests can
       show that it is wrong: at ``delta = 1e-5`` it adds 2.44 times the
       needed variance at ``epsilon = 0.1`` and too little at
       ``epsilon = 10`` (the mechanism is then only (10.52, 1e-5)-DP).
       Use :func:`gaussian_sigma`.

    Parameters
    ----------
    sensitivity : float
        L2-sensitivity of each released statistic (``2 G / n`` in the
        papers), in ``[0, inf)``.
    epsilon : float
        Claimed epsilon, in ``(0, inf]``.
    delta : float
        Claimed delta, in ``(0, 1]``.
    n_compositions : int, default=1
        Number of releases ``T``.

    Returns
    -------
    sigma : float
        The papers' standard deviation of each release.

    Examples
    --------
    At epsilon = 1 the papers' formula adds more noise than needed; at
    epsilon = 10 less, so its release is not (10, 1e-5)-DP:

    >>> from dp_glm_sklearn.privacy import gaussian_sigma, gdp_epsilon
    >>> from dp_glm_sklearn.privacy.calibration import papers_sigma
    >>> papers_sigma(1.0, 1.0, 1e-5) > gaussian_sigma(1.0, 1.0, 1e-5)
    True
    >>> round(gdp_epsilon(1.0 / papers_sigma(1.0, 10.0, 1e-5), 1e-5), 2)
    10.52
    """
    sensitivity, epsilon, delta, n_compositions = _check_calibration_args(
        sensitivity, epsilon, delta, n_compositions
    )
    return math.sqrt(2.0 * n_compositions * math.log(1.0 / delta)) * sensitivity / epsilon
