"""The warm-up on two cores (jit/_warm.py): the worker process compiles its share into the cache
this process then loads from; entries already cached start no worker; a failed worker leaves the
compile to this process. Run on small entries in fresh caches (a whole cold warm-up takes
minutes)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"),
                                reason="nothing is compiled or cached without the JIT")

_SPLIT = """
import sys
import jit
from jit import _cache, _warm, _interp, _plan
_warm.WORKER_SHARE = {"need_pass", "mark_swept"}
if sys.argv[1] == "failing":  # a worker that dies at once
    def dying(names):
        worker = __import__("subprocess").Popen([sys.executable, "-c", "raise SystemExit(3)"])
        worker.err = __import__("tempfile").TemporaryFile("w+")
        return worker
    _warm._start_worker = dying
started, order = [], []
real = _warm._start_worker


def start(names):
    started.append(sorted(names))
    worker = real(names)
    wait = worker.wait
    worker.wait = lambda: order.append("wait") or wait()
    return worker


_warm._start_worker = start
real_load = _cache.load
_cache.load = lambda module, name, notice=True: order.append(name) or real_load(module, name,
                                                                                notice)
_warm.run([e for e in jit.WARMUP if e[1] in ("data_pointers", "need_pass", "mark_swept")],
          workers=2)
stats = lambda fn: (sum(fn.stats.cache_hits.values()), sum(fn.stats.cache_misses.values()))
print(started, order)
print(stats(_interp.data_pointers), stats(_interp.need_pass), stats(_plan.mark_swept))
"""


def _run(arg, cache):
    env = {k: v for k, v in os.environ.items() if k != "XDG_CACHE_HOME"}
    env.update(NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", _SPLIT, arg], env=env, capture_output=True,
                          text=True, timeout=600, cwd=ROOT)


def test_the_worker_compiles_its_share_and_this_process_loads_it(tmp_path):
    r = _run("working", tmp_path)
    assert r.returncode == 0, r.stderr
    started, counts = r.stdout.strip().split("\n")
    # data_pointers compiled here while the worker runs, then the worker's two loaded
    assert started == ("[['mark_swept', 'need_pass']] "
                       "['data_pointers', 'wait', 'need_pass', 'mark_swept']")
    assert counts == "(0, 1) (1, 0) (1, 0)"  # data_pointers a miss (compiled), the others hits
    again = _run("working", tmp_path)  # all cached: no worker, every entry a hit
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().split("\n") == [
        "[] ['data_pointers', 'need_pass', 'mark_swept']", "(1, 0) (1, 0) (1, 0)"]


def test_a_failed_worker_leaves_the_compile_here(tmp_path):
    r = _run("failing", tmp_path)
    assert r.returncode == 0, r.stderr
    started, counts = r.stdout.strip().split("\n")
    assert started.startswith("[['mark_swept', 'need_pass']]")
    assert counts == "(0, 1) (0, 1) (0, 1)"  # all three compiled here


def test_the_split_names_real_entries():
    import jit
    from jit import _warm

    names = {n for _, n in jit.WARMUP}
    assert _warm.WORKER_SHARE <= names
    assert len(names) == len(jit.WARMUP)  # each entry once
