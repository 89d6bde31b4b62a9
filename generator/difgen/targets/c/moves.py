"""Structural and index maps: what a structural equation does to each element, found by
running the primitive's own ``impl`` on element references (docs/design.md,
section 10). Used by planning (views, :mod:`difgen.targets.c.plan`) and by the
demand analysis (:mod:`difgen.targets.c.demand`); :func:`affine` tells an index
map the printer writes as arithmetic from one it writes as a table. No C text."""

from __future__ import annotations

from typing import Any

import numpy as np

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


def moves_of(eqn: Any, const_inputs: dict[int, np.ndarray]) -> Moves:
    """Run the structural primitive's ``impl`` on element references."""
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
    return Moves(constants, terms)


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
