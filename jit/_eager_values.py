"""``jit.elementwise``: the eager recorder's elementwise values, by small entry points of
``jit._interp`` each loaded (or compiled, under the eager gradient's one compile notice) the
first time a row needs it, so that a first gradient compiles only the forward kernels its rows use:
``elementwise_unary`` (the transcendental unary rows of ``jit.table.OWN_VALUE``) and one entry
per group of binary rows in ``BINARY_ENTRIES``: + - * / (the strided broadcasts of
``tape.core.loop_values``), ``x ** p`` (the usual program's one binary row of ``OWN_VALUE``), and
each rare binary row of ``OWN_VALUE`` on its own (fmax and fmin together), so that a program
with an arctan2 compiles arctan2's loops alone (~0.7 CPU-s), not every binary row's (~6).
All run the sweep's own loop for the row, so an eager value and its replay are the same bits.
"""
from __future__ import annotations

from .table import OWN_VALUE, TABLE

# entry point -> the binary rows it computes: ``jit._generate_forward`` renders each as
# ``_forward_<suffix>``, the binary forward kernel with those rows' branches only (the same
# loops), called by ``elementwise_<suffix>``
BINARY_ENTRIES = {
    "elementwise_arithmetic": ("add", "subtract", "multiply", "divide"),
    "elementwise_power": ("power",),
    "elementwise_arctan2": ("arctan2",),
    "elementwise_hypot": ("hypot",),
    "elementwise_logaddexp": ("logaddexp",),
    # (two selects: together they compile in about what one takes alone, ~1.1 CPU-s)
    "elementwise_fmax_fmin": ("fmax", "fmin"),
}


def _entry_name(op: int):
    for name, rows in BINARY_ENTRIES.items():
        if TABLE[op].name in rows:
            return name
    return "elementwise_unary" if TABLE[op].family == "unary" else None


ENTRY = tuple(_entry_name(op) for op in range(len(TABLE)))  # op -> the entry computing it
_by_op = [None] * len(TABLE)  # op -> that entry once loaded


def elementwise(code, a, b, y, n, field, IA):
    """y = the value of one unary or binary array row (``jit._interp.elementwise_unary`` has
    the arguments), by the entry point for the row's op, loaded at its first use."""
    fn = _by_op[code & 255]
    if fn is None:
        fn = _load(code & 255)
    fn(code, a, b, y, n, field, IA)


def _load(op):
    from . import _interp
    from ._cache import load

    name = ENTRY[op]
    if name is None:
        raise ValueError(f"jit.elementwise computes the unary rows and the binary rows of "
                         f"jit.table.OWN_VALUE and + - * /; {TABLE[op].name} (opcode {op}) is "
                         f"not one: its eager value is NumPy's ufunc")
    fn = load(_interp, name)
    for k, e in enumerate(ENTRY):
        if e == name:
            _by_op[k] = fn
    return fn


def _check():
    """Every binary row of ``OWN_VALUE`` has an entry (a new one in the table must be added to
    ``BINARY_ENTRIES``, else its eager value would have no loop)."""
    missing = [TABLE[c].name for c in OWN_VALUE if ENTRY[c] is None]
    if missing:
        raise ValueError(f"binary rows of OWN_VALUE without an entry point: {missing}; add them "
                         f"to jit._eager_values.BINARY_ENTRIES")


_check()
