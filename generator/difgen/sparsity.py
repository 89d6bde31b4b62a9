"""Jacobian sparsity patterns of graphs, and column coloring for compressed AD.

The pattern is found by abstract interpretation: every value carries a boolean array
of shape ``value.shape + (n,)`` saying which of the ``n`` input elements it depends on
(``None`` for "on none"). Rules are per family, so a primitive needs a row only when
its family's rule does not fit:

- elementwise: the union of the (broadcast) inputs; selectors carry no dependence;
- structural (reshape, transpose, indexing, concatenate, pad, pack, scatter...): the
  primitive itself, applied with the dependence axis carried along at the end;
- reductions and cumulative ones: ``any`` / ``logical_or.accumulate`` over the axes;
- matmul: an output element depends on its row of ``a`` and its column of ``b``;
- anything else (einsum, linear algebra): every output on every input dependence,
  which over-approximates but is never wrong.

The pattern is structural: it holds for every input, whatever branch ``where`` takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from difgen.core.ir import Eqn, Graph, Lit, Var
from difgen.primitives.structural import to_index

Pattern = np.ndarray | None

MAX_PATTERN_ELEMENTS = 50_000_000  # booleans held for one value


class PatternTooLarge(Exception):
    """The input is too large for an explicit pattern (the caller falls back)."""


def _expand_ellipsis(index: tuple[Any, ...], ndim: int) -> tuple[Any, ...]:
    """Replace ``...`` by full slices so the trailing dependence axis is untouched."""
    if not any(item is Ellipsis for item in index):
        return index
    used = sum(1 for item in index if item is not None and item is not Ellipsis)
    pos = next(i for i, item in enumerate(index) if item is Ellipsis)
    fill = (("slice", None, None, None),) * (ndim - used)
    return index[:pos] + fill + index[pos + 1 :]


def _union(patterns: list[Pattern], shape: tuple[int, ...], n: int) -> Pattern:
    live = [p for p in patterns if p is not None]
    if not live:
        return None
    out = np.zeros((*shape, n), dtype=bool)
    for p in live:
        out |= np.broadcast_to(p, (*shape, n)) if p.shape != out.shape else p
    return out


def _all_inputs(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """Conservative: every output element on every dependence of every input."""
    live = [p.reshape(-1, n).any(axis=0) for p in patterns if p is not None]
    if not live:
        return None
    union = np.logical_or.reduce(live)
    return np.broadcast_to(union, (*eqn.out.shape, n)).copy()


def _zeros_for(atom: Any, n: int) -> np.ndarray:
    return np.zeros((*atom.shape, n), dtype=bool)


# --------------------------------------------------------------- family rules
def _structural(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    if all(p is None for p in patterns):
        return None
    args = [_zeros_for(a, n) if p is None else p for a, p in zip(eqn.inputs, patterns)]
    params = eqn.params.as_dict()
    name = eqn.primitive.name
    ndim = len(eqn.inputs[0].shape) if eqn.inputs else 0
    if name == "reshape":
        return args[0].reshape((*params["shape"], n))
    if name == "transpose":
        return np.transpose(args[0], (*params["axes"], len(params["axes"])))
    if name == "broadcast_to":
        return np.broadcast_to(args[0], (*params["shape"], n)).copy()
    if name == "getitem":
        return np.asarray(args[0][to_index(_expand_ellipsis(params["index"], ndim))])
    if name == "concatenate":
        return np.concatenate(args, axis=params["axis"])
    if name == "pad":
        return np.pad(args[0], (*params["widths"], (0, 0)))
    if name == "pack":
        return np.stack(args).reshape((*params["shape"], n))
    if name == "set_index":
        out = args[0].copy()
        index = to_index(_expand_ellipsis(params["index"], ndim))
        out[index] = np.broadcast_to(args[1], out[index].shape)
        return out
    if name == "scatter_sum":
        out = np.zeros((*params["shape"], n), dtype=bool)
        for value, frozen in zip(args, params["indices"]):
            index = to_index(_expand_ellipsis(frozen, len(params["shape"])))
            np.logical_or.at(out, index, value)
        return out
    if name == "scatter_add":
        out = np.zeros((*params["shape"], n), dtype=bool)
        index = to_index(_expand_ellipsis(params["index"], len(params["shape"])))
        np.logical_or.at(out, index, args[0])
        return out
    return _all_inputs(eqn, patterns, n)


def _reduction(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    (p,) = patterns
    if p is None:
        return None
    params = eqn.params.as_dict()
    if "axes" in params:
        return np.asarray(p.any(axis=tuple(params["axes"])))
    return np.logical_or.accumulate(p, axis=params["axis"])


def _matmul(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    a, b = eqn.inputs
    pa, pb = patterns
    out_shape = eqn.out.shape
    terms: list[np.ndarray] = []
    if pa is not None:  # out[..., i, k] on row i of a
        rows = pa.any(axis=-2)  # (..., m, n) or (n,) for 1-D a -> (n,)
        if a.ndim == 1:
            rows = np.broadcast_to(rows, (*out_shape, n))
        elif b.ndim == 1:
            rows = np.broadcast_to(rows, (*out_shape, n))
        else:
            rows = np.broadcast_to(rows[..., :, None, :], (*out_shape, n))
        terms.append(rows)
    if pb is not None:  # out[..., i, k] on column k of b
        if b.ndim == 1:
            cols = np.broadcast_to(pb.any(axis=-2), (*out_shape, n))
        else:
            cols = pb.any(axis=-3)  # (..., p, n)
            cols = np.broadcast_to(cols if a.ndim == 1 else cols[..., None, :, :],
                                   (*out_shape, n))  # fmt: skip
        terms.append(cols)
    return _union(terms, out_shape, n) if terms else None


def _elementwise(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    if not eqn.primitive.differentiable or eqn.primitive.name == "sign":
        return None
    if eqn.primitive.name == "where":
        patterns = [None, *patterns[1:]]
    return _union(patterns, eqn.out.shape, n)


_STRUCTURAL = {"reshape", "transpose", "broadcast_to", "getitem", "concatenate", "pad",
               "pack", "set_index", "scatter_add", "scatter_sum"}  # fmt: skip
_REDUCTIONS = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "cumsum",
               "cumprod"}  # fmt: skip

RULES: dict[str, Callable[[Eqn, list[Pattern], int], Pattern]] = {
    **{name: _structural for name in _STRUCTURAL},
    **{name: _reduction for name in _REDUCTIONS},
    "matmul": _matmul,
}


def _rule(eqn: Eqn) -> Callable[[Eqn, list[Pattern], int], Pattern]:
    if eqn.primitive.name in RULES:
        return RULES[eqn.primitive.name]
    if eqn.primitive.elementwise:
        return _elementwise
    if not eqn.primitive.differentiable:
        return lambda *_: None
    return _all_inputs


def jacobian_pattern(graph: Graph, output: int = 0) -> np.ndarray:
    """Boolean ``(y.size, x.size)``: which outputs depend on which elements of input 0.

    >>> from difgen.frontend import trace
    >>> g = trace(lambda x: x[1:] * x[:-1], [((3,), "float64")])
    >>> jacobian_pattern(g).astype(int).tolist()
    [[1, 1, 0], [0, 1, 1]]
    """
    x = graph.inputs[0]
    n = x.size
    env: dict[Var, Pattern] = {v: None for v in graph.inputs}
    env[x] = np.eye(n, dtype=bool).reshape((*x.shape, n))

    def read(atom: Any) -> Pattern:
        return None if isinstance(atom, Lit) else env[atom]

    for eqn in graph.eqns:
        if eqn.out.size * n > MAX_PATTERN_ELEMENTS:
            raise PatternTooLarge(f"{eqn.out.size} x {n} pattern")
        value = _rule(eqn)(eqn, [read(a) for a in eqn.inputs], n)
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
