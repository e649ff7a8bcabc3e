"""The conversion contract (README "Conversion contract", docs/porting.md): a tensor that carries a
gradient (it requires grad: a leaf, a result with history, a dual number) never becomes a plain
Python or NumPy value in silence. Each implicit conversion raises a TypeError that names the
idiom and its fix; the explicit accessors (item, tolist, numpy, detach) work; tensors without a
gradient convert freely; the fixed idioms give the finite-difference gradient, eager, nested, in
forward mode and in compiled replay."""
from __future__ import annotations

import math
import operator

import numpy as np
import pytest
from _fd import fd_vjp

import tape
import tape.numpy as tnp
from tape import forward_ad as fwAD

X0 = np.array([0.3, -1.2])
FLOAT = r"float\(t\) on a tensor that carries a gradient"
ARRAY = r"turned into a NumPy array"


def leaf(x):
    return tape.tensor(np.asarray(x, dtype=np.float64), requires_grad=True)


def fd_grad(f, x):
    """Central differences of scalar f (run on plain NumPy values) at x."""
    return fd_vjp(f, [x], 1.0, [0])[0]


# ---------------------------------------------------------------------------------------------
# The three snippets of issue 32: each raises with its fix named, and the fix gives the gradient


def fill_numpy(x):
    out = np.zeros(2)
    for i in range(2):
        out[i] = x[i] ** 2  # ndarray.__setitem__ takes float(x[i] ** 2)
    return np.sum(out) + 0.0 * x[0]


def fill_tnp(x):
    out = tnp.zeros(2)  # the one-word fix: a buffer whose item assignment records
    for i in range(2):
        out[i] = x[i] ** 2
    return np.sum(out) + 0.0 * x[0]


def test_issue_snippet_math_exp_raises_and_np_exp_is_the_fix():
    with pytest.raises(TypeError, match=FLOAT) as e:
        tape.grad(lambda x: math.exp(x[0]) + x[1])(X0)
    assert "np.exp(t)" in str(e.value)
    g = tape.grad(lambda x: np.exp(x[0]) + x[1])(X0)
    np.testing.assert_allclose(g, [math.exp(0.3), 1.0], rtol=1e-12)


def test_issue_snippet_float_raises_and_item_is_named():
    with pytest.raises(TypeError, match=FLOAT) as e:
        tape.grad(lambda x: float(x[0]) * x[1])(X0)
    assert "t.item()" in str(e.value)
    np.testing.assert_allclose(tape.grad(lambda x: x[0] * x[1])(X0), [-1.2, 0.3], rtol=1e-12)


def test_issue_snippet_preallocated_ndarray_raises_and_tnp_zeros_is_the_fix():
    # NumPy re-raises any error of __float__ in item assignment as "setting an array element
    # with a sequence" (a tensor has __getitem__); the refusal is its cause, shown above it
    with pytest.raises((TypeError, ValueError)) as e:
        tape.grad(fill_numpy)(X0)
    refusal = e.value if isinstance(e.value, TypeError) else e.value.__cause__
    assert isinstance(refusal, TypeError) and "tnp.zeros(n)" in str(refusal)
    assert "np.stack" in str(refusal)
    g = tape.grad(fill_tnp)(X0)
    np.testing.assert_allclose(g, [0.6, -2.4], rtol=1e-12)
    np.testing.assert_allclose(g, fd_grad(fill_tnp, X0), rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# Every implicit conversion of a tensor that carries a gradient raises, naming the fix

CONVERSIONS = {  # name -> (conversion of a 0-d tensor t, key phrase of the message, a fix named)
    "float": (float, FLOAT, "t.item()"),
    "math.exp": (math.exp, FLOAT, "np.exp(t)"),
    "math.sqrt": (math.sqrt, FLOAT, "np.sqrt(t)"),
    "math.isfinite": (math.isfinite, FLOAT, "t.item()"),
    "percent-format": (lambda t: "%.3f" % t, FLOAT, "t.item()"),
    "np.float64": (np.float64, ARRAY, "t.item()"),
    "complex": (complex, FLOAT, "t.item()"),
    "int": (int, r"int\(t\) on a tensor that carries a gradient", "int(t.item())"),
    "index": (operator.index, "used as an integer", "int(t.item())"),
    "range": (range, "used as an integer", "int(t.item())"),
    "list index": (lambda t: [1.0, 2.0, 3.0][t], "used as an integer", "int(t.item())"),
    "tensor index": (lambda t: tape.tensor([1.0, 2.0, 3.0])[t], "used as an integer",
                     "int(t.item())"),
    "bool": (bool, r"bool\(t\) on a tensor", "if loss < tol:"),
    "if": (lambda t: 1 if t else 0, r"bool\(t\) on a tensor", "if loss < tol:"),
    "np.asarray": (np.asarray, ARRAY, "t.detach().numpy()"),
    "np.array of a list": (lambda t: np.array([t, t]), ARRAY, "np.stack([t0, t1])"),
    "ndarray slice assignment": (lambda t: _assign(np.zeros(3), slice(0, 1), t), ARRAY,
                                 "tnp.zeros(n)"),
    "tape.tensor": (tape.tensor, r"tape.tensor\(t\)", "t.detach()"),
}


def _assign(out, key, value):
    out[key] = value
    return out


def _grad_carrying(kind):
    """0-d tensors that carry a gradient, in every form: (name, tensor) pairs."""
    x = leaf(1.0)
    yield "leaf", x
    yield "result", x * 2.0
    yield "element of an array leaf", leaf([1.0, 2.0])[0]
    with fwAD.dual_level():
        yield "dual number", fwAD.make_dual(tape.tensor(1.0), tape.tensor(1.0))
    with tape.no_grad():
        yield "leaf under no_grad", x  # it still requires grad: converting it is still refused


@pytest.mark.parametrize("name", sorted(CONVERSIONS))
def test_implicit_conversions_of_grad_carrying_tensors_raise_naming_the_fix(name):
    convert, phrase, fix = CONVERSIONS[name]
    for form, t in _grad_carrying(name):
        with pytest.raises(TypeError, match=phrase) as e:
            convert(t)
        assert fix in str(e.value), (form, str(e.value))
        assert "would lose the gradient silently" in str(e.value)


def test_ndarray_item_assignment_of_a_grad_carrying_tensor_raises():
    out = np.zeros(3)
    for form, t in _grad_carrying("setitem"):
        with pytest.raises(ValueError, match="sequence") as e:
            out[0] = t
        assert isinstance(e.value.__cause__, TypeError), form
        assert "tnp.zeros(n)" in str(e.value.__cause__)
    assert not out.any()  # nothing was written


def test_no_buffer_protocol():
    with pytest.raises(TypeError):
        memoryview(leaf(1.0))


def test_arrays_raise_the_same_way():
    x = leaf([1.0, 2.0])
    for convert in (np.asarray, np.array, lambda t: np.asarray(t, dtype=float),
                    lambda t: np.array([t, t]), lambda t: _assign(np.zeros((3, 2)), 0, t)):
        for t in (x, x * 1.0):
            with pytest.raises(TypeError, match=ARRAY):
                convert(t)
    with pytest.raises(TypeError, match=ARRAY):
        np.zeros(3)[leaf(1.0)]


# ---------------------------------------------------------------------------------------------
# Explicit accessors work; tensors without a gradient convert freely; comparisons are unchanged


def test_explicit_accessors_give_values():
    x = leaf([1.5, -2.0])
    y = x * 2.0
    assert y[0].item() == 3.0 and y.tolist() == [3.0, -4.0]
    np.testing.assert_array_equal(y.numpy(), [3.0, -4.0])
    np.testing.assert_array_equal(np.asarray(y.detach()), [3.0, -4.0])
    assert float(y[1].detach()) == -4.0
    assert tape.tensor(y.detach(), requires_grad=True).requires_grad


def test_formatting_shows_the_value_and_feeds_no_arithmetic():
    y = leaf(2.0) * 1.5
    assert f"{y:.3f}" == "3.000" and f"{y:g}" == "3"
    assert f"{y}" == str(y) == repr(y)  # the tensor's repr, as print(y)
    with pytest.raises(TypeError, match="format"):
        f"{leaf([1.0, 2.0]):.3f}"


def test_tensors_without_a_gradient_convert_freely():
    c = tape.tensor(2.0)
    x = leaf([2.0, 3.0])
    with tape.no_grad():
        r = x[0] * 1.0  # computed under no_grad: no history
    for t in (c, r):
        assert float(t) == 2.0
    assert int(c) == 2 and operator.index(c) == 2 and bool(c) and complex(c) == 2.0
    assert math.exp(c) == math.exp(2.0) and "%.1f" % c == "2.0"
    np.testing.assert_array_equal(np.asarray(tape.tensor([1.0, 2.0])), [1.0, 2.0])
    out = np.zeros(2)
    out[0] = c
    assert out[0] == 2.0
    assert tape.tensor([1.0, 2.0, 3.0])[np.argmax(x * 1.0)] == 2.0  # an index from argmax


def test_comparisons_keep_working():
    x = leaf([0.3, -1.2])
    loss = np.sum(x * x)
    assert type(loss < 10.0) is np.bool_
    steps = 0
    while loss > 0.1 and steps < 5:  # a stopping test on the tensor itself
        with tape.no_grad():
            x -= 0.5 * x
        loss = np.sum(x * x)
        steps += 1
    assert steps == 2 and loss <= 0.1


# ---------------------------------------------------------------------------------------------
# Buffers: tnp.zeros / empty / full / array and np.zeros_like record item assignment


def buffers(x):
    a = tnp.empty(3)
    a[0], a[1], a[2] = x[0] * x[1], np.sin(x[1]), 2.0
    b = np.zeros_like(x)
    b[1] = x[0] ** 3
    c = tnp.full(2, x[1])
    c[0] = 1.0
    d = tnp.array([x[1], x[0] * 2.0])
    e = tnp.array([[x[0], 2.0], [3.0, x[1]]])  # nested lists too
    return np.sum(a * a) + np.sum(b) * x[1] + np.sum(c) + np.sum(d * x) + np.sum(e @ e)


def test_buffers_record_item_assignment_eager():
    g = tape.grad(buffers)(X0)
    np.testing.assert_allclose(g, fd_grad(buffers, X0), rtol=1e-6)


def test_buffer_constructors_refuse_other_dtypes():
    for make in (tnp.zeros, tnp.empty, tnp.ones):
        with pytest.raises(TypeError, match="float64"):
            make(3, dtype=int)
    assert tnp.zeros((2, 3), dtype=float).shape == (2, 3)


def vector_fill(x):
    out = tnp.zeros(3)
    for i in range(2):
        out[i] = np.exp(x[i]) * x[1 - i]
    out[2] = out[0] * out[1]
    return out


def test_buffers_in_forward_mode_and_nested_transforms():
    want_j = np.stack([fd_vjp(vector_fill, [X0], e, [0])[0] for e in np.eye(3)])
    np.testing.assert_allclose(tape.jacfwd(vector_fill)(X0), want_j, rtol=1e-6)
    np.testing.assert_allclose(tape.jacrev(vector_fill)(X0), want_j, rtol=1e-6)
    _, jv = tape.jvp(vector_fill, (X0,), (np.array([1.0, -2.0]),))
    np.testing.assert_allclose(jv, want_j @ [1.0, -2.0], rtol=1e-6)

    def scalar(x):
        return np.sum(vector_fill(x))

    h = tape.hessian(scalar)(X0)
    want_h = np.stack([fd_grad(lambda z, k=k: tape.grad(scalar)(z)[k], X0) for k in range(2)])
    np.testing.assert_allclose(h, want_h, rtol=1e-5, atol=1e-8)


def test_buffers_in_compiled_replay():
    cf = tape.compile(fill_tnp, X0)
    for x in (X0, np.array([1.5, 0.25])):
        v, g = cf.value_and_grad(x)
        assert v == pytest.approx(np.sum(x ** 2))
        np.testing.assert_allclose(g, 2 * x, rtol=1e-12)
    assert cf.stats()["recordings"] == 1


# ---------------------------------------------------------------------------------------------
# Transforms: the refusal is the same inside grad, nested transforms, forward mode and compile


def _message(f, *args):
    with pytest.raises(TypeError) as e:
        f(*args)
    return str(e.value)


def test_refused_inside_nested_transforms_and_forward_mode():
    def f(x):
        return math.exp(x[0]) * x[1]

    eager = _message(lambda: float(leaf(1.0)))
    for transform in (tape.grad, tape.hessian, tape.jacfwd, tape.jacrev,
                      lambda g: tape.grad(lambda x: tape.grad(g)(x)[0])):
        assert _message(transform(f), X0) == eager
    assert _message(tape.jvp, f, (X0,), (np.ones(2),)) == eager
    with fwAD.dual_level():
        d = fwAD.make_dual(X0, np.ones(2))
        assert _message(f, d) == eager


def test_compile_refuses_at_recording_with_the_eager_message():
    eager = _message(lambda: float(leaf(1.0)))
    compiled = _message(tape.compile, lambda x: math.exp(x[0]) * x[1], X0)
    assert compiled.startswith(eager) and "data arguments included" in compiled
    # a data argument is an input too (it replays with new values): the same refusal
    compiled = _message(tape.compile, lambda w, d: np.sum(w) * float(d[0]), X0, X0)
    assert compiled.startswith(eager)
    with pytest.raises(TypeError, match=ARRAY):
        tape.compile(lambda x: np.sum(np.asarray(x)), X0)


def test_compile_value_read_by_item_is_a_guard():
    def f(w, d):
        scale = d[0].item()  # an explicit value read: a guard on d[0]
        return np.sum(w * w) * scale

    cf = tape.compile(f, X0, np.array([2.0, 0.0]))
    for d0 in (2.0, 2.0, 3.0):
        d = np.array([d0, 5.0])
        v, g = cf.value_and_grad(X0, d)
        assert v == pytest.approx(np.sum(X0 ** 2) * d0)
        np.testing.assert_allclose(g, 2 * X0 * d0, rtol=1e-12)
    s = cf.stats()
    assert s["recordings"] == 2 and s["hits"] >= 1  # d[0] changed once: recorded once again


def test_compile_comparison_guard_is_unchanged():
    def f(x):
        s = np.sum(x)
        return s * s if s > 0 else -s

    cf = tape.compile(f, X0)
    for x in (np.array([1.0, 2.0]), np.array([-3.0, 1.0]), np.array([0.5, 0.25])):
        v, g = cf.value_and_grad(x)
        v0, g0 = tape.value_and_grad(f)(x)
        assert v == v0 and np.array_equal(g, g0)
    assert cf.stats()["recordings"] == 2
