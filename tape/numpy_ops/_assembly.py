"""Arrays assembled from the elements of several inputs: concatenate, stack, pad, diag.

``assemble(fn, xs)`` records the result as a constant base (the fill and the inputs that need
no gradient) and one flat scatter row per input that needs one. Where each output element comes
from is fn applied to element ids; for the functions whose placement depends only on the
inputs' shapes and fn's parameters (``key``) it is worked out once per shapes and kept
(``_PLANS``): W2's concatenate of three blocks spent more on placing ids than on recording.
"""
from __future__ import annotations

import numpy as np

from ..core import record as rec
from ..core.record import gather
from ..core.tensor import plain
from ._dispatch import as_tensor

_PLANS = {}  # (key, the inputs' shapes) -> _Placement
_MAX_PLANS = 256
_MAX_KEPT = 1 << 20  # output elements of the placements kept (~9 bytes each), all keys together
_kept = [0]


class _Placement:
    """Where an assembled output's elements come from: input i's elements have the ids
    offs[i]..offs[i+1]-1 (-1 is the fill), `first` is the first output element's id (-1 for an
    empty output), and per input its output positions `pos[i]`, the flat index into the input
    each one reads `src[i]` (None: the input's own order, so the scatter reads the input itself)
    and all-true win flags. Read-only arrays, shared by every tape recorded with them."""
    __slots__ = ("offs", "first", "size", "pos", "src", "win")

    def __init__(self, fn, xs):
        offs = np.cumsum([0] + [x.size for x in xs])
        ids = [np.arange(offs[i], offs[i + 1], dtype=np.int64).reshape(x.shape)
               for i, x in enumerate(xs)]
        self.offs = offs.tolist()
        flat = np.asarray(fn(ids, -1)).reshape(-1)
        self.first = int(flat[0]) if flat.size else -1
        self.size = flat.size
        self.pos, self.src, self.win = [], [], []
        for i, x in enumerate(xs):
            pos = np.flatnonzero((flat >= offs[i]) & (flat < offs[i + 1]))
            src = flat[pos] - offs[i]
            self.pos.append(_frozen(pos))
            self.src.append(None if np.array_equal(src, np.arange(x.size)) else _frozen(src))
            self.win.append(_frozen(np.ones(pos.size, bool)))


def _frozen(a):
    a.setflags(write=False)
    return a


def assemble(fn, xs, fill_value=0.0, key=None):
    """Outputs built from the elements of several inputs (and constant fill).

    fn(list of id arrays, fill id) applied to element ids says where each output element comes
    from; the value is the same function applied to the values. `key`: fn's name and parameters
    when they and the inputs' shapes alone decide where each element goes (hashable), so the
    placement is kept for the next call with those shapes.
    """
    xs = [as_tensor(x) for x in xs]
    place = pk = None
    if key is not None:
        pk = (key, tuple(x.shape for x in xs))
        try:
            place = _PLANS.get(pk)
        except TypeError:  # (a parameter that is not hashable: fn raises NumPy's own error)
            pk = None
    if place is None:
        place = _Placement(fn, xs)
        if pk is not None and place.size <= _MAX_KEPT:
            if len(_PLANS) >= _MAX_PLANS or _kept[0] + place.size > _MAX_KEPT:
                _PLANS.clear()
                _kept[0] = 0
            _PLANS[pk] = place
            _kept[0] += place.size
    vals = [np.asarray(x._v) for x in xs]
    value = np.asarray(fn(vals, fill_value), dtype=np.float64)
    if not rec.recording(*xs):
        return plain(rec.check_dtype(value, "assemble"))
    offs = place.offs
    if value.ndim == 0:  # one element: a gather from the input that holds it, or a constant
        for i, x in enumerate(xs):
            if offs[i] <= place.first < offs[i + 1]:
                return gather(x, np.array(place.first - offs[i], dtype=np.int64))
        return plain(float(value))
    base = value.copy().reshape(-1)
    grad_xs = [(i, x) for i, x in enumerate(xs) if x.requires_grad]
    for i, _ in grad_xs:
        base[place.pos[i]] = 0.0
    y = plain(rec.check_dtype(base.reshape(value.shape), "assemble"))
    for i, x in grad_xs:
        src = place.src[i]
        piece = x if src is None else gather(x, src)
        # (each output element has one source: every write wins, no index map to unravel)
        y = rec.scatter_flat(y, piece, place.pos[i], place.win[i], value.shape)
    return y
