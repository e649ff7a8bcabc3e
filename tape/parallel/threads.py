"""Threads for one compiled call: how many, and running pieces of work on them. The jitted sweeps
and NumPy's BLAS calls release the GIL, so pieces run on several cores.

The pieces of one call are short (W2's batched matmul takes 0.4 ms, its halves 0.2 ms each), and
a thread asleep on a lock takes 0.1-0.3 ms to wake on this machine class: handed to a plain
thread pool, two halves took as long as the whole. So the pieces go to a crew of workers that,
after each piece, wait for the next one awake for SPIN_SECONDS, in a jitted loop that holds no
GIL (``jit._spin``), and only then sleep. The caller waits for its workers the same way. This is
what OpenMP runtimes and OpenBLAS do with their own threads. A crew spins only when it and its
caller fit on the cores this process may use; more pieces than cores wait asleep, as in a pool.
A piece that is plain BLAS calls (a split matmul's: ``tape.parallel.gemm``) can be handed over as
integers, and a worker then makes the calls inside its jitted wait loop: it never waits for the
GIL, where a Python piece waits ~40-60 us for its turn.
"""
from __future__ import annotations

import os
import threading
import time

import numpy as np

# how long a worker stays awake for its next piece, and a caller for its workers, before sleeping
SPIN_SECONDS = 2e-3

_POOL = []  # [workers, executor, pid]
_CREW = []  # [crew, pid]
_CREW_LOCK = threading.Lock()


def cores():
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on every platform)
        return os.cpu_count() or 1


def thread_count(threads):
    """`threads` of ``tape.compile``, resolved: None is NUMBA_NUM_THREADS when it is set (as
    Numba's own threads), else the cores this process may run on; rounded down to a power of two
    (the pieces of a pairwise sum come in powers of two), at most 8."""
    if threads is None:
        threads = os.environ.get("NUMBA_NUM_THREADS", "")
        if not threads.strip().isdigit():
            threads = cores()
    threads = max(1, min(int(threads), 8))
    return 1 << (threads.bit_length() - 1)


def pool(workers):
    """A process-wide pool with at least `workers` threads. A child forked after the pool
    started makes its own: the parent's threads do not exist in it."""
    from concurrent.futures import ThreadPoolExecutor

    if not _POOL or _POOL[0] < workers or _POOL[2] != os.getpid():
        if _POOL and _POOL[2] == os.getpid():
            _POOL[1].shutdown(wait=False)
        _POOL[:] = [workers, ThreadPoolExecutor(workers, thread_name_prefix="tapejit-sweep"),
                    os.getpid()]
    return _POOL[1]


class _Crew:
    """Worker threads for the pieces of one call at a time (see the module's docstring).

    Worker k has flags go[k] (a piece is waiting) and done[k] (it has finished one), read by
    ``spin_wait`` while awake; asleep, it waits on wake[k], and a caller asleep waits on
    finished[k]. Python code reads and writes the flags and the asleep marks under the GIL, so
    a hand-over cannot be lost between one side going to sleep and the other setting a flag.
    Each side holds the GIL as briefly as it can around a hand-over: a thread that asks for the
    GIL while the other holds it sleeps, and waking costs as much as the spin saves."""

    def __init__(self, workers):
        from jit._spin import GEMM_FIELDS, NATIVE, serve, spin_wait

        self.spin_wait, self.serve, self.native_flag = spin_wait, serve, NATIVE
        self.tasks = np.zeros((workers, GEMM_FIELDS), np.int64)  # native pieces (jit._spin)
        self.workers = workers
        self.cores = cores()
        self.go = np.zeros(workers, np.int64)
        self.done = np.zeros(workers, np.int64)
        self.asleep = [False] * workers
        self.waiting = [False] * workers  # the caller, asleep on finished[k]
        self.wake = [threading.Event() for _ in range(workers)]
        self.finished = [threading.Event() for _ in range(workers)]
        self.pieces = [None] * workers  # (fn, args)
        self.errors = [None] * workers
        self.lock = threading.Lock()  # one call's pieces at a time
        self.spin_rounds = _spin_rounds(spin_wait, SPIN_SECONDS)
        self.native_runs = 0  # native pieces handed out (for tests and curious users)
        self.rounds = 0  # the current call's: spin_rounds, or 0 when it has more threads than
        # cores (a spinning thread would then take a core from one with work to do)
        for k in range(workers):
            threading.Thread(target=self._serve, args=(k,), daemon=True,
                             name=f"tapejit-crew-{k}").start()

    def _serve(self, k):
        go, done, wake, serve, tasks = self.go, self.done, self.wake[k], self.serve, self.tasks
        while True:
            # (native pieces run inside serve, without the GIL; it returns for a Python one)
            if serve(go, done, k, self.rounds, tasks) == 0:  # nothing for a while: sleep
                self.asleep[k] = True
                if go[k] == 0:
                    wake.wait()
                    wake.clear()
                self.asleep[k] = False
                continue
            go[k] = 0
            fn, args = self.pieces[k]
            try:
                fn(*args)
            except BaseException as e:  # handed to the caller, which raises it
                self.errors[k] = e
            self.pieces[k] = None
            done[k] = 1
            if self.waiting[k]:
                self.finished[k].set()

    def run(self, fn, pieces, native=None):
        """fn(*piece) for every piece: the first in this thread, the others on workers 0, 1, ...
        at once. Raises the first error of any piece once all have finished. `native`: per
        piece, None or the fields of a native piece (``jit._spin.NATIVE``) that does what fn
        would, which a worker then runs without the GIL (only while workers spin: this thread
        waits for native pieces awake)."""
        n = len(pieces) - 1
        self.rounds = self.spin_rounds if n < self.cores else 0
        native = native if native is not None and self.rounds else [None] * (n + 1)
        for k in range(n):
            self.errors[k] = None
            self.done[k] = 0
            if native[k + 1] is not None:
                self.tasks[k] = native[k + 1]
                self.native_runs += 1
                self.go[k] = self.native_flag
            else:
                self.pieces[k] = (fn, pieces[k + 1])
                self.go[k] = 1
            if self.asleep[k]:
                self.wake[k].set()
        try:
            fn(*pieces[0])
        finally:
            try:
                for k in range(n):
                    if native[k + 1] is not None:  # (its worker sets no event: wait awake)
                        while self.spin_wait(self.done, k, self.spin_rounds) == 0:
                            pass
                    elif self.spin_wait(self.done, k, self.rounds) == 0:
                        self.waiting[k] = True
                        while self.done[k] == 0:  # (a set left from an earlier piece: again)
                            self.finished[k].wait()
                            self.finished[k].clear()
                        self.waiting[k] = False
            except BaseException:  # (a KeyboardInterrupt while waiting: a worker may still be
                _CREW.clear()      # busy, so the next call makes a crew of its own)
                raise
        for e in self.errors[:n]:
            if e is not None:
                raise e


def _spin_rounds(spin_wait, seconds):
    """How many rounds of ``spin_wait`` take about `seconds` on this machine."""
    zero = np.zeros(1, np.int64)
    spin_wait(zero, 0, 10)
    rounds = 20_000
    t = time.perf_counter()
    spin_wait(zero, 0, rounds)
    per_round = max((time.perf_counter() - t) / rounds, 1e-10)
    return int(seconds / per_round)


def crew(workers):
    """The process-wide crew with at least `workers` workers (a child forked after it started
    makes its own: the parent's threads do not exist in it), or None without the JIT (its
    spin loop would hold the GIL)."""
    if _CREW and _CREW[0].workers >= workers and _CREW[1] == os.getpid():
        return _CREW[0]
    from numba import config

    if config.DISABLE_JIT:
        return None
    with _CREW_LOCK:
        if not _CREW or _CREW[0].workers < workers or _CREW[1] != os.getpid():
            _CREW[:] = [_Crew(workers), os.getpid()]  # (an old crew's workers just sleep)
        return _CREW[0]


def run_shares(fn, T):
    """fn(part) for each of T workers' shares of one blocked run's blocks, part = (k, T, 0): the
    sweep's `part` argument (``jit._interp.sweep``), as ``run_pieces``."""
    run_pieces(fn, [(np.array([k, T, 0.0]),) for k in range(T)])


def run_pieces(fn, pieces, native=None):
    """fn(*piece) for every piece: the first in this thread, the others on other threads at
    once (the crew's; in turn in this thread while another call has the crew). `native`: see
    ``_Crew.run``."""
    if len(pieces) == 1:
        fn(*pieces[0])
        return
    c = crew(len(pieces) - 1)
    if c is None:
        others = [pool(len(pieces) - 1).submit(fn, *piece) for piece in pieces[1:]]
        try:
            fn(*pieces[0])
        finally:
            for f in others:
                f.result()
        return
    if not c.lock.acquire(blocking=False):  # another thread's call has it (or this is one
        for piece in pieces:                 # of its pieces): no waiting for it
            fn(*piece)
        return
    try:
        c.run(fn, pieces, native)
    finally:
        c.lock.release()
