"""Structural and index maps: what a structural equation does to each element, found by
running the primitive's own ``impl`` on element references (docs/design.md,
section 10). Used by planning (views, :mod:`difgen.targets.c.plan`) and by the
demand analysis (:mod:`difgen.targets.c.demand`); :func:`affine` tells an index
map the printer writes as arithmetic from one it writes as a table. No C text."""

from __future__ import annotations

from typing import Any

import numpy as np

from difgen.core.indexing import to_index
from difgen.core.primitive import LoopForm
from difgen.targets.c.program import Moves, NoLoopForm


def structural(prim: Any) -> bool:
    """Whether a primitive only moves (and adds) elements (its declared loop form):
    its loops are derived from its ``impl`` run on :class:`Ref` elements."""
    form = prim.c_loop
    return isinstance(form, LoopForm) and form.kind == "structural"


class Ref:
    """Element ``index`` of input ``slot`` of a structural equation, or a sum of
    such elements in the order NumPy adds them."""

    __slots__ = ("terms",)

    def __init__(self, terms: tuple[tuple[int, int], ...]) -> None:
        self.terms = terms

    def __add__(self, other: Any) -> Any:
        if isinstance(other, Ref):
            return Ref(self.terms + other.terms)
        if isinstance(other, (int, float)) and other == 0:
            return self
        return NotImplemented

    def __radd__(self, other: Any) -> Any:
        if isinstance(other, (int, float)) and other == 0:
            return self  # zeros + v: NumPy's emission assigns the first write
        return NotImplemented


def _refs(slot: int, shape: tuple[int, ...]) -> np.ndarray:
    flat = np.empty(int(np.prod(shape, dtype=np.int64)), dtype=object)
    flat[:] = [Ref(((slot, i),)) for i in range(flat.size)]
    return flat.reshape(shape)


REF_ELEMENTS = 1 << 18
"""Structural maps found element by element (:class:`Ref` objects, the rule of
last resort: a constant operand, a sum that is no scatter's) only up to this many
output elements: past it, building one Python object per element costs seconds
and hundreds of MB, and the operator stays in Python."""


def moves_of(eqn: Any, const_inputs: dict[int, np.ndarray]) -> Moves:
    """A structural equation's moves, as arrays: one element per output
    (:func:`gathered_arrays`, on numbers), a scatter's sums (:func:`summed`,
    from its index), else the primitive's ``impl`` run on element references
    (up to :data:`REF_ELEMENTS` elements)."""
    if not const_inputs:
        found = gathered(eqn)
        if found is None:
            found = summed(eqn)
        if found is not None:
            return found
    if eqn.out.size > REF_ELEMENTS:
        raise NoLoopForm(
            f"{eqn.primitive.name} (a structural map of {eqn.out.size} elements "
            f"that is neither one element per output nor a scatter's sums: "
            f"found element by element only up to {REF_ELEMENTS})"
        )
    return element_moves(eqn, const_inputs)


def element_moves(eqn: Any, const_inputs: dict[int, np.ndarray]) -> Moves:
    """The moves found element by element: the primitive's ``impl`` run on
    :class:`Ref` objects (constant operands as they are), for any structural
    primitive and any size (the reference the faster rules are tested against)."""
    args = []
    for slot, a in enumerate(eqn.inputs):
        if slot in const_inputs:  # a constant operand (an index value, a fill)
            args.append(np.asarray(const_inputs[slot], dtype=object))
        else:
            args.append(_refs(slot, tuple(a.shape)))
    params = eqn.params.as_dict()
    try:
        out = eqn.primitive.impl(*args, **params)
    except (TypeError, ValueError):  # an impl that converts to float64 (pack)
        try:  # the rule for object arrays, which moves elements the same way
            out = eqn.primitive.lower_sympy(*args, **params)
        except Exception as exc:  # noqa: BLE001 (a rule doing arithmetic)
            raise NoLoopForm(f"{eqn.primitive.name} ({type(exc).__name__})") from None
    flat = np.asarray(out, dtype=object).reshape(-1)
    constants = np.zeros(flat.size)
    terms: list[tuple[tuple[int, int], ...]] = []
    for i, e in enumerate(flat):
        if isinstance(e, Ref):
            terms.append(e.terms)
        elif isinstance(e, (int, float, np.floating, np.integer, np.bool_)):
            constants[i] = float(e)
            terms.append(())
        else:
            raise NoLoopForm(f"{eqn.primitive.name} (element {type(e).__name__})")
    return Moves.of_terms(constants, terms)


def gathered(eqn: Any) -> Moves | None:
    """The moves of an equation whose every element is one element of an input
    or zero (:func:`gathered_arrays`), or None when that cannot tell."""
    found = gathered_arrays(eqn)
    if found is None:
        return None
    slots, index = found
    return Moves(np.zeros(slots.size), slots[:, None], index[:, None])


def summed(eqn: Any) -> Moves | None:
    """The moves of a scatter (``scatter_sum``: its inputs added at their
    static indices into zeros, in order; ``scatter_add`` with repeated
    positions), from the index alone: each output element's terms are the input
    elements written there, input by input and in each input's order (NumPy's
    ``+=`` and ``np.add.at``). None for other primitives."""
    params = eqn.params.as_dict()
    name = eqn.primitive.name
    if name == "scatter_sum":
        writes = list(enumerate(params["indices"]))
    elif name == "scatter_add":
        writes = [(0, params["index"])]
    else:
        return None
    shape = tuple(params["shape"])
    size = int(np.prod(shape, dtype=np.int64))
    numbering = np.arange(size, dtype=np.int64).reshape(shape)
    dests, slots, sources = [], [], []
    for slot, index in writes:
        value = eqn.inputs[slot]
        region = numbering[to_index(index)]
        own = np.arange(value.size, dtype=np.int64).reshape(tuple(value.shape))
        try:
            source = np.broadcast_to(own, region.shape)
        except ValueError:  # a value with extra leading 1s: NumPy drops them
            source = np.broadcast_to(
                own.reshape(own.shape[-region.ndim :]), region.shape
            )
        dests.append(region.reshape(-1))
        sources.append(source.reshape(-1))
        slots.append(np.full(region.size, slot, dtype=np.int64))
    dest = np.concatenate(dests)
    order = np.argsort(dest, kind="stable")  # each element's writes in order
    counts = np.bincount(dest, minlength=size)
    rank = max(int(counts.max(initial=0)), 1)
    at = dest[order]
    column = np.arange(at.size, dtype=np.int64) - (np.cumsum(counts) - counts)[at]
    table = np.full((size, rank), -1, dtype=np.int64)
    where = np.zeros((size, rank), dtype=np.int64)
    table[at, column] = np.concatenate(slots)[order]
    where[at, column] = np.concatenate(sources)[order]
    return Moves(np.zeros(size), table, where)


def gathered_arrays(eqn: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """Per flat output element, the input slot it reads (-1: zero) and the flat
    position it reads there, found by running ``impl`` on float64 numbers (each
    input element numbered from 1, the inputs' numbers apart), or None when
    that cannot tell.

    A structural primitive is linear in its inputs, so an element is a constant
    plus a sum of input elements; it is one element (number ``k``) exactly when it
    reads ``k``, ``2 k`` with the inputs doubled and ``k + K`` with ``K`` added to
    all of them (a constant, or a sum of several, fails one of the three), and
    zero when it reads zero in all three. Much faster than :class:`Ref` objects
    on large gathers (a sparse jacobian's seed and its stencil's rolls)."""
    if len(eqn.inputs) == 0:
        return None
    sizes = [int(np.prod(a.shape, dtype=np.int64)) for a in eqn.inputs]
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    big = float(2 ** int(np.ceil(np.log2(starts[-1] + 2)) + 1))
    if big > 2.0**40:
        return None
    numbers = [
        np.arange(start + 1, start + size + 1, dtype=np.float64).reshape(a.shape)
        for a, start, size in zip(eqn.inputs, starts, sizes)
    ]
    params = eqn.params.as_dict()
    try:
        runs = [
            np.asarray(eqn.primitive.impl(*args, **params), dtype=np.float64)
            for args in (
                numbers,
                [2 * n for n in numbers],
                [n + big for n in numbers],
            )
        ]
    except Exception:  # noqa: BLE001 (an impl that needs element references)
        return None
    one, two, shifted = (r.reshape(-1) for r in runs)
    if one.size != eqn.out.size:
        return None
    zero = (one == 0) & (two == 0) & (shifted == 0)
    single = (two == 2 * one) & (shifted == one + big) & (one >= 1)
    if not np.all(zero | single):
        return None
    number = one.astype(np.int64) - 1
    slots = np.searchsorted(starts, number, side="right") - 1
    index = number - starts[slots]
    slots[zero] = -1
    index[zero] = 0
    return slots.astype(np.int64), index.astype(np.int64)


def broadcast_positions(atom: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Flat positions of ``atom``'s elements read at each index of ``shape``."""
    own = tuple(atom.shape)
    index = np.arange(int(np.prod(own, dtype=np.int64)), dtype=np.int64).reshape(own)
    return np.broadcast_to(index, shape)


def affine(positions: np.ndarray) -> tuple[int, tuple[int, ...]] | None:
    """``(offset, strides)`` when ``positions`` is affine in the loop indices."""
    shape = positions.shape
    if positions.size == 0:
        return 0, (0,) * len(shape)
    offset = int(positions.flat[0])
    strides = []
    expected = np.full(shape, offset, dtype=np.int64)
    for d, n in enumerate(shape):
        if n == 1:
            strides.append(0)
            continue
        unit = [0] * len(shape)
        unit[d] = 1
        s = int(positions[tuple(unit)]) - offset
        strides.append(s)
        axis = [1] * len(shape)
        axis[d] = n
        expected = expected + s * np.arange(n, dtype=np.int64).reshape(axis)
    if not np.array_equal(expected, positions):
        return None
    return offset, tuple(strides)


SEPARABLE_FROM = 1024
"""Index maps of at least this many elements are looked at for a form of one
small table per loop dimension (:func:`separable`); smaller ones print as before."""


def separable(positions: np.ndarray) -> tuple[int, list[int | np.ndarray]] | None:
    """``(offset, parts)`` when ``positions`` is ``offset`` plus a function of
    each loop index alone: per dimension a stride (affine there) or a table of
    its length (``np.roll``'s ``(i + s) % n``, a coloring's rows), each table
    starting at 0. None when the map is affine or no such sum."""
    shape = positions.shape
    if positions.ndim == 0 or positions.size == 0:
        return None
    offset = int(positions.flat[0])
    parts: list[int | np.ndarray] = []
    expected = np.full(shape, offset, dtype=np.int64)
    tabled = False
    for d, n in enumerate(shape):
        index: list[int | slice] = [0] * len(shape)
        index[d] = slice(None)
        line = positions[tuple(index)].astype(np.int64) - offset
        axis = [1] * len(shape)
        axis[d] = n
        expected = expected + line.reshape(axis)
        step = int(line[1]) if n > 1 else 0
        if np.array_equal(line, step * np.arange(n, dtype=np.int64)):
            parts.append(step)
        else:
            parts.append(line)
            tabled = True
    if not tabled or not np.array_equal(expected, positions):
        return None
    return offset, parts
