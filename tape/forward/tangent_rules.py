"""Forward-mode rules as tensor operations: the tangent of one recorded row.

``row_tangent`` reads a row of a tape (recording or built) and returns the tangent of its result
from its operands' tangents, computed with ordinary tensor operations. Those operations are
themselves recorded when their inputs have history, which is what nests: the tangent of an
outer dual level is dual at the inner ones (forward over forward), and a backward through a
tangent differentiates it (reverse over forward: exact Hessian-vector products).

Elementwise rules come from the table's derivative formulas (``Prim.d``), evaluated on tensors;
the other families follow the reverse kernels' conventions (ties of max/min share evenly, zeros
of prod/cumprod exactly), so that each JVP is the transpose of its VJP.
"""
from __future__ import annotations

import bisect
import math

import numpy as np

from jit.table import FLAG_SHIFT, OP_MASK, ONE_A, ONE_B, OPCODE, TABLE

from ..core import record as _record
from ..core.formulas import derivative, register_helpers
from ..core.tensor import plain, result
from ..escapes import ESCAPES, TENSORS, pack, split
from .special_rules import HELPERS

register_helpers(HELPERS)  # the special rows' helpers, differentiable (not piecewise constant)

_NAMES = {p.name: c for c, p in enumerate(TABLE)}
COPY, GATHER, SCATTER, WHERE = (OPCODE[n] for n in ("copy", "gather", "scatter", "where"))
FUNCTION, FUNCTION_OUT = OPCODE["function"], OPCODE["function_out"]
CONST = OPCODE["const"]


# -- reading rows ---------------------------------------------------------------------------

_NO_INTS = np.zeros(0, np.int64)


class TapeReader:
    """Rows, attributes and values of a tape, whether it is still recording or built."""

    def __init__(self, t):
        self.t = t
        self._starts = [0]  # offsets of the int attribute chunks (recording tapes)
        self._nchunks = 0

    def row(self, slot):
        """(code with flags, a, b, int attribute offset)."""
        t = self.t
        if t.built is None:
            code, a, b = t.rows[3 * slot:3 * slot + 3]
            k = t.side_of.get(slot)
            return code, a, b, (t.side[4 * k + 2] if k is not None else 0)
        R = t.built.R
        k = int(R[slot, 3])
        return int(R[slot, 0]), int(R[slot, 1]), int(R[slot, 2]), \
            (int(t.built.S[k, 1]) if k >= 0 else 0)

    def ints(self, off, count):
        t = self.t
        if t.built is not None:
            return t.built.IA[off:off + count]
        if count == 0:  # an empty gather or scatter may have written no chunk at all
            return _NO_INTS
        while self._nchunks < len(t.ia):
            self._starts.append(self._starts[-1] + t.ia[self._nchunks].size)
            self._nchunks += 1
        j = bisect.bisect_right(self._starts, off) - 1
        chunk = t.ia[j]
        lo = off - self._starts[j]
        if lo + count <= chunk.size:
            return chunk[lo:lo + count]
        return np.concatenate(t.ia)[off:off + count]  # spans chunks (not written so; safety)

    def __len__(self):
        return len(self.t)

    def tensor(self, slot):
        """The row's result as a tensor with history (so rules that use it are recorded); a
        constant's as a plain tensor (it has no history: rules' ops on it record no rows)."""
        t = self.t
        if (t.rows[3 * slot] if t.built is None else t.built.R[slot, 0]) == CONST:
            return plain(t.value(slot))
        return result(t.value(slot), t, slot)


# -- the rules ------------------------------------------------------------------------------

def _shape(v):
    return () if type(v) is float else np.shape(v)


def _zeros_like(x):
    return plain(0.0) if type(x._v) is float else plain(np.zeros(x._v.shape))


def _fit(tx, flag_one, shape):
    """An operand's tangent as it enters an elementwise row of result `shape`."""
    if tx is None:
        return None
    if flag_one and _shape(tx._v) != ():
        return np.reshape(tx, ())  # a one-element operand is read for every element
    return tx


def _fit_value(x, flag_one):
    if flag_one and _shape(x._v) != ():
        return np.reshape(x, ())
    return x


def _full(t, shape):
    if _shape(t._v) != shape:
        return np.broadcast_to(t, shape) if shape else np.reshape(t, ())
    return t


def row_tangent(rd, slot, ta, tb, functions=None):
    """Tangent of row `slot` (a Tensor), from the tangents `ta`, `tb` of its operands (Tensors
    or None for zero). Returns None when the result has no tangent."""
    code, a, b, iat = rd.row(slot)
    op = code & OP_MASK
    flags = code >> FLAG_SHIFT
    p = TABLE[op]
    fam = p.family
    if ta is None and tb is None and fam != "escape":
        return None
    y = rd.tensor(slot)
    shape = _shape(y._v)
    if fam == "unary":
        if op == COPY:
            return np.reshape(ta, shape) if _shape(ta._v) != shape else ta
        d = derivative(op, 0)
        out = ta * d if type(d) is float else d(rd.tensor(a), y) * ta
        return _full(out, shape)
    if fam == "binary":
        out = None
        for k, (tx, s, one) in enumerate(((ta, a, flags & ONE_A), (tb, b, flags & ONE_B))):
            tx = _fit(tx, one, shape)
            if tx is None:
                continue
            d = derivative(op, k)
            if type(d) is float:
                term = tx if d == 1.0 else (-tx if d == -1.0 else tx * d)
            else:
                term = d(_fit_value(rd.tensor(a), flags & ONE_A),
                         _fit_value(rd.tensor(b), flags & ONE_B), y) * tx
            out = term if out is None else out + term
        return _full(out, shape)
    if fam == "select":
        n = math.prod(shape)
        mask = np.asarray(rd.ints(iat + 2, n), dtype=bool).reshape(shape)
        xa = _fit(ta, flags & ONE_A, shape)
        xb = _fit(tb, flags & ONE_B, shape)
        return _record.where(mask, 0.0 if xa is None else xa, 0.0 if xb is None else xb)
    if fam == "reduce":
        P, R, Q = (int(v) for v in rd.ints(iat, 3))
        tx = np.reshape(ta, (P, R, Q))
        if p.name == "sum":
            out = np.sum(tx, axis=1)
        elif p.name == "prod":
            out = np.sum(tx * _exclusive_products(np.reshape(rd.tensor(a), (P, R, Q))), axis=1)
        else:  # amax / amin: ties share evenly, NaN positions carry a NaN maximum
            x = np.reshape(np.asarray(rd.tensor(a)._v), (P, R, Q))
            yv = np.reshape(np.asarray(y._v), (P, 1, Q))
            hit = (x == yv) | (np.isnan(x) & np.isnan(yv))
            w = hit / hit.sum(axis=1, keepdims=True)
            out = np.sum(tx * w, axis=1)
        return np.reshape(out, shape)
    if fam == "scan":
        P, R, Q = (int(v) for v in rd.ints(iat, 3))
        tx = np.reshape(ta, (P, R, Q))
        if p.name == "cumsum":
            out = np.cumsum(tx, axis=1)
        else:  # cumprod: d y_k = sum_{j<=k} dx_j prod_{i<=k, i!=j} x_i
            x = np.reshape(rd.tensor(a), (P, R, Q))
            if _all_normal(x) and _all_normal(y):
                out = np.reshape(y, (P, R, Q)) * np.cumsum(tx / x, axis=1)
            else:  # the recurrence dy_k = dy_{k-1} x_k + y_{k-1} dx_k: exact at zeros and inf
                yr = np.reshape(y, (P, R, Q))
                cols = [tx[:, 0:1, :]]
                for k in range(1, R):
                    cols.append(cols[-1] * x[:, k:k + 1, :] + yr[:, k - 1:k, :] * tx[:, k:k + 1, :])
                out = np.concatenate(cols, axis=1)
        return np.reshape(out, shape)
    if fam == "gather":
        idx = np.asarray(rd.ints(iat, math.prod(shape))).reshape(shape)
        return _record.gather(ta, idx)
    if fam == "scatter":
        m = int(rd.ints(iat, 1)[0])
        pos = np.asarray(rd.ints(iat + 1, m))
        win = np.asarray(rd.ints(iat + 1 + m, m)) != 0
        tx = ta if ta is not None else _zeros_like(rd.tensor(a))
        tv = tb if tb is not None else _zeros_like(rd.tensor(b))
        return _record.scatter_flat(tx, tv, pos, win, shape)
    if fam == "matmul":
        return _matmul_tangent(rd, a, b, ta, tb)
    if fam == "escape":
        return _escape_tangent(rd, slot, p.name, a, b, ta, tb, functions)
    raise NotImplementedError(f"no forward-mode rule for op '{p.name}'")


def _all_normal(x):
    """Every element finite and nonzero (then dividing by it is exact enough)."""
    v = np.asarray(_record.raw(x))
    return bool(np.isfinite(v).all() and (v != 0.0).all())


def _exclusive_products(x):
    """prod of x over axis 1 leaving each position out (exact with zeros), as tensors."""
    P, R, Q = _shape(x._v)
    ones = plain(np.ones((P, 1, Q)))
    left = np.concatenate([ones, np.cumprod(x, axis=1)[:, :R - 1, :]], axis=1)
    rx = np.flip(x, axis=1)
    right = np.flip(np.concatenate([ones, np.cumprod(rx, axis=1)[:, :R - 1, :]], axis=1), axis=1)
    return left * right


def _matmul_tangent(rd, a, b, ta, tb):
    out = None
    if ta is not None:
        out = ta @ rd.tensor(b)
    if tb is not None:
        term = rd.tensor(a) @ tb
        out = term if out is None else out + term
    return out


def _escape_tangent(rd, slot, name, a, b, ta, tb, functions):
    """An escape's forward rule (tape/escapes/) run on tensors, so that it records."""
    if name in ("function", "function_out"):
        return functions(slot) if functions is not None else None
    if ta is None and tb is None:
        return None
    t = rd.t
    esc = ESCAPES[name]
    sha, shb, shy, params = t.escapes[slot]
    outs = esc.outputs(sha, shb, **params)
    A = np.reshape(rd.tensor(a), sha)
    B = np.reshape(rd.tensor(b), shb) if b >= 0 else None
    y = split(TENSORS, np.reshape(rd.tensor(slot), shy), outs)
    out = esc.jvp(TENSORS, np.reshape(ta, sha) if ta is not None else None,
                  np.reshape(tb, shb) if tb is not None else None, y, A, B, **params)
    if len(outs) > 1:
        out = pack(TENSORS, [_full(o, s) for o, s in zip(out, outs)], outs)
    return np.reshape(out, _shape(rd.tensor(slot)._v))
