"""Eager values computed by tapejit's own loops where NumPy's iteration is slow
(``tape.core.loop_values``): + - * / of two broadcast operands, and sums over short last axes.

The contract: the same bits as NumPy's value (NaN where NumPy has NaN), NumPy's floating-point
warnings and errors under the user's ``np.errstate`` (warned, ignored or raised), gradients and
tangents bit for bit those of the path that computes with NumPy, eager and replay alike.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import tape
from tape.core import loop_values, record, reductions

OPS = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide}
SPECIAL = (math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, -1e308, 5e-324, 1e-300, 1e300)
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _values(shape, seed, special, zeros):
    """Normal values, with some of `special`'s values (and exact zeros) at random places."""
    rng = np.random.default_rng(seed)
    v = rng.normal(size=shape) * 10.0 ** rng.integers(-3, 4)
    if v.size and special:
        idx = rng.integers(0, v.size, size=min(v.size, 3))
        v.flat[idx] = rng.choice(np.array(special), size=idx.size)
    if v.size and zeros:
        v.flat[rng.integers(0, v.size)] = 0.0
    return v


def _same(got, want):
    """Bit for bit, NaN payloads aside (the sign and place of every zero and NaN too)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    assert got[~nan].tobytes() == want[~nan].tobytes()


def _outcome(f, err):
    """(value or None, FloatingPointError message or None, the RuntimeWarnings' messages) of f()
    under np.errstate(**err)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(**err):
            try:
                y, raised = f(), None
            except FloatingPointError as e:
                y, raised = None, str(e)
    return y, raised, sorted(str(w.message) for w in caught if w.category is RuntimeWarning)


def _spy(monkeypatch, module, name):
    """Count the calls of module.name that return a value (the loop ran)."""
    real = getattr(module, name)
    hits = []

    def spy(*args):
        y = real(*args)
        hits.append(y is not None)
        return y

    monkeypatch.setattr(module, name, spy)
    return hits


# ---------------------------------------------------------------------------------------------
# Broadcast binary rows

INNER = (1, 2, 3, 7, 8, 9, 10, 16, 100, 4095, 4096, 4097)


@st.composite
def broadcast_pairs(draw):
    """Two shapes that broadcast, both operands broadcast, results around MIN_CELLS and inner
    lines around MAX_LINE."""
    d = draw(st.sampled_from(INNER))
    k = draw(st.integers(2, 40))
    m = max(1, -(-loop_values.MIN_CELLS // (k * d)) + draw(st.integers(-2, 3)))
    pattern = draw(st.integers(0, 4))
    if pattern == 0:
        return (1, m, d), (k, 1, d)
    if pattern == 1:
        return (k, 1, d), (1, m, d)
    if pattern == 2:
        return (m, d), (k, 1, d)
    if pattern == 3:
        return (m, 1), (1, k * d)
    return (k, 1, 1, d), (1, m, 2, d)


ERRSTATES = ({"all": "warn"}, {"all": "ignore"}, {"all": "raise"},
             {"over": "warn", "invalid": "warn", "divide": "warn", "under": "ignore"},
             {"over": "raise", "invalid": "raise", "divide": "raise", "under": "ignore"},
             {"over": "ignore", "invalid": "ignore", "divide": "ignore", "under": "ignore"})


@SETTINGS
@given(shapes=broadcast_pairs(), name=st.sampled_from(sorted(OPS)), seed=st.integers(0, 2**16),
       special=st.sampled_from(((), SPECIAL[:3], SPECIAL[3:5], SPECIAL[5:7], SPECIAL[7:])),
       zeros=st.booleans(), err=st.sampled_from(ERRSTATES))
def test_broadcast_value_is_numpys(shapes, name, seed, special, zeros, err):
    """Value, warnings and errors of a recorded broadcast op are NumPy's."""
    sa, sb = shapes
    a, b = _values(sa, seed, special, zeros), _values(sb, seed + 1, special, zeros)
    ta = tape.tensor(a, requires_grad=True)
    want, want_raised, want_warned = _outcome(lambda: OPS[name](a, b), err)
    got, raised, warned = _outcome(lambda: OPS[name](ta, b), err)
    assert raised == want_raised and warned == want_warned
    if want is not None:
        _same(_numpy_of(got), want)


def _numpy_of(t):
    return np.asarray(t.numpy() if isinstance(t, tape.Tensor) else t)


def test_w2_centring_runs_the_loop(monkeypatch):
    """The loop takes W2's centring (x[None] - means[:, None]) and the value is NumPy's; small,
    one-sided, long-line and warning-prone cases stay NumPy's."""
    hits = _spy(monkeypatch, record, "broadcast_value")
    rng = np.random.default_rng(0)
    x, means = rng.normal(size=(1000, 10)), rng.uniform(size=(25, 10))
    m = tape.tensor(means, requires_grad=True)
    _same(_numpy_of(x[None] - m[:, None]), x[None] - means[:, None])
    assert hits == [True]
    for sa, sb in [((1, 60, 10), (25, 1, 10)),        # below MIN_CELLS
                   ((25, 1000, 10), (25, 1, 10)),     # one operand of the result's size
                   ((1, 2, 30000), (8, 1, 30000)),    # inner lines over MAX_LINE
                   ((1, 20, 1000), (30, 1, 1))]:      # an operand constant along the line
        hits.clear()
        a, b = rng.normal(size=sa), rng.normal(size=sb)
        _same(_numpy_of(tape.tensor(a, requires_grad=True) - b), a - b)
        assert hits == [False]
    hits.clear()
    big = np.full((1, 1000, 10), 1e308)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        _same(_numpy_of(tape.tensor(big, requires_grad=True) * (10 * means[:, None])),
              big * (10 * means[:, None]))
    assert hits == [True]  # every flag ignored: nothing to tell
    hits.clear()
    with pytest.warns(RuntimeWarning, match="overflow encountered in add"):
        y = tape.tensor(big, requires_grad=True) + np.full((25, 1, 10), 1e308)
    assert hits == [False] and np.all(_numpy_of(y) == np.inf)
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="divide by zero"):
        tape.tensor(x[None], requires_grad=True) / np.zeros((25, 1, 10))


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("sa, sb", [((1, 700, 10), (25, 1, 10)), ((25, 1, 3), (1, 900, 3)),
                                    ((600, 1, 4), (1, 40, 4))])
def test_broadcast_gradients_bit_for_bit(name, sa, sb, monkeypatch):
    """Eager, replay, forward mode and grad of grad with the loop: the bits of NumPy's path."""
    rng = np.random.default_rng(3)
    a, b = rng.uniform(0.5, 1.5, size=sa), rng.uniform(0.5, 1.5, size=sb)
    shape = np.broadcast_shapes(sa, sb)
    w = np.linspace(0.5, 1.5, math.prod(shape)).reshape(shape)
    ta, tb = rng.normal(size=sa), rng.normal(size=sb)

    def f(a, b):
        return np.sum(OPS[name](a, b) ** 2 * w)

    def run():
        eager = tape.value_and_grad(f, argnums=(0, 1))(a, b)
        cf = tape.compile(f, a, b, argnums=(0, 1))
        replay = cf.value_and_grad(a, b)
        fwd = tape.jvp(f, (a, b), (ta, tb))
        # d/da of <grad_b f, tb>: second order through the same broadcast row
        hvp = tape.grad(lambda a, b: np.sum(tape.grad(f, argnums=1)(a, b) * tb))(a, b)
        return eager, replay, fwd, hvp

    hits = _spy(monkeypatch, record, "broadcast_value")
    loop = run()
    assert any(hits)
    monkeypatch.setattr(record, "broadcast_value", lambda *args: None)
    plain = run()
    for (v1, g1), (v2, g2) in zip(loop[:2], plain[:2]):
        assert float(v1) == float(v2)
        for x, y in zip(g1, g2):
            _same(_numpy_of(x), _numpy_of(y))
    assert loop[0][0] == loop[1][0]  # eager and replay agree
    for x, y in zip(loop[0][1], loop[1][1]):
        _same(_numpy_of(x), _numpy_of(y))
    _same(_numpy_of(loop[2][0]), _numpy_of(plain[2][0]))
    _same(_numpy_of(loop[2][1]), _numpy_of(plain[2][1]))
    _same(_numpy_of(loop[3]), _numpy_of(plain[3]))


def test_broadcast_gradient_against_finite_differences():
    """A directional derivative of a function of both broadcast operands, by central
    differences (float64), and the tangent of the same direction."""
    rng = np.random.default_rng(4)
    a, b = rng.uniform(0.5, 1.5, size=(1, 800, 10)), rng.uniform(0.5, 1.5, size=(25, 1, 10))
    va, vb = rng.normal(size=a.shape), rng.normal(size=b.shape)

    def f(a, b):
        return np.sum(np.sin((a - b) * (a + b)) / (b * b + a))

    ga, gb = tape.grad(f, argnums=(0, 1))(a, b)
    h = 1e-6
    fd = (f(a + h * va, b + h * vb) - f(a - h * va, b - h * vb)) / (2 * h)
    got = float(np.sum(_numpy_of(ga) * va) + np.sum(_numpy_of(gb) * vb))
    assert abs(got - fd) <= 1e-6 * max(1.0, abs(fd))
    tangent = float(_numpy_of(tape.jvp(f, (a, b), (va, vb))[1]))
    assert abs(tangent - got) <= 1e-10 * max(1.0, abs(got))


def test_edge_shapes_keep_numpys_values():
    """0-d, size-1 and empty operands: NumPy's values (the loop does not take them)."""
    rng = np.random.default_rng(5)
    for sa, sb in [((), (30, 1, 10)), ((1,), (1, 3000, 10)), ((1, 1, 1), (20, 1, 1000)),
                   ((0, 10), (25, 1, 10)), ((1, 0, 10), (25, 1, 10))]:
        a, b = rng.normal(size=sa), rng.normal(size=sb)
        for name, f in OPS.items():
            got = f(tape.tensor(a, requires_grad=True), b)
            _same(_numpy_of(got), f(a, b))


# ---------------------------------------------------------------------------------------------
# Sums over short last axes

LINES = (1, 2, 3, 7, 8, 9, 10, 15, 16, 17, 63, 64, 65, 127, 128, 129)


@SETTINGS
@given(R=st.sampled_from(LINES), P=st.integers(0, 400), lead=st.integers(1, 3),
       keepdims=st.booleans(), axis=st.sampled_from((-1, "last")), seed=st.integers(0, 2**16),
       special=st.sampled_from(((), SPECIAL[:3], SPECIAL[3:5], SPECIAL[5:7], SPECIAL[7:])),
       err=st.sampled_from(ERRSTATES))
def test_line_sums_are_numpys(R, P, lead, keepdims, axis, seed, special, err):
    """np.sum over the last axis, recorded (the second call of a shape takes the plan and the
    loop): NumPy's bits, warnings and errors."""
    shape = (lead, -(-P // lead), R) if lead > 1 else (P, R)
    ax = -1 if axis == -1 else len(shape) - 1
    x = _values(shape, seed, special, False)
    t = tape.tensor(x, requires_grad=True)
    want = _outcome(lambda: np.sum(x, axis=ax, keepdims=keepdims), err)
    for _ in range(2):
        got = _outcome(lambda: np.sum(t, axis=ax, keepdims=keepdims), err)
        assert got[1:] == want[1:]
        if want[0] is not None:
            _same(_numpy_of(got[0]), want[0])


def test_w2_sum_runs_the_loop(monkeypatch):
    """The loop takes W2's np.sum(Qx * Qx, axis=2) from the shape's second call on; an inf or
    NaN sum is NumPy's again, with its warning."""
    monkeypatch.setattr(reductions, "_REDUCE_PLANS", {})  # (no plan from earlier tests)
    hits = _spy(monkeypatch, reductions, "line_sums")
    x = np.random.default_rng(6).normal(size=(25, 1000, 10))
    t = tape.tensor(x, requires_grad=True)
    for _ in range(3):
        _same(_numpy_of(np.sum(t * t, axis=2)), np.sum(x * x, axis=2))
    assert hits == [True, True]
    hits.clear()
    x[3, 4, :2] = 1e308
    t = tape.tensor(x, requires_grad=True)
    with pytest.warns(RuntimeWarning, match="overflow encountered in reduce"):
        y = np.sum(t, axis=2)
    assert hits == [False] and _numpy_of(y)[3, 4] == np.inf
    hits.clear()
    small = tape.tensor(x[:, 5:10, :], requires_grad=True)  # 125 lines: NumPy's
    np.sum(small, axis=-1)
    long = tape.tensor(np.ones((200, 129)), requires_grad=True)  # lines over MAX_SUM_LINE
    np.sum(long, axis=-1)
    np.sum(long, axis=0)  # not the last axis
    assert not any(hits)


@pytest.mark.parametrize("shape", [(3000, 10), (40, 50, 7), (300, 128)])
def test_line_sum_gradients_bit_for_bit(shape, monkeypatch):
    """Eager (loop) and replay of a function summed over short last axes: the same bits, and
    those of NumPy's path."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=shape)
    w = rng.normal(size=shape[:-1])

    def f(x):
        return np.sum(np.log(np.sum(x * x, axis=-1) + 1.0) * w)

    def run():
        vg = tape.value_and_grad(f)
        vg(x)
        eager = vg(x)  # (the shape's plan: the loop)
        replay = tape.compile(f, x).value_and_grad(x)
        hess_v = tape.jvp(tape.grad(f), (x,), (w[..., None] * np.ones(shape),))[1]
        return eager, replay, hess_v

    hits = _spy(monkeypatch, reductions, "line_sums")
    loop = run()
    assert any(hits)
    monkeypatch.setattr(reductions, "line_sums", lambda *args: None)
    plain = run()
    for got, want in [(loop[0], plain[0]), (loop[0], loop[1])]:
        assert float(got[0]) == float(want[0])
        _same(_numpy_of(got[1]), _numpy_of(want[1]))
    _same(_numpy_of(loop[2]), _numpy_of(plain[2]))


def test_line_sums_entry_any_line_length():
    """The jitted entry itself over lines longer than the recorder routes (NumPy's recursive
    pairwise halves from 129 elements on) and of signed zeros: NumPy's bits, and 0 for an
    inf or NaN sum."""
    rng = np.random.default_rng(8)
    for P, R in [(3, 129), (5, 300), (2, 1000), (4, 4097), (300, 1), (300, 9)]:
        x = rng.normal(size=(P, R))
        _same(loop_values.line_sums(x, P, R, (P,)), np.add.reduce(x, axis=1))
        z = np.full((P, R), -0.0)
        _same(loop_values.line_sums(z, P, R, (P,)), np.add.reduce(z, axis=1))
        x[P - 1, R // 2] = np.inf
        assert loop_values.line_sums(x, P, R, (P,)) is None
