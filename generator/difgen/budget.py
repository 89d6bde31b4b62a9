"""Bounded builds: which stage a module's build is in, and a time limit on it.

``difgen build --timeout SECONDS`` (or a module's ``timeout`` key) stops a module
whose tracing or generation runs too long, with a message naming the module and the
stage it was in, instead of a build that never finishes.

>>> with stage("trace"):
...     current_stage()
'trace'
"""

from __future__ import annotations

import contextlib
import math
import signal
from collections.abc import Iterator

from difgen.errors import DifgenError

_STAGES: list[str] = []


class BuildTimeout(DifgenError):
    """A module's build went over its time limit."""


def current_stage() -> str:
    """The innermost stage in progress (``"setup"`` outside any)."""
    return _STAGES[-1] if _STAGES else "setup"


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Mark the block as one stage of a module's build."""
    _STAGES.append(name)
    try:
        yield
    finally:
        _STAGES.pop()


@contextlib.contextmanager
def time_limit(seconds: float | None, module: str) -> Iterator[None]:
    """Raise :class:`BuildTimeout` in the block once ``seconds`` have passed.

    A POSIX interval timer (SIGALRM) interrupts pure-Python work anywhere, in the
    user's code and in SymPy alike; it re-fires every second in case a library
    swallowed the first exception. No limit when ``seconds`` is None or on a
    platform without SIGALRM.
    """
    if seconds is None or not hasattr(signal, "SIGALRM") or math.isinf(seconds):
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise BuildTimeout(
            f"module {module!r}: stopped after {seconds:g} s in stage "
            f"'{current_stage()}' (its time limit; raise it with --timeout or the "
            "module's timeout key)"
        )

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
