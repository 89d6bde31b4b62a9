"""Linear algebra: ``matmul`` (NumPy semantics, batched and 1-D cases) and ``einsum``.

``dot``, ``vdot``, ``inner``, ``outer`` and ``trace`` are written with these in the
frontend. Both are bilinear: linear in whichever argument is the tangent.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from difgen.primitives.core import Linear, Primitive, register, unbroadcast


def _mT(x: Any) -> Any:
    return np.swapaxes(x, -1, -2)


# ---------------------------------------------------------------------- matmul
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
        if a.ndim == 1 and np.ndim(b) == 2:
            return [b @ ct, None]
        if a.ndim == 2 and np.ndim(b) == 1:
            return [ct[:, None] * b, None]
        if a.ndim >= 2 and np.ndim(b) >= 2:
            return [unbroadcast(ct @ _mT(b), a.shape), None]
    elif isinstance(b, Linear):
        if b.ndim == 1 and np.ndim(a) == 1:
            return [None, ct * a]
        if b.ndim == 1 and np.ndim(a) == 2:
            return [None, ct @ a]
        if b.ndim == 2 and np.ndim(a) == 1:
            return [None, a[:, None] * ct]
        if b.ndim >= 2 and np.ndim(a) >= 2:
            return [None, unbroadcast(_mT(a) @ ct, b.shape)]
    raise NotImplementedError("matmul of a 1-D and a batched (3-D+) array")


def _sym_matmul(a: Any, b: Any) -> Any:
    return np.asarray(np.matmul(a, b), dtype=object)


register(
    Primitive(
        name="matmul",
        impl=np.matmul,
        emit=lambda args, params: f"{args[0]} @ {args[1]}",
        jvp=_matmul_jvp,
        transpose=_matmul_transpose,
        sympy=_sym_matmul,
        linear=True,
    )
)


# ---------------------------------------------------------------------- einsum
def _parse(spec: str) -> tuple[list[str], str]:
    ins, out = spec.split("->")
    return ins.split(","), out


def _einsum_jvp(out: Any, primals: list[Any], tangents: list[Any], spec: str) -> Any:
    """Multilinear: one term per operand with a tangent."""
    total = None
    for i, t in enumerate(tangents):
        if t is None:
            continue
        ops = list(primals)
        ops[i] = t
        term = np.einsum(spec, *ops)
        total = term if total is None else total + term
    return total


def _einsum_transpose(ct: Any, *operands: Any, spec: str) -> list[Any]:
    """Contract the cotangent with the other operands into the linear one's indices."""
    ins, out = _parse(spec)
    cts: list[Any] = []
    for i, x in enumerate(operands):
        if not isinstance(x, Linear):
            cts.append(None)
            continue
        others = [(s, op) for j, (s, op) in enumerate(zip(ins, operands)) if j != i]
        available = set(out).union(*(set(s) for s, _ in others))
        target = ins[i]
        kept = "".join(c for c in dict.fromkeys(target) if c in available)
        sub = ",".join([out] + [s for s, _ in others]) + "->" + kept
        value = np.einsum(sub, ct, *[op for _, op in others])
        if kept != target:  # indices only x carried (summed away): broadcast back
            shape = {c: n for c, n in zip(target, x.shape)}
            full = "".join(dict.fromkeys(target))
            value = np.einsum(f"{kept}->{kept}", value)
            value = np.reshape(value, [shape[c] if c in kept else 1 for c in full])
            value = np.broadcast_to(value, [shape[c] for c in full])
        if len(set(target)) != len(target):
            raise NotImplementedError("einsum with a repeated index in one operand")
        cts.append(value)
    return cts


register(
    Primitive(
        name="einsum",
        impl=lambda *ops, spec: np.einsum(spec, *ops),
        emit=lambda args, params: f"np.einsum({params['spec']!r}, {', '.join(args)})",
        jvp=_einsum_jvp,
        transpose=_einsum_transpose,
        sympy=lambda *ops, spec: np.asarray(np.einsum(spec, *ops), dtype=object),
        linear=True,
    )
)
