"""Adjoint blocks that one row alone writes in an eager backward, which the arena leaves unzeroed.

An eager backward zeroes its adjoint arena and every row then adds into its operands' blocks:
for W2 that is a memset over 5 MB a call, mostly blocks that a single row fills. When exactly
one row adds to a slot's block, that row can write it instead, and the arena need not zero it:

- a swept row whose operand has the row's own size: need bit FRESH_A / FRESH_B, the sweep
  zeroes the block just before the row adds to it, while in cache (``x * x`` writes it outright,
  ``0.0 + t + t``: the bits a zeroed block would hold);
- an escape whose rule writes into given arrays (``vjp_into``): bits WRITES_A / WRITES_B of
  ``_run_escape``'s `fresh`, the rule computes straight into the block (no temporary, no
  accumulating pass; a rule that returns a new array stores it as ``g + 0.0``).

Compiled plans mark the same rows (``tape.replay.plan``); there the arena stays clean between
calls instead. Only large blocks are left out of the zeroing: a small one is cheaper zeroed with
its neighbours than by a fill of its own.
"""
from __future__ import annotations

import numpy as np

import jit
from jit import NEED_A, NEED_B
from jit.table import TABLE

from ..escapes import ESCAPES

MIN_CELLS = 1 << 12  # 32 KiB: a block this large is worth a fill call less
_SWEPT_ARRAY_ROW = [p.family not in ("input", "escape") for p in TABLE]  # by opcode


def adjoint_takers(A, need):
    """How many rows take each slot's adjoint (add to it in the reverse sweep)."""
    a, b = A.R[:, 1], A.R[:, 2]
    takes = np.concatenate([a[(need & NEED_A) != 0], b[(need & NEED_B) != 0]])
    return np.bincount(takes[takes >= 0], minlength=len(A.sv))


def escape_writes(nd, sa, sb, count, is_array, summed):
    """The operand bits (NEED_A / NEED_B) of an escape row whose rule writes into given arrays
    (``vjp_into``) and alone takes those operands' adjoints: its rule writes their blocks whole.
    `nd`: the row's need bits, `sa`, `sb`: its operands' slots, `count`: how many rows take each
    slot's adjoint (a block holding a seed counted once more), `summed`: the row adds its a
    adjoint to another slot's (``summed_operands``), so that block is not its a's. The one rule
    of eager backwards (``written_whole``) and compiled plans (``tape.replay.plan``)."""
    bits = 0
    for s, bit in ((sa, NEED_A), (sb, NEED_B)):
        if nd & bit and s >= 0 and count[s] == 1 and is_array[s] and not (
                bit == NEED_A and summed):
            bits |= bit
    return bits


def written_whole(t, A, need, count, summed, seeded):
    """(fresh, blocks): `fresh` maps an escape row to the operand bits its rule writes whole
    (``_run_escape``), `blocks` lists the slots of MIN_CELLS cells or more that one row writes
    whole, which the arena need not zero. Sets need bits FRESH_A / FRESH_B on the swept rows
    that write them. `count`: how many rows take each slot's adjoint, ``adjoint_takers`` before
    ``summed_operands`` (which moves the take of u from row a to the escape: the same count),
    or None, `summed`: those escapes, `seeded`: slots whose blocks hold a seed before the sweep.
    Call only for a tape without Function calls (their backward adds to blocks outside the rows).
    A tape without a block that large is left as it is: its arena is cheap to zero, and the
    marks would cost a small backward more Python than they save."""
    big = np.flatnonzero(A.size >= MIN_CELLS).tolist()
    if not big:
        return None, []
    if count is None:
        count = adjoint_takers(A, need)
    count = count.tolist()  # (Python lists: a few reads per row, cheaper than NumPy scalars)
    for s in seeded:
        count[s] += 1  # (never written whole: the seed is in the block already)
    a, b = A.R[:, 1].tolist(), A.R[:, 2].tolist()
    size, is_array = A.size.tolist(), A.is_array.tolist()
    fresh, blocks = {}, []
    for c in t.escapes:
        nd = int(need[c])
        if not nd or not ESCAPES[TABLE[A.code[c]].name].vjp_into:
            continue
        bits = escape_writes(nd, a[c], b[c], count, is_array, c in summed)
        if bits:
            fresh[c] = bits
            blocks += [s for s, bit in ((a[c], NEED_A), (b[c], NEED_B))
                       if bits & bit and size[s] >= MIN_CELLS]
    code, nds = A.code.tolist(), need.tolist()
    for j in big:
        nd = nds[j]
        if not nd or not is_array[j] or not _SWEPT_ARRAY_ROW[code[j]]:
            continue
        sa, sb = a[j], b[j]
        takes_a, takes_b = bool(nd & NEED_A), bool(nd & NEED_B)
        for s, takes, mark in ((sa, takes_a, jit.FRESH_A), (sb, takes_b, jit.FRESH_B)):
            if not takes or s < 0 or size[s] != size[j] or not is_array[s]:
                continue
            refs = (takes_a and sa == s) + (takes_b and sb == s)
            if count[s] == refs:  # this row, once or as both operands, is the block's one taker
                nd |= mark
                need[j] = nd
                if s not in blocks:
                    blocks.append(s)
    return fresh, blocks
