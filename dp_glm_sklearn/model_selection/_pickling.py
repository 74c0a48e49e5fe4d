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
- multiprocessing (and its subclasses): the standard pickle throughout;
  workers started by ``fork`` (Linux's default before Python 3.14) know
  the parent's ``__main__``, those started by ``spawn`` or ``forkserver``
  (macOS's and Windows' default, and Linux's from Python 3.14) run its
  file again without its ``if __name__ == "__main__":`` block, and know
  nothing of it when it has none (a notebook, ``python -c``) or is a
  package's ``__main__.py``: a name they cannot find made joblib's pool
  hang, so nothing of ``__main__`` is sent to them
  (:func:`_workers_know_main`); and a file that does not exist (a
  script read from standard input) kills every worker;
- others (dask's, Ray's): cloudpickle.

Arrays of numbers always pickle; they are skipped, so that large data are
not copied for the check.
"""

import copyreg
import multiprocessing
import os
import pickle
import sys

import joblib.parallel
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


class WorkersCannotStartError(pickle.PicklingError):
    """Workers that would run ``__main__``'s file again, which does not exist."""


class _Discard:
    """A file that keeps nothing: the check needs the pickling, not the bytes."""

    @staticmethod
    def write(data):
        return len(data)


def _numbers(obj):
    """Whether ``obj`` is a numpy array of numbers (or strings, dates): it pickles."""
    return type(obj) in (np.ndarray, np.memmap) and not obj.dtype.hasobject


class _ImportableCheck(pickle.Pickler):
    """The standard pickle, refusing classes and functions of a function's scope,
    and those of ``__main__`` unless the workers know the parent's
    (``knows_main``: forked workers)."""

    knows_main = False

    def reducer_override(self, obj):
        if _numbers(obj):
            return _NOTHING
        if isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__"):
            self._refuse_unreachable(obj)
        elif self._unreachable(type(obj)):
            # An instance pickled without its class: one whose reduction (a
            # reducer registered with copyreg, else __reduce_ex__, as pickle
            # picks) returns a name is pickled as a global of __main__, which
            # the workers could not find either (adversarial checks).
            # (Otherwise the class, or what the reduction returns, is pickled
            # and checked.)
            reducer = copyreg.dispatch_table.get(type(obj))
            try:
                reduced = (reducer(obj) if reducer is not None
                           else obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL))
            except Exception:  # the pickling below raises it, as a failure of the check
                return NotImplemented
            if isinstance(reduced, str):
                raise NotImportableError(
                    f"{reduced} is a global of {type(obj).__module__}, where a worker "
                    "process cannot find it")
        return NotImplemented

    def _unreachable(self, obj):
        module = getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", "")
        return "<locals>" in qualname or module == "__main__" and not self.knows_main

    def _refuse_unreachable(self, obj):
        if self._unreachable(obj):
            raise NotImportableError(
                f"{getattr(obj, '__qualname__', '')} is defined in "
                f"{getattr(obj, '__module__', None)}, where a worker process cannot find it")


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


def _start_method():
    """How joblib's multiprocessing backend starts its workers (without fixing
    multiprocessing's default context): joblib's own ``JOBLIB_START_METHOD``,
    else multiprocessing's method, else its default (listed first)."""
    context = getattr(joblib.parallel, "DEFAULT_MP_CONTEXT", None)
    if context is not None:
        return context.get_start_method()
    return (multiprocessing.get_start_method(allow_none=True)
            or multiprocessing.get_all_start_methods()[0])


class _ForkedCheck(_ImportableCheck):
    """:class:`_ImportableCheck` for workers forked from this process."""

    knows_main = True


def _workers_know_main():
    """Whether multiprocessing's workers have the parent's ``__main__``, as the
    same objects: True for forked workers (copies of this process), else
    False, for all of its names.

    Workers started by spawn or forkserver run ``__main__``'s file again as
    ``__mp_main__``, without its ``if __name__ == "__main__":`` block (a
    package's ``__main__.py``, a notebook or ``python -c``: nothing at all).
    Which names such a run binds, to the parent's objects, cannot be told
    from the file: a static scan of it (an earlier version) passed names
    bound under ``match __name__:``, under a flag computed from ``__name__``
    or ``current_process().name``, after a star import, and names rebound
    below the main block; the search then hung after the charge, or its
    workers ran other code than the parent's.  So none is counted: anything
    of ``__main__`` is refused, and the message says to define it in a module.

    Raises :class:`WorkersCannotStartError` if the file to run does not exist
    (a script read from standard input): every worker would die, whatever is
    sent.
    """
    if _start_method() == "fork":
        return True
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    path = getattr(main, "__file__", None)
    if path is not None and not os.path.isabs(path):
        # (As multiprocessing.spawn: from the directory the program started in.)
        start = getattr(multiprocessing.process, "ORIGINAL_DIR", None) or os.getcwd()
        path = os.path.join(start, path)
    if (name is None and path is not None and not os.path.isfile(path)
            and os.path.splitext(os.path.basename(path))[0] != "ipython"):
        raise WorkersCannotStartError(f"__main__'s file {path!r} does not exist")
    return False


def pickling_failure(exc):
    """What a failed check says, without its message (which may quote a value)."""
    if isinstance(exc, WorkersCannotStartError):
        return (f"{exc}: workers started by spawn or forkserver run it again; run the "
                "script from a file")
    if isinstance(exc, NotImportableError):
        return ("a class or function defined in __main__ (a notebook or a script) or in a "
                "function, which the workers would load by reference and cannot find "
                "(loky: an object inside a numpy array or a pandas column or index; "
                "multiprocessing started by spawn or forkserver: anything defined in "
                "__main__); define it in a module, or use joblib's default backend, loky")
    return type(exc).__name__


def worker_pickling_check(n_jobs):
    """A function that raises if its argument cannot be sent to (or back from) the
    active joblib backend's worker processes; None if the fits run in this
    process (threads, or one job)."""
    backend = get_active_backend()[0]
    if getattr(backend, "supports_sharedmem", False) or effective_n_jobs(n_jobs) <= 1:
        return None
    # (By name: joblib's backend classes live in a private module.  A subclass
    # keeps the pool and its pickling: it was checked by cloudpickle, and hung.)
    names = {cls.__name__ for cls in type(backend).__mro__}
    if "MultiprocessingBackend" in names:
        try:
            checker = _ForkedCheck if _workers_know_main() else _ImportableCheck
        except WorkersCannotStartError as exc:
            error = exc

            def refuse(obj):
                raise error

            return refuse
    elif "LokyBackend" in names:
        # (LOKY_PICKLER=pickle: the standard pickle for the tasks too.)
        checker = _ImportableCheck if get_loky_pickler_name() == "pickle" else _LokyCheck
    else:
        checker = _CloudCheck

    def check(obj):
        checker(_Discard(), protocol=pickle.HIGHEST_PROTOCOL).dump(obj)

    return check
