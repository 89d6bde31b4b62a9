"""The end of an emitted operator: how it returns its results, for both emissions.

Scalar and vector code compute their results differently but must return them the
same way (the generated module contract): results in order, a ``value_and_*``
operator's value first; an operator that takes ``out`` binds its last, array
result to ``result`` and writes it into ``out`` when one is given, else returns a
fresh array. One function writes those lines, so the two emissions cannot drift.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from difgen import naming
from difgen.targets.signatures import label


@dataclass(frozen=True)
class LastResult:
    """How the last result is bound to ``result`` and returned without ``out``.

    ``binding`` follows the name (``": NDArray[np.float64] = t3"`` or
    ``" = [[...]]"``); ``fresh`` is what is returned when there is no ``out`` (the
    name itself, or ``np.array(result)`` around a nested list).
    """

    binding: str
    fresh: str


def returns(
    kinds: Sequence[str],
    sources: Sequence[str],
    last: LastResult | None,
    takes_out: bool,
    out_shape: tuple[int, ...] = (),
    function: str = "",
) -> list[str]:
    """The closing lines of an operator returning ``sources`` (one per kind).

    Without ``last`` the results are returned as they are; with it the earlier ones
    are named by their kind, the last is bound to ``result``, and ``takes_out`` adds
    the write into ``out``, checked first against ``out_shape`` (only when an
    ``out`` is given: the call without one pays nothing for it), its errors naming
    ``function`` and ``out``.
    """
    if last is None:
        return ["return " + ", ".join(sources)]
    head = "".join(f"{kind}, " for kind in kinds[:-1])
    said = f", {label(function, naming.OUT)}" if function else ""
    lines = [f"{kind} = {source}" for kind, source in zip(kinds[:-1], sources[:-1])]
    lines.append(f"{naming.RESULT}{last.binding}")
    if not takes_out:
        return [*lines, f"return {head}{last.fresh}"]
    return [
        *lines,
        f"if {naming.OUT} is None:",
        f"    return {head}{last.fresh}",
        f"{naming.CHECK_OUT}({naming.OUT}, {out_shape!r}{said})",
        f"{naming.OUT}[...] = {naming.RESULT}",
        f"return {head}{naming.OUT}",
    ]
