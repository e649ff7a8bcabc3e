"""tape.compile: record once, replay value and gradient with the jitted interpreters; guards
re-record when Python would have taken another path; never a stale result."""
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import tape
from jit.table import OPCODE, OWN_VALUE, SPECIAL_ROWS, TABLE

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "asv_bench" / "benchmarks"))
from workloads import WORKLOADS  # noqa: E402

from _functions import Cube, Twice  # noqa: E402


# array rows of these run the sweep's vectorized kernels (jit/_vmath.py), in eager as in replay
VECTOR_CODES = np.array([OPCODE[p.name] for p in TABLE if p.vf])


def _variant(cf):
    return next(reversed(cf.variants.values()))


def _vector_rows(cf):
    A = _variant(cf).A
    return bool(np.any(np.isin(A.code, VECTOR_CODES) & A.is_array))


def _eager(f, args, argnums):
    return tape.value_and_grad(f, argnums=argnums)(*args)


def _close(a, b, rtol=1e-13):
    if isinstance(a, tuple):
        for x, y in zip(a, b):
            _close(x, y, rtol)
        return
    # elementwise rtol, and an absolute floor at rtol of the array's scale: a reduction may
    # sum in another order than NumPy's pairwise sum, which moves tiny elements by ulps of the
    # large ones
    b = np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * float(np.max(np.abs(b), initial=0)))


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workloads_replay_equals_eager(name):
    w = WORKLOADS[name]
    args = w.inputs()
    cf = tape.compile(w.loss, *args, argnums=w.argnums)
    rng = np.random.default_rng(1)
    moved = list(args)
    for i in w.argnums:  # new values of the same shapes
        moved[i] = np.asarray(args[i]) * (1.0 + 0.01 * rng.normal(size=np.shape(args[i])))
    for a in (args, moved):  # bit for bit on any CPU: the same loops, sums in NumPy's order
        v, g = cf.value_and_grad(*a)
        v0, g0 = _eager(w.loss, a, w.argnums)
        assert v == v0
        g, g0 = (g, g0) if isinstance(g, tuple) else ((g,), (g0,))
        assert all(np.array_equal(x, y) for x, y in zip(g, g0))
    assert cf.stats()["recordings"] == 1


FAMILIES = {
    "elementwise": lambda x, c: np.sum(np.exp(np.sin(x) * c[0]) / (1.0 + x * x)),
    "broadcast": lambda x, c: np.sum(np.maximum(x[:, None], c[None, :2]) ** 2),
    "reduce": lambda x, c: np.sum(np.max(x.reshape(2, 3), axis=1) * np.prod(c)),
    "scan": lambda x, c: np.sum(np.cumprod(x)) + np.sum(np.cumsum(c) ** 2),
    "index": lambda x, c: np.sum(x[[2, 0, 5]] * x[1:4] ** 2) + np.sum(x.reshape(2, 3).T),
    "where": lambda x, c: np.sum(np.where(np.arange(6) % 2 == 0, x, x * x)),
    "matmul": lambda x, c: np.sum(np.tanh(x.reshape(2, 3) @ np.outer(c, c))),
    "blas": lambda x, c: np.sum(np.sin(np.tile(x, (30, 30)) @ np.tile(x[:, None], (30, 5)))),
    "linalg": lambda x, c: np.linalg.slogdet(np.diag(x[:3] + 3.0) + np.outer(c, c))[1]
    + np.sum(np.linalg.solve(np.diag(c + 2.0), x[:3])),
    "scalars": lambda x, c: (x[0] * c[1] - x[2]) ** 3 / (1.0 + c[0] ** 2),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_families_replay_equals_eager(name):
    f = FAMILIES[name]
    rng = np.random.default_rng(2)
    x0, c0 = rng.normal(size=6), rng.normal(size=3)
    cf = tape.compile(f, x0, c0, argnums=(0, 1))
    for _ in range(3):
        x, c = rng.normal(size=6), rng.normal(size=3)
        v, g = cf.value_and_grad(x, c)
        v0, g0 = _eager(f, (x, c), (0, 1))
        _close(v, v0, rtol=1e-13)
        _close(g, g0, rtol=1e-11)
    assert cf.stats()["recordings"] == 1


def test_guards_on_if_and_while():
    def f(x):
        y = x
        while np.sum(y * y) > 1.0:  # data-dependent loop count
            y = y * 0.5
        if np.max(y) > 0.0:
            return np.sum(np.sin(y))
        return np.sum(np.cos(y))

    cf = tape.compile(f, np.array([3.0, 1.0]))
    for x in ([3.0, 1.0], [3.1, 1.2], [0.1, 0.2], [-0.3, -0.2], [8.0, -9.0], [3.0, 1.0]):
        x = np.array(x)
        _close(cf.value_and_grad(x), _eager(f, (x,), 0))
    s = cf.stats()
    assert s["recordings"] >= 3 and s["hits"] >= 1 and s["guard_misses"] >= 2
    assert any("test_compiled.py" in where for where, _ in s["recent_misses"])


def test_guards_on_data_dependent_indexing():
    def f(x):
        i = np.argmax(x)  # an index read from values
        return x[i] ** 2 + np.sum(x[x > 0.0])  # and a boolean mask

    cf = tape.compile(f, np.array([1.0, 3.0, -2.0]))
    for x in ([1.0, 3.0, -2.0], [1.5, 3.5, -2.5], [4.0, 3.0, 2.0], [-1.0, -3.0, -0.5]):
        x = np.array(x)
        _close(cf.value_and_grad(x), _eager(f, (x,), 0))
    assert cf.stats()["hits"] >= 1  # the second point takes the same path


def test_value_read_is_guarded_exactly():
    def f(x):
        s = np.sum(x).item()  # the value itself escapes: any change is a new program
        return np.sum(x * s)

    cf = tape.compile(f, np.ones(2))
    x = np.array([1.0, 2.0])
    v, g = cf.value_and_grad(x)
    assert v == pytest.approx(9.0) and np.allclose(g, [3.0, 3.0])  # s constant, as eager
    _close((v, g), _eager(f, (x,), 0))


def test_variant_bound_warns_and_keeps_results_right():
    def f(x):
        return np.sum(x) * x[0].item()

    cf = tape.compile(f, np.ones(2), max_variants=2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for k in range(5):
            x = np.array([float(k), 1.0])
            _close(cf.value_and_grad(x), _eager(f, (x,), 0))
    assert cf.stats()["variants"] == 2 and cf.stats()["evictions"] >= 1
    assert any("test_compiled.py" in str(m.message) for m in w)


def test_static_arguments_and_shapes():
    def f(x, n, mode):
        y = x
        for _ in range(n):
            y = np.sin(y)
        return np.sum(y) if mode == "sum" else np.max(y)

    cf = tape.compile(f, np.ones(3), 2, "sum")
    for args in ((np.ones(3), 2, "sum"), (np.ones(3), 3, "sum"), (np.ones(3), 2, "max"),
                 (np.ones(5), 2, "sum"), (np.full(3, 0.5), 3, "sum")):
        _close(cf.value_and_grad(*args), _eager(f, args, 0))
    assert cf.stats()["recordings"] == 4


def test_call_vjp_jvp_and_batch():
    def f(x, c):
        return np.tanh(x * c) + x ** 2

    x0, c = np.array([0.2, -0.4, 0.9]), np.array([1.0, 2.0, 3.0])
    cf = tape.compile(f, x0, c)
    x = np.array([0.5, 0.1, -0.3])
    np.testing.assert_allclose(cf(x, c), f(x, c), rtol=1e-15)
    v, pull = cf.vjp(x, c)
    ct = np.array([1.0, -1.0, 0.5])
    np.testing.assert_allclose(pull(ct), tape.vjp(f, x, c)[1](ct)[0], rtol=1e-14)
    u = np.array([0.3, 0.0, 1.0])
    _, t = cf.jvp((x, c), (u,))
    np.testing.assert_allclose(t, tape.jvp(lambda z: f(z, c), (x,), (u,))[1], rtol=1e-14)

    g = tape.compile(lambda x, c: np.sum(f(x, c)), x0, c)
    X = np.random.default_rng(0).normal(size=(7, 3))
    values, grads = g.value_and_grad_batch(X, c)
    assert values.shape == (7,) and grads.shape == (7, 3)
    for k in range(7):
        v, gk = _eager(lambda z: np.sum(f(z, c)), (X[k],), 0)
        np.testing.assert_allclose(values[k], v, rtol=1e-14)
        np.testing.assert_allclose(grads[k], gk, rtol=1e-13)


def test_compile_errors():
    cf = tape.compile(lambda x: np.sum(Twice.apply(x)), np.ones(2))  # replayable now
    _close(cf.grad(np.full(2, 3.0)), np.full(2, 2.0))
    with pytest.raises(TypeError, match="argument 1 \\(argnums\\) is a int, not a float"):
        tape.compile(lambda x, n: np.sum(x) * n, np.ones(2), 3, argnums=1)
    with pytest.raises(ValueError, match="argnums \\(2,\\) out of range for 2 positional"):
        tape.compile(lambda x, y: np.sum(x * y), np.ones(2), np.ones(2), argnums=2)
    cf = tape.compile(lambda x, y: np.sum(x * y), np.ones(2), np.ones(2), argnums=(0, 1))
    with pytest.raises(ValueError, match="argnums \\(0, 1\\) out of range for 1 positional"):
        cf.grad(np.ones(2))  # (a call with fewer arguments records again, and cannot)
    for bad, dtype in ((np.ones(2, dtype=np.int64), "int64"), (np.ones(2, complex), "complex128")):
        with pytest.raises(TypeError, match=f"argument 0 \\(argnums\\) is an array of dtype "
                                            f"{dtype}, not a float array"):
            cf.grad(bad, np.ones(2))
    _close(cf.grad(np.ones(2), np.full(2, 3.0))[0], np.full(2, 3.0))  # (still replays)
    with pytest.raises(ValueError, match="jvp: tangents\\[1\\] has shape \\(2, 1\\), argument 1 "
                                         "has shape \\(2,\\)"):
        cf.jvp((np.ones(2), np.ones(2)), (np.ones(2), np.ones((2, 1))))  # (not reshaped)
    with pytest.raises(ValueError, match="hvp: v\\[0\\] has shape \\(3,\\), argument 0"):
        cf.hvp((np.ones(2), np.ones(2)), (np.ones(3), np.ones(2)))
    with pytest.raises(ValueError, match="out of range for 1 positional"):
        cf.hvp((np.ones(2),), (np.ones(2), np.ones(2)))
    for out, what in (((1.0, 2.0), "a tuple"), (None, "None")):
        with pytest.raises(TypeError, match=f"f returned {what}; a compiled f returns one"):
            tape.compile(lambda x, out=out: out, np.ones(2))
    outside = tape.tensor(np.ones(2), requires_grad=True) * 2.0
    with pytest.raises(RuntimeError, match="several tapes"):
        tape.compile(lambda x: np.sum(x * outside), np.ones(2))


BLAS_CASES = {  # (loss, whether some BLAS operand's adjoint is written in place)
    "sole consumer": (lambda A, B: np.sum(np.sin(np.tanh(A) @ B)), True),
    "inputs themselves": (lambda A, B: np.sum(np.sin(A @ B)), True),
    "two consumers": (lambda A, B: np.sum(np.sin(np.tanh(A) @ B)) + np.sum(np.tanh(A) ** 2),
                      True),  # (B's adjoint still is)
    "equal operands": (lambda A, B: np.sum(np.sin((A[:50, :50] * 1.0) @ (A[:50, :50] * 1.0))),
                       True),  # (two slots, one consumer each)
    "same slot twice": (lambda A, B: np.sum(np.sin(_twice(A[:50, :50] * 1.0))), False),
    "batch broadcast": (lambda A, B: np.sum(np.sin(np.reshape(A * 1.0, (3, 20, 50)) @ B)), True),
    "output is the product": (lambda A, B: (A * 1.0) @ B, True),
}


def _twice(M):
    return M @ M


@pytest.mark.parametrize("name", sorted(BLAS_CASES))
def test_blas_adjoints_in_place_equal_eager(name):
    """A BLAS row that alone contributes to an operand's adjoint writes it straight into the
    operand's zeroed block; the results, and the next call's, are those of the eager path."""
    f, in_place = BLAS_CASES[name]
    rng = np.random.default_rng(5)
    A, B = rng.normal(size=(60, 50)), rng.normal(size=(50, 40))
    cf = tape.compile(f, A, B, argnums=(0, 1))
    scalar = np.ndim(cf(A, B)) == 0
    for _ in range(2):
        A, B = rng.normal(size=(60, 50)), rng.normal(size=(50, 40))
        if scalar:
            got, want = cf.value_and_grad(A, B), _eager(f, (A, B), (0, 1))
        else:
            seed = rng.normal(size=(60, 40))
            got = cf.vjp(A, B)[1](seed)
            want = tape.vjp(f, A, B)[1](seed)
        _close(got, want, rtol=1e-12)
        plan = next(iter(_variant(cf)._plans.values()))
        assert _clean_for_the_next_call(_variant(cf), plan)
    assert any(bits & 3 for bits in plan.fresh.values()) == in_place


def _clean_for_the_next_call(v, plan):
    """The arena is all zeros after a call but for the adjoints of escape rows that one row
    alone adds to (that row zeroes them before adding: need bits FRESH_A / FRESH_B) and the
    operands' adjoints that an escape's rule overwrites whole (fresh bits 1 / 2)."""
    G = plan.G.copy()
    for c in v.escapes:
        bits = plan.fresh.get(c, 0)
        stale = [c] if plan.live[c] and not bits & 4 else []
        stale += [s for s, bit in ((v.A.R[c, 1], 1), (v.A.R[c, 2], 2)) if bits & bit]
        for s in stale:
            G[plan.GO[s]:plan.GO[s] + v.A.size[s]] = 0.0
    return not G.any()


def test_escape_adjoint_zeroed_by_its_one_writer():
    """sin(A @ B): the sin row alone adds to the product's adjoint, so it zeroes the block just
    before adding (need bits FRESH_A / FRESH_B) and the BLAS rule leaves it as read: calls
    after the first, with other inputs, still equal eager; a row whose adjoint two rows add
    to, or of another size, is not marked."""
    import jit

    rng = np.random.default_rng(6)
    cases = {"one writer": (lambda A, B: np.sum(np.sin(A @ B)), True),
             "two products": (lambda A, B: np.sum((A @ B) * (A @ B)), True),  # (a and b)
             "square of one product": (lambda A, B: np.sum(_square(A @ B)), True),
             "two writers": (_two_writers, False),
             "a broadcast writer": (lambda A, B: np.sum(np.sin(A @ B) @ np.ones(40)), True),
             "a reduction": (lambda A, B: np.sum(np.sum(A @ B, axis=1) ** 2), False)}
    big = (lambda A, B: np.sum(np.tanh(np.sin(A @ B)) * 3.0), True)  # sin: in a blocked run
    for name, (f, marked) in [*cases.items(), ("in a run", big)]:
        shapes = ((200, 50), (50, 100)) if name == "in a run" else ((60, 50), (50, 40))
        A, B = rng.normal(size=shapes[0]), rng.normal(size=shapes[1])
        cf = tape.compile(f, A, B, argnums=(0, 1))
        for _ in range(3):
            A2, B2 = rng.normal(size=shapes[0]), rng.normal(size=shapes[1])
            _close(cf.value_and_grad(A2, B2), _eager(f, (A2, B2), (0, 1)), rtol=1e-12)
        v = _variant(cf)
        plan = next(iter(v._plans.values()))
        fresh_rows = np.flatnonzero(plan.need & (jit.FRESH_A | jit.FRESH_B))
        assert (len(fresh_rows) > 0) == marked, name
        for c in v.escapes:
            assert bool(plan.fresh.get(c, 0) & 4) == (plan.live[c] and not any(
                c in v.A.R[j, 1:3] for j in fresh_rows)), name


def _square(P):
    return P * P


def _two_writers(A, B):
    P = A @ B
    return np.sum(np.sin(P)) + np.sum(np.cos(P))


def _module_level_loss(w, X):
    return np.sum(np.tanh(X @ w) ** 2)


def test_pickle_round_trip():
    import pickle

    rng = np.random.default_rng(3)
    X, w = rng.normal(size=(5, 3)), rng.normal(size=3)
    cf = tape.compile(_module_level_loss, w, X)
    cf2 = pickle.loads(pickle.dumps(cf))
    w1 = rng.normal(size=3)
    v, g = cf2.value_and_grad(w1, X)
    v0, g0 = cf.value_and_grad(w1, X)
    assert v == v0 and np.array_equal(g, g0)


# -- persistence ------------------------------------------------------------------------------

def _saved_loss(w, X, idx):
    z = X @ w
    if np.sum(z) > 0:
        z = z * 2.0
    return np.sum(np.tanh(z[idx]) ** 2) + np.linalg.slogdet(np.diag(w[:3] * w[:3] + 1.0))[1]


def _saved_setup():
    rng = np.random.default_rng(4)
    X, w = rng.normal(size=(40, 30)), rng.normal(size=30)
    idx = np.array([0, 5, 7])
    return X, w, idx


def test_save_and_load_replay_bitwise(tmp_path):
    X, w, idx = _saved_setup()
    cf = tape.compile(_saved_loss, w, X, idx)
    path = tmp_path / "loss.npz"
    cf.save(path)
    lt = tape.load(path)
    for ww in (w, w * 1.01, w + 0.1):
        v, g = lt.value_and_grad(ww, X, idx)
        v0, g0 = cf.value_and_grad(ww, X, idx)
        assert v == v0 and np.array_equal(g, g0)
    data = np.load(path, allow_pickle=False)  # plain arrays only, no pickled code
    assert "meta" in data.files and data["R"].dtype == np.int64
    # 0-d rows are stored as -1 and marked again on load (-1 - the end of their run)
    R = next(iter(cf.variants.values())).A.R
    assert (R[:, 3] < -1).any() and data["R"][:, 3].min() == -1
    assert np.array_equal(next(iter(lt.variants.values())).A.R, R)


def test_loaded_tape_guards(tmp_path):
    X, w, idx = _saved_setup()
    cf = tape.compile(_saved_loss, w, X, idx)
    path = tmp_path / "loss.npz"
    cf.save(path)
    with pytest.raises(RuntimeError, match="guard at .*test_compiled.py.* differs.*f="):
        tape.load(path).value_and_grad(-w, X, idx)  # the other branch of the if
    with pytest.raises(RuntimeError, match="do not fit"):
        tape.load(path)(w, X, np.array([1, 2, 3]))  # a different static index array
    lt = tape.load(path, f=_saved_loss)
    _close(lt.value_and_grad(-w, X, idx), _eager(_saved_loss, (-w, X, idx), 0))
    import pickle

    lp = pickle.loads(pickle.dumps(tape.load(path)))  # pickles as its arrays
    assert lp(w, X, idx) == cf(w, X, idx)


def test_load_rejects_bad_files(tmp_path):
    X, w, idx = _saved_setup()
    path = tmp_path / "loss.npz"
    tape.compile(_saved_loss, w, X, idx).save(path)
    raw = path.read_bytes()
    bad = tmp_path / "bad.npz"
    bad.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="not a readable compiled tape"):
        tape.load(bad)
    with pytest.raises(ValueError, match="No such file"):
        tape.load(tmp_path / "missing.npz")
    bad.write_bytes(b"not an archive")  # NumPy's own message would suggest allow_pickle
    with pytest.raises(ValueError, match="not an .npz archive of plain arrays") as e:
        tape.load(bad)
    assert "pickle" not in str(e.value)
    files = dict(np.load(path, allow_pickle=False))
    import json

    meta = json.loads(bytes(files["meta"]).decode())
    meta["table_hash"] = "0" * 16
    files["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(bad, **files)
    with pytest.raises(ValueError, match="table hash differs"):
        tape.load(bad)
    files = dict(np.load(path, allow_pickle=False))
    R = files["R"].copy()
    R[-1, 1] = len(R) + 5  # an operand that is not an earlier row
    files["R"] = R
    np.savez(bad, **files)
    with pytest.raises(ValueError, match="operand slots must be earlier rows"):
        tape.load(bad)


@pytest.mark.slow
def test_fuzzed_files_never_crash():
    """Thousands of random mutations of a saved tape, loaded and replayed in a subprocess:
    Python errors are fine, a crash (segfault, abort) is not."""
    import subprocess

    script = Path(__file__).with_name("_fuzz_saved_tape.py")
    r = subprocess.run([sys.executable, "-W", "ignore", str(script), "3000", "7"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    n, loaded, rejected = (int(x) for x in r.stdout.split())
    assert n == 3000 and loaded + rejected == n and rejected > n // 2


def test_hvp_on_the_replayed_recording():
    def f(x, c):
        return np.sum(np.sin(x) * x ** 2 * c)

    x0, c = np.array([0.3, -0.8, 1.2]), np.array([1.0, 2.0, 0.5])
    cf = tape.compile(f, x0, c)
    v = np.array([1.0, 0.5, -2.0])
    for x in (x0, x0 + 0.3):
        hv = cf.hvp((x, c), v)
        np.testing.assert_allclose(hv, tape.hvp(lambda z: f(z, c), x, v), rtol=1e-13)
        _close(cf.value_and_grad(x, c), _eager(f, (x, c), 0))  # replays still work after


def test_results_do_not_depend_on_whether_a_call_recorded():
    """A call that records a new variant returns the replay's values, as every later call does."""
    def f(x):
        return np.sum(np.sin(x) ** 2) if np.max(x) > 0 else np.sum(np.cos(x) ** 3)

    rng = np.random.default_rng(5)
    xs = [rng.normal(size=50) for _ in range(6)] + [-np.abs(rng.normal(size=50))]
    first = [tape.compile(f, x).value_and_grad(x) for x in xs]  # each one records
    cf = tape.compile(f, xs[0])
    for x in xs:
        cf.value_and_grad(x)
    again = [cf.value_and_grad(x) for x in xs]  # each one replays
    for (v1, g1), (v2, g2) in zip(first, again):
        assert v1 == v2 and np.array_equal(g1, g2)


def test_batch_in_threads_equals_serial():
    def f(x, c):
        y = np.sum(np.sin(x) * c)
        if np.max(x) > 0.5:  # rows take both branches: other-branch rows fall back
            return y * y
        return np.sum(np.cumprod(np.cos(x))) + y

    c = np.array([1.0, 2.0, 0.5])
    X = np.random.default_rng(6).normal(size=(40, 3))
    for threads in (2, 3):
        cf = tape.compile(f, X[0], c)
        v1, g1 = cf.value_and_grad_batch(X, c)
        v2, g2 = tape.compile(f, X[0], c).value_and_grad_batch(X, c, threads=threads)
        assert np.array_equal(v1, v2) and np.array_equal(g1, g2)
        for k in (0, 7, 39):
            _close(cf.value_and_grad(X[k], c), _eager(f, (X[k], c), 0))


def test_one_call_value_and_grad_equals_two_sweeps():
    """A recording with no guards and no BLAS or linalg rows replays value and gradient in one
    jitted call; the result is that of a forward sweep followed by a reverse sweep, bit for
    bit, and the value-only, vjp and batch paths around it stay right."""
    w = WORKLOADS["lorenz"]
    args = w.inputs()
    cf = tape.compile(w.loss, *args)
    v = _variant(cf)
    assert v.straight
    rng = np.random.default_rng(5)
    for _ in range(3):
        p = args[0] * (1.0 + 0.01 * rng.normal(size=3))
        value, g = cf.value_and_grad(p)
        assert v.deferred  # it took the one-call path
        assert cf(p) == value  # a forward sweep alone
        assert np.array_equal(v.gradient(cf.nums)[0], g)  # a reverse sweep alone
        value2, vjp = cf.vjp(p)
        assert value2 == value and np.array_equal(vjp(1.0), g)
    values, grads = cf.value_and_grad_batch(np.stack([args[0], p]))
    assert values[1] == value and np.array_equal(grads[1], g)
    # not straight: guards or a BLAS row keep the forward sweep a call of its own
    cf2 = tape.compile(lambda x: np.sum(x @ np.ones((40, 40))) if x[0] > 0 else -np.sum(x),
                       np.ones(40))
    assert not next(reversed(cf2.variants.values())).straight
    _close(cf2.value_and_grad(np.full(40, 2.0))[1], np.full(40, 40.0))
    _close(cf2.value_and_grad(np.full(40, -2.0))[1], np.full(40, -1.0))


def test_a_failed_one_call_gradient_leaves_no_stale_value():
    """A non-scalar output fails before the sweep: the next value is still the new one."""
    cf = tape.compile(lambda x: x * 2.0, np.ones(3))
    with pytest.raises(TypeError, match="scalar output"):
        cf.value_and_grad(np.full(3, 5.0))
    assert np.array_equal(cf(np.full(3, 7.0)), np.full(3, 14.0))


class _SoftClip(tape.Function):
    """tanh-shaped clip with its own backward: saves an input and an output."""

    @staticmethod
    def forward(ctx, x, scale):
        y = scale * np.tanh(x / scale)
        ctx.save_for_backward(x, y)
        ctx.scale = scale
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * (1.0 - (y / ctx.scale) ** 2), None


def _with_functions(x, w):
    h = _SoftClip.apply(x * w, 2.0)
    return np.sum(Cube.apply(h) * w) + Cube.apply(np.sum(h))


def test_custom_functions_replay():
    """A recording with custom Functions replays: each call runs their forward at its hub and
    their backward in the sweep, with the new values; results equal eager ones."""
    rng = np.random.default_rng(7)
    x0, w0 = rng.normal(size=5), rng.normal(size=5)
    cf = tape.compile(_with_functions, x0, w0, argnums=(0, 1))
    assert not _variant(cf).straight
    for _ in range(3):
        x, w = rng.normal(size=5) * 2, rng.normal(size=5)
        v, g = cf.value_and_grad(x, w)
        v0, g0 = _eager(_with_functions, (x, w), (0, 1))
        _close(v, v0)
        _close(g, g0, rtol=1e-12)
        _close(cf(x, w), v0)
    assert cf.stats()["recordings"] == 1
    value, vjp = cf.vjp(x, w)
    _close(vjp(1.0), g)
    _close(vjp(1.0), g)  # the saved values outlive one backward
    X = rng.normal(size=(4, 5))
    values, grads = cf.value_and_grad_batch(X, w, threads=2)  # rows in turn
    for r in range(4):
        _close(values[r], _eager(_with_functions, (X[r], w), (0, 1))[0])
    with pytest.raises(NotImplementedError, match="custom Functions"):
        cf.jvp((x, w), (x, w))


def test_custom_function_replay_errors(tmp_path):
    cf = tape.compile(_with_functions, np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="custom Functions"):
        cf.save(tmp_path / "f.npz")

    class Positive(tape.Function):  # an output whose shape depends on the values
        @staticmethod
        def forward(ctx, x):
            return x[x.numpy() > 0]

        @staticmethod
        def backward(ctx, g):
            raise AssertionError("not reached")

    cf2 = tape.compile(lambda x: np.sum(Positive.apply(x)), np.array([1.0, -1.0, 2.0]))
    _close(cf2(np.array([3.0, -1.0, 1.0])), 4.0)
    with pytest.raises(RuntimeError, match=r"shape \(1,\) on replay, \(2,\) when recorded"):
        cf2(np.array([3.0, -1.0, -1.0]))

    class WithIndex(tape.Function):  # a non-differentiable output would be frozen
        @staticmethod
        def forward(ctx, x):
            return x * 2.0, np.argmax(x.numpy())

        @staticmethod
        def backward(ctx, g, gi):
            return 2.0 * g

    with pytest.raises(RuntimeError, match="WithIndex .* not a differentiable float array"):
        tape.compile(lambda x: np.sum(WithIndex.apply(x)[0]), np.ones(3))


def test_transcendental_rows_replay_eager_bit_for_bit():
    """Every elementwise row is swept (no Python stop), and eager computes the same rows with
    the same loops (jit.elementwise): values and gradients bit for bit, whichever loops NumPy
    would pick on this CPU. Large rows run block by block in the replay, one element at a time
    in eager's loop: the same arithmetic."""
    names = sorted(TABLE[c].name for c in OWN_VALUE - SPECIAL_ROWS if TABLE[c].family == "unary")

    def f(x):
        total = 0.0
        for name in names:
            u = getattr(np, name)
            arg = {"arccosh": 1.5 + x * x, "log": 2.0 + x, "log2": 2.0 + x, "log10": 2.0 + x,
                   "log1p": 1.0 + x}.get(name, x / 2.0)
            total = total + np.sum(u(arg))
        return total + np.sum(np.arctan2(x, 1.5) + np.hypot(x, 2.0) + np.logaddexp(x, -x)
                              + np.fmax(x, 0.1) + (1.5 + x) ** 1.7)

    x = np.linspace(-1.4, 1.4, 10_000)
    cf = tape.compile(f, x)
    assert not _variant(cf).cuts
    for a in (x, 0.99 * x):
        value, g = cf.value_and_grad(a)
        value0, g0 = _eager(f, (a,), 0)
        assert value == value0 and np.array_equal(g, g0)
    for name in ("elementwise", "mlp"):
        w = WORKLOADS[name]
        args = w.inputs()
        cf = tape.compile(w.loss, *args, argnums=w.argnums)
        v = _variant(cf)
        assert set(v.cuts) == set(v.escapes) and _vector_rows(cf)  # W4's BLAS matmuls only


def test_a_long_recording_stays_on_one_tape(monkeypatch):
    """Past MAX_ROWS rows an eager run rolls over to a new tape; a compiled recording does not
    (its replay sweeps one tape), so loops of any length compile. MAX_ROWS is lowered to 500
    here (W1's 14,000 rows would otherwise need 75x the steps)."""
    import tape.core.record
    import tape.core.tape
    import tape.core.tensor_ops
    import tape.reverse.function

    for module in (tape.core.record, tape.core.tape, tape.core.tensor_ops, tape.reverse.function):
        monkeypatch.setattr(module, "MAX_ROWS", 500)
    w = WORKLOADS["lorenz"]
    args = w.inputs()
    x = tape.tensor(args[0], requires_grad=True)
    eager_loss = w.loss(x)
    assert len(list(tape.core.tape.linked_tapes([eager_loss._tape]))) > 20  # eager rolled over
    cf = tape.compile(w.loss, *args)
    v = _variant(cf)
    assert len(v.A.sv) > 14000 and not v.t.links
    p = args[0] * 1.01
    value, g = cf.value_and_grad(p)
    value0, g0 = _eager(w.loss, (p,), 0)
    _close(value, value0)
    _close(g, g0, rtol=1e-10)


def test_nested_transforms_compile():
    """tape.compile of a function that calls transforms (grad, hessian, jacfwd(grad), jvp)
    records them on one tape and replays them: jit(grad(f)) and friends."""
    def f(x):
        return np.sum(np.sin(x) * x ** 2) + np.prod(x[:2])

    x0, x1 = np.array([0.3, -1.2, 2.0]), np.array([0.5, 0.7, -1.1])
    u = np.array([1.0, -0.5, 0.25])
    cases = [(lambda x: tape.grad(f)(x), tape.grad(f)),
             (lambda x: tape.hessian(f)(x), tape.hessian(f)),
             (lambda x: tape.jacfwd(tape.grad(f))(x), tape.hessian(f)),
             (lambda x: tape.jvp(f, (x,), (u,))[1], lambda x: tape.jvp(f, (x,), (u,))[1])]
    for g, ref in cases:
        cg = tape.compile(g, x0)
        for x in (x0, x1):
            _close(cg(x), ref(x), rtol=1e-12)
        assert cg.stats()["recordings"] == 1
    cg = tape.compile(lambda x: tape.grad(f)(x), x0)  # its jvp is a Hessian-vector product
    _close(cg.jvp((x1,), (u,))[1], tape.hessian(f)(x1) @ u, rtol=1e-12)

    def outer(x):  # perturbation confusion would differentiate x inside the inner grad too
        return np.sum(x * tape.grad(lambda z: np.sum(x * z))(x))  # = sum(x * x)

    cg = tape.compile(lambda x: tape.grad(outer)(x), x0)
    _close(cg(x1), 2.0 * x1, rtol=1e-14)
    _close(tape.compile(outer, x0).grad(x1), 2.0 * x1, rtol=1e-14)


def test_hvp_through_a_compiled_gradient():
    """cf.hvp replays a compiled gradient in tangent mode; it equals the recorded-rules path
    (used for tapes loaded without f), with one or several argnums and a float argument."""
    def f(x, s, c):
        y = x
        for _ in range(20):
            y = y + 0.1 * (s * np.sin(y) - c * y * y)
        return np.sum(y * y) * s

    x, s, c = np.array([0.3, -0.4, 0.8]), 1.3, 0.2
    for argnums, v in ((0, np.array([1.0, 2.0, -1.0])), ((0, 1), (np.array([1.0, 0.5, 0.0]), 2.0))):
        cf = tape.compile(f, x, s, c, argnums=argnums)
        for point in ((x, s, c), (x * 1.1, s * 0.9, c)):
            fast = cf.hvp(point, v)
            slow = cf._hvp_recorded(point, v if isinstance(v, tuple) else (v,))
            _close(fast, slow, rtol=1e-11)
        assert cf._grad_tape.stats()["recordings"] == 1


def test_hvp_of_a_loaded_tape_without_f(tmp_path):
    cf = tape.compile(lambda x: np.sum(np.exp(x) * x), np.array([0.1, 0.2]))
    cf.save(tmp_path / "t.npz")
    loaded = tape.load(tmp_path / "t.npz")
    x, v = np.array([0.3, -0.2]), np.array([1.0, 2.0])
    _close(loaded.hvp((x,), v), cf.hvp((x,), v), rtol=1e-12)


def _mixed(x, s, m, k):
    """Array, 0-d and one-element inputs and a static int: 0-d rows and array rows."""
    return np.sum(np.sin(x) * s) + m[0] * s * s + np.sum(x[:k] ** 2)


def test_lean_call_equals_the_general_path():
    """value_and_grad's lean call (a straight variant: inputs copied in, one sweep, the gradient
    copied out) gives the general path's bits, and hands every call it cannot take (another
    shape, a list, a Tensor, another static) to it."""
    rng = np.random.default_rng(11)
    x, m = rng.normal(size=5), np.array([0.3])
    cf = tape.compile(_mixed, x, 1.5, m, 2, argnums=(0, 1, 2))
    general = tape.compile(_mixed, x, 1.5, m, 2, argnums=(0, 1, 2))
    cf.value_and_grad(x, 1.5, m, 2)
    assert cf._lean is not None
    for xx, ss, mm in [(x * 1.1, 0.7, m + 1.0), (x - 0.3, -2.0, m * 3), (x, 1.5, m)]:
        hits = cf.counters["hits"]
        got = cf.value_and_grad(xx, ss, mm, 2)
        assert cf.counters["hits"] == hits + 1
        general._lean = None  # the general path every time
        want = general.value_and_grad(xx, ss, mm, 2)
        general._lean = None
        assert got[0] == want[0]
        for g, w in zip(got[1], want[1]):
            assert np.array_equal(g, w) and np.shape(g) == np.shape(w)
        _close(got, _eager(lambda a, b, c: _mixed(a, b, c, 2), (xx, ss, mm), (0, 1, 2)))
    # calls the lean one hands over: each also equals eager
    for args in [(rng.normal(size=7), 0.2, m, 2), (list(x), 0.2, m, 2), (x, 0.2, m, 3),
                 (tape.tensor(x), 0.2, m, 2), (x, np.float64(0.2), m, 2)]:
        v, g = cf.value_and_grad(*args)
        ev, eg = _eager(lambda a, b, c: _mixed(a, b, c, args[3]),
                        (np.asarray(tape.tensor(args[0])._v if isinstance(args[0], tape.Tensor)
                                    else args[0], dtype=float), float(args[1]), args[2]),
                        (0, 1, 2))
        _close((v,) + tuple(g), (ev,) + tuple(eg))
    # a value-only call in between resets it; the next value_and_grad sets it again
    cf(x, 1.5, m, 2)
    assert cf._lean is None
    cf.value_and_grad(x, 1.5, m, 2)
    assert cf._lean is not None


def test_no_lean_call_for_guards_escapes_or_large_inputs():
    rng = np.random.default_rng(12)
    X = rng.normal(size=(6, 6))

    def guarded(w):
        return np.sum(w * w) if np.sum(w).item() > 0 else np.sum(w)

    def escaped(w):
        return np.sum(np.linalg.inv(X + np.diag(w * w + 3.0)))

    big = rng.normal(size=1 << 15)
    for f, a in [(guarded, np.ones(3)), (escaped, np.ones(6)), (lambda w: np.sum(w * w), big)]:
        cf = tape.compile(f, a)
        v, g = cf.value_and_grad(a)
        assert cf._lean is None
        _close((v, g), _eager(f, (a,), 0))


@pytest.mark.parametrize("name", ["sum", "prod", "amax", "amin"])
@pytest.mark.parametrize("shape, axis", [((3, 4, 5), (0, 2)), ((6, 50, 7), (0, -1)),
                                         ((2, 3, 4, 5), (1, 3)), ((4, 5, 6), (2, 0))])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_over_axes_apart_replay_eager_bits(name, shape, axis, keepdims):
    """Reduced axes that are not adjacent are moved into a trailing block; eager takes its
    value from that block's reduction, as the replay does, so the two agree bit for bit
    (NumPy's order over the original axes can differ by an ulp)."""
    x = np.random.default_rng(len(shape)).uniform(0.5, 1.5, size=shape)
    x.flat[7] = x.flat[11]  # (a tie for max and min)
    fn = getattr(np, name)

    def f(a):
        return np.sum(np.sin(fn(a * 1.5, axis=axis, keepdims=keepdims)))

    value, grad = tape.value_and_grad(f)(x)
    cf = tape.compile(f, x)
    for _ in range(2):
        v, g = cf.value_and_grad(x)
        assert v == value and np.array_equal(g, grad)
    np.testing.assert_allclose(value, np.sum(np.sin(fn(x * 1.5, axis=axis, keepdims=keepdims))),
                               rtol=1e-14)
