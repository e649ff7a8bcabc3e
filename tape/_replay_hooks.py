"""Hooks in compiled replay: what a recording registered, found once when it is recorded.

A replay runs no Python of f, so every hook f registered while recording is either run by the
replay or refused here, at recording, naming its kind and the line that registered it: none is
ever dropped in silence.
"""
from __future__ import annotations

from ._hooks import StatePoint
from ._tensor import Tensor


def _kind(fn):
    if type(fn) is StatePoint:
        return f"a BackwardState hook state.hook(..., {fn.name!r})"
    if "_MultiGradHook" in getattr(fn, "__qualname__", ""):
        return "a register_multi_grad_hook hook"
    return "a tensor hook (register_hook)"


def found(t, leaves, log):
    """[(kind, "file:line")] of every hook the recording on tape `t` with inputs `leaves`
    registered (`log`: the recording's GuardLog, which noted where)."""
    sites = log.hook_sites
    out = []
    for slot, h in sorted((t.hooks or {}).items()):
        for key, fn in h.hooks.items():
            out.append((_kind(fn), getattr(fn, "where", None) or sites.get(key, "?")))
        if h.retain:
            out.append(("retain_grad", sites.get(("retain", slot), "?")))
    for leaf in leaves:
        m = leaf._meta if type(leaf) is Tensor else None
        if m is None:
            continue
        for key, fn in m.hooks.items():
            out.append((_kind(fn) + " on an input", sites.get(key, "?")))
        for key in m.post_hooks:
            out.append(("a post-accumulate-grad hook", sites.get(key, "?")))
    return out


def refuse(hooks):
    kind, where = hooks[0]
    more = f" (and {len(hooks) - 1} more)" if len(hooks) > 1 else ""
    raise NotImplementedError(
        f"tape.compile: f registers {kind} at {where}{more}, which a replay would not run. "
        "Use tape.value_and_grad (eager) for this function, or remove the hook.")


def refuse_saved_hooks():
    raise NotImplementedError(
        "a compiled tape replays inside saved_tensors_hooks: a replay keeps its values in its "
        "own buffers and would call neither pack nor unpack. Call it outside the context, or "
        "use tape.value_and_grad (eager) there.")
