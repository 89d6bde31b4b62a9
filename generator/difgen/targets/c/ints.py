"""int64 arguments of the C loops: labels, counts and other integer contexts that
the operator only turns into floats (docs/design.md, section 10).

The loops compute in doubles, and the planner refuses int64 values
(:func:`difgen.targets.c.plan.loop_kind`): integer arithmetic (overflow, floor
division) and run-time indices are NumPy's, in the vector emission. An int64
argument whose every use is a cast to float64 (``y * z`` with int labels
``y``, ``np.log(n)`` of a count) needs neither: NumPy's cast and C's conversion of
an ``int64_t`` to a ``double`` are the same rounding (exact below 2**53), so the
argument can be converted once, at the call's boundary, to a float64 array, and
the casts read it. An int64 argument read as a one-axis run-time index
(``x[idx]`` and its scatter-add) is converted so too: the loops read the index
as doubles (:mod:`difgen.targets.c.indexed`). :func:`as_doubles` rewrites the graph so; the argument prologue
(:func:`difgen.targets.c.arguments.convert_lines` with ``ints``, the points
variants' ``dg_int_points``) checks the argument as the Python operator does
(exactly int64 on the fast path, else the module's ``_as_ints``) and converts it.
"""

from __future__ import annotations

from collections.abc import Sequence

from difgen import naming
from difgen.config import ModuleSpec
from difgen.core.ir import Eqn, Graph, Var
from difgen.core.primitive import CAST_AT_BOUNDARY
from difgen.derive.checks import enforced_checks
from difgen.targets.c.indexed import one_axis
from difgen.targets.c.program import NoLoopForm


def _indexes(eqn: Eqn, var: Var) -> bool:
    """Whether ``eqn`` reads ``var`` only as a one-axis run-time index, which the
    loops read as doubles too (:mod:`difgen.targets.c.indexed`)."""
    found = one_axis(eqn)
    return (
        found is not None
        and eqn.inputs[found.slot] == var
        and not any(a == var for k, a in enumerate(eqn.inputs) if k != found.slot)
    )


def _cast(eqn: Eqn) -> bool:
    """Whether ``eqn`` casts int64 data to float64 (its declaration says so)."""
    return eqn.primitive.c_loop is CAST_AT_BOUNDARY


def helpers(spec: ModuleSpec, ints: frozenset[str]) -> tuple[tuple[str, str], ...]:
    """What the extension's ``_bind`` is given for an operator that converts the
    int64 arguments ``ints``: the module's own ``_as_ints`` (its errors are the
    Python operator's), and with one of them per point ``_points_count`` too,
    whose errors name the argument that set the number of points (the points
    variants run the same statements)."""
    if not ints:
        return ()
    found = [(naming.AS_INTS, naming.AS_INTS)]
    if spec.points and any(c.per_point and c.name in ints for c in spec.contexts):
        found.append((naming.POINTS_COUNT, naming.POINTS_COUNT))
    return tuple(found)


def as_doubles(graph: Graph) -> tuple[Graph, tuple[int, ...]]:
    """``graph`` with each int64 input that is only cast to float64 or read as a
    one-axis run-time index (or not read) made a float64 input, its casts dropped and their results read from it; and
    the positions of those inputs. An int64 input with another use is left as it
    is (the planner refuses it, and the operator stays in vector code)."""
    uses: dict[Var, list[Eqn]] = {}
    ints = [v for v in graph.inputs if v.dtype == "int64"]
    if not ints:
        return graph, ()
    for eqn in graph.eqns:
        for a in eqn.inputs:
            if isinstance(a, Var) and a.dtype == "int64":
                uses.setdefault(a, []).append(eqn)
    outputs = {o for o in graph.outputs if isinstance(o, Var)}
    replaced: dict[Var, Var] = {}
    for var in ints:
        found = uses.get(var, [])
        if var in outputs or any(
            not _indexes(e, var) and (not _cast(e) or e.out.shape != var.shape)
            for e in found
        ):
            continue
        replaced[var] = Var(var.shape, "float64")
    if not replaced:
        return graph, ()
    alias: dict[Var, Var] = {}
    eqns: list[Eqn] = []
    for eqn in graph.eqns:
        (source,) = eqn.inputs if _cast(eqn) else (None,)
        if isinstance(source, Var) and source in replaced:
            alias[eqn.out] = replaced[source]
            continue
        if any(
            isinstance(a, Var) and (a in alias or a in replaced) for a in eqn.inputs
        ):
            read = tuple(
                alias.get(a, replaced.get(a, a)) if isinstance(a, Var) else a
                for a in eqn.inputs
            )
            eqn = Eqn(eqn.primitive, read, eqn.params, eqn.out, eqn.relaxed)
        eqns.append(eqn)
    inputs = tuple(replaced.get(v, v) for v in graph.inputs)
    outs = tuple(alias.get(o, o) if isinstance(o, Var) else o for o in graph.outputs)
    positions = tuple(i for i, v in enumerate(graph.inputs) if v in replaced)
    return Graph(inputs, outs, tuple(eqns)), positions


def keeps_index_checks(
    graph: Graph, names: Sequence[str], positions: Sequence[int]
) -> None:
    """Raise :class:`~difgen.targets.c.program.NoLoopForm` unless the C operator
    enforces every run-time index check of the module on the int64 arguments it
    reads as doubles (``positions`` of ``graph.inputs``, named ``names``).

    A Python operator checks a context used as an index at every call, even when
    its own graph does not read it (the hessian of ``sum(x[idx])`` is all zeros),
    and raises ``IndexError``. A compiled operator checks only where its loops
    gather: so it may take such a context only when it gathers with all of it,
    along an axis of each checked length, with no arithmetic on the way."""
    checks = enforced_checks()
    for position in positions:
        name, var = names[position], graph.inputs[position]
        mine = [c for c in checks if c.context == name]
        if not mine:
            continue
        sizes = set()
        for eqn in graph.eqns:
            found = one_axis(eqn)
            if found is not None and _indexes(eqn, var):
                sizes.add(found.size)
        for check in mine:
            if (
                check.positions is not None
                or check.arithmetic
                or check.size not in sizes
            ):
                raise NoLoopForm(
                    f"the int64 argument '{name}', which every operator checks as an "
                    "index (this one does not gather with it as the check does)"
                )
