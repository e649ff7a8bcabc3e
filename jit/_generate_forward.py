"""Render the forward value sweep, the part of ``jit/_interp.py`` that compiled replay runs
before the reverse sweep (``python -m jit._generate`` renders the whole file).

Both sweeps live in one module and behind one jitted entry point, ``sweep``, so that a replay's
forward and reverse sweeps are one call, and so that Numba's cache (keyed on the entry point's
file) sees every change to either.

``forward_sweep(R, S, VA, sv, IA, FA, lo, hi)`` (``sweep`` with an empty reverse range) recomputes
the values of rows lo..hi-1 in order, from the current values of their operands, and writes each
result in place into the row's own value buffer (address ``VA[i]``; a 0-d value is ``sv[i]``, and ``VA`` of a 0-d slot points into
``sv``). It reads the arrays ``reverse_sweep`` reads (see ``_generate.py``); the groundwork of
compiled replay: record once, write new input values, sweep, no Python per op.

- Input rows (const / leaf / link) are skipped: the caller writes the new input values into their
  buffers (an array leaf's buffer is the leaf tensor's own array; a 0-d leaf or link is
  ``sv[slot]``).
- Escape rows (matmul_blas, inv, det, logabsdet, solve, function, function_out) are skipped: the
  driver cuts the row range at them, computes each one's value in NumPy between segments and
  writes it into the row's buffer before sweeping the next segment.
- Every address in ``VA`` that a swept row reads or writes must be valid: values packed by
  ``saved_tensors_hooks`` (``VA == 0``) must be unpacked first, as the backward does, and the
  tape must stay alive (it owns the buffers ``VA`` points at).
- Writes are in place: a recorded tensor's value array changes under it (the compiled-replay
  driver owns the tape, so nothing else sees it). A row never reads its own buffer except where
  it is an exact alias (a reshape of a non-leaf is a copy row viewing its operand's buffer:
  y[j] = x[j] at the same address), so the order of reads and writes within a row is safe.

Elementwise rows are generated from the table's scalar formulas ``f`` (and ``HELPERS``): the same
source that ``tape/core/record.py`` runs in Python for 0-d values, so a 0-d row (inline in the
dispatch loop) and each element of an array row compute what the eager 0-d path computes (bit
for bit: both call the process's libm), but for rows whose table entry names a vectorizable
formula ``vf``: array loops of exp, log, log1p and tanh call the branch-free kernels of
``jit/_vmath.py`` (within 1.1 ulp of the exact value, 3-8x faster than libm's scalar calls, which
no loop can vectorize). Array rows run one flat loop per primitive; an operand broadcast through
an index map is first gathered into a scratch buffer, so each binary primitive has a single loop
(contiguous operands, or a one-element operand read with stride 0). The eager recorder runs these
same loops for the primitives whose NumPy loops differ by CPU (``elementwise`` below, for
``jit.table.OWN_VALUE``), so eager and replay agree bit for bit on any CPU; NumPy's value is kept
where it is exact by IEEE 754 (``NUMPY_EXACT``: the same bits from every loop). Against NumPy's
own loops the formulas differ within their error bounds (``tests/test_accuracy.py``), and at
fmax / fmin's +0.0 / -0.0 ties (ours return the first operand; NumPy's loops differ among
themselves). power takes x * x, sqrt(x), 1 / x, x and 1 for the exponents 2, 0.5, -1, 1 and 0
at every element (NumPy's loop does for a scalar exponent; ``_power_fast``): exact, where pow
may be an ulp off.

The other families have hand-written bodies (``CUSTOM``), which follow NumPy's evaluation order
so that results agree with NumPy bit for bit:

- sum over (P, R, Q): for Q == 1 (contiguous reduced run) ``0.0 + pairwise(x)`` with NumPy's
  pairwise summation (blocks of 8 partial sums up to 128 elements, halving above); for Q > 1 the
  sequential ``((0.0 + x_0) + x_1) + ...``, the order NumPy uses when the reduced axis is not the
  contiguous one. A reduction over non-adjacent axes is recorded as a transpose then one
  reduction, so there the grouping (hence rounding) can differ from NumPy's eager call.
- prod: sequential from 1.0; amax / amin: from the first element, NaN propagating, a later tie
  wins (as NumPy's scalar reduce loop; its SIMD loop, for 8 or more elements, combines lanes, so
  among +0.0 / -0.0 ties the sign of the zero can differ from NumPy's); empty reductions give
  0.0 / 1.0 (sum / prod) and -inf / +inf (amax / amin, which the recorder never produces: NumPy
  raises for them).
- cumsum / cumprod: y_0 = x_0, y_r = y_{r-1} op x_r.
- matmul (the small in-sweep one): acc = 0.0, acc += a_mk b_kn in k order (NumPy's no-BLAS loop;
  NumPy's BLAS path rounds differently, within a few ulps of the dot products' magnitude).

Compile time (cold, this machine class): the forward part was ~12 s as an entry point of its own
(the reverse ~19 s); ``sweep`` with both takes ~44 s (59 s before its two row loops were inlined
at Numba's level). Measured alternatives:
evaluating the formulas that call a function (libm, ``**``, helpers) through one shared
``_unary_value(op, x)`` / ``_binary_value(op, a, b)`` per family, with a per-element branch,
compiled in ~9.5 s but ran transcendental array rows ~30% slower (and, depending on how the 0-d
chain reached it, W1's 0-d rows from 2.6 to 10.7 ns/row: code layout, not arithmetic); calling
the family kernels with n = 1 for 0-d rows saved nothing. The per-primitive loops were kept.
"""
from __future__ import annotations

from ._codegen import _indent, _uses, arithmetic_codes, raw_access
from .table import FAMILIES, TABLE

ENTRY_POINT = '''

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
    if _FAMILY[code & 255] == UNARY:
        _forward_unary(code, n, 0, pa, pb, py, IA, W)
    else:
        _forward_binary(code, n, 0, pa, pb, py, IA, W)


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


@njit(error_model="numpy")  # called, not inlined: two call sites (the second in _reverse_seeded)
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
    starts[:nleaves + 1] += off
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
                _reverse_elementwise(c, d, m, S[k, 1], S[k, 2], qa, qga, qb, qgb, py, gy, G,
                                     IA, FA)
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
{scalar_other}


@njit(error_model="numpy", inline="always")
def _scalar_run_end(pR, lo, hi):
    """The row after the run of 0-d rows that row lo (0-d) starts, at most hi: -1 - R[lo, 3]
    (tape/core/arrays.py marks it), or, in rows not marked (-1), the first row found that is not
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
{scalar_body}
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
            if lines > 0:  # the run and the sum of its last row's lines (even a run of one)
                _forward_run(R, S, VA, IA, W, i, e, n, part, lines)
                i = e
                continue
            if e > i + 1:
                if seeded and e < hi and need[e] & SEEDED:  # the run and its sum
                    seed = 1.0  # (a value-only plan has no arena)
                    if (need[e] & VALUES) == 0:
                        seed = _seed_of(R, G, e)
                    _forward_seeded_run(R, S, VA, GO, G, IA, FA, W, need, i, e, n, part, seed)
                    i = e
                    continue
                _forward_run(R, S, VA, IA, W, i, e, n, part, 0)
                i = e - 1
                continue
        iat = S[k, 1]
        py = VA[i]
        pa = 0
        pb = 0
        if sa >= 0:
            pa = VA[sa]
        if sb >= 0:
            pb = VA[sb]
{array_body}
'''

PAIRWISE = '''
@njit(error_model="numpy", inline="always")  # at Numba's level: LLVM does not inline across
def _pairwise_leaf(p, off, n):  # Numba's functions, and a call per line of 10 cost 2x (W2)
    """NumPy's pairwise sum of n <= 128 contiguous values at element off of buffer p: one leaf
    of its recursion (eight partial sums from 8 elements on)."""
    if n < 8:
        res = 0.0
        for j in range(n):
            res += _ld(p, off + j)
        return res
    r0 = _ld(p, off)
    r1 = _ld(p, off + 1)
    r2 = _ld(p, off + 2)
    r3 = _ld(p, off + 3)
    r4 = _ld(p, off + 4)
    r5 = _ld(p, off + 5)
    r6 = _ld(p, off + 6)
    r7 = _ld(p, off + 7)
    j = 8
    while j < n - n % 8:
        r0 += _ld(p, off + j)
        r1 += _ld(p, off + j + 1)
        r2 += _ld(p, off + j + 2)
        r3 += _ld(p, off + j + 3)
        r4 += _ld(p, off + j + 4)
        r5 += _ld(p, off + j + 5)
        r6 += _ld(p, off + j + 6)
        r7 += _ld(p, off + j + 7)
        j += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while j < n:
        res += _ld(p, off + j)
        j += 1
    return res


@njit(error_model="numpy")
def _pairwise(p, off, n):
    """NumPy's pairwise sum of the n contiguous values at element off of buffer p."""
    if n <= 128:
        return _pairwise_leaf(p, off, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise(p, off, n2) + _pairwise(p, off + n2, n - n2)
'''

# Hand-written forward bodies of the non-elementwise rows, keyed by row name. Names in scope: the
# family kernel's arguments (KERNEL_ARGS) and op; for select rows fl, sta, stb, ma, mb.
CUSTOM = {
    "where": """
mk = iat + 2  # the mask follows the two index-map offsets
for j in range(n):
    if IA[mk + j]:
        v = _ld(pa, IA[ma + j] if ma >= 0 else j * sta)
    else:
        v = _ld(pb, IA[mb + j] if mb >= 0 else j * stb)
    _st(py, j, v)
""",
    "sum": """
P = IA[iat]
Rr = IA[iat + 1]
Q = IA[iat + 2]
if Q == 1 and Rr <= 128:  # the reduced run is contiguous: NumPy sums it pairwise
    for p in range(P):  # (W2's 25,000 lines of 10: 205 -> 95 us with the leaf inlined here)
        _st(py, p, 0.0 + _pairwise_leaf(pa, p * Rr, Rr))
elif Q == 1:
    for p in range(P):
        _st(py, p, 0.0 + _pairwise(pa, p * Rr, Rr))
else:  # a strided run: NumPy adds the slices in order
    for p in range(P):
        for q in range(Q):
            acc = 0.0
            for r in range(Rr):
                acc += _ld(pa, (p * Rr + r) * Q + q)
            _st(py, p * Q + q, acc)
""",
    "prod": """
P = IA[iat]
Rr = IA[iat + 1]
Q = IA[iat + 2]
for p in range(P):
    for q in range(Q):
        acc = 1.0
        for r in range(Rr):
            acc *= _ld(pa, (p * Rr + r) * Q + q)
        _st(py, p * Q + q, acc)
""",
    "amax": """
P = IA[iat]
Rr = IA[iat + 1]
Q = IA[iat + 2]
for p in range(P):
    for q in range(Q):
        acc = -inf
        if Rr > 0:
            acc = _ld(pa, p * Rr * Q + q)
        for r in range(1, Rr):
            acc = _maximum(acc, _ld(pa, (p * Rr + r) * Q + q))
        _st(py, p * Q + q, acc)
""",
    "amin": """
P = IA[iat]
Rr = IA[iat + 1]
Q = IA[iat + 2]
for p in range(P):
    for q in range(Q):
        acc = inf
        if Rr > 0:
            acc = _ld(pa, p * Rr * Q + q)
        for r in range(1, Rr):
            acc = _minimum(acc, _ld(pa, (p * Rr + r) * Q + q))
        _st(py, p * Q + q, acc)
""",
    "cumsum": """
P = IA[iat]
Rr = IA[iat + 1]
Q = IA[iat + 2]
for p in range(P):
    for q in range(Q):
        acc = 0.0
        for r in range(Rr):
            off = (p * Rr + r) * Q + q
            x = _ld(pa, off)
            acc = x if r == 0 else acc + x
            _st(py, off, acc)
""",
    "cumprod": """
P = IA[iat]
Rr = IA[iat + 1]
Q = IA[iat + 2]
for p in range(P):
    for q in range(Q):
        acc = 1.0
        for r in range(Rr):
            off = (p * Rr + r) * Q + q
            x = _ld(pa, off)
            acc = x if r == 0 else acc * x
            _st(py, off, acc)
""",
    "gather": """
for j in range(n):
    _st(py, j, _ld(pa, IA[iat + j]))
""",
    "scatter": """
m = IA[iat]
for j in range(n):
    _st(py, j, _ld(pa, j))
for w in range(m):  # every written position has exactly one winning write (the last)
    if IA[iat + 1 + m + w]:
        _st(py, IA[iat + 1 + w], _ld(pb, w))
""",
    "matmul": """
B = IA[iat]
M = IA[iat + 1]
K = IA[iat + 2]
N = IA[iat + 3]
batch_a = IA[iat + 4]
batch_b = IA[iat + 5]
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
""",
}

# Arguments of every family kernel: the row's code, size, attribute offset, operand and result
# addresses, the attribute arena and the scratch buffer.
KERNEL_ARGS = "code, n, iat, pa, pb, py, IA, W"

# Loop variables of the generated elementwise loops; a table formula must not use them.
LOOP_NAMES = ("j", "n", "pa", "pb", "py", "sta", "stb")


def _check_formula(p):
    for name in LOOP_NAMES:
        if _uses(p.f, name):
            raise ValueError(f"{p.name}: formula {p.f!r} uses {name!r}, a loop variable of the "
                             "forward kernels; rename it in jit/_generate_forward.py")


def _scalar_body():
    """0-d rows of 0-d operands: the formula inline, operands and result in sv. Add, subtract
    and multiply share one branchless body (see ``arithmetic_codes``); the other opcodes are
    a call (``_forward_scalar_other``), which keeps the loop small."""
    add, sub, mul = arithmetic_codes()
    out = [f"if op >= {add} and op <= {mul}:  # add, subtract, multiply: no data-dependent jump",
           "    a = sv[sa]",
           "    b = sv[sb]",
           f"    s = a + (1.0 if op == {add} else -1.0) * b  # a - b is a + (-b), exactly",
           f"    sv[i] = a * b if op == {mul} else s",
           "else:",
           "    _forward_scalar_other(op, psv, sa, sb, i)"]
    return _indent([raw_access(ln, "sv", "psv") for ln in out], 8)


def _scalar_other():
    """The body of ``_forward_scalar_other``: every 0-d unary and binary row but the three
    arithmetic ones."""
    add, sub, mul = arithmetic_codes()
    out = []
    for code, p in enumerate(TABLE):
        if p.family not in ("unary", "binary") or code in (add, sub, mul):
            continue
        out.append(f"{'elif' if out else 'if'} op == {code}:  # {p.name}")
        if p.family == "unary":
            body = ["x = sv[sa]"] if _uses(p.f, "x") else []
        else:
            body = [f"{v} = sv[s{v}]" for v in ("a", "b") if _uses(p.f, v)]
        out += ["    " + ln for ln in body + [f"sv[i] = {p.f}"]]
    return _indent([raw_access(ln, "sv", "psv") for ln in out], 4)


def _unary_case(p):
    _check_formula(p)
    f = p.vf or p.f  # array loops take the vectorizable kernel where the table names one
    loop = ["for j in range(n):"]
    if _uses(f, "x"):
        loop.append("    x = _ld(pa, j)")
    return loop + [f"    _st(py, j, {f})"]


# A one-element exponent (read at stride 0 throughout) of 2, 0.5, -1, 1 or 0 takes _power_fast
# (x * x, sqrt(x), 1 / x, x, 1) in a loop of its own, the test hoisted out of it: ~25x faster
# than pow (least squares' ** 2). Other exponents go through _power, which takes the same fast
# paths element by element.
POWER_FAST = [
    "        if b0 == 0 and b1 == 0 and b2 == 0:",
    "            ex = _ld(pb, ob)",
    "            if ex == 2.0 or ex == 0.5 or ex == -1.0 or ex == 1.0 or ex == 0.0:",
    "                for j in range(n2):",
    "                    _st(py, oy + j, _power_fast(_ld(pa, oa + j * a2), ex))",
    "                continue",
]


def _binary_case(p):
    _check_formula(p)
    loop = ["for i0 in range(n0):",
            "    for i1 in range(n1):",
            "        oa = i0 * a0 + i1 * a1",
            "        ob = i0 * b0 + i1 * b1",
            "        oy = (i0 * n1 + i1) * n2",
            *(POWER_FAST if p.name == "power" else []),
            "        for j in range(n2):"]
    strided, contiguous = list(loop), list(loop)
    for v in ("a", "b"):
        if _uses(p.f, v):
            strided.append(f"            {v} = _ld(p{v}, o{v} + j * {v}2)")
            contiguous.append(f"            {v} = _ld(p{v}, o{v} + j)")
    strided.append(f"            _st(py, oy + j, {p.f})")
    contiguous.append(f"            _st(py, oy + j, {p.f})")
    # both operands read along the line: LLVM vectorizes this loop, not the strided one
    # (W2's centring, x[None] - mu[:, None] over 250,000 elements: 120 -> 78 us)
    return (["if a2 == 1 and b2 == 1:"] + ["    " + ln for ln in contiguous] + ["else:"]
            + ["    " + ln for ln in strided])


def _custom(p):
    if p.name not in CUSTOM:
        raise KeyError(f"row {p.name!r} (family {p.family}) has no forward body: add one to "
                       "CUSTOM in jit/_generate_forward.py")
    return CUSTOM[p.name].strip("\n").splitlines()


# Binary rows loop over (n0, n1, n2) with element strides (a0, a1, a2) and (b0, b1, b2) into
# the operands, so every primitive needs one loop nest only: (1, 1, n) with strides 0 or 1 (a
# one-element operand is read for every element) unless the row broadcasts. A broadcast that
# collapses to three dimensions (flag 16) is read in place by the strides at IA[iat + 2:iat + 11];
# any other is gathered into the scratch W first through its index map (flag 4 / 8, map offset
# at IA[iat] / IA[iat + 1]).
BINARY_PROLOGUE = """
fl = code >> 8
n0 = 1
n1 = 1
n2 = n
a0 = 0
a1 = 0
a2 = 0 if fl & 1 else 1
b0 = 0
b1 = 0
b2 = 0 if fl & 2 else 1
if fl & 16:
    n0 = IA[iat + 2]
    n1 = IA[iat + 3]
    n2 = IA[iat + 4]
    a0 = IA[iat + 5]
    a1 = IA[iat + 6]
    a2 = IA[iat + 7]
    b0 = IA[iat + 8]
    b1 = IA[iat + 9]
    b2 = IA[iat + 10]
else:
    if fl & 4:
        ma = IA[iat]
        for j in range(n):
            W[j] = _ld(pa, IA[ma + j])
        pa = _addr(W)
    if fl & 8:
        mb = IA[iat + 1]
        for j in range(n):
            W[n + j] = _ld(pb, IA[mb + j])
        pb = _addr(W) + 8 * n
"""

SELECT_PROLOGUE = """
fl = code >> 8
sta = 0 if fl & 1 else 1
stb = 0 if fl & 2 else 1
ma = IA[iat] if fl & 4 else -1
mb = IA[iat + 1] if fl & 8 else -1
"""


def _family_kernels():
    """One @njit kernel per swept family, and the sweep's dispatch to them (one call per row)."""
    kernels, calls = [], []
    for fi, fam in enumerate(FAMILIES):
        rows = [(c, p) for c, p in enumerate(TABLE) if p.family == fam]
        if fam in ("input", "escape") or not rows:
            continue
        name = f"_forward_{fam}"
        calls += [f"{'if' if not calls else 'elif'} fam == {fi}:  # {fam}",
                  f"    {name}({KERNEL_ARGS})"]
        body = ["op = code & 255"]
        if fam == "binary":
            body += BINARY_PROLOGUE.strip("\n").splitlines()
        elif fam == "select":
            body += SELECT_PROLOGUE.strip("\n").splitlines()
        case = {"unary": _unary_case, "binary": _binary_case}.get(fam, _custom)
        for j, (code, p) in enumerate(rows):
            body.append(f"{'if' if j == 0 else 'elif'} op == {code}:  # {p.name}")
            body += ["    " + ln if ln else "" for ln in case(p)]
        kernels.append(f'@njit(error_model="numpy")\ndef {name}({KERNEL_ARGS}):\n'
                       f'    """Value of one {fam} row, written in place."""\n'
                       + _indent(body, 4))
    calls.append("# input and escape rows are skipped: the caller writes their values")
    return "\n\n\n".join(kernels), _indent(calls, 8)


ELEMENTWISE = '''

SIG_ELEMENTWISE = "void(int64, int64, int64, int64, int64, int64, int64[::1])"


@njit(cache=True, nogil=True, error_model="numpy")
def elementwise(code, a, b, y, n, field, IA):
    """y = the value of one unary or binary array row of n elements (``code`` with its flags, as
    recorded) of float64 C-contiguous operands a and b, by the loop a sweep runs for that row.
    The eager recorder computes the primitives in ``jit.table.OWN_VALUE`` here, so that an eager
    value and its replay are the same bits on any CPU (NumPy's own loops for them differ by CPU).

    a, b, y: the arrays' objects (``id``) with the byte offset of the data pointer inside one
    (``field``), or, for field < 0, their data addresses; the caller keeps them alive. (Not
    arrays: a read-only one, such as a leaf's buffer, would compile another signature, and
    typing array arguments costs more than the loop on small ones.) Flags
    1 / 2: a / b has one element; flag 16: the strided broadcast nest at IA[2:11]
    (``tape.core.record.strided_broadcast``); index maps (flags 4 / 8) are not accepted. Its own
    entry point: a jitted caller of ``sweep`` would compile the sweep again (a cold compile
    ~13 s longer, once; loaded from the cache after)."""
    pa = a if field < 0 else _ld_word(a + field)
    pb = b if field < 0 else _ld_word(b + field)
    py = y if field < 0 else _ld_word(y + field)
    W = np.empty(0)
    if _FAMILY[code & 255] == UNARY:
        _forward_unary(code, n, 0, pa, pb, py, IA, W)
    else:
        _forward_binary(code, n, 0, pa, pb, py, IA, W)
'''


def render_forward() -> str:
    """The forward sweep's helpers, family kernels and row loop, and the eager recorder's entry
    to the elementwise kernels, for ``_generate.render``."""
    kernels, calls = _family_kernels()
    body = ENTRY_POINT.replace("{scalar_body}", _scalar_body()).replace("{array_body}", calls)
    body = body.replace("{scalar_other}", _scalar_other())
    return PAIRWISE + "\n\n" + kernels + "\n" + body + ELEMENTWISE
