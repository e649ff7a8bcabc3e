"""tape.compile: record once, replay value and gradient with the jitted interpreters; guards
re-record when Python would have taken another path; never a stale result."""
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import tape

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "asv_bench" / "benchmarks"))
from workloads import WORKLOADS  # noqa: E402


def _eager(f, args, argnums):
    return tape.value_and_grad(f, argnums=argnums)(*args)


def _close(a, b, rtol=1e-13):
    if isinstance(a, tuple):
        for x, y in zip(a, b):
            _close(x, y, rtol)
        return
    # elementwise rtol, and an absolute floor at rtol of the array's scale: a reduction may
    # sum in another order than NumPy's pairwise sum, which moves tiny elements by ulps of the
    # large ones
    b = np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * float(np.max(np.abs(b), initial=0)))


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workloads_replay_equals_eager(name):
    w = WORKLOADS[name]
    args = w.inputs()
    cf = tape.compile(w.loss, *args, argnums=w.argnums)
    rng = np.random.default_rng(1)
    moved = list(args)
    for i in w.argnums:  # new values of the same shapes
        moved[i] = np.asarray(args[i]) * (1.0 + 0.01 * rng.normal(size=np.shape(args[i])))
    for a in (args, moved):
        v, g = cf.value_and_grad(*a)
        v0, g0 = _eager(w.loss, a, w.argnums)
        _close(v, v0)
        _close(g, g0, rtol=1e-10)
    assert cf.stats()["recordings"] == 1


FAMILIES = {
    "elementwise": lambda x, c: np.sum(np.exp(np.sin(x) * c[0]) / (1.0 + x * x)),
    "broadcast": lambda x, c: np.sum(np.maximum(x[:, None], c[None, :2]) ** 2),
    "reduce": lambda x, c: np.sum(np.max(x.reshape(2, 3), axis=1) * np.prod(c)),
    "scan": lambda x, c: np.sum(np.cumprod(x)) + np.sum(np.cumsum(c) ** 2),
    "index": lambda x, c: np.sum(x[[2, 0, 5]] * x[1:4] ** 2) + np.sum(x.reshape(2, 3).T),
    "where": lambda x, c: np.sum(np.where(np.arange(6) % 2 == 0, x, x * x)),
    "matmul": lambda x, c: np.sum(np.tanh(x.reshape(2, 3) @ np.outer(c, c))),
    "blas": lambda x, c: np.sum(np.sin(np.tile(x, (30, 30)) @ np.tile(x[:, None], (30, 5)))),
    "linalg": lambda x, c: np.linalg.slogdet(np.diag(x[:3] + 3.0) + np.outer(c, c))[1]
    + np.sum(np.linalg.solve(np.diag(c + 2.0), x[:3])),
    "scalars": lambda x, c: (x[0] * c[1] - x[2]) ** 3 / (1.0 + c[0] ** 2),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_families_replay_equals_eager(name):
    f = FAMILIES[name]
    rng = np.random.default_rng(2)
    x0, c0 = rng.normal(size=6), rng.normal(size=3)
    cf = tape.compile(f, x0, c0, argnums=(0, 1))
    for _ in range(3):
        x, c = rng.normal(size=6), rng.normal(size=3)
        v, g = cf.value_and_grad(x, c)
        v0, g0 = _eager(f, (x, c), (0, 1))
        _close(v, v0, rtol=1e-13)
        _close(g, g0, rtol=1e-11)
    assert cf.stats()["recordings"] == 1


def test_guards_on_if_and_while():
    def f(x):
        y = x
        while np.sum(y * y) > 1.0:  # data-dependent loop count
            y = y * 0.5
        if np.max(y) > 0.0:
            return np.sum(np.sin(y))
        return np.sum(np.cos(y))

    cf = tape.compile(f, np.array([3.0, 1.0]))
    for x in ([3.0, 1.0], [3.1, 1.2], [0.1, 0.2], [-0.3, -0.2], [8.0, -9.0], [3.0, 1.0]):
        x = np.array(x)
        _close(cf.value_and_grad(x), _eager(f, (x,), 0))
    s = cf.stats()
    assert s["recordings"] >= 3 and s["hits"] >= 1 and s["guard_misses"] >= 2
    assert any("test_compiled.py" in where for where, _ in s["recent_misses"])


def test_guards_on_data_dependent_indexing():
    def f(x):
        i = np.argmax(x)  # an index read from values
        return x[i] ** 2 + np.sum(x[x > 0.0])  # and a boolean mask

    cf = tape.compile(f, np.array([1.0, 3.0, -2.0]))
    for x in ([1.0, 3.0, -2.0], [1.5, 3.5, -2.5], [4.0, 3.0, 2.0], [-1.0, -3.0, -0.5]):
        x = np.array(x)
        _close(cf.value_and_grad(x), _eager(f, (x,), 0))
    assert cf.stats()["hits"] >= 1  # the second point takes the same path


def test_float_read_is_guarded_exactly():
    def f(x):
        s = float(np.sum(x))  # the value itself escapes: any change is a new program
        return np.sum(x * s)

    cf = tape.compile(f, np.ones(2))
    x = np.array([1.0, 2.0])
    v, g = cf.value_and_grad(x)
    assert v == pytest.approx(9.0) and np.allclose(g, [3.0, 3.0])  # s constant, as eager
    _close((v, g), _eager(f, (x,), 0))


def test_variant_bound_warns_and_keeps_results_right():
    def f(x):
        return np.sum(x) * float(x[0])

    cf = tape.compile(f, np.ones(2), max_variants=2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for k in range(5):
            x = np.array([float(k), 1.0])
            _close(cf.value_and_grad(x), _eager(f, (x,), 0))
    assert cf.stats()["variants"] == 2 and cf.stats()["evictions"] >= 1
    assert any("test_compiled.py" in str(m.message) for m in w)


def test_static_arguments_and_shapes():
    def f(x, n, mode):
        y = x
        for _ in range(n):
            y = np.sin(y)
        return np.sum(y) if mode == "sum" else np.max(y)

    cf = tape.compile(f, np.ones(3), 2, "sum")
    for args in ((np.ones(3), 2, "sum"), (np.ones(3), 3, "sum"), (np.ones(3), 2, "max"),
                 (np.ones(5), 2, "sum"), (np.full(3, 0.5), 3, "sum")):
        _close(cf.value_and_grad(*args), _eager(f, args, 0))
    assert cf.stats()["recordings"] == 4


def test_call_vjp_jvp_and_batch():
    def f(x, c):
        return np.tanh(x * c) + x ** 2

    x0, c = np.array([0.2, -0.4, 0.9]), np.array([1.0, 2.0, 3.0])
    cf = tape.compile(f, x0, c)
    x = np.array([0.5, 0.1, -0.3])
    np.testing.assert_allclose(cf(x, c), f(x, c), rtol=1e-15)
    v, pull = cf.vjp(x, c)
    ct = np.array([1.0, -1.0, 0.5])
    np.testing.assert_allclose(pull(ct), tape.vjp(f, x, c)[1](ct)[0], rtol=1e-14)
    u = np.array([0.3, 0.0, 1.0])
    _, t = cf.jvp((x, c), (u,))
    np.testing.assert_allclose(t, tape.jvp(lambda z: f(z, c), (x,), (u,))[1], rtol=1e-14)

    g = tape.compile(lambda x, c: np.sum(f(x, c)), x0, c)
    X = np.random.default_rng(0).normal(size=(7, 3))
    values, grads = g.value_and_grad_batch(X, c)
    assert values.shape == (7,) and grads.shape == (7, 3)
    for k in range(7):
        v, gk = _eager(lambda z: np.sum(f(z, c)), (X[k],), 0)
        np.testing.assert_allclose(values[k], v, rtol=1e-14)
        np.testing.assert_allclose(grads[k], gk, rtol=1e-13)


def test_compile_errors():
    class Twice(tape.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return g * 2.0

    with pytest.raises(RuntimeError, match="custom Functions"):
        tape.compile(lambda x: np.sum(Twice.apply(x)), np.ones(2))
    with pytest.raises(TypeError, match="argument 1 \\(argnums\\) is a int"):
        tape.compile(lambda x, n: np.sum(x) * n, np.ones(2), 3, argnums=1)
    outside = tape.tensor(np.ones(2), requires_grad=True) * 2.0
    with pytest.raises(RuntimeError, match="several tapes"):
        tape.compile(lambda x: np.sum(x * outside), np.ones(2))


def _module_level_loss(w, X):
    return np.sum(np.tanh(X @ w) ** 2)


def test_pickle_round_trip():
    import pickle

    rng = np.random.default_rng(3)
    X, w = rng.normal(size=(5, 3)), rng.normal(size=3)
    cf = tape.compile(_module_level_loss, w, X)
    cf2 = pickle.loads(pickle.dumps(cf))
    w1 = rng.normal(size=3)
    v, g = cf2.value_and_grad(w1, X)
    v0, g0 = cf.value_and_grad(w1, X)
    assert v == v0 and np.array_equal(g, g0)
