"""NumPy's API on tensors: the functions behind ``tape.numpy`` and the NumPy protocols.

Each supported NumPy function is implemented here on top of the table's primitives (never by
falling back to NumPy's own code, which would start with ``asarray`` and drop the tape). The
``FUNCS`` registry maps a NumPy function to its implementation; ``__array_function__`` and
``__array_ufunc__`` dispatch through it, and ``tape.numpy`` exports the same functions.
"""
from __future__ import annotations

import builtins
import math
import sys

import numpy as np

from jit.table import OPCODE

from ..core import guards as _guards
from ..core import record as rec
from ..core.record import binary, gather, normalize_axes, unary
from ..core.values import constant
from ..core.tensor import Tensor, install, is_operand, plain, raw

FUNCS = {}  # NumPy function -> implementation
EXPORTS = {}  # name in tape.numpy -> implementation


def implements(*np_funcs, name=None):
    def deco(fn):
        for f in np_funcs:
            FUNCS[f] = fn
        EXPORTS[name or fn.__name__] = fn
        return fn

    return deco


def as_tensor(x):
    return x if type(x) is Tensor else plain(constant(x))


def _shape(x):
    return np.shape(raw(x))


# ---------------------------------------------------------------------------------------------
# ufuncs

UFUNC_CODE = rec.UFUNC_CODE
# piecewise-constant ufuncs: zero gradient, so their results are constants
ZERO_GRAD = {np.floor, np.ceil, np.trunc, np.rint, np.sign, np.floor_divide, np.heaviside,
             np.spacing}
# ufuncs whose results are booleans or integers: plain NumPy values
PLAIN = {np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal,
         np.logical_and, np.logical_or, np.logical_xor, np.logical_not, np.isnan, np.isinf,
         np.isfinite, np.signbit}
_guards.ALLOWED.update(f.__name__ for f in PLAIN | ZERO_GRAD)
UFUNC_FUNCS = {}  # ufuncs written as compositions (tape/numpy/_compositions.py): ufunc -> function
SPECIAL_UFUNCS = {}  # scipy.special's ufuncs -> their escape rows' functions (tape/special.py)


def _ufunc_call(ufunc, inputs, kwargs):
    out = kwargs.pop("out", None)
    if kwargs:
        raise TypeError(f"numpy.{ufunc.__name__}: keyword arguments {sorted(kwargs)} are not "
                        "supported on tapejit tensors")
    if ufunc in PLAIN:
        r = ufunc(*(raw(x) for x in inputs))
        return r if rec.state.guards is None else _guards.note(("np", ufunc.__name__), inputs, r)
    if ufunc in ZERO_GRAD:
        r = plain(rec.check_dtype(ufunc(*(raw(x) for x in inputs)), ufunc.__name__))
        if rec.state.guards is not None:  # a constant computed from values: guarded
            _guards.note(("zero_grad", ufunc.__name__), inputs, r._v)
    elif ufunc is np.matmul:
        r = rec.matmul(*inputs)
    elif ufunc in (np.deg2rad, np.radians):
        r = binary(OPCODE["multiply"], inputs[0], math.pi / 180.0)
    elif ufunc in (np.rad2deg, np.degrees):
        r = binary(OPCODE["multiply"], inputs[0], 180.0 / math.pi)
    elif ufunc in UFUNC_FUNCS:
        if out is not None:
            raise TypeError(f"numpy.{ufunc.__name__}: out= is not supported on tapejit tensors")
        return UFUNC_FUNCS[ufunc](*inputs)
    else:
        code = UFUNC_CODE.get(ufunc)
        special = SPECIAL_UFUNCS.get(ufunc) if code is None else None
        if code is None and special is None and _resolve_ufunc(ufunc):
            special = SPECIAL_UFUNCS.get(ufunc)
        if special is not None:
            r = special(*inputs)
        elif code is None:
            raise TypeError(f"{_ufunc_name(ufunc)} is not supported on tapejit tensors "
                            "(use t.detach().numpy() if you only need values)")
        else:
            r = unary(code, as_tensor(inputs[0])) if ufunc.nin == 1 else binary(code, *inputs)
    if out is None:
        return r
    (target,) = out
    if type(target) is not Tensor:
        if r.requires_grad:
            raise TypeError(f"numpy.{ufunc.__name__}: out= a NumPy array would drop the "
                            "gradient; omit out= or pass a tensor")
        target[...] = r._v
        return target
    if target._meta is not None and target._rg:
        if rec.state.grad:
            raise RuntimeError("a leaf tensor that requires grad is being used in an in-place "
                               f"operation (numpy.{ufunc.__name__}, out=)")
        target._v[...] = r._v
        target._meta.version += 1
        return target
    target._rebind(r)
    return target


# Ufuncs of other libraries, mapped by the layer that knows them when one first reaches a tensor:
# each resolver(ufunc) registers what it can and says whether ``ufunc`` is now known (tape/special.py
# adds scipy.special's, which can only be found once SciPy is imported).
UFUNC_RESOLVERS = []


def _resolve_ufunc(ufunc):
    return any(resolve(ufunc) for resolve in UFUNC_RESOLVERS)


def _ufunc_name(ufunc):
    """The ufunc's name where users call it: numpy.exp, scipy.special.gammaln, ..."""
    name = ufunc.__name__
    if getattr(np, name, None) is ufunc:
        return f"numpy.{name}"
    special = sys.modules.get("scipy.special")
    public = getattr(special, name, None)
    # with SCIPY_ARRAY_API=1 the public name is SciPy's wrapper around the ufunc
    if special is not None and getattr(public, "__wrapped__", public) is ufunc:
        return f"scipy.special.{name}"
    return f"the ufunc {name}"


def array_ufunc(ufunc, method, inputs, kwargs):
    for x in inputs:
        if not is_operand(x):
            return NotImplemented
    if method == "__call__":
        return _ufunc_call(ufunc, inputs, dict(kwargs))
    if method == "reduce" and ufunc in _REDUCERS:
        axis = kwargs.get("axis", 0)
        return _REDUCERS[ufunc](inputs[0], axis=axis, keepdims=kwargs.get("keepdims", False))
    if method == "accumulate" and ufunc in (np.add, np.multiply):
        fn = cumsum if ufunc is np.add else cumprod
        return fn(inputs[0], axis=kwargs.get("axis", 0))
    raise TypeError(f"numpy.{ufunc.__name__}.{method} is not supported on tapejit tensors")


def array_function(func, types, args, kwargs):
    for t in types:
        if not issubclass(t, (Tensor, np.ndarray)):
            return NotImplemented
    impl = FUNCS.get(func)
    if impl is None:
        name = getattr(func, "__module__", "numpy").replace("numpy.linalg._linalg", "numpy.linalg")
        raise TypeError(f"{name}.{func.__name__} is not supported on tapejit tensors: tapejit "
                        "cannot record it, and calling NumPy's own code would drop the gradient. "
                        "Use t.detach().numpy() if you only need values." + _IN_COMPILE * (
                            rec.state.guards is not None))
    return impl(*args, **kwargs)


# why an unsupported call on a data argument fails under tape.compile too, and what to do
_IN_COMPILE = (" Under tape.compile every float array argument of f is an input, data included, "
               "so a replay would have to recompute this call: compute it outside f and pass "
               "the result in, or let f read fixed data from its closure (a constant of the "
               "recording). What is covered: docs/coverage.md.")


# ---------------------------------------------------------------------------------------------
# Reductions


@implements(np.sum)
def sum(a, axis=None, keepdims=False, dtype=None, out=None, initial=None, where=None):
    _no_extras("sum", out=out, initial=initial, where=where)
    return rec.reduce("sum", as_tensor(a), axis, keepdims)


@implements(np.prod)
def prod(a, axis=None, keepdims=False, dtype=None, out=None, initial=None, where=None):
    _no_extras("prod", out=out, initial=initial, where=where)
    return rec.reduce("prod", as_tensor(a), axis, keepdims)


@implements(np.max, np.amax, name="max")
def max(a, axis=None, keepdims=False, out=None, initial=None, where=None):
    _no_extras("max", out=out, initial=initial, where=where)
    return rec.reduce("amax", as_tensor(a), axis, keepdims)


@implements(np.min, np.amin, name="min")
def min(a, axis=None, keepdims=False, out=None, initial=None, where=None):
    _no_extras("min", out=out, initial=initial, where=where)
    return rec.reduce("amin", as_tensor(a), axis, keepdims)


EXPORTS["amax"] = max
EXPORTS["amin"] = min
_REDUCERS = {np.add: sum, np.multiply: prod, np.maximum: max, np.minimum: min}


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
    return rec.scan("cumsum", as_tensor(a), axis)


@implements(np.cumprod)
def cumprod(a, axis=None, dtype=None, out=None):
    _no_extras("cumprod", out=out)
    return rec.scan("cumprod", as_tensor(a), axis)


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


@implements(np.where)
def where(condition, x=None, y=None):
    if x is None and y is None:
        return np.where(raw(condition))
    return rec.where(condition, x, y)


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
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    if order != "C":
        raise TypeError("reshape: only order='C' is supported on tapejit tensors")
    shape = newshape if shape is None else shape
    return rec.reshape(as_tensor(a), shape)


@implements(np.ravel)
def ravel(a, order="C"):
    return reshape(a, -1, order)


@implements(np.transpose)
def transpose(a, axes=None):
    return rec.transpose(as_tensor(a), axes)


@implements(np.swapaxes)
def swapaxes(a, axis1, axis2):
    a = as_tensor(a)
    perm = list(range(a.ndim))
    i, j = normalize_axes((axis1,), a.ndim)[0], normalize_axes((axis2,), a.ndim)[0]
    perm[i], perm[j] = perm[j], perm[i]
    return rec.transpose(a, tuple(perm))


@implements(np.moveaxis)
def moveaxis(a, source, destination):
    a = as_tensor(a)
    return gather(a, np.ascontiguousarray(np.moveaxis(_ids(a.shape), source, destination)))


@implements(np.squeeze)
def squeeze(a, axis=None):
    a = as_tensor(a)
    return rec.reshape(a, np.squeeze(np.empty(a.shape, dtype=np.int8), axis).shape)


@implements(np.expand_dims)
def expand_dims(a, axis):
    a = as_tensor(a)
    return rec.reshape(a, np.expand_dims(np.empty(a.shape, dtype=np.int8), axis).shape)


@implements(np.broadcast_to)
def broadcast_to(array, shape, subok=False):
    a = as_tensor(array)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if a.shape == shape:
        return a
    return _index_op(a, lambda ids: np.broadcast_to(ids, shape))


@implements(np.flip)
def flip(m, axis=None):
    return _index_op(m, np.flip, axis)


@implements(np.fliplr)
def fliplr(m):
    return _index_op(m, np.fliplr)


@implements(np.flipud)
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
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError("diag: input must be 1-d or 2-d")
    return _assemble(lambda ids, fill: _diag_fill(ids[0], k, fill), [v])


def _diag_fill(ids, k, fill):
    n = ids.size + abs(k)
    out = np.full((n, n), fill, dtype=ids.dtype)
    i = np.arange(ids.size)
    out[i + builtins.max(-k, 0), i + builtins.max(k, 0)] = ids
    return out


def _assemble(fn, xs, fill_value=0.0):
    """Outputs built from the elements of several inputs (and constant fill).

    fn(list of id arrays, fill id) applied to element ids says where each output element comes
    from; the value is the same function applied to the values. Becomes one gather per input
    that needs grad, scattered into a constant base.
    """
    xs = [as_tensor(x) for x in xs]
    offs = np.cumsum([0] + [x.size for x in xs])
    ids = [np.arange(offs[i], offs[i + 1], dtype=np.int64).reshape(x.shape)
           for i, x in enumerate(xs)]
    out_ids = np.asarray(fn(ids, -1))
    vals = [np.asarray(x._v) for x in xs]
    value = np.asarray(fn(vals, fill_value), dtype=np.float64)
    if not rec.recording(*xs):
        return plain(rec.check_dtype(value, "assemble"))
    flat = out_ids.reshape(-1)
    if value.ndim == 0:  # one element: a gather from the input that holds it, or a constant
        for i, x in enumerate(xs):
            if offs[i] <= flat[0] < offs[i + 1]:
                return gather(x, np.array(flat[0] - offs[i], dtype=np.int64))
        return plain(float(value))
    base = value.copy().reshape(-1)
    grad_xs = [(i, x) for i, x in enumerate(xs) if x.requires_grad]
    for i, x in grad_xs:
        base[(flat >= offs[i]) & (flat < offs[i + 1])] = 0.0
    y = plain(rec.check_dtype(base.reshape(value.shape), "assemble"))
    for i, x in grad_xs:
        pos = np.flatnonzero((flat >= offs[i]) & (flat < offs[i + 1]))
        piece = gather(x, flat[pos] - offs[i])
        y = rec.setitem(y, np.unravel_index(pos, value.shape), piece)
    return y


@implements(np.concatenate)
def concatenate(arrays, axis=0, out=None, dtype=None, casting=None):
    _no_extras("concatenate", out=out)
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    return _assemble(lambda xs, fill: np.concatenate(xs, axis=axis), arrays)


@implements(np.stack)
def stack(arrays, axis=0, out=None, dtype=None, casting=None):
    _no_extras("stack", out=out)
    return _assemble(lambda xs, fill: np.stack(xs, axis=axis), list(arrays))


@implements(np.hstack)
def hstack(tup, dtype=None, casting=None):
    return _assemble(lambda xs, fill: np.hstack(xs), list(tup))


@implements(np.vstack)
def vstack(tup, dtype=None, casting=None):
    return _assemble(lambda xs, fill: np.vstack(xs), list(tup))


@implements(np.split)
def split(ary, indices_or_sections, axis=0):
    a = as_tensor(ary)
    parts = np.split(_ids(a.shape), indices_or_sections, axis)
    return [gather(a, np.ascontiguousarray(p)) for p in parts]


@implements(np.array_split)
def array_split(ary, indices_or_sections, axis=0):
    a = as_tensor(ary)
    parts = np.array_split(_ids(a.shape), indices_or_sections, axis)
    return [gather(a, np.ascontiguousarray(p)) for p in parts]


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
    res = [reshape(a, (1,)) if np.ndim(raw(a)) == 0 else as_tensor(a) for a in arys]
    return res[0] if len(res) == 1 else res


@implements(np.atleast_2d)
def atleast_2d(*arys):
    res = [reshape(a, (1,) * (2 - np.ndim(raw(a))) + _shape(a)) if np.ndim(raw(a)) < 2
           else as_tensor(a) for a in arys]
    return res[0] if len(res) == 1 else res


@implements(np.copy)
def copy(a, order="K", subok=False):
    return as_tensor(a).copy()


# ---------------------------------------------------------------------------------------------
# Products


@implements(np.matmul)
def matmul(a, b):
    return rec.matmul(a, b)


@implements(np.dot)
def dot(a, b, out=None):
    _no_extras("dot", out=out)
    na, nb = np.ndim(raw(a)), np.ndim(raw(b))
    if na == 0 or nb == 0:
        return binary(OPCODE["multiply"], a, b)
    if nb <= 2:
        return rec.matmul(a, b)
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
    return reshape(rec.matmul(at, bt), out_shape)


# ---------------------------------------------------------------------------------------------
# Values only (no gradient): plain NumPy results


def _values(fn):
    _guards.ALLOWED.add(fn.__name__)

    def impl(*args, **kwargs):
        r = fn(*_guards._plain(args), **{k: _guards._plain(v) for k, v in kwargs.items()})
        if rec.state.guards is not None:
            _guards.note(("values", fn.__name__, tuple(sorted(kwargs.items()))), args, r)
        return r

    impl.__name__ = fn.__name__
    impl.values_only = True  # (the coverage table lists it as values only)
    return impl


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


_UFUNC_CODE = rec.UFUNC_CODE
_FAST_OPERANDS = {Tensor, np.ndarray, float, int}


class TensorNumpyMethods:
    """NumPy's protocols on Tensor (``install`` makes these Tensor's), and its array methods."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "__call__" and not kwargs:  # the common case, without the generic checks
            code = _UFUNC_CODE.get(ufunc)
            if code is not None:
                if len(inputs) == 1:
                    return unary(code, self)
                a, b = inputs
                if type(a) in _FAST_OPERANDS and type(b) in _FAST_OPERANDS:
                    return binary(code, a, b)
        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return array_function(func, types, args, kwargs)

    def reshape(self, *shape, order="C"):
        return reshape(self, shape[0] if len(shape) == 1 else shape, order)

    def transpose(self, *axes):
        return transpose(self, None if not axes else (axes[0] if len(axes) == 1 else axes))

    flatten = _method(ravel)


for _name in ("sum", "prod", "max", "min", "mean", "var", "std", "cumsum", "cumprod", "ravel",
              "swapaxes", "squeeze", "dot", "clip", "diagonal", "trace", "take", "repeat",
              "argmax", "argmin", "argsort", "all", "any", "nonzero", "round"):
    setattr(TensorNumpyMethods, _name, _method(EXPORTS[_name]))
install(TensorNumpyMethods)
