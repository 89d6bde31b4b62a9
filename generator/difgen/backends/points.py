"""Points variants (``points = true``): each operator at k points in one NumPy call.

``gradient_points(x)`` takes ``x`` of shape ``(k, *input.shape)`` for any ``k`` and
returns what ``gradient`` returns at each point, stacked. It is built the same way
for both backends: the operator's graph from the trace backend
(:meth:`difgen.backends.trace_backend.Derivatives.operator_graph`) is batched over a
leading axis by the vmap transform (each primitive's ``batch`` rule) and emitted as
vector code, so no Python loop runs over the points. *Why the trace path for the
sympy backend too:* its scalar code is straight-line Python on floats, one name
per element; evaluating those expressions on columns would need a second printer
with NumPy semantics for every helper of :mod:`difgen.floats`, while the batched
graph reuses the vmap rules every primitive is already tested against.

The number of points is not known at build time, and shapes in the IR are static.
The batched graph is therefore built at two sentinel sizes, and the two emissions
must agree once each sentinel is replaced by ``npoints`` (read from ``x.shape[0]``
at run time); module constants and import-time values must not depend on it at all.
Code in which the number of points enters any other way (a product like ``3 * k``
in a reshape, index arrays over the stacked points) fails that comparison, and the
build refuses it at the ``points`` key rather than emit code valid for one ``k``.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from difgen import naming
from difgen.ad import build_graph, vmap_eval
from difgen.backends import c_points
from difgen.backends.epilogue import LastResult, returns
from difgen.backends.trace_backend import Derivatives
from difgen.backends.vector_code import emit_graph, is_view, number
from difgen.budget import note
from difgen.config import ModuleSpec
from difgen.core.ir import Graph, Lit
from difgen.emit.render import Constants, Function
from difgen.emit.signatures import points_docstring, points_signature
from difgen.errors import ConfigError
from difgen.operators import OPERATORS, Operator
from difgen.passes import optimize

SENTINELS = (97, 89, 83, 79, 73, 71, 67, 61, 59, 53, 47, 43)
"""Candidate sizes of the points axis at build time: two-digit primes, so both
sentinels print as long (the inlining policy looks at lengths), and two that
appear nowhere in the operator's IR are taken."""


def batch_flags(op: Operator, spec: ModuleSpec) -> list[bool]:
    """Which inputs of the operator graph carry the points axis: ``x``, the seeds
    and the per-point contexts."""
    return [True] * (1 + len(op.seeds)) + [c.per_point for c in spec.contexts]


def batched_graph(
    graph: Graph, flags: Sequence[bool], k: int
) -> tuple[Graph, list[bool]]:
    """``graph`` on inputs whose ``flags`` ones lead with ``k`` points, optimized.

    Returns the graph and, per output, whether it carries the points axis (an
    output that depends on no per-point input, such as the hessian of a quadratic,
    does not; the emission broadcasts it).
    """
    avals = [
        ((k, *v.shape) if b else v.shape, v.dtype) for v, b in zip(graph.inputs, flags)
    ]
    out_flags: list[bool] = []

    def fn(*args: Any) -> tuple[Any, ...]:
        outs, batched = vmap_eval(graph, args, flags, k)
        out_flags[:] = batched
        return tuple(outs)

    return optimize(build_graph(fn, avals)), out_flags


def _sentinels(graph: Graph) -> tuple[int, int]:
    """Two candidate sizes that appear as no integer in the printed graph."""
    used = set(re.findall(r"\d+", str(graph)))
    free = [k for k in SENTINELS if str(k) not in used]
    if len(free) < 2:  # every candidate appears: the comparison still guards
        return SENTINELS[0], SENTINELS[1]
    return free[0], free[1]


def _code(
    graph: Graph, out_flags: Sequence[bool], names: Sequence[str], pool: Constants
) -> tuple[list[str], list[str]]:
    """(statements, result expressions) of a batched graph; every result a fresh
    array with the points in front."""
    k = graph.inputs[0].shape[0]
    code = emit_graph(graph, names, pool, lead=k)
    results = []
    for out, expr, batched in zip(graph.outputs, code.outputs, out_flags):
        if isinstance(out, Lit) and out.shape == ():
            expr = number(out.value[()])
        if not batched:  # the same at every point
            results.append(f"np.full({(k, *out.shape)!r}, {expr})")
        elif out in graph.inputs or is_view(graph, out, code.hoisted):
            results.append(f"np.array({expr})")
        else:
            results.append(expr)
    return list(code.lines), results


def _generic(lines: Sequence[str], k: int) -> list[str]:
    """``lines`` with the sentinel ``k`` (as a whole integer) replaced by npoints."""
    pattern = re.compile(rf"(?<![\w.]){k}(?![\w.])")
    return [pattern.sub(naming.NPOINTS, line) for line in lines]


def points_function(
    op: Operator, spec: ModuleSpec, derivs: Derivatives, pool: Constants
) -> Function:
    """The points variant of one operator, as vector code for any number of points."""
    graph = derivs.operator_graph(op)
    flags = batch_flags(op, spec)
    names = [naming.INPUT, *op.seeds, *(c.name for c in spec.contexts)]
    k1, k2 = _sentinels(graph)
    trial = copy.deepcopy(pool)
    g1, f1 = batched_graph(graph, flags, k1)
    g2, f2 = batched_graph(graph, flags, k2)
    lines1, results1 = _code(g1, f1, names, pool)
    lines2, results2 = _code(g2, f2, names, trial)
    body = _generic(lines1, k1)
    results = _generic(results1, k1)
    if (
        (body, results) != (_generic(lines2, k2), _generic(results2, k2))
        or pool.items != trial.items
        or pool.setup != trial.setup
    ):
        raise ConfigError(
            spec.config_path,
            spec.line_of("points"),
            f"the points variant of '{op.name}' would be valid for one number of "
            "points only (its batched code uses the number of points other than as "
            "the leading axis); remove points = true, or this operator, from the "
            "module",
        )
    if len(results) == 1:
        last = LastResult(f": NDArray[np.float64] = {results[0]}", naming.RESULT)
        body += returns(op.results, results, last, False)
    else:
        body += returns(op.results, results, None, False)
    params, annotation = points_signature(op, spec, derivs.ys)
    return Function(
        naming.points(op.name),
        params,
        annotation,
        points_docstring(op, spec, derivs.ys),
        tuple(body),
        points_of=op.name,
    )


def build(
    spec: ModuleSpec, graph: Graph, pool: Constants, functions: Sequence[Function]
) -> list[Function]:
    """The points variants of ``f`` and every requested operator, in table order.

    With ``emit = "c"`` each also carries its C loop, printed with the one-point
    operator among ``functions`` (:mod:`difgen.backends.c_points`).
    """
    derivs = Derivatives(spec, graph)
    variants = [
        points_function(OPERATORS[name], spec, derivs, pool)
        for name in ("f", *spec.operators)
    ]
    if spec.emit != "c":
        return variants
    native = {f.name: f.native_points for f in functions}
    return [with_native(spec, f, native.get(f.points_of or "")) for f in variants]


def with_native(
    spec: ModuleSpec, variant: Function, native: tuple[str, str] | None
) -> Function:
    """A points variant with its compiled twin (``emit = "c"``): the C loop, its
    docstring, and the module helper the extension's argument checks call."""
    if native is None:  # the one-point operator stayed in Python (no C form)
        note(
            f"{variant.name}: kept in Python (the NumPy points variant): "
            f"{variant.points_of} is not compiled, so the points loop has no C "
            "code to run"
        )
        return variant
    source, signature = native
    return dataclasses.replace(
        variant,
        native=source,
        native_doc=signature + variant.doc,
        wrappers=c_points.HELPERS,
    )
