"""Summed operands (``tape.reverse.backward.summed_operands``): when a BLAS product's left factor is
``x ± u`` with u broadcast along the factor's rows, and only u's adjoint is needed, the reverse
sums the product's adjoint over the rows before multiplying (``vjp_a_rows``) and never forms the
factor's adjoint. The eager backward and compiled plans both do it, so their gradients agree bit
for bit where their forward values do (products, sums and squares; a transcendental function's
kernel in the replay may differ from NumPy's by an ulp, and those cases are compared within
rounding); they are checked against hand-derived formulas too, and the path is checked to be
taken exactly where it should, and not where someone reads the factor's own gradient."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tape
import tape.core.bilinear as bilinear


@pytest.fixture(autouse=True)
def _every_product_to_blas(monkeypatch):
    """Every matmul an escape to BLAS, so that small shapes take the path too."""
    monkeypatch.setattr(bilinear, "BLAS_FLOPS", 0)


def _plan(cf):
    v = next(reversed(cf.variants.values()))
    return v._plan(cf.nums)


def _close(got, want):
    for a, b in zip(got, want):
        b = np.asarray(b)
        np.testing.assert_allclose(a, b, rtol=1e-12,
                                   atol=1e-12 * float(np.max(np.abs(b), initial=1.0)))


def _check(f, args, argnums, summed, exact=False):
    """Replay (twice, the second time with moved inputs) against eager; `summed`: whether the
    plan should take the path; `exact`: f's forward values are the same bits in both (no
    transcendental functions), so the gradients must be too."""
    cf = tape.compile(f, *args, argnums=argnums)
    rng = np.random.default_rng(3)
    moved = [a * (1.0 + 0.1 * rng.normal(size=np.shape(a))) for a in args]
    for a in (args, moved, args):
        v, g = cf.value_and_grad(*a)
        v0, g0 = tape.value_and_grad(f, argnums=argnums)(*a)
        np.testing.assert_allclose(v, v0, rtol=1e-13)
        _close(g, g0)
        if exact:
            assert v == v0
            for p, q in zip(g if isinstance(g, tuple) else (g,),
                            g0 if isinstance(g0, tuple) else (g0,)):
                np.testing.assert_array_equal(p, q)
    assert bool(_plan(cf).summed) == summed
    return cf


def _square_loss(x, mu, w):
    return np.sum(np.matmul(x - mu, w) ** 2)


def test_hand_derived_centring():
    rng = np.random.default_rng(0)
    x, mu, w = rng.normal(size=(40, 6)), rng.normal(size=6), rng.normal(size=(6, 5))
    cf = _check(_square_loss, (x, mu, w), (1, 2), summed=True, exact=True)
    _, (g_mu, g_w) = cf.value_and_grad(x, mu, w)
    c = x - mu
    y = c @ w
    _close((g_mu, g_w), (-np.sum(2.0 * y @ w.T, axis=0), c.T @ (2.0 * y)))


@pytest.mark.parametrize("form, sign", [
    (lambda x, u: x - u, -1.0), (lambda x, u: u - x, 1.0),
    (lambda x, u: x + u, 1.0), (lambda x, u: u + x, 1.0)])
def test_sign_and_operand_order(form, sign):
    rng = np.random.default_rng(1)
    x, u, w = rng.normal(size=(30, 4)), rng.normal(size=(1, 4)), rng.normal(size=(4, 3))

    def f(x, u, w):
        return np.sum(np.sin(np.matmul(form(x, u), w)))

    cf = _check(f, (x, u, w), (1, 2), summed=True)
    (_, sign_used, _), = _plan(cf).summed.values()
    assert sign_used == sign
    _, (g_u, _) = cf.value_and_grad(x, u, w)
    _close((g_u,), (sign * np.sum(np.cos(form(x, u) @ w) @ w.T, axis=0, keepdims=True),))


def test_batched_like_the_gaussian_mixture():
    """W2's shapes: x (1, n, d) less means (k, 1, d), times a batch of k matrices."""
    rng = np.random.default_rng(2)
    x, means, q = rng.normal(size=(50, 3)), rng.normal(size=(4, 3)), rng.normal(size=(4, 3, 3))

    def f(x, means, q):
        c = x[None, :, :] - means[:, None, :]
        qx = np.matmul(c, np.transpose(q, (0, 2, 1)))
        return np.sum(np.log(np.sum(np.exp(-0.5 * qx * qx), axis=0)))

    _check(f, (x, means, q), (1, 2), summed=True)


def test_operand_broadcast_over_the_batch_too():
    rng = np.random.default_rng(4)
    x, mu, w = rng.normal(size=(3, 20, 4)), rng.normal(size=(1, 1, 4)), rng.normal(size=(3, 4, 2))
    cf = _check(_square_loss, (x, mu, w), (1, 2), summed=True, exact=True)
    _, (g_mu, _) = cf.value_and_grad(x, mu, w)
    y = np.matmul(x - mu, w)
    _close((g_mu,), (-np.sum(2.0 * y @ np.swapaxes(w, -1, -2), axis=(0, 1), keepdims=True),))


def test_operand_with_other_uses():
    """u's adjoint also gets terms from other rows: the escape adds, it does not overwrite."""
    rng = np.random.default_rng(5)
    x, mu, w = rng.normal(size=(25, 5)), rng.normal(size=5), rng.normal(size=(5, 5))

    def f(x, mu, w):
        return _square_loss(x, mu, w) + np.sum(np.matmul(mu, w) ** 2) + np.sum(np.cos(mu))

    _check(f, (x, mu, w), (1, 2), summed=True)


@pytest.mark.parametrize("case", ["x_needed", "factor_used_twice", "not_broadcast_along_rows",
                                  "product_not_a_sum", "same_operand", "only_b_needed"])
def test_not_taken_where_it_does_not_hold(case):
    rng = np.random.default_rng(6)
    x, mu, w = rng.normal(size=(20, 4)), rng.normal(size=4), rng.normal(size=(4, 3))
    argnums = (1, 2)
    f = _square_loss
    if case == "x_needed":  # the factor's adjoint goes to x as well: it must be formed
        argnums = (0, 1, 2)
    elif case == "factor_used_twice":
        def f(x, mu, w):
            c = x - mu
            return np.sum(np.matmul(c, w) ** 2) + np.sum(c * c)
    elif case == "not_broadcast_along_rows":
        mu = rng.normal(size=(20, 1))
    elif case == "product_not_a_sum":
        def f(x, mu, w):
            return np.sum(np.matmul(x * mu, w) ** 2)
    elif case == "same_operand":
        def f(x, mu, w):
            return np.sum(np.matmul(mu - mu * 2.0 + x, w) ** 2)
        argnums = (1, 2)
    elif case == "only_b_needed":
        argnums = 2
    _check(f, (x, mu, w), argnums, exact=True,
           summed=case == "same_operand")  # (mu - 2 mu) + x: u is that row, broadcast: taken


def test_vjp_of_a_matrix_output():
    rng = np.random.default_rng(7)
    x, mu, w = rng.normal(size=(30, 4)), rng.normal(size=4), rng.normal(size=(4, 6))

    def f(x, mu, w):
        return np.tanh(np.matmul(x - mu, w))

    cf = tape.compile(f, x, mu, w, argnums=(1, 2))
    seed = rng.normal(size=(30, 6))
    for _ in range(2):
        _, vjp_fn = cf.vjp(x, mu, w)
        got = vjp_fn(seed)
        _, eager_fn = tape.vjp(lambda mu, w: f(x, mu, w), mu, w)
        _close(got, eager_fn(seed))
    assert _plan(cf).summed


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_shapes(data):
    batch = data.draw(st.sampled_from([(), (1,), (3,), (2, 2)]))
    m, k, n = (data.draw(st.integers(1, 40)), data.draw(st.integers(1, 7)),
               data.draw(st.integers(1, 7)))
    # u: broadcast along the rows, each other axis either broadcast or full
    full = batch + (1, k)
    u_shape = tuple(s if data.draw(st.booleans()) else 1 for s in full)
    u_shape = u_shape[data.draw(st.integers(0, len(u_shape) - 1)):]  # fewer leading axes
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    x, u = rng.normal(size=batch + (m, k)), rng.normal(size=u_shape)
    w = rng.normal(size=data.draw(st.sampled_from([batch, ()])) + (k, n))
    _check(_square_loss, (x, u, w), (1, 2), summed=True, exact=True)


def test_batch_in_threads_and_a_saved_tape(tmp_path):
    """Copies of the recording (threads) and a tape loaded from a file make their own plans."""
    rng = np.random.default_rng(8)
    x, w = rng.normal(size=(30, 4)), rng.normal(size=(4, 3))
    mus = rng.normal(size=(5, 4))

    def f(mu, x, w):
        return np.sum(np.cos(np.matmul(x - mu, w)))

    cf = tape.compile(f, mus[0], x, w, argnums=(0, 2))
    values, (g_mu, g_w) = cf.value_and_grad_batch(mus, x, w, threads=2)
    for j, mu in enumerate(mus):
        v0, (g0_mu, g0_w) = tape.value_and_grad(f, argnums=(0, 2))(mu, x, w)
        np.testing.assert_allclose(values[j], v0, rtol=1e-13)
        _close((g_mu[j], g_w[j]), (g0_mu, g0_w))
    cf.save(tmp_path / "f.npz")
    loaded = tape.load(tmp_path / "f.npz", f)
    v, g = loaded.value_and_grad(mus[1], x, w)
    assert v == values[1]
    _close(g, (g_mu[1], g_w[1]))
    assert _plan(loaded).summed and _plan(cf).summed


def _factor_loss(mu, w, x):
    c = x[None, :, :] - mu[:, None, :]
    y = np.matmul(c, w)
    return c, y, np.sum(y * y)


def _leaves(rng):
    """(mu, w) as leaf tensors, x, and (mu, w) as arrays."""
    x, mu, w = rng.normal(size=(30, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 4, 2))
    return (tape.tensor(mu, requires_grad=True), tape.tensor(w, requires_grad=True), x,
            (mu, w))


def _hand_derived(mu, w, x):
    c = x[None] - mu[:, None]
    y = c @ w
    g_c = 2.0 * y @ np.swapaxes(w, -1, -2)
    return g_c, -np.sum(g_c, axis=1), np.swapaxes(c, -1, -2) @ (2.0 * y)


def test_eager_backward_sums_before_the_product_and_frees_the_tape():
    mu, w, x, values = _leaves(np.random.default_rng(9))
    _, _, loss = _factor_loss(mu, w, x)
    loss.backward()
    _, g_mu, g_w = _hand_derived(*values, x)
    _close((mu.grad, w.grad), (g_mu, g_w))
    cf = tape.compile(lambda mu, w: _factor_loss(mu, w, x)[2], *values, argnums=(0, 1))
    _, g = cf.value_and_grad(*values)
    np.testing.assert_array_equal(g[0], mu.grad)  # the same sums: the same bits
    np.testing.assert_array_equal(g[1], w.grad)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_eager_hook_on_the_factor_sees_its_gradient():
    """Someone reads the factor's own gradient (a hook, retain_grad): it is formed."""
    mu, w, x, values = _leaves(np.random.default_rng(10))
    c, _, loss = _factor_loss(mu, w, x)
    seen = []
    c.register_hook(lambda g: seen.append(g.copy()))
    c.retain_grad()
    loss.backward()
    g_c, g_mu, g_w = _hand_derived(*values, x)
    _close((seen[0], c.grad, mu.grad, w.grad), (g_c, g_c, g_mu, g_w))


def test_eager_grad_of_the_factor_itself():
    mu, w, x, values = _leaves(np.random.default_rng(11))
    c, _, loss = _factor_loss(mu, w, x)
    got = tape.autograd.grad(loss, [c, mu])
    g_c, g_mu, _ = _hand_derived(*values, x)
    _close(got, (g_c, g_mu))
