"""tapejit's jitted helpers, made into Numba dispatchers when a process first compiles.

A helper is a jitted function that only other jitted functions call; ``jit._interp`` has ~90.
Making a dispatcher costs ~0.1 ms and ~30 objects (Numba reads the function's signature twice),
and a process that loads every entry point from the cache never needs one: the cached code holds
the helpers' code. So ``jit._cache.njit`` gives a helper a stand-in, and the process's first
compile (Numba's ``numba:compile`` event, which starts before the compiler reads its function's
globals) puts every helper's dispatcher in its module in place of the stand-in. A stand-in
called, or asked for a dispatcher's attribute, makes its dispatcher at once (Python code and
tests call some helpers). Where Numba has no such event, helpers are dispatchers from the start.
"""
from __future__ import annotations

import sys
import threading

import numba

_LOCK = threading.RLock()
_STAND_INS = []  # every stand-in made
_LISTENING = [None]  # registered for Numba's compile event: None (not yet), True, False


class Helper:
    """A helper's stand-in until its dispatcher is made (``dispatcher``)."""

    __slots__ = ("py_func", "options", "made")

    def __init__(self, py_func, options):
        self.py_func, self.options, self.made = py_func, options, None

    def dispatcher(self):
        """The helper's Numba dispatcher, made now if not yet, and put in its module's globals
        in place of this stand-in (where the stand-in is: a compile reads dispatchers there)."""
        with _LOCK:
            if self.made is None:
                self.made = numba.njit(**self.options)(self.py_func)
            module = sys.modules.get(self.py_func.__module__)
            name = self.py_func.__name__
            if module is not None and vars(module).get(name) is self:
                setattr(module, name, self.made)
            return self.made

    def __call__(self, *args, **kwargs):
        return self.dispatcher()(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.dispatcher(), name)

    def __repr__(self):
        return f"<helper {self.py_func.__qualname__}, dispatcher made at the first compile>"


def helper(py_func, options: dict):
    """`py_func` jitted with `options` (``numba.njit``'s): a stand-in until the process's first
    compile, or the dispatcher itself where that cannot be waited for."""
    if not _listening():
        return numba.njit(**options)(py_func)
    stand_in = Helper(py_func, options)
    with _LOCK:
        _STAND_INS.append(stand_in)
    return stand_in


def make_all():
    """Make every helper's dispatcher and put it in its module (again, where a stand-in came
    back: a test's monkeypatch undone)."""
    with _LOCK:
        for stand_in in _STAND_INS:
            stand_in.dispatcher()


def _listening() -> bool:
    if _LISTENING[0] is None:
        with _LOCK:
            if _LISTENING[0] is None:
                try:
                    from numba.core import config, event

                    if config.DISABLE_JIT:  # (njit gives the plain function: nothing to wait for)
                        raise ImportError("no dispatchers")

                    class OnCompile(event.Listener):
                        def on_start(self, event):
                            make_all()

                        def on_end(self, event):
                            pass

                    event.register("numba:compile", OnCompile())
                    _LISTENING[0] = True
                except (ImportError, AttributeError, ValueError, TypeError):
                    _LISTENING[0] = False
    return _LISTENING[0]
