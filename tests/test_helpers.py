"""tapejit's jitted helpers become Numba dispatchers at a process's first compile
(jit/_helpers.py): a warm process that only loads cached entry points never makes them; a compile
finds dispatchers in the modules' globals (also where a stand-in was put back); Python calls to
a helper run its dispatcher."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1",
                                reason="helpers are plain functions without the JIT")

_WARM = """
import numpy as np, tape
import jit
from jit import _helpers, _interp

tape.grad(lambda p: p[0] * p[1] + np.sin(p[0]))(np.array([1.0, 2.0]))  # loads, or compiles
print(type(_interp._sign).__name__, type(_interp.need_pass).__name__)
"""


def _run(code, tmp_path):
    script = tmp_path / "script.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=900, cwd=tmp_path)


def test_a_warm_process_makes_no_helper_dispatcher(tmp_path):
    first = _run(_WARM, tmp_path)  # (fills the cache if it is not warm: that run compiles)
    assert first.returncode == 0, first.stderr
    r = _run(_WARM, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["Helper", "CPUDispatcher"]


def test_a_compile_puts_dispatchers_in_the_modules():
    from jit import _helpers, _interp, _tangent

    @numba.njit
    def anything(x):
        return x + 1

    assert anything(1) == 2  # a compile
    for module in (_interp, _tangent):
        stand_ins = [k for k, v in vars(module).items() if isinstance(v, _helpers.Helper)]
        assert stand_ins == []
    assert isinstance(_interp._sign, numba.core.registry.CPUDispatcher)


def test_a_stand_in_put_back_is_replaced_at_the_next_compile(monkeypatch):
    from jit import _helpers, _interp

    stand_in = next(s for s in _helpers._STAND_INS if s.py_func.__name__ == "_sign"
                    and s.py_func.__module__ == "jit._interp")
    monkeypatch.setattr(_interp, "_sign", stand_in)  # (as a test's monkeypatch undone)
    assert _interp._sign is stand_in

    @numba.njit
    def other(x):
        return x * 2

    assert other(2) == 4  # a compile
    assert _interp._sign is stand_in.made


def test_calling_a_helper_from_python_runs_its_dispatcher():
    from jit import _helpers

    def twice(x):
        return 2.0 * x

    stand_in = _helpers.Helper(twice, {"error_model": "numpy"})
    assert stand_in(np.float64(1.5)) == 3.0
    assert isinstance(stand_in.made, numba.core.registry.CPUDispatcher)
    assert stand_in.py_func is twice
    assert stand_in.signatures == stand_in.made.signatures  # (a dispatcher's attribute)
