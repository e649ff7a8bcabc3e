"""``tape.linalg``: ``numpy.linalg`` for tensors (also ``tape.numpy.linalg``).

The public path of :mod:`tape.numpy.linalg`, where the code lives."""
from .numpy.linalg import (  # noqa: F401
    EighResult, LstsqResult, QRResult, SVDResult, SlogdetResult, cholesky, cond, det, eigh,
    eigvalsh, inv, lstsq, norm, pinv, qr, slogdet, solve, svd, svdvals, tensorinv, tensorsolve
)
from .numpy.linalg import __all__  # noqa: F401
