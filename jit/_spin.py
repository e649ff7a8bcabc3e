"""``spin_wait``: wait for a flag in a loop that holds no GIL, for the threads of one compiled call.

A thread asleep on a lock or an event takes 0.1-0.3 ms to wake on this machine class (its idle
vCPU halts; the wake is an interrupt through the hypervisor), as long as half of W2's batched
matmul. So a worker of ``tape._threads``' crew waits for its next piece here, awake, for a short
while after each piece (and sleeps after that), and the caller waits here for the worker to
finish. The flag is read with an atomic acquire load, so LLVM cannot hoist it out of the loop.
(A ``pause`` between reads would spare a sibling hyperthread, but Numba's JIT has no inline
assembler: LLVM aborts the process on one.)
"""
import platform

from llvmlite import ir
from numba import config, njit, types
from numba.extending import intrinsic

_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


@intrinsic
def _load_acquire(typingctx, flags, i):
    """flags[i] of an int64 array, by an atomic load with acquire ordering."""
    sig = types.int64(flags, types.int64)

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.load_atomic(builder.gep(ary.data, [args[1]]), "acquire", 8)

    return sig, codegen


@intrinsic
def _pause(typingctx):
    """x86's ``pause``, through LLVM's intrinsic (Numba's JIT has no inline assembler): a
    spinning thread then leaves its core's sibling hyperthread most of the core."""
    sig = types.void()

    def codegen(context, builder, sig, args):
        if _X86:
            fn = builder.module.declare_intrinsic("llvm.x86.sse2.pause",
                                                  fnty=ir.FunctionType(ir.VoidType(), []))
            builder.call(fn, [])
        return context.get_dummy_value()

    return sig, codegen


if config.DISABLE_JIT:
    def _load_acquire(flags, i):
        return int(flags[i])

    def _pause():
        pass


SIG_SPIN_WAIT = "int64(int64[::1], int64, int64)"


@njit(cache=True, nogil=True)
def spin_wait(flags, i, rounds):
    """flags[i] once it is not 0, or 0 after `rounds` reads that found 0."""
    for _ in range(rounds):
        v = _load_acquire(flags, i)
        if v != 0:
            return v
        _pause()
    return _load_acquire(flags, i)
