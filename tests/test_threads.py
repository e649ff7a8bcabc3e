"""One current tape per thread: threads record and differentiate independently."""
import sys
import threading

import numpy as np
import pytest

import tape

from _run_threads import run_threads as _run_threads


@pytest.fixture
def fast_switching():
    """Switch threads as often as possible so interleavings inside recording happen."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def test_two_threads_record_and_differentiate_different_functions(fast_switching):
    xa0 = np.linspace(0.1, 1.0, 5)
    xb0 = np.linspace(-1.0, 2.0, 7).reshape(7, 1)
    results = {}

    def fa():
        x = tape.tensor(xa0, requires_grad=True)
        for _ in range(200):
            x.grad = None
            (np.sin(x) * x).sum().backward()
            np.testing.assert_allclose(x.grad, np.cos(xa0) * xa0 + np.sin(xa0), rtol=1e-13)
        results["a"] = x.grad

    def fb():
        x = tape.tensor(xb0, requires_grad=True)
        for _ in range(200):
            x.grad = None
            y = np.exp(-x * x) @ np.ones((1, 3))
            y.sum().backward()
            np.testing.assert_allclose(x.grad, 3 * -2 * xb0 * np.exp(-xb0 * xb0), rtol=1e-13)
        results["b"] = x.grad

    _run_threads([fa, fb])
    assert set(results) == {"a", "b"}


def test_threads_share_a_leaf(fast_switching):
    """A leaf used by two threads at once: each thread's tape keeps its own slot for it."""
    w0 = np.linspace(0.5, 1.5, 4)
    w = tape.tensor(w0, requires_grad=True)

    def worker(k):
        def run():
            for _ in range(200):
                s = 0.0
                for _ in range(3):
                    s = s + np.sin(w * k) * w
                (g,) = tape.autograd.grad(s.sum(), w)
                np.testing.assert_allclose(g, 3 * (k * np.cos(w0 * k) * w0 + np.sin(w0 * k)),
                                           rtol=1e-13)
        return run

    _run_threads([worker(1.0), worker(2.0)])


def test_threads_share_a_scalar_leaf(fast_switching):
    """0-d values take the recording fast path; the same must hold there."""
    w = tape.tensor(0.7, requires_grad=True)

    def worker(k):
        def run():
            for _ in range(500):
                s = np.sin(w * k) * w + w * w
                (g,) = tape.autograd.grad(s, w)
                assert abs(g - (k * np.cos(0.7 * k) * 0.7 + np.sin(0.7 * k) + 1.4)) < 1e-13
        return run

    _run_threads([worker(1.0), worker(3.0)])


def test_concurrent_backward_accumulates_into_a_shared_leaf(fast_switching):
    w = tape.tensor(np.ones(4), requires_grad=True)
    n = 300

    def worker(k):
        def run():
            for _ in range(n):
                (w * k).sum().backward()
        return run

    _run_threads([worker(1.0), worker(2.0)])
    np.testing.assert_array_equal(w.grad, np.full(4, 3.0 * n))


def test_tensor_recorded_in_one_thread_used_in_another():
    x0 = np.arange(3.0)
    x = tape.tensor(x0, requires_grad=True)
    box = {}

    def record():
        box["y"] = np.sin(x) * 2.0

    t = threading.Thread(target=record)
    t.start()
    t.join()
    z = (box["y"] * 3.0).sum()  # recorded on this thread's tape: a link row to the other's
    assert z._tape is not box["y"]._tape
    z.backward()
    np.testing.assert_allclose(x.grad, 6.0 * np.cos(x0), rtol=1e-14)


def test_tensor_handed_between_running_threads():
    """Thread A records y and hands it over; thread B records on y and differentiates."""
    x0 = np.arange(3.0)
    x = tape.tensor(x0, requires_grad=True)
    box = {}
    ready = threading.Event()

    def a():
        box["y"] = x * x
        ready.set()

    def b():
        ready.wait()
        (g,) = tape.autograd.grad((box["y"] * 3.0).sum(), x)
        box["g"] = g

    _run_threads([a, b])
    np.testing.assert_allclose(box["g"], 6.0 * x0, rtol=1e-14)


def test_owner_thread_keeps_recording_after_another_thread_swept_its_tape():
    x0 = np.arange(3.0)
    x = tape.tensor(x0, requires_grad=True)
    box = {}
    handed, swept = threading.Event(), threading.Event()

    def a():
        y = x * 2.0
        box["y"] = y
        handed.set()
        swept.wait()
        (y * y).sum().backward()  # keep recording on this thread's (now swept) tape

    def b():
        handed.wait()
        try:
            (box["y"] * 3.0).sum().backward(retain_graph=True)
        finally:
            swept.set()

    _run_threads([a, b])
    np.testing.assert_allclose(x.grad, 6.0 + 8.0 * x0, rtol=1e-14)
