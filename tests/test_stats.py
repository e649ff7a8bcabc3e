"""tape.stats: scipy.stats' log-densities on tensors, against scipy.stats' values and finite
differences in every argument, eager, replayed (tape.compile) and in forward mode."""
from __future__ import annotations

import numpy as np
import pytest

import tape
import tape.stats as ts

from _fd import check_vjp
from test_forward import check_jvp

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
    np.testing.assert_allclose(got, theirs(*args), rtol=1e-12)
    # (finite differences of ours: SciPy's value is compared above, to 1e-12)
    check_vjp(lambda *a: ours(*a), args, rng=np.random.default_rng(1), rtol=1e-6, atol=1e-8,
              f_np=lambda *a: np.asarray(ours(*a)))
    check_jvp(lambda *a: ours(*a), args, np.random.default_rng(2), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("case", DISCRETE, ids=[c[0] for c in DISCRETE])
def test_discrete_logpmf(case):
    name, k, params, ints = case
    ours, theirs = getattr(ts, name).logpmf, getattr(st, name).logpmf
    np.testing.assert_allclose(ours(k, *ints, *params).numpy(), theirs(k, *ints, *params),
                               rtol=1e-12)
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
        np.testing.assert_allclose(np.asarray(got), theirs(*args), rtol=1e-12)


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
    np.testing.assert_allclose(got.numpy(), st.multivariate_normal.logpdf(x, mean, cov),
                               rtol=1e-12)
    check_vjp(lambda a, b, c: ts.multivariate_normal.logpdf(a, b, 0.5 * (c + c.T)),
              [x, mean, cov], rng=rng, rtol=1e-6,
              f_np=lambda a, b, c: st.multivariate_normal.logpdf(a, b, 0.5 * (c + c.T)))
    one = ts.multivariate_normal.logpdf(tape.tensor(x[0]), mean, 2.0)
    np.testing.assert_allclose(one.item(), st.multivariate_normal.logpdf(x[0], mean, 2.0),
                               rtol=1e-12)


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
