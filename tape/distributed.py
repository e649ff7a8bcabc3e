"""``tape.distributed``: gradients mapped over a Dask cluster.

The public path of :mod:`tape.integrations.distributed`, where the code lives."""
from .integrations.distributed import (  # noqa: F401
    map_value_and_grad, warmup
)
from .integrations.distributed import __all__  # noqa: F401
