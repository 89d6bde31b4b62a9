"""Evaluate graphs inside a trace, and build graphs from functions of tracers.

A transform is an interpreter: it walks a graph's equations and calls ``bind`` (or a
rule written with NumPy on tracers) for each, inside a new trace. So every transform
inherits the tracer's constant folding, algebraic identities and CSE for free.

The rules are NumPy code on tracers, so the transforms need the NumPy frontend
(:mod:`difgen.frontend`) and the primitive tables loaded: this package imports both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import difgen.frontend
import difgen.primitives  # noqa: F401  (rules and identities bind rows by name)
from difgen.core.builder import current_builder, relaxed, tracing
from difgen.core.ir import Atom, Eqn, Graph, Lit, Var
from difgen.core.tracer import Tracer, bind, finish

Aval = tuple[tuple[int, ...], str]
Env = dict[Var, Any]


def build_graph(fn: Callable[..., tuple[Any, ...]], avals: Sequence[Aval]) -> Graph:
    """Trace ``fn`` (a function of tracers returning a tuple) into a Graph.

    >>> g = build_graph(lambda x: (x * 2.0,), [((3,), "float64")])
    >>> [e.primitive.name for e in g.eqns]
    ['mul']
    """
    with tracing(avals) as (builder, inputs):
        result = fn(*(Tracer(builder, v) for v in inputs))
    return finish(builder, inputs, tuple(result))


def read(env: Env, atom: Atom) -> Any:
    """The value of an atom: its constant, or what the environment maps it to."""
    return np.asarray(atom.value) if isinstance(atom, Lit) else env[atom]


def apply(eqn: Eqn, args: Sequence[Any]) -> Any:
    """Re-issue one equation in the current trace.

    Equations without inputs (the ``basis`` seed) are runtime constants: they are
    recorded as they are, never folded into a literal. The equation keeps its mode:
    a derivative computation stays relaxed, the user's computation strict.
    """
    params = eqn.params.as_dict()
    with relaxed(eqn.relaxed):
        if not eqn.inputs:
            builder = current_builder()
            return Tracer(builder, builder.add(eqn.primitive, [], params))
        return bind(eqn.primitive, *args, **params)


def eval_graph(graph: Graph, args: Sequence[Any]) -> list[Any]:
    """The outputs of ``graph`` on ``args`` (tracers or arrays), in the current trace."""
    env: Env = dict(zip(graph.inputs, args))
    for eqn in graph.eqns:
        env[eqn.out] = apply(eqn, [read(env, a) for a in eqn.inputs])
    return [read(env, out) for out in graph.outputs]


def is_zero(value: Any) -> bool:
    """Whether ``value`` is a constant (not traced) whose elements are all zero."""
    if isinstance(value, Tracer):
        if isinstance(value.atom, Var):
            return False
        value = value.atom.value
    arr = np.asarray(value)
    return arr.dtype != object and not np.any(arr)


def zeros_of(atom: Atom) -> np.ndarray:
    """A zero constant shaped like ``atom`` (a symbolic zero made concrete)."""
    return np.zeros(atom.shape)
