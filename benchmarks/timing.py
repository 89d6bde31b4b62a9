"""Check, then time: one :class:`Tool` per row of the report.

A tool is checked against the hand-written derivative before it is timed (one that
disagrees is WRONG and not timed); a tool with a NumPy-conversion variant is checked
in both variants. Each tool gets ``timeit.Timer.autorange`` to pick
its loop count, then the repeats run round-robin over all tools of a case, so that
a slow drift of the machine moves every tool of the case alike and leaves the
ratios alone.
"""

from __future__ import annotations

import statistics
import sys
import timeit
from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import numpy as np

RTOL, LOOSE_RTOL = 1e-6, 1e-3  # exact tools; finite differences
# float32 tools against a float32 reference: a few roundings of 6e-8 each, over
# sums of 64 terms in another order
FLOAT32_RTOL, FLOAT32_ATOL = 1e-4, 1e-6
NOTE_MAX = 160  # characters: a note is one line of a table cell


@dataclass
class Tool:
    """One implementation of a case's operator (or ``f`` itself)."""

    name: str
    family: str  # hand | f | scipy | difgen | jax | torch | autograd | sympy | fd
    # The headline: the tool on its own values. NumPy in and out for NumPy code;
    # for a framework, its own arrays already on the device, waited for (JAX's
    # block_until_ready), no conversion: what the framework itself costs.
    call: Callable[..., Any] | None
    args: tuple[Any, ...] = ()
    # Frameworks only: NumPy in, NumPy out, the conversion a NumPy caller pays.
    converted: Callable[..., Any] | None = None
    converted_args: tuple[Any, ...] = ()
    role: str = ""  # "limit" (the hand-written reference) | "f" | "floor" | ""
    loose: bool = False  # finite differences: checked with a looser tolerance
    build_s: float | None = None  # difgen build (a subprocess), seconds
    compile_s: float | None = None  # C tools: the C compiler alone, seconds
    status: str = "ok"  # ok | SKIPPED | WRONG | ERROR
    note: str = ""
    first_call_ms: float | None = None  # includes JAX tracing and compilation
    times: list[float] = field(default_factory=list)  # seconds per call, per repeat
    converted_times: list[float] = field(default_factory=list)

    @property
    def median_us(self) -> float | None:
        return statistics.median(self.times) * 1e6 if self.times else None

    @property
    def min_us(self) -> float | None:
        return min(self.times) * 1e6 if self.times else None

    @property
    def converted_median_us(self) -> float | None:
        times = self.converted_times
        return statistics.median(times) * 1e6 if times else None

    @property
    def converted_min_us(self) -> float | None:
        return min(self.converted_times) * 1e6 if self.converted_times else None


def first_line(exc: BaseException | str) -> str:
    """``"TypeError: message"``, first line only: notes stay one line long."""
    if isinstance(exc, BaseException):
        text = f"{type(exc).__name__}: {exc}"
    else:
        text = exc
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    line = lines[0] if lines else "(no message)"
    return line if len(line) <= NOTE_MAX else line[: NOTE_MAX - 1] + "…"


def as_dense(value: Any) -> Any:
    """SciPy sparse to ndarray; scalars to float; arrays stay; a dict (a
    gradient of a dict of arrays) leaf by leaf."""
    if isinstance(value, dict):
        return {key: as_dense(leaf) for key, leaf in value.items()}
    if hasattr(value, "toarray"):
        return value.toarray()
    if np.ndim(value) == 0 and not isinstance(value, np.ndarray):
        return float(value)
    return np.asarray(value)


def check(tool: Tool, reference: Any) -> None:
    """Call the tool once (timing that first call) and compare with the reference.

    Both variants of a framework tool are compared: the headline one (framework
    arrays, whose result is converted here, outside any timing) and the one with
    NumPy conversion. Either disagreeing makes the tool WRONG.
    """
    if tool.status != "ok" or tool.call is None:
        return
    variants = [("", tool.call, tool.args)]
    if tool.converted is not None:
        variants.append(
            ("with NumPy conversion: ", tool.converted, tool.converted_args)
        )
    for i, (label, fn, args) in enumerate(variants):
        try:
            start = perf_counter()
            got = fn(*args)
            if i == 0:
                tool.first_call_ms = (perf_counter() - start) * 1e3
            if tool.role in ("f", "floor"):  # no derivative to compare
                continue
            got = as_dense(got)
        except Exception as exc:  # noqa: BLE001  a tool that fails: a note, not a crash
            tool.status, tool.note = "ERROR", label + first_line(exc)
            return
        problem = _disagreement(got, reference, tool.loose)
        if problem:
            tool.status, tool.note = "WRONG", label + problem
            return


def _disagreement(got: Any, reference: Any, loose: bool) -> str:
    """Why ``got`` is not the reference (shape or values), or "" when it is; a
    dict leaf by leaf, and float32 values at float32's tolerance."""
    if isinstance(reference, dict):
        if not isinstance(got, dict) or sorted(got) != sorted(reference):
            return (
                f"{type(got).__name__}, expected a dict with keys {sorted(reference)}"
            )
        for key in sorted(reference):
            problem = _disagreement(got[key], reference[key], loose)
            if problem:
                return f"[{key!r}]: {problem}"
        return ""
    if np.asarray(reference).dtype == np.float32 and not loose:
        if np.asarray(got).dtype != np.float32:
            return f"dtype {np.asarray(got).dtype}, expected float32"
        return _differs(got, reference, FLOAT32_RTOL, FLOAT32_ATOL)
    if np.shape(got) != np.shape(reference):
        return f"shape {np.shape(got)}, expected {np.shape(reference)}"
    scale = max(1.0, float(np.max(np.abs(reference))))
    rtol, atol = (LOOSE_RTOL, 1e-4 * scale) if loose else (RTOL, 1e-9 * scale)
    if not np.allclose(got, reference, rtol=rtol, atol=atol):
        err = float(np.max(np.abs(np.asarray(got) - reference)))
        return f"max abs error {err:.3g} (rtol {rtol:g})"
    return ""


def _differs(got: Any, reference: Any, rtol: float, atol: float) -> str:
    if np.shape(got) != np.shape(reference):
        return f"shape {np.shape(got)}, expected {np.shape(reference)}"
    got, reference = np.asarray(got, np.float64), np.asarray(reference, np.float64)
    scale = max(1.0, float(np.max(np.abs(reference))))
    if not np.allclose(got, reference, rtol=rtol, atol=atol * scale):
        err = float(np.max(np.abs(got - reference)))
        return f"max abs error {err:.3g} (rtol {rtol:g})"
    return ""


def _timer(fn: Callable[..., Any], args: tuple[Any, ...]) -> timeit.Timer:
    """A timer whose statement is the bare call ``fn(a0, a1, ...)``."""
    names = [f"a{i}" for i in range(len(args))]
    space = dict(zip(names, args), fn=fn)
    return timeit.Timer(f"fn({', '.join(names)})", globals=space)


def measure(tools: list[Tool], repeats: int) -> None:
    """Fill ``times`` (and ``converted_times``) of every tool whose status is ok."""
    plan: list[tuple[list[float], timeit.Timer, int]] = []
    for tool in tools:
        if tool.status != "ok" or tool.call is None:
            continue
        pairs = [(tool.times, tool.call, tool.args)]
        if tool.converted is not None:
            pairs.append((tool.converted_times, tool.converted, tool.converted_args))
        for sink, fn, args in pairs:
            timer = _timer(fn, args)
            number, _ = timer.autorange()
            plan.append((sink, timer, number))
    for _ in range(repeats):
        for sink, timer, number in plan:
            sink.append(timer.timeit(number) / number)
    print(f"    timed {len(plan)} variants x {repeats} repeats", file=sys.stderr)
