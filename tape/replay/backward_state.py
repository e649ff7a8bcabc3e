"""BackwardState: callbacks bound after recording, called during the backward.

A ``BackwardState`` is an input of the recorded computation that is empty while the forward
runs. ``y = state.hook(x, "name")`` is the identity in the forward; in the backward it calls
``state.name(grad)`` with the gradient flowing into ``y`` (a returned array replaces it). The
member is looked up only then, so it can be bound after the forward has finished: the use it
exists for is gradient logging, clipping or communication in a training loop whose callbacks are
only known (or change) after the loss has been recorded.

>>> state = tape.BackwardState()
>>> h = state.hook(x * 2.0, "clip")            # recorded against the state
>>> loss = (h * h).sum()
>>> state.clip = lambda g: np.clip(g, -1, 1)    # bound after the forward
>>> loss.backward()
"""
from __future__ import annotations

import sys

from ..core.hooks import StatePoint
from ..core.record import unary
from ..core.tensor_ops import _COPY
from ..core.tensor import Tensor


class BackwardState:
    """A namespace of callbacks that ops recorded against it call during backward."""

    def hook(self, x, name: str):
        """Identity on ``x``; in the backward, ``getattr(self, name)(grad)`` may replace the
        gradient flowing back through it."""
        if type(x) is not Tensor or not x.requires_grad:
            return x
        y = unary(_COPY, x)
        caller = sys._getframe(1)
        where = f"{caller.f_code.co_filename}:{caller.f_lineno}"
        y.register_hook(StatePoint(self, name, where))
        return y

    def __repr__(self):
        members = ", ".join(sorted(self.__dict__))
        return f"BackwardState({members})"
