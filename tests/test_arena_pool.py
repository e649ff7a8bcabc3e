"""The spare adjoint arena (``tape.reverse.arena_pool``): a large arena's memory is reused by the
next backward of the thread only when nothing can still read it, and gradients are the same
with the spare as without, on both backward paths (the lean one and the general one)."""
import threading

import numpy as np
import pytest

import tape
from tape.reverse import arena_pool, backward

N = arena_pool.MIN_CELLS  # a vector this long makes every arena large enough to keep


@pytest.fixture(autouse=True)
def fresh_pool():
    if arena_pool._ALONE is None:
        pytest.skip("this interpreter's reference counts do not show an array's views: no "
                    "arena is kept (arena_pool._counts_of_sole_references)")
    arena_pool._spare.buf = None
    yield
    arena_pool._spare.buf = None


def lean(x):  # no escapes or hooks: backward._sweep_whole takes its tape
    return np.sum(np.sin(x) * x + np.exp(-x * x))


def general(x):  # an escape row (a matmul's product rule): the general path
    m = x[:64].reshape(8, 8)
    return np.sum(np.tanh(x)) + np.sum(m @ m)


def expected(f, x):
    """The gradient with the pool off (every arena new)."""
    saved = arena_pool.MIN_CELLS
    arena_pool.MIN_CELLS = 1 << 62
    try:
        return tape.grad(f)(x)
    finally:
        arena_pool.MIN_CELLS = saved


@pytest.mark.parametrize("f", [lean, general])
def test_reused_arena_gives_the_same_gradient(f):
    x = np.linspace(-2.0, 2.0, N)
    want = expected(f, x)
    g1 = tape.grad(f)(x)
    held = arena_pool._spare.buf
    assert held is not None and held.size >= N  # kept after the backward
    held[:] = np.nan  # what a previous backward left: the next one must zero it
    g2 = tape.grad(f)(x)
    np.testing.assert_array_equal(g1, want)
    np.testing.assert_array_equal(g2, want)
    assert arena_pool._spare.buf is held  # the same memory, reused


def test_small_arenas_are_not_kept():
    tape.grad(lean)(np.linspace(-1.0, 1.0, 16))
    assert arena_pool._spare.buf is None


def test_an_adjoint_handed_out_as_a_view_is_never_overwritten():
    # one large leaf and a cheap function: its adjoint is most of the arena, so the general path
    # hands out a view of the arena (backward.adjoint); the arena must not be reused meanwhile
    x = tape.tensor(np.linspace(-1.0, 1.0, N), requires_grad=True)
    m = tape.tensor(np.eye(2), requires_grad=True)
    (np.sum(x * 3.0) + np.sum(np.linalg.inv(m))).backward()  # (inv: an escape, general path)
    first = x.grad
    keep = first.copy()
    y = tape.tensor(np.linspace(-1.0, 1.0, N), requires_grad=True)
    m2 = tape.tensor(np.eye(2), requires_grad=True)
    (np.sum(y * 5.0) + np.sum(np.linalg.inv(m2))).backward()
    np.testing.assert_array_equal(first, keep)
    np.testing.assert_array_equal(y.grad, np.full(N, 5.0))


def test_recycle_refuses_an_arena_still_referenced():
    G = arena_pool.zeroed(N)
    view = G[10:20]
    arena_pool.recycle(G)
    assert arena_pool._spare.buf is None  # a view of it exists
    del view
    other = G
    arena_pool.recycle(G)
    assert arena_pool._spare.buf is None  # a second name for it exists
    del other
    arena_pool.recycle(G)
    assert arena_pool._spare.buf is G


def test_recycle_of_a_view_keeps_its_owner_only_when_unshared():
    arena_pool._spare.buf = np.zeros(2 * N)
    G = arena_pool.zeroed(N)
    assert arena_pool._spare.buf is None  # taken while in use
    owner = G.base
    arena_pool.recycle(G)
    assert arena_pool._spare.buf is None  # the name `owner` still reads it
    del owner
    arena_pool.recycle(G)
    assert arena_pool._spare.buf is not None and arena_pool._spare.buf.size == 2 * N


def test_the_calibration_tells_views_apart():
    alone = arena_pool._ALONE
    assert alone is not None and alone[0] >= 2 and alone[1] >= 2


def test_huge_arenas_are_not_kept():
    arena_pool.recycle(np.zeros(arena_pool.MAX_CELLS + 1))
    assert arena_pool._spare.buf is None


def test_each_thread_has_its_own_spare():
    x = np.linspace(-2.0, 2.0, N)
    want = expected(lean, x)
    tape.grad(lean)(x)
    mine = arena_pool._spare.buf
    out = {}

    def run():
        out["spare before"] = arena_pool._spare.buf
        out["g"] = tape.grad(lean)(x)
        out["spare after"] = arena_pool._spare.buf

    th = threading.Thread(target=run)
    th.start()
    th.join()
    assert out["spare before"] is None
    assert out["spare after"] is not None and out["spare after"] is not mine
    np.testing.assert_array_equal(out["g"], want)
    assert arena_pool._spare.buf is mine


def test_a_backward_inside_a_hook_gets_its_own_arena():
    # the outer backward holds the spare while a hook runs another backward on the same thread
    x = np.linspace(-2.0, 2.0, N)
    want_inner = expected(lean, x)
    seen = {}

    def hook(g):
        seen["inner"] = tape.grad(lean)(x)
        return g

    a = tape.tensor(x, requires_grad=True)
    y = np.sin(a) * 2.0
    y.register_hook(hook)
    tape.grad(lean)(x)  # leaves a spare for the outer backward to take
    np.sum(y * y).backward()
    np.testing.assert_array_equal(seen["inner"], want_inner)
    np.testing.assert_allclose(a.grad, 8.0 * np.sin(x) * np.cos(x), rtol=1e-12)
