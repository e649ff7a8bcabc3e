"""Custom Functions (tape.Function) and SavedVariable: behaviour modelled on torch.autograd.Function."""
import gc
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tape
from tape.reverse.backward import BACKWARD_TWICE

from _functions import Cube


class Exp(tape.Function):  # saves its output
    @staticmethod
    def forward(ctx, x):
        y = np.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class MulAdd(tape.Function):
    """(a * b + k * c, a - b): several tensor arguments, a non-tensor one, two outputs."""

    @staticmethod
    def forward(ctx, a, b, c, k):
        ctx.save_for_backward(a, b)
        ctx.k = k
        return a * b + k * c, a - b

    @staticmethod
    def backward(ctx, gu, gv):
        a, b = ctx.saved_tensors
        # gradients of broadcast shape: summed down to each argument's shape
        return gu * b + gv, gu * a - gv, ctx.k * gu if ctx.needs_input_grad[2] else None, None


def leaf(v):
    return tape.tensor(np.asarray(v, dtype=np.float64), requires_grad=True)


def test_single_input_matches_hand_derivative():
    x = leaf([1.0, -2.0, 0.5])
    y = Cube.apply(x * 2.0)
    (y.sum() + (y * y).sum()).backward()  # y used twice: its gradient is complete at the hub
    u = 2.0 * x.detach().numpy()
    np.testing.assert_allclose(x.grad, 2.0 * 3.0 * u ** 2 * (1.0 + 2.0 * u ** 3), rtol=1e-15)


def test_saved_output_and_zero_d():
    x = leaf(0.3)
    y = Exp.apply(x)
    assert y.shape == () and y.requires_grad
    (y * y).backward()
    assert x.grad == pytest.approx(2.0 * np.exp(0.6), rel=1e-15)


def test_several_inputs_and_outputs_against_finite_differences():
    def f(a, b, c):
        u, v = MulAdd.apply(a, b, c, 3.0)
        return (u * np.sin(v)).sum()

    rng = np.random.default_rng(0)
    assert tape.gradcheck(f, rng.random(3), rng.random((2, 3)), 2.0)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([((), ()), ((3,), (3,)), ((2, 3), (3,)), ((1, 3), (2, 1)), ((0, 2), (2,)),
                        ((1,), ())]),
       st.integers(0, 2 ** 16))
def test_broadcasting_function_against_finite_differences(shapes, seed):
    rng = np.random.default_rng(seed)
    a0, b0 = (rng.normal(size=s) for s in shapes)

    def f(a, b):
        u, v = MulAdd.apply(a, b, 1.0, -0.5)
        return (np.cos(u) + v * v).sum()

    assert tape.gradcheck(f, a0, b0)


def test_non_tensor_arguments_and_needs_input_grad():
    seen = []

    class Probe(tape.Function):
        @staticmethod
        def forward(ctx, x, c, k, s):
            seen.append(ctx.needs_input_grad)
            return x * c * k

        @staticmethod
        def backward(ctx, g):
            seen.append(ctx.needs_input_grad)
            return g * 2.0, None, None, None

    x = leaf([1.0, 2.0])
    y = Probe.apply(x, tape.tensor([3.0, 4.0]), 2.0, "label")
    y.sum().backward()
    assert seen == [(True, False, False, False)] * 2
    np.testing.assert_array_equal(x.grad, [2.0, 2.0])


def test_without_grad_nothing_is_recorded():
    x = leaf([1.0, 2.0])
    with tape.no_grad():
        y = Cube.apply(x)
    assert not y.requires_grad
    z = Cube.apply(tape.tensor([1.0, 2.0]))
    assert not z.requires_grad
    np.testing.assert_array_equal(z.detach().numpy(), [1.0, 8.0])


def test_saved_leaf_is_the_leaf_itself_and_intermediates_keep_history():
    got = []

    class Keep(tape.Function):
        @staticmethod
        def forward(ctx, x, h):
            ctx.save_for_backward(x, h, None)
            return x * h

        @staticmethod
        def backward(ctx, g):
            got.append(ctx.saved_tensors)
            x, h, _ = ctx.saved_tensors
            return g * h, g * x

    x = leaf([1.0, 2.0])
    h = x * 3.0
    Keep.apply(x, h).sum().backward()
    sx, sh, none = got[0]
    assert sx is x and none is None
    assert sh.requires_grad and not sh.is_leaf  # the recorded intermediate, as in PyTorch
    np.testing.assert_array_equal(sh.detach().numpy(), [3.0, 6.0])
    np.testing.assert_array_equal(x.grad, 2.0 * 3.0 * np.array([1.0, 2.0]))


def test_unused_outputs_get_zeros_or_none():
    got = []

    class Two(tape.Function):
        @staticmethod
        def forward(ctx, x, materialize):
            ctx.set_materialize_grads(materialize)
            return x * 2.0, x * 3.0

        @staticmethod
        def backward(ctx, g1, g2):
            got.append((g1, g2))
            return 2.0 * g1 + (0.0 if g2 is None else 3.0 * g2), None

    for materialize in (True, False):
        x = leaf([1.0, 2.0])
        a, _ = Two.apply(x, materialize)
        a.sum().backward()
        np.testing.assert_array_equal(x.grad, [2.0, 2.0])
    assert isinstance(got[0][1], tape.Tensor)
    np.testing.assert_array_equal(got[0][1].numpy(), [0.0, 0.0])
    assert got[1][1] is None


def test_mark_non_differentiable():
    class SortWithIndex(tape.Function):
        @staticmethod
        def forward(ctx, x):
            idx = np.argsort(x.numpy()).astype(np.float64)
            ctx.idx = idx.astype(int)
            s = tape.tensor(np.sort(x.numpy()))
            i = tape.tensor(idx)
            ctx.mark_non_differentiable(i)
            return s, i

        @staticmethod
        def backward(ctx, gs, gi):
            np.testing.assert_array_equal(gi.numpy(), np.zeros(3))
            g = np.zeros(3)
            g[ctx.idx] = gs.numpy()
            return g

    x = leaf([3.0, 1.0, 2.0])
    s, i = SortWithIndex.apply(x)
    assert s.requires_grad and not i.requires_grad
    (s * np.array([1.0, 10.0, 100.0])).sum().backward()
    np.testing.assert_array_equal(x.grad, [100.0, 1.0, 10.0])


def test_hooks_on_outputs_and_cross_tape_arguments():
    x = leaf([1.0, 2.0])
    h = x * 2.0
    h.sum().backward(retain_graph=True)  # seals h's tape: the Function call goes to a new one
    x.grad = None
    y = Cube.apply(h)
    seen = []
    y.register_hook(lambda g: seen.append(g.copy()) or g * 10.0)
    y.sum().backward()
    np.testing.assert_array_equal(seen[0], [1.0, 1.0])
    np.testing.assert_allclose(x.grad, 10.0 * 3.0 * (2.0 * np.array([1.0, 2.0])) ** 2 * 2.0)


def test_in_a_python_loop_of_scalars():
    x = leaf(0.5)
    y = x
    for _ in range(200):
        y = Exp.apply(y * 0.01)
    y.backward()
    # reference: the same chain with tape's own exp
    x2 = leaf(0.5)
    y2 = x2
    for _ in range(200):
        y2 = np.exp(y2 * 0.01)
    y2.backward()
    assert x.grad == pytest.approx(x2.grad, rel=1e-14)


# -- errors -----------------------------------------------------------------------------------

class WrongCount(tape.Function):
    @staticmethod
    def forward(ctx, x, y):
        return x * y

    @staticmethod
    def backward(ctx, g):
        return g


class WrongShape(tape.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return np.ones(5)


class GradForNonTensor(tape.Function):
    @staticmethod
    def forward(ctx, x, k):
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * 2.0, 1.0


def test_wrong_number_of_gradients():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"WrongCount.backward returned 1 gradient, expected 2"):
        WrongCount.apply(x, x).sum().backward()


def test_wrong_gradient_shape():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"shape \(5,\) for argument 0, which has shape \(2,\)"):
        WrongShape.apply(x).sum().backward()


def test_gradient_for_a_non_tensor_argument():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="argument 1, which is not a tensor"):
        GradForNonTensor.apply(x, 2.0).sum().backward()


def test_save_for_backward_takes_tensors():
    class SavesFloat(tape.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(2.0)
            return x

    with pytest.raises(TypeError, match="ctx.k = k"):
        SavesFloat.apply(leaf([1.0]))


def test_missing_backward():
    class NoBackward(tape.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

    with pytest.raises(NotImplementedError, match="backward"):
        NoBackward.apply(leaf([1.0])).sum().backward()


def test_saved_leaf_modified_in_place_names_the_function():
    x = leaf([1.0, 2.0])
    y = Cube.apply(x)
    with tape.no_grad():
        x -= 0.1 * np.ones(2)
    with pytest.raises(RuntimeError, match=r"leaf tensor of shape \(2,\) saved by "
                                           r"Cube.forward \(save_for_backward\) is at version 1; "
                                           r"expected version 0"):
        y.sum().backward()


def test_backward_twice_and_retain_graph():
    ctxs = []

    class Spy(Cube):
        @staticmethod
        def backward(ctx, g):
            ctxs.append(ctx)
            return Cube.backward(ctx, g)

    x = leaf([1.0, 2.0])
    y = Spy.apply(x * 1.0).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_array_equal(x.grad, 2.0 * 3.0 * np.array([1.0, 4.0]))
    with pytest.raises(RuntimeError) as e:
        y.backward()
    assert str(e.value) == BACKWARD_TWICE
    with pytest.raises(RuntimeError) as e:
        ctxs[-1].saved_tensors  # freed with the rows that saved it
    assert str(e.value) == BACKWARD_TWICE


# -- SavedVariable ----------------------------------------------------------------------------

def test_saved_tensors_hooks_pack_function_saves():
    packed = []

    def pack(a):
        packed.append(a.shape)
        return a.copy()

    x = leaf([0.1, 0.2, 0.3])
    with tape.graph.saved_tensors_hooks(pack, lambda p: p):
        y = Exp.apply(x * 2.0)
    assert (3,) in packed
    y.sum().backward()
    np.testing.assert_allclose(x.grad, 2.0 * np.exp(2.0 * np.array([0.1, 0.2, 0.3])), rtol=1e-15)


def test_saved_output_holds_no_reference_cycle():
    """With gc disabled, dropping the tensors frees the tape: a Function's saved output refers
    to the tape weakly, so nothing but reference counting is needed."""
    gc.collect()
    gc.disable()
    try:
        x = leaf(np.linspace(0.0, 1.0, 5))
        y = Exp.apply(x * 2.0)
        t = weakref.ref(y._tape)
        z = (y * y).sum()
        y._tape.seal()  # the thread's current tape is referenced by the recording state
        del y, z
        assert t() is None
        y = Exp.apply(x * 2.0)  # and after a backward
        t = weakref.ref(y._tape)
        y.sum().backward()
        del y
        assert t() is None
    finally:
        gc.enable()


def test_savedvariable_version_and_release():
    x = leaf([1.0, 2.0])
    s = tape.SavedVariable(x, "test op")
    assert s.unpack() is x and s.shape == (2,)
    with tape.no_grad():
        x *= 2.0
    with pytest.raises(RuntimeError, match="saved by test op is at version 1; expected version 0"):
        s.unpack()
    s2 = tape.SavedVariable(np.ones(3), "test op")
    np.testing.assert_array_equal(s2.unpack().numpy(), np.ones(3))
    s2.release()
    with pytest.raises(RuntimeError, match="second time"):
        s2.unpack()
