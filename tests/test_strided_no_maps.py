"""Binary rows broadcast by strides (flag 16) record no index maps (issue 29).

Their reverse and tangent kernels read index maps that the sweeps write from the strides into a
scratch, a block at a time: gradients and tangents must be those of maps recorded whole, bit for
bit, also over more than one block (2048 elements) and with short inner lines; a file written
when strided rows still carried their maps loads and replays alike; hostile map words and
strides are refused.
"""
from __future__ import annotations

import io

import numpy as np
import pytest

import jit
import tape
from tape.core import record as _record

BINARY = [p for p in jit.TABLE if p.family == "binary" and p.ufunc is not None]
# short inner lines (10 < LINE), more than one block of 2048 elements, each operand broadcast
SHAPES = [((1, 300, 10), (7, 1, 10)), ((7, 1, 10), (1, 300, 10)), ((300, 1), (1, 9)),
          ((5, 1, 3), (5, 200, 3)), ((3, 10), (400, 3, 10))]


def _f(p, w):
    return lambda a, b: np.sum(p.ufunc(a, b) * w)


def _inputs(p, sa, sb, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.6, 1.9, size=sa)
    b = rng.uniform(0.6, 1.9, size=sb) * (1.0 if p.name in ("power", "float_power") else
                                          rng.choice((-1.0, 1.0), size=sb))
    shape = np.broadcast_shapes(sa, sb)
    w = np.linspace(0.5, 1.5, int(np.prod(shape))).reshape(shape)
    return a, b, w


def _grads_and_tangents(f, a, b, ta, tb):
    eager = tape.value_and_grad(f, argnums=(0, 1))(a, b)
    cf = tape.compile(f, a, b, argnums=(0, 1))
    replay = cf.value_and_grad(a, b)
    jvp = cf.jvp((a, b), (ta, tb))[1]
    fwd = tape.jvp(f, (a, b), (ta, tb))[1]
    return eager, replay, jvp, fwd, cf


@pytest.mark.parametrize("p", BINARY, ids=[p.name for p in BINARY])
@pytest.mark.parametrize("sa, sb", SHAPES)
def test_no_maps_equals_maps_bit_for_bit(p, sa, sb, monkeypatch):
    a, b, w = _inputs(p, sa, sb)
    rng = np.random.default_rng(1)
    ta, tb = rng.normal(size=sa), rng.normal(size=sb)
    f = _f(p, w)
    with np.errstate(all="ignore"):
        strided = _grads_and_tangents(f, a, b, ta, tb)
        monkeypatch.setattr(_record, "strided_broadcast", lambda *args: ())
        maps = _grads_and_tangents(f, a, b, ta, tb)
    cf = strided[4]
    A = next(reversed(cf.variants.values())).A
    n = int(np.prod(np.broadcast_shapes(sa, sb)))
    assert any(int(c) >> 8 & 16 for c in A.R[:, 0])
    assert A.IA.size < n  # no map of the result's size
    for got, ref in zip(strided[:2], maps[:2]):
        assert got[0] == ref[0] or (np.isnan(got[0]) and np.isnan(ref[0]))
        for g, h in zip(got[1], ref[1]):
            np.testing.assert_array_equal(g, h)
    np.testing.assert_array_equal(strided[2], maps[2])
    np.testing.assert_array_equal(strided[3], maps[3])


@pytest.mark.parametrize("sa, sb", SHAPES)
def test_no_maps_against_finite_differences(sa, sb):
    """The gradient and the tangent through blocked maps against central differences (float64,
    a smooth function of both broadcast operands)."""
    rng = np.random.default_rng(2)
    a, b = rng.uniform(0.5, 1.5, size=sa), rng.uniform(0.5, 1.5, size=sb)
    f = lambda a, b: np.sum(np.sin(a * b) / (1.0 + b) + a / b)  # noqa: E731
    cf = tape.compile(f, a, b, argnums=(0, 1))
    ga, gb = cf.grad(a, b)
    ta, tb = rng.normal(size=sa), rng.normal(size=sb)
    h = 1e-6
    fd = (f(a + h * ta, b + h * tb) - f(a - h * ta, b - h * tb)) / (2 * h)
    scale = abs(fd) + np.sum(np.abs(ga * ta)) + np.sum(np.abs(gb * tb))
    assert abs(np.sum(ga * ta) + np.sum(gb * tb) - fd) <= 1e-7 * scale
    assert abs(float(cf.jvp((a, b), (ta, tb))[1]) - fd) <= 1e-7 * scale
    assert abs(float(tape.jvp(f, (a, b), (ta, tb))[1]) - fd) <= 1e-7 * scale
    # second order through the strided rows: the Hessian-vector product against differences
    # of the gradient
    hv = cf.hvp((a, b), (ta, tb))
    gp = cf.grad(a + h * ta, b + h * tb)
    gm = cf.grad(a - h * ta, b - h * tb)
    for x, p_, m_ in zip(hv, gp, gm):
        fdh = (p_ - m_) / (2 * h)
        np.testing.assert_allclose(x, fdh, rtol=1e-5, atol=1e-6 * np.max(np.abs(fdh)))


def _saved():
    rng = np.random.default_rng(4)
    x, means = rng.normal(size=(300, 10)), rng.normal(size=(7, 10))
    f = lambda means, x: np.sum(np.tanh((x[None] - means[:, None]) * means[:, None]))  # noqa
    buf = io.BytesIO()
    tape.compile(f, means, x).save(buf)
    files = dict(np.load(io.BytesIO(buf.getvalue()), allow_pickle=False))
    rows = [i for i, c in enumerate(files["R"][:, 0]) if c >> 8 & 16 and c >> 8 & 12]
    return files, rows, f, (means, x)


def _load(files):
    out = io.BytesIO()
    np.savez(out, **files)
    out.seek(0)
    return tape.load(out)


def test_saved_rows_carry_no_maps_and_replay():
    files, rows, f, args = _saved()
    assert rows
    for r in rows:
        iat = files["S"][files["R"][r, 3], 1]
        assert list(files["IA"][iat:iat + 2]) == [-1, -1]
    v, g = _load(files).value_and_grad(*args)
    v0, g0 = tape.value_and_grad(f)(*args)
    assert v == v0
    np.testing.assert_array_equal(g, g0)


def test_file_with_maps_written_before_still_loads():
    """A strided row saved with its index maps (as before issue 29) loads, and its maps, still
    checked against its strides, are not read."""
    files, rows, f, args = _saved()
    IA = [files["IA"]]
    at = files["IA"].size
    for r in rows:
        k = files["R"][r, 3]
        n, iat = int(files["S"][k, 0]), int(files["S"][k, 1])
        n0, n1, n2, *s = (int(v) for v in files["IA"][iat + 2:iat + 11])
        i0, i1, i2 = np.ix_(np.arange(n0), np.arange(n1), np.arange(n2))
        fl = int(files["R"][r, 0]) >> 8
        for hi, (bit, st) in enumerate(((4, s[:3]), (8, s[3:]))):
            if fl & bit:
                IA.append((i0 * st[0] + i1 * st[1] + i2 * st[2]).reshape(-1).astype(np.int64))
                files["IA"][iat + hi] = at
                at += n
    files["IA"] = np.concatenate(IA)
    v, g = _load(files).value_and_grad(*args)
    v0, g0 = tape.value_and_grad(f)(*args)
    assert v == v0
    np.testing.assert_array_equal(g, g0)
    # a map that disagrees with the strides is refused
    files["IA"][-1] -= 1
    with pytest.raises(ValueError, match="broadcast strides"):
        _load(files)


@pytest.mark.parametrize("word, value, match", [(0, -2, "attributes out of range"),
                                                (1, 1 << 40, "attributes out of range"),
                                                (2 + 3 + 1, 10 ** 6, "broadcast")])
def test_load_refuses_hostile_words_of_a_row_without_maps(word, value, match):
    files, rows, _, _ = _saved()
    iat = files["S"][files["R"][rows[0], 3], 1]
    files["IA"][iat + word] = value
    with pytest.raises(ValueError, match=match):
        _load(files)
