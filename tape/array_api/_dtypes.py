"""The array API's data types over tapejit: float64 tensors, DiscreteArrays for the rest.

Tensors are float64 (the tape records float64 and nothing else), so a float64 result is a
tensor and differentiates; boolean and integer results (comparisons, ``argmax``, ``nonzero``,
``astype(x, int64)``) are DiscreteArrays: NumPy arrays that report this namespace, through
which no gradient flows (_discrete.py). float32 and
the complex types are refused with an error that says so: a float32 result computed in float64
would be a silent change of precision, and the tape has no complex values.
"""
import builtins

import numpy as np

from ..core.tensor import Tensor

bool = np.dtype(np.bool_)  # noqa: A001  (the standard's name)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float32, float64 = np.dtype(np.float32), np.dtype(np.float64)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

SUPPORTED = {"bool": bool, "int8": int8, "int16": int16, "int32": int32, "int64": int64,
             "uint8": uint8, "uint16": uint16, "uint32": uint32, "uint64": uint64,
             "float64": float64}
_KINDS = {"bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu",
          "real floating": "f", "complex floating": "c", "numeric": "iufc"}


def check(dtype, where):
    """`dtype` as a NumPy dtype the namespace can make, or a TypeError naming why not."""
    if dtype is None:
        return None
    dt = np.dtype(dtype)
    if dt in SUPPORTED.values():
        return dt
    if dt.kind == "c":
        why = "the tape has no complex values"
    elif dt.kind == "f":
        why = "tensors are float64 (a float32 result computed in float64 would not be float32)"
    else:
        why = "it is not an array API data type"
    raise TypeError(f"tape.array_api.{where}: dtype {dt} is not supported: {why}. Supported: "
                    f"{', '.join(SUPPORTED)}.")


def dtype_of(x):
    if type(x) is Tensor:
        return float64
    if isinstance(x, np.dtype):
        return x
    if isinstance(x, type) and issubclass(x, np.generic):
        return np.dtype(x)
    return np.asarray(x).dtype


def isdtype(dtype, kind):
    """Whether `dtype` is of `kind`: a dtype, a kind name ('real floating', 'integral', ...)
    or a tuple of those (the standard's rule)."""
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dtype, k) for k in kind)
    dtype = np.dtype(dtype)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r}; one of {sorted(_KINDS)}")
        return dtype.kind in _KINDS[kind]
    return dtype == np.dtype(kind)


def can_cast(from_, to, /):
    return np.can_cast(dtype_of(from_), np.dtype(to))


def finfo(type, /):  # noqa: A002  (the standard's name)
    dt = dtype_of(type)
    if dt.kind != "f":
        raise ValueError(f"finfo: {dt} is not a real floating-point data type")
    return np.finfo(dt)


def iinfo(type, /):  # noqa: A002
    dt = dtype_of(type)
    if dt.kind not in "iu":
        raise ValueError(f"iinfo: {dt} is not an integer data type")
    return np.iinfo(dt)
