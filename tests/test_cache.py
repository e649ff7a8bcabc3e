"""One cache for everyone (jit/_cache.py): tapejit's kernels go to NUMBA_CACHE_DIR when it is set,
else to one per-user directory that `make`, `python -m jit.warmup` and a plain script share; the
user's own Numba functions keep Numba's default; a first compile says so on stderr, once, and a
load from the cache is silent."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jit import _cache

ROOT = Path(__file__).resolve().parents[1]
# the probe reads compiled functions' cache paths, which NUMBA_DISABLE_JIT=1 leaves out
needs_the_jit = pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"),
                                   reason="no Numba cache without the JIT")

_PROBE = """
import numba, jit
from jit import _interp
from jit._cache import cache_dir
@numba.njit(cache=True)
def users_own(x):
    return x + 1
print(cache_dir())
print(_interp.need_pass._cache._cache_path)
print(users_own._cache._cache_path)
print(numba.config.CACHE_DIR)
"""


def _run(code, env, where):
    base = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    base.update(env, PYTHONPATH=str(ROOT))
    script = where / "script.py"  # a file: Numba caches functions of files only
    script.write_text(code)
    return subprocess.run([sys.executable, str(script)], env=base, capture_output=True,
                          text=True, timeout=120, cwd=where)


@needs_the_jit
def test_the_default_is_one_per_user_directory(tmp_path):
    r = _run(_PROBE, {"XDG_CACHE_HOME": str(tmp_path)}, tmp_path)
    assert r.returncode == 0, r.stderr
    chosen, ours, users, config = r.stdout.split("\n")[:4]
    assert chosen == str(tmp_path / "tapejit" / "numba")
    assert ours.startswith(chosen)
    assert not users.startswith(chosen)  # the user's function: Numba's own default
    assert config == ""  # and Numba's setting is left as it was
    r2 = _run(_PROBE, {"HOME": str(tmp_path / "home")}, tmp_path)
    assert r2.stdout.split("\n")[0] == str(tmp_path / "home" / ".cache" / "tapejit" / "numba")


@needs_the_jit
def test_numba_cache_dir_wins(tmp_path):
    r = _run(_PROBE, {"NUMBA_CACHE_DIR": str(tmp_path / "mine"), "XDG_CACHE_HOME": str(tmp_path)},
             tmp_path)
    assert r.returncode == 0, r.stderr
    chosen, ours, users, _ = r.stdout.split("\n")[:4]
    assert chosen == str(tmp_path / "mine") and ours.startswith(chosen) and users.startswith(chosen)


def test_a_slow_first_load_prints_one_line(monkeypatch, capsys):
    monkeypatch.setattr(_cache, "NOTICE_AFTER", 0.05)
    monkeypatch.setattr(_cache, "_announced", set())
    with _cache.compile_notice("sweep"):
        time.sleep(0.3)
    with _cache.compile_notice("run_pass"):  # the same work, a compiled replay: said already
        time.sleep(0.3)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "compiling" in err and "python -m jit.warmup" in err
    assert "compiling compiled replay's Numba kernels" in err and "(1-2 minutes" in err
    with _cache.compile_notice("special_value"):  # other work: said
        time.sleep(0.3)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "scipy.special's" in err and "(5-10 seconds" in err


def test_a_first_eager_gradient_says_one_line_and_a_replay_one_more(monkeypatch, capsys):
    """The eager gradient's forward entries, passes and tiers are one kind of work, one line,
    with the estimate for all of them; a compiled replay's sweep after it speaks again."""
    monkeypatch.setattr(_cache, "NOTICE_AFTER", 0.05)
    monkeypatch.setattr(_cache, "_announced", set())
    for name in ("elementwise_unary", "whole_prepare", "scalar_sweep", "array_sweep",
                 "elementwise_power", "common_sweep", "eager_sweep", "need_pass"):
        with _cache.compile_notice(name):
            time.sleep(0.2)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [lines[0]] and "compiling the eager gradient's Numba kernels" in lines[0]
    assert f"({_cache.EAGER[1]} on 2 cores" in lines[0]
    for name in ("sweep", "local_pass", "elementwise_binary"):
        with _cache.compile_notice(name):
            time.sleep(0.2)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "compiled replay's" in lines[0]


def test_every_entry_point_belongs_to_one_kind_of_work():
    """Each entry point ``python -m jit.warmup`` loads is named by the notice's table (or is
    an eager forward entry), so none is announced as work of its own."""
    import jit

    names = [n for _, n in jit.WARMUP] + list(jit.INCOMPLETE)
    for name in names:
        assert name.startswith("elementwise") or name in _cache._WORK_OF, name
    assert len(_cache._WORK_OF) == sum(len(w[2]) for w in _cache.WORK)  # (no name twice)


def test_a_fast_load_is_silent(monkeypatch, capsys):
    monkeypatch.setattr(_cache, "_announced", set())
    with _cache.compile_notice("sweep"):
        pass
    time.sleep(0.05)
    assert capsys.readouterr().err == ""


@needs_the_jit
def test_a_warm_process_loads_silently(tmp_path):
    # (absolute: the probe runs in tmp_path, where a relative NUMBA_CACHE_DIR would be empty)
    env = {"NUMBA_CACHE_DIR": os.path.abspath(os.environ["NUMBA_CACHE_DIR"])} \
        if "NUMBA_CACHE_DIR" in os.environ else {"HOME": os.path.expanduser("~")}
    r = _run("import numpy as np, tape\n"
             "print(tape.grad(lambda x: np.sum(np.sin(x) * x))(np.ones(3)))\n"
             "print(tape.jvp(lambda x: np.exp(x), (np.ones(2),), (np.ones(2),))[1])", env, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
