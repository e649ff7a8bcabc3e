"""NumPy functions built from others: each is written with ``np.*`` calls that tapejit records.

NumPy's own Python implementations mostly start with ``np.asarray``, which a tensor that carries a
gradient refuses, so they cannot simply be run on tensors; the functions here follow NumPy's
formulas (and its evaluation order, where that decides the last bit) with recorded operations.
Order statistics (``median``, ``quantile``, ``percentile``) and ``interp`` take the gradient of the
elements they select or interpolate between, as PyTorch and JAX do: among ties, the ones the
stable sort puts in the selected places.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from . import _guards
from . import _record as rec
from ._numpy_impl import UFUNC_FUNCS, _no_extras, _values, as_tensor, implements
from ._record import normalize_axes, plain, raw
from ._tensor import Tensor


def _nd(x):
    return np.ndim(raw(x))


def _axis(axis, ndim):
    return normalize_axes(axis, ndim)[0]


def _isnan(a):
    """NaN positions (a plain bool array: a mask carries no gradient; guarded in replay, as every
    comparison of a recorded value is)."""
    return np.asarray(np.isnan(a))


# ---------------------------------------------------------------------------------------------
# Statistics


@implements(np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    a = as_tensor(a)
    if weights is None:
        avg = np.mean(a, axis=axis, keepdims=keepdims)
        scl = np.broadcast_to(np.asarray(float(a.size // builtins.max(avg.size, 1))), np.shape(
            raw(avg)))
    else:
        w = weights
        if np.shape(raw(w)) != a.shape:
            if axis is None:
                raise TypeError("average: axis must be specified when shapes of a and weights "
                                "differ")
            if _nd(w) != 1 or isinstance(axis, tuple):
                raise TypeError("average: 1D weights expected when shapes of a and weights "
                                "differ (with an integer axis)")
            ax = _axis(axis, a.ndim)
            if np.shape(raw(w))[0] != a.shape[ax]:
                raise ValueError("average: length of weights not compatible with specified axis")
            shape = [1] * a.ndim
            shape[ax] = -1
            w = np.reshape(w, shape)
        scl = np.sum(w * np.ones(a.shape), axis=axis, keepdims=keepdims)
        if np.any(raw(scl) == 0.0):
            raise ZeroDivisionError("average: weights sum to zero, can't be normalized")
        avg = np.sum(a * w, axis=axis, keepdims=keepdims) / scl
    if returned:
        return avg, scl
    return avg


@implements(np.ptp)
def ptp(a, axis=None, out=None, keepdims=False):
    _no_extras("ptp", out=out)
    return np.max(a, axis=axis, keepdims=keepdims) - np.min(a, axis=axis, keepdims=keepdims)


def _sorted_along(a, axis):
    """(sorted tensor with the reduced axis last, its length, the output shape without it)."""
    a = as_tensor(a)
    if axis is None:
        s = np.sort(np.ravel(a))
        return s, s.shape[-1], ()
    ax = _axis(axis, a.ndim)
    s = np.sort(np.moveaxis(a, ax, -1), axis=-1)
    return s, s.shape[-1], s.shape[:-1]


def _keep(y, a, axis, keepdims, lead=()):
    """y with the reduced axis kept as length 1 (after `lead`, the axes of q's shape)."""
    if not keepdims:
        return y
    shape = [1] * _nd(a) if axis is None else list(np.shape(raw(a)))
    if axis is not None:
        shape[_axis(axis, _nd(a))] = 1
    return np.reshape(y, tuple(lead) + tuple(shape))


def _nan_lines(a, axis):
    """Lines (along `axis`) that hold a NaN: NumPy's order statistics are NaN there."""
    m = _isnan(a)
    return m.any() if axis is None else m.any(axis=_axis(axis, _nd(a)))


@implements(np.median)
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    _no_extras("median", out=out)
    s, n, _ = _sorted_along(a, axis)
    if n == 0:
        raise ValueError("median of an empty axis")
    h = n // 2
    y = s[..., h] if n % 2 else np.mean(s[..., h - 1:h + 1], axis=-1)
    nan = _nan_lines(a, axis)
    if np.any(nan):
        y = np.where(nan, np.nan, y)
    return _keep(y, a, axis, keepdims)


def _check_q(name, q, method):
    if method != "linear":
        raise TypeError(f"numpy.{name}: method={method!r} is not supported on tapejit tensors "
                        "yet (method='linear', NumPy's default, is)")
    if isinstance(q, Tensor) and q.requires_grad:
        raise TypeError(f"numpy.{name}: a q that requires grad is not supported")
    qv = np.asarray(raw(q), dtype=np.float64)
    if np.any((qv < 0) | (qv > 1)) or np.any(np.isnan(qv)):
        raise ValueError("Quantiles must be in the range [0, 1]")
    return qv


def _lerp_quantile(s, counts, qv):
    """NumPy's 'linear' quantiles qv of each sorted line of s (the last axis), of which the
    first `counts` elements count: shape qv.shape + s.shape[:-1]. The virtual index is NumPy's
    (n - 1) q, interpolated with its two-sided _lerp (the same bits)."""
    c = np.asarray(counts, dtype=np.float64)[..., None]  # lines, then q
    q = qv.reshape(-1)
    virtual = (c - 1.0) * q
    top = np.maximum(c - 1.0, 0.0)
    lo = np.clip(np.floor(virtual), 0.0, top)
    hi = np.clip(lo + 1.0, 0.0, top)
    t = virtual - np.floor(virtual)
    below = np.take_along_axis(s, lo.astype(np.int64), axis=-1)
    above = np.take_along_axis(s, hi.astype(np.int64), axis=-1)
    diff = above - below
    y = np.where(t >= 0.5, above - diff * (1.0 - t), below + diff * t)
    y = np.moveaxis(y, -1, 0)  # NumPy puts q's axes first
    return np.reshape(y, qv.shape + np.shape(raw(y))[1:])


def _quantile(name, a, q, axis, method, keepdims, skip_nan):
    """NumPy's 'linear' quantiles along `axis`: with skip_nan each line's numbers only (an
    all-NaN line gives NaN), else a line holding a NaN gives NaN."""
    qv = _check_q(name, q, method)
    s, n, lead = _sorted_along(a, axis)
    if n == 0:
        raise ValueError(f"{name} of an empty axis")
    if skip_nan:
        counts = np.broadcast_to(_non_nan_counts(a, axis), lead)
        nan = counts == 0
    else:
        counts, nan = np.full(lead, n), _nan_lines(a, axis)
    with np.errstate(invalid="ignore"):  # (all-NaN lines: NaN, as NumPy, which warns)
        y = _lerp_quantile(s, counts, qv)
    if np.any(nan):
        y = np.where(nan, np.nan, y)
    return _keep(y, a, axis, keepdims, qv.shape)


@implements(np.quantile)
def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None, interpolation=None):
    _no_extras("quantile", out=out, weights=weights, interpolation=interpolation)
    return _quantile("quantile", a, q, axis, method, keepdims, skip_nan=False)


@implements(np.percentile)
def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None, interpolation=None):
    qv = np.true_divide(np.asarray(raw(q), dtype=np.float64), 100)
    return quantile(a, qv, axis, out, overwrite_input, method, keepdims, weights=weights,
                    interpolation=interpolation)


def _non_nan_counts(a, axis):
    """Per line (along `axis`, the whole array for None): how many elements are not NaN. The
    sort puts NaNs last, so a line's first `count` sorted elements are its numbers."""
    m = _isnan(a)
    return (~m).sum() if axis is None else (~m).sum(axis=_axis(axis, _nd(a)))


@implements(np.nanquantile)
def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None, interpolation=None):
    _no_extras("nanquantile", out=out, weights=weights, interpolation=interpolation)
    return _quantile("nanquantile", a, q, axis, method, keepdims, skip_nan=True)


@implements(np.nanpercentile)
def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None, interpolation=None):
    qv = np.true_divide(np.asarray(raw(q), dtype=np.float64), 100)
    return nanquantile(a, qv, axis, out, overwrite_input, method, keepdims, weights=weights,
                       interpolation=interpolation)


@implements(np.nanmedian)
def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median of each line's numbers, as NumPy: the middle one, or the mean of the two."""
    _no_extras("nanmedian", out=out)
    s, n, lead = _sorted_along(a, axis)
    if n == 0:
        raise ValueError("nanmedian of an empty axis")
    c = np.broadcast_to(_non_nan_counts(a, axis), lead)
    lo = np.maximum((c - 1) // 2, 0)[..., None]
    hi = np.maximum(c // 2, 0)[..., None]
    below = np.take_along_axis(s, lo, axis=-1)[..., 0]
    above = np.take_along_axis(s, hi, axis=-1)[..., 0]
    y = np.where(c % 2 == 1, below, (below + above) / 2.0)
    return _keep(np.where(c == 0, np.nan, y), a, axis, keepdims)


@implements(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    _no_extras("cov", fweights=fweights, aweights=aweights)
    X = np.atleast_2d(as_tensor(m))
    if not rowvar and X.shape[0] != 1:
        X = X.T
    if X.shape[0] == 0:
        return np.reshape(X, (0, 0))
    if y is not None:
        Y = np.atleast_2d(as_tensor(y))
        if not rowvar and Y.shape[0] != 1:
            Y = Y.T
        X = np.concatenate((X, Y), axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    fact = X.shape[1] - ddof
    X = X - np.mean(X, axis=1, keepdims=True)
    c = np.dot(X, X.T) * (1.0 / fact)
    return np.squeeze(c)


@implements(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    c = cov(x, y, rowvar)
    if _nd(c) == 0:
        return c / c
    d = np.diag(c)
    stddev = np.sqrt(d)
    c = c / stddev[:, None]
    c = c / stddev[None, :]
    return np.clip(c, -1, 1)


# ---------------------------------------------------------------------------------------------
# NaN-ignoring reductions: the NaN elements are replaced by the operation's identity (a constant:
# they get no gradient), as NumPy's nan-functions do


def _nan_filled(a, fill):
    a = as_tensor(a)
    mask = _isnan(a)
    return (np.where(mask, fill, a) if mask.any() else a), mask


@implements(np.nansum)
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    _no_extras("nansum", out=out, initial=initial, where=where)
    return np.sum(_nan_filled(a, 0.0)[0], axis=axis, keepdims=keepdims)


@implements(np.nanprod)
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    _no_extras("nanprod", out=out, initial=initial, where=where)
    return np.prod(_nan_filled(a, 1.0)[0], axis=axis, keepdims=keepdims)


@implements(np.nancumsum)
def nancumsum(a, axis=None, dtype=None, out=None):
    _no_extras("nancumsum", out=out)
    return np.cumsum(_nan_filled(a, 0.0)[0], axis=axis)


@implements(np.nancumprod)
def nancumprod(a, axis=None, dtype=None, out=None):
    _no_extras("nancumprod", out=out)
    return np.cumprod(_nan_filled(a, 1.0)[0], axis=axis)


def _nan_count(mask, axis, keepdims):
    return np.sum(~mask, axis=axis, keepdims=keepdims).astype(np.float64)


@implements(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    _no_extras("nanmean", out=out, where=where)
    filled, mask = _nan_filled(a, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):  # all-NaN lines: NaN, as NumPy
        return np.sum(filled, axis=axis, keepdims=keepdims) / _nan_count(mask, axis, keepdims)


@implements(np.nanvar)
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):
    _no_extras("nanvar", out=out, where=where, mean=mean)
    if correction is not None:
        ddof = correction
    filled, mask = _nan_filled(a, 0.0)
    cnt = _nan_count(mask, axis, True)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.sum(filled, axis=axis, keepdims=True) / cnt
        d = np.where(mask, 0.0, filled - m) if mask.any() else filled - m
        s = np.sum(d * d, axis=axis, keepdims=keepdims)
        return s / np.maximum(_nan_count(mask, axis, keepdims) - ddof, 0.0)


@implements(np.nanstd)
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):
    return np.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
                          correction=correction))


def _nan_extreme(fn, fill):
    def impl(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        _no_extras(fn.__name__, out=out, initial=initial, where=where)
        filled, mask = _nan_filled(a, fill)
        y = fn(filled, axis=axis, keepdims=keepdims)
        everywhere = mask.all() if axis is None else mask.all(axis=axis, keepdims=keepdims)
        return np.where(everywhere, np.nan, y) if np.any(everywhere) else y

    return impl


implements(np.nanmax, name="nanmax")(_nan_extreme(np.max, -np.inf))
implements(np.nanmin, name="nanmin")(_nan_extreme(np.min, np.inf))
for _f in (np.nanargmax, np.nanargmin, np.histogram_bin_edges, np.lexsort, np.isposinf, np.isneginf, np.isreal, np.iscomplex, np.isrealobj,
           np.iscomplexobj, np.diag_indices_from, np.tril_indices_from, np.triu_indices_from,
           np.histogramdd, np.unique_all, np.unique_counts, np.unique_inverse, np.unique_values):
    implements(_f, name=_f.__name__)(_values(_f))


_HISTOGRAM_VALUES = _values(np.histogram)
_BINCOUNT_VALUES = _values(np.bincount)


def _carries(x):
    return isinstance(x, Tensor) and x.requires_grad


@implements(np.histogram)
def histogram(a, bins=10, range=None, density=None, weights=None):
    """Counts are piecewise constant in `a` (gradient 0, values only); weights that carry a
    gradient are refused rather than dropped."""
    if _carries(weights):
        raise TypeError("numpy.histogram: weights that carry a gradient are not supported on "
                        "tapejit tensors yet (np.bincount(np.digitize(a, edges), weights) is)")
    return _HISTOGRAM_VALUES(a, bins=bins, range=range, density=density, weights=weights)


@implements(np.bincount)
def bincount(x, weights=None, minlength=0):
    """With weights that carry a gradient: out[k] = sum of the weights where x == k, recorded
    as a product with the (constant) one-hot matrix of x."""
    if not _carries(weights):
        return _BINCOUNT_VALUES(x, weights=weights, minlength=minlength)
    xv = np.asarray(raw(x))
    if _carries(x) and rec.state.guards is not None:
        _guards.note(("values", "bincount", (("minlength", minlength),)), (x,),
                     np.bincount(xv, minlength=minlength))
    n = builtins.max(int(xv.max()) + 1 if xv.size else 0, minlength)
    onehot = (xv.reshape(-1, 1) == np.arange(n)).astype(np.float64)
    return np.ravel(weights) @ onehot


# ---------------------------------------------------------------------------------------------
# Shapes and assembly


@implements(np.atleast_3d)
def atleast_3d(*arys):
    out = []
    for a in arys:
        a = as_tensor(a)
        if a.ndim == 0:
            a = np.reshape(a, (1, 1, 1))
        elif a.ndim == 1:
            a = a[None, :, None]
        elif a.ndim == 2:
            a = a[:, :, None]
        out.append(a)
    return out[0] if len(out) == 1 else tuple(out)


@implements(np.column_stack)
def column_stack(tup):
    cols = [np.reshape(t, (-1, 1)) if _nd(t) < 2 else t for t in tup]
    return np.concatenate(cols, axis=1)


@implements(np.dstack)
def dstack(tup):
    return np.concatenate([atleast_3d(t) for t in tup], axis=2)


@implements(np.broadcast_arrays)
def broadcast_arrays(*args, subok=False):
    shape = np.broadcast_shapes(*(np.shape(raw(a)) for a in args))
    return tuple(np.broadcast_to(a, shape) for a in args)


@implements(np.meshgrid)
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    n = len(xi)
    shape = [1] * n
    grids = []
    for i, x in enumerate(xi):
        s = list(shape)
        s[i] = -1
        grids.append(np.reshape(x, s))
    if indexing == "xy" and n > 1:
        grids = [np.swapaxes(g, 0, 1) for g in grids]
    if not sparse:
        grids = list(broadcast_arrays(*grids))
    return tuple(grids)


@implements(np.rot90)
def rot90(m, k=1, axes=(0, 1)):
    k %= 4
    a0, a1 = axes
    if k == 0:
        return m * 1.0
    if k == 2:
        return np.flip(np.flip(m, a0), a1)
    order = list(range(_nd(m)))
    order[a0], order[a1] = order[a1], order[a0]
    return np.transpose(np.flip(m, a1), order) if k == 1 else np.flip(np.transpose(m, order), a1)


@implements(np.matrix_transpose)
def matrix_transpose(x, /):
    if _nd(x) < 2:
        raise ValueError("Input array must be at least 2-dimensional")
    return np.swapaxes(x, -1, -2)


@implements(np.unstack)
def unstack(x, /, *, axis=0):
    ax = _axis(axis, _nd(x))
    return tuple(np.take(x, i, axis=ax) for i in range(np.shape(raw(x))[ax]))


@implements(np.block)
def block(arrays):
    def depth(x):
        return 1 + depth(x[0]) if isinstance(x, list) and x else (1 if isinstance(x, list) else 0)

    d = depth(arrays)
    leaves = []

    def collect(x):
        if isinstance(x, list):
            for y in x:
                collect(y)
        else:
            leaves.append(x)

    collect(arrays)
    ndim = builtins.max([d] + [_nd(x) for x in leaves])

    def build(x, level):
        if not isinstance(x, list):
            return np.reshape(x, (1,) * (ndim - _nd(x)) + np.shape(raw(x)))
        return np.concatenate([build(y, level + 1) for y in x], axis=-(d - level))

    return build(arrays, 0)


@implements(np.diagflat)
def diagflat(v, k=0):
    return np.diag(np.ravel(v), k)


@implements(np.cumulative_sum)
def cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    return _cumulative(np.cumsum, 0.0, x, axis, out, include_initial)


@implements(np.cumulative_prod)
def cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    return _cumulative(np.cumprod, 1.0, x, axis, out, include_initial)


def _cumulative(fn, initial, x, axis, out, include_initial):
    _no_extras(fn.__name__, out=out)
    if axis is None:
        if _nd(x) > 1:
            raise ValueError("axis must be specified for multi-dimensional arrays")
        axis = 0
    y = fn(x, axis=axis)
    if include_initial:
        shape = list(np.shape(raw(y)))
        shape[_axis(axis, len(shape))] = 1
        y = np.concatenate([np.full(shape, initial), y], axis=axis)
    return y


# ---------------------------------------------------------------------------------------------
# Elementwise compositions


@implements(np.real)
def real(val):
    return val * 1.0 if isinstance(val, Tensor) else np.real(val)


@implements(np.imag)
def imag(val):
    return plain(np.zeros(np.shape(raw(val))))


@implements(np.real_if_close)
def real_if_close(a, tol=100):
    return a


@implements(np.sinc)
def sinc(x):
    # NumPy's own formula: pi x with 0 replaced by 1e-20 (a constant: sinc'(0) = 0)
    y = np.pi * np.where(np.asarray(x == 0), 1.0e-20, x)
    return np.sin(y) / y


@implements(np.nan_to_num)
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    big = np.finfo(np.float64).max
    y = np.where(_isnan(x), nan, x)
    y = np.where(np.asarray(np.isposinf(x)), big if posinf is None else posinf, y)
    return np.where(np.asarray(np.isneginf(x)), -big if neginf is None else neginf, y)


def _zero_grad(fn):
    """A piecewise-constant function of a tensor: its value, a constant (guarded in replay)."""
    def impl(x, *args, **kwargs):
        r = plain(rec.check_dtype(fn(raw(x), *args, **kwargs), fn.__name__))
        if rec.state.guards is not None:
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


@implements(np.trapezoid)
def trapezoid(y, x=None, dx=1.0, axis=-1):
    y = as_tensor(y)
    ax = _axis(axis, y.ndim)
    n = y.shape[ax]
    if x is None:
        d = dx
    else:
        d = np.diff(x)
        if _nd(x) == 1:
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
    ax = _axis(axis, p.ndim)
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


@implements(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    if period is not None:
        raise TypeError("numpy.interp: period= is not supported on tapejit tensors yet")
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
    shape = (-1,) + (1,) * _nd(delta)
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
    start, stop, base = (np.reshape(as_tensor(v), (1,) * (nd - _nd(v)) + np.shape(raw(v)))
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


# ---------------------------------------------------------------------------------------------
# Array manipulation


@implements(np.append)
def append(arr, values, axis=None):
    if axis is None:
        return np.concatenate([np.ravel(arr), np.ravel(values)])
    return np.concatenate([arr, values], axis=axis)


def _kept(n, obj):
    keep = np.ones(n, bool)
    keep[np.asarray(obj)] = False
    return np.flatnonzero(keep)


@implements(np.delete)
def delete(arr, obj, axis=None):
    if isinstance(obj, Tensor):
        raise TypeError("numpy.delete: indices must be plain integers or a boolean mask")
    if axis is None:
        arr, axis = np.ravel(arr), 0
    ax = _axis(axis, _nd(arr))
    n = np.shape(raw(arr))[ax]
    if isinstance(obj, slice):
        obj = np.arange(n)[obj]
    obj = np.asarray(obj)
    if obj.dtype == bool:
        return np.take(arr, np.flatnonzero(~obj), axis=ax)
    return np.take(arr, _kept(n, obj), axis=ax)


@implements(np.insert)
def insert(arr, obj, values, axis=None):
    if isinstance(obj, Tensor):
        raise TypeError("numpy.insert: indices must be plain integers")
    if axis is None:
        arr, axis = np.ravel(arr), 0
    nd = _nd(arr)
    ax = _axis(axis, nd)
    n = np.shape(raw(arr))[ax]
    shape = list(np.shape(raw(arr)))
    v = values if isinstance(values, Tensor) else np.asarray(values, dtype=np.float64)
    v = np.reshape(v, (1,) * (nd - _nd(v)) + np.shape(raw(v)))  # NumPy's ndmin=arr.ndim
    if np.ndim(obj) == 0 and not isinstance(obj, slice):
        i = int(obj) + n if int(obj) < 0 else int(obj)
        v = np.moveaxis(v, 0, ax)
        shape[ax] = np.shape(raw(v))[ax]
        pieces = [np.take(arr, np.arange(i), axis=ax), np.broadcast_to(v, tuple(shape)),
                  np.take(arr, np.arange(i, n), axis=ax)]
        return np.concatenate(pieces, axis=ax)
    idx = np.arange(n)[obj] if isinstance(obj, slice) else np.asarray(obj).reshape(-1)
    idx = np.where(idx < 0, idx + n, idx)
    shape[ax] = len(idx)
    # values[k] goes before arr's element idx[k]; equal positions keep the values' order
    order = np.argsort(np.concatenate([np.arange(n), idx - 0.5]), kind="stable")
    both = np.concatenate([arr, np.broadcast_to(v, tuple(shape))], axis=ax)
    return np.take(both, order, axis=ax)


@implements(np.compress)
def compress(condition, a, axis=None, out=None):
    _no_extras("compress", out=out)
    cond = np.flatnonzero(np.asarray(raw(condition), dtype=bool))
    if axis is None:
        return np.take(np.ravel(a), cond)
    return np.take(a, cond, axis=axis)


@implements(np.extract)
def extract(condition, arr):
    return np.take(np.ravel(arr), np.flatnonzero(np.ravel(np.asarray(raw(condition)))))


@implements(np.select)
def select(condlist, choicelist, default=0):
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    out = default
    for cond, choice in zip(reversed(condlist), reversed(choicelist)):
        out = np.where(np.asarray(raw(cond), dtype=bool), choice, out)
    return out * 1.0


@implements(np.choose)
def choose(a, choices, out=None, mode="raise"):
    _no_extras("choose", out=out)
    if isinstance(a, Tensor) and a.requires_grad:
        raise TypeError("numpy.choose: the index array must be plain integers")
    idx = np.asarray(raw(a))
    if mode == "raise" and (idx.min(initial=0) < 0 or idx.max(initial=0) >= len(choices)):
        raise ValueError("invalid entry in choice array")
    idx = np.clip(idx, 0, len(choices) - 1) if mode == "clip" else idx % len(choices)
    out = choices[0] * 1.0
    for k in range(1, len(choices)):
        out = np.where(idx == k, choices[k], out)
    return out


def _split(name, axis, min_ndim):
    def impl(ary, indices_or_sections):
        nd = _nd(ary)
        if nd < min_ndim:
            raise ValueError(f"{name} only works on arrays of {min_ndim} or more dimensions")
        return np.split(ary, indices_or_sections, axis=axis if nd > 1 else 0)

    impl.__name__ = name
    return impl


implements(np.hsplit, name="hsplit")(_split("hsplit", 1, 1))
implements(np.vsplit, name="vsplit")(_split("vsplit", 0, 2))
implements(np.dsplit, name="dsplit")(_split("dsplit", 2, 3))


@implements(np.rollaxis)
def rollaxis(a, axis, start=0):
    n = _nd(a)
    axis = _axis(axis, n)
    start = start + n if start < 0 else start
    if axis < start:
        start -= 1
    return np.moveaxis(a, axis, start) if axis != start else a * 1.0


@implements(np.resize)
def resize(a, new_shape):
    flat = np.ravel(a)
    n = np.shape(raw(flat))[0]
    total = math.prod((new_shape,) if isinstance(new_shape, int) else new_shape)
    if n == 0 or total == 0:
        return np.zeros(new_shape)
    return np.reshape(np.take(flat, np.arange(total) % n), new_shape)


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


@implements(np.apply_along_axis)
def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    arr = as_tensor(arr)
    ax = _axis(axis, arr.ndim)
    moved = np.moveaxis(arr, ax, -1)
    lead = moved.shape[:-1]
    outs = [func1d(moved[i], *args, **kwargs) for i in np.ndindex(*lead)]
    res = np.stack([o if isinstance(o, Tensor) else np.asarray(o, dtype=float) for o in outs])
    res = np.reshape(res, lead + np.shape(raw(res))[1:])
    extra = _nd(res) - len(lead)  # the function's own output axes replace the axis
    return np.moveaxis(res, list(range(len(lead), len(lead) + extra)),
                       list(range(ax, ax + extra))) if extra else res


@implements(np.apply_over_axes)
def apply_over_axes(func, a, axes):
    """NumPy's loop: func(a, axis) for each axis, the result given its axis back if it lost it."""
    val = as_tensor(a)
    n = val.ndim
    for axis in np.atleast_1d(axes).tolist():
        axis = axis + n if axis < 0 else axis
        res = func(val, axis)
        if _nd(res) != val.ndim:
            res = np.expand_dims(res, axis)
            if _nd(res) != val.ndim:
                raise ValueError("function is not returning an array of the correct shape")
        val = res
    return val


@implements(np.partition)
def partition(a, kth, axis=-1, kind="introselect", order=None):
    """A sorted copy: it meets partition's contract (the k-th elements in their sorted places,
    the smaller before, the larger after), whose order inside each side NumPy leaves to its
    algorithm; the gradient follows the elements, as np.sort's."""
    if order is not None:
        raise TypeError("numpy.partition: order= (structured arrays) is not supported on tensors")
    a = as_tensor(a)
    if axis is None:
        a, axis = np.ravel(a), -1
    n = a.shape[_axis(axis, a.ndim)] if a.ndim else 1
    for k in np.atleast_1d(kth).tolist():
        if not -n <= int(k) < n:
            raise ValueError(f"kth(={k}) out of bounds ({n})")
    return np.sort(a, axis=axis)


@implements(np.trim_zeros)
def trim_zeros(filt, trim="fb", axis=None):
    """NumPy's bounding box of the nonzero values (read: a guard under tape.compile), sliced."""
    a = as_tensor(filt)
    trim = trim.lower()
    if trim not in {"fb", "bf", "f", "b"}:
        raise ValueError(f"unexpected character(s) in `trim`: {trim!r}")
    axes = range(a.ndim) if axis is None else normalize_axes(axis, a.ndim)
    if not axes:
        return filt
    nonzero = np.argwhere(np.asarray(a != 0))
    if nonzero.size == 0:
        start = stop = [0] * a.ndim
    else:
        start = nonzero.min(axis=0) if "f" in trim else [None] * a.ndim
        stop = nonzero.max(axis=0) + 1 if "b" in trim else [None] * a.ndim
    sl = tuple(slice(start[ax], stop[ax]) if ax in axes else slice(None)
               for ax in range(a.ndim))
    return a[sl]


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
    first, last = _nd(arrays[0]) == 1, _nd(arrays[-1]) == 1
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


implements(np.row_stack, name="row_stack")(lambda tup, *, dtype=None, casting="same_kind":
                                          np.vstack(tup))
implements(np.linalg.matrix_transpose)(matrix_transpose)
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
    from .numpy import zeros

    y = zeros(shape)
    for cond, fn in zip(conds, funclist):
        if not cond.any():
            continue
        y[cond] = fn(x[cond], *args, **kw) if callable(fn) else fn
    return y
