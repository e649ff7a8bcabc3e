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


# how long a cold compile of an entry point takes on a 2-core machine (docs/performance.md:
# sweep 60-75 CPU-s by the machine's load, up to ~2x that in wall time; eager_sweep 25-30;
# tangent_sweep ~17; common_sweep 17-23; array_sweep 15-20; scalar_sweep ~3;
# elementwise_unary and elementwise_arithmetic 2-3; elementwise_power 1.5-2; the rare binary
# rows' elementwise_arctan2, _hypot, _logaddexp ~0.6-1.1, _fmax_fmin ~1-1.5), by the seconds it
# stands for; an entry not named takes a few seconds
COMPILE_TIME = {"sweep": (120, "1-2 minutes"), "eager_sweep": (60, "30-60 seconds"),
                "tangent_sweep": (30, "15-30 seconds"), "array_sweep": (30, "15-30 seconds"),
                "common_sweep": (30, "15-30 seconds"),
                "special_value": (10, "5-10 seconds"), "special_partial": (10, "5-10 seconds"),
                "line_sums": (5, "a few seconds")}
FEW_SECONDS = (5, "a few seconds")
_announced = {}  # module -> the longest compile time this process has announced for it
_lock = threading.Lock()


@contextmanager
def compile_notice(what: str, module: str = ""):
    """Print one line to stderr if the body (a load from the cache, or a compile of entry point
    `what`) is still running after NOTICE_AFTER seconds: that is a compile. Once a process for
    each module, unless a later compile in it takes longer than the one announced (a few seconds
    for a small entry, then the sweep's minute, is not silent)."""
    def tell():
        seconds, took = COMPILE_TIME.get(what, FEW_SECONDS)
        with _lock:
            if _announced.get(module, 0) >= seconds:
                return
            _announced[module] = seconds
        print(f"tapejit: compiling Numba kernels for this machine ({what}; once, {took} on 2 "
              f"cores; cached in {cache_dir()}). `python -m jit.warmup` does this ahead of "
              f"time.", file=sys.stderr, flush=True)

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
        with compile_notice(name, module.__name__) if notice else nullcontext():
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
