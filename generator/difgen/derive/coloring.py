"""Colorings beyond the distance-1 coloring of columns: bidirectional partitions
for jacobians with dense rows and columns, acyclic colorings of hessians with
their recovery by substitution, and an exact check of any recovery.

A jacobian ``J`` (``m x n``) is computed compressed from products with seed
matrices: ``J S`` (one JVP per color of columns, forward) and ``R^T J`` (one VJP
per color of rows, reverse). A dense row makes every column coloring need ``n``
colors and a dense column every row coloring ``m``; a *bidirectional* partition
takes the entries of some rows from reverse products and all the others from
forward products, so that the rows by reverse are colored among themselves and
the columns by forward only on the remaining rows (Coleman and Verma, "The
efficient computation of sparse Jacobian matrices using automatic
differentiation", 1998; Gebremedhin, Manne and Pothen, "What color is your
Jacobian?", 2005, section 5). An arrowhead needs ``1 + 2`` where either mode
alone needs ``n``.

A hessian ``H`` is symmetric: a coloring of its adjacency graph is *acyclic* when
every two-colored subgraph is a forest (a star coloring asks more: stars). Each
tree is then solved by substitution from its leaves (Gebremedhin, Tarafdar,
Pothen and Walther, "Efficient computation of sparse hessians using coloring and
automatic differentiation", 2009): an edge's entry is its compressed value minus
the entries of the edges below it. :func:`acyclic_tables` writes that
substitution as alternating subtree sums in preorder, which a cumulative sum
computes: a fixed number of vector operations, whatever the trees' depth. A
band of half-width ``k`` needs ``k + 1`` acyclic colors where star coloring needs
more (a path: 2 against 3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from difgen.primitives.patterns import Rows

__all__ = [
    "AcyclicTables",
    "Bicoloring",
    "acyclic_coloring",
    "acyclic_tables",
    "bidirectional_coloring",
    "color_rows_of",
    "restricted",
]


def _color_columns(pattern: Rows) -> np.ndarray:
    from difgen.derive.sparsity import color_columns

    return color_columns(pattern)


def _ncolors(colors: np.ndarray) -> int:
    used = colors[colors >= 0]
    return int(used.max()) + 1 if used.size else 0


def color_rows_of(pattern: Rows) -> np.ndarray:
    """Distance-1 coloring of the rows: rows sharing a column differ."""
    return _color_columns(pattern.transposed())


def restricted(pattern: Rows, rows: np.ndarray) -> Rows:
    """The pattern of the rows where ``rows`` (a boolean mask) is true, the others
    emptied (the shape is kept, so row and column numbers stay)."""
    counts = np.where(rows, pattern.counts(), 0)
    keep = np.repeat(rows, pattern.counts())
    indptr = np.zeros(pattern.size + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return Rows(pattern.shape, indptr, pattern.indices[keep], pattern.n)


# ------------------------------------------------------------ bidirectional
@dataclass(frozen=True, eq=False)
class Bicoloring:
    """Colors of columns (forward) and of rows (reverse), ``-1`` where a column or
    row takes part in no product, and which nonzeros (CSR order) come from the
    reverse products."""

    column_colors: np.ndarray  # per column
    row_colors: np.ndarray  # per row
    from_rows: np.ndarray  # per nonzero

    @property
    def forward(self) -> int:
        return _ncolors(self.column_colors)

    @property
    def reverse(self) -> int:
        return _ncolors(self.row_colors)

    @property
    def total(self) -> int:
        return self.forward + self.reverse


def _partition(pattern: Rows, by_reverse: np.ndarray) -> Bicoloring:
    """The rows where ``by_reverse`` by row colors, the rest by column colors."""
    reverse_part = restricted(pattern, by_reverse)
    forward_part = restricted(pattern, ~by_reverse)
    rows = color_rows_of(reverse_part)
    rows = np.where(by_reverse & (pattern.counts() > 0), rows, -1)
    columns = color_columns_used(forward_part)
    return Bicoloring(columns, rows, np.repeat(by_reverse, pattern.counts()))


def color_columns_used(pattern: Rows) -> np.ndarray:
    """Column colors, ``-1`` for columns with no nonzero (they need no seed)."""
    colors = _color_columns(pattern)
    empty = np.bincount(pattern.indices, minlength=pattern.n) == 0
    return np.where(empty, -1, colors)


def _transposed(b: Bicoloring, pattern: Rows) -> Bicoloring:
    """A bicoloring of ``pattern.transposed()`` as one of ``pattern``."""
    order = np.argsort(pattern.indices, kind="stable")  # CSR of J^T -> of J
    from_rows = np.empty_like(b.from_rows)
    from_rows[order] = ~b.from_rows
    return Bicoloring(b.row_colors, b.column_colors, from_rows)


def _candidates(counts: np.ndarray) -> list[int]:
    """Thresholds on a row's nonzeros: rows above one go by reverse. Only rows
    denser than what the others need can pay: halving thresholds from the
    densest row down to twice the median."""
    if not counts.size:
        return []
    top, floor = int(counts.max()), 2 * max(int(np.median(counts)), 1)
    out, t = [], top // 2
    while t >= floor:
        out.append(t)
        t //= 2
    if not out and top > floor:
        out.append(floor)
    return out


def bidirectional_coloring(pattern: Rows, best: int) -> Bicoloring | None:
    """The best partition found needing fewer than ``best`` products in all, or
    None: dense rows by reverse and the rest by forward, or dense columns by
    forward and the rest by reverse (the same, on the transpose).

    Each candidate costs two colorings (O(nnz)); one that cannot beat ``best``
    by its lower bound (the densest row left to forward, the densest column
    left to reverse) is not colored.
    """
    found: Bicoloring | None = None
    for side in (pattern, pattern.transposed()):
        counts = side.counts()
        for t in _candidates(counts):
            by_reverse = counts > t
            rest = restricted(side, ~by_reverse)
            lower = int(rest.counts().max()) if rest.size else 0
            dense = restricted(side, by_reverse)
            cols = np.bincount(dense.indices, minlength=side.n)
            lower += int(cols.max()) if cols.size else 0
            if lower >= best:
                continue
            b = _partition(side, by_reverse)
            if b.total < best:
                found = b if side is pattern else _transposed(b, pattern)
                best = b.total
    return found


# ------------------------------------------------------------------ acyclic
def acyclic_coloring(pattern: Rows) -> np.ndarray:
    """A greedy acyclic coloring of a symmetric ``(n, n)`` pattern's columns.

    Neighbors differ (distance-1), and no cycle of the off-diagonal graph is
    two-colored. Vertices are taken in decreasing order of degree (ties by
    index); each gets the smallest color ``c`` no neighbor has and such that no
    two neighbors of one color ``d`` are already joined in the ``{c, d}``
    forest. The forests' trees are kept in one union-find over
    (vertex, other color) keys: key ``(v, d)`` is ``v``'s tree among colors
    ``colors[v]`` and ``d``. Each color tried costs the vertex's neighbors:
    O(nnz * colors) finds in all.

    >>> i = np.arange(5)
    >>> path = np.abs(i[:, None] - i[None, :]) <= 1
    >>> acyclic_coloring(Rows.from_dense(path)).tolist()
    [1, 0, 1, 0, 1]
    """
    n = pattern.n
    indptr, indices = pattern.indptr.tolist(), pattern.indices.tolist()
    neighbors = [
        [k for k in indices[indptr[i] : indptr[i + 1]] if k != i] for i in range(n)
    ]
    order = np.argsort(-np.array([len(a) for a in neighbors]), kind="stable")
    colors = [-1] * n
    parent: dict[tuple[int, int], tuple[int, int]] = {}

    def find(key: tuple[int, int]) -> tuple[int, int]:
        root = key
        while (up := parent.get(root, root)) != root:
            root = up
        while key != root:  # path compression
            up = parent.get(key, key)
            parent[key] = root
            key = up
        return root

    for v in order.tolist():
        colored = [w for w in neighbors[v] if colors[w] >= 0]
        taken = {colors[w] for w in colored}
        c = 0
        while True:
            while c in taken:
                c += 1
            seen: set[tuple[int, int]] = set()
            for w in colored:
                root = find((w, c))
                if root in seen:
                    break  # two neighbors of one color already in one {c, d} tree
                seen.add(root)
            else:
                break
            c += 1
        colors[v] = c
        for w in colored:
            a, b = find((v, colors[w])), find((w, c))
            if a != b:
                parent[a] = b
    return np.array(colors, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class AcyclicTables:
    """The substitution recovering a symmetric pattern's nonzeros from
    ``B`` (``(colors, n)`` flattened, one zero appended at ``colors * n``).

    ``vals = signs * B[gather]`` in preorder of the forests' nodes, ``S`` its
    cumulative sum with a leading zero; node ``d``'s edge to its parent is
    ``signs[d] * (S[ends[d]] - S[starts[d]])``. The nonzeros are then
    ``concat(B, edges)[positions]``.
    """

    gather: np.ndarray  # per node: flat index into B (the appended zero at roots)
    signs: np.ndarray  # per node: (-1) ** depth
    starts: np.ndarray  # per node: its preorder index
    ends: np.ndarray  # per node: past its subtree
    positions: np.ndarray  # per nonzero: into concat(B, edges)

    def recover(self, compressed: np.ndarray) -> np.ndarray:
        """The nonzeros from ``compressed`` (``(colors, n)``), in NumPy (tests)."""
        b = np.concatenate([np.ravel(compressed), [0.0]])
        sums = np.concatenate([[0.0], np.cumsum(self.signs * b[self.gather])])
        edges = self.signs * (sums[self.ends] - sums[self.starts])
        return np.concatenate([b, edges])[self.positions]


def acyclic_tables(pattern: Rows, colors: np.ndarray) -> AcyclicTables:
    """The substitution tables of an acyclic coloring (see :class:`AcyclicTables`).

    In the ``{a, b}`` forest, a non-root vertex ``d`` of parent ``p`` has
    ``B[colors[p], d] = H[d, p] + sum of H[d, k]`` over its children ``k`` (its
    neighbors of ``p``'s color are exactly its parent and children), so its edge
    is its compressed value minus its children's edges: the alternating sum of
    the compressed values over its subtree. A diagonal entry ``H[i, i]`` is
    ``B[colors[i], i]`` (no neighbor shares its color).
    """
    n = pattern.n
    ncolors = _ncolors(colors) or 1
    zero = ncolors * n
    rows, cols = pattern.row_ids(), pattern.indices.astype(np.int64)
    upper = rows < cols
    eu, ev = rows[upper], cols[upper]
    lo = np.minimum(colors[eu], colors[ev])
    hi = np.maximum(colors[eu], colors[ev])
    pair = lo * ncolors + hi
    order = np.lexsort((ev, eu, pair))
    eu, ev, pair = eu[order], ev[order], pair[order]
    gather: list[int] = []
    signs: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    edge_node: dict[tuple[int, int], int] = {}
    bounds = np.flatnonzero(np.diff(pair)) + 1
    for us, vs in zip(np.split(eu, bounds), np.split(ev, bounds)):
        adjacent: dict[int, list[int]] = {}
        for u, v in zip(us.tolist(), vs.tolist()):
            adjacent.setdefault(u, []).append(v)
            adjacent.setdefault(v, []).append(u)
        done: set[int] = set()
        for root in sorted(adjacent):
            if root in done:
                continue
            # iterative preorder: (vertex, parent, depth)
            stack = [(root, -1, 0)]
            while stack:
                v, p, depth = stack.pop()
                if v < 0:  # closing marker
                    ends[p] = len(starts)
                    continue
                done.add(v)
                node = len(starts)
                starts.append(node)
                ends.append(node + 1)
                signs.append(1 if depth % 2 == 0 else -1)
                gather.append(zero if p < 0 else int(colors[p]) * n + v)
                if p >= 0:
                    edge_node[(min(v, p), max(v, p))] = node
                stack.append((-1, node, 0))
                stack.extend((w, v, depth + 1) for w in adjacent[v] if w != p)
    edges_at = zero + 1
    positions = np.empty(rows.size, dtype=np.int64)
    diagonal = rows == cols
    positions[diagonal] = colors[rows[diagonal]] * n + rows[diagonal]
    off = np.flatnonzero(~diagonal)
    positions[off] = [
        edges_at + edge_node[(min(i, j), max(i, j))]
        for i, j in zip(rows[off].tolist(), cols[off].tolist())
    ]
    return AcyclicTables(
        np.array(gather, dtype=np.int64),
        np.array(signs, dtype=np.float64),
        np.array(starts, dtype=np.int64),
        np.array(ends, dtype=np.int64),
        positions,
    )
