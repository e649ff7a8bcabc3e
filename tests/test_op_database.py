"""The op database (tests/_op_database.py) against the table, its source of truth.

Every row of ``jit.table.TABLE`` is declared (a domain and samples here, or a file that tests
it), the families come from ``jit.table.FAMILIES``, an elementwise row's domain has the table's
arity, every mode is claimed and has a check, the samples reach the edge shapes, and adding an
escape op by docs/design.md's steps gives an op every per-mode check accepts
(tests/_add_an_escape.py).
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from jit.table import FAMILIES, TABLE

from _mode_checks import CHECKS
from _op_database import (BY_NAME, ELEMENTWISE, MODES, OPS, TESTED_ELSEWHERE, claiming,
                          families, ids)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = [p.name for p in TABLE if p.family != "input"]


@pytest.mark.parametrize("row", ROWS)
def test_row_is_declared(row):
    if row in TESTED_ELSEWHERE:
        path, word = TESTED_ELSEWHERE[row]
        with open(os.path.join(ROOT, path)) as fh:
            assert word in fh.read(), f"{path} does not test row {row!r} ({word!r})"
        return
    assert row in BY_NAME, (
        f"row {row!r} of jit/table.py has no entry in tests/_op_database.py: declare its "
        "domain in DOMAINS (a new family also needs its samples in _FAMILY_SAMPLES), or name "
        "the file that tests it in TESTED_ELSEWHERE")


def test_families_come_from_the_table():
    covered = families()
    assert set(covered) == set(FAMILIES)
    for family in FAMILIES:
        rows = [p.name for p in TABLE if p.family == family]
        if family == "input":  # values only: nothing to differentiate
            assert not covered[family]
            continue
        assert covered[family] or all(r in TESTED_ELSEWHERE for r in rows), family


def test_elementwise_domains_have_the_tables_arity():
    for op in ELEMENTWISE:
        assert len(op.domain) == op.arity == len(op.prim.d), op


def test_every_mode_is_claimed_and_checked():
    assert set(CHECKS) == set(MODES)
    for mode in MODES:
        assert claiming(mode), mode
    for op in OPS:
        assert op.modes <= set(MODES), op


# one op a family: the samples are the family's
SHAPED = [next(op for op in OPS if op.family == f) for f in ("unary", "binary", "reduce", "scan",
                                                              "select")]


@pytest.mark.parametrize("op", SHAPED, ids=ids(SHAPED))
def test_samples_reach_the_edge_shapes(op):
    """0-d, size 1 and empty operands are among what hypothesis draws for each op."""
    seen = set()

    @settings(max_examples=200, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(s=op.samples(op))
    def collect(s):
        for shape in s.shapes:
            n = int(np.prod(shape))
            seen.add("0-d" if shape == () else "empty" if n == 0 else "size 1" if n == 1
                     else "larger")

    collect()
    assert seen >= {"0-d", "size 1", "empty", "larger"}, seen


def test_adding_an_escape_op_in_every_mode():
    """docs/design.md's steps for a new escape, done in a process of its own (the row is
    appended to the table before anything reads it), then every mode through the database."""
    env = dict(os.environ, NUMBA_DISABLE_JIT="1",
               PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]))
    run = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "_add_an_escape.py")],
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def test_undeclared_rows_are_named():
    """The check test_row_is_declared runs: a row the database does not know is listed."""
    from jit.table import Prim

    from _op_database import undeclared

    assert undeclared() == []
    assert undeclared(TABLE + (Prim("new_op", "unary"),)) == ["new_op"]
