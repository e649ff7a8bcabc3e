"""The eager backward's reverse sweep in tiers (``jit._tiers``), chosen by one scan of the needed
rows: ``scalar_sweep`` for a tape of 0-d rows and gathers, ``array_sweep`` when every needed
array row is one of its kinds, else ``common_sweep`` when every one is its, else the common and
rare tiers in turn (``rare_sweep``: scans and the rare binary ops), or ``eager_sweep`` for a rare
binary row the rare tier leaves. Gradients are the full sweep's to the bit for scalar, mixed and
array tapes (escapes, hooks, retain_graph, blocked runs cut at rare rows, threads, second order,
rows of every family); each tier refuses a row it does not handle (it stops there and leaves the
arena alone); no eager backward calls ``sweep``; a scalar loop's first gradient on an empty cache
compiles the scalar tier alone, and an array program's only the tiers and forward entries its
rows use; after ``jit.warmup`` nothing compiles."""
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
    stopped), ("common", lo, hi, what it returned), ("run", lo, hi, where it stopped), ("lines",
    lo, hi, where it stopped), ("rare", lo, hi, where it stopped) and ("eager", lo, hi)."""
    from jit import _interp, _tiers

    scalar, eager = load(_interp, "scalar_sweep"), load(_interp, "eager_sweep")
    array, common = load(_interp, "array_sweep"), load(_interp, "common_sweep")
    rare, run = load(_interp, "rare_sweep"), load(_interp, "common_run_sweep")
    lines = load(_interp, "common_lines_sweep")
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

    def spy_run(*a):
        stop = run(*a)
        calls.append(("run", a[-2], a[-1], stop))
        return stop

    def spy_lines(*a):
        stop = lines(*a)
        calls.append(("lines", a[-2], a[-1], stop))
        return stop

    def spy_rare(*a):
        stop = rare(*a)
        calls.append(("rare", a[-2], a[-1], stop))
        return stop

    def spy_eager(*a):
        calls.append(("eager", a[-2], a[-1]))
        eager(*a)

    monkeypatch.setattr(_tiers, "_scalar", spy_scalar)
    monkeypatch.setattr(_tiers, "_array", spy_array)
    monkeypatch.setattr(_tiers, "_common", spy_common)
    monkeypatch.setattr(_tiers, "_rare", spy_rare)
    monkeypatch.setattr(_tiers, "_common_run", spy_run)
    monkeypatch.setattr(_tiers, "_common_lines", spy_lines)
    monkeypatch.setattr(_tiers, "_scalar_first", False)  # (as in a new process)
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
    "cumsum": lambda h, x: np.cumsum(h, axis=1),  # (this and below: the rare tier's)
    "cumprod": lambda h, x: np.cumprod(1.0 + 0.1 * np.tanh(h), axis=0),
    "arctan2": lambda h, x: np.arctan2(h, 1.0 + x * x),
    "hypot": lambda h, x: np.hypot(h, 0.5 + x * x),
    "logaddexp": lambda h, x: np.logaddexp(h, x) - 1.0,
    "fmax_fmin": lambda h, x: np.fmin(np.fmax(h, 0.2 * x), 1.5),
    "fmod": lambda h, x: np.fmod(h, 0.7) + np.remainder(x, 0.9) * h,
    "arctan2_column": lambda h, x: np.arctan2(h, 1.0 + x[:, :1] ** 2),  # (strided: eager)
    "hypot_param": lambda h, x: np.hypot(h, x[0, 0]),  # (sums into a 0-d operand: eager)
}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(sorted(_STEPS)), min_size=1, max_size=6),
       st.sampled_from([(1, 1), (1, 5), (4, 1), (3, 4), (64, 80)]), st.integers(0, 2 ** 16))
def test_random_array_programs_give_the_full_sweeps_bits(steps, shape, seed):
    """Random chains of array rows, of each tier's kinds, on shapes with size-1
    axes (one-element operands, broadcasts) and of 5120 elements (blocked runs, which the
    common tier cuts at a rare row): the tiers' bits are the full sweep's."""
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


def test_a_scalar_loop_over_array_rows_goes_to_the_array_tier_alone(tiers):
    """The array tier sweeps the 0-d rows on top too: the scalar tier is not compiled for it."""
    tape.grad(scalars_over_arrays)(np.linspace(-1.0, 1.0, 7))
    assert [c[0] for c in tiers] == ["array"]
    _, lo, hi, stop = tiers[0]
    assert stop == lo == 0 and hi > 60  # (the loop's rows and the sum's)


@pytest.mark.parametrize("f, after", [
    (lambda x: np.sum(np.sin(x) * x), ["array"]),
    (lambda x: np.sum(np.clip(x, 0.0, 0.5) * x), ["common"]),
    (lambda x: np.sum(np.cumsum(x) * x), ["common", "rare", "common"])])
def test_once_the_scalar_tier_is_loaded_it_goes_first(tiers, f, after):
    """After a scalar loop, the scalar tier takes the top of every tape, and its scan (then
    the NumPy scan of the rows it left, when they are not all the array tier's) chooses the
    rest; the full sweep's bits."""
    from jit import _tiers

    tape.grad(lorenz)(np.array([10.0, 28.0, 8.0 / 3.0]))
    assert _tiers._scalar_first
    tiers.clear()
    x = np.linspace(-1.0, 1.0, 7)
    tape.grad(f)(x)
    assert [c[0] for c in tiers] == ["scalar"] + after, tiers
    _, lo, hi, ret = tiers[0]
    assert tiers[1][2] == (-1 - ret if ret < 0 else ret) and (ret < 0) == (after != ["array"])
    assert_tiers_give_full_bits(f, x)


def test_an_array_tape_goes_to_the_array_tier_at_once(tiers):
    tape.grad(lambda x: np.sum(np.sin(x) * x))(np.linspace(-1.0, 1.0, 7))  # (top row: the sum)
    assert [c[0] for c in tiers] == ["array"]
    _, lo, hi, stop = tiers[0]
    assert stop == lo


@pytest.mark.parametrize("f", [lambda x: np.sum(np.maximum(x, 0.2) * x),
                               lambda x: np.sum(np.where(x > 0.0, x, 0.5 * x) ** 2),
                               lambda x: np.sum(np.clip(x, -0.5, 0.5) ** 1.5),
                               lambda x: np.sum(np.reshape(x[:4], (2, 2)) @ np.ones((2, 2)))])
def test_the_usual_rows_go_to_the_common_tier(tiers, f):
    """x ** p, np.maximum, np.minimum (np.clip), np.where and a matmul are the common tier's:
    the scan says a row is not the array tier's, and the common tier sweeps them all."""
    tape.grad(f)(np.linspace(-1.0, 1.0, 7))
    assert [c[0] for c in tiers] == ["common"]
    _, lo, hi, stop = tiers[0]
    assert stop == lo < hi


@pytest.mark.parametrize("f", [lambda x: np.sum(np.cumsum(x) * x),
                               lambda x: np.sum(np.arctan2(x, 1.5)),
                               lambda x: np.sum(np.hypot(x, 2.0) ** 2),
                               lambda x: np.sum(np.fmax(x, 0.2) * x),
                               lambda x: np.sum(np.logaddexp(np.fmod(x, 0.5), x) * x)])
def test_the_rare_rows_go_to_the_rare_tier(tiers, f):
    """A scan or a rare binary row: the common tier sweeps from the top down to it, the rare
    tier sweeps it (and the rare rows right below it), the common tier goes on below: each
    call goes on where the last stopped, and the eager tier is not called."""
    tape.grad(f)(np.linspace(-1.0, 1.0, 7))
    names = [c[0] for c in tiers]
    assert names[:2] == ["common", "rare"] and "eager" not in names
    assert names == ["common", "rare"] * (len(names) // 2) + ["common"] * (len(names) % 2)
    _, lo, hi, _ = tiers[0]
    for (_, lo1, _, stop), (_, lo2, hi2, _) in zip(tiers, tiers[1:]):
        assert lo1 == lo2 == lo and hi2 == stop
    assert tiers[-1][3] == lo and all(c[3] < c[2] for c in tiers[1:])


@pytest.mark.parametrize("f", [lambda x: np.sum(np.arctan2(x[:, None], x[None, :])),
                               lambda x: np.sum(np.hypot(x, x[0]) * x),
                               lambda x: np.sum(np.cumsum(x) * np.fmod(x, x[2]))])
def test_a_rare_row_the_rare_tier_leaves_goes_to_the_eager_tier_alone(tiers, f):
    """A rare binary row broadcast by strides, or whose one-element operand's adjoint sums its
    terms (``_reverse_binary_lines``' work, which the rare tier does not compile): the eager
    tier sweeps the tape alone."""
    x = np.linspace(-1.0, 1.0, 7)
    tape.grad(f)(x)
    assert [c[0] for c in tiers] == ["eager"]
    assert_tiers_give_full_bits(f, x)


def test_a_rare_row_inside_a_blocked_run(tiers):
    """A blocked run (>= 4096 elements) with rare rows in it: the common tier's runs
    (``common_run_sweep``) sweep the part of the run above the highest, the rare tier the rare
    rows, the common tier's runs the rest of the run block by block: the run's bits, no eager
    tier."""
    def f(x):
        h = np.tanh(x) * x
        h = np.arctan2(h, 1.0 + x * x) * 0.5 + x
        h = np.hypot(np.exp(-h), x) - h
        return np.sum(np.logaddexp(h, 0.3) * h)

    x = np.linspace(-2.0, 2.0, 6000)
    assert_tiers_give_full_bits(f, x)
    tiers.clear()
    tape.grad(f)(x)
    names = [c[0] for c in tiers]
    assert names.count("rare") == 3 and "eager" not in names, tiers
    assert names.count("run") >= 3 and all(c[3] < c[2] for c in tiers if c[0] == "run"), tiers


def test_the_common_tier_leaves_blocked_runs_to_its_run_entry(tiers):
    """A typical program on large arrays: the common tier stops above each blocked run (-1 -
    the row above it), which ``common_run_sweep`` sweeps whole; the full sweep's bits."""
    def f(x):
        h = np.clip(x, -0.5, 0.8) ** 2 + np.where(x > 0.3, x, 0.5 * x)
        return np.sum(np.tanh(h) * x) + np.max(x) * np.sum(np.maximum(x, 0.1) ** 1.5)

    x = np.linspace(-1.0, 1.0, 5000)
    assert_tiers_give_full_bits(f, x)
    tiers.clear()
    tape.grad(f)(x)
    names = [c[0] for c in tiers]
    assert "run" in names and set(names) == {"common", "run"}, tiers
    for (name, _, _, stop), nxt in zip(tiers, tiers[1:]):
        assert (name == "common" and stop < 0) == (nxt[0] == "run")
        assert nxt[2] == (-1 - stop if stop < 0 else stop)


@pytest.mark.parametrize("f, split", [
    (lambda x: np.sum(np.maximum(x[:, None], x[None, :]) ** 2), 1),  # (strided)
    (lambda x: np.sum(np.minimum(x, x[0]) * x), 1),  # (x[0]'s adjoint sums its terms)
    (lambda x: np.sum((x[:, None] - x[None, :] ** 1.5) * np.clip(x, 0.0, 0.5)), 2)])
def test_a_split_binary_row_goes_to_the_common_tiers_lines_entry(tiers, f, split):
    """A binary row of the common tier's ops broadcast by strides, or whose one-element
    operand's adjoint sums its terms: the common tier stops above it, ``common_lines_sweep``
    sweeps that row alone, the common tier goes on; the full sweep's bits."""
    x = np.linspace(-1.0, 1.0, 7)
    assert_tiers_give_full_bits(f, x)
    tiers.clear()
    tape.grad(f)(x)
    names = [c[0] for c in tiers]
    assert names == ["common", "lines"] * split + ["common"], tiers
    for (_, _, _, stop), (_, _, hi, _) in zip(tiers, tiers[1:]):
        assert hi == stop
    assert all(c[3] == c[2] - 1 for c in tiers if c[0] == "lines")


def test_an_unneeded_rare_row_keeps_the_common_tier(tiers):
    """Only needed rows count: a cumsum recorded but not on the output's path."""
    f = lambda x: (np.cumsum(x), np.sum(np.clip(x, 0.0, 0.5)))[1]  # noqa: E731
    tape.grad(f)(np.linspace(-1.0, 1.0, 7))
    assert [c[0] for c in tiers] == ["common"]


def test_an_unneeded_row_of_another_kind_keeps_the_array_tier(tiers):
    """Only needed rows count: a maximum recorded but not on the output's path."""
    f = lambda x: (np.maximum(x, 0.0), np.sum(np.exp(x)))[1]  # noqa: E731
    tape.grad(f)(np.linspace(-1.0, 1.0, 7))
    assert [c[0] for c in tiers] == ["array"]


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


# -- a tier refuses what it does not sweep --------------------------------------------------------

_ENTRY_OF = {"_scalar": "scalar_sweep", "_array": "array_sweep", "_common": "common_sweep",
             "_common_run": "common_run_sweep", "_common_lines": "common_lines_sweep",
             "_rare": "rare_sweep", "_eager": "eager_sweep"}


def _probe_tier(monkeypatch, f, args, probe, stand_in):
    """Run probe(arrays) inside f's backward, while its arrays are alive, before the first
    call of the tier `stand_in` (a name of ``jit._tiers``)."""
    from jit import _interp, _tiers

    tier = load(_interp, _ENTRY_OF[stand_in])
    seen = []

    def spy(*a):
        if not seen:
            seen.append(probe(a))
        return tier(*a)

    monkeypatch.setattr(_tiers, stand_in, spy)
    tape.grad(f)(*args)
    assert seen
    return seen[0]


def _probe_scalar_tier(monkeypatch, f, args, probe, stand_in="_scalar"):
    """probe(scalar_sweep, arrays), as ``_probe_tier``."""
    from jit import _interp

    scalar = load(_interp, "scalar_sweep")
    return _probe_tier(monkeypatch, f, args, lambda a: probe(scalar, a), stand_in)


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
        monkeypatch, scalars_over_arrays, (np.linspace(-1.0, 1.0, 7),), probe, "_array")
    assert stop > 0 and name == "sum" and k >= 0 and nd & 1
    assert np.all(operand == 0.0)


_OWN = {"add", "subtract", "multiply", "divide", "sum", "exp", "neg", "copy", "gather"}
_COMMON = _OWN | {"maximum", "power", "where", "matmul"}


@pytest.mark.parametrize("chain, stops_at, sweeps", [
    (("array_sweep",), {"matmul", "maximum", "power", "where", "cumsum"}, _OWN),
    (("common_sweep",), {"cumsum"}, _COMMON),
    (("rare_sweep",), _COMMON, set()),
    (("common_sweep", "rare_sweep"), _COMMON, {"cumsum"})])
def test_a_tier_stops_above_a_row_it_does_not_sweep(monkeypatch, chain, stops_at, sweeps):
    """Called from the top of a tape with rows of every tier (or from where the common tier
    stopped), a tier stops above the highest needed row it does not sweep (every row above it
    swept, that row not), and the eager tier from there gives the full sweep's bits: a tier
    never sweeps a row wrongly, whoever calls it."""
    from jit import _interp

    entries = [load(_interp, e) for e in chain]
    eager = load(_interp, "eager_sweep")

    def probe(a):
        R, S, VA, GO, sv, G, IA, FA, need, lo, hi = a
        full = G.copy()
        jit.reverse_sweep(R, S, VA, GO, sv, full, IA, FA, need.copy(), lo, hi)
        tiered = G.copy()
        stop = hi
        for entry in entries:
            top, stop = stop, entry(R, S, VA, GO, sv, tiered, IA, FA, need.copy(), lo, stop)
        row = stop - 1
        kinds = {jit.TABLE[R[r, 0] & 255].name for r in range(stop, top)
                 if need[r] and R[r, 3] >= 0}
        eager(R, S, VA, GO, sv, tiered, IA, FA, need.copy(), lo, stop)
        return stop, jit.TABLE[R[row, 0] & 255].name, kinds, tiered, full

    stop, name, kinds, tiered, full = _probe_tier(
        monkeypatch, lambda x: other_rows(x, np.ones((3, 2))), (np.linspace(0.1, 1.2, 12),),
        probe, "_common")
    assert stop > 0
    assert name in stops_at
    assert kinds <= sweeps and (kinds or not sweeps), kinds
    assert_same_bits(tiered, full)


def test_the_scan_gives_a_gather_with_a_plans_need_bit_to_the_array_tier():
    """A tape of 0-d rows and gathers is the scalar tier's, unless a gather has a need bit the
    scalar tier does not sweep (a compiled plan's); a rare binary row the rare tier leaves makes
    it the eager tier's."""
    from jit import _interp
    from jit._tiers import ARRAY, COMMON, EAGER, RARE, SCALAR, tier_of

    op = jit.OPCODE
    R = np.array([[0, -1, -1, 0],  # (an input row of 5 elements)
                  [op["gather"], 0, -1, 1],  # p[0]
                  [op["sin"], 1, -1, -1]], np.int64)
    need = np.array([0, 1, 1], np.uint8)
    assert tier_of(R, need, 0, 3) == SCALAR
    for bit in (FRESH_A, LOCAL, SEEDED, VALUES):
        assert tier_of(R, need | np.array([0, bit, 0], np.uint8), 0, 3) == ARRAY
    R[1, 0] = op["maximum"]
    assert tier_of(R, need, 0, 3) == COMMON
    R[1, 0] = op["arctan2"]
    assert tier_of(R, need, 0, 3) == RARE
    assert tier_of(R, np.array([0, 0, 1], np.uint8), 0, 3) == SCALAR  # (not needed)
    for flags, bits in ((16, 1), (2, 2), (1, 1)):  # strided; b, a one element with its adjoint
        R[1, 0] = op["arctan2"] | flags << 8
        assert tier_of(R, np.array([0, bits, 1], np.uint8), 0, 3) == EAGER
    R[1, 0] = op["arctan2"] | 2 << 8  # (b one element, whose adjoint is not needed)
    assert tier_of(R, need, 0, 3) == RARE
    assert _interp._RARE_TIER[op["cumsum"]] and not _interp._COMMON_TIER[op["cumsum"]]


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
print(*(len(getattr(_interp, n).signatures)
        for n in ("scalar_sweep", "array_sweep", "common_sweep", "eager_sweep", "sweep")))
"""


@pytest.mark.skipif(NO_JIT, reason="nothing is compiled")
def test_a_scalar_loops_first_gradient_compiles_the_scalar_tier_alone(tmp_path):
    """W1's first gradient on an empty cache compiles ``scalar_sweep`` (and the small plans),
    no other tier and not ``sweep``; the bits are a warm process's; the notice, if any, names
    the eager gradient's kernels."""
    script = tmp_path / "first.py"
    script.write_text(_FIRST_W1.format(bench=str(ROOT / "asv_bench" / "benchmarks")))
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    values, counts = r.stdout.split("\n")[:2]
    assert counts.split() == ["1", "0", "0", "0", "0"]
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
{rare}
v, g = tape.value_and_grad(rare)(np.linspace(-1.0, 1.0, 12))
print(repr(float(v)), *(repr(float(x)) for x in g.ravel()))
print(*(len(getattr(_interp, n).signatures) for n in {entries!r}))
"""
_TYPICAL = """
def typical(x):
    h = np.clip(x, -0.5, 0.8) ** 2 + np.maximum(x, 0.1) ** 1.5 + np.where(x > 0.3, x, 0.5 * x)
    return np.sum(np.abs(h)) + np.sum(np.reshape(x[:6], (2, 3)) @ np.ones((3, 2)))
"""
_RARE = """
def rare(x):
    return np.sum(np.cumsum(x ** 2) * x) + np.sum(np.arctan2(x, 1.5 + x))
"""
_ENTRIES = ("scalar_sweep", "array_sweep", "common_sweep", "common_run_sweep",
            "common_lines_sweep", "rare_sweep", "eager_sweep", "sweep", "elementwise_unary",
            "elementwise_power", "elementwise_arctan2", "elementwise_hypot")


@pytest.mark.skipif(NO_JIT, reason="nothing is compiled")
def test_an_array_programs_first_gradient_compiles_what_its_rows_need(tmp_path):
    """W2's first gradient on an empty cache compiles the array tier and the unary rows'
    forward entry (exp, log), not the scalar, common, rare or eager tier, ``sweep`` or the
    binary rows' forward entries; then a typical program's (x ** p, np.clip, np.where, a matmul)
    adds the common tier and the power rows' forward entry alone; then one with a cumsum and an
    arctan2 the rare tier and the rare binary rows' forward entry, not the eager tier. The bits
    are a warm process's; one notice says so for all of them."""
    script = tmp_path / "first.py"
    script.write_text(_FIRST_ARRAY.format(bench=str(ROOT / "asv_bench" / "benchmarks"),
                                          entries=_ENTRIES, typical=_TYPICAL, rare=_RARE))
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=900, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    values, counts, values2, counts2, values3, counts3 = r.stdout.split("\n")[:6]
    expected = {"scalar_sweep": "0", "array_sweep": "1", "common_sweep": "0",
                "common_run_sweep": "0", "common_lines_sweep": "0", "rare_sweep": "0",
                "eager_sweep": "0", "sweep": "0",
                "elementwise_unary": "1", "elementwise_power": "0", "elementwise_arctan2": "0",
                "elementwise_hypot": "0"}
    assert dict(zip(_ENTRIES, counts.split())) == expected
    expected.update(common_sweep="1", elementwise_power="1")
    assert dict(zip(_ENTRIES, counts2.split())) == expected
    expected.update(rare_sweep="1", elementwise_arctan2="1")
    assert dict(zip(_ENTRIES, counts3.split())) == expected
    v, g = tape.value_and_grad(workloads.gmm_loss)(*workloads.gmm_inputs(d=3, k=4, n=30))
    assert [float(s) for s in values.split()] == [float(v), *map(float, g.ravel())]
    space = {"np": np}
    exec(_TYPICAL, space)
    v, g = tape.value_and_grad(space["typical"])(np.linspace(-1.0, 1.0, 12))
    assert [float(s) for s in values2.split()] == [float(v), *map(float, g.ravel())]
    exec(_RARE, space)
    v, g = tape.value_and_grad(space["rare"])(np.linspace(-1.0, 1.0, 12))
    assert [float(s) for s in values3.split()] == [float(v), *map(float, g.ravel())]
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
tape.grad(lambda v: np.sum(np.maximum(v, 0.3) ** 1.5 + np.arctan2(v, 2.0)))(x)  # rare tier
tape.grad(lambda v: np.sum(np.hypot(v, v[0]) + np.cumsum(v)))(x)  # eager tier
tape.grad(lambda v: np.sum(np.clip(v, 0.2, 0.9) ** 2 * v))(np.linspace(0.1, 1.2, 5000))  # runs
tape.grad(lambda v: np.sum(np.maximum(v[:, None] - v[None, :], 0.1) ** 2))(x)  # common lines
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
