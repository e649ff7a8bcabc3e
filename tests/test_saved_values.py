"""saved_tensors_hooks: pack once per saved value at record time, unpack once at backward."""
import os

import numpy as np
import pytest

import tape

rng = np.random.default_rng(0)
W0 = rng.normal(size=(50, 50)) / 7.0
X0 = rng.normal(size=50)


def model(w, steps=5):
    h = tape.tensor(X0)
    for _ in range(steps):
        h = np.tanh(w @ h) + 0.1 * h
    return (h * h).sum()


def reference_grad():
    w = tape.tensor(W0, requires_grad=True)
    model(w).backward()
    return w.grad


def _array_bytes(t):
    return sum(a.nbytes for a in t.av if a is not None)


def test_pack_and_unpack_run_once_per_saved_value_and_gradients_are_exact():
    packed, unpacked = [], []

    def pack(a):
        packed.append(len(packed))
        return (packed[-1], a.copy())

    def unpack(p):
        unpacked.append(p[0])
        return p[1]

    w = tape.tensor(W0, requires_grad=True)
    with tape.graph.saved_tensors_hooks(pack, unpack):
        loss = model(w)
    t = loss._tape
    assert len(packed) == len(t.packed) > 0  # one pack per saved array value
    loss.backward()
    np.testing.assert_array_equal(w.grad, reference_grad())
    # one unpack per value the backward reads, never twice: every packed value but one constant
    # that only an add consumes (add's reverse rule reads no value)
    assert len(unpacked) == len(set(unpacked)) == len(packed) - 1
    assert set(unpacked) <= set(packed)


def test_save_on_disk_moves_saved_values_out_of_memory(tmp_path):
    w = tape.tensor(W0, requires_grad=True)
    with tape.graph.save_on_disk(tmp_path):
        loss = model(w, steps=20)
    t = loss._tape
    files = os.listdir(tmp_path)
    assert len(files) == len(t.packed) > 20
    held = _array_bytes(t)
    w2 = tape.tensor(W0, requires_grad=True)
    plain_loss = model(w2, steps=20)
    # the tape now holds only the leaf (referenced, not saved); without the hooks it also holds
    # every intermediate
    assert held == W0.nbytes
    assert _array_bytes(plain_loss._tape) - W0.nbytes > 20 * 3 * X0.nbytes
    loss.backward()
    np.testing.assert_allclose(w.grad, tape.grad(lambda w: model(w, steps=20))(W0), rtol=1e-14)
    del loss, t
    import gc

    gc.collect()
    assert os.listdir(tmp_path) == []  # files go with the tape


def test_float16_compression_gives_approximate_gradients():
    w = tape.tensor(W0, requires_grad=True)
    with tape.graph.saved_tensors_hooks(lambda a: a.astype(np.float16),
                                        lambda p: p.astype(np.float64)):
        loss = model(w)
    loss.backward()
    ref = reference_grad()
    err = np.abs(w.grad - ref).max() / np.abs(ref).max()
    assert 0 < err < 1e-2


def test_bad_unpack_is_a_clear_error():
    w = tape.tensor(W0, requires_grad=True)
    with tape.graph.saved_tensors_hooks(lambda a: a, lambda p: p[:1]):
        loss = model(w)
    with pytest.raises(RuntimeError, match="unpack returned"):
        loss.backward()


def test_hooks_only_apply_inside_the_context():
    calls = []
    with tape.graph.saved_tensors_hooks(lambda a: calls.append(1) or a, lambda p: p):
        pass
    w = tape.tensor(W0, requires_grad=True)
    model(w).backward()
    assert calls == []


@pytest.mark.parametrize("budget", [1 << 15, 1 << 30])
def test_backward_unpacks_segment_by_segment_within_a_budget(monkeypatch, budget):
    """Packed values are unpacked just before the part of the sweep that reads them and dropped
    once it has passed: with a small budget, few are alive at once; gradients are unchanged."""
    import weakref

    import tape.reverse.backward

    monkeypatch.setattr(tape.reverse.backward, "UNPACK_BUDGET", budget)
    alive, peak = set(), [0]

    def unpack(p):
        a = p.copy()
        key = id(a)
        alive.add(key)
        weakref.finalize(a, alive.discard, key)
        peak[0] = max(peak[0], len(alive))
        return a

    x0 = np.linspace(-1.0, 1.0, 1000)  # 8 kB per saved value

    def f(w):
        h = w
        for _ in range(40):
            h = np.tanh(h * w) + 0.1 * h
        return (h * h).sum()

    w = tape.tensor(x0, requires_grad=True)
    with tape.graph.saved_tensors_hooks(lambda a: a.copy(), unpack):
        loss = f(w)
    loss.backward()
    np.testing.assert_array_equal(w.grad, tape.grad(f)(x0))
    assert not alive
    if budget < 1 << 20:
        assert peak[0] <= 6  # 32 kB: four values, plus the operands of the row being swept
    else:
        assert peak[0] >= 80  # everything at once


def test_save_on_disk_default_directory_outlives_the_context_object():
    import gc

    def forward():
        w = tape.tensor(W0, requires_grad=True)
        with tape.graph.save_on_disk():  # a temporary directory, owned by this context object
            loss = model(w)
        return w, loss

    w, loss = forward()
    gc.collect()  # the context object is gone; its directory must not be
    loss.backward()
    np.testing.assert_array_equal(w.grad, reference_grad())


# ---------------------------------------------------------------------------------------------
# save_on_disk in a shared directory: exclusive private files, checked when read back


def _record_on_disk(directory):
    w = tape.tensor(W0, requires_grad=True)
    with tape.graph.save_on_disk(directory):
        loss = model(w)
    return w, loss


def test_save_on_disk_files_are_private_and_unpredictable(tmp_path):
    """Reproducer: files were 0644, named saved-{pid}-{id}-{counter}.npy."""
    _, loss = _record_on_disk(tmp_path)
    names = os.listdir(tmp_path)
    assert len(names) == len(loss._tape.packed) > 1
    for name in names:
        assert name.startswith("tapejit-") and len(name) == len("tapejit-.npy") + 32
        st = os.lstat(tmp_path / name)
        assert st.st_mode & 0o777 == 0o600
    assert len(set(names)) == len(names)


def test_save_on_disk_never_writes_through_a_planted_name(tmp_path, monkeypatch):
    """Reproducer: np.save followed a symlink planted at the next name (and overwrote its
    target). A file or symlink already at a name makes the exclusive create fail: the value
    goes to a new name, the planted path and its target stay as they were."""
    import secrets

    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    shared = tmp_path / "shared"
    shared.mkdir()
    names = iter(["a" * 32, "b" * 32] + [f"{i:032x}" for i in range(1000)])
    monkeypatch.setattr(secrets, "token_hex", lambda n: next(names))
    os.symlink(victim, shared / f"tapejit-{'a' * 32}.npy")
    (shared / f"tapejit-{'b' * 32}.npy").write_bytes(b"planted")
    w, loss = _record_on_disk(shared)
    assert victim.read_bytes() == b"keep me"
    assert (shared / f"tapejit-{'b' * 32}.npy").read_bytes() == b"planted"
    loss.backward()
    np.testing.assert_array_equal(w.grad, reference_grad())


@pytest.mark.parametrize("change", ["data", "truncate", "header", "delete", "symlink"])
def test_save_on_disk_detects_a_file_changed_before_the_backward(tmp_path, change):
    """Reproducer: a saved file replaced between forward and backward silently changed the
    gradient. Every change is an error naming the file. (Every file is changed: the backward
    reads all but the values no rule needs, in an order the random names do not tell.)"""
    w, loss = _record_on_disk(tmp_path)
    for path in [tmp_path / n for n in os.listdir(tmp_path)]:
        a = np.load(path)
        if change == "data":  # the same size and header: only the checksum sees it
            os.remove(path)
            np.save(path, a * 1.5)
        elif change == "truncate":
            with open(path, "r+b") as fh:
                fh.truncate(os.path.getsize(path) - 8)
        elif change == "header":  # the same bytes of data, another shape
            os.remove(path)
            np.save(path, a.reshape(-1, 1) if a.ndim == 1 else a.reshape(-1))
        elif change == "delete":
            os.remove(path)
        else:  # a symlink to a file with the same contents is not the file written
            other = tmp_path / (path.name + ".elsewhere")
            os.rename(path, other)
            os.symlink(other, path)
    with pytest.raises(RuntimeError, match=r"save_on_disk: the saved value of shape \(50,\) in "
                                           r".*tapejit-[0-9a-f]{32}\.npy was changed or replaced"):
        loss.backward()


def test_save_on_disk_files_go_with_a_dropped_loss_or_a_failed_forward(tmp_path):
    """Reproducer: the files of a loss dropped without backward, or of a forward that raised,
    stayed until this thread's tape sealed (its next backward)."""
    _, loss = _record_on_disk(tmp_path)
    assert os.listdir(tmp_path)
    del loss
    assert os.listdir(tmp_path) == []

    def failing(w):
        h = np.tanh(w @ X0)
        np.tanh(w @ h)
        raise KeyError("failed forward")

    w = tape.tensor(W0, requires_grad=True)
    with pytest.raises(KeyError):
        with tape.graph.save_on_disk(tmp_path):
            failing(w)
    assert os.listdir(tmp_path) == []
    # recording goes on as usual after the block
    w, loss = _record_on_disk(tmp_path)
    loss2 = loss * 2.0
    loss2.backward()
    np.testing.assert_array_equal(w.grad, 2.0 * reference_grad())
    del loss, loss2
    assert os.listdir(tmp_path) == []
