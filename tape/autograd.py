"""``tape.autograd``: backward and grad (``torch.autograd``'s names).

The public path of :mod:`tape.reverse.autograd`, where the code lives."""
from .reverse.autograd import (  # noqa: F401
    backward, grad
)
