"""Trace a user's function: its NumPy code runs on tracers and leaves a Graph.

>>> g = trace(lambda x: np.sin(x) * 2.0, [((), "float64")])
>>> [e.primitive.name for e in g.eqns]
['sin', 'mul']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np  # noqa: F401  (the doctest's np)

from difgen.core.ir import Graph
from difgen.core.tracer import Tracer, finish, tracing
from difgen.frontend.namespace import tracing_numpy


def trace(
    fn: Callable[..., Any], avals: Sequence[tuple[tuple[int, ...], str]]
) -> Graph:
    """Trace ``fn`` on inputs of the given (shape, dtype) into a Graph.

    The user's modules see ``np`` as the tracing namespace while ``fn`` runs
    (:func:`difgen.frontend.namespace.tracing_numpy`).
    """
    with tracing(avals) as (builder, inputs):
        with tracing_numpy(fn):
            result = fn(*(Tracer(builder, v) for v in inputs))
    return finish(builder, inputs, result)
