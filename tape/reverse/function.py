"""Custom differentiable functions: ``class F(tape.Function)`` with its own forward and backward.

    class Clip(tape.Function):
        @staticmethod
        def forward(ctx, x, lo, hi):
            ctx.save_for_backward(x)
            ctx.lo, ctx.hi = lo, hi
            return np.clip(x, lo, hi)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * ((x >= ctx.lo) & (x <= ctx.hi)), None, None

    y = Clip.apply(x, -1.0, 1.0)

On the tape a call is a chain of ``function`` rows that ties its tensor arguments to one hub
slot, plus one ``function_out`` row per output; the kernels treat them as no-ops. The backward
driver cuts the jitted sweep at the hub (every consumer of the outputs has been swept by then, so
their gradients are complete), calls ``backward`` in Python and adds its results to the
arguments' adjoints before the sweep goes on.
"""
from __future__ import annotations

import numpy as np

from jit.table import OPCODE

from ..core.values import check_dtype
from ..core.tensor import plain, result, slot_in
from ..core.state import enable_grad, no_grad, state
from ..core.tape import MAX_ROWS, current_tape
from ..core.tensor import Tensor
from ..core.saved_variable import SavedVariable
from .vjp_rules import _sum_to

FUNCTION = OPCODE["function"]
FUNCTION_OUT = OPCODE["function_out"]


class FunctionCtx:
    """The ``ctx`` of a custom Function: saved tensors, flags, and any attributes you set."""

    def __init__(self, name, needs_input_grad):
        self._name = name
        self.needs_input_grad = needs_input_grad
        self.materialize_grads = True
        self._to_save = None
        self._saved = None
        self._non_differentiable = ()

    def save_for_backward(self, *tensors):
        """Save tensors (arguments, outputs or intermediates of forward, or None) for backward;
        read them back with ``ctx.saved_tensors``. Non-tensor values go on ctx as attributes."""
        for i, x in enumerate(tensors):
            if x is not None and type(x) is not Tensor:
                raise TypeError(f"{self._name}: save_for_backward takes tensors or None; argument "
                                f"{i} is a {type(x).__name__} (store other values as attributes "
                                f"of ctx, e.g. ctx.k = k)")
        self._to_save = tensors

    @property
    def saved_tensors(self):
        if self._saved is None:
            if self._to_save is not None:  # still in forward
                raise RuntimeError(f"{self._name}: saved_tensors are available in backward only")
            return ()
        return tuple(None if s is None else s.unpack() for s in self._saved)

    def mark_non_differentiable(self, *outputs):
        """Outputs that get no gradient (e.g. indices); their backward gradient is zero."""
        self._non_differentiable = tuple(id(o) for o in outputs)

    def set_materialize_grads(self, value: bool):
        """With False, backward receives None (not zeros) for outputs that got no gradient."""
        self.materialize_grads = bool(value)


class Function:
    """Base class of custom differentiable functions; call them with ``F.apply(*args)``.

    ``forward(ctx, *args)`` runs without recording and gets tensors without history;
    ``backward(ctx, *grads)`` gets one gradient per output and returns one per argument of
    forward (None for non-tensors and for arguments that need none). Both are static methods.
    """

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError("a tape.Function subclass must define a static forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("a tape.Function subclass must define a static backward(ctx, "
                                  "*grads) to be differentiated")

    @staticmethod
    def jvp(ctx, *tangents):
        """Forward mode (optional): one tangent per output from one per argument of forward
        (None for non-tensors and for arguments without a tangent)."""
        raise NotImplementedError("this tape.Function defines no static jvp(ctx, *tangents)")

    @classmethod
    def apply(cls, *args):
        name = cls.__name__
        rec = state.grad and any(type(a) is Tensor and a._rg for a in args)
        needs = tuple(rec and type(a) is Tensor and a._rg for a in args)
        ctx = FunctionCtx(name, needs)
        inner = tuple(plain(a._v) if type(a) is Tensor else a for a in args)
        with no_grad():
            out = cls.forward(ctx, *inner)
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        if not rec:
            ctx._to_save = None
            outs = tuple(_as_output(o) for o in outs)
            return outs[0] if single else outs

        t = current_tape()
        # the chain: hub = function(...function(function(x0, x1), x2)..., xn), 0-d dummy rows
        arg_slots = [(i, slot_in(t, a)) for i, a in enumerate(args) if needs[i]]
        first = arg_slots[0][1]
        if len(arg_slots) == 1:
            hub = _dummy_row(t, first, -1)
            chain = [(hub, 1)]  # (row, need bit) per differentiable argument
        else:
            hub = _dummy_row(t, first, arg_slots[1][1])
            chain = [(hub, 1), (hub, 2)]
            for _, s in arg_slots[2:]:
                hub = _dummy_row(t, hub, s)
                chain.append((hub, 2))
        node = FunctionNode(cls, ctx, [(i, s, _shape(args[i]._v)) for i, s in arg_slots],
                            chain, tuple(type(a) is Tensor for a in args))
        results = []
        out_slots = {}  # id of a forward output -> (its value, slot)
        for o in outs:
            if type(o) is Tensor and id(o) in ctx._non_differentiable:
                results.append(plain(o._v))
                node.outs.append((None, _shape(o._v)))
                continue
            v = _float_value(o)
            if v is None:  # not a float array: not differentiable, handed back as is
                results.append(_as_output(o))
                continue
            slot = t.row(FUNCTION_OUT, hub, -1, v, 1 if type(v) is float else v.size)
            out_slots[id(o)] = (v, slot)
            node.outs.append((slot, _shape(v)))
            results.append(result(v, t, slot))
        if ctx._to_save is not None:
            node.save(ctx._to_save, args, inner, out_slots, t)
        if state.guards is not None and len(node.outs) == len(outs) \
                and all(slot is not None for slot, _ in node.outs):
            node.replay_args = inner  # recording for tape.compile: a replay calls forward again
        if t.functions is None:
            t.functions = {}
        t.functions[hub] = node
        if len(t.sv) >= MAX_ROWS:
            t.roll()
        results = tuple(results)
        return results[0] if single else results


class FunctionNode:
    """What the tape keeps of one Function call (in ``Tape.functions``, keyed by its hub)."""

    __slots__ = ("cls", "ctx", "args", "chain", "nargs", "tensor_args", "outs", "replay_args",
                 "jvp")

    def __init__(self, cls, ctx, args, chain, tensor_args):
        self.cls = cls
        # the forward-mode rule (tape.forward_ad calls it), None when cls defines none
        self.jvp = cls.jvp if cls.jvp is not Function.jvp else None
        self.ctx = ctx
        self.args = args  # (argument position, slot, shape) of each differentiable argument
        self.chain = chain  # (row, need bit) telling whether the backward needs each of them
        self.nargs = len(tensor_args)
        self.tensor_args = tensor_args  # per argument of forward: is it a tensor
        self.outs = []  # (slot or None if non-differentiable, shape) per float output
        self.replay_args = None  # forward's arguments as recorded (under tape.compile only)

    def replay(self, t):
        """Call forward again, with the current values of the differentiable arguments (the
        others as recorded), write its outputs into their rows and keep what it saved: a
        compiled tape's forward sweep stops at the hub for this. The outputs must keep their
        shapes."""
        name = self.cls.__name__
        inner = list(self.replay_args)
        for i, slot, shape in self.args:
            v = t.value(slot)
            inner[i] = plain(np.array(v) if type(v) is np.ndarray else v)
        ctx = FunctionCtx(name, self.ctx.needs_input_grad)
        with no_grad():
            out = self.cls.forward(ctx, *inner)
        outs = out if isinstance(out, tuple) else (out,)
        if len(outs) != len(self.outs):
            raise RuntimeError(f"{name}.forward returned {len(outs)} outputs on replay, "
                               f"{len(self.outs)} when recorded")
        out_slots = {}
        for o, (slot, shape) in zip(outs, self.outs):
            v = _float_value(o)
            if v is None or _shape(v) != shape:
                raise RuntimeError(f"{name}.forward returned an output of shape "
                                   f"{_shape(v) if v is not None else type(o).__name__} on "
                                   f"replay, {shape} when recorded: a compiled tape needs the "
                                   "same shapes")
            t.store(slot, v)
            out_slots[id(o)] = (t.value(slot), slot)
        self.release()  # the previous call's saved values
        self.ctx = ctx
        if ctx._to_save is not None:
            self.save(ctx._to_save, inner, inner, out_slots, t)

    def save(self, tensors, args, inner, out_slots, t):
        """Turn what forward saved into SavedVariables: arguments are saved as the caller's
        tensors (a leaf by reference, version-checked), outputs as their recorded values."""
        by_id = {id(x): a for x, a in zip(inner, args) if type(x) is Tensor}
        saved = []
        what = f"{self.cls.__name__}.forward (save_for_backward)"
        for x in tensors:
            if x is None:
                saved.append(None)
                continue
            src = by_id.get(id(x), x)
            if id(x) in out_slots:
                v, slot = out_slots[id(x)]
                saved.append(SavedVariable(v, what, tape=t, slot=slot))
            elif type(src) is Tensor and src._rg and src._meta is None:
                saved.append(SavedVariable(src._v, what, tape=src._tape, slot=src._slot))
            else:
                saved.append(SavedVariable(src, what))
        self.ctx._saved = tuple(saved)
        self.ctx._to_save = None

    def run_backward(self, grads, need, differentiable=False):
        """Call the user's backward with the outputs' gradients (arrays, or tensors when
        `differentiable`; None for outputs that got none); returns [(slot, gradient)] for the
        arguments the sweep needs. A differentiable backward runs in grad mode, recorded."""
        ctx = self.ctx
        name = self.cls.__name__
        gin = []
        for g, (_, shape) in zip(grads, self.outs):
            if g is None and ctx.materialize_grads:
                g = np.zeros(shape) if shape else 0.0
            gin.append(None if g is None else g if type(g) is Tensor else plain(g))
        static = ctx.needs_input_grad
        needs = [False] * self.nargs  # what this sweep needs (a split backward needs a part)
        for (i, _, _), (row, bit) in zip(self.args, self.chain):
            needs[i] = needs[i] or bool(need[row] & bit)
        ctx.needs_input_grad = tuple(needs)
        try:
            with (enable_grad() if differentiable else no_grad()):
                res = self.cls.backward(ctx, *gin)
        finally:
            ctx.needs_input_grad = static
        if not isinstance(res, tuple):
            res = (res,)
        if len(res) != self.nargs:
            raise RuntimeError(f"function {name}.backward returned {len(res)} gradient"
                               f"{'s' if len(res) != 1 else ''}, expected {self.nargs} (one per "
                               f"argument of forward; use None for arguments without one)")
        out = []
        for (i, slot, shape), (row, bit) in zip(self.args, self.chain):
            g = res[i]
            if g is None or not need[row] & bit:
                continue
            out.append((slot, _check_grad_tensor(name, i, g, shape) if differentiable
                         else _check_grad(name, i, g, shape)))
        for i, g in enumerate(res):
            if g is not None and not self.tensor_args[i]:
                raise RuntimeError(f"function {name}.backward returned a gradient different "
                                   f"from None for argument {i}, which is not a tensor "
                                   f"({type(g).__name__}); return None for it")
        return out

    def release(self):
        if self.ctx._saved:
            for s in self.ctx._saved:
                if s is not None:
                    s.release()


def _check_grad(name, i, g, shape):
    g = np.asarray(g._v if type(g) is Tensor else g)
    if g.dtype.kind not in "biuf":
        raise RuntimeError(f"function {name}.backward returned a gradient of dtype {g.dtype} for "
                           f"argument {i}; expected a real (float64) array")
    g = g.astype(np.float64, copy=False)
    if g.shape == shape:
        return g
    try:  # a gradient of a broadcast shape is summed down to the argument's, as in PyTorch
        if np.broadcast_shapes(g.shape, shape) == g.shape:
            lead = g.ndim - len(shape)
            axes = tuple(range(lead)) + tuple(lead + k for k, s in enumerate(shape)
                                              if s == 1 and g.shape[lead + k] != 1)
            return np.sum(g, axis=axes).reshape(shape)
    except ValueError:
        pass
    raise RuntimeError(f"function {name}.backward returned a gradient of shape {g.shape} for "
                       f"argument {i}, which has shape {shape}")


def _dummy_row(t, a, b):
    row = len(t.sv)
    t.sv.append(0.0)
    t.rows.extend((FUNCTION, a, b))
    return row


def _check_grad_tensor(name, i, g, shape):
    """As _check_grad, keeping a tensor's history."""
    if type(g) is not Tensor:
        return plain(_check_grad(name, i, g, shape))
    gs = np.shape(g._v)
    if gs == shape:
        return g
    _check_grad(name, i, np.zeros(gs), shape)  # the same shape errors
    return _sum_to(g, shape)


def _shape(v):
    return () if type(v) is float else np.shape(v)


def _float_value(o):
    """An output's value as a canonical float/float64 array, or None if it is not differentiable
    (not numeric, or integer/bool)."""
    v = o._v if type(o) is Tensor else o
    if type(v) is float:
        return v
    if isinstance(v, (np.ndarray, np.floating)) and np.asarray(v).dtype.kind == "f":
        return check_dtype(np.asarray(v), "Function output")
    return None


def _as_output(o):
    if type(o) is Tensor:
        return o
    v = _float_value(o)
    return plain(v) if v is not None else o
