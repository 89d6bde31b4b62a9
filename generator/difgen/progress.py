"""How ``difgen build`` shows its progress on stderr.

On a terminal, one live status line, redrawn as modules move through their stages
and every few tenths of a second so the elapsed times count up; it is erased when
the build ends. Elsewhere (CI logs, pipes), plain lines: one per module when its
generation is done, with the time per stage, and while a module takes long, one
every :data:`PERIOD` seconds saying its stage, the stage's share of the module's
time so far and the traced graph's size (its equations, and the unrolled loop
that made most of them, if one did). A skipped module (inputs unchanged) gets one
line; the C compiler's time is a line per extension (``--compile``).
``--verbose`` adds a line per stage entered (and, on a terminal, keeps each
module's summary line); ``--quiet`` shows nothing (the command passes no callback
at all).

>>> import io
>>> out = io.StringIO()
>>> with Reporter(out, total=1, verbose=False, live=False) as report:
...     report(Progress("seed", "done", 0.5, (("trace", 0.1), ("derive", 0.4))))
>>> print(out.getvalue(), end="")
difgen: [1/1] seed: 0.50 s (trace 0.10 s, derive 0.40 s)
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Self, TextIO

from difgen.budget import COMPILE, COMPILED, DONE, SKIPPED, Progress

ERASE = "\r\x1b[K"
"""Carriage return, then erase to the end of the line (ANSI)."""

PERIOD = 5.0
"""Seconds between the plain lines of a module in progress, off a terminal."""


class Reporter:
    """A progress callback for :func:`difgen.build` that writes to ``stream``.

    Use it as a context manager: on a terminal it runs a thread that redraws the
    live line, and leaving the block stops it and erases the line (also when the
    build fails, so an error message starts on a clean line).
    """

    def __init__(
        self,
        stream: TextIO,
        total: int,
        verbose: bool = False,
        live: bool | None = None,
        interval: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
        period: float = PERIOD,
    ) -> None:
        self.stream = stream
        self.total = total
        self.verbose = verbose
        self.live = stream.isatty() if live is None else live
        self.interval = interval
        self.clock = clock
        self.period = period
        self.finished = 0
        self.active: dict[str, tuple[str, float]] = {}  # module -> (stage, start)
        self.entered: dict[str, float] = {}  # module -> when it entered its stage
        self.began: dict[str, float] = {}  # module -> when its build started
        self.spent: dict[str, dict[str, float]] = {}  # module -> stage -> seconds
        self.details: dict[str, str] = {}  # module -> the graph's size
        self.said: dict[str, float] = {}  # module -> when its last plain line was
        self.writing = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._shown = False

    def __enter__(self) -> Self:
        self._thread = threading.Thread(
            target=self._tick, name="difgen-progress", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._erase()

    def __call__(self, event: Progress) -> None:
        """Take one report from the build."""
        with self._lock:
            now = self.clock()
            if event.module is None:
                self.writing = True
                self.active.clear()
            elif event.stage == COMPILE:
                self.active[event.module] = (COMPILE, now - event.elapsed)
                self.entered[event.module] = now - event.elapsed
                self.began[event.module] = now - event.elapsed
                self.spent[event.module] = {}
                self.said[event.module] = now - event.elapsed
                self.details[event.module] = "the C compiler"
            elif event.stage == COMPILED:
                self.active.pop(event.module, None)
                self._line(
                    f"difgen: {event.module}: extension compiled in "
                    f"{event.elapsed:.2f} s"
                )
            elif event.stage == SKIPPED:
                self.finished += 1
                if self.verbose or not self.live:
                    self._line(
                        f"difgen: [{self.finished}/{self.total}] {event.module}: "
                        f"{event.elapsed:.2f} s (skipped: up to date)"
                    )
            elif event.stage == DONE:
                self.active.pop(event.module, None)
                if event.detail:
                    self.details[event.module] = event.detail
                self.finished += 1
                if self.verbose or not self.live:
                    self._line(self._summary(event))
                for message in event.notes:  # a budget changed course: always shown
                    self._line(f"difgen: {event.module}: note: {message}")
            else:
                self._enter(event, now)
                if self.verbose:
                    self._line(
                        f"difgen: {event.module}: {event.stage} "
                        f"(at {event.elapsed:.2f} s)"
                    )
            if self.live:
                self._draw(now)

    def _enter(self, event: Progress, now: float) -> None:
        """A module entered a stage: charge the time since the last report to the
        stage it leaves."""
        module = event.module
        assert module is not None
        start = now - event.elapsed
        if module not in self.began:
            self.began[module] = start
            self.said[module] = start
            self.spent[module] = {}
        previous = self.active.get(module)
        if previous is not None:
            since = max(0.0, now - self.entered.get(module, now))
            spent = self.spent[module]
            spent[previous[0]] = spent.get(previous[0], 0.0) + since
        if event.detail:
            self.details[module] = event.detail
        self.active[module] = (event.stage, start)
        self.entered[module] = now

    def _summary(self, event: Progress) -> str:
        stages = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in event.stages)
        detail = self.details.get(event.module or "", "")
        inside = "; ".join(part for part in (detail, stages) if part)
        return (
            f"difgen: [{self.finished}/{self.total}] {event.module}: "
            f"{event.elapsed:.2f} s" + (f" ({inside})" if inside else "")
        )

    def status(self, now: float) -> str:
        """The live line: modules done, then each module in progress."""
        if self.writing:
            return f"difgen: {self.finished}/{self.total} generated; writing"
        parts = []
        for module, (stage_name, start) in self.active.items():
            detail = self.details.get(module)
            parts.append(
                f"{module}: {stage_name} {now - start:.1f} s"
                + (f" ({detail})" if detail else "")
            )
        return " | ".join([f"difgen: {self.finished}/{self.total} done", *parts])

    def periodic(self, module: str, now: float) -> str:
        """The plain line of a module in progress: its stage, the stage's share
        of its time so far, and what it is working on."""
        stage_name, start = self.active[module]
        entered = self.entered.get(module, start)
        began = self.began.get(module, start)
        total = max(now - began, 1e-9)
        in_stage = self.spent.get(module, {}).get(stage_name, 0.0) + now - entered
        share = min(100.0, 100.0 * in_stage / total)
        detail = self.details.get(module)
        return (
            f"difgen: {module}: {stage_name} for {in_stage:.1f} s, {share:.0f}% of "
            f"its {total:.1f} s so far" + (f" ({detail})" if detail else "")
        )

    def _tick(self) -> None:
        interval = self.interval if self.live else min(self.interval, self.period)
        while not self._stop.wait(interval):
            with self._lock:
                now = self.clock()
                if self.live:
                    self._draw(now)
                else:
                    self._plain_lines(now)

    def _plain_lines(self, now: float) -> None:
        """Off a terminal: a line for each module in progress whose last line is
        :attr:`period` seconds old or more."""
        for module in list(self.active):
            last = self.said.get(module, self.began.get(module, now))
            if now - last >= self.period:
                self._line(self.periodic(module, now))
                self.said[module] = now

    def _draw(self, now: float) -> None:
        width = max(20, shutil.get_terminal_size((80, 24)).columns - 1)
        text = self.status(now)
        if len(text) > width:
            text = text[: width - 3] + "..."
        self.stream.write(ERASE + text)
        self.stream.flush()
        self._shown = True

    def _erase(self) -> None:
        if self._shown:
            self.stream.write(ERASE)
            self.stream.flush()
            self._shown = False

    def _line(self, text: str) -> None:
        """A permanent line (above the live line, which the next draw restores)."""
        self._erase()
        self.stream.write(text + "\n")
        self.stream.flush()
