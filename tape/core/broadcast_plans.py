"""Broadcast plans of elementwise rows, by shapes alone: the strided loop nest a row's sweep
reads its operands through, and the flat index maps for the kernels that read them by position.
"""
from __future__ import annotations

import math

import numpy as np


def _strides(xshape, shape, one):
    """Element strides of an operand of `xshape` (None: of `shape`) read broadcast to `shape`."""
    if one:
        return [0] * len(shape)
    xshape = shape if xshape is None else (1,) * (len(shape) - len(xshape)) + tuple(xshape)
    out, step = [], 1
    for d, xd in zip(reversed(shape), reversed(xshape)):
        out.append(step if xd == d and d != 1 else 0)
        step *= xd
    return out[::-1]


def strided_broadcast(shape, ashape, fa, bshape, fb):
    """The row's broadcast as nested loops, when it collapses to at most three dimensions:
    ``(n0, n1, n2, a0, a1, a2, b0, b1, b2)``, element j = (i0 * n1 + i1) * n2 + i2 reading
    operand a at i0 * a0 + i1 * a1 + i2 * a2 (and b likewise); else ``()``. Such a row records
    no index maps: the sweeps loop over these (W2's (25, 1000, 10) subtract: 557 -> ~100 us), or
    write a block's maps from them into a scratch (``jit.families.elementwise.strided_maps``)."""
    n = math.prod(shape)
    if n == 0:
        return ()
    dims = [[d, sa, sb] for d, sa, sb in zip(shape, _strides(ashape, shape, fa),
                                             _strides(bshape, shape, fb)) if d != 1]
    merged = []
    for d, sa, sb in reversed(dims):  # innermost first
        if merged and sa == merged[-1][1] * merged[-1][0] and sb == merged[-1][2] * merged[-1][0]:
            merged[-1] = [merged[-1][0] * d, merged[-1][1], merged[-1][2]]
        else:
            merged.append([d, sa, sb])
    if len(merged) > 3:
        return ()
    merged += [[1, 0, 0]] * (3 - len(merged))
    n0, n1, n2 = (m[0] for m in reversed(merged))
    a = tuple(m[1] for m in reversed(merged))
    b = tuple(m[2] for m in reversed(merged))
    return (n0, n1, n2) + a + b


_BROADCAST_MAPS = {}  # (from shape, to shape) -> read-only flat index map, shared by all tapes


def broadcast_map(xshape, shape):
    """Flat positions in an array of `xshape` read by each element of its broadcast to `shape`."""
    key = (xshape, shape)
    m = _BROADCAST_MAPS.get(key)
    if m is None:
        if len(_BROADCAST_MAPS) > 1024:
            _BROADCAST_MAPS.clear()
        ids = np.arange(math.prod(xshape), dtype=np.int64).reshape(xshape)
        m = np.ascontiguousarray(np.broadcast_to(ids, shape)).reshape(-1)
        m.flags.writeable = False
        _BROADCAST_MAPS[key] = m
    return m
