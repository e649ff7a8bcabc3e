"""Run by tests/test_compiled.py in a subprocess: thousands of random mutations of a saved
compiled tape are loaded (and, when they load, replayed); any Python exception is fine, a crash
of the process is not. Prints "<mutations> <loaded> <rejected>"."""
import io
import json
import sys

import numpy as np

import tape


def f(w, X, idx):
    z = X @ w
    if np.sum(z) > 0:
        z = z * 2.0
    y = np.cumsum(np.tanh(z[idx]) ** 2) * np.max(w)
    y[0] = np.prod(w[:2])
    y = y + np.sum(np.tanh(w[:4, None] - w[None, :5]))  # a broadcast read by strides
    return np.sum(np.where(y > 0.1, y, -y)) + np.linalg.slogdet(np.diag(w[:3] * w[:3] + 1.0))[1]


def main(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(40, 30))
    w = rng.normal(size=30)
    idx = np.array([0, 5, 7])
    buf = io.BytesIO()
    tape.compile(f, w, X, idx).save(buf)
    base = dict(np.load(io.BytesIO(buf.getvalue()), allow_pickle=False))
    loaded = rejected = 0
    for _ in range(n):
        files = {k: v.copy() for k, v in base.items()}
        for _ in range(int(rng.integers(1, 4))):
            mutate(files, rng)
        out = io.BytesIO()
        np.savez(out, **files)
        out.seek(0)
        try:
            cf = tape.load(out)
        except ValueError:
            rejected += 1
            continue
        loaded += 1
        try:
            cf.value_and_grad(rng.normal(size=30), X, idx)
        except Exception:  # noqa: BLE001 - any Python error is acceptable, a crash is not
            pass
    print(n, loaded, rejected)


def mutate(files, rng):
    name = rng.choice(sorted(files))
    a = files[name]
    kind = rng.integers(0, 6)
    if name == "meta":
        meta = json.loads(bytes(a).decode())
        key = rng.choice(sorted(meta))
        meta[key] = _jiggle(meta[key], rng)
        files[name] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    elif kind == 0 and a.size:  # one element to a random or boundary value
        flat = a.reshape(-1)
        j = rng.integers(0, flat.size)
        if a.dtype.kind == "i":
            flat[j] = rng.choice([-1, 0, 1, flat.size, 2 ** 31, -(2 ** 40), int(flat[j]) + 1,
                                  int(flat[j]) - 1, int(rng.integers(-100, 10000))])
        else:
            flat[j] = rng.choice([np.nan, np.inf, -np.inf, 0.0, 1e308, rng.normal()])
    elif kind == 1 and a.size:  # truncate
        files[name] = a.reshape(-1)[: rng.integers(0, a.size)]
    elif kind == 2:  # wrong dtype
        files[name] = a.astype(np.float32 if a.dtype.kind == "i" else np.int64)
    elif kind == 3 and a.ndim == 2:  # swap two rows
        i, j = rng.integers(0, len(a), 2)
        a[[i, j]] = a[[j, i]]
    elif kind == 4:
        del files[name]
    elif a.size:  # shuffle a column / the whole array
        flat = a.reshape(-1)
        k = rng.integers(0, flat.size)
        flat[k:] = rng.permutation(flat[k:])


def _jiggle(x, rng):
    if isinstance(x, bool):
        return not x
    if isinstance(x, int):
        return int(x + rng.integers(-3, 4)) if rng.random() < 0.7 else -x
    if isinstance(x, list):
        if not x or rng.random() < 0.2:
            return x[:-1] if x else [1]
        x = list(x)
        j = rng.integers(0, len(x))
        x[j] = _jiggle(x[j], rng)
        return x
    if isinstance(x, dict):
        if not x:
            return {"x": 1}
        x = dict(x)
        k = rng.choice(sorted(x))
        x[k] = _jiggle(x[k], rng)
        return x
    if isinstance(x, str):
        return x[::-1] if rng.random() < 0.5 else x + "x"
    return None


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
