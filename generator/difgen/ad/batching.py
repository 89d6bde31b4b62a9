"""Batching (vmap): run a graph on inputs that carry an extra leading axis.

A jacobian is one pushforward over the whole basis of ``x`` (or one pullback over
the basis of ``y``), and a hessian one hvp over the basis: the seeds form a batch,
and each equation that sees a batched input is re-issued through its primitive's
``batch`` rule, which keeps the batch as the leading axis. Unbatched equations (the
primal pass) are issued once. The emitted code therefore has the batch as a leading
array axis, never a Python loop over seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from difgen.ad.interpret import Env, apply, build_graph, read
from difgen.core.batching import batched_to
from difgen.core.builder import relaxed
from difgen.core.ir import Graph, Var
from difgen.core.primitive import Absent
from difgen.errors import DifgenError


def vmap_eval(
    graph: Graph, args: Sequence[Any], batched: Sequence[bool], k: int
) -> tuple[list[Any], list[bool]]:
    """Outputs of ``graph`` on ``args`` whose ``batched`` ones lead with axis ``k``.

    Returns the outputs and, for each, whether it carries the batch axis.
    """
    env: Env = dict(zip(graph.inputs, args))
    flags: dict[Var, bool] = dict(zip(graph.inputs, batched))
    for eqn in graph.eqns:
        ins = [read(env, a) for a in eqn.inputs]
        bs = [isinstance(a, Var) and flags[a] for a in eqn.inputs]
        if not any(bs):
            env[eqn.out], flags[eqn.out] = apply(eqn, ins), False
            continue
        prim = eqn.primitive
        if isinstance(prim.batch, Absent):
            raise DifgenError(f"primitive {prim.name!r} has no batching rule")
        with relaxed(eqn.relaxed):  # the batched equation keeps its mode
            out = prim.batch(ins, bs, k, **eqn.params.as_dict())
        if tuple(np.shape(out)) != (k, *eqn.out.shape):
            raise DifgenError(
                f"batching rule of {prim.name!r} gave shape {np.shape(out)}, "
                f"expected {(k, *eqn.out.shape)}"
            )
        env[eqn.out], flags[eqn.out] = out, True
    outs = [read(env, o) for o in graph.outputs]
    return outs, [isinstance(o, Var) and flags[o] for o in graph.outputs]


def vmap(graph: Graph, batched: Sequence[bool], k: int) -> Graph:
    """``graph`` with a leading axis ``k`` on the ``batched`` inputs and on every output.

    >>> from difgen.frontend import trace
    >>> g = vmap(trace(lambda x: x[1:] * 2.0, [((3,), "float64")]), [True], 4)
    >>> g.outputs[0].shape
    (4, 2)
    """
    avals = [
        ((k, *v.shape) if b else v.shape, v.dtype)
        for v, b in zip(graph.inputs, batched)
    ]

    def fn(*args: Any) -> tuple[Any, ...]:
        outs, flags = vmap_eval(graph, args, batched, k)
        return tuple(batched_to(o, f, k) for o, f in zip(outs, flags))

    return build_graph(fn, avals)
