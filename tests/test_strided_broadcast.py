"""Binary rows that broadcast by strides (flag 16) instead of through index maps.

The recorder describes a broadcast that collapses to at most three dimensions as a loop nest with
element strides (``tape.core.record.strided_broadcast``); the forward and reverse sweeps then read the
operands in place. Values and gradients must be those of the index-map path bit for bit (same
arithmetic, adjoints accumulated in the same order), and those of NumPy for the values.
"""
from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import jit
import tape
from tape.core import record as _record
from tape.core.record import strided_broadcast

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
OPS = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
       "hypot": np.hypot, "maximum": np.maximum, "power": np.power, "logaddexp": np.logaddexp}


def test_descriptor_hand_derived():
    # W2's centring: x[None] (1000, 10) against means[:, None] (25, 1, 10)
    assert strided_broadcast((25, 1000, 10), (1, 1000, 10), 0, (25, 1, 10), 0) == (
        25, 1000, 10, 0, 10, 1, 10, 0, 1)
    # a full operand collapses with the broadcast one's outer dimensions
    assert strided_broadcast((2, 3, 4), None, 0, (4,), 0) == (1, 6, 4, 0, 4, 1, 0, 0, 1)
    # a one-element operand reads element 0 everywhere
    assert strided_broadcast((3, 5), (3, 1), 0, None, 1) == (1, 3, 5, 0, 1, 0, 0, 0, 0)
    # size-1 dimensions drop out
    assert strided_broadcast((1, 3, 1, 2), (1, 1, 1, 2), 0, None, 0) == (
        1, 3, 2, 0, 0, 1, 0, 2, 1)
    # four alternating broadcast dimensions do not collapse: the row keeps its index maps
    assert strided_broadcast((2, 3, 4, 5), (2, 1, 4, 1), 0, (1, 3, 1, 5), 0) == ()
    assert strided_broadcast((0, 3), (0, 1), 0, None, 0) == ()  # nothing to loop over


def _row_flags(f, *args):
    cf = tape.compile(f, *args, argnums=tuple(range(len(args))))
    A = next(reversed(cf.variants.values())).A
    return [int(c) >> 8 for c in A.R[:, 0]]


def test_recorder_sets_the_flag_only_when_the_nest_fits():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(4, 1, 3)), rng.normal(size=(5, 1))
    assert any(fl & 16 for fl in _row_flags(lambda a, b: np.sum(a * b), a, b))
    a, b = rng.normal(size=(2, 1, 4, 1)), rng.normal(size=(3, 1, 5))
    flags = _row_flags(lambda a, b: np.sum(a * b), a, b)
    assert any(fl & 12 for fl in flags) and not any(fl & 16 for fl in flags)


def _value_and_grads(op, a, b, compiled):
    shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    weights = np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape)  # no symmetric cancellation
    f = lambda a, b: np.sum(op(a, b) * weights)  # noqa: E731
    if compiled:
        cf = tape.compile(f, a, b, argnums=(0, 1))
        return cf(a, b), cf.value_and_grad(a, b)
    return None, tape.value_and_grad(f, argnums=(0, 1))(a, b)


@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4,
                                                min_side=0, max_side=4),
       name=st.sampled_from(sorted(OPS)), seed=st.integers(0, 2 ** 32 - 1))
def test_strides_equal_index_maps_bit_for_bit(shapes, name, seed, monkeypatch_module):
    (sa, sb), _ = shapes
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(0.5, 2.0, size=sa), rng.uniform(-2.0, 2.0, size=sb)
    op = OPS[name]
    results = {}
    for strided in (True, False):
        with monkeypatch_module.context() as m:
            if not strided:
                m.setattr(_record, "strided_broadcast", lambda *args: ())
            results[strided] = (_value_and_grads(op, a, b, False),
                                _value_and_grads(op, a, b, True))
    (_, eager), (value, replay) = results[True]
    (_, eager_maps), (value_maps, replay_maps) = results[False]
    for x, y in ((eager, eager_maps), (replay, replay_maps), (replay, eager)):
        assert x[0] == y[0] or (np.isnan(x[0]) and np.isnan(y[0]))
        for gx, gy in zip(x[1], y[1]):
            np.testing.assert_array_equal(gx, gy)
    assert value == value_maps == replay[0]


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as m:
        yield m


def test_gradient_against_hand_derived_broadcast():
    # d/dmeans sum((x[None] - means[:, None]) ** 2) = -2 sum_i (x_i - mean_k)
    rng = np.random.default_rng(3)
    x, means = rng.normal(size=(7, 3)), rng.normal(size=(4, 3))
    f = lambda means, x: np.sum((x[None, :, :] - means[:, None, :]) ** 2)  # noqa: E731
    expected = -2.0 * (x.sum(axis=0)[None, :] - 7 * means)
    cf = tape.compile(f, means, x)
    assert any(int(c) >> 8 & 16 for c in next(reversed(cf.variants.values())).A.R[:, 0])
    np.testing.assert_allclose(cf.grad(means, x), expected, rtol=1e-13)
    np.testing.assert_allclose(tape.grad(f)(means, x), expected, rtol=1e-13)


def _saved(tmp_path):
    rng = np.random.default_rng(4)
    x, means = rng.normal(size=(6, 3)), rng.normal(size=(5, 3))
    f = lambda means, x: np.sum(np.tanh(x[None, :, :] - means[:, None, :]))  # noqa: E731
    buf = io.BytesIO()
    tape.compile(f, means, x).save(buf)
    files = dict(np.load(io.BytesIO(buf.getvalue()), allow_pickle=False))
    row = next(i for i, c in enumerate(files["R"][:, 0]) if c >> 8 & 16)
    k = files["R"][row, 3]
    return files, files["S"][k, 1], (means, x)


@pytest.mark.parametrize("where, value", [(0, 7), (2, 4), (3, 2), (5, 2), (7, 1 << 40),
                                          (8, -1)])
def test_load_rejects_a_corrupt_loop_nest(tmp_path, where, value):
    files, iat, _ = _saved(tmp_path)
    files["IA"] = files["IA"].copy()
    files["IA"][iat + 2 + where] = value
    bad = tmp_path / "bad.npz"
    np.savez(bad, **files)
    with pytest.raises(ValueError, match="broadcast"):
        tape.load(bad)


def test_saved_loop_nest_round_trip(tmp_path):
    files, _, (means, x) = _saved(tmp_path)
    path = tmp_path / "ok.npz"
    np.savez(path, **files)
    cf = tape.load(path)
    f = lambda means, x: np.sum(np.tanh(x[None, :, :] - means[:, None, :]))  # noqa: E731
    v, g = cf.value_and_grad(means, x)
    v0, g0 = tape.value_and_grad(f)(means, x)
    assert abs(v - v0) <= 1e-14 * abs(v0)
    np.testing.assert_allclose(g, g0, rtol=1e-13)


@pytest.mark.parametrize("sa, sb", [((25, 1), (25, 40)), ((1, 40), (25, 40)), ((40,), (3, 5, 40)),
                                    ((3, 1, 40), (3, 5, 40)), ((5, 1), (5, 33)),
                                    ((25, 40), (25, 1)), ((2, 3, 40), (2, 3, 1))])
def test_long_lines_reverse_equals_index_maps(sa, sb, monkeypatch):
    """Reverse of a broadcast with inner lines of LINE or more elements goes line by line (an
    operand at inner stride 0 as a one-element one, whose adjoint an add or subtract sums in a
    register): the same bits as through the maps."""
    rng = np.random.default_rng(len(sa) + len(sb))
    a, b = rng.normal(size=sa), rng.normal(size=sb)
    f = lambda a, b: np.sum(np.sin(a - b) * (a * b)) + np.sum(np.cos(b + a) ** 2)  # noqa: E731
    lines = tape.value_and_grad(f, argnums=(0, 1))(a, b)
    replay = tape.compile(f, a, b, argnums=(0, 1)).value_and_grad(a, b)
    monkeypatch.setattr(_record, "strided_broadcast", lambda *args: ())
    maps = tape.value_and_grad(f, argnums=(0, 1))(a, b)
    for got in (lines, replay):
        assert got[0] == maps[0]
        for g, h in zip(got[1], maps[1]):
            np.testing.assert_array_equal(g, h)


BINARY = [p for p in jit.TABLE if p.family == "binary" and p.ufunc is not None]


@pytest.mark.parametrize("p", BINARY, ids=[p.name for p in BINARY])
def test_one_element_partner_read_once_equals_a_full_one(p):
    """An operand's adjoint whose partner has one element (x * s, s ** x) reads that element
    once, before a contiguous loop: the same arithmetic as with the partner repeated to full
    size (which takes the plain contiguous loop), bit for bit, in both operand orders."""
    rng = np.random.default_rng(5)
    x = rng.uniform(0.5, 2.0, size=300)
    for c in (np.array([1.25]), np.array([-0.75])):
        if p.name in ("power", "float_power") and c[0] < 0:
            continue
        full = np.full_like(x, c[0])
        for order in (0, 1):
            def f(x, c):
                u, v = (x, c) if order == 0 else (c, x)
                return np.sum(p.ufunc(u, v) * np.linspace(0.5, 1.5, x.size))

            g_one = tape.grad(f)(x, c)
            g_full = tape.grad(f)(x, full)
            np.testing.assert_array_equal(g_one, g_full)
            np.testing.assert_array_equal(tape.compile(f, x, c).grad(x, c), g_one)
