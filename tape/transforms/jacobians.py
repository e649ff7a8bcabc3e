"""Forward mode and second order, functional style: jvp, linearize, Jacobians, Hessians, HVPs.

NumPy arrays in, NumPy arrays out; when the primals or tangents are tensors with history (a
transform nested in ``tape.grad`` or in another ``jvp``), the results are tensors with history,
so transforms compose to any depth: ``tape.grad(lambda x: tape.jvp(f, (x,), (v,))[1])``.
"""
from __future__ import annotations

import functools

import numpy as np

from ..reverse import autograd
from ..forward import forward_ad
from ..core.state import state
from ..core.tensor import Tensor
from ..forward.tangent_program import TangentProgram, closed_tapes
from ..core.tape import newest_tape_id
from .functional import _argnums, _as_leaf, _FreshTape, _fresh_input, _nested, grad

JACFWD_CHUNK = 32  # tangent directions per jitted sweep in jacfwd (bounds the tangent arena)
_NESTED = ("{what} inside another transform, of a function that uses tensors of the enclosing "
           "transform, is not supported (its result would lose their history): use tape.jvp "
           "there instead")


def _tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _val(x):
    return x._v if type(x) is Tensor else x


def _array_out(x, like_float):
    v = _val(x)
    if type(v) is float or np.ndim(v) == 0:
        return float(v) if like_float else np.float64(v)
    return np.array(v)


def _zeros(shape):
    return 0.0 if shape == () else np.zeros(shape)


def jvp(f, primals, tangents, has_aux=False):
    """``(f(*primals), J_f(primals) @ tangents)``: one forward-mode directional derivative.

    >>> tape.jvp(np.sin, (0.5,), (1.0,))          # (sin 0.5, cos 0.5)
    (0.479425538604203, 0.8775825618903728)

    ``primals`` and ``tangents`` are tuples (one entry per argument of f) of matching shapes.
    """
    primals, tangents = _tuple(primals), _tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    for i, (p, t) in enumerate(zip(primals, tangents)):
        if np.shape(_val(p)) != np.shape(_val(t)):
            raise ValueError(f"jvp: tangents[{i}] has shape {np.shape(_val(t))}, primals[{i}] "
                             f"has shape {np.shape(_val(p))}")
    if any(type(x) is Tensor and x._rg for x in primals + tangents):
        return _jvp_dual(f, primals, tangents, has_aux)  # nested: tensors with history
    rec = _Recorded(f, primals, "tape.jvp", has_aux)
    values = [_array_out(o, type(o._v) is float) for o in rec.outs]
    if rec.program is not None:
        tans = rec.jitted(tangents)
    elif state.transforms or state.levels:
        # f closed over tensors of an enclosing transform: keep the tangents' history
        values = rec.outs
        prev = state.grad
        state.grad = True
        try:
            tans = [_zeros(o.shape) if g is None else g
                    for g, o in zip(rec.tangents(tangents), rec.outs)]
        finally:
            state.grad = prev
    else:
        with _no_record():
            tans = [_zeros(o.shape) if g is None else _array_out(g, type(o._v) is float)
                    for g, o in zip(rec.tangents(tangents), rec.outs)]
    rp = values[0] if rec.single else tuple(values)
    rt = tans[0] if rec.single else tuple(tans)
    return (rp, rt, rec.aux) if has_aux else (rp, rt)


def _jvp_dual(f, primals, tangents, has_aux):
    """jvp of tensors with history (inside another transform): dual numbers at a new level,
    results as tensors that keep their history."""
    with forward_ad.dual_level():
        prev = state.grad
        state.grad = True  # forward mode rides on the recording
        state.transforms += 1
        try:
            xs = [forward_ad.make_dual(p, t) for p, t in zip(primals, tangents)]
            out = f(*xs)
            aux = None
            if has_aux:
                out, aux = out
            outs = _tuple(out)
            tans = [forward_ad.unpack_dual(o).tangent if type(o) is Tensor else None
                    for o in outs]
        finally:
            state.transforms -= 1
            state.grad = prev
    tans = [_zeros(np.shape(_val(o))) if g is None else g for o, g in zip(outs, tans)]
    single = not isinstance(out, (tuple, list))
    rp = outs[0] if single else tuple(outs)
    rt = tans[0] if single else tuple(tans)
    return (rp, rt, aux) if has_aux else (rp, rt)


class _Recorded:
    """f recorded once at `primals` (leaves), for tangents pushed through it many times."""

    def __init__(self, f, primals, what="tape.linearize", has_aux=False):
        self.xs = [_as_leaf(p, i, what) for i, p in enumerate(primals)]
        self.what = what
        first = newest_tape_id() + 1
        with _FreshTape():
            out = f(*self.xs)
        self.aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError("has_aux=True requires f to return a pair (output, aux)")
            out, self.aux = out
        self.single = not isinstance(out, (tuple, list))
        self.outs = [o if type(o) is Tensor else Tensor(o) for o in _tuple(out)]
        tapes = closed_tapes(self.outs, self.xs, first)
        # closed: the jitted tangent sweep (k directions at once, no Python per op); else the
        # tensor-level rules, whose results keep the history of what f closed over
        self.program = TangentProgram(self.xs, self.outs, tapes) if tapes is not None else None

    def check(self, tangents):
        if len(tangents) != len(self.xs):
            raise ValueError(f"{self.what}: {len(self.xs)} tangents expected, got "
                             f"{len(tangents)}")
        out = []
        for i, (x, t) in enumerate(zip(self.xs, tangents)):
            tv = np.asarray(_val(t), dtype=np.float64)
            if tv.shape != x.shape:
                raise ValueError(f"{self.what}: tangents[{i}] has shape {tv.shape}, the input "
                                 f"has shape {x.shape}")
            out.append(tv)
        return out

    def jitted(self, tangents):
        """Output tangents as arrays, by the jitted sweep (closed recordings)."""
        gs = self.program.run([t[None] for t in self.check(tangents)], 1)
        return [_array_out(g[0], type(o._v) is float) for g, o in zip(gs, self.outs)]

    def tangents(self, tangents):
        """Tangents of the outputs for input tangents (tensors with history when the rules
        are recorded, i.e. in grad mode)."""
        with forward_ad.dual_level() as lv_index:
            lv = state.levels[-1]
            for x, tv in zip(self.xs, self.check(tangents)):
                lv.leaf_sources[id(x)] = Tensor(tv)
            out = []
            for o in self.outs:
                g = forward_ad.unpack_dual(o, level=lv_index).tangent if o._rg else None
                out.append(g)
            return out


def linearize(f, *primals):
    """``(f(*primals), f_jvp)``: ``f_jvp(*tangents)`` pushes tangents through the recording of
    f made once here (no re-recording per call).

    >>> y, f_jvp = tape.linearize(np.sin, 0.5)
    >>> f_jvp(2.0)                                   # 2 cos(0.5)
    1.7551651237807455
    """
    rec = _Recorded(f, primals)
    values = [_array_out(o, type(o._v) is float) for o in rec.outs]

    if rec.program is None and (state.transforms or state.levels):
        raise NotImplementedError(_NESTED.format(what="tape.linearize"))

    def f_jvp(*tangents):
        if rec.program is not None:
            out = rec.jitted(tangents)
        else:
            with _no_record():
                gs = rec.tangents(tangents)
            out = [_zeros(o.shape) if g is None else _array_out(g, type(o._v) is float)
                   for g, o in zip(gs, rec.outs)]
        return out[0] if rec.single else tuple(out)

    return (values[0] if rec.single else tuple(values)), f_jvp


class _no_record:  # noqa: N801
    """Rules evaluated without recording: plain NumPy speed, results without history."""

    def __enter__(self):
        self.prev = state.grad
        state.grad = False

    def __exit__(self, *exc):
        state.grad = self.prev
        return False


def _check_single(outs, what):
    if len(outs) != 1:
        raise TypeError(f"{what}: f must return one array (got {len(outs)} outputs)")


def jacfwd(f, argnums=0):
    """``f`` -> a function returning the Jacobian of ``f`` by forward mode (one tangent per
    input element): shape ``out.shape + arg.shape`` (a tuple of them for a tuple of argnums)."""

    @functools.wraps(f)
    def wrapper(*args):
        nums = _argnums(argnums, len(args))
        if _nested(args[i] for i in nums):
            return _jacfwd_nested(f, args, nums, argnums)
        rec = _Recorded(lambda *xs: f(*_place(args, nums, xs)), [args[i] for i in nums],
                        "tape.jacfwd")
        _check_single(rec.outs, "jacfwd")
        (out,) = rec.outs
        if rec.program is None and (state.transforms or state.levels):
            raise NotImplementedError(_NESTED.format(what="tape.jacfwd"))
        sizes = [x.size for x in rec.xs]
        n = sum(sizes)
        J = np.zeros((n,) + out.shape)  # one row per input element: the tangent of out
        starts = np.cumsum([0] + sizes)
        chunk = JACFWD_CHUNK
        for lo in range(0, n, chunk):
            k = min(chunk, n - lo)
            tans = []
            for j, x in enumerate(rec.xs):  # one-hot directions lo..lo+k-1 over all inputs
                e = np.zeros((k, x.size))
                for d in range(k):
                    p = lo + d - starts[j]
                    if 0 <= p < x.size:
                        e[d, p] = 1.0
                tans.append(e.reshape((k,) + x.shape))
            if rec.program is not None:
                (g,) = rec.program.run(tans, k)
                J[lo:lo + k] = g
            else:
                for d in range(k):
                    with _no_record():
                        (g,) = rec.tangents([t[d] for t in tans])
                    if g is not None:
                        J[lo + d] = g._v
        J = np.moveaxis(J, 0, -1)  # out.shape + (n,)
        jacs = [J[..., starts[j]:starts[j + 1]].reshape(out.shape + x.shape)
                for j, x in enumerate(rec.xs)]
        return jacs[0] if isinstance(argnums, int) else tuple(jacs)

    return wrapper


def jacrev(f, argnums=0):
    """``f`` -> a function returning the Jacobian of ``f`` by reverse mode (one backward per
    output element over one recording): shape ``out.shape + arg.shape``."""

    @functools.wraps(f)
    def wrapper(*args):
        nums = _argnums(argnums, len(args))
        if _nested(args[i] for i in nums):
            return _jacrev_nested(f, args, nums, argnums)
        xs = [_as_leaf(args[i], i, "tape.jacrev") for i in nums]
        with _FreshTape():
            out = f(*_place(args, nums, xs))
        if not isinstance(out, Tensor):
            out = Tensor(out)
        m = out.size
        rows = [np.zeros((m,) + x.shape) for x in xs]
        if out.requires_grad:
            for i in range(m):
                seed = np.zeros(m)
                seed[i] = 1.0
                gs = autograd.grad([out], xs, grad_outputs=[seed.reshape(out.shape)],
                                   retain_graph=i < m - 1, allow_unused=True)
                for r, g in zip(rows, gs):
                    if g is not None:
                        r[i] = g
        jacs = [r.reshape(out.shape + x.shape) for r, x in zip(rows, xs)]
        return jacs[0] if isinstance(argnums, int) else tuple(jacs)

    return wrapper


def _jacfwd_nested(f, args, nums, argnums):
    """jacfwd inside another transform: one recorded jvp (dual numbers) per input element."""
    prim = [args[i] for i in nums]
    shapes = [np.shape(_val(p)) for p in prim]
    cols = [[] for _ in prim]
    out = None
    for k, sh in enumerate(shapes):
        for j in range(int(np.prod(sh))):
            tans = [np.zeros(s) for s in shapes]
            tans[k].reshape(-1)[j] = 1.0
            out, g = _jvp_dual(lambda *xs: f(*_place(args, nums, xs)), tuple(prim),
                               tuple(tans), False)
            cols[k].append(g)
    oshape = np.shape(_val(out)) if out is not None else ()
    jacs = [np.reshape(np.stack(c, axis=-1), oshape + sh) if c else
            Tensor(np.zeros(oshape + sh)) for c, sh in zip(cols, shapes)]
    return jacs[0] if isinstance(argnums, int) else tuple(jacs)


def _jacrev_nested(f, args, nums, argnums):
    """jacrev inside another transform: one recorded backward per output element."""
    xs = [_fresh_input(args[i], i) for i in nums]
    with _FreshTape():
        out = f(*_place(args, nums, xs))
        if type(out) is not Tensor:
            out = Tensor(out)
        m = out.size
        rows = [[] for _ in xs]
        for i in range(m):
            seed = np.zeros(m)
            seed[i] = 1.0
            gs = autograd.grad([out], xs, grad_outputs=[seed.reshape(out.shape)],
                               create_graph=True, allow_unused=True) if out.requires_grad \
                else [None] * len(xs)
            for r, g, x in zip(rows, gs, xs):
                r.append(Tensor(np.zeros(x.shape)) if g is None else g)
    jacs = [np.reshape(np.stack(r), out.shape + x.shape) if r else
            Tensor(np.zeros(out.shape + x.shape)) for r, x in zip(rows, xs)]
    return jacs[0] if isinstance(argnums, int) else tuple(jacs)


def jacobian(f, argnums=0):
    """The Jacobian by the cheaper mode: forward when there are fewer inputs than outputs
    (one sweep per input element), reverse otherwise (one per output element)."""
    fwd, rev = jacfwd(f, argnums), jacrev(f, argnums)

    @functools.wraps(f)
    def wrapper(*args):
        nums = _argnums(argnums, len(args))
        n_in = sum(np.size(_val(args[i])) for i in nums)
        with _no_record():
            n_out = np.size(_val(f(*args)))
        return fwd(*args) if n_in < n_out else rev(*args)

    return wrapper


def _place(args, nums, xs):
    args = list(args)
    for i, x in zip(nums, xs):
        args[i] = x
    return args


def hvp(f, primals, v):
    """Exact Hessian-vector product of scalar ``f`` at `primals` with `v` (tuples for several
    arguments): reverse over forward, ``grad_x <grad f(x), v>``, never finite differences.

    >>> tape.hvp(lambda x: (x ** 3).sum(), np.array([1.0, 2.0]), np.array([1.0, 0.0]))
    array([6., 0.])
    """
    single = not isinstance(primals, (tuple, list))
    primals, v = _tuple(primals), _tuple(v)
    if len(primals) != len(v):
        raise ValueError(f"hvp: {len(primals)} primals but {len(v)} vectors")
    if _nested(primals + v):  # forward over (recorded) reverse, keeping history
        nums = tuple(range(len(primals)))
        _, hv = _jvp_dual(lambda *xs: grad(f, argnums=nums)(*xs), primals, v, False)
        return hv[0] if single else tuple(hv)
    rec = _Recorded(f, primals, "tape.hvp")
    _check_single(rec.outs, "hvp")
    if rec.outs[0].size != 1:
        raise TypeError(f"hvp: f must return a scalar; it returned shape {rec.outs[0].shape}")
    hv = _hvps(rec, [list(v)])[0]
    return hv[0] if single else tuple(hv)


def _hvps(rec, directions, keep=False):
    """H v for each direction in `directions`, over one recording of f (kept for more
    directions with `keep`)."""
    out = []
    prev = state.grad
    for j, v in enumerate(directions):
        state.grad = True
        try:
            (g,) = rec.tangents(v)
        finally:
            state.grad = prev
        if g is None or not g._rg:
            out.append([np.zeros(x.shape) for x in rec.xs])
            continue
        gs = autograd.grad([g], rec.xs, retain_graph=keep or j < len(directions) - 1,
                           allow_unused=True)
        out.append([np.zeros(x.shape) if h is None else np.reshape(h, x.shape)
                    for h, x in zip(gs, rec.xs)])
    return out


def hessian(f, argnums=0):
    """``f`` -> a function returning the Hessian of scalar ``f`` with respect to argument
    `argnums` (one exact Hessian-vector product per element, over one recording of f)."""
    if not isinstance(argnums, int):
        raise TypeError("hessian: argnums must be an int (one argument)")

    @functools.wraps(f)
    def wrapper(*args):
        (i,) = _argnums(argnums, len(args))
        if _nested([args[i]]):  # forward over (recorded) reverse, keeping history
            return _jacfwd_nested(grad(f, argnums=i), args, (i,), i)
        rec = _Recorded(lambda x: f(*_place(args, (i,), (x,))), [args[i]], "tape.hessian")
        _check_single(rec.outs, "hessian")
        if rec.outs[0].size != 1:
            raise TypeError("hessian: f must return a scalar")
        (x,) = rec.xs
        n = x.size
        dirs = [[np.eye(1, n, j).reshape(x.shape)] for j in range(n)]
        H = np.stack([h[0].reshape(-1) for h in _hvps(rec, dirs)], axis=0) if n else \
            np.zeros((0, 0))
        return H.reshape(x.shape + x.shape)

    return wrapper


__all__ = ["jvp", "linearize", "jacfwd", "jacrev", "jacobian", "hvp", "hessian"]
