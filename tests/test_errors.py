"""Every user-facing error names the problem and the fix; the autograd contracts around them."""
from __future__ import annotations

import numpy as np
import pytest

import tape


def leaf(x):
    return tape.tensor(np.asarray(x, dtype=np.float64), requires_grad=True)


# ---------------------------------------------------------------------------------------------
# Shapes and dtypes


def test_elementwise_shape_mismatch_names_the_shapes():
    x = leaf(np.ones(3))
    with pytest.raises(ValueError, match=r"\(3,\).*\(4,\)"):
        x + np.ones(4)
    with pytest.raises(ValueError, match=r"\(2,3\)|\(2, 3\)"):
        np.maximum(leaf(np.ones((2, 3))), np.ones((3, 2)))


def test_elementwise_shape_mismatch_names_the_op():
    with pytest.raises(ValueError, match=r"add.*\(3,\).*\(4,\)|\(3,\).*\(4,\).*add"):
        leaf(np.ones(3)) + np.ones(4)


def test_where_shape_mismatch_names_op_and_shapes():
    with pytest.raises(ValueError, match=r"where.*\(2,\).*\(3,\)"):
        np.where(np.ones(2, bool), leaf(np.ones(3)), 1.0)


def test_matmul_shape_mismatch_names_op_and_shapes():
    with pytest.raises(ValueError, match=r"matmul.*\(2, 3\).*\(4, 2\)"):
        leaf(np.ones((2, 3))) @ np.ones((4, 2))
    with pytest.raises(ValueError, match="matmul"):
        leaf(np.ones(3)) @ 2.0


def test_other_shape_mismatches():
    with pytest.raises(ValueError, match=r"\(3,\)"):  # item assignment
        y = leaf(np.ones(3)) * 1.0
        y[:] = np.ones(2)
    with pytest.raises(ValueError, match="tensordot"):
        np.tensordot(leaf(np.ones((2, 3))), np.ones((2, 3)), axes=([1], [0]))
    with pytest.raises(ValueError):
        np.reshape(leaf(np.ones(6)), (4, 2))
    with pytest.raises(np.linalg.LinAlgError, match=r"square.*\(2, 3\)"):
        np.linalg.inv(leaf(np.ones((2, 3))))


@pytest.mark.parametrize("data", [np.array([1.0 + 2.0j]), np.array([1.0, "a"], dtype=object),
                                  1j], ids=["complex", "object", "python-complex"])
def test_complex_and_object_dtypes_are_refused(data):
    with pytest.raises(TypeError, match="complex|object"):
        tape.tensor(data)


def test_complex_operand_is_refused():
    x = leaf(np.ones(2))
    with pytest.raises(TypeError, match="complex"):
        x * np.array([1j, 2j])
    with pytest.raises(TypeError, match="complex"):
        x * 1j


@pytest.mark.parametrize("data", [np.arange(3), np.array([True, False]),
                                  np.arange(3, dtype=np.uint8)], ids=["int", "bool", "uint8"])
def test_requires_grad_on_integer_or_bool_data(data):
    with pytest.raises(TypeError, match=r"floating point.*astype\(float\)"):
        tape.tensor(data, requires_grad=True)
    # without grad, integer data is fine (converted to float64)
    assert tape.tensor(data).dtype == np.float64


def test_integer_tensor_astype_is_refused():
    with pytest.raises(TypeError, match="float64"):
        leaf([1.0]).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# backward


def test_backward_of_non_scalar_needs_a_seed():
    x = leaf(np.ones(3))
    y = x * 2.0
    with pytest.raises(RuntimeError, match=r"scalar.*shape \(3,\)"):
        y.backward()
    y.backward(np.arange(3.0))
    np.testing.assert_array_equal(x.grad, [0.0, 2.0, 4.0])


def test_seed_of_the_wrong_shape():
    x = leaf(np.ones(3))
    with pytest.raises(RuntimeError, match=r"shape \(2,\).*shape \(3,\)"):
        (x * 2.0).backward(np.ones(2))


def test_backward_twice_says_retain_graph():
    x = leaf([1.0, 2.0])
    y = np.sum(np.sin(x) * x)
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        tape.autograd.grad(y, [x])


def test_retain_graph_allows_a_second_backward():
    x = leaf([1.0, 2.0])
    y = np.sum(np.sin(x) * x)
    y.backward(retain_graph=True)
    g1 = x.grad.copy()
    y.backward(retain_graph=True)
    np.testing.assert_allclose(x.grad, 2 * g1, rtol=1e-15)
    (g,) = tape.autograd.grad(y, [x])  # last use, frees the graph
    np.testing.assert_allclose(g, g1, rtol=1e-15)
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


def test_backward_twice_through_a_shared_part():
    x = leaf(2.0)
    h = np.exp(x * 1.0)
    (h * 3.0).backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        (h * 5.0).backward()


def test_backward_of_a_tensor_without_history():
    with pytest.raises(RuntimeError, match="does not require grad"):
        tape.tensor(np.ones(2)).sum().backward()
    with tape.no_grad():
        y = leaf(1.0) * 2.0
    with pytest.raises(RuntimeError, match="no_grad"):
        y.backward()


def test_grad_accumulates_across_backward_calls():
    x = leaf([1.0, -2.0])
    np.sum(x * x).backward()
    np.sum(3.0 * x).backward()
    np.testing.assert_array_equal(x.grad, [2.0 + 3.0, -4.0 + 3.0])
    x.grad = None
    np.sum(x).backward()
    np.testing.assert_array_equal(x.grad, [1.0, 1.0])


def test_grad_does_not_touch_dot_grad():
    x = leaf([1.0, 2.0])
    (g,) = tape.autograd.grad(np.sum(x * x), [x])
    np.testing.assert_array_equal(g, [2.0, 4.0])
    assert x.grad is None


# ---------------------------------------------------------------------------------------------
# autograd.grad inputs


def test_allow_unused():
    x, z = leaf([1.0, 2.0]), leaf(3.0)
    y = np.sum(x * 2.0)
    with pytest.raises(RuntimeError, match=r"inputs\[1\].*allow_unused=True"):
        tape.autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = tape.autograd.grad(y, [x, z], allow_unused=True)
    np.testing.assert_array_equal(gx, [2.0, 2.0])
    assert gz is None


def test_grad_with_respect_to_a_non_leaf():
    x = leaf([1.0, 2.0])
    h = x * 3.0
    y = np.sum(h * h)
    gh, gx = tape.autograd.grad(y, [h, x])
    np.testing.assert_allclose(gh, 2.0 * 3.0 * np.array([1.0, 2.0]), rtol=1e-15)
    np.testing.assert_allclose(gx, 18.0 * np.array([1.0, 2.0]), rtol=1e-15)


def test_grad_with_respect_to_a_non_leaf_across_tapes():
    x = leaf(1.5)
    h = np.sin(x * 1.0)
    h.backward(retain_graph=True)  # seals the first tape: y is recorded on a new one
    y = h * h
    (gh,) = tape.autograd.grad(y, [h])
    assert gh == pytest.approx(2.0 * np.sin(1.5), rel=1e-15)


def test_grad_with_respect_to_a_tensor_that_needs_no_grad():
    with pytest.raises(RuntimeError, match=r"inputs\[0\] does not require grad"):
        tape.autograd.grad(leaf(1.0) * 2.0, [tape.tensor(1.0)])


def test_grad_outputs_count_must_match():
    x = leaf([1.0, 2.0])
    with pytest.raises(ValueError, match="2 gradients for 1 outputs"):
        tape.autograd.grad([x * 2.0], [x], grad_outputs=[np.ones(2), np.ones(2)])


# ---------------------------------------------------------------------------------------------
# Unsupported functions and conversions


def test_unsupported_numpy_function_names_it():
    x = leaf([1.0, 2.0])
    with pytest.raises(TypeError, match="numpy.roots.*not supported.*tape.Function"):
        np.roots(x)
    with pytest.raises(TypeError, match="fft"):
        np.fft.fft(x)
    with pytest.raises(TypeError, match="numpy.gcd"):
        np.gcd(x, x)
    with pytest.raises(TypeError, match="numpy.add.outer"):
        np.add.outer(x, x)


def test_asarray_on_a_tensor_that_requires_grad():
    x = leaf([1.0, 2.0])
    for conv in (np.asarray, np.array, lambda t: np.asarray(t, dtype=float)):
        with pytest.raises(TypeError, match=r"detach\(\)\.numpy\(\)"):
            conv(x)
    with pytest.raises(TypeError, match="detach"):
        np.asarray(x * 2.0)
    np.testing.assert_array_equal(np.asarray(x.detach()), [1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(tape.tensor([1.0, 2.0])), [1.0, 2.0])
    assert x[0].item() == 1.0 and x.tolist() == [1.0, 2.0]  # explicit reads (tests/test_conversions.py)


def test_numpy_view_of_a_tensor_is_read_only():
    x = leaf([1.0, 2.0])
    with pytest.raises(ValueError):
        x.numpy()[0] = 5.0


def test_out_into_a_numpy_array_would_drop_the_gradient():
    x = leaf([1.0, 2.0])
    with pytest.raises(TypeError, match="out="):
        np.exp(x, out=np.empty(2))


# ---------------------------------------------------------------------------------------------
# In place on leaves, versions


@pytest.mark.parametrize("op", ["+=", "*=", "setitem", "out="])
def test_in_place_on_a_leaf_that_requires_grad(op):
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad.*in-place"):
        if op == "+=":
            x += 1.0
        elif op == "*=":
            x *= 2.0
        elif op == "setitem":
            x[0] = 3.0
        else:
            np.add(x, 1.0, out=x)
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    with tape.no_grad():  # an optimiser step
        if op == "+=":
            x += 1.0
        elif op == "*=":
            x *= 2.0
        elif op == "setitem":
            x[0] = 3.0
        else:
            np.add(x, 1.0, out=x)
    assert x.requires_grad and x.is_leaf
    assert not np.array_equal(x.numpy(), [1.0, 2.0])


def test_in_place_on_a_non_leaf_is_functionalized():
    x = leaf([1.0, 2.0])
    y = x * 1.0
    z = y * y  # saves y
    y += x
    y[0] = 10.0
    (g,) = tape.autograd.grad(np.sum(z) + np.sum(y), [x])
    np.testing.assert_array_equal(g, [2.0 * 1.0 + 0.0, 2.0 * 2.0 + 2.0])


def test_modified_leaf_after_recording_names_op_shape_and_versions():
    x = leaf(np.ones((2, 3)))
    y = np.sum(x * x)
    with tape.no_grad():
        x -= 0.1
    with pytest.raises(RuntimeError, match=r"in-place.*\(2, 3\).*'multiply'.*version 1.*"
                                           r"expected version 0"):
        y.backward()


def test_modified_leaf_is_harmless_when_its_value_is_not_needed():
    x = leaf(np.ones(3))
    y = np.sum(x + 1.0)
    with tape.no_grad():
        x *= 5.0
    y.backward()
    np.testing.assert_array_equal(x.grad, np.ones(3))


def test_optimiser_loop_records_again_after_each_step():
    x = leaf([1.0, 2.0])
    for _ in range(3):
        loss = np.sum(x * x)
        loss.backward()
        with tape.no_grad():
            x -= 0.25 * x.grad
        x.grad = None
    np.testing.assert_allclose(x.numpy(), [0.125, 0.25], rtol=1e-15)


def test_requires_grad_only_changes_on_leaves():
    x = leaf(1.0)
    with pytest.raises(RuntimeError, match="leaf"):
        (x * 2.0).requires_grad = False


# ---------------------------------------------------------------------------------------------
# no_grad / enable_grad


def test_no_grad_and_enable_grad():
    x = leaf([1.0, 2.0])
    assert tape.is_grad_enabled()
    with tape.no_grad():
        assert not tape.is_grad_enabled()
        y = x * 2.0
        assert not y.requires_grad
        with tape.enable_grad():
            assert tape.is_grad_enabled()
            z = x * 2.0
        assert not tape.is_grad_enabled()
    assert tape.is_grad_enabled()
    assert z.requires_grad
    np.testing.assert_array_equal(y.numpy(), [2.0, 4.0])
    (g,) = tape.autograd.grad(np.sum(z), [x])
    np.testing.assert_array_equal(g, [2.0, 2.0])


def test_no_grad_as_decorator_and_restored_on_error():
    @tape.no_grad()
    def f(t):
        return t * 3.0

    assert not f(leaf(1.0)).requires_grad
    with pytest.raises(KeyError):
        with tape.no_grad():
            raise KeyError
    assert tape.is_grad_enabled()


def test_grad_with_a_repeated_input_gives_it_in_every_position():
    w = tape.tensor(np.array([1.0, 2.0]), requires_grad=True)
    h = w * 3.0
    gw1, gw2 = tape.autograd.grad((w * w).sum(), [w, w])
    np.testing.assert_array_equal(gw1, [2.0, 4.0])
    np.testing.assert_array_equal(gw2, [2.0, 4.0])
    gh1, gh2 = tape.autograd.grad((h * h).sum(), [h, h])
    np.testing.assert_array_equal(gh1, [6.0, 12.0])
    np.testing.assert_array_equal(gh2, [6.0, 12.0])


@pytest.mark.parametrize("returned, what", [((1.0, 2.0), "a tuple"), (None, "None"),
                                            ([1.0], "a list")])
def test_a_function_that_returns_no_output_is_named(returned, what):
    def f(x):
        np.sum(x * x)
        return returned

    hint = " \\(for a pair \\(output, aux\\), pass has_aux=True\\)" if what == "a tuple" else ""
    for transform in (lambda g: tape.grad(g), lambda g: (lambda x: tape.grad(tape.grad(g))(x))):
        with pytest.raises(TypeError, match=f"grad: f returned {what}; it must return one scalar "
                                            f"tensor or float{hint}"):
            transform(f)(np.ones(2))


def test_has_aux_needs_a_pair_nested_too():
    def f(x):
        return np.sum(x * x), x, x

    for transform in (lambda g: tape.grad(g, has_aux=True),
                      lambda g: (lambda x: tape.grad(lambda y: tape.grad(g, has_aux=True)(y)[0]
                                                     .sum())(x))):
        with pytest.raises(TypeError, match="has_aux=True requires f to return a pair"):
            transform(f)(np.ones(2))


def test_scipy_ufuncs_are_named_as_scipy_special():
    special = pytest.importorskip("scipy.special")
    with pytest.raises(TypeError, match=r"scipy\.special\.jv is not supported"):
        special.jv(1.0, leaf([1.0, 2.0]))


def test_tape_distributed_loads_on_first_use():
    import subprocess
    import sys

    code = "import tape; print(tape.distributed.map_value_and_grad.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "map_value_and_grad"


def test_unsupported_function_on_a_compiled_data_argument_says_what_to_do():
    def f(x, data):
        return np.sum(x * np.roots(data))

    with pytest.raises(TypeError, match="numpy.roots is not supported.*compute it outside f"):
        tape.compile(f, np.ones(2), np.ones(3), argnums=0)
    with pytest.raises(TypeError, match="numpy.roots is not supported") as e:
        np.roots(leaf([1.0, 2.0]))
    assert "tape.compile" not in str(e.value)  # (eager: no word about compile)
