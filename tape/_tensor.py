"""The Tensor: a NumPy value plus where it lives on the tape."""
from __future__ import annotations

import numpy as np

from jit.table import OPCODE

from . import _guards, _record
from ._conversions import conversion_error
from ._hooks import RemovableHandle, SlotHooks
from ._record import binary, is_operand, plain, slot_in, unary
from ._state import state
from ._tape import MAX_ROWS, current_tape, newest_tape_id

_new = object.__new__


# tape._numpy_impl (it needs this module, this module its dispatch): bound by its import, so
# that a NumPy call on a tensor does not run an import statement
_impl = None

# tape.array_api's rule for comparison results, installed when the namespace is first imported
# (before that, every comparison gives NumPy bools without a further call)
_array_api_masks = None


class _LeafMeta:
    """What only leaves carry: the accumulated gradient and the buffer's version counter."""

    __slots__ = ("grad", "version", "hooks", "post_hooks", "born")

    def __init__(self):
        self.grad = None
        self.version = 0
        # the oldest tape that may import it, were it used at once (``_tape.horizon``)
        t = state.tape
        self.born = t.id if t is not None and not t.sealed else newest_tape_id()
        self.hooks = {}  # handle id -> fn(grad) -> replacement or None
        self.post_hooks = {}  # handle id -> fn(tensor), after .grad is updated


def _binop(name, reflected=False):
    """The operator for a binary table row, with the 0-d fast path inlined.

    Scalar-heavy code (a Python loop over 0-d values) spends its time here, so the common case
    (two 0-d floats, recording on) appends one row without any further Python call.
    """
    code = OPCODE[name]
    f = _record.SCALAR[code]

    def op(self, other):
        to = type(other)
        if to is Tensor:
            ov = other._v
            ro = other._rg
        elif to is float:
            ov = other
            ro = False
        elif to is int:
            ov = other = float(other)
            ro = False
        elif is_operand(other):
            return binary(code, other, self) if reflected else binary(code, self, other)
        else:
            return NotImplemented
        sv = self._v
        if type(sv) is not float or type(ov) is not float:
            return binary(code, other, self) if reflected else binary(code, self, other)
        y = f(ov, sv) if reflected else f(sv, ov)
        rs = self._rg
        if not ((rs or ro) and state.grad):
            r = _new(Tensor)
            r._v = y
            r._tape = None
            r._slot = -1
            r._rg = False
            r._meta = None
            return r
        t = state.tape
        if t is None or t.sealed:
            t = current_tape()
        s1 = self._slot if (rs and self._tape is t) else slot_in(t, self)
        if ro and other._tape is t:
            s2 = other._slot
        elif to is Tensor:
            s2 = slot_in(t, other)
        else:
            s2 = t.scalar_const(ov)
        vals = t.sv
        slot = len(vals)
        vals.append(y)
        t.rows.extend((code, s2, s1) if reflected else (code, s1, s2))
        if slot >= MAX_ROWS:
            t.roll()
        r = _new(Tensor)
        r._v = y
        r._tape = t
        r._slot = slot
        r._rg = True
        r._meta = None
        return r

    op.__name__ = f"__{'r' if reflected else ''}{name}__"
    return op


def _inplace(name):
    code = OPCODE[name]
    ufunc = _record.TABLE[code].ufunc

    def op(self, other):
        if not (type(other) is Tensor or is_operand(other)):
            return NotImplemented
        if self._meta is not None and self._rg:
            if state.grad:
                raise RuntimeError(
                    f"a leaf tensor that requires grad is being used in an in-place operation "
                    f"({name}). Wrap optimiser steps in `with tape.no_grad():`, or use "
                    f"`x = x {_SYMBOL.get(name, name)} y` to create a new tensor.")
            ov = other._v if type(other) is Tensor else other
            ufunc(self._v, ov, out=self._v)
            self._meta.version += 1
            return self
        r = binary(code, self, other)
        self._rebind(r)
        return self

    op.__name__ = f"__i{name}__"
    return op


_SYMBOL = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "power": "**"}


class Tensor:
    """A float64 array (or scalar) that records the operations applied to it.

    >>> w = tape.tensor(np.ones(3), requires_grad=True)
    >>> loss = (np.sin(w) * w).sum()
    >>> loss.backward()
    >>> w.grad
    array([1.38177329, 1.38177329, 1.38177329])
    """

    __slots__ = ("_v", "_tape", "_slot", "_rg", "_meta", "__weakref__")
    __array_priority__ = 1000  # NumPy defers binary operators with ndarrays to us

    # -- construction ---------------------------------------------------------------------------
    def __init__(self, data, requires_grad=False):
        if type(data) is Tensor and data._rg:
            raise conversion_error("tensor")
        v = _record.constant(data._v if type(data) is Tensor else data, "tensor")
        if isinstance(data, (np.ndarray, np.generic)) and data.dtype.kind in "biu" \
                and requires_grad:
            raise TypeError(f"only floating point tensors can require gradients; got dtype "
                            f"{data.dtype}. Use tape.tensor(x.astype(float), requires_grad=True).")
        self._v = v
        self._tape = None
        self._slot = -1
        self._rg = False
        self._meta = None
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

    def numpy(self):
        """The value as a read-only NumPy array (use np.array(t.numpy()) for a writable copy)."""
        v = self._v
        if state.guards is not None:
            _guards.note(("np", "array"), (self,), np.array(v))
        if type(v) is float:
            return np.array(v)
        out = v.view()
        out.flags.writeable = False
        return out

    def item(self):
        if self.size != 1:
            raise ValueError(f"item(): tensor of shape {self.shape} has {self.size} elements")
        r = float(np.reshape(self._v, -1)[0]) if type(self._v) is not float else self._v
        if state.guards is not None:
            _guards.note(("item",), (self,), r)
        return r

    def tolist(self):
        if state.guards is not None:
            _guards.note(("np", "array"), (self,), np.array(self._v))
        return np.asarray(self._v).tolist()

    def detach(self):
        """A new tensor with the same value and no history (the value is shared read-only)."""
        v = self._v
        if state.guards is not None:
            _guards.note(("np", "array"), (self,), np.array(v))
        return plain(v if type(v) is float else self.numpy())

    def copy(self):
        return _record.reshape(self, self.shape) if self.ndim else +self

    def astype(self, dtype, copy=True):
        if np.dtype(dtype) != np.float64:
            raise TypeError(f"tapejit tensors are float64; astype({np.dtype(dtype)}) is not "
                            "supported (use t.detach().numpy().astype(...) for plain values)")
        return self.copy() if copy else self

    # -- conversions: a value that carries a gradient leaves only by an explicit name ---------
    # float(t), math.exp(t), '%f' % t, out[i] = t into an ndarray, np.asarray(t) and the like
    # hand Python a plain value, and every gradient through it would be zero without a word. So
    # they are refused for a tensor that requires grad (a leaf, a result with history, a dual
    # number); t.item(), t.tolist(), t.numpy() and t.detach() say what they return.
    def __float__(self):
        if self._rg:
            raise conversion_error("float")
        return self.item()

    def __int__(self):
        if self._rg:
            raise conversion_error("int")
        return int(self.item())

    def __bool__(self):
        if self._rg:
            raise conversion_error("bool")
        return bool(np.reshape(self._v, -1)[0]) if self.size == 1 else bool(np.asarray(self._v))

    def __index__(self):
        if self._rg:
            raise conversion_error("index")
        x = self.item()
        if x != int(x):
            raise TypeError(f"only integer-valued tensors can be used as an index (got {x})")
        return int(x)

    def __complex__(self):
        if self._rg:
            raise conversion_error("float")
        return complex(self.item())

    def __array__(self, dtype=None, copy=None):
        if self._rg:
            raise conversion_error("array")
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

    # -- arithmetic -----------------------------------------------------------------------------
    __add__ = _binop("add")
    __radd__ = _binop("add", True)
    __sub__ = _binop("subtract")
    __rsub__ = _binop("subtract", True)
    __mul__ = _binop("multiply")
    __rmul__ = _binop("multiply", True)
    __truediv__ = _binop("divide")
    __rtruediv__ = _binop("divide", True)
    __pow__ = _binop("power")
    __rpow__ = _binop("power", True)
    __iadd__ = _inplace("add")
    __isub__ = _inplace("subtract")
    __imul__ = _inplace("multiply")
    __itruediv__ = _inplace("divide")
    __ipow__ = _inplace("power")

    def __neg__(self):
        return unary(_NEG, self)

    def __pos__(self):
        return unary(_COPY, self)

    def __abs__(self):
        return unary(_ABS, self)

    def __matmul__(self, other):
        return _record.matmul(self, other) if is_operand(other) else NotImplemented

    def __rmatmul__(self, other):
        return _record.matmul(other, self) if is_operand(other) else NotImplemented

    def __imatmul__(self, other):
        self._rebind(_record.matmul(self, other))
        return self

    def __floordiv__(self, other):
        return plain(_record.check_dtype(np.floor_divide(self._v, _record.raw(other)), "//"))

    def __rfloordiv__(self, other):
        return plain(_record.check_dtype(np.floor_divide(_record.raw(other), self._v), "//"))

    def __mod__(self, other):
        return binary(REMAINDER, self, other)

    def __rmod__(self, other):
        return binary(REMAINDER, other, self)

    # comparisons give plain values (NumPy bools), as NumPy users expect; in array-API code
    # (SciPy) they give the namespace's boolean arrays, so that a mask and the tensors it
    # selects from report one namespace (tape.array_api._discrete.from_comparison)
    def __lt__(self, other):
        r = np.less(self._v, _record.raw(other))
        r = r if state.guards is None else _guards.note(("np", "less"), (self, other), r)
        return r if _array_api_masks is None else _array_api_masks(r)

    def __le__(self, other):
        r = np.less_equal(self._v, _record.raw(other))
        r = r if state.guards is None else _guards.note(("np", "less_equal"), (self, other), r)
        return r if _array_api_masks is None else _array_api_masks(r)

    def __gt__(self, other):
        r = np.greater(self._v, _record.raw(other))
        r = r if state.guards is None else _guards.note(("np", "greater"), (self, other), r)
        return r if _array_api_masks is None else _array_api_masks(r)

    def __ge__(self, other):
        r = np.greater_equal(self._v, _record.raw(other))
        r = r if state.guards is None else _guards.note(("np", "greater_equal"), (self, other),
                                                        r)
        return r if _array_api_masks is None else _array_api_masks(r)

    def __eq__(self, other):
        r = np.equal(self._v, _record.raw(other))
        r = r if state.guards is None else _guards.note(("np", "equal"), (self, other), r)
        return r if _array_api_masks is None else _array_api_masks(r)

    def __ne__(self, other):
        r = np.not_equal(self._v, _record.raw(other))
        r = r if state.guards is None else _guards.note(("np", "not_equal"), (self, other), r)
        return r if _array_api_masks is None else _array_api_masks(r)

    # -- indexing -------------------------------------------------------------------------------
    def __getitem__(self, key):
        return _record.getitem(self, key)

    def __setitem__(self, key, value):
        if self._meta is not None and self._rg:
            if state.grad:
                raise RuntimeError("a leaf tensor that requires grad is being used in an in-place "
                                   "operation (item assignment). Wrap it in `with tape.no_grad():`"
                                   " or assign into a copy: y = x.copy(); y[idx] = v.")
            self._v[_record._plain_key(key)] = _record.raw(value)
            self._meta.version += 1
            return
        self._rebind(_record.setitem(self, key, value))

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    # -- NumPy protocols ------------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "__call__" and not kwargs:  # the common case, without the generic checks
            code = _UFUNC_CODE.get(ufunc)
            if code is not None:
                if len(inputs) == 1:
                    return unary(code, self)
                a, b = inputs
                if type(a) in _FAST_OPERANDS and type(b) in _FAST_OPERANDS:
                    return binary(code, a, b)
        return _impl.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _impl.array_function(func, types, args, kwargs)

    # -- the Python array API standard (tape.array_api) -----------------------------------------
    def __array_namespace__(self, *, api_version=None):
        from . import array_api

        if api_version is not None and api_version not in array_api.API_VERSIONS:
            raise ValueError(f"tape.array_api implements the array API standard "
                             f"{array_api.__array_api_version__}; api_version={api_version!r} "
                             f"is not one of {array_api.API_VERSIONS}")
        return array_api

    @property
    def device(self):
        return "cpu"

    def to_device(self, device, /, *, stream=None):
        from .array_api import to_device

        return to_device(self, device)

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

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this tensor's gradient is computed; a returned array replaces
        the gradient. Hooks run in registration order. Returns a handle with ``.remove()``.

        >>> h = y.register_hook(lambda g: np.clip(g, -1.0, 1.0))   # clip what flows back
        """
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that does not require grad")
        table = self._meta.hooks if self._meta is not None else self._slot_hooks().hooks
        handle = RemovableHandle(table)
        table[handle.id] = hook
        if state.guards is not None:
            _guards.note_hook(handle.id)
        return handle

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(tensor)`` on a leaf after backward has added to its ``.grad``."""
        if self._meta is None:
            raise RuntimeError("post-accumulate-grad hooks can only be registered on leaf tensors "
                               "that require grad")
        handle = RemovableHandle(self._meta.post_hooks)
        self._meta.post_hooks[handle.id] = hook
        if state.guards is not None:
            _guards.note_hook(handle.id)
        return handle

    def retain_grad(self):
        """Keep this non-leaf tensor's gradient in ``.grad`` after ``backward()``."""
        if not self._rg:
            raise RuntimeError("can't retain_grad on a tensor that does not require grad")
        if self._meta is None:
            self._slot_hooks().retain = True
            if state.guards is not None:
                _guards.note_hook(("retain", self._slot))

    @property
    def retains_grad(self):
        h = self._slot_hooks(create=False)
        return h is not None and h.retain

    # -- autograd -------------------------------------------------------------------------------
    def backward(self, gradient=None, retain_graph=None, create_graph=False):
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (seeded with ``gradient``);
        with ``create_graph=True`` the backward is recorded, for higher derivatives."""
        from .autograd import backward

        backward([self], None if gradient is None else [gradient], retain_graph=retain_graph,
                 create_graph=create_graph)


_UFUNC_CODE = _record.UFUNC_CODE
_FAST_OPERANDS = {Tensor, np.ndarray, float, int}
_NEG = OPCODE["neg"]
_COPY = OPCODE["copy"]
_ABS = OPCODE["abs"]
REMAINDER = OPCODE["remainder"]
_record.Tensor = Tensor


def tensor(data, requires_grad=False) -> Tensor:
    """Make a tensor from array-like data (always copied into a float64 buffer).

    >>> w = tape.tensor([1.0, 2.0], requires_grad=True)
    """
    return Tensor(data, requires_grad=requires_grad)
