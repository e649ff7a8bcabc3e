"""BackwardState: callbacks bound after the forward, called with the incoming gradient."""
import numpy as np
import pytest

import tape

X0 = np.array([0.5, -2.0, 3.0])


def test_member_bound_after_the_forward_is_called_with_the_gradient():
    state = tape.BackwardState()
    x = tape.tensor(X0, requires_grad=True)
    h = state.hook(x * 2.0, "log")
    np.testing.assert_array_equal(h.detach().numpy(), 2.0 * X0)  # identity in the forward
    loss = (h * h).sum()
    seen = []
    state.log = lambda g: seen.append(g.copy())  # bound only now
    loss.backward()
    np.testing.assert_array_equal(seen[0], 4.0 * X0)
    np.testing.assert_array_equal(x.grad, 8.0 * X0)


def test_member_may_replace_the_gradient():
    state = tape.BackwardState()
    x = tape.tensor(X0, requires_grad=True)
    loss = (state.hook(x * 2.0, "clip") ** 2).sum()
    state.clip = lambda g: np.clip(g, -1.0, 1.0)
    loss.backward()
    np.testing.assert_array_equal(x.grad, 2.0 * np.clip(4.0 * X0, -1.0, 1.0))


def test_members_can_be_rebound_between_backward_calls():
    state = tape.BackwardState()
    x = tape.tensor(X0, requires_grad=True)
    loss = state.hook(x * 1.0, "scale").sum()
    state.scale = lambda g: g * 2.0
    loss.backward(retain_graph=True)
    state.scale = lambda g: g * 3.0
    loss.backward()
    np.testing.assert_array_equal(x.grad, [5.0, 5.0, 5.0])


def test_missing_member_names_it_and_the_op():
    state = tape.BackwardState()
    x = tape.tensor(X0, requires_grad=True)
    loss = state.hook(x * 1.0, "allreduce").sum()
    with pytest.raises(RuntimeError, match=r"'allreduce' is not set.*test_backward_state\.py:\d+"):
        loss.backward()


def test_non_callable_member_is_an_error():
    state = tape.BackwardState()
    x = tape.tensor(X0, requires_grad=True)
    loss = state.hook(x * 1.0, "scale").sum()
    state.scale = 0.5
    with pytest.raises(RuntimeError, match="not a callable"):
        loss.backward()


def test_hook_on_a_tensor_without_grad_is_the_identity():
    state = tape.BackwardState()
    c = tape.tensor(X0)
    assert state.hook(c, "anything") is c
