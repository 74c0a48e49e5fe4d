"""Privacy events: what one release costs, and what a ledger of them costs.

Every release of the library is described by one of four events (SPEC
section 7):

- :class:`GaussianEvent` -- a mu-GDP release (the Gaussian mechanism, or an
  exact composition of Gaussian mechanisms);
- :class:`PureDPEvent` -- an epsilon-DP release (exponential mechanism,
  report-noisy-max);
- :class:`ApproxDPEvent` -- an (epsilon, delta)-DP release known only through
  these two numbers;
- :class:`RandomStoppingEvent` -- the best of a random, secret number of
  mu-GDP runs (random-stopping search, Papernot and Steinke 2022), known
  through its Renyi DP curve, so that it is (epsilon, delta)-DP at every
  delta.

:func:`compose` turns a ledger (a sequence of events, composed adaptively)
into one epsilon at a given delta.  It is, with
:mod:`~dp_glm_sklearn.privacy.calibration` and the conversions of
:mod:`~dp_glm_sklearn.privacy.selection`, where the library's privacy numbers
come from; the Renyi DP numbers of random stopping are computed here
(:func:`_rdp_epsilon`) and nowhere else.
"""

import bisect
import math
import warnings
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .calibration import _check_real, gdp_epsilon

__all__ = [
    "ApproxDPEvent",
    "GaussianEvent",
    "PureDPEvent",
    "RandomStoppingEvent",
    "compose",
    "total_mu",
]

# Step of the privacy-loss grid of the PLD accountant, and its floor relative
# to the size of the answer (see ``compose``).
_PLD_DISCRETIZATION = 1e-4
_PLD_RELATIVE_DISCRETIZATION = 1e-5

#: Distributions of the number of runs of a random-stopping search: the shape
#: of the truncated negative binomial distribution of Papernot and Steinke
#: (2022), as dp-accounting's ``RepeatAndSelectDpEvent`` takes it.
STOPPING_SHAPES = {"logarithmic": 0.0, "geometric": 1.0}

#: The smallest run mu whose random-stopping RDP curve is computed; smaller
#: ones are priced at it (dp-accounting squares 1 / mu, which overflows below
#: about 1e-154).
_SMALLEST_PRICED_RUN_MU = 1e-150

#: Shares of delta that the second bound of ``compose`` gives the
#: random-stopping events of a ledger (a fixed, public grid; see ``compose``).
_STOPPING_DELTA_SHARES = (0.1, 0.5)


def _check_label(label):
    if not isinstance(label, str):
        raise TypeError(f"label must be a str, got {label!r}.")


@dataclass(frozen=True)
class GaussianEvent:
    """A mu-GDP release: a Gaussian mechanism, or an exact composition of them.

    Adding ``N(0, sigma^2 I)`` to a statistic of L2-sensitivity ``Delta`` is
    ``mu = Delta / sigma``-GDP (Dong, Roth and Su, 2019).

    Parameters
    ----------
    mu : float
        GDP parameter, in ``[0, inf]``; ``inf`` marks a non-private release.
    label : str, default=""
        What was released (e.g. ``"noisy_gd"``), for reports.

    Examples
    --------
    >>> from dp_glm_sklearn.privacy import GaussianEvent
    >>> GaussianEvent(mu=0.5, label="noisy_gd")
    GaussianEvent(mu=0.5, label='noisy_gd')
    """

    mu: float
    label: str = ""

    def __post_init__(self):
        object.__setattr__(self, "mu", _check_real("mu", self.mu))
        _check_label(self.label)


@dataclass(frozen=True)
class PureDPEvent:
    """An epsilon-DP release (exponential mechanism, report-noisy-max).

    Parameters
    ----------
    epsilon : float
        Privacy parameter, in ``[0, inf]``.
    label : str, default=""
        What was released, for reports.

    Examples
    --------
    >>> from dp_glm_sklearn.privacy import PureDPEvent
    >>> PureDPEvent(epsilon=0.1, label="select norm_bound")
    PureDPEvent(epsilon=0.1, label='select norm_bound')
    """

    epsilon: float
    label: str = ""

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _check_real("epsilon", self.epsilon))
        _check_label(self.label)


@dataclass(frozen=True)
class ApproxDPEvent:
    """An (epsilon, delta)-DP release with no finer description.

    Parameters
    ----------
    epsilon : float
        Privacy parameter, in ``[0, inf]``.
    delta : float
        Privacy parameter, in ``[0, 1]``.
    label : str, default=""
        What was released, for reports.

    Examples
    --------
    >>> from dp_glm_sklearn.privacy import ApproxDPEvent
    >>> ApproxDPEvent(epsilon=0.5, delta=1e-8)
    ApproxDPEvent(epsilon=0.5, delta=1e-08, label='')
    """

    epsilon: float
    delta: float
    label: str = ""

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _check_real("epsilon", self.epsilon))
        object.__setattr__(self, "delta", _check_real("delta", self.delta, high=1.0))
        _check_label(self.label)


def _check_stopping(mean, stopping):
    """Validate the law of the number of runs; return (mean, shape)."""
    mean = _check_real("mean", mean, low=1.0, low_open=True, allow_inf=False)
    if not isinstance(stopping, str) or stopping not in STOPPING_SHAPES:
        raise ValueError(
            f"stopping must be one of {sorted(STOPPING_SHAPES)}, got {stopping!r}."
        )
    return mean, STOPPING_SHAPES[stopping]


@dataclass(frozen=True)
class RandomStoppingEvent:
    """The best of a random, secret number of mu-GDP runs (random stopping).

    A mu-GDP mechanism is run K times, K drawn independently of the data
    from ``stopping`` with mean ``mean`` and never released, and only the
    run with the best (privately computed) score is released.  Papernot and
    Steinke (2022, "Hyperparameter tuning with Renyi differential privacy",
    Theorem 2) bound its Renyi DP curve; dp-accounting computes it as
    ``RepeatAndSelectDpEvent(GaussianDpEvent(1 / mu), mean, shape)``.
    Unlike an :class:`ApproxDPEvent`, it is (epsilon, delta)-DP for every
    delta, so that an accountant prices it at its own delta
    (:func:`compose`).

    Parameters
    ----------
    mu : float
        GDP parameter of one run, in ``[0, inf]``; 0 for runs that reveal
        nothing (the event then costs nothing), ``inf`` for non-private runs.
    mean : float
        Expected number of runs, ``> 1``.
    stopping : {"logarithmic", "geometric"}, default="logarithmic"
        Distribution of the number of runs (truncated negative binomial of
        shape 0 or 1).
    label : str, default=""
        What was released, for reports.

    Examples
    --------
    >>> from dp_glm_sklearn.privacy import RandomStoppingEvent, compose
    >>> event = RandomStoppingEvent(mu=0.4142, mean=10, label="search")
    >>> event
    RandomStoppingEvent(mu=0.4142, mean=10.0, stopping='logarithmic', label='search')
    >>> round(compose([event], 1e-5), 2)
    3.0
    """

    mu: float
    mean: float
    stopping: str = "logarithmic"
    label: str = ""

    def __post_init__(self):
        object.__setattr__(self, "mu", _check_real("mu", self.mu))
        mean, _ = _check_stopping(self.mean, self.stopping)
        object.__setattr__(self, "mean", mean)
        _check_label(self.label)


PrivacyEvent = GaussianEvent | PureDPEvent | ApproxDPEvent | RandomStoppingEvent


def _as_event_tuple(events):
    """Return ``events`` (one event or an iterable of them) as a tuple."""
    if isinstance(events, PrivacyEvent):
        events = (events,)
    else:
        try:
            events = tuple(events)
        except TypeError:
            events = (events,)
    for event in events:
        if not isinstance(event, PrivacyEvent):
            raise TypeError(
                "events must be GaussianEvent, PureDPEvent, ApproxDPEvent or "
                f"RandomStoppingEvent instances, got {event!r}."
            )
        _check_fields(event)
    return events


def _check_fields(event):
    """Check an event's numbers again, as its class's ``__post_init__`` does.

    A subclass may override ``__post_init__`` (or a field be set with
    ``object.__setattr__``): an epsilon of NaN made the ledger's total NaN,
    after which every charge passed the budget check, and a negative one
    lowered the total.
    """
    if isinstance(event, (GaussianEvent, RandomStoppingEvent)):
        _check_real("mu", event.mu)
    if isinstance(event, (PureDPEvent, ApproxDPEvent)):
        _check_real("epsilon", event.epsilon)
    if isinstance(event, ApproxDPEvent):
        _check_real("delta", event.delta, high=1.0)
    if isinstance(event, RandomStoppingEvent):
        _check_stopping(event.mean, event.stopping)


class _RunningSummary:
    """:func:`_summarize`, built event by event: an accountant keeps the
    summary of its ledger up to date, and reads that of each prefix in one
    pass.

    The squares of the Gaussian events' mu are added with Neumaier's
    compensated summation: a plain float sum drops terms below half an ulp of
    the total (a million events of mu 1e-8 after one of mu 1 would count for
    nothing), which would put the reported epsilon below the truth.
    """

    def __init__(self):
        self._sum_sq, self._compensation, self._others, self._runs = 0.0, 0.0, [], []

    def copy(self):
        other = _RunningSummary()
        other._sum_sq, other._compensation = self._sum_sq, self._compensation
        other._others, other._runs = list(self._others), list(self._runs)
        return other

    def add(self, events):
        for e in events:
            if isinstance(e, GaussianEvent):
                # inf, not OverflowError, beyond 1e154; below 1e-150 the square
                # would lose precision (or vanish), so it counts as 1e-150's.
                term = e.mu * e.mu if e.mu >= 1e-150 or e.mu == 0.0 else 1e-300
                total = self._sum_sq + term
                if total == math.inf:
                    self._compensation = 0.0
                elif self._sum_sq >= term:
                    self._compensation += (self._sum_sq - total) + term
                else:
                    self._compensation += (term - total) + self._sum_sq
                self._sum_sq = total
            elif isinstance(e, RandomStoppingEvent):
                bisect.insort(self._runs, (e.mu, e.mean, STOPPING_SHAPES[e.stopping]))
            else:
                bisect.insort(self._others, (e.epsilon, getattr(e, "delta", 0.0)))
        return self

    def summary(self):
        return (math.sqrt(self._sum_sq + self._compensation), tuple(self._others),
                tuple(self._runs))


def _summarize(events):
    """Split a ledger into the GDP total of its Gaussian events, the sorted
    (epsilon, delta) pairs of its pure and approximate events, and the sorted
    (mu, mean, shape) triples of its random-stopping events (their order does
    not matter in a composition)."""
    return _RunningSummary().add(events).summary()


def total_mu(events):
    """GDP parameter of the composition of Gaussian events.

    Parameters
    ----------
    events : iterable of events
        The ledger.

    Returns
    -------
    mu : float or None
        ``sqrt(sum mu_i^2)`` (exact; 0 for an empty ledger), or None when the
        ledger holds an event that is not a :class:`GaussianEvent`.

    Examples
    --------
    >>> from dp_glm_sklearn.privacy import GaussianEvent, PureDPEvent, total_mu
    >>> total_mu([GaussianEvent(0.3), GaussianEvent(0.4)])
    0.5
    >>> total_mu([GaussianEvent(0.3), PureDPEvent(1.0)]) is None
    True
    """
    events = _as_event_tuple(events)
    if not all(isinstance(e, GaussianEvent) for e in events):
        return None
    return _summarize(events)[0]  # compensated, as the accountant sums


def compose(events, delta):
    """Epsilon of the adaptive composition of ``events`` at a given delta.

    - Only Gaussian events: exact, the composition is
      ``sqrt(sum mu_i^2)``-GDP, converted with
      :func:`~dp_glm_sklearn.privacy.gdp_epsilon`.
    - Gaussian, pure and approximate events: the smallest of three valid
      bounds, the privacy loss distribution (PLD) accountant of Google's
      ``dp-accounting``, its RDP accountant and basic composition.
    - With :class:`RandomStoppingEvent` instances: the smallest of the Renyi
      DP bound and the split bounds below.

    The PLD accountant composes one Gaussian PLD (``standard_deviation =
    1/mu``, sensitivity 1, for the GDP total ``mu`` of the Gaussian events)
    with the worst-case PLD of each (epsilon, delta) pair
    (``from_privacy_parameters``).  Privacy losses are rounded up
    (``pessimistic_estimate=True``) to a grid of step ``1e-4``, or ``1e-5``
    times the basic-composition epsilon when that is larger, so that large
    totals do not need grids of millions of points; each rounding errs on the
    side of privacy.  The FFTs composing them do not: their rounding is
    bounded and taken off delta first (:func:`_pld_delta`; 2e-8 to 6e-8
    for a thousand events), and below that delta the PLD is not used.  The RDP
    bound of the ledger (item 1 below, without random-stopping events) is a
    third candidate: computed from closed forms, it is the smaller one at
    very small delta.

    Basic composition is the fallback, used alone when ``dp-accounting`` is
    not installed or fails (with a RuntimeWarning in the latter case): the
    pure and approximate events add up to ``(sum eps_i, sum delta_i)``,
    which must leave part of ``delta`` for the Gaussian events, whose GDP
    total is converted at the ``delta - sum delta_i`` that remains; the
    result is ``inf`` when nothing remains.

    **Ledgers with random stopping.**  A random-stopping event is known by
    its Renyi DP (RDP) curve only, so it enters two kinds of bound; the
    answer is the smallest (each is a valid (epsilon, delta) guarantee of
    the same ledger at the same delta, and which one is smallest depends on
    public numbers only).  A random-stopping event whose runs have ``mu = 0``
    releases nothing and is dropped; one with ``mu = inf`` makes the answer
    ``inf``.  Without ``dp-accounting`` neither bound exists and the answer
    is ``inf`` (never an under-count).

    1. *One RDP composition.*  The RDP curve of the ledger at each order
       ``a`` of dp-accounting's grid (all ``> 1``) is the sum of

       - ``a mu^2 / 2`` for the Gaussian events (GDP total ``mu``): the
         output pair of a mu-GDP release is a post-processing of ``(N(0,
         1), N(mu, 1))`` (Dong, Roth and Su 2019, by Blackwell's theorem),
         so its Renyi divergence is at most that pair's, ``a mu^2 / 2``;
         dp-accounting's ``GaussianDpEvent(1 / mu)``;
       - the RDP of each random-stopping event: dp-accounting's
         ``RepeatAndSelectDpEvent(GaussianDpEvent(1 / mu_run), mean, shape)``
         (Papernot and Steinke 2022, Theorem 2, on runs of RDP
         ``a mu_run^2 / 2``);
       - ``min(eps_i, a eps_i^2 / 2)`` for each pure or approximate event
         (see below);

       and it is converted to epsilon at ``delta - sum delta_i`` (the deltas
       of the approximate events) by dp-accounting's ``compute_epsilon``
       (Canonne, Kamath and Steinke 2020, Proposition 12).  Why the
       approximate events may enter this way: for each pair of neighbours an
       (eps_i, delta_i)-DP release is a mixture ``(1 - delta_i) P' +
       delta_i P''`` against ``(1 - delta_i) Q' + delta_i Q''`` with
       ``(P', Q')`` eps_i-indistinguishable both ways (Kairouz, Oh and
       Viswanath 2015; Murtagh and Vadhan 2016), for every
       history of the ledger.  Draw the mixture's component as a latent
       coin of the same bias on both neighbours.  Given that every coin
       falls on the primed part (probability ``w >= 1 - sum delta_i`` on
       both sides), the ledger is an adaptive composition of the Gaussian
       and random-stopping releases and of eps_i-indistinguishable pairs,
       whose Renyi divergence is at most ``eps_i`` (``D_a <= D_inf``) and at
       most ``a eps_i^2 / 2`` (Bun and Steinke 2016, Proposition 3.3); RDP
       composes adaptively by adding curves (Mironov 2017, Proposition 1),
       so these conditional outputs ``P_w, Q_w`` satisfy ``P_w(S) <= e^eps
       Q_w(S) + delta_rdp``.  Then ``P(S) <= w P_w(S) + (1 - w) <= e^eps
       Q(S) + delta_rdp + sum delta_i``, since ``Q(S) >= w Q_w(S)``.  Pure
       events are the case ``delta_i = 0``.
    2. *Split bounds.*  For each share ``s`` in ``(0.1, 0.5)`` (public
       constants), each of the ``m`` random-stopping events is an
       ``(eps_j, s delta / m)``-DP release, ``eps_j`` its RDP curve converted
       at ``s delta / m`` as above; the ledger with these as approximate
       events is then composed by the PLD and basic bounds above (adaptive
       composition of the events' trade-off functions, Dong, Roth and Su
       2019, with the worst-case pair of each (eps, delta)).
       This keeps the Gaussian part exact when it dominates, and keeps
       ``compose([RandomStoppingEvent(...), GaussianEvent(mu)], delta)`` at
       most ``eps_1(delta/2) + gdp_epsilon(mu, delta/2)``.

    Parameters
    ----------
    events : iterable of events
        The ledger: :class:`GaussianEvent`, :class:`PureDPEvent`,
        :class:`ApproxDPEvent` and :class:`RandomStoppingEvent` instances, in
        any order.
    delta : float
        Target delta of the whole ledger, in ``[0, 1]``.

    Returns
    -------
    epsilon : float
        The ledger is (epsilon, delta)-DP.  0 for an empty ledger, ``inf`` if
        an event has an infinite mu or epsilon, or if no bound can be
        computed.

    Examples
    --------
    >>> from dp_glm_sklearn.privacy import GaussianEvent, compose
    >>> round(compose([GaussianEvent(0.6), GaussianEvent(0.8)], 1e-5), 4)
    4.3772
    """
    events = _as_event_tuple(events)
    delta = _check_real("delta", delta, high=1.0)
    return _compose_summary(*_summarize(events), delta)


@lru_cache(maxsize=256)
def _compose_summary(mu, others, runs, delta):
    # Cached: an accountant's check and spend, then the estimator's record,
    # ask for the same ledger in a row, and the PLD can take a fraction of a
    # second.
    if _is_infinite(mu, others, runs):
        return math.inf
    runs = tuple(run for run in runs if run[0] > 0.0)  # runs revealing nothing
    if runs:
        return _compose_with_stopping(mu, others, runs, delta)
    if not others:
        return gdp_epsilon(mu, delta)
    basic = _basic_composition(mu, others, delta)
    try:  # (the PLD's grid: a scale, not a bound; its exact value moves the grid)
        scale = math.fsum(eps for eps, _ in others) + gdp_epsilon(mu, delta)
    except OverflowError:  # an intermediate sum beyond the floats
        scale = math.inf
    if scale == math.inf:  # delta = 0 with Gaussian events, or huge epsilons: basic is inf
        return basic
    interval = max(_PLD_DISCRETIZATION, _PLD_RELATIVE_DISCRETIZATION * scale)
    try:
        # Epsilons so large that nothing is private overflow the RDP's eps**2
        # and the PLD's grid (exp of its step): their failure warned, which
        # raised after a charge was recorded under warnings-as-errors.  Such
        # ledgers skip them.
        bounds = [basic]
        largest = max(eps for eps, _ in others)
        if largest <= _LARGEST_RDP_EPSILON:
            bounds.append(_rdp_bound(mu, others, (), delta))
        if largest <= _LARGEST_PLD_EPSILON and scale <= _LARGEST_PLD_SCALE:
            pld_delta = _pld_delta(mu, others, delta, interval)
            if pld_delta > 0.0:
                bounds.append(_pld_composition(mu, others, pld_delta, interval))
    except ImportError:
        return basic
    except Exception as exc:  # any failure: fall back to a valid bound
        warnings.warn(
            f"dp-accounting's PLD or RDP accountant failed ({exc!r}); using basic "
            "composition, a valid but looser bound.",
            RuntimeWarning,
            stacklevel=3,
        )
        return basic
    return min(bounds)


def _quick_bound(mu, others, runs, delta):
    """``(bound, exact)``: one of the bounds ``compose`` takes the smallest of,
    cheap to compute (no PLD), or None.

    ``compose`` of the same ledger is at most ``bound`` (equal when
    ``exact``), so a budget that ``bound`` fits is not exceeded; an accountant
    accepts a charge on it and composes the ledger in full only when it does
    not fit, or when the total is read.  For a ledger with random stopping,
    the smaller of the RDP bound and the split bounds with basic composition
    in place of the PLD (each at least its counterpart in ``compose``); basic
    composition for one with pure or approximate events; the exact GDP
    conversion for a Gaussian-only one.
    """
    if _is_infinite(mu, others, runs):
        return math.inf, True
    runs = tuple(run for run in runs if run[0] > 0.0)
    if runs:
        try:
            # The RDP bound, and each split bound with basic composition in
            # place of the PLD (at least the split bound compose computes).
            bounds = [_rdp_bound(mu, others, runs, delta)]
            bounds += [_basic_composition(mu, converted, delta)
                       for converted in _split_ledgers(others, runs, delta)]
            return min(bounds), False
        except Exception:  # no dp-accounting, or it failed: compose decides
            return None
    if not others:
        return gdp_epsilon(mu, delta), True
    return _basic_composition(mu, others, delta), False


def _compose_with_stopping(mu, others, runs, delta):
    """The smallest of the RDP bound and the split bounds (see ``compose``)."""
    bounds = []
    try:
        bounds.append(_rdp_bound(mu, others, runs, delta))
        for converted in _split_ledgers(others, runs, delta):
            bounds.append(_compose_summary(mu, converted, (), delta))
    except ImportError:
        pass  # without dp-accounting no bound exists: inf, never an under-count
    except Exception as exc:  # keep the bounds already computed, all valid
        warnings.warn(
            f"dp-accounting's RDP accountant failed ({exc!r}); the ledger with "
            "random stopping is priced by the bounds computed before the failure, "
            "or inf.",
            RuntimeWarning,
            stacklevel=4,
        )
    return min(bounds, default=math.inf)


def _is_infinite(mu, others, runs):
    """Whether an event of the summarized ledger has an infinite mu or epsilon."""
    return (mu == math.inf or any(eps == math.inf for eps, _ in others)
            or any(run[0] == math.inf for run in runs))


def _split_ledgers(others, runs, delta):
    """Bound 2 of ``compose``: for each share of delta given to the
    random-stopping events, the pure and approximate part of the ledger with
    each of them added as an (epsilon, share * delta / m) pair, sorted."""
    for share in _STOPPING_DELTA_SHARES:
        run_delta = share * delta / len(runs)
        # one RDP conversion per distinct run: a ledger of many identical
        # searches would otherwise convert the same run once per search
        epsilon_of = {run: _rdp_epsilon(0.0, (run,), (), run_delta) for run in set(runs)}
        yield tuple(sorted(others + tuple((epsilon_of[run], run_delta) for run in runs)))


def _rdp_bound(mu, others, runs, delta):
    """Bound 1 of ``compose``: one RDP composition of the whole ledger."""
    delta_rdp = _sum_rounded([delta, *(-d for _, d in others)], -math.inf)
    if delta_rdp <= 0.0:
        return math.inf
    return _rdp_epsilon(mu, runs, tuple(eps for eps, _ in others), delta_rdp)


def _rdp_epsilon(mu, runs, pure_epsilons, delta):
    """Epsilon at ``delta`` of an RDP composition, by dp-accounting.

    The one place where the library computes Renyi DP.  Composes a Gaussian
    release of GDP total ``mu`` (skipped if 0), one random-stopping search
    per ``(mu_run, mean, shape)`` triple of ``runs`` (``RepeatAndSelectDpEvent``
    of ``GaussianDpEvent(1 / mu_run)``), and one eps-indistinguishable pair
    per entry of ``pure_epsilons``, of Renyi divergence at most ``min(eps, a
    eps^2 / 2)`` at order ``a``; converts the sum with ``compute_epsilon``.
    The events carry mu already computed for replace-one neighbours, and the
    RDP of ``GaussianDpEvent`` at sampling rate 1 (``a / (2 sigma^2)``) does
    not depend on the accountant's neighbouring relation.  Raises
    ImportError without dp-accounting.
    """
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    accountant = rdp_privacy_accountant.RdpAccountant()
    if mu > 0.0:
        accountant.compose(dp_event.GaussianDpEvent(noise_multiplier=1.0 / mu))
    orders, rdp = accountant.orders, np.array(accountant.rdp, dtype=np.float64)
    for (run_mu, mean, shape), count in Counter(runs).items():
        if run_mu > 0.0:
            # What accountant.compose(RepeatAndSelectDpEvent(...), count) adds
            # (count * curve + rdp, the same floats), with the curve cached.
            # Below _SMALLEST_PRICED_RUN_MU, 1 / mu**2 overflows in
            # dp-accounting; the curve grows with mu (Papernot and Steinke's
            # bound grows with the run's RDP), so the floor's is an upper bound.
            run_mu = max(run_mu, _SMALLEST_PRICED_RUN_MU)
            rdp = count * _repeat_and_select_rdp(run_mu, mean, shape) + rdp
    for eps in pure_epsilons:
        # (Above _LARGEST_RDP_EPSILON, eps**2 overflows; the minimum is eps there,
        # as at every eps > 2 / min(orders).)
        rdp = rdp + (np.minimum(eps, orders * eps**2 / 2.0) if eps <= _LARGEST_RDP_EPSILON
                     else eps)
    epsilon, _ = rdp_privacy_accountant.compute_epsilon(orders, rdp, delta)
    return float(epsilon)


@lru_cache(maxsize=1024)
def _repeat_and_select_rdp(run_mu, mean, shape):
    """RDP curve, at dp-accounting's default orders, of one random-stopping
    search of ``GaussianDpEvent(1 / run_mu)`` runs (cached: computing it takes
    about 20 ms, and a ledger's every charge would recompute it)."""
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    accountant = rdp_privacy_accountant.RdpAccountant()
    accountant.compose(dp_event.RepeatAndSelectDpEvent(
        dp_event.GaussianDpEvent(noise_multiplier=1.0 / run_mu), mean, shape))
    curve = np.array(accountant.rdp, dtype=np.float64)
    curve.flags.writeable = False
    return curve


def _basic_composition(mu, others, delta):
    """Basic composition: a valid bound that needs no PLD.

    ``others`` are (epsilon, delta) pairs; their epsilons and deltas add up,
    and the Gaussian part (GDP total ``mu``) is charged at what remains of
    ``delta``.
    """
    eps_sum = _sum_rounded([eps for eps, _ in others], math.inf)
    remaining = _sum_rounded([delta, *(-d for _, d in others)], -math.inf)
    if mu == 0.0:
        return eps_sum if remaining >= 0.0 else math.inf
    if remaining <= 0.0:
        return math.inf
    return _sum_rounded([eps_sum, gdp_epsilon(mu, remaining)], math.inf)


def _sum_rounded(values, direction):
    """The exact sum of the floats ``values``, rounded toward ``direction`` (+-inf).

    ``math.fsum`` rounds to nearest, half a unit below the exact sum at
    worst (epsilons 1.0 and 0.2 summed to 1.19999999999999996, below their
    exact sum 1.20000000000000001); the sign of its error, taken exactly by a
    second ``fsum``, says whether to step one float toward ``direction``.
    """
    try:
        total = math.fsum(values)
        if math.isinf(total) or math.isnan(total):
            return total
        error = math.fsum([*values, -total])  # exact sum - total, correctly rounded
    except OverflowError:  # an intermediate sum beyond the floats: a bound in direction
        return direction
    if error != 0.0 and (error > 0.0) == (direction > 0.0):
        return math.nextafter(total, direction)
    return total


# Mixed ledgers whose largest pure or approximate epsilon exceeds this skip
# the RDP bound (its eps**2 overflows from ~1e154) ...
_LARGEST_RDP_EPSILON = 1e150
# ... and those with an epsilon above this (the PLD of an (eps, delta) pair
# takes exp(eps)), or whose total scale (the epsilons' sum and the Gaussian
# part's) exceeds the next (the grid step, 1e-5 of the scale, has exp(step)
# beyond the floats from ~7e7), skip the PLD.
_LARGEST_PLD_EPSILON = 700.0
_LARGEST_PLD_SCALE = 1e7

# dp-accounting's PLD compositions (FFTs) truncate tails of mass up to this,
# per composition (its default ``tail_mass_truncation``).
_PLD_TAIL_MASS = 1e-15


def _pld_delta(mu, others, delta, interval):
    """The delta at which :func:`_pld_composition` is asked for epsilon: ``delta``
    less a bound on what floating point can take off the PLD's delta.

    The pessimistic discretization errs on the side of privacy; the FFTs that
    compose the discretized distributions do not.  Their rounding moves
    probability mass by an absolute amount: measured up to ~5e-14 for 2,000
    pure events, enough to under-report epsilon once delta is near 1e-12
    (true delta 1.05x the one reported).  The bound, for an FFT length L
    (here at most ``2 (W + 2m + 2)``, W the discretized support width of the
    whole ledger before truncation: ``2 (sum eps_i + mu^2/2 + 16 mu) /
    interval``, the Gaussian PLD being truncated within ~10 standard
    deviations, and m the number of compositions) and unit roundoff u:
    a forward or inverse FFT is within ``eta = 8 log2(L) u`` of the exact
    one in relative 2-norm (Higham, *Accuracy and Stability of Numerical
    Algorithms*, 2002, Theorem 24.2: ``log2(L) (t + gamma_4 (sqrt 2 + t))``
    for radix 2 with twiddle factors accurate to t ~ u, about ``7 log2(L)
    u``; scipy's mixed radices have bounds of the same form, and the
    doubling below covers their constants).  Fourier coefficients of a
    probability vector are at most 1 in modulus, so raising them to the
    power k (a self-composition of k copies) multiplies their errors by at
    most k and adds ``k u``; back in the loss domain, the 2-norm error is at
    most ``(k + 1)(eta + u)``, and for the product of two transforms (a
    composition of two distributions) ``3 (eta + u)``.  The 1-norm error,
    which bounds the change in delta at any epsilon (delta is the mass at
    infinity plus the mass at each loss l times ``(1 - e^(eps - l))_+``, a
    weight in [0, 1]), is at most ``sqrt(L)`` times the 2-norm one.  Each
    composition may also move its truncated tail mass (``_PLD_TAIL_MASS``)
    by wrapping around.  Last, dp-accounting finds epsilon from partial sums
    of the at most L masses (each at most 1) compared with delta, a
    difference with an absolute error below about ``L u``.  All of it,
    doubled, is taken off delta.  This is 2e-8 to 6e-8 for a thousand events
    (4e-10 for ten): nothing at the usual deltas, and below about 1e-7 the
    RDP bound (closed forms, no FFT) is usually the smaller one anyway.
    Returns a number <= 0 when nothing is left (then the PLD is not used).
    """
    groups = Counter(pair for pair in others if pair != (0.0, 0.0))
    width = 2.0 * (math.fsum(eps * count for (eps, _), count in groups.items())
                   + mu * mu / 2.0 + 16.0 * mu) / interval
    n_compositions = len(groups) + (mu > 0.0)
    size = 2.0 * (width + 2 * n_compositions + 2)
    u = 2.0**-53
    per_point = (8.0 * math.log2(size) + 1.0) * u * math.sqrt(size)
    allowance = math.fsum(
        [(count + 1) * per_point + _PLD_TAIL_MASS for count in groups.values() if count > 1]
        + [3.0 * per_point + _PLD_TAIL_MASS] * n_compositions)
    return delta - 2.0 * (allowance + size * u)


def _pld_composition(mu, others, delta, interval):
    """Epsilon of the ledger by dp-accounting's PLD accountant (see ``compose``)."""
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    plds = []
    if mu > 0.0:
        plds.append(
            pld_lib.from_gaussian_mechanism(
                standard_deviation=1.0 / mu,
                sensitivity=1.0,
                pessimistic_estimate=True,
                value_discretization_interval=interval,
            )
        )
    for (eps, eps_delta), count in Counter(others).items():
        if eps == 0.0 and eps_delta == 0.0:
            continue
        pld = pld_lib.from_privacy_parameters(
            common.DifferentialPrivacyParameters(eps, eps_delta),
            value_discretization_interval=interval,
        )
        plds.append(pld.self_compose(count) if count > 1 else pld)
    if not plds:
        return 0.0
    total = plds[0]
    for pld in plds[1:]:
        total = total.compose(pld)
    return float(total.get_epsilon_for_delta(delta))
