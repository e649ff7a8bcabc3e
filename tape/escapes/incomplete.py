"""The regularized incomplete gamma and beta functions: escapes with their own kernels.

Four rows (``jit/table.py``), each taking params ``upper`` (Q = 1 - P, 1 - I) and ``log`` (the
logarithm of the value):

- ``gammainc(a, x)``: P(a, x); a and x of one shape (``tape/_incomplete.py`` broadcasts them).
- ``gammainc_da(a, x)``: its derivative in a.
- ``betainc(ab, x)``: I_x(a, b), with a and b stacked into ``ab`` of shape (2,) + x's.
- ``betainc_dab(ab, x)``: its derivatives in a and b, stacked the same way.

Values and every partial come from ``jit/_incomplete.py``'s kernels on plain arrays (loaded the
first time a recording uses one of these rows, never by ``python -m jit.warmup``). The
derivatives in the shapes have no closed form: the kernels differentiate their series and
continued fractions in forward mode. Recorded (a differentiable backward, dual numbers), a
value row's shape partial is its derivative row, whose own partial in x is closed-form (the
density's derivative in the shape); its partials in the shapes (d^2/da^2, d^2/da db, ...) are
not computed: asking for them raises an error naming the function and the alternative. The
partials in x are closed-form tensor expressions (the densities), so every order in x works.
"""
from __future__ import annotations

import math

import numpy as np

from . import Escape, register

_PARAMS = {"upper": (False, True), "log": (False, True)}
_MAX_ITER = 20000  # jit/_incomplete.py's iteration budget per element (a loaded file's work)


def _kernel(name):
    import jit

    return getattr(jit, name)


def _flat(x):
    """x as a flat, contiguous, writable float64 array (the kernels' one argument type)."""
    f = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    return f if f.flags.writeable else f.copy()


def _name(family, upper, log):
    base = family + ("cc" if upper else "c")
    return f"log({base})" if log else base


def gamma_parts(a, x, upper, log):
    """(value, d/da, d/dx) of the requested function on plain arrays of one shape."""
    shape = np.shape(x)
    fa, fx = _flat(a), _flat(x)
    y, da, dx = np.empty(fx.size), np.empty(fx.size), np.empty(fx.size)
    _kernel("incgamma")(fa, fx, int(upper), int(log), y, da, dx)
    return y.reshape(shape), da.reshape(shape), dx.reshape(shape)


def beta_parts(ab, x, upper, log):
    """(value, d/d(a, b) stacked, d/dx) on plain arrays, ab of shape (2,) + x's."""
    shape = np.shape(x)
    ab = np.asarray(ab, dtype=np.float64)
    fx = _flat(x)
    y, da, db, dx = (np.empty(fx.size) for _ in range(4))
    _kernel("incbeta")(_flat(ab[0]), _flat(ab[1]), fx, int(upper), int(log), y, da, db, dx)
    return y.reshape(shape), np.stack([da, db]).reshape((2,) + shape), dx.reshape(shape)


def _check(name, sha, shb, lead):
    if tuple(sha) != lead + tuple(shb):
        raise ValueError(f"{name}: operand shapes {tuple(sha)} and {tuple(shb)} are not "
                         f"{lead} + x's shape (tape.special broadcasts them first)")


def _gamma_log_density(xp, a, x):
    """log of P's x-derivative, x^(a-1) e^-x / Gamma(a), as a tensor expression."""
    return xp.xlogy(a - 1.0, x) - x - xp.gammaln(a)


def _beta_log_density(xp, a, b, x):
    return xp.xlogy(a - 1.0, x) + xp.xlog1py(b - 1.0, -x) - xp.betaln(a, b)


def _x_partial(xp, logdens, y, upper, log):
    """The value's x-derivative from the log-density: +-density, divided by the value for
    the log (its exp(log density - y) does not overflow where the value underflows)."""
    d = xp.exp(logdens - y) if log else xp.exp(logdens)
    return -d if upper else d


def _second_order(fn, argument):
    return NotImplementedError(
        f"{fn}: the second derivative in its shape parameter{argument} is not computed (the "
        f"first derivative there is a differentiated series / continued fraction, whose own "
        f"derivative in the shape is not implemented). Derivatives of any order in x, and "
        f"first derivatives in the shapes (also mixed with x), work; for a second derivative "
        f"in a shape take finite differences of tape.grad in it.")


def _lead_axis(xp, t, shape):
    """A tangent of x (k directions leading in NumPy) with an axis for the stacked (a, b)."""
    sh = np.shape(xp.value(t))
    lead = sh[:len(sh) - len(shape)]
    return xp.reshape(t, tuple(lead) + (1,) + tuple(shape))


# ---- gamma -----------------------------------------------------------------------------------


def _gamma_value(a, x, upper=False, log=False):
    y = gamma_parts(a, x, upper, log)[0]
    return y if np.ndim(y) else float(y)


def _gamma_vjp(xp, g, y, a, x, need_a, need_x, upper=False, log=False):
    if not xp.tensors:
        _, da, dx = gamma_parts(a, x, upper, log)
        return (g * da if need_a else None), (g * dx if need_x else None)
    ga = g * xp.gammainc_da(a, x, upper=upper, log=log) if need_a else None
    gx = g * _x_partial(xp, _gamma_log_density(xp, a, x), y, upper, log) if need_x else None
    return ga, gx


def _gamma_jvp(xp, ta, tx, y, a, x, upper=False, log=False):
    if not xp.tensors:
        _, da, dx = gamma_parts(a, x, upper, log)
    else:
        da = xp.gammainc_da(a, x, upper=upper, log=log) if ta is not None else None
        dx = _x_partial(xp, _gamma_log_density(xp, a, x), y, upper, log) \
            if tx is not None else None
    ty = None if ta is None else da * ta
    if tx is not None:
        ty = dx * tx if ty is None else ty + dx * tx
    return ty


def _gamma_da_value(a, x, upper=False, log=False):
    d = gamma_parts(a, x, upper, log)[1]
    return d if np.ndim(d) else float(d)


def _gamma_da_x(xp, d, a, x, upper, log):
    """d/dx of the row's value d (the derivative in a) = d/da of the x-derivative:
    +-density (log x - digamma(a)), less the value's own log-derivative for the log."""
    c = xp.log(x) - xp.digamma(a)
    logdens = _gamma_log_density(xp, a, x)
    if not log:
        return _x_partial(xp, logdens, 0.0, upper, False) * c
    y = xp.gammainc(a, x, upper=upper, log=True)
    return _x_partial(xp, logdens, y, upper, True) * (c - d)


def _gamma_da_vjp(xp, g, d, a, x, need_a, need_x, upper=False, log=False):
    if need_a:
        raise _second_order(_name("gammain", upper, log), " a")
    return None, (g * _gamma_da_x(xp, d, a, x, upper, log) if need_x else None)


def _gamma_da_jvp(xp, ta, tx, d, a, x, upper=False, log=False):
    if ta is not None:
        raise _second_order(_name("gammain", upper, log), " a")
    return None if tx is None else _gamma_da_x(xp, d, a, x, upper, log) * tx


def _same_shape(name):
    def outputs(sha, shx, **params):
        _check(name, sha, shx, ())
        return (tuple(shx),)
    return outputs


def _work(sha, shx, **params):
    return _MAX_ITER * math.prod(shx) + 1  # (the bound; typically O(sqrt(shape)) per element)


register(Escape("gammainc", _gamma_value, _gamma_vjp, _gamma_jvp, _same_shape("gammainc"),
                _work, binary=True, params=_PARAMS))
register(Escape("gammainc_da", _gamma_da_value, _gamma_da_vjp, _gamma_da_jvp,
                _same_shape("gammainc_da"), _work, binary=True, params=_PARAMS))


# ---- beta ------------------------------------------------------------------------------------


def _beta_value(ab, x, upper=False, log=False):
    y = beta_parts(ab, x, upper, log)[0]
    return y if np.ndim(y) else float(y)


def _beta_x_partial(xp, y, ab, x, upper, log):
    return _x_partial(xp, _beta_log_density(xp, ab[0], ab[1], x), y, upper, log)


def _beta_vjp(xp, g, y, ab, x, need_ab, need_x, upper=False, log=False):
    if not xp.tensors:
        _, dab, dx = beta_parts(ab, x, upper, log)
        return (g * dab if need_ab else None), (g * dx if need_x else None)
    gab = g * xp.betainc_dab(ab, x, upper=upper, log=log) if need_ab else None
    gx = g * _beta_x_partial(xp, y, ab, x, upper, log) if need_x else None
    return gab, gx


def _beta_jvp(xp, tab, tx, y, ab, x, upper=False, log=False):
    shape = np.shape(xp.value(x))
    if not xp.tensors:
        _, dab, dx = beta_parts(ab, x, upper, log)
    else:
        dab = xp.betainc_dab(ab, x, upper=upper, log=log) if tab is not None else None
        dx = _beta_x_partial(xp, y, ab, x, upper, log) if tx is not None else None
    ty = None
    if tab is not None:  # sum over the stacked (a, b) axis, before x's axes
        ty = xp.sum(dab * tab, axis=-(len(shape) + 1))
    if tx is not None:
        ty = dx * tx if ty is None else ty + dx * tx
    return ty


def _beta_dab_value(ab, x, upper=False, log=False):
    return beta_parts(ab, x, upper, log)[1]


def _beta_dab_x(xp, d, ab, x, upper, log):
    """d/dx of the row's values d (the derivatives in a and b, stacked): +-density times
    (log x - digamma(a) + digamma(a + b), log(1 - x) - digamma(b) + digamma(a + b)), less the
    value's own log-derivatives for the log."""
    a, b = ab[0], ab[1]
    pc = xp.digamma(a + b)
    c = xp.stack([xp.log(x) - xp.digamma(a) + pc, xp.log1p(-x) - xp.digamma(b) + pc])
    logdens = _beta_log_density(xp, a, b, x)
    if not log:
        return _x_partial(xp, logdens, 0.0, upper, False) * c
    y = xp.betainc(ab, x, upper=upper, log=True)
    return _x_partial(xp, logdens, y, upper, True) * (c - d)


def _beta_dab_vjp(xp, g, d, ab, x, need_ab, need_x, upper=False, log=False):
    if need_ab:
        raise _second_order(_name("betain", upper, log), "s a, b")
    if not need_x:
        return None, None
    return None, xp.sum(g * _beta_dab_x(xp, d, ab, x, upper, log), axis=0)


def _beta_dab_jvp(xp, tab, tx, d, ab, x, upper=False, log=False):
    if tab is not None:
        raise _second_order(_name("betain", upper, log), "s a, b")
    if tx is None:
        return None
    shape = np.shape(xp.value(x))
    return _beta_dab_x(xp, d, ab, x, upper, log) * _lead_axis(xp, tx, shape)


def _stacked(name, out_stacked):
    def outputs(shab, shx, **params):
        _check(name, shab, shx, (2,))
        return ((2,) + tuple(shx),) if out_stacked else (tuple(shx),)
    return outputs


register(Escape("betainc", _beta_value, _beta_vjp, _beta_jvp, _stacked("betainc", False),
                _work, binary=True, params=_PARAMS))
register(Escape("betainc_dab", _beta_dab_value, _beta_dab_vjp, _beta_dab_jvp,
                _stacked("betainc_dab", True), _work, binary=True, params=_PARAMS))
