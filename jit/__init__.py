"""tapejit's arithmetic: the primitive table and the Numba interpreters rendered from it.

Only NumPy arrays and integers cross this boundary; nothing here imports ``tape``. The jitted
entry points live in the generated module ``jit._interp`` and are imported on first use, so that
``import tape`` does not pay for Numba until a gradient is asked for.
"""
import enum

from .table import FAMILIES, OPCODE, TABLE, table_hash
from ._eager_values import BINARY_ENTRIES

# need bit 4 (besides 1 and 2, operand a / b): the reverse sweep zeroes the row's adjoint once
# swept, so that a compiled tape's arena is clean for its next call
CLEAR = 4
# need bit 8: the row's adjoint is read and written only inside the blocked run that sweeps the
# row, so it lives in a block-sized scratch, never in the arena (set by ``local_pass``)
LOCAL = 8
# need bit 16, on a full sum that closes a forward run: when one call sweeps the whole tape both
# ways, the run's reverse is done inside its forward, block by block, from the sum's adjoint on
# the last call (1 on the first), and the reverse sweep scales the result by a power of two or
# sweeps the run again from the real adjoint (set by ``seed_pass``, for sums whose adjoint is
# the same on every call)
SEEDED = 16
# need bits 32 / 64: the row alone adds to operand a's / b's adjoint (an escape row's, whose rule
# reads it): the sweep zeroes that block just before adding, while in cache, in place of the
# escape zeroing it after reading, a pass over memory (set by tape.replay.compiled's plans)
FRESH_A = 32
FRESH_B = 64
# need bit 128, with SEEDED, in the masks of a value-only replay: the seeded run computes its
# values in scratch and its sum, and no reverse (tape.replay.compiled's value calls)
VALUES = 128
# need bits 1 / 2: operand a's / b's adjoint is needed (set by the need pass)
NEED_A = 1
NEED_B = 2


class Need(enum.IntFlag):
    """The bits of a row's entry in a need mask, named (the module's plain ints above are what
    the hot paths use: an IntFlag operand makes each & an enum call)."""
    A = NEED_A
    B = NEED_B
    CLEAR = CLEAR
    LOCAL = LOCAL
    SEEDED = SEEDED
    FRESH_A = FRESH_A
    FRESH_B = FRESH_B
    VALUES = VALUES

# (the eager recorder's elementwise entries: the unary one, and one per group of binary rows
# that ``jit._eager_values.BINARY_ENTRIES`` names, which the generator renders from it too)
ENTRY_POINTS = ("data_pointers", "need_pass", "local_pass", "seed_pass", "run_pass",
                "reverse_run_pass", "scalar_sweep", "array_sweep", "common_sweep",
                "common_run_sweep", "common_lines_sweep", "rare_sweep", "eager_sweep", "sweep",
                "elementwise_unary", *BINARY_ENTRIES)
# the small per-tape passes of an eager backward (hand-written, in ``jit._plan``)
PLANS = ("build_tape", "arena_offsets", "whole_prepare", "whole_arena", "whole_outputs",
         "mark_swept", "unread_values")
# Python wrappers of ``sweep`` with one of its two ranges empty
SWEEPS = ("reverse_sweep", "forward_sweep")
# the eager backward's reverse, in tiers loaded as it needs them (``jit._tiers``), and the eager
# recorder's elementwise values, by entry points loaded as its rows need them
# (``jit._eager_values``)
TIERED = ("eager_reverse", "elementwise")
# the scipy.special rows' own kernels (escapes of the main sweeps, rendered into
# ``jit._special_sweep``): compiled the first time a recording uses one of those rows
SPECIAL = ("special_value", "special_partial")
# the incomplete gamma and beta functions' kernels (``jit._incomplete``): compiled the first
# time a recording uses one, and not by ``warmup`` (few users need them)
INCOMPLETE = ("incgamma", "incbeta")

# what ``warmup`` loads or compiles: (module, entry point), in order (``jit._warm``)
WARMUP = ([("jit._interp", n) for n in ENTRY_POINTS] + [("jit._tangent", "tangent_sweep")]
          + [("jit._plan", n) for n in PLANS] + [("jit._special_sweep", n) for n in SPECIAL]
          + [("jit._spin", n) for n in ("spin_wait", "serve", "gemm_batch")]
          + [("jit._line_sums", "line_sums")])

__all__ = ["TABLE", "OPCODE", "FAMILIES", "table_hash", "warmup", "tangent_sweep", *PLANS,
           *SWEEPS, *TIERED, *ENTRY_POINTS, *SPECIAL, *INCOMPLETE]


def __getattr__(name):
    from ._cache import load

    if name in ENTRY_POINTS:
        from . import _interp as module
    elif name in SWEEPS:
        from . import _interp as module
        load(module, "sweep")
    elif name in TIERED:  # (each tier or entry is loaded at its first call)
        from . import _eager_values, _tiers

        value = globals()[name] = getattr(_tiers if name == "eager_reverse" else _eager_values,
                                          name)
        return value
    elif name == "tangent_sweep":  # forward mode, rendered into its own module
        from . import _tangent as module
    elif name in PLANS:
        from . import _plan as module
    elif name in SPECIAL:
        from . import _special_sweep as module
    elif name in INCOMPLETE:
        from . import _incomplete as module
    else:
        raise AttributeError(f"module 'jit' has no attribute {name!r}")
    value = globals()[name] = load(module, name)  # (later lookups skip this function: a
    return value  # compiled call makes several, ~3 us each)


def warmup(verbose: bool = False, workers: int = 1) -> float:
    """Compile every entry point for its one signature (or load it from the cache,
    ``jit._cache.cache_dir()``); with workers = 2, the costly ``sweep`` compiles in a second
    process meanwhile (``jit._warm``).

    Returns the seconds it took. ``python -m jit.warmup`` runs this once after install, with two
    workers on a machine with two cores or more.
    """
    from ._warm import run

    return run(WARMUP, verbose=verbose, workers=workers)
