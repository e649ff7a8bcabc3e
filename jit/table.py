"""The primitive table: every differentiable primitive of tapejit, declared once.

A row names the primitive, its family and the facts its family needs:

- ``unary``  y = f(x):    NumPy ufunc, scalar forward ``f`` and derivative ``d`` (in x, y).
- ``binary`` y = f(a, b): NumPy ufunc, scalar forward ``f`` and partials ``da``, ``db`` (in a, b, y).
- ``reduce`` / ``scan``: a reduction or scan over the middle axis of a (P, R, Q) view.
- ``gather`` / ``scatter`` / ``select``: linear index maps (every indexing and shape op is one).
- ``matmul``: batched (B, M, K) @ (B, K, N), small sizes inside the sweep.
- ``escape``: the rules need LAPACK/BLAS, so they are NumPy code run between jitted segments;
  each is defined once in ``tape/escapes/`` (value, reverse and forward rules, shapes), looked
  up there by the row's name. The scipy.special rows are escapes too, with the scalar formulas
  of a unary / binary row: their kernels live in their own module, compiled only when a
  recording uses one (``_generate_special.py`` renders ``_special_sweep.py``).
- ``input``: rows that only hold a value (constants, leaves, links to an older tape).

Every family but ``escape`` and ``input`` has one module in ``jit/families/`` with its kernel
bodies for every mode (the elementwise ones generated from the formulas below) and its layout.

The opcode of a row is its index in ``TABLE``. ``_generate.py`` renders ``_interp.py`` from this
file; ``tests/test_generated.py`` fails when the rendered file is stale. Formulas are Numba scalar
expressions; the names they may use are the math functions imported by the generated module and
the helpers in ``HELPERS`` below. A unary row may also name ``vf``, the formula its array loops use
instead of ``f``: a branch-free kernel of ``jit/_vmath.py`` that LLVM vectorizes (within 1.1 ulp
of the exact value; 0-d rows keep ``f``, libm).
"""
from __future__ import annotations

import enum
import functools
from dataclasses import dataclass

import numpy as np

# 2: binary rows may carry a strided broadcast loop nest (flag 16, see tape/core/record.py)
FORMAT_VERSION = 2


@dataclass(frozen=True)
class Prim:
    name: str
    family: str
    ufunc: object = None  # eager NumPy callable (ufunc for elementwise rows)
    f: str = ""  # scalar forward formula (elementwise rows)
    d: tuple = ()  # partial derivatives, one per operand (elementwise rows)
    vf: str = ""  # array loops' forward formula, when not f: a vectorizable kernel (jit/_vmath.py)


def _u(name, ufunc, f, d, vf=""):
    return Prim(name, "unary", ufunc, f, (d,), vf=vf)


def _b(name, ufunc, f, da, db):
    return Prim(name, "binary", ufunc, f, (da, db))


def _s(name, f, *d):
    """A special-function row: an escape row with the formulas of a unary (one partial, in x
    and y) or binary (two, in a, b and y) elementwise row."""
    return Prim(name, "escape", None, f, tuple(d))


# ---------------------------------------------------------------------------------------------
# The table. Order is the opcode; append new rows at the end of a family block freely, since
# opcodes are only stored inside tapes of one process (saved tapes carry the table hash).

TABLE: tuple[Prim, ...] = (
    # inputs: values only
    Prim("const", "input"),
    Prim("leaf", "input"),
    Prim("link", "input"),
    # unary elementwise: f(x), f'(x) in terms of x and y = f(x)
    _u("neg", np.negative, "-x", "-1.0"),
    _u("abs", np.absolute, "abs(x)", "_sign(x)"),
    _u("exp", np.exp, "exp(x)", "y", vf="_vexp(x)"),
    _u("expm1", np.expm1, "expm1(x)", "y + 1.0"),
    _u("exp2", np.exp2, "exp2(x)", "y * LN2"),
    _u("log", np.log, "log(x)", "1.0 / x", vf="_vlog(x)"),
    _u("log1p", np.log1p, "log1p(x)", "1.0 / (1.0 + x)", vf="_vlog1p(x)"),
    _u("log2", np.log2, "log2(x)", "1.0 / (x * LN2)"),
    _u("log10", np.log10, "log10(x)", "1.0 / (x * LN10)"),
    _u("sqrt", np.sqrt, "sqrt(x)", "0.5 / y"),
    _u("cbrt", np.cbrt, "_cbrt(x)", "1.0 / (3.0 * y * y)"),
    _u("square", np.square, "x * x", "2.0 * x"),
    _u("reciprocal", np.reciprocal, "1.0 / x", "-(y * y)"),
    _u("sin", np.sin, "sin(x)", "cos(x)"),
    _u("cos", np.cos, "cos(x)", "-sin(x)"),
    _u("tan", np.tan, "tan(x)", "1.0 + y * y"),
    _u("arcsin", np.arcsin, "asin(x)", "1.0 / sqrt(1.0 - x * x)"),
    _u("arccos", np.arccos, "acos(x)", "-1.0 / sqrt(1.0 - x * x)"),
    _u("arctan", np.arctan, "atan(x)", "_arctan_d(x)"),
    _u("sinh", np.sinh, "sinh(x)", "cosh(x)"),
    _u("cosh", np.cosh, "cosh(x)", "sinh(x)"),
    _u("tanh", np.tanh, "tanh(x)", "1.0 - y * y", vf="_vtanh(x)"),
    _u("arcsinh", np.arcsinh, "asinh(x)", "_arcsinh_d(x)"),
    _u("arccosh", np.arccosh, "acosh(x)", "_arccosh_d(x)"),
    _u("arctanh", np.arctanh, "atanh(x)", "1.0 / (1.0 - x * x)"),
    _u("copy", np.positive, "x", "1.0"),
    # binary elementwise: f(a, b) and its partials in terms of a, b and y = f(a, b)
    _b("add", np.add, "a + b", "1.0", "1.0"),
    _b("subtract", np.subtract, "a - b", "1.0", "-1.0"),
    _b("multiply", np.multiply, "a * b", "b", "a"),
    _b("divide", np.true_divide, "a / b", "1.0 / b", "-y / b"),
    _b("power", np.power, "_power(a, b)", "_pow_da(a, b)", "_pow_db(a, y)"),
    _b("arctan2", np.arctan2, "atan2(a, b)", "_atan2_d(b, a, b)", "_atan2_d(-a, a, b)"),
    _b("hypot", np.hypot, "hypot(a, b)", "a / y", "b / y"),
    _b("logaddexp", np.logaddexp, "_logaddexp(a, b)", "_logaddexp_d(a, b, y)",
       "_logaddexp_d(b, a, y)"),
    _b("maximum", np.maximum, "_maximum(a, b)", "_pick_max(a, b)", "_pick_max(b, a)"),
    _b("minimum", np.minimum, "_minimum(a, b)", "_pick_max(-a, -b)", "_pick_max(-b, -a)"),
    _b("fmax", np.fmax, "_fmax(a, b)", "_pick_fmax(a, b)", "_pick_fmax(b, a)"),
    _b("fmin", np.fmin, "_fmin(a, b)", "_pick_fmax(-a, -b)", "_pick_fmax(-b, -a)"),
    _b("remainder", np.remainder, "_remainder(a, b)", "1.0", "-_floor_quot(a, b)"),
    _b("fmod", np.fmod, "_fmod(a, b)", "1.0", "-_trunc_quot(a, b)"),
    # select: y = where(mask, a, b); mask is constant index data
    Prim("where", "select", np.where),
    # reductions and scans over the middle axis of (P, R, Q)
    Prim("sum", "reduce", np.sum),
    Prim("prod", "reduce", np.prod),
    Prim("amax", "reduce", np.max),
    Prim("amin", "reduce", np.min),
    Prim("cumsum", "scan", np.cumsum),
    Prim("cumprod", "scan", np.cumprod),
    # linear index maps: gather y[i] = x[idx[i]]; scatter y = x, y[pos[j]] = v[j]
    Prim("gather", "gather"),
    Prim("scatter", "scatter"),
    # bilinear: small batched matmul inside the sweep
    Prim("matmul", "matmul", np.matmul),
    # escapes: rules in NumPy (LAPACK/BLAS) between jitted segments, each written once in its
    # module of tape/escapes/ (the tape side: jit/ never imports tape)
    Prim("matmul_blas", "escape"),
    Prim("inv", "escape"),
    Prim("det", "escape"),
    Prim("logabsdet", "escape"),
    Prim("solve", "escape"),
    # custom Functions (tape.Function): a chain of "function" rows ties a call's tensor
    # arguments to one hub slot and each output is a "function_out" row of the hub; the backward
    # driver runs the user's backward at the hub, between jitted segments
    Prim("function", "escape"),
    Prim("function_out", "escape"),
    # more escapes (after the Function rows, whose opcodes stay put)
    Prim("cholesky", "escape"),
    Prim("solve_triangular", "escape"),
    Prim("eigh", "escape"),
    Prim("svd", "escape"),
    Prim("qr", "escape"),
    Prim("expm", "escape"),
    # scipy.special's ufuncs (``SCIPY_SPECIAL`` names them): elementwise, with the scalar
    # formulas of a unary / binary row, but escapes of the main sweeps, so that the main
    # interpreters never compile them: their kernels (jit/_special.py) are rendered into
    # jit/_special_sweep.py, compiled the first time a recording uses one of these rows;
    # tape/escapes/special.py holds their rules. polygamma's order n is a constant:
    # tape/special.py refuses a differentiable one, so its partial is never read.
    _s("gammaln", "_lgamma(x)", "_digamma(x)"),
    _s("loggamma", "_loggamma(x)", "_digamma(x)"),
    _s("gamma", "_gamma(x)", "y * _digamma(x)"),
    _s("digamma", "_digamma(x)", "_polygamma(1.0, x)"),
    _s("erf", "erf(x)", "_erf_d(x)"),
    _s("erfc", "erfc(x)", "-_erf_d(x)"),
    _s("erfcx", "_erfcx(x)", "_erfcx_d(x, y)"),
    _s("erfinv", "_erfinv(x)", "_erfinv_d(y)"),
    _s("ndtr", "_ndtr(x)", "_npdf(x)"),
    _s("log_ndtr", "_log_ndtr(x)", "_log_ndtr_d(x, y)"),
    _s("ndtri", "_ndtri(x)", "_ndtri_d(y)"),
    _s("expit", "_expit(x)", "_expit_d(x)"),
    _s("logit", "_logit(x)", "1.0 / (x * (1.0 - x))"),
    _s("log_expit", "_log_expit(x)", "_expit(-x)"),
    _s("i0", "_bessel_i(0.0, x, False)", "_i1(x)"),
    _s("i0e", "_bessel_i(0.0, x, True)", "_i0e_d(x, y)"),
    _s("i1", "_i1(x)", "_i1_d(x, y)"),
    _s("i1e", "_i1e(x)", "_i1e_d(x, y)"),
    _s("entr", "_entr(x)", "_entr_d(x)"),
    _s("polygamma", "_polygamma(a, b)", "nan", "_polygamma(a + 1.0, b)"),
    _s("betaln", "_betaln(a, b)", "_digamma_diff(a, b)", "_digamma_diff(b, a)"),
    _s("beta", "_beta(a, b)", "y * _digamma_diff(a, b)", "y * _digamma_diff(b, a)"),
    _s("xlogy", "_xlogy(a, b)", "log(b)", "a / b"),
    _s("xlog1py", "_xlog1py(a, b)", "log1p(b)", "a / (1.0 + b)"),
    _s("rel_entr", "_rel_entr(a, b)", "_entropy_dx(a, b, 0.0)", "_entropy_dy(a, b, 0.0)"),
    _s("kl_div", "_kl_div(a, b)", "_entropy_dx(a, b, 1.0)", "_entropy_dy(a, b, 1.0)"),
    _s("huber", "_huber(a, b)", "_huber_ddelta(a, b)", "_huber_dr(a, b)"),
    _s("pseudo_huber", "_pseudo_huber(a, b)", "_pseudo_huber_ddelta(a, b)",
       "_pseudo_huber_dr(a, b)"),
    # regularized incomplete gamma and beta functions (tape/escapes/incomplete.py; kernels in
    # jit/_incomplete.py, compiled when a recording first uses them): a value row and the row
    # of its derivatives in the shape parameters, which the value row's rules record
    Prim("gammainc", "escape"),
    Prim("gammainc_da", "escape"),
    Prim("betainc", "escape"),
    Prim("betainc_dab", "escape"),
)

OPCODE = {p.name: i for i, p in enumerate(TABLE)}

# A row's code: the opcode in the low bits, the row's RowFlag bits above them.
OP_MASK = 255
FLAG_SHIFT = 8


class RowFlag(enum.IntFlag):
    """How an elementwise or select row reads its operands (bits of its code above FLAG_SHIFT)."""
    ONE_A = 1  # operand a has one element, broadcast to every element
    ONE_B = 2
    MAP_A = 4  # operand a is broadcast: through an index map (its ints at the row's int
    # offset), or, with STRIDED, by the strides alone (map word -1)
    MAP_B = 8
    STRIDED = 16  # the broadcast is read by strides over collapsed dimensions, not a map


# plain ints for the recording's hot paths (an IntFlag operand makes each & an enum call)
ONE_A, ONE_B, MAP_A, MAP_B, STRIDED = (int(f) for f in RowFlag)
FAMILIES = ("input", "unary", "binary", "select", "reduce", "scan", "gather", "scatter",
            "matmul", "escape")
FAMILY_CODE = {f: i for i, f in enumerate(FAMILIES)}

# Elementwise primitives whose NumPy value is exact by IEEE 754 (one correctly rounded operation,
# or a choice between operands): the same bits from every SIMD loop NumPy may pick, so eager
# array rows keep NumPy's ufunc for them. Every other elementwise primitive is a transcendental
# (or its tie-breaking differs between NumPy's loops: fmax / fmin at +0.0 / -0.0) whose NumPy
# value depends on the CPU: NumPy runs AVX-512 (SVML), AVX2 or baseline loops, each an ulp or
# so from the others. Eager computes those with the sweep's own loops (``OWN_VALUE``), so that an
# eager value and its replay are the same bits on every machine.
NUMPY_EXACT = frozenset({"neg", "abs", "sqrt", "square", "reciprocal", "copy", "add", "subtract",
                         "multiply", "divide", "maximum", "minimum", "remainder", "fmod"})
# scipy.special ufunc name -> the row that computes it (tape registers the ufunc objects the
# first time one reaches a tensor; scipy.special.psi is digamma's alias)
SCIPY_SPECIAL = {"gammaln": "gammaln", "loggamma": "loggamma", "gamma": "gamma",
                 "digamma": "digamma", "psi": "digamma", "erf": "erf", "erfc": "erfc",
                 "erfcx": "erfcx", "erfinv": "erfinv", "ndtr": "ndtr", "log_ndtr": "log_ndtr",
                 "ndtri": "ndtri", "expit": "expit", "logit": "logit", "log_expit": "log_expit",
                 "i0": "i0", "i0e": "i0e", "i1": "i1", "i1e": "i1e", "entr": "entr",
                 "betaln": "betaln", "beta": "beta", "xlogy": "xlogy", "xlog1py": "xlog1py",
                 "rel_entr": "rel_entr", "kl_div": "kl_div", "huber": "huber",
                 "pseudo_huber": "pseudo_huber"}
SPECIAL_ROWS = frozenset(OPCODE[name] for name in SCIPY_SPECIAL.values()) | {OPCODE["polygamma"]}
OWN_VALUE = frozenset(c for c, p in enumerate(TABLE)
                      if p.family in ("unary", "binary") and p.name not in NUMPY_EXACT)

# Scalar helpers the formulas may call; rendered verbatim into the generated module so that
# Numba's cache sees them (it only watches the file of the entry point). Plain @njit, not
# inline="always": LLVM inlines them anyway, while Numba's IR inlining at every call site made the
# sweep ~7 s slower to compile.
HELPERS = '''
@njit(error_model="numpy")
def _sign(x):
    if x > 0.0:
        return 1.0
    if x < 0.0:
        return -1.0
    return x * 0.0  # keeps NaN as NaN and 0 as 0


@njit(error_model="numpy")
def _fmod(a, b):
    # C's fmod, exact (NaN where it is undefined, where Python's math.fmod would raise)
    if b == 0.0 or a - a != 0.0 or b != b:
        return nan
    return np.fmod(a, b)


@njit(error_model="numpy")
def _remainder(a, b):
    # NumPy's remainder is Python's float %: fmod (exact), moved into b's sign by one addition,
    # a zero signed as b (NaN where Python's % would raise)
    if b == 0.0 or a - a != 0.0 or b != b:
        return nan
    return a % b


@njit(error_model="numpy")
def _snap(div):
    # (a - fmod(a, b)) / b is an integer up to rounding: the nearest one
    q = floor(div)
    if div - q > 0.5:
        q += 1.0
    return q


@njit(error_model="numpy")
def _floor_quot(a, b):
    # NumPy's floor_divide(a, b): the quotient remainder's value leaves, minus its partial in b
    mod = _fmod(a, b)
    if mod != mod:
        return nan
    div = (a - mod) / b
    if mod != 0.0 and (b < 0.0) != (mod < 0.0):
        div -= 1.0
    return _snap(div)


@njit(error_model="numpy")
def _trunc_quot(a, b):
    # the quotient fmod's value leaves, truncated toward zero (minus its partial in b)
    mod = _fmod(a, b)
    if mod != mod:
        return nan
    return _snap((a - mod) / b)


@njit(error_model="numpy")
def _cbrt(x):
    return cbrt(x)  # libm's (within 1 ulp); x ** (1 / 3) was up to ~120 ulp off for huge |x|


@njit(error_model="numpy")
def _pow_da(a, b):
    if b == 0.0:
        return 0.0
    if b == 2.0:  # the same bits as the general case (pow(a, 1.0) is a), without a pow call
        return 2.0 * a
    if b == 1.0:  # (pow(a, 0.0) is 1.0)
        return 1.0
    if a < 0.0 and abs(b) > 9007199254740992.0 and abs(b) < inf:
        # |b| > 2^53 is even and b - 1 rounds to an even number, whose power of a negative base
        # is positive: b - 1 is odd, so the power is the magnitude's, negated
        return -(b * (-a) ** (b - 1.0))
    return b * a ** (b - 1.0)


@njit(error_model="numpy")
def _pow_db(a, y):
    # d/db a**b = a**b log(a); at a == 0 the limit is 0 (for b > 0), as JAX and PyTorch use.
    if a == 0.0:
        return 0.0
    return y * log(a)


@njit(error_model="numpy")
def _logaddexp(a, b):
    if a != a or b != b:
        return nan
    if a == b:  # also covers a == b == +-inf, where a - b is NaN
        return a + LN2
    return max(a, b) + log1p(exp(-abs(a - b)))


# Derivatives whose textbook form squares x: x * x overflows past |x| ~ 1e154 (and a * a + b * b
# underflows below ~1e-154), where the derivative itself is a normal number; beyond 1e150 they
# take a form without the square (the same value to an ulp), below it the textbook bits.


@njit(error_model="numpy")
def _arctan_d(x):
    if abs(x) < 1e150:
        return 1.0 / (1.0 + x * x)
    return (1.0 / x) / x


@njit(error_model="numpy")
def _arcsinh_d(x):
    if abs(x) < 1e150:
        return 1.0 / sqrt(x * x + 1.0)
    return 1.0 / abs(x)


@njit(error_model="numpy")
def _arccosh_d(x):
    if x < 1e150:
        return 1.0 / sqrt(x * x - 1.0)
    return 1.0 / x


@njit(error_model="numpy")
def _atan2_d(num, a, b):
    # num / (a^2 + b^2): num is b for d/da, -a for d/db
    s = a * a + b * b
    if s < 1e300 and s > 1e-300:
        return num / s
    h = hypot(a, b)
    return (num / h) / h


@njit(error_model="numpy")
def _logaddexp_d(a, b, y):
    # d/da logaddexp(a, b) = exp(a - y); where y is infinite (an operand is +inf, or both are
    # -inf) a - y is NaN, and the limit is maximum's: 1 for the larger, 0.5 each on a tie
    if y == inf or y == -inf:
        return _pick_max(a, b)
    return exp(a - y)


@njit(error_model="numpy")
def _power_fast(a, b):
    # x ** b for NumPy's fast exponents 2, 0.5, -1, 1 and 0: one rounding or none, where pow may
    # be an ulp off ((-0.0) ** 0.5 is -0.0 and (-inf) ** 0.5 NaN, as sqrt gives)
    if b == 2.0:
        return a * a
    if b == 0.5:
        return sqrt(a)
    if b == -1.0:
        return 1.0 / a
    if b == 1.0:
        return a
    return 1.0


@njit(error_model="numpy")
def _power(a, b):
    # the fast exponents at every element and in 0-d too, as NumPy's loop for a scalar exponent
    if b == 2.0 or b == 0.5 or b == -1.0 or b == 1.0 or b == 0.0:
        return _power_fast(a, b)
    # a negative finite base to a non-integer power is NaN (Python's ** would go complex);
    # -inf follows C's pow: inf or 0
    # (b % 1.0, not int(b): no integer holds a huge b)
    if a < 0.0 and a > -inf and abs(b) < inf and b % 1.0 != 0.0:
        return nan
    return a ** b


@njit(error_model="numpy")
def _power_each(a, b):
    # an exponent of its own at each element: NumPy's array loop calls pow there, whose values
    # differ from the fast paths' only for 0.5 at -inf (inf, where sqrt gives NaN) and at -0.0
    # (+0.0, where sqrt gives -0.0)
    if b == 0.5 and (a == -inf or a == 0.0):
        return inf if a == -inf else 0.0
    return _power(a, b)


@njit(error_model="numpy")
def _maximum(a, b):
    if a != a or b != b:
        return nan
    return a if a > b else b  # NumPy returns the second operand on ties (+0.0 vs -0.0)


@njit(error_model="numpy")
def _minimum(a, b):
    if a != a or b != b:
        return nan
    return a if a < b else b


@njit(error_model="numpy")
def _fmax(a, b):
    if b != b:
        return a
    if a != a:
        return b
    return a if a >= b else b


@njit(error_model="numpy")
def _fmin(a, b):
    if b != b:
        return a
    if a != a:
        return b
    return a if a <= b else b


@njit(error_model="numpy")
def _pick_max(a, b):
    # share of the gradient that the first operand of maximum(a, b) receives: NaN propagates
    # from the operand that holds it; ties split evenly (as JAX and PyTorch do).
    if a != a:
        return 1.0
    if b != b:
        return 0.0
    if a > b:
        return 1.0
    if a == b:
        return 0.5
    return 0.0


@njit(error_model="numpy")
def _pick_fmax(a, b):
    # fmax ignores NaN: the non-NaN operand wins.
    if b != b:
        return 0.0 if a != a else 1.0
    if a != a:
        return 0.0
    if a > b:
        return 1.0
    if a == b:
        return 0.5
    return 0.0
'''


def vmath_source() -> str:
    """The vectorizable math kernels that ``vf`` formulas call, as rendered into the sweeps."""
    import os

    with open(os.path.join(os.path.dirname(__file__), "_vmath.py")) as fh:
        return fh.read().split(VMATH_MARKER, 1)[1]


VMATH_MARKER = "# ---- rendered into _interp.py below this line ----\n"


def special_source() -> str:
    """The kernels of the special-function rows (jit/_special.py), as rendered into their own
    sweep, jit/_special_sweep.py."""
    import os

    with open(os.path.join(os.path.dirname(__file__), "_special.py")) as fh:
        return fh.read().split(VMATH_MARKER, 1)[1]


@functools.lru_cache(maxsize=1)
def table_hash() -> str:
    """A short hash of everything the generated kernels depend on (the table is fixed for the
    process: computed once, not per saved or loaded tape)."""
    import hashlib

    h = hashlib.sha256(str(FORMAT_VERSION).encode())
    for p in TABLE:
        h.update(repr((p.name, p.family, p.f, p.d) + ((p.vf,) if p.vf else ())).encode())
    h.update(HELPERS.encode())
    h.update(vmath_source().encode())
    h.update(special_source().encode())
    return h.hexdigest()[:16]
