"""Large recorded values' memory, kept by the thread for its next recordings.

A tape keeps every value alive until its backward, and the backward drops them all at once. For
arrays of 128 KiB and more, glibc's malloc hands out fresh pages (mmap, or a heap top it has
just trimmed), and the first write to each 4 KiB page is a page fault: in W2 (three 2 MB values
a call) the faults cost more than the arithmetic, and whether they happen depends on what else
the process freed before (glibc's dynamic mmap threshold). So when a backward releases a tape,
the memory of each large value that nothing else can still read goes to the thread's pool, and
the thread's next ops of the same size compute their results into it (``take``), over pages
already mapped.

Nothing else can read a value when the tape's list is its only reference and, for a view, the
view is its owner's only reference: a tensor, a view, a saved value, a hook's closure, a
``numpy()`` of it or another tape all hold references (an address kept without a reference
would be a use after free already). The counts that mean "only the tape" are measured at import
by the same code on arrays of known sharing; where a view does not raise them (an interpreter
that borrows references), nothing is ever kept. Only writable float64 arrays that own their
memory (allocated by NumPy) and that no weak reference reaches (weak references are not
counted, and a kept owner would stay reachable through one) are kept: a leaf's read-only view
of the caller's buffer, memory from another library or a memory map never is.

Large constants' copies (``values.constant``) and the large adjoints a matmul rule computes in
the backward (``backward._run_escape``, given back as soon as they are added) use the same
memory: once the values are kept, glibc no longer sees the large frees that kept its heap
warm for them.

Per thread, at most ``MAX_CELLS`` cells are held between backwards, oldest given back dropped
first; a thread's pool goes with the thread. ``clear()`` drops the calling thread's.
"""
from __future__ import annotations

import sys
import threading
from weakref import getweakrefcount

import numpy as np

MIN_CELLS = 1 << 14  # 128 KiB: glibc's default mmap threshold; smaller ones reuse its free lists
MAX_CELLS = 1 << 24  # 128 MiB: the most a thread holds idle between backwards
_F64 = np.dtype(np.float64)


class _Pool(threading.local):
    def __init__(self):
        self.free = {}  # cells -> [owner, ...]: buffers of that many float64 cells
        self.held = {}  # id(owner) -> owner, in the order given back (the oldest dropped first)
        self.cells = 0  # cells held


_pool = _Pool()


def take(shape, n: int) -> np.ndarray:
    """An uninitialized float64 array of `shape` (n cells, n >= MIN_CELLS): a kept buffer of
    exactly n cells when the thread has one, else ``np.empty``."""
    pool = _pool
    lst = pool.free.get(n)
    if not lst:
        return np.empty(shape)
    owner = lst.pop()
    del pool.held[id(owner)]
    pool.cells -= n
    return owner if owner.shape == shape else owner.reshape(shape)


def into(f, a, b):
    """f(a, b), a binary ufunc (arrays or Python floats) or ``np.matmul``, into a kept buffer when the
    thread has one of the result's size. The result's shape is the one NumPy gave these
    operand shapes before (the first call computes as usual and notes it), so a failing or
    new call is NumPy's own. Only float64 operands: their result is float64 exactly as
    without ``out``."""
    key = (f, () if type(a) is float else a.shape, () if type(b) is float else b.shape)
    known = _SHAPES.get(key)
    if known is None:
        return _learnt(key, f(a, b))
    shape, n = known
    if (n < MIN_CELLS or n not in _pool.free or (type(a) is not float and a.dtype is not _F64)
            or (type(b) is not float and b.dtype is not _F64)):
        return f(a, b)
    return f(a, b, out=take(shape, n))


def reduce_into(f, x, axes, keepdims):
    """f(x, axis=axes, keepdims=keepdims), a ufunc's reduction of a float64 array, into a kept
    buffer when the thread has one of the result's size (its shape learnt as ``into``'s)."""
    key = (f, x.shape, axes, keepdims)
    known = _SHAPES.get(key)
    if known is None:
        return _learnt(key, f(x, axis=axes, keepdims=keepdims))
    shape, n = known
    if n < MIN_CELLS or n not in _pool.free or x.dtype is not _F64:
        return f(x, axis=axes, keepdims=keepdims)
    return f(x, axis=axes, keepdims=keepdims, out=take(shape, n))


def unary_into(f, x):
    """f(x), a unary ufunc of a float64 array of at least MIN_CELLS cells, into a kept buffer
    when the thread has one of its size."""
    return f(x, out=take(x.shape, x.size)) if x.dtype is _F64 else f(x)


_SHAPES = {}  # (f, operands' shapes[, axes, keepdims]) -> (result's shape, size)


def _learnt(key, y):
    """y, NumPy's result for `key`, its shape and size noted for the next call."""
    if type(y) is np.ndarray:
        if len(_SHAPES) >= 1024:
            _SHAPES.clear()
        _SHAPES[key] = (y.shape, y.size)
    return y


def give_back(values) -> None:
    """Keep the memory of the large arrays among `values` (a released tape's list of values,
    about to be dropped) that nothing else references. Call with the tape's own list, which
    must be the values' only holder besides the caller's name for the list."""
    if _ALONE is None:
        return
    for owner in _sole_owners(values, _ALONE):
        _keep(owner)


def _sole_owners(values, alone):
    """The owners of the arrays in `values` that nothing but `values` reaches, given `alone`
    (the two reference counts that mean so); with `alone` None, the counts of each array
    instead (``_calibrate``: the same code, so the same counts)."""
    out = []
    for v in values:
        if type(v) is not np.ndarray or (alone is not None and v.size < MIN_CELLS):
            continue
        sole = sys.getrefcount(v)  # (`values`' entry, the name v and the argument)
        owner = v.base
        if owner is None:
            if alone is None:
                out.append((sole, 0))
            elif sole <= alone[0] and _reusable(v, v):
                out.append(v)
            continue
        if type(owner) is not np.ndarray:
            continue
        shared = sys.getrefcount(owner)  # (v's base, the name owner and the argument)
        if alone is None:
            out.append((sole, shared))
        elif sole <= alone[0] and shared <= alone[1] and _reusable(v, owner):
            out.append(owner)
    return out


def _reusable(v, owner):
    """Can `owner`'s memory be reused (v: the value, owner or a view of it)? A weak reference
    to the owner would still reach it once kept (weak references are not counted), so none
    may exist."""
    f = owner.flags
    return (owner.dtype is _F64 and f.owndata and f.writeable and f.c_contiguous and f.aligned
            and v.flags.writeable and MIN_CELLS <= owner.size <= MAX_CELLS
            and not getweakrefcount(owner))


def _keep(owner):
    pool = _pool
    n = owner.size
    held = pool.held
    while held and pool.cells + n > MAX_CELLS:
        old = held.pop(next(iter(held)))
        lst = pool.free[old.size]
        for i, o in enumerate(lst):
            if o is old:
                del lst[i]
                break
        pool.cells -= old.size
    pool.free.setdefault(n, []).append(owner)
    held[id(owner)] = owner
    pool.cells += n


def clear() -> None:
    """Drop the calling thread's kept buffers."""
    pool = _pool
    pool.free, pool.held, pool.cells = {}, {}, 0


def held_cells() -> int:
    """How many float64 cells the calling thread holds."""
    return _pool.cells


def _calibrate():
    """(counts of an owner alone, counts of a view alone with its owner), from ``_sole_owners``
    run on arrays of known sharing, or None when a second view does not raise them."""
    def counts(shared):
        owner = np.zeros(2)
        buf = np.zeros(2)
        values = [owner, buf[:1]]
        extra = (owner[:1], buf[1:]) if shared else None
        del owner, buf
        got = _sole_owners(values, None)
        del extra
        return got

    alone, shared = counts(False), counts(True)
    if len(alone) != 2 or len(shared) != 2:
        return None
    (a_own, _), (a_view, a_base) = alone
    (s_own, _), (s_view, s_base) = shared
    if a_own == a_view and s_own > a_own and s_base > a_base and s_view == a_view:
        return a_own, a_base
    return None


_ALONE = _calibrate()
