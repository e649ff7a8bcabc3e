"""The table's derivative formulas (``Prim.d``) as functions of tensors.

A formula is Python over its operands (``x``, ``a``, ``b``, ``y``) and helpers; evaluated here on
tensors it records, so a derivative is itself differentiable: forward-mode tangents
(tape/forward/tangent_rules.py), the differentiable backward (tape/reverse/) and the special rows'
higher-order partials (tape/escapes/special.py) all evaluate it in ``FORMULAS``. Helpers whose value
only depends on comparisons are piecewise constant; the special rows' differentiable helpers
(tape/forward/special_rules.py) are added by ``register_helpers``.
"""
from __future__ import annotations

import math

import numpy as np

from jit.table import TABLE

from .scalar_rules import python_scalar_namespace
from .tensor import Tensor


# -- the table's derivative formulas, on tensors ----------------------------------------------

def _piecewise(fn):
    """A helper whose value only depends on comparisons: evaluated on values, constant (its
    derivative is zero almost everywhere)."""
    vec = np.vectorize(fn, otypes=[np.float64])

    def f(*args):
        vals = [a._v if type(a) is Tensor else a for a in args]
        r = vec(*vals)
        return float(r) if np.ndim(r) == 0 else r

    return f


def _scalar_helpers():
    ns = python_scalar_namespace()
    return {k: v for k, v in ns.items() if k.startswith("_") and callable(v)}


def _value(x):
    return np.asarray(x._v if type(x) is Tensor else x)


def _pow_da(a, b):
    # b a^(b-1), and 0 where b == 0; for a < 0 and |b| > 2^53, minus b (-a)^(b-1), as the kernel's
    # helper (b - 1 rounds to an even number there, whose power would lose the odd sign). The
    # branches not taken read safe operands, so their zero adjoints stay zeros.
    av, bv = _value(a), _value(b)
    zero = bv == 0.0
    flip = (av < 0.0) & (np.abs(bv) > 2.0 ** 53) & (np.abs(bv) < np.inf)
    if not zero.any() and not flip.any():
        return b * a ** (b - 1.0)
    if flip.any():
        odd = -(b * np.where(flip, -a, 1.0) ** (b - 1.0))
        out = np.where(flip, odd, b * np.where(flip, 1.0, a) ** (b - 1.0))
    else:
        out = b * a ** (b - 1.0)
    return np.where(zero, 0.0, out) if zero.any() else out


def _arctan_d(x):
    big = np.abs(_value(x)) >= 1e150
    if not big.any():
        return 1.0 / (1.0 + x * x)
    xs, xb = np.where(big, 0.0, x), np.where(big, x, 1.0)  # (safe operands: see _pow_da)
    return np.where(big, (1.0 / xb) / xb, 1.0 / (1.0 + xs * xs))


def _arcsinh_d(x):
    big = np.abs(_value(x)) >= 1e150
    if not big.any():
        return 1.0 / np.sqrt(x * x + 1.0)
    xs, xb = np.where(big, 0.0, x), np.where(big, x, 1.0)
    return np.where(big, 1.0 / np.abs(xb), 1.0 / np.sqrt(xs * xs + 1.0))


def _arccosh_d(x):
    big = _value(x) >= 1e150
    if not big.any():
        return 1.0 / np.sqrt(x * x - 1.0)
    xs, xb = np.where(big, 2.0, x), np.where(big, x, 1.0)
    return np.where(big, 1.0 / xb, 1.0 / np.sqrt(xs * xs - 1.0))


def _atan2_d(num, a, b):
    av, bv = _value(a), _value(b)
    s = av * av + bv * bv
    plain = (s < 1e300) & (s > 1e-300)
    if plain.all():
        return num / (a * a + b * b)
    ap, bp = np.where(plain, a, 1.0), np.where(plain, b, 1.0)
    h = np.hypot(np.where(plain, 1.0, a), np.where(plain, 1.0, b))
    return np.where(plain, num / (ap * ap + bp * bp), (num / h) / h)


def _logaddexp_d(a, b, y):
    # exp(a - y), and maximum's share where y is infinite (the kernel's helper)
    yv = _value(y)
    edge = np.isinf(yv)
    if not edge.any():
        return np.exp(a - y)
    safe = np.exp(np.where(edge, 0.0, a) - np.where(edge, 0.0, y))  # (no inf - inf)
    return np.where(edge, FORMULAS["_pick_max"](a, b), safe)


def _pow_db(a, y):
    # a^b log(a), and 0 where a == 0
    av = a._v if type(a) is Tensor else a
    zero = np.asarray(av) == 0.0
    if not zero.any():
        return y * np.log(a)
    return np.where(zero, 0.0, y * np.log(np.where(zero, 1.0, a)))


def _formula_namespace():
    ns = {"sin": np.sin, "cos": np.cos, "tan": np.tan, "exp": np.exp, "log": np.log,
          "sqrt": np.sqrt, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
          "LN2": math.log(2.0), "LN10": math.log(10.0), "abs": np.abs,
          "_pow_da": _pow_da, "_pow_db": _pow_db, "_logaddexp_d": _logaddexp_d,
          "_arctan_d": _arctan_d, "_arcsinh_d": _arcsinh_d, "_arccosh_d": _arccosh_d,
          "_atan2_d": _atan2_d}
    for name, fn in _scalar_helpers().items():
        ns.setdefault(name, _piecewise(fn))
    return ns


FORMULAS = _formula_namespace()
_DERIV = {}  # (code, operand) -> fn(x or a, b, y) on tensors, or a float constant


def derivative(code, k):
    key = (code, k)
    f = _DERIV.get(key)
    if f is None:
        p = TABLE[code]
        expr = p.d[k]
        try:
            f = float(expr)  # a constant partial (add, subtract, copy, ...)
        except ValueError:
            args = "x, y" if p.family == "unary" else "a, b, y"
            f = eval(f"lambda {args}: {expr}", dict(FORMULAS))  # noqa: S307 (formulas of the table)
        _DERIV[key] = f
    return f


def register_helpers(helpers):
    """Add differentiable helpers (name -> function of tensors) to the formulas' namespace; they
    take the place of a piecewise-constant helper of the same name."""
    FORMULAS.update(helpers)
