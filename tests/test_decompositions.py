"""Linear-algebra decompositions on tensors (tape/escapes/): cholesky, solve_triangular,
cho_factor / cho_solve, eigh / eigvalsh, svd / svdvals, qr, pinv, lstsq, cond and expm.

Each against central differences in float64 (losses that do not depend on the sign or basis
choices LAPACK makes), in every mode it claims: eager reverse, compiled replay (values and
gradients at new inputs), forward mode (tape.jvp and the compiled tangent sweep), and second
derivatives (reverse over reverse, forward over reverse, differences of gradients); batched
inputs; tied eigenvalues; ill-conditioned inputs drawn by hypothesis; saved tapes.
"""
from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tape
import tape.scipy.linalg as tsl
from _fd import fd_vjp
from _derivative_checks import check_second

try:
    import scipy.linalg as sl
except ModuleNotFoundError:  # the numpy.linalg cases run without SciPy; SciPy's references skip
    sl = None
needs_scipy = pytest.mark.skipif(sl is None, reason="compares with scipy.linalg")

SEEDS = st.integers(0, 2 ** 32 - 1)
SETTINGS = settings(max_examples=15, deadline=None)


def spd(rng, n, batch=(), cond=10.0):
    """Symmetric positive definite matrices with eigenvalues from 1 to `cond`."""
    q, _ = np.linalg.qr(rng.normal(size=batch + (n, n)))
    w = np.geomspace(1.0, cond, n) * rng.uniform(0.8, 1.2, size=batch + (n,))
    return (q * w[..., None, :]) @ np.swapaxes(q, -1, -2)


def tri(rng, n, batch=(), lower=True):
    a = rng.normal(size=batch + (n, n)) * 0.3 + 2.0 * np.eye(n)
    return a if lower is None else (np.tril(a) if lower else np.triu(a))


def grad_fd(loss, args, h=1e-6):
    return fd_vjp(loss, args, 1.0, tuple(range(len(args))), h=h)


def check_modes(loss, args, rng, rtol=1e-6, atol=1e-7, loss_np=None, second=True, new=None):
    """loss(*tensors) -> scalar. Eager gradient against differences of loss_np (loss itself
    by default); compiled replay at `new` inputs against eager there; forward mode (tape.jvp,
    the compiled tangent sweep) against the gradient; second derivatives (check_second)."""
    loss_np = loss if loss_np is None else loss_np
    nums = tuple(range(len(args)))
    want = grad_fd(loss_np, args)
    got = tape.grad(loss, argnums=nums)(*args)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want):
        scale = max(1.0, float(np.max(np.abs(w), initial=0.0)))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale)
    value = float(np.asarray(loss_np(*args)))
    assert float(loss(*[tape.tensor(a) for a in args]).item()) == pytest.approx(value,
                                                                                 rel=1e-12)
    us = [rng.normal(size=np.shape(a)) for a in args]
    _, t = tape.jvp(loss, tuple(args), tuple(us))
    dot = sum(float(np.sum(g * u)) for g, u in zip(got, us))
    assert float(np.asarray(t)) == pytest.approx(dot, rel=1e-9, abs=1e-11)
    cf = tape.compile(loss, *args, argnums=nums)
    new = args if new is None else new
    v2, g2 = cf.value_and_grad(*new)
    e2 = tape.grad(loss, argnums=nums)(*new)
    e2 = e2 if isinstance(e2, tuple) else (e2,)
    g2 = g2 if isinstance(g2, tuple) else (g2,)
    assert float(v2) == pytest.approx(float(np.asarray(loss_np(*new))), rel=1e-12)
    for a, b in zip(g2, e2):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
    _, ct = cf.jvp(tuple(new), tuple(us))
    dot2 = sum(float(np.sum(g * u)) for g, u in zip(e2, us))
    assert float(np.asarray(ct)) == pytest.approx(dot2, rel=1e-9, abs=1e-11)
    if second:
        check_second(lambda *xs: loss(*xs), args, rng, rtol=1e-4, atol=1e-5)
    return got


# ---------------------------------------------------------------------------------------------
# cholesky, solve_triangular, cho_factor / cho_solve


@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(batch, upper):
    rng = np.random.default_rng(1)
    a = spd(rng, 4, batch)
    # the other triangle is not read: perturb it, so that a symmetric rule would be wrong
    a = a + (np.triu(rng.normal(size=a.shape), 1) if not upper
             else np.tril(rng.normal(size=a.shape), -1)) * 0.1
    w = rng.normal(size=a.shape)

    def loss(x):
        c = np.linalg.cholesky(x, upper=upper)
        return np.sum(w * c) + np.sum(np.log(np.diagonal(c, axis1=-2, axis2=-1)))

    check_modes(loss, [a], rng, new=[a + 0.01 * spd(rng, 4, batch)])


def test_cholesky_of_a_non_positive_definite_matrix_raises():
    x = tape.tensor(np.array([[1.0, 2.0], [2.0, 1.0]]), requires_grad=True)
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.cholesky(x)


@needs_scipy
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [0, 1, "T"])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular(lower, trans, unit):
    rng = np.random.default_rng(2)
    a = tri(rng, 4, lower=None)  # both triangles hold values: only one is read
    b = rng.normal(size=(4, 2))
    w = rng.normal(size=(4, 2))

    def make(ns):
        return lambda x, y: np.sum(w * ns.solve_triangular(x, y, trans=trans, lower=lower,
                                                           unit_diagonal=unit))

    got = check_modes(make(tsl), [a, b], rng, loss_np=make(sl))
    read = np.tril(np.ones((4, 4)), -1 if unit else 0)
    read = read if lower else read.T
    assert np.all(got[0][read == 0] == 0.0)  # the triangle not read gets nothing


@needs_scipy
def test_solve_triangular_batched_and_vector():
    rng = np.random.default_rng(3)
    a, b = tri(rng, 3, (2,)), rng.normal(size=3)
    check_modes(lambda x, y: np.sum(np.sin(tsl.solve_triangular(x, y, lower=True))), [a, b],
                rng, loss_np=lambda x, y: np.sum(np.sin(sl.solve_triangular(x, y, lower=True))))


@needs_scipy
@pytest.mark.parametrize("lower", [False, True])
def test_cho_factor_cho_solve(lower):
    rng = np.random.default_rng(4)
    a, b = spd(rng, 4), rng.normal(size=(4, 3))
    w = rng.normal(size=(4, 3))

    def make(ns):
        return lambda x, y: np.sum(w * ns.cho_solve(ns.cho_factor(x, lower=lower), y))

    check_modes(make(tsl), [a, b], rng, loss_np=make(sl))
    x = tape.tensor(a)
    np.testing.assert_allclose(tsl.cho_solve(tsl.cho_factor(x, lower=lower), b).numpy(),
                               np.linalg.solve(a, b), rtol=1e-12)
    np.testing.assert_allclose(tsl.cholesky(x, lower=lower).numpy(),
                               sl.cholesky(a, lower=lower), rtol=1e-14)


@needs_scipy
def test_scipy_functions_called_on_tensors_name_tape_scipy():
    x = tape.tensor(np.eye(3), requires_grad=True)
    with pytest.raises(TypeError, match=r"tape\.scipy\.linalg\.solve_triangular"):
        sl.solve_triangular(x, np.ones(3))
    with pytest.raises(TypeError, match=r"tape\.scipy\.linalg\.cho_factor"):
        sl.cho_factor(x)


def gp_nll(theta, x, y):
    """Negative log marginal likelihood of a Gaussian process: squared-exponential kernel with
    log length scale, log signal and log noise scales theta."""
    ell, sf, sn = np.exp(theta[0]), np.exp(theta[1]), np.exp(theta[2])
    d2 = (x[:, None] - x[None, :]) ** 2
    k = sf ** 2 * np.exp(-0.5 * d2 / ell ** 2) + (sn ** 2 + 1e-8) * np.eye(x.size)
    L = np.linalg.cholesky(k)
    z = tsl.solve_triangular(L, y, lower=True) if isinstance(theta, tape.Tensor) else \
        sl.solve_triangular(L, y, lower=True)
    return 0.5 * np.sum(z * z) + np.sum(np.log(np.diagonal(L))) + 0.5 * x.size * np.log(2 * np.pi)


@needs_scipy
def test_gaussian_process_hessian():
    rng = np.random.default_rng(5)
    x = np.sort(rng.uniform(0, 5, 12))
    y = np.sin(x) + 0.1 * rng.normal(size=12)
    theta = np.array([0.1, 0.2, -1.0])
    f = lambda t: gp_nll(t, x, y)  # noqa: E731
    H = tape.hessian(f)(theta)
    h = 1e-5
    fd = np.array([(tape.grad(f)(theta + h * e) - tape.grad(f)(theta - h * e)) / (2 * h)
                   for e in np.eye(3)])
    np.testing.assert_allclose(H, fd, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(H, H.T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(tape.grad(f)(theta), grad_fd(f, [theta])[0], rtol=1e-6)
    check_modes(f, [theta], rng, new=[theta + 0.05])


@SETTINGS
@given(seed=SEEDS, logcond=st.floats(0.0, 8.0), n=st.integers(1, 5))
def test_cholesky_ill_conditioned_stays_finite_and_right(seed, logcond, n):
    rng = np.random.default_rng(seed)
    a = spd(rng, n, cond=10.0 ** logcond)
    w = rng.normal(size=(n, n))
    g = tape.grad(lambda x: np.sum(w * np.linalg.cholesky(x)))(a)
    assert np.all(np.isfinite(g))
    # the reverse rule is the transpose of the forward rule, to rounding
    u = rng.normal(size=(n, n))
    _, t = tape.jvp(lambda x: np.sum(w * np.linalg.cholesky(x)), (a,), (u,))
    assert float(t) == pytest.approx(float(np.sum(g * u)), rel=1e-6, abs=1e-9 * np.abs(g).max())


# ---------------------------------------------------------------------------------------------
# eigh / eigvalsh


@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(batch, uplo):
    rng = np.random.default_rng(6)
    a = spd(rng, 4, batch, cond=5.0) + rng.normal(size=batch + (4, 4)) * 0.05  # not symmetric
    w1, w2 = rng.normal(size=batch + (4,)), rng.normal(size=batch + (4, 4))

    def loss(x):
        w, v = np.linalg.eigh(x, UPLO=uplo)
        return np.sum(w1 * w) + np.sum(w2 * v * v)  # v * v: free of the sign choice

    check_modes(loss, [a], rng, new=[a + 0.01 * spd(rng, 4, batch)])


def test_eigvalsh_and_functions_of_eigenvalues():
    rng = np.random.default_rng(7)
    a = spd(rng, 5)
    check_modes(lambda x: np.sum(np.linalg.eigvalsh(x) ** 3), [a], rng)
    check_modes(lambda x: np.sum(np.exp(np.linalg.eigh(x)[0])), [a], rng)


def test_tied_eigenvalues_gradient_of_eigenvalues_and_eigenspaces():
    rng = np.random.default_rng(8)
    q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    a = (q * np.array([1.0, 1.0, 1.0, 3.0])) @ q.T  # a triple eigenvalue
    w = rng.normal(size=(4, 4))

    def values(x):
        return np.sum(np.linalg.eigvalsh(x) ** 2)

    def projector(x):  # onto the tied eigenspace: free of the basis chosen inside it
        v = np.linalg.eigh(x)[1][:, :3]
        return np.sum(w * (v @ v.T))

    for f in (values, projector):
        g = tape.grad(f)(a)
        assert np.all(np.isfinite(g))
        np.testing.assert_allclose(g, grad_fd(f, [a], h=1e-7)[0], rtol=1e-5, atol=1e-6)

    def basis(x):  # depends on which basis of the eigenspace LAPACK returns
        return np.sum(w * np.linalg.eigh(x)[1])

    with pytest.raises(ValueError, match="basis"):
        tape.grad(basis)(a)


def test_near_tied_eigenvalues_give_large_finite_gradients():
    q, _ = np.linalg.qr(np.random.default_rng(9).normal(size=(3, 3)))
    a = (q * np.array([1.0, 1.0 + 1e-6, 2.0])) @ q.T
    g = tape.grad(lambda x: np.linalg.eigh(x)[1][0, 0] ** 2)(a)
    assert np.all(np.isfinite(g)) and np.abs(g).max() > 1e3


@SETTINGS
@given(seed=SEEDS, logcond=st.floats(0.0, 10.0), n=st.integers(1, 5))
def test_eigvalsh_ill_conditioned(seed, logcond, n):
    rng = np.random.default_rng(seed)
    a = spd(rng, n, cond=10.0 ** logcond)
    c = rng.normal(size=n)
    g = tape.grad(lambda x: np.sum(c * np.linalg.eigvalsh(x)))(a)
    w, v = np.linalg.eigh(a)
    want = np.tril((v * c) @ v.T * 2.0) - np.diag(np.diag((v * c) @ v.T))  # lower triangle read
    np.testing.assert_allclose(g, want, atol=1e-10 * max(1.0, np.abs(want).max()))


# ---------------------------------------------------------------------------------------------
# svd / svdvals


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3)])
def test_svd(shape):
    rng = np.random.default_rng(10)
    a = rng.normal(size=shape)
    k = min(shape[-2:])
    c = rng.normal(size=k)
    ws = rng.normal(size=shape[:-2] + (k,))
    wu = rng.normal(size=shape[:-1] + (k,))

    def loss(x):
        u, s, vh = np.linalg.svd(x, full_matrices=False)
        return (np.sum(ws * s) + np.sum(wu * u * u)  # u * u: free of the signs
                + np.sum(np.sin((u * c) @ vh)))  # u_i vh_i: free of them too

    check_modes(loss, [a], rng, new=[a + 0.01 * rng.normal(size=shape)])


def test_svdvals_and_norms():
    rng = np.random.default_rng(11)
    a = rng.normal(size=(4, 3))
    check_modes(lambda x: np.sum(np.linalg.svdvals(x) ** 2 + np.linalg.svdvals(x)), [a], rng)
    check_modes(lambda x: np.linalg.norm(x, 2) + np.linalg.norm(x, "nuc"), [a], rng)
    check_modes(lambda x: np.linalg.cond(x), [a], rng)


def test_svd_full_matrices_refused_for_gradients():
    x = tape.tensor(np.ones((3, 2)), requires_grad=True)
    with pytest.raises(ValueError, match="full_matrices=False"):
        np.linalg.svd(x)
    u, s, vh = np.linalg.svd(tape.tensor(np.eye(2) * 2.0, requires_grad=True))  # square: fine
    assert u.requires_grad and vh.shape == (2, 2)


def test_svd_of_rank_deficient_tall_matrix():
    a = np.outer(np.arange(1.0, 5.0), [1.0, 2.0, 0.0])[:, :3]  # rank 1, 4x3
    g = tape.grad(lambda x: np.sum(np.linalg.svdvals(x)))(a)
    assert np.all(np.isfinite(g))


# ---------------------------------------------------------------------------------------------
# qr, pinv, lstsq, expm


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (2, 4, 3)])
def test_qr(shape):
    rng = np.random.default_rng(12)
    a = rng.normal(size=shape)
    wq, wr = rng.normal(size=shape), rng.normal(size=shape[:-2] + (shape[-1],) * 2)

    def loss(x):
        q, r = np.linalg.qr(x)
        return np.sum(wq * q) + np.sum(wr * r)

    check_modes(loss, [a], rng, new=[a + 0.01 * rng.normal(size=shape)])
    check_modes(lambda x: np.sum(wr * np.linalg.qr(x, mode="r")), [a], rng, second=False)


def test_qr_of_a_wide_matrix_refused_for_gradients():
    with pytest.raises(ValueError, match="m >= n"):
        np.linalg.qr(tape.tensor(np.ones((2, 3)), requires_grad=True))


def test_pinv_and_lstsq():
    rng = np.random.default_rng(13)
    a, b = rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    w = rng.normal(size=(3, 5))
    check_modes(lambda x: np.sum(w * np.linalg.pinv(x)), [a], rng)
    check_modes(lambda x, y: np.sum(np.linalg.lstsq(x, y)[0] ** 2)
                + np.sum(np.linalg.lstsq(x, y)[1]), [a, b], rng)
    xa, res, rank, s = np.linalg.lstsq(tape.tensor(a), b)
    wx, wres, wrank, ws = np.linalg.lstsq(a, b)
    np.testing.assert_allclose(xa.numpy(), wx, rtol=1e-12)
    np.testing.assert_allclose(res.numpy(), wres, rtol=1e-10)
    assert rank == wrank
    np.testing.assert_allclose(s.numpy(), ws, rtol=1e-14)


@needs_scipy
@pytest.mark.parametrize("batch", [(), (2,)])
def test_expm(batch):
    rng = np.random.default_rng(14)
    a = rng.normal(size=batch + (3, 3)) * 0.5
    w = rng.normal(size=batch + (3, 3))
    check_modes(lambda x: np.sum(w * tsl.expm(x)), [a], rng,
                loss_np=lambda x: np.sum(w * sl.expm(x)))


# ---------------------------------------------------------------------------------------------
# saved tapes


def test_saved_tape_with_decompositions_round_trips():
    rng = np.random.default_rng(15)
    a = spd(rng, 4)

    def f(x):
        w, v = np.linalg.eigh(x)
        return (np.sum(np.log(np.diagonal(np.linalg.cholesky(x)))) + np.sum(w ** 2)
                + np.sum(tsl.solve_triangular(np.linalg.cholesky(x), np.ones(4), lower=True))
                + np.sum(np.linalg.svdvals(x)) + np.sum(np.linalg.qr(x)[1]))

    cf = tape.compile(f, a)
    buf = io.BytesIO()
    cf.save(buf)
    buf.seek(0)
    loaded = tape.load(buf)
    b = a + 0.1 * np.eye(4)
    v1, g1 = cf.value_and_grad(b)
    v2, g2 = loaded.value_and_grad(b)
    assert v1 == v2
    np.testing.assert_array_equal(g1, g2)


def test_saved_escape_parameters_are_checked():
    import json

    rng = np.random.default_rng(16)
    buf = io.BytesIO()
    tape.compile(lambda x: np.sum(tsl.solve_triangular(x, np.ones(3), lower=True)),
                 tri(rng, 3)).save(buf)
    files = dict(np.load(io.BytesIO(buf.getvalue()), allow_pickle=False))
    meta = json.loads(bytes(files["meta"]).decode())
    (c,) = [c for c, v in meta["escapes"].items() if v[3]]
    meta["escapes"][c][3]["trans"] = 7
    files["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    out = io.BytesIO()
    np.savez(out, **files)
    out.seek(0)
    with pytest.raises(ValueError, match="parameter"):
        tape.load(out)


def test_import_tape_does_not_import_scipy():
    import subprocess
    import sys

    code = ("import sys, tape, tape.scipy.linalg, numpy as np; "
            "x = tape.tensor(np.eye(2) * 2.0, requires_grad=True); "
            "tape.scipy.linalg.cho_factor(x); np.linalg.eigh(x); "
            "print('scipy' in sys.modules)")
    with warnings.catch_warnings():
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------------------------------------
# dual numbers, edge shapes, bad input


@pytest.mark.parametrize("f", [
    lambda x: np.sum(np.linalg.cholesky(x) ** 2),
    lambda x: np.sum(np.linalg.eigh(x)[0] ** 3) + np.sum(np.linalg.eigh(x)[1] ** 2),
    lambda x: np.sum(np.sin(np.linalg.svd(x, full_matrices=False)[1])),
    lambda x: np.sum(np.linalg.qr(x)[0] * np.linalg.qr(x)[1]),
    lambda x: np.sum(tsl.solve_triangular(x, np.ones(3), lower=True)),
], ids=["cholesky", "eigh", "svd", "qr", "solve_triangular"])
def test_dual_numbers(f):
    from tape import forward_ad as fwAD

    rng = np.random.default_rng(17)
    a, u = spd(rng, 3), rng.normal(size=(3, 3))
    with fwAD.dual_level():
        t = fwAD.unpack_dual(f(fwAD.make_dual(a, u))).tangent.item()
    assert t == pytest.approx(float(np.sum(tape.grad(f)(a) * u)), rel=1e-9)


@pytest.mark.parametrize("n", [0, 1])
def test_edge_sizes(n):
    a = np.eye(n) * 2.0
    for f, want in [(lambda x: np.sum(np.linalg.cholesky(x)), np.eye(n) / np.sqrt(8.0)),
                    (lambda x: np.sum(np.linalg.eigvalsh(x)), np.eye(n)),
                    (lambda x: np.sum(np.linalg.svdvals(x)), np.eye(n))] + (
                   [] if sl is None else [(lambda x: np.sum(tsl.expm(x)), np.eye(n) * np.exp(2.0))]):
        np.testing.assert_allclose(tape.grad(f)(a), want, rtol=1e-12)


def test_singular_triangle_raises():
    x = tape.tensor(np.array([[0.0, 0.0], [1.0, 1.0]]), requires_grad=True)
    with pytest.raises(np.linalg.LinAlgError, match="(?i)singular"):  # SciPy's or NumPy's
        tsl.solve_triangular(x, np.ones(2), lower=True)


@SETTINGS
@given(seed=SEEDS, logcond=st.floats(0.0, 8.0), shape=st.sampled_from([(3, 3), (4, 2), (2, 4)]))
def test_svdvals_ill_conditioned(seed, logcond, shape):
    rng = np.random.default_rng(seed)
    k = min(shape)
    u, _ = np.linalg.qr(rng.normal(size=(shape[0], k)))
    v, _ = np.linalg.qr(rng.normal(size=(shape[1], k)))
    s = np.geomspace(1.0, 10.0 ** -logcond, k)
    a = (u * s) @ v.T
    c = rng.normal(size=k)
    g = tape.grad(lambda x: np.sum(c * np.linalg.svdvals(x)))(a)
    uu, ss, vh = np.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(g, (uu * c) @ vh, atol=1e-9)


@pytest.mark.parametrize("f", [
    lambda x: np.linalg.cond(x),
    lambda x: np.linalg.cond(x, -2),
    lambda x: np.linalg.cond(x, "fro"),
    lambda x: np.linalg.cond(x, 1),
    lambda x: np.linalg.matrix_norm(x, ord=2),
    lambda x: np.linalg.matrix_norm(x, ord="nuc"),
    lambda x: np.sum(np.linalg.pinv(x) ** 2),
], ids=["cond", "cond-2", "cond-fro", "cond1", "norm2", "nuc", "pinv"])
def test_batched_compositions(f):
    rng = np.random.default_rng(18)
    a = rng.normal(size=(2, 4, 3)) if "pinv" in f.__code__.co_names else \
        rng.normal(size=(2, 3, 3))
    check_modes(lambda x: np.sum(f(x)), [a], rng, second=False)


def test_second_derivatives_at_tied_eigenvalues_are_refused():
    f = lambda x: np.sum(np.linalg.eigvalsh(x) ** 2)  # noqa: E731
    np.testing.assert_allclose(tape.grad(f)(np.eye(3)), 2 * np.eye(3), rtol=1e-14)
    with pytest.raises(ValueError, match="beyond the first"):
        tape.hessian(f)(np.eye(3))
    with pytest.raises(ValueError, match="beyond the first"):
        tape.hessian(lambda x: np.sum(np.linalg.svdvals(x) ** 3))(np.eye(3))
    a = np.diag([1.0, 2.0, 3.0])  # distinct: the Hessian of |A_sym|^2 read from the lower part
    H = tape.hessian(f)(a).reshape(9, 9)
    g = tape.grad(f)
    E = np.eye(9).reshape(9, 3, 3)
    fd = np.array([(g(a + 1e-5 * e) - g(a - 1e-5 * e)).ravel() / 2e-5 for e in E])
    np.testing.assert_allclose(H, fd, atol=1e-7)


def test_tensorinv_and_tensorsolve():
    rng = np.random.default_rng(19)
    a = rng.normal(size=(2, 3, 6)) + np.eye(6).reshape(2, 3, 6) * 3.0
    b = rng.normal(size=(2, 3))
    w = rng.normal(size=(6, 2, 3))
    check_modes(lambda x: np.sum(w * np.linalg.tensorinv(x)), [a], rng, second=False)
    a2 = rng.normal(size=(2, 3, 2, 3)) + np.eye(6).reshape(2, 3, 2, 3) * 3.0
    check_modes(lambda x, y: np.sum(np.sin(np.linalg.tensorsolve(x, y))), [a2, b], rng,
                second=False)
    check_modes(lambda x, y: np.sum(np.linalg.tensorsolve(x, y, axes=(0,)) ** 2),
                [np.moveaxis(a2, 2, 0), b], rng, second=False)


@SETTINGS
@given(seed=SEEDS, logcond=st.floats(0.0, 8.0), shape=st.sampled_from([(3, 3), (5, 3), (4, 1)]))
def test_qr_ill_conditioned(seed, logcond, shape):
    """Columns of scales 1 .. 10^-logcond: the rules stay finite, and the reverse rule is the
    forward rule's transpose."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=shape) * np.geomspace(1.0, 10.0 ** -logcond, shape[1])
    wq, wr = rng.normal(size=shape), rng.normal(size=(shape[1], shape[1]))

    def f(x):
        q, r = np.linalg.qr(x)
        return np.sum(wq * q) + np.sum(wr * r)

    g = tape.grad(f)(a)
    u = rng.normal(size=shape)
    _, t = tape.jvp(f, (a,), (u,))
    assert np.all(np.isfinite(g))
    assert float(t) == pytest.approx(float(np.sum(g * u)), rel=1e-6,
                                     abs=1e-9 * np.abs(g).max() * np.abs(u).max())


@SETTINGS
@given(seed=SEEDS, logscale=st.floats(0.0, 6.0), lower=st.booleans(),
       trans=st.sampled_from([0, 1]))
def test_solve_triangular_badly_scaled(seed, logscale, lower, trans):
    rng = np.random.default_rng(seed)
    d = np.geomspace(1.0, 10.0 ** -logscale, 4) * rng.choice([-1.0, 1.0], 4)
    a = rng.normal(size=(4, 4)) * 0.3 + np.diag(d)
    b, w = rng.normal(size=(4, 2)), rng.normal(size=(4, 2))

    def f(x, y):
        return np.sum(w * tsl.solve_triangular(x, y, lower=lower, trans=trans))

    ga, gb = tape.grad(f, argnums=(0, 1))(a, b)
    ua, ub = rng.normal(size=(4, 4)), rng.normal(size=(4, 2))
    _, t = tape.jvp(f, (a, b), (ua, ub))
    assert np.all(np.isfinite(ga)) and np.all(np.isfinite(gb))
    dot = float(np.sum(ga * ua) + np.sum(gb * ub))
    assert float(t) == pytest.approx(dot, rel=1e-6, abs=1e-9 * (np.abs(ga).max() + 1.0))


@pytest.mark.parametrize("a", [
    [[1.0, 2.0], [2.0, 4.0]],
    [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]],  # rank 2
    [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [3.0, 6.0, 9.0]],  # rank 1
], ids=["2x2", "rank2", "rank1"])
def test_det_second_derivatives_at_singular_matrices(a):
    """det is a polynomial: its Hessian exists everywhere; at a singular matrix the recorded
    rule takes the adjugate from cofactors (determinants of minors, which record)."""
    a = np.array(a)
    n = a.shape[0]
    H = tape.hessian(np.linalg.det)(a).reshape(n * n, n * n)
    g = tape.grad(np.linalg.det)
    E = np.eye(n * n).reshape(n * n, n, n)
    fd = np.array([(g(a + 1e-5 * e) - g(a - 1e-5 * e)).ravel() / 2e-5 for e in E])
    np.testing.assert_allclose(H, fd, atol=1e-8)
    u = np.arange(n * n, dtype=float).reshape(n, n)
    _, t = tape.jvp(tape.grad(np.linalg.det), (a,), (u,))
    np.testing.assert_allclose(np.asarray(t).ravel(), H @ u.ravel(), atol=1e-9)
