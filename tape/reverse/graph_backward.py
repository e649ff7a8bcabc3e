"""The differentiable backward (``create_graph=True``): the reverse sweep as recorded tensor ops.

Same plan as the jitted driver (``backward``): tapes newest first, a need pass per tape, leaf
and link adjoints handed on. But each row's adjoint is a tensor and each rule runs as tensor
operations (``vjp_rules.row_vjp``), which are recorded, so the gradients it returns have
history and can be differentiated again. Nothing is freed: the graph stays for the next
derivative (``retain_graph`` is implied, as in PyTorch).
"""
from __future__ import annotations

import heapq
from types import SimpleNamespace

import numpy as np

from jit.table import OPCODE, OP_MASK

from .backward import BACKWARD_TWICE, plan_need
from ..core.tensor import plain
from ..core.state import enable_grad, state
from ..core.tape import horizon
from ..forward.tangent_rules import TapeReader
from ..core.tensor import Tensor
from .vjp_rules import row_vjp

LEAF, LINK, CONST = OPCODE["leaf"], OPCODE["link"], OPCODE["const"]
FUNCTION, FUNCTION_OUT = OPCODE["function"], OPCODE["function_out"]


def _rows(t):
    """(n, 4) rows of a tape, recording or built (the need pass reads columns 1 and 2)."""
    if t.built is not None:
        return t.built.R
    n = len(t.sv)
    R = np.zeros((n, 4), np.int64)
    R[:, :3] = np.fromiter(t.rows, np.int64, 3 * n).reshape(n, 3)
    return R


def _add(d, k, g):
    d[k] = g if k not in d else d[k] + g


def _add_leaf(acc, leaf, g):
    e = acc.get(id(leaf))
    acc[id(leaf)] = (leaf, g if e is None else e[1] + g)


def run_graph(roots, seeds, inputs=None):
    """Differentiable backward from `roots` seeded with `seeds` (tensors or arrays). With
    `inputs` None, leaf gradients accumulate into ``.grad`` (as tensors with history); else
    returns the gradient of each input (a tensor, or None)."""
    want = None
    if inputs is not None:
        want = {}
        for i, x in enumerate(inputs):
            want.setdefault(id(x), []).append(i)
    out = None if inputs is None else [None] * len(inputs)
    oldest = horizon(inputs)
    pending = {}
    leaf_grads = {}
    with enable_grad():
        for r, s in zip(roots, seeds):
            if type(s) is not Tensor:
                s = np.asarray(s, dtype=np.float64).reshape(r.shape)
                s = plain(float(s) if s.ndim == 0 else s)
            if r._meta is not None:
                if want is None or id(r) in want:
                    _add_leaf(leaf_grads, r, s)
                continue
            _add(pending.setdefault(r._tape.id, (r._tape, {}))[1], r._slot, s)
        heap = [-k for k in pending]
        heapq.heapify(heap)
        while heap:
            tid = -heapq.heappop(heap)
            t, adj = pending.pop(tid)
            for link_tape, slot, g in _sweep(t, adj, want, inputs, out, leaf_grads, oldest):
                if link_tape.id not in pending:
                    pending[link_tape.id] = (link_tape, {})
                    heapq.heappush(heap, -link_tape.id)
                _add(pending[link_tape.id][1], slot, g)
        for leaf, g in leaf_grads.values():
            g = np.reshape(g, leaf.shape) if _shape(g) != leaf.shape else g
            m = leaf._meta
            for fn in list(m.hooks.values()):
                r = fn(g)
                if r is not None:
                    g = r if type(r) is Tensor else plain(np.asarray(r, dtype=np.float64))
            if want is None:
                m.grad = g if m.grad is None else m.grad + g
                for fn in list(m.post_hooks.values()):
                    fn(leaf)
            else:
                for i in want[id(leaf)]:
                    out[i] = g if out[i] is None else out[i] + g
    if state.tape is not None:  # (it holds the recorded backward: see Tape.nested)
        state.tape.nested = True
    return out


def _shape(g):
    return () if type(g._v) is float else g._v.shape


def _sweep(t, adj, want, inputs, out, leaf_grads, oldest=None):
    if t.released:
        raise RuntimeError(BACKWARD_TWICE)
    t.nested = True  # (a later backward through the recorded rules sweeps part of it)
    R = _rows(t)
    _, live, need = plan_need(t, SimpleNamespace(R=R, code=R[:, 0] & OP_MASK), list(adj), want,
                              inputs, oldest)
    rd = TapeReader(t)
    inputs_here = {x._slot: x for x in inputs or () if x._tape is t and x._meta is None}
    fn_grads = {}  # function_out slot -> adjoint, for the hub's backward
    links = []
    for i in np.flatnonzero(live)[::-1].tolist():  # (only live rows hold or pass an adjoint)
        if t.functions and i in t.functions and need[i]:  # a Function's hub: its backward
            node = t.functions[i]
            grads = [fn_grads.get(s) for s, _ in node.outs]
            if any(gr is not None for gr in grads):
                for s, ga in node.run_backward(grads, need, differentiable=True):
                    _add(adj, s, ga)
        g = adj.pop(i, None)
        if g is None or not live[i]:
            continue
        h = t.hooks.get(i) if t.hooks else None
        if h is not None:
            for fn in list(h.hooks.values()):
                r = fn(g)
                if r is not None:
                    g = r if type(r) is Tensor else plain(np.asarray(r, dtype=np.float64))
            if h.retain and want is None:
                h.grad = g if h.grad is None else h.grad + g
        x = inputs_here.get(i)
        if x is not None:
            for k in want[id(x)]:
                out[k] = g if out[k] is None else out[k] + g
        code = int(R[i, 0]) & OP_MASK
        if code == LEAF:
            leaf = t.leaves[i][0]
            if want is None or id(leaf) in want:
                _add_leaf(leaf_grads, leaf, g)
            continue
        if code == LINK:
            x = t.links[i]
            links.append((x._tape, x._slot, g))
            continue
        if code == CONST or not need[i]:
            continue
        if code == FUNCTION_OUT:
            fn_grads[i] = g
            continue
        if code == FUNCTION:
            continue
        ga, gb = row_vjp(rd, i, g, int(need[i]))
        if ga is not None:
            _add(adj, int(R[i, 1]), ga)
        if gb is not None:
            _add(adj, int(R[i, 2]), gb)
    return links
