"""Recording: run an op eagerly with NumPy and append its row, one function per family.

Everything the kernels should not have to think about is settled here, once, while recording:
dtype (float64 only), broadcasting (an explicit gather row unless an operand has one element),
axes (reductions see a (P, R, Q) view), contiguity (values are C-contiguous), and constants
(copied in, so later mutation by the user cannot change a gradient).
"""
from __future__ import annotations

import math
import operator

import numpy as np

from jit.families import layouts
from jit.table import FLAG_SHIFT, MAP_A, MAP_B, ONE_A, ONE_B, OPCODE, OWN_VALUE, STRIDED, TABLE

from .arrays import _FIELD
from .broadcast_plans import broadcast_map, strided_broadcast
from .conversions import conversion_error
from .index_plans import _BASIC_MAPS, _hashable, basic_plan, index_map, integer_map
from .loop_values import broadcast_value
from .scalar_rules import SCALAR
from .state import state
from .tape import MAX_ROWS, current_tape
from .tensor import Tensor, array_row, general_tape, import_slot, plain, raw, recording, \
    recording_tape, result, slot_in
from .values import check_dtype, constant, refuse_masked
from .value_pool import MIN_CELLS as POOLED, into, take, unary_into


GATHER = OPCODE["gather"]
SCATTER = OPCODE["scatter"]
WHERE = OPCODE["where"]
COPY = OPCODE["copy"]
F64 = np.dtype(np.float64)
_BOOL = np.dtype(bool)

# NumPy ufunc -> elementwise opcode (the table's rows, plus NumPy's aliases of them)
UFUNC_CODE = {p.ufunc: c for c, p in enumerate(TABLE)
              if p.family in ("unary", "binary") and p.ufunc is not None}
UFUNC_CODE[np.fabs] = OPCODE["abs"]
UFUNC_CODE[np.float_power] = OPCODE["power"]
UFUNC_CODE[np.conjugate] = OPCODE["copy"]
# opcode -> the NumPy ufunc that computes an elementwise row's value, None where eager runs the
# replay's own loop (``OWN_VALUE``): one lookup per op instead of a set's and the table's
_VALUE_UFUNC = tuple(None if c in OWN_VALUE else p.ufunc for c, p in enumerate(TABLE))


# ---------------------------------------------------------------------------------------------
# Values and slots


def _size(v):
    return 1 if type(v) is float else v.size


def _shape(v):
    return () if type(v) is float else v.shape


# ---------------------------------------------------------------------------------------------
# Elementwise

_NO_IA = np.zeros(11, np.int64)
# how jit.elementwise finds an operand's data: its object's address and the pointer's offset in
# it (no ctypes call per operand), or the data address itself where the layout is unknown (-1)
_FIELD_OFFSET = -1 if _FIELD is None else _FIELD
_handle = id if _FIELD is not None else (lambda a: a.ctypes.data)
_REAL = frozenset("biuf")  # dtype kinds an elementwise operand converts to float64 exactly


def _elementwise():
    global _run
    from jit import elementwise

    _run = elementwise
    return elementwise


def _run(*args):  # jit.elementwise, imported on first use (import tape does not load Numba)
    return _elementwise()(*args)


def own_unary(code, xv):
    """f(xv) for a primitive in ``OWN_VALUE``, by the loop a replay runs for its row (so the same
    bits on any CPU, where NumPy's ufunc picks a per-CPU loop); a float for 0-d, as
    ``check_dtype``."""
    x = xv if type(xv) is np.ndarray and xv.dtype is F64 and xv.flags.c_contiguous else \
        np.asarray(xv, dtype=F64, order="C")
    y = np.empty(x.shape) if x.size < POOLED else take(x.shape, x.size)
    ax = _handle(x)
    _run(code, ax, ax, _handle(y), y.size, _FIELD_OFFSET, _NO_IA)
    return y if y.ndim else float(y)


def own_binary(code, av, bv):
    """f(av, bv) for a primitive in ``OWN_VALUE``, as ``own_unary``, broadcast as a recorded row
    reads its operands: a one-element operand with stride 0, others through the strided nest (or
    materialized where the nest does not collapse to three loops, with the same per-element
    arithmetic). None for operands that do not convert to float64 exactly (NumPy's path then
    raises its dtype error)."""
    a = av if type(av) is np.ndarray else np.asarray(av)
    b = bv if type(bv) is np.ndarray else np.asarray(bv)
    if a.dtype.kind not in _REAL or b.dtype.kind not in _REAL:
        return None
    shape = a.shape if a.shape == b.shape or not b.ndim else b.shape if not a.ndim else \
        np.broadcast_shapes(a.shape, b.shape)
    y = np.empty(shape) if a.size * b.size < POOLED else take(shape, math.prod(shape))
    n = y.size
    if n == 0:
        return y
    fa, fb = a.size == 1 and n != 1, b.size == 1 and n != 1
    ia = _NO_IA
    flags = fa * ONE_A | fb * ONE_B
    if (a.size != n and not fa) or (b.size != n and not fb):
        nest = strided_broadcast(shape, a.shape, fa, b.shape, fb)
        if nest:
            ia = np.array((0, 0) + nest, dtype=np.int64)
            flags |= STRIDED
        else:
            if a.size != n and not fa:
                a = np.broadcast_to(a, shape)
            if b.size != n and not fb:
                b = np.broadcast_to(b, shape)
    if a.dtype is not F64 or not a.flags.c_contiguous:
        a = np.asarray(a, dtype=F64, order="C")
    if b.dtype is not F64 or not b.flags.c_contiguous:
        b = np.asarray(b, dtype=F64, order="C")
    _run(code | flags << FLAG_SHIFT, _handle(a), _handle(b), _handle(y), n, _FIELD_OFFSET, ia)
    return y


def unary(code, x):
    xv = x._v
    if x._meta is not None and xv.ndim == 0:
        xv = float(xv)  # a 0-d leaf (its buffer is an array) takes the 0-d path
    if type(xv) is float:
        y = SCALAR[code](xv)
        if x._rg:
            t = state.rec
            if t is None or t.sealed:
                t = general_tape()
                if t is None:
                    return plain(y)
            sx = x._slot if x._tape is t else import_slot(t, x)
            slot = len(t.sv)
            t.sv.append(y)
            t.rows.extend((code, sx, -1))
            if slot >= MAX_ROWS:
                t.roll()
            return result(y, t, slot)
        return plain(y)
    f = _VALUE_UFUNC[code]
    if f is None:
        y = own_unary(code, xv)
    else:
        y = f(xv) if xv.size < POOLED else unary_into(f, xv)
        if type(y) is not np.ndarray or y.dtype is not F64 or not y.flags.c_contiguous \
                or not y.ndim:
            y = check_dtype(y, TABLE[code].name)
    if x._rg:
        t = state.rec
        if t is not None and not t.sealed and type(y) is not float:
            return array_row(t, code, x._slot if x._tape is t else import_slot(t, x), -1, y,
                             y.size)
        t = general_tape()
        if t is not None:
            return result(y, t, t.row(code, slot_in(t, x), -1, y, _size(y)))
    return plain(y)


def binary(code, a, b):
    if type(a) is Tensor:
        av = a._v
        if type(av) is np.ndarray and av.ndim:
            if type(b) is Tensor:
                bv = b._v
                if type(bv) is np.ndarray and bv.ndim:
                    if bv.shape == av.shape:
                        return _same_shape(code, a, b, av, bv)
                    return _broadcast(code, a, b, av, bv)
            elif type(b) is float and av.size != 1:
                return _with_float(code, a, b, av, False)
            elif type(b) is np.ndarray and b.dtype is F64 and b.ndim:
                return _broadcast(code, a, b, av, b)
    elif type(a) is float and type(b) is Tensor:
        bv = b._v
        if type(bv) is np.ndarray and bv.ndim and bv.size != 1:
            return _with_float(code, b, a, bv, True)
    elif type(a) is np.ndarray and type(b) is Tensor and a.dtype is F64 and a.ndim:
        bv = b._v
        if type(bv) is np.ndarray and bv.ndim:
            return _broadcast(code, a, b, a, bv)
    return _binary(code, a, b)


def _same_shape(code, a, b, av, bv):
    """``binary`` of two array tensors of one shape: no broadcast to settle."""
    f = _VALUE_UFUNC[code]
    y = own_binary(code, av, bv) if f is None else f(av, bv) if av.size < POOLED else \
        into(f, av, bv)
    if y.dtype is not F64 or not y.flags.c_contiguous:
        y = check_dtype(y, TABLE[code].name)
    if not (a._rg or b._rg):
        return plain(y)
    t = state.rec
    if t is None or t.sealed:
        t = general_tape()
        if t is None:
            return plain(y)
        return result(y, t, t.row(code, slot_in(t, a), slot_in(t, b), y, y.size))
    return array_row(t, code, a._slot if a._tape is t else import_slot(t, a),
                     b._slot if b._tape is t else import_slot(t, b), y, y.size)


def _with_float(code, x, c, xv, reflected):
    """``binary`` of an array tensor x (several elements) and a Python float c: c is read for
    every element (a shared constant slot); `reflected`: c is the first operand."""
    f = _VALUE_UFUNC[code]
    if f is None:
        y = own_binary(code, c, xv) if reflected else own_binary(code, xv, c)
    else:
        y = (f(c, xv) if reflected else f(xv, c)) if xv.size < POOLED else \
            into(f, c, xv) if reflected else into(f, xv, c)
    if y.dtype is not F64 or not y.flags.c_contiguous:
        y = check_dtype(y, TABLE[code].name)
    if not x._rg:
        return plain(y)
    t = state.rec
    if t is None or t.sealed:
        t = general_tape()
        if t is None:
            return plain(y)
        if reflected:
            sc = t.scalar_const(c)
            return result(y, t, t.row(code | ONE_A << FLAG_SHIFT, sc, slot_in(t, x), y, y.size))
        sx = slot_in(t, x)
        return result(y, t, t.row(code | ONE_B << FLAG_SHIFT, sx, t.scalar_const(c), y, y.size))
    # (the shared constant's slot read directly: scalar_const adds it the first time)
    if reflected:
        sc = t.consts.get(c) if c else None
        if sc is None:
            sc = t.scalar_const(c)
        return array_row(t, code | ONE_A << FLAG_SHIFT, sc,
                         x._slot if x._tape is t else import_slot(t, x), y, y.size)
    sx = x._slot if x._tape is t else import_slot(t, x)
    sc = t.consts.get(c) if c else None
    if sc is None:
        sc = t.scalar_const(c)
    return array_row(t, code | ONE_B << FLAG_SHIFT, sx, sc, y, y.size)


def _binary(code, a, b):
    """``binary``, every case (0-d, broadcast, constants of any type)."""
    if type(a) is Tensor:
        av = a._v
        ra = a._rg
    else:
        av = a
        ra = False
        refuse_masked(a, "operand")
    if type(b) is Tensor:
        bv = b._v
        rb = b._rg
    else:
        bv = b
        rb = False
        refuse_masked(b, "operand")
    if type(av) is np.ndarray and av.ndim == 0 and type(a) is Tensor:
        av = float(av)  # a 0-d leaf (its buffer is an array) takes the 0-d path
    if type(bv) is np.ndarray and bv.ndim == 0 and type(b) is Tensor:
        bv = float(bv)
    if type(bv) is int:
        bv = float(bv)
    if type(av) is int:
        av = float(av)
    if type(av) is float and type(bv) is float:
        y = SCALAR[code](av, bv)
        t = recording_tape() if ra or rb else None
        if t is not None:
            sa = a._slot if (ra and a._tape is t) else slot_in(t, a)
            sb = b._slot if (rb and b._tape is t) else slot_in(t, b)
            slot = len(t.sv)
            t.sv.append(y)
            t.rows.extend((code, sa, sb))
            if slot >= MAX_ROWS:
                t.roll()
            return result(y, t, slot)
        return plain(y)
    p = TABLE[code]
    try:
        y = own_binary(code, av, bv) if code in OWN_VALUE else None
        if y is None:
            y = p.ufunc(av, bv)
    except ValueError as e:
        raise ValueError(f"{p.name}: {e} (operand shapes {np.shape(av)} and {np.shape(bv)})") \
            from None
    if type(y) is not np.ndarray or y.dtype is not F64 or not y.flags.c_contiguous or not y.ndim:
        y = check_dtype(y, p.name)
    t = recording_tape() if ra or rb else None
    if t is None:
        return plain(y)
    n = 1 if type(y) is float else y.size
    sa, sb, flags, iat = _operands(t, a, b, av, bv, ra, rb, _shape(y), n)
    return result(y, t, t.row(code | flags << FLAG_SHIFT, sa, sb, y, n, iat))


def _operands(t, a, b, av, bv, ra, rb, shape, n):
    """Slots of a binary row's operands (imported in that order), its flags and its IA offset
    (0, or the broadcast's maps or strides), for a result of `shape` and n elements."""
    if ra and a._tape is t and type(av) is np.ndarray and av.size == n:
        sa, fa, xa = a._slot, 0, None
    else:
        sa, fa, xa = _operand_read(t, a, n)
    if rb and b._tape is t and type(bv) is np.ndarray and bv.size == n:
        sb, fb, xb = b._slot, 0, None
    else:
        sb, fb, xb = _operand_read(t, b, n)
    flags = fa * ONE_A | fb * ONE_B | (xa is not None) * MAP_A | (xb is not None) * MAP_B
    iat = 0
    if flags & (MAP_A | MAP_B):
        key = ("maps", xa, xb, fa, fb, shape)
        hit = t.index_cache.get(key)
        if hit is None:
            strided = strided_broadcast(shape, xa, fa, xb, fb)
            if strided:  # every mode reads the strides: no maps (map words -1)
                hit = (t.add_ints((-1, -1) + strided), STRIDED)
            else:
                hit = (t.add_ints((-1 if xa is None else _map_offset(t, xa, shape),
                                   -1 if xb is None else _map_offset(t, xb, shape))), 0)
            t.index_cache[key] = hit
        iat = hit[0]
        flags |= hit[1]
    return sa, sb, flags, iat


def _broadcast(code, a, b, av, bv):
    """``binary`` of two arrays (neither 0-d) that need ``_binary``'s flags and ints: two array
    tensors of different shapes, or an array tensor and a float64 NumPy array constant in
    either order. The flags and ints depend on the shapes only (not on which operand is a
    constant), so a tape keeps them per pair of shapes after the first such row."""
    p = TABLE[code]
    try:
        y = own_binary(code, av, bv) if code in OWN_VALUE else p.ufunc(av, bv) \
            if av.size * bv.size < POOLED else broadcast_value(code, av, bv)
        if y is None:
            y = into(p.ufunc, av, bv)
    except ValueError as e:
        raise ValueError(f"{p.name}: {e} (operand shapes {av.shape} and {bv.shape})") from None
    if y.dtype is not F64 or not y.flags.c_contiguous:
        y = check_dtype(y, p.name)
    ra = type(a) is Tensor and a._rg
    rb = type(b) is Tensor and b._rg
    if not (ra or rb):
        return plain(y)
    t = state.rec
    fast = t is not None and not t.sealed
    if not fast:
        t = general_tape()
        if t is None:
            return plain(y)
    n = y.size
    hit = t.index_cache.get(("binary", av.shape, bv.shape))
    if hit is None:
        sa, sb, flags, iat = _operands(t, a, b, av, bv, ra, rb, y.shape, n)
        t.index_cache[("binary", av.shape, bv.shape)] = (flags, iat)
    else:
        flags, iat = hit  # (slots in _operands' order: a's, then b's)
        sa = a._slot if type(a) is Tensor and a._tape is t else slot_in(t, a)
        sb = b._slot if type(b) is Tensor and b._tape is t else slot_in(t, b)
    if fast:
        return array_row(t, code | flags << FLAG_SHIFT, sa, sb, y, n, iat)
    return result(y, t, t.row(code | flags << FLAG_SHIFT, sa, sb, y, n, iat))


def _operand(t, x, shape, n):
    """Slot of an elementwise operand, whether it has one element (read for all), and the IA
    offset of the index map that broadcasts it to `shape` (-1: none needed)."""
    slot, one, xshape = _operand_read(t, x, n)
    return slot, one, -1 if xshape is None else _map_offset(t, xshape, shape)


def _operand_read(t, x, n):
    """Slot of an elementwise operand of a result of n elements, whether it has one element
    (read for all), and its shape if it is broadcast otherwise (None: of the result's size)."""
    if type(x) is Tensor:
        if x._tape is t:
            slot = x._slot
        else:
            slot = import_slot(t, x)
        xv = x._v
        if type(xv) is float:
            return slot, (1 if n != 1 else 0), None
    else:
        if type(x) is float and n != 1:  # a Python-float constant: shared within the tape
            return t.scalar_const(x), 1, None
        slot = slot_in(t, x)
        xv = x
    size = 1 if isinstance(xv, (float, int)) else xv.size if type(xv) is np.ndarray else \
        np.size(xv)
    if size == n:
        return slot, 0, None
    if size == 1:
        return slot, 1, None
    return slot, 0, np.shape(xv)


def _map_offset(t, xshape, shape):
    """IA offset of the broadcast map xshape -> shape in tape t (added once per tape)."""
    key = ("bmap", xshape, shape)
    off = t.index_cache.get(key)
    if off is None:
        off = t.index_cache[key] = t.add_ints(broadcast_map(xshape, shape))
    return off


def broadcast_slot(t, x, shape):
    """Slot holding x broadcast to `shape` (a gather row if x needs grad, else a constant)."""
    if not (type(x) is Tensor and x._rg):
        return t.const(constant(np.broadcast_to(raw(x), shape)))
    xv = x._v
    xshape = _shape(xv)
    value = np.broadcast_to(xv, shape).copy()
    return t.row(GATHER, slot_in(t, x), -1, value, value.size, _map_offset(t, xshape, shape))


def where(condition, x=None, y=None):
    """np.where(condition, x, y) (NumPy's names: ``tape.numpy.where`` is this function);
    np.where(condition) alone: the indices of its nonzero elements."""
    if x is None and y is None:
        return np.where(raw(condition))
    mask, a, b = condition, x, y  # (y is the result from here on)
    if type(mask) is not np.ndarray or mask.dtype is not _BOOL:
        mask = np.asarray(raw(mask)).astype(bool)
    av = a._v if type(a) is Tensor else a
    bv = b._v if type(b) is Tensor else b
    try:
        y = np.where(mask, av, bv)
    except ValueError as e:
        raise ValueError(f"where: {e} (condition {mask.shape}, x {np.shape(av)}, "
                         f"y {np.shape(bv)})") from None
    shape = y.shape
    if y.dtype is not F64 or not shape or not y.flags.c_contiguous:
        y = check_dtype(y, "where")
    if not (type(a) is Tensor and a._rg or type(b) is Tensor and b._rg):
        return plain(y)
    t = state.rec
    fast = t is not None and not t.sealed and type(y) is not float
    if not fast:
        t = general_tape()
        if t is None:
            return plain(y)
    n = 1 if type(y) is float else y.size
    if type(a) is Tensor is type(b) and type(av) is np.ndarray is type(bv) and av.size == n == \
            bv.size:  # two tensors of the result's size (as _operand finds them): no flags
        sa = a._slot if a._tape is t else import_slot(t, a)
        sb = b._slot if b._tape is t else import_slot(t, b)
        code, ma, mb = WHERE, -1, -1
        # (their ints, [-1, -1, mask], are named by the mask's bytes alone: no tuple to hash)
        iat = t.index_cache.get(mask.tobytes()) if mask.size == n <= _WHERE_SHARED else None
    else:
        sa, fa, ma = _operand(t, a, shape, n)
        sb, fb, mb = _operand(t, b, shape, n)
        code = WHERE | (fa * ONE_A | fb * ONE_B | (ma >= 0) * MAP_A | (mb >= 0) * MAP_B) << \
            FLAG_SHIFT
        iat = None
    if iat is None:
        iat = _where_ints(t, ma, mb, mask, shape, n)
    return array_row(t, code, sa, sb, y, n, iat) if fast else result(y, t, t.row(code, sa, sb, y,
                                                                                 n, iat))


_WHERE_SHARED = 1 << 16  # larger masks are not compared (their ints dwarf the saving)


def _where_ints(t, ma, mb, mask, shape, n):
    """IA offset of a where row's ints (``layouts.encode_where``): the mask broadcast to `shape`
    written straight into the chunk (no broadcast view, no concatenation of a converted copy),
    shared by the rows of a tape whose masks are equal (a mask reused in a loop costs its eight
    bytes per element once, not per row; masks of up to _WHERE_SHARED elements). A mask of the
    result's size with no operand maps is keyed by its bytes alone: broadcast to a shape of its
    own size, its elements stay in order, so they are the ints after [-1, -1]."""
    key = None if n > _WHERE_SHARED else mask.tobytes() if ma == mb == -1 and mask.size == n \
        else ("where", ma, mb, shape, mask.shape, mask.tobytes())
    off = t.index_cache.get(key) if key is not None else None
    if off is None:
        ints = np.empty(n + 2, np.int64)
        ints[0] = ma
        ints[1] = mb
        ints[2:].reshape(shape)[...] = mask
        off = t.ia_len
        if key is not None:
            t.index_cache[key] = off
        t.ia.append(ints)
        t.ia_len += n + 2
    return off


# ---------------------------------------------------------------------------------------------
# Indexing: every indexing and shape op is a gather y[i] = x[idx[i]] (maps: index_plans.py)


def gather(x, idx, cache_key=None):
    """y = x.ravel()[idx] with the shape of idx (idx an int64 array of flat positions)."""
    xv = x._v if type(x) is Tensor else constant(x)
    flat = np.reshape(xv, -1)
    y = check_dtype(flat[idx], "indexing")
    if not recording(x):
        return plain(y)
    t = current_tape()
    off = t.index_cache.get(cache_key) if cache_key is not None else None
    if off is None:
        off = t.add_ints(idx)
        if cache_key is not None:
            t.index_cache[cache_key] = off
    return result(y, t, t.row(GATHER, slot_in(t, x), -1, y, _size(y), off))


def getitem(x, key):
    v = x._v
    if type(key) is tuple and x._rg and x._meta is None and type(v) is np.ndarray and v.ndim:
        t = state.rec
        if t is not None and not t.sealed and _new_axes_only(key, v.ndim):
            # x[None, :], x[..., None] of a recorded array: a reshape, as basic_plan finds it
            # (new axes never reorder elements), its row the one ``reshape`` appends; its value
            # NumPy's view, as reshape's (only its new axes' strides, never read, differ)
            y = v[key]
            return array_row(t, COPY, x._slot if x._tape is t else import_slot(t, x), -1, y,
                             y.size)
    if type(key) is int and type(v) is np.ndarray and v.ndim == 1 and v.shape[0] > 1 \
            and v.dtype == F64:
        return _vector_item(x, v, key)
    if type(key) is np.ndarray and key.dtype.kind in "iu" and key.ndim and type(v) is np.ndarray \
            and v.ndim:
        return _integer_gather(x, v, key)
    hk = _hashable(key)  # (a basic key holds nothing plain_key changes)
    if hk is not None and type(v) is np.ndarray:
        hit = _BASIC_MAPS.get((v.shape, hk))
        t = state.rec if x._rg else None
        if hit is not None and hit[1]:  # a key seen before that only reshapes (x[None, :])
            if t is None or t.sealed or x._meta is not None or not hit[0].ndim:
                return reshape(x, hit[0].shape)
            y = v.reshape(hit[0].shape)  # (reshape's row, for a recorded array of no leaf)
            return array_row(t, COPY, x._slot if x._tape is t else import_slot(t, x), -1, y,
                             y.size)
        if t is not None and not t.sealed:
            off = t.index_cache.get(("gather", v.shape, hk))
            if off is not None:  # this slice of this shape is on the tape: its ints are there
                y = v[key]
                sx = x._slot if x._tape is t else import_slot(t, x)
                if type(y) is np.ndarray and y.ndim:
                    return array_row(t, GATHER, sx, -1, _own(x, y), y.size, off)
                y = check_dtype(y, "indexing")
                return result(y, t, t.row(GATHER, sx, -1, y, _size(y), off))
    if hk is None:
        key = plain_key(key)
        if type(key) is np.ndarray and key.dtype.kind in "iu" and key.ndim \
                and type(v) is np.ndarray and v.ndim:
            return _integer_gather(x, v, key)
        hk = _hashable(key)
    shape = _shape(v)
    idx, is_reshape = basic_plan(shape, key, hk)
    if is_reshape:
        return reshape(x, idx.shape)
    if hk is None:
        return gather(x, idx)
    if type(v) is np.ndarray:  # the value by NumPy's view, copied: flat[idx] element for element
        y = v[key]
        y = _own(x, y) if type(y) is np.ndarray and y.ndim else check_dtype(y, "indexing")
        return _gathered(x, y, idx, ("gather", shape, hk))
    return gather(x, idx, cache_key=("gather", shape, hk))


def _own(x, y):
    """The value of a slice y of x's value: y itself where it is C-contiguous (x's value is never
    written once recorded, so the slice reads it in place), else its elements gathered; a
    leaf's buffer is written in place (no_grad), so a slice of it keeps a copy."""
    return y if y.flags.c_contiguous and x._meta is None else y.copy()


def _new_axes_only(key, ndim):
    """Whether the tuple `key` holds only None, full slices (``:``, at most `ndim`) and at most
    one Ellipsis: an index NumPy answers with a view of the same elements in the same order."""
    n = e = 0
    for k in key:
        if k is not None:
            if k is Ellipsis:
                e += 1
            elif type(k) is not slice or k.start is not None or k.stop is not None \
                    or k.step is not None:
                return False
            else:
                n += 1
    return n <= ndim and e <= 1


def _integer_gather(x, v, key):
    """x[key] for an integer array key (not 0-d): NumPy's own fancy indexing for the value (its
    errors, as ``index_map`` raises them on an array of x's shape), the index map cached by the
    key's contents (a key reused in a loop is mapped once, and its ints are shared within a
    tape)."""
    y = v[key]
    if not y.flags.c_contiguous:
        y = check_dtype(y, "indexing")
    if not x._rg:
        return plain(y)
    t = state.rec
    fast = t is not None and not t.sealed
    if not fast:
        t = general_tape()
        if t is None:
            return plain(y)
    shape = v.shape
    ck = ("gather", shape, key.dtype, key.shape, key.tobytes()) if key.size <= 4096 else None
    off = t.index_cache.get(ck) if ck is not None else None
    if off is None:
        off = t.add_ints(integer_map(shape, key, ck))
        if ck is not None:
            t.index_cache[ck] = off
    sx = x._slot if x._tape is t else import_slot(t, x)
    return array_row(t, GATHER, sx, -1, y, y.size, off) if fast else \
        result(y, t, t.row(GATHER, sx, -1, y, y.size, off))


def _gathered(x, y, idx, cache_key):
    """The gather row y = x.ravel()[idx] (``gather``), its value y already computed."""
    t = recording_tape() if x._rg else None
    if t is None:
        return plain(y)
    off = t.index_cache.get(cache_key) if cache_key is not None else None
    if off is None:
        off = t.add_ints(idx)
        if cache_key is not None:
            t.index_cache[cache_key] = off
    return result(y, t, t.row(GATHER, x._slot if x._tape is t else import_slot(t, x), -1, y,
                              _size(y), off))


def _vector_item(x, v, k):
    """x[k], x a vector of several elements and k a Python int: the gather row the general
    path records (same index cache key), without building an index map (a 0-d gather's
    index is k itself); small functions index their argument's elements on every call."""
    n = v.shape[0]
    if not -n <= k < n:
        raise IndexError(f"index {k} is out of bounds for axis 0 with size {n}")
    y = float(v[k])
    if not recording(x):
        return plain(y)
    t = current_tape()
    cache_key = ("gather", v.shape, (k,))
    off = t.index_cache.get(cache_key)
    if off is None:
        off = t.ia_len
        t.ia.append(np.array((k % n,), np.int64))
        t.ia_len += 1
        t.index_cache[cache_key] = off
    return result(y, t, t.row(GATHER, slot_in(t, x), -1, y, 1, off))


def plain_key(key):
    """Index keys may hold tensors without grad (e.g. from argmax); use their values. A key
    that requires grad is refused: its value leaving the tape is a silent conversion."""
    if type(key) is tuple:
        return tuple(plain_key(k) for k in key)
    if type(key) is Tensor:
        if key._rg:
            raise conversion_error("index")
        v = key._v
        if type(v) is float:
            if v != int(v):
                raise IndexError("only integers, slices, None, Ellipsis and integer or boolean "
                                 f"arrays are valid indices (got the float tensor value {v})")
            return int(v)
        raise IndexError("a float64 tensor cannot index (NumPy only takes integer or boolean "
                         "arrays); index with a plain array, e.g. x[mask] with mask = t > 0")
    if type(key) is list:
        return np.asarray(key)
    return key


def setitem(x, key, v):
    """Functionalized x[key] = v: a scatter row, whose result the caller rebinds x to."""
    key = plain_key(key)
    xv = x._v
    shape = _shape(xv)
    pos = np.asarray(index_map(shape, key), dtype=np.int64)
    vv = raw(v)
    y = np.array(xv, dtype=np.float64, copy=True) if shape else np.array(xv, dtype=np.float64)
    try:
        y[key] = vv
    except ValueError as e:
        raise ValueError(f"item assignment: {e} (value shape {np.shape(vv)}, "
                         f"target shape {pos.shape})") from None
    return _scatter_row(x, v, check_dtype(y, "item assignment"), pos)


def scatter_at(x, pos, v):
    """x with x.flat[pos] = v (v broadcast to pos's shape; where a position repeats, the last
    write wins, as in NumPy): a write through a view at its positions in the base."""
    y = np.array(x._v, dtype=np.float64, copy=True)
    y.reshape(-1)[pos] = raw(v)
    return _scatter_row(x, v, check_dtype(y, "item assignment"), pos)


def _scatter_row(x, v, y, pos):
    """The scatter row whose value `y` is x with v written at the flat positions `pos`."""
    if not recording(x, v):
        return plain(y)
    t = current_tape()
    m = pos.size
    flat_pos = pos.reshape(-1)
    win = np.zeros(m, np.int64)  # last write wins, as in NumPy
    if m:
        _, last = np.unique(flat_pos[::-1], return_index=True)
        win[m - 1 - last] = 1
    if type(v) is Tensor and v._rg:
        sv_ = broadcast_slot(t, v, pos.shape) if _size(v._v) != m or _shape(v._v) != pos.shape \
            else slot_in(t, v)
    else:
        sv_ = t.const(constant(np.broadcast_to(raw(v), pos.shape)))
    off = t.add_ints(layouts.encode_scatter(flat_pos, win))
    return result(y, t, t.row(SCATTER, slot_in(t, x), sv_, y, _size(y), off))


def scatter_flat(x, v, pos, win, shape):
    """y = x with y.flat[pos[j]] = v.flat[j] where win[j] (a scatter row from its index data;
    forward-mode rules use it to replay a recorded item assignment on tangents)."""
    xv, vv = raw(x), raw(v)
    y = np.array(xv, dtype=np.float64).reshape(-1).copy()
    vflat = np.reshape(vv, -1)
    y[pos[win]] = vflat[win]
    y = check_dtype(y.reshape(shape), "item assignment")
    if not recording(x, v):
        return plain(y)
    t = current_tape()
    sv_ = slot_in(t, v) if type(v) is Tensor and v._rg else t.const(constant(vflat))
    off = t.add_ints(layouts.encode_scatter(pos, win.astype(np.int64)))
    return result(y, t, t.row(SCATTER, slot_in(t, x), sv_, y, _size(y), off))


def reshape(x, shape):
    xv = x._v
    y = xv.reshape(shape) if type(xv) is np.ndarray else np.reshape(xv, shape)
    y = float(y) if y.ndim == 0 else y
    if not x._rg:
        return plain(y)  # (NumPy's view of a value nothing writes)
    t = state.rec
    if t is not None and not t.sealed and type(y) is not float:
        if x._meta is not None:
            y = y.copy()  # a leaf's buffer may be updated in place later: the row keeps its own
        return array_row(t, COPY, x._slot if x._tape is t else import_slot(t, x), -1, y, y.size)
    t = general_tape()
    if t is None:
        return plain(y if type(y) is float else y.copy())
    if type(y) is not float and x._meta is not None:
        y = y.copy()
    return result(y, t, t.row(COPY, slot_in(t, x), -1, y, _size(y)))


def transpose(x, axes=None):
    xv = x._v
    if type(xv) is float:
        return x
    nd = xv.ndim
    axes = tuple(reversed(range(nd))) if axes is None else normalize_axes(axes, nd, sort=False)
    if len(axes) != nd or sorted(axes) != list(range(nd)):
        raise ValueError(f"axes {axes} don't match array of {nd} dimensions")
    if axes == tuple(range(nd)):
        return x
    key = ("transpose", xv.shape, axes)
    idx = np.arange(xv.size, dtype=np.int64).reshape(xv.shape).transpose(axes).copy()
    return gather(x, idx, cache_key=key)


def normalize_axes(axis, ndim, sort=True):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    out = []
    for a in axis:
        a = operator.index(a)
        if not (-ndim <= a < ndim or (ndim == 0 and a in (0, -1))):  # NumPy: 0-d takes 0, -1
            raise np.exceptions.AxisError(a, ndim)
        out.append(a % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ValueError("duplicate value in 'axis'")
    return tuple(sorted(out)) if sort else tuple(out)
