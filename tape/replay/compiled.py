"""Compiled replay: record a function once, then evaluate its value and gradient many times with
the jitted interpreters and no Python per op.

    cf = tape.compile(loss, w0, data)          # records loss(w0, data) once
    value, g = cf.value_and_grad(w1, data)     # forward sweep + reverse sweep, in Numba

Every positional array (or float) argument is an input slot of the recording, so nothing that
should be an input is frozen; other arguments (ints, strings, None, tuples of them) are static
and part of the recording's identity. Where the function read a recorded value in Python while
recording (``if x > 0``, ``t.item()``, an ``argmax`` used as an index, a boolean mask), a guard
was noted (``guards``); a replay checks every guard against the replayed values and, when one
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
import threading
import warnings

import numpy as np

from ..core.state import state as thread_state
from ..core.tensor import Tensor
from ..numpy_ops._impl import concatenate, reshape
from ..core.state import enable_grad
from ..forward import forward_ad
from ..reverse import autograd
from ..transforms.functional import _argnums, grad
from . import frozen as _frozen
from . import persist as _persist, replay_hooks as _replay_hooks
from .backward_state import BackwardState
from .plan import need_masks
from .variant import Variant, as_input, check_shapes, raw_value


def compile(f, *example_args, argnums=0, max_variants=8, threads=None,  # noqa: A001
            check_constants=False):
    """Record ``f(*example_args)`` once and return a CompiledTape that replays it.

    `argnums` (int or tuple) are the arguments gradients are taken with respect to.
    `threads`: how many threads a call may split a large blocked run among (at least
    THREAD_SIZE elements: a run closed by a sum, as a loss over a large array, in pieces of its
    pairwise sum; any other, forward and reverse, in shares of its blocks), and a large batched
    matmul (its batch elements, forward and reverse: ``backward.batch_pieces``); None:
    NUMBA_NUM_THREADS if set, else the cores this process may run on, rounded down to a power
    of two, at most 8; 1: none (say so in process pools that already use every core). Results
    are the same bits whatever the count. The threads wait for work awake for 2 ms after each
    piece (``threads.SPIN_SECONDS``), so a loop of calls does not pay for waking them.
    `check_constants`: record f twice at each new recording and raise, naming the lines, when
    constants differ between the two (a random draw or a global that changed inside f, which
    a replay would freeze: ``frozen``); a debugging aid, it doubles the cost of recording.
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
    _lean = None  # the last value_and_grad's variant, as a lean call (Variant.lean_value_and_grad)

    def __init__(self, f, example_args, argnums=0, max_variants=8, threads=None,
                 check_constants=False):
        self.f = f
        self.threads = threads
        self.check_constants = check_constants
        self.argnums = argnums
        self.nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
        self.max_variants = max_variants
        self.variants = collections.OrderedDict()  # key -> Variant, most recently used last
        self.counters = collections.Counter()
        self.misses = collections.deque(maxlen=20)  # (guard line, reason) of re-recordings
        self._lock = threading.RLock()  # (re-entrant: hvp and batches call value_and_grad)
        self._record(tuple(as_input(a) for a in example_args))

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
        when the forward sweep needs no stop for Python: see ``Variant.straight``). `state`: a
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
        packed and unpacked as eager's backward does (``replay_hooks.pack_and_unpack``), then
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
                kept = _replay_hooks.pack_and_unpack(v.t, v.A, need_masks(v, self.nums)[2])
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
        check_shapes("hvp", "v", vs, [np.shape(raw_value(as_input(args[i]))) for i in self.nums],
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
            f, argnums = self.f, self.argnums

            def gradient(*a):  # one output: several argnums' gradients flattened, end to end
                g = grad(f, argnums=argnums)(*a)
                if isinstance(argnums, int):
                    return g
                return concatenate([reshape(g_i, (-1,)) for g_i in g])

            gt = self._grad_tape = CompiledTape(gradient, args, argnums, self.max_variants)
        _, hv = gt.jvp(args, vs)
        if isinstance(self.argnums, int):
            return hv
        shapes = [np.shape(raw_value(as_input(args[i]))) for i in self.nums]
        sizes = [int(np.prod(sh)) for sh in shapes]
        parts = np.split(np.reshape(hv, -1), np.cumsum(sizes)[:-1])
        return tuple(np.reshape(p, sh) if sh else float(p[0]) for p, sh in zip(parts, shapes))

    def _hvp_recorded(self, args, vs):
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
            return tuple(as_input(x) for x in a)

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
    def from_variant(cls, variant, f, argnums, max_variants=8):
        """A CompiledTape whose first variant is `variant` (one read from a file: ``load``),
        without recording f."""
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
        args = tuple(map(as_input, args))
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
        v = Variant(self.f, args, self.nums)
        if self.check_constants:
            sites = {}
            w = Variant(self.f, args, self.nums, const_sites=sites)
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


def _rebuild(f, args, argnums, max_variants, threads=None):
    return CompiledTape(f, args, argnums, max_variants, threads)


def _load_bytes(data):
    import io

    return load(io.BytesIO(data))


def load(path, f=None, state=None):
    """A CompiledTape saved by ``cf.save(path)``. The file is validated before any kernel runs
    (a corrupt or hostile file raises ValueError). With `f`, arguments the recording does not
    fit record f again; without it they are an error. The recording's ``state.hook(x, name)``
    points call the members of `state` (a ``tape.BackwardState``, ``cf.state``; a new one
    when None): bind them after loading, ``cf.state.name = fn``."""
    state = BackwardState() if state is None else state
    variant, argnums = _persist.read(path, state)
    cf = CompiledTape.from_variant(variant, f, argnums)
    cf.state = state
    return cf
