"""The crew that runs the pieces of one compiled call on several threads (tape/parallel/threads.py): every
piece runs once, errors reach the caller after every piece has finished, and no hand-over is
lost whether the workers are awake (spinning) or asleep."""
import os
import threading

import numpy as np
import pytest

from jit._spin import spin_wait
from tape.parallel import threads as _threads


def _record(log):
    lock = threading.Lock()

    def piece(k, value):
        with lock:
            log.append((k, value, threading.get_ident()))

    return piece


def test_spin_wait_returns_the_flag_or_zero():
    flags = np.array([0, 7], np.int64)
    assert spin_wait(flags, 1, 10) == 7
    assert spin_wait(flags, 0, 1000) == 0
    assert spin_wait(flags, 0, 0) == 0  # no rounds: one read


@pytest.mark.parametrize("pieces", [1, 2, 3, 5])
def test_every_piece_runs_once(pieces):
    for _ in range(50):  # back to back: the workers stay awake between calls
        log = []
        _threads.run_pieces(_record(log), [(k, k * k) for k in range(pieces)])
        assert sorted(k for k, _, _ in log) == list(range(pieces))
        assert all(v == k * k for k, v, _ in log)
        assert next(t for k, _, t in log if k == 0) == threading.get_ident()  # (the caller's)


def test_pieces_run_at_the_same_time():
    """Each piece waits for all the others: only threads running at once get past it."""
    barrier = threading.Barrier(2, timeout=30)
    for _ in range(20):
        _threads.run_pieces(lambda k: barrier.wait(), [(0,), (1,)])


def test_workers_asleep_wake_for_the_next_piece(monkeypatch):
    """With no spinning at all (as with more pieces than cores) every hand-over goes through
    the workers' events."""
    crew = _threads.crew(1)
    monkeypatch.setattr(crew, "spin_rounds", 0)
    for _ in range(30):
        log = []
        _threads.run_pieces(_record(log), [(0, 0), (1, 1)])
        assert sorted(k for k, _, _ in log) == [0, 1]


@pytest.mark.parametrize("where", [0, 1])
def test_an_error_in_a_piece_reaches_the_caller_after_all_pieces(where):
    done = []

    def piece(k):
        if k == where:
            raise ValueError(f"piece {k}")
        done.append(k)

    with pytest.raises(ValueError, match=f"piece {where}"):
        _threads.run_pieces(piece, [(0,), (1,), (2,)])
    assert sorted(done) == [k for k in range(3) if k != where]
    log = []  # the crew still works
    _threads.run_pieces(_record(log), [(0, 0), (1, 1)])
    assert sorted(k for k, _, _ in log) == [0, 1]


def test_a_piece_that_splits_again_runs_its_pieces_in_turn():
    """The crew runs one call's pieces at a time: pieces asked for while it is busy (here by
    one of its own pieces) run in the asking thread, so nothing waits on itself."""
    log = []
    inner = _record(log)

    def outer(k):
        _threads.run_pieces(inner, [(10 * k + j, j) for j in range(2)])

    _threads.run_pieces(outer, [(0,), (1,)])
    assert sorted(k for k, _, _ in log) == [0, 1, 10, 11]


def test_callers_on_many_threads_each_get_their_pieces_run():
    from concurrent.futures import ThreadPoolExecutor

    def caller(c):
        for r in range(40):
            out = np.zeros(3)
            _threads.run_pieces(lambda k: out.__setitem__(k, c * 100 + r + k),
                                [(0,), (1,), (2,)])
            assert list(out) == [c * 100 + r, c * 100 + r + 1, c * 100 + r + 2]

    with ThreadPoolExecutor(4) as pool:
        for f in [pool.submit(caller, c) for c in range(4)]:
            f.result()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_makes_its_own_crew():
    import multiprocessing

    _threads.run_pieces(lambda k: None, [(0,), (1,)])  # the crew runs in this process
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(_child, ()).get(timeout=60) == [0, 1]


def _child():
    log = []
    _threads.run_pieces(_record(log), [(0, 0), (1, 1)])
    return sorted(k for k, _, _ in log)


def test_spin_wait_has_one_signature():
    """Every caller passes the declared types, so warm-up's compile is the only one."""
    from numba.core.sigutils import normalize_signature

    from jit import _spin

    _threads.run_pieces(lambda k: None, [(0,), (1,)])
    assert len(spin_wait.signatures) == 1
    args, _ = normalize_signature(_spin.SIG_SPIN_WAIT)
    assert spin_wait.signatures[0] == tuple(args)
