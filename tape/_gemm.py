"""A batched matmul's share as native BLAS calls, made by a crew worker without the GIL.

NumPy's matmul makes one ``cblas_dgemm`` call per batch element, with its own choice of the
transposes and leading dimensions from the operands' strides. ``gemm_task`` describes the same
calls as plain integers, with the function as an address in the BLAS NumPy loaded (its ILP64
OpenBLAS, ``scipy_cblas_dgemm64_``), for ``jit._spin.serve`` to run: the same function with the
same arguments, so the same bits. Only the layouts whose choice is plain are described (every
size at least 2, each operand's matrices row-major or column-major with unit stride, operands
that do not overlap: NumPy makes other calls for vectors, and syrk for a @ a.T), and each layout
is checked once against np.matmul itself; anything else stays a Python piece.
"""
from __future__ import annotations

import ctypes
import glob
import os

import numpy as np

_NO_TRANS, _TRANS = 111, 112  # CBLAS's (jit._spin.gemm_batch calls row-major, 101)
_ADDRESS = []  # [cblas_dgemm's address, or 0 where NumPy's BLAS is not one we can call]
_CHECKED = {}  # layout -> whether its native calls gave np.matmul's bits


def dgemm_address():
    """The address of cblas_dgemm in the BLAS NumPy loaded, or 0."""
    if not _ADDRESS:
        _ADDRESS.append(_find_dgemm())
    return _ADDRESS[0]


def _find_dgemm():
    from numba import config as numba_config

    if numba_config.DISABLE_JIT:  # (the native calls are jitted code)
        return 0
    try:
        config = np.show_config(mode="dicts")
    except (AttributeError, TypeError):  # (NumPy before 1.26 has no such mode)
        return 0
    blas = (config or {}).get("Build Dependencies", {}).get("blas", {})
    if blas.get("name") != "scipy-openblas" or "USE64BITINT" not in blas.get(
            "openblas configuration", ""):
        return 0
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "libscipy_openblas64_*"))):
        try:
            fn = ctypes.CDLL(path).scipy_cblas_dgemm64_
        except (OSError, AttributeError):
            continue
        return ctypes.cast(fn, ctypes.c_void_p).value or 0
    return 0


def _matrix_layout(x):
    """(transpose, leading dimension) of the matrices x[i] (3-D x) as NumPy hands them to
    cblas_dgemm, or None."""
    _, rows, cols = x.shape
    s0, s1 = x.strides[1:]
    if s1 == 8 and s0 % 8 == 0 and s0 // 8 >= cols:
        return _NO_TRANS, s0 // 8
    if s0 == 8 and s1 % 8 == 0 and s1 // 8 >= rows:
        return _TRANS, s1 // 8
    return None


def gemm_task(a, b, out):
    """The int64 fields (``jit._spin.GEMM_FIELDS``) of out[i] = a[i] @ b[i] for each i, as the
    cblas_dgemm calls np.matmul(a, b, out=out) makes, or None (see the module's docstring).
    a, b, out: 3-D float64 arrays with the same leading length."""
    fn = dgemm_address()
    if not fn or a.ndim != 3 or b.ndim != 3 or out.ndim != 3 or len(a) < 1:
        return None
    nb, m, k = a.shape
    n = b.shape[2]
    if (min(m, n, k) < 2 or b.shape[:2] != (nb, k) or out.shape != (nb, m, n)
            or out.strides[1:] != (8 * n, 8) or a.dtype != np.float64 or b.dtype != np.float64
            or out.dtype != np.float64 or np.may_share_memory(a, b)
            or any(x.ctypes.data % 8 or x.strides[0] % 8 for x in (a, b, out))):
        return None
    la, lb = _matrix_layout(a), _matrix_layout(b)
    if la is None or lb is None:
        return None
    return np.array([fn, a.ctypes.data, b.ctypes.data, out.ctypes.data, nb, m, n, k,
                     a.strides[0], b.strides[0], out.strides[0], la[0], lb[0], la[1], lb[1], n],
                    dtype=np.int64)


def checked(task, a, b):
    """Whether the native calls of `task`'s layout give np.matmul's bits: tried once per
    layout, on a's and b's first matrices."""
    key = tuple(int(v) for v in task[5:])  # (sizes, strides, transposes, leading dimensions)
    ok = _CHECKED.get(key)
    if ok is None:
        from jit._spin import gemm_batch

        ref = np.matmul(a[:1], b[:1])
        mine = np.full_like(ref, np.nan)
        one = task.copy()
        one[3], one[4] = mine.ctypes.data, 1
        gemm_batch(one)
        ok = _CHECKED[key] = bool(np.array_equal(mine, ref))
    return ok


def native_pieces(a, b, out, pieces):
    """For ``run_pieces``: per piece (lo, hi), the native fields of out[lo:hi] = a[lo:hi] @
    b[lo:hi], None for the first (the caller's own, in Python); or None, when NumPy's calls
    cannot be made natively."""
    task = gemm_task(a, b, out)
    if task is None or not checked(task, a, b):
        return None
    native = [None]
    for lo, hi in pieces[1:]:
        t = task.copy()
        t[1:4] += lo * np.array([a.strides[0], b.strides[0], out.strides[0]])
        t[4] = hi - lo
        native.append(t)
    return native


def cached_native_pieces(cache, key, arrays, make):
    """``cache[key]``'s native pieces when they were made for the same `arrays` (objects, ints,
    tuples: the buffers and offsets the calls write and read), else make() and keep them.
    Making them costs ~40 us (reading an array's address is slow); the buffers of a replay
    stay the same from call to call."""
    hit = cache.get(key)
    if hit is None or len(hit[0]) != len(arrays) or any(
            x is not y and (type(x) is np.ndarray or x != y) for x, y in zip(hit[0], arrays)):
        hit = cache[key] = (arrays, make())
    return hit[1]
