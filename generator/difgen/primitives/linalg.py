"""Linear algebra: ``matmul`` (NumPy semantics, batched and 1-D cases), ``einsum``,
the ``np.linalg`` rows ``solve``, ``inv``, ``det``, ``slogdet`` and ``cholesky``, and
the decompositions ``svdvals``, ``svd``, ``eigvalsh``, ``eigh`` and ``pinv``.

``dot``, ``tensordot``, ``cross``, ``vdot``, ``inner``, ``outer``, ``trace``,
``matrix_power`` and the norms are written with these in the frontend
(:mod:`difgen.frontend.linalg_api`). ``matmul`` and ``einsum`` are bilinear and
``solve`` is linear in its right-hand side: linear in whichever argument is the
tangent. The other rows are nonlinear; their JVPs are written with ``solve``,
``inv``, ``matmul`` and the decompositions themselves (the SVD's JVP uses U and V).

The SymPy lowering of a stack of matrices unrolls the (static) stack. The
decompositions have no SymPy lowering (LAPACK computes them at run time): they raise
:class:`SymbolicDecomposition`, which the SymPy backend reports at the config's
``backend`` line and the trace backend's scalar emission answers with vector code.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from difgen import precision
from difgen.core import simplify as identities
from difgen.core.batching import lift_batched
from difgen.core.expr import Expr, argument, atom, call, infix
from difgen.core.ir import Eqn, FrozenArray
from difgen.core.primitive import (
    MATMUL_LOOP,
    NOT_DIFFERENTIABLE,
    Deferred,
    Linear,
    no_loop_form,
    register,
    unbroadcast,
)
from difgen.core.tracer import bind, bind_name
from difgen.primitives import patterns
from difgen.primitives.family import contraction, matrix_function
from difgen.primitives.indexing import scatter_add


def _mT(x: Any) -> Any:
    return np.swapaxes(x, -1, -2)


def _stack_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*(s[:-2] for s in shapes)))


# ---------------------------------------------------------------------- matmul
def _matmul_shape(a: Any, b: Any) -> Any:
    (sa, _), (sb, _) = a, b
    if len(sa) == 1 and len(sb) == 1:
        return (), "float64"
    if len(sa) == 1:
        return (*sb[:-2], sb[-1]), "float64"
    if len(sb) == 1:
        return sa[:-1], "float64"
    return (*_stack_shape(sa, sb), sa[-2], sb[-1]), "float64"


def _matmul_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """Product rule."""
    (a, b), (da, db) = primals, tangents
    terms = [None if da is None else da @ b, None if db is None else a @ db]
    if terms[0] is None:
        return terms[1]
    return terms[0] if terms[1] is None else terms[0] + terms[1]


def _matmul_transpose(ct: Any, a: Any, b: Any) -> list[Any]:
    """ct @ b^T for the left factor, a^T @ ct for the right; 1-D factors by case."""
    if isinstance(a, Linear):
        if a.ndim == 1 and np.ndim(b) == 1:
            return [ct * b, None]
        if a.ndim == 1:  # y[..., p] = a[n] b[..., n, p]
            value = b @ ct if np.ndim(b) == 2 else (b @ ct[..., None])[..., 0]
            return [unbroadcast(value, a.shape), None]
        if np.ndim(b) == 1:  # y[..., m] = a[..., m, n] b[n]
            return [ct[..., None] * b, None]
        return [unbroadcast(ct @ _mT(b), a.shape), None]
    if not isinstance(b, Linear):
        raise TypeError("matmul transpose needs a linear operand")
    if b.ndim == 1 and np.ndim(a) == 1:
        return [None, ct * a]
    if b.ndim == 1:  # y[..., m] = a[..., m, n] b[n]
        value = ct @ a if np.ndim(a) == 2 else (ct[..., None, :] @ a)[..., 0, :]
        return [None, unbroadcast(value, b.shape)]
    if np.ndim(a) == 1:  # y[..., p] = a[n] b[..., n, p]
        return [None, a[:, None] * ct[..., None, :]]
    return [None, unbroadcast(_mT(a) @ ct, b.shape)]


def _matmul_batch(args: Any, batched: Any, k: int) -> Any:
    """One matmul with the batch axis in front: single GEMMs where the shapes allow."""
    (a, b), (ba, bb) = args, batched
    na, nb = np.ndim(a) - ba, np.ndim(b) - bb
    out_shape = (k, *_matmul_shape((np.shape(a)[ba:], ""), (np.shape(b)[bb:], ""))[0])
    if ba and not bb and nb <= 2:
        return a @ b  # (k, ..., m, n) @ (n, p): the batch is a stack dimension
    if bb and not ba and nb == 1 and na <= 2:
        return b @ (a.T if na == 2 else a)  # (k, n) @ (n, m): one GEMM
    # General case: both operands as stacks of matrices of equal rank.
    if na == 1:
        a = np.expand_dims(a, -2)
    if nb == 1:
        b = np.expand_dims(b, -1)
    rank = max(np.ndim(a) - ba, np.ndim(b) - bb)
    a = lift_batched(a, rank) if ba else a
    b = lift_batched(b, rank) if bb else b
    return np.reshape(a @ b, out_shape)


_MATMUL = infix("@")


def _matmul_form(args: Sequence[Expr], params: Mapping[str, Any], avals: Any) -> Expr:
    """``a @ b``; ``np.matmul(a, b, dtype=np.float64)`` rounded to float32 where
    the module accumulates in float64."""
    if precision.accumulating():
        a, b = map(argument, args)
        return atom(precision.widened(f"np.matmul({a}, {b})"))
    return _MATMUL(args, params, avals)


def _matmul_work(eqn: Eqn) -> int:
    """A multiply-add per output element and element of the contracted axis."""
    a = eqn.inputs[0]
    inner = a.shape[-1] if a.shape else 1
    return max(eqn.out.size, 1) * inner


register(
    contraction(
        "matmul",
        np.matmul,
        _matmul_form,
        jvp=_matmul_jvp,
        transpose=_matmul_transpose,
        sympy=lambda a, b: np.asarray(np.matmul(a, b), dtype=object),
        shape_rule=_matmul_shape,
        batch=_matmul_batch,
        work=_matmul_work,
        simplify=identities.matmul_identities,
        sparsity=patterns.matmul,
        c_loop=MATMUL_LOOP,
    )
)


# ---------------------------------------------------------------------- einsum
def _parse(spec: str) -> tuple[list[str], str]:
    ins, out = spec.split("->")
    return ins.split(","), out


def _einsum_shape(*operands: Any, spec: str, optimize: Any = False) -> Any:
    ins, out = _parse(spec)
    dims = {c: n for s, (shape, _) in zip(ins, operands) for c, n in zip(s, shape)}
    return tuple(dims[c] for c in out), "float64"


def _einsum_jvp(
    out: Any, primals: list[Any], tangents: list[Any], spec: str, optimize: Any = False
) -> Any:
    """Multilinear: one term per operand with a tangent (in einsum's default order:
    ``optimize`` only decides the rounding of the user's own value)."""
    total = None
    for i, t in enumerate(tangents):
        if t is None:
            continue
        ops = list(primals)
        ops[i] = t
        term = np.einsum(spec, *ops)
        total = term if total is None else total + term
    return total


def _einsum_transpose(
    ct: Any, *operands: Any, spec: str, optimize: Any = False
) -> list[Any]:
    """Contract the cotangent with the other operands into the linear one's indices.

    An index repeated in the linear operand (``'ii->i'``) reads its diagonal, so the
    cotangent is contracted into the distinct indices and scattered into the
    diagonal positions (zero elsewhere)."""
    ins, out = _parse(spec)
    cts: list[Any] = []
    for i, x in enumerate(operands):
        if not isinstance(x, Linear):
            cts.append(None)
            continue
        target = ins[i]
        sizes = dict(zip(target, x.shape))
        distinct = "".join(dict.fromkeys(target))
        others = [(s, op) for j, (s, op) in enumerate(zip(ins, operands)) if j != i]
        available = set(out).union(*(set(s) for s, _ in others))
        kept = "".join(c for c in distinct if c in available)
        sub = ",".join([out] + [s for s, _ in others]) + "->" + kept
        value = np.einsum(sub, ct, *[op for _, op in others])
        if kept != distinct:  # indices only x carried (summed away): broadcast back
            value = np.reshape(value, [sizes[c] if c in kept else 1 for c in distinct])
            value = np.broadcast_to(value, [sizes[c] for c in distinct])
        if distinct != target:
            value = _onto_diagonal(value, distinct, target, x.shape)
        cts.append(value)
    return cts


def _onto_diagonal(value: Any, distinct: str, target: str, shape: Any) -> Any:
    """``value`` (indexed by ``distinct``) written where ``x[target]`` reads it: the
    transpose of taking a diagonal is a scatter into it."""
    grid = np.indices(np.shape(value))
    index = tuple(FrozenArray(grid[distinct.index(c)]) for c in target)
    return scatter_add(value, index, tuple(shape))


def _einsum_batch(
    args: Any, batched: Any, k: int, spec: str, optimize: Any = False
) -> Any:
    """A fresh index letter for the batch axis, in front of each batched operand."""
    ins, out = _parse(spec)
    letter = next(c for c in string.ascii_letters if c not in spec)
    ins = [letter + s if b else s for s, b in zip(ins, batched)]
    return np.einsum(",".join(ins) + "->" + letter + out, *args, optimize=optimize)


def _einsum_form(args: Sequence[Expr], params: Mapping[str, Any], avals: Any) -> Expr:
    """``optimize`` (recorded only when the user passed it) is passed on: NumPy's
    contraction order is then the user's, and so is the rounding."""
    extra = f", optimize={params['optimize']!r}" if "optimize" in params else ""
    operands = ", ".join(map(argument, args))
    return atom(precision.widened(f"np.einsum({params['spec']!r}, {operands}{extra})"))


def _einsum_work(eqn: Eqn) -> int:
    """A multiply-add per output element and combination of the summed indices."""
    ins, out = _parse(eqn.params.as_dict()["spec"])
    sizes: dict[str, int] = {}
    for sub, operand in zip(ins, eqn.inputs):
        sizes.update(zip(sub, operand.shape))
    summed = [n for c, n in sizes.items() if c not in out]
    return max(eqn.out.size, 1) * int(np.prod(summed, dtype=np.int64))


register(
    contraction(
        "einsum",
        lambda *ops, spec, optimize=False: np.einsum(spec, *ops, optimize=optimize),
        _einsum_form,
        jvp=_einsum_jvp,
        transpose=_einsum_transpose,
        sympy=lambda *ops, spec, optimize=False: np.asarray(
            np.einsum(spec, *ops), dtype=object
        ),
        shape_rule=_einsum_shape,
        batch=_einsum_batch,
        work=_einsum_work,
        c_loop=no_loop_form("a general contraction (NumPy's einsum)"),
    )
)


# ------------------------------------------------- stacks on the SymPy backend
def _each_matrix(fn: Any, *stacks: Any) -> Any:
    """``fn`` of each matrix of broadcast stacks, as one object array: the SymPy
    lowering of a stack unrolls it (the stack shape is static)."""
    lead = _stack_shape(*(np.shape(s) for s in stacks))
    if not lead:
        return fn(*stacks)
    full = [np.broadcast_to(s, (*lead, *np.shape(s)[-2:])) for s in stacks]
    parts = [
        np.asarray(fn(*(s[i] for s in full)), dtype=object) for i in np.ndindex(*lead)
    ]
    out = np.empty((int(np.prod(lead)), *parts[0].shape), dtype=object)
    for k, part in enumerate(parts):
        out[k, ...] = part
    return out.reshape(*lead, *parts[0].shape)


# ----------------------------------------------------------------------- solve
def _solve_shape(a: Any, b: Any) -> Any:
    (sa, _), (sb, _) = a, b
    if len(sb) == 1:
        return sb, "float64"
    return (*_stack_shape(sa, sb), *sb[-2:]), "float64"


def _solve_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """dx = A^-1 (db - dA x)."""
    (a, _), (da, db) = primals, tangents
    rhs = db
    if da is not None:
        term = da @ out
        rhs = -term if rhs is None else rhs - term
    return None if rhs is None else solve(a, rhs)


def _solve_transpose(ct: Any, a: Any, b: Any) -> list[Any]:
    """Linear in the right-hand side only: ct_b = A^-T ct."""
    if isinstance(a, Linear) or not isinstance(b, Linear):
        raise TypeError("solve is linear in its right-hand side only")
    return [None, unbroadcast(solve(_mT(a), ct), b.shape)]


def _solve_batch(args: Any, batched: Any, k: int) -> Any:
    """With one matrix, all right-hand sides go to a single factorization."""
    (a, b), (ba, bb) = args, batched
    if not ba and np.ndim(a) == 2:
        n = np.shape(a)[0]
        if np.ndim(b) == 2:  # (k, n) vectors
            return np.transpose(solve(a, np.transpose(b)))
        m = np.shape(b)[-1]  # (k, n, m) matrices
        columns = np.reshape(np.transpose(b, (1, 0, 2)), (n, k * m))
        return np.transpose(np.reshape(solve(a, columns), (n, k, m)), (1, 0, 2))
    vector = np.ndim(b) - bb == 1
    if vector:
        b = np.expand_dims(b, -1)
    rank = max(np.ndim(a) - ba, np.ndim(b) - bb)
    a = lift_batched(a, rank) if ba else np.broadcast_to(a, (k, *np.shape(a)))
    b = lift_batched(b, rank) if bb else b
    out = solve(a, b)
    return out[..., 0] if vector else out


HEADS = "difgen.primitives.heads.linalg"

solve_p = register(
    matrix_function(
        "solve",
        np.linalg.solve,
        call("np.linalg.solve({0}, {1})"),
        jvp=_solve_jvp,
        transpose=_solve_transpose,  # linear in the right-hand side
        sympy=Deferred(f"{HEADS}:solve"),
        shape_rule=_solve_shape,
        batch=_solve_batch,
    )
)


def solve(a: Any, b: Any) -> Any:
    """``np.linalg.solve`` (``b`` 1-D only with a single matrix), traced or eager."""
    return bind(solve_p, a, b)


# ------------------------------------------------------ nonlinear matrix functions
def _inv_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """d inv(A) = -inv(A) dA inv(A)."""
    return None if tangents[0] is None else -(out @ tangents[0] @ out)


def _logabsdet_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """d log|det A| = trace(A^-1 dA)."""
    (a,), (da,) = primals, tangents
    if da is None:
        return None
    return np.sum(_mT(bind(inv_p, a)) * da, axis=(-2, -1))


def _det_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """d det A = det A trace(A^-1 dA)."""
    d = _logabsdet_jvp(out, primals, tangents)
    return None if d is None else out * d


def _cholesky_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """dL = L phi(L^-1 dS L^-T), dS the symmetric matrix NumPy reads (lower half)."""
    (a,), (da,) = primals, tangents
    if da is None:
        return None
    n = np.shape(a)[-1]
    lower = np.tril(np.ones((n, n)))
    strict = np.tril(np.ones((n, n)), -1)
    sym = da * lower + _mT(da * strict)
    inner = solve(out, _mT(solve(out, sym)))
    return out @ (inner * (strict + 0.5 * np.eye(n)))


_SQUARE = lambda a: (a[0], "float64")
_STACK = lambda a: (a[0][:-2], "float64")

inv_p = register(
    matrix_function(
        "inv",
        np.linalg.inv,
        call("np.linalg.inv({0})"),
        jvp=_inv_jvp,
        sympy=Deferred(f"{HEADS}:inv"),
        shape_rule=_SQUARE,
    )
)
for _prim in (
    matrix_function(
        "det",
        np.linalg.det,
        call("np.linalg.det({0})"),
        jvp=_det_jvp,
        sympy=Deferred(f"{HEADS}:det"),
        shape_rule=_STACK,
    ),
    matrix_function(
        "logabsdet",
        lambda a: np.linalg.slogdet(a)[1],
        call("np.linalg.slogdet({0})[1]"),
        jvp=_logabsdet_jvp,
        sympy=Deferred(f"{HEADS}:logabsdet"),
        shape_rule=_STACK,
    ),
    matrix_function(
        "detsign",
        lambda a: np.linalg.slogdet(a)[0],
        call("np.linalg.slogdet({0})[0]"),
        jvp=NOT_DIFFERENTIABLE,
        sympy=Deferred(f"{HEADS}:detsign"),
        shape_rule=_STACK,
        sparsity=patterns.no_dependence,
    ),
    matrix_function(
        "cholesky",
        np.linalg.cholesky,
        call("np.linalg.cholesky({0})"),
        jvp=_cholesky_jvp,
        sympy=Deferred(f"{HEADS}:cholesky"),
        shape_rule=_SQUARE,
    ),
):
    register(_prim)


# ------------------------------------------- decompositions (trace backend only)
class SymbolicDecomposition(NotImplementedError):
    """A decomposition (SVD, eigen-decomposition, pseudo-inverse) has no closed
    form SymPy could differentiate usefully: the SymPy backend refuses it, and the
    trace backend's scalar emission falls back to vector code."""


def _no_sympy(what: str) -> Any:
    """The ``sympy`` field of a decomposition: a refusal saying why."""

    def refuse(*args: Any, **params: Any) -> Any:
        raise SymbolicDecomposition(
            f"{what} is computed by LAPACK at run time and has no symbolic form"
        )

    return refuse


def _param_batch(name: str) -> Any:
    """NumPy's decompositions take stacks: the batch is one more stack axis (the
    rule of :func:`~difgen.primitives.family.stack_batch`, keeping the params)."""

    def rule(args: Any, batched: Any, k: int, **params: Any) -> Any:
        """The function of the stack, with the same params."""
        return bind_name(name, args[0], **params)

    return rule


def _off_diagonal_inverse(d: Any, n: int) -> Any:
    """``1 / d`` off the diagonal and 0 on it (``d`` is zero on its diagonal).

    Equal eigenvalues or singular values off the diagonal make it infinite: the
    eigenvectors are not unique there, and the derivative is inf or NaN rather than
    a silently chosen value."""
    eye = np.eye(n)
    return (1.0 - eye) / (d + eye)


# ----------------------------------------------------------------------- svd
def _svd_dims(shape: tuple[int, ...]) -> tuple[int, int, int]:
    m, n = shape[-2:]
    return m, n, min(m, n)


def _svdvals_shape(a: Any) -> Any:
    shape = a[0]
    return (*shape[:-2], _svd_dims(shape)[2]), "float64"


def _svd_shape(a: Any, part: int, full: bool) -> Any:
    shape = a[0]
    m, n, k = _svd_dims(shape)
    return ((*shape[:-2], m, k), (*shape[:-2], k), (*shape[:-2], k, n))[part], "float64"


def _svd_parts(a: Any, full: bool = False) -> tuple[Any, Any, Any]:
    """U, s and V (not V^T) of the thin SVD, traced (``full``: the same LAPACK call
    as NumPy's default, allowed for square matrices, where it is the thin one)."""
    u = bind_name("svd", a, part=0, full=full)
    s = bind_name("svd", a, part=1, full=full)
    v = _mT(bind_name("svd", a, part=2, full=full))
    return u, s, v


def _svdvals_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """d s_i = u_i^T dA v_i."""
    (a,), (da,) = primals, tangents
    if da is None:
        return None
    u, _, v = _svd_parts(a)
    return np.sum(u * (da @ v), axis=-2)


def _svd_jvp(
    out: Any, primals: list[Any], tangents: list[Any], part: int, full: bool
) -> Any:
    """The thin SVD's differential (as JAX's ``svd_jvp_rule``, real case):
    dP = U^T dA V, ds = diag(dP), dU = U (F o (dP S + S dP^T)) + (I - U U^T) dA V
    / s, dV = V (F o (S dP + dP^T S)) + (I - V V^T) dA^T U / s, with F_ij =
    1 / (s_j^2 - s_i^2): infinite at repeated singular values, where U and V are
    not unique."""
    (a,), (da,) = primals, tangents
    if da is None:
        return None
    u, s, v = _svd_parts(a, full)
    m, n, k = _svd_dims(np.shape(a))
    dp = _mT(u) @ da @ v
    if part == 1:
        return np.sum(u * (da @ v), axis=-2)
    row, col = np.expand_dims(s, -2), np.expand_dims(s, -1)  # s_j, s_i
    f = _off_diagonal_inverse((row + col) * (row - col), k)
    if part == 0:
        dps = dp * row
        du = u @ (f * (dps + _mT(dps)))
        if m > k:
            dav = da @ v
            du = du + (dav - u @ (_mT(u) @ dav)) / row
        return du
    sdp = col * dp
    dv = v @ (f * (sdp + _mT(sdp)))
    if n > k:
        dau = _mT(da) @ u
        dv = dv + (dau - v @ (_mT(v) @ dau)) / row
    return _mT(dv)


svdvals_p = register(
    matrix_function(
        "svdvals",
        lambda a: np.linalg.svd(a, compute_uv=False),
        call("np.linalg.svd({0}, compute_uv=False)"),
        jvp=_svdvals_jvp,
        sympy=_no_sympy("np.linalg.svd"),
        shape_rule=_svdvals_shape,
    )
)
svd_p = register(
    matrix_function(
        "svd",
        lambda a, part, full: np.linalg.svd(a, full_matrices=full)[part],
        call("np.linalg.svd({0}, full_matrices={full})[{part}]"),
        jvp=_svd_jvp,
        sympy=_no_sympy("np.linalg.svd"),
        shape_rule=_svd_shape,
        batch=_param_batch("svd"),
    )
)


# ---------------------------------------------------------------------- eigh
def _symmetric(a: Any, uplo: str) -> Any:
    """The symmetric matrix LAPACK reads from one triangle of ``a`` (NumPy's
    ``eigh``/``eigvalsh`` never look at the other one)."""
    n = np.shape(a)[-1]
    strict = np.tril(np.ones((n, n)), -1)
    if uplo == "U":
        strict = strict.T
    keep = strict + np.eye(n)
    return a * keep + _mT(a * strict)


def _eigh_shape(a: Any, part: int, uplo: str) -> Any:
    shape = a[0]
    return (shape[:-1], shape)[part], "float64"


def _eigvalsh_shape(a: Any, uplo: str) -> Any:
    return a[0][:-1], "float64"


def _eigvalsh_jvp(out: Any, primals: list[Any], tangents: list[Any], uplo: str) -> Any:
    """d w_i = v_i^T dS v_i, dS the symmetric matrix of the triangle NumPy reads."""
    (a,), (da,) = primals, tangents
    if da is None:
        return None
    v = bind_name("eigh", a, part=1, uplo=uplo)
    return np.sum(v * (_symmetric(da, uplo) @ v), axis=-2)


def _eigh_jvp(
    out: Any, primals: list[Any], tangents: list[Any], part: int, uplo: str
) -> Any:
    """dw = diag(V^T dS V), dV = V (F o V^T dS V), F_ij = 1 / (w_j - w_i): infinite
    at repeated eigenvalues, where the eigenvectors are not unique."""
    (a,), (da,) = primals, tangents
    if da is None:
        return None
    v = bind_name("eigh", a, part=1, uplo=uplo)
    dsv = _symmetric(da, uplo) @ v
    if part == 0:
        return np.sum(v * dsv, axis=-2)
    w = bind_name("eigh", a, part=0, uplo=uplo)
    n = np.shape(a)[-1]
    f = _off_diagonal_inverse(np.expand_dims(w, -2) - np.expand_dims(w, -1), n)
    return v @ (f * (_mT(v) @ dsv))


eigvalsh_p = register(
    matrix_function(
        "eigvalsh",
        lambda a, uplo: np.linalg.eigvalsh(a, UPLO=uplo),
        call("np.linalg.eigvalsh({0}, UPLO={uplo!r})"),
        jvp=_eigvalsh_jvp,
        sympy=_no_sympy("np.linalg.eigvalsh"),
        shape_rule=_eigvalsh_shape,
        batch=_param_batch("eigvalsh"),
    )
)
eigh_p = register(
    matrix_function(
        "eigh",
        lambda a, part, uplo: np.linalg.eigh(a, UPLO=uplo)[part],
        call("np.linalg.eigh({0}, UPLO={uplo!r})[{part}]"),
        jvp=_eigh_jvp,
        sympy=_no_sympy("np.linalg.eigh"),
        shape_rule=_eigh_shape,
        batch=_param_batch("eigh"),
    )
)


# ---------------------------------------------------------------------- pinv
def _pinv_shape(a: Any, rcond: float, hermitian: bool) -> Any:
    shape = a[0]
    return (*shape[:-2], shape[-1], shape[-2]), "float64"


def _pinv_jvp(
    out: Any, primals: list[Any], tangents: list[Any], rcond: float, hermitian: bool
) -> Any:
    """Golub and Pereyra's differential of the pseudo-inverse X of A,
    dX = -X dA X + X X^T dA^T (I - A X) + (I - X A) dA^T X^T X.

    Exact where the rank of A is constant near the point (full rank, in particular).
    Where NumPy's ``rcond`` cuts singular values, X is NumPy's truncated
    pseudo-inverse and this is the derivative along perturbations that keep that
    rank; the pseudo-inverse itself is not continuous there."""
    (a,), (da,) = primals, tangents
    if da is None:
        return None
    if hermitian:
        a, da = _symmetric(a, "L"), _symmetric(da, "L")
    m, n = np.shape(a)[-2:]
    x, xt, dat = out, _mT(out), _mT(da)
    left = np.eye(m) - a @ x
    right = np.eye(n) - x @ a
    return -(x @ da @ x) + (x @ xt) @ dat @ left + right @ dat @ (xt @ x)


pinv_p = register(
    matrix_function(
        "pinv",
        lambda a, rcond, hermitian: np.linalg.pinv(a, rcond, hermitian),
        call("np.linalg.pinv({0}, rcond={rcond!r}, hermitian={hermitian!r})"),
        jvp=_pinv_jvp,
        sympy=_no_sympy("np.linalg.pinv"),
        shape_rule=_pinv_shape,
        batch=_param_batch("pinv"),
    )
)

TRACE_ONLY = ("svdvals", "svd", "eigvalsh", "eigh", "pinv")
"""The primitives whose SymPy lowering refuses (:class:`SymbolicDecomposition`): the
SymPy backend refuses functions that use them and points to ``backend = "trace"``
(for the README's supported-surface table)."""
