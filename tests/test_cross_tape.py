"""Tensors that outlive a backward: later ops go to a new tape and reach them through links."""
import numpy as np
import pytest

import tape
from tape.reverse.backward import BACKWARD_TWICE

X0 = np.array([0.5, -1.0, 2.0])


def test_retain_graph_then_backward_through_a_link():
    x = tape.tensor(X0, requires_grad=True)
    y = x * 2.0
    y.sum().backward(retain_graph=True)
    np.testing.assert_array_equal(x.grad, [2.0, 2.0, 2.0])
    z = (y * 3.0).sum()
    assert z._tape is not y._tape  # the first backward sealed y's tape
    z.backward()
    np.testing.assert_array_equal(x.grad, [8.0, 8.0, 8.0])  # 2 + 3 * 2, accumulated


def test_link_with_nonlinear_ops_on_both_tapes():
    x = tape.tensor(X0, requires_grad=True)
    y = np.sin(x) * x
    (y * y).sum().backward(retain_graph=True)
    g1 = 2 * np.sin(X0) * X0 * (np.cos(X0) * X0 + np.sin(X0))
    np.testing.assert_allclose(x.grad, g1, rtol=1e-13)
    z = np.exp(y).sum() + (x * y).sum()  # x used directly and through the link
    z.backward()
    dy = np.cos(X0) * X0 + np.sin(X0)
    g2 = np.exp(np.sin(X0) * X0) * dy + np.sin(X0) * X0 + X0 * dy
    np.testing.assert_allclose(x.grad, g1 + g2, rtol=1e-13)


def test_chain_of_three_tapes():
    x = tape.tensor(X0, requires_grad=True)
    y = x * x
    y.sum().backward(retain_graph=True)
    u = y * 3.0
    u.sum().backward(retain_graph=True)
    (u * y).sum().backward()  # 3 x^4
    np.testing.assert_allclose(x.grad, 2 * X0 + 6 * X0 + 12 * X0 ** 3, rtol=1e-13)


def test_backward_twice_through_a_link_raises():
    x = tape.tensor(X0, requires_grad=True)
    y = x * 2.0
    y.sum().backward()
    z = (y * 3.0).sum()  # recording still works: only the values behind y are gone
    with pytest.raises(RuntimeError) as e:
        z.backward()
    assert str(e.value) == BACKWARD_TWICE
    assert "retain_graph=True" in str(e.value)
    np.testing.assert_array_equal(x.grad, [2.0, 2.0, 2.0])  # the failed call added nothing


def test_backward_twice_on_the_same_tape_raises():
    x = tape.tensor(X0, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_retained_then_freed():
    x = tape.tensor(X0, requires_grad=True)
    y = np.sin(x)
    y.sum().backward(retain_graph=True)
    (y * 2.0).sum().backward()  # frees what y's tape held
    np.testing.assert_allclose(x.grad, 3 * np.cos(X0), rtol=1e-14)
    with pytest.raises(RuntimeError, match="second time"):
        (y * 5.0).sum().backward()


def test_autograd_grad_with_a_link_to_a_tape_without_inputs():
    x = tape.tensor(X0, requires_grad=True)
    y = x * 5.0
    y.sum().backward(retain_graph=True)
    a = tape.tensor(np.ones(3), requires_grad=True)
    (g,) = tape.autograd.grad((a * y).sum(), a)
    np.testing.assert_allclose(g, 5.0 * X0)


def test_functional_grad_of_a_closure_over_a_recorded_tensor():
    x = tape.tensor(X0, requires_grad=True)
    u = x * 5.0
    g = tape.grad(lambda a: (a * u).sum())(np.ones(3))
    np.testing.assert_allclose(g, 5.0 * X0)
