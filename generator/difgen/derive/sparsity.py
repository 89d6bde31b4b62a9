"""Jacobian sparsity patterns of graphs, and column coloring for compressed AD.

The pattern is found by abstract interpretation: every value carries a boolean array
of shape ``value.shape + (n,)`` saying which of the ``n`` input elements it depends on
(``None`` for "on none"), and each equation maps its inputs' patterns to its output's
with its primitive's ``sparsity`` rule (:mod:`difgen.primitives.patterns`, where the
rules of each family are listed).

The pattern is structural: it holds for every input, whatever branch ``where`` takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from difgen.core.ir import Graph, Lit, Var
from difgen.primitives.patterns import Pattern

MAX_PATTERN_ELEMENTS = 50_000_000  # booleans held for one value


class PatternTooLarge(Exception):
    """The input is too large for an explicit pattern (the caller falls back)."""


def jacobian_pattern(graph: Graph, output: int = 0) -> np.ndarray:
    """Boolean ``(y.size, x.size)``: which outputs depend on which elements of input 0.

    >>> from difgen.frontend import trace
    >>> g = trace(lambda x: x[1:] * x[:-1], [((3,), "float64")])
    >>> jacobian_pattern(g).astype(int).tolist()
    [[1, 1, 0], [0, 1, 1]]
    """
    x = graph.inputs[0]
    n = x.size
    env: dict[Var, Pattern] = dict.fromkeys(graph.inputs)
    env[x] = np.eye(n, dtype=bool).reshape((*x.shape, n))

    def read(atom: Any) -> Pattern:
        return None if isinstance(atom, Lit) else env[atom]

    for eqn in graph.eqns:
        if eqn.out.size * n > MAX_PATTERN_ELEMENTS:
            raise PatternTooLarge(f"{eqn.out.size} x {n} pattern")
        value = eqn.primitive.sparsity(eqn, [read(a) for a in eqn.inputs], n)
        env[eqn.out] = None if value is None else np.asarray(value, dtype=bool)
    out = graph.outputs[output]
    pattern = read(out)
    if pattern is None:
        return np.zeros((out.size, n), dtype=bool)
    return pattern.reshape(out.size, n)


def color_columns(pattern: np.ndarray) -> np.ndarray:
    """Greedy distance-1 coloring of the columns: columns sharing a row differ.

    Columns are taken in decreasing order of their number of nonzeros (ties by
    index), each gets the smallest color no column of its rows has.

    >>> color_columns(np.array([[1, 1, 0], [0, 1, 1]], dtype=bool)).tolist()
    [1, 0, 1]
    """
    m, n = pattern.shape
    colors = np.full(n, -1, dtype=np.int64)
    rows_of = [np.flatnonzero(pattern[:, j]) for j in range(n)]
    used_in_row: list[set[int]] = [set() for _ in range(m)]
    order = sorted(range(n), key=lambda j: (-len(rows_of[j]), j))
    for j in order:
        taken: set[int] = set()
        for i in rows_of[j]:
            taken |= used_in_row[i]
        color = next(c for c in range(n + 1) if c not in taken)
        colors[j] = color
        for i in rows_of[j]:
            used_in_row[i].add(color)
    return colors


@dataclass(frozen=True, eq=False)
class Coloring:
    """A jacobian's pattern with a coloring of its columns (or rows) for compression."""

    pattern: np.ndarray  # (m, n) bool
    colors: np.ndarray  # a color per column, or per row when by_rows
    by_rows: bool

    @property
    def ncolors(self) -> int:
        return int(self.colors.max()) + 1 if self.colors.size else 1

    @property
    def nnz(self) -> int:
        return int(self.pattern.sum())

    def nonzeros(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, columns) of the nonzeros in CSR (row-major) order."""
        rows, cols = np.nonzero(self.pattern)
        return rows.astype(np.int64), cols.astype(np.int64)

    def flat_positions(self, n: int) -> np.ndarray:
        """Positions of the nonzeros in the flattened (m, n) matrix."""
        rows, cols = self.nonzeros()
        return rows * n + cols

    def compressed_positions(self, size: int) -> np.ndarray:
        """Positions of the nonzeros in the flattened (colors, size) compressed matrix.

        By columns, entry (i, j) is in row ``colors[j]`` at ``i``; by rows, in row
        ``colors[i]`` at ``j``.
        """
        rows, cols = self.nonzeros()
        if self.by_rows:
            return self.colors[rows] * size + cols
        return self.colors[cols] * size + rows

    def csr_indices(self) -> tuple[np.ndarray, np.ndarray]:
        """(indices, indptr) of the CSR layout."""
        return csr_layout(self.pattern)


def csr_layout(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indices, indptr) of a CSR array with the nonzeros of a 2-D boolean ``mask``.

    >>> [a.tolist() for a in csr_layout(np.array([[1, 0, 1], [0, 1, 0]], dtype=bool))]
    [[0, 2, 1], [0, 2, 3]]
    """
    _, cols = np.nonzero(mask)
    indptr = np.concatenate([[0], np.cumsum(mask.sum(axis=1))])
    return cols.astype(np.int64), indptr.astype(np.int64)


def coloring_of(graph: Graph, by_rows: bool = False) -> Coloring:
    """Detect the jacobian pattern of ``graph`` and color its columns (or rows)."""
    pattern = jacobian_pattern(graph)
    colors = color_columns(pattern.T if by_rows else pattern)
    return Coloring(pattern, colors, by_rows)
