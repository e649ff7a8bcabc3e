"""Polynomials on tensors: NumPy's ``np.poly*`` (coefficients highest power first) and
``numpy.polynomial.polynomial`` (lowest power first), built from recorded operations.

NumPy dispatches ``np.polyval`` and friends to tensors, and of ``numpy.polynomial.polynomial`` only
``polyval2d`` and ``polygrid2d``; its other functions convert their arguments to arrays first,
which a tensor that carries a gradient refuses, so their tensor versions live in
``tape.numpy.polynomial.polynomial`` (``tnp.polynomial.polynomial.polyval``) and the refusal names
them. Both follow NumPy's formulas in NumPy's order of operations. Where NumPy
trims trailing (or leading) zero coefficients, the test for zero reads values: a guard under
``tape.compile``, as every comparison of a recorded value is.
"""
from __future__ import annotations

import builtins
import types

import numpy as np
import numpy.polynomial.polynomial as P

from ._dispatch import FUNCS, as_tensor, implements
from ..core.conversions import LIBRARY_HINTS
from ..core.tensor import raw
from ..core.tensor import Tensor

# numpy.polynomial.polynomial's function -> ours (tnp.polynomial.polynomial), for the coverage
# table and for the conversion error that names ours
COEF_FIRST = {}


def _coef_first(np_func):
    def deco(fn):
        FUNCS[np_func] = fn
        COEF_FIRST[np_func.__name__] = fn
        if not hasattr(np_func, "_implementation"):  # NumPy does not dispatch it to tensors
            fn.via = f"tnp.polynomial.polynomial.{np_func.__name__}"
        return fn
    return deco


def _len(c):
    return np.shape(raw(c))[0]


def _series(c):
    c = np.atleast_1d(as_tensor(c))
    return c


def _trim(c):
    """NumPy's trimseq: drop trailing zero coefficients, keeping at least one."""
    n = _len(c)
    while n > 1 and bool(c[n - 1] == 0):
        n -= 1
    return c if n == _len(c) else c[:n]


def _as_series(*cs):
    out = [_trim(_series(c)) for c in cs]
    for c in out:
        if c.ndim != 1:
            raise ValueError("Coefficient array is not 1-d")
    return out


def _pad_to(c, n, front):
    m = n - _len(c)
    return c if m == 0 else np.pad(c, (m, 0) if front else (0, m))


def _is_array(x):
    return isinstance(x, (np.ndarray, Tensor))


# ---------------------------------------------------------------------------------------------
# np.poly*: coefficients highest power first


@implements(np.polyval)
def polyval(p, x):
    y = np.zeros_like(x) if not isinstance(x, Tensor) else x * 0.0
    for k in range(_len(p)):
        y = y * x + p[k]
    return y


@implements(np.polyder)
def polyder(p, m=1):
    for _ in range(m):
        n = _len(p) - 1
        p = p[:-1] * np.arange(n, 0, -1.0)
    return p


@implements(np.polyint)
def polyint(p, m=1, k=None):
    ks = np.zeros(m) if k is None else np.atleast_1d(raw(k)) * np.ones(m)
    for i in range(m):
        n = _len(p)
        p = np.concatenate([p / np.arange(n, 0, -1.0), np.asarray([ks[i]])])
    return p


@implements(np.polyadd)
def polyadd(a1, a2):
    a, b = np.atleast_1d(a1), np.atleast_1d(a2)
    n = builtins.max(_len(a), _len(b))
    return _pad_to(a, n, True) + _pad_to(b, n, True)


@implements(np.polysub)
def polysub(a1, a2):
    a, b = np.atleast_1d(a1), np.atleast_1d(a2)
    n = builtins.max(_len(a), _len(b))
    return _pad_to(a, n, True) - _pad_to(b, n, True)


@implements(np.polymul)
def polymul(a1, a2):
    return np.convolve(np.atleast_1d(a1), np.atleast_1d(a2))


@implements(np.polydiv)
def polydiv(u, v):
    """NumPy's long division: quotient and remainder, the remainder's leading coefficients within
    1e-8 of zero dropped (NumPy's ``allclose`` test, guarded)."""
    u, v = np.atleast_1d(u) + 0.0, np.atleast_1d(v) + 0.0
    m, n = _len(u) - 1, _len(v) - 1
    scale = 1.0 / v[0]
    q = [None] * builtins.max(m - n + 1, 1)
    r = u
    for k in range(0, m - n + 1):
        d = scale * r[k]
        q[k] = d
        r = np.concatenate([r[:k], r[k:k + n + 1] - d * v, r[k + n + 1:]])
    q = np.stack([as_tensor(0.0) if d is None else d for d in q])
    while _len(r) > 1 and bool(np.abs(r[0]) <= 1e-8):  # np.allclose(r[0], 0, rtol=1e-14)
        r = r[1:]
    return q, r


@implements(np.poly)
def poly(seq_of_zeros):
    """Coefficients from roots (a 1-D sequence); a square matrix's characteristic polynomial
    needs its eigenvalues, which tapejit does not differentiate (not symmetric)."""
    z = np.atleast_1d(as_tensor(seq_of_zeros))
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] != 0:
        raise TypeError("np.poly of a matrix needs the eigenvalues of a general matrix, which "
                        "tapejit does not differentiate; pass its roots (a 1-D sequence)")
    if z.ndim != 1:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    if _len(z) == 0:
        return 1.0
    a = as_tensor(np.ones(1))
    for k in range(_len(z)):
        a = np.convolve(a, np.stack([as_tensor(1.0), -z[k]]), mode="full")
    return a


def _check_fit(x, y):
    """NumPy's checks of a least-squares fit's samples (both families word them alike)."""
    if x.ndim != 1:
        raise TypeError("expected 1D vector for x")
    if x.size == 0:
        raise TypeError("expected non-empty vector for x")
    if y.ndim < 1 or y.ndim > 2:
        raise TypeError("expected 1D or 2D array for y")
    if x.shape[0] != y.shape[0]:
        raise TypeError("expected x and y to have same length")


def _rank_warning(rank, order, full):
    if rank != order and not full:
        import warnings

        warnings.warn("Polyfit may be poorly conditioned", np.exceptions.RankWarning,
                      stacklevel=3)


@implements(np.polyfit)
def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """NumPy's least-squares fit (columns of the Vandermonde matrix scaled to unit norm, then
    lstsq): differentiable in x, y and w; the rank is read from the singular values (a guard
    under tape.compile)."""
    order = int(deg) + 1
    x, y = as_tensor(x) + 0.0, as_tensor(y) + 0.0
    if deg < 0:
        raise ValueError("expected deg >= 0")
    _check_fit(x, y)
    if rcond is None:
        rcond = len(x) * np.finfo(np.float64).eps
    lhs, rhs = np.vander(x, order), y
    if w is not None:
        w = as_tensor(w) + 0.0
        if w.ndim != 1:
            raise TypeError("expected a 1-d array for weights")
        if w.shape[0] != y.shape[0]:
            raise TypeError("expected w and y to have the same length")
        lhs = lhs * w[:, None]
        rhs = rhs * (w[:, None] if rhs.ndim == 2 else w)
    scale = np.sqrt(np.sum(lhs * lhs, axis=0))
    lhs = lhs / scale
    c, resids, rank, sv = np.linalg.lstsq(lhs, rhs, rcond)
    c = (c.T / scale).T
    _rank_warning(rank, order, full)
    if full:
        return c, resids, rank, sv, rcond
    if cov:
        vbase = np.linalg.inv(lhs.T @ lhs) / np.outer(scale, scale)
        if cov == "unscaled":
            fac = 1.0
        else:
            if len(x) <= order:
                raise ValueError("the number of data points must exceed order to scale the "
                                 "covariance matrix")
            fac = resids / (len(x) - order)
        return (c, vbase * fac) if y.ndim == 1 else (c, vbase[:, :, None] * fac)
    return c


# ---------------------------------------------------------------------------------------------
# numpy.polynomial.polynomial: coefficients lowest power first


@_coef_first(P.polyval)
def cf_polyval(x, c, tensor=True):
    c = _series(c) + 0.0
    if isinstance(x, (tuple, list)):
        x = np.asarray(x)
    if _is_array(x) and tensor:
        c = np.reshape(c, c.shape + (1,) * np.ndim(raw(x)))
    c0 = c[-1] + x * 0
    for i in range(2, _len(c) + 1):
        c0 = c[-i] + c0 * x
    return c0


@_coef_first(P.polyval2d)
def cf_polyval2d(x, y, c):
    if np.shape(raw(x)) != np.shape(raw(y)):
        raise ValueError("x, y are incompatible")
    return cf_polyval(y, cf_polyval(x, c), tensor=False)


@_coef_first(P.polyval3d)
def cf_polyval3d(x, y, z, c):
    if not np.shape(raw(x)) == np.shape(raw(y)) == np.shape(raw(z)):
        raise ValueError("x, y, z are incompatible")
    return cf_polyval(z, cf_polyval(y, cf_polyval(x, c), tensor=False), tensor=False)


@_coef_first(P.polygrid2d)
def cf_polygrid2d(x, y, c):
    return cf_polyval(y, cf_polyval(x, c))


@_coef_first(P.polygrid3d)
def cf_polygrid3d(x, y, z, c):
    return cf_polyval(z, cf_polyval(y, cf_polyval(x, c)))


@_coef_first(P.polyvalfromroots)
def cf_polyvalfromroots(x, r, tensor=True):
    r = _series(r) + 0.0
    if isinstance(x, (tuple, list)):
        x = np.asarray(x)
    if _is_array(x):
        if tensor:
            r = np.reshape(r, r.shape + (1,) * np.ndim(raw(x)))
        elif np.ndim(raw(x)) >= r.ndim:
            raise ValueError("x.ndim must be < r.ndim when tensor == False")
    return np.prod(x - r, axis=0)


@_coef_first(P.polyadd)
def cf_polyadd(c1, c2):
    c1, c2 = _as_series(c1, c2)
    n = builtins.max(_len(c1), _len(c2))
    return _trim(_pad_to(c1, n, False) + _pad_to(c2, n, False))


@_coef_first(P.polysub)
def cf_polysub(c1, c2):
    c1, c2 = _as_series(c1, c2)
    n = builtins.max(_len(c1), _len(c2))
    return _trim(_pad_to(c1, n, False) - _pad_to(c2, n, False))


@_coef_first(P.polymulx)
def cf_polymulx(c):
    [c] = _as_series(c)
    if _len(c) == 1 and bool(c[0] == 0):
        return c
    return np.concatenate([c[:1] * 0, c])


@_coef_first(P.polymul)
def cf_polymul(c1, c2):
    c1, c2 = _as_series(c1, c2)
    return _trim(np.convolve(c1, c2))


@_coef_first(P.polydiv)
def cf_polydiv(c1, c2):
    c1, c2 = _as_series(c1, c2)
    if bool(c2[-1] == 0):
        raise ZeroDivisionError("polydiv: the divisor's leading coefficient is zero")
    lc1, lc2 = _len(c1), _len(c2)
    if lc1 < lc2:
        return c1[:1] * 0, c1
    if lc2 == 1:
        return c1 / c2[-1], c1[:1] * 0
    scl = c2[-1]
    c2 = c2[:-1] / scl
    i, j = lc1 - lc2, lc1 - 1
    while i >= 0:  # NumPy's c1[i:j] -= c2 * c1[j], as new tensors
        c1 = np.concatenate([c1[:i], c1[i:j] - c2 * c1[j], c1[j:]])
        i, j = i - 1, j - 1
    return c1[j + 1:] / scl, _trim(c1[:j + 1])


@_coef_first(P.polypow)
def cf_polypow(c, pow, maxpower=None):
    [c] = _as_series(c)
    power = int(pow)
    if power != pow or power < 0:
        raise ValueError("Power must be a non-negative integer.")
    if maxpower is not None and power > maxpower:
        raise ValueError("Power is too large")
    if power == 0:
        return as_tensor(np.ones(1))
    prd = c
    for _ in range(2, power + 1):
        prd = np.convolve(prd, c)
    return prd


def _along(c, axis, fn):
    c = _series(c) + 0.0
    ax = int(axis)
    c = np.moveaxis(c, ax, 0)
    return np.moveaxis(fn(c), 0, ax)


@_coef_first(P.polyder)
def cf_polyder(c, m=1, scl=1, axis=0):
    cnt = int(m)
    if cnt != m or cnt < 0:
        raise ValueError("The order of derivation must be non-negative")
    if cnt == 0:
        return _series(c) + 0.0

    def der(c):
        n = _len(c)
        if cnt >= n:
            return c[:1] * 0
        for _ in range(cnt):
            n -= 1
            c = c * scl
            w = np.reshape(np.arange(1.0, n + 1), (n,) + (1,) * (c.ndim - 1))
            c = w * c[1:]
        return c
    return _along(c, axis, der)


@_coef_first(P.polyint)
def cf_polyint(c, m=1, k=(), lbnd=0, scl=1, axis=0):
    k = list(k) if np.iterable(k) else [k]
    cnt = int(m)
    if cnt != m or cnt < 0:
        raise ValueError("The order of integration must be non-negative")
    if len(k) > cnt:
        raise ValueError("Too many integration constants")
    if np.ndim(raw(lbnd)) != 0 or np.ndim(raw(scl)) != 0:
        raise ValueError("lbnd and scl must be scalars.")
    if cnt == 0:
        return _series(c) + 0.0
    k = k + [0] * (cnt - len(k))

    def integ(c):
        for i in range(cnt):
            n = _len(c)
            c = c * scl
            if n == 1 and bool(np.all(c[0] == 0)):
                c = c + k[i]
                continue
            w = np.reshape(np.arange(2.0, n + 1), (n - 1,) + (1,) * (c.ndim - 1))
            tmp = np.concatenate([c[:1] * 0, c[:1], c[1:] / w])
            first = tmp[:1] + (k[i] - cf_polyval(lbnd, tmp))
            c = np.concatenate([first, tmp[1:]])
        return c
    return _along(c, axis, integ)


@_coef_first(P.polyvander)
def cf_polyvander(x, deg):
    ideg = int(deg)
    if ideg != deg or ideg < 0:
        raise ValueError("deg must be non-negative")
    x = np.atleast_1d(as_tensor(x)) + 0.0
    v = [x * 0 + 1]
    if ideg > 0:
        v.append(x)
        for _ in range(2, ideg + 1):
            v.append(v[-1] * x)
    return np.moveaxis(np.stack(v), 0, -1)


def _vander_nd(points, degrees):
    if len(points) != len(degrees):
        raise ValueError(f"Expected {len(points)} dimensions of sample points, got "
                         f"{len(degrees)}")
    points = np.broadcast_arrays(*[np.atleast_1d(as_tensor(p)) + 0.0 for p in points])
    vs = [cf_polyvander(p, d) for p, d in zip(points, degrees)]
    n = len(vs)
    out = vs[0][(...,) + (slice(None),) + (None,) * (n - 1)]
    for i in range(1, n):
        out = out * vs[i][(...,) + (None,) * i + (slice(None),) + (None,) * (n - 1 - i)]
    return np.reshape(out, out.shape[:-n] + (-1,))


@_coef_first(P.polyvander2d)
def cf_polyvander2d(x, y, deg):
    return _vander_nd((x, y), deg)


@_coef_first(P.polyvander3d)
def cf_polyvander3d(x, y, z, deg):
    return _vander_nd((x, y, z), deg)


@_coef_first(P.polyfit)
def cf_polyfit(x, y, deg, rcond=None, full=False, w=None):
    """numpy.polynomial's least-squares fit: rows of the Vandermonde matrix scaled to unit
    norm, lstsq, differentiable in x, y and w."""
    x, y = as_tensor(x) + 0.0, as_tensor(y) + 0.0
    deg = np.asarray(deg)
    if deg.ndim > 1 or deg.dtype.kind not in "iu" or deg.size == 0:
        raise TypeError("deg must be an int or non-empty 1-D array of int")
    if deg.min() < 0:
        raise ValueError("expected deg >= 0")
    _check_fit(x, y)
    if deg.ndim == 0:
        lmax, order = int(deg), int(deg) + 1
        van = cf_polyvander(x, lmax)
    else:
        deg = np.sort(deg)
        lmax, order = int(deg[-1]), len(deg)
        van = cf_polyvander(x, lmax)[:, deg]
    lhs, rhs = van.T, y.T
    if w is not None:
        w = as_tensor(w) + 0.0
        if w.ndim != 1:
            raise TypeError("expected 1D vector for w")
        if len(x) != len(w):
            raise TypeError("expected x and w to have same length")
        lhs, rhs = lhs * w, rhs * w
    if rcond is None:
        rcond = len(x) * np.finfo(np.float64).eps
    scl = np.sqrt(np.sum(np.square(lhs), axis=1))
    scl = np.where(np.asarray(scl == 0), 1.0, scl)  # (a guarded mask, as NumPy's scl[scl == 0])
    c, resids, rank, sv = np.linalg.lstsq(lhs.T / scl, rhs.T, rcond)
    c = (c.T / scl).T
    if deg.ndim > 0:  # zeros at the degrees not fitted
        rows = [None] * (lmax + 1)
        for i, d in enumerate(deg.tolist()):
            rows[d] = c[i]
        zero = c[0] * 0.0
        c = np.stack([zero if r is None else r for r in rows])
    _rank_warning(rank, order, full)
    return (c, [resids, rank, sv, rcond]) if full else c


@_coef_first(P.polyfromroots)
def cf_polyfromroots(roots):
    """NumPy's order: the roots sorted, then multiplied pairwise as a balanced tree."""
    r = np.atleast_1d(as_tensor(roots))
    if r.ndim != 1:
        raise ValueError("Coefficient array is not 1-d")
    if _len(r) == 0:
        return as_tensor(np.ones(1))
    r = np.sort(r)
    p = [np.stack([-r[i], as_tensor(1.0)]) for i in range(_len(r))]
    n = len(p)
    while n > 1:
        m, rem = divmod(n, 2)
        tmp = [cf_polymul(p[i], p[i + m]) for i in range(m)]
        if rem:
            tmp[0] = cf_polymul(tmp[0], p[-1])
        p, n = tmp, m
    return p[0]


@_coef_first(P.polycompanion)
def cf_polycompanion(c):
    [c] = _as_series(c)
    n = _len(c) - 1
    if n < 1:
        raise ValueError("Series must have maximum degree of at least 1.")
    if n == 1:
        return np.reshape(-c[0] / c[1], (1, 1))
    shift = np.eye(n, k=-1)  # ones below the diagonal
    last = np.concatenate([np.zeros((n, n - 1)), np.reshape(-(c[:-1] / c[-1]), (n, 1))], axis=1)
    return shift + last


# tnp.polynomial.polynomial: the tensor versions under numpy.polynomial.polynomial's names
polynomial = types.ModuleType("tape.numpy.polynomial.polynomial", __doc__)
for _name, _fn in COEF_FIRST.items():
    setattr(polynomial, _name, _fn)
namespace = types.ModuleType("tape.numpy.polynomial",
                             "numpy.polynomial for tensors: its `polynomial` module's functions.")
namespace.polynomial = polynomial


def _conversion_hint(mod, name):
    if mod == "numpy.polynomial.polynomial" and name in COEF_FIRST:
        return (f"numpy.polynomial.polynomial.{name} converts its arguments to arrays, which "
                f"would lose the gradient: call tnp.polynomial.polynomial.{name} (the same "
                f"function on tensors), which records.")
    return None


LIBRARY_HINTS.append(_conversion_hint)
