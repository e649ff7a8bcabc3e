"""Hooks in compiled replay: what a recording registered, found once when it is recorded.

A replay runs no Python of f, so every hook f registered while recording is either run by the
replay (tensor hooks, BackwardState points, multi-grad hooks, hooks on inputs; saved-tensor
hooks around a call) or refused, naming its kind and the line that registered it: none is ever
dropped in silence. A saved tape keeps its BackwardState points by name.
"""
from __future__ import annotations

import numpy as np

from jit.table import OPCODE, TABLE

from ..core.hooks import SlotHooks, StatePoint, run_hooks
from ..core.saved_variable import SavedVariable
from ..core.tensor import Tensor
from ..reverse.backward import last_readers


def _kind(fn):
    if type(fn) is StatePoint:
        return f"a BackwardState hook state.hook(..., {fn.name!r})"
    if "_MultiGradHook" in getattr(fn, "__qualname__", ""):
        return "a register_multi_grad_hook hook"
    return "a tensor hook (register_hook)"


def found(t, leaves, log):
    """[(kind, "file:line", hook)] of every hook the recording on tape `t` with inputs
    `leaves` registered (`log`: the recording's GuardLog, which noted where)."""
    sites = log.hook_sites
    out = []
    for slot, h in sorted((t.hooks or {}).items() if t is not None else ()):
        for key, fn in h.hooks.items():
            out.append((_kind(fn), getattr(fn, "where", None) or sites.get(key, "?"), fn))
        if h.retain:
            out.append(("retain_grad", sites.get(("retain", slot), "?"), None))
    for leaf in leaves:
        m = leaf._meta if type(leaf) is Tensor else None
        if m is None:
            continue
        for key, fn in m.hooks.items():
            out.append((_kind(fn) + " on an input", sites.get(key, "?"), fn))
        for key, fn in m.post_hooks.items():
            out.append(("a post-accumulate-grad hook", sites.get(key, "?"), fn))
    return out


class ReplayHooks:
    """The hooks a replay runs, fixed when f is recorded, each looked up when the backward
    reaches it (a hook removed since is not called; a BackwardState member is read then):

    - hooks on non-leaf tensors (``register_hook``, ``state.hook``, multi-grad hooks): at their
      slot, between jitted segments of the reverse sweep, as eager runs them (``sweep_segments``);
    - hooks on inputs (argnums): on the gradient handed out, once per input, as eager's
      ``tape.value_and_grad`` runs them on the leaf's total gradient.

    ``retain_grad`` and post-accumulate hooks do what they do under eager's
    ``tape.value_and_grad``: nothing, since a replay returns gradients and accumulates no
    ``.grad``. A multi-grad hook fires once at the end of each replay's backward."""

    def __init__(self, slots, sites):
        self.slots = slots  # hooked slots, ascending
        self.sites = sites  # [(kind, "file:line", hook)] of every hook, for refusals

    def run_on_inputs(self, leaves, nums, grads, slots, state):
        """Run the hooks of the inputs `nums` on their gradients `grads` (in place): once per
        input reached (at `slots`, None where not) even when it is named twice, in the order
        of their slots, as eager delivers leaves."""
        at = {}  # slot -> positions in grads
        for k, (i, s) in enumerate(zip(nums, slots)):
            if s is not None and leaves[i]._meta.hooks:
                at.setdefault(s, []).append(k)
        for s in sorted(at):
            ks = at[s]
            g = np.asarray(grads[ks[0]])
            g = run_hooks(leaves[nums[ks[0]]]._meta.hooks, g, f"an input of shape {g.shape}",
                          state)
            g = np.float64(g) if np.ndim(g) == 0 else g
            for k in ks:
                grads[k] = g


def plan(t, leaves, nums, log):
    """The ReplayHooks of a recording on tape `t` with inputs `leaves` (gradients taken with
    respect to `nums`), or None when it registered none a replay must run. A hook on an input
    outside `nums` would never see a gradient (eager passes that argument as an array, which
    takes no hook): refused."""
    for i, x in enumerate(leaves):
        if i not in nums and type(x) is Tensor and x._meta is not None and x._meta.hooks:
            sites = found(None, [x], log)
            refuse(sites, "tape.compile", f"argument {i} is not in argnums, so no gradient of "
                   "it is computed; add it to argnums or remove the hook")
    slots = sorted(s for s, h in (t.hooks or {}).items() if h.hooks)
    inputs = any(type(x) is Tensor and x._meta is not None and x._meta.hooks for x in leaves)
    return ReplayHooks(slots, found(t, leaves, log)) if slots or inputs else None


def raise_late():
    raise RuntimeError(
        "a hook was registered on a tensor of a compiled tape's recording after it was "
        "recorded: a replay runs only the hooks f registers while recording. Register it "
        "inside f (tape.compile records f again: compile it anew).")


def refuse_saved_hooks(what):
    raise NotImplementedError(
        f"{what} inside saved_tensors_hooks: a replay's values stay in its own buffers, and "
        f"{what} would call neither pack nor unpack. Call cf.value_and_grad or cf.grad there "
        "(they pack and unpack as eager does), or call it outside the context.")


def pack_and_unpack(t, A, need):
    """What eager does with ``saved_tensors_hooks`` active around a backward, for a replay
    whose forward has run: pack every array value the recording saves (every array row but
    the inputs, in row order), then unpack those the reverse sweep with `need` reads, in the
    order eager's sweep reaches them (the latest reader first), into the rows' buffers, so
    that the sweep reads what unpack returned. (Eager unpacks segment by segment to bound
    memory; a replay's buffers exist anyway, so it unpacks before the sweep.) Returns the
    constants' own values [(slot, value)] to put back after the sweep (``restore``): no
    forward recomputes a constant row."""
    slots = np.flatnonzero(A.is_array & (A.code != OPCODE["leaf"]))
    saved = {int(s): SavedVariable(np.array(t.value(s)), f"op '{TABLE[A.code[s]].name}'")
             for s in slots}
    last = last_readers(A, need)
    const = OPCODE["const"]
    kept = []
    for _, s in sorted(((int(last[s]), s) for s in saved if last[s] >= 0), reverse=True):
        if A.code[s] == const:
            kept.append((s, np.array(t.value(s))))
        t.store(s, saved.pop(s).value())
    return kept


def restore(t, kept):
    for s, value in kept:
        t.store(s, value)


def refuse(sites, what, fix):
    kind, where, _ = sites[0]
    more = f" (and {len(sites) - 1} more)" if len(sites) > 1 else ""
    raise NotImplementedError(f"{what}: the recording has {kind} registered at {where}{more}, "
                              f"which {what} cannot run; {fix}.")


def saved_points(variant):
    """[{slot, name, where}] of the recording's BackwardState points, for ``cf.save``: a
    saved tape keeps them by name. Any other hook is code, not data: refused, named."""
    h = variant.hooks
    if h is None:
        return []
    points, t = [], variant.t
    for s in h.slots:
        for fn in t.hooks[s].hooks.values():
            if type(fn) is not StatePoint:
                kind, where = next((k, w) for k, w, hook in h.sites if hook is fn)
                raise ValueError(
                    f"CompiledTape.save: the recording has {kind} at {where}: a hook is code, "
                    "which a saved tape does not hold. Use a tape.BackwardState point "
                    "(state.hook(x, 'name')), which a loaded tape binds by name.")
            points.append({"slot": int(s), "name": fn.name, "where": fn.where})
    for k, where, _ in h.sites:
        if k.endswith("on an input"):
            raise ValueError(f"CompiledTape.save: the recording has {k} at {where}: a hook is "
                             "code, which a saved tape does not hold.")
    return points


def load_points(t, points, shapes, state):
    """The ReplayHooks of a loaded tape: its saved points call `state`'s members by name."""
    if not points:
        return None
    t.hooks = {}
    for p in points:
        s = p["slot"]
        h = t.hooks.get(s)
        if h is None:
            h = t.hooks[s] = SlotHooks(shapes[s])
        h.hooks[len(h.hooks)] = StatePoint(state, p["name"], p["where"])
    return ReplayHooks(sorted(t.hooks), [(_kind(fn), fn.where, fn) for h in t.hooks.values()
                                         for fn in h.hooks.values()])
