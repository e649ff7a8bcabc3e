"""Where the interpreters' compiled code is cached, and the one line a first compile prints.

Numba caches a ``cache=True`` function in ``NUMBA_CACHE_DIR`` when it is set, else in a
``__pycache__`` beside the source. tapejit's own functions go to one per-user directory when the
variable is not set (``$XDG_CACHE_HOME/tapejit/numba``, else ``~/.cache/tapejit/numba``), so
``python -m jit.warmup``, ``make`` and a plain ``python my_script.py`` all load the same compiled
code, wherever they run from and whether or not the package directory is writable. The choice is
made per function (``njit`` below sets Numba's ``config.CACHE_DIR`` only while it creates our
dispatchers), so the user's own Numba functions keep Numba's default.
"""
from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager, nullcontext

import numba
from numba import config

NOTICE_AFTER = 2.0  # seconds: a load from the cache takes well under one, a compile minutes


def cache_dir() -> str:
    """The directory holding tapejit's compiled kernels."""
    chosen = os.environ.get("NUMBA_CACHE_DIR")
    if chosen:
        return chosen
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tapejit", "numba")


@contextmanager
def _ours():
    before = config.CACHE_DIR
    config.CACHE_DIR = cache_dir()
    try:
        yield
    finally:
        config.CACHE_DIR = before


def njit(*args, **kwargs):
    """``numba.njit``; with ``cache=True`` the function is cached in ``cache_dir()``."""
    if not kwargs.get("cache"):
        return numba.njit(*args, **kwargs)
    if len(args) == 1 and callable(args[0]) and not kwargs.keys() - {"cache"}:
        with _ours():
            return numba.njit(args[0], cache=True)
    decorate = numba.njit(*args, **kwargs)

    def apply(fn):
        with _ours():
            return decorate(fn)
    return apply


# The work a compile is for, as the user sees it, with how long a cold compile of all it needs
# takes on a 2-core machine (docs/performance.md) and the entry points it loads. The notice is one
# line per kind of work and process: a first eager gradient loads a few forward entries, its
# passes and one reverse tier, and says so once, not once for each.
WORK = (
    ("the eager gradient's", "5-45 seconds",
     ("scalar_sweep", "array_sweep", "common_sweep", "common_run_sweep", "common_lines_sweep",
      "rare_sweep", "eager_sweep", "need_pass", "data_pointers", "build_tape", "arena_offsets",
      "whole_prepare", "whole_arena", "whole_outputs", "mark_swept", "unread_values",
      "line_sums")),
    ("compiled replay's", "1-2 minutes",
     ("sweep", "local_pass", "seed_pass", "run_pass", "reverse_run_pass", "spin_wait", "serve",
      "gemm_batch")),
    ("forward mode's", "15-30 seconds", ("tangent_sweep",)),
    ("scipy.special's", "5-10 seconds", ("special_value", "special_partial", "incgamma",
                                          "incbeta")),
)
EAGER = WORK[0]
_WORK_OF = {name: (what, took) for what, took, names in WORK for name in names}
_announced = set()  # the kinds of work (WORK's first column) this process has announced
_lock = threading.Lock()


def work_of(name: str):
    """(whose kernels, how long) for a compile of entry point `name`: the eager recorder's
    forward entries (``elementwise_*``) are the eager gradient's; an entry outside ``WORK`` is
    its own work of a few seconds."""
    if name.startswith("elementwise"):
        return EAGER[:2]
    return _WORK_OF.get(name, (f"{name}'s", "a few seconds"))


@contextmanager
def compile_notice(what: str):
    """Print one line to stderr if the body (a load from the cache, or a compile of entry point
    `what`) is still running after NOTICE_AFTER seconds: that is a compile. Once a
    process for each kind of work (``WORK``): the eager gradient's forward entries, passes and
    tier say it once between them, a later compiled replay's sweep once more."""
    def tell():
        whose, took = work_of(what)
        with _lock:
            if whose in _announced:
                return
            _announced.add(whose)
        print(f"tapejit: compiling {whose} Numba kernels for this machine, once ({took} on 2 "
              f"cores; cached in {cache_dir()}). `python -m jit.warmup` compiles them all ahead "
              f"of time.", file=sys.stderr, flush=True)

    timer = threading.Timer(NOTICE_AFTER, tell)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def load(module, name: str, notice: bool = True):
    """``module.name``, loaded from the cache (``jit._cache_load``) or compiled for its one
    signature (``SIG_<NAME>``) under a compile notice (unless `notice` is False): the first call
    then finds it ready, and types its array arguments without importing ``numpy.ma``
    (``jit._array_typeof``)."""
    from ._array_typeof import install
    from ._cache_load import load_cached

    fn, args = entry(module, name)
    if args is not None and args not in fn.overloads and not load_cached(fn, args):
        from ._blas_check import defer

        defer()  # (Numba's compile refreshes its registries first; jit/_blas_check.py)
        with compile_notice(name) if notice else nullcontext():
            fn.compile(args)
    install(fn)
    return fn


def entry(module, name: str):
    """(dispatcher, the argument types of its one signature ``SIG_<NAME>``): the type tuple a real
    call looks up (a signature string would be cached under a key that calls never hit, and the
    first call would compile again). (function, None) for a plain function (NUMBA_DISABLE_JIT)."""
    fn = getattr(module, name)
    sig = getattr(module, "SIG_" + name.upper(), None)
    if sig is None or not hasattr(fn, "overloads"):
        return fn, None
    from numba.core.sigutils import normalize_signature

    return fn, tuple(normalize_signature(sig)[0])
