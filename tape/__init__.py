"""tapejit: exact gradients of NumPy-style Python, recorded on a tape and swept in Numba.

>>> import numpy as np, tape
>>> w = tape.tensor(np.ones(3), requires_grad=True)
>>> loss = (np.sin(w) * w).sum()
>>> loss.backward()
>>> w.grad                                  # d/dw sum(sin(w) w) = cos(w) w + sin(w)
array([1.38177329, 1.38177329, 1.38177329])
"""
from .core import tensor_ops as _tensor_ops  # noqa: F401  (gives Tensor its operators)
from .escapes import (eigen as _eigen, expm as _expm, incomplete as _incomplete_rows,  # noqa: F401
                      inverse as _inverse, products as _products, qr as _qr,
                      special as _special, svd as _svd, triangular as _triangular)  # (each registers its rows in ESCAPES)
from .numpy_ops import _impl as _numpy_impl  # noqa: F401  (registers NumPy functions and Tensor methods)
from .numpy_ops import _einsum  # noqa: F401  (registers np.einsum)
from .numpy_ops import _compositions  # noqa: F401  (registers NumPy functions built from others)
from .numpy_ops import _shapes  # noqa: F401  (registers shape and manipulation compositions)
from .numpy_ops import _inplace  # noqa: F401  (registers np.copyto, np.put, ...: in-place writes)
from .numpy_ops import _signals  # noqa: F401  (registers signal and sampled-function compositions)
from .numpy_ops import _statistics  # noqa: F401  (registers statistics compositions)
from .numpy_ops import _polynomials  # noqa: F401  (registers np.poly* and numpy.polynomial's functions)
from . import special  # noqa: F401  (registers np.i0; scipy.special maps lazily)
from . import autograd, forward_ad, linalg, numpy  # (autograd installs Tensor.backward)
from . import scipy  # noqa: F401  (tape.scipy.linalg; SciPy itself is imported when a function runs)
from .core.state import enable_grad, is_grad_enabled, no_grad
from .core.tensor import Tensor, install as _install, tensor
from .functional import grad, value_and_grad, vjp
from .core.saved_variable import SavedVariable
from .memory import cached_bytes, empty_cache

# Loaded on first use (``__getattr__`` below): public names a gradient does not need, so that a
# new process's first gradient does not import them (tape.compile's 8 modules, the integrations,
# the jacobians, gradcheck). None of them registers anything at import. name -> (module, its
# attribute, or None for the module itself)
_ON_FIRST_USE = {
    "graph": ("tape.graph", None), "optimize": ("tape.optimize", None),
    "pipelining": ("tape.pipelining", None), "stats": ("tape.stats", None),
    "distributed": ("tape.distributed", None),  # (it imports Dask only when a client is passed)
    # (its linalg lists the numpy.linalg functions registered by then, so it loads after every
    # registration; Tensor.__array_namespace__ loads it too)
    "array_api": ("tape.array_api", None),
    "BackwardState": ("tape.replay.backward_state", "BackwardState"),
    "checkpoint": ("tape.transforms.checkpoint", "checkpoint"),
    **{n: ("tape.replay.compiled", n) for n in ("CompiledTape", "compile", "load")},
    **{n: ("tape.reverse.function", n) for n in ("Function", "FunctionCtx")},
    **{n: ("tape.transforms.gradcheck", n) for n in ("GradcheckError", "gradcheck",
                                                     "gradgradcheck")},
    **{n: ("tape.transforms.jacobians", n) for n in ("hessian", "hvp", "jacfwd", "jacobian",
                                                     "jacrev", "jvp", "linearize")},
}


class _TensorArrayApi:
    """The array API standard's entry points on Tensor (``install`` makes them Tensor's): here,
    because tape.array_api loads on first use, after every registration above."""

    def __array_namespace__(self, *, api_version=None):
        from . import array_api  # loaded on first use (see __getattr__ below)

        if api_version is not None and api_version not in array_api.API_VERSIONS:
            raise ValueError(f"tape.array_api implements the array API standard "
                             f"{array_api.__array_api_version__}; api_version={api_version!r} "
                             f"is not one of {array_api.API_VERSIONS}")
        return array_api

    def to_device(self, device, /, *, stream=None):
        from .array_api import to_device

        return to_device(self, device)


_install(_TensorArrayApi)

__version__ = "0.1.0"

__all__ = ["Tensor", "tensor", "BackwardState", "compile", "CompiledTape", "load", "checkpoint", "Function", "FunctionCtx", "SavedVariable",
           "no_grad", "enable_grad", "is_grad_enabled", "autograd", "graph", "numpy", "linalg",
           "pipelining", "forward_ad", "optimize", "jvp", "linearize", "jacfwd", "jacrev", "jacobian",
           "hessian", "hvp",
           "grad", "value_and_grad", "vjp", "gradcheck", "gradgradcheck", "GradcheckError",
           "empty_cache", "cached_bytes"]


def __getattr__(name):
    where = _ON_FIRST_USE.get(name)
    if where is None:
        raise AttributeError(f"module 'tape' has no attribute {name!r}")
    import importlib

    module_name, attribute = where
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value  # (later lookups find it without this function)
    return value


def __dir__():
    return sorted(set(globals()) | set(_ON_FIRST_USE))
