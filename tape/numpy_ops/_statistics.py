"""Statistics on tensors, built from recorded NumPy calls: averages, order statistics (median,
quantile, percentile and their NaN-ignoring forms), covariance, NaN-ignoring reductions, and the
weights of histogram and bincount.

Order statistics take the gradient of the elements they select or interpolate between, as PyTorch
and JAX do: among ties, the ones the stable sort puts in the selected places.

NumPy's own Python implementations mostly start with ``np.asarray``, which a tensor that carries a
gradient refuses, so they cannot simply be run on tensors; these functions follow NumPy's formulas
(and its evaluation order, where that decides the last bit) with recorded operations.
"""
from __future__ import annotations

import builtins

import numpy as np

from ..core import guards as _guards
from ..core import record as rec
from ._composing import nan_mask, ndim_of, one_axis
from ._dispatch import as_tensor, implements
from ._impl import _no_extras, _values
from ..core.tensor import raw
from ..core.tensor import Tensor


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
            if ndim_of(w) != 1 or isinstance(axis, tuple):
                raise TypeError("average: 1D weights expected when shapes of a and weights "
                                "differ (with an integer axis)")
            ax = one_axis(axis, a.ndim)
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
    ax = one_axis(axis, a.ndim)
    s = np.sort(np.moveaxis(a, ax, -1), axis=-1)
    return s, s.shape[-1], s.shape[:-1]


def _keep(y, a, axis, keepdims, lead=()):
    """y with the reduced axis kept as length 1 (after `lead`, the axes of q's shape)."""
    if not keepdims:
        return y
    shape = [1] * ndim_of(a) if axis is None else list(np.shape(raw(a)))
    if axis is not None:
        shape[one_axis(axis, ndim_of(a))] = 1
    return np.reshape(y, tuple(lead) + tuple(shape))


def _nan_lines(a, axis):
    """Lines (along `axis`) that hold a NaN: NumPy's order statistics are NaN there."""
    m = nan_mask(a)
    return m.any() if axis is None else m.any(axis=one_axis(axis, ndim_of(a)))


def _with_nans(y, s, a, axis, nan, lead):
    """y where `nan` is False, else its line's first NaN (in sort order): NaN, as NumPy's
    value, with the gradient of the NaN it selects, as PyTorch's, not a constant's zero."""
    if not np.any(nan):
        return y
    first = np.minimum(np.broadcast_to(_non_nan_counts(a, axis), lead), s.shape[-1] - 1)
    return np.where(nan, np.take_along_axis(s, first[..., None], axis=-1)[..., 0], y)


@implements(np.median)
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    _no_extras("median", out=out)
    s, n, lead = _sorted_along(a, axis)
    if n == 0:
        raise ValueError("median of an empty axis")
    h = n // 2
    y = s[..., h] if n % 2 else np.mean(s[..., h - 1:h + 1], axis=-1)
    return _keep(_with_nans(y, s, a, axis, _nan_lines(a, axis), lead), a, axis, keepdims)


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
    return _keep(_with_nans(y, s, a, axis, nan, lead), a, axis, keepdims, qv.shape)


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
    m = nan_mask(a)
    return (~m).sum() if axis is None else (~m).sum(axis=one_axis(axis, ndim_of(a)))


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
    return _keep(_with_nans(y, s, a, axis, c == 0, lead), a, axis, keepdims)


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
    if ndim_of(c) == 0:
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
    mask = nan_mask(a)
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
           np.unique_all, np.unique_counts, np.unique_inverse, np.unique_values):
    implements(_f, name=_f.__name__)(_values(_f))

_HISTOGRAMDD_VALUES = _values(np.histogramdd)


@implements(np.histogramdd)
def histogramdd(sample, *args, **kwargs):
    """A sequence of D coordinate vectors is the (N, D) array NumPy reads it as
    (``atleast_2d(sample).T``), so that a guard recomputes from one array."""
    if isinstance(sample, (list, tuple)):
        sample = np.transpose(np.atleast_2d(np.stack([as_tensor(c) for c in sample])))
    return _HISTOGRAMDD_VALUES(sample, *args, **kwargs)


histogramdd.values_only = True  # (the coverage table lists it as values only)


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
