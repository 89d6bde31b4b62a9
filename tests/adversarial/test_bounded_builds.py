"""Class 8: bounded builds.

A dense result too large to allocate on every call is refused at build time with
its shape, its size and a hint (``sparse = true``, ``hvp``, ``pushforward``);
``difgen build --timeout SECONDS`` and a per-module ``timeout`` key stop a module
whose tracing or generation runs too long, naming the module and the stage; Ctrl-C
stops a build promptly with exit 130 and nothing written.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .adversarial_support import (
    Project,
    assert_refused,
    line_of,
    module_block,
    rows,
)

FUNCTIONS = """\
import time
from pathlib import Path

import numpy as np


def square(x):
    return x * x


def energy(x):
    return np.sum(x * x)


def sleepy(x):
    Path(__file__).with_name("tracing.marker").touch()
    time.sleep(5.0)
    return np.sum(x * x)


def busy(x):
    end = time.monotonic() + 5.0
    while time.monotonic() < end:
        pass
    return np.sum(x * x)


def quick(x):
    return np.sum(np.sin(x))


def churn(x):
    Path(__file__).with_name("tracing.marker").touch()
    for _ in range(1000):
        x = np.sin(x) + 0.5 * x
    return np.sum(x)
"""

# (id, function, input shape, operators, extra keys, shape and hint in the message)
DENSE = [
    (
        "jacobian",
        "square",
        (20000,),
        ["jacobian"],
        {},
        "(20000, 20000)",
        "pushforward or pullback",
    ),
    (
        "value_and_jacobian",
        "square",
        (20000,),
        ["value_and_jacobian"],
        {},
        "(20000, 20000)",
        "pushforward or pullback",
    ),
    (
        "jacobian_2d",
        "square",
        (100, 120),
        ["jacobian"],
        {},
        "(100, 120, 100, 120)",
        "sparse = true",
    ),
    ("hessian", "energy", (12000,), ["hessian"], {}, "(12000, 12000)", "hvp"),
    (
        "value_gradient_and_hessian",
        "energy",
        (12000,),
        ["value_gradient_and_hessian"],
        {},
        "(12000, 12000)",
        "hvp",
    ),
    (
        "hessian_among_others",
        "energy",
        (12000,),
        ["gradient", "hvp", "hessian"],
        {},
        "(12000, 12000)",
        "sparse = true",
    ),
    (
        "batched_pushforward",
        "square",
        (150000,),
        ["pushforward"],
        {"batch": 1000},
        "(1000, 150000)",
        "limit",
    ),
    (
        "batched_pullback",
        "energy",
        (150000,),
        ["pullback"],
        {"batch": 1000},
        "(1000, 150000)",
        "limit",
    ),
]


@pytest.mark.parametrize(
    ("name", "function", "shape", "operators", "extra", "size", "hint"), rows(DENSE)
)
def test_dense_result_over_budget_refused(
    project: Project,
    name: str,
    function: str,
    shape: tuple[int, ...],
    operators: list[str],
    extra: dict[str, int],
    size: str,
    hint: str,
) -> None:
    """exit 1 at the ``operators`` line, with the shape, the GiB and the hint."""
    project.write("fn.py", FUNCTIONS)
    text = project.config(
        module_block(
            function=f"fn.py:{function}",
            operators=operators,
            shape=shape,
            backend="trace",
            **extra,
        )
    )
    before = project.snapshot()
    start = time.monotonic()
    result = project.build()
    assert time.monotonic() - start < 5.0, "the refusal must not build anything first"
    assert_refused(
        result,
        f"difgen.toml:{line_of(text, 'operators = ')}:",
        size,
        "GiB",
        hint,
        before=before,
        after=project.snapshot(),
    )


# (id, function, input shape, operators, extra keys): within the budget.
WITHIN = [
    ("hessian_at_limit", "energy", (11585,), ["hessian"], {}),
    ("jacobian_sparse", "square", (20000,), ["jacobian"], {"sparse": True}),
    ("hessian_sparse", "energy", (12000,), ["hessian", "hvp"], {"sparse": True}),
    ("hvp_instead", "energy", (12000,), ["gradient", "hvp"], {}),
    ("pushforward_unbatched", "square", (150000,), ["pushforward", "pullback"], {}),
]


@pytest.mark.parametrize(
    ("name", "function", "shape", "operators", "extra"), rows(WITHIN)
)
def test_result_within_budget_is_accepted(
    project: Project,
    name: str,
    function: str,
    shape: tuple[int, ...],
    operators: list[str],
    extra: dict[str, bool],
) -> None:
    """``difgen ir`` runs the same budget check as a build, without generating."""
    project.write("fn.py", FUNCTIONS)
    project.config(
        module_block(
            function=f"fn.py:{function}",
            operators=operators,
            shape=shape,
            backend="trace",
            **extra,
        )
    )
    result = project.cli("ir", "difgen.toml", "--module", "mod")
    assert result.status == 0, result.err
    assert result.out.startswith("{ lambda")


# ---------------------------------------------------------------------- timeouts


def _slow_project(
    project: Project,
    function: str,
    backend: str = "trace",
    shape: tuple[int, ...] = (3,),
    **extra: object,
) -> None:
    project.write("fn.py", FUNCTIONS)
    project.config(
        module_block(name="fast", function="fn.py:quick", backend="trace"),
        module_block(
            name="slowpoke",
            function=f"fn.py:{function}",
            shape=shape,
            operators=["hessian"],
            backend=backend,
            **extra,
        ),
    )


# (id, function, backend, input shape, how the timeout is given, stage word)
TIMEOUTS = [
    ("sleep-while-tracing-option", "sleepy", "trace", (3,), "option", "trac"),
    ("sleep-while-tracing-key", "sleepy", "trace", (3,), "key", "trac"),
    ("busy-while-tracing-option", "busy", "trace", (3,), "option", "trac"),
    ("busy-while-tracing-key", "busy", "sympy", (3,), "key", "trac"),
    # a long loop: every stage is linear in it, but its hessian takes many seconds
    # (a 40 x 40 pair sum on sympy used to take minutes; its size budget now sends
    # it to the graph at once, and it builds in a fraction of a second)
    ("slow-generation-option", "churn", "sympy", (3,), "option", ""),
    ("slow-generation-key", "churn", "sympy", (3,), "key", ""),
]


@pytest.mark.parametrize(
    ("name", "function", "backend", "shape", "given", "stage"),
    rows(TIMEOUTS),
)
def test_timeout_stops_slow_module(
    project: Project,
    name: str,
    function: str,
    backend: str,
    shape: tuple[int, ...],
    given: str,
    stage: str,
) -> None:
    """exit 1 within a second or two, naming the module (and the stage: tracing
    or generation), nothing written, not even the fast module."""
    _import_what_a_build_imports()
    extra = {"timeout": 0.5} if given == "key" else {}
    _slow_project(project, function, backend, shape, **extra)
    argv = ["--timeout", "0.5"] if given == "option" else []
    before = project.snapshot()
    start = time.monotonic()
    result = project.build(*argv)
    elapsed = time.monotonic() - start
    assert_refused(result, "slowpoke", stage)
    assert "unknown key" not in result.err and "unrecognized" not in result.err
    assert elapsed < 3.0, f"stopped after {elapsed:.1f} s"
    after = project.snapshot()
    after.pop("tracing.marker", None)
    assert after == before


def _import_what_a_build_imports() -> None:
    """The elapsed time measures how fast a timeout stops the build, not Python's
    first import of SymPy and of difgen's backends, which the build imports lazily:
    on a fresh CI machine (cold disk cache, this file's tests among the first of the
    suite) that import alone took 3 s once."""
    import difgen.derive.graphs
    import difgen.derive.symbolic
    import difgen.pipeline
    import difgen.render.blackfast  # black, imported by the first module rendered
    import difgen.render.module  # noqa: F401  (Jinja2)


def test_timeout_not_reached_builds(project: Project) -> None:
    project.write("fn.py", FUNCTIONS)
    project.config(
        module_block(name="fast", function="fn.py:quick", backend="trace", timeout=30)
    )
    result = project.build("--timeout", "30")
    assert result.status == 0, result.err
    assert project.output("fast").is_file()


# (id, value of the per-module timeout key)
BAD_TIMEOUTS = [("negative", -1), ("string", "soon"), ("boolean", True)]


@pytest.mark.parametrize(
    ("name", "value"),
    rows(BAD_TIMEOUTS),
)
def test_bad_timeout_key_is_config_error(
    project: Project, name: str, value: object
) -> None:
    """A config error at the ``timeout`` line that knows the key."""
    project.write("fn.py", FUNCTIONS)
    text = project.config(
        module_block(function="fn.py:quick", backend="trace", timeout=value)
    )
    result = project.build()
    assert_refused(result, f"difgen.toml:{line_of(text, 'timeout = ')}:", "timeout")
    assert "unknown key" not in result.err


@pytest.mark.parametrize("value", ["-1", "soon"])
def test_bad_timeout_option_is_usage_error(project: Project, value: str) -> None:
    project.write("fn.py", FUNCTIONS)
    project.config(module_block(function="fn.py:quick", backend="trace"))
    result = project.build("--timeout", value)
    assert result.status in (1, 2)
    assert "timeout" in result.err and "unrecognized" not in result.err
    assert not project.output().exists()


# ---------------------------------------------------------------------- Ctrl-C

# (id, function of the second module, backend, shape, seconds after the marker)
INTERRUPTS = [
    ("while-tracing", "sleepy", "trace", (3,), 0.0),
    ("while-generating", "churn", "sympy", (3,), 0.5),
]


@pytest.mark.parametrize(
    ("name", "function", "backend", "shape", "delay"), rows(INTERRUPTS)
)
def test_ctrl_c_exits_130_and_writes_nothing(
    project: Project,
    name: str,
    function: str,
    backend: str,
    shape: tuple[int, ...],
    delay: float,
) -> None:
    """SIGINT to a real build process: exit 130 within seconds, "nothing was
    written", and the older build of the fast module is left as it was."""
    _slow_project(project, "quick")
    assert project.build("--module", "fast").status == 0
    _slow_project(project, function, backend, shape)
    (project.root / "fn.py").write_text(FUNCTIONS.replace("np.sin(x)", "np.cos(x)"))
    before = project.snapshot()
    start = time.monotonic()
    result = project.interrupt(
        "build", "difgen.toml", after="tracing.marker", delay=delay
    )
    assert time.monotonic() - start < 20.0
    assert result.status == 130, (result.status, result.err)
    assert "nothing was written" in result.err
    assert "Traceback" not in result.err, result.err
    after = project.snapshot()
    after.pop("tracing.marker", None)
    assert after == before


UNRAISABLE = """
import sys, time
from difgen import budget
def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass

class Slow:  # the limit expires inside its __del__, where Python drops exceptions
    def __del__(self):
        spin(0.4)

class Loud:  # an unraisable exception of the user's own
    def __del__(self):
        raise ValueError("loud __del__")

def slow_hook(info):  # a hook (pytest's, a user's) that the limit expires in
    spin(0.4)
    sys.__unraisablehook__(info)

if sys.argv[1] == "hook":
    sys.unraisablehook = slow_hook
try:
    with budget.time_limit(0.1, "m"):
        Loud()
        if sys.argv[1] == "del":
            Slow()
        spin(5.0)
except budget.BuildTimeout as exc:
    print("stopped:", exc)
print("hook restored:", sys.unraisablehook is (slow_hook if sys.argv[1] == "hook" else sys.__unraisablehook__))
"""


@pytest.mark.parametrize("where", ["del", "hook"])
def test_timeout_in_unraisable_contexts_prints_nothing(
    tmp_path: Path, where: str
) -> None:
    """A time limit expiring inside a ``__del__`` (where Python drops the
    exception and prints it through ``sys.unraisablehook``) or inside the
    unraisable hook itself (where Python prints "Exception ignored in
    sys.unraisablehook" with a traceback) still stops the block, and prints no
    traceback of its own; the user's own unraisable exception is still reported
    by the hook that was there, which is put back afterwards."""
    import subprocess
    import sys

    script = tmp_path / "unraisable.py"
    script.write_text(UNRAISABLE)
    run = subprocess.run(
        [sys.executable, str(script), where],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "stopped: module 'm': stopped after 0.1 s" in run.stdout, run.stdout
    assert "hook restored: True" in run.stdout
    assert "ValueError: loud __del__" in run.stderr  # the user's, still reported
    assert "BuildTimeout" not in run.stderr, run.stderr
    assert "Exception ignored in sys.unraisablehook" not in run.stderr, run.stderr
