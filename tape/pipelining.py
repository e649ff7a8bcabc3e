"""``tape.pipelining``: split backward for pipeline parallelism.

The public path of :mod:`tape.integrations.pipelining`, where the code lives."""
from .integrations.pipelining import (  # noqa: F401
    stage_backward, stage_backward_input, stage_backward_weight
)
from .integrations.pipelining import __all__  # noqa: F401
