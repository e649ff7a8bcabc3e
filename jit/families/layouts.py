"""The attribute layouts of the swept families' rows: encode for the recorder, decode for the
file validator, and the decoders the kernels call (rendered, jitted, into the generated
interpreters). Plain Python without Numba: ``import tape`` reads them, and does not load Numba
until a gradient is asked for. (A gather row's ints are its n source indices, as they are.)
"""
import numpy as np



def reduce_layout(IA, iat):
    """(P, R, Q) of a reduce or scan row whose ints start at IA[iat]: the operand seen as a
    C-ordered (P, R, Q) array, reduced or scanned over R."""
    return IA[iat], IA[iat + 1], IA[iat + 2]


def encode_reduce(P, R, Q):
    """A reduce or scan row's ints."""
    return (int(P), int(R), int(Q))


def decode_reduce(IA, iat):
    """(P, R, Q) of a reduce or scan row, as Python ints."""
    return tuple(int(v) for v in reduce_layout(IA, iat))


def matmul_layout(IA, iat):
    """(B, M, K, N, batch_a, batch_b) of a matmul row whose ints start at IA[iat]: B batches of
    an (M, K) by (K, N) product; batch_a / batch_b is 1 when the operand has one matrix per
    batch, 0 when every batch shares one."""
    return IA[iat], IA[iat + 1], IA[iat + 2], IA[iat + 3], IA[iat + 4], IA[iat + 5]


def encode_matmul(B, M, K, N, batch_a, batch_b):
    """A matmul row's ints."""
    return (int(B), int(M), int(K), int(N), int(batch_a), int(batch_b))


def decode_matmul(IA, iat):
    """(B, M, K, N, batch_a, batch_b) of a matmul row, as Python ints."""
    return tuple(int(v) for v in matmul_layout(IA, iat))


def encode_where(map_a, map_b, mask):
    """A where row's ints: the offsets of a's and b's index maps (-1: none), then the flat mask
    (nonzero: the element is a's)."""
    return np.concatenate(([map_a, map_b], mask))


def encode_scatter(pos, win):
    """A scatter row's ints: the count m of writes, their m flat positions, then m win flags (1
    for the write NumPy keeps: the last to its position)."""
    return np.concatenate(([pos.size], pos, win))


def decode_scatter(IA, iat):
    """(positions, win flags) of a scatter row."""
    m = int(IA[iat])
    return IA[iat + 1:iat + 1 + m], IA[iat + 1 + m:iat + 1 + 2 * m]
