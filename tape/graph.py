"""``tape.graph``: control over the values a recorded computation keeps for its backward.

Inside ``saved_tensors_hooks(pack, unpack)`` every array value a new row saves for the backward
(results of ops and constants; leaves are referenced and version-checked instead, and 0-d values
stay as floats) is handed to ``pack`` once, at record time, and the tape keeps only what ``pack``
returns (a ``tape.SavedVariable``, as are a custom Function's saved tensors). The backward calls
``unpack`` once per packed value it reads, outside the jitted path, segment by segment: just
before the part of the sweep that reads the value, which is dropped again once the sweep has
passed it, so only about 64 MiB of unpacked values are alive at a time. Typical uses:
offloading to disk (``save_on_disk``) or compression::

    # keep saved values as float16 (halves, then quarters memory; gradients become approximate)
    with tape.graph.saved_tensors_hooks(lambda a: a.astype(np.float16),
                                        lambda p: p.astype(np.float64)):
        loss = model(w)
    loss.backward()
"""
from __future__ import annotations

import itertools
import os
import tempfile

import numpy as np

from ._state import state


class saved_tensors_hooks:  # noqa: N801  (named after torch.autograd.graph.saved_tensors_hooks)
    """Context manager: ``pack(array) -> anything`` at record time, ``unpack(anything) -> array``
    at backward. Nested contexts use the innermost pair."""

    def __init__(self, pack_hook, unpack_hook):
        self.hooks = (pack_hook, unpack_hook)

    def __enter__(self):
        self.prev = state.saved_hooks
        state.saved_hooks = self.hooks
        return self

    def __exit__(self, *exc):
        state.saved_hooks = self.prev
        return False


class save_on_disk(saved_tensors_hooks):  # noqa: N801
    """Offload every saved value to an ``.npy`` file in `directory` (a temporary one by default)
    and read it back at backward. A file is deleted once it has been read or no longer needed.

    >>> with tape.graph.save_on_disk():
    ...     loss = simulate(w)         # intermediates live on disk, not in memory
    >>> loss.backward()
    """

    def __init__(self, directory=None):
        self._tmp = tempfile.TemporaryDirectory(prefix="tapejit-saved-") if directory is None \
            else None
        self.directory = self._tmp.name if directory is None else os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        counter = itertools.count()
        tag = f"{os.getpid()}-{id(self):x}"

        tmp = self._tmp  # each file keeps its directory alive (this object may go first)

        def pack(a):
            path = os.path.join(self.directory, f"saved-{tag}-{next(counter)}.npy")
            np.save(path, a)
            return _SavedFile(path, tmp)

        def unpack(f):
            return f.read()

        super().__init__(pack, unpack)


class _SavedFile:
    """A saved value on disk; the file goes away with the last reference to this object."""

    __slots__ = ("path", "directory")

    def __init__(self, path, directory=None):
        self.path = path
        self.directory = directory  # a TemporaryDirectory to keep alive, or None

    def read(self):
        return np.load(self.path)

    def __del__(self):
        try:
            os.remove(self.path)
        except OSError:
            pass


class _MultiGradHook:
    """Collects the gradients of several tensors during one backward. Mode "all" calls ``fn``
    once at the end of the backward with all of them; mode "any" calls it with the first one."""

    def __init__(self, tensors, fn, mode):
        self.fn = fn
        self.any = mode == "any"
        self.grads = [None] * len(tensors)
        self.seen = False
        self.handles = [t.register_hook(self._collector(i)) for i, t in enumerate(tensors)]

    def _collector(self, i):
        def collect(g):
            if not self.seen:
                self.seen = True
                state.multi_hooks.append(self)  # fire() or reset at the end of this backward
                if self.any:
                    self.fn(g)
            if not self.any:
                self.grads[i] = g

        return collect

    def fire(self):
        grads = self.grads
        self.reset()
        if not self.any:
            self.fn(grads)

    def reset(self):
        self.grads, self.seen = [None] * len(self.grads), False

    def remove(self):
        for h in self.handles:
            h.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """Call `fn` once per backward that reaches any of `tensors`. Returns a removable handle.

    - ``mode="all"``: ``fn(grads)`` after the gradients of all of them are computed (``grads[i]``
      is None for a tensor the backward did not reach);
    - ``mode="any"``: ``fn(grad)`` with the first of their gradients the backward computes.

    >>> h = tape.graph.register_multi_grad_hook([a, b], lambda gs: print([g is None for g in gs]))
    """
    if mode not in ("all", "any"):
        raise ValueError(f"register_multi_grad_hook: mode must be 'all' or 'any' (got {mode!r})")
    tensors = list(tensors)
    for i, t in enumerate(tensors):
        if not getattr(t, "requires_grad", False):
            raise RuntimeError(f"register_multi_grad_hook: tensors[{i}] does not require grad")
    return _MultiGradHook(tensors, fn, mode)
