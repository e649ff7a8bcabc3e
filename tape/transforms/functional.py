"""Functional transforms, JAX/autograd-style: functions in, functions out, NumPy arrays back."""
from __future__ import annotations

import functools

import numpy as np

from jit.table import OPCODE

from ..reverse import autograd, backward as _backward
from ..core.record import unary
from ..core.state import state
from ..core.tape import newest_tape_id
from ..core.tensor import Tensor, _LeafMeta
from ..forward.forward_ad import exit_levels_from


class _FreshTape:
    """Record the wrapped call on a tape of its own, in grad mode. Inside a tape.compile
    recording (a guard log is active and a transform already runs) a nested transform records
    on the same tape instead: a replay sweeps one tape, and within one tape no link can point
    the wrong way (fresh input rows still keep each nested derivative to its own use)."""

    __slots__ = ("prev", "newest", "depth", "shared")

    def __enter__(self):
        self.prev = state.tape, state.grad
        self.newest = newest_tape_id()
        self.depth = len(state.levels)
        self.shared = state.guards is not None and state.transforms > 0
        if not self.shared:
            state.tape = None
        state.grad = True
        state.transforms += 1

    def __exit__(self, exc_type, *exc):
        state.transforms -= 1
        if exc_type is not None:  # dual levels the call entered and its exception left
            exit_levels_from(self.depth)
        if self.shared:
            state.grad = self.prev[1]
            return False
        t = state.tape
        state.tape, state.grad = self.prev
        if t is not None and (state.transforms or state.levels):
            t.nested = True
        if t is not None and not t.sealed and exc_type is None and t.id == newest_tape_id() \
                and (state.transforms or state.levels):
            # nested: the caller goes on recording on the call's tape, the newest, so its links
            # still point to older tapes, and a loop of nested steps makes one tape per step
            # (an outer backward's fixed cost is per tape)
            state.tape = t
        elif t is not None or newest_tape_id() != self.newest:
            if t is not None:
                t.seal()
            # later ops of the caller go to a new tape: a link always points to an older
            # tape (the backward visits tapes newest first), and the caller's tape is older
            # than any the call made (even when its own tape was left by a nested one's exit)
            state.tape = None
        return False


def _argnums(argnums, nargs):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for i in nums:
        if not -nargs <= i < nargs:
            raise ValueError(f"argnums {argnums} out of range for {nargs} positional arguments")
    return tuple(i % nargs for i in nums)


NESTED_REVERSE = (
    "{what} got a tensor with history for argument {i}: it runs inside another transform "
    "(tape.grad, tape.jvp, jacfwd, ...) that would differentiate it again, and {what} cannot "
    "keep that history; use tape.jvp, tape.grad, jacfwd, jacrev, hvp or hessian there instead.")


_F64 = np.dtype(np.float64)  # (native float64: any other dtype object takes the copy)


def _as_leaf(x, i, what="tape.grad"):
    if type(x) is Tensor and x._rg and state.transforms:
        raise NotImplementedError(NESTED_REVERSE.format(what=what, i=i))
    v = x.detach()._v if type(x) is Tensor else x
    arr = np.asarray(v)
    if arr.dtype is not _F64 or not arr.flags.c_contiguous:
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"argument {i}: cannot differentiate with respect to dtype "
                            f"{arr.dtype}")
        return Tensor(arr, requires_grad=True)
    # The leaf lives only for this call, so it can use the caller's buffer (read-only) instead
    # of a copy: nothing can update it in place while the transform runs.
    v = arr.view()
    v.setflags(write=False)  # (not .flags: that makes a flags object first)
    leaf = Tensor.__new__(Tensor)
    leaf._v = v
    leaf._tape = None
    leaf._slot = -1
    leaf._rg = True
    leaf._meta = _LeafMeta()
    leaf._alias = None
    return leaf


def _out_value(out):
    return out.item() if out.ndim == 0 else np.array(out.numpy())


_ONE = np.ones(())  # the seed of a one-element output (read-only: every call shares it)
_ONE.flags.writeable = False


def _grad_value(g, x):
    return np.float64(g) if x.ndim == 0 else g


def value_and_grad(f, argnums=0, has_aux=False):
    """``f`` -> a function returning ``(f(*args), gradient)`` (``((value, aux), gradient)``).

    >>> tape.value_and_grad(lambda x: (x ** 2).sum())(np.arange(3.0))
    (5.0, array([0., 2., 4.]))
    """

    nums_of = {}  # number of positional arguments -> the argument numbers (checked once)

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        nums = nums_of.get(len(args))
        if nums is None:
            nums = nums_of[len(args)] = _argnums(argnums, len(args))
        one = nums == (0,) and len(args) == 1  # (most calls: no generator, no list and back)
        if _nested(args if one else [args[i] for i in nums]):
            return _value_and_grad_nested(f, nums, argnums, has_aux, args, kwargs)
        if one:
            xs = [_as_leaf(args[0], 0)]
            args = xs
        else:
            args = list(args)
            xs = []
            for i in nums:
                args[i] = _as_leaf(args[i], i)
                xs.append(args[i])
        with _FreshTape():
            out = f(*args, **kwargs)
        out, aux = _output_and_aux(out, has_aux)
        if out.size != 1:
            raise TypeError(f"grad requires a scalar output; f returned shape {out.shape} "
                            "(use tape.vjp for non-scalar outputs)")
        # (autograd.grad's checks hold by construction: xs are this call's own leaves, the
        # output one element; its results come back in the inputs' shapes)
        if not out._rg:
            gs = [None] * len(xs)
        elif len(xs) == 1:
            gs = [_backward.grad_of_one(out, _ONE.reshape(out.shape), xs[0])]
        else:
            gs = _backward.run([out], [_ONE.reshape(out.shape)], xs)
        if isinstance(argnums, int):
            g, x = gs[0], xs[0]
            grads = _grad_value(np.zeros(x.shape) if g is None else g, x)
        else:
            grads = tuple(_grad_value(np.zeros(x.shape) if g is None else g, x)
                          for g, x in zip(gs, xs))
        value = out.item()
        return ((value, aux) if has_aux else value), grads

    return wrapper


def _nested(args=()):
    """Is this transform running inside an enclosing one (or a dual level), which may
    differentiate its result again? Its arguments, or what the function closes over, may be
    tensors of the enclosing transform: the result must keep their history."""
    if state.transforms > 0 or state.levels:
        return True
    for a in args:
        if type(a) is Tensor and a._rg and a._meta is None:
            return True
    return False


def _fresh_input(a, i):
    """A new node for argument `a` of a nested transform: its own input, so that the gradient
    is taken with respect to this use only (no perturbation confusion), history kept."""
    if type(a) is Tensor and a._rg:
        return unary(OPCODE["copy"], a)
    return _as_leaf(a, i)


def _output_and_aux(out, has_aux):
    """(output as a Tensor, aux or None) of what f returned, or a clear error when f returned
    no output (None, a tuple without has_aux, ...)."""
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError("has_aux=True requires f to return a pair (output, aux)")
        out, aux = out
    if out is None or isinstance(out, (tuple, list, dict)):
        what = "None" if out is None else f"a {type(out).__name__}"
        hint = " (for a pair (output, aux), pass has_aux=True)" if (
            isinstance(out, tuple) and not has_aux) else ""
        raise TypeError(f"grad: f returned {what}; it must return one scalar tensor or "
                        f"float{hint}")
    return (out if type(out) is Tensor else Tensor(out)), aux


def _value_and_grad_nested(f, nums, argnums, has_aux, args, kwargs):
    """value_and_grad inside another transform: the backward is recorded (create_graph), and
    value and gradients are tensors with history."""
    args = list(args)
    xs = []
    with _FreshTape():
        for i in nums:  # (on the call's tape: its backward then sweeps that tape alone)
            args[i] = _fresh_input(args[i], i)
            xs.append(args[i])
        out = f(*args, **kwargs)
        out, aux = _output_and_aux(out, has_aux)
        if out.size != 1:
            raise TypeError(f"grad requires a scalar output; f returned shape {out.shape}")
        gs = autograd.grad([out], xs, create_graph=True, allow_unused=True) \
            if out.requires_grad else [None] * len(xs)
    gs = tuple(Tensor(np.zeros(x.shape)) if g is None else g for g, x in zip(gs, xs))
    grads = gs[0] if isinstance(argnums, int) else gs
    return ((out, aux) if has_aux else out), grads


def grad(f, argnums=0, has_aux=False):
    """``f`` -> a function returning the gradient of scalar ``f`` w.r.t. argument(s) `argnums`.

    >>> tape.grad(lambda x: np.sin(x) * x)(1.0)
    1.3817732906760363
    """
    vg = value_and_grad(f, argnums, has_aux)

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        value, g = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapper


def vjp(f, *primals, has_aux=False):
    """``(f(*primals), vjp_fn)``: ``vjp_fn(cotangent)`` returns one gradient per primal.

    >>> out, pullback = tape.vjp(lambda x: x * 2.0, np.ones(3))
    >>> pullback(np.arange(3.0))
    (array([0., 2., 4.]),)
    """
    nested = _nested(primals)
    xs = [_fresh_input(p, i) if nested else _as_leaf(p, i, "tape.vjp")
          for i, p in enumerate(primals)]
    with _FreshTape():
        out = f(*xs)
    aux = None
    if has_aux:
        out, aux = out
    if type(out) is not Tensor:
        out = Tensor(out)
    value = out if nested else _out_value(out)

    def vjp_fn(cotangent):
        if nested:  # recorded: the pullback's results keep their history
            with _FreshTape():
                gs = autograd.grad([out], xs, grad_outputs=[cotangent], create_graph=True,
                                   allow_unused=True) if out.requires_grad else [None] * len(xs)
            return tuple(Tensor(np.zeros(x.shape)) if g is None else g for g, x in zip(gs, xs))
        ct = np.asarray(cotangent._v if type(cotangent) is Tensor else cotangent, np.float64)
        if ct.shape != out.shape:
            raise ValueError(f"vjp: cotangent shape {ct.shape} does not match output shape "
                             f"{out.shape}")
        if not out.requires_grad:
            return tuple(_grad_value(np.zeros(x.shape), x) for x in xs)
        gs = autograd.grad([out], xs, grad_outputs=[ct], retain_graph=True, allow_unused=True)
        return tuple(_grad_value(np.zeros(x.shape) if g is None else g, x)
                     for g, x in zip(gs, xs))

    return (value, vjp_fn, aux) if has_aux else (value, vjp_fn)
