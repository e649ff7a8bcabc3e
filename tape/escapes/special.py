"""The scipy.special rows (``jit.table.SPECIAL_ROWS``): elementwise, but escapes of the main
sweeps, so that the main interpreters never compile their kernels.

Each row keeps the scalar formulas of a unary (f(x), f'(x, y)) or binary (f(a, b) and its two
partials in a, b, y) elementwise row. On plain arrays its value and partials come from its own
kernels, ``jit.special_value`` / ``jit.special_partial`` (``jit/_special_sweep.py``), compiled
or loaded from the cache the first time a recording uses one of these rows: eager recording
and a replay both compute the value there, so they give the same bits. Recorded (higher order,
dual numbers) the partials are the table's formulas evaluated on tensors (the helpers of
``tape/forward/special_rules.py``), so that their own derivatives are exact.

Operands broadcast as NumPy's: the kernels run over the broadcast shape, and a reverse rule
sums an operand's adjoint back down to its shape.
"""
from __future__ import annotations

import math

import numpy as np

from jit.table import SPECIAL_ROWS, TABLE

from ..core.formulas import FORMULAS as _NS
from . import Escape, register
from .products import sum_to_batch

_REAL = frozenset("biuf")  # dtype kinds that convert to float64 exactly


def _ready(x):
    """x is already an array the kernels take (contiguous, writable float64)."""
    return type(x) is np.ndarray and x.dtype == np.float64 and x.flags.c_contiguous and \
        x.flags.writeable


def _operands(name, a, b):
    """a (and b) as flat contiguous float64 arrays of the broadcast shape, and that shape."""
    if _ready(a) and (b is None or (_ready(b) and b.shape == a.shape)):  # (a replay's rows)
        fa = a.reshape(-1)
        return fa, (b.reshape(-1) if b is not None else fa), a.shape
    ops = [np.asarray(a)] if b is None else [np.asarray(a), np.asarray(b)]
    for o in ops:
        if o.dtype.kind not in _REAL:
            raise TypeError(f"{name}: tapejit differentiates float64 values; got dtype "
                            f"{o.dtype} (complex and object arrays are not supported)")
    if b is None:
        shape = ops[0].shape
    else:
        try:
            shape = np.broadcast_shapes(ops[0].shape, ops[1].shape)
        except ValueError as e:
            raise ValueError(f"{name}: {e} (operand shapes {ops[0].shape} and "
                             f"{ops[1].shape})") from None
    flat = [_flat(o, shape) for o in ops]
    return flat[0], (flat[1] if b is not None else flat[0]), shape


def _flat(x, shape):
    """x broadcast to `shape` as a flat, contiguous, writable float64 array: the one array
    type the kernels are compiled for (a read-only one would compile them again)."""
    x = np.asarray(x)
    f = np.ascontiguousarray(x if x.shape == shape else np.broadcast_to(x, shape),
                             dtype=np.float64).reshape(-1)
    return f if f.flags.writeable else f.copy()


def _kernel(name):
    import jit

    return getattr(jit, name)


def _partial(code, k, a, b, y):
    """The row's partial in operand k on plain arrays (the broadcast shape), by its kernel."""
    fa, fb, shape = _operands(TABLE[code].name, a, b)
    d = np.empty(fa.size)
    _kernel("special_partial")(code, k, fa, fb, _flat(y, shape), d)
    return d.reshape(shape)


_FORMULAS = {}  # (code, k) -> the partial as a function of tensors (higher order)


def _formula(code, k):
    f = _FORMULAS.get((code, k))
    if f is None:
        p = TABLE[code]
        args = "x, y" if len(p.d) == 1 else "a, b, y"
        f = _FORMULAS[code, k] = eval(f"lambda {args}: {p.d[k]}", dict(_NS))  # noqa: S307
    return f


def _derivative(xp, code, k, y, a, b):
    if xp.tensors:
        f = _formula(code, k)
        return f(a, y) if b is None else f(a, b, y)
    return _partial(code, k, a, b, y)


def _rules(code):
    p = TABLE[code]
    binary = len(p.d) == 2

    def value(a, b=None):
        fa, fb, shape = _operands(p.name, a, b)
        y = np.empty(fa.size)
        _kernel("special_value")(code, fa, fb, y)
        return y.reshape(shape) if shape else float(y[0])

    def vjp(xp, g, y, a, b, need_a, need_b):
        ga = gb = None
        if need_a:
            ga = g * _derivative(xp, code, 0, y, a, b)
            ga = ga if xp.tensors else np.reshape(sum_to_batch(np, ga, np.shape(a)), np.shape(a))
        if need_b:
            gb = g * _derivative(xp, code, 1, y, a, b)
            gb = gb if xp.tensors else np.reshape(sum_to_batch(np, gb, np.shape(b)), np.shape(b))
        return ga, gb

    def jvp(xp, ta, tb, y, a, b):
        ty = None
        for k, (t, x) in enumerate(((ta, a), (tb, b))):
            if t is None:
                continue
            if not xp.tensors:  # k directions lead: line the operand's axes up with y's
                sx, sy = np.shape(x), np.shape(y)
                lead = np.ndim(t) - len(sx)
                t = np.reshape(t, np.shape(t)[:lead] + (1,) * (len(sy) - len(sx)) + sx)
            term = _derivative(xp, code, k, y, a, b) * t
            ty = term if ty is None else ty + term
        return ty

    def outputs(sha, shb):
        if not binary:
            return (tuple(sha),)
        try:
            return (tuple(np.broadcast_shapes(tuple(sha), tuple(shb))),)
        except (ValueError, TypeError):
            raise ValueError(f"{p.name}: operand shapes {sha} and {shb} do not broadcast") \
                from None

    def work(sha, shb):
        return 100 * math.prod(outputs(sha, shb)[0]) + 1

    return Escape(p.name, value, vjp, jvp, outputs, work, binary=binary)


for _code in sorted(SPECIAL_ROWS):
    register(_rules(_code))
