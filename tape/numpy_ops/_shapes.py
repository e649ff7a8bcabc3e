"""Shapes, assembly and manipulation on tensors, built from recorded NumPy calls: atleast_3d,
stacks, meshgrid, rot90, block, append/delete/insert, selections (compress, extract, select,
choose), splits, resize, apply_along_axis / apply_over_axes, partition and trim_zeros.

NumPy's own Python implementations mostly start with ``np.asarray``, which a tensor that carries a
gradient refuses, so they cannot simply be run on tensors; these functions follow NumPy's formulas
(and its evaluation order, where that decides the last bit) with recorded operations.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from ._composing import ndim_of, one_axis
from ._dispatch import as_tensor, implements
from . import _impl
from ._impl import _no_extras
from ..core.views import derive
from ..core.record import normalize_axes
from ..core.tensor import raw
from ..core.tensor import Tensor


# ---------------------------------------------------------------------------------------------
# Shapes and assembly


@implements(np.atleast_3d)
def atleast_3d(*arys):
    out = []
    for a in arys:
        a = as_tensor(a)
        if a.ndim < 3:
            a = derive(a, np.reshape(a, (1, 1, 1)) if a.ndim == 0 else a[None, :, None]
                       if a.ndim == 1 else a[:, :, None], np.atleast_3d)
        out.append(a)
    return out[0] if len(out) == 1 else tuple(out)


@implements(np.column_stack)
def column_stack(tup):
    cols = [np.reshape(t, (-1, 1)) if ndim_of(t) < 2 else t for t in tup]
    return np.concatenate(cols, axis=1)


@implements(np.dstack)
def dstack(tup):
    return np.concatenate([atleast_3d(t) for t in tup], axis=2)


@implements(np.broadcast_arrays)
def broadcast_arrays(*args, subok=False):
    """The arguments broadcast; a tensor's result is a view of it (NumPy's: writeable, with a
    warning on write)."""
    shape = np.broadcast_shapes(*(np.shape(raw(a)) for a in args))
    return tuple(np.broadcast_to(a, shape) if type(a) is not Tensor else a if a.shape == shape
                 else derive(a, _impl.broadcast_to.__wrapped__(a, shape),
                             lambda p: np.broadcast_arrays(p, np.empty(shape, np.int8))[0])
                 for a in args)


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
    return tuple(np.copy(g) for g in grids) if copy else tuple(grids)


@implements(np.rot90)
def rot90(m, k=1, axes=(0, 1)):
    axes = tuple(axes)
    n = ndim_of(m)
    if len(axes) != 2:
        raise ValueError("len(axes) must be 2.")
    if axes[0] == axes[1] or abs(axes[0] - axes[1]) == n:
        raise ValueError("Axes must be different.")
    if not (-n <= axes[0] < n and -n <= axes[1] < n):
        raise ValueError(f"Axes={axes} out of range for array of ndim={n}.")
    k %= 4
    a0, a1 = axes
    if k == 0:
        return as_tensor(m)[...]  # (NumPy's m[:]: a view)
    if k == 2:
        return np.flip(np.flip(m, a0), a1)
    order = list(range(ndim_of(m)))
    order[a0], order[a1] = order[a1], order[a0]
    return np.transpose(np.flip(m, a1), order) if k == 1 else np.flip(np.transpose(m, order), a1)


@implements(np.matrix_transpose)
def matrix_transpose(x, /):
    if ndim_of(x) < 2:
        raise ValueError("Input array must be at least 2-dimensional")
    return np.swapaxes(x, -1, -2)


implements(np.linalg.matrix_transpose)(matrix_transpose)
implements(np.row_stack, name="row_stack")(lambda tup, *, dtype=None, casting="same_kind":
                                          np.vstack(tup))


@implements(np.unstack)
def unstack(x, /, *, axis=0):
    if ndim_of(x) == 0:
        raise ValueError("Input array must be at least 1-d.")
    ax = one_axis(axis, ndim_of(x))
    return tuple(np.moveaxis(x, ax, 0))  # views, as NumPy's


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
    ndim = builtins.max([d] + [ndim_of(x) for x in leaves])

    def build(x, level):
        if not isinstance(x, list):
            return np.reshape(x, (1,) * (ndim - ndim_of(x)) + np.shape(raw(x)))
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
        if ndim_of(x) > 1:
            raise ValueError("axis must be specified for multi-dimensional arrays")
        axis = 0
    y = fn(x, axis=axis)
    if include_initial:
        shape = list(np.shape(raw(y)))
        shape[one_axis(axis, len(shape))] = 1
        y = np.concatenate([np.full(shape, initial), y], axis=axis)
    return y

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
    ax = one_axis(axis, ndim_of(arr))
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
    nd = ndim_of(arr)
    ax = one_axis(axis, nd)
    n = np.shape(raw(arr))[ax]
    shape = list(np.shape(raw(arr)))
    v = values if isinstance(values, Tensor) else np.asarray(values, dtype=np.float64)
    v = np.reshape(v, (1,) * (nd - ndim_of(v)) + np.shape(raw(v)))  # NumPy's ndmin=arr.ndim
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
        nd = ndim_of(ary)
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
    n = ndim_of(a)
    axis = one_axis(axis, n)
    start = start + n if start < 0 else start
    if axis < start:
        start -= 1
    return np.moveaxis(a, axis, start) if axis != start else as_tensor(a)[...]


@implements(np.resize)
def resize(a, new_shape):
    flat = np.ravel(a)
    n = np.shape(raw(flat))[0]
    total = math.prod((new_shape,) if isinstance(new_shape, int) else new_shape)
    if n == 0 or total == 0:
        return np.zeros(new_shape)
    return np.reshape(np.take(flat, np.arange(total) % n), new_shape)

# ---------------------------------------------------------------------------------------------
# Applying functions, partial sorts, trimming


@implements(np.apply_along_axis)
def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    arr = as_tensor(arr)
    ax = one_axis(axis, arr.ndim)
    moved = np.moveaxis(arr, ax, -1)
    lead = moved.shape[:-1]
    outs = [func1d(moved[i], *args, **kwargs) for i in np.ndindex(*lead)]
    res = np.stack([o if isinstance(o, Tensor) else np.asarray(o, dtype=float) for o in outs])
    res = np.reshape(res, lead + np.shape(raw(res))[1:])
    extra = ndim_of(res) - len(lead)  # the function's own output axes replace the axis
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
        if ndim_of(res) != val.ndim:
            res = np.expand_dims(res, axis)
            if ndim_of(res) != val.ndim:
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
    n = a.shape[one_axis(axis, a.ndim)] if a.ndim else 1
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
