"""Whether a search's worker processes can receive what they need, checked before its charge.

With ``n_jobs`` above 1 on a process backend, each candidate's estimator,
parameters and training part go to a worker pickled, and the fitted
candidate comes back so.  Whatever cannot make that trip fails after the
charge; :func:`worker_pickling_check` gives a function that pickles the same
objects as the backend will, into nothing, so that it fails before.

How joblib's backends pickle:

- loky (joblib's default, and its subclasses): cloudpickle, which copies
  the functions and classes of ``__main__`` (a notebook, a script) or of a
  function's scope by value; but every numpy array goes through joblib's
  memory-mapping reducers, which pickle an array of objects with the
  standard pickle, by reference, and a fresh worker process cannot import
  ``__main__``'s or a function's classes: an array of such objects (a
  DataFrame column or index of them) failed in the worker;
- multiprocessing: the standard pickle throughout; workers started by
  ``fork`` (Linux's default before Python 3.14) know the parent's
  ``__main__``, those started by ``spawn`` or ``forkserver`` (macOS's and
  Windows' default, and Linux's from Python 3.14) import it again from its
  file, and know nothing of it when it has none (a notebook, ``python -c``):
  then nothing of ``__main__`` can be sent (joblib's pool hung on it);
- others (dask's, Ray's): cloudpickle.

Arrays of numbers always pickle; they are skipped, so that large data are
not copied for the check.
"""

import multiprocessing
import pickle
import sys

import numpy as np
from joblib import effective_n_jobs
from joblib.parallel import get_active_backend

try:  # what loky pickles tasks with: joblib vendored it before 1.5, then required it
    from joblib.externals import cloudpickle
except ImportError:  # pragma: no cover
    import cloudpickle

try:
    from joblib.externals.loky.backend.reduction import get_loky_pickler_name
except ImportError:  # pragma: no cover - a joblib without it pickles by cloudpickle
    def get_loky_pickler_name():
        return "cloudpickle"

#: A reduction to put in place of an array that needs no check.
_NOTHING = (tuple, ())


class NotImportableError(pickle.PicklingError):
    """A class or function a fresh worker process cannot import, pickled by reference."""


class _Discard:
    """A file that keeps nothing: the check needs the pickling, not the bytes."""

    @staticmethod
    def write(data):
        return len(data)


def _numbers(obj):
    """Whether ``obj`` is a numpy array of numbers (or strings, dates): it pickles."""
    return type(obj) in (np.ndarray, np.memmap) and not obj.dtype.hasobject


class _StandardCheck(pickle.Pickler):
    """The standard pickle, arrays of numbers skipped."""

    def reducer_override(self, obj):
        return _NOTHING if _numbers(obj) else NotImplemented


class _ImportableCheck(pickle.Pickler):
    """The standard pickle, refusing classes and functions of ``__main__`` or of a
    function's scope, which a fresh process cannot import."""

    def reducer_override(self, obj):
        if _numbers(obj):
            return _NOTHING
        if isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__"):
            module = getattr(obj, "__module__", None)
            if module == "__main__" or "<locals>" in getattr(obj, "__qualname__", ""):
                raise NotImportableError(
                    f"{obj.__qualname__} is defined in {module}, which a worker process "
                    "cannot import")
        return NotImplemented


class _CloudCheck(cloudpickle.Pickler):
    """cloudpickle, arrays of numbers skipped."""

    def reducer_override(self, obj):
        return _NOTHING if _numbers(obj) else super().reducer_override(obj)


class _LokyCheck(cloudpickle.Pickler):
    """cloudpickle, with every numpy array pickled as joblib's reducers do: arrays
    of objects by the standard pickle, by reference (:class:`_ImportableCheck`)."""

    def reducer_override(self, obj):
        if type(obj) in (np.ndarray, np.memmap):
            if obj.dtype.hasobject:
                _ImportableCheck(_Discard(), protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
            return _NOTHING
        return super().reducer_override(obj)


def _workers_know_main():
    """Whether multiprocessing's workers can resolve the parent's ``__main__`` names:
    forked, or started afresh with a ``__main__`` file to import.  (Names
    defined under ``if __name__ == "__main__":`` are not checked.)"""
    method = (multiprocessing.get_start_method(allow_none=True)
              or multiprocessing.get_all_start_methods()[0])  # (the first is the default)
    return method == "fork" or getattr(sys.modules.get("__main__"), "__file__", None) is not None


def pickling_failure(exc):
    """What a failed check says, without its message (which may quote a value)."""
    if isinstance(exc, NotImportableError):
        return ("a class or function defined in __main__ (a notebook or a script) or in a "
                "function, which the workers would load by reference and cannot import "
                "(loky: an object inside a numpy array or a pandas column or index; "
                "multiprocessing started by spawn or forkserver from a notebook: anything); "
                "define it in a module")
    return type(exc).__name__


def worker_pickling_check(n_jobs):
    """A function that raises if its argument cannot be sent to (or back from) the
    active joblib backend's worker processes; None if the fits run in this
    process (threads, or one job)."""
    backend = get_active_backend()[0]
    if getattr(backend, "supports_sharedmem", False) or effective_n_jobs(n_jobs) <= 1:
        return None
    if type(backend).__name__ == "MultiprocessingBackend":  # exactly: not a subclass
        checker = _StandardCheck if _workers_know_main() else _ImportableCheck
    elif any(cls.__name__ == "LokyBackend" for cls in type(backend).__mro__):
        # (By name: joblib's backend classes live in a private module.)
        # (LOKY_PICKLER=pickle: the standard pickle for the tasks too.)
        checker = _ImportableCheck if get_loky_pickler_name() == "pickle" else _LokyCheck
    else:
        checker = _CloudCheck

    def check(obj):
        checker(_Discard(), protocol=pickle.HIGHEST_PROTOCOL).dump(obj)

    return check
