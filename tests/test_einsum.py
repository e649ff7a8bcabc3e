"""np.einsum on tensors: values against NumPy, gradients against finite differences."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tape
import tape.numpy as tnp
from tests._tolerance import TINY, U, assert_within

CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),  # matrix product
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),  # batched matmul
    ("i,j->ij", [(3,), (4,)]),  # outer
    ("i,i->", [(3,), (3,)]),  # dot
    ("ii->", [(3, 3)]),  # trace
    ("ii->i", [(3, 3)]),  # diagonal
    ("ij->ji", [(2, 3)]),  # transpose
    ("ij->", [(2, 3)]),  # sum
    ("ij->j", [(2, 3)]),  # partial sum
    ("i,ij,j->", [(2,), (2, 3), (3,)]),  # bilinear form
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),  # three-operand chain
    ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]),  # three operands, shared labels
    ("ij,jk,ki->", [(2, 3), (3, 4), (4, 2)]),  # trace of a product
    ("ij,jk", [(2, 3), (3, 4)]),  # implicit: output 'ik'
    ("ba", [(2, 3)]),  # implicit: output sorted, so a transpose
    ("ii", [(3, 3)]),  # implicit trace
    ("ij,ij->ij", [(2, 3), (2, 3)]),  # elementwise product (batch labels only)
    ("iij->j", [(2, 2, 3)]),  # diagonal then sum
    ("iji->ij", [(3, 2, 3)]),  # repeated label not adjacent
    ("ij,kk->ij", [(2, 3), (2, 2)]),  # trace of one operand times another
    ("i,->i", [(3,), ()]),  # 0-d operand
    ("->", [()]),
    ("ij,jk->ik", [(2, 1), (3, 4)]),  # size-1 label broadcast against 3
    ("i,i->i", [(3,), (1,)]),
    ("...i,...i", [(2, 3), (5, 1, 3)]),  # ellipsis broadcasting, implicit
    ("...ij,...jk->...ik", [(2, 2, 3), (3, 4)]),  # ellipsis batched matmul
    ("i...->...", [(3, 2)]),
    ("Ab,bc->cA", [(2, 3), (3, 2)]),  # upper-case labels
    (" ij , jk -> ik ", [(2, 3), (3, 4)]),  # spaces are ignored
    ("ij,jk->ik", [(2, 0), (0, 3)]),  # empty contraction: zeros
    ("ii,i->i", [(1, 1), (3,)]),  # a size-1 diagonal broadcast
]


def _draw(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=s) for s in shapes]


def _bound(*operands):
    """How far two correct evaluations of np.einsum(*operands) may differ, in any order of
    summation: K terms per output (the contraction of ones) are within K + 2 roundings of the
    same contraction of the |operands| each side, and 16 more for the products' roundings."""
    def of(fn):
        return np.einsum(*[fn(o) if isinstance(o, np.ndarray) else o for o in operands])

    terms = of(np.ones_like)
    return (16 + 2 * (terms + 2)) * U * of(np.abs) + TINY


def _check_value(subscripts, xs):
    ts = [tape.tensor(x, requires_grad=True) for x in xs]
    got = np.einsum(subscripts, *ts)
    want = np.einsum(subscripts, *xs)
    assert type(got) is tape.Tensor and got.requires_grad
    assert got.shape == want.shape
    assert_within(np.asarray(got.detach().numpy()), want, _bound(subscripts, *xs))


@pytest.mark.parametrize("subscripts,shapes", CASES, ids=[c[0].strip() for c in CASES])
def test_value(subscripts, shapes):
    _check_value(subscripts, _draw(shapes))


@pytest.mark.parametrize("subscripts,shapes", CASES, ids=[c[0].strip() for c in CASES])
def test_gradient(subscripts, shapes):
    assert tape.gradcheck(lambda *a: np.einsum(subscripts, *a), *_draw(shapes, 1))


def test_matmul_gradient_is_exact():
    a, b = _draw([(3, 4), (4, 2)])
    ta, tb = tape.tensor(a, requires_grad=True), tape.tensor(b, requires_grad=True)
    np.einsum("ij,jk->ik", ta, tb).sum().backward()
    np.testing.assert_allclose(ta.grad, np.ones((3, 2)) @ b.T, rtol=1e-14)
    np.testing.assert_allclose(tb.grad, a.T @ np.ones((3, 2)), rtol=1e-14)


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk->ik", [(40, 50), (50, 30)]),
    ("bij,bkj->bik", [(8, 20, 20), (8, 20, 20)]),
])
def test_large_products(subscripts, shapes):
    """Products large enough for the BLAS escape: values, and exact gradients of the sum."""
    a, b = _draw(shapes)
    _check_value(subscripts, [a, b])
    ta, tb = tape.tensor(a, requires_grad=True), tape.tensor(b, requires_grad=True)
    np.einsum(subscripts, ta, tb).sum().backward()
    out = np.einsum(subscripts, a, b)
    ones = np.ones_like(out)
    lhs, rhs = subscripts.split("->")
    sa, sb = lhs.split(",")
    assert_within(ta.grad, np.einsum(f"{rhs},{sb}->{sa}", ones, b),
                  _bound(f"{rhs},{sb}->{sa}", ones, b))
    assert_within(tb.grad, np.einsum(f"{rhs},{sa}->{sb}", ones, a),
                  _bound(f"{rhs},{sa}->{sb}", ones, a))


def test_constant_operands_and_tnp():
    a, b = _draw([(2, 3), (3,)])
    ta = tape.tensor(a, requires_grad=True)
    y = tnp.einsum("ij,j->i", ta, b)  # b a plain NumPy array: a constant
    assert_within(y.detach().numpy(), a @ b, _bound("ij,j->i", a, b))
    y.sum().backward()
    np.testing.assert_allclose(ta.grad, np.broadcast_to(b, (2, 3)), rtol=1e-14)


def test_constant_is_copied():
    a, b = _draw([(2, 3), (3,)])
    ta = tape.tensor(a, requires_grad=True)
    y = np.einsum("ij,j->", ta, b)
    b_orig = b.copy()
    b[:] = 100.0  # mutating the user's array after recording must not change the gradient
    y.backward()
    np.testing.assert_allclose(ta.grad, np.broadcast_to(b_orig, (2, 3)), rtol=1e-14)


def test_sublist_form():
    a, b = _draw([(2, 3), (3, 4)])
    ta, tb = tape.tensor(a, requires_grad=True), tape.tensor(b, requires_grad=True)
    got = np.einsum(ta, [0, 1], tb, [1, 2], [2, 0])
    assert_within(got.detach().numpy(), np.einsum(a, [0, 1], b, [1, 2], [2, 0]),
                  _bound(a, [0, 1], b, [1, 2], [2, 0]))
    got = np.einsum(ta, [Ellipsis, 1], tb, [1, 2])
    assert_within(got.detach().numpy(), a @ b, _bound("ij,jk->ik", a, b))


def test_optimize_is_accepted():
    a, b, c = _draw([(2, 3), (3, 4), (4, 5)])
    ta = tape.tensor(a, requires_grad=True)
    for opt in (False, True, "greedy", "optimal"):
        got = np.einsum("ij,jk,kl->il", ta, b, c, optimize=opt)
        assert_within(got.detach().numpy(), a @ b @ c, _bound("ij,jk,kl->il", a, b, c))


def test_no_grad_gives_plain_values():
    a, b = _draw([(2, 3), (3, 4)])
    ta = tape.tensor(a, requires_grad=True)
    with tape.no_grad():
        y = np.einsum("ij,jk->ik", ta, b)
    assert not y.requires_grad
    assert_within(y.detach().numpy(), a @ b, _bound("ij,jk->ik", a, b))


@pytest.mark.parametrize("subscripts,shapes,exc", [
    ("ij,jk->ik", [(2, 3), (4, 5)], ValueError),  # size mismatch
    ("ij,jk->ik", [(2, 3)], ValueError),  # operand count
    ("ij->ii", [(3, 3)], ValueError),  # repeated output label
    ("ij->k", [(3, 3)], ValueError),  # output label not in inputs
    ("ijk->i", [(3, 3)], ValueError),  # too many subscripts for the operand
    ("ii->i", [(2, 3)], ValueError),  # repeated label, different sizes
    ("...i->i", [(2, 3)], ValueError),  # ellipsis dims dropped without '...' in the output
    ("i1->i", [(3, 3)], ValueError),  # not a letter
])
def test_errors_match_numpy(subscripts, shapes, exc):
    xs = _draw(shapes)
    with pytest.raises(exc):
        np.einsum(subscripts, *xs)  # NumPy rejects these too
    with pytest.raises(exc):
        np.einsum(subscripts, *[tape.tensor(x, requires_grad=True) for x in xs])


def test_out_is_rejected():
    a = tape.tensor(np.ones((2, 2)), requires_grad=True)
    with pytest.raises(TypeError, match="out="):
        np.einsum("ij->ji", a, out=np.empty((2, 2)))


# ---------------------------------------------------------------------------------------------
# Random subscripts

LABELS = "abcd"


@st.composite
def einsum_problems(draw):
    sizes = {c: draw(st.integers(1, 3)) for c in LABELS}
    n_ops = draw(st.integers(1, 3))
    terms, shapes = [], []
    for _ in range(n_ops):
        term = "".join(draw(st.lists(st.sampled_from(LABELS), max_size=3)))
        shape = []
        for c in term:
            # a label of size 1 in one operand broadcasts against its size elsewhere
            one = term.count(c) == 1 and draw(st.integers(0, 4)) == 0
            shape.append(1 if one else sizes[c])
        terms.append(term)
        shapes.append(tuple(shape))
    used = sorted(set("".join(terms)))
    if draw(st.booleans()):
        out = "".join(draw(st.permutations(used))[:draw(st.integers(0, len(used)))])
        subscripts = ",".join(terms) + "->" + out
        # an output label that is size 1 everywhere it appears is fine; NumPy decides validity
    else:
        subscripts = ",".join(terms)
    return subscripts, shapes, draw(st.integers(0, 2 ** 31))


@settings(max_examples=60, deadline=None)
@given(einsum_problems())
def test_random_subscripts(problem):
    subscripts, shapes, seed = problem
    xs = _draw(shapes, seed)
    try:
        np.einsum(subscripts, *xs)
    except ValueError:
        with pytest.raises(ValueError):
            np.einsum(subscripts, *[tape.tensor(x, requires_grad=True) for x in xs])
        return
    _check_value(subscripts, xs)
    assert tape.gradcheck(lambda *a: np.einsum(subscripts, *a), *xs)
