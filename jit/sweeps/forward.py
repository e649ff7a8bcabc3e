"""The forward value sweep's driver and the eager recorder's elementwise entry point, as Python
source: rendered verbatim into ``jit/_interp.py`` by ``jit/_generate_forward.py`` (see
``jit/sweeps/reverse.py`` for the insertion points ``# <name>`` and the names defined elsewhere).
"""
# Not a module: a part of a generated file, read by its generator (nothing above the marker is
# rendered). Edit here, then regenerate.
# ---- rendered into _interp.py below this line ----


@njit(error_model="numpy")
def _forward_run_end(R, S, lo, hi, n):
    """One past the last row of the run of elementwise rows of n elements from row lo. Input
    rows between them (leaves, constants) do nothing in a sweep and do not end the run: an
    argument's leaf row is recorded where the argument is first used, often mid-expression
    (``a * exp(-b * t) - y``); the run's rows skip them (``_in_run``)."""
    e = lo
    j = lo
    while j < hi:
        if _elementwise(R[j, 0], R[j, 3], S) and S[R[j, 3], 0] == n:
            e = j + 1
        elif _FAMILY[R[j, 0] & 255] != INPUT:
            break
        j += 1
    return e


@njit(error_model="numpy")
def _forward_run_start(R, S, top, n):
    """The first row of the run that ``_forward_run_end`` finds ending at row top (of n
    elements), found walking back from it."""
    r0 = top
    j = top
    while j > 0:
        code = R[j - 1, 0]
        if _elementwise(code, R[j - 1, 3], S) and S[R[j - 1, 3], 0] == n:
            r0 = j - 1
        elif _FAMILY[code & 255] != INPUT:
            break
        j -= 1
    return r0


@njit(error_model="numpy", inline="always")
def _forward_elementwise(code, n, pa, pb, py, IA, W):
    """The values of one unary or binary row over n elements (the rows of a run)."""
    # (iat an int64, not the literal 0: the kernels the sweep compiles for its other rows,
    # not a second signature of each)
    if _FAMILY[code & 255] == UNARY:
        _forward_unary(code, n, np.int64(0), pa, pb, py, IA, W)
    else:
        _forward_binary(code, n, np.int64(0), pa, pb, py, IA, W)


@njit(error_model="numpy", inline="always")
def _forward_run(R, S, VA, IA, W, r0, r1, n, part, lines):
    """Rows r0..r1-1 block by block: each row reads what the rows before it wrote into the
    block while it is still in cache. Every element gets the same arithmetic as row by row.
    With part = (k, T > 1) this is worker k of T threads, on the k-th of T shares of the blocks.
    lines > 0: row r1 sums the last axis of row r1-1, `lines` elements at a time
    (``_closing_sum``); blocks then hold whole lines, and each line is summed from the block
    while in cache, with the row's own arithmetic (``_pairwise_leaf``)."""
    bs = BLOCK
    if lines > 0:
        bs = BLOCK // lines * lines
    lo, hi = _block_share(n, bs, part)
    for b0 in range(lo, hi, bs):
        m = min(bs, hi - b0)
        for i in range(r0, r1):
            code = R[i, 0]
            if _FAMILY[code & 255] == INPUT:
                continue
            sa = R[i, 1]
            sb = R[i, 2]
            fl = code >> 8
            pa = _block_value(sa, fl & 1, VA, b0)
            pb = _block_value(sb, fl & 2, VA, b0)
            _forward_elementwise(code, m, pa, pb, VA[i] + 8 * b0, IA, W)
        if lines > 0:
            py = VA[r1]
            pt = VA[r1 - 1] + 8 * b0
            p0 = b0 // lines
            for p in range(m // lines):
                _st(py, p0 + p, 0.0 + _pairwise_leaf(pt, p * lines, lines))


@njit(error_model="numpy")  # called, not inlined: two call sites (the second in _reverse_rows)
def _forward_seeded_run(R, S, VA, GO, G, IA, FA, W, need, r0, r1, n, part, seed):
    """Rows r0..r1-1 and the full sum at r1 that closes them (seed_pass), block by block: the
    rows forward, the sum's share of the block, then the rows back from `seed` on the last
    one (the seed in the sum's seed cell; the sum's own adjoint when ``_reverse_seeded`` sweeps
    the run again). Values and adjoints of the run's rows live in scratch, so only the inputs'
    adjoints reach memory. Blocks end where NumPy's pairwise summation has a leaf, so the sum,
    combined from its leaves in NumPy's order afterwards, has the bits of the row's own sum
    kernel.
    With part = (k, T > 1) this is worker k of T threads: it takes the k-th of the T pieces at
    the top of NumPy's pairwise recursion (``_pairwise_piece``) and leaves that piece's sum in
    part[2] for the caller to combine; the sum row's value is not written.
    A row's needed one-element operand (a fit's scalar parameter) gets its terms summed leaf by
    leaf, in NumPy's pairwise order as a row swept alone sums them
    (``_reverse_pairwise_operand``); the totals are added to those adjoints last row first, as
    the reverse sweep would (by worker k: left in part[3:] as a count, then (slot, total)
    pairs, for the caller to combine).
    need[r1] & VALUES (a value-only replay, whose masks mark nothing else): the values and the
    sum only, still with the run's values in scratch."""
    nr = r1 - r0
    top = r1 - 1
    vals = np.empty(nr * BLOCK)
    adj = np.zeros(nr * BLOCK)
    pv = _addr(vals)
    pG = _addr(G)
    base = (_addr(adj) - pG) // 8  # element offset of the adjoint scratch from G's data
    off = 0
    size = n
    if part[1] > 1:
        off, size = _pairwise_piece(n, int(part[0]), int(part[1]))
    nleaves, starts, leaf_sums = _leaf_plan(size)
    for q in range(nleaves + 1):  # (a loop: a slice's += compiles Numba's string formatting)
        starts[q] += off
    term = np.full(nr, -1, np.int64)  # rows whose one-element operand's terms are summed
    nt = 0
    for i in range(r0, r1):
        if _sums_operand(need[i], R[i, 0]):
            term[i - r0] = nt
            nt += 1
    term_sums = np.empty((max(nt, 1), max(nleaves, 1)))
    rep = np.empty(BLOCK)  # such an operand's value, repeated
    terms = np.empty(BLOCK)  # its terms, one per element
    prep = _addr(rep)
    pterms = _addr(terms)
    q = 0
    while q < nleaves:
        b0 = starts[q]
        e = q + 1  # leaves of this block: q..e-1
        while e < nleaves and starts[e + 1] - b0 <= BLOCK:
            e += 1
        m = starts[e] - b0
        for i in range(r0, r1):
            code = R[i, 0]
            if _FAMILY[code & 255] == INPUT:
                continue
            fl = code >> 8
            pa = _run_value(R, R[i, 1], fl & 1, VA, pv, r0, r1, b0)
            pb = _run_value(R, R[i, 2], fl & 2, VA, pv, r0, r1, b0)
            py = pv + 8 * BLOCK * (i - r0)
            _forward_elementwise(code, m, pa, pb, py, IA, W)
        pt = pv + 8 * BLOCK * (top - r0)
        for leaf in range(q, e):
            leaf_sums[leaf] = _pairwise(pt, starts[leaf] - b0, starts[leaf + 1] - starts[leaf])
        if need[r1] & VALUES:
            q = e
            continue
        gt = base + BLOCK * (top - r0)
        for j in range(m):
            _st(pG, gt + j, 0.0 + seed)  # (as the sum's reverse adds it to a zeroed block)
        for i in range(top, r0 - 1, -1):
            nd = need[i]
            if (nd & 3) == 0:
                continue
            code = R[i, 0]
            sa = R[i, 1]
            sb = R[i, 2]
            k = R[i, 3]
            fl = code >> 8
            pa = _run_value(R, sa, fl & 1, VA, pv, r0, r1, b0)
            pb = _run_value(R, sb, fl & 2, VA, pv, r0, r1, b0)
            py = pv + 8 * BLOCK * (i - r0)
            ga = base + BLOCK * (sa - r0) if _in_run(R, sa, r0, r1) else GO[sa] + b0
            gb = 0
            if sb >= 0:
                gb = base + BLOCK * (sb - r0) if _in_run(R, sb, r0, r1) else GO[sb] + b0
            gy = base + BLOCK * (i - r0)
            t = term[i - r0]
            bit = nd & fl & 3  # (one bit: a row with two one-element operands has one element)
            # a row with a scalar's adjoint is swept twice: first for that adjoint's terms, with
            # the scalar's value repeated and its adjoint pointed at a block of -0.0 (-0.0 + t
            # is t), summed leaf by leaf; then for the other operand's adjoint, if needed. (One
            # call of the row kernels here: each call site costs seconds of cold compile.)
            for twice in range(2 if t >= 0 else 1):
                c, d, qa, qga, qb, qgb = code, nd, pa, ga, pb, gb
                if t >= 0 and twice == 0:
                    c, d = (code & 255) | ((fl & (255 - bit)) << 8), np.uint8(bit)
                    rep[:m] = _ld(pa if bit == 1 else pb, 0)
                    terms[:m] = -0.0
                    if bit == 1:
                        qa, qga = prep, (pterms - pG) // 8
                    else:
                        qb, qgb = prep, (pterms - pG) // 8
                elif t >= 0:
                    d = np.uint8(nd & (255 - bit))  # (need's type: one compiled kernel)
                    if (d & 3) == 0:
                        break
                _reverse_elementwise(_reverse_binary, c, d, m, S[k, 1], S[k, 2], qa, qga, qb, qgb,
                                     py, gy, G, IA, FA)
                if t >= 0 and twice == 0:
                    for leaf in range(q, e):
                        term_sums[t, leaf] = _pairwise_leaf(pterms, starts[leaf] - b0,
                                                            starts[leaf + 1] - starts[leaf])
            _clear(G, gy, m)  # for the next block
        q = e
    if part[1] > 1:
        part[2] = _pairwise_combine(size, leaf_sums)  # this piece's sum
        part[3] = nt
    else:
        _st(VA[r1], 0, 0.0 + _pairwise_combine(n, leaf_sums))  # the sum row's value
    j = 0
    for i in range(r1 - 1, r0 - 1, -1):  # the one-element operands' totals, last row first
        t = term[i - r0]
        if t < 0:
            continue
        s = R[i, need[i] & (R[i, 0] >> 8) & 3]  # (bit 1: column 1, a; bit 2: column 2, b)
        total = _pairwise_combine(size, term_sums[t])
        if part[1] > 1:
            part[4 + 2 * j] = s
            part[5 + 2 * j] = total
            j += 1
        else:
            _st(pG, GO[s], _ld(pG, GO[s]) + total)
    # keep the scratch alive past its last raw-address use
    vals[0] = 0.0
    adj[0] = 0.0
    rep[0] = 0.0
    terms[0] = 0.0


@njit(error_model="numpy")
def _pairwise_piece(n, k, T):
    """(offset, length) of piece k of T (a power of two) at depth log2(T) of ``_pairwise(p, 0,
    n)``'s recursion, each piece longer than 128 (so that every level splits). The pieces' sums,
    added in pairs up the tree, give the pairwise sum of all n."""
    off = 0
    size = n
    while T > 1:
        half = size // 2
        half -= half % 8
        T //= 2
        if k >= T:  # the right half
            off += half
            size -= half
            k -= T
        else:
            size = half
    return off, size


@njit(error_model="numpy")
def _pairwise_leaves(n, starts):
    """The first element of each leaf of ``_pairwise(p, 0, n)``'s recursion (its runs of at
    most 128 elements), in order, into starts; returns their count. (A loop over a stack:
    recursion inside the sweep's compile unit crashed it.)"""
    stack = np.empty((64, 2), np.int64)  # (offset, length) still to split, the next on top
    stack[0, 0] = 0
    stack[0, 1] = n
    top = 1
    count = 0
    while top > 0:
        top -= 1
        off = stack[top, 0]
        m = stack[top, 1]
        if m <= 128:
            if m > 0:
                starts[count] = off
                count += 1
            continue
        m2 = m // 2
        m2 -= m2 % 8
        stack[top, 0] = off + m2  # the right half after the left one
        stack[top, 1] = m - m2
        stack[top + 1, 0] = off
        stack[top + 1, 1] = m2
        top += 2
    return count


@njit(error_model="numpy")
def _pairwise_combine(n, leaf_sums):
    """``_pairwise`` of n elements from the sums of its leaves, in order: the same additions in
    the same order (a post-order walk of the recursion's tree with an explicit stack)."""
    if n == 0:
        return 0.0
    size = np.empty(64, np.int64)  # frames: the length split, and its left sum once known
    left = np.empty(64)
    state = np.zeros(64, np.int64)  # 0: left half next, 1: right half next
    size[0] = n
    depth = 0
    leaf = 0
    value = 0.0
    ready = False  # value holds the sum of the frame just finished
    while True:
        if ready:
            if depth == 0:
                return value
            depth -= 1
            if state[depth] == 0:
                left[depth] = value
                state[depth] = 1
                m2 = size[depth] // 2
                m2 -= m2 % 8
                size[depth + 1] = size[depth] - m2
                state[depth + 1] = 0
                depth += 1
                ready = False
            else:
                value = left[depth] + value
            continue
        m = size[depth]
        if m <= 128:
            value = leaf_sums[leaf]
            leaf += 1
            ready = True
            continue
        m2 = m // 2
        m2 -= m2 % 8
        size[depth + 1] = m2
        state[depth + 1] = 0
        state[depth] = 0
        depth += 1


@njit(error_model="numpy")
def _run_value(R, s, one, VA, pv, r0, r1, b0):
    """Address of operand slot s's values for the block at b0 of a seeded run: scratch for the
    run's rows, the arena otherwise (a one-element operand at its start)."""
    if _in_run(R, s, r0, r1):
        return pv + 8 * BLOCK * (s - r0)
    return _block_value(s, one, VA, b0)


@njit(error_model="numpy")
def _forward_scalar_other(op, psv, sa, sb, i):
    """Value of 0-d row i of an opcode other than add, subtract and multiply (a 0-d constant or
    Function hub matches no case). A call of its own: in ``_forward_scalars``' loop its cases
    made the loop 7% slower (W1)."""
# <scalar_other>


@njit(error_model="numpy", inline="always")
def _scalar_run_end(pR, lo, hi):
    """The row after the run of 0-d rows that row lo (0-d) starts, at most hi: -1 - R[lo, 3]
    (tape/_arrays.py marks it), or, in rows not marked (-1), the first row found that is not
    0-d. A loop that knows its end up front does not test every row (see mark_scalar_runs)."""
    e = -1 - _ld_word(pR + 32 * lo + 24)
    if e <= lo:
        e = lo + 1
        while e < hi and _ld_word(pR + 32 * e + 24) < 0:
            e += 1
    return min(e, hi)


@njit(error_model="numpy")
def _forward_scalars(R, sv, lo, hi):
    """Values of row lo (0-d with 0-d operands) and the 0-d rows after it, up to the first
    other row (or to hi), in place; returns that row. A loop of its own, as
    ``_reverse_scalars``. A 0-d constant or Function hub matches no case: the caller writes its
    value."""
    pR = _addr(R)
    psv = _addr(sv)
    e = _scalar_run_end(pR, lo, hi)
    for i in range(lo, e):
        r = pR + 32 * i
        code = _ld_word(r)
        op = code & 255
        sa = _ld_word(r + 8)
        sb = _ld_word(r + 16)
# <scalar_body>
    return e


@njit(error_model="numpy", inline="always")  # into sweep (see _reverse_rows)
def _forward_rows(R, S, VA, GO, sv, G, IA, FA, need, lo, hi, seeded, part):
    """Recompute the values of rows lo..hi-1 in order, in place (input and escape rows are
    skipped: their values are written by the caller). `seeded`: the call sweeps the whole tape
    both ways, so runs closed by a SEEDED sum also sweep their reverse (``_forward_seeded_run``)."""
    # scratch for operands broadcast through an index map (2 per element), allocated once:
    # growing it inside the loop would make Numba refcount it on every row
    W = _index_scratch(S)
    pR = _addr(R)  # rows by raw address (see _reverse_rows)
    i = lo - 1
    while i < hi - 1:
        i += 1
        r = pR + 32 * i
        code = _ld_word(r)
        op = code & 255
        sa = _ld_word(r + 8)
        sb = _ld_word(r + 16)
        k = _ld_word(r + 24)
        if k < 0:
            i = _forward_scalars(R, sv, i, hi) - 1
            continue
        fam = _FAMILY[op]
        n = S[k, 0]
        if n >= MIN_RUN_SIZE and _elementwise(code, k, S):
            e = _forward_run_end(R, S, i, hi, n)
            lines = 0
            if e < hi:  # (a worker of a split run sums the lines of its blocks)
                lines = _closing_sum(R, S, IA, e)
            if lines == 0 and e > i + 1 and seeded and e < hi and need[e] & SEEDED:
                seed = 1.0  # the run and its sum (a value-only plan has no arena)
                if (need[e] & VALUES) == 0:
                    seed = _seed_of(R, G, e)
                _forward_seeded_run(R, S, VA, GO, G, IA, FA, W, need, i, e, n, part, seed)
                i = e
                continue
            # a run, or with lines > 0 the run and the sum of its last row's lines (even a run
            # of one); one call site: each inlined copy is typed and optimized again
            if lines > 0 or e > i + 1:
                _forward_run(R, S, VA, IA, W, i, e, n, part, lines)
                i = e if lines > 0 else e - 1
                continue
        iat = S[k, 1]
        py = VA[i]
        pa = 0
        pb = 0
        if sa >= 0:
            pa = VA[sa]
        if sb >= 0:
            pb = VA[sb]
# <array_body>


# The eager recorder's elementwise values (``jit.elementwise``, ``jit._eager_values``): small
# entry points, each compiled the first time a row needs it, so that a first gradient compiles
# only the kernels its rows use: ``elementwise_unary`` for the unary rows, and one per group of
# binary rows (``jit._eager_values.BINARY_ENTRIES``: + - * / for the strided broadcasts, power,
# each rare binary row), rendered below it.
SIG_ELEMENTWISE_UNARY = "void(int64, int64, int64, int64, int64, int64, int64[::1])"


@njit(error_model="numpy", inline="always")
def _data(x, field):
    """The data address of an operand the recorder passes (see ``elementwise_unary``)."""
    return x if field < 0 else _ld_word(x + field)


@njit(cache=True, nogil=True, error_model="numpy")
def elementwise_unary(code, a, b, y, n, field, IA):
    """y = the value of one unary array row of n elements (``code`` as recorded) of a float64
    C-contiguous operand a (b unread), by the loop a sweep runs for that row. The eager recorder
    computes the primitives in ``jit.table.OWN_VALUE`` by this entry and the binary ones below
    it, so that an eager value and its replay are the same bits on any CPU (NumPy's own loops
    for them differ by CPU).

    a, b, y: the arrays' objects (``id``) with the byte offset of the data pointer inside one
    (``field``), or, for field < 0, their data addresses; the caller keeps them alive. (Not
    arrays: a read-only one, such as a leaf's buffer, would compile another signature, and
    typing array arguments costs more than the loop on small ones.) The binary entries take
    the same arguments, with the flags of ``code``: 1 / 2: a / b has one element; 16: the
    strided broadcast nest at IA[2:11] (``tape._record.strided_broadcast``); index maps (flags
    4 / 8) are not accepted. Entry points of their own: a jitted caller of ``sweep`` would
    compile the sweep again (a cold compile ~13 s longer, once; loaded from the cache after)."""
    # (iat an int64, not the literal 0: the kernels the sweep compiles for its other rows,
    # not a second signature of each)
    _forward_unary(code, n, np.int64(0), _data(a, field), _data(b, field), _data(y, field), IA,
                   np.empty(0))
# <binary_entries>
