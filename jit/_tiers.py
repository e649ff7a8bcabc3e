"""The eager backward's reverse sweep in tiers, so that a first gradient on an empty cache
compiles only what its tape needs.

``sweep`` holds both sweeps, the seeded runs and every family kernel: ~60 CPU-s to compile cold on
a 2-core machine. An eager backward needs much less of it: a reverse with no forward range and
no part, which never seeds. So it runs smaller entry points of ``jit._interp`` instead, chosen
by one NumPy scan of the needed rows (``tier_of``, ~10 us, plus ~1 ns a row): ``scalar_sweep``
(0-d rows and gathers, ~3 CPU-s cold) when those are all the tape's needed rows; else
``array_sweep`` (the benchmarks' array rows: unary, + - * /, reductions, gathers, scatters, and
their blocked runs, ~15 CPU-s) when every needed array row is its; else ``common_sweep`` (those
and the usual scientific program's power, maximum, minimum, select and matmul rows, ~15 CPU-s),
which stops above a blocked run (elementwise rows of >= 4096 elements) for
``common_run_sweep`` (~3.6 CPU-s), above a binary row broadcast by strides or summing into a
one-element operand for ``common_lines_sweep`` (~3 CPU-s), and above a scan or a rare binary
op's row (arctan2, hypot, ...) for ``rare_sweep`` (~3.9 CPU-s), each compiled only for a tape
that has such rows. Each of
them sweeps the 0-d rows among its rows too (the same ``_reverse_scalars`` loop) and stops
above a row it does not sweep, saying where; ``eager_sweep`` (every kind of row, ~22-25 CPU-s)
takes a tape with a rare binary row the rare tier leaves (broadcast by strides, or summing
into a one-element operand), and the rest of a range no other tier can go on with. Each is
loaded, or compiled under the eager gradient's one notice, the first time it is called: a
scalar loop (W1) compiles only the first, an array program of the benchmarks' rows (W2, W3, W5) only
``array_sweep``, one with ``x ** p``, np.clip, np.where or a small ``a @ b`` only
``common_sweep``, one with a cumsum or an arctan2 ``rare_sweep`` too, and no eager backward
compiles ``sweep``. All run ``sweep``'s own code for each row, so the bits are the same. Once
a tape has loaded ``scalar_sweep``, it goes first on every tape, and its own scan of the rows it
leaves replaces the NumPy one when they are all the array tier's.
"""
from __future__ import annotations

import numpy as np

from ._cache import load

SCALAR, ARRAY, COMMON, RARE, EAGER = 0, 1, 2, 3, 5
_RARE_ONE = 4  # (a rare binary row with a one-element operand: EAGER if that operand's adjoint
# is needed, which sums its terms pairwise, else RARE)
# scalar_sweep is loaded in this process (a tape chose it), so it goes first: a scalar loop's
# backward then skips the NumPy scan (30 us of W1's 14,010 rows, ~100 us with R out of cache)
_scalar_first = False
_TABLES = []  # [(per row code: its tier, as above; the need bits the scalar tier does not
# sweep a gather with; per op: whether the rare tier sweeps its array rows)], built at the first
# scan


def eager_reverse(R, S, VA, GO, sv, G, IA, FA, need, lo, hi):
    """Adjoints through rows hi-1 down to lo, as ``reverse_sweep(..., lo, hi)`` with its default
    part (no worker share), in the tier ``tier_of`` chooses: the scalar tier; the array tier;
    the common tier, and from the top down whichever sweeps the rows where the last stopped:
    the rare tier, the common tier's blocked runs (``common_run_sweep``) or its binary rows
    split into lines (``common_lines_sweep``); or the eager tier. (A tier that stops above a row
    no later tier sweeps hands the rest on, to the eager tier at last: never met when the scan
    chose it, and never a wrong row.) Once the scalar tier is loaded in a process, it goes
    first on every tape, as its own scan says which tier the rows it leaves need (no NumPy
    pass: a scalar loop's backward costs what it did before the scan)."""
    global _scalar_first
    tier = SCALAR if _scalar_first else tier_of(R, need, lo, hi)
    if tier == SCALAR:
        _scalar_first = True
        stop = _scalar(R, S, VA, GO, sv, G, IA, FA, need, lo, hi)
        if stop == lo:
            return
        if stop >= 0:  # (every needed array row left is the array tier's: its scan)
            hi, tier = stop, ARRAY
        else:
            hi = -1 - stop
            tier = max(tier_of(R, need, lo, hi), ARRAY)
    if tier == EAGER:
        _eager(R, S, VA, GO, sv, G, IA, FA, need, lo, hi)
        return
    bulk = _array if tier == ARRAY else _common
    while hi > lo:
        stop = bulk(R, S, VA, GO, sv, G, IA, FA, need, lo, hi)
        if stop == lo:
            return
        if stop < 0:  # (the common tier, above a blocked run)
            hi = -1 - stop
            stop = _common_run(R, S, VA, GO, sv, G, IA, FA, need, lo, hi)
        elif _TABLES[0][2][R[stop - 1, 0] & 255]:  # (above a rare row)
            hi = stop
            stop = _rare(R, S, VA, GO, sv, G, IA, FA, need, lo, hi)
        else:  # (above a binary row split into lines, or a row of no later tier)
            hi = stop
            stop = _common_lines(R, S, VA, GO, sv, G, IA, FA, need, lo, hi)
        if stop == hi:  # no tier goes on
            _eager(R, S, VA, GO, sv, G, IA, FA, need, lo, hi)
            return
        hi = stop


def tier_of(R, need, lo, hi):
    """The tier for rows lo..hi-1: SCALAR when every needed row is a 0-d row of 0-d operands or
    a gather with need bits 1 and CLEAR only (the scalar tier's), else ARRAY when every needed
    array row is one the array tier sweeps (``_ARRAY_TIER``), else COMMON when every one is the
    common tier's (``_COMMON_TIER``), else RARE (scans or rare binary ops among them: the
    common and rare tiers in turn), or EAGER when a rare binary row among them is one the rare
    tier leaves (broadcast by strides, or summing into a one-element operand). NumPy over the
    rows' side-row column, then a table lookup of the array rows' codes: ~10 us, plus ~1 ns a
    row."""
    if not _TABLES:
        _TABLES.append(_tables())
    by_code, other_bits, _ = _TABLES[0]
    rows = np.flatnonzero(R[lo:hi, 3] >= 0)
    rows += lo
    nd = need[rows]
    codes = R[rows, 0]
    codes[nd == 0] = 0  # (an unneeded row counts as none: code 0, an input row's)
    tier = by_code[codes & 8191]
    top = int(tier.max(initial=SCALAR))
    if top == SCALAR and np.any(nd & other_bits):
        return ARRAY  # (a gather with a compiled plan's need bit)
    if top == _RARE_ONE:
        one = tier == _RARE_ONE
        sums = nd[one] & (codes[one] >> 8).astype(np.uint8) & 3
        return EAGER if np.any(sums) else RARE
    return top


def _tables():
    from . import _interp

    op_tier = np.where(_interp._ARRAY_TIER != 0, ARRAY,
                       np.where(_interp._COMMON_TIER != 0, COMMON, RARE))
    op_tier[_interp._FAMILY == _interp.GATHER] = SCALAR
    op_tier[_interp._FAMILY == _interp.INPUT] = SCALAR  # (no operands: never needed)
    codes = np.arange(8192)  # (op | flags << 8: five flag bits)
    op = codes & 255
    by_code = np.where(op < len(op_tier), op_tier[np.minimum(op, len(op_tier) - 1)], EAGER)
    rare_binary = (by_code == RARE) & (_interp._FAMILY[np.minimum(op, len(op_tier) - 1)]
                                       == _interp.BINARY)
    by_code[rare_binary & ((codes >> 8) & 3 != 0)] = _RARE_ONE
    by_code[rare_binary & ((codes >> 8) & 16 != 0)] = EAGER
    return (by_code.astype(np.int8), np.uint8(255 & ~_interp._SCALAR_TIER_BITS),
            _interp._RARE_TIER != 0)


def _loaded_at_first_call(name: str, entry: str):
    """A stand-in for the tier `entry` of ``jit._interp``: its first call loads the entry (or
    compiles it, under the compile notice) and rebinds module name `name` to the compiled
    function, so later calls go straight to Numba."""
    def first_call(*args):
        from . import _interp

        fn = globals()[name] = load(_interp, entry)
        return fn(*args)

    first_call.__name__ = name
    return first_call


_scalar = _loaded_at_first_call("_scalar", "scalar_sweep")
_array = _loaded_at_first_call("_array", "array_sweep")
_common = _loaded_at_first_call("_common", "common_sweep")
_common_run = _loaded_at_first_call("_common_run", "common_run_sweep")
_common_lines = _loaded_at_first_call("_common_lines", "common_lines_sweep")
_rare = _loaded_at_first_call("_rare", "rare_sweep")
_eager = _loaded_at_first_call("_eager", "eager_sweep")
