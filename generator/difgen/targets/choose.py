"""Which printer prints each operator, and the module's parts from the printed ones.

The derivation (:mod:`difgen.derive`) hands over, per operator, either SymPy
expressions (the sympy backend) or an optimized graph (the trace backend). This
module chooses how each is printed and calls that printer:

- expressions are straight-line code: Python floats
  (:mod:`difgen.targets.python.printer`), or C (:mod:`difgen.targets.c.extension`)
  with ``emit = "c"``;
- a graph is vector NumPy code (:mod:`difgen.targets.numpy.printer`), straight-line
  scalar code (the graph lowered to SymPy without differentiation, when the cost
  model of :mod:`difgen.targets.cost` says it is cheaper or ``emit = "scalar"``
  forces it), or with ``emit = "c"`` straight-line C for tiny graphs and C loops
  (:mod:`difgen.targets.c.loops`) otherwise.

Nothing here prints: every line of code comes from a printer.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from difgen import precision
from difgen.budget import note
from difgen.config import ModuleSpec
from difgen.core.ir import Graph
from difgen.derive.checks import enforced_checks
from difgen.derive.graphs import GraphDerivation, Layouts
from difgen.derive.sizes import ExpressionTooLarge
from difgen.errors import ConfigError
from difgen.operators import Operator
from difgen.targets import cost as cost_model
from difgen.targets.numpy import printer as vector_code
from difgen.targets.parts import Constants, Function, ModuleParts
from difgen.targets.signatures import sparse_out

if TYPE_CHECKING:  # SymPy's side: imported where straight-line code is printed
    from difgen.derive.symbolic import SymbolicDerivation
    from difgen.targets.python.printer import ScalarCode

Shape = tuple[int, ...]


def _csr_wrappers(
    op: Operator, spec: ModuleSpec, layouts: Layouts, pool: Constants
) -> dict[int, vector_code.CsrFormat]:
    """How each sparse result's data becomes a CSR array (a hessian's triangle
    with ``triangle``)."""
    return {
        i: vector_code.csr_format(
            op.results[i], *coloring.csr_indices(), shape, pool, spec.triangle
        )
        for i, (coloring, shape) in layouts.items()
    }


def _print_traced(
    op: Operator,
    spec: ModuleSpec,
    ys: Shape,
    graph: Graph,
    pool: Constants,
    layouts: Layouts,
) -> tuple[Function, str]:
    """The operator in the configured emission, or the cheaper by the cost model.

    With ``emit = "auto"``, SymPy is asked only when the graph alone says scalar
    code is worth trying (:func:`cost_model.scalar_reason`), and an expression that
    grows past its budget while being lowered stops the attempt: the operator is
    then vector code, and the build says why (:func:`difgen.budget.note`).
    ``emit = "c"``: see :func:`_print_compiled`. A float32 module is vector code:
    straight-line scalar code computes in Python floats, which are float64.
    """
    if spec.emit == "c":
        return _print_compiled(op, spec, ys, graph, pool, layouts)
    if spec.input.dtype == "float32":  # scalar code computes in Python floats
        wrap = _csr_wrappers(op, spec, layouts, pool)
        function = vector_code.print_operator(op, spec, ys, graph, pool, wrap)
        return function, "vector"
    forced = spec.emit == "scalar"
    reason = cost_model.scalar_reason(graph) if spec.emit == "auto" else None
    if spec.emit == "auto" and reason is not None and _plausible(graph):
        note(f"{op.name}: vector code, not scalar: {reason}")
    if forced or (spec.emit == "auto" and reason is None):
        from difgen.targets.python.printer import scalar_code  # imports SymPy

        try:
            code, cost = scalar_code(op, spec, graph, pool, layouts)
            function = _print_expressions(op, spec, ys, code)
        except (NotImplementedError, ExpressionTooLarge, RecursionError) as exc:
            if isinstance(exc, RecursionError):  # SymPy recurses once per nesting
                exc = NotImplementedError("its expressions nest too deeply for SymPy")
            if forced:
                raise ConfigError(
                    spec.config_path,
                    spec.line_of("emit"),
                    f'emit = "{spec.emit}" cannot scalarize {op.name}: {exc}; '
                    'use "auto"',
                ) from None
            if isinstance(exc, ExpressionTooLarge):
                note(f"{op.name}: vector code, not scalar: {exc}")
        else:
            if forced or cost <= cost_model.vector_cost(graph):
                return function, "scalar"
    wrap = _csr_wrappers(op, spec, layouts, pool)
    return vector_code.print_operator(op, spec, ys, graph, pool, wrap), "vector"


def _print_compiled(
    op: Operator,
    spec: ModuleSpec,
    ys: Shape,
    graph: Graph,
    pool: Constants,
    layouts: Layouts,
) -> tuple[Function, str]:
    """``emit = "c"``: straight-line C for tiny graphs (at most
    :data:`c_loops.STRAIGHT_LINE_WORK` elements of work, within the scalar budgets
    of :func:`cost_model.scalar_reason`), else C loops over the graph
    (:mod:`difgen.targets.c.loops`), whose Python fallback is the vector emission.

    Straight-line code wins where SymPy folds a tiny graph; from a few hundred
    elements of work loops are faster and compile faster (the suite's C rows,
    ``python -m benchmarks``). ``points = true`` makes the same choice: the points
    loop runs the one-point operator's code, and over many points loops match or
    beat straight-line code at every size (``scripts/points_straight_or_loops.py``
    measures both), so straight-line
    code is kept only where it serves the one-point call. A graph with a primitive
    that has no loop form keeps the operator in Python (vector code), and the build
    says so."""
    from difgen.targets.c import extension as c_code
    from difgen.targets.c import glue as c_glue
    from difgen.targets.c import ints as c_ints
    from difgen.targets.c import loops as c_loops

    c_code.check_names(spec)
    small = cost_model.work(graph) <= c_loops.STRAIGHT_LINE_WORK
    # a hessian's triangle is gathered by the loops' glue only
    small = small and not (spec.triangle is not None and "hessian" in op.results)
    # a float32 module's C is loops only: straight-line code is SymPy's folding
    # of the graph, the loops are its operations in float32, as its vector code
    # straight-line C checks no run-time index: a module whose operators check
    # one at every call (even where their graph does not read it) takes loops,
    # which enforce the checks or keep the operator in Python
    checked = bool(enforced_checks())
    if (
        small
        and cost_model.scalar_reason(graph) is None
        and not precision.is_float32()
        and not checked
    ):
        from difgen.targets.python.printer import scalar_code  # imports SymPy

        try:
            code, _ = scalar_code(op, spec, graph, pool, layouts)
            return _print_expressions(op, spec, ys, code), "scalar"
        except (NotImplementedError, ExpressionTooLarge, RecursionError, ConfigError):
            pass  # loops print any graph the scalar emission cannot
    wrap = _csr_wrappers(op, spec, layouts, pool)
    function = vector_code.print_operator(op, spec, ys, graph, pool, wrap)
    last = layouts.get(len(op.results) - 1)
    pattern = (*last[0].csr_indices(), last[1]) if last is not None else None
    try:
        body = c_loops.loop_body(op, spec, ys, graph)
    except c_loops.NoLoopForm as exc:
        note(f"{op.name}: kept in Python (vector code): no C loop form for {exc}")
        return function, "vector"
    native, doc, runtime = c_loops.c_loops_function(body, len(graph.eqns), pattern)
    points = c_loops.points_native(op, spec, ys, body) if spec.points else None
    # the C computes a triangle's nonzeros only: its wrappers select none
    native_wrap = {i: dataclasses.replace(f, select=None) for i, f in wrap.items()}
    wrappers, uses = c_glue.csr_helpers(op.results, native_wrap, sparse_out(op, spec))
    wrappers += c_ints.helpers(spec, body.sig.ints)
    compiled = dataclasses.replace(
        function.using(uses),
        native=native,
        native_doc=doc + function.doc,
        native_runtime=runtime,
        wrappers=wrappers,
        native_points=points,
    )
    return compiled, "vector"


def _plausible(graph: Graph) -> bool:
    """Whether scalar code would have been tried before its size budget existed
    (small, no factorization): only then is skipping it news worth a note."""
    return cost_model.work(graph) <= cost_model.SCALAR_LIMIT and all(
        e.primitive.scalarizable for e in graph.eqns
    )


def _label(kinds: dict[str, str]) -> str:
    if len(set(kinds.values())) == 1:
        return next(iter(kinds.values()))
    parts = []
    for emission in ("scalar", "vector"):
        names = ", ".join(n for n, e in kinds.items() if e == emission)
        parts.append(f"{emission} ({names})")
    return " and ".join(parts)


def _print_expressions(
    op: Operator, spec: ModuleSpec, ys: Shape, code: ScalarCode
) -> Function:
    """Straight-line code of one operator's expressions: C (with its Python twin)
    for ``emit = "c"``, else Python floats."""
    if spec.emit == "c":
        from difgen.targets.c import extension as c_code

        return c_code.print_operator(op, spec, ys, code)
    from difgen.targets.python.printer import print_operator

    return print_operator(op, spec, ys, code)


def print_graphs(
    spec: ModuleSpec, derivation: GraphDerivation, pool: Constants
) -> ModuleParts:
    """The trace backend's module: each operator graph in the emission chosen for
    it (module constants go to ``pool``)."""
    ys = derivation.output_shape
    functions: list[Function] = []
    kinds: dict[str, str] = {}
    for item in derivation.operators:
        function, kinds[item.op.name] = _print_traced(
            item.op, spec, ys, item.graph, pool, item.layouts
        )
        functions.append(function)
    return ModuleParts(
        functions=functions,
        output_shape=ys,
        emission=_label(kinds),
        coloring="; ".join(
            f"{kind}: {text}"
            for kind, text in derivation.derivatives.colorings_used.items()
        ),
        constants=pool.items,
        setup=pool.setup,
        uses=pool.uses,
        patterns=pool.patterns,
    )


def print_symbolic(
    spec: ModuleSpec, derivation: SymbolicDerivation, pool: Constants
) -> ModuleParts:
    """The sympy backend's module: every operator as straight-line code."""
    from difgen.targets.python.printer import ScalarCode

    ys = derivation.output_shape
    functions = [
        _print_expressions(
            item.op,
            spec,
            ys,
            ScalarCode(item.arrays, list(item.order), list(item.results), pool),
        )
        for item in derivation.operators
    ]
    return ModuleParts(
        functions=functions,
        output_shape=ys,
        emission="scalar",
        constants=pool.items,
        setup=pool.setup,
        uses=pool.uses,
        patterns=pool.patterns,
    )
