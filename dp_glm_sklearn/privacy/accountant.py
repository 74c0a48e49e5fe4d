"""A privacy budget shared by every release of an analysis (SPEC section 7).

A :class:`PrivacyAccountant` holds a budget (epsilon, delta) and a ledger of
the releases charged to it.  Estimators check the budget before they touch
the data and record their events when they release something; the total is
always recomputed from the whole ledger by :func:`~.events.compose`, so
Gaussian releases compose exactly.
"""

import math
import os
import sys
import threading
import uuid
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from numbers import Integral, Real

import numpy as np

from .calibration import _check_real, gdp_mu
from .events import (
    ApproxDPEvent,
    GaussianEvent,
    RandomStoppingEvent,
    _as_event_tuple,
    _compose_summary,
    _quick_bound,
    _RunningSummary,
    _sum_rounded,
    compose,
)

__all__ = [
    "BudgetExceededError",
    "PrivacyAccountant",
    "PrivacyLeakWarning",
    "SpendRecord",
    "default_accountant",
    "get_default_accountant",
]

# Relative slack on the budget, so that a ledger spending exactly the budget
# (up to the rounding of the epsilon -> mu -> epsilon round trip, about 1e-15
# relative) is accepted.  Kept at float-rounding size: a slack of 1e-9 let a
# second fit of epsilon 3e-9 through once a budget of 3 was spent.
_BUDGET_RTOL = 1e-12


class BudgetExceededError(RuntimeError):
    """A release would make the privacy spent exceed the accountant's budget.

    Raised before anything is released or recorded.
    """


class PrivacyLeakWarning(UserWarning):
    """Something weakens the privacy guarantee the user asked for.

    For example, a public bound that was computed from the data.
    """


@dataclass(frozen=True)
class SpendRecord:
    """One charge of a :class:`PrivacyAccountant`.

    Attributes
    ----------
    events : tuple of events
        What the release cost.
    source : str or None
        Who released it (e.g. ``"DPLogisticRegression.fit"``).
    timestamp : datetime.datetime or None
        When it was recorded (local time, timezone-aware); None in a copy
        restored from a pickle.  Pickles leave the times out: the gaps
        between charges are running times, which depend on the data (the
        random search's secret number of candidates, an output-perturbation
        solver's passes), and a pickled model, which carries its accountant,
        is what gets published.
    total_epsilon : float
        Epsilon of the whole ledger after this charge, at the accountant's
        delta, a valid guarantee: the full composition (:func:`compose`) if
        it was computed when the charge was made or while it was the last
        one, otherwise a cheaper bound, never below ``compose`` (Renyi DP or
        a split bound with basic composition with random stopping, basic
        composition with pure or approximate events), which can be looser;
        in either case lowered to the total of
        any later record (the first releases of a ledger are a
        post-processing of all of them), so that the totals of
        :attr:`PrivacyAccountant.history` never decrease.  The last record's
        total, :meth:`PrivacyAccountant.spent`, is always the full
        composition.
    """

    events: tuple
    source: str | None
    timestamp: datetime | None
    total_epsilon: float


# Accountants alive in this process, by uid, so that unpickling a copy in the
# process of its original gives back the original.
_REGISTRY = weakref.WeakValueDictionary()
_REGISTRY_LOCK = threading.Lock()
# Every accountant alive in this process, copies too (their locks, after a fork).
_LIVE = weakref.WeakSet()

# This process, told apart from any other: the pid alone is not enough (a
# container's main process is pid 1 at every start), so a random token drawn
# at import, and again in a forked child, goes with it.
_PROCESS_TOKEN = uuid.uuid4().hex


def _after_fork_in_child():
    """A new token, and new locks: a lock another thread of the parent held
    at the fork would never be released in the child, where a fit waiting
    for it would hang.  (The child's accountants are read-only copies.)

    The built-in default is the child's own, as in a spawned worker
    (:func:`get_default_accountant`): the parent's copy refused to charge,
    so whether a forked worker's fit with ``accountant=None`` ran depended
    on whether the parent had created its default before the fork."""
    global _PROCESS_TOKEN, _REGISTRY_LOCK, _DEFAULT_LOCK, _builtin_default
    _PROCESS_TOKEN = uuid.uuid4().hex
    _REGISTRY_LOCK = threading.Lock()
    _DEFAULT_LOCK = threading.Lock()
    _builtin_default = None
    for accountant in list(_LIVE):
        accountant._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _this_process():
    return (os.getpid(), _PROCESS_TOKEN)


def _restore_accountant(uid, home, state):
    """Unpickle an accountant; see "Copies and processes" in PrivacyAccountant.

    The original, if it is alive in this process; otherwise a read-only copy.
    Pickles made before processes had a token hold the pid alone: they load
    as read-only copies.
    """
    home = (home, None) if isinstance(home, int) else tuple(home)
    with _REGISTRY_LOCK:
        if home == _this_process():
            original = _REGISTRY.get(uid)
            if original is not None:
                return original
        accountant = PrivacyAccountant.__new__(PrivacyAccountant)
        accountant._epsilon = state["epsilon"]
        accountant._delta = state["delta"]
        accountant._records = list(state["records"])
        accountant._summary = _RunningSummary().add(accountant._all_events())
        accountant._seed_uses = {}
        accountant._uncharged_streams = {}
        accountant._lock = threading.Lock()
        _LIVE.add(accountant)
        accountant._uid = uid
        accountant._home = home
        accountant._copy = True
        return accountant


def _check_source(source):
    """Raise unless ``source`` is a str or None; called before the lock is taken:
    the message shows ``repr(source)``, which, for an estimator holding the
    accountant (or the accountant itself), reads the accountant under its lock
    (a deadlock when the lock was held)."""
    if source is not None and not isinstance(source, str):
        raise TypeError(f"source must be a str or None, got {source!r}.")


#: The refusal's hint when no other applies: releases compose sub-additively,
#: so cutting a request by the excess does not make it fit (or fits it with
#: room to spare); affordable_epsilon bisects with this very check.
_AFFORDABLE_HINT = (
    " Releases do not add up linearly, so lowering this request's epsilon by that "
    "excess is not the way to fit it: accountant.affordable_epsilon() gives the "
    "largest epsilon of one more fit (n_fits=k for k folds) this budget accepts.")


class PrivacyAccountant:
    """A privacy budget and the ledger of the releases charged to it.

    Every charge is a list of privacy events (see
    :mod:`dp_glm_sklearn.privacy.events`).  The privacy spent is the epsilon of
    the adaptive composition of all the events recorded so far, at the
    accountant's ``delta`` (:func:`~dp_glm_sklearn.privacy.compose`: exact for
    Gaussian releases).  A charge that would make it exceed ``epsilon`` is
    refused with :class:`BudgetExceededError` and nothing is recorded.
    "Exceed" allows a relative 1e-12 for rounding (a fit of exactly the
    remaining budget is accepted; ``spent()`` may then read 3.000000000003
    on a budget of 3): the guarantee of the whole ledger is its ``spent()``.
    :meth:`spend` checks and records under one lock, so threads can share an
    accountant.

    Parameters
    ----------
    epsilon : float, default=np.inf
        Budget: the largest total epsilon allowed, in ``[0, inf]``.
    delta : float, default=1e-5
        The delta at which the total is measured, in ``[0, 1)``.  Use
        ``delta`` well below ``1 / n_samples``.  A fit with ``delta=None``
        is asked for at most at this delta, where it costs exactly its
        epsilon.  ``delta=0`` is accepted for
        a ledger of pure-DP releases only (:class:`~.events.PureDPEvent`, or
        :class:`~.events.ApproxDPEvent` with ``delta=0``, which compose to a
        finite epsilon at delta 0): it admits no Gaussian release, so with a
        finite ``epsilon`` every fit of the DP estimators (a Gaussian
        mechanism, whose epsilon at delta 0 is infinite) is refused.

    Attributes
    ----------
    epsilon : float
        The epsilon budget (read-only).
    delta : float
        The delta of the budget (read-only).
    history : list of SpendRecord
        Every charge, oldest first: its events, who released it, when, and the
        total after it (read-only).
    events : list
        The events of every charge, flattened, oldest first (read-only).
    detached : bool
        True for a copy (in another process, or loaded from a pickle): it can
        be read but refuses to spend (read-only).

    Notes
    -----
    **Copies and processes.**  An accountant stands for one budget, so it
    must never be silently duplicated: if ``sklearn.base.clone`` (which
    deep-copies parameters that are not estimators) made a copy, a
    ``GridSearchCV`` or ``cross_val_score`` would charge copies and the user's
    accountant would record nothing, the bug seen in other DP libraries.
    Hence:

    - ``copy.copy``, ``copy.deepcopy`` and ``clone`` return the accountant
      itself.
    - Pickling and unpickling in the same process, while the original is
      alive, returns the original.
    - Unpickled in another process (e.g. a joblib ``loky`` worker), it is
      *detached*: it can be read (:meth:`spent`, :meth:`report`, ...), but
      :meth:`check` and :meth:`spend` raise a RuntimeError, since a charge
      made there could never reach the original.  Fit with ``n_jobs=1`` or
      a threading backend instead.  The same holds for an accountant that a
      forked child process inherits.  A detached copy sent back to the
      original's process while the original is alive (e.g. inside a fitted
      estimator) becomes the original again.
    - An estimator with ``accountant=None`` pickled inside a
      :func:`default_accountant` block carries that block's accountant (see
      :func:`get_default_accountant`).  Loaded in another process it is
      charged to a default installed there with :func:`default_accountant`,
      if a block is active; otherwise its fits are refused.
    - A saved accountant (pickled, then loaded once its original is gone:
      later in the same process, or in a new process, even one that got
      the same process id) is detached too: its ledger can be read, but it
      cannot spend.  Were it to spend, every load of the same file would
      spend the budget again.  To go on with a saved analysis, create a new
      ``PrivacyAccountant`` with the same budget and charge it the saved
      events, ``new.spend(saved.events, source="saved ledger")``: what
      follows then composes with them exactly (a new accountant for the
      epsilon left over would add the two up, which is looser).  The new
      ledger does not know which integer seeds the saved one used: fit with
      ``random_state=None`` (or seeds not used before), else a fit may draw
      the noise of an earlier one (docs/randomness.md).

    Examples
    --------
    >>> from dp_glm_sklearn.privacy import GaussianEvent, PrivacyAccountant
    >>> acc = PrivacyAccountant(epsilon=3.0, delta=1e-6)
    >>> eps, delta = acc.spend([GaussianEvent(mu=0.3)], source="example")
    >>> round(eps, 4), delta
    (1.2917, 1e-06)
    >>> round(acc.remaining()[0], 4)
    1.7083
    """

    def __init__(self, epsilon=np.inf, delta=1e-5):
        self._epsilon = _check_real("epsilon", epsilon)
        try:
            self._delta = _check_real("delta", delta, high=1.0)
        except ValueError:
            raise ValueError(f"delta must be a number in [0, 1), got {delta!r}.") from None
        if self._delta == 1.0:  # every mechanism is (0, 1)-DP: no budget at all
            raise ValueError("delta must be a number in [0, 1), got 1.0: at delta = 1 every "
                             "release costs epsilon 0, and the budget would refuse nothing.")
        self._records = []
        self._summary = _RunningSummary()  # of the whole ledger, kept up to date
        self._seed_uses = {}  # integer seed -> releases that drew from it (_seed_stream)
        self._uncharged_streams = {}  # thread -> [(seed, stream)] not yet charged
        self._lock = threading.Lock()
        _LIVE.add(self)
        self._uid = uuid.uuid4().hex
        self._home = _this_process()
        self._copy = False
        with _REGISTRY_LOCK:
            _REGISTRY[self._uid] = self

    @property
    def epsilon(self):
        """The epsilon budget."""
        return self._epsilon

    @property
    def delta(self):
        """The delta at which spending is measured."""
        return self._delta

    @property
    def detached(self):
        """True for a copy: in another process than the original, or loaded from a pickle.

        A detached accountant can be read but refuses to spend.
        """
        return self._copy or self._home != _this_process()

    @property
    def history(self):
        """List of the :class:`SpendRecord` of every charge, oldest first."""
        with self._lock:
            self._settle_locked(len(self._records))
            return list(self._records)

    @property
    def events(self):
        """Flat list of all the events recorded, oldest first."""
        with self._lock:
            return self._all_events()

    def _all_events(self):
        return [event for record in self._records for event in record.events]

    def _spent_epsilon(self):
        if not self._records:
            return 0.0
        self._settle_locked(len(self._records), only_last=True)
        return self._records[-1].total_epsilon

    def _settle_locked(self, count, only_last=False):
        """Compute the running totals left pending among the first ``count`` records.

        A charge composes the ledger in full only when it must (see
        ``_check_locked``; with a random-stopping event in it, that takes up to
        a second): an unlimited budget refuses nothing, and a charge that a
        cheap valid bound shows to fit the budget is accepted on that bound.
        Such a record's total is computed once, when first read: in full if
        it is the last record (the ledger's current total), else by the quick
        bound (see :class:`SpendRecord`), so that reading a long mixed ledger
        does not compose each of its prefixes in full.
        """
        pending = [i for i in ([count - 1] if only_last else range(count))
                   if self._records[i].total_epsilon is None]
        # One running summary over the ledger (compose's, of each prefix):
        # O(events), not O(records^2).
        running, j, last = _RunningSummary(), 0, len(self._records) - 1
        for i in pending:
            if i == last:  # the whole ledger, whose summary is kept
                total = _compose_summary(*self._summary.summary(), self._delta)
            else:
                for record in self._records[j: i + 1]:
                    running.add(record.events)
                j = i + 1
                summary = running.summary()
                quick = _quick_bound(*summary, self._delta)
                total = quick[0] if quick is not None else _compose_summary(*summary,
                                                                            self._delta)
            self._records[i] = replace(self._records[i], total_epsilon=total)
        # The first releases of a ledger are a post-processing of all of them:
        # a later record's total bounds an earlier one's too.  Keeping the
        # smaller makes the column never decrease (compose itself can dip by
        # PLD rounding when an event is added), and tighter.
        later = math.inf
        for i in range(count - 1, -1, -1) if not only_last else ():
            total = self._records[i].total_epsilon
            if total is None:
                continue
            if total > later:
                self._records[i] = replace(self._records[i], total_epsilon=later)
            later = min(later, total)

    def _ensure_attached(self):
        if not self.detached:
            return
        if self._home == _this_process():
            raise RuntimeError(
                "this PrivacyAccountant was loaded from a pickle after its original "
                "was gone: a saved ledger is read-only, since every load of the same "
                "file could spend the budget again. To go on, create a new PrivacyAccountant "
                "with the same budget and charge it this one's events: "
                "new.spend(saved.events, source='saved ledger'); attach it to each "
                "estimator or search saved with this one (model.set_params(accountant=new), "
                "in a Pipeline '<step>__accountant'), and fit with random_state=None "
                "(see 'Copies and processes')."
            )
        raise RuntimeError(
            "this PrivacyAccountant was copied to another process (process "
            f"{os.getpid()}, original in process {self._home[0]}); charges "
            "made here could not reach the original. If this is a worker (n_jobs with "
            "processes, say scikit-learn's GridSearchCV or cross_val_score): fit with "
            "n_jobs=1 or a threading backend (joblib.parallel_backend('threading')). If "
            "the ledger or a model holding it was saved by an earlier session and loaded "
            "here: create a new PrivacyAccountant with the same budget, charge it the saved "
            "events (new.spend(saved.events, source='saved ledger')), attach it to each "
            "estimator saved with it (model.set_params(accountant=new), in a Pipeline "
            "'<step>__accountant'), and fit with random_state=None."
        )

    def _check_locked(self, events, reading=False):
        """Return the total epsilon after ``events``, or raise if over budget.

        With an unlimited budget nothing is refused: returns None, the total
        left to be computed when read (see ``_settle_locked``); also None when
        a bound that ``compose`` takes the smallest of (``_quick_bound``)
        already fits the budget.  ``reading=True`` asks only (a detached
        accountant answers too).
        """
        if not reading:
            self._ensure_attached()
        if self._epsilon == math.inf:
            return None
        summary = self._summary.copy().add(events).summary()
        # (finite even for a budget near the largest float: inf is refused)
        limit = min(self._epsilon * (1.0 + _BUDGET_RTOL), sys.float_info.max)
        quick = _quick_bound(*summary, self._delta)
        if quick is not None and quick[0] <= limit:
            return quick[0] if quick[1] else None
        total = _compose_summary(*summary, self._delta)
        if total > limit:
            cost = compose(events, self._delta)
            ledger = self._all_events()
            hint = ""
            if self._delta == 0 and math.isinf(cost) and _needs_positive_delta(events):
                hint = (
                    " The accountant's delta=0 admits no Gaussian release: a Gaussian "
                    "mechanism (every fit of the DP estimators) is (epsilon, delta)-DP "
                    "only for delta > 0, so it costs epsilon=inf at delta=0. delta=0 "
                    "suits ledgers of pure-DP events only; to charge Gaussian releases, "
                    "create the PrivacyAccountant with delta in (0, 1), e.g. delta=1e-6."
                )
            elif (math.isinf(total) and self._delta > 0
                    and _needs_positive_delta([*ledger, *events])
                    and _delta_left(self._delta, ledger, events) <= 0.0):
                used = _sum_rounded(_approx_deltas(ledger, events), math.inf)
                hint = (
                    f" The approximate-DP events (ApproxDPEvent) of the ledger and of this "
                    f"request use delta={used:.3g} together, and the budget's is "
                    f"{self._delta:.3g}: no delta is left for a release that needs one "
                    "(every Gaussian release does), which then costs epsilon=inf."
                )
            elif math.isinf(cost) and _has_infinite_epsilon(events):
                hint = (" A release with epsilon=inf (no noise) fits only a budget of "
                        "epsilon=inf: PrivacyAccountant(epsilon=numpy.inf) records it.")
            if not hint and self._delta > 0:
                hint = _AFFORDABLE_HINT
                if any(isinstance(event, RandomStoppingEvent) for event in events):
                    hint += (" That epsilon prices a Gaussian release (an estimator's fit, a "
                             "DPGridSearchCV); random stopping costs more at the same epsilon, "
                             "so a DPRandomizedSearchCV must ask for less.")
            raise BudgetExceededError(
                f"privacy budget exceeded: budget (epsilon={self._epsilon:.6g}, "
                f"delta={self._delta:.3g}); already spent "
                f"epsilon={self._spent_epsilon():.10g}; this request costs "
                f"epsilon={cost:.6g} on its own; the "
                f"total would be epsilon={total:.10g}, over the budget by "
                f"{total - self._epsilon:.3g}. Nothing was recorded.{hint}"
            )
        return total

    def check(self, events):
        """Raise if charging ``events`` would exceed the budget; record nothing.

        Parameters
        ----------
        events : event or iterable of events
            The cost of the planned release.

        Raises
        ------
        BudgetExceededError
            If the total after the charge would exceed ``epsilon``.
        RuntimeError
            If the accountant is detached (see "Copies and processes").
        """
        events = _as_event_tuple(events)
        with self._lock:
            self._check_locked(events)

    def spend(self, events, source=None):
        """Check the budget, then record ``events``, atomically.

        Parameters
        ----------
        events : event or iterable of events
            The cost of the release.  An empty iterable releases nothing and
            records nothing.
        source : str, default=None
            Who released it, for :meth:`report` (e.g. ``"DPLinearRegression.fit"``).

        Returns
        -------
        spent : tuple of (float, float)
            The total (epsilon, delta) after the charge.

        Raises
        ------
        BudgetExceededError
            If the total would exceed ``epsilon``; nothing is recorded.
        RuntimeError
            If the accountant is detached (see "Copies and processes").
        """
        # Read before the lock, as check does: a generator of events that reads
        # this accountant (affordable_epsilon) deadlocked under it.
        events = _as_event_tuple(events)
        _check_source(source)  # before the lock: repr(source) may read this accountant
        with self._lock:
            self._record_locked(events, source)
            return self._spent_epsilon(), self._delta

    def _seed_stream(self, seed):
        """Which stream of the integer ``seed`` a release charged here draws from.

        0 for the first release of this ledger to use ``seed``, 1 for the
        second, and so on (see ``_randomness._release_rng``); always 0 for
        the process's built-in default, which keeps scikit-learn's meaning
        of a seed (one seed, one model).  Counted when asked, under the
        lock: two fits running at once never get the same stream.
        """
        if self is _builtin_default:
            return 0
        with self._lock:
            uses = self._seed_uses.get(seed, 0)
            self._seed_uses[seed] = uses + 1
            self._uncharged_streams.setdefault(threading.get_ident(), []).append((seed, uses))
        return uses

    def _uncharged(self):
        """This thread's streams taken and not yet charged for (a snapshot)."""
        with self._lock:
            return frozenset(self._uncharged_streams.get(threading.get_ident(), ()))

    def _give_back_streams(self, before):
        """Give back the seed streams this thread took since ``before`` (a
        :meth:`_uncharged` snapshot) and did not charge for.

        A fit refused after it took its stream (its data refused before the
        charge) released nothing; keeping the stream counted made the next fit
        with that seed draw another stream than the same fit on a fresh
        accountant.  Only the refused release's own streams are given back
        (a fit nested in another, refused, leaves the outer one's), and only
        if no release has taken a later stream of the seed since: two
        releases never share a stream (at worst a stream is left unused).
        A charge by this thread (``_record``) keeps every stream it holds.
        """
        with self._lock:
            held = self._uncharged_streams.get(threading.get_ident(), [])
            taken = [entry for entry in held if entry not in before]
            held[:] = [entry for entry in held if entry in before]
            for seed, stream in reversed(taken):
                if self._seed_uses.get(seed) == stream + 1:
                    self._seed_uses[seed] = stream

    def _record(self, events, source=None):
        """:meth:`spend` without computing the total it returns (the library's charges)."""
        events = _as_event_tuple(events)
        _check_source(source)
        with self._lock:
            self._record_locked(events, source)

    def _record_locked(self, events, source):
        # (events: a tuple from _as_event_tuple, and source, checked by
        # _check_source, both by the caller before the lock)
        total = self._check_locked(events)
        self._uncharged_streams.pop(threading.get_ident(), None)  # charged for: kept
        if not events:  # nothing released: no row in the ledger's report
            return
        self._records.append(SpendRecord(events, source, datetime.now().astimezone(), total))
        self._summary.add(events)

    def spent(self):
        """Total (epsilon, delta) spent so far; epsilon is measured at ``delta``."""
        with self._lock:
            return self._spent_epsilon(), self._delta

    def remaining(self):
        """Budget left: (epsilon budget minus epsilon spent, never negative; delta).

        A difference of totals, not the size of the next release: releases
        compose sub-additively (four fits at epsilon 1 cost 2.12 together at
        delta 1e-6), so the next fit can usually cost more than this epsilon.
        :meth:`affordable_epsilon` says how much.  The delta returned is the
        budget's, whatever approximate-DP events have used of it.
        """
        epsilon_spent, delta = self.spent()
        if self._epsilon == math.inf:  # (inf - inf, after a release without noise, is NaN)
            return math.inf, delta
        return max(0.0, self._epsilon - epsilon_spent), delta

    def affordable_epsilon(self, n_fits=1, rtol=1e-6):
        """The largest epsilon of one more fit (of each of ``n_fits``) the accountant accepts.

        A fit at this epsilon, at the accountant's delta or below (a fit's
        ``delta=None`` is), is accepted if nothing else is charged first: it
        is priced as one ``GaussianEvent(mu=gdp_mu(epsilon, delta))``, which
        every estimator's fit, ``norm_bound="auto"`` and ``DPGridSearchCV``
        are in total; pure, approximate and random-stopping releases
        (``DPRandomizedSearchCV``) at the same epsilon cost more.  It is
        found by bisection with the check :meth:`check` makes, so it agrees
        with the refusals whatever the ledger holds, and is at most ``rtol``
        (relatively) below the exact value.  0.0 when no fit fits (the
        budget is spent, or the ledger's approximate-DP events use all of
        delta); ``inf`` for an unlimited budget.  A detached accountant
        answers too (it cannot be charged).  The value says what this ledger
        accepts next; it does not size a new accountant for what is left
        (composed with this ledger, a pure-DP release of that epsilon costs
        more than a Gaussian one).  Each step composes the
        ledger: about 0.01 s for Gaussian ledgers, up to seconds for long
        mixed ones.  The ``n_fits`` releases are priced as their exact
        Gaussian DP composition, and, up to 10**4 of them, confirmed as
        separate releases.

        Parameters
        ----------
        n_fits : int in [1, 10**15], default=1
            How many fits at that epsilon must all be accepted (the folds of
            a ``cross_val_score``, say); they compose exactly.
        rtol : float in [2**-52, 1), default=1e-6
            Relative precision of the bisection.

        Returns
        -------
        epsilon : float

        Examples
        --------
        >>> from dp_glm_sklearn.privacy import GaussianEvent, PrivacyAccountant, gdp_mu
        >>> acc = PrivacyAccountant(epsilon=2.2, delta=1e-6)
        >>> mu_fit = gdp_mu(1.0, 1e-6)  # a fit at epsilon 1
        >>> for _ in range(4):
        ...     _ = acc.spend([GaussianEvent(mu=mu_fit)])
        >>> round(acc.remaining()[0], 3), round(acc.affordable_epsilon(), 3)
        (0.077, 0.494)
        >>> round(acc.affordable_epsilon(n_fits=5), 3)  # each of five folds
        0.209
        """
        if not (isinstance(n_fits, Integral) and not isinstance(n_fits, bool)
                and 1 <= n_fits <= 10**15):
            raise ValueError(f"n_fits must be an int in [1, 10**15], got {n_fits!r}.")
        if not (isinstance(rtol, Real) and 2.0**-52 <= rtol < 1.0):
            raise ValueError(f"rtol must be a float in [2**-52, 1), got {rtol!r}.")
        if self._epsilon == math.inf:
            return math.inf
        if self._delta == 0.0:
            return 0.0  # no Gaussian release fits a pure-DP budget

        def accepted(epsilon, separate=False):
            # The n_fits releases compose exactly to one of sqrt(n_fits) mu:
            # bisect on that one, confirm with the releases themselves.
            mu = gdp_mu(epsilon, self._delta)
            events = ([GaussianEvent(mu=mu)] * int(n_fits) if separate
                      else [GaussianEvent(mu=math.sqrt(n_fits) * mu)])
            # (A detached accountant is read, not charged: no _ensure_attached.)
            with self._lock:
                try:
                    self._check_locked(events, reading=True)
                except BudgetExceededError:
                    return False
            return True

        low, high = 0.0, self._epsilon
        if not accepted(high):
            while high - low > rtol * high:
                middle = 0.5 * (low + high)
                if not low < middle < high:  # no float left between them
                    break
                low, high = (middle, high) if accepted(middle) else (low, middle)
            high = low
        if 1 < n_fits <= _SEPARATE_FITS_CHECKED:
            for _ in range(64):  # the composition's rounding: a few ulps
                if high == 0.0 or accepted(high, separate=True):
                    break
                high = high * (1.0 - 2.0**-52) if high > 1e-300 else 0.0
            else:
                high = 0.0
        return high

    def report(self):
        """A table of the releases, their costs and the running total.

        One row per charge: time (empty in a copy restored from a pickle;
        keep it out of what you publish: the gaps between charges are
        running times, which depend on the data, such as the random search's
        secret number of candidates), source, events, the charge's own
        epsilon and the total epsilon after it, both at the accountant's
        delta (the
        total as in :attr:`SpendRecord.total_epsilon`: the last row's is the
        full composition, an earlier row's may be a valid looser bound).

        Returns
        -------
        report : pandas.DataFrame or str
            A DataFrame when pandas is installed (budget and totals in its
            ``attrs``), else the same table as text with a summary line.
        """
        records = self.history
        columns = ["time", "source", "events", "epsilon", "total epsilon"]
        rows = [
            [
                ("" if record.timestamp is None
                 else record.timestamp.strftime("%Y-%m-%d %H:%M:%S")),
                record.source or "",
                ", ".join(map(repr, record.events)),
                compose(record.events, self._delta),
                record.total_epsilon,
            ]
            for record in records
        ]
        epsilon_spent = records[-1].total_epsilon if records else 0.0
        summary = {
            "budget": (self._epsilon, self._delta),
            "spent": (epsilon_spent, self._delta),
            "remaining": (math.inf if self._epsilon == math.inf
                          else max(0.0, self._epsilon - epsilon_spent), self._delta),
        }
        try:
            import pandas as pd
        except ImportError:
            return _format_table(columns, rows, summary)
        frame = pd.DataFrame(rows, columns=columns)
        frame.index = pd.RangeIndex(1, len(rows) + 1, name="release")
        frame.attrs.update(summary)
        return frame

    def __repr__(self):
        detached = ", detached" if self.detached else ""
        return (
            f"PrivacyAccountant(epsilon={self._epsilon!r}, delta={self._delta!r}, "
            f"spent={self.spent()[0]:.4g}{detached})"
        )

    def __copy__(self):
        # A copy would record charges that the user's accountant never sees.
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        with self._lock:
            # The total, not every record's (a long mixed ledger takes a PLD
            # per record); a copy computes those it is asked for.
            if self._records:
                self._settle_locked(len(self._records), only_last=True)
            state = {
                "epsilon": self._epsilon,
                "delta": self._delta,
                # Without the times (SpendRecord.timestamp): their gaps are
                # running times, which depend on the data.
                "records": tuple(replace(record, timestamp=None)
                                 for record in self._records),
            }
        return _restore_accountant, (self._uid, self._home, state)


def _check_release(accountant, events, epsilon, delta):
    """``accountant.check(events)`` for a release asked for at ``(epsilon, delta)``.

    The accountant measures every release at its own delta; a release
    asked for at a larger delta (given explicitly: ``delta=None`` takes at
    most the accountant's) costs more than its epsilon there (a fit at
    (1, 1e-5) costs 1.14 at 1e-6), and a refusal says so.
    """
    try:
        return accountant.check(events)
    except BudgetExceededError as exc:
        if not (math.isfinite(epsilon) and delta > accountant.delta > 0.0):
            raise
        error = BudgetExceededError(
            f"{exc} Note: this release was asked for at (epsilon={epsilon:.6g}, "
            f"delta={delta:.3g}); the accountant measures every release at its own "
            f"delta={accountant.delta:.3g}, where it costs more than epsilon={epsilon:.6g}. "
            f"Asked for at delta={accountant.delta:.3g}, it would cost exactly "
            f"epsilon={epsilon:.6g} on its own."
        )
    raise error


#: Up to this many fits, affordable_epsilon confirms its answer with the fits
#: as separate releases (beyond, their composition as one).
_SEPARATE_FITS_CHECKED = 10**4


def _approx_deltas(*event_lists):
    """The deltas of the ApproxDPEvents in ``event_lists``."""
    return [event.delta for events in event_lists for event in events
            if isinstance(event, ApproxDPEvent)]


def _delta_left(delta, *event_lists):
    """What the ApproxDPEvents of ``event_lists`` leave of ``delta``, rounded down
    as composition takes it."""
    return _sum_rounded([delta, *(-d for d in _approx_deltas(*event_lists))], -math.inf)


def _has_infinite_epsilon(events):
    """True if one of ``events`` is a release without noise (epsilon or mu infinite)."""
    return any(math.isinf(getattr(event, "mu", getattr(event, "epsilon", 0.0)))
               for event in events)


def _needs_positive_delta(events):
    """True if ``events`` hold a finite release that is private only for delta > 0."""
    for event in events:
        if isinstance(event, (GaussianEvent, RandomStoppingEvent)):
            if 0.0 < event.mu < math.inf:
                return True
        elif isinstance(event, ApproxDPEvent):
            if event.delta > 0 and event.epsilon < math.inf:
                return True
    return False


def _format_table(columns, rows, summary):
    """Plain-text version of :meth:`PrivacyAccountant.report`."""
    cells = [columns] + [[row[0], row[1], row[2], f"{row[3]:.6g}", f"{row[4]:.6g}"] for row in rows]
    widths = [max(len(str(line[i])) for line in cells) for i in range(len(columns))]
    lines = [
        "  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) for line in cells
    ]
    budget, spent, remaining = summary["budget"], summary["spent"], summary["remaining"]
    lines.append(
        f"budget epsilon={budget[0]:.6g}, spent epsilon={spent[0]:.6g}, "
        f"remaining epsilon={remaining[0]:.6g}, all at delta={budget[1]:.3g}"
    )
    return "\n".join(lines)


_DEFAULT_LOCK = threading.Lock()
_builtin_default = None
# The active default_accountant blocks, oldest first, as (token, accountant):
# the newest one still open is the default.  A block removes its own entry on
# exit, so blocks in several threads may end in any order (restoring the
# default saved on entry would reinstate an ended block, and drop one that is
# still open).
_blocks = []


def _default_locked():
    global _builtin_default
    if _blocks:
        return _blocks[-1][1]
    if _builtin_default is None:
        _builtin_default = PrivacyAccountant()
    return _builtin_default


def _replays_seeds(accountant):
    """Whether ``accountant`` is the process's built-in default, on which an
    integer ``random_state`` draws its own stream at every fit (one seed, one
    model: scikit-learn's meaning); any other ledger draws a new stream per
    release (``PrivacyAccountant._seed_stream``)."""
    return accountant is not None and accountant is _builtin_default


def _user_default_accountant():
    """The default accountant if a user installed it, else None."""
    with _DEFAULT_LOCK:
        current = _default_locked()
        return None if current is _builtin_default else current


def get_default_accountant():
    """The process-wide accountant used by estimators given ``accountant=None``.

    It has an infinite epsilon budget and ``delta=1e-5``: it never refuses,
    but it records every release, so :meth:`PrivacyAccountant.report` shows
    what an analysis spent.  It belongs to its process: an estimator with
    ``accountant=None`` fitted in a worker process (e.g. joblib's ``loky``
    backend) is charged to that worker's own default, which this process
    never sees.  A default installed with :func:`default_accountant` travels
    with the estimators pickled for such a worker, where it is detached and
    refuses the fit rather than lose the charge; pass an explicit accountant
    for the same behaviour (see "Copies and processes" in
    :class:`PrivacyAccountant`).  A default installed with
    :func:`default_accountant` in the process that fits takes precedence: an
    estimator saved inside a block and loaded elsewhere is charged to the
    block active where it is loaded, and refuses only without one.

    Returns
    -------
    accountant : PrivacyAccountant

    Examples
    --------
    >>> from dp_glm_sklearn.privacy import PrivacyAccountant, default_accountant
    >>> from dp_glm_sklearn.privacy import get_default_accountant
    >>> get_default_accountant().epsilon
    inf
    >>> budget = PrivacyAccountant(epsilon=2.0)
    >>> with default_accountant(budget):
    ...     get_default_accountant() is budget
    True
    """
    with _DEFAULT_LOCK:
        return _default_locked()


class _DefaultAccountantMixin:
    """For estimators with an ``accountant`` parameter: which default to charge.

    A default installed with :func:`default_accountant` lives in this
    process.  An estimator pickled for another process (a joblib worker)
    carries it along (:meth:`__getstate__`); there it is detached and refuses
    to spend, so a fit in the worker raises instead of charging the worker's
    own, unlimited default.  Clones made in the worker (scikit-learn's
    searches and ``cross_val_score`` clone what they were sent) inherit it
    (:meth:`__sklearn_clone__`): without that, ``cross_val_score(search,
    n_jobs=2)`` would run every fit unpaid.

    A default installed with :func:`default_accountant` in the current
    process comes first: an estimator saved inside a block and loaded in
    another process is charged to the block active there, and only without
    one does the detached default it carries refuse the fit.
    """

    def _default_accountant(self):
        """The accountant to charge when ``accountant=None``.

        Raises
        ------
        RuntimeError
            If the estimator carries a default from another process and no
            :func:`default_accountant` block is active in this one.
        """
        with _DEFAULT_LOCK:
            current = _default_locked()
            if current is not _builtin_default:
                return current  # a block is active in this process
        pickled = self.__dict__.get("_pickled_default_accountant")
        if pickled is not None and pickled.detached and pickled._home == _this_process():
            raise RuntimeError(
                f"{type(self).__name__} has accountant=None and was saved while a "
                "default_accountant(...) block was active; that block's accountant is gone, "
                "and a saved ledger is read-only, so the fit is refused rather than charged "
                "to this process's unlimited default. Give it an accountant with "
                "set_params(accountant=...), or fit it inside a default_accountant(...) block."
            )
        if pickled is not None and pickled.detached:
            raise RuntimeError(
                f"{type(self).__name__} has accountant=None and was pickled while a "
                "default_accountant(...) block was active in another process (process "
                f"{pickled._home[0]}; this is process {os.getpid()}); a charge made "
                "here could not reach that block's accountant, so the fit is refused "
                "rather than charged to this process's unlimited default. Give it an "
                "accountant with set_params(accountant=...), or fit it inside a "
                "default_accountant(...) block in this process. (In a joblib worker "
                "process, e.g. cross_val_score(..., n_jobs=2), fit with n_jobs=1 or "
                "a threading backend instead.)"
            )
        return current

    def __getstate__(self):
        # A copy: from Python 3.11 object.__getstate__ returns __dict__ itself,
        # and the key added below stayed in the live estimator (pickled once
        # inside a default_accountant block, then again outside it, it still
        # carried the block's accountant and refused in another process).
        state = dict(super().__getstate__())
        user_default = _user_default_accountant()
        if self.accountant is None and user_default is not None:
            state["_pickled_default_accountant"] = user_default
        return state

    def __sklearn_clone__(self):
        new = super().__sklearn_clone__()
        pickled = self.__dict__.get("_pickled_default_accountant")
        if pickled is not None:
            new._pickled_default_accountant = pickled
        return new


@contextmanager
def default_accountant(accountant):
    """Make ``accountant`` the default accountant inside a ``with`` block.

    The default is a process-wide global, not a thread-local or context
    variable: while the block runs, other threads and asynchronous tasks see
    ``accountant`` as the default too.  With several blocks open at once (in
    several threads), the one entered last and not yet ended is the default;
    they may end in any order.  After the last one ends, the built-in default
    (:func:`get_default_accountant`) is back.

    Parameters
    ----------
    accountant : PrivacyAccountant
        The accountant to charge when an estimator has ``accountant=None``.

    Yields
    ------
    accountant : PrivacyAccountant

    Examples
    --------
    >>> from dp_glm_sklearn.privacy import (
    ...     PrivacyAccountant, default_accountant, get_default_accountant)
    >>> budget = PrivacyAccountant(epsilon=1.0)
    >>> with default_accountant(budget):
    ...     get_default_accountant() is budget
    True
    """
    if not isinstance(accountant, PrivacyAccountant):
        raise TypeError(f"accountant must be a PrivacyAccountant, got {accountant!r}.")
    token = object()
    with _DEFAULT_LOCK:
        _blocks.append((token, accountant))
    try:
        yield accountant
    finally:
        with _DEFAULT_LOCK:
            _blocks[:] = [block for block in _blocks if block[0] is not token]
