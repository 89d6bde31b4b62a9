"""Structural moves as arrays (targets/c/moves.py): the fast rules against the
element-by-element reference.

:func:`~difgen.targets.c.moves.moves_of` finds a structural equation's moves
from numbers (one element per output: slices, reshapes, transposes, broadcasts,
concatenations, pads, rolls, constant gathers) or from a scatter's static index
(its sums, in NumPy's order); :func:`~difgen.targets.c.moves.element_moves` runs
the primitive's ``impl`` on one :class:`~difgen.targets.c.moves.Ref` per element
and is the reference here: the same constants, slots and positions, on small
shapes with negative steps, empty slices, size-1 axes and 0-d values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from difgen.core.indexing import freeze_index
from difgen.frontend.tracing import trace
from difgen.primitives.indexing import scatter_add, scatter_sum
from difgen.targets.c import moves as moves_module
from difgen.targets.c.moves import element_moves, moves_of, structural
from difgen.targets.c.program import Moves, NoLoopForm


def _structural_eqns(fn: Callable[..., Any], *shapes: tuple[int, ...]) -> list[Any]:
    graph = trace(fn, [(s, "float64") for s in shapes])
    found = [e for e in graph.eqns if structural(e.primitive)]
    assert found, "the case traces no structural equation"
    return found


def _same(fast: Moves, reference: Moves) -> None:
    assert fast.constants.tolist() == reference.constants.tolist()
    assert fast.slots.tolist() == reference.slots.tolist()
    assert fast.where.tolist() == reference.where.tolist()
    assert fast.terms == reference.terms


def _two(x: Any) -> Any:
    return x.reshape(2, 3)


GATHERS: dict[str, tuple[Callable[..., Any], tuple[int, ...]]] = {
    "slice": (lambda x: x[1:4], (6,)),
    "strided slice": (lambda x: x[1:6:2], (7,)),
    "reversed slice": (lambda x: x[::-1], (5,)),
    "reversed strided slice": (lambda x: x[5:0:-2], (7,)),
    "empty slice": (lambda x: x[3:3], (5,)),
    "empty reversed slice": (lambda x: x[1:4:-1], (5,)),
    "2-d slice, negative step": (lambda x: x[::-1, 1:], (3, 4)),
    "size-1 axis": (lambda x: x[:, ::-1], (1, 4)),
    "one element (0-d out)": (lambda x: x[2], (5,)),
    "element of a 0-d value": (lambda x: x.reshape(1), ()),
    "reshape": (lambda x: x.reshape(3, 2), (6,)),
    "transpose": (lambda x: _two(x).T, (6,)),
    "transpose 3-d": (lambda x: x.transpose(2, 0, 1), (2, 3, 4)),
    "broadcast": (lambda x: np.broadcast_to(x, (3, 4)), (4,)),
    "broadcast of a size-1 axis": (lambda x: np.broadcast_to(x, (2, 3)), (1, 3)),
    "broadcast of 0-d": (lambda x: np.broadcast_to(x, (3,)), ()),
    "concatenate": (lambda x: np.concatenate([x[2:], x[:2], x[::-1]]), (5,)),
    "concatenate 2-d": (lambda x: np.concatenate([x, x[::-1]], axis=1), (2, 3)),
    "pad": (lambda x: np.pad(x, (2, 1)), (4,)),
    "pad 2-d": (lambda x: np.pad(x, ((1, 0), (0, 2))), (2, 3)),
    "roll": (lambda x: np.roll(x, 2), (5,)),
    "roll backwards": (lambda x: np.roll(x, -7), (5,)),
    "roll 2-d": (lambda x: np.roll(x, (1, -1), axis=(0, 1)), (3, 4)),
    "take, constant indices": (lambda x: x[[4, 0, 0, 2]], (5,)),
    "take 2-d": (lambda x: x[[1, 0], ::-1], (2, 3)),
    "stack": (lambda x: np.stack([x[::-1], x]), (3,)),
}


@pytest.mark.parametrize("case", sorted(GATHERS))
def test_one_element_per_output_moves_as_the_reference(case: str) -> None:
    fn, shape = GATHERS[case]
    for eqn in _structural_eqns(fn, shape):
        fast = moves_of(eqn, {})
        assert fast.slots.shape[1] == 1  # one term (or none) per element
        _same(fast, element_moves(eqn, {}))


def _index(index: Any, shape: tuple[int, ...]) -> tuple[Any, ...]:
    return freeze_index(index, shape)


SCATTERS: dict[str, tuple[Callable[..., Any], tuple[tuple[int, ...], ...]]] = {
    "adjoint of x[1:] and x[:-1]": (
        lambda a, b: scatter_sum(
            [a, b],
            [_index(slice(None, -1), (5,)), _index(slice(1, None), (5,))],
            (5,),
        ),
        ((4,), (4,)),
    ),
    "reversed and strided writes": (
        lambda a, b: scatter_sum(
            [a, b],
            [_index(slice(None, None, -2), (5,)), _index(slice(1, None), (5,))],
            (5,),
        ),
        ((3,), (4,)),
    ),
    "repeated positions": (
        lambda a, b: scatter_sum(
            [a, b],
            [_index(np.array([0, 2, 0, 0]), (3,)), _index(np.array([2, 2]), (3,))],
            (3,),
        ),
        ((4,), (2,)),
    ),
    "a broadcast value and a size-1 axis": (
        lambda a, b: scatter_sum(
            [a, b],
            [_index((slice(None), 0), (3, 1)), _index(slice(None), (3, 1))],
            (3, 1),
        ),
        ((), (1, 1)),
    ),
    "an empty write": (
        lambda a, b: scatter_sum(
            [a, b],
            [_index(slice(2, 2), (4,)), _index(slice(None, None, -1), (4,))],
            (4,),
        ),
        ((0,), (4,)),
    ),
    "0-d result": (
        lambda a, b: scatter_sum([a, b], [(), ()], ()),
        ((), ()),
    ),
    "scatter_add with repeats": (
        lambda a: scatter_add(a, _index(np.array([1, 1, 3, 1]), (4,)), (4,)),
        ((4,),),
    ),
}


@pytest.mark.parametrize("case", sorted(SCATTERS))
def test_a_scatters_sums_from_its_index_as_the_reference(case: str) -> None:
    fn, shapes = SCATTERS[case]
    (eqn,) = [e for e in _structural_eqns(fn, *shapes) if "scatter" in e.primitive.name]
    fast = moves_of(eqn, {})
    assert moves_module.summed(eqn) is not None or moves_module.gathered(eqn)
    _same(fast, element_moves(eqn, {}))


def test_the_adjoint_of_two_shifted_slices_is_two_terms_where_they_overlap() -> None:
    fn, shapes = SCATTERS["adjoint of x[1:] and x[:-1]"]
    (eqn,) = _structural_eqns(fn, *shapes)
    assert moves_of(eqn, {}).terms == [
        ((0, 0),),
        ((0, 1), (1, 0)),
        ((0, 2), (1, 1)),
        ((0, 3), (1, 2)),
        ((1, 3),),
    ]


def test_a_large_scatter_builds_no_object_per_element(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The n = 10^6 Rosenbrock gradient's adjoint: from its index alone."""
    n = 1_000_000
    (eqn,) = _structural_eqns(
        lambda a, b: scatter_sum(
            [a, b],
            [_index(slice(None, -1), (n,)), _index(slice(1, None), (n,))],
            (n,),
        ),
        (n - 1,),
        (n - 1,),
    )

    def refused(*args: Any) -> Any:
        raise AssertionError("element by element")

    monkeypatch.setattr(moves_module, "_refs", refused)
    found = moves_of(eqn, {})
    assert found.slots.shape == (n, 2)
    assert found.slots[1:-1].tolist() == [[0, 1]] * (n - 2)
    assert found.where[-1].tolist() == [n - 2, 0] and found.slots[-1, 1] == -1


def test_a_large_map_without_a_rule_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the cap the per-element rule names the primitive (the operator then
    stays in Python) instead of building an object per element."""
    (eqn,) = _structural_eqns(lambda x: x[::-1], (6,))
    monkeypatch.setattr(moves_module, "REF_ELEMENTS", 4)
    with pytest.raises(NoLoopForm, match=r"getitem .*element by element only up to 4"):
        moves_of(eqn, {0: np.zeros(6)})  # a constant operand: no fast rule
    assert moves_of(eqn, {}).where[:, 0].tolist() == [5, 4, 3, 2, 1, 0]
