"""The recorder's direct paths record the rows of its general ones.

Array ops take direct paths in ``tape/core/record.py`` for their common cases (two array
tensors of one shape, an array and a Python float, basic slices valued through NumPy's view,
integer-array keys, where's mask written into its ints, reductions and matmuls whose shape plans
are cached). Each is recorded here both ways on a fresh tape and the tapes' lists compared
element for element: the same rows, side rows, ints and values. Then the shared int chunks
(equal masks, repeated integer keys, repeated matmul shapes) are checked end to end: gradients
against finite differences, compiled replay and forward mode against eager.
"""
from __future__ import annotations

import contextlib
import math
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tape
from jit.families import layouts
from jit.table import FLAG_SHIFT, MAP_A, MAP_B, ONE_A, ONE_B, OPCODE
from tape.core import record as R
from tape.core import bilinear, index_plans, reductions
from tape.core.state import state

from _fd import check_vjp


@contextlib.contextmanager
def _fresh_tape():
    saved = state.tape
    state.tape = None
    try:
        yield
    finally:
        state.tape = saved


def _record(fn, *values, grad=(True,) * 8):
    """fn(*tensors) recorded on a fresh tape: (its result, the tape's lists)."""
    with _fresh_tape(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (x / 0.0 among the cases)
        xs = [tape.tensor(np.array(v, dtype=np.float64), requires_grad=g)
              for v, g in zip(values, grad)]
        out = fn(*xs)
        t = state.tape
        return out, _lists(t)


def _lists(t):
    if t is None:
        return None
    return {"rows": list(t.rows), "side": list(t.side), "sv": list(t.sv),
            "ia": np.concatenate(t.ia) if t.ia else np.zeros(0, np.int64),
            "av": [None if v is None else (v.shape, v.tobytes()) for v in t.av],
            "consts": dict(t.consts), "escapes": dict(t.escapes)}


def _same(fast, slow):
    (yf, tf), (ys, ts) = fast, slow
    assert (tf is None) == (ts is None)
    if tf is not None:
        for k in ("rows", "side", "sv", "av", "consts", "escapes"):
            assert tf[k] == ts[k], k
        np.testing.assert_array_equal(tf["ia"], ts["ia"])
    vf, vs = yf._v, ys._v
    assert type(vf) is type(vs)
    assert np.shape(vf) == np.shape(vs)
    np.testing.assert_array_equal(vf, vs)
    assert yf.requires_grad == ys.requires_grad


SHAPES = [(3,), (2, 3), (4, 1, 2)]
BINARY = ["add", "subtract", "multiply", "divide", "power", "maximum", "hypot", "arctan2"]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("grad", [(True, True), (True, False), (False, True), (False, False)])
def test_same_shape_binary_records_the_general_row(shape, name, grad):
    code = OPCODE[name]
    rng = np.random.default_rng(1)
    a, b = rng.uniform(0.5, 2.0, shape), rng.uniform(0.5, 2.0, shape)

    def via(f):
        def run(x, y):
            z = f(code, x, y)  # on leaves, then on a row of this tape
            return f(code, z, y) if z.requires_grad else z
        return run

    _same(_record(via(R.binary), a, b, grad=grad), _record(via(R._binary), a, b, grad=grad))


BROADCASTS = [((16, 16, 3), (16, 1, 3)), ((3,), (2, 3)), ((2, 1), (1, 3)), ((1,), (4,)),
              ((4,), (1,)), ((2, 3, 1, 2), (3, 1, 1)), ((2, 1, 3, 1), (1, 4, 1, 5)),
              ((0, 3), (3,)), ((1, 1), (2, 2))]


@pytest.mark.parametrize("ashape,bshape", BROADCASTS)
@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("grad", [(True, True), (True, False), (False, True)])
def test_broadcast_binary_records_the_general_row(ashape, bshape, name, grad):
    code = OPCODE[name]
    rng = np.random.default_rng(8)
    a, b = rng.uniform(0.5, 2.0, ashape), rng.uniform(0.5, 2.0, bshape)

    def via(f):
        def run(x, y):
            z = f(code, x, y)  # the first of these shapes on the tape, then from its cache
            return f(code, x, y) - f(code, y, x) + z
        return run

    _same(_record(via(R.binary), a, b, grad=grad), _record(via(R._binary), a, b, grad=grad))


def test_broadcast_shape_error_names_the_shapes():
    x = tape.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(ValueError, match=r"add: .* \(operand shapes \(3,\) and \(4,\)\)"):
        x + tape.tensor(np.ones(4))


@pytest.mark.parametrize("shape", SHAPES + [(1,), (1, 1)])
@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("c", [2.5, 0.0, -0.0, 1.0])
def test_array_with_float_records_the_general_row(shape, name, c):
    code = OPCODE[name]
    a = np.random.default_rng(2).uniform(0.5, 2.0, shape)
    for f in (lambda g: lambda x: g(code, g(code, x, c), c),  # the constant shared
              lambda g: lambda x: g(code, c, g(code, c, x))):  # reflected
        _same(_record(f(R.binary), a), _record(f(R._binary), a))


def test_array_with_float_flags_and_shared_constant():
    (y, t) = _record(lambda x: (x * 3.0) - 3.0, np.arange(4.0))
    rows = t["rows"]
    # slots: the leaf, the constant 3.0 (once), the product, the difference
    assert rows[3:6] == [OPCODE["const"], -1, -1]
    assert rows[6:9] == [OPCODE["multiply"] | ONE_B << FLAG_SHIFT, 0, 1]
    assert rows[9:12] == [OPCODE["subtract"] | ONE_B << FLAG_SHIFT, 2, 1]
    np.testing.assert_array_equal(y._v, np.arange(4.0) * 3.0 - 3.0)


ARRAY_CONSTANTS = BROADCASTS + [((2, 3), (2, 3)), ((1, 16), (16, 16)), ((3,), (1, 1))]


@pytest.mark.parametrize("ashape,bshape", ARRAY_CONSTANTS)
@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("grad", [True, False])
def test_array_with_array_constant_records_the_general_row(ashape, bshape, name, grad):
    """A tensor and a float64 NumPy array (W5's ``masses[None, :] / r``), either order, the
    shapes' flags first recorded by this path, then by a tensor-tensor broadcast of the same
    shapes (they share the tape's cache entry), and the other way round."""
    code = OPCODE[name]
    rng = np.random.default_rng(9)
    a, c = rng.uniform(0.5, 2.0, ashape), rng.uniform(0.5, 2.0, bshape)

    def via(f):
        def run(x, y, x2, x3):
            z1 = f(code, x, c)  # constant second, then first
            z2 = f(code, c, x)
            z3 = f(code, x, y)  # tensor-tensor, same shapes: the cached flags
            # leaves not yet on the tape, with cached flags: imported in the general order
            return z1, z2, z3, f(code, x2, c), f(code, c, x3), f(code, y, x), f(code, y, a), \
                f(code, a, y)
        return run

    def total(g):  # every result has the broadcast shape: one tensor to compare
        def run(*xs):
            zs = g(*xs)
            out = zs[0]
            for z in zs[1:]:
                out = R._binary(OPCODE["add"], out, z)
            return out
        return run

    for gc in (True, False):
        flags = (grad, gc, grad, grad)
        _same(_record(total(via(R.binary)), a, c, a + 1.0, a + 2.0, grad=flags),
              _record(total(via(R._binary)), a, c, a + 1.0, a + 2.0, grad=flags))


def test_array_with_array_constant_is_copied_and_names_shapes():
    x = tape.tensor(np.ones((2, 3)), requires_grad=True)
    c = np.arange(3.0)
    y = x * c
    c[:] = 7.0  # the constant was copied into the tape: the gradient reads the old values
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, np.broadcast_to(np.arange(3.0), (2, 3)))
    with pytest.raises(ValueError, match=r"add: .* \(operand shapes \(2, 3\) and \(4,\)\)"):
        x + np.ones(4)
    with pytest.raises(ValueError, match=r"add: .* \(operand shapes \(4,\) and \(2, 3\)\)"):
        np.ones(4) + x


def test_array_with_array_constant_gradients():
    """W5's mix: a NumPy constant broadcast against a tensor, both orders, against finite
    differences (eager) and the compiled replay."""
    rng = np.random.default_rng(4)
    m = rng.uniform(0.5, 2.0, 5)

    def f(p):
        r = np.sum((p[None, :, :] - p[:, None, :]) ** 2, axis=2) + 0.1
        w = m[None, :] / r + r * m[:, None] - m[None, :] ** 0.5
        return np.sum(np.sum(w[:, :, None] * p[None, :, :], axis=1) ** 2)

    p = rng.normal(size=(5, 3))
    check_vjp(f, (p,))
    g = tape.grad(f)(p)
    cf = tape.compile(f, p)
    np.testing.assert_allclose(cf.grad(p), g, rtol=1e-13, atol=1e-13)


OPERATORS = [("__add__", "add", False), ("__radd__", "add", True), ("__sub__", "subtract", False),
             ("__rsub__", "subtract", True), ("__mul__", "multiply", False),
             ("__rmul__", "multiply", True), ("__truediv__", "divide", False),
             ("__rtruediv__", "divide", True), ("__pow__", "power", False),
             ("__rpow__", "power", True)]


@pytest.mark.parametrize("dunder,name,reflected", OPERATORS)
@pytest.mark.parametrize("ashape,bshape", [((2, 3), (2, 3)), ((16, 16, 3), (16, 1, 3)),
                                           ((3,), (2, 1)), ((1,), (3,)), ((0, 2), (2,))])
@pytest.mark.parametrize("grad", [(True, True), (True, False), (False, True)])
def test_operators_record_the_general_row(dunder, name, reflected, ashape, bshape, grad):
    """Python's operators take binary's direct paths themselves (two array tensors, an array
    tensor and a Python float or int): the general rows, the reflected operand order kept."""
    code = OPCODE[name]
    rng = np.random.default_rng(5)
    a, b = rng.uniform(0.5, 2.0, ashape), rng.uniform(0.5, 2.0, bshape)

    def by_operator(x, y):
        op = getattr(tape.Tensor, dunder)
        return op(op(op(x, y), 2.5), 3)

    def by_general(x, y):
        def g(u, v):
            return R._binary(code, v, u) if reflected else R._binary(code, u, v)
        return g(g(g(x, y), 2.5), 3.0)

    _same(_record(by_operator, a, b, grad=grad), _record(by_general, a, b, grad=grad))


_SCALAR_OPERANDS = st.sampled_from(["tape", "leaf", "float", "same float", "zero", "int",
                                     "plain", "other tape"])


@settings(max_examples=40, deadline=None, database=None)
@given(ops=st.lists(st.tuples(st.sampled_from(OPERATORS), _SCALAR_OPERANDS), min_size=1,
                    max_size=8),
       c=st.sampled_from([0.75, 2.0, -1.5]), grad=st.tuples(st.booleans(), st.booleans()))
def test_scalar_operators_record_the_general_row(ops, c, grad):
    """0-d operators (W1's): two tensors on the recording tape, or one and a Python float whose
    constant the tape has, append their row first; every other operand (a leaf, an int, zero,
    a new float, a tensor without grad or of an older tape) takes the operator's general code.
    Both record what that code records with ``state.rec`` off (``_general_rows``), operand
    order and shared constants included, and the values ``_binary`` computes."""
    older = {}

    def run(use_operator, x, y):
        if "t" not in older:  # a 0-d value of an older tape (sealed by a backward)
            with _fresh_tape():
                u = tape.tensor(0.5, requires_grad=True) * 3.0
                u.backward()
                older["t"] = u
        acc = x * 1.0
        for (dunder, name, reflected), kind in ops:
            other = {"tape": acc * 0.5 if acc.requires_grad else y, "leaf": y, "float": c,
                     "same float": 2.5, "zero": 0.0, "int": 3, "plain": tape.tensor(1.25),
                     "other tape": older["t"]}[kind]
            if use_operator:
                acc = getattr(tape.Tensor, dunder)(acc, other) + 2.5
            else:
                code = OPCODE[name]
                acc = R._binary(code, other, acc) if reflected else R._binary(code, acc, other)
                acc = R._binary(OPCODE["add"], acc, 2.5)
        return acc

    def general(x, y):
        with _general_rows():
            return run(True, x, y)

    def nan_as_none(recorded):  # (a negative base to a fractional power: NaN on both paths)
        y, lists = recorded
        if lists is not None:
            lists["sv"] = [None if v != v else v for v in lists["sv"]]
        return y, lists

    fast = _record(lambda x, y: run(True, x, y), 0.6, 1.7, grad=grad)
    _same(nan_as_none(fast), nan_as_none(_record(general, 0.6, 1.7, grad=grad)))
    y = _record(lambda x, y: run(False, x, y), 0.6, 1.7, grad=grad)[0]
    assert fast[0]._v == y._v or (math.isnan(fast[0]._v) and math.isnan(y._v))
    assert fast[0].requires_grad == y.requires_grad


# ---------------------------------------------------------------------------------------------
# Indexing


def _old_getitem(x, key):
    """The general indexing path: index map of x's shape, reshape or gather."""
    key = R.plain_key(key)
    shape = R._shape(x._v)
    hk = R._hashable(key)
    idx = np.asarray(R.index_map(shape, key), dtype=np.int64)
    flat = idx.reshape(-1)
    if idx.size == flat.size == math.prod(shape) and (flat == np.arange(flat.size)).all():
        return R.reshape(x, idx.shape)
    return R.gather(x, idx, cache_key=("gather", shape, hk) if hk is not None else None)


BASIC_KEYS = [
    ((6,), slice(2, 5)), ((6,), slice(None, None, -2)), ((6,), slice(4, 1, -1)),
    ((6,), slice(0, 0)), ((6,), (None, slice(1, None))), ((6,), 3), ((6,), -1),
    ((4, 5), (slice(None, None, 2), slice(1, None))), ((4, 5), 1), ((4, 5), (1, 2)),
    ((4, 5), (Ellipsis, 0)), ((4, 5), (slice(None), None, slice(None, None, -1))),
    ((4, 5), (-1, Ellipsis)), ((2, 3, 4), (1, slice(None), 2)), ((2, 3, 4), (Ellipsis, None)),
    ((4, 5), slice(None)), ((4, 5), (slice(1, 3), slice(None))),
    ((5, 3), (None, slice(None), slice(None))), ((5, 3), (slice(None), None, slice(None))),
    ((4, 4), (slice(None), slice(None), None)), ((0, 3), (None, slice(None))), ((1,), None)]


@pytest.mark.parametrize("shape,key", BASIC_KEYS)
def test_basic_key_records_the_general_row(shape, key):
    a = np.arange(math.prod(shape), dtype=np.float64).reshape(shape) * 1.5 - 2.0

    def _twice(get, x):
        y = get(x, key)
        z = get(x, key)  # the same key again: its ints shared within the tape
        return y + z

    _same(_record(lambda x: _twice(R.getitem, x), a),
          _record(lambda x: _twice(_old_getitem, x), a))
    index_plans._BASIC_MAPS.clear()  # and with the shape's map not yet cached
    _same(_record(lambda x: R.getitem(x, key), a), _record(lambda x: _old_getitem(x, key), a))


_NEW_AXES_PART = st.sampled_from([None, slice(None), Ellipsis])


@settings(max_examples=60, deadline=None, database=None)
@given(shape=st.lists(st.integers(0, 3), min_size=1, max_size=3).map(tuple),
       key=st.lists(_NEW_AXES_PART, max_size=5).map(tuple), grad=st.booleans())
def test_new_axes_key_records_the_general_row(shape, key, grad):
    """x[None, :], x[..., None] of an array on the tape (getitem's view path, W5's broadcasts)
    record reshape's row and value; keys NumPy refuses (more slices than axes, two Ellipses)
    raise NumPy's own error, as the general path does."""
    a = np.arange(math.prod(shape), dtype=np.float64).reshape(shape) * 0.5 - 1.0

    def fast(x):
        y = x * 1.0  # on the tape, not a leaf
        return R.getitem(y, key) + R.getitem(y, key)

    def general(x):
        y = x * 1.0
        return _old_getitem(y, key) + _old_getitem(y, key)

    try:
        want = a[key]
    except IndexError as e:
        for f in (fast, general):
            with pytest.raises(IndexError, match=re.escape(str(e))):
                _record(f, a, grad=(grad,))
        return
    got = _record(fast, a, grad=(grad,))
    _same(got, _record(general, a, grad=(grad,)))
    with _general_rows():
        _same(_record(fast, a, grad=(grad,)), got)
    np.testing.assert_array_equal(got[0]._v, want + want)
    assert got[0]._v.shape == want.shape


def test_new_axes_gradients_in_every_mode():
    rng = np.random.default_rng(8)
    p0 = rng.normal(size=(4, 3))

    def f(p):
        q = p * 1.5
        d = q[None, :, :] - q[:, None, :]
        return np.sum(d * d * q[..., None, :], axis=(0, 1)) @ np.ones(3)

    check_vjp(f, (p0,))
    v0, g0 = tape.value_and_grad(f)(p0)
    v, g = tape.compile(f, p0).value_and_grad(p0)
    np.testing.assert_allclose(v, v0, rtol=1e-13)
    np.testing.assert_allclose(g, g0, rtol=1e-12, atol=1e-14)
    t0 = rng.normal(size=p0.shape)
    _, jv = tape.jvp(f, (p0,), (t0,))
    np.testing.assert_allclose(jv, np.sum(g0 * t0), rtol=1e-10)
    h = tape.hessian(f)(p0)
    eps = 1e-6
    col = (tape.grad(f)(p0 + eps * t0) - tape.grad(f)(p0 - eps * t0)) / (2 * eps)
    np.testing.assert_allclose(np.tensordot(h, t0, axes=2), col, rtol=1e-6, atol=1e-6)


def test_a_slice_of_a_leaf_records_a_copy_and_sees_later_writes():
    a = np.arange(12.0).reshape(3, 4)
    x = tape.tensor(a, requires_grad=True)
    y = x[:, 1:3]
    recorded = y._v
    assert recorded.flags.c_contiguous and recorded.flags.owndata
    with tape.no_grad():
        x[...] = 0.0  # the leaf's buffer changes in place; the recorded value does not
    np.testing.assert_array_equal(recorded, a[:, 1:3])
    np.testing.assert_array_equal(y.numpy(), 0.0)  # y is a view, as NumPy's: it sees the write


INT_KEYS = [((6,), [3, 0, -1, 2, 2]), ((6,), [[1, 2], [5, 0]]), ((5, 3), [4, 0, 4]),
            ((5, 3), [[0], [-2]]), ((2, 3, 4), [1, 0]), ((6,), np.zeros(0, np.int64))]


@pytest.mark.parametrize("shape,key", INT_KEYS)
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint16, np.dtype(">i8")])
def test_integer_key_records_the_general_row(shape, key, dtype):
    key = np.asarray(key).astype(dtype) if np.min(key, initial=0) >= 0 or \
        np.dtype(dtype).kind == "i" else np.asarray(key)
    a = np.arange(math.prod(shape), dtype=np.float64).reshape(shape) + 0.25
    _same(_record(lambda x: R.getitem(x, key), a), _record(lambda x: _old_getitem(x, key), a))
    index_plans._INT_MAPS.clear()
    _same(_record(lambda x: R.getitem(x, key), a), _record(lambda x: _old_getitem(x, key), a))


def test_repeated_integer_key_shares_its_ints():
    rows = np.array([3, 0, 3, 1])
    a = np.arange(20.0).reshape(5, 4)
    (y, t) = _record(lambda x: x[rows] * x[rows.copy()], a)
    assert len(t["ia"]) == rows.size * 4  # one index map for both gathers
    np.testing.assert_array_equal(y._v, a[rows] * a[rows])


@pytest.mark.parametrize("key", [np.array([5]), np.array([-6]), np.array([[0, 9]])])
def test_integer_key_out_of_bounds_is_numpys_error(key):
    x = tape.tensor(np.arange(5.0), requires_grad=True)
    with pytest.raises(IndexError) as want:
        np.arange(5)[key]
    with pytest.raises(IndexError, match=str(want.value)):
        x[key]


# ---------------------------------------------------------------------------------------------
# where


def _old_where(mask, a, b):
    """where as recorded by the general path: the mask converted, broadcast and concatenated."""
    mask = np.asarray(R.raw(mask)).astype(bool)
    av, bv = R.raw(a), R.raw(b)
    y = R.check_dtype(np.where(mask, av, bv), "where")
    if not R.recording(a, b):
        return R.plain(y)
    t = R.current_tape()
    shape, n = R._shape(y), R._size(y)
    sa, fa, ma = R._operand(t, a, shape, n)
    sb, fb, mb = R._operand(t, b, shape, n)
    flags = fa * ONE_A | fb * ONE_B | (ma >= 0) * MAP_A | (mb >= 0) * MAP_B
    off = t.add_ints(layouts.encode_where(ma, mb, np.broadcast_to(mask, shape).reshape(-1)))
    return R.result(y, t, t.row(R.WHERE | flags << FLAG_SHIFT, sa, sb, y, n, off))


WHERE_CASES = [  # mask, a's shape (None: the float 2.0), b's shape
    (np.array([True, False, True]), (3,), (3,)),
    ([1, 0, 0], (3,), (3,)),
    (np.array([0.5, 0.0, -1.0]), (3,), None),
    (np.array([[True], [False]]), (2, 4), (4,)),
    (np.array([True, False, False, True]), (3, 1), (1, 4)),
    (np.array(True), (2, 2), (1,)),
    (np.array(True), (), ()),
    (np.zeros((0, 3), bool), (0, 3), (3,)),
]


@pytest.mark.parametrize("mask,ashape,bshape", WHERE_CASES)
@pytest.mark.parametrize("grad", [(True, True), (True, False), (False, True)])
def test_where_records_the_general_row(mask, ashape, bshape, grad):
    rng = np.random.default_rng(3)
    a = rng.normal(size=ashape)
    b = rng.normal(size=bshape) if bshape is not None else None

    def via(w):
        if b is None:
            return lambda x: w(mask, x, 2.0)
        return lambda x, y: w(mask, x, y)

    args = (a,) if b is None else (a, b)
    _same(_record(via(R.where), *args, grad=grad), _record(via(_old_where), *args, grad=grad))


def test_where_shares_the_ints_of_equal_masks_only():
    a, b = np.arange(4.0), -np.arange(4.0)
    m1 = np.array([True, False, True, False])

    def f(x, y):
        return np.where(m1, x, y) + np.where(m1.copy(), x, y) + np.where(~m1, x, y)

    (z, t) = _record(f, a, b)
    assert len(t["ia"]) == 2 * (4 + 2)  # m1 once, ~m1 once
    np.testing.assert_array_equal(z._v, np.where(m1, a, b) * 2 + np.where(~m1, a, b))


def _row_ints(t):
    """Each where or matmul row of a tape's lists: (its code, operands, n, its ints)."""
    rows, side, ia = t["rows"], t["side"], t["ia"]
    out = []
    for i in range(0, len(side), 4):  # (array rows only: 0-d rows have no side row)
        slot, n, iat, _ = side[i:i + 4]
        code, a, b = rows[3 * slot:3 * slot + 3]
        op = code & ((1 << FLAG_SHIFT) - 1)
        if op == R.WHERE:  # (an operand's map by its contents: its offset depends on sharing)
            maps = tuple(None if m < 0 else tuple(ia[m:m + n]) for m in ia[iat:iat + 2])
            out.append((code, a, b, n, maps, tuple(ia[iat + 2:iat + n + 2])))
        elif op == bilinear.MATMUL:
            out.append((code, a, b, n, tuple(ia[iat:iat + 6])))
    return out


_MASK_SHAPES = st.sampled_from([(), (1,), (4,), (1, 4), (3, 1), (3, 4), (2, 2), (0,), (0, 4)])


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_where_masks_keyed_by_bytes_give_the_general_ints(data):
    """Masks of the result's size and no operand maps share ints by their bytes alone: masks of
    other shapes with the same bytes, broadcast masks, and masks with operand maps must still
    get their own ints, as the general path writes them, row for row."""
    ashape = data.draw(_MASK_SHAPES, "a's shape")
    calls = data.draw(st.lists(st.tuples(_MASK_SHAPES, st.integers(0, 3), st.sampled_from(
        ["bool", "int", "strided", "readonly"])), min_size=1, max_size=5), "calls")
    rng = np.random.default_rng(11)
    masks = []
    for mshape, seed, kind in calls:
        try:
            np.broadcast_shapes(mshape, ashape)
        except ValueError:
            continue  # (NumPy's error: test_where_errors_are_numpys)
        bits = np.random.default_rng(seed).integers(0, 2, size=mshape)
        m = bits.astype(bool)
        if kind == "int":
            m = bits * 3
        elif kind == "strided":
            m = np.repeat(m, 2, axis=-1)[..., ::2] if m.ndim else m
        elif kind == "readonly":
            m = m.copy()
            m.flags.writeable = False
        masks.append(m)
    masks.append(np.ones(ashape, bool))  # (at least one call)
    a = rng.normal(size=ashape)
    b = rng.normal(size=ashape)

    def via(w):
        def f(x, y):
            out = []
            for m in masks:
                out.append(w(m, x, y))  # no maps unless the mask broadcasts x and y
                out.append(w(m, y, 2.0))  # a float operand: read as one element
            return out[-1]
        return f

    (yf, tf), (ys, ts) = _record(via(R.where), a, b), _record(via(_old_where), a, b)
    assert _row_ints(tf) == _row_ints(ts)
    assert tf["rows"] == ts["rows"] and tf["av"] == ts["av"]
    np.testing.assert_array_equal(yf._v, ys._v)


def test_where_same_bytes_other_shape_and_maps():
    """(4,) and (2, 2) masks of equal bytes share their ints (they are equal); a mask of the
    same bytes that broadcasts operands gets ints with its maps."""
    bits = np.array([True, False, False, True])

    def f(x, y, z):
        u = np.where(bits, x, y)  # (4,): ints [-1, -1, bits]
        v = np.where(bits.reshape(2, 2), z, 1.0)  # (2, 2): the same ints
        w = np.where(bits.reshape(2, 2), x[:2], z)  # x[:2] broadcast over rows: a map
        return np.sum(u) + np.sum(v * w)

    (y, t) = _record(f, np.arange(4.0), -np.arange(4.0), np.ones((2, 2)))
    ia, iats = t["ia"], [t["side"][i + 2] for i in range(0, len(t["side"]), 4)
                         if t["rows"][3 * t["side"][i]] & ((1 << FLAG_SHIFT) - 1) == R.WHERE]
    assert iats[0] == iats[1] and tuple(ia[iats[0]:iats[0] + 6]) == (-1, -1, 1, 0, 0, 1)
    assert iats[2] != iats[0] and ia[iats[2]] >= 0 and ia[iats[2] + 1] == -1
    assert tuple(ia[iats[2] + 2:iats[2] + 6]) == (1, 0, 0, 1)
    check_vjp(f, (np.arange(4.0), -np.arange(4.0), np.ones((2, 2))))


@pytest.mark.parametrize("mask,ashape,bshape", WHERE_CASES)
def test_where_gradients_in_every_mode(mask, ashape, bshape):
    rng = np.random.default_rng(12)
    a = rng.normal(size=ashape)
    b = rng.normal(size=bshape) if bshape is not None else np.float64(2.0)

    def f(x, y):
        return np.sum(np.where(mask, x, y) * np.where(mask, y, x) ** 2)

    check_vjp(f, (a, b))
    g0 = tape.grad(f, argnums=(0, 1))(a, b)
    cf = tape.compile(f, a, b, argnums=(0, 1))
    _, g = cf.value_and_grad(a, b)
    for gi, g0i in zip(g, g0):
        np.testing.assert_allclose(gi, g0i, rtol=1e-12, atol=1e-14)
    ta, tb = rng.normal(size=np.shape(a)), rng.normal(size=np.shape(b))
    _, jv = tape.jvp(f, (a, b), (ta, tb))
    np.testing.assert_allclose(jv, np.sum(g0[0] * ta) + np.sum(g0[1] * tb), rtol=1e-10,
                               atol=1e-12)


def test_where_errors_are_numpys():
    x = tape.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(ValueError) as want:
        np.where(np.ones(2, bool), np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match=re.escape(str(want.value))):
        np.where(np.ones(2, bool), x, x)


def _loop(x, w):
    """Every direct path in one function: repeated masks, keys, reductions and matmuls."""
    rows = np.array([2, 0, 2])
    mask = np.array([[True, False, True], [False, False, True], [True, True, False]])
    acc = 0.0
    for k in range(3):
        h = np.where(mask, x, 0.5 * x) @ w
        h = np.where(mask, np.sin(h), h * h) + x[rows] - 0.25
        acc = acc + np.sum(h[::2, 1:] * 1.5, axis=1).sum() + np.max(h, axis=0)[k]
        x = x * 0.9 + np.tanh(h)
    return acc


def test_shared_ints_gradients_against_finite_differences():
    rng = np.random.default_rng(4)
    check_vjp(_loop, (rng.normal(size=(3, 3)), rng.normal(size=(3, 3))))


def test_shared_ints_compiled_and_forward_mode_agree_with_eager():
    rng = np.random.default_rng(5)
    x0, w0 = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    v0, g0 = tape.value_and_grad(_loop, argnums=(0, 1))(x0, w0)
    cf = tape.compile(_loop, x0, w0, argnums=(0, 1))
    v, g = cf.value_and_grad(x0, w0)
    np.testing.assert_allclose(v, v0, rtol=1e-13)
    for gi, g0i in zip(g, g0):
        np.testing.assert_allclose(gi, g0i, rtol=1e-11, atol=1e-13)
    tx = rng.normal(size=(3, 3))
    _, jv = tape.jvp(lambda x: _loop(x, w0), (x0,), (tx,))
    np.testing.assert_allclose(jv, np.sum(g0[0] * tx), rtol=1e-10)


# ---------------------------------------------------------------------------------------------
# Reductions and matmul: a plan cached by shape records what the first call recorded


@pytest.mark.parametrize("name", ["sum", "prod", "amax", "amin"])
@pytest.mark.parametrize("shape,axis", [((16,), None), ((16,), 0), ((16,), -1), ((4, 5), None),
                                        ((4, 5), 1), ((4, 5), 0), ((2, 3, 4), 1),
                                        ((2, 3, 4), -1), ((3, 0), 0), ((3, 0), 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce_plan_records_the_first_row(name, shape, axis, keepdims):
    a = np.random.default_rng(6).uniform(0.5, 1.5, shape)
    if a.size == 0 and name in ("amax", "amin") and axis in (None, 1):
        return  # NumPy refuses: an empty reduction without identity

    def f(x):
        return reductions.reduce(name, x, axis, keepdims)

    reductions._REDUCE_PLANS.clear()
    slow = _record(f, a)
    assert reductions._REDUCE_PLANS  # the first call left its plan
    _same(_record(f, a), slow)


@pytest.mark.parametrize("name,np_fn", [("sum", np.sum), ("prod", np.prod), ("amax", np.max),
                                        ("amin", np.min)])
@pytest.mark.parametrize("shape,axis", [((16,), None), ((4, 5), 1), ((2, 3, 4), -1),
                                        ((2, 3, 4), 0)])
@pytest.mark.parametrize("grad", [False, True])
def test_reduce_plan_without_recording_gives_numpys_value(name, np_fn, shape, axis, grad):
    """A reduction that records nothing (a tensor without grad, or under no_grad) notes its plan
    too; the next call takes it and gives NumPy's value, a plain tensor."""
    a = np.random.default_rng(9).uniform(0.5, 1.5, shape)
    x = tape.tensor(a, requires_grad=grad)
    reductions._REDUCE_PLANS.clear()
    with tape.no_grad():
        first = reductions.reduce(name, x, axis)
        assert reductions._REDUCE_PLANS
        second = reductions.reduce(name, x, axis)
    for y in (first, second):
        assert not y.requires_grad
        np.testing.assert_array_equal(y._v, np_fn(a, axis=axis))
        assert type(y._v) is type(first._v)


@pytest.mark.parametrize("ashape,bshape", [((3, 4), (4, 5)), ((4,), (4, 3)), ((3, 4), (4,)),
                                           ((2, 3, 4), (4, 5)), ((2, 3, 4), (1, 4, 2)),
                                           ((2, 1, 3, 4), (5, 4, 2)), ((40, 40), (40, 40))])
def test_matmul_plan_records_the_first_row(ashape, bshape):
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=ashape), rng.normal(size=bshape)

    def f(x, y):
        return (x @ y) + (x @ y)  # the second matmul shares the first one's ints

    bilinear._MATMUL_PLANS.clear()
    slow = _record(f, a, b)
    _same(_record(f, a, b), slow)
    assert np.array_equal(slow[0]._v, (a @ b) + (a @ b))


def test_matmul_plan_follows_blas_flops(monkeypatch):
    """A plan cached by shapes leaves the BLAS-or-jitted choice to the setting of each call."""
    a, b = np.ones((2, 3)), np.ones((3, 2))
    blas = OPCODE["matmul_blas"]
    _, t = _record(lambda x, y: x @ y, a, b)
    assert t["rows"][6] == OPCODE["matmul"]  # leaf, leaf, product
    monkeypatch.setattr(bilinear, "BLAS_FLOPS", 0)
    _, t = _record(lambda x, y: x @ y, a, b)
    assert t["rows"][6] == blas
    monkeypatch.undo()
    _, t = _record(lambda x, y: x @ y, a, b)
    assert t["rows"][6] == OPCODE["matmul"]


MATRICES = [((3, 4), (4, 5)), ((1, 1), (1, 1)), ((16, 16), (16, 16)), ((0, 3), (3, 2)),
            ((3, 0), (0, 2)), ((2, 3), (3, 0)), ((1, 7), (7, 1))]


@pytest.mark.parametrize("ashape,bshape", MATRICES)
@pytest.mark.parametrize("kind", ["leaves", "on_tape", "transposed", "constant", "readonly"])
def test_matrix_product_records_the_plans_row(ashape, bshape, kind):
    """Two matrices skip the shape plan: their row, ints and key are the plan's."""
    rng = np.random.default_rng(13)
    a, b = rng.normal(size=ashape), rng.normal(size=bshape)
    const = rng.normal(size=bshape)
    if kind == "readonly":
        const.flags.writeable = False

    def f(x, y):
        if kind == "on_tape":
            x, y = x * 1.0, y * 1.0
        elif kind == "transposed":
            x, y = (x.T * 1.0).T, (y.T * 1.0).T  # a transpose's row, then its transpose back
        elif kind in ("constant", "readonly"):
            return (x @ const) + (x @ y)
        return (x @ y) + (x @ y)

    (y, t) = _record(f, a, b)
    rows = _row_ints(t)
    M, K = ashape
    N = bshape[1]
    assert bilinear._matmul_plan(ashape, bshape)[-1] == ("matmul", 1, M, K, N, 0, 0)
    assert [r[4] for r in rows] == [layouts.encode_matmul(1, M, K, N, 0, 0)] * len(rows)
    want = (a @ const) + (a @ b) if kind in ("constant", "readonly") else (a @ b) + (a @ b)
    np.testing.assert_array_equal(y._v, want)
    if a.size and b.size:
        check_vjp(lambda x, z: np.sum(f(x, z) ** 2), (a, b))


@pytest.mark.parametrize("ashape,bshape", [((3, 4), (4, 5)), ((1, 1), (1, 1)), ((4,), (4, 3))])
def test_matrix_product_gradients_in_every_mode(ashape, bshape):
    rng = np.random.default_rng(14)
    a, b = rng.normal(size=ashape), rng.normal(size=bshape)

    def f(x, y):
        return np.sum(np.tanh(x @ y) * (x @ y))

    g0 = tape.grad(f, argnums=(0, 1))(a, b)
    cf = tape.compile(f, a, b, argnums=(0, 1))
    _, g = cf.value_and_grad(a, b)
    for gi, g0i in zip(g, g0):
        np.testing.assert_allclose(gi, g0i, rtol=1e-12, atol=1e-14)
    ta, tb = rng.normal(size=ashape), rng.normal(size=bshape)
    _, jv = tape.jvp(f, (a, b), (ta, tb))
    np.testing.assert_allclose(jv, np.sum(g0[0] * ta) + np.sum(g0[1] * tb), rtol=1e-10)
    h = tape.hessian(lambda x: f(x, b))(a)
    eps = 1e-5
    gp = tape.grad(lambda x: f(x, b))(a + eps * ta)
    gm = tape.grad(lambda x: f(x, b))(a - eps * ta)
    np.testing.assert_allclose(np.tensordot(h, ta, ta.ndim), (gp - gm) / (2 * eps), rtol=1e-5,
                               atol=1e-8)


def test_matrix_product_pools_only_results_that_can_be_large(monkeypatch):
    """A result of a.size * b.size / K**2 cells or more may be large: only those go through the
    value pool's into(); a 16x16 product of 16x16 operands does not."""
    calls = []

    def spy(f, a, b):
        calls.append((a.shape, b.shape))
        return f(a, b)

    monkeypatch.setattr(bilinear, "into", spy)
    for ashape, bshape in [((16, 16), (16, 16)), ((2, 5000), (5000, 2)), ((128, 4), (4, 128)),
                           ((100, 3), (3, 100))]:
        x = tape.tensor(np.ones(ashape), requires_grad=True)
        y = x @ np.ones(bshape)
        np.testing.assert_array_equal(y._v, np.ones(ashape) @ np.ones(bshape))
    assert calls == [((128, 4), (4, 128))]  # 16,384 cells: the pool's size


@pytest.mark.parametrize("ashape,bshape", [((3, 4), (5, 2)), ((3, 4), (3,)), ((2,), (3,))])
def test_matmul_errors_name_the_shapes(ashape, bshape):
    x = tape.tensor(np.ones(ashape), requires_grad=True)
    with pytest.raises(ValueError) as want:
        np.ones(ashape) @ np.ones(bshape)
    with pytest.raises(ValueError, match=re.escape(f"matmul: {want.value}")):
        x @ np.ones(bshape)


# ---------------------------------------------------------------------------------------------
# The recording tape read once (state.rec): every op's direct row against Tape.row's


@contextlib.contextmanager
def _general_rows():
    """Record with ``state.rec`` None while the tape and grad stay as they are: every op then
    takes its general branch (``general_tape`` and ``Tape.row``), as under saved_tensors_hooks."""
    state.rec = None
    try:
        yield
    finally:
        state.tape = state.tape  # (rec again from tape, grad and saved_hooks)


def _w5_mix(shape, c, steps, keys):
    """W5's op mix and the other direct paths on arrays of `shape`: None-index reshapes,
    broadcasts, same-shape ops, Python floats on either side, a NumPy constant, unary ufuncs,
    reductions, basic and integer keys, where, matmul, 0-d operators."""
    n = shape[0]
    cst = np.linspace(0.5, 1.5, n)
    rows = np.arange(n)[::-1].copy()
    mask = (np.arange(math.prod(shape)) % 3 == 0).reshape(shape)

    def f(p, q, s):
        acc = s * 1.0
        for k in range(steps):
            d = p[None] - p[:, None]
            r2 = np.sum(d * d, axis=-1) + c
            w = cst[None, :] / (r2 * np.sqrt(r2))
            a = np.sum(d * w[..., None], axis=1)
            q = q + (0.5 * c) * a
            p = p - c * q
            p = np.where(mask, np.exp(-p), np.tanh(p)) - p[rows] + (p @ np.ones(shape[1:] +
                                                                             shape[1:]))
            for key in keys:
                p = p + p[key] * 0.25 if p[key].shape == p.shape else p
            acc = acc * s + (2.0 - s) / (1.0 + s * s) - float(k)
        return p, q, acc

    return f


@settings(max_examples=25, deadline=None, database=None)
@given(n=st.integers(1, 5), m=st.integers(1, 4), c=st.sampled_from([0.1, 2.0, 0.5]),
       steps=st.integers(1, 3), grads=st.tuples(st.booleans(), st.booleans(), st.booleans()),
       keys=st.lists(st.sampled_from([(slice(None), slice(None)), (slice(None, None, -1),),
                                      (Ellipsis, slice(None)), (slice(None), slice(1, None))]),
                     max_size=2))
def test_direct_rows_are_tape_rows(n, m, c, steps, grads, keys):
    """The direct rows (``array_row``, the inlined 0-d and float-constant rows) record what
    ``Tape.row`` and ``result`` record, rows, side rows, ints and values, in any op mix."""
    rng = np.random.default_rng(n * 10 + m)
    p, q = rng.normal(size=(n, m)), rng.normal(size=(n, m))
    f = _w5_mix((n, m), c, steps, keys)

    def total(*xs):
        zp, zq, acc = f(*xs)
        return R._binary(OPCODE["add"], np.sum(zp * zq), acc)

    def general(*xs):
        with _general_rows():
            return total(*xs)

    _same(_record(total, p, q, 0.7, grad=grads), _record(general, p, q, 0.7, grad=grads))


def test_rec_follows_grad_tape_and_saved_hooks():
    x = tape.tensor(np.arange(3.0), requires_grad=True)
    with _fresh_tape():
        y = x * 2.0
        assert state.rec is state.tape is y._tape
        with tape.no_grad():
            assert state.rec is None
            assert not (x * 2.0).requires_grad
        assert state.rec is state.tape
        with tape.graph.saved_tensors_hooks(lambda v: v, lambda v: v):
            assert state.rec is None
            z = y * y  # recorded by Tape.row: the value packed
            assert state.tape.packed
        assert state.rec is state.tape  # (packed rows end their tape: a new one is next)
        w = y * 3.0
        assert state.rec is state.tape is w._tape
        (z.sum() + w.sum()).backward()  # seals the tape: the next op starts a new one
        assert state.rec is state.tape is None
        np.testing.assert_allclose(x.grad, 8.0 * np.arange(3.0) + 6.0)


def test_each_thread_records_on_its_own_tape():
    import threading

    x = tape.tensor(np.arange(4.0), requires_grad=True)
    out = {}

    def work(name):
        out[name] = ((x * 2.0) + np.sin(x)).sum()
        out[name + " tape"] = state.tape

    with _fresh_tape():
        main = x * 1.0
        threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(3)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        tapes = {id(out[f"t{i} tape"]) for i in range(3)} | {id(state.tape)}
        assert len(tapes) == 4 and main._tape is state.tape
    for i in range(3):
        (g,) = tape.autograd.grad(out[f"t{i}"], [x])
        np.testing.assert_allclose(g, 2.0 + np.cos(np.arange(4.0)))


def test_direct_rows_roll_where_tape_rows_roll(monkeypatch):
    """array_row seals a tape past the tape module's MAX_ROWS, as Tape.row does: the same rows
    on the same tapes either way, and the gradient across the links is the same."""
    import tape.core.tape as tape_module

    monkeypatch.setattr(tape_module, "MAX_ROWS", 7)
    p0 = np.linspace(-1.0, 1.0, 6).reshape(3, 2)

    def f(p, general):
        ctx = _general_rows() if general else contextlib.nullcontext()
        tapes = []
        with ctx:
            for _ in range(4):
                p = np.sin(p) * p + 0.5 * p[None][0]
                tapes.append((p._tape.id, p._slot))
                if general:
                    state.rec = None  # (a rolled tape's successor sets rec again)
        return np.sum(p), tapes

    runs = []
    for general in (False, True):
        with _fresh_tape():
            x = tape.tensor(p0, requires_grad=True)
            y, tapes = f(x, general)
            (g,) = tape.autograd.grad(y, [x])
            runs.append(([slot for _, slot in tapes], len({i for i, _ in tapes}), g))
    assert runs[0][0] == runs[1][0] and runs[0][1] == runs[1][1] > 1
    np.testing.assert_array_equal(runs[0][2], runs[1][2])


# ---------------------------------------------------------------------------------------------
# Small NumPy constants: one constant row per tape for equal bytes


def _const_rows(t):
    """Array constant rows (a Python float's constant has no side row)."""
    return sum(1 for i in range(0, len(t["side"]), 4)
               if t["rows"][3 * t["side"][i]] == OPCODE["const"])


def test_equal_numpy_constants_share_one_row():
    masses = np.linspace(0.5, 1.5, 4)

    def f(r):
        acc = 0.0
        for _ in range(3):
            acc = acc + np.sum(masses[None, :] / r) + np.sum(r * masses.copy())
        return acc

    r0 = np.random.default_rng(15).uniform(0.5, 2.0, (4, 4))
    (y, t) = _record(f, r0)
    assert _const_rows(t) == 2  # masses[None, :] (1, 4) and masses (4,): shapes differ
    want = sum(np.sum(masses[None, :] / r0) + np.sum(r0 * masses) for _ in range(3))
    np.testing.assert_allclose(y._v, want, rtol=1e-15)
    check_vjp(f, (r0,))


@pytest.mark.parametrize("c1,c2,shared", [
    ([0.0, 1.0], [-0.0, 1.0], False),  # -0.0 is not 0.0 (x / c differs)
    ([np.nan, 1.0], [np.nan, 1.0], True),  # the same NaN bits: the same constant
    ([1.0, 2.0], [1.0, 2.0 + 2 ** -51], False),  # one ulp apart
])
def test_constants_are_shared_only_for_equal_bits(c1, c2, shared):
    a, b = np.array(c1), np.array(c2)

    def f(x):
        return x * a + x / b

    x0 = np.array([1.5, -2.0])
    (y, t) = _record(f, x0)
    assert _const_rows(t) == (1 if shared else 2)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(y._v, x0 * a + x0 / b)


def test_a_constant_changed_between_ops_is_a_new_constant():
    c = np.array([1.0, 2.0, 3.0])
    ro = np.array([4.0, 5.0, 6.0])
    ro.flags.writeable = False

    def f(x):
        y = x * c
        c[1] = -7.0  # the next op reads the new values
        z = x * c + x * ro + x * ro[::-1].copy()[::-1]  # read-only and non-contiguous views
        c[1] = 2.0
        return np.sum(y * z)

    x0 = np.array([0.5, -1.0, 2.0])
    (y, t) = _record(f, x0)
    assert _const_rows(t) == 3  # c, then c changed, then ro (its reversed copy: equal bits)
    want = np.sum((x0 * c) * (x0 * np.array([1.0, -7.0, 3.0]) + 2 * x0 * ro))
    np.testing.assert_allclose(y._v, want, rtol=1e-15)
    g = tape.grad(f)(x0)
    gp = [(f(x0 + h) - f(x0 - h)) / 2e-6 for h in np.eye(3) * 1e-6]
    np.testing.assert_allclose(g, gp, rtol=1e-6)


def test_large_and_integer_constants_are_not_compared():
    big = np.linspace(0.0, 1.0, 2048)
    ints = np.arange(1, 5)

    def f(x, z):
        return np.sum(x * big) + np.sum(x * big) + np.sum(z * ints) + np.sum(z * ints)

    (y, t) = _record(f, np.ones(2048), np.ones(4))
    assert _const_rows(t) == 4
    assert float(y._v) == 2 * big.sum() + 2 * ints.sum()


def test_shared_constants_compiled_and_forward_mode_agree_with_eager():
    masses = np.linspace(0.5, 1.5, 5)

    def f(r):
        return np.sum(masses[None, :] / r) * np.sum(masses[None, :] * r)

    r0 = np.random.default_rng(16).uniform(0.5, 2.0, (5, 5))
    v0, g0 = tape.value_and_grad(f)(r0)
    cf = tape.compile(f, r0)
    v, g = cf.value_and_grad(r0)
    np.testing.assert_allclose(v, v0, rtol=1e-14)
    np.testing.assert_allclose(g, g0, rtol=1e-12)
    tr = np.random.default_rng(17).normal(size=r0.shape)
    _, jv = tape.jvp(f, (r0,), (tr,))
    np.testing.assert_allclose(jv, np.sum(g0 * tr), rtol=1e-10)
    h = tape.hessian(f)(r0)
    gp, gm = tape.grad(f)(r0 + 1e-5 * tr), tape.grad(f)(r0 - 1e-5 * tr)
    np.testing.assert_allclose(np.tensordot(h, tr, 2), (gp - gm) / 2e-5, rtol=1e-5, atol=1e-8)


# ---------------------------------------------------------------------------------------------
# __array_function__: the common types tuples by one set lookup, every other one checked


class _Duck:
    """Another library's array type: it handles NumPy functions itself."""

    def __array_function__(self, func, types, args, kwargs):
        return ("duck", func.__name__, tuple(t.__name__ for t in types))


class _SubArray(np.ndarray):
    pass


def test_array_function_defers_to_other_types_and_takes_subclasses():
    x = tape.tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    mask = np.array([True, False, True])
    got = np.where(mask, x, _Duck())
    assert got[0] == "duck" and got[1] == "where"  # we returned NotImplemented: the duck's turn
    sub = np.array([4.0, 5.0, 6.0]).view(_SubArray)
    y = np.where(mask, x, sub)  # an ndarray subclass: ours, as before
    np.testing.assert_array_equal(y._v, [1.0, 5.0, 3.0])
    (g,) = tape.grad(lambda t: np.sum(np.where(mask, t, sub) ** 2), argnums=(0,))(x._v)
    np.testing.assert_array_equal(g, [2.0, 0.0, 6.0])
    with pytest.raises(TypeError, match="no implementation found"):
        np.where(mask, x, object.__new__(type("Other", (_Duck,), {
            "__array_function__": lambda self, *a: NotImplemented})))
