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

import os
import secrets
import tempfile
import zlib

import numpy as np

from .core.state import state


class saved_tensors_hooks:  # noqa: N801  (named after torch.autograd.graph.saved_tensors_hooks)
    """Context manager: ``pack(array) -> anything`` at record time, ``unpack(anything) -> array``
    at backward. Nested contexts use the innermost pair. On exit, a current tape that packed
    values is closed (later ops go to a new one), so the packed values live exactly as long as
    the tensors recorded inside."""

    def __init__(self, pack_hook, unpack_hook):
        self.hooks = (pack_hook, unpack_hook)

    def __enter__(self):
        self.prev = state.saved_hooks
        state.saved_hooks = self.hooks
        return self

    def __exit__(self, *exc):
        state.saved_hooks = self.prev
        t = state.tape
        if t is not None and t.packed and state.guards is None:
            # later ops go to a new tape, so that the packed values (save_on_disk: their files)
            # go when the tensors recorded here go, or when the exception that ended the block
            # does, not when this thread's tape next seals
            t.seal()
        return False


class save_on_disk(saved_tensors_hooks):  # noqa: N801
    """Offload every saved value to an ``.npy`` file in `directory` (a private temporary one
    by default) and read it back at backward. A file is deleted once it has been read or is no
    longer needed (its tape freed: the loss dropped, or the forward raised).

    Each file is created exclusively (a new random name, never an existing path or symlink),
    readable by its owner only, and checked when read back (size, header, CRC-32 of the data):
    a file changed or replaced between forward and backward is an error, never another gradient.
    docs/security.md says what this does and does not protect against.

    >>> with tape.graph.save_on_disk():
    ...     loss = simulate(w)         # intermediates live on disk, not in memory
    >>> loss.backward()
    """

    def __init__(self, directory=None):
        self._tmp = tempfile.TemporaryDirectory(prefix="tapejit-saved-") if directory is None \
            else None
        self.directory = self._tmp.name if directory is None else os.fspath(directory)
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        tmp = self._tmp  # each file keeps its directory alive (this object may go first)
        super().__init__(lambda a: _SavedFile.write(self.directory, a, tmp),
                         lambda f: f.read())


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) \
    | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
_OPEN = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) \
    | getattr(os, "O_BINARY", 0)


def _crc(a):
    return zlib.crc32(memoryview(a).cast("B"))


class _SavedFile:
    """A saved value on disk; the file goes away with the last reference to this object."""

    __slots__ = ("path", "directory", "shape", "size", "crc")

    @classmethod
    def write(cls, directory, a, tmp=None):
        """Save the float64 array `a` in a new file of `directory`: O_EXCL with a random name
        (a planted file or symlink makes the open fail, never redirects the write), mode 0600,
        written through the descriptor that created it."""
        a = np.ascontiguousarray(a, dtype=np.float64)
        for _ in range(16):
            path = os.path.join(directory, f"tapejit-{secrets.token_hex(16)}.npy")
            try:
                fd = os.open(path, _CREATE, 0o600)
                break
            except FileExistsError:  # (2^-128 by chance: someone else made this name)
                continue
        else:
            raise FileExistsError(f"save_on_disk: could not create a new file in {directory}")
        self = cls()
        self.path, self.directory, self.shape = path, tmp, a.shape
        try:
            with os.fdopen(fd, "wb") as fh:
                np.lib.format.write_array(fh, a, version=(1, 0), allow_pickle=False)
                self.size = fh.tell()
        except BaseException:
            os.remove(path)
            raise
        self.crc = _crc(a)
        return self

    def read(self):
        try:
            fd = os.open(self.path, _OPEN)
        except OSError as e:
            self._fail(f"it cannot be opened ({e.strerror})")
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size != self.size:
                self._fail(f"it has {size} bytes, {self.size} were written")
            try:
                if np.lib.format.read_magic(fh) != (1, 0):
                    raise ValueError
                header = np.lib.format.read_array_header_1_0(fh)
            except ValueError:
                header = None
            if header != (self.shape, False, np.dtype(np.float64)):
                self._fail("its header is not the one written")
            shape = header[0]
            a = np.empty(shape)
            if fh.readinto(memoryview(a).cast("B")) != a.nbytes or _crc(a) != self.crc:
                self._fail("its data is not the data written (CRC-32 differs)")
        return a

    def _fail(self, why):
        raise RuntimeError(
            f"save_on_disk: the saved value of shape {self.shape} in {self.path} was changed or "
            f"replaced after the forward: {why}. The gradient cannot be computed from it; use a "
            "directory only this process writes (save_on_disk() without a directory makes a "
            "private one) and record the forward again.")

    def __del__(self):
        try:
            os.remove(self.path)
        except (OSError, AttributeError):  # (AttributeError: write failed before the path)
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
