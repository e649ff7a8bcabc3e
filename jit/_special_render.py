"""The table as the generators render it: the scipy.special rows behind one kernel per arity.

The sweeps hold each elementwise row's formulas at several places (0-d, array loop, blocked run,
reverse, tangent), and LLVM inlines a helper at each call site: the special functions' loops and
series, thirty rows of them, made the first compile ~50% longer (measured with
``python -m jit.warmup``, docs/special.md). Rendered instead as calls of ``_special_f1(k, x)``,
``_special_d1(k, x, y)``, ``_special_f2(k, a, b)``, ``_special_da(k, a, b, y)`` and
``_special_db(k, a, b, y)`` (k the row's index among the special rows), each special formula
is compiled once, inside those five functions, which are too large for LLVM to inline at ~100
call sites. The formulas of the table stay as they are written (``jit/table.py``): the tensor
forms of the derivatives (``tape/_tangents.py``) and the table hash read them there.
"""
from __future__ import annotations

import re
from dataclasses import replace

from .table import SPECIAL_ROWS, TABLE

SPECIAL = sorted(SPECIAL_ROWS)  # opcode -> index k: its position here


def _uses(expr, name):
    return re.search(rf"\b{name}\b", expr) is not None


def _call(fn, k, expr, names):
    """fn(k, names...) with the names that expr does not use passed as 0.0 (so that the
    generators load only what the formula reads)."""
    args = ", ".join(n if _uses(expr, n) else "0.0" for n in names)
    return f"{fn}({k}, {args})"


def _dispatched(code, p):
    if code not in SPECIAL_ROWS:
        return p
    k = SPECIAL.index(code)
    if p.family == "unary":
        return replace(p, f=_call("_special_f1", k, p.f, ("x",)),
                       d=(_call("_special_d1", k, p.d[0], ("x", "y")),))
    return replace(p, f=_call("_special_f2", k, p.f, ("a", "b")),
                   d=(_call("_special_da", k, p.d[0], ("a", "b", "y")),
                      _call("_special_db", k, p.d[1], ("a", "b", "y"))))


RENDER_TABLE = tuple(_dispatched(c, p) for c, p in enumerate(TABLE))


def _kernel(name, args, cases):
    lines = ['@njit(error_model="numpy")', f"def {name}(k, {args}):"]
    for k, expr in cases:
        lines += [f"    if k == {k}:", f"        return {expr}"]
    lines.append("    return nan")
    return "\n".join(lines)


def dispatch_source() -> str:
    """The five shared kernels of the special rows, rendered after their helpers."""
    unary = [(k, TABLE[c]) for k, c in enumerate(SPECIAL) if TABLE[c].family == "unary"]
    binary = [(k, TABLE[c]) for k, c in enumerate(SPECIAL) if TABLE[c].family == "binary"]
    parts = [
        _kernel("_special_f1", "x", [(k, p.f) for k, p in unary]),
        _kernel("_special_d1", "x, y", [(k, p.d[0]) for k, p in unary]),
        _kernel("_special_f2", "a, b", [(k, p.f) for k, p in binary]),
        _kernel("_special_da", "a, b, y", [(k, p.d[0]) for k, p in binary]),
        _kernel("_special_db", "a, b, y", [(k, p.d[1]) for k, p in binary]),
    ]
    return "\n\n\n".join(parts) + "\n"
