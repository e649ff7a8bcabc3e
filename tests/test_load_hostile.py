"""tape.load of hostile files: every loop bound, size and field a file controls is checked
before any kernel runs (issue 27, items 1-4). A file that would hang the process is run in a
subprocess with a generous timeout, so that a regression fails the test instead of hanging CI."""
import io
import json
import subprocess
import sys
import tracemalloc
import zipfile

import numpy as np
import pytest

import tape
from jit.table import OPCODE
from tape.replay import persist as _persist

HANG = 120  # seconds: a child that has not finished by then is stuck in a kernel

# The child loads the file and, if it loads, replays value and gradient at the saved arguments.
_CHILD = """
import sys
import numpy as np
import tape
try:
    cf = tape.load(sys.argv[1])
except ValueError as e:
    print("refused:", e)
    sys.exit(0)
args = np.load(sys.argv[2], allow_pickle=False)
try:
    cf.value_and_grad(*(args[f"a{i}"] for i in range(len(args.files))))
except Exception as e:
    print("replay raised:", type(e).__name__, e)
    sys.exit(0)
print("replayed")
"""


def _saved(f, *args):
    """The arrays of f's saved compiled tape, by member name."""
    buf = io.BytesIO()
    tape.compile(f, *args).save(buf)
    return dict(np.load(io.BytesIO(buf.getvalue()), allow_pickle=False))


def _attrs(files, name):
    """The IA offset of the first row of primitive `name`."""
    R, S = files["R"], files["S"]
    s = int(np.nonzero((R[:, 0] & 255) == OPCODE[name])[0][0])
    return int(S[R[s, 3], 1])


def _meta(files):
    return json.loads(bytes(files["meta"]).decode())


def _set_meta(files, meta):
    files["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)


def _load(files):
    buf = io.BytesIO()
    np.savez(buf, **files)
    buf.seek(0)
    return tape.load(buf)


def _child(tmp_path, files, args):
    """The child's report on the mutated file (fails the test if the child hangs)."""
    np.savez(tmp_path / "t.npz", **files)
    np.savez(tmp_path / "args.npz", **{f"a{i}": a for i, a in enumerate(args)})
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "t.npz"),
                            str(tmp_path / "args.npz")], capture_output=True, text=True,
                           timeout=HANG)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the replay of the loaded file did not finish in {HANG} s (a hang)")
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


# -- item 1: loop bounds that no size implies --------------------------------------------------

def test_matmul_with_an_empty_side_and_a_huge_batch_is_refused(tmp_path):
    x, c = np.ones((2, 2)), np.ones((2, 0))
    files = _saved(lambda x, c: np.sum(x @ c), x, c)
    files["IA"][_attrs(files, "matmul")] = 2 ** 62  # B: B*M*N = 0 for any B, B*M*K loops
    out = _child(tmp_path, files, (x, c))
    assert out.startswith("refused:") and "work" in out, out


@pytest.mark.parametrize("name", ["sum", "prod", "amax", "cumsum"])
def test_reduction_over_an_empty_axis_with_huge_counts_is_refused(tmp_path, name):
    x = np.ones((3, 0))
    fn = {"sum": np.sum, "prod": np.prod, "amax": np.max, "cumsum": np.cumsum}[name]
    files = _saved(lambda x: np.sum(fn(x, axis=0)) if name != "amax" else np.sum(x), x)
    if name == "amax":  # (np.max of an empty axis raises: its row comes from a (2, 0) view)
        files = _saved(lambda x: np.sum(np.max(x, axis=1)), np.ones((0, 3)))
        x = np.ones((0, 3))
    iat = _attrs(files, name)
    P, R, Q = files["IA"][iat:iat + 3]
    assert P * R * Q == 0
    # P * R * Q stays 0 (an empty operand), but the kernels loop P * R times (Q = 0), or
    # allocate a scratch line of R or Q values (P = 0)
    files["IA"][iat:iat + 3] = (2 ** 31, 2 ** 31, 0) if Q == 0 else (0, 2 ** 31, 2 ** 31)
    out = _child(tmp_path, files, (x,))
    assert out.startswith("refused:"), out


# -- item 2: the total-size cap ----------------------------------------------------------------

def test_an_empty_input_loads(tmp_path):
    """The issue's file: every row empty (the old size check read a total of 0 as too many)."""
    tape.compile(lambda x: x * 2.0, np.zeros(0)).save(tmp_path / "z.npz")
    assert tape.load(tmp_path / "z.npz")(np.zeros(0)).shape == (0,)
    cf = tape.compile(lambda x: np.sum(x * 2.0), np.zeros(0))
    cf.save(tmp_path / "s.npz")
    v, g = tape.load(tmp_path / "s.npz").value_and_grad(np.zeros(0))
    assert v == 0.0 and g.shape == (0,)


def test_the_total_size_cap_applies(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    x = rng.normal(size=400)
    files = _saved(lambda x: np.sum(np.sin(x) * np.cos(x)), x)
    assert _load(files).value_and_grad(x)[0] == pytest.approx(np.sum(np.sin(x) * np.cos(x)))
    archive = sum(a.size for a in files.values())
    # the archive fits, and each row of 400; the rows together (4 x 400 and scratch) do not
    monkeypatch.setattr(_persist, "MAX_ELEMENTS", archive + 1000)
    with pytest.raises(ValueError, match="elements.*MAX_ELEMENTS"):
        _load(files)


def test_unused_huge_side_rows_are_refused():
    """The issue's 2.7 KB file: three side rows of 2**29 elements (or of half the limit) that no
    row refers to."""
    files = _saved(lambda x: np.sum(x * 2.0), np.ones(3))
    meta = _meta(files)
    S = files["S"]
    big = min(2 ** 29, _persist.MAX_ELEMENTS // 2)
    files["S"] = np.concatenate([S, np.tile([[big, 0, 0]], (3, 1))])
    meta["is_array"] += [True] * 3
    meta["shapes"] += [[big]] * 3
    _set_meta(files, meta)
    with pytest.raises(ValueError, match="side row"):
        _load(files)


# -- item 3: the archive is read within limits -------------------------------------------------

def _npy_header(shape, descr="<f8"):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False,
                                               "shape": shape})
    return buf.getvalue()


def test_an_unknown_member_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "t.npz"
    np.savez(path, **_saved(lambda x: np.sum(x * 2.0), np.ones(3)))
    big = 64 << 20
    with zipfile.ZipFile(path, "a") as z:  # 64 MiB of data behind a valid header
        z.writestr("extra.npy", _npy_header((big // 8,)) + bytes(big))
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="unknown member 'extra.npy'"):
            tape.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < big // 8, peak


def test_a_member_declaring_a_huge_shape_is_refused_before_its_data(tmp_path):
    files = _saved(lambda x: np.sum(x * 2.0), np.ones(3))
    path = tmp_path / "t.npz"
    np.savez(path, **{k: v for k, v in files.items() if k != "IA"})
    with zipfile.ZipFile(path, "a") as z:  # 8 TiB declared, 16 bytes present
        z.writestr("IA.npy", _npy_header((2 ** 40,), "<i8") + bytes(16))
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="IA.*MAX_ELEMENTS"):
            tape.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 24, peak


def test_a_member_shorter_than_its_header_is_refused(tmp_path):
    files = _saved(lambda x: np.sum(x * 2.0), np.ones(3))
    path = tmp_path / "t.npz"
    np.savez(path, **{k: v for k, v in files.items() if k != "IA"})
    with zipfile.ZipFile(path, "a") as z:  # 1000 values declared, 2 present
        z.writestr("IA.npy", _npy_header((1000,), "<i8") + bytes(16))
    with pytest.raises(ValueError, match="IA.*size"):
        tape.load(path)


def test_object_and_pickled_members_are_refused(tmp_path):
    files = _saved(lambda x: np.sum(x * 2.0), np.ones(3))
    path = tmp_path / "t.npz"
    np.savez(path, **{k: v for k, v in files.items() if k != "FA"})
    with zipfile.ZipFile(path, "a") as z:
        z.writestr("FA.npy", _npy_header((1,), "|O") + b"\x80\x04N.")
    with pytest.raises(ValueError, match="FA.*dtype"):
        tape.load(path)


# -- item 4: every field before any kernel runs ------------------------------------------------

def test_prod_with_an_empty_line_and_a_huge_reduced_axis_is_refused():
    files = _saved(lambda x: np.sum(np.prod(x, axis=0)), np.ones((3, 0)))
    iat = _attrs(files, "prod")
    files["IA"][iat:iat + 3] = (1, 2 ** 40, 0)  # Q = 0: a scratch line of 2**40 values
    with pytest.raises(ValueError, match=r"row \d+ \(prod\)"):
        _load(files)


def test_argnums_beyond_the_inputs_are_refused():
    files = _saved(lambda x: np.sum(x * 2.0), np.ones(3))
    meta = _meta(files)
    meta["argnums"] = 3
    _set_meta(files, meta)
    with pytest.raises(ValueError, match="argnums"):
        _load(files)
    meta["argnums"] = [0, 1]
    _set_meta(files, meta)
    with pytest.raises(ValueError, match="argnums"):
        _load(files)


def test_argnums_of_a_static_input_is_refused():
    files = _saved(lambda x, i: np.sum(x[i] * 2.0), np.ones(3), np.array([0, 2]))
    meta = _meta(files)
    meta["argnums"] = 1
    _set_meta(files, meta)
    with pytest.raises(ValueError, match="argnums"):
        _load(files)


def test_escape_shapes_must_follow_the_rule():
    a = np.eye(3) + 0.1
    files = _saved(lambda a: np.sum(np.linalg.inv(a)), a)
    meta = _meta(files)
    (c,) = meta["escapes"]
    meta["escapes"][c] = [[1, 9], None, [9], {}]  # the same sizes, not an inverse's shapes
    _set_meta(files, meta)
    with pytest.raises(ValueError, match=r"\(inv\).*shapes"):
        _load(files)


def test_guards_are_checked_on_load():
    files = _saved(lambda x: np.sum(x * 2.0) if np.sum(x) > 0 else np.sum(x), np.ones(3))
    meta = _meta(files)
    (g,) = meta["guards"]
    g["operands"] = g["operands"][:1]  # a comparison of one operand
    _set_meta(files, meta)
    with pytest.raises(ValueError, match="guard 0"):
        _load(files)
    files = _saved(lambda x: np.sum(x * 2.0) if np.sum(x) > 0 else np.sum(x), np.ones(3))
    del files["guard_0_result"]
    with pytest.raises(ValueError, match="guard_0_result"):
        _load(files)


def test_a_scatter_whose_winners_are_not_the_last_writes_is_refused():
    def f(x):
        y = x * 1.0
        y[np.array([1, 1])] = x[:2] * 3.0  # two writes at 1: the second one wins
        return np.sum(y ** 2)

    files = _saved(f, np.arange(1.0, 5.0))
    iat = _attrs(files, "scatter")
    IA = files["IA"]
    m = int(IA[iat])
    assert m == 2 and list(IA[iat + 1 + m:iat + 1 + 2 * m]) == [0, 1]
    IA[iat + 1 + m] = 1  # both marked as winners: the forward keeps one, the reverse both
    with pytest.raises(ValueError, match="scatter"):
        _load(files)


def _cut_mean(x):
    with tape.no_grad():
        mu = np.mean(x)
    return np.sum(x * mu)


@pytest.mark.parametrize("ranges", [[[0, 99]], [[2, 1]], [[0, 2], [1, 3]], [[-1, 2]], [[1, 1]],
                                    [["0", 2]], [[0, 2, 3]], {"0": 2}])
def test_stopped_ranges_out_of_order_or_out_of_range_are_refused(ranges):
    files = _saved(_cut_mean, np.ones(3))
    meta = _meta(files)
    assert meta["stopped"]  # (the no_grad block's rows)
    meta["stopped"] = ranges
    _set_meta(files, meta)
    with pytest.raises(ValueError, match="stopped"):
        _load(files)
