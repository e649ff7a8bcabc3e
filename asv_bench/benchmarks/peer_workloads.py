"""The workloads W1-W5 for the array-library peers HIPS autograd and JAX (float64), op for op as in
workloads.py.

Both peers mimic NumPy's namespace (``autograd.numpy``, ``jax.numpy``), so each loss is written
once against a namespace ``xp`` (``make_losses(xp)``). Neither peer is ever a dependency of
tapejit: this module imports them only inside ``available()`` and the functions below, so asv can
collect the suite (and skip the peer benchmarks) without them.

JAX: ``jax_enable_x64`` is switched on before any array is made, and only W2/W3/W4 are measured,
through ``jax.jit(jax.value_and_grad(...))``: W1 and W5 take over a minute to compile under jit
(WORKLOADS.md), and are too slow eagerly to be a useful comparison.
"""
from __future__ import annotations

import importlib
import math

import numpy as np

from workloads import (LORENZ_DT, LORENZ_STEPS, NBODY_DT, NBODY_EPS2, NBODY_STEPS,
                       _gmm_constant, _gmm_index)

PEERS = ("autograd", "jax")
JAX_WORKLOADS = ("gmm", "elementwise", "mlp")


def available(peer):
    try:
        importlib.import_module(peer)
    except ImportError:
        return False
    return True


def make_losses(xp):
    """The five losses written against the NumPy-like namespace `xp`."""

    def lorenz_loss(p):
        sigma, rho, beta = p[0], p[1], p[2]
        dt = LORENZ_DT
        x = y = z = 1.0
        for _ in range(LORENZ_STEPS):
            dx = sigma * (y - x)
            dy = x * (rho - z) - y
            dz = x * y - beta * z
            x = x + dt * dx
            y = y + dt * dy
            z = z + dt * dz
        return x * x + y * y + z * z

    def gmm_loss(alphas, means, icf, x):
        k, d = means.shape
        n = x.shape[0]
        log_diag = icf[:, :d]
        diag = xp.exp(log_diag)
        lower = icf[:, d:]
        packed = xp.concatenate([diag, lower, xp.zeros((k, 1))], axis=1)
        Q = xp.reshape(packed[:, _gmm_index(d)], (k, d, d))
        centred = x[None, :, :] - means[:, None, :]
        Qx = xp.matmul(centred, xp.transpose(Q, (0, 2, 1)))
        sum_qs = xp.sum(log_diag, axis=1)
        main = alphas[:, None] + sum_qs[:, None] - 0.5 * xp.sum(Qx * Qx, axis=2)
        mx = xp.max(main, axis=0, keepdims=True)
        lse = xp.log(xp.sum(xp.exp(main - mx), axis=0)) + mx[0]
        amax = xp.max(alphas)
        lse_alphas = xp.log(xp.sum(xp.exp(alphas - amax))) + amax
        frobenius = 0.5 * (xp.sum(diag * diag) + xp.sum(lower * lower))
        return _gmm_constant(d, k, n) + xp.sum(lse) - n * lse_alphas + frobenius

    def elementwise_loss(x):
        return xp.sum(xp.tanh(x) * xp.exp(-x * x) + xp.log1p(x * x))

    def mlp_loss(W1, b1, W2, b2, X, y):
        h = xp.tanh(X @ W1 + b1)
        logits = h @ W2 + b2
        mx = xp.max(logits, axis=1, keepdims=True)
        shifted = logits - mx
        logp = shifted - xp.log(xp.sum(xp.exp(shifted), axis=1, keepdims=True))
        batch = X.shape[0]
        return -xp.sum(logp[np.arange(batch), y]) / batch

    def _accel(pos, masses):
        diff = pos[None, :, :] - pos[:, None, :]
        r2 = xp.sum(diff * diff, axis=2) + NBODY_EPS2
        w = masses[None, :] / (r2 * xp.sqrt(r2))
        return xp.sum(diff * w[:, :, None], axis=1)

    def nbody_loss(pos0, vel0, masses):
        dt = NBODY_DT
        pos, vel = pos0, vel0
        acc = _accel(pos, masses)
        for _ in range(NBODY_STEPS):
            vel = vel + (0.5 * dt) * acc
            pos = pos + dt * vel
            acc = _accel(pos, masses)
            vel = vel + (0.5 * dt) * acc
        return 0.5 * xp.sum(masses[:, None] * vel * vel)

    return {"lorenz": lorenz_loss, "gmm": gmm_loss, "elementwise": elementwise_loss,
            "mlp": mlp_loss, "nbody": nbody_loss}


def _autograd_value_and_grad(name, args, argnums):
    import autograd
    import autograd.numpy as anp

    vg = autograd.value_and_grad(make_losses(anp)[name], argnum=tuple(argnums))

    def run():
        v, grads = vg(*args)
        return float(v), tuple(np.asarray(g) for g in grads)

    return run


def _jax_value_and_grad(name, args, argnums):
    if name not in JAX_WORKLOADS:
        raise NotImplementedError(f"jax {name}: not measured (jit compile > 60 s, eager too slow)")
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    vg = jax.jit(jax.value_and_grad(make_losses(jnp)[name], argnums=tuple(argnums)))
    arrays = [jax.device_put(a) for a in args]   # converted once, outside the timing

    def run():
        v, grads = jax.block_until_ready(vg(*arrays))
        return float(v), grads

    return run


def value_and_grad(peer, name, args, argnums):
    """A zero-argument callable computing `peer`'s value and gradient of workload `name`.

    `args` are the NumPy inputs from workloads.py. For JAX the first call compiles.
    """
    make = {"autograd": _autograd_value_and_grad, "jax": _jax_value_and_grad}[peer]
    return make(name, args, argnums)


def check(peer, name, args, workload, rel=1e-9):
    """Assert the peer reproduces WORKLOADS.md's value and per-input |grad|."""
    v, grads = value_and_grad(peer, name, args, workload.argnums)()
    if not math.isclose(v, workload.value, rel_tol=rel):
        raise AssertionError(f"{peer} {name}: value {v!r} != {workload.value!r}")
    for g, norm in zip(grads, workload.grad_norms):
        g = np.asarray(g)
        gn = math.sqrt(float((g * g).sum()))
        if not math.isclose(gn, norm, rel_tol=rel):
            raise AssertionError(f"{peer} {name}: |grad| {gn!r} != {norm!r}")


if __name__ == "__main__":
    from workloads import WORKLOADS

    for peer in PEERS:
        if not available(peer):
            print(f"{peer}: not installed")
            continue
        for name, w in WORKLOADS.items():
            if peer == "jax" and name not in JAX_WORKLOADS:
                continue
            check(peer, name, w.inputs(), w)
            print(f"{peer} {name}: ok")
