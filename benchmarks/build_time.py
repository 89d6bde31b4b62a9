"""``python -m benchmarks.build_time [--quick]``: build time against problem size.

Issue 9 asks that every build finish in seconds and that build cost grow at most
about linearly with the traced graph, on both backends. This script builds the
gradient of four families at growing sizes on each backend, each build in a fresh
process (like ``difgen build``; a build over ``--limit`` seconds is stopped and
reported as such), and records the CPU time of generating the module (trace,
derivatives, emission; not the interpreter's start or difgen's import), its wall
time, the traced graph's size (equations, and elements of work: what scalar code
and SymPy scale with) and the module's size:

- ``euler``: an explicit-Euler loop of 10, 100, 1,000 steps on a 2-state oscillator
  (the state rebuilt with ``np.array`` each step);
- ``rosenbrock``: the extended Rosenbrock function, n = 10 ... 10,000;
- ``lennard_jones``: the vectorized pair energy of n atoms in 3-D;
- ``max``: the largest element (plus a smooth term), n = 10 ... 10,000;
- ``rosenbrock C``: issue 24's bar, the gradient and hvp of Rosenbrock at
  n = 1,000,000 with ``emit = "c"`` (trace backend), under ``C_BAR_SECONDS`` of
  CPU (the C source written, not compiled: gcc's time is the compiler's), with
  the size of its C source (``--c-only`` runs this row alone).

CPU time is the measure because the machine may be shared: wall time under load
is printed beside it. Writes ``benchmarks/results/build_time.md`` (a table) and
``build_time.png`` (time against graph size, log-log). Exits 1 when a build takes
over ``BAR_SECONDS`` of CPU, is stopped, fails, or grows clearly faster than its
graph (time ratio over ``SUPERLINEAR`` times the ratio of the graphs' elements of
work between two sizes of a family, once the larger takes over ``NOISE_SECONDS``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
BAR_SECONDS = 10.0
SUPERLINEAR = 2.0
NOISE_SECONDS = 0.5
C_BAR_SECONDS = 8.0
C_SIZE = 1_000_000
C_FAMILY = "rosenbrock C"

FUNCTIONS = """\
import numpy as np


def _euler(x, steps):
    h = 0.05
    state = np.array([x[0], x[1]])
    for _ in range(steps):
        pos, vel = state[0], state[1]
        acc = -4 * pos - 0.3 * vel + 0.5 * np.sin(pos)
        state = np.array([pos + h * vel, vel + h * acc])
    return np.sum(state**2)


def euler_10(x):
    return _euler(x, 10)


def euler_100(x):
    return _euler(x, 100)


def euler_1000(x):
    return _euler(x, 1000)


def rosenbrock(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def lennard_jones(x):
    d = x[:, None, :] - x[None, :, :]
    r2 = (d**2).sum(-1)
    i, j = np.triu_indices(x.shape[0], 1)
    inv6 = r2[i, j] ** -3
    return np.sum(4.0 * (inv6**2 - inv6))


def largest(x):
    return np.max(x) + 0.1 * np.sum(x**2)
"""


@dataclass(frozen=True)
class Build:
    """One build of the table: a family at one size on one backend."""

    family: str
    size: int
    function: str
    shape: tuple[int, ...]
    backend: str
    emit: str = "vector"
    operators: tuple[str, ...] = ("gradient",)

    @property
    def label(self) -> str:
        return f"{self.family} {self.size} ({self.backend})"


def c_build() -> Build:
    """Issue 24's row: the n = 10^6 Rosenbrock gradient and hvp in C."""
    return Build(
        C_FAMILY, C_SIZE, "rosenbrock", (C_SIZE,), "trace", "c", ("gradient", "hvp")
    )


def builds(quick: bool, c_only: bool = False) -> list[Build]:
    """The table's builds, family by family, in increasing size (the C row
    last)."""
    if c_only:
        return [c_build()]
    sizes = {
        "euler": [10, 100] if quick else [10, 100, 1000],
        "rosenbrock": [10, 100, 1000] if quick else [10, 100, 1000, 10_000],
        "lennard_jones": [3, 10] if quick else [3, 10, 30],
        "max": [10, 100, 1000] if quick else [10, 100, 1000, 10_000],
    }
    shape = {
        "euler": lambda n: (2,),
        "rosenbrock": lambda n: (n,),
        "lennard_jones": lambda n: (n, 3),
        "max": lambda n: (n,),
    }
    function = {
        "euler": lambda n: f"euler_{n}",
        "rosenbrock": lambda n: "rosenbrock",
        "lennard_jones": lambda n: "lennard_jones",
        "max": lambda n: "largest",
    }
    return [
        Build(family, n, function[family](n), shape[family](n), backend)
        for family, ns in sizes.items()
        for backend in ("trace", "sympy")
        for n in ns
    ] + [c_build()]


CONFIG = """\
[difgen]
output_dir = "out"

[[module]]
name = "m"
function = "functions.py:{function}"
backend = "{backend}"
emit = "{emit}"
operators = {operators}
input = {{ shape = {shape} }}
"""


def worker(directory: Path) -> dict[str, Any]:
    """Build the config in ``directory`` in this process and measure it."""
    import time

    from difgen.budget import reporting
    from difgen.config import load_config
    from difgen.load import load_function
    from difgen.pipeline import generate_files, trace_spec
    from difgen.targets import cost as cost_model

    config = load_config(directory / "difgen.toml")
    (spec,) = config.modules
    fn = load_function(spec)
    wall, cpu = time.perf_counter(), time.process_time()
    with reporting(spec.name, None) as tracker:
        files = dict(generate_files(spec, config, fn))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    text = files[".py"]
    graph = trace_spec(spec, fn)
    return {
        "cpu": cpu,
        "wall": wall,
        "eqns": len(graph.eqns),
        "work": cost_model.work(graph),
        "bytes": len(text.encode()),
        "c_bytes": len(files.get("__c.c", "").encode()),
        "emission": text.split("emission ", 1)[1].split(".\n", 1)[0],
        "notes": tracker.notes,
    }


def run(build: Build, root: Path, limit: float) -> dict[str, Any]:
    """One build in a fresh process, stopped after ``limit`` seconds of wall time."""
    directory = root / f"{build.family}_{build.size}_{build.backend}"
    directory.mkdir()
    (directory / "functions.py").write_text(FUNCTIONS)
    shape = json.dumps(list(build.shape))
    (directory / "difgen.toml").write_text(
        CONFIG.format(
            function=build.function,
            backend=build.backend,
            shape=shape,
            emit=build.emit,
            operators=json.dumps(list(build.operators)),
        )
    )
    command = [
        sys.executable,
        "-m",
        "benchmarks.build_time",
        "--worker",
        str(directory),
    ]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=limit, check=False
        )
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {limit:g} s"}
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["no output"]
        return {"error": lines[-1][:200]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def problems(rows: list[tuple[Build, dict[str, Any]]]) -> list[str]:
    """The bars each row misses: too slow, failed, or superlinear in its family."""
    found = []
    for build, r in rows:
        if "error" in r:
            found.append(f"{build.label}: {r['error']}")
        elif build.family == C_FAMILY and r["cpu"] > C_BAR_SECONDS:
            found.append(
                f"{build.label}: {r['cpu']:.1f} s of CPU > {C_BAR_SECONDS:g} s"
            )
        elif r["cpu"] > BAR_SECONDS:
            found.append(f"{build.label}: {r['cpu']:.1f} s of CPU > {BAR_SECONDS:g} s")
    for (a, ra), (b, rb) in itertools.pairwise(rows):
        if (a.family, a.backend) != (b.family, b.backend):
            continue
        if "error" in ra or "error" in rb or rb["cpu"] < NOISE_SECONDS:
            continue
        grow = rb["cpu"] / max(ra["cpu"], 1e-3)
        graph = rb["work"] / max(ra["work"], 1)
        if grow > SUPERLINEAR * max(graph, 1.0):
            found.append(
                f"{b.label}: time x{grow:.1f} for graph x{graph:.1f} "
                f"from {a.size} (superlinear)"
            )
    return found


def table(rows: list[tuple[Build, dict[str, Any]]], load: float) -> str:
    """The Markdown report."""
    lines = [
        "# Build time against problem size",
        "",
        (
            "`python -m benchmarks.build_time`: the gradient of each function built in a "
            "fresh process; CPU seconds of generating the module (trace, derivatives, "
            f"emit), wall seconds beside them (load average {load:.1f} at the start), "
            "the traced graph's equations and elements of work, and the module's "
            "size. Bar: every build "
            f"under {BAR_SECONDS:g} s of CPU and no family growing faster than "
            f"{SUPERLINEAR:g}x its graph's work."
        ),
        "",
        (
            "| family | size | backend | graph eqns | graph work | CPU s | wall s "
            "| module KB | emission |"
        ),
        "|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for build, r in rows:
        if "error" in r:
            lines.append(
                f"| {build.family} | {build.size} | {build.backend} | | | | | "
                f"| **{r['error']}** |"
            )
            continue
        lines.append(
            f"| {build.family} | {build.size} | {build.backend} | {r['eqns']} "
            f"| {r['work']} | {r['cpu']:.2f} | {r['wall']:.2f} | {r['bytes'] / 1024:.1f} "
            f"| {r['emission']} |"
        )
    lines += [c_verdict(build, r) for build, r in rows if build.family == C_FAMILY]
    found = problems(rows)
    lines += ["", "Bar: " + ("**FAIL**" if found else "pass")]
    lines += [f"- {p}" for p in found]
    return "\n".join(lines) + "\n"


def c_verdict(build: Build, r: dict[str, Any]) -> str:
    """The C build's bar as one line: PASS or FAIL, the CPU seconds, the C
    source's size."""
    head = (
        f"The n = {build.size:,} Rosenbrock C build ({', '.join(build.operators)}), "
        f"bar {C_BAR_SECONDS:g} s of CPU:"
    )
    if "error" in r:
        return f"\n{head} **FAIL** ({r['error']})"
    verdict = "PASS" if r["cpu"] <= C_BAR_SECONDS else "**FAIL**"
    return (
        f"\n{head} {verdict}, {r['cpu']:.2f} s of CPU ({r['wall']:.2f} s wall), "
        f"C source {r['c_bytes'] / 1024:.1f} KB"
    )


def plot(rows: list[tuple[Build, dict[str, Any]]], path: Path) -> None:
    """CPU time against the graph's elements of work, one line per family and backend (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    series: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for build, r in rows:
        if "error" not in r:
            series.setdefault((build.family, build.backend), []).append(
                (r["work"], r["cpu"])
            )
    for (family, backend), points in series.items():
        xs, ys = zip(*points)
        style = "-" if backend == "trace" else "--"
        ax.plot(xs, ys, style, marker="o", label=f"{family} ({backend})")
    ax.axhline(BAR_SECONDS, color="grey", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("elements of work in the traced graph")
    ax.set_ylabel("CPU seconds to generate the gradient module")
    ax.set_title("difgen build time against problem size")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.build_time", description=__doc__
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes only")
    parser.add_argument(
        "--c-only", action="store_true", help="only the n = 10^6 C build's row"
    )
    parser.add_argument(
        "--limit", type=float, default=900.0, help="wall seconds before a build stops"
    )
    parser.add_argument("--output", type=Path, default=RESULTS, help="results folder")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(worker(args.worker)))
        return 0
    load = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for build in builds(args.quick, args.c_only):
            result = run(build, Path(tmp), args.limit)
            rows.append((build, result))
            shown = result.get("error") or f"{result['cpu']:.2f} s CPU"
            print(f"{build.label}: {shown}", file=sys.stderr)
    if args.c_only:  # one row: its verdict, no table written over the full one
        print("\n".join(c_verdict(b, r) for b, r in rows).strip())
        return 1 if problems(rows) else 0
    args.output.mkdir(parents=True, exist_ok=True)
    text = table(rows, load)
    (args.output / "build_time.md").write_text(text)
    plot(rows, args.output / "build_time.png")
    print(text, end="")
    return 1 if problems(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
