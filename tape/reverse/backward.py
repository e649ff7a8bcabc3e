"""The backward driver: plans a reverse sweep over one or more tapes and runs it.

Per tape: a jitted need pass marks the rows on a path from a source (a leaf, a requested input
or a link to an older tape) to a root; the adjoint arena is allocated for the live slots only;
the jitted sweep runs between escape rows (NumPy reverse rules for BLAS/LAPACK), and the adjoints
of leaves and links are handed on: to ``.grad``, to the caller, or to the older tape's sweep.
Tapes are processed newest first, since links only point to older tapes.
"""
from __future__ import annotations

import heapq
import math
from itertools import chain

import numpy as np

import jit
from jit import NEED_A, NEED_B
from jit.table import OPCODE, TABLE

from ..parallel.gemm import cached_native_pieces, native_pieces
from ..escapes import ESCAPES, NUMPY, split
from ..core.hooks import multi_hook_scope, run_hooks
from . import arena_pool
from .written_whole import adjoint_takers, written_whole
from ..core.arrays import _FIELD, built_arrays
from ..core.tape import cut_rows, horizon
from ..parallel.threads import run_pieces, run_shares, thread_count
from ..core.saved_value import BACKWARD_TWICE, written_at
from ..core.value_pool import MIN_CELLS as POOLED, give_back, take

# Rows whose reverse rule never reads an operand's value: a leaf modified in place after
# recording is harmless when only these rows consume it.
_VALUE_FREE = {OPCODE[n] for n in ("add", "subtract", "neg", "copy", "sum", "cumsum", "gather",
                                   "scatter", "where", "function", "function_out")}
_READS_VALUE = np.ones(256, bool)  # by opcode (a lookup: np.isin sorts, ~30x slower on a row)
_READS_VALUE[sorted(_VALUE_FREE)] = False
_ESCAPE_CODES = frozenset(i for i, p in enumerate(TABLE) if p.family == "escape")

# An escape's bits in a compiled plan's `fresh`: its rule writes operand a's / b's adjoint whole
# (WRITES_A / WRITES_B: no zeroing before, the same bit as the operand's need bit), and its own
# adjoint is zeroed by the rule after reading (ZEROES_OWN)
WRITES_A, WRITES_B, ZEROES_OWN = NEED_A, NEED_B, 4


def run(roots, seeds, inputs=None, retain_graph=False):
    """Sweep from `roots` (tensors) seeded with `seeds` (arrays of the roots' shapes).

    With `inputs` None, leaf gradients accumulate into ``.grad``. Otherwise returns a list with
    the gradient of each input (None where no path reaches it).
    """
    with multi_hook_scope():
        return _run(roots, seeds, inputs, retain_graph)


def _run(roots, seeds, inputs, retain_graph):
    want = None  # id of each requested input -> its positions in `inputs` (it may repeat)
    if inputs is not None:
        want = {}
        for i, x in enumerate(inputs):
            want.setdefault(id(x), []).append(i)
    out = None if inputs is None else [None] * len(inputs)
    oldest = horizon(inputs)
    pending = {}  # tape id -> (tape, [(slot, seed)])
    leaf_grads = {}  # id(leaf) -> [leaf, gradient summed over tapes]

    def deliver_leaf(leaf, g):
        if want is not None and id(leaf) not in want:
            return
        entry = leaf_grads.get(id(leaf))
        if entry is None:
            leaf_grads[id(leaf)] = [leaf, g]
        else:
            entry[1] = entry[1] + g

    for r, s in zip(roots, seeds):
        if not r._rg:
            raise RuntimeError("element of the outputs does not require grad and has no recorded "
                               "history: nothing to differentiate (did you build it under "
                               "no_grad, or from inputs that do not require grad?)")
        if r.is_leaf:
            deliver_leaf(r, np.reshape(np.array(s, dtype=np.float64), r.shape))
            continue
        pending.setdefault(r._tape.id, (r._tape, []))[1].append((r._slot, s))
    heap = [-k for k in pending]
    heapq.heapify(heap)
    while heap:
        tid = -heapq.heappop(heap)
        t, tape_seeds = pending.pop(tid)
        for link_tape, slot, g in _sweep_tape(t, tape_seeds, want, inputs, out, deliver_leaf,
                                              retain_graph, oldest):
            if link_tape.id not in pending:
                pending[link_tape.id] = (link_tape, [])
                heapq.heappush(heap, -link_tape.id)
            pending[link_tape.id][1].append((slot, g))
    _deliver_leaves(leaf_grads, want, out)
    return out


def _deliver_leaves(leaf_grads, want, out):
    for leaf, g in leaf_grads.values():
        g = g.reshape(leaf.shape)  # (an array: the method skips np.reshape's dispatch)
        m = leaf._meta
        if m.hooks:
            g = run_hooks(m.hooks, g, f"a leaf tensor of shape {leaf.shape}")
        if want is None:
            if m.grad is None:
                m.grad = g  # the caller's own array already
            else:
                m.grad += g
            for fn in list(m.post_hooks.values()):
                fn(leaf)
        else:
            for i in want[id(leaf)]:
                out[i] = g if out[i] is None else out[i] + g


def _sweep_tape(t, tape_seeds, want, inputs, out, deliver_leaf, retain_graph, oldest=None):
    if t.released:
        raise RuntimeError(BACKWARD_TWICE)
    if t.built is None and not retain_graph and _sweeps_whole(t):
        results = _sweep_whole(t, tape_seeds, want, inputs)
        if results is not None:
            for x, is_leaf, g in results:
                if is_leaf:
                    deliver_leaf(x, g)
                else:
                    for i in want[id(x)]:
                        out[i] = g if out[i] is None else out[i] + g
            return []  # (a tape with links is never swept this way)
    A = t.build()
    root, live, need = plan_need(t, A, [slot for slot, _ in tape_seeds], want, inputs, oldest)
    swept = need | root
    summed = count = None
    if t.escapes and not t.functions and not t.packed:  # (packed: values behind user hooks)
        keep = {slot for slot, _ in tape_seeds}.union(t.hooks or ())
        if want is not None:
            keep.update(x._slot for x in inputs if x._tape is t)
        count = adjoint_takers(A, need)
        summed = summed_operands(t, A, need, live, keep, count)
    fresh, whole = None, ()
    if not t.functions:  # (a Function's backward adds to blocks outside the rows)
        fresh, whole = written_whole(t, A, need, count, summed or {},
                                     [slot for slot, _ in tape_seeds])

    GO, G = arena(A, live, unzeroed=whole)
    for slot, s in tape_seeds:
        if live[slot]:  # a seed that reaches no source (e.g. a link into a tape of constants)
            o = GO[slot]
            G[o:o + A.size[slot]] += np.reshape(s, -1)
    hooked = [s for s in t.hooks if live[s]] if t.hooks else ()
    hubs = [s for s in t.functions if live[s]] if t.functions else ()
    sweep_segments(t, A, G, GO, need, live, hooked, hubs, retain_hooked=want is None,
                   fresh=fresh, summed=summed)

    for slot, (leaf, _) in t.leaves.items():
        if live[slot]:
            deliver_leaf(leaf, adjoint(A, G, GO, slot, leaf.shape))
    if want is not None:
        for x in {id(x): x for x in inputs}.values():
            if x._tape is t and x._meta is None and live[x._slot]:
                g = adjoint(A, G, GO, x._slot, x.shape)
                for i in want[id(x)]:
                    out[i] = g if out[i] is None else out[i] + g
    links = [(x._tape, x._slot, adjoint(A, G, GO, slot, x.shape))
             for slot, x in t.links.items() if live[slot]]
    if not retain_graph:
        free_rows(t, A, swept)  # (with the rows summed_operands left out: they are done too)
    arena_pool.recycle(G)
    return links


def _sweeps_whole(t):
    """Should ``_sweep_whole`` take this tape (not yet built, no retain_graph asked)? Nothing
    for Python between its rows (no escapes, hooks, Function calls, packed values), every leaf
    at the version it was recorded at, CPython (``jit.build_tape``'s data pointers), and no
    sign of a nested transform (links to older tapes, rows it or a create_graph backward
    recorded: ``Tape.nested``): an outer backward leaves most rows of those unswept, and
    ``_sweep_whole`` would hand the tape to the general path after a need pass for nothing."""
    if (t.escapes or t.hooks or t.functions or t.packed or t.links or t.nested
            or _FIELD is None):
        return False
    for leaf, version in t.leaves.values():
        if leaf._meta is not None and leaf._meta.version != version:
            return False  # (the general path names the op that reads it, or lets it be)
    return True


def grad_of_one(out, seed, x):
    """``run([out], [seed], [x])[0]``, `x` a leaf no hook is registered on, the way
    ``tape.grad`` calls it: when `out`'s tape is one the lean path sweeps (``_sweeps_whole``:
    no links, so no other tape; no hooks, so no multi-grad hook can fire), without the general
    driver's heap, dicts and hook scope. Returns x's gradient, or None when no path reaches x."""
    t = out._tape
    if (out._meta is None and out._rg and not t.released and t.built is None
            and not x._meta.hooks and _sweeps_whole(t)):
        results = _sweep_whole(t, ((out._slot, seed),), {id(x): None}, (x,))
        if results is not None:
            return results[0][2] if results else None
    return run([out], [seed], [x])[0]


def _sweep_whole(t, tape_seeds, want, inputs):
    """``_sweep_tape`` of a tape its first backward sweeps whole (``_sweeps_whole``), in five
    jitted calls with little Python between them: ``jit.whole_prepare``, ``jit.need_pass``,
    ``jit.whole_arena``, ``jit.eager_reverse`` (the sweep's tiers), ``jit.whole_outputs``. The
    same arrays, need pass, arena and sweep as the general path, so the same bits, without its
    Python for what such a tape cannot have (escapes, hooks, links, freed rows, partial
    release). Returns None when this backward leaves a row with an operand unswept: the general
    path then takes the tape (built); else [(source, is a leaf, its adjoint), ...] for the
    sources a path reaches, the tape released."""
    t.seal()
    outs = []  # (slot, tensor, is a leaf): the sources, whose adjoints the sweep hands on
    for slot, (leaf, _) in t.leaves.items():
        if want is None or id(leaf) in want:
            outs.append((slot, leaf, True))
    if want is not None:
        for x in inputs if len(inputs) == 1 else {id(x): x for x in inputs}.values():
            if x._tape is t and x._meta is None:
                outs.append((x._slot, x, False))
    n = len(t.sv)
    m = len(t.av)
    roots, seeds, f = [], [], n
    for slot, s in tape_seeds:
        roots += (slot, f)
        seeds.append(s)
        f += s.size
    places, at = [], 0
    for slot, x, _ in outs:
        places += (slot, at, 0)
        at += x.size
    head = _whole_head()
    size = head + 3 * n + 5 * m + len(roots) + len(places)
    I = np.fromiter(chain((n, m, _FIELD, len(tape_seeds), len(outs)), t.rows, t.side,
                          [0 if v is None else id(v) for v in t.av], roots, places), np.int64,
                    size)
    if f == n + len(seeds):  # one value per seed
        F = np.fromiter(chain(t.sv, [s.item() for s in seeds]), np.float64, f)
    else:
        F = np.concatenate([np.fromiter(t.sv, np.float64, n)] + [s.reshape(-1) for s in seeds])
    w = _work_arrays(n, m)
    R, S, V, is_array, M, src, root, live, need, VA, GO = w[1]
    jit.whole_prepare(I, F, R, S, V, is_array, M)
    jit.need_pass(cut_rows(t, R), src, root, live, need)
    spare = arena_pool.spare()
    end = jit.whole_arena(I, F, R, V, is_array, M, spare, False)
    if end < 0:
        arena_pool.keep(spare, spare)
        t.build(built_arrays(t, R, S, F[:n], VA, V[0], is_array))
        return None  # (F, V: kept by their views; w not put back: the tape keeps them)
    if end <= spare.size:
        G = spare[:end]
    else:  # (the kernels allocate nothing: jit/_plan.py)
        G = np.empty(end)
        jit.whole_arena(I, F, R, V, is_array, M, G, True)
    IA = np.concatenate(t.ia) if t.ia else _NO_IA
    FA = np.concatenate(t.fa) if t.fa else _NO_FA
    jit.eager_reverse(R, S, VA, GO, F[:n], G, IA, FA, need, 0, n)
    grads = np.empty(at)
    reached = jit.whole_outputs(I, V, M, G, grads)
    arena_pool.keep(spare, G)
    if n <= _WORK_ROWS:
        _WORK.append(w)  # (nothing holds them now: every result is in grads)
    if reached == len(outs) == 1:  # (most calls: one input, reached)
        slot, x, is_leaf = outs[0]
        results = ((x, is_leaf, grads.reshape(x.shape)),)
    else:
        done = size - len(places) + 2  # each output's "live" cell
        results = []
        for j, (slot, x, is_leaf) in enumerate(outs):
            if I[done + 3 * j]:
                o = places[3 * j + 1]
                results.append((x, is_leaf, grads[o:o + x.size].reshape(x.shape)))
    t.release()
    return results


# The work arrays of a small tape's lean backward are reused by the next one of the same size
# (a loop of tape.grad calls): allocating them and taking the row views the jitted calls are
# passed costs more than the rows' work. Taken by pop and given back by append (each atomic
# under the GIL), so two threads never share one set; only sets of up to _WORK_ROWS rows are
# kept, at most _WORK_SETS of them.
_WORK = []
_WORK_ROWS = 256
_WORK_SETS = 4


def _work_arrays(n, m):
    """(key, arrays) for a lean backward of a tape of n rows and m side rows: R (n x 4),
    S (m x 3), V (size, VA, GO: 3 x n), is_array, M (src, root, live, need: 4 x n), and the
    row views src, root, live, need, VA, GO; a kept set of that size when there is one."""
    key = (n, m)
    try:
        w = _WORK.pop()
    except IndexError:
        w = None
    if w is not None and w[0] == key:
        return w
    if w is not None and len(_WORK) < _WORK_SETS - 1:
        _WORK.insert(0, w)  # (another size: kept for its own loop)
    V = np.empty((3, n), np.int64)
    M = np.empty((4, n), np.uint8)
    return key, (np.empty((n, 4), np.int64), np.empty((m, 3), np.int64), V,
                 np.empty(n, bool), M, M[0], M[1], M[2], M[3], V[1], V[2])


_NO_IA = np.zeros(1, np.int64)  # (read-only to the sweep: one array serves every tape)
_NO_FA = np.zeros(1)
_CONSTANTS = [None]


def _whole_head():
    """The length of I's header of ``jit.whole_prepare`` (looked up once: ``import tape`` does
    not load Numba)."""
    if _CONSTANTS[0] is None:
        from jit._plan import WHOLE_HEAD

        _CONSTANTS[0] = WHOLE_HEAD
    return _CONSTANTS[0]


def last_readers(A, need):
    """The last row that reads each slot's value in a reverse sweep with `need` (-1: none):
    the value-reading rows read their operands' values and their own."""
    R = A.R
    rows = np.flatnonzero(need)
    rows = rows[_READS_VALUE[A.code[rows]]]  # (the others read no value)
    last = np.full(len(R), -1, np.int64)
    for col in (1, 2):
        ops = R[rows, col]
        ok = ops >= 0
        np.maximum.at(last, ops[ok], rows[ok])
    last[rows] = np.maximum(last[rows], rows)
    return last


UNPACK_BUDGET = 1 << 26  # bytes of packed saved values a backward unpacks at a time


class _Unpacker:
    """Unpacks values packed by saved_tensors_hooks segment by segment.

    A value is unpacked just before the first segment that reads it (its last reader, since the
    sweep runs backwards) and dropped as soon as the sweep has passed below its own row (no
    earlier row reads it). Segments are split so that about UNPACK_BUDGET bytes are unpacked at a
    time: offloading to disk then bounds the memory of the backward as well as the forward's.
    """

    def __init__(self, t, A, need):
        self.t, self.A = t, A
        last = last_readers(A, need)
        self.last = {int(s): int(last[s]) for s in A.packed_slot if last[s] >= 0}
        self.live = set()

    def wrap(self, sweep):
        def split_sweep(lo, hi):
            pending = sorted(((ln, s) for s, ln in self.last.items()
                              if s < hi and ln >= lo and s not in self.live), reverse=True)
            top, batch, used = hi, [], self._bytes_live()
            for ln, s in pending:
                b = 8 * int(self.A.size[s])
                if batch and used + b > UNPACK_BUDGET and ln + 1 < top:
                    self._run(sweep, ln + 1, top, batch)
                    top, batch, used = ln + 1, [], self._bytes_live()
                batch.append(s)
                used += b
            self._run(sweep, lo, top, batch)

        return split_sweep

    def _run(self, sweep, lo, hi, batch):
        self.unpack(batch)
        sweep(lo, hi)
        for s in [s for s in self.live if s >= lo]:  # no row below lo reads them
            self.t.av[self.t.side_of[s]] = None
            self.A.VA[s] = 0
            self.live.discard(s)

    def unpack(self, slots):
        t, A = self.t, self.A
        for s in slots:
            s = int(s)
            if s < 0 or s in self.live or s not in self.last:
                continue
            k = t.side_of[s]
            v = t.packed[k].value()
            t.av[k] = v
            A.VA[s] = v.ctypes.data
            self.live.add(s)

    def _bytes_live(self):
        return sum(8 * int(self.A.size[s]) for s in self.live)


def arena(A, mask, extra=0, unzeroed=()):
    """Offsets GO and a zeroed adjoint arena G for the slots in `mask`: 0-d slots at G[slot],
    array slots packed after them, then `extra` more cells. The blocks of the slots in
    `unzeroed` may hold anything: one row writes each whole (``written_whole``)."""
    GO = np.empty(len(A.sv), np.int64)
    end = jit.arena_offsets(A.is_array, A.size, _bytes(mask), GO)
    holes = sorted((int(GO[s]), int(GO[s] + A.size[s])) for s in unzeroed)
    return GO, arena_pool.zeroed(end + extra, holes)


def _bytes(mask):
    """A mask as the uint8 array the jitted passes take (a view of a bool mask)."""
    if mask.dtype == np.uint8:
        return mask
    return mask.view(np.uint8) if mask.dtype == np.bool_ else (mask != 0).view(np.uint8)


def segment_bounds(n, cuts, dropped):
    """(lo, hi) of each jitted reverse sweep between the `cuts` (rows, descending): a cut row
    is swept with the segment below it unless it is in `dropped` (an escape row: its reverse
    rule runs in NumPy). Blocked runs never cross a bound, so ``jit.local_pass`` needs these."""
    out, hi = [], n
    for c in cuts:
        out.append((c + 1, hi))
        hi = c if c in dropped else c + 1
    out.append((0, hi))
    return out


def reverse_cuts(t, need, hooked=(), hubs=()):
    """Where the reverse sweep stops for Python, and which of those rows Python sweeps itself."""
    cuts = sorted({s for s in t.escapes if need[s]}.union(hooked, hubs), reverse=True)
    return cuts, {c for c in cuts if c in t.escapes and need[c]}


def sweep_segments(t, A, G, GO, need, has, hooked, hubs, retain_hooked, fresh=None,
                   summed=None, threads=1, runs=None, backward_state=None):
    """Run the reverse sweep over the whole tape with the masks `need`, cut where Python must
    run: before an escape row (its reverse rule is NumPy), after the last consumer of a slot in
    `hooked` (its gradient is then complete: its hooks run) and at the hubs of Function calls in
    `hubs`. `has` marks the slots that hold an adjoint in G. `fresh` maps an escape row to the
    operand bits (1: a, 2: b) whose adjoint blocks its rule writes whole (a rule with
    ``vjp_into`` that alone contributes to them), and 4: zero the row's own adjoint once read
    (a compiled tape's arena is clean for its next call). `summed` maps an escape row to the
    operand whose adjoint its a adjoint, summed over its rows, is (``summed_operands``).
    `threads`: how many threads an escape's rule may split its work among (``compile``'s
    argument, ``_run_escape``), and, with `runs` (runs(lo, hi): the large blocked runs of a
    segment, highest first), each of those runs' blocks (the same bits: each element's
    adjoint gets the same terms in the same order). `backward_state`: the BackwardState that
    ``state.hook`` points look their members up in instead of their own (``run_hooks``).
    Without `runs` (an eager backward) the jitted segments run in the sweep's tiers
    (``jit.eager_reverse``), compiled as a tape first needs them; a replay's take ``sweep``."""
    if not (t.escapes or hooked or hubs or t.packed or runs is not None):
        # nothing for Python between rows: one jitted sweep (most small tapes), in tiers
        jit.eager_reverse(A.R, A.S, A.VA, GO, A.sv, G, A.IA, A.FA, need, 0, len(A.sv))
        return
    cuts, dropped = reverse_cuts(t, need, hooked, hubs)
    hooked, hubs = set(hooked), set(hubs)
    T = thread_count(threads) if runs is not None and threads != 1 else 1

    def reverse(lo, hi, *part):
        if runs is None:  # (an eager backward: no worker shares, so the tiers take it)
            jit.eager_reverse(A.R, A.S, A.VA, GO, A.sv, G, A.IA, A.FA, need, lo, hi)
        else:
            jit.reverse_sweep(A.R, A.S, A.VA, GO, A.sv, G, A.IA, A.FA, need, lo, hi, *part)

    def sweep(lo, hi):
        reverse_in_shares(reverse, runs(lo, hi) if T > 1 else (), T, lo, hi)

    unpacker = _Unpacker(t, A, need) if t.packed else None
    if unpacker is not None:
        sweep = unpacker.wrap(sweep)
    for (lo, hi), c in zip(segment_bounds(len(A.sv), cuts, dropped), cuts + [None]):
        sweep(lo, hi)
        if c is None:
            break
        if c in hooked:
            h = t.hooks[c]
            o = GO[c]
            g = G[o:o + A.size[c]].reshape(h.shape)
            g[...] = run_hooks(h.hooks, g, f"a tensor of shape {h.shape}",
                               backward_state)
            if h.retain and retain_hooked:
                h.grad = g.copy() if h.grad is None else h.grad + g
        if c in hubs:
            _run_function(t.functions[c], A, G, GO, has, need)
        if c in dropped:
            if unpacker is not None:
                unpacker.unpack((c, A.R[c, 1], A.R[c, 2]))
            _run_escape(t, A, c, G, GO, need[c], fresh.get(c, 0) if fresh else 0,
                        summed.get(c) if summed else None, threads)


def reverse_in_shares(reverse, runs, T, lo, hi):
    """reverse(lo', hi') down through rows hi-1..lo in this thread, but each blocked run
    (r0, r1) of `runs` (highest first, within lo..hi) by T workers, reverse(r0, r1, part) on
    their shares of its blocks (``run_shares``)."""
    for r0, r1 in runs:
        reverse(r1, hi)
        run_shares(lambda part: reverse(r0, r1, part), T)  # noqa: B023 (called at once)
        hi = r0
    reverse(lo, hi)


def adjoint(A, G, GO, slot, shape):
    """A slot's adjoint: a view when it is most of the arena (saves copying a large gradient),
    else a copy, so that a small gradient does not keep the whole arena alive."""
    o = GO[slot]
    n = A.size[slot]
    g = G[o:o + n].reshape(shape)
    return g if 2 * n >= G.size else g.copy()


def free_rows(t, A, rows):
    """After a backward without retain_graph: mark `rows` (a mask) swept, release the Function
    calls and packed values no unswept row needs, and the whole tape once every row is swept."""
    n = len(A.sv)
    if jit.mark_swept(t.freed, _bytes(rows), A.R):
        t.release()
        return
    if t.functions:
        for node in t.functions.values():
            if all(t.freed[r] for r, _ in node.chain):
                node.release()  # a Function's saved values go with its rows
    # values that no unswept row reads: packed ones (save_on_disk: their files) and arrays
    read = np.zeros(n, bool)
    dropped = np.empty(n, np.int64)
    for s in dropped[:jit.unread_values(t.freed, A.R, _READS_VALUE, A.is_array, A.VA, read,
                                        dropped)].tolist():
        t.av[t.side_of[s]] = None  # never read again: every row that reads it is swept
    if t.packed:
        for s in A.packed_slot[~read[A.packed_slot]]:
            k = t.side_of[int(s)]
            if k in t.packed:
                t.packed.pop(k).release()


def plan_need(t, A, root_slots, want, inputs, oldest=None):
    """The need pass of one tape for a backward from `root_slots` to the leaves in `want`
    (all leaves when None) and the non-leaf `inputs` on it; links to tapes from `oldest` on
    (``tape.horizon``; None: every link) are sources conservatively (the older tape decides
    exactly), older ones cannot reach an input. Checks freed rows and leaf versions.
    Returns (root, live, need)."""
    n = len(A.R)
    src, root, live, need = np.zeros((4, n), np.uint8)
    for slot, (leaf, _) in t.leaves.items():
        if want is None or id(leaf) in want:
            src[slot] = 1
    for slot, x in t.links.items():
        if oldest is None or x._tape.id >= oldest:
            src[slot] = 1
    if want is not None:
        for x in inputs:
            if x._tape is t and x._meta is None:
                src[x._slot] = 1
    for slot in root_slots:
        root[slot] = 1
    jit.need_pass(cut_rows(t, A.R), src, root, live, need)
    if t.freed is not None and t.freed.any() and t.freed[need != 0].any():
        raise RuntimeError(BACKWARD_TWICE)
    _check_versions(t, A, live, need)
    return root, live, need


def summed_operands(t, A, need, live, keep, count=None):
    """Escape row -> (slot u, sign, u's shape aligned to a's) where the rule's operand a is a row
    ``x ± u`` (or ``u - x``) with u broadcast along a's rows (the product's M axis) and only u's
    adjoint needed, and only the escape takes a's adjoint: u's adjoint is then the escape's a
    adjoint summed over its rows, which the rule (``vjp_a_rows``) sums before its product (W2's
    centring: the 2 MB adjoint of ``x - means`` and its 2.5 MFLOP product are never formed).
    Row a is then not swept and holds no adjoint; updates `need` and `live`. `keep`: slots
    whose own adjoint someone reads (outputs seeded, hooked tensors, inputs of a grad call).
    The eager backward and compiled plans both sum this way, so their bits agree. `count`:
    ``adjoint_takers(A, need)``, when the caller has it."""
    if count is None:
        count = adjoint_takers(A, need)
    summed = {}
    for c in sorted(t.escapes):
        s = int(A.R[c, 1])
        if (ESCAPES[TABLE[A.code[c]].name].vjp_a_rows is None or not need[c] & NEED_A or s in keep
                or count[s] != 1):
            continue
        name = TABLE[A.code[s]].name
        x, y = int(A.R[s, 1]), int(A.R[s, 2])
        nd = need[s] & (NEED_A | NEED_B)
        if name not in ("add", "subtract") or nd not in (NEED_A, NEED_B) or x < 0 or y < 0 or x == y:
            continue
        u = x if nd == NEED_A else y
        sha = t.escapes[c][0]  # (a's shape as the product reads it: leading ones dropped)
        if not A.is_array[u] or A.code[u] in _ESCAPE_CODES or len(sha) < 2:
            continue
        if _aligned(np.shape(t.value(s)), len(sha)) != sha:
            continue
        aligned = _aligned(np.shape(t.value(u)), len(sha))  # (u broadcasts to s: not None)
        if aligned[-2] != 1:  # u not broadcast along the rows
            continue
        summed[c] = (u, -1.0 if name == "subtract" and u == y else 1.0, aligned)
        need[s] = 0
        live[s] = 0
    return summed


def _aligned(shape, n):
    """`shape` broadcast-aligned to n axes: ones prepended, or leading ones dropped (None when
    it has more than n axes that are not)."""
    k = len(shape) - n
    if k > 0:
        return shape[k:] if all(d == 1 for d in shape[:k]) else None
    return (1,) * -k + shape


def _check_versions(t, A, live, need):
    for slot, (leaf, version) in t.leaves.items():
        if leaf._meta is None or leaf._meta.version == version or not live[slot]:
            continue
        R = A.R
        users = np.flatnonzero(((R[:, 1] == slot) & ((need & NEED_A) != 0))
                               | ((R[:, 2] == slot) & ((need & NEED_B) != 0)))
        readers = [u for u in users if A.code[u] not in _VALUE_FREE]
        if not readers:
            continue
        op = TABLE[A.code[readers[0]]].name
        raise RuntimeError(
            f"one of the values needed for gradient computation has been modified by an in-place "
            f"operation: the leaf tensor of shape {leaf.shape} used by op '{op}' is at version "
            f"{leaf._meta.version}; expected version {version}{written_at(leaf._meta)}. "
            f"Compute the gradient before updating the tensor in place, or record again after "
            f"the update.")


def _run_escape(t, A, slot, G, GO, nd, fresh=0, summed=None, threads=1):
    """Run a NumPy reverse rule (BLAS/LAPACK) between two jitted segments. `fresh`: operand
    bits whose adjoint block gets nothing else (the rule writes it whole: its reader need not
    zero it), and 4: zero the row's own adjoint afterwards, while it is still in cache.
    `summed`: (u, sign, shape): add sign * a's adjoint summed over its rows down to u's
    (aligned) shape to u's adjoint, in place of a's (see sweep_segments). `threads` > 1: a
    batched matmul large enough is split along its leading axis (``batch_pieces``), each piece
    the same BLAS calls as in the whole, so the same bits."""
    R = A.R
    p = ESCAPES[TABLE[A.code[slot]].name]
    sa, sb = int(R[slot, 1]), int(R[slot, 2])
    sha, shb, shy, params = t.escapes[slot]
    o = GO[slot]
    g = g_block = G[o:o + A.size[slot]].reshape(shy)
    y = np.reshape(t.value(slot), shy)
    a = np.reshape(t.value(sa), sha)
    b = np.reshape(t.value(sb), shb) if sb >= 0 else None
    outs = p.outputs(sha, shb, **params)
    if len(outs) > 1:  # several results packed in one row: the rule takes them apart
        g, y = split(np, g, outs), split(np, y, outs)

    def block(s, shape):
        return G[GO[s]:GO[s] + A.size[s]].reshape(shape)

    rows_to = None
    if summed is not None:
        u, sign, shape = summed
        rows_to = (block(u, shape), np.add if sign > 0 else np.subtract, shape)
        nd = int(nd) & ~1
    adjoints = tuple(block(s, sh) if nd & bit else None
                     for s, sh, bit in ((sa, sha, 1), (sb, shb, 2)))

    def cut(x, lo, hi):
        return x if hi is None or x is None else x[lo:hi]

    def rows():  # a's adjoint, summed over its rows, to u's
        u_block, op, shape = rows_to
        op(u_block, np.reshape(p.vjp_a_rows(g, b, shape), shape), out=u_block)

    def rule(lo=0, hi=None):  # the rule on the batch elements lo..hi-1 (hi None: all)
        adj = tuple(cut(x, lo, hi) for x in adjoints)
        into = tuple(x if fresh & bit else None for x, bit in zip(adj, (WRITES_A, WRITES_B)))
        if hi is None:
            args = (g, y, a, b, bool(nd & NEED_A), bool(nd & NEED_B))
        else:  # (pieces: matmul_blas only, one result)
            args = (g[lo:hi], y[lo:hi], a[lo:hi], cut(b, lo, hi), bool(nd & NEED_A),
                    bool(nd & NEED_B))
        # (with `into`, the rule may write those adjoints' blocks itself, and return them)
        if fresh & (WRITES_A | WRITES_B):
            ga, gb = p.vjp(NUMPY, *args, out=into)
        elif p.vjp_into and hi is None and not params:
            _add_rule_through_kept_memory(p, args, adj, nd)
            return
        else:
            ga, gb = p.vjp(NUMPY, *args, **params)
        for gs, to, into_s, bit in ((ga, adj[0], into[0], NEED_A), (gb, adj[1], into[1], NEED_B)):
            if nd & bit and gs is not into_s:
                if fresh & bit:
                    # the rule returned a new array: store g + 0 (the bits of adding g to
                    # zero), since the block, which nothing else adds to, may hold the last
                    # call's values
                    np.add(np.reshape(gs, to.shape), 0.0, out=to)
                else:
                    to += np.reshape(gs, to.shape)

    pieces = batch_pieces(p, sha, shb, shy, threads)
    if pieces and (rows_to is None or summed[0] not in (sa, sb)):
        # each piece one BLAS call, with little Python around it: threads in Python take turns
        # on the GIL, and a turn costs a thread's wake-up (~40 us); this thread sums the rows
        # after its piece (into another block than the rule's: the same bits in any order)
        def piece(lo, hi, first):
            rule(lo, hi)
            if first and rows_to is not None:
                rows()

        native = None
        if (nd & (NEED_A | NEED_B)) == NEED_B and fresh & WRITES_B:  # b's adjoint alone, a^T g
            # written whole: the workers' pieces natively
            native = cached_native_pieces(
                t.native, (slot, "reverse"), (t.value(sa), G, int(o), int(GO[sb]), tuple(pieces)),
                lambda: native_pieces(np.swapaxes(a, -1, -2), g, adjoints[1], pieces))
        run_pieces(piece, [(lo, hi, k == 0) for k, (lo, hi) in enumerate(pieces)], native)
    else:
        if rows_to is not None:
            rows()
        rule()
    if fresh & ZEROES_OWN:
        g_block[...] = 0.0


def _add_rule_through_kept_memory(p, args, adj, nd):
    """Add the reverse rule's adjoints (a rule that writes into given arrays: ``vjp_into``) to
    their blocks `adj`, the large ones computed into the thread's kept value memory and given
    back after (``value_pool``): a new array each call would fault in fresh pages."""
    bufs = [take(to.shape, to.size) if nd & bit and to.size >= POOLED else None
            for to, bit in zip(adj, (NEED_A, NEED_B))]
    ga, gb = p.vjp(NUMPY, *args, out=tuple(bufs))
    to_a, to_b = adj
    if nd & NEED_A:
        to_a += np.reshape(ga, to_a.shape)
    if nd & NEED_B:
        to_b += np.reshape(gb, to_b.shape)
    del ga, gb  # (the buffers' only references are now `bufs`' own)
    give_back(bufs)


# a batched matmul is split among threads from this many multiply-adds (W2's: 2.5 million)
THREAD_FLOPS = 1 << 20


def batch_pieces(p, sha, shb, shy, threads):
    """[(lo, hi), ...]: `threads` pieces (``compile``'s argument: resolved by
    ``thread_count`` only for a row worth splitting, since that reads the environment and asks
    the OS) of the leading axis for a matmul row whose operands and result share their batch
    axes (no batch broadcasting, so each batch element is one BLAS call of its own, whichever
    piece makes it), or None when it is not worth splitting."""
    if (threads == 1 or p.name != "matmul_blas" or len(shy) < 3 or len(sha) != len(shy)
            or len(shb) != len(shy) or sha[:-2] != shy[:-2] or shb[:-2] != shy[:-2]
            or shy[0] < 2 or math.prod(shy) * sha[-1] < THREAD_FLOPS):
        return None
    T = min(thread_count(threads), shy[0])
    if T < 2:
        return None
    cuts = [shy[0] * k // T for k in range(T + 1)]
    return [(lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:])]


def _run_function(node, A, G, GO, live, need):
    """Run a tape.Function's backward (Python) at its hub, between two jitted segments."""
    grads = []
    for slot, shape in node.outs:
        if slot is None or not live[slot]:
            grads.append(None)
        else:
            o = GO[slot]
            grads.append(G[o:o + A.size[slot]].reshape(shape).copy() if shape else
                         float(G[o]))
    for slot, g in node.run_backward(grads, need):
        o = GO[slot]
        G[o:o + A.size[slot]] += np.reshape(g, -1)
