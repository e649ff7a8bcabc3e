"""Forward mode (tape.forward_ad, tape.jvp and friends) over the op database, then nesting.

Every op of ``tests/_op_database.py`` that claims forward mode, on the database's samples: its
JVP against finite differences and against its VJP (the dot-product test <v, J u> = <J^T v, u>,
which also holds at the database's near-non-differentiable points), and on small samples the
Hessian-vector product (reverse over forward). Then compositions of rows, custom Functions,
nested dual levels and their errors, and the functional transforms.
"""
from __future__ import annotations

import numpy as np
import pytest

import tape
import tape.forward_ad as fwAD

from _derivative_checks import check_jvp
from _functions import Twice
from _mode_checks import check_forward, check_forward_kinks, kinked, over_ops
from _op_database import claiming
from tests._tolerance import U, assert_within, rounding_bound, sum_bound

FORWARD = claiming("forward")


# -- every op of the database -----------------------------------------------------------------

@over_ops(FORWARD, max_examples=20)
def test_jvp(op, sample, rng):
    check_forward(op, sample, rng)


@kinked(FORWARD)
def test_near_non_differentiable_points(op):
    check_forward_kinks(op)


def test_max_ties_share_the_tangent_evenly():
    _, t = tape.jvp(np.max, (np.array([1.0, 3.0, 3.0]),), (np.array([10.0, 1.0, 2.0]),))
    assert t == 1.5


def test_prod_and_cumprod_with_zeros_exactly():
    x, u = np.array([0.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0])
    assert tape.jvp(np.prod, (x,), (u,))[1] == 6.0  # d prod = u0 x1 x2
    _, t = tape.jvp(np.cumprod, (np.array([2.0, 0.0, 3.0]),), (u,))
    np.testing.assert_array_equal(t, [1.0, 2.0, 6.0])  # y2 = x0 x1 x2: 0 + 2*1*3 + 0


def test_index_and_shape_ops():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 4))
    for f in (lambda a: a[1:, ::2], lambda a: a.T, lambda a: a[[2, 0, 2]], lambda a: a[a > 0],
              lambda a: np.reshape(a, (2, 6)), lambda a: np.concatenate([a, a * 2.0]),
              lambda a: np.where(a > 0, a, a * a), lambda a: np.roll(a, 1, axis=1),
              lambda a: np.sort(a, axis=1), lambda a: np.einsum("ij,kj->ik", a, a)):
        check_jvp(f, [x], rng, order2=True)


def test_item_assignment():
    rng = np.random.default_rng(2)

    def f(a, b):
        y = a * 1.0
        y[1] = b[0] * 2.0
        y[0, [0, 2]] = b[1:]
        return y

    check_jvp(f, [rng.normal(size=(2, 3)), rng.normal(size=3)], rng, order2=True)


def test_det_of_a_singular_matrix():
    A = np.array([[1.0, 2.0], [2.0, 4.0]])
    U = np.array([[0.3, -1.0], [0.5, 2.0]])
    _, t = tape.jvp(np.linalg.det, (A,), (U,))
    eps = 1e-7
    np.testing.assert_allclose(t, (np.linalg.det(A + eps * U) - np.linalg.det(A - eps * U))
                               / (2 * eps), rtol=1e-6)


# -- custom Functions -----------------------------------------------------------------------

class Square(tape.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2.0 * x * g

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return 2.0 * x * t


def test_function_with_a_jvp_rule():
    x = np.array([1.0, -2.0])
    _, t = tape.jvp(lambda a: np.sin(Square.apply(a)), (x,), (np.array([1.0, 0.5]),))
    want = lambda x: np.cos(x * x) * 2.0 * x * np.array([1.0, 0.5])
    assert_within(t, want(x), rounding_bound(want, [x], want(x), ops=16))  # (NumPy's cos)


def test_function_without_a_jvp_rule():
    with pytest.raises(RuntimeError, match="Twice has no forward-mode rule"):
        tape.jvp(Twice.apply, (np.ones(2),), (np.ones(2),))


# -- dual levels ------------------------------------------------------------------------------

def test_dual_level_basics():
    with fwAD.dual_level() as level:
        x = fwAD.make_dual(np.array([0.5, 1.0]), np.array([1.0, 2.0]))
        y = np.sin(x) * 3.0
        p, t = fwAD.unpack_dual(y)
        np.testing.assert_allclose(p.numpy(), 3.0 * np.sin([0.5, 1.0]))
        np.testing.assert_allclose(t.numpy(), 3.0 * np.cos([0.5, 1.0]) * [1.0, 2.0])
        assert fwAD.unpack_dual(tape.tensor(1.0)).tangent is None
        assert fwAD.unpack_dual(y, level=level).tangent is not None
    assert fwAD.unpack_dual(y).tangent is None  # no level active: no tangent


def test_forward_only_results_are_plain():
    """Nothing requires grad: the unpacked primal and tangent are plain tensors (PyTorch gives
    plain ones too), so NumPy and plotting take them; the dual itself still refuses, since
    converting it would drop its tangent."""
    with fwAD.dual_level():
        x = fwAD.make_dual(np.array([0.5, 1.0]), np.array([1.0, 2.0]))
        y = np.sin(x) * 3.0
        p, t = fwAD.unpack_dual(y)
        assert not p.requires_grad and not t.requires_grad
        np.testing.assert_allclose(np.asarray(t), 3.0 * np.cos([0.5, 1.0]) * [1.0, 2.0])
        np.testing.assert_allclose(np.asarray(p), 3.0 * np.sin([0.5, 1.0]))
        s = fwAD.unpack_dual(np.sum(x * x)).tangent  # a 0-d tangent
        assert not s.requires_grad and float(s) == pytest.approx(2 * 0.5 * 1.0 + 2 * 1.0 * 2.0)
        with pytest.raises(TypeError, match="lose the gradient"):
            np.asarray(y)


def test_unpacked_results_keep_history_when_it_matters():
    # a leaf that requires grad: the tangent stays differentiable (reverse over forward)
    w = tape.tensor(np.array([0.3, 0.9]), requires_grad=True)
    with fwAD.dual_level():
        t = fwAD.unpack_dual(np.sum(np.sin(fwAD.make_dual(w, np.ones(2))))).tangent
        assert t.requires_grad
    # a tangent that requires grad, given to make_dual
    v = tape.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with fwAD.dual_level():
        t = fwAD.unpack_dual(np.sum(fwAD.make_dual(np.array([0.1, 0.2]), v) ** 2)).tangent
    t.backward()
    np.testing.assert_allclose(v.grad, [0.2, 0.4], rtol=1e-15)
    # another active level is dual here: the inner tangent is dual at the outer level
    with fwAD.dual_level() as outer:
        x = fwAD.make_dual(0.7, 1.0, level=outer)
        with fwAD.dual_level() as inner:
            dy = fwAD.unpack_dual(np.sin(fwAD.make_dual(x, 1.0, level=inner)),
                                  level=inner).tangent
            assert dy.requires_grad
        assert fwAD.unpack_dual(dy, level=outer).tangent.item() == pytest.approx(-np.sin(0.7))


def test_unpack_in_a_loop_works_incrementally():
    with fwAD.dual_level():
        x = fwAD.make_dual(0.3, 1.0)
        y = x
        ts = []
        for _ in range(50):
            y = np.sin(y) + 0.1 * x
            ts.append(fwAD.unpack_dual(y).tangent.item())
    # the same derivative by the recurrence dy = cos(y_prev) dy_prev + 0.1, with NumPy's sin and
    # cos (a few ulps from ours): a running bound carries each step's roundings (c U of the
    # magnitudes) through the recurrence's own sensitivities, |cos y| and |sin y dy|
    y, dy, want, bound = 0.3, 1.0, [], []
    ey = edy = 0.0
    c = 8 * U
    for _ in range(50):
        ey, edy = (abs(np.cos(y)) * ey + c * (abs(np.sin(y)) + 0.03),
                   abs(np.cos(y)) * edy + abs(np.sin(y) * dy) * ey
                   + c * (abs(np.cos(y) * dy) + 0.1))
        y, dy = np.sin(y) + 0.03, np.cos(y) * dy + 0.1
        want.append(dy)
        bound.append(edy)
    assert_within(ts, want, np.array(bound))


def test_two_levels_give_second_derivatives():
    with fwAD.dual_level() as outer:
        x = fwAD.make_dual(0.7, 1.0, level=outer)
        with fwAD.dual_level() as inner:
            xi = fwAD.make_dual(x, 1.0, level=inner)
            y = np.sin(xi) * xi
            dy = fwAD.unpack_dual(y, level=inner).tangent  # sin x + x cos x, dual at outer
        d2y = fwAD.unpack_dual(dy, level=outer).tangent
    d1 = lambda x: np.sin(x) + x * np.cos(x)
    d2 = lambda x: 2 * np.cos(x) - x * np.sin(x)
    assert abs(dy.item() - d1(0.7)) <= rounding_bound(d1, [0.7], d1(0.7), ops=16)
    assert abs(d2y.item() - d2(0.7)) <= rounding_bound(d2, [0.7], d2(0.7), ops=16)


def test_three_levels_give_third_derivatives():
    with fwAD.dual_level() as l1:
        x1 = fwAD.make_dual(1.5, 1.0, level=l1)
        with fwAD.dual_level() as l2:
            x2 = fwAD.make_dual(x1, 1.0, level=l2)
            with fwAD.dual_level() as l3:
                x3 = fwAD.make_dual(x2, 1.0, level=l3)
                y = x3 ** 4
                d1 = fwAD.unpack_dual(y, level=l3).tangent
            d2 = fwAD.unpack_dual(d1, level=l2).tangent
        d3 = fwAD.unpack_dual(d2, level=l1).tangent
    assert d3.item() == pytest.approx(24 * 1.5, rel=1e-13)


def test_mixed_levels_in_one_op():
    with fwAD.dual_level() as l1:
        a = fwAD.make_dual(np.array([1.0, 2.0]), np.array([1.0, 0.0]), level=l1)
        with fwAD.dual_level() as l2:
            b = fwAD.make_dual(np.array([3.0, 4.0]), np.array([0.0, 1.0]), level=l2)
            y = a * b
            np.testing.assert_array_equal(fwAD.unpack_dual(y, level=l1).tangent.numpy(),
                                          [3.0, 0.0])
            np.testing.assert_array_equal(fwAD.unpack_dual(y, level=l2).tangent.numpy(),
                                          [0.0, 2.0])


def test_outer_tangent_dual_at_an_inner_level():
    with fwAD.dual_level() as outer:
        with fwAD.dual_level() as inner:
            w = fwAD.make_dual(np.array([1.0, 1.0]), np.array([0.5, -1.0]), level=inner)
            x = fwAD.make_dual(np.array([0.2, 0.4]), w, level=outer)  # tangent is dual
            y = np.exp(x)
            ty = fwAD.unpack_dual(y, level=outer).tangent  # exp(x) * w
            dty = fwAD.unpack_dual(ty, level=inner).tangent  # exp(x) * [0.5, -1]
    x0 = np.array([0.2, 0.4])
    bound = rounding_bound(np.exp, [x0], np.exp(x0), ops=16)  # (NumPy's exp: a few ulps)
    assert_within(ty.numpy(), np.exp(x0), bound)
    assert_within(dty.numpy(), np.exp(x0) * [0.5, -1.0], bound)  # (times exact 0.5, -1)


def test_exit_clears_the_level():
    with fwAD.dual_level() as level:
        x = fwAD.make_dual(np.ones(2), np.ones(2))
        y = x * 2.0
        fwAD.unpack_dual(y)
    with pytest.raises(RuntimeError, match=f"dual level {level} has been exited"):
        fwAD.unpack_dual(y, level=level)
    with fwAD.dual_level():  # a new level knows nothing of the old tangents
        assert fwAD.unpack_dual(y).tangent is None


def test_level_errors():
    with pytest.raises(RuntimeError, match="no dual level is active"):
        fwAD.make_dual(np.ones(2), np.ones(2))
    with fwAD.dual_level():
        with pytest.raises(ValueError, match=r"tangent has shape \(3,\) but the primal has "
                                             r"shape \(2,\)"):
            fwAD.make_dual(np.ones(2), np.ones(3))
        with pytest.raises(TypeError, match="complex128"):
            fwAD.make_dual(np.ones(2), np.ones(2) * 1j)
    outer = fwAD.enter_dual_level()
    fwAD.enter_dual_level()
    with pytest.raises(RuntimeError, match="not the innermost"):
        fwAD.exit_dual_level(level=outer)
    fwAD.exit_dual_level()
    fwAD.exit_dual_level(level=outer)
    with pytest.raises(RuntimeError, match="no dual level is active"):
        fwAD.exit_dual_level()


def test_forward_mode_composes_with_backward():
    """Reverse over forward: the tangent is a recorded tensor, so backward differentiates it."""
    x = tape.tensor(np.array([0.3, 0.9]), requires_grad=True)
    with fwAD.dual_level():
        xd = fwAD.make_dual(x, np.array([1.0, 0.0]))
        y = np.sum(np.sin(xd) * xd)
        t = fwAD.unpack_dual(y).tangent  # d/dx0 = sin x0 + x0 cos x0
    t.backward()
    x0 = 0.3
    d2 = lambda x: 2 * np.cos(x) - x * np.sin(x)
    assert x.grad[1] == 0.0
    assert abs(x.grad[0] - d2(x0)) <= rounding_bound(d2, [x0], d2(x0), ops=16)


# -- functional -------------------------------------------------------------------------------

def test_perturbation_confusion():
    """d/dx [x * d/dy (x + y)] = 1 at any point, and the depth-3 analogue."""
    def f(x):
        return x * tape.jvp(lambda y: x + y, (1.0,), (1.0,))[1]

    assert tape.jvp(f, (2.0,), (1.0,))[1] == 1.0
    assert tape.grad(f)(2.0) == 1.0

    def g(x):  # d/dx [x * d/dy [y * d/dz (x + y + z)]] = d/dx [x * 1] = 1
        def h(y):
            return y * tape.jvp(lambda z: x + y + z, (1.0,), (1.0,))[1]

        return x * tape.jvp(h, (3.0,), (1.0,))[1]

    assert tape.jvp(g, (5.0,), (1.0,))[1] == 1.0
    assert tape.grad(g)(5.0) == 1.0


def test_grad_of_a_function_that_uses_jvp():
    def f(x):
        _, t = tape.jvp(lambda z: np.sum(z ** 3), (x,), (np.ones(2),))  # 3 sum x^2
        return t

    np.testing.assert_allclose(tape.grad(f)(np.array([1.0, 2.0])), [6.0, 12.0])


def test_linearize_records_once():
    f = lambda x: np.sin(x) * x
    x = np.array([0.1, 0.7])
    y, f_jvp = tape.linearize(f, x)
    np.testing.assert_allclose(y, f(x))
    for u in (np.array([1.0, 0.0]), np.array([0.3, -2.0])):
        want = lambda x, u=u: (np.cos(x) * x + np.sin(x)) * u
        assert_within(f_jvp(u), want(x), rounding_bound(want, [x], want(x), ops=16))


def test_jacobians_agree():
    def f(x, w):
        return np.tanh(np.outer(x, w) @ w) * np.sum(x)

    x, w = np.array([0.2, -0.4, 1.1]), np.array([0.5, 0.3])
    jf = tape.jacfwd(f, argnums=(0, 1))(x, w)
    jr = tape.jacrev(f, argnums=(0, 1))(x, w)
    jj = tape.jacobian(f, argnums=(0, 1))(x, w)
    for a, b, c in zip(jf, jr, jj):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(a, c, rtol=1e-13, atol=1e-15)
    assert jf[0].shape == (3, 3) and jf[1].shape == (3, 2)
    eps = 1e-6
    fd = np.stack([(f(x + eps * e, w) - f(x - eps * e, w)) / (2 * eps) for e in np.eye(3)], -1)
    np.testing.assert_allclose(jf[0], fd, rtol=1e-6)


def test_hessian_and_hvp():
    def f(x):
        return np.sum(np.exp(x[:-1] * x[1:])) + np.sum(x ** 4)

    x = np.array([0.3, -0.2, 0.5, 0.1])
    H = tape.hessian(f)(x)
    np.testing.assert_allclose(H, H.T, rtol=1e-14)
    eps = 1e-6
    g = tape.grad(f)
    fd = np.stack([(g(x + eps * e) - g(x - eps * e)) / (2 * eps) for e in np.eye(4)])
    np.testing.assert_allclose(H, fd, rtol=1e-6, atol=1e-8)
    v = np.array([1.0, -1.0, 0.5, 2.0])
    # (NumPy's H @ v sums in its own order, over entries each a few roundings from ours)
    assert_within(tape.hvp(f, x, v), H @ v, sum_bound(H * v, axis=1))
    a, b = tape.hvp(lambda p, q: np.sum(p * p * q), (x, x), (v, v))
    np.testing.assert_allclose(a, 2 * x * v + 2 * x * v, rtol=1e-14)  # 2q v + 2p v
    np.testing.assert_allclose(b, 2 * x * v, rtol=1e-14)


def test_jvp_errors():
    with pytest.raises(ValueError, match="2 primals but 1 tangents"):
        tape.jvp(lambda a, b: a * b, (1.0, 2.0), (1.0,))
    with pytest.raises(ValueError, match=r"tangents\[0\] has shape \(3,\)"):
        tape.jvp(np.sin, (np.ones(2),), (np.ones(3),))
    with pytest.raises(TypeError, match="scalar"):
        tape.hvp(np.sin, np.ones(2), np.ones(2))


def test_transforms_nest_with_reverse_mode_inside():
    """Reverse mode inside a transform is recorded (create_graph), never silent zeros."""
    f = lambda x: np.sum(x ** 3)
    x = np.array([1.0, 2.0])
    H = np.diag(6.0 * x)
    np.testing.assert_allclose(tape.jacfwd(tape.grad(f))(x), H)
    np.testing.assert_allclose(tape.jacrev(tape.grad(f))(x), H)
    np.testing.assert_allclose(tape.grad(lambda z: np.sum(tape.grad(f)(z)))(x), 6.0 * x)
    np.testing.assert_allclose(tape.jacfwd(tape.jacfwd(lambda t: t ** 3))(x),
                               np.einsum("i,ij,ik->ijk", 6.0 * x, np.eye(2), np.eye(2)))
    np.testing.assert_allclose(tape.jvp(tape.grad(f), (x,), (x,))[1], H @ x)
    with pytest.raises(NotImplementedError, match="tape.linearize inside another transform"):
        tape.grad(lambda z: np.sum(tape.linearize(lambda u: u * z, x)[1](x)))(x)
