"""``jit.elementwise``: the eager recorder's elementwise values, by four entry points of
``jit._interp`` each loaded (or compiled, under its own compile notice) the first time a row
needs it, so that a first gradient compiles only the forward kernels its rows use:
``elementwise_arithmetic`` (+ - * /, the strided broadcasts of ``tape.core.loop_values``),
``elementwise_unary`` (the transcendental unary rows of ``jit.table.OWN_VALUE``),
``elementwise_power`` (``x ** p``, the usual program's one binary row of ``OWN_VALUE``) and
``elementwise_binary`` (the rare binary rows of ``OWN_VALUE``: arctan2, hypot, logaddexp, ...).
All run the sweep's own loop for the row, so an eager value and its replay are the same bits.
"""
from __future__ import annotations

from ._cache import load
from .table import OPCODE, TABLE

_ARITHMETIC = frozenset(OPCODE[name] for name in ("add", "subtract", "multiply", "divide"))


def _entry_name(op: int) -> str:
    if op in _ARITHMETIC:
        return "elementwise_arithmetic"
    if op == OPCODE["power"]:
        return "elementwise_power"
    return "elementwise_unary" if TABLE[op].family == "unary" else "elementwise_binary"


ENTRY = tuple(_entry_name(op) for op in range(len(TABLE)))  # op -> the entry computing it
_by_op = [None] * len(TABLE)  # op -> that entry once loaded


def elementwise(code, a, b, y, n, field, IA):
    """y = the value of one unary or binary array row (``jit._interp.elementwise_binary`` has
    the arguments), by the entry point for the row's op, loaded at its first use."""
    fn = _by_op[code & 255]
    if fn is None:
        fn = _load(code & 255)
    fn(code, a, b, y, n, field, IA)


def _load(op):
    from . import _interp

    name = ENTRY[op]
    fn = load(_interp, name)
    for k, e in enumerate(ENTRY):
        if e == name:
            _by_op[k] = fn
    return fn
