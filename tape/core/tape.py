"""The tape: a struct of arrays recorded by eager operations.

One row per slot (every value has exactly one producing row, so slot id == row index). While
recording, rows go to flat Python lists (one ``extend`` per op is the cheapest way to record from
Python); ``build()`` turns them into the NumPy arrays the jitted passes read, once, when the tape
is first swept. Values stay where NumPy put them: 0-d values are Python floats (collected into one
float64 array at build), arrays are referenced by address, so recording never copies a value.

A tape stops taking rows ("sealed") when a backward runs over it or when it grows past
``MAX_ROWS``; later ops go to a new tape and reach older tensors through ``link`` rows. A tape
lives as long as a tensor recorded on it (or a newer tape linking to it) lives.
"""
from __future__ import annotations

import itertools
import sys
import threading

import numpy as np

from jit.table import OPCODE, OP_MASK, TABLE

from .arrays import build_arrays
from .callsite import caller
from .state import state
from .saved_value import SavedValue
from .value_pool import MIN_CELLS as POOLED, give_back

CONST = OPCODE["const"]
LEAF = OPCODE["leaf"]
LINK = OPCODE["link"]
MAX_ROWS = 1 << 20  # roll over to a new tape past this many rows (bounds memory of long runs)

_ids = itertools.count()
_newest = [-1]  # id of the newest tape (forward-mode rules tell their own rows by it)
# True once some tape imported a tensor against creation order (a link to a newer tape, or a
# leaf made after the tape): tape ids then no longer bound what history can reach
_disordered = [False]


def newest_tape_id() -> int:
    return _newest[0]


def note_disorder():
    """A tape imported a tensor against creation order (a link to a newer tape, or a leaf made
    after it): from here on, ``horizon`` bounds nothing in this process."""
    _disordered[0] = True


def horizon(inputs):
    """The oldest tape id from which history can still reach one of `inputs` (tensors), or
    None when any tape may (no inputs given, or an import against creation order happened).

    Rows only read older rows: a tensor recorded on tape u, or a leaf made while tape u was the
    newest, is read only by rows of tapes u and newer, and links only point to older tapes. So
    a link to a tape older than every input leads to history that cannot reach any of them: a
    backward for these inputs (or a tangent of sources on those tapes) stops there instead of
    walking every earlier step of a loop."""
    if inputs is None or _disordered[0]:
        return None
    oldest = None
    for x in inputs:
        u = x._meta.born if x._meta is not None else x._tape.id
        if oldest is None or u < oldest:
            oldest = u
    return oldest


def horizon_of(oldest):
    """`oldest` (a tape id, or None), or None once tape ids bound nothing (``note_disorder``)."""
    return None if _disordered[0] else oldest


class Tape:
    __slots__ = ("id", "rows", "sv", "side", "av", "side_of", "ia", "ia_len", "fa", "fa_len", "leaves",
                 "links", "escapes", "native", "index_cache", "consts", "hooks", "packed",
                 "functions", "sealed", "built", "freed", "released", "thread", "nested",
                 "stopped", "__weakref__")

    def __init__(self):
        self.id = next(_ids)
        _newest[0] = self.id
        self.rows = []  # flat (code, a, b) per slot
        self.sv = []  # per slot: the 0-d value as a Python float (0.0 for array slots)
        self.side = []  # flat (slot, n, ia offset, fa offset) per general row (0-d rows of 0-d
        #                 operands have none: the sweep's fast path needs nothing more)
        self.av = []  # per side row: the array value, or None when the value is 0-d (in sv)
        self.side_of = {}  # slot -> side row
        self.ia = []  # int64 attribute chunks (shapes, index maps, masks)
        self.ia_len = 0
        self.fa = []  # float64 attribute chunks
        self.fa_len = 0
        self.leaves = {}  # slot -> (leaf tensor, its version when recorded)
        self.links = {}  # slot -> tensor of an older tape that this slot stands for
        self.escapes = {}  # slot -> (a, b, y shapes, params) of rows whose rules run in NumPy
        self.native = {}  # (slot, sweep) -> a split matmul's native pieces (tape.parallel.gemm)
        self.index_cache = {}  # (kind, shapes) -> ia offset, so repeated index maps are shared
        self.consts = {}  # nonzero Python-float constant -> its slot
        self.hooks = None  # slot -> _hooks.SlotHooks, for tensors with hooks or retain_grad
        self.packed = None  # side row -> SavedValue, for values packed by saved_tensors_hooks
        self.functions = None  # hub slot -> _function.FunctionNode (tape.Function calls)
        self.sealed = False
        self.built = None
        self.freed = None  # per row: 1 after a backward without retain_graph swept it
        self.released = False
        # the thread that made it: ids are process-wide, so "the tapes made from id n on" of one
        # thread's recording are those of ids >= n made by this thread
        self.thread = threading.get_ident()
        # rows recorded by a transform inside another (its function's value, its backward)
        # or read or recorded by a create_graph backward: a later backward leaves most of
        # them unswept (backward._sweeps_whole)
        self.nested = False
        # (first, end) slot ranges recorded under no_grad while tape.compile records: the
        # forward sweep computes them, no gradient or tangent flows through them (cut_rows)
        self.stopped = ()

    @classmethod
    def from_arrays(cls, av, side_of, escapes, built, hooks=None, stopped=()):
        """A sealed tape that has only its arrays (``built``, the side rows' values ``av``), no
        lists to record into: a loaded file's, or a copy of a compiled variant's tape for another
        thread. Its leaves are added by the caller (``leaves``)."""
        t = cls()
        t.sealed = True
        t.rows = t.sv = t.side = t.ia = t.fa = None
        t.av, t.side_of, t.escapes, t.built, t.hooks = av, side_of, escapes, built, hooks
        t.stopped = stopped
        t.freed = np.zeros(len(built.sv), np.uint8)
        return t

    def __len__(self):
        return len(self.sv) if self.built is None else len(self.built.sv)

    # -- recording ------------------------------------------------------------------------
    def add_ints(self, data) -> int:
        """Append int64 attribute data; returns its offset."""
        arr = np.ascontiguousarray(data, dtype=np.int64).reshape(-1)
        off = self.ia_len
        self.ia.append(arr)
        self.ia_len += arr.size
        return off

    def row(self, code, a, b, value, n, iat=0, fat=0) -> int:
        """Append a general row (one with a side row) whose result is ``value``."""
        sv = self.sv
        av = self.av
        slot = len(sv)
        k = len(av)
        if type(value) is float:
            sv.append(value)
            av.append(None)
        elif state.rec is self or state.saved_hooks is None:  # (rec: no hooks, one read)
            sv.append(0.0)
            av.append(value)
        elif code != LEAF and code != LINK:
            if state.guards is not None:
                _refuse_packing(code)
            # saved_tensors_hooks: the tape keeps pack(value) until the backward unpacks it
            # (leaves are referenced, not saved; links belong to an older tape)
            self.sv.append(0.0)
            self.av.append(None)
            if self.packed is None:
                self.packed = {}
            self.packed[k] = SavedValue(value, f"op '{TABLE[code & OP_MASK].name}'")
        else:
            self.sv.append(0.0)
            self.av.append(value)
        self.rows.extend((code, a, b))
        self.side.extend((slot, n, iat, fat))
        self.side_of[slot] = k
        if slot >= MAX_ROWS:
            self.roll()
        return slot

    def scalar_const(self, x: float) -> int:
        """Slot of a Python-float constant; nonzero ones are shared within the tape (zeros are
        not, so that -0.0 and 0.0 stay distinct)."""
        slot = self.consts.get(x) if x else None
        if slot is None:
            slot = len(self.sv)
            self.sv.append(x)
            self.rows.extend((CONST, -1, -1))
            if x:
                self.consts[x] = slot
            if state.guards is not None:
                state.guards.note_const(slot)
        return slot

    def const(self, value) -> int:
        """A constant slot (value already canonical: float or C-contiguous float64 array)."""
        if type(value) is float:
            slot = len(self.sv)
            self.sv.append(value)
            self.rows.extend((CONST, -1, -1))
        else:
            slot = self.row(CONST, -1, -1, value, value.size)
        if state.guards is not None:
            state.guards.note_const(slot)
        return slot

    def value(self, slot):
        k = self.side_of.get(slot)
        if k is None or self.av[k] is None:
            if self.packed and k in self.packed:
                return self.packed[k].value()
            return float(self.built.sv[slot]) if self.built is not None else self.sv[slot]
        return self.av[k]

    def store(self, slot, v):
        """Write a new value of `slot` in place (compiled replay): into the row's own buffer, or
        into sv for a 0-d value."""
        k = self.side_of.get(slot)
        if k is None or self.av[k] is None:
            self.built.sv[slot] = float(v)
        else:
            np.copyto(self.av[k], np.reshape(v, self.av[k].shape))

    def roll(self):
        """Past MAX_ROWS rows: later ops go to a new tape (an eager run then keeps only the tapes
        its live tensors reach), except while tape.compile records: a replay sweeps one tape."""
        if state.guards is None:
            self.seal()

    def seal(self):
        self.sealed = True
        if state.tape is self:
            state.tape = None

    # -- arrays for the jitted passes ---------------------------------------------------------
    def build(self, built=None):
        """The tape as arrays (built once; the tape is read-only from here on); `built`: those
        arrays when the caller has filled them already (``arrays.built_arrays``)."""
        if self.built is None:
            self.seal()
            self.built = build_arrays(self) if built is None else built
            self.freed = np.zeros(len(self.built.sv), np.uint8)
            self.rows = self.sv = self.side = self.ia = self.fa = None  # the arrays hold it all
        return self.built

    def release(self):
        """Drop the values once every row has been swept without retain_graph; the memory of
        large ones nothing else reads goes to the thread's next recordings (``value_pool``)."""
        values, alone = self.av, []  # (`alone`: a list only this frame holds, for its count)
        # each side row's size, from the lists or the built arrays, to hand the pool only the
        # large values (a small-array loop's thousands of values cost ~0.6 ms to look at)
        sizes = self.side[1::4] if self.side is not None else \
            self.built.S[:, 0] if self.built is not None else None
        self.rows = self.side = self.sv = self.av = self.ia = self.fa = self.packed = None
        self.built = None
        if self.functions:
            for node in self.functions.values():
                node.release()
        self.functions = None
        self.released = True
        if values and sys.getrefcount(values) == sys.getrefcount(alone):  # (no other holder)
            if sizes is not None and len(sizes) == len(values):
                values = _large(values, sizes)  # (the tape's list goes: the new one holds them)
            give_back(values)


def _large(values, sizes):
    """The entries of `values` whose side row's size (`sizes`, a list or an array) is at least
    the pool's ``MIN_CELLS``, in a new list."""
    n = len(sizes)
    big = np.flatnonzero((sizes if type(sizes) is np.ndarray else
                          np.fromiter(sizes, np.int64, n)) >= POOLED)
    return [values[k] for k in big.tolist()]


def _refuse_packing(code):
    raise NotImplementedError(
        f"tape.compile: op '{TABLE[code & OP_MASK].name}' at {caller()} is recorded inside "
        "saved_tensors_hooks within the compiled f: a replay keeps its values in its own "
        "buffers and would not pack them. Record without saved_tensors_hooks inside f.")


def linked_tapes(tapes):
    """Every tape reachable from `tapes` (None entries skipped) through link rows, each once,
    in the order the walk meets them."""
    seen = set()
    stack = [t for t in tapes if t is not None]
    while stack:
        t = stack.pop()
        if t.id in seen:
            continue
        seen.add(t.id)
        yield t
        stack.extend(x._tape for x in t.links.values())


def cut_rows(t, R):
    """`R` (t's rows: code, a, b, side) as a dependency pass (``jit.need_pass``) reads it: the
    rows recorded under no_grad while tape.compile records (``t.stopped``) read no operand, so no
    gradient or tangent flows through them, while the forward sweep still computes them."""
    if not t.stopped:
        return R
    R = R.copy()
    for first, end in t.stopped:
        R[first:end, 1:3] = -1
    return R


def current_tape() -> Tape:
    t = state.rec  # (the state's tape, when recording takes no further checks)
    if t is not None and not t.sealed:
        return t
    t = state.tape
    if t is None or t.sealed:  # sealed by a backward, maybe in another thread
        t = state.tape = Tape()
    return t
