"""The README for users: its example runs as printed, its links point at files that exist, and it
stays short (the detail lives in docs/)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_the_example_runs_and_prints_what_it_says():
    block = next(b for b in re.findall(r"```python\n(.*?)```", README, re.S) if "def loss" in b)
    ns = {}
    exec(compile(block, "README.md", "exec"), ns)
    value, g = ns["value"], ns["g"]  # the replayed call at w = 1
    want_value, want_g = ns["tape"].value_and_grad(ns["loss"])(np.ones(3), ns["X"], ns["y"])
    assert value == want_value and np.array_equal(g, want_g)
    printed = re.search(r"print\(value, g\)\s+# ([\d.]+)\.\.\. \[([-\d. ]+)\]", block)
    v0, g0 = ns["tape"].value_and_grad(ns["loss"])(np.zeros(3), ns["X"], ns["y"])
    assert str(v0).startswith(printed.group(1))
    np.testing.assert_allclose(g0, [float(s) for s in printed.group(2).split()], atol=5e-5)


def test_links_point_at_files_that_exist():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if "://" not in target:
            assert (ROOT / target).exists(), target


def test_it_stays_short():
    assert len(README) <= 15_000, "move detail to docs/ (api.md, design.md, performance.md)"
