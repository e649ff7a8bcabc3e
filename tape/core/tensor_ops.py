"""Tensor's Python operators, indexing and value exits, which record rows or note the guards of
``tape.compile``: given to the class (``tape/core/tensor.py``) here, above the recording functions
they call."""
from __future__ import annotations

import numpy as np

from jit.table import OPCODE

from . import bilinear as _bilinear, guards as _guards, record as _record, views as _views
from .hooks import RemovableHandle
from .record import binary, unary
from .state import state
from .tape import MAX_ROWS
from .tensor import ARRAY0, Tensor, _new, general_tape, install, is_operand, plain, raw, slot_in
from .values import check_dtype

_NEG = OPCODE["neg"]
_COPY = OPCODE["copy"]
_ABS = OPCODE["abs"]
REMAINDER = OPCODE["remainder"]

# What a comparison returns is passed through this function when one is set
# (``set_comparison_results``): tape.array_api sets its rule for masks when first imported; until
# then every comparison gives NumPy bools without a further call.
_comparison_results = None


def set_comparison_results(fn):
    """Have every comparison of tensors return ``fn(result)`` (NumPy bools in, what the caller's
    namespace expects out)."""
    global _comparison_results
    _comparison_results = fn


def _binop(name, reflected=False):
    """The operator for a binary table row, with the 0-d path and binary's array cases inlined.

    Scalar-heavy code (a Python loop over 0-d values) spends its time here, so the common case
    (two 0-d tensors on the recording tape, or one and a Python float it has a constant for)
    appends its row first, with no other case tested and no further Python call; an op of array
    tensors (W5's) calls binary's direct paths without binary's frame.
    """
    code = OPCODE[name]
    f = _record.SCALAR[code]
    same_shape, broadcast, with_float = _record._same_shape, _record._broadcast, \
        _record._with_float

    def op(self, other):
        to = type(other)
        sv = self._v
        if type(sv) is not float:  # an array tensor (or a 0-d leaf's buffer)
            if to is Tensor:
                ov = other._v
                if type(sv) is np.ndarray and type(ov) is np.ndarray and sv.ndim and ov.ndim:
                    if reflected:
                        return same_shape(code, other, self, ov, sv) if ov.shape == sv.shape \
                            else broadcast(code, other, self, ov, sv)
                    return same_shape(code, self, other, sv, ov) if ov.shape == sv.shape \
                        else broadcast(code, self, other, sv, ov)
            elif to is float or to is int:
                other = float(other) if to is int else other
                if type(sv) is np.ndarray and sv.ndim and sv.size != 1:
                    return with_float(code, self, other, sv, reflected)
            elif not is_operand(other):
                return NotImplemented
            return binary(code, other, self) if reflected else binary(code, self, other)
        t = state.rec  # (0-d rows keep their value in sv: saved_tensors_hooks pack none)
        y = None
        if t is not None and self._tape is t and not t.sealed:
            # self on the recording tape (so it requires grad), and other a 0-d tensor on it
            # too or a Python float whose shared constant is there already: the row the
            # general code below appends, with none of its cases to tell apart
            if to is Tensor:
                if other._tape is t and type(other._v) is float:
                    ov = other._v
                    y = f(ov, sv) if reflected else f(sv, ov)
                    s2 = other._slot
            elif to is float and other:
                s2 = t.consts.get(other)
                if s2 is not None:
                    y = f(other, sv) if reflected else f(sv, other)
        if y is not None:
            s1 = self._slot
        else:
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
            if type(ov) is not float:
                return binary(code, other, self) if reflected else binary(code, self, other)
            y = f(ov, sv) if reflected else f(sv, ov)
            rs = self._rg
            if rs or ro:  # (t: state.rec, read above)
                if t is None or t.sealed:
                    t = general_tape()
            else:
                t = None
            if t is None:
                r = _new(Tensor)
                r._v = y
                r._tape = None
                r._slot = -1
                r._rg = False
                r._meta = None
                r._alias = None
                return r
            s1 = self._slot if (rs and self._tape is t) else slot_in(t, self)
            if ro and other._tape is t:
                s2 = other._slot
            elif to is Tensor:
                s2 = slot_in(t, other)
            else:  # a Python float: the tape's shared constant (scalar_const adds it once)
                s2 = t.consts.get(ov) if ov else None
                if s2 is None:
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
        r._alias = None
        return r

    op.__name__ = f"__{'r' if reflected else ''}{name}__"
    return op


def _inplace(name, fn, ufunc=None):
    """``x op= y`` as NumPy does it, with ``fn(x, y)`` the op. A scalar (np.float64) is
    immutable, so the name is rebound to the new tensor; an array is written in place, and every
    view of it sees the write (``views.assign``); a leaf that requires grad is written only under
    no_grad (by NumPy's `ufunc` into its buffer, where the op is one)."""

    def op(self, other):
        if not (type(other) is Tensor or is_operand(other)):
            return NotImplemented
        if self._meta is not None and self._rg:
            if state.grad:
                raise RuntimeError(
                    f"a leaf tensor that requires grad is being used in an in-place operation "
                    f"({name}). Wrap optimiser steps in `with tape.no_grad():`, or use "
                    f"`x = x {_SYMBOL.get(name, name)} y` to create a new tensor.")
            if ufunc is not None:
                ufunc(self._v, raw(other), out=self._v)
            else:
                self._v[...] = fitted(self, fn(self, other))._v
            _views.leaf_written(self)
            return self
        r = fn(self, other)
        if self._alias is None and type(self._v) is float:
            return r  # a scalar: immutable
        _views.assign(self, fitted(self, r))
        return self

    op.__name__ = f"__i{name}__"
    return op


def fitted(target, r):
    """r, the result of an in-place op on `target`: of target's shape, or NumPy's error."""
    ts, rs = target.shape, r.shape if type(r) is Tensor else np.shape(r)
    if rs != ts:
        raise ValueError(f"non-broadcastable output operand with shape {_views.shape_text(ts)} "
                         f"doesn't match the broadcast shape {_views.shape_text(rs)}")
    return r


def _unpickled(value, leaf, grad, array0):
    t = Tensor(value, requires_grad=leaf)
    if leaf:
        t.grad = grad
    else:
        t._alias = ARRAY0 if array0 else None  # (a 0-d op result is a scalar)
    return t


def _shallow_copy(t):
    r = _new(Tensor)
    r._v, r._tape, r._slot, r._rg, r._meta, r._alias = t._v, t._tape, t._slot, t._rg, t._meta, \
        t._alias
    return r


_BASIC = (int, slice, type(None), type(Ellipsis), np.integer)
_SIMPLE = frozenset((int, slice, type(None), type(Ellipsis)))


def _may_view(key):
    """Whether NumPy might answer x[key] with a view: key has no array or list of one or more
    dimensions (NumPy's advanced indexing, always a copy)."""
    for k in key if type(key) is tuple else (key,):
        if not isinstance(k, _BASIC) and np.ndim(k.numpy() if type(k) is Tensor and not k._rg
                                                 else k) != 0:
            return False
        if isinstance(k, (bool, np.bool_)):
            return False
    return True


_SYMBOL = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "power": "**",
           "matmul": "@", "floordiv": "//", "mod": "%"}


class TensorOperators:
    """Tensor's methods that record or note guards (``install`` makes them Tensor's)."""

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

    def copy(self, order="C"):
        if not self._rg:  # (a plain value may be handed out by np.asarray: a copy of its own)
            v = self._v
            r = plain(v if type(v) is float else v.copy())
        else:
            r = _record.reshape(self, self.shape) if self.ndim else +self
        if r.ndim == 0 and self._alias is not None:  # a 0-d array's copy is one too
            r._alias = ARRAY0
        return r

    def __copy__(self):
        # copy.copy of a view is a copy of its elements (NumPy's), not a second name for them
        return self.copy() if type(self._alias) is _views.Alias else _shallow_copy(self)

    def __deepcopy__(self, memo):
        # A deep copy of a result with history is a copy op: recorded, so the gradient reaches
        # what it was computed from. Of a leaf: a new leaf (own buffer, a copy of its .grad).
        r = self.copy() if self._rg and self._meta is None else _unpickled(*self.__reduce__()[1])
        memo[id(self)] = r
        return r

    def __reduce__(self):
        # A pickle holds values, not a recording (docs/api.md): a result with history comes
        # back as a plain tensor, a leaf as a leaf with its .grad, a 0-d array as one.
        # (no copies here: Tensor() and the .grad setter copy what they are given)
        m = self._meta
        return (_unpickled, (self._v, m is not None, None if m is None else m.grad,
                             self._alias is not None and self.ndim == 0))

    def astype(self, dtype, copy=True):
        if np.dtype(dtype) != np.float64:
            raise TypeError(f"tapejit tensors are float64; astype({np.dtype(dtype)}) is not "
                            "supported (use t.detach().numpy().astype(...) for plain values)")
        return self.copy() if copy else self


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
    __iadd__ = _inplace("add", __add__, np.add)
    __isub__ = _inplace("subtract", __sub__, np.subtract)
    __imul__ = _inplace("multiply", __mul__, np.multiply)
    __itruediv__ = _inplace("divide", __truediv__, np.divide)
    __ipow__ = _inplace("power", __pow__, np.power)

    def __neg__(self):
        return unary(_NEG, self)

    def __pos__(self):
        return unary(_COPY, self)

    def __abs__(self):
        return unary(_ABS, self)

    def __matmul__(self, other):
        return _bilinear.matmul(self, other) if is_operand(other) else NotImplemented

    def __rmatmul__(self, other):
        return _bilinear.matmul(other, self) if is_operand(other) else NotImplemented

    __imatmul__ = _inplace("matmul", lambda a, b: _bilinear.matmul(a, b))
    __ifloordiv__ = _inplace("floordiv", lambda a, b: a // b)
    __imod__ = _inplace("mod", lambda a, b: a % b)

    def __floordiv__(self, other):
        return plain(check_dtype(np.floor_divide(self._v, raw(other)), "//"))

    def __rfloordiv__(self, other):
        return plain(check_dtype(np.floor_divide(raw(other), self._v), "//"))

    def __mod__(self, other):
        return binary(REMAINDER, self, other)

    def __rmod__(self, other):
        return binary(REMAINDER, other, self)

    # comparisons give plain values (NumPy bools), as NumPy users expect; in array-API code
    # (SciPy) they give the namespace's boolean arrays, so that a mask and the tensors it
    # selects from report one namespace (tape.array_api._discrete.from_comparison)
    def __lt__(self, other):
        r = np.less(self._v, raw(other))
        r = r if state.guards is None else _guards.note(("np", "less"), (self, other), r)
        return r if _comparison_results is None else _comparison_results(r)

    def __le__(self, other):
        r = np.less_equal(self._v, raw(other))
        r = r if state.guards is None else _guards.note(("np", "less_equal"), (self, other), r)
        return r if _comparison_results is None else _comparison_results(r)

    def __gt__(self, other):
        r = np.greater(self._v, raw(other))
        r = r if state.guards is None else _guards.note(("np", "greater"), (self, other), r)
        return r if _comparison_results is None else _comparison_results(r)

    def __ge__(self, other):
        r = np.greater_equal(self._v, raw(other))
        r = r if state.guards is None else _guards.note(("np", "greater_equal"), (self, other), r)
        return r if _comparison_results is None else _comparison_results(r)

    def __eq__(self, other):
        r = np.equal(self._v, raw(other))
        r = r if state.guards is None else _guards.note(("np", "equal"), (self, other), r)
        return r if _comparison_results is None else _comparison_results(r)

    def __ne__(self, other):
        r = np.not_equal(self._v, raw(other))
        r = r if state.guards is None else _guards.note(("np", "not_equal"), (self, other), r)
        return r if _comparison_results is None else _comparison_results(r)

    # -- indexing -------------------------------------------------------------------------------
    def __getitem__(self, key):
        y = _record.getitem(self, key)
        if type(key) is int:  # (the common case first: x[i] of a vector is a scalar)
            return y if self.ndim < 2 else _views.derive(self, y, lambda p: p[key])
        if type(key) is tuple:
            for k in key:
                if type(k) not in _SIMPLE:
                    break
            else:  # ints, slices, None and Ellipsis: NumPy's basic indexing, a view
                return _views.derive(self, y, lambda p: p[key])
        if _may_view(key):  # (NumPy integers, 0-d keys, ...)
            key = _record.plain_key(key)
            return _views.derive(self, y, lambda p: p[key])
        return y

    def __setitem__(self, key, value):
        a = self._alias
        if a is None and type(self._v) is float and self._meta is None:
            # NumPy's scalar refuses item assignment; array-API code (SciPy's) writes into 0-d
            # results, its arrays: the scalar becomes the 0-d array it writes into
            self._alias = a = ARRAY0
        if self._meta is not None and self._rg:
            if state.grad:
                raise RuntimeError("a leaf tensor that requires grad is being used in an in-place "
                                   "operation (item assignment). Wrap it in `with tape.no_grad():`"
                                   " or assign into a copy: y = x.copy(); y[idx] = v.")
            self._v[_record.plain_key(key)] = raw(value)
            _views.leaf_written(self)
            return
        if type(a) is _views.Alias:
            _views.assign_at(self, key, value)
        else:
            self._rebind(_record.setitem(self, key, value))

    # -- NumPy's aliasing (tape/core/views.py) --------------------------------------------------
    @property
    def base(self):
        """The tensor whose elements this view shares (NumPy's ``a.base``), else None."""
        return _views.base_of(self)

    def view(self, dtype=None, type=None):
        """A new view of the same elements (float64 only)."""
        if (dtype is not None and np.dtype(dtype) != np.float64) or type is not None:
            raise TypeError("tapejit tensors are float64: view(dtype) of another dtype is not "
                            "supported")
        return _views.derive(self, self, lambda p: p.view())

    @property
    def real(self):
        return self  # (NumPy: a real array's .real is the array itself)

    @property
    def imag(self):
        v = np.zeros(self.shape)
        v.flags.writeable = False  # NumPy's .imag of a real array: read-only zeros
        return plain(v if v.ndim else 0.0)

    def fill(self, value):
        """Every element becomes `value` (NumPy's in-place ``a.fill``)."""
        self[...] = value

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


install(TensorOperators)
