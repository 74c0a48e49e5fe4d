"""Private selection: choose one candidate from scores of bounded sensitivity.

Two mechanisms, both epsilon-DP (pure), both pure functions of public inputs
except for the scores themselves:

- :func:`exponential_mechanism` (McSherry and Talwar 2007): scores with one
  common sensitivity (accuracy on a validation set: ``1 / n_val``; a loss
  clipped at ``C``: ``C / n_val``).  Sampling index ``i`` with probability
  proportional to ``exp(epsilon * u_i / (2 * Delta))`` is the same
  distribution as report-noisy-max with Gumbel noise of scale
  ``2 * Delta / epsilon``, so this is also "report noisy max".
- :func:`generalized_exponential_mechanism` (Raskhodnikova and Smith 2016,
  "Lipschitz extensions for node-private graph statistics and the generalized
  exponential mechanism"; paper's Appendix D.1): each score has its own
  sensitivity, as the validation losses of models with different norm
  bounds do (SPEC section 5).

Each returns the chosen index and the privacy event of the selection (a
:class:`~dp_glm_sklearn.privacy.events.PureDPEvent`).  The exact selection
probabilities are exposed (``*_probabilities``) so that tests can check the
epsilon bound on neighbouring score vectors.  All randomness comes from a
:class:`numpy.random.Generator` passed in.

Adjacency is replace-one (SPEC section 1): a score ``u_j`` has sensitivity
``Delta_j`` when ``|u_j(S) - u_j(S')| <= Delta_j`` for all neighbours
``S, S'``.  Scores that may move in opposite directions (the average losses of
several models when one validation record is replaced) need the factor 2 in
``epsilon / (2 * Delta)``; it is never dropped here.

Both mechanisms are moreover epsilon-*bounded-range* (Durfee and Rogers
2019): on any pair of neighbours the log-ratio ``log P(i) / P'(i)`` of their
selection probabilities varies by at most epsilon over the candidates ``i``
(the score difference ``(epsilon / (2 Delta)) (u_i - u'_i)`` ranges over an
interval of length epsilon; the normalizers add the same constant to every
``i``).  That is a stronger property than epsilon-DP, and it matters in
Gaussian DP: an epsilon-DP mechanism is only ``pure_dp_gdp_mu(epsilon)``-GDP,
an epsilon-bounded-range one is ``bounded_range_gdp_mu(epsilon) =
pure_dp_gdp_mu(epsilon / 2)``-GDP (proof in :func:`bounded_range_gdp_mu`).

This module also converts pure DP and bounded range into Gaussian DP
(:func:`pure_dp_gdp_mu`, :func:`gdp_pure_epsilon`,
:func:`bounded_range_gdp_mu`, :func:`gdp_bounded_range_epsilon`), which the
model-selection wrappers use to record a selection and the trainings it
chooses among as one Gaussian event (see :mod:`dp_glm_sklearn.model_selection`),
and accounts for random stopping (:func:`random_stopping_epsilon`, Papernot
and Steinke 2022).
"""

import math
import sys
from functools import lru_cache

import numpy as np
from scipy.optimize import brentq
from scipy.special import erf, erfinv, expit, log_expit, log_ndtr, logsumexp, ndtri, ndtri_exp

from .calibration import _check_real, gdp_mu, gdp_sigma
from .events import PureDPEvent, _check_stopping, _rdp_epsilon
from .noise import add_gaussian_noise, sample_count, sample_index

__all__ = [
    "bounded_range_gdp_mu",
    "exponential_mechanism",
    "exponential_mechanism_probabilities",
    "gaussian_report_noisy_max",
    "gdp_bounded_range_epsilon",
    "gdp_pure_epsilon",
    "gem_normalized_scores",
    "gem_probabilities",
    "generalized_exponential_mechanism",
    "pure_dp_gdp_mu",
    "random_stopping_epsilon",
    "random_stopping_mu",
    "random_stopping_refit_mu",
    "sample_stopping_count",
]

#: Default confidence parameter beta of the generalized exponential mechanism.
GEM_BETA = 0.05


# -- pure DP as Gaussian DP ------------------------------------------------------
def pure_dp_gdp_mu(epsilon):
    """Smallest mu such that every epsilon-DP mechanism is mu-GDP.

    ``mu = 2 * Phi^{-1}(e^eps / (1 + e^eps))``.

    Proof.  A mechanism is epsilon-DP iff its trade-off function on every
    pair of neighbours is at least ``f(a) = max(0, 1 - e^eps a,
    e^-eps (1 - a))`` (Dong, Roth and Su 2019, "Gaussian differential
    privacy", Proposition 2.5), and this ``f`` is attained by randomized
    response, so the question is when ``f >= G_mu`` with ``G_mu(a) =
    Phi(Phi^{-1}(1 - a) - mu)``.  ``f`` is piecewise linear with a single
    kink at ``a* = 1 / (1 + e^eps)``, where ``f(a*) = a*``; ``G_mu`` is convex
    with ``G_mu(0) = 1 = f(0)`` and ``G_mu(1) = 0 = f(1)``.  If
    ``G_mu(a*) <= a*``, convexity puts ``G_mu`` below its chords from
    ``(0, 1)`` to ``(a*, G_mu(a*))`` and from there to ``(1, 0)``, hence below
    ``f`` on both pieces; if ``G_mu(a*) > a*``, then ``G_mu > f`` at ``a*``.
    So ``f >= G_mu`` iff ``Phi(Phi^{-1}(1 - a*) - mu) <= a*``, i.e.
    ``mu >= 2 Phi^{-1}(1 - a*)``.

    Parameters
    ----------
    epsilon : float
        Pure DP parameter, in ``[0, inf]``.

    Returns
    -------
    mu : float
        0 for ``epsilon = 0``, ``inf`` for ``epsilon = inf``.

    Examples
    --------
    >>> from dp_glm_sklearn.privacy.selection import pure_dp_gdp_mu
    >>> round(pure_dp_gdp_mu(1.0), 4)
    1.232
    """
    epsilon = _check_real("epsilon", epsilon)
    if epsilon in (0.0, math.inf):
        return epsilon
    if epsilon < 1.0:
        # Phi^{-1}(1 - a*) = sqrt(2) erfinv(tanh(eps / 2)): 1 - 2 a* without
        # the cancellation of expit(-eps) near 1/2 (which put mu 11% low at
        # eps = 1e-15, and at 0 for eps = 1e-300).
        mu = float(2.0 * math.sqrt(2.0) * erfinv(math.tanh(epsilon / 2.0)))
    elif epsilon < 700.0:
        # -Phi^{-1}(a*) with a* = expit(-eps): accurate for large eps.
        mu = float(-2.0 * ndtri(expit(-epsilon)))
    else:
        # Beyond, a* underflows (mu came out inf from epsilon 745, and a grid
        # search at epsilon 1e4 was priced at inf): through its logarithm.
        mu = float(-2.0 * ndtri_exp(log_expit(-epsilon)))
    # Up until the inverse, rounded down, confirms it: gdp_pure_epsilon(mu) <=
    # the exact epsilon of mu, so mu is never below the truth.
    for _ in range(1000):
        if gdp_pure_epsilon(mu) >= epsilon:
            return mu
        mu = max(mu * (1.0 + 2.0**-50), math.nextafter(mu, math.inf))
    raise RuntimeError(  # pragma: no cover - at most 26 steps were seen
        f"pure_dp_gdp_mu({epsilon!r}) could not confirm its result")


def gdp_pure_epsilon(mu):
    """Largest epsilon such that every epsilon-DP mechanism is mu-GDP.

    The inverse of :func:`pure_dp_gdp_mu`:
    ``epsilon = log(Phi(mu/2) / Phi(-mu/2))``, computed in log space.  A
    selection run at this epsilon is dominated by a mu-GDP release, so it can
    share one :class:`~dp_glm_sklearn.privacy.events.GaussianEvent` with
    Gaussian mechanisms it is in parallel with.

    Parameters
    ----------
    mu : float
        GDP parameter, in ``[0, inf]``.

    Returns
    -------
    epsilon : float

    Examples
    --------
    >>> from dp_glm_sklearn.privacy.selection import gdp_pure_epsilon
    >>> round(gdp_pure_epsilon(1.232), 3)
    1.0
    """
    mu = _check_real("mu", mu)
    if mu in (0.0, math.inf):
        return mu
    if mu < 2.0:
        # = 2 atanh(erf(mu / (2 sqrt 2))), without the cancellation of the
        # difference of logs below (1e-11 relative too high at mu = 1e-5).
        epsilon = 2.0 * math.atanh(float(erf(mu / (2.0 * math.sqrt(2.0)))))
    else:
        epsilon = float(log_ndtr(mu / 2.0) - log_ndtr(-mu / 2.0))
    if epsilon == math.inf:
        # (From mu ~ 2.7e154, log_ndtr(-mu/2) overflows.)  The exact value
        # is above (mu/2)**2 / 2, since -log Phi(-x) > x**2 / 2 + log x for
        # large x; beyond the floats, the largest float is below it too.
        half = mu / 2.0
        return min(half * (half / 2.0) * (1.0 - 2.0**-50), sys.float_info.max)
    # Rounded down: a selection run at this epsilon must stay within mu.
    # erf, atanh and log_ndtr are accurate to a few units in the last place
    # (2**-46 is 64 of them); on subnormals their error is absolute.
    epsilon *= 1.0 - 2.0**-46
    if epsilon < sys.float_info.min:
        epsilon = max(0.0, epsilon - 64 * math.ulp(0.0))
    return epsilon


def bounded_range_gdp_mu(epsilon):
    """Smallest mu such that every epsilon-bounded-range mechanism is mu-GDP.

    ``mu = pure_dp_gdp_mu(epsilon / 2) = 2 * Phi^{-1}(e^{eps/2} / (1 + e^{eps/2}))``.

    A mechanism is epsilon-bounded-range (epsilon-BR; Durfee and Rogers 2019)
    when on every pair of neighbours ``(P, Q)`` its privacy loss
    ``L(y) = log P(y) / Q(y)`` lies in an interval ``[a, a + epsilon]``.  The
    exponential mechanism and the generalized exponential mechanism of this
    module are epsilon-BR (module docstring).

    Proof (finite outputs, as here).  (1) Reduction to two outputs.  Since
    ``E_Q[e^L] = 1``, ``min L <= 0 <= max L``; take ``a = min L``, so that
    ``a <= 0 <= b = a + epsilon`` and ``L`` lies in ``[a, b]``.  Let ``(P2,
    Q2)`` be the pair on ``{1, 2}`` with ``P2(1) = e^b Q2(1)``, ``P2(2) = e^a
    Q2(2)``, ``Q2(1) = (1 - e^a) / (e^b - e^a)``.  The kernel
    ``K(y | 1) = Q(y) (e^{L(y)} - e^a) / ((e^b - e^a) Q2(1))``,
    ``K(y | 2) = Q(y) (e^b - e^{L(y)}) / ((e^b - e^a) Q2(2))`` is a
    probability kernel mapping ``Q2`` to ``Q`` and ``P2`` to ``P`` (check:
    ``e^b c1 + e^a c2 = e^L Q`` and ``c1 + c2 = Q`` for the two terms), so
    ``T(P, Q) >= T(P2, Q2)`` (post-processing).  The pair ``(Q, P)`` is of
    the same kind (loss in ``[-b, -a]``).  (2) Two outputs.  Write ``p =
    P2(1)``, ``q = Q2(1)``; then ``logit(p) - logit(q) = b - a = epsilon``.
    ``T(P2, Q2)`` is piecewise linear with one kink, at ``(1 - p, q)``, and
    ``G_mu`` is convex with the same end points, so (as in
    :func:`pure_dp_gdp_mu`) ``T(P2, Q2) >= G_mu`` iff ``G_mu(1 - p) <= q``,
    i.e. ``mu >= Phi^{-1}(p) - Phi^{-1}(q) = psi(x + epsilon) - psi(x)`` with
    ``x = logit(q)`` and ``psi = Phi^{-1} o expit``.  (3) The worst pair.
    ``psi`` is odd and ``psi'(x) = R(psi(x))`` with ``R(z) = Phi(z) Phi(-z) /
    phi(z)``, which is even; ``d log R / dz = -H(z) / (Phi(z) Phi(-z))`` with
    ``H(z) = phi(z) (2 Phi(z) - 1) - z Phi(z) Phi(-z)``.  For ``z >= 0``,
    ``H >= 0`` iff ``z m(z) <= 2 - 1 / Phi(z)`` with the Mills ratio ``m =
    Phi(-z) / phi(z)``; Sampford's (1953) bound ``m(z) < 4 / (3 z + s)``,
    ``s = sqrt(z^2 + 8)``, reduces this to ``Phi(-z) <= 4 / (z + s)^2``, and
    ``k(z) = Phi(-z) (z + s)^2 / 4`` has ``k(0) = 1`` and ``k' = ((z + s)^2 /
    4) (2 Phi(-z) / s - phi(z)) <= 0`` because ``m(z) <= m(0) = sqrt(pi / 2)
    < sqrt(2) <= s / 2``.  So ``psi'`` is even and nonincreasing in ``|x|``,
    and the integral of ``psi'`` over an interval of length epsilon,
    ``psi(x + epsilon) - psi(x)``, is largest for the centred interval ``x =
    -epsilon / 2``: ``mu = 2 psi(epsilon / 2) = pure_dp_gdp_mu(epsilon / 2)``.
    It is attained by randomized response at ``epsilon / 2``, which is
    epsilon-BR, so no smaller mu works.

    Parameters
    ----------
    epsilon : float
        Bounded-range parameter, in ``[0, inf]``.

    Returns
    -------
    mu : float

    Examples
    --------
    >>> from dp_glm_sklearn.privacy.selection import bounded_range_gdp_mu
    >>> round(bounded_range_gdp_mu(2.0), 4)
    1.232
    """
    epsilon = _check_real("epsilon", epsilon)
    half = epsilon / 2.0
    if half * 2.0 != epsilon:  # (a subnormal epsilon: halving rounded)
        half = math.nextafter(half, math.inf)
    return pure_dp_gdp_mu(half)


def gdp_bounded_range_epsilon(mu):
    """Largest epsilon such that every epsilon-bounded-range mechanism is mu-GDP.

    The inverse of :func:`bounded_range_gdp_mu`: ``2 * gdp_pure_epsilon(mu)``.
    An exponential mechanism (or GEM) run at this epsilon is dominated by a
    mu-GDP release, twice the epsilon :func:`gdp_pure_epsilon` allows a
    generic pure-DP mechanism.

    Parameters
    ----------
    mu : float
        GDP parameter, in ``[0, inf]``.

    Returns
    -------
    epsilon : float

    Examples
    --------
    >>> from dp_glm_sklearn.privacy.selection import gdp_bounded_range_epsilon
    >>> round(gdp_bounded_range_epsilon(1.232), 3)
    2.0
    """
    mu = _check_real("mu", mu)
    epsilon = min(2.0 * gdp_pure_epsilon(mu), sys.float_info.max) if mu < math.inf else mu
    # Lowered until the inverse confirms it, so that the event recorded for a
    # selection run at it, bounded_range_gdp_mu(epsilon), stays within mu:
    # from epsilon ~ 1400, pure_dp_gdp_mu starts 6.6e-13 above the exact
    # value and only steps up, and a grid search at (1e6, 1e-6) reported
    # 1000000.0000013 and was refused by a budget of 1e6 (adversarial check).
    for _ in range(100):
        if epsilon in (0.0, math.inf):
            return epsilon
        excess = bounded_range_gdp_mu(epsilon) / mu - 1.0
        if excess <= 0.0:
            return epsilon
        epsilon *= 1.0 - 2.0 * excess - 2.0**-50  # (epsilon grows at most as mu**2)
    raise RuntimeError(  # pragma: no cover - one or two steps were seen
        f"gdp_bounded_range_epsilon({mu!r}) could not confirm its result")


# -- validation helpers -------------------------------------------------------------
def _check_utilities(utilities):
    u = np.asarray(utilities, dtype=np.float64)
    if u.ndim != 1 or u.size == 0:
        raise ValueError(
            f"utilities must be a non-empty 1-d array of scores, got shape {u.shape}."
        )
    if not np.all(np.isfinite(u)):
        raise ValueError("utilities must be finite numbers.")
    return u


def _check_sensitivities(sensitivities, size):
    d = np.asarray(sensitivities, dtype=np.float64)
    if d.ndim == 0:
        d = np.full(size, float(d))
    if d.shape != (size,):
        raise ValueError(
            f"sensitivities must be a scalar or have one entry per utility ({size}), "
            f"got shape {d.shape}."
        )
    if not np.all(np.isfinite(d)) or np.any(d < 0):
        raise ValueError("sensitivities must be finite numbers >= 0.")
    return d


def _softmax(logits):
    """Probabilities ``exp(logits) / sum exp(logits)``; ``+inf`` logits share all mass.

    Floating-point errors are ignored whatever ``np.seterr`` says: the
    logits come from validation scores, and an underflow that raised or
    warned would tell whether one score (one record) crossed a threshold.
    """
    logits = np.asarray(logits, dtype=np.float64)
    if np.any(logits == np.inf):
        p = (logits == np.inf).astype(np.float64)
        return p / p.sum()
    with np.errstate(all="ignore"):
        return np.exp(logits - logsumexp(logits))


# -- exponential mechanism ------------------------------------------------------------
def exponential_mechanism_probabilities(utilities, sensitivity, epsilon):
    """Selection probabilities of the exponential mechanism.

    ``P(i) = exp(epsilon u_i / (2 Delta)) / sum_j exp(epsilon u_j / (2 Delta))``.
    If every ``u_j`` has sensitivity ``Delta``, the ratio of ``P(i)`` on two
    neighbours is at most ``e^{epsilon/2} * e^{epsilon/2}`` (numerator and
    normalizer), so the mechanism is epsilon-DP; and ``log P(i) - log P'(i)``
    varies by at most epsilon over ``i`` (the normalizers are common), so it
    is epsilon-bounded-range (:func:`bounded_range_gdp_mu`).

    Parameters
    ----------
    utilities : array-like of shape (n_candidates,)
        Scores, higher is better.
    sensitivity : float
        Common sensitivity Delta of the scores, ``> 0``.
    epsilon : float
        Privacy parameter, in ``[0, inf]``; ``inf`` puts all mass, uniformly,
        on the best scores (no privacy).

    Returns
    -------
    probabilities : ndarray of shape (n_candidates,)
    """
    u = _check_utilities(utilities)
    sensitivity = _check_real("sensitivity", sensitivity, low_open=True, allow_inf=False)
    epsilon = _check_real("epsilon", epsilon)
    if epsilon == math.inf:
        return _softmax(np.where(u == u.max(), np.inf, -np.inf))
    return _softmax(epsilon * u / (2.0 * sensitivity))


def exponential_mechanism(utilities, sensitivity, epsilon, rng, *, label="exponential mechanism"):
    """Choose an index with the exponential mechanism (epsilon-DP).

    Parameters
    ----------
    utilities : array-like of shape (n_candidates,)
        Scores, higher is better, each of sensitivity ``sensitivity``.
    sensitivity : float
        Common sensitivity of the scores, ``> 0``.
    epsilon : float
        Privacy parameter, in ``[0, inf]``.
    rng : numpy.random.Generator
        Source of randomness.
    label : str, default="exponential mechanism"
        Label of the privacy event.

    Returns
    -------
    index : int
        The chosen candidate.
    event : PureDPEvent
        The cost of the selection, ``PureDPEvent(epsilon)``.

    Examples
    --------
    >>> import numpy as np
    >>> from dp_glm_sklearn.privacy.selection import exponential_mechanism
    >>> accuracy = [0.70, 0.95, 0.80]   # on 1000 validation records
    >>> exponential_mechanism(accuracy, 1 / 1000, 1.0, np.random.default_rng(0))
    (1, PureDPEvent(epsilon=1.0, label='exponential mechanism'))
    """
    p = exponential_mechanism_probabilities(utilities, sensitivity, epsilon)
    return sample_index(p, rng), PureDPEvent(epsilon=float(epsilon), label=label)


# -- generalized exponential mechanism -------------------------------------------------
def gem_normalized_scores(utilities, sensitivities, epsilon, beta=GEM_BETA):
    """The sensitivity-1 scores ``s_i`` of the generalized exponential mechanism.

    With ``t = 2 ln(K / beta) / epsilon`` (K candidates) and penalized
    utilities ``a_i = u_i - t D_i``,

        ``s_i = min_j (a_i - a_j) / (D_i + D_j)``

    (the term ``j = i`` is 0, so ``s_i <= 0``; a term with ``D_i + D_j = 0``
    compares two data-independent scores and is 0, ``+inf`` or ``-inf`` by
    the sign of ``a_i - a_j``).  On neighbours ``a_i - a_j`` moves by at most
    ``D_i + D_j``, so every term, and their minimum, moves by at most 1.

    Parameters
    ----------
    utilities : array-like of shape (n_candidates,)
        Scores ``u_i``, higher is better.
    sensitivities : array-like of shape (n_candidates,)
        Sensitivity ``D_i >= 0`` of each score.
    epsilon : float
        Privacy parameter, in ``(0, inf]`` (``inf``: no penalty).
    beta : float, default=0.05
        Confidence parameter in ``(0, 1)``: with probability ``1 - beta`` the
        chosen ``i`` has ``-u_i <= min_j (-u_j + 4 D_j ln(K / beta) / epsilon)``
        (Raskhodnikova and Smith 2016).

    Returns
    -------
    s : ndarray of shape (n_candidates,)
    """
    u = _check_utilities(utilities)
    d = _check_sensitivities(sensitivities, u.size)
    epsilon = _check_real("epsilon", epsilon, low_open=True)
    beta = _check_real("beta", beta, low_open=True, high=1.0)
    if beta == 1.0:
        raise ValueError("beta must be a number in (0, 1), got 1.0.")
    t = 2.0 * math.log(u.size / beta) / epsilon
    a = u - t * d
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = (a[:, None] - a[None, :]) / (d[:, None] + d[None, :])
    terms[np.isnan(terms)] = 0.0  # 0 / 0: a data-independent tie
    return terms.min(axis=1)


def gem_probabilities(utilities, sensitivities, epsilon, beta=GEM_BETA):
    """Selection probabilities of the generalized exponential mechanism.

    ``P(i)`` proportional to ``exp(epsilon s_i / 2)`` with ``s`` from
    :func:`gem_normalized_scores`: the exponential mechanism on scores of
    sensitivity 1, hence epsilon-DP and epsilon-bounded-range (candidates
    with ``s_i = -inf`` have probability 0 on every data set).

    Parameters
    ----------
    utilities, sensitivities, epsilon, beta
        As in :func:`gem_normalized_scores`.

    Returns
    -------
    probabilities : ndarray of shape (n_candidates,)
    """
    s = gem_normalized_scores(utilities, sensitivities, epsilon, beta)
    if epsilon == math.inf:
        return _softmax(np.where(s == s.max(), np.inf, -np.inf))
    return _softmax(epsilon * s / 2.0)


def generalized_exponential_mechanism(utilities, sensitivities, epsilon, rng, *,
                                      beta=GEM_BETA, label="generalized exponential mechanism"):
    """Choose an index with the generalized exponential mechanism (epsilon-DP).

    Raskhodnikova and Smith (2016), as stated in SPEC section 5: a candidate
    whose score is known less precisely (a larger sensitivity ``D_i``) must
    beat the others by a margin proportional to ``D_i``.

    Parameters
    ----------
    utilities : array-like of shape (n_candidates,)
        Scores, higher is better (``u = -loss``).
    sensitivities : array-like of shape (n_candidates,)
        Sensitivity ``D_i >= 0`` of each score; 0 for a data-independent score
        (the zero model of the paper's Algorithm 4).
    epsilon : float
        Privacy parameter, in ``(0, inf]``.
    rng : numpy.random.Generator
        Source of randomness.
    beta : float, default=0.05
        Confidence parameter, see :func:`gem_normalized_scores`.
    label : str, default="generalized exponential mechanism"
        Label of the privacy event.

    Returns
    -------
    index : int
        The chosen candidate.
    event : PureDPEvent
        The cost of the selection, ``PureDPEvent(epsilon)``.

    Examples
    --------
    >>> import numpy as np
    >>> from dp_glm_sklearn.privacy.selection import generalized_exponential_mechanism
    >>> losses = np.array([0.50, 0.20, 0.21])
    >>> index, event = generalized_exponential_mechanism(
    ...     -losses, [1e-4, 1e-4, 1e-2], 1.0, np.random.default_rng(0))
    >>> index, event.epsilon
    (1, 1.0)
    """
    p = gem_probabilities(utilities, sensitivities, epsilon, beta)
    return sample_index(p, rng), PureDPEvent(epsilon=float(epsilon), label=label)


# -- Gaussian report-noisy-max ----------------------------------------------------------
def gaussian_report_noisy_max(utilities, sensitivities, mu, rng):
    """Index of the best score after Gaussian noise: ``argmax_j u_j + N(0, (Delta_j / mu)^2)``.

    Each noisy score is a mu-GDP release of its score (sensitivity
    ``Delta_j``, SPEC section 2) and the index is post-processing of them.
    The random search releases the index of the best of K such scores,
    each computed in its own run, and accounts for it by random stopping;
    nothing here composes the K releases (that is the caller's accounting).

    All scores and noise are first divided by ``max_j Delta_j`` (the argmax
    is unchanged): then a tiny sensitivity at a huge mu does not make the
    noise scale underflow to 0, which :func:`~.calibration.gdp_sigma` refuses.
    A positive ratio ``Delta_j / max Delta`` too small for that (below ``mu``
    times the smallest normal float) is raised to it: more noise than
    calibrated, which is safe, and no refusal after a search's charge.
    Floating-point errors are ignored (the scores are private: an underflow
    that raised under ``np.seterr(all="raise")`` would depend on them).

    Parameters
    ----------
    utilities : array-like of shape (n_candidates,)
        Scores, higher is better.
    sensitivities : float or array-like of shape (n_candidates,)
        Sensitivity of each score, ``>= 0`` (0: a constant score, no noise).
    mu : float
        GDP parameter of each noisy score, in ``(0, inf]``.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    index : int

    Examples
    --------
    >>> import numpy as np
    >>> from dp_glm_sklearn.privacy.selection import gaussian_report_noisy_max
    >>> accuracy = [0.70, 0.95, 0.80]   # on 1000 validation records
    >>> gaussian_report_noisy_max(accuracy, 1 / 1000, 1.0, np.random.default_rng(0))
    1
    """
    u = _check_utilities(utilities)
    d = _check_sensitivities(sensitivities, u.size)
    mu = _check_real("mu", mu, low=0.0, low_open=True)
    scale = float(d.max()) if d.max() > 0 else 1.0
    # (At least the smallest subnormal: mu * min underflows for mu < 2**-53.)
    floor = max(mu * sys.float_info.min, math.ulp(0.0)) if mu < math.inf else 0.0
    with np.errstate(all="ignore"):
        ratios = np.where(d > 0, np.maximum(d / scale, floor), 0.0)
        noisy = [add_gaussian_noise(u_j / scale, gdp_sigma(r_j, mu), rng)
                 for u_j, r_j in zip(u, ratios, strict=True)]
    return int(np.argmax(noisy))


# -- random stopping ---------------------------------------------------------------
# The laws of the number of runs (STOPPING_SHAPES, _check_stopping) and the
# Renyi DP computation (_rdp_epsilon) live in events.py, with
# RandomStoppingEvent, so that a search and a ledger holding it get their
# numbers from one place.


def _stopping_mean(gamma, shape):
    if shape == 1.0:
        return 1.0 / gamma
    return (1.0 - gamma) / (gamma * -math.log(gamma))  # logarithmic


def _stopping_gamma(mean, shape):
    """Parameter gamma of the stopping distribution with the given mean.

    Rounded up, so that the sampled distribution has a mean at most ``mean``
    and a gamma at least the one dp-accounting derives from ``mean`` (its
    bisection rounds gamma down): both make the accounting conservative.
    """
    if shape == 1.0:
        return float(np.nextafter(1.0 / mean, 1.0))
    lo, hi = 0.0, 1.0  # the mean decreases from inf to 1 on (0, 1)
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if _stopping_mean(mid, shape) > mean:
            lo = mid
        else:
            hi = mid
    return hi


def sample_stopping_count(mean, stopping, rng):
    """Number of runs K >= 1 of a random-stopping search.

    ``"geometric"``: ``P(K = k) = gamma (1 - gamma)^(k - 1)``;
    ``"logarithmic"``: ``P(K = k) = (1 - gamma)^k / (k ln(1 / gamma))``; gamma
    such that ``E[K] = mean``.  K must stay secret: the guarantee of
    :func:`random_stopping_epsilon` covers the best run only.

    Parameters
    ----------
    mean : float
        Expected number of runs, ``> 1``.
    stopping : {"logarithmic", "geometric"}
        The distribution.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    count : int
    """
    mean, shape = _check_stopping(mean, stopping)
    return sample_count(_stopping_gamma(mean, shape), shape, rng)


def random_stopping_epsilon(mu, mean, delta, stopping="logarithmic"):
    """Epsilon of the best of a random number of mu-GDP runs.

    Run a mu-GDP mechanism K times, K drawn from ``stopping`` with mean
    ``mean`` (independently of the data, and kept secret), and release only
    the run with the best (privately computed) score.  A mu-GDP run is
    ``(lambda, lambda mu^2 / 2)``-RDP for every order (its Renyi divergences
    are those of ``N(0, 1)`` and ``N(mu, 1)`` at most); Papernot and Steinke
    (2022, "Hyperparameter tuning with Renyi differential privacy", Theorem 2
    for truncated negative binomial K) bound the RDP of the output by
    ``eps(lambda) + (1 + eta)(1 - 1/lhat) eps(lhat) + (1 + eta) ln(1/gamma)/lhat
    + ln(E[K]) / (lambda - 1)``.  This is dp-accounting's ``RdpAccountant``
    on ``RepeatAndSelectDpEvent(GaussianDpEvent(1 / mu), mean, shape)``, which
    minimizes over ``lhat`` on its grid of orders and converts the RDP curve
    to (epsilon, delta).  The same computation is the RDP bound of
    :func:`~dp_glm_sklearn.privacy.compose` for the ledger
    ``[RandomStoppingEvent(mu, mean, stopping)]``, the event a search
    records so that an accountant can price it at its own delta.

    Parameters
    ----------
    mu : float
        GDP parameter of one run (training and score), in ``[0, inf]``.
    mean : float
        Expected number of runs, ``> 1``.
    delta : float
        Target delta, in ``(0, 1)``.
    stopping : {"logarithmic", "geometric"}, default="logarithmic"
        Distribution of the number of runs.

    Returns
    -------
    epsilon : float

    Examples
    --------
    >>> from dp_glm_sklearn.privacy.selection import random_stopping_epsilon
    >>> round(random_stopping_epsilon(0.4142, 10, 1e-5), 2)
    3.0
    """
    mu = _check_real("mu", mu)
    mean, shape = _check_stopping(mean, stopping)
    delta = _check_real("delta", delta, low_open=True, high=1.0)
    if mu == 0.0:
        return 0.0
    if mu == math.inf:
        return math.inf
    return _rdp_epsilon(0.0, ((mu, mean, shape),), (), delta)


@lru_cache(maxsize=128)
def random_stopping_mu(epsilon, delta, mean, stopping="logarithmic"):
    """Largest per-run mu whose random-stopping search is (epsilon, delta)-DP.

    Inverts :func:`random_stopping_epsilon` (increasing in mu) with Brent's
    method, then steps below the root so that the returned mu never exceeds
    the budget through rounding.  Cached: a search's refits and scikit-learn's
    repeated fits ask for the same budget.

    Parameters
    ----------
    epsilon : float
        Target epsilon of the whole search, in ``(0, inf]``.
    delta : float
        Target delta, in ``(0, 1)``.
    mean, stopping
        As in :func:`random_stopping_epsilon`.

    Returns
    -------
    mu : float
    """
    epsilon = _check_real("epsilon", epsilon, low_open=True)
    delta = _check_real("delta", delta, low_open=True, high=1.0)
    if delta == 1.0:
        raise ValueError(f"delta must be a number in (0, 1), got {delta!r}.")
    if epsilon == math.inf:
        return math.inf

    def excess(mu):
        return random_stopping_epsilon(mu, mean, delta, stopping) - epsilon

    if excess(1e-8) > 0.0:
        # The log(E[K]) and log(1/gamma) terms do not vanish with mu at the
        # highest order of the grid (they would at higher orders).
        floor = excess(1e-8) + epsilon
        raise ValueError(
            f"epsilon={epsilon!r} is below {floor:.4g}, the least that the accounting of "
            f"random stopping with a mean of {mean!r} candidates certifies at "
            f"delta={delta:.3g} (Papernot & Steinke's bound over dp-accounting's Renyi "
            "orders, whose highest order keeps it above 0 however little the candidates "
            "reveal); raise epsilon above it or lower the mean (DPRandomizedSearchCV's "
            "mean_candidates)."
        )
    return _largest_within(excess, 1e-8, 1.0)


def _largest_within(excess, lo, hi):
    """Largest mu >= lo with ``excess(mu) <= 0``, for ``excess`` increasing in mu.

    ``excess(lo) <= 0`` is the caller's to check.  ``hi`` is doubled until it
    brackets the root, the root is found by Brent's method, and the result is
    stepped below it until ``excess`` is not positive, so that rounding in
    the root never spends more than the budget.
    """
    while excess(hi) < 0.0:
        hi *= 2.0
    mu = brentq(excess, lo, hi, xtol=1e-300, maxiter=500)  # relative accuracy: a few ulps
    while excess(mu) > 0.0:
        mu *= 1.0 - 1e-9
    return mu


@lru_cache(maxsize=128)
def random_stopping_refit_mu(mu_run, mean, epsilon, delta, stopping="logarithmic"):
    """GDP parameter of a refit after a random-stopping search, within (epsilon, delta).

    The search (runs of GDP ``mu_run``, calibrated to ``(epsilon/2,
    delta/2)`` by :func:`random_stopping_mu`) is followed by one Gaussian
    release, the refit.  Returns the larger of two valid choices:

    - ``gdp_mu(epsilon/2, delta/2)``: the search is ``(epsilon/2,
      delta/2)``-DP and the refit is too, so the two compose to (epsilon,
      delta) by basic composition (the split bound of
      :func:`~dp_glm_sklearn.privacy.compose`);
    - the largest mu for which the Renyi DP composition of the search and a
      mu-GDP release (``RepeatAndSelectDpEvent`` plus ``a mu^2 / 2``,
      converted at delta; the RDP bound of
      :func:`~dp_glm_sklearn.privacy.compose`) is at most epsilon, found by
      Brent's method and stepped below the root.

    Either way ``compose([RandomStoppingEvent(mu_run, ...), GaussianEvent(mu)],
    delta) <= epsilon``, since ``compose`` returns the smallest of its valid
    bounds and each choice makes one of them at most epsilon.  On the
    examples of the test suite the RDP choice is about 30% larger, i.e. the
    refit's noise 30% smaller, than the even split.

    Examples
    --------
    >>> from dp_glm_sklearn.privacy import RandomStoppingEvent, GaussianEvent, compose
    >>> from dp_glm_sklearn.privacy.selection import (random_stopping_mu,
    ...                                               random_stopping_refit_mu)
    >>> mu_run = random_stopping_mu(1.0, 5e-6, 4.0)
    >>> mu = random_stopping_refit_mu(mu_run, 4.0, 2.0, 1e-5)
    >>> bool(compose([RandomStoppingEvent(mu_run, 4.0), GaussianEvent(mu)], 1e-5) <= 2.0)
    True
    """
    mu_run = _check_real("mu_run", mu_run)
    epsilon = _check_real("epsilon", epsilon, low_open=True)
    delta = _check_real("delta", delta, low_open=True, high=1.0)
    mean, shape = _check_stopping(mean, stopping)
    half = gdp_mu(epsilon / 2.0, delta / 2.0)
    if epsilon == math.inf or mu_run == math.inf:
        return half
    runs = ((float(mu_run), mean, shape),)

    def excess(mu):
        return _rdp_epsilon(mu, runs, (), delta) - epsilon

    if excess(half) >= 0.0:
        return half
    return max(_largest_within(excess, half, 2.0 * half), half)
