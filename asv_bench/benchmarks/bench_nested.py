"""asv benchmarks of nested derivatives: gradients inside gradients, at every step of a loop.

- ``NestedSteps``: GradBench's saddle/particle shape, the gradient in x of K steps of an inner
  gradient descent ``y = y - 0.1 * grad_p(-f(x, p))(y)``, f a quadratic of 2-vectors, at
  K = 10 and K = 160. Its time divided by K is the cost of one inner step: flat in K (each
  inner step sweeps only its own rows; ``tests/test_nested_scaling.py`` counts them), target
  within 2x of PyTorch's ``create_graph=True`` per step.
- ``NestedVariants``: the same loop (K = 20) with the inner and the outer derivative each by
  reverse (``tape.grad``) or forward mode (``tape.jacfwd``): ``rr``, ``rf``, ``fr``, ``ff``,
  outer letter first (GradBench's names).
- ``GradOfGrad`` and ``JacfwdOfGrad``: one second derivative of the same f (reverse over
  reverse, forward over reverse); target within 2x of PyTorch.
- ``SmallGrad``: the fixed cost of one first-order ``tape.grad`` call, an 8-op function of a
  2-vector; target <= 50 us.

The PyTorch columns (float64, one thread) need torch importable and skip otherwise: reverse
inner derivatives by ``torch.autograd.grad(create_graph=True)``, forward ones by
``torch.func.jacfwd``.
"""
import numpy as np

import tape
import torch_workloads
from _setup_once import setup_once

X0 = np.array([0.3, 0.7])
Y0 = np.array([1.0, -0.5])


def f(x, p):
    return np.sum(x * p) - np.sum((x - p) ** 2)


def small(x):  # 8 recorded ops
    a = x * 2.0
    b = np.sin(a)
    c = b * x
    d = c + 1.0
    e = np.exp(-d)
    h = e * e
    return np.sum(h - x)


def _inner(mode):
    if mode == "r":
        return lambda x, y: tape.grad(lambda p: -f(x, p))(y)
    return lambda x, y: tape.jacfwd(lambda p: -f(x, p))(y)


def steps(K, variant="rr"):
    """The outer derivative (variant[0]) of K inner steps (variant[1])."""
    inner = _inner(variant[1])

    def body(x):
        y = Y0
        for _ in range(K):
            y = y - 0.1 * inner(x, y)
        return np.sum(y * y) + np.sum(x)

    return (tape.grad if variant[0] == "r" else tape.jacfwd)(body)


# -- PyTorch (imported only when available) -----------------------------------------------------

def _torch():
    if not torch_workloads.available():
        raise NotImplementedError("torch is not installed")
    import torch

    torch.set_num_threads(1)
    return torch


def _torch_f(torch):
    def tf(x, p):
        return torch.sum(x * p) - torch.sum((x - p) ** 2)

    return tf


def _torch_steps(torch, K, variant):
    tf = _torch_f(torch)
    from torch.func import grad, jacfwd

    def inner(x, y):
        if variant[1] == "f":
            return jacfwd(lambda p: -tf(x, p))(y)
        p = y.detach().requires_grad_(True) if not y.requires_grad else y
        (g,) = torch.autograd.grad(-tf(x, p), p, create_graph=True)
        return g

    def body(x):
        y = torch.tensor(Y0, dtype=torch.float64)
        for _ in range(K):
            y = y - 0.1 * inner(x, y)
        return torch.sum(y * y) + torch.sum(x)

    x0 = torch.tensor(X0, dtype=torch.float64)
    if variant == "rr":
        def run():
            x = x0.clone().requires_grad_(True)
            (g,) = torch.autograd.grad(body(x), x)
            return g
        return run
    if variant[1] == "f":  # torch.func transforms all the way
        def body_func(x):
            y = torch.tensor(Y0, dtype=torch.float64)
            for _ in range(K):
                y = y - 0.1 * jacfwd(lambda p: -tf(x, p))(y)
            return torch.sum(y * y) + torch.sum(x)
        outer = grad if variant[0] == "r" else jacfwd
        return lambda: outer(body_func)(x0)

    def body_fr(x):  # forward outer over reverse inner: the inner by torch.func.grad
        y = torch.tensor(Y0, dtype=torch.float64)
        for _ in range(K):
            y = y - 0.1 * grad(lambda p: -tf(x, p))(y)
        return torch.sum(y * y) + torch.sum(x)

    return lambda: jacfwd(body_fr)(x0)


# -- benchmarks ---------------------------------------------------------------------------------

class NestedSteps:
    params = [10, 160]
    param_names = ["K"]
    timeout = 300

    @setup_once
    def setup(self, K):
        self.fn = steps(K)
        self.fn(X0)

    def time_tapejit(self, K):
        self.fn(X0)


class NestedStepsTorch:
    params = [10, 160]
    param_names = ["K"]
    timeout = 300

    @setup_once
    def setup(self, K):
        self.run = _torch_steps(_torch(), K, "rr")
        self.run()

    def time_torch(self, K):
        self.run()


class NestedVariants:
    params = ["rr", "rf", "fr", "ff"]
    param_names = ["variant"]
    timeout = 300

    @setup_once
    def setup(self, variant):
        self.fn = steps(20, variant)
        self.fn(X0)

    def time_tapejit(self, variant):
        self.fn(X0)


class NestedVariantsTorch:
    params = ["rr", "rf", "fr", "ff"]
    param_names = ["variant"]
    timeout = 300

    @setup_once
    def setup(self, variant):
        self.run = _torch_steps(_torch(), 20, variant)
        self.run()

    def time_torch(self, variant):
        self.run()


def _second(outer):
    inner = tape.grad(lambda p: f(X0, p))
    return outer(lambda p: np.sum(inner(p) * np.array([1.0, 2.0])))


class GradOfGrad:
    @setup_once
    def setup(self):
        self.fn = _second(tape.grad)
        self.fn(Y0)

    def time_tapejit(self):
        self.fn(Y0)


class GradOfGradTorch:
    @setup_once
    def setup(self):
        torch = _torch()
        tf = _torch_f(torch)
        x = torch.tensor(X0, dtype=torch.float64)
        w = torch.tensor([1.0, 2.0], dtype=torch.float64)
        y0 = torch.tensor(Y0, dtype=torch.float64)

        def run():
            p = y0.clone().requires_grad_(True)
            (g,) = torch.autograd.grad(tf(x, p), p, create_graph=True)
            (h,) = torch.autograd.grad(torch.sum(g * w), p)
            return h

        self.run = run
        run()

    def time_torch(self):
        self.run()


class JacfwdOfGrad:
    @setup_once
    def setup(self):
        self.fn = tape.jacfwd(tape.grad(lambda p: f(X0, p)))
        self.fn(Y0)

    def time_tapejit(self):
        self.fn(Y0)


class JacfwdOfGradTorch:
    @setup_once
    def setup(self):
        torch = _torch()
        from torch.func import grad, jacfwd

        tf = _torch_f(torch)
        x = torch.tensor(X0, dtype=torch.float64)
        y0 = torch.tensor(Y0, dtype=torch.float64)
        fn = jacfwd(grad(lambda p: tf(x, p)))
        self.run = lambda: fn(y0)
        self.run()

    def time_torch(self):
        self.run()


class SmallGrad:
    @setup_once
    def setup(self):
        self.fn = tape.grad(small)
        self.fn(X0)

    def time_tapejit(self):
        self.fn(X0)


class SmallGradTorch:
    @setup_once
    def setup(self):
        torch = _torch()
        x0 = torch.tensor(X0, dtype=torch.float64)

        def run():
            x = x0.clone().requires_grad_(True)
            a = x * 2.0
            b = torch.sin(a)
            c = b * x
            d = c + 1.0
            e = torch.exp(-d)
            h = e * e
            (g,) = torch.autograd.grad(torch.sum(h - x), x)
            return g

        self.run = run
        run()

    def time_torch(self):
        self.run()
