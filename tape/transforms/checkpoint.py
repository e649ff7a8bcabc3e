"""Gradient checkpointing: trade recomputation for memory.

    step = tape.checkpoint(lambda state: body(state, params))   # or as a decorator
    for k in range(0, n_steps, block):
        state = tape.checkpoint(run_block)(state, params)        # keeps only block boundaries

``tape.checkpoint(fn)(*args)`` runs `fn` without recording its intermediates; the tape keeps
only the call's inputs and outputs (one ``tape.Function`` call). The backward records `fn`
again from the saved inputs, sweeps that recording, and drops it. A loop of N steps
checkpointed every sqrt(N) steps keeps O(sqrt(N)) values instead of O(N).

Every tensor `fn` differentiates must be an argument (weights too): a tensor that requires grad
and is reached through a closure would get no gradient, so it is an error.
"""
from __future__ import annotations

import functools
import threading

import numpy as np

from ..reverse import autograd
from ..core.state import enable_grad
from ..core.tape import linked_tapes, newest_tape_id
from ..core.tensor import Tensor
from ..reverse.function import Function


def checkpoint(fn):
    """`fn` with checkpointing: call it as ``tape.checkpoint(fn)(*args)``."""

    @functools.wraps(fn)
    def wrapper(*args):
        return _Checkpoint.apply(fn, *args)

    return wrapper


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx, fn, *args):
        ctx.fn = fn
        ctx.save_for_backward(*[a for a in args if type(a) is Tensor])
        ctx.kinds = [type(a) is Tensor for a in args]
        ctx.others = [None if type(a) is Tensor else a for a in args]
        out = fn(*args)  # Function.apply runs forward without recording
        ctx.single = not isinstance(out, tuple)
        return out

    @staticmethod
    def backward(ctx, *grads):
        saved = iter(ctx.saved_tensors)
        args, xs = [], []
        for is_tensor, other, needs in zip(ctx.kinds, ctx.others, ctx.needs_input_grad[1:]):
            if not is_tensor:
                args.append(other)
                continue
            v = next(saved)
            x = Tensor(np.array(v._v, dtype=np.float64), requires_grad=bool(needs))
            args.append(x)
            if needs:
                xs.append(x)
        first = newest_tape_id() + 1
        with enable_grad():
            out = ctx.fn(*args)  # recorded again, from the saved inputs
        outs = (out,) if ctx.single else tuple(out)
        pairs = [(o, g) for o, g in zip(outs, grads)
                 if type(o) is Tensor and o.requires_grad and g is not None]
        _check_closure(outs, xs, ctx.fn, first)
        gs = [None] * len(xs)
        if pairs and xs:
            gs = autograd.grad([o for o, _ in pairs], xs,
                               grad_outputs=[np.asarray(g._v if type(g) is Tensor else g)
                                             for _, g in pairs], allow_unused=True)
        it = iter(gs)
        res = [None]  # for fn
        for is_tensor, needs in zip(ctx.kinds, ctx.needs_input_grad[1:]):
            res.append(next(it) if is_tensor and needs else None)
        return tuple(res)


def _check_closure(outs, xs, fn, first):
    """A tensor with history used by fn but not passed to it (a leaf that requires grad, or a
    recorded tensor from outside) would be left out of the gradient: an error."""
    ids = {id(x) for x in xs}
    name = getattr(fn, "__name__", "fn")
    me = threading.get_ident()  # (a tape another thread made is outside whatever its id)
    for t in linked_tapes(o._tape for o in outs if type(o) is Tensor):
        leaves = [leaf for leaf, _ in t.leaves.values() if id(leaf) not in ids]
        outside = [x for x in t.links.values() if x._tape.id < first or x._tape.thread != me]
        if leaves or outside:
            shape = (leaves or outside)[0].shape
            raise RuntimeError(
                f"tape.checkpoint({name}): it uses a tensor that requires grad (shape {shape}) "
                "without taking it as an argument; its gradient would be lost. Pass it as an "
                "argument.")
