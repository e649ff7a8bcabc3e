"""Every field of saved tapes, set to hostile values: run by tests/test_load_fuzz.py (a sample)
and by `make fuzz-load` (more), in a subprocess.

Tapes of several shapes (matmuls, reductions and scans, gathers and scatters, escapes, guards,
strided broadcasts, empty operands) are saved; each case changes one field (an element of an array member, a
leaf or a container of the metadata, a member's dtype, shape or presence) and loads the file.
A case must be refused by ``tape.load`` with a ValueError, or load and replay to a value and a
gradient that agree: the same value from ``cf(x)``, and the gradient's directional derivative
equal to central differences of the replayed value and to ``cf.jvp`` (the tangent kernels). A case that runs longer than TIMEOUT
seconds ends the process (faulthandler's watchdog thread needs no GIL: it works while a kernel
spins), naming the case on stdout first. (tests/_fuzz_saved_tape.py applies random bursts of
mutations to one tape and checks only that nothing crashes.)

Besides the mutations, the directed files of issue 43 (tests/test_load_bounds.py: a bzip2
member, deflated and stored unused rows, guards calling NumPy with keyword arguments, a replay
beyond MAX_ELEMENTS) are cases too. Every ``tape.load`` must refuse or load within
LOAD_SECONDS and LOAD_MEMORY more than the process held before it (its peak resident size,
reset per case where Linux allows).

Usage: python tests/_fuzz_load.py CASES SEED [LOAD_SECONDS] (CASES 0: every case). Prints one
line per problem and a last line "cases <n> refused <r> replayed <p> raised <e> problems <q>".
"""
import faulthandler
import io
import json
import sys
import time
import zipfile

import numpy as np

import tape

_MISFIT = "do not fit it"  # (a file whose inputs or statics are not these arguments)
TIMEOUT = 60  # seconds per case: far beyond any case's time, a hang if reached
LOAD_SECONDS = 2.0  # per tape.load (the bound; a slow machine may pass more)
LOAD_MEMORY = 512 << 20  # bytes per tape.load, above what the process held before


# -- the tapes --------------------------------------------------------------------------------

def matmuls(x, c):
    return np.sum(np.tanh(x @ c)) + np.sum((x[None] @ c[None])[0] ** 2)


def reductions(x):
    return (np.sum(np.prod(x, axis=0)) + np.sum(np.max(x, axis=1)) + np.sum(np.min(x, axis=0))
            + np.sum(np.cumsum(x, axis=1) ** 2) + np.sum(np.cumprod(x, axis=0)))


def gathers(x, idx):
    y = np.tanh(x[idx]) * x[:3]
    z = x * 1.0
    z[np.array([1, 1, 4])] = y  # a scatter: the last write wins
    return np.sum(np.where(z > 0.1, z, -z) ** 2)


def escapes(w, X):
    a = np.diag(w[:3] * w[:3] + 1.0) + 0.1
    return (np.linalg.slogdet(a)[1] + np.sum(np.linalg.inv(a)) + np.sum(np.linalg.solve(a, w[:3]))
            + np.sum(np.tanh(X @ w) ** 2))  # (40, 30) @ (30,): a BLAS escape


def guards(x):
    y = x * 2.0 if np.sum(x) > 0 else -x
    return np.sum(np.sin(y)) * np.max(x).item()


def broadcasts(w, c):
    return np.sum(np.tanh(w[:4, None] - w[None, :5]) * c + (w[:4, None] * w[None, :5]) ** 2)


def empties(x, c):  # empty operands: loops whose bounds no size implies (a batch, a line)
    return (np.sum(np.tanh(x) @ c) + np.sum(np.prod(c, axis=0)) + np.sum(np.cumsum(c, axis=1))
            + np.sum(x ** 2))


def _tapes():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 30))
    return [(matmuls, (rng.normal(size=(3, 4)), rng.normal(size=(4, 2)))),
            (reductions, (rng.uniform(0.5, 1.5, size=(3, 4)),)),
            (gathers, (rng.normal(size=6), np.array([0, 5, 2]))),
            (escapes, (rng.normal(size=30), X)),
            (guards, (np.abs(rng.normal(size=5)) + 0.5,)),
            (broadcasts, (rng.normal(size=6), rng.normal(size=(4, 5)))),
            (empties, (rng.normal(size=(2, 2)), np.ones((2, 0))))]


def _saved(f, args):
    buf = io.BytesIO()
    tape.compile(f, *args).save(buf)
    return dict(np.load(io.BytesIO(buf.getvalue()), allow_pickle=False))


# -- the fields and their hostile values ------------------------------------------------------

_DROP = "<drop>"


def _ints(v):
    return [-1, 0, 1, v - 1, v + 1, 2 * v, 2 ** 31, 2 ** 62, -(2 ** 62)]


def _json_values(v):
    if isinstance(v, bool):
        return [not v, 0, None]
    if isinstance(v, int):
        return [-1, v - 1, v + 1, 2 ** 62, None, True, "0", 1.5]
    if isinstance(v, float):
        return [float("nan"), -v, 0, None]
    if isinstance(v, str):
        return ["", v + "x", None, 0]
    if isinstance(v, list):
        return [v[:-1], v + v[-1:], [], None, v[::-1]] if v else [[0], None, {}]
    if isinstance(v, dict):
        return [_DROP + k for k in v] + [{**v, "x": 1}, None, []]
    return [0, [], "x"]


def _json_paths(x, path=()):
    """Every leaf and container of the metadata, with its path."""
    yield path, x
    if isinstance(x, list):
        for i, y in enumerate(x):
            yield from _json_paths(y, path + (i,))
    elif isinstance(x, dict):
        for k, y in x.items():
            yield from _json_paths(y, path + (k,))


def cases(files):
    """(description, field, value) for every field of one saved tape."""
    meta = json.loads(bytes(files["meta"]).decode())
    for path, v in _json_paths(meta):
        for new in _json_values(v):
            yield f"meta{list(path)} = {new!r}", ("meta", path), new
    for name in sorted(files):
        if name == "meta":
            continue
        a = files[name]
        for j, v in enumerate(a.reshape(-1).tolist()):
            news = _ints(v) if a.dtype.kind in "biu" else [np.nan, np.inf, 0.0, -v, 1e308]
            for new in dict.fromkeys(x for x in news if x != v):
                yield f"{name}.flat[{j}] = {new!r}", ("elem", name, j), new
        for new in ("drop", "int32", "float32", "int64", "float64", "2d", "1d", "empty"):
            yield f"member {name}: {new}", ("member", name), new
    yield "an extra member", ("member", "extra"), "add"


def mutated(files, field, new):
    files = {k: v.copy() for k, v in files.items()}
    kind, name = field[0], field[1]
    if kind == "meta":
        meta = json.loads(bytes(files["meta"]).decode())
        top = {"meta": meta}  # (so that the whole metadata is a field too)
        *head, last = ("meta",) + field[1]
        box = top
        for p in head:
            box = box[p]
        if isinstance(new, str) and new.startswith(_DROP):
            del box[last][new[len(_DROP):]]
        else:
            box[last] = new
        meta = top["meta"]
        files["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    elif kind == "elem":
        a = files[name].reshape(-1)
        try:
            a[field[2]] = new
        except OverflowError:  # (a uint8 member: wrap as a writer of such a file would)
            a[field[2]] = new % 256
        files[name] = a.reshape(files[name].shape)
    elif new == "drop":
        del files[name]
    elif new == "add":
        files["extra"] = np.zeros(3)
    elif new in ("int32", "float32", "int64", "float64"):
        files[name] = files[name].astype(new)
    elif new == "2d":
        files[name] = files[name].reshape(1, -1)
    elif new == "1d":
        files[name] = files[name].reshape(-1)
    else:
        files[name] = files[name].reshape(-1)[:0]
    buf = io.BytesIO()
    np.savez(buf, **files)
    buf.seek(0)
    return buf


# -- one case ---------------------------------------------------------------------------------

def _resident():
    """(current, peak) resident bytes of this process, or None where /proc does not say."""
    try:
        with open("/proc/self/status") as f:
            fields = dict(line.split(":", 1) for line in f)
        return int(fields["VmRSS"].split()[0]) << 10, int(fields["VmHWM"].split()[0]) << 10
    except (OSError, KeyError, ValueError):
        return None


def _reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # (resets VmHWM to the current resident size)
    except OSError:
        pass


def measured_load(buf):
    """tape.load(buf), its outcome (the tape or the exception), seconds and peak bytes added."""
    _reset_peak()
    before = _resident()
    t = time.perf_counter()
    try:
        out = tape.load(buf)
    except Exception as e:  # noqa: BLE001 - the caller sorts the outcomes
        out = e
    seconds = time.perf_counter() - t
    after = _resident()
    grown = after[1] - before[0] if before and after else 0
    return out, seconds, grown


def check(buf, args, rng):
    """'refused', 'raised' or 'replayed' for a mutated file, or a problem (a string that says
    what is wrong)."""
    cf, seconds, grown = measured_load(buf)
    if seconds > LOAD_SECONDS or grown > LOAD_MEMORY:
        return f"problem: load took {seconds:.2f} s and {grown >> 20} MiB more"
    if isinstance(cf, ValueError):
        return "refused" if str(cf).startswith("tape.load:") else f"problem: load said {cf}"
    if isinstance(cf, Exception):  # a load error other than ValueError is a problem
        return f"problem: load raised {type(cf).__name__}: {cf}"
    try:
        v, g = cf.value_and_grad(*args)
    except RuntimeError as e:  # the file's guards or inputs differ from these arguments
        return "raised" if _MISFIT in str(e) or "guard" in str(e) else f"problem: replay " \
            f"raised RuntimeError: {e}"
    except np.linalg.LinAlgError:  # a matrix the changed values make singular, as in NumPy
        return "raised"
    except Exception as e:  # noqa: BLE001 - checked at load, or a problem
        return f"problem: replay raised {type(e).__name__}: {e}"
    nums = (cf.argnums,) if isinstance(cf.argnums, int) else cf.argnums  # (argnums mutated too)
    gs = (g,) if isinstance(cf.argnums, int) else g
    for i, gi in zip(nums, gs):
        if np.shape(gi) != np.shape(args[i]):
            return f"problem: gradient of shape {np.shape(gi)} for an input of " \
                f"{np.shape(args[i])}"
    try:
        v2 = cf(*args)
    except RuntimeError:
        return "raised"
    if not (v2 == v or (np.isnan(v) and np.isnan(v2))):
        return f"problem: cf(x) = {v2!r}, value_and_grad's value {v!r}"
    if not nums or not (np.isfinite(v) and np.all(np.isfinite(gs[0]))):
        return "replayed"
    i = nums[0]
    u = rng.normal(size=np.shape(args[i]))
    h = 1e-6
    try:
        fd = (cf(*args[:i], args[i] + h * u, *args[i + 1:])
              - cf(*args[:i], args[i] - h * u, *args[i + 1:])) / (2 * h)
    except RuntimeError:  # a guard that the step crosses
        return "replayed"
    gu = float(np.sum(gs[0] * u))
    if np.isfinite(fd) and abs(fd - gu) > 1e-4 * (1.0 + abs(fd) + abs(gu)) * (1.0 + abs(v)):
        return f"problem: gradient . u = {gu!r}, central differences {fd!r}"
    try:  # forward mode (the tangent kernels) must agree with reverse mode
        jv = cf.jvp(args, tuple(u if j == 0 else np.zeros(np.shape(args[k]))
                                for j, k in enumerate(nums)))[1]
    except RuntimeError:
        return "replayed"
    except Exception as e:  # noqa: BLE001 - checked at load, or a problem
        return f"problem: jvp raised {type(e).__name__}: {e}"
    if abs(jv - gu) > 1e-8 * (1.0 + abs(jv) + abs(gu)) * (1.0 + abs(v)):
        return f"problem: gradient . u = {gu!r}, jvp {jv!r}"
    return "replayed"


def directed():
    """(name, file bytes, arguments) of the directed files of tests/test_load_bounds.py."""
    import test_load_bounds as bounds

    from tape.replay import persist

    x = np.ones(3)
    guards = [("histogram", (("bins", 1 << 27),)), ("bincount", (("minlength", 1 << 27),)),
              ("unique", (("return_counts", True),)), ("argsort", (("kind", "stable"),)),
              ("argmax", (("axis", 0),)), ("round", (("decimals", 10 ** 9),)),
              ("isclose", ()), ("searchsorted", (("side", "right"),))]
    big = persist.MAX_ELEMENTS // 3
    return ([("bzip2 member", bounds.bzip2_bomb(256), (x,)),
             ("2**22 unused rows, deflated", bounds.unused_rows(1 << 22), (x,)),
             ("2**20 unused rows, stored", bounds.unused_rows(1 << 20, compressed=False), (x,)),
             (f"sum(x * 2.0), x of {big}", bounds.large_rows(big), (np.ones(1),)),
             ("sum(x * 2.0), x of 1000", bounds.large_rows(1000), (np.ones(1000),))]
            + [(f"guard np.{name}{kwargs}", bounds.guard_call(name, kwargs), (x,))
               for name, kwargs in guards])


def main(n, seed):
    faulthandler.enable()
    rng = np.random.default_rng(seed)
    work = []
    for f, args in _tapes():
        files = _saved(f, args)
        work += [(f.__name__, files, args, c) for c in cases(files)]
    for name, data, args in directed():
        print(f"case directed: {name}", flush=True)
        out = check(io.BytesIO(data), args, rng)
        kind = out.split(":")[0]
        print(f"{'PROBLEM' if kind == 'problem' else 'directed'} {name}: {out[:200]}",
              flush=True)
        if kind == "problem":
            return 1
    order = rng.permutation(len(work))
    if n:
        order = order[:n]
    counts = {"refused": 0, "replayed": 0, "raised": 0, "problem": 0}
    for i in order:
        name, files, args, (what, field, new) = work[i]
        print(f"case {name}: {what}", flush=True)  # (the last line before a hang names it)
        faulthandler.dump_traceback_later(TIMEOUT, exit=True)
        out = check(mutated(files, field, new), args, rng)
        faulthandler.cancel_dump_traceback_later()
        kind = out.split(":")[0]
        counts[kind] += 1
        if kind == "problem":
            print(f"PROBLEM {name}: {what}: {out}", flush=True)
    print("cases", len(order), " ".join(f"{k} {c}" for k, c in counts.items()), flush=True)
    return counts["problem"]


if __name__ == "__main__":
    if len(sys.argv) > 3:
        LOAD_SECONDS = float(sys.argv[3])
    sys.exit(1 if main(int(sys.argv[1]), int(sys.argv[2])) else 0)
