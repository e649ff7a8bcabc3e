"""Recording reductions and scans: each reads its operand as a (P, R, Q) view and reduces or
scans the middle axis (``jit.families.reduce``, ``jit.families.scan``); reduced axes that are
not adjacent are first moved to a trailing block by a transpose."""
from __future__ import annotations

import math

import numpy as np

from jit.families import layouts
from jit.table import OPCODE, TABLE

from .loop_values import MAX_SUM_LINE, MIN_SUM_LINES, line_sums
from .record import _shape, _size, normalize_axes, reshape, transpose
from .state import state
from .tape import current_tape
from .tensor import Tensor, array_row, general_tape, import_slot, plain, recording, result, \
    slot_in
from .values import check_dtype, constant
from .value_pool import MIN_CELLS as POOLED, reduce_into

F64 = np.dtype(np.float64)
SUM = OPCODE["sum"]


def _prq(x, axes):
    """Move reduced axes to a contiguous block if needed; return (x', P, R, Q)."""
    shape = _shape(x._v)
    nd = len(shape)
    if _apart(axes):
        keep = tuple(i for i in range(nd) if i not in axes)
        x = transpose(x, keep + axes)
        shape = _shape(x._v)
        axes = tuple(range(len(keep), nd))
    if not axes:
        return x, math.prod(shape), 1, 1
    P = math.prod(shape[: axes[0]])
    R = math.prod(shape[axes[0]: axes[-1] + 1])
    Q = math.prod(shape[axes[-1] + 1:])
    return x, P, R, Q


def _apart(axes):
    """Whether reduced axes are not adjacent (``_prq`` then moves them to a trailing block)."""
    return bool(axes) and axes != tuple(range(axes[0], axes[-1] + 1))


_REDUCE_PLANS = {}  # (shape, axis None or an int) -> (axes, P, R, Q, ints key) of adjacent axes
# the ufunc reduction NumPy's function runs on an ndarray (np.sum(a, axis=...) is
# np.add.reduce(a, axis=...) after a Python wrapper that costs more than a small sum)
_REDUCE_BY = {np.sum: np.add.reduce, np.prod: np.multiply.reduce, np.max: np.maximum.reduce,
              np.min: np.minimum.reduce}
# name -> (opcode, its ufunc's reduction): called with positional arguments (array, axis,
# dtype, out, keepdims), which NumPy parses faster than keywords
_REDUCER = {p.name: (c, _REDUCE_BY[p.ufunc]) for c, p in enumerate(TABLE)
            if p.family == "reduce" and p.ufunc in _REDUCE_BY}


def reduce(name, x, axis=None, keepdims=False):
    if type(x) is not Tensor:
        x = plain(constant(x))
    xv = x._v
    if type(xv) is np.ndarray and xv.ndim and (axis is None or type(axis) is int):
        plan = _REDUCE_PLANS.get((xv.shape, axis))
        by = _REDUCER.get(name)
        if plan is not None and by is not None:  # an array reduced over adjacent axes, seen before
            axes, P, R, Q, key = plan
            code, reducer = by
            y = line_sums(xv, P, R, _reduced_shape(xv.shape, axes, keepdims)) \
                if Q == 1 and P >= MIN_SUM_LINES and R <= MAX_SUM_LINE and code == SUM else None
            if y is None:
                y = reducer(xv, axes, None, None, keepdims) if P * Q < POOLED else \
                    reduce_into(reducer, xv, axes, keepdims)
            if type(y) is not np.ndarray or y.dtype is not F64 or not y.flags.c_contiguous \
                    or not y.ndim:
                y = float(y) if type(y) is np.float64 else check_dtype(y, name)
            if not x._rg:
                return plain(y)
            t = state.rec
            if t is not None and not t.sealed:  # (_reduce_row's rows, from this one read)
                off = t.index_cache.get(key)
                if off is None:
                    off = t.index_cache[key] = t.add_ints(layouts.encode_reduce(P, R, Q))
                sx = x._slot if x._tape is t else import_slot(t, x)
                if type(y) is float:  # (a 0-d value goes to sv: Tape.row)
                    return result(y, t, t.row(code, sx, -1, y, 1, off))
                return array_row(t, code, sx, -1, y, y.size, off)
            if not state.grad:
                return plain(y)
            return _reduce_row(code, x, y, P, R, Q)
    code = OPCODE[name]
    ufunc = TABLE[code].ufunc
    nd = 0 if type(xv) is float else xv.ndim
    axes = normalize_axes(axis, nd)
    rec = recording(x)
    if not (rec and _apart(axes)):
        y = check_dtype(ufunc(xv, axis=axes if nd else None, keepdims=keepdims), name)
        if not rec:
            if nd and (axis is None or type(axis) is int):
                _note_plan(xv.shape, axis, axes, *_prq(x, axes)[1:])  # (no gradient: no rows)
            return plain(y)
    xs, P, R, Q = _prq(x, axes)
    if xs is not x:  # reduced axes that are not adjacent, moved to a trailing block: their
        # value is that block's reduction, as the replay computes it (NumPy's own order over
        # the original axes can differ by an ulp)
        shape = tuple(1 if i in axes else d for i, d in enumerate(_shape(xv))
                      if keepdims or i not in axes)
        y = check_dtype(np.reshape(ufunc(np.reshape(xs._v, (P, R)), axis=1), shape), name)
    elif nd and (axis is None or type(axis) is int):
        _note_plan(xv.shape, axis, axes, P, R, Q)
    return _reduce_row(code, xs, y, P, R, Q)


def _reduced_shape(shape, axes, keepdims):
    """The shape of a reduction of `shape` over `axes`."""
    return tuple(1 if i in axes else d for i, d in enumerate(shape) if keepdims or i not in axes)


def _note_plan(shape, axis, axes, P, R, Q):
    """Keep the plan of a reduction over adjacent axes for the next call of this shape."""
    if len(_REDUCE_PLANS) > 1024:
        _REDUCE_PLANS.clear()
    _REDUCE_PLANS[(shape, axis)] = (axes, P, R, Q, ("prq", P, R, Q))


def _reduce_row(code, xs, y, P, R, Q):
    """Record the reduce row of y over the (P, R, Q) view of xs."""
    t = state.rec
    if t is None or t.sealed:
        t = general_tape()  # (not None: the caller records)
        fast = False
    else:
        fast = type(y) is not float  # (a 0-d value goes to sv: Tape.row)
    key = ("prq", P, R, Q)
    off = t.index_cache.get(key)
    if off is None:
        off = t.index_cache[key] = t.add_ints(layouts.encode_reduce(P, R, Q))
    sx = xs._slot if xs._tape is t else import_slot(t, xs)
    return array_row(t, code, sx, -1, y, y.size, off) if fast else \
        result(y, t, t.row(code, sx, -1, y, _size(y), off))


def scan(name, x, axis=None):
    code = OPCODE[name]
    if type(x) is not Tensor:
        x = plain(constant(x))
    if axis is None:
        x = reshape(x, -1)
        axis = 0
    xv = x._v
    nd = 0 if type(xv) is float else xv.ndim
    (ax,) = normalize_axes(axis, nd)
    y = check_dtype(TABLE[code].ufunc(xv, axis=ax) if nd else TABLE[code].ufunc(xv), name)
    if not recording(x):
        return plain(y)
    shape = _shape(xv)
    P, R, Q = math.prod(shape[:ax]), (shape[ax] if nd else 1), math.prod(shape[ax + 1:])
    t = current_tape()
    off = t.add_ints(layouts.encode_reduce(P, R, Q))
    return result(y, t, t.row(code, slot_in(t, x), -1, y, _size(y), off))
