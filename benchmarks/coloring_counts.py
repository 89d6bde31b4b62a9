"""``python -m benchmarks.coloring_counts``: difgen's color counts against the
known optimal ones, on the patterns of issue 21.

For each pattern, the colors of each coloring difgen has (distance-1 columns
for forward mode, distance-1 rows for reverse, the bidirectional partition, and
for symmetric patterns star and acyclic colorings), the one the build chooses,
and the known optimum or a lower bound, with its source. ColPack is not
installable here and SparseMatrixColorings.jl publishes its counts on SuiteSparse
matrices (its tests' reference tables from ColPack's and "What color is your
Jacobian?"'s papers), not on these patterns, so the bars are the chromatic
numbers known for these patterns (proofs in the notes below the table) and,
where none is known, the lower bound every coloring of its kind needs: the
densest row for a column coloring (its columns all differ), the densest column
for a row coloring, a clique's size for star and acyclic colorings.

Writes ``benchmarks/results/coloring_counts.md``; exits 1 when a count is below
its bound (a wrong coloring) or above a known optimum it should reach.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from difgen.derive.coloring import acyclic_coloring, bidirectional_coloring
from difgen.derive.sparsity import (
    choose_coloring,
    color_columns,
    coloring_of_pattern,
    hessian_coloring,
    jacobian_pattern,
    star_coloring,
)
from difgen.primitives.patterns import Rows

RESULTS = Path(__file__).resolve().parent / "results"


def arrowhead(n: int) -> Rows:
    rows = np.concatenate([np.zeros(n, np.int64), np.arange(1, n), np.arange(1, n)])
    cols = np.concatenate([np.arange(n), np.zeros(n - 1, np.int64), np.arange(1, n)])
    return _from_pairs(n, n, rows, cols)


def banded(n: int, k: int) -> Rows:
    rows, cols = [], []
    for d in range(-k, k + 1):
        i = np.arange(max(0, -d), min(n, n - d))
        rows.append(i)
        cols.append(i + d)
    return _from_pairs(n, n, np.concatenate(rows), np.concatenate(cols))


def laplacian(g: int) -> Rows:
    """The 5-point Laplacian on a g x g grid (Dirichlet boundary)."""
    v = np.arange(g * g).reshape(g, g)
    pairs = [(v.ravel(), v.ravel())]
    for a, b in ((v[:, :-1], v[:, 1:]), (v[:-1, :], v[1:, :])):
        pairs += [(a.ravel(), b.ravel()), (b.ravel(), a.ravel())]
    rows = np.concatenate([p[0] for p in pairs])
    cols = np.concatenate([p[1] for p in pairs])
    return _from_pairs(g * g, g * g, rows, cols)


def brusselator(grid: int) -> Rows:
    """The jacobian pattern of the 2-D periodic Brusselator, as difgen detects it."""
    from benchmarks.sparsity_scale import brusselator as rhs
    from difgen.frontend import trace

    n = 2 * grid * grid
    return jacobian_pattern(trace(rhs(grid), [((n,), "float64")]))


def random_pattern(m: int, n: int, per_row: int, seed: int) -> Rows:
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(m), per_row)
    cols = rng.integers(0, n, m * per_row)
    diagonal = np.arange(min(m, n))
    return _from_pairs(
        m, n, np.concatenate([rows, diagonal]), np.concatenate([cols, diagonal])
    )


def _from_pairs(m: int, n: int, rows: np.ndarray, cols: np.ndarray) -> Rows:
    keys = np.unique(rows.astype(np.int64) * n + cols)
    r, c = keys // n, keys % n
    indptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=m), out=indptr[1:])
    return Rows((m,), indptr, c.astype(np.int64), n)


def _symmetrized(p: Rows) -> Rows:
    t = p.transposed()
    rows = np.concatenate([p.row_ids(), t.row_ids()])
    return _from_pairs(p.n, p.n, rows, np.concatenate([p.indices, t.indices]))


@dataclass
class Row:
    pattern: str
    size: str
    nnz: int
    columns: int
    rows: int
    bidirectional: str
    jacobian: str
    star: int | None
    acyclic: int | None
    hessian: str
    bars: list[tuple[str, int, int, bool]]  # (what, count, bar, exact optimum)
    seconds: float


def _count(colors: np.ndarray) -> int:
    return int(colors.max()) + 1 if colors.size else 0


def measure(
    name: str,
    size: str,
    pattern: Rows,
    known: dict[str, tuple[int, bool]],
    symmetric: bool,
) -> Row:
    """Every coloring of ``pattern``; ``known``: coloring -> (bar, exact optimum)."""
    start = time.perf_counter()
    columns = _count(color_columns(pattern))
    rows = _count(coloring_of_pattern(pattern, True).colors)
    both = bidirectional_coloring(pattern, 10**9)
    bidirectional = "" if both is None else f"{both.reverse} + {both.forward}"
    chosen = choose_coloring(pattern, "forward")
    star = acyclic = None
    hessian = ""
    if symmetric:
        star = _count(star_coloring(pattern))
        acyclic = _count(acyclic_coloring(pattern))
        hessian = hessian_coloring(pattern).describe()
    seconds = time.perf_counter() - start
    counts = {
        "columns": columns,
        "rows": rows,
        "jacobian": chosen.ncolors,
        "star": star,
        "acyclic": acyclic,
    }
    bars = [
        (what, int(counts[what] or 0), bar, exact)
        for what, (bar, exact) in known.items()
    ]
    return Row(
        name,
        size,
        pattern.nnz,
        columns,
        rows,
        bidirectional,
        chosen.describe(),
        star,
        acyclic,
        hessian,
        bars,
        seconds,
    )


def rows() -> list[Row]:
    out = []
    n = 1000
    out.append(
        measure(
            "arrowhead",
            f"n = {n}",
            arrowhead(n),
            {
                "columns": (n, True),  # the dense row: all columns differ
                "rows": (n, True),  # the dense column
                "star": (2, True),  # any off-diagonal entry needs 2
                "acyclic": (2, True),
            },
            True,
        )
    )
    out.extend(
        measure(
            f"banded, k = {k}",
            f"n = {n}",
            banded(n, k),
            {
                "columns": (2 * k + 1, True),  # a row's 2k + 1; i mod (2k + 1)
                "acyclic": (k + 1, True),  # a clique of k + 1; i mod (k + 1)
                "star": (3 if k == 1 else k + 1, k == 1),  # a path: 3
            },
            True,
        )
        for k in (1, 2, 5, 10)
    )
    g = 32
    out.append(
        measure(
            "2-D 5-point Laplacian",
            f"{g} x {g}",
            laplacian(g),
            {
                "columns": (5, True),  # a row's 5; (i + 2 j) mod 5
                "star": (5, True),  # Fertin, Raspaud, Reed 2004: grids need 5
                "acyclic": (3, True),  # Fertin, Godard, Raspaud 2003: grids need 3
            },
            True,
        )
    )
    for grid in (16, 32):
        p = brusselator(grid)
        densest = int(p.counts().max())
        out.append(
            measure(
                "Brusselator (periodic)",
                f"{grid} x {grid} x 2",
                p,
                {"columns": (densest, False)},  # lower bound: the densest row
                False,
            )
        )
        sym = _symmetrized(p)
        out.append(
            measure(
                "Brusselator, symmetrized",
                f"{grid} x {grid} x 2",
                sym,
                # the largest clique: a state and its other species' at one point
                {"acyclic": (2, False), "star": (2, False)},
                True,
            )
        )
    p = random_pattern(2000, 2000, 4, seed=21)
    out.append(
        measure(
            "random (seed 21, 4 per row + diagonal)",
            "2000 x 2000",
            p,
            {
                "columns": (int(p.counts().max()), False),
                "rows": (int(p.transposed().counts().max()), False),
            },
            False,
        )
    )
    q = random_pattern(2000, 2000, 4, seed=21)
    q = _with_dense(q, rows=(0, 1000), cols=(7,))
    out.append(
        measure(
            "random + 2 dense rows + 1 dense column",
            "2000 x 2000",
            q,
            {
                "columns": (int(q.counts().max()), True),
                "rows": (int(q.transposed().counts().max()), True),
            },
            False,
        )
    )
    return out


def _with_dense(p: Rows, rows: tuple[int, ...], cols: tuple[int, ...]) -> Rows:
    m, n = p.size, p.n
    r = [p.row_ids()] + [np.full(n, i) for i in rows] + [np.arange(m) for _ in cols]
    c = [p.indices] + [np.arange(n) for _ in rows] + [np.full(m, j) for j in cols]
    return _from_pairs(m, n, np.concatenate(r), np.concatenate(c))


def _fmt(v: int | None) -> str:
    return "" if v is None else str(v)


def table(results: list[Row]) -> tuple[str, bool]:
    lines = [
        "# Color counts against the known optimal ones",
        "",
        (
            "`python -m benchmarks.coloring_counts`: the colors (products) each of "
            "difgen's colorings needs on the patterns of issue 21, the coloring the "
            "build chooses (mode auto: the fewest products, columns by forward, "
            "rows by reverse, or both), and the bars: a known optimum (=) or a "
            "lower bound (>=) for that kind of coloring (notes below)."
        ),
        "",
        (
            "| pattern | size | nnz | columns (forward) | rows (reverse) | "
            "bidirectional (rows + columns) | jacobian chosen | star | acyclic | "
            "hessian chosen | s |"
        ),
        "|---|---|---:|---:|---:|---:|---|---:|---:|---|---:|",
    ]
    lines.extend(
        f"| {r.pattern} | {r.size} | {r.nnz} | {r.columns} | {r.rows} | "
        f"{r.bidirectional} | {r.jacobian} | {_fmt(r.star)} | "
        f"{_fmt(r.acyclic)} | {r.hessian} | {r.seconds:.2f} |"
        for r in results
    )
    lines += ["", "| pattern | size | coloring | difgen | bar | result |"]
    lines.append("|---|---|---|---:|---|---|")
    ok = True
    for r in results:
        for what, count, bar, exact in r.bars:
            if count < bar:
                verdict, ok = "**below the bound: wrong**", False
            elif exact and count == bar:
                verdict = "optimal"
            elif exact:
                verdict = f"{count - bar} above the optimum"
            else:
                verdict = "above the bound" if count > bar else "at the bound"
            sign = "=" if exact else ">="
            lines.append(
                f"| {r.pattern} | {r.size} | {what} | {count} | {sign} {bar} | "
                f"{verdict} |"
            )
    lines += ["", *NOTES]
    return "\n".join(lines) + "\n", ok


NOTES = """\
Notes on the bars:

- Column (row) coloring: the columns of one row (the rows of one column) all differ,
  so the densest row (column) is a lower bound. An arrowhead's dense row and column
  make both n; a band of half-width k has rows of 2k + 1, reached by i mod (2k + 1);
  the 5-point Laplacian's rows have 5, reached by (i + 2 j) mod 5 (Goldfarb and
  Toint, "Optimal estimation of Jacobian and Hessian matrices that arise in finite
  difference calculations", Math. Comp. 43, 1984).
- Star and acyclic colorings are distance-1 colorings of the adjacency graph, so a
  clique (k + 1 consecutive columns of a band) bounds them below. A star graph (the
  arrowhead) is 2-star-colorable; a path needs 3 star colors (a 2-colored path of 4
  vertices is not a star) and 2 acyclic ones; i mod (k + 1) is an acyclic coloring
  of a band (each two-colored subgraph is a path). For grids: star chromatic number
  5 (Fertin, Raspaud and Reed, "Star coloring of graphs", J. Graph Theory 47, 2004),
  acyclic chromatic number 3 (Fertin, Godard and Raspaud, "Acyclic and k-distance
  coloring of the grid", Inf. Process. Lett. 87, 2003).
- The Brusselator and random patterns have no published optimum: their bars are the
  lower bounds. ColPack could not be installed here, and SparseMatrixColorings.jl's
  published reference counts are on SuiteSparse matrices (tables of ColPack's and
  Gebremedhin, Manne and Pothen's papers), not these patterns.
- Greedy colorings follow the largest-first order; on grids that order is known to
  be poor (the Brusselator's columns: 11-12 colors against a bound of 6), which the
  table shows rather than hides.
""".splitlines()


def main(argv: list[str] | None = None) -> int:
    del argv
    text, ok = table(rows())
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "coloring_counts.md").write_text(text)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
