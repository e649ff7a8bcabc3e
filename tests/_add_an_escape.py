"""Adding an escape op, following docs/design.md's "To add an escape", in a process of its own.

Run by tests/test_op_database.py as ``python tests/_add_an_escape.py`` with
``NUMBA_DISABLE_JIT=1`` (the kernels run as Python, so the regenerated globals below take effect
without a compile); prints ``ok`` when every step held.

1. The row: ``Prim(NAME, "escape")`` appended to ``jit.table.TABLE`` (here to the module, before
   anything imports it). Regenerating the interpreters changes nothing but the table hash and
   the per-opcode arrays (family, operands read, ...), which gain the new rows' entries:
   checked by rendering them, and the rendered globals are then the ones this process runs
   with.
2. The rules, written once against ``xp``: value, vjp, jvp, outputs, work, registered.
3. The user's function: ``escapes.record(NAME, a)``.
4. Its entry in the op database (a domain; the square-matrix samples of the LU escapes), then
   every mode it claims through tests/_mode_checks.py, as the per-mode suites run them. A second
   row with a wrong reverse rule must fail there: the checks can fail.
"""
from __future__ import annotations

import importlib.util
import math
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "matrix_square"  # Y = A @ A: dY = dA A + A dA
WRONG = "matrix_square_wrong"  # the same with a transposed reverse rule


def add_the_rows():
    spec = importlib.util.spec_from_file_location("jit.table",
                                                  os.path.join(ROOT, "jit", "table.py"))
    table = importlib.util.module_from_spec(spec)
    sys.modules["jit.table"] = table
    spec.loader.exec_module(table)
    for name in (NAME, WRONG):
        table.TABLE = table.TABLE + (table.Prim(name, "escape"),)
        table.OPCODE[name] = len(table.TABLE) - 1

    import numba

    assert numba.config.DISABLE_JIT, "run with NUMBA_DISABLE_JIT=1"
    from jit import _generate, _generate_tangent, _interp, _tangent

    for generator, module in ((_generate, _interp), (_generate_tangent, _tangent)):
        with open(generator.OUT) as fh:
            old = fh.read().splitlines()
        new = generator.render().splitlines()
        assert len(old) == len(new), generator.OUT
        changed = [(line, was) for line, was in zip(new, old) if line != was]
        names = set()
        for line, was in changed:
            if line.startswith("#"):  # the header names the table hash
                continue
            name, _, expr = line.partition(" = ")
            names.add(name)
            if name != "TABLE_HASH":  # a per-opcode array: the new rows' entries appended
                before = eval(was.partition(" = ")[2], module.__dict__)  # noqa: S307
                after = eval(expr, module.__dict__)  # noqa: S307
                assert len(after) == len(before) + 2, name
                assert np.array_equal(after[:len(before)], before), name
            exec(line, module.__dict__)  # noqa: S102  (the regenerated module's globals)
        assert "TABLE_HASH" in names and "_FAMILY" in names, (generator.OUT, names)


def register_the_rules():
    from tape.escapes import Escape, mT, register, square

    def value(a, b=None):
        return a @ a

    def vjp(xp, g, y, a, b, need_a, need_b):
        at = mT(xp, a)
        return g @ at + at @ g, None

    def wrong_vjp(xp, g, y, a, b, need_a, need_b):
        return g @ a + a @ g, None

    def jvp(xp, ta, tb, y, a, b):
        return ta @ a + a @ ta  # ta carries k directions on a leading axis in NumPy

    def outputs(sha, shb):
        square(sha, NAME)
        return (tuple(sha),)

    def work(sha, shb):
        return math.prod(sha[:-2]) * sha[-1] ** 3

    register(Escape(NAME, value, vjp, jvp, outputs, work))
    register(Escape(WRONG, value, wrong_vjp, jvp, outputs, work))


def user_function(name):
    from tape import escapes

    def matrix_square(a):
        return escapes.record(name, a)

    return matrix_square


def check_every_mode():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    import _op_database as db
    from _mode_checks import check_mode
    from jit.table import TABLE

    assert db.undeclared() == [NAME, WRONG], db.undeclared()  # test_row_is_declared fails
    for name in (NAME, WRONG):
        db.DOMAINS[name] = db.well_conditioned
        db.LINALG[name] = user_function(name)
        db.declare(TABLE[-2 if name == NAME else -1])
    assert db.undeclared() == []
    op, wrong = db.BY_NAME[NAME], db.BY_NAME[WRONG]
    assert op.modes == {"reverse", "replay", "forward", "higher"}, op.modes

    @settings(max_examples=4, deadline=None, database=None)
    @given(data=st.data(), seed=db.SEEDS)
    def every_mode(data, seed):
        s = data.draw(op.samples(op))
        for mode in sorted(op.modes):
            check_mode(mode, op, s, np.random.default_rng(seed))

    every_mode()
    rng = np.random.default_rng(0)
    s = db.Sample(WRONG, wrong.call, ((3, 3),), (0,), (db.well_conditioned,), "3 x 3")
    try:
        check_mode("reverse", wrong, s, rng)
    except AssertionError:
        pass
    else:
        raise AssertionError("a transposed reverse rule passed the reverse check")


if __name__ == "__main__":
    sys.path[:0] = [ROOT, os.path.dirname(os.path.abspath(__file__))]
    add_the_rows()
    register_the_rules()
    check_every_mode()
    print("ok")
