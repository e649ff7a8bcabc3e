"""Small helpers the composition modules share (``_statistics``, ``_shapes``, ``_signals``,
``_compositions``)."""
from __future__ import annotations

import numpy as np

from ..core.record import normalize_axes
from ..core.tensor import raw


def ndim_of(x):
    """ndim of a tensor or an array-like."""
    return np.ndim(raw(x))


def one_axis(axis, ndim):
    """A single axis, normalized (negative counts from the end; out of range raises)."""
    return normalize_axes(axis, ndim)[0]


def nan_mask(a):
    """NaN positions (a plain bool array: a mask carries no gradient; guarded in replay, as every
    comparison of a recorded value is)."""
    return np.asarray(np.isnan(a))
