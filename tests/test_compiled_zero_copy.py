"""A straight value_and_grad reads large inputs in place and accumulates large gradients straight
into the arrays it returns (tape.replay.plan.ZERO_COPY_SIZE): the results must be those of the
copying path, whatever the caller does with its arrays between calls."""
import numpy as np
import pytest

import tape
import tape.replay.plan as plan

N = plan.ZERO_COPY_SIZE + 3


def loss(x, w):
    return np.sum(np.tanh(x) * w + np.exp(-x * x) * np.sin(w)) + np.sum(x[:5] * w[-5:])


def _copying(monkeypatch):
    monkeypatch.setattr(plan, "ZERO_COPY_SIZE", 1 << 62)


@pytest.fixture
def data():
    rng = np.random.default_rng(5)
    return rng.normal(size=N), rng.normal(size=N)


def _reference(x, w, argnums):
    return tape.value_and_grad(loss, argnums=argnums)(x, w)


def _listed(g, argnums):
    return [g] if isinstance(argnums, int) else list(g)


@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1, 0)])
def test_matches_eager_and_copying_path(data, argnums, monkeypatch):
    x, w = data
    v, g = tape.compile(loss, x, w, argnums=argnums).value_and_grad(x, w)
    v0, g0 = _reference(x, w, argnums)
    np.testing.assert_allclose(v, v0, rtol=1e-13)
    for a, b in zip(_listed(g, argnums), _listed(g0, argnums)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    _copying(monkeypatch)
    vc, gc = tape.compile(loss, x, w, argnums=argnums).value_and_grad(x, w)
    assert vc == v
    for a, b in zip(_listed(g, argnums), _listed(gc, argnums)):
        np.testing.assert_array_equal(a, b)


def test_inputs_untouched_and_gradients_fresh(data):
    x, w = data
    x_in, w_in = x.copy(), w.copy()
    cf = tape.compile(loss, x, w, argnums=(0, 1))
    _, (gx, gw) = cf.value_and_grad(x, w)
    np.testing.assert_array_equal(x, x_in)
    np.testing.assert_array_equal(w, w_in)
    keep = gx.copy(), gw.copy()
    x2 = x + 0.5
    v2, (gx2, gw2) = cf.value_and_grad(x2, w)
    assert gx2 is not gx and not np.shares_memory(gx, gx2)
    np.testing.assert_array_equal(gx, keep[0])  # the first call's arrays are the caller's now
    np.testing.assert_array_equal(gw, keep[1])
    r2, (rx2, rw2) = _reference(x2, w, (0, 1))
    np.testing.assert_allclose(v2, r2, rtol=1e-13)
    np.testing.assert_allclose(gx2, rx2, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gw2, rw2, rtol=1e-12, atol=1e-14)


def test_caller_mutates_its_array_between_calls(data):
    x, w = data
    cf = tape.compile(loss, x, w)
    cf.value_and_grad(x, w)
    x[:] = np.linspace(-2, 2, N)  # the same array object, new values
    v, g = cf.value_and_grad(x, w)
    r, rg = _reference(x, w, 0)
    np.testing.assert_allclose(v, r, rtol=1e-13)
    np.testing.assert_allclose(g, rg, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", ["strided", "float32", "fortran", "tensor", "list"])
def test_inputs_that_are_copied(data, kind):
    x, w = data
    cf = tape.compile(loss, x, w)
    wide = np.repeat(x, 2)
    arg = {"strided": wide[::2], "float32": x.astype(np.float32), "fortran": np.asfortranarray(x),
           "tensor": tape.tensor(x), "list": x.tolist()}[kind]
    v, g = cf.value_and_grad(arg, w)
    xr = np.asarray(arg._v if kind == "tensor" else arg, dtype=np.float64)
    r, rg = _reference(xr, w, 0)
    np.testing.assert_allclose(v, r, rtol=1e-13)
    np.testing.assert_allclose(g, rg, rtol=1e-12, atol=1e-14)


def test_other_calls_after_a_borrowed_one(data):
    """cf(x), vjp and a value_and_grad with other values, after an in-place call, see their own
    arguments (the value buffers of a lent input hold an older input until loaded again)."""
    x, w = data
    cf = tape.compile(loss, x, w)
    cf.value_and_grad(x + 1.0, w)
    assert cf(x, w) == pytest.approx(float(_reference(x, w, 0)[0]), rel=1e-13)
    value, vjp_fn = cf.vjp(x - 1.0, w)
    g = vjp_fn(2.0)
    r, rg = _reference(x - 1.0, w, 0)
    assert value == pytest.approx(float(r), rel=1e-13)
    np.testing.assert_allclose(g, 2.0 * rg, rtol=1e-12, atol=1e-14)


def test_argnum_given_twice(data):
    x, w = data
    cf = tape.compile(loss, x, w, argnums=(0, 0))
    _, (g1, g2) = cf.value_and_grad(x, w)
    assert not np.shares_memory(g1, g2)
    np.testing.assert_array_equal(g1, g2)
    np.testing.assert_allclose(g1, _reference(x, w, 0)[1], rtol=1e-12, atol=1e-14)


def test_output_that_is_an_input():
    """The identity's vjp: its output slot is its input slot, seeded in the arena."""
    x = np.random.default_rng(1).normal(size=N)
    cf = tape.compile(lambda a: a, x)
    value, vjp_fn = cf.vjp(x)
    np.testing.assert_array_equal(value, x)
    ct = np.arange(N, dtype=float)
    np.testing.assert_array_equal(vjp_fn(ct), ct)


def test_gradient_of_a_branchy_variant(data):
    """A variant with guards replays before its reverse sweep (no lending); large gradients still
    go straight into the returned arrays."""
    x, w = data

    def f(a, b):
        s = np.sum(a * b)
        return s * s if s > 0 else -s

    cf = tape.compile(f, x, w, argnums=(0, 1))
    for sign in (1.0, -1.0, 1.0):
        v, (ga, gb) = cf.value_and_grad(sign * x, w)
        r, (ra, rb) = tape.value_and_grad(f, argnums=(0, 1))(sign * x, w)
        np.testing.assert_allclose(v, r, rtol=1e-12)
        np.testing.assert_allclose(ga, ra, rtol=1e-12)
        np.testing.assert_allclose(gb, rb, rtol=1e-12)


@pytest.mark.parametrize("shape", [(), (1,), (3,), (N,)])
def test_function_that_returns_an_input(shape):
    """f records no row at all: the gradient is the seed for the input returned, zero for the
    others (it was zero for all)."""
    x = np.random.default_rng(2).normal(size=shape)
    cf = tape.compile(lambda a, b: a, x, 1.5, argnums=(0, 1))
    ct = np.arange(np.size(x), dtype=float).reshape(shape) + 1.0
    value, vjp_fn = cf.vjp(x, 1.5)
    np.testing.assert_array_equal(value, x)
    ga, gb = vjp_fn(ct)
    np.testing.assert_array_equal(ga, ct)
    assert gb == 0.0
    if np.size(x) == 1:
        v, (ga, gb) = cf.value_and_grad(x, 2.5)
        assert np.shape(ga) == shape and np.all(ga == 1.0) and gb == 0.0
