"""The SymPy side of ``where`` (:mod:`difgen.primitives.selectors`); the
comparisons' heads are in :mod:`difgen.primitives.heads.elementwise`."""

from __future__ import annotations

from typing import Any

import sympy as sp


def _sym_where(c: Any, x: Any, y: Any) -> Any:
    """The branch a constant condition picks, else an unevaluated Piecewise."""
    if c in (True, sp.true):
        return x
    if c in (False, sp.false):
        return y
    return sp.Piecewise((x, c), (y, True), evaluate=False)  # keep c as written
