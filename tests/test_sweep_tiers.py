"""The eager backward's reverse sweep in tiers (``jit._tiers``): ``scalar_sweep`` from the top of
a range, stopping at the first row it does not sweep, then below it ``array_sweep`` when every
needed row left is one of its kinds, else ``common_sweep`` when every one is its, else
``eager_sweep``. Gradients are the full sweep's to the
bit for scalar, mixed and array tapes (escapes, hooks, retain_graph, blocked runs, threads,
second order, rows of every family); the scalar and array tiers refuse a row they do not handle
(they stop there and leave the arena alone); no eager backward calls ``sweep``; a scalar loop's
first gradient on an empty cache compiles the scalar tier alone, and an array program's the
scalar and array tiers and the forward entries its rows use; after ``jit.warmup`` nothing
compiles."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jit
import tape
from jit import FRESH_A, LOCAL, SEEDED, VALUES
from jit._cache import load

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "asv_bench" / "benchmarks"))
import workloads  # noqa: E402

NO_JIT = os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")


def _full(R, S, VA, GO, sv, G, IA, FA, need, lo, hi):
    """The eager reverse as it was before the tiers: ``sweep`` itself."""
    jit.reverse_sweep(R, S, VA, GO, sv, G, IA, FA, need, lo, hi)


def assert_tiers_give_full_bits(f, x0):
    """f's eager value and gradient at x0 through the tiers has the bits of ``sweep``'s."""
    run = lambda: tape.value_and_grad(f)(x0)  # noqa: E731
    tiered = run()
    prev = jit.eager_reverse
    try:
        jit.eager_reverse = _full
        full = run()
    finally:
        jit.eager_reverse = prev
    assert_same_bits(tiered, full)


def bits(a):
    return np.asarray(a, np.float64).view(np.int64)


def assert_same_bits(a, b):
    a, b = tape_tree(a), tape_tree(b)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert np.shape(x) == np.shape(y)
        np.testing.assert_array_equal(bits(x), bits(y))  # (-0.0 and 0.0 told apart)


def tape_tree(v):
    out = []
    for x in (v if isinstance(v, (tuple, list)) else (v,)):
        out += tape_tree(x) if isinstance(x, (tuple, list)) else [x]
    return out


def tiered_and_full(monkeypatch, run):
    """run() through the tiers, then through the full sweep."""
    tiered = run()
    with monkeypatch.context() as m:
        m.setattr(jit, "eager_reverse", _full)
        full = run()
    return tiered, full


@pytest.fixture
def tiers(monkeypatch):
    """Records each tier call: ("scalar", lo, hi, what it returned), ("array", lo, hi, where it
    stopped), ("common", lo, hi, where it stopped) and ("eager", lo, hi)."""
    from jit import _interp, _tiers

    scalar, eager = load(_interp, "scalar_sweep"), load(_interp, "eager_sweep")
    array, common = load(_interp, "array_sweep"), load(_interp, "common_sweep")
    calls = []

    def spy_scalar(*a):
        stop = scalar(*a)
        calls.append(("scalar", a[-2], a[-1], stop))
        return stop

    def spy_array(*a):
        stop = array(*a)
        calls.append(("array", a[-2], a[-1], stop))
        return stop

    def spy_common(*a):
        stop = common(*a)
        calls.append(("common", a[-2], a[-1], stop))
        return stop

    def spy_eager(*a):
        calls.append(("eager", a[-2], a[-1]))
        eager(*a)

    monkeypatch.setattr(_tiers, "_scalar", spy_scalar)
    monkeypatch.setattr(_tiers, "_array", spy_array)
    monkeypatch.setattr(_tiers, "_common", spy_common)
    monkeypatch.setattr(_tiers, "_eager", spy_eager)
    return calls


# -- functions: scalar loops, scalars over arrays, arrays with escapes ----------------------------

def lorenz(p, steps=200):
    sigma, rho, beta = p[0], p[1], p[2]
    x = y = z = 1.0
    for _ in range(steps):
        dx = sigma * (y - x)
        dy = x * (rho - z) - y
        dz = x * y - beta * z
        x = x + 0.001 * dx
        y = y + 0.001 * dy
        z = z + 0.001 * dz
    return x * x + y * y + z * z


def scalars_over_arrays(x):
    """Array rows below, a scalar loop on their sum on top."""
    s = np.sum(np.sin(x) * x)
    for _ in range(20):
        s = s * 0.9 + np.tanh(s) - 0.1 * s * s
    return s


def interleaved(x):
    """Scalar rows between array rows, a gather of an element, an escape (det) and a blocked
    run (10^4 elements) in the middle."""
    a = np.sum(np.exp(0.1 * x[:6]))
    b = a * a - np.cos(a)
    m = np.reshape(x[:9], (3, 3)) + 3.0 * np.eye(3)
    c = np.sum(x * b) + np.linalg.det(m) * x[2]
    big = np.linspace(-1.0, 1.0, 10_000) * x[0]
    d = np.sum(np.tanh(big) * np.exp(-big * big) + np.log1p(big * big))
    return c * c + b + d * x[1]


def small_gmm(alphas, means, icf, x):
    return workloads.gmm_loss(alphas, means, icf, x)


def short_nbody(pos0, vel0, masses):
    pos, vel = pos0, vel0
    acc = workloads._accel(pos, masses)
    for _ in range(5):
        vel = vel + 0.005 * acc
        pos = pos + 0.01 * vel
        acc = workloads._accel(pos, masses)
        vel = vel + 0.005 * acc
    return 0.5 * np.sum(masses[:, None] * vel * vel)


def other_rows(x, w):
    """Rows the array tier does not sweep (a binary maximum and power, np.where's select, a
    matmul: the common tier's; a cumsum: the eager tier's) among its own (unary, + - * /, sums,
    gathers), a blocked run below."""
    big = np.linspace(-1.0, 1.0, 10_000) * x[0]
    run = np.sum(np.tanh(big) * big + big / (1.0 + big * big))
    m = np.reshape(x[:6], (2, 3)) @ w
    h = np.maximum(np.cumsum(x), 0.3) ** 1.5 + np.where(x > 0.5, x, 2.0 * x)
    return np.sum(m * m) + np.sum(np.exp(-h) * x) * run


def typical_rows(x, w):
    """The usual scientific program's rows beyond + - * / (``x ** 2``, ``x ** 1.5``, np.clip's
    maximum and minimum, np.where's select, a matmul, abs, sqrt, norm, max), all the common
    tier's, broadcast against a one-element operand and row against row, a blocked run below."""
    big = np.linspace(0.1, 2.0, 10_000) * x[0]
    run = np.sum(big ** 1.5 + np.clip(big, 0.5, 1.5))
    m = np.reshape(x[:6], (2, 3)) @ w
    h = np.maximum(x, 0.4) ** 2 + np.minimum(x, w[0, 0]) + np.where(x > 0.5, x, 2.0 * x)
    return (np.sum(m * m) + np.sum(np.abs(h) ** x) + np.linalg.norm(np.sqrt(x)) * run
            + np.max(x @ x) + np.sum(np.clip(x, 0.2, 0.8) ** 1.5))


def arithmetic_broadcasts(x, y, c):
    """Every arithmetic op of the array tier's binary kernel, broadcast by strides, by index
    maps, with a one-element operand (its terms summed pairwise) and row against row."""
    t = x[:, None, :] - y[None, :, None] * c[0]
    u = (t * t) / (1.5 + y[None, :, None]) + c[1] / (2.0 + x[:, None, :] ** 2)
    return np.sum(u * c[0] - c[1]) + np.sum(x[:, ::2] * 3.0) / c[0]


CASES = {
    "lorenz": (lorenz, (np.array([10.0, 28.0, 8.0 / 3.0]),)),
    "scalars_over_arrays": (scalars_over_arrays, (np.linspace(-1.0, 1.0, 7),)),
    "interleaved": (interleaved, (np.linspace(0.1, 1.3, 12),)),
    "gmm": (small_gmm, workloads.gmm_inputs(d=3, k=4, n=30)),
    "nbody": (short_nbody, workloads.nbody_inputs()),
    "elementwise": (workloads.elementwise_loss, workloads.elementwise_inputs(20_000)),
    "other_rows": (other_rows, (np.linspace(0.1, 1.2, 12),
                                np.linspace(-1.0, 1.0, 12).reshape(3, 4))),
    "typical_rows": (typical_rows, (np.linspace(0.1, 1.2, 12),
                                    np.linspace(-1.0, 1.0, 12).reshape(3, 4))),
    "arithmetic_broadcasts": (arithmetic_broadcasts, (np.linspace(-1.0, 1.0, 6).reshape(2, 3),
                                                      np.linspace(0.5, 2.0, 5),
                                                      np.array([0.7, -1.3]))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_tiers_give_the_full_sweeps_bits(monkeypatch, name):
    f, args = CASES[name]
    run = lambda: tape.value_and_grad(f, argnums=tuple(range(len(args))))(*args)  # noqa: E731
    tiered, full = tiered_and_full(monkeypatch, run)
    assert_same_bits(tiered, full)


def test_the_general_path_and_retain_graph_give_the_same_bits(monkeypatch):
    """A hook cuts the sweep into segments; retain_graph sweeps the same tape twice."""
    def run():
        x = tape.tensor(np.linspace(0.1, 1.3, 12), requires_grad=True)
        p = tape.tensor(np.array([10.0, 28.0, 8.0 / 3.0]), requires_grad=True)
        h = np.sin(x) * 2.0
        h.register_hook(lambda g: g * 0.5)
        y = interleaved(h) + lorenz(p, 50)
        y.backward(retain_graph=True)
        first = (x.grad.copy(), p.grad.copy())
        y.backward()
        return first, (x.grad, p.grad)

    tiered, full = tiered_and_full(monkeypatch, run)
    assert_same_bits(tiered, full)
    (x1, p1), (x2, p2) = tiered
    assert_same_bits((2 * x1, 2 * p1), (x2, p2))  # (a second sweep of the same tape adds)


def test_second_order_gives_the_same_bits(monkeypatch):
    p = np.array([10.0, 28.0, 8.0 / 3.0])
    tiered, full = tiered_and_full(monkeypatch, lambda: tape.hessian(lambda p: lorenz(p, 30))(p))
    assert_same_bits(tiered, full)


def test_threads_each_get_the_full_sweeps_bits(monkeypatch):
    expected = {}
    with monkeypatch.context() as m:
        m.setattr(jit, "eager_reverse", _full)
        for name in ("lorenz", "interleaved", "nbody"):
            f, args = CASES[name]
            expected[name] = tape.value_and_grad(f, argnums=tuple(range(len(args))))(*args)
    errors = []

    def work(name):
        try:
            f, args = CASES[name]
            for _ in range(3):
                assert_same_bits(tape.value_and_grad(f, argnums=tuple(range(len(args))))(*args),
                                 expected[name])
        except Exception as e:  # (reported by the main thread)
            errors.append((name, e))

    threads = [threading.Thread(target=work, args=(n,)) for n in expected for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-2.0, 2.0), min_size=12, max_size=12),
       st.integers(0, 30), st.booleans())
def test_random_values_and_shapes_of_the_tape(values, steps, arrays_on_top):
    """Tapes of scalar rows over array rows, or array rows over scalar rows, of any length."""
    x0 = np.array(values)

    def f(x):
        s = np.sum(np.sin(x[:5]) * x[5:10]) if not arrays_on_top else x[0] * x[1]
        for _ in range(steps):
            s = s * 0.5 + np.sin(s) * x[11]
        if arrays_on_top:
            return np.sum(np.exp(x * s) * x)
        return s

    assert_tiers_give_full_bits(f, x0)


_STEPS = {  # one step of a random array program: (name, function of the running value and x)
    "exp": lambda h, x: np.exp(0.3 * h),
    "sin_times": lambda h, x: np.sin(h) * x,
    "minus_column": lambda h, x: h - x[:, :1],
    "over_row": lambda h, x: h / (2.0 + x[:1, :] * x[:1, :]),
    "plus_scalar_param": lambda h, x: h + x[0, 0],
    "times_broadcast": lambda h, x: (h[:, None, :] * x[None, :, :]).sum(axis=1),
    "row_sums": lambda h, x: h + np.sum(h, axis=1, keepdims=True),
    "gather": lambda h, x: h[:, ::-1] + h[1:2, :],
    "maximum": lambda h, x: np.maximum(h, 0.1 * x),  # (this and below: not the array tier's)
    "clip": lambda h, x: np.clip(h, -0.5, 0.8),  # (a maximum and a minimum row)
    "minimum_column": lambda h, x: np.minimum(h, x[:, :1]),
    "where": lambda h, x: np.where(x > 0.0, h, 0.5 * h),
    "power": lambda h, x: (h * h + 1.0) ** 0.75,
    "square": lambda h, x: h ** 2,  # (a power row)
    "power_of_x": lambda h, x: (1.5 + np.tanh(h)) ** x,  # (both operands' adjoints)
    "matmul": lambda h, x: (h @ x.T) @ x / x.size,
    "cumsum": lambda h, x: np.cumsum(h, axis=1),  # (the eager tier's)
    "arctan2": lambda h, x: np.arctan2(h, 1.0 + x * x),  # (the eager tier's)
}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(sorted(_STEPS)), min_size=1, max_size=6),
       st.sampled_from([(1, 1), (1, 5), (4, 1), (3, 4)]), st.integers(0, 2 ** 16))
def test_random_array_programs_give_the_full_sweeps_bits(steps, shape, seed):
    """Random chains of array rows, of each tier's kinds, on shapes with size-1
    axes (one-element operands, broadcasts): the tiers' bits are the full sweep's."""
    x0 = np.random.default_rng(seed).uniform(-1.5, 1.5, size=shape)

    def f(x):
        h = x
        for name in steps:
            h = _STEPS[name](h, x)
        return np.sum(h * h)

    assert_tiers_give_full_bits(f, x0)


# -- which tier sweeps which rows -----------------------------------------------------------------

def test_a_scalar_loop_is_swept_by_the_scalar_tier_alone(tiers):
    tape.grad(lorenz)(np.array([10.0, 28.0, 8.0 / 3.0]))
    assert [c[0] for c in tiers] == ["scalar"]
    _, lo, hi, stop = tiers[0]
    assert stop == lo == 0 and hi > 1000  # (its gathers p[0], p[1], p[2] included)


def test_the_array_tier_takes_the_rows_below_the_scalar_tiers_stop(tiers):
    tape.grad(scalars_over_arrays)(np.linspace(-1.0, 1.0, 7))
    assert [c[0] for c in tiers] == ["scalar", "array"]
    _, lo, hi, stop = tiers[0]
    assert lo < stop < hi  # the scalar loop on top, swept; the sum below, not
    assert tiers[1] == ("array", lo, stop, lo)


def test_an_array_tape_goes_to_the_array_tier_at_once(tiers):
    tape.grad(lambda x: np.sum(np.sin(x) * x))(np.linspace(-1.0, 1.0, 7))  # (top row: the sum)
    assert [c[0] for c in tiers] == ["scalar", "array"]
    _, lo, hi, stop = tiers[0]
    assert stop == hi and tiers[1] == ("array", lo, hi, lo)


@pytest.mark.parametrize("f", [lambda x: np.sum(np.maximum(x, 0.2) * x),
                               lambda x: np.sum(np.where(x > 0.0, x, 0.5 * x) ** 2),
                               lambda x: np.sum(np.clip(x, -0.5, 0.5) ** 1.5),
                               lambda x: np.sum(np.reshape(x[:4], (2, 2)) @ np.ones((2, 2)))])
def test_the_usual_rows_go_to_the_common_tier(tiers, f):
    """x ** p, np.maximum, np.minimum (np.clip), np.where and a matmul are the common tier's:
    the scalar tier says the rest is not the array tier's, and the common tier sweeps it."""
    tape.grad(f)(np.linspace(-1.0, 1.0, 7))
    assert [c[0] for c in tiers] == ["scalar", "common"]
    _, lo, hi, ret = tiers[0]
    assert lo < -1 - ret <= hi and tiers[1] == ("common", lo, -1 - ret, lo)


@pytest.mark.parametrize("f", [lambda x: np.sum(np.cumsum(x) * x),
                               lambda x: np.sum(np.arctan2(x, 1.5)),
                               lambda x: np.sum(np.hypot(x, 2.0) ** 2),
                               lambda x: np.sum(np.fmax(x, 0.2) * x)])
def test_a_tape_with_another_row_goes_to_the_eager_tier_alone(tiers, f):
    """The scalar tier's scan sees a needed row the array tier does not sweep: the eager tier
    takes every row below the scalar tier's stop, and the array tier is not called."""
    tape.grad(f)(np.linspace(-1.0, 1.0, 7))
    assert [c[0] for c in tiers] == ["scalar", "eager"]
    _, lo, hi, ret = tiers[0]
    assert lo < -1 - ret <= hi and tiers[1] == ("eager", lo, -1 - ret)


def test_an_unneeded_row_of_another_kind_keeps_the_array_tier(tiers):
    """Only needed rows count: a maximum recorded but not on the output's path."""
    f = lambda x: (np.maximum(x, 0.0), np.sum(np.exp(x)))[1]  # noqa: E731
    tape.grad(f)(np.linspace(-1.0, 1.0, 7))
    assert [c[0] for c in tiers] == ["scalar", "array"]


def test_no_eager_backward_calls_sweep(monkeypatch):
    """Every eager path (lean, general with escapes and hooks, retain_graph, second order)
    goes through the tiers: ``sweep``, and its compile, only for compiled replay."""
    def refuse(*args, **kwargs):
        raise AssertionError("an eager backward called sweep")

    for name in ("sweep", "reverse_sweep"):
        monkeypatch.setattr(jit, name, refuse)
    for f, args in CASES.values():
        tape.value_and_grad(f, argnums=tuple(range(len(args))))(*args)
    x = tape.tensor(np.linspace(0.1, 1.3, 12), requires_grad=True)
    h = np.sin(x)
    h.register_hook(lambda g: g)
    y = interleaved(h)
    y.backward(retain_graph=True)
    y.backward()
    tape.hessian(lambda p: lorenz(p, 5))(np.array([10.0, 28.0, 8.0 / 3.0]))


# -- the scalar tier refuses what it does not sweep -----------------------------------------------

def _probe_scalar_tier(monkeypatch, f, args, probe):
    """Run probe(scalar_sweep, arrays) inside f's backward, while its arrays are alive, before
    the real tier call."""
    from jit import _interp, _tiers

    scalar = load(_interp, "scalar_sweep")
    seen = []

    def spy(*a):
        if not seen:
            seen.append(probe(scalar, a))
        return scalar(*a)

    monkeypatch.setattr(_tiers, "_scalar", spy)
    tape.grad(f)(*args)
    assert seen
    return seen[0]


@pytest.mark.parametrize("bit", [FRESH_A, LOCAL, SEEDED, VALUES])
def test_a_gather_with_other_need_bits_stops_the_scalar_tier(monkeypatch, bit):
    """A gather row marked with a need bit the scalar tier does not sweep (a compiled plan's)
    stops it at that row: nothing of the gather is added, the full sweep's to do."""
    def probe(scalar, a):
        R, S, VA, GO, sv, G, IA, FA, need, lo, hi = a
        gathers = [r for r in range(lo, hi) if R[r, 3] >= 0 and need[r]
                   and jit.TABLE[R[r, 0] & 255].family == "gather"]
        top = max(gathers)
        marked = need.copy()
        marked[top] |= bit
        G1, G2 = G.copy(), G.copy()
        stop_plain = scalar(R, S, VA, GO, sv, G1, IA, FA, need.copy(), lo, hi)
        stop = scalar(R, S, VA, GO, sv, G2, IA, FA, marked, lo, hi)
        leaf = R[top, 1]
        o, n = GO[leaf], S[R[leaf, 3], 0]
        return stop_plain, stop, top, G1[o:o + n].copy(), G2[o:o + n].copy(), G.copy(), G2

    stop_plain, stop, top, leaf_plain, leaf_marked, before, after = _probe_scalar_tier(
        monkeypatch, lambda p: lorenz(p, 20), (np.array([10.0, 28.0, 8.0 / 3.0]),), probe)
    assert stop_plain == 0  # unmarked, the tier sweeps the gathers too
    assert stop == top + 1  # marked: it stops at the gather, which it leaves unswept
    assert np.any(leaf_plain != 0.0)
    assert np.all(leaf_marked == 0.0)  # (p's adjoint: nothing of this gather, or below it)
    assert np.any(after != before)  # (the scalar rows above it were swept)


def test_a_row_of_another_family_stops_the_scalar_tier(monkeypatch):
    """A reduction (an array row) stops the scalar tier: it returns that row + 1 and touches
    no adjoint of that row's operands."""
    def probe(scalar, a):
        R, S, VA, GO, sv, G, IA, FA, need, lo, hi = a
        G1 = G.copy()
        stop = scalar(R, S, VA, GO, sv, G1, IA, FA, need.copy(), lo, hi)
        row = stop - 1
        sa = R[row, 1]
        o, n = GO[sa], S[R[sa, 3], 0]
        return stop, jit.TABLE[R[row, 0] & 255].name, R[row, 3], need[row], G1[o:o + n].copy()

    stop, name, k, nd, operand = _probe_scalar_tier(
        monkeypatch, scalars_over_arrays, (np.linspace(-1.0, 1.0, 7),), probe)
    assert stop > 0 and name == "sum" and k >= 0 and nd & 1
    assert np.all(operand == 0.0)


_OWN = {"add", "subtract", "multiply", "divide", "sum", "exp", "neg", "copy", "gather"}


@pytest.mark.parametrize("entry, stops_at, sweeps", [
    ("array_sweep", {"matmul", "maximum", "power", "where", "cumsum"}, _OWN),
    ("common_sweep", {"cumsum"}, _OWN | {"maximum", "power", "where", "matmul"})])
def test_a_tier_stops_above_a_row_it_does_not_sweep(monkeypatch, entry, stops_at, sweeps):
    """Called on a tape the scan gives to the eager tier, the array or common tier stops above
    the highest needed row of another kind (every row above it swept, that row not), and the
    eager tier from there gives the full sweep's bits: a tier never sweeps a row wrongly,
    whoever calls it."""
    from jit import _interp

    array, eager = load(_interp, entry), load(_interp, "eager_sweep")

    def probe(scalar, a):
        R, S, VA, GO, sv, G, IA, FA, need, lo, hi = a
        full = G.copy()
        jit.reverse_sweep(R, S, VA, GO, sv, full, IA, FA, need.copy(), lo, hi)
        tiered = G.copy()
        ret = scalar(R, S, VA, GO, sv, tiered, IA, FA, need.copy(), lo, hi)
        stop = array(R, S, VA, GO, sv, tiered, IA, FA, need.copy(), lo, -1 - ret)
        row = stop - 1
        kinds = {jit.TABLE[R[r, 0] & 255].name for r in range(stop, -1 - ret)
                 if need[r] and R[r, 3] >= 0}
        eager(R, S, VA, GO, sv, tiered, IA, FA, need.copy(), lo, stop)
        return ret, stop, jit.TABLE[R[row, 0] & 255].name, kinds, tiered, full

    ret, stop, name, kinds, tiered, full = _probe_scalar_tier(
        monkeypatch, lambda x: other_rows(x, np.ones((3, 2))), (np.linspace(0.1, 1.2, 12),),
        probe)
    assert ret < 0 and stop > 0
    assert name in stops_at
    assert kinds and kinds <= sweeps, kinds
    assert_same_bits(tiered, full)


def test_unneeded_rows_and_an_empty_range_sweep_nothing():
    from jit import _interp

    scalar_sweep = load(_interp, "scalar_sweep")
    R = np.array([[3, -1, -1, -1], [3, 0, -1, -1]], np.int64)  # (0-d neg rows)
    G = np.ones(2)
    args = (R, np.zeros((1, 3), np.int64), np.zeros(2, np.int64), np.zeros(2, np.int64),
            np.ones(2), G, np.zeros(1, np.int64), np.zeros(1), np.zeros(2, np.uint8))
    assert scalar_sweep(*args, 0, 2) == 0  # (no row needed)
    assert scalar_sweep(*args, 1, 1) == 1  # (no row at all)
    assert list(G) == [1.0, 1.0]


# -- a first gradient on an empty cache -----------------------------------------------------------

_FIRST_W1 = """
import sys
import numpy as np, tape
from jit import _interp
sys.path.insert(0, {bench!r})
from workloads import lorenz_inputs, lorenz_loss
v, g = tape.value_and_grad(lorenz_loss)(*lorenz_inputs())
print(repr(float(v)), *(repr(float(x)) for x in g))
print(*(len(getattr(_interp, n).signatures) for n in ("scalar_sweep", "eager_sweep", "sweep")))
"""


@pytest.mark.skipif(NO_JIT, reason="nothing is compiled")
def test_a_scalar_loops_first_gradient_compiles_the_scalar_tier_alone(tmp_path):
    """W1's first gradient on an empty cache compiles ``scalar_sweep`` (and the small plans),
    neither ``eager_sweep`` nor ``sweep``; the bits are a warm process's; the notice, if any,
    names the eager gradient's kernels."""
    script = tmp_path / "first.py"
    script.write_text(_FIRST_W1.format(bench=str(ROOT / "asv_bench" / "benchmarks")))
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    values, counts = r.stdout.split("\n")[:2]
    assert counts.split() == ["1", "0", "0"]
    v, g = tape.value_and_grad(workloads.lorenz_loss)(*workloads.lorenz_inputs())
    assert [float(s) for s in values.split()] == [float(v), *map(float, g)]
    lines = r.stderr.splitlines()  # (none if its few seconds of compile beat the notice's timer)
    assert len(lines) <= 1 and all("the eager gradient's" in ln for ln in lines), r.stderr


_FIRST_ARRAY = """
import sys
import numpy as np, tape
from jit import _interp
sys.path.insert(0, {bench!r})
from workloads import gmm_inputs, gmm_loss
v, g = tape.value_and_grad(gmm_loss)(*gmm_inputs(d=3, k=4, n=30))
print(repr(float(v)), *(repr(float(x)) for x in g.ravel()))
print(*(len(getattr(_interp, n).signatures) for n in {entries!r}))
{typical}
v, g = tape.value_and_grad(typical)(np.linspace(-1.0, 1.0, 12))
print(repr(float(v)), *(repr(float(x)) for x in g.ravel()))
print(*(len(getattr(_interp, n).signatures) for n in {entries!r}))
"""
_TYPICAL = """
def typical(x):
    h = np.clip(x, -0.5, 0.8) ** 2 + np.maximum(x, 0.1) ** 1.5 + np.where(x > 0.3, x, 0.5 * x)
    return np.sum(np.abs(h)) + np.sum(np.reshape(x[:6], (2, 3)) @ np.ones((3, 2)))
"""
_ENTRIES = ("scalar_sweep", "array_sweep", "common_sweep", "eager_sweep", "sweep",
            "elementwise_unary", "elementwise_power", "elementwise_arctan2")


@pytest.mark.skipif(NO_JIT, reason="nothing is compiled")
def test_an_array_programs_first_gradient_compiles_what_its_rows_need(tmp_path):
    """W2's first gradient on an empty cache compiles the scalar and array tiers and the unary
    rows' forward entry (exp, log), not the common or eager tier, ``sweep`` or the binary rows'
    forward entries; then a typical program's (x ** p, np.clip, np.where, a matmul) adds the
    common tier and the power rows' forward entry alone. The bits are a warm process's; one
    notice says so for all of them."""
    script = tmp_path / "first.py"
    script.write_text(_FIRST_ARRAY.format(bench=str(ROOT / "asv_bench" / "benchmarks"),
                                          entries=_ENTRIES, typical=_TYPICAL))
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=900, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    values, counts, values2, counts2 = r.stdout.split("\n")[:4]
    expected = {"scalar_sweep": "1", "array_sweep": "1", "common_sweep": "0", "eager_sweep": "0",
                "sweep": "0", "elementwise_unary": "1", "elementwise_power": "0",
                "elementwise_arctan2": "0"}
    assert dict(zip(_ENTRIES, counts.split())) == expected
    assert dict(zip(_ENTRIES, counts2.split())) == dict(expected, common_sweep="1",
                                                        elementwise_power="1")
    v, g = tape.value_and_grad(workloads.gmm_loss)(*workloads.gmm_inputs(d=3, k=4, n=30))
    assert [float(s) for s in values.split()] == [float(v), *map(float, g.ravel())]
    space = {"np": np}
    exec(_TYPICAL, space)
    v, g = tape.value_and_grad(space["typical"])(np.linspace(-1.0, 1.0, 12))
    assert [float(s) for s in values2.split()] == [float(v), *map(float, g.ravel())]
    lines = r.stderr.splitlines()  # one line for the forward entries, passes and tiers
    assert len(lines) == 1 and "compiling the eager gradient's" in lines[0], r.stderr


_AFTER_WARMUP = """
import numpy as np, tape
from numba.core import event
compiled = []


class Count(event.Listener):
    def on_start(self, e):
        compiled.append(e.data["dispatcher"].py_func.__name__)

    def on_end(self, e):
        pass


event.register("numba:compile", Count())
x = np.linspace(0.1, 1.2, 12)
tape.grad(lambda p: p[0] * p[1] + np.sin(p[2]))(x)                      # scalar tier
tape.grad(lambda v: np.sum(np.exp(v) * np.log1p(v[:, None] - v[None, :])))(x)  # array tier
tape.grad(lambda v: np.sum(np.clip(v, 0.2, 0.9) ** 2 + np.where(v > 0.5, v, 0.0)))(x)  # common
tape.grad(lambda v: np.sum(np.maximum(v, 0.3) ** 1.5 + np.arctan2(v, 2.0)))(x)  # eager tier
b = np.linspace(0.0, 1.0, 256).reshape(1, 16, 16)  # (a broadcast of 32768: the strided loop)
tape.grad(lambda a: np.sum((a - b) * a))(np.linspace(0.1, 1.2, 2048).reshape(128, 1, 16))
from jit import _interp
print(compiled)
print(*(len(getattr(_interp, n).signatures) for n in {entries!r}))
"""


@pytest.mark.skipif(NO_JIT, reason="nothing is compiled")
def test_after_warmup_a_process_compiles_nothing(tmp_path):
    """``jit.warmup`` compiles every tier and forward entry an eager gradient may load: a new
    process on the same cache, running each of them, compiles nothing and prints nothing."""
    from jit._cache import cache_dir

    jit.warmup()  # (the session's cache: loads, unless something is missing)
    script = tmp_path / "warm.py"
    entries = tuple(e for e in _ENTRIES if e != "sweep") + ("elementwise_arithmetic",)
    script.write_text(_AFTER_WARMUP.format(entries=entries))
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_CACHE_DIR=os.path.abspath(cache_dir()))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=900, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    compiled, loaded = r.stdout.splitlines()
    assert compiled == "[]" and r.stderr == "", (r.stdout, r.stderr)
    assert loaded.split() == ["1"] * len(entries)  # (each of them was used)
