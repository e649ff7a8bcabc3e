"""Threads for one compiled call: how many, the process-wide pool, and running pieces of work in
it. The jitted sweeps release the GIL, so pieces run on several cores."""
from __future__ import annotations

import os

_POOL = []  # [workers, executor, pid]


def thread_count(threads):
    """`threads` of ``tape.compile``, resolved: None is NUMBA_NUM_THREADS when it is set (as
    Numba's own threads), else the cores this process may run on; rounded down to a power of two
    (the pieces of a pairwise sum come in powers of two), at most 8."""
    if threads is None:
        threads = os.environ.get("NUMBA_NUM_THREADS", "")
        if not threads.strip().isdigit():
            try:
                threads = len(os.sched_getaffinity(0))
            except AttributeError:  # (not on every platform)
                threads = os.cpu_count() or 1
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


def run_pieces(fn, pieces):
    """fn(*piece) for every piece: the first in this thread, the others in the pool at once."""
    others = [pool(len(pieces) - 1).submit(fn, *piece) for piece in pieces[1:]]
    try:
        fn(*pieces[0])
    finally:
        for f in others:
            f.result()

