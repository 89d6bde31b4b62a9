"""Forward mode: the JVP transform, one rule per primitive (``Primitive.jvp``).

The graph is re-evaluated in a new trace. Each primal value is a tracer (or a
constant), each tangent a tracer or ``None``, the symbolic zero: an equation whose
inputs all have zero tangents gets none either, so a zero seed prunes its whole
subgraph, and a seed of 1 disappears because the rules' arithmetic folds through the
tracer.

>>> from difgen.frontend import trace
>>> g = jvp(trace(lambda x: np.sin(x) * 3.0, [((), "float64")]))
>>> print(g)
{ lambda a:f64[] b:f64[] .
  let c:f64[] = sin a
      d:f64[] = cos a
      e:f64[] = mul d b
      f:f64[] = mul c 3.0
      g:f64[] = mul e 3.0
  in (f, g) }
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from difgen.ad.interpret import Env, apply, build_graph, is_zero, read, zeros_of
from difgen.ad.liveness import guards
from difgen.core.builder import relaxed
from difgen.core.ir import Eqn, Graph, Var
from difgen.core.primitive import Absent

SIBLINGS: dict[str, str] = {}
"""Primitives given one equation per value of a multi-valued operation (a loop's
state slots), by name: the param that picks the value. Their JVP rule is also told
``siblings``, the values of the same operation the graph reads, so that the tangent
operations of siblings stay one operation (the loop's module declares it)."""


def sibling_keys(eqns: Sequence[Eqn]) -> dict[int, tuple[Any, ...]]:
    """The operation of each equation in ``SIBLINGS`` (by ``id``): its primitive,
    inputs and params but the one that picks the value."""
    keys: dict[int, tuple[Any, ...]] = {}
    for eqn in eqns:
        pick = SIBLINGS.get(eqn.primitive.name)
        if pick is not None:
            params = tuple((k, v) for k, v in eqn.params if k != pick)
            keys[id(eqn)] = (eqn.primitive.name, eqn.inputs, params)
    return keys


def jvp_eval(
    graph: Graph, primals: Sequence[Any], tangents: Sequence[Any]
) -> tuple[list[Any], list[Any]]:
    """Outputs and output tangents of ``graph``, in the current trace.

    ``tangents`` holds one tangent per input (``None``: zero); the returned tangents
    are ``None`` where an output does not depend on any input with a tangent.
    """
    env: Env = dict(zip(graph.inputs, primals))
    tenv: Env = {v: t for v, t in zip(graph.inputs, tangents) if t is not None}
    keys = sibling_keys(graph.eqns)
    picks: dict[tuple[Any, ...], list[Any]] = {}
    for eqn in graph.eqns:
        if id(eqn) in keys:
            pick = SIBLINGS[eqn.primitive.name]
            picks.setdefault(keys[id(eqn)], []).append(eqn.params.as_dict()[pick])
    for eqn, guard in zip(graph.eqns, guards(graph)):
        args = [read(env, a) for a in eqn.inputs]
        out = apply(eqn, args)
        env[eqn.out] = out
        dargs = [tenv.get(a) if isinstance(a, Var) else None for a in eqn.inputs]
        prim = eqn.primitive
        # a selector (not prim.differentiable: no JVP rule) carries no tangent
        if all(d is None for d in dargs) or isinstance(prim.jvp, Absent):
            continue
        if eqn.out.dtype != "float64":
            continue
        if guard is not None:  # dead elements' tangents never meet a coefficient
            dargs = [select(d, use) for d, use in zip(dargs, guard.uses)]
        params = eqn.params.as_dict()
        if id(eqn) in keys:
            params["siblings"] = tuple(picks[keys[id(eqn)]])
        with relaxed():  # a derivative computation: finite-only identities allowed
            tangent = prim.jvp(out, args, dargs, **params)
        if tangent is not None and not is_zero(tangent):
            if tuple(np.shape(tangent)) != eqn.out.shape:
                tangent = np.broadcast_to(tangent, eqn.out.shape)
            tenv[eqn.out] = tangent
    outs = [read(env, o) for o in graph.outputs]
    touts = [tenv.get(o) if isinstance(o, Var) else None for o in graph.outputs]
    return outs, touts


def select(tangent: Any, live: np.ndarray | None) -> Any:
    """``tangent`` where ``live``, an exact 0 elsewhere (a selection, so that the
    transposed graph selects the cotangent too, whatever the dead element's
    coefficient: ``inf * 0`` is NaN, ``where(False, inf, 0)`` is 0)."""
    if tangent is None or live is None:
        return tangent
    return np.where(live, np.broadcast_to(tangent, live.shape), 0.0)


def jvp(graph: Graph, wrt: Sequence[bool] | None = None) -> Graph:
    """The JVP graph: ``(*inputs, *tangents) -> (*outputs, *output_tangents)``.

    ``wrt`` says which inputs get a tangent input (default: the first only; the
    others are contexts). Zero output tangents become zero constants.
    """
    n = len(graph.inputs)
    wrt = tuple(wrt) if wrt is not None else (True,) + (False,) * (n - 1)
    avals = [(v.shape, v.dtype) for v in graph.inputs]
    avals += [(v.shape, v.dtype) for v, w in zip(graph.inputs, wrt) if w]

    def fn(*args: Any) -> tuple[Any, ...]:
        seeds = iter(args[n:])
        tangents = [next(seeds) if w else None for w in wrt]
        outs, touts = jvp_eval(graph, args[:n], tangents)
        return (
            *outs,
            *(zeros_of(o) if t is None else t for o, t in zip(graph.outputs, touts)),
        )

    return build_graph(fn, avals)
