"""The five reference workloads W1-W5 (see WORKLOADS.md), written as plain NumPy-style code.

Every loss runs unchanged on NumPy arrays (the primal) and on tapejit tensors (through NumPy's
``__array_function__``/``__array_ufunc__`` protocols), so ``tape.value_and_grad(loss,
argnums=...)`` differentiates exactly the code a scientist would write. This module imports only
NumPy and the standard library: the tests, the asv suite and the comparison scripts share it.

Each workload is a ``Workload`` record: ``inputs()`` draws the data with
``np.random.default_rng(0)`` in the documented order and returns the positional arguments of
``loss``; ``argnums`` names the differentiable ones; ``expected`` holds the reference value and the
per-input gradient norms and sums.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# ---------------------------------------------------------------------------------------------
# W1 lorenz: a scalar-heavy Python loop (about 14,000 scalar ops)

LORENZ_STEPS = 1000
LORENZ_DT = 0.001


def lorenz_inputs():
    return (np.array([10.0, 28.0, 8.0 / 3.0]),)


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


# ---------------------------------------------------------------------------------------------
# W2 gmm: the ADBench/GradBench Gaussian mixture objective, vectorized

GMM_D, GMM_K, GMM_N = 10, 25, 1000
GMM_GAMMA, GMM_M = 1.0, 0


def gmm_inputs(d=GMM_D, k=GMM_K, n=GMM_N):
    rng = np.random.default_rng(0)
    alphas = rng.normal(size=k)
    means = rng.uniform(size=(k, d))
    icf = 0.5 * rng.normal(size=(k, d * (d + 1) // 2))
    x = rng.normal(size=(n, d))
    return alphas, means, icf, x


def _gmm_index(d):
    """Flat gather index turning [exp(diag) (d), lower (d(d-1)/2, column-major), 0] into Q (d*d)."""
    zero = d * (d + 1) // 2  # the position of the appended zero
    idx = np.full((d, d), zero, dtype=np.intp)
    idx[np.arange(d), np.arange(d)] = np.arange(d)
    pos = d
    for col in range(d):
        for row in range(col + 1, d):
            idx[row, col] = pos
            pos += 1
    return idx.ravel()


def _log_multigamma(a, d):
    """log Gamma_d(a), the multivariate log-gamma function (a constant here: math.lgamma)."""
    return 0.25 * d * (d - 1) * math.log(math.pi) + sum(
        math.lgamma(a + 0.5 * (1 - j)) for j in range(1, d + 1))


def _gmm_constant(d, k, n, gamma=GMM_GAMMA, m=GMM_M):
    n_w = d + m + 1
    wishart = n_w * d * math.log(gamma / math.sqrt(2.0)) - _log_multigamma(0.5 * n_w, d)
    return -0.5 * n * d * math.log(2.0 * math.pi) - k * wishart


def gmm_loss(alphas, means, icf, x):
    k, d = means.shape
    n = x.shape[0]
    gamma, m = GMM_GAMMA, GMM_M
    log_diag = icf[:, :d]                                            # (k, d)
    diag = np.exp(log_diag)
    lower = icf[:, d:]                                               # (k, d(d-1)/2)
    packed = np.concatenate([diag, lower, np.zeros((k, 1))], axis=1)
    Q = np.reshape(packed[:, _gmm_index(d)], (k, d, d))              # Q_k, lower triangular
    centred = x[None, :, :] - means[:, None, :]                      # (k, n, d)
    Qx = np.matmul(centred, np.transpose(Q, (0, 2, 1)))              # (k, n, d): Q_k (x_i - mu_k)
    sum_qs = np.sum(log_diag, axis=1)                                # (k,)
    main = alphas[:, None] + sum_qs[:, None] - 0.5 * np.sum(Qx * Qx, axis=2)   # (k, n)
    mx = np.max(main, axis=0, keepdims=True)
    lse = np.log(np.sum(np.exp(main - mx), axis=0)) + mx[0]          # (n,)
    amax = np.max(alphas)
    lse_alphas = np.log(np.sum(np.exp(alphas - amax))) + amax
    frobenius = 0.5 * gamma * gamma * (np.sum(diag * diag) + np.sum(lower * lower))
    prior = frobenius - m * np.sum(sum_qs)
    return _gmm_constant(d, k, n, gamma, m) + np.sum(lse) - n * lse_alphas + prior


# ---------------------------------------------------------------------------------------------
# W3 elementwise: large arrays, memory-bound

ELEMENTWISE_N = 1_000_000


def elementwise_inputs(n=ELEMENTWISE_N):
    rng = np.random.default_rng(0)
    return (rng.normal(size=n),)


def elementwise_loss(x):
    return np.sum(np.tanh(x) * np.exp(-x * x) + np.log1p(x * x))


# ---------------------------------------------------------------------------------------------
# W4 mlp: BLAS-bound

MLP_BATCH = 256


def mlp_inputs():
    rng = np.random.default_rng(0)
    W1 = rng.normal(size=(784, 512)) / np.sqrt(784)
    b1 = 0.1 * rng.normal(size=512)
    W2 = rng.normal(size=(512, 10)) / np.sqrt(512)
    b2 = 0.1 * rng.normal(size=10)
    X = rng.normal(size=(MLP_BATCH, 784))
    y = rng.integers(0, 10, size=MLP_BATCH)
    return W1, b1, W2, b2, X, y


def mlp_loss(W1, b1, W2, b2, X, y):
    h = np.tanh(X @ W1 + b1)
    logits = h @ W2 + b2
    mx = np.max(logits, axis=1, keepdims=True)
    shifted = logits - mx
    logp = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    batch = X.shape[0]
    return -np.sum(logp[np.arange(batch), y]) / batch


# ---------------------------------------------------------------------------------------------
# W5 nbody: many small-array ops (about 3,600 ops on (16, 16, 3) arrays)

NBODY_STEPS = 200
NBODY_DT = 0.01
NBODY_EPS2 = 0.1


def nbody_inputs():
    rng = np.random.default_rng(0)
    pos0 = rng.normal(size=(16, 3))
    vel0 = 0.1 * rng.normal(size=(16, 3))
    masses = rng.uniform(0.5, 1.5, size=16)
    return pos0, vel0, masses


def _accel(pos, masses):
    diff = pos[None, :, :] - pos[:, None, :]
    r2 = np.sum(diff * diff, axis=2) + NBODY_EPS2
    w = masses[None, :] / (r2 * np.sqrt(r2))
    return np.sum(diff * w[:, :, None], axis=1)


def nbody_loss(pos0, vel0, masses):
    dt = NBODY_DT
    pos, vel = pos0, vel0
    acc = _accel(pos, masses)
    for _ in range(NBODY_STEPS):
        vel = vel + (0.5 * dt) * acc
        pos = pos + dt * vel
        acc = _accel(pos, masses)
        vel = vel + (0.5 * dt) * acc
    return 0.5 * np.sum(masses[:, None] * vel * vel)


# ---------------------------------------------------------------------------------------------
# Registry


@dataclass(frozen=True)
class Workload:
    name: str
    inputs: object        # () -> tuple of positional arguments of loss
    loss: object          # (*args) -> scalar
    argnums: tuple        # the differentiable arguments
    value: float          # reference value and per-input |grad| and sum(grad) (WORKLOADS.md)
    grad_norms: tuple
    grad_sums: tuple


WORKLOADS = {
    "lorenz": Workload(
        "lorenz", lorenz_inputs, lorenz_loss, (0,), 9.746008643300e+02,
        (3.353406921145e+02,), (3.523801831415e+02,)),
    "gmm": Workload(
        "gmm", gmm_inputs, gmm_loss, (0, 1, 2), -1.575918897748e+04,
        (1.825320422766e+02, 5.071450854397e+02, 7.364189463110e+02),
        (-2.842170943040e-14, -5.375662482737e+03, -7.614810457965e+03)),
    "elementwise": Workload(
        "elementwise", elementwise_inputs, elementwise_loss, (0,), 5.340915956436e+05,
        (9.448258125939e+02,), (1.520469171905e+05,)),
    "mlp": Workload(
        "mlp", mlp_inputs, mlp_loss, (0, 1, 2, 3), 2.544189521777e+00,
        (1.137304046586e+00, 3.469460974026e-02, 8.755450014147e-01, 5.145170225635e-02),
        (-2.297329404841e+00, -4.356826227705e-02, 2.888314587501e-16, -4.336808689942e-18)),
    "nbody": Workload(
        "nbody", nbody_inputs, nbody_loss, (0,), 4.998930380907e+01,
        (5.474070320139e+02,), (-3.410605131648e-13,)),
}
