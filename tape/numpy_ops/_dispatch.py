"""NumPy's dispatch to tensors: the registry of implementations and the two protocols.

``implements`` registers a function as the implementation of NumPy functions (``FUNCS``) and
exports it from ``tape.numpy`` (``EXPORTS``); ``__array_ufunc__`` and ``__array_function__`` on
Tensor dispatch through them. The implementations themselves are in ``_impl.py`` and the
composition modules beside it.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from jit.table import OPCODE

from ..core import bilinear, guards as _guards, views
from ..core import record as rec
from ..core.record import binary, unary
from ..core.tensor import Tensor, install, is_operand, plain, raw
from ..core.values import constant, masked_error, refuse_masked

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


# ---------------------------------------------------------------------------------------------
# ufuncs

UFUNC_CODE = rec.UFUNC_CODE
# piecewise-constant ufuncs: zero gradient, so their results are constants
ZERO_GRAD = {np.floor, np.ceil, np.trunc, np.rint, np.sign, np.floor_divide, np.heaviside,
             np.spacing}
# ufuncs whose results are plain NumPy values: booleans, and nextafter's neighbouring floats
PLAIN = {np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal,
         np.logical_and, np.logical_or, np.logical_xor, np.logical_not, np.isnan, np.isinf,
         np.isfinite, np.signbit, np.nextafter}
_guards.ALLOWED.update(f.__name__ for f in PLAIN | ZERO_GRAD)
UFUNC_FUNCS = {}  # ufuncs written as compositions (tape/numpy_ops/_compositions.py): ufunc -> function
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
        r = bilinear.matmul(*inputs)
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
            raise TypeError(f"{_ufunc_name(ufunc)} is not supported on tapejit tensors: "
                            "tapejit cannot record it. " + _WAYS_OUT)
        else:
            r = unary(code, as_tensor(inputs[0])) if ufunc.nin == 1 else binary(code, *inputs)
    if out is None:
        return r
    (target,) = out
    if type(target) is not Tensor:
        if r.requires_grad:
            raise TypeError(f"numpy.{ufunc.__name__} into a NumPy array (out=, or an in-place "
                            "operator such as out[i] += t) would drop the gradient: make the "
                            "array a tensor, out = tnp.zeros(shape) (or np.zeros_like(t)), "
                            "whose in-place writes record")
        target[...] = r._v
        return target
    if views.is_scalar(target):
        raise TypeError("return arrays must be of ArrayType")
    views.check_writeable(target, "output array")
    r = _into_shape(ufunc, r, target.shape)
    if target._meta is not None and target._rg:
        if rec.state.grad:
            raise RuntimeError("a leaf tensor that requires grad is being used in an in-place "
                               f"operation (numpy.{ufunc.__name__}, out=)")
        target._v[...] = r._v
        views.leaf_written(target)
        return target
    views.assign(target, r)
    return target


def _into_shape(ufunc, r, shape):
    """r broadcast to an out= operand's shape, or NumPy's error when it is not its shape."""
    if r.shape == shape:
        return r
    try:
        full = np.broadcast_shapes(r.shape, shape)
    except ValueError:
        raise ValueError(f"operands could not be broadcast together with shapes "
                         f"{views.shape_text(r.shape)} {views.shape_text(shape)}") from None
    if full != shape:
        raise ValueError(f"non-broadcastable output operand with shape "
                         f"{views.shape_text(shape)} doesn't match the broadcast shape "
                         f"{views.shape_text(full)}")
    return FUNCS[np.broadcast_to].__wrapped__(r, shape)


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


# ufunc.reduce and ufunc.accumulate as the NumPy functions they are (implemented in _impl.py)
_REDUCE_AS = {np.add: np.sum, np.multiply: np.prod, np.maximum: np.max, np.minimum: np.min}
_ACCUMULATE_AS = {np.add: np.cumsum, np.multiply: np.cumprod}


def array_ufunc(ufunc, method, inputs, kwargs):
    for x in inputs:
        if not is_operand(x):
            return NotImplemented
        if isinstance(x, np.ndarray) and type(x) is not np.ndarray:
            refuse_masked(x, f"numpy.{ufunc.__name__}")
    if method == "__call__":
        return _ufunc_call(ufunc, inputs, dict(kwargs))
    if method == "reduce" and ufunc in _REDUCE_AS:
        axis = kwargs.get("axis", 0)
        return FUNCS[_REDUCE_AS[ufunc]](inputs[0], axis=axis,
                                        keepdims=kwargs.get("keepdims", False))
    if method == "accumulate" and ufunc in _ACCUMULATE_AS:
        return FUNCS[_ACCUMULATE_AS[ufunc]](inputs[0], axis=kwargs.get("axis", 0))
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
                        + _WAYS_OUT_OF.get(name, _WAYS_OUT) + _IN_COMPILE * (
                            rec.state.guards is not None))
    return impl(*args, **kwargs)


# what to write instead of a function tapejit cannot record: ways that keep the gradient
_WAYS_OUT = ("Write it with np.* calls that tapejit records, or wrap it in a tape.Function "
             "with its backward (docs/porting.md, \"A function tapejit does not cover\"); "
             "docs/coverage.md lists what is covered.")
_WAYS_OUT_OF = {
    "numpy.fft": "The DFT of a real signal x of n samples is two real matrix products, which "
                 "record: with w = 2 * np.pi * np.outer(np.arange(n), np.arange(n)) / n, "
                 "its real part is x @ np.cos(w) and its imaginary part -(x @ np.sin(w)) "
                 "(docs/porting.md, \"np.fft on a tensor\").",
}


# why an unsupported call on a data argument fails under tape.compile too, and what to do
_IN_COMPILE = (" Under tape.compile every float array argument of f is an input, data included, "
               "so a replay would have to recompute this call: compute it outside f and pass "
               "the result in, or let f read fixed data from its closure (a constant of the "
               "recording). What is covered: docs/coverage.md.")


_UFUNC_CODE = rec.UFUNC_CODE
_FAST_OPERANDS = {Tensor, np.ndarray, float, int}


class TensorNumpyProtocols:
    """NumPy's dispatch protocols on Tensor (``install`` makes these Tensor's)."""

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
        impl = FUNCS.get(func)
        if impl is None:
            return array_function(func, types, args, kwargs)
        if types not in _OWN_TYPES:  # (array_function's check, inline for what we implement)
            for t in types:
                if not issubclass(t, (Tensor, np.ndarray)):
                    return NotImplemented
                if issubclass(t, np.ma.MaskedArray):
                    raise masked_error(f"numpy.{func.__name__}")
        return impl(*args, **kwargs) if kwargs else impl(*args)


# the types tuples NumPy passes for tensors with or without plain arrays: one set lookup
_OWN_TYPES = frozenset({(Tensor,), (np.ndarray, Tensor), (Tensor, np.ndarray)})

install(TensorNumpyProtocols)
