"""Sampled functions and signals on tensors, built from recorded NumPy calls: integrals and
differences of samples (trapezoid, ediff1d, gradient), unwrap, vander, convolve / correlate,
interp, and linspace / logspace / geomspace with tensor end points.

``interp`` takes the gradient of the two samples it interpolates between; the segment it picks is
guarded under ``tape.compile``.

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
from ._composing import ndim_of, one_axis
from ._dispatch import as_tensor, implements
from ..core.record import normalize_axes
from ..core.tensor import Tensor, plain, raw
from ._impl import stack



# ---------------------------------------------------------------------------------------------
# Calculus on samples


@implements(np.trapezoid)
def trapezoid(y, x=None, dx=1.0, axis=-1):
    y = as_tensor(y)
    ax = one_axis(axis, y.ndim)
    n = y.shape[ax]
    if x is None:
        d = dx
    else:
        d = np.diff(x)
        if ndim_of(x) == 1:
            shape = [1] * y.ndim
            shape[ax] = n - 1
            d = np.reshape(d, shape)
        else:
            d = np.diff(x, axis=ax)
    hi = [slice(None)] * y.ndim
    lo = [slice(None)] * y.ndim
    hi[ax], lo[ax] = slice(1, None), slice(None, -1)
    return np.sum(d * (y[tuple(hi)] + y[tuple(lo)]) / 2.0, axis=ax)


@implements(np.ediff1d)
def ediff1d(ary, to_end=None, to_begin=None):
    d = np.diff(np.ravel(ary))
    parts = ([np.ravel(to_begin)] if to_begin is not None else []) + [d] + (
        [np.ravel(to_end)] if to_end is not None else [])
    return np.concatenate(parts) if len(parts) > 1 else d


@implements(np.gradient)
def gradient(f, *varargs, axis=None, edge_order=1):
    f = as_tensor(f)
    axes = tuple(range(f.ndim)) if axis is None else tuple(normalize_axes(axis, f.ndim,
                                                                          sort=False))
    if not varargs:
        spacing = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(raw(varargs[0])) == 0:
        spacing = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes):
        spacing = list(varargs)
    else:
        raise TypeError("invalid number of arguments")
    if any(np.ndim(raw(h)) != 0 for h in spacing) or edge_order not in (1, 2):
        raise TypeError("numpy.gradient: tapejit supports scalar spacings and edge_order 1 or 2 "
                        "(coordinate arrays are not supported yet)")
    out = []
    for ax, h in zip(axes, spacing):
        n = f.shape[ax]
        if n < edge_order + 1:
            raise ValueError("Shape of array too small to calculate a numerical gradient, at "
                             "least (edge_order + 1) elements are required.")

        def sl(a, b):
            s = [slice(None)] * f.ndim
            s[ax] = slice(a, b)
            return f[tuple(s)]

        interior = (sl(2, None) - sl(None, -2)) / (2.0 * h)
        if edge_order == 1:
            first = (sl(1, 2) - sl(0, 1)) / h
            last = (sl(-1, None) - sl(-2, -1)) / h
        else:  # NumPy's coefficients, each divided by the spacing first
            first = (-1.5 / h) * sl(0, 1) + (2.0 / h) * sl(1, 2) + (-0.5 / h) * sl(2, 3)
            last = (0.5 / h) * sl(-3, -2) + (-2.0 / h) * sl(-2, -1) + (1.5 / h) * sl(-1, None)
        out.append(np.concatenate([first, interior, last], axis=ax))
    return out[0] if len(out) == 1 else tuple(out)


@implements(np.unwrap)
def unwrap(p, discont=None, axis=-1, *, period=2 * math.pi):
    # NumPy's formula on recorded values: the correction (a multiple of the period) has gradient
    # 0 through mod, and its masks are comparisons of recorded values (guarded in replay)
    p = as_tensor(p)
    ax = one_axis(axis, p.ndim)
    dd = np.diff(p, axis=ax)
    discont = period / 2 if discont is None else discont
    high = period / 2
    ddmod = np.mod(dd + high, period) - high
    ddmod = np.where(np.asarray(ddmod == -high) & np.asarray(dd > 0), high, ddmod)
    correct = np.where(np.asarray(np.abs(dd) < discont), 0.0, ddmod - dd)
    first = np.zeros(_edge(p.shape, ax))
    return p + np.concatenate([first, np.cumsum(correct, axis=ax)], axis=ax)


def _edge(shape, ax):
    s = list(shape)
    s[ax] = 1
    return tuple(s)


@implements(np.vander)
def vander(x, N=None, increasing=False):
    x = as_tensor(x)
    if x.ndim != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    n = x.shape[0] if N is None else N
    cols = [np.ones((x.shape[0], 1))]
    if n > 1:  # NumPy's multiply.accumulate: x, x * x, (x * x) * x, ...
        cols.append(np.cumprod(np.repeat(np.reshape(x, (-1, 1)), n - 1, axis=1), axis=1))
    v = np.concatenate(cols, axis=1)[:, :n]
    return v if increasing else np.flip(v, axis=1)

# ---------------------------------------------------------------------------------------------
# Signals


def _sliding(a, m, length, start):
    """Windows of m consecutive elements of a (zero-padded by m - 1 on both sides), `length` of
    them from `start`: a (length, m) gather, one recorded row."""
    a = as_tensor(a)
    padded = np.pad(a, (m - 1, m - 1))
    idx = start + np.arange(length)[:, None] + np.arange(m)[None, :]
    return padded[idx]


def _mode_range(n, m, mode):
    full = n + m - 1
    if mode == "full":
        return full, 0
    if mode == "same":
        length = builtins.max(n, m)
        return length, (full - length) // 2
    if mode == "valid":
        return builtins.max(n, m) - builtins.min(n, m) + 1, builtins.min(n, m) - 1
    raise ValueError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})")


@implements(np.convolve)
def convolve(a, v, mode="full"):
    n, m = np.shape(raw(a))[0], np.shape(raw(v))[0]
    if n == 0 or m == 0:
        raise ValueError("v cannot be empty" if m == 0 else "a cannot be empty")
    if m > n:
        a, v, n, m = v, a, m, n
    length, start = _mode_range(n, m, mode)
    return _sliding(a, m, length, start) @ np.flip(v)


@implements(np.correlate)
def correlate(a, v, mode="valid"):
    n, m = np.shape(raw(a))[0], np.shape(raw(v))[0]
    if n == 0 or m == 0:
        raise ValueError("v cannot be empty" if m == 0 else "a cannot be empty")
    if m > n:  # NumPy: correlate(a, v) = reverse(correlate(v, a)) when v is longer
        return np.flip(correlate(v, a, mode))
    length, start = _mode_range(n, m, mode)
    return _sliding(a, m, length, start) @ v


def _array_arg(a):
    """A list or tuple argument as the array NumPy makes of it: stacked where it holds tensors
    (recorded, so their gradients flow), a float64 array otherwise."""
    if not isinstance(a, (list, tuple)):
        return a
    if any(isinstance(v, (Tensor, list, tuple)) for v in a):
        return stack([_array_arg(v) for v in a])
    return np.asarray(a, dtype=np.float64)


@implements(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    if period is not None:
        raise TypeError("numpy.interp: period= is not supported on tapejit tensors yet")
    x, xp, fp = _array_arg(x), _array_arg(xp), _array_arg(fp)
    xv, xpv = np.asarray(raw(x), dtype=np.float64), np.asarray(raw(xp), dtype=np.float64)
    n = xpv.shape[0]
    if n == 0:
        raise ValueError("array of sample points is empty")
    # the segment each x falls in is piecewise constant: found on values, guarded in replay
    j = np.clip(np.searchsorted(xpv, xv, side="right") - 1, 0, builtins.max(n - 2, 0))
    if rec.state.guards is not None:
        _guards.note(("values", "searchsorted", (("side", "right"),)), (xp, x),
                     np.searchsorted(xpv, xv, side="right"))
    if n == 1:
        y = np.broadcast_to(fp[0], xv.shape) * 1.0
    else:
        x0, x1 = xp[j], xp[j + 1]
        f0, f1 = fp[j], fp[j + 1]
        slope = (f1 - f0) / (x1 - x0)
        y = slope * (x - x0) + f0
        y = np.where(np.asarray(x == xp[-1]), fp[-1], y)  # NumPy returns fp[-1] exactly there
    y = np.where(np.asarray(x < xp[0]), fp[0] if left is None else left, y)
    return np.where(np.asarray(x > xp[-1]), fp[-1] if right is None else right, y)


@implements(np.linspace)
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """NumPy's formula, arange(num) * step + start with the last point set to stop, on
    tensors: differentiable in start and stop."""
    if dtype is not None and np.dtype(dtype) != np.float64:
        raise TypeError("numpy.linspace: tapejit tensors are float64")
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    div = (num - 1) if endpoint else num
    delta = stop - start
    shape = (-1,) + (1,) * ndim_of(delta)
    y = np.reshape(np.arange(0.0, num), shape)
    step = delta / div if div > 0 else delta * np.nan
    y = y * step + start if div > 0 else y * delta + start
    if endpoint and num > 1:
        shape = np.shape(raw(delta))
        last = np.reshape(np.broadcast_to(stop * 1.0, shape), (1,) + shape)
        y = np.concatenate([y[:-1], last])
    if axis != 0:
        y = np.moveaxis(y, 0, axis)
    return (y, step) if retstep else y


@implements(np.logspace)
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """base ** linspace(start, stop): differentiable in start, stop and base."""
    if dtype is not None and np.dtype(dtype) != np.float64:
        raise TypeError("numpy.logspace: tapejit tensors are float64")
    nd = np.broadcast(raw(start), raw(stop), raw(base)).ndim
    start, stop, base = (np.reshape(as_tensor(v), (1,) * (nd - ndim_of(v)) + np.shape(raw(v)))
                         for v in (start, stop, base))
    y = linspace(start, stop, num=num, endpoint=endpoint, axis=axis)
    return np.power(np.expand_dims(base, axis=axis), y)


@implements(np.geomspace)
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """NumPy's formula for real start and stop of one sign: the sign out, logspace of the
    log10s, the end points set to start and stop exactly."""
    if dtype is not None and np.dtype(dtype) != np.float64:
        raise TypeError("numpy.geomspace: tapejit tensors are float64")
    start, stop = as_tensor(start) * 1.0, as_tensor(stop) * 1.0
    if bool(np.any(start == 0)) or bool(np.any(stop == 0)):
        raise ValueError("Geometric sequence cannot include zero")
    start, stop = np.broadcast_arrays(start, stop)
    sign = plain(np.sign(raw(start)))  # constant: piecewise
    start, stop = start / sign, stop / sign
    y = logspace(np.log10(start), np.log10(stop), num=num, endpoint=endpoint, base=10.0)
    if num > 0:
        y = np.concatenate([np.expand_dims(start, 0), y[1:]])
        if num > 1 and endpoint:
            y = np.concatenate([y[:-1], np.expand_dims(stop, 0)])
    y = y * sign
    return np.moveaxis(y, 0, axis) if axis != 0 else y
