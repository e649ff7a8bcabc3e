"""Eager values that tapejit's own loops compute faster than NumPy, with NumPy's bits.

Two layouts where NumPy's iteration costs more than its arithmetic:

* a binary + - * / whose operands are both broadcast (``x[None] - means[:, None]``): NumPy walks
  the result in short strided lines; the replay's strided nest
  (``jit.elementwise_arithmetic``, flag 16) does not. These ops are exact by IEEE 754, so the
  loop gives NumPy's bits.
* sums over the last axis of a C-contiguous array with short lines: ``np.add.reduce`` calls its
  inner loop once per line; ``jit._line_sums`` runs NumPy's pairwise order in one loop.

NumPy's floating-point warnings (overflow, invalid, divide by zero) follow the user's
``np.errstate``; the loops raise none. So a loop runs only where NumPy would raise none: for
the binary ops, operands whose finite bounds rule out every flagged case (and underflow
ignored); for sums, a result the loop finds finite (a sum flags overflow or invalid only
where its result is inf or NaN; additions never underflow inexactly), else NumPy computes it
again and warns or raises as it does.
"""
from __future__ import annotations

import math

import numpy as np

from jit.table import FLAG_SHIFT, OPCODE, STRIDED

from .arrays import _FIELD
from .broadcast_plans import strided_broadcast

F64 = np.dtype(np.float64)
_FIELD_OFFSET = -1 if _FIELD is None else _FIELD
_handle = id if _FIELD is not None else (lambda a: a.ctypes.data)

ADD, SUBTRACT, MULTIPLY, DIVIDE = (OPCODE[n] for n in ("add", "subtract", "multiply", "divide"))
# Below MIN_CELLS results NumPy's call costs no more than the loop's (measured: 16,384-element
# broadcasts about even, 32,000 0.6-0.7x). Lines of both operands longer than MAX_LINE are
# NumPy's: its contiguous SIMD loop wins there (8 x 30,000: 1.1x; 32 x 4096: 0.73x).
MIN_CELLS = 1 << 14
MAX_LINE = 4096
# Sums: from MIN_SUM_LINES lines of at most MAX_SUM_LINE, where NumPy's call per line is a large
# share of its time (measured: 128 lines of 8, 0.8x; 1000 of 8, 0.2x; 1000 of 128, 0.6x; 200 of
# 256, 0.9x; 50 of 10, 1.3x)
MIN_SUM_LINES = 128
MAX_SUM_LINE = 128
_BIG = 2.0 ** 1023  # |a|, |b| < 2**1023: a + b and a - b cannot overflow

_NESTS = {}  # (a shape, b shape) -> (result shape, n, strided nest as int64) or None


def _nest(ashape, bshape):
    """The strided nest of a binary broadcast whose operands are both broadcast, with a result
    of MIN_CELLS or more, whose innermost line both operands read (stride 1) and is at most
    MAX_LINE long; None for any other pair of shapes (NumPy's loop then)."""
    key = (ashape, bshape)
    hit = _NESTS.get(key, False)
    if hit is not False:
        return hit
    try:
        shape = np.broadcast_shapes(ashape, bshape)
    except ValueError:
        shape = None  # NumPy's ufunc raises its own error
    hit = None
    if shape is not None:
        n = math.prod(shape)
        na, nb = math.prod(ashape), math.prod(bshape)
        if n >= MIN_CELLS and 1 < na < n and 1 < nb < n:
            nest = strided_broadcast(shape, ashape, False, bshape, False)
            if nest and nest[5] and nest[8] and nest[2] <= MAX_LINE:
                hit = (shape, n, np.array((0, 0) + nest, dtype=np.int64))
    if len(_NESTS) > 1024:
        _NESTS.clear()
    _NESTS[key] = hit
    return hit


def _bound(v):
    """max |v| when every element is finite, else inf (NaN included); a Python float, so that
    the bounds' own arithmetic raises no NumPy warning."""
    hi = float(v.max())
    lo = float(v.min())
    if not (-math.inf < lo and hi < math.inf):
        return math.inf
    return max(hi, -lo)


def _quiet(code, av, bv):
    """Whether NumPy's code(av, bv) raises no floating-point flag the user's errstate acts on:
    every element finite and bounded so that no result overflows or divides by zero."""
    err = np.geterr()
    if err["under"] != "ignore":
        return False  # (a product or quotient may underflow: NumPy's loop tells)
    if err["over"] == err["invalid"] == err["divide"] == "ignore":
        return True
    A = _bound(av)
    if A == math.inf:
        return False
    if code == DIVIDE:
        m = float(np.abs(bv).min())
        return 0.0 < m < math.inf and A / m < _BIG and _bound(bv) < math.inf
    B = _bound(bv)
    if code == MULTIPLY:
        return A * B < _BIG
    return A < _BIG and B < _BIG


def broadcast_value(code, av, bv):
    """code(av, bv) for + - * / of two float64 C-contiguous arrays of different shapes, by the
    strided loop, where that is NumPy's value and NumPy's warnings (none) and faster; else None
    (the caller runs NumPy's ufunc)."""
    if code != SUBTRACT and code != ADD and code != MULTIPLY and code != DIVIDE:
        return None
    hit = _nest(av.shape, bv.shape)
    if hit is None or not av.flags.c_contiguous or not bv.flags.c_contiguous \
            or av.dtype is not F64 or bv.dtype is not F64 or not _quiet(code, av, bv):
        return None
    shape, n, ia = hit
    from .value_pool import take

    y = take(shape, n)
    _arithmetic()(code | STRIDED << FLAG_SHIFT, _handle(av), _handle(bv), _handle(y), n,
                  _FIELD_OFFSET, ia)
    return y


def line_sums(xv, P, R, shape):
    """np.add.reduce of float64 C-contiguous xv over its trailing block of R elements (P lines),
    shaped `shape`, by one loop in NumPy's order (the caller checks P >= MIN_SUM_LINES and
    R <= MAX_SUM_LINE, where that is faster); else None."""
    if xv.dtype is not F64 or not xv.flags.c_contiguous:
        return None
    y = np.empty(shape)
    if not _sums()(_handle(xv), _handle(y), P, R, _FIELD_OFFSET):
        return None  # an inf or NaN: NumPy's sum, with its warnings
    return y


def _arithmetic():
    global _arithmetic
    from jit import elementwise_arithmetic

    fn = _quietly(elementwise_arithmetic)
    _arithmetic = lambda: fn  # noqa: E731 (imported once: import tape loads no Numba)
    return fn


def _sums():
    global _sums
    import jit._line_sums as module
    from jit._cache import load

    fn = _quietly(load(module, "line_sums"))
    _sums = lambda: fn  # noqa: E731
    return fn


def _quietly(fn):
    """fn, or under NUMBA_DISABLE_JIT (its loops then run on NumPy scalars, which warn) fn with
    every floating-point flag ignored: the caller tells what NumPy would."""
    from numba import config

    if not config.DISABLE_JIT:
        return fn

    def quiet(*args):
        with np.errstate(all="ignore"):
            return fn(*args)

    return quiet
