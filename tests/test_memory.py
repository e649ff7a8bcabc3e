"""Memory stays flat over many record + backward iterations (no tape, value or leaf leaks).

Measured as resident set size from /proc/self/statm (Linux), after a warmup that lets NumPy,
Numba and the allocators reach their steady state, with a gc.collect() on both ends.

The bound: each iteration records the W5 kick-drift-kick step, about 40 rows holding ~100 KB of
arrays (every (16, 16, 3) intermediate is 6 KB). The smallest array the step makes is a (16, 3)
float64 one: 384 bytes of data plus a ~112-byte ndarray header. LEAK_BYTES = 400 bytes per
measured iteration (4 MB over 10,000) is below even that; allocator noise measured on this step is
~20 KB in total. RSS only grows once the allocator's free memory is used up (earlier tests may
leave a few MB of it), so ``test_measurement_detects_a_leak`` checks the measurement with the
smallest intermediate a leak would realistically hold on to, one (16, 16, 3) array (6 KB) per
iteration, or a whole tape (~100 KB). The
shorter variants (a few thousand iterations, to keep the file under a minute on two busy cores)
sit at the 2 MB floor: they catch ~700 bytes or more per iteration, i.e. any leaked (16, 16, 3)
intermediate (6 KB) or tape.
"""
import gc
import os
import sys
import weakref

import numpy as np
import pytest

import tape

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="reads /proc/self/statm")]

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
WARMUP = 500
LEAK_BYTES = 400  # per measured iteration: less than the smallest array a step allocates
FLOOR = 2 << 20  # never tighter than 2 MB (one or two allocator arenas)

rng = np.random.default_rng(0)
POS0 = rng.normal(size=(16, 3))
VEL0 = 0.1 * rng.normal(size=(16, 3))
MASSES = rng.uniform(0.5, 1.5, size=16)
DT, EPS2 = 0.01, 0.1


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def _trim():
    """Return the allocator's free memory to the OS (glibc), so that RSS growth measures what
    is kept, whatever earlier tests in this process left free."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _accel(pos):
    diff = pos[None, :, :] - pos[:, None, :]
    r2 = np.sum(diff * diff, axis=2) + EPS2
    w = MASSES[None, :] / (r2 * np.sqrt(r2))
    return np.sum(diff * w[:, :, None], axis=1)


def _w5_step(pos):
    """One kick-drift-kick step of WORKLOADS.md W5, then its loss."""
    vel = VEL0 + (0.5 * DT) * _accel(pos)
    pos = pos + DT * vel
    vel = vel + (0.5 * DT) * _accel(pos)
    return 0.5 * np.sum(MASSES[:, None] * vel * vel)


def _growth(body, n):
    """RSS growth in bytes over n calls of body(), after WARMUP calls."""
    for _ in range(WARMUP):
        body()
    gc.collect()
    _trim()
    r0 = _rss()
    for _ in range(n):
        body()
    gc.collect()
    _trim()
    return _rss() - r0


def _bound(n):
    return max(FLOOR, LEAK_BYTES * n)


def test_record_backward_memory_is_flat():
    n = 10_000
    pos = tape.tensor(POS0, requires_grad=True)
    tapes = weakref.WeakSet()

    def body():
        loss = _w5_step(pos)
        tapes.add(loss._tape)
        loss.backward()
        pos.grad = None

    growth = _growth(body, n)
    assert growth < _bound(n), f"RSS grew by {growth / 1e6:.2f} MB over {n} iterations"
    gc.collect()
    assert len(tapes) == 0, f"{len(tapes)} tapes still alive after their backward"


def test_optimiser_loop_memory_is_flat():
    n = 3_000
    w = tape.tensor(POS0, requires_grad=True)
    lr = 1e-3
    first = []

    def body():
        nonlocal w
        loss = _w5_step(w)
        loss.backward()
        with tape.no_grad():
            w -= lr * w.grad
        w.grad = None
        if not first:
            first.append(loss.item())

    growth = _growth(body, n)
    assert growth < _bound(n), f"RSS grew by {growth / 1e6:.2f} MB over {n} iterations"
    # the steps did happen: w moved, and the loss went down (gradient descent on kinetic energy)
    assert not np.allclose(w.detach().numpy(), POS0)
    assert _w5_step(w.detach()).item() < first[0]


def test_accumulating_grad_memory_is_flat():
    """.grad accumulated across backward calls is updated in place, not re-allocated per call."""
    n = 2_000
    pos = tape.tensor(POS0, requires_grad=True)
    growth = _growth(lambda: _w5_step(pos).backward(), n)
    assert growth < _bound(n), f"RSS grew by {growth / 1e6:.2f} MB over {n} iterations"
    single = tape.tensor(POS0, requires_grad=True)
    _w5_step(single).backward()
    np.testing.assert_allclose(pos.grad, (WARMUP + n) * single.grad, rtol=1e-10)


def test_measurement_detects_a_leak():
    """The bound is not vacuous: leaking one (16, 16, 3) intermediate per iteration exceeds it."""
    n = 10_000
    kept = []
    growth = _growth(lambda: kept.append(np.ones((16, 16, 3))), n)
    kept.clear()
    assert growth >= _bound(n), (growth, _bound(n))


def test_memory_is_flat_with_hooks_active():
    """Hooks, retain_grad and a BackwardState callback on every step leak nothing."""
    n = 10_000
    pos = tape.tensor(POS0, requires_grad=True)
    state = tape.BackwardState()
    state.scale = lambda g: g * 1.0

    def body():
        vel = VEL0 + (0.5 * DT) * _accel(pos)
        vel.register_hook(lambda g: g)
        vel.retain_grad()
        vel = state.hook(vel, "scale")
        loss = 0.5 * np.sum(MASSES[:, None] * vel * vel)
        loss.backward()
        pos.grad = None

    growth = _growth(body, n)
    assert growth < _bound(n), f"RSS grew by {growth / 1e6:.2f} MB over {n} iterations"
