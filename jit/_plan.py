"""The small per-tape passes of an eager backward, each one jitted loop.

Done with NumPy, each is a dozen small calls of ~1 us: a fixed cost per tape that is most of
the cost of a small gradient, and is paid for every tape of a nested loop (two per inner
step). The loops read and write only the arrays they are given.
"""
from __future__ import annotations

from ._cache import njit  # cache=True: tapejit's cache directory (jit/_cache.py)

from ._interp import _addr, _ld_word

SIG_BUILD_TAPE = ("void(int64[::1], int64[::1], int64[::1], int64, float64[::1], int64[:, ::1], "
                  "int64[:, ::1], int64[::1], boolean[::1], int64[::1])")


@njit(cache=True, nogil=True, error_model="numpy")
def build_tape(rows, side, ids, field, sv, R, S, size, is_array, VA):
    """rows: (code, a, b) per slot, flat; side: (slot, n, ia offset, fa offset) per side row,
    flat; ids: per side row, the address of its array value's object (its data pointer is the
    word at ``field`` bytes into it), 0 for a 0-d value, -1 for a value packed by
    saved_tensors_hooks (its address is filled in when unpacked). Fills R (code, a, b, side row;
    a 0-d row's column 3 holds -1 - e, e the row after its run of 0-d rows), S (n, ia offset,
    fa offset), size, is_array and VA (the address of each slot's value; 0-d values in sv)."""
    _fill_tape(rows, side, ids, field, sv, R, S, size, is_array, VA)


@njit(nogil=True, error_model="numpy")
def _fill_tape(rows, side, ids, field, sv, R, S, size, is_array, VA):
    """The body of ``build_tape`` (a plain function: each cached caller compiles it in)."""
    n = R.shape[0]
    base = _addr(sv)
    for i in range(n):
        R[i, 0] = rows[3 * i]
        R[i, 1] = rows[3 * i + 1]
        R[i, 2] = rows[3 * i + 2]
        R[i, 3] = -1
        size[i] = 1
        is_array[i] = False
        VA[i] = base + 8 * i
    for k in range(S.shape[0]):
        s = side[4 * k]
        R[s, 3] = k
        S[k, 0] = side[4 * k + 1]
        S[k, 1] = side[4 * k + 2]
        S[k, 2] = side[4 * k + 3]
        a = ids[k]
        if a != 0:
            size[s] = S[k, 0]
            is_array[s] = True
            VA[s] = 0 if a < 0 else _ld_word(a + field)
    end = n  # the first row after i that is not 0-d
    for i in range(n - 1, -1, -1):
        if R[i, 3] < 0:
            R[i, 3] = -1 - end
        else:
            end = i


SIG_ARENA_OFFSETS = "int64(boolean[::1], int64[::1], uint8[::1], int64[::1])"


@njit(cache=True, nogil=True, error_model="numpy")
def arena_offsets(is_array, size, mask, GO):
    """Adjoint arena offsets: a 0-d slot s at GO[s] = s, the array slots in `mask` packed after
    the n 0-d cells in slot order. Returns the arena's length."""
    return _pack_offsets(is_array, size, mask, GO)


@njit(nogil=True, error_model="numpy")
def _pack_offsets(is_array, size, mask, GO):
    """The body of ``arena_offsets`` (a plain function: each cached caller compiles it in)."""
    n = GO.shape[0]
    end = n
    for s in range(n):
        if is_array[s] and mask[s]:
            GO[s] = end
            end += size[s]
        else:
            GO[s] = s
    return end


WHOLE_HEAD = 5  # I's header: n, m, field, r roots, k outputs
SIG_WHOLE_PREPARE = ("void(int64[::1], float64[::1], int64[:, ::1], int64[:, ::1], "
                     "int64[:, ::1], boolean[::1], uint8[:, ::1])")


@njit(cache=True, nogil=True, error_model="numpy")
def whole_prepare(I, F, R, S, V, is_array, M):
    """The first of the three pieces of a tape's first backward when it sweeps every row that
    has an operand (around the ordinary ``need_pass`` and ``sweep`` calls: ``whole_arena``,
    ``whole_outputs``): the arrays of ``build_tape`` and the need pass's marks.

    I: n, m, field, r, k, then the n rows, the m side rows and the ids as ``build_tape``
    takes them, then r roots (slot, offset of its seed in F), then k outputs (slot, offset in
    the output array, and a cell ``whole_outputs`` sets to 1 when the slot is live, else 0).
    F: the n 0-d values (sv), then the seeds. The outputs are the need pass's sources (the
    leaves a backward hands adjoints to, the inputs it returns).
    Fills R (n x 4), S (m x 3), V's rows size and VA (V: size, VA, GO, each n long) and
    is_array as ``build_tape`` does (sv: F[:n]), and M's rows src, root, live, need (the need
    pass's arrays: src and root set from I, live and need zeroed)."""
    n = I[0]
    m = I[1]
    at = WHOLE_HEAD
    rows = I[at:at + 3 * n]
    side = I[at + 3 * n:at + 3 * n + 4 * m]
    ids = I[at + 3 * n + 4 * m:at + 3 * n + 5 * m]
    _fill_tape(rows, side, ids, I[2], F[:n], R, S, V[0], is_array, V[1])
    M[:, :] = 0
    roots = at + 3 * n + 5 * m
    for j in range(I[3]):
        M[1, I[roots + 2 * j]] = 1
    outs = roots + 2 * I[3]
    for j in range(I[4]):
        M[0, I[outs + 3 * j]] = 1


SIG_WHOLE_ARENA = ("int64(int64[::1], float64[::1], int64[:, ::1], int64[:, ::1], boolean[::1], "
                   "uint8[:, ::1], float64[::1], boolean)")


@njit(cache=True, nogil=True, error_model="numpy")
def whole_arena(I, F, R, V, is_array, M, G, laid_out):
    """After ``whole_prepare`` and ``need_pass``: the adjoint arena over the live slots for the
    reverse ``sweep``. Lays out its offsets (V's row GO, as ``arena_offsets``) and returns its
    length; when G is that long, its start is the arena, zeroed and seeded from F. Else nothing
    is seeded and the caller passes an array of that length with `laid_out` True, which seeds it
    without laying out again. The caller allocates: a kernel that allocates loads Numba's
    allocation code (``numba.np.arrayobj``) with it, ~30 ms of a new process's first gradient.
    Returns -1, nothing laid out, when some row with an operand would stay unswept (the tape
    outlives this backward: the general path takes it from the arrays ``whole_prepare``
    filled)."""
    n = I[0]
    root = M[1]
    live = M[2]
    need = M[3]
    size = V[0]
    GO = V[2]
    if laid_out:
        end = G.shape[0]
    else:
        for i in range(n):
            if R[i, 1] >= 0 and need[i] == 0 and root[i] == 0:
                return -1
        end = _pack_offsets(is_array, size, live, GO)
        if end > G.shape[0]:
            return end
    for e in range(end):
        G[e] = 0.0
    roots = WHOLE_HEAD + 3 * n + 5 * I[1]
    for j in range(I[3]):
        s = I[roots + 2 * j]
        if live[s]:
            f = I[roots + 2 * j + 1]
            o = GO[s]
            for e in range(size[s]):
                G[o + e] += F[f + e]
    return end


SIG_WHOLE_OUTPUTS = ("int64(int64[::1], int64[:, ::1], uint8[:, ::1], float64[::1], "
                     "float64[::1])")


@njit(cache=True, nogil=True, error_model="numpy")
def whole_outputs(I, V, M, G, out):
    """After the reverse ``sweep`` over ``whole_arena``'s arena G: each live output's adjoint
    copied to its place in `out` and its cell in I set to 1 (0 when not live). Returns how
    many outputs are live."""
    n = I[0]
    outs = WHOLE_HEAD + 3 * n + 5 * I[1] + 2 * I[3]
    live = M[2]
    size = V[0]
    GO = V[2]
    count = 0
    for j in range(I[4]):
        s = I[outs + 3 * j]
        if live[s]:
            o = I[outs + 3 * j + 1]
            g = GO[s]
            for e in range(size[s]):
                out[o + e] = G[g + e]
            I[outs + 3 * j + 2] = 1
            count += 1
        else:
            I[outs + 3 * j + 2] = 0
    return count


SIG_MARK_SWEPT = "boolean(uint8[::1], uint8[::1], int64[:, ::1])"


@njit(cache=True, nogil=True, error_model="numpy")
def mark_swept(freed, rows, R):
    """freed[i] = 1 for the rows a backward swept (rows[i] set); True when every row that has
    an operand is now swept (the tape's values can go)."""
    done = True
    for i in range(freed.shape[0]):
        if rows[i]:
            freed[i] = 1
        elif not freed[i] and R[i, 1] >= 0:
            done = False
    return done


SIG_UNREAD_VALUES = ("int64(uint8[::1], int64[:, ::1], boolean[::1], boolean[::1], int64[::1], "
                     "boolean[::1], int64[::1])")


@njit(cache=True, nogil=True, error_model="numpy")
def unread_values(freed, R, reads_value, is_array, VA, read, out):
    """After a partial backward: read[s] for the slots a row not yet swept reads (its operands
    when its opcode's rule reads values, and its own value); the array slots no such row reads
    and whose address is still set go to `out`, their address zeroed (the caller drops the
    arrays). Returns how many."""
    n = freed.shape[0]
    for i in range(n):
        if freed[i] or not reads_value[R[i, 0] & 255]:
            continue
        a = R[i, 1]
        b = R[i, 2]
        if a >= 0:
            read[a] = True
            read[i] = True
        if b >= 0:
            read[b] = True
    count = 0
    for s in range(n):
        if is_array[s] and not read[s] and VA[s] != 0:
            VA[s] = 0
            out[count] = s
            count += 1
    return count
