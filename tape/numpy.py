"""``tape.numpy``: NumPy's namespace for tensors (``import tape.numpy as tnp``).

Every function here records on the tape; calling the same ``np.*`` function on a tensor does the
same through NumPy's dispatch protocols. Constants such as ``pi`` and plain-value helpers come
straight from NumPy.
"""
import numpy as _np

from . import _numpy_impl as _impl

globals().update(_impl.EXPORTS)

# every table ufunc under its NumPy name (tnp.exp, tnp.maximum, ...)
for _ufunc in list(_impl.UFUNC_CODE) + sorted(_impl.ZERO_GRAD | _impl.PLAIN, key=str):
    globals().setdefault(_ufunc.__name__, _ufunc)
divide = true_divide = _np.true_divide
negative, absolute, abs = _np.negative, _np.absolute, _np.absolute
pi, e, inf, nan, newaxis = _np.pi, _np.e, _np.inf, _np.nan, _np.newaxis
float64 = _np.float64
remainder, mod, fmod = _np.remainder, _np.remainder, _np.fmod
deg2rad, rad2deg, radians, degrees = _np.deg2rad, _np.rad2deg, _np.radians, _np.degrees


def asarray(a, dtype=None):
    """A tensor stays a tensor; anything else becomes a float64 constant tensor."""
    from ._tensor import Tensor, tensor

    return a if type(a) is Tensor else tensor(a)


array = asarray


def zeros(shape):
    from ._tensor import tensor

    return tensor(_np.zeros(shape))


def ones(shape):
    from ._tensor import tensor

    return tensor(_np.ones(shape))


def arange(*args):
    from ._tensor import tensor

    return tensor(_np.arange(*args, dtype=float))


def linspace(*args, **kwargs):
    from ._tensor import tensor

    return tensor(_np.linspace(*args, **kwargs))


from . import linalg  # noqa: E402  (tnp.linalg.norm, det, ...)

del _ufunc
