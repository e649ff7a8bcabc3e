"""``tape.numpy_ops.linalg``: NumPy's linear algebra on tensors.

det, inv, slogdet, solve, cholesky, eigh, svd and qr are escape rows (``tape/escapes/``: their
rules need LAPACK, so they run as NumPy code between jitted segments, and record when a
backward is itself recorded); eigvalsh, svdvals, pinv, lstsq and cond are built from them, and
norm from table primitives.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from . import _impl as npi
from ..core.tensor import plain, raw
from ..escapes import record

SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])
QRResult = namedtuple("QRResult", ["Q", "R"])
LstsqResult = namedtuple("LstsqResult", ["x", "residuals", "rank", "singular_values"])


def _square(a, name):
    a = npi.as_tensor(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError(f"{name}: last 2 dimensions of the array must be square "
                                    f"(got shape {a.shape})")
    return a


def _mT(x):
    return npi.swapaxes(x, -1, -2)


@npi.implements(np.linalg.det)
def det(a):
    return record("det", _square(a, "det"))


@npi.implements(np.linalg.slogdet)
def slogdet(a):
    a = _square(a, "slogdet")
    sign = np.linalg.slogdet(a._v)[0]
    return SlogdetResult(plain(float(sign) if np.ndim(sign) == 0 else sign),
                         record("logabsdet", a))


@npi.implements(np.linalg.inv)
def inv(a):
    return record("inv", _square(a, "inv"))


def _matrix_operands(a, b, name):
    """a (..., n, n) and b as a batch of matrices of a's batch (a 1-D b a column), both
    broadcast (a gather: its reverse is a sum); and whether b was a vector."""
    b = npi.as_tensor(b)
    vec = b.ndim == 1
    b_mat = b.shape + (1,) if vec else b.shape
    if len(b_mat) < 2 or b_mat[-2] != a.shape[-1]:
        raise ValueError(f"{name}: right-hand side of shape {b.shape} does not match a matrix "
                         f"of shape {a.shape}")
    batch = np.broadcast_shapes(a.shape[:-2], b_mat[:-2])
    if a.shape[:-2] != batch:
        a = npi.broadcast_to(a, batch + a.shape[-2:])
    b = npi.reshape(b, b_mat) if vec else b
    if b_mat[:-2] != batch:
        b = npi.broadcast_to(b, batch + b_mat[-2:])
    return a, b, vec


@npi.implements(np.linalg.solve)
def solve(a, b):
    a, bm, vec = _matrix_operands(_square(a, "solve"), b, "solve")
    y = record("solve", a, bm)
    return npi.reshape(y, y.shape[:-1]) if vec else y


@npi.implements(np.linalg.cholesky)
def cholesky(a, /, *, upper=False):
    """The lower factor (from A's lower triangle, as NumPy); upper=True: the upper factor, from
    A's upper triangle."""
    a = _square(a, "cholesky")
    if upper:
        return _mT(record("cholesky", _mT(a)))
    return record("cholesky", a)


@npi.implements(np.linalg.eigh)
def eigh(a, UPLO="L"):
    """(eigenvalues, eigenvectors) of the symmetric matrix in A's lower (UPLO='L') or upper
    triangle. Tied eigenvalues: see tape/escapes/eigen.py (the gradient of a loss of the
    eigenvalues, or of whole eigenspaces, is finite and correct; one that depends on the basis
    chosen inside an eigenspace raises)."""
    a = _square(a, "eigh")
    if UPLO not in ("L", "U"):
        raise ValueError("eigh: UPLO argument must be 'L' or 'U'")
    w, v = record("eigh", a if UPLO == "L" else _mT(a))
    return EighResult(w, v)


@npi.implements(np.linalg.eigvalsh)
def eigvalsh(a, UPLO="L"):
    """eigh's eigenvalues (its LAPACK call, so that the gradient has the eigenvectors)."""
    return eigh(a, UPLO)[0]


@npi.implements(np.linalg.svd)
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """The reduced SVD (U, S, Vh). full_matrices=True equals it for a square matrix; for a
    non-square one the completed bases have no derivative: it is refused with a tensor that
    requires grad (pass full_matrices=False)."""
    a = npi.as_tensor(a)
    if a.ndim < 2:
        raise np.linalg.LinAlgError(f"svd: {a.ndim}-dimensional array given. Array must be at "
                                    "least two-dimensional")
    if not compute_uv:
        return svdvals(a)
    m, n = a.shape[-2:]
    if full_matrices and m != n:
        if a.requires_grad:
            raise ValueError(
                f"svd(full_matrices=True) of a {m}x{n} tensor that requires grad: the "
                "completed bases have no derivative; pass full_matrices=False (the reduced "
                "SVD, differentiable), or a.detach() for values only")
        u, s, vh = np.linalg.svd(raw(a), full_matrices=True, hermitian=hermitian)
        return SVDResult(plain(u), plain(s), plain(vh))
    if hermitian and a.requires_grad:
        raise ValueError("svd(hermitian=True) of a tensor that requires grad: pass "
                         "hermitian=False (the same singular values), or use eigh")
    return SVDResult(*record("svd", a))


@npi.implements(np.linalg.svdvals)
def svdvals(x, /):
    x = npi.as_tensor(x)
    if x.ndim < 2:
        raise np.linalg.LinAlgError(f"svdvals: {x.ndim}-dimensional array given. Array must "
                                    "be at least two-dimensional")
    return record("svd", x)[1]


@npi.implements(np.linalg.qr)
def qr(a, mode="reduced"):
    """mode 'reduced' (and 'complete' of a square matrix): (Q, R); 'r': R. A wide matrix
    (m < n), 'complete' of a tall one and 'raw' are refused with a tensor that requires grad."""
    a = npi.as_tensor(a)
    if a.ndim < 2:
        raise np.linalg.LinAlgError(f"qr: {a.ndim}-dimensional array given. Array must be at "
                                    "least two-dimensional")
    m, n = a.shape[-2:]
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"qr: unrecognized mode {mode!r}")
    if mode == "raw" or (mode == "complete" and m != n) or m < n:
        if a.requires_grad:
            raise ValueError(
                f"qr(mode={mode!r}) of a {m}x{n} tensor that requires grad: gradients cover "
                "the reduced decomposition of a square or tall matrix (mode='reduced' or 'r', "
                "m >= n); for a wide one, qr of its transpose")
        res = np.linalg.qr(raw(a), mode=mode)
        return QRResult(plain(res[0]), plain(res[1])) if isinstance(res, tuple) else plain(res)
    q, r = record("qr", a)
    return r if mode == "r" else QRResult(q, r)


@npi.implements(np.linalg.pinv)
def pinv(a, rcond=None, hermitian=False, *, rtol=np._NoValue):
    """NumPy's formula: V diag(1/s) U^T from the reduced SVD, singular values at most
    rcond * max(s) left out (their pseudo-inverse is discontinuous there)."""
    a = npi.as_tensor(a)
    if rcond is None:
        rcond = 1e-15 if rtol is np._NoValue else (
            max(a.shape[-2:]) * np.finfo(float).eps if rtol is None else rtol)
    elif rtol is not np._NoValue:
        raise ValueError("`rtol` and `rcond` can't be both set.")
    if a.size == 0:
        return plain(np.linalg.pinv(raw(a)))
    u, s, vh = svd(a, full_matrices=False)
    cutoff = np.asarray(rcond)[..., None] * npi.max(s, axis=-1, keepdims=True)
    large = s > cutoff
    s_inv = npi.where(large, 1.0 / npi.where(large, s, 1.0), 0.0)
    return _mT(vh) @ (npi.expand_dims(s_inv, -1) * _mT(u))


@npi.implements(np.linalg.lstsq)
def lstsq(a, b, rcond=None):
    """x = pinv(a) b with NumPy's cutoff (rcond, default eps * max(m, n)); residuals, rank and
    singular values as NumPy returns them."""
    a, b = npi.as_tensor(a), npi.as_tensor(b)
    if a.ndim != 2 or b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise np.linalg.LinAlgError(f"lstsq: incompatible dimensions {a.shape} and {b.shape}")
    m, n = a.shape
    if rcond is None:
        rcond = np.finfo(float).eps * max(m, n)
    s = svdvals(a) if a.size else plain(np.zeros(0))
    # (a comparison of tensors: tape.compile guards the rank it decides)
    rank = int(np.sum(s > rcond * npi.max(s))) if a.size else 0
    x = pinv(a, rcond=rcond) @ b if a.size else plain(np.zeros((n,) + b.shape[1:]))
    if rank == n and m > n:
        r = b - a @ x
        res = npi.sum(r * r, axis=0)
        res = npi.reshape(res, (1,)) if b.ndim == 1 else res
    else:
        res = plain(np.zeros(0))
    return LstsqResult(x, res, rank, s)


@npi.implements(np.linalg.cond)
def cond(x, p=None):
    """p None / 2 / -2: the ratio of extreme singular values (svdvals); other p: the norm of x
    times the norm of its inverse."""
    x = npi.as_tensor(x)
    if p is None or p in (2, -2):
        s = svdvals(x)
        if p == -2:
            return s[..., -1] / s[..., 0]
        return s[..., 0] / s[..., -1]
    return norm(x, p, axis=(-2, -1)) * norm(inv(x), p, axis=(-2, -1))


@npi.implements(np.linalg.tensorinv)
def tensorinv(a, ind=2):
    """NumPy's: the inverse of a reshaped to a square matrix, reshaped back."""
    a = npi.as_tensor(a)
    if ind <= 0:
        raise ValueError("Invalid ind argument.")
    oldshape = a.shape
    prod = int(np.prod(oldshape[ind:]))
    ia = inv(npi.reshape(a, (prod, -1)))
    return npi.reshape(ia, oldshape[ind:] + oldshape[:ind])


@npi.implements(np.linalg.tensorsolve)
def tensorsolve(a, b, axes=None):
    """NumPy's: solve with a reshaped to a square matrix and b flattened."""
    a, b = npi.as_tensor(a), npi.as_tensor(b)
    an = a.ndim
    if axes is not None:
        allaxes = list(range(an))
        for k in axes:
            allaxes.remove(k)
            allaxes.insert(an, k)
        a = npi.transpose(a, allaxes)
    oldshape = a.shape[-(an - b.ndim):]
    prod = int(np.prod(oldshape))
    if a.size != prod ** 2:
        raise np.linalg.LinAlgError(
            "Input arrays must satisfy the requirement "
            "prod(a.shape[b.ndim:]) == prod(a.shape[:b.ndim])")
    res = solve(npi.reshape(a, (prod, prod)), npi.reshape(b, (-1,)))
    return npi.reshape(res, oldshape)


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
    elif ord in (2, -2, "nuc"):  # from the singular values, of the two axes moved last
        s = svdvals(npi.moveaxis(x, (r, c), (-2, -1)))
        out = (npi.max if ord == 2 else npi.min if ord == -2 else npi.sum)(s, axis=-1)
        if keepdims:
            out = npi.expand_dims(out, (r, c) if r < c else (c, r))
        return out
    else:
        raise ValueError(f"norm: invalid norm order {ord!r} for matrices")
    return out if keepdims else npi.squeeze(out, axis=(r, c))


__all__ = ["det", "slogdet", "inv", "solve", "norm", "cholesky", "eigh", "eigvalsh", "svd",
           "svdvals", "qr", "pinv", "lstsq", "cond", "tensorinv", "tensorsolve"]
