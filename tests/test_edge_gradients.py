"""Gradients at the edges, the same in every mode: eager reverse (array loops and the 0-d path),
compiled replay, forward mode (the jitted tangent sweep, compiled jvp, dual numbers), the
tensor-level rules of higher order (create_graph), and second derivatives.

- logaddexp where its value is infinite: each partial is its limit (maximum's share: 1 for the
  larger operand, 0.5 each on a tie), not exp(inf - inf) = NaN;
- the 2-norm (and p-norms) at zero: the subgradient 0, as PyTorch and JAX give;
- power of a negative base to an exponent beyond 2^53 (or +-1e308): NumPy's values, and the
  derivative b a^(b-1) with the sign of the odd power b - 1.
"""
import warnings

import numpy as np
import pytest

import tape
from tape import forward_ad as fwAD


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def every_mode(f, x):
    """f's gradient at the 1-D array x, by each mode: {mode: array}."""
    x = np.asarray(x, dtype=np.float64)
    eye = np.eye(x.size)
    cf = tape.compile(f, x)
    out = {
        "eager": tape.grad(f)(x),
        "replay": cf.value_and_grad(x)[1],
        "jacfwd": tape.jacfwd(f)(x),
        "jvp": np.array([tape.jvp(f, (x,), (e,))[1] for e in eye]),
        "replay_jvp": np.array([cf.jvp((x,), (e,))[1] for e in eye]),
    }
    xt = tape.tensor(x, requires_grad=True)
    (g,) = tape.autograd.grad(f(xt), [xt], create_graph=True)  # the tensor-level rules
    out["create_graph"] = g.detach().numpy()
    with fwAD.dual_level():
        out["dual"] = np.array([fwAD.unpack_dual(f(fwAD.make_dual(x, e))).tangent.item()
                                for e in eye])
    return out


def assert_every_mode(f, x, want, rtol=0.0):
    for mode, got in every_mode(f, x).items():
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0.0, err_msg=mode)


# ---------------------------------------------------------------------------------------------
# logaddexp where its value is infinite

INF = np.inf
# (a, b) -> (d/da, d/db)
LOGADDEXP_EDGES = [
    ((-INF, -INF), (0.5, 0.5)),  # reproducer: NaN, NaN
    ((INF, INF), (0.5, 0.5)),
    ((INF, 2.0), (1.0, 0.0)),
    ((-3.0, INF), (0.0, 1.0)),
    ((-INF, 1.5), (0.0, 1.0)),
    ((INF, -INF), (1.0, 0.0)),
]


@pytest.mark.parametrize("ab, want", LOGADDEXP_EDGES, ids=[str(ab) for ab, _ in LOGADDEXP_EDGES])
def test_logaddexp_at_infinities_scalar_path(ab, want):
    assert_every_mode(lambda x: np.logaddexp(x[0], x[1]), ab, want)


def test_logaddexp_at_infinities_array_loops():
    a = np.array([ab[0] for ab, _ in LOGADDEXP_EDGES] + [0.3, -2.0])
    b = np.array([ab[1] for ab, _ in LOGADDEXP_EDGES] + [0.3, 1.0])
    y = np.logaddexp(a, b)
    want_a = np.array([w[0] for _, w in LOGADDEXP_EDGES] + list(np.exp(a[-2:] - y[-2:])))
    want_b = np.array([w[1] for _, w in LOGADDEXP_EDGES] + list(np.exp(b[-2:] - y[-2:])))
    n = len(a)
    w = np.arange(1.0, n + 1)  # a distinct weight per element: each partial lands in its place
    assert_every_mode(lambda x: np.sum(np.logaddexp(x[:n], x[n:]) * w), np.concatenate([a, b]),
                      np.concatenate([want_a, want_b]) * np.tile(w, 2))


def test_logaddexp_second_derivatives_at_infinities_are_numbers():
    H = tape.hessian(lambda x: np.logaddexp(x[0], x[1]))(np.array([-INF, -INF]))
    assert np.all(np.isfinite(H))
    # away from the edge, the usual second derivatives: p (1 - p) and -p (1 - p)
    x = np.array([0.2, -0.4])
    p = 1.0 / (1.0 + np.exp(-0.6))
    np.testing.assert_allclose(tape.hessian(lambda x: np.logaddexp(x[0], x[1]))(x),
                               p * (1 - p) * np.array([[1.0, -1.0], [-1.0, 1.0]]), rtol=1e-14)


# ---------------------------------------------------------------------------------------------
# norm at zero


@pytest.mark.parametrize("norm", [
    lambda x: np.linalg.norm(x),
    lambda x: np.linalg.norm(x, 2),
    lambda x: np.linalg.norm(np.reshape(x, (2, 2)), "fro"),
    lambda x: np.linalg.norm(x, 3),
    lambda x: np.linalg.norm(x, 1.5),
    lambda x: np.sum(np.linalg.norm(np.reshape(x, (2, 2)), axis=1)),
], ids=["default", "ord2", "fro", "ord3", "ord1.5", "axis"])
def test_norm_at_zero_has_gradient_zero(norm):
    """Reproducer: sqrt's inf times 2x's 0 gave NaN."""
    assert_every_mode(norm, np.zeros(4), np.zeros(4))


@pytest.mark.parametrize("norm", [
    lambda x: np.linalg.norm(x),
    lambda x: np.linalg.norm(np.reshape(x, (2, 2)), "fro"),
    lambda x: np.linalg.norm(x, 3),
], ids=["default", "fro", "ord3"])
def test_norm_at_zero_has_second_derivatives_zero(norm):
    assert np.all(tape.hessian(norm)(np.zeros(4)) == 0.0)


def test_norm_with_a_zero_row_keeps_the_other_rows_gradients():
    x = np.array([0.0, 0.0, 3.0, 4.0])
    f = lambda x: np.sum(np.linalg.norm(np.reshape(x, (2, 2)), axis=1))  # noqa: E731
    assert_every_mode(f, x, [0.0, 0.0, 0.6, 0.8], rtol=1e-15)


def test_norm_replay_recorded_away_from_zero_and_replayed_at_zero():
    """The test for zero is a guard: a replay where it changes records again, both ways."""
    f = lambda x: np.linalg.norm(x) * 2.0  # noqa: E731
    cf = tape.compile(f, np.array([3.0, 4.0]))
    value, grad = cf.value_and_grad(np.zeros(2))
    assert value == 0.0
    np.testing.assert_array_equal(grad, [0.0, 0.0])
    cf = tape.compile(f, np.zeros(2))
    value, grad = cf.value_and_grad(np.array([3.0, 4.0]))
    assert value == 10.0
    np.testing.assert_allclose(grad, [1.2, 1.6], rtol=1e-15)
    np.testing.assert_array_equal(cf.value_and_grad(np.zeros(2))[1], [0.0, 0.0])


def test_norm_away_from_zero_is_unchanged():
    x = np.array([0.3, -1.2, 2.5, 0.7])
    value, grad = tape.value_and_grad(np.linalg.norm)(x)
    assert value == np.linalg.norm(x)
    np.testing.assert_allclose(grad, x / value, rtol=1e-15)


# ---------------------------------------------------------------------------------------------
# power of a negative base to huge exponents

BASES = np.array([-2.0, -0.5, -1.0, -3.0, 2.0, 0.5, 1.0, -np.inf, -0.0, 0.0, np.inf])
HUGE = [1e308, -1e308, 1.5e300, -1.5e300, 2.0 ** 63, -(2.0 ** 63), 1e19, -1e19,
        2.0 ** 53 + 2.0, -(2.0 ** 53 + 2.0), 2.0 ** 53 - 1.0, -(2.0 ** 53 - 1.0), 2.5e15 + 0.5]


def _same(got, want):
    return (got == want) | (np.isnan(got) & np.isnan(want))


@pytest.mark.parametrize("b", HUGE)
def test_power_with_huge_exponents_matches_numpy(b):
    """Reproducer: `b != int(b)` in the kernels' _power overflows for |b| >= 2^63 (undefined in
    LLVM; NaN where NumPy gives 0, 1 or inf)."""
    want = np.power(BASES, b)
    eager = np.power(tape.tensor(BASES), b).numpy()  # the sweep's own array loop
    scalar = np.array([(tape.tensor(a) ** b).item() for a in BASES])  # the 0-d path
    cf = tape.compile(lambda a, e: np.power(a, e), BASES, np.full(BASES.shape, 1.5))
    replay = cf(BASES, np.full(BASES.shape, b))
    cf0 = tape.compile(lambda a, e: a ** e, 1.0, 1.5)
    replay0 = np.array([cf0(a, b) for a in BASES])
    for name, got in [("eager", eager), ("0-d", scalar), ("replay", replay),
                      ("0-d replay", replay0)]:
        assert _same(got, want).all(), (name, BASES[~_same(got, want)], got[~_same(got, want)])


@pytest.mark.parametrize("b", [1e308, -1e308, 2.0 ** 53 + 2.0, -(2.0 ** 53 + 2.0), 2.0 ** 63])
def test_power_derivative_of_a_negative_base_beyond_2_53_has_the_odd_sign(b):
    """Reproducer: b - 1 rounds to an even number beyond 2^53, so b a^(b-1) took the sign of
    an even power: d/da a^b at a = -1 came out +b instead of -b."""
    # every |b| > 2^53 is even: d/da (-1)^b = b (-1)^(b-1) = -b
    assert_every_mode(lambda x: x[0] ** b, [-1.0], [-b])
    # the magnitude as before: inf or 0, with the odd power's sign
    g = tape.grad(lambda x: np.sum(x ** b))(np.array([-2.0, -0.5, 2.0]))
    want = [-np.inf, -0.0, np.inf] if b > 0 else [0.0, np.inf, 0.0]
    np.testing.assert_array_equal(g, want)


def test_power_second_derivative_of_a_negative_base_beyond_2_53():
    b = 2.0 ** 53 + 2.0
    # d2/da2 (-1)^b = b (b - 1) (-1)^(b-2) = b (b - 1)
    h = tape.hessian(lambda x: x[0] ** b)(np.array([-1.0]))
    np.testing.assert_allclose(h, [[b * (b - 1.0)]], rtol=1e-15)


# ---------------------------------------------------------------------------------------------
# derivatives whose textbook form squares its operand: no overflow of the square


SQUARES = [
    # (f, x, want): d/dx where x * x overflows (or a * a + b * b underflows)
    ("arctan", lambda x: np.arctan(x[0]), [1e160], [1e-320]),
    ("arcsinh", lambda x: np.arcsinh(x[0]), [-1e200], [1e-200]),
    ("arccosh", lambda x: np.arccosh(x[0]), [1e200], [1e-200]),
    ("arctan2 huge", lambda x: np.arctan2(x[0], x[1]), [3e200, 4e200], [0.16e-200, -0.12e-200]),
    ("arctan2 tiny", lambda x: np.arctan2(x[0], x[1]), [3e-200, 4e-200], [0.16e200, -0.12e200]),
]


@pytest.mark.parametrize("name, f, x, want", SQUARES, ids=[s[0] for s in SQUARES])
def test_derivatives_do_not_overflow_through_a_square(name, f, x, want):
    """Reproducer: 1 / sqrt(x * x + 1) was 0 at x = 1e200 (x * x = inf), and the partials of
    arctan2 were 0 at (3e200, 4e200) and +-inf at (3e-200, 4e-200)."""
    assert_every_mode(f, x, want, rtol=4e-16)


def test_derivatives_through_a_square_keep_their_bits_in_range():
    x = np.array([0.3, -2.0, 1e100, 7.5])
    for f, d in [(np.arctan, lambda x: 1.0 / (1.0 + x * x)),
                 (np.arcsinh, lambda x: 1.0 / np.sqrt(x * x + 1.0))]:
        np.testing.assert_array_equal(tape.grad(lambda z: np.sum(f(z)))(x), d(x))
    a, b = np.array([0.3, -2.0, 1e100]), np.array([1.5, 0.25, -3e99])
    ga, gb = tape.grad(lambda a, b: np.sum(np.arctan2(a, b)), argnums=(0, 1))(a, b)
    np.testing.assert_array_equal(ga, b / (a * a + b * b))
    np.testing.assert_array_equal(gb, -a / (a * a + b * b))
