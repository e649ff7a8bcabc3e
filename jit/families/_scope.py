"""The names family kernel bodies read besides their arguments, bound as the generated
interpreters bind them: raw-address access (``jit/_raw.py``) and the table's scalar helpers
(``jit.table.HELPERS``, run here from the same text the generators render). So each family
module imports and runs on its own: under ``NUMBA_DISABLE_JIT=1`` its bodies are plain Python.
"""
import math

import numpy as np
from numba import config

from .._cache import njit
from .._raw import _addr, _ld, _ld_word, _st
from ..table import HELPERS

__all__ = ["_addr", "_ld", "_ld_word", "_st", "_maximum", "_minimum", "_power_fast"]


def _helpers():
    """The HELPERS functions, defined in the names the generated modules give them."""
    names = {k: v for k, v in vars(math).items() if not k.startswith("_")}
    names.update(np=np, njit=njit, cbrt=np.cbrt)
    if config.DISABLE_JIT:  # NumPy's functions give the IEEE results Numba gives (inf, NaN)
        names.update(exp=np.exp, log=np.log, log1p=np.log1p, sqrt=np.sqrt)
    exec(compile(HELPERS, "<jit.table.HELPERS>", "exec"), names)
    return names


_HELPERS = _helpers()
_maximum = _HELPERS["_maximum"]
_minimum = _HELPERS["_minimum"]
_power_fast = _HELPERS["_power_fast"]
