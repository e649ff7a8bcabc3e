"""Saving and loading compiled tapes as plain arrays (.npz, no pickled code).

A file holds one recording: the tape's arrays (rows, side rows, attributes, 0-d values), the
shapes and constant values of its array slots, which slots are the inputs and the output, the
escape rows' shapes and the guards (by name, with their recorded results), plus the format
version and the table hash. Loading validates every opcode, slot index, offset and length
against the table's families before any kernel sees the arrays, so a truncated, corrupted or
hostile file raises ``ValueError`` and never crashes the process.
"""
from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np

from jit.table import FORMAT_VERSION, OPCODE, TABLE, table_hash

from ._guards import Guard
from ._replay_hooks import load_points, saved_points
from ._tensor import Tensor

MAX_ELEMENTS = 1 << 30  # no more array elements than this in a loaded tape (a corrupt size)
_FAMILY = [p.family for p in TABLE]
_REPLAYABLE_ESCAPES = {"matmul_blas", "inv", "det", "logabsdet", "solve"}


def _json(x):
    return np.frombuffer(json.dumps(x).encode(), dtype=np.uint8)


def save(variant, path, argnums):
    from ._arrays import unmark_scalar_runs

    t, A = variant.t, variant.A
    if t is None:
        raise ValueError("CompiledTape.save: the function's output does not depend on any "
                         "recorded operation; there is nothing to save")
    if t.functions:
        raise ValueError("CompiledTape.save: the recording calls custom Functions "
                         "(tape.Function), whose forward and backward are code, not data; "
                         "pickle the CompiledTape instead (it records f again when loaded)")
    m = len(A.S)
    k_of = {k: s for s, k in t.side_of.items()}
    shapes, is_array, consts, const_rows = [], [], [], []
    for k in range(m):
        v = t.av[k]
        arr = v is not None
        is_array.append(arr)
        shapes.append(list(np.shape(v)) if arr else [])
        s = k_of[k]
        if arr and A.code[s] == OPCODE["const"]:
            const_rows.append(k)
            consts.append(np.reshape(v, -1))
    inputs = []
    statics = {}
    for i, (slot, shape, static) in enumerate(zip(variant.slots, variant.shapes,
                                                  variant.statics)):
        if shape is not None:
            inputs.append({"slot": -1 if slot is None else int(slot), "shape": list(shape)})
        elif isinstance(static, np.ndarray):
            inputs.append({"static_array": i})
            statics[f"static_{i}"] = static
        else:
            if not (static is None or isinstance(static, (bool, int, float, str))):
                raise ValueError(f"CompiledTape.save: static argument {i} is a "
                                 f"{type(static).__name__}; only None, bool, int, float, str "
                                 "and integer arrays can be saved")
            inputs.append({"static": static})
    guards = []
    gvals = {}
    for j, g in enumerate(variant.guards):
        ops = []
        for q, (kind, x) in enumerate(g.operands):
            if kind == "slot":
                ops.append(["slot", int(x)])
            elif kind == "leaf":
                ops.append(["leaf", next(i for i, lf in enumerate(variant.leaves) if lf is x)])
            else:
                gvals[f"guard_{j}_const_{q}"] = np.asarray(x)
                ops.append(["const", q])
        r = g.result
        if isinstance(r, tuple):
            raise ValueError(f"CompiledTape.save: the guard at {g.where} returns a tuple; "
                             "it cannot be saved")
        gvals[f"guard_{j}_result"] = np.asarray(r)
        guards.append({"spec": list(g.spec), "operands": ops, "where": g.where,
                       "result_type": type(r).__name__})
    meta = {"format": FORMAT_VERSION, "table_hash": table_hash(), "inputs": inputs,
            "argnums": list(argnums) if isinstance(argnums, tuple) else argnums,
            "output": {"slot": int(variant.out._slot), "shape": list(variant.out.shape)},
            "escapes": {str(c): [list(x) if x is not None else None for x in shp]
                        for c, shp in t.escapes.items()},
            "guards": guards, "is_array": is_array, "shapes": shapes,
            "hook_points": saved_points(variant),
            "const_rows": const_rows}
    np.savez(path, meta=_json(meta), R=unmark_scalar_runs(A.R), S=A.S, sv=A.sv, IA=A.IA,
             FA=A.FA, consts=np.concatenate(consts) if consts else np.zeros(0), **statics,
             **gvals)


def load(path, f=None, state=None):
    """A CompiledTape from a file written by ``CompiledTape.save``. With `f`, a guard that
    differs records f again; without it, that is an error. Its BackwardState points call the
    members of `state` (``cf.state``; a new BackwardState when None)."""
    from .backward_state import BackwardState
    from .compiled import CompiledTape

    state = BackwardState() if state is None else state

    try:
        z = np.load(path, allow_pickle=False)
        files = {k: z[k] for k in z.files}
    except OSError as e:  # (missing, unreadable: the system's reason)
        raise ValueError(f"tape.load: {path} is not a readable compiled tape ({e})") from None
    except Exception:  # noqa: BLE001 - any other unreadable file is the same error for users
        # (not NumPy's own message, which suggests allow_pickle for a file that may be hostile)
        raise ValueError(f"tape.load: {path} is not a readable compiled tape (not an .npz "
                         "archive of plain arrays, as cf.save writes)") from None
    try:
        variant, argnums = _build(files, state)
    except ValueError:
        raise
    except Exception as e:  # noqa: BLE001 - malformed content of any kind
        raise ValueError(f"tape.load: {path} is not a valid compiled tape ({type(e).__name__}: "
                         f"{e})") from None
    cf = CompiledTape._from_variant(variant, f, argnums)
    cf.state = state
    return cf


def _need(cond, what):
    if not cond:
        raise ValueError(f"tape.load: invalid compiled tape: {what}")


def _array(files, name, dtype, ndim):
    _need(name in files, f"missing array {name!r}")
    a = files[name]
    _need(a.dtype == dtype and a.ndim == ndim, f"array {name!r} must be {dtype} with {ndim} "
                                               f"dimension(s), not {a.dtype} {a.shape}")
    return np.ascontiguousarray(a)


def _build(files, state):
    raw = _array(files, "meta", np.uint8, 1)
    meta = json.loads(bytes(raw).decode())
    _need(isinstance(meta, dict), "metadata is not a mapping")
    _need(meta.get("format") == FORMAT_VERSION, f"format version {meta.get('format')!r}, this "
                                               f"tapejit reads {FORMAT_VERSION}")
    _need(meta.get("table_hash") == table_hash(), "it was saved by a tapejit with another "
                                                  "primitive table (table hash differs)")
    R = _array(files, "R", np.int64, 2)
    S = _array(files, "S", np.int64, 2)
    sv = _array(files, "sv", np.float64, 1)
    IA = _array(files, "IA", np.int64, 1)
    FA = _array(files, "FA", np.float64, 1)
    consts = _array(files, "consts", np.float64, 1)
    n, m = len(R), len(S)
    _need(R.shape[1] == 4 and S.shape[1] == 3 and len(sv) == n and n > 0, "row arrays disagree")
    _need(len(IA) >= 1 and len(FA) >= 1, "attribute arrays are empty")
    is_array = meta["is_array"]
    shapes = meta["shapes"]
    _need(isinstance(is_array, list) and isinstance(shapes, list) and len(is_array) == m
          and len(shapes) == m and all(type(x) is bool for x in is_array),
          "side-row shapes disagree")
    _need(int(S[:, 0].clip(0).sum()) if m else 0 <= MAX_ELEMENTS, "too many elements")
    size = _validate_rows(R.tolist(), S.tolist(), IA, is_array, shapes, meta)
    # values: 0-d in sv, arrays in buffers of their recorded shapes; constants filled in
    av = [None] * m
    side_of = {}
    for s, row in enumerate(R.tolist()):
        if row[3] >= 0:
            side_of[s] = row[3]
    for k in range(m):
        if is_array[k]:
            av[k] = np.zeros(tuple(shapes[k]))
    off = 0
    for k in meta["const_rows"]:
        _need(isinstance(k, int) and 0 <= k < m and is_array[k], "constant row out of range")
        sz = av[k].size
        _need(off + sz <= len(consts), "constant values truncated")
        av[k][...] = consts[off:off + sz].reshape(av[k].shape)
        off += sz
    _need(off == len(consts), "constant values too long")
    # the tape object the replay driver expects
    from ._arrays import mark_scalar_runs, value_addresses
    from ._tape import Tape

    t = Tape()
    t.sealed = True
    t.av = av
    t.side_of = side_of
    t.rows = t.sv = t.side = t.ia = t.fa = None
    t.escapes = {}
    for c, shp in meta["escapes"].items():
        c = int(c)
        _need(0 <= c < n and _FAMILY[R[c, 0] & 255] == "escape", "escape entry out of range")
        a, b, y = (None if x is None else tuple(int(d) for d in x) for x in shp)
        _need(a is not None and math.prod(a) == size[R[c, 1]], "escape operand shape")
        _need(b is None or (R[c, 2] >= 0 and math.prod(b) == size[R[c, 2]]), "escape shape")
        _need(y is not None and math.prod(y) == size[c], "escape result shape")
        t.escapes[c] = (a, b, y)
    for c in range(n):
        if _FAMILY[R[c, 0] & 255] == "escape":
            _need(c in t.escapes, f"escape row {c} has no shapes")
    arr_slots = np.array([s for s, k in side_of.items() if is_array[k]], dtype=np.int64)
    VA = value_addresses(sv, {int(s): av[side_of[int(s)]] for s in arr_slots})
    isarr = np.zeros(n, bool)
    isarr[arr_slots] = True
    mark_scalar_runs(R)  # (after validation, which reads -1)
    t.built = SimpleNamespace(R=R, S=S, sv=sv, IA=IA, FA=FA, VA=VA, size=np.array(size),
                              is_array=isarr, code=R[:, 0] & 255,
                              packed_slot=np.zeros(0, np.int64))
    t.freed = np.zeros(n, np.uint8)
    v = _variant(t, meta, files, size)
    v.hooks = load_points(t, _points(meta, n, side_of, shapes, is_array), [
        tuple(shapes[side_of[s]]) if s in side_of and is_array[side_of[s]] else ()
        for s in range(n)], state)
    v.hooked_slots = len(t.hooks or ())
    return v, _argnums(meta["argnums"])


def _points(meta, n, side_of, shapes, is_array):
    points = meta.get("hook_points", [])
    _need(isinstance(points, list), "hook points")
    for p in points:
        _need(isinstance(p, dict) and isinstance(p.get("slot"), int) and 0 <= p["slot"] < n
              and isinstance(p.get("name"), str) and p["name"].isidentifier()
              and isinstance(p.get("where"), str), "a hook point")
    return points


def _argnums(a):
    _need(isinstance(a, int) or (isinstance(a, list) and all(isinstance(x, int) for x in a)),
          "argnums")
    return a if isinstance(a, int) else tuple(a)


def _validate_rows(R, S, IA, is_array, shapes, meta):
    """Every row against its family's layout; returns the size of every slot."""
    n, m, nIA = len(R), len(S), len(IA)
    size = [1] * n
    used = set()
    for s, (code, a, b, k) in enumerate(R):
        op, flags = code & 255, code >> 8
        _need(0 <= op < len(TABLE) and 0 <= flags < 32, f"row {s}: opcode {code}")
        fam = _FAMILY[op]
        _need(flags == 0 or fam in ("binary", "select"), f"row {s}: flags on a {fam} row")
        _need(-1 <= a < s and -1 <= b < s, f"row {s}: operand slots must be earlier rows")
        _need(-1 <= k < m and k not in used, f"row {s}: side row {k}")
        if k >= 0:
            used.add(k)
            nk, iat, fat = S[k]
            _need(0 <= nk <= MAX_ELEMENTS and 0 <= iat < nIA and fat == 0, f"row {s}: side row")
            shape = shapes[k]
            _need(isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)
                  and math.prod(shape) == nk, f"row {s}: shape")
            _need(is_array[k] or nk == 1, f"row {s}: a 0-d value of size {nk}")
            size[s] = nk
        name = TABLE[op].name
        if fam == "input":
            _need(a == -1 and b == -1, f"row {s}: an input row with operands")
            continue
        need_b = fam in ("binary", "select", "scatter", "matmul") or name in (
            "matmul_blas", "solve")
        _need(a >= 0 and (b >= 0) == need_b, f"row {s}: operands of {name}")
        if fam == "escape":
            _need(name in _REPLAYABLE_ESCAPES, f"row {s}: {name} rows cannot be replayed")
        if k < 0:  # a 0-d row of 0-d operands (the sweep's inline path)
            _need(fam in ("unary", "binary") and _zero_d(R, a, is_array)
                  and (b < 0 or _zero_d(R, b, is_array)), f"row {s}: inline row")
            continue
        nk, iat = S[k][0], S[k][1]
        _check_family(s, fam, name, flags, a, b, nk, iat, IA, size)
    for item in meta["inputs"]:
        if "slot" in item:
            slot, shape = item["slot"], item["shape"]
            _need(isinstance(slot, int) and -1 <= slot < n, "input slot out of range")
            _need(isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape),
                  "input shape")
            if slot >= 0:
                _need(TABLE[R[slot][0] & 255].name == "leaf" and size[slot] == math.prod(shape),
                      "an input slot is not a leaf row of its shape")
    out = meta["output"]
    _need(isinstance(out.get("slot"), int) and 0 <= out["slot"] < n and
          math.prod(out["shape"]) == size[out["slot"]], "output slot")
    return size


def _zero_d(R, s, is_array):
    k = R[s][3]
    return k < 0 or not is_array[k]


def _ints(IA, off, count, what):
    _need(0 <= off and count >= 0 and off + count <= len(IA), f"{what}: attributes out of range")
    return IA[off:off + count]


def _strided_nest(IA, iat, n, where):
    """The element each strided loop (flag 16) reads from operands a and b, in output order."""
    n0, n1, n2, *strides = (int(v) for v in _ints(IA, iat + 2, 9, where))
    _need(n >= 1 and all(1 <= d <= n for d in (n0, n1, n2)) and n0 * n1 * n2 == n
          and all(0 <= s <= MAX_ELEMENTS for s in strides), f"{where}: broadcast loop nest")
    i0, i1, i2 = np.ix_(np.arange(n0), np.arange(n1), np.arange(n2))
    return [(i0 * s0 + i1 * s1 + i2 * s2).reshape(-1) for s0, s1, s2 in
            (strides[:3], strides[3:])]


def _check_family(s, fam, name, flags, a, b, n, iat, IA, size):
    where = f"row {s} ({name})"
    if fam == "unary":
        _need(size[a] == n, f"{where}: operand size")
    elif fam in ("binary", "select"):
        _need(not (flags & 1 and flags & 4) and not (flags & 2 and flags & 8), f"{where}: flags")
        _need(not flags & 16 or (fam == "binary" and flags & 12), f"{where}: flags")
        head = _ints(IA, iat, 2, where) if (flags & 12 or fam == "select") else None
        nest = _strided_nest(IA, iat, n, where) if flags & 16 else None
        for k, (x, one, mapped, hi) in enumerate(((a, 1, 4, 0), (b, 2, 8, 1))):
            mp = None
            if flags & one:
                _need(size[x] == 1, f"{where}: a one-element operand")
            elif flags & mapped:
                mp = _ints(IA, int(head[hi]), n, where)
                _need(n == 0 or (mp.min() >= 0 and mp.max() < size[x]), f"{where}: index map")
            else:
                _need(size[x] == n, f"{where}: operand size")
            if nest is not None:  # the strides must read what the map (or the flags) reads
                reads = np.zeros(n, np.int64) if flags & one else (
                    mp if mp is not None else np.arange(n))
                _need(np.array_equal(nest[k], reads), f"{where}: broadcast strides")
        if fam == "select":
            _ints(IA, iat + 2, n, where)
    elif fam in ("reduce", "scan"):
        P, Rr, Q = (int(v) for v in _ints(IA, iat, 3, where))
        _need(min(P, Rr, Q) >= 0 and P * Rr * Q == size[a], f"{where}: (P, R, Q)")
        _need(n == (P * Q if fam == "reduce" else P * Rr * Q), f"{where}: result size")
    elif fam == "gather":
        idx = _ints(IA, iat, n, where)
        _need(n == 0 or (idx.min() >= 0 and idx.max() < size[a]), f"{where}: indices")
    elif fam == "scatter":
        mm = int(_ints(IA, iat, 1, where)[0])
        _need(0 <= mm <= n, f"{where}: count")
        pos = _ints(IA, iat + 1, 2 * mm, where)[:mm]
        _need(mm == 0 or (pos.min() >= 0 and pos.max() < n), f"{where}: positions")
        _need(size[a] == n and size[b] == mm, f"{where}: operand sizes")
    elif fam == "matmul":
        B, M, K, N, ba, bb = (int(v) for v in _ints(IA, iat, 6, where))
        _need(min(B, M, K, N) >= 0 and ba in (0, 1) and bb in (0, 1), f"{where}: dimensions")
        _need(size[a] == (B if ba else 1) * M * K and size[b] == (B if bb else 1) * K * N
              and n == B * M * N, f"{where}: operand sizes")


def _variant(t, meta, files, size):
    from .compiled import _Variant

    v = _Variant.__new__(_Variant)
    v.t, v.A = t, t.built
    v.escapes = sorted(t.escapes)
    v._plans = {}
    v.shapes, v.statics, v.leaves, v.slots, args = [], [], [], [], []
    t.leaves = {}
    for i, item in enumerate(meta["inputs"]):
        if "slot" in item:
            shape = tuple(item["shape"])
            slot = item["slot"]
            if slot >= 0 and v.A.is_array[slot]:
                buf = t.av[t.side_of[slot]]
                _need(buf.shape == shape, "input buffer shape")
                leaf = Tensor(buf, requires_grad=True)
                leaf._v = buf  # the row's own buffer: loading writes into it
            else:
                leaf = Tensor(np.zeros(shape), requires_grad=True)
            if slot >= 0:
                t.leaves[slot] = (leaf, 0)
            v.shapes.append(shape)
            v.statics.append(None)
            v.leaves.append(leaf)
            v.slots.append(slot if slot >= 0 else None)
            args.append(np.zeros(shape))
        else:
            static = files[f"static_{i}"] if "static_array" in item else item.get("static")
            v.shapes.append(None)
            v.statics.append(static)
            v.leaves.append(static)
            v.slots.append(None)
            args.append(static)
    v.args = tuple(args)
    out = meta["output"]
    o = Tensor.__new__(Tensor)
    o._v, o._tape, o._slot, o._rg, o._meta = np.zeros(tuple(out["shape"])), t, out["slot"], \
        True, None
    v.out = o
    v.guards = []
    for j, g in enumerate(meta["guards"]):
        ops = []
        for kind, x in g["operands"]:
            if kind == "slot":
                _need(isinstance(x, int) and 0 <= x < len(size), "guard slot")
                ops.append(("slot", x))
            elif kind == "leaf":
                _need(isinstance(x, int) and 0 <= x < len(v.leaves) and
                      type(v.leaves[x]) is Tensor, "guard input")
                ops.append(("leaf", v.leaves[x]))
            else:
                ops.append(("const", files[f"guard_{j}_const_{x}"]))
        r = files[f"guard_{j}_result"]
        rt = g.get("result_type")
        result = r if rt == "ndarray" else (r.item() if r.ndim == 0 else r)
        if rt in ("bool", "int", "float"):
            result = {"bool": bool, "int": int, "float": float}[rt](result)
        spec = tuple(tuple(x) if isinstance(x, list) else x for x in g["spec"])
        if spec and spec[0] == "values":
            spec = (spec[0], spec[1], tuple(tuple(kv) for kv in g["spec"][2]))
        v.guards.append(Guard(spec, tuple(ops), result, g.get("where", "?")))
    return v
