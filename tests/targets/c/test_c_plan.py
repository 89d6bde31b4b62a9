"""Planning of ``emit = "c"`` loops without a compiler (targets/c/plan.py).

Small traced graphs planned as a :class:`~difgen.targets.c.program.Program`:
which equations fuse into which loop, which take a loop form of their own, which
structural equations are views (and which of those are affine), which values get
memory, which results demand analysis computes at their own elements, and what
the finite-constant abstraction proves. No C is printed and nothing is compiled
(the C itself is tested in test_c_loops.py and test_c_sparse.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from difgen.core.ir import Graph, Lit, Var
from difgen.frontend.tracing import trace
from difgen.targets.c import abi
from difgen.targets.c.finite import finite_split
from difgen.targets.c.moves import affine
from difgen.targets.c.plan import UFUNC_SIZE, Planner
from difgen.targets.c.program import Group, NoLoopForm, Program, Step


def _graph(fn: Callable[[Any], Any], shape: tuple[int, ...] = (5,)) -> Graph:
    return trace(fn, [(shape, "float64")])


def _planned(graph: Graph) -> Program:
    results = abi.result_stores(graph, [tuple(o.shape) for o in graph.outputs])
    return Planner(graph).program(results)


def _names(group: Group) -> list[str]:
    return [e.primitive.name for e in group.eqns]


def test_an_elementwise_chain_is_one_loop_and_only_its_result_has_memory() -> None:
    graph = _graph(lambda x: np.sin(x) * 2.0 + x)
    program = _planned(graph)
    assert [_names(g) for g in program.loops] == [["sin", "mul", "add"]]
    assert program.steps == [] and program.view_of == {}
    assert program.needs == {graph.outputs[0]}  # sin and mul stay temporaries
    assert program.demands == []


def test_a_view_is_an_index_map_and_its_reader_starts_a_new_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``(x * 2.0)[::-1]`` reads the product backwards: the loop computing the
    product has not written all of it when the add would read it (with the
    result computed as usual, not on demand as below)."""
    from difgen.targets.c import plan

    monkeypatch.setattr(plan, "demand_of", lambda *args: None)
    graph = _graph(lambda x: (x * 2.0)[::-1] + 1.0)
    program = _planned(graph)
    mul, getitem, add = graph.eqns
    assert [_names(g) for g in program.loops] == [["mul"], ["add"]]
    source, table = program.view_of[getitem.out]
    assert source is mul.out
    assert table.tolist() == [4, 3, 2, 1, 0]
    assert affine(table) == (4, (-1,))  # printed as index arithmetic
    assert program.needs == {mul.out, add.out}
    # the product takes the workspace; the sum is written into the result
    assert program.offsets == {mul.out: 0} and program.work == 5


def test_an_elementwise_result_reading_a_moved_value_is_computed_on_demand() -> None:
    """The sum reads the product through a move: computed at its own elements,
    each reads ``x`` where the move puts it and computes the product there, in
    one loop, with no array for the product."""
    graph = _graph(lambda x: (x * 2.0)[::-1] + 1.0)
    program = _planned(graph)
    (planned,) = program.demands
    assert planned.demand.out is graph.outputs[0]
    assert planned.demand.leaves == [graph.inputs[0]]
    assert program.loops == [] and program.work == 0
    (group,) = planned.demand.groups
    (read,) = [k for k, item in enumerate(group.skeleton) if item[0] == "v"]
    assert group.reads[read].tolist() == [4, 3, 2, 1, 0]


def test_a_gather_is_a_view_through_a_table() -> None:
    graph = _graph(lambda x: x[np.array([0, 2, 1, 3, 4])] * x)
    program = _planned(graph)
    getitem, _ = graph.eqns
    source, table = program.view_of[getitem.out]
    assert source is graph.inputs[0]
    assert affine(table) is None  # printed as a static const int table
    assert [_names(g) for g in program.loops] == [["mul"]]


def test_equations_of_constants_are_evaluated_at_build_time() -> None:
    """``cos`` of a literal is evaluated by the primitive's impl: its value is
    a constant of the program, and no loop computes it."""
    graph = _graph(lambda x: x * np.cos(x))
    cos, mul = graph.eqns
    folded = dataclasses.replace(cos, inputs=(Lit(np.arange(5.0)),))
    graph = Graph(graph.inputs, graph.outputs, (folded, mul))
    program = _planned(graph)
    np.testing.assert_array_equal(program.consts[cos.out], np.cos(np.arange(5.0)))
    assert [_names(g) for g in program.loops] == [["mul"]]


def test_a_reduction_accumulates_in_the_loop_of_its_operand() -> None:
    graph = _graph(lambda x: np.sum(np.exp(x)) + 1.0)
    program = _planned(graph)
    _, total, _ = graph.eqns
    first, second = program.loops
    assert _names(first) == ["exp", "reduce_sum"] and first.pending == {total.out}
    assert _names(second) == ["add"]  # reads the sum: after its loop
    assert total.out in program.needs
    assert program.offsets == {} and program.work == 0  # a scalar: a local double


def test_the_workspace_is_laid_out_in_the_order_values_are_computed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Arrays read by a later loop through a view each take the next doubles;
    values that stay scalar temporaries of their loop take none (the result
    computed as usual: on demand, it needs no workspace at all)."""
    from difgen.targets.c import plan

    monkeypatch.setattr(plan, "demand_of", lambda *args: None)
    graph = _graph(lambda x: (np.sin(x) * 2.0)[::-1] + np.cos(x)[::-1] * x, (6,))
    program = _planned(graph)
    stored = [v for v in program.offsets if v not in graph.outputs]
    assert [program.offsets[v] for v in stored] == [6 * k for k in range(len(stored))]
    assert program.work == 6 * len(stored) >= 12
    computed = [e.out for g in program.loops for e in g.eqns]
    assert stored == [v for v in computed if v in program.offsets]  # in order
    assert all(v in program.needs for v in stored)


def test_a_large_transcendental_is_numpys_loop() -> None:
    small = _planned(_graph(lambda x: np.exp(x) + 1.0, (UFUNC_SIZE - 1,)))
    assert [_names(g) for g in small.loops] == [["exp", "add"]]
    graph = _graph(lambda x: np.exp(x) + 1.0, (UFUNC_SIZE,))
    large = _planned(graph)
    assert [s.eqn.primitive.name for s in large.steps] == ["exp"]
    assert isinstance(large.items[0], Step)
    assert [_names(g) for g in large.loops] == [["add"]]
    assert graph.eqns[0].out in large.needs  # NumPy writes it into memory


def test_a_gathered_result_is_computed_on_demand() -> None:
    """Six elements out of a ten-element concatenation: computing those beats
    computing both halves; the equations disappear from the loops."""
    picked = np.array([0, 4, 4, 5, 9, 1])
    weights = np.array([0.0, 1.0, 2.0, 1.0, 0.0])
    graph = _graph(lambda x: np.concatenate([x * weights, x + 1.0])[picked])
    program = _planned(graph)
    (planned,) = program.demands
    demand, store = planned.demand, planned.store
    assert demand.out is graph.outputs[0] and store.shape == (6,)
    assert demand.leaves == [graph.inputs[0]]
    assert program.items == []  # nothing else to compute
    targets = sorted(t for g in demand.groups for t in g.targets.ravel().tolist())
    assert targets == list(range(6))
    # element 4 of the concatenation is read twice: computed once, stored twice
    assert [g.targets.tolist() for g in demand.groups if g.targets.shape[1] > 1] == [
        [[1, 2]]
    ]
    # no constant is most of the result; groups of one length share a loop
    assert planned.everywhere.fill is None and planned.finite is None
    loops = planned.everywhere.loops
    assert sorted(g for together in loops for g in map(id, together)) == sorted(
        map(id, demand.groups)
    )
    assert all(len({len(g.targets) for g in together}) == 1 for together in loops)
    assert len({len(together[0].targets) for together in loops}) == len(loops)


def test_constants_when_finite_are_found_and_the_test_reads_the_argument() -> None:
    """``10 + x * 0.0`` and ``3 + x * -0.0`` are 10 and 3 for every finite x:
    two thirds of the result, for a test of x's four doubles."""
    reverse = np.arange(12)[::-1]
    graph = _graph(
        lambda x: np.concatenate([10.0 + x * 0.0, 3.0 + x * -0.0, x * x])[reverse],
        (4,),
    )
    program = _planned(graph)
    (planned,) = program.demands
    demand, store = planned.demand, planned.store
    assert len(demand.groups) == 3 and store.shape == (12,)
    found = planned.finite  # finite_split's answer, as the planner asked it
    assert found is not None
    again = finite_split(demand, 12, program.original_eqns, program.view_of)
    assert again is not None and np.array_equal(again.template, found.template)
    assert found.tested == [graph.inputs[0]]
    assert not found.filled  # no one constant is most of the result: a table
    np.testing.assert_array_equal(found.template, [0.0] * 4 + [3.0] * 4 + [10.0] * 4)
    (left,) = found.groups  # x * x, the one group still computed
    assert left.targets.ravel().tolist() == [0, 1, 2, 3]
    assert [item[0] for item in left.skeleton] == ["v", "e"]
    assert planned.when_finite is not None
    assert planned.when_finite.fill is None and planned.when_finite.loops == [[left]]


def test_no_constants_when_finite_past_half_the_result() -> None:
    reverse = np.arange(12)[::-1]
    graph = _graph(
        lambda x: np.concatenate([10.0 + x * 0.0, x * x, x + 2.0])[reverse], (4,)
    )
    program = _planned(graph)
    (planned,) = program.demands
    assert planned.finite is None and planned.when_finite is None
    assert (
        finite_split(planned.demand, 12, program.original_eqns, program.view_of) is None
    )


def test_a_mostly_zero_result_is_filled_first() -> None:
    """Four products scattered among 32 zeros: the zeros are one constant of
    most elements, written by one fill before the loop of the products."""
    rows = [0, 7, 14, 21]
    index = np.array([rows.index(i) if i in rows else 4 for i in range(36)])
    graph = _graph(lambda x: np.concatenate([x * x, np.zeros(1)])[index], (4,))
    program = _planned(graph)
    (planned,) = program.demands
    assert planned.everywhere.fill == np.float64(0.0).tobytes()
    ((products,),) = planned.everywhere.loops
    assert products.targets.ravel().tolist() == rows


def test_what_has_no_loop_form_is_named() -> None:
    graph = _graph(lambda x: np.sin(x))
    wrong = Var((5,), "int64")
    with pytest.raises(NoLoopForm, match="int64 argument"):
        Planner(Graph((wrong,), graph.outputs, graph.eqns))


def test_a_large_product_is_numpys_dot_when_its_operands_lie_in_memory() -> None:
    matrix = np.arange(64.0 * 64).reshape(64, 64) / 4096.0
    (large,) = _planned(_graph(lambda x: matrix @ x, (64,))).steps
    assert large.eqn.primitive.name == "matmul" and large.blas
    (small,) = _planned(_graph(lambda x: matrix[:8, :8] @ x, (8,))).steps
    assert not small.blas  # 64 multiply-adds: the loops
    perm = np.random.default_rng(0).permutation(64)
    gathered = _planned(_graph(lambda x: matrix @ x[perm], (64,)))
    (step,) = gathered.steps
    assert not step.blas  # x[perm] is a table view: no strides to hand NumPy
