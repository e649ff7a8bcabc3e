"""matmul_blas: a batched product large enough for BLAS (smaller ones run inside the sweep).

Operands arrive as (..., M, K) and (..., K, N); an operand shared by every batch element keeps
its own (M, K) / (K, N) shape, and its adjoint is summed over the batch.
"""
from __future__ import annotations

import math

import numpy as np

from . import Escape, mT, register


def value(a, b):
    return np.matmul(a, b)


def vjp(xp, g, y, a, b, need_a, need_b, out=(None, None)):
    """`out` (NumPy only): arrays (or None) to write ga / gb into when no batch broadcast is
    summed away; they are then returned in place of new ones (a compiled tape passes an
    adjoint's own zeroed block when this row is its only contribution: no temporary, no
    accumulating pass)."""
    ga = _product(xp, g, mT(xp, b), a.shape, out[0]) if need_a else None
    gb = _product(xp, mT(xp, a), g, b.shape, out[1]) if need_b else None
    return ga, gb


def _product(xp, x, y, shape, out):
    if out is not None and x.shape[:-1] + y.shape[-1:] == shape and x.shape[:-2] == y.shape[:-2]:
        return np.matmul(x, y, out=out)
    return sum_to_batch(xp, x @ y, shape)


def sum_to_batch(xp, grad, shape):
    """Sum a batched gradient down to an operand's (possibly batch-broadcast) shape."""
    while grad.ndim > len(shape):
        grad = xp.sum(grad, axis=0)
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and grad.shape[i] != 1)
    return xp.sum(grad, axis=axes, keepdims=True) if axes else grad


def vjp_a_rows(g, b, shape):
    """Sum over a's rows of ga = g @ b^T, summed down to `shape` (a's broadcast operand, one
    row): the rows of g summed first (a BLAS product with ones, fast where NumPy's middle-axis
    sum is slow), then one small product per batch, M times fewer flops than forming ga."""
    rows = np.matmul(np.ones((1, g.shape[-2])), g)
    return sum_to_batch(np, rows @ np.swapaxes(b, -1, -2), shape)


def jvp(xp, ta, tb, y, a, b):
    out = 0.0
    if ta is not None:
        out = ta @ b
    if tb is not None:
        out = out + a @ tb
    return out


def outputs(sha, shb):
    if len(sha) < 2 or shb is None or len(shb) < 2 or shb[-2] != sha[-1]:
        raise ValueError(f"matmul: operand shapes {sha} and {shb} do not multiply")
    batch = max(sha[:-2], shb[:-2], key=len)
    if sha[:-2] not in ((), batch) or shb[:-2] not in ((), batch):
        raise ValueError(f"matmul: batch shapes {sha[:-2]} and {shb[:-2]} differ")
    return (batch + (sha[-2], shb[-1]),)


def work(sha, shb):
    (shy,) = outputs(sha, shb)
    return math.prod(shy[:-2]) * (1 + sha[-2] * sha[-1] * shb[-1]) + math.prod(shy)


register(Escape("matmul_blas", value, vjp, jvp, outputs, work, binary=True, vjp_into=True,
                vjp_a_rows=vjp_a_rows))
