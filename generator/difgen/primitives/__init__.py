"""Primitive tables, one module per family; importing this package registers all."""

from __future__ import annotations

from difgen.primitives import (  # noqa: F401
    elementwise,
    indexing,
    linalg,
    reductions,
    structural,
)
from difgen.primitives.core import PRIMITIVES, Linear, Primitive

__all__ = ["PRIMITIVES", "Linear", "Primitive"]
