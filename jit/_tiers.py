"""The eager backward's reverse sweep in tiers, so that a first gradient on an empty cache
compiles only what its tape needs.

``sweep`` holds both sweeps, the seeded runs and every family kernel: ~60 CPU-s to compile cold on
a 2-core machine. An eager backward needs much less of it: a reverse with no forward range and
no part, which never seeds. So it runs smaller entry points of ``jit._interp`` instead:
``scalar_sweep`` (0-d rows and gathers, ~3 CPU-s cold) from the top of the range, which stops at
the first row it does not sweep and says where, and whether the needed rows below are all the
array tier's (``common_rows`` checks the common tier's); then on what is left, if anything is, ``array_sweep`` (the benchmarks' array rows: unary, + - * /,
reductions, gathers, scatters, and their blocked runs, ~15 CPU-s) if they are all its,
``common_sweep`` (those and the usual scientific program's power, maximum, minimum, select and
matmul rows, ~17 CPU-s) if they are all its, else ``eager_sweep`` (every kind of row, without the
seeded runs, ~25 CPU-s: scans and the rare binary ops, arctan2, hypot, ...). Each is loaded, or
compiled under its own compile notice, the first time it is called: a scalar loop (W1) compiles
only the first, an array program of the benchmarks' rows (W2, W3, W5) the first two, one with
``x ** p``, np.clip, np.where or a small ``a @ b`` the first and ``common_sweep``, and no eager
backward compiles ``sweep``. All run ``sweep``'s own code for each row, so the bits are the
same.
"""
from __future__ import annotations

import numpy as np

from ._cache import load


def eager_reverse(R, S, VA, GO, sv, G, IA, FA, need, lo, hi):
    """Adjoints through rows hi-1 down to lo, as ``reverse_sweep(..., lo, hi)`` with its default
    part (no worker share): the scalar tier from the top, then below the row where it stopped
    the array tier, the common tier when a row there is not the array tier's, or the eager tier
    when one is not the common tier's either. (The array and common tiers stop above a row they
    do not sweep, and the eager tier goes on from there: never met when the scalar tier's scan
    chose them, and never a wrong row.)"""
    stop = _scalar(R, S, VA, GO, sv, G, IA, FA, need, lo, hi)
    if stop < 0:  # (-1 - the row: a row below is not the array tier's)
        stop = -1 - stop
        if common_rows(R, need, lo, stop):
            stop = _common(R, S, VA, GO, sv, G, IA, FA, need, lo, stop)
        if stop > lo:
            _eager(R, S, VA, GO, sv, G, IA, FA, need, lo, stop)
    elif stop > lo:
        stop = _array(R, S, VA, GO, sv, G, IA, FA, need, lo, stop)
        if stop > lo:
            _eager(R, S, VA, GO, sv, G, IA, FA, need, lo, stop)


def common_rows(R, need, lo, hi):
    """Whether every needed array row of rows lo..hi-1 is one the common tier sweeps
    (``_COMMON_TIER``). In NumPy, a few microseconds, for the tapes the scalar tier's scan did
    not give the array tier only: ``scalar_sweep``'s code stays that of one choice."""
    from ._interp import _COMMON_TIER

    array = (need[lo:hi] != 0) & (R[lo:hi, 3] >= 0)
    return bool(np.all(_COMMON_TIER[R[lo:hi, 0][array] & 255]))


def _loaded_at_first_call(name: str, entry: str):
    """A stand-in for the tier `entry` of ``jit._interp``: its first call loads the entry (or
    compiles it, under its notice) and rebinds module name `name` to the compiled function, so
    later calls go straight to Numba."""
    def first_call(*args):
        from . import _interp

        fn = globals()[name] = load(_interp, entry)
        return fn(*args)

    first_call.__name__ = name
    return first_call


_scalar = _loaded_at_first_call("_scalar", "scalar_sweep")
_array = _loaded_at_first_call("_array", "array_sweep")
_common = _loaded_at_first_call("_common", "common_sweep")
_eager = _loaded_at_first_call("_eager", "eager_sweep")
