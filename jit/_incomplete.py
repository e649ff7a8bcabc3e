"""Regularized incomplete gamma and beta functions, with their derivatives in every argument.

P(a, x) = gamma(a, x) / Gamma(a), Q = 1 - P (scipy.special's ``gammainc`` / ``gammaincc``) and
I_x(a, b) = B(x; a, b) / B(a, b), 1 - I (``betainc`` / ``betaincc``), each as its value or its
logarithm (the log-cdf of the gamma, beta, t and discrete distributions). The derivatives in the
shape parameters have no closed form: they are the evaluation algorithm differentiated in
forward mode, the derivative carried along every term (the approach of Boik and Robison-Cox
for the beta function):

- P(a, x) for x <= max(1, a): its power series, e^L sum_n x^n / ((a+1)...(a+n)),
  L = a log x - x - log Gamma(a + 1), with each term's derivative in a; where that is above
  1/2 with a, x <= 1, Q directly as -expm1(a log x - log Gamma(a + 1)) less an alternating
  series (so that a small Q is not 1 - P).
- Q(a, x) otherwise: e^L' / K, L' = L + log a, K Legendre's continued fraction
  (x + 1 - a) - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / (x + 5 - a - ...)), evaluated by the
  three-term recurrence of its convergents A_n / B_n, whose derivatives in a obey the same
  recurrence differentiated (rescaled as they grow).
- I_x(a, b) for x <= (a + 1) / (a + b + 2): x^a (1 - x)^b / (a B(a, b) K), K the continued
  fraction 1 + d_1 / (1 + d_2 / (1 + ...)) with its derivatives in a and b; above that point
  the symmetry I_x(a, b) = 1 - I_{1-x}(b, a).

The other function of each pair is 1 - the computed one (-expm1 of its log), so a value that
is small is always the computed one, never a difference. The prefactors are computed in logs;
with large shapes (a >= 10; a, b >= 10) as a log1pmx (log(1 + t) - t) of the relative distance
to the mode plus Stirling corrections, so that they do not lose a times eps to cancellation.

Each iteration stops when the value and its derivatives have converged to rounding; within
``MAX_ITER`` iterations or not at all, the result is NaN (never a number that has not
converged). Arguments outside the domain give SciPy's values (NaN for invalid parameters),
the derivatives NaN at a shape of 0 or inf, where the function is a limit. The x-derivatives
(the densities) are closed-form and computed here too, for the rules' plain-array path.

Accuracy: tests/test_incomplete.py measures values against SciPy and shape derivatives
against mpmath; the bounds are in docs/special.md.
"""
from math import exp, expm1, inf, lgamma, log, log1p, nan

from numba import config

from ._cache import njit

if config.DISABLE_JIT:  # plain Python: NumPy's functions give IEEE results (no exception)
    from numpy import exp, expm1, log, log1p  # noqa: F811

MAX_ITER = 20000  # O(sqrt(shape)) are needed: enough for shapes to ~1e6
_TOL = 2.220446049250313e-16  # consecutive values agree to an ulp
_DTOL = 1e-15  # and their derivatives to a few (they carry the rounding of more operations)
_HALF_LOG_2PI = 0.91893853320467274178
_TINY = 1e-300


@njit(error_model="numpy")
def _log1pmx(t):
    """log(1 + t) - t, without the cancellation for small t."""
    if abs(t) > 0.5:
        return log1p(t) - t
    # -t^2/2 + t^3/3 - ...: 60 terms reach 0.5^60
    s = 0.0
    p = -t * t
    k = 2.0
    while k < 80.0:
        term = p / k
        s += term
        if abs(term) <= _TOL * abs(s):
            break
        p = -p * t
        k += 1.0
    return s


@njit(error_model="numpy")
def _stirling_corr(z):
    """log Gamma(z) - ((z - 1/2) log z - z + log(2 pi) / 2), for z >= 10."""
    w = 1.0 / (z * z)
    return (1.0 / z) * (0.083333333333333333333 + w * (-0.0027777777777777777778 + w * (
        0.00079365079365079365079 + w * (-0.00059523809523809523810 + w * (
            0.00084175084175084175084 + w * (-0.0019175269175269175269 + w * (
                0.0064102564102564102564 + w * -0.029550653594771241830)))))))


@njit(error_model="numpy")
def _log_minus_psi(z):
    """log z - digamma(z), for z >= 10 (its asymptotic series)."""
    w = 1.0 / (z * z)
    return 0.5 / z + w * (0.083333333333333333333 + w * (-0.0083333333333333333333 + w * (
        0.0039682539682539682540 + w * (-0.0041666666666666666667 + w * (
            0.0075757575757575757576 + w * (-0.021092796092796092796 + w * (
                0.083333333333333333333)))))))


@njit(error_model="numpy")
def _psi(z):
    """digamma(z) for z > 0: shifted to z >= 10, then the asymptotic series."""
    s = 0.0
    while z < 10.0:
        s += 1.0 / z
        z += 1.0
    return log(z) - _log_minus_psi(z) - s


@njit(error_model="numpy")
def _psi_shift(z, h):
    """digamma(z + h) - digamma(z) for z, h > 0, without the cancellation for small h: z
    shifted to >= 10 by sum_k h / ((z + k)(z + k + h)), then the difference of the asymptotic
    series."""
    s = 0.0
    while z < 10.0:
        s += h / (z * (z + h))
        z += 1.0
    return s + log1p(h / z) - (_log_minus_psi(z + h) - _log_minus_psi(z))


@njit(error_model="numpy")
def _lgamma_shift(z, h):
    """log Gamma(z + h) - log Gamma(z) for z >= 10, h > 0 (Stirling: nothing of the size of
    log Gamma(z) cancels)."""
    c = z + h
    return (z - 0.5) * log1p(h / z) + h * log(c) - h + _stirling_corr(c) - _stirling_corr(z)


@njit(error_model="numpy")
def _log_a_beta(a, b):
    """log(a B(a, b)) = log Gamma(a + 1) + log Gamma(b) - log Gamma(a + b), a, b > 0, without
    cancelling log a against log Gamma(a) for small a; with one argument >= 10, its log Gamma
    less that of the sum as one Stirling difference (both large: the caller's prefactor uses
    Stirling's form)."""
    if b >= 10.0 and b >= a:
        return lgamma(a + 1.0) - _lgamma_shift(b, a)
    if a >= 10.0:
        return log(a) + lgamma(b) - _lgamma_shift(a, b)
    return lgamma(a + 1.0) + lgamma(b) - lgamma(a + b)


# ---- incomplete gamma ------------------------------------------------------------------------


@njit(error_model="numpy")
def _gamma_prefactor(a, x):
    """L = a log x - x - log Gamma(a) and dL/da = log x - digamma(a)."""
    t = (x - a) / a
    if a >= 10.0 and abs(t) <= 0.5:  # near the mode: no cancellation of a log x against x
        lg = a * _log1pmx(t) + 0.5 * log(a) - _HALF_LOG_2PI - _stirling_corr(a)
        return lg, log1p(t) + _log_minus_psi(a)
    lx = log(x)
    return a * lx - x - lgamma(a), lx - _psi(a)


@njit(error_model="numpy")
def _gamma_series(a, x):
    """(log P, d log P / da, ok) by the power series."""
    lg, dlg = _gamma_prefactor(a, x)
    t = 1.0  # term n: x^n / ((a+1)...(a+n))
    u = 0.0  # its derivative in a
    s = 1.0
    su = 0.0
    ok = False
    for n in range(1, MAX_ITER):
        r = x / (a + n)
        u = (u - t / (a + n)) * r
        t = t * r
        s += t
        su += u
        if t <= _TOL * s and abs(u) <= _DTOL * abs(su):
            ok = True
            break
    # P = e^L s / a
    return lg + log(s) - log(a), dlg + su / s - 1.0 / a, ok


# zeta(2), ..., zeta(31): log Gamma(1 + a) = -euler a + sum_k (-1)^k zeta(k) a^k / k
_ZETA = (1.6449340668482264, 1.2020569031595942, 1.0823232337111381, 1.03692775514337,
         1.0173430619844492, 1.008349277381923, 1.0040773561979444, 1.0020083928260821,
         1.000994575127818, 1.0004941886041194, 1.000246086553308, 1.0001227133475785,
         1.0000612481350588, 1.000030588236307, 1.0000152822594086, 1.0000076371976379,
         1.000003817293265, 1.0000019082127165, 1.0000009539620338, 1.0000004769329869,
         1.0000002384505027, 1.000000119219926, 1.000000059608189, 1.0000000298035034,
         1.0000000149015549, 1.0000000074507118, 1.000000003725334, 1.0000000018626598,
         1.0000000009313275, 1.0000000004656628)
_EULER = 0.5772156649015329


@njit(error_model="numpy")
def _lgamma1p(a):
    """log Gamma(1 + a) for 0 <= a <= 1, without rounding 1 + a (which loses a's low digits
    for small a): its Taylor series about 1 below a = 1/4."""
    if a >= 0.25:
        return lgamma(1.0 + a)
    s = 0.0
    p = -a
    for k in range(len(_ZETA)):
        p = -p * a  # (-a)^(k + 2)
        s += _ZETA[k] * p / (k + 2)
    return s - _EULER * a


@njit(error_model="numpy")
def _gamma_q_small(a, x):
    """(log Q, d log Q / da, ok) for a <= 1, x <= 1, where Q is small when P is near 1:
    Q = -expm1(L) - e^L a T, L = a log x - log Gamma(a + 1),
    T = sum_{n>=1} (-1)^n x^n / (n! (a + n)) (from gamma(a, x) = sum_n (-1)^n x^(a+n) /
    (n! (a + n))), with nothing of the size of P cancelling."""
    lx = log(x)
    el = a * lx - _lgamma1p(a)
    dl = lx - _psi(a + 1.0)
    t = 0.0
    td = 0.0  # dT/da
    term = 1.0  # (-1)^n x^n / n!
    ok = False
    for n in range(1, MAX_ITER):
        term = -term * x / n
        c = term / (a + n)
        t += c
        td -= c / (a + n)
        if abs(c) <= _TOL * abs(t) and abs(c / (a + n)) <= _DTOL * abs(td):
            ok = True
            break
    e = exp(el)
    q = -expm1(el) - e * a * t
    dq = -e * dl * (1.0 + a * t) - e * (t + a * td)
    if not q > 0.0:
        ok = False
    return log(q), dq / q, ok


@njit(error_model="numpy")
def _gamma_fraction(a, x):
    """(log Q, d log Q / da, ok) by the continued fraction K: Q = e^L' / K."""
    lg, dlg = _gamma_prefactor(a, x)
    # convergents A_n / B_n of b_0 + a_1 / (b_1 + a_2 / (b_2 + ...)), with derivatives
    a0, a0d, b0, b0d = 1.0, 0.0, 0.0, 0.0  # A_{n-2}, A'_{n-2}, B_{n-2}, B'_{n-2}
    a1, a1d, b1, b1d = x + 1.0 - a, -1.0, 1.0, 0.0  # A_{n-1}, ...
    f = a1
    g = a1d / a1  # d log K / da
    ok = False
    for n in range(1, MAX_ITER):
        an = n * (a - n)
        and_ = float(n)
        bn = x + 2.0 * n + 1.0 - a
        a2 = bn * a1 + an * a0
        a2d = -a1 + bn * a1d + and_ * a0 + an * a0d
        b2 = bn * b1 + an * b0
        b2d = -b1 + bn * b1d + and_ * b0 + an * b0d
        if b2 == 0.0 or a2 == 0.0:
            break
        s = 1.0 / b2  # rescale: the ratios are unchanged
        a0, a0d, b0, b0d = a1 * s, a1d * s, b1 * s, b1d * s
        a1, a1d, b1, b1d = a2 * s, a2d * s, 1.0, b2d * s
        fn = a1
        gn = (a1d - fn * b1d) / fn
        if abs(fn - f) <= _TOL * abs(fn) and abs(gn - g) <= _DTOL * (abs(gn) + abs(dlg)):
            f, g = fn, gn
            ok = True
            break
        f, g = fn, gn
    if not f > 0.0:
        ok = False
    return lg - log(f), dlg - g, ok


@njit(error_model="numpy")
def _gamma_one(a, x, upper, logv):
    """(value, d/da, d/dx) of P(a, x), or Q with `upper`, or their logs with `logv`."""
    if a != a or x != x or a < 0.0 or x < 0.0 or (a == 0.0 and x == 0.0) or \
            (a == inf and x == inf):
        return nan, nan, nan
    if a == 0.0 or x == inf or a == inf or x == 0.0:
        p = 1.0 if (x == inf or (a == 0.0)) else 0.0
        v = 1.0 - p if upper else p
        dadv = nan if a == 0.0 or a == inf else 0.0
        if x == 0.0 and a > 0.0:  # the density at 0: inf, 1 or 0
            ddx = inf if a < 1.0 else (1.0 if a == 1.0 else 0.0)
        else:
            ddx = nan if a == 0.0 or a == inf else 0.0
        ddx = -ddx if upper else ddx
        if logv:
            return log(v), dadv / v, ddx / v
        return v, dadv, ddx
    lower_side = x <= 1.0 or x <= a
    if lower_side:
        lv, dl, ok = _gamma_series(a, x)
        if ok and lv > -0.6931471805599453 and a <= 1.0 and x <= 1.0:  # P > 1/2: Q directly
            lower_side = False
            lv, dl, ok = _gamma_q_small(a, x)
    else:
        lv, dl, ok = _gamma_fraction(a, x)
    if not ok:
        return nan, nan, nan
    lpdf = _gamma_prefactor(a, x)[0] - log(x)  # log of the density dP/dx
    return _finish(lv, dl, lpdf, lower_side != upper, logv, 1.0 if lower_side else -1.0)


@njit(error_model="numpy")
def _finish(lv, dl, lpdf, same, logv, sign):
    """Value and derivatives of the requested function from the computed one's log lv, its
    log-derivative dl and the log-density of the lower one: `same` when the requested one is
    the computed one; `sign` +1 when the computed one is the lower (its x-derivative is the
    density), -1 when it is the upper."""
    v = exp(lv)
    if same:
        if logv:
            return lv, dl, sign * exp(lpdf - lv)
        return v, v * dl, sign * exp(lpdf)
    w = -expm1(lv)  # 1 - v
    if logv:  # log(1 - v): log1p where v is small (w rounds to 1 there)
        lw = log1p(-v) if lv < -0.6931471805599453 else log(w)
        return lw, -v * dl / w, -sign * exp(lpdf) / w
    return w, -v * dl, -sign * exp(lpdf)


@njit(cache=True, error_model="numpy")
def incgamma(a, x, upper, logv, y, da, dx):
    """y = P(a, x) (Q with `upper`; logs with `logv`), da and dx its partials, elementwise
    over flat arrays of one size."""
    for i in range(y.size):
        y[i], da[i], dx[i] = _gamma_one(a[i], x[i], upper != 0, logv != 0)


SIG_INCGAMMA = ("void(float64[::1], float64[::1], int64, int64, float64[::1], float64[::1], "
                "float64[::1])")


# ---- incomplete beta -------------------------------------------------------------------------


@njit(error_model="numpy")
def _log_xy(x, y):
    """log x and log y for y = 1 - x, the one of them above 1/2 from the other's exact
    log1p (1 - x rounds for x < 1/2, and b log(1 - x) would carry b times its rounding)."""
    if x <= 0.5:
        return log(x), log1p(-x)
    return log1p(-y), log(y)


@njit(error_model="numpy")
def _beta_prefactor(a, b, x, y):
    """log(x^a y^b / (a B(a, b))) (y = 1 - x) and its derivatives in a and b."""
    c = a + b
    dev = x - a / c if x <= 0.5 else b / c - y  # x less the mode, from the exact one of x, y
    u = dev / (a / c)
    w = -dev / (b / c)
    if a >= 10.0 and b >= 10.0 and abs(u) <= 0.5 and abs(w) <= 0.5:  # near the mode
        lp = (a * _log1pmx(u) + b * _log1pmx(w) + 0.5 * (log(a) + log(b) - log(c))
              - _HALF_LOG_2PI - _stirling_corr(a) - _stirling_corr(b) + _stirling_corr(c))
        rc = _log_minus_psi(c)
        return (lp - log(a), log1p(u) + _log_minus_psi(a) - rc - 1.0 / a,
                log1p(w) + _log_minus_psi(b) - rc)
    lx, ly = _log_xy(x, y)
    return (a * lx + b * ly - _log_a_beta(a, b), lx + _psi_shift(a, b) - 1.0 / a,
            ly + _psi_shift(b, a))


@njit(error_model="numpy")
def _beta_fraction(a, b, x, y):
    """(log I_x(a, b), its derivatives in a and b, ok) by the continued fraction."""
    lp, dpa, dpb = _beta_prefactor(a, b, x, y)
    # convergents of 1 + d_1 / (1 + d_2 / (1 + ...)); derivatives in a (suffix a) and b (b)
    p0, p0a, p0b, q0, q0a, q0b = 1.0, 0.0, 0.0, 0.0, 0.0, 0.0
    p1, p1a, p1b, q1, q1a, q1b = 1.0, 0.0, 0.0, 1.0, 0.0, 0.0
    f, ga, gb = 1.0, 0.0, 0.0  # K, d log K / da, d log K / db
    ok = False
    for n in range(1, MAX_ITER):
        m = n // 2
        if n % 2 == 1:  # d_{2m+1} = -x (a+m)(a+b+m) / ((a+2m)(a+2m+1))
            num = (a + m) * (a + b + m)
            den = (a + 2.0 * m) * (a + 2.0 * m + 1.0)
            d = -x * num / den
            da = -x * (((a + b + m) + (a + m)) * den
                       - num * ((a + 2.0 * m + 1.0) + (a + 2.0 * m))) / (den * den)
            db = -x * (a + m) / den
        else:  # d_{2m} = x m (b-m) / ((a+2m-1)(a+2m))
            den = (a + 2.0 * m - 1.0) * (a + 2.0 * m)
            d = x * m * (b - m) / den
            da = -d * ((a + 2.0 * m) + (a + 2.0 * m - 1.0)) / den
            db = x * m / den
        p2 = p1 + d * p0
        p2a = p1a + da * p0 + d * p0a
        p2b = p1b + db * p0 + d * p0b
        q2 = q1 + d * q0
        q2a = q1a + da * q0 + d * q0a
        q2b = q1b + db * q0 + d * q0b
        if q2 == 0.0 or p2 == 0.0:
            break
        s = 1.0 / q2
        p0, p0a, p0b, q0, q0a, q0b = p1 * s, p1a * s, p1b * s, q1 * s, q1a * s, q1b * s
        p1, p1a, p1b, q1, q1a, q1b = p2 * s, p2a * s, p2b * s, 1.0, q2a * s, q2b * s
        fn = p1
        gan = (p1a - fn * q1a) / fn
        gbn = (p1b - fn * q1b) / fn
        if n > 2 and abs(fn - f) <= _TOL * abs(fn) and \
                abs(gan - ga) <= _DTOL * (abs(gan) + abs(dpa)) and \
                abs(gbn - gb) <= _DTOL * (abs(gbn) + abs(dpb)):
            f, ga, gb = fn, gan, gbn
            ok = True
            break
        f, ga, gb = fn, gan, gbn
    if not f > 0.0:
        ok = False
    # I = e^lp / K
    return lp - log(f), dpa - ga, dpb - gb, ok


@njit(error_model="numpy")
def _beta_one(a, b, x, upper, logv):
    """(value, d/da, d/db, d/dx) of I_x(a, b), or 1 - I with `upper`, or their logs."""
    if a != a or b != b or x != x or a < 0.0 or b < 0.0 or x < 0.0 or x > 1.0 or \
            (a == 0.0 and b == 0.0) or (a == inf and b == inf):
        return nan, nan, nan, nan
    if a == 0.0 or b == 0.0 or a == inf or b == inf or x == 0.0 or x == 1.0:
        if x == 0.0:
            p = 0.0
        elif x == 1.0:
            p = 1.0
        else:
            p = 1.0 if (a == 0.0 or b == inf) else 0.0
        v = 1.0 - p if upper else p
        edge = a == 0.0 or b == 0.0 or a == inf or b == inf
        dab = nan if edge else 0.0
        if edge:
            ddx = nan
        elif x == 0.0:
            ddx = inf if a < 1.0 else (b if a == 1.0 else 0.0)
        else:
            ddx = inf if b < 1.0 else (a if b == 1.0 else 0.0)
        ddx = -ddx if upper else ddx
        if logv:
            return log(v), dab / v, dab / v, ddx / v
        return v, dab, dab, ddx
    y = 1.0 - x
    swap = x > (a + 1.0) / (a + b + 2.0)
    if swap:
        lv, dlb, dla, ok = _beta_fraction(b, a, y, x)
    else:
        lv, dla, dlb, ok = _beta_fraction(a, b, x, y)
    if not ok:
        return nan, nan, nan, nan
    lx, ly = _log_xy(x, y)
    lpdf = _beta_prefactor(a, b, x, y)[0] + log(a) - lx - ly  # log of dI/dx
    v, dva, dx = _finish(lv, dla, lpdf, swap == upper, logv, -1.0 if swap else 1.0)
    dvb = _finish(lv, dlb, lpdf, swap == upper, logv, 1.0)[1]
    return v, dva, dvb, dx


@njit(cache=True, error_model="numpy")
def incbeta(a, b, x, upper, logv, y, da, db, dx):
    """y = I_x(a, b) (1 - I with `upper`; logs with `logv`), da, db, dx its partials,
    elementwise over flat arrays of one size."""
    for i in range(y.size):
        y[i], da[i], db[i], dx[i] = _beta_one(a[i], b[i], x[i], upper != 0, logv != 0)


SIG_INCBETA = ("void(float64[::1], float64[::1], float64[::1], int64, int64, float64[::1], "
               "float64[::1], float64[::1], float64[::1])")
