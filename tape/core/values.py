"""Canonical values: what a recorded value or constant is (a float for 0-d, else a C-contiguous
float64 array), and the errors for what cannot be one."""
from __future__ import annotations

import numpy as np

from .value_pool import MIN_CELLS, take

_F64 = np.dtype(np.float64)


def check_dtype(y, what):
    """Turn a NumPy result into a canonical value: a float for 0-d, else a float64 array."""
    if type(y) is np.ndarray:
        if y.dtype != np.float64:
            if y.dtype.kind in "biu":
                y = y.astype(np.float64)
            else:
                raise TypeError(f"{what}: tapejit differentiates float64 values; got dtype {y.dtype}"
                                " (complex and object arrays are not supported)")
        if y.ndim == 0:
            return float(y)
        if not y.flags.c_contiguous:
            y = np.ascontiguousarray(y)
        return y
    if type(y) is float:
        return y
    if isinstance(y, (np.floating, np.integer, np.bool_, int, bool)):
        return float(y)
    if isinstance(y, (complex, np.complexfloating)):
        raise TypeError(f"{what}: complex values are not supported")
    return check_dtype(np.asarray(y), what)


def refuse_masked(x, what):
    """Tensors have no mask: a NumPy masked array meeting one would lose it without a word."""
    if isinstance(x, np.ma.MaskedArray):
        raise masked_error(what)


def masked_error(what):
    return TypeError(
        f"{what}: a NumPy masked array (np.ma) in an op with a tensor would lose its mask "
        "(tensors have none). Write the mask out: m.filled(fill) for the values, and a 0/1 "
        "weight array w = ~np.ma.getmaskarray(m) where masked elements must not count, "
        "e.g. np.sum(w * x) / np.sum(w) for a masked mean.")


def constant(x, what="constant"):
    """Canonical copy of a constant operand (Python scalar, NumPy array, nested list)."""
    if type(x) is float:
        return x
    if type(x) is np.ndarray and x.dtype is _F64 and 0 < x.size < MIN_CELLS and x.ndim:
        return x.copy()  # (small NumPy data in array code; C order)
    if isinstance(x, (int, np.integer, np.floating, np.bool_)):
        return float(x)
    if isinstance(x, np.ndarray):
        if type(x) is not np.ndarray:
            refuse_masked(x, what)
        if x.dtype.kind not in "biuf":
            raise TypeError(f"{what}: unsupported dtype {x.dtype}; tapejit works in float64 "
                            "(complex and object arrays are not supported)")
        if x.ndim == 0:
            return float(x)
        if x.size < MIN_CELLS or type(x) is not np.ndarray:
            return np.array(x, dtype=np.float64, order="C", copy=True)
        y = take(x.shape, x.size)  # (a large copy: into kept memory, as recorded results)
        np.copyto(y, x, casting="unsafe")
        return y
    if isinstance(x, (complex, np.complexfloating)):
        raise TypeError(f"{what}: complex values are not supported")
    return constant(np.asarray(x), what)
