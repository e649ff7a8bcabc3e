"""SavedVariable: a saved value (``SavedValue``) that takes and gives tensors: a leaf is saved by
reference (its version checked when unpacked), and unpacking gives the recorded result back, with
its history while its tape is alive."""
from __future__ import annotations

import weakref

from .saved_value import SavedValue
from .tensor import Tensor, plain, result


class SavedVariable(SavedValue):
    __slots__ = ()

    def __init__(self, x, saved_by, *, tape=None, slot=-1, pack=True):
        """Save `x` (a Tensor, an array or a float) for the backward of `saved_by` (a name used
        in error messages). `tape`/`slot`: where the value was recorded, if it was."""
        if not (type(x) is Tensor and x._meta is not None and x._rg):
            super().__init__(x._v if type(x) is Tensor else x, saved_by, tape=tape, slot=slot,
                             pack=pack)
            return
        self._saved_by = saved_by  # a leaf: by reference, version-checked when unpacked
        self._released = False
        self._leaf = x
        self._version = x._meta.version
        self._value = self._packed = self._unpack = None
        self._tape = weakref.ref(tape) if tape is not None else None
        self._slot = slot
        self._shape = x.shape

    def unpack(self):
        """The saved value as a Tensor: the leaf itself, the recorded result (with its history
        while its tape is alive), or a plain tensor."""
        v = self.value()
        if self._leaf is not None:
            return self._leaf
        t = self._tape() if self._tape is not None else None
        if t is not None and not t.released:
            return result(v, t, self._slot)
        return plain(v)
