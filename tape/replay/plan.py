"""Planning a compiled replay: which rows a call needs, which runs are seeded, swept in blocks or
split among threads, which adjoints a rule writes whole, and the arguments of the jitted passes
(``Plan`` for a gradient, ``ValuePlan`` for a value). Plans are made once per variant and set of
``argnums`` and reused by every call (tape/replay/variant.py runs them)."""
from __future__ import annotations

import numpy as np

import jit
from jit.table import FAMILIES, TABLE

from ..core.tape import cut_rows
from ..escapes import ESCAPES
from ..reverse.backward import (WRITES_A, WRITES_B, ZEROES_OWN, arena, reverse_cuts,
                                segment_bounds, summed_operands)
from ..reverse.written_whole import adjoint_takers, escape_writes

# Array inputs and gradients at least this large skip a copy on a straight value_and_grad: the
# sweep reads the caller's array in place and accumulates the gradient straight into the array
# returned (on W3's 10^6 elements the two copies and the arena clear cost ~0.9 ms of ~15)
ZERO_COPY_SIZE = 1 << 14
# A blocked run of at least this many elements is split among threads: a seeded run (closed by
# a full sum, swept both ways block by block) in pieces at the top of NumPy's pairwise
# summation, so the sum keeps its bits (W3 on 2 cores: 13.4 -> 9.0 ms); any other, forward and
# reverse, in shares of its blocks (W2's Qx * Qx summed over lines: 0.90-0.95x a call)
THREAD_SIZE = 1 << 17
WHOLE = np.zeros(3)  # sweep's `part` for a call on its own (jit._interp.WHOLE: tape imports
# Numba's modules only when a kernel first runs)
STEP = np.array([0.0, 1.0, 0.0])  # ... for a step of a threaded call, outside the workers
_FAMILY_OF = np.array([FAMILIES.index(p.family) for p in TABLE], dtype=np.int64)
_INPUT, _ESCAPE = FAMILIES.index("input"), FAMILIES.index("escape")


def _sole_contributions(A, need, escapes, out, summed):
    """Escape row -> operand bits (1: a, 2: b) whose adjoint that row's rule can write in place
    (``vjp_into``) and alone contributes to, an array slot other than the output's: the rule
    writes that block whole (``_run_escape``), so its reader need not zero it after reading.
    `summed` (``summed_operands``): those escapes add to u's adjoint, and not to a's."""
    a, b = A.R[:, 1].tolist(), A.R[:, 2].tolist()
    count = adjoint_takers(A, need)
    for u, _, _ in summed.values():
        count[u] += 1
    if out >= 0:
        count[out] += 1  # (the output's block holds the seed: never written whole)
    fresh = {}
    for c in escapes:
        if not ESCAPES[TABLE[A.code[c]].name].vjp_into:
            continue
        bits = escape_writes(int(need[c]), a[c], b[c], count, A.is_array, c in summed)
        if bits:
            fresh[c] = bits
    return fresh


def _fresh_writers(A, need, fresh, out):
    """An escape's adjoint that one swept row alone adds to, a block of that row's size: the
    row zeroes it just before adding (need bits FRESH_A / FRESH_B), while in cache, and the
    escape's rule stops zeroing it after reading, a pass over memory (W2's 2 MB adjoint of Qx).
    Updates `need` and the escapes' bits in `fresh`."""
    a, b = A.R[:, 1], A.R[:, 2]
    family = _FAMILY_OF[A.code]
    for c, bits in fresh.items():
        if not bits & ZEROES_OWN or c == out:  # (the output's block holds the seed)
            continue
        adds_a = (a == c) & ((need & jit.NEED_A) != 0)
        adds_b = (b == c) & ((need & jit.NEED_B) != 0)
        rows = np.flatnonzero(adds_a | adds_b)
        if len(rows) != 1:
            continue
        j = int(rows[0])
        if family[j] in (_INPUT, _ESCAPE) or not A.is_array[j] or A.size[j] != A.size[c]:
            continue
        need[j] |= (jit.FRESH_A if adds_a[j] else 0) | (jit.FRESH_B if adds_b[j] else 0)
        fresh[c] = bits & ~ZEROES_OWN


def need_masks(v, nums):
    """(root, live, need) of a gradient of v's output with respect to its inputs `nums` (see
    ``jit.need_pass``)."""
    n = len(v.A.sv)
    src = np.zeros(n, np.uint8)
    for i in nums:
        if v.slots[i] is not None:
            src[v.slots[i]] = 1
    root = np.zeros(n, np.uint8)
    root[v.out._slot] = 1
    live = np.zeros(n, np.uint8)
    need = np.zeros(n, np.uint8)
    jit.need_pass(cut_rows(v.t, v.A.R), src, root, live, need)
    return root, live, need


def _seeded_runs(v, need, keep):
    """Mark the runs closed by a sum whose reverse a straight variant's forward sweeps
    (``jit.seed_pass``, need bit SEEDED); returns (first row, sum row) of those worth threads."""
    A = v.A
    first = np.full(len(A.sv), -1, np.int64)
    if not v.straight or not jit.seed_pass(A.R, A.S, A.IA, need, keep, first):
        return []
    return [(int(first[e]), int(e)) for e in np.flatnonzero(first >= 0)
            if A.size[first[e]] >= THREAD_SIZE]


def _plain_runs(v, need, seeded_runs):
    """(first row, end row) of the runs of THREAD_SIZE or more elements, other than seeded
    ones, that a straight variant's forward sweep meets (``Variant._runs``: plain runs, and
    runs closed by a sum over lines, with the sum): a threaded call splits them too."""
    if not v.straight:
        return []
    n = len(v.A.sv)
    return [(r0, e) for r0, e in v._runs  # (a straight variant has no cuts: one range)
            if not (e < n and need[e] & jit.SEEDED)  # (a seeded run: in seeded_runs or small)
            and not any(r0 <= s1 and s0 < e for s0, s1 in seeded_runs)]


class ValuePlan:
    """What a value-only call of a straight variant needs: the runs that a gradient with respect
    to `nums` would seed (their values in scratch, their sums block by block, no reverse: need
    bit VALUES), and no adjoint arena (the sweep reads none without a reverse)."""

    def __init__(self, v, nums):
        A = v.A
        self.rows = len(A.sv)
        root, _, need = need_masks(v, nums)
        self.split = _seeded_runs(v, need, root.copy())
        self.plain = _plain_runs(v, need, self.split)  # (split beside seeded ones)
        values = np.where(need & jit.SEEDED, jit.SEEDED | jit.VALUES, 0).astype(np.uint8)
        self.G, self.GO = np.zeros(1), np.zeros(1, np.int64)
        self.value_args = (A.R, A.S, A.VA, self.GO, A.sv, self.G, A.IA, A.FA, values)


class Plan:
    """What a gradient of one variant with respect to some inputs needs, computed once: the
    need masks, the adjoint arena and what to read from it and clear in it after a call."""

    def __init__(self, v, nums):
        A = v.A
        n = self.rows = len(A.sv)
        root, live, need = need_masks(v, nums)
        self.live, self.need = live, need
        # hooked slots the gradient reaches: their adjoints stay in the arena, cuts after them
        self.hooked = [s for s in v.hooks.slots if live[s]] if v.hooks is not None else []
        self.summed = {} if v.t.functions else summed_operands(v.t, A, need, live,
                                                                {v.out._slot, *self.hooked})
        stored = live
        self.split = []  # (first row, sum row) of the seeded runs worth threads
        self.plain = []  # (first row, end row) of the other runs a straight call splits
        if not v.t.functions:  # (a Function's rule reads and writes the arena in Python)
            # adjoints that never leave their blocked run stay in scratch, not in the arena
            keep = root.copy()
            for u, _, _ in self.summed.values():  # an escape adds to it: in the arena
                keep[u] = 1
            keep[self.hooked] = 1  # a hook reads and writes it
            # runs closed by a sum: their reverse inside their forward
            self.split = _seeded_runs(v, need, keep)
            self.plain = _plain_runs(v, need, self.split)
            cuts, dropped = reverse_cuts(v.t, need, self.hooked)
            bounds = np.array(segment_bounds(n, cuts, dropped), dtype=np.int64)
            if jit.local_pass(A.R, A.S, A.IA, need, keep, bounds):
                stored = live & ((need & jit.LOCAL) == 0)
        # a seeded sum's seed, the sum's adjoint on the last call, in a cell per row after
        # the arena (``jit._interp._seed_cell``)
        seeds = n if np.any(need & jit.SEEDED) else 0
        GO, G = self.GO, self.G = arena(A, stored, seeds)
        # the kernels zero the adjoint of every row they sweep (need bit 4), so the arena is
        # clean for the next call; what they do not sweep is zeroed after reading (rest)
        family = _FAMILY_OF[A.code]
        swept = (need != 0) & (family != _INPUT) & (family != _ESCAPE)
        need[swept] |= jit.CLEAR
        self.fresh = {} if v.t.functions else _sole_contributions(A, need, v.escapes,
                                                                  v.out._slot, self.summed)
        for c in v.escapes:  # their rules zero their own adjoints, still in cache
            if need[c] and live[c]:
                self.fresh[c] = self.fresh.get(c, 0) | ZEROES_OWN
                swept[c] = True
        if not v.t.functions:
            _fresh_writers(A, need, self.fresh, v.out._slot)
        # an operand's adjoint that an escape's rule writes whole (fresh bits 1 / 2) need not be
        # zeroed once read (W2: the centring's 2 MB adjoint)
        for c, bits in self.fresh.items():
            for s, bit in ((int(A.R[c, 1]), WRITES_A), (int(A.R[c, 2]), WRITES_B)):
                if bits & bit and swept[s]:
                    need[s] &= ~np.uint8(jit.CLEAR)
        self.rest = [(int(s), int(GO[s]), int(GO[s]) + int(A.size[s]))
                     for s in np.flatnonzero(live.astype(bool) & ~swept)]
        self.dirty = True
        self.args = (A.R, A.S, A.VA, GO, A.sv, G, A.IA, A.FA, need)  # sweep's first nine
        self.reverse_runs = _reverse_runs(A, need, v.straight)
        s = v.out._slot
        self.seed_at = (int(GO[s]), int(GO[s]) + int(A.size[s])) if live[s] else None
        self.grads = []  # (slot or None, shape, lo, hi) per input of nums
        for i in nums:
            s = v.slots[i]
            if s is None or not live[s]:
                self.grads.append((None, v.shapes[i], 0, 0))
            else:
                self.grads.append((s, v.shapes[i], int(GO[s]), int(GO[s]) + int(A.size[s])))
        # inputs whose gradient the sweep writes straight into the array returned (the
        # output's own slot excepted: its seed is in the arena)
        self.large = list(dict.fromkeys(
            s for s, _, lo, hi in self.grads if s is not None and A.is_array[s]
            and hi - lo >= ZERO_COPY_SIZE and s != v.out._slot))


def _reverse_runs(A, need, seeded):
    """runs(lo, hi): the blocked runs of THREAD_SIZE or more elements that a reverse sweep of
    rows lo..hi-1 with `need` meets (`seeded`: a straight variant's whole call, whose forward
    swept the seeded runs' reverse), highest first, found once per range (``sweep_segments``
    and ``_threaded_sweep`` split them among threads)."""
    found = {}

    def runs(lo, hi):
        r = found.get((lo, hi))
        if r is None:
            buf = np.empty(((hi - lo) // 2 + 1, 2), np.int64)
            count = jit.reverse_run_pass(A.R, A.S, A.IA, need, lo, hi, int(seeded), THREAD_SIZE,
                                         buf)
            r = found[lo, hi] = [(int(r0), int(r1)) for r0, r1 in buf[:count]]
        return r

    return runs


def hand_out(p, direct=None):
    """The gradients of plan p's inputs after its sweep, the arena clean for the next call:
    copies of their adjoints (the arena is reused), or the arrays a redirected adjoint went
    to (`direct`: slot -> (array, arena offset)); the other adjoints' blocks zeroed."""
    G, out, handed = p.G, [], set()
    direct = direct or {}
    for slot, shape, lo, hi in p.grads:
        if slot is None:  # not an input slot, or not on a path to the output
            out.append(np.zeros(shape))
        elif slot in direct:
            g = direct[slot][0].reshape(shape)
            out.append(g.copy() if slot in handed else g)  # (an argnum given twice)
            handed.add(slot)
        elif shape:  # one copy: the arena is reused by the next call
            out.append(G[lo:hi].reshape(shape).copy())
        else:
            out.append(np.float64(G[lo]))
    for slot, lo, hi in p.rest:
        if slot not in direct:  # (a redirected adjoint left its arena block untouched)
            G[lo:hi] = 0.0
    p.dirty = False
    return out
