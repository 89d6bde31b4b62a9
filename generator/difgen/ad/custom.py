"""``custom_jvp_call``: a call of a :class:`difgen.custom_jvp` function, carrying
its value and its user derivative rule as sub-graphs.

``custom_jvp_call(*operands, fun=..., rule=..., name=...)``: ``fun`` is
``operands -> y`` (the function traced, or the rule's value when difgen cannot
trace the function), ``rule`` is ``(*operands, *tangents) -> (y, dy)``, one tangent
per float64 operand (:mod:`difgen.frontend.custom` traces both). Its rules are
transforms of the sub-graphs, so it is declared here, with the transforms:

- JVP: the rule's equations inlined on the operands and their tangents (zeros
  where an operand has none); the tangent is the rule's ``dy``. They are ordinary
  equations, so reverse mode transposes them like any JVP (they must be linear in
  the tangents: :func:`check_linear`, the first time the rule is used) and second
  order differentiates the rule's own code;
- no transpose rule: the call is not linear, the inlined rule is;
- batching: a call of the batched sub-graphs (the rule's tangents batched too), so
  a batched call keeps its rule;
- sparsity: the union of the patterns of ``y`` and ``dy`` in the rule, with each
  tangent on its operand's pattern (what the derivative reads);
- printing: none. Once every derivative is taken, :func:`inline_calls` replaces
  each call by ``fun``'s equations (the trace backend's operator graphs), so the
  printers, the C loops and the SymPy lowering never meet it; the sympy backend
  builds a module that calls one from the graph (``pipeline.derive``, noted).

It is not registered with the primitive tables (a row needs a NumPy form, and this
one is never printed), like the loops' ``sweep``; :data:`CALL` is the declaration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from difgen.ad.batching import vmap
from difgen.ad.interpret import apply, build_graph, eval_graph, is_zero, read
from difgen.ad.transpose import transpose_eval
from difgen.core.builder import relaxed
from difgen.core.expr import Aval, Expr
from difgen.core.ir import Eqn, Graph, Lit, SubGraph, Var, evaluate
from difgen.core.primitive import (
    NO_HELPER,
    NO_IDENTITIES,
    NOT_LINEAR,
    Primitive,
    no_loop_form,
)
from difgen.core.tracer import bind
from difgen.errors import DifgenError, TraceError
from difgen.frontend import custom as frontend_custom
from difgen.primitives.patterns import Pattern, _union

NAME = "custom_jvp_call"


RECORDING: list[dict[tuple[str, SubGraph], tuple[Any, ...]]] = []
"""While non-empty, each call evaluated by the reference interpreter (at any depth:
inside loops and branches too) records its first operands here, by (name, rule):
the build-time check of the rules (:mod:`difgen.rules`) reads them."""


def _impl(*operands: Any, fun: SubGraph, rule: SubGraph, name: str) -> Any:
    if RECORDING:
        RECORDING[-1].setdefault((name, rule), tuple(np.copy(o) for o in operands))
    return evaluate(fun.graph, operands)[0]


def _shape_rule(*avals: Aval, fun: SubGraph, rule: SubGraph, name: str) -> Aval:
    types = [(v.shape, v.dtype) for v in fun.graph.inputs]
    if types != [(tuple(s), d) for s, d in avals]:
        raise ValueError(f"the operands of {name} do not match its function")
    out = fun.graph.outputs[0]
    return out.shape, out.dtype


def rule_name(rule: SubGraph, name: str) -> str:
    """How messages name a rule: the function and where the rule is defined."""
    fn = frontend_custom.FUNCTIONS.get((name, rule))
    if fn is not None:
        return f"{fn.rule_label()} of {fn.fun.__qualname__} (at {rule.where})"
    return f"the derivative rule of {name} (at {rule.where})"


def vjp_rule(
    fwd: Graph, bwd: Graph, avals: Sequence[Aval], floating: Sequence[bool]
) -> Graph:
    """The rule of a ``custom_vjp`` call, ``(*operands, *tangents) -> (y, dy)``.

    ``fwd`` is ``operands -> (y, *residuals)``, ``bwd`` is ``(*residuals, ybar) ->
    xbar`` (one cotangent per float operand), linear in ``ybar``. ``dy`` is ``bwd``
    transposed in ``ybar`` and applied to the tangents (``dy . ybar = dx . xbar``
    for every ``ybar``); reverse mode transposes it back into ``bwd``'s equations,
    and second order differentiates both passes' code. A ``bwd`` that is not
    linear in ``ybar`` raises here (:class:`DifgenError` from the transpose).
    """
    n = len(avals)
    tangent_avals = [a for a, f in zip(avals, floating) if f]
    ybar = bwd.inputs[-1]
    linear = {ybar}
    for eqn in bwd.eqns:
        if any(isinstance(a, Var) and a in linear for a in eqn.inputs):
            if not eqn.primitive.linear:
                raise DifgenError(f"it applies {eqn.primitive.name} to ybar")
            linear.add(eqn.out)

    def rule(*args: Any) -> tuple[Any, ...]:
        y, *residuals = eval_graph(fwd, args[:n])
        _, (dy,) = transpose_eval(bwd, len(residuals), 0, residuals, list(args[n:]))
        return y, np.zeros(ybar.shape) if dy is None else dy

    return build_graph(rule, [*avals, *tangent_avals])


_LINEAR_CHECKED: set[SubGraph] = set()


def check_linear(rule: SubGraph, name: str, n: int) -> None:
    """Refuse a rule whose tangent is not linear in the tangents (or whose value
    depends on them): reverse mode transposes it, and forward mode would give
    derivatives of a nonlinear map.

    Structurally: every equation reading a tangent must be a linear primitive, and
    its transpose rule must accept those operands as the linear ones (``dx * dx``
    is two linear operands of ``mul``); an affine tangent (``dx + 1``) passes this
    and is caught by the build-time check at a sample point
    (:func:`difgen.derive.rules.check_rules`), which evaluates it at a zero tangent.
    """
    if rule in _LINEAR_CHECKED:
        return
    graph = rule.graph
    linear: set[Var] = set(graph.inputs[n:])
    for eqn in graph.eqns:
        if not any(isinstance(a, Var) and a in linear for a in eqn.inputs):
            continue
        prim = eqn.primitive
        if not prim.linear or eqn.out.dtype != "float64":
            raise TraceError(
                f"{rule_name(rule, name)} returns a tangent that is not linear in "
                f"the tangents: it applies {prim.name} to them. The tangent must be "
                "linear in the tangents (products with primal values, sums, "
                "slices...), so that reverse mode can transpose it"
            )
        linear.add(eqn.out)
    y = graph.outputs[0]
    if isinstance(y, Var) and y in linear:
        raise TraceError(
            f"{rule_name(rule, name)} returns a value that depends on the tangents; "
            "the value must be the function's, computed from the primals alone"
        )
    avals = [(v.shape, v.dtype) for v in graph.inputs[:n]]
    ct_aval = (graph.outputs[1].shape, "float64")

    def transposed(*args: Any) -> tuple[Any, ...]:
        outs, cts = transpose_eval(graph, n, 1, args[:-1], [args[-1]])
        return (
            *outs,
            *(
                np.zeros(v.shape) if c is None else c
                for v, c in zip(graph.inputs[n:], cts)
            ),
        )

    try:
        build_graph(transposed, [*avals, ct_aval])
    except (DifgenError, TypeError, AssertionError, ValueError) as exc:
        raise TraceError(
            f"{rule_name(rule, name)} returns a tangent that is not linear in the "
            f"tangents (reverse mode cannot transpose it: {exc or type(exc).__name__}"
            "); a product of two tangents, or a tangent divided by a tangent, is "
            "not linear"
        ) from None
    _LINEAR_CHECKED.add(rule)


def _jvp(
    out: Any,
    primals: list[Any],
    tangents: list[Any],
    fun: SubGraph,
    rule: SubGraph,
    name: str,
) -> Any:
    """The rule's ``dy``, its equations inlined on the primals and tangents."""
    n = len(primals)
    check_linear(rule, name, n)
    slots = [i for i, v in enumerate(fun.graph.inputs) if v.dtype == "float64"]
    if all(tangents[i] is None for i in slots):
        return None
    given = []
    for i, var in zip(slots, rule.graph.inputs[n:]):
        t = tangents[i]
        given.append(
            np.zeros(var.shape) if t is None else np.broadcast_to(t, var.shape)
        )
    dy = eval_graph(rule.graph, [*primals, *given])[1]
    return None if is_zero(dy) else dy


def _batch(
    args: list[Any],
    batched: list[bool],
    k: int,
    fun: SubGraph,
    rule: SubGraph,
    name: str,
) -> Any:
    """A call of the batched function and rule (every tangent batched)."""
    n = len(args)
    tangents = [True] * (len(rule.graph.inputs) - n)
    return bind(
        CALL,
        *args,
        fun=SubGraph(vmap(fun.graph, batched, k), fun.where),
        rule=SubGraph(vmap(rule.graph, [*batched, *tangents], k), rule.where),
        name=name,
    )


def _sparsity(eqn: Eqn, patterns: list[Pattern], n: int) -> Pattern:
    """What ``y`` and ``dy`` of the rule read, each tangent on its operand's
    pattern (conservative: ``dy`` also reads the primals)."""
    params = eqn.params.as_dict()
    rule: Graph = params["rule"].graph
    fun: Graph = params["fun"].graph
    k = len(fun.inputs)
    slots = [i for i, v in enumerate(fun.inputs) if v.dtype == "float64"]
    env: dict[Var, Pattern] = dict(zip(rule.inputs[:k], patterns))
    for i, var in zip(slots, rule.inputs[k:]):
        env[var] = patterns[i]

    def read(atom: Any) -> Pattern:
        return None if isinstance(atom, Lit) else env[atom]

    for inner in rule.eqns:
        env[inner.out] = inner.primitive.sparsity(
            inner, [read(a) for a in inner.inputs], n
        )
    shape = tuple(eqn.out.shape)
    terms: list[tuple[Pattern, tuple[int, ...]]] = [
        (read(o), tuple(o.shape)) for o in rule.outputs
    ]
    return _union(terms, shape, n)


def _numpy(
    args: Sequence[Expr], params: Mapping[str, Any], avals: Sequence[Aval]
) -> Any:
    raise DifgenError(
        f"internal: a call of {params['name']} reached a printer; calls are inlined "
        "once every derivative is taken"
    )


def _sympy(*args: Any, fun: SubGraph, rule: SubGraph, name: str) -> Any:
    raise NotImplementedError(
        f"{name} has a user derivative rule, which has no SymPy form"
    )


def _work(eqn: Eqn) -> int:
    fun = eqn.params.as_dict()["fun"].graph
    return max(1, sum(e.primitive.work(e) for e in fun.eqns))


CALL = Primitive(
    name=NAME,
    impl=_impl,
    shape_rule=_shape_rule,
    numpy=_numpy,
    jvp=_jvp,
    transpose=NOT_LINEAR,
    batch=_batch,
    sympy=_sympy,
    simplify=NO_IDENTITIES,
    commutative=False,
    sparsity=_sparsity,
    work=_work,
    scalarizable=False,
    view=False,
    elementwise=False,
    c_loop=no_loop_form("a call with a user derivative rule (inlined before printing)"),
    scalar=NO_HELPER,
    cost="by_work",
)
frontend_custom.CALL.append(CALL)
frontend_custom.VJP_RULE.append(vjp_rule)


def uses_rules(graph: Graph) -> str | None:
    """The name of the first custom function ``graph`` calls (at any depth)."""
    for eqn in graph.eqns:
        if eqn.primitive is CALL:
            return str(eqn.params.as_dict()["name"])
        for value in eqn.params.as_dict().values():
            for sub in value if isinstance(value, tuple) else (value,):
                if isinstance(sub, SubGraph):
                    found = uses_rules(sub.graph)
                    if found is not None:
                        return found
    return None


def inline_calls(graph: Graph) -> Graph:
    """``graph`` with every call (in sub-graphs too) replaced by its function's
    equations: what the printers see, once every derivative is taken."""
    if uses_rules(graph) is None:
        return graph
    avals = [(v.shape, v.dtype) for v in graph.inputs]
    return build_graph(lambda *a: tuple(_inlined(graph, a)), avals)


def _inlined(graph: Graph, args: Sequence[Any]) -> list[Any]:
    """``eval_graph`` with calls inlined, and sub-graph params inlined too."""
    env: dict[Var, Any] = dict(zip(graph.inputs, args))
    for eqn in graph.eqns:
        ins = [read(env, a) for a in eqn.inputs]
        params = eqn.params.as_dict()
        if eqn.primitive is CALL:
            env[eqn.out] = _inlined(params["fun"].graph, ins)[0]
            continue
        if not any(_has_subgraph(v) for v in params.values()):
            env[eqn.out] = apply(eqn, ins)
            continue
        params = {k: _inline_param(v) for k, v in params.items()}
        with relaxed(eqn.relaxed):
            env[eqn.out] = bind(eqn.primitive, *ins, **params)
    return [read(env, o) for o in graph.outputs]


def _has_subgraph(value: Any) -> bool:
    if isinstance(value, SubGraph):
        return True
    return isinstance(value, tuple) and any(isinstance(v, SubGraph) for v in value)


def _inline_param(value: Any) -> Any:
    if isinstance(value, SubGraph):
        return SubGraph(inline_calls(value.graph), value.where)
    if _has_subgraph(value):
        return tuple(_inline_param(v) for v in value)
    return value
