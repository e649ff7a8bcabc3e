"""Blocked execution of elementwise runs (``_forward_run`` / ``_reverse_run`` in the generated
kernels): runs of same-size unary and binary rows over large arrays are swept block by block.

The reference is the same kernel swept one row at a time (``lo = i, hi = i + 1``), which can
never form a run: values and adjoints must agree bit for bit, for random chains mixing the
cases that end a run (0-d rows, broadcasts through an index map, reductions, a needed
one-element operand) with those that do not (one-element constants, shared operands, rows no
gradient needs).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import jit
import tape
import tape.numpy as tnp
from jit import _interp
from jit.table import OPCODE
from tape.reverse.backward import arena

BLOCK = _interp.BLOCK
SIZES = st.sampled_from([2 * BLOCK, 2 * BLOCK + 1, 3 * BLOCK - 7, 5 * BLOCK + 3])

# elementwise steps on arrays of one size: each keeps values finite and moderate
UNARY_STEPS = [tnp.tanh, tnp.sin, tnp.arctan, lambda u: tnp.exp(tnp.tanh(u)),
               lambda u: tnp.log1p(u * u), tnp.abs, lambda u: -u, tnp.square]
BINARY_STEPS = [lambda u, v: u + v, lambda u, v: u - v, lambda u, v: u * v,
                lambda u, v: u / (1.0 + v * v), tnp.maximum, tnp.logaddexp, tnp.hypot]


@st.composite
def programs(draw):
    n = draw(SIZES)
    steps = draw(st.lists(st.tuples(st.sampled_from(["unary", "binary", "scalar_const",
                                                      "scalar_input", "zero_d", "broadcast",
                                                      "reduce", "line_sum", "late_array",
                                                      "late_scalar"]),
                                    st.integers(0, 10 ** 6)), min_size=3, max_size=14))
    return n, steps, draw(st.sampled_from(["two_sums", "lone_sum", "half_sum"]))


def _run_program(n, steps, tail="two_sums"):
    def f(x, y, s, z, c):  # z and c are first used mid-chain: their leaf rows sit inside runs
        pool = [x, y]
        acc = s * 0.5  # a 0-d row
        for kind, r in steps:
            u, v = pool[r % len(pool)], pool[(r // 7) % len(pool)]
            if kind == "unary":
                pool.append(UNARY_STEPS[r % len(UNARY_STEPS)](u))
            elif kind == "binary":
                pool.append(BINARY_STEPS[r % len(BINARY_STEPS)](u, v))
            elif kind == "scalar_const":  # a one-element operand no gradient needs
                pool.append(u * 1.5 + 0.25)
            elif kind == "scalar_input":  # a needed one-element operand: ends a reverse run
                pool.append(s * u)
            elif kind == "late_array":  # an argument's first use records its leaf row here
                pool.append(BINARY_STEPS[r % len(BINARY_STEPS)](u, z))
            elif kind == "late_scalar":  # the same for a needed one-element argument
                pool.append(u * c + u)
            elif kind == "zero_d":  # a 0-d row between array rows
                acc = acc * s + 1.0
            elif kind == "broadcast":  # an operand through an index map
                pool.append(u + tnp.reshape(tnp.reshape(v, (-1,))[:1], (1,)) * 0.0
                            + tnp.reshape(v, (n,)))
            elif kind == "line_sum":  # the sum of the lines of the last row (or of another):
                # a run closed by it (``_closing_sum``) when the rows before it form one
                w = pool[-1] if r % 2 else u
                lines = max(d for d in range(1, 129) if n % d == 0 and d <= 1 + r % 128)
                t = tnp.sum(tnp.reshape(w, (n // lines, lines)), axis=1)
                acc = acc + tnp.sum(t * t) * 1e-6
            else:  # a reduction in the middle
                acc = acc + tnp.sum(u) * 1e-6
        if tail == "lone_sum":  # the last row's only reader is a full sum: a seeded run
            return tnp.sum(pool[-1] * pool[-2]) + acc
        if tail == "half_sum":  # the same, with the sum's adjoint 0.5 (exact scaling)
            return 0.5 * tnp.sum(pool[-1] * pool[-2]) + acc
        return tnp.sum(pool[-1] * pool[-2]) + tnp.sum(pool[-1]) + acc

    rng = np.random.default_rng(len(steps) * n)
    args = (rng.normal(size=n), rng.normal(size=n), 0.7, rng.normal(size=n), -0.4)
    return f, args


def _sweeps(f, args):
    nums = tuple(range(len(args)))
    cf = tape.compile(f, *args, argnums=nums)
    v = next(reversed(cf.variants.values()))
    A = v.A
    rows = len(A.sv)
    assert not v.escapes

    def values():
        return [np.array(v.t.value(i), copy=True) for i in range(rows)]

    # forward: whole range (runs) against one row at a time (no run can form)
    _interp.forward_sweep(A.R, A.S, A.VA, A.sv, A.IA, A.FA, 0, rows)
    blocked = values()
    for i in range(rows):
        _interp.forward_sweep(A.R, A.S, A.VA, A.sv, A.IA, A.FA, i, i + 1)
    single = values()
    # reverse: the same, from the same seed, into an arena holding every adjoint (the replay's
    # own keeps its run-local ones in scratch)
    p = v._plan(nums)
    live, need = p.live, p.need
    need = need & 3  # without the replay's clearing and local bits: every adjoint compared
    GO, G = arena(A, live)
    out = v.out._slot

    def reverse(row_by_row):
        G.fill(0.0)
        G[GO[out]] = 1.0
        if row_by_row:
            for i in range(rows - 1, -1, -1):
                jit.reverse_sweep(A.R, A.S, A.VA, GO, A.sv, G, A.IA, A.FA, need, i, i + 1)
        else:
            jit.reverse_sweep(A.R, A.S, A.VA, GO, A.sv, G, A.IA, A.FA, need, 0, rows)
        return G.copy()

    g_single = reverse(True)
    # the replay itself (local adjoints in scratch) against the row-by-row input adjoints,
    # twice (a seeded run's second call starts from the seed the first one learned)
    for _ in range(2):
        replayed = cf.grad(*args)
        for i, g in zip(v.slots, replayed):
            if i is None or not live[i]:  # an input the output does not depend on
                assert not np.any(g)
            else:
                assert np.array_equal(np.reshape(g, -1), G_of(g_single, GO, A, i),
                                      equal_nan=True)
    return blocked, single, reverse(False), g_single, A, need


def G_of(G, GO, A, slot):
    return G[GO[slot]:GO[slot] + A.size[slot]]


def _longest_runs(A, need):
    """The longest forward and reverse run the kernels' own run finders see on this tape."""
    rows = len(A.sv)
    fwd = rev = 1
    for i in range(rows):
        k = A.R[i, 3]
        if k >= 0 and _interp._elementwise(A.R[i, 0], k, A.S) \
                and A.S[k, 0] >= _interp.MIN_RUN_SIZE:  # as the sweeps decide
            n = A.S[k, 0]
            fwd = max(fwd, _interp._forward_run_end(A.R, A.S, i, rows, n) - i)
            if need[i]:
                rev = max(rev, i + 1 - _interp._reverse_run_start(A.R, A.S, need, 0, i, n))
    return fwd, rev


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
# a seeded run whose sum's adjoint is 1e-6: scaling the unit-seed adjoints was 5 ulp off
@example((4096, [("unary", 0), ("unary", 0), ("unary", 0), ("unary", 1), ("unary", 0),
                 ("unary", 152), ("reduce", 7), ("unary", 0), ("unary", 0)], "two_sums"))
def test_blocked_equals_row_by_row(program):
    f, args = _run_program(*program)
    blocked, single, g_blocked, g_single, _, _ = _sweeps(f, args)
    for i, (a, b) in enumerate(zip(blocked, single)):
        assert np.array_equal(a, b, equal_nan=True), f"row {i}: values differ"
    assert np.array_equal(g_blocked, g_single, equal_nan=True)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs().map(lambda p: ((1 << 17) + 2 * BLOCK + 5,) + p[1:]))
def test_threaded_runs_equal_row_by_row(program):
    """The same at a size whose seeded runs the replay splits among threads (THREAD_SIZE):
    each piece's sums and scalar terms combined at the top of NumPy's pairwise recursion."""
    f, args = _run_program(*program)
    _, _, g_blocked, g_single, _, _ = _sweeps(f, args)
    assert np.array_equal(g_blocked, g_single, equal_nan=True)


def test_runs_form_and_match_eager():
    """W3's chain is one run of 8 rows, forward and reverse, and the blocked replay gives the
    eager gradient (the same reverse kernel, rows swept one at a time) to the bit."""
    n = 3 * BLOCK + 5
    x = np.random.default_rng(3).normal(size=n)

    def loss(x):
        return tnp.sum(tnp.tanh(x) * tnp.exp(-x * x) + tnp.log1p(x * x))

    blocked, single, g_blocked, g_single, A, need = _sweeps(lambda x, y, s: loss(x) + 0.0 * s,
                                                            (x, x.copy(), 1.0))
    fwd, rev = _longest_runs(A, need)
    assert fwd >= 8 and rev >= 8
    assert np.array_equal(g_blocked, g_single)
    assert all(np.array_equal(a, b) for a, b in zip(blocked, single))
    value, g = tape.value_and_grad(loss)(x)
    cf = tape.compile(loss, x)
    v2, g2 = cf.value_and_grad(x)
    # the replayed tanh differs from NumPy's by ulps (test_forward_sweep.py), and the terms of
    # the gradient cancel where it crosses zero
    np.testing.assert_allclose(g2, g, rtol=1e-12, atol=1e-15)
    assert v2 == pytest.approx(value, rel=1e-14)


def test_shared_needed_scalar_ends_the_reverse_run():
    """Two rows of one run summing into the same one-element adjoint would add in another
    order block by block; the run ends at such a row and the gradient is bit for bit."""
    n = 4 * BLOCK + 1
    rng = np.random.default_rng(0)
    x = rng.normal(size=n) * 1e3
    y = rng.normal(size=n) * 1e-3

    def f(x, y, s):
        return tnp.sum(tnp.tanh(s * x) + tnp.sin(s * y) * (s * x))

    _, _, g_blocked, g_single, A, need = _sweeps(f, (x, y, 0.3))
    assert np.array_equal(g_blocked, g_single)


@pytest.mark.parametrize("n", [2 * BLOCK - 1, 2 * BLOCK])
def test_threshold(n):
    """Below MIN_RUN_SIZE elements no run forms; at it, one does."""
    x = np.linspace(-2, 2, n)
    _, _, _, _, A, need = _sweeps(lambda x, y, s: tnp.sum(tnp.sin(tnp.tanh(x) * y) * s),
                                  (x, x + 1.0, 2.0))
    fwd, _ = _longest_runs(A, need)
    assert (fwd > 1) == (n >= _interp.MIN_RUN_SIZE)


def test_replay_leaves_its_arena_clean():
    """A compiled tape's reverse kernel zeroes each adjoint after sweeping it (need bit 4), and
    the driver zeroes the rest, so the next call needs no fill: the arena is all zeros after a
    call, gradients repeat exactly, and a call that stopped half way is followed by a fill."""
    n = 3 * BLOCK
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=n), rng.normal(size=n)

    def f(x, y, s):
        u = tnp.tanh(x) * y + s * x
        return tnp.sum(u * u) + s * s + tnp.sum(tnp.matmul(tnp.reshape(x, (-1, 8)),
                                                           tnp.ones(8)))

    cf = tape.compile(f, x, y, 0.5, argnums=(0, 1, 2))
    first = cf.grad(x, y, 0.5)
    v = next(reversed(cf.variants.values()))
    G = v._plan((0, 1, 2)).G
    assert not G.any()
    for _ in range(3):
        again = cf.grad(x, y, 0.5)
        assert all(np.array_equal(a, b) for a, b in zip(first, again))
    G[:] = 7.0  # as if a call had stopped half way and flagged it
    v._plan((0, 1, 2)).dirty = True
    assert all(np.array_equal(a, b) for a, b in zip(first, cf.grad(x, y, 0.5)))
    eager = tape.grad(f, argnums=(0, 1, 2))(x, y, 0.5)
    for a, b in zip(first, eager):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def _local_rows(cf, nums=(0,)):
    v = next(reversed(cf.variants.values()))
    need = v._plan(nums).need
    return v, set(np.flatnonzero(need & jit.LOCAL).tolist())


def test_run_local_adjoints_stay_out_of_the_arena():
    """W3's chain: every adjoint the run makes and reads itself is local (need bit LOCAL), the
    add that the sum reads is not; the arena holds only x's and the add's adjoints."""
    n = 3 * BLOCK + 5
    x = np.random.default_rng(3).normal(size=n)
    cf = tape.compile(lambda x: tnp.sum(tnp.tanh(x) * tnp.exp(-x * x) + tnp.log1p(x * x)), x)
    v, local = _local_rows(cf)
    A = v.A
    add = int(A.R[v.out._slot, 1])
    rows = set(range(1, add))
    assert local == rows
    G = v._plan((0,)).G
    assert G.size == len(A.sv) + 2 * n + len(A.sv)  # (and the seeded sum's seed cells)
    g = cf.grad(x)
    g0 = tape.grad(lambda x: tnp.sum(tnp.tanh(x) * tnp.exp(-x * x) + tnp.log1p(x * x)))(x)
    np.testing.assert_allclose(g, g0, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(cf.grad(x), g)  # the scratch is clean for the next call


def test_adjoints_read_outside_the_run_are_not_local():
    """A value read again after the run (by a reduction, by a later run of another size, or as
    the output a vjp seeds) keeps its adjoint in the arena; the gradients match eager."""
    n = 2 * BLOCK + 3
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=n), rng.normal(size=n)

    def f(x, y):
        u = tnp.tanh(x) * y  # u: read by the run and by the sum below
        w = tnp.sin(u) + u * u
        return tnp.sum(w) + tnp.sum(u) * 0.5 + tnp.sum(tnp.reshape(w, (-1,))[:7])

    cf = tape.compile(f, x, y, argnums=(0, 1))
    v, local = _local_rows(cf, (0, 1))
    A = v.A
    readers = {}
    for j in range(len(A.sv)):
        for s in A.R[j, 1:3]:
            readers.setdefault(int(s), []).append(j)
    assert local and all(max(readers[s]) < v.out._slot for s in local)
    g, g0 = cf.grad(x, y), tape.grad(f, argnums=(0, 1))(x, y)
    for a, b in zip(g, g0):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)

    def h(x):  # an array output inside a run: its adjoint is the seed
        return tnp.tanh(x) * 2.0 + x

    ch = tape.compile(h, x)
    cot = rng.normal(size=n)
    _, local = _local_rows(ch)
    assert next(reversed(ch.variants.values())).out._slot not in local
    np.testing.assert_allclose(ch.vjp(x)[1](cot),
                               cot * (2.0 * (1.0 - np.tanh(x) ** 2) + 1.0), rtol=1e-13)


def test_runs_between_blas_rows():
    """Escape rows cut the reverse sweep into segments; runs and local adjoints are found per
    segment, as the sweep finds them."""
    n = 64 * 128
    rng = np.random.default_rng(5)
    x = rng.normal(size=n)
    W = rng.normal(size=(128, 16)) / 10

    def f(x, W):
        u = tnp.exp(tnp.tanh(x) * 0.5) * x
        m = tnp.matmul(tnp.reshape(u, (64, 128)), W)  # a BLAS row between two runs
        z = tnp.reshape(tnp.tanh(tnp.matmul(m, tnp.transpose(W))), (-1,))
        return tnp.sum(tnp.log1p(z * z) * u + z)

    cf = tape.compile(f, x, W, argnums=(0, 1))
    v, local = _local_rows(cf, (0, 1))
    assert v.escapes and local
    g, g0 = cf.grad(x, W), tape.grad(f, argnums=(0, 1))(x, W)
    for a, b in zip(g, g0):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)


def _seeded(cf, nums=(0,)):
    v = next(reversed(cf.variants.values()))
    return np.flatnonzero(v._plan(nums).need & jit.SEEDED).tolist()


SEEDABLE = {
    "sum": lambda x: tnp.sum(tnp.tanh(x) * tnp.exp(-x * x) + tnp.log1p(x * x)),
    "half": lambda x: 0.5 * tnp.sum(tnp.sin(x) * x),
    "quarter_negated": lambda x: tnp.sum(tnp.sin(x) * tnp.exp(x)) * -0.25,
    "mean": lambda x: tnp.mean(tnp.exp(tnp.tanh(x)) * (x + 1.0)),
    "third": lambda x: tnp.sum(tnp.cos(x) * tnp.tanh(x) * x) / 3.0,
    "needed_scalar": lambda x: tnp.sum(tnp.sin(x * x[0])),  # x[0]'s terms summed pairwise
    "needed_scalar_mean": lambda x: tnp.mean(tnp.sin(x * x[0]) * x),
    "negative_zero": lambda x: tnp.sum(tnp.sin(x) * x) * -0.0 + 1.0,
    "subnormal_power_of_two": lambda x: tnp.sum(tnp.sin(x) * x) * 2.0 ** -1060,
    # zero adjoints scaled by a negative power of two stay +0.0, as the plain reverse's
    "negated_with_zeros": lambda x: -2.0 * tnp.sum(tnp.abs(tnp.maximum(x, 0.3))),
}


@pytest.mark.parametrize("name", sorted(SEEDABLE))
def test_seeded_run_equals_the_plain_reverse(name):
    """A run closed by a full sum sweeps its reverse inside its forward when one call does
    both (value_and_grad, grad), from a unit seed; vjp sweeps it as usual. A sum's adjoint
    that is a power of two scales the unit adjoints exactly; any other (a mean's 1/n, one
    computed by later rows, zero, a subnormal) sweeps the run again from itself. Either way
    the two agree bit for bit."""
    f = SEEDABLE[name]
    n = 2 * BLOCK + 11
    x = np.random.default_rng(6).normal(size=n)
    cf = tape.compile(f, x)
    assert _seeded(cf)
    for a in (x, 0.9 * x):
        value, g = cf.value_and_grad(a)
        value2, vjp = cf.vjp(a)
        g2 = vjp(1.0)
        assert value == value2
        np.testing.assert_array_equal(g, g2)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(g2))
        # eager: its values come from NumPy's ufuncs, the replay's from the interpreter's kernels
        np.testing.assert_allclose(g, tape.grad(f)(a), rtol=1e-12, atol=1e-15)
        np.testing.assert_array_equal(cf.grad(a), g)  # the arena is clean for the next call


NOT_SEEDABLE = {
    # the sum's adjoint changes from call to call (it depends on the arguments)
    "then_more": lambda x: tnp.sum(tnp.cos(x) * x) ** 2 * 0.3,
    "times_argument": lambda x: tnp.sum(tnp.cos(x[1:]) * x[1:]) * x[0],
    "read_after": lambda x: tnp.sum(tnp.tanh(x) * x) + tnp.sum(x),  # x read after the sum
    "twice": lambda x: (lambda u: tnp.sum(u) + tnp.sum(u * u))(tnp.sin(x) * x),
    "inner": lambda x: (lambda u: tnp.sum(u * 2.0) + tnp.amax(u))(tnp.sin(x) * x),
    "axis_sum": lambda x: tnp.sum(tnp.sum(tnp.reshape(tnp.sin(x) * x, (-1, 2)), axis=0) ** 2),
}


@pytest.mark.parametrize("name", sorted(NOT_SEEDABLE))
def test_runs_that_cannot_be_seeded(name):
    """Where the run's adjoint does not come from one full sum alone, or the sum's adjoint
    depends on the arguments (it would be swept twice on every call), or an input's adjoint
    also comes from rows after it, the run is swept as usual; gradients match eager."""
    f = NOT_SEEDABLE[name]
    x = np.random.default_rng(7).normal(size=2 * BLOCK + 2)
    cf = tape.compile(f, x)
    assert _seeded(cf) == []
    np.testing.assert_array_equal(cf.grad(x), cf.vjp(x)[1](1.0))
    np.testing.assert_allclose(cf.grad(x), tape.grad(f)(x), rtol=1e-12, atol=1e-14)


def test_seeded_runs_in_batches_threads_and_loaded_tapes(tmp_path):
    """Batches (serial and threaded: copies of the recording, each with its own scratch) and a
    tape saved and loaded again replay the seeded run with the same bits as single calls."""
    f = SEEDABLE["sum"]
    X = np.random.default_rng(8).normal(size=(4, 2 * BLOCK + 5))
    cf = tape.compile(f, X[0])
    assert _seeded(cf)
    single = [cf.value_and_grad(x) for x in X]
    for threads in (1, 2):
        values, grads = cf.value_and_grad_batch(X, threads=threads)
        for (v, g), value, grad in zip(single, values, grads):
            assert v == value and np.array_equal(g, grad)
    cf.save(tmp_path / "w3.npz")
    loaded = tape.load(tmp_path / "w3.npz")
    v, g = loaded.value_and_grad(X[2])
    assert v == single[2][0] and np.array_equal(g, single[2][1])


@pytest.mark.parametrize("n", [0, 1, 7, 8, 127, 128, 129, 130, 1000, 4096, 5000, 12345, 10 ** 6])
def test_pairwise_from_leaves_is_numpys_sum(n):
    """A seeded run sums block by block: its blocks end at the leaves of NumPy's pairwise
    summation, and the leaf sums combined in the recursion's order give NumPy's sum, bit for
    bit (the loops that replace the recursion: _pairwise_leaves, _pairwise_combine)."""
    x = np.random.default_rng(n).normal(size=n)
    starts = np.empty(n // 64 + 2, np.int64)
    count = _interp._pairwise_leaves(n, starts)
    starts[count] = n
    assert count == 0 or (starts[0] == 0 and np.all(np.diff(starts[:count + 1]) <= 128))
    leaves = np.array([_interp._pairwise(x.ctypes.data, starts[q], starts[q + 1] - starts[q])
                       for q in range(count)] or [0.0])
    assert 0.0 + _interp._pairwise_combine(n, leaves) == np.sum(x)


@pytest.mark.parametrize("n", [0, 1, 7, 3 * BLOCK + 5])
def test_square_adjoint_in_one_pass_keeps_the_two_pass_bits(n):
    """x * x sweeps both operands' terms in one pass: (G + g x) + g x, as the two passes did."""
    rng = np.random.default_rng(n)
    x0, c = rng.normal(size=n), rng.normal(size=n)
    f = lambda x: np.sum(c * (x * x)) + np.sum(x * 3.0)  # noqa: E731
    want = (3.0 + c * x0) + c * x0  # x * 3.0's adjoint first (a later row), then the square's
    np.testing.assert_array_equal(tape.grad(f)(x0), want)
    np.testing.assert_array_equal(tape.compile(f, x0).grad(x0), want)


@pytest.mark.parametrize("lines", [1, 3, 8, 10, 16, 100, 128, 129])
def test_run_closed_by_a_sum_over_lines(lines):
    """A run whose last row is summed over lines of at most 128 (W2's Qx * Qx over lines of
    10) takes the sum in: the forward sums each line from the block in cache, the reverse
    spreads the sum's adjoint over the block and keeps the last row's adjoint in scratch.
    Blocks hold whole lines; values and adjoints are bit for bit those of the rows swept
    one at a time, and the gradient is the hand-derived one. Over 128 (more than one leaf of
    NumPy's pairwise sum) the sum stays a row of its own."""
    P = -(-(2 * BLOCK + 11) // lines)
    n = P * lines

    def f(x, y, s):
        w = tnp.sin(tnp.reshape(x, (P, lines))) * tnp.reshape(y, (P, lines))
        t = tnp.sum(w * w, axis=1)
        return tnp.sum(t * t) * s

    rng = np.random.default_rng(lines)
    args = (rng.normal(size=n), rng.normal(size=n), 0.7)
    blocked, single, g_blocked, g_single, A, need = _sweeps(f, args)
    assert all(np.array_equal(a, b) for a, b in zip(blocked, single))
    assert np.array_equal(g_blocked, g_single)
    sums = [e for e in range(len(A.sv)) if A.R[e, 3] >= 0 and A.size[e] == P
            and _interp._closing_sum(A.R, A.S, A.IA, e)]
    assert len(sums) == (lines <= 128)
    cf = tape.compile(f, *args, argnums=(0, 1, 2))
    v, local = _local_rows(cf, (0, 1, 2))
    if sums:
        assert sums[0] - 1 in local  # w * w: its adjoint never reaches the arena
    x, y, s = args
    for _ in range(2):  # the second call: the scratch and the sum's adjoint were left clean
        gx, gy, gs = cf.grad(*args)
        w = np.sin(x.reshape(P, lines)) * y.reshape(P, lines)
        t = np.sum(w * w, axis=1)
        gw = s * 2 * t[:, None] * 2 * w
        np.testing.assert_allclose(gx, (gw * np.cos(x.reshape(P, lines))
                                        * y.reshape(P, lines)).ravel(), rtol=1e-12)
        np.testing.assert_allclose(gy, (gw * np.sin(x.reshape(P, lines))).ravel(), rtol=1e-12)
        assert gs == pytest.approx(np.sum(t * t), rel=1e-13)


@pytest.mark.parametrize("scale", [1.0, 3.0])
def test_input_rows_do_not_end_a_run(scale):
    """An argument's leaf row is recorded where the argument is first used: v's below sits
    between x - u and its product with v. Input rows do nothing in a sweep, so the run goes
    on through them, and the sum closing it still seeds it. Hand-derived gradients, bit for
    bit (each is one product: the seeded run's unit seed scaled at the end rounds once too)."""
    n = 3 * BLOCK + 5
    rng = np.random.default_rng(11)
    x, u, v = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)

    def f(x, u, v):
        return scale * tnp.sum((x - u) * v)

    cf = tape.compile(f, x, u, v, argnums=(0, 1, 2))
    variant = next(reversed(cf.variants.values()))
    A = variant.A
    leaf = [i for i in range(len(A.sv)) if jit.TABLE[A.code[i] & 255].name == "leaf"][-1]
    assert 0 < leaf < len(A.sv) - 2  # v's leaf row is inside the chain
    assert _longest_runs(A, variant._plan((0, 1, 2)).need)[0] == 3  # x - u, v's leaf, the product
    assert _seeded(cf, (0, 1, 2))
    for args in ((x, u, v), (2 * x, u, -v)):
        value, (gx, gu, gv) = cf.value_and_grad(*args)
        assert value == scale * np.sum((args[0] - args[1]) * args[2])
        np.testing.assert_array_equal(gx, scale * args[2])
        np.testing.assert_array_equal(gu, scale * -args[2])
        np.testing.assert_array_equal(gv, scale * (args[0] - args[1]))
        assert cf(*args) == value


def test_late_scalar_arguments_in_a_long_run():
    """A fit's shape: scalar parameters first used mid-expression, over many points. Their 0-d
    leaf rows do not split the forward run, and the sum closing it seeds it although two of its
    rows take a scalar's adjoint (each row's terms summed leaf by leaf, and by the threads'
    pieces, in NumPy's pairwise order): the replay equals eager bit for bit (no vector kernel
    in this model), split among threads or not."""
    n = (1 << 17) + 3 * BLOCK + 7  # large enough for a value replay to split its run
    t = np.linspace(0.0, 2.0, n)
    y = 1.5 * t - 0.3 * t * t + 0.01 * np.sin(40.0 * t)

    def f(a, b, t, y):
        return tnp.sum((a * t + b * (t * t) - y) ** 2)

    want = tape.value_and_grad(f, argnums=(0, 1))(1.2, -0.1, t, y)
    for threads in (1, 2):
        cf = tape.compile(f, 1.2, -0.1, t, y, argnums=(0, 1), threads=threads)
        A = next(reversed(cf.variants.values())).A
        first = min(i for i in range(len(A.sv)) if A.R[i, 3] >= 0 and A.size[i] == n
                    and _interp._elementwise(A.R[i, 0], A.R[i, 3], A.S))
        assert _interp._forward_run_end(A.R, A.S, first, len(A.sv), n) - first >= 6
        assert _seeded(cf, (0, 1))
        for _ in range(2):
            value, g = cf.value_and_grad(1.2, -0.1, t, y)
            assert value == want[0] and g == want[1]
            assert cf(1.2, -0.1, t, y) == want[0]


@pytest.mark.parametrize("threads", [1, 2])
def test_value_only_call_sums_the_seeded_run_in_scratch(threads):
    """cf(x) sweeps a run closed by a sum as value_and_grad's forward does (values in scratch,
    the sum block by block) but with no reverse: the same value, bit for bit, with the run's
    values never written to the arena; and the calls after it (gradient, vjp, jvp), which need
    those values, replay them again."""
    n = (1 << 17) + 3 * BLOCK + 1  # a run large enough to split among threads
    rng = np.random.default_rng(12)
    x, x2 = rng.normal(size=n), rng.normal(size=n)
    f = SEEDABLE["sum"]
    cf = tape.compile(f, x, threads=threads)
    variant = next(reversed(cf.variants.values()))
    value = cf(x)
    assert (0,) not in variant._plans  # (a caller of values alone never gets an adjoint arena)
    assert _seeded(cf)
    assert cf.value_and_grad(x)[0] == value
    A = variant.A
    run = [i for i in range(len(A.sv)) if A.size[i] == n and jit.TABLE[A.code[i]].family
           in ("unary", "binary")]
    before = [np.array(variant.t.value(i), copy=True) for i in run]
    value2, g2 = cf.value_and_grad(x2)
    cf.value_and_grad(x)
    assert cf(x2) == value2
    assert all(np.array_equal(variant.t.value(i), b) for i, b in zip(run, before))  # (scratch)
    assert cf.value_and_grad(x2) == (value2, pytest.approx(g2, abs=0)) and \
        np.array_equal(cf.grad(x2), g2)
    cf(x)
    value, vjp = cf.vjp(x2)
    assert value == value2 and np.array_equal(vjp(1.0), g2)
    cf(x)
    _, tangent = cf.jvp((x2,), (np.ones(n),))
    np.testing.assert_allclose(tangent, np.sum(g2), rtol=1e-12)


@pytest.mark.parametrize("shape", [(40, 60), (70, 70)])  # a row of its own; a blocked run
@pytest.mark.parametrize("lines", [False, True])
def test_square_of_a_blas_product_writes_its_adjoint_whole(shape, lines):
    """z * z, the only reader of a BLAS product z (need bits FRESH_A | FRESH_B), stores
    0.0 + g z + g z into z's adjoint, which the last call left dirty, without zeroing it
    first: every call has the bits of the eager gradient, and the hand-derived value."""
    rng = np.random.default_rng(shape[0])
    X, w0 = rng.normal(size=(shape[0], 30)), rng.normal(size=(30, shape[1]))
    c = rng.normal(size=shape[0])

    def f(w):
        z = X @ w
        return np.sum(np.sum(z * z, axis=1) * c) if lines else np.sum(z * z)

    cf = tape.compile(f, w0)
    v = next(iter(cf.variants.values()))
    square = [i for i in range(len(v.A.sv)) if v.A.code[i] == OPCODE["multiply"]][0]
    assert v._plan(cf.nums).need[square] & (jit.FRESH_A | jit.FRESH_B)
    for w in (w0, -2.0 * w0, w0):
        z = X @ w
        want = 2.0 * X.T @ (z * (c[:, None] if lines else 1.0))
        g = cf.grad(w)
        np.testing.assert_array_equal(g, tape.grad(f)(w))
        np.testing.assert_allclose(g, want, rtol=1e-12)
