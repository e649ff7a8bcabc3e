"""A batched matmul's share as native BLAS calls, made by a crew worker without the GIL.

NumPy's matmul makes one ``cblas_dgemm`` call per batch element, with its own choice of the
transposes and leading dimensions from the operands' strides. ``gemm_task`` describes the same
calls as plain integers, with the function as an address in the BLAS NumPy loaded (its ILP64
OpenBLAS, ``scipy_cblas_dgemm64_``), for ``jit._spin.serve`` to run: the same function with the
same arguments, so the same bits. The library is the one mapped into this process under NumPy's
name for it (never one found on disk), and its interface is checked through ctypes before any
native call by address: its own build string, 64-bit integers seen by a call that tells them from
32-bit ones, and a small product into a buffer of sentinels. Any doubt: no native calls (NumPy's
matmul does all the work). Only the layouts whose choice is plain are described (every
size at least 2, each operand's matrices row-major or column-major with unit stride, operands
that do not overlap: NumPy makes other calls for vectors, and syrk for a @ a.T), and each layout
is checked once against np.matmul itself; anything else stays a Python piece.
"""
from __future__ import annotations

import ctypes
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


# NumPy's ILP64 OpenBLAS: its file name (auditwheel adds a hash) and the symbols used here
LIBRARY_PREFIX = "libscipy_openblas64_"
SYMBOLS = ("scipy_openblas_get_config64_", "scipy_cblas_ddot64_", "scipy_cblas_dgemm64_")


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
    paths = mapped_blas()
    if len(paths) != 1:  # none, or several copies: not sure which one NumPy calls
        return 0
    return verified_dgemm(paths[0], SYMBOLS)


def mapped_blas():
    """Paths of NumPy's OpenBLAS as mapped into this process (/proc/self/maps): the copy NumPy
    loaded, under NumPy's own directory; empty where that cannot be read."""
    home = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
    try:
        with open("/proc/self/maps") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    paths = set()
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and os.path.basename(fields[5]).startswith(LIBRARY_PREFIX) \
                and os.path.dirname(fields[5]).startswith(home):
            paths.add(fields[5])
    return sorted(paths)


def verified_dgemm(path, symbols=SYMBOLS):
    """The address of cblas_dgemm in the library at `path`, already loaded (never loaded
    here), once ctypes calls have shown it to be the interface jit._spin calls (ILP64:
    64-bit sizes, 32-bit enums); else 0."""
    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        config, ddot, dgemm = (getattr(lib, name) for name in symbols)
    except (OSError, AttributeError):  # not loaded, or not the library expected
        return 0
    if not (config_is_ilp64(config) and ddot_is_ilp64(ddot) and dgemm_keeps_sentinels(dgemm)):
        return 0
    return ctypes.cast(dgemm, ctypes.c_void_p).value or 0


def config_is_ilp64(config):
    """The library's build string (openblas_get_config: no arguments, safe to call whatever
    the build) names the 64-bit integer interface."""
    config.restype, config.argtypes = ctypes.c_char_p, []
    return b"USE64BITINT" in (config() or b"")


def ddot_is_ilp64(ddot):
    """cblas_ddot with n = 3, then n = 3 - 2^32: a 64-bit build sees a negative n (dot 0), a
    32-bit one the low half, 3 again (dot 14); neither reads past the 3 elements."""
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    ddot.restype, ddot.argtypes = ctypes.c_double, [i64, ptr, i64, ptr, i64]
    x = np.array([1.0, 2.0, 3.0])
    p = x.ctypes.data
    return ddot(3, p, 1, p, 1) == 14.0 and ddot(3 - (1 << 32), p, 1, p, 1) == 0.0


def dgemm_keeps_sentinels(dgemm):
    """cblas_dgemm with jit._spin's argument types computes a 2x2 product into the middle of a
    buffer of sentinels and writes nothing else."""
    i32, i64, dbl, ptr = ctypes.c_int32, ctypes.c_int64, ctypes.c_double, ctypes.c_void_p
    dgemm.restype = None
    dgemm.argtypes = [i32, i32, i32, i64, i64, i64, dbl, ptr, i64, ptr, i64, dbl, ptr, i64]
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    b = np.array([[5.0, -6.0], [7.0, 8.0]])
    c = np.full(12, -7.5)
    dgemm(101, _NO_TRANS, _NO_TRANS, 2, 2, 2, 1.0, a.ctypes.data, 2, b.ctypes.data, 2, 0.0,
          c[4:].ctypes.data, 2)
    return bool(np.array_equal(c[4:8], (a @ b).ravel()) and np.all(c[:4] == -7.5)
                and np.all(c[8:] == -7.5))


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
