"""Loads and stores by raw address, for the generated interpreters and the family kernels.

The sweeps read operand values from the NumPy buffers the tape points at (``VA``: addresses) and
write adjoints and tangents into arenas by element offset. Indexing an array with a signed
integer makes Numba test each index for wrap-around, which keeps LLVM from vectorising a loop;
these intrinsics load and store at an address with no test. Under ``NUMBA_DISABLE_JIT=1`` they
are plain Python over ``ctypes``, so every kernel also runs (slowly) without Numba.

The text below the marker is rendered into every generated interpreter (Numba's cache only sees
the file of a jitted entry point); this module is importable on its own for the family kernels
(``jit/families/``) and their tests.
"""
import numpy as np
from llvmlite import ir
from numba import config, types
from numba.extending import intrinsic

# ---- rendered into _interp.py below this line ----


@intrinsic
def _ld(typingctx, addr, i):
    """Load element i of the float64 buffer at address addr (values live in NumPy buffers)."""
    sig = types.float64(types.int64, types.int64)

    def codegen(context, builder, sig, args):
        ptr = builder.inttoptr(args[0], ir.DoubleType().as_pointer())
        return builder.load(builder.gep(ptr, [args[1]]))

    return sig, codegen


@intrinsic
def _ld_word(typingctx, addr):
    """Load the int64 word at address addr."""
    sig = types.int64(types.int64)

    def codegen(context, builder, sig, args):
        ptr = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        return builder.load(ptr)

    return sig, codegen


@intrinsic
def _st(typingctx, addr, i, v):
    """Store v as element i of the float64 buffer at address addr."""
    sig = types.void(types.int64, types.int64, types.float64)

    def codegen(context, builder, sig, args):
        ptr = builder.inttoptr(args[0], ir.DoubleType().as_pointer())
        builder.store(args[2], builder.gep(ptr, [args[1]]))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _addr(typingctx, arr):
    """The data address of a float64 array, as an int64 (the caller keeps the array alive)."""
    sig = types.int64(arr)

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.ptrtoint(ary.data, ir.IntType(64))

    return sig, codegen


if config.DISABLE_JIT:  # plain Python over ctypes: NumPy scalars give Numba's IEEE results
    import ctypes

    def _ld(addr, i):
        return np.float64(ctypes.c_double.from_address(int(addr) + 8 * int(i)).value)

    def _ld_word(addr):
        return ctypes.c_int64.from_address(int(addr)).value

    def _st(addr, i, v):
        ctypes.c_double.from_address(int(addr) + 8 * int(i)).value = float(v)

    def _addr(arr):
        return arr.ctypes.data
