"""The dense sparsity rules difgen used before patterns became compressed rows: the
oracle the compressed rules are checked against (tests/derive/test_sparsity.py).

A value's pattern is a boolean array of shape ``value.shape + (n,)`` (``None``: on
none); :data:`DENSE_RULES` maps each rule of :mod:`difgen.primitives.patterns` to its
dense form, and :func:`dense_jacobian_pattern` propagates them through a graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from difgen.core.indexing import to_index
from difgen.core.ir import Eqn, Graph, Lit, Var
from difgen.primitives import patterns

Pattern = np.ndarray | None
SparsityRule = Callable[[Eqn, list[Pattern], int], Pattern]


def _union(patterns: list[Pattern], shape: tuple[int, ...], n: int) -> Pattern:
    live = [p for p in patterns if p is not None]
    if not live:
        return None
    out = np.zeros((*shape, n), dtype=bool)
    for p in live:
        out |= np.broadcast_to(p, (*shape, n)) if p.shape != out.shape else p
    return out


# ------------------------------------------------------------ generic rules
def all_inputs(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """Conservative: every output element on every dependence of every input."""
    live = [p.reshape(-1, n).any(axis=0) for p in patterns if p is not None]
    if not live:
        return None
    union = np.logical_or.reduce(live)
    return np.broadcast_to(union, (*eqn.out.shape, n)).copy()


def no_dependence(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """Selectors, piecewise constants and constants: a zero derivative everywhere."""
    return None


# -------------------------------------------------------------- elementwise
def union(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """Each output element on the same elements of the (broadcast) inputs."""
    return _union(patterns, eqn.out.shape, n)


def selected(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """``where``: the union of the branches; the condition selects, it carries none."""
    return _union([None, *patterns[1:]], eqn.out.shape, n)


# --------------------------------------------------------------- reductions
def reduced(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """A reduced element on every element it reduces."""
    (p,) = patterns
    if p is None:
        return None
    return np.asarray(p.any(axis=tuple(eqn.params.as_dict()["axes"])))


def accumulated(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """A cumulative element on every element up to it along the axis."""
    (p,) = patterns
    if p is None:
        return None
    return np.logical_or.accumulate(p, axis=eqn.params.as_dict()["axis"])


# --------------------------------------------------------------- structural
Move = Callable[..., np.ndarray]


def carried(move: Move) -> SparsityRule:
    """A rule that applies the primitive's own data movement to the patterns,
    ``move(args, n, **params)``, the dependence axis carried along at the end."""

    def rule(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
        if all(p is None for p in patterns):
            return None
        args = [
            np.zeros((*a.shape, n), dtype=bool) if p is None else p
            for a, p in zip(eqn.inputs, patterns)
        ]
        return move(args, n, **eqn.params.as_dict())

    rule.__doc__ = move.__doc__
    return rule


def _expand_ellipsis(index: tuple[Any, ...], ndim: int) -> tuple[Any, ...]:
    """Replace ``...`` by full slices so the trailing dependence axis is untouched."""
    if not any(item is Ellipsis for item in index):
        return index
    used = sum(1 for item in index if item is not None and item is not Ellipsis)
    pos = next(i for i, item in enumerate(index) if item is Ellipsis)
    fill = (("slice", None, None, None),) * (ndim - used)
    return index[:pos] + fill + index[pos + 1 :]


def _index(frozen: tuple[Any, ...], ndim: int) -> tuple[Any, ...]:
    """A frozen index of an ``ndim`` array, usable on its pattern."""
    return to_index(_expand_ellipsis(frozen, ndim))


@carried
def reshape(args: list[np.ndarray], n: int, shape: Any) -> np.ndarray:
    """Reshaped with the dependence axis kept last."""
    return args[0].reshape((*shape, n))


@carried
def transpose(args: list[np.ndarray], n: int, axes: Any) -> np.ndarray:
    """Permuted with the dependence axis kept last."""
    return np.transpose(args[0], (*axes, len(axes)))


@carried
def broadcast_to(args: list[np.ndarray], n: int, shape: Any) -> np.ndarray:
    """Broadcast with the dependence axis kept last."""
    return np.broadcast_to(args[0], (*shape, n)).copy()


@carried
def getitem(args: list[np.ndarray], n: int, index: Any) -> np.ndarray:
    """The indexed elements' patterns."""
    return np.asarray(args[0][_index(index, args[0].ndim - 1)])


@carried
def concatenate(args: list[np.ndarray], n: int, axis: int) -> np.ndarray:
    """The pieces' patterns joined."""
    return np.concatenate(args, axis=axis)


@carried
def pad(args: list[np.ndarray], n: int, widths: Any) -> np.ndarray:
    """Padding depends on nothing."""
    return np.pad(args[0], (*widths, (0, 0)))


@carried
def pack(args: list[np.ndarray], n: int, shape: Any) -> np.ndarray:
    """The scalars' patterns laid out in ``shape``."""
    return np.stack(args).reshape((*shape, n))


@carried
def set_index(args: list[np.ndarray], n: int, index: Any) -> np.ndarray:
    """The array's pattern with the overwritten positions replaced."""
    out = args[0].copy()
    where = _index(index, args[0].ndim - 1)
    out[where] = np.broadcast_to(args[1], out[where].shape)
    return out


@carried
def scatter_sum(args: list[np.ndarray], n: int, indices: Any, shape: Any) -> np.ndarray:
    """Each position on every value scattered to it."""
    out = np.zeros((*shape, n), dtype=bool)
    for value, frozen in zip(args, indices):
        np.logical_or.at(out, _index(frozen, len(shape)), value)
    return out


@carried
def scatter_add(args: list[np.ndarray], n: int, index: Any, shape: Any) -> np.ndarray:
    """Each position on the values scattered to it."""
    out = np.zeros((*shape, n), dtype=bool)
    np.logical_or.at(out, _index(index, len(shape)), args[0])
    return out


# ------------------------------------------------------------------- matmul
def matmul(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """An output element on its row of ``a`` and its column of ``b``."""
    a, b = eqn.inputs
    pa, pb = patterns
    out_shape = eqn.out.shape
    terms: list[Pattern] = []
    if pa is not None:  # out[..., i, k] on row i of a
        rows = np.asarray(pa.any(axis=-2))  # (..., m, n) or (n,) for 1-D a -> (n,)
        if a.ndim == 1 or b.ndim == 1:
            rows = np.broadcast_to(rows, (*out_shape, n))
        else:
            rows = np.broadcast_to(rows[..., :, None, :], (*out_shape, n))
        terms.append(rows)
    if pb is not None:  # out[..., i, k] on column k of b
        if b.ndim == 1:
            cols = np.broadcast_to(pb.any(axis=-2), (*out_shape, n))
        else:
            cols = np.asarray(pb.any(axis=-3))  # (..., p, n)
            cols = np.broadcast_to(
                cols if a.ndim == 1 else cols[..., None, :, :], (*out_shape, n)
            )
        terms.append(cols)
    return _union(terms, out_shape, n) if terms else None


DENSE_RULES: dict[Any, SparsityRule] = {
    patterns.all_inputs: all_inputs,
    patterns.no_dependence: no_dependence,
    patterns.union: union,
    patterns.selected: selected,
    patterns.reduced: reduced,
    patterns.accumulated: accumulated,
    patterns.reshape: reshape,
    patterns.transpose: transpose,
    patterns.broadcast_to: broadcast_to,
    patterns.getitem: getitem,
    patterns.concatenate: concatenate,
    patterns.pad: pad,
    patterns.pack: pack,
    patterns.set_index: set_index,
    patterns.scatter_sum: scatter_sum,
    patterns.scatter_add: scatter_add,
    patterns.matmul: matmul,
}


def dense_jacobian_pattern(graph: Graph, output: int = 0) -> np.ndarray:
    """Boolean ``(y.size, x.size)``, by the dense rules (as difgen computed it)."""
    x = graph.inputs[0]
    n = x.size
    env: dict[Var, Pattern] = dict.fromkeys(graph.inputs)
    env[x] = np.eye(n, dtype=bool).reshape((*x.shape, n))

    def read(atom: Any) -> Pattern:
        return None if isinstance(atom, Lit) else env[atom]

    for eqn in graph.eqns:
        rule = DENSE_RULES[eqn.primitive.sparsity]
        value = rule(eqn, [read(a) for a in eqn.inputs], n)
        env[eqn.out] = None if value is None else np.asarray(value, dtype=bool)
    out = graph.outputs[output]
    pattern = read(out)
    if pattern is None:
        return np.zeros((out.size, n), dtype=bool)
    return pattern.reshape(out.size, n)


def dense_color_columns(pattern: np.ndarray) -> np.ndarray:
    """The greedy distance-1 coloring as difgen computed it, with a set per row."""
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
