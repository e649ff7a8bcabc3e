"""asv benchmarks of the commonest shape of a model fit: a few scalar parameters against a large
data set (least squares of a decaying exponential over 10^6 points, the gradient with respect
to its amplitude and rate), replayed, eager and as the NumPy primal alone in the same run; JAX's
jit beside them when JAX is installed (``make bench-jax``).

It exercises what the W1-W5 workloads do not: array rows whose needed operand is a scalar (each
such adjoint sums 10^6 terms) and ``** 2`` with a scalar exponent.
"""
import numpy as np

import tape
from _setup_once import setup_once

N = 1_000_000


def data(n=N):
    rng = np.random.default_rng(0)
    t = np.linspace(0.0, 5.0, n)
    y = 2.0 * np.exp(-0.7 * t) + 0.01 * rng.normal(size=n)
    return t, y


def loss(a, b, t, y):
    return np.sum((a * np.exp(-b * t) - y) ** 2)


class LeastSquaresScalarParameters:
    timeout = 180

    @setup_once
    def setup(self):
        self.t, self.y = data()
        self.args = (2.1, 0.65, self.t, self.y)
        self.cf = tape.compile(loss, *self.args, argnums=(0, 1))
        self.cf.value_and_grad(*self.args)
        self.vg = tape.value_and_grad(loss, argnums=(0, 1))

    def time_replay_value_and_grad(self):
        self.cf.value_and_grad(*self.args)

    def time_replay_value(self):
        self.cf(*self.args)

    def time_eager_value_and_grad(self):
        self.vg(*self.args)

    def time_numpy_primal(self):
        loss(*self.args)


class LeastSquaresScalarParametersJax:
    timeout = 180

    @setup_once
    def setup(self):
        try:
            import jax
            import jax.numpy as jnp
        except ImportError:
            raise NotImplementedError("JAX is not installed") from None
        jax.config.update("jax_enable_x64", True)
        t, y = data()
        self.t, self.y = jnp.asarray(t), jnp.asarray(y)
        self.jax = jax
        self.f = jax.jit(jax.value_and_grad(
            lambda a, b, t, y: jnp.sum((a * jnp.exp(-b * t) - y) ** 2), argnums=(0, 1)))
        jax.block_until_ready(self.f(2.1, 0.65, self.t, self.y))

    def time_jax_jit_grad(self):
        self.jax.block_until_ready(self.f(2.1, 0.65, self.t, self.y))
