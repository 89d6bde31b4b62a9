"""Jacobian sparsity rules: each primitive's ``sparsity`` field is one of these.

A value's dependence pattern is a :class:`Rows`: for each element of the value (in
C order), the sorted set of the ``n`` input elements it depends on, held as
compressed rows (``indptr``, ``indices``); ``None`` means "on none". A rule maps
the patterns of an equation's inputs to its output's, called as
``rule(eqn, patterns, n)``, in time and memory linear (up to a sort) in the
nonzeros it reads and writes; none holds more than :data:`MAX_PATTERN_NONZEROS`
entries, checked before allocating (:class:`PatternTooLarge` otherwise). The
propagation through a graph and the coloring built on it are
:mod:`difgen.derive.sparsity`; the family helpers assign the family's rule:

- elementwise: the row-wise union of the (broadcast) inputs; selectors carry no
  dependence;
- structural (reshape, transpose, indexing, concatenate, pad, pack, scatter...): the
  primitive itself applied to the inputs' element positions gives each output
  element its source row (none for padding); scatters union what lands together;
- reductions: the union of the rows of each reduced group; cumulative ones: the
  running union along the axis (its size is the output's nonzeros, which may be
  quadratic in the axis length, and is checked before it is built);
- matmul: an output element depends on its row of ``a`` and its column of ``b``;
- anything else (einsum, linear algebra): every output on every input dependence,
  which over-approximates but is never wrong.

Patterns are structural: they hold for every input, whatever branch ``where`` takes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from difgen.core.indexing import to_index
from difgen.core.ir import Eqn

MAX_PATTERN_NONZEROS = 50_000_000
"""Entries (row, input element) one step of the detection may hold."""

Shape = tuple[int, ...]


class PatternTooLarge(Exception):
    """The pattern has too many nonzeros to detect explicitly (the caller falls back)."""


def _check(nnz: int) -> None:
    if nnz > MAX_PATTERN_NONZEROS:
        raise PatternTooLarge(f"{nnz} nonzeros (at most {MAX_PATTERN_NONZEROS})")


def _size(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


@dataclass(frozen=True, eq=False)
class Rows:
    """A value's dependence pattern as compressed rows.

    Row ``r`` (element ``r`` of the value in C order) depends on the input elements
    ``indices[indptr[r]:indptr[r + 1]]``, sorted and unique, out of ``n``.
    """

    shape: Shape
    indptr: np.ndarray  # int64, size + 1
    indices: np.ndarray  # int64, nnz
    n: int

    @property
    def size(self) -> int:
        return _size(self.shape)

    @property
    def nnz(self) -> int:
        return int(self.indices.size)

    def counts(self) -> np.ndarray:
        """The number of dependences of each row."""
        return np.diff(self.indptr)

    def row_ids(self) -> np.ndarray:
        """The row of each stored entry."""
        return np.repeat(np.arange(self.size, dtype=np.int64), self.counts())

    def dense(self) -> np.ndarray:
        """The boolean ``shape + (n,)`` array (for tests and small patterns)."""
        out = np.zeros((self.size, self.n), dtype=bool)
        out[self.row_ids(), self.indices] = True
        return out.reshape((*self.shape, self.n))

    def transposed(self) -> Rows:
        """The ``(n, size)`` pattern of the columns (``shape`` is ``(n,)``)."""
        order = np.argsort(self.indices, kind="stable")
        rows = self.row_ids()[order]
        indptr = _indptr(np.bincount(self.indices, minlength=self.n), self.n)
        return Rows((self.n,), indptr, rows, self.size)

    @classmethod
    def identity(cls, shape: Shape) -> Rows:
        """Each element of an input on itself."""
        n = _size(shape)
        _check(n)
        ramp = np.arange(n + 1, dtype=np.int64)
        return cls(tuple(shape), ramp, ramp[:-1].copy(), n)

    @classmethod
    def from_dense(cls, mask: np.ndarray) -> Rows:
        """The pattern of a boolean ``shape + (n,)`` array."""
        n = int(mask.shape[-1])
        flat = np.asarray(mask, dtype=bool).reshape(-1, n)
        rows, cols = np.nonzero(flat)
        indptr = _indptr(np.bincount(rows, minlength=flat.shape[0]), flat.shape[0])
        return cls(tuple(mask.shape[:-1]), indptr, cols.astype(np.int64), n)


Pattern = Rows | None
SparsityRule = Callable[[Eqn, list[Pattern], int], Pattern]


def _indptr(counts: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(counts[:size], out=out[1:])
    return out


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """``keys`` sorted, duplicates dropped (a sort: NumPy's hashing unique is slower
    on these)."""
    keys = np.sort(keys)
    if keys.size:
        keep = np.empty(keys.size, dtype=bool)
        keep[0] = True
        np.not_equal(keys[1:], keys[:-1], out=keep[1:])
        keys = keys[keep]
    return keys


def _empty(size: int, n: int) -> Rows:
    return Rows((size,), np.zeros(size + 1, dtype=np.int64), np.zeros(0, np.int64), n)


def _stacked(patterns: Sequence[Pattern], sizes: Sequence[int], n: int) -> Rows:
    """The rows of several values one after the other (``None``: empty rows)."""
    live = [p if p is not None else _empty(s, n) for p, s in zip(patterns, sizes)]
    if len(live) == 1:
        return live[0]
    counts = np.concatenate([p.counts() for p in live])
    indices = np.concatenate([p.indices for p in live])
    return Rows((int(counts.size),), _indptr(counts, int(counts.size)), indices, n)


def _expand(p: Rows, src: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The entries of rows ``src`` in turn: (which of ``src``, input element)."""
    counts = p.counts()[src]
    total = int(counts.sum())
    _check(total)
    starts = p.indptr[:-1][src]
    begin = _indptr(counts, int(counts.size))[:-1]
    which = np.repeat(np.arange(src.size, dtype=np.int64), counts)
    offsets = np.arange(total, dtype=np.int64) - begin[which] + starts[which]
    return which, p.indices[offsets]


def _gather(p: Rows, src: np.ndarray, shape: Shape) -> Pattern:
    """Output row ``r`` is row ``src[r]`` of ``p`` (empty where ``src[r] < 0``)."""
    src = np.asarray(src, dtype=np.int64).ravel()
    live = src >= 0
    counts = np.where(live, p.counts()[np.where(live, src, 0)], 0)
    if not counts.any():
        return None
    _, indices = _expand(p, src[live])
    return Rows(tuple(shape), _indptr(counts, src.size), indices, p.n)


def _scatter(
    parts: Sequence[tuple[Rows, np.ndarray, np.ndarray]], shape: Shape, n: int
) -> Pattern:
    """Output row ``dst[k]`` depends on row ``src[k]`` of its part, for every pair:
    the union of all that lands on a row."""
    rows, cols = [], []
    total = 0
    for p, src, dst in parts:
        src, dst = np.asarray(src, np.int64).ravel(), np.asarray(dst, np.int64).ravel()
        keep = (src >= 0) & (dst >= 0)
        total += int(p.counts()[src[keep]].sum())
        _check(total)
        which, col = _expand(p, src[keep])
        rows.append(dst[keep][which])
        cols.append(col)
    if total == 0:
        return None
    keys = _sorted_unique(np.concatenate(rows) * n + np.concatenate(cols))
    size = _size(shape)
    counts = np.bincount(keys // n, minlength=size)
    return Rows(tuple(shape), _indptr(counts, size), keys % n, n)


def _positions(shape: Shape, offset: int = 0) -> np.ndarray:
    return np.arange(offset, offset + _size(shape), dtype=np.int64).reshape(shape)


def _broadcast(p: Pattern, shape: Shape, to: Shape) -> Pattern:
    """``p`` (of a value of ``shape``) broadcast to ``to``."""
    if p is None or tuple(shape) == tuple(to):
        return p
    return _gather(p, np.broadcast_to(_positions(shape), to), to)


def _union(terms: Sequence[tuple[Pattern, Shape]], shape: Shape, n: int) -> Pattern:
    """The row-wise union of values of the given shapes broadcast to ``shape``."""
    live: list[tuple[Rows, Shape]] = []
    for p, s in terms:
        if p is not None and not any(p is q and s == t for q, t in live):
            live.append((p, tuple(s)))
    if not live:
        return None
    if len(live) == 1:
        p, s = live[0]
        out = _broadcast(p, s, shape)
        return None if out is None else Rows(tuple(shape), out.indptr, out.indices, n)
    ramp = _positions(tuple(shape)).ravel()
    parts = [(p, np.broadcast_to(_positions(s), shape).ravel(), ramp) for p, s in live]
    return _scatter(parts, shape, n)


def _reduce(p: Pattern, shape: Shape, axes: Sequence[int]) -> Pattern:
    """The union of the rows of each group reduced over ``axes``."""
    if p is None:
        return None
    axes = tuple(int(a) % len(shape) for a in axes) if shape else ()
    kept = tuple(1 if i in axes else d for i, d in enumerate(shape))
    out = tuple(d for i, d in enumerate(shape) if i not in axes)
    dst = np.broadcast_to(_positions(kept), shape).ravel()
    return _scatter([(p, _positions(shape).ravel(), dst)], out, p.n)


# ------------------------------------------------------------ generic rules
def all_inputs(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """Conservative: every output element on every dependence of every input."""
    live = [p.indices for p in patterns if p is not None]
    if not live:
        return None
    union = _sorted_unique(np.concatenate(live))
    size = eqn.out.size
    _check(size * union.size)
    indptr = np.arange(size + 1, dtype=np.int64) * union.size
    return Rows(tuple(eqn.out.shape), indptr, np.tile(union, size), n)


def no_dependence(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """Selectors, piecewise constants and constants: a zero derivative everywhere."""
    return None


# -------------------------------------------------------------- elementwise
def union(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """Each output element on the same elements of the (broadcast) inputs."""
    terms = [(p, tuple(a.shape)) for a, p in zip(eqn.inputs, patterns)]
    return _union(terms, tuple(eqn.out.shape), n)


def selected(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """``where``: the union of the branches; the condition selects, it carries none."""
    terms = [(p, tuple(a.shape)) for a, p in zip(eqn.inputs[1:], patterns[1:])]
    return _union(terms, tuple(eqn.out.shape), n)


# --------------------------------------------------------------- reductions
def reduced(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """A reduced element on every element it reduces."""
    (p,) = patterns
    return _reduce(p, tuple(eqn.inputs[0].shape), eqn.params.as_dict()["axes"])


def accumulated(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """A cumulative element on every element up to it along the axis.

    An input element first met at position ``j`` of its line is in the rows ``j``
    to the end of the line: the cost is the output's nonzeros (up to a sort),
    which is checked before anything of that size is built."""
    (p,) = patterns
    if p is None:
        return None
    shape = tuple(eqn.inputs[0].shape)
    axis = int(eqn.params.as_dict()["axis"]) % len(shape)
    length = shape[axis]
    # lines[l, k]: the row at position k of line l
    lines = np.moveaxis(_positions(shape), axis, -1).reshape(-1, length)
    line_of = np.empty(p.size, dtype=np.int64)
    place_of = np.empty(p.size, dtype=np.int64)
    line_of[lines.ravel()] = np.repeat(np.arange(lines.shape[0]), length)
    place_of[lines.ravel()] = np.tile(np.arange(length), lines.shape[0])
    rows = p.row_ids()
    keys = line_of[rows] * n + p.indices
    order = np.lexsort((place_of[rows], keys))
    keys = keys[order]
    first = np.ones(keys.size, dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    key, start = keys[first], place_of[rows][order][first]
    counts = length - start
    total = int(counts.sum())
    _check(total)
    begin = _indptr(counts, int(counts.size))[:-1]
    which = np.repeat(np.arange(key.size, dtype=np.int64), counts)
    place = np.arange(total, dtype=np.int64) - begin[which] + start[which]
    dst = lines[key[which] // n, place]
    out = np.sort(dst * n + key[which] % n)
    indptr = _indptr(np.bincount(out // n, minlength=p.size), p.size)
    return Rows(shape, indptr, out % n, n)


# --------------------------------------------------------------- structural
Move = Callable[..., np.ndarray]


def carried(move: Move) -> SparsityRule:
    """A rule that applies the primitive's own data movement to the inputs' element
    positions, ``move(positions, **params)``: the result gives each output element
    the row it takes (``-1``: none, as padding). The positions of input ``i``
    follow those of the inputs before it."""

    def rule(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
        if all(p is None for p in patterns):
            return None
        sizes = [a.size for a in eqn.inputs]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        positions = [
            _positions(tuple(a.shape), int(o)) for a, o in zip(eqn.inputs, offsets)
        ]
        src = move(positions, **eqn.params.as_dict())
        return _gather(_stacked(patterns, sizes, n), src, tuple(eqn.out.shape))

    rule.__name__ = rule.__qualname__ = move.__name__
    rule.__doc__ = move.__doc__
    return rule


def _expand_ellipsis(index: tuple[Any, ...], ndim: int) -> tuple[Any, ...]:
    """Replace ``...`` by full slices (as the dense rules did, whose arrays carried a
    trailing dependence axis)."""
    if not any(item is Ellipsis for item in index):
        return index
    used = sum(1 for item in index if item is not None and item is not Ellipsis)
    pos = next(i for i, item in enumerate(index) if item is Ellipsis)
    fill = (("slice", None, None, None),) * (ndim - used)
    return index[:pos] + fill + index[pos + 1 :]


def _index(frozen: tuple[Any, ...], ndim: int) -> tuple[Any, ...]:
    """A frozen index of an ``ndim`` array."""
    return to_index(_expand_ellipsis(frozen, ndim))


@carried
def reshape(args: list[np.ndarray], shape: Any) -> np.ndarray:
    """The elements in their new shape."""
    return args[0].reshape(shape)


@carried
def transpose(args: list[np.ndarray], axes: Any) -> np.ndarray:
    """The elements permuted."""
    return np.transpose(args[0], axes)


@carried
def broadcast_to(args: list[np.ndarray], shape: Any) -> np.ndarray:
    """The elements broadcast."""
    return np.broadcast_to(args[0], shape)


@carried
def getitem(args: list[np.ndarray], index: Any) -> np.ndarray:
    """The indexed elements."""
    return np.asarray(args[0][_index(index, args[0].ndim)])


@carried
def concatenate(args: list[np.ndarray], axis: int) -> np.ndarray:
    """The pieces joined."""
    return np.concatenate(args, axis=axis)


@carried
def pad(args: list[np.ndarray], widths: Any) -> np.ndarray:
    """Padding depends on nothing."""
    return np.pad(args[0], widths, constant_values=-1)


@carried
def pack(args: list[np.ndarray], shape: Any) -> np.ndarray:
    """The scalars laid out in ``shape``."""
    return np.stack(args).reshape(shape)


@carried
def set_index(args: list[np.ndarray], index: Any) -> np.ndarray:
    """The array with the overwritten positions taken from the value."""
    out = args[0].copy()
    where = _index(index, args[0].ndim)
    out[where] = np.broadcast_to(args[1], out[where].shape)
    return out


def _scattered(
    eqn: Eqn, patterns: list[Pattern], n: int, indices: Sequence[Any], shape: Any
) -> Pattern:
    """Each position of ``shape`` on every value scattered to it by its index."""
    shape = tuple(shape)
    targets = _positions(shape)
    parts = []
    for a, p, frozen in zip(eqn.inputs, patterns, indices):
        if p is None:
            continue
        dst = np.asarray(targets[_index(frozen, len(shape))])
        src = np.broadcast_to(_positions(tuple(a.shape)), dst.shape)
        parts.append((p, src, dst))
    return _scatter(parts, shape, n) if parts else None


def scatter_sum(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """Each position on every value scattered to it."""
    params = eqn.params.as_dict()
    return _scattered(eqn, patterns, n, params["indices"], params["shape"])


def scatter_add(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """Each position on the values scattered to it."""
    params = eqn.params.as_dict()
    return _scattered(eqn, patterns, n, [params["index"]], params["shape"])


# ------------------------------------------------------------------- matmul
def matmul(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """An output element on its row of ``a`` and its column of ``b``."""
    a, b = eqn.inputs
    sa, sb = tuple(a.shape), tuple(b.shape)
    pa, pb = patterns
    out_shape = tuple(eqn.out.shape)
    terms: list[tuple[Pattern, Shape]] = []
    if pa is not None:  # out[..., i, k] on row i of a
        rows = _reduce(pa, sa, (len(sa) - 1,))  # shape (..., m), () for 1-D a
        if a.ndim == 1 or b.ndim == 1:
            terms.append((rows, sa[:-1]))
        else:
            terms.append((rows, (*sa[:-1], 1)))
    if pb is not None:  # out[..., i, k] on column k of b
        if b.ndim == 1:
            terms.append((_reduce(pb, sb, (0,)), ()))
        else:
            cols = _reduce(pb, sb, (len(sb) - 2,))  # shape (..., p)
            kept = (*sb[:-2], sb[-1])
            terms.append((cols, kept if a.ndim == 1 else (*sb[:-2], 1, sb[-1])))
    return _union(terms, out_shape, n) if terms else None
