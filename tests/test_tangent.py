"""The tangent (forward-mode) sweep, row by row over the primitive table.

Every non-input, non-escape row of ``jit.table.TABLE`` is recorded on a fresh tape, its leaves are
seeded with random directions and ``jit._tangent.tangent_sweep`` runs over the whole tape. Checks:
the tangent equals a central finite difference; the dot-product test <v, J u> == <J^T v, u>
against the reverse sweep (``tape.autograd.grad``), which also holds at ties, zeros and NaN where
the derivative is a convention; and k directions in one sweep equal k single-direction sweeps bit
for bit. Shapes come from hypothesis (0-d, size-1, empty, broadcasting) as in test_table.py.

This file also runs with ``NUMBA_DISABLE_JIT=1``: keep sizes small.
"""
from __future__ import annotations

import warnings

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import jit
import tape
from jit import _generate_tangent
from jit.table import OPCODE, TABLE
from tape.transforms.functional import _FreshTape

from test_table import BINARY_DOMAIN, UNARY_DOMAIN, shape_and_axis

SETTINGS = settings(max_examples=15, deadline=None, derandomize=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)
BSHAPES = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=0,
                                            max_side=3)
SEEDS = st.integers(0, 2 ** 32 - 1)
K = 8  # directions per sweep in the tests

# (the scipy.special rows, which have no NumPy ufunc: tests/test_special.py)
UNARY = [p for p in TABLE if p.family == "unary" and p.ufunc is not None]
BINARY = [p for p in TABLE if p.family == "binary" and p.ufunc is not None]
OTHER = [p for p in TABLE if p.family not in ("input", "escape", "unary", "binary")]


def _ids(rows):
    return [p.name for p in rows]


# ---------------------------------------------------------------------------------------------
# Driver: record, seed, sweep (a test-only stand-in for the forward-mode driver)


class Recorded:
    """f recorded on a fresh tape with leaves at the indices in `wrt`, NumPy constants elsewhere."""

    def __init__(self, f, args, wrt):
        self.args = [np.array(a, dtype=np.float64) for a in args]
        self.wrt = tuple(wrt)
        self.f = f
        # 0-d constants as Python floats, so that 0-d rows take the inline path
        self.xs = [tape.tensor(a, requires_grad=True) if i in self.wrt else
                   (a if a.ndim else float(a)) for i, a in enumerate(self.args)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            with _FreshTape():
                self.y = f(*self.xs)
        self.t = self.y._tape
        self.A = self.t.build()
        n = len(self.A.sv)
        leaf_slot = {id(leaf): s for s, (leaf, _) in self.t.leaves.items()}
        self.slots = [leaf_slot.get(id(self.xs[i])) for i in self.wrt]
        src = np.zeros(n, np.uint8)
        for s in self.slots:
            if s is not None:
                src[s] = 1
        # forward activity: need_pass with every slot a root marks the operands with tangents
        self.live = np.zeros(n, np.uint8)
        self.act = np.zeros(n, np.uint8)
        jit.need_pass(self.A.R, src, np.ones(n, np.uint8), self.live, self.act)
        self.codes = set(self.A.code[self.act != 0].tolist())

    def jvp(self, us, k):
        """Tangent of the output along directions us[i] (shape (k, *args[i].shape)) per wrt."""
        A = self.A
        n = len(A.sv)
        TO = np.full(n, -1, np.int64)
        live = np.flatnonzero(self.live)
        sizes = A.size[live] * k
        TO[live] = np.cumsum(sizes) - sizes
        T = np.full(int(sizes.sum()), np.nan)  # unwritten entries read as NaN, not as zero
        for s, u in zip(self.slots, us):
            if s is not None:
                T[TO[s]:TO[s] + k * A.size[s]] = np.reshape(u, -1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            jit.tangent_sweep(A.R, A.S, A.VA, TO, A.sv, T, A.IA, A.FA, self.act, k, 0, n)
        ys = self.y._slot
        shape = (k,) + self.y.shape
        if not self.live[ys]:
            return np.zeros(shape)
        return T[TO[ys]:TO[ys] + k * A.size[ys]].reshape(shape).copy()

    def vjp(self, v):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            gs = tape.autograd.grad(self.y, [self.xs[i] for i in self.wrt], grad_outputs=v,
                                    retain_graph=True, allow_unused=True)
        return [np.zeros(self.args[i].shape) if g is None else np.asarray(g)
                for i, g in zip(self.wrt, gs)]


def fd_jvp(f, args, wrt, us, h=1e-6):
    """Central difference of the NumPy function f along one direction (us[i] per wrt)."""
    scale = max([1.0] + [float(np.max(np.abs(args[i]), initial=0.0)) for i in wrt])
    step = h * scale
    out = []
    for sign in (1.0, -1.0):
        a = [np.array(x, dtype=np.float64) for x in args]
        for i, u in zip(wrt, us):
            a[i] = a[i] + sign * step * u
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out.append(np.asarray(f(*a), dtype=np.float64))
    return (out[0] - out[1]) / (2.0 * step)


def check_jvp(f, args, wrt, rng, code=None, fd=True, f_np=None, rtol=1e-6, atol=1e-7):
    """FD, dot-product and k-directions checks of f's tangent; `code` must be a swept row."""
    rec = Recorded(f, args, wrt)
    if code is not None:
        assert code in rec.codes, f"{TABLE[code].name} was not recorded (got " \
            f"{sorted(TABLE[c].name for c in rec.codes)})"
    us = [rng.standard_normal((K,) + rec.args[i].shape) for i in wrt]
    ty = rec.jvp(us, K)
    # (c) k directions in one sweep == k sweeps of one direction, bit for bit
    for j in range(K):
        one = rec.jvp([u[j:j + 1] for u in us], 1)[0]
        np.testing.assert_array_equal(one, ty[j], err_msg=f"direction {j} of {K}")
    # (b) dot-product test against the reverse sweep
    v = rng.standard_normal(rec.y.shape)
    gs = rec.vjp(v)
    for j in range(K):
        lhs = float(np.sum(v * ty[j]))
        terms = [g * u[j] for g, u in zip(gs, us)]
        rhs = float(sum(np.sum(t) for t in terms))
        scale = float(np.sum(np.abs(v * ty[j])) + sum(np.sum(np.abs(t)) for t in terms))
        if np.isnan(lhs) or np.isnan(rhs):
            assert np.isnan(lhs) and np.isnan(rhs), (lhs, rhs)
        else:
            assert abs(lhs - rhs) <= 1e-10 * scale + 1e-300, (j, lhs, rhs, scale)
    # (a) finite differences along the first two directions
    if fd:
        f_np = f if f_np is None else f_np
        for j in range(2):
            num = fd_jvp(f_np, rec.args, wrt, [u[j] for u in us])
            tol = atol * max(1.0, float(np.max(np.abs(num), initial=0.0)))
            np.testing.assert_allclose(ty[j], num, rtol=rtol, atol=tol,
                                       err_msg=f"JVP vs FD, direction {j}")
    return rec, ty


# ---------------------------------------------------------------------------------------------
# Elementwise rows


@pytest.mark.parametrize("p", UNARY, ids=_ids(UNARY))
@SETTINGS
@given(shape=SHAPES, seed=SEEDS)
def test_unary_jvp(p, shape, seed):
    rng = np.random.default_rng(seed)
    x = UNARY_DOMAIN[p.name](rng, shape)
    code = OPCODE[p.name] if x.size else None  # an empty operand records nothing to sweep
    check_jvp(lambda a: p.ufunc(a * 1.0), [x], (0,), rng, code=code)


@pytest.mark.parametrize("p", UNARY, ids=_ids(UNARY))
@SETTINGS
@given(seed=SEEDS)
def test_unary_jvp_scalar_path(p, seed):
    """0-d values are Python floats: the row has no side row and takes the inline path."""
    rng = np.random.default_rng(seed)
    x = UNARY_DOMAIN[p.name](rng, ())
    rec, _ = check_jvp(lambda a: p.ufunc(a * 1.0), [x], (0,), rng, code=OPCODE[p.name])
    assert rec.A.R[rec.y._slot, 3] < 0


@pytest.mark.parametrize("p", BINARY, ids=_ids(BINARY))
@SETTINGS
@given(shapes=BSHAPES, seed=SEEDS, which=st.sampled_from([(0, 1), (0,), (1,)]))
def test_binary_jvp(p, shapes, seed, which):
    rng = np.random.default_rng(seed)
    (sa, sb), _ = shapes
    da, db = BINARY_DOMAIN[p.name]
    a, b = da(rng, sa), db(rng, sb)
    empty = 0 in np.broadcast_shapes(sa, sb)
    # operands outside `which` are NumPy constants: only the active operand terms are computed
    check_jvp(lambda x, y: p.ufunc(x, y), [a, b], which, rng,
              code=None if empty else OPCODE[p.name])


@pytest.mark.parametrize("p", BINARY, ids=_ids(BINARY))
@SETTINGS
@given(shape=SHAPES, seed=SEEDS)
def test_binary_jvp_python_scalar_operand(p, shape, seed):
    rng = np.random.default_rng(seed)
    da, db = BINARY_DOMAIN[p.name]
    a = da(rng, shape)
    s = float(db(rng, ()))
    check_jvp(lambda x: p.ufunc(x, s), [a], (0,), rng)
    b = db(rng, shape)
    s = float(da(rng, ()))
    check_jvp(lambda y: p.ufunc(s, y), [b], (0,), rng)


@pytest.mark.parametrize("p", BINARY, ids=_ids(BINARY))
@SETTINGS
@given(seed=SEEDS, which=st.sampled_from([(0, 1), (0,), (1,)]))
def test_binary_jvp_scalar_path(p, seed, which):
    rng = np.random.default_rng(seed)
    da, db = BINARY_DOMAIN[p.name]
    a, b = da(rng, ()), db(rng, ())
    rec, _ = check_jvp(lambda x, y: p.ufunc(x * 1.0, y * 1.0), [a, b], which, rng,
                       code=OPCODE[p.name])
    assert rec.A.R[rec.y._slot, 3] < 0


# ---------------------------------------------------------------------------------------------
# Other families: one case per row name (a new row fails test_every_row_has_a_case)


def _distinct(rng, shape):
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.1 - 0.05 * n).reshape(shape) + rng.uniform(0, 0.01, shape)


def _signed(rng, shape):
    return rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)


@st.composite
def where_case(draw):
    (sa, sb, sm), out = draw(hnp.mutually_broadcastable_shapes(
        num_shapes=3, min_dims=0, max_dims=3, min_side=0, max_side=3))
    which = draw(st.sampled_from([(0, 1), (0,), (1,)]))
    return sa, sb, sm, which


@pytest.mark.parametrize("p", OTHER, ids=_ids(OTHER))
def test_every_row_has_a_case(p):
    assert p.name in CASES, f"add a tangent test case for row {p.name!r}"


@SETTINGS
@given(case=where_case(), seed=SEEDS)
def test_where_jvp(case, seed):
    sa, sb, sm, which = case
    rng = np.random.default_rng(seed)
    mask = rng.random(sm) < 0.5
    a, b = rng.uniform(-3, 3, sa), rng.uniform(-3, 3, sb)
    check_jvp(lambda x, y: np.where(mask, x, y), [a, b], which, rng)


REDUCE_FUNCS = {"sum": np.sum, "prod": np.prod, "amax": np.max, "amin": np.min}


@pytest.mark.parametrize("name", sorted(REDUCE_FUNCS))
@SETTINGS
@given(sa=shape_and_axis(), keepdims=st.booleans(), seed=SEEDS)
def test_reduce_jvp(name, sa, keepdims, seed):
    shape, axis = sa
    rng = np.random.default_rng(seed)
    fn = REDUCE_FUNCS[name]
    x = {"prod": _signed, "amax": _distinct, "amin": _distinct}.get(
        name, lambda r, s: r.uniform(-3, 3, s))(rng, shape)
    if name in ("amax", "amin") and x.size == 0:
        return  # NumPy raises (a zero-size reduction has no identity)
    check_jvp(lambda a: fn(a * 1.0, axis=axis, keepdims=keepdims), [x], (0,), rng,
              code=OPCODE[name] if x.size else None)


@pytest.mark.parametrize("name", sorted(REDUCE_FUNCS))
@pytest.mark.parametrize("axis", [None, 0, 1, 2, (1, 2), (0, 2)])
def test_reduce_jvp_every_axis(name, axis):
    """Each (P, R, Q) case of the kernels: Q == 1 (trailing axes), P == 1, both > 1."""
    rng = np.random.default_rng(6)
    x = (_signed if name == "prod" else _distinct)(rng, (3, 4, 2))
    check_jvp(lambda a: REDUCE_FUNCS[name](a, axis=axis), [x], (0,), rng, code=OPCODE[name])


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@SETTINGS
@given(sa=shape_and_axis(tuples=False), seed=SEEDS)
def test_scan_jvp(name, sa, seed):
    shape, axis = sa
    rng = np.random.default_rng(seed)
    fn = getattr(np, name)
    check_jvp(lambda a: fn(a * 1.0, axis=axis), [_signed(rng, shape)], (0,), rng,
              code=OPCODE[name] if int(np.prod(shape)) else None)


@st.composite
def gather_case(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3))
    kind = draw(st.sampled_from(["int", "slice", "transpose", "broadcast"]))
    return shape, kind


@SETTINGS
@given(case=gather_case(), seed=SEEDS)
def test_gather_jvp(case, seed):
    shape, kind = case
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, shape)
    if kind == "int":  # repeated positions: the reverse accumulates, the tangent copies
        idx = rng.integers(0, shape[0], size=5)
        f = lambda a: a[idx]  # noqa: E731
    elif kind == "slice":
        f = lambda a: a[::-1, ...][..., 1:]  # noqa: E731
    elif kind == "transpose":
        f = lambda a: np.transpose(a * 1.0)  # noqa: E731  (1-D: no row of its own)
    else:
        f = lambda a: np.broadcast_to(a, (2,) + shape) * 1.0  # noqa: E731
    check_jvp(f, [x], (0,), rng)


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=4), seed=SEEDS,
       which=st.sampled_from([(0, 1), (0,), (1,)]))
def test_scatter_jvp(shape, seed, which):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, shape)
    # repeated positions: the last write wins, as in NumPy
    pos = rng.integers(0, shape[0], size=4)
    v = rng.uniform(-3, 3, (4,) + shape[1:])

    def f(a, b):
        y = a * 1.0
        if isinstance(b, tape.Tensor) and not isinstance(y, tape.Tensor):
            y = tape.tensor(y)  # a constant target written with a tensor
        y[pos] = b
        return y

    check_jvp(f, [x, v], which, rng, code=OPCODE["scatter"])


@st.composite
def matmul_case(draw):
    m, k, n = (draw(st.integers(1, 3)) for _ in range(3))
    ba = draw(st.sampled_from([(), (2,), (1,), (2, 2)]))
    bb = draw(st.sampled_from([(), (2,), (1,), (2, 1)]))
    vec_a = draw(st.booleans()) and not ba
    vec_b = draw(st.booleans()) and not bb
    sa = (k,) if vec_a else ba + (m, k)
    sb = (k,) if vec_b else bb + (k, n)
    which = draw(st.sampled_from([(0, 1), (0,), (1,)]))
    return sa, sb, which


@SETTINGS
@given(case=matmul_case(), seed=SEEDS)
def test_matmul_jvp(case, seed):
    sa, sb, which = case
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(-2, 2, sa), rng.uniform(-2, 2, sb)
    check_jvp(lambda x, y: x @ y, [a, b], which, rng, code=OPCODE["matmul"])


CASES = {"where": test_where_jvp, "sum": test_reduce_jvp, "prod": test_reduce_jvp,
         "amax": test_reduce_jvp, "amin": test_reduce_jvp, "cumsum": test_scan_jvp,
         "cumprod": test_scan_jvp, "gather": test_gather_jvp, "scatter": test_scatter_jvp,
         "matmul": test_matmul_jvp}


# ---------------------------------------------------------------------------------------------
# Conventions at non-differentiable points: the tangent is the transpose of the reverse rule


@pytest.mark.parametrize("fn", [np.maximum, np.minimum, np.fmax, np.fmin])
def test_elementwise_max_min_ties(fn):
    rng = np.random.default_rng(0)
    a = np.array([1.0, 2.0, -1.0, np.nan, 3.0])
    b = np.array([1.0, 1.0, -1.0, 2.0, np.nan])
    check_jvp(fn, [a, b], (0, 1), rng, fd=False)
    check_jvp(lambda x, y: fn(x * 1.0, y * 1.0), [np.array(3.0), np.array(3.0)], (0, 1), rng,
              fd=False)


@pytest.mark.parametrize("fname", ["max", "min"])
def test_max_reduction_ties_and_nan(fname):
    fn = getattr(np, fname)
    v = 3.0 if fname == "max" else -3.0
    rng = np.random.default_rng(1)
    _, ty = check_jvp(fn, [np.array([1.0, v, 0.0, v, v])], (0,), rng, fd=False)
    rec = Recorded(fn, [np.array([1.0, v, 0.0, v, v])], (0,))
    u = np.zeros((1, 5))
    u[0, 1] = 3.0
    assert rec.jvp([u], 1)[0] == 1.0  # the mean of the tied tangents (0-d output)
    x = np.array([[v, v, 0.0], [v, 0.0, 0.0]])
    check_jvp(lambda a: fn(a, axis=0), [x], (0,), rng, fd=False)
    check_jvp(fn, [np.array([1.0, np.nan, 5.0])], (0,), rng, fd=False)


def test_prod_and_cumprod_with_zeros():
    rng = np.random.default_rng(2)
    for x in ([2.0, 0.0, 3.0], [2.0, 0.0, 0.0, 5.0], [[0.0, 4.0], [2.0, 3.0]],
              [1.5, 0.0, 2.0, 0.0, 3.0], [0.0, 2.0, 3.0]):
        x = np.array(x)
        check_jvp(np.prod, [x], (0,), rng, fd=False)
        check_jvp(lambda a: np.prod(a, axis=-1), [x], (0,), rng, fd=False)
        # cumprod is a polynomial: FD holds at zeros too
        check_jvp(lambda a: np.cumprod(a, axis=-1), [x], (0,), rng)


def test_chain_through_several_families():
    """A small program mixing families, 0-d and array rows, broadcasting and constants."""
    rng = np.random.default_rng(3)

    def f(a, s):
        b = np.tanh(a) * s + np.exp(-a[:, ::-1])
        c = np.max(b, axis=1, keepdims=True) - np.cumsum(b * b, axis=0)
        d = np.where(c > 0.1, c, 2.0 * c) @ np.ones((3, 2))
        return np.sum(np.sin(d)) * s + s * s

    check_jvp(f, [rng.uniform(-1, 1, (4, 3)), np.array(0.7)], (0, 1), rng)


def test_escape_rows_are_skipped_and_segments_compose():
    """The sweep leaves escape rows to the driver: sweeping up to the escape, running its JVP in
    NumPy on the (k, *shape) tangent blocks, then sweeping on gives the full tangent."""
    rng = np.random.default_rng(5)
    a, b = rng.uniform(-1, 1, (20, 30)), rng.uniform(-1, 1, (30, 40))  # above BLAS_FLOPS

    def f(x, y):
        return np.sum(np.sin(np.tanh(x) @ y))

    rec = Recorded(f, [a, b], (0, 1))
    A, t = rec.A, rec.t
    (c,) = [s for s in t.escapes if rec.act[s]]
    assert TABLE[A.code[c]].name == "matmul_blas"
    n = len(A.sv)
    us = [rng.standard_normal((K,) + x.shape) for x in (a, b)]
    TO = np.full(n, -1, np.int64)
    live = np.flatnonzero(rec.live)
    sizes = A.size[live] * K
    TO[live] = np.cumsum(sizes) - sizes
    T = np.full(int(sizes.sum()), np.nan)
    for s, u in zip(rec.slots, us):
        T[TO[s]:TO[s] + K * A.size[s]] = u.reshape(-1)

    def block(s, shape):
        return T[TO[s]:TO[s] + K * A.size[s]].reshape((K,) + tuple(shape))

    args = (A.R, A.S, A.VA, TO, A.sv, T, A.IA, A.FA, rec.act, K)
    jit.tangent_sweep(*args, 0, n)  # over the escape: its block stays unwritten
    assert np.isnan(block(c, t.escapes[c][2])).all()
    jit.tangent_sweep(*args, 0, c)
    sa, sb = A.R[c, 1], A.R[c, 2]
    sha, shb, shy, _ = t.escapes[c]
    x, y = np.reshape(t.value(sa), sha), np.reshape(t.value(sb), shb)
    block(c, shy)[...] = block(sa, sha) @ y + x @ block(sb, shb)  # d(XY) = dX Y + X dY
    mid = (c + 1 + n) // 2  # two segments after the escape compose like one
    jit.tangent_sweep(*args, c + 1, mid)
    jit.tangent_sweep(*args, mid, n)
    ty = block(rec.y._slot, ())
    for j in range(2):
        np.testing.assert_allclose(ty[j], fd_jvp(f, [a, b], (0, 1), [us[0][j], us[1][j]]),
                                   rtol=1e-6)
    ga, gb = rec.vjp(np.array(1.0))
    np.testing.assert_allclose(ty, np.einsum("kij,ij->k", us[0], ga)
                               + np.einsum("kij,ij->k", us[1], gb), rtol=1e-10)


# ---------------------------------------------------------------------------------------------
# The generated module


def test_tangent_module_is_fresh():
    with open(_generate_tangent.OUT) as fh:
        assert fh.read() == _generate_tangent.render(), \
            "jit/_tangent.py is stale: python -m jit._generate_tangent"
    from jit import _tangent

    assert _tangent.TABLE_HASH == jit.table_hash()


def test_tangent_sweep_has_exactly_one_signature():
    from numba.core.sigutils import normalize_signature

    if numba.config.DISABLE_JIT:
        pytest.skip("NUMBA_DISABLE_JIT=1: no signatures")
    from jit import _tangent

    rng = np.random.default_rng(4)
    check_jvp(lambda a, s: np.sum(np.exp(a) * s) + s * s, [rng.uniform(-1, 1, (2, 3)),
                                                             np.array(0.5)], (0, 1), rng)
    fn = _tangent.tangent_sweep
    assert len(fn.signatures) == 1, fn.signatures
    args, _ = normalize_signature(_tangent.SIG_TANGENT_SWEEP)
    fn.compile(tuple(args))  # the declared signature is the one already compiled: no new one
    assert len(fn.signatures) == 1, fn.signatures
