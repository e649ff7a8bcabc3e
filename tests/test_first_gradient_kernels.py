"""The kernels of a first gradient allocate nothing (a new process then loads them without
Numba's allocation code, tests/test_warm_start.py): ``need_pass`` keeps its dependence marks in
`need` itself, and ``whole_arena`` seeds an arena the caller gives it (the thread's spare, or one
allocated after the kernel said how long). Checked against the plain algorithms, whatever the
arrays held before, and through the lean backward with every kind of spare."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jit
import tape
from tape.reverse import arena_pool, backward


def reference_need_pass(R, src, root):
    """The need pass with a separate array of dependence marks."""
    n = len(R)
    dep = np.zeros(n, np.uint8)
    for i in range(n):
        a, b = R[i, 1], R[i, 2]
        dep[i] = bool(src[i] or (a >= 0 and dep[a]) or (b >= 0 and dep[b]))
    live = (root & dep).astype(np.uint8)
    need = np.zeros(n, np.uint8)
    for i in range(n - 1, -1, -1):
        if live[i]:
            a, b = R[i, 1], R[i, 2]
            if a >= 0 and dep[a]:
                need[i] |= 1
                live[a] = 1
            if b >= 0 and dep[b]:
                need[i] |= 2
                live[b] = 1
    return need, live, int(np.count_nonzero(need))


@st.composite
def tapes(draw):
    """R (operands: earlier slots or -1), src, root, and garbage for need and live."""
    n = draw(st.integers(0, 40))
    R = np.zeros((n, 4), np.int64)
    for i in range(n):
        R[i, 1] = draw(st.integers(-1, i - 1)) if i else -1
        R[i, 2] = draw(st.integers(-1, i - 1)) if i else -1
    bits = st.lists(st.integers(0, 1), min_size=n, max_size=n)
    junk = st.lists(st.integers(0, 255), min_size=n, max_size=n)
    u8 = lambda x: np.array(x, np.uint8)  # noqa: E731
    return R, u8(draw(bits)), u8(draw(bits)), u8(draw(junk)), u8(draw(junk))


@settings(max_examples=200, deadline=None)
@given(tapes())
def test_need_pass_matches_the_plain_algorithm_whatever_need_held(case):
    R, src, root, need, live = case
    expected = reference_need_pass(R, src, root)
    count = jit.need_pass(R, src, root, live, need)
    np.testing.assert_array_equal(need, expected[0])
    np.testing.assert_array_equal(live, expected[1])
    assert count == expected[2]


def test_need_pass_hand_derived():
    # 0: source, 1: constant, 2 = 0 * 1, 3 = 1 + 1 (no source), 4 = 2 + 3 (the root)
    R = np.array([[0, -1, -1, -1], [0, -1, -1, -1], [0, 0, 1, -1], [0, 1, 1, -1],
                  [0, 2, 3, -1]], np.int64)
    src = np.array([1, 0, 0, 0, 0], np.uint8)
    root = np.array([0, 0, 0, 0, 1], np.uint8)
    need, live = np.full(5, 7, np.uint8), np.full(5, 9, np.uint8)
    assert jit.need_pass(R, src, root, live, need) == 2
    assert need.tolist() == [0, 0, 1, 0, 1]
    assert live.tolist() == [1, 0, 1, 0, 1]


def bits(a):
    return np.asarray(a, np.float64).view(np.int64)


def f(x, w):
    h = np.tanh(x[:, None] * w + 0.5)
    return np.sum(h * h) + x[0] * x[1]


def gradients():
    x = np.linspace(-1.0, 1.0, 300)
    w = np.linspace(0.5, 1.5, 120)
    return [bits(g) for g in tape.grad(f, argnums=(0, 1))(x, w)]


@pytest.mark.parametrize("spare", ["none", "too short", "long, holding NaN"])
def test_lean_backward_same_bits_with_any_spare(spare, monkeypatch):
    taken = []
    real = backward._sweep_whole
    monkeypatch.setattr(backward, "_sweep_whole",
                        lambda *a: taken.append(1) or real(*a))
    expected = gradients()  # (the spare the pool has, if any)
    given_spare = {"none": np.zeros(0), "too short": np.full(10, np.nan),
                   "long, holding NaN": np.full(1 << 18, np.nan)}[spare]
    kept = []
    monkeypatch.setattr(arena_pool, "spare", lambda: given_spare)
    monkeypatch.setattr(arena_pool, "keep", lambda buf, G: kept.append((buf, G)))
    got = gradients()
    assert len(taken) == 2  # (both on the lean path)
    for a, b in zip(expected, got):
        np.testing.assert_array_equal(a, b)
    (buf, G), = kept
    assert buf is given_spare
    assert (G.base is given_spare) == (spare == "long, holding NaN")  # (else allocated)


def test_an_unswept_row_hands_over_and_gives_the_spare_back(monkeypatch):
    given_spare = np.full(1 << 17, np.nan)
    kept, results = [], []
    real = backward._sweep_whole
    monkeypatch.setattr(backward, "_sweep_whole", lambda *a: results.append(real(*a)) or
                        results[-1])
    monkeypatch.setattr(arena_pool, "spare", lambda: given_spare)
    monkeypatch.setattr(arena_pool, "keep", lambda buf, G: kept.append((buf, G)))
    x = tape.tensor(np.arange(3.0), requires_grad=True)
    y = tape.tensor(np.ones(3), requires_grad=True)
    u = (x * 2.0).sum()
    v = (y * 3.0).sum()  # a row with an operand that u's backward leaves unswept
    u.backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    assert results[0] is None  # (handed to the general path)
    assert kept[0] == (given_spare, given_spare)
    v.backward()
    assert y.grad.tolist() == [3.0, 3.0, 3.0]
