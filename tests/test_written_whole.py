"""Adjoint blocks one row writes whole (``tape.reverse.written_whole``): the eager backward's
arena leaves them unzeroed, so a block the marks get wrong would carry the last backward's
values. Each case runs with the thread's spare arena filled with NaN (what any earlier backward
may leave) and must give, bit for bit, the gradient of the same backward with nothing marked
(every block zeroed, every rule accumulating), which the rest of the suite checks against
finite differences; the cases also check that the marks they are about are made."""
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tape
from tape.reverse import arena_pool, backward, written_whole as ww

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "asv_bench", "benchmarks"))
from workloads import WORKLOADS  # noqa: E402

N = ww.MIN_CELLS  # elements: the smallest block left out of the zeroing


@pytest.fixture(autouse=True)
def nan_arenas(monkeypatch):
    """Every arena of these tests comes from a spare the test fills with NaN (arena_pool keeps
    only large ones otherwise)."""
    monkeypatch.setattr(arena_pool, "MIN_CELLS", 1)
    arena_pool._spare.buf = None
    yield
    arena_pool._spare.buf = None


class Marks:
    """Records what ``written_whole`` returns (escape bits, unzeroed slots) and the rows it
    sets FRESH bits on, per backward; ``off`` makes it mark nothing (the reference)."""

    def __init__(self, monkeypatch, off=False):
        self.calls = []
        real = ww.written_whole

        def spy(t, A, need, count, summed, seeded):
            if off:
                return None, []
            before = need.copy()
            fresh, blocks = real(t, A, need, count, summed, seeded)
            fresh_rows = np.flatnonzero((need & ~before) != 0).tolist()
            self.calls.append((dict(fresh or {}), list(blocks), fresh_rows))
            return fresh, blocks

        monkeypatch.setattr(backward, "written_whole", spy)


def nan_spare(cells=1 << 23):
    """A spare arena full of NaN, as a previous backward may leave it; returns it."""
    buf = np.full(cells, np.nan)
    arena_pool._spare.buf = buf
    return buf


def run_both(monkeypatch, fn):
    """(gradient with nothing marked, gradient with the marks over a NaN spare, marks)."""
    with monkeypatch.context() as m:
        Marks(m, off=True)
        want = fn()
    marks = Marks(monkeypatch)
    buf = nan_spare()
    got = fn()
    assert not np.isnan(buf).all()  # (the spare was the arena: zeroed in part)
    return want, got, marks.calls


def assert_same(want, got):
    for w, g in zip(want if isinstance(want, tuple) else (want,),
                    got if isinstance(got, tuple) else (got,)):
        assert np.all(np.isfinite(g))
        np.testing.assert_array_equal(g, w)


def test_gmm_square_block_and_product_rule(monkeypatch):
    # W2: Qx * Qx writes Qx's adjoint (an escape's own), the product rule writes Q^T's
    w = WORKLOADS["gmm"]
    args = w.inputs()
    want, got, calls = run_both(monkeypatch, lambda: tape.grad(w.loss, argnums=w.argnums)(*args))
    assert_same(want, got)
    (fresh, blocks, fresh_rows), = calls
    assert fresh and blocks and fresh_rows


def test_weight_adjoint_written_by_the_product_rule(monkeypatch):
    # W4's shape: the weight's adjoint (a leaf, the product its one taker) written by BLAS
    rng = np.random.default_rng(1)
    X = rng.normal(size=(64, 96))
    W1 = rng.normal(size=(96, 80)) / 10
    W2 = rng.normal(size=(80, 8)) / 10

    def loss(W1, W2):
        return np.sum(np.tanh(X @ W1) @ W2)

    want, got, calls = run_both(monkeypatch, lambda: tape.grad(loss, argnums=(0, 1))(W1, W2))
    assert_same(want, got)
    (fresh, blocks, _), = calls
    assert len(fresh) == 2  # (both products: their b operands are leaves only they take)


def test_product_operand_with_another_taker(monkeypatch):
    # the weight is read by the product and by a penalty: the rule adds to a zeroed block
    rng = np.random.default_rng(3)
    X = rng.normal(size=(64, 96))
    W = rng.normal(size=(96, 80)) / 10

    def loss(W):
        return np.sum(np.tanh(X @ W)) + 0.5 * np.sum(W * W)

    want, got, calls = run_both(monkeypatch, lambda: tape.grad(loss)(W))
    assert_same(want, got)
    (fresh, blocks, fresh_rows), = calls
    assert not fresh and fresh_rows  # (the product's block, tanh's operand, is written whole)


def test_two_takers_are_zeroed(monkeypatch):
    # u is read by two rows: its block must be zeroed, and neither row marked for it
    x = np.linspace(-1.0, 1.0, N)

    def loss(x):
        u = x * 2.0
        m = np.eye(2) + x[:4].reshape(2, 2)
        return np.sum(u * u) + np.sum(np.sin(u)) + np.sum(np.linalg.inv(m))

    want, got, calls = run_both(monkeypatch, lambda: tape.grad(loss)(x))
    assert_same(want, got)
    assert calls  # (the general path: an escape)


def test_seeded_block_is_not_written_over(monkeypatch):
    # u is a root (seeded) and the operand of a row that alone takes it: the seed stays
    def both():
        x = tape.tensor(np.linspace(-1.0, 1.0, N), requires_grad=True)
        u = np.exp(x)
        v = np.sin(u)
        tape.autograd.backward([u, v], [np.full(N, 0.5), np.ones(N)], retain_graph=True)
        return x.grad

    want, got, calls = run_both(monkeypatch, both)
    assert_same(want, got)
    np.testing.assert_allclose(got, np.exp(np.linspace(-1.0, 1.0, N))
                               * (0.5 + np.cos(np.exp(np.linspace(-1.0, 1.0, N)))), rtol=1e-13)


def test_hooked_block_written_whole(monkeypatch):
    # the hook sees the block its one taker wrote, and replaces it
    def both():
        x = tape.tensor(np.linspace(-1.0, 1.0, N), requires_grad=True)
        u = x * 3.0
        u.register_hook(lambda g: g * 2.0)
        np.sum(np.tanh(u)).backward()
        return x.grad

    want, got, calls = run_both(monkeypatch, both)
    assert_same(want, got)
    assert calls and calls[0][2]  # (rows marked: the hook does not stop them)


def test_concatenate_gather_and_broadcast_operands(monkeypatch):
    # a transpose (gather) and a concatenate (scatters) alone take their operands; a broadcast
    # operand (smaller than the row) is never marked
    rng = np.random.default_rng(2)
    a = rng.normal(size=(64, 64))
    b = rng.normal(size=(64, 32))
    c = rng.normal(size=64)

    def loss(a, b, c):
        z = np.concatenate([np.transpose(np.exp(a)), b], axis=1)  # (64, 96)
        return np.sum(np.cos(z * c[:, None])) + np.sum(np.linalg.inv(np.eye(2) + a[:2, :2]))

    want, got, calls = run_both(monkeypatch, lambda: tape.grad(loss, argnums=(0, 1, 2))(a, b, c))
    assert_same(want, got)


@settings(max_examples=25, deadline=None)
@given(n=st.sampled_from([N - 1, N, N + 7, 3 * N]), k=st.integers(1, 3),
       broadcast=st.booleans(), last=st.sampled_from(["square", "twice", "exp", "cumsum"]))
def test_chains_of_rows(n, k, broadcast, last):
    # chains of unary and binary rows around the size threshold, with and without a broadcast
    # operand, ending in x * x, x + x, exp or cumsum; the general path by retain_graph
    rng = np.random.default_rng(n + k)
    x0 = rng.normal(size=n)
    s0 = rng.normal(size=(1,)) if broadcast else rng.normal(size=n)

    def grads(mark):
        saved = backward.written_whole
        if not mark:
            backward.written_whole = lambda *args: (None, [])
        try:
            x = tape.tensor(x0, requires_grad=True)
            s = tape.tensor(s0, requires_grad=True)
            u = x
            for _ in range(k):
                u = np.sin(u) * s
            u = {"square": lambda u: u * u, "twice": lambda u: u + u, "exp": np.exp,
                 "cumsum": np.cumsum}[last](u)
            np.sum(u).backward(retain_graph=True)
            return x.grad, s.grad
        finally:
            backward.written_whole = saved

    want = grads(False)
    nan_spare()
    got = grads(True)
    assert_same(want, got)


def test_small_tapes_are_left_as_they_are(monkeypatch):
    # no block worth leaving out: no marks, no Python spent on them
    marks = Marks(monkeypatch)
    x = np.linspace(-1.0, 1.0, N - 1)
    m = np.eye(2)
    g = tape.grad(lambda x: np.sum(np.tanh(x * 2.0))
                  + np.sum(np.linalg.inv(m + x[:4].reshape(2, 2))))(x)
    assert np.all(np.isfinite(g))
    assert marks.calls == [({}, [], [])]


def test_arena_zeroes_around_holes():
    nan_spare(4 * N)
    G = arena_pool.zeroed(3 * N, [(10, 20), (N, 2 * N)])
    assert np.isnan(G[10:20]).all() and np.isnan(G[N:2 * N]).all()
    rest = np.concatenate([G[:10], G[20:N], G[2 * N:]])
    assert not rest.any()
