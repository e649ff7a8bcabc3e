"""Hand-written gradients of the workloads: the "limit" column of WORKLOADS.md.

- W1 lorenz: an @njit adjoint (forward storing the trajectory, then the reverse loop).
- W3 elementwise: one fused @njit loop computing the value and the gradient in one pass.
- W4 mlp: hand-written NumPy backprop.

Each ``*_value_and_grad`` takes the same positional arguments as the workload's loss and returns
``(value, grads)`` with one gradient per differentiable argument, like ``tape.value_and_grad``.
The @njit functions use ``cache=True`` (Numba's on-disk cache, NUMBA_CACHE_DIR).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from workloads import LORENZ_DT, LORENZ_STEPS

# ---------------------------------------------------------------------------------------------
# W1 lorenz


@njit(cache=True)
def _lorenz_adjoint(sigma, rho, beta, dt, steps):
    xs = np.empty(steps + 1)
    ys = np.empty(steps + 1)
    zs = np.empty(steps + 1)
    x = y = z = 1.0
    xs[0], ys[0], zs[0] = x, y, z
    for i in range(steps):
        dx = sigma * (y - x)
        dy = x * (rho - z) - y
        dz = x * y - beta * z
        x = x + dt * dx
        y = y + dt * dy
        z = z + dt * dz
        xs[i + 1], ys[i + 1], zs[i + 1] = x, y, z
    value = x * x + y * y + z * z
    bx, by, bz = 2.0 * x, 2.0 * y, 2.0 * z
    bsigma = brho = bbeta = 0.0
    for i in range(steps - 1, -1, -1):
        x, y, z = xs[i], ys[i], zs[i]
        # adjoints of dx, dy, dz: x' = x + dt*dx, ...
        bdx, bdy, bdz = dt * bx, dt * by, dt * bz
        bsigma += bdx * (y - x)
        brho += bdy * x
        bbeta -= bdz * z
        nbx = bx - bdx * sigma + bdy * (rho - z) + bdz * y
        nby = by + bdx * sigma - bdy + bdz * x
        nbz = bz - bdy * x - bdz * beta
        bx, by, bz = nbx, nby, nbz
    g = np.empty(3)
    g[0], g[1], g[2] = bsigma, brho, bbeta
    return value, g


def lorenz_value_and_grad(p):
    value, g = _lorenz_adjoint(float(p[0]), float(p[1]), float(p[2]), LORENZ_DT, LORENZ_STEPS)
    return value, (g,)


# ---------------------------------------------------------------------------------------------
# W3 elementwise


@njit(cache=True)
def _elementwise_fused(x, g):
    total = 0.0
    for i in range(x.shape[0]):
        xi = x[i]
        x2 = xi * xi
        t = np.tanh(xi)
        e = np.exp(-x2)
        total += t * e + np.log1p(x2)
        g[i] = (1.0 - t * t) * e - 2.0 * xi * t * e + 2.0 * xi / (1.0 + x2)
    return total


def elementwise_value_and_grad(x):
    g = np.empty_like(x)
    return _elementwise_fused(x, g), (g,)


# ---------------------------------------------------------------------------------------------
# W4 mlp


def mlp_value_and_grad(W1, b1, W2, b2, X, y):
    batch = X.shape[0]
    h = np.tanh(X @ W1 + b1)
    logits = h @ W2 + b2
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    e = np.exp(shifted)
    s = np.sum(e, axis=1, keepdims=True)
    rows = np.arange(batch)
    value = -np.sum(shifted[rows, y] - np.log(s[:, 0])) / batch
    dlogits = e / s                       # softmax
    dlogits[rows, y] -= 1.0
    dlogits /= batch
    dW2 = h.T @ dlogits
    db2 = np.sum(dlogits, axis=0)
    dz = dlogits @ W2.T
    dz *= 1.0 - h * h
    dW1 = X.T @ dz
    db1 = np.sum(dz, axis=0)
    return float(value), (dW1, db1, dW2, db2)


REFERENCES = {
    "lorenz": lorenz_value_and_grad,
    "elementwise": elementwise_value_and_grad,
    "mlp": mlp_value_and_grad,
}
