"""One spare adjoint arena per thread, reused by the next backward.

An eager backward zeroes a fresh arena for the adjoints of its live slots. For large arrays the
first write to fresh memory is a page fault per 4 KiB, and whether glibc hands back memory
already mapped depends on what else the process freed: W2's eager gradient measured 4.5 or
9.7 ms by that alone on one machine, W3's 36 or 84 ms. So a large arena's memory is kept
after its backward, once nothing can still read it, and the next backward of the same thread
zeroes it (a memset over mapped pages) instead of faulting in new pages. Small arenas come from
malloc's free lists without faults and are not kept; nor are huge ones (memory held idle).
"""
from __future__ import annotations

import sys
import threading

import numpy as np

MIN_CELLS = 1 << 15  # 256 KiB: below this malloc reuses mapped memory
MAX_CELLS = 1 << 24  # 128 MiB: the most a thread holds idle between backwards
_EMPTY = np.zeros(0)


def _counts_of_sole_references():
    """``recycle``'s two reference counts of an array nothing else holds, measured with code of
    its shape (an interpreter that borrows references on its stack counts fewer, never more),
    or None when a view made elsewhere does not raise them (then nothing is ever kept)."""
    def arena_alone(G):
        return sys.getrefcount(G)

    def owner_alone(G):
        owner = G.base
        return sys.getrefcount(owner)

    def caller(with_view):
        G = np.zeros(2)  # an arena owning its memory
        view = G[:1] if with_view else None
        alone = arena_alone(G)
        buf = np.zeros(2)
        G = buf[:1]  # an arena made from the spare
        view = buf[1:] if with_view else None
        del buf
        return alone, owner_alone(G), view

    alone, shared = caller(False)[:2], caller(True)[:2]
    return alone if shared[0] > alone[0] and shared[1] > alone[1] else None


_ALONE = _counts_of_sole_references()
if _ALONE is None:
    MIN_CELLS = MAX_CELLS + 1  # (no arena is ever kept)


class _Spare(threading.local):
    buf = None  # a float64 array owning its memory, or None


_spare = _Spare()


def zeroed(n: int, holes=()) -> np.ndarray:
    """A zeroed float64 arena of n cells: the thread's spare (taken out of the pool while in
    use, so a backward run from a hook meanwhile gets its own) when it is large enough.
    `holes`: sorted, disjoint (start, stop) ranges that the spare's zeroing skips (their cells
    hold anything: the backward writes them whole)."""
    buf = _spare.buf
    if buf is not None and MIN_CELLS <= n <= buf.size:
        _spare.buf = None
        G = buf[:n]
        at = 0
        for lo, hi in holes:
            G[at:lo].fill(0.0)
            at = hi
        G[at:].fill(0.0)
        return G
    return np.zeros(n)


def recycle(G: np.ndarray) -> None:
    """Keep G's memory as the thread's spare when nothing else can read it: no view of it (an
    adjoint handed out as a view, a seed sent on to an older tape, a split backward's state)
    and no other name for G than the caller's. Call it last, with G's one reference."""
    if sys.getrefcount(G) > _ALONE[0]:  # (the caller's name and this parameter only)
        return
    owner = G.base
    if owner is None:
        owner = G
    elif type(owner) is not np.ndarray or sys.getrefcount(owner) > _ALONE[1]:
        return  # (G.base and the name `owner` only)
    if not MIN_CELLS <= owner.size <= MAX_CELLS:
        return
    held = _spare.buf
    if held is None or owner.size > held.size:
        _spare.buf = owner


def spare() -> np.ndarray:
    """The thread's spare, taken out of the pool, for a jitted arena that slices it when large
    enough (``jit.whole_arena``); an empty array when there is none. Give it back with
    ``keep`` (the arena G is internal to that backward: no view of it leaves)."""
    buf = _spare.buf
    if buf is None:
        return _EMPTY
    _spare.buf = None
    return buf


def keep(buf: np.ndarray, G: np.ndarray) -> None:
    """After a backward over arena G made from `buf` (``spare``): keep the larger of the two
    owners as the thread's spare."""
    if G.size > buf.size:  # (G was allocated: not a view of buf)
        buf = G
    if MIN_CELLS <= buf.size <= MAX_CELLS:
        held = _spare.buf
        if held is None or buf.size > held.size:
            _spare.buf = buf


def clear() -> None:
    """Drop the calling thread's spare."""
    _spare.buf = None


def held_cells() -> int:
    """How many float64 cells the calling thread's spare holds."""
    buf = _spare.buf
    return 0 if buf is None else buf.size
