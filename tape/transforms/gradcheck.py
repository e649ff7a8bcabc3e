"""Finite-difference check of tapejit's gradients, as torch.autograd.gradcheck."""
from __future__ import annotations

import numpy as np

from . import functional
from ..core.state import no_grad
from ..core.tensor import Tensor
from ..reverse import autograd


class GradcheckError(RuntimeError):
    pass


def _numerical_jacobian(f, args, i, eps):
    x0 = np.array(args[i], dtype=np.float64)
    out0 = np.asarray(_value(f, args), dtype=np.float64)
    J = np.zeros((out0.size, x0.size))
    for j in range(x0.size):
        cols = []
        for sgn in (1.0, -1.0):
            x = x0.copy()
            x.reshape(-1)[j] += sgn * eps
            a = list(args)
            a[i] = x
            cols.append(np.asarray(_value(f, a), dtype=np.float64).reshape(-1))
        J[:, j] = (cols[0] - cols[1]) / (2 * eps)
    return J


def _value(f, args):
    with no_grad():
        out = f(*[Tensor(np.asarray(a, dtype=np.float64)) for a in args])
    return out._v if isinstance(out, Tensor) else out


def _analytical_jacobian(f, args, i):
    out, pullback = functional.vjp(f, *args)
    out = np.asarray(out, dtype=np.float64)
    J = np.zeros((out.size, np.size(args[i])))
    for k in range(out.size):
        ct = np.zeros(out.size)
        ct[k] = 1.0
        J[k] = np.reshape(pullback(ct.reshape(out.shape))[i], -1)
    return J


def gradcheck(f, *args, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Compare reverse-mode Jacobians of ``f`` with central finite differences.

    Every positional argument is differentiated. Returns True, or raises GradcheckError naming
    the argument, the worst element and both values (returns False with raise_exception=False).

    >>> tape.gradcheck(lambda x: np.sin(x).sum(), np.array([0.1, 0.2]))
    True
    """
    args = [np.asarray(a, dtype=np.float64) for a in args]
    for i in range(len(args)):
        num = _numerical_jacobian(f, args, i, eps)
        ana = _analytical_jacobian(f, args, i)
        bad = ~np.isclose(ana, num, rtol=rtol, atol=atol, equal_nan=True)
        if bad.any():
            k = np.unravel_index(np.argmax(np.where(bad, np.abs(ana - num), -1)), bad.shape)
            msg = (f"Jacobian mismatch for argument {i} at output {k[0]}, input element {k[1]}:"
                   f" analytical {ana[k]!r}, numerical {num[k]!r} (eps={eps}, atol={atol}, "
                   f"rtol={rtol})")
            if raise_exception:
                raise GradcheckError(msg)
            return False
    return True


def gradgradcheck(f, *args, grad_outputs=None, eps=1e-6, atol=1e-5, rtol=1e-3,
                  raise_exception=True, seed=0):
    """Check second derivatives, as torch.autograd.gradgradcheck: the Jacobian of the backward
    ``(x, v) -> J_f(x)^T v`` computed by reverse over reverse (``create_graph=True``) against
    central finite differences of first-order gradients.

    `grad_outputs` is v (random, from `seed`, by default). Returns True or raises
    GradcheckError (False with raise_exception=False).

    >>> tape.gradgradcheck(lambda x: np.sin(x) * x, np.array([0.1, 0.2]))
    True
    """
    args = [np.asarray(a, dtype=np.float64) for a in args]
    out0 = np.asarray(_value(f, args), dtype=np.float64)
    v0 = (np.random.default_rng(seed).normal(size=out0.shape) if grad_outputs is None
          else np.asarray(grad_outputs, dtype=np.float64))

    def backward_numeric(*xs_v):  # (x..., v) -> concatenated J^T v, first order (arrays)
        *xs, v = xs_v
        _, pullback = functional.vjp(f, *xs)
        return np.concatenate([np.reshape(g, -1) for g in pullback(np.reshape(v, out0.shape))])

    inputs = args + [v0]
    leaves = [Tensor(a, requires_grad=True) for a in inputs]
    out = f(*leaves[:-1])
    gs = autograd.grad([out], leaves[:-1], grad_outputs=[leaves[-1]], create_graph=True,
                       allow_unused=True)
    parts = [np.reshape(g, -1) if g is not None else Tensor(np.zeros(np.size(a)))
             for g, a in zip(gs, args)]
    h = np.concatenate(parts)
    m = h.size
    for i in range(len(inputs)):
        num = np.zeros((m, inputs[i].size))
        for j in range(inputs[i].size):
            cols = []
            for sgn in (1.0, -1.0):
                a = [x.copy() for x in inputs]
                a[i].reshape(-1)[j] += sgn * eps
                cols.append(backward_numeric(*a))
            num[:, j] = (cols[0] - cols[1]) / (2 * eps)
        ana = np.zeros((m, inputs[i].size))
        for k in range(m):
            hk = h[k]
            if not hk.requires_grad:
                continue
            (g,) = autograd.grad([hk], [leaves[i]], retain_graph=True, allow_unused=True)
            if g is not None:
                ana[k] = np.reshape(g, -1)
        bad = ~np.isclose(ana, num, rtol=rtol, atol=atol, equal_nan=True)
        if bad.any():
            k = np.unravel_index(np.argmax(np.where(bad, np.abs(ana - num), -1)), bad.shape)
            what = "grad_outputs" if i == len(args) else f"argument {i}"
            msg = (f"second-derivative mismatch for {what} at backward output {k[0]}, input "
                   f"element {k[1]}: reverse over reverse {ana[k]!r}, numerical {num[k]!r} "
                   f"(eps={eps}, atol={atol}, rtol={rtol})")
            if raise_exception:
                raise GradcheckError(msg)
            return False
    return True
