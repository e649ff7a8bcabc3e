"""A warm process start (jit/_cache.py): a new process whose kernels are in the cache loads them
without importing SciPy (Numba's BLAS check would import ``scipy.linalg``, ~0.3 s), and Numba's
answer to that check is still the real one as soon as anything is compiled."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_LORENZ = """
import sys
import numpy as np, tape

def lorenz(p):
    sigma, rho, beta = p[0], p[1], p[2]
    x = y = z = 1.0
    for _ in range(1000):
        dx = sigma * (y - x)
        dy = x * (rho - z) - y
        dz = x * y - beta * z
        x = x + 0.001 * dx
        y = y + 0.001 * dy
        z = z + 0.001 * dz
    return x * x + y * y + z * z

g = tape.grad(lorenz)(np.array([10.0, 28.0, 8.0 / 3.0]))
print(repr(float(np.linalg.norm(g))), repr(float(g.sum())))
print("scipy.linalg" in sys.modules)
"""

_COMPILE_AFTER_LOAD = """
import sys
import numba, numpy as np
import jit
jit.need_pass  # a load (or compile) of one of tapejit's kernels first
from numba.np import arraymath

@numba.njit
def convolved(a, b):  # an inner product Numba types by its BLAS check
    return np.convolve(a, b).sum()

print(convolved(np.arange(3.0), np.ones(3)))
print(arraymath._HAVE_BLAS, "scipy.linalg" in sys.modules)
"""


def _run(code, where, env=None):
    script = where / "script.py"
    script.write_text(code)
    full = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, str(script)], env=full, capture_output=True,
                          text=True, timeout=900, cwd=where)


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="nothing is compiled")
def test_a_warm_w1_gradient_does_not_import_scipy(tmp_path):
    first = _run(_LORENZ, tmp_path)  # fills the cache if it is not warm yet
    assert first.returncode == 0, first.stderr
    r = _run(_LORENZ, tmp_path)
    assert r.returncode == 0, r.stderr
    norm, total, scipy_imported = r.stdout.split()
    assert float(norm) == pytest.approx(3.353406921145e+02, rel=1e-10)  # docs' W1 values
    assert float(total) == pytest.approx(3.523801831415e+02, rel=1e-10)
    assert scipy_imported == "False"
    assert r.stderr == ""  # and silently: a load, no compile


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="nothing is compiled")
def test_a_later_compile_runs_numbas_real_blas_check(tmp_path):
    pytest.importorskip("scipy")
    r = _run(_COMPILE_AFTER_LOAD, tmp_path)
    assert r.returncode == 0, r.stderr
    value, line = r.stdout.split("\n")[:2]
    assert float(value) == 9.0
    assert line == "True True"  # BLAS found, by importing scipy.linalg as Numba does


_NO_SCIPY = """
import sys
class _Hide:  # SciPy absent, as on an install without it
    def find_spec(self, name, path=None, target=None):
        if name == "scipy" or name.startswith("scipy."):
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, _Hide())
"""


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="nothing is compiled")
def test_without_scipy_numba_finds_no_blas(tmp_path):
    r = _run(_NO_SCIPY + _COMPILE_AFTER_LOAD, tmp_path)
    assert r.returncode == 0, r.stderr
    value, line = r.stdout.split("\n")[:2]
    assert float(value) == 9.0  # Numba's own loop
    assert line == "False False"
