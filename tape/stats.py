"""Log-densities of common distributions on tensors, with scipy.stats' signatures.

``scipy.stats.norm.logpdf(x, loc, scale)`` cannot take tensors: SciPy's distribution methods
convert their arguments with ``np.asarray`` first (which would drop the gradient, so tapejit
refuses it). ``tape.stats.norm.logpdf(x, loc, scale)`` is the same call, built from
``tape.numpy`` operations and the scipy.special rows (``gammaln``, ``betaln``, ``xlogy``,
``ndtr``, ``log_ndtr``, ...), so it differentiates in every argument, in every mode, and works
on NumPy arrays too. Parameterizations, keywords and the values outside the support (``-inf``
log-density, ``nan`` for invalid parameters) are SciPy's.

Distributions: ``norm``, ``t``, ``gamma``, ``beta``, ``expon``, ``cauchy``, ``lognorm``
(``logpdf``, ``pdf``; ``logcdf``, ``cdf`` for ``norm``, ``expon``, ``cauchy``, ``lognorm``);
``poisson``, ``binom``, ``nbinom`` (``logpmf``, ``pmf``); ``multivariate_normal``
(``logpdf``, ``pdf``). The cumulative functions of t, gamma, beta and the discrete ones are the
regularized incomplete beta and gamma functions, whose derivatives in their shape parameters
are not rows of the table yet.
"""
from __future__ import annotations

import math

import numpy as np

from jit.table import OPCODE, TABLE

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


def _values(x):
    return np.asarray(x._v if type(x) is Tensor else x)


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


class _Continuous:
    def pdf(self, x, *args, **kwargs):
        return np.exp(self.logpdf(x, *args, **kwargs))

    def cdf(self, x, *args, **kwargs):
        return np.exp(self.logcdf(x, *args, **kwargs))


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


class _T(_Continuous):
    def logpdf(self, x, df, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        ok = ok & (_values(df) > 0.0)
        half = 0.5 * (df + 1.0)
        value = (gammaln(half) - gammaln(0.5 * df) - 0.5 * np.log(df * math.pi)
                 - half * np.log1p(z * z / df) - np.log(scale))
        return _finish(value, ok, False)


class _Gamma(_Continuous):
    def logpdf(self, x, a, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        ok = ok & (_values(a) > 0.0)
        zv = _values(z)
        outside = zv < 0.0
        zs = _where(outside, 1.0, z) if outside.any() else z
        value = xlogy(a - 1.0, zs) - zs - gammaln(a) - np.log(scale)
        return _finish(value, ok, outside)


class _Beta(_Continuous):
    def logpdf(self, x, a, b, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        ok = ok & (_values(a) > 0.0) & (_values(b) > 0.0)
        zv = _values(z)
        outside = (zv < 0.0) | (zv > 1.0)
        zs = _where(outside, 0.5, z) if outside.any() else z
        value = xlog1py(b - 1.0, -zs) + xlogy(a - 1.0, zs) - betaln(a, b) - np.log(scale)
        return _finish(value, ok, outside)


class _Expon(_Continuous):
    def logpdf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        outside = _values(z) < 0.0
        return _finish(-z - np.log(scale), ok, outside)

    def logcdf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        outside = _values(z) <= 0.0
        zs = _where(outside, 1.0, z) if outside.any() else z
        return _finish(np.log(-np.expm1(-zs)), ok, outside)

    def cdf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        outside = _values(z) <= 0.0
        zs = _where(outside, 1.0, z) if outside.any() else z
        return _finish(-np.expm1(-zs), ok, outside, 0.0)


class _Cauchy(_Continuous):
    def logpdf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        return _finish(-np.log(math.pi * scale * (1.0 + z * z)), ok, False)

    def cdf(self, x, loc=0.0, scale=1.0):
        z, ok = _standardize(x, loc, scale)
        return _finish(0.5 + np.arctan(z) / math.pi, ok, False)

    def logcdf(self, x, loc=0.0, scale=1.0):
        return np.log(self.cdf(x, loc, scale))


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


class _Discrete:
    def pmf(self, k, *args, **kwargs):
        return np.exp(self.logpmf(k, *args, **kwargs))

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


class _NBinom(_Discrete):
    def logpmf(self, k, n, p, loc=0):
        kk, outside = self._support(k, loc)
        pv = _values(p)
        ok = (pv > 0.0) & (pv <= 1.0) & (_values(n) > 0.0)
        value = (gammaln(n + kk) - gammaln(kk + 1.0) - gammaln(n) + xlogy(n, p)
                 + xlog1py(kk, -p))
        return _finish(value, ok, outside)


class _MultivariateNormal:
    def logpdf(self, x, mean=None, cov=1.0):
        """x: (..., d) points (or a (d,) one); mean (d,), cov (d, d) or a scalar times I."""
        d = np.shape(_values(x))[-1] if np.ndim(_values(x)) else 1
        dev = x if mean is None else x - mean
        if np.ndim(_values(cov)) < 2:
            cov = cov * np.eye(d)
        sol = np.linalg.solve(cov, np.swapaxes(np.reshape(dev, (-1, d)), -1, -2))
        maha = np.sum(np.reshape(dev, (-1, d)) * np.swapaxes(sol, -1, -2), axis=-1)
        _, logdet = np.linalg.slogdet(cov)
        out = -0.5 * (d * math.log(2.0 * math.pi) + logdet + maha)
        shape = np.shape(_values(dev))[:-1]
        return np.reshape(out, shape)

    def pdf(self, x, mean=None, cov=1.0):
        return np.exp(self.logpdf(x, mean, cov))


norm, t, gamma, beta = _Norm(), _T(), _Gamma(), _Beta()
expon, cauchy, lognorm = _Expon(), _Cauchy(), _Lognorm()
poisson, binom, nbinom = _Poisson(), _Binom(), _NBinom()
multivariate_normal = _MultivariateNormal()
