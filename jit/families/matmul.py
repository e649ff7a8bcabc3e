"""matmul: the small batched product swept inside the interpreters.

Larger products (over ``BLAS_FLOPS`` multiply-adds) are ``matmul_blas`` escape rows, whose rules
run in NumPy between jitted segments (``tape/``). Attribute layout at the row's int offset:
(B, M, K, N, batch_a, batch_b): B batches of an (M, K) by (K, N) product, a and b in C order;
batch_a / batch_b is 1 when the operand has one matrix per batch, 0 when all share one
(``layouts.encode_matmul`` / ``decode_matmul``).
"""
from ._scope import _ld, _st
from .layouts import matmul_layout  # encode_matmul, decode_matmul there


# rendered whole into every generated interpreter (jit/_assemble.py)
LAYOUTS = (matmul_layout,)


def forward_matmul(iat, pa, pb, py, IA):
    """Y = A B per batch, acc = 0.0 then acc += a_mk b_kn in k order (NumPy's no-BLAS loop)."""
    B, M, K, N, batch_a, batch_b = matmul_layout(IA, iat)
    for bi in range(B):
        oa = bi * M * K * batch_a
        ob = bi * K * N * batch_b
        oy = bi * M * N
        for m in range(M):
            for c in range(N):
                acc = 0.0
                for kk in range(K):
                    acc += _ld(pa, oa + m * K + kk) * _ld(pb, ob + kk * N + c)
                _st(py, oy + m * N + c, acc)


def reverse_matmul(nd, iat, pa, ga, pb, gb, gy, G, IA):
    """dA += dY B^T and dB += A^T dY per batch."""
    B, M, K, N, batch_a, batch_b = matmul_layout(IA, iat)
    for bi in range(B):
        oa = bi * M * K * batch_a
        ob = bi * K * N * batch_b
        oy = bi * M * N
        if nd & 1:
            for m in range(M):
                for kk in range(K):
                    acc = 0.0
                    for c in range(N):
                        acc += G[gy + oy + m * N + c] * _ld(pb, ob + kk * N + c)
                    G[ga + oa + m * K + kk] += acc
        if nd & 2:
            for kk in range(K):
                for c in range(N):
                    acc = 0.0
                    for m in range(M):
                        acc += _ld(pa, oa + m * K + kk) * G[gy + oy + m * N + c]
                    G[gb + ob + kk * N + c] += acc


def tangent_matmul(nd, n, k, iat, pa, ta, na, pb, tb, nb, ty, T, IA):
    """dY = dA B + A dB per batch (the transpose of ``reverse_matmul``)."""
    B, M, K, N, batch_a, batch_b = matmul_layout(IA, iat)
    for j in range(k):
        for bi in range(B):
            oa = bi * M * K * batch_a
            ob = bi * K * N * batch_b
            oy = ty + j * n + bi * M * N
            for m in range(M):
                for c in range(N):
                    acc = 0.0  # dY = dA B + A dB
                    if nd & 1:
                        for kk in range(K):
                            acc += T[ta + j * na + oa + m * K + kk] * _ld(pb, ob + kk * N + c)
                    if nd & 2:
                        for kk in range(K):
                            acc += _ld(pa, oa + m * K + kk) * T[tb + j * nb + ob + kk * N + c]
                    T[oy + m * N + c] = acc


# each mode's body of every row of the family, by row name
KERNELS = {
    "forward": {"matmul": forward_matmul},
    "reverse": {"matmul": reverse_matmul},
    "tangent": {"matmul": tangent_matmul},
}
