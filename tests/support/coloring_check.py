"""A structural check of a coloring's recovery: the compressed products of a
matrix of the pattern, computed in NumPy as the generated code computes them
(seeds of basis vectors summed per color), then recovered as the coloring says.

Recovery is linear in the matrix, so it is exact for *every* matrix of the
pattern exactly when it is exact on each basis matrix of the pattern (one
nonzero, or one symmetric pair of nonzeros for a hessian): :func:`exact` checks
them all, and a nonzero read from a product where another nonzero also adds up
shows there as a wrong entry.
"""

from __future__ import annotations

import numpy as np

from difgen.derive.sparsity import Coloring


def _seeds(colors: np.ndarray, size: int) -> np.ndarray:
    """(size, colors) 0/1 seed matrix; color -1 in no seed."""
    c = int(colors.max()) + 1 if (colors >= 0).any() else 0
    seeds = np.zeros((size, c))
    used = colors >= 0
    seeds[np.flatnonzero(used), colors[used]] = 1.0
    return seeds


def recovered(coloring: Coloring, matrix: np.ndarray) -> np.ndarray:
    """The nonzeros (CSR order) the coloring recovers from ``matrix``'s products."""
    m, n = matrix.shape
    if coloring.bicoloring is not None:
        b = coloring.bicoloring
        forward = (matrix @ _seeds(b.column_colors, n)).T
        reverse = _seeds(b.row_colors, m).T @ matrix
        flat = np.concatenate([forward.ravel(), reverse.ravel()])
        return flat[coloring.bidirectional_positions()]
    if coloring.by_rows and not (coloring.symmetric or coloring.acyclic):
        compressed = _seeds(coloring.colors, m).T @ matrix
        return compressed.ravel()[coloring.compressed_positions(n)]
    compressed = (matrix @ _seeds(coloring.colors, n)).T  # (colors, m)
    if coloring.acyclic is not None:
        return coloring.acyclic.recover(compressed)
    return compressed.ravel()[coloring.compressed_positions(m)]


def exact(coloring: Coloring, symmetric: bool = False) -> bool:
    """Whether the recovery is exact on every basis matrix of the pattern."""
    pattern = coloring.pattern
    rows, cols = pattern.row_ids(), pattern.indices
    shape = (pattern.size, pattern.n)
    where = {(i, j): k for k, (i, j) in enumerate(zip(rows.tolist(), cols.tolist()))}
    for k, (i, j) in enumerate(zip(rows.tolist(), cols.tolist())):
        if symmetric and i > j:
            continue
        basis = np.zeros(shape)
        expected = np.zeros(pattern.nnz)
        basis[i, j] = expected[k] = 1.0
        if symmetric:
            basis[j, i] = expected[where[(j, i)]] = 1.0
        if not np.array_equal(recovered(coloring, basis), expected):
            return False
    return True
