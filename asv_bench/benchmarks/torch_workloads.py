"""The workloads W1-W5 written in PyTorch (float64, eager), op for op as in workloads.py.

PyTorch is never a dependency of tapejit: this module imports torch only inside ``available()`` and
the functions below, so asv can collect the suite (and skip the PyTorch benchmarks) without it.
Used by bench_workloads.py and by asv_bench/compare_peer.py (run with a Python that has torch).
"""
from __future__ import annotations

import math

from workloads import (LORENZ_DT, LORENZ_STEPS, NBODY_DT, NBODY_EPS2, NBODY_STEPS,
                       _gmm_constant, _gmm_index)


def available():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _torch():
    import torch

    return torch


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


def make_gmm_loss(d, k, n):
    torch = _torch()
    idx = torch.as_tensor(_gmm_index(d), dtype=torch.long)
    const = _gmm_constant(d, k, n)

    def gmm_loss(alphas, means, icf, x):
        log_diag = icf[:, :d]
        diag = torch.exp(log_diag)
        lower = icf[:, d:]
        packed = torch.cat([diag, lower, torch.zeros((k, 1), dtype=icf.dtype)], dim=1)
        Q = packed[:, idx].reshape(k, d, d)
        centred = x[None, :, :] - means[:, None, :]
        Qx = torch.matmul(centred, Q.transpose(1, 2))
        sum_qs = torch.sum(log_diag, dim=1)
        main = alphas[:, None] + sum_qs[:, None] - 0.5 * torch.sum(Qx * Qx, dim=2)
        mx = torch.amax(main, dim=0, keepdim=True)
        lse = torch.log(torch.sum(torch.exp(main - mx), dim=0)) + mx[0]
        amax = torch.amax(alphas)
        lse_alphas = torch.log(torch.sum(torch.exp(alphas - amax))) + amax
        frobenius = 0.5 * (torch.sum(diag * diag) + torch.sum(lower * lower))
        return const + torch.sum(lse) - n * lse_alphas + frobenius

    return gmm_loss


def elementwise_loss(x):
    torch = _torch()
    return torch.sum(torch.tanh(x) * torch.exp(-x * x) + torch.log1p(x * x))


def mlp_loss(W1, b1, W2, b2, X, y):
    torch = _torch()
    h = torch.tanh(X @ W1 + b1)
    logits = h @ W2 + b2
    mx = torch.amax(logits, dim=1, keepdim=True)
    shifted = logits - mx
    logp = shifted - torch.log(torch.sum(torch.exp(shifted), dim=1, keepdim=True))
    batch = X.shape[0]
    return -torch.sum(logp[torch.arange(batch), y]) / batch


def _accel(pos, masses):
    torch = _torch()
    diff = pos[None, :, :] - pos[:, None, :]
    r2 = torch.sum(diff * diff, dim=2) + NBODY_EPS2
    w = masses[None, :] / (r2 * torch.sqrt(r2))
    return torch.sum(diff * w[:, :, None], dim=1)


def nbody_loss(pos0, vel0, masses):
    torch = _torch()
    dt = NBODY_DT
    pos, vel = pos0, vel0
    acc = _accel(pos, masses)
    for _ in range(NBODY_STEPS):
        vel = vel + (0.5 * dt) * acc
        pos = pos + dt * vel
        acc = _accel(pos, masses)
        vel = vel + (0.5 * dt) * acc
    return 0.5 * torch.sum(masses[:, None] * vel * vel)


def value_and_grad(name, args, argnums):
    """A zero-argument callable computing the PyTorch eager value and gradient of workload `name`.

    `args` are the NumPy inputs from workloads.py; they are converted once, outside the timing.
    """
    torch = _torch()
    tensors = [torch.as_tensor(a) for a in args]          # float64 stays float64, y stays int64
    if name == "gmm":
        d = args[1].shape[1]
        loss = make_gmm_loss(d, args[1].shape[0], args[3].shape[0])
    else:
        loss = {"lorenz": lorenz_loss, "elementwise": elementwise_loss, "mlp": mlp_loss,
                "nbody": nbody_loss}[name]

    def run():
        xs = list(tensors)
        for i in argnums:
            xs[i] = tensors[i].detach().requires_grad_(True)
        out = loss(*xs)
        grads = torch.autograd.grad(out, [xs[i] for i in argnums])
        return out.item(), tuple(g.numpy() for g in grads)

    return run


def check(name, args, workload, rel=1e-9):
    """Assert the PyTorch version reproduces WORKLOADS.md's value and per-input |grad|."""
    v, grads = value_and_grad(name, args, workload.argnums)()
    if not math.isclose(v, workload.value, rel_tol=rel):
        raise AssertionError(f"torch {name}: value {v!r} != {workload.value!r}")
    for g, norm in zip(grads, workload.grad_norms):
        gn = math.sqrt(float((g * g).sum()))
        if not math.isclose(gn, norm, rel_tol=rel):
            raise AssertionError(f"torch {name}: |grad| {gn!r} != {norm!r}")
