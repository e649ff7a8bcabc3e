"""tape.distributed.map_value_and_grad: compiled gradients over chunks of parameter sets, locally
or on a Dask LocalCluster of worker processes; equal to cf.value_and_grad_batch bitwise, and
nothing lost when a worker process is killed mid-map."""
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tape
import tape.distributed as td

# W1 (lorenz). Worker processes are spawned with this process's sys.path, so they import
# `workloads` (and this module, for the functions below) like the parent does.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "asv_bench" / "benchmarks"))
from workloads import lorenz_inputs, lorenz_loss  # noqa: E402

P0 = lorenz_inputs()[0]


def _params(n, seed=0):
    return P0 * (1.0 + 0.05 * np.random.default_rng(seed).normal(size=(n, 3)))


def _linreg_loss(w, b, A, y):  # gradients with respect to w and b; A, y shared
    r = A @ w + b - y
    return np.mean(r * r) + 0.1 * np.sum(w * w)


def _shifted_loss(c, x):  # the batched argument is argument 1
    return np.sum(np.tanh(x * c[0]) + c[1] * x ** 2)


def _branchy_loss(x):  # a guard: rows take either branch, each a variant of the recording
    if np.sum(x) > 0.0:
        return np.sum(np.sin(x) * x)
    return np.sum(np.exp(x))


def _picky_loss(x):
    if np.sum(x) > 100.0:
        raise ValueError("row out of range")
    return np.sum(x * x)


def _linreg_case(n, seed=1):
    rng = np.random.default_rng(seed)
    A, y = rng.normal(size=(40, 4)), rng.normal(size=40)
    cf = tape.compile(_linreg_loss, np.zeros(4), np.zeros(1), A, y, argnums=(0, 1))
    return cf, rng.normal(size=(n, 4)), (np.full(1, 0.3), A, y)


def _assert_same(a, b):
    """Bitwise: values and gradients (tuples of gradients too), shapes and dtypes."""
    (va, ga), (vb, gb) = a, b
    assert va.dtype == vb.dtype == np.float64 and np.array_equal(va, vb)
    ga, gb = (ga, gb) if isinstance(ga, tuple) else ((ga,), (gb,))
    assert len(ga) == len(gb)
    for x, y in zip(ga, gb):
        assert x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y)


# -- optional dependency ----------------------------------------------------------------------
def test_import_tape_does_not_import_dask():
    code = ("import sys, tape, tape.distributed\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed'))\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# -- local (client=None) ----------------------------------------------------------------------
@pytest.mark.parametrize("chunk_size", [None, 1, 7, 50, 1000])
def test_local_equals_batch(chunk_size):
    cf = tape.compile(lorenz_loss, P0)
    X = _params(50)
    _assert_same(td.map_value_and_grad(cf, X, chunk_size=chunk_size, progress=False),
                 cf.value_and_grad_batch(X))


def test_local_shared_arguments_and_argnums():
    cf, W, rest = _linreg_case(23)
    _assert_same(td.map_value_and_grad(cf, W, *rest, chunk_size=5, progress=False),
                 cf.value_and_grad_batch(W, *rest))
    c = np.array([0.7, -0.2])
    cs = tape.compile(_shifted_loss, c, np.linspace(-1.0, 1.0, 5), argnums=1)
    Y = np.random.default_rng(2).normal(size=(9, 5))
    # argnums=1: the rows of Y go in as argument 1, after the shared c
    _assert_same(td.map_value_and_grad(cs, Y, c, chunk_size=4, progress=False),
                 cs.value_and_grad_batch(Y, c))


@pytest.mark.parametrize("n", [0, 1])
def test_local_tiny(n):
    cf = tape.compile(lorenz_loss, P0)
    X = _params(n)
    out = td.map_value_and_grad(cf, X, chunk_size=3, progress=False)
    _assert_same(out, cf.value_and_grad_batch(X))
    assert out[0].shape == (n,) and out[1].shape == (n, 3)


def test_arguments_checked():
    cf = tape.compile(lorenz_loss, P0)
    with pytest.raises(TypeError, match="CompiledTape"):
        td.map_value_and_grad(lorenz_loss, _params(3))
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match="chunk_size"):
            td.map_value_and_grad(cf, _params(3), chunk_size=bad)
    with pytest.raises(ValueError, match="leading axis"):
        td.map_value_and_grad(cf, 1.0)


def test_progress_bar(capsys):
    pytest.importorskip("tqdm")
    cf = tape.compile(lorenz_loss, P0)
    td.map_value_and_grad(cf, _params(12), chunk_size=5)
    err = capsys.readouterr().err
    assert "value_and_grad" in err and "12/12" in err
    td.map_value_and_grad(cf, _params(12), chunk_size=5, progress=False)
    assert capsys.readouterr().err == ""


# -- LocalCluster -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    lc = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None)
    client = distributed.Client(lc)
    try:
        yield lc, client
    finally:
        client.close()
        lc.close()


def _cache_dir():
    return os.environ.get("NUMBA_CACHE_DIR")


@pytest.mark.slow
def test_workers_are_processes_sharing_the_numba_cache(cluster):
    _, client = cluster
    pids = client.run(os.getpid)
    assert len(pids) == 2 and os.getpid() not in pids.values()
    assert set(client.run(_cache_dir).values()) == {os.environ.get("NUMBA_CACHE_DIR")}
    assert all(s < 60.0 for s in td.warmup(client).values())
    assert set(td.warmup(client).values()) == {0.0}  # once per process


@pytest.mark.slow
def test_cluster_equals_local_bitwise(cluster):
    _, client = cluster
    cf = tape.compile(lorenz_loss, P0)
    X = _params(1000)
    local = cf.value_and_grad_batch(X)
    _assert_same(td.map_value_and_grad(cf, X, client=client, progress=False), local)
    _assert_same(td.map_value_and_grad(cf, X, client=client, chunk_size=37, progress=True),
                 local)
    _assert_same(td.map_value_and_grad(cf, X, progress=False), local)  # client=None


@pytest.mark.slow
def test_cluster_shared_arguments_and_edge_cases(cluster):
    _, client = cluster
    cf, W, rest = _linreg_case(23)
    local = cf.value_and_grad_batch(W, *rest)
    for chunk_size in (None, 1, 5, 23, 100):  # one row a task, N not divisible, one chunk
        _assert_same(td.map_value_and_grad(cf, W, *rest, client=client,
                                           chunk_size=chunk_size, progress=False), local)
    c = np.array([0.7, -0.2])
    cs = tape.compile(_shifted_loss, c, np.linspace(-1.0, 1.0, 5), argnums=1)
    Y = np.random.default_rng(2).normal(size=(9, 5))
    _assert_same(td.map_value_and_grad(cs, Y, c, client=client, chunk_size=4, progress=False),
                 cs.value_and_grad_batch(Y, c))
    lorenz = tape.compile(lorenz_loss, P0)
    for n in (0, 1):
        X = _params(n)
        _assert_same(td.map_value_and_grad(lorenz, X, client=client, progress=False),
                     lorenz.value_and_grad_batch(X))


@pytest.mark.slow
def test_cluster_guards_and_errors(cluster):
    _, client = cluster
    X = np.random.default_rng(4).normal(size=(60, 3))
    cf = tape.compile(_branchy_loss, X[0])
    values, grads = td.map_value_and_grad(cf, X, client=client, chunk_size=7, progress=False)
    v0, g0 = cf.value_and_grad_batch(X)
    # each worker records the other branch when it first meets it; a call that records
    # replays before returning, so the results are still equal bitwise
    _assert_same((values, grads), (v0, g0))

    picky = tape.compile(_picky_loss, np.zeros(3))
    X = np.zeros((30, 3))
    X[17] = 50.0
    with pytest.raises(ValueError, match="row out of range"):
        td.map_value_and_grad(picky, X, client=client, chunk_size=4, progress=False)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(tape, "load"), reason="needs cf.save / tape.load")
def test_cluster_loaded_tape(cluster, tmp_path):
    _, client = cluster
    cf = tape.compile(lorenz_loss, P0)
    cf.save(tmp_path / "w1.npz")
    loaded = tape.load(tmp_path / "w1.npz")  # no function: pickles as arrays, nothing records
    X = _params(300)
    _assert_same(td.map_value_and_grad(loaded, X, client=client, progress=False),
                 cf.value_and_grad_batch(X))


def _map_state(dask_scheduler, prefix):
    """On the scheduler: how many tasks of the map are done, and which are processing where."""
    done, processing = 0, {}
    for key, ts in dask_scheduler.tasks.items():
        if isinstance(key, str) and key.startswith(prefix):
            if ts.state == "memory":
                done += 1
            elif ts.state == "processing":
                processing.setdefault(ts.processing_on.address, []).append(key)
    return done, processing


@pytest.mark.slow
def test_killed_worker_loses_nothing(cluster):
    _, client = cluster
    client.wait_for_workers(2, timeout=60)
    cf = tape.compile(lorenz_loss, P0)
    X = _params(6000, seed=5)
    local = cf.value_and_grad_batch(X)
    chunk_size = 100  # 60 chunks, a few seconds on two workers
    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    killed = {}

    def killer():  # once a few chunks are done and the victim is busy, SIGKILL its process
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done, processing = client.run_on_scheduler(_map_state, prefix="tapejit-map-")
            if done >= 4 and processing.get(victim):
                os.kill(pids[victim], signal.SIGKILL)
                killed.update(done=done, lost=processing[victim])
                return
            time.sleep(0.02)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        out = td.map_value_and_grad(cf, X, client=client, chunk_size=chunk_size, progress=False)
    finally:
        thread.join()
    assert killed, "the map ended before a worker could be killed"
    assert killed["lost"] and killed["done"] < len(X) // chunk_size
    _assert_same(out, local)
    # the nanny restarts the killed worker process; the new one joins the cluster
    client.wait_for_workers(2, timeout=60)
    assert pids[victim] not in client.run(os.getpid).values()
