"""NumPy functions built from others: elementwise compositions (real, sinc, nan_to_num, modf,
frexp, copysign, ldexp, ...), products of two arrays (kron, cross, vecdot, matvec), numpy.linalg
compositions (vector_norm, matrix_norm, multi_dot, matrix_power) and piecewise.

The other families of compositions have modules of their own: ``_statistics``, ``_shapes``,
``_signals`` and ``_polynomials``.

NumPy's own Python implementations mostly start with ``np.asarray``, which a tensor that carries a
gradient refuses, so they cannot simply be run on tensors; these functions follow NumPy's formulas
(and its evaluation order, where that decides the last bit) with recorded operations.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from ..core import guards as _guards
from ..core import record as rec
from ._composing import nan_mask, ndim_of
from ._dispatch import UFUNC_FUNCS, as_tensor, implements
from ._impl import _no_extras, _values
from ..core.tensor import Tensor, plain, raw, tensor


# ---------------------------------------------------------------------------------------------
# Elementwise compositions


@implements(np.real)
def real(val):
    return val if isinstance(val, Tensor) else np.real(val)  # (NumPy: a real array itself)


@implements(np.imag)
def imag(val):
    return plain(np.zeros(np.shape(raw(val))))


@implements(np.real_if_close)
def real_if_close(a, tol=100):
    return a


# Taylor coefficients of sin(y) / y in y^2: (-1)^k / (2k + 1)!, k = 6 ... 0
_SINC_TAYLOR = [(-1.0) ** k / math.factorial(2 * k + 1) for k in range(6, -1, -1)]


@implements(np.sinc)
def sinc(x):
    """sin(pi x) / (pi x), 1 at 0. Near 0 (|pi x| < 0.1) its Taylor polynomial to degree 12
    (truncation below 1e-26 relative), so that every derivative is right at 0 too: NumPy's
    formula replaces 0 by a constant, whose second derivative is 0 instead of -pi^2 / 3."""
    y = np.pi * x
    small = np.asarray(np.abs(y) < 0.1)  # read values: under tape.compile a guard
    y_far = np.where(small, 1.0, y)  # the quotient's branch never sees 0 (no 0 / 0 to mask)
    y2 = np.square(np.where(small, y, 0.0))
    near = _SINC_TAYLOR[0]
    for c in _SINC_TAYLOR[1:]:
        near = near * y2 + c
    return np.where(small, near, np.sin(y_far) / y_far)


@implements(np.nan_to_num)
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    big = np.finfo(np.float64).max
    y = np.where(nan_mask(x), nan, x)
    y = np.where(np.asarray(np.isposinf(x)), big if posinf is None else posinf, y)
    return np.where(np.asarray(np.isneginf(x)), -big if neginf is None else neginf, y)


def _zero_grad(fn):
    """A piecewise-constant function of a tensor: its value, a constant (guarded in replay)."""
    def impl(x, *args, **kwargs):
        r = plain(rec.check_dtype(fn(raw(x), *args, **kwargs), fn.__name__))
        if rec.state.guards is None:
            return r
        if args or kwargs:  # (angle's deg): the guard recomputes with them
            _guards.note(("values", fn.__name__, tuple(sorted(kwargs.items()))), (x,) + args,
                         r._v)
        else:
            _guards.note(("zero_grad", fn.__name__), (x,), r._v)
        return r

    impl.zero_grad = True  # (the coverage table lists it as piecewise constant)
    return impl


implements(np.fix, name="fix")(_zero_grad(np.fix))
implements(np.angle, name="angle")(_zero_grad(np.angle))
_guards.ALLOWED.update(("fix", "angle"))


def modf(x):
    """(fractional part, integral part): the integral part is piecewise constant."""
    whole = np.trunc(x)
    return x - whole, whole


def frexp(x):
    """(mantissa, exponent): x * 2 ** -e, exact, with the integer exponent a plain array."""
    _, e = np.frexp(raw(x))
    if rec.state.guards is not None:
        _guards.note(("values", "frexp", ()), (x,), np.frexp(raw(x)))
    return x * np.ldexp(1.0, -e), e


UFUNC_FUNCS.update({np.modf: modf, np.frexp: frexp})
_guards.ALLOWED.add("frexp")


@implements(np.kron)
def kron(a, b):
    a, b = as_tensor(a), as_tensor(b)
    nd = builtins.max(a.ndim, b.ndim)
    a = np.reshape(a, (1,) * (nd - a.ndim) + a.shape)
    b = np.reshape(b, (1,) * (nd - b.ndim) + b.shape)
    # interleave: a's axis i and b's axis i become adjacent, then merge them
    ae = np.reshape(a, tuple(s for d in a.shape for s in (d, 1)))
    be = np.reshape(b, tuple(s for d in b.shape for s in (1, d)))
    return np.reshape(ae * be, tuple(x * y for x, y in zip(a.shape, b.shape)))


@implements(np.cross)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    a = np.moveaxis(as_tensor(a), axisa, -1)
    b = np.moveaxis(as_tensor(b), axisb, -1)
    na, nb = a.shape[-1], b.shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("incompatible dimensions for cross product (dimension must be 2 or 3)")
    a0, a1 = a[..., 0], a[..., 1]
    b0, b1 = b[..., 0], b[..., 1]
    a2 = a[..., 2] if na == 3 else 0.0
    b2 = b[..., 2] if nb == 3 else 0.0
    if na == 2 and nb == 2:
        return a0 * b1 - a1 * b0
    c = np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
    return np.moveaxis(c, -1, axisc)

# ---------------------------------------------------------------------------------------------
# Products and elementwise functions of two arrays


@implements(np.linalg.vecdot)
def vecdot(x1, x2, /, *, axis=-1):
    return np.sum(x1 * x2, axis=axis)


def matvec(x1, x2):
    return np.matmul(x1, np.expand_dims(x2, -1))[..., 0]


def vecmat(x1, x2):
    return np.matmul(np.expand_dims(x1, -2), x2)[..., 0, :]


def copysign(x1, x2):
    """|x1| with x2's sign: x1 or -x1 (which one is piecewise constant, guarded)."""
    flip = np.signbit(x1) != np.signbit(x2)
    return np.where(np.asarray(flip), -x1, x1 * 1.0)


def ldexp(x1, x2):
    if isinstance(x2, Tensor) and x2.requires_grad:
        raise TypeError("numpy.ldexp: the exponent must be plain integers")
    return x1 * np.ldexp(1.0, np.asarray(raw(x2)))


def logaddexp2(x1, x2):
    """log2(2**x1 + 2**x2) as logaddexp in base 2 (NumPy's stable form)."""
    return np.logaddexp(x1 * math.log(2.0), x2 * math.log(2.0)) / math.log(2.0)


def divmod_(x1, x2):
    return np.floor_divide(x1, x2), np.remainder(x1, x2)


UFUNC_FUNCS.update({np.copysign: copysign, np.ldexp: ldexp, np.logaddexp2: logaddexp2,
                    np.divmod: divmod_, np.vecdot: vecdot, np.matvec: matvec,
                    np.vecmat: vecmat})  # (vecdot, matvec, vecmat: NumPy's gufuncs)

# ---------------------------------------------------------------------------------------------
# numpy.linalg functions that are compositions


@implements(np.linalg.vector_norm)
def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    x = as_tensor(x)
    if axis is None:
        y = np.linalg.norm(np.ravel(x), ord=ord)
        return np.reshape(y, (1,) * x.ndim) if keepdims else y
    return np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)


@implements(np.linalg.matrix_norm)
def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    return np.linalg.norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


@implements(np.linalg.multi_dot)
def multi_dot(arrays, *, out=None):
    _no_extras("multi_dot", out=out)
    arrays = list(arrays)
    first, last = ndim_of(arrays[0]) == 1, ndim_of(arrays[-1]) == 1
    if first:
        arrays[0] = np.reshape(arrays[0], (1, -1))
    if last:
        arrays[-1] = np.reshape(arrays[-1], (-1, 1))
    y = arrays[0]
    for a in arrays[1:]:  # left to right (NumPy picks the cheapest order: the same product)
        y = y @ a
    if first and last:
        return y[0, 0]
    return y[0] if first else (y[:, 0] if last else y)


@implements(np.linalg.matrix_power)
def matrix_power(a, n):
    if not isinstance(n, (int, np.integer)):
        raise TypeError("exponent must be an integer")
    a = as_tensor(a)
    if n < 0:
        a, n = np.linalg.inv(a), -n
    if n == 0:
        return np.broadcast_to(np.eye(a.shape[-1]), a.shape) * 1.0
    result, base = None, a
    while n:  # binary powering, as NumPy
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


implements(np.linalg.outer)(lambda x1, x2, /: np.outer(x1, x2))
implements(np.linalg.tensordot)(lambda x1, x2, /, *, axes=2: np.tensordot(x1, x2, axes=axes))
implements(np.linalg.trace)(lambda x, /, *, offset=0, dtype=None: np.trace(
    x, offset=offset, axis1=-2, axis2=-1))
implements(np.linalg.diagonal)(lambda x, /, *, offset=0: np.diagonal(
    x, offset=offset, axis1=-2, axis2=-1))
implements(np.linalg.cross)(lambda x1, x2, /, *, axis=-1: cross(x1, x2, axis=axis))
implements(np.linalg.matmul)(lambda x1, x2, /: np.matmul(x1, x2))
for _f in (np.isin, np.digitize, np.intersect1d, np.union1d, np.setdiff1d, np.setxor1d,
           np.array_equiv, np.argpartition, np.histogram2d, np.nextafter,
           np.linalg.matrix_rank):
    implements(_f, name=_f.__name__)(_values(_f))


@implements(np.piecewise)
def piecewise(x, condlist, funclist, *args, **kw):
    """NumPy's loop: each function (or constant) fills where its condition holds, later
    conditions overwriting earlier ones, 0 elsewhere; an extra function is the default where no
    condition holds. Item assignment on a buffer records, so the gradient reaches x through
    every function that fills."""
    shape = np.shape(raw(x))
    if isinstance(condlist, np.ndarray) and condlist.dtype == bool or not isinstance(
            condlist, (list, tuple)):
        condlist = [condlist]
    conds = [np.broadcast_to(np.asarray(raw(c), dtype=bool), shape) for c in condlist]
    if len(funclist) == len(conds) + 1:
        conds.append(~np.any(conds, axis=0) if conds else np.ones(shape, bool))
    elif len(funclist) != len(conds):
        raise ValueError(f"with {len(conds)} condition(s), either {len(conds)} or "
                         f"{len(conds) + 1} functions are expected")
    y = tensor(np.zeros(shape))
    for cond, fn in zip(conds, funclist):
        if not cond.any():
            continue
        y[cond] = fn(x[cond], *args, **kw) if callable(fn) else fn
    return y
