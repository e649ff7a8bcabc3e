"""tape.checkpoint: recompute instead of keeping intermediates; gradients unchanged, memory of a
long loop O(sqrt(N)) when checkpointed every sqrt(N) steps."""
import tracemalloc

import numpy as np
import pytest

import tape


def _step(s, p):
    return s + 0.01 * np.tanh(s * p)


def _run(N, K, ckpt):
    """A loop of N steps in blocks of K; returns (gradient, bytes held after the forward,
    peak bytes during the backward)."""
    p = tape.tensor(np.linspace(0.5, 1.5, 32), requires_grad=True)
    s = tape.tensor(np.ones(32))

    def block(s, p):
        for _ in range(K):
            s = _step(s, p)
        return s

    f = tape.checkpoint(block) if ckpt else block
    tracemalloc.start()
    try:
        for _ in range(N // K):
            s = f(s, p)
        loss = np.sum(s * s)
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        loss.backward()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return p.grad, held, peak


def test_gradients_equal_the_plain_loop():
    g1, _, _ = _run(400, 20, True)
    g0, _, _ = _run(400, 20, False)
    np.testing.assert_allclose(g1, g0, rtol=1e-12)


@pytest.mark.slow
def test_memory_grows_as_sqrt_n_on_a_10000_step_loop():
    _run(100, 10, True)  # warm up (kernels, caches)
    _, held_small, peak_small = _run(2500, 50, True)
    g, held, peak = _run(10000, 100, True)
    _, held_plain, peak_plain = _run(10000, 100, False)
    # 4x the steps, checkpointed every sqrt(N): about 2x the memory (sqrt), not 4x
    assert held < 2.6 * held_small and peak < 2.6 * peak_small, (held_small, held, peak_small,
                                                                  peak)
    assert held < held_plain / 20 and peak < peak_plain / 10
    assert np.all(np.isfinite(g))


def test_non_tensor_arguments_tuple_outputs_and_nesting():
    def block(x, y, scale):
        return np.sin(x) * scale, x * y

    x0, y0 = np.array([0.3, 0.7]), np.array([1.5, -0.5])

    def loss(x, y):
        a, b = tape.checkpoint(block)(x, y, 2.0)
        return np.sum(a * b)

    g = tape.grad(loss, argnums=(0, 1))(x0, y0)
    g_ref = tape.grad(lambda x, y: np.sum(block(x, y, 2.0)[0] * block(x, y, 2.0)[1]),
                      argnums=(0, 1))(x0, y0)
    for a, b in zip(g, g_ref):
        np.testing.assert_allclose(a, b, rtol=1e-14)


def test_a_closed_over_tensor_is_an_error():
    w = tape.tensor(np.ones(2), requires_grad=True)
    x = tape.tensor(np.array([0.1, 0.2]), requires_grad=True)
    y = tape.checkpoint(lambda x: x * w)(x)
    with pytest.raises(RuntimeError, match="without taking it as an argument"):
        np.sum(y).backward()
