"""Compiled replay: record a function once, then evaluate its value and gradient many times with
the jitted interpreters and no Python per op.

    cf = tape.compile(loss, w0, data)          # records loss(w0, data) once
    value, g = cf.value_and_grad(w1, data)     # forward sweep + reverse sweep, in Numba

Every positional array (or float) argument is an input slot of the recording, so nothing that
should be an input is frozen; other arguments (ints, strings, None, tuples of them) are static
and part of the recording's identity. Where the function read a recorded value in Python while
recording (``if x > 0``, ``t.item()``, an ``argmax`` used as an index, a boolean mask), a guard
was noted (``_guards``); a replay checks every guard against the replayed values and, when one
differs, records the function again at the new arguments (a new *variant*, cached, at most
``max_variants`` of them, least recently used first out). A result is never stale.

A custom Function (``tape.Function``) is replayed by calling its forward and backward again in
Python at its rows (its outputs must be differentiable float arrays of unchanging shapes); such a
recording cannot be saved to a file (pickling records it again) and ``cf.jvp`` refuses it. A
recording stays on one tape however long (an eager one rolls over to a new tape every
``MAX_ROWS`` rows).
"""
from __future__ import annotations

import collections
import functools
import math
import threading
import warnings

import numpy as np

import jit
from jit.table import FAMILIES, OPCODE, TABLE

from ..core import guards as _guards
from . import persist as _persist, replay_hooks as _replay_hooks
from ..parallel.gemm import cached_native_pieces, native_pieces
from ..escapes import ESCAPES, pack
from ..core.hooks import multi_hook_scope
from ..parallel.threads import run_pieces, run_shares, thread_count
from ..reverse.backward import (WRITES_A, WRITES_B, ZEROES_OWN, adjoint_takers, arena,
                                batch_pieces, reverse_cuts, reverse_in_shares, segment_bounds,
                                summed_operands, sweep_segments)
from ..core.state import state as thread_state
from ..core.tensor import Tensor
from ..transforms.functional import _argnums, _FreshTape

LEAF = OPCODE["leaf"]
# Array inputs and gradients at least this large skip a copy on a straight value_and_grad: the
# sweep reads the caller's array in place and accumulates the gradient straight into the array
# returned (on W3's 10^6 elements the two copies and the arena clear cost ~0.9 ms of ~15)
ZERO_COPY_SIZE = 1 << 14
# A blocked run of at least this many elements is split among threads: a seeded run (closed by
# a full sum, swept both ways block by block) in pieces at the top of NumPy's pairwise
# summation, so the sum keeps its bits (W3 on 2 cores: 13.4 -> 9.0 ms); any other, forward and
# reverse, in shares of its blocks (W2's Qx * Qx summed over lines: 0.90-0.95x a call)
THREAD_SIZE = 1 << 17
_WHOLE = np.zeros(3)  # sweep's `part` for a call on its own (jit._interp.WHOLE: tape imports
# Numba's modules only when a kernel first runs)
_STEP = np.array([0.0, 1.0, 0.0])  # ... for a step of a threaded call, outside the workers
_FAMILY_OF = np.array([FAMILIES.index(p.family) for p in TABLE], dtype=np.int64)
_INPUT, _ESCAPE = FAMILIES.index("input"), FAMILIES.index("escape")


def compile(f, *example_args, argnums=0, max_variants=8, threads=None,  # noqa: A001
            check_constants=False):
    """Record ``f(*example_args)`` once and return a CompiledTape that replays it.

    `argnums` (int or tuple) are the arguments gradients are taken with respect to.
    `threads`: how many threads a call may split a large blocked run among (at least
    THREAD_SIZE elements: a run closed by a sum, as a loss over a large array, in pieces of its
    pairwise sum; any other, forward and reverse, in shares of its blocks), and a large batched
    matmul (its batch elements, forward and reverse: ``_backward.batch_pieces``); None:
    NUMBA_NUM_THREADS if set, else the cores this process may run on, rounded down to a power
    of two, at most 8; 1: none (say so in process pools that already use every core). Results
    are the same bits whatever the count. The threads wait for work awake for 2 ms after each
    piece (``_threads.SPIN_SECONDS``), so a loop of calls does not pay for waking them.
    `check_constants`: record f twice at each new recording and raise, naming the lines, when
    constants differ between the two (a random draw or a global that changed inside f, which
    a replay would freeze: ``_frozen``); a debugging aid, it doubles the cost of recording.
    """
    return CompiledTape(f, example_args, argnums, max_variants, threads, check_constants)


def _serialized(method):
    """Calls on one CompiledTape replay into its own buffers: from several threads at once they
    would overwrite each other's values and adjoints mid-sweep (the sweeps release the GIL), so
    each call holds the tape's lock. Parallel replays: ``value_and_grad_batch(threads=...)``,
    or one compiled tape per thread."""
    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return locked


class CompiledTape:
    threads = None  # (see compile)
    check_constants = False  # (see compile)
    state = None  # a loaded tape's BackwardState: its hook points call its members
    _lean = None  # the last value_and_grad's variant, as a lean call (_Variant.lean_value_and_grad)

    def __init__(self, f, example_args, argnums=0, max_variants=8, threads=None,
                 check_constants=False):
        self.f = f
        self.threads = threads
        self.check_constants = check_constants
        self.argnums = argnums
        self.nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
        self.max_variants = max_variants
        self.variants = collections.OrderedDict()  # key -> _Variant, most recently used last
        self.counters = collections.Counter()
        self.misses = collections.deque(maxlen=20)  # (guard line, reason) of re-recordings
        self._lock = threading.RLock()  # (re-entrant: hvp and batches call value_and_grad)
        self._record(tuple(_as_input(a) for a in example_args))

    # -- public API -----------------------------------------------------------------------
    @_serialized
    def __call__(self, *args):
        """The value of f at `args` (a forward sweep)."""
        v = self._variant(args, defer=True)
        if v.deferred:
            try:
                v.values(self.nums, self.threads)
            finally:
                v.give_back()
        return v.output()

    @_serialized
    def value_and_grad(self, *args, state=None):
        """``(f(*args), gradient)`` for scalar f: forward sweep, reverse sweep (one jitted call
        when the forward sweep needs no stop for Python: see ``_Variant.straight``). `state`: a
        ``tape.BackwardState`` whose members the recording's ``state.hook(x, name)`` points call
        in this call's backward (None: the state f recorded them with, or ``cf.state`` on a
        loaded tape)."""
        if thread_state.saved_hooks is not None:
            return self._value_and_grad_packed(args, state)
        lean = self._lean
        if lean is not None and state is None:
            result = lean(args)
            if result is not None:
                self.counters["calls"] += 1
                self.counters["hits"] += 1
                return result
        v = self._variant(args, defer=True)
        try:
            grads = v.gradient(self.nums, forward=v.deferred, threads=self.threads,
                               state=self._state(state))
        finally:
            v.give_back()
        value = v.output()
        self._lean = v.lean_value_and_grad(self.nums, isinstance(self.argnums, int))
        return value, (grads[0] if isinstance(self.argnums, int) else tuple(grads))

    def _value_and_grad_packed(self, args, state):
        """value_and_grad inside saved_tensors_hooks: the forward replayed, its saved values
        packed and unpacked as eager's backward does (``_replay_hooks.pack_and_unpack``), then
        the reverse sweep over the unpacked values."""
        hooks = thread_state.saved_hooks
        thread_state.saved_hooks = None  # (the replay itself, or a new recording, packs nothing)
        try:
            v = self._variant(args)
        finally:
            thread_state.saved_hooks = hooks
        value = v.output()
        kept = []
        try:
            if v.t is not None:
                kept = _replay_hooks.pack_and_unpack(v.t, v.A, _need_masks(v, self.nums)[2])
            grads = v.gradient(self.nums, threads=self.threads, state=self._state(state))
        finally:
            _replay_hooks.restore(v.t, kept)
        return value, (grads[0] if isinstance(self.argnums, int) else tuple(grads))

    def grad(self, *args, state=None):
        return self.value_and_grad(*args, state=state)[1]

    @_serialized
    def vjp(self, *args, state=None):
        """``(f(*args), vjp_fn)``; ``vjp_fn(cotangent)`` returns one gradient per argnum. It is
        valid until the next call of this CompiledTape (the values are replayed in place).
        `state`: as in ``value_and_grad``."""
        v = self._variant(args)
        value = v.output()
        call = self.counters["calls"]

        def vjp_fn(cotangent):
            with self._lock:
                if self.counters["calls"] != call:
                    raise RuntimeError("this vjp_fn belongs to an earlier call of the compiled "
                                       "tape: its values have been replayed over since. Call "
                                       "cf.vjp again.")
                gs = v.gradient(self.nums, seed=np.asarray(cotangent, dtype=np.float64),
                                state=self._state(state))
            return gs[0] if isinstance(self.argnums, int) else tuple(gs)

        return value, vjp_fn

    @_serialized
    def jvp(self, args, tangents):
        """``(f(*args), J @ tangents)`` with one tangent per argnum, by the jitted tangent
        sweep over the replayed values."""
        v = self._variant(tuple(args))
        return v.output(), v.tangent(self.nums, tangents)

    @_serialized
    def hvp(self, args, v):
        """Exact Hessian-vector product of scalar f at `args` with `v` (one per argnum).

        With f at hand, by forward over reverse through a compiled gradient: the first call
        records ``grad(f)`` once (its backward as recorded operations, about as long as a few
        slow HVPs), every call then replays it with the jitted forward and tangent sweeps (W1:
        0.3 ms against 180 ms). A tape loaded without f, or calling custom Functions, takes
        reverse over forward over the replayed recording, whose forward rules run in Python."""
        vs = v if isinstance(v, (tuple, list)) else (v,)
        if len(vs) != len(self.nums):
            raise ValueError(f"hvp: {len(self.nums)} vectors expected (one per argnum)")
        args = tuple(args)
        _argnums(self.nums, len(args))
        _check_shapes("hvp", "v", vs, [np.shape(_raw(_as_input(args[i]))) for i in self.nums],
                      self.nums)
        for v in self.variants.values():
            if v.hooks is not None:
                _replay_hooks.refuse(v.hooks.sites, "cf.hvp",
                                     "use tape.hvp (eager), or compile f without the hook")
        if self.f is not None and not self._calls_functions():
            return self._hvp_compiled(args, vs)
        return self._hvp_recorded(args, vs)

    def _calls_functions(self):
        """Whether a recording calls custom Functions (their ctx is per recording)."""
        return any(v.t is not None and v.t.functions for v in self.variants.values())

    def _has_hooks(self):
        return any(v.hooks is not None for v in self.variants.values())

    def _state(self, state):
        """The BackwardState a call's hook points look their members up in."""
        return self.state if state is None else state

    def _hvp_compiled(self, args, vs):
        gt = self.__dict__.get("_grad_tape")
        if gt is None:
            from .. import numpy as tnp
            from ..transforms.functional import grad

            f, argnums = self.f, self.argnums

            def gradient(*a):  # one output: several argnums' gradients flattened, end to end
                g = grad(f, argnums=argnums)(*a)
                if isinstance(argnums, int):
                    return g
                return tnp.concatenate([tnp.reshape(g_i, (-1,)) for g_i in g])

            gt = self._grad_tape = CompiledTape(gradient, args, argnums, self.max_variants)
        _, hv = gt.jvp(args, vs)
        if isinstance(self.argnums, int):
            return hv
        shapes = [np.shape(_raw(_as_input(args[i]))) for i in self.nums]
        sizes = [int(np.prod(sh)) for sh in shapes]
        parts = np.split(np.reshape(hv, -1), np.cumsum(sizes)[:-1])
        return tuple(np.reshape(p, sh) if sh else float(p[0]) for p, sh in zip(parts, shapes))

    def _hvp_recorded(self, args, vs):
        from ..reverse import autograd
        from ..forward import forward_ad
        from ..core.state import enable_grad

        var = self._variant(tuple(args))
        if var.t is None or var.out._tape is None:
            out = [np.zeros(var.shapes[i]) for i in self.nums]
        else:
            if var.out.size != 1:
                raise TypeError("hvp needs a scalar output")
            with forward_ad.dual_level() as level:
                lv = thread_state.levels[-1]
                xs = [var.leaves[i] for i in self.nums]
                for x, u in zip(xs, vs):
                    lv.leaf_sources[id(x)] = Tensor(np.asarray(u, dtype=np.float64)
                                                    .reshape(x.shape))
                with enable_grad():
                    g = forward_ad.unpack_dual(var.out, level=level).tangent
            if g is None or not g.requires_grad:
                out = [np.zeros(x.shape) for x in xs]
            else:
                gs = autograd.grad([g], xs, retain_graph=True, allow_unused=True)
                out = [np.zeros(x.shape) if h is None else np.asarray(h) for h, x in zip(gs, xs)]
        return out[0] if isinstance(self.argnums, int) else tuple(out)

    def value_and_grad_batch(self, X, *rest, threads=1, state=None):
        """Values and gradients for every row of X (the first argnum) along its leading axis,
        stacked: per-sample gradients, ensembles, chains. The other arguments are shared.
        Hooks f registered run once per row, rows in order (`state`: as in ``value_and_grad``).

        `threads` > 1 splits the rows among threads, each replaying its own copy of the
        recording (the jitted sweeps release the GIL); rows whose guards need another
        variant fall back to this tape, one at a time. Results are the same either way.
        """
        X = np.asarray(X, dtype=np.float64)
        i = self.nums[0]
        if self._calls_functions() or self._has_hooks() or thread_state.saved_hooks:
            threads = 1  # a Function's ctx belongs to one recording; hooks (and the
            # saved_tensors_hooks of this thread) run in row order
        if threads > 1 and len(X) > 1:
            values, grads = self._batch_threads(X, rest, i, int(threads))
        else:
            values, grads = [], []
            for row in X:
                args = list(rest)
                args.insert(i, row)
                value, g = self.value_and_grad(*args, state=state)
                values.append(value)
                grads.append(g)
        if isinstance(self.argnums, int):
            return np.asarray(values), np.stack(grads) if grads else np.zeros((0,) + X.shape[1:])
        if not grads:
            v = next(reversed(self.variants.values()))
            return np.asarray(values), tuple(np.zeros((0,) + v.shapes[j]) for j in self.nums)
        return np.asarray(values), tuple(np.stack(gs) for gs in zip(*grads))

    def _batch_threads(self, X, rest, i, threads):
        from concurrent.futures import ThreadPoolExecutor

        def args_of(row):
            a = list(rest)
            a.insert(i, row)
            return tuple(_as_input(x) for x in a)

        with self._lock:
            base = self._variant(args_of(X[0]))  # the variant the first row takes
        out = [None] * len(X)

        def work(lo, hi):
            with self._lock:  # (another thread may be replaying base)
                v = base.clone()
            for r in range(lo, hi):
                args = args_of(X[r])
                ok = v.accepts(args)
                if ok:
                    v.load(args)
                    ok = v.straight or v.replay() is None  # straight: one call below
                if ok:
                    g = v.gradient(self.nums, forward=v.straight)
                    out[r] = (v.output(), g[0] if isinstance(self.argnums, int) else tuple(g))
                else:  # another path: this tape (and its variants), one row at a time
                    out[r] = self.value_and_grad(*args)

        bounds = np.linspace(0, len(X), threads + 1).astype(int)
        with ThreadPoolExecutor(threads) as pool:
            for f in [pool.submit(work, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])
                      if hi > lo]:
                f.result()
        with self._lock:
            self.counters["calls"] += len(X)
        return [o[0] for o in out], [o[1] for o in out]

    @_serialized
    def __reduce__(self):
        """Pickles as the function and the arguments of its latest recording; unpickling
        records again (for process pools and Dask: f must be picklable, e.g. module-level).
        A tape loaded from a file without its function pickles as that file's arrays."""
        v = next(reversed(self.variants.values()))
        if self.f is None:
            import io

            buf = io.BytesIO()
            _persist.save(v, buf, self.argnums)
            return (_load_bytes, (buf.getvalue(),))
        return (_rebuild, (self.f, v.args, self.argnums, self.max_variants, self.threads))

    @_serialized
    def save(self, path):
        """Write the latest recording to `path` (.npz: plain arrays, no code; the format
        version and the table hash included). ``tape.load(path)`` reads it back."""
        _persist.save(next(reversed(self.variants.values())), path, self.argnums)

    @classmethod
    def _from_variant(cls, variant, f, argnums, max_variants=8):
        self = cls.__new__(cls)
        self.f = f
        self.argnums = argnums
        self.nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
        self.max_variants = max_variants
        self.variants = collections.OrderedDict([(0, variant)])
        self.counters = collections.Counter()
        self.misses = collections.deque(maxlen=20)
        self._lock = threading.RLock()
        return self

    @_serialized
    def stats(self):
        """Counters (calls, hits, guard misses, recordings, evictions), the variants and the
        source lines of the guards that caused re-recordings."""
        counts = {k: self.counters.get(k, 0) for k in ("calls", "hits", "guard_misses",
                                                         "recordings", "evictions")}
        return {**counts, "variants": len(self.variants),
                "guards": [len(v.guards) for v in self.variants.values()],
                "recent_misses": list(self.misses)[-5:]}

    # -- variants ------------------------------------------------------------------------------
    def _variant(self, args, defer=False):
        """The variant that takes `args`, loaded and replayed. With `defer`, a variant with
        nothing to check or run in Python between the sweeps is only loaded (``deferred``):
        its caller runs the forward sweep in the same jitted call as the reverse one."""
        if thread_state.saved_hooks is not None:
            _replay_hooks.refuse_saved_hooks("a compiled tape's value, vjp, jvp or hvp")
        self.counters["calls"] += 1
        self._lean = None
        args = tuple(map(_as_input, args))
        missed = None
        for k in reversed(self.variants):  # (returns before changing the order)
            v = self.variants[k]
            if not v.accepts(args):
                continue
            v.deferred = defer and v.straight
            v.load(args, borrow=v.deferred)
            if v.deferred:
                self.variants.move_to_end(k)
                self.counters["hits"] += 1
                return v
            failed = v.replay(self.threads)
            if failed is None:
                self.variants.move_to_end(k)
                self.counters["hits"] += 1
                return v
            missed = failed
        if missed is not None:
            self.counters["guard_misses"] += 1  # once per call that no variant could take
            self.misses.append((missed.where, "guard differs"))
        return self._record(args)

    def _settle(self, v, args):
        """Replay a new recording once at its own arguments, so that every result comes from
        the replay: eager NumPy may round differently in the last bits, and a call's result
        should not depend on whether it recorded. (A guard that the replay reads differently,
        at a knife edge, keeps its recorded result: that variant then never replays, and those
        arguments record again, which is slow but never wrong.)"""
        if v.t is None:
            return
        v.load(args)
        v.replay()

    def _record(self, args):
        if self.f is None:
            where = self.misses[-1][0] if self.misses else None
            raise RuntimeError(
                "this compiled tape was loaded from a file without its function, and the "
                + (f"guard at {where} differs" if where else "arguments do not fit it "
                   "(shapes or static arguments)")
                + ": it cannot record again. Pass f= to tape.load to allow that.")
        v = _Variant(self.f, args, self.nums)
        if self.check_constants:
            from . import frozen as _frozen

            sites = {}
            w = _Variant(self.f, args, self.nums, const_sites=sites)
            _frozen.check(v, w, sites, getattr(self.f, "__name__", "f"))
        self._settle(v, args)
        self.counters["recordings"] += 1
        self.variants[self.counters["recordings"]] = v
        if len(self.variants) > self.max_variants:
            self.variants.popitem(last=False)
            self.counters["evictions"] += 1
            where = self.misses[-1][0] if self.misses else "?"
            warnings.warn(f"tape.compile: more than {self.max_variants} variants of "
                          f"{getattr(self.f, '__name__', 'f')} (the guard at {where} keeps "
                          "changing): each call now records again. Make the value read there "
                          "independent of the inputs, or raise max_variants.", RuntimeWarning,
                          stacklevel=4)
        return v


def _is_input(a):
    """Float arrays and floats are inputs (slots); anything else (ints, integer or boolean
    arrays used as indices or masks, strings, None) is static: compared by value per call."""
    if type(a) is Tensor:
        return True
    if isinstance(a, (float, np.floating)):
        return True
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def _as_input(a):
    """A list of numbers is an array input, as eager transforms take it."""
    if isinstance(a, list):
        arr = np.asarray(a)
        if arr.dtype.kind == "f":
            return arr
    return a


def _same_static(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and \
            a.dtype == b.dtype and np.array_equal(a, b)
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable: not the same
        return False


def _sole_contributions(A, need, escapes, out, summed):
    """Escape row -> operand bits (1: a, 2: b) whose adjoint that row's rule can write in place
    (``vjp_into``) and alone contributes to, an array slot other than the output's: the rule
    writes that block whole (``_run_escape``), so its reader need not zero it after reading.
    `summed` (``summed_operands``): those escapes add to u's adjoint, and not to a's."""
    a, b = A.R[:, 1], A.R[:, 2]
    count = adjoint_takers(A, need)
    for u, _, _ in summed.values():
        count[u] += 1
    fresh = {}
    for c in escapes:
        if not ESCAPES[TABLE[A.code[c]].name].vjp_into:
            continue
        bits = sum(bit for s, bit in ((int(a[c]), WRITES_A), (int(b[c]), WRITES_B))
                   if need[c] & bit and s != out and count[s] == 1 and A.is_array[s]
                   and not (bit == WRITES_A and c in summed))
        if bits:
            fresh[c] = bits
    return fresh


def _fresh_writers(A, need, fresh, out):
    """An escape's adjoint that one swept row alone adds to, a block of that row's size: the
    row zeroes it just before adding (need bits FRESH_A / FRESH_B), while in cache, and the
    escape's rule stops zeroing it after reading, a pass over memory (W2's 2 MB adjoint of Qx).
    Updates `need` and the escapes' bits in `fresh`."""
    a, b = A.R[:, 1], A.R[:, 2]
    family = _FAMILY_OF[A.code]
    for c, bits in fresh.items():
        if not bits & ZEROES_OWN or c == out:  # (the output's block holds the seed)
            continue
        adds_a = (a == c) & ((need & jit.NEED_A) != 0)
        adds_b = (b == c) & ((need & jit.NEED_B) != 0)
        rows = np.flatnonzero(adds_a | adds_b)
        if len(rows) != 1:
            continue
        j = int(rows[0])
        if family[j] in (_INPUT, _ESCAPE) or not A.is_array[j] or A.size[j] != A.size[c]:
            continue
        need[j] |= (jit.FRESH_A if adds_a[j] else 0) | (jit.FRESH_B if adds_b[j] else 0)
        fresh[c] = bits & ~ZEROES_OWN


def _need_masks(v, nums):
    """(root, live, need) of a gradient of v's output with respect to its inputs `nums` (see
    ``jit.need_pass``)."""
    n = len(v.A.sv)
    src = np.zeros(n, np.uint8)
    for i in nums:
        if v.slots[i] is not None:
            src[v.slots[i]] = 1
    root = np.zeros(n, np.uint8)
    root[v.out._slot] = 1
    live = np.zeros(n, np.uint8)
    need = np.zeros(n, np.uint8)
    jit.need_pass(v.A.R, src, root, live, need)
    return root, live, need


def _seeded_runs(v, need, keep):
    """Mark the runs closed by a sum whose reverse a straight variant's forward sweeps
    (``jit.seed_pass``, need bit SEEDED); returns (first row, sum row) of those worth threads."""
    A = v.A
    first = np.full(len(A.sv), -1, np.int64)
    if not v.straight or not jit.seed_pass(A.R, A.S, A.IA, need, keep, first):
        return []
    return [(int(first[e]), int(e)) for e in np.flatnonzero(first >= 0)
            if A.size[first[e]] >= THREAD_SIZE]


def _plain_runs(v, need, seeded_runs):
    """(first row, end row) of the runs of THREAD_SIZE or more elements, other than seeded
    ones, that a straight variant's forward sweep meets (``_Variant._runs``: plain runs, and
    runs closed by a sum over lines, with the sum): a threaded call splits them too."""
    if not v.straight:
        return []
    n = len(v.A.sv)
    return [(r0, e) for r0, e in v._runs  # (a straight variant has no cuts: one range)
            if not (e < n and need[e] & jit.SEEDED)  # (a seeded run: in seeded_runs or small)
            and not any(r0 <= s1 and s0 < e for s0, s1 in seeded_runs)]


class _ValuePlan:
    """What a value-only call of a straight variant needs: the runs that a gradient with respect
    to `nums` would seed (their values in scratch, their sums block by block, no reverse: need
    bit VALUES), and no adjoint arena (the sweep reads none without a reverse)."""

    def __init__(self, v, nums):
        A = v.A
        self.rows = len(A.sv)
        root, _, need = _need_masks(v, nums)
        self.split = _seeded_runs(v, need, root.copy())
        self.plain = _plain_runs(v, need, self.split)  # (split beside seeded ones)
        values = np.where(need & jit.SEEDED, jit.SEEDED | jit.VALUES, 0).astype(np.uint8)
        self.G, self.GO = np.zeros(1), np.zeros(1, np.int64)
        self.value_args = (A.R, A.S, A.VA, self.GO, A.sv, self.G, A.IA, A.FA, values)


class _Plan:
    """What a gradient of one variant with respect to some inputs needs, computed once: the
    need masks, the adjoint arena and what to read from it and clear in it after a call."""

    def __init__(self, v, nums):
        A = v.A
        n = self.rows = len(A.sv)
        root, live, need = _need_masks(v, nums)
        self.live, self.need = live, need
        # hooked slots the gradient reaches: their adjoints stay in the arena, cuts after them
        self.hooked = [s for s in v.hooks.slots if live[s]] if v.hooks is not None else []
        self.summed = {} if v.t.functions else summed_operands(v.t, A, need, live,
                                                                {v.out._slot, *self.hooked})
        stored = live
        self.split = []  # (first row, sum row) of the seeded runs worth threads
        self.plain = []  # (first row, end row) of the other runs a straight call splits
        if not v.t.functions:  # (a Function's rule reads and writes the arena in Python)
            # adjoints that never leave their blocked run stay in scratch, not in the arena
            keep = root.copy()
            for u, _, _ in self.summed.values():  # an escape adds to it: in the arena
                keep[u] = 1
            keep[self.hooked] = 1  # a hook reads and writes it
            # runs closed by a sum: their reverse inside their forward
            self.split = _seeded_runs(v, need, keep)
            self.plain = _plain_runs(v, need, self.split)
            cuts, dropped = reverse_cuts(v.t, need, self.hooked)
            bounds = np.array(segment_bounds(n, cuts, dropped), dtype=np.int64)
            if jit.local_pass(A.R, A.S, A.IA, need, keep, bounds):
                stored = live & ((need & jit.LOCAL) == 0)
        # a seeded sum's seed, the sum's adjoint on the last call, in a cell per row after
        # the arena (``jit._interp._seed_cell``)
        seeds = n if np.any(need & jit.SEEDED) else 0
        GO, G = self.GO, self.G = arena(A, stored, seeds)
        # the kernels zero the adjoint of every row they sweep (need bit 4), so the arena is
        # clean for the next call; what they do not sweep is zeroed after reading (rest)
        family = _FAMILY_OF[A.code]
        swept = (need != 0) & (family != _INPUT) & (family != _ESCAPE)
        need[swept] |= jit.CLEAR
        self.fresh = {} if v.t.functions else _sole_contributions(A, need, v.escapes,
                                                                  v.out._slot, self.summed)
        for c in v.escapes:  # their rules zero their own adjoints, still in cache
            if need[c] and live[c]:
                self.fresh[c] = self.fresh.get(c, 0) | ZEROES_OWN
                swept[c] = True
        if not v.t.functions:
            _fresh_writers(A, need, self.fresh, v.out._slot)
        # an operand's adjoint that an escape's rule writes whole (fresh bits 1 / 2) need not be
        # zeroed once read (W2: the centring's 2 MB adjoint)
        for c, bits in self.fresh.items():
            for s, bit in ((int(A.R[c, 1]), WRITES_A), (int(A.R[c, 2]), WRITES_B)):
                if bits & bit and swept[s]:
                    need[s] &= ~np.uint8(jit.CLEAR)
        self.rest = [(int(s), int(GO[s]), int(GO[s]) + int(A.size[s]))
                     for s in np.flatnonzero(live.astype(bool) & ~swept)]
        self.dirty = True
        self.args = (A.R, A.S, A.VA, GO, A.sv, G, A.IA, A.FA, need)  # sweep's first nine
        self.reverse_runs = _reverse_runs(A, need, v.straight)
        s = v.out._slot
        self.seed_at = (int(GO[s]), int(GO[s]) + int(A.size[s])) if live[s] else None
        self.grads = []  # (slot or None, shape, lo, hi) per input of nums
        for i in nums:
            s = v.slots[i]
            if s is None or not live[s]:
                self.grads.append((None, v.shapes[i], 0, 0))
            else:
                self.grads.append((s, v.shapes[i], int(GO[s]), int(GO[s]) + int(A.size[s])))
        # inputs whose gradient the sweep writes straight into the array returned (the
        # output's own slot excepted: its seed is in the arena)
        self.large = list(dict.fromkeys(
            s for s, _, lo, hi in self.grads if s is not None and A.is_array[s]
            and hi - lo >= ZERO_COPY_SIZE and s != v.out._slot))


def _reverse_runs(A, need, seeded):
    """runs(lo, hi): the blocked runs of THREAD_SIZE or more elements that a reverse sweep of
    rows lo..hi-1 with `need` meets (`seeded`: a straight variant's whole call, whose forward
    swept the seeded runs' reverse), highest first, found once per range (``sweep_segments``
    and ``_threaded_sweep`` split them among threads)."""
    found = {}

    def runs(lo, hi):
        r = found.get((lo, hi))
        if r is None:
            buf = np.empty(((hi - lo) // 2 + 1, 2), np.int64)
            count = jit.reverse_run_pass(A.R, A.S, A.IA, need, lo, hi, int(seeded), THREAD_SIZE,
                                         buf)
            r = found[lo, hi] = [(int(r0), int(r1)) for r0, r1 in buf[:count]]
        return r

    return runs


def _hand_out(p, direct=None):
    """The gradients of plan p's inputs after its sweep, the arena clean for the next call:
    copies of their adjoints (the arena is reused), or the arrays a redirected adjoint went
    to (`direct`: slot -> (array, arena offset)); the other adjoints' blocks zeroed."""
    G, out, handed = p.G, [], set()
    direct = direct or {}
    for slot, shape, lo, hi in p.grads:
        if slot is None:  # not an input slot, or not on a path to the output
            out.append(np.zeros(shape))
        elif slot in direct:
            g = direct[slot][0].reshape(shape)
            out.append(g.copy() if slot in handed else g)  # (an argnum given twice)
            handed.add(slot)
        elif shape:  # one copy: the arena is reused by the next call
            out.append(G[lo:hi].reshape(shape).copy())
        else:
            out.append(np.float64(G[lo]))
    for slot, lo, hi in p.rest:
        if slot not in direct:  # (a redirected adjoint left its arena block untouched)
            G[lo:hi] = 0.0
    p.dirty = False
    return out


class _Variant:
    """One recording of f: its tape as arrays, input slots, guards, and the reverse plan."""

    deferred = False  # loaded but not replayed yet (see CompiledTape._variant)
    hooks = None  # _replay_hooks.ReplayHooks: the hooks a replay runs, if f registered any
    hooked_slots = 0  # how many slots of the tape had hooks when f was recorded
    _lent = ()  # (slot, own value address, array) of inputs read in place (see load)

    @functools.cached_property  # (fixed once recorded; W1 asks it on every call)
    def straight(self):
        """Nothing to check or run in Python during or after the forward sweep (no guards, no
        ``cuts``): forward and reverse can be one jitted call."""
        return self.t is not None and not self.cuts and not self.guards and self.hooks is None

    @property
    def cuts(self):
        """Rows where the forward sweep stops for Python: escape rows and Function hubs. (Every
        elementwise row is swept: eager computes it with the same loop, ``jit.elementwise``.)"""
        cuts = self.__dict__.get("_cuts")
        if cuts is None:
            t = self.t
            cuts = [] if t is None else sorted(set(self.escapes).union(t.functions or ()))
            self._cuts = cuts
        return cuts

    def __init__(self, f, args, nums, const_sites=None):
        self.shapes = [np.shape(_raw(a)) if _is_input(a) else None for a in args]
        self.statics = [None if _is_input(a) else (np.array(a) if isinstance(a, np.ndarray)
                                                   else a) for a in args]
        _argnums(nums, len(args))  # (a clear error for argnums beyond the arguments)
        for i in nums:
            if self.shapes[i] is None:
                a = args[i]
                what = (f"an array of dtype {a.dtype}" if isinstance(a, np.ndarray)
                        else f"a {type(a).__name__}")
                raise TypeError(f"tape.compile: argument {i} (argnums) is {what}, not a float "
                                "array or a float")
        self.leaves = [Tensor(np.array(_raw(a), dtype=np.float64), requires_grad=True)
                       if _is_input(a) else a for a in args]
        self.args = tuple(np.array(_raw(a), dtype=np.float64) if _is_input(a) else a
                          for a in args)  # as recorded (to pickle)
        log = _guards.GuardLog()
        log.const_sites = const_sites
        prev = thread_state.guards, thread_state.saved_hooks
        thread_state.guards, thread_state.saved_hooks = log, None
        try:
            with _FreshTape():
                out = f(*self.leaves)
        finally:
            thread_state.guards, thread_state.saved_hooks = prev
        if out is None or isinstance(out, (tuple, list, dict)):
            what = "None" if out is None else f"a {type(out).__name__}"
            raise TypeError(f"tape.compile: f returned {what}; a compiled f returns one array "
                            "or float (a tensor), the value it replays")
        if type(out) is not Tensor:
            out = Tensor(out)
        self.out = out
        t = out._tape
        if t is not None and t.links:
            raise RuntimeError("tape.compile: the recording spans several tapes: f uses "
                               "tensors recorded outside it (pass every input as an "
                               "argument), or calls a transform such as tape.grad inside")
        if t is not None and t.functions:
            for node in t.functions.values():
                if node.replay_args is None:
                    raise RuntimeError(
                        f"tape.compile: {node.cls.__name__} (a tape.Function) returns an output "
                        "that is not a differentiable float array (an index, a value marked "
                        "non-differentiable): a replay could not update what f computes from "
                        "it. Return only differentiable outputs from Functions in a compiled f.")
        self.t = t
        self.hooks = _replay_hooks.plan(t, self.leaves, nums, log) if t is not None else None
        if t is None and _replay_hooks.found(None, self.leaves, log):
            _replay_hooks.refuse(_replay_hooks.found(None, self.leaves, log), "tape.compile",
                                 "f records no operation for a replay to run it in; use "
                                 "tape.value_and_grad (eager)")
        self.guards = log.bind(t) if t is not None else []
        if t is None:
            return
        self.A = t.build()
        self.hooked_slots = len(t.hooks or ())  # (one more later: ``_replay_hooks.raise_late``)
        slot_of = {id(leaf): s for s, (leaf, _) in t.leaves.items()}
        self.slots = [slot_of.get(id(x)) if type(x) is Tensor else None for x in self.leaves]
        self.escapes = sorted(t.escapes)
        self._plans = {}

    def clone(self):
        """A copy with its own value buffers (the row arrays are shared, read-only), for
        replaying in another thread."""
        from ..core.arrays import value_addresses
        from ..core.tape import Tape

        c = _Variant.__new__(_Variant)
        c.__dict__.update(self.__dict__)
        c._plans, c._lean_calls = {}, {}  # (their buffers are this variant's)
        if self.t is None:
            return c
        t, A = self.t, self.A
        n = Tape()
        n.sealed = True
        n.av = [None if v is None else np.array(v) for v in t.av]
        n.side_of, n.escapes, n.links, n.hooks = t.side_of, t.escapes, {}, t.hooks
        n.rows = n.sv = n.side = n.ia = n.fa = None
        sv = A.sv.copy()
        VA = value_addresses(sv, {int(s): n.av[t.side_of[int(s)]]
                                  for s in np.flatnonzero(A.is_array)})
        n.built = type(A)(**{**A.__dict__, "sv": sv, "VA": VA})
        n.freed = np.zeros(len(sv), np.uint8)
        leaves = {}
        c.leaves = list(self.leaves)
        for j, (leaf, s) in enumerate(zip(self.leaves, self.slots)):
            if type(leaf) is Tensor:
                new = Tensor(np.array(leaf._v), requires_grad=True)
                if s is not None and A.is_array[s]:
                    new._v = n.av[t.side_of[s]]  # the row's own buffer, as in the original
                c.leaves[j] = new
                leaves[id(leaf)] = new
        n.leaves = {s: (leaves[id(lf)], 0) for s, (lf, _) in t.leaves.items()}
        c.t, c.A = n, n.built
        out = Tensor.__new__(Tensor)
        out._v, out._tape, out._slot, out._rg, out._meta = self.out._v, n, self.out._slot, \
            True, None
        c.out = out
        c.guards = [_guards.Guard(g.spec, tuple((k, leaves.get(id(x), x)) if k == "leaf"
                                                else (k, x) for k, x in g.operands),
                                  g.result, g.where) for g in self.guards]
        return c

    def accepts(self, args):
        if len(args) != len(self.shapes):
            return False
        for a, shape, static in zip(args, self.shapes, self.statics):
            if shape is None:
                if _is_input(a) or not _same_static(a, static):
                    return False
            elif type(a) is np.ndarray:  # the common case first: np.shape costs ~0.3 us
                if a.shape != shape or a.dtype.kind != "f":
                    return False
            elif not _is_input(a) or np.shape(_raw(a)) != shape:
                return False
        return True

    def load(self, args, borrow=False):
        """Write new input values into the input slots. `borrow` (a straight variant, swept
        before anything else runs): large C-contiguous float64 arrays are read in place by the
        sweep instead, until ``give_back``."""
        if self.t is None:
            return
        A = self.A
        lent = []
        for a, leaf, s in zip(args, self.leaves, self.slots):
            if s is None:
                if type(leaf) is Tensor:
                    np.copyto(leaf._v, _raw(a))
                continue
            v = _raw(a)
            if (borrow and type(v) is np.ndarray and v.size >= ZERO_COPY_SIZE
                    and v.dtype == np.float64 and v.flags.c_contiguous
                    and s != self.out._slot and A.is_array[s]):
                lent.append((s, int(A.VA[s]), v))  # v: alive until give_back (it may be
                A.VA[s] = v.__array_interface__["data"][0]  # converted from a list here)
                continue
            np.copyto(leaf._v, v)  # guards read inputs from here
            if not A.is_array[s]:
                A.sv[s] = float(np.reshape(v, -1)[0]) if np.ndim(v) else float(v)
        if lent:
            self._lent = lent

    def lean_value_and_grad(self, nums, one):
        """value_and_grad of this variant as a function of the call's arguments that does only
        what a call needs when nothing is to be lent, checked or split: compare the statics,
        copy the inputs in, one sweep, copy the gradient out (W1: ~5.5 us of Python a call,
        against ~10 through ``_variant``, ``load`` and ``gradient``). It returns None when the
        arguments need more (another shape or type, a list, a Tensor, another static), before
        any sweep: the caller then takes the general path, which loads every input again.
        None when the variant is not such a call. `one`: argnums is an int (the gradient
        alone, not a tuple). Built once per variant: the general path asks after every call."""
        calls = self.__dict__.setdefault("_lean_calls", {})
        if (nums, one) not in calls:
            calls[nums, one] = self._lean_call(nums, one)
        return calls[nums, one]

    def _lean_call(self, nums, one):
        if not self.straight or self.escapes or self.t.functions:
            return None
        p = self._plan(nums)
        if p.large or p.split or p.plain or p.reverse_runs(0, p.rows) or self.out.size != 1:
            return None
        spec = []
        for shape, leaf, slot, static in zip(self.shapes, self.leaves, self.slots, self.statics):
            if shape is None:  # a static argument: compared by value, as accepts does
                spec.append((None, static, -1))
                continue
            if math.prod(shape) >= ZERO_COPY_SIZE:
                return None  # an input the general path lends to the sweep
            spec.append((shape, leaf._v, -1 if slot is None or self.A.is_array[slot]
                         else int(slot)))
        n, sv, G, rows, args9 = len(spec), self.A.sv, p.G, p.rows, p.args
        seed, output, t, hooked = p.seed_at, self.output, self.t, self.hooked_slots

        def call(args):
            if len(args) != n or p.dirty or (t.hooks is not None and len(t.hooks) != hooked):
                return None  # (a hook registered since: the general path refuses it)
            for a, (shape, buf, s) in zip(args, spec):
                if shape is None:
                    if _is_input(a) or not _same_static(a, buf):
                        return None
                    continue
                if type(a) is np.ndarray:
                    if a.shape != shape or a.dtype.kind != "f":
                        return None
                elif type(a) is not float or shape:
                    return None
                buf[...] = a  # (the sweep reads array inputs from the leaves' buffers)
                if s >= 0:  # a 0-d input: its slot of sv
                    sv[s] = buf.item()
            p.dirty = True
            if seed is not None:
                G[seed[0]:seed[1]] = 1.0
            _sweep()(*args9, 0, rows, 0, rows, _WHOLE)
            out = _hand_out(p)
            return output(), (out[0] if one else tuple(out))

        return call

    def give_back(self):
        """Point the slots that ``load`` lent to the caller's arrays at their own buffers again
        (which then hold an older input: the next call loads again)."""
        if self._lent:
            VA = self.A.VA
            for s, own, _ in self._lent:
                VA[s] = own
            self._lent = ()

    def replay(self, threads=1):
        """Forward sweep with the loaded inputs; returns the first guard that fails, or None.
        Blocked runs of THREAD_SIZE or more elements are split among `threads` threads (None:
        see ``compile``)."""
        if self.t is None:
            return None
        t, A = self.t, self.A
        T = thread_count(threads) if threads != 1 and self._runs else 1
        lo = 0
        for c in self.cuts:
            self._forward(lo, c, T)
            if c in t.escapes:
                self._escape_value(c, threads)
            else:  # a custom Function's hub: its forward runs in Python, outputs follow it
                t.functions[c].replay(t)
            lo = c + 1
        self._forward(lo, len(A.sv), T)
        if self.guards:
            for g in self.guards:
                if not g.holds(t.value):
                    return g
        return None

    def values(self, nums, threads=1):
        """The forward sweep of a straight variant's loaded inputs for a value-only call. A run
        closed by a sum that the gradient of `nums` would seed (``seed_pass``) keeps its values
        in scratch and sums block by block, as ``gradient``'s forward does, with no reverse;
        its large ones, or else the large plain runs, split among `threads` as in ``replay``.
        (Its plan has no adjoint arena: a caller who only asks for values never allocates one.)"""
        if self.t is None:
            return
        p = self._plans.get(("values", nums))
        if p is None:
            p = self._plans[("values", nums)] = _ValuePlan(self, nums)
        T = thread_count(threads)
        if T > 1 and p.split:
            self._threaded_sweep(p, T, values=True)
        elif T > 1 and self._runs:
            self._forward(0, p.rows, T)
        else:
            _sweep()(*p.value_args, 0, p.rows, 0, 0, _STEP)

    @functools.cached_property
    def _runs(self):
        """(first row, end row) of the blocked runs of THREAD_SIZE or more elements that the
        forward sweeps of ``replay`` meet, between the cuts."""
        A, runs = self.A, []
        found = np.empty((len(A.sv) // 2 + 1, 2), np.int64)
        for lo, hi in zip([0] + [c + 1 for c in self.cuts], self.cuts + [len(A.sv)]):
            count = jit.run_pass(A.R, A.S, A.IA, lo, hi, THREAD_SIZE, found)
            runs += [(int(r0), int(e)) for r0, e in found[:count]]
        return runs

    def _forward(self, lo, hi, T):
        """The values of rows lo..hi-1, each large run among them swept by T workers at once
        (T > 1), each on its share of the run's blocks (elementwise rows: the same bits)."""
        A = self.A
        for r0, e in self._runs if T > 1 else ():
            if r0 < lo or e > hi:
                continue
            jit.forward_sweep(A.R, A.S, A.VA, A.sv, A.IA, A.FA, lo, r0)
            run_shares(lambda part: jit.forward_sweep(A.R, A.S, A.VA, A.sv, A.IA, A.FA, r0, e,
                                                      part), T)  # noqa: B023 (called at once)
            lo = e
        jit.forward_sweep(A.R, A.S, A.VA, A.sv, A.IA, A.FA, lo, hi)

    def _escape_value(self, c, threads=1):
        t, A = self.t, self.A
        sa, sb = int(A.R[c, 1]), int(A.R[c, 2])
        sha, shb, shy, params = t.escapes[c]
        a = np.reshape(t.value(sa), sha)
        p = TABLE[A.code[c]]
        if p.name == "matmul_blas" and A.is_array[c]:  # into the row's buffer: no temporary
            vb, vy = t.value(sb), t.av[t.side_of[c]]
            b, y = np.reshape(vb, shb), np.reshape(vy, shy)
            pieces = batch_pieces(p, sha, shb, shy, threads)
            if pieces:  # (each batch element one BLAS call, in whichever piece: the same bits)
                native = cached_native_pieces(t.native, (c, "forward"),
                                              (t.value(sa), vb, vy, tuple(pieces)),
                                              lambda: native_pieces(a, b, y, pieces))
                run_pieces(lambda lo, hi: np.matmul(a[lo:hi], b[lo:hi], out=y[lo:hi]), pieces,
                           native)
            else:
                np.matmul(a, b, out=y)
            return
        esc = ESCAPES[p.name]
        y = esc.value(a, np.reshape(t.value(sb), shb) if sb >= 0 else None, **params)
        t.store(c, pack(np, y, esc.outputs(sha, shb, **params)))

    def output(self):
        o = self.out
        if o._tape is None:
            v = o._v
        else:
            v = self.t.value(o._slot)
        if type(v) is float:  # a 0-d row's value (the common scalar loss)
            return v
        return float(v) if np.ndim(v) == 0 else np.array(v).reshape(o.shape)

    def _plan(self, nums):
        p = self._plans.get(nums)
        if p is None:
            p = self._plans[nums] = _Plan(self, nums)
        return p

    def gradient(self, nums, seed=None, forward=False, threads=1, state=None):
        """The gradients of the output (or its vjp with `seed`) with respect to the inputs
        `nums`. `forward`: the loaded inputs have not been replayed yet; the forward sweep runs
        first, in the same jitted call (a ``straight`` variant only), with its large seeded runs
        split among `threads` threads (None: see ``compile``). `state`: a BackwardState the
        recording's ``state.hook`` points look their members up in (None: their own)."""
        o = self.out
        if seed is None:
            if o.size != 1:
                raise TypeError(f"grad needs a scalar output; f returned shape {o.shape}")
            seed = 1.0
        elif np.shape(seed) != o.shape:
            raise ValueError(f"cotangent of shape {np.shape(seed)} for an output of shape "
                             f"{o.shape}")
        else:
            seed = np.reshape(seed, -1)
        if self.t is None or o._tape is None:  # f recorded nothing: it returned an input or a
            # constant, so the gradient is the seed for that input and zero for the others
            flat = np.broadcast_to(np.asarray(seed, dtype=np.float64).reshape(-1), o.size)
            return [(np.float64(flat[0]) if not self.shapes[i] else
                     flat.reshape(self.shapes[i]).copy()) if self.leaves[i] is o
                    else np.zeros(self.shapes[i]) for i in nums]
        if len(self.t.hooks or ()) != self.hooked_slots:
            _replay_hooks.raise_late()
        p = self._plan(nums)
        G, GO = p.G, p.GO
        if p.dirty:  # first call, or an earlier one stopped half way
            G.fill(0.0)
        p.dirty = True
        if p.seed_at is not None:
            G[p.seed_at[0]:p.seed_at[1]] = seed
        direct = {}
        if self.hooks is not None:  # Python between segments, and after the sweep
            with multi_hook_scope():
                hubs = [h for h in self.t.functions if p.live[h]] if self.t.functions else ()
                sweep_segments(self.t, self.A, G, GO, p.need, p.live, p.hooked, hubs,
                               retain_hooked=False, fresh=p.fresh, summed=p.summed,
                               threads=threads, runs=p.reverse_runs, backward_state=state)
                out = _hand_out(p)
                self.hooks.run_on_inputs(self.leaves, nums, out, [g[0] for g in p.grads], state)
            return out
        if self.escapes or self.t.functions:  # their backward rules run in Python
            hubs = [h for h in self.t.functions if p.live[h]] if self.t.functions else ()
            sweep_segments(self.t, self.A, G, GO, p.need, p.live, (), hubs, retain_hooked=False,
                           fresh=p.fresh, summed=p.summed, threads=threads,
                           runs=p.reverse_runs)
        else:  # one jitted call: nothing to run in Python between segments
            direct = self._direct_gradients(p) if p.large else direct
            threads = thread_count(threads) if forward and (
                p.split or p.plain or p.reverse_runs(0, p.rows)) else 1
            try:
                if threads > 1:
                    self._threaded_sweep(p, threads)
                else:
                    _sweep()(*p.args, 0, p.rows if forward else 0, 0, p.rows, _WHOLE)
            finally:
                for slot, g in direct.items():
                    GO[slot] = g[1]
        return _hand_out(p, direct)

    def _threaded_sweep(self, p, threads, values=False):
        """Both sweeps of a straight variant as one jitted call would do them, but with each
        seeded run in `p.split` swept by `threads` workers at once (the sweeps release the
        GIL), each on its piece of the run's elements, the pieces' sums then added in NumPy's
        pairwise order; and each other large run, forward (`p.plain`) and reverse
        (`p.reverse_runs`), by the workers each on its share of the blocks. The rows between
        the runs run in this thread. `values`: the forward sweep of a value-only call
        (``values``)."""
        A, G, GO = self.A, p.G, p.GO
        sweep = _sweep()
        args = p.value_args if values else p.args
        runs = sorted([(r0, e, True) for r0, e in p.split]
                      + [(r0, e, False) for r0, e in p.plain])
        lo = 0
        for r0, e, seeded in runs:
            sweep(*args, lo, r0, 0, 0, _STEP)
            if not seeded:
                run_shares(lambda part: sweep(*args, r0, e, 0, 0, part), threads)  # noqa: B023
                lo = e
                continue
            T = threads
            while A.size[r0] < 256 * T:  # every piece's parents longer than a pairwise leaf
                T //= 2
            # (k, T, the piece's sum, then a count and (slot, total) pairs: the pieces' terms
            # of one-element operands' adjoints, at most one per row)
            parts = [np.zeros(4 + 2 * (e - r0)) for _ in range(T)]
            for k, part in enumerate(parts):
                part[:2] = k, T
            run_pieces(lambda part: sweep(*args, r0, e + 1, 0, 0, part),  # noqa: B023
                       [(part,) for part in parts])
            total = _pairwise_top([part[2] for part in parts])
            self.t.store(e, 0.0 + total)  # (as the sum kernel: 0.0 + its pairwise sum)
            for j in range(int(parts[0][3])):  # last row first, as the sweep adds them
                s = int(parts[0][4 + 2 * j])
                G[GO[s]] += _pairwise_top([part[5 + 2 * j] for part in parts])
            lo = e + 1
        n = len(A.sv)
        sweep(*args, lo, n, 0, 0, _STEP)
        if values:
            return
        reverse_in_shares(lambda lo, hi, part=_STEP: sweep(*args, 0, 0, lo, hi, part),
                          p.reverse_runs(0, n), threads, 0, n)

    def _direct_gradients(self, p):
        """{slot: (array, arena offset)} for the large array inputs of plan p: their adjoint
        offsets now point at fresh zeroed arrays, which the sweep accumulates into and the call
        returns, sparing a copy out of the arena and its clear (the kernels address the arena
        by raw offsets from its start, so any 8-byte aligned array can stand in)."""
        direct = {}
        base = p.G.__array_interface__["data"][0]
        for s in p.large:
            g = np.zeros(int(self.A.size[s]))
            direct[s] = (g, int(p.GO[s]))
            p.GO[s] = (g.__array_interface__["data"][0] - base) // 8  # (16-byte aligned)
        return direct

    def tangent(self, nums, tangents):
        from ..forward.tangent_program import TangentProgram

        tangents = tangents if isinstance(tangents, (tuple, list)) else (tangents,)
        if len(tangents) != len(nums):
            raise ValueError(f"jvp: {len(nums)} tangents expected (one per argnum)")
        if self.t is None or self.out._tape is None:
            return np.zeros(self.out.shape)
        if self.t.functions:
            raise NotImplementedError(
                "cf.jvp of a recording with custom Functions (tape.Function): the jitted tangent "
                "sweep cannot call their jvp; use tape.jvp(f, ...) or cf.hvp")
        key = ("tangent", tuple(nums))
        prog = self._plans.get(key)
        if prog is None:
            prog = self._plans[key] = TangentProgram([self.leaves[i] for i in nums],
                                                      [self.out], [self.t])
        _check_shapes("jvp", "tangents", tangents, [self.shapes[i] for i in nums], nums)
        ts = [np.asarray(u, dtype=np.float64).reshape((1,) + self.shapes[i])
              for u, i in zip(tangents, nums)]
        (g,) = prog.run(ts, 1)
        g = g[0]
        return float(g) if g.ndim == 0 else g


def _check_shapes(what, name, vectors, shapes, nums):
    """A clear error for a tangent or vector whose shape is not its argument's (as eager
    ``tape.jvp`` checks), before anything reshapes it."""
    for k, (u, shape, i) in enumerate(zip(vectors, shapes, nums)):
        if np.shape(u) != shape:
            raise ValueError(f"{what}: {name}[{k}] has shape {np.shape(u)}, argument {i} has "
                             f"shape {shape}")


def _pairwise_top(sums):
    """The sum of the pieces' sums at the top of NumPy's pairwise recursion, bottom up."""
    while len(sums) > 1:
        sums = [sums[i] + sums[i + 1] for i in range(0, len(sums), 2)]
    return sums[0]


_SWEEP = []


def _sweep():
    """``jit.sweep``, imported on first use (``import tape`` stays free of Numba) and then bound
    once: a module lookup per call costs microseconds on W1's 0.1 ms."""
    if not _SWEEP:
        _SWEEP.append(jit.sweep)
    return _SWEEP[0]


def _raw(a):
    return a._v if type(a) is Tensor else a


def _rebuild(f, args, argnums, max_variants, threads=None):
    return CompiledTape(f, args, argnums, max_variants, threads)


def _load_bytes(data):
    import io

    return _persist.load(io.BytesIO(data))


def load(path, f=None, state=None):
    """A CompiledTape saved by ``cf.save(path)``. The file is validated before any kernel runs
    (a corrupt or hostile file raises ValueError). With `f`, arguments the recording does not
    fit record f again; without it they are an error. The recording's ``state.hook(x, name)``
    points call the members of `state` (a ``tape.BackwardState``, ``cf.state``; a new one
    when None): bind them after loading, ``cf.state.name = fn``."""
    return _persist.load(path, f, state)
