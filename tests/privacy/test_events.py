"""Tests of privacy events and their composition (SPEC section 7)."""

import dataclasses
import math
import pickle
import sys
import warnings

import dp_accounting
import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import common, privacy_loss_distribution
from dp_accounting.rdp import rdp_privacy_accountant

from dp_glm_sklearn.privacy import (
    ApproxDPEvent,
    GaussianEvent,
    PureDPEvent,
    RandomStoppingEvent,
    compose,
    gdp_epsilon,
    total_mu,
)
from dp_glm_sklearn.privacy import events as events_module
from dp_glm_sklearn.privacy.selection import random_stopping_epsilon

DELTA = 1e-6


@pytest.fixture(autouse=True)
def _fresh_compose_cache():
    # compose caches its answers; tests that swap dp-accounting out need a clean cache.
    events_module._compose_summary.cache_clear()
    yield
    events_module._compose_summary.cache_clear()


def _basic(events, delta):
    return events_module._basic_composition(*events_module._summarize(events)[:2], delta)


def _pld(events, delta, interval=1e-4):
    return events_module._pld_composition(*events_module._summarize(events)[:2], delta, interval)


def test_events_are_frozen_hashable_picklable():
    event = GaussianEvent(0.5, label="noisy_gd")
    assert event == GaussianEvent(mu=0.5, label="noisy_gd")
    assert hash(event) == hash(GaussianEvent(0.5, "noisy_gd"))
    assert len({PureDPEvent(1.0), PureDPEvent(1.0), PureDPEvent(2.0)}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.mu = 1.0
    for original in (event, PureDPEvent(0.1, "select"), ApproxDPEvent(1.0, 1e-8),
                     RandomStoppingEvent(0.4, 10, "geometric", "search")):
        assert pickle.loads(pickle.dumps(original)) == original
    assert repr(RandomStoppingEvent(0.4, 10)) == (
        "RandomStoppingEvent(mu=0.4, mean=10.0, stopping='logarithmic', label='')")
    assert hash(RandomStoppingEvent(0.4, 10)) == hash(RandomStoppingEvent(0.4, 10.0))
    assert repr(ApproxDPEvent(0.5, 1e-8)) == "ApproxDPEvent(epsilon=0.5, delta=1e-08, label='')"
    assert isinstance(GaussianEvent(np.float32(2)).mu, float)


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: GaussianEvent(-0.1), "mu"),
        (lambda: GaussianEvent(float("nan")), "mu"),
        (lambda: PureDPEvent(-1.0), "epsilon"),
        (lambda: ApproxDPEvent(-1.0, 1e-6), "epsilon"),
        (lambda: ApproxDPEvent(1.0, 1.5), "delta"),
        (lambda: ApproxDPEvent(1.0, -1e-9), "delta"),
        (lambda: RandomStoppingEvent(-0.1, 10), "mu"),
        (lambda: RandomStoppingEvent(0.5, 1.0), "mean"),
        (lambda: RandomStoppingEvent(0.5, math.inf), "mean"),
        (lambda: RandomStoppingEvent(0.5, 10, "poisson"), "stopping"),
        (lambda: RandomStoppingEvent(0.5, 10, None), "stopping"),
    ],
)
def test_events_validate_their_numbers(make, name):
    with pytest.raises(ValueError, match=name):
        make()


def test_label_must_be_a_string():
    with pytest.raises(TypeError, match="label"):
        GaussianEvent(1.0, label=3)


def test_infinite_values_are_allowed_and_compose_to_inf():
    assert GaussianEvent(math.inf).mu == math.inf
    assert compose([GaussianEvent(0.1), GaussianEvent(math.inf)], DELTA) == math.inf
    assert compose([GaussianEvent(0.1), PureDPEvent(math.inf)], DELTA) == math.inf
    assert compose([ApproxDPEvent(math.inf, 0.0)], DELTA) == math.inf
    assert compose([GaussianEvent(0.1), RandomStoppingEvent(math.inf, 5)], DELTA) == math.inf


def test_empty_ledger_costs_nothing():
    assert compose([], DELTA) == 0.0
    assert total_mu([]) == 0.0


def test_compose_rejects_bad_input():
    with pytest.raises(TypeError, match="GaussianEvent"):
        compose([GaussianEvent(1.0), 0.5], DELTA)
    with pytest.raises(ValueError, match="delta"):
        compose([GaussianEvent(1.0)], 1.5)


def test_total_mu():
    assert total_mu([GaussianEvent(0.3), GaussianEvent(0.4)]) == pytest.approx(0.5, rel=1e-15)
    assert total_mu(GaussianEvent(0.3)) == 0.3
    assert total_mu([GaussianEvent(0.3), PureDPEvent(0.1)]) is None
    assert total_mu([GaussianEvent(0.3), RandomStoppingEvent(0.1, 5)]) is None


def test_ten_gaussian_events_compose_exactly():
    mus = np.linspace(0.05, 0.5, 10)
    ledger = [GaussianEvent(mu) for mu in mus]
    mu_total = math.sqrt(np.sum(mus**2))
    epsilon = compose(ledger, DELTA)
    assert epsilon == gdp_epsilon(mu_total, DELTA)
    # Exact GDP against dp-accounting's analytic Gaussian accounting, to 1e-6.
    expected = dp_accounting.get_epsilon_gaussian(1.0 / mu_total, DELTA, tol=1e-14)
    assert epsilon == pytest.approx(expected, rel=1e-6)
    # dp-accounting's PLD accountant composes the ten releases one by one on a
    # grid of step 1e-4 with pessimistic rounding: 1e-6 is out of its reach,
    # so it is compared to its discretization, and it never comes out below.
    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    accountant.compose(
        dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(1.0 / mu) for mu in mus])
    )
    pld_epsilon = accountant.get_epsilon(DELTA)
    assert epsilon <= pld_epsilon + 1e-12
    assert pld_epsilon == pytest.approx(epsilon, rel=1e-3)


def test_composition_ignores_order_and_labels():
    ledger = [GaussianEvent(0.5, "a"), PureDPEvent(0.2, "b"), GaussianEvent(0.3), PureDPEvent(0.1)]
    shuffled = [PureDPEvent(0.1, "x"), GaussianEvent(0.3), PureDPEvent(0.2), GaussianEvent(0.5)]
    assert compose(ledger, DELTA) == compose(shuffled, DELTA)


def _independent_pld_epsilon(ledger, delta):
    """Compose the ledger one event at a time with dp-accounting, building pure
    events as binary randomized response (their worst case)."""
    total = privacy_loss_distribution.identity(value_discretization_interval=1e-4)
    for event in ledger:
        if isinstance(event, GaussianEvent):
            pld = privacy_loss_distribution.from_gaussian_mechanism(
                standard_deviation=1.0 / event.mu, value_discretization_interval=1e-4
            )
        elif isinstance(event, PureDPEvent):
            pld = privacy_loss_distribution.from_randomized_response(
                noise_parameter=2.0 / (1.0 + math.exp(event.epsilon)),
                num_buckets=2,
                value_discretization_interval=1e-4,
            )
        else:
            pld = privacy_loss_distribution.from_privacy_parameters(
                common.DifferentialPrivacyParameters(event.epsilon, event.delta),
                value_discretization_interval=1e-4,
            )
        total = total.compose(pld)
    return total.get_epsilon_for_delta(delta)


MIXED_LEDGER = [
    GaussianEvent(0.4, "noisy_gd"),
    PureDPEvent(0.3, "select"),
    GaussianEvent(0.6, "noisy_gd"),
    PureDPEvent(0.3, "select"),
    ApproxDPEvent(0.2, 1e-8, "other"),
]


def test_mixed_ledger_matches_an_independent_pld():
    epsilon = compose(MIXED_LEDGER, DELTA)
    expected = _independent_pld_epsilon(MIXED_LEDGER, DELTA)
    assert epsilon == pytest.approx(expected, rel=1e-3)
    # And the PLD is worth it: clearly better than basic composition.
    assert epsilon < 0.97 * _basic(MIXED_LEDGER, DELTA)


def test_pure_ledger_is_never_worse_than_the_sum():
    ledger = [PureDPEvent(0.1)] * 30
    epsilon = compose(ledger, DELTA)
    assert epsilon <= 3.0
    # Each of the 30 pessimistic roundings may add up to one grid step (1e-4).
    assert epsilon == pytest.approx(_independent_pld_epsilon(ledger, DELTA), abs=30 * 1e-4)
    # A single pure event: the PLD grid would round up, the sum is exact.
    assert compose([PureDPEvent(0.123456789)], 0.0) == 0.123456789


def _log_optimal_delta(k, eps0, epsilon):
    """log of the exact delta(epsilon) of k eps0-DP releases composed adaptively
    (Kairouz, Oh and Viswanath 2015, Theorem 3.3, homogeneous case), from
    closed forms: a sum of positive terms, each to ~1e-13 relative."""
    log_norm = k * math.log1p(math.exp(eps0))
    logs = [math.lgamma(k + 1) - math.lgamma(i + 1) - math.lgamma(k - i + 1)
            + (k - i) * eps0 - log_norm + math.log(-math.expm1(epsilon - (k - 2 * i) * eps0))
            for i in range(k + 1) if (k - 2 * i) * eps0 > epsilon]
    if not logs:
        return -math.inf  # epsilon >= k eps0: delta 0
    top = max(logs)
    return top + math.log(math.fsum(math.exp(v - top) for v in logs))


@pytest.mark.parametrize("epsilon", [701.0, 1e9, 1e200])
def test_huge_epsilons_compose_without_warning(epsilon):
    """Epsilons at which nothing is private overflowed the PLD (exp(eps), its grid
    step) or the RDP bound (eps**2): a RuntimeWarning, which under
    warnings-as-errors raised after the charge was recorded.  Basic composition
    prices them, silently."""
    import warnings

    from dp_glm_sklearn.privacy import PrivacyAccountant

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for ledger in ([PureDPEvent(epsilon), GaussianEvent(1.0)],
                       [PureDPEvent(epsilon), ApproxDPEvent(0.1, 1e-7)]):
            assert compose(ledger, DELTA) == _basic(ledger, DELTA)
        stopping = compose([RandomStoppingEvent(0.5, 10.0), PureDPEvent(epsilon)], DELTA)
        assert epsilon <= stopping < 1.01 * epsilon + 10
        acc = PrivacyAccountant(epsilon=math.inf, delta=DELTA)
        assert acc.spend(PureDPEvent(epsilon))[0] == epsilon
        assert acc.spend(GaussianEvent(1.0))[0] == pytest.approx(epsilon + gdp_epsilon(1.0, DELTA))
    assert len(acc.history) == 2


@pytest.mark.parametrize("k,eps0,delta", [(1000, 0.01, 1e-6), (1000, 0.01, 1e-10),
                                          (1000, 0.01, 1e-12), (2000, 0.05, 1e-12),
                                          (2000, 0.05, 1e-6), (10, 0.5, 1e-14)])
def test_pure_ledger_is_never_below_the_optimal_composition(k, eps0, delta):
    """The epsilon reported for k pure eps0-DP events is one at which the exact
    optimal composition's delta is at most the asked delta.  The PLD's FFTs
    move mass by ~1e-14: asked for it at delta itself, it reported 2.3079 for
    1000 x 0.01 at 1e-12 (true delta 1.007e-12) and 17.706 for 2000 x 0.05
    (true delta 1.05e-12)."""
    epsilon = compose([PureDPEvent(eps0)] * k, delta)
    assert _log_optimal_delta(k, eps0, epsilon) <= math.log(delta) + 1e-9
    # and not far above the optimal epsilon (found by bisection on the exact
    # delta): within 0.5% where the PLD is used, 4-5% where its FFT allowance
    # leaves too little delta and the RDP bound is the smallest.
    low, high = 0.0, k * eps0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (low, mid) if _log_optimal_delta(k, eps0, mid) <= math.log(delta) \
            else (mid, high)
    assert epsilon <= (1.005 if delta >= 1e-6 else 1.06) * high + 1e-3


@pytest.mark.parametrize(
    "ledger",
    [
        MIXED_LEDGER,
        [GaussianEvent(1.0), PureDPEvent(0.5)],
        [GaussianEvent(0.2)] * 5 + [ApproxDPEvent(1.0, 1e-7)],
        [PureDPEvent(0.5)] * 10,
        [GaussianEvent(2.0), PureDPEvent(2.0), ApproxDPEvent(0.1, 5e-7)],
    ],
)
def test_fallback_is_conservative(ledger):
    basic = _basic(ledger, DELTA)
    assert basic >= _pld(ledger, DELTA)
    assert compose(ledger, DELTA) <= basic


def test_fallback_needs_delta_left_for_the_gaussian_part():
    mu = 0.5
    ledger = [GaussianEvent(mu), PureDPEvent(0.3), ApproxDPEvent(0.2, 4e-7)]
    assert _basic(ledger, DELTA) == pytest.approx(0.5 + gdp_epsilon(mu, 6e-7), rel=1e-12)
    assert _basic([GaussianEvent(mu), ApproxDPEvent(0.2, DELTA)], DELTA) == math.inf
    assert _basic([ApproxDPEvent(0.2, DELTA)], DELTA) == 0.2


def test_fallback_is_used_without_dp_accounting(monkeypatch):
    monkeypatch.setitem(sys.modules, "dp_accounting.pld", None)
    assert compose(MIXED_LEDGER, DELTA) == _basic(MIXED_LEDGER, DELTA)


def test_fallback_is_used_and_reported_when_dp_accounting_fails(monkeypatch):
    def broken(*args):
        raise MemoryError("grid too large")

    monkeypatch.setattr(events_module, "_pld_composition", broken)
    with pytest.warns(RuntimeWarning, match="basic composition"):
        epsilon = compose(MIXED_LEDGER, DELTA)
    assert epsilon == _basic(MIXED_LEDGER, DELTA)


# -- random stopping -------------------------------------------------------------------
def _rdp_accountant(ledger):
    """dp-accounting's RDP accountant fed the Gaussian and random-stopping
    events of the ledger one at a time."""
    accountant = rdp_privacy_accountant.RdpAccountant()
    shapes = {"logarithmic": 0.0, "geometric": 1.0}
    for event in ledger:
        if isinstance(event, GaussianEvent):
            accountant.compose(dp_accounting.GaussianDpEvent(1.0 / event.mu))
        elif isinstance(event, RandomStoppingEvent):
            accountant.compose(dp_event.RepeatAndSelectDpEvent(
                dp_accounting.GaussianDpEvent(1.0 / event.mu), event.mean,
                shapes[event.stopping]))
    return accountant


def _independent_random_stopping_epsilon(ledger, delta):
    """The bounds documented in ``compose``, recomputed event by event."""
    pairs = [e for e in ledger if isinstance(e, PureDPEvent | ApproxDPEvent)]
    stops = [e for e in ledger if isinstance(e, RandomStoppingEvent)]
    # 1. One RDP composition; an eps-indistinguishable pair has Renyi
    #    divergence at most min(eps, a eps^2 / 2).
    accountant = _rdp_accountant(ledger)
    orders, rdp = accountant.orders, accountant.rdp
    for event in pairs:
        rdp = rdp + np.minimum(event.epsilon, orders * event.epsilon**2 / 2)
    delta_rdp = delta - sum(getattr(e, "delta", 0.0) for e in pairs)
    bounds = [rdp_privacy_accountant.compute_epsilon(orders, rdp, delta_rdp)[0]]
    # 2. Random stopping as (epsilon, share * delta / m) pairs, then the PLD.
    rest = [e for e in ledger if not isinstance(e, RandomStoppingEvent)]
    for share in (0.1, 0.5):
        run_delta = share * delta / len(stops)
        converted = [ApproxDPEvent(_rdp_accountant([e]).get_epsilon(run_delta), run_delta)
                     for e in stops]
        bounds.append(_independent_pld_epsilon(rest + converted, delta))
    return min(bounds)


def test_random_stopping_alone_reproduces_random_stopping_epsilon():
    for mu, mean, stopping, delta in [(0.4142, 10.0, "logarithmic", 1e-5),
                                      (0.3, 4.0, "geometric", 1e-6),
                                      (1.2, 2.5, "logarithmic", 1e-3)]:
        event = RandomStoppingEvent(mu, mean, stopping)
        assert compose([event], delta) == pytest.approx(
            random_stopping_epsilon(mu, mean, delta, stopping), rel=1e-12)
    # Runs that reveal nothing: the search reveals nothing.
    assert compose([RandomStoppingEvent(0.0, 10)], DELTA) == 0.0
    assert compose([RandomStoppingEvent(0.0, 10), GaussianEvent(0.5)], DELTA) == (
        gdp_epsilon(0.5, DELTA))


def test_random_stopping_is_priced_below_its_own_delta():
    """The defect: an ApproxDPEvent at the search's delta cannot be priced at
    a smaller one; the random-stopping event can, by its RDP curve."""
    mu, mean = 0.4142, 10.0
    own = random_stopping_epsilon(mu, mean, 1e-5)
    assert compose([ApproxDPEvent(own, 1e-5)], DELTA) == math.inf
    smaller = compose([RandomStoppingEvent(mu, mean)], DELTA)
    assert own < smaller < math.inf
    assert smaller == pytest.approx(_rdp_accountant([RandomStoppingEvent(mu, mean)])
                                    .get_epsilon(DELTA), rel=1e-12)


MIXED_STOPPING_LEDGER = [
    GaussianEvent(0.4, "noisy_gd"),
    RandomStoppingEvent(0.3, 10.0, "logarithmic", "search"),
    PureDPEvent(0.3, "select"),
    ApproxDPEvent(0.2, 1e-8, "other"),
    GaussianEvent(0.6, "noisy_gd"),
    RandomStoppingEvent(0.2, 4.0, "geometric", "search"),
]


@pytest.mark.parametrize("ledger", [
    MIXED_STOPPING_LEDGER,
    [RandomStoppingEvent(0.4, 10.0), GaussianEvent(0.5)],
    # A large Gaussian part: a split bound, not the RDP one, is the smallest.
    [RandomStoppingEvent(0.05, 3.0), GaussianEvent(3.0)],
    # Two searches: the split bound gives each its share of delta over 2.
    [RandomStoppingEvent(0.05, 3.0), RandomStoppingEvent(0.05, 3.0, "geometric"),
     GaussianEvent(3.0)],
    [RandomStoppingEvent(0.5, 10.0), PureDPEvent(1.0), ApproxDPEvent(0.5, 1e-7)],
])
def test_mixed_ledger_with_random_stopping_matches_an_independent_computation(ledger):
    epsilon = compose(ledger, DELTA)
    assert math.isfinite(epsilon)
    assert epsilon == pytest.approx(_independent_random_stopping_epsilon(ledger, DELTA),
                                    rel=1e-3)
    for event in ledger:
        assert epsilon >= compose([event], DELTA)
    for i in range(len(ledger)):
        assert epsilon >= compose(ledger[:i] + ledger[i + 1:], DELTA)


def test_random_stopping_bounds_are_each_valid_and_the_smallest_is_kept():
    ledger = MIXED_STOPPING_LEDGER
    mu, others, runs = events_module._summarize(ledger)
    rdp = events_module._rdp_bound(mu, others, runs, DELTA)
    # The RDP bound by hand: the two Gaussian events enter as one of GDP total mu.
    accountant = _rdp_accountant(ledger)
    orders, curve = accountant.orders, accountant.rdp
    curve = curve + np.minimum(0.3, orders * 0.3**2 / 2) + np.minimum(0.2, orders * 0.2**2 / 2)
    assert rdp == pytest.approx(
        rdp_privacy_accountant.compute_epsilon(orders, curve, DELTA - 1e-8)[0], rel=1e-9)
    assert compose(ledger, DELTA) <= rdp
    # With a large Gaussian part, a split bound (the Gaussian part priced by
    # the PLD at 0.9 delta) beats the one RDP composition.
    ledger = [RandomStoppingEvent(0.05, 3.0), GaussianEvent(3.0)]
    mu, others, runs = events_module._summarize(ledger)
    assert compose(ledger, DELTA) < 0.97 * events_module._rdp_bound(mu, others, runs, DELTA)
    # An approximate event whose delta uses up the target leaves nothing for RDP.
    assert events_module._rdp_bound(0.5, ((0.2, DELTA),), runs, DELTA) == math.inf


def test_random_stopping_composition_is_monotone_in_delta():
    deltas = np.logspace(-7, -2, 6)
    for ledger in ([RandomStoppingEvent(0.4, 10.0)], MIXED_STOPPING_LEDGER,
                   [RandomStoppingEvent(0.05, 3.0), GaussianEvent(3.0)]):
        epsilons = [compose(ledger, float(delta)) for delta in deltas]
        assert all(math.isfinite(e) for e in epsilons)
        assert all(a >= b for a, b in zip(epsilons[:-1], epsilons[1:], strict=True))
        assert epsilons[0] > epsilons[-1]
    assert compose(MIXED_STOPPING_LEDGER, 0.0) == math.inf


def test_random_stopping_composition_ignores_order_and_labels():
    shuffled = [RandomStoppingEvent(0.2, 4.0, "geometric")] + MIXED_STOPPING_LEDGER[:5][::-1]
    assert compose(shuffled, DELTA) == compose(MIXED_STOPPING_LEDGER, DELTA)
    # The law of the number of runs matters: the geometric one costs more.
    assert compose([RandomStoppingEvent(0.4, 10.0, "geometric")], DELTA) > compose(
        [RandomStoppingEvent(0.4, 10.0, "logarithmic")], DELTA)


def test_random_stopping_without_dp_accounting_costs_inf(monkeypatch):
    monkeypatch.setitem(sys.modules, "dp_accounting.rdp", None)
    monkeypatch.setitem(sys.modules, "dp_accounting.pld", None)
    assert compose([RandomStoppingEvent(0.4, 10.0)], DELTA) == math.inf
    assert compose([RandomStoppingEvent(0.4, 10.0), GaussianEvent(0.1)], DELTA) == math.inf
    # Ledgers without random stopping keep their fallback.
    assert compose(MIXED_LEDGER, DELTA) == _basic(MIXED_LEDGER, DELTA)


@pytest.mark.parametrize("mu", [1e-155, 1e-200, 5e-324])
def test_random_stopping_of_runs_below_the_overflow_is_priced_at_the_floor(mu):
    """dp-accounting squares 1 / mu: below about 1e-154 it overflowed, and a
    search of runs revealing next to nothing cost inf (with a warning, which
    under warnings-as-errors raised after the accountant had recorded it)."""
    floor = compose([RandomStoppingEvent(1e-150, 10.0)], DELTA)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cost = compose([RandomStoppingEvent(mu, 10.0)], DELTA)
    assert cost == floor
    assert 0.0 < cost < compose([RandomStoppingEvent(1e-3, 10.0)], DELTA)


def test_random_stopping_failure_is_reported_and_never_undercounts(monkeypatch):
    def broken(*args):
        raise MemoryError("orders")

    monkeypatch.setattr(events_module, "_rdp_epsilon", broken)
    with pytest.warns(RuntimeWarning, match="RDP accountant failed"):
        assert compose([RandomStoppingEvent(0.4, 10.0)], DELTA) == math.inf


def test_identical_random_stopping_runs_are_converted_once(monkeypatch):
    """A long ledger of the same search (the QA case: 200 charges) converted
    one run per search, so each charge of a finite budget took longer than
    the last; identical runs share one conversion, and the price is unchanged."""
    ledger = [RandomStoppingEvent(0.05, 10.0, label="search")] * 60 + [GaussianEvent(0.1)]
    reference = compose(ledger, DELTA)
    events_module._compose_summary.cache_clear()
    calls = []
    original = events_module._rdp_epsilon

    def counting(*args):
        calls.append(args)
        return original(*args)

    monkeypatch.setattr(events_module, "_rdp_epsilon", counting)
    assert compose(ledger, DELTA) == reference
    # the RDP bound, then per split share one conversion and the RDP bound of
    # the split ledger (one of the three bounds of a ledger without stopping)
    assert len(calls) == 1 + 2 * len(events_module._STOPPING_DELTA_SHARES)


def test_identical_random_stopping_events_each_count():
    """Two identical searches (the same search fitted twice, or under
    cross_val_score) compose as two: a ledger that grouped equal runs had to
    multiply each curve by its count (a mutant adding it once reported
    epsilon 1.0 for two (1, 1e-5) searches; mutation review)."""
    from dp_glm_sklearn import BudgetExceededError, PrivacyAccountant
    from dp_glm_sklearn.privacy.selection import random_stopping_mu

    mu = random_stopping_mu(1.0, 1e-5, 5.0)
    event = RandomStoppingEvent(mu, 5.0)
    twin = RandomStoppingEvent(mu * (1 - 1e-12), 5.0)  # not grouped with event
    both = compose([event, event], 1e-5)
    assert both == pytest.approx(compose([event, twin], 1e-5), rel=1e-6)
    assert both > 1.5
    accountant = PrivacyAccountant(epsilon=1.5, delta=1e-5)
    accountant.spend([event])
    with pytest.raises(BudgetExceededError):
        accountant.spend([event])


def test_basic_composition_rounds_up():
    # math.fsum rounds to nearest: epsilons 1.0 and 0.2 summed to
    # 1.19999999999999996, below their exact sum; and the delta left for the
    # rest was rounded to nearest too.  Exact sums by fractions.
    from fractions import Fraction

    total = compose([PureDPEvent(1.0), PureDPEvent(0.2)], 0.0)
    assert Fraction(total) >= Fraction(1.0) + Fraction(0.2)
    assert total == math.nextafter(1.2, math.inf)
    assert compose([PureDPEvent(1.0), PureDPEvent(0.5)], 0.0) == 1.5  # exact: unchanged
    left = events_module._sum_rounded([1e-9, -3e-10], -math.inf)
    assert Fraction(left) <= Fraction(1e-9) - Fraction(3e-10)
    assert events_module._sum_rounded([1.0, 2.0**-60], math.inf) == math.nextafter(1.0, 2.0)
    assert events_module._sum_rounded([1.0, 2.0**-60], -math.inf) == 1.0
    # An intermediate sum beyond the floats (math.fsum raises OverflowError):
    # a bound in the direction asked; compose of such a ledger is inf, and
    # an accountant holding it stays readable (it raised on every spent()).
    assert events_module._sum_rounded([1e308, 1e308, -1e308], math.inf) == math.inf
    assert events_module._sum_rounded([1e308, 1e308, -1e308], -math.inf) == -math.inf
    assert compose([PureDPEvent(1.79e308), GaussianEvent(4.5e153)], 1e-5) == math.inf
    assert compose([PureDPEvent(1e308)] * 2, 1e-5) == math.inf
