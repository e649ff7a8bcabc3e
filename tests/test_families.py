"""The family kernel bodies of jit/families/ as real code: each runs in Python against NumPy,
in every mode it has; the skeleton copies them verbatim and refuses a body its kernel cannot
run; the layouts round-trip; and one elementwise table row works end to end in every mode."""
import ctypes
import importlib.util
import inspect

import numpy as np
import pytest

import tape
from jit import _assemble, _generate, _generate_tangent
from jit.families import family_modules, gather, layouts, matmul, reduce, scan, where
from tests._fd import check_vjp
from tests._tolerance import assert_within, rounding_bound, sum_bound


def _ld(addr, i):
    return ctypes.c_double.from_address(int(addr) + 8 * int(i)).value


def _st(addr, i, v):
    ctypes.c_double.from_address(int(addr) + 8 * int(i)).value = float(v)


@pytest.fixture
def python_raw(monkeypatch):
    """The family modules' raw loads and stores as plain Python (the bodies then run as Python
    whether or not Numba is enabled)."""
    for module in (matmul, reduce, scan, where, gather):
        for name, fn in (("_ld", _ld), ("_st", _st), ("_addr", lambda a: a.ctypes.data)):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, fn)
        for name, value in list(vars(module).items()):  # jitted helpers (_pairwise, ...) too
            if hasattr(value, "py_func"):
                monkeypatch.setattr(module, name, value.py_func)


def _p(a):
    return a.ctypes.data


def _mm_bound(x, y, batch_sum=False):
    """How far two correct evaluations of x @ y (broadcast over the leading axes, and summed
    over the first when `batch_sum`) may differ: sum_bound of the products."""
    terms = x[..., :, :, None] * y[..., None, :, :]
    return sum_bound(terms, axis=(0, -2) if batch_sum else -2)


@pytest.mark.parametrize("B, M, K, N, ba, bb", [(1, 2, 3, 4, 1, 1), (3, 2, 1, 2, 1, 0),
                                                (2, 1, 3, 1, 0, 1), (2, 0, 3, 2, 1, 1),
                                                (1, 1, 1, 1, 1, 1)])
def test_matmul_bodies_every_mode(python_raw, B, M, K, N, ba, bb):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(((B if ba else 1), M, K))
    b = rng.standard_normal(((B if bb else 1), K, N))
    IA = np.array(layouts.encode_matmul(B, M, K, N, ba, bb), np.int64)
    assert layouts.decode_matmul(IA, 0) == (B, M, K, N, ba, bb)
    want = np.matmul(a, b)
    y = np.full((B, M, N), np.nan)
    matmul.forward_matmul(iat=0, pa=_p(a), pb=_p(b), py=_p(y), IA=IA)
    assert_within(y, want, _mm_bound(a, b))  # (NumPy's matmul sums in BLAS's order)
    # reverse: G holds [adjoint of a | of b | of y]; nd = 3 asks for both
    gy = rng.standard_normal((B, M, N))
    G = np.concatenate([np.zeros(a.size), np.zeros(b.size), gy.reshape(-1)])
    matmul.reverse_matmul(nd=3, iat=0, pa=_p(a), ga=0, pb=_p(b), gb=a.size, gy=a.size + b.size,
                          G=G, IA=IA)
    ga_want = np.matmul(gy, np.swapaxes(b, -1, -2))
    gb_want = np.matmul(np.swapaxes(a, -1, -2), gy)
    if not ba:
        ga_want = ga_want.sum(0, keepdims=True)
    if not bb:
        gb_want = gb_want.sum(0, keepdims=True)
    assert_within(G[:a.size].reshape(a.shape), ga_want,
                  _mm_bound(gy, np.swapaxes(b, -1, -2), batch_sum=not ba))
    assert_within(G[a.size:a.size + b.size].reshape(b.shape), gb_want,
                  _mm_bound(np.swapaxes(a, -1, -2), gy, batch_sum=not bb))
    # tangent, k = 2 directions: dY = dA B + A dB; the adjoint identity <gy, J u> = <J^T gy, u>
    k = 2
    da = rng.standard_normal((k,) + a.shape)
    db = rng.standard_normal((k,) + b.shape)
    T = np.concatenate([da.reshape(-1), db.reshape(-1), np.full(k * y.size, np.nan)])
    matmul.tangent_matmul(nd=3, n=y.size, k=k, iat=0, pa=_p(a), ta=0, na=a.size, pb=_p(b),
                          tb=da.size, nb=b.size, ty=da.size + db.size, T=T, IA=IA)
    dy = T[da.size + db.size:].reshape((k,) + y.shape)
    assert_within(dy, np.matmul(da, b) + np.matmul(a, db), _mm_bound(da, b) + _mm_bound(a, db))
    for j in range(k):
        # both sides are one triple sum over (batch, m, k, n) of gy da b + gy a db, in other
        # orders: any order is within (terms - 1) roundings of the sum of |terms| each side
        size = np.sum(np.abs(gy) * (np.abs(da[j]) @ np.abs(b) + np.abs(a) @ np.abs(db[j])))
        assert_within(np.sum(gy * dy[j]), np.sum(ga_want * da[j]) + np.sum(gb_want * db[j]),
                      sum_bound(size, ops=4 * (2 * B * M * K * N + 8)))


@pytest.mark.parametrize("shape, axis", [((4, 5, 3), 1), ((6, 200), 1), ((3, 4), 0), ((0, 3), 0),
                                         ((1,), 0)])
def test_sum_bodies_every_mode(python_raw, shape, axis):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    P, R, Q = int(np.prod(shape[:axis])), shape[axis], int(np.prod(shape[axis + 1:]))
    IA = np.array(layouts.encode_reduce(P, R, Q), np.int64)
    assert layouts.decode_reduce(IA, 0) == (P, R, Q)
    y = np.full(P * Q, np.nan)
    reduce.forward_sum(iat=0, pa=_p(x), py=_p(y), IA=IA)
    ops = max(16, 2 * R)  # (any order of R terms: R - 1 roundings each side)
    assert_within(y, x.sum(axis).reshape(-1), sum_bound(x, axis, ops).reshape(-1))
    gy = rng.standard_normal(P * Q)
    G = np.concatenate([np.zeros(x.size), gy])
    reduce.reverse_sum(iat=0, ga=0, gy=x.size, G=G, IA=IA)
    np.testing.assert_array_equal(G[:x.size].reshape(P, R, Q),
                                  np.broadcast_to(gy.reshape(P, 1, Q), (P, R, Q)))
    dx = rng.standard_normal(x.size)
    T = np.concatenate([dx, np.full(P * Q, np.nan)])
    reduce.tangent_sum(n=P * Q, k=1, iat=0, ta=0, na=x.size, ty=x.size, T=T, IA=IA)
    assert_within(T[x.size:], dx.reshape(P, R, Q).sum(1).reshape(-1),
                  sum_bound(dx.reshape(P, R, Q), 1, ops).reshape(-1))


def test_cumprod_bodies_every_mode_with_a_zero(python_raw):
    x = np.array([[2.0, 0.0, 3.0, -1.5], [0.5, 4.0, 0.0, 0.0]])
    IA = np.array(layouts.encode_reduce(2, 4, 1), np.int64)
    y = np.full(8, np.nan)
    scan.forward_cumprod(iat=0, pa=_p(x), py=_p(y), IA=IA)
    np.testing.assert_array_equal(y.reshape(2, 4), np.cumprod(x, axis=1))
    J = np.zeros((8, 8))  # the exact Jacobian, by the product of the other factors
    for p in range(2):
        for r in range(4):
            for s in range(r + 1):
                J[p * 4 + r, p * 4 + s] = np.prod(np.delete(x[p, :r + 1], s))
    gy = np.arange(1.0, 9.0)
    G = np.concatenate([np.zeros(8), gy])
    scan.reverse_cumprod(iat=0, pa=_p(x), ga=0, py=_p(y), gy=8, G=G, IA=IA)
    assert_within(G[:8], J.T @ gy, sum_bound(J.T * gy, axis=1))
    dx = np.linspace(-1.0, 1.0, 8)
    T = np.concatenate([dx, np.full(8, np.nan)])
    scan.tangent_cumprod(n=8, k=1, iat=0, pa=_p(x), ta=0, na=8, py=_p(y), ty=8, T=T, IA=IA)
    assert_within(T[8:], J @ dx, sum_bound(J * dx, axis=1))


def test_where_and_gather_bodies(python_raw):
    a = np.array([1.0, 2.0, 3.0, 4.0])
    b = np.array([10.0])  # one element, read at stride 0
    mask = np.array([1, 0, 0, 1])
    IA = layouts.encode_where(-1, -1, mask)
    y = np.zeros(4)
    where.forward_where(n=4, iat=0, pa=_p(a), pb=_p(b), py=_p(y), IA=IA, sta=1, stb=0, ma=-1,
                        mb=-1)
    np.testing.assert_array_equal(y, np.where(mask, a, b[0]))
    G = np.concatenate([np.zeros(4), np.zeros(1), np.array([1.0, 2.0, 3.0, 4.0])])
    where.reverse_where(nd=3, n=4, iat=0, ga=0, gb=4, gy=5, G=G, IA=IA, sta=1, stb=0, ma=-1,
                        mb=-1)
    np.testing.assert_array_equal(G[:5], [1.0, 0.0, 0.0, 4.0, 5.0])
    idx = np.array([2, 0, 2, 3])
    IA = idx  # a gather row's ints are its indices
    gather.forward_gather(n=4, iat=0, pa=_p(a), py=_p(y), IA=IA)
    np.testing.assert_array_equal(y, a[idx])
    G = np.concatenate([np.zeros(4), np.ones(4)])
    gather.reverse_gather(n=4, iat=0, ga=0, gy=4, G=G, IA=IA)
    np.testing.assert_array_equal(G[:4], np.bincount(idx, minlength=4))


def test_every_swept_row_has_a_body_in_every_mode_copied_verbatim():
    from jit.table import TABLE

    rendered = {"forward": _generate.render(), "reverse": _generate.render(),
                "tangent": _generate_tangent.render()}
    modules = family_modules()
    checked = 0
    for p in TABLE:
        module = modules.get(p.family)
        if module is None or not hasattr(module, "KERNELS"):
            continue
        for mode, text in rendered.items():
            bodies = module.KERNELS[mode]
            fn = bodies.get(p.name) or bodies[module.SAME[p.name]]
            lines = _assemble.body_lines(fn)
            if mode == "reverse":
                lines = [_assemble.raw_access(ln, "G", "pG") for ln in lines]
            block = "\n".join(("        " + ln) if ln else "" for ln in lines)
            assert block in text, (p.name, mode)
            checked += 1
    assert checked >= 30


def test_body_lines_keep_comments_and_drop_the_docstring_and_a_prologue_return():
    def body(n, IA):
        """What it computes."""
        x = IA[0]  # a comment stays
        # so does this one
        return n, x

    assert _assemble.body_lines(body) == ["x = IA[0]  # a comment stays", "# so does this one"]


def test_a_body_needing_an_argument_its_kernel_lacks_is_refused(monkeypatch):
    def forward_matmul(iat, pa, pb, py, IA, G):
        """Reads G, which forward kernels do not have."""
        G[0] = 0.0

    monkeypatch.setitem(matmul.KERNELS["forward"], "matmul", forward_matmul)
    with pytest.raises(ValueError, match="forward_matmul takes \\['G'\\]"):
        _generate.render()


def test_a_changed_family_body_makes_the_generated_file_stale(monkeypatch, tmp_path):
    source = inspect.getsource(matmul.tangent_matmul)
    source = source.replace("acc = 0.0  # dY", "acc = -0.0  # dY")
    path = tmp_path / "changed_matmul.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("changed_matmul", path)
    changed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(changed)
    monkeypatch.setitem(matmul.KERNELS["tangent"], "matmul", changed.tangent_matmul)
    with open(_generate_tangent.OUT) as fh:
        assert fh.read() != _generate_tangent.render()
    monkeypatch.undo()
    with open(_generate_tangent.OUT) as fh:
        assert fh.read() == _generate_tangent.render()


# ---- an elementwise row end to end: one table line serves every mode ----

def _f(x, y):
    return np.sum(np.sinh(x) * y)


def test_an_elementwise_row_in_every_mode():
    rng = np.random.default_rng(2)
    x = rng.uniform(-2.0, 2.0, (2, 3))
    y = rng.uniform(-1.0, 1.0, (2, 3))
    u = rng.standard_normal((2, 3))
    # NumPy's sinh / cosh (2 ulps in the contract) pick their code per CPU: every comparison
    # below is within rounding_bound of the NumPy expression, whose inputs include the factors
    # summed over (so a sum's bound covers the sum of its |terms|)
    gw = lambda x, y: np.cosh(x) * y
    dot = lambda x, u: np.sum(np.cosh(x) * y * u)
    grad_want = gw(x, y)
    check_vjp(lambda x: np.sinh(x), [x])  # eager reverse against finite differences
    assert_within(tape.grad(_f)(x, y), grad_want, rounding_bound(gw, [x, y], grad_want, 16))
    cf = tape.compile(_f, x, y)  # compiled replay, at new values
    x2 = x[::-1].copy()
    value, g = cf.value_and_grad(x2, y)
    assert_within(value, _f(x2, y), rounding_bound(_f, [x2, y], _f(x2, y)))
    assert_within(g, gw(x2, y), rounding_bound(gw, [x2, y], gw(x2, y), 16))
    _, tangent = tape.jvp(lambda x: _f(x, y), (x,), (u,))  # forward mode
    assert_within(tangent, dot(x, u), rounding_bound(dot, [x, u], dot(x, u)))
    _, tangent = cf.jvp((x2, y), (u,))  # the compiled tangent sweep
    assert_within(tangent, dot(x2, u), rounding_bound(dot, [x2, u], dot(x2, u)))
    with tape.forward_ad.dual_level():  # dual numbers
        d = tape.forward_ad.make_dual(tape.tensor(x), tape.tensor(u))
        _, t = tape.forward_ad.unpack_dual(np.sinh(d))
    assert_within(np.asarray(t), gw(x, u), rounding_bound(gw, [x, u], gw(x, u), 16))
    h = np.asarray(tape.hessian(_f)(x, y))  # higher order: d2/dx2 sum(sinh(x) y) = sinh(x) y
    hw = lambda x, y: np.sinh(x) * y
    bound = rounding_bound(hw, [x, y], hw(x, y), 16).reshape(-1)
    assert_within(h.reshape(6, 6), np.diag(hw(x, y).reshape(-1)), np.diag(bound))  # (0 off it)
    s = tape.grad(tape.grad(lambda t: np.sinh(t)))(0.5)  # a 0-d row, grad of grad
    assert abs(s - np.sinh(0.5)) <= rounding_bound(np.sinh, [0.5], np.sinh(0.5), 16)
