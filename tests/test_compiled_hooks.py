"""Hooks in compiled replay: each kind is run as eager runs it, or refused at recording."""
import numpy as np
import pytest

import tape
import tape.numpy as tnp

W = np.array([[1.0, -0.5, 0.25], [0.5, 2.0, -1.0], [0.0, 1.5, 1.0]])


def _line(fn, text):
    """ "file:line" of the line of fn's source holding `text` (the refusal names it)."""
    import inspect

    lines, first = inspect.getsourcelines(fn)
    k = next(i for i, s in enumerate(lines) if text in s)
    return f"{inspect.getsourcefile(fn)}:{first + k}"


def test_saved_tensors_hooks_inside_f_is_refused_with_its_line():
    def f(x):
        with tape.graph.saved_tensors_hooks(lambda a: a, lambda a: a):
            y = tnp.sin(x * 2.0)  # packed
        return tnp.sum(y * y)

    with pytest.raises(NotImplementedError, match="saved_tensors_hooks") as e:
        tape.compile(f, np.ones(3))
    assert _line(f, "# packed") in str(e.value)


@pytest.mark.parametrize("escape", [False, True])
def test_saved_tensors_hooks_around_a_replay_pack_and_unpack_as_eager(escape):
    """Pack at the replay's forward, unpack what the backward reads, in eager's order; the
    sweep reads what unpack returned (float16 here: the gradient is eager's approximate one)."""
    log = []

    def pack(a):
        log.append(("pack", a.shape))
        return a.astype(np.float16)

    def unpack(p):
        log.append(("unpack", p.shape))
        return p.astype(np.float64)

    def f(x):
        y = tnp.sin(x * 2.0)
        z = (y @ W) * y if escape else tnp.exp(y) * y
        return tnp.sum(z * z) + tnp.sum(tnp.sin(x) * (W[0] * 1.1))  # (not float16)

    cf = tape.compile(f, np.ones(3))
    for x in (np.array([0.3, -0.7, 1.1]), np.array([0.1, 0.2, 0.3])):
        log.clear()
        with tape.graph.saved_tensors_hooks(pack, unpack):
            r = cf.value_and_grad(x)
            g = cf.grad(x)
        seen = list(log)
        log.clear()
        with tape.graph.saved_tensors_hooks(pack, unpack):
            e = tape.value_and_grad(f)(x)
            tape.grad(f)(x)
        assert seen == log and ("unpack", (3,)) in seen
        _same(r, e)
        _same(g, e[1])
        assert not np.array_equal(e[1], tape.grad(f)(x))  # (float16: the values went through)
    X = np.array([[0.3, -0.7, 1.1], [0.1, 0.2, 0.3]])
    log.clear()
    with tape.graph.saved_tensors_hooks(pack, unpack):
        values, grads = cf.value_and_grad_batch(X, threads=2)
    seen = list(log)
    log.clear()
    with tape.graph.saved_tensors_hooks(pack, unpack):
        eager = [tape.value_and_grad(f)(row) for row in X]
    assert seen == log
    _same(grads, np.stack([e[1] for e in eager]))
    with tape.graph.saved_tensors_hooks(pack, unpack):
        for call in (cf, lambda x: cf.vjp(x)):
            with pytest.raises(NotImplementedError, match="saved_tensors_hooks"):
                call(np.ones(3))
    _same(cf.value_and_grad(x), tape.value_and_grad(f)(x))  # outside: exact again


def _same(replay, eager):
    """Values and gradients equal, to the bit where replay keeps eager's kernels."""
    for a, b in zip(replay if isinstance(replay, tuple) else (replay,),
                    eager if isinstance(eager, tuple) else (eager,)):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)


def _compare(f, log, *calls, argnums=0):
    """Replay and eager value_and_grad of f at each argument tuple of `calls` give the same
    values, gradients and hook calls (log: the list f's hooks append to), call by call."""
    cf = tape.compile(f, *calls[0], argnums=argnums)
    log.clear()
    for args in calls:
        replay = cf.value_and_grad(*args)
        seen = list(log)
        log.clear()
        eager = tape.value_and_grad(f, argnums=argnums)(*args)
        assert seen == log, (seen, list(log))
        assert seen, "no hook ran"
        log.clear()
        _same(replay[0], eager[0])
        _same(replay[1], eager[1])
    return cf


def test_the_issue_snippet_replays_its_backward_state_hook():
    state = tape.BackwardState()
    calls = []

    def f(x):
        y = state.hook(x * 2.0, "log")
        return tnp.sum(tnp.sin(y))

    state.log = lambda g: calls.append(1) or g * 0.5
    eager = tape.value_and_grad(f)(np.ones(3))[1]
    cf = tape.compile(f, np.ones(3))
    calls.clear()
    np.testing.assert_array_equal(cf.value_and_grad(np.ones(3))[1], eager)
    assert calls == [1]
    np.testing.assert_array_equal(cf.grad(np.ones(3)), eager)
    assert calls == [1, 1]


@pytest.mark.parametrize("escape", [False, True])
def test_tensor_hooks_replace_gradients_in_order_as_eager(escape):
    log = []

    def f(x):
        y = x @ W if escape else x * 2.0  # (matmul: an escape row, a cut of the sweep)
        y.register_hook(lambda g: log.append(("y1", g.copy())) or g * 0.5)
        y.register_hook(lambda g: log.append(("y2", g.copy())) or g + 1.0)
        z = tnp.sin(y) * y
        z.register_hook(lambda g: log.append(("z", g.copy())))  # returns None: keeps g
        return tnp.sum(z * z)

    cf = tape.compile(f, np.ones(3))
    for x in (np.ones(3), np.array([0.3, -1.0, 2.0])):
        log.clear()
        v, g = cf.value_and_grad(x)
        seen = [(k, a.copy()) for k, a in log]
        log.clear()
        ev, eg = tape.value_and_grad(f)(x)
        assert [k for k, _ in seen] == [k for k, _ in log] == ["z", "y1", "y2"]
        for (_, a), (_, b) in zip(seen, log):
            _same(a, b)
        _same(v, ev)
        _same(g, eg)


def test_backward_state_members_rebound_between_calls_and_per_call_state():
    state = tape.BackwardState()

    def f(x):
        return tnp.sum(tnp.sin(state.hook(x * x, "scale")))

    cf = tape.compile(f, np.ones(2))
    x = np.array([0.5, -1.5])
    for k in (1.0, 3.0):
        state.scale = lambda g, k=k: g * k
        _same(cf.grad(x), tape.grad(f)(x))
    other = tape.BackwardState()
    other.scale = lambda g: g * 0.0
    np.testing.assert_array_equal(cf.grad(x, state=other), np.zeros(2))
    np.testing.assert_array_equal(cf.vjp(x, state=other)[1](1.0), np.zeros(2))
    _same(cf.grad(x), tape.grad(f)(x))  # (its own state again)
    del state.scale
    with pytest.raises(RuntimeError, match=r"'scale' is not set.*test_compiled_hooks\.py:\d+"):
        cf.value_and_grad(x)
    state.scale = lambda g: g  # an error mid-sweep leaves the next call clean
    _same(cf.value_and_grad(x)[1], tape.grad(f)(x))


def test_hooks_on_inputs_run_once_on_their_gradient():
    log = []

    def f(x, y):
        x.register_hook(lambda g: log.append("x") or g * 2.0)
        y.register_hook(lambda g: log.append("y") or None)
        return tnp.sum(tnp.sin(x) * y) + tnp.sum(x * x)

    _compare(f, log, (np.ones(3), np.arange(3.0)), (np.arange(3.0), np.ones(3)),
             argnums=(0, 1))
    _compare(f, log, (0.5, 2.0), argnums=(1, 0))


def test_retain_grad_and_post_accumulate_hooks_do_what_eager_value_and_grad_does():
    """tape.value_and_grad returns gradients and fills no .grad: a retained gradient stays
    None and a post-accumulate hook is not called, in replay as in eager."""
    kept, posted = [], []

    def f(x):
        y = x * 3.0
        y.retain_grad()
        kept.append(y)
        x.register_post_accumulate_grad_hook(lambda t: posted.append(t))
        y.register_hook(lambda g: None)
        return tnp.sum(y * y)

    cf = tape.compile(f, np.ones(2))
    _same(cf.value_and_grad(np.arange(2.0)), tape.value_and_grad(f)(np.arange(2.0)))
    assert all(y.grad is None for y in kept) and posted == []


@pytest.mark.parametrize("mode", ["all", "any"])
def test_multi_grad_hooks_fire_once_per_replay_as_eager(mode):
    log = []

    def f(x):
        a, b = x * 2.0, tnp.exp(x)
        tape.graph.register_multi_grad_hook(
            [a, b], lambda gs: log.append(("fn", [None if g is None else np.copy(g)
                                                  for g in gs] if mode == "all" else
                                          np.copy(gs))), mode=mode)
        return tnp.sum(a * b)

    cf = tape.compile(f, np.ones(2))
    for x in (np.ones(2), np.array([0.5, -2.0])):
        log.clear()
        r = cf.value_and_grad(x)
        seen = list(log)
        log.clear()
        e = tape.value_and_grad(f)(x)
        assert len(seen) == len(log) == 1
        if mode == "all":
            for a, b in zip(seen[0][1], log[0][1]):
                _same(a, b)
        else:
            _same(seen[0][1], log[0][1])
        _same(r, e)


def test_vjp_and_batches_run_hooks_per_call_and_row():
    log = []

    def f(x, c):
        y = x * c
        y.register_hook(lambda g: log.append(float(g[0])) or g * 2.0)
        return tnp.sin(y) * 1.5

    cf = tape.compile(f, np.ones(2), 3.0)
    log.clear()
    v, vjp_fn = cf.vjp(np.array([0.1, 0.2]), 3.0)
    g = vjp_fn(np.array([1.0, -1.0]))
    seen = list(log)
    log.clear()
    ev, evjp = tape.vjp(f, np.array([0.1, 0.2]), 3.0)
    _same(g, evjp(np.array([1.0, -1.0]))[0])
    assert seen == log

    def loss(x, c):
        return tnp.sum(f(x, c))

    cl = tape.compile(loss, np.ones(2), 3.0)
    X = np.array([[0.1, 0.2], [0.3, -0.4], [1.0, 2.0]])
    log.clear()
    values, grads = cl.value_and_grad_batch(X, 3.0, threads=2)
    seen = list(log)
    log.clear()
    eager = [tape.value_and_grad(loss)(row, 3.0) for row in X]
    assert seen == log and len(seen) == 3  # one call per row, rows in order
    _same(values, np.array([e[0] for e in eager]))
    _same(grads, np.stack([e[1] for e in eager]))


def test_guarded_variants_keep_their_hooks():
    log = []

    def f(x):
        y = x * 2.0
        if float(tnp.sum(x).item()) > 0:
            y.register_hook(lambda g: log.append("pos") or g * 3.0)
        else:
            y.register_hook(lambda g: log.append("neg") or -g)
        return tnp.sum(tnp.sin(y))

    _compare(f, log, (np.ones(2),), (-np.ones(2),), (np.array([2.0, 0.5]),))


def test_a_hook_registered_after_recording_is_refused():
    kept = []

    def f(x):
        y = x * 2.0
        kept.append(y)
        return tnp.sum(y * y)

    cf = tape.compile(f, np.ones(2))
    cf.value_and_grad(np.ones(2))
    kept[0].register_hook(lambda g: g)
    with pytest.raises(RuntimeError, match="after it was recorded"):
        cf.value_and_grad(np.ones(2))


def test_hvp_of_a_recording_with_hooks_is_refused_with_its_line():
    def f(x):
        y = x * 2.0
        y.register_hook(lambda g: g)  # hooked
        return tnp.sum(y * y)

    cf = tape.compile(f, np.ones(2))
    with pytest.raises(NotImplementedError, match="cf.hvp") as e:
        cf.hvp((np.ones(2),), np.ones(2))
    assert _line(f, "# hooked") in str(e.value)


def test_two_compiled_tapes_with_hooks_in_two_threads():
    import threading

    def make(k):
        log = []

        def f(x):
            y = x * float(k)
            y.register_hook(lambda g: log.append(1) or g * k)
            return tnp.sum(tnp.sin(y))

        return f, log

    tapes = [(tape.compile(f, np.ones(4)), f, log) for f, log in (make(2), make(3))]
    xs = [np.linspace(-1, 1, 4) + 0.1 * i for i in range(30)]
    out = {}

    def work(j):
        cf, _, log = tapes[j]
        log.clear()
        out[j] = [cf.value_and_grad(x) for x in xs]

    threads = [threading.Thread(target=work, args=(j,)) for j in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for j, (_, f, log) in enumerate(tapes):
        assert len(log) == len(xs)
        for x, r in zip(xs, out[j]):
            _same(r, tape.value_and_grad(f)(x))


@pytest.mark.parametrize("threads", [1, 2])
def test_hooks_inside_large_blocked_runs_and_around_escapes(threads):
    """A hooked slot inside a run the sweep would keep in scratch, or a centring whose adjoint
    a product would sum over rows, keeps its adjoint in the arena for the hook."""
    log = []
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 3))

    def f(x, data):
        y = tnp.sin(x * 1.5)
        y.register_hook(lambda g: log.append("y") or g * 0.5)
        c = data - tnp.mean(data, axis=0) * x[:3]
        c.register_hook(lambda g: log.append("c") or g + 1.0)
        return tnp.sum(y * y) + tnp.sum((c @ W) ** 2)

    x0 = np.linspace(-1, 1, 300_000)
    cf = tape.compile(f, x0, X, threads=threads)
    for x in (x0, x0[::-1].copy()):
        log.clear()
        r = cf.value_and_grad(x, X)
        seen = list(log)
        log.clear()
        e = tape.value_and_grad(f)(x, X)
        assert seen == log == ["c", "y"]
        _same(r, e)


def test_a_saved_tape_keeps_its_backward_state_points_by_name(tmp_path):
    state = tape.BackwardState()

    def f(x):
        y = state.hook(tnp.sin(x) * 2.0, "clip")
        z = state.hook(y * y, "scale")
        return tnp.sum(z) + tnp.sum(y)

    state.clip = lambda g: np.clip(g, -1.0, 1.0)
    state.scale = lambda g: g * 3.0
    x = np.array([0.3, -1.2, 2.0])
    cf = tape.compile(f, x)
    cf.save(tmp_path / "f.npz")
    loaded = tape.load(tmp_path / "f.npz")
    with pytest.raises(RuntimeError, match=r"'scale' is not set.*test_compiled_hooks\.py:\d+"):
        loaded.value_and_grad(x)
    loaded.state.clip, loaded.state.scale = state.clip, state.scale  # bound after loading
    _same(loaded.value_and_grad(x), tape.value_and_grad(f)(x))
    other = tape.BackwardState()
    other.clip = other.scale = lambda g: g
    state.clip = state.scale = other.clip
    _same(loaded.value_and_grad(x, state=other), tape.value_and_grad(f)(x))
    given = tape.load(tmp_path / "f.npz", state=other)
    assert given.state is other
    _same(given.grad(x), tape.grad(f)(x))
    import pickle

    copy = pickle.loads(pickle.dumps(given))  # (as Dask ships it: bindings stay behind)
    with pytest.raises(RuntimeError, match="'scale' is not set"):
        copy.grad(x)


def test_saving_a_recording_with_a_plain_hook_is_refused_with_its_line(tmp_path):
    state = tape.BackwardState()

    def f(x):
        y = x * 2.0
        y.register_hook(lambda g: g)  # hooked
        z = state.hook(y * 3.0, "point")
        z.register_hook(lambda g: g)  # second
        return tnp.sum(z * z)

    cf = tape.compile(f, np.ones(2))
    with pytest.raises(ValueError, match="BackwardState") as e:
        cf.save(tmp_path / "f.npz")
    assert _line(f, "# hooked") in str(e.value) and _line(f, "# second") not in str(e.value)


def test_distributed_map_in_process_runs_hooks_per_row():
    import tape.distributed

    log = []

    def f(x):
        y = x * 2.0
        y.register_hook(lambda g: log.append(1) or g * 0.5)
        return tnp.sum(tnp.sin(y))

    cf = tape.compile(f, np.ones(2))
    X = np.array([[0.1, 0.2], [0.3, -0.4], [1.0, 2.0]])
    log.clear()
    values, grads = tape.distributed.map_value_and_grad(cf, X, progress=False)
    assert len(log) == 3
    _same(grads, np.stack([tape.grad(f)(row) for row in X]))


def test_a_hook_on_an_input_f_returns_unchanged_is_refused():
    def f(x):
        x.register_hook(lambda g: g * 2.0)  # hooked
        return x

    with pytest.raises(NotImplementedError, match="records no operation") as e:
        tape.compile(f, 1.5)
    assert _line(f, "# hooked") in str(e.value)


def test_a_hook_on_an_input_outside_argnums_is_refused():
    def f(x, c):
        c.register_hook(lambda g: g)  # hooked
        return tnp.sum(x * c)

    with pytest.raises(NotImplementedError, match="not in argnums") as e:
        tape.compile(f, np.ones(2), np.ones(2))
    assert _line(f, "# hooked") in str(e.value)
