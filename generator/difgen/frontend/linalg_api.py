"""NumPy's products, contractions and ``np.linalg`` on tracers.

Each function follows NumPy's own implementation step by step where that decides the
floating-point result (``tensordot`` transposes, reshapes and multiplies matrices as
NumPy does; ``cross`` forms each component with NumPy's operations in NumPy's order;
``matrix_power`` multiplies by NumPy's binary decomposition), on the primitives of
:mod:`difgen.primitives.linalg`. Importing the module adds its functions to
:data:`difgen.frontend.numpy_api.FUNCTIONS`.
"""

from __future__ import annotations

import math
import operator
import string
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from difgen.core.location import user_location as _where
from difgen.core.tracer import bind_name as _bind
from difgen.errors import TraceError
from difgen.frontend.arguments import _axes, _no_out
from difgen.frontend.array_api import matmul
from difgen.frontend.numpy_api import FUNCTIONS, Method
from difgen.frontend.reduction_api import sum_
from difgen.frontend.shape_api import expand_dims, moveaxis, ravel, reshape, stack


def _check(condition: bool, message: str) -> None:
    """NumPy's ValueError for a call it would refuse, at the user's line."""
    if not condition:
        raise TraceError(f"{_where()}: {message}")


# ------------------------------------------------------------ products
def dot(a: Any, b: Any, out: Any = None) -> Any:
    """``np.dot``: a sum over the last axis of ``a`` and the second-to-last of ``b``
    (a matrix product up to 2-D operands, a ``tensordot`` beyond)."""
    _no_out({"out": out})
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return a * b
    if np.ndim(b) <= 2:
        return matmul(a, b)
    return tensordot(a, b, axes=([np.ndim(a) - 1], [np.ndim(b) - 2]))


def tensordot(a: Any, b: Any, axes: Any = 2) -> Any:
    """``np.tensordot`` as NumPy computes it: both operands transposed and reshaped
    to matrices, one matrix product, the result reshaped."""
    if isinstance(axes, (int, np.integer)):
        axes_a, axes_b = list(range(-int(axes), 0)), list(range(int(axes)))
    else:
        axes_a, axes_b = axes
    axes_a = [int(x) for x in np.atleast_1d(axes_a)]
    axes_b = [int(x) for x in np.atleast_1d(axes_b)]
    sa, sb = np.shape(a), np.shape(b)
    _check(len(axes_a) == len(axes_b), "np.tensordot: shape-mismatch for sum")
    axes_a = [x % len(sa) for x in axes_a]
    axes_b = [x % len(sb) for x in axes_b]
    for x, y in zip(axes_a, axes_b):
        _check(sa[x] == sb[y], "np.tensordot: shape-mismatch for sum")
    rest_a = [k for k in range(len(sa)) if k not in axes_a]
    rest_b = [k for k in range(len(sb)) if k not in axes_b]
    inner = math.prod(sa[x] for x in axes_a)
    at = np.reshape(
        np.transpose(a, rest_a + axes_a), (math.prod(sa[k] for k in rest_a), inner)
    )
    bt = np.reshape(
        np.transpose(b, axes_b + rest_b), (inner, math.prod(sb[k] for k in rest_b))
    )
    return np.reshape(matmul(at, bt), [sa[k] for k in rest_a] + [sb[k] for k in rest_b])


def cross(
    a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: Any = None
) -> Any:
    """``np.cross`` of 3- and 2-vectors (a 2-vector has z = 0), each component with
    NumPy's operations: the terms NumPy leaves out for a zero z are left out, so NaN
    and inf propagate as they do in NumPy."""
    if axis is not None:
        axisa = axisb = axisc = axis
    _check(np.ndim(a) >= 1 and np.ndim(b) >= 1, "np.cross of a 0-d array")
    a, b = np.moveaxis(a, axisa, -1), np.moveaxis(b, axisb, -1)
    na, nb = np.shape(a)[-1], np.shape(b)[-1]
    _check(
        na in (2, 3) and nb in (2, 3),
        "incompatible dimensions for cross product (dimension must be 2 or 3)",
    )
    a0, a1, b0, b1 = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    if na == 2 and nb == 2:
        return a0 * b1 - a1 * b0
    if na == 2:
        b2 = b[..., 2]
        parts = [a1 * b2, -(a0 * b2), a0 * b1 - a1 * b0]
    elif nb == 2:
        a2 = a[..., 2]
        parts = [-(a2 * b1), a2 * b0, a0 * b1 - a1 * b0]
    else:
        a2, b2 = a[..., 2], b[..., 2]
        parts = [a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0]
    shape = np.broadcast_shapes(*(np.shape(p) for p in parts))
    cp = stack([np.broadcast_to(p, shape) for p in parts], axis=-1)
    return np.moveaxis(cp, -1, axisc)


def linalg_cross(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """``np.linalg.cross``: ``np.cross`` of 3-vectors only."""
    n1, n2 = np.shape(x1)[axis], np.shape(x2)[axis]
    _check(
        n1 == 3 and n2 == 3,
        "Both input arrays must be (arrays of) 3-dimensional vectors, "
        f"but they are {n1} and {n2} dimensional instead.",
    )
    return cross(x1, x2, axis=axis)


# ------------------------------------------------------------- einsum
_LABELS = string.ascii_uppercase + string.ascii_lowercase  # NumPy's sublist order


def _from_sublists(operands: Sequence[Any]) -> tuple[str, list[Any]]:
    """``einsum(a, [0, 1], b, [1, 2], [0, 2])`` as a subscript string and operands."""

    def letters(sub: Any) -> str:
        return "".join(
            "..." if s is Ellipsis else _LABELS[operator.index(s)] for s in sub
        )

    pairs = len(operands) // 2
    arrays = list(operands[0 : 2 * pairs : 2])
    spec = ",".join(letters(s) for s in operands[1 : 2 * pairs : 2])
    if len(operands) % 2:
        spec += "->" + letters(operands[-1])
    return spec, arrays


def einsum(
    *operands: Any, out: Any = None, optimize: Any = False, **kwargs: Any
) -> Any:
    """``np.einsum`` in both forms, with ``...`` and NumPy's implicit output.

    ``...`` becomes fresh labels for the broadcast axes; an operand's axis of size 1
    broadcast against a longer one is dropped (the operand is constant along it), so
    the primitive sees consistent sizes. ``optimize`` (True or a strategy name) is
    passed on to the generated ``np.einsum`` call, so the contraction order, and the
    rounding, are NumPy's."""
    _no_out({"out": out, **kwargs})
    if isinstance(operands[0], str):
        spec, arrays = operands[0].replace(" ", ""), list(operands[1:])
    else:
        spec, arrays = _from_sublists(operands)
    try:  # NumPy's own checks, on zero-strided stand-ins (nothing is computed)
        stand_ins = [np.broadcast_to(0.0, np.shape(x)) for x in arrays]
        np.einsum_path(spec, *stand_ins, optimize=False)
    except ValueError as exc:
        raise TraceError(f"{_where()}: np.einsum: {exc}") from None
    ins, _, out_spec = spec.partition("->")
    subs = ins.split(",")
    if "->" not in spec:
        labels = ins.replace(",", "").replace(".", "")
        once = sorted(c for c in set(labels) if labels.count(c) == 1)
        out_spec = ("..." if "." in ins else "") + "".join(once)
    fresh = [c for c in _LABELS if c not in spec]
    ell_shape = np.broadcast_shapes(
        *(
            np.shape(x)[: np.ndim(x) - len(s) + 3]
            for s, x in zip(subs, arrays)
            if "." in s
        )
    )
    ell = "".join(fresh[: len(ell_shape)])
    sizes: dict[str, int] = dict(zip(ell, ell_shape))
    full = []
    for s, x in zip(subs, arrays):
        if "." in s:
            k = np.ndim(x) - len(s) + 3
            s = s.replace("...", ell[len(ell) - k :] if k else "")
        full.append(s)
        for c, n in zip(s, np.shape(x)):
            sizes[c] = max(sizes.get(c, 1), n)
    terms, inputs = [], []
    for s, x in zip(full, arrays):
        shape = np.shape(x)
        keep = [i for i, (c, n) in enumerate(zip(s, shape)) if n == sizes[c]]
        if len(keep) < len(s):  # broadcast axes of size 1: constant along them
            x = np.reshape(x, tuple(shape[i] for i in keep))
            s = "".join(s[i] for i in keep)
        terms.append(s)
        inputs.append(x)
    spec = ",".join(terms) + "->" + out_spec.replace("...", ell)
    if optimize is False:
        return _bind("einsum", *inputs, spec=spec)
    _check(
        isinstance(optimize, (bool, str)),
        "np.einsum with an explicit contraction path is not supported; pass "
        "optimize=True or a strategy name",
    )
    return _bind("einsum", *inputs, spec=spec, optimize=optimize)


# -------------------------------------------------------------- norms
def _vector_norm(x: Any, ord: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
    """NumPy's vector norms over one axis, with NumPy's operations."""
    if ord is None or ord == 2:
        return np.sqrt(sum_(x * x, axis=axes, keepdims=keepdims))
    _check(not isinstance(ord, str), f"Invalid norm order {ord!r} for vectors")
    if ord == np.inf:
        return np.max(np.abs(x), axis=axes, keepdims=keepdims)
    if ord == -np.inf:
        return np.min(np.abs(x), axis=axes, keepdims=keepdims)
    if ord == 0:
        return sum_(np.where(x != 0, 1.0, 0.0), axis=axes, keepdims=keepdims)
    if ord == 1:
        return sum_(np.abs(x), axis=axes, keepdims=keepdims)
    p = float(ord)
    return sum_(np.abs(x) ** p, axis=axes, keepdims=keepdims) ** (1.0 / p)


def _matrix_norm(x: Any, ord: Any, row: int, col: int) -> Any:
    """NumPy's matrix norms over the axis pair (row, col), without keepdims."""
    if ord in (2, -2, "nuc"):
        s = svdvals(moveaxis(x, (row, col), (-2, -1)))
        if ord == "nuc":
            return sum_(s, axis=-1)
        return (np.max if ord == 2 else np.min)(s, axis=-1)
    if ord in (1, -1):
        col = col - 1 if col > row else col
        return (np.max if ord == 1 else np.min)(sum_(np.abs(x), axis=row), axis=col)
    if ord in (np.inf, -np.inf):
        row = row - 1 if row > col else row
        reduce = np.max if ord == np.inf else np.min
        return reduce(sum_(np.abs(x), axis=col), axis=row)
    _check(ord in (None, "fro", "f"), f"Invalid norm order {ord!r} for matrices")
    return np.sqrt(sum_(x * x, axis=(row, col)))


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """``np.linalg.norm``: every vector and matrix order, ``axis`` and
    ``keepdims``. The whole-array 2-norm is ``sqrt(x . x)`` with the dot product, as
    in NumPy."""
    ndim = np.ndim(x)
    whole = (
        ord is None or (ord in ("f", "fro") and ndim == 2) or (ord == 2 and ndim == 1)
    )
    if axis is None and whole:
        flat = ravel(x)
        ret = np.sqrt(matmul(flat, flat))
        return reshape(ret, (1,) * ndim) if keepdims else ret
    if axis is None:
        axis = tuple(range(ndim))
    elif not isinstance(axis, tuple):
        axis = (axis,)
    if len(axis) == 1:
        return _vector_norm(x, ord, _axes(axis, ndim), keepdims)
    _check(len(axis) == 2, "Improper number of dimensions to norm.")
    row, col = (int(a) % ndim for a in axis)
    _check(row != col, "Duplicate axes given.")
    ret = _matrix_norm(x, ord, row, col)
    if keepdims:
        ret = reshape(
            ret, tuple(1 if i in (row, col) else n for i, n in enumerate(np.shape(x)))
        )
    return ret


def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:
    """``np.linalg.matrix_norm``: ``norm`` over the last two axes."""
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def vector_norm(
    x: Any, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2
) -> Any:
    """``np.linalg.vector_norm`` as NumPy computes it: several axes are transposed to
    the front and merged into one before the vector norm."""
    shape = np.shape(x)
    if axis is None:
        x, axes = ravel(x), tuple(range(len(shape)))
    elif isinstance(axis, tuple):
        axes = _axes(axis, len(shape))
        rest = tuple(i for i in range(len(shape)) if i not in axes)
        merged = math.prod(shape[i] for i in axis)
        x = reshape(np.transpose(x, axis + rest), (merged, *(shape[i] for i in rest)))
    else:
        axes = _axes(axis, len(shape))
        ret = _vector_norm(x, ord, axes, keepdims)
        return ret
    ret = _vector_norm(x, ord, (0,), False)
    if keepdims:
        ret = reshape(ret, tuple(1 if i in axes else n for i, n in enumerate(shape)))
    return ret


# ------------------------------------------------------------ np.linalg
class SlogdetResult(tuple):
    """``(sign, logabsdet)``, with NumPy's field names."""

    @property
    def sign(self) -> Any:
        return self[0]

    @property
    def logabsdet(self) -> Any:
        return self[1]


class SVDResult(tuple):
    """``(U, S, Vh)``, with NumPy's field names."""

    @property
    def U(self) -> Any:
        return self[0]

    @property
    def S(self) -> Any:
        return self[1]

    @property
    def Vh(self) -> Any:
        return self[2]


class EighResult(tuple):
    """``(eigenvalues, eigenvectors)``, with NumPy's field names."""

    @property
    def eigenvalues(self) -> Any:
        return self[0]

    @property
    def eigenvectors(self) -> Any:
        return self[1]


def _square(name: str, a: Any) -> None:
    _check(
        np.ndim(a) >= 2 and np.shape(a)[-1] == np.shape(a)[-2],
        f"np.linalg.{name} needs square matrices",
    )


def _matrices(name: str, a: Any) -> None:
    _check(np.ndim(a) >= 2, f"np.linalg.{name} needs (stacks of) matrices")
    _check(min(np.shape(a)[-2:]) > 0, f"np.linalg.{name} of an empty matrix")


def solve(a: Any, b: Any) -> Any:
    """``np.linalg.solve``: ``b`` is a vector exactly when it is 1-D (NumPy 2)."""
    _square("solve", a)
    if np.ndim(b) == 1 and np.ndim(a) > 2:
        return _bind("solve", a, expand_dims(b, 1))[..., 0]
    return _bind("solve", a, b)


def _matrix_function(name: str) -> Callable[..., Any]:
    def apply(a: Any, *args: Any, **kwargs: Any) -> Any:
        _square(name, a)
        if args or kwargs.get("upper", False):
            raise TraceError(f"{_where()}: np.linalg.{name} options are not supported")
        return _bind(name, a)

    return apply


def slogdet(a: Any) -> Any:
    return SlogdetResult(
        (_matrix_function("detsign")(a), _matrix_function("logabsdet")(a))
    )


def matrix_power(a: Any, n: Any) -> Any:
    """``np.linalg.matrix_power`` with NumPy's multiplications: the identity for
    n = 0 (a constant), ``inv`` for n < 0, then binary decomposition."""
    _square("matrix_power", a)
    try:
        n = operator.index(n)
    except TypeError:
        raise TraceError(
            f"{_where()}: matrix_power: exponent must be an integer"
        ) from None
    if n == 0:
        return np.broadcast_to(np.eye(np.shape(a)[-1]), np.shape(a)) * 1.0
    if n < 0:
        a, n = _bind("inv", a), -n
    if n == 1:
        return a
    if n == 2:
        return matmul(a, a)
    if n == 3:
        return matmul(matmul(a, a), a)
    z = result = None
    while n > 0:
        z = a if z is None else matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else matmul(result, z)
    return result


def pinv(a: Any, rcond: Any = None, hermitian: bool = False, **kwargs: Any) -> Any:
    """``np.linalg.pinv`` with NumPy's cutoff: the generated code calls it with the
    same relative cutoff, so rank decisions at run time are NumPy's."""
    _matrices("pinv", a)
    if rcond is None:
        rtol = kwargs.get("rtol", 1e-15)
        rcond = (
            max(np.shape(a)[-2:]) * np.finfo(np.float64).eps if rtol is None else rtol
        )
    elif "rtol" in kwargs:
        raise TraceError(
            f"{_where()}: np.linalg.pinv: rtol and rcond can't be both set"
        )
    _check(np.ndim(rcond) == 0, "np.linalg.pinv with an array rcond is not supported")
    return _bind("pinv", a, rcond=float(rcond), hermitian=bool(hermitian))


def svdvals(x: Any, /) -> Any:
    """``np.linalg.svdvals``: the singular values, as ``svd(compute_uv=False)``."""
    _matrices("svdvals", x)
    return _bind("svdvals", x)


def svd(
    a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False
) -> Any:
    """``np.linalg.svd``: singular values, or the thin U, S, Vh (the full U or V of a
    non-square matrix has columns that are not unique, and is refused)."""
    _matrices("svd", a)
    _check(not hermitian, "np.linalg.svd(hermitian=True) is not supported; use eigh")
    if not compute_uv:
        return _bind("svdvals", a)
    m, n = np.shape(a)[-2:]
    _check(
        not full_matrices or m == n,
        f"np.linalg.svd of a {m}x{n} matrix with full_matrices=True: the extra "
        "columns of U or V are not unique, so they have no derivative; pass "
        "full_matrices=False",
    )
    full = bool(full_matrices)
    return SVDResult(_bind("svd", a, part=k, full=full) for k in range(3))


def _uplo(name: str, uplo: Any) -> str:
    _check(uplo in ("L", "U"), f"np.linalg.{name}: UPLO must be 'L' or 'U'")
    return str(uplo)


def eigvalsh(a: Any, UPLO: str = "L") -> Any:
    """``np.linalg.eigvalsh``: a function of the triangle ``UPLO`` only, as NumPy's
    (the other triangle gets no derivative)."""
    _square("eigvalsh", a)
    return _bind("eigvalsh", a, uplo=_uplo("eigvalsh", UPLO))


def eigh(a: Any, UPLO: str = "L") -> Any:
    """``np.linalg.eigh``: eigenvalues and eigenvectors of the symmetric matrix of
    one triangle."""
    _square("eigh", a)
    uplo = _uplo("eigh", UPLO)
    return EighResult(_bind("eigh", a, part=k, uplo=uplo) for k in range(2))


FUNCTIONS.update(
    {
        np.dot: Method(dot),
        np.tensordot: tensordot,
        np.linalg.tensordot: lambda x1, x2, /, *, axes=2: tensordot(x1, x2, axes),
        np.linalg.matmul: lambda x1, x2, /: matmul(x1, x2),
        np.linalg.cross: linalg_cross,
        np.cross: cross,
        np.einsum: einsum,
        np.linalg.norm: norm,
        np.linalg.matrix_norm: matrix_norm,
        np.linalg.vector_norm: vector_norm,
        np.linalg.solve: solve,
        np.linalg.inv: _matrix_function("inv"),
        np.linalg.det: _matrix_function("det"),
        np.linalg.slogdet: slogdet,
        np.linalg.cholesky: _matrix_function("cholesky"),
        np.linalg.matrix_power: matrix_power,
        np.linalg.pinv: pinv,
        np.linalg.svd: svd,
        np.linalg.svdvals: svdvals,
        np.linalg.eigvalsh: eigvalsh,
        np.linalg.eigh: eigh,
    }
)
