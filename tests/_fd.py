"""Finite-difference references shared by the correctness suites (not a test module).

``fd_vjp`` differentiates a plain NumPy function by central differences; ``tape_vjp`` asks
tapejit for the same vector-Jacobian product. Both take the cotangent explicitly, so tests use
random cotangents (a ones cotangent would hide transposed or misplaced adjoints).
"""
from __future__ import annotations

import warnings

import numpy as np

import tape


def fd_vjp(f, args, ct, wrt, h=1e-6):
    """Central-difference VJP of the NumPy function f at args: one array per index in wrt."""
    args = [np.array(a, dtype=np.float64) for a in args]
    ct = np.asarray(ct, dtype=np.float64)
    out = []
    for i in wrt:
        x = args[i]
        g = np.zeros(x.shape)
        for j in range(x.size):
            step = h * max(1.0, abs(x.flat[j]))
            acc = 0.0
            for sign in (1.0, -1.0):
                xp = x.copy()
                xp.flat[j] += sign * step
                a = list(args)
                a[i] = xp
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    acc += sign * float(np.sum(ct * np.asarray(f(*a), dtype=np.float64)))
            g.flat[j] = acc / (2.0 * step)
        out.append(g)
    return out


def tape_vjp(f, args, ct, wrt):
    """(value, grads): f on tensors (leaves at the indices in wrt, NumPy constants elsewhere)."""
    xs = [tape.tensor(np.array(a, dtype=np.float64), requires_grad=True) if i in wrt else
          np.array(a, dtype=np.float64) for i, a in enumerate(args)]
    out = f(*xs)
    value = np.array(out.numpy())
    ct = np.asarray(ct, dtype=np.float64)
    grads = tape.autograd.grad(out, [xs[i] for i in wrt], grad_outputs=ct)
    for i, g in zip(wrt, grads):
        assert np.shape(g) == np.shape(args[i]), (np.shape(g), np.shape(args[i]))
    return value, [np.asarray(g) for g in grads]


def check_vjp(f, args, wrt=None, rng=None, rtol=1e-6, atol=1e-7, h=1e-6, f_np=None):
    """Value of f on tensors equals f on arrays; its VJP with a random cotangent equals FD."""
    rng = np.random.default_rng(0) if rng is None else rng
    wrt = tuple(range(len(args))) if wrt is None else tuple(wrt)
    f_np = f if f_np is None else f_np
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.asarray(f_np(*[np.array(a, dtype=np.float64) for a in args]), dtype=np.float64)
    ct = rng.standard_normal(want.shape)
    value, grads = tape_vjp(f, args, ct, wrt)
    np.testing.assert_allclose(value, want, rtol=1e-14, atol=0)
    assert value.shape == want.shape
    num = fd_vjp(f_np, args, ct, wrt, h=h)
    for i, g, n in zip(wrt, grads, num):
        scale = max(1.0, float(np.max(np.abs(n), initial=0.0)))
        np.testing.assert_allclose(g, n, rtol=rtol, atol=atol * scale,
                                   err_msg=f"VJP of argument {i}")
    return grads
