"""The attribute layouts of the families whose rows hold a fixed record of ints: encode for the
recorder, decode for the file validator, and the decoders the kernels call (rendered, jitted,
into the generated interpreters). Plain Python without Numba: ``import tape`` reads them, and
does not load Numba until a gradient is asked for. Each family's module re-exports its own.
"""


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
