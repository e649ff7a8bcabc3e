"""A straight value_and_grad splits each large run closed by a sum among threads (each takes a
piece at the top of NumPy's pairwise summation): the results must be the bits of one thread."""
import pickle

import numpy as np
import pytest

import tape
import tape.replay.plan as plan
from jit.table import OPCODE
from tape.reverse.backward import reverse_cuts, segment_bounds
from tape.parallel import threads as _threads


@pytest.fixture
def small_runs(monkeypatch):
    """Split runs from a few thousand elements, so that the tests stay small."""
    monkeypatch.setattr(plan, "THREAD_SIZE", 2048)


def w3(x):
    return np.sum(np.tanh(x) * np.exp(-x * x) + np.log1p(x * x))


def two_runs(x, w):
    """Two seeded runs (each on its own input: a run's inputs may not be read after its sum),
    0-d rows between them, sums' adjoints other than powers of two: steady ones, so the first
    call sweeps the runs again from them and later calls start from them."""
    a = np.sum(np.sin(x) * x + x * x)
    c = (a * 2.5 - 1.0) / 3.0
    b = np.sum(np.exp(-w * w) * w)
    return 3.0 * c - b * 0.7


def product_of_sums(x, w):
    """Each sum's adjoint is the other sum, new on every call: neither run is seeded."""
    return np.sum(np.sin(x) * x + x * x) * np.sum(np.exp(-w * w) * w)


def keepdims(x):
    return np.sum(np.sum(np.cos(x) * x, keepdims=True)) * 0.3


def _same(r1, r2):
    assert r1[0] == r2[0]
    for a, b in zip(r1[1] if isinstance(r1[1], tuple) else (r1[1],),
                    r2[1] if isinstance(r2[1], tuple) else (r2[1],)):
        np.testing.assert_array_equal(a, b)


def _calls(cf, args):
    return cf.value_and_grad(*args)


@pytest.mark.parametrize("n", [2048, 2053, 4099, 70_001])
@pytest.mark.parametrize("threads", [2, 4, 8])
def test_same_bits_as_one_thread(small_runs, n, threads):
    x = np.random.default_rng(n).normal(size=n)
    one = tape.compile(w3, x, threads=1)
    many = tape.compile(w3, x, threads=threads)
    _same(_calls(one, (x,)), _calls(many, (x,)))
    y = x[::-1].copy()
    _same(_calls(one, (y,)), _calls(many, (y,)))  # and again at other values
    value, g = tape.value_and_grad(w3)(y)
    np.testing.assert_allclose(many.value_and_grad(y)[0], value, rtol=1e-14)
    np.testing.assert_allclose(many.value_and_grad(y)[1], g, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("f, nargs, argnums, runs", [(two_runs, 2, (0, 1), 2),
                                                     (two_runs, 2, 1, 1),  # (x's run: no need)
                                                     (keepdims, 1, 0, 1),
                                                     (product_of_sums, 2, (0, 1), 0)])
def test_several_runs_and_sum_adjoints(small_runs, f, nargs, argnums, runs):
    rng = np.random.default_rng(3)
    args = [rng.normal(size=9000) for _ in range(nargs)]
    one = tape.compile(f, *args, argnums=argnums, threads=1)
    two = tape.compile(f, *args, argnums=argnums, threads=2)
    variant = next(reversed(two.variants.values()))
    assert variant.straight
    _same(_calls(one, args), _calls(two, args))  # (first calls: the seeded runs swept again)
    others = [a[::-1].copy() for a in args]
    _same(_calls(one, others), _calls(two, others))  # (from the seeds the first calls left)
    value, vjp = two.vjp(*others)  # the plain reverse sweep: no seeded run
    _same((value, vjp(1.0)), _calls(two, others))
    split = variant._plan(two.nums).split
    assert len(split) == runs  # the runs were threaded
    ref = tape.value_and_grad(f, argnums=argnums)(*args)
    np.testing.assert_allclose(two.value_and_grad(*args)[0], ref[0], rtol=1e-13)


def test_small_runs_stay_in_one_call():
    x = np.random.default_rng(1).normal(size=1000)
    cf = tape.compile(w3, x, threads=2)
    cf.value_and_grad(x)
    assert next(reversed(cf.variants.values()))._plan(cf.nums).split == []


def test_thread_count():
    assert _threads.thread_count(1) == 1
    assert _threads.thread_count(3) == 2
    assert _threads.thread_count(64) == 8
    assert _threads.thread_count(None) >= 1


def test_threads_survive_pickling(small_runs):
    x = np.random.default_rng(2).normal(size=5000)
    cf = pickle.loads(pickle.dumps(tape.compile(w3, x, threads=4)))
    assert cf.threads == 4
    _same(_calls(cf, (x,)), _calls(tape.compile(w3, x, threads=1), (x,)))


def test_batch_rows_do_not_nest_threads(small_runs):
    """value_and_grad_batch's worker threads sweep their rows whole (no pool inside a pool)."""
    X = np.random.default_rng(4).normal(size=(4, 5000))
    cf = tape.compile(w3, X[0], threads=2)
    values, grads = cf.value_and_grad_batch(X, threads=2)
    ref = tape.compile(w3, X[0], threads=1)
    for row, v, g in zip(X, values, grads):
        _same((v, g), _calls(ref, (row,)))


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork on this platform")
def test_forked_child_makes_its_own_pool(small_runs):
    """A process forked after the pool started (multiprocessing's default on Linux before
    Python 3.14) would wait forever on the parent's threads; it starts its own."""
    import multiprocessing

    x = np.random.default_rng(6).normal(size=6000)
    cf = tape.compile(w3, x, threads=2)
    expected = cf.value_and_grad(x)  # the pool now runs in this process
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        value, g = pool.apply_async(_child_call, (cf, x)).get(timeout=60)
    assert value == expected[0]
    np.testing.assert_array_equal(g, expected[1])


def _child_call(cf, x):
    return cf.value_and_grad(x)


def runs_apart(x):
    """Two blocked runs with a scan between them (which no run crosses)."""
    y = np.tanh(x) * 2.0 + x
    z = np.cumsum(y) * 1e-4
    return np.sum(np.exp(-z * z) * y - x)


def guarded(x):
    """A guard makes the variant replay its forward on its own, then sweep back."""
    y = np.sin(x) * x + 1.0
    if np.sum(y) > 0:
        return np.sum(np.exp(-y * y) * x)
    return np.sum(np.log1p(y * y))


@pytest.mark.parametrize("f", [w3, runs_apart, guarded])
@pytest.mark.parametrize("n", [4096, 4097, 9000, 33_333])
@pytest.mark.parametrize("threads", [2, 4])
def test_value_replay_same_bits(small_runs, f, n, threads):
    """cf(x) (and a guarded variant's forward) sweeps large plain runs in shares of blocks."""
    x = np.random.default_rng(n).normal(size=n)
    one = tape.compile(f, x, threads=1)
    many = tape.compile(f, x, threads=threads)
    for arg in (x, -0.5 * x):
        assert one(arg) == many(arg)
        _same(_calls(one, (arg,)), _calls(many, (arg,)))
    assert next(reversed(many.variants.values()))._runs  # there was a run to split


def test_thread_count_follows_numba_num_threads(monkeypatch):
    monkeypatch.setenv("NUMBA_NUM_THREADS", "1")
    assert _threads.thread_count(None) == 1
    monkeypatch.setenv("NUMBA_NUM_THREADS", "6")
    assert _threads.thread_count(None) == 4
    monkeypatch.setenv("NUMBA_NUM_THREADS", "many")  # not a number: the cores
    assert _threads.thread_count(None) >= 1


def test_calls_on_one_tape_from_many_threads_are_serialized():
    """Every call replays into the tape's own buffers, and the sweeps release the GIL: calls
    from several threads at once take turns (the tape's lock), so each gets its own inputs'
    value and gradient, never a mix. Without the lock this mixed results within a few calls."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(0)
    x0 = rng.normal(size=20000)
    cf = tape.compile(lambda x: np.sum(np.sin(x) * x) + np.sum(x[::2] ** 2), x0, threads=1)
    inputs = [x0 * (1.0 + 0.25 * k) for k in range(4)]
    want = [cf.value_and_grad(x) for x in inputs]
    want_vjp = [cf.vjp(x)[1](2.0) for x in inputs]

    def work(k):
        for j in range(30):
            x = inputs[(k + j) % 4]
            v, g = cf.value_and_grad(x)
            assert v == want[(k + j) % 4][0] and np.array_equal(g, want[(k + j) % 4][1])
            assert cf(x) == want[(k + j) % 4][0]
            value, vjp_fn = cf.vjp(x)
            try:
                assert np.array_equal(vjp_fn(2.0), want_vjp[(k + j) % 4])
            except RuntimeError as e:  # another thread's call came in between: a clear error
                assert "earlier call" in str(e)

    with ThreadPoolExecutor(4) as pool:
        for f in [pool.submit(work, k) for k in range(4)]:
            f.result()


def gmm_like(mu, L, x):
    """W2's shape of work: a batched matmul of centred data by per-component factors, then a
    sum of squares over lines (a run closed by a sum) and a logsumexp over components."""
    d = x[None, :, :] - mu[:, None, :]
    z = d @ np.swapaxes(L, -1, -2)
    q = np.sum(z * z, axis=2)
    m = np.max(-q, axis=0)
    return np.sum(m + np.log(np.sum(np.exp(-q - m), axis=0))) + np.sum(L * L)


@pytest.mark.parametrize("threads", [2, 3, 4])
@pytest.mark.parametrize("k", [2, 5])
def test_batched_matmul_pieces_same_bits(monkeypatch, threads, k):
    """A batched matmul (forward and its reverse rule) is split along its batch axis, each batch
    element one BLAS call in whichever piece: the bits of one thread, call after call."""
    from tape.reverse import backward as _backward

    monkeypatch.setattr(_backward, "THREAD_FLOPS", 1000)
    rng = np.random.default_rng(k)
    mu, L, x = rng.normal(size=(k, 4)), rng.normal(size=(k, 4, 4)), rng.normal(size=(300, 4))
    one = tape.compile(gmm_like, mu, L, x, argnums=(0, 1), threads=1)
    many = tape.compile(gmm_like, mu, L, x, argnums=(0, 1), threads=threads)
    for args in ((mu, L, x), (0.5 * mu, -L, x)):
        _same(_calls(one, args), _calls(many, args))
        assert one(*args) == many(*args)
    value, g = tape.value_and_grad(gmm_like, argnums=(0, 1))(mu, L, x)
    v2, g2 = many.value_and_grad(mu, L, x)
    assert v2 == pytest.approx(value, rel=1e-14)
    for a, b in zip(g2, g):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


def test_which_matmuls_split():
    from jit.table import OPCODE, TABLE
    from tape.reverse.backward import THREAD_FLOPS, batch_pieces

    mm = TABLE[OPCODE["matmul_blas"]]
    big = int(THREAD_FLOPS ** (1 / 3)) + 2
    assert batch_pieces(mm, (4, big, big), (4, big, big), (4, big, big), 2) == [(0, 2), (2, 4)]
    assert batch_pieces(mm, (5, big, big), (5, big, big), (5, big, big), 4) == [
        (0, 1), (1, 2), (2, 3), (3, 5)]
    assert batch_pieces(mm, (3, big, big), (3, big, big), (3, big, big), 8) == [
        (0, 1), (1, 2), (2, 3)]  # at most one piece per batch element
    for sha, shb, shy, threads in [
            ((4, big, big), (4, big, big), (4, big, big), 1),  # one thread
            ((4, big, big), (1, big, big), (4, big, big), 2),  # b broadcast over the batch
            ((4, big, big), (big, big), (4, big, big), 2),  # b 2-d: broadcast too
            ((4 * big, big), (big, big), (4 * big, big), 2),  # no batch axis
            ((1, big, big), (1, big, big), (1, big, big), 2),  # one batch element
            ((4, 3, 3), (4, 3, 3), (4, 3, 3), 2)]:  # too small to be worth it
        assert batch_pieces(mm, sha, shb, shy, threads) is None
    assert batch_pieces(TABLE[OPCODE["solve"]], (4, big, big), (4, big, big), (4, big, big),
                        2) is None


def lines_run(mu, L, s, x):
    """A batched matmul, then a run of several rows (values and adjoints kept in scratch) closed
    by a sum over lines, with a needed 0-d factor outside the run (its adjoint sums every term)."""
    z = (x[None, :, :] - mu[:, None, :]) @ L
    q = np.sum(np.tanh(z) * z * 0.5 + z * z, axis=2) * s
    return np.sum(np.log(np.sum(np.exp(-q), axis=0)))


@pytest.mark.parametrize("f", [gmm_like, lines_run])
@pytest.mark.parametrize("k, n, d", [(5, 300, 4), (3, 1000, 10), (4, 517, 7), (2, 40, 128)])
@pytest.mark.parametrize("threads", [2, 3])
def test_runs_closed_over_lines_split_same_bits(small_runs, f, k, n, d, threads):
    """Around a batched matmul (its forward and reverse sweeps run in segments), a large run
    closed by a sum over lines is split among threads both ways, each on whole blocks of whole
    lines: the bits of one thread, call after call."""
    rng = np.random.default_rng(k * n + d)
    mu, x = rng.normal(size=(k, d)), rng.normal(size=(n, d))
    L = rng.normal(size=(k, d, d)) / d  # (q of order 1: no exp underflows to 0)
    args = (mu, L, x) if f is gmm_like else (mu, L, 0.7, x)
    nums = (0, 1) if f is gmm_like else (0, 1, 2)
    one = tape.compile(f, *args, argnums=nums, threads=1)
    many = tape.compile(f, *args, argnums=nums, threads=threads)
    for call in (args, tuple(-0.5 * a for a in args[:-1]) + (x,)):
        _same(_calls(one, call), _calls(many, call))
        assert one(*call) == many(*call)
    v = next(reversed(many.variants.values()))
    A = v.A
    assert any(int(A.code[e - 1]) == OPCODE["sum"] for _, e in v._runs)
    p = v._plan(many.nums)
    found = [p.reverse_runs(lo, hi) for lo, hi in
             segment_bounds(len(A.sv), *reverse_cuts(v.t, p.need))]
    assert any(found)  # there was a reverse run to split
    value, g = tape.value_and_grad(f, argnums=nums)(*args)
    v2, g2 = many.value_and_grad(*args)
    assert v2 == pytest.approx(value, rel=1e-13)
    for a, b in zip(g2, g):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)


def diagonal_mixture(mu, s, x):
    """No matmul, so the variant is straight: (x - mu) * s squared and summed over lines is a
    run closed by a sum over lines, whose adjoint changes with every call (not seeded)."""
    z = (x[None, :, :] - mu[:, None, :]) * s[:, None, :]
    q = np.sum(z * z, axis=2)
    m = np.max(-q, axis=0)
    return np.sum(m + np.log(np.sum(np.exp(-q - m), axis=0)))


@pytest.mark.parametrize("f, shapes", [
    (diagonal_mixture, ((5, 4), (5, 4), (300, 4))),
    (diagonal_mixture, ((3, 7), (3, 7), (517, 7))),
    (product_of_sums, ((9000,), (5000,))),
])
@pytest.mark.parametrize("threads", [2, 3])
def test_straight_runs_not_seeded_split_both_ways(small_runs, f, shapes, threads):
    """A straight value_and_grad splits its large runs that are not seeded too: forward in shares
    of blocks (a sum over lines taken in), reverse likewise: the bits of one thread."""
    rng = np.random.default_rng(sum(map(sum, shapes)))
    args = tuple(rng.normal(size=shape) for shape in shapes)
    nums = tuple(range(len(args) - 1)) if f is diagonal_mixture else (0, 1)
    one = tape.compile(f, *args, argnums=nums, threads=1)
    many = tape.compile(f, *args, argnums=nums, threads=threads)
    for call in (args, tuple(0.5 * a for a in args)):
        _same(_calls(one, call), _calls(many, call))
    v = next(reversed(many.variants.values()))
    p = v._plan(many.nums)
    assert v.straight and not p.split  # nothing seeded: only the new splits apply
    assert p.plain and p.reverse_runs(0, p.rows)
    value, g = tape.value_and_grad(f, argnums=nums)(*args)
    v2, g2 = many.value_and_grad(*args)
    assert v2 == pytest.approx(value, rel=1e-13)
    for a, b in zip(g2, g):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)


def seeded_and_lines(x, w):
    """A seeded run (a plain sum) beside a run closed over lines whose adjoint changes."""
    return np.sum(np.exp(-x * x) * x) + np.sum(np.log(np.sum(w.reshape(-1, 8) ** 2 + 1.0,
                                                             axis=1)))


@pytest.mark.parametrize("threads", [2, 4])
def test_seeded_and_plain_runs_split_in_one_call(small_runs, threads):
    rng = np.random.default_rng(threads)
    args = rng.normal(size=6000), rng.normal(size=8 * 700)
    one = tape.compile(seeded_and_lines, *args, argnums=(0, 1), threads=1)
    many = tape.compile(seeded_and_lines, *args, argnums=(0, 1), threads=threads)
    for call in (args, (-args[0], 2.0 * args[1]), args):
        _same(_calls(one, call), _calls(many, call))
        assert one(*call) == many(*call)
    v = next(reversed(many.variants.values()))
    p = v._plan(many.nums)
    assert p.split and p.plain and p.reverse_runs(0, p.rows)
    value_plan = v._plans[("values", many.nums)]  # a value-only call splits both runs too
    assert value_plan.split and value_plan.plain


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [4096, 20011])
def test_seeded_zeros_keep_their_sign(small_runs, threads, n):
    """A seeded run whose sum's adjoint is a negative power of two scales the unit adjoints:
    their zeros stay +0.0 (a plain reverse adds its terms to a zeroed adjoint), the bits of
    eager's gradient, split among threads or not."""
    def f(x, y):
        return -2.0 * np.sum(x - (y - y)) - 0.25 * np.sum(np.abs(np.maximum(x, y)))

    rng = np.random.default_rng(n)
    x, y = rng.normal(size=n), rng.normal(size=n)
    eager = tape.value_and_grad(f, argnums=(0, 1))(x, y)[1]
    cf = tape.compile(f, x, y, argnums=(0, 1), threads=threads)
    for _ in range(2):
        for g, e in zip(cf.grad(x, y), eager):
            assert np.array_equal(g.view(np.int64), e.view(np.int64))
