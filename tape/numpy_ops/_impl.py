"""NumPy's functions on tensors: the implementations behind ``tape.numpy`` and NumPy's dispatch.

Each supported NumPy function is implemented here on top of the table's primitives (never by
falling back to NumPy's own code, which would start with ``asarray`` and drop the tape), and
registered with ``implements`` (``_dispatch.py``, which routes ``__array_function__`` and
``__array_ufunc__`` through the registry); Tensor's array methods (``t.sum()``, ``t.reshape``)
are the same functions.
"""
from __future__ import annotations

import builtins
import functools
import inspect
import math

import numpy as np

from jit.table import OPCODE

from ..core import bilinear, guards as _guards
from ..core import record as rec
from ..core import reductions
from ..core.record import binary, gather, normalize_axes, unary
from ..core.tensor import Tensor, install, plain, raw
from ..core.views import derive, derive_each
from ._assembly import assemble as _assemble
from ._dispatch import EXPORTS, as_tensor, implements


def _shape(x):
    return np.shape(raw(x))


def viewing(np_fn):
    """Make an implementation's result a view of its first argument (tape/core/views.py)
    wherever NumPy's `np_fn`, given the same arguments, answers with a view."""
    def deco(impl):
        @functools.wraps(impl)
        def wrapper(a, *args, **kwargs):
            r = impl(a, *args, **kwargs)
            return derive(a, r, lambda p: np_fn(p, *args, **kwargs)) if type(a) is Tensor else r

        return wrapper

    return deco


# ---------------------------------------------------------------------------------------------
# Reductions


@implements(np.sum)
def sum(a, axis=None, keepdims=False, dtype=None, out=None, initial=None, where=None):
    if out is not None or initial is not None or where is not None:
        _no_extras("sum", out=out, initial=initial, where=where)
    return reductions.reduce("sum", as_tensor(a), axis, keepdims)


@implements(np.prod)
def prod(a, axis=None, keepdims=False, dtype=None, out=None, initial=None, where=None):
    if out is not None or initial is not None or where is not None:
        _no_extras("prod", out=out, initial=initial, where=where)
    return reductions.reduce("prod", as_tensor(a), axis, keepdims)


@implements(np.max, np.amax, name="max")
def max(a, axis=None, keepdims=False, out=None, initial=None, where=None):
    if out is not None or initial is not None or where is not None:
        _no_extras("max", out=out, initial=initial, where=where)
    return reductions.reduce("amax", as_tensor(a), axis, keepdims)


@implements(np.min, np.amin, name="min")
def min(a, axis=None, keepdims=False, out=None, initial=None, where=None):
    if out is not None or initial is not None or where is not None:
        _no_extras("min", out=out, initial=initial, where=where)
    return reductions.reduce("amin", as_tensor(a), axis, keepdims)


EXPORTS["amax"] = max
EXPORTS["amin"] = min


def _no_extras(name, **kw):
    bad = [k for k, v in kw.items() if v is not None]
    if bad:
        raise TypeError(f"numpy.{name}: argument(s) {bad} are not supported on tapejit tensors")


def _count(a, axis):
    shape = _shape(a)
    axes = normalize_axes(axis, len(shape))
    return math.prod(shape[i] for i in axes)


@implements(np.mean)
def mean(a, axis=None, keepdims=False, dtype=None, out=None, where=None):
    _no_extras("mean", out=out, where=where)
    a = as_tensor(a)
    s = sum(a, axis, keepdims)
    return binary(OPCODE["divide"], s, float(_count(a, axis)))


@implements(np.var)
def var(a, axis=None, ddof=0, keepdims=False, dtype=None, out=None, where=None, mean=None,
        correction=None):
    _no_extras("var", out=out, where=where, mean=mean)
    if correction is not None:
        ddof = correction
    a = as_tensor(a)
    m = EXPORTS["mean"](a, axis, keepdims=True)
    d = a - m
    s = sum(d * d, axis, keepdims)
    return binary(OPCODE["divide"], s, float(builtins.max(_count(a, axis) - ddof, 0)))


@implements(np.std)
def std(a, axis=None, ddof=0, keepdims=False, dtype=None, out=None, where=None, mean=None,
        correction=None):
    return unary(OPCODE["sqrt"], var(a, axis, ddof, keepdims, dtype, out, where, mean, correction))


@implements(np.cumsum)
def cumsum(a, axis=None, dtype=None, out=None):
    _no_extras("cumsum", out=out)
    return reductions.scan("cumsum", as_tensor(a), axis)


@implements(np.cumprod)
def cumprod(a, axis=None, dtype=None, out=None):
    _no_extras("cumprod", out=out)
    return reductions.scan("cumprod", as_tensor(a), axis)


@implements(np.diff)
def diff(a, n=1, axis=-1, prepend=None, append=None):
    a = as_tensor(a)
    if prepend is not None or append is not None:
        parts = ([prepend] if prepend is not None else []) + [a] + (
            [append] if append is not None else [])
        parts = [p if np.ndim(raw(p)) else broadcast_to(p, _edge_shape(a, axis)) for p in parts]
        a = concatenate(parts, axis=axis)
    ax = normalize_axes(axis, a.ndim)[0]
    for _ in range(n):
        hi = [builtins.slice(None)] * a.ndim
        lo = [builtins.slice(None)] * a.ndim
        hi[ax] = builtins.slice(1, None)
        lo[ax] = builtins.slice(None, -1)
        a = a[tuple(hi)] - a[tuple(lo)]
    return a


def _edge_shape(a, axis):
    s = list(a.shape)
    s[normalize_axes(axis, a.ndim)[0]] = 1
    return tuple(s)


# ---------------------------------------------------------------------------------------------
# Elementwise functions that are not ufuncs


where = implements(np.where)(rec.where)  # (recorded without a wrapper: called in loops)


@implements(np.clip)
def clip(a, a_min=None, a_max=None, out=None, **kw):
    _no_extras("clip", out=out)
    a_min = kw.pop("min", a_min)
    a_max = kw.pop("max", a_max)
    r = as_tensor(a)
    if a_min is not None:
        r = binary(OPCODE["maximum"], r, a_min)
    if a_max is not None:
        r = binary(OPCODE["minimum"], r, a_max)
    return r


# ---------------------------------------------------------------------------------------------
# Shapes and index maps (all gathers)


def _ids(shape):
    return np.arange(math.prod(shape), dtype=np.int64).reshape(shape)


def _index_op(a, fn, *args, **kwargs):
    """Any NumPy function that only moves elements: apply it to element ids, gather by them."""
    a = as_tensor(a)
    idx = np.asarray(fn(_ids(a.shape), *args, **kwargs))
    return gather(a, np.array(idx, dtype=np.int64, order="C"))  # ascontiguousarray makes 0-d 1-d


@implements(np.reshape)
@viewing(np.reshape)
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    if order != "C":
        raise TypeError("reshape: only order='C' is supported on tapejit tensors")
    shape = newshape if shape is None else shape
    return rec.reshape(as_tensor(a), shape)


@implements(np.ravel)
@viewing(np.ravel)
def ravel(a, order="C"):
    if order != "C":
        raise TypeError("ravel: only order='C' is supported on tapejit tensors")
    return rec.reshape(as_tensor(a), -1)


@implements(np.transpose)
@viewing(np.transpose)
def transpose(a, axes=None):
    return rec.transpose(as_tensor(a), axes)


@implements(np.swapaxes)
@viewing(np.swapaxes)
def swapaxes(a, axis1, axis2):
    a = as_tensor(a)
    if a.ndim == 0:
        raise np.exceptions.AxisError(axis1, 0)
    perm = list(range(a.ndim))
    i, j = normalize_axes((axis1,), a.ndim)[0], normalize_axes((axis2,), a.ndim)[0]
    perm[i], perm[j] = perm[j], perm[i]
    return rec.transpose(a, tuple(perm))


@implements(np.moveaxis)
@viewing(np.moveaxis)
def moveaxis(a, source, destination):
    a = as_tensor(a)
    return gather(a, np.ascontiguousarray(np.moveaxis(_ids(a.shape), source, destination)))


@implements(np.squeeze)
@viewing(np.squeeze)
def squeeze(a, axis=None):
    a = as_tensor(a)
    return rec.reshape(a, np.squeeze(np.empty(a.shape, dtype=np.int8), axis).shape)


@implements(np.expand_dims)
@viewing(np.expand_dims)
def expand_dims(a, axis):
    a = as_tensor(a)
    return rec.reshape(a, np.expand_dims(np.empty(a.shape, dtype=np.int8), axis).shape)


@implements(np.broadcast_to)
@viewing(np.broadcast_to)
def broadcast_to(array, shape, subok=False):
    a = as_tensor(array)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if a.shape == shape:
        return a  # (a read-only view of it: viewing makes the new object)
    return _index_op(a, lambda ids: np.broadcast_to(ids, shape))


@implements(np.flip)
@viewing(np.flip)
def flip(m, axis=None):
    return _index_op(m, np.flip, axis)


@implements(np.fliplr)
@viewing(np.fliplr)
def fliplr(m):
    return _index_op(m, np.fliplr)


@implements(np.flipud)
@viewing(np.flipud)
def flipud(m):
    return _index_op(m, np.flipud)


@implements(np.roll)
def roll(a, shift, axis=None):
    return _index_op(a, np.roll, shift, axis)


@implements(np.take)
def take(a, indices, axis=None, out=None, mode="raise"):
    _no_extras("take", out=out)
    return _index_op(a, np.take, np.asarray(raw(indices)), axis, None, mode)


@implements(np.take_along_axis)
def take_along_axis(arr, indices, axis=-1):
    return _index_op(arr, np.take_along_axis, np.asarray(raw(indices)), axis)


@implements(np.diagonal)
@viewing(np.diagonal)
def diagonal(a, offset=0, axis1=0, axis2=1):
    return _index_op(a, np.diagonal, offset, axis1, axis2)


@implements(np.trace)
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    _no_extras("trace", out=out)
    return sum(diagonal(a, offset, axis1, axis2), axis=-1)


@implements(np.tile)
def tile(A, reps):
    return _index_op(A, np.tile, reps)


@implements(np.repeat)
def repeat(a, repeats, axis=None):
    return _index_op(a, np.repeat, np.asarray(raw(repeats)), axis)


@implements(np.sort)
def sort(a, axis=-1, kind=None, order=None, stable=None):
    a = as_tensor(a)
    if axis is None:
        a, axis = ravel(a), -1
    order_ = np.argsort(a._v, axis=axis, kind="stable")
    if rec.state.guards is not None:  # the permutation is a constant of the recording: guarded
        _guards.note(("values", "argsort", (("axis", axis), ("kind", "stable"))), (a,), order_)
    return take_along_axis(a, order_, axis)


def _triangle(m, mask):
    # a 1-D m is a row broadcast against the square mask, as in NumPy
    return rec.where(np.broadcast_to(mask, np.broadcast_shapes(mask.shape, m.shape)), m, 0.0)


@implements(np.triu)
def triu(m, k=0):
    m = as_tensor(m)
    return _triangle(m, np.triu(np.ones(m.shape[-2:], dtype=bool), k))


@implements(np.tril)
def tril(m, k=0):
    m = as_tensor(m)
    return _triangle(m, np.tril(np.ones(m.shape[-2:], dtype=bool), k))


@implements(np.diag)
def diag(v, k=0):
    v = as_tensor(v)
    if v.ndim == 2:
        return diagonal(v, k)  # (a read-only view, as NumPy's)
    if v.ndim != 1:
        raise ValueError("diag: input must be 1-d or 2-d")
    return _assemble(lambda ids, fill: _diag_fill(ids[0], k, fill), [v])


def _diag_fill(ids, k, fill):
    n = ids.size + abs(k)
    out = np.full((n, n), fill, dtype=ids.dtype)
    i = np.arange(ids.size)
    out[i + builtins.max(-k, 0), i + builtins.max(k, 0)] = ids
    return out


@implements(np.concatenate)
def concatenate(arrays, axis=0, out=None, dtype=None, casting=None):
    _no_extras("concatenate", out=out)
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    return _assemble(lambda xs, fill: np.concatenate(xs, axis=axis), arrays,
                     key=("concatenate", axis))


@implements(np.stack)
def stack(arrays, axis=0, out=None, dtype=None, casting=None):
    _no_extras("stack", out=out)
    return _assemble(lambda xs, fill: np.stack(xs, axis=axis), list(arrays), key=("stack", axis))


@implements(np.hstack)
def hstack(tup, dtype=None, casting=None):
    return _assemble(lambda xs, fill: np.hstack(xs), list(tup), key="hstack")


@implements(np.vstack)
def vstack(tup, dtype=None, casting=None):
    return _assemble(lambda xs, fill: np.vstack(xs), list(tup), key="vstack")


@implements(np.split)
def split(ary, indices_or_sections, axis=0):
    return _split(np.split, ary, indices_or_sections, axis)


@implements(np.array_split)
def array_split(ary, indices_or_sections, axis=0):
    return _split(np.array_split, ary, indices_or_sections, axis)


def _split(np_split, ary, indices_or_sections, axis):
    """The parts of a split: each a gather of its elements, and a view of `ary` (NumPy's are)."""
    a = as_tensor(ary)
    parts = np_split(_ids(a.shape), indices_or_sections, axis)
    return derive_each(a, [gather(a, np.ascontiguousarray(p)) for p in parts],
                       lambda pos: np_split(pos, indices_or_sections, axis))


@implements(np.pad)
def pad(array, pad_width, mode="constant", constant_values=0.0, **kw):
    if mode != "constant" or kw:
        raise TypeError(f"numpy.pad: only mode='constant' is supported on tapejit tensors "
                        f"(got mode={mode!r})")
    cv = float(constant_values) if np.ndim(constant_values) == 0 else None
    if cv is None:
        raise TypeError("numpy.pad: only a scalar constant_values is supported")
    return _assemble(lambda xs, fill: np.pad(xs[0], pad_width, constant_values=(
        fill if fill == -1 else cv)), [array], fill_value=cv)


@implements(np.atleast_1d)
def atleast_1d(*arys):
    res = [derive(a, rec.reshape(a, (1,)), np.atleast_1d) if a.ndim == 0 else a
           for a in map(as_tensor, arys)]
    return res[0] if len(res) == 1 else res


@implements(np.atleast_2d)
def atleast_2d(*arys):
    res = [derive(a, rec.reshape(a, (1,) * (2 - a.ndim) + a.shape), np.atleast_2d)
           if a.ndim < 2 else a for a in map(as_tensor, arys)]
    return res[0] if len(res) == 1 else res


@implements(np.copy)
def copy(a, order="K", subok=False):
    return as_tensor(a).copy()


# ---------------------------------------------------------------------------------------------
# Products


@implements(np.matmul)
def matmul(a, b):
    return bilinear.matmul(a, b)


@implements(np.dot)
def dot(a, b, out=None):
    _no_extras("dot", out=out)
    na, nb = np.ndim(raw(a)), np.ndim(raw(b))
    if na == 0 or nb == 0:
        return binary(OPCODE["multiply"], a, b)
    if nb <= 2:
        return bilinear.matmul(a, b)
    return tensordot(a, b, axes=([na - 1], [nb - 2]))


@implements(np.vdot)
def vdot(a, b):
    return dot(ravel(a), ravel(b))


@implements(np.inner)
def inner(a, b):
    na, nb = np.ndim(raw(a)), np.ndim(raw(b))
    if na == 0 or nb == 0:
        return binary(OPCODE["multiply"], a, b)
    return tensordot(a, b, axes=([na - 1], [nb - 1]))


@implements(np.outer)
def outer(a, b, out=None):
    _no_extras("outer", out=out)
    return binary(OPCODE["multiply"], reshape(ravel(a), (-1, 1)), reshape(ravel(b), (1, -1)))


@implements(np.tensordot)
def tensordot(a, b, axes=2):
    a, b = as_tensor(a), as_tensor(b)
    if isinstance(axes, (int, np.integer)):
        ax_a = list(range(a.ndim - axes, a.ndim))
        ax_b = list(range(axes))
    else:
        ax_a, ax_b = axes
        ax_a = [ax_a] if isinstance(ax_a, (int, np.integer)) else list(ax_a)
        ax_b = [ax_b] if isinstance(ax_b, (int, np.integer)) else list(ax_b)
    ax_a = [x % a.ndim for x in ax_a]
    ax_b = [x % b.ndim for x in ax_b]
    if [a.shape[i] for i in ax_a] != [b.shape[i] for i in ax_b]:
        raise ValueError(f"tensordot: shape-mismatch for sum ({a.shape} axes {ax_a}, "
                         f"{b.shape} axes {ax_b})")
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [i for i in range(b.ndim) if i not in ax_b]
    k = math.prod(a.shape[i] for i in ax_a)
    at = reshape(transpose(a, free_a + ax_a), (-1, k))
    bt = reshape(transpose(b, ax_b + free_b), (k, -1))
    out_shape = tuple(a.shape[i] for i in free_a) + tuple(b.shape[i] for i in free_b)
    return reshape(bilinear.matmul(at, bt), out_shape)


# ---------------------------------------------------------------------------------------------
# Values only (no gradient): plain NumPy results


def _values(fn):
    name = _guards.numpy_name(fn)
    _guards.ALLOWED.add(name)
    signature = _signature(fn)

    def impl(*args, **kwargs):
        r = fn(*_guards._plain(args), **{k: _guards._plain(v) for k, v in kwargs.items()})
        if rec.state.guards is not None:
            args, kwargs = _guard_operands(fn, signature, args, kwargs)
            _guards.note(("values", name, tuple(sorted(kwargs.items()))), args, r)
        return r

    impl.__name__ = fn.__name__
    impl.values_only = True  # (the coverage table lists it as values only)
    return impl


def _signature(fn):
    try:
        return inspect.signature(fn)
    except ValueError:  # (a ufunc: positional operands only)
        return None


def _carries(x):
    return type(x) is Tensor and x._rg


def _guard_operands(fn, signature, args, kwargs):
    """The operands and keywords a guard recomputes `fn` from: a keyword that holds a tensor
    becomes positional, and a sequence of tensors one stacked tensor (the array NumPy makes of
    it), so that every value the result depends on is a replayed slot rather than a constant
    of the recording."""
    if signature is not None and any(_carries(v) or _holds_tensor(v) for v in kwargs.values()):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()  # (so that every parameter before the tensor is positional)
        args, kwargs = bound.args, {k: v for k, v in bound.kwargs.items() if k in kwargs}
    for k, v in kwargs.items():
        if _carries(v) or _holds_tensor(v):
            raise TypeError(f"tape.compile: numpy.{fn.__name__} reads a tensor through its "
                            f"keyword-only argument {k}=, which a replay cannot check")
    return tuple(_stacked(fn, a) if _holds_tensor(a) else a for a in args), kwargs


def _holds_tensor(a):
    return isinstance(a, (list, tuple)) and any(_carries(x) or _holds_tensor(x) for x in a)


def _stacked(fn, seq):
    try:
        return stack(seq)
    except ValueError:
        raise TypeError(f"tape.compile: numpy.{fn.__name__} reads a sequence of tensors of "
                        "different shapes, which a replay cannot check; pass each as its own "
                        "argument or one array") from None


for _f in (np.argmax, np.argmin, np.argsort, np.nonzero, np.flatnonzero, np.count_nonzero,
           np.allclose, np.isclose, np.array_equal, np.all, np.any, np.shape, np.ndim, np.size,
           np.isnan, np.isfinite, np.isinf, np.sign, np.floor, np.ceil, np.round, np.around,
           np.searchsorted, np.unique, np.argwhere):
    implements(_f, name=_f.__name__)(_values(_f))


def _like(fn):
    def impl(a, *args, **kwargs):
        kwargs.pop("dtype", None)
        kwargs.pop("subok", None)
        return plain(rec.check_dtype(fn(np.asarray(raw(a)), *args, **kwargs), fn.__name__))

    impl.__name__ = fn.__name__
    return impl


for _f in (np.zeros_like, np.ones_like, np.full_like):
    implements(_f, name=_f.__name__)(_like(_f))
implements(np.empty_like, name="empty_like")(_like(np.zeros_like))


# ---------------------------------------------------------------------------------------------
# Tensor methods: the same implementations, NumPy's method signatures


def _method(fn):
    def m(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    m.__name__ = fn.__name__
    m.__doc__ = f"Same as tape.numpy.{fn.__name__}(self, ...)."
    return m


class TensorNumpyMethods:
    """NumPy's array methods on Tensor (``install`` makes these Tensor's)."""

    def reshape(self, *shape, order="C"):
        return reshape(self, shape[0] if len(shape) == 1 else shape, order)

    def transpose(self, *axes):
        return transpose(self, None if not axes else (axes[0] if len(axes) == 1 else axes))

    def flatten(self, order="C"):
        """A copy of the elements as a vector (NumPy's; ravel gives a view where it can)."""
        if order != "C":
            raise TypeError("flatten: only order='C' is supported on tapejit tensors")
        return rec.reshape(self, -1)

    def sort(self, axis=-1, kind=None, order=None, stable=None):
        """Sort in place (NumPy's ``a.sort``): every view of the tensor sees the order."""
        self[...] = sort(self, axis=axis, kind=kind, order=order, stable=stable)

    def put(self, indices, values, mode="raise"):
        """NumPy's ``a.put``: ``np.put(self, indices, values, mode)``."""
        np.put(self, indices, values, mode)

    def __round__(self, ndigits=None):
        """Python's ``round`` of a 0-d tensor, as of an np.float64: np.round's value, an int
        without `ndigits`. Rounding is piecewise constant, so no gradient is lost: the result
        is a value (guarded under tape.compile, as np.round is)."""
        if self.ndim != 0:
            raise TypeError(f"round(t) of a tensor of shape {self.shape}: like NumPy's arrays, "
                            "only 0-d tensors take Python's round; np.round(t, decimals) rounds "
                            "each element (values only: rounding has gradient 0)")
        r = EXPORTS["round"](self, 0 if ndigits is None else ndigits)
        return int(r) if ndigits is None else r


for _name in ("sum", "prod", "max", "min", "mean", "var", "std", "cumsum", "cumprod", "ravel",
              "swapaxes", "squeeze", "dot", "clip", "diagonal", "trace", "take", "repeat",
              "argmax", "argmin", "argsort", "all", "any", "nonzero", "round"):
    setattr(TensorNumpyMethods, _name, _method(EXPORTS[_name]))
install(TensorNumpyMethods)
