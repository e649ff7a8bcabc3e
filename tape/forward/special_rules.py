"""The special-function rows' derivative helpers as tensor operations (higher order).

The table's partials of the scipy.special rows call scalar helpers of ``jit/_special.py``
(``_digamma``, ``_erf_d``, ...). A differentiable backward (``create_graph``) and forward-mode
dual numbers evaluate those formulas on tensors: each helper here is the same function written
with the table's rows and tape.numpy operations, so that its own derivative is exact. Branches
become ``where`` with safe operands in the branch not taken (its zero adjoints stay zeros).
"""
from __future__ import annotations

import math

import numpy as np

from ..core.tensor import plain
from ..core.values import constant
from ..escapes import record
from ..core.tensor import Tensor

_SQRT_PI = math.sqrt(math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _t(x):
    return x if type(x) is Tensor else plain(constant(x))


def escape_record(name, a, b=None):
    """Record a special row (an escape of the main sweeps: tape/escapes/special.py)."""
    return record(name, a, b)


def _row(name):
    return lambda x: escape_record(name, _t(x))


def _values(x):
    return np.asarray(x._v if type(x) is Tensor else x)


def _split(mask, x, safe_true, safe_false):
    """x where the mask holds (safe_false elsewhere) and x where it does not (safe_true)."""
    return np.where(mask, x, safe_false), np.where(mask, safe_true, x)


digamma, expit, erfcx, i0, i0e, i1, i1e = (_row(n) for n in
                                           ("digamma", "expit", "erfcx", "i0", "i0e", "i1", "i1e"))


def polygamma(n, x):
    return escape_record("polygamma", n, _t(x))


def erf_d(x):
    return (2.0 / _SQRT_PI) * np.exp(-(x * x))


def npdf(x):
    return _INV_SQRT_2PI * np.exp(-0.5 * (x * x))


def erfcx_d(x, y):
    return 2.0 * x * y - 2.0 / _SQRT_PI


def log_ndtr_d(x, y):
    # npdf / ndtr above -1; sqrt(2 / pi) / erfcx(-x / sqrt(2)) below (no underflow)
    upper = _values(x) > -1.0
    if upper.all():
        return np.exp(-0.5 * (x * x) - y) * _INV_SQRT_2PI
    if not upper.any():
        return (2.0 * _INV_SQRT_2PI) / erfcx(-x / math.sqrt(2.0))
    xa, xb = _split(upper, x, 0.0, -2.0)
    ya = np.where(upper, y, math.log(0.5))
    return np.where(upper, np.exp(-0.5 * (xa * xa) - ya) * _INV_SQRT_2PI,
                    (2.0 * _INV_SQRT_2PI) / erfcx(-xb / math.sqrt(2.0)))


def ndtri_d(y):
    return math.sqrt(2.0 * math.pi) * np.exp(0.5 * (y * y))


def erfinv_d(y):
    return (0.5 * _SQRT_PI) * np.exp(y * y)


def expit_d(x):
    return expit(x) * expit(-x)


def _at_zero(x, value, fn):
    """fn(x) with x != 0, and `value` (a constant) where x == 0."""
    zero = _values(x) == 0.0
    if not zero.any():
        return fn(x, None)
    xs = np.where(zero, 1.0, x)
    return np.where(zero, value, fn(xs, zero))


def i1_d(x, y):
    return _at_zero(x, 0.5, lambda xs, z: i0(xs) - (y if z is None else np.where(z, 0.0, y)) / xs)


def i0e_d(x, y):
    return i1e(x) - np.sign(_values(x)) * y


def i1e_d(x, y):
    def fn(xs, z):
        ys = y if z is None else np.where(z, 0.0, y)
        return i0e(xs) - ys / xs - np.sign(_values(xs)) * ys

    return _at_zero(x, 0.5, fn)


def entr_d(x):
    return -np.log(x) - 1.0


def entropy_dx(a, b, kl):
    return np.log(a / b) + (1.0 - kl)


def entropy_dy(a, b, kl):
    return kl - a / b


def digamma_diff(a, c):
    return digamma(a) - digamma(a + c)


def huber_ddelta(delta, r):
    inside = np.abs(_values(r)) <= _values(delta)
    return np.where(inside, 0.0, np.abs(r) - delta)


def huber_dr(delta, r):
    inside = np.abs(_values(r)) <= _values(delta)
    return np.where(inside, r, delta * np.sign(_values(r)))


def pseudo_huber_ddelta(delta, r):
    t = r / delta
    s = np.sqrt(1.0 + t * t)
    u = t * t / (s + 1.0)
    return delta * (u / s) * u


def pseudo_huber_dr(delta, r):
    t = r / delta
    return r / np.sqrt(1.0 + t * t)


# helper name in the table's formulas -> its tensor form
HELPERS = {"_digamma": digamma, "_polygamma": polygamma, "_erf_d": erf_d, "_npdf": npdf,
           "_erfcx_d": erfcx_d, "_log_ndtr_d": log_ndtr_d, "_ndtri_d": ndtri_d,
           "_erfinv_d": erfinv_d, "_expit": expit, "_expit_d": expit_d, "_i1": i1,
           "_i1_d": i1_d, "_i0e_d": i0e_d, "_i1e_d": i1e_d, "_entr_d": entr_d,
           "_entropy_dx": entropy_dx, "_entropy_dy": entropy_dy, "_digamma_diff": digamma_diff,
           "_huber_ddelta": huber_ddelta, "_huber_dr": huber_dr,
           "_pseudo_huber_ddelta": pseudo_huber_ddelta, "_pseudo_huber_dr": pseudo_huber_dr,
           "log1p": np.log1p}
