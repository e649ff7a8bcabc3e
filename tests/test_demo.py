"""The README's `make demo`: examples/fit_ode.py fits a Lotka-Volterra model and exits 0."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "fit_ode.py"


@pytest.mark.slow
def test_fit_ode_recovers_parameters_and_writes_plot(tmp_path):
    pytest.importorskip("scipy")  # the demo's ODE solver (the ``demo`` extra)
    pytest.importorskip("matplotlib")
    env = dict(os.environ, MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, str(SCRIPT)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    report = f"exit code {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    assert proc.returncode == 0, report
    assert "gradient check" in proc.stdout, report
    png = tmp_path / "demo_fit.png"
    assert png.is_file(), report
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
