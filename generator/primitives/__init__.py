"""Primitive tables, one module per family; importing this package registers all."""

from __future__ import annotations

from difgen.primitives import elementwise, linalg, reductions, structural  # noqa: F401
from difgen.primitives.core import PRIMITIVES, Linear, Primitive

__all__ = ["PRIMITIVES", "Linear", "Primitive"]
