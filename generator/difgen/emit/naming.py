"""Every name that emitted code uses comes from here (Tangent's habit).

Arguments: ``x`` (input), ``dx`` (tangent), ``dy`` (cotangent), ``v`` (hvp direction),
``out`` (result buffer), contexts by their config names. Unpacked scalar elements are
``x_3``, ``dx_3`` (batched: ``dx_1_3``), temporaries ``t0, t1, ...`` and module
constants ``C0, C1, ...``.
"""

from __future__ import annotations

import keyword

INPUT = "x"
TANGENT = "dx"
COTANGENT = "dy"
DIRECTION = "v"
OUT = "out"
RESULT = "result"
TEMP_PREFIX = "t"
CONST_PREFIX = "C"
MODULES = ("np", "math", "sp")


def element(base: str, flat_index: int, batch: int | None = None) -> str:
    """Name of one scalar element of an unpacked array argument."""
    return f"{base}_{flat_index}" if batch is None else f"{base}_{batch}_{flat_index}"


def flat(base: str) -> str:
    """Name of an array argument's elements as a typed list of floats."""
    return f"{base}_flat"


def temp(i: int) -> str:
    """Name of the i-th temporary."""
    return f"{TEMP_PREFIX}{i}"


def const(i: int) -> str:
    """Name of the i-th module-level constant."""
    return f"{CONST_PREFIX}{i}"


def reserved() -> set[str]:
    """Names a context may not take."""
    return {INPUT, TANGENT, COTANGENT, DIRECTION, OUT, RESULT, *MODULES}


def clashes(context_names: list[str]) -> list[str]:
    """Context names that would collide with emitted names."""
    bad = []
    for name in context_names:
        generated = name.startswith((TEMP_PREFIX, CONST_PREFIX)) and name[1:].isdigit()
        if name in reserved() or generated or keyword.iskeyword(name):
            bad.append(name)
    return bad
