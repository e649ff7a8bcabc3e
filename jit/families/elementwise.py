"""Elementwise rows (the unary and binary families): every mode generated from the table.

A row's scalar formula ``f`` and partials ``d`` (``jit/table.py``) are the only per-op code: the
case generators below turn them into each mode's loop (forward values, reverse adjoints, tangent
partials), and the real functions below are the loops' shared prologues and epilogues. Adding an
elementwise op is one table row (see docs/design.md).

Attribute layout of a binary or select row, at its int offset, by the flags of its code
(``jit.table.RowFlag``): with MAP_A / MAP_B, the offsets of a's / b's index maps (one int per
element of the result: the element of the operand it reads); with STRIDED, after those two
words, the loop nest (n0, n1, n2) and each operand's strides (a0, a1, a2, b0, b1, b2) over it.
A STRIDED binary row records no maps (its map words are -1; a file written before may hold
map offsets there, unread): MAP_A / MAP_B then only say which operands are broadcast. The
forward reads the strides in its loops; the reverse and tangent kernels read index maps, which
the sweeps write from the strides into a scratch (``strided_maps``) for the row's elements.
"""
from .. import FRESH_A, FRESH_B
from .._cache import njit
from .._assemble import body_lines, uses
from ..table import TABLE
from ._scope import _addr, _ld


def encode_strided(map_a, map_b, nest, strides_a, strides_b):
    """A strided binary row's ints: the two map words, the nest (n0, n1, n2), then the strides."""
    return (int(map_a), int(map_b), *map(int, nest), *map(int, strides_a), *map(int, strides_b))


def decode_strided(IA, iat):
    """(nest, strides of a, strides of b) of a binary row with flag STRIDED."""
    v = [int(x) for x in IA[iat + 2:iat + 11]]
    return tuple(v[0:3]), tuple(v[3:6]), tuple(v[6:9])


def strided_maps(IA, iat, c0, m, X):
    """The index maps of elements c0..c0+m-1 of a STRIDED binary row (ints at IA[iat]), from
    its loop nest and strides, written to X as a row's ints with maps: X[0] and X[1] the
    offsets of a's and b's maps, X[2:2 + m] and X[2 + m:2 + 2m] the maps (the elements the
    map that broadcast_map would record reads). X holds at least 2 + 2m ints."""
    n1 = IA[iat + 3]
    n2 = IA[iat + 4]
    a0 = IA[iat + 5]
    a1 = IA[iat + 6]
    a2 = IA[iat + 7]
    b0 = IA[iat + 8]
    b1 = IA[iat + 9]
    b2 = IA[iat + 10]
    X[0] = 2
    X[1] = 2 + m
    q = c0 // n2
    i2 = c0 - q * n2
    i0 = q // n1
    i1 = q - i0 * n1
    oa = i0 * a0 + i1 * a1
    ob = i0 * b0 + i1 * b1
    for j in range(m):
        X[2 + j] = oa + i2 * a2
        X[2 + m + j] = ob + i2 * b2
        i2 += 1
        if i2 == n2:
            i2 = 0
            i1 += 1
            if i1 == n1:
                i1 = 0
                i0 += 1
            oa = i0 * a0 + i1 * a1
            ob = i0 * b0 + i1 * b1
    return 0


# rendered, jitted, into every generated interpreter (jit/families/__init__.py)
LAYOUTS = (strided_maps,)


def broadcast_reads(code, iat, IA):
    """The flags of a binary or select row and how each operand is read: at stride sta / stb
    (0: one element), or through the index map at IA[ma] / IA[mb] (-1: none). (A prologue:
    its branches read what it returns; the kernel holds its lines without the return.)"""
    fl = code >> 8
    sta = 0 if fl & 1 else 1
    stb = 0 if fl & 2 else 1
    ma = IA[iat] if fl & 4 else -1
    mb = IA[iat + 1] if fl & 8 else -1
    return fl, sta, stb, ma, mb


def strided_reads(code, n, iat, pa, pb, IA, W):
    """The forward's loop nest of a binary row: (n0, n1, n2) with element strides (a0, a1, a2)
    and (b0, b1, b2) into the operands, so each primitive needs one loop nest only: (1, 1, n)
    with strides 0 or 1 unless the row broadcasts. A broadcast that collapses to three
    dimensions (flag 16) is read in place by its strides; any other is gathered into the scratch
    W first through its index map (flag 4 / 8)."""
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
    return n0, n1, n2, a0, a1, a2, b0, b1, b2, pa, pb


def reverse_square(nd, n, pa, ga, pb, gb, gy, G, fl):
    """x * x (one operand twice, both adjoints into one block): both terms in one pass, in the
    order of the two passes (a's term, then b's), so the same bits with half the memory
    traffic (W2's Qx * Qx adjoint over 250,000 elements). With FRESH_A / FRESH_B the row alone
    adds to that block: it writes 0.0 + g x + g x, the sum a zeroed block would hold, without
    the zeroing pass. The multiply row's other cases follow in an else branch."""
    if nd & 3 == 3 and pa == pb and ga == gb and fl == 0:
        if nd & (FRESH_A | FRESH_B):
            for j in range(n):
                t = G[gy + j] * _ld(pa, j)
                G[ga + j] = (0.0 + t) + t
        else:
            for j in range(n):
                x = _ld(pa, j)
                g = G[gy + j]
                G[ga + j] += g * x
                G[ga + j] += g * x


@njit(error_model="numpy")
def _apply(T, D, do, ty, tx, n, nx, k, mx, stx, IA, add):
    """T[y] = D[do:do + n] * T[x] (or +=) for k directions, where operand x has the result's
    size, or one element (stx == 0), or is broadcast through the index map at IA[mx] (mx >= 0)."""
    for j in range(k):
        oy = ty + j * n
        ox = tx + j * nx
        if mx >= 0:
            if add:
                for e in range(n):
                    T[oy + e] += D[do + e] * T[ox + IA[mx + e]]
            else:
                for e in range(n):
                    T[oy + e] = D[do + e] * T[ox + IA[mx + e]]
        elif stx == 0:  # a loop-invariant operand tangent: the loops vectorize
            t = T[ox]
            if add:
                for e in range(n):
                    T[oy + e] += D[do + e] * t
            else:
                for e in range(n):
                    T[oy + e] = D[do + e] * t
        elif add:
            for e in range(n):
                T[oy + e] += D[do + e] * T[ox + e]
        else:
            for e in range(n):
                T[oy + e] = D[do + e] * T[ox + e]


@njit(error_model="numpy")
def _apply2(T, D, ty, ta, tb, n, k):
    """T[y] = D[:n] * T[a] + D[n:2n] * T[b] for operands of the result's size: one pass over the
    result instead of two (k large tangent blocks make these rows memory-bound)."""
    for j in range(k):
        oy = ty + j * n
        oa = ta + j * n
        ob = tb + j * n
        for e in range(n):
            T[oy + e] = D[e] * T[oa + e] + D[n + e] * T[ob + e]


# rendered whole into _tangent.py, before the tangent kernels
TANGENT_HELPERS = (_apply, _apply2)


def tangent_unary_apply(n, k, ta, ty, T, D, IA):
    """The unary row's partials (D) applied to its operand's k tangent directions."""
    _apply(T, D, 0, ty, ta, n, n, k, -1, 1, IA, False)


def tangent_binary_apply(nd, n, k, ta, na, tb, nb, ty, T, D, IA, fl, sta, stb, ma, mb):
    """The binary row's partials (D[:n] for a, D[n:2n] for b) applied to the k tangent
    directions of the operands that carry one: one pass when both do and have its size."""
    if nd == 3 and fl == 0:
        _apply2(T, D, ty, ta, tb, n, k)
    else:
        if nd & 1:
            _apply(T, D, 0, ty, ta, n, na, k, ma, sta, IA, False)
        if nd & 2:
            _apply(T, D, n, ty, tb, n, nb, k, mb, stb, IA, (nd & 1) != 0)


# ---- the skeleton's interface (jit/_assemble.py) ----

def arithmetic_codes():
    """The opcodes of add, subtract and multiply, which the 0-d paths of the sweeps run without
    a data-dependent branch: on scalar loops (W1) the jump to a row's body is mispredicted
    more often than not (measured: 6 ns/row with the jump, 2.5 with one opcode throughout),
    and these three are most of such code. They must stay consecutive, with these formulas."""
    names = [p.name for p in TABLE]
    add = names.index("add")
    expected = {"add": ("a + b", ("1.0", "1.0")), "subtract": ("a - b", ("1.0", "-1.0")),
                "multiply": ("a * b", ("b", "a"))}
    for code, name in enumerate(("add", "subtract", "multiply"), start=add):
        p = TABLE[code]
        if p.name != name or (p.f, tuple(p.d)) != expected[name]:
            raise ValueError("the table's add, subtract and multiply rows must be consecutive "
                             "with formulas a + b, a - b, a * b (the branchless 0-d path in "
                             "jit/families/elementwise.py assumes it)")
    return add, add + 1, add + 2


def scalar_branches(mode, first="elif"):
    """The 0-d paths' branches (mode: forward, reverse, tangent) over every unary and binary row
    but add, subtract and multiply, which share one branchless body (``arithmetic_codes``):
    each loads from sv what its formulas read (x or a and b, and the value y), then computes
    its value (forward), adds its partials times g to the operands' adjoints (reverse), or
    sets the partials da / db (tangent)."""
    add, sub, mul = arithmetic_codes()
    out = []
    for code, p in enumerate(TABLE):
        if p.family not in ("unary", "binary") or code in (add, sub, mul):
            continue
        out.append(f"{first if not out else 'elif'} op == {code}:  # {p.name}")
        out += ["    " + ln for ln in _scalar_case(mode, p)]
    return out


def _scalar_case(mode, p):
    unary = p.family == "unary"
    formulas = [p.f] if mode == "forward" else list(p.d)
    names = (("x", "sv[sa]"),) if unary else (("a", "sv[sa]"), ("b", "sv[sb]"))
    if mode != "forward":
        names += (("y", "sv[i]"),)
    loads = [f"{v} = {ld}" for v, ld in names if any(uses(e, v) for e in formulas)]
    if mode == "forward":
        return loads + [f"sv[i] = {p.f}"]
    if mode == "reverse":
        def write(k, d):
            return f"G[s{k}] += g * ({d})"
    else:
        def write(k, d):
            return f"d{k} = {d}"
    if unary:
        return loads + [write("a", formulas[0])]
    return loads + ["if nd & 1:", "    " + write("a", formulas[0]),
                    "if nd & 2:", "    " + write("b", formulas[1])]



# Loop variables of the generated loops, per mode; a table formula must not use them.
LOOP_NAMES = {"forward": ("j", "n", "pa", "pb", "py", "sta", "stb"),
              "reverse": (),
              "tangent": ("e", "n", "ja", "jb", "D", "da", "db")}


def check_formula(mode, p, formula):
    for name in LOOP_NAMES[mode]:
        if uses(formula, name):
            raise ValueError(f"{p.name}: formula {formula!r} uses {name!r}, a loop variable of "
                             f"the {mode} kernels; rename it in jit/families/elementwise.py")


def prologue(mode, family):
    if mode == "forward":
        return body_lines(strided_reads) if family == "binary" else []
    return body_lines(broadcast_reads) if family == "binary" else []


def epilogue(mode, family):
    if mode != "tangent":
        return []
    return body_lines(tangent_unary_apply if family == "unary" else tangent_binary_apply)


def case(mode, p, scope):
    """The lines of row p's branch in its family kernel of the mode."""
    if p.family == "unary":
        return {"forward": _forward_unary, "reverse": _reverse_unary,
                "tangent": _tangent_unary}[mode](p)
    if mode == "forward":
        return _forward_binary(p)
    if mode == "tangent":
        return _tangent_binary(p)
    out = _reverse_binary_operand(p, "a") + _reverse_binary_operand(p, "b")
    if p.name == "multiply":
        out = body_lines(reverse_square) + ["else:"] + ["    " + ln for ln in out]
    return out


def _forward_unary(p):
    f = p.vf or p.f  # array loops take the vectorizable kernel where the table names one
    check_formula("forward", p, f)
    loop = ["for j in range(n):"]
    if uses(f, "x"):
        loop.append("    x = _ld(pa, j)")
    return loop + [f"    _st(py, j, {f})"]


# A one-element exponent (read at stride 0 throughout) of 2, 0.5, -1, 1 or 0 takes _power_fast
# (x * x, sqrt(x), 1 / x, x, 1) in a loop of its own, the test hoisted out of it, as NumPy's loop
# does for a scalar exponent: ~25x faster than pow (least squares' ** 2). Other exponents go
# through _power_each: pow's values, as NumPy's loop gives for an exponent array, by the same
# fast paths. (NumPy's choice for an exponent broadcast along an axis depends on the size, by
# its buffering: pow below 8192 elements or so.)
POWER_FAST = [
    "        if b0 == 0 and b1 == 0 and b2 == 0:",
    "            ex = _ld(pb, ob)",
    "            if ex == 2.0 or ex == 0.5 or ex == -1.0 or ex == 1.0 or ex == 0.0:",
    "                for j in range(n2):",
    "                    _st(py, oy + j, _power_fast(_ld(pa, oa + j * a2), ex))",
    "                continue",
]


def _forward_binary(p):
    check_formula("forward", p, p.f)
    loop = ["for i0 in range(n0):",
            "    for i1 in range(n1):",
            "        oa = i0 * a0 + i1 * a1",
            "        ob = i0 * b0 + i1 * b1",
            "        oy = (i0 * n1 + i1) * n2",
            *(POWER_FAST if p.name == "power" else []),
            "        for j in range(n2):"]
    strided, contiguous = list(loop), list(loop)
    for v in ("a", "b"):
        if uses(p.f, v):
            strided.append(f"            {v} = _ld(p{v}, o{v} + j * {v}2)")
            contiguous.append(f"            {v} = _ld(p{v}, o{v} + j)")
    f = "_power_each(a, b)" if p.name == "power" else p.f
    strided.append(f"            _st(py, oy + j, {f})")
    contiguous.append(f"            _st(py, oy + j, {f})")
    # both operands read along the line: LLVM vectorizes this loop, not the strided one
    # (W2's centring, x[None] - mu[:, None] over 250,000 elements: 120 -> 78 us)
    return (["if a2 == 1 and b2 == 1:"] + ["    " + ln for ln in contiguous] + ["else:"]
            + ["    " + ln for ln in strided])


def _reverse_unary(p):
    (d,) = p.d
    loop = ["for j in range(n):"]
    if uses(d, "x"):
        loop.append("    x = _ld(pa, j)")
    if uses(d, "y"):
        loop.append("    y = _ld(py, j)")
    loop.append(f"    G[ga + j] += G[gy + j] * ({d})")
    return loop


def _reverse_binary_operand(p, which):
    """Loop accumulating the adjoint of operand `which` ('a' or 'b') of a binary row."""
    da, db = p.d
    d = da if which == "a" else db
    other = "b" if which == "a" else "a"
    bit = "1" if which == "a" else "2"
    fast, general = [], [f"j{which} = IA[m{which} + j] if m{which} >= 0 else j * st{which}"]
    if uses(d, which):
        fast.append(f"{which} = _ld(p{which}, j)")
        general.append(f"{which} = _ld(p{which}, j{which})")
    if uses(d, other):
        fast.append(f"{other} = _ld(p{other}, j)")
        general += [f"j{other} = IA[m{other} + j] if m{other} >= 0 else j * st{other}",
                    f"{other} = _ld(p{other}, j{other})"]
    if uses(d, "y"):
        fast.append("y = _ld(py, j)")
        general.append("y = _ld(py, j)")
    # the contiguous loop serves whenever the operands it reads are of the result's size
    own = 5 if which == "a" else 10  # flag bits of this operand: one element, index map
    other_map = 8 if which == "a" else 4
    mask = own if not uses(d, other) else 15
    out = [
        f"if nd & {bit}:",
        f"    if (fl & {mask}) == 0:  # operands of the result's size",
        "        for j in range(n):",
        *["            " + ln for ln in fast],
        f"            G[g{which} + j] += G[gy + j] * ({d})"]
    if mask == 15:  # the other operand of one element (a scale, a shift): read once, so that
        # the loop stays contiguous (3x faster than the general one, which indexes per element)
        out += [
            f"    elif (fl & {own | other_map}) == 0:  # the other: one element",
            f"        {other} = _ld(p{other}, 0)",
            "        for j in range(n):",
            *["            " + ln for ln in fast if not ln.startswith(other + " ")],
            f"            G[g{which} + j] += G[gy + j] * ({d})"]
    return out + [
        "    else:  # a one-element operand, or one broadcast through an index map",
        "        for j in range(n):",
        *["            " + ln for ln in general],
        f"            G[g{which} + j{which}] += G[gy + j] * ({d})",
    ]


def _tangent_unary(p):
    """Loop filling D with the derivative of a unary row."""
    (d,) = p.d
    check_formula("tangent", p, d)
    loop = ["for e in range(n):"]
    if uses(d, "x"):
        loop.append("    x = _ld(pa, e)")
    if uses(d, "y"):
        loop.append("    y = _ld(py, e)")
    return loop + [f"    D[e] = {d}"]


def _tangent_binary(p):
    """Loop filling D[:n] / D[n:2n] with the partials of operands a / b of a binary row (both,
    in one loop: half the code of one loop per operand, for a few wasted flops when only one
    operand carries a tangent)."""
    da, db = p.d
    check_formula("tangent", p, da)
    check_formula("tangent", p, db)
    loop = ["for e in range(n):"]
    for v in ("a", "b"):
        if uses(da, v) or uses(db, v):
            loop += [f"    j{v} = IA[m{v} + e] if m{v} >= 0 else e * st{v}",
                     f"    {v} = _ld(p{v}, j{v})"]
    if uses(da, "y") or uses(db, "y"):
        loop.append("    y = _ld(py, e)")
    return loop + [f"    D[e] = {da}", f"    D[n + e] = {db}"]
