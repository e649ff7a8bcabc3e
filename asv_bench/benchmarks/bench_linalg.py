"""asv benchmarks of the linear-algebra escapes (tape/escapes/): for each decomposition of a
100 x 100 matrix, NumPy's own call, the same call recording on the tape, and an eager gradient,
in the same run; and a Gaussian-process negative log marginal likelihood (cholesky,
solve_triangular, the log of L's diagonal) as a user writes it, its gradient eager and replayed.
"""
import numpy as np

import tape
from _setup_once import setup_once

N = 100


def spd(n, seed=0):
    q = np.random.default_rng(seed).normal(size=(n, n))
    return q @ q.T + n * np.eye(n)


def _first(x):
    return x[0] if isinstance(x, tuple) else x


class Decompositions:
    params = ["cholesky", "eigh", "svd", "qr"]
    param_names = ["function"]
    timeout = 120

    @setup_once
    def setup(self, name):
        self.a = spd(N)
        self.fn = getattr(np.linalg, name)
        self.x = tape.tensor(self.a, requires_grad=True)
        self.grad = tape.grad(lambda x: np.sum(_first(self.fn(x))))

    def time_numpy(self, name):
        self.fn(self.a)

    def time_recorded(self, name):
        self.fn(self.x)

    def time_grad(self, name):
        self.grad(self.a)


def gp_nll(theta, x, y):
    import tape.scipy.linalg as tsl

    ell, sf, sn = np.exp(theta[0]), np.exp(theta[1]), np.exp(theta[2])
    k = sf ** 2 * np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / ell ** 2) \
        + (sn ** 2 + 1e-8) * np.eye(x.size)
    L = np.linalg.cholesky(k)
    z = tsl.solve_triangular(L, y, lower=True)
    return 0.5 * np.sum(z * z) + np.sum(np.log(np.diagonal(L)))


class GaussianProcess:
    timeout = 120

    @setup_once
    def setup(self):
        rng = np.random.default_rng(0)
        self.x = np.sort(rng.uniform(0.0, 10.0, 200))
        self.y = np.sin(self.x) + 0.1 * rng.normal(size=200)
        self.theta = np.array([0.1, 0.2, -1.0])
        self.vg = tape.value_and_grad(gp_nll)
        self.cf = tape.compile(gp_nll, self.theta, self.x, self.y)
        self.cf.value_and_grad(self.theta, self.x, self.y)

    def time_eager_value_and_grad(self):
        self.vg(self.theta, self.x, self.y)

    def time_replay_value_and_grad(self):
        self.cf.value_and_grad(self.theta, self.x, self.y)
