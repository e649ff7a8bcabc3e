"""Sums of the contiguous lines of an array, in NumPy's order, for the eager recorder.

``np.add.reduce`` over the last axis of a C-contiguous (P, R) array calls its inner loop once per
line, and for short lines that call costs more than the additions (W2's 25,000 lines of 10:
~600 us). This loop gives the same bits (each line 0.0 plus NumPy's pairwise sum of it, as the
replay's ``forward_sum`` computes it) without the per-line call. Its own small entry point: a
jitted caller of the sweep would compile the sweep again.
"""
from math import inf

from ._cache import njit
from ._raw import _ld_word, _st
from .families.reduce import _pairwise, _pairwise_leaf

SIG_LINE_SUMS = "int64(int64, int64, int64, int64, int64)"


@njit(cache=True, nogil=True, error_model="numpy")
def line_sums(a, y, P, R, field):
    """y[p] = the sum of a's line p (R contiguous float64 values), p < P; returns 1 when every
    sum is finite, else 0 (the caller then lets NumPy compute them again, with its warnings).

    a, y: the arrays' objects (``id``) with the byte offset of the data pointer inside one
    (``field``), or, for field < 0, their data addresses (as ``jit.elementwise``); the caller
    keeps them alive."""
    pa = a if field < 0 else _ld_word(a + field)
    py = y if field < 0 else _ld_word(y + field)
    finite = True
    if R <= 128:
        for p in range(P):
            s = 0.0 + _pairwise_leaf(pa, p * R, R)
            _st(py, p, s)
            finite &= abs(s) < inf
    else:
        for p in range(P):
            s = 0.0 + _pairwise(pa, p * R, R)
            _st(py, p, s)
            finite &= abs(s) < inf
    return 1 if finite else 0
