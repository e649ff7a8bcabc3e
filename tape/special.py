"""scipy.special on tensors.

SciPy's special functions are NumPy ufuncs, so ``scipy.special.gammaln(t)`` reaches
``Tensor.__array_ufunc__`` like ``np.exp(t)``: the ones a likelihood uses are rows of the table
(``jit.table.SCIPY_SPECIAL``), computed by tapejit's own kernels (``jit/_special.py``) in eager
and replay alike, differentiable in every mode. The main sweeps treat these rows as escapes
(tape/escapes/special.py): their kernels compile only when a recording first uses one. ``import tape`` does not import SciPy: the
ufunc objects are looked up in ``sys.modules`` the first time a ufunc that no NumPy row knows
reaches a tensor (SciPy is then imported already, since the caller holds its ufunc).

``polygamma`` is a Python function in SciPy (it calls ``np.asarray`` first), so it is here:
``tape.special.polygamma(n, x)``, n a constant integer order.

The regularized incomplete gamma and beta functions (``gammainc``, ``gammaincc``, ``betainc``,
``betaincc``: ``tape/_incomplete.py``) are an escape group of their own, differentiable in
their shape parameters too; scipy.special's ufuncs of those names run them on tensors.

>>> import scipy.special as sc
>>> sc.gammaln(tape.tensor([1.5, 2.5], requires_grad=True)).sum().backward()
"""
from __future__ import annotations

import sys

import numpy as np

from jit.table import SCIPY_SPECIAL

from .numpy_ops import _dispatch as _numpy_dispatch
from .core import record as _record
from . import _incomplete
from ._incomplete import betainc, betaincc, gammainc, gammaincc
from .escapes import record as escape_record
from .core.tensor import Tensor

__all__ = ["polygamma", "register_scipy", "gammainc", "gammaincc", "betainc", "betaincc"]

_REGISTERED = []  # the scipy.special module whose ufuncs are in _record.UFUNC_CODE


def register_scipy(ufunc=None):
    """Map scipy.special's ufuncs to their rows, once SciPy is imported; True if ``ufunc`` (if
    given) is one of them."""
    special = sys.modules.get("scipy.special")
    if special is None:
        return False
    if not _REGISTERED or _REGISTERED[0] is not special:
        def ufunc_of(name):
            fn = getattr(special, name, None)
            fn = getattr(fn, "__wrapped__", fn)  # SCIPY_ARRAY_API=1 wraps each ufunc
            return fn if isinstance(fn, np.ufunc) else None

        for name, row in SCIPY_SPECIAL.items():
            if (fn := ufunc_of(name)) is not None:
                _numpy_dispatch.SPECIAL_UFUNCS[fn] = _row_function(row, fn.nin)
        for name in _incomplete.__all__:  # gammainc, betainc, ...: tape/_incomplete.py
            if (fn := ufunc_of(name)) is not None:
                _numpy_dispatch.SPECIAL_UFUNCS[fn] = getattr(_incomplete, name)
        _REGISTERED[:] = [special]
    return ufunc is not None and ufunc in _numpy_dispatch.SPECIAL_UFUNCS


_numpy_dispatch.UFUNC_RESOLVERS.append(register_scipy)


def _row_function(row, nin):
    """The function a scipy.special ufunc runs on tensors: its row, an escape of the main
    sweeps (tape/escapes/special.py)."""
    if nin == 1:
        return lambda x: escape_record(row, x)
    return lambda a, b: escape_record(row, a, b)


def polygamma(n, x):
    """The n-th derivative of digamma at x (SciPy's ``polygamma``): n a constant integer >= 0
    (an array broadcast against x is fine); differentiable in x, its derivative in x being
    ``polygamma(n + 1, x)``."""
    if type(n) is Tensor:
        if n.requires_grad:
            raise TypeError("tape.special.polygamma: the order n is an integer and has no "
                            "derivative; pass it as a constant (n.detach())")
        n = n._v
    if type(x) is not Tensor:
        x = _record.plain(_record.constant(x))
    return escape_record("polygamma", _record.constant(n), x)


@_numpy_dispatch.implements(np.i0, name="i0")
def i0(x):
    """np.i0 (NumPy's modified Bessel function I0, not a ufunc): the i0 row."""
    return escape_record("i0", _numpy_dispatch.as_tensor(x))
