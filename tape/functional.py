"""``tape.functional``: grad, value_and_grad and vjp of functions.

The public path of :mod:`tape.transforms.functional`, where the code lives."""
from .transforms.functional import (  # noqa: F401
    grad, value_and_grad, vjp
)
