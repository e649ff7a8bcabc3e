"""The tape itself: rollover into linked tapes, sealing, freeing, and what a sweep needs."""
import gc
import weakref

import numpy as np
import pytest

import tape
from tape.core import record as _record, tape as _tape, tensor_ops as _tensor_ops


def lorenz(p, steps=200):
    sigma, rho, beta = p[0], p[1], p[2]
    x = y = z = 1.0
    dt = 0.001
    for _ in range(steps):
        dx = sigma * (y - x)
        dy = x * (rho - z) - y
        dz = x * y - beta * z
        x = x + dt * dx
        y = y + dt * dy
        z = z + dt * dz
    return x * x + y * y + z * z


@pytest.fixture
def small_tapes(monkeypatch):
    """Tapes roll over every 37 rows, so one computation spans dozens of linked tapes."""
    for mod in (_tape, _record, _tensor_ops):
        monkeypatch.setattr(mod, "MAX_ROWS", 37)


P0 = np.array([10.0, 28.0, 8.0 / 3.0])


def test_rollover_into_linked_tapes_gives_the_same_gradient(small_tapes):
    v_small, g_small = tape.value_and_grad(lorenz)(P0)
    for mod in (_tape, _record, _tensor_ops):
        mod.MAX_ROWS = 1 << 20
    v, g = tape.value_and_grad(lorenz)(P0)
    assert v_small == v
    np.testing.assert_allclose(g_small, g, rtol=1e-13)


def test_rollover_with_arrays_and_escapes(small_tapes):
    rng = np.random.default_rng(1)
    A = rng.normal(size=(40, 40)) + 40 * np.eye(40)

    def f(x):
        h = x
        for _ in range(30):
            h = np.tanh(A @ h / 40.0) + 0.5 * h[::-1]
        return np.sum(h * h) + np.linalg.det(A / 40.0 + np.outer(h, h) * 1e-3)

    x0 = rng.normal(size=40)
    tape.gradcheck(f, x0, atol=1e-6, rtol=1e-5)


def test_backward_seals_the_tape_and_later_ops_start_a_new_one():
    x = tape.tensor(np.arange(3.0), requires_grad=True)
    y = x * 2.0
    first = y._tape
    y.sum().backward(retain_graph=True)
    assert first.sealed
    z = y * 3.0
    assert z._tape is not first
    z.sum().backward()
    np.testing.assert_array_equal(x.grad, [8.0, 8.0, 8.0])


def test_tape_is_freed_when_its_tensors_die():
    x = tape.tensor(np.arange(3.0), requires_grad=True)
    y = (x * x).sum()
    ref = weakref.ref(y._tape)
    y.backward()
    del y
    gc.collect()
    assert ref() is None


def test_values_are_released_after_a_backward_without_retain_graph():
    x = tape.tensor(np.arange(3.0), requires_grad=True)
    y = (np.exp(x) * x).sum()
    t = y._tape
    y.backward()
    assert t.released and t.av is None


def test_need_mask_skips_frozen_operands():
    """A matmul whose weight does not require grad computes only the input's adjoint."""
    W = tape.tensor(np.ones((3, 3)))  # frozen
    x = tape.tensor(np.arange(3.0), requires_grad=True)
    y = (W @ x).sum()
    t = y._tape
    A = t.build()
    n = len(A.sv)
    src = np.zeros(n, np.uint8)
    root = np.zeros(n, np.uint8)
    for slot in t.leaves:
        src[slot] = 1
    root[y._slot] = 1
    live = np.zeros(n, np.uint8)
    need = np.zeros(n, np.uint8)
    import jit

    jit.need_pass(A.R, src, root, live, need)
    mm = [i for i in range(n) if jit.TABLE[A.code[i]].name == "matmul"]
    assert len(mm) == 1
    (i,) = mm
    w_is_a = A.R[i, 1] not in t.leaves
    assert need[i] == (2 if w_is_a else 1)
