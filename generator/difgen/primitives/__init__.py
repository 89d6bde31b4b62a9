"""Primitive tables, one module per family; importing this package registers all."""

from __future__ import annotations

from difgen.core.primitive import PRIMITIVES, Linear, Primitive
from difgen.primitives import (  # noqa: F401
    elementwise,
    indexing,
    linalg,
    reductions,
    runtime,
    special,
    structural,
)

__all__ = ["PRIMITIVES", "Linear", "Primitive"]
