"""Reverse mode, PyTorch-style: ``backward`` into ``.grad``, or ``grad`` returning gradients."""
from __future__ import annotations

import numpy as np

from . import backward as _backward, graph_backward as _graph_backward
from ..core.tensor import Tensor, install


def _as_list(x):
    if x is None:
        return None
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _seeds(outputs, grad_outputs, keep=False):
    grad_outputs = _as_list(grad_outputs) or [None] * len(outputs)
    if len(grad_outputs) != len(outputs):
        raise ValueError(f"got {len(grad_outputs)} gradients for {len(outputs)} outputs")
    seeds = []
    for i, (o, g) in enumerate(zip(outputs, grad_outputs)):
        if type(o) is not Tensor:
            raise TypeError(f"outputs[{i}] is a {type(o).__name__}, not a tape tensor")
        if g is None:
            if o.size != 1:
                raise RuntimeError(
                    f"grad can be implicitly created only for scalar outputs: output {i} has "
                    f"shape {o.shape}. Pass a gradient of that shape (e.g. np.ones_like), or "
                    "reduce the output to a scalar first.")
            seeds.append(np.ones(o.shape))
            continue
        gv = np.asarray(g._v if type(g) is Tensor else g, dtype=np.float64)
        if gv.shape != o.shape:
            raise RuntimeError(f"mismatch in shape: grad_outputs[{i}] has shape {gv.shape} and "
                               f"output[{i}] has shape {o.shape}")
        seeds.append(g if keep and type(g) is Tensor else gv)  # a seed with history, kept
    return seeds


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False):
    """Accumulate the gradients of `tensors` into the ``.grad`` of every leaf they depend on.

    With ``create_graph=True`` the backward is itself recorded: ``.grad`` becomes a tensor with
    history, which can be differentiated again (and the graph is kept).
    """
    tensors = _as_list(tensors)
    if create_graph:
        _graph_backward.run_graph(tensors, _seeds(tensors, grad_tensors, keep=True))
        return
    _backward.run(tensors, _seeds(tensors, grad_tensors), None, bool(retain_graph))


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False):
    """Gradients of `outputs` with respect to `inputs` (leaves or intermediate tensors).

    Returns a tuple of NumPy arrays, one per input; ``.grad`` is left untouched. With
    ``create_graph=True`` they are tensors with history (the backward is recorded), so they can
    be differentiated again: ``grad(grad(y, x, create_graph=True)[0].sum(), x)``.

    >>> x = tape.tensor(2.0, requires_grad=True)
    >>> tape.autograd.grad(x * x, x)
    (array(4.),)
    """
    outputs = _as_list(outputs)
    inputs = _as_list(inputs)
    for i, x in enumerate(inputs):
        if type(x) is not Tensor or not x.requires_grad:
            raise RuntimeError(f"inputs[{i}] does not require grad: mark it with "
                               "requires_grad=True before recording")
    if create_graph:
        res = _graph_backward.run_graph(outputs, _seeds(outputs, grad_outputs, keep=True),
                                        inputs)
    else:
        res = _backward.run(outputs, _seeds(outputs, grad_outputs), inputs, bool(retain_graph))
    for i, g in enumerate(res):
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    f"inputs[{i}] (shape {inputs[i].shape}) was not used to compute the outputs. "
                    "Pass allow_unused=True to get None for it.")
        elif not create_graph:
            res[i] = g.reshape(inputs[i].shape)  # (an array: the method skips np's dispatch)
    return tuple(res)


class TensorBackward:
    """``Tensor.backward`` (``install`` makes it Tensor's)."""

    def backward(self, gradient=None, retain_graph=None, create_graph=False):
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (seeded with ``gradient``);
        with ``create_graph=True`` the backward is recorded, for higher derivatives."""
        backward([self], None if gradient is None else [gradient], retain_graph=retain_graph,
                 create_graph=create_graph)


install(TensorBackward)
