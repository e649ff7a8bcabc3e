"""Backward for pipeline-parallel schedules (names as torch.distributed.pipelining's).

A pipeline stage's backward has two parts with different urgency: the gradients with respect to
the stage's *inputs* (B), which the previous stage is waiting for, and those with respect to its
*weights* (W), which can wait. Zero-bubble schedules run B as soon as the output gradient arrives
and fill the pipeline's idle slots with deferred W's::

    dinputs, groups = tape.pipelining.stage_backward_input(out, dout, [x], weights)
    send(dinputs)                                          # the previous stage can go on
    ...
    tape.pipelining.stage_backward_weight(weights, groups)  # later: weights' .grad

B sweeps only the rows on a path from the inputs to the outputs and computes only the operand
gradients on that path; W sweeps the rest from the frontier B kept. Together they do the work
of one full backward, and give its result. ``stage_backward`` is the unsplit version.
"""
from __future__ import annotations

import numpy as np

from ..reverse import split as _split
from ..core.tensor import Tensor
from ..reverse.autograd import _seeds, backward

__all__ = ["stage_backward", "stage_backward_input", "stage_backward_weight"]


def _pairs(outputs, grads):
    """(tensor, gradient) for every output that requires grad, walking tuples, lists and dicts
    in parallel; non-tensors and outputs without history are skipped."""
    out = []

    def walk(o, g):
        if type(o) is Tensor:
            if o.requires_grad:
                out.append((o, g))
        elif isinstance(o, (tuple, list)):
            gs = g if isinstance(g, (tuple, list)) else [None] * len(o)
            if len(gs) != len(o):
                raise ValueError(f"{len(gs)} output gradients for {len(o)} outputs")
            for oi, gi in zip(o, gs):
                walk(oi, gi)
        elif isinstance(o, dict):
            for k, oi in o.items():
                walk(oi, g.get(k) if isinstance(g, dict) else None)

    walk(outputs, grads)
    return out


def _describe(x):
    if type(x) is Tensor or isinstance(x, np.ndarray):
        return f"{'Tensor' if type(x) is Tensor else 'ndarray'}{tuple(x.shape)}"
    if isinstance(x, (tuple, list)):
        inner = ", ".join(_describe(v) for v in x)
        return f"({inner})" if isinstance(x, tuple) else f"[{inner}]"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in x.items()) + "}"
    return type(x).__name__


def _failure(what, outputs, grads, inputs, e):
    return RuntimeError(f"Failed to run {what}:\n"
                        f"Stage output: {_describe(outputs)}\n"
                        f"Output gradient: {_describe(grads)}\n"
                        f"Input: {_describe(inputs)}\n"
                        f"({type(e).__name__}: {e})")


def stage_backward(stage_output, output_grads, input_values):
    """One full backward of a stage: gradients accumulate into the ``.grad`` of every leaf
    (weights and inputs); returns the gradient of each input (None where none reached it)."""
    try:
        pairs = _pairs(stage_output, output_grads)
        if not pairs:
            return [None] * len(input_values)
        outs = [o for o, _ in pairs]
        for x in input_values:  # non-leaf inputs: keep their gradient like .grad
            if type(x) is Tensor and x.requires_grad and not x.is_leaf:
                x.retain_grad()
        backward(outs, [g for _, g in pairs])
        return [x.grad if type(x) is Tensor and x.requires_grad else None for x in input_values]
    except Exception as e:
        raise _failure("stage backward", stage_output, output_grads, input_values, e) from e


def stage_backward_input(stage_outputs_or_loss, output_grads, input_values, weights):
    """B: gradients of the stage inputs, now. Returns ``(dinputs, param_groups)``.

    Sweeps only the rows on a path from `input_values` to the outputs and computes only the
    operand gradients on that path (a matmul there computes dX, not dW). Keeps the adjoints of
    the frontier where weight-only paths branch off and releases the values neither phase needs.
    Leaf inputs also accumulate into ``.grad``. Pass `param_groups` to ``stage_backward_weight``.
    """
    weights = list(weights)
    inputs = [x for x in input_values if type(x) is Tensor and x.requires_grad]
    pos = [i for i, x in enumerate(input_values) if type(x) is Tensor and x.requires_grad]
    for i, w in enumerate(weights):
        if type(w) is not Tensor or not w.is_leaf or not w.requires_grad:
            raise TypeError(f"stage_backward_input: weights[{i}] must be a leaf tensor that "
                            f"requires grad (got {_describe(w)})")
        if any(w is x for x in inputs):
            raise ValueError(f"stage_backward_input: weights[{i}] is also an input")
    try:
        pairs = _pairs(stage_outputs_or_loss, output_grads)
        roots = [o for o, _ in pairs]
        seeds = _seeds(roots, [g for _, g in pairs]) if roots else []
    except Exception as e:
        raise _failure("stage backward input", stage_outputs_or_loss, output_grads,
                       input_values, e) from e
    d, groups = _split.input_phase(roots, seeds, inputs, weights)
    dinputs = [None] * len(input_values)
    for i, g in zip(pos, d):
        dinputs[i] = g
    return dinputs, groups


def stage_backward_weight(weights, param_groups, retain_graph=False):
    """W: gradients of the weights, accumulated into their ``.grad``, from what
    ``stage_backward_input`` kept. Without `retain_graph` the stage's graph is freed."""
    if not isinstance(param_groups, _split.SplitBackward):
        raise TypeError("stage_backward_weight needs the param_groups returned by "
                        "stage_backward_input: run the input phase (B) first")
    _split.weight_phase(param_groups, list(weights), retain_graph)
