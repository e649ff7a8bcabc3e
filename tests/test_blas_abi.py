"""The native BLAS path (tape/parallel/gemm.py) calls cblas_dgemm by address only in the library NumPy
mapped, once ctypes calls have shown its interface is the ILP64 one jit._spin calls; a wrong
library, a 32-bit-integer build, several candidates or none: no native call, NumPy's matmul
gives the same values."""
import ctypes
import os

import numpy as np
import pytest

import tape
from tape.parallel import gemm as _gemm, threads as _threads


def _mapped(prefix):
    """Paths of mapped libraries whose file name starts with `prefix`."""
    with open("/proc/self/maps") as fh:
        paths = {line.split(maxsplit=5)[5] for line in fh.read().splitlines()
                 if len(line.split(maxsplit=5)) == 6}
    return sorted(p for p in paths if os.path.basename(p).startswith(prefix))


def _lp64_openblas():
    """SciPy's own OpenBLAS: a real 32-bit-integer build (scipy_cblas_dgemm, no 64_)."""
    pytest.importorskip("scipy.linalg")
    paths = _mapped("libscipy_openblas-")
    if not paths:
        pytest.skip("SciPy's LP64 OpenBLAS is not loaded")
    return paths[0]


LP64_SYMBOLS = ("scipy_openblas_get_config", "scipy_cblas_ddot", "scipy_cblas_dgemm")

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="no /proc")


@pytest.fixture
def fresh(monkeypatch):
    """dgemm_address() looked up again (and layouts checked again) in this test."""
    monkeypatch.setattr(_gemm, "_ADDRESS", [])
    monkeypatch.setattr(_gemm, "_CHECKED", {})


def test_the_library_numpy_mapped_is_verified_and_used():
    if not _gemm.dgemm_address():
        pytest.skip("NumPy's BLAS is not an ILP64 scipy-openblas")
    (path,) = _gemm.mapped_blas()
    assert os.path.basename(path).startswith(_gemm.LIBRARY_PREFIX)
    lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    assert _gemm.dgemm_address() == ctypes.cast(lib.scipy_cblas_dgemm64_, ctypes.c_void_p).value


def test_a_32_bit_integer_build_is_refused_before_any_native_call(monkeypatch):
    """Reproducer: the library was trusted by its symbol name and checked by calling it by
    address (a mismatched build would crash). A real LP64 OpenBLAS under the names looked
    up: refused by its build string, and by the ddot sentinel call alone too."""
    path = _lp64_openblas()
    lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    assert not _gemm.config_is_ilp64(lib.scipy_openblas_get_config)
    assert not _gemm.ddot_is_ilp64(lib.scipy_cblas_ddot)
    assert _gemm.verified_dgemm(path, LP64_SYMBOLS) == 0
    monkeypatch.setattr(_gemm, "config_is_ilp64", lambda config: True)  # a lying build string
    assert _gemm.verified_dgemm(path, LP64_SYMBOLS) == 0


def _found(kind):
    libm = _mapped("libm.so") or _mapped("libm-")
    return {
        "none": [],
        "not loaded": ["/nonexistent/numpy.libs/libscipy_openblas64_-0.so"],
        "libm": libm[:1],
        "two copies": ["/a/libscipy_openblas64_-1.so", "/b/libscipy_openblas64_-2.so"],
        "lp64": [_lp64_openblas()] if kind == "lp64" else [],
    }[kind]


@pytest.mark.parametrize("kind", ["none", "not loaded", "libm", "two copies", "lp64"])
def test_unsure_means_no_native_calls_and_matmuls_values(monkeypatch, fresh, kind):
    paths = _found(kind)
    if kind == "libm" and not paths:
        pytest.skip("libm is not mapped")
    monkeypatch.setattr(_gemm, "mapped_blas", lambda: paths)
    if kind == "lp64":  # the LP64 library under the ILP64 names' places
        monkeypatch.setattr(_gemm, "SYMBOLS", LP64_SYMBOLS)
    assert _gemm.dgemm_address() == 0
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(6, 300, 8)), rng.normal(size=(6, 8, 8))
    out = np.empty((6, 300, 8))
    assert _gemm.gemm_task(a, b, out) is None
    assert _gemm.native_pieces(a, b, out, [(0, 3), (3, 6)]) is None
    # a compiled replay that splits its large batched matmuls among threads: no native piece
    crew = _threads.crew(1)
    before = crew.native_runs
    A = rng.normal(size=(4, 600, 32))
    B = rng.normal(size=(4, 32, 32))
    f = lambda A, B: np.sum(np.tanh(A @ B) * (A @ B))  # noqa: E731
    cf = tape.compile(f, A, B, argnums=(0, 1), threads=2)
    value, grads = cf.value_and_grad(A, B)
    want_value, want_grads = tape.value_and_grad(f, argnums=(0, 1))(A, B)
    assert value == pytest.approx(want_value, rel=1e-13)
    for g, w in zip(grads, want_grads):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    assert crew.native_runs == before
