"""Turn a recorded tape's Python lists into the arrays the jitted passes read."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import jit
from jit.table import OP_MASK


def _pointer_field_offset():
    """Byte offset of the data pointer inside a NumPy array object, or None if unknown.

    Reading the pointer from the object (one jitted loop over all arrays) is ~20x faster than
    ``ndarray.ctypes.data`` per array; the layout is checked here against ctypes, once.
    """
    import ctypes
    import sys

    if sys.implementation.name != "cpython":
        return None
    off = object.__basicsize__  # PyObject_HEAD, then `char *data` in PyArrayObject
    probe = [np.arange(3.0), np.zeros((2, 2))[1:]]
    for a in probe:
        if ctypes.c_void_p.from_address(id(a) + off).value != a.ctypes.data:
            return None
    return off


_FIELD = _pointer_field_offset()


def data_pointers(arrays) -> np.ndarray:
    out = np.empty(len(arrays), np.int64)
    if not arrays:
        return out
    if _FIELD is None:
        for j, a in enumerate(arrays):
            out[j] = a.ctypes.data
        return out
    ids = np.fromiter(map(id, arrays), np.int64, len(arrays))
    jit.data_pointers(ids, _FIELD, out)
    return out


def value_addresses(sv, arrays):
    """VA: the address of every slot's value: 0-d values in `sv`, the others in the buffers
    of `arrays` ({slot: array})."""
    VA = sv.ctypes.data + 8 * np.arange(len(sv), dtype=np.int64)
    if arrays:
        slots = np.fromiter(arrays, np.int64, len(arrays))
        VA[slots] = data_pointers(list(arrays.values()))
    return VA


def mark_scalar_runs(R):
    """Column 3 of a 0-d row (operands and result 0-d, swept inline) holds -1 - e, e the row
    after the run of consecutive 0-d rows it belongs to, so that the forward sweep's 0-d loop
    runs to e without testing every row: that test, a loop exit on a loaded value, doubled the
    loop's time in this VM's slow spells (W1's forward: 40-44 against 18 us; 29-32 told its end
    up front). Negative still means 0-d everywhere; files keep -1 (``unmark_scalar_runs``)."""
    k = R[:, 3]
    zero_d = k < 0
    n = len(k)
    end = np.where(zero_d, n, np.arange(n))  # the first row at or after each that is not 0-d
    end = np.minimum.accumulate(end[::-1])[::-1]
    np.subtract(-1, end, out=k, where=zero_d)  # (in place through the view: 2x faster than
    # a masked assignment; ~0.1 ms for W1's 14,010 rows, per eager backward)


def unmark_scalar_runs(R):
    """R with column 3 of its 0-d rows back to -1 (a copy), as files store it."""
    R = R.copy()
    R[R[:, 3] < 0, 3] = -1
    return R


_NO_SLOTS = np.zeros(0, np.int64)


def build_arrays(t):
    """The tape's arrays (``jit.build_tape``): R, S, sv, IA, FA, VA, size, is_array, code and
    packed_slot."""
    if _FIELD is None:
        return build_arrays_numpy(t)
    n = len(t.sv)
    m = len(t.av)
    rows = np.fromiter(t.rows, np.int64, 3 * n)
    side = np.fromiter(t.side, np.int64, 4 * m)
    ids = np.fromiter([0 if v is None else id(v) for v in t.av], np.int64, m)
    packed_slot = _NO_SLOTS
    if t.packed:
        packed_side = np.array(sorted(t.packed), dtype=np.int64)
        ids[packed_side] = -1
        packed_slot = side[4 * packed_side]
    sv = np.fromiter(t.sv, np.float64, n)
    R = np.empty((n, 4), np.int64)
    S = np.empty((m, 3), np.int64)
    size = np.empty(n, np.int64)
    is_array = np.empty(n, bool)
    VA = np.empty(n, np.int64)
    jit.build_tape(rows, side, ids, _FIELD, sv, R, S, size, is_array, VA)
    return built_arrays(t, R, S, sv, VA, size, is_array, packed_slot)


def built_arrays(t, R, S, sv, VA, size, is_array, packed_slot=_NO_SLOTS):
    """The namespace ``build_arrays`` returns, from the arrays ``jit.build_tape`` filled."""
    IA = np.concatenate(t.ia) if t.ia else np.zeros(1, np.int64)
    FA = np.concatenate(t.fa) if t.fa else np.zeros(1, np.float64)
    return SimpleNamespace(R=R, S=S, sv=sv, IA=IA, FA=FA, VA=VA, size=size, is_array=is_array,
                           code=R[:, 0] & OP_MASK, packed_slot=packed_slot)


def build_arrays_numpy(t):
    """build_arrays by NumPy calls (where the data pointer's place in an array object is
    unknown)."""
    n = len(t.sv)
    R = np.empty((n, 4), np.int64)  # code, a, b, side row (-1: a 0-d row of 0-d operands)
    R[:, :3] = np.fromiter(t.rows, np.int64, 3 * n).reshape(n, 3)
    side = np.fromiter(t.side, np.int64, len(t.side)).reshape(-1, 4)
    side_slot = side[:, 0]
    S = np.ascontiguousarray(side[:, 1:])
    R[:, 3] = -1
    R[side_slot, 3] = np.arange(len(S))
    mark_scalar_runs(R)
    sv = np.fromiter(t.sv, np.float64, n)
    IA = np.concatenate(t.ia) if t.ia else np.zeros(1, np.int64)
    FA = np.concatenate(t.fa) if t.fa else np.zeros(1, np.float64)
    arr_side = np.array([j for j, v in enumerate(t.av) if v is not None], dtype=np.int64)
    arr_slot = side_slot[arr_side]
    # values packed by saved_tensors_hooks: arrays whose address the backward fills in when it
    # unpacks them, just before the segment that reads them
    packed_side = np.array(sorted(t.packed or ()), dtype=np.int64)
    packed_slot = side_slot[packed_side]
    size = np.ones(n, np.int64)
    size[arr_slot] = S[arr_side, 0]
    size[packed_slot] = S[packed_side, 0]
    VA = value_addresses(sv, {int(s): t.av[j] for s, j in zip(arr_slot, arr_side)})
    VA[packed_slot] = 0
    is_array = np.zeros(n, bool)
    is_array[arr_slot] = True
    is_array[packed_slot] = True
    return SimpleNamespace(R=R, S=S, sv=sv, IA=IA, FA=FA, VA=VA, size=size, is_array=is_array,
                           code=R[:, 0] & OP_MASK, packed_slot=packed_slot)
