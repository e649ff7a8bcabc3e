"""tape.optimize: scipy.optimize.minimize with value-and-gradient in one call and exact hessp."""
import numpy as np
import pytest

import tape

scipy_optimize = pytest.importorskip("scipy.optimize")

rng = np.random.default_rng(0)
X = rng.normal(size=(200, 5))
W_TRUE = rng.normal(size=5)
Y = (rng.uniform(size=200) < 1.0 / (1.0 + np.exp(-X @ W_TRUE))).astype(float)


def nll(w, X, y):
    """L2-regularised logistic regression: strictly convex, smooth."""
    z = X @ w
    return np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * np.sum(w * w)


def test_trust_ncg_converges_with_exact_hessp():
    obj = tape.optimize.Objective(nll, X, Y)
    res = scipy_optimize.minimize(x0=np.zeros(5), method="trust-ncg", **obj.minimize_kwargs())
    assert res.success and np.linalg.norm(res.jac) < 1e-5
    # the optimum satisfies X^T (sigmoid(Xw) - y) + w = 0
    p = 1.0 / (1.0 + np.exp(-X @ res.x))
    np.testing.assert_allclose(X.T @ (p - Y) + res.x, 0.0, atol=1e-5)
    assert res.nit < 15 and obj.nhvp > 0
    assert obj.nfev <= res.nfev + res.njev  # value and gradient come from one call per point


def test_hessp_is_exact():
    obj = tape.optimize.Objective(nll, X, Y)
    w, v = rng.normal(size=5), rng.normal(size=5)
    p = 1.0 / (1.0 + np.exp(-X @ w))
    H = X.T @ (X * (p * (1 - p))[:, None]) + np.eye(5)
    np.testing.assert_allclose(obj.hessp(w, v), H @ v, rtol=1e-12)


def test_fun_and_jac_share_one_evaluation():
    obj = tape.optimize.Objective(nll, X, Y)
    w = np.ones(5)
    v = obj.fun(w)
    g = obj.jac(w)
    assert obj.nfev == 1
    assert v == pytest.approx(nll(w, X, Y), rel=1e-14)
    np.testing.assert_allclose(g, tape.grad(nll)(w, X, Y), rtol=1e-14)


def test_minimize_wrapper_rosenbrock():
    def rosen(x):
        return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    res = tape.optimize.minimize(rosen, np.full(4, -1.0), method="trust-ncg")
    assert res.success
    np.testing.assert_allclose(res.x, np.ones(4), atol=1e-4)
    res = tape.optimize.minimize(rosen, np.full(4, -1.0), method="L-BFGS-B")  # no hessp
    np.testing.assert_allclose(res.x, np.ones(4), atol=1e-3)


def test_replay_gives_the_same_fit():
    """replay=True compiles f once: values and gradients are replays, Hessian-vector products
    replay a compiled gradient; the fit and the products match the eager objective."""
    eager = tape.optimize.Objective(nll, X, Y)
    replayed = tape.optimize.Objective(nll, X, Y, replay=True)
    w, v = rng.normal(size=5), rng.normal(size=5)
    np.testing.assert_allclose(replayed.hessp(w, v), eager.hessp(w, v), rtol=1e-12)
    value, g = replayed.value_and_grad(w)
    value0, g0 = eager.value_and_grad(w)
    assert value == pytest.approx(value0, rel=1e-14)
    np.testing.assert_allclose(g, g0, rtol=1e-12)
    res = scipy_optimize.minimize(x0=np.zeros(5), method="trust-ncg",
                                  **replayed.minimize_kwargs())
    res0 = scipy_optimize.minimize(x0=np.zeros(5), method="trust-ncg", **eager.minimize_kwargs())
    assert res.success and res.nit == res0.nit
    np.testing.assert_allclose(res.x, res0.x, rtol=1e-10, atol=1e-12)
    assert replayed._cf.stats()["recordings"] == 1

    def rosen(x):
        return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    res = tape.optimize.minimize(rosen, np.full(4, -1.0), method="trust-ncg", replay=True)
    assert res.success
    np.testing.assert_allclose(res.x, np.ones(4), atol=1e-4)
