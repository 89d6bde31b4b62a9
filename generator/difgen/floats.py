"""NumPy's semantics for straight-line code on Python floats.

Python's float arithmetic and ``math`` raise where NumPy returns NaN or inf:
``1.0 / 0.0`` is a ZeroDivisionError, ``math.log(0.0)`` and ``math.sin(inf)`` a
ValueError, ``math.exp(1000.0)`` and ``1e200 ** 3`` an OverflowError, and
``(-8.0) ** (1 / 3)`` is a complex number. Scalar emission calls these helpers
instead: each takes the fast ``math`` path and, only where it raises, returns what
NumPy computes for the same float (so NaN, inf and the sign of an infinity are
NumPy's own). The helpers are real functions in
:mod:`difgen.targets.python.runtime`; a generated module carries the source of
those its code uses, and only those. This module names them (what the printers
call, what configs may not name), without importing NumPy; which unary takes which
family of helper is its declaration's ``scalar`` field
(:class:`~difgen.core.primitive.ScalarHelper`): ``fast`` where ``math`` raises on
some floats (domain, overflow), ``safe`` where it never does (printed as it is),
``numpy`` where ``math`` (or ``2.0 ** x``) differs from NumPy in the last bit on
some floats (``math.log10`` on about one in seven), so the helper calls NumPy
itself, one float at a time.

>>> [text.split("(")[0] for text in definitions({"_log", "_div"})]
['def _log', 'def _div']
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable
from pathlib import Path


def helper(name: str) -> str:
    """The generated name of the safe version of ``name`` (``log`` -> ``_log``)."""
    return f"_{name}"


RUNTIME = Path(__file__).parent / "targets" / "python" / "runtime.py"
"""The helpers' one source (:mod:`difgen.targets.python.runtime`): real functions,
linted, typed and unit-tested; a generated module gets the text of those it calls."""


def _definitions(text: str) -> dict[str, str]:
    """Each top-level definition of a helper (a ``def`` or a constant bound to a
    name starting with ``_``) in ``text``, as its source: what a generated module
    copies. Read with :mod:`ast`, not imported, so :mod:`difgen.naming` can check
    names against :data:`NAMES` without importing NumPy."""
    found: dict[str, str] = {}
    lines = text.split("\n")  # ast.get_source_segment splits the text per call
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef):
            name = node.name
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            name = node.targets[0].id
        else:
            continue
        if name.startswith("_"):
            found[name] = _segment(lines, node) + "\n"
    return found


def _segment(lines: list[str], node: ast.stmt) -> str:
    """``ast.get_source_segment`` of ``node`` on the text of ``lines``, without
    splitting the text again (which made reading the helpers quadratic)."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    start, end = node.col_offset, node.end_col_offset
    rows = [line.encode("utf-8") for line in lines[first : last + 1]]
    rows[-1] = rows[-1][:end]
    rows[0] = rows[0][start:]
    return b"\n".join(rows).decode("utf-8")


HELPERS: dict[str, str] = _definitions(RUNTIME.read_text("utf-8"))
"""Each helper's source, by its generated name, in the runtime module's order."""

CONSTANTS = {"_INF": "math.inf", "_NINF": "-math.inf", "_NAN": "math.nan"}
"""Non-finite constants of the user's computation (``x * np.inf``, ``np.log(0.0)``),
named: in symbolic expressions they are opaque symbols, so SymPy cannot fold them
as if they were ordinary numbers (their definitions are in the runtime module)."""

NAMES = tuple(HELPERS)
"""Every helper and constant, in the order a generated module defines them."""


def constant_name(value: float) -> str:
    """The name of a non-finite constant (``inf`` -> ``_INF``)."""
    if math.isnan(value):
        return "_NAN"
    return "_INF" if value > 0 else "_NINF"


def definitions(used: Iterable[str]) -> list[str]:
    """The source of each helper in ``used`` (as the printers report them), in
    :data:`NAMES` order."""
    wanted = set(used)
    return [HELPERS[name] for name in NAMES if name in wanted]
