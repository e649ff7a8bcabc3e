"""A cached entry point loaded as Numba loads it, less two costs that only a compile needs.

Numba's ``Dispatcher.compile`` finds an entry in its cache, refreshes its target context and
rebuilds the entry's library from the cached object code and the bitcode kept for linking. Here:

- No refresh. It imports and installs every typing and lowering registry (~0.15 s and ~30,000
  objects, which the collector then walks at each full collection and at interpreter exit), and
  it initializes NRT, compiling NRT's LLVM functions (~0.03 s), which compiled code carries
  inlined; only a compile needs those. Loading machine code needs the symbols it calls: NRT's C
  functions (registered here under the names NRT gives them) and the C functions Numba registers
  when it makes its contexts. So the object's undefined symbols are checked against the
  process's first (LLVM aborts the process on an unresolved one); any missing, the refresh runs,
  as in Numba, its BLAS check deferred to the first compile (``jit._blas_check``).
- No bitcode parse (~0.1 s for the sweep's 1.4 MB). Numba parses it to learn the names the
  library defines, which the object's symbol table gives as well, and to link the library into a
  later compile that calls it. So the rebuild gets an empty module's bitcode, and the real one is
  parsed when Numba next runs a compiler pass (every compile runs passes before it links).

On a Numba without these internals, ``load_cached`` returns False and the caller compiles, which
loads from the cache as Numba does.
"""
from __future__ import annotations

import threading

from . import _elf


def load_cached(fn, args: tuple) -> bool:
    """Load dispatcher fn's code for the argument types `args` from the cache, without compiling;
    whether it is ready."""
    try:
        from numba.core.compiler_lock import global_compiler_lock

        with global_compiler_lock:
            if args in fn.overloads:
                return True
            ctx, cache = fn.targetctx, fn._cache
            if not cache._enabled:
                return False
            _nrt_symbols(ctx)
            data = None
            with cache._guard_against_spurious_io_errors():
                data = cache._cache_file.load(cache._index_key(args, ctx.codegen()))
            if data is None:
                return False
            found = _object_symbols(data)
            engine = ctx.codegen()._engine
            if found is None or not _all_here(found[1], engine):
                from ._blas_check import defer

                defer()  # (the refresh imports numba.np.arraymath: jit/_blas_check.py)
                ctx.refresh()
            bitcode = None
            if found is not None and _LINK_LATER.listening():
                data, bitcode = _without_bitcode(data)
                engine._defined_symbols.update(found[0])  # (what the parse would have added)
            cres = cache._impl.rebuild(ctx, data)
            if bitcode is not None:
                _LINK_LATER.add(cres.library, bitcode)
            if not cres.objectmode:
                ctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
            fn.add_overload(cres)
            fn._cache_hits[args] += 1
    except (AttributeError, ImportError):
        return False
    return True


def _nrt_symbols(ctx):
    """Register NRT's C functions as ``rtsys.initialize`` does before it compiles NRT's LLVM
    functions (all of it when NRT is asked to count allocations)."""
    global _NRT_DONE
    if _NRT_DONE:
        return
    from numba.core import config
    from numba.core.runtime import _nrt_python
    from numba.core.runtime.nrt import rtsys

    if config.NRT_STATS:
        rtsys.initialize(ctx)
    else:
        from llvmlite import binding

        for name, address in _nrt_python.c_helpers.items():
            binding.add_symbol(name if name.startswith("_") else "NRT_" + name, address)
    _NRT_DONE = True


_NRT_DONE = False


def _object_symbols(data):
    """(defined, undefined) symbol names of a cache entry's object code; None if not known. The
    entry is Numba's ``CompileResult`` state, its library first: (name, "object", (object code,
    bitcode))."""
    try:
        kind, (obj, _) = data[0][1:]
    except (TypeError, ValueError, IndexError):
        return None
    return _elf.symbols(obj) if kind == "object" and isinstance(obj, bytes) else None


def _all_here(names, engine) -> bool:
    """Whether the process defines every one of `names` (code loaded before, or a symbol of the
    process or registered with LLVM)."""
    from llvmlite import binding

    return all(engine.is_symbol_defined(n) or binding.address_of_symbol(n) for n in names)


def _without_bitcode(data):
    """(the entry with its library's bitcode replaced by an empty module's, the bitcode)."""
    name, kind, (obj, bitcode) = data[0]
    return ((name, kind, (obj, _LINK_LATER.empty_bitcode())),) + tuple(data[1:]), bitcode


class _LinkLater:
    """Libraries loaded without their bitcode, parsed when Numba next starts a compiler pass: a
    compile links a library it calls (``_get_module_for_linking``) only after passes have run."""

    def __init__(self):
        self.pending, self.registered, self.empty = [], None, None
        self.lock = threading.Lock()

    def listening(self) -> bool:
        """Registered for Numba's pass events (once a process; False on a Numba without them)."""
        if self.registered is None:
            try:
                from numba.core import event

                event.register("numba:run_pass", _on_pass(event.Listener, self.parse_pending))
                self.registered = True
            except (ImportError, AttributeError, ValueError):
                self.registered = False
        return self.registered

    def empty_bitcode(self) -> bytes:
        if self.empty is None:
            from llvmlite import binding

            self.empty = binding.parse_assembly("").as_bitcode()
        return self.empty

    def add(self, library, bitcode):
        with self.lock:
            self.pending.append((library, bitcode))

    def parse_pending(self):
        with self.lock:
            pending, self.pending = self.pending, []
        if pending:
            from llvmlite import binding

            for library, bitcode in pending:
                library._shared_module = binding.parse_bitcode(bitcode)


def _on_pass(listener_class, then):
    """A Numba event listener that calls `then` as each compiler pass starts."""
    class OnPass(listener_class):
        def on_start(self, event):
            then()

        def on_end(self, event):
            pass

    return OnPass()


_LINK_LATER = _LinkLater()
