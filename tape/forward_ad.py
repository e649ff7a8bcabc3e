"""``tape.forward_ad``: forward-mode dual numbers (``torch.autograd.forward_ad``'s names).

The public path of :mod:`tape.forward.forward_ad`, where the code lives."""
from .forward.forward_ad import (  # noqa: F401
    UnpackedDualTensor, dual_level, enter_dual_level, exit_dual_level, exit_levels_from,
    make_dual, unpack_dual
)
from .forward.forward_ad import __all__  # noqa: F401
