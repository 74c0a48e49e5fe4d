"""The estimators' random generators: seeding, and independent noise for clones.

The noise itself is drawn in :mod:`dp_glm_sklearn.privacy.noise`; this
module only decides which generator a fit draws from, so that copies of one
estimator (clones, pickled copies in worker processes, forked children) do
not replay the same noise (docs/randomness.md).
"""

import contextlib
import functools
import os
import threading
import weakref
from numbers import Integral

import numpy as np

from ._sklearn_compat import InvalidParameterError


def _rng(random_state):
    """A numpy Generator from ``random_state`` (None: seeded by the OS)."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        # 128 bits drawn from it: a 31-bit seed would leave 2**31 noise draws to try.
        return np.random.default_rng(random_state.randint(2**32, size=4, dtype=np.uint64))
    return np.random.default_rng(random_state)


#: Tags the streams of a seed used again in one ledger (``_release_rng``):
#: no ``SeedSequence.spawn`` child of the seed has this spawn key.
_STREAM_TAG = 0x64706C6D


def _release_rng(random_state, accountant):
    """The generator a release charged to ``accountant`` draws its noise from.

    An integer seed makes a fit reproducible, but two releases drawing from
    one seed share their noise, and the differences of such releases cancel
    it (two output perturbations of one model at two epsilons give the
    noiseless minimizer back exactly), while an accountant composes them as
    independent.  So the k-th release (k >= 1) charged to one accountant
    with the same integer seed draws from ``SeedSequence(seed,
    spawn_key=(_STREAM_TAG, k))``: a sequence of fits is reproducible from
    a fresh accountant, and no two releases of one ledger share a stream.
    The first use of a seed in a ledger draws from the seed itself.  The
    process's built-in default accountant (``accountant=None`` outside any
    ``default_accountant`` block) keeps scikit-learn's meaning, the seed's
    own stream every time: refitting gives the same model, and fits sharing
    a seed there are not independent releases (docs/randomness.md).
    """
    if isinstance(random_state, (bool, np.bool_)):
        # (Refused by the parameter constraints too, which skip_parameter_validation
        # turns off: this runs before every charge.)
        raise InvalidParameterError(
            f"random_state={random_state!r} is not a seed: numpy reads True as the seed 1, "
            "fixed, known noise. Give an int, a numpy Generator or RandomState, or None "
            "(fresh randomness from the operating system).")
    if isinstance(random_state, Integral):
        stream = accountant._seed_stream(int(random_state))
        if stream:
            return np.random.default_rng(
                np.random.SeedSequence(int(random_state), spawn_key=(_STREAM_TAG, stream)))
    return _rng(random_state)


@contextlib.contextmanager
def _streams_given_back_if_refused(accountant):
    """Around a release from :func:`_release_rng` up to its charge: if the
    block raises before the charge (the data refused, say), the seed stream
    it took is given back (``PrivacyAccountant._give_back_streams``), so the
    next fit with that seed draws what it would on a fresh accountant."""
    before = accountant._uncharged()
    try:
        yield
    except BaseException:
        accountant._give_back_streams(before)
        raise


#: Tags the seed of the preprocessing steps in a wrapper's fits (``_steps_seed``).
_STEPS_TAG = 0x676C6F62


def _steps_seed(random_state, rng):
    """The seed from which a search or boosting seeds, in every fit of its
    preprocessing steps (the probes before the charge, each candidate, the
    refit), each ``random_state`` those steps leave at None
    (:func:`~dp_glm_sklearn.model_selection._slot._step_seeds`).

    At ``random_state=None`` a step (a ``GaussianRandomProjection``) draws
    from numpy's global generator: a new draw at each fit, so the probes
    checked other draws than the candidates made, and the global generator
    (and the published step's draw) counted the fits, that is the random
    search's secret number of candidates.  Seeded from one value per wrapper
    fit, every fit of a step draws the same.  Not the noise's seed: the
    draws of such a step need no secrecy.  An integer ``random_state`` gives
    a seed of its own (reproducible, drawing nothing from the noise's
    streams), None the OS's, a generator one draw of ``rng``, the wrapper's
    generator made from it (drawn before anything whose number could depend
    on the random search's K).
    """
    if isinstance(random_state, Integral):
        return int(np.random.SeedSequence(int(random_state),
                                          spawn_key=(_STEPS_TAG,)).generate_state(1)[0])
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1)[0])
    return int(rng.integers(2**32))


def _independent_child(random_state, *, os_entropy=False):
    """A generator of the same kind, seeded with 128 bits drawn from ``random_state``
    (and 128 bits of OS entropy with ``os_entropy=True``)."""
    entropy = [int(word) for word in _rng(random_state).integers(2**32, size=4,
                                                                   dtype=np.uint64)]
    if os_entropy:
        entropy += [int(word) for word in np.random.SeedSequence().generate_state(4)]
    seed = np.random.SeedSequence(entropy)
    if isinstance(random_state, np.random.RandomState):
        return np.random.RandomState(np.random.MT19937(seed))
    return np.random.default_rng(seed)


# Set while a search fits (see _clones_draw_nothing), in the thread that clones.
_SEARCHING = threading.local()
_GENERATORS = (np.random.Generator, np.random.RandomState)
# The estimators whose random_state is a generator, by id (hashing an estimator
# may fail or mix up equal ones), as weak references: at a fork, their
# generators become copies the parent and every sibling share.
_GENERATOR_HOLDERS = {}
# Copied generators: id(generator) -> {id(estimator): weak reference} of the
# estimators marked with it, so that a copy handed to another estimator
# (set_params, a search giving its fitted candidates the user's random_state
# back) stays marked as a copy while any of them still holds it.
_COPIED = {}
# Held while _COPIED changes: a holder's callback emptying and dropping a
# generator's entry between another thread's lookup and store orphaned the
# new holder (re-entrant: a callback can run in the thread holding it).
_COPIED_LOCK = threading.RLock()


def _is_copied(generator):
    # A holder that is alive and holds this very object: the id is not reused.
    return any(holder is not None and holder.__dict__.get("_copied_generator") is generator
               for holder in (ref() for ref in list(_COPIED.get(id(generator), {}).values())))


def _register_copy(generator, holder):
    key, holder_key = id(generator), id(holder)

    def forget(ref):
        with _COPIED_LOCK:
            holders = _COPIED.get(key)
            if holders is not None and holders.get(holder_key) is ref:
                del holders[holder_key]
                if not holders:
                    _COPIED.pop(key, None)

    ref = weakref.ref(holder, forget)
    with _COPIED_LOCK:
        _COPIED.setdefault(key, {})[holder_key] = ref


def _mark_generators_copied_after_fork():
    global _COPIED_LOCK
    _COPIED_LOCK = threading.RLock()  # another thread may have held it at the fork
    for ref in list(_GENERATOR_HOLDERS.values()):
        estimator = ref()
        if estimator is not None:
            estimator._mark_copied_generator()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_mark_generators_copied_after_fork)


def _clones_draw_nothing(fit):
    """Decorate a search's ``fit``: its clones leave the user's generators alone.

    A search clones its estimator a number of times that may depend on what
    it keeps secret (the random search's K).  Were each clone to draw its
    child generator from a generator the user gave the wrapped estimator,
    that generator's state would count the clones.  The search's clones need
    no generator of their own: every fit they make gets its seed from the
    search, and its probes draw no noise.  So during the search, clones
    copy the generator as scikit-learn's ``clone`` does, drawing nothing.
    """

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        previous = getattr(_SEARCHING, "active", False)
        _SEARCHING.active = True
        try:
            return fit(self, *args, **kwargs)
        finally:
            _SEARCHING.active = previous

    return wrapper


class _IndependentNoiseOnCloneMixin:
    """Clones of an estimator seeded with a generator draw independent noise.

    ``sklearn.base.clone`` deep-copies a ``Generator`` or ``RandomState``
    given as ``random_state``, so every clone would replay the same stream:
    ``cross_val_score``, ``GridSearchCV`` or a ``VotingClassifier`` would then
    fit models with the same noise on overlapping data, whose differences
    cancel it, while the accountant charges them as independent releases.
    Here each clone gets its own generator instead, seeded with 128 bits
    drawn from the original's (which advances it): a seeded generator still
    makes a sequence of clones reproducible.  An integer seed is kept as
    given; :func:`_release_rng` gives each release charged to one accountant
    its own stream of it (docs/randomness.md).

    A generator that arrived by unpickling (or ``copy.deepcopy``) is a copy
    of one that other copies share, in the same state: a joblib worker
    process gets one with each task, and ``MultiOutputRegressor`` or
    ``OneVsRestClassifier`` clone it there, once per output or class, so
    their clones drew the same child seed and every output's model the same
    noise.  Clones of such a copy mix 128 bits of OS entropy into their seed:
    independent noise, not reproducible.

    The mark (``_copied_generator``: the very object ``random_state`` holds)
    is set on unpickling and, for the estimators alive at the time, in a
    forked child; it is never pickled, and any new ``random_state``
    (``set_params``, a search putting the user's back) drops it.
    """

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name == "random_state" and self.__dict__.get("_copied_generator") is not value:
            self.__dict__.pop("_copied_generator", None)
            if isinstance(value, _GENERATORS):
                if _is_copied(value):  # a copy handed over stays a copy
                    self._mark_copied_generator()
                key = id(self)
                if key not in _GENERATOR_HOLDERS:
                    _GENERATOR_HOLDERS[key] = weakref.ref(
                        self, lambda ref, key=key: _GENERATOR_HOLDERS.pop(key, None))

    def _mark_copied_generator(self):
        generator = self.__dict__.get("random_state")
        if isinstance(generator, _GENERATORS):
            self.__dict__["_copied_generator"] = generator
            _register_copy(generator, self)

    def __getstate__(self):
        # A copy: from Python 3.11 object.__getstate__ returns __dict__ itself,
        # and popping there unmarked the live estimator being pickled.
        state = dict(super().__getstate__())
        state.pop("_copied_generator", None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._mark_copied_generator()

    def __sklearn_clone__(self):
        new = super().__sklearn_clone__()
        state = getattr(self, "random_state", None)
        if isinstance(state, _GENERATORS) and not getattr(_SEARCHING, "active", False):
            copied = state is self.__dict__.get("_copied_generator")
            new.random_state = _independent_child(state, os_entropy=copied)
        return new
