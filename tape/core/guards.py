"""Guards: every place where a recorded value escapes to Python while ``tape.compile`` records.

A compiled tape replays the recorded rows with new inputs. That is only valid while the Python
code around the rows would have taken the same path: an ``if x > 0``, a ``t.item()`` used as a
constant, an index computed by ``argmax``, a mask used to select elements. Each such read is
noted here with the slots it read and the result Python saw; a replay recomputes the result
from the replayed values and compares. A different result means a different program: the
compiled tape records again (a new variant) instead of returning a stale value.
"""
from __future__ import annotations


import numpy as np

from .callsite import caller as _caller
from .state import state
from .tensor import Tensor
from .values import check_dtype



# NumPy functions a guard may recompute (a loaded file names them: nothing else is called)
ALLOWED = {"less", "less_equal", "greater", "greater_equal", "equal", "not_equal", "array"}


def _item(v):
    return float(np.reshape(v, -1)[0])


def _bool(v):
    return bool(np.asarray(v).reshape(-1)[0]) if np.size(v) == 1 else bool(np.asarray(v))


def _plain(a):
    if type(a) is Tensor:
        return np.asarray(a._v)
    if isinstance(a, (list, tuple)):
        return type(a)(_plain(x) for x in a)
    return a


def numpy_function(name):
    """The NumPy function a guard names: "argmax", or "linalg.matrix_rank" for a submodule's."""
    obj = np
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def numpy_name(fn):
    """The name numpy_function finds `fn` by (a submodule's functions carry its prefix)."""
    for prefix, mod in (("", np), ("linalg.", np.linalg)):
        if getattr(mod, fn.__name__, None) is fn:
            return prefix + fn.__name__
    raise ValueError(f"{fn!r} is not a function of numpy or numpy.linalg")


def guard_fn(spec):
    """The recompute function named by a guard's `spec` (a JSON-able tuple, so that a compiled
    tape can be saved with its guards): ("np", name) a NumPy function or ufunc, ("item",),
    ("bool",), ("int",), ("zero_grad", ufunc name), ("values", function name, kwargs)."""
    kind = spec[0]
    if kind in ("np", "zero_grad", "values") and spec[1] not in ALLOWED:
        raise ValueError(f"guard {spec!r}: not a function guards may call")
    if kind == "np":
        return numpy_function(spec[1])
    if kind == "item":
        return _item
    if kind == "bool":
        return _bool
    if kind == "int":
        return int
    if kind == "zero_grad":
        ufunc = numpy_function(spec[1])
        return lambda *a: check_dtype(ufunc(*a), spec[1])
    if kind == "values":
        fn, kwargs = numpy_function(spec[1]), dict(spec[2])
        return lambda *a: fn(*_plain(a), **{k: _plain(v) for k, v in kwargs.items()})
    raise ValueError(f"unknown guard {spec!r}")


class Guard:
    __slots__ = ("spec", "fn", "operands", "result", "where")

    def __init__(self, spec, operands, result, where):
        self.spec = spec
        self.fn = guard_fn(spec)  # recompute: fn(*operand values) -> what Python saw
        self.operands = operands  # per operand: ("slot", slot) or ("const", value)
        self.result = result
        self.where = where  # "file:line" of the user code that read the value

    def holds(self, value_of):
        args = [value_of(x) if kind == "slot" else x._v if kind == "leaf" else x
                for kind, x in self.operands]
        try:
            now = self.fn(*args)
        except Exception:  # noqa: BLE001 - a read that fails now is a different program
            return False
        return _same(now, self.result)


def _same(a, b):
    if type(a) is not type(b) and not (isinstance(a, (bool, int, float, np.generic))
                                       and isinstance(b, (bool, int, float, np.generic))):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and bool(
        np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def note(spec, operands, result):
    """Record that Python saw ``result = guard_fn(spec)(*operands)``; operands may be tensors
    (recorded ones become slots of the compiled tape) or plain values."""
    log = state.guards
    if log is None:
        return result
    ops = []
    for x in operands:
        if type(x) is Tensor and x._rg and x._meta is not None:
            ops.append(("leaf", x))  # an input: read from its buffer, which replays refill
        elif type(x) is Tensor and x._rg:
            ops.append(("slot", (x._tape, x._slot)))  # compile checks the tape, keeps the slot
        else:
            ops.append(("const", x._v if type(x) is Tensor else x))
    if all(k == "const" for k, _ in ops):
        return result  # a function of constants only: always the same
    log.guards.append(Guard(spec, tuple(ops), _freeze(result), _caller()))
    return result


def note_hook(key):
    """Remember where user code registered a hook while tape.compile records (a replay that
    cannot run it names this line when it refuses)."""
    log = state.guards
    if log is not None:
        log.hook_sites[key] = _caller()


def _freeze(r):
    if isinstance(r, np.ndarray):
        return r.copy()
    if hasattr(r, "_fields"):  # a named tuple (unique_all's) keeps its type, as Python saw it
        return type(r)(*(_freeze(x) for x in r))
    if isinstance(r, tuple):
        return tuple(_freeze(x) for x in r)
    return r


class GuardLog:
    """The guards of one recording (``state.guards`` while tape.compile records)."""

    def __init__(self):
        self.guards = []
        self.hook_sites = {}  # hook handle id, or ("retain", slot) -> "file:line" registering it
        self.const_sites = None  # slot -> "file:line" of each constant, when asked (_frozen)

    def note_const(self, slot):
        if self.const_sites is not None:
            self.const_sites[slot] = _caller(3)

    def bind(self, t):
        """Check that every guarded value was recorded on tape `t`; keep slots only."""
        for g in self.guards:
            ops = []
            for kind, x in g.operands:
                if kind == "slot":
                    if x[0] is not t:
                        raise RuntimeError(f"tape.compile: the value read at {g.where} does not "
                                           "come from the compiled function's own recording")
                    x = x[1]
                ops.append((kind, x))
            g.operands = tuple(ops)
        return self.guards
