"""Progress of long builds: the graph's size, the stage's share of the time, plain
periodic lines off a terminal, the C compiler's time, an unrolled loop named."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import difgen
from difgen import api, pipeline
from difgen.budget import COMPILE, COMPILED, SKIPPED, Progress
from difgen.config import load_config
from difgen.frontend import control
from difgen.load import load_function
from difgen.progress import Reporter
from difgen.targets.c import compiling


class Clock:
    """A clock the test moves; the reporter's thread reads it."""

    def __init__(self) -> None:
        self.now = 100.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


def wait_for(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    """Poll (in short real sleeps) until the reporter's thread has written."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the reporter wrote nothing"
        time.sleep(0.01)


def test_off_a_terminal_a_slow_stage_gets_periodic_lines() -> None:
    out = io.StringIO()
    clock = Clock()
    with Reporter(
        out, total=1, live=False, interval=0.01, period=4.0, clock=clock
    ) as report:
        report(Progress("m", "load", 0.0))
        clock.advance(1.0)
        report(Progress("m", "trace", 1.0))
        clock.advance(1.0)
        time.sleep(0.05)
        assert out.getvalue() == ""  # not slow yet: nothing before the module ends
        clock.advance(1.0)
        report(Progress("m", "derive", 3.0, detail="1,234 equations"))
        clock.advance(3.0)  # derive: 3 s of the module's 6
        wait_for(lambda: "derive" in out.getvalue())
        assert out.getvalue() == (
            "difgen: m: derive for 3.0 s, 50% of its 6.0 s so far (1,234 equations)\n"
        )
        clock.advance(2.0)
        time.sleep(0.05)
        assert out.getvalue().count("\n") == 1  # one line per period
        clock.advance(2.0)  # derive: 7 s of 10
        wait_for(lambda: out.getvalue().count("\n") == 2)
        assert out.getvalue().splitlines()[1] == (
            "difgen: m: derive for 7.0 s, 70% of its 10.0 s so far (1,234 equations)"
        )
        report(
            Progress(
                "m",
                "done",
                10.0,
                (("trace", 2.0), ("derive", 8.0)),
                (),
                "1,234 equations",
            )
        )
    assert out.getvalue().splitlines()[-1] == (
        "difgen: [1/1] m: 10.00 s (1,234 equations; trace 2.00 s, derive 8.00 s)"
    )


def test_a_real_build_with_a_slow_stage_says_so_while_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "fn.py").write_text(
        "import numpy as np\n\n\ndef f(x):\n    return np.sum(np.sin(x) * x)\n"
    )
    (tmp_path / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "out"\n\n[[module]]\nname = "m"\n'
        'function = "fn.py:f"\nbackend = "trace"\noperators = ["gradient"]\n'
        "input = { shape = [3] }\n"
    )
    real = pipeline.derive

    def slow(*args: object) -> object:
        time.sleep(0.5)  # the slow fake stage
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "derive", slow)
    out = io.StringIO()
    with Reporter(out, total=1, live=False, interval=0.02, period=0.2) as report:
        difgen.build(tmp_path / "difgen.toml", progress=report)
    lines = out.getvalue().splitlines()
    assert any(
        line.startswith("difgen: m: derive for ") and line.endswith(" equations)")
        for line in lines
    ), lines
    assert lines[-1].startswith("difgen: [1/1] m: ")
    assert "equations; load " in lines[-1]


def test_skipped_modules_and_compiler_times_are_lines() -> None:
    """A slow compile gets the periodic lines of a stage (the first test); its
    end is a line with the compiler's time."""
    out = io.StringIO()
    with Reporter(out, total=2, live=False) as report:
        report(Progress("a", SKIPPED, 0.01))
        report(Progress("b", "done", 0.5))
        report(Progress("b", COMPILE, 0.0))
        report(Progress("b", COMPILED, 12.5))
    assert out.getvalue().splitlines() == [
        "difgen: [1/2] a: 0.01 s (skipped: up to date)",
        "difgen: [2/2] b: 0.50 s",
        "difgen: b: extension compiled in 12.50 s",
    ]


def test_the_live_line_shows_the_graph_size() -> None:
    reporter = Reporter(io.StringIO(), total=1, live=True, interval=3600)
    reporter(Progress("m", "derive", 0.0, detail="40 equations"))
    assert reporter.status(reporter.clock()).startswith(
        "difgen: 0/1 done | m: derive 0."
    )
    assert reporter.status(reporter.clock()).endswith(" s (40 equations)")


def test_compile_extensions_reports_each_compilers_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "out"\n'
        + "".join(
            f'\n[[module]]\nname = "{name}"\nfunction = "fn.py:f"\nbackend = "trace"\n'
            'operators = ["gradient"]\ninput = { shape = [3] }\nemit = "c"\n'
            for name in ("a", "b")
        )
    )
    monkeypatch.setattr(api, "_needs_compiling", lambda config, spec: True)

    def fake(directory: Path, name: str) -> compiling.Compiled:
        return compiling.Compiled(name, directory / f"{name}.so", len(name) * 1.5)

    monkeypatch.setattr(compiling, "compile_module", fake)
    seen: list[Progress] = []
    done = api.compile_extensions(tmp_path / "difgen.toml", progress=seen.append)
    assert [c.name for c in done] == ["a", "b"]
    assert sorted((p.module, p.stage, p.elapsed) for p in seen) == [
        ("a", COMPILE, 0.0),
        ("a", COMPILED, 1.5),
        ("b", COMPILE, 0.0),
        ("b", COMPILED, 1.5),
    ]


LOOPED = """\
import numpy as np


def f(x):
    y = x
    for i in range(3000):
        y = y * x + 1.0
    return np.sum(y)
"""


def test_an_unrolled_loop_is_named_when_it_makes_most_of_the_graph(
    tmp_path: Path,
) -> None:
    (tmp_path / "fn.py").write_text(LOOPED)
    (tmp_path / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "out"\n\n[[module]]\nname = "m"\n'
        'function = "fn.py:f"\nbackend = "trace"\noperators = ["gradient"]\n'
        "input = { shape = [3] }\n"
    )
    (spec,) = load_config(tmp_path / "difgen.toml").modules
    fn = load_function(spec)
    with control.unrolling(), control.counting_unrolled() as loops:
        unrolled = pipeline.trace_spec(spec, fn)
    size = pipeline.graph_size(unrolled, loops)
    assert size.startswith(f"{pipeline.count_equations(unrolled):,} equations, ")
    assert "from the loop at " in size and "fn.py:6" in size
    assert size.endswith(" unrolled over 3,000 iterations")
    with control.counting_unrolled() as loops:  # a loop of the graph: no unrolling
        rolled = pipeline.trace_spec(spec, fn)
    assert pipeline.count_equations(rolled) < pipeline.count_equations(unrolled) / 10
    assert "unrolled" not in pipeline.graph_size(rolled, loops)
    # a small graph is not blamed on a loop, even one that made all of it
    count = pipeline.count_equations(rolled)
    assert pipeline.graph_size(rolled, {"fn.py:6": (3, count)}) == f"{count} equations"


def test_a_slow_compile_gets_periodic_lines() -> None:
    out = io.StringIO()
    clock = Clock()
    with Reporter(
        out, total=1, live=False, interval=0.01, period=4.0, clock=clock
    ) as report:
        report(Progress("b", COMPILE, 0.0))
        clock.advance(5.0)
        wait_for(lambda: "compile" in out.getvalue())
        report(Progress("b", COMPILED, 5.0))
    assert out.getvalue().splitlines() == [
        "difgen: b: compile for 5.0 s, 100% of its 5.0 s so far (the C compiler)",
        "difgen: b: extension compiled in 5.00 s",
    ]
