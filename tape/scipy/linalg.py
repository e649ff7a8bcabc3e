"""``tape.scipy.linalg``: scipy.linalg's solve_triangular, cholesky, cho_factor, cho_solve and
expm on tensors, with SciPy's signatures.

solve_triangular, cholesky and expm are escape rows (``tape/escapes/triangular.py``,
``expm.py``); cho_factor and cho_solve are built from them. solve_triangular runs without SciPy
too (NumPy's solve on the triangle); expm needs SciPy installed.
"""
from __future__ import annotations

import numpy as np

from ..numpy_ops import _impl as npi
from ..core.conversions import LIBRARY_HINTS
from ..core.tensor import raw
from ..escapes import record
from ..numpy_ops.linalg import _matrix_operands, _mT, _square

_TRANS = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1}


def _finite(x, check_finite):
    if check_finite and not np.isfinite(raw(x)).all():
        raise ValueError("array must not contain infs or NaNs")


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """x with op(a) x = b, op(a) = a (trans 0 / 'N') or a^T (1, 2, 'T', 'C'), reading a's lower
    (lower=True) or upper triangle; a 1-D b is a vector."""
    if trans not in _TRANS:
        raise ValueError(f"solve_triangular: invalid trans {trans!r}")
    a = _square(a, "solve_triangular")
    a, bm, vec = _matrix_operands(a, b, "solve_triangular")
    _finite(a, check_finite)
    _finite(bm, check_finite)
    x = record("solve_triangular", a, bm, lower=bool(lower), trans=_TRANS[trans],
               unit=bool(unit_diagonal))
    return npi.reshape(x, x.shape[:-1]) if vec else x


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """SciPy's default: the upper factor U (A = U^T U) from A's upper triangle; lower=True:
    the lower factor from the lower triangle."""
    a = _square(a, "cholesky")
    _finite(a, check_finite)
    if lower:
        return record("cholesky", a)
    return _mT(record("cholesky", _mT(a)))


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """(c, lower): c holds the factor in its lower or upper triangle and zeros in the other
    (SciPy leaves unspecified values there)."""
    return cholesky(a, lower=lower, check_finite=check_finite), bool(lower)


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """x with A x = b, A = c c^T (lower) or c^T c (upper): two triangular solves."""
    c, lower = c_and_lower
    if lower:
        y = solve_triangular(c, b, lower=True, check_finite=check_finite)
        return solve_triangular(c, y, trans=1, lower=True, check_finite=check_finite)
    y = solve_triangular(c, b, trans=1, lower=False, check_finite=check_finite)
    return solve_triangular(c, y, lower=False, check_finite=check_finite)


def expm(A):
    """The matrix exponential of a square A (or a batch); its derivative is the Frechet
    derivative (tape/escapes/expm.py)."""
    try:
        import scipy.linalg  # noqa: F401
    except ImportError as e:
        raise ImportError("tape.scipy.linalg.expm needs SciPy: pip install scipy") from e
    return record("expm", _square(A, "expm"))


__all__ = ["solve_triangular", "cholesky", "cho_factor", "cho_solve", "expm"]


def _conversion_hint(mod, name):
    if mod.startswith("scipy.linalg") and "." not in name and name in __all__:
        return (f"scipy.linalg.{name} converts its arguments with np.asarray, which would "
                f"lose the gradient: call tape.scipy.linalg.{name} (the same "
                f"signature), which records.")
    return None


LIBRARY_HINTS.append(_conversion_hint)
