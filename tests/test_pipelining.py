"""Split backward (tape.pipelining): B + W equals one full backward, bit for bit where the
floating-point order is the same, and does the same work."""
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tape
import tape.reverse.split
from tape import pipelining as pp
from tape.reverse.backward import BACKWARD_TWICE

rng = np.random.default_rng(0)


def leaves(*arrays):
    return [tape.tensor(a, requires_grad=True) for a in arrays]


def split_and_full(stage, x0, w0s, dout=None, input_grad=True):
    """Run `stage` twice: B then W, and a plain backward. Returns both results and the groups."""
    x = tape.tensor(x0, requires_grad=input_grad)
    ws = leaves(*w0s)
    out = stage(x, *ws)
    dinputs, groups = pp.stage_backward_input(out, dout, [x], ws)
    held_between = groups.held_bytes
    pp.stage_backward_weight(ws, groups)
    split = ([w.grad for w in ws], dinputs[0], x.grad if input_grad else None)

    x2 = tape.tensor(x0, requires_grad=input_grad)
    ws2 = leaves(*w0s)
    out2 = stage(x2, *ws2)
    roots = out2 if isinstance(out2, (tuple, list)) else [out2]
    grads = dout if isinstance(dout, (tuple, list)) else [dout]
    tape.autograd.backward(list(roots), list(grads) if dout is not None else None)
    full = ([w.grad for w in ws2], x2.grad if input_grad else None)
    return split, full, groups, held_between


def assert_same(split, full):
    (gw, dI, xgrad), (gw2, xgrad2) = split, full
    for a, b in zip(gw, gw2):
        np.testing.assert_array_equal(a, b)
    if xgrad2 is None:
        assert dI is None
    else:
        np.testing.assert_array_equal(dI, xgrad2)
        np.testing.assert_array_equal(xgrad, xgrad2)


def mlp_stage(x, W1, b1, W2):
    h = np.tanh(x @ W1 + b1)
    return h @ W2


X0 = rng.normal(size=(5, 8))
W10, B10, W20 = rng.normal(size=(8, 16)), rng.normal(size=16), rng.normal(size=(16, 4))
DOUT = rng.normal(size=(5, 4))


def test_mlp_stage_equals_full_backward_exactly():
    split, full, groups, _ = split_and_full(mlp_stage, X0, [W10, B10, W20], DOUT)
    assert_same(split, full)


def test_work_adds_up_and_b_skips_weight_gradients():
    _, _, groups, _ = split_and_full(mlp_stage, X0, [W10, B10, W20], DOUT)
    w = groups.work
    assert w["input"][0] + w["weight"][0] == w["full"][0]  # (row, operand) products
    assert w["input"][1] + w["weight"][1] == w["full"][1]  # weighted by row size
    assert w["input"][0] > 0 and w["weight"][0] > 0


def test_b_computes_dx_only_at_a_blas_matmul(monkeypatch):
    """At a BLAS-sized matmul on the input path, B asks for dX only and W for dW only."""
    calls = []
    from tape.escapes import ESCAPES

    p = ESCAPES["matmul_blas"]
    orig = p.vjp

    def spy(xp, g, y, a, b, need_a, need_b, **kw):
        calls.append((need_a, need_b))
        return orig(xp, g, y, a, b, need_a, need_b, **kw)

    object.__setattr__(p, "vjp", spy)
    try:
        x0, w0 = rng.normal(size=(40, 30)), rng.normal(size=(30, 20))
        x = tape.tensor(x0, requires_grad=True)
        (W,) = leaves(w0)
        out = np.sin(x @ W).sum()
        _, groups = pp.stage_backward_input(out, None, [x], [W])
        assert calls == [(True, False)]
        pp.stage_backward_weight([W], groups)
        assert calls == [(True, False), (False, True)]
    finally:
        object.__setattr__(p, "vjp", orig)


def test_weight_used_twice_and_output_with_several_consumers():
    def stage(x, W, c):
        h = x @ W  # h has three consumers
        return np.tanh(h) @ W.T * c + h * h @ W.T + np.sum(h, axis=1, keepdims=True)

    W0 = rng.normal(size=(8, 8))
    split, full, _, _ = split_and_full(stage, rng.normal(size=(3, 8)), [W0, rng.normal(size=8)],
                                       rng.normal(size=(3, 8)))
    assert_same(split, full)


def test_nested_outputs_with_non_tensors_and_no_grad_outputs():
    def stage(x, W):
        h = x @ W
        return {"a": (np.tanh(h), "label"), "b": [h * 2.0, tape.tensor(np.ones(2))], "n": 3}

    x0, W0 = rng.normal(size=(2, 3)), rng.normal(size=(3, 2))
    g = {"a": (np.ones((2, 2)), None), "b": [rng.normal(size=(2, 2)), None]}
    x = tape.tensor(x0, requires_grad=True)
    (W,) = leaves(W0)
    dI, groups = pp.stage_backward_input(stage(x, W), g, [x], [W])
    pp.stage_backward_weight([W], groups)
    x2 = tape.tensor(x0, requires_grad=True)
    (W2,) = leaves(W0)
    o = stage(x2, W2)
    tape.autograd.backward([o["a"][0], o["b"][0]], [g["a"][0], g["b"][0]])
    np.testing.assert_array_equal(dI[0], x2.grad)
    np.testing.assert_array_equal(W.grad, W2.grad)


def test_weight_free_stage():
    split, full, groups, held = split_and_full(lambda x: np.sin(x) * x, X0, [], DOUT[:, :1] * X0)
    assert_same(split, full)
    assert held == 0 and groups.work["weight"] == (0, 0)


def test_input_free_stage():
    """The first stage: its input is data; B has nothing to do, W does the whole backward."""
    split, full, groups, _ = split_and_full(mlp_stage, X0, [W10, B10, W20], DOUT,
                                            input_grad=False)
    assert_same(split, full)
    assert groups.work["input"] == (0, 0)
    assert groups.work["weight"] == groups.work["full"]


def test_shared_weights_across_stages():
    """Two stages use the same weight: B and W per stage, in pipeline order, accumulate what one
    backward through both stages gives."""
    x0, W0, V0 = rng.normal(size=(4, 6)), rng.normal(size=(6, 6)), rng.normal(size=(6, 6))
    W, V = leaves(W0, V0)
    x = tape.tensor(x0)
    a_out = np.tanh(x @ W)  # stage a
    b_in = tape.tensor(a_out.detach().numpy(), requires_grad=True)
    loss = np.sum(np.tanh(b_in @ W) @ V)  # stage b, sharing W
    dI, gb = pp.stage_backward_input(loss, None, [b_in], [W, V])
    _, ga = pp.stage_backward_input(a_out, dI[0], [x], [W])
    pp.stage_backward_weight([W, V], gb)
    pp.stage_backward_weight([W], ga)

    W2, V2 = leaves(W0, V0)
    np.sum(np.tanh(np.tanh(tape.tensor(x0) @ W2) @ W2) @ V2).backward()
    np.testing.assert_allclose(W.grad, W2.grad, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(V.grad, V2.grad)


def test_memory_held_between_b_and_w_is_the_frontier():
    x0 = rng.normal(size=(64, 32))
    w0s = [rng.normal(size=(32, 64)), rng.normal(size=64), rng.normal(size=(64, 8))]
    x = tape.tensor(x0, requires_grad=True)
    ws = leaves(*w0s)
    out = mlp_stage(x, *ws)
    t = out._tape
    held_values_before = sum(a.nbytes for a in t.av if a is not None)
    _, groups = pp.stage_backward_input(out, rng.normal(size=(64, 8)), [x], ws)
    held_values_after = sum(a.nbytes for a in t.av if a is not None)
    # W reads the adjoints of x @ W1 + b1 (for dW1, db1) and of the output (for dW2): the
    # pre-activation (64 x 64), the sum feeding b1 and the output (64 x 8)
    assert groups.held_bytes <= 8 * (64 * 64 + 64 * 64 + 64 * 8)
    assert groups.held_bytes > 0
    assert held_values_after < held_values_before  # values only B needed are released
    pp.stage_backward_weight(ws, groups)
    assert groups.held_bytes == 0


def test_hooks_run_in_the_phase_that_completes_their_gradient():
    seen = []
    x = tape.tensor(X0, requires_grad=True)
    W1, b1, W2 = leaves(W10, B10, W20)
    w_path = W1 * 1.0  # weight-only path: its gradient is complete in W
    w_path.register_hook(lambda g: seen.append("W-path"))
    pre = x @ w_path + b1  # on the input path: complete in B
    pre.register_hook(lambda g: seen.append("input-path"))
    out = np.tanh(pre) @ W2
    _, groups = pp.stage_backward_input(out, DOUT, [x], [W1, b1, W2])
    assert seen == ["input-path"]
    pp.stage_backward_weight([W1, b1, W2], groups)
    assert seen == ["input-path", "W-path"]


def test_custom_function_with_weights_and_inputs_mixed():
    class Bilinear(tape.Function):
        @staticmethod
        def forward(ctx, W, x, y):
            ctx.save_for_backward(W, x, y)
            return x @ W @ y

        @staticmethod
        def backward(ctx, g):
            W, x, y = ctx.saved_tensors
            return (np.outer(x.numpy(), y.numpy()) * g.numpy(), W.numpy() @ y.numpy() * g.numpy(),
                    x.numpy() @ W.numpy() * g.numpy())

    def stage(x, W, y):
        return np.sin(Bilinear.apply(W, x * 2.0, y * 1.0))

    split, full, _, _ = split_and_full(stage, rng.normal(size=3),
                                       [rng.normal(size=(3, 4)), rng.normal(size=4)])
    assert_same(split, full)


def test_across_tapes(monkeypatch):
    import tape.core.tape

    monkeypatch.setattr(tape.core.tape, "MAX_ROWS", 40)  # roll over to a new tape every 40 rows
    x0, w0 = rng.normal(size=3), rng.normal(size=3)

    def stage(x, w):
        h = x
        for _ in range(60):
            h = np.sin(h * w) + 0.5 * x
        return h.sum()

    split, full, groups, _ = split_and_full(stage, x0, [w0])
    assert len(groups.plans) > 2
    assert_same(split, full)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(1, 5), st.integers(1, 3),
       st.integers(0, 2 ** 16))
def test_random_mlp_shapes(n, d_in, d_h, d_out, seed):
    r = np.random.default_rng(seed)
    split, full, groups, _ = split_and_full(
        mlp_stage, r.normal(size=(n, d_in)),
        [r.normal(size=(d_in, d_h)), r.normal(size=d_h), r.normal(size=(d_h, d_out))],
        r.normal(size=(n, d_out)))
    assert_same(split, full)
    assert sum(groups.work[k][0] for k in ("input", "weight")) == groups.work["full"][0]


def test_stage_backward_returns_input_gradients():
    x = tape.tensor(X0, requires_grad=True)
    ws = leaves(W10, B10, W20)
    h = x * 1.0  # a non-leaf input works too
    (dh, dx) = pp.stage_backward(mlp_stage(h, *ws), DOUT, [h, x])
    x2 = tape.tensor(X0, requires_grad=True)
    ws2 = leaves(W10, B10, W20)
    mlp_stage(x2, *ws2).backward(DOUT)
    np.testing.assert_array_equal(dx, x2.grad)
    np.testing.assert_array_equal(dh, x2.grad)
    np.testing.assert_array_equal(ws[0].grad, ws2[0].grad)


def test_autograd_grad_with_respect_to_an_intermediate():
    """The GradientEdge use: the gradient at a stage boundary inside one graph."""
    x = tape.tensor(X0, requires_grad=True)
    W1, b1, W2 = leaves(W10, B10, W20)
    h = np.tanh(x @ W1 + b1)
    out = (h @ W2 * DOUT).sum()
    (gh,) = tape.autograd.grad(out, h, retain_graph=True)
    np.testing.assert_allclose(gh, DOUT @ W20.T, rtol=1e-14)
    assert W1.grad is None


# -- errors -------------------------------------------------------------------------------------

def test_weight_phase_errors():
    x = tape.tensor(X0, requires_grad=True)
    ws = leaves(W10, B10, W20)
    with pytest.raises(TypeError, match="run the input phase"):
        pp.stage_backward_weight(ws, None)
    _, groups = pp.stage_backward_input(mlp_stage(x, *ws), DOUT, [x], ws)
    with pytest.raises(ValueError, match="must be the ones passed"):
        pp.stage_backward_weight(ws[:2], groups)
    pp.stage_backward_weight(ws, groups, retain_graph=True)
    g1 = ws[0].grad.copy()
    pp.stage_backward_weight(ws, groups)
    np.testing.assert_allclose(ws[0].grad, 2 * g1)
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        pp.stage_backward_weight(ws, groups)


def test_weight_not_in_the_graph():
    x = tape.tensor(X0, requires_grad=True)
    ws = leaves(W10, B10, W20)
    (unused,) = leaves(np.ones(3))
    with pytest.raises(ValueError, match=r"weights\[3\] \(shape \(3,\)\) is not in the graph"):
        pp.stage_backward_input(mlp_stage(x, *ws), DOUT, [x], ws + [unused])


def test_input_phase_twice_is_the_backward_twice_error():
    x = tape.tensor(X0, requires_grad=True)
    ws = leaves(W10, B10, W20)
    out = mlp_stage(x, *ws)
    _, groups = pp.stage_backward_input(out, DOUT, [x], ws)
    pp.stage_backward_weight(ws, groups)
    with pytest.raises(RuntimeError) as e:
        pp.stage_backward_input(out, DOUT, [x], ws)
    assert str(e.value) == BACKWARD_TWICE


def test_stage_backward_failure_lists_shapes():
    x = tape.tensor(X0, requires_grad=True)
    ws = leaves(W10, B10, W20)
    with pytest.raises(RuntimeError) as e:
        pp.stage_backward((mlp_stage(x, *ws), "aux"), (np.ones((2, 2)), None), [x])
    msg = str(e.value)
    assert "Stage output: (Tensor(5, 4), str)" in msg
    assert "Output gradient: (ndarray(2, 2), NoneType)" in msg
    assert "Input: [Tensor(5, 8)]" in msg and "mismatch in shape" in msg


def test_worked_example_pipeline_equals_plain_backward():
    path = Path(__file__).resolve().parents[1] / "examples" / "pipeline_zero_bubble.py"
    spec = importlib.util.spec_from_file_location("pipeline_zero_bubble", path)
    ex = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = ex  # dataclasses look their module up
    spec.loader.exec_module(ex)
    r = np.random.default_rng(1)
    X, Y = r.normal(size=(32, ex.WIDTHS[0])), r.normal(size=(32, ex.WIDTHS[-1]))
    ref = ex.reference_grads(X, Y)
    runs = {}
    for split in (False, True):
        p = ex.Pipeline(split=split, n_micro=4)
        grads = p.run(X, Y)
        for gr, rr in zip(grads, ref):
            for g, ref_g in zip(gr, rr):
                np.testing.assert_allclose(g, ref_g, rtol=1e-12, atol=1e-16)
        runs[split] = p
    assert runs[True].bubbles() < runs[False].bubbles()
    assert len(runs[True].timeline) < len(runs[False].timeline)
    assert runs[True].held_peak > 0


def test_split_with_packed_saved_values():
    """Values packed by saved_tensors_hooks: B releases the ones only it read; W unpacks the
    rest (an add row reads no value, so its packed result is never unpacked)."""
    unpacked = []

    def stage(x, W1, b1, W2):
        with tape.graph.saved_tensors_hooks(lambda a: a.copy(),
                                            lambda p: unpacked.append(p.shape) or p):
            return mlp_stage(x, W1, b1, W2)

    split, full, _, _ = split_and_full(stage, X0, [W10, B10, W20], DOUT)
    assert_same(split, full)
    assert unpacked


def test_function_backward_sees_what_each_phase_needs():
    seen = []

    class Mul(tape.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            seen.append(ctx.needs_input_grad)
            a, b = ctx.saved_tensors
            return g * b, g * a

    x = tape.tensor(X0, requires_grad=True)
    (W,) = leaves(np.ones(X0.shape))
    _, groups = pp.stage_backward_input(Mul.apply(x, W).sum(), None, [x], [W])
    pp.stage_backward_weight([W], groups)
    assert seen == [(True, False), (False, True)]
    np.testing.assert_array_equal(W.grad, X0)
