"""NumPy API coverage outside the table rows: indexing, shape ops, products and linalg.

Each case is a function of a namespace (``np`` or ``tape.numpy``) so that both spellings are
tested: ``np.f(tensor)`` goes through NumPy's dispatch protocols, ``tnp.f(tensor)`` calls the
implementation directly. Values are compared with NumPy on the same inputs and VJPs (random
cotangent) with central finite differences of the NumPy function.
"""
from __future__ import annotations

import numpy as np
import pytest

import tape
import tape.numpy as tnp
from tape.core.bilinear import BLAS_FLOPS

from _fd import check_vjp


def R(*shape, seed=0, lo=-2.0, hi=2.0):
    return np.random.default_rng(seed + 17 * len(shape)).uniform(lo, hi, shape)


def distinct(*shape, seed=0):
    """Values at least 0.1 apart (sort, max: no ties)."""
    n = int(np.prod(shape))
    return np.random.default_rng(seed).permutation(n).reshape(shape) * 0.1 - 1.0


def spd(n, seed=0, batch=()):
    """Well-conditioned matrices (inv, solve, det stay smooth)."""
    a = R(*batch, n, n, seed=seed)
    return a + 3.0 * np.eye(n)


MASK = np.array([True, False, True, True, False, False])
IDX2 = np.array([[0, 1], [2, 0]])


def _setitem(key, value_shape=None):
    def f(a, v):
        y = a * 1.0  # a non-leaf copy (NumPy: a new array); item assignment is functionalized
        if isinstance(y, np.generic):  # NumPy's 0-d products are scalars
            y = np.array(y)
        y[key] = v
        return y * 1.0
    return f


# (id, builder(ns) -> f, args, wrt): f works on tensors and, with ns=np, on arrays.
CASES = [
    # -- indexing
    ("slice-step", lambda ns: lambda a: a[1:6:2], [R(7)]),
    ("slice-reverse", lambda ns: lambda a: a[::-1], [R(5)]),
    ("slice-neg-step-2d", lambda ns: lambda a: a[::-2, 1:], [R(5, 3)]),
    ("neg-int", lambda ns: lambda a: a[-1], [R(4, 3)]),
    ("neg-slice", lambda ns: lambda a: a[-3:, -1], [R(4, 3)]),
    ("int-to-0d", lambda ns: lambda a: a[2], [R(4)]),
    ("int-pair-to-0d", lambda ns: lambda a: a[1, -2], [R(3, 4)]),
    ("int-array-dups", lambda ns: lambda a: a[[0, 2, 2, 0]], [R(3)]),
    ("int-array-2d", lambda ns: lambda a: a[IDX2], [R(4, 2)]),
    ("int-arrays-pair", lambda ns: lambda a: a[[0, 1, 1], [2, 0, 0]], [R(2, 3)]),
    ("int-array-second-axis", lambda ns: lambda a: a[:, [2, 0]], [R(2, 3)]),
    ("bool-mask", lambda ns: lambda a: a[MASK], [R(6)]),
    ("bool-mask-2d", lambda ns: lambda a: a[MASK.reshape(2, 3)], [R(2, 3)]),
    ("bool-mask-rows", lambda ns: lambda a: a[np.array([False, True, True])], [R(3, 2)]),
    ("none", lambda ns: lambda a: a[None, 1:], [R(3)]),
    ("ellipsis", lambda ns: lambda a: a[..., 0], [R(2, 3, 2)]),
    ("ellipsis-none", lambda ns: lambda a: a[0, ..., None], [R(2, 3, 2)]),
    ("empty-slice", lambda ns: lambda a: a[3:1], [R(4)]),
    # -- item assignment (functionalized)
    ("set-slice", lambda ns: _setitem(slice(1, 3)), [R(4), R(2, seed=1)]),
    ("set-dups-last-wins", lambda ns: _setitem([0, 2, 0]), [R(3), R(3, seed=1)]),
    ("set-mask", lambda ns: _setitem(MASK), [R(6), R(3, seed=1)]),
    ("set-int-0d", lambda ns: _setitem(1), [R(3), R(seed=1)]),
    ("set-column-broadcast", lambda ns: _setitem((slice(None), 1)), [R(3, 2), R(1, seed=1)]),
    ("set-row-0d-broadcast", lambda ns: _setitem(0), [R(2, 3), R(seed=1)]),
    ("set-ellipsis", lambda ns: _setitem((Ellipsis, 0)), [R(2, 2), R(2, seed=1)]),
    # -- gathers
    ("take-flat", lambda ns: lambda a: ns.take(a, [5, 0, 5]), [R(2, 3)]),
    ("take-axis", lambda ns: lambda a: ns.take(a, [2, 0, 2], axis=1), [R(2, 3)]),
    ("take-along-axis", lambda ns: lambda a: ns.take_along_axis(a, np.array([[2, 0], [1, 1]]),
                                                                axis=1), [R(2, 3)]),
    ("reshape", lambda ns: lambda a: ns.reshape(a, (3, -1)), [R(2, 3)]),
    ("reshape-method", lambda ns: lambda a: a.reshape(6, 1) * 1.0, [R(2, 3)]),
    ("ravel", lambda ns: lambda a: ns.ravel(a), [R(2, 3)]),
    ("transpose", lambda ns: lambda a: ns.transpose(a), [R(2, 3, 4)]),
    ("transpose-axes", lambda ns: lambda a: ns.transpose(a, (1, 2, 0)), [R(2, 3, 4)]),
    ("transpose-T", lambda ns: lambda a: a.T * 1.0, [R(2, 3)]),
    ("swapaxes", lambda ns: lambda a: ns.swapaxes(a, 0, -1), [R(2, 3, 4)]),
    ("moveaxis", lambda ns: lambda a: ns.moveaxis(a, 0, -1), [R(2, 3, 4)]),
    ("moveaxis-multi", lambda ns: lambda a: ns.moveaxis(a, [0, 1], [-1, 0]), [R(2, 3, 4)]),
    ("squeeze", lambda ns: lambda a: ns.squeeze(a), [R(1, 3, 1)]),
    ("squeeze-axis", lambda ns: lambda a: ns.squeeze(a, axis=-1), [R(1, 3, 1)]),
    ("expand-dims", lambda ns: lambda a: ns.expand_dims(a, 1), [R(2, 3)]),
    ("broadcast-to", lambda ns: lambda a: ns.broadcast_to(a, (4, 2, 3)), [R(2, 1)]),
    ("broadcast-to-0d", lambda ns: lambda a: ns.broadcast_to(a, (3,)), [R()]),
    ("flip", lambda ns: lambda a: ns.flip(a), [R(2, 3)]),
    ("flip-axis", lambda ns: lambda a: ns.flip(a, axis=1), [R(2, 3)]),
    ("roll", lambda ns: lambda a: ns.roll(a, 2), [R(2, 3)]),
    ("roll-axis", lambda ns: lambda a: ns.roll(a, -1, axis=0), [R(3, 2)]),
    ("sort", lambda ns: lambda a: ns.sort(a), [distinct(3, 4)]),
    ("sort-axis0", lambda ns: lambda a: ns.sort(a, axis=0), [distinct(3, 4)]),
    ("sort-none", lambda ns: lambda a: ns.sort(a, axis=None), [distinct(3, 4)]),
    ("diff", lambda ns: lambda a: ns.diff(a), [R(2, 4)]),
    ("diff-n2-axis0", lambda ns: lambda a: ns.diff(a, n=2, axis=0), [R(4, 3)]),
    ("diff-prepend-append", lambda ns: lambda a: ns.diff(a, prepend=0.5, append=[1.0]),
     [R(4)]),
    ("tile", lambda ns: lambda a: ns.tile(a, (2, 2)), [R(2, 3)]),
    ("tile-int", lambda ns: lambda a: ns.tile(a, 3), [R(2)]),
    ("repeat", lambda ns: lambda a: ns.repeat(a, 2), [R(2, 3)]),
    ("repeat-axis-array", lambda ns: lambda a: ns.repeat(a, [1, 0, 2], axis=1), [R(2, 3)]),
    ("pad", lambda ns: lambda a: ns.pad(a, 1), [R(2, 3)]),
    ("pad-widths-value", lambda ns: lambda a: ns.pad(a, ((0, 1), (2, 0)), constant_values=1.5),
     [R(2, 3)]),
    ("trace", lambda ns: lambda a: ns.trace(a), [R(3, 3)]),
    ("trace-offset", lambda ns: lambda a: ns.trace(a, offset=1), [R(3, 4)]),
    ("diag-extract", lambda ns: lambda a: ns.diag(a), [R(3, 4)]),
    ("diag-extract-k", lambda ns: lambda a: ns.diag(a, k=-1), [R(3, 3)]),
    ("diag-build", lambda ns: lambda a: ns.diag(a), [R(3)]),
    ("diag-build-k", lambda ns: lambda a: ns.diag(a, k=1), [R(2)]),
    ("diagonal", lambda ns: lambda a: ns.diagonal(a, 1, 1, 2), [R(2, 3, 3)]),
    ("triu", lambda ns: lambda a: ns.triu(a), [R(3, 3)]),
    ("triu-k", lambda ns: lambda a: ns.triu(a, 1), [R(2, 3, 4)]),
    ("tril", lambda ns: lambda a: ns.tril(a, -1), [R(3, 4)]),
    # -- assembling
    ("concatenate", lambda ns: lambda a, b: ns.concatenate([a, b]), [R(2, 3), R(1, 3)]),
    ("concatenate-axis1", lambda ns: lambda a, b: ns.concatenate([a, b, a], axis=1),
     [R(2, 3), R(2, 1)]),
    ("concatenate-none", lambda ns: lambda a, b: ns.concatenate([a, b], axis=None),
     [R(2, 2), R(3)]),
    ("concatenate-const", lambda ns: lambda a: ns.concatenate([a, np.ones(2)]), [R(3)]),
    ("stack", lambda ns: lambda a, b: ns.stack([a, b]), [R(2, 3), R(2, 3)]),
    ("stack-last", lambda ns: lambda a, b: ns.stack([a, b], axis=-1), [R(2, 3), R(2, 3)]),
    ("stack-0d", lambda ns: lambda a, b: ns.stack([a, b, a]), [R(), R()]),
    ("hstack", lambda ns: lambda a, b: ns.hstack([a, b]), [R(2), R(3)]),
    ("vstack", lambda ns: lambda a, b: ns.vstack([a, b]), [R(3), R(2, 3)]),
    ("split", lambda ns: lambda a: ns.split(a, 3)[1] * 2.0, [R(6, 2)]),
    ("split-indices", lambda ns: lambda a: ns.concatenate(
        [p * (i + 1.0) for i, p in enumerate(ns.split(a, [1, 3], axis=1))], axis=1), [R(2, 4)]),
    # -- elementwise non-ufuncs
    ("clip", lambda ns: lambda a: ns.clip(a, -0.95, 1.05), [R(3, 4)]),
    ("clip-min", lambda ns: lambda a: ns.clip(a, -0.95, None), [R(3, 4)]),
    ("clip-array-bounds", lambda ns: lambda a, lo: ns.clip(a, lo, 1.05), [R(3, 4), R(4, seed=3)]),
    ("where", lambda ns: lambda a, b: ns.where(MASK, a, b), [R(6), R(6, seed=1)]),
    ("where-broadcast", lambda ns: lambda a, b: ns.where(MASK.reshape(2, 3), a, b),
     [R(2, 1), R(3, seed=1)]),
    ("where-scalar", lambda ns: lambda a: ns.where(MASK, a, 0.0), [R(6)]),
    # -- products (small: inside the jitted sweep)
    ("matmul-1d-1d", lambda ns: lambda a, b: ns.matmul(a, b), [R(3), R(3, seed=1)]),
    ("matmul-2d-1d", lambda ns: lambda a, b: ns.matmul(a, b), [R(2, 3), R(3, seed=1)]),
    ("matmul-1d-2d", lambda ns: lambda a, b: ns.matmul(a, b), [R(3), R(3, 2, seed=1)]),
    ("matmul-2d", lambda ns: lambda a, b: a @ b, [R(2, 3), R(3, 4, seed=1)]),
    ("matmul-batched", lambda ns: lambda a, b: a @ b, [R(2, 2, 3), R(2, 3, 4, seed=1)]),
    ("matmul-batch-broadcast", lambda ns: lambda a, b: ns.matmul(a, b),
     [R(3, 1, 2, 3), R(2, 3, 2, seed=1)]),
    ("matmul-shared-operand", lambda ns: lambda a, b: a @ b, [R(2, 3), R(4, 3, 2, seed=1)]),
    ("matmul-batched-1d", lambda ns: lambda a, b: a @ b, [R(2, 3, 4), R(4, seed=1)]),
    ("matmul-const-left", lambda ns: lambda b: R(2, 3, seed=5) @ b, [R(3, 2)]),
    ("matmul-const-right", lambda ns: lambda a: a @ R(3, 2, seed=5), [R(2, 3)]),
    ("dot-1d", lambda ns: lambda a, b: ns.dot(a, b), [R(3), R(3, seed=1)]),
    ("dot-2d", lambda ns: lambda a, b: ns.dot(a, b), [R(2, 3), R(3, 2, seed=1)]),
    ("dot-scalar", lambda ns: lambda a, b: ns.dot(a, b), [R(), R(3, seed=1)]),
    ("dot-nd", lambda ns: lambda a, b: ns.dot(a, b), [R(2, 3), R(2, 3, 2, seed=1)]),
    ("dot-method", lambda ns: lambda a, b: a.dot(b), [R(2, 3), R(3, seed=1)]),
    ("vdot", lambda ns: lambda a, b: ns.vdot(a, b), [R(2, 3), R(3, 2, seed=1)]),
    ("inner", lambda ns: lambda a, b: ns.inner(a, b), [R(2, 3), R(4, 3, seed=1)]),
    ("inner-1d", lambda ns: lambda a, b: ns.inner(a, b), [R(3), R(3, seed=1)]),
    ("outer", lambda ns: lambda a, b: ns.outer(a, b), [R(3), R(2, 2, seed=1)]),
    ("tensordot-int", lambda ns: lambda a, b: ns.tensordot(a, b, 2), [R(2, 3, 4),
                                                                      R(3, 4, 2, seed=1)]),
    ("tensordot-pairs", lambda ns: lambda a, b: ns.tensordot(a, b, axes=([0, 2], [2, 0])),
     [R(2, 3, 4), R(4, 2, 2, seed=1)]),
    ("tensordot-0", lambda ns: lambda a, b: ns.tensordot(a, b, 0), [R(2), R(3, seed=1)]),
    # -- products (large: reverse rule runs in NumPy/BLAS between jitted segments)
    ("matmul-blas-2d", lambda ns: lambda a, b: a @ b, [R(30, 30), R(30, 30, seed=1)]),
    ("matmul-blas-batched", lambda ns: lambda a, b: ns.matmul(a, b),
     [R(2, 30, 20), R(20, 20, seed=1)]),
    ("matmul-blas-batch-broadcast", lambda ns: lambda a, b: ns.matmul(a, b),
     [R(3, 1, 20, 20), R(2, 20, 20, seed=1)]),
    ("matmul-blas-1d", lambda ns: lambda a, b: a @ b, [R(200, 100), R(100, seed=1)]),
    # -- linalg
    ("norm", lambda ns: lambda a: ns.linalg.norm(a), [R(2, 3)]),
    ("norm-axis", lambda ns: lambda a: ns.linalg.norm(a, axis=1), [R(2, 3)]),
    ("norm-keepdims", lambda ns: lambda a: ns.linalg.norm(a, axis=-1, keepdims=True),
     [R(2, 3)]),
    ("norm-ord1", lambda ns: lambda a: ns.linalg.norm(a, 1), [R(4)]),
    ("norm-ord3", lambda ns: lambda a: ns.linalg.norm(a, 3), [R(4)]),
    ("norm-inf", lambda ns: lambda a: ns.linalg.norm(a, np.inf), [distinct(4)]),
    ("norm-neginf", lambda ns: lambda a: ns.linalg.norm(a, -np.inf), [distinct(4) + 0.05]),
    ("norm-fro", lambda ns: lambda a: ns.linalg.norm(a, "fro"), [R(2, 3)]),
    ("norm-mat1", lambda ns: lambda a: ns.linalg.norm(a, 1), [R(3, 3)]),
    ("norm-matinf", lambda ns: lambda a: ns.linalg.norm(a, np.inf), [R(3, 3)]),
    ("norm-mat-axes", lambda ns: lambda a: ns.linalg.norm(a, -1, axis=(0, 2)), [R(3, 2, 3)]),
    ("det", lambda ns: lambda a: ns.linalg.det(a), [spd(3)]),
    ("det-batched", lambda ns: lambda a: ns.linalg.det(a), [spd(2, batch=(2,))]),
    ("slogdet", lambda ns: lambda a: ns.linalg.slogdet(a)[1], [R(3, 3) + 4 * np.eye(3)]),
    ("slogdet-negative", lambda ns: lambda a: ns.linalg.slogdet(a)[1], [-spd(3)]),
    ("inv", lambda ns: lambda a: ns.linalg.inv(a), [spd(3)]),
    ("inv-batched", lambda ns: lambda a: ns.linalg.inv(a), [spd(2, batch=(3,))]),
    ("solve-vector", lambda ns: lambda a, b: ns.linalg.solve(a, b), [spd(3), R(3, seed=1)]),
    ("solve-matrix", lambda ns: lambda a, b: ns.linalg.solve(a, b), [spd(3), R(3, 2, seed=1)]),
    ("solve-batched", lambda ns: lambda a, b: ns.linalg.solve(a, b),
     [spd(3, batch=(2,)), R(2, 3, 2, seed=1)]),
    ("solve-const-rhs", lambda ns: lambda a: ns.linalg.solve(a, np.arange(3.0)), [spd(3)]),
    ("solve-batched-a-vector-b", lambda ns: lambda a, b: ns.linalg.solve(a, b),
     [spd(3, batch=(2,)), R(3, seed=1)]),
    ("solve-batched-b", lambda ns: lambda a, b: ns.linalg.solve(a, b),
     [spd(3), R(2, 3, 2, seed=1)]),
    ("solve-shared-b", lambda ns: lambda a, b: ns.linalg.solve(a, b),
     [spd(3, batch=(2,)), R(3, 2, seed=1)]),
    ("solve-batch-broadcast", lambda ns: lambda a, b: ns.linalg.solve(a, b),
     [spd(3, batch=(2, 1)), R(3, 3, 2, seed=1)]),
    # -- 0-d and degenerate shapes
    ("take-0d-index", lambda ns: lambda a: ns.take(a, 1), [R(3)]),
    ("take-wrap", lambda ns: lambda a: ns.take(a, [4, -5], mode="wrap"), [R(3)]),
    ("pad-0d", lambda ns: lambda a: ns.pad(a, 1), [R()]),
    ("stack-1-of-0d", lambda ns: lambda a: ns.stack([a]), [R()]),
    ("triu-1d", lambda ns: lambda a: ns.triu(a), [R(3)]),
    ("tril-1d-k", lambda ns: lambda a: ns.tril(a, 1), [R(3)]),
    ("sum-0d-axis-neg", lambda ns: lambda a: ns.sum(a, axis=-1), [R()]),
    ("concatenate-empty", lambda ns: lambda a, b: ns.concatenate([a, b]), [R(0, 2), R(2, 2)]),
    ("matmul-empty-k", lambda ns: lambda a, b: a @ b, [R(2, 0), R(0, 3)]),
    ("getitem-0d-none", lambda ns: lambda a: a[None], [R()]),
    ("setitem-neg-step", lambda ns: _setitem(slice(None, None, -2)), [R(4), R(2, seed=2)]),
    ("setitem-fancy-2d", lambda ns: _setitem(([0, 1], [1, 0])), [R(2, 2), R(2, seed=2)]),
    ("setitem-empty", lambda ns: _setitem(slice(2, 1)), [R(3), R(0, seed=2)]),
]


@pytest.mark.parametrize("ns", [np, tnp], ids=["np", "tnp"])
@pytest.mark.parametrize("build, args", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_value_and_vjp(ns, build, args):
    check_vjp(build(ns), args, f_np=build(np), rng=np.random.default_rng(len(args)))


def test_blas_cases_really_escape():
    for a, b in ([(30, 30), (30, 30)], [(2, 30, 20), (20, 20)], [(3, 1, 20, 20), (2, 20, 20)],
                 [(200, 100), (100,)]):
        m, k = (1,) + a[-1:] if len(a) == 1 else a[-2:]
        n = b[-1] if len(b) > 1 else 1
        batch = np.broadcast_shapes(a[:-2], b[:-2])
        assert int(np.prod(batch)) * m * k * n > BLAS_FLOPS
    for a, b in ([(2, 2, 3), (2, 3, 4)], [(3, 1, 2, 3), (2, 3, 2)], [(2, 3), (4, 3, 2)]):
        assert int(np.prod(np.broadcast_shapes(a[:-2], b[:-2]))) * a[-2] * a[-1] * b[-1] \
            <= BLAS_FLOPS


def test_det_gradient_at_singular_matrix_is_adjugate():
    a = tape.tensor(np.array([[1.0, 2.0], [2.0, 4.0]]), requires_grad=True)
    (g,) = tape.autograd.grad(np.linalg.det(a), [a])
    np.testing.assert_allclose(g, [[4.0, -2.0], [-2.0, 1.0]], rtol=1e-14)


def test_setitem_on_0d_tensor():
    x = tape.tensor(2.0, requires_grad=True)
    y = x * 1.0
    y[()] = x * 3.0
    assert y.item() == 6.0
    assert tape.autograd.grad(y, [x]) == (3.0,)
    y = x * 1.0
    y[...] = 5.0
    assert tape.autograd.grad(y * x, [x]) == (5.0,)


def test_matmul_only_needed_operand():
    """A frozen weight: only dX is computed, and no gradient reaches the constant."""
    x = tape.tensor(R(2, 3), requires_grad=True)
    w = tape.tensor(R(3, 4, seed=1))
    ct = R(2, 4, seed=2)
    (g,) = tape.autograd.grad(x @ w, [x], grad_outputs=ct)
    np.testing.assert_allclose(g, ct @ w.numpy().T, rtol=1e-14)


def test_setitem_rebinds_and_keeps_saved_values():
    a = tape.tensor(R(4), requires_grad=True)
    y = a * 2.0
    z = y * y  # saves y's old value
    y[1] = 0.0
    assert y.numpy()[1] == 0.0
    (g,) = tape.autograd.grad(np.sum(z) + np.sum(y), [a])
    want = 8.0 * a.numpy() + 2.0
    want[1] -= 2.0
    np.testing.assert_allclose(g, want, rtol=1e-14)


def test_setitem_with_tensor_index_and_inplace_ops():
    a = tape.tensor(R(4), requires_grad=True)
    y = a * 1.0
    i = np.argmax(a)
    y[i] = 5.0
    y += a
    y *= 2.0
    (g,) = tape.autograd.grad(np.sum(y), [a])
    want = np.full(4, 4.0)
    want[int(i)] = 2.0
    np.testing.assert_allclose(g, want)


def test_gather_accumulates_duplicates():
    a = tape.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    (g,) = tape.autograd.grad(np.sum(a[[0, 0, 2, 0]]), [a])
    np.testing.assert_array_equal(g, [3.0, 0.0, 1.0])


def test_split_returns_list_of_tensors():
    a = tape.tensor(R(6), requires_grad=True)
    parts = np.split(a, 3)
    assert isinstance(parts, list) and len(parts) == 3
    assert all(p.requires_grad and p.shape == (2,) for p in parts)
    (g,) = tape.autograd.grad(parts[0].sum() * 2.0 + parts[2].sum(), [a])
    np.testing.assert_array_equal(g, [2.0, 2.0, 0.0, 0.0, 1.0, 1.0])


def test_slogdet_sign_is_plain():
    a = tape.tensor(-spd(3), requires_grad=True)
    sign, logabs = np.linalg.slogdet(a)
    assert not getattr(sign, "requires_grad", False)
    assert float(sign) == np.sign(np.linalg.det(-spd(3)))
    assert logabs.requires_grad


# ---------------------------------------------------------------------------------------------
# Values without gradients


def test_comparisons_give_plain_values():
    x = tape.tensor(np.array([-1.0, 0.5, 2.0]), requires_grad=True)
    for r in (x < 0.5, x <= 0.5, x > 0.5, x >= 0.5, x == 0.5, x != 0.5, np.less(x, 1.0),
              np.greater_equal(x, x), np.isnan(x), np.isfinite(x), np.logical_and(x > 0, x < 1)):
        assert type(r) is np.ndarray and r.dtype == bool
    np.testing.assert_array_equal(x > 0.5, [False, False, True])


def test_index_functions_give_plain_values():
    x = tape.tensor(np.array([[3.0, 1.0], [2.0, 5.0]]), requires_grad=True)
    for name in ("argmax", "argmin", "argsort", "nonzero", "count_nonzero"):
        for r in (getattr(np, name)(x), getattr(tnp, name)(x)):
            rs = r if isinstance(r, tuple) else (r,)
            assert all(not isinstance(v, tape.Tensor) for v in rs)
    assert np.argmax(x) == 3 and x.argmax() == 3
    np.testing.assert_array_equal(np.argmax(x, axis=0), [0, 1])


@pytest.mark.parametrize("fn", [np.floor, np.ceil, np.trunc, np.rint, np.sign, np.round])
def test_piecewise_constant_functions_have_zero_gradient(fn):
    x = tape.tensor(np.array([-1.7, 0.3, 2.5]), requires_grad=True)
    r = fn(x)
    assert not getattr(r, "requires_grad", False)
    np.testing.assert_array_equal(np.asarray(r.numpy() if isinstance(r, tape.Tensor) else r),
                                  fn(np.array([-1.7, 0.3, 2.5])))
    (g,) = tape.autograd.grad(np.sum(x * r), [x])
    np.testing.assert_array_equal(g, fn(np.array([-1.7, 0.3, 2.5])))


def test_floordiv_and_mod():
    a0, b0 = np.array([3.7, -2.2, 5.0]), np.array([1.5, 0.7, -2.0])
    check_vjp(lambda a, b: a % b, [a0, b0])
    check_vjp(lambda a, b: np.fmod(a, b), [a0, b0])
    a = tape.tensor(a0, requires_grad=True)
    r = a // 1.5
    assert not r.requires_grad
    np.testing.assert_array_equal(r.numpy(), a0 // 1.5)


# ---------------------------------------------------------------------------------------------
# Unsupported functions


@pytest.mark.parametrize("call, name", [
    (lambda x: np.fft.fft(x), "fft"),
    (lambda x: np.linalg.eig(np.outer(x, x)), "eig"),
    (lambda x: np.roots(x), "roots"),
    (lambda x: np.gcd(x, x), "gcd"),
    (lambda x: np.cumsum(x, out=np.empty(3)), "cumsum"),
], ids=["fft", "eig", "roots", "gcd", "cumsum-out"])
def test_unsupported_numpy_function_raises_type_error_naming_it(call, name):
    x = tape.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    with pytest.raises(TypeError, match=name):
        call(x)


@pytest.mark.parametrize("ord", [2, -2, "nuc"])
def test_matrix_norms_from_singular_values(ord):
    a = R(4, 3)
    assert np.linalg.norm(tape.tensor(a), ord).item() == pytest.approx(np.linalg.norm(a, ord),
                                                                         rel=1e-14)
    g = tape.grad(lambda x: np.linalg.norm(x, ord))(a)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    pick = {2: [1.0, 0, 0], -2: [0, 0, 1.0], "nuc": [1.0, 1, 1]}[ord]
    np.testing.assert_allclose(g, u @ np.diag(pick) @ vh, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Indexing with keys drawn by hypothesis

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

IDX_SETTINGS = settings(max_examples=40, deadline=None,
                        suppress_health_check=[HealthCheck.too_slow])


@st.composite
def array_and_basic_index(draw):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    key = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    return shape, key


@IDX_SETTINGS
@given(sk=array_and_basic_index(), seed=st.integers(0, 2 ** 32 - 1))
def test_getitem_basic_indices(sk, seed):
    shape, key = sk
    check_vjp(lambda a: a[key] * 1.0, [R(*shape, seed=seed % 1000)],
              rng=np.random.default_rng(seed))


@IDX_SETTINGS
@given(sk=array_and_basic_index(), seed=st.integers(0, 2 ** 32 - 1))
def test_setitem_basic_indices(sk, seed):
    shape, key = sk
    target = np.empty(shape)[key]
    vshape = np.shape(target)[1:] if np.ndim(target) and seed % 2 else np.shape(target)
    check_vjp(_setitem(key), [R(*shape, seed=seed % 1000), R(*vshape, seed=seed % 997 + 1)],
              rng=np.random.default_rng(seed))


@IDX_SETTINGS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), data=st.data())
def test_getitem_and_setitem_integer_arrays(shape, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    idx = np.array(data.draw(st.lists(st.integers(-shape[axis], shape[axis] - 1), min_size=0,
                                      max_size=5)), dtype=np.int64)
    key = (slice(None),) * axis + (idx,)
    x = R(*shape, seed=len(idx))
    check_vjp(lambda a: a[key] * 1.0, [x])
    v = R(*np.empty(shape)[key].shape, seed=7)
    check_vjp(_setitem(key), [x, v])  # duplicates in idx: the last write wins


@IDX_SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3,
                                                max_side=3),
       seed=st.integers(0, 2 ** 32 - 1), which=st.sampled_from([(0, 1), (0,), (1,)]))
def test_where_and_clip_broadcasting(shapes, seed, which):
    (sc, sa, sb), _ = shapes
    rng = np.random.default_rng(seed)
    cond = rng.random(sc) < 0.5
    a, b = rng.uniform(-2, 2, sa), rng.uniform(-2, 2, sb)
    check_vjp(lambda x, y: np.where(cond, x, y), [a, b], wrt=which, rng=rng)
    lo = (rng.integers(-20, 0, sc) + 0.5) * 0.1  # bounds on a grid that values never tie with
    x = np.round(rng.uniform(-3, 3, sa), 1)
    check_vjp(lambda v, l: np.clip(v, l, 1.05), [x, lo], wrt=which, rng=rng)


@pytest.mark.parametrize("fn", [np.max, np.min])
@pytest.mark.parametrize("axis", [0, 1, None])
def test_max_min_ties_share_the_adjoint(fn, axis):
    """The adjoint of a max / min goes to every element equal to the extreme, shared evenly
    (NaN extremes: to every NaN), eager and replayed, along the contiguous axis and across it."""
    x = np.array([[1.0, 5.0, -2.0, np.nan, 0.0],
                  [3.0, 5.0, -2.0, 1.0, -0.0],
                  [3.0, 4.0, -2.0, np.nan, 0.0]])
    x = x if fn is np.max else -x
    c = np.arange(1.0, 16.0).reshape(3, 5)  # distinct seeds: column 0 along axis 1, row 0 along 0

    def f(x):
        y = fn(x, axis=axis)
        return np.sum(y * c[0] if axis == 0 else y * c[:, 0] if axis == 1 else y * 7.0)

    y = fn(x, axis=axis, keepdims=True)
    hit = (x == y) | (np.isnan(x) & np.isnan(y))
    seed = c[0] if axis == 0 else c[:, :1] if axis == 1 else 7.0
    want = np.where(hit, seed / hit.sum(axis=axis, keepdims=True), 0.0)
    np.testing.assert_array_equal(tape.grad(f)(x), want)
    np.testing.assert_array_equal(tape.compile(f, x).grad(x), want)
