"""tape.stats: scipy.stats' log-densities on tensors, against scipy.stats' values and finite
differences in every argument, eager, replayed (tape.compile) and in forward mode."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

import tape
import tape.stats as ts

from _fd import check_vjp, fd_vjp
from _derivative_checks import check_jvp
from tests._tolerance import U as ROUNDING, assert_within, rounding_bound

st = pytest.importorskip("scipy.stats")

rng0 = np.random.default_rng(7)
X = np.array([0.3, 1.2, 2.5])
# (distribution, method, arguments: x first, then the parameters in SciPy's order)
CASES = [
    ("norm", "logpdf", [X - 1.0, 0.4, 1.3]), ("norm", "logcdf", [X - 1.0, 0.4, 1.3]),
    ("norm", "cdf", [X - 1.0, 0.4, 1.3]), ("norm", "logcdf", [np.array([-30.0, -8.0]), 0.2, 0.9]),
    ("t", "logpdf", [X - 1.0, 3.5, 0.2, 1.4]),
    ("gamma", "logpdf", [X, 2.3, 0.1, 1.7]),
    ("beta", "logpdf", [np.array([0.1, 0.45, 0.8]), 2.2, 3.1]),
    ("expon", "logpdf", [X, 0.1, 1.5]), ("expon", "logcdf", [X, 0.1, 1.5]),
    ("expon", "cdf", [X, 0.1, 1.5]),
    ("cauchy", "logpdf", [X, 0.5, 2.0]), ("cauchy", "logcdf", [X, 0.5, 2.0]),
    ("cauchy", "cdf", [X, 0.5, 2.0]),
    ("lognorm", "logpdf", [X, 0.7, 0.05, 1.3]), ("lognorm", "logcdf", [X, 0.7, 0.05, 1.3]),
    ("lognorm", "cdf", [X, 0.7, 0.05, 1.3]),
]
DISCRETE = [  # (distribution, k, continuous parameters, integer parameters before them)
    ("poisson", np.array([0.0, 3.0, 7.0]), [2.7], []),
    ("binom", np.array([0.0, 3.0, 7.0]), [0.35], [9.0]),
    ("nbinom", np.array([0.0, 3.0, 7.0]), [2.5, 0.4], []),
]


def _ids(cases):
    return [f"{c[0]}.{c[1]}" for c in cases]


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_continuous_value_and_gradient_in_every_argument(case):
    name, method, args = case
    ours, theirs = getattr(getattr(ts, name), method), getattr(getattr(st, name), method)
    got = ours(*[tape.tensor(np.asarray(a, float)) for a in args]).numpy()
    want = theirs(*args)
    assert_within(got, want, rounding_bound(theirs, args, want))  # (SciPy's conditioning)
    # (finite differences of ours: SciPy's value is compared above)
    check_vjp(lambda *a: ours(*a), args, rng=np.random.default_rng(1), rtol=1e-6, atol=1e-8,
              f_np=lambda *a: np.asarray(ours(*a)))
    check_jvp(lambda *a: ours(*a), args, np.random.default_rng(2), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("case", DISCRETE, ids=[c[0] for c in DISCRETE])
def test_discrete_logpmf(case):
    name, k, params, ints = case
    ours, theirs = getattr(ts, name).logpmf, getattr(st, name).logpmf
    want = theirs(k, *ints, *params)
    assert_within(ours(k, *ints, *params).numpy(), want,  # (k and n are exact data)
                  rounding_bound(lambda *p: theirs(k, *ints, *p), params, want))
    check_vjp(lambda *p: ours(k, *ints, *p), params, rng=np.random.default_rng(3), rtol=1e-6,
              f_np=lambda *p: theirs(k, *ints, *p))
    check_jvp(lambda *p: ours(k, *ints, *p), params, np.random.default_rng(4), rtol=1e-6)


def test_outside_the_support_and_invalid_parameters_are_scipys():
    for ours, theirs, args in [
        (ts.gamma.logpdf, st.gamma.logpdf, ([-1.0, 0.5], 2.0)),
        (ts.beta.logpdf, st.beta.logpdf, ([-0.5, 0.5, 1.5], 2.0, 3.0)),
        (ts.expon.logpdf, st.expon.logpdf, ([-1.0, 1.0],)),
        (ts.lognorm.logpdf, st.lognorm.logpdf, ([-1.0, 1.0], 0.5)),
        (ts.norm.logpdf, st.norm.logpdf, ([0.5, 1.0], 0.0, -1.0)),
        (ts.poisson.logpmf, st.poisson.logpmf, ([-1.0, 1.5, 2.0], 3.0)),
        (ts.binom.logpmf, st.binom.logpmf, ([-1.0, 2.0, 11.0], 10, 0.3)),
    ]:
        got = ours(*[np.asarray(a, float) for a in args])
        want = theirs(*args)
        assert_within(np.asarray(got), want, rounding_bound(theirs, args, want))


def test_gradient_is_finite_inside_the_support_next_to_points_outside():
    """Points outside the support get -inf without NaN gradients leaking to the others."""
    a = tape.tensor(2.0, requires_grad=True)
    y = ts.gamma.logpdf(np.array([-1.0, 0.5, 2.0]), a)
    (g,) = tape.autograd.grad(np.sum(np.where(np.isfinite(y.numpy()), y, 0.0)), [a])
    assert np.isfinite(g)


def test_multivariate_normal():
    rng = np.random.default_rng(5)
    d = 3
    m = rng.normal(size=(d, d))
    cov = m @ m.T + d * np.eye(d)
    mean = rng.normal(size=d)
    x = rng.normal(size=(4, d))
    got = ts.multivariate_normal.logpdf(tape.tensor(x), tape.tensor(mean), tape.tensor(cov))
    want = st.multivariate_normal.logpdf(x, mean, cov)  # (LAPACK's factorization: per CPU)
    assert_within(got.numpy(), want,
                  rounding_bound(st.multivariate_normal.logpdf, [x, mean, cov], want))
    check_vjp(lambda a, b, c: ts.multivariate_normal.logpdf(a, b, 0.5 * (c + c.T)),
              [x, mean, cov], rng=rng, rtol=1e-6,
              f_np=lambda a, b, c: st.multivariate_normal.logpdf(a, b, 0.5 * (c + c.T)))
    one = ts.multivariate_normal.logpdf(tape.tensor(x[0]), mean, 2.0)
    want = st.multivariate_normal.logpdf(x[0], mean, 2.0)
    assert abs(one.item() - want) <= rounding_bound(st.multivariate_normal.logpdf,
                                                    [x[0], mean, 2.0], want)


def test_a_likelihood_replays_bit_for_bit():
    """A Poisson regression with a gamma prior and a probit term, compiled and eager."""
    rng = np.random.default_rng(6)
    X_ = rng.normal(size=(50, 3))
    counts = rng.poisson(2.0, size=50).astype(float)
    hits = (rng.uniform(size=50) < 0.5).astype(float)

    def loss(w):
        eta = X_[:, 0] * w[0] + X_[:, 1] * w[1] + X_[:, 2] * w[2]  # (no matmul: BLAS in eager)
        ll = np.sum(ts.poisson.logpmf(counts, np.exp(eta)))
        ll = ll + np.sum(ts.gamma.logpdf(np.exp(w), 2.0, scale=0.5))
        z = eta
        ll = ll + np.sum(hits * ts.norm.logcdf(z) + (1.0 - hits) * ts.norm.logcdf(-z))
        return -ll

    w = rng.normal(size=3) * 0.3
    cf = tape.compile(loss, w)
    for a in (w, 1.1 * w):
        v, g = cf.value_and_grad(a)
        v0, g0 = tape.value_and_grad(loss)(a)
        assert v == v0 and np.array_equal(g, g0)


def test_scipy_stats_on_a_tensor_points_to_tape_stats():
    x = tape.tensor([0.1, 0.5], requires_grad=True)
    with pytest.raises(TypeError, match="tape.stats"):
        st.norm.logpdf(x, 0.0, 1.0)


# ---- cumulative functions: cdf, logcdf, sf, logsf ----------------------------------------------

KINDS = ("cdf", "logcdf", "sf", "logsf")
U = np.array([0.04, 0.3, 0.55, 0.93])
CUMULATIVE = [  # (distribution, x, parameters in SciPy's order: every one differentiated)
    ("t", np.array([-40.0, -2.5, -0.3, 0.4, 1.7, 30.0]), [3.5]),
    ("t", np.array([-3.0, 0.2, 2.2]), [0.8, 0.3, 1.4]),
    ("t", np.array([-60.0, -0.7, 0.5]), [250.0]),
    ("gamma", np.array([0.01, 0.5, 2.0, 9.0, 40.0]), [2.3]),
    ("gamma", np.array([0.2, 1.5, 6.0]), [0.4, 0.1, 1.7]),
    ("gamma", np.array([30.0, 48.0, 80.0]), [50.0, 0.0, 1.0]),
    ("beta", U, [2.2, 3.1]),
    ("beta", np.array([0.002, 0.5, 0.998]), [0.4, 0.7]),
    ("beta", np.array([0.25, 0.3, 0.7]), [40.0, 60.0, 0.05, 0.9]),
    ("norm", np.array([-30.0, -1.0, 0.4, 9.0]), [0.2, 1.3]),
    ("expon", np.array([0.3, 1.2, 60.0]), [0.1, 1.5]),
    ("cauchy", np.array([-1e4, 0.3, 2.0, 1e4]), [0.5, 2.0]),
    ("lognorm", np.array([0.3, 1.2, 40.0]), [0.7, 0.05, 1.3]),
]
DISCRETE_CUMULATIVE = [  # (distribution, k, integer parameters, continuous parameters)
    ("poisson", np.array([0.0, 2.0, 3.5, 7.0, 30.0]), [], [2.7]),
    ("poisson", np.array([80.0, 100.0, 130.0]), [], [100.0]),
    ("binom", np.array([0.0, 3.0, 7.0, 8.0]), [9.0], [0.35]),
    ("binom", np.array([10.0, 50.0, 90.0]), [200.0], [0.3]),
    ("nbinom", np.array([0.0, 3.0, 7.0, 25.0]), [], [2.5, 0.4]),
    ("nbinom", np.array([1.0, 40.0]), [], [0.3, 0.05]),
]


def _scipy(name, kind, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return getattr(getattr(st, name), kind)(*args)


def _atol(kind):
    """A log near 0 (a probability near 1) is computed from the small complement, where
    SciPy's often rounds to 0: an absolute tolerance there."""
    return 16 * ROUNDING if kind.startswith("log") else 1e-300  # (a few roundings of 1)


def _plain(y):
    return np.asarray(y.numpy() if isinstance(y, tape.Tensor) else y)


def _cid(cases):
    return [f"{c[0]}{i}" for i, c in enumerate(cases)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", CUMULATIVE, ids=_cid(CUMULATIVE))
def test_cumulative_value_and_gradient_in_every_argument(case, kind):
    name, x, params = case
    ours = getattr(getattr(ts, name), kind)
    got = _plain(ours(tape.tensor(x), *[tape.tensor(p) for p in params]))
    np.testing.assert_allclose(got, _scipy(name, kind, x, *params), rtol=1e-11, atol=_atol(kind))
    args = [x] + [np.asarray(p, float) for p in params]
    check_vjp(lambda *a: ours(*a), args, rng=np.random.default_rng(1), rtol=1e-5, atol=1e-8,
              f_np=lambda *a: _plain(ours(*a)))
    check_jvp(lambda *a: ours(*a), args, np.random.default_rng(2), rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", DISCRETE_CUMULATIVE, ids=_cid(DISCRETE_CUMULATIVE))
def test_discrete_cumulative(case, kind):
    name, k, ints, params = case
    ours = getattr(getattr(ts, name), kind)
    np.testing.assert_allclose(_plain(ours(k, *ints, *[tape.tensor(p) for p in params])),
                               _scipy(name, kind, k, *ints, *params), rtol=1e-11,
                               atol=_atol(kind))
    check_vjp(lambda *p: ours(k, *ints, *p), params, rng=np.random.default_rng(3), rtol=1e-5,
              atol=1e-8, f_np=lambda *p: _plain(ours(k, *ints, *p)))
    check_jvp(lambda *p: ours(k, *ints, *p), params, np.random.default_rng(4), rtol=1e-5,
              atol=1e-8)


def test_log_cumulative_functions_in_the_far_tails():
    """logcdf / logsf where the cdf or sf underflows: finite, from the log kernels (SciPy
    agrees where it computes them in logs)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30

    def check(got, exact, *args):
        """got within rounding_bound of the exact function (mpmath's, of float arguments):
        the conditioning in every float argument, times a few roundings."""
        f = lambda *a: float(exact(*[mp.mpf(float(v)) for v in a]))
        want = f(*args)
        assert abs(got - want) <= rounding_bound(f, list(args), want), (got, want)

    check(ts.gamma.logcdf(np.array([1e-3]), 200.0).numpy()[0],
          lambda x, a: mp.log(mp.gammainc(a, 0, x, regularized=True)), 1e-3, 200.0)
    check(ts.poisson.logcdf(np.array([3.0]), 900.0).numpy()[0],
          lambda mu: mp.log(mp.gammainc(4, mu, mp.inf, regularized=True)), 900.0)
    check(ts.t.logcdf(np.array([-1e80]), 4.0).numpy()[0],  # (SciPy's is -inf)
          lambda x, df: mp.log(mp.betainc(df / 2, 0.5, 0, df / (df + x * x), regularized=True)
                               / 2), -1e80, 4.0)
    check(ts.binom.logsf(np.array([190.0]), 200, 0.1).numpy()[0],
          lambda p: mp.log(mp.betainc(191, 10, 0, p, regularized=True)), 0.1)


@pytest.mark.parametrize("kind", KINDS)
def test_cumulative_outside_the_support_and_invalid_parameters_are_scipys(kind):
    xs = np.array([-np.inf, -1.0, 0.0, 0.5, 1.0, 1.5, np.inf, np.nan])
    for name, args in [("gamma", (2.0,)), ("gamma", (-1.0,)), ("gamma", (2.0, 0.0, -1.0)),
                       ("beta", (2.0, 3.0)), ("beta", (0.0, 3.0)), ("t", (3.0,)),
                       ("t", (0.0,)), ("t", (np.inf,)), ("norm", ()), ("expon", ()),
                       ("cauchy", ()), ("lognorm", (0.5,))]:
        got = _plain(getattr(getattr(ts, name), kind)(xs, *args))
        want = _scipy(name, kind, xs, *args)
        bound = rounding_bound(lambda *a, name=name: _scipy(name, kind, *a), [xs, *args], want)
        assert_within(got, want, bound + _atol(kind), err_msg=f"{name}{args}")
    ks = np.array([-2.0, -0.5, 0.0, 2.5, 9.0, 10.0, 12.0])
    for name, args in [("poisson", (3.0,)), ("poisson", (0.0,)), ("poisson", (-1.0,)),
                       ("binom", (10, 0.3)), ("binom", (10, 0.0)), ("binom", (10, 1.0)),
                       ("nbinom", (2.5, 0.4)), ("nbinom", (2.5, 1.0)),
                       ("nbinom", (0.0, 0.4))]:
        got = _plain(getattr(getattr(ts, name), kind)(ks, *args))
        want = _scipy(name, kind, ks, *args)
        bound = rounding_bound(lambda *a, name=name: _scipy(name, kind, ks, *a),  # (k: data)
                               args, want)
        assert_within(got, want, bound + _atol(kind), err_msg=f"{name}{args}")
    # an invalid p is nan at every k (SciPy's is 1 at k >= n, before it checks p)
    assert np.all(np.isnan(_plain(getattr(ts.binom, kind)(ks, 10, 1.5))))


def test_cumulative_gradients_stay_finite_next_to_points_off_the_support():
    a = tape.tensor(2.0, requires_grad=True)
    y = ts.gamma.logsf(np.array([-1.0, 0.5, 2.0]), a) + ts.beta.cdf(np.array([-1.0, 0.5, 2.0]),
                                                                     a, 3.0)
    (g,) = tape.autograd.grad(np.sum(y), [a])
    assert np.isfinite(g)
    p = tape.tensor(0.3, requires_grad=True)
    (g,) = tape.autograd.grad(np.sum(ts.binom.logcdf(np.array([-1.0, 3.0, 10.0]), 10, p)), [p])
    assert np.isfinite(g)


def test_counts_are_integer_data():
    k = tape.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match="k is integer data"):
        ts.poisson.cdf(k, 2.0)
    with pytest.raises(TypeError, match="n is integer data"):
        ts.binom.sf(np.array([1.0]), tape.tensor(5.0, requires_grad=True), 0.3)


def test_cumulative_replay_bit_for_bit():
    """A censored-data likelihood (logsf for the censored points) compiled and eager."""
    rng = np.random.default_rng(8)
    t_obs = rng.gamma(2.0, 1.5, size=40)
    censored = rng.uniform(size=40) < 0.3
    counts = rng.poisson(3.0, size=40).astype(float)

    def loss(w):
        shape, scale = np.exp(w[0]), np.exp(w[1])
        ll = np.sum(np.where(censored, ts.gamma.logsf(t_obs, shape, scale=scale),
                             ts.gamma.logpdf(t_obs, shape, scale=scale)))
        ll = ll + np.sum(ts.poisson.logcdf(counts, np.exp(w[2])))
        ll = ll + np.sum(ts.t.logcdf(t_obs - 2.0, np.exp(w[3])))
        ll = ll + np.sum(ts.nbinom.logsf(counts, np.exp(w[0]), 1.0 / (1.0 + np.exp(-w[1]))))
        return -ll

    w = np.array([0.5, 0.3, 1.0, 1.2])
    cf = tape.compile(loss, w)
    for a in (w, 0.9 * w):
        v, g = cf.value_and_grad(a)
        v0, g0 = tape.value_and_grad(loss)(a)
        assert v == v0 and np.array_equal(g, g0)
    (want,) = fd_vjp(lambda a: loss(a), [w], 1.0, [0])
    np.testing.assert_allclose(cf.value_and_grad(w)[1], want, rtol=1e-6)


@settings(max_examples=40, deadline=None)
@given(shape=hst.floats(0.05, 200.0), x=hst.floats(1e-6, 400.0),
           df=hst.floats(0.2, 500.0), p=hst.floats(0.01, 0.99), k=hst.integers(0, 60))
def test_cumulative_hypothesis(shape, x, df, p, k):
    """Values against SciPy and the shape / rate gradients against central differences."""
    checks = [
        (ts.gamma, st.gamma, lambda f, s: f.cdf(x, s), shape),
        (ts.gamma, st.gamma, lambda f, s: f.logsf(x, s), shape),
        (ts.beta, st.beta, lambda f, s: f.cdf(p, s, 2.5), shape),
        (ts.t, st.t, lambda f, s: f.logcdf(x - 20.0, s), df),
        (ts.poisson, st.poisson, lambda f, s: f.logcdf(k, s), x),
        (ts.nbinom, st.nbinom, lambda f, s: f.sf(k, s, p), shape),
        (ts.binom, st.binom, lambda f, s: f.logcdf(k, 60, s), p),
    ]
    for ours, theirs, call, s in checks:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = float(call(theirs, s))
        t_s = tape.tensor(s, requires_grad=True)
        y = call(ours, t_s)
        if not np.isfinite(want) or abs(want) < 1e-250:
            continue
        np.testing.assert_allclose(float(y.item()), want, rtol=1e-9, atol=1e-15)
        (g,) = tape.autograd.grad(y, [t_s])
        h = 1e-6 * max(s, 1e-3)
        fd = (float(_plain(call(ours, s + h))) - float(_plain(call(ours, s - h)))) / (2 * h)
        np.testing.assert_allclose(float(g), fd, rtol=2e-4, atol=1e-7 * max(1.0, abs(want)))


@pytest.mark.parametrize("kind", ["cdf", "logcdf", "sf", "logsf"])
def test_t_cumulative_at_its_centre(kind):
    """At z = 0 (and where z^2 underflows) the tails' own derivatives are inf * 0; the values and
    derivatives there are the hand-derived ones: d/dx = +-pdf(0) (/ F(0) = 1/2 for the log
    kinds), 0 in df at z = 0, and d^2/dx^2 = 0 for cdf / sf, -(pdf(0) / F(0))^2 for the log
    kinds; eager and replay."""
    import math

    upper, log = kind.endswith("sf"), kind.startswith("log")
    for df in (0.7, 1.0, 7.0, 300.0):
        p0 = math.exp(math.lgamma(0.5 * (df + 1.0)) - math.lgamma(0.5 * df)) \
            / math.sqrt(df * math.pi)
        slope = (-1.0 if upper else 1.0) * p0 * (2.0 if log else 1.0)
        # p0 from libm's lgamma: each a few roundings of |lgamma|, which exp makes relative
        rel = 16 * ROUNDING * (abs(math.lgamma(0.5 * (df + 1.0))) + abs(math.lgamma(0.5 * df)) + 4)
        f = lambda x, d: np.sum(getattr(ts.t, kind)(x, d))
        x = np.array([0.0, 1e-300, -1e-200])
        v, (gx, gd) = tape.value_and_grad(f, argnums=(0, 1))(x, df)
        assert float(v) == pytest.approx(3 * (-math.log(2.0) if log else 0.5), rel=1e-15)
        assert_within(gx, np.full(3, slope), rel * abs(slope))
        assert abs(float(gd)) < 1e-190  # (p0'(df) z: 0 at z = 0, ~1e-201 at z = -1e-200)
        cf = tape.compile(f, x, df, argnums=(0, 1))
        v2, (gx2, gd2) = cf.value_and_grad(x, df)
        np.testing.assert_array_equal(gx2, gx)
        assert float(v2) == float(v) and float(gd2) == float(gd)
        h = tape.grad(tape.grad(lambda y: getattr(ts.t, kind)(y, df)))(0.0)
        assert abs(float(h) - (-slope * slope if log else 0.0)) <= 2 * rel * slope * slope
        step = 1e-6  # just off the centre the tails take over: they agree with the series
        np.testing.assert_allclose(tape.grad(lambda y: getattr(ts.t, kind)(y, df))(step),
                                   slope, rtol=1e-6)


def test_replay_follows_the_masks_when_values_cross_them():
    """The support masks and t's branch choices are comparisons of tensors, so tape.compile
    guards them: a replay whose values fall on the other side records again."""
    x = np.array([-1.0, 0.3, 2.0])

    def loss(w):
        loc, df, a = w[0], np.exp(w[1]), np.exp(w[2])
        return (np.sum(ts.t.logcdf(x, df, loc)) + np.sum(ts.gamma.logsf(x, a, loc))
                + np.sum(ts.beta.cdf(x, a, df, loc, 3.0)) + np.sum(ts.gamma.logpdf(x, a, loc)))

    w = np.array([-2.0, 0.4, 0.2])
    cf = tape.compile(loss, w)
    for q in (w, np.array([0.5, 0.3, 0.1]), np.array([1.5, 5.0, 0.3]), w):
        v, g = cf.value_and_grad(q)
        v0, g0 = tape.value_and_grad(loss)(q)
        assert v == v0 and np.array_equal(g, g0)


def test_second_order_in_x_like_parameters_and_the_shape_error():
    """poisson's mu and binom's p are the x of the incomplete functions: their hessians work;
    a second derivative in a shape (t's df) raises the incomplete functions' error."""
    k = np.array([0.0, 2.0, 5.0])
    for f, p0 in ((lambda m: np.sum(ts.poisson.logcdf(k, m)), 2.7),
                  (lambda p: np.sum(ts.binom.logsf(k, 9, p)), 0.35),
                  (lambda s: np.sum(ts.gamma.logcdf(k + 0.5, 2.5, 0.1, s)), 1.3)):
        h = float(np.asarray(tape.hessian(f)(p0)))
        d = 1e-5
        fd = (float(tape.grad(f)(p0 + d)) - float(tape.grad(f)(p0 - d))) / (2 * d)
        np.testing.assert_allclose(h, fd, rtol=1e-5)
    with pytest.raises(NotImplementedError, match="betainc"):
        tape.hessian(lambda df: np.sum(ts.t.cdf(k - 1.0, df)))(3.0)


def test_multivariate_normal_cdf_is_refused_with_the_reason():
    with pytest.raises(NotImplementedError, match="quasi-Monte Carlo.*norm.cdf"):
        ts.multivariate_normal.cdf(np.zeros(2), np.zeros(2), np.eye(2))
    with pytest.raises(NotImplementedError, match="quasi-Monte Carlo"):
        ts.multivariate_normal.logcdf(np.zeros(2), np.zeros(2), np.eye(2))
