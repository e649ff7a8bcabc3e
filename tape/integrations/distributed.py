"""Compiled gradients over many parameter sets, on a Dask cluster or locally.

    import tape.distributed
    cf = tape.compile(loss, theta0, data)
    values, grads = tape.distributed.map_value_and_grad(cf, Theta, data, client=client)

is ``cf.value_and_grad_batch(Theta, data)`` with the leading axis of ``Theta`` split into chunks
that Dask workers replay: the CompiledTape and the shared arguments are scattered to every
worker once per call (a CompiledTape pickles as its function and the arguments of its latest
recording, and records again on the worker, so ``f`` must be picklable: module-level, or defined
in ``__main__``, which Dask pickles by value; a tape from ``tape.load(path)`` without its function
pickles as its arrays and records nothing), each worker loads the jitted interpreter once
(``jit.warmup``), and the results come back in order, stacked as ``value_and_grad_batch`` stacks
them. Each row is computed by the same code as ``value_and_grad_batch``, so the results are equal
bitwise.

Dask is optional (``pip install "tapejit[dask]"``): ``import tape`` never imports it, and this
module imports it only when a client is passed. Without a client the chunks run in this process.
"""
from __future__ import annotations

import math
import threading
import time
import uuid
import warnings

import numpy as np

from ..replay.compiled import CompiledTape

__all__ = ["map_value_and_grad", "warmup"]

_BAR_STEPS = 100  # chunks of a local run (only the progress bar sees them)
_CHUNKS_PER_THREAD = 8  # chunks per worker thread on a cluster: load balance, cheap retries


def map_value_and_grad(cf, X, *rest, client=None, chunk_size=None, progress=True):
    """Values and gradients of the CompiledTape `cf` for every row of `X` (its first argnum),
    as ``cf.value_and_grad_batch(X, *rest)`` returns them: ``(values, grads)``, stacked in the
    order of X (``grads`` a tuple of stacked arrays when `argnums` is a tuple).

    client: a ``dask.distributed.Client`` (synchronous). The CompiledTape and `rest` are
        scattered to every worker once (``broadcast=True``), every worker is warmed
        (``jit.warmup``, from Numba's on-disk cache: ``NUMBA_CACHE_DIR`` reaches the processes
        of a ``LocalCluster`` through the environment), and each chunk of X is one task. The
        chunk's rows travel inside the task, so when a worker dies mid-map the scheduler reruns
        its tasks elsewhere and nothing is lost, as long as some worker still holds the
        scattered copy (a worker the nanny restarts fetches it from there; a task whose workers
        die more than ``distributed.scheduler.allowed-failures`` times fails with KilledWorker).
        Run workers as processes with one thread each
        (``LocalCluster(n_workers=k, threads_per_worker=1)``): the tasks of one worker share its
        copy of `cf` and take turns on it, so threads add no speed.
        None (default): the chunks run in this process on `cf` itself, with the same results.
    chunk_size: rows per task; default about 8 chunks per worker thread (locally: 100 chunks
        for the progress bar, one without it).
    progress: a ``tqdm.auto`` bar over the rows done (chunk by chunk, as they complete): a
        widget in Jupyter with ipywidgets, text otherwise; without tqdm, no bar.

    Equality: every row is computed by the same replay as in ``value_and_grad_batch`` (a call
    that records a new variant replays it before returning), so the results are equal bitwise.
    """
    if not isinstance(cf, CompiledTape):
        raise TypeError(f"map_value_and_grad needs a CompiledTape (tape.compile(f, ...)), "
                        f"not {type(cf).__name__}")
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 0:
        raise ValueError("map_value_and_grad: X needs a leading axis (one row per parameter set)")
    n = len(X)
    if chunk_size is not None and (int(chunk_size) != chunk_size or chunk_size < 1):
        raise ValueError(f"chunk_size must be a positive integer, not {chunk_size!r}")
    if n == 0:
        return cf.value_and_grad_batch(X, *rest)
    if client is None:
        size = int(chunk_size) if chunk_size else math.ceil(n / _BAR_STEPS) if progress else n
        bounds = _bounds(n, size)
        parts = []
        with _bar(n, progress) as bar:
            for lo, hi in bounds:
                parts.append(cf.value_and_grad_batch(X[lo:hi], *rest))
                bar.update(hi - lo)
        return _stack(parts, cf)
    return _map_on_cluster(cf, X, rest, client, chunk_size, progress)


def warmup(client):
    """Load the jitted interpreter in every worker of `client` (``jit.warmup``, from Numba's
    on-disk cache when it is warm) and return ``{worker address: seconds}``; 0.0 for a worker
    that was already warm. ``map_value_and_grad`` calls it; a worker that joins later (one the
    nanny restarted) warms itself before its first chunk."""
    return client.run(_warm_async)


# -- cluster ----------------------------------------------------------------------------------
def _map_on_cluster(cf, X, rest, client, chunk_size, progress):
    from distributed import as_completed

    n = len(X)
    if chunk_size:
        size = int(chunk_size)
    else:
        threads = sum(client.nthreads().values()) or 1
        size = max(1, math.ceil(n / (_CHUNKS_PER_THREAD * threads)))
    bounds = _bounds(n, size)
    warmup(client)
    shared = client.scatter(_Shared(cf, rest), broadcast=True, hash=False)
    tag = uuid.uuid4().hex
    futures = [client.submit(_run_chunk, shared, X[lo:hi], key=f"tapejit-map-{tag}-{i}")
               for i, (lo, hi) in enumerate(bounds)]
    index = {f.key: i for i, f in enumerate(futures)}
    parts = [None] * len(futures)
    try:
        with _bar(n, progress) as bar:
            for fut in as_completed(futures):
                i = index[fut.key]
                parts[i] = fut.result()  # re-raises a chunk's error, with its traceback
                bar.update(bounds[i][1] - bounds[i][0])
    except BaseException:
        client.cancel(futures)
        raise
    finally:
        del futures, shared
    return _stack(parts, cf)


class _Shared:
    """What every chunk needs: the CompiledTape and the shared arguments, scattered once. On a
    worker, its tasks share one copy and take turns (a CompiledTape replays in place)."""

    def __init__(self, cf, rest):
        self.cf = cf
        self.rest = tuple(rest)
        self.lock = threading.Lock()

    def __reduce__(self):
        return (_Shared, (self.cf, self.rest))


def _run_chunk(shared, rows):
    _warm()
    with shared.lock:
        return shared.cf.value_and_grad_batch(rows, *shared.rest)


_warm_lock = threading.Lock()
_warmed = False


def _warm():
    """jit.warmup once per process; the seconds it took (0.0 when already done)."""
    global _warmed
    with _warm_lock:
        if _warmed:
            return 0.0
        import jit

        t0 = time.perf_counter()
        jit.warmup()
        _warmed = True
        return time.perf_counter() - t0


async def _warm_async():
    # client.run awaits coroutine functions on the worker's event loop: warm in a thread so
    # that a cold cache (a compile of ~20 s) does not stall the worker's heartbeats
    import asyncio

    return await asyncio.get_running_loop().run_in_executor(None, _warm)


# -- both -------------------------------------------------------------------------------------
def _bounds(n, size):
    return [(lo, min(lo + size, n)) for lo in range(0, n, size)]


def _stack(parts, cf):
    values = np.concatenate([p[0] for p in parts])
    if isinstance(cf.argnums, int):
        return values, np.concatenate([p[1] for p in parts])
    return values, tuple(np.concatenate([p[1][j] for p in parts]) for j in range(len(cf.nums)))


class _NoBar:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, k):
        pass


def _bar(total, progress):
    if not progress:
        return _NoBar()
    try:
        with warnings.catch_warnings():  # in Jupyter without ipywidgets: the text bar, quietly
            warnings.simplefilter("ignore")
            from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, unit="grad", desc="value_and_grad", smoothing=0.1)
