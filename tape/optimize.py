"""``tape.optimize``: ``scipy.optimize.minimize`` with exact gradients and Hessians.

The public path of :mod:`tape.integrations.optimize`, where the code lives."""
from .integrations.optimize import (  # noqa: F401
    Objective, minimize
)
