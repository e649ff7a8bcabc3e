"""The reverse sweep's driver and the planning passes of ``jit/_interp.py``, as Python source.

Everything below the marker is rendered verbatim into ``jit/_interp.py`` by ``jit/_generate.py``
(Numba's cache only notices changes to the file of a jitted entry point), around the rendered
parts: a line ``# <name>`` at the start of a line is an insertion point that the generator
replaces by what the table gives (the family kernels, the 0-d branches, the dispatch to the
family kernels, the flags and opcodes as constants, the operand tables, and the forward sweep of
``jit/sweeps/forward.py``). The names used here and not defined here are the generated module's:
its header, ``jit/_raw.py``, ``jit/_vmath.py``, the table's helpers and the families' kernels.
See ``jit/_generate.py`` for what the sweep reads.
"""
# Not a module: a part of a generated file, read by its generator (nothing above the marker is
# rendered). Edit here, then regenerate.
# ---- rendered into _interp.py below this line ----

# runs of same-size elementwise rows of at least MIN_RUN_SIZE elements go block by block
# <block_size>
MIN_RUN_SIZE = 2 * BLOCK
# broadcast binary rows with inner lines this long are swept line by line in the reverse
LINE = 32
# <family_codes>


@njit(error_model="numpy")
def _elementwise(code, k, S):
    """A unary or binary array row whose operands are of its size or one element (no index
    map): it can run on any block of its elements."""
    fam = _FAMILY[code & 255]
    return k >= 0 and (fam == UNARY or fam == BINARY) and (code >> 8) & 12 == 0


@njit(error_model="numpy")
def _in_run(R, s, r0, r1):
    """Slot s is the value of a computing row of rows r0..r1-1 (a run, whose input rows are
    read from the arena like the slots before it: see ``_forward_run_end``)."""
    return s >= r0 and s < r1 and _FAMILY[R[s, 0] & 255] != INPUT


@njit(error_model="numpy")
def _block_value(s, one, VA, b0):
    """Address of operand slot s's values for the block at element b0 of a run (a one-element
    operand at its start; 0 for no operand)."""
    if s < 0:
        return 0
    return VA[s] if one else VA[s] + 8 * b0
# <operand_tables>


SIG_DATA_POINTERS = "void(int64[::1], int64, int64[::1])"


@njit(cache=True, error_model="numpy")
def data_pointers(object_addresses, field_offset, out):
    """Read the data pointer field of NumPy array objects (validated against ctypes at import)."""
    for k in range(object_addresses.shape[0]):
        out[k] = _ld_word(object_addresses[k] + field_offset)


SIG_NEED_PASS = "int64(int64[:, ::1], uint8[::1], uint8[::1], uint8[::1], uint8[::1])"


@njit(cache=True, nogil=True, error_model="numpy")
def need_pass(R, src, root, live, need):
    """Mark the rows on a path from a source slot to a root slot.

    live[s]: slot s depends on a source and reaches a root (it holds an adjoint).
    need[i]: bit 1 / 2 when row i must propagate its adjoint to operand a / b.
    Returns the number of rows that do reverse work.

    need first holds whether each slot depends on a source, and the backward loop overwrites
    row i's entry only after the last read of it (a row's operands are earlier slots): no
    scratch array, so the kernel allocates nothing, and loading it from the cache does not
    import Numba's allocation code (``numba.np.arrayobj``, ~30 ms of a new process's first
    gradient). So need shares no memory with root or live.
    """
    n = R.shape[0]
    for i in range(n):
        sa = R[i, 1]
        sb = R[i, 2]
        need[i] = 1 if src[i] or (sa >= 0 and need[sa]) or (sb >= 0 and need[sb]) else 0
    for i in range(n):
        live[i] = root[i] & need[i]
    count = 0
    for i in range(n - 1, -1, -1):
        nd = 0
        if live[i]:
            sa = R[i, 1]
            sb = R[i, 2]
            if sa >= 0 and need[sa]:
                nd |= 1
                live[sa] = 1
            if sb >= 0 and need[sb]:
                nd |= 2
                live[sb] = 1
        need[i] = nd
        if nd:
            count += 1
    return count


# <family_kernels>


@njit(error_model="numpy")
def _sums_operand(nd, code):
    """A row with need bits nd and code takes the adjoint of a one-element operand, which sums
    all of the row's terms: blocked runs, which sweep rows block by block, leave such rows out."""
    return (nd & (code >> 8) & 3) != 0  # (need bits 1 / 2 and flags 1 / 2 name a / b alike)


@njit(error_model="numpy")
def _reverse_run_start(R, S, need, lo, top, n):
    """First row of the run of elementwise rows of n elements that ends at row top. A row
    whose needed operand has one element ends it: that adjoint sums over all elements, and
    two rows summing into it block by block would add in another order than row by row."""
    s = top
    while s > lo:
        r = s - 1
        nd = need[r]
        if nd != 0:
            code = R[r, 0]
            k = R[r, 3]
            if not _elementwise(code, k, S) or S[k, 0] != n:
                break
            if _sums_operand(nd, code):
                break
        s = r
    return s


@njit(error_model="numpy")
def _reverse_run_at(R, S, IA, need, lo, i):
    """(first row, elements) of the blocked run whose reverse starts at row i: a run of
    elementwise rows of n >= MIN_RUN_SIZE elements each, which row i may top as the sum of
    the last row's lines (``_closing_sum``). The first row is i when no run starts there."""
    k = R[i, 3]
    n = S[k, 0]
    if n >= MIN_RUN_SIZE and _elementwise(R[i, 0], k, S):
        if _sums_operand(need[i], R[i, 0]):
            return i, 0  # its adjoint sums all n terms pairwise, not block by block
        return _reverse_run_start(R, S, need, lo, i, n), n
    if i > lo and need[i] & 1 and _closing_sum(R, S, IA, i) > 0:
        k = R[i - 1, 3]
        n = S[k, 0]
        if n >= MIN_RUN_SIZE and _elementwise(R[i - 1, 0], k, S):
            return _reverse_run_start(R, S, need, lo, i, n), n
    return i, 0


SIG_LOCAL_PASS = ("int64(int64[:, ::1], int64[:, ::1], int64[::1], uint8[::1], uint8[::1], "
                  "int64[:, ::1])")


@njit(cache=True, nogil=True, error_model="numpy")
def local_pass(R, S, IA, need, keep, bounds):
    """Set need bit LOCAL on the rows whose adjoint never leaves the blocked run that sweeps
    them: every row that reads the slot is in the same run, and the caller does not read or
    seed it (keep). The reverse sweep keeps such an adjoint in a block of scratch, so it never
    goes to memory (a run of r rows over n elements spares up to 3 r n words of traffic).
    The runs are found as the sweep finds them, over the same segments (bounds: (lo, hi) rows
    of each reverse_sweep call). Returns the number of local rows."""
    n = R.shape[0]
    run = np.full(n, -1, np.int64)  # the top row of the run that sweeps each row
    for b in range(bounds.shape[0]):
        lo = bounds[b, 0]
        i = bounds[b, 1]
        while i > lo:
            i -= 1
            if need[i] == 0:
                continue
            if R[i, 3] < 0:
                continue
            s, m = _reverse_run_at(R, S, IA, need, lo, i)
            if s < i:
                for r in range(s, i + 1):
                    run[r] = i
                i = s
    local = np.zeros(n, np.uint8)
    for r in range(n):
        local[r] = run[r] >= 0 and need[r] != 0 and keep[r] == 0
    for j in range(n):  # a reader outside the run keeps the slot in the arena
        for c in (1, 2):
            s = R[j, c]
            if s >= 0 and local[s] and run[j] != run[s]:
                local[s] = 0
    count = 0
    for r in range(n):
        if local[r]:
            need[r] |= LOCAL
            count += 1
    return count


@njit(error_model="numpy")
def _run_scratch(R, need, r0, r1):
    """Scratch blocks for the local adjoints of rows r0..r1-1: block[i - r0] for row i, and
    the number of blocks. A block is taken when the first reader of the slot is swept and
    given back once the slot's own row is, so a run needs as many blocks as adjoints live at
    once, not one per row."""
    block = np.full(r1 - r0, -1, np.int64)
    free = np.empty(r1 - r0 + 1, np.int64)
    nfree = 0
    nblocks = 0
    for i in range(r1 - 1, r0 - 1, -1):
        nd = need[i]
        if nd == 0:
            continue
        for c in (1, 2, 0):  # the operands' blocks are taken before the row's own is given back
            s = i if c == 0 else R[i, c]
            if s >= r0 and s < r1 and need[s] & LOCAL and block[s - r0] < 0:
                if nfree > 0:
                    nfree -= 1
                    block[s - r0] = free[nfree]
                else:
                    block[s - r0] = nblocks
                    nblocks += 1
        if nd & LOCAL:
            free[nfree] = block[i - r0]
            nfree += 1
    return block, nblocks


@njit(error_model="numpy")
def _block_share(n, bs, part):
    """Elements lo..hi-1 of a blocked run of n elements in blocks of bs that its worker sweeps:
    all of them, or with part = (k, T > 1) the k-th of T shares of the blocks (whole blocks,
    so whole lines when bs holds whole lines)."""
    if part[1] <= 1:
        return 0, n
    T = int(part[1])
    k = int(part[0])
    blocks = (n + bs - 1) // bs
    return min(n, blocks * k // T * bs), min(n, blocks * (k + 1) // T * bs)


@njit(error_model="numpy", inline="always")
def _reverse_run(R, S, VA, GO, G, IA, FA, need, r0, r1, n, part, binary):
    """Rows r1-1 down to r0, block by block: each element's adjoint gets its terms in the same
    order as row by row, so the result is the same to the bit. Local adjoints (need bit LOCAL)
    live in scratch blocks, addressed from G's base like the arena, and are zeroed once read.
    With part = (k, T > 1) this is worker k of T threads, on its share of the blocks (the run's
    rows add to no one-element operand: ``_reverse_run_start``, so the shares touch disjoint
    adjoints). `binary`: the binary rows' kernel (``_reverse_elementwise``)."""
    block, nblocks = _run_scratch(R, need, r0, r1)
    scratch = np.zeros(max(nblocks, 1) * BLOCK)
    base = (_addr(scratch) - _addr(G)) // 8  # element offset of the scratch from G's data
    top = r1 - 1
    lines = 0  # the length of the lines summed by the top row, when it is a closing sum
    if not _elementwise(R[top, 0], R[top, 3], S):
        lines = IA[S[R[top, 3], 1] + 1]
    bs = BLOCK
    if lines > 0:  # blocks of whole lines, as the forward's (``_forward_run``)
        bs = BLOCK // lines * lines
    lo, hi = _block_share(n, bs, part)
    for b0 in range(lo, hi, bs):
        m = min(bs, hi - b0)
        for i in range(r1 - 1, r0 - 1, -1):
            nd = need[i]
            if nd == 0:
                continue
            if i == top and lines > 0:  # each line's share of the sum's adjoint
                ga = _run_adjoint(R[i, 1], np.int64(0), GO, need, block, base, r0, b0)
                _spread(G, ga, GO[i], b0, m, lines)
                continue
            code = R[i, 0]
            sa = R[i, 1]
            sb = R[i, 2]
            k = R[i, 3]
            fl = code >> 8
            pa = _block_value(sa, fl & 1, VA, b0)
            pb = _block_value(sb, fl & 2, VA, b0)
            ga = _run_adjoint(sa, fl & 1, GO, need, block, base, r0, b0)
            gb = 0
            if sb >= 0:
                gb = _run_adjoint(sb, fl & 2, GO, need, block, base, r0, b0)
            py = VA[i] + 8 * b0
            if nd & LOCAL:
                gy = base + BLOCK * block[i - r0]
            else:
                gy = GO[i] + b0
            if nd & (FRESH_A | FRESH_B):  # (marked only where the operand is not one element)
                _fresh(G, ga, gb, nd, code, sa, sb, m)
            _reverse_elementwise(binary, code, nd, m, S[k, 1], S[k, 2], pa, ga, pb, gb, py, gy,
                                 G, IA, FA)
            if nd & (CLEAR | LOCAL):  # while the block is in cache; a local one every block
                _clear(G, gy, m)
    if lines > 0 and need[top] & CLEAR:  # the sum's adjoint, read by every block (of the share)
        _clear(G, GO[top] + lo // lines, (hi - lo) // lines)
    # keep the scratch alive past its last raw-address use
    scratch[0] = 0.0


@njit(error_model="numpy")
def _leaf_plan(n):
    """The leaves of NumPy's pairwise sum of n terms (a seeded run's sum, a one-element operand's
    adjoint): (count, starts with starts[count] = n, a buffer for their sums)."""
    starts = np.empty(n // 64 + 2, np.int64)  # leaves: at most 128, at least 64 long
    count = _pairwise_leaves(n, starts)
    starts[count] = n
    return count, starts, np.empty(max(count, 1))


@njit(error_model="numpy")
def _spread(G, ga, gs, b0, m, lines):
    """G[ga + j] += G[gs + (b0 + j) // lines] for j < m: the reverse of a sum over lines for
    elements b0..b0+m-1 (whole lines: b0 and m are multiples of `lines`), as the sum's row
    kernel adds it, a line at a time (a test per element for the line's end took 1.6x as long,
    W2). By raw address: ga may be a scratch block's offset from G's data, negative (indexing G
    would wrap it around)."""
    pG = _addr(G)
    p0 = gs + b0 // lines
    for p in range(m // lines):
        g = _ld(pG, p0 + p)
        o = ga + p * lines
        for j in range(lines):
            _st(pG, o + j, _ld(pG, o + j) + g)


SIG_RUN_PASS = ("int64(int64[:, ::1], int64[:, ::1], int64[::1], int64, int64, int64, "
                "int64[:, ::1])")


@njit(cache=True, nogil=True, error_model="numpy")
def run_pass(R, S, IA, lo, hi, min_size, runs):
    """The blocked runs that a forward sweep of rows lo..hi-1 (not seeded) meets, as
    ``_forward_rows`` finds them, of at least min_size elements each: (first row, one past the
    last, which takes in the sum that closes the run over lines) into runs. Returns their count
    (a threaded driver splits them: see sweep's part)."""
    count = 0
    i = lo
    while i < hi:
        k = R[i, 3]
        if k >= 0:
            n = S[k, 0]
            if n >= MIN_RUN_SIZE and _elementwise(R[i, 0], k, S):
                e = _forward_run_end(R, S, i, hi, n)
                if e < hi and _closing_sum(R, S, IA, e) > 0:
                    e += 1  # (even a run of one row)
                if e > i + 1:
                    if n >= min_size and count < runs.shape[0]:
                        runs[count, 0] = i
                        runs[count, 1] = e
                        count += 1
                    i = e
                    continue
        i += 1
    return count


SIG_REVERSE_RUN_PASS = ("int64(int64[:, ::1], int64[:, ::1], int64[::1], uint8[::1], int64, "
                        "int64, int64, int64, int64[:, ::1])")


@njit(cache=True, nogil=True, error_model="numpy")
def reverse_run_pass(R, S, IA, need, lo, hi, seeded, min_size, runs):
    """The blocked runs that a reverse sweep of rows hi-1 down to lo (`seeded`: see
    ``_reverse_rows``) meets, as ``_reverse_rows`` finds them, of at least min_size elements
    each: (first row, one past the last) into runs, the highest first. Returns their count (a
    threaded driver splits them: see sweep's part). A run topped by a SEEDED sum is left out:
    a split sweep's workers are seeded."""
    count = 0
    i = hi
    while i > lo:
        i -= 1
        nd = need[i]
        if nd == 0 or R[i, 3] < 0:
            continue
        if seeded and nd & SEEDED:  # the sum and its run, in one step (``_reverse_seeded``)
            top = i - 1
            i = _forward_run_start(R, S, top, S[R[top, 3], 0])
            continue
        s, n = _reverse_run_at(R, S, IA, need, lo, i)
        if s < i:
            if n >= min_size and nd & SEEDED == 0 and count < runs.shape[0]:
                runs[count, 0] = s
                runs[count, 1] = i + 1
                count += 1
            i = s
    return count


SIG_SEED_PASS = ("int64(int64[:, ::1], int64[:, ::1], int64[::1], uint8[::1], uint8[::1], "
                 "int64[::1])")


@njit(error_model="numpy")
def _full_sum_of(R, S, IA, e, top, n):
    """Row e sums all n elements of row top into one."""
    k = R[e, 3]
    if (R[e, 0] & 255) != SUM or R[e, 1] != top or k < 0:
        return False
    iat = S[k, 1]
    return IA[iat] == 1 and IA[iat + 1] == n and IA[iat + 2] == 1


@njit(error_model="numpy")
def _closing_sum(R, S, IA, e):
    """The length of the lines that row e sums when it sums the last axis of row e-1 in lines
    of at most 128 (each one leaf of NumPy's pairwise sum), else 0. A blocked run that ends at
    row e-1 then takes the sum in: the forward sums each line from the block in cache, the
    reverse spreads the sum's adjoint over the block, so neither the run's last values nor
    their adjoints make an extra pass over memory (W2's Qx * Qx summed over lines of 10)."""
    k = R[e, 3]
    if (R[e, 0] & 255) != SUM or R[e, 1] != e - 1 or k < 0 or R[e - 1, 3] < 0:
        return 0
    iat = S[k, 1]
    lines = IA[iat + 1]
    if IA[iat + 2] != 1 or lines < 1 or lines > 128 or IA[iat] * lines != S[R[e - 1, 3], 0]:
        return 0
    return lines


@njit(cache=True, nogil=True, error_model="numpy")
def seed_pass(R, S, IA, need, keep, first):
    """Set need bit SEEDED on each full sum that closes a forward run whose reverse can run
    inside its forward: the sum is the only reader of the run's last row, every other row of
    the run is read inside the run only, and no row after the sum reads an operand whose
    adjoint the run makes (a needed one-element operand's too). Then, block by block, the
    forward computes the run's rows, the block's share of the sum, and the rows back from a
    seed (the sum's adjoint on the last call, ``_seed_cell``; 1 on the first), with values and
    adjoints in scratch (``_forward_seeded_run``), and leaves the
    run's input adjoints for that seed in the arena; the reverse sweep scales them by the
    sum's adjoint, or sweeps the run again where scaling would round (``_reverse_seeded``).
    Only sums whose adjoint is the same on every call are seeded (``_steady_adjoints``). Only
    a call that sweeps the whole tape both ways does this; others run the rows as usual. Marks
    those inputs in keep (their adjoints must be in the arena: run it before local_pass), and
    the first row of the run in first[sum]. Returns the count."""
    rows = R.shape[0]
    last = np.full(rows, -1, np.int64)  # the last row that reads each slot
    for j in range(rows):
        for c in (1, 2):
            s = R[j, c]
            if s >= 0:
                last[s] = j
    steady = _steady_adjoints(R, need)
    count = 0
    i = -1
    while i < rows - 1:
        i += 1
        k = R[i, 3]
        if k < 0:
            continue
        n = S[k, 0]
        if n < MIN_RUN_SIZE or not _elementwise(R[i, 0], k, S):
            continue
        e = _forward_run_end(R, S, i, rows, n)
        r0 = i
        i = e - 1
        if e < r0 + 2 or e >= rows or not _full_sum_of(R, S, IA, e, e - 1, n):
            continue
        if (need[e] & 1) == 0 or keep[e - 1] or not steady[e]:
            continue  # (a sum whose adjoint changes from call to call: swept as usual)
        ok = last[e - 1] == e
        for r in range(r0, e):
            if _FAMILY[R[r, 0] & 255] == INPUT:
                continue  # (an input of the run: see _run_inputs)
            if r < e - 1 and (last[r] >= e or keep[r]):
                ok = False  # read after the run, or read by the caller
        inputs = _run_inputs(R, need, r0, e)
        for s in inputs:
            if last[s] > e or keep[s]:
                ok = False  # an input read after the sum, or by the caller
        if ok:
            need[e] |= SEEDED
            first[e] = r0
            count += 1
            for s in inputs:  # the forward writes these adjoints to the arena
                keep[s] = 1
    return count


@njit(error_model="numpy")
def _steady_adjoints(R, need):
    """Per row, 1 where its adjoint, for a unit seed on the output, is the same on every call:
    every path from the output to it goes through rows whose operand's adjoint is the row's
    times a constant, or times an operand that depends on no argument (``_FACTOR``). (0.5 *
    sum(u) and mean(u) are; sum(u) * s and sum(u) ** 2 with u from the arguments are not.)"""
    rows = R.shape[0]
    varying = np.zeros(rows, np.uint8)  # rows whose value depends on an argument
    for j in range(rows):
        op = R[j, 0] & 255
        varying[j] = 1 if op == LEAF or op == LINK else 0
        for c in (1, 2):
            if R[j, c] >= 0 and varying[R[j, c]]:
                varying[j] = 1
    steady = np.ones(rows, np.uint8)
    for r in range(rows - 1, -1, -1):  # (a row's readers come after it)
        for c in (1, 2):
            s = R[r, c]
            if s < 0 or (need[r] & c) == 0:
                continue
            f = _FACTOR[R[r, 0] & 255, c - 1]
            other = R[r, 3 - c]
            if not steady[r] or not (f == 1 or (f == 2 and other >= 0 and other != s
                                                 and not varying[other])):
                steady[s] = 0
    return steady


@njit(error_model="numpy", inline="always")
def _seed_cell(R, G, e):
    """Index in G of the seed that seeded sum e's run sweeps its reverse from (0.0 for none
    yet: a unit seed). A plan with seeded sums has one such cell per row after its arena."""
    return G.shape[0] - R.shape[0] + e


@njit(error_model="numpy", inline="always")
def _seed_of(R, G, e):
    """The seed in seeded sum e's seed cell: the sum's adjoint on the last call, or 1.0."""
    seed = G[_seed_cell(R, G, e)]
    return seed if seed != 0.0 else 1.0


@njit(error_model="numpy", inline="always")
def _index_scratch(S):
    """Scratch for operands broadcast through an index map: 2 per element of the largest
    row."""
    m = 1
    for row in range(S.shape[0]):  # (a loop: an array's .max() compiles Numba's take and sort)
        m = max(m, S[row, 0])
    return np.empty(2 * m)


@njit(error_model="numpy")
def _reverse_seeded(R, S, VA, GO, G, IA, FA, need, e):
    """The reverse of the full sum at row e and of the seeded run it closes: the forward left
    each run input's adjoint for the seed in e's seed cell (``_seed_cell``) in the arena.
    When the sum's adjoint g is that seed, they are done; when g is the seed times a power of
    two, scaling them is exact (every product of the run's reverse scales with it, unless an
    adjoint leaves the range of normal floats on the way). Any other g would round a few ulp
    away from the row-by-row reverse: the run is swept again, forward and reverse block by
    block from g itself, and g becomes the seed of the next call's forward. (``seed_pass``
    seeds only sums whose adjoint is the same on every call, a mean's 1/n, a constant
    factor's: the sweep again happens on the first call only.) Returns the run's first row, g,
    and whether the run must be swept again from g, which the caller does: a call of
    ``_forward_seeded_run`` here would link the whole run kernel into this function's own
    compile unit, which LLVM then optimizes and emits once more (~5 s of a cold compile)."""
    g = G[GO[e]]
    if need[e] & CLEAR:
        G[GO[e]] = 0.0
    top = e - 1
    n = S[R[top, 3], 0]
    r0 = _forward_run_start(R, S, top, n)
    seed = _seed_of(R, G, e)
    if g == seed:  # the usual case: nothing to scale
        return r0, g, False
    ratio = g / seed
    mantissa, _ = frexp(ratio)
    exact = abs(mantissa) == 0.5 and abs(ratio) >= 2.2250738585072014e-308 \
        and ratio * seed == g  # (a normal power of two, and exactly g's)
    pG = _addr(G)
    for s in _run_inputs(R, need, r0, e):  # (only the run has added to these yet)
        o = GO[s]
        for j in range(S[R[s, 3], 0] if R[s, 3] >= 0 else 1):  # (one element or n)
            # (+ 0.0: a zero scaled by a negative ratio is -0.0, where the row-by-row reverse,
            # which adds its terms to a zeroed adjoint, leaves +0.0)
            _st(pG, o + j, _ld(pG, o + j) * ratio + 0.0 if exact else 0.0)
    return r0, g, not exact


@njit(error_model="numpy")
def _run_inputs(R, need, r0, e):
    """The slots outside rows r0..e-1 (before r0, or input rows among them) whose adjoints
    those rows need, each once."""
    out = np.empty(2 * (e - r0), np.int64)
    count = 0
    for r in range(r0, e):
        for c in (1, 2):
            s = R[r, c]
            if s < 0 or _in_run(R, s, r0, e) or (need[r] & c) == 0:
                continue
            seen = False
            for q in range(count):
                seen = seen or out[q] == s
            if not seen:
                out[count] = s
                count += 1
    return out[:count]


@njit(error_model="numpy")
def _run_adjoint(s, one, GO, need, block, base, r0, b0):
    """Offset from G's data of operand slot s's adjoint for the block at b0 of a reverse run:
    its scratch block when local, else the arena (a one-element operand at its start)."""
    if need[s] & LOCAL and s >= r0:
        return base + BLOCK * block[s - r0]
    return GO[s] if one else GO[s] + b0


@njit(error_model="numpy", inline="always")
def _reverse_elementwise(binary, code, nd, n, iat, fat, pa, ga, pb, gb, py, gy, G, IA, FA):
    """The reverse of one unary or binary row over n elements (the rows of a run); `binary` is
    the binary rows' kernel: ``_reverse_binary``, or ``_reverse_arithmetic`` /
    ``_reverse_common`` (a function passed as an argument is a compile-time constant: a direct
    call, as to a global)."""
    if _FAMILY[code & 255] == UNARY:
        _reverse_unary(code, nd, n, iat, fat, pa, ga, pb, gb, py, gy, G, IA, FA)
    else:  # (need bits as an int64, as the row loop passes them: one compiled binary kernel)
        binary(code, np.int64(nd), n, iat, fat, pa, ga, pb, gb, py, gy, G, IA, FA)


@njit(error_model="numpy")
def _reverse_sum_broadcast(op, nd, iat, ga, gb, gy, G, IA):
    """The reverse of an add or subtract row broadcast by strides (flag 16): each needed
    operand's adjoint gets the row's adjoint times its constant derivative (1, or -1 for b of
    a subtract), by the strides, in the order and with the arithmetic of the index maps' loop
    (W2's centring x[None] - means[:, None]: 184-260 -> ~137 us). An operand read at inner
    stride 0 sums each line in a register, not through memory (W2's (25, 1000) minus (25, 1):
    92-118 -> 29-40 us); one at inner stride 1 gets a contiguous loop."""
    pG = _addr(G)
    n0 = IA[iat + 2]
    n1 = IA[iat + 3]
    n2 = IA[iat + 4]
    for k in range(2):
        if not nd & (k + 1):
            continue
        go = ga if k == 0 else gb
        s0 = IA[iat + 5 + 3 * k]
        s1 = IA[iat + 6 + 3 * k]
        s2 = IA[iat + 7 + 3 * k]
        c = -1.0 if k == 1 and op == SUBTRACT else 1.0
        for i0 in range(n0):
            for i1 in range(n1):
                o = go + i0 * s0 + i1 * s1
                oy = gy + (i0 * n1 + i1) * n2
                if s2 == 0:
                    acc = _ld(pG, o)
                    for i2 in range(n2):
                        acc = acc + _ld(pG, oy + i2) * c
                    _st(pG, o, acc)
                elif s2 == 1:
                    for i2 in range(n2):
                        _st(pG, o + i2, _ld(pG, o + i2) + _ld(pG, oy + i2) * c)
                else:
                    for i2 in range(n2):
                        _st(pG, o + i2 * s2, _ld(pG, o + i2 * s2) + _ld(pG, oy + i2) * c)


@njit(error_model="numpy", inline="always")
def _reverse_pairwise_operand(binary, code, bit, n, iat, fat, pa, ga, pb, gb, py, gy, G, IA,
                              FA):
    """The adjoint of a binary row's one-element operand (bit 1: a, 2: b): its n terms added in
    NumPy's pairwise order, as a sum's, not in a chain of dependent adds through memory (~3x
    faster on 10^6 terms, and d/dc sum(c * x) is np.sum(x) to the bit). Each leaf's terms come
    from the row's own loop, run on the leaf with the operand's value repeated in a buffer and
    its adjoint pointed at a buffer of -0.0 (-0.0 + t is t), the other operand gathered through
    its index map if it has one: the same terms as element by element, with no per-op code."""
    fl = code >> 8
    one = 1 if bit == 2 else 2  # the other operand's bits: one element, index map
    omap = 8 if bit == 2 else 4
    code2 = (code & 255) | ((fl & ~(bit | omap)) << 8)
    po = pb if bit == 1 else pa
    mo = IA[iat + (1 if bit == 1 else 0)] if fl & omap else -1
    nleaf, lstart, lsum = _leaf_plan(n)
    val = np.empty(128)
    terms = np.empty(128)
    gathered = np.empty(128)
    pval = _addr(val)
    pterms = _addr(terms)
    pgath = _addr(gathered)
    k = 2 * (bit - 1)  # this operand's columns of _READS: reads of a's value, of b's
    own = _READS[code & 255, k + bit - 1]
    reads_other = _READS[code & 255, k + 2 - bit]
    val[:] = _ld(pa if bit == 1 else pb, 0) if own else 0.0
    gt = (pterms - _addr(G)) // 8  # the terms' buffer as an offset from G's data
    for q in range(nleaf):
        s0 = lstart[q]
        m = lstart[q + 1] - s0
        terms[:m] = -0.0
        if mo >= 0:
            if reads_other:
                for j in range(m):
                    _st(pgath, j, _ld(po, IA[mo + s0 + j]))
            p2 = pgath
        else:
            p2 = po if fl & one else po + 8 * s0
        pa2, ga2, pb2, gb2 = (pval, gt, p2, gb) if bit == 1 else (p2, ga, pval, gt)
        binary(code2, bit, m, iat, fat, pa2, ga2, pb2, gb2, py + 8 * s0, gy + s0, G, IA, FA)
        lsum[q] = _pairwise_leaf(pterms, 0, m)  # (_pairwise, recursive, crashes the sweep)
    g = ga if bit == 1 else gb
    pG = _addr(G)
    _st(pG, g, _ld(pG, g) + _pairwise_combine(n, lsum))
    # keep the buffers alive past their last raw-address use
    val[0] = 0.0
    terms[0] = 0.0
    gathered[0] = 0.0


@njit(error_model="numpy", inline="always")
def _reverse_binary_lines(binary, code, nd, n, iat, fat, pa, ga, pb, gb, py, gy, G, IA, FA):
    """The reverse of one binary row. An add or subtract broadcast by strides (flag 16) goes
    by the strides (``_reverse_sum_broadcast``); another broadcast by strides whose inner lines
    are long, read at strides 0 or 1, is swept line by line, each line as a row of its own (an
    operand read at stride 0 as a one-element one). Either way its adjoints accumulate in the
    order and with the arithmetic of index maps; any other broadcast by strides is swept BLOCK
    elements at a time through the maps ``strided_maps`` writes from its strides into a
    scratch (the same terms, each adjoint element's in element order, as through maps recorded
    whole, without n ints per broadcast operand on the tape), and the other broadcasts through
    their recorded maps. A row's own one-element operand sums its terms pairwise
    (``_reverse_pairwise_operand``). `binary` is the kernel of the lines: ``_reverse_binary``, or
    ``_reverse_arithmetic`` / ``_reverse_common`` in the array / common tier."""
    op = code & 255
    strided = (code >> 8) & 16
    if strided and (op == ADD or op == SUBTRACT):
        _reverse_sum_broadcast(op, nd, iat, ga, gb, gy, G, IA)
        return
    if not strided and n > 0 and _sums_operand(nd, code):  # its terms added pairwise
        for bit in (1, 2):
            if nd & (code >> 8) & bit:
                _reverse_pairwise_operand(binary, code, bit, n, iat, fat, pa, ga, pb, gb, py, gy,
                                          G, IA, FA)
        nd = nd & (255 - ((code >> 8) & 3))
        if (nd & 3) == 0:
            return
    lines0 = 1
    lines1 = 1
    m = n
    a0 = 0
    a1 = 0
    b0 = 0
    b1 = 0
    line = code
    X = IA  # the ints the kernel reads: the row's, or a block's maps written from its strides
    blocked = False
    if strided and IA[iat + 4] >= LINE and IA[iat + 7] <= 1 and IA[iat + 10] <= 1:
        lines0 = IA[iat + 2]
        lines1 = IA[iat + 3]
        m = IA[iat + 4]
        a0 = IA[iat + 5]
        a1 = IA[iat + 6]
        b0 = IA[iat + 8]
        b1 = IA[iat + 9]
        line = (code & 255) | ((IA[iat + 7] == 0) | (IA[iat + 10] == 0) << 1) << 8
    elif strided:  # short lines: BLOCK elements at a time, through maps (no flag 16)
        blocked = True
        lines1 = (n + BLOCK - 1) // BLOCK
        m = BLOCK
        a1 = 0 if (code >> 8) & 5 else BLOCK  # (an operand of the result's size: its block)
        b1 = 0 if (code >> 8) & 10 else BLOCK
        line = code & ~(16 << 8)
        X = np.empty(2 + 2 * BLOCK, np.int64)
    for i0 in range(lines0):
        for i1 in range(lines1):
            oa = i0 * a0 + i1 * a1
            ob = i0 * b0 + i1 * b1
            oy = (i0 * lines1 + i1) * m
            k = m
            it = iat
            if blocked:
                k = min(BLOCK, n - oy)
                it = strided_maps(IA, iat, oy, k, X)
            binary(line, nd, k, it, fat, pa + 8 * oa, ga + oa, pb + 8 * ob, gb + ob, py + 8 * oy,
                   gy + oy, G, X, FA)


# need bit 4: zero a row's adjoint once it has been swept. A compiled tape sweeps the same
# arena again and again; clearing what it has just read, while it is in cache, spares a pass
# over the whole arena per call (W3: a 72 MB fill, 4.8 ms).
# <flags_and_opcodes>


@njit(error_model="numpy")
def _clear(G, g0, n):
    pG = _addr(G)
    for j in range(n):
        _st(pG, g0 + j, 0.0)


@njit(error_model="numpy")
def _fresh(G, ga, gb, nd, code, sa, sb, m):
    """Zero the m elements at ga / gb of the operand adjoints that need bits FRESH_A / FRESH_B
    mark (the row alone adds to them); once when a == b, and not at all for x * x, whose
    kernel writes the block whole (``SQUARE``)."""
    if code == MULTIPLY and sa == sb and nd & 3 == 3:
        return
    if nd & FRESH_A:
        _clear(G, ga, m)
    if nd & FRESH_B and not (nd & FRESH_A and sb == sa):
        _clear(G, gb, m)


@njit(error_model="numpy")
def _reverse_scalars(R, sv, G, need, lo, hi):
    """Adjoints through rows hi-1 down to the first needed row that is not a 0-d row of 0-d
    operands (or to lo); returns the lowest row swept. A loop of its own, called, not inlined:
    inside the sweep's row loop, among its many live values, the same rows took 1.7x as long
    (W1)."""
    pR = _addr(R)
    psv = _addr(sv)
    pG = _addr(G)
    i = hi
    while i > lo:
        nd = need[np.uint64(i - 1)]  # an unsigned index: no wrap-around test (-10% a row)
        if nd == 0:
            i -= 1
            continue
        r = pR + 32 * (i - 1)  # R is (rows, 4) int64, C order
        if _ld_word(r + 24) >= 0:
            break
        i -= 1
        code = _ld_word(r)
        op = code & 255
        sa = _ld_word(r + 8)
        sb = _ld_word(r + 16)
# <scalar_body>
    return i


@njit(error_model="numpy", inline="always")  # into sweep, at Numba's level: cold compile 59 -> 44 s
def _reverse_rows(R, S, VA, GO, sv, G, IA, FA, need, lo, hi, seeded, part, binary, full, wide):
    """Accumulate adjoints through rows hi-1 down to lo (escape rows are run by the driver);
    returns the row where it stopped (lo, unless `full` is False).
    `seeded`: the forward sweep of this call ran the seeded runs' reverse (``seed_pass``).
    `part` = (k, T > 1): rows lo..hi-1 are one blocked run (``reverse_run_pass``), of which
    this is worker k's share. `binary`: the binary rows' kernel. `full` (a literal): every
    kind of row, with ``_reverse_binary``; False for the array and common tiers, with
    ``_reverse_arithmetic`` / ``_reverse_common``, which stop above the first needed row that
    their table (``_ARRAY_TIER`` / ``_COMMON_TIER``) does not name. `wide` (a literal): the
    select and matmul rows too, and the common tier's table (the common tier's, and the full
    sweep's); the common tier also stops above a blocked run, returning -1 - that row + 1
    (``common_run_sweep`` sweeps it), and above a binary row that ``_reverse_binary_lines``
    would split (``common_lines_sweep``): each compiled only for tapes that have such rows.
    Numba's branch pruning drops the other families' calls from a tier: less to compile; each
    tier reads its table as a global, so the array tier's code is the same as before the
    common tier."""
    # rows by raw address: Numba's wrap-around of signed indices cost ~30% of a 0-d row (W1)
    pR = _addr(R)
    i = hi
    while i > lo:
        i -= 1
        nd = need[i]
        if nd == 0:
            continue
        r = pR + 32 * i  # R is (rows, 4) int64, C order
        code = _ld_word(r)
        op = code & 255
        sa = _ld_word(r + 8)
        sb = _ld_word(r + 16)
        k = _ld_word(r + 24)
        if k < 0:
            i = _reverse_scalars(R, sv, G, need, lo, i + 1)
            continue
        if seeded and nd & SEEDED:
            r0, g, again = _reverse_seeded(R, S, VA, GO, G, IA, FA, need, i)
            if again:  # forward and back from g itself; g seeds the next call's forward
                _forward_seeded_run(R, S, VA, GO, G, IA, FA, _index_scratch(S), need, r0, i,
                                    S[R[i - 1, 3], 0], np.zeros(3), g)
                G[_seed_cell(R, G, i)] = g
            i = r0
            continue
        if full:  # (if / elif, not `not full and ...`: a condition branch pruning can read)
            pass
        elif wide:
            if not _COMMON_TIER[op]:
                return i + 1
        elif not _ARRAY_TIER[op]:
            return i + 1
        s, n = _reverse_run_at(R, S, IA, need, lo, i)
        if s < i:
            if full:
                pass
            elif wide:  # the common tier leaves blocked runs to common_run_sweep
                return -2 - i  # (-1 - where it stopped)
            elif _tier_stop(_ARRAY_TIER, R, need, s, i) >= 0:
                return i + 1
            _reverse_run(R, S, VA, GO, G, IA, FA, need, s, i + 1, n, part, binary)
            i = s
            continue
        n = S[k, 0]
        iat = S[k, 1]
        fat = S[k, 2]
        fam = _FAMILY[op]
        py = VA[i]
        gy = GO[i]
        pa = VA[sa]
        ga = GO[sa]
        pb = 0
        gb = 0
        if sb >= 0:
            pb = VA[sb]
            gb = GO[sb]
        if nd & (FRESH_A | FRESH_B):  # the row alone adds to that block: zero it first
            _fresh(G, ga, gb, nd, code, sa, sb, n)  # (marked only on operands of the row's size)
# <array_body>
        if nd & CLEAR:
            _clear(G, gy, n)
    return lo


@njit(error_model="numpy")
def _any_local(need, lo, hi):
    """Whether a row of rows lo..hi-1 keeps its adjoint in its run's scratch (need bit LOCAL, a
    compiled plan's): such a run cannot be cut, as the common and rare tiers cut one."""
    for i in range(lo, hi):
        if need[i] & LOCAL:
            return True
    return False


@njit(error_model="numpy")
def _tier_stop(tier, R, need, lo, hi):
    """The highest needed row of rows lo..hi-1 that a tier does not sweep (an array row of a
    family or op that its table, ``_ARRAY_TIER`` or ``_COMMON_TIER``, does not name; any 0-d
    row of 0-d operands is swept), or -1."""
    i = hi
    while i > lo:
        i -= 1
        if need[i] != 0 and R[i, 3] >= 0 and not tier[R[i, 0] & 255]:
            return i
    return -1
# <forward>


SIG_SWEEP = ("void(int64[:, ::1], int64[:, ::1], int64[::1], int64[::1], float64[::1], "
             "float64[::1], int64[::1], float64[::1], uint8[::1], int64, int64, int64, int64, "
             "float64[::1])")


@njit(cache=True, nogil=True, error_model="numpy")
def sweep(R, S, VA, GO, sv, G, IA, FA, need, flo, fhi, rlo, rhi, part):
    """The one jitted entry point of both sweeps: recompute the values of rows flo..fhi-1, then
    accumulate adjoints through rows rhi-1 down to rlo. A compiled tape's value and gradient are
    one call; a value-only replay passes an empty reverse range (the eager backward, an empty
    forward range and no part, takes the smaller tiers below, the same reverse code). One entry point also compiles each sweep once (a jitted caller of another
    cached entry point would compile it again).

    part = (k, T, out): T = 0 for a call on its own (SEEDED sums run their reverse inside their
    forward when the call sweeps the whole tape both ways); T >= 1 for one step of a call split
    by a threaded driver, in which SEEDED sums always do, and worker k of T > 1 sweeps its piece
    of one seeded run and leaves the piece's sum in out (``_forward_seeded_run``), or its share
    of the blocks of one plain forward run (``_forward_run``; with the sum that closes it over
    lines), or of one reverse run (``_reverse_run``)."""
    rows = R.shape[0]
    seeded = part[1] > 0 or (flo == 0 and fhi == rows and rlo == 0 and rhi == rows)
    if fhi > flo:
        _forward_rows(R, S, VA, GO, sv, G, IA, FA, need, flo, fhi, seeded, part)
    if rhi > rlo:
        _reverse_rows(R, S, VA, GO, sv, G, IA, FA, need, rlo, rhi, seeded, part, _reverse_binary,
                      True, True)


# placeholders for the range a call leaves empty, and the part of a call on its own
_NO_INT = np.zeros(1, np.int64)
_NO_FLOAT = np.zeros(1)
_NO_NEED = np.zeros(1, np.uint8)
WHOLE = np.zeros(3)


def reverse_sweep(R, S, VA, GO, sv, G, IA, FA, need, lo, hi, part=WHOLE):
    """``sweep`` with an empty forward range: adjoints through rows hi-1 down to lo (`part`:
    see sweep)."""
    sweep(R, S, VA, GO, sv, G, IA, FA, need, 0, 0, lo, hi, part)


def forward_sweep(R, S, VA, sv, IA, FA, lo, hi, part=WHOLE):
    """``sweep`` with an empty reverse range: the values of rows lo..hi-1, in place (`part`:
    see sweep)."""
    sweep(R, S, VA, _NO_INT, sv, _NO_FLOAT, IA, FA, _NO_NEED, lo, hi, 0, 0, part)


# The eager backward's tiers (``jit._tiers.eager_reverse``): smaller entry points than ``sweep``,
# each its own compile, so that a first gradient on an empty cache compiles only what its tape
# needs. Every eager backward is a reverse with no forward range and no part, for which ``sweep``
# never seeds (``seeded`` False); these two are its reverse split by what a row is.
SIG_SCALAR_SWEEP = ("int64(int64[:, ::1], int64[:, ::1], int64[::1], int64[::1], float64[::1], "
                    "float64[::1], int64[::1], float64[::1], uint8[::1], int64, int64)")
# the need bits the scalar tier sweeps a gather row with; any other bit stops it there
_SCALAR_TIER_BITS = 1 | CLEAR


@njit(cache=True, nogil=True, error_model="numpy")
def scalar_sweep(R, S, VA, GO, sv, G, IA, FA, need, lo, hi):
    """The scalar tier: adjoints through rows hi-1 down to the first needed row that is neither
    a 0-d row of 0-d operands nor a gather (``p[0]`` of an argument), or to lo. Returns the row
    where it stopped: rows lo..that-1 are still to sweep, by ``array_sweep`` if every needed
    row among them is one it sweeps, else by ``common_sweep`` or ``eager_sweep``, which the
    return value then says as -1 - the row (a scan of the rows left, ~1 ns a row; the caller
    chooses between those two, ``jit._tiers``, so that this loop's code is the same for every
    tape). Each row gets what ``sweep`` gives
    it (the same ``_reverse_scalars`` loop, the same gather kernel), so the bits are the same;
    a scalar loop's first gradient compiles this alone (~3 CPU-s, against ~15 for
    ``array_sweep``, ~25 for ``eager_sweep`` and ~60 for ``sweep``)."""
    i = hi
    while i > lo:
        i = _reverse_scalars(R, sv, G, need, lo, i)
        if i == lo:
            break
        r = i - 1  # a needed row with a side row: a gather is swept here, anything else stops
        nd = need[r]
        code = R[r, 0]
        if _FAMILY[code & 255] != GATHER or (nd | _SCALAR_TIER_BITS) != _SCALAR_TIER_BITS:
            break
        sa = R[r, 1]
        sb = R[r, 2]
        k = R[r, 3]
        n = S[k, 0]
        pb = 0
        gb = 0
        if sb >= 0:
            pb = VA[sb]
            gb = GO[sb]
        _reverse_gather(code, nd, n, S[k, 1], S[k, 2], VA[sa], GO[sa], pb, gb, VA[r], GO[r],
                        G, IA, FA)
        if nd & CLEAR:
            _clear(G, GO[r], n)
        i = r
    if i > lo and _tier_stop(_ARRAY_TIER, R, need, lo, i) >= 0:
        return -1 - i
    return i


SIG_EAGER_SWEEP = ("void(int64[:, ::1], int64[:, ::1], int64[::1], int64[::1], float64[::1], "
                   "float64[::1], int64[::1], float64[::1], uint8[::1], int64, int64)")


@njit(cache=True, nogil=True, error_model="numpy")
def eager_sweep(R, S, VA, GO, sv, G, IA, FA, need, lo, hi):
    """The eager tier: ``reverse_sweep(..., lo, hi)``, the reverse of rows hi-1 down to lo as
    ``sweep`` runs it with no forward range and no part, every kind of row. Its ``seeded`` is
    the literal False, which Numba's branch pruning sees through the inlined ``_reverse_rows``:
    neither ``_reverse_seeded`` nor the forward kernels of ``_forward_seeded_run`` are compiled
    into it (~25 CPU-s cold, against ~60 for ``sweep``)."""
    _reverse_rows(R, S, VA, GO, sv, G, IA, FA, need, lo, hi, False, WHOLE, _reverse_binary, True,
                  True)


SIG_ARRAY_SWEEP = ("int64(int64[:, ::1], int64[:, ::1], int64[::1], int64[::1], float64[::1], "
                   "float64[::1], int64[::1], float64[::1], uint8[::1], int64, int64)")


@njit(cache=True, nogil=True, error_model="numpy")
def array_sweep(R, S, VA, GO, sv, G, IA, FA, need, lo, hi):
    """The array tier: ``eager_sweep`` for a tape whose needed array rows are all of the kinds
    ``_ARRAY_TIER`` names (unary rows, + - * / rows, reductions, gathers, scatters, and their
    blocked runs; 0-d rows of any op), which covers the benchmarks' array programs (W2, W3, W5)
    at about half the compile: no select, scan or matmul kernel, and a binary kernel of the four
    arithmetic ops (``_reverse_arithmetic``, their branches of ``_reverse_binary``: the same
    arithmetic, so the same bits). Stops above the first needed row of another kind and returns
    it (``eager_sweep`` goes on from there); lo when it swept them all."""
    return _reverse_rows(R, S, VA, GO, sv, G, IA, FA, need, lo, hi, False, WHOLE,
                         _reverse_arithmetic, False, False)


SIG_COMMON_SWEEP = SIG_ARRAY_SWEEP


@njit(cache=True, nogil=True, error_model="numpy")
def common_sweep(R, S, VA, GO, sv, G, IA, FA, need, lo, hi):
    """The common tier: ``array_sweep`` with the rows the usual scientific program adds
    (``_COMMON_TIER``: power rows, ``x ** p``; maximum and minimum, np.clip; np.where's select;
    matmul), at ~2.5 CPU-s more compile than the array tier and ~7 less than the eager tier: a
    binary kernel of those seven ops (``_reverse_common``: the same arithmetic, so the same
    bits), no scan kernel and none of the rare binary ops (arctan2, hypot, logaddexp, fmax, fmin,
    remainder, fmod). Stops above the first needed row of another kind and returns it (the
    rare tier, ``common_lines_sweep`` for a binary row it would split into lines, or
    ``eager_sweep``, goes on from there), or above a blocked run and returns -1 - it
    (``common_run_sweep`` sweeps the run); lo when it swept them all."""
    return _reverse_rows(R, S, VA, GO, sv, G, IA, FA, need, lo, hi, False, WHOLE,
                         _reverse_common, False, True)


SIG_COMMON_RUN_SWEEP = SIG_ARRAY_SWEEP


@njit(cache=True, nogil=True, error_model="numpy")
def common_run_sweep(R, S, VA, GO, sv, G, IA, FA, need, lo, hi):
    """The common tier's blocked runs: the reverse of the run of elementwise rows of >= 4096
    elements that row hi-1 tops (rows down to lo at most), block by block with ``_reverse_run``
    and ``_reverse_common``, as ``sweep`` sweeps it; returns its first row. Apart from
    ``common_sweep``, which stops above such a run, so that a tape of small arrays does not
    compile ``_reverse_run`` (~3 CPU-s). A run with rare rows (the rare tier's) is cut: the part
    above the highest is swept, and the return value is the row above it (the rest, after the
    rare tier, is a run again: blocked and row-by-row sweeps give the same bits). Returns hi
    (nothing swept) for a row that tops no run or a run with a rare row and adjoints in scratch
    (need bit LOCAL, a compiled plan's): ``eager_sweep`` takes it then."""
    i = hi - 1
    if i < lo or need[i] == 0 or R[i, 3] < 0 or not _COMMON_TIER[R[i, 0] & 255]:
        return hi
    s, n = _reverse_run_at(R, S, IA, need, lo, i)
    if s == i:
        return hi
    j = _tier_stop(_COMMON_TIER, R, need, s, i)
    if j >= 0:
        if _any_local(need, s, hi):
            return hi
        s = j + 1  # (row by row from there: the run's bits)
    _reverse_run(R, S, VA, GO, G, IA, FA, need, s, hi, n, WHOLE, _reverse_common)
    return s


SIG_COMMON_LINES_SWEEP = SIG_ARRAY_SWEEP


@njit(cache=True, nogil=True, error_model="numpy")
def common_lines_sweep(R, S, VA, GO, sv, G, IA, FA, need, lo, hi):
    """The common tier's split binary rows: the reverse of row hi-1 when it is a binary row of
    the common tier's ops broadcast by strides or summing into a one-element operand, which
    ``common_sweep`` stops above, by ``_reverse_binary_lines`` with ``_reverse_common``, as
    ``sweep`` sweeps it; returns hi-1. Apart, so that a tape without such rows does not compile
    the line and pairwise code (~3 CPU-s). Returns hi (nothing swept) for any other row."""
    i = hi - 1
    if i < lo:
        return hi
    nd = need[i]
    code = R[i, 0]
    op = code & 255
    k = R[i, 3]
    if nd == 0 or k < 0 or _FAMILY[op] != BINARY or not _COMMON_TIER[op]:
        return hi
    sa = R[i, 1]
    sb = R[i, 2]
    n = S[k, 0]
    py = VA[i]
    gy = GO[i]
    pa = VA[sa]
    ga = GO[sa]
    pb = 0
    gb = 0
    if sb >= 0:
        pb = VA[sb]
        gb = GO[sb]
    if nd & (FRESH_A | FRESH_B):
        _fresh(G, ga, gb, nd, code, sa, sb, n)
    _reverse_binary_lines(_reverse_common, code, nd, n, S[k, 1], S[k, 2], pa, ga, pb, gb, py,
                          gy, G, IA, FA)
    if nd & CLEAR:
        _clear(G, gy, n)
    return i


SIG_RARE_SWEEP = SIG_ARRAY_SWEEP


@njit(cache=True, nogil=True, error_model="numpy")
def rare_sweep(R, S, VA, GO, sv, G, IA, FA, need, lo, hi):
    """The rare tier: adjoints through rows hi-1 down to the first needed row that is not a
    scan or a rare binary op's array row (``_RARE_TIER``: arctan2, hypot, logaddexp, fmax, fmin,
    remainder, fmod), or to lo; returns the row where it stopped. The common tier sweeps the
    rows between (``jit._tiers``): the two alternate. Each row on its own, with ``sweep``'s
    kernels (``_reverse_scan``; ``_reverse_rare``, the rare ops' branches of
    ``_reverse_binary``), so a few CPU-s to compile where ``eager_sweep`` costs ~25. A binary
    row that ``_reverse_binary_lines`` would split (broadcast by strides, or summing into a
    one-element operand) stops it too: ``tier_of`` gives such tapes to ``eager_sweep``. A row
    of a blocked run gets the same bits on its own as in its run (``common_run_sweep`` sweeps
    the part of a run above such a row, and the part below once the rare rows are done),
    unless adjoints of the run live in scratch (need bit LOCAL, a compiled plan's): it stops
    there."""
    i = hi
    while i > lo:
        r = i - 1
        nd = need[r]
        if nd == 0:
            i = r
            continue
        code = R[r, 0]
        op = code & 255
        sa = R[r, 1]
        sb = R[r, 2]
        k = R[r, 3]
        if k < 0 or not _RARE_TIER[op] or (nd | need[sa] | (need[sb] if sb >= 0 else 0)) & LOCAL:
            break
        n = S[k, 0]
        scan = _FAMILY[op] == SCAN
        if not scan and ((code >> 8) & 16 or (n > 0 and _sums_operand(nd, code))):
            break
        py = VA[r]
        gy = GO[r]
        pa = VA[sa]
        ga = GO[sa]
        pb = 0
        gb = 0
        if sb >= 0:
            pb = VA[sb]
            gb = GO[sb]
        if nd & (FRESH_A | FRESH_B):
            _fresh(G, ga, gb, nd, code, sa, sb, n)
        if scan:
            _reverse_scan(code, nd, n, S[k, 1], S[k, 2], pa, ga, pb, gb, py, gy, G, IA, FA)
        else:  # (what _reverse_binary_lines does with such a row)
            _reverse_rare(code, nd, n, S[k, 1], S[k, 2], pa, ga, pb, gb, py, gy, G, IA, FA)
        if nd & CLEAR:
            _clear(G, gy, n)
        i = r
    return i
