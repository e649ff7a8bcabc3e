"""NumPy's aliasing on tensors: a view shares its base's elements, and a write through any
tensor of a buffer is seen by every other, in value and in gradient.

Recorded values are never written once a row holds them (a backward and a replay read them), so
a view cannot share memory the way NumPy's does. Tensors share a **storage** instead:

- Every tensor that NumPy would let alias one buffer (the **root**, which owns the elements, and
  its views) points to one ``Storage`` through ``Tensor._alias``, an ``Alias`` that holds the
  flat positions of the tensor's elements in the root (``pos``). Positions are a NumPy view of
  one int64 ``arange``, and a view op computes them by running NumPy's own op on its operand's
  positions: NumPy's answer says whether the result is a view (it shares the arange's memory)
  or a copy, which elements it sees, and whether it is read-only (``diagonal``,
  ``broadcast_to``), with NumPy's own errors.
- A view records the row it recorded before (a gather or a reshape of its operand). Its value is
  NumPy's view of its operand's value where that is C-contiguous (no copy), else the gathered
  elements: the sweeps read C-contiguous values.
- The storage holds the root's current value and row (``cur``). A write through any tensor of
  the storage is a scatter row into ``cur`` at the written positions (functional: a new value),
  after which every live tensor of the storage whose positions overlap the written ones is
  rebound to a gather of the new root (the root itself to it, the writer of a whole view to its
  own new value). So each live tensor always stands for its elements' current value, and a
  gradient flows through every write exactly as NumPy's values say.
- A leaf that requires grad is written in place, under ``no_grad`` only, as before; its views
  are then gathered again from its buffer. A write through a view of such a leaf under grad
  mode is refused, as PyTorch refuses it.

A write costs a copy of the root's value (as item assignment always has); reading through a
view costs what the view's row costs.
"""
from __future__ import annotations

import math
import warnings
import weakref

import numpy as np

from jit.table import OPCODE

from . import record as _record
from .callsite import caller
from .state import state
from .tape import current_tape
from .tensor import ARRAY0, BEFORE_LEAF_CHANGE, Tensor, _new, plain, raw, result, slot_in
from .values import check_dtype

_GATHER = OPCODE["gather"]
_ref = weakref.ref
_EXACT_WORK = 1 << 12  # np.shares_memory's budget for an overlap test (past it: overlapping)

# ---------------------------------------------------------------------------------------------
# Positions

_ARANGES = {}  # size -> the int64 arange that every storage of that size takes positions from
_LARGE = weakref.WeakValueDictionary()  # the same for large sizes, while a storage holds one
_KEPT_CELLS = 1 << 24  # the sizes kept after their storages are gone hold at most this many
_LARGE_CELLS = 1 << 20  # a size above this is kept only while a storage uses it


def _arange(n):
    """0..n-1 as int64, shared: storages of one size take their positions from one array (it is
    never written, and positions of two storages are never compared)."""
    a = _ARANGES.get(n)
    if a is None:
        a = _LARGE.get(n) if n > _LARGE_CELLS else None
        if a is None:
            a = np.arange(n, dtype=np.int64)
            if n > _LARGE_CELLS:
                _LARGE[n] = a
            else:
                if sum(_ARANGES) + n > _KEPT_CELLS:
                    _ARANGES.clear()
                _ARANGES[n] = a
    return a


class Storage:
    """The tensors that NumPy would let alias one buffer: the root and its live views.

    ``ids`` the root's positions (a view of the shared arange, of the root's shape); ``cur`` a
    tensor for the root's current value and row (the leaf itself for a leaf root); ``root`` a
    weak reference to the user's root tensor; ``members`` weak references to the views."""

    __slots__ = ("ids", "_cur", "_v", "_tape", "_slot", "_rg", "root", "members", "prune_at")

    def __init__(self, root, ids, view):
        """The storage of `root`, whose positions are `ids`, on its first `view`."""
        self.ids = ids
        if root._meta is not None and root._rg:
            self._cur = root
        else:  # (the root's state, made a tensor when a write first needs it: most views
            self._cur = None  # are read and dropped)
            self._v, self._tape, self._slot, self._rg = root._v, root._tape, root._slot, root._rg
        self.root = _ref(root)
        self.members = [_ref(view)]
        self.prune_at = 16
        root._alias = Alias(self, ids)

    @property
    def cur(self):
        c = self._cur
        if c is None:
            c = self._cur = _new(Tensor)
            c._v, c._tape, c._slot, c._rg = self._v, self._tape, self._slot, self._rg
            c._meta = c._alias = None
            self._v = self._tape = None
        return c

    @cur.setter
    def cur(self, t):
        self._cur = t
        self._v = self._tape = None  # (an older root value is not kept)

    def add(self, t):
        members = self.members
        members.append(_ref(t))
        if len(members) >= self.prune_at:  # a loop of views: the dead ones go, amortized O(1)
            members[:] = [r for r in members if r() is not None]
            self.prune_at = 2 * len(members) + 16

    def live(self):
        """The live views (the root not among them)."""
        for r in self.members:
            m = r()
            if m is not None:
                yield m


class Alias:
    """A tensor's place in its storage: the flat positions of its elements in the root."""

    __slots__ = ("storage", "pos")

    def __init__(self, storage, pos):
        self.storage = storage
        self.pos = pos

    def __reduce__(self):
        # a deep copy or an unpickled tensor owns its elements, as a copy of a NumPy view does
        return (_standalone, (self.pos.ndim == 0,))


def _standalone(zero_d):
    return ARRAY0 if zero_d else None


def detach_for_leaf(t):
    """Before t becomes (or stops being) a leaf: a tensor that shares its elements with live
    others cannot, since a leaf owns its buffer; one whose views are all gone leaves its
    storage."""
    a = t._alias
    if type(a) is not Alias:
        return
    s = a.storage
    if a.pos is not s.ids or next(s.live(), None) is not None:
        raise RuntimeError("requires_grad of a tensor that shares its elements with others (a "
                           "view, or a base with live views) cannot change: a leaf owns its "
                           "buffer. Take a copy first: t = t.copy(); t.requires_grad = True")
    t._alias = None


BEFORE_LEAF_CHANGE[0] = detach_for_leaf


def _is_leaf(t):
    return t._meta is not None and t._rg


def _shallow(t):
    """A new tensor object for t's value and row (no storage of its own)."""
    r = _new(Tensor)
    r._v = t._v
    r._tape = t._tape
    r._slot = t._slot
    r._rg = t._rg
    r._meta = None
    r._alias = None
    return r


_ROOT_POSITIONS = {}  # shape -> the positions of a root of that shape (shared: never written)


def _root_positions(shape):
    px = _arange(math.prod(shape)).reshape(shape)
    if len(_ROOT_POSITIONS) > 256:
        _ROOT_POSITIONS.clear()
    if px.base is _ARANGES.get(px.size):  # (a large size's arange is not kept)
        _ROOT_POSITIONS[shape] = px
    return px


def positions(x):
    """The positions of x's elements in its storage's root, or in x itself when it has none."""
    a = x._alias
    if type(a) is Alias:
        return a.pos
    return _root_positions(x.shape)


def shape_text(shape):
    """A shape as NumPy's messages write it: (3,) or (2,3)."""
    return "(" + ",".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def is_scalar(x):
    """x is 0-d and stands for a NumPy scalar (np.float64): immutable, never a view's base."""
    return x._alias is None and x._meta is None and type(x._v) is float


# ---------------------------------------------------------------------------------------------
# Views


def derive(x, y, fn):
    """y, which an op computed from tensor x: a view of x where NumPy's op (``fn``, the same op
    on an array) answers with a view, joining x's storage; else y as it is (NumPy copies)."""
    a = x._alias
    if type(a) is Alias:
        s, px = a.storage, a.pos
    elif a is None and x._meta is None and type(x._v) is float:
        # a scalar: NumPy's answers most ops with a scalar (s.T, s.reshape(())); others view a
        # new 0-d array made from it (s[None], s[...], a read-only broadcast_to): a view of a
        # copy, never of the scalar
        if type(fn(np.int64(0))) is not np.ndarray:
            return y
        copy = _shallow(x)
        copy._alias = ARRAY0
        return derive(copy, _shallow(x) if y is x else y, fn)
    else:
        s = None
        px = _ROOT_POSITIONS.get(x.shape)
        if px is None:
            px = _root_positions(x.shape)
    p = fn(px)
    if type(p) is not np.ndarray or p.base is not px.base:
        return y  # a copy (or a scalar), as NumPy's
    if p is px:
        return x  # NumPy returns the operand itself (np.atleast_1d of an array)
    if y is x or y._alias is not None:  # NumPy returns a new array object: so do we
        y = _record.reshape(y, y.shape) if _is_leaf(y) else _shallow(y)
    if s is None:  # (x's first view: the common case, written out)
        s = Storage(x, px, y)
    else:
        s.add(y)
    y._alias = Alias(s, p)
    return y


def derive_each(x, ys, fn):
    """``derive`` for an op with several results (splits): fn returns their positions."""
    ps = fn(positions(x))
    return [derive(x, y, lambda _, p=p: p) for y, p in zip(ys, ps)]


def base_of(x):
    """NumPy's ``x.base``: the root of x's storage for a view, else None."""
    a = x._alias
    if type(a) is not Alias or a.pos is a.storage.ids:
        return None
    s = a.storage
    root = s.root()
    if root is None:  # the root tensor is gone, its storage not: give it an object again
        root = s.cur if _is_leaf(s.cur) else _shallow(s.cur)
        root._alias = Alias(s, s.ids)
        s.root = _ref(root)
    return root


def shares_memory(a, b, bounds_only=False):
    """NumPy's ``shares_memory`` (``may_share_memory`` with `bounds_only`) for two tensors."""
    if a is b:
        return a.size > 0
    pa, pb = a._alias, b._alias
    if type(pa) is not Alias or type(pb) is not Alias or pa.storage is not pb.storage:
        return False
    if bounds_only:
        return bool(np.may_share_memory(pa.pos, pb.pos))
    return bool(np.shares_memory(pa.pos, pb.pos))


# ---------------------------------------------------------------------------------------------
# Writes


def assign(w, new, what="output array"):
    """NumPy's in-place op on w: every element of w becomes `new`'s (a tensor of w's shape), and
    every tensor that shares them sees it. (A leaf's own buffer is written by the caller.)"""
    a = w._alias
    if type(a) is not Alias:
        w._rebind(new if type(new) is Tensor else plain(check_dtype(new, "assignment")))
        return
    s, pos = a.storage, a.pos
    _writeable(pos, what)
    if _is_leaf(s.cur):
        _write_leaf(s, pos, new, pos)
        return
    if type(new) is not Tensor:
        new = plain(check_dtype(new, "assignment"))
    s.cur = _shallow(new) if pos is s.ids else _record.scatter_at(s.cur, pos, new)
    _refresh(s, pos, w, new)


def assign_at(w, key, v):
    """w[key] = v for w in a storage: NumPy's index and broadcast errors, then the write at the
    positions ``pos[key]`` of the root."""
    pos = w._alias.pos
    _writeable(pos, "assignment destination")  # (NumPy asks before it reads the key)
    key = _record.plain_key(key)
    vv = raw(v)
    np.empty(pos.shape)[key] = vv  # NumPy's own IndexError or broadcast error, if any
    region = np.asarray(pos[key])
    if np.ndim(vv) > region.ndim:  # (NumPy drops a value's leading axes of length 1)
        v = _record.reshape(v, region.shape) if type(v) is Tensor else np.reshape(vv,
                                                                                  region.shape)
    _write(w, region, v, region if region.base is pos.base else pos, "assignment destination")


def assign_flat(w, flat, v):
    """w.flat[flat] = v (flat positions of w in C order, v of their shape): NumPy's put, place,
    putmask, put_along_axis, fill_diagonal, by positions."""
    a = w._alias
    if type(a) is not Alias:
        w._rebind(_record.scatter_at(w, flat, v))
        return
    _write(w, np.ravel(a.pos)[flat], v, a.pos, "assignment destination")


def _write(w, region, v, written, what):
    """The write of v at the root positions `region` of w's storage; `written`: positions that
    cover them, to tell which views see it (a view of the storage's arange)."""
    a = w._alias
    s = a.storage
    _writeable(a.pos, what)
    if _is_leaf(s.cur):
        _write_leaf(s, region, v, written)
        return
    s.cur = _record.scatter_at(s.cur, region, v)
    _refresh(s, written, None, None)


def check_writeable(t, what):
    """NumPy's error for a write into a read-only view (``diagonal``, ``broadcast_to``)."""
    a = t._alias
    if type(a) is Alias:
        _writeable(a.pos, what)


def _writeable(pos, what):
    if 0 not in pos.strides or pos.size < 2:
        if not pos.flags.writeable:
            raise ValueError(f"{what} is read-only")
        return
    with warnings.catch_warnings():  # (reading the flag of np.broadcast_arrays' results warns)
        warnings.simplefilter("ignore", FutureWarning)
        writeable = pos.flags.writeable
    if not writeable:
        raise ValueError(f"{what} is read-only")
    warnings.warn("Numpy has detected that you (may be) writing to an array with\n"
                  "overlapping memory from np.broadcast_arrays. If this is intentional\n"
                  "set the WRITEABLE flag True or make a copy immediately before writing.",
                  DeprecationWarning, stacklevel=4)


def _overlap(p, q):
    if p.size == 0 or q.size == 0:
        return False
    try:
        return bool(np.shares_memory(p, q, max_work=_EXACT_WORK))
    except np.exceptions.TooHardError:
        return True


def _refresh(s, written, writer, value):
    """After a write to `s.cur` at the positions `written`: the root and every live view whose
    elements the write reached stand for their new values (the writer, when `value` is its
    whole new value, for that)."""
    cur = s.cur
    root = s.root()
    if root is not None:
        root._rebind(value if root is writer and value is not None else cur)
    for m in s.live():
        if m is writer and value is not None:
            m._rebind(value)
        elif m is writer or _overlap(m._alias.pos, written):
            m._rebind(_read(cur, m._alias.pos))


def _read(cur, p):
    """The tensor for the elements at positions p of the root `cur`: cur itself, a reshape of
    it, or a gather."""
    if p.size == cur.size and p.flags.c_contiguous and p.size:  # every element, in order
        return cur if p.shape == cur.shape else _record.reshape(cur, p.shape)
    return _record.gather(cur, np.array(p, order="C"))


# -- leaves: written in place (no_grad), their views gathered again ---------------------------


def _write_leaf(s, region, v, written):
    leaf = s.cur
    if state.grad:
        raise RuntimeError(
            "a view of a leaf tensor that requires grad is being used in an in-place operation "
            "(a leaf's elements are not written in place while gradients are recorded). Wrap "
            "the write in `with tape.no_grad():`, or write into a copy: y = x.copy(); "
            "v = y[...]; v += ...")
    np.reshape(leaf._v, -1)[region] = raw(v)
    leaf_written(leaf, written)


def leaf_written(leaf, written=None):
    """After `leaf`'s buffer was written in place (positions `written`, None: anywhere): its
    version moves on (values saved from it are refused), the recording tape imports it afresh
    on its next use, and its live views that the write reached are gathered again."""
    meta = leaf._meta
    meta.version += 1
    meta.written_at = caller()
    t = state.tape
    if t is not None and not t.sealed:
        t.index_cache.pop(id(leaf), None)
    a = leaf._alias
    if type(a) is not Alias:
        return
    for m in a.storage.live():
        p = m._alias.pos
        if written is None or _overlap(p, written):
            m._rebind(_leaf_view(leaf, p) if m._rg else
                      plain(check_dtype(np.reshape(leaf._v, -1)[p], "indexing")))


def _leaf_view(leaf, p):
    """A view of a leaf gathered from its buffer as it is now, recorded whatever the grad mode:
    a view of a leaf that requires grad stays one."""
    idx = np.array(p, order="C")
    y = check_dtype(np.reshape(leaf._v, -1)[idx], "indexing")
    t = current_tape()
    off = t.add_ints(idx)
    return result(y, t, t.row(_GATHER, slot_in(t, leaf), -1, y, 1 if type(y) is float else y.size,
                              off))
