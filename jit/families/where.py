"""where: y = a where a mask holds, else b (the select family).

Attribute layout at the row's int offset: the index-map offsets of a and b (used with flags
MAP_A / MAP_B, see ``elementwise.broadcast_reads``), then the mask, one int per element
(``layouts.encode_where``).
"""
from ._scope import _ld, _st
from .elementwise import broadcast_reads


# every mode reads the flags and the index maps first
PROLOGUE = broadcast_reads


def forward_where(n, iat, pa, pb, py, IA, sta, stb, ma, mb):
    """y[j] = a[j] where the row's mask is set, else b[j] (operands read at stride 0 or 1, or
    through an index map)."""
    mk = iat + 2  # the mask follows the two index-map offsets
    for j in range(n):
        if IA[mk + j]:
            v = _ld(pa, IA[ma + j] if ma >= 0 else j * sta)
        else:
            v = _ld(pb, IA[mb + j] if mb >= 0 else j * stb)
        _st(py, j, v)


def reverse_where(nd, n, iat, ga, gb, gy, G, IA, sta, stb, ma, mb):
    """Each operand's adjoint gets the row's adjoint where the mask picks it."""
    mk = iat + 2  # the mask follows the two index-map offsets
    if nd & 1:
        for j in range(n):
            if IA[mk + j]:
                ja = IA[ma + j] if ma >= 0 else j * sta
                G[ga + ja] += G[gy + j]
    if nd & 2:
        for j in range(n):
            if not IA[mk + j]:
                jb = IA[mb + j] if mb >= 0 else j * stb
                G[gb + jb] += G[gy + j]


def tangent_where(nd, n, k, iat, ta, na, tb, nb, ty, T, IA, sta, stb, ma, mb):
    """The picked operand's tangent, element by element (the transpose of ``reverse_where``)."""
    mk = iat + 2  # the mask follows the two index-map offsets
    for j in range(k):
        oy = ty + j * n
        for e in range(n):
            v = 0.0  # the tangent of an operand without one is zero
            if IA[mk + e]:
                if nd & 1:
                    ja = IA[ma + e] if ma >= 0 else e * sta
                    v = T[ta + j * na + ja]
            elif nd & 2:
                jb = IA[mb + e] if mb >= 0 else e * stb
                v = T[tb + j * nb + jb]
            T[oy + e] = v


# each mode's body of every row of the family, by row name
KERNELS = {
    "forward": {"where": forward_where},
    "reverse": {"where": reverse_where},
    "tangent": {"where": tangent_where},
}
