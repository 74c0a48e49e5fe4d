"""Privacy events: what one release costs, and what a ledger of them costs.

Every release of the library is described by one of three events (SPEC
section 7):

- :class:`GaussianEvent` -- a mu-GDP release (the Gaussian mechanism, or an
  exact composition of Gaussian mechanisms);
- :class:`PureDPEvent` -- an epsilon-DP release (exponential mechanism,
  report-noisy-max);
- :class:`ApproxDPEvent` -- an (epsilon, delta)-DP release known only through
  these two numbers.

:func:`compose` turns a ledger (a sequence of events, composed adaptively)
into one epsilon at a given delta.
"""

import math
import warnings
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from .calibration import _check_real, gdp_epsilon

__all__ = [
    "ApproxDPEvent",
    "GaussianEvent",
    "PureDPEvent",
    "compose",
    "total_mu",
]

# Step of the privacy-loss grid of the PLD accountant, and its floor relative
# to the size of the answer (see ``compose``).
_PLD_DISCRETIZATION = 1e-4
_PLD_RELATIVE_DISCRETIZATION = 1e-5


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


PrivacyEvent = GaussianEvent | PureDPEvent | ApproxDPEvent


def _as_event_tuple(events):
    """Return ``events`` (one event or an iterable of them) as a tuple."""
    if isinstance(events, PrivacyEvent):
        return (events,)
    try:
        events = tuple(events)
    except TypeError:
        events = (events,)
    for event in events:
        if not isinstance(event, PrivacyEvent):
            raise TypeError(
                "events must be GaussianEvent, PureDPEvent or ApproxDPEvent "
                f"instances, got {event!r}."
            )
    return events


def _summarize(events):
    """Split a ledger into the GDP total of its Gaussian events and the
    sorted (epsilon, delta) pairs of the others (their order does not matter
    in a composition)."""
    mu = math.sqrt(sum(e.mu**2 for e in events if isinstance(e, GaussianEvent)))
    others = sorted(
        (e.epsilon, getattr(e, "delta", 0.0)) for e in events if not isinstance(e, GaussianEvent)
    )
    return mu, tuple(others)


def total_mu(events):
    """GDP parameter of the composition of Gaussian events.

    Parameters
    ----------
    events : iterable of GaussianEvent
        The ledger.

    Returns
    -------
    mu : float or None
        ``sqrt(sum mu_i^2)`` (exact; 0 for an empty ledger), or None when the
        ledger holds an event that is not a :class:`GaussianEvent`.
    """
    events = _as_event_tuple(events)
    if not all(isinstance(e, GaussianEvent) for e in events):
        return None
    return _summarize(events)[0]


def compose(events, delta):
    """Epsilon of the adaptive composition of ``events`` at a given delta.

    - Only Gaussian events: exact, the composition is
      ``sqrt(sum mu_i^2)``-GDP, converted with
      :func:`~dp_glm_sklearn.privacy.gdp_epsilon`.
    - Otherwise: the smaller of two valid bounds, the privacy loss
      distribution (PLD) accountant of Google's ``dp-accounting`` and basic
      composition.

    The PLD accountant composes one Gaussian PLD (``standard_deviation =
    1/mu``, sensitivity 1, for the GDP total ``mu`` of the Gaussian events)
    with the worst-case PLD of each (epsilon, delta) pair
    (``from_privacy_parameters``).  Privacy losses are rounded up
    (``pessimistic_estimate=True``) to a grid of step ``1e-4``, or ``1e-5``
    times the basic-composition epsilon when that is larger, so that large
    totals do not need grids of millions of points; each rounding errs on the
    side of privacy.

    Basic composition is the fallback, used alone when ``dp-accounting`` is
    not installed or fails (with a RuntimeWarning in the latter case): the
    pure and approximate events add up to ``(sum eps_i, sum delta_i)``,
    which must leave part of ``delta`` for the Gaussian events, whose GDP
    total is converted at the ``delta - sum delta_i`` that remains; the
    result is ``inf`` when nothing remains.

    Parameters
    ----------
    events : iterable of events
        The ledger: :class:`GaussianEvent`, :class:`PureDPEvent` and
        :class:`ApproxDPEvent` instances, in any order.
    delta : float
        Target delta of the whole ledger, in ``[0, 1]``.

    Returns
    -------
    epsilon : float
        The ledger is (epsilon, delta)-DP.  0 for an empty ledger, ``inf`` if
        an event has an infinite mu or epsilon.

    Examples
    --------
    >>> from dp_glm_sklearn.privacy import GaussianEvent, compose
    >>> round(compose([GaussianEvent(0.6), GaussianEvent(0.8)], 1e-5), 4)
    4.3772
    """
    events = _as_event_tuple(events)
    delta = _check_real("delta", delta, high=1.0)
    mu, others = _summarize(events)
    return _compose_summary(mu, others, delta)


@lru_cache(maxsize=256)
def _compose_summary(mu, others, delta):
    # Cached: an accountant's check and spend, then the estimator's record,
    # ask for the same ledger in a row, and the PLD can take a fraction of a
    # second.
    if mu == math.inf or any(eps == math.inf for eps, _ in others):
        return math.inf
    if not others:
        return gdp_epsilon(mu, delta)
    basic = _basic_composition(mu, others, delta)
    scale = sum(eps for eps, _ in others) + gdp_epsilon(mu, delta)
    if scale == math.inf:  # delta = 0 with Gaussian events: basic is inf
        return basic
    interval = max(_PLD_DISCRETIZATION, _PLD_RELATIVE_DISCRETIZATION * scale)
    try:
        pld = _pld_composition(mu, others, delta, interval)
    except ImportError:
        return basic
    except Exception as exc:  # any failure: fall back to a valid bound
        warnings.warn(
            f"dp-accounting's PLD accountant failed ({exc!r}); using basic "
            "composition, a valid but looser bound.",
            RuntimeWarning,
            stacklevel=3,
        )
        return basic
    return min(basic, pld)


def _basic_composition(mu, others, delta):
    """Basic composition: a valid bound that needs no PLD.

    ``others`` are (epsilon, delta) pairs; their epsilons and deltas add up,
    and the Gaussian part (GDP total ``mu``) is charged at what remains of
    ``delta``.
    """
    eps_sum = sum(eps for eps, _ in others)
    delta_sum = sum(d for _, d in others)
    if mu == 0.0:
        return eps_sum if delta_sum <= delta else math.inf
    remaining = delta - delta_sum
    if remaining <= 0.0:
        return math.inf
    return eps_sum + gdp_epsilon(mu, remaining)


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
