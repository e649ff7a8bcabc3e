"""``tape.linalg``: ``numpy.linalg`` for tensors (also ``tape.numpy_ops.linalg``).

The public path of :mod:`tape.numpy_ops.linalg`, where the code lives."""
from .numpy_ops.linalg import (EighResult, LstsqResult, QRResult, SVDResult, SlogdetResult,
                               cholesky, cond, det, eigh, eigvalsh, inv, lstsq, norm, pinv, qr,
                               slogdet, solve, svd, svdvals, tensorinv, tensorsolve)
from .numpy_ops.linalg import __all__  # noqa: F401
