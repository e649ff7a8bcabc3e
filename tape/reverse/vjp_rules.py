"""Reverse-mode rules as tensor operations: the operand adjoints of one recorded row.

Used when a backward must itself be differentiable (``create_graph=True``, ``tape.grad`` of
``tape.grad``): each row's rule runs as recorded tensor operations instead of inside the jitted
sweep. Elementwise rules come from the table's derivative formulas (``Prim.d``), the very
declarations the kernels are generated from; the other families are the transposes of the
forward rules in ``tangent_rules.py`` and follow the reverse kernels' conventions (ties share
evenly, zeros of prod/cumprod exactly, the last write of an item assignment wins).
"""
from __future__ import annotations

import math

import numpy as np

from jit import NEED_A, NEED_B
from jit.table import FLAG_SHIFT, OP_MASK, ONE_A, ONE_B, OPCODE, TABLE

from ..core import record as _record
from ..core.tensor import plain
from ..escapes import ESCAPES, TENSORS, split
from ..core.formulas import derivative
from ..forward.tangent_rules import _all_normal, _exclusive_products, _fit_value, _shape

COPY = OPCODE["copy"]
POWER = OPCODE["power"]


def _sum_to(g, shape, one=False):
    """A gradient of the row's result shape summed down to an operand of `shape`."""
    gs = _shape(g._v)
    if gs == shape:
        return g
    if one:  # a one-element operand read for every element
        return np.reshape(np.sum(g), shape)
    lead = len(gs) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and gs[lead + i] != 1)
    out = np.sum(g, axis=axes) if axes else g
    return np.reshape(out, shape)


def row_vjp(rd, slot, g, nd, functions=None):
    """(ga, gb): adjoints of the operands of row `slot` from its adjoint `g` (a Tensor), for the
    operands whose bit is set in `nd` (1: a, 2: b); None elsewhere."""
    code, a, b, iat = rd.row(slot)
    op = code & OP_MASK
    flags = code >> FLAG_SHIFT
    p = TABLE[op]
    fam = p.family
    y = rd.tensor(slot)
    shape = _shape(y._v)
    sha = _shape(rd.t.value(a)) if a >= 0 else None
    shb = _shape(rd.t.value(b)) if b >= 0 else None
    if fam == "unary":
        if op == COPY:
            return np.reshape(g, sha), None
        d = derivative(op, 0)
        return (g * d if type(d) is float else g * d(rd.tensor(a), y)), None
    if fam == "binary":
        out = [None, None]
        for k, (s, sh, one) in enumerate(((a, sha, flags & ONE_A), (b, shb, flags & ONE_B))):
            if not nd & (NEED_A, NEED_B)[k]:
                continue
            d = derivative(op, k)
            c = _constant_exponent(rd, op, k, b)
            if type(d) is float:
                term = g if d == 1.0 else (-g if d == -1.0 else g * d)
            elif c is not None:  # b a^(b-1) for a constant b: x ** 2's 2 a in one row
                at = _fit_value(rd.tensor(a), flags & ONE_A)
                term = g * (c * (at if c == 2.0 else at ** (c - 1.0)))
            else:
                term = g * d(_fit_value(rd.tensor(a), flags & ONE_A),
                             _fit_value(rd.tensor(b), flags & ONE_B), y)
            if _shape(term._v) != shape:
                term = np.broadcast_to(term, shape) if shape else np.reshape(term, ())
            out[k] = _sum_to(term, sh, bool(one))
        return tuple(out)
    if fam == "select":
        n = math.prod(shape)
        mask = np.asarray(rd.ints(iat + 2, n), dtype=bool).reshape(shape)
        ga = _sum_to(_record.where(mask, g, 0.0), sha, bool(flags & ONE_A)) if nd & NEED_A else None
        gb = _sum_to(_record.where(mask, 0.0, g), shb, bool(flags & ONE_B)) if nd & NEED_B else None
        return ga, gb
    if fam == "reduce":
        P, R, Q = (int(v) for v in rd.ints(iat, 3))
        if p.name == "sum" and P * Q == 1:  # a full sum: its adjoint read by every element
            return _record.gather(g, _zeros_index(sha), ("sum adjoint", sha)), None
        gq = np.broadcast_to(np.reshape(g, (P, 1, Q)), (P, R, Q))
        if p.name == "prod":
            gq = gq * _exclusive_products(np.reshape(rd.tensor(a), (P, R, Q)))
        elif p.name in ("amax", "amin"):
            x = np.reshape(np.asarray(rd.t.value(a)), (P, R, Q))
            yv = np.reshape(np.asarray(y._v), (P, 1, Q))
            hit = (x == yv) | (np.isnan(x) & np.isnan(yv))
            gq = gq * (hit / hit.sum(axis=1, keepdims=True))
        return np.reshape(gq, sha), None
    if fam == "scan":
        P, R, Q = (int(v) for v in rd.ints(iat, 3))
        gq = np.reshape(g, (P, R, Q))
        if p.name == "cumsum":
            out = np.flip(np.cumsum(np.flip(gq, axis=1), axis=1), axis=1)
        else:
            x = np.reshape(rd.tensor(a), (P, R, Q))
            yq = np.reshape(y, (P, R, Q))
            if _all_normal(x) and _all_normal(yq):
                out = np.flip(np.cumsum(np.flip(gq * yq, axis=1), axis=1), axis=1) / x
            else:  # no division, exact at zeros and infinities: ga_r = y_{r-1} T_r with
                # T_r = g_r + x_{r+1} T_{r+1}, as the jitted reverse kernel
                # (a zero factor ends the terms it multiplies, even where the products after
                # it overflowed to inf)
                xzero = np.asarray(_record.raw(x)) == 0.0
                cols = [gq[:, R - 1:, :]]
                for r in range(R - 2, -1, -1):
                    cols.append(_record.where(xzero[:, r + 1:r + 2, :], gq[:, r:r + 1, :],
                                              gq[:, r:r + 1, :] + x[:, r + 1:r + 2, :] * cols[-1]))
                cols.reverse()
                zero = np.asarray(_record.raw(yq)) == 0.0
                out = np.concatenate([cols[0]] + [
                    _record.where(zero[:, r - 1:r, :], 0.0, yq[:, r - 1:r, :] * cols[r])
                    for r in range(1, R)], axis=1)
        return np.reshape(out, sha), None
    if fam == "gather":
        idx = np.asarray(rd.ints(iat, math.prod(shape)))
        return _scatter_add(g, idx, sha), None
    if fam == "scatter":
        m = int(rd.ints(iat, 1)[0])
        pos = np.asarray(rd.ints(iat + 1, m))
        win = np.asarray(rd.ints(iat + 1 + m, m)) != 0
        ga = gb = None
        if nd & NEED_A:  # positions that were overwritten get nothing
            ga = _record.scatter_flat(g, plain(np.zeros(m)), pos, np.ones(m, bool), shape)
            ga = np.reshape(ga, sha)
        if nd & NEED_B:
            gb = np.reshape(_record.gather(np.reshape(g, -1), pos) * win, shb)
        return ga, gb
    if fam == "matmul":
        return _matmul_vjp(g, rd.tensor(a), rd.tensor(b), nd)
    if fam == "escape":
        return _escape_vjp(rd, slot, p.name, a, b, g, nd, functions)
    raise NotImplementedError(f"no differentiable reverse rule for op '{p.name}'")


def _constant_exponent(rd, op, k, b):
    """The exponent c of a power row's a-partial when it is a constant float other than 0 and
    of magnitude at most 2^53: there the partial is c a^(c-1) as such (``_pow_da``'s other
    branches are for the rest), and a^1 is a exactly. None otherwise."""
    if op != POWER or k != 0:
        return None
    bt = rd.tensor(b)
    c = bt._v
    if bt._rg or type(c) is not float or c == 0.0 or not abs(c) <= 2.0 ** 53:
        return None
    return c


_ZEROS = {}  # shape -> read-only int64 zeros: the gather that reads one element everywhere


def _zeros_index(shape):
    idx = _ZEROS.get(shape)
    if idx is None:
        idx = _ZEROS[shape] = np.zeros(shape, np.int64)
        idx.flags.writeable = False
    return idx


def _scatter_add(g, idx, shape):
    """Transpose of the gather y = x.flat[idx]: x's gradient, with repeated positions summed.
    A broadcast map is summed down; otherwise repeated positions are split into layers of
    distinct positions, each an (exactly differentiable) scatter."""
    size = math.prod(shape)
    flat = np.reshape(g, -1)
    gshape = _shape(g._v)
    try:
        bmap = np.broadcast_to(np.arange(size).reshape(shape), gshape).reshape(-1)
        if bmap.size == idx.size and np.array_equal(bmap, idx):
            return _sum_to(g, shape)
    except ValueError:
        pass
    order = np.argsort(idx, kind="stable")
    sidx = idx[order]
    first = np.r_[True, sidx[1:] != sidx[:-1]] if sidx.size else np.zeros(0, bool)
    rank = np.arange(sidx.size) - np.maximum.accumulate(np.where(first, np.arange(sidx.size), 0))
    out = plain(np.zeros(size))
    for r in range(int(rank.max()) + 1 if rank.size else 0):
        sel = order[rank == r]  # positions of g whose index occurs for the r-th time
        part = _record.scatter_flat(plain(np.zeros(size)), _record.gather(flat, sel),
                                    idx[sel], np.ones(sel.size, bool), (size,))
        out = out + part
    return np.reshape(out, shape)


def _matmul_vjp(g, a, b, nd):
    sa, sb = _shape(a._v), _shape(b._v)
    a2 = np.reshape(a, (1,) + sa) if len(sa) == 1 else a
    b2 = np.reshape(b, sb + (1,)) if len(sb) == 1 else b
    gy = g
    if len(sa) == 1 and len(sb) == 1:  # a dot product: 0-d result
        gy = np.reshape(g, (1, 1))
    elif len(sa) == 1:
        gy = np.expand_dims(gy, -2)
    elif len(sb) == 1:
        gy = np.expand_dims(gy, -1)
    ga = gb = None
    if nd & NEED_A:
        ga2 = gy @ np.swapaxes(b2, -1, -2)
        ga = _sum_to(ga2, _shape(a2._v))
        ga = np.reshape(ga, sa)
    if nd & NEED_B:
        gb2 = np.swapaxes(a2, -1, -2) @ gy
        gb = _sum_to(gb2, _shape(b2._v))
        gb = np.reshape(gb, sb)
    return ga, gb


def _escape_vjp(rd, slot, name, a, b, g, nd, functions):
    """An escape's reverse rule (tape/escapes/) run on tensors, so that it records."""
    if name in ("function", "function_out"):
        return functions(slot, g) if functions is not None else (None, None)
    t = rd.t
    esc = ESCAPES[name]
    sha, shb, shy, params = t.escapes[slot]
    outs = esc.outputs(sha, shb, **params)
    A = np.reshape(rd.tensor(a), sha)
    B = np.reshape(rd.tensor(b), shb) if b >= 0 else None
    y = split(TENSORS, np.reshape(rd.tensor(slot), shy), outs)
    gy = split(TENSORS, np.reshape(g, shy), outs)
    ga, gb = esc.vjp(TENSORS, gy, y, A, B, bool(nd & NEED_A), bool(nd & NEED_B), **params)
    ga = _sum_to(ga, sha) if nd & NEED_A else None  # (a broadcast operand: matmul_blas's rule sums)
    gb = _sum_to(gb, shb) if nd & NEED_B else None
    return (np.reshape(ga, _shape(t.value(a))) if ga is not None else None,
            np.reshape(gb, _shape(t.value(b))) if gb is not None else None)
