"""How ``difgen build`` shows its progress on stderr.

On a terminal, one live status line, redrawn as modules move through their stages
and every few tenths of a second so the elapsed times count up; it is erased when
the build ends. Elsewhere (CI logs, pipes), plain lines: one per module when its
generation is done, with the time per stage. ``--verbose`` adds a line per stage
entered (and, on a terminal, keeps each module's summary line); ``--quiet`` shows
nothing (the command passes no callback at all).

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

from difgen.budget import DONE, Progress

ERASE = "\r\x1b[K"
"""Carriage return, then erase to the end of the line (ANSI)."""


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
    ) -> None:
        self.stream = stream
        self.total = total
        self.verbose = verbose
        self.live = stream.isatty() if live is None else live
        self.interval = interval
        self.clock = clock
        self.finished = 0
        self.active: dict[str, tuple[str, float]] = {}  # module -> (stage, start)
        self.writing = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._shown = False

    def __enter__(self) -> Self:
        if self.live:
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
            elif event.stage == DONE:
                self.active.pop(event.module, None)
                self.finished += 1
                if self.verbose or not self.live:
                    self._line(self._summary(event))
                for message in event.notes:  # a budget changed course: always shown
                    self._line(f"difgen: {event.module}: note: {message}")
            else:
                self.active[event.module] = (event.stage, now - event.elapsed)
                if self.verbose:
                    self._line(
                        f"difgen: {event.module}: {event.stage} "
                        f"(at {event.elapsed:.2f} s)"
                    )
            if self.live:
                self._draw(now)

    def _summary(self, event: Progress) -> str:
        stages = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in event.stages)
        return (
            f"difgen: [{self.finished}/{self.total}] {event.module}: "
            f"{event.elapsed:.2f} s" + (f" ({stages})" if stages else "")
        )

    def status(self, now: float) -> str:
        """The live line: modules done, then each module in progress."""
        if self.writing:
            return f"difgen: {self.finished}/{self.total} generated; writing"
        parts = [
            f"{module}: {stage_name} {now - start:.1f} s"
            for module, (stage_name, start) in self.active.items()
        ]
        return " | ".join([f"difgen: {self.finished}/{self.total} done", *parts])

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                self._draw(self.clock())

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
