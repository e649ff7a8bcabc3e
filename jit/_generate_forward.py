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
source that ``tape/_record.py`` runs in Python for 0-d values, so a 0-d row (inline in the
dispatch loop) and each element of an array row compute what the eager 0-d path computes (bit
for bit: both call the process's libm), but for rows whose table entry names a vectorizable
formula ``vf``: array loops of exp, log, log1p and tanh call the branch-free kernels of
``jit/_vmath.py`` (within 1.1 ulp of the exact value, 3-8x faster than libm's scalar calls, which
no loop can vectorize). Array rows run one flat loop per primitive; an operand broadcast through
an index map is first gathered into a scratch buffer, so each binary primitive has a single loop
(contiguous operands, or a one-element operand read with stride 0). The eager recorder runs these
same loops for the primitives whose NumPy loops differ by CPU (``elementwise``, in
``jit/sweeps/forward.py``, for ``jit.table.OWN_VALUE``), so eager and replay agree bit for bit on any CPU; NumPy's value is kept
where it is exact by IEEE 754 (``NUMPY_EXACT``: the same bits from every loop). Against NumPy's
own loops the formulas differ within their error bounds (``tests/test_accuracy.py``), and at
fmax / fmin's +0.0 / -0.0 ties (ours return the first operand; NumPy's loops differ among
themselves). power takes x * x, sqrt(x), 1 / x, x and 1 for the exponents 2, 0.5, -1, 1 and 0
at every element (NumPy's loop does for a scalar exponent; ``_power_fast``): exact, where pow
may be an ulp off; an exponent array keeps pow's values at 0.5 of -inf and -0.0 (inf, +0.0:
``_power_each``), as NumPy's loop for an exponent array gives.

The other families' bodies are real functions of ``jit/families/`` (``forward_<row>``), which
follow NumPy's evaluation order
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

from ._assemble import (Mode, family_kernels, fill, function_source, indent, raw_access,
                        rendered_part, subset_kernel)
from ._eager_values import BINARY_ENTRIES
from .families import family_modules, reduce
from .families.elementwise import arithmetic_codes, scalar_branches

# the binary rows of the arithmetic kernels (``_forward_arithmetic``, ``_reverse_arithmetic``:
# the binary family's kernels with these ops' branches only), which the eager recorder's strided
# broadcasts and the array tier take (``jit._generate``)
ARITHMETIC = BINARY_ENTRIES["elementwise_arithmetic"]


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
    return indent([raw_access(ln, "sv", "psv") for ln in out], 8)


def _scalar_other():
    """The body of ``_forward_scalar_other``: every 0-d unary and binary row but the three
    arithmetic ones."""
    out = scalar_branches("forward", first="if")
    return indent([raw_access(ln, "sv", "psv") for ln in out], 4)


def _kernel_name(entry):
    return "_forward_" + entry.removeprefix("elementwise_")


def _listed(rows):
    return ", ".join(rows[:-1]) + " or " + rows[-1] if len(rows) > 1 else rows[0]


def _binary_entries():
    """The eager recorder's binary entry points (``jit._eager_values.BINARY_ENTRIES``), each
    calling its subset kernel."""
    out = []
    for entry, rows in BINARY_ENTRIES.items():
        kernel = _kernel_name(entry)
        out += ["", "", f"SIG_{entry.upper()} = SIG_ELEMENTWISE_UNARY", "", "",
                '@njit(cache=True, nogil=True, error_model="numpy")',
                f"def {entry}(code, a, b, y, n, field, IA):",
                f'    """``elementwise_unary`` for {_listed(rows)} rows, by ``{kernel}``: '
                f'the binary',
                f'    kernel with {"its branch" if len(rows) == 1 else "their branches"} only, '
                'the same loops."""',
                f"    {kernel}(code, n, np.int64(0), _data(a, field), _data(b, field), "
                "_data(y, field), IA,",
                " " * (len(kernel) + 5) + "np.empty(0))"]
    return "\n".join(out)


# The forward family kernels (jit/_assemble.py): a row's code, size, attribute offset, operand
# and result addresses, the attribute arena and the scratch buffer.
FORWARD = Mode("forward", "code, n, iat, pa, pb, py, IA, W",
               "Value of one {family} row, written in place.",
               after_calls=("# input and escape rows are skipped: the caller writes their "
                            "values",))


def render_forward() -> str:
    """The forward sweep's helpers, family kernels and row loop, and the eager recorder's entry
    points to the elementwise kernels (the binary ones each with a subset kernel), for
    ``_generate.render``."""
    modules = family_modules()
    kernels, calls = family_kernels(FORWARD, modules)
    for entry, rows in BINARY_ENTRIES.items():
        kernels += "\n\n\n" + subset_kernel(
            FORWARD, modules, "binary", rows, _kernel_name(entry),
            f"Value of one {_listed(rows)} row (``{entry}``).")
    helpers = "\n\n".join(function_source(fn) for fn in reduce.HELPERS)
    return "\n" + helpers + "\n\n" + kernels + "\n" + fill(rendered_part("forward.py"), {
        "scalar_other": _scalar_other(), "scalar_body": _scalar_body(), "array_body": calls,
        "binary_entries": _binary_entries()})
