"""Higher-order reverse mode: second derivatives of every op of the database, create_graph, grad of
grad, any nesting of jvp and grad, and gradgradcheck.

Each op of ``tests/_op_database.py`` that claims higher order, on the database's samples:
H u of sum(w * f) reverse over reverse against forward over reverse and against finite
differences of gradients (``_derivative_checks.check_second``). An op linear in its operands
(a reduction, an index map) is fed their squares, and matmul's result goes through tanh, so
that the second derivative is not zero.
"""
from __future__ import annotations

import numpy as np
import pytest

import tape

from _derivative_checks import check_second
from _functions import Cube
from _mode_checks import check_higher, over_ops
from _op_database import claiming

HIGHER = claiming("higher")


@over_ops(HIGHER, max_examples=20)
def test_second_derivatives(op, sample, rng):
    check_higher(op, sample, rng)


def test_cumprod_and_prod_with_zeros():
    rng = np.random.default_rng(0)
    check_second(lambda a: np.cumprod(a * a), [np.array([1.5, 0.0, 0.7, -1.2])], rng)
    check_second(lambda a: np.prod(a * a, axis=0), [np.array([[0.0, 2.0], [1.3, 0.0]])], rng)


def test_index_shape_and_assignment_ops():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 4))

    def assign(a):
        y = a * 1.0
        y[1] = a[0] * a[2]
        y[0, [0, 2]] = np.sin(a[2, :2])
        return y

    for f in (lambda a: a[1:, ::2] ** 2, lambda a: a.T @ a, lambda a: a[[2, 0, 2]] ** 3,
              lambda a: np.sin(np.reshape(a, (2, 6))), lambda a: np.where(a > 0, a * a, a ** 3),
              lambda a: np.roll(a, 1, axis=1) * a, lambda a: np.sort(a, axis=1) ** 2,
              lambda a: np.broadcast_to(a[:, :1], (3, 4)) * a, assign,
              lambda a: np.concatenate([a, a * a]), lambda a: np.einsum("ij,kj->ik", a, a)):
        check_second(f, [x], rng)


def test_custom_function_backward_is_differentiated():
    x = tape.tensor(np.array([0.5, -1.5]), requires_grad=True)
    (g,) = tape.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    (h,) = tape.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h, 6.0 * np.array([0.5, -1.5]), rtol=1e-15)


def test_backward_create_graph_gives_grad_with_history():
    x = tape.tensor(np.array([0.3, 0.7]), requires_grad=True)
    y = np.sum(np.exp(x) * x)
    y.backward(create_graph=True)
    g = x.grad
    assert isinstance(g, tape.Tensor) and g.requires_grad
    np.testing.assert_allclose(g.numpy(), np.exp([0.3, 0.7]) * (1 + np.array([0.3, 0.7])))
    (h,) = tape.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h, np.exp([0.3, 0.7]) * (2 + np.array([0.3, 0.7])), rtol=1e-14)


def test_grad_of_grad_any_nesting():
    f = lambda x: np.sum(np.sin(x) * x ** 2)  # noqa: E731
    x = np.array([0.4, -1.1, 2.0])
    H = tape.hessian(f)(x)
    np.testing.assert_allclose(tape.jacfwd(tape.grad(f))(x), H, rtol=1e-12)
    np.testing.assert_allclose(tape.jacrev(tape.grad(f))(x), H, rtol=1e-12)
    np.testing.assert_allclose(tape.grad(lambda z: np.sum(tape.grad(f)(z)))(x), H.sum(0),
                               rtol=1e-12)
    v = np.array([1.0, 0.5, -2.0])
    np.testing.assert_allclose(tape.jvp(tape.grad(f), (x,), (v,))[1], H @ v, rtol=1e-12)
    # third order: d/dx of the Hessian, four ways of nesting
    t1 = tape.jacfwd(tape.hessian(f))(x)
    t2 = tape.jacrev(tape.jacrev(tape.grad(f)))(x)
    t3 = tape.jacfwd(tape.jacfwd(tape.grad(f)))(x)
    np.testing.assert_allclose(t1, t2, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(t1, t3, rtol=1e-11, atol=1e-13)
    d3 = np.zeros((3, 3, 3))  # f = sum sin(x) x^2: only the diagonal
    for i, xi in enumerate(x):
        d3[i, i, i] = 6 * np.cos(xi) - 6 * xi * np.sin(xi) - xi ** 2 * np.cos(xi)
    np.testing.assert_allclose(t1, d3, rtol=1e-11, atol=1e-12)
    assert tape.grad(tape.grad(lambda t: t ** 3))(2.0) == pytest.approx(12.0, rel=1e-15)


def test_perturbation_confusion_with_grad():
    def f(x):  # d/dx [x * d/dy (x + y)] = 1
        return x * tape.grad(lambda y: x + y)(1.0)

    assert tape.grad(f)(2.0) == 1.0
    assert tape.jvp(f, (2.0,), (1.0,))[1] == 1.0

    def g(x):  # d/dx [x * d/dy [y * d/dz (x * y * z)]] = d/dx [x * 2 x y] at y = 3 ... = 4 x y
        def inner(y):
            return y * tape.grad(lambda z: x * y * z)(1.0)

        return x * tape.grad(inner)(3.0)

    assert tape.grad(g)(5.0) == pytest.approx(4 * 5.0 * 3.0, rel=1e-14)

    def k(x):  # d/dx [x * d/dy (x * y)] = d/dx x^2 = 2x: the inner derivative depends on x
        return x * tape.grad(lambda y: x * y)(7.0)

    assert tape.grad(k)(3.0) == pytest.approx(6.0, rel=1e-15)
    assert tape.grad(tape.grad(k))(3.0) == pytest.approx(2.0, rel=1e-15)


def test_grad_of_grad_of_a_python_loop():
    """W1-style Lorenz system, 100 steps: the Hessian-vector product by reverse over reverse
    equals reverse over forward and finite differences of gradients."""
    def lorenz(p):
        s, r, b = p[0], p[1], p[2]
        x, y, z = 1.0, 1.0, 1.0
        dt = 0.005
        acc = 0.0
        for _ in range(100):
            x, y, z = (x + dt * s * (y - x), y + dt * (x * (r - z) - y), z + dt * (x * y - b * z))
            acc = acc + x * x
        return acc

    p0 = np.array([10.0, 28.0, 8.0 / 3.0])
    v = np.array([0.1, -0.3, 1.0])
    hv_ror = tape.grad(lambda p: np.sum(tape.grad(lorenz)(p) * v))(p0)
    hv_rof = tape.hvp(lorenz, p0, v)
    g = tape.grad(lorenz)
    h = 1e-5
    hv_fd = (g(p0 + h * v) - g(p0 - h * v)) / (2 * h)
    np.testing.assert_allclose(hv_ror, hv_rof, rtol=1e-10)
    np.testing.assert_allclose(hv_ror, hv_fd, rtol=1e-5)


def test_gradgradcheck():
    assert tape.gradgradcheck(lambda a, b: np.cumprod(a * b) @ b,
                              np.array([0.3, -0.2, 1.1]), np.array([0.5, 0.4, 0.9]))
    assert tape.gradgradcheck(lambda a: np.linalg.inv(a).sum(axis=0),
                              np.eye(2) * 2.0 + 0.1)

    class FirstOrderOnly(Cube):  # backward in NumPy: right once, wrong twice
        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3.0 * x.numpy() ** 2 * g.numpy()

    x0 = np.array([0.5, 1.5])
    assert tape.gradcheck(lambda x: FirstOrderOnly.apply(x), x0)
    with pytest.raises(tape.GradcheckError, match="second-derivative mismatch"):
        tape.gradgradcheck(lambda x: FirstOrderOnly.apply(x), x0)
