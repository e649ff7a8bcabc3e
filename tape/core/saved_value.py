"""SavedValue: a value saved for the backward that lives outside the adjoint arena until then.

Three kinds, one wrapper (``SavedVariable``, tape/core/saved_variable.py, adds tensors:
saving one, and unpacking into one):

- a leaf, saved by reference with its version counter at save time: unpacking checks that the
  leaf was not modified in place since (the optimiser step ``w -= lr * w.grad`` under
  ``no_grad`` bumps it) and names the op that saved it when it was;
- a value packed by ``tape.graph.saved_tensors_hooks``: ``pack`` ran at save time, ``unpack``
  runs at backward, outside the jitted path;
- any other value, held as is (recorded values are never modified in place: in-place ops on
  non-leaves are functionalized).

A saved result of a recorded op keeps its tape only through a weak reference, so a saved output
never holds a reference cycle back to the tape that produced it.
"""
from __future__ import annotations

import weakref

import numpy as np

from .state import state

BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or to read values that were freed "
    "after the first backward). The recorded values are released after .backward() or "
    "autograd.grad(); pass retain_graph=True to the first call if you need to backward again.")


def written_at(meta):
    """Where a leaf was last written in place, for the version errors: ' (written at f:n)'."""
    return f" (written in place at {meta.written_at})" if meta.written_at else ""


class SavedValue:
    __slots__ = ("_leaf", "_version", "_value", "_packed", "_unpack", "_shape", "_tape", "_slot",
                 "_saved_by", "_released")

    def __init__(self, value, saved_by, *, tape=None, slot=-1, pack=True):
        """Save `value` (an array or a float) for the backward of `saved_by` (a name used in error
        messages). `tape`/`slot`: where the value was recorded, if it was."""
        self._saved_by = saved_by
        self._released = False
        self._leaf = None
        self._version = 0
        self._packed = self._unpack = None
        self._tape = weakref.ref(tape) if tape is not None else None
        self._slot = slot
        self._shape = np.shape(value)
        hooks = state.saved_hooks
        if pack and hooks is not None and type(value) is np.ndarray:
            self._packed, self._unpack = hooks[0](value), hooks[1]
            self._value = None
        else:
            self._value = value

    @property
    def shape(self):
        return self._shape

    def value(self):
        """The saved value as a float or float64 array (checked, unpacked); no tensor wrapper."""
        if self._released:
            raise RuntimeError(BACKWARD_TWICE)
        if self._leaf is not None:
            meta = self._leaf._meta
            if meta.version != self._version:
                raise RuntimeError(
                    f"one of the values needed for gradient computation has been modified by an "
                    f"in-place operation: the leaf tensor of shape {self._shape} saved by "
                    f"{self._saved_by} is at version {meta.version}; expected version "
                    f"{self._version}{written_at(meta)}. Compute the gradient before updating "
                    f"the tensor in place, or record again after the update.")
            return self._leaf._v
        if self._unpack is not None:
            v = self._unpack(self._packed)
            v = np.asarray(v._v if hasattr(v, "_v") else v)
            if v.shape != self._shape or v.dtype.kind not in "biuf":
                raise RuntimeError(f"saved_tensors_hooks: unpack returned {v.dtype} of shape "
                                   f"{v.shape} for a value of shape {self._shape} (float64) saved "
                                   f"by {self._saved_by}")
            return np.ascontiguousarray(v, dtype=np.float64)
        return self._value

    def release(self):
        """Drop the value (after a backward without retain_graph); reading it again raises."""
        self._released = True
        self._leaf = self._value = self._packed = self._unpack = None
