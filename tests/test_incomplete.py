"""scipy.special's regularized incomplete gamma and beta functions on tensors (gammainc,
gammaincc, betainc, betaincc): values against SciPy, shape derivatives against mpmath, every
argument against finite differences in every mode (eager reverse, compiled replay, tape.jvp,
dual numbers, second order in x and mixed), edge shapes and SciPy's special values.
Bounds measured over wider grids are in docs/special.md."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tape
import tape.forward_ad as fwAD
from tape._incomplete import incomplete_beta, incomplete_gamma

from _fd import check_vjp, fd_vjp
from _derivative_checks import check_jvp
from tests._tolerance import assert_within, rounding_bound

sc = pytest.importorskip("scipy.special")

GAMMA = {"gammainc": sc.gammainc, "gammaincc": sc.gammaincc}
BETA = {"betainc": sc.betainc, "betaincc": sc.betaincc}
SHAPES = [1e-3, 0.1, 0.7, 1.0, 2.5, 9.5, 12.0, 80.0, 1000.0]


def _quiet(f, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return f(*args)


def _gamma_grid():
    a, x = [], []
    for s in SHAPES:
        for r in (1e-8, 1e-3, 0.1, 0.5, 0.9, 1.0, 1.1, 1.5, 3.0, 10.0):
            a.append(s)
            x.append(s * r if s >= 1.0 else r * 3.0)
        for z in (-6.0, -2.0, 2.0, 6.0):  # around the mode on the scale sqrt(a)
            a.append(s)
            x.append(max(s + z * np.sqrt(s), 1e-3))
    return np.array(a), np.array(x)


def _beta_grid():
    a, b, x = np.meshgrid(SHAPES, SHAPES, [1e-9, 1e-3, 0.1, 0.3, 0.5, 0.7, 0.9, 0.999,
                                           1.0 - 1e-9], indexing="ij")
    a, b, x = a.ravel(), b.ravel(), x.ravel()
    x = np.where(np.arange(x.size) % 9 == 4, a / (a + b), x)  # the mean, where the fraction
    return a, b, x  # converges slowest


def _rel_error(got, want):
    """|got - want| / |want|, 0 where both are the same (0, inf) and where want is below the
    smallest normal number (an underflowed tail)."""
    err = np.abs(got - want) / np.maximum(np.abs(want), np.finfo(float).tiny)
    return np.where((got == want) | (np.abs(want) < np.finfo(float).tiny), 0.0, err)


@pytest.mark.parametrize("name", sorted(GAMMA))
def test_gamma_values_against_scipy(name):
    a, x = _gamma_grid()
    got = getattr(sc, name)(tape.tensor(a), tape.tensor(x)).numpy()
    want = GAMMA[name](a, x)
    # the complement of a computed value v is 1 - v: its relative error grows as 1 / value
    assert np.max(_rel_error(got, want) * np.minimum(want, 1.0)) < 2e-14
    assert np.max(_rel_error(got, want)) < 5e-12


@pytest.mark.parametrize("name", sorted(BETA))
def test_beta_values_against_scipy(name):
    a, b, x = _beta_grid()
    got = getattr(sc, name)(tape.tensor(a), tape.tensor(b), tape.tensor(x)).numpy()
    want = BETA[name](a, b, x)
    assert np.max(_rel_error(got, want) * np.minimum(want, 1.0)) < 2e-14
    assert np.max(_rel_error(got, want)) < 5e-12


@pytest.mark.parametrize("upper", [False, True])
def test_logs_are_accurate_in_the_tails(upper):
    """log=True (tape.stats' logcdf / logsf) stays finite and accurate where the value
    underflows: against mpmath's logarithm where SciPy's value is 0."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    a = np.array([3.0, 50.0, 2.0, 400.0])
    x = np.array([1e-150, 5.0, 900.0, 900.0]) if not upper else np.array([900.0, 2000.0,
                                                                        1e-3, 100.0])
    got = incomplete_gamma(a, x, upper=upper, log=True).numpy()
    for ai, xi, g in zip(a, x, got):
        lo, hi = (xi, mp.inf) if upper else (0, xi)
        want = float(mp.log(mp.gammainc(ai, lo, hi, regularized=True)))
        assert abs(g - want) <= 1e-13 * max(1.0, abs(want)), (ai, xi, g, want)
    ab = np.array([[2.0, 30.0, 0.5], [3.0, 40.0, 200.0]])
    xb = np.array([1e-200, 1e-12, 1.0 - 1e-15])
    got = incomplete_beta(ab[0], ab[1], xb, upper=upper, log=True).numpy()
    for ai, bi, xi, g in zip(ab[0], ab[1], xb, got):
        # (the upper one as I_{1-x}(b, a): mpmath's integral from x to 1 cancels)
        ref = mp.betainc(bi, ai, 0, 1 - mp.mpf(xi), regularized=True) if upper else \
            mp.betainc(ai, bi, 0, xi, regularized=True)
        want = float(mp.log(ref))
        assert abs(g - want) <= 1e-12 * max(1.0, abs(want)), (ai, bi, xi, g, want)


def _mp_derivatives(f, args, k):
    """d f / d args[k] by mpmath at 50 digits, f given mpmath arguments."""
    import mpmath as mp

    mp.mp.dps = 50
    args = [mp.mpf(v) for v in args]

    def fk(v):
        return f(*(args[:k] + [v] + args[k + 1:]))

    return float(mp.diff(fk, args[k]))


def test_gamma_shape_derivative_against_mpmath():
    mp = pytest.importorskip("mpmath")
    rng = np.random.default_rng(3)
    a = np.array([1e-3, 0.1, 0.7, 2.5, 9.5, 12.0, 80.0, 1000.0])
    cases = []
    for s in a:
        for x in (s * rng.uniform(0.05, 0.9), s * rng.uniform(1.1, 3.0), s, 0.5, 3.0):
            cases.append((s, x))
    worst = 0.0
    for s, x in cases:
        p = mp.gammainc(s, 0, x, regularized=True)
        upper = bool(p > 0.5)  # differentiate the smaller of P and Q (mpmath's is exact)
        if (1 - p if upper else p) < 1e-40:
            continue

        def f(av, xv, upper=upper):
            return mp.gammainc(av, xv, mp.inf, regularized=True) if upper else \
                mp.gammainc(av, 0, xv, regularized=True)

        want = _mp_derivatives(f, [s, x], 0)
        t = tape.tensor(s, requires_grad=True)
        (got,) = tape.autograd.grad(incomplete_gamma(t, x, upper=upper), [t])
        worst = max(worst, abs(float(got) - want) / abs(want))
    assert worst < 1e-11


def test_beta_shape_derivatives_against_mpmath():
    mp = pytest.importorskip("mpmath")
    shapes = [1e-3, 0.7, 2.5, 12.0, 80.0]
    worst = 0.0
    for a in shapes:
        for b in shapes:
            for x in (1e-6, 0.2, a / (a + b), 0.9):
                p = mp.betainc(a, b, 0, x, regularized=True)
                upper = bool(p > 0.5)
                if (1 - p if upper else p) < 1e-40:
                    continue

                def f(av, bv, xv, upper=upper):
                    lo, hi = (xv, 1) if upper else (0, xv)
                    return mp.betainc(av, bv, lo, hi, regularized=True)

                ta, tb = tape.tensor(a, requires_grad=True), tape.tensor(b, requires_grad=True)
                ga, gb = tape.autograd.grad(incomplete_beta(ta, tb, x, upper=upper), [ta, tb])
                for got, k in ((ga, 0), (gb, 1)):
                    want = _mp_derivatives(f, [a, b, x], k)
                    worst = max(worst, abs(float(got) - want) / abs(want))
    assert worst < 1e-11


GAMMA_ARGS = {"a": lambda rng, s: rng.uniform(0.3, 6.0, s), "x": lambda rng, s: rng.uniform(
    0.1, 8.0, s)}
BETA_X = lambda rng, s: rng.uniform(0.05, 0.95, s)  # noqa: E731
BROADCASTS = [((), ()), ((4,), (4,)), ((2, 3), (3,)), ((3, 1), (1, 4)), ((), (5,))]


@pytest.mark.parametrize("name", sorted(GAMMA))
@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
def test_gamma_gradient_in_every_argument(name, shapes):
    rng = np.random.default_rng(len(name) + 7 * len(shapes[0]))
    a, x = GAMMA_ARGS["a"](rng, shapes[0]), GAMMA_ARGS["x"](rng, shapes[1])
    f = getattr(sc, name)
    check_vjp(lambda u, v: f(u * 1.0, v * 1.0), [a, x], rng=rng, rtol=1e-6, atol=1e-8,
              f_np=GAMMA[name])
    check_vjp(lambda u: f(u, x), [a], rng=rng, rtol=1e-6, atol=1e-8,
              f_np=lambda u: GAMMA[name](u, x))


@pytest.mark.parametrize("name", sorted(BETA))
@pytest.mark.parametrize("shapes", [((), (), ()), ((4,), (4,), (4,)), ((2, 1), (3,), (2, 3)),
                                    ((), (5,), ())], ids=str)
def test_beta_gradient_in_every_argument(name, shapes):
    rng = np.random.default_rng(len(name) + 5 * len(shapes[2]))
    a, b = rng.uniform(0.4, 8.0, shapes[0]), rng.uniform(0.4, 8.0, shapes[1])
    x = BETA_X(rng, shapes[2])
    f = getattr(sc, name)
    check_vjp(lambda u, v, w: f(u * 1.0, v * 1.0, w * 1.0), [a, b, x], rng=rng, rtol=1e-6,
              atol=1e-8, f_np=BETA[name])


def _log_of(v, complement):
    """log v from SciPy's values: log1p(-complement) where v is near 1 (its log(v) has
    rounded v to a few ulps of 1)."""
    return np.where(v < 0.5, np.log(v), np.log1p(-complement))


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("upper", [False, True])
def test_log_variants_gradient(upper, log):
    rng = np.random.default_rng(int(upper) + 2 * int(log))
    a, x = rng.uniform(0.5, 30.0, 6), rng.uniform(0.2, 40.0, 6)
    g = GAMMA["gammaincc" if upper else "gammainc"]
    gc = GAMMA["gammainc" if upper else "gammaincc"]
    ref = (lambda u, v: _log_of(g(u, v), gc(u, v))) if log else g
    # (SciPy's values: within rounding_bound, its conditioning in every argument)
    want = ref(a, x)
    assert_within(incomplete_gamma(a, x, upper, log).numpy(), want, rounding_bound(ref, [a, x],
                                                                                   want))
    check_vjp(lambda u, v: incomplete_gamma(u, v, upper, log), [a, x], rng=rng, rtol=1e-6,
              atol=1e-8, f_np=lambda u, v: incomplete_gamma(u, v, upper, log).numpy())
    ab, x = rng.uniform(0.5, 30.0, (2, 6)), rng.uniform(0.02, 0.98, 6)
    bf = BETA["betaincc" if upper else "betainc"]
    bc = BETA["betainc" if upper else "betaincc"]
    ref = (lambda u, v, w: _log_of(bf(u, v, w), bc(u, v, w))) if log else bf
    want = ref(ab[0], ab[1], x)
    assert_within(incomplete_beta(ab[0], ab[1], x, upper, log).numpy(), want,
                  rounding_bound(ref, [ab[0], ab[1], x], want))
    check_vjp(lambda u, v, w: incomplete_beta(u, v, w, upper, log), [ab[0], ab[1], x], rng=rng,
              rtol=1e-6, atol=1e-8,
              f_np=lambda u, v, w: incomplete_beta(u, v, w, upper, log).numpy())


def test_forward_mode_first_order_in_every_argument():
    rng = np.random.default_rng(21)
    a, x = rng.uniform(0.5, 6.0, (2, 3)), rng.uniform(0.2, 8.0, (3,))
    check_jvp(lambda u, v: sc.gammainc(u, v), [a, x], rng, rtol=2e-6, atol=1e-8)
    check_jvp(lambda u, v: sc.gammaincc(u, v), [float(a[0, 0]), float(x[0])], rng, rtol=2e-6,
              atol=1e-8)
    ab, xb = rng.uniform(0.5, 6.0, (2, 4)), rng.uniform(0.1, 0.9, 4)
    check_jvp(lambda u, v, w: sc.betainc(u, v, w), [ab[0], ab[1], xb], rng, rtol=2e-6,
              atol=1e-8)
    check_jvp(lambda u, v, w: sc.betaincc(u, v, w), [1.5, 2.5, 0.3], rng, rtol=2e-6, atol=1e-8)


def test_second_order_in_x():
    """x-derivatives are closed-form tensor expressions: hvp, grad of grad in x (shapes
    constant), in reverse and forward-over-reverse."""
    rng = np.random.default_rng(22)
    a, x = rng.uniform(0.5, 6.0, 4), rng.uniform(0.2, 8.0, 4)
    for name in sorted(GAMMA):
        f = getattr(sc, name)
        check_jvp(lambda v: f(a, v), [x], rng, order2=True, rtol=2e-6, atol=1e-7)
        for log in (False, True):
            check_jvp(lambda v: incomplete_gamma(a, v, name == "gammaincc", log), [x], rng,
                      order2=True, rtol=2e-6, atol=1e-7)
    ab, xb = rng.uniform(0.5, 6.0, (2, 4)), rng.uniform(0.1, 0.9, 4)
    for name in sorted(BETA):
        f = getattr(sc, name)
        check_jvp(lambda w: f(ab[0], ab[1], w), [xb], rng, order2=True, rtol=2e-6, atol=1e-7)
        check_jvp(lambda w: incomplete_beta(ab[0], ab[1], w, name == "betaincc", True), [xb],
                  rng, order2=True, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("upper", [False, True])
def test_mixed_second_derivatives_shape_and_x(upper, log):
    """d/dx of d/da (through the shape-derivative row's closed-form x-partial) and d/da of
    d/dx (through the density) agree with finite differences of the first derivative."""
    a, x = np.array([0.7, 3.0, 25.0]), np.array([0.4, 2.0, 30.0])

    def da(u, v):
        return tape.grad(lambda s: np.sum(incomplete_gamma(s, v, upper, log)))(u)

    def dx(u, v):
        return tape.grad(lambda s: np.sum(incomplete_gamma(u, s, upper, log)))(v)

    ct = np.array([0.3, -1.1, 0.8])
    got = tape.grad(lambda v: np.sum(ct * da(a, v)))(x)
    (want,) = fd_vjp(lambda u, v: np.asarray(da(u, v)), [a, x], ct, [1])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9)
    got = tape.grad(lambda u: np.sum(ct * dx(u, x)))(a)
    (want,) = fd_vjp(lambda u, v: np.asarray(dx(u, v)), [a, x], ct, [0])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9)
    ab, xb = np.array([[0.7, 3.0], [2.0, 0.6]]), np.array([0.3, 0.8])

    def dab(v):
        s = tape.tensor(ab, requires_grad=True)
        y = incomplete_beta(s[0], s[1], v, upper, log)
        (g,) = tape.autograd.grad(np.sum(y), [s], create_graph=True)
        return g

    ct = np.array([[0.3, -1.1], [0.8, 0.5]])
    got = tape.grad(lambda v: np.sum(ct * dab(v)))(xb)
    (want,) = fd_vjp(lambda v: dab(v).detach().numpy(), [xb], ct, [0])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9)
    # forward over reverse: the tangent of the shape gradient along x
    _, jt = tape.jvp(lambda v: dab(v), (xb,), (np.array([1.0, -0.5]),))
    (want,) = fd_vjp(lambda v: np.sum(dab(v).detach().numpy() * ct), [xb], 1.0, [0])
    np.testing.assert_allclose(np.sum(np.asarray(jt) * ct), np.dot(want, [1.0, -0.5]),
                               rtol=1e-5, atol=1e-9)


def test_second_derivative_in_a_shape_raises_a_clear_error():
    a, x = tape.tensor(2.0, requires_grad=True), 1.5
    with pytest.raises(NotImplementedError, match=r"gammainc: the second derivative in its "
                                                  r"shape parameter a"):
        tape.grad(tape.grad(lambda s: sc.gammainc(s, x)))(2.0)
    with pytest.raises(NotImplementedError, match="gammaincc.*finite differences"):
        tape.hessian(lambda s: np.sum(sc.gammaincc(s, x)))(np.array([2.0, 3.0]))
    with pytest.raises(NotImplementedError, match=r"betainc: .*shape parameters a, b"):
        tape.hessian(lambda s: sc.betainc(s[0], s[1], 0.4))(np.array([2.0, 3.0]))
    with pytest.raises(NotImplementedError, match=r"log\(betaincc\)"):
        tape.hessian(lambda s: incomplete_beta(s[0], s[1], 0.4, True, True))(
            np.array([2.0, 3.0]))
    y = sc.gammainc(a, x)  # first order is fine
    (g,) = tape.autograd.grad(y, [a])
    assert np.isfinite(g)


def test_dual_numbers_in_every_argument():
    a, x = np.array([0.5, 2.0, 9.0]), np.array([0.3, 2.5, 11.0])
    ta, tx = np.array([0.2, -1.0, 0.5]), np.array([1.0, 0.4, -0.3])
    with fwAD.dual_level():
        y = sc.gammaincc(fwAD.make_dual(tape.tensor(a), tape.tensor(ta)),
                         fwAD.make_dual(tape.tensor(x), tape.tensor(tx)))
        primal, tangent = fwAD.unpack_dual(y)
    _, jt = tape.jvp(lambda u, v: sc.gammaincc(u, v), (a, x), (ta, tx))
    want = sc.gammaincc(a, x)
    assert_within(primal.numpy(), want, rounding_bound(sc.gammaincc, [a, x], want))
    np.testing.assert_allclose(tangent.numpy(), np.asarray(jt), rtol=1e-12)
    b, xb = np.array([1.5, 4.0, 0.7]), np.array([0.2, 0.5, 0.9])
    with fwAD.dual_level():
        y = sc.betainc(fwAD.make_dual(tape.tensor(a), tape.tensor(ta)), b,
                       fwAD.make_dual(tape.tensor(xb), tape.tensor(tx)))
        primal, tangent = fwAD.unpack_dual(y)
    _, jt = tape.jvp(lambda u, w: sc.betainc(u, b, w), (a, xb), (ta, tx))
    want = sc.betainc(a, b, xb)
    assert_within(primal.numpy(), want, rounding_bound(sc.betainc, [a, b, xb], want))
    np.testing.assert_allclose(tangent.numpy(), np.asarray(jt), rtol=1e-12)


def _likelihood(p):
    """Every function of the family between ordinary rows, shapes and x differentiable."""
    a, b = 1.0 + p[:3] ** 2, 2.0 + p[3:6] ** 2
    x = 1.0 / (1.0 + np.exp(-p[6:9]))
    return (np.sum(np.log(sc.gammainc(a, 3.0 * x))) + np.sum(sc.gammaincc(b, 4.0 * x))
            + np.sum(sc.betainc(a, b, x) * sc.betaincc(b, a[0], x)))


def test_compiled_replay_same_bits_and_modes(tmp_path):
    rng = np.random.default_rng(9)
    p = rng.normal(size=9)
    cf = tape.compile(_likelihood, p)
    for q in (p, 0.7 * p):
        value, g = cf.value_and_grad(q)
        value0, g0 = tape.value_and_grad(_likelihood)(q)
        assert value == value0 and np.array_equal(g, g0)
        assert cf(q) == value0
    v = rng.normal(size=9)
    _, jv = cf.jvp((p,), (v,))
    np.testing.assert_allclose(jv, np.sum(tape.grad(_likelihood)(p) * v), rtol=1e-12)
    (want,) = fd_vjp(lambda q: _likelihood(q), [p], 1.0, [0])
    np.testing.assert_allclose(cf.value_and_grad(p)[1], want, rtol=1e-6, atol=1e-9)
    path = tmp_path / "incomplete.npz"  # the rows' params (upper, log) are saved with them
    cf.save(path)
    loaded = tape.load(path)
    value, g = loaded.value_and_grad(0.8 * p)
    value0, g0 = cf.value_and_grad(0.8 * p)
    assert value == value0 and np.array_equal(g, g0)
    lcf = tape.compile(lambda q: np.sum(incomplete_beta(q[0] ** 2 + 0.5, 2.0, 0.3, True, True)),
                       p[:1])
    lcf.save(path)
    np.testing.assert_array_equal(tape.load(path).value_and_grad(p[:1])[1],
                                  lcf.value_and_grad(p[:1])[1])


def test_zero_d_and_empty_operands():
    y = sc.gammainc(tape.tensor(2.0), 1.0)
    want = sc.gammainc(2.0, 1.0)
    assert y.shape == () and abs(y.item() - want) <= rounding_bound(sc.gammainc, [2.0, 1.0],
                                                                    want)
    e = tape.tensor(np.zeros((0, 3)), requires_grad=True)
    y = sc.betainc(e + 1.0, 2.0, 0.5)
    assert y.shape == (0, 3)
    (g,) = tape.autograd.grad(np.sum(y), [e])
    assert g.shape == (0, 3)
    y = sc.gammaincc(np.ones(3), tape.tensor(np.zeros((0, 1)), requires_grad=True))
    assert y.shape == (0, 3)
    with pytest.raises(ValueError, match="betainc: operand shapes"):
        sc.betainc(tape.tensor(np.ones(2)), np.ones(3), 0.5)
    with pytest.raises(TypeError, match="gammainc: tapejit differentiates float64"):
        sc.gammainc(tape.tensor(1.0), np.array([1 + 2j]))


def test_special_values_are_scipys():
    a = np.array([0.0, 0.0, 1.0, -1.0, 1.0, np.inf, 1.0, 2.0, 2.0, np.nan])
    x = np.array([0.0, 1.0, 0.0, 1.0, -1.0, 1.0, np.inf, np.nan, 0.0, 1.0])
    for name, f in GAMMA.items():
        got = _quiet(getattr(sc, name), tape.tensor(a), tape.tensor(x)).numpy()
        np.testing.assert_array_equal(got, f(a, x))
    a = np.array([0.0, 1.0, 0.0, 1.0, -1.0, 1.0, 1.0, np.inf, 0.0, 2.0, 2.0, 1.0])
    b = np.array([1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 3.0, 3.0, np.inf])
    x = np.array([0.5, 0.5, 0.0, 0.0, 0.5, 1.5, 1.0, 0.5, 0.5, 0.0, 1.0, 0.5])
    for name, f in BETA.items():
        got = _quiet(getattr(sc, name), tape.tensor(a), tape.tensor(b), tape.tensor(x)).numpy()
        np.testing.assert_array_equal(got, f(a, b, x))


def test_gradients_at_the_ends_of_the_support():
    """x = 0 and x = 1 (beta), x = 0 (gamma): value 0 or 1, shape derivatives 0, the density
    (inf, a finite value or 0) in x; NaN derivatives for invalid shapes."""
    ta, tx = tape.tensor([0.5, 1.0, 3.0], requires_grad=True), tape.tensor(
        [0.0, 0.0, 0.0], requires_grad=True)
    ga, gx = tape.autograd.grad(np.sum(sc.gammainc(ta, tx)), [ta, tx])
    np.testing.assert_array_equal(ga, 0.0)
    np.testing.assert_array_equal(gx, [np.inf, 1.0, 0.0])
    s = tape.tensor([2.0, 0.5], requires_grad=True)
    xb = tape.tensor([0.0, 1.0], requires_grad=True)
    gs, gx = tape.autograd.grad(np.sum(sc.betainc(s, 3.0, xb)), [s, xb])
    np.testing.assert_array_equal(gs, 0.0)
    np.testing.assert_array_equal(gx, [0.0, 0.0])
    (gs,) = _quiet(lambda: tape.autograd.grad(np.sum(sc.gammainc(-s, 1.0)), [s]))
    assert np.all(np.isnan(gs))


def test_no_convergence_is_nan_not_a_wrong_number():
    """Shapes beyond the iteration budget (O(sqrt(a)) iterations: ~1e7 and above) give NaN."""
    y = sc.gammainc(tape.tensor([1e13, 2.0]), np.array([1e13, 1.0])).numpy()
    want = sc.gammainc(2.0, 1.0)
    assert np.isnan(y[0]) and abs(y[1] - want) <= rounding_bound(sc.gammainc, [2.0, 1.0], want)
    y = sc.betainc(tape.tensor(1e13), 1e13, 0.5).numpy()
    assert np.isnan(y)


def test_plain_arrays_stay_scipys():
    assert type(sc.gammainc(np.ones(2), np.ones(2))) is np.ndarray
    want = sc.betainc(2.0, 3.0, 0.4)
    assert abs(tape.special.betainc(2.0, 3.0, 0.4).item() - want) <= rounding_bound(
        sc.betainc, [2.0, 3.0, 0.4], want)


def test_jacfwd_matches_jacrev_in_every_argument():
    """jacfwd (k tangent directions at once through the NumPy forward rules) and jacrev."""
    a, b, x = np.array([0.6, 2.0, 7.0]), np.array([1.5, 0.8, 30.0]), np.array([0.2, 0.5, 0.9])

    def f(p):
        return sc.betaincc(p[0], p[1], p[2]) + sc.gammainc(p[1], 3.0 * p[2] + p[0])

    p = np.stack([a, b, x])
    jf = np.asarray(tape.jacfwd(f)(p))
    jr = np.asarray(tape.jacrev(f)(p))
    np.testing.assert_allclose(jf, jr, rtol=1e-13, atol=1e-15)
    (want,) = fd_vjp(lambda q: f(q)[1], [p], 1.0, [0])
    np.testing.assert_allclose(jf[1], want, rtol=1e-6, atol=1e-9)


def test_small_shapes_upper_tail_against_mpmath():
    """Q(a, x) for a, x <= 1 where P is near 1 (Q small): computed directly, not as 1 - P:
    the value and its a-derivative to a few ulps, down to a = 1e-12."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    worst = 0.0
    for a in (1e-12, 1e-8, 1e-5, 1e-3, 0.05, 0.2, 0.26, 0.7, 1.0):
        for x in (1e-6, 0.01, 0.3, 0.56, 0.944, 1.0):
            t = tape.tensor(a, requires_grad=True)
            y = sc.gammaincc(t, x)
            (g,) = tape.autograd.grad(y, [t])
            q = mp.gammainc(a, x, mp.inf, regularized=True)
            dq = mp.diff(lambda s: mp.gammainc(s, x, mp.inf, regularized=True), a)
            worst = max(worst, abs(y.item() / float(q) - 1), abs(float(g) / float(dq) - 1))
    assert worst < 5e-14
