"""NumPy's functions that write into an array in place, on tensors (``copyto``, ``fill_diagonal``,
``put``, ``place``, ``putmask``, ``put_along_axis``), and its questions about shared memory.

Each runs NumPy's own function on an int64 *tag* array of the target's shape whose entries say
which element of the source lands where (-1: untouched), so NumPy's broadcasting, repetition of
a short source, index modes, last-write-wins and errors are NumPy's own. The write is then the
target's, as an item assignment is (``tape/core/views.py``): every view of the target sees it,
and the gradient flows through it to the source.
"""
from __future__ import annotations

import numpy as np

from ..core import record as rec, views
from ..core.state import state
from ..core.tensor import Tensor, raw
from . import _impl
from ._dispatch import implements


def _source(v):
    """The values to write: a tensor, a list holding tensors stacked (recorded), or a float64
    array."""
    if type(v) is Tensor:
        return v
    if isinstance(v, (list, tuple)) and any(type(e) is Tensor or isinstance(e, (list, tuple))
                                            for e in v):
        parts = [_source(e) for e in v]
        if any(type(p) is Tensor for p in parts):
            return _impl.stack([p if type(p) is Tensor else _impl.as_tensor(p) for p in parts])
    return np.asarray(v, dtype=np.float64)


def _source_ids(v):
    """0..size-1 in v's shape: what NumPy's function writes into the tags in place of v."""
    r = raw(v)
    return np.arange(np.size(r), dtype=np.int64).reshape(np.shape(r))


def _tags(shape):
    return np.full(shape, -1, np.int64)


def _target(a, src, name):
    """`a` as the target of an in-place write (a tensor), or None when NumPy itself can write:
    `a` a NumPy array and no tensor with a gradient to write into it."""
    if type(a) is Tensor:
        if views.is_scalar(a):
            raise TypeError(f"numpy.{name}: the target is a scalar (a 0-d result of an op is an "
                            "immutable np.float64, as in NumPy); write into an array")
        return a
    if type(src) is Tensor and src._rg:
        raise TypeError(f"numpy.{name}: writing a tensor that carries a gradient into a NumPy "
                        "array would drop the gradient; make the target a tensor "
                        "(tnp.asarray(a), tnp.zeros(shape)) and write into that")
    return None


def _write(target, tag, src, name):
    """target.flat[p] = src.flat[tag.flat[p]] wherever tag.flat[p] >= 0."""
    flat = np.flatnonzero(tag.reshape(-1) >= 0)
    which = tag.reshape(-1)[flat]
    values = rec.gather(src, which) if type(src) is Tensor else \
        np.reshape(np.asarray(src, dtype=np.float64), -1)[which]
    if target._meta is not None and target._rg:  # a leaf: its own buffer, under no_grad
        if state.grad:
            raise RuntimeError(f"a leaf tensor that requires grad is being used in an in-place "
                               f"operation (numpy.{name}). Wrap it in `with tape.no_grad():` or "
                               "write into a copy: y = x.copy().")
        np.reshape(target._v, -1)[flat] = raw(values)
        views.leaf_written(target)
        return
    views.assign_flat(target, flat, values)


def _float_source(src, casting):
    dtype = np.asarray(raw(src)).dtype if type(src) is not Tensor else np.dtype(np.float64)
    if not np.can_cast(dtype, np.float64, casting):
        raise TypeError(f"Cannot cast array data from {dtype!r} to dtype('float64') according "
                        f"to the rule {casting!r}")


def _tagged(a, values, name, write_tags, write_numpy):
    """NumPy's in-place function `name` on target `a`: ``write_tags(tags, ids)`` runs it on the
    tags with the values' ids in their place; ``write_numpy()`` runs it on a NumPy target."""
    t = _target(a, values, name)
    if t is None:
        return write_numpy()
    values = _source(values)
    tags = _tags(t.shape)
    write_tags(tags, _source_ids(values))
    _write(t, tags, values, name)


@implements(np.copyto)
def copyto(dst, src, casting="same_kind", where=True):
    if type(dst) is Tensor:
        _float_source(src, casting)
    _tagged(dst, src, "copyto", lambda tags, ids: np.copyto(tags, ids, where=raw(where)),
            lambda: np.copyto(dst, raw(src), casting=casting, where=raw(where)))


@implements(np.fill_diagonal)
def fill_diagonal(a, val, wrap=False):
    _tagged(a, val, "fill_diagonal", lambda tags, ids: np.fill_diagonal(tags, ids, wrap),
            lambda: np.fill_diagonal(a, raw(val), wrap))


@implements(np.put)
def put(a, ind, v, mode="raise"):
    _tagged(a, v, "put", lambda tags, ids: np.put(tags, raw(ind), ids, mode),
            lambda: np.put(a, raw(ind), raw(v), mode))


@implements(np.place)
def place(arr, mask, vals):
    _tagged(arr, vals, "place", lambda tags, ids: np.place(tags, raw(mask), ids.reshape(-1)),
            lambda: np.place(arr, raw(mask), raw(vals)))


@implements(np.putmask)
def putmask(a, mask, values):
    _tagged(a, values, "putmask", lambda tags, ids: np.putmask(tags, raw(mask), ids),
            lambda: np.putmask(a, raw(mask), raw(values)))


@implements(np.put_along_axis)
def put_along_axis(arr, indices, values, axis):
    _tagged(arr, values, "put_along_axis",
            lambda tags, ids: np.put_along_axis(tags, raw(indices), ids, axis),
            lambda: np.put_along_axis(arr, raw(indices), raw(values), axis))


# -- shared memory: tensors of one storage share the positions they hold in it ----------------


def _shares(name, np_fn, bounds_only):
    def impl(a, b, max_work=None):
        if type(a) is Tensor and type(b) is Tensor:
            return views.shares_memory(a, b, bounds_only)
        return np_fn(raw(a), raw(b)) if max_work is None else np_fn(raw(a), raw(b), max_work)

    impl.__name__ = name
    impl.values_only = True  # (the coverage table lists it as values only)
    return impl


implements(np.shares_memory, name="shares_memory")(
    _shares("shares_memory", np.shares_memory, False))
implements(np.may_share_memory, name="may_share_memory")(
    _shares("may_share_memory", np.may_share_memory, True))
