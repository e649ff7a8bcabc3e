"""What the guards of a saved tape may call, and what each call may cost.

A guard recomputes, at every replay, a value that Python read while f was recorded
(tape/core/guards.py); a file names each guard's function and keyword arguments. A loaded guard
may call only a function of the tables below, with as many operands as it takes and only the
keyword arguments listed for it, each of a checked type and range. Every function here costs
work O(n log n) and memory O(n) for operands of n elements (``cost`` counts both into the
load's budget), except ``bincount``, whose result's length comes from its data: a loaded
bincount guard is bounded by its recorded result, and a call that would return more is not
made (the guard does not hold). ``cf.save`` refuses a recording whose guards call anything
else, so what it writes loads.
"""
from __future__ import annotations

import math

import numpy as np

_MAX_DIMS = 64  # (NumPy's)


def _bool(v):
    return type(v) is bool


def _false(v):  # (a tuple of results: no saved guard asks for one)
    return v is False


def _opt_bool(v):
    return v is None or type(v) is bool


def _number(v):
    return type(v) in (int, float)


def _axis(v):
    return v is None or (type(v) is int and -_MAX_DIMS <= v < _MAX_DIMS)


def _axes(v):
    return _axis(v) or (isinstance(v, (list, tuple)) and len(v) <= _MAX_DIMS
                        and all(type(x) is int and _axis(x) for x in v))


def _decimals(v):
    return type(v) is int and -400 <= v <= 400  # (beyond: every float64 rounds the same)


def _one_of(*choices):
    return lambda v: (v is None or type(v) is str) and v in choices


def _kth(v):
    return type(v) is int or (isinstance(v, (list, tuple)) and len(v) <= _MAX_DIMS
                              and all(type(x) is int for x in v))


def _minlength(v):
    return type(v) is int and v >= 0


class _Call:
    """A function a guard may call: its operand counts, keyword arguments (name -> check) and
    cost class: "n" (linear), "broadcast" (elementwise on broadcast operands), "sort"
    (n log n), "bincount"."""

    __slots__ = ("arity", "cost", "kwargs")

    def __init__(self, arity, cost="n", **kwargs):
        self.arity, self.cost, self.kwargs = arity, cost, kwargs


_NUMERIC = {"equal_nan": _bool}
_REDUCE = {"axis": _axis, "keepdims": _bool}
_SORT = {"axis": _axis, "kind": _one_of(None, "quicksort", "mergesort", "heapsort", "stable"),
         "stable": _opt_bool}

# ("np", name): ufuncs whose results are booleans, and np.array (a value read as an array)
NP = {**{name: _Call(2, "broadcast") for name in (
    "less", "less_equal", "greater", "greater_equal", "equal", "not_equal", "logical_and",
    "logical_or", "logical_xor")},
      **{name: _Call(1) for name in ("logical_not", "isnan", "isinf", "isfinite", "signbit",
                                     "array")}}
# ("zero_grad", name): piecewise-constant functions, whose results are constants of the tape
ZERO_GRAD = {**{name: _Call(1) for name in ("floor", "ceil", "trunc", "rint", "sign", "spacing",
                                            "fix", "angle")},
             **{name: _Call(2, "broadcast") for name in ("floor_divide", "heaviside")}}
# ("values", name, kwargs): values-only functions (tape/numpy_ops), called on plain arrays
VALUES = {
    **{name: _Call(1, **_REDUCE) for name in ("argmax", "argmin", "nanargmax", "nanargmin")},
    **{name: _Call(1, axis=_axes, keepdims=_bool) for name in ("all", "any", "count_nonzero")},
    **{name: _Call(1) for name in (
        "flatnonzero", "argwhere", "isnan", "isfinite", "isinf", "sign", "floor", "ceil",
        "isposinf", "isneginf", "isreal", "iscomplex", "isrealobj", "iscomplexobj", "ndim")},
    "size": _Call(1, axis=_axis),
    "round": _Call(1, decimals=_decimals),
    "around": _Call(1, decimals=_decimals),
    "argsort": _Call(1, "sort", **_SORT),
    "argpartition": _Call(1, "sort", kth=_kth, axis=_axis, kind=_one_of("introselect")),
    "lexsort": _Call(1, "sort", axis=_axis),
    "unique": _Call(1, "sort", return_index=_false, return_inverse=_false,
                    return_counts=_false, axis=_axis, equal_nan=_bool, sorted=_bool),
    "unique_values": _Call(1, "sort"),
    "isclose": _Call(2, "broadcast", rtol=_number, atol=_number, **_NUMERIC),
    "allclose": _Call(2, "broadcast", rtol=_number, atol=_number, **_NUMERIC),
    "array_equal": _Call(2, **_NUMERIC),
    "array_equiv": _Call(2, "broadcast"),
    "nextafter": _Call(2, "broadcast"),
    "searchsorted": _Call(2, "sort", side=_one_of("left", "right")),
    "digitize": _Call(2, "sort", right=_bool),
    "isin": _Call(2, "sort", assume_unique=_bool, invert=_bool, kind=_one_of(None, "sort")),
    "intersect1d": _Call(2, "sort", assume_unique=_bool, return_indices=_false),
    "union1d": _Call(2, "sort"),
    "setdiff1d": _Call(2, "sort", assume_unique=_bool),
    "setxor1d": _Call(2, "sort", assume_unique=_bool),
    "bincount": _Call(1, "bincount", minlength=_minlength),
}
_SIMPLE = {"item": _Call(1), "bool": _Call(1), "int": _Call(1)}


def _entry(spec):
    """The table entry of a guard's spec (a list from a file, a tuple when recorded), or None."""
    if not isinstance(spec, (list, tuple)) or not spec or not isinstance(spec[0], str):
        return None
    kind = spec[0]
    if kind in _SIMPLE:
        return _SIMPLE[kind] if len(spec) == 1 else None
    table = {"np": NP, "zero_grad": ZERO_GRAD, "values": VALUES}.get(kind)
    if table is None or len(spec) != (3 if kind == "values" else 2) or not isinstance(
            spec[1], str):
        return None
    return table.get(spec[1])


def problem(spec, n_operands):
    """What is wrong with a guard that calls `spec` on `n_operands` operands, or None."""
    call = _entry(spec)
    if call is None:
        return f"calls {_name(spec)}, which a loaded guard may not call (docs/security.md)"
    if n_operands != call.arity:
        return (f"{_name(spec)} of {n_operands} operand(s), not {call.arity} (pass its other "
                "arguments by keyword)")
    if spec[0] == "values":
        pairs = spec[2]
        if not isinstance(pairs, (list, tuple)) or not all(
                isinstance(kv, (list, tuple)) and len(kv) == 2 and isinstance(kv[0], str)
                for kv in pairs):
            return f"{_name(spec)}: keyword arguments {pairs!r}"
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            return f"{_name(spec)}: a keyword argument given twice"
        for k, v in pairs:
            check = call.kwargs.get(k)
            if check is None or not check(v):
                return f"{_name(spec)}: keyword argument {k}={v!r}"
    return None


def _name(spec):
    if isinstance(spec, (list, tuple)) and len(spec) >= 2 and isinstance(spec[1], str):
        return f"np.{spec[1][:40]}"
    return f"{str(spec)[:60]}"


def cost(spec, shapes, result):
    """(loop iterations, elements held) of one call of guard `spec` on operands of `shapes`
    (their dtypes plain numbers), whose recorded result is the array `result`; a ValueError
    names a call that could never return it."""
    call = _entry(spec)
    sizes = [math.prod(s) for s in shapes]
    n = sum(sizes)
    if spec[0] in _SIMPLE:
        return 1, 0
    if call.cost == "broadcast":
        try:
            out = math.prod(np.broadcast_shapes(*shapes))
        except ValueError:
            raise ValueError(f"{_name(spec)} of operands of shapes {shapes}, which do not "
                             "broadcast") from None
        return n + out, n + out
    if call.cost == "sort":
        return n * (2 + n.bit_length()), 3 * n
    if call.cost == "bincount":
        length = result.size
        minlength = dict(spec[2]).get("minlength", 0)
        if result.ndim != 1 or minlength > length:
            raise ValueError(f"np.bincount: minlength {minlength} for a recorded result of "
                             f"shape {result.shape}")
        return n + length, n + length
    return n, n * max(1, max(map(len, shapes), default=1))


def bounded(guard, result):
    """The guard, its calls bounded by its recorded `result` where the function's output size
    depends on its data (bincount: a value at or past the result's length would lengthen it,
    so the call is not made and the guard does not hold)."""
    if guard.spec[0] == "values" and guard.spec[1] == "bincount":
        fn, length = guard.fn, np.size(result)

        def call(x):
            v = np.asarray(x)
            if v.size and not (v.min() >= 0 and v.max() < length):
                return None
            return fn(x)

        guard.fn = call
    return guard
