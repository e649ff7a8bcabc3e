"""``tape.array_api``: the Python array API standard (2024.12) over tapejit's tensors.

``Tensor.__array_namespace__()`` returns this module, so code written against the standard
(SciPy's array-API-aware functions with ``SCIPY_ARRAY_API=1``, array-api-extra, your own) runs
on tensors and records on the tape: reverse mode, ``tape.compile`` replay, forward mode and
higher order, as far as the operations it calls support them (docs/coverage.md).

Arrays: float64 results are tensors (differentiable); boolean and integer results are
``DiscreteArray``s, NumPy arrays that report this namespace (no gradient flows through them).
float32 and complex dtypes are refused with a ``TypeError``; the only device is ``"cpu"``.
Each function takes the standard's signature and calls NumPy's function of that name, which
reaches tapejit's implementation through NumPy's dispatch protocols when an argument is a
tensor. What passes and fails in the standard's conformance suite: docs/array_api.md.
"""
import math

import numpy as np

from .. import numpy as _tnp
from ..core.tensor import Tensor
from ..core.tensor_ops import set_comparison_results
from . import linalg  # noqa: F401  (the standard's linalg extension, xp.linalg)
from ._dtypes import (bool, can_cast, check, complex64, complex128, finfo, float32,  # noqa: F401
                      float64, iinfo, int8, int16, int32, int64, isdtype, uint8,
                      uint16, uint32, uint64)  # (the standard's dtypes and functions)
from ._discrete import (DiscreteArray, array_api_packages,  # noqa: F401
                        declare_array_api_package, from_comparison, result_type, wrap)
from ._info import DEVICE, __array_namespace_info__, check_device

# from now on a comparison of tensors in array-API code gives a DiscreteArray (_discrete.py)
set_comparison_results(from_comparison)

__array_api_version__ = "2024.12"
API_VERSIONS = ("2023.12", "2024.12")

e, inf, nan, pi, newaxis = math.e, math.inf, math.nan, math.pi, None


# ---------------------------------------------------------------------------------------------
# Creation


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """A tensor stays a tensor (``copy=True``: a recorded copy); a list holding tensors is
    stacked (recorded); other float data becomes a constant tensor; integer and boolean data
    a DiscreteArray."""
    check_device(device, "asarray")
    dtype = check(dtype, "asarray")
    if type(obj) is Tensor:
        if dtype is not None and dtype != float64:
            return astype(obj, dtype, copy=copy is not False)
        return obj.copy() if copy else obj
    if isinstance(obj, (list, tuple)) and _tnp._holds_tensor(obj):
        r = _tnp.asarray(obj)
        return r if dtype is None or dtype == float64 else astype(r, dtype)
    if copy is False:
        a = np.asarray(obj, dtype=dtype, copy=False)
        if a.dtype.kind == "f":
            raise ValueError("asarray(copy=False): plain float data becomes a tensor, which "
                             "owns a copy; use copy=None")
    else:
        a = np.asarray(obj, dtype=dtype, copy=copy)
    if a.dtype.kind == "f" and dtype is None and a.dtype != float64:
        a = a.astype(np.float64)
    return wrap(a)


def astype(x, dtype, /, *, copy=True, device=None):
    check_device(device, "astype")
    dtype = check(dtype, "astype")
    if type(x) is not Tensor:
        return wrap(np.asarray(x).astype(dtype, copy=copy))
    if dtype == float64:
        return x.copy() if copy else x
    # integer and boolean values of a tensor: piecewise constant in x (zero gradient), read
    # through recorded ops that guard them under tape.compile
    if dtype == bool:
        return wrap(np.not_equal(x, 0.0))
    return wrap(np.asarray(np.trunc(x)._v).astype(dtype))


def _float_buffer(shape, dtype, fill, where):
    """Float64 results as tnp buffers (item assignment on them records); other dtypes NumPy."""
    dtype = check(dtype, where)
    if dtype is None or dtype == float64:
        return _tnp.full(shape, fill) if fill else _tnp.zeros(shape)
    return wrap(np.full(shape, fill, dtype=dtype))


def zeros(shape, *, dtype=None, device=None):
    check_device(device, "zeros")
    return _float_buffer(shape, dtype, 0, "zeros")


def empty(shape, *, dtype=None, device=None):
    """Zeros, as ``tnp.empty``: an element read before it is written is 0."""
    check_device(device, "empty")
    return _float_buffer(shape, dtype, 0, "empty")


def ones(shape, *, dtype=None, device=None):
    check_device(device, "ones")
    return _float_buffer(shape, dtype, 1, "ones")


def full(shape, fill_value, *, dtype=None, device=None):
    """``fill_value``'s kind decides the dtype when none is given (an int fills an int64
    array, a float or a tensor a float64 tensor)."""
    check_device(device, "full")
    if dtype is None and not isinstance(fill_value, Tensor):
        dtype = np.asarray(fill_value).dtype
        dtype = float64 if dtype.kind == "f" else dtype
    dtype = check(dtype, "full")
    if dtype is None or dtype == float64:
        return _tnp.full(shape, fill_value)
    return wrap(np.full(shape, fill_value, dtype=dtype))


def _like_dtype(x, dtype):
    return check(dtype, "like") if dtype is not None else (float64 if type(x) is Tensor
                                                           else np.asarray(x).dtype)


def zeros_like(x, /, *, dtype=None, device=None):
    check_device(device, "zeros_like")
    return _float_buffer(np.shape(x._v if type(x) is Tensor else x), _like_dtype(x, dtype), 0,
                         "zeros_like")


def empty_like(x, /, *, dtype=None, device=None):
    return zeros_like(x, dtype=dtype, device=device)


def ones_like(x, /, *, dtype=None, device=None):
    check_device(device, "ones_like")
    return _float_buffer(np.shape(x._v if type(x) is Tensor else x), _like_dtype(x, dtype), 1,
                         "ones_like")


def full_like(x, /, fill_value, *, dtype=None, device=None):
    check_device(device, "full_like")
    return full(np.shape(x._v if type(x) is Tensor else x), fill_value,
                dtype=_like_dtype(x, dtype))


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    check_device(device, "arange")
    dtype = check(dtype, "arange")
    r = np.arange(start, stop, step, dtype=dtype) if stop is not None \
        else np.arange(start, step=step, dtype=dtype)
    return wrap(r)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    check_device(device, "linspace")
    dtype = check(dtype, "linspace")
    if dtype is not None and dtype != float64:
        return wrap(np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype))
    return wrap(np.linspace(start, stop, num, endpoint=endpoint))


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    check_device(device, "eye")
    return wrap(np.eye(n_rows, n_cols, k, dtype=check(dtype, "eye") or float64))


def from_dlpack(x, /, *, device=None, copy=None):
    check_device(device, "from_dlpack")
    return wrap(np.from_dlpack(x, copy=copy))


def meshgrid(*arrays, indexing="xy"):
    return [wrap(g) for g in np.meshgrid(*arrays, indexing=indexing)]


def tril(x, /, *, k=0):
    return wrap(np.tril(x, k))


def triu(x, /, *, k=0):
    return wrap(np.triu(x, k))


# ---------------------------------------------------------------------------------------------
# Elementwise: NumPy's ufuncs, which reach tapejit's table rows for tensors

def _elementwise(ufunc, name, nargs):
    if nargs == 1:
        def f(x, /):
            return wrap(ufunc(x))
    else:
        def f(x1, x2, /):
            return wrap(ufunc(x1, x2))

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"The standard's ``{name}``: ``numpy.{ufunc.__name__}`` on tensors."
    return f


_UNARY = {"abs": np.absolute, "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin,
          "asinh": np.arcsinh, "atan": np.arctan, "atanh": np.arctanh, "bitwise_invert": np.invert,
          "ceil": np.ceil, "cos": np.cos, "cosh": np.cosh, "exp": np.exp, "expm1": np.expm1,
          "floor": np.floor, "isfinite": np.isfinite, "isinf": np.isinf, "isnan": np.isnan,
          "log": np.log, "log1p": np.log1p, "log2": np.log2, "log10": np.log10,
          "logical_not": np.logical_not, "negative": np.negative, "positive": np.positive,
          "reciprocal": np.reciprocal, "sign": np.sign, "signbit": np.signbit, "sin": np.sin,
          "sinh": np.sinh, "square": np.square, "sqrt": np.sqrt, "tan": np.tan, "tanh": np.tanh,
          "trunc": np.trunc}
_BINARY = {"add": np.add, "atan2": np.arctan2, "bitwise_and": np.bitwise_and,
           "bitwise_left_shift": np.left_shift, "bitwise_or": np.bitwise_or,
           "bitwise_right_shift": np.right_shift, "bitwise_xor": np.bitwise_xor,
           "copysign": np.copysign, "divide": np.divide, "equal": np.equal,
           "floor_divide": np.floor_divide, "greater": np.greater,
           "greater_equal": np.greater_equal, "hypot": np.hypot, "less": np.less,
           "less_equal": np.less_equal, "logaddexp": np.logaddexp, "logical_and": np.logical_and,
           "logical_or": np.logical_or, "logical_xor": np.logical_xor, "maximum": np.maximum,
           "minimum": np.minimum, "multiply": np.multiply, "not_equal": np.not_equal,
           "pow": np.power, "remainder": np.remainder, "subtract": np.subtract}
for _name, _ufunc in _UNARY.items():
    globals()[_name] = _elementwise(_ufunc, _name, 1)
for _name, _ufunc in _BINARY.items():
    globals()[_name] = _elementwise(_ufunc, _name, 2)


def nextafter(x1, x2, /):
    """Values only: the next float is a step function of x1, and its gradient 0 or 1 would
    both mislead, so a tensor that requires grad is refused."""
    for a in (x1, x2):
        if type(a) is Tensor and a.requires_grad:
            raise TypeError("tape.array_api.nextafter: values only, and an argument requires "
                            "grad; pass x.detach() if no gradient should flow through it")
    return wrap(np.nextafter(*(a._v if type(a) is Tensor else a for a in (x1, x2))))


def round(x, /):  # noqa: A001
    return wrap(np.round(x))


def clip(x, /, min=None, max=None):  # noqa: A002
    if min is None and max is None:
        return asarray(x, copy=True)
    return wrap(np.clip(x, min, max))


def real(x, /):
    return wrap(np.real(x))


def imag(x, /):
    return zeros_like(x)


def conj(x, /):
    return asarray(x, copy=True)


# ---------------------------------------------------------------------------------------------
# Statistical and utility


def _reduce(fn, name):
    def f(x, /, *, axis=None, keepdims=False):
        return wrap(fn(x, axis=axis, keepdims=keepdims))

    f.__name__ = f.__qualname__ = name
    return f


max = _reduce(np.max, "max")  # noqa: A001
min = _reduce(np.min, "min")  # noqa: A001
mean = _reduce(np.mean, "mean")
all = _reduce(np.all, "all")  # noqa: A001
any = _reduce(np.any, "any")  # noqa: A001


def _with_dtype(fn, x, dtype, axis, keepdims):
    dtype = check(dtype, fn.__name__)
    if type(x) is Tensor:
        return wrap(fn(x, axis=axis, keepdims=keepdims))
    if dtype is None and np.asarray(x).dtype.kind == "b":
        dtype = int64
    return wrap(fn(x, axis=axis, keepdims=keepdims, dtype=dtype))


def sum(x, /, *, axis=None, dtype=None, keepdims=False):  # noqa: A001
    return _with_dtype(np.sum, x, dtype, axis, keepdims)


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    return _with_dtype(np.prod, x, dtype, axis, keepdims)


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    return wrap(np.std(x, axis=axis, ddof=correction, keepdims=keepdims))


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    return wrap(np.var(x, axis=axis, ddof=correction, keepdims=keepdims))


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    check(dtype, "cumulative_sum")
    kw = {} if type(x) is Tensor or dtype is None else {"dtype": dtype}
    return wrap(np.cumulative_sum(x, axis=axis, include_initial=include_initial, **kw))


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    check(dtype, "cumulative_prod")
    kw = {} if type(x) is Tensor or dtype is None else {"dtype": dtype}
    return wrap(np.cumulative_prod(x, axis=axis, include_initial=include_initial, **kw))


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    kw = {k: v for k, v in (("prepend", prepend), ("append", append)) if v is not None}
    return wrap(np.diff(x, n=n, axis=axis, **kw))


# ---------------------------------------------------------------------------------------------
# Manipulation and indexing


def broadcast_arrays(*arrays):
    return [wrap(a) for a in np.broadcast_arrays(*arrays)]


def broadcast_to(x, /, shape):
    return wrap(np.broadcast_to(x, shape))


def broadcast_shapes(*shapes):
    return np.broadcast_shapes(*shapes)


def concat(arrays, /, *, axis=0):
    if axis is None:
        arrays = [np.reshape(a, -1) for a in arrays]
        axis = 0
    return wrap(np.concatenate(list(arrays), axis=axis))


def stack(arrays, /, *, axis=0):
    return wrap(np.stack(list(arrays), axis=axis))


def unstack(x, /, *, axis=0):
    return tuple(wrap(a) for a in np.unstack(x, axis=axis))


def expand_dims(x, /, axis=0):
    return wrap(np.expand_dims(x, axis))


def squeeze(x, /, axis):
    return wrap(np.squeeze(x, axis=axis))


def reshape(x, /, shape, *, copy=None):
    r = np.reshape(x, shape, copy=copy)  # (a tensor's: a view unless copy, as NumPy's)
    return wrap(np.copy(r) if copy and type(r) is not Tensor else r)


def flip(x, /, *, axis=None):
    return wrap(np.flip(x, axis=axis))


def roll(x, /, shift, *, axis=None):
    return wrap(np.roll(x, shift, axis=axis))


def moveaxis(x, source, destination, /):
    return wrap(np.moveaxis(x, source, destination))


def permute_dims(x, /, axes):
    return wrap(np.transpose(x, axes))


def matrix_transpose(x, /):
    return wrap(np.matrix_transpose(x))


def repeat(x, repeats, /, *, axis=None):
    return wrap(np.repeat(x, repeats, axis=axis))


def tile(x, repetitions, /):
    return wrap(np.tile(x, repetitions))


def take(x, indices, /, *, axis=None):
    if axis is None and np.ndim(x._v if type(x) is Tensor else x) > 1:
        raise ValueError("take: axis is required for arrays of more than one dimension")
    return wrap(np.take(x, indices, axis=axis))


def take_along_axis(x, indices, /, *, axis=-1):
    return wrap(np.take_along_axis(x, indices, axis=axis))


# ---------------------------------------------------------------------------------------------
# Searching, sorting, sets


def argmax(x, /, *, axis=None, keepdims=False):
    return wrap(np.argmax(x, axis=axis, keepdims=keepdims))


def argmin(x, /, *, axis=None, keepdims=False):
    return wrap(np.argmin(x, axis=axis, keepdims=keepdims))


def count_nonzero(x, /, *, axis=None, keepdims=False):
    return wrap(np.count_nonzero(x, axis=axis, keepdims=keepdims))


def nonzero(x, /):
    if np.ndim(x._v if type(x) is Tensor else x) == 0:
        raise ValueError("nonzero: zero-dimensional arrays are not allowed")
    return tuple(wrap(i) for i in np.nonzero(x))


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    return wrap(np.searchsorted(x1, x2, side=side, sorter=sorter))


def where(condition, x1, x2, /):
    return wrap(np.where(condition, x1, x2))


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    kind = "stable" if stable else None
    if not descending:
        return wrap(np.argsort(x, axis=axis, kind=kind))
    # descending and stable: sort the reversed array ascending, then map the indices back, so
    # equal elements keep their original order
    n = np.shape(x._v if type(x) is Tensor else x)[axis]
    return wrap(n - 1 - np.flip(np.argsort(np.flip(x, axis=axis), axis=axis, kind="stable"),
                                axis=axis))


def sort(x, /, *, axis=-1, descending=False, stable=True):
    r = np.sort(x, axis=axis, kind="stable" if stable else None)
    return wrap(np.flip(r, axis=axis) if descending else r)


def _sorted_unique(x):
    """The unique values of a tensor as a gather from it (differentiable: each value's gradient
    goes to its first occurrence), the indices read from the values (guarded)."""
    flat = np.reshape(x, -1)
    _, first = np.unique(x.detach().numpy().reshape(-1), return_index=True, equal_nan=False)
    return np.take(flat, first)


def unique_values(x, /):
    if type(x) is Tensor and x.requires_grad:
        return _sorted_unique(x)
    return wrap(np.unique_values(x))


def unique_counts(x, /):
    r = np.unique_counts(x.detach().numpy() if type(x) is Tensor else x)
    values = _sorted_unique(x) if type(x) is Tensor and x.requires_grad else wrap(r.values)
    return type(r)(values, wrap(r.counts))


def unique_inverse(x, /):
    r = np.unique_inverse(x.detach().numpy() if type(x) is Tensor else x)
    values = _sorted_unique(x) if type(x) is Tensor and x.requires_grad else wrap(r.values)
    return type(r)(values, wrap(r.inverse_indices))


def unique_all(x, /):
    r = np.unique_all(x.detach().numpy() if type(x) is Tensor else x)
    values = _sorted_unique(x) if type(x) is Tensor and x.requires_grad else wrap(r.values)
    return type(r)(values, *(wrap(a) for a in r[1:]))


def isin(x1, x2, /, *, invert=False):
    return wrap(np.isin(x1, x2, invert=invert))


# ---------------------------------------------------------------------------------------------
# Linear algebra (the main namespace's part; the extension is tape.array_api.linalg)


def matmul(x1, x2, /):
    return wrap(np.matmul(x1, x2))


def tensordot(x1, x2, /, *, axes=2):
    return wrap(np.tensordot(x1, x2, axes=axes))


def vecdot(x1, x2, /, *, axis=-1):
    # numpy.linalg.vecdot, not the gufunc numpy.vecdot: a ufunc call on a tensor takes no axis
    return wrap(np.linalg.vecdot(x1, x2, axis=axis))


# ---------------------------------------------------------------------------------------------
# Devices


def device(x, /):
    return DEVICE


def to_device(x, device, /, *, stream=None):
    check_device(device, "to_device")
    return x


def __getattr__(name):
    # xp.special (SciPy's ufuncs, for SciPy's array-API wrappers) loads SciPy: only on demand,
    # and absent when SciPy is not installed
    if name == "special":
        import importlib.util

        if importlib.util.find_spec("scipy") is not None:
            import importlib

            return importlib.import_module("tape.array_api.special")
    raise AttributeError(f"module 'tape.array_api' has no attribute {name!r}")


__all__ = sorted(n for n in globals() if not n.startswith("_") and n not in (
    "math", "np", "Tensor", "check", "check_device", "wrap", "API_VERSIONS",
    "DEVICE", "from_comparison")) + ["__array_namespace_info__", "__array_api_version__"]
del _name, _ufunc
