"""Branch-free exp, log, log1p and tanh that LLVM vectorizes (4 doubles per AVX2 instruction).

libm's functions are scalar calls, so a loop over them cannot vectorize: on W3 (tanh, exp, log1p
of 10^6 elements) they were ~36 of the ~38 ms forward sweep. These are built from +, *, / and
bit operations only, every special case a select rather than a branch, so the array loops of the
forward sweep run them several elements per instruction.

Accuracy (tests/test_vmath.py, against long double references and NumPy's results): every
result within 1 ulp of NumPy's, and errors against the exact value at most 0.88 ulp (exp),
0.83 (log1p, log), 1.05 (tanh; NumPy's own AVX2 tanh reaches 1.19). 0-d rows keep libm, so
scalar code (W1) replays bit for bit.

The methods are the classic ones: exp reduces x = k ln2 + r (ln2 split in two so k ln2 is exact)
and evaluates exp(r) with a rational form of a degree-10 minimax polynomial, then scales by 2^k in
two steps, so that results that are subnormal round once; log splits u = 2^k m with m in
[sqrt(2)/2, sqrt(2)) and evaluates log(m) = 2 atanh(f / (2 + f)), f = m - 1, by a minimax
polynomial in s^2; log1p is log(1 + x) plus the rounding error of 1 + x, divided by 1 + x; tanh
is x + x^3 g(x^2) below |x| = 0.75 (g fitted by Chebyshev interpolation in 60-digit arithmetic,
degree 12) and 1 - 2 / (exp(2|x|) + 1) above, where that formula's error is under 1 ulp.

The text below the marker is rendered into ``_interp.py`` by ``jit/_generate.py`` (Numba's cache
only sees the file of a jitted entry point); this module is importable on its own for tests.
"""
import numpy as np
from llvmlite import ir
from math import exp, log, log1p, tanh
from numba import config, njit, types
from numba.extending import intrinsic

# ---- rendered into _interp.py below this line ----


@intrinsic
def _bits(typingctx, x):
    """The IEEE bits of a float64, as an int64."""
    sig = types.int64(types.float64)

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return sig, codegen


@intrinsic
def _from_bits(typingctx, i):
    """The float64 whose IEEE bits are the int64 i."""
    sig = types.float64(types.int64)

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return sig, codegen


_SHIFT = 6755399441055744.0  # 1.5 * 2**52: x + _SHIFT rounds x to an integer held in the low bits
_SHIFT_BITS = 0x4338000000000000
_LN2_HI = 6.93147180369123816490e-01  # trailing zero bits: k * _LN2_HI is exact for |k| < 2**11
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e+00
# exp(r) = 1 + 2r / (2 - c), c = r - r^2 P(r^2): minimax P on |r| <= ln2 / 2
_E1 = 1.66666666666666019037e-01
_E2 = -2.77777777770155933842e-03
_E3 = 6.61375632143793436117e-05
_E4 = -1.65339022054652515390e-06
_E5 = 4.13813679705723846039e-08
# log(m) = f - f^2/2 + s (f^2/2 + R(s^2)), s = f / (2 + f): minimax R on |s| <= 0.1716
_L1 = 6.666666666666735130e-01
_L2 = 3.999999999940941908e-01
_L3 = 2.857142874366239149e-01
_L4 = 2.222219843214978396e-01
_L5 = 1.818357216161805012e-01
_L6 = 1.531383769920937332e-01
_L7 = 1.479819860511658591e-01
_SQRT_HALF_BITS = 0x3fe6a09e667f3bcd  # sqrt(2) / 2: m is scaled into [sqrt(2)/2, sqrt(2))
_MANTISSA = 0x000fffffffffffff
_SIGN = -0x8000000000000000  # the sign bit, as an int64
# tanh(x) = x + x^3 g(x^2) for |x| < 0.75; relative error of g below 7.2e-17
_T0 = -0.3333333333333333
_T1 = 0.13333333333332661
_T2 = -0.05396825396758208
_T3 = 0.021869488509711037
_T4 = -0.008863234987439102
_T5 = 0.0035921213885060418
_T6 = -0.0014557818253310693
_T7 = 0.0005897469986953327
_T8 = -0.00023809406936979282
_T9 = 9.42476297649358e-05
_T10 = -3.449472469998217e-05
_T11 = 1.0048053928129499e-05
_T12 = -1.6408599646831444e-06


@njit(error_model="numpy", fastmath={"contract"})
def _exp_parts(x):
    """exp(x) = p * 2^k, p in [sqrt(2)/2, sqrt(2)], for finite x of moderate size."""
    t = x * _INV_LN2 + _SHIFT
    kf = t - _SHIFT  # the integer nearest x / ln2
    k = _bits(t) - _SHIFT_BITS
    hi = x - kf * _LN2_HI
    lo = kf * _LN2_LO
    r = hi - lo
    z = r * r
    c = r - z * (_E1 + z * (_E2 + z * (_E3 + z * (_E4 + z * _E5))))
    return 1.0 - ((lo - (r * c) / (2.0 - c)) - hi), k


@njit(error_model="numpy", fastmath={"contract"})
def _vexp(x):
    p, k = _exp_parts(x)
    k1 = k >> 1  # 2^k in two normal factors, so a subnormal result is rounded once
    y = p * _from_bits((k1 + 1023) << 52) * _from_bits((k - k1 + 1023) << 52)
    y = np.inf if x > 709.782712893384 else y
    y = 0.0 if x < -745.2 else y
    return x if x != x else y


@njit(error_model="numpy", fastmath={"contract"})
def _vlog_core(u, c, k0):
    """log(u * 2^-k0) + c / u for a positive normal u (c: a correction far below u's ulp)."""
    b = _bits(u) + (0x3ff0000000000000 - _SQRT_HALF_BITS)
    k = (b >> 52) - 1023 - k0
    m = _from_bits((b & _MANTISSA) + _SQRT_HALF_BITS)
    kf = _from_bits(k + _SHIFT_BITS) - _SHIFT  # float(k), without int64 -> double conversion
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    R = z * (_L1 + w * (_L3 + w * (_L5 + w * _L7))) + w * (_L2 + w * (_L4 + w * _L6))
    hfsq = 0.5 * f * f
    return kf * _LN2_HI + (f - (hfsq - (s * (hfsq + R) + (kf * _LN2_LO + c / u))))


@njit(error_model="numpy", fastmath={"contract"})
def _vlog1p(x):
    u = 1.0 + x  # 0 or at least 2^-53 (normal) for x >= -1
    c = x - (u - 1.0)  # the rounding error of 1 + x
    y = _vlog_core(u if u > 0.0 else 1.0, c, 0)
    y = -np.inf if u == 0.0 else y
    y = np.nan if x < -1.0 else y
    y = np.inf if x == np.inf else y
    return x if (x != x or x == 0.0) else y  # NaN, and the sign of a zero


@njit(error_model="numpy", fastmath={"contract"})
def _vlog(x):
    sub = x < 2.2250738585072014e-308  # subnormal: scale into the normal range first
    u = x * 18014398509481984.0 if sub else x  # 2^54
    y = _vlog_core(u if u > 0.0 else 1.0, 0.0, 54 if sub else 0)
    y = -np.inf if x == 0.0 else y
    y = np.nan if x < 0.0 else y
    y = np.inf if x == np.inf else y
    return x if x != x else y


@njit(error_model="numpy", fastmath={"contract"})
def _vtanh(x):
    a = abs(x)
    z = a * a
    g = _T12
    g = g * z + _T11
    g = g * z + _T10
    g = g * z + _T9
    g = g * z + _T8
    g = g * z + _T7
    g = g * z + _T6
    g = g * z + _T5
    g = g * z + _T4
    g = g * z + _T3
    g = g * z + _T2
    g = g * z + _T1
    g = g * z + _T0
    small = a + a * (z * g)
    # past |x| = 20, 2 / (exp(2|x|) + 1) < 2^-56 and the result is 1.0: exp needs no range
    # checks below that (a NaN stays NaN: it fails the comparison)
    p, k = _exp_parts(2.0 * (20.0 if a > 20.0 else a))
    big = 1.0 - 2.0 / (p * _from_bits((k + 1023) << 52) + 1.0)
    y = small if a < 0.75 else big  # >= +0.0, or NaN
    return _from_bits(_bits(y) | (_bits(x) & _SIGN))  # x's sign, zeros included


if config.DISABLE_JIT:  # plain Python: libm (the intrinsics above need Numba)
    _vexp, _vlog, _vlog1p, _vtanh = exp, log, log1p, tanh
