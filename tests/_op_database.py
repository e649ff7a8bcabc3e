"""The op database of the per-mode suites: every primitive they test, declared once.

Each differentiable row of ``jit.table.TABLE`` that the suites ``test_table`` (eager reverse),
``test_forward_sweep`` (compiled replay), ``test_tangent`` (the tangent sweep), ``test_forward``
(forward mode) and ``test_higher_order`` (second order) test has one ``OpInfo`` here: how a user
records it, its input domain (where it is smooth: finite differences need a neighbourhood of
width ~1e-6), the samples every mode draws (hypothesis shapes: 0-d, size 1, empty,
broadcasting, batches), its special values, its near-non-differentiable points with their
hand-derived gradients, and its tolerances. The suites parametrize over ``OPS``; the table is the
source of truth for what exists (row names, family, arity), so a new row appears in every suite's
parameter list at once, and ``test_op_database.py`` fails, naming the row, until it has an entry
here (or a line in ``TESTED_ELSEWHERE``).

Not a test module (no test functions): the suites import it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tape
import tape.numpy as tnp
from jit.table import FAMILIES, TABLE

# The modes a row may claim, named after what each suite runs.
MODES = ("reverse", "replay", "tangent", "forward", "higher")

SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)
BSHAPES = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=0,
                                            max_side=3)
SEEDS = st.integers(0, 2 ** 32 - 1)
WHICH = st.sampled_from([(0, 1), (0,), (1,)])  # the differentiable operands of a binary row

# Special values: every elementwise row's value on each (and on each pair) must match NumPy's.
SPECIALS = (0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 27.0, -8.0, 800.0, -800.0, 1e308, -1e308,
            5e-324, np.inf, -np.inf, np.nan)


# ---------------------------------------------------------------------------------------------
# Samplers: (rng, shape) -> float64 array


def uniform(lo, hi):
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def away_from_zero(lo, hi):
    """|x| in [lo, hi], random sign."""
    return lambda rng, shape: rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


def choice(*values):
    return lambda rng, shape: rng.choice(values, shape)


def grid(offset):
    """Multiples of 0.1 (+ offset): operands on the two grids never tie or come close."""
    return lambda rng, shape: (rng.integers(-30, 30, shape) + offset) * 0.1


def distinct(rng, shape):
    """Values at least 0.1 apart (no ties for max/min)."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.1 - 0.05 * n).reshape(shape) + rng.uniform(0, 0.01, shape)


def signed(rng, shape):
    """|x| in [0.5, 1.5], random sign: products neither vanish nor blow up."""
    return rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)


def well_conditioned(rng, shape):
    """Square matrices (the last two axes) with eigenvalues near 3: inverses and determinants
    stay away from singular ones."""
    n = shape[-1]
    return rng.normal(size=shape) * 0.5 + 3.0 * np.eye(n)


# Each elementwise row's domain: one sampler per operand. The arity is the table's (one partial
# per operand); a row missing here fails test_op_database.py::test_row_is_declared[row].
DOMAINS = {
    "neg": uniform(-3, 3), "abs": away_from_zero(0.1, 3), "exp": uniform(-3, 3),
    "expm1": uniform(-3, 3), "exp2": uniform(-3, 3), "log": uniform(0.1, 5),
    "log1p": uniform(-0.9, 5), "log2": uniform(0.1, 5), "log10": uniform(0.1, 5),
    "sqrt": uniform(0.1, 5), "cbrt": away_from_zero(0.1, 3), "square": uniform(-3, 3),
    "reciprocal": away_from_zero(0.2, 3), "sin": uniform(-3, 3), "cos": uniform(-3, 3),
    "tan": uniform(-1.2, 1.2), "arcsin": uniform(-0.9, 0.9), "arccos": uniform(-0.9, 0.9),
    "arctan": uniform(-3, 3), "sinh": uniform(-3, 3), "cosh": uniform(-3, 3),
    "tanh": uniform(-3, 3), "arcsinh": uniform(-3, 3), "arccosh": uniform(1.1, 5),
    "arctanh": uniform(-0.9, 0.9), "copy": uniform(-3, 3),
    "add": (uniform(-3, 3), uniform(-3, 3)),
    "subtract": (uniform(-3, 3), uniform(-3, 3)),
    "multiply": (uniform(-3, 3), uniform(-3, 3)),
    "divide": (uniform(-3, 3), away_from_zero(0.2, 3)),
    "power": (uniform(0.1, 3), uniform(-2, 2)),
    "arctan2": (away_from_zero(0.2, 3), away_from_zero(0.2, 3)),
    "hypot": (away_from_zero(0.2, 3), away_from_zero(0.2, 3)),
    "logaddexp": (uniform(-3, 3), uniform(-3, 3)),
    "maximum": (grid(0.5), grid(0.0)), "minimum": (grid(0.5), grid(0.0)),
    "fmax": (grid(0.5), grid(0.0)), "fmin": (grid(0.5), grid(0.0)),
    # a an odd multiple of 0.05, b = +-0.7 or +-1.3 (even multiples): a / b stays >= 0.05 / 1.3
    # from the integers, where the quotient jumps
    "remainder": (grid(0.5), choice(-1.3, -0.7, 0.7, 1.3)),
    "fmod": (grid(0.5), choice(-1.3, -0.7, 0.7, 1.3)),
    # the other families: the sampler of their differentiable operands
    "sum": uniform(-3, 3), "prod": signed, "amax": distinct, "amin": distinct,
    "cumsum": signed, "cumprod": signed,
    "where": uniform(-3, 3), "gather": uniform(-3, 3), "scatter": uniform(-3, 3),
    "matmul": uniform(-2, 2), "matmul_blas": uniform(-1, 1),
    "inv": well_conditioned, "det": well_conditioned, "logabsdet": well_conditioned,
    "solve": well_conditioned,
}

# Each own-value row's (jit.table.OWN_VALUE: NumPy's loop differs by CPU) largest error
# against the exact value, in ulps of the result: glibc's libm (x86-64) for most,
# jit/_vmath.py's kernels for exp, log, log1p and tanh. Measured maxima on 600k-1M points per
# function (2026-11, AMD EPYC, glibc 2.36, with and without its FMA variants) are at most 0.6
# below each bound; logaddexp's is absolute (see test_logaddexp_absolute_error).
ERROR_BOUND = {
    "exp": 1.0, "expm1": 1.0, "exp2": 1.0, "log": 1.0, "log1p": 1.0, "log2": 1.0, "log10": 2.0,
    "cbrt": 3.5, "sin": 1.0, "cos": 1.0, "tan": 1.0, "arcsin": 1.0, "arccos": 1.0,
    "arctan": 1.0, "sinh": 2.0, "cosh": 2.0, "tanh": 1.1, "arcsinh": 2.0, "arccosh": 2.0,
    "arctanh": 2.0, "power": 1.0, "arctan2": 1.0, "hypot": 1.0,
}

# New values for a replay of the max / min reductions: ties and signed zeros, where the choice
# among equal values shows.
TIED = choice(-1.0, -0.0, 0.0, 0.5, 2.0)
REPLAY_VALUES = {"amax": TIED, "amin": TIED}

# Rows whose tests live in another file: row -> (file, a word that file has where it tests it)
TESTED_ELSEWHERE = {
    **{n: ("tests/test_decompositions.py", n)
       for n in ("cholesky", "solve_triangular", "eigh", "svd", "qr", "expm")},
    # regularized incomplete gamma and beta, and the rows of their shape-parameter derivatives
    # (recorded by the value rows' rules: tested through them)
    **{n: ("tests/test_incomplete.py", n.split("_")[0]) for n in ("gammainc", "gammainc_da",
                                                                  "betainc", "betainc_dab")},
    # custom Functions' rows: the user's forward and backward (tape.Function)
    "function": ("tests/test_function.py", "tape.Function"),
    "function_out": ("tests/test_function.py", "tape.Function"),
    # scipy.special rows (formulas, no NumPy ufunc)
    **{p.name: ("tests/test_special.py", p.name) for p in TABLE if p.family == "escape" and p.f},
}


# ---------------------------------------------------------------------------------------------
# Samples: one call of an op, with the shapes of its operands and how to draw their values


@dataclass(frozen=True)
class Sample:
    """``fn(*args)`` on tensors and on arrays alike; ``wrt`` the differentiable operands (the
    others are NumPy constants, 0-d ones as Python floats). ``draw(rng)`` gives operand values
    of the recorded shapes (call it again for new inputs of a replay)."""
    op: str
    fn: object
    shapes: tuple
    wrt: tuple
    samplers: tuple
    label: str = ""
    f_np: object = None  # NumPy reference where fn's spelling is tapejit's own (tape.numpy)
    row: bool = True  # records the op's row (False: empty, or a view with no row of its own)
    scalar_path: bool = False  # 0-d operands as Python floats (the inline 0-d path)

    def draw(self, rng):
        return [np.asarray(s(rng, sh), dtype=np.float64) for s, sh in zip(self.samplers,
                                                                          self.shapes)]

    @property
    def reference(self):
        return self.f_np or self.fn

    def on(self, args):
        """(f of the differentiable operands only, their values): constants bound in."""
        wrt = self.wrt
        consts = {i: (a if a.ndim else float(a)) for i, a in enumerate(args) if i not in wrt}

        def f(*xs):
            full = dict(consts)
            full.update(zip(wrt, xs))
            return self.fn(*[full[i] for i in range(len(args))])

        return f, [args[i] for i in wrt]

    def __repr__(self):
        return f"Sample({self.op}: {self.label}, shapes {self.shapes}, wrt {self.wrt})"


@dataclass(frozen=True)
class Kink:
    """A near-non-differentiable point (ties, zeros, NaN, singular points): the gradient of
    sum(f) there, derived by hand (the convention every mode follows)."""
    fn: object
    args: tuple
    grads: tuple
    note: str = ""


@dataclass(frozen=True)
class OpInfo:
    name: str
    family: str
    call: object  # what a user calls to record the row (np.exp, np.sum, ...)
    samples: object  # (OpInfo) -> hypothesis strategy of Sample
    modes: frozenset = frozenset(MODES)
    rtol: float = 1e-6  # first derivatives against central differences
    atol: float = 1e-7  # (relative to the largest difference)
    rtol2: float = 1e-5  # second derivatives against differences of gradients
    atol2: float = 1e-6
    kinks: tuple = ()
    # second order of an op linear in its operands is zero: the higher-order suite feeds it
    # squares of its operands (linear), or takes tanh of its result (matmul)
    nonlinear: str = ""
    # the share of a suite's hypothesis examples it draws (finite differences of every element
    # of a matrix, Hessians through LAPACK: a few samples cover the shapes)
    examples: float = 1.0

    @property
    def prim(self):
        return TABLE[[p.name for p in TABLE].index(self.name)]

    @property
    def arity(self):
        return len(self.prim.d) if self.family in ("unary", "binary") else None

    @property
    def domain(self):
        d = DOMAINS[self.name]
        return d if isinstance(d, tuple) else (d,)

    def __repr__(self):
        return self.name


def ids(ops):
    return [op.name for op in ops]


def _sample(op, fn, shapes, wrt, label, samplers=None, **kw):
    samplers = samplers or op.domain
    return Sample(op.name, fn, tuple(tuple(s) for s in shapes), tuple(wrt), tuple(samplers),
                  label, **kw)


# ---------------------------------------------------------------------------------------------
# Elementwise rows


def _spellings(op):
    """The ufunc itself and tape.numpy's function of the same name."""
    return st.sampled_from([("np", op.call), ("tnp", getattr(tnp, op.call.__name__))])


def unary_samples(op):
    def build(shape, spelling):
        name, fn = spelling
        return _sample(op, lambda a: fn(a), [shape], (0,), name, f_np=op.call,
                       row=0 not in shape)

    # and a 0-d non-leaf whose value is a Python float: the inline 0-d path
    scalar = _sample(op, lambda a: op.call(a * 1.0), [()], (0,), "0-d Python float",
                     scalar_path=True)
    return st.one_of(st.builds(build, SHAPES, _spellings(op)), st.just(scalar))


def binary_samples(op):
    def build(shapes, which, spelling):
        (sa, sb), out = shapes
        name, fn = spelling
        return _sample(op, lambda a, b: fn(a, b), [sa, sb], which, name, f_np=op.call,
                       row=0 not in out)

    def python_scalar(shape, side, seed):
        # a Python float on one side: a one-element operand read for every element
        da, db = op.domain
        rng = np.random.default_rng(seed)
        if side == 0:
            s = float(db(rng, ()))
            return _sample(op, lambda a: op.call(a, s), [shape], (0,), f"x op {s!r}", [da],
                           row=0 not in shape)
        s = float(da(rng, ()))
        return _sample(op, lambda b: op.call(s, b), [shape], (0,), f"{s!r} op x", [db],
                       row=0 not in shape)

    scalar = WHICH.map(lambda which: _sample(  # the inline 0-d path
        op, lambda a, b: op.call(a * 1.0, b * 1.0), [(), ()], which, "0-d Python floats",
        scalar_path=True))
    return st.one_of(st.builds(build, BSHAPES, WHICH, _spellings(op)),
                     st.builds(python_scalar, SHAPES, st.sampled_from([0, 1]), SEEDS), scalar)


# ---------------------------------------------------------------------------------------------
# Reductions and scans


@st.composite
def shape_and_axis(draw, tuples=True, none=True):
    shape = draw(SHAPES)
    nd = len(shape)
    options = []
    if none:
        options.append(st.none())
    if nd:
        options.append(st.integers(-nd, nd - 1))
        if tuples:
            options.append(st.lists(st.integers(0, nd - 1), unique=True, max_size=nd).flatmap(
                lambda ax: st.tuples(*[st.sampled_from([a, a - nd]) for a in ax])))
    axis = draw(st.one_of(*options)) if options else None
    return shape, axis


def reduced_count(shape, axis):
    if axis is None:
        return int(np.prod(shape))
    axes = (axis,) if isinstance(axis, int) else axis
    return int(np.prod([shape[a] for a in axes]))


REDUCE_FUNCS = {"sum": "sum", "prod": "prod", "amax": "max", "amin": "min"}


def reduce_samples(op):
    fname = REDUCE_FUNCS[op.name]

    def build(sa, keepdims, ns):
        shape, axis = sa
        fn = getattr(ns, fname)
        np_fn = getattr(np, fname)
        return _sample(op, lambda a: fn(a * 1.0, axis=axis, keepdims=keepdims), [shape], (0,),
                       f"{ns.__name__}.{fname}(axis={axis}, keepdims={keepdims})",
                       f_np=lambda a: np_fn(a, axis=axis, keepdims=keepdims),
                       row=int(np.prod(shape)) > 0)

    sa = shape_and_axis()
    if fname in ("max", "min"):  # NumPy refuses an empty reduction (no identity)
        sa = sa.filter(lambda s: reduced_count(*s) > 0)
    return st.builds(build, sa, st.booleans(), st.sampled_from([np, tnp]))


def scan_samples(op):
    def build(sa, ns):
        shape, axis = sa
        fn, np_fn = getattr(ns, op.name), getattr(np, op.name)
        return _sample(op, lambda a: fn(a * 1.0, axis=axis), [shape], (0,),
                       f"{ns.__name__}.{op.name}(axis={axis})",
                       f_np=lambda a: np_fn(a, axis=axis), row=int(np.prod(shape)) > 0)

    return st.builds(build, shape_and_axis(tuples=False), st.sampled_from([np, tnp]))


# ---------------------------------------------------------------------------------------------
# Select, index maps, matmul


def where_samples(op):
    def build(shapes, which, seed):
        (sa, sb, sm), out = shapes
        mask = np.random.default_rng(seed).random(sm) < 0.5
        return _sample(op, lambda a, b: np.where(mask, a, b), [sa, sb], which,
                       f"mask {sm}", op.domain * 2, row=False)

    return st.builds(build, hnp.mutually_broadcastable_shapes(
        num_shapes=3, min_dims=0, max_dims=3, min_side=0, max_side=3), WHICH, SEEDS)


def gather_samples(op):
    """Every way of reading positions of an array: integer (repeated) and boolean indices,
    slices, a transpose, a broadcast, a 0-d element, a reshape of a non-leaf."""
    def build(shape, kind, seed):
        rng = np.random.default_rng(seed)
        if kind == "int":  # repeated positions: the reverse accumulates
            idx = rng.integers(0, shape[0], size=5)
            fn = lambda a: (a * 1.0)[idx]  # noqa: E731
        elif kind == "slice":
            fn = lambda a: (a * 1.0)[::-1, ...][..., 1:]  # noqa: E731
        elif kind == "transpose":
            fn = lambda a: np.transpose(a * 1.0)  # noqa: E731
        elif kind == "broadcast":
            fn = lambda a: np.broadcast_to(a * 1.0, (2,) + shape) * 1.0  # noqa: E731
        elif kind == "mask":
            mask = rng.random(shape) < 0.5
            fn = lambda a: (a * 1.0)[mask]  # noqa: E731
        elif kind == "scalar":  # a 0-d gather: its value lives in sv
            fn = lambda a: (a * 1.0)[(0,) * len(shape)] * 2.0 + a.reshape(-1)[-1]  # noqa: E731
        else:  # a reshape of a non-leaf is a copy row whose value views its operand's buffer
            fn = lambda a: (a * 1.0).reshape(-1)[::-1] + 1.0  # noqa: E731
        return _sample(op, fn, [shape], (0,), kind, row=False)

    return st.builds(build, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3),
                     st.sampled_from(["int", "slice", "transpose", "broadcast", "mask", "scalar",
                                      "reshape"]), SEEDS)


def scatter_samples(op):
    def build(shape, which, scalar_value, seed):
        pos = np.random.default_rng(seed).integers(0, shape[0], size=4)  # the last write wins
        vshape = () if scalar_value else (4,) + shape[1:]

        def fn(a, b):
            y = a * 1.0
            if isinstance(b, tape.Tensor) and not isinstance(y, tape.Tensor):
                y = tape.tensor(y)  # a constant target written with a tensor
            y[pos] = b
            return y * 1.0

        return _sample(op, fn, [shape, vshape], which, f"y[{pos.tolist()}] = v",
                       op.domain * 2, row=True)

    return st.builds(build, hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=4),
                     WHICH, st.booleans(), SEEDS)


@st.composite
def _matmul_shapes(draw):
    m, k, n = (draw(st.integers(1, 3)) for _ in range(3))
    ba = draw(st.sampled_from([(), (2,), (1,), (2, 2)]))
    bb = draw(st.sampled_from([(), (2,), (1,), (2, 1)]))
    vec_a = draw(st.booleans()) and not ba
    vec_b = draw(st.booleans()) and not bb
    sa = (k,) if vec_a else ba + (m, k)
    sb = (k,) if vec_b else bb + (k, n)
    return sa, sb


def matmul_samples(op):
    return st.builds(lambda s, which: _sample(op, lambda a, b: a @ b, s, which, "a @ b",
                                              op.domain * 2),
                     _matmul_shapes(), WHICH)


# ---------------------------------------------------------------------------------------------
# Escapes (LAPACK / BLAS between jitted segments)


def blas_samples(op):
    """Just above BLAS_FLOPS (B M K N > 2^14, tape/core/bilinear.py): the product escapes to BLAS;
    small enough for finite differences of every element."""
    shapes = st.sampled_from([((26, 26), (26, 26)), ((2, 20, 20), (20, 21)),
                              ((26, 26), (2, 26, 26))])
    return st.builds(lambda s, which: _sample(op, lambda a, b: a @ b, s, which, "BLAS a @ b",
                                              op.domain * 2), shapes, WHICH)


LINALG = {"inv": np.linalg.inv, "det": np.linalg.det,
          "logabsdet": lambda a: np.linalg.slogdet(a)[1], "solve": np.linalg.solve}


def linalg_samples(op):
    fn = LINALG[op.name]
    square = st.tuples(st.sampled_from([(), (2,)]), st.integers(1, 3))
    if op.name != "solve":
        return st.builds(lambda s: _sample(op, fn, [s[0] + (s[1], s[1])], (0,), op.name),
                         square)

    def build(s, rhs, which):
        batch, n = s
        sb = (n,) if rhs == "vector" and not batch else batch + (n, 2)
        return _sample(op, fn, [batch + (n, n), sb], which, f"solve, {rhs} rhs",
                       (well_conditioned, uniform(-1, 1)))

    return st.builds(build, square, st.sampled_from(["vector", "matrix"]), WHICH)


# ---------------------------------------------------------------------------------------------
# Near-non-differentiable points: the conventions (ties split evenly, |x|' = 0 at 0, NaN in gives
# NaN out, infinite slopes at singular points), hand-derived


NAN = np.nan


def _tie_kinks(fn, big):
    return (Kink(fn, ([1.0, 2.0, -1.0], [1.0, 1.0, -1.0]),
                 ([0.5, big, 0.5], [0.5, 1.0 - big, 0.5]), "ties split evenly"),
            Kink(lambda x: fn(x, 0.0), ([0.0, 1.0, -1.0],), ([0.5, big, 1.0 - big],),
                 "a broadcast 0.0: relu-like at a tie"),
            Kink(lambda a, b: fn(a * 1.0, b * 1.0), (3.0, 3.0), (0.5, 0.5), "0-d path tie"))


def _reduce_tie_kinks(fn, v):
    return (Kink(fn, ([1.0, v, 0.0, v, v],), ([0.0, 1 / 3, 0.0, 1 / 3, 1 / 3],), "ties"),
            Kink(lambda a: fn(a, axis=0), ([[v, v, 0.0], [v, 0.0, 0.0]],),
                 ([[0.5, 1.0, 0.5], [0.5, 0.0, 0.5]],), "ties along an axis"),
            Kink(fn, ([1.0, NAN, 5.0],), ([0.0, 1.0, 0.0],), "NaN takes the gradient"))


KINKS = {
    "abs": (Kink(np.abs, ([0.0, -0.0, 2.0, -3.0],), ([0.0, 0.0, 1.0, -1.0],), "0 at 0"),
            Kink(lambda x: abs(x * 1.0), (0.0,), (0.0,), "0-d path")),
    "sqrt": (Kink(np.sqrt, ([0.0, 4.0],), ([np.inf, 0.25],), "infinite slope at 0"),
             Kink(lambda x: np.sqrt(x * 1.0), (0.0,), (np.inf,), "0-d path")),
    "log": (Kink(np.log, ([0.0],), ([np.inf],), "singular at 0"),),
    "arcsin": (Kink(np.arcsin, ([1.0],), ([np.inf],), "singular at 1"),),
    "arctanh": (Kink(np.arctanh, ([1.0],), ([np.inf],), "singular at 1"),),
    "reciprocal": (Kink(np.reciprocal, ([0.0, 2.0],), ([-np.inf, -0.25],), "singular at 0"),),
    "divide": (Kink(lambda x: 1.0 / x, ([0.0],), ([-np.inf],), "singular at 0"),),
    # d/da a**b = b a**(b-1): 0 for b > 1, 1 for b == 1, 0 for b == 0 (constant 1);
    # d/db a**b = a**b log a -> 0 as a -> 0+ (b > 0)
    "power": (Kink(np.power, ([0.0, 0.0, 0.0, 0.0], [2.0, 1.0, 0.0, 3.0]),
                   ([0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]), "base zero"),
              Kink(np.power, ([0.0], [0.5]), ([np.inf], [0.0]), "base zero, b < 1"),
              Kink(lambda a, b: (a * 1.0) ** (b * 1.0), (0.0, 2.0), (0.0, 0.0), "0-d path")),
    "maximum": _tie_kinks(np.maximum, 1.0), "fmax": _tie_kinks(np.fmax, 1.0),
    "minimum": _tie_kinks(np.minimum, 0.0), "fmin": _tie_kinks(np.fmin, 0.0),
    "amax": _reduce_tie_kinks(np.max, 3.0), "amin": _reduce_tie_kinks(np.min, -3.0),
    "prod": (Kink(np.prod, ([2.0, 0.0, 3.0],), ([0.0, 6.0, 0.0],), "one zero"),
             Kink(np.prod, ([2.0, 0.0, 0.0, 5.0],), ([0.0, 0.0, 0.0, 0.0],), "two zeros"),
             Kink(lambda x: np.prod(x, axis=1), ([[0.0, 4.0], [2.0, 3.0], [0.0, 0.0]],),
                  ([[4.0, 0.0], [3.0, 2.0], [0.0, 0.0]],), "zeros along an axis")),
    # d cumprod_k / d x_r = prod_{i<=k, i!=r} x_i: summed over k
    "cumprod": (Kink(np.cumprod, ([2.0, 0.0, 3.0, 0.5],), ([1.0, 2.0 + 6.0 + 3.0, 0.0, 0.0],),
                     "a zero"),
                Kink(np.cumprod, ([0.0, 2.0, 3.0],), ([1.0 + 2.0 + 6.0, 0.0, 0.0],),
                     "a leading zero")),
}

# Elementwise rows' gradients at a = NaN (b = 2 for binary rows), derived from the partials:
# NaN, except where a partial does not read the NaN operand.
NAN_GRADS = {
    "neg": (-1.0,), "copy": (1.0,),
    "add": (1.0, 1.0), "subtract": (1.0, -1.0), "multiply": (2.0, NAN), "divide": (0.5, NAN),
    "power": (NAN, NAN), "arctan2": (NAN, NAN), "hypot": (NAN, NAN), "logaddexp": (NAN, NAN),
    "maximum": (1.0, 0.0), "minimum": (1.0, 0.0),  # NaN wins maximum: it takes the gradient
    "fmax": (0.0, 1.0), "fmin": (0.0, 1.0),  # fmax ignores NaN: the other operand wins
    "remainder": (1.0, NAN), "fmod": (1.0, NAN),  # a - b q: q is NaN
}


def nan_grads(op):
    return NAN_GRADS.get(op.name, (NAN,) * op.arity)


# ---------------------------------------------------------------------------------------------
# The database


_FAMILY_SAMPLES = {"unary": unary_samples, "binary": binary_samples, "reduce": reduce_samples,
                   "scan": scan_samples, "select": where_samples, "gather": gather_samples,
                   "scatter": scatter_samples, "matmul": matmul_samples}
_CALLS = {"where": np.where, "gather": np.take, "scatter": np.put, "matmul": np.matmul,
          **{n: getattr(np, f) for n, f in REDUCE_FUNCS.items()},
          "cumsum": np.cumsum, "cumprod": np.cumprod}
# ops linear in their operands: second order sees their squares
_LINEAR = {"reduce", "scan", "select", "gather", "scatter"}
# the tangent sweep stops at escape rows (tape.jvp's driver runs their rules: "forward")
_ESCAPE_MODES = frozenset(MODES) - {"tangent"}


def op_info(p):
    """The OpInfo of table row p from the declarations above (None: not declared here)."""
    if p.name not in DOMAINS:
        return None
    if p.family in _FAMILY_SAMPLES:
        call = p.ufunc if p.family in ("unary", "binary") else _CALLS[p.name]
        nonlinear = "square" if p.family in _LINEAR else "tanh" if p.family == "matmul" else ""
        return OpInfo(p.name, p.family, call, _FAMILY_SAMPLES[p.family],
                      kinks=KINKS.get(p.name, ()), nonlinear=nonlinear)
    if p.name == "matmul_blas":
        return OpInfo(p.name, p.family, np.matmul, blas_samples, modes=_ESCAPE_MODES,
                      nonlinear="tanh", examples=0.2)
    # an escape on square matrices: its call is in LINALG
    return OpInfo(p.name, p.family, LINALG[p.name], linalg_samples, modes=_ESCAPE_MODES,
                  rtol2=1e-4, atol2=1e-5, examples=0.4)


OPS = []
BY_NAME = {}


def declare(p):
    """Add row p's OpInfo to the database (a row appended to the table after this module was
    imported: tests/_add_an_escape.py)."""
    op = op_info(p)
    if op is not None:
        OPS.append(op)
        BY_NAME[op.name] = op
    return op


for _p in TABLE:
    declare(_p)
UNARY = [op for op in OPS if op.family == "unary"]
BINARY = [op for op in OPS if op.family == "binary"]
ELEMENTWISE = UNARY + BINARY


def claiming(mode, ops=OPS):
    return [op for op in ops if mode in op.modes]


def undeclared(table=TABLE):
    """Rows of the table with neither an entry here nor a file that tests them."""
    return [p.name for p in table
            if p.family != "input" and p.name not in BY_NAME and p.name not in TESTED_ELSEWHERE]


def families():
    """The table's families (jit.table.FAMILIES, the source of truth) each op here covers."""
    return {f: [op.name for op in OPS if op.family == f] for f in FAMILIES}
