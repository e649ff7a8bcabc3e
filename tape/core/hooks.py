"""Tensor hooks: Python that runs between jitted segments of the reverse sweep.

A hook on a non-leaf tensor is keyed by its (tape, slot): the backward driver cuts the sweep at
that slot, so the hook sees the slot's complete gradient and may replace it before the sweep goes
on. Hooks on a leaf run once per backward on the leaf's total gradient (summed over tapes),
before it is accumulated into ``.grad``; post-accumulate hooks run after that.
"""
from __future__ import annotations

import itertools

import numpy as np

from .state import state

_handle_ids = itertools.count()


class RemovableHandle:
    """Returned by every hook registration; ``handle.remove()`` unregisters the hook."""

    __slots__ = ("_table", "_key", "id")

    def __init__(self, table):
        self._table = table
        self.id = next(_handle_ids)

    def remove(self):
        self._table.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


class SlotHooks:
    """What a tape keeps for one hooked slot: hooks in registration order, the tensor's shape,
    and whether its gradient is retained (``retain_grad``)."""

    __slots__ = ("hooks", "shape", "retain", "grad")

    def __init__(self, shape):
        self.hooks = {}  # handle id -> fn (dicts keep insertion order)
        self.shape = shape
        self.retain = False
        self.grad = None  # the retained gradient


class StatePoint:
    """The hook ``state.hook(x, name)`` registers: calls the state's member `name`, looked up
    when the backward reaches it (so it may be bound or rebound after recording). A compiled
    replay may pass another state to look it up in (``run_hooks``'s `state`)."""

    __slots__ = ("state", "name", "where", "__name__")

    def __init__(self, state, name, where):
        self.state, self.name, self.where = state, name, where
        self.__name__ = f"BackwardState.{name}"

    def __call__(self, grad, state=None):
        state = self.state if state is None else state
        fn = state.__dict__.get(self.name) if state is not None else None
        if fn is None:
            raise RuntimeError(
                f"BackwardState member {self.name!r} is not set, but the op "
                f"state.hook(..., {self.name!r}) recorded at {self.where} needs it in the "
                f"backward. Bind it before calling backward: state.{self.name} = fn "
                "(fn(grad) -> grad or None); on a compiled tape, cf.state."
                f"{self.name} = fn or cf.value_and_grad(..., state=s).")
        if not callable(fn):
            raise RuntimeError(f"BackwardState member {self.name!r} is a {type(fn).__name__}, "
                               f"not a callable (needed by state.hook at {self.where})")
        return fn(grad)


def run_hooks(hooks, grad, what, state=None):
    """Call each hook with the gradient; a hook may return a replacement of the same shape.
    `state`: the BackwardState that ``state.hook`` points look their members up in, instead of
    their own (a compiled replay's per-call state)."""
    for fn in list(hooks.values()):
        r = fn(grad.copy()) if state is None or type(fn) is not StatePoint else \
            fn(grad.copy(), state)
        if r is not None:
            r = np.asarray(r._v if hasattr(r, "_v") else r, dtype=np.float64)
            if r.shape != grad.shape:
                raise RuntimeError(f"hook {getattr(fn, '__name__', fn)!r} on {what} returned a "
                                   f"gradient of shape {r.shape}; expected {grad.shape}")
            grad = r
    return grad


class multi_hook_scope:
    """Multi-grad hooks that see a gradient in this backward fire once at its end (and start
    clean for the next one, after an error too). (A class: a generator context costs more
    than a small backward's own Python.)"""

    __slots__ = ("prev",)

    def __enter__(self):
        self.prev, state.multi_hooks = state.multi_hooks, []

    def __exit__(self, exc_type, *exc):
        try:
            if exc_type is None:
                for mh in state.multi_hooks:
                    mh.fire()
        finally:
            for mh in state.multi_hooks:
                mh.reset()
            state.multi_hooks = self.prev
        return False
