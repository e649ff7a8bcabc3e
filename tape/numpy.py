"""``tape.numpy``: NumPy's namespace for tensors (``import tape.numpy as tnp``).

Every function here records on the tape; calling the same ``np.*`` function on a tensor does the
same through NumPy's dispatch protocols. Constants such as ``pi`` and plain-value helpers come
straight from NumPy.
"""
import builtins as _builtins

import numpy as _np

from .numpy_ops import _dispatch, _impl
from .core.tensor import Tensor as _Tensor, tensor as _tensor

globals().update(_dispatch.EXPORTS)
from .numpy_ops._polynomials import namespace as polynomial  # noqa: E402  (tnp.polynomial.polynomial.polyval)

# every table ufunc under its NumPy name (tnp.exp, tnp.maximum, ...)
for _ufunc in list(_dispatch.UFUNC_CODE) + sorted(_dispatch.ZERO_GRAD | _dispatch.PLAIN, key=str):
    globals().setdefault(_ufunc.__name__, _ufunc)
divide = true_divide = _np.true_divide
negative, absolute, abs = _np.negative, _np.absolute, _np.absolute
pi, e, inf, nan, newaxis = _np.pi, _np.e, _np.inf, _np.nan, _np.newaxis
float64 = _np.float64
remainder, mod, fmod = _np.remainder, _np.remainder, _np.fmod
deg2rad, rad2deg, radians, degrees = _np.deg2rad, _np.rad2deg, _np.radians, _np.degrees


def asarray(a, dtype=None):
    """A tensor stays a tensor; a list or tuple that holds tensors is stacked (recorded, so
    ``tnp.array([x[1], -x[0]])`` keeps its gradient); anything else becomes a float64 constant
    tensor."""
    _float_only(dtype, "asarray")
    if type(a) is _Tensor:
        return a
    if isinstance(a, (list, tuple)) and _holds_tensor(a):
        return _impl.stack([asarray(x) for x in a])
    return _tensor(a)


def array(a, dtype=None, copy=True):
    """``tnp.asarray``, but a tensor is copied unless ``copy=False`` (NumPy's ``np.array``: the
    result never shares elements with `a`)."""
    r = asarray(a, dtype)
    return r.copy() if copy and r is a else r


def _holds_tensor(seq):
    # builtins.any: this module's own `any` is NumPy's (tnp.any)
    return _builtins.any(type(x) is _Tensor or (isinstance(x, (list, tuple)) and _holds_tensor(x))
                         for x in seq)


def _float_only(dtype, name):
    if dtype is not None and _np.dtype(dtype) != _np.float64:
        raise TypeError(f"tnp.{name}: tapejit tensors are float64; dtype={_np.dtype(dtype)} is "
                        f"not supported (use np.{name} for plain integer or boolean arrays)")


# Buffers: constant tensors whose item assignment records (``out[i] = x[i] ** 2`` keeps the
# gradient), the drop-in for a preallocated np.zeros / np.empty that a loop fills in.
def zeros(shape, dtype=None):
    _float_only(dtype, "zeros")
    return _tensor(_np.zeros(shape))


def empty(shape, dtype=None):
    """Zeros, not garbage: an element read before it is written is 0.0, never stale memory."""
    _float_only(dtype, "empty")
    return zeros(shape)


def ones(shape, dtype=None):
    _float_only(dtype, "ones")
    return _tensor(_np.ones(shape))


def full(shape, fill_value, dtype=None):
    """A buffer filled with `fill_value` (a tensor with history records: its gradient is the
    sum over the elements not overwritten)."""
    _float_only(dtype, "full")
    buf = zeros(shape)
    buf[...] = fill_value
    return buf


def arange(*args, dtype=None):
    """NumPy's dtypes: integer arguments give a plain integer array (it can index and count),
    float ones a float64 constant tensor."""
    r = _np.arange(*args, dtype=dtype)
    return r if r.dtype.kind in "biu" else _tensor(r.astype(_np.float64))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """A float64 tensor; differentiable in `start` and `stop` when they are tensors."""
    _float_only(dtype, "linspace")
    if isinstance(start, _Tensor) or isinstance(stop, _Tensor):
        return _np.linspace(start, stop, num, endpoint, retstep, axis=axis)
    return _tensor(_np.linspace(start, stop, num, endpoint, retstep, axis=axis)) if not retstep \
        else tuple(_tensor(v) for v in _np.linspace(start, stop, num, endpoint, True, axis=axis))


def eye(N, M=None, k=0, dtype=None):
    _float_only(dtype, "eye")
    return _tensor(_np.eye(N, M, k))


def identity(n, dtype=None):
    return eye(n, dtype=dtype)


from .numpy_ops import linalg  # noqa: E402  (tnp.linalg.norm, det, ...)

del _ufunc
