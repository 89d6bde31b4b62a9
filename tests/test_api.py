"""difgen.build / difgen.check from Python; progress; --jobs; the progress display."""

from __future__ import annotations

import io
import subprocess
import sys
import types
from pathlib import Path

import pytest

import difgen
from difgen.api import Action, BuildResult, Status
from difgen.budget import BuildTimeout, Progress, reporting, stage
from difgen.cli import main
from difgen.config import load_config
from difgen.errors import ConfigError, TraceError, UsageError
from difgen.progress import ERASE, Reporter
from test_cli import CONFIG, SOURCE, fake_generate

ALPHA, BETA = Path("generated/alpha.py"), Path("generated/beta.py")


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """The real difgen.pipeline with the fast fake generate_module of test_cli."""
    import difgen.pipeline as module

    monkeypatch.setattr(module, "generate_module", fake_generate)
    return module


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """test_cli's two-module project, in a fresh directory that is the cwd."""
    (tmp_path / "difgen.toml").write_text(CONFIG)
    (tmp_path / "fn.py").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_import_difgen_is_cheap() -> None:
    """``import difgen`` (the API included) loads neither SymPy nor the pipeline:
    they come with the first build."""
    code = (
        "import sys, difgen\n"
        "difgen.build, difgen.check, difgen.verify\n"
        "heavy = ('sympy', 'difgen.pipeline', 'difgen.derive', 'difgen.render',"
        " 'difgen.targets.python', 'difgen.targets.numpy', 'difgen.targets.c.loops')\n"
        "assert not [m for m in heavy if m in sys.modules], sorted(sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_build_and_check_results(
    project: Path, pipeline: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = difgen.check()  # finds difgen.toml in the working directory
    assert report.config == project / "difgen.toml"
    assert [(m.name, m.path, m.status) for m in report.modules] == [
        ("alpha", project / ALPHA, Status.MISSING),
        ("beta", project / BETA, Status.MISSING),
    ]
    assert not report.ok and len(report.problems) == 2

    result = difgen.build("difgen.toml")
    assert isinstance(result, BuildResult)
    assert [(m.name, m.action, m.reason) for m in result.modules] == [
        ("alpha", Action.WRITTEN, "new file"),
        ("beta", Action.WRITTEN, "new file"),
    ]
    assert result.written == result.modules
    assert all(m.seconds >= 0 and m.stages[0][0] == "load" for m in result.modules)
    assert difgen.check(load_config("difgen.toml")).ok

    again = difgen.build(Path("difgen.toml"))  # inputs unchanged: not generated
    assert [(m.action, m.reason) for m in again.modules] == [
        (Action.SKIPPED, "up to date")
    ] * 2
    assert again.written == ()
    forced = difgen.build(Path("difgen.toml"), force=True)
    assert [(m.action, m.reason) for m in forced.modules] == [
        (Action.UNCHANGED, "identical bytes")
    ] * 2

    (project / "fn.py").write_text(SOURCE.replace("x * x", "x * x * x"))
    alpha, beta = difgen.check("difgen.toml").modules
    assert (alpha.status, alpha.reason) == (
        Status.STALE,
        "the function or its config changed",
    )
    assert alpha.describe() == "stale (the function or its config changed)"
    assert beta.ok
    (rebuilt,) = difgen.build("difgen.toml", ["alpha"]).modules
    assert (rebuilt.name, rebuilt.action, rebuilt.reason) == (
        "alpha",
        Action.WRITTEN,
        "contents changed",
    )

    (project / BETA).write_text("# mine\n")
    beta = difgen.check("difgen.toml").modules[1]
    assert (beta.status, beta.reason) == (
        Status.FOREIGN,
        "its first line is not a difgen header",
    )


def test_bad_input_raises_difgen_errors(
    project: Path, pipeline: types.ModuleType
) -> None:
    with pytest.raises(ConfigError, match="no module named 'gamma'"):
        difgen.build("difgen.toml", ["gamma"])
    with pytest.raises(UsageError, match="jobs must be a positive integer"):
        difgen.build("difgen.toml", jobs=0)
    with pytest.raises(UsageError, match="modules must be a list of names"):
        difgen.check("difgen.toml", "alpha")
    with pytest.raises(ConfigError, match="config file not found"):
        difgen.check("nope.toml")
    assert not (project / "generated").exists()


def test_progress_names_each_stage(project: Path) -> None:
    """The real pipeline: load, trace, derive, print, render per module, then write."""
    events: list[Progress] = []
    difgen.build("difgen.toml", progress=events.append)
    seen = [(e.module, e.stage) for e in events]
    per_module = ["load", "trace", "derive", "print", "render", "done"]
    assert seen == [
        *(("alpha", s) for s in per_module),
        *(("beta", s) for s in per_module),
        (None, "write"),
    ]
    alpha = [e for e in events if e.module == "alpha"]
    assert [e.elapsed for e in alpha] == sorted(e.elapsed for e in alpha)
    assert [name for name, _ in alpha[-1].stages] == per_module[:-1]
    total = sum(t for _, t in alpha[-1].stages)  # time outside stages under 0.01 s
    assert total == pytest.approx(alpha[-1].elapsed, abs=0.01)


def test_stages_nest_and_time_the_innermost() -> None:
    events: list[Progress] = []
    with (
        reporting("m", events.append) as tracker,
        stage("derivatives"),
        stage("passes"),
    ):
        pass
    assert [e.stage for e in events] == ["derivatives", "passes", "done"]
    assert [name for name, _ in tracker.stage_times()][:2] == ["derivatives", "passes"]


JOBS_SOURCE = SOURCE + "\n\ndef h(x):\n    return (x[0] - x[1]) ** 2 + x[2]\n"
JOBS_CONFIG = (
    CONFIG.replace("[[module]]\n", '[[module]]\nbackend = "trace"\n', 1)
    + '\n[[module]]\nname = "gamma"\nfunction = "fn.py:h"\n'
    + 'operators = ["hessian", "jacobian"]\ninput = { shape = [3] }\nsparse = true\n'
)


def test_jobs_give_the_same_bytes_and_progress(tmp_path: Path) -> None:
    """jobs=2 generates in worker processes: same files, byte for byte, and the
    workers' progress reaches the callback."""
    outputs = {}
    for jobs in (1, 2):
        directory = tmp_path / f"jobs{jobs}"
        directory.mkdir()
        (directory / "fn.py").write_text(JOBS_SOURCE)
        (directory / "difgen.toml").write_text(JOBS_CONFIG)
        events: list[Progress] = []
        result = difgen.build(
            directory / "difgen.toml", jobs=jobs, progress=events.append
        )
        assert [m.action for m in result.modules] == [Action.WRITTEN] * 3
        done = sorted(e.module for e in events if e.stage == "done")
        assert done == ["alpha", "beta", "gamma"]
        outputs[jobs] = {
            p.name: p.read_bytes() for p in sorted((directory / "generated").iterdir())
        }
    assert outputs[1] == outputs[2]
    assert len(outputs[1]) == 3


def test_jobs_failure_writes_nothing(tmp_path: Path) -> None:
    """A worker's error reaches the caller whole (a ConfigError keeps its file and
    line across the process boundary), and nothing is written."""
    (tmp_path / "fn.py").write_text(JOBS_SOURCE + "\n\ndef two(x, y):\n    return x\n")
    (tmp_path / "difgen.toml").write_text(JOBS_CONFIG.replace("fn.py:g", "fn.py:two"))
    with pytest.raises(ConfigError) as info:
        difgen.build(tmp_path / "difgen.toml", jobs=2)
    assert (info.value.path, info.value.line) == (str(tmp_path / "difgen.toml"), 10)
    assert "fn.py:two takes (x, y), but difgen calls it with the input alone" in str(
        info.value
    )
    assert not (tmp_path / "generated").exists()


SLOW_SOURCE = """\
def slow(x):
    for _ in range(10**9):  # far longer than the limit, yet finite
        pass
    return x * x
"""


@pytest.mark.parametrize("jobs", [1, 2])
def test_timeout_names_the_module_and_stage(tmp_path: Path, jobs: int) -> None:
    """A module over its time limit stops in its stage, in a worker too."""
    (tmp_path / "fn.py").write_text(SOURCE + "\n\n" + SLOW_SOURCE)
    (tmp_path / "difgen.toml").write_text(CONFIG.replace("fn.py:f", "fn.py:slow"))
    with pytest.raises(BuildTimeout) as info:
        difgen.build(tmp_path / "difgen.toml", timeout=0.3, jobs=jobs)
    assert str(info.value).startswith(
        "module 'alpha': stopped after 0.3 s in stage 'trace'"
    )
    assert not (tmp_path / "generated").exists()


def test_cli_quiet_and_verbose(
    project: Path, pipeline: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["build", "difgen.toml", "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")
    (project / "generated" / "alpha.py").unlink()
    assert main(["build", "difgen.toml", "-v", "--jobs", "1"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"wrote {ALPHA}", f"skipped {BETA} (up to date)"]
    lines = err.splitlines()
    # beta is found up to date before alpha is generated
    assert lines[0].startswith("difgen: [1/2] beta: ")
    assert lines[0].endswith(" s (skipped: up to date)")
    assert lines[1] == "difgen: alpha: load (at 0.00 s)"
    assert [line for line in lines if line.startswith("difgen: [2/2] alpha: ")]
    assert main(["build", "difgen.toml", "--quiet", "--verbose"]) == 2
    capsys.readouterr()
    assert main(["check", "difgen.toml", "-q"]) == 0
    assert capsys.readouterr() == ("", "")
    (project / "generated" / "beta.py").unlink()
    assert main(["check", "difgen.toml", "-q"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{BETA}: beta: missing",
        "1 of 2 modules need attention; run: difgen build difgen.toml",
    ]


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_reporter_plain_lines() -> None:
    out = io.StringIO()
    with Reporter(out, total=2, verbose=False) as report:
        report(Progress("a", "trace", 0.1))
        report(Progress("a", "done", 1.25, (("load", 0.05), ("trace", 1.2))))
        report(Progress("b", "done", 0.5))
        report(Progress(None, "write", 1.8))
    assert out.getvalue() == (
        "difgen: [1/2] a: 1.25 s (load 0.05 s, trace 1.20 s)\n"
        "difgen: [2/2] b: 0.50 s\n"
    )


def test_reporter_live_line_on_a_terminal() -> None:
    now = [100.0]
    out = FakeTerminal()
    reporter = Reporter(out, total=3, interval=3600, clock=lambda: now[0])
    assert reporter.live
    with reporter:
        reporter(Progress("a", "trace", 0.5))
        now[0] += 2.0
        reporter(Progress("b", "load", 0.0))
        assert out.getvalue().split(ERASE)[-1] == (
            "difgen: 0/3 done | a: trace 2.5 s | b: load 0.0 s"
        )
        reporter(Progress("a", "done", 2.5))
        assert out.getvalue().split(ERASE)[-1] == "difgen: 1/3 done | b: load 0.0 s"
        reporter(Progress(None, "write", 3.0))
        assert out.getvalue().split(ERASE)[-1] == "difgen: 1/3 generated; writing"
    assert out.getvalue().endswith(ERASE)  # the line is gone when the build ends
    assert "\n" not in out.getvalue()  # no summary lines unless verbose


def test_reporter_erases_its_line_when_the_build_fails() -> None:
    """An error message must start on a clean line."""
    out = FakeTerminal()
    with pytest.raises(TraceError), Reporter(out, total=1, interval=3600) as report:
        report(Progress("a", "trace", 0.0))
        assert out.getvalue().startswith(ERASE + "difgen: 0/1 done | a: trace")
        raise TraceError("boom")
    assert out.getvalue().endswith(ERASE)
