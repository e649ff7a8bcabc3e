"""The crew's jitted side: wait for a flag in a loop that holds no GIL, and run BLAS pieces there.

A thread asleep on a lock or an event takes 0.1-0.3 ms to wake on this machine class (its idle
vCPU halts; the wake is an interrupt through the hypervisor), as long as half of W2's batched
matmul. So a worker of ``tape.parallel.threads``' crew waits for its next piece here, awake, for a short
while after each piece (and sleeps after that), and the caller waits here for the worker to
finish. The flag is read with an atomic acquire load, so LLVM cannot hoist it out of the loop.
(A ``pause`` between reads would spare a sibling hyperthread, but Numba's JIT has no inline
assembler: LLVM aborts the process on one.)

A piece that is a batch of ``cblas_dgemm`` calls (``serve``'s native pieces: a batched matmul's
share, described by plain integers, the function among them as an address) runs in that loop:
the worker never takes the GIL for it, where a Python piece waits ~40-60 us for its turn.
"""
import platform

from llvmlite import ir
from numba import config, types
from numba.extending import intrinsic

from ._cache import njit  # cache=True: tapejit's cache directory (jit/_cache.py)

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


@intrinsic
def _store_release(typingctx, flags, i, v):
    """flags[i] = v for an int64 array, by an atomic store with release ordering: whatever
    this thread wrote before (a piece's results) is seen by a thread that loads the flag."""
    sig = types.void(flags, types.int64, types.int64)

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        builder.store_atomic(args[2], builder.gep(ary.data, [args[1]]), "release", 8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _dgemm(typingctx, fn, order, ta, tb, m, n, k, a, lda, b, ldb, c, ldc):
    """cblas_dgemm at address fn (an ILP64 BLAS: 32-bit enums, 64-bit sizes), with alpha 1 and
    beta 0, as NumPy's matmul calls it; a, b and c are addresses."""
    sig = types.void(*([types.int64] * 13))

    def codegen(context, builder, sig, args):
        i32, i64, dbl = ir.IntType(32), ir.IntType(64), ir.DoubleType()
        ptr = dbl.as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, i64, i64, i64, dbl, ptr, i64, ptr,
                                               i64, dbl, ptr, i64])
        f, order, ta, tb, m, n, k, a, lda, b, ldb, c, ldc = args
        builder.call(builder.inttoptr(f, fnty.as_pointer()),
                     [builder.trunc(order, i32), builder.trunc(ta, i32), builder.trunc(tb, i32),
                      m, n, k, ir.Constant(dbl, 1.0), builder.inttoptr(a, ptr), lda,
                      builder.inttoptr(b, ptr), ldb, ir.Constant(dbl, 0.0),
                      builder.inttoptr(c, ptr), ldc])
        return context.get_dummy_value()

    return sig, codegen


if config.DISABLE_JIT:
    def _load_acquire(flags, i):
        return int(flags[i])

    def _store_release(flags, i, v):
        flags[i] = v

    def _pause():
        pass

    def _dgemm(*args):
        raise RuntimeError("native BLAS pieces need the JIT")


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


# a native piece: go[k] == NATIVE, and tasks[k] holds (GEMM_FIELDS) the cblas_dgemm address,
# the addresses of a, b and c, the batch count, m, n, k, the batch strides of a, b and c in
# bytes, the transposes of a and b (CBLAS's 111 / 112) and the leading dimensions of a, b, c
NATIVE = 2
GEMM_FIELDS = 16
SIG_SERVE = "int64(int64[::1], int64[::1], int64, int64, int64[:, ::1])"
SIG_GEMM_BATCH = "void(int64[::1])"


@njit(cache=True, nogil=True)
def gemm_batch(t):
    """The cblas_dgemm calls of one native piece (fields: see NATIVE)."""
    for i in range(t[4]):
        _dgemm(t[0], 101, t[11], t[12], t[5], t[6], t[7], t[1] + i * t[8], t[13],
               t[2] + i * t[9], t[14], t[3] + i * t[10], t[15])


@njit(cache=True, nogil=True)
def serve(go, done, k, rounds, tasks):
    """Worker k's wait, as ``spin_wait(go, k, rounds)``, that runs its native pieces itself
    (then done[k] = 1) and waits on, `rounds` reads again: returns 1 for a Python piece, 0 once
    `rounds` reads found nothing."""
    left = rounds
    while True:
        v = _load_acquire(go, k)
        if v == NATIVE:
            go[k] = 0  # (the caller writes go[k] again only after done[k])
            gemm_batch(tasks[k])
            _store_release(done, k, 1)
            left = rounds
            continue
        if v != 0:
            return v
        if left <= 0:
            return 0
        left -= 1
        _pause()
