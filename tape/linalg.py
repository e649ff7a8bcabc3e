"""``tape.numpy.linalg``: norm, det, slogdet, inv and solve on tensors.

det, inv, slogdet and solve are escape rows: their reverse rules need LAPACK, so they run as
NumPy code between jitted segments of the sweep. norm is built from table primitives.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from . import _numpy_impl as npi
from ._record import escape, plain, raw

SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])


def _square(a, name):
    a = npi.as_tensor(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError(f"{name}: last 2 dimensions of the array must be square "
                                    f"(got shape {a.shape})")
    return a


@npi.implements(np.linalg.det)
def det(a):
    a = _square(a, "det")
    return escape("det", np.linalg.det(a._v), a)


@npi.implements(np.linalg.slogdet)
def slogdet(a):
    a = _square(a, "slogdet")
    sign, logabs = np.linalg.slogdet(a._v)
    return SlogdetResult(plain(float(sign) if np.ndim(sign) == 0 else sign),
                         escape("logabsdet", logabs, a))


@npi.implements(np.linalg.inv)
def inv(a):
    a = _square(a, "inv")
    return escape("inv", np.linalg.inv(a._v), a)


@npi.implements(np.linalg.solve)
def solve(a, b):
    a = _square(a, "solve")
    b = npi.as_tensor(b)
    y = np.linalg.solve(a._v, b._v)
    # b is a vector only when 1-D (NumPy 2); batch dimensions broadcast. The reverse rule works
    # on equal batch shapes, so broadcast both operands first (a gather: its reverse is a sum).
    vec = b.ndim == 1
    b_mat = b.shape + (1,) if vec else b.shape
    batch = np.broadcast_shapes(a.shape[:-2], b_mat[:-2])
    if a.shape[:-2] != batch:
        a = npi.broadcast_to(a, batch + a.shape[-2:])
    if b_mat[:-2] != batch:
        b = npi.broadcast_to(b, batch + b.shape[-1:] if vec else batch + b.shape[-2:])
    b_mat = batch + b_mat[-2:]
    return escape("solve", y, a, b, shapes=(a.shape, b_mat, batch + b_mat[-2:]))


@npi.implements(np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):
    x = npi.as_tensor(x)
    if isinstance(axis, (int, np.integer)):
        axis = (int(axis),)
    if axis is None and ord is not None:
        axis = tuple(range(x.ndim)) if x.ndim <= 2 else None
        if axis is None:
            raise ValueError("norm: improper number of dimensions to norm")
    if axis is None or ord is None or (ord == "fro" and len(axis) == 2):
        return _two_norm(x, axis, keepdims)
    if len(axis) == 1:
        return _vector_norm(x, ord, axis, keepdims)
    if len(axis) == 2:
        return _matrix_norm(x, ord, axis, keepdims)
    raise ValueError("norm: improper number of dimensions to norm")


def _two_norm(x, axis, keepdims):
    return _root(npi.sum(x * x, axis=axis, keepdims=keepdims), np.sqrt)


def _root(s, root):
    """root(s) of a sum of powers s >= 0, whose gradient at s = 0 is the subgradient 0 (as
    PyTorch's and JAX's norms), not inf * 0 = NaN: where s == 0 the result is the constant 0 and
    the root reads 1. The test s == 0 is a guard under tape.compile (a replay where it changes
    records again)."""
    zero = s == 0.0
    if not np.any(zero):
        return root(s)
    return npi.where(zero, 0.0, root(npi.where(zero, 1.0, s)))


def _vector_norm(x, ord, axis, keepdims):
    if ord is None or ord == 2:
        return _two_norm(x, axis, keepdims)
    if ord == np.inf:
        return npi.max(abs(x), axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return npi.min(abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return plain(np.sum(raw(x) != 0, axis=axis, keepdims=keepdims).astype(float) * 1.0)
    if ord == 1:
        return npi.sum(abs(x), axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
    p = float(ord)
    return _root(npi.sum(abs(x) ** p, axis=axis, keepdims=keepdims), lambda s: s ** (1.0 / p))


def _matrix_norm(x, ord, axis, keepdims):
    r, c = (a % x.ndim for a in axis)
    if ord in (1, -1):
        red = npi.sum(abs(x), axis=r, keepdims=True)
        out = (npi.max if ord == 1 else npi.min)(red, axis=c, keepdims=True)
    elif ord in (np.inf, -np.inf):
        red = npi.sum(abs(x), axis=c, keepdims=True)
        out = (npi.max if ord == np.inf else npi.min)(red, axis=r, keepdims=True)
    else:
        raise TypeError(f"norm: matrix norm ord={ord!r} (needs an SVD) is not supported on "
                        "tapejit tensors; supported: None, 'fro', 1, -1, inf, -inf")
    return out if keepdims else npi.squeeze(out, axis=(r, c))


__all__ = ["det", "slogdet", "inv", "solve", "norm"]
