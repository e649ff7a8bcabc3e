"""One current tape per thread: threads record and differentiate independently."""
import sys
import threading

import numpy as np
import pytest

import tape

from _run_threads import run_threads as _run_threads
from tests._tolerance import assert_within, rounding_bound


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
    # NumPy's sin / cos / exp pick their code per CPU: a few roundings of each term's size
    ga = lambda x: np.cos(x) * x + np.sin(x)
    gb = lambda x: 3 * -2 * x * np.exp(-x * x)
    bound_a = rounding_bound(ga, [xa0], ga(xa0), ops=16)
    bound_b = rounding_bound(gb, [xb0], gb(xb0), ops=16)

    def fa():
        x = tape.tensor(xa0, requires_grad=True)
        for _ in range(200):
            x.grad = None
            (np.sin(x) * x).sum().backward()
            assert_within(x.grad, ga(xa0), bound_a)
        results["a"] = x.grad

    def fb():
        x = tape.tensor(xb0, requires_grad=True)
        for _ in range(200):
            x.grad = None
            y = np.exp(-x * x) @ np.ones((1, 3))
            y.sum().backward()
            assert_within(x.grad, gb(xb0), bound_b)
        results["b"] = x.grad

    _run_threads([fa, fb])
    assert set(results) == {"a", "b"}


def test_threads_share_a_leaf(fast_switching):
    """A leaf used by two threads at once: each thread's tape keeps its own slot for it."""
    w0 = np.linspace(0.5, 1.5, 4)
    w = tape.tensor(w0, requires_grad=True)

    def worker(k):
        want = lambda w: 3 * (k * np.cos(w * k) * w + np.sin(w * k))
        bound = rounding_bound(want, [w0], want(w0), ops=16)

        def run():
            for _ in range(200):
                s = 0.0
                for _ in range(3):
                    s = s + np.sin(w * k) * w
                (g,) = tape.autograd.grad(s.sum(), w)
                assert_within(g, want(w0), bound)
        return run

    _run_threads([worker(1.0), worker(2.0)])


def test_threads_share_a_scalar_leaf(fast_switching):
    """0-d values take the recording fast path; the same must hold there."""
    w = tape.tensor(0.7, requires_grad=True)

    def worker(k):
        want = lambda w: k * np.cos(w * k) * w + np.sin(w * k) + 2 * w
        bound = rounding_bound(want, [0.7], want(0.7), ops=16)

        def run():
            for _ in range(500):
                s = np.sin(w * k) * w + w * w
                (g,) = tape.autograd.grad(s, w)
                assert abs(g - want(0.7)) <= bound
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
    assert_within(x.grad, 6.0 * np.cos(x0), rounding_bound(lambda x: 6.0 * np.cos(x), [x0],
                                                           6.0 * np.cos(x0), ops=16))


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
    np.testing.assert_array_equal(box["g"], 6.0 * x0)  # (small integers: every step is exact)


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
    np.testing.assert_array_equal(x.grad, 6.0 + 8.0 * x0)  # (small integers: exact)
