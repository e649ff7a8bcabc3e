"""Eager reverse mode over the op database: values against NumPy, VJPs against finite differences.

Every op of ``tests/_op_database.py`` that claims reverse mode is recorded eagerly on the samples
the database draws for it (hypothesis shapes: 0-d, size 1, empty, broadcasting, a Python float
operand, both spellings np.* and tape.numpy.*) with random cotangents, and at its
near-non-differentiable points (the database's hand-derived gradients). The elementwise rows'
0-d Python-float path, special values and NaN inputs follow, then the reductions that are
compositions of rows (mean, var, std) and a few hand-derived cases.

This file also runs with ``NUMBA_DISABLE_JIT=1`` (see the Makefile): keep sizes small.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tape
import tape.numpy as tnp

from _fd import check_vjp, fd_vjp, tape_vjp
from _mode_checks import SUITE, check_reverse, check_reverse_kinks, grads, kinked, over_ops
from _op_database import (BINARY, SEEDS, SPECIALS, UNARY, claiming, ids, nan_grads,
                          reduced_count, shape_and_axis)

SETTINGS = settings(SUITE, max_examples=25)
REVERSE = claiming("reverse")


@over_ops(REVERSE, max_examples=25)
def test_value_and_vjp(op, sample, rng):
    check_reverse(op, sample, rng)


@kinked(REVERSE)
def test_near_non_differentiable_points(op):
    check_reverse_kinks(op)


def test_empty_max_min_reduction_raises():
    for fn in (np.max, np.min, tnp.max, tnp.min):
        with pytest.raises(ValueError):
            fn(tape.tensor(np.zeros((0, 2)), requires_grad=True), axis=0)


# ---------------------------------------------------------------------------------------------
# Elementwise rows: the 0-d Python-float path, special values, NaN


@pytest.mark.parametrize("op", UNARY, ids=ids(UNARY))
@SETTINGS
@given(seed=SEEDS)
def test_unary_scalar_path(op, seed):
    """0-d operands that are Python floats take the scalar fast path (formula, not ufunc)."""
    x0 = float(op.domain[0](np.random.default_rng(seed), ()))
    y = op.call(tape.tensor(x0))
    assert type(y._v) is float
    np.testing.assert_allclose(y.item(), op.call(np.float64(x0)), rtol=1e-13, atol=0)
    x = tape.tensor(x0, requires_grad=True)
    x1 = x * 1.0  # a non-leaf whose value is a Python float
    assert type(x1._v) is float
    y = op.call(x1)
    assert type(y._v) is float
    (g,) = tape.autograd.grad(y, [x])
    (n,) = fd_vjp(op.call, [x0], 1.0, [0])
    np.testing.assert_allclose(g, n, rtol=1e-6, atol=1e-8)


def _same_value(got, want, rtol):
    if np.isnan(want):
        return bool(np.isnan(got))
    if got == want:
        return bool(np.signbit(got) == np.signbit(want)) or want != 0.0
    return bool(np.isfinite(want) and abs(got - want) <= rtol * abs(want))


@pytest.mark.parametrize("op", UNARY, ids=ids(UNARY))
def test_unary_scalar_path_special_values(op):
    bad = []
    for x in SPECIALS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got = op.call(tape.tensor(x)).item()
            want = float(op.call(np.float64(x)))
        if not _same_value(got, want, 1e-13):
            bad.append((x, got, want))
    assert not bad, f"{op}: (x, 0-d path, NumPy) {bad}"


@pytest.mark.parametrize("op", BINARY, ids=ids(BINARY))
@SETTINGS
@given(seed=SEEDS)
def test_binary_scalar_path(op, seed):
    rng = np.random.default_rng(seed)
    da, db = op.domain
    a0, b0 = float(da(rng, ())), float(db(rng, ()))
    y = op.call(tape.tensor(a0), tape.tensor(b0))
    assert type(y._v) is float
    np.testing.assert_allclose(y.item(), op.call(np.float64(a0), np.float64(b0)), rtol=1e-13,
                               atol=0)
    a = tape.tensor(a0, requires_grad=True)
    b = tape.tensor(b0, requires_grad=True)
    y = op.call(a * 1.0, b * 1.0)
    assert type(y._v) is float
    ga, gb = tape.autograd.grad(y, [a, b])
    na, nb = fd_vjp(op.call, [a0, b0], 1.0, [0, 1])
    np.testing.assert_allclose(ga, na, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb, nb, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("op", BINARY, ids=ids(BINARY))
def test_binary_scalar_path_special_values(op):
    bad = []
    for a in SPECIALS:
        for b in SPECIALS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                got = op.call(tape.tensor(a), tape.tensor(b)).item()
                want = float(op.call(np.float64(a), np.float64(b)))
            if op.name in ("fmax", "fmin") and a == b == 0.0:
                # a +0.0 / -0.0 tie: the first operand, in every path of ours (NumPy's loops
                # differ among themselves there)
                if np.signbit(got) != np.signbit(a):
                    bad.append((a, b, got, want))
            elif not _same_value(got, want, 1e-13):
                bad.append((a, b, got, want))
    assert not bad, f"{op}: (a, b, 0-d path, NumPy) {bad}"


@pytest.mark.parametrize("op", UNARY + BINARY, ids=ids(UNARY + BINARY))
def test_nan_in_gives_nan_gradient(op):
    """At a = NaN (b = 2): NaN, except where a partial does not read the NaN operand."""
    want = nan_grads(op)
    inside = [np.nan, 2.0][:op.arity]
    other = float(op.domain[0](np.random.default_rng(0), ()))
    if op.arity == 1:  # an array with a NaN and a number: only the NaN's gradient is NaN
        (g,) = grads(op.call, [np.nan, other])
        np.testing.assert_array_equal(g[0], want[0])
        assert np.isfinite(g[1])
    else:
        g = grads(op.call, *[[v] for v in inside])
        np.testing.assert_array_equal([gi[0] for gi in g], want)
    # the 0-d path
    xs = [tape.tensor(v, requires_grad=True) for v in inside]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        g = tape.autograd.grad(op.call(*[x * 1.0 for x in xs]), xs)
    np.testing.assert_array_equal(g, want)


# ---------------------------------------------------------------------------------------------
# Reductions that are compositions of rows


@pytest.mark.parametrize("ns", [np, tnp], ids=["np", "tnp"])
@pytest.mark.parametrize("fname", ["mean", "var", "std"])
@SETTINGS
@given(sa=shape_and_axis(), keepdims=st.booleans(), ddof=st.sampled_from([0, 1]), seed=SEEDS)
def test_moments_value_and_vjp(ns, fname, sa, keepdims, ddof, seed):
    shape, axis = sa
    count = reduced_count(shape, axis)
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


def test_nan_never_turns_into_zero_through_products():
    # x * x at NaN: 2x = NaN (not 0)
    (g,) = grads(lambda x: x * x, [np.nan, 1.0])
    assert np.isnan(g[0]) and g[1] == 2.0
    # multiplying by 0 is a constant function of x: gradient 0 even at NaN; the NaN operand
    # makes the other gradient NaN
    ga, gb = grads(lambda a, b: a * b, [np.nan], [0.0])
    assert ga[0] == 0.0 and np.isnan(gb[0])
    # NaN flows through exp then log then a reduction
    (g,) = grads(lambda x: np.sum(np.log(np.exp(x) + 1.0)), [np.nan, 0.0])
    assert np.isnan(g[0]) and g[1] == 0.5


def test_empty_arrays():
    for f in (np.exp, np.sum, np.cumsum, np.prod):
        x = tape.tensor(np.zeros((0, 3)), requires_grad=True)
        y = f(x)
        (g,) = tape.autograd.grad(y, [x], grad_outputs=np.ones(y.shape))
        assert g.shape == (0, 3)
    (g,) = grads(lambda x: np.sum(x, axis=0), np.zeros((0, 3)))
    assert g.shape == (0, 3)

