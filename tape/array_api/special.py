"""``tape.array_api.special``: SciPy's special-function ufuncs for the namespace.

With ``SCIPY_ARRAY_API=1`` SciPy wraps each ``scipy.special`` ufunc: for an array library it
does not know, it calls ``xp.special.<name>`` when the namespace has it, and otherwise converts
the arguments with ``np.asarray`` (which tapejit refuses for a tensor that carries a gradient).
This module gives SciPy the first route: ``xp.special.gammaln(t)`` calls SciPy's own ufunc on
the tensor, which reaches tapejit's table row for it through ``Tensor.__array_ufunc__`` (or
raises tapejit's error naming ``scipy.special.<name>`` when tapejit has no row for it).
Arguments without a gradient (constants) are computed by SciPy on their values, as SciPy's own
fallback would. Imported only when SciPy asks for it, so ``import tape`` never imports SciPy.

Three of SciPy's array-API-wrapped functions are Python functions, not ufuncs, which SciPy would
convert with ``np.asarray``; tapejit records them here instead: ``polygamma`` (tapejit's row,
``tape.special.polygamma``), ``sinc`` (exact in every derivative at 0) and ``multigammaln``
(SciPy's formula over the ``gammaln`` row).
"""
import math

import numpy as np
import scipy.special as _scipy_special

from ..core.tensor import Tensor
from ._discrete import DiscreteArray
from ._discrete import wrap


def polygamma(n, x):
    """scipy.special.polygamma(n, x): n a constant integer order, differentiable in x."""
    from ..special import polygamma as _polygamma

    return wrap(_polygamma(n.numpy() if type(n) is DiscreteArray else n, x))


def sinc(x):
    """scipy.special.sinc: NumPy's sinc, which tapejit records exactly in every derivative at 0."""
    return wrap(np.sinc(x))


def multigammaln(a, d):
    """scipy.special.multigammaln(a, d): the log of the multivariate gamma function of
    dimension d (a constant integer), d (d - 1) / 4 log(pi) + sum_j gammaln(a - j / 2)."""
    d = np.asarray(d.numpy() if type(d) is DiscreteArray else d)[()]
    if not np.isscalar(d) or np.floor(d) != d:
        raise ValueError("d should be a positive integer (dimension)")
    if np.any(a <= 0.5 * (d - 1)):  # a value read (as SciPy's check), no gradient through it
        raise ValueError(f"condition a > 0.5 * (d-1) ({0.5 * (d - 1)}) not met")
    gammaln = _naked_ufunc("gammaln")
    r = (d * (d - 1) * 0.25) * math.log(math.pi)
    return wrap(r + sum(gammaln(a - (j - 1.0) / 2) for j in range(1, int(d) + 1)))


def _naked_ufunc(name):
    """SciPy's ufunc behind the public name (under SCIPY_ARRAY_API the public object is a
    wrapper whose ``__wrapped__`` is the ufunc), or None."""
    f = getattr(_scipy_special, name, None)
    f = getattr(f, "__wrapped__", f)
    return f if isinstance(f, np.ufunc) else None


def _special(name, ufunc):
    def f(*args, **kwargs):
        if any(type(a) is Tensor and a._rg for a in args):
            return wrap(ufunc(*args, **kwargs))
        return wrap(ufunc(*(a._v if type(a) is Tensor else a for a in args), **kwargs))

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"scipy.special.{name} on tensors (SciPy's ufunc, recorded by tapejit)."
    return f


def __getattr__(name):
    ufunc = None if name.startswith("_") else _naked_ufunc(name)
    if ufunc is None:
        raise AttributeError(f"module 'tape.array_api.special' has no attribute {name!r} (only "
                             "scipy.special's ufuncs are here)")
    f = globals()[name] = _special(name, ufunc)
    return f
