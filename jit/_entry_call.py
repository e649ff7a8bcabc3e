"""Calling an entry point of ``jit._interp`` from another cached jitted function, by address.

A jitted function that calls another dispatcher compiles the callee into itself: its cache entry
holds a copy (for ``sweep``, minutes of compile and megabytes), and since Numba's cache only
notices changes to the caller's own file, the copy goes stale when the callee changes.
``call_entry(fn, name, args)`` instead calls the callee's compiled body where this process
loaded it: `fn` is its address, an argument taken at run time from the dispatcher
(``entry_address``), so the caller's cached code holds no copy and always runs the callee's
current code, through Numba's own calling convention (a callee's error propagates as from any
call). The argument types are checked against the callee's declared signature (``SIG_<NAME>``
in ``jit._interp``, the one ``entry_address`` takes the overload of) when the caller compiles:
a call that does not match the compiled body does not compile.

Under ``NUMBA_DISABLE_JIT=1`` ``call_entry`` calls the (plain Python) entry point by name.
"""
from __future__ import annotations

from numba import config, types
from numba.core import cgutils, errors
from numba.core.sigutils import normalize_signature
from numba.extending import intrinsic


def declared(name: str):
    """(argument types, return type) of ``jit._interp``'s entry point `name`."""
    from . import _interp

    args, restype = normalize_signature(getattr(_interp, "SIG_" + name.upper()))
    return tuple(args), restype


def entry_address(name: str) -> int:
    """The address of the compiled body of ``jit._interp.<name>`` for its declared signature
    (compiled, or loaded from the cache, first); 0 without the JIT."""
    from . import _interp
    from ._cache import load

    fn = load(_interp, name)
    if config.DISABLE_JIT:
        return 0
    cres = fn.overloads[declared(name)[0]]
    address = cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
    if not address:
        raise RuntimeError(f"jit: no compiled body found for {name}")
    return address


if config.DISABLE_JIT:
    def call_entry(fn, name, args):
        from . import _interp

        return getattr(_interp, name)(*args)
else:
    @intrinsic
    def call_entry(typingctx, fn, name, args):
        """The result of entry point `name` (a string literal) on the tuple `args`, called at
        address `fn` (``entry_address(name)``)."""
        if not isinstance(name, types.StringLiteral) or not isinstance(args, types.BaseTuple):
            raise errors.TypingError("call_entry(fn, 'name', (args...)): name a literal")
        want, restype = declared(name.literal_value)
        have = tuple(args)
        if len(have) != len(want) or any(
                h != w and not (isinstance(h, types.Integer) and w == types.int64)
                for h, w in zip(have, want)):
            raise errors.TypingError(f"call_entry: {name.literal_value} takes {want}, got {have}")

        def codegen(context, builder, sig, llargs):
            vals = [context.cast(builder, builder.extract_value(llargs[2], i), h, w)
                    for i, (h, w) in enumerate(zip(have, want))]
            fnty = context.call_conv.get_function_type(restype, want)
            callee = builder.inttoptr(llargs[0], fnty.as_pointer())
            status, res = context.call_conv.call_function(builder, callee, restype, want, vals)
            with cgutils.if_unlikely(builder, status.is_error):
                context.call_conv.return_status_propagate(builder, status)
            return context.get_dummy_value() if restype == types.none else res

        return restype(types.int64, name, args), codegen
