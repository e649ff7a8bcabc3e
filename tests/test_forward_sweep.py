"""The forward value sweep (``jit.forward_sweep``, part of ``jit._interp``), row by row over the primitive table.

A function is recorded once with leaves; new input values are then written into the leaves'
buffers and the sweep recomputes every row in place. Each row's value is compared with a fresh
eager recording at the new inputs (same code, same tape layout): bit for bit, except where the
arithmetic differs on purpose (documented in ``jit/_generate_forward.py`` and above ``ULPS``
below). Shapes come from hypothesis (0-d, size-1, empty, broadcasting) as in test_table.py.
Escape rows are left alone by the sweep; a small driver computes them with NumPy between
segments.

This file also runs with ``NUMBA_DISABLE_JIT=1``: keep sizes small there.
"""
from __future__ import annotations

import os
import sys
import warnings

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tape
from jit import _generate, _generate_forward
from jit.families import family_modules
from jit._interp import SIG_SWEEP, TABLE_HASH, forward_sweep, sweep
from jit.table import OPCODE, OWN_VALUE, TABLE, table_hash
from tape.transforms.functional import _FreshTape
from tape.core.scalar_rules import SCALAR

from test_function import Cube
from test_table import BINARY_DOMAIN, SPECIALS, UNARY_DOMAIN, _distinct, shape_and_axis

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "asv_bench", "benchmarks"))
import workloads  # noqa: E402

NOJIT = bool(numba.config.DISABLE_JIT)
SETTINGS = settings(max_examples=15, deadline=None, derandomize=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)
BSHAPES = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=0,
                                            max_side=3)
SEEDS = st.integers(0, 2 ** 32 - 1)

# (the scipy.special rows, which have no NumPy ufunc: tests/test_special.py)
UNARY = [p for p in TABLE if p.family == "unary" and p.ufunc is not None]
BINARY = [p for p in TABLE if p.family == "binary" and p.ufunc is not None]
OTHER = [p for p in TABLE if p.family not in ("input", "escape", "unary", "binary")]

# Where the sweep and the eager value may differ, with operands equal bit for bit. Under the JIT
# no elementwise row does, on any CPU: eager computes the array rows of the primitives whose NumPy
# loops differ by CPU (jit.table.OWN_VALUE) with the sweep's own loops (jit.elementwise), its 0-d
# values with the same formulas through the same libm, and NumPy's value for the others is exact
# by IEEE 754 (jit.table.NUMPY_EXACT). tests/test_accuracy.py checks those loops against exact
# values. Without the JIT the kernels call NumPy's scalar functions where they call libm under
# it, so the eager 0-d path (Python's math, libm) may differ from them by a few ulps
# (``NOJIT_ULPS``). Other families:
# - sum: NumPy's order is reproduced (pairwise for a contiguous reduced run, in order otherwise),
#   so sums agree bit for bit unless the reduced axes are not adjacent (then the recorder
#   transposes first and the grouping differs): |error| <= 1e-14 * sum(|x|) per output.
# - amax / amin: the sweep reduces in order (a later tie wins, as NumPy's scalar loop); NumPy's
#   SIMD reductions combine lanes, so among +0.0 / -0.0 ties the sign of the zero it returns can
#   differ. Every other value is bit for bit.
# - matmul: NumPy calls BLAS (other order, maybe FMA): |error| <= 1e-13 |y| + 1e-14 K max|a| max|b|.
# - escape rows: computed by the test driver with NumPy on the recorded shapes (same bound).
NOJIT_ULPS = {TABLE[c].name: 8 for c in OWN_VALUE} if NOJIT else {}
ULPS = NOJIT_ULPS
SCALAR_PATH_ULPS = NOJIT_ULPS


def _ids(rows):
    return [p.name for p in rows]


# ---------------------------------------------------------------------------------------------
# Recording, writing new inputs, sweeping, and comparing row by row


def _record(f, args, wrt):
    """f on a fresh tape with leaves at the indices in `wrt` (NumPy constants elsewhere)."""
    xs = [tape.tensor(a, requires_grad=True) if i in wrt else (a if a.ndim else float(a))
          for i, a in enumerate(args)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with _FreshTape():
            y = f(*xs)
    return xs, y


class Replay:
    """f recorded once at `args`; `run(new)` writes new leaf values and sweeps the tape."""

    def __init__(self, f, args, wrt):
        self.f = f
        self.args = [np.array(a, dtype=np.float64) for a in args]
        self.wrt = tuple(wrt)
        self.xs, self.y = _record(f, self.args, self.wrt)
        assert isinstance(self.y, tape.Tensor) and self.y._tape is not None, "nothing recorded"
        self.t = self.y._tape
        self.A = self.t.build()
        self.n = len(self.A.sv)
        leaf_slot = {id(leaf): s for s, (leaf, _) in self.t.leaves.items()}
        self.slots = {i: leaf_slot.get(id(self.xs[i])) for i in self.wrt}

    def write_inputs(self, new):
        """Write new values of the leaves into the buffers the tape reads."""
        A = self.A
        for i in self.wrt:
            s = self.slots[i]
            if s is None:  # the leaf is not read by any row
                continue
            v = np.asarray(new[i], dtype=np.float64)
            if A.is_array[s]:
                buf = self.t.av[A.R[s, 3]]
                assert buf is self.xs[i]._v  # a leaf row references the leaf's own buffer
                buf[...] = v
            else:  # a 0-d leaf enters the tape as a Python float, collected into sv
                A.sv[s] = float(v)

    def sweep(self, lo=0, hi=None):
        A = self.A
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            forward_sweep(A.R, A.S, A.VA, A.sv, A.IA, A.FA, lo, self.n if hi is None else hi)

    def run(self, new):
        self.write_inputs(new)
        self.sweep()

    def value(self, s):
        return np.asarray(self.t.value(s), dtype=np.float64)

    def fresh(self, new):
        """The eager recording at the new inputs (constants unchanged)."""
        args = [np.array(new[i] if i in self.wrt else a, dtype=np.float64)
                for i, a in enumerate(self.args)]
        other = Replay.__new__(Replay)
        other.f, other.args, other.wrt = self.f, args, self.wrt
        other.xs, other.y = _record(self.f, args, self.wrt)
        other.t = other.y._tape
        other.A = other.t.build()
        other.n = len(other.A.sv)
        return other


def ulps(got, want):
    """Elementwise distance in units in the last place (+0.0 and -0.0 are 1 apart; NaN == NaN
    whatever its sign and payload; NaN vs a number is infinitely far)."""
    got = np.asarray(got, dtype=np.float64).reshape(-1)
    want = np.asarray(want, dtype=np.float64).reshape(-1)
    assert got.shape == want.shape

    def key(x):  # the floats in order as int64: ..., -0.0 -> -1, +0.0 -> 0, ...
        b = np.ascontiguousarray(x).view(np.int64)
        return np.where(b < 0, -(b & np.int64(0x7FFFFFFFFFFFFFFF)) - 1, b)

    kg, kw = key(got), key(want)
    same = (kg < 0) == (kw < 0)  # exact in int64; across zero, far apart anyway
    d = np.where(same, np.abs(np.where(same, kg - kw, 0)).astype(np.float64),
                 np.abs(kg.astype(np.float64)) + np.abs(kw.astype(np.float64)))
    gn, wn = np.isnan(got), np.isnan(want)
    d[gn & wn] = 0.0
    d[gn != wn] = np.inf
    return d


def _group_abs_sum(x, P, R, Q):
    return np.abs(x).reshape(P, R, Q).sum(axis=1).reshape(-1)


def check_rows(rec, new, ulp=None):
    """Sweep `rec` at the new inputs and compare every row with a fresh eager recording.

    A row whose operands came out bit for bit equal must match within its primitive's documented
    tolerance (bit for bit for most); a row downstream of a tolerated difference is compared
    loosely. Returns the number of rows compared bit for bit."""
    rec.run(new)
    ref = rec.fresh(new)
    A = rec.A
    assert np.array_equal(A.R, ref.A.R), "the two recordings differ in layout"
    exact = np.zeros(rec.n, bool)
    for s in range(rec.n):
        code = int(A.code[s])
        p = TABLE[code]
        got, want = rec.value(s), ref.value(s)
        assert got.shape == want.shape, (p.name, s, got.shape, want.shape)
        d = ulps(got, want)
        exact[s] = not d.size or d.max() == 0
        if exact[s]:
            continue
        ops = [int(o) for o in A.R[s, 1:3] if o >= 0]
        where = f"row {s} ({p.name}, shape {want.shape}): got {got.reshape(-1)[:6]}, want " \
            f"{want.reshape(-1)[:6]}, max {d.max()} ulp"
        assert p.family != "input", where
        operands = [rec.value(o) for o in ops]
        if not all(exact[o] for o in ops):  # a tolerated difference upstream
            scale = max([np.max(np.abs(v), initial=0.0) for v in operands + [want]] +
                        [1e-300])
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11 * scale,
                                       equal_nan=True, err_msg=where)
            continue
        allowed = (ulp or {}).get(p.name, ULPS.get(p.name, 0))
        if p.name == "sum":
            iat = A.S[A.R[s, 3], 1]
            P, Rr, Q = (int(v) for v in A.IA[iat:iat + 3])
            bound = 1e-14 * _group_abs_sum(operands[0], P, Rr, Q)
            err = np.abs(got.reshape(-1) - want.reshape(-1))
            assert np.all((err <= bound) | (d == 0)), where
        elif p.name in ("amax", "amin"):  # only the sign of a zero chosen among +-0 ties
            zero = (got.reshape(-1) == 0.0) & (want.reshape(-1) == 0.0)
            assert np.all((d == 0) | zero), where
        elif p.name == "matmul" or p.family == "escape":
            scale = np.max(np.abs(want), initial=0.0) + np.prod(
                [np.max(np.abs(v), initial=0.0) for v in operands]) * max(
                1, max(v.shape[-1] if v.ndim else 1 for v in operands))
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14 * scale,
                                       equal_nan=True, err_msg=where)
        else:
            assert d.max() <= allowed, where
    np.testing.assert_allclose(rec.value(rec.y._slot), ref.value(ref.y._slot), rtol=1e-12,
                               atol=1e-300, equal_nan=True)
    return int(exact.sum())


# ---------------------------------------------------------------------------------------------
# The generated file and its entry point


def test_generated_module_is_fresh():
    with open(_generate.OUT) as fh:
        assert fh.read() == _generate.render(), "jit/_interp.py is stale: python -m jit._generate"
    assert TABLE_HASH == table_hash()


def test_every_swept_row_has_a_body():
    src = _generate_forward.render_forward()
    for code, p in enumerate(TABLE):
        if p.family in ("input", "escape"):
            assert f"op == {code}:" not in src, p.name  # never swept
        else:
            assert f"op == {code}:  # {p.name}" in src, p.name
    modules = family_modules()  # each other row has its own forward body in its family's module
    assert all(p.name in modules[p.family].KERNELS["forward"] for p in OTHER)


def test_entry_point_has_exactly_one_signature():
    """The forward sweep is ``sweep`` with an empty reverse range: one entry point, one
    signature, whichever range a call uses."""
    if NOJIT:
        pytest.skip("NUMBA_DISABLE_JIT=1: no signatures")
    from numba.core.sigutils import normalize_signature

    import jit

    rec = Replay(lambda x, s: np.exp(x[1:]) * s + (x @ x) + s * s, [np.arange(3.0), 2.0], (0, 1))
    rec.run([np.ones(3), 3.0])
    assert jit.forward_sweep is forward_sweep and jit.sweep is sweep
    assert len(sweep.signatures) == 1, sweep.signatures
    args, _ = normalize_signature(SIG_SWEEP)
    sweep.compile(tuple(args))  # the declared signature is the one already compiled
    assert len(sweep.signatures) == 1, sweep.signatures


# ---------------------------------------------------------------------------------------------
# Elementwise rows: generated from the table's formulas


@pytest.mark.parametrize("p", UNARY, ids=_ids(UNARY))
@SETTINGS
@given(shape=SHAPES, seed=SEEDS)
def test_unary(p, shape, seed):
    rng = np.random.default_rng(seed)
    dom = UNARY_DOMAIN[p.name]
    rec = Replay(lambda a: p.ufunc(a), [dom(rng, shape)], (0,))
    check_rows(rec, [dom(rng, shape)])


@pytest.mark.parametrize("p", UNARY, ids=_ids(UNARY))
@SETTINGS
@given(seed=SEEDS)
def test_unary_scalar_path(p, seed):
    """0-d values are Python floats: the row has no side row and takes the inline path."""
    rng = np.random.default_rng(seed)
    dom = UNARY_DOMAIN[p.name]
    rec = Replay(lambda a: p.ufunc(a * 1.0), [dom(rng, ())], (0,))
    assert rec.A.R[rec.y._slot, 3] < 0
    # the eager 0-d path runs the same formula: bit for bit under the JIT (NumPy's scalar
    # functions stand in for libm without it)
    check_rows(rec, [dom(rng, ())], ulp=SCALAR_PATH_ULPS)


@pytest.mark.parametrize("p", [p for p in UNARY if not p.vf], ids=_ids([p for p in UNARY
                                                                     if not p.vf]))
def test_unary_formula_same_bits_as_the_eager_0d_path(p):
    """Without a vectorized kernel, a row's array loop and the eager 0-d path (Python floats)
    evaluate one formula: bit for bit on thousands of values, which a handful of hypothesis
    examples would rarely tell apart. (exp2 written as 2.0 ** x differed in ~1 value in 1000:
    LLVM turns pow(2.0, x) into exp2(x), Python calls pow.)"""
    x = UNARY_DOMAIN[p.name](np.random.default_rng(7), (4096,))
    x = np.concatenate([x, [-0.6267464478182703, -4.09728848544903, 1.917000287249011]])
    rec = Replay(lambda a: p.ufunc(a), [x], (0,))
    rec.run([x])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.array([SCALAR[TABLE.index(p)](float(v)) for v in x])
    d = ulps(rec.value(rec.y._slot), want)
    assert d.max() <= SCALAR_PATH_ULPS.get(p.name, 0), (p.name, x[d > 0][:4])


@pytest.mark.parametrize("p", BINARY, ids=_ids(BINARY))
def test_binary_formula_same_bits_as_the_eager_0d_path(p):
    """As above for two operands (the 0-d path calls libm's hypot, not CPython's math.hypot,
    which is its own algorithm, an ulp from libm's)."""
    rng = np.random.default_rng(8)
    da, db = BINARY_DOMAIN[p.name]
    a, b = da(rng, (4096,)), db(rng, (4096,))
    rec = Replay(lambda u, v: p.ufunc(u, v), [a, b], (0, 1))
    rec.run([a, b])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.array([SCALAR[TABLE.index(p)](float(u), float(v)) for u, v in zip(a, b)])
    d = ulps(rec.value(rec.y._slot), want)
    assert d.max() <= ULPS.get(p.name, 0), (p.name, a[d > 0][:4], b[d > 0][:4])


@pytest.mark.parametrize("p", UNARY, ids=_ids(UNARY))
def test_unary_special_values(p):
    x0 = UNARY_DOMAIN[p.name](np.random.default_rng(0), (len(SPECIALS),))
    rec = Replay(lambda a: p.ufunc(a), [x0], (0,))
    check_rows(rec, [np.array(SPECIALS)])
    for v in SPECIALS:  # the 0-d path
        rec = Replay(lambda a: p.ufunc(a * 1.0), [x0[0]], (0,))
        check_rows(rec, [v], ulp=SCALAR_PATH_ULPS)


@pytest.mark.parametrize("p", BINARY, ids=_ids(BINARY))
@SETTINGS
@given(shapes=BSHAPES, seed=SEEDS, which=st.sampled_from([(0, 1), (0,), (1,)]))
def test_binary(p, shapes, seed, which):
    rng = np.random.default_rng(seed)
    (sa, sb), _ = shapes
    da, db = BINARY_DOMAIN[p.name]
    rec = Replay(lambda x, y: p.ufunc(x, y), [da(rng, sa), db(rng, sb)], which)
    check_rows(rec, [da(rng, sa), db(rng, sb)])


@pytest.mark.parametrize("p", BINARY, ids=_ids(BINARY))
@SETTINGS
@given(shape=SHAPES, seed=SEEDS)
def test_binary_python_scalar_operand(p, shape, seed):
    """A Python float on either side (a one-element operand read for every element)."""
    rng = np.random.default_rng(seed)
    da, db = BINARY_DOMAIN[p.name]
    s = float(db(rng, ()))
    rec = Replay(lambda x: p.ufunc(x, s), [da(rng, shape)], (0,))
    check_rows(rec, [da(rng, shape)])
    s = float(da(rng, ()))
    rec = Replay(lambda y: p.ufunc(s, y), [db(rng, shape)], (0,))
    check_rows(rec, [db(rng, shape)])


@pytest.mark.parametrize("p", BINARY, ids=_ids(BINARY))
@SETTINGS
@given(seed=SEEDS, which=st.sampled_from([(0, 1), (0,), (1,)]))
def test_binary_scalar_path(p, seed, which):
    rng = np.random.default_rng(seed)
    da, db = BINARY_DOMAIN[p.name]
    rec = Replay(lambda x, y: p.ufunc(x * 1.0, y * 1.0), [da(rng, ()), db(rng, ())], which)
    assert rec.A.R[rec.y._slot, 3] < 0
    check_rows(rec, [da(rng, ()), db(rng, ())])


# power(-inf, b) for b not an integer: NumPy (and the eager 0-d path, which hands a <= 0 to
# np.power) give inf or 0.0, the table's _power formula gives NaN (its negative-base test
# `a < 0.0 and abs(b) < inf and b != int(b)` also catches a == -inf).
POWER_NEG_INF = [(-np.inf, b) for b in SPECIALS
                 if not np.isnan(b) and b != 0.0 and (np.isinf(b) or b != int(b))]


def _binary_special_grid(p):
    a = np.repeat(SPECIALS, len(SPECIALS))
    b = np.tile(SPECIALS, len(SPECIALS))
    if p.name == "power":
        keep = np.array([(x, y) not in POWER_NEG_INF for x, y in zip(a, b)])
        a, b = a[keep], b[keep]
    return a, b


@pytest.mark.parametrize("p", BINARY, ids=_ids(BINARY))
def test_binary_special_values(p):
    a, b = _binary_special_grid(p)
    rng = np.random.default_rng(0)
    da, db = BINARY_DOMAIN[p.name]
    rec = Replay(lambda x, y: p.ufunc(x, y), [da(rng, a.shape), db(rng, b.shape)], (0, 1))
    if p.name in ("fmax", "fmin"):
        # a +0.0 / -0.0 tie: NumPy's loops differ among themselves (its SIMD ones return the
        # second operand, its scalar one the first); ours return the first, in eager as in replay
        rec.run([a, b])
        got = rec.value(rec.y._slot)
        d = ulps(got, p.ufunc(a, b))
        ties = (a == 0.0) & (b == 0.0) & (np.signbit(a) != np.signbit(b))
        assert np.all(d[~ties] == 0) and np.array_equal(np.signbit(got[ties]), np.signbit(a[ties]))
    check_rows(rec, [a, b])
    for x, y in zip(a, b):  # the 0-d path
        rec = Replay(lambda u, v: p.ufunc(u * 1.0, v * 1.0), [1.5, 0.5], (0, 1))
        check_rows(rec, [x, y])


def test_power_of_minus_inf():
    """-inf to a non-integer power follows C's pow (inf or 0; 0.5 is sqrt: NaN), as NumPy's
    array loop does, in 0-d rows too (NumPy's float64 *scalar* power gives NaN there)."""
    a = np.array([x for x, _ in POWER_NEG_INF])
    b = np.array([y for _, y in POWER_NEG_INF])
    check_rows(Replay(np.power, [np.ones(a.shape), np.ones(b.shape)], (0, 1)), [a, b])
    for x, y in zip(a, b):
        check_rows(Replay(lambda u, v: np.power(u * 1.0, v * 1.0), [1.5, 0.5], (0, 1)), [x, y])


POWER_BASES = np.concatenate([
    SPECIALS, [-4.0, -1.0, 1e-310, -1e-310, 3.0, 0.1],
    np.random.default_rng(11).normal(size=4096) * np.random.default_rng(12).uniform(0, 1e3, 4096)])


@pytest.mark.parametrize("e", [2.0, 0.5, -1.0, 1.0, 0.0, -0.0, 3.0, -0.5, 1.5])
def test_power_scalar_exponent(e):
    """x ** e for e in 2, 0.5, -1, 1, 0 is x * x, sqrt(x), 1 / x, x and 1 at every element (as
    NumPy's loop for a scalar exponent computes it: exact, so bit for bit with NumPy on any CPU,
    NaN and signed zeros included), whether the exponent is one element or varies along lines;
    other exponents call libm's pow, within 1 ulp of the exact value (not of NumPy's loop, which
    is SVML's pow on AVX-512 machines)."""
    a = POWER_BASES
    a2 = a[:4096].reshape(64, 64)
    col = np.where(np.arange(64) % 2 == 0, e, 3.0).reshape(64, 1)
    with np.errstate(all="ignore"):
        for base, exponent in ((a, e), (a2, np.full((1, 1), e)), (a2.T, np.full(1, e)),
                               (a2, col)):
            rec = Replay(lambda x, b: np.power(x, b), [np.ones(base.shape),
                                                       np.full(np.shape(exponent), 2.5)], (0, 1))
            rec.run([base, exponent])
            got = rec.value(rec.y._slot)
            ex = np.broadcast_to(exponent, base.shape).reshape(-1)
            b = base.reshape(-1)
            for v in np.unique(ex):
                at = ex == v
                if v in (2.0, 0.5, -1.0, 1.0, 0.0):
                    assert ulps(got.reshape(-1)[at], np.power(b[at], v)).max() == 0, v
                else:
                    exact = np.power(b[at].astype(np.longdouble), v)
                    mine = got.reshape(-1)[at]
                    ok = np.isfinite(exact.astype(np.float64)) & (exact != 0) & np.isfinite(mine)
                    err = np.abs(mine[ok] - exact[ok]) / np.spacing(
                        np.abs(exact[ok]).astype(np.float64))
                    assert err.max() <= 1.0, v


def test_power_derivative_fast_exponents_same_bits():
    """_pow_da's branches for b == 2 and b == 1 give the general formula's bits (pow(a, 1) is a,
    pow(a, 0) is 1), so eager and replayed gradients do not depend on them."""
    from jit import _interp

    for b in (2.0, 1.0):
        with np.errstate(all="ignore"):  # (NumPy's array loop would take its own fast paths)
            want = [b * np.power(np.float64(a), np.float64(b - 1.0)) for a in POWER_BASES]
        got = [_interp._pow_da(float(a), b) for a in POWER_BASES]
        assert np.all(ulps(got, want) == 0), b


@pytest.mark.parametrize("fn", [np.maximum, np.minimum, np.fmax, np.fmin])
def test_max_min_ties_signed_zeros_and_nan(fn):
    a = np.array([1.0, 0.0, -0.0, 0.0, np.nan, 2.0, np.nan, -np.inf])
    b = np.array([1.0, -0.0, 0.0, 0.0, 2.0, np.nan, np.nan, -np.inf])
    rec = Replay(fn, [np.arange(8.0), np.arange(8.0) + 0.5], (0, 1))
    if fn in (np.fmax, np.fmin):
        # NumPy's SIMD fmax/fmin return the second operand on a +0.0/-0.0 tie, its 0-d loop
        # and the table's formula the first: only that tie differs (a sign of zero)
        rec.run([a, b])
        ref = np.asarray(fn(a, b))
        d = ulps(rec.value(rec.y._slot), ref)
        assert set(np.flatnonzero(d)) <= {1, 2}, d
        assert d.max() <= 1
        keep = np.array([0, 3, 4, 5, 6, 7])
        rec = Replay(fn, [np.arange(6.0), np.arange(6.0) + 0.5], (0, 1))
        a, b = a[keep], b[keep]
    check_rows(rec, [a, b])
    for x, y in zip(a, b):
        check_rows(Replay(lambda u, v: fn(u * 1.0, v * 1.0), [1.0, 2.0], (0, 1)), [x, y])


# ---------------------------------------------------------------------------------------------
# Other families: one case per row name (a new row fails test_every_row_has_a_case)


def _signed(rng, shape):
    return rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)


@pytest.mark.parametrize("p", OTHER, ids=_ids(OTHER))
def test_every_row_has_a_case(p):
    assert p.name in CASES, f"add a forward-sweep test case for row {p.name!r}"


@st.composite
def where_case(draw):
    (sa, sb, sm), _ = draw(hnp.mutually_broadcastable_shapes(
        num_shapes=3, min_dims=0, max_dims=3, min_side=0, max_side=3))
    which = draw(st.sampled_from([(0, 1), (0,), (1,)]))
    return sa, sb, sm, which


@SETTINGS
@given(case=where_case(), seed=SEEDS)
def test_where(case, seed):
    sa, sb, sm, which = case
    rng = np.random.default_rng(seed)
    mask = rng.random(sm) < 0.5
    rec = Replay(lambda x, y: np.where(mask, x, y), [rng.uniform(-3, 3, sa),
                                                     rng.uniform(-3, 3, sb)], which)
    if rec.y._tape is not None:
        check_rows(rec, [rng.uniform(-3, 3, sa), rng.uniform(-3, 3, sb)])


REDUCE_FUNCS = {"sum": np.sum, "prod": np.prod, "amax": np.max, "amin": np.min}


def _reduce_input(name, rng, shape):
    if name == "prod":
        return _signed(rng, shape)
    if name in ("amax", "amin"):  # with ties and signed zeros
        return rng.choice([-1.0, -0.0, 0.0, 0.5, 2.0], shape)
    return rng.uniform(-3, 3, shape)


@pytest.mark.parametrize("name", sorted(REDUCE_FUNCS))
@SETTINGS
@given(sa=shape_and_axis(), keepdims=st.booleans(), seed=SEEDS)
def test_reduce(name, sa, keepdims, seed):
    shape, axis = sa
    rng = np.random.default_rng(seed)
    fn = REDUCE_FUNCS[name]
    x = _distinct(rng, shape) if name != "prod" else _signed(rng, shape)
    if name in ("amax", "amin") and x.size == 0:
        return  # NumPy raises (a zero-size reduction has no identity)
    rec = Replay(lambda a: fn(a * 1.0, axis=axis, keepdims=keepdims), [x], (0,))
    check_rows(rec, [_reduce_input(name, rng, shape)])


@pytest.mark.parametrize("name", sorted(REDUCE_FUNCS))
@pytest.mark.parametrize("axis", [None, 0, 1, 2, (1, 2), (0, 1), (0, 2)])
def test_reduce_every_axis(name, axis):
    """Each (P, R, Q) case: Q == 1 (trailing axes), P == 1, both > 1, non-adjacent axes."""
    rng = np.random.default_rng(6)
    shape = (3, 4, 2)
    x = _signed(rng, shape)
    rec = Replay(lambda a: REDUCE_FUNCS[name](a, axis=axis), [x], (0,))
    check_rows(rec, [_reduce_input(name, rng, shape)])


@pytest.mark.parametrize("shape, axis", [((300,), None), ((7, 130), 1), ((2, 9, 129), (1, 2)),
                                         ((1000,), 0), ((3, 17), None), ((200, 3), 0),
                                         ((5, 64, 3), 1), ((4, 3, 5), (0, 1))])
def test_sum_order_is_numpys(shape, axis):
    """Contiguous reduced runs are summed pairwise (blocks of 8 up to 128, halves above) and
    strided ones in order, as NumPy does: bit for bit, across the block-size thresholds."""
    if NOJIT and np.prod(shape) > 400:
        shape = shape[:-1] + (5,)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 6, shape)
    rec = Replay(lambda a: np.sum(a, axis=axis), [x], (0,))
    rec.run([x[::-1].copy() if x.ndim == 1 else -x])
    want = np.sum(x[::-1] if x.ndim == 1 else -x, axis=axis)
    assert ulps(rec.value(rec.y._slot), want).max() == 0


def test_max_min_of_signed_zero_ties():
    rng = np.random.default_rng(11)
    for n in (3, 9, 40):
        x = rng.choice([-0.0, 0.0, -1.0], (n, 4))
        for fn in (np.max, np.min):
            for axis in (0, 1, None):
                rec = Replay(lambda a: fn(a, axis=axis), [np.ones(x.shape)], (0,))
                rec.run([x])
                got, want = rec.value(rec.y._slot), fn(x, axis=axis)
                np.testing.assert_array_equal(got, want)  # equal values (+0.0 == -0.0)
                # the sign of a zero picked among ties is the last tie's (NumPy's loops differ
                # among themselves there: its SIMD ones combine lanes)
                lines = np.moveaxis(x, axis, -1) if axis is not None else x.reshape(1, -1)
                last = np.array([line[line == v][-1] for line, v in
                                 zip(lines.reshape(-1, lines.shape[-1]), got.reshape(-1))])
                assert np.array_equal(np.signbit(got.reshape(-1)), np.signbit(last))


def test_reduce_special_values():
    x = np.array([[1.0, np.nan, 3.0], [np.inf, -np.inf, 0.0], [-0.0, -0.0, -0.0],
                  [0.0, -0.0, 0.0], [-0.0, 0.0, -0.0], [np.inf, 1.0, np.inf], [2.0, 0.0, np.inf]])
    for name, fn in REDUCE_FUNCS.items():
        for axis in (0, 1, None):
            rec = Replay(lambda a: fn(a, axis=axis), [np.ones_like(x)], (0,))
            check_rows(rec, [x])
    for name in ("cumsum", "cumprod"):
        for axis in (0, 1):
            rec = Replay(lambda a: getattr(np, name)(a, axis=axis), [np.ones_like(x)], (0,))
            check_rows(rec, [x])


def test_empty_reductions():
    for fn in (np.sum, np.prod):
        rec = Replay(lambda a: fn(a, axis=0), [np.zeros((0, 3))], (0,))
        rec.A.sv[rec.y._slot] = np.nan
        rec.y._v[...] = np.nan
        check_rows(rec, [np.zeros((0, 3))])
        assert np.all(rec.value(rec.y._slot) == (0.0 if fn is np.sum else 1.0))
    rec = Replay(lambda a: np.sum(a * 2.0), [np.zeros((2, 0))], (0,))
    check_rows(rec, [np.zeros((2, 0))])


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@SETTINGS
@given(sa=shape_and_axis(tuples=False), seed=SEEDS)
def test_scan(name, sa, seed):
    shape, axis = sa
    rng = np.random.default_rng(seed)
    fn = getattr(np, name)
    rec = Replay(lambda a: fn(a * 1.0, axis=axis), [_signed(rng, shape)], (0,))
    if rec.y._tape is not None:
        check_rows(rec, [_signed(rng, shape)])


@st.composite
def gather_case(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3))
    kind = draw(st.sampled_from(["int", "slice", "transpose", "broadcast", "mask", "scalar",
                                 "reshape"]))
    return shape, kind


@SETTINGS
@given(case=gather_case(), seed=SEEDS)
def test_gather(case, seed):
    shape, kind = case
    rng = np.random.default_rng(seed)
    if kind == "int":  # repeated positions
        idx = rng.integers(0, shape[0], size=5)
        f = lambda a: a[idx] * 1.0  # noqa: E731
    elif kind == "slice":
        f = lambda a: a[::-1, ...][..., 1:] * 1.0  # noqa: E731
    elif kind == "transpose":
        f = lambda a: np.transpose(a * 1.0)  # noqa: E731
    elif kind == "broadcast":
        f = lambda a: np.broadcast_to(a, (2,) + shape) * 1.0  # noqa: E731
    elif kind == "mask":
        mask = rng.random(shape) < 0.5
        f = lambda a: a[mask] * 1.0  # noqa: E731
    elif kind == "scalar":  # a 0-d gather: its value lives in sv
        f = lambda a: a[(0,) * len(shape)] * 2.0 + a.reshape(-1)[-1]  # noqa: E731
    else:  # a reshape of a non-leaf is a copy row whose value views its operand's buffer
        f = lambda a: (a * 1.0).reshape(-1)[::-1] + 1.0  # noqa: E731
    rec = Replay(f, [rng.uniform(-3, 3, shape)], (0,))
    check_rows(rec, [rng.uniform(-3, 3, shape)])


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=4), seed=SEEDS,
       which=st.sampled_from([(0, 1), (0,), (1,)]), scalar_value=st.booleans())
def test_scatter(shape, seed, which, scalar_value):
    rng = np.random.default_rng(seed)
    pos = rng.integers(0, shape[0], size=4)  # repeated positions: the last write wins
    vshape = () if scalar_value else (4,) + shape[1:]

    def f(a, b):
        y = a * 1.0
        if isinstance(b, tape.Tensor) and not isinstance(y, tape.Tensor):
            y = tape.tensor(y)  # a constant target written with a tensor
        y[pos] = b
        return y * 1.0

    rec = Replay(f, [rng.uniform(-3, 3, shape), rng.uniform(-3, 3, vshape)], which)
    check_rows(rec, [rng.uniform(-3, 3, shape), rng.uniform(-3, 3, vshape)])


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
def test_matmul(case, seed):
    sa, sb, which = case
    rng = np.random.default_rng(seed)
    rec = Replay(lambda x, y: x @ y, [rng.uniform(-2, 2, sa), rng.uniform(-2, 2, sb)], which)
    assert OPCODE["matmul"] in set(rec.A.code.tolist())
    check_rows(rec, [rng.uniform(-2, 2, sa), rng.uniform(-2, 2, sb)])


CASES = {"where": test_where, "sum": test_reduce, "prod": test_reduce, "amax": test_reduce,
         "amin": test_reduce, "cumsum": test_scan, "cumprod": test_scan, "gather": test_gather,
         "scatter": test_scatter, "matmul": test_matmul}


# ---------------------------------------------------------------------------------------------
# Chains, ranges, in-place writes


def _chain(x, w, s):
    """Every swept family, 0-d and array rows, broadcasting, views and item assignment."""
    mask = np.array([[True, False, True], [False, True, True], [True, True, False],
                     [False, False, True]])
    h = np.tanh(x @ w + 0.5)                               # matmul, size-1 operand, unary
    m = np.max(h, axis=1, keepdims=True)                   # reduce
    z = np.exp(h - m)                                      # broadcast through an index map
    p = z / np.sum(z, axis=1, keepdims=True)
    c = np.cumsum(p, axis=0) * np.cumprod(1.0 + 0.1 * p, axis=1)
    q = np.where(mask, c, -c)                              # select
    q[0, :] = s * 2.0                                      # scatter of a 0-d value
    q[[1, 1, 3], 1] = h[:3, 0]                             # repeated positions
    r = q.T.reshape(-1)[::2]                               # gathers and a copy
    u = np.prod(r[:3]) + np.maximum(s, 0.1) ** 2.0 - np.min(q, axis=0)[1]   # 0-d rows
    v = np.hypot(u, s) / (1.0 + np.abs(np.arctan2(s, u)))
    return np.sum(r * r) + v + np.logaddexp(s, u) + np.sum(np.fmin(q, 0.3)) + x[0, 0] ** 3.0


def test_chain_of_every_family():
    rng = np.random.default_rng(3)
    args = [rng.uniform(-1, 1, (4, 2)), rng.uniform(-1, 1, (2, 3)), 0.7]
    rec = Replay(_chain, args, (0, 1, 2))
    codes = {TABLE[c].family for c in set(rec.A.code.tolist())}
    assert codes >= {p.family for p in TABLE} - {"escape"}, codes
    for _ in range(3):  # repeated replays of one recording
        check_rows(rec, [rng.uniform(-1, 1, (4, 2)), rng.uniform(-1, 1, (2, 3)),
                         rng.uniform(-1, 1)])


def test_recorded_values_are_updated_in_place():
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, (3, 2))
    rec = Replay(lambda a: np.sin(a) * 2.0, [x], (0,))
    y = rec.y
    buf = y._v
    rec.run([x + 1.0])
    assert y._v is buf  # the tensor holds the same array, now with the new value
    np.testing.assert_array_equal(y._v, np.sin(x + 1.0) * 2.0)


def test_ranges_compose():
    rng = np.random.default_rng(5)
    args = [rng.uniform(-1, 1, (4, 2)), rng.uniform(-1, 1, (2, 3)), 0.7]
    new = [rng.uniform(-1, 1, (4, 2)), rng.uniform(-1, 1, (2, 3)), 0.2]
    whole = Replay(_chain, args, (0, 1, 2))
    whole.run(new)
    parts = Replay(_chain, args, (0, 1, 2))
    parts.write_inputs(new)
    cuts = [0, 1, 7, parts.n // 2, parts.n - 1, parts.n]
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        parts.sweep(lo, hi)
    parts.sweep(3, 3)  # empty range
    for s in range(whole.n):
        assert ulps(parts.value(s), whole.value(s)).max() == 0


def test_runs_of_0d_rows_are_marked_and_swept_to_their_end():
    """A 0-d row's side column holds -1 - e, e the row after its run of 0-d rows
    (``mark_scalar_runs``), and the sweep's 0-d loop runs to e without testing each row. The
    same rows marked -1 (as files store them) sweep row by row to the same bits, and ranges
    that cut a run compose."""
    rng = np.random.default_rng(8)
    args = [rng.uniform(-1, 1, (4, 2)), rng.uniform(-1, 1, (2, 3)), 0.7]
    new = [rng.uniform(-1, 1, (4, 2)), rng.uniform(-1, 1, (2, 3)), 0.2]
    marked = Replay(_chain, args, (0, 1, 2))
    k = marked.A.R[:, 3]
    runs = 0
    for i in np.nonzero(k < 0)[0]:
        e = -1 - k[i]
        assert i < e <= marked.n and (k[i:e] < 0).all() and (e == marked.n or k[e] >= 0)
        runs += i == 0 or k[i - 1] >= 0
    assert runs >= 2 and (k < 0).sum() > runs  # runs of more than one row, between array rows
    marked.write_inputs(new)
    starts = [int(i) for i in np.nonzero((k < 0) & (np.roll(k, 1) < 0))[0][:3]]  # mid-run
    for lo, hi in zip([0] + starts, starts + [marked.n]):
        marked.sweep(lo, hi)
    plain = Replay(_chain, args, (0, 1, 2))
    plain.A.R[plain.A.R[:, 3] < 0, 3] = -1
    plain.run(new)
    for s in range(marked.n):
        assert ulps(plain.value(s), marked.value(s)).max() == 0


def test_input_rows_are_not_written():
    rng = np.random.default_rng(7)
    c = rng.uniform(-1, 1, (3,))
    rec = Replay(lambda a, k: np.exp(a) + k + 2.5, [rng.uniform(-1, 1, (3,)), c], (0,))
    before = {s: rec.value(s).copy() for s in range(rec.n)
              if TABLE[rec.A.code[s]].family == "input"}
    rec.run([rng.uniform(-1, 1, (3,)), c])
    leaf = rec.slots[0]
    for s, v in before.items():
        if s != leaf:
            assert ulps(rec.value(s), v).max() == 0


@pytest.mark.parametrize("name", ["lorenz", "nbody"])
def test_workloads_bit_for_bit(name, monkeypatch):
    """W1 (0-d rows) and W5 (small arrays, sums over both kinds of axes): every row equal."""
    if NOJIT:
        monkeypatch.setattr(workloads, "LORENZ_STEPS", 20)
        monkeypatch.setattr(workloads, "NBODY_STEPS", 2)
    w = workloads.WORKLOADS[name]
    args = list(w.inputs())
    rng = np.random.default_rng(8)
    new = [a * (1.0 + 0.01 * rng.standard_normal(np.shape(a))) for a in args]
    rec = Replay(w.loss, args, tuple(range(len(args))))
    assert check_rows(rec, new) == rec.n


# ---------------------------------------------------------------------------------------------
# Escape rows: skipped by the sweep, computed by the driver between segments


def escape_value(rec, c):
    """An escape row's value from its operands' current values, in NumPy (the driver's job:
    the escape's own value function, tape/escapes/)."""
    from tape.escapes import ESCAPES, pack

    t, A = rec.t, rec.A
    name = TABLE[A.code[c]].name
    if name not in ESCAPES:
        raise NotImplementedError(name)  # function rows: the user's forward, in Python
    esc = ESCAPES[name]
    sa, sb = int(A.R[c, 1]), int(A.R[c, 2])
    sha, shb, shy, params = t.escapes[c]
    a = np.reshape(rec.value(sa), sha)
    b = np.reshape(rec.value(sb), shb) if sb >= 0 else None
    y = pack(np, esc.value(a, b, **params), esc.outputs(sha, shb, **params))
    return np.reshape(y, shy)


def write_value(rec, c, y):
    A = rec.A
    if A.is_array[c]:
        rec.t.av[A.R[c, 3]][...] = np.reshape(y, rec.t.av[A.R[c, 3]].shape)
    else:
        A.sv[c] = float(y)


def run_with_escapes(rec, new):
    """The compiled-replay driver in miniature: sweep, compute an escape in NumPy, continue."""
    rec.write_inputs(new)
    lo = 0
    for c in sorted(rec.t.escapes):
        rec.sweep(lo, c)
        write_value(rec, c, escape_value(rec, c))
        lo = c + 1
    rec.sweep(lo, rec.n)


def _with_escapes(x, b, M):
    p = x @ M                                              # matmul_blas (above BLAS_FLOPS)
    a = p[:3, :3] + 0.1 * np.tanh(p[3:6, 3:6]) + np.eye(3) * 4.0
    ai = np.linalg.inv(a)
    d = np.linalg.det(a)                                   # 0-d escape value, lives in sv
    sign, logabs = np.linalg.slogdet(a)
    y = np.linalg.solve(a, b)
    return np.sum(ai * ai) + d * logabs + np.sum(np.sin(y)) + np.max(ai @ y)


def test_escape_rows_are_skipped_and_segments_compose():
    rng = np.random.default_rng(9)
    k = 130  # x (6, k) @ M (k, 24): 6 * k * 24 > BLAS_FLOPS, an escape
    args = [rng.uniform(-1, 1, (6, k)) / k, rng.uniform(-1, 1, (3,)),
            rng.uniform(-1, 1, (k, 24))]
    rec = Replay(_with_escapes, args, (0, 1, 2))
    names = {TABLE[rec.A.code[c]].name for c in rec.t.escapes}
    assert names == {"matmul_blas", "inv", "det", "logabsdet", "solve"}, names
    # one sweep over everything leaves every escape row as it was (sentinels)
    for c in rec.t.escapes:
        write_value(rec, c, np.full(rec.value(c).shape, -7.25))
    new = [rng.uniform(-1, 1, (6, k)) / k, rng.uniform(-1, 1, (3,)), rng.uniform(-1, 1, (k, 24))]
    rec.run(new)
    for c in rec.t.escapes:
        assert np.all(rec.value(c) == -7.25), TABLE[rec.A.code[c]].name
    # segments around the escapes, with NumPy in between, give the eager values
    run_with_escapes(rec, new)
    ref = rec.fresh(new)
    for s in range(rec.n):
        np.testing.assert_allclose(rec.value(s), ref.value(s), rtol=1e-11, atol=1e-13,
                                   err_msg=f"row {s} ({TABLE[rec.A.code[s]].name})")
    # bit for bit wherever no BLAS/LAPACK result is upstream
    first = min(rec.t.escapes)
    for s in range(first):
        assert ulps(rec.value(s), ref.value(s)).max() == 0


def test_function_rows_are_skipped():
    rng = np.random.default_rng(10)
    x = rng.uniform(-1, 1, (3,))
    rec = Replay(lambda a: np.sum(np.exp(Cube.apply(np.sin(a)))), [x], (0,))
    fam = {TABLE[c].name for c in set(rec.A.code.tolist())}
    assert {"function", "function_out"} <= fam
    outs = [s for s in range(rec.n) if TABLE[rec.A.code[s]].name == "function_out"]
    before = [rec.value(s).copy() for s in outs]
    rec.run([x + 0.5])
    for s, v in zip(outs, before):  # left for the driver: the user's forward runs in Python
        assert ulps(rec.value(s), v).max() == 0
    sin_slot = int(rec.A.R[outs[0], 1])
    while TABLE[rec.A.code[sin_slot]].name == "function":  # the hub chain leads to sin(a)
        sin_slot = int(rec.A.R[sin_slot, 1])
    np.testing.assert_array_equal(rec.value(sin_slot), np.sin(x + 0.5))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 3000), st.integers(0, 2 ** 32 - 1), st.sampled_from(["mul", "sub", "add"]))
def test_one_element_operand_adjoint_is_a_pairwise_sum(n, seed, op):
    """The adjoint of a one-element operand of an array row adds the row's n terms in NumPy's
    pairwise order: for loss = sum(op(c, x) * w), d/dc is np.sum(w * x), -np.sum(w) or
    np.sum(w) to the bit."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n) * 10.0 ** rng.integers(-3, 4, size=n)
    w = rng.normal(size=n) * 10.0 ** rng.integers(-3, 4, size=n)
    fn = {"mul": lambda c, x: c * x, "sub": lambda c, x: x - c, "add": lambda c, x: x + c}[op]
    _, (g,) = tape.value_and_grad(lambda c: np.sum(fn(c, x) * w), argnums=(0,))(np.float64(1.5))
    want = {"mul": np.sum(w * x), "sub": -np.sum(w), "add": np.sum(w)}[op] if n else 0.0
    assert ulps(g, want)[0] == 0, (n, op, g, want)
