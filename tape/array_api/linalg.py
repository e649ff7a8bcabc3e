"""``tape.array_api.linalg``: the standard's linear algebra extension, where tapejit has it.

Each function calls ``numpy.linalg``'s function of the same name, which reaches tapejit's
implementation for tensors. Only the functions tapejit records are defined here (the others,
such as ``cholesky``, ``eigh``, ``qr``, ``svd``, are absent rather than failing on tensors), so
``hasattr(xp.linalg, name)`` tells code written against the standard what it can call; the set
grows by itself as tapejit implements more of ``numpy.linalg``.
"""
import numpy as np

from .._numpy_impl import FUNCS as _FUNCS
from ._dtypes import wrap as _wrap

_NAMES = ("cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul",
          "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr",
          "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot", "vector_norm")


def _linalg(name):
    fn = getattr(np.linalg, name)

    def f(*args, **kwargs):
        return _wrap(fn(*args, **kwargs))

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"The standard's ``linalg.{name}``: ``numpy.linalg.{name}`` on tensors."
    return f


__all__ = [n for n in _NAMES if getattr(np.linalg, n) in _FUNCS]
globals().update({n: _linalg(n) for n in __all__})
