"""The Tensor type: a NumPy value plus where it lives on the tape, and the primitives that move
values between tensors and tape slots (``slot_in``, ``result``, ``plain``, ...).

This module knows nothing of the ops that record. The layers that define them give the class its
behaviour, each once at import, through ``install``: Python's operators, indexing and the value
exits that ``tape.compile``'s guards note (``tape/core/tensor_ops.py``), NumPy's protocols and
array methods (``tape/numpy_ops/_impl.py``), ``backward`` (``tape/reverse/autograd.py``) and the
array API entry points (``tape/__init__.py``). ``import tape`` runs all of them.
"""
from __future__ import annotations

import numpy as np

from .conversions import conversion_error
from .hooks import SlotHooks
from .state import state
from . import tape as _tape_module
from .tape import LEAF, LINK, Tape, current_tape, newest_tape_id, note_disorder
from .values import constant

_new = object.__new__


class _Mark:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name

    def __reduce__(self):
        return self.name  # (the module's own object, after a copy or a pickle round trip)


# set by tape/core/views.py (above this module): called before a tensor of a storage changes
# requires_grad
BEFORE_LEAF_CHANGE = [None]
ARRAY0 = _Mark("ARRAY0")  # Tensor._alias of a 0-d array (NumPy's np.array(3.0), not a scalar)


class _LeafMeta:
    """What only leaves carry: the accumulated gradient and the buffer's version counter."""

    __slots__ = ("grad", "version", "hooks", "post_hooks", "born", "written_at")

    def __init__(self):
        self.grad = None
        self.version = 0
        self.written_at = None  # "file:line" of the last in-place write (for version errors)
        # the oldest tape that may import it, were it used at once (``tape.horizon``)
        t = state.tape
        self.born = t.id if t is not None and not t.sealed else newest_tape_id()
        self.hooks = {}  # handle id -> fn(grad) -> replacement or None
        self.post_hooks = {}  # handle id -> fn(tensor), after .grad is updated


class Tensor:
    """A float64 array (or scalar) that records the operations applied to it.

    >>> w = tape.tensor(np.ones(3), requires_grad=True)
    >>> loss = (np.sin(w) * w).sum()
    >>> loss.backward()
    >>> w.grad
    array([1.38177329, 1.38177329, 1.38177329])
    """

    # _alias: None for a tensor that shares its elements with no other (a 0-d one is then a
    # scalar, immutable as NumPy's float64), ARRAY0 for a 0-d array, or the views.Alias that
    # places it in the storage it shares with its base and views (tape/core/views.py)
    __slots__ = ("_v", "_tape", "_slot", "_rg", "_meta", "_alias", "__weakref__")
    __array_priority__ = 1000  # NumPy defers binary operators with ndarrays to us

    # -- construction ---------------------------------------------------------------------------
    def __init__(self, data, requires_grad=False):
        if type(data) is Tensor and data._rg:
            raise conversion_error("tensor")
        v = constant(data._v if type(data) is Tensor else data, "tensor")
        if isinstance(data, (np.ndarray, np.generic)) and data.dtype.kind in "biu" \
                and requires_grad:
            raise TypeError(f"only floating point tensors can require gradients; got dtype "
                            f"{data.dtype}. Use tape.tensor(x.astype(float), requires_grad=True).")
        self._v = v
        self._tape = None
        self._slot = -1
        self._rg = False
        self._meta = None
        # tape.tensor(3.0) is np.array(3.0): a 0-d array, written in place (not a scalar)
        self._alias = ARRAY0 if type(v) is float else None
        if requires_grad:  # v is already a private copy: the leaf owns it as its buffer
            self._v = np.array(v) if type(v) is float else v
            self._meta = _LeafMeta()
            self._rg = True

    def _rebind(self, r):
        self._v = r._v
        self._tape = r._tape
        self._slot = r._slot
        self._rg = r._rg

    # -- attributes -----------------------------------------------------------------------------
    @property
    def shape(self):
        v = self._v
        return () if type(v) is float else v.shape

    @property
    def ndim(self):
        v = self._v
        return 0 if type(v) is float else v.ndim

    @property
    def size(self):
        v = self._v
        return 1 if type(v) is float else v.size

    @property
    def dtype(self):
        return np.dtype(np.float64)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._v.shape[0]

    @property
    def requires_grad(self):
        return self._rg

    @requires_grad.setter
    def requires_grad(self, flag):
        flag = bool(flag)
        if flag == self._rg:
            return
        if not self.is_leaf:
            raise RuntimeError("you can only change requires_grad of leaf tensors; use "
                               "t.detach() to get a leaf that shares no history")
        if self._alias is not None and self._alias is not ARRAY0:
            BEFORE_LEAF_CHANGE[0](self)  # (tape/core/views.py: a view cannot become a leaf)
        if flag:
            v = self._v
            self._v = np.array(v, dtype=np.float64)  # leaves own a buffer (even when 0-d)
            self._meta = _LeafMeta()
        else:
            self._meta = None
            self._v = float(self._v) if self._v.ndim == 0 else self._v
        self._rg = flag
        self._tape = None
        self._slot = -1

    @property
    def is_leaf(self):
        return self._meta is not None or not self._rg

    @property
    def grad(self):
        m = self._meta
        if m is not None:
            return m.grad
        h = self._slot_hooks(create=False)
        return h.grad if h is not None and h.retain else None

    @grad.setter
    def grad(self, value):
        if self._meta is None:
            raise RuntimeError("only leaf tensors that require grad hold a .grad")
        self._meta.grad = None if value is None else np.array(value, dtype=np.float64)

    @property
    def T(self):
        return self.transpose()

    @property
    def mT(self):
        return self.swapaxes(-1, -2)

    # -- conversions: a value that carries a gradient leaves only by an explicit name ---------
    # float(t), math.exp(t), '%f' % t, out[i] = t into an ndarray, np.asarray(t) and the like
    # hand Python a plain value, and every gradient through it would be zero without a word. So
    # they are refused for a tensor that requires grad (a leaf, a result with history, a dual
    # number); t.item(), t.tolist(), t.numpy() and t.detach() say what they return. Inside
    # no_grad while tape.compile records (state.stop), a result still records and so requires
    # grad, but no gradient is lost: its conversions are the guarded t.item() and t.numpy().
    def __float__(self):
        if self._rg and state.stop is None:
            raise conversion_error("float")
        return self.item()

    def __int__(self):
        if self._rg and state.stop is None:
            raise conversion_error("int")
        return int(self.item())

    def __bool__(self):
        if self._rg:
            if state.stop is None or self.size != 1:
                raise conversion_error("bool")
            return bool(self.item())
        return bool(np.reshape(self._v, -1)[0]) if self.size == 1 else bool(np.asarray(self._v))

    def __index__(self):
        if self._rg and state.stop is None:
            raise conversion_error("index")
        x = self.item()
        if x != int(x):
            raise TypeError(f"only integer-valued tensors can be used as an index (got {x})")
        return int(x)

    def __complex__(self):
        if self._rg and state.stop is None:
            raise conversion_error("float")
        return complex(self.item())

    def __array__(self, dtype=None, copy=None):
        if self._rg:
            if state.stop is None:
                raise conversion_error("array")
            v = self.numpy()
            return v.astype(dtype) if dtype is not None else v
        v = np.asarray(self._v)
        return v.astype(dtype) if dtype is not None else v

    def __format__(self, spec):
        # a string for display feeds no arithmetic: it may show the value, and is no guard
        if not spec:
            return str(self)
        if self.ndim:
            raise TypeError(f"unsupported format string {spec!r} for a tensor of shape "
                            f"{self.shape} (format its elements, or t.detach().numpy())")
        return format(float(self._v), spec)

    def __repr__(self):
        body = np.array2string(np.asarray(self._v), separator=", ", prefix="tensor(")
        extra = ", requires_grad=True" if self._rg and self.is_leaf else ""
        extra = ", grad_fn" if self._rg and not self.is_leaf else extra
        return f"tensor({body}{extra})"

    __hash__ = object.__hash__

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    @property
    def device(self):
        return "cpu"

    # -- hooks (Python between jitted segments of the sweep) ------------------------------------
    def _slot_hooks(self, create=True):
        t = self._tape
        if t is None or self._meta is not None:
            return None
        if t.hooks is None:
            if not create:
                return None
            t.hooks = {}
        h = t.hooks.get(self._slot)
        if h is None and create:
            h = t.hooks[self._slot] = SlotHooks(self.shape)
        return h

    @property
    def retains_grad(self):
        h = self._slot_hooks(create=False)
        return h is not None and h.retain


def install(methods):
    """Give Tensor the methods defined in the body of the class `methods` (a layer above this one
    writes them as a class body, so they read as methods). A name Tensor already has is an error:
    two layers never define the same method."""
    for name, fn in vars(methods).items():
        if name in ("__module__", "__qualname__", "__doc__", "__dict__", "__weakref__") or (
                name == "__hash__" and fn is None):  # (Python's, for a class body with __eq__)
            continue
        if name in Tensor.__dict__:
            raise RuntimeError(f"Tensor.{name} is defined twice ({methods.__qualname__})")
        setattr(Tensor, name, fn)


# ---------------------------------------------------------------------------------------------
# Tensors and slots


def is_operand(x):
    """Types that may take part in an op with a tensor (others get NotImplemented)."""
    return (type(x) is Tensor or isinstance(x, (int, float, np.ndarray, np.number, np.bool_, list,
                                                 tuple)))


def raw(x):
    """The value of an operand for NumPy (no copy): a tensor's value or the object itself."""
    return x._v if type(x) is Tensor else x


def import_slot(t: Tape, x) -> int:
    """Slot standing for tensor x in tape t: a leaf row, a link to an older tape, or a constant."""
    if not x._rg:
        return t.const(x._v)
    if x._meta is not None:  # a leaf: referenced by buffer, version checked at backward
        # Leaves are shared between threads, so their slot is kept by the (per-thread) tape,
        # never on the leaf itself. Its key is its id alone (every other key of the cache is a
        # tuple): a leaf is imported by every op that reads it, and a tuple costs ~0.1 us.
        key = id(x)
        slot = t.index_cache.get(key)
        if slot is None:
            v = x._v  # a 0-d leaf enters as a float, so that 0-d rows stay on the fast path
            slot = t.index_cache[key] = t.row(LEAF, -1, -1, float(v) if v.ndim == 0 else v,
                                              v.size)
            t.leaves[slot] = (x, x._meta.version)
            if x._meta.born > t.id:
                note_disorder()
        return slot
    key = ("link", x._tape.id, x._slot)  # the source row, not the (rebindable) tensor object
    slot = t.index_cache.get(key)
    if slot is None:
        v = x._v
        slot = t.row(LINK, -1, -1, v, 1 if type(v) is float else v.size)
        t.links[slot] = x
        t.index_cache[key] = slot
        if x._tape.id > t.id:
            note_disorder()
    return slot


def slot_in(t: Tape, x) -> int:
    if type(x) is Tensor:
        if x._tape is t:
            return x._slot
        return import_slot(t, x)
    if type(x) is np.ndarray and x.dtype is _F64 and 0 < x.size <= _SHARED_CONST and \
            state.guards is None:
        # A small NumPy constant read in a loop (W5's masses[None, :] / r) is one constant row
        # of the tape, found by its bytes: equal bytes are equal values, -0.0 and NaNs included.
        # (Not under tape.compile: its guards name each constant's own line.)
        key = ("const", x.shape, x.tobytes())
        slot = t.index_cache.get(key)
        if slot is None:
            slot = t.index_cache[key] = t.const(constant(x))
        return slot
    return t.const(constant(x))


_F64 = np.dtype(np.float64)
_SHARED_CONST = 1024  # larger constants are not compared (their copy costs less than it saves)


def result(value, t, slot):
    r = _new(Tensor)
    r._v = value
    r._tape = t
    r._slot = slot
    r._rg = True
    r._meta = None
    r._alias = None
    return r


def array_row(t, code, a, b, value, n, iat=0):
    """``result(value, t, t.row(code, a, b, value, n, iat))`` in one call, for an array value
    and t the thread's ``state.rec`` (not sealed: gradients recorded, no saved_tensors_hooks to
    pack the value), so without ``Tape.row``'s checks. Ops on small arrays record thousands of
    rows a step; their Python is most of such a step's time."""
    sv = t.sv
    slot = len(sv)
    sv.append(0.0)
    av = t.av
    t.side_of[slot] = len(av)
    av.append(value)
    t.rows.extend((code, a, b))
    t.side.extend((slot, n, iat, 0))
    if slot >= _tape_module.MAX_ROWS:  # (the module's setting, as Tape.row reads it)
        t.roll()
    r = _new(Tensor)
    r._v = value
    r._tape = t
    r._slot = slot
    r._rg = True
    r._meta = None
    r._alias = None
    return r


def general_tape():
    """The tape of an op whose ``state.rec`` is None or sealed: None when gradients are not
    recorded, else the current tape (a new one if needed). Such an op appends with ``Tape.row``,
    which packs values under saved_tensors_hooks."""
    return current_tape() if state.grad else None


def recording_tape():
    """The tape an op records on, read as the direct paths read it (``state.rec``, else
    ``general_tape``): None when gradients are not recorded."""
    t = state.rec
    return t if t is not None and not t.sealed else general_tape()


def plain(value):
    r = _new(Tensor)
    r._v = value
    r._tape = None
    r._slot = -1
    r._rg = False
    r._meta = None
    r._alias = None
    return r


def recording(*xs) -> bool:
    if state.rec is None and not state.grad:
        return False
    for x in xs:
        if type(x) is Tensor and x._rg:
            return True
    return False


def leaf_sharing(buffer):
    """A leaf tensor (requires grad) whose buffer is the float64 array `buffer` itself, not a copy:
    a compiled replay writes its arguments into the recording's own buffers."""
    r = _new(Tensor)
    r._v = buffer
    r._tape = None
    r._slot = -1
    r._rg = True
    r._meta = _LeafMeta()
    r._alias = None
    return r


def tensor(data, requires_grad=False) -> Tensor:
    """Make a tensor from array-like data (always copied into a float64 buffer).

    >>> w = tape.tensor([1.0, 2.0], requires_grad=True)
    """
    return Tensor(data, requires_grad=requires_grad)
