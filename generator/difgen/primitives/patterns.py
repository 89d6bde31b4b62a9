"""Jacobian sparsity rules: each primitive's ``sparsity`` field is one of these.

A value's dependence pattern is a boolean array of shape ``value.shape + (n,)``
saying which of the ``n`` input elements it depends on (``None``: on none); a rule
maps the patterns of an equation's inputs to its output's, called as
``rule(eqn, patterns, n)``. The propagation through a graph and the coloring built
on it are :mod:`difgen.derive.sparsity`; the family helpers assign the family's rule:

- elementwise: the union of the (broadcast) inputs; selectors carry no dependence;
- structural (reshape, transpose, indexing, concatenate, pad, pack, scatter...): the
  primitive itself, applied with the dependence axis carried along at the end;
- reductions and cumulative ones: ``any`` / ``logical_or.accumulate`` over the axes;
- matmul: an output element depends on its row of ``a`` and its column of ``b``;
- anything else (einsum, linear algebra): every output on every input dependence,
  which over-approximates but is never wrong.

Patterns are structural: they hold for every input, whatever branch ``where`` takes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from difgen.core.indexing import to_index
from difgen.core.ir import Eqn

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
