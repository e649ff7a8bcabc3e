"""Recording of the bilinear op (matmul: a jitted row, or a BLAS escape row for large products)
and of escape rows, whose rules are NumPy code (``tape/escapes/``)."""
from __future__ import annotations

import math

import numpy as np

from jit.families import layouts
from jit.table import OPCODE

from .record import F64, _shape, _size, broadcast_slot, reshape
from .state import state
from .tape import current_tape
from .tensor import Tensor, array_row, general_tape, plain, raw, recording, result, slot_in
from .values import check_dtype, constant
from .value_pool import MIN_CELLS as POOLED, into

MATMUL = OPCODE["matmul"]
MATMUL_BLAS = OPCODE["matmul_blas"]
BLAS_FLOPS = 1 << 14  # batched matmuls above B*M*K*N of this escape to BLAS between segments


def matmul(a, b):
    av = a._v if type(a) is Tensor else constant(a)
    bv = b._v if type(b) is Tensor else constant(b)
    if type(av) is float or av.ndim == 0 or type(bv) is float or bv.ndim == 0:
        raise ValueError("matmul: input operand does not have enough dimensions (0-d operands "
                         "are not allowed; use * for scalars)")
    try:
        # (the result has at most a.size * b.size / K**2 cells: the pool only for large ones;
        # @ is np.matmul on two plain arrays, parsed faster)
        k = av.shape[-1]
        y = av @ bv if av.size * bv.size < POOLED * k * k else into(np.matmul, av, bv)
    except ValueError as e:
        raise ValueError(f"matmul: {e} (shapes {np.shape(av)} and {np.shape(bv)})") from None
    if type(y) is not np.ndarray or y.dtype is not F64 or not y.flags.c_contiguous or not y.ndim:
        y = check_dtype(y, "matmul")
    if not (type(a) is Tensor and a._rg or type(b) is Tensor and b._rg):
        return plain(y)
    t = state.rec
    fast = t is not None and not t.sealed
    if not fast:
        t = general_tape()
        if t is None:
            return plain(y)
    if av.ndim == 2 == bv.ndim:  # two matrices: no batch, the plan is (M, K) @ (K, N)
        (M, K), N, batch, B, ba, bb = av.shape, y.shape[1], (), 1, 0, 0
        key = ("matmul", 1, M, K, N, 0, 0)  # (_matmul_plan's)
        a_in = a._slot if type(a) is Tensor and a._tape is t else slot_in(t, a)
        b_in = b._slot if type(b) is Tensor and b._tape is t else slot_in(t, b)
    else:
        plan = _MATMUL_PLANS.get((av.shape, bv.shape))
        if plan is None:
            plan = _matmul_plan(av.shape, bv.shape)
        sa_shape, sb_shape, M, K, N, batch, B, ka, kb, key = plan
        # (an operand whose batch is its own or none is its slot: _batch_operand's first cases)
        a_in, ba = (slot_in(t, a), ka) if ka >= 0 else _batch_operand(t, a, sa_shape, batch, B)
        b_in, bb = (slot_in(t, b), kb) if kb >= 0 else _batch_operand(t, b, sb_shape, batch, B)
    if B * M * K * N > BLAS_FLOPS:  # (read per call: BLAS_FLOPS is the module's setting)
        slot = t.row(MATMUL_BLAS, a_in, b_in, y, _size(y))
        ya_shape = batch + (M, K) if ba else (M, K)
        yb_shape = batch + (K, N) if bb else (K, N)
        t.escapes[slot] = (ya_shape, yb_shape, batch + (M, N), {})
        return result(y, t, slot)
    off = t.index_cache.get(key)
    if off is None:
        off = t.index_cache[key] = t.add_ints(layouts.encode_matmul(B, M, K, N, ba, bb))
    if fast and type(y) is not float:
        return array_row(t, MATMUL, a_in, b_in, y, y.size, off)
    return result(y, t, t.row(MATMUL, a_in, b_in, y, _size(y), off))


_MATMUL_PLANS = {}  # (a's shape, b's shape) -> _matmul_plan


def _matmul_plan(ashape, bshape):
    """Canonical shapes a (..., M, K), b (..., K, N) (1-D operands are a row / column), M, K, N,
    the broadcast batch shape and its size, for a and b whether they carry the batch (0 / 1;
    -1: broadcast to it by ``_batch_operand``), and a jitted row's index cache key."""
    sa_shape = (1,) + ashape if len(ashape) == 1 else ashape
    sb_shape = bshape + (1,) if len(bshape) == 1 else bshape
    M, K = sa_shape[-2:]
    N = sb_shape[-1]
    batch = np.broadcast_shapes(sa_shape[:-2], sb_shape[:-2])
    B = math.prod(batch)
    ka, kb = (0 if math.prod(s[:-2]) == 1 else 1 if s[:-2] == batch else -1
              for s in (sa_shape, sb_shape))
    key = ("matmul", B, M, K, N, 1 if ka else 0, 1 if kb else 0)
    plan = (sa_shape, sb_shape, M, K, N, batch, B, ka, kb, key)
    if len(_MATMUL_PLANS) > 1024:
        _MATMUL_PLANS.clear()
    _MATMUL_PLANS[(ashape, bshape)] = plan
    return plan


def _batch_operand(t, x, shape, batch, B):
    """Slot of a matmul operand and whether it carries the batch (0: shared by every batch)."""
    own = math.prod(shape[:-2])
    if own == 1:
        return slot_in(t, x), 0
    if shape[:-2] == batch:
        return slot_in(t, x), 1
    full = batch + shape[-2:]
    if type(x) is Tensor and x._rg:
        xr = reshape(x, shape) if _shape(x._v) != shape else x
        return broadcast_slot(t, xr, full), 1
    return t.const(constant(np.broadcast_to(np.reshape(raw(x), shape), full))), 1


def escape(name, value, a, b=None, shapes=None):
    """Record a row whose rules are NumPy code (``tape/escapes/``; ``tape.escapes.record``
    calls this). `shapes`: (a's, b's, the row's, params) as the rules read them."""
    y = check_dtype(value, name)
    if not recording(a, b):
        return plain(y)
    t = current_tape()
    sa = slot_in(t, a)
    sb = slot_in(t, b) if b is not None else -1
    slot = t.row(OPCODE[name], sa, sb, y, _size(y))
    t.escapes[slot] = shapes or (_shape(raw(a)), _shape(raw(b)) if b is not None else None,
                                 _shape(y), {})
    return result(y, t, slot)
