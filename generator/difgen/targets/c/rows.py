"""Products that read a large matrix twice, fused into one pass over its rows.

A logistic or least-squares gradient computes ``u = X @ w``, an elementwise
``r = g(u, ...)``, then ``X.T @ r`` (or ``r @ X``): a gemv, then a transposed
gemv, two reads of X. When X is large (:data:`ROW_PASS_SIZE`) the planner
(:mod:`difgen.targets.c.plan`) makes the three one loop group over ``u``'s
shape, ``(n,)`` or ``(n, c)`` for a batch of ``c`` columns: at each row ``i``
(and column ``j``) the *head* computes ``u[i, j]`` as the dot of row ``i`` of
X with column ``j`` of ``w``, the chain computes ``r[i, j]`` from it in
registers, and each *tail* adds ``X[i, :] * r[i, j]`` into its result's column
``j``. X is read once, a row at a time, while the row is in cache.

Floating point: the head's dot is accumulated over the row in index order from
``0.0``, as the loops' own matmul does; a tail's element ``[q, j]`` is
``0.0 + X[0, q] r[0, j] + X[1, q] r[1, j] + ...`` in row order, as the loops'
matmul accumulates its contracted axis: the fused pass is bit-identical to the
unfused loops. Against the BLAS the large products otherwise call (which block
the sums, and may use FMA), the sums are in another order (a relative 1e-13 or
so on the benchmark's 100000x50); a transcendental of the chain is the C
library's, not NumPy's SIMD loop (last-ulp differences). NaN and inf propagate
as in any sum of products.

This module only recognizes the pattern (:func:`head_rows`, :func:`tail_slot`),
on the planner's views; the printer writes the loops from what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from difgen.core.ir import Var
from difgen.targets.c.moves import affine

ROW_PASS_SIZE = 1 << 17
"""From this many elements (1 MiB of doubles, beyond a core's L2 cache), a
matrix that a product reads and a later product reads transposed is read in one
pass over its rows; smaller ones stay in cache between the two products, where
NumPy's BLAS is faster than the loops."""


@dataclass(frozen=True)
class Rows:
    """The matrix of a row pass: its element ``(i, q)`` is ``source``'s flat
    position ``offset + i * row + q * col``; ``n`` rows of ``k``."""

    source: Var
    offset: int
    row: int
    col: int
    n: int
    k: int


def resolved(
    atom: Any, view_of: dict[Var, tuple[Any, np.ndarray]]
) -> tuple[Var, int, tuple[int, ...]] | None:
    """``atom``'s source and its elements' positions there as ``(offset,
    strides)``, when affine (a value in memory, or an affine view of one)."""
    if not isinstance(atom, Var):
        return None
    if atom not in view_of:  # C-contiguous
        shape = tuple(atom.shape)
        strides = tuple(int(np.prod(shape[d + 1 :])) for d in range(len(shape)))
        return atom, 0, strides
    src, table = view_of[atom]
    found = affine(np.asarray(table).reshape(atom.shape))
    if found is None:
        return None
    return src, found[0], found[1]


def _same(strides: tuple[int, ...], want: tuple[int, ...], shape: Any) -> bool:
    """Equal strides, those of axes of length 1 aside (affine gives them 0)."""
    return all(n == 1 or s == w for s, w, n in zip(strides, want, shape))


def head_rows(
    eqn: Any,
    view_of: dict[Var, tuple[Any, np.ndarray]],
    consts: dict[Var, np.ndarray],
) -> Rows | None:
    """The matrix X of ``u = X @ w`` (X 2-D and large, ``w`` a vector or a
    batch of columns, both argument-dependent values at affine positions), or
    None."""
    a, b = eqn.inputs
    if not isinstance(a, Var) or not isinstance(b, Var):
        return None
    if a in consts or b in consts or a.ndim != 2 or b.ndim not in (1, 2):
        return None
    n, k = a.shape
    if a.size < ROW_PASS_SIZE or k == 0 or b.shape[0] != k:
        return None
    if any(d not in ("float64", "float32") for d in (a.dtype, b.dtype)):
        return None
    found, other = resolved(a, view_of), resolved(b, view_of)
    if found is None or other is None:
        return None
    src, offset, (row, col) = found
    return Rows(src, offset, row, col, n, k)


def tail_slot(
    eqn: Any,
    rows: Rows,
    shape: tuple[int, ...],
    view_of: dict[Var, tuple[Any, np.ndarray]],
) -> int | None:
    """Which operand of ``eqn`` is the loop's value ``r`` (of the loop's
    ``shape``) when ``eqn`` is ``X.T @ r`` or ``r @ X`` on the head's X,
    contracting X's rows; else None."""
    a, b = eqn.inputs
    n, k = rows.n, rows.k
    if shape == (n,) and tuple(a.shape) == (n,) and tuple(b.shape) == (n, k):
        slot, matrix, want = 0, b, (rows.row, rows.col)  # r @ X
    elif tuple(b.shape) == shape and shape[0] == n and tuple(a.shape) == (k, n):
        slot, matrix, want = 1, a, (rows.col, rows.row)  # X.T @ r, X.T @ R
    else:
        return None
    found = resolved(matrix, view_of)
    if found is None:
        return None
    src, offset, strides = found
    if src is not rows.source or offset != rows.offset:
        return None
    return slot if _same(strides, want, matrix.shape) else None
