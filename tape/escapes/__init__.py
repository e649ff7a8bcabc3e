"""Escape primitives: the rows whose rules need LAPACK or BLAS, each defined once.

``jit/table.py`` holds an escape's opcode row only (family ``"escape"``); everything else about
it lives in one module of this package, registered in ``ESCAPES`` under the row's name:

- ``value(a, b, **params)``: its value, NumPy on plain arrays (eager recording, compiled
  replay, and the escape called from another rule in NumPy);
- ``vjp(xp, g, y, a, b, need_a, need_b, **params) -> (ga, gb)``: its reverse rule;
- ``jvp(xp, ta, tb, y, a, b, **params) -> ty``: its forward rule (``ta`` / ``tb`` None for a
  zero tangent; in NumPy they carry k directions on a leading axis, so a rule broadcasts over
  leading axes);
- ``outputs(sha, shb, **params)``: the shapes of its results from its operands', raising
  ``ValueError`` for shapes that are not the rule's (recording and loading a saved tape check
  with it), and ``work(sha, shb, **params)``, the loop iterations it costs (a loaded file's
  budget).

The rules are written once against an array namespace ``xp``: ``NUMPY`` when the backward
driver, the tangent program or a replay runs them between jitted segments on plain arrays,
``TENSORS`` when a backward or a tangent is itself recorded (higher order), where each
operation, the escapes a rule calls included (``xp.solve_triangular``, ``xp.eigh``, ...),
records. ``a``, ``b``, ``y`` and ``g`` arrive in the shapes ``outputs`` names (the canonical
shapes stored with the row, ``t.escapes[slot] = (sha, shb, shy, params)``).

An escape with several results (``eigh``'s (w, V), ``svd``'s (U, S, Vh), ``qr``'s (Q, R)) is
one row whose value is the results flattened and concatenated; ``split`` hands the rules the
results (and their adjoints) as a tuple, and the user's tensors are slices of the row (gathers).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..core import bilinear as _bilinear, record as _record
from ..core.tensor import plain, raw
from ..core.tensor import Tensor


@dataclass(frozen=True)
class Escape:
    name: str
    value: object
    vjp: object
    jvp: object
    outputs: object
    work: object
    binary: bool = False  # takes a second operand b
    params: dict = field(default_factory=dict)  # name -> allowed values (the first: default)
    # NumPy fast paths of matmul_blas (the backward driver's and compiled plans')
    vjp_into: bool = False  # vjp also takes out=(a's block, b's block) to write into
    vjp_a_rows: object = None  # rule(g, b, shape) -> a's adjoint summed over its rows

    def full_params(self, params):
        """`params` completed with the defaults, checked against the allowed values."""
        out = {}
        for k, allowed in self.params.items():
            v = params.get(k, allowed[0])
            if v not in allowed or type(v) not in (bool, int):
                raise ValueError(f"{self.name}: parameter {k}={v!r} is not one of {allowed}")
            out[k] = v
        unknown = sorted(set(params) - set(self.params))
        if unknown:
            raise ValueError(f"{self.name}: unknown parameters {unknown}")
        return out

    def row_shape(self, outs):
        """The row's value shape: the result's, or the packed length of several."""
        return outs[0] if len(outs) == 1 else (sum(math.prod(s) for s in outs),)


ESCAPES: dict[str, Escape] = {}


def register(esc):
    ESCAPES[esc.name] = esc
    return esc


class _Namespace:
    """NumPy's functions (on tensors they dispatch to tapejit's), plus every escape by name:
    computed (NUMPY) or recorded (TENSORS)."""

    def __init__(self, tensors):
        self.tensors = tensors

    def __getattr__(self, name):
        esc = ESCAPES.get(name)
        if esc is None:
            return getattr(np, name)
        if self.tensors:
            return lambda a, b=None, **p: record(name, a, b, **p)
        return lambda a, b=None, **p: esc.value(a, b, **esc.full_params(p))

    def value(self, x):
        """The plain value (for a decision or a check that does not enter the result)."""
        return np.asarray(raw(x)) if self.tensors else x

    def constant(self, x):
        return plain(x) if self.tensors else x


NUMPY = _Namespace(False)
TENSORS = _Namespace(True)


def split(xp, flat, outs):
    """The results packed in `flat` (an escape's row value, or its adjoint), shaped `outs`."""
    if len(outs) == 1:
        return xp.reshape(flat, outs[0])
    res, o = [], 0
    for s in outs:
        n = math.prod(s)
        res.append(xp.reshape(flat[o:o + n], s))
        o += n
    return tuple(res)


def pack(xp, parts, outs, k=None):
    """The inverse of ``split``; with `k`, each part carries k directions on a leading axis
    (the tangent arena's direction-major layout)."""
    if len(outs) == 1:
        return parts
    if k is None:
        return xp.concatenate([xp.reshape(p, -1) for p in parts])
    return np.concatenate([np.reshape(np.broadcast_to(p, (k,) + tuple(s)), (k, -1))
                           for p, s in zip(parts, outs)], axis=1)


def record(name, a, b=None, **params):
    """Call escape `name` on tensors (or plain values): its value from ``value``, recorded as
    one row when an operand requires grad; a tuple of tensors for several results."""
    esc = ESCAPES[name]
    params = esc.full_params(params)
    a = a if type(a) is Tensor else plain(_record.constant(a))
    if b is not None:
        b = b if type(b) is Tensor else plain(_record.constant(b))
    sha = np.shape(raw(a))
    shb = np.shape(raw(b)) if b is not None else None
    outs = esc.outputs(sha, shb, **params)
    val = esc.value(raw(a), raw(b) if b is not None else None, **params)
    if len(outs) == 1:
        return _bilinear.escape(name, val, a, b, shapes=(sha, shb, outs[0], params))
    if not _record.recording(a, b):
        return tuple(plain(_record.check_dtype(v, name)) for v in val)
    flat = pack(np, val, outs)
    row = _bilinear.escape(name, flat, a, b, shapes=(sha, shb, flat.shape, params))
    return split(TENSORS, row, outs)


# ---------------------------------------------------------------------------------------------
# Helpers the rules share (any xp)


def mT(xp, x):
    return xp.swapaxes(x, -1, -2)


def diagonal(x):
    """The diagonal of the last two axes (any xp: a masked sum, which records)."""
    return (x * np.eye(x.shape[-1])).sum(axis=-1)


def diag_embed(xp, d):
    return col(xp, d) * np.eye(d.shape[-1])


def col(xp, d):
    """d[..., :, None] (any xp)."""
    return xp.reshape(d, tuple(d.shape) + (1,))


def row(xp, d):
    """d[..., None, :] (any xp)."""
    return xp.reshape(d, tuple(d.shape[:-1]) + (1, d.shape[-1]))


def mat(xp, w):
    """w[..., None, None] (any xp)."""
    return xp.reshape(w, tuple(np.shape(raw(w))) + (1, 1))


def sym_lower(xp, t):
    """The symmetric matrix a function that reads the lower triangle sees: tril(t) mirrored."""
    return xp.tril(t) + mT(xp, xp.tril(t, -1))


def fold_lower(xp, s):
    """The adjoint of ``sym_lower``: an adjoint S of the symmetric matrix, as the adjoint of
    the array whose lower triangle was read (the upper gets nothing)."""
    return xp.tril(s + mT(xp, s)) - s * np.eye(s.shape[-1])


def square(sha, name):
    if len(sha) < 2 or sha[-1] != sha[-2]:
        raise ValueError(f"{name}: last 2 dimensions of the array must be square (got {sha})")
    return sha[-1]


def gap_inverse(xp, w, by=None):
    """F[..., i, j] = 1 / (w_j - w_i) off the diagonal, 0 on it and where the values `by` (w by
    default; an SVD's singular values s for w = s^2) are equal to rounding: |by_j - by_i| <=
    16 n eps max|by|, the accuracy LAPACK computes them to. Also returns the mask of those tied
    pairs (off the diagonal)."""
    by = w if by is None else by
    n = w.shape[-1]
    diff = row(xp, w) - col(xp, w)
    gap = row(xp, by) - col(xp, by)
    scale = col(xp, xp.max(abs(by), axis=-1, keepdims=True)) if n else 0.0
    tied = abs(gap) <= scale * (16.0 * n * np.finfo(float).eps)
    tied = np.asarray(raw(tied)) | np.eye(n, dtype=bool)
    F = xp.where(tied, 0.0, 1.0 / xp.where(tied, 1.0, diff))
    return F, tied & ~np.eye(n, dtype=bool)


def check_recorded_ties(xp, tied, what):
    """Refuse to record a rule (higher order, dual numbers) at tied values: its first
    derivative is right for a loss that does not depend on the basis, but its own derivative
    needs the limit of (gw_j - gw_i) / (w_j - w_i) at the tie, which the rule cannot know."""
    if xp.tensors and tied.any():
        raise ValueError(
            f"{what}: derivatives beyond the first (and forward mode with dual numbers) at tied "
            "eigen- or singular values (equal to rounding) are not supported: the rule needs "
            "the eigenvectors' derivative there, which does not exist. First derivatives "
            "(tape.grad, tape.jvp) of a loss that does not depend on the basis inside the "
            "eigenspace are supported.")


def check_gauge(xp, m, tied, what):
    """Raise when the loss depends on the choice of basis inside an eigenspace of tied
    eigen- (or singular) values: `m` is the matrix whose antisymmetric part over tied pairs the
    rule would divide by a zero gap (its symmetric part, a basis-free dependence, is fine)."""
    if not tied.any():
        return
    mv = xp.value(m)
    anti = np.abs(mv - np.swapaxes(mv, -1, -2))
    big = np.max(np.abs(mv)) if mv.size else 0.0
    if np.any(anti[np.broadcast_to(tied, anti.shape)] > 1e-8 * big):
        raise ValueError(
            f"{what}: the gradient through the vectors of (nearly) equal values is undefined: "
            "the loss depends on the choice of basis inside their eigenspace. Losses of the "
            "values alone, or of the whole eigenspace (its projector V V^T), are defined there.")
