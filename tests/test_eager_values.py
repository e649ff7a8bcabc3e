"""The eager recorder's elementwise values by op group (``jit._eager_values``): each op goes to
the entry point that holds its loop, each binary entry's kernel holds its own rows' branches
only, and every binary entry gives the sweep's bits (the full binary kernel a replay runs), row
by row and broadcast (a one-element operand, the strided nest), special values included; a first
use compiles that entry alone, and after ``jit.warmup`` none compiles."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import jit
from jit import _eager_values
from jit._cache import load
from jit.table import FLAG_SHIFT, ONE_A, ONE_B, OPCODE, OWN_VALUE, STRIDED, TABLE
from tape.core.broadcast_plans import strided_broadcast

from _replay import NOJIT, Replay

ROOT = Path(__file__).resolve().parents[1]
ARITHMETIC = ("add", "subtract", "multiply", "divide")
RARE = ("arctan2", "hypot", "logaddexp", "fmax", "fmin")  # the binary rows of OWN_VALUE but power
BINARY_OWN = ARITHMETIC + ("power",) + RARE
_NO_IA = np.zeros(11, np.int64)
_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -2.5, 3.0, 800.0, -800.0, np.inf, -np.inf, np.nan,
            5e-324, 1.7e308, -1e-300]


def test_each_op_goes_to_the_entry_holding_its_loop():
    for code, p in enumerate(TABLE):
        entry = _eager_values.ENTRY[code]
        if p.name in ARITHMETIC:
            assert entry == "elementwise_arithmetic"
        elif p.family == "unary":
            assert entry == "elementwise_unary"
        elif p.name == "fmax" or p.name == "fmin":
            assert entry == "elementwise_fmax_fmin"
        elif p.name in BINARY_OWN:
            assert entry == "elementwise_" + p.name
        else:  # (maximum, minimum, remainder, fmod: exact, NumPy's value; other families)
            assert entry is None and code not in OWN_VALUE, p.name
    assert all(_eager_values.ENTRY[c] is not None for c in OWN_VALUE)
    assert {e for e in _eager_values.ENTRY if e} <= set(jit.ENTRY_POINTS)  # (warm-up's list)


def test_each_binary_entry_compiles_its_own_rows_branches_only():
    """The entry calls its subset kernel, whose if/elif chain names exactly the entry's rows."""
    with open(ROOT / "jit" / "_interp.py") as fh:
        src = fh.read()
    for entry, rows in _eager_values.BINARY_ENTRIES.items():
        kernel = "_forward_" + entry.removeprefix("elementwise_")
        body = src.split(f"\ndef {entry}(", 1)[1].split("\n\n\n", 1)[0]
        assert f"    {kernel}(code, n, " in body
        text = src.split(f"\ndef {kernel}(", 1)[1].split("\n\n\n", 1)[0]
        branches = re.findall(r"^    (?:if|elif) (op == \d+(?: or op == \d+)*):  # (.*)$", text,
                              re.M)
        named = [n for _, names in branches for n in names.split(", ")]
        assert sorted(named) == sorted(rows), (entry, named)
        codes = {int(c) for test, _ in branches for c in re.findall(r"\d+", test)}
        assert codes == {OPCODE[r] for r in rows}


def test_the_router_refuses_a_row_it_has_no_loop_for():
    """maximum's eager value is NumPy's (exact): no entry computes it, and asking says so."""
    x = np.linspace(0.1, 2.0, 5)
    y = np.empty_like(x)
    with pytest.raises(ValueError, match="maximum .*NumPy's ufunc"):
        jit.elementwise(OPCODE["maximum"], x.ctypes.data, x.ctypes.data, y.ctypes.data, x.size,
                        -1, _NO_IA)


def _run(entry, code, a, b, shape, ia=_NO_IA):
    """The entry called as the recorder calls it (data addresses), into a NaN-filled result."""
    from jit import _interp

    a = np.ascontiguousarray(a, dtype=np.float64)
    b = np.ascontiguousarray(b, dtype=np.float64)
    y = np.full(shape, np.nan)
    with np.errstate(all="ignore"):  # (NUMBA_DISABLE_JIT: the loops on NumPy scalars warn)
        load(_interp, entry)(code, a.ctypes.data, b.ctypes.data, y.ctypes.data, y.size, -1, ia)
    return y


def _flags_and_nest(ashape, bshape):
    """The flags and ints the recorder gives a row of these operand shapes (``own_binary``)."""
    shape = np.broadcast_shapes(ashape, bshape)
    n = int(np.prod(shape))
    fa = int(np.prod(ashape)) == 1 and n != 1
    fb = int(np.prod(bshape)) == 1 and n != 1
    flags = fa * ONE_A | fb * ONE_B
    ia = _NO_IA
    if (int(np.prod(ashape)) != n and not fa) or (int(np.prod(bshape)) != n and not fb):
        nest = strided_broadcast(shape, ashape, fa, bshape, fb)
        assert nest, (ashape, bshape)
        flags |= STRIDED
        ia = np.array((0, 0) + nest, dtype=np.int64)
    return flags, ia, shape


def _same_bits(x, y, what):
    np.testing.assert_array_equal(np.asarray(x, np.float64).view(np.int64),
                                  np.asarray(y, np.float64).view(np.int64), err_msg=what)


def _check_against_the_sweep(name, a, b):
    """np.<name>(a, b): the entry called directly, the eager recording (which calls it through
    ``jit.elementwise``) and the forward sweep of that recording at these values (the full
    binary kernel ``_forward_binary``, as compiled replay runs it) agree to the bit, and agree
    with NumPy's ufunc within its documented accuracy."""
    code = OPCODE[name]
    entry = _eager_values.ENTRY[code]
    flags, ia, shape = _flags_and_nest(a.shape, b.shape)
    direct = _run(entry, code | flags << FLAG_SHIFT, a, b, shape, ia)
    ufunc = TABLE[code].ufunc
    rec = Replay(lambda u, v: ufunc(u, v), [np.ones(a.shape), np.full(b.shape, 2.0)], (0, 1))
    rec.run([a, b])  # the sweep, at a and b
    swept = rec.value(rec.y._slot)
    eager = rec.fresh([a, b])  # a new eager recording at a and b
    what = f"{name} of {a.shape} and {b.shape}"
    _same_bits(direct, swept, what)
    _same_bits(eager.value(eager.y._slot), swept, what)
    with np.errstate(all="ignore"):
        numpy = np.asarray(ufunc(a, b), dtype=np.float64)
    # (NumPy's SIMD loops differ among CPUs by an ulp or so; fmax / fmin's +0.0 / -0.0 ties
    # compare equal here)
    np.testing.assert_allclose(swept, numpy, rtol=1e-14, atol=0.0, err_msg=what)


# (a, b) operand shapes as the recorder meets them: equal, one-element either side (0-d, or of
# size one with more dimensions), both of one element, and strided broadcasts of one or both
SHAPES = [((7,), (7,)), ((), (6,)), ((6,), ()), ((1,), (5,)), ((2, 3), (1, 1)), ((1,), (1,)),
          ((4, 1, 3), (1, 5, 3)), ((6, 1), (1, 7)), ((2, 1, 4), (3, 1)), ((3, 4), (4,))]
_VALUES = st.one_of(st.sampled_from(_SPECIAL), st.floats(allow_nan=True, allow_infinity=True),
                    st.floats(-5.0, 5.0))


@pytest.mark.parametrize("name", BINARY_OWN)
def test_each_binary_entry_gives_the_sweeps_bits_on_special_values(name):
    """Every pair of special values (signed zeros, infinities, NaN, the smallest subnormal, the
    largest finite, negative bases of power), also with a one-element operand either side."""
    v = np.array(_SPECIAL)
    a, b = np.repeat(v, len(v)), np.tile(v, len(v))
    _check_against_the_sweep(name, a, b)
    for x in (0.5, -0.0, np.inf, np.nan, 1.7):
        _check_against_the_sweep(name, np.array(x), v)
        _check_against_the_sweep(name, v, np.array([x]))


@settings(max_examples=80 if not NOJIT else 15, deadline=None)
@given(st.sampled_from(BINARY_OWN), st.sampled_from(SHAPES), st.data())
def test_each_binary_entry_gives_the_sweeps_bits(name, shapes, data):
    ashape, bshape = shapes
    a = data.draw(hnp.arrays(np.float64, ashape, elements=_VALUES), label="a")
    b = data.draw(hnp.arrays(np.float64, bshape, elements=_VALUES), label="b")
    _check_against_the_sweep(name, a, b)


def test_the_router_computes_every_group():
    """``jit.elementwise`` itself: a unary row and one row of each binary entry."""
    x = np.linspace(0.1, 2.0, 9)
    names = ("exp",) + tuple(rows[0] for rows in _eager_values.BINARY_ENTRIES.values()) + ("fmin",)
    for name in names:
        b = x[::-1].copy()
        y = np.empty_like(x)
        jit.elementwise(OPCODE[name], x.ctypes.data, b.ctypes.data, y.ctypes.data, x.size, -1,
                        _NO_IA)
        entry = _eager_values.ENTRY[OPCODE[name]]
        _same_bits(y, _run(entry, OPCODE[name], x, b, x.shape), name)
        np.testing.assert_allclose(y, TABLE[OPCODE[name]].ufunc(*((x,) if name == "exp"
                                                                  else (x, b))), rtol=1e-15)


# Each rare binary op's eager value in a new process: the notices' and the compile events' entry
# names, in order, and the seconds each compile took (printed for the record, not checked).
_FIRST_USE = """
import time
import numpy as np
from numba.core import event
compiled = []


class Entries(event.Listener):
    def on_start(self, e):
        name = e.data["dispatcher"].py_func.__name__
        if name.startswith("elementwise_"):
            compiled.append(name)

    def on_end(self, e):
        pass


event.register("numba:compile", Entries())
from tape.core.record import own_binary
from jit.table import OPCODE
x = np.linspace(0.1, 1.2, 12).reshape(3, 4)
seconds = []
for name in {names!r}:
    t = time.process_time()
    y = own_binary(OPCODE[name], x, x[::-1].copy())
    seconds.append(round(time.process_time() - t, 2))
    assert np.allclose(y, getattr(np, name)(x, x[::-1]), rtol=1e-14)
print(*compiled)
print(*seconds)
"""


@pytest.mark.skipif(NOJIT, reason="nothing is compiled")
def test_a_rare_binary_op_compiles_its_entry_alone(tmp_path):
    """On an empty cache, an eager arctan2, hypot, logaddexp, fmax then fmin compile one small
    entry each (fmin's is fmax's), and no other elementwise entry."""
    script = tmp_path / "first.py"
    script.write_text(_FIRST_USE.format(names=RARE))
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    compiled, seconds = r.stdout.splitlines()
    assert compiled.split() == ["elementwise_arctan2", "elementwise_hypot",
                                "elementwise_logaddexp", "elementwise_fmax_fmin"], r.stdout
    print("CPU-s of each first use:", dict(zip(RARE, seconds.split())))


_AFTER_WARMUP = """
import numpy as np
from numba.core import event
compiled = []


class Count(event.Listener):
    def on_start(self, e):
        compiled.append(e.data["dispatcher"].py_func.__name__)

    def on_end(self, e):
        pass


event.register("numba:compile", Count())
from tape.core.record import own_binary, own_unary
from jit.table import OPCODE
from jit import _interp
x = np.linspace(0.1, 1.2, 12).reshape(3, 4)
own_unary(OPCODE["exp"], x)
for name in {rare!r} + ("power", "add"):
    own_binary(OPCODE[name], x, x[::-1].copy())
own_binary(OPCODE["arctan2"], x[:, :1], x[:1, :])  # (a strided broadcast of a rare op)
print(compiled)
print(*(len(getattr(_interp, n).signatures) for n in {entries!r}))
"""


@pytest.mark.skipif(NOJIT, reason="nothing is compiled")
def test_after_warmup_no_elementwise_entry_compiles(tmp_path):
    """``jit.warmup`` compiles every entry ``jit.elementwise`` may load: a new process on the
    same cache computing a row of each compiles nothing and prints nothing."""
    from jit._cache import cache_dir

    jit.warmup()  # (the session's cache: loads, unless something is missing)
    entries = sorted({e for e in _eager_values.ENTRY if e})
    script = tmp_path / "warm.py"
    script.write_text(_AFTER_WARMUP.format(rare=RARE, entries=tuple(entries)))
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_CACHE_DIR=os.path.abspath(cache_dir()))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    compiled, loaded = r.stdout.splitlines()
    assert compiled == "[]" and r.stderr == "", (r.stdout, r.stderr)
    assert loaded.split() == ["1"] * len(entries)  # (each of them was used)
