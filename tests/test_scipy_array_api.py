"""SciPy's array-API functions on tensors, run with SCIPY_ARRAY_API=1.

SciPy reads SCIPY_ARRAY_API once, when it is first imported, so this module runs in its own
process: tests/test_array_api.py starts it with the variable set. Collected in a process where
SciPy runs without it (the rest of the suite), it skips.
"""
import os
import warnings

import numpy as np
import pytest

import tape
import tape.array_api as xp
from tests._fd import fd_vjp
from tests._tolerance import assert_within, rounding_bound, sum_bound

scipy = pytest.importorskip("scipy")
from scipy._lib import _array_api_override  # noqa: E402

if not _array_api_override.SCIPY_ARRAY_API:
    pytest.skip("needs SCIPY_ARRAY_API=1 before SciPy is imported (tests/test_array_api.py runs "
                "this module in a subprocess that sets it)", allow_module_level=True)

from scipy import integrate, optimize, signal, special, stats  # noqa: E402

rng = np.random.default_rng(3)


def _values(r):
    return np.array(r.numpy()) if isinstance(r, tape.Tensor) else np.asarray(r)


def _check(f, args, wrt=None, rtol=1e-6, hessian=True):
    """f on tensors: SciPy's value on NumPy arrays, a gradient equal to finite differences of
    SciPy on NumPy arrays, the same value and gradient from a compiled replay, a forward-mode
    derivative equal to the gradient's projection, and (for small inputs) the Hessian equal to
    finite differences of the gradient."""
    wrt = tuple(range(len(args))) if wrt is None else wrt
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.asarray(f(*args), dtype=np.float64)
    got = f(*[tape.tensor(a) for a in args])
    assert isinstance(got, tape.Tensor)
    assert got.shape == want.shape
    bound = rounding_bound(f, args, want)
    np.testing.assert_array_less(np.abs(_values(got) - want), bound)

    ct = rng.standard_normal(want.shape)

    def loss(*a):
        return np.sum(f(*a) * ct)

    grads = tape.grad(loss, argnums=wrt)(*args)
    num = fd_vjp(lambda *a: f(*a), args, ct, wrt)
    for i, g, n in zip(wrt, grads, num):
        np.testing.assert_allclose(g, n, rtol=rtol, atol=1e-7 * max(1.0, np.abs(n).max()),
                                   err_msg=f"gradient of argument {i}")

    cf = tape.compile(loss, *args, argnums=wrt)
    value, cgrads = cf.value_and_grad(*args)
    assert abs(value - np.sum(want * ct)) <= 2 * np.sum(bound * np.abs(ct)), value
    for g, c in zip(grads, cgrads):
        np.testing.assert_array_equal(c, g)  # replay computes what eager computes

    tangents = tuple(rng.standard_normal(np.shape(a)) for a in args)
    full = tuple(tangents[i] if i in wrt else np.zeros(np.shape(a)) for i, a in enumerate(args))
    _, jv = tape.jvp(loss, tuple(args), full)
    np.testing.assert_allclose(jv, sum(np.sum(g * tangents[i]) for i, g in zip(wrt, grads)),
                               rtol=1e-10, atol=1e-12)

    if hessian and len(wrt) == 1 and np.size(args[wrt[0]]) <= 8:
        i = wrt[0]
        H = np.asarray(tape.hessian(loss, argnums=i)(*args)).reshape(np.size(args[i]), -1)
        eps = 1e-5
        cols = []
        for e in np.eye(np.size(args[i])):
            up = list(args)
            down = list(args)
            up[i] = args[i] + eps * e.reshape(np.shape(args[i]))
            down[i] = args[i] - eps * e.reshape(np.shape(args[i]))
            gu = tape.grad(loss, argnums=i)(*up)
            gd = tape.grad(loss, argnums=i)(*down)
            cols.append(((gu - gd) / (2 * eps)).ravel())
        np.testing.assert_allclose(H, np.array(cols), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# logsumexp, softmax, log_softmax

LSE = [((5,), {}), ((2, 3), {"axis": 1}), ((2, 3), {"axis": 0, "keepdims": True}),
       ((2, 3, 2), {"axis": (0, 2)}), ((2, 3), {}), ((1,), {"axis": 0}), ((), {})]


@pytest.mark.parametrize("shape, kw", LSE)
def test_logsumexp(shape, kw):
    a = rng.standard_normal(shape) * 3.0
    _check(lambda x: special.logsumexp(x, **kw), [a])


@pytest.mark.parametrize("shape, kw", LSE[:4])
def test_logsumexp_weights(shape, kw):
    a = rng.standard_normal(shape)
    b = rng.uniform(0.2, 2.0, shape)
    # every array SciPy is given must come from one namespace: plain data as constant tensors
    f = lambda x, w: special.logsumexp(xp.asarray(x), b=xp.asarray(w), **kw)  # noqa: E731
    _check(f, [a, b], hessian=False)
    _check(f, [a, b], wrt=(1,))


def test_logsumexp_weights_that_are_zero_or_broadcast():
    a = rng.standard_normal((2, 4))
    b = np.array([1.0, 0.0, 2.0, 0.5])  # a zero weight drops its term, a broadcast row
    _check(lambda x, w: special.logsumexp(xp.asarray(x), axis=-1, b=xp.asarray(w)), [a, b],
           wrt=(0,))


def test_mixing_numpy_arrays_and_tensors_is_scipys_error():
    with pytest.raises(TypeError, match="Multiple namespaces"):
        special.logsumexp(tape.tensor([1.0, 2.0]), b=np.array([1.0, 2.0]))


def test_logsumexp_of_minus_infinity_and_sign():
    a = np.array([0.3, -np.inf, 1.2])
    x = tape.tensor(a, requires_grad=True)
    y = special.logsumexp(x)
    y.backward()
    want = special.logsumexp(a)
    assert abs(y.item() - want) <= rounding_bound(special.logsumexp, [a], want, ops=16)
    softmax = lambda a: np.exp(a - special.logsumexp(a))  # noqa: E731
    assert_within(x.grad, softmax(a), rounding_bound(softmax, [a], softmax(a), ops=16))
    b = np.array([1.0, 1.0, -2.0])
    r, sign = special.logsumexp(tape.tensor(a), b=tape.tensor(b), return_sign=True)
    r0, s0 = special.logsumexp(a, b=b, return_sign=True)
    assert sign.item() == s0
    assert abs(r.item() - r0) <= rounding_bound(lambda a, b: special.logsumexp(a, b=b), [a, b],
                                                r0, ops=16)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, axis", [((5,), None), ((2, 3), 1), ((2, 3), 0),
                                         ((2, 2, 2), (0, 2))])
def test_softmax_and_log_softmax(fn, shape, axis):
    a = rng.standard_normal(shape) * 2.0
    _check(lambda x: getattr(special, fn)(x, axis=axis), [a])


def test_softmax_with_dual_numbers():
    import tape.forward_ad as fwAD

    a = np.array([[0.3, -1.0, 2.0], [1.0, 0.5, -0.2]])
    v = np.array([[1.0, 0.0, -1.0], [0.5, 2.0, 1.0]])
    with fwAD.dual_level():
        y = special.softmax(fwAD.make_dual(tape.tensor(a), tape.tensor(v)), axis=1)
        primal, tangent = fwAD.unpack_dual(y)
        primal, tangent = primal.detach().numpy(), tangent.detach().numpy()
    s = special.softmax(a, axis=1)
    assert_within(primal, s, rounding_bound(lambda a: special.softmax(a, axis=1), [a], s, 16))
    # d softmax = s * (v - sum(s * v)) along the axis: it cancels, and softmax is SciPy's
    dot = lambda a, v: special.softmax(a, axis=1) * (  # noqa: E731
        v - np.sum(special.softmax(a, axis=1) * v, axis=1, keepdims=True))
    assert_within(tangent, dot(a, v), rounding_bound(dot, [a, v], dot(a, v), ops=16))


def test_logsumexp_replays_with_new_arguments_and_guards_the_maximum():
    def f(x):
        return special.logsumexp(x, axis=1).sum()

    x0 = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]])
    cf = tape.compile(f, x0)
    for x in (x0 + 0.25, x0[:, ::-1].copy(), -x0):  # the second and third move the maximum
        v, g = cf.value_and_grad(x)
        v_e, g_e = tape.value_and_grad(f)(x)
        assert v == v_e and np.array_equal(g, g_e)


# ---------------------------------------------------------------------------------------------
# Other array-API functions of SciPy that run on tensors (found by trying; docs/array_api.md
# lists those that do not, and why)

x8 = rng.uniform(0.5, 2.0, 8)
OTHERS = {
    "stats.moment": lambda x: stats.moment(x, order=3),
    "stats.skew": stats.skew,
    "stats.kurtosis": stats.kurtosis,
    "stats.zscore": stats.zscore,
    "stats.gzscore": stats.gzscore,
    "stats.gmean": stats.gmean,
    "stats.hmean": stats.hmean,
    "stats.pmean": lambda x: stats.pmean(x, 2.5),
    "stats.sem": stats.sem,
    "stats.describe": lambda x: stats.describe(x).variance,
    "stats.circmean": stats.circmean,
    "stats.circvar": stats.circvar,
    "stats.kstat": lambda x: stats.kstat(x, 3),
    "stats.kstatvar": stats.kstatvar,
    "stats.lmoment": lambda x: stats.lmoment(x),
    "stats.trim_mean": lambda x: stats.trim_mean(x, 0.1),
    "stats.iqr": stats.iqr,
    "stats.median_abs_deviation": stats.median_abs_deviation,
    "stats.quantile": lambda x: stats.quantile(x, 0.3),
    "stats.differential_entropy": stats.differential_entropy,
    "integrate.trapezoid": lambda x: integrate.trapezoid(x ** 2, x=np.cumsum(x)),
    "integrate.cumulative_trapezoid": lambda x: integrate.cumulative_trapezoid(x, dx=0.1),
    "integrate.cumulative_simpson": lambda x: integrate.cumulative_simpson(x, dx=0.1),
    "integrate.romb": lambda x: integrate.romb(x[:5], dx=0.25),
    "optimize.rosen": optimize.rosen,
    "optimize.rosen_der": optimize.rosen_der,
}


@pytest.mark.parametrize("name", sorted(OTHERS))
def test_other_array_api_functions(name):
    _check(OTHERS[name], [x8.copy()], hessian=name in ("stats.skew", "integrate.trapezoid"))


# ---------------------------------------------------------------------------------------------
# The sweep over SciPy 1.17's array-API-capable functions (docs/array_api.md records every
# outcome): each function found working, on tensors that require grad. Rank statistics are
# piecewise constant in the data: their gradient is zero, and finite differences agree.

y8 = rng.uniform(0.5, 2.0, 8)
z8 = rng.uniform(0.5, 2.0, 8)
p8 = rng.uniform(0.2, 0.8, 8)
x16 = rng.uniform(0.5, 2.0, 16)


def _stack(*parts):
    return xp.concat([xp.reshape(xp.asarray(q), (-1,)) for q in parts])


def _stat(r):
    """A result object's statistic and p-value as one array."""
    return _stack(r.statistic, r.pvalue)


LIMITS = (0.7, 1.8)
SWEEP = {
    # masks (comparisons in SciPy's code, then array-api-extra's apply_where): issue 26
    "stats.tmean": (lambda x: stats.tmean(x, LIMITS), [x8]),
    "stats.tmean_one_sided": (lambda x: stats.tmean(x, (None, 1.8), (True, False)), [x8]),
    "stats.tmin": (lambda x: stats.tmin(x, 0.7), [x8]),
    "stats.tmax": (lambda x: stats.tmax(x, 1.8), [x8]),
    "stats.variation": (stats.variation, [x8]),
    "stats.gstd": (stats.gstd, [x8]),
    "stats.entropy": (stats.entropy, [p8]),
    "stats.entropy_relative": (stats.entropy, [p8, y8]),
    "stats.yeojohnson_llf": (stats.yeojohnson_llf, [np.array(0.5), x8]),
    "stats.zmap": (stats.zmap, [x8, y8]),
    "stats.sigmaclip": (lambda x: stats.sigmaclip(x).clipped, [x8]),
    "stats.skewtest": (lambda x: _stat(stats.skewtest(x)), [x8]),
    "stats.kurtosistest": (lambda x: _stat(stats.kurtosistest(x)), [x16]),
    "stats.mode": (lambda x: stats.mode(xp.concat([x, x[:2]])).mode, [x8]),
    "stats.circstd": (stats.circstd, [x8]),
    "stats.directional_stats": (lambda v: stats.directional_stats(v).mean_direction,
                                [np.stack([np.cos(x8), np.sin(x8), y8], axis=1)]),
    "stats.false_discovery_control": (stats.false_discovery_control, [p8]),
    "stats.bootstrap": (lambda x: stats.bootstrap((x,), lambda a, axis: xp.mean(a, axis=axis),
                                                  n_resamples=40, rng=1).standard_error, [x8]),
    "stats.monte_carlo_test": (lambda x: stats.monte_carlo_test(
        x, lambda size: np.random.default_rng(1).normal(size=size),
        lambda a, axis: xp.mean(a, axis=axis), n_resamples=40).statistic, [x8]),
    "stats.permutation_test": (lambda x, y: stats.permutation_test(
        (x, y), lambda a, b, axis: xp.mean(a, axis=axis) - xp.mean(b, axis=axis),
        n_resamples=40, rng=1).statistic, [x8, y8]),
    # rank statistics: piecewise constant, gradient zero
    "stats.rankdata": (stats.rankdata, [x8]),
    "stats.kruskal": (lambda x, y: _stat(stats.kruskal(x, y)), [x8, y8]),
    "stats.friedmanchisquare": (lambda x, y, z: _stat(stats.friedmanchisquare(x, y, z)),
                                [x8, y8, z8]),
    "stats.brunnermunzel": (lambda x, y: _stat(stats.brunnermunzel(x, y)), [x8, y8]),
    "stats.mannwhitneyu": (lambda x, y: _stat(stats.mannwhitneyu(x, y)), [x8, y8]),
    "stats.ansari": (lambda x, y: _stat(stats.ansari(x, y)), [x8, y8]),
    "stats.mood": (lambda x, y: _stat(stats.mood(x, y)), [x8, y8]),
    # odd lengths: with an even one the two middle values tie in |x - median| by construction,
    # a jump of the rank statistic exactly at the data
    "stats.fligner": (lambda x, y: _stat(stats.fligner(x, y)), [x8[:7], y8[:7]]),
    "stats.wilcoxon": (lambda x, y: _stat(stats.wilcoxon(x, y)), [x8, y8]),
    "stats.chatterjeexi": (lambda x, y: _stat(stats.chatterjeexi(x, y)), [x8, y8]),
    "stats.spearmanrho": (lambda x, y: _stat(stats.spearmanrho(x, y)), [x8, y8]),
    "stats.cramervonmises_2samp": (lambda x, y: _stat(stats.cramervonmises_2samp(x, y)),
                                   [x8, y8]),
    # integrate (with tensor limits)
    "integrate.tanhsinh": (lambda a, b: integrate.tanhsinh(lambda t: xp.exp(-t * t), a, b)
                           .integral, [np.array(0.2), np.array(1.1)]),
    "integrate.cubature": (lambda a, b: integrate.cubature(lambda t: xp.exp(-t * t), a, b)
                           .estimate, [np.array([0.2]), np.array([1.1])]),
    # signal: window and filter-design functions with float parameters
    "signal.gauss_spline": (lambda x: signal.gauss_spline(x, 3), [x8]),
    "signal.general_cosine": (lambda a: signal.windows.general_cosine(8, a),
                              [np.array([0.5, 0.3, 0.2])]),
    "signal.gaussian": (lambda s: signal.windows.gaussian(8, s), [np.array(2.5)]),
    "signal.general_gaussian": (lambda p, s: signal.windows.general_gaussian(8, p, s),
                                [np.array(1.5), np.array(2.5)]),
    "signal.exponential": (lambda t: signal.windows.exponential(8, tau=t), [np.array(2.5)]),
    "signal.firwin": (lambda c: signal.firwin(9, c), [np.array(0.3)]),
    "signal.normalize": (lambda b, a: _stack(*signal.normalize(b, a)),
                         [np.array([0.5, 0.2]), np.array([2.0, 0.3, 0.1])]),
    "signal.lp2lp": (lambda b, a: _stack(*signal.lp2lp(b, a, 2.0)),
                     [np.array([0.5, 0.2]), np.array([2.0, 0.3, 0.1])]),
    "signal.lp2hp": (lambda b, a: _stack(*signal.lp2hp(b, a, 2.0)),
                     [np.array([0.5, 0.2]), np.array([2.0, 0.3, 0.1])]),
    "signal.lp2bp": (lambda b, a: _stack(*signal.lp2bp(b, a, 2.0, 0.5)),
                     [np.array([0.5, 0.2]), np.array([2.0, 0.3, 0.1])]),
    "signal.lp2bs": (lambda b, a: _stack(*signal.lp2bs(b, a, 2.0, 0.5)),
                     [np.array([0.5, 0.2]), np.array([2.0, 0.3, 0.1])]),
    "signal.lp2lp_zpk": (lambda z, p: _stack(*signal.lp2lp_zpk(z, p, 1.0, 2.0)),
                         [np.array([0.3, -0.2]), np.array([0.5, 0.1])]),
    "signal.bilinear_zpk": (lambda z, p: _stack(*signal.bilinear_zpk(z, p, 1.0, 2.0)),
                            [np.array([0.3, -0.2]), np.array([0.5, 0.1])]),
    "signal.lp2hp_zpk": (lambda z, p: _stack(*signal.lp2hp_zpk(z, p, 1.0, 2.0)),
                         [np.array([0.3, -0.2]), np.array([0.5, 0.1])]),
    "signal.abcd_normalize": (lambda A, B, C: _stack(*signal.abcd_normalize(A, B, C)),
                              [np.eye(2) * 0.5 + 0.1, np.ones((2, 1)), np.ones((1, 2))]),
    "signal.lfiltic": (lambda b, a, y: signal.lfiltic(b, a, y),
                       [np.array([0.25, 0.5, 0.25]), np.array([1.3, -0.5]), np.array([0.3])]),
}
SWEEP.update({
    # SciPy's Python (non-ufunc) special functions, recorded by tape.array_api.special
    "special.polygamma_1": (lambda x: special.polygamma(1, x), [x8]),
    # an array of orders: a DiscreteArray next to a tensor, a NumPy array next to an array
    "special.polygamma_orders": (lambda x: special.polygamma(
        (xp.asarray if isinstance(x, tape.Tensor) else np.asarray)([0, 1, 2, 3]), x), [x8[:4]]),
    # 0, both sides of the Taylor branch's edge |pi x| = 0.1, and far from 0
    "special.sinc": (special.sinc, [np.array([-1.3, -0.2, 0.0, 0.4, 0.1 / np.pi - 1e-9,
                                              0.1 / np.pi + 1e-9, 2.5, 1e-7])]),
    "special.multigammaln": (lambda a: special.multigammaln(a, 3), [x8 + 1.0]),
})
SPECIAL = ["betaln", "entr", "erf", "erfc", "erfcx", "erfinv", "expit", "gamma", "gammaln",
           "huber", "i0", "i0e", "i1", "i1e", "kl_div", "log_ndtr", "loggamma", "logit", "ndtr",
           "ndtri", "pseudo_huber", "psi", "rel_entr", "xlog1py", "xlogy"]
for _name in SPECIAL:
    _u = getattr(special, _name)
    _u = getattr(_u, "__wrapped__", _u)
    SWEEP[f"special.{_name}"] = (getattr(special, _name),
                                 [p8 + 0.1 * k for k in range(_u.nin)])
HESSIAN = {"special.sinc", "special.multigammaln", "stats.tmean", "stats.variation", "stats.gstd", "stats.entropy", "stats.zmap",
           "signal.gaussian", "special.gammaln", "special.log_ndtr"}


@pytest.mark.parametrize("name", sorted(SWEEP))
def test_sweep_of_array_api_functions(name):
    f, args = SWEEP[name]
    _check(f, [np.array(a, dtype=np.float64) for a in args], hessian=name in HESSIAN)


@pytest.mark.parametrize("name", sorted(SWEEP))
def test_sweep_with_dual_numbers(name):
    import tape.forward_ad as fwAD

    f, args = SWEEP[name]
    args = [np.array(a, dtype=np.float64) for a in args]
    tangents = [rng.standard_normal(np.shape(a)) for a in args]
    with fwAD.dual_level():
        duals = [fwAD.make_dual(tape.tensor(a), tape.tensor(v)) for a, v in zip(args, tangents)]
        primal, tangent = fwAD.unpack_dual(f(*duals))
        primal = np.array(primal.numpy())
        tangent = np.zeros(primal.shape) if tangent is None else np.array(tangent.numpy())
    value, jv = tape.jvp(f, tuple(args), tuple(tangents))
    np.testing.assert_array_equal(primal, np.asarray(value))
    np.testing.assert_allclose(tangent, np.asarray(jv), rtol=1e-10, atol=1e-12)


def test_tvar_tstd_tsem_values_right_and_gradient_nan_not_a_number():
    # SciPy writes NaN over the excluded values and squares them before dropping them: the
    # backward of that square is 0 * NaN, which taints the mean and so every kept element
    # (docs/array_api.md): a NaN, never a finite wrong number
    for fn in (stats.tvar, stats.tstd, stats.tsem):
        want = fn(x8, LIMITS)
        x = tape.tensor(x8, requires_grad=True)
        y = fn(x, LIMITS)
        assert abs(y.item() - want) <= rounding_bound(lambda a: fn(a, LIMITS), [x8], want)
        y.backward()
        kept = (x8 >= LIMITS[0]) & (x8 <= LIMITS[1])
        assert np.isnan(x.grad[kept]).all() and (x.grad[~kept] == 0.0).all()


SHAPES = [((1,), None), ((3, 4), 0), ((3, 4), 1), ((3, 4), None), ((2, 1, 3), -1)]


# variation and gstd of one value are NaN (no spread): not asked of them
@pytest.mark.parametrize("name, shape, axis", [
    (n, shape, axis) for n in ("tmean", "tmin", "tmax", "variation", "gstd")
    for shape, axis in SHAPES if n in ("tmean", "tmin", "tmax") or shape != (1,)])
def test_mask_using_functions_across_shapes(name, shape, axis):
    a = rng.uniform(0.5, 2.0, shape)
    fn = getattr(stats, name)
    args = {"tmean": (LIMITS,), "tmin": (0.7,), "tmax": (1.8,)}.get(name, ())
    if name in ("tmean", "tmin", "tmax"):
        a.flat[0] = 1.2  # inside every limit: no slice is left empty
    _check(lambda x: fn(x, *args, axis=axis), [a], hessian=False)


def test_tmean_at_a_limit_follows_inclusive():
    # an element exactly at a limit is kept or dropped as `inclusive` says; the gradient is
    # the mean's over the kept elements (one-sided at the limit: the value jumps there)
    a = np.array([0.7, 1.0, 1.5, 1.8, 2.0])
    for inclusive, kept in (((True, True), [1, 1, 1, 1, 0]), ((False, True), [0, 1, 1, 1, 0]),
                            ((True, False), [1, 1, 1, 0, 0])):
        kept = np.array(kept, dtype=bool)
        x = tape.tensor(a, requires_grad=True)
        y = stats.tmean(x, LIMITS, inclusive)
        assert y.item() == stats.tmean(a, LIMITS, inclusive)
        y.backward()
        np.testing.assert_allclose(x.grad, kept / kept.sum(), rtol=1e-15)


def test_tmean_of_an_empty_selection_is_scipys_error():
    with pytest.raises(ValueError, match="No array values within given limits"):
        stats.tmean(tape.tensor(x8, requires_grad=True), (5.0, 6.0))


def test_tmean_with_dual_numbers():
    import tape.forward_ad as fwAD

    v = rng.standard_normal(8)
    kept = (x8 >= LIMITS[0]) & (x8 <= LIMITS[1])
    with fwAD.dual_level():
        d = fwAD.make_dual(tape.tensor(x8), tape.tensor(v))
        primal, tangent = fwAD.unpack_dual(stats.tmean(d, LIMITS))
        primal, tangent = primal.item(), tangent.item()
    want = stats.tmean(x8, LIMITS)
    assert abs(primal - want) <= rounding_bound(lambda a: stats.tmean(a, LIMITS), [x8], want)
    assert abs(tangent - np.sum(v[kept]) / kept.sum()) <= sum_bound(v[kept] / kept.sum())


def test_tmean_replays_with_a_mask_that_moves():
    # the comparisons inside SciPy are guards: a replay whose values move an element across a
    # limit records again, and agrees with eager
    def f(x):
        return stats.tmean(x, LIMITS) * stats.tmax(x, 1.8)

    cf = tape.compile(f, x8)
    for x in (x8 + 0.01, x8 * 1.3, x8[::-1].copy()):
        v, g = cf.value_and_grad(x)
        v_e, g_e = tape.value_and_grad(f)(x)
        assert v == v_e and np.array_equal(g, g_e)
        want = stats.tmean(x, LIMITS) * stats.tmax(x, 1.8)
        assert abs(v - want) <= rounding_bound(
            lambda a: stats.tmean(a, LIMITS) * stats.tmax(a, 1.8), [x], want)


def test_lfiltic_at_a0_equal_to_one_skips_the_division():
    # SciPy divides by a[0] only when a[0] != 1: at exactly 1 the derivative in a[0] is 0
    # (the branch SciPy's code takes), elsewhere -zi / a[0]**2 (test_sweep: signal.lfiltic)
    b, y = np.array([0.25, 0.5, 0.25]), np.array([0.3])
    a = tape.tensor([1.0, -0.5], requires_grad=True)
    zi = signal.lfiltic(tape.tensor(b), a, tape.tensor(y))
    np.sum(zi).backward()
    assert a.grad[0] == 0.0 and a.grad[1] != 0.0


def test_sinc_derivatives_at_zero():
    # sinc(x) = 1 - (pi x)^2 / 6 + (pi x)^4 / 120 - ...: at 0 the first derivative is 0, the
    # second -pi^2 / 3, the fourth pi^4 / 5 (forward over reverse over reverse ...)
    f = lambda x: special.sinc(x)  # noqa: E731
    assert tape.grad(f)(0.0) == 0.0
    np.testing.assert_allclose(tape.grad(tape.grad(f))(0.0), -np.pi ** 2 / 3, rtol=1e-14)
    np.testing.assert_allclose(tape.grad(tape.grad(tape.grad(tape.grad(f))))(0.0),
                               np.pi ** 4 / 5, rtol=1e-13)


def test_multigammaln_refuses_a_outside_its_domain_as_scipy():
    with pytest.raises(ValueError, match="condition a"):
        special.multigammaln(tape.tensor([0.7, 2.0], requires_grad=True), 3)
    with pytest.raises(ValueError, match="positive integer"):
        special.multigammaln(tape.tensor([4.0]), 2.5)


def test_a_numpy_only_function_refuses_a_tensor_by_name():
    # simpson starts with np.asarray: never a silent value without its gradient
    with pytest.raises(TypeError, match="gradient"):
        integrate.simpson(tape.tensor(x8, requires_grad=True), dx=0.1)


def test_special_ufuncs_take_the_namespace_route():
    # SciPy's wrappers call xp.special.<name>: SciPy's ufunc on the tensor, not np.asarray
    assert hasattr(xp, "special") and xp.special.gammaln.__name__ == "gammaln"
    assert not hasattr(xp.special, "logsumexp")  # not a ufunc: SciPy's own array-API code
    a = np.array([0.5, 1.5, 7.0])
    c = special.gammaln(tape.tensor(a))  # a constant: SciPy's values
    assert isinstance(c, tape.Tensor)
    np.testing.assert_array_equal(c.numpy(), special.gammaln(a))
    x = tape.tensor(a, requires_grad=True)
    try:
        y = special.gammaln(x)
    except TypeError as e:  # no table row for it: tapejit's error naming the function
        assert "scipy.special.gammaln" in str(e) and "NumPy array" not in str(e), str(e)
    else:  # a table row records it: its gradient is the digamma function
        np.sum(y).backward()
        # (within docs/special.md's 6 ulps of SciPy's digamma, of its size or of x digamma')
        assert_within(x.grad, special.digamma(a), rounding_bound(special.digamma, [a],
                                                                 special.digamma(a), ops=16))


def test_the_example_of_docs_array_api_runs():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "array_api.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    ns = {}
    exec(compile(code, "docs/array_api.md", "exec"), ns)
    # w = 0: every class equally likely, the log-likelihood is -n log 4 and its gradient
    # X^T (onehot(y) - 1/4)
    X, y = ns["X"].numpy(), ns["y"]
    n = len(y)  # (sums of n terms: n roundings of sum |term| each side)
    assert_within(ns["value"], -n * np.log(4.0), sum_bound(np.full(n, np.log(4.0)), ops=2 * n))
    onehot = np.eye(4)[y] - 0.25
    assert_within(ns["g"], X.T @ onehot, sum_bound(X.T[:, :, None] * onehot, axis=1, ops=2 * n))


def test_environment_is_the_one_scipy_read():
    assert os.environ.get("SCIPY_ARRAY_API") == "1"
    x = tape.tensor([1.0, 2.0])
    from scipy._lib._array_api import array_namespace

    assert array_namespace(x) is tape.array_api
