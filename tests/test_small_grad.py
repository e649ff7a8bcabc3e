"""The small-call fast paths: x[k] of a vector (a gather row without an index map) and the
backward's hook scope. Each must give what the general path gives, errors included."""
import numpy as np
import pytest

import tape
from tape.core import record
from _fd import fd_vjp


def f(p):
    x, y = p[0], p[1]
    return x * x + 3 * y - x * y + np.sin(x) * np.exp(y) - y * y


def f_np(p):
    x, y = p[0], p[1]
    return x * x + 3 * y - x * y + np.sin(x) * np.exp(y) - y * y


def f_hand(p):
    x, y = p
    return np.array([2 * x - y + np.cos(x) * np.exp(y), 3 - x + np.sin(x) * np.exp(y) - 2 * y])


@pytest.mark.parametrize("p", [[0.3, 0.7], [-1.2, 2.5], [0.0, 0.0], [1e-8, -40.0]])
def test_grad_of_indexed_elements_matches_hand_and_fd(p):
    p = np.array(p)
    g = tape.grad(f)(p)
    np.testing.assert_allclose(g, f_hand(p), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(g, fd_vjp(f_np, [p], 1.0, [0])[0], rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("n", [2, 3, 7])
def test_every_index_positive_and_negative(n):
    x = np.linspace(0.5, 1.5, n)
    for k in range(-n, n):
        g = tape.grad(lambda v, k=k: v[k] * v[k] * v[(k + 1) % n])(x)
        want = np.zeros(n)
        want[k % n] += 2 * x[k] * x[(k + 1) % n]
        want[(k + 1) % n] += x[k] ** 2
        np.testing.assert_allclose(g, want, rtol=1e-14)


def test_same_element_twice_and_by_both_signs_accumulates():
    x = np.array([2.0, 5.0])
    g = tape.grad(lambda v: v[1] * v[-1] + v[1])(x)
    np.testing.assert_array_equal(g, [0.0, 11.0])


@pytest.mark.parametrize("k", [2, -3, 10 ** 20])
def test_out_of_range_index_error_as_numpy(k):
    x = np.array([1.0, 2.0])
    with pytest.raises(IndexError, match="out of bounds") as ours:
        tape.grad(lambda v: v[k])(x)
    with pytest.raises(IndexError) as numpy_s:
        x[k]
    if abs(k) < 100:
        assert str(ours.value) == str(numpy_s.value)


def test_zero_d_and_one_element_inputs_take_the_general_path():
    with pytest.raises(IndexError):
        tape.grad(lambda v: v[0])(2.0)  # 0-d: too many indices, as NumPy
    g = tape.grad(lambda v: v[0] * v[-1])(np.array([3.0]))
    np.testing.assert_array_equal(g, [6.0])


def test_matches_the_general_path_row_for_row():
    """x[k] and x[(k,)] (the general path) record the same gather rows, sharing the index
    chunk through the same cache key."""
    x = tape.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    a = x[1]
    b = x[(1,)]
    c = x[-2]
    t = a._tape
    assert b._tape is t and c._tape is t
    rows = np.array(t.rows).reshape(-1, 3)
    assert rows[a._slot][0] == rows[b._slot][0] == record.GATHER
    assert t.side[4 * t.side_of[a._slot] + 2] == t.side[4 * t.side_of[b._slot] + 2]
    assert a.item() == b.item() == c.item() == 2.0
    (a + 2.0 * b + 4.0 * c).backward()
    np.testing.assert_array_equal(x.grad, [0.0, 7.0, 0.0])


def test_not_recording_gives_plain_values():
    x = tape.tensor(np.array([1.0, 2.0]))
    y = x[1]
    assert not y.requires_grad and float(y) == 2.0
    w = tape.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with tape.no_grad():
        z = w[0]
    assert not z.requires_grad and float(z) == 1.0


def test_hooks_still_fire():
    x = tape.tensor(np.array([0.5, -1.5]), requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.copy()))
    y = x[0]
    y.register_hook(lambda g: g * 10.0)
    calls = []
    h = tape.graph.register_multi_grad_hook([x, y], calls.append)
    (y * x[1]).backward()
    np.testing.assert_array_equal(x.grad, [-15.0, 0.5])
    assert len(seen) == 1 and len(calls) == 1
    h.remove()


def test_multi_hook_scope_resets_after_an_error():
    x = tape.tensor(np.array([0.5, -1.5]), requires_grad=True)
    y = x[1]

    def bad(g):
        raise ValueError("boom")

    y.register_hook(bad)
    calls = []
    tape.graph.register_multi_grad_hook([x], calls.append)
    with pytest.raises(ValueError, match="boom"):
        (y * 2.0).backward()
    assert calls == []
    (x[0] * 3.0).backward()  # a later backward starts clean: the hook fires for it
    assert len(calls) == 1


def test_compiled_replay_and_higher_order():
    p = np.array([0.3, 0.7])
    c = tape.compile(f, p)
    for q in (p, np.array([-0.4, 1.1])):
        np.testing.assert_allclose(c.grad(q), f_hand(q), rtol=1e-13)
    h = tape.hessian(f)(p)
    x, y = p
    want = np.array([[2 - np.sin(x) * np.exp(y), -1 + np.cos(x) * np.exp(y)],
                     [-1 + np.cos(x) * np.exp(y), np.sin(x) * np.exp(y) - 2]])
    np.testing.assert_allclose(h, want, rtol=1e-12)
    gg = tape.grad(lambda v: tape.grad(f)(v).sum())(p)
    np.testing.assert_allclose(gg, want.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(tape.jacfwd(tape.grad(f))(p), want, rtol=1e-12)
