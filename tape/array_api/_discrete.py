"""The namespace's boolean and integer arrays: NumPy data that reports ``tape.array_api``.

Array-API code (SciPy with ``SCIPY_ARRAY_API=1``, array-api-extra) asks every argument of a call
for its namespace and refuses a mix: a NumPy boolean mask next to a tensor is "Multiple
namespaces for array inputs". NumPy decides by type (an ``ndarray`` subclass is NumPy's), so
a mask that array-API code builds from tensors must not be an ``ndarray``. A
``DiscreteArray`` holds a NumPy bool or integer array and reports this namespace; NumPy takes
it anywhere it takes an array (``__array__``: indexing, ``np.where``, ``np.asarray``), and NumPy
functions and operators on it give ``DiscreteArray`` results again.

Its values are piecewise constant in whatever they were computed from, so no gradient flows
through one: converting it to float (``xp.astype(m, xp.float64)``, ``m * 1.0``) gives a constant
tensor, never a silent zero gradient of a differentiable quantity.
"""
import builtins
import sys

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from ..core.tensor import Tensor, plain
from ._dtypes import check, float64
from ._info import check_device


def _plain(x):
    """x with every DiscreteArray (also inside lists and tuples) replaced by its NumPy array."""
    t = type(x)
    if t is DiscreteArray:
        return x._a
    if t is list or t is tuple:
        return t(_plain(a) for a in x)
    return x


def discrete(r):
    """A NumPy bool or integer result as a DiscreteArray; other values unchanged."""
    if isinstance(r, (np.ndarray, np.generic)) and r.dtype.kind in "biu":
        return DiscreteArray(np.asarray(r))
    if type(r) in (tuple, list):
        return type(r)(discrete(a) for a in r)
    return r


class DiscreteArray(NDArrayOperatorsMixin):
    """A boolean or integer array of ``tape.array_api`` (a NumPy array inside; no gradient)."""

    __slots__ = ("_a",)

    def __init__(self, a):
        self._a = a

    # -- the array object of the standard --------------------------------------------------
    def __array_namespace__(self, *, api_version=None):
        return Tensor.__array_namespace__(self, api_version=api_version)

    @property
    def dtype(self):
        return self._a.dtype

    @property
    def shape(self):
        return self._a.shape

    @property
    def ndim(self):
        return self._a.ndim

    @property
    def size(self):
        return self._a.size

    @property
    def device(self):
        return "cpu"

    def to_device(self, device, /, *, stream=None):
        check_device(device, "to_device")
        return self

    @property
    def T(self):
        return DiscreteArray(self._a.T)

    @property
    def mT(self):
        return DiscreteArray(np.swapaxes(self._a, -1, -2))

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (discrete(a) for a in self._a)

    def __bool__(self):
        return bool(self._a)

    def __int__(self):
        return int(self._a)

    def __float__(self):
        return float(self._a)

    def __index__(self):
        return self._a.__index__()

    def __complex__(self):
        return complex(self._a)

    __hash__ = None  # an array, not a key (as ndarray)

    def __getitem__(self, key):
        return discrete(self._a[_plain(key)])

    def __setitem__(self, key, value):
        if type(value) is Tensor:
            if value._rg:
                raise TypeError("tape.array_api: a tensor that requires grad cannot be stored "
                                "into a boolean or integer array (its gradient would be lost); "
                                "convert the array with xp.astype(a, xp.float64) first")
            value = value._v
        self._a[_plain(key)] = _plain(value)

    def __repr__(self):
        return "DiscreteArray" + repr(self._a).removeprefix("array")

    def __str__(self):
        return str(self._a)

    def __format__(self, spec):
        return format(self._a if self._a.ndim else self._a[()], spec)

    def __dlpack__(self, **kwargs):  # data without a gradient: it may leave as a buffer
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()

    # -- NumPy's view of it ---------------------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        if copy:
            return np.array(self._a, dtype=dtype, copy=True)
        if dtype is None or np.dtype(dtype) == self._a.dtype:
            return self._a
        if copy is False:
            raise ValueError(f"DiscreteArray of dtype {self._a.dtype}: a {np.dtype(dtype)} "
                             "array needs a copy, and copy=False was asked")
        return self._a.astype(dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = _plain(out)
        r = getattr(ufunc, method)(*_plain(inputs), **kwargs)
        return _result(r)

    def __array_function__(self, func, types, args, kwargs):
        return _result(func(*_plain(args), **{k: _plain(v) for k, v in kwargs.items()}))

    # NumPy methods that SciPy and users call on masks and indices
    def astype(self, dtype, copy=True):
        return wrap(np.asarray(self._a).astype(check(dtype, "astype"), copy=copy))

    def any(self, axis=None, keepdims=False):
        return discrete(np.any(self._a, axis=axis, keepdims=keepdims))

    def all(self, axis=None, keepdims=False):
        return discrete(np.all(self._a, axis=axis, keepdims=keepdims))

    def sum(self, axis=None, keepdims=False):
        return discrete(np.sum(self._a, axis=axis, keepdims=keepdims))

    def reshape(self, *shape):
        return discrete(self._a.reshape(*shape))

    def item(self):
        return self._a.item()

    def tolist(self):
        return self._a.tolist()

    def copy(self):
        return DiscreteArray(self._a.copy())

    def numpy(self):
        """The values as a NumPy array (no copy)."""
        return self._a

    def __getattr__(self, name):
        # the rest of ndarray's public methods (ravel, nonzero, argmax, ...), for NumPy-style
        # code that receives a mask from SciPy; results in the namespace's types
        if name.startswith("_"):
            raise AttributeError(f"'DiscreteArray' object has no attribute {name!r}")
        attr = getattr(self._a, name)
        if not callable(attr):
            return _result(attr)

        def method(*args, **kwargs):
            return _result(attr(*_plain(args), **{k: _plain(v) for k, v in kwargs.items()}))

        method.__name__ = name
        return method


def _result(r):
    """A NumPy call's result on DiscreteArrays in the namespace's types: bool and integer
    arrays DiscreteArrays, float arrays computed from data constant tensors."""
    if type(r) in (tuple, list):
        return type(r)(_result(a) for a in r)
    if isinstance(r, (np.ndarray, np.generic)) and r.dtype.kind == "f":
        return wrap(r)
    return discrete(r)


# Top-level packages whose code is written against the array API standard: a comparison of
# tensors made by their code gives a DiscreteArray
_PACKAGES = {"scipy", "array_api_extra", "array_api_compat", "sklearn"}
_VERDICTS = {}  # module name -> whether it belongs to one of _PACKAGES
_getframe = sys._getframe


def array_api_packages():
    """The top-level packages whose tensor comparisons give DiscreteArrays."""
    return frozenset(_PACKAGES)


def declare_array_api_package(name):
    """Treat the code of package `name` (its top-level name, e.g. "mylib") as array-API code:
    its comparisons of tensors give DiscreteArrays, which report this namespace."""
    _PACKAGES.add(name.partition(".")[0])
    _VERDICTS.clear()


def from_comparison(r):
    """A tensor comparison's result (a NumPy bool array or scalar) as its caller expects it:
    a DiscreteArray for code of an array-API package, the NumPy value for everyone else.

    Called by ``Tensor.__lt__`` and its siblings, so frame 2 is the comparison's caller."""
    try:
        name = _getframe(2).f_globals.get("__name__")
    except ValueError:  # called with no Python caller (from C at the bottom of a stack)
        return r
    v = _VERDICTS.get(name)
    if v is None:
        v = _VERDICTS[name] = type(name) is str and name.partition(".")[0] in _PACKAGES
    return DiscreteArray(np.asarray(r)) if v else r


def result_type(*arrays_and_dtypes):
    """The standard's promotion over tensors (float64), NumPy arrays, dtypes and Python
    scalars (which take the array's kind, as NEP 50 does)."""
    args = [float64 if type(a) is Tensor else a.dtype if type(a) is DiscreteArray else a
            for a in arrays_and_dtypes]
    if not args:
        raise ValueError("result_type: at least one array or dtype is required")
    return np.result_type(*args)


def wrap(r):
    """A namespace result: float values as tensors (constants when NumPy computed them from
    plain data), integer and boolean ones as DiscreteArrays (0-d ones too)."""
    tr = type(r)
    if tr is Tensor:
        return r
    if tr is float:
        return plain(r)
    if isinstance(r, (np.ndarray, np.generic)):
        k = r.dtype.kind
        if k == "f":
            return plain(float(r) if r.ndim == 0 else np.array(r, dtype=np.float64, order="C"))
        if k in "biu":
            return DiscreteArray(np.asarray(r))
        raise TypeError(f"tape.array_api: a result of dtype {r.dtype} is not supported (the tape "
                        "has no complex values)")
    if tr in (builtins.bool, int):
        return DiscreteArray(np.asarray(r))
    if tr is DiscreteArray:
        return r
    if isinstance(r, (tuple, list)):
        return tr(wrap(x) for x in r) if tr in (tuple, list) else tr(*(wrap(x) for x in r))
    return r
