"""``python -m benchmarks.sparsity_scale [--full] [--build]``: sparsity detection
and coloring against problem size.

Issue 21 asks that sparsity detection scale with the nonzeros, not with
``size * n``. This traces the standard 2-D Brusselator with periodic boundaries
(the one of ``benchmarks/problems.py``, on an N x N grid, 2 N^2 states) at
N = 32, 64, 128 (and 256 with ``--full``: 131,072 states) and measures, in this
process:

- ``trace``: tracing the function;
- ``detect``: :func:`difgen.derive.sparsity.jacobian_pattern` (compressed rows);
- ``color``: the greedy distance-1 column coloring of that pattern;
- ``peak``: the peak of Python allocations (tracemalloc) over detection and
  coloring, measured in a second run (tracemalloc slows what it watches);

with the nonzeros and colors. The dense rules difgen used before refused every
grid above ~58 x 58 (50 M booleans per value) and allocated ``np.eye(n)`` first
(16.5 GB at N = 256).

With ``--build``, each size is also built as a whole module (``sparse = true``
jacobian, trace backend, NumPy emission) in a fresh process stopped after
``--limit`` seconds, to show the stages after detection: the derivation with one
seed per color, printing the CSR index tables, and the module's size.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

SIZES = (32, 64, 128)
FULL_SIZES = (*SIZES, 256)


def brusselator(grid: int) -> Callable[[Any], Any]:
    """The 2-D Brusselator right-hand side on a periodic ``grid x grid`` mesh."""

    def rhs(s: Any) -> Any:
        u = s[: grid * grid].reshape(grid, grid)
        v = s[grid * grid :].reshape(grid, grid)
        lap_u = (
            np.roll(u, 1, 0) + np.roll(u, -1, 0) + np.roll(u, 1, 1) + np.roll(u, -1, 1)
        ) - 4 * u
        lap_v = (
            np.roll(v, 1, 0) + np.roll(v, -1, 0) + np.roll(v, 1, 1) + np.roll(v, -1, 1)
        ) - 4 * v
        uuv = u * u * v
        du = 10.0 * lap_u + 1.0 + uuv - 4.4 * u
        dv = 10.0 * lap_v + 3.4 * u - uuv
        return np.concatenate([du.ravel(), dv.ravel()])

    return rhs


def measure(grid: int) -> dict[str, Any]:
    """Trace, detection and coloring times, peak memory, nonzeros and colors."""
    from difgen.derive.sparsity import color_columns, jacobian_pattern
    from difgen.frontend import trace

    n = 2 * grid * grid
    start = time.perf_counter()
    graph = trace(brusselator(grid), [((n,), "float64")])
    traced = time.perf_counter()
    pattern = jacobian_pattern(graph)
    detected = time.perf_counter()
    colors = color_columns(pattern)
    colored = time.perf_counter()
    tracemalloc.start()
    try:
        color_columns(jacobian_pattern(graph))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return {
        "N": grid,
        "states": n,
        "equations": len(graph.eqns),
        "nnz": pattern.nnz,
        "colors": int(colors.max()) + 1,
        "trace": traced - start,
        "detect": detected - traced,
        "color": colored - detected,
        "peak": peak,
    }


BUILD = """\
import sys, time, numpy as np
sys.path.insert(0, {here!r})
from benchmarks.sparsity_scale import brusselator
from difgen.config import load_config
from difgen.pipeline import generate_module
config = load_config({config!r})
start = time.process_time()
text = generate_module(config.modules[0], config, brusselator({grid}))
print(time.process_time() - start, len(text.encode()))
"""

CONFIG = """\
[difgen]
output_dir = "."

[[module]]
name = "brusselator_{grid}"
function = "unused.py:rhs"
backend = "trace"
operators = ["jacobian"]
input = {{ shape = [{n}] }}
sparse = true
"""


def build(grid: int, limit: float) -> str:
    """The CPU time and module size of the whole build, or why it stopped."""
    here = str(Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "difgen.toml"
        config.write_text(CONFIG.format(grid=grid, n=2 * grid * grid))
        code = BUILD.format(here=here, config=str(config), grid=grid)
        try:
            done = subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                timeout=limit,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"stopped after {limit:.0f} s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return f"failed: {last[:100]}"
    cpu, size = done.stdout.split()
    return f"{float(cpu):.1f} s CPU, module {int(size) / 2**20:.1f} MiB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also N = 256")
    parser.add_argument("--build", action="store_true", help="also build modules")
    parser.add_argument("--limit", type=float, default=300.0, help="per build, s")
    args = parser.parse_args(argv)
    head = "|   N |  states | eqns |       nnz | colors | trace s | detect s | color s"
    print(head + " | peak MiB |" + (" whole build |" if args.build else ""))
    print("|" + "---|" * (9 + args.build))
    for grid in FULL_SIZES if args.full else SIZES:
        r = measure(grid)
        row = (
            f"| {r['N']:3d} | {r['states']:7d} | {r['equations']:4d} "
            f"| {r['nnz']:9d} | {r['colors']:6d} | {r['trace']:7.2f} "
            f"| {r['detect']:8.2f} | {r['color']:7.2f} | {r['peak'] / 2**20:8.1f} |"
        )
        if args.build:
            row += f" {build(grid, args.limit)} |"
        print(row, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
