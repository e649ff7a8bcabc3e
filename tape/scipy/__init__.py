"""``tape.scipy``: SciPy functions on tensors, where SciPy's own cannot see them.

SciPy's functions convert their arguments with ``np.asarray`` (they take no part in NumPy's
dispatch protocols), which a tensor that carries a gradient refuses; these record instead.
Importing this package does not import SciPy: a function that needs it imports it when called.
"""
from . import linalg  # noqa: F401

__all__ = ["linalg"]
