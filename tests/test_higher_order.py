"""Higher-order reverse mode: create_graph, grad of grad, any nesting of jvp and grad, and
gradgradcheck. Second derivatives of every table row: reverse over reverse against forward over
reverse and against finite differences of gradients."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

import tape
from test_function import Cube
from test_table import (BINARY, BINARY_DOMAIN, BSHAPES, REDUCE, REDUCE_FUNCS, SCAN, SEEDS,
                        SETTINGS, UNARY, UNARY_DOMAIN, _distinct, _ids, shape_and_axis)


def check_second(f, args, rng, h=1e-6, rtol=1e-5, atol=1e-6):
    """H u of g(x) = sum(w * f(x)) three ways: reverse over reverse (create_graph), forward over
    reverse (jvp of grad), and central differences of gradients."""
    args = [np.array(a, dtype=np.float64) for a in args]
    w = rng.normal(size=np.shape(f(*args)))
    us = [rng.normal(size=np.shape(a)) for a in args]
    nums = tuple(range(len(args)))

    def g(*xs):
        return np.sum(f(*xs) * w)

    xs = [tape.tensor(a, requires_grad=True) for a in args]
    gs = tape.autograd.grad(g(*xs), xs, create_graph=True, allow_unused=True)
    s = sum(np.sum(gi * u) for gi, u in zip(gs, us) if gi is not None)
    if isinstance(s, tape.Tensor) and s.requires_grad:
        ror = tape.autograd.grad(s, xs, allow_unused=True)
        ror = [np.zeros(a.shape) if r is None else np.asarray(r) for r, a in zip(ror, args)]
    else:
        ror = [np.zeros(a.shape) for a in args]
    _, fwd = tape.jvp(tape.grad(g, argnums=nums), tuple(args), tuple(us))
    gp = tape.grad(g, argnums=nums)(*[a + h * u for a, u in zip(args, us)])
    gm = tape.grad(g, argnums=nums)(*[a - h * u for a, u in zip(args, us)])
    for r, fo, p, m in zip(ror, fwd, gp, gm):
        np.testing.assert_allclose(r, np.asarray(fo), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(r, (np.asarray(p) - np.asarray(m)) / (2 * h), rtol=rtol,
                                   atol=atol)


SMALL = dict(max_side=3)


@pytest.mark.parametrize("p", UNARY, ids=_ids(UNARY))
@SETTINGS
@given(seed=SEEDS)
def test_unary_second_derivatives(p, seed):
    rng = np.random.default_rng(seed)
    for shape in ((), (3,), (2, 2)):
        check_second(lambda a: p.ufunc(a), [UNARY_DOMAIN[p.name](rng, shape)], rng)


@pytest.mark.parametrize("p", BINARY, ids=_ids(BINARY))
@SETTINGS
@given(shapes=BSHAPES, seed=SEEDS)
def test_binary_second_derivatives(p, shapes, seed):
    rng = np.random.default_rng(seed)
    (sa, sb), _ = shapes
    da, db = BINARY_DOMAIN[p.name]
    check_second(lambda x, y: p.ufunc(x, y), [da(rng, sa), db(rng, sb)], rng)


@pytest.mark.parametrize("p", REDUCE, ids=_ids(REDUCE))
@SETTINGS
@given(sa=shape_and_axis(), seed=SEEDS)
def test_reduce_second_derivatives(p, sa, seed):
    shape, axis = sa
    rng = np.random.default_rng(seed)
    fname = REDUCE_FUNCS[p.name]
    if fname in ("max", "min") and 0 in shape:
        return
    x = (_distinct(rng, shape) if fname in ("max", "min")
         else rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape))
    fn = getattr(np, fname)
    check_second(lambda a: fn(a * a, axis=axis), [x], rng)


@pytest.mark.parametrize("p", SCAN, ids=_ids(SCAN))
@SETTINGS
@given(sa=shape_and_axis(tuples=False), seed=SEEDS)
def test_scan_second_derivatives(p, sa, seed):
    shape, axis = sa
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    fn = getattr(np, p.name)
    check_second(lambda a: fn(a * a, axis=axis), [x], rng)


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


@pytest.mark.parametrize("shapes", [((3, 4), (4, 2)), ((4,), (4, 3)), ((3, 4), (4,)),
                                    ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 2)),
                                    ((40, 30), (30, 20))])
def test_matmul_second_derivatives(shapes):
    rng = np.random.default_rng(2)
    check_second(lambda a, b: np.tanh(a @ b), [rng.normal(size=s) * 0.3 for s in shapes], rng)


def test_linalg_second_derivatives():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(3, 3)) + 3.0 * np.eye(3)
    check_second(np.linalg.inv, [A], rng)
    check_second(np.linalg.det, [A], rng)
    check_second(lambda a: np.linalg.slogdet(a)[1], [A], rng)
    check_second(np.linalg.solve, [A, rng.normal(size=3)], rng)


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

    class FirstOrderOnly(tape.Function):  # backward in NumPy: right once, wrong twice
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3.0 * x.numpy() ** 2 * g.numpy()

    x0 = np.array([0.5, 1.5])
    assert tape.gradcheck(lambda x: FirstOrderOnly.apply(x), x0)
    with pytest.raises(tape.GradcheckError, match="second-derivative mismatch"):
        tape.gradgradcheck(lambda x: FirstOrderOnly.apply(x), x0)
