"""Forward-mode AD with nested dual levels (names as ``torch.autograd.forward_ad``).

    with tape.forward_ad.dual_level():
        x = tape.forward_ad.make_dual(p, v)        # p + eps v
        y = f(x)
        primal, tangent = tape.forward_ad.unpack_dual(y)   # f(p), J_f(p) v

A dual tensor is recorded like any other (make_dual adds one row); its tangent at a level is
worked out when ``unpack_dual`` asks for it, by running the forward-mode rule of every row since
the last request (``tangent_rules.row_tangent``) with tensor operations. Those operations are
recorded too, which gives everything that nests:

- levels nest: a tangent computed at an inner level is an ordinary tensor, dual at the outer
  levels, so unpacking it there gives second directional derivatives (forward over forward);
  PyTorch refuses nested levels, tapejit does not;
- a tangent is differentiable by ``backward``/``tape.grad`` (reverse over forward: exact
  Hessian-vector products);
- exiting a level clears its tangents from every tensor; a tangent is never dual at its own
  level (rows recorded by a level's own rules carry no tangent at that level).
- when nothing in a tensor's history requires grad and no other active level is dual there,
  ``unpack_dual`` gives a plain primal and tangent (as PyTorch does), which NumPy and plotting
  take; otherwise both keep their history.

Only recorded operations carry tangents: code run under ``tape.no_grad()`` is constant for
forward mode too. Levels are per thread (PyTorch's are process-wide): a thread sees only the
levels it entered, so transforms run in many threads at once without seeing each other's.
"""
from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from jit.table import OPCODE, OP_MASK

from ..core import record as _record
from ..core.state import state
from .tangent_rules import TapeReader, row_tangent
from ..core.tape import current_tape, horizon_of, newest_tape_id
from ..core.tensor import Tensor

__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual",
           "UnpackedDualTensor"]

CONST, LEAF, LINK, COPY = (OPCODE[n] for n in ("const", "leaf", "link", "copy"))
FUNCTION_OUT = OPCODE["function_out"]

# Level indices are unique in the process (a level is found by its index); the active levels
# themselves are per thread, in state.levels. _active maps an active level's index to its thread,
# only for the error that names a level of another thread.
_lock = threading.Lock()
_issued = [0]  # indices handed out so far
_active = {}


class UnpackedDualTensor(NamedTuple):
    primal: object
    tangent: object


class _Level:
    def __init__(self, index):
        self.index = index
        self.thread = threading.get_ident()
        self.sources = {}  # (tape id, slot) -> tangent given to make_dual
        self.tangents = {}  # (tape id, slot) -> tangent worked out so far
        self.scanned = {}  # tape id -> rows whose tangent is worked out
        self.readers = {}  # tape id -> TapeReader
        self.owned = {}  # tape id -> [(lo, hi)] rows recorded by this level's rules
        self.owned_tapes = set()  # tapes recorded by this level's rules only
        self.fn_out = {}  # (tape id, slot) -> tangent of a Function output (from its jvp)
        self.leaf_sources = {}  # id(leaf) -> tangent, for leaves recorded as they are
        self.oldest = None  # the oldest tape of a make_dual source (``tape.horizon``)
        self.first = {}  # tape id -> its first make_dual source row

    def is_own(self, t, i):
        # (owned_tapes holds the ids of every tape made while this level's rules ran, another
        # thread's too: only this thread's are the rules')
        if t.id in self.owned_tapes and t.thread == self.thread:
            return True
        return any(lo <= i < hi for lo, hi in self.owned.get(t.id, ()))

    def clear(self):
        self.sources.clear()
        self.tangents.clear()
        self.fn_out.clear()
        self.leaf_sources.clear()


def enter_dual_level() -> int:
    """Enter a new (innermost) dual level of this thread; returns its index."""
    with _lock:
        _issued[0] += 1
        lv = _Level(_issued[0])
    state.levels.append(lv)
    _active[lv.index] = lv.thread
    return lv.index


def exit_dual_level(*, level=None):
    """Exit the innermost dual level (or check that `level` is it): its tangents are cleared."""
    levels = state.levels
    if not levels:
        raise RuntimeError("exit_dual_level: no dual level is active in this thread")
    lv = levels[-1]
    if level is not None and level != lv.index:
        raise RuntimeError(f"exit_dual_level: level {level} is not the innermost active level "
                           f"({lv.index}); exit levels in the reverse order of entering them")
    _pop(levels)


def _pop(levels):
    lv = levels.pop()
    _active.pop(lv.index, None)
    lv.clear()


def exit_levels_from(depth):
    """Exit this thread's levels from the `depth`-th on (0: all), innermost first: those a
    block entered and an exception left active."""
    levels = state.levels
    while len(levels) > max(depth, 0):
        _pop(levels)


class dual_level:  # noqa: N801  (named after torch.autograd.forward_ad.dual_level)
    """Context manager for a dual level; ``with dual_level() as level:`` yields its index.

    On the way out it exits its level whatever happened inside: levels entered inside and left
    active (by an exception, or an enter_dual_level without its exit) are exited too, so none
    outlives the block; without an exception in flight, a level left so is an error."""

    def __enter__(self):
        self.level = enter_dual_level()
        return self.level

    def __exit__(self, exc_type, *exc):
        # a thread's levels are entered in increasing index order: ours and those entered
        # inside it are the ones from our index on
        levels = state.levels
        depth = sum(lv.index < self.level for lv in levels)
        inside = [lv.index for lv in levels[depth:]]
        exit_levels_from(depth)
        if exc_type is None and inside != [self.level]:
            if self.level not in inside:
                raise RuntimeError(f"dual_level: level {self.level} was exited inside its "
                                   "`with` block; the block exits it")
            raise RuntimeError(f"dual_level: level(s) {inside[1:]} entered inside the level "
                               f"{self.level} were not exited; exit each level you enter")
        return False


def _level(level, what):
    levels = state.levels
    if level is None:
        if not levels:
            raise RuntimeError(f"{what}: no dual level is active; use it inside "
                               "`with tape.forward_ad.dual_level():`")
        return levels[-1]
    for lv in levels:
        if lv.index == level:
            return lv
    if level in _active:
        raise RuntimeError(f"{what}: dual level {level} belongs to another thread; dual levels "
                           "are per thread: enter one in this thread")
    if isinstance(level, int) and 0 < level <= _issued[0]:
        raise RuntimeError(f"{what}: dual level {level} has been exited; its tangents were "
                           "cleared when it exited")
    raise RuntimeError(f"{what}: no active dual level {level}")


def make_dual(tensor, tangent, *, level=None):
    """A tensor with primal `tensor` and, at `level` (default: the innermost), `tangent`."""
    lv = _level(level, "make_dual")
    pv = tensor._v if type(tensor) is Tensor else np.asarray(tensor)
    tv = tangent._v if type(tangent) is Tensor else np.asarray(tangent)
    for name, v in (("primal", pv), ("tangent", tv)):
        if type(v) is not float and np.asarray(v).dtype.kind not in "biuf":
            raise TypeError(f"make_dual: the {name} has dtype {np.asarray(v).dtype}; tapejit "
                            "works in float64")
    if np.shape(pv) != np.shape(tv):
        raise ValueError(f"make_dual: the tangent has shape {np.shape(tv)} but the primal has "
                         f"shape {np.shape(pv)}; they must match")
    if type(tangent) is not Tensor:
        tangent = _record.plain(_record.check_dtype(np.array(tv, dtype=np.float64), "tangent"))
    t = current_tape()
    if (t.leaves or t.links or t.functions) and state.guards is None:
        # a tape of its own (as past MAX_ROWS): unpack_dual tells a pair recorded only for
        # tangents by its tape holding no leaf, and this one holds an unrelated recording's
        t.roll()
        t = current_tape()
    if type(tensor) is Tensor and tensor._rg and state.grad:
        y = _record.unary(COPY, tensor)  # keeps the primal's history
    else:
        value = _record.check_dtype(np.array(pv, dtype=np.float64), "make_dual")
        y = _record.result(value, t, t.const(value))  # recorded, so ops on it are too
    lv.sources[(y._tape.id, y._slot)] = tangent
    tid = y._tape.id
    if lv.oldest is None or tid < lv.oldest:
        lv.oldest = tid
    if y._slot < lv.first.get(tid, y._slot + 1):
        lv.first[tid] = y._slot
    return y


def unpack_dual(tensor, *, level=None):
    """``(primal, tangent)`` of `tensor` at `level` (default: the innermost); the tangent is
    None when the tensor does not depend on that level's dual inputs."""
    if level is None and not state.levels:
        return UnpackedDualTensor(tensor, None)
    lv = _level(level, "unpack_dual")
    if type(tensor) is not Tensor or tensor._tape is None or not tensor._rg:
        return UnpackedDualTensor(tensor, None)
    tangent = _tangent(lv, tensor._tape, tensor._slot)
    if _forward_only(lv, tensor, tangent):
        # nothing here requires grad and no other level is dual here: the history exists for
        # this level's tangents only, so the pair is plain, as PyTorch gives it
        return UnpackedDualTensor(_record.plain(tensor._v),
                                  None if tangent is None else _record.plain(tangent._v))
    return UnpackedDualTensor(tensor, tangent)


def _forward_only(lv, *tensors):
    """True when the tapes of `tensors` hold no tensor that requires grad (a leaf), no link to
    another tape and no dual input of another level: they are recorded only so that `lv` can
    work out tangents. (A link could lead to any history: its tensor keeps its history, so that
    this check stays O(1) in what came before.)"""
    others = [o for o in state.levels if o is not lv]
    for x in tensors:
        if type(x) is not Tensor or not x._rg or x._tape is None:
            continue
        t = x._tape
        if t.leaves or t.links or t.functions or any(
                o.leaf_sources or any(k[0] == t.id for k in o.sources) for o in others):
            return False
    return True


def _tangent(lv, t, slot):
    """Tangent of `slot` of tape `t` at level `lv`, working out the rows up to it first."""
    tid = t.id
    if lv.scanned.get(tid, 0) <= slot:
        _scan(lv, t, slot)
    return lv.tangents.get((tid, slot))


def _scan(lv, t, upto):
    tid = t.id
    if t.released:
        raise RuntimeError("unpack_dual: the tensor's tape was freed by a backward; unpack "
                           "its tangent before calling backward (or pass retain_graph=True)")
    rd = lv.readers.get(tid)
    if rd is None:
        rd = lv.readers[tid] = TapeReader(t)
    cur = state.tape if state.tape is not None and not state.tape.sealed else None
    cur_id, cur_len, newest = (cur.id if cur else None), (len(cur) if cur else 0), \
        newest_tape_id()
    # (leaf sources are leaves of any age: links are then followed all the way)
    oldest = None if lv.leaf_sources else horizon_of(lv.oldest)
    start = lv.scanned.get(tid)
    if start is None:
        # the sources' oldest tape: rows before its first source read none of them (a loop
        # that records on one tape scans only what it records from there on, not its history)
        start = lv.first.get(tid, 0) if oldest == tid else 0
    try:
        for i in range(start, upto + 1):
            if lv.is_own(t, i):
                continue
            src = lv.sources.get((tid, i))
            if src is not None:
                lv.tangents[(tid, i)] = src
                continue
            code, a, b, _ = rd.row(i)
            op = code & OP_MASK
            if op == LEAF and lv.leaf_sources:
                g = lv.leaf_sources.get(id(t.leaves[i][0]))
                if g is not None:
                    lv.tangents[(tid, i)] = g
                continue
            if op == CONST or op == LEAF:
                continue
            if op == LINK:
                x = t.links[i]
                if oldest is not None and x._tape.id < oldest:
                    continue  # history older than every source: no tangent at this level
                g = _tangent(lv, x._tape, x._slot)
            else:
                ta = lv.tangents.get((tid, a)) if a >= 0 else None
                tb = lv.tangents.get((tid, b)) if b >= 0 else None
                if ta is None and tb is None and op != FUNCTION_OUT and not (
                        t.functions and i in t.functions):
                    continue
                g = row_tangent(rd, i, ta, tb, functions=lambda s: _function_rule(lv, t, s))
            if g is not None:
                lv.tangents[(tid, i)] = g
        lv.scanned[tid] = max(lv.scanned.get(tid, 0), upto + 1)
    finally:
        # the rows the rules just recorded are this level's own: no tangent at this level
        if cur is not None:
            lv.owned.setdefault(cur_id, []).append((cur_len, len(cur)))
        lv.owned_tapes.update(range(newest + 1, newest_tape_id() + 1))


def _function_rule(lv, t, slot):
    """Custom Functions: at the hub, call ``F.jvp(ctx, *tangents)``; outputs read its result."""
    tid = t.id
    node = t.functions.get(slot) if t.functions else None
    if node is None:
        return lv.fn_out.get((tid, slot))  # a function_out row (or a chain row: None)
    tans = [None] * node.nargs
    for i, s, _ in node.args:
        tans[i] = lv.tangents.get((tid, s))
    if all(g is None for g in tans):
        return None
    jvp = node.jvp
    if jvp is None:
        raise RuntimeError(f"function {node.cls.__name__} has no forward-mode rule: define a "
                           f"static jvp(ctx, *tangents) returning one tangent per output to use "
                           f"it in forward mode")
    zeros = [g if g is not None or not node.tensor_args[i] else None
             for i, g in enumerate(tans)]
    res = jvp(node.ctx, *zeros)
    if not isinstance(res, tuple):
        res = (res,)
    if len(res) != len(node.outs):
        raise RuntimeError(f"function {node.cls.__name__}.jvp returned {len(res)} tangents for "
                           f"{len(node.outs)} outputs")
    for (s, shape), g in zip(node.outs, res):
        if s is not None and g is not None:
            g = g if type(g) is Tensor else _record.plain(_record.check_dtype(
                np.asarray(g, dtype=np.float64), "jvp"))
            if np.shape(g._v) != shape:
                raise RuntimeError(f"function {node.cls.__name__}.jvp returned a tangent of "
                                   f"shape {np.shape(g._v)} for an output of shape {shape}")
            lv.fn_out[(tid, s)] = g
    return None
