"""Memory an eager process keeps between calls, and how to give it back.

Eager keeps, per thread, the memory of large released values (``tape.core.value_pool``, at most
128 MiB) and one spare adjoint arena (``tape.reverse.arena_pool``, at most 128 MiB), so that the
next call of the same shapes writes to pages already mapped instead of faulting in fresh ones.
A long-lived process that has finished its gradient work, or that is about to allocate a lot
elsewhere, gives that memory back with ``empty_cache()``, as ``torch.cuda.empty_cache()`` does for
PyTorch's allocator.
"""
from __future__ import annotations

from .core import value_pool
from .reverse import arena_pool


def empty_cache() -> None:
    """Drop the memory the calling thread keeps for its next recordings and backwards (other
    threads keep theirs until they call it or end). Nothing that a tensor, a tape or a NumPy
    array still uses is ever kept, so this never changes a result."""
    value_pool.clear()
    arena_pool.clear()


def cached_bytes() -> int:
    """How many bytes the calling thread keeps (values' memory and the spare arena)."""
    return 8 * (value_pool.held_cells() + arena_pool.held_cells())
