"""``cond``: a branch on a traced value, with its two branches as sub-graphs.

``cond(pred, *operands, branches=(if_false, if_true))`` evaluates one branch graph
on the operands, the one ``pred`` (a bool scalar) selects, and gives its one output.
The frontend makes one ``cond`` per value a branch assigns or returns
(:mod:`difgen.frontend.control`); the emitted code is a Python ``if``.

Its rules are transforms of the branches, so it is declared here, with the
transforms, rather than among the primitive tables:

- JVP: a ``cond`` of the branches' JVPs, on the operands and their tangents; the
  predicate carries no tangent, so at a tie the derivative is the taken branch's
  (as in JAX and autograd);
- transpose: the tangent ``cond`` is linear in the tangents; its transpose is a
  ``cond`` of the branches' VJPs on the same predicate, which reverse mode reads as
  a primal value (a residual), so the adjoint runs only the branch that was taken;
- batching: a ``cond`` of the batched branches when the predicate is not batched (a
  jacobian's or hessian's seeds never reach a predicate); a predicate that differs
  across the batch is refused, since running both branches could evaluate one where
  it is not defined.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from difgen.ad.batching import vmap
from difgen.ad.interpret import build_graph, eval_graph, is_zero
from difgen.ad.jvp import jvp
from difgen.ad.transpose import vjp_eval
from difgen.core.expr import Aval
from difgen.core.ir import Eqn, Graph, Lit, SubGraph, dce, evaluate, structure
from difgen.core.primitive import Linear, Statements, register
from difgen.core.tracer import bind
from difgen.errors import DifgenError
from difgen.primitives.family import control

MAX_ROUNDS = 8


def _impl(pred: Any, *operands: Any, branches: tuple[SubGraph, SubGraph]) -> Any:
    """Evaluate the branch ``pred`` selects (NumPy's ``bool``: NaN is True)."""
    taken = branches[1 if bool(np.asarray(pred)) else 0]
    return evaluate(taken.graph, operands)[0]


def _shape_rule(*avals: Aval, branches: tuple[SubGraph, SubGraph]) -> Aval:
    """Both branches give one output of the same shape and dtype."""
    (pred_shape, pred_dtype), *rest = avals
    if pred_shape != () or pred_dtype != "bool":
        raise ValueError("the predicate of cond must be a bool scalar")
    outs = [b.graph.outputs[0] for b in branches]
    if (outs[0].shape, outs[0].dtype) != (outs[1].shape, outs[1].dtype):
        raise ValueError("the branches of cond differ in shape or dtype")
    for b in branches:
        types = [(v.shape, v.dtype) for v in b.graph.inputs]
        if types != [(tuple(s), d) for s, d in rest]:
            raise ValueError("the operands of cond do not match its branches")
    return outs[0].shape, outs[0].dtype


def _clean(graph: Graph) -> Graph:
    """Fold, simplify, CSE and DCE a branch to a fixed point (as passes.optimize)."""
    key = structure(graph)
    avals = [(v.shape, v.dtype) for v in graph.inputs]
    for _ in range(MAX_ROUNDS):
        new = _retrace(graph, avals)
        new_key = structure(new)
        if new_key == key:
            return new
        graph, key = new, new_key
    return graph


def _retrace(graph: Graph, avals: list[tuple[tuple[int, ...], str]]) -> Graph:
    return build_graph(lambda *a: tuple(eval_graph(graph, a)), avals)


def _output(graph: Graph, index: int) -> Graph:
    """``graph`` keeping its output ``index`` only."""
    return _clean(dce(Graph(graph.inputs, (graph.outputs[index],), graph.eqns)))


def _is_zero_graph(graph: Graph) -> bool:
    out = graph.outputs[0]
    return isinstance(out, Lit) and not np.any(out.value)


def _bind(
    pred: Any, operands: Sequence[Any], graphs: Sequence[Graph], where: str
) -> Any:
    """Bind ``cond`` on the operands some branch reads (the others are dropped, so
    nothing is computed for a branch that does not need it)."""
    read = {a for g in graphs for e in g.eqns for a in e.inputs}
    read |= {o for g in graphs for o in g.outputs}
    used = [i for i in range(len(operands)) if any(g.inputs[i] in read for g in graphs)]
    graphs = [
        Graph(tuple(g.inputs[i] for i in used), g.outputs, g.eqns) for g in graphs
    ]
    operands = [operands[i] for i in used]
    return bind(
        COND,
        pred,
        *operands,
        branches=tuple(SubGraph(g, where) for g in graphs),
    )


def _cond_jvp(
    out: Any,
    primals: list[Any],
    tangents: list[Any],
    branches: tuple[SubGraph, SubGraph],
) -> Any:
    """A ``cond`` of the branches' tangent graphs on (operands, nonzero tangents)."""
    pred, operands = primals[0], primals[1:]
    dops = tangents[1:]
    wrt = [d is not None for d in dops]
    if not any(wrt) or branches[0].graph.outputs[0].dtype != "float64":
        return None
    graphs = [_output(jvp(b.graph, wrt), 1) for b in branches]
    if all(_is_zero_graph(g) for g in graphs):
        return None
    live = [d for d in dops if d is not None]
    return _bind(pred, [*operands, *live], graphs, branches[1].where)


def _cotangent_graph(
    graph: Graph, linear: Sequence[bool], index: int, ct_aval: Aval
) -> Graph:
    """``(non-linear operands, ct) -> ct of operand index``: the branch's VJP.

    The branch is linear in the ``linear`` operands (it is a tangent branch), so its
    VJP does not depend on their values, which are given as zeros.
    """
    fixed = [v for v, lin in zip(graph.inputs, linear) if not lin]
    avals = [(v.shape, v.dtype) for v in fixed] + [ct_aval]

    def fn(*args: Any) -> tuple[Any, ...]:
        given = iter(args[:-1])
        primals = [
            np.zeros(v.shape) if lin else next(given)
            for v, lin in zip(graph.inputs, linear)
        ]
        _, cts = vjp_eval(graph, primals, [args[-1]], linear)
        ct = cts[index]
        return (np.zeros(graph.inputs[index].shape) if ct is None else ct,)

    return _clean(build_graph(fn, avals))


def _cond_transpose(
    ct: Any, pred: Any, *operands: Any, branches: tuple[SubGraph, SubGraph]
) -> list[Any]:
    """One ``cond`` per linear operand: the branches' VJPs on the same predicate."""
    if isinstance(pred, Linear):
        raise DifgenError("the predicate of cond cannot be linear")
    linear = [isinstance(a, Linear) for a in operands]
    fixed = [a for a in operands if not isinstance(a, Linear)]
    ct_aval = (tuple(np.shape(ct)), "float64")
    results: list[Any] = [None]
    for i, lin in enumerate(linear):
        if not lin or is_zero(ct):
            results.append(None)
            continue
        graphs = [_cotangent_graph(b.graph, linear, i, ct_aval) for b in branches]
        if all(_is_zero_graph(g) for g in graphs):
            results.append(None)
            continue
        results.append(_bind(pred, [*fixed, ct], graphs, branches[1].where))
    return results


def _cond_batch(
    args: list[Any], batched: list[bool], k: int, branches: tuple[SubGraph, SubGraph]
) -> Any:
    """A ``cond`` of the batched branches; a batched predicate is refused."""
    if batched[0]:
        raise DifgenError(
            f"the branch on a traced value at {branches[1].where} would take "
            "different branches for different members of a batch; difgen batches "
            "seeds only, so this is a batch over the function's input, which it "
            "cannot run as one branch: use np.where for an elementwise choice"
        )
    graphs = [_clean(vmap(b.graph, batched[1:], k)) for b in branches]
    return _bind(args[0], args[1:], graphs, branches[1].where)


def _sympy(*args: Any, branches: tuple[SubGraph, SubGraph]) -> Any:
    """No SymPy form: the scalar emission falls back to vector code, and the sympy
    backend refuses the module (pointing to ``backend = "trace"``)."""
    raise NotImplementedError(
        f"the branch on a traced value at {branches[1].where} has no SymPy form"
    )


def _work(eqn: Eqn) -> int:
    """The predicate test plus the larger branch."""
    branches = eqn.params.as_dict()["branches"]
    return 1 + max(_graph_work(b.graph) for b in branches)


def _graph_work(graph: Graph) -> int:
    return sum(e.primitive.work(e) for e in graph.eqns)


COND = register(
    control(
        "cond",
        impl=_impl,
        shape_rule=_shape_rule,
        numpy=Statements("if"),
        jvp=_cond_jvp,
        transpose=_cond_transpose,
        batch=_cond_batch,
        sympy=_sympy,
        work=_work,
    )
)


def uses_control_flow(graph: Graph) -> str | None:
    """``file:line`` of the first branch on a traced value in ``graph``, if any."""
    for eqn in graph.eqns:
        if eqn.primitive is COND:
            return str(eqn.params.as_dict()["branches"][1].where)
    return None
