"""Jacobian sparsity patterns of graphs, and column coloring for compressed AD.

The pattern is found by abstract interpretation: every value carries the set of the
``n`` input elements each of its elements depends on, as compressed rows
(:class:`~difgen.primitives.patterns.Rows`, ``None`` for "on none"), and each
equation maps its inputs' patterns to its output's with its primitive's ``sparsity``
rule (:mod:`difgen.primitives.patterns`, where the rules of each family are listed).
Time and memory follow the nonzeros, not ``size * n``; a step that would hold more
than :data:`~difgen.primitives.patterns.MAX_PATTERN_NONZEROS` entries raises
:class:`PatternTooLarge` before allocating them.

The pattern is structural: it holds for every input, whatever branch ``where`` takes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from difgen.core.ir import Graph, Lit, Var
from difgen.derive.coloring import (
    AcyclicTables,
    Bicoloring,
    acyclic_coloring,
    acyclic_tables,
    bidirectional_coloring,
    color_rows_of,
)
from difgen.primitives.patterns import (
    MAX_PATTERN_NONZEROS,
    Pattern,
    PatternTooLarge,
    Rows,
)

__all__ = [
    "MAX_PATTERN_NONZEROS",
    "Coloring",
    "PatternTooLarge",
    "Rows",
    "choose_coloring",
    "color_columns",
    "coloring_of",
    "csr_layout",
    "hessian_coloring",
    "hessian_coloring_of",
    "jacobian_coloring_of",
    "jacobian_pattern",
    "star_coloring",
    "star_positions",
]


def jacobian_pattern(graph: Graph, output: int = 0) -> Rows:
    """The ``(y.size, x.size)`` pattern: which outputs depend on which elements of
    input 0, as compressed rows.

    >>> from difgen.frontend import trace
    >>> g = trace(lambda x: x[1:] * x[:-1], [((3,), "float64")])
    >>> jacobian_pattern(g).dense().astype(int).tolist()
    [[1, 1, 0], [0, 1, 1]]
    """
    x = graph.inputs[0]
    n = x.size
    env: dict[Var, Pattern] = dict.fromkeys(graph.inputs)
    env[x] = Rows.identity(tuple(x.shape))

    def read(atom: Any) -> Pattern:
        return None if isinstance(atom, Lit) else env[atom]

    for eqn in graph.eqns:
        env[eqn.out] = eqn.primitive.sparsity(eqn, [read(a) for a in eqn.inputs], n)
    out = graph.outputs[output]
    pattern = read(out)
    size = out.size
    if pattern is None:
        return Rows(
            (size,), np.zeros(size + 1, dtype=np.int64), np.zeros(0, np.int64), n
        )
    return Rows((size,), pattern.indptr, pattern.indices, n)


def color_columns(pattern: Rows) -> np.ndarray:
    """Greedy distance-1 coloring of the columns: columns sharing a row differ.

    Columns are taken in decreasing order of their number of nonzeros (ties by
    index), each gets the smallest color none of the columns already colored in
    its rows has. The colors used in each row are a bit mask (one Python integer
    per row), so a column costs its nonzeros: O(nnz) in all.

    >>> color_columns(Rows.from_dense(np.array([[1, 1, 0], [0, 1, 1]], dtype=bool)))
    array([1, 0, 1])
    """
    n = pattern.n
    by_column = pattern.transposed()
    counts = by_column.counts()
    order = np.argsort(-counts, kind="stable")
    rows = by_column.indices.tolist()
    starts = by_column.indptr.tolist()
    used = [0] * pattern.size  # bit c of used[i]: color c is taken in row i
    colors = [0] * n
    for j in order.tolist():
        mine = rows[starts[j] : starts[j + 1]]
        taken = 0
        for i in mine:
            taken |= used[i]
        bit = ~taken & (taken + 1)  # the lowest color not taken
        colors[j] = bit.bit_length() - 1
        for i in mine:
            used[i] |= bit
    return np.array(colors, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class Coloring:
    """A jacobian's pattern with a coloring of its columns (or rows) for compression.

    With ``bicoloring``, some rows' nonzeros come from products by row colors
    (reverse) and the others' from products by column colors (forward); with
    ``acyclic`` (a hessian), the nonzeros are recovered by substitution.
    """

    pattern: Rows  # (m, n) compressed rows
    colors: np.ndarray  # a color per column, or per row when by_rows
    by_rows: bool
    symmetric: bool = False  # a star coloring of a hessian, recovered symmetrically
    acyclic: AcyclicTables | None = None
    bicoloring: Bicoloring | None = None
    acyclic_unused: int = 0  # the fewer acyclic colors a C module does not use

    @property
    def ncolors(self) -> int:
        if self.bicoloring is not None:
            return self.bicoloring.total
        return int(self.colors.max()) + 1 if self.colors.size else 1

    @property
    def mode(self) -> str:
        """``forward``, ``reverse``, or ``both`` (bidirectional)."""
        if self.bicoloring is not None:
            return "both"
        return "reverse" if self.by_rows else "forward"

    def describe(self) -> str:
        """The coloring in words, as the build output and module header say it."""
        if self.acyclic_unused:
            return (
                f"{dataclasses.replace(self, acyclic_unused=0).describe()} (an "
                f"acyclic coloring needs {self.acyclic_unused}, but its "
                "substitution, a scan over the compressed products, is slower in C)"
            )
        if self.acyclic is not None or self.symmetric:
            kind = "acyclic" if self.acyclic is not None else "star"
            return f"{kind} coloring, {_count(self.ncolors, 'color')}"
        if self.bicoloring is not None:
            b = self.bicoloring
            return (
                f"{_count(b.reverse, 'row color')} (reverse), "
                f"{_count(b.forward, 'column color')} (forward)"
            )
        if self.by_rows:
            return f"{_count(self.ncolors, 'row color')} (reverse)"
        return f"{_count(self.ncolors, 'column color')} (forward)"

    @property
    def nnz(self) -> int:
        return self.pattern.nnz

    def nonzeros(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, columns) of the nonzeros in CSR (row-major) order."""
        return self.pattern.row_ids(), self.pattern.indices.astype(np.int64)

    def flat_positions(self, n: int) -> np.ndarray:
        """Positions of the nonzeros in the flattened (m, n) matrix."""
        rows, cols = self.nonzeros()
        return rows * n + cols

    def compressed_positions(self, size: int) -> np.ndarray:
        """Positions of the nonzeros in the flattened (colors, size) compressed matrix.

        By columns, entry (i, j) is in row ``colors[j]`` at ``i``; by rows, in row
        ``colors[i]`` at ``j``; under a star coloring, as :func:`star_positions`
        says (``H S`` and ``S^T H`` are one matrix for a symmetric ``H``).
        """
        if self.symmetric:
            return star_positions(self.pattern, self.colors)
        rows, cols = self.nonzeros()
        if self.by_rows:
            return self.colors[rows] * size + cols
        return self.colors[cols] * size + rows

    def bidirectional_positions(self) -> np.ndarray:
        """Positions of the nonzeros in the forward products ``(forward colors,
        m)`` flattened, followed by the reverse products ``(reverse colors, n)``
        flattened: entry (i, j) at ``column_colors[j] * m + i`` or, from the
        rows, at ``row_colors[i] * n + j`` past the forward block."""
        assert self.bicoloring is not None
        b, (m, n) = self.bicoloring, (self.pattern.size, self.pattern.n)
        rows, cols = self.nonzeros()
        by_columns = b.column_colors[cols] * m + rows
        by_rows = b.forward * m + b.row_colors[rows] * n + cols
        return np.where(b.from_rows, by_rows, by_columns)

    def csr_indices(self) -> tuple[np.ndarray, np.ndarray]:
        """(indices, indptr) of the CSR layout."""
        return (
            self.pattern.indices.astype(np.int64),
            self.pattern.indptr.astype(np.int64),
        )


def _count(k: int, what: str) -> str:
    return f"{k} {what}{'s' * (k != 1)}"


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
    colors = color_columns(pattern.transposed() if by_rows else pattern)
    return Coloring(pattern, colors, by_rows)


def jacobian_coloring_of(graph: Graph, natural: str) -> Coloring:
    """The coloring needing the fewest products: columns (forward), rows
    (reverse), or a bidirectional partition; on a tie, the ``natural`` mode.

    The natural mode's coloring is computed first; the other mode's only when
    its lower bound (the densest column for rows, the densest row for
    columns, which a distance-1 coloring needs at least) is below it, and a
    bidirectional partition only when rows or columns are far denser than
    the median (:func:`~difgen.derive.coloring.bidirectional_coloring`).
    """
    return choose_coloring(jacobian_pattern(graph), natural)


def choose_coloring(pattern: Rows, natural: str) -> Coloring:
    """:func:`jacobian_coloring_of` on a pattern."""
    by_rows = natural == "reverse"
    best = coloring_of_pattern(pattern, by_rows)
    other_side = pattern if by_rows else pattern.transposed()
    lower = int(other_side.counts().max()) if other_side.size else 0
    if lower < best.ncolors:
        other = coloring_of_pattern(pattern, not by_rows)
        if other.ncolors < best.ncolors:
            best = other
    both = bidirectional_coloring(pattern, best.ncolors)
    if both is not None:
        best = Coloring(pattern, both.column_colors, False, bicoloring=both)
    return best


def coloring_of_pattern(pattern: Rows, by_rows: bool) -> Coloring:
    """Distance-1 coloring of a pattern's columns (rows, ``by_rows``)."""
    colors = color_rows_of(pattern) if by_rows else color_columns(pattern)
    return Coloring(pattern, colors, by_rows)


def hessian_coloring_of(
    graph: Graph, by_rows: bool = False, acyclic: bool = True
) -> Coloring:
    """The coloring of a gradient graph's jacobian (a hessian): a star coloring
    when its pattern is symmetric and the star coloring needs fewer colors than
    the distance-1 one, else the distance-1 coloring of :func:`coloring_of`.

    The star coloring is tried first: when it needs fewer colors than the
    densest row has nonzeros (which every distance-1 coloring needs at least),
    the distance-1 coloring is not computed. An arrowhead's dense row makes
    that one as many colors as columns, and its bit masks as wide: at
    n = 10^5 it was 5 s of a 6 s derivation, for a coloring then dropped.

    With ``acyclic``, an acyclic coloring replaces the chosen one where it
    needs fewer colors (a band: ``k + 1`` where star needs more); its
    substitution is a cumulative sum, which the C loops compute as a scan
    (``cumsum``'s loop form) but slower than the star recovery at the nonzeros,
    so the C target asks for none (``graphs.ACYCLIC_IN_C``): the coloring kept
    then says how many colors the acyclic one would need.
    """
    return hessian_coloring(jacobian_pattern(graph), by_rows, acyclic)


def hessian_coloring(
    pattern: Rows, by_rows: bool = False, acyclic: bool = True
) -> Coloring:
    """:func:`hessian_coloring_of` on a pattern."""
    symmetric = pattern.size == pattern.n
    if symmetric:
        mirror = pattern.transposed()
        symmetric = np.array_equal(mirror.indptr, pattern.indptr) and np.array_equal(
            mirror.indices, pattern.indices
        )
    star = star_coloring(pattern) if symmetric else np.zeros(0, dtype=np.int64)
    stars = int(star.max()) + 1 if star.size else 0
    if star.size and stars < int(pattern.counts().max()):
        return _or_acyclic(Coloring(pattern, star, by_rows, symmetric=True), acyclic)
    colors = color_columns(pattern.transposed() if by_rows else pattern)
    coloring = Coloring(pattern, colors, by_rows)
    if star.size and stars < coloring.ncolors:
        coloring = Coloring(pattern, star, by_rows, symmetric=True)
    return _or_acyclic(coloring, acyclic) if symmetric else coloring


def _or_acyclic(coloring: Coloring, use: bool = True) -> Coloring:
    """An acyclic coloring recovered by substitution, where it needs fewer colors
    than ``coloring`` (a symmetric pattern's star or distance-1 coloring); two
    colors are already the fewest any pattern with an off-diagonal entry needs.
    Not ``use``: ``coloring``, saying how many the acyclic one would need."""
    if coloring.ncolors <= 2:
        return coloring
    pattern = coloring.pattern
    colors = acyclic_coloring(pattern)
    fewer = int(colors.max()) + 1
    if fewer >= coloring.ncolors:
        return coloring
    if not use:
        return dataclasses.replace(coloring, acyclic_unused=fewer)
    tables = acyclic_tables(pattern, colors)
    return Coloring(pattern, colors, coloring.by_rows, acyclic=tables)


# ------------------------------------------------------------ hessians: star
def star_coloring(pattern: Rows) -> np.ndarray:
    """A greedy star coloring of a symmetric ``(n, n)`` pattern's columns.

    Columns sharing a row differ (distance-1), and every path of four columns
    through the off-diagonal nonzeros uses at least three colors: every
    two-colored part of the graph is a star forest, which is what recovers each
    ``H[i, j]`` from one compressed product ``H S`` (:func:`star_positions`;
    Gebremedhin, Manne and Pothen, "What color is your Jacobian?", 2005).

    Columns are taken in decreasing order of their nonzeros (ties by index); each
    gets the smallest color that keeps the coloring a star coloring, checked
    exactly on the two-colored components through it: with ``W`` its neighbors of
    a color ``d``, two or more make it a star center, so none may have another
    neighbor of its color; one (``w``) makes it a leaf of ``w``'s star, so each
    other neighbor of ``w`` of its color may have no neighbor of color ``d`` but
    ``w`` (a count kept per column and color, updated as columns are colored).
    Each color tried costs the column's neighbors: O(nnz * colors) in all.

    >>> arrow = np.eye(5, dtype=bool); arrow[0] = arrow[:, 0] = True
    >>> star_coloring(Rows.from_dense(arrow)).tolist()
    [0, 1, 1, 1, 1]
    """
    n = pattern.n
    indptr, indices = pattern.indptr.tolist(), pattern.indices.tolist()
    neighbors = [
        [k for k in indices[indptr[i] : indptr[i + 1]] if k != i] for i in range(n)
    ]
    order = np.argsort(-np.array([len(a) for a in neighbors]), kind="stable")
    colors = [-1] * n
    # by_color[v][c]: the colored neighbors of v of color c
    by_color: list[dict[int, list[int]]] = [{} for _ in range(n)]
    # spoilt[w][c]: how many of by_color[w][c] have another neighbor of w's color
    spoilt: list[dict[int, int]] = [{} for _ in range(n)]

    def keeps_stars(v: int, c: int) -> bool:
        for ws in by_color[v].values():
            if len(ws) >= 2:  # v is the center of a star of these leaves
                if any(c in by_color[w] for w in ws):
                    return False
            elif spoilt[ws[0]].get(c, 0):  # v is a leaf of ws[0]'s star
                return False
        return True

    def count(table: dict[int, int], c: int) -> None:
        table[c] = table.get(c, 0) + 1

    for v in order.tolist():
        c = 0
        while c in by_color[v] or not keeps_stars(v, c):
            c += 1
        colors[v] = c
        for w in neighbors[v]:
            same = by_color[w].setdefault(c, [])
            same.append(v)
            e = colors[w]
            if e < 0:
                continue
            if len(by_color[v].get(e, ())) >= 2:  # v has another neighbor like w
                count(spoilt[w], c)
            if len(same) == 2:  # w now has two neighbors of color c
                for z in same:
                    count(spoilt[z], e)
            elif len(same) > 2:
                count(spoilt[v], e)
    return np.array(colors, dtype=np.int64)


def star_positions(pattern: Rows, colors: np.ndarray) -> np.ndarray:
    """Where each nonzero of a symmetric pattern (CSR order) is in the flattened
    ``(colors, n)`` compressed product ``B`` (``B[c] = H s_c``, ``s_c`` the sum of
    the basis vectors of color ``c``), under a star coloring: ``H[i, j]`` is
    ``B[colors[j], i]`` when ``j`` is the only column of row ``i`` of its color,
    else ``B[colors[i], j]`` (``i`` is then the only one of its color in row
    ``j``).

    >>> arrow = np.eye(3, dtype=bool); arrow[0] = arrow[:, 0] = True
    >>> p = Rows.from_dense(arrow)
    >>> star_positions(p, star_coloring(p)).tolist()
    [0, 1, 2, 1, 4, 2, 5]
    """
    n = pattern.n
    ncolors = int(colors.max()) + 1 if colors.size else 1
    rows, cols = pattern.row_ids(), pattern.indices
    per_row = np.bincount(rows * ncolors + colors[cols], minlength=n * ncolors)
    alone = per_row[rows * ncolors + colors[cols]] == 1
    return np.where(alone, colors[cols] * n + rows, colors[rows] * n + cols)
