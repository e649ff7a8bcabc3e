"""scipy.special's ufuncs on tensors: every special-function row of the table, through the
user's own ``scipy.special`` calls, in every mode (eager reverse, compiled replay, forward mode
by ``tape.jvp`` and by dual numbers, second order), against SciPy's values and finite
differences. Accuracy over whole domains: tests/test_special_accuracy.py."""
from __future__ import annotations

import subprocess
import sys
import warnings
import zlib

import numpy as np
import pytest

import tape
import tape.forward_ad as fwAD
from jit.table import SCIPY_SPECIAL, SPECIAL_ROWS, TABLE

from _fd import check_vjp, fd_vjp
from _derivative_checks import check_jvp
from tests._tolerance import TINY, assert_within, sum_bound

sc = pytest.importorskip("scipy.special")


def _uniform(lo, hi):
    return lambda rng, shape: rng.uniform(lo, hi, size=shape)


def _either_sign(lo, hi):
    """|x| in [lo, hi], either sign (away from a kink or pole at 0)."""
    return lambda rng, shape: rng.uniform(lo, hi, size=shape) * rng.choice([-1.0, 1.0], shape)


# domains away from poles and kinks, where SciPy's values are accurate to a few ulps (so that
# values compare within docs/special.md's bounds) and central differences with h = 1e-6 resolve
# the derivative
UNARY = {
    "gammaln": _uniform(0.1, 30.0), "loggamma": _uniform(0.1, 30.0),
    "gamma": _uniform(0.2, 8.0), "digamma": _uniform(0.1, 30.0), "psi": _uniform(0.1, 30.0),
    "erf": _uniform(-3.0, 3.0), "erfc": _uniform(-3.0, 3.0), "erfcx": _uniform(-2.0, 30.0),
    "erfinv": _uniform(-0.95, 0.95), "ndtr": _uniform(-6.0, 6.0),
    "log_ndtr": _uniform(-30.0, 6.0), "ndtri": _uniform(0.02, 0.98),
    "expit": _uniform(-20.0, 20.0), "logit": _uniform(0.02, 0.98),
    "log_expit": _uniform(-30.0, 30.0), "i0": _uniform(-25.0, 25.0),
    "i0e": _either_sign(0.05, 40.0), "i1": _uniform(-25.0, 25.0),
    "i1e": _either_sign(0.05, 40.0), "entr": _uniform(0.05, 5.0),
}
BINARY = {
    "betaln": (_uniform(0.2, 40.0), _uniform(0.2, 40.0)),
    "beta": (_uniform(0.3, 6.0), _uniform(0.3, 6.0)),
    "xlogy": (_uniform(-3.0, 3.0), _uniform(0.1, 5.0)),
    "xlog1py": (_uniform(-3.0, 3.0), _uniform(-0.9, 5.0)),
    "rel_entr": (_uniform(0.1, 4.0), _uniform(0.1, 4.0)),
    "kl_div": (_uniform(0.1, 4.0), _uniform(0.1, 4.0)),
    "huber": (_uniform(0.5, 2.0), _either_sign(0.05, 4.0)),
    "pseudo_huber": (_uniform(0.2, 3.0), _uniform(-4.0, 4.0)),
}
SHAPES = [(), (1,), (7,), (2, 3)]


def _fn(name):
    return getattr(sc, name)


def _seed(*key):
    return zlib.crc32(repr(key).encode())


def _ours(f):
    """f on tensors, NumPy arrays made constant tensors first: our kernels' values (finite
    differences then differentiate ours; SciPy's values are compared separately)."""
    def g(*args):
        return f(*(a if isinstance(a, tape.Tensor) else tape.tensor(np.asarray(a, float))
                   for a in args))

    return g


# docs/special.md's bounds against SciPy, in ulps of max(|SciPy's value|, floor) (floor 1 for
# the functions with zeros inside their domain, where the arguments' rounding moves the value by
# an ulp of 1). erfc / ndtr / log_ndtr at x: SciPy's erfc(z) is 1 - erf(z) near 0 (a few ulps
# of 1) and exp(-z^2) of a rounded z^2 beyond (~z^2 ulps; z = x / sqrt 2 for ndtr), within 4 +
# 4 z^2 ulps and (for |z| < 1) 4 ulps of 1, and docs/special.md's 1024-4096 ulps in the tail
ULPS = {"erf": 2, "log_expit": 2, "entr": 2, "xlogy": 2, "xlog1py": 2, "huber": 2,
        "erfc": 1024, "ndtr": 4096, "log_ndtr": 4096, "expit": 5, "logit": 5, "erfinv": 5,
        "ndtri": 5, "erfcx": 8, "gammaln": 4, "loggamma": 4, "digamma": 6, "psi": 6,
        "gamma": 12, "i0": 16, "i0e": 16, "i1": 16, "i1e": 16, "betaln": 16, "beta": 16,
        "rel_entr": 3, "kl_div": 3, "pseudo_huber": 96}
FLOOR_ONE = {"gammaln", "loggamma", "digamma", "psi", "logit", "betaln", "rel_entr", "kl_div"}


TAIL = {"erfc": 1.0, "ndtr": 0.5, "log_ndtr": 0.5}  # (z^2 / x^2)


def _documented_bound(name, want, x=None, ulps=None, floor=None):
    """How far ours may be from SciPy's `want` (at x, for a unary function): the documented
    ulps of max(|want|, floor)."""
    floor = (1.0 if name in FLOOR_ONE else TINY) if floor is None else floor
    ulps = ULPS[name] if ulps is None else ulps
    if name in TAIL and x is not None:
        z2 = TAIL[name] * np.square(x)
        ulps = np.minimum(ulps, 4 + 4 * z2)
        return ulps * np.spacing(np.maximum(np.abs(want), floor)) \
            + np.where(z2 < 1, 4 * np.spacing(1.0), 0.0)
    return ulps * np.spacing(np.maximum(np.abs(want), floor))


def _close_to_scipy(name, *args):
    f = _fn(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = f(*args)
    bound = _documented_bound(name, want, args[0] if len(args) == 1 else None)
    assert_within(_ours(f)(*args).numpy(), want, bound, err_msg=name)


def test_every_special_row_is_tested_here():
    rows = {TABLE[c].name for c in SPECIAL_ROWS}
    assert rows == {SCIPY_SPECIAL[n] for n in UNARY} | set(BINARY) | {"polygamma"}
    for name in SCIPY_SPECIAL:
        assert isinstance(_fn(name), np.ufunc), name


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_value_and_gradient(name, shape):
    rng = np.random.default_rng(_seed(name, shape))
    x = UNARY[name](rng, shape)
    f = _fn(name)
    _close_to_scipy(name, x)
    check_vjp(lambda a: f(a * 1.0), [x], rng=rng, rtol=1e-6, atol=1e-8, f_np=_ours(f))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_forward_and_second_order(name):
    rng = np.random.default_rng(11)
    f = _ours(_fn(name))
    check_jvp(f, [UNARY[name](rng, (5,))], rng, order2=True, rtol=2e-6, atol=1e-7)
    check_jvp(lambda a: f(a * 1.0), [float(UNARY[name](rng, ()))], rng, order2=True,
              rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_grad_of_grad(name):
    """tape.grad of tape.grad (create_graph: the partial's formula as tensor operations)."""
    rng = np.random.default_rng(12)
    f = _fn(name)
    x = UNARY[name](rng, (4,))
    d2 = tape.grad(lambda a: np.sum(tape.grad(lambda b: np.sum(f(b)))(a)))
    got = d2(x)

    def d1(a):
        return np.asarray(tape.grad(lambda b: np.sum(f(b)))(a))

    (want,) = fd_vjp(d1, [x], np.ones(4), [0])
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-7)


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((), ()), ((4,), (4,)), ((2, 3), (3,)), ((3, 1), (1, 4)),
                                    ((), (5,)), ((2, 2), ())], ids=str)
def test_binary_value_and_gradient(name, shapes):
    rng = np.random.default_rng(_seed(name, shapes))
    da, db = BINARY[name]
    a, b = da(rng, shapes[0]), db(rng, shapes[1])
    f = _fn(name)
    _close_to_scipy(name, a, b)
    ours = _ours(f)
    check_vjp(lambda x, y: f(x * 1.0, y * 1.0), [a, b], rng=rng, rtol=1e-6, atol=1e-8,
              f_np=ours)
    check_vjp(lambda x: f(x, b), [a], rng=rng, rtol=1e-6, atol=1e-8,  # a NumPy partner
              f_np=lambda x: ours(x, b))
    check_vjp(lambda y: f(a, y), [b], rng=rng, rtol=1e-6, atol=1e-8, f_np=lambda y: ours(a, y))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_forward_and_second_order(name):
    rng = np.random.default_rng(13)
    da, db = BINARY[name]
    f = _ours(_fn(name))
    check_jvp(f, [da(rng, (2, 3)), db(rng, (3,))], rng, order2=True, rtol=2e-6, atol=1e-7)
    check_jvp(lambda x, y: f(x * 1.0, y * 1.0), [float(da(rng, ())), float(db(rng, ()))], rng,
              order2=True, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_dual_numbers(name):
    rng = np.random.default_rng(14)
    x = UNARY[name](rng, (3,))
    t = rng.normal(size=3)
    f = _fn(name)
    with fwAD.dual_level():
        y = f(fwAD.make_dual(tape.tensor(x), tape.tensor(t)))
        primal, tangent = fwAD.unpack_dual(y)
    _, jt = tape.jvp(f, (x,), (t,))
    assert_within(primal.numpy(), f(x), _documented_bound(name, f(x), x), err_msg=name)
    np.testing.assert_allclose(tangent.numpy(), np.asarray(jt), rtol=1e-12, atol=1e-300)


def _every_row(x):
    """All special rows at once, each on an argument inside its domain."""
    total = 0.0
    for name in sorted(UNARY):
        arg = 0.5 + 0.45 * np.tanh(x) if name in ("ndtri", "logit", "entr") else \
            0.9 * np.tanh(x) if name == "erfinv" else \
            2.0 + x * x if name in ("gammaln", "loggamma", "gamma", "digamma", "psi") else 3.0 * x
        total = total + np.sum(_fn(name)(arg))
    for name in sorted(BINARY):
        total = total + np.sum(_fn(name)(1.5 + x * x, 0.5 + 0.25 * x * x))
    return total + np.sum(tape.special.polygamma(2, 1.0 + x * x))


@pytest.mark.parametrize("size", [1, 5, 10_000])
def test_replay_and_eager_give_the_same_bits(size):
    """The rows' eager values are the replay's loops (OWN_VALUE): values and gradients bit for
    bit, 0-d values included, large arrays swept block by block included."""
    x = np.linspace(-1.3, 1.4, size) if size > 1 else np.array(0.37)
    cf = tape.compile(_every_row, x)
    for a in (x, 0.9 * x):
        value, g = cf.value_and_grad(a)
        value0, g0 = tape.value_and_grad(_every_row)(a)
        assert value == value0 and np.array_equal(g, g0)


def test_eager_values_are_the_kernels():
    """0-d and array eager values are the same bits (both the compiled kernel's)."""
    x = np.array([0.3, 1.7, 4.2, 13.0])
    for name in sorted(UNARY):
        arg = x / 5.0 if name in ("erfinv", "ndtri", "logit") else x
        arr = _fn(name)(tape.tensor(arg)).numpy()
        one = [_fn(name)(tape.tensor(v)).item() for v in arg]
        assert np.array_equal(arr, one, equal_nan=True), name


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_polygamma(n):
    rng = np.random.default_rng(n)
    x = rng.uniform(0.2, 12.0, (6,))
    y = tape.special.polygamma(n, tape.tensor(x))
    want = sc.polygamma(n, x)  # (documented: digamma's 6 ulps at n = 0, 12 for n = 1..6)
    assert_within(y.numpy(), want, _documented_bound("digamma", want) if n == 0 else
                  _documented_bound("polygamma", want, ulps=12, floor=1.0 if n == 1 else TINY))
    check_vjp(lambda a: tape.special.polygamma(n, a), [x], rng=rng, rtol=1e-6,
              f_np=lambda a: tape.special.polygamma(n, a).numpy())
    check_jvp(lambda a: tape.special.polygamma(n, a), [x], rng, order2=True, rtol=2e-6)


def test_polygamma_order_is_a_constant():
    n = tape.tensor(1.0, requires_grad=True)
    with pytest.raises(TypeError, match="order n is an integer"):
        tape.special.polygamma(n, tape.tensor([1.0, 2.0]))
    assert np.isnan(tape.special.polygamma(1.5, tape.tensor(2.0)).item())  # SciPy's NaN too
    assert np.array_equal(tape.special.polygamma(np.array([1, 2]), 3.0).numpy(),
                          tape.special.polygamma(np.array([1.0, 2.0]), 3.0).numpy())


@pytest.mark.parametrize("name, x, value, grad", [
    ("gammaln", 0.0, np.inf, -np.inf), ("gammaln", -2.0, np.inf, np.nan),
    ("digamma", 0.0, -np.inf, np.inf), ("digamma", -3.0, np.nan, np.inf),
    ("entr", 0.0, 0.0, np.inf), ("entr", -1.0, -np.inf, np.nan),
    ("erfinv", 1.0, np.inf, np.inf), ("ndtri", 0.0, -np.inf, np.inf),
    ("logit", 0.0, -np.inf, np.inf), ("expit", 800.0, 1.0, 0.0), ("expit", -800.0, 0.0, 0.0),
    ("log_ndtr", -40.0, sc.log_ndtr(-40.0), np.sqrt(2.0 / np.pi) / sc.erfcx(40.0 / np.sqrt(2.0))),
    ("log_expit", -800.0, -800.0, 1.0),
    ("i1", 0.0, 0.0, 0.5), ("i1e", 0.0, 0.0, 0.5), ("erfcx", 1e200, sc.erfcx(1e200), 0.0),
])
def test_special_points(name, x, value, grad):
    t = tape.tensor(x, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        y = _fn(name)(t)
        (g,) = tape.autograd.grad(y, [t])
    assert_within(y.item(), value, _documented_bound(name, value, x))  # (SciPy's or exact)
    np.testing.assert_allclose(float(g), grad, rtol=1e-8)


def test_nan_propagates():
    x = tape.tensor([np.nan, 1.5], requires_grad=True)
    for name in sorted(UNARY):
        arg = x / 4.0 if name in ("erfinv", "ndtri", "logit") else x
        y = _fn(name)(arg)
        (g,) = tape.autograd.grad(np.sum(y), [x])
        assert np.isnan(y.numpy()[0]) and np.isnan(g[0]), name
        assert np.isfinite(g[1]), name


def test_registration_is_lazy_and_scipy_stays_optional():
    """import tape does not import SciPy; a scipy.special ufunc works on its first call, with
    SciPy imported after tape; one without a row names itself in the error."""
    code = (
        "import sys, numpy as np, tape\n"
        "assert 'scipy' not in sys.modules\n"
        "x = tape.tensor([0.5, 2.0], requires_grad=True)\n"
        "import scipy.special as sc\n"
        "y = sc.gammaln(x) + sc.xlogy(x, x)\n"
        "(g,) = tape.autograd.grad(y.sum(), [x])\n"
        "assert np.allclose(g, sc.digamma([0.5, 2.0]) + np.log([0.5, 2.0]) + 1)\n"
        "try:\n"
        "    sc.jv(1.0, x)\n"
        "except TypeError as e:\n"
        "    assert 'scipy.special.jv is not supported' in str(e), e\n"
        "else:\n"
        "    raise AssertionError('jv passed')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_out_argument_and_plain_arrays():
    x = np.array([0.5, 1.5])
    out = tape.tensor(np.zeros(2))
    sc.expit(tape.tensor(x), out=out)
    assert_within(out.numpy(), sc.expit(x), _documented_bound("expit", sc.expit(x)))
    assert type(sc.expit(x)) is np.ndarray  # SciPy on arrays is untouched


def _likelihood(x, b):
    """Special rows on broadcast, strided and 0-d operands, between ordinary rows."""
    t = x[::2].T  # strided (3, 2) from (4, 3)
    s = sc.gammaln(2.0 + t * t) + sc.xlogy(t * t + 0.5, b) + sc.expit(x[0, 0])
    return np.sum(np.exp(-s)) + np.sum(sc.log_ndtr(x)) + sc.betaln(2.0 + x[1, 1] ** 2, 1.5)


def test_compiled_replay_modes_and_save_load(tmp_path):
    """value, value_and_grad, jvp and hvp of a compiled tape with special rows (escapes of the
    main sweeps) agree with eager; a saved tape loads and replays the same bits."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(4, 3))
    b = np.array([[0.7], [1.3], [2.1]])  # broadcast against (3, 2)
    f = lambda x: _likelihood(x, b)  # noqa: E731
    cf = tape.compile(f, x)
    for a in (x, 0.8 * x):
        value, g = cf.value_and_grad(a)
        value0, g0 = tape.value_and_grad(f)(a)
        assert value == value0 and np.array_equal(g, g0)
        assert cf(a) == value0
    v = rng.normal(size=x.shape)
    _, jv = cf.jvp((x,), (v,))
    # (the tangent sweep and NumPy's sum of the gradient's products sum v's terms in other
    # orders, of entries each a few roundings from the other sweep's)
    g = tape.grad(f)(x)
    assert_within(jv, np.sum(g * v), sum_bound(g * v, ops=64))
    eps = 1e-6
    fd = (tape.grad(f)(x + eps * v) - tape.grad(f)(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(cf.hvp((x,), v), fd,
                               rtol=1e-5, atol=1e-7)
    path = tmp_path / "special.npz"
    cf.save(path)
    loaded = tape.load(path)
    value, g = loaded.value_and_grad(0.8 * x)
    value0, g0 = cf.value_and_grad(0.8 * x)
    assert value == value0 and np.array_equal(g, g0)
