"""Bounded, observable builds: which stage a module's build is in, a time limit on
it, and progress reports to whoever is watching.

``difgen build --timeout SECONDS`` (or a module's ``timeout`` key) stops a module
whose tracing or generation runs too long, with a message naming the module and the
stage it was in, instead of a build that never finishes.

Inside :func:`reporting`, entering a :func:`stage` calls the progress callback with
a :class:`Progress` (module, stage, elapsed seconds), and leaving the block reports
``"done"`` with the time spent in each stage. The stages of a module's build are
:data:`STAGES`; a stage may mark finer stages inside it (each report
names the innermost stage). A backend that changes course because a step would go
over its budget (scalar code that would be too large, say) says so with
:func:`note`; the notes come with the ``"done"`` report and the build's result.

>>> with stage("trace"):
...     current_stage()
'trace'
>>> seen = []
>>> with reporting("seed", seen.append):
...     with stage("trace"):
...         pass
>>> [(p.module, p.stage) for p in seen]
[('seed', 'trace'), ('seed', 'done')]
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from difgen.errors import DifgenError

STAGES = ("load", "trace", "derive", "print", "render", "write")
"""The stages of a module's build, in order: load the user's function, trace it,
derive its operators (symbolically or as graphs, with their passes), print each
in the emission chosen for it, render the module's text, write the files (once,
for all modules)."""

DONE = "done"
"""The stage a :class:`Progress` names when a module's generation has finished."""

COMPILE = "compile"
"""The stage a :class:`Progress` names when the C compiler starts on a module's
extension (``build --compile``); :data:`COMPILED` when it is done, ``elapsed``
then the compiler's seconds. Neither counts as a module generated."""

COMPILED = "compiled"

SKIPPED = "skipped"
"""The stage a :class:`Progress` names for a module an incremental build skips
(its inputs are unchanged, :mod:`difgen.incremental`): its only report."""

_STAGES: list[str] = []


class BuildTimeout(DifgenError):
    """A module's build went over its time limit."""


@dataclass(frozen=True)
class Progress:
    """One report of a build's progress.

    ``module`` is None for steps of the whole build (``write``). ``elapsed`` is
    the seconds since the module's build started. On ``"done"``, ``stages`` holds
    the seconds spent in each stage, in the order they were first entered, and
    ``notes`` what the build chose to do differently (see :func:`note`).
    """

    module: str | None
    stage: str
    elapsed: float
    stages: tuple[tuple[str, float], ...] = field(default=())
    notes: tuple[str, ...] = field(default=())
    detail: str = ""
    """What the module's build is working on (:func:`describe`): the traced
    graph's size, and an unrolled loop when it makes most of it."""


ProgressCallback = Callable[[Progress], None]
"""What :func:`difgen.build` calls with each :class:`Progress` (``progress=``)."""


class _Tracker:
    """Times the stages of one module and reports them to a callback."""

    def __init__(self, module: str, callback: ProgressCallback | None) -> None:
        self.module = module
        self.callback = callback
        self.start = self.last = time.perf_counter()
        self.times: dict[str, float] = {}
        self.notes: list[str] = []
        self.detail = ""

    def account(self) -> None:
        """Charge the time since the last change to the innermost stage."""
        now = time.perf_counter()
        name = current_stage()
        self.times[name] = self.times.get(name, 0.0) + (now - self.last)
        self.last = now

    def report(
        self,
        stage_name: str,
        stages: tuple[tuple[str, float], ...] = (),
        notes: tuple[str, ...] = (),
    ) -> None:
        if self.callback is not None:
            elapsed = time.perf_counter() - self.start
            self.callback(
                Progress(self.module, stage_name, elapsed, stages, notes, self.detail)
            )

    @property
    def elapsed(self) -> float:
        return self.last - self.start

    def stage_times(self) -> tuple[tuple[str, float], ...]:
        """Seconds per stage; time outside any stage only when it is noticeable."""
        return tuple(
            (name, seconds)
            for name, seconds in self.times.items()
            if name != "setup" or seconds >= 0.01
        )


_TRACKERS: list[_Tracker] = []


def note(message: str) -> None:
    """Record that the module being built changed course (a budget was hit).

    The message goes with the module's ``"done"`` progress report (which
    ``difgen build`` prints) and into :attr:`_Tracker.notes`; outside a build
    (a backend called directly) it is dropped.
    """
    if _TRACKERS:
        _TRACKERS[-1].notes.append(message)


def describe(detail: str) -> None:
    """Say what the module being built is working on (``"1,234 equations"``): it
    goes with every later progress report of the module (the next stage entered,
    ``"done"``); outside a build it is dropped."""
    if _TRACKERS:
        _TRACKERS[-1].detail = detail


def notes() -> tuple[str, ...]:
    """The notes of the module being built so far (none outside a build)."""
    return tuple(_TRACKERS[-1].notes) if _TRACKERS else ()


def current_stage() -> str:
    """The innermost stage in progress (``"setup"`` outside any)."""
    return _STAGES[-1] if _STAGES else "setup"


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Mark the block as one stage of a module's build (and report entering it)."""
    tracker = _TRACKERS[-1] if _TRACKERS else None
    if tracker is not None:
        tracker.account()
    _STAGES.append(name)
    if tracker is not None:
        tracker.report(name)
    try:
        yield
    finally:
        if tracker is not None:
            tracker.account()
        _STAGES.pop()


@contextlib.contextmanager
def reporting(module: str, callback: ProgressCallback | None) -> Iterator[_Tracker]:
    """Time the stages entered in the block as the build of ``module``.

    Each stage entered is reported to ``callback`` (if any); leaving the block
    normally reports ``"done"`` with the time per stage. The tracker yielded
    keeps those times for the caller (``elapsed``, ``stage_times()``).
    """
    tracker = _Tracker(module, callback)
    _TRACKERS.append(tracker)
    try:
        yield tracker
        tracker.account()
    finally:
        _TRACKERS.pop()
    tracker.report(DONE, tracker.stage_times(), tuple(tracker.notes))


DEFAULT_TIMEOUT = 1800.0
"""Seconds a module's build may take when neither ``--timeout`` nor the module's
``timeout`` key says otherwise: half an hour, far above any real build (the
largest examples take seconds), so that a ``while True`` in the user's code
stops with a message instead of never. ``--timeout inf`` (``timeout=math.inf``)
removes the limit. :func:`difgen.check` and :func:`difgen.verify` load and trace
the function under the same limit."""

REFIRE = 0.05
"""Seconds between repeats of an expired time limit's exception (see time_limit)."""


@contextlib.contextmanager
def time_limit(seconds: float | None, module: str) -> Iterator[None]:
    """Raise :class:`BuildTimeout` in the block once ``seconds`` have passed.

    A POSIX interval timer (SIGALRM) interrupts pure-Python work anywhere, in the
    user's code and in SymPy alike; it re-fires every :data:`REFIRE` seconds,
    because an exception raised while a garbage-collector callback or a
    ``__del__`` runs is dropped by Python (JAX's gc callback swallowed two in a
    row under load, and with a 1 s re-fire a 0.5 s limit stopped at 3.6 s).

    Python hands such a dropped exception to ``sys.unraisablehook``, whose default
    prints it with a traceback. While the limit is on, a hook of ours drops a
    :class:`BuildTimeout` silently (the timer fires again) and passes anything
    else to the hook it replaced; the timer does not raise while that hook runs
    (an exception raised there is printed as "Exception ignored in
    sys.unraisablehook", traceback and all). So a timed-out build prints its one
    error message, nothing else. No limit when ``seconds`` is None or on a
    platform without SIGALRM.
    """
    if seconds is None or not hasattr(signal, "SIGALRM") or math.isinf(seconds):
        yield
        return
    in_hook = False

    def expire(signum: int, frame: object) -> None:
        if in_hook:
            return  # the timer fires again in REFIRE seconds
        raise BuildTimeout(
            f"module {module!r}: stopped after {seconds:g} s in stage "
            f"'{current_stage()}' (its time limit; raise it with --timeout or the "
            "module's timeout key)"
        )

    replaced = sys.unraisablehook

    def unraisable(info: Any) -> None:
        nonlocal in_hook
        in_hook = True  # first: the timer must not raise in here
        try:
            if not isinstance(info.exc_value, BuildTimeout):
                replaced(info)
        finally:
            in_hook = False

    previous = signal.signal(signal.SIGALRM, expire)
    sys.unraisablehook = unraisable
    signal.setitimer(signal.ITIMER_REAL, seconds, REFIRE)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if sys.unraisablehook is unraisable:
            sys.unraisablehook = replaced
