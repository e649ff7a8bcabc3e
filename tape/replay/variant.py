"""One recording of a compiled function (a *variant*) and its execution: recording f, loading a
call's arguments into the recording's buffers, the forward and reverse sweeps by the plans of
tape/replay/plan.py, threads, escapes and Function hubs between jitted segments, and tangents."""
from __future__ import annotations

import functools
import math

import numpy as np

import jit
from jit.table import OPCODE, TABLE

from ..core import guards as _guards
from ..core.hooks import multi_hook_scope
from ..core.state import state as thread_state
from ..core.arrays import value_addresses
from ..core.tape import Tape
from ..core.tensor import Tensor, leaf_sharing, result
from ..escapes import ESCAPES, pack
from ..forward.tangent_program import TangentProgram
from ..parallel.gemm import cached_native_pieces, native_pieces
from ..parallel.threads import run_pieces, run_shares, thread_count
from ..reverse.backward import batch_pieces, reverse_in_shares, sweep_segments
from ..transforms.functional import _argnums, _FreshTape
from . import replay_hooks as _replay_hooks
from . import plan as plans
from .plan import STEP, WHOLE, Plan, ValuePlan, hand_out

LEAF = OPCODE["leaf"]


def is_input(a):
    """Float arrays and floats are inputs (slots); anything else (ints, integer or boolean
    arrays used as indices or masks, strings, None) is static: compared by value per call."""
    if type(a) is Tensor:
        return True
    if isinstance(a, (float, np.floating)):
        return True
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def as_input(a):
    """A list of numbers is an array input, as eager transforms take it."""
    if isinstance(a, list):
        arr = np.asarray(a)
        if arr.dtype.kind == "f":
            return arr
    return a


def same_static(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and \
            a.dtype == b.dtype and np.array_equal(a, b)
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable: not the same
        return False


class Variant:
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
        self.shapes = [np.shape(raw_value(a)) if is_input(a) else None for a in args]
        self.statics = [None if is_input(a) else (np.array(a) if isinstance(a, np.ndarray)
                                                   else a) for a in args]
        _argnums(nums, len(args))  # (a clear error for argnums beyond the arguments)
        for i in nums:
            if self.shapes[i] is None:
                a = args[i]
                what = (f"an array of dtype {a.dtype}" if isinstance(a, np.ndarray)
                        else f"a {type(a).__name__}")
                raise TypeError(f"tape.compile: argument {i} (argnums) is {what}, not a float "
                                "array or a float")
        self.leaves = [Tensor(np.array(raw_value(a), dtype=np.float64), requires_grad=True)
                       if is_input(a) else a for a in args]
        self.args = tuple(np.array(raw_value(a), dtype=np.float64) if is_input(a) else a
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
        self.hooked_slots = len(t.hooks or ())  # (one more later: ``replay_hooks.raise_late``)
        slot_of = {id(leaf): s for s, (leaf, _) in t.leaves.items()}
        self.slots = [slot_of.get(id(x)) if type(x) is Tensor else None for x in self.leaves]
        self.escapes = sorted(t.escapes)
        self._plans = {}

    @classmethod
    def loaded(cls, t, shapes, statics, leaves, slots, args, out, guards, hooks):
        """A variant read from a file (tape/replay/persist.py): its sealed tape `t`, per argument
        its shape (None: static), static value, leaf tensor, slot, and value as recorded; the
        output tensor, the guards and the replay hooks."""
        v = cls.__new__(cls)
        v.t, v.A = t, t.built
        v.escapes = sorted(t.escapes)
        v._plans = {}
        v.shapes, v.statics, v.leaves, v.slots, v.args = shapes, statics, leaves, slots, args
        v.out, v.guards, v.hooks = out, guards, hooks
        v.hooked_slots = len(t.hooks or ())
        return v

    def clone(self):
        """A copy with its own value buffers (the row arrays are shared, read-only), for
        replaying in another thread."""
        c = Variant.__new__(Variant)
        c.__dict__.update(self.__dict__)
        c._plans, c._lean_calls = {}, {}  # (their buffers are this variant's)
        if self.t is None:
            return c
        t, A = self.t, self.A
        av = [None if v is None else np.array(v) for v in t.av]
        sv = A.sv.copy()
        VA = value_addresses(sv, {int(s): av[t.side_of[int(s)]]
                                  for s in np.flatnonzero(A.is_array)})
        n = Tape.from_arrays(av, t.side_of, t.escapes, type(A)(**{**A.__dict__, "sv": sv, "VA": VA}),
                             t.hooks, t.stopped)
        leaves = {}
        c.leaves = list(self.leaves)
        for j, (leaf, s) in enumerate(zip(self.leaves, self.slots)):
            if type(leaf) is Tensor:
                if s is not None and A.is_array[s]:  # the row's own buffer, as in the original
                    new = leaf_sharing(n.av[t.side_of[s]])
                else:
                    new = Tensor(np.array(leaf._v), requires_grad=True)
                c.leaves[j] = new
                leaves[id(leaf)] = new
        n.leaves = {s: (leaves[id(lf)], 0) for s, (lf, _) in t.leaves.items()}
        c.t, c.A = n, n.built
        c.out = result(self.out._v, n, self.out._slot)
        c.guards = [_guards.Guard(g.spec, tuple((k, leaves.get(id(x), x)) if k == "leaf"
                                                else (k, x) for k, x in g.operands),
                                  g.result, g.where) for g in self.guards]
        return c

    def accepts(self, args):
        if len(args) != len(self.shapes):
            return False
        for a, shape, static in zip(args, self.shapes, self.statics):
            if shape is None:
                if is_input(a) or not same_static(a, static):
                    return False
            elif type(a) is np.ndarray:  # the common case first: np.shape costs ~0.3 us
                if a.shape != shape or a.dtype.kind != "f":
                    return False
            elif not is_input(a) or np.shape(raw_value(a)) != shape:
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
                    np.copyto(leaf._v, raw_value(a))
                continue
            v = raw_value(a)
            if (borrow and type(v) is np.ndarray and v.size >= plans.ZERO_COPY_SIZE
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
            if math.prod(shape) >= plans.ZERO_COPY_SIZE:
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
                    if is_input(a) or not same_static(a, buf):
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
            _sweep()(*args9, 0, rows, 0, rows, WHOLE)
            out = hand_out(p)
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
        Blocked runs of plans.THREAD_SIZE or more elements are split among `threads` threads (None:
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
            p = self._plans[("values", nums)] = ValuePlan(self, nums)
        T = thread_count(threads)
        if T > 1 and p.split:
            self._threaded_sweep(p, T, values=True)
        elif T > 1 and self._runs:
            self._forward(0, p.rows, T)
        else:
            _sweep()(*p.value_args, 0, p.rows, 0, 0, STEP)

    @functools.cached_property
    def _runs(self):
        """(first row, end row) of the blocked runs of plans.THREAD_SIZE or more elements that the
        forward sweeps of ``replay`` meet, between the cuts."""
        A, runs = self.A, []
        found = np.empty((len(A.sv) // 2 + 1, 2), np.int64)
        for lo, hi in zip([0] + [c + 1 for c in self.cuts], self.cuts + [len(A.sv)]):
            count = jit.run_pass(A.R, A.S, A.IA, lo, hi, plans.THREAD_SIZE, found)
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
            p = self._plans[nums] = Plan(self, nums)
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
                out = hand_out(p)
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
                    _sweep()(*p.args, 0, p.rows if forward else 0, 0, p.rows, WHOLE)
            finally:
                for slot, g in direct.items():
                    GO[slot] = g[1]
        return hand_out(p, direct)

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
            sweep(*args, lo, r0, 0, 0, STEP)
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
        sweep(*args, lo, n, 0, 0, STEP)
        if values:
            return
        reverse_in_shares(lambda lo, hi, part=STEP: sweep(*args, 0, 0, lo, hi, part),
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
        check_shapes("jvp", "tangents", tangents, [self.shapes[i] for i in nums], nums)
        ts = [np.asarray(u, dtype=np.float64).reshape((1,) + self.shapes[i])
              for u, i in zip(tangents, nums)]
        (g,) = prog.run(ts, 1)
        g = g[0]
        return float(g) if g.ndim == 0 else g


def check_shapes(what, name, vectors, shapes, nums):
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


def raw_value(a):
    return a._v if type(a) is Tensor else a
