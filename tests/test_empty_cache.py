"""tape.empty_cache / tape.cached_bytes: the memory eager keeps between calls, per thread."""
import threading

import numpy as np

import tape


def _loss(x):  # large values (>= 128 KiB) and a large adjoint arena
    y = np.exp(x) * x
    return np.sum(np.sin(y) * y)


def _expected(x):
    y = np.exp(x) * x
    dy = np.cos(y) * y + np.sin(y)
    return dy * (np.exp(x) * x + np.exp(x))


def test_memory_kept_after_a_backward_is_given_back():
    x = np.linspace(-1.0, 1.0, 40_000)
    tape.empty_cache()
    assert tape.cached_bytes() == 0
    g = tape.grad(_loss)(x)
    kept = tape.cached_bytes()
    assert kept >= 8 * x.size  # at least one value's or the arena's memory
    np.testing.assert_allclose(g, _expected(x), rtol=1e-13, atol=1e-14)
    tape.empty_cache()
    assert tape.cached_bytes() == 0
    np.testing.assert_array_equal(tape.grad(_loss)(x), g)  # the same bits with or without it
    tape.empty_cache()


def test_each_thread_keeps_and_clears_its_own():
    x = np.linspace(-1.0, 1.0, 40_000)
    tape.empty_cache()
    seen = {}

    def work():
        tape.grad(_loss)(x)
        seen["before"] = tape.cached_bytes()
        tape.empty_cache()
        seen["after"] = tape.cached_bytes()

    tape.grad(_loss)(x)
    mine = tape.cached_bytes()
    th = threading.Thread(target=work)
    th.start()
    th.join()
    assert seen["before"] > 0 and seen["after"] == 0
    assert tape.cached_bytes() == mine > 0  # the other thread's empty_cache left this one's
    tape.empty_cache()


def test_small_work_keeps_nothing():
    tape.empty_cache()
    tape.grad(_loss)(np.linspace(-1.0, 1.0, 100))
    assert tape.cached_bytes() == 0
