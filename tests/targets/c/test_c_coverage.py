"""Every primitive has a C loop form or declares why not, and the declaration is
checked: each row of tests/support/primitive_cases.py whose primitive declares a
loop form is planned through the loops, and all of them are compiled together in
one module (the rows, each on a slice of one input, built once) whose loops compute
what its vector emission computes; each row whose primitive declares none is
refused by the loops with that declared reason."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_c_loops import _close

import difgen
import primitive_cases as cases
from compiled import Built
from conftest import SUPPORT
from difgen.ad.loops import SWEEP
from difgen.core.ir import Eqn, Graph, Lit, Params, Var
from difgen.core.primitive import (
    INDEXED,
    Absent,
    LoopForm,
    Statements,
    reduction_loop,
)
from difgen.frontend import trace
from difgen.primitives import PRIMITIVES
from difgen.primitives.structural import basis_p
from difgen.targets.c import abi
from difgen.targets.c import loops as c_loops
from difgen.targets.c.glue import Used
from difgen.targets.c.nest import element_text
from difgen.targets.c.plan import Planner, loop_kind
from difgen.targets.c.program import NoLoopForm, Program
from difgen.targets.c.statements import STATEMENTS

DECLARED = {**PRIMITIVES, "sweep": SWEEP, "basis": basis_p}


@functools.cache
def _graph(name: str) -> Graph:
    fn, shape = cases.ROWS[name]
    return trace(fn, [(shape, "float64")])


def _planned(graph: Graph) -> Program:
    results = abi.result_stores(graph, [tuple(o.shape) for o in graph.outputs])
    return Planner(graph).program(results)


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_every_primitive_declares_a_loop_form_or_why_not(name: str) -> None:
    form = DECLARED[name].c_loop
    if isinstance(form, Absent):
        assert form.reason.startswith("NO_LOOP_FORM: ") and len(form.reason) > 20
    else:
        assert isinstance(form, LoopForm), form
        assert form.kind != "elementwise" or DECLARED[name].elementwise, name


def test_a_reduction_form_needs_its_accumulator() -> None:
    assert reduction_loop("0.0", "{acc} + {v}").kind == "reduction"
    with pytest.raises(ValueError, match="start and update"):
        LoopForm("reduction")
    with pytest.raises(ValueError, match="ufunc"):
        LoopForm("structural", ufunc=True)
    with pytest.raises(ValueError, match="element facts"):
        LoopForm("matmul", conditions=True)
    with pytest.raises(ValueError, match="element facts"):
        LoopForm("structural", at_literals=((0, 1.0, "{0}"),))


def _element(prim: str, inputs: list[Any], dtypes: list[str]) -> str:
    """The C element of one equation of ``prim`` on ``inputs`` (a Var of a dtype,
    or a literal), as the loops print it."""
    atoms = [
        Lit(np.array(a)) if not isinstance(a, str) else Var((), d)
        for a, d in zip(inputs, dtypes)
    ]
    out = Var((), "float64")
    eqn = Eqn(PRIMITIVES[prim], tuple(atoms), Params.of({}), out)
    return element_text(eqn, ["a", "b", "c"][: len(atoms)], Used())


def test_element_facts_come_from_the_declaration() -> None:
    """``where`` reads its boolean operand as a condition and ``pow`` writes
    ``sqrt`` at a literal 0.5 because their loop forms say so: a primitive
    declared with the same facts prints the same (``targets/c`` tests no name)."""
    assert DECLARED["where"].c_loop.conditions  # type: ignore[union-attr]
    assert _element("where", ["v", "v", "v"], ["bool", "float64", "float64"]) == (
        "((((a) != 0.0)) ? ((b)) : ((c)))"
    )
    assert _element("pow", ["v", 0.5], ["float64", "float64"]) == "sqrt((a))"
    assert _element("pow", ["v", 0.25], ["float64", "float64"]) != "sqrt((a))"
    for path in (Path(difgen.__file__).parent / "targets" / "c").glob("*.py"):
        assert ".name ==" not in path.read_text(), path


def _indexed(form: object) -> bool:
    """A loop form through a run-time index: it needs an int64 argument, which
    these rows of one float input have not (tests/targets/c/test_c_int_indices.py
    compiles them)."""
    return isinstance(form, LoopForm) and form.kind in INDEXED


LOOP_ROWS = sorted(
    n
    for n in cases.ROWS
    if isinstance(DECLARED[n].c_loop, LoopForm) and not _indexed(DECLARED[n].c_loop)
)
STATEMENT_ROWS = sorted(
    n
    for n in cases.ROWS
    if isinstance(DECLARED[n].numpy, Statements)
    and DECLARED[n].numpy.statement in STATEMENTS
)
"""Control flow: no loop form, C statements (tests/targets/c/test_c_statements.py)."""
NO_LOOP_ROWS = sorted(
    n
    for n in cases.ROWS
    if isinstance(DECLARED[n].c_loop, Absent) and n not in STATEMENT_ROWS
)


def test_every_primitive_with_a_loop_form_has_a_row() -> None:
    """So the compiled module below holds each declared loop form."""
    with_form = {
        n
        for n, p in PRIMITIVES.items()
        if isinstance(p.c_loop, LoopForm) and not _indexed(p.c_loop)
    }
    assert with_form == set(LOOP_ROWS)


@pytest.mark.parametrize("name", LOOP_ROWS + STATEMENT_ROWS)
def test_a_declared_loop_form_plans_through_the_loops(name: str) -> None:
    """The row's graph is planned, its primitive's equations in a loop, a step, a
    view, or a result computed on demand (a result made by structural equations):
    no table of names in targets/c says which."""
    graph = _graph(name)
    program = _planned(graph)
    placed = {e.out for g in program.loops for e in g.eqns}
    placed |= {s.eqn.out for s in program.steps} | set(program.view_of)
    placed |= set(program.consts)
    if program.demands:  # what they compute is no longer in the planned graph
        placed |= {e.out for e in graph.eqns} - {e.out for e in program.graph.eqns}
    eqns = [e for e in graph.eqns if e.primitive.name == name]
    assert eqns and all(e.out in placed for e in eqns), name


@pytest.mark.parametrize("name", NO_LOOP_ROWS)
def test_a_declared_absence_is_refused_with_its_reason(name: str) -> None:
    """Each equation of the primitive is refused with its declared reason, and so
    is the row: by the first equation (of any primitive) without a loop form."""
    graph = _graph(name)
    eqns = [e for e in graph.eqns if e.primitive.name == name]
    assert eqns, name
    for eqn in eqns:
        with pytest.raises(
            NoLoopForm, match=re.escape(f"{name} ({eqn.primitive.c_loop})")
        ):
            loop_kind(eqn)
    first = next(e for e in graph.eqns if isinstance(e.primitive.c_loop, Absent))
    with pytest.raises(NoLoopForm) as refused:
        _planned(graph)
    assert str(refused.value) == f"{first.primitive.name} ({first.primitive.c_loop})"


SIZES = [int(np.prod(cases.ROWS[name][1], dtype=np.int64)) for name in LOOP_ROWS]
SIZE = sum(SIZES)
"""The input's size: each row reads its own slice (drawn in [0.2, 0.8])."""


def _source() -> str:
    """primitive_cases.py and one function computing every loop-form row: the
    rows as the build loads them, each on its own slice of the input."""
    rows = ", ".join(
        f"({cases.ROWS[n][0].__name__}, {cases.ROWS[n][1]!r})" for n in LOOP_ROWS
    )
    return (SUPPORT / "primitive_cases.py").read_text() + f"""

def loop_forms(x):
    parts = []
    start = 0
    for fn, shape in [{rows}]:
        size = int(np.prod(shape))
        parts.append(np.ravel(fn(x[start : start + size].reshape(shape))))
        start += size
    return np.concatenate(parts)
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """Built once, as loops rather than straight-line C however small the graph."""
    directory = tmp_path_factory.mktemp("c_coverage")
    (directory / "loop_forms.py").write_text(_source())
    (directory / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "out"\n\n[[module]]\nname = "loop_forms"\n'
        'function = "loop_forms.py:loop_forms"\nbackend = "trace"\nemit = "c"\n'
        f'operators = ["f"]\ninput = {{ shape = [{SIZE}] }}\n'
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(c_loops, "STRAIGHT_LINE_WORK", 0)
        return Built(directory)


def test_every_loop_form_compiles_and_computes_as_numpy(built: Built) -> None:
    compiled = built.compiled("loop_forms")
    assert compiled.PYTHON_OPERATORS == ()
    (module,) = built.result.modules
    assert not any("kept in Python" in n for n in module.notes), module.notes
    source = (built.directory / "out" / "loop_forms__c.c").read_text()
    assert "fused over" in source
    x = np.random.default_rng(5).uniform(0.2, 0.8, SIZE)
    _close(compiled.f(x), built.python("loop_forms").f(x))
