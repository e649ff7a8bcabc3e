"""Tensor hooks, post-accumulate-grad hooks and retain_grad (behaviour modelled on PyTorch's)."""
import gc
import weakref

import numpy as np
import pytest

import tape

X0 = np.array([1.0, -2.0, 3.0])


def leaf(v=X0):
    return tape.tensor(np.array(v, dtype=float), requires_grad=True)


def test_hooks_run_in_registration_order_and_may_replace_the_gradient():
    x = leaf()
    y = x * 2.0
    calls = []
    y.register_hook(lambda g: calls.append(("first", g.copy())))
    y.register_hook(lambda g: g * 10.0)
    y.register_hook(lambda g: calls.append(("third", g.copy())))
    (y * y).sum().backward()
    assert [c[0] for c in calls] == ["first", "third"]
    np.testing.assert_array_equal(calls[0][1], 4.0 * X0)  # dL/dy = 2y = 4x
    np.testing.assert_array_equal(calls[1][1], 40.0 * X0)  # after the replacing hook
    np.testing.assert_array_equal(x.grad, 80.0 * X0)  # the replacement flows on


def test_removed_hook_does_not_run():
    x = leaf()
    y = x * 3.0
    calls = []
    h = y.register_hook(lambda g: calls.append(1))
    h.remove()
    h.remove()  # removing twice is harmless
    y.sum().backward()
    assert calls == []
    np.testing.assert_array_equal(x.grad, [3.0, 3.0, 3.0])


def test_retain_grad_keeps_the_non_leaf_gradient_after_hooks():
    x = leaf()
    y = x * 2.0
    z = np.sin(y)
    assert y.grad is None and not y.retains_grad
    y.retain_grad()
    y.register_hook(lambda g: g + 1.0)
    assert y.retains_grad
    z.sum().backward()
    np.testing.assert_allclose(y.grad, np.cos(2.0 * X0) + 1.0, rtol=1e-15)
    np.testing.assert_allclose(x.grad, 2.0 * (np.cos(2.0 * X0) + 1.0), rtol=1e-15)
    assert z.grad is None  # not retained


def test_retained_grad_accumulates_over_backward_calls():
    x = leaf()
    y = x * 2.0
    y.retain_grad()
    s = (y * y).sum()
    s.backward(retain_graph=True)
    s.backward()
    np.testing.assert_array_equal(y.grad, 2 * 2.0 * (2.0 * X0))


def test_hook_on_a_scalar_and_on_the_root():
    x = tape.tensor(1.5, requires_grad=True)
    y = x * x
    seen = []
    y.register_hook(lambda g: seen.append(float(g)) or g * 0.5)
    loss = y * 3.0
    loss.register_hook(lambda g: g * 2.0)
    loss.backward()
    assert seen == [6.0]  # seed 1, doubled at the root, times 3
    assert x.grad == pytest.approx(3.0 * 2.0 * 1.5)


def test_hook_at_an_escape_row_sees_the_complete_gradient():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(40, 40))
    x = leaf(rng.normal(size=40))
    h = A @ (x * 1.0)  # a BLAS-sized matmul: an escape row
    seen = []
    h.register_hook(lambda g: seen.append(g.copy()))
    loss = (h * h).sum() + h.sum()
    loss.backward()
    np.testing.assert_allclose(seen[0], 2.0 * h.detach().numpy() + 1.0, rtol=1e-14)
    np.testing.assert_allclose(x.grad, A.T @ seen[0], rtol=1e-12)


def test_leaf_hooks_see_the_total_gradient_once_even_across_tapes():
    x = leaf()
    y = x * 2.0
    y.sum().backward(retain_graph=True)  # seals y's tape: later ops go to a new tape
    x.grad = None
    seen = []
    x.register_hook(lambda g: seen.append(g.copy()) or g * 0.0 + 1.0)
    loss = (y * 3.0).sum() + (x * 5.0).sum()  # x reached through two tapes
    loss.backward()
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], [11.0, 11.0, 11.0])
    np.testing.assert_array_equal(x.grad, [1.0, 1.0, 1.0])


def test_post_accumulate_grad_hook_runs_after_grad_is_updated():
    x = leaf()
    seen = []
    h = x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.copy()))
    (x * x).sum().backward()
    (x * 1.0).sum().backward()
    np.testing.assert_array_equal(seen[0], 2.0 * X0)
    np.testing.assert_array_equal(seen[1], 2.0 * X0 + 1.0)
    h.remove()
    (x * 1.0).sum().backward()
    assert len(seen) == 2


def test_hooks_also_run_for_autograd_grad_but_grad_stays_untouched():
    x = leaf()
    y = x * 2.0
    y.register_hook(lambda g: g * 0.5)
    y.retain_grad()
    (g,) = tape.autograd.grad((y * y).sum(), [x])
    np.testing.assert_array_equal(g, 4.0 * X0)  # 2 * (2y * 0.5)
    assert y.grad is None and x.grad is None


def test_hook_errors_are_clear():
    x = leaf()
    y = x * 2.0
    y.register_hook(lambda g: np.ones(5))
    with pytest.raises(RuntimeError, match=r"shape \(5,\).*expected \(3,\)"):
        y.sum().backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        tape.tensor(X0).register_hook(lambda g: g)
    with pytest.raises(RuntimeError, match="leaf"):
        (x * 2.0).register_post_accumulate_grad_hook(lambda t: None)


def test_handles_work_as_context_managers():
    x = leaf()
    y = x * 2.0
    calls = []
    with y.register_hook(lambda g: calls.append(1)):
        pass
    y.sum().backward()
    assert calls == []


def test_hooks_do_not_leak_tapes():
    x = leaf()
    refs = []
    for _ in range(200):
        y = x * 2.0
        y.register_hook(lambda g: g)
        y.retain_grad()
        loss = (y * y).sum()
        refs.append(weakref.ref(loss._tape))
        loss.backward()
    del y, loss
    gc.collect()
    assert sum(r() is not None for r in refs) == 0


def test_multi_grad_hook_fires_once_after_all_gradients():
    x = leaf()
    y = x * 2.0
    z = x * 5.0
    unused = x * 7.0
    calls = []
    order = []
    y.register_hook(lambda g: order.append("y"))
    h = tape.graph.register_multi_grad_hook(
        [x, y, z, unused], lambda gs: (calls.append(gs), order.append("multi")))
    ((y * y).sum() + z.sum()).backward()
    assert len(calls) == 1 and order[-1] == "multi"
    gx, gy, gz, gu = calls[0]
    np.testing.assert_array_equal(gy, 4.0 * X0)
    np.testing.assert_array_equal(gz, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(gx, 8.0 * X0 + 5.0)
    assert gu is None
    h.remove()
    ((x * 3.0).sum()).backward()
    assert len(calls) == 1


def test_multi_grad_hook_errors():
    with pytest.raises(RuntimeError, match="does not require grad"):
        tape.graph.register_multi_grad_hook([tape.tensor(X0)], lambda gs: None)
    with pytest.raises(ValueError, match="mode"):
        tape.graph.register_multi_grad_hook([leaf()], lambda gs: None, mode="first")


def test_multi_grad_hook_any_fires_once_with_the_first_gradient():
    x = leaf()
    y = x * 2.0
    z = x * 5.0  # recorded after y: the reverse sweep reaches z's gradient first
    calls = []
    h = tape.graph.register_multi_grad_hook([y, z], calls.append, mode="any")
    ((y * y).sum() + z.sum()).backward()
    assert len(calls) == 1
    np.testing.assert_array_equal(calls[0], [1.0, 1.0, 1.0])  # z's
    y2 = x * 2.0
    h2 = tape.graph.register_multi_grad_hook([y2, x], calls.append, mode="any")
    (y2 * y2).sum().backward()  # fires again in a new backward: y2's gradient comes first
    assert len(calls) == 2
    np.testing.assert_array_equal(calls[1], 4.0 * X0)
    h.remove()
    h2.remove()
    (x * 3.0).sum().backward()
    assert len(calls) == 2


def test_multi_grad_hook_fires_again_after_a_failed_backward():
    state = tape.BackwardState()
    x = leaf()
    b = state.hook(x * 1.0, "y") * 2.0
    calls = []
    tape.graph.register_multi_grad_hook([b], calls.append)
    loss = (b * 3.0).sum()
    with pytest.raises(RuntimeError, match="member 'y' is not set"):
        loss.backward()  # b's gradient was collected, then state.y is missing
    state.y = lambda g: None
    loss.backward()
    assert len(calls) == 1
    np.testing.assert_array_equal(calls[0][0], [3.0, 3.0, 3.0])
