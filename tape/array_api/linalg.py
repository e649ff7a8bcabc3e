"""``tape.array_api.linalg``: the standard's linear algebra extension, where tapejit has it.

Each function calls ``numpy.linalg``'s function of the same name, which reaches tapejit's
implementation for tensors. Only the functions tapejit records are defined here (the others,
such as ``cholesky``, ``eigh``, ``qr``, ``svd``, are absent rather than failing on tensors), so
``hasattr(xp.linalg, name)`` tells code written against the standard what it can call; the set
grows by itself as tapejit implements more of ``numpy.linalg``.
"""
import numpy as np

from ..numpy_ops._dispatch import FUNCS as _FUNCS
from ..core.tensor import Tensor as _Tensor
from ._dtypes import check as _check
from ._discrete import wrap as _wrap


def cholesky(x, /, *, upper=False):
    return _wrap(np.linalg.cholesky(x, upper=upper))


def cross(x1, x2, /, *, axis=-1):
    return _wrap(np.linalg.cross(x1, x2, axis=axis))


def det(x, /):
    return _wrap(np.linalg.det(x))


def diagonal(x, /, *, offset=0):
    return _wrap(np.linalg.diagonal(x, offset=offset))


def eigh(x, /):
    return _wrap(np.linalg.eigh(x))


def eigvalsh(x, /):
    return _wrap(np.linalg.eigvalsh(x))


def inv(x, /):
    return _wrap(np.linalg.inv(x))


def matmul(x1, x2, /):
    return _wrap(np.linalg.matmul(x1, x2))


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    return _wrap(np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord))


def matrix_power(x, n, /):
    return _wrap(np.linalg.matrix_power(x, n))


def matrix_rank(x, /, *, rtol=None):
    return _wrap(np.linalg.matrix_rank(x, rtol=rtol))


def matrix_transpose(x, /):
    return _wrap(np.linalg.matrix_transpose(x))


def outer(x1, x2, /):
    return _wrap(np.linalg.outer(x1, x2))


def pinv(x, /, *, rtol=None):
    return _wrap(np.linalg.pinv(x, rtol=rtol))


def qr(x, /, *, mode="reduced"):
    return _wrap(np.linalg.qr(x, mode=mode))


def slogdet(x, /):
    return _wrap(np.linalg.slogdet(x))


def solve(x1, x2, /):
    return _wrap(np.linalg.solve(x1, x2))


def svd(x, /, *, full_matrices=True):
    return _wrap(np.linalg.svd(x, full_matrices=full_matrices))


def svdvals(x, /):
    return _wrap(np.linalg.svdvals(x))


def tensordot(x1, x2, /, *, axes=2):
    return _wrap(np.linalg.tensordot(x1, x2, axes=axes))


def trace(x, /, *, offset=0, dtype=None):
    _check(dtype, "linalg.trace")
    kw = {} if dtype is None or isinstance(x, _Tensor) else {"dtype": dtype}
    return _wrap(np.linalg.trace(x, offset=offset, **kw))


def vecdot(x1, x2, /, *, axis=-1):
    return _wrap(np.linalg.vecdot(x1, x2, axis=axis))


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    return _wrap(np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord))


# only what tapejit records on tensors: the rest are removed, so hasattr() tells the truth
__all__ = []
for _name in sorted(n for n in dict(globals()) if not n.startswith("_") and n != "np"):
    if getattr(np.linalg, _name) in _FUNCS:
        __all__.append(_name)
    else:
        del globals()[_name]
del _name
