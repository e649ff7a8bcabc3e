"""Log-densities of common distributions on tensors, with scipy.stats' signatures.

``scipy.stats.norm.logpdf(x, loc, scale)`` cannot take tensors: SciPy's distribution methods
convert their arguments with ``np.asarray`` first (which would drop the gradient, so tapejit
refuses it). ``tape.stats.norm.logpdf(x, loc, scale)`` is the same call, built from
``tape.numpy`` operations and the scipy.special rows (``gammaln``, ``betaln``, ``xlogy``,
``ndtr``, ``log_ndtr``, ...), so it differentiates in every argument, in every mode, and works
on NumPy arrays too. Parameterizations, keywords and the values outside the support (``-inf``
log-density, ``nan`` for invalid parameters) are SciPy's.

Distributions: ``norm``, ``t``, ``gamma``, ``beta``, ``expon``, ``cauchy``, ``lognorm``
(``logpdf``, ``pdf``, ``logcdf``, ``cdf``, ``logsf``, ``sf``); ``poisson``, ``binom``,
``nbinom`` (``logpmf``, ``pmf``, ``logcdf``, ``cdf``, ``logsf``, ``sf``);
``multivariate_normal`` (``logpdf``, ``pdf``). The cumulative functions of t, gamma, beta and
the discrete distributions are the regularized incomplete beta and gamma functions
(``tape/_incomplete.py``), differentiable in x and every continuous parameter (t's df, gamma's
a, beta's a and b, poisson's mu, binom's p, nbinom's n and p; second derivatives in a shape
parameter raise an error). The log kinds come from the kernels' logarithms, accurate where the
probability underflows. Counts (k, binom's n) are integer data: k is floored, as SciPy's
cumulative functions do, and a tensor that requires grad there is a ``TypeError``.
"""
from __future__ import annotations

import math

import numpy as np

from jit.table import OPCODE, TABLE

from ._incomplete import incomplete_beta, incomplete_gamma
from .core import record as _record
from .core.tensor import Tensor
from .escapes import record

__all__ = ["norm", "t", "gamma", "beta", "expon", "cauchy", "lognorm", "poisson", "binom",
           "nbinom", "multivariate_normal"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _arg(x):
    return x if type(x) is Tensor else _record.plain(_record.constant(x))


def _special(name):
    """The scipy.special row `name` (an escape of the main sweeps: tape/escapes/special.py) as
    a function of tensors or arrays."""
    if len(TABLE[OPCODE[name]].d) == 1:
        return lambda x: record(name, _arg(x))
    return lambda a, b: record(name, _arg(a), _arg(b))


gammaln, betaln, xlogy, xlog1py = (_special(n) for n in ("gammaln", "betaln", "xlogy", "xlog1py"))
ndtr, log_ndtr = _special("ndtr"), _special("log_ndtr")

# the cumulative functions' kinds: which tail, and whether its logarithm
_KINDS = {"cdf": (False, False), "logcdf": (False, True), "sf": (True, False),
          "logsf": (True, True)}
# a kind's value below and above the support
_BELOW = {"cdf": 0.0, "logcdf": -np.inf, "sf": 1.0, "logsf": 0.0}
_ABOVE = {"cdf": 1.0, "logcdf": 0.0, "sf": 0.0, "logsf": -np.inf}


def _values(x):
    """x for a decision (a mask, a support check): a tensor stays one, so that its comparisons
    are guards (a compiled replay whose values decide differently records again instead of
    reusing the old masks); anything else as a NumPy array."""
    return x if type(x) is Tensor else np.asarray(x)


def _shape(x):
    return np.shape(x._v if type(x) is Tensor else x)


def _where(cond, a, b):
    """where(cond, a, b) for a constant mask; nan where a parameter is invalid (SciPy's)."""
    return np.where(cond, a, b)


def _standardize(x, loc, scale):
    """(x - loc) / scale, and the mask of valid scales (nan where scale <= 0, as SciPy)."""
    return (x - loc) / scale, _values(scale) > 0.0


def _finish(value, ok, outside, out_value=-np.inf):
    """value where parameters are valid and x in the support; out_value outside the support
    and nan for invalid parameters."""
    ok = np.asarray(ok)
    outside = np.asarray(outside)
    if outside.any():
        value = _where(outside, out_value, value)
    if not ok.all():
        value = _where(ok, value, np.nan)
    return value


def _cumulative(kind, value, ok, below=False, above=False):
    """A cdf / logcdf / sf / logsf: `value` on the support, SciPy's values below and above it
    (0 / -inf / 1 / 0 and 1 / 0 / 0 / -inf), nan where the parameters are invalid."""
    below, above = np.asarray(below), np.asarray(above)
    if above.any():
        value = _where(above, _ABOVE[kind], value)
    return _finish(value, ok, below, _BELOW[kind])


def _safe(x, bad, fill):
    """x with `fill` where `bad` (a point off the support, whose value is replaced: a finite
    stand-in keeps NaN out of the gradient of the others)."""
    bad = np.asarray(bad)
    return _where(bad, fill, x) if bad.any() else x


def _integer_data(name, k):
    """k (a count, or binom's n) as plain data: it has no derivative."""
    if type(k) is Tensor:
        if k.requires_grad:
            raise TypeError(f"tape.stats: {name} is integer data and has no derivative; pass "
                            f"it as a constant ({name}.detach())")
        k = k._v
    return np.asarray(k, dtype=np.float64)


def _tail_pair(kind, lower, upper):
    """The kind from the function `lower` (the cdf side) or `upper` (the sf side), each
    called with log=True/False."""
    up, log = _KINDS[kind]
    return (upper if up else lower)(log)


class _Continuous:
    def pdf(self, x, *args, **kwargs):
        return np.exp(self.logpdf(x, *args, **kwargs))

    def cdf(self, x, *args, **kwargs):
        return np.exp(self.logcdf(x, *args, **kwargs))

    def sf(self, x, *args, **kwargs):
        return np.exp(self.logsf(x, *args, **kwargs))


class _Norm(_Continuous):
    def logpdf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        return _finish(-0.5 * (z * z) - np.log(scale) - _LOG_SQRT_2PI, ok, False)

    def logcdf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        return _finish(log_ndtr(z), ok, False)

    def cdf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        return _finish(ndtr(z), ok, False)

    def logsf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        return _finish(log_ndtr(-z), ok, False)

    def sf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        return _finish(ndtr(-z), ok, False)


class _T(_Continuous):
    def logpdf(self, x, df, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        ok = ok & (_values(df) > 0.0)
        half = 0.5 * (df + 1.0)
        value = (gammaln(half) - gammaln(0.5 * df) - 0.5 * np.log(df * math.pi)
                 - half * np.log1p(z * z / df) - np.log(scale))
        return _finish(value, ok, False)

    def _cumulative(self, kind, x, df, loc, scale):
        """The cdf's tail below -|z|: I_v(df/2, 1/2) / 2 with v = df / (df + z^2), or
        1 - I_w(1/2, df/2) / 2 with w = z^2 / (df + z^2) where v > 1/2 (each argument
        computed directly, never as 1 - the other); df = inf is the normal distribution."""

        z, ok = _standardize(x, loc, scale)
        dfv, zv = _values(df), _values(z)
        ok = ok & (dfv > 0.0)
        normal = dfv == np.inf
        inf = (zv == np.inf) | (zv == -np.inf)
        zs = _safe(z, inf, 0.0)
        dfs = _safe(df, normal | ~ok, 1.0)
        log = _KINDS[kind][1]
        z2 = zs * zs
        v, w = dfs / (dfs + z2), z2 / (dfs + z2)
        near = _values(v) > 0.5
        # where z^2 is 0 (z = 0, or |z| < 1e-154) each tail is |z|-shaped (dI/dw infinite, dw/dz
        # zero): the centre's series stands in, and both branches see a finite stand-in point
        center = (_values(z2) == 0.0) & ~inf
        a, b = 0.5 * dfs, 0.5
        by_v = incomplete_beta(a, b, _safe(v, near | center, 0.5), log=log)
        by_w = incomplete_beta(b, a, _safe(w, ~near | center, 0.5), upper=True, log=log)
        tail = _where(near, by_w, by_v)  # (its log with log: add log(1/2))
        if log:
            small = tail - math.log(2.0)
            big = np.log1p(-0.5 * np.exp(tail))
        else:
            small = 0.5 * tail
            big = 1.0 - small
        left = (zv < 0.0) != _KINDS[kind][0]  # the kind's value is the small tail
        value = _where(left, small, big)
        if center.any():
            value = _where(center, self._at_center(kind, zs, dfs), value)
        if normal.any():
            value = _where(normal, getattr(norm, kind)(zs), value)
        return _cumulative(kind, value, ok, inf & (zv < 0.0), inf & (zv > 0.0))

    @staticmethod
    def _at_center(kind, z, df):
        """The kind's value where z^2 underflows to 0, from the cdf's series 1/2 + p0 z -
        p0 (df + 1) z^3 / (6 df) + O(z^5) (p0 the density at 0): exact there with its
        derivatives through the fourth, in z and df, where the tails' own are inf * 0."""
        p0 = np.exp(gammaln(0.5 * (df + 1.0)) - gammaln(0.5 * df) - 0.5 * np.log(df * math.pi))
        step = p0 * z * (1.0 - (df + 1.0) / (6.0 * df) * (z * z))
        upper, log = _KINDS[kind]
        if upper:
            step = -step
        return np.log1p(2.0 * step) - math.log(2.0) if log else 0.5 + step

    def cdf(self, x, df, loc=0.0, scale=1.0):
        return self._cumulative("cdf", x, df, loc, scale)

    def logcdf(self, x, df, loc=0.0, scale=1.0):
        return self._cumulative("logcdf", x, df, loc, scale)

    def sf(self, x, df, loc=0.0, scale=1.0):
        return self._cumulative("sf", x, df, loc, scale)

    def logsf(self, x, df, loc=0.0, scale=1.0):
        return self._cumulative("logsf", x, df, loc, scale)


class _Gamma(_Continuous):
    def logpdf(self, x, a, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        ok = ok & (_values(a) > 0.0)
        zv = _values(z)
        outside = zv < 0.0
        zs = _where(outside, 1.0, z) if outside.any() else z
        value = xlogy(a - 1.0, zs) - zs - gammaln(a) - np.log(scale)
        return _finish(value, ok, outside)

    def _cumulative(self, kind, x, a, loc, scale):
        """P(a, z) and Q(a, z) (their logs for logcdf, logsf)."""

        z, ok = _standardize(x, loc, scale)
        ok = ok & (_values(a) > 0.0)
        below = _values(z) <= 0.0
        zs, as_ = _safe(z, below, 1.0), _safe(a, ~ok, 1.0)
        value = incomplete_gamma(as_, zs, *_KINDS[kind])
        return _cumulative(kind, value, ok, below)

    def cdf(self, x, a, loc=0.0, scale=1.0):
        return self._cumulative("cdf", x, a, loc, scale)

    def logcdf(self, x, a, loc=0.0, scale=1.0):
        return self._cumulative("logcdf", x, a, loc, scale)

    def sf(self, x, a, loc=0.0, scale=1.0):
        return self._cumulative("sf", x, a, loc, scale)

    def logsf(self, x, a, loc=0.0, scale=1.0):
        return self._cumulative("logsf", x, a, loc, scale)


class _Beta(_Continuous):
    def logpdf(self, x, a, b, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        ok = ok & (_values(a) > 0.0) & (_values(b) > 0.0)
        zv = _values(z)
        outside = (zv < 0.0) | (zv > 1.0)
        zs = _where(outside, 0.5, z) if outside.any() else z
        value = xlog1py(b - 1.0, -zs) + xlogy(a - 1.0, zs) - betaln(a, b) - np.log(scale)
        return _finish(value, ok, outside)

    def _cumulative(self, kind, x, a, b, loc, scale):
        """I_z(a, b) and 1 - I (their logs for logcdf, logsf)."""

        z, ok = _standardize(x, loc, scale)
        ok = ok & (_values(a) > 0.0) & (_values(b) > 0.0)
        zv = _values(z)
        below, above = zv <= 0.0, zv >= 1.0
        zs = _safe(z, below | above, 0.5)
        value = incomplete_beta(_safe(a, ~ok, 1.0), _safe(b, ~ok, 1.0), zs, *_KINDS[kind])
        return _cumulative(kind, value, ok, below, above)

    def cdf(self, x, a, b, loc=0.0, scale=1.0):
        return self._cumulative("cdf", x, a, b, loc, scale)

    def logcdf(self, x, a, b, loc=0.0, scale=1.0):
        return self._cumulative("logcdf", x, a, b, loc, scale)

    def sf(self, x, a, b, loc=0.0, scale=1.0):
        return self._cumulative("sf", x, a, b, loc, scale)

    def logsf(self, x, a, b, loc=0.0, scale=1.0):
        return self._cumulative("logsf", x, a, b, loc, scale)


class _Expon(_Continuous):
    def logpdf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        outside = _values(z) < 0.0
        return _finish(-z - np.log(scale), ok, outside)

    def logcdf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        outside = _values(z) <= 0.0
        zs = _where(outside, 1.0, z) if outside.any() else z
        # log(1 - e^-z): log1p where e^-z is small (1 - e^-z rounds to 1 there)
        far = _values(zs) > math.log(2.0)
        value = _where(far, np.log1p(-np.exp(-_safe(zs, ~far, 1.0))),
                       np.log(-np.expm1(-_safe(zs, far, 0.5))))
        return _finish(value, ok, outside)

    def cdf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        outside = _values(z) <= 0.0
        zs = _where(outside, 1.0, z) if outside.any() else z
        return _finish(-np.expm1(-zs), ok, outside, 0.0)

    def logsf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        outside = _values(z) <= 0.0
        return _finish(-_safe(z, outside, 1.0), ok, outside, 0.0)

    def sf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        outside = _values(z) <= 0.0
        return _finish(np.exp(-_safe(z, outside, 1.0)), ok, outside, 1.0)


class _Cauchy(_Continuous):
    def logpdf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        return _finish(-np.log(math.pi * scale * (1.0 + z * z)), ok, False)

    def cdf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)  # (arctan2: no 1/2 - 1/2 in the lower tail)
        return _finish(np.arctan2(1.0, -z) / math.pi, ok, False)

    def logcdf(self, x, loc=0.0, scale=1.0):
        return np.log(self.cdf(x, loc, scale))

    def sf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        return _finish(np.arctan2(1.0, z) / math.pi, ok, False)

    def logsf(self, x, loc=0.0, scale=1.0):
        return np.log(self.sf(x, loc, scale))


class _Lognorm(_Continuous):
    def _parts(self, x, s, loc, scale):
        z, ok = _standardize(x, loc, scale)
        ok = ok & (_values(s) > 0.0)
        outside = _values(z) <= 0.0
        zs = _where(outside, 1.0, z) if outside.any() else z
        return np.log(zs), ok, outside

    def logpdf(self, x, s, loc=0.0, scale=1.0):
        lz, ok, outside = self._parts(x, s, loc, scale)
        value = -0.5 * (lz / s) ** 2 - lz - np.log(s) - _LOG_SQRT_2PI - np.log(scale)
        return _finish(value, ok, outside)

    def logcdf(self, x, s, loc=0.0, scale=1.0):
        lz, ok, outside = self._parts(x, s, loc, scale)
        return _finish(log_ndtr(lz / s), ok, outside)

    def cdf(self, x, s, loc=0.0, scale=1.0):
        lz, ok, outside = self._parts(x, s, loc, scale)
        return _finish(ndtr(lz / s), ok, outside, 0.0)

    def logsf(self, x, s, loc=0.0, scale=1.0):
        lz, ok, outside = self._parts(x, s, loc, scale)
        return _finish(log_ndtr(-lz / s), ok, outside, 0.0)

    def sf(self, x, s, loc=0.0, scale=1.0):
        lz, ok, outside = self._parts(x, s, loc, scale)
        return _finish(ndtr(-lz / s), ok, outside, 1.0)


class _Discrete:
    def pmf(self, k, *args, **kwargs):
        return np.exp(self.logpmf(k, *args, **kwargs))

    def cdf(self, k, *args, **kwargs):
        return self._cumulative("cdf", k, *args, **kwargs)

    def logcdf(self, k, *args, **kwargs):
        return self._cumulative("logcdf", k, *args, **kwargs)

    def sf(self, k, *args, **kwargs):
        return self._cumulative("sf", k, *args, **kwargs)

    def logsf(self, k, *args, **kwargs):
        return self._cumulative("logsf", k, *args, **kwargs)

    @staticmethod
    def _count(k, loc):
        """floor(k - loc) (SciPy's cumulative functions floor k) as data, and where it is
        below the support (negative)."""
        kk = np.floor(_integer_data("k", k) - _integer_data("loc", loc))
        return kk, kk < 0.0

    @staticmethod
    def _support(k, loc):
        """k - loc, and the mask of points off the support (negative or not an integer)."""
        kk = k - loc
        kv = _values(kk)
        outside = (kv < 0.0) | (kv != np.floor(kv))
        return (_where(outside, 0.0, kk) if outside.any() else kk), outside


class _Poisson(_Discrete):
    def logpmf(self, k, mu, loc=0):
        kk, outside = self._support(k, loc)
        ok = _values(mu) >= 0.0
        return _finish(xlogy(kk, mu) - gammaln(kk + 1.0) - mu, ok, outside)

    def _cumulative(self, kind, k, mu, loc=0):
        """P(X <= k) = Q(k + 1, mu), P(X > k) = P(k + 1, mu)."""

        kk, below = self._count(k, loc)
        ok = _values(mu) >= 0.0
        up, log = _KINDS[kind]
        value = incomplete_gamma(np.where(below, 1.0, kk + 1.0), _safe(mu, ~ok, 1.0),
                                 not up, log)
        return _cumulative(kind, value, ok, below)


class _Binom(_Discrete):
    def logpmf(self, k, n, p, loc=0):
        kk, outside = self._support(k, loc)
        pv, nv = _values(p), _values(n)
        ok = (pv >= 0.0) & (pv <= 1.0) & (nv >= 0.0) & (nv == np.floor(nv))
        outside = outside | (_values(kk) > nv)
        nk = _where(outside, 0.0, n - kk) if np.asarray(outside).any() else n - kk
        value = (gammaln(n + 1.0) - gammaln(kk + 1.0) - gammaln(nk + 1.0)
                 + xlogy(kk, p) + xlog1py(nk, -p))
        return _finish(value, ok, outside)

    def _cumulative(self, kind, k, n, p, loc=0):
        """P(X <= k) = 1 - I_p(k + 1, n - k), P(X > k) = I_p(k + 1, n - k) (k < n)."""

        kk, below = self._count(k, loc)
        nv, pv = _integer_data("n", n), _values(p)
        ok = (pv >= 0.0) & (pv <= 1.0) & (nv >= 0.0) & (nv == np.floor(nv))
        above = kk >= nv
        inside = ~(below | above)
        up, log = _KINDS[kind]
        value = incomplete_beta(np.where(inside, kk + 1.0, 1.0),
                                np.where(inside, nv - kk, 1.0), _safe(p, ~ok, 0.5), not up, log)
        return _cumulative(kind, value, ok, below, above)


class _NBinom(_Discrete):
    def logpmf(self, k, n, p, loc=0):
        kk, outside = self._support(k, loc)
        pv = _values(p)
        ok = (pv > 0.0) & (pv <= 1.0) & (_values(n) > 0.0)
        value = (gammaln(n + kk) - gammaln(kk + 1.0) - gammaln(n) + xlogy(n, p)
                 + xlog1py(kk, -p))
        return _finish(value, ok, outside)

    def _cumulative(self, kind, k, n, p, loc=0):
        """P(X <= k) = I_p(n, k + 1), P(X > k) = 1 - I_p(n, k + 1)."""

        kk, below = self._count(k, loc)
        pv = _values(p)
        ok = (pv > 0.0) & (pv <= 1.0) & (_values(n) > 0.0)
        value = incomplete_beta(_safe(n, ~ok, 1.0), np.where(below, 1.0, kk + 1.0),
                                _safe(p, ~ok, 0.5), *_KINDS[kind])
        return _cumulative(kind, value, ok, below)


class _MultivariateNormal:
    def logpdf(self, x, mean=None, cov=1.0):
        """x: (..., d) points (or a (d,) one); mean (d,), cov (d, d) or a scalar times I."""
        d = _shape(x)[-1] if len(_shape(x)) else 1
        dev = x if mean is None else x - mean
        if len(_shape(cov)) < 2:
            cov = cov * np.eye(d)
        sol = np.linalg.solve(cov, np.swapaxes(np.reshape(dev, (-1, d)), -1, -2))
        maha = np.sum(np.reshape(dev, (-1, d)) * np.swapaxes(sol, -1, -2), axis=-1)
        _, logdet = np.linalg.slogdet(cov)
        out = -0.5 * (d * math.log(2.0 * math.pi) + logdet + maha)
        shape = _shape(dev)[:-1]
        return np.reshape(out, shape)

    def pdf(self, x, mean=None, cov=1.0):
        return np.exp(self.logpdf(x, mean, cov))

    def cdf(self, x, mean=None, cov=1.0, **kwargs):
        raise NotImplementedError(
            "tape.stats.multivariate_normal.cdf is not provided: SciPy estimates it by randomized "
            "quasi-Monte Carlo integration (Genz's method), an estimate with no exact derivative. "
            "In one dimension use tape.stats.norm.cdf; for a bivariate probability, write its "
            "one-dimensional integral with tape.numpy (e.g. np.trapezoid over a grid) and "
            "differentiate that.")

    logcdf = cdf


norm, t, gamma, beta = _Norm(), _T(), _Gamma(), _Beta()
expon, cauchy, lognorm = _Expon(), _Cauchy(), _Lognorm()
poisson, binom, nbinom = _Poisson(), _Binom(), _NBinom()
multivariate_normal = _MultivariateNormal()
