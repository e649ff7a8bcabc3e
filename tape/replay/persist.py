"""Saving and loading compiled tapes as plain arrays (.npz, no pickled code).

A file holds one recording: the tape's arrays (rows, side rows, attributes, 0-d values), the
shapes and constant values of its array slots, which slots are the inputs and the output, the
escape rows' shapes and the guards (by name, with their recorded results), plus the format
version and the table hash. Loading checks every member and field (docs/security.md lists
them) before any kernel sees the arrays, and counts the memory and loop iterations the file asks
for against MAX_ELEMENTS and MAX_WORK, so a truncated, corrupted or hostile file raises
``ValueError``: it never crashes the process, exhausts its memory or hangs it. The checks cost
array operations over the file's rows, not Python steps per row, and a compressed member is
refused before it inflates to more than MAX_EXPANSION times its size.
"""
from __future__ import annotations

import json
import math
import os
import re
import zipfile
from types import SimpleNamespace

import numpy as np

from jit.families import layouts
from jit.table import (FLAG_SHIFT, FORMAT_VERSION, MAP_A, MAP_B, ONE_A, ONE_B, OP_MASK, OPCODE,
                       STRIDED, TABLE, RowFlag, table_hash)

from ..core.arrays import mark_scalar_runs, unmark_scalar_runs, value_addresses
from ..core.guards import Guard
from ..core.tape import Tape
from ..core.tensor import Tensor, leaf_sharing, result
from ..escapes import ESCAPES
from . import guard_calls
from .replay_hooks import load_points, saved_points
from .variant import Variant

_ALL_FLAGS = int(RowFlag.ONE_A | RowFlag.ONE_B | RowFlag.MAP_A | RowFlag.MAP_B | RowFlag.STRIDED)


def _default_elements():
    """An eighth of the machine's memory, in float64 values (a replay holds a small multiple of
    what MAX_ELEMENTS counts: its gradients, the caller's arrays); 2**27 (1 GiB) where the
    system does not say."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # (no sysconf: Windows)
        memory = 8 << 30
    return max(1 << 20, memory // 8 // 8)


# Limits on what a loaded file may ask of the process (docs/security.md; raise them here for a
# larger tape): values held (the archive's arrays; apart from them, the rows' values, input
# buffers and the kernels' scratch), loop iterations of one sweep (about a minute of kernel
# time, during which Ctrl-C waits: the kernels hold no GIL), and how many times its compressed
# size the archive may inflate to (deflate packs a repeated row ~1000 times)
MAX_ELEMENTS = _default_elements()
MAX_WORK = 1 << 36
MAX_EXPANSION = 100
_FAMILY = [p.family for p in TABLE]
_FAMILIES = sorted(set(_FAMILY))
_FAMILY_CODE = np.array([_FAMILIES.index(f) for f in _FAMILY], dtype=np.int8)



def _json(x):
    return np.frombuffer(json.dumps(x).encode(), dtype=np.uint8)


def save(variant, path, argnums):
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
        spec = _plain_spec(g.spec)
        wrong = guard_calls.problem(spec, len(ops))
        if wrong:
            raise ValueError(f"CompiledTape.save: the guard at {g.where} {wrong}; a saved tape "
                             "cannot hold it")
        gvals[f"guard_{j}_result"] = np.asarray(r)
        guards.append({"spec": spec, "operands": ops, "where": _relative(g.where),
                       "result_type": type(r).__name__})
    meta = {"format": FORMAT_VERSION, "table_hash": table_hash(), "inputs": inputs,
            "argnums": list(argnums) if isinstance(argnums, tuple) else argnums,
            "output": {"slot": int(variant.out._slot), "shape": list(variant.out.shape)},
            "escapes": {str(c): [list(x) if x is not None else None for x in shp[:3]]
                        + [dict(shp[3])] for c, shp in t.escapes.items()},
            "guards": guards, "is_array": is_array, "shapes": shapes,
            "hook_points": [{**p, "where": _relative(p["where"])} for p in saved_points(variant)],
            "const_rows": const_rows,
            "stopped": [[int(first), int(end)] for first, end in t.stopped]}
    np.savez(path, meta=_json(meta), R=unmark_scalar_runs(A.R), S=A.S, sv=A.sv, IA=A.IA,
             FA=A.FA, consts=np.concatenate(consts) if consts else np.zeros(0), **statics,
             **gvals)


def _plain_spec(spec):
    """A guard's spec as JSON holds it: lists, and Python numbers for NumPy ones."""
    if isinstance(spec, (tuple, list)):
        return [_plain_spec(x) for x in spec]
    return spec.item() if isinstance(spec, np.generic) else spec


def _relative(where):
    """"file:line" with the file relative to the directory above its package (the outermost
    directory of __init__.py files around it), or its name alone outside a package: a saved
    file names no directory of the machine that recorded it."""
    path, sep, line = where.rpartition(":")
    if not sep or not os.path.isabs(path):
        return where
    root = os.path.dirname(path)
    while os.path.isfile(os.path.join(root, "__init__.py")):
        root = os.path.dirname(root)
    return f"{os.path.relpath(path, root)}:{line}"


def read(path, state):
    """The recording saved in a file written by ``CompiledTape.save``, validated: (variant,
    argnums). Its BackwardState points call the members of `state`."""
    try:
        files = _read_archive(path)
    except _Invalid:
        raise
    except OSError as e:  # (missing, unreadable: the system's reason)
        raise ValueError(f"tape.load: {path} is not a readable compiled tape ({e})") from None
    except Exception:  # noqa: BLE001 - any other unreadable file is the same error for users
        # (not NumPy's own message, which suggests allow_pickle for a file that may be hostile)
        raise ValueError(f"tape.load: {path} is not a readable compiled tape (not an .npz "
                         "archive of plain arrays, as cf.save writes)") from None
    try:
        variant, argnums = _build(files, state)
    except _Invalid:
        raise
    except Exception as e:  # noqa: BLE001 - malformed content of any kind
        raise ValueError(f"tape.load: {path} is not a valid compiled tape ({type(e).__name__}: "
                         f"{e})") from None
    return variant, argnums


class _Invalid(ValueError):
    """A check of the file failed (its message names the field)."""


def _need(cond, what):
    if not cond:
        raise _Invalid(f"tape.load: invalid compiled tape: {what}")


_MEMBERS = {"meta": (np.uint8, 1), "R": (np.int64, 2), "S": (np.int64, 2), "sv": (np.float64, 1),
            "IA": (np.int64, 1), "FA": (np.float64, 1), "consts": (np.float64, 1)}
_VALUES = re.compile(r"static_\d+|guard_\d+_result|guard_\d+_const_\d+")  # (any plain dtype)
_HEADER = {(1, 0): np.lib.format.read_array_header_1_0,
           (2, 0): np.lib.format.read_array_header_2_0}


def _read_archive(path):
    """The archive's arrays by name. Names come from the zip directory and each member's
    dtype and shape from its .npy header, all checked before any array data is read: an
    unknown member, a compression other than deflate, members that inflate to more than
    MAX_EXPANSION times their size, an object dtype, a header that disagrees with the member's
    size or arrays of more than MAX_ELEMENTS values together are refused unread. (zipfile
    inflates a deflated member in bounded steps and stops at its declared size.)"""
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
        names = [i.filename[:-4] if i.filename.endswith(".npy") else None for i in infos]
        for info, name in zip(infos, names):
            _need(name in _MEMBERS or (name is not None and _VALUES.fullmatch(name)),
                  f"unknown member {info.filename!r}")
            _need(info.compress_type in _COMPRESSIONS, f"member {info.filename!r}: "
                  f"compression method {info.compress_type}, not stored or deflated (as "
                  "np.savez and np.savez_compressed write)")
        _need(len(set(names)) == len(names), "a member appears twice")
        _check_expansion(infos)
        total = 0
        for info, name in zip(infos, names):
            with z.open(info) as fp:
                read = _HEADER.get(np.lib.format.read_magic(fp))
                _need(read is not None, f"member {name!r}: .npy format version")
                shape, _, dtype = read(fp)
                start = fp.tell()
            count = math.prod(shape)
            values = count * -(-dtype.itemsize // 8)  # (in 8-byte values: a long string, more)
            _need(min(shape, default=0) >= 0, f"member {name!r}: shape {shape}")
            _need(values <= MAX_ELEMENTS - total, _over(
                f"member {name!r} declares {values} values", total + values))
            total += values
            want = _MEMBERS.get(name)
            _need(dtype.kind in "biufcSU" and (want is None or (dtype == want[0] and
                                                                  len(shape) == want[1])),
                  f"member {name!r}: dtype {dtype} with {len(shape)} dimension(s)"
                  + (f", not {np.dtype(want[0])} with {want[1]}" if want else ""))
            _need(info.file_size == start + count * dtype.itemsize,
                  f"member {name!r}: its size disagrees with its header")
        files = {}
        for info, name in zip(infos, names):
            with z.open(info) as fp:
                files[name] = np.lib.format.read_array(fp, allow_pickle=False)
        return files


_COMPRESSIONS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
_SMALL = 1 << 20  # bytes an archive may inflate to whatever its compressed size


def _check_expansion(infos):
    """The members' declared sizes against their compressed sizes, before any is inflated: a
    small file costs no more to refuse than a small multiple of its size."""
    packed = sum(i.compress_size for i in infos)
    size = sum(i.file_size for i in infos)
    _need(size <= _SMALL + MAX_EXPANSION * packed,
          f"its members expand from {packed} to {size} bytes, more than {MAX_EXPANSION} times "
          "(tape.replay.persist.MAX_EXPANSION)")


def _over(what, need):
    """The refusal of a tape that holds more than MAX_ELEMENTS values, saying how to allow it."""
    return (f"{what}: the tape would hold {need} elements or more, more than MAX_ELEMENTS = "
            f"{MAX_ELEMENTS} ({MAX_ELEMENTS * 8 / 2 ** 30:.1f} GiB of float64, by default an "
            "eighth of this machine's memory); on a machine with the memory, set "
            f"tape.replay.persist.MAX_ELEMENTS = {need} (or more) before tape.load")


def _array(files, name):
    _need(name in files, f"missing array {name!r}")
    return np.ascontiguousarray(files[name])


def _build(files, state):
    meta = _metadata(files)
    R, S, sv, IA, FA, consts = (_array(files, k) for k in ("R", "S", "sv", "IA", "FA", "consts"))
    n, m = len(R), len(S)
    _need(R.shape[1] == 4 and S.shape[1] == 3 and len(sv) == n and n > 0, "row arrays disagree")
    _need(len(IA) >= 1 and len(FA) >= 1, "attribute arrays are empty")
    is_array, shapes = meta["is_array"], meta["shapes"]
    _need(len(is_array) == m and len(shapes) == m, "side-row shapes disagree")
    named = set(_MEMBERS) | _value_members(meta)
    _need(named <= set(files), f"missing member(s) {sorted(named - set(files))}")
    _need(set(files) <= named, f"member(s) {sorted(set(files) - named)} named by no field")
    budget = _Budget(sum(a.size for a in files.values()))  # (the archive's arrays, read)
    size = _validate_rows(R, S, IA, meta, budget)
    _guard_costs(meta, files, R, size, budget)
    # values: 0-d in sv, arrays in buffers of their recorded shapes; constants filled in
    av = [None] * m
    general = np.flatnonzero(R[:, 3] >= 0)
    side_of = dict(zip(general.tolist(), R[general, 3].tolist()))
    for k in range(m):
        if is_array[k]:
            av[k] = np.zeros(tuple(shapes[k]))
    row_of = {k: s for s, k in side_of.items()}
    off = 0
    for k in meta["const_rows"]:
        _need(0 <= k < m and is_array[k] and R[row_of[k], 0] == OPCODE["const"],
              f"constant row {k}: not the side row of an array constant")
        sz = av[k].size
        _need(off + sz <= len(consts), "constant values truncated")
        av[k][...] = consts[off:off + sz].reshape(av[k].shape)
        off += sz
    _need(off == len(consts), "constant values too long")
    escapes = {}
    for c, (a, b, y, params) in meta["escapes"].items():
        c = int(c)
        _need(0 <= c < n and _FAMILY[R[c, 0] & OP_MASK] == "escape", "escape entry out of range")
        name = TABLE[R[c, 0] & OP_MASK].name
        where = f"row {c} ({name})"
        _need(math.prod(a) == size[R[c, 1]] and (b is None) == (R[c, 2] < 0)
              and (b is None or math.prod(b) == size[R[c, 2]]) and math.prod(y) == size[c],
              f"{where}: escape shapes of other sizes than its operands and result")
        a, b, y = (None if x is None else tuple(x) for x in (a, b, y))
        budget.run(_escape_work(name, a, b, y, params, where), where)
        escapes[c] = (a, b, y, params)
    for c in range(n):
        if _FAMILY[R[c, 0] & OP_MASK] == "escape":
            _need(c in escapes, f"escape row {c} has no shapes")
    arr_slots = np.array([s for s, k in side_of.items() if is_array[k]], dtype=np.int64)
    VA = value_addresses(sv, {int(s): av[side_of[int(s)]] for s in arr_slots})
    isarr = np.zeros(n, bool)
    isarr[arr_slots] = True
    mark_scalar_runs(R)  # (after validation, which reads -1)
    # the tape object the replay driver expects
    t = Tape.from_arrays(av, side_of, escapes, SimpleNamespace(
        R=R, S=S, sv=sv, IA=IA, FA=FA, VA=VA, size=np.array(size), is_array=isarr,
        code=R[:, 0] & OP_MASK, packed_slot=np.zeros(0, np.int64)), stopped=_stopped(meta, n))
    points = _points(meta, n)
    hooks = load_points(t, points, {  # (the shapes of the hooked slots)
        s: tuple(shapes[side_of[s]]) if s in side_of and is_array[side_of[s]] else ()
        for s in (p["slot"] for p in points)}, state)
    return _variant(t, meta, files, hooks), _argnums(meta["argnums"])


def _points(meta, n):
    points = meta["hook_points"]
    _need(isinstance(points, list), "hook points")
    for p in points:
        _need(isinstance(p, dict) and isinstance(p.get("slot"), int) and 0 <= p["slot"] < n
              and isinstance(p.get("name"), str) and p["name"].isidentifier()
              and _is_where(p.get("where")), "a hook point")
    return points


def _is_where(x):
    """A "file:line" for messages: printable (no terminal controls), of a path's length."""
    return isinstance(x, str) and len(x) <= 4096 and x.isprintable()


def _argnums(a):
    return a if isinstance(a, int) else tuple(a)


class _Budget:
    """What a loaded tape may ask of the process, counted as the checks go: the values it holds
    (MAX_ELEMENTS) and the loop iterations of one sweep (MAX_WORK). Every loop bound a file
    sets is counted here, not only its output's size: a loop over an empty operand's batch,
    lines or reduced axis still runs."""

    def __init__(self, elements):
        self.elements, self.work = elements, 0

    def hold(self, count, what):
        self.elements += int(count)
        _need(self.elements <= MAX_ELEMENTS, _over(what, self.elements))

    def run(self, count, what):
        self.work += int(count)
        _need(self.work <= MAX_WORK, f"{what}: more than {MAX_WORK} loop iterations of work in "
                                     "all (tape.replay.persist.MAX_WORK)")

    def hold_rows(self, rows, counts):
        """Hold each of `rows`' `counts` elements in turn; a refusal names the row that passes
        the limit."""
        total = np.cumsum(counts) + self.elements
        if len(total) and total[-1] > MAX_ELEMENTS:
            s = int(np.argmax(total > MAX_ELEMENTS))
            self.hold(total[s] - self.elements, f"row {rows[s]}")
        self.elements = int(total[-1]) if len(total) else self.elements


def _is_shape(x):
    return (isinstance(x, list) and len(x) <= 64 and all(type(d) is int and 0 <= d <= MAX_ELEMENTS
                                                         for d in x)
            and math.prod(x) <= MAX_ELEMENTS)


def _is_int(x):
    return type(x) is int


def _metadata(files):
    """The metadata, its structure checked: every field there, of its type."""
    try:
        meta = json.loads(bytes(_array(files, "meta")).decode())
    except (UnicodeDecodeError, ValueError, RecursionError):
        meta = None
    _need(isinstance(meta, dict), "metadata is not a JSON mapping")
    _need(meta.get("format") == FORMAT_VERSION, f"format version {meta.get('format')!r}, this "
                                               f"tapejit reads {FORMAT_VERSION}")
    _need(meta.get("table_hash") == table_hash(), "it was saved by a tapejit with another "
                                                  "primitive table (table hash differs)")
    fields = {"format", "table_hash", "inputs", "argnums", "output", "escapes", "guards",
              "is_array", "shapes", "const_rows", "hook_points", "stopped"}
    _need(set(meta) == fields, f"metadata fields {sorted(set(meta) ^ fields)}")
    _need(isinstance(meta["is_array"], list) and all(type(x) is bool for x in meta["is_array"]),
          "is_array")
    _need(isinstance(meta["shapes"], list) and all(map(_is_shape, meta["shapes"])), "shapes")
    _need(isinstance(meta["const_rows"], list) and all(map(_is_int, meta["const_rows"]))
          and len(set(meta["const_rows"])) == len(meta["const_rows"]), "const_rows")
    inputs = meta["inputs"]
    _need(isinstance(inputs, list), "inputs")
    slots = []
    for i, item in enumerate(inputs):
        keys = set(item) if isinstance(item, dict) else None
        if keys == {"slot", "shape"}:
            _need(_is_int(item["slot"]) and _is_shape(item["shape"]), f"input {i}")
            slots += [item["slot"]] if item["slot"] >= 0 else []
        elif keys == {"static_array"}:
            _need(item["static_array"] == i, f"input {i}")
        else:
            _need(keys == {"static"} and (item["static"] is None or type(item["static"]) in (
                bool, int, float, str)), f"input {i}")
    _need(len(set(slots)) == len(slots), "two inputs share a slot")
    a, ni = meta["argnums"], len(inputs)
    nums = [a] if _is_int(a) else a if isinstance(a, list) and all(map(_is_int, a)) else None
    _need(nums is not None and all(-ni <= x < ni and "slot" in inputs[x] for x in nums),
          f"argnums {a!r}: not inputs among the {ni} arguments")
    out = meta["output"]
    _need(isinstance(out, dict) and set(out) == {"slot", "shape"} and _is_int(out["slot"])
          and _is_shape(out["shape"]), "output")
    esc = meta["escapes"]
    _need(isinstance(esc, dict) and all(
        re.fullmatch(r"0|[1-9][0-9]*", c) and isinstance(v, list) and len(v) == 4
        and _is_shape(v[0]) and (v[1] is None or _is_shape(v[1])) and _is_shape(v[2])
        and isinstance(v[3], dict) and all(type(x) in (bool, int) for x in v[3].values())
        for c, v in esc.items()), "escapes")
    _need(isinstance(meta["guards"], list), "guards")
    for j, g in enumerate(meta["guards"]):
        _check_guard(j, g, inputs)
    return meta


def _stopped(meta, n):
    """The rows recorded under no_grad (``Tape.stopped``): increasing, disjoint, non-empty
    [first, end) ranges of the n rows."""
    ranges, last = meta["stopped"], 0
    _need(isinstance(ranges, list) and len(ranges) <= n, "stopped")
    for r in ranges:
        _need(isinstance(r, list) and len(r) == 2 and all(map(_is_int, r))
              and last <= r[0] < r[1] <= n, f"stopped range {r!r}")
        last = r[1]
    return tuple((first, end) for first, end in ranges)


def _check_guard(j, g, inputs):
    where = f"guard {j}"
    _need(isinstance(g, dict) and set(g) == {"spec", "operands", "where", "result_type"}
          and _is_where(g["where"]) and isinstance(g["result_type"], str)
          and isinstance(g["spec"], list) and isinstance(g["operands"], list),
          f"{where}: fields")
    spec, ops = g["spec"], g["operands"]
    wrong = guard_calls.problem(spec, len(ops))
    _need(wrong is None, f"{where}: {wrong}")
    for op in ops:
        _need(isinstance(op, list) and len(op) == 2 and op[0] in ("slot", "leaf", "const")
              and _is_int(op[1]) and op[1] >= 0, f"{where}: operand {op!r}")
        if op[0] == "leaf":
            _need(op[1] < len(inputs) and "slot" in inputs[op[1]], f"{where}: operand {op!r}")


def _guard_costs(meta, files, R, size, budget):
    """Each guard's call, its work and memory from its operands' shapes (guard_calls), into
    `budget`: a replay runs every guard once."""
    shapes = meta["shapes"]
    for j, g in enumerate(meta["guards"]):
        dims = []
        for kind, x in g["operands"]:
            if kind == "slot":
                dims.append(tuple(shapes[R[x, 3]]) if R[x, 3] >= 0 else ())
            elif kind == "leaf":
                dims.append(tuple(meta["inputs"][x]["shape"]))
            else:
                c = files[f"guard_{j}_const_{x}"]
                _need(c.dtype.kind in "biuf", f"guard {j}: a constant of dtype {c.dtype}")
                dims.append(c.shape)
        try:
            work, held = guard_calls.cost(g["spec"], dims, files[f"guard_{j}_result"])
        except ValueError as e:
            _need(False, f"guard {j}: {e}")
        budget.run(work, f"guard {j}")
        budget.hold(held, f"guard {j}")


def _value_members(meta):
    """The names of the archive's value arrays that the metadata refers to."""
    names = {f"static_{i}" for i, item in enumerate(meta["inputs"]) if "static_array" in item}
    for j, g in enumerate(meta["guards"]):
        names.add(f"guard_{j}_result")
        names.update(f"guard_{j}_const_{x}" for kind, x in g["operands"] if kind == "const")
    return names


def _first(bad, what, rows=None):
    """Refuse at the first row flagged in `bad` (of `rows`, or of all rows); `what(s)` says
    what is wrong with row s."""
    if bad.any():
        i = int(np.argmax(bad))
        _need(False, what(int(rows[i]) if rows is not None else i))


def _row_tables():
    """Per opcode: its family's code, whether it takes operand b, whether it can replay (an
    escape needs its NumPy rule)."""
    needs_b = np.array([p.family in ("binary", "select", "scatter", "matmul") or (
        p.name in ESCAPES and ESCAPES[p.name].binary) for p in TABLE])
    replays = np.array([p.family != "escape" or p.name in ESCAPES for p in TABLE])
    return needs_b, replays


def _validate_rows(R, S, IA, meta, budget):
    """Every row against its family's layout, every side row used once; returns the size of
    every slot. Counts the rows' values and work into `budget`. The checks are array
    operations over all rows; only rows whose attributes need them (broadcasts, reductions,
    gathers, scatters, matmuls) are checked one by one."""
    is_array = np.array(meta["is_array"], dtype=bool)
    shapes = meta["shapes"]
    n, m = len(R), len(S)
    rows = np.arange(n)
    code, a, b, k = R[:, 0], R[:, 1], R[:, 2], R[:, 3]
    op, flags = code & OP_MASK, code >> FLAG_SHIFT
    _first((op >= len(TABLE)) | (flags < 0) | (flags > _ALL_FLAGS),
           lambda s: f"row {s}: opcode {code[s]}")
    fam = _FAMILY_CODE[op]
    arith = (fam == _FAMILIES.index("binary")) | (fam == _FAMILIES.index("select"))
    _first((flags != 0) & ~arith, lambda s: f"row {s}: flags on a {_FAMILIES[fam[s]]} row")
    _first((a < -1) | (a >= rows) | (b < -1) | (b >= rows),
           lambda s: f"row {s}: operand slots must be earlier rows")
    _first((k < -1) | (k >= m), lambda s: f"row {s}: side row {k[s]}")
    general = k >= 0  # (rows with a side row)
    gs, gk = rows[general], k[general]
    order = np.argsort(gk, kind="stable")
    again = np.zeros(len(gk), bool)
    again[order[1:]] = gk[order[1:]] == gk[order[:-1]]
    _first(again, lambda s: f"row {s}: side row {k[s]}", gs)
    nk, iat, fat = S[gk, 0], S[gk, 1], S[gk, 2]
    _first((nk < 0) | (nk > MAX_ELEMENTS) | (iat < 0) | (iat >= len(IA)) | (fat != 0),
           lambda s: f"row {s}: side row", gs)
    counts = np.array([math.prod(x) for x in shapes], dtype=np.int64)
    ndims = np.array([len(x) for x in shapes], dtype=np.int64)
    _first(counts[gk] != nk, lambda s: f"row {s}: shape", gs)
    _first(~is_array[gk] & (ndims[gk] != 0),
           lambda s: f"row {s}: a 0-d value of shape {shapes[k[s]]}", gs)
    size = np.ones(n, np.int64)
    size[gs] = nk
    budget.hold_rows(gs, nk)
    unused = np.flatnonzero(np.bincount(gk, minlength=m) == 0)
    _need(len(unused) == 0, f"side row(s) {unused[:5].tolist()} of no row")
    needs_b, replays = _row_tables()
    inputs = fam == _FAMILIES.index("input")
    _first(inputs & ((a != -1) | (b != -1)), lambda s: f"row {s}: an input row with operands")
    ops = ~inputs  # (rows of operations)
    _first(ops & ((a < 0) | ((b >= 0) != needs_b[op])),
           lambda s: f"row {s}: operands of {TABLE[op[s]].name}")
    _first(ops & ~replays[op], lambda s: f"row {s}: {TABLE[op[s]].name} rows cannot be replayed")
    zero_d = ~general | ~is_array[np.where(general, k, 0)] if m else ~general
    inline = ops & ~general  # 0-d rows of 0-d operands (the sweep's inline path)
    scalar = (fam == _FAMILIES.index("unary")) | (fam == _FAMILIES.index("binary"))
    _first(inline & ~(scalar & zero_d[np.maximum(a, 0)] & ((b < 0) | zero_d[np.maximum(b, 0)])),
           lambda s: f"row {s}: inline row")
    budget.run(np.count_nonzero(inline), "the inline rows")
    _check_families(R, S, IA, fam, op, flags, ops & general, size, budget)
    budget.hold(2 * max(1, int(size.max(initial=1))), "the sweeps' scratch")  # (2 per element
    # of the largest row)
    for i, item in enumerate(meta["inputs"]):
        if "slot" in item:
            slot, shape = item["slot"], item["shape"]
            _need(-1 <= slot < n, f"input {i}: slot out of range")
            if slot >= 0:
                _need(TABLE[op[slot]].name == "leaf" and size[slot] == math.prod(shape),
                      f"input {i}: slot {slot} is not a leaf row of its shape")
            if slot < 0 or zero_d[slot]:
                budget.hold(math.prod(shape), f"input {i}")  # (a buffer of its own)
    out = meta["output"]
    _need(0 <= out["slot"] < n and math.prod(out["shape"]) == size[out["slot"]], "output slot")
    budget.hold(size[out["slot"]], "output")
    for j, g in enumerate(meta["guards"]):
        for kind, x in g["operands"]:
            _need(kind != "slot" or x < n, f"guard {j}: slot {x} out of range")
    return size


def _check_families(R, S, IA, fam, op, flags, rows, size, budget):
    """The rows flagged in `rows` (operations with a side row) against their families: rows
    whose operands are their size (unary, plain binary rows, escapes) together, the others one
    by one."""
    a, b, k = R[:, 1], R[:, 2], R[:, 3]
    unary = rows & (fam == _FAMILIES.index("unary"))
    _first(unary & (size[a] != size),
           lambda s: f"row {s} ({TABLE[op[s]].name}): operand size")
    plain = rows & (fam == _FAMILIES.index("binary")) & (flags == 0)
    _first(plain & ((size[a] != size) | (size[b] != size)),
           lambda s: f"row {s} ({TABLE[op[s]].name}): operand size")
    alike = unary | plain | (rows & (fam == _FAMILIES.index("escape")))
    budget.run(size[alike].sum(), "the elementwise rows")
    for s in np.flatnonzero(rows & ~alike).tolist():
        _check_family(s, _FAMILIES[fam[s]], TABLE[op[s]].name, int(flags[s]), int(a[s]),
                      int(b[s]), int(size[s]), int(S[k[s], 1]), IA, size, R, budget)


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


def _check_family(s, fam, name, flags, a, b, n, iat, IA, size, R, budget):
    """Row s against its family's attributes; counts its loops' iterations into `budget`
    (every nest level, as the kernels in jit/ run them: an empty innermost loop still costs
    its outer ones)."""
    where = f"row {s} ({name})"
    work = n
    if fam == "unary":
        _need(size[a] == n, f"{where}: operand size")
    elif fam in ("binary", "select"):
        _need(not (flags & ONE_A and flags & MAP_A) and not (flags & ONE_B and flags & MAP_B),
              f"{where}: flags")
        _need(not flags & STRIDED or (fam == "binary" and flags & (MAP_A | MAP_B)),
              f"{where}: flags")
        head = _ints(IA, iat, 2, where) if (flags & (MAP_A | MAP_B) or fam == "select") else None
        nest = _strided_nest(IA, iat, n, where) if flags & STRIDED else None
        for k, (x, one, mapped, hi) in enumerate(((a, ONE_A, MAP_A, 0), (b, ONE_B, MAP_B, 1))):
            mp = None
            if flags & one:
                _need(size[x] == 1, f"{where}: a one-element operand")
            elif flags & mapped and (nest is None or int(head[hi]) != -1):
                # (a strided row written before the strides replaced its maps keeps them)
                mp = _ints(IA, int(head[hi]), n, where)
                _need(n == 0 or (mp.min() >= 0 and mp.max() < size[x]), f"{where}: index map")
            elif not flags & mapped:
                _need(size[x] == n, f"{where}: operand size")
            if nest is not None:  # the strides must read what the map (or the flags) reads
                if flags & mapped and mp is None:  # a broadcast read by its strides alone
                    _need(nest[k].max() < size[x], f"{where}: broadcast strides")
                    continue
                reads = np.zeros(n, np.int64) if flags & one else (
                    mp if mp is not None else np.arange(n))
                _need(np.array_equal(nest[k], reads), f"{where}: broadcast strides")
        if fam == "select":
            _ints(IA, iat + 2, n, where)
    elif fam in ("reduce", "scan"):
        P, Rr, Q = layouts.decode_reduce(_ints(IA, iat, 3, where), 0)
        _need(min(P, Rr, Q) >= 0 and P * Rr * Q == size[a], f"{where}: (P, R, Q)")
        _need(n == (P * Q if fam == "reduce" else P * Rr * Q), f"{where}: result size")
        work = P + P * Rr + P * Q + P * Rr * Q
        budget.hold(2 * Rr + Q, where)  # the kernels' scratch: a line of R (or Q) values
    elif fam == "gather":
        idx = _ints(IA, iat, n, where)
        _need(n == 0 or (idx.min() >= 0 and idx.max() < size[a]), f"{where}: indices")
    elif fam == "scatter":
        mm = int(_ints(IA, iat, 1, where)[0])
        _need(0 <= mm <= n, f"{where}: count")
        _ints(IA, iat + 1, 2 * mm, where)  # (in bounds)
        pos, win = layouts.decode_scatter(IA, iat)
        _need(mm == 0 or (pos.min() >= 0 and pos.max() < n), f"{where}: positions")
        _need(size[a] == n and size[b] == mm, f"{where}: operand sizes")
        # the forward writes each position's last winning write, the reverse gives every
        # winner the position's adjoint: a written position needs a winner, and only a
        # constant's writes may win twice (their adjoint is never read)
        won = np.bincount(pos[win != 0], minlength=n)
        _need(np.all(won[pos] >= 1), f"{where}: a written position with no winning write")
        _need(won.max(initial=0) <= 1 or R[b][0] == OPCODE["const"],
              f"{where}: a position with two winning writes")
        work = n + mm
        budget.hold(n, where)  # (the reverse's marks of written positions)
    elif fam == "matmul":
        B, M, K, N, ba, bb = layouts.decode_matmul(_ints(IA, iat, 6, where), 0)
        _need(min(B, M, K, N) >= 0 and ba in (0, 1) and bb in (0, 1), f"{where}: dimensions")
        _need(size[a] == (B if ba else 1) * M * K and size[b] == (B if bb else 1) * K * N
              and n == B * M * N, f"{where}: operand sizes")
        work = B * (1 + M + K + M * K + M * N + K * N + M * K * N)
    budget.run(work, where)


def _escape_work(name, a, b, y, params, where):
    """The loop iterations of an escape's NumPy rules; its shapes and parameters must be the
    rule's (``tape/escapes/``: its ``outputs`` checks them)."""
    esc = ESCAPES[name]
    try:
        _need(params == esc.full_params(params), f"{where}: escape parameters {params}")
        outs = esc.outputs(a, b, **params)
    except ValueError as e:
        _need(False, f"{where}: escape shapes {a}, {b}, {y} are not the rule's ({e})")
    _need(esc.row_shape(outs) == y, f"{where}: escape shapes {a}, {b}, {y} are not the rule's")
    return esc.work(a, b, **params)


def _variant(t, meta, files, hooks):
    shapes, statics, leaves, slots, args = [], [], [], [], []
    t.leaves = {}
    for i, item in enumerate(meta["inputs"]):
        if "slot" in item:
            shape = tuple(item["shape"])
            slot = item["slot"]
            if slot >= 0 and t.built.is_array[slot]:
                buf = t.av[t.side_of[slot]]
                _need(buf.shape == shape, "input buffer shape")
                leaf = leaf_sharing(buf)  # the row's own buffer: loading writes into it
            else:
                leaf = Tensor(np.zeros(shape), requires_grad=True)
            if slot >= 0:
                t.leaves[slot] = (leaf, 0)
            shapes.append(shape)
            statics.append(None)
            leaves.append(leaf)
            slots.append(slot if slot >= 0 else None)
            args.append(np.zeros(shape))
        else:
            static = files[f"static_{i}"] if "static_array" in item else item.get("static")
            shapes.append(None)
            statics.append(static)
            leaves.append(static)
            slots.append(None)
            args.append(static)
    out = meta["output"]
    guards = []
    for j, g in enumerate(meta["guards"]):
        ops = []
        for kind, x in g["operands"]:  # (checked by _check_guard and _validate_rows)
            if kind == "slot":
                ops.append(("slot", x))
            elif kind == "leaf":
                ops.append(("leaf", leaves[x]))
            else:
                ops.append(("const", files[f"guard_{j}_const_{x}"]))
        r = files[f"guard_{j}_result"]
        rt = g["result_type"]
        value = r if rt == "ndarray" else (r.item() if r.ndim == 0 else r)
        if rt in ("bool", "int", "float"):
            value = {"bool": bool, "int": int, "float": float}[rt](value)
        spec = tuple(g["spec"])
        if spec[0] == "values":  # (keyword arguments as the recording passed them: tuples)
            spec = (spec[0], spec[1], tuple((k, tuple(v) if isinstance(v, list) else v)
                                            for k, v in spec[2]))
        guards.append(guard_calls.bounded(Guard(spec, tuple(ops), value, g["where"]), r))
    return Variant.loaded(t, shapes, statics, leaves, slots, tuple(args),
                          result(np.zeros(tuple(out["shape"])), t, out["slot"]), guards, hooks)
