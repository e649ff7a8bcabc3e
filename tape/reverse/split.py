"""Split backward with masks over the tape: B (stage-input gradients) now, W (weights) later.

For every tape the stage's outputs reach, two need passes give:

- ``need_f``: the (row, operand) adjoint products of one full backward to inputs and weights;
- ``need_b``: those of a backward to the inputs alone (bit for bit a subset of ``need_f``);
- ``need_w = need_f & ~need_b``: the products B leaves out (a matmul on the input path computes
  dX in B and dW in W).

Each product is computed by exactly one phase, so B + W does one full backward's work. A slot
that B reaches gets its complete adjoint in B (all of its consumers depend on the inputs too),
so W starts from the *frontier*: the B-complete adjoints of the rows W sweeps (and of the
outputs of Function calls W must run). Only those are held between the phases; values that no
remaining row reads are released after B.
"""
from __future__ import annotations

import numpy as np

import jit

from .backward import (BACKWARD_TWICE, _check_versions, adjoint, arena, free_rows, run_hooks,
                       sweep_segments)
from ..core.tape import cut_rows, linked_tapes


class _TapePlan:
    __slots__ = ("t", "A", "src_b", "src_f", "dep_b", "dep_f", "root_b", "root_f", "live_b",
                 "need_b", "live_f", "need_f", "need_w", "seeds", "kept")

    def __init__(self, t):
        self.t = t
        self.A = t.build()
        self.seeds = []  # (slot, adjoint) handed to this tape in the current phase
        self.kept = {}  # slot -> frontier adjoint, held from B to W


class SplitBackward:
    """What the input phase hands to the weight phase (``param_groups``).

    ``held_bytes``: bytes of adjoints held between the phases (the frontier); ``work``: adjoint
    products computed per phase, ``{"input": (products, elements), "weight": ..., "full": ...}``.
    """

    def __init__(self, plans, weights):
        self.plans = plans  # newest tape first
        self.weights = list(weights)
        self.leaf_seeds = []  # (weight, seed) for outputs that are weights themselves
        self.done = False
        self.work = {"input": _work(plans, "need_b"), "weight": _work(plans, "need_w"),
                     "full": _work(plans, "need_f")}

    @property
    def held_bytes(self):
        return sum(g.nbytes for p in self.plans for g in p.kept.values()) + sum(
            np.asarray(g).nbytes for p in self.plans for _, g in p.seeds) + sum(
            np.asarray(g).nbytes for _, g in self.leaf_seeds)

    def __repr__(self):
        return (f"<SplitBackward: {len(self.weights)} weights, {len(self.plans)} tapes, "
                f"{self.held_bytes} bytes held for the weight phase>")


def _work(plans, name):
    prods = elems = 0
    for p in plans:
        m = getattr(p, name)
        bits = (m & 1).astype(np.int64) + ((m >> 1) & 1)
        prods += int(bits.sum())
        elems += int((bits * p.A.size).sum())
    return prods, elems


def _tapes_of(roots):
    """Every tape the roots reach through links, oldest first."""
    tapes = list(linked_tapes(r._tape for r in roots if r._meta is None))
    if any(t.released for t in tapes):
        raise RuntimeError(BACKWARD_TWICE)
    return sorted(tapes, key=lambda t: t.id)


def _dep(t, A, src):
    """Slots that depend on a source (need_pass with every slot a root)."""
    n = len(src)
    live = np.zeros(n, np.uint8)
    jit.need_pass(cut_rows(t, A.R), src, np.ones(n, np.uint8), live, np.zeros(n, np.uint8))
    return live


def input_phase(roots, seeds, inputs, weights):
    """B: gradients of `inputs` (returned, and accumulated into the ``.grad`` of leaf inputs).
    Returns (dinputs, SplitBackward)."""
    in_ids = {id(x) for x in inputs}
    w_ids = {id(w) for w in weights}
    tapes = _tapes_of(roots)
    plans = {}
    for t in tapes:  # oldest first: sources, then what depends on them
        p = plans[t.id] = _TapePlan(t)
        n = len(p.A.sv)
        p.src_b = np.zeros(n, np.uint8)
        p.src_f = np.zeros(n, np.uint8)
        for slot, (leaf, _) in t.leaves.items():
            if id(leaf) in in_ids:
                p.src_b[slot] = p.src_f[slot] = 1
            elif id(leaf) in w_ids:
                p.src_f[slot] = 1
        for x in inputs:
            if x._meta is None and x._tape is t:
                p.src_b[x._slot] = p.src_f[x._slot] = 1
        for slot, x in t.links.items():
            q = plans[x._tape.id]
            p.src_b[slot] = q.dep_b[x._slot]
            p.src_f[slot] = q.dep_f[x._slot]
        p.dep_b = _dep(t, p.A, p.src_b)
        p.dep_f = _dep(t, p.A, p.src_f)
        p.root_b = np.zeros(n, np.uint8)
        p.root_f = np.zeros(n, np.uint8)
    for r in roots:
        if r._meta is None:
            plans[r._tape.id].root_b[r._slot] = plans[r._tape.id].root_f[r._slot] = 1
    order = [plans[t.id] for t in reversed(tapes)]
    reached = set()
    for p in order:  # newest first: what reaches the roots
        t, A = p.t, p.A
        n = len(A.sv)
        p.live_b, p.need_b = np.zeros(n, np.uint8), np.zeros(n, np.uint8)
        p.live_f, p.need_f = np.zeros(n, np.uint8), np.zeros(n, np.uint8)
        R = cut_rows(t, A.R)
        jit.need_pass(R, p.src_b, p.root_b, p.live_b, p.need_b)
        jit.need_pass(R, p.src_f, p.root_f, p.live_f, p.need_f)
        p.need_w = p.need_f & ~p.need_b
        for slot, x in t.links.items():
            q = plans[x._tape.id]
            q.root_b[x._slot] |= p.live_b[slot]
            q.root_f[x._slot] |= p.live_f[slot]
        if (t.freed & (p.need_f != 0)).any():
            raise RuntimeError(BACKWARD_TWICE)
        _check_versions(t, A, p.live_f, p.need_f)
        reached.update(id(leaf) for slot, (leaf, _) in t.leaves.items() if p.live_f[slot])
    for r in roots:
        if r._meta is not None:
            reached.add(id(r))
    for i, w in enumerate(weights):
        if id(w) not in reached:
            raise ValueError(f"stage_backward_input: weights[{i}] (shape {w.shape}) is not in the "
                             f"graph of the stage outputs: no gradient can reach it. Pass only "
                             f"the weights the stage uses.")

    # -- B: sweep need_b, newest tape first ------------------------------------------------
    split = SplitBackward(order, weights)
    leaf_seeds_w = []  # roots that are weight leaves themselves
    leaf_grads = {}
    for r, s in zip(roots, seeds):
        if r._meta is not None:
            if id(r) in in_ids:
                _add(leaf_grads, r, s)
            elif id(r) in w_ids:
                leaf_seeds_w.append((r, s))
        else:
            plans[r._tape.id].seeds.append((r._slot, s))
    dinputs = [None] * len(inputs)
    for p in order:
        t, A = p.t, p.A
        GO, G = arena(A, p.live_b)
        w_seeds = []
        for slot, s in p.seeds:
            if p.live_b[slot]:
                o = GO[slot]
                G[o:o + A.size[slot]] += np.reshape(s, -1)
            elif p.live_f[slot]:
                w_seeds.append((slot, s))  # reaches weights only: W's to sweep
        p.seeds = w_seeds
        hooked = [s for s in t.hooks if p.live_b[s]] if t.hooks else ()
        hubs = _hubs(t, p.need_b)
        sweep_segments(t, A, G, GO, p.need_b, p.live_b, hooked, hubs, retain_hooked=True)
        for slot, (leaf, _) in t.leaves.items():
            if p.live_b[slot] and id(leaf) in in_ids:
                _add(leaf_grads, leaf, adjoint(A, G, GO, slot, leaf.shape))
        for i, x in enumerate(inputs):
            if x._meta is None and x._tape is t and p.live_b[x._slot]:
                dinputs[i] = adjoint(A, G, GO, x._slot, x.shape)
        for slot, x in t.links.items():
            if p.live_b[slot]:
                plans[x._tape.id].seeds.append((x._slot, adjoint(A, G, GO, slot, x.shape)))
        # the frontier: B-complete adjoints that W reads
        front = np.flatnonzero((p.need_w != 0) & (p.live_b != 0)).tolist()
        for h in _hubs(t, p.need_w):
            front.extend(s for s, _ in t.functions[h].outs if s is not None and p.live_b[s])
        for s in front:
            o = GO[s]
            p.kept[s] = G[o:o + A.size[s]].copy()
        del G
        free_rows(t, A, (p.need_b != 0) & (p.need_w == 0))  # B-only rows: done
    for i, x in enumerate(inputs):
        if x._meta is not None and id(x) in leaf_grads:
            dinputs[i] = _deliver(x, leaf_grads[id(x)][1])
    split.leaf_seeds = leaf_seeds_w
    return dinputs, split


def weight_phase(split, weights, retain_graph):
    """W: sweep need_w from the frontier; accumulate into the weights' ``.grad``."""
    if split.done:
        raise RuntimeError("stage_backward_weight already ran for these param_groups and freed "
                           "them; pass retain_graph=True to the first call to run it again")
    if len(weights) != len(split.weights) or any(a is not b for a, b in
                                                 zip(weights, split.weights)):
        raise ValueError("stage_backward_weight: weights must be the ones passed to "
                         "stage_backward_input with these param_groups")
    w_ids = {id(w) for w in weights}
    leaf_grads = {}
    for r, s in split.leaf_seeds:
        _add(leaf_grads, r, s)
    pending = {p.t.id: list(p.seeds) for p in split.plans}
    for p in split.plans:
        t, A = p.t, p.A
        seeds = pending[t.id]
        if not p.need_w.any():
            # nothing to sweep here; seeds on link and leaf rows (no operands) pass through
            for slot, g in seeds:
                if slot in t.links:
                    x = t.links[slot]
                    pending[x._tape.id].append((x._slot, np.reshape(g, x.shape)))
                elif slot in t.leaves and id(t.leaves[slot][0]) in w_ids:
                    _add(leaf_grads, t.leaves[slot][0], g)
            continue
        if t.released:
            raise RuntimeError(BACKWARD_TWICE)
        R = A.R
        has = np.zeros(len(A.sv), np.uint8)  # slots W reads or writes the adjoint of
        rows = np.flatnonzero(p.need_w)
        has[rows] = 1
        for col, bit in ((1, 1), (2, 2)):
            sel = rows[(p.need_w[rows] & bit) != 0]
            has[R[sel, col]] = 1
        for s in p.kept:
            has[s] = 1
        for slot, _ in seeds:
            has[slot] = 1
        GO, G = arena(A, has)
        for s, g in p.kept.items():
            o = GO[s]
            G[o:o + A.size[s]] = g
        for slot, s in seeds:
            o = GO[slot]
            G[o:o + A.size[slot]] += np.reshape(s, -1)
        only_w = (p.live_f != 0) & (p.live_b == 0)
        hooked = [s for s in t.hooks if only_w[s]] if t.hooks else ()
        sweep_segments(t, A, G, GO, p.need_w, has, hooked, _hubs(t, p.need_w),
                       retain_hooked=True)
        for slot, (leaf, _) in t.leaves.items():
            if only_w[slot] and id(leaf) in w_ids:
                _add(leaf_grads, leaf, adjoint(A, G, GO, slot, leaf.shape))
        for slot, x in t.links.items():
            if only_w[slot]:
                pending[x._tape.id].append((x._slot, adjoint(A, G, GO, slot, x.shape)))
        if not retain_graph:
            free_rows(t, A, (p.need_w != 0) | (p.root_f != 0))
    for w in weights:
        if id(w) in leaf_grads:
            _deliver(w, leaf_grads[id(w)][1])
    if not retain_graph:
        split.done = True
        split.leaf_seeds = []
        for p in split.plans:
            p.kept = {}
            p.seeds = []


def _hubs(t, need):
    """Hubs of the Function calls that have work under `need`."""
    if not t.functions:
        return ()
    return [h for h, node in t.functions.items() if any(need[r] & b for r, b in node.chain)]


def _add(acc, leaf, g):
    e = acc.get(id(leaf))
    if e is None:
        acc[id(leaf)] = [leaf, np.reshape(np.array(g, dtype=np.float64), leaf.shape)]
    else:
        e[1] = e[1] + np.reshape(g, leaf.shape)


def _deliver(leaf, g):
    """Leaf hooks, accumulation into ``.grad`` and post-accumulate hooks, as a backward does."""
    m = leaf._meta
    if m.hooks:
        g = run_hooks(m.hooks, g, f"a leaf tensor of shape {leaf.shape}")
    if m.grad is None:
        m.grad = g.copy()
    else:
        m.grad += g
    for fn in list(m.post_hooks.values()):
        fn(leaf)
    return g

