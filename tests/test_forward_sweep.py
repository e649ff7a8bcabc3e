"""Compiled replay over the op database: the forward value sweep row by row, and tape.compile.

A function is recorded once with leaves; new input values are then written into the leaves'
buffers and the sweep (``jit.forward_sweep``, part of ``jit._interp``) recomputes every row in
place. Each row's value is compared with a fresh eager recording at the new inputs
(``tests/_replay.py``): bit for bit, except where the arithmetic differs on purpose. Every op of
``tests/_op_database.py`` that claims replay is swept on the database's samples, and replayed
through ``tape.compile`` (values and gradients at new inputs against eager there; escapes
included, which the driver computes between segments). Then the elementwise rows' special
values, NumPy's fast exponents of power, the reductions' axis cases and summation order, chains
of every family, ranges, and the escape and Function rows the sweep leaves to the driver.

This file also runs with ``NUMBA_DISABLE_JIT=1``: keep sizes small there.
"""
from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tape
from jit import _generate, _generate_forward
from jit.families import family_modules
from jit._interp import SIG_SWEEP, TABLE_HASH, forward_sweep, sweep
from jit.table import OPCODE, TABLE, table_hash
from tape.core.scalar_rules import SCALAR

from _functions import Cube
from _mode_checks import check_compiled, check_sweep, over_ops
from _op_database import (BINARY, REDUCE_FUNCS, REPLAY_VALUES, SPECIALS, UNARY,
                          claiming, ids, signed)
from _replay import (NOJIT, SCALAR_PATH_ULPS, ULPS, Replay, check_rows, run_with_escapes, ulps,
                     write_value)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "asv_bench", "benchmarks"))
import workloads  # noqa: E402

REPLAY = claiming("replay")
SWEPT = [op for op in REPLAY if op.family != "escape"]
OTHER = [p for p in TABLE if p.family not in ("input", "escape", "unary", "binary")]


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
    assert {p.name for p in OTHER} <= {op.name for op in SWEPT}, "a swept row with no samples"


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
# Every op of the database: the sweep, row by row; tape.compile, values and gradients


@over_ops(SWEPT, max_examples=15)
def test_sweep(op, sample, rng):
    check_sweep(op, sample, rng)


# (without the JIT each compiled replay plans and runs in Python: fewer examples)
@over_ops(REPLAY, max_examples=2 if NOJIT else 4)
def test_compiled(op, sample, rng):
    check_compiled(op, sample, rng)


# ---------------------------------------------------------------------------------------------
# Elementwise rows: generated from the table's formulas


FORMULA_ONLY = [op for op in UNARY if not op.prim.vf]


@pytest.mark.parametrize("op", FORMULA_ONLY, ids=ids(FORMULA_ONLY))
def test_unary_formula_same_bits_as_the_eager_0d_path(op):
    """Without a vectorized kernel, a row's array loop and the eager 0-d path (Python floats)
    evaluate one formula: bit for bit on thousands of values, which a handful of hypothesis
    examples would rarely tell apart. (exp2 written as 2.0 ** x differed in ~1 value in 1000:
    LLVM turns pow(2.0, x) into exp2(x), Python calls pow.)"""
    x = op.domain[0](np.random.default_rng(7), (4096,))
    x = np.concatenate([x, [-0.6267464478182703, -4.09728848544903, 1.917000287249011]])
    rec = Replay(lambda a: op.call(a), [x], (0,))
    rec.run([x])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.array([SCALAR[OPCODE[op.name]](float(v)) for v in x])
    d = ulps(rec.value(rec.y._slot), want)
    assert d.max() <= SCALAR_PATH_ULPS.get(op.name, 0), (op.name, x[d > 0][:4])


@pytest.mark.parametrize("op", BINARY, ids=ids(BINARY))
def test_binary_formula_same_bits_as_the_eager_0d_path(op):
    """As above for two operands (the 0-d path calls libm's hypot, not CPython's math.hypot,
    which is its own algorithm, an ulp from libm's)."""
    rng = np.random.default_rng(8)
    da, db = op.domain
    a, b = da(rng, (4096,)), db(rng, (4096,))
    rec = Replay(lambda u, v: op.call(u, v), [a, b], (0, 1))
    rec.run([a, b])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.array([SCALAR[OPCODE[op.name]](float(u), float(v)) for u, v in zip(a, b)])
    got = rec.value(rec.y._slot)
    d = ulps(got, want)
    if op.name == "logaddexp":  # (its bound is absolute, docs/design.md: near a zero result
        # the formula cancels, and where the sweep runs as Python, NumPy's exp and log1p)
        d = np.abs(got - want) / np.spacing(np.maximum(np.abs(a), np.abs(b)))
    assert d.max() <= ULPS.get(op.name, 0), (op.name, a[d > 0][:4], b[d > 0][:4])


@pytest.mark.parametrize("op", UNARY, ids=ids(UNARY))
def test_unary_special_values(op):
    x0 = op.domain[0](np.random.default_rng(0), (len(SPECIALS),))
    rec = Replay(lambda a: op.call(a), [x0], (0,))
    check_rows(rec, [np.array(SPECIALS)])
    for v in SPECIALS:  # the 0-d path
        rec = Replay(lambda a: op.call(a * 1.0), [x0[0]], (0,))
        check_rows(rec, [v], ulp=SCALAR_PATH_ULPS)


# power(-inf, b) for b not an integer: NumPy (and the eager 0-d path, which hands a <= 0 to
# np.power) give inf or 0.0, the table's _power formula gives NaN (its negative-base test
# `a < 0.0 and abs(b) < inf and b != int(b)` also catches a == -inf).
POWER_NEG_INF = [(-np.inf, b) for b in SPECIALS
                 if not np.isnan(b) and b != 0.0 and (np.isinf(b) or b != int(b))]


def _binary_special_grid(op):
    a = np.repeat(SPECIALS, len(SPECIALS))
    b = np.tile(SPECIALS, len(SPECIALS))
    if op.name == "power":
        keep = np.array([(x, y) not in POWER_NEG_INF for x, y in zip(a, b)])
        a, b = a[keep], b[keep]
    return a, b


@pytest.mark.parametrize("op", BINARY, ids=ids(BINARY))
def test_binary_special_values(op):
    a, b = _binary_special_grid(op)
    rng = np.random.default_rng(0)
    da, db = op.domain
    rec = Replay(lambda x, y: op.call(x, y), [da(rng, a.shape), db(rng, b.shape)], (0, 1))
    if op.name in ("fmax", "fmin"):
        # a +0.0 / -0.0 tie: NumPy's loops differ among themselves (its SIMD ones return the
        # second operand, its scalar one the first); ours return the first, in eager as in replay
        rec.run([a, b])
        got = rec.value(rec.y._slot)
        d = ulps(got, op.call(a, b))
        ties = (a == 0.0) & (b == 0.0) & (np.signbit(a) != np.signbit(b))
        assert np.all(d[~ties] == 0) and np.array_equal(np.signbit(got[ties]), np.signbit(a[ties]))
    check_rows(rec, [a, b])
    for x, y in zip(a, b):  # the 0-d path
        rec = Replay(lambda u, v: op.call(u * 1.0, v * 1.0), [1.5, 0.5], (0, 1))
        check_rows(rec, [x, y])


def test_power_of_minus_inf():
    """-inf to a non-integer power follows C's pow (inf or 0), as NumPy's array loop does, in
    0-d rows too, but for 0.5 there: sqrt's NaN, as NumPy's loop gives for a scalar exponent."""
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
    NaN and signed zeros included), whether the exponent is one element or varies along lines,
    where 0.5 at -inf and -0.0 gives pow's inf and +0.0, as NumPy's loop does for an exponent
    array; other exponents call libm's pow, within 1 ulp of the exact value (not of NumPy's
    loop, which is SVML's pow on AVX-512 machines)."""
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
                    want = np.power(b[at], v)
                    if np.size(exponent) > 1 and v == 0.5:  # (pow's values: NumPy's array loop)
                        want = np.where(b[at] == -np.inf, np.inf, np.abs(want))
                    assert ulps(got.reshape(-1)[at], want).max() == 0, v
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
# Reductions: every (P, R, Q) case, NumPy's summation order, ties, special values


@pytest.mark.parametrize("name", sorted(REDUCE_FUNCS))
@pytest.mark.parametrize("axis", [None, 0, 1, 2, (1, 2), (0, 1), (0, 2)])
def test_reduce_every_axis(name, axis):
    """Each (P, R, Q) case: Q == 1 (trailing axes), P == 1, both > 1, non-adjacent axes."""
    rng = np.random.default_rng(6)
    shape = (3, 4, 2)
    x = signed(rng, shape)
    rec = Replay(lambda a: getattr(np, REDUCE_FUNCS[name])(a, axis=axis), [x], (0,))
    check_rows(rec, [REPLAY_VALUES.get(name, signed)(rng, shape)])


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
    for fn in (np.sum, np.prod, np.max, np.min):
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


# ---------------------------------------------------------------------------------------------
# Escape rows: skipped by the sweep, computed by the driver between segments


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
