"""``tape.compile(..., check_constants=True)``: find values a replay would freeze.

A replay runs no Python of f, so whatever f computes in Python and hands to a recorded op (a
random draw, a global read) is a constant of the recording. Recording f twice at the same
arguments shows the ones that change from call to call: their constants differ between the two
recordings. This check reports them by the line that made them, so that they can be passed in
as arguments (randomness as JAX passes its keys).
"""
from __future__ import annotations

import numpy as np

from jit.table import OPCODE, TABLE

CONST = OPCODE["const"]


def _bits(v):
    return np.ascontiguousarray(v, dtype=np.float64).tobytes()


def differing(v, w, sites):
    """What differs between variants v and w, two recordings of f at the same arguments
    (`sites`: slot -> line, of w's recording): "constants made at <lines>", "the recorded
    operations, from op '<name>' on", or None."""
    if v.t is None or w.t is None:
        return None if v.t is w.t else "the recorded operations (one recorded none)"
    A, B = v.A, w.A
    n = min(len(A.sv), len(B.sv))
    rows = np.flatnonzero(np.any(A.R[:n, :3] != B.R[:n, :3], axis=1))
    if len(rows) or len(A.sv) != len(B.sv):
        k = int(rows[0]) if len(rows) else n - 1
        return f"the recorded operations, from op '{TABLE[A.code[k]].name}' on"
    lines = []
    for s in np.flatnonzero(A.code == CONST):
        s = int(s)
        if _bits(v.t.value(s)) != _bits(w.t.value(s)):
            where = sites.get(s, "?")
            if where not in lines:
                lines.append(where)
    return f"constants made at {', '.join(lines)}" if lines else None


def check(v, w, sites, name):
    what = differing(v, w, sites)
    if what:
        raise RuntimeError(
            f"tape.compile(check_constants=True): two recordings of {name} at the same "
            f"arguments differ in {what} (a random draw or a global that changed). A replay "
            "would freeze them at the first recording's values. Pass them in as arguments "
            "instead (draw outside f and pass the draw, as JAX passes its keys).")
