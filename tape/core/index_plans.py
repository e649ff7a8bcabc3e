"""Index maps by shape and key: every indexing and shape op is a gather y[i] = x[idx[i]], and its
map (the flat source positions of x[key] in an array of x's shape) depends on the shape and the
key alone. Maps are kept per process: by (shape, key) for basic keys (ints, slices, None,
Ellipsis), by the key's contents for integer-array keys, so that an index a loop repeats every
step is mapped once."""
from __future__ import annotations

import math

import numpy as np


def index_map(shape, key):
    """Flat source positions of x[key] for an array of `shape` (any NumPy index)."""
    return np.arange(math.prod(shape), dtype=np.int64).reshape(shape)[key]


_BASIC_MAPS = {}  # (shape, hashable basic key) -> (index map, is a pure reshape)


def _hashable(key):
    """A hashable form of a basic index (ints, slices, None, Ellipsis), or None."""
    if type(key) is not tuple:
        if type(key) is slice:
            return (("s", key.start, key.stop, key.step),)
        key = (key,)
    out = []
    for k in key:
        if type(k) is slice:
            out.append(("s", k.start, k.stop, k.step))
        elif k is None or k is Ellipsis or type(k) is int:
            out.append(k)
        else:
            return None
    return tuple(out)


def basic_plan(shape, key, hk):
    """(index map of x[key] for x of `shape`, whether it only reshapes x); kept read-only by
    (shape, hk) when hk (``_hashable(key)``) is not None."""
    hit = _BASIC_MAPS.get((shape, hk)) if hk is not None else None
    if hit is None:
        idx = index_map(shape, key)
        if not isinstance(idx, np.ndarray):
            idx = np.asarray(idx, dtype=np.int64)
        flat = idx.reshape(-1)
        hit = (idx, idx.size == flat.size == math.prod(shape) and bool(
            (flat == np.arange(flat.size)).all()))
        if hk is not None:
            if len(_BASIC_MAPS) > 1024:
                _BASIC_MAPS.clear()
            idx.flags.writeable = False
            _BASIC_MAPS[(shape, hk)] = hit
    return hit


_INT_MAPS = {}  # ("gather", shape, integer key's dtype, shape and bytes) -> read-only index map


def integer_map(shape, key, ck):
    """Index map of x[key] for x of `shape` and an integer array key, kept read-only by ck (the
    key's cache key, or None for a key too large to compare by its bytes)."""
    idx = _INT_MAPS.get(ck) if ck is not None else None
    if idx is None:
        idx = index_map(shape, key)
        if ck is not None:
            if len(_INT_MAPS) > 1024:
                _INT_MAPS.clear()
            idx.flags.writeable = False
            _INT_MAPS[ck] = idx
    return idx
