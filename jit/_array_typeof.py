"""Numba's type of a NumPy array argument, without importing ``numpy.ma``.

The first time a process passes an array of some dtype, dimension count and layout to a jitted
function, Numba types it in Python (``Dispatcher.typeof_pyval``, then a process-wide table of
type codes answers in C). Its rule for arrays first asks ``isinstance(val, np.ma.MaskedArray)``,
and that attribute makes NumPy import ``numpy.ma``: ~25 ms of CPU and ~1,200 objects in a new
process's first gradient, for a question whose answer is no for an object of type exactly
``np.ndarray``. So tapejit's entry points type such an array by the rest of the same rule
(dtype, dimensions, layout, read-only), which gives Numba's type (``tests/test_array_typeof.py``
checks it against ``numba.typeof``), and hand everything else to Numba's own typing.
"""
from __future__ import annotations

import numpy as np


def install(dispatcher) -> None:
    """Type exact NumPy arrays passed to `dispatcher` as Numba does, less the masked-array
    check. Nothing changes for a plain function (NUMBA_DISABLE_JIT) or on a Numba laid out
    otherwise."""
    if "typeof_pyval" in getattr(dispatcher, "__dict__", {}):
        return  # (installed)
    try:
        from numba.core import types
        from numba.core.errors import NumbaNotImplementedError
        from numba.np.numpy_support import from_dtype, map_layout

        numba_typeof = dispatcher.typeof_pyval
        active = dispatcher._types_active_call  # (Numba keeps the types of a call alive here)
    except (ImportError, AttributeError):
        return

    def typeof_pyval(val):
        if type(val) is not np.ndarray:
            return numba_typeof(val)
        try:
            dtype = from_dtype(val.dtype)
        except NumbaNotImplementedError:  # (Numba's own typing names the dtype in its error)
            return numba_typeof(val)
        tp = types.Array(dtype, val.ndim, map_layout(val), readonly=not val.flags.writeable)
        active.add(tp)
        return tp

    dispatcher.typeof_pyval = typeof_pyval  # (Numba's C dispatcher looks the method up by name)
