"""Custom Functions (tape.Function) the suites share. Not a test module."""
from __future__ import annotations

import tape


class Cube(tape.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3.0 * x ** 2 * g


class Twice(tape.Function):
    """2x, with a reverse rule and no forward-mode one."""
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return g * 2.0
