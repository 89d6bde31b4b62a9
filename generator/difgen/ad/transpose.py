"""Reverse mode: JVP, then partial evaluation, then transposition.

The JVP graph is split into the equations that do not depend on the tangent inputs
(the primal pass, re-evaluated as they are) and those that do, which are linear in
the tangents. The linear equations are walked backwards: each primitive's
``transpose`` rule maps the cotangent of its output to cotangents of its linear inputs
(marked :class:`~difgen.primitives.Linear`), which accumulate. So only linear
primitives need a transpose rule, and no derivative is written twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from difgen.ad.interpret import Env, apply, build_graph, is_zero, read, zeros_of
from difgen.ad.jvp import SIBLINGS, jvp, select, sibling_keys
from difgen.ad.liveness import guards
from difgen.core.builder import current_builder, relaxed
from difgen.core.ir import Eqn, Graph, Var
from difgen.core.primitive import Absent, Linear, unbroadcast
from difgen.core.tracer import Tracer, xp
from difgen.errors import DifgenError

JOINT: dict[str, Callable[..., list[Any]]] = {}
"""The transpose of the values of one multi-valued operation together
(``jvp.SIBLINGS``), by name: ``rule({pick: ct}, *args, **params)`` (the other
params), so that a loop's adjoint sweeps its tape once for every slot read after it.
Declared by the primitive's module (``ad.loops``)."""


def vjp_eval(
    graph: Graph,
    primals: Sequence[Any],
    cotangents: Sequence[Any],
    wrt: Sequence[bool] | None = None,
) -> tuple[list[Any], list[Any]]:
    """Outputs of ``graph`` and the cotangents of its inputs, in the current trace.

    ``cotangents`` holds one cotangent per output (``None``: zero). The result holds
    one cotangent per input, ``None`` for inputs outside ``wrt`` or with a zero one.
    """
    n, m = len(graph.inputs), len(graph.outputs)
    wrt = tuple(wrt) if wrt is not None else (True,) + (False,) * (n - 1)
    outs, cts = transpose_eval(jvp(graph, wrt), n, m, primals, cotangents)
    given = iter(cts)
    return outs, [next(given) if w else None for w in wrt]


def transpose_eval(
    lin: Graph,
    n: int,
    m: int,
    primals: Sequence[Any],
    cotangents: Sequence[Any],
) -> tuple[list[Any], list[Any]]:
    """The primal outputs of a tangent graph and the cotangents of its tangent
    inputs, in the current trace.

    ``lin`` is ``(*primals, *tangents) -> (*outputs, *output_tangents)`` with ``n``
    primal inputs and ``m`` primal outputs, linear in the tangents (a JVP graph, or
    a user's derivative rule); ``cotangents`` holds one per output tangent. The
    result holds one cotangent per tangent input (None: zero). An equation that is
    not linear in the tangents raises :class:`DifgenError`.
    """
    linear: set[Var] = set(lin.inputs[n:])
    env: Env = dict(zip(lin.inputs[:n], primals))
    linear_eqns: list[Eqn] = []
    for eqn in lin.eqns:  # partial evaluation: the primal pass runs now
        if any(isinstance(a, Var) and a in linear for a in eqn.inputs):
            linear.add(eqn.out)
            linear_eqns.append(eqn)
        else:
            env[eqn.out] = apply(eqn, [read(env, a) for a in eqn.inputs])
    outs = [read(env, o) for o in lin.outputs[:m]]

    # the linear graph's own liveness: where its selections are outside a
    # coefficient (a constant cotangent folds them away), select the cotangents
    guarded = {id(e): g for e, g in zip(lin.eqns, guards(lin)) if g is not None}
    cts: dict[Var, list[Any]] = {}
    for atom, ct in zip(lin.outputs[m:], cotangents):
        if isinstance(atom, Var) and atom in linear and ct is not None:
            _accumulate(cts, atom, ct)
    # the values of one multi-valued operation are transposed together, at the
    # first of its equations (every use of any of them comes after it): their
    # cotangents are kept until then
    keys = sibling_keys(linear_eqns)
    first: dict[tuple[Any, ...], int] = {}
    for eqn in linear_eqns:
        if id(eqn) in keys:
            first.setdefault(keys[id(eqn)], id(eqn))
    held: dict[tuple[Any, ...], dict[Any, Any]] = {}
    for eqn in reversed(linear_eqns):
        ct = _total(cts.pop(eqn.out, []))
        key = keys.get(id(eqn))
        if key is not None:
            pick, rule = SIBLINGS[eqn.primitive.name], JOINT[eqn.primitive.name]
            params = eqn.params.as_dict()
            group = held.setdefault(key, {})
            if ct is not None:
                group[params[pick]] = ct
            if first[key] != id(eqn) or not group:
                continue
            del held[key]
            args = [
                Linear(a.shape, a.dtype) if a in linear else read(env, a)
                for a in eqn.inputs
            ]
            rest = {k: v for k, v in params.items() if k != pick}
            with relaxed():
                cotangents = rule(group, *args, **rest)
            _add_all(cts, eqn, linear, cotangents)
            continue
        if ct is None:
            continue
        prim = eqn.primitive
        if isinstance(prim.transpose, Absent):
            raise DifgenError(f"primitive {prim.name!r} has no transpose rule")
        guard = guarded.get(id(eqn))
        uses = guard.uses if guard is not None else (None,) * len(eqn.inputs)
        # an operand broadcast into live and dead elements is transposed at the
        # output's shape, selected there, and only then summed to its own shape
        shapes = [a.shape if u is None else u.shape for a, u in zip(eqn.inputs, uses)]
        wide = [a in linear and s != a.shape for a, s in zip(eqn.inputs, shapes)]
        args = [
            Linear(s, a.dtype) if a in linear else read(env, a)
            for a, s in zip(eqn.inputs, shapes)
        ]
        with relaxed():  # a derivative computation: finite-only identities allowed
            cotangents = prim.transpose(ct, *args, **eqn.params.as_dict())
            if guard is not None:
                cotangents = [
                    unbroadcast(select(c, u), a.shape) if w else select(c, u)
                    for c, u, w, a in zip(cotangents, uses, wide, eqn.inputs)
                ]
        _add_all(cts, eqn, linear, cotangents)
    return outs, [_total(cts.get(seed, [])) for seed in lin.inputs[n:]]


def _add_all(
    cts: dict[Var, list[Any]], eqn: Eqn, linear: set[Var], cotangents: Sequence[Any]
) -> None:
    """Accumulate a rule's cotangents into its linear inputs'."""
    for atom, c in zip(eqn.inputs, cotangents):
        if c is not None and isinstance(atom, Var) and atom in linear:
            if tuple(np.shape(c)) != atom.shape:
                raise DifgenError(
                    f"transpose rule of {eqn.primitive.name!r} gave a cotangent of "
                    f"shape {np.shape(c)} for an input of shape {atom.shape}"
                )
            _accumulate(cts, atom, c)


def _accumulate(cts: dict[Var, list[Any]], var: Var, ct: Any) -> None:
    if not is_zero(ct):
        cts.setdefault(var, []).append(ct)


def _total(parts: list[Any]) -> Any:
    """The sum of a value's cotangent contributions (None: zero).

    Scalar reads of one array (the transpose of ``np.array`` of traced scalars gives
    one per element) are summed by one gather and one reduction, or by a reduction
    alone when they read every element once.
    """
    if not parts:
        return None
    groups: dict[Var, list[tuple[int, ...]]] = {}
    rest: list[Any] = []
    for part in parts:
        source = _scalar_read(part)
        if source is None:
            rest.append(part)
        else:
            groups.setdefault(source[0], []).append(source[1])
    for array, positions in groups.items():
        tracer = Tracer(current_builder(), array)
        if len(positions) < 3:
            rest += [tracer[p] for p in positions]
        elif sorted(positions) == list(np.ndindex(*array.shape)):
            rest.append(xp.sum(tracer))
        else:
            index = tuple(np.array(axis) for axis in zip(*positions))
            rest.append(np.sum(tracer[index]))
    total = rest[0]
    for part in rest[1:]:
        total = total + part
    return total


def _scalar_read(value: Any) -> tuple[Var, tuple[int, ...]] | None:
    """(array, position) when ``value`` is ``array[i, j, ...]`` with integer indices."""
    if not isinstance(value, Tracer) or not isinstance(value.atom, Var):
        return None
    eqn = value.builder.producer.get(value.atom)
    if eqn is None or eqn.primitive.name != "getitem" or eqn.out.shape != ():
        return None
    index = eqn.params.as_dict()["index"]
    array = eqn.inputs[0]
    if not isinstance(array, Var) or len(index) != array.ndim:
        return None
    if not all(isinstance(i, int) for i in index):
        return None
    return array, tuple(i % n for i, n in zip(index, array.shape))


def vjp(graph: Graph, wrt: Sequence[bool] | None = None) -> Graph:
    """The VJP graph: ``(*inputs, *output_cotangents) -> (*outputs, *input_cts)``.

    Input cotangents are returned for the inputs in ``wrt`` (default: the first).

    >>> from difgen.frontend import trace
    >>> print(vjp(trace(lambda x: np.sum(x * x), [((3,), "float64")])))
    { lambda a:f64[3] b:f64[] .
      let c:f64[3] = mul a a
          d:f64[] = reduce_sum[axes=(0,)] c
          e:f64[1] = reshape[shape=(1,)] b
          f:f64[1] = mul e 2.0
          g:f64[3] = mul f a
      in (d, g) }
    """
    n = len(graph.inputs)
    wrt = tuple(wrt) if wrt is not None else (True,) + (False,) * (n - 1)
    avals = [(v.shape, v.dtype) for v in graph.inputs]
    avals += [(o.shape, "float64") for o in graph.outputs]

    def fn(*args: Any) -> tuple[Any, ...]:
        outs, cts = vjp_eval(graph, args[:n], args[n:], wrt)
        chosen = [(v, c) for v, c, w in zip(graph.inputs, cts, wrt) if w]
        return (*outs, *(zeros_of(v) if c is None else c for v, c in chosen))

    return build_graph(fn, avals)
