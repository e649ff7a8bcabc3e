"""Numba's BLAS check, deferred from a refresh of its registries to its first compile.

Numba asks whether BLAS is there when ``numba.np.arraymath`` is imported, by importing
``scipy.linalg.cython_blas`` (~0.3 s); the answer only steers how later compiles type inner
products. A warm start loads cached kernels without that import (``jit._cache_load``), so the
check never runs there; the fallbacks that refresh Numba's registries (a cached entry whose
symbols are not all in the process yet, a Numba without the internals that load uses) import
``arraymath`` without compiling, and there ``defer()`` makes the import answer "is SciPy
installed" (a lookup that runs nothing) and runs the real check when Numba starts a compiler pass
(every compile runs passes), before any typing can read the answer.
"""
from __future__ import annotations

import sys
from importlib.util import find_spec

try:
    from numba.core import event
except ImportError:  # (a Numba without compiler events: its check runs as Numba runs it)
    event = None


class _CheckOnCompile(event.Listener if event is not None else object):
    """Runs the real check (``arraymath._check_blas``) as Numba's first compiler pass starts, in
    place of its import."""

    def __init__(self, arraymath, real_ensure_blas):
        self.arraymath, self.real, self.done = arraymath, real_ensure_blas, False

    def on_start(self, event):
        if not self.done:  # (an error of the check, as at Numba's import, fails each compile)
            self.arraymath.ensure_blas = self.real
            if hasattr(self.arraymath, "_check_blas"):
                self.arraymath._HAVE_BLAS = self.arraymath._check_blas()
            self.done = True

    def on_end(self, event):
        pass


def defer():
    """Defer the check to the first compile, unless ``numba.np.arraymath`` is imported already
    (its check then ran at that import); call before Numba refreshes its registries. On a Numba
    laid out otherwise this does nothing, and the check runs as Numba runs it."""
    if event is None or "numba.np.arraymath" in sys.modules:
        return
    try:
        from numba.np import linalg

        real = linalg.ensure_blas
    except (ImportError, AttributeError):
        return

    def scipy_installed():
        if find_spec("scipy") is None:
            raise ImportError("scipy is not installed")

    linalg.ensure_blas = scipy_installed
    try:
        from numba.np import arraymath
    finally:
        linalg.ensure_blas = real
    if getattr(arraymath, "ensure_blas", None) is not scipy_installed:
        return  # (this Numba checks for BLAS some other way, and already has)
    check = _CheckOnCompile(arraymath, real)
    if hasattr(arraymath, "_check_blas"):
        try:
            event.register("numba:run_pass", check)
            return
        except (ValueError, TypeError):  # (no such event here)
            pass
    check.on_start(None)  # (the real check now, or at least the real function back)
