"""scipy.special's regularized incomplete gamma and beta functions on tensors.

``gammainc(a, x)``, ``gammaincc(a, x)``, ``betainc(a, b, x)`` and ``betaincc(a, b, x)`` are
scipy.special's ufuncs; on tensors they run these functions (``tape.special`` registers them
with the other scipy.special ufuncs), and ``tape.stats`` calls them (and their logarithms,
``log=True``) for the cumulative functions. Differentiable in every argument: the
x-derivatives are the densities, the shape derivatives come from the kernels of
``jit/_incomplete.py`` (the series and continued fractions differentiated in forward mode);
second derivatives in a shape raise an error (tape/escapes/incomplete.py). Arguments
broadcast as NumPy's; invalid parameters give NaN, as SciPy's.
"""
from __future__ import annotations

import numpy as np

from .core import record as _record
from .core.tensor import Tensor
from .escapes import record

__all__ = ["gammainc", "gammaincc", "betainc", "betaincc"]

_REAL = frozenset("biuf")


def _operands(name, args):
    """The arguments as tensors of their broadcast shape."""
    ts = []
    for v in args:
        if type(v) is not Tensor:
            arr = np.asarray(v)
            if arr.dtype.kind not in _REAL:
                raise TypeError(f"{name}: tapejit differentiates float64 values; got dtype "
                                f"{arr.dtype}")
            v = _record.plain(_record.constant(arr.astype(np.float64)))
        ts.append(v)
    try:
        shape = np.broadcast_shapes(*(t.shape for t in ts))
    except ValueError:
        raise ValueError(f"{name}: operand shapes {tuple(t.shape for t in ts)} do not "
                         "broadcast") from None
    return [t if t.shape == shape else np.broadcast_to(t, shape) for t in ts]


def incomplete_gamma(a, x, upper=False, log=False):
    """P(a, x) (Q(a, x) with `upper`), or its logarithm with `log`."""
    a, x = _operands("gammaincc" if upper else "gammainc", (a, x))
    return record("gammainc", a, x, upper=upper, log=log)


def incomplete_beta(a, b, x, upper=False, log=False):
    """I_x(a, b) (1 - I with `upper`), or its logarithm with `log`."""
    a, b, x = _operands("betaincc" if upper else "betainc", (a, b, x))
    return record("betainc", np.stack([a, b]), x, upper=upper, log=log)


def gammainc(a, x):
    """scipy.special.gammainc: the regularized lower incomplete gamma function P(a, x)."""
    return incomplete_gamma(a, x)


def gammaincc(a, x):
    """scipy.special.gammaincc: Q(a, x) = 1 - P(a, x)."""
    return incomplete_gamma(a, x, upper=True)


def betainc(a, b, x):
    """scipy.special.betainc: the regularized incomplete beta function I_x(a, b)."""
    return incomplete_beta(a, b, x)


def betaincc(a, b, x):
    """scipy.special.betaincc: 1 - I_x(a, b)."""
    return incomplete_beta(a, b, x, upper=True)
