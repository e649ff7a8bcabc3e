"""NumPy's aliasing on tensors: views, writes through them, and immutable scalars
(tape/core/views.py), checked against NumPy itself.

Random programs of views, writes and reads run on NumPy arrays and on tensors: every array the
program holds has NumPy's elements bit for bit, a step NumPy refuses is refused with the same
exception, and the gradient equals finite differences, in eager, in compiled replay and in
forward mode. Then the programs scientists write (Newton's method on a scalar, Gram-Schmidt
through column views, rows of an array written in a loop) in every mode, NumPy's errors, leaves,
and the in-place functions.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tape
import tape.forward_ad as fwAD
import tape.numpy as tnp

from _fd import fd_vjp
from _functions import Cube

rng = np.random.default_rng(42)


def _grad_fd(f, x, h=1e-6):
    return fd_vjp(f, (x,), 1.0, (0,), h=h)[0]


def _check_all_modes(f, x0, rtol=1e-7, exact=True):
    """f of one array: tapejit's value is NumPy's (bit for bit when f's ops are exact), its
    gradient finite differences', the same from a compiled replay at another point, and forward
    mode's derivative its projection."""
    want = float(f(x0))
    value, g = tape.value_and_grad(f)(x0)
    if exact:
        assert value == want
    else:
        np.testing.assert_allclose(value, want, rtol=1e-12)
    np.testing.assert_allclose(g, _grad_fd(f, x0), rtol=rtol, atol=1e-8)

    x1 = x0 * 1.125 + 0.0625
    cf = tape.compile(f, x0)
    cv, cg = cf.value_and_grad(x1)
    ev, eg = tape.value_and_grad(f)(x1)
    if exact:  # (else small products: a replay's own loop, eager's BLAS; README's contract)
        assert cv == ev == float(f(x1))
        np.testing.assert_array_equal(cg, eg)
    else:
        np.testing.assert_allclose(cv, ev, rtol=1e-12)
        np.testing.assert_allclose(cg, eg, rtol=1e-10, atol=1e-12)

    t0 = rng.standard_normal(np.shape(x0))
    _, jv = tape.jvp(f, (x0,), (t0,))
    np.testing.assert_allclose(jv, np.sum(g * t0), rtol=1e-10, atol=1e-12)
    return g


# ---------------------------------------------------------------------------------------------
# The programs from the issue


def kepler(p):
    """Newton's method for Kepler's equation: E -= dE must not move M (a scalar)."""
    M, e = p[0], p[1]
    E = M
    dE = 1.0
    while abs(dE) > 1e-12:
        dE = (E - e * np.sin(E) - M) / (1.0 - e * np.cos(E))
        E -= dE
    return E


def test_scalars_are_immutable_kepler():
    p0 = np.array([1.2, 0.3])
    E = kepler(p0)
    assert abs(E - 0.3 * np.sin(E) - 1.2) < 1e-12
    # implicit function theorem: dE/dM = 1 / (1 - e cos E), dE/de = sin E / (1 - e cos E)
    value, g = tape.value_and_grad(kepler)(p0)
    assert value == E
    d = 1.0 - 0.3 * np.cos(E)
    np.testing.assert_allclose(g, [1.0 / d, np.sin(E) / d], rtol=1e-10)
    _, jv = tape.jvp(kepler, (p0,), (np.array([0.5, -2.0]),))
    np.testing.assert_allclose(jv, 0.5 / d - 2.0 * np.sin(E) / d, rtol=1e-10)
    # compiled: a loop whose trip count depends on the values records again when it changes
    cf = tape.compile(kepler, p0)
    for p in (p0, np.array([0.7, 0.5])):
        np.testing.assert_allclose(cf.value_and_grad(p)[1], tape.grad(kepler)(p), rtol=1e-12)


def gram_schmidt(a):
    Q = a.reshape(3, 3) * 1.0
    for j in range(3):
        v = Q[:, j]
        for k in range(j):
            v -= (Q[:, k] @ v) * Q[:, k]
        v /= np.linalg.norm(v)
    return Q


def test_gram_schmidt_through_column_views():
    a0 = rng.standard_normal(9)
    Q = gram_schmidt(tape.tensor(a0))
    # (norm and the 3-element products: NumPy's loops, which pick kernels per CPU)
    np.testing.assert_allclose(Q.numpy(), gram_schmidt(a0), rtol=1e-12, atol=1e-13)
    w = rng.standard_normal((3, 3))
    _check_all_modes(lambda a: np.sum(gram_schmidt(a) * w), a0, rtol=1e-6, exact=False)
    H = tape.hessian(lambda a: np.sum(gram_schmidt(a) * w))(a0)
    col = (tape.grad(lambda a: np.sum(gram_schmidt(a) * w))(a0 + 1e-6 * np.eye(9)[0])
           - tape.grad(lambda a: np.sum(gram_schmidt(a) * w))(a0 - 1e-6 * np.eye(9)[0])) / 2e-6
    np.testing.assert_allclose(H[:, 0], col, rtol=1e-5, atol=1e-5)


def rows_and_views(F):
    F = F * 1.0
    for row in F:  # rows are views: written in place
        row *= 2.0
    y = F[1:]
    y += 1.0  # through a name
    z = F.T
    z[0] = z[0] ** 2  # a transposed view written
    r = F.reshape(-1)
    r[3] = r[4] * 3.0  # a reshape view written
    return np.sum(F * F) + np.sum(y * z.T[1:])


def test_rows_names_reshapes_and_transposes_write_the_base():
    F0 = rng.standard_normal((3, 4))
    assert float(rows_and_views(tape.tensor(F0))) == rows_and_views(F0)
    _check_all_modes(rows_and_views, F0)


def test_a_write_to_the_base_reaches_every_live_view():
    def f(x):
        B = x * 1.0
        c, r, t = B[:, 1], B[2], B.T
        B[2, 1] = 7.0 * x[0, 0]
        B *= 1.5
        return np.sum(c * c) + np.sum(r ** 3) + np.sum(t[1] * B[0])

    _check_all_modes(f, rng.standard_normal((3, 3)))


def test_views_of_views_chains_and_overlaps():
    def f(x):
        B = x * 1.0
        a = B[1:]  # rows 1..3
        b = a[:, ::2]  # a view of a view
        c = B[:3]  # overlaps a
        b -= c[:, ::2] * 0.5  # reads the region it writes (NumPy: copied first)
        c[...] = c[::-1]
        return np.sum(B ** 2) + np.sum(a * b[:, :1]) + np.sum(c)

    x0 = rng.standard_normal((4, 4))
    g = _check_all_modes(f, x0)
    assert np.all(np.isfinite(g))


def test_iteration_of_a_vector_gives_immutable_scalars():
    def f(x):
        v = x * 1.0
        acc = 0.0
        for e in v:  # scalars: e += 1 rebinds e, v is unchanged
            e += 1.0
            acc = acc + e * e
        return acc + np.sum(v)

    x0 = rng.standard_normal(4)
    assert f(tape.tensor(x0)).item() == f(x0)
    _check_all_modes(f, x0)


# ---------------------------------------------------------------------------------------------
# Scalars and 0-d arrays


def test_a_0d_result_is_a_scalar_and_a_0d_view_an_array():
    x = tape.tensor(np.arange(3.0))
    s = np.sum(x)
    t = s
    s += 1.0
    assert t.item() == 3.0 and s.item() == 4.0
    e = x[1]
    e *= 10.0
    assert x.numpy()[1] == 1.0
    z = x[..., 1]  # NumPy: a 0-d view of x
    z += 5.0
    np.testing.assert_array_equal(x.numpy(), [0.0, 6.0, 2.0])
    arr = tnp.array(x)  # np.array copies, np.asarray does not
    arr += 1.0
    assert tnp.asarray(x) is x and x.numpy()[0] == 0.0
    a = tnp.zeros(())  # a 0-d array: written in place, every name sees it
    b = a
    a += 2.0
    assert b.item() == 2.0
    c = tape.tensor(3.0)
    d = c
    c *= 2.0
    assert d.item() == 6.0
    for v in (np.sum(x), x[0]):
        assert tape.numpy.shares_memory(v, v) is True and v.base is None


def test_0d_views_in_every_mode():
    def f(x):
        v = x * 1.0
        z = v[..., 2]
        z *= z  # the square written into v
        m = v.reshape(1, 4)[0, ...][..., 0]
        m -= 3.0 * x[1]
        return np.sum(v ** 3)

    _check_all_modes(f, rng.standard_normal(4))


# ---------------------------------------------------------------------------------------------
# Copies stay copies


@pytest.mark.parametrize("make", [
    lambda B: B[[0, 2]],  # advanced indexing
    lambda B: B[np.arange(12).reshape(3, 4) % 3 == 0],  # a boolean mask
    lambda B: B.flatten(),
    lambda B: B.T.reshape(-1),  # a reshape NumPy cannot make a view
    lambda B: B.copy(),
    lambda B: np.take(B, [1], axis=0),
    lambda B: B + 0.0,
])
def test_where_numpy_copies_a_write_stays_in_the_copy(make):
    B0 = rng.standard_normal((3, 4))
    for arr in (B0.copy(), tape.tensor(B0)):
        c = make(arr)
        c *= 2.0
        np.testing.assert_array_equal(tape.tensor(arr).numpy() if isinstance(arr, np.ndarray)
                                      else arr.numpy(), B0)
        assert not np.shares_memory(c, arr)


# ---------------------------------------------------------------------------------------------
# NumPy's errors


def test_numpy_errors():
    B = tape.tensor(np.arange(6.0).reshape(2, 3))
    A = np.arange(6.0).reshape(2, 3)
    cases = [
        lambda X: np.diagonal(X).__setitem__(0, 1.0),
        lambda X: np.diagonal(X).__iadd__(1.0),
        lambda X: np.broadcast_to(X[0], (4, 3)).__setitem__((0, 0), 1.0),
        lambda X: X[0].__iadd__(np.ones((2, 3))),
        lambda X: X.__setitem__(0, np.ones(2)),
        lambda X: X.__setitem__((slice(None), 5), 1.0),
        lambda X: X[:, 0].__setitem__([0, 1], np.ones(3)),
        lambda X: np.add(X[0], 1.0, out=np.diagonal(X)),
        lambda X: np.multiply(X, 2.0, out=X[0]),
        lambda X: X.reshape(4, 2),
    ]
    for case in cases:
        with pytest.raises(Exception) as want:
            case(A.copy())
        with pytest.raises(type(want.value)) as got:
            case(B)
        assert str(got.value).split(" (")[0] == str(want.value).split(" (")[0]
    np.testing.assert_array_equal(B.numpy(), A)


def test_broadcast_arrays_results_warn_on_write_as_numpy():
    a = tape.tensor(np.arange(3.0))
    x, _ = np.broadcast_arrays(a, tape.tensor(np.zeros((2, 3))))
    with pytest.warns(DeprecationWarning, match="overlapping memory"):
        x[0, 0] = 9.0
    np.testing.assert_array_equal(x.numpy(), [[9.0, 1.0, 2.0], [9.0, 1.0, 2.0]])
    np.testing.assert_array_equal(a.numpy(), [9.0, 1.0, 2.0])


# ---------------------------------------------------------------------------------------------
# Leaves


def test_a_leaf_is_not_written_through_a_view_while_recording():
    w = tape.tensor(np.ones(4), requires_grad=True)
    v = w[:2]
    with pytest.raises(RuntimeError, match="view of a leaf tensor that requires grad"):
        v += 1.0
    with pytest.raises(RuntimeError, match="in-place"):
        w[0] = 2.0


def test_a_leaf_written_under_no_grad_updates_its_views_and_their_gradient():
    w = tape.tensor(np.arange(4.0), requires_grad=True)
    v = w[1:3]
    r = w.reshape(2, 2)
    with tape.no_grad():
        v *= 10.0  # through a view, in the leaf's buffer
        w[3] = -1.0
    np.testing.assert_array_equal(w.numpy(), [0.0, 10.0, 20.0, -1.0])
    np.testing.assert_array_equal(v.numpy(), [10.0, 20.0])
    np.testing.assert_array_equal(r.numpy(), [[0.0, 10.0], [20.0, -1.0]])
    c = r[:, 1]  # a view of a view of the leaf
    with tape.no_grad():
        c -= 1.0
    np.testing.assert_array_equal(w.numpy(), [0.0, 9.0, 20.0, -2.0])
    np.testing.assert_array_equal(v.numpy(), [9.0, 20.0])
    with tape.no_grad():
        c += 1.0
    loss = np.sum(v * v) + np.sum(r * 2.0)
    loss.backward()
    np.testing.assert_array_equal(w.grad, [2.0, 22.0, 42.0, 2.0])


def test_a_saved_leaf_written_through_a_view_names_the_line():
    w = tape.tensor(np.ones(3), requires_grad=True)
    y = Cube.apply(w).sum()  # saves the leaf w for its backward
    v = w[1:]
    with tape.no_grad():
        v += 1.0  # the write the error names
    with pytest.raises(RuntimeError, match=r"written in place at .*test_views\.py:\d+"):
        y.backward()


def test_a_saved_result_written_through_a_view_keeps_its_value():
    def f(w):
        x = w * 1.0
        y = Cube.apply(x)
        x[0] = 100.0  # a recorded value is never written: the saved x is the one cubed
        return np.sum(y) + np.sum(x)

    w0 = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(tape.grad(f)(w0), [3.0, 13.0, 28.0])


# ---------------------------------------------------------------------------------------------
# Storage questions


def test_base_shares_memory_and_may_share_memory():
    B = tape.tensor(np.zeros((4, 4)))
    A = np.zeros((4, 4))
    pairs = [(lambda X: X[0], lambda X: X[1]), (lambda X: X[:, 0], lambda X: X[0]),
             (lambda X: X[::2], lambda X: X[1::2]), (lambda X: X.T, lambda X: X[3, 3:]),
             (lambda X: X, lambda X: np.diagonal(X)), (lambda X: X[[0]], lambda X: X)]
    for f, g in pairs:
        assert np.shares_memory(f(B), g(B)) == np.shares_memory(f(A), g(A))
        assert np.may_share_memory(f(B), g(B)) == np.may_share_memory(f(A), g(A))
    assert B[1:].base is B and B[1:][::2].base is B and B.base is None and B[[0]].base is None
    row = tape.tensor(np.zeros((2, 2)))[1]
    base = row.base  # the root tensor is gone: its storage is not, and writes reach row
    base[1, 0] = 5.0
    np.testing.assert_array_equal(row.numpy(), [5.0, 0.0])


def test_a_view_is_not_a_copy_of_its_elements():
    x = tape.tensor(np.arange(12.0).reshape(3, 4)) * 1.0
    for v in (x[1], x[1:], x.reshape(4, 3), x.ravel(), x[None], x[..., None]):
        assert np.shares_memory(v._v, x._v)  # the row reads x's value in place


# ---------------------------------------------------------------------------------------------
# NumPy's in-place functions


def inplace_functions(x):
    y = x * 1.0
    np.fill_diagonal(y, x[0])
    np.put(y, [0, 8, 8], x[1])  # the last write to a position wins
    np.copyto(y[:, 2], 5.0 * x[2], where=np.array([True, False, True]))
    np.putmask(y, np.arange(9).reshape(3, 3) % 4 == 1, x[:, 0])
    np.place(y[1:], np.array([[True, False, False], [False, False, True]]), x[2, ::-1])
    np.put_along_axis(y, np.array([[0], [2], [1]]), x[:, 1:2] * 3.0, axis=1)
    np.multiply(y[0], x[1], out=y[2])
    d = y[::2, 1]
    d.fill(x[1, 1] ** 2)
    s = y[1]
    s.sort()
    return np.sum(y * y) + np.sum(d ** 3)


def test_numpy_in_place_functions_in_every_mode():
    x0 = rng.standard_normal((3, 3))
    want = inplace_functions(x0)
    assert float(inplace_functions(tape.tensor(x0))) == want
    _check_all_modes(inplace_functions, x0)


def test_in_place_functions_refuse_to_drop_a_gradient_into_an_ndarray():
    w = tape.tensor(np.ones(3), requires_grad=True)
    out = np.zeros(3)
    with pytest.raises(TypeError, match="tnp.zeros"):
        np.copyto(out, w * 2.0)
    with pytest.raises(TypeError, match="tnp.zeros"):
        np.multiply(w, 2.0, out=out)
    np.copyto(out, tape.tensor(np.full(3, 2.0)))  # plain values: NumPy writes them
    np.testing.assert_array_equal(out, 2.0)


# ---------------------------------------------------------------------------------------------
# The other modes: higher order, split backward, a saved recording


def test_higher_order_split_backward_and_a_saved_file(tmp_path):
    x0 = rng.standard_normal((3, 3))
    g = tape.grad(rows_and_views)(x0)
    hvp = tape.grad(lambda x: np.sum(tape.grad(rows_and_views)(x) * g))(x0)
    h = 1e-6
    fd = (tape.grad(rows_and_views)(x0 + h * g) - tape.grad(rows_and_views)(x0 - h * g)) / (2 * h)
    np.testing.assert_allclose(hvp, fd, rtol=1e-6, atol=1e-6)

    w = tape.tensor(x0, requires_grad=True)
    u = tape.tensor(np.ones((3, 3)), requires_grad=True)
    loss = rows_and_views(w * u)
    from tape import pipelining

    _, groups = pipelining.stage_backward_input(loss, None, [u], [w])
    pipelining.stage_backward_weight([w], groups)
    np.testing.assert_allclose(w.grad, tape.grad(lambda x: rows_and_views(x * 1.0))(x0),
                               rtol=1e-12)

    cf = tape.compile(rows_and_views, x0)
    cf.save(tmp_path / "views.npz")
    loaded = tape.load(tmp_path / "views.npz")
    x1 = x0 - 0.25
    np.testing.assert_array_equal(loaded.value_and_grad(x1)[1], cf.value_and_grad(x1)[1])


def test_dual_numbers_through_views():
    x0 = rng.standard_normal((3, 4))
    t0 = rng.standard_normal((3, 4))
    with fwAD.dual_level():
        d = fwAD.make_dual(tape.tensor(x0), tape.tensor(t0))
        _, tangent = fwAD.unpack_dual(rows_and_views(d))
    np.testing.assert_allclose(tangent.item(), np.sum(tape.grad(rows_and_views)(x0) * t0),
                               rtol=1e-10)


# ---------------------------------------------------------------------------------------------
# Random programs against NumPy


def _element(h, k):
    """An exact read: one element of h (a scalar)."""
    return np.ravel(h)[k % np.size(h)] if np.size(h) else 0.0


VIEWS = {
    "rows": lambda h, k: h[k % h.shape[0]:],
    "item": lambda h, k: h[k % h.shape[0]],
    "col": lambda h, k: h[:, k % h.shape[1]],
    "step": lambda h, k: h[::1 + k % 2],
    "T": lambda h, k: h.T,
    "ravel": lambda h, k: np.ravel(h),
    "reshape": lambda h, k: h.reshape(h.shape[::-1]),
    "new": lambda h, k: h[None],
    "last": lambda h, k: h[..., k % h.shape[-1]],
    "diag": lambda h, k: np.diagonal(h),
    "flip": lambda h, k: np.flip(h, 0),
    "swap": lambda h, k: np.swapaxes(h, 0, -1),
    "bcast": lambda h, k: np.broadcast_to(h, (2,) + h.shape),
    "fancy": lambda h, k: h[[0, -1]],
    "squeeze": lambda h, k: np.squeeze(h[:1]),
    "split": lambda h, k: np.array_split(h, 2)[k % 2],
    "unstack": lambda h, k: np.unstack(h)[k % len(h)],
    "rot90": lambda h, k: np.rot90(h, 1 + k % 3),
    "expand": lambda h, k: np.expand_dims(h, -1),
    "moveaxis": lambda h, k: np.moveaxis(h, 0, -1),
    "view": lambda h, k: h.view(),
    "atleast_2d": lambda h, k: np.atleast_2d(h),
}
WRITES = {
    "iadd": lambda h, e: h.__iadd__(0.5 * e),
    "imul": lambda h, e: h.__imul__(-1.5),
    "isub_flip": lambda h, e: h.__isub__(np.flip(h) * 0.25),
    "setitem": lambda h, e: h.__setitem__(0, e),
    "set_slice": lambda h, e: h.__setitem__(slice(None, None, 2), e * 2.0),
    "set_fancy": lambda h, e: h.__setitem__([0, -1], e),
    "copyto": lambda h, e: np.copyto(h, e * 0.75),
    "out": lambda h, e: np.multiply(h, 2.0, out=h),
    "fill_diagonal": lambda h, e: np.fill_diagonal(h, e * 3.0),
    "put": lambda h, e: np.put(h, [0, -1, 0], [e, 2.0, -e]),
    "putmask": lambda h, e: np.putmask(h, np.arange(np.size(h)).reshape(np.shape(h)) % 2 == 0,
                                       e * 0.5),
}
STEP = st.tuples(st.sampled_from(["view"] * 3 + ["write"] * 2), st.integers(0, 40),
                 st.sampled_from(sorted(VIEWS)), st.sampled_from(sorted(WRITES)),
                 st.integers(0, 40), st.integers(0, 40))


def run_program(x, steps, trace=None):
    """Run `steps` on the array or tensor x; `trace` (a list) receives what each step did (a
    NumPy run) or is checked against it (a tensor run): the exception type a step raised, and
    every held array's elements after each step."""
    held = [x * 1.0]
    check = trace is not None and len(trace) > 0
    log = trace if trace is not None and not check else None
    for n, (kind, i, view, write, k, j) in enumerate(steps):
        h = held[i % len(held)]
        err = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                if kind == "view":
                    held.append(VIEWS[view](h, k))
                elif np.ndim(h) == 0 and not isinstance(h, (np.ndarray, tape.Tensor)):
                    pass  # a NumPy scalar: no item assignment (tapejit's scalars take one)
                elif np.ndim(h) == 0 and isinstance(h, tape.Tensor) and h._alias is None:
                    pass
                else:
                    e = _element(held[j % len(held)], k)
                    r = WRITES[write](h, e)
                    if write in ("iadd", "imul", "isub_flip"):
                        held[i % len(held)] = r  # x op= y rebinds x to what the op returns
            except (ValueError, IndexError, TypeError, ZeroDivisionError) as ex:
                err = type(ex)
        snapshot = (err, [np.array(a.numpy() if isinstance(a, tape.Tensor) else a)
                          for a in held])
        if log is not None:
            log.append(snapshot)
        elif check:
            want_err, want = trace[n]
            assert err is want_err, (n, steps[n], err, want_err)
            assert len(want) == len(snapshot[1])
            for a, b in zip(snapshot[1], want):
                np.testing.assert_array_equal(a, b, err_msg=f"step {n}: {steps[n]}")
    total = 0.0
    for w, a in enumerate(held, 1):
        total = total + w * np.sum(a * a)
    return total


@settings(max_examples=int(__import__("os").environ.get("VIEWS_EXAMPLES", 120)), deadline=None)
@given(st.lists(STEP, max_size=10), st.sampled_from([(3, 4), (4, 3), (2, 3, 2)]))
def test_random_programs_have_numpys_values_and_exact_gradients(steps, shape):
    x0 = np.random.default_rng(len(steps)).standard_normal(shape)
    trace = []
    want = run_program(x0, steps, trace)
    got = run_program(tape.tensor(x0), steps, trace)
    np.testing.assert_allclose(float(got), want, rtol=1e-13)

    def f(x):
        return run_program(x, steps)

    g = tape.grad(f)(x0)
    fd = _grad_fd(f, x0)  # (rounding in f's large values: an absolute error on every element)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * max(1.0, np.abs(fd).max()))
    x1 = x0 * 0.875
    np.testing.assert_array_equal(tape.compile(f, x0).value_and_grad(x1)[1], tape.grad(f)(x1))
    t0 = rng.standard_normal(shape)
    np.testing.assert_allclose(tape.jvp(f, (x0,), (t0,))[1], np.sum(g * t0), rtol=1e-9,
                               atol=1e-9)


def test_copies_of_a_view_own_their_elements():
    import copy
    import pickle

    x = tape.tensor(np.ones((2, 2)))
    v = x[0]
    for c in (copy.copy(v), copy.deepcopy(v), pickle.loads(pickle.dumps(v))):
        c += 1.0
        np.testing.assert_array_equal(c.numpy(), [2.0, 2.0])
        np.testing.assert_array_equal(x.numpy(), 1.0)
    a = pickle.loads(pickle.dumps(tape.tensor(2.0)))  # a 0-d array stays one
    b = a
    a += 1.0
    assert b.item() == 3.0


def test_a_view_cannot_become_a_leaf():
    x = tape.tensor(np.ones((2, 2)))
    v = x[0]
    with pytest.raises(RuntimeError, match="t.copy"):
        v.requires_grad = True
    with pytest.raises(RuntimeError, match="t.copy"):
        x.requires_grad = True
    del v
    x.requires_grad = True  # its views are gone: it owns its elements again
    assert x.is_leaf and x.base is None
