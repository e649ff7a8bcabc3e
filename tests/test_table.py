"""One suite over the primitive table: values against NumPy, VJPs against finite differences.

Every unary and binary row of ``jit.table.TABLE`` is tested through its NumPy ufunc (the array
path and the 0-d Python-float path), and the reduce / scan rows through ``np.*`` and
``tape.numpy`` functions, with shapes drawn by hypothesis (0-d, size-1, empty, broadcasting) and
random cotangents. Hand-derived special cases (zeros, ties, NaN) follow at the end.

This file also runs with ``NUMBA_DISABLE_JIT=1`` (see the Makefile): keep sizes small.
"""
from __future__ import annotations

import warnings

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tape
import tape.numpy as tnp
from jit.table import TABLE

from _fd import check_vjp, fd_vjp, tape_vjp

SETTINGS = settings(max_examples=25, deadline=None, derandomize=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# (the scipy.special rows, which have no NumPy ufunc: tests/test_special.py)
UNARY = [p for p in TABLE if p.family == "unary" and p.ufunc is not None]
BINARY = [p for p in TABLE if p.family == "binary" and p.ufunc is not None]
REDUCE = [p for p in TABLE if p.family == "reduce"]
SCAN = [p for p in TABLE if p.family == "scan"]

SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)
BSHAPES = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=0,
                                            max_side=3)
SEEDS = st.integers(0, 2 ** 32 - 1)


# ---------------------------------------------------------------------------------------------
# Input domains: where each function is smooth (FD needs a neighbourhood of width ~1e-6).


def _uniform(lo, hi):
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def _away_from_zero(lo, hi):
    """|x| in [lo, hi], random sign."""
    return lambda rng, shape: rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


def _choice(*values):
    return lambda rng, shape: rng.choice(values, shape)


def _grid(offset):
    """Multiples of 0.1 (+ offset): operands on the two grids never tie or come close."""
    return lambda rng, shape: (rng.integers(-30, 30, shape) + offset) * 0.1


UNARY_DOMAIN = {
    "neg": _uniform(-3, 3), "abs": _away_from_zero(0.1, 3), "exp": _uniform(-3, 3),
    "expm1": _uniform(-3, 3), "exp2": _uniform(-3, 3), "log": _uniform(0.1, 5),
    "log1p": _uniform(-0.9, 5), "log2": _uniform(0.1, 5), "log10": _uniform(0.1, 5),
    "sqrt": _uniform(0.1, 5), "cbrt": _away_from_zero(0.1, 3), "square": _uniform(-3, 3),
    "reciprocal": _away_from_zero(0.2, 3), "sin": _uniform(-3, 3), "cos": _uniform(-3, 3),
    "tan": _uniform(-1.2, 1.2), "arcsin": _uniform(-0.9, 0.9), "arccos": _uniform(-0.9, 0.9),
    "arctan": _uniform(-3, 3), "sinh": _uniform(-3, 3), "cosh": _uniform(-3, 3),
    "tanh": _uniform(-3, 3), "arcsinh": _uniform(-3, 3), "arccosh": _uniform(1.1, 5),
    "arctanh": _uniform(-0.9, 0.9), "copy": _uniform(-3, 3),
}
BINARY_DOMAIN = {
    "add": (_uniform(-3, 3), _uniform(-3, 3)),
    "subtract": (_uniform(-3, 3), _uniform(-3, 3)),
    "multiply": (_uniform(-3, 3), _uniform(-3, 3)),
    "divide": (_uniform(-3, 3), _away_from_zero(0.2, 3)),
    "power": (_uniform(0.1, 3), _uniform(-2, 2)),
    "arctan2": (_away_from_zero(0.2, 3), _away_from_zero(0.2, 3)),
    "hypot": (_away_from_zero(0.2, 3), _away_from_zero(0.2, 3)),
    "logaddexp": (_uniform(-3, 3), _uniform(-3, 3)),
    "maximum": (_grid(0.5), _grid(0.0)), "minimum": (_grid(0.5), _grid(0.0)),
    "fmax": (_grid(0.5), _grid(0.0)), "fmin": (_grid(0.5), _grid(0.0)),
    # a an odd multiple of 0.05, b = +-0.7 or +-1.3 (even multiples): a / b stays >= 0.05 / 1.3
    # from the integers, where the quotient jumps
    "remainder": (_grid(0.5), _choice(-1.3, -0.7, 0.7, 1.3)),
    "fmod": (_grid(0.5), _choice(-1.3, -0.7, 0.7, 1.3)),
}


def test_every_elementwise_row_has_a_domain():
    assert {p.name for p in UNARY} == set(UNARY_DOMAIN)
    assert {p.name for p in BINARY} == set(BINARY_DOMAIN)


def _ids(rows):
    return [p.name for p in rows]


# ---------------------------------------------------------------------------------------------
# Unary rows


@pytest.mark.parametrize("p", UNARY, ids=_ids(UNARY))
@SETTINGS
@given(shape=SHAPES, seed=SEEDS)
def test_unary_value_and_vjp(p, shape, seed):
    rng = np.random.default_rng(seed)
    x = UNARY_DOMAIN[p.name](rng, shape)
    # value without recording: same as NumPy, bit for bit (NumPy computes it)
    np.testing.assert_allclose(p.ufunc(tape.tensor(x)).numpy(), p.ufunc(x), rtol=1e-14, atol=0)
    check_vjp(lambda a: p.ufunc(a), [x], rng=rng)


@pytest.mark.parametrize("p", UNARY, ids=_ids(UNARY))
def test_unary_tape_numpy_spelling(p):
    x = UNARY_DOMAIN[p.name](np.random.default_rng(1), (2, 3))
    fn = getattr(tnp, p.ufunc.__name__)
    check_vjp(lambda a: fn(a), [x])


@pytest.mark.parametrize("p", UNARY, ids=_ids(UNARY))
@SETTINGS
@given(seed=SEEDS)
def test_unary_scalar_path(p, seed):
    """0-d operands that are Python floats take the scalar fast path (formula, not ufunc)."""
    x0 = float(UNARY_DOMAIN[p.name](np.random.default_rng(seed), ()))
    y = p.ufunc(tape.tensor(x0))
    assert type(y._v) is float
    np.testing.assert_allclose(y.item(), p.ufunc(np.float64(x0)), rtol=1e-13, atol=0)
    x = tape.tensor(x0, requires_grad=True)
    x1 = x * 1.0  # a non-leaf whose value is a Python float
    assert type(x1._v) is float
    y = p.ufunc(x1)
    assert type(y._v) is float
    (g,) = tape.autograd.grad(y, [x])
    (n,) = fd_vjp(p.ufunc, [x0], 1.0, [0])
    np.testing.assert_allclose(g, n, rtol=1e-6, atol=1e-8)


SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 27.0, -8.0, 800.0, -800.0, 1e308, -1e308,
            5e-324, np.inf, -np.inf, np.nan]


def _same_value(got, want, rtol):
    if np.isnan(want):
        return bool(np.isnan(got))
    if got == want:
        return bool(np.signbit(got) == np.signbit(want)) or want != 0.0
    return bool(np.isfinite(want) and abs(got - want) <= rtol * abs(want))


@pytest.mark.parametrize("p", UNARY, ids=_ids(UNARY))
def test_unary_scalar_path_special_values(p):
    bad = []
    for x in SPECIALS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got = p.ufunc(tape.tensor(x)).item()
            want = float(p.ufunc(np.float64(x)))
        if not _same_value(got, want, 1e-13):
            bad.append((x, got, want))
    assert not bad, f"{p.name}: (x, 0-d path, NumPy) {bad}"


# ---------------------------------------------------------------------------------------------
# Binary rows


@pytest.mark.parametrize("p", BINARY, ids=_ids(BINARY))
@SETTINGS
@given(shapes=BSHAPES, seed=SEEDS, which=st.sampled_from([(0, 1), (0,), (1,)]))
def test_binary_value_and_vjp(p, shapes, seed, which):
    rng = np.random.default_rng(seed)
    (sa, sb), _ = shapes
    da, db = BINARY_DOMAIN[p.name]
    a, b = da(rng, sa), db(rng, sb)
    np.testing.assert_allclose(p.ufunc(tape.tensor(a), tape.tensor(b)).numpy(), p.ufunc(a, b),
                               rtol=1e-14, atol=0)
    # operands outside `which` are NumPy constants: only the needed adjoints are computed
    check_vjp(lambda x, y: p.ufunc(x, y), [a, b], wrt=which, rng=rng)


@pytest.mark.parametrize("p", BINARY, ids=_ids(BINARY))
@SETTINGS
@given(shape=SHAPES, seed=SEEDS)
def test_binary_python_scalar_operand(p, shape, seed):
    """A Python float on either side (a size-1 operand read for every element)."""
    rng = np.random.default_rng(seed)
    da, db = BINARY_DOMAIN[p.name]
    a = da(rng, shape)
    s = float(db(rng, ()))
    check_vjp(lambda x: p.ufunc(x, s), [a], rng=rng)
    b = db(rng, shape)
    s = float(da(rng, ()))
    check_vjp(lambda y: p.ufunc(s, y), [b], rng=rng)


@pytest.mark.parametrize("p", BINARY, ids=_ids(BINARY))
@SETTINGS
@given(seed=SEEDS)
def test_binary_scalar_path(p, seed):
    rng = np.random.default_rng(seed)
    da, db = BINARY_DOMAIN[p.name]
    a0, b0 = float(da(rng, ())), float(db(rng, ()))
    y = p.ufunc(tape.tensor(a0), tape.tensor(b0))
    assert type(y._v) is float
    np.testing.assert_allclose(y.item(), p.ufunc(np.float64(a0), np.float64(b0)), rtol=1e-13,
                               atol=0)
    a = tape.tensor(a0, requires_grad=True)
    b = tape.tensor(b0, requires_grad=True)
    y = p.ufunc(a * 1.0, b * 1.0)
    assert type(y._v) is float
    ga, gb = tape.autograd.grad(y, [a, b])
    na, nb = fd_vjp(p.ufunc, [a0, b0], 1.0, [0, 1])
    np.testing.assert_allclose(ga, na, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb, nb, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("p", BINARY, ids=_ids(BINARY))
def test_binary_scalar_path_special_values(p):
    bad = []
    for a in SPECIALS:
        for b in SPECIALS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                got = p.ufunc(tape.tensor(a), tape.tensor(b)).item()
                want = float(p.ufunc(np.float64(a), np.float64(b)))
            if p.name in ("fmax", "fmin") and a == b == 0.0:
                # a +0.0 / -0.0 tie: the first operand, in every path of ours (NumPy's loops
                # differ among themselves there)
                if np.signbit(got) != np.signbit(a):
                    bad.append((a, b, got, want))
            elif not _same_value(got, want, 1e-13):
                bad.append((a, b, got, want))
    assert not bad, f"{p.name}: (a, b, 0-d path, NumPy) {bad}"


# ---------------------------------------------------------------------------------------------
# Reductions and scans


@st.composite
def shape_and_axis(draw, tuples=True, none=True):
    shape = draw(SHAPES)
    nd = len(shape)
    options = []
    if none:
        options.append(st.none())
    if nd:
        options.append(st.integers(-nd, nd - 1))
        if tuples:
            options.append(st.lists(st.integers(0, nd - 1), unique=True, max_size=nd).flatmap(
                lambda ax: st.tuples(*[st.sampled_from([a, a - nd]) for a in ax])))
    axis = draw(st.one_of(*options)) if options else None
    return shape, axis


def _reduced_count(shape, axis):
    if axis is None:
        return int(np.prod(shape))
    axes = (axis,) if isinstance(axis, int) else axis
    return int(np.prod([shape[a] for a in axes]))


def _distinct(rng, shape):
    """Values at least 0.1 apart (no ties for max/min)."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.1 - 0.05 * n).reshape(shape) + rng.uniform(0, 0.01, shape)


REDUCE_FUNCS = {"sum": "sum", "prod": "prod", "amax": "max", "amin": "min"}


def test_every_reduce_and_scan_row_is_covered():
    assert {p.name for p in REDUCE} == set(REDUCE_FUNCS)
    assert {p.name for p in SCAN} == {"cumsum", "cumprod"}


@pytest.mark.parametrize("ns", [np, tnp], ids=["np", "tnp"])
@pytest.mark.parametrize("p", REDUCE, ids=_ids(REDUCE))
@SETTINGS
@given(sa=shape_and_axis(), keepdims=st.booleans(), seed=SEEDS)
def test_reduce_value_and_vjp(ns, p, sa, keepdims, seed):
    shape, axis = sa
    rng = np.random.default_rng(seed)
    fname = REDUCE_FUNCS[p.name]
    np_fn = getattr(np, fname)
    fn = getattr(ns, fname)
    if fname in ("max", "min") and _reduced_count(shape, axis) == 0 and 0 in shape:
        with pytest.raises(ValueError):
            fn(tape.tensor(np.zeros(shape), requires_grad=True), axis=axis, keepdims=keepdims)
        return
    if fname == "prod":
        x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    elif fname in ("max", "min"):
        x = _distinct(rng, shape)
    else:
        x = rng.uniform(-3, 3, shape)
    check_vjp(lambda a: fn(a, axis=axis, keepdims=keepdims), [x], rng=rng,
              f_np=lambda a: np_fn(a, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("ns", [np, tnp], ids=["np", "tnp"])
@pytest.mark.parametrize("p", SCAN, ids=_ids(SCAN))
@SETTINGS
@given(sa=shape_and_axis(tuples=False), seed=SEEDS)
def test_scan_value_and_vjp(ns, p, sa, seed):
    shape, axis = sa
    rng = np.random.default_rng(seed)
    fn = getattr(ns, p.name)
    np_fn = getattr(np, p.name)
    x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    check_vjp(lambda a: fn(a, axis=axis), [x], rng=rng, f_np=lambda a: np_fn(a, axis=axis))


@pytest.mark.parametrize("ns", [np, tnp], ids=["np", "tnp"])
@pytest.mark.parametrize("fname", ["mean", "var", "std"])
@SETTINGS
@given(sa=shape_and_axis(), keepdims=st.booleans(), ddof=st.sampled_from([0, 1]), seed=SEEDS)
def test_moments_value_and_vjp(ns, fname, sa, keepdims, ddof, seed):
    shape, axis = sa
    count = _reduced_count(shape, axis)
    kw = dict(axis=axis, keepdims=keepdims)
    if fname != "mean":
        kw["ddof"] = ddof
    # mean of nothing, and var/std with count <= ddof, are NaN/inf (NumPy warns): no gradient
    # to check; std needs two values (it is |x - y| / 2-like, not differentiable at 0)
    if count == 0 or (fname == "var" and count <= ddof) or (fname == "std" and count < 2):
        return
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, shape)
    fn, np_fn = getattr(ns, fname), getattr(np, fname)
    check_vjp(lambda a: fn(a, **kw), [x], rng=rng, f_np=lambda a: np_fn(a, **kw))


def test_moments_degenerate_values_match_numpy():
    x = np.array([[1.0, 2.0, 4.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for kw in (dict(axis=0, ddof=1), dict(axis=1, ddof=3), dict(axis=0)):
            for f in (np.var, np.std):
                np.testing.assert_allclose(f(tape.tensor(x), **kw).numpy(), f(x, **kw))
        np.testing.assert_allclose(np.mean(tape.tensor(np.zeros((0, 2))), axis=0).numpy(),
                                   np.mean(np.zeros((0, 2)), axis=0))


def test_reductions_as_ufunc_methods():
    x = np.arange(1.0, 7.0).reshape(2, 3)
    check_vjp(lambda a: np.add.reduce(a, axis=1), [x])
    check_vjp(lambda a: np.multiply.reduce(a, axis=0), [x])
    check_vjp(lambda a: np.maximum.reduce(a, axis=1), [x])
    check_vjp(lambda a: np.add.accumulate(a, axis=1), [x])
    check_vjp(lambda a: np.multiply.accumulate(a, axis=0), [x])


def test_reduction_methods():
    x = np.arange(1.0, 7.0).reshape(2, 3)
    check_vjp(lambda a: a.sum(axis=0), [x])
    check_vjp(lambda a: a.prod(axis=-1, keepdims=True), [x])
    check_vjp(lambda a: a.max(axis=1), [x])
    check_vjp(lambda a: a.std(axis=(0, 1), ddof=1), [x])
    check_vjp(lambda a: a.cumprod(axis=1), [x])


# ---------------------------------------------------------------------------------------------
# Hand-derived special cases


def grads(f, *vals):
    """Gradient of sum(f(...)) w.r.t. every argument, as NumPy arrays."""
    xs = [tape.tensor(np.asarray(v, dtype=np.float64), requires_grad=True) for v in vals]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = f(*xs)
        out = np.sum(out) if out.ndim else out
        return [np.asarray(g) for g in tape.autograd.grad(out, xs)]


def test_abs_and_sign_at_zero_give_zero_gradient():
    (g,) = grads(np.abs, [0.0, -0.0, 2.0, -3.0])
    np.testing.assert_array_equal(g, [0.0, 0.0, 1.0, -1.0])
    (g,) = grads(lambda x: np.sign(x) * 1.0 + np.fabs(x), [0.0, 2.0])
    np.testing.assert_array_equal(g, [0.0, 1.0])
    # the 0-d Python-float path uses the same rule
    x = tape.tensor(0.0, requires_grad=True)
    (g,) = tape.autograd.grad(abs(x * 1.0), [x])
    assert g == 0.0
    # sign is piecewise constant: a constant result, zero gradient
    x = tape.tensor([0.0, -1.5], requires_grad=True)
    assert not np.sign(x).requires_grad


@pytest.mark.parametrize("fn", [np.maximum, np.minimum, np.fmax, np.fmin])
def test_elementwise_max_min_ties_split_evenly(fn):
    ga, gb = grads(fn, [1.0, 2.0, -1.0], [1.0, 1.0, -1.0])
    big = 1.0 if fn in (np.maximum, np.fmax) else 0.0
    np.testing.assert_array_equal(ga, [0.5, big, 0.5])
    np.testing.assert_array_equal(gb, [0.5, 1.0 - big, 0.5])
    # broadcast scalar operand: relu-like clip at a tie
    (g,) = grads(lambda x: fn(x, 0.0), [0.0, 1.0, -1.0])
    np.testing.assert_array_equal(g, [0.5, big, 1.0 - big])
    # 0-d Python-float path
    a = tape.tensor(3.0, requires_grad=True)
    b = tape.tensor(3.0, requires_grad=True)
    assert tape.autograd.grad(fn(a * 1.0, b * 1.0), [a, b]) == (0.5, 0.5)


@pytest.mark.parametrize("fname", ["max", "min"])
def test_max_reduction_ties_split_evenly(fname):
    fn = getattr(np, fname)
    v = 3.0 if fname == "max" else -3.0
    (g,) = grads(fn, [1.0, v, 0.0, v, v])
    np.testing.assert_allclose(g, [0.0, 1 / 3, 0.0, 1 / 3, 1 / 3], rtol=1e-15)
    x = np.array([[v, v, 0.0], [v, 0.0, 0.0]])
    ct = np.array([6.0, -4.0, 3.0])
    xt = tape.tensor(x, requires_grad=True)
    (g,) = tape.autograd.grad(fn(xt, axis=0), [xt], grad_outputs=ct)
    np.testing.assert_allclose(g, [[3.0, -4.0, 1.5], [3.0, 0.0, 1.5]], rtol=1e-15)


def test_prod_with_zeros():
    (g,) = grads(np.prod, [2.0, 0.0, 3.0])
    np.testing.assert_array_equal(g, [0.0, 6.0, 0.0])
    (g,) = grads(np.prod, [2.0, 0.0, 0.0, 5.0])
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.0, 0.0])
    (g,) = grads(lambda x: np.prod(x, axis=1), [[0.0, 4.0], [2.0, 3.0], [0.0, 0.0]])
    np.testing.assert_array_equal(g, [[4.0, 0.0], [3.0, 2.0], [0.0, 0.0]])


def test_cumprod_with_zeros():
    for x in ([2.0, 0.0, 3.0, 4.0], [0.0, 2.0, 3.0], [2.0, 3.0, 0.0], [0.0, 0.0, 2.0],
              [1.5, 0.0, 2.0, 0.0, 3.0]):
        x = np.array(x)
        ct = np.random.default_rng(len(x)).standard_normal(x.shape)
        _, (g,) = tape_vjp(lambda a: np.cumprod(a), [x], ct, (0,))
        # exact reference: d cumprod_k / d x_r = prod_{i<=k, i!=r} x_i for r <= k
        ref = np.zeros_like(x)
        for r in range(x.size):
            for k in range(r, x.size):
                ref[r] += ct[k] * np.prod(np.delete(x[:k + 1], r))
        np.testing.assert_allclose(g, ref, rtol=1e-14, atol=0)



def _others(x, r):
    """prod of x without position r, in float64 (reference, no division)."""
    out = 1.0
    with np.errstate(all="ignore"):
        for i, v in enumerate(x):
            if i != r:
                out *= v
    return out


PROD_EDGES = [[np.inf, 2.0, 3.0], [2.0, -np.inf, 0.5], [np.inf, 0.0, 3.0], [1e-200, 1e-200, 1e200],
              [1e200, 1e200, 1e-200], [np.nan, 2.0, 3.0], [0.0, np.inf, np.inf]]


@pytest.mark.parametrize("x", PROD_EDGES)
def test_prod_gradient_at_infinities_and_over_or_underflow(x):
    """The products of the other factors, with no division: prod([inf, 2, 3]) has gradient
    [6, inf, inf] (not NaN at the inf), and one that underflows still has its nonzero partials."""
    x = np.array(x)
    want = [_others(x, r) for r in range(x.size)]
    with np.errstate(all="ignore"):
        for g in (grads(np.prod, x)[0], tape.compile(np.prod, x).grad(x)):
            np.testing.assert_array_equal(g, want)
        # forward mode: each partial alone (a one-hot tangent), where it is not 0 * inf
        ones = np.ones_like(x)
        _, t = tape.jvp(np.prod, (x,), (ones,))
        np.testing.assert_array_equal(t, np.sum(want))


def _cumprod_reference(x, ct):
    g = np.zeros_like(x)
    for r in range(x.size):
        for k in range(r, x.size):
            g[r] += ct[k] * _others(x[:k + 1], r)
    return g


# (not [0, inf, inf]: after a zero factor the reverse returns 0, where these IEEE products
# give 0 * inf = NaN)
@pytest.mark.parametrize("x", PROD_EDGES[:-1] + [[2.0, 0.0, 3.0, 0.0, 5.0]])
def test_cumprod_gradient_at_infinities_and_over_or_underflow(x):
    x = np.array(x)
    ct = np.array([1.0, 0.5, 2.0, 1.5, 0.25][:x.size])
    with np.errstate(all="ignore"):
        want = _cumprod_reference(x, ct)
        _, (g,) = tape_vjp(lambda a: np.cumprod(a), [x], ct, (0,))
        np.testing.assert_allclose(g, want, rtol=1e-15)
        # second order through the graph-mode rule: d/dx of (its first-order gradient . ct)
        xt = tape.tensor(x, requires_grad=True)
        (g1,) = tape.autograd.grad(np.sum(np.cumprod(xt) * ct), [xt], create_graph=True)
        np.testing.assert_allclose(g1.detach().numpy(), want, rtol=1e-15)
        # forward mode: the product rule, exact at zeros and infinities
        tangent = np.linspace(1.0, 2.0, x.size)
        _, t = tape.jvp(lambda a: np.cumprod(a), (x,), (tangent,))
        ref = [sum(tangent[r] * _others(x[:k + 1], r) for r in range(k + 1))
               for k in range(x.size)]
        np.testing.assert_allclose(t, ref, rtol=1e-15)


def test_long_cumprod_with_a_zero_is_linear_time():
    x = np.linspace(0.5, 1.5, 200_000)
    x[7] = 0.0
    with np.errstate(over="ignore"):
        (g,) = grads(lambda a: np.sum(np.cumprod(a)), x)  # was O(R^2) at a zero: 10^10 steps
    # after the zero every partial is 0, though the products of the later factors overflow
    assert not np.any(g[8:])
    np.testing.assert_allclose(g[:7], [_cumprod_reference(x[:8], np.ones(8))[r]
                                       for r in range(7)], rtol=1e-13)


NOJIT = bool(numba.config.DISABLE_JIT)
def test_sqrt_at_zero_has_infinite_gradient():
    (g,) = grads(np.sqrt, [0.0, 4.0])
    np.testing.assert_array_equal(g, [np.inf, 0.25])


def test_sqrt_at_zero_has_infinite_gradient_scalar_path():
    x = tape.tensor(0.0, requires_grad=True)
    (g,) = tape.autograd.grad(np.sqrt(x * 1.0), [x])
    assert g == np.inf


@pytest.mark.parametrize("f, x, want", [
    (np.log, 0.0, np.inf), (np.arcsin, 1.0, np.inf), (np.arctanh, 1.0, np.inf),
    (lambda x: 1.0 / x, 0.0, -np.inf),
], ids=["log", "arcsin", "arctanh", "divide"])
def test_singular_points_give_inf_gradients(f, x, want):
    (g,) = grads(f, [x])
    assert g[0] == want


def test_reciprocal_at_zero_has_infinite_gradient():
    (g,) = grads(np.reciprocal, [0.0, 2.0])
    np.testing.assert_array_equal(g, [-np.inf, -0.25])


def test_power_with_base_zero():
    ga, gb = grads(np.power, [0.0, 0.0, 0.0, 0.0], [2.0, 1.0, 0.0, 3.0])
    # d/da a**b = b a**(b-1): 0 for b > 1, 1 for b == 1, 0 for b == 0 (constant 1)
    np.testing.assert_array_equal(ga, [0.0, 1.0, 0.0, 0.0])
    # d/db a**b = a**b log a -> 0 as a -> 0+ (b > 0)
    np.testing.assert_array_equal(gb, [0.0, 0.0, 0.0, 0.0])
    ga, _ = grads(np.power, [0.0], [0.5])
    assert ga[0] == np.inf
    a = tape.tensor(0.0, requires_grad=True)
    b = tape.tensor(2.0, requires_grad=True)
    assert tape.autograd.grad((a * 1.0) ** (b * 1.0), [a, b]) == (0.0, 0.0)


CONST_DERIVATIVE = {"neg": -1.0, "copy": 1.0}


@pytest.mark.parametrize("p", UNARY, ids=_ids(UNARY))
def test_unary_nan_in_gives_nan_gradient(p):
    want = CONST_DERIVATIVE.get(p.name, np.nan)
    (g,) = grads(p.ufunc, [np.nan, float(UNARY_DOMAIN[p.name](np.random.default_rng(0), ()))])
    np.testing.assert_array_equal(g[0], want)
    assert np.isfinite(g[1])
    x = tape.tensor(np.nan, requires_grad=True)
    (g,) = tape.autograd.grad(p.ufunc(x * 1.0), [x])
    np.testing.assert_array_equal(g, want)


NAN = np.nan
# (d/da, d/db) of f(a, b) at a = NaN, b = 2 (derived by hand from the partials)
BINARY_NAN = {
    "add": (1.0, 1.0), "subtract": (1.0, -1.0), "multiply": (2.0, NAN), "divide": (0.5, NAN),
    "power": (NAN, NAN), "arctan2": (NAN, NAN), "hypot": (NAN, NAN), "logaddexp": (NAN, NAN),
    "maximum": (1.0, 0.0), "minimum": (1.0, 0.0),  # NaN wins maximum: it takes the gradient
    "fmax": (0.0, 1.0), "fmin": (0.0, 1.0),  # fmax ignores NaN: the other operand wins
    "remainder": (1.0, NAN), "fmod": (1.0, NAN),  # a - b q: q is NaN
}


@pytest.mark.parametrize("p", BINARY, ids=_ids(BINARY))
def test_binary_nan_in_gives_nan_gradient(p):
    want = BINARY_NAN[p.name]
    ga, gb = grads(p.ufunc, [NAN], [2.0])
    np.testing.assert_array_equal([ga[0], gb[0]], want)
    a = tape.tensor(NAN, requires_grad=True)
    b = tape.tensor(2.0, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        g = tape.autograd.grad(p.ufunc(a * 1.0, b * 1.0), [a, b])
    np.testing.assert_array_equal(g, want)


def test_nan_never_turns_into_zero_through_products():
    # x * x at NaN: 2x = NaN (not 0)
    (g,) = grads(lambda x: x * x, [NAN, 1.0])
    assert np.isnan(g[0]) and g[1] == 2.0
    # multiplying by 0 is a constant function of x: gradient 0 even at NaN; the NaN operand
    # makes the other gradient NaN
    ga, gb = grads(lambda a, b: a * b, [NAN], [0.0])
    assert ga[0] == 0.0 and np.isnan(gb[0])
    # NaN flows through exp then log then a reduction
    (g,) = grads(lambda x: np.sum(np.log(np.exp(x) + 1.0)), [NAN, 0.0])
    assert np.isnan(g[0]) and g[1] == 0.5


def test_max_reduction_with_nan_sends_gradient_to_nan():
    (g,) = grads(np.max, [1.0, NAN, 5.0])
    np.testing.assert_array_equal(g, [0.0, 1.0, 0.0])


def test_empty_arrays():
    for f in (np.exp, np.sum, np.cumsum, np.prod):
        x = tape.tensor(np.zeros((0, 3)), requires_grad=True)
        y = f(x)
        (g,) = tape.autograd.grad(y, [x], grad_outputs=np.ones(y.shape))
        assert g.shape == (0, 3)
    (g,) = grads(lambda x: np.sum(x, axis=0), np.zeros((0, 3)))
    assert g.shape == (0, 3)

