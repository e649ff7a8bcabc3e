"""The tangent sweep's driver, as Python source: rendered verbatim into ``jit/_tangent.py`` by
``jit/_generate_tangent.py`` (see ``jit/sweeps/reverse.py`` for the insertion points
``# <name>`` and the names defined elsewhere).
"""
# Not a module: a part of a generated file, read by its generator (nothing above the marker is
# rendered). Edit here, then regenerate.
# ---- rendered into _interp.py below this line ----
# <family_codes>


SIG_TANGENT_SWEEP = ("void(int64[:, ::1], int64[:, ::1], int64[::1], int64[::1], float64[::1], "
                     "float64[::1], int64[::1], float64[::1], uint8[::1], int64, int64, int64)")


@njit(error_model="numpy")
def _tangent_scalars(R, TO, sv, T, act, k, lo, hi):
    """Push k directions through rows lo.. up to the first active row that is not a 0-d row of
    0-d operands (or to hi); returns that row. A loop of its own, as the other sweeps' 0-d
    loops (``_forward_scalars``): inside the row loop it took longer."""
    pR = _addr(R)  # rows, 0-d values and tangents by raw address (see _generate.py)
    psv = _addr(sv)
    pT = _addr(T)
    i = lo - 1
    while i < hi - 1:
        i += 1
        nd = act[np.uint64(i)]  # an unsigned index: no wrap-around test
        if nd == 0:
            continue
        r = pR + 32 * i
        if _ld_word(r + 24) >= 0:
            return i
        code = _ld_word(r)
        op = code & 255
        sa = _ld_word(r + 8)
        sb = _ld_word(r + 16)
        # the partials, then one shared write of the tangent
# <scalar_body>
    return hi


@njit(cache=True, nogil=True, error_model="numpy")
def tangent_sweep(R, S, VA, TO, sv, T, IA, FA, act, k, lo, hi):
    """Push k tangent directions through rows lo..hi-1 (escape rows are run by the driver)."""
    # scratch for one array row's partials (2 per element), allocated once: growing it inside
    # the loop made Numba refcount it on every row (the 0-d rows ran ~20% slower)
    m = 1
    for row in range(S.shape[0]):  # (a loop: an array's .max() compiles Numba's take and sort)
        m = max(m, S[row, 0])
    D = np.empty(2 * m)
    X = np.empty(2 + 2 * m, np.int64)  # a strided row's index maps (``strided_maps``)
    IA0 = IA  # the tape's ints (IA: those the row's kernel reads)
    pR = _addr(R)  # rows by raw address (see _generate.py)
    i = lo - 1
    while i < hi - 1:
        i += 1
        nd = act[i]
        if nd == 0:
            continue
        r = pR + 32 * i
        code = _ld_word(r)
        op = code & 255
        sa = _ld_word(r + 8)
        sb = _ld_word(r + 16)
        side = _ld_word(r + 24)
        if side < 0:
            i = _tangent_scalars(R, TO, sv, T, act, k, i, hi) - 1
            continue
        n = S[side, 0]
        iat = S[side, 1]
        fat = S[side, 2]
        fam = _FAMILY[op]
        py = VA[i]
        ty = TO[i]
        pa = VA[sa]
        ta = TO[sa]
        na = S[R[sa, 3], 0] if R[sa, 3] >= 0 else 1  # operand sizes: the direction strides
        pb = 0
        tb = 0
        nb = 0
        if sb >= 0:
            pb = VA[sb]
            tb = TO[sb]
            nb = S[R[sb, 3], 0] if R[sb, 3] >= 0 else 1
        IA = IA0
        if fam == BINARY and (code >> 8) & 16 and (code >> 8) & 12:  # broadcast by strides:
            iat = strided_maps(IA0, iat, 0, n, X)  # its kernel reads the maps of its strides
            IA = X
            code = code & ~(16 << 8)
# <array_body>
