"""The jitted forward-mode driver: k tangent directions through a recording in one sweep.

Used by the functional transforms (jvp, linearize, jacfwd) when the recording is *closed*: it
depends only on its own inputs (no tensor with history from outside, no custom Function), so
its tangents need no history and no Python per op. Per tape, oldest first: an activity pass
(``need_pass`` with every slot a root) marks the rows whose operands carry a tangent; the
tangent arena holds k directions per active slot (direction-major, ``T[TO[s] + j*size + e]``);
``jit.tangent_sweep`` runs between escape rows, whose forward rules are NumPy (``tape/escapes/``).
"""
from __future__ import annotations

import threading

import numpy as np

import jit
from jit.table import TABLE

from ..core.tape import cut_rows, linked_tapes, newest_tape_id
from ..escapes import ESCAPES, NUMPY, pack, split


class TangentProgram:
    """Tangents of `outs` for tangents of the leaves `xs`, all recorded on the tapes created
    between tape ids `first` and `last` (a closed recording)."""

    def __init__(self, xs, outs, tapes):
        self.xs = xs
        self.outs = outs
        self.plans = []  # per tape, oldest first: (tape, arrays, live, act, base offsets)
        ids = {id(x): j for j, x in enumerate(xs)}
        live_of = {}
        for t in sorted(tapes, key=lambda t: t.id):
            A = t.build()
            n = len(A.sv)
            src = np.zeros(n, np.uint8)
            seeds = []  # (slot, index of the input)
            for s, (leaf, _) in t.leaves.items():
                j = ids.get(id(leaf))
                if j is not None:
                    src[s] = 1
                    seeds.append((s, j))
            links = []
            for s, x in t.links.items():
                if live_of[x._tape.id][x._slot]:
                    src[s] = 1
                    links.append((s, x._tape.id, x._slot))
            live = np.zeros(n, np.uint8)
            act = np.zeros(n, np.uint8)
            jit.need_pass(cut_rows(t, A.R), src, np.ones(n, np.uint8), live, act)
            live_of[t.id] = live
            slots = np.flatnonzero(live)
            base = np.full(n, -1, np.int64)
            base[slots] = np.cumsum(A.size[slots]) - A.size[slots]  # offsets for k = 1
            total = int(A.size[slots].sum())
            cuts = sorted(s for s in t.escapes if act[s])
            self.plans.append((t, A, live, act, base, total, seeds, links, cuts))

    def run(self, tangents, k):
        """tangents[j]: (k, *xs[j].shape) -> list of (k, *out.shape) per output."""
        arenas = {}
        for t, A, live, act, base, total, seeds, links, cuts in self.plans:
            TO = base * k
            T = np.empty(total * k)
            for s, j in seeds:
                o = TO[s]
                T[o:o + k * A.size[s]] = np.reshape(tangents[j], -1)
            for s, tid, src_slot in links:
                T2, TO2, A2 = arenas[tid]
                o, o2 = TO[s], TO2[src_slot]
                T[o:o + k * A.size[s]] = T2[o2:o2 + k * A2.size[src_slot]]
            lo = 0
            for c in cuts:
                jit.tangent_sweep(A.R, A.S, A.VA, TO, A.sv, T, A.IA, A.FA, act, k, lo, c)
                _run_escape(t, A, c, T, TO, act, k)
                lo = c + 1
            jit.tangent_sweep(A.R, A.S, A.VA, TO, A.sv, T, A.IA, A.FA, act, k, lo, len(A.sv))
            arenas[t.id] = (T, TO, A)
        out = []
        for o in self.outs:
            shape = (k,) + o.shape
            if o._tape is None or o._tape.id not in arenas:
                out.append(np.zeros(shape))
                continue
            T, TO, A = arenas[o._tape.id]
            live = next(p[2] for p in self.plans if p[0] is o._tape)
            s = o._slot
            out.append(T[TO[s]:TO[s] + k * A.size[s]].reshape(shape).copy() if live[s]
                       else np.zeros(shape))
        return out


def _run_escape(t, A, c, T, TO, act, k):
    """An escape row's forward rule (NumPy, batched over the k directions)."""
    R = A.R
    sa, sb = int(R[c, 1]), int(R[c, 2])
    sha, shb, shy, params = t.escapes[c]
    esc = ESCAPES[TABLE[A.code[c]].name]
    outs = esc.outputs(sha, shb, **params)

    def tangent(s, shape):
        return T[TO[s]:TO[s] + k * A.size[s]].reshape((k,) + tuple(shape))

    ta = tangent(sa, sha) if act[c] & 1 else None
    tb = tangent(sb, shb) if act[c] & 2 else None
    y = np.reshape(t.value(c), shy)
    a = np.reshape(t.value(sa), sha)
    b = np.reshape(t.value(sb), shb) if sb >= 0 else None
    if len(outs) > 1:
        y = split(np, y, outs)
    g = esc.jvp(NUMPY, ta, tb, y, a, b, **params)
    if len(outs) > 1:
        g = pack(np, g, outs, k)
    T[TO[c]:TO[c] + k * A.size[c]] = np.reshape(np.broadcast_to(g, (k,) + tuple(shy)), -1)


def closed_tapes(outs, xs, first_id):
    """The tapes of a recording made from tape id `first_id` on, if it is closed (depends on
    nothing but the leaves `xs` and constants; no custom Function): else None."""
    last_id = newest_tape_id()
    ids = {id(x) for x in xs}
    tapes = list(linked_tapes(o._tape for o in outs))
    me = threading.get_ident()
    for t in tapes:
        if not first_id <= t.id <= last_id or t.thread != me or t.functions:
            return None
        if any(id(leaf) not in ids for leaf, _ in t.leaves.values()):
            return None
    return tapes
