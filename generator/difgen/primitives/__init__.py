"""Primitive tables, one module per family; importing this package registers all.

The families are imported in this order on purpose, since it is the order of
``PRIMITIVES``: the elementwise families first (unary, binary, selectors, rounding
and modulo, singular), then the others (the run-time families together: gathers
and scatters, integers, sorting, masks).
"""

from __future__ import annotations

from difgen.core.primitive import PRIMITIVES, Linear, Primitive

# isort: off
from difgen.primitives import (  # noqa: F401
    elementwise,
    binary,
    selectors,
    rounding,
    singular,
    indexing,
    linalg,
    reductions,
    runtime,
    integers,
    sorting,
    masks,
    special,
    structural,
)

# isort: on

__all__ = ["PRIMITIVES", "Linear", "Primitive"]
