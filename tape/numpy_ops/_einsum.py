"""np.einsum on tensors, lowered to the primitives tapejit already differentiates.

Each operand first loses what only it can settle: repeated labels become a diagonal (one gather,
whose index map is np.einsum applied to element ids), labels of size 1 that broadcast against a
larger size are dropped (the operand is constant along them), and labels nobody else needs are
summed. Operands are then folded left to right, each pair contracted by transposes, reshapes and
one matmul of shape (batch, M, K) @ (batch, K, N); a last transpose gives the output order.
"""
from __future__ import annotations

import math
import string

import numpy as np

from ..core import bilinear, record as rec
from ._dispatch import as_tensor, implements
from ._impl import _ids
from ._impl import sum as _sum

_LETTERS = string.ascii_letters


@implements(np.einsum)
def einsum(*operands, out=None, optimize=False, dtype=None, order="K", casting="safe"):
    """Einstein summation, as np.einsum (explicit, implicit, '...' and sublist forms).

    >>> a = tape.tensor(np.ones((2, 3)), requires_grad=True)
    >>> np.einsum("ij,j->i", a, np.arange(3.0))
    tensor([3., 3.], grad_fn)
    """
    if out is not None:
        raise TypeError("numpy.einsum: out= is not supported on tapejit tensors")
    if dtype is not None and np.dtype(dtype) != np.float64:
        raise TypeError(f"numpy.einsum: tapejit tensors are float64 (got dtype={dtype})")
    if not operands:
        raise ValueError("einsum: no subscripts given")
    if isinstance(operands[0], str):
        subscripts, ops = operands[0], list(operands[1:])
    else:
        subscripts, ops = _from_sublists(operands)
    ops = [as_tensor(x) for x in ops]
    ins, out_labels = _parse(subscripts, [x.shape for x in ops])
    return _contract(ins, out_labels, ops)


def _from_sublists(args):
    """einsum(op0, sublist0, op1, sublist1, ..., [sublistout]) -> a subscripts string."""
    args = list(args)
    out = args.pop() if len(args) % 2 else None

    def letters(sub):
        s = []
        for k in sub:
            if k is Ellipsis:
                s.append("...")
            else:
                k = int(k)
                if not 0 <= k < len(_LETTERS):
                    raise ValueError(f"einsum: subscript {k} is not in [0, {len(_LETTERS)})")
                s.append((string.ascii_uppercase + string.ascii_lowercase)[k])
        return "".join(s)

    ins = ",".join(letters(s) for s in args[1::2])
    return (ins if out is None else ins + "->" + letters(out)), args[0::2]


def _parse(subscripts, shapes):
    """Per-operand label strings and the output labels, with '...' expanded to fresh labels."""
    s = subscripts.replace(" ", "")
    explicit = "->" in s
    lhs, rhs = s.split("->", 1) if explicit else (s, None)
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum: {len(terms)} operand subscripts in {subscripts!r} for "
                         f"{len(shapes)} operands")
    for term in terms + ([rhs] if explicit else []):
        bad = set(term.replace("...", "")) - set(_LETTERS)
        if bad or term.count("...") > 1:
            raise ValueError(f"einsum: invalid subscripts {subscripts!r} (labels are letters, "
                             "with at most one '...' per operand)")
    used = set(lhs.replace("...", "").replace(",", ""))
    free = [c for c in _LETTERS if c not in used]
    n_ell = 0
    ell_terms = []
    for term, shape in zip(terms, shapes):
        k = len(shape) - len(term.replace("...", ""))
        if ("..." in term and k < 0) or ("..." not in term and k != 0):
            raise ValueError(f"einsum: operand of shape {shape} does not match subscripts "
                             f"{term!r}")
        ell_terms.append(k if "..." in term else 0)
        n_ell = max(n_ell, ell_terms[-1])
    if n_ell > len(free):
        raise ValueError("einsum: too many dimensions under '...'")
    ell = "".join(free[:n_ell])  # broadcast dims are right-aligned, as in NumPy
    ins = [t.replace("...", ell[n_ell - k:] if k else "") for t, k in zip(terms, ell_terms)]
    if explicit:
        if "..." in rhs:
            out = rhs.replace("...", ell)
        elif n_ell:
            raise ValueError("einsum: output has more dimensions than subscripts given, but no "
                             "'...' ellipsis provided to broadcast the extra dimensions")
        else:
            out = rhs
        for c in out:
            if out.count(c) > 1:
                raise ValueError(f"einsum: output subscript {c!r} appears more than once")
            if c not in used and c not in ell:
                raise ValueError(f"einsum: output subscript {c!r} never appeared in an input")
    else:
        counts = {}
        for c in lhs.replace("...", "").replace(",", ""):
            counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1))
    return ins, out


def _contract(ins, out, ops):
    sizes = {}
    for labels, x in zip(ins, ops):
        for c, n in zip(labels, x.shape):
            m = sizes.get(c, 1)
            if n != m and n != 1 and m != 1:
                raise ValueError(f"einsum: label {c!r} has size {m} in one operand and {n} in "
                                 f"another (operand shapes {[x.shape for x in ops]})")
            sizes[c] = max(m, n)
    terms = []
    for labels, x in zip(ins, ops):
        x, labels = _diagonal(x, labels)
        # a size-1 label broadcast against a larger size: the operand is constant along it
        drop = [i for i, c in enumerate(labels) if x.shape[i] == 1 and sizes[c] > 1]
        if drop:
            keep = [i for i in range(len(labels)) if i not in drop]
            x = _reshape(x, tuple(x.shape[i] for i in keep))
            labels = "".join(labels[i] for i in keep)
        terms.append((x, labels))
    x, lx = terms[0]
    x, lx = _sum_private(x, lx, out + "".join(lab for _, lab in terms[1:]))
    for j in range(1, len(terms)):
        y, ly = terms[j]
        later = out + "".join(lab for _, lab in terms[j + 1:])
        x, lx = _sum_private(x, lx, later + ly)
        y, ly = _sum_private(y, ly, later + lx)
        x, lx = _pair(x, lx, y, ly, later)
    x, lx = _sum_private(x, lx, out)
    return rec.transpose(x, tuple(lx.index(c) for c in out)) if len(out) > 1 else x


def _diagonal(x, labels):
    """Collapse repeated labels of one operand: a gather by np.einsum of element ids."""
    uniq = "".join(dict.fromkeys(labels))
    if uniq == labels:
        return x, labels
    for c in uniq:
        dims = {x.shape[i] for i, d in enumerate(labels) if d == c}
        if len(dims) > 1:
            raise ValueError(f"einsum: dimensions for repeated label {c!r} don't match "
                             f"(operand shape {x.shape}, subscripts {labels!r})")
    idx = np.einsum(f"{labels}->{uniq}", _ids(x.shape))
    return rec.gather(x, np.ascontiguousarray(idx, dtype=np.int64)), uniq


def _sum_private(x, labels, others):
    """Sum the labels of x that appear nowhere in `others`."""
    axes = tuple(i for i, c in enumerate(labels) if c not in others)
    if not axes:
        return x, labels
    return _sum(x, axis=axes), "".join(c for c in labels if c in others)


def _pair(x, lx, y, ly, later):
    """Contract two operands whose private labels are already summed: one (batched) matmul."""
    batch = [c for c in lx if c in ly and c in later]
    con = [c for c in lx if c in ly and c not in later]
    fx = [c for c in lx if c not in ly]
    fy = [c for c in ly if c not in lx]
    dim = dict(zip(lx, x.shape))
    dim.update(zip(ly, y.shape))
    B = math.prod(dim[c] for c in batch)
    M = math.prod(dim[c] for c in fx)
    K = math.prod(dim[c] for c in con)
    N = math.prod(dim[c] for c in fy)
    xt = rec.transpose(x, tuple(lx.index(c) for c in batch + fx + con)) if len(lx) > 1 else x
    yt = rec.transpose(y, tuple(ly.index(c) for c in batch + con + fy)) if len(ly) > 1 else y
    if batch:
        xm, ym = _reshape(xt, (B, M, K)), _reshape(yt, (B, K, N))
    else:
        xm, ym = _reshape(xt, (M, K)), _reshape(yt, (K, N))
    z = bilinear.matmul(xm, ym)
    labels = "".join(batch + fx + fy)
    return _reshape(z, tuple(dim[c] for c in labels)), labels


def _reshape(x, shape):
    return x if x.shape == shape else rec.reshape(x, shape)
