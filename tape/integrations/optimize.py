"""scipy.optimize with tapejit derivatives: value and gradient in one call, exact Hessian-vector
products for Newton-type methods.

    obj = tape.optimize.Objective(neg_log_likelihood, data)
    res = scipy.optimize.minimize(x0=theta0, method="trust-ncg", **obj.minimize_kwargs())

``minimize_kwargs()`` gives ``fun`` returning ``(value, gradient)`` with ``jac=True`` (one
recording and one backward per point, as SciPy asks for both at the same point) and ``hessp``
(an exact Hessian-vector product, reverse over forward). SciPy is needed only here; install it
yourself (``pip install scipy``); tapejit does not depend on it.
"""
from __future__ import annotations

import numpy as np

from ..transforms.functional import value_and_grad
from ..transforms.jacobians import _hvps, _Recorded
from ..replay.compiled import compile as compile_tape


class Objective:
    """A scalar function of a parameter vector ``f(x, *args)`` for scipy.optimize.

    Counters ``nfev``, ``nhvp`` tell how often tapejit ran. With ``replay=True``, f is compiled
    (``tape.compile``) at the first point: every later value and gradient is a replay, and
    Hessian-vector products replay a compiled gradient (see ``CompiledTape.hvp``). That pays
    when f runs many small operations; a value read in Python inside f becomes a guard.
    """

    def __init__(self, f, *args, replay=False):
        self.f = f
        self.args = args
        self.replay = replay
        self._cf = None  # the CompiledTape, with replay
        self._vg = value_and_grad(f) if not replay else self._replayed
        self._last = None  # (x, value, gradient) of the latest evaluation
        self._rec = None  # (x, recording of f at x) for Hessian-vector products
        self.nfev = 0
        self.nhvp = 0

    def _eval(self, x):
        x = np.asarray(x, dtype=np.float64)
        if self._last is None or not np.array_equal(self._last[0], x):
            value, g = self._vg(x, *self.args)
            self.nfev += 1
            self._last = (x.copy(), float(value), np.asarray(g, dtype=np.float64))
        return self._last

    def _compiled(self, x):
        if self._cf is None:
            self._cf = compile_tape(self.f, x, *self.args)
        return self._cf

    def _replayed(self, x, *args):
        return self._compiled(x).value_and_grad(x, *args)

    def value_and_grad(self, x):
        """``(f(x), grad f(x))``: use with ``jac=True``."""
        _, value, g = self._eval(x)
        return value, g.copy()

    def fun(self, x):
        return self._eval(x)[1]

    def jac(self, x):
        """The gradient (evaluated together with the value and cached)."""
        return self._eval(x)[2].copy()

    def hessp(self, x, p):
        """Exact Hessian of f at x times p. f is recorded once per point: Newton-type methods
        ask for many products at the same x."""
        self.nhvp += 1
        x = np.asarray(x, dtype=np.float64)
        if self.replay:
            return np.asarray(self._compiled(x).hvp((x, *self.args),
                                                    np.asarray(p, dtype=np.float64)))
        if self._rec is None or not np.array_equal(self._rec[0], x):
            rec = _Recorded(lambda z: self.f(z, *self.args), (x,), "Objective.hessp")
            if rec.outs[0].size != 1:
                raise TypeError("Objective: f must return a scalar")
            self._rec = (x.copy(), rec)
        ((hv,),) = _hvps(self._rec[1], [[np.asarray(p, dtype=np.float64)]], keep=True)
        return hv

    def minimize_kwargs(self):
        """Keyword arguments for ``scipy.optimize.minimize``: fun (value and gradient, with
        ``jac=True``) and hessp."""
        return {"fun": self.value_and_grad, "jac": True, "hessp": self.hessp}


_HESSP_METHODS = {"newton-cg", "trust-ncg", "trust-krylov", "trust-constr"}


def minimize(f, x0, args=(), method="trust-ncg", replay=False, **kwargs):
    """``scipy.optimize.minimize`` of ``f(x, *args)`` with tapejit's gradient (and Hessian-vector
    products for the methods that use them); ``replay=True`` compiles f once (see Objective).
    Returns SciPy's OptimizeResult."""
    try:
        from scipy.optimize import minimize as scipy_minimize
    except ImportError as e:  # pragma: no cover - scipy is installed in the test environment
        raise ImportError("tape.optimize.minimize needs SciPy: pip install scipy") from e
    obj = Objective(f, *args, replay=replay)
    kw = obj.minimize_kwargs()
    if method.lower() not in _HESSP_METHODS:
        kw.pop("hessp")
    kw.update(kwargs)
    return scipy_minimize(x0=np.asarray(x0, dtype=np.float64), method=method, **kw)
