"""The eager recorder's elementwise values by op group (``jit._eager_values``): each op goes to
the entry point that holds its loop, and ``elementwise_arithmetic`` (the binary kernel rendered
with the + - * / branches only) and ``elementwise_power`` (its power branch) give the full
binary kernel's bits, row by row and broadcast (a one-element operand, the strided nest), special
values included."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jit
from jit import _eager_values
from jit._cache import load
from jit.table import FLAG_SHIFT, ONE_A, ONE_B, OPCODE, STRIDED, TABLE
from tape.core.broadcast_plans import strided_broadcast

ARITHMETIC = ("add", "subtract", "multiply", "divide")
_NO_IA = np.zeros(11, np.int64)


def test_each_op_goes_to_the_entry_holding_its_loop():
    for code, p in enumerate(TABLE):
        entry = _eager_values.ENTRY[code]
        if p.name in ARITHMETIC:
            assert entry == "elementwise_arithmetic"
        elif p.name == "power":
            assert entry == "elementwise_power"
        elif p.family == "unary":
            assert entry == "elementwise_unary"
        else:
            assert entry == "elementwise_binary", p.name


def _run(entry, code, a, b, shape, ia=_NO_IA):
    from jit import _interp

    a = np.ascontiguousarray(a, dtype=np.float64)
    b = np.ascontiguousarray(b, dtype=np.float64)
    y = np.full(shape, np.nan)
    with np.errstate(all="ignore"):  # (NUMBA_DISABLE_JIT: the loops on NumPy scalars warn)
        load(_interp, entry)(code, a.ctypes.data, b.ctypes.data, y.ctypes.data, y.size, -1, ia)
    return y


def _same_bits(x, y):
    np.testing.assert_array_equal(x.view(np.int64), y.view(np.int64))


_SPECIAL = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 5e-324, 1.7e308, -1e-300]


@pytest.mark.parametrize("name", ARITHMETIC)
def test_the_arithmetic_entry_gives_the_binary_kernels_bits(name):
    """Row against row on special values, a one-element operand either side, and the strided
    nest of a broadcast of both operands: the two kernels agree to the bit (and NumPy, whose
    + - * / are exact, agrees with both)."""
    code = OPCODE[name]
    v = np.array(_SPECIAL)
    a, b = np.repeat(v, len(v)), np.tile(v, len(v))
    for flags, x, z in ((0, a, b), (ONE_A, a[:1] + 3.0, b), (ONE_B, a, b[7:8])):
        c = code | flags << FLAG_SHIFT
        shape = (max(x.size, z.size),)
        mine = _run("elementwise_arithmetic", c, x, z, shape)
        _same_bits(mine, _run("elementwise_binary", c, x, z, shape))
        with np.errstate(all="ignore"):
            _same_bits(mine, np.asarray(TABLE[code].ufunc(x, z), dtype=np.float64))


def test_the_power_entry_gives_the_binary_kernels_bits():
    """Row against row on special values (negative bases, zero and infinite exponents, NaN),
    a one-element operand either side, and a strided broadcast: the bits of the full binary
    kernel, and within a few ulp of NumPy's power."""
    code = OPCODE["power"]
    v = np.array(_SPECIAL + [0.5, 2.0, 3.0, -3.0, 1.5])
    a, b = np.repeat(v, len(v)), np.tile(v, len(v))
    for flags, x, z in ((0, a, b), (ONE_A, np.array([1.7]), b), (ONE_B, a, np.array([2.0])),
                        (ONE_B, a, np.array([1.5]))):
        c = code | flags << FLAG_SHIFT
        shape = (max(x.size, z.size),)
        mine = _run("elementwise_power", c, x, z, shape)
        _same_bits(mine, _run("elementwise_binary", c, x, z, shape))
        with np.errstate(all="ignore"):
            numpy = np.power(x, z)
        # (-inf) ** 0.5 is NaN, as sqrt gives, by the sweep's rule (``jit.table._power_fast``)
        numpy[(np.broadcast_to(x, shape) == -np.inf) & (np.broadcast_to(z, shape) == 0.5)] = np.nan
        np.testing.assert_allclose(mine, numpy, rtol=1e-14, atol=0.0)
    rng = np.random.default_rng(3)
    a, b = rng.uniform(0.1, 3.0, size=(4, 1, 3)), rng.normal(size=(1, 5, 3))
    shape = np.broadcast_shapes(a.shape, b.shape)
    ia = np.array((0, 0) + strided_broadcast(shape, a.shape, False, b.shape, False), np.int64)
    c = code | STRIDED << FLAG_SHIFT
    mine = _run("elementwise_power", c, a, b, shape, ia)
    _same_bits(mine, _run("elementwise_binary", c, a, b, shape, ia))
    np.testing.assert_allclose(mine, np.power(a, b), rtol=1e-14)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(ARITHMETIC), st.sampled_from([((4, 1, 3), (1, 5, 3)), ((6, 1), (1, 7)),
                                                     ((2, 1, 4), (3, 1))]),
       st.integers(0, 2 ** 16))
def test_strided_broadcasts_give_the_binary_kernels_bits(name, shapes, seed):
    ashape, bshape = shapes
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=ashape), rng.normal(size=bshape) + 3.0
    shape = np.broadcast_shapes(ashape, bshape)
    nest = strided_broadcast(shape, ashape, False, bshape, False)
    assert nest
    ia = np.array((0, 0) + nest, dtype=np.int64)
    code = OPCODE[name] | STRIDED << FLAG_SHIFT
    mine = _run("elementwise_arithmetic", code, a, b, shape, ia)
    _same_bits(mine, _run("elementwise_binary", code, a, b, shape, ia))
    _same_bits(mine, TABLE[OPCODE[name]].ufunc(a, b))


def test_the_router_computes_every_group():
    """``jit.elementwise`` itself: a unary, an arithmetic, a power and another binary row."""
    x = np.linspace(0.1, 2.0, 9)
    for name, b in (("exp", x), ("multiply", x[::-1].copy()), ("power", x[::-1].copy()),
                    ("arctan2", x[::-1].copy())):
        y = np.empty_like(x)
        jit.elementwise(OPCODE[name], x.ctypes.data, b.ctypes.data, y.ctypes.data, x.size, -1,
                        _NO_IA)
        entry = _eager_values.ENTRY[OPCODE[name]]
        _same_bits(y, _run(entry, OPCODE[name], x, b, x.shape))
        np.testing.assert_allclose(y, TABLE[OPCODE[name]].ufunc(*((x,) if name == "exp"
                                                                  else (x, b))), rtol=1e-15)
