"""``__array_namespace_info__``: what the namespace supports, in the standard's shape."""
from . import _dtypes

DEVICE = "cpu"


def check_device(device, where):
    if device is not None and device != DEVICE:
        raise ValueError(f"tape.array_api.{where}: device {device!r} is not supported; tapejit "
                         f"runs on the CPU only (device='cpu' or None)")


class Info:
    """The namespace's inspection object (``xp.__array_namespace_info__()``)."""

    def capabilities(self):
        # boolean indexing and nonzero have data-dependent shapes: supported, as NumPy does
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self):
        return DEVICE

    def devices(self):
        return [DEVICE]

    def default_dtypes(self, *, device=None):
        check_device(device, "default_dtypes")
        return {"real floating": _dtypes.float64, "complex floating": None,
                "integral": _dtypes.int64, "indexing": _dtypes.int64}

    def dtypes(self, *, device=None, kind=None):
        check_device(device, "dtypes")
        return {name: dt for name, dt in _dtypes.SUPPORTED.items()
                if kind is None or _dtypes.isdtype(dt, kind)}


def __array_namespace_info__():
    return Info()
