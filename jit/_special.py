"""Scalar kernels of the special-function rows (scipy.special's ufuncs as table rows).

Numba compiles libm's lgamma, tgamma, erf and erfc; everything else here is our own: digamma,
polygamma (Hurwitz zeta), erfcx, log_ndtr, erfinv / ndtri (Halley's iteration on erf / erfc),
the modified Bessel functions I0, I1 and their scaled forms, and the well-conditioned pieces of
betaln, the logistic functions and the entropies. Each is plain Python that Numba compiles, so
that NUMBA_DISABLE_JIT runs the same arithmetic.

Accuracy against SciPy (tests/test_special_accuracy.py states a bound per function and measures
it over the whole domain, tails and special values included) is documented in docs/special.md.

The methods are the textbook ones: digamma sums its asymptotic series from 10 on, below 10 is
(x - x0) times a sum of positive terms (x0 its positive root: nothing cancels), and reflects
x < 0; polygamma(n, x) is (-1)^(n+1) n! zeta(n+1, x), zeta by the shift and the
Euler-Maclaurin tail; erfcx is exp(x^2) erfc(x) with x^2 split exactly below 10 and its
asymptotic series above; log_ndtr is log(erfcx(z) / 2) - z^2 in the lower tail; erfinv and
ndtri start from an asymptotic guess and take Halley steps on whichever of erf / erfc is the
better conditioned residual; I0 and I1 sum their power series up to |x| = 20 and their
asymptotic series beyond.

The text below the marker is rendered into ``_special_sweep.py``, the special rows' own jitted
module, by ``jit/_generate_special.py`` (Numba's cache only sees the file of a jitted entry
point); this module is importable on its own for tests.
"""
from math import exp, inf, log, log1p, nan, sin, sqrt, tan

import numpy as np

from numba import njit

# ---- rendered into _interp.py below this line ----
from math import erf, erfc, gamma, lgamma, pi  # noqa: E402 (the special rows' libm)

_SQRT_PI = 1.7724538509055160273
_TWO_OVER_SQRT_PI = 1.1283791670955125739
_SQRT_2 = 1.4142135623730950488
_INV_SQRT_2 = 0.70710678118654752440
_INV_SQRT_2_LO = -4.833646656726457e-17  # 1/sqrt(2) - _INV_SQRT_2
_INV_SQRT_2PI = 0.39894228040143267794
_SQRT_2PI = 2.5066282746310005024
_LN_SQRT_2PI = 0.91893853320467274178
_DIGAMMA_ROOT_HI = 1.4616321449683622  # the positive root of digamma, split in two doubles
_DIGAMMA_ROOT_LO = 9.549995429965697e-17


@njit(error_model="numpy")
def _is_pole(x):
    """0 or a negative integer: a pole of the gamma family."""
    return x <= 0.0 and x == np.floor(x)


@njit(error_model="numpy")
def _lgamma(x):
    """log|gamma(x)| (libm's); +inf at the poles, -inf at -inf (SciPy's)."""
    if x == -inf:
        return x
    if _is_pole(x):
        return inf
    if x > 2.5e305:
        return inf
    return lgamma(x)


@njit(error_model="numpy")
def _loggamma(x):
    """SciPy's real loggamma: log(gamma(x)) for x >= 0, NaN below (gamma is negative there)."""
    if x < 0.0:
        return nan
    return _lgamma(x)


@njit(error_model="numpy")
def _gamma(x):
    if x != x:
        return x
    if x == 0.0:
        return 1.0 / x  # +-inf, the sign of the zero's
    if _is_pole(x):
        return nan
    if x > 171.7:
        return inf
    return gamma(x)


@njit(error_model="numpy")
def _cot_pi(x):
    """pi / tan(pi x), reduced exactly to r in [-1/2, 1/2) first (tan's argument keeps its bits),
    and to tan(pi (1/2 - |r|)) past |r| = 1/4, where 1/2 - |r| is exact and zero at 1/2."""
    r = x - np.floor(x + 0.5)
    if abs(r) <= 0.25:
        return pi / tan(pi * r)
    if r > 0.0:
        return pi * tan(pi * (0.5 - r))
    return -pi * tan(pi * (0.5 + r))


@njit(error_model="numpy")
def _digamma_asymptotic(x):
    """psi(x) for x >= 10: log x - 1/(2x) - sum_k B_2k / (2k x^2k)."""
    z = 1.0 / (x * x)
    s = z * (0.08333333333333333 + z * (-0.008333333333333333 + z * (
        0.003968253968253968 + z * (-0.004166666666666667 + z * (
            0.007575757575757576 + z * (-0.021092796092796094 + z * (
                0.08333333333333333 + z * -0.4432598039215686)))))))
    return log(x) - 0.5 / x - s


@njit(error_model="numpy")
def _digamma(x):
    if x != x or x == inf:
        return x
    if x == 0.0:
        return -1.0 / x  # -inf at +0, +inf at -0 (SciPy's)
    if x < 0.0:
        if x == np.floor(x) or x == -inf:
            return nan
        # reflection: psi(x) = psi(1 - x) - pi cot(pi x)
        return _digamma_positive(1.0 - x) - _cot_pi(x)
    return _digamma_positive(x)


@njit(error_model="numpy")
def _digamma_positive(x):
    """psi(x) for x > 0. Below 10 as psi(x) - psi(x0) at the positive root x0 of psi:
    (x - x0) sum_k 1 / ((x + k)(x0 + k)), positive terms (no cancellation near the root or
    elsewhere), the tail from k = 10 on being the asymptotic series' difference divided by
    x - x0, term by term."""
    if x >= 10.0:
        return _digamma_asymptotic(x)
    h = (x - _DIGAMMA_ROOT_HI) - _DIGAMMA_ROOT_LO
    s = 0.0
    for k in range(10):
        s += 1.0 / ((x + k) * (_DIGAMMA_ROOT_HI + k))
    u = x + 10.0
    v = _DIGAMMA_ROOT_HI + 10.0
    iu = 1.0 / u
    iv = 1.0 / v
    # (psi(u) - psi(v)) / h = log1p(h / v) / h + 1 / (2uv)
    #                         + sum_k c_k sum_{j < 2k} u^(j - 2k) v^(-1 - j)
    s += (log1p(h / v) / h if h != 0.0 else iv) + 0.5 * iu * iv
    m = 0
    for coef in (0.08333333333333333, -0.008333333333333333, 0.003968253968253968,
                 -0.004166666666666667, 0.007575757575757576, -0.021092796092796094,
                 0.08333333333333333, -0.4432598039215686):
        m += 2
        p = 0.0
        for j in range(m):
            p += iu ** (m - j) * iv ** (j + 1)
        s += coef * p
    return h * s


@njit(error_model="numpy")
def _digamma_diff(a, c):
    """psi(a) - psi(a + c), without the cancellation of the difference when a is large."""
    b = a + c
    if a < 10.0 or b < 10.0:
        return _digamma(a) - _digamma(b)
    # the difference of the asymptotic series, term by term
    za = 1.0 / (a * a)
    zb = 1.0 / (b * b)
    s = 0.0
    pa = 1.0
    pb = 1.0
    for coef in (0.08333333333333333, -0.008333333333333333, 0.003968253968253968,
                 -0.004166666666666667, 0.007575757575757576, -0.021092796092796094,
                 0.08333333333333333, -0.4432598039215686):
        pa *= za
        pb *= zb
        s += coef * (pa - pb)
    return -log1p(c / a) - 0.5 * c / (a * b) - s


@njit(error_model="numpy")
def _hurwitz_zeta(s, q):
    """zeta(s, q) = sum_k (q + k)^-s for integer s >= 2 and q > 0 or a non-integer q < 0."""
    total = 0.0
    shift = 12.0 + s
    while q < shift:
        total += q ** -s
        q += 1.0
    # Euler-Maclaurin tail at q >= 12 + s: its terms fall below 1e-19 of the sum
    total += q ** (1.0 - s) / (s - 1.0) + 0.5 * q ** -s
    t = s * q ** (-s - 1.0)
    z = 1.0 / (q * q)
    j = 1.0
    for coef in (0.08333333333333333, -0.001388888888888889, 3.306878306878307e-05,
                 -8.267195767195768e-07, 2.08767569878681e-08, -5.284190138687493e-10,
                 1.3382536530684679e-11, -3.3896802963225827e-13, 8.586062056277845e-15,
                 -2.174868698558062e-16, 5.5090028283602295e-18, -1.3954464685812522e-19):
        total += coef * t
        t *= (s + 2.0 * j - 1.0) * (s + 2.0 * j) * z
        j += 1.0
    return total


@njit(error_model="numpy")
def _trigamma_reflected(x):
    # psi1(x) + psi1(1 - x) = pi^2 / sin^2(pi x), sin of the reduced argument
    r = x - np.floor(x + 0.5)
    sr = sin(pi * r)
    return (pi / sr) * (pi / sr) - _hurwitz_zeta(2.0, 1.0 - x)


@njit(error_model="numpy")
def _polygamma(n, x):
    """SciPy's polygamma(n, x): the n-th derivative of digamma, integer n >= 0."""
    if n != n or x != x or n < 0.0 or n != np.floor(n):
        return nan
    if n == 0.0:
        return _digamma(x)
    sign = 1.0 if n % 2.0 == 1.0 else -1.0  # (-1)^(n+1)
    if _is_pole(x):
        return sign * inf
    if x == inf:
        return 0.0
    if x == -inf:
        return nan
    if x < 0.0:
        if n == 1.0:
            return _trigamma_reflected(x)
        if x < -1e6:  # the shifted sum would take more than a million terms
            return nan
    return sign * gamma(n + 1.0) * _hurwitz_zeta(n + 1.0, x)


@njit(error_model="numpy")
def _two_product(a, b):
    """a * b = hi + lo exactly (Dekker's splitting; no fma needed)."""
    hi = a * b
    c = 134217729.0 * a
    ah = c - (c - a)
    al = a - ah
    c = 134217729.0 * b
    bh = c - (c - b)
    bl = b - bh
    lo = ((ah * bh - hi) + ah * bl + al * bh) + al * bl
    return hi, lo


@njit(error_model="numpy")
def _erfcx(x):
    """exp(x^2) erfc(x)."""
    if x != x:
        return x
    if x < 10.0:
        if x < -26.7:
            return inf
        hi, lo = _two_product(x, x)
        return exp(hi) * (1.0 + lo) * erfc(x)
    # asymptotic: 1 / (x sqrt(pi)) sum_k (-1)^k (2k-1)!! / (2x^2)^k
    if x > 1e150:
        return 1.0 / (x * _SQRT_PI)
    z = 0.5 / (x * x)
    t = 1.0
    s = 1.0
    for k in range(1, 30):
        t *= -(2.0 * k - 1.0) * z
        s += t
    return s / (x * _SQRT_PI)


@njit(error_model="numpy")
def _erfcx_d(x, y):
    """d/dx erfcx(x) = 2 x erfcx(x) - 2 / sqrt(pi); its asymptotic series past 10, where the
    difference cancels."""
    if x < 10.0:
        return 2.0 * x * y - _TWO_OVER_SQRT_PI
    if x > 1e150:
        return -(1.0 / _SQRT_PI) / x / x
    z = 0.5 / (x * x)
    t = 1.0
    s = 1.0
    for k in range(1, 30):
        t *= -(2.0 * k - 1.0) * z
        s += t * (2.0 * k + 1.0)
    return -(s / _SQRT_PI) / (x * x)


@njit(error_model="numpy")
def _erf_d(x):
    return _TWO_OVER_SQRT_PI * exp(-x * x)


@njit(error_model="numpy")
def _npdf(x):
    return _INV_SQRT_2PI * exp(-0.5 * x * x)


@njit(error_model="numpy")
def _ndtr_upper(t):
    """ndtr(-t) = erfc(t / sqrt(2)) / 2 for t >= 0, with the rounding of t / sqrt(2) taken into
    account (erfc magnifies it by 2 z^2 in relative terms: ~1000 ulps at z = 26 otherwise):
    erfc(z + dz) = erfc(z) (1 - dz 2 / (sqrt(pi) erfcx(z)))."""
    if t > 40.0:  # erfc(t / sqrt(2)) < 1e-340 underflows to 0 (and so does its correction)
        return 0.0
    z, e = _two_product(t, _INV_SQRT_2)
    dz = e + t * _INV_SQRT_2_LO
    return 0.5 * erfc(z) * (1.0 - dz * _TWO_OVER_SQRT_PI / _erfcx(z))


@njit(error_model="numpy")
def _ndtr(x):
    """The standard normal CDF: erf near 0, erfc in the tails (no 1 - erf cancellation)."""
    z = x * _INV_SQRT_2
    if abs(z) < _INV_SQRT_2 or x != x:
        return 0.5 + 0.5 * erf(z)
    if x > 0.0:
        return 1.0 - _ndtr_upper(x)
    if x == -inf:
        return 0.0
    return _ndtr_upper(-x)


@njit(error_model="numpy")
def _log_ndtr(x):
    if x != x:
        return x
    if x > 0.0:
        return log1p(-_ndtr_upper(x))  # 1 - ndtr(x) keeps its bits
    if x > -1.0:
        return log(_ndtr(x))
    if x == -inf:
        return -inf
    # lower tail: ndtr(x) = erfcx(z) exp(-z^2) / 2, z = -x / sqrt(2), so no underflow
    return log(0.5 * _erfcx(-x * _INV_SQRT_2)) - 0.5 * x * x


@njit(error_model="numpy")
def _log_ndtr_d(x, y):
    """d/dx log ndtr(x) = npdf(x) / ndtr(x), in the lower tail as sqrt(2/pi) / erfcx(z)."""
    if x > -1.0:
        return exp(-0.5 * x * x - y) * _INV_SQRT_2PI
    if x == -inf:
        return inf
    return (2.0 * _INV_SQRT_2PI) / _erfcx(-x * _INV_SQRT_2)


@njit(error_model="numpy")
def _inverse_erf(y, q):
    """x >= 0 with erf(x) = y and erfc(x) = q = 1 - y, both given to full relative precision:
    Halley's steps on erf(x) - y while y <= 1/2, on erfc(x) - q above (the residual that keeps
    its relative precision)."""
    if q == 0.0:
        return inf
    if y == 0.0:
        return 0.0
    if y <= 0.5:
        x = y * (0.5 * _SQRT_PI) * (1.0 + (pi / 12.0) * y * y)
    else:
        t = -log(q)
        x = sqrt(t)
        x = sqrt(max(t - log(x * _SQRT_PI), 0.25))
    for _ in range(12):
        if y <= 0.5:
            r = (erf(x) - y) / (_TWO_OVER_SQRT_PI * exp(-x * x))
        else:
            r = -(erfc(x) - q) / (_TWO_OVER_SQRT_PI * exp(-x * x))
        if r != r or abs(r) == inf:  # exp(-x^2) underflowed (q subnormal): keep the guess
            break
        step = r / (1.0 + x * r)
        x -= step
        if abs(step) <= 1e-15 * x:
            break
    return x


@njit(error_model="numpy")
def _erfinv(y):
    if y != y or y < -1.0 or y > 1.0:
        return nan
    a = abs(y)
    if a == 0.0:
        return y  # the zero's sign
    x = _inverse_erf(a, 1.0 - a)  # 1 - |y| is exact where it matters (|y| >= 1/2)
    return -x if y < 0.0 else x


@njit(error_model="numpy")
def _erfinv_d(y):
    return 0.5 * _SQRT_PI * exp(y * y)


@njit(error_model="numpy")
def _ndtri(p):
    """The standard normal quantile: sqrt(2) erfinv(2p - 1), from whichever of p, 1 - p, 2p - 1
    is exact."""
    if p != p or p < 0.0 or p > 1.0:
        return nan
    if p == 0.0:
        return -inf
    if p == 1.0:
        return inf
    if p < 0.25:
        return -_SQRT_2 * _inverse_erf(1.0 - 2.0 * p, 2.0 * p)
    if p > 0.75:
        q = 2.0 * (1.0 - p)
        return _SQRT_2 * _inverse_erf(1.0 - q, q)
    y = 2.0 * p - 1.0  # exact for p in [1/4, 3/4]
    a = abs(y)
    x = _SQRT_2 * _inverse_erf(a, 1.0 - a)
    return -x if y < 0.0 else x


@njit(error_model="numpy")
def _ndtri_d(y):
    return _SQRT_2PI * exp(0.5 * y * y)


@njit(error_model="numpy")
def _expit(x):
    if x >= 0.0:
        return 1.0 / (1.0 + exp(-x))
    e = exp(x)
    return e / (1.0 + e)


@njit(error_model="numpy")
def _expit_d(x):
    """expit(x) expit(-x), from exp(-|x|) (y (1 - y) loses 1 - y's bits for large x)."""
    e = exp(-abs(x))
    return e / ((1.0 + e) * (1.0 + e))


@njit(error_model="numpy")
def _logit(p):
    if 0.25 < p < 0.75:
        return log1p((2.0 * p - 1.0) / (1.0 - p))  # 2p - 1 exact: no cancellation near 1/2
    return log(p / (1.0 - p))


@njit(error_model="numpy")
def _log_expit(x):
    if x >= 0.0:
        return -log1p(exp(-x))
    return x - log1p(exp(x))


@njit(error_model="numpy")
def _entr(x):
    if x > 0.0:
        return -x * log(x)
    if x == 0.0:
        return 0.0
    if x < 0.0:
        return -inf
    return x


@njit(error_model="numpy")
def _entr_d(x):
    if x > 0.0:
        return -log(x) - 1.0
    if x == 0.0:
        return inf
    return nan


@njit(error_model="numpy")
def _xlogy(x, y):
    if x == 0.0 and y == y:
        return 0.0
    return x * log(y)


@njit(error_model="numpy")
def _xlog1py(x, y):
    if x == 0.0 and y == y:
        return 0.0
    return x * log1p(y)


@njit(error_model="numpy")
def _rel_entr(x, y):
    if x != x or y != y:
        return nan
    if x > 0.0 and y > 0.0:
        return x * log(x / y)
    if x == 0.0 and y >= 0.0:
        return 0.0
    return inf


@njit(error_model="numpy")
def _kl_div(x, y):
    if x != x or y != y:
        return nan
    if x > 0.0 and y > 0.0:
        return x * log(x / y) - x + y
    if x == 0.0 and y >= 0.0:
        return y
    return inf


@njit(error_model="numpy")
def _entropy_dx(x, y, kl):
    """d/dx of rel_entr (kl 0) or kl_div (kl 1): log(x / y) + 1 - kl inside the domain."""
    if x > 0.0 and y > 0.0:
        return log(x / y) + (1.0 - kl)
    if x == 0.0 and y > 0.0:
        return -inf
    return nan


@njit(error_model="numpy")
def _entropy_dy(x, y, kl):
    """d/dy of rel_entr (kl 0) or kl_div (kl 1): kl - x / y inside the domain."""
    if x >= 0.0 and y > 0.0:
        return kl - x / y
    return nan


@njit(error_model="numpy")
def _huber(delta, r):
    if delta < 0.0:
        return inf
    if abs(r) <= delta:
        return 0.5 * r * r
    return delta * (abs(r) - 0.5 * delta)


@njit(error_model="numpy")
def _huber_ddelta(delta, r):
    if delta < 0.0:
        return nan
    if abs(r) <= delta:
        return 0.0
    return abs(r) - delta


@njit(error_model="numpy")
def _huber_dr(delta, r):
    if delta < 0.0:
        return nan
    if abs(r) <= delta:
        return r
    return delta if r > 0.0 else -delta


@njit(error_model="numpy")
def _pseudo_huber(delta, r):
    """delta^2 (sqrt(1 + (r / delta)^2) - 1), as r^2 / (sqrt(1 + t^2) + 1): no cancellation."""
    if delta < 0.0:
        return inf
    if delta == 0.0 or r == 0.0:
        return 0.0
    t = r / delta
    return (r * r) / (sqrt(1.0 + t * t) + 1.0) if abs(t) < 1e150 else delta * abs(r)


@njit(error_model="numpy")
def _pseudo_huber_ddelta(delta, r):
    # d/d delta = delta t^4 / (s (s + 1)^2), s = sqrt(1 + t^2): the same as
    # 2 delta (s - 1) - r^2 / (delta s), without its cancellation
    if delta < 0.0:
        return nan
    if delta == 0.0:
        return abs(r)
    t = r / delta
    if abs(t) >= 1e150:
        return abs(r)
    s = sqrt(1.0 + t * t)
    u = t * t / (s + 1.0)
    return delta * (u / s) * u


@njit(error_model="numpy")
def _pseudo_huber_dr(delta, r):
    if delta < 0.0:
        return nan
    if delta == 0.0:
        return 0.0
    t = r / delta
    if abs(t) >= 1e150:
        return delta if r > 0.0 else -delta
    return r / sqrt(1.0 + t * t)


@njit(error_model="numpy")
def _stirling_tail(x):
    """log gamma(x) - ((x - 1/2) log x - x + log sqrt(2 pi)), x >= 10."""
    z = 1.0 / (x * x)
    return (0.08333333333333333 + z * (-0.002777777777777778 + z * (
        0.0007936507936507937 + z * (-0.0005952380952380953 + z * (
            0.0008417508417508417 + z * (-0.0019175269175269176 + z * (
                0.00641025641025641 + z * -0.029550653594771242))))))) / x


@njit(error_model="numpy")
def _betaln_regular(a, b):
    """log|B(a, b)| away from the poles, from Stirling's series where a + b is large (the
    three lgamma values would cancel to far fewer bits)."""
    if a < b:
        a, b = b, a
    # now a >= b
    if b <= 0.0 or a < 10.0:
        return _lgamma(a) + _lgamma(b) - _lgamma(a + b)
    c = a + b
    # log gamma(a) - log gamma(a + b), a >= 10: Stirling's series, the log terms merged
    big = -(a - 0.5) * log1p(b / a) - b * log(c) + b + _stirling_tail(a) - _stirling_tail(c)
    if b < 10.0:
        return _lgamma(b) + big
    # b >= 10 as well: Stirling for gamma(b) too, b log b merged with b log(a + b)
    return (_LN_SQRT_2PI - 0.5 * log(b) + b * log(b / c) - (a - 0.5) * log1p(b / a)
            + _stirling_tail(a) + _stirling_tail(b) - _stirling_tail(c))


@njit(error_model="numpy")
def _gamma_sign(x):
    if x > 0.0:
        return 1.0
    return 1.0 if np.floor(x) % 2.0 == 0.0 else -1.0


@njit(error_model="numpy")
def _beta_regular(a, b):
    if a > 0.01 and b > 0.01 and a + b < 170.0:  # no overflow: three gammas, ~3 roundings
        return gamma(a) * gamma(b) / gamma(a + b)
    return _gamma_sign(a) * _gamma_sign(b) * _gamma_sign(a + b) * exp(_betaln_regular(a, b))


# At a pole a (0 or a negative integer) B(a, b) is finite where b is an integer with
# a + b <= 0 (Gamma(a + b) has a pole too): (-1)^b B(1 - a - b, b); infinite elsewhere.
# SciPy's (cephes') conventions, signs of its infinities included.


@njit(error_model="numpy")
def _beta_at_pole(a, b):
    if b == np.floor(b) and 1.0 - a - b > 0.0:
        sign = 1.0 if b % 2.0 == 0.0 else -1.0
        return sign * (inf if b <= 0.0 else _beta_regular(1.0 - a - b, b))
    return inf


@njit(error_model="numpy")
def _beta(a, b):
    if a != a or b != b:
        return nan
    if _is_pole(a):
        return _beta_at_pole(a, b)
    if _is_pole(b):
        return _beta_at_pole(b, a)
    return _beta_regular(a, b)


@njit(error_model="numpy")
def _betaln_at_pole(a, b):
    if b == np.floor(b) and 1.0 - a - b > 0.0 and b > 0.0:
        return _betaln_regular(1.0 - a - b, b)
    return inf


@njit(error_model="numpy")
def _betaln(a, b):
    if a != a or b != b:
        return nan
    if _is_pole(a):
        return _betaln_at_pole(a, b)
    if _is_pole(b):
        return _betaln_at_pole(b, a)
    return _betaln_regular(a, b)


@njit(error_model="numpy")
def _bessel_i(nu, x, scaled):
    """I_nu(|x|) for nu 0 or 1, times exp(-|x|) when scaled: the power series up to 20, the
    asymptotic series (whose smallest term is ~exp(-2|x|)) beyond."""
    a = abs(x)
    if a != a:
        return a
    if a <= 20.0:
        # the series sum_k q^k / (k! (k + nu)!), q = x^2 / 4, by Horner's rule from its far end
        # (each rounding damped by the terms before it); 25 + |x| terms: the last is < 1e-22
        q = 0.25 * a * a
        s = 1.0
        k = np.floor(25.0 + a)
        while k > 0.0:
            s = 1.0 + s * (q / (k * (k + nu)))
            k -= 1.0
        if nu != 0.0:
            s *= 0.5 * a
        return s * exp(-a) if scaled else s
    if a == inf:
        return 0.0 if scaled else inf
    mu = 4.0 * nu * nu
    t = 1.0
    s = 1.0
    for k in range(1, 60):
        t *= -(mu - (2.0 * k - 1.0) * (2.0 * k - 1.0)) / (8.0 * k * a)
        s += t
        if abs(t) < 1e-17 * s:
            break
    s /= sqrt(2.0 * pi * a)
    if scaled:
        return s
    e = exp(0.5 * a)  # e^a in two factors: finite up to I's own overflow
    return (e * s) * e


@njit(error_model="numpy")
def _i1(x):
    y = _bessel_i(1.0, x, False)
    return -y if x < 0.0 else y


@njit(error_model="numpy")
def _i1e(x):
    y = _bessel_i(1.0, x, True)
    return -y if x < 0.0 else y


@njit(error_model="numpy")
def _i1_d(x, y):
    """I1'(x) = I0(x) - I1(x) / x (1/2 at 0)."""
    if x == 0.0:
        return 0.5
    return _bessel_i(0.0, x, False) - y / x


@njit(error_model="numpy")
def _i0e_d(x, y):
    """(exp(-|x|) I0(x))' = I1e(x) - sign(x) I0e(x)."""
    s = 1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0)
    return _i1e(x) - s * y


@njit(error_model="numpy")
def _i1e_d(x, y):
    """(exp(-|x|) I1(x))' = I0e(x) - I1e(x) / x - sign(x) I1e(x) (1/2 at 0)."""
    if x == 0.0:
        return 0.5
    s = 1.0 if x > 0.0 else -1.0
    return _bessel_i(0.0, x, True) - y / x - s * y
