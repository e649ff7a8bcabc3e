"""Native BLAS pieces (tape/parallel/gemm.py, jit/_spin.py): the cblas_dgemm calls np.matmul makes,
described as integers and made by a crew worker without the GIL, give np.matmul's bits; layouts
whose calls NumPy chooses otherwise are not described, and a split matmul still gets every
piece made once."""
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tape
from jit._spin import gemm_batch
from tape.parallel import gemm as _gemm, threads as _threads

pytestmark = pytest.mark.skipif(not _gemm.dgemm_address(),
                                reason="NumPy's BLAS is not an ILP64 scipy-openblas")


def _native(a, b):
    out = np.full(a.shape[:2] + b.shape[2:], np.nan)
    task = _gemm.gemm_task(a, b, out)
    assert task is not None
    gemm_batch(task)
    return out


def _layouts(rng):
    """(name, a, b) of 3-D operands in the layouts whose calls are described."""
    a = rng.normal(size=(3, 7, 5))
    b = rng.normal(size=(3, 5, 4))
    wide = rng.normal(size=(3, 7, 9))[:, :, 2:7]  # rows padded: leading dimension 9
    bt = np.swapaxes(rng.normal(size=(3, 4, 5)), 1, 2)  # column-major matrices
    at = np.swapaxes(rng.normal(size=(3, 5, 7)), 1, 2)
    every_other = rng.normal(size=(6, 7, 5))[::2]  # batch stride of two matrices
    return [("row-major", a, b), ("padded rows", wide, b), ("b transposed", a, bt),
            ("a transposed", at, b), ("both transposed", at, bt), ("batch stride", every_other, b),
            ("W2's forward", rng.normal(size=(4, 1000, 10)), rng.normal(size=(4, 10, 10))),
            ("W2's a^T g", np.swapaxes(rng.normal(size=(4, 1000, 10)), 1, 2),
             rng.normal(size=(4, 1000, 10)))]


@pytest.mark.parametrize("k", range(8))
def test_native_calls_give_matmuls_bits(k):
    name, a, b = _layouts(np.random.default_rng(k))[k]
    np.testing.assert_array_equal(_native(a, b), np.matmul(a, b), err_msg=name)
    task = _gemm.gemm_task(a, b, np.empty(a.shape[:2] + b.shape[2:]))
    assert _gemm.checked(task, a, b)


@st.composite
def _operand(draw, batch, rows, cols):
    """A 3-D float64 view (batch, rows, cols): row- or column-major matrices, maybe padded,
    maybe every other batch element, maybe an inner stride that is not one."""
    pad = draw(st.integers(0, 3))
    transposed = draw(st.booleans())
    skip = draw(st.sampled_from([1, 2]))
    inner = draw(st.sampled_from([1, 1, 1, 2]))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    if transposed:
        base = rng.normal(size=(batch * skip, cols, (rows + pad) * inner))
        x = np.swapaxes(base[::skip, :, : rows * inner : inner], 1, 2)
    else:
        base = rng.normal(size=(batch * skip, rows, (cols + pad) * inner))
        x = base[::skip, :, : cols * inner : inner]
    return x


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_described_layout_gives_matmuls_bits(data):
    """Whatever layout gemm_task describes, its calls give np.matmul's bits."""
    batch, m, k, n = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 9)),
                      data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9)))
    a = data.draw(_operand(batch, m, k))
    b = data.draw(_operand(batch, k, n))
    out = np.full((batch, m, n), np.nan)
    task = _gemm.gemm_task(a, b, out)
    if task is None:
        return
    gemm_batch(task)
    np.testing.assert_array_equal(out, np.matmul(a, b))


def test_layouts_numpy_calls_otherwise_are_not_described():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(3, 6, 5)), rng.normal(size=(3, 5, 4))

    def task(a, b, out=None):
        out = np.empty(a.shape[:2] + b.shape[2:]) if out is None else out
        return _gemm.gemm_task(a, b, out)

    assert task(a, b) is not None
    assert task(a[:, :1], b) is None  # one row: NumPy calls gemv
    assert task(a, b[:, :, :1]) is None  # one column: gemv
    assert task(a[:, :, :1], b[:, :1]) is None  # inner size one
    s = rng.normal(size=(3, 6, 6))
    assert task(s, np.swapaxes(s, 1, 2)) is None  # a @ a^T: NumPy calls syrk
    assert task(rng.normal(size=(3, 6, 10))[:, :, ::2], b) is None  # no unit stride
    assert task(a, b, np.empty((3, 4, 6)).swapaxes(1, 2)) is None  # out not row-major
    assert task(a.astype(np.float32), b) is None
    assert _gemm.gemm_task(a[0], b[0], np.empty((6, 4))) is None  # 2-D: no batch


def test_split_matmul_runs_native_pieces_with_the_same_bits():
    """run_pieces with native pieces: the caller's piece in Python, the others made by the
    crew's workers in their wait loop (while they spin: fewer pieces than cores)."""
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(6, 300, 8)), rng.normal(size=(6, 8, 8))
    out = np.full((6, 300, 8), np.nan)
    pieces = [(0, 3), (3, 6)]
    native = _gemm.native_pieces(a, b, out, pieces)
    assert native[0] is None and len(native) == 2
    crew = _threads.crew(1)
    before = crew.native_runs
    for r in range(20):
        if r % 4 == 3:
            time.sleep(0.01)  # the worker goes to sleep: woken for a native piece
        out[...] = np.nan
        _threads.run_pieces(lambda lo, hi: np.matmul(a[lo:hi], b[lo:hi], out=out[lo:hi]),
                            pieces, native)
        np.testing.assert_array_equal(out, np.matmul(a, b))
    if _threads.cores() > 1:
        assert crew.native_runs == before + 20


def test_cached_pieces_follow_their_buffers():
    rng = np.random.default_rng(3)
    a, b, out = rng.normal(size=(4, 9, 3)), rng.normal(size=(4, 3, 3)), np.empty((4, 9, 3))
    cache, made = {}, []

    def get(a, out, offset):
        return _gemm.cached_native_pieces(cache, "row", (a, out, offset), lambda: made.append(1))

    get(a, out, 0)
    get(a, out, 0)
    assert len(made) == 1  # the same buffers: made once
    get(a.copy(), out, 0)
    get(a, out, 8)
    assert len(made) == 3  # another buffer, another offset: made again


def gmm_like(mu, L, x):
    d = x[None, :, :] - mu[:, None, :]
    z = d @ np.swapaxes(L, -1, -2)
    return np.sum(np.sum(z * z, axis=2)) + np.sum(L * L)


def test_compiled_split_matmul_uses_native_pieces(monkeypatch):
    """W2's shape of work with two threads: the forward product and the reverse rule's a^T g
    hand their second pieces to the crew as native pieces; the bits are one thread's."""
    from tape.reverse import backward as _backward

    monkeypatch.setattr(_backward, "THREAD_FLOPS", 1000)
    rng = np.random.default_rng(4)
    mu, L, x = rng.normal(size=(4, 6)), rng.normal(size=(4, 6, 6)), rng.normal(size=(200, 6))
    one = tape.compile(gmm_like, mu, L, x, argnums=(0, 1), threads=1)
    two = tape.compile(gmm_like, mu, L, x, argnums=(0, 1), threads=2)
    crew = _threads.crew(1)
    for args in ((mu, L, x), (0.5 * mu, -L, x), (mu, L, x[::-1].copy())):
        before = crew.native_runs
        v1, g1 = one.value_and_grad(*args)
        v2, g2 = two.value_and_grad(*args)
        assert v1 == v2
        for p, q in zip(g1, g2):
            np.testing.assert_array_equal(p, q)
        if _threads.cores() > 1:
            assert crew.native_runs == before + 2  # the forward product and a^T g


class _FailedChecks(dict):
    def get(self, key, default=None):
        return False  # as if every layout's check had failed


def test_a_layout_that_fails_its_check_stays_a_python_piece(monkeypatch):
    """Where the native calls of a layout did not give np.matmul's bits (another NumPy's
    choices), every piece is made in Python: the same results, no native piece."""
    from tape.reverse import backward as _backward

    monkeypatch.setattr(_backward, "THREAD_FLOPS", 1000)
    monkeypatch.setattr(_gemm, "_CHECKED", _FailedChecks())
    rng = np.random.default_rng(5)
    mu, L, x = rng.normal(size=(4, 6)), rng.normal(size=(4, 6, 6)), rng.normal(size=(200, 6))
    one = tape.compile(gmm_like, mu, L, x, argnums=(0, 1), threads=1)
    two = tape.compile(gmm_like, mu, L, x, argnums=(0, 1), threads=2)
    crew = _threads.crew(1)
    before = crew.native_runs
    for _ in range(2):  # (without the failed checks, each call makes two native pieces)
        v1, g1 = one.value_and_grad(mu, L, x)
        v2, g2 = two.value_and_grad(mu, L, x)
        assert v1 == v2
        for p, q in zip(g1, g2):
            np.testing.assert_array_equal(p, q)
    assert crew.native_runs == before
