"""Straight-line C or C loops for the points variant of a small operator.

``python scripts/points_straight_or_loops.py [--points 10000] [--sizes 10,30,...]``
builds, into a temporary directory, the Rosenbrock gradient with ``emit = "c"``
and ``points = true`` at each size twice, as straight-line C and as C loops
(``c_loops.STRAIGHT_LINE_WORK`` set past the graph's work, then below it). For each it reports the graph's work
(``cost_model.work``), the C compile seconds, and the time of
``gradient_points(X)`` over the same points (the minimum of ``--repeat`` runs,
the collector off), after checking both against each other to 1e-12 of the
rows' scale. Prints a Markdown table; the crossover sets the threshold.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from points_loops_cost import best_time, load_module

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "benchmarks" / "problems.py"


def _config(size: int) -> str:
    return (
        '[difgen]\noutput_dir = "out"\n\n[[module]]\nname = "rosen"\n'
        'function = "problems.py:rosenbrock"\nbackend = "trace"\nemit = "c"\n'
        f'points = true\noperators = ["gradient"]\ninput = {{ shape = [{size}] }}\n'
    )


def _built(directory: Path, size: int, limit: int, tag: str) -> Any:
    """The module built with the threshold ``limit``: the module, whether its
    gradient is C loops, the gradient graph's work and the compile seconds."""
    from difgen import build
    from difgen.targets import choose
    from difgen.targets import cost as cost_model
    from difgen.targets.c import loops as c_loops

    saved, emit = c_loops.STRAIGHT_LINE_WORK, choose._print_compiled
    works: dict[str, int] = {}

    def spy(op: Any, spec: Any, ys: Any, graph: Any, *rest: Any) -> Any:
        works[op.name] = cost_model.work(graph)
        return emit(op, spec, ys, graph, *rest)

    c_loops.STRAIGHT_LINE_WORK = limit
    choose._print_compiled = spy  # type: ignore[assignment]
    try:
        where = directory / tag
        where.mkdir()
        shutil.copy(PROBLEMS, where / PROBLEMS.name)
        (where / "difgen.toml").write_text(_config(size))
        result = build(where / "difgen.toml", compile=True)
    finally:
        c_loops.STRAIGHT_LINE_WORK, choose._print_compiled = saved, emit
    module = load_module(where / "out" / "rosen.py", f"rosen_{tag}")
    assert module.COMPILED, module.C_FALLBACK_REASON
    source = (where / "out" / "rosen__c.c").read_text()
    seconds = sum(c.seconds for c in result.compiled)
    loops = "/* gradient: C loops over" in source
    return module, loops, works["gradient"], seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--sizes", default="10,20,30,50,70,100")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "generator"))
    rng = np.random.default_rng(0)
    rows = [
        (
            "| n | work (gradient graph) | straight-line ms | loops ms "
            "| loops / straight-line | compile s (straight-line, loops) |"
        ),
        "|---:|---:|---:|---:|---:|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(n) for n in args.sizes.split(",")):
            straight, s_loops, work, s_sec = _built(
                Path(tmp), size, 1 << 40, f"s{size}"
            )
            loops, l_loops, _, l_sec = _built(Path(tmp), size, -1, f"l{size}")
            assert not s_loops and l_loops, size
            X = rng.uniform(-1.0, 1.0, (args.points, size))
            a, b = straight.gradient_points(X), loops.gradient_points(X)
            scale = np.abs(a).max(axis=1, keepdims=True)
            assert np.all(np.abs(a - b) <= 1e-12 * scale), size
            t_s = best_time(straight.gradient_points, (X,), args.repeat)
            t_l = best_time(loops.gradient_points, (X,), args.repeat)
            rows.append(
                f"| {size} | {work} | {t_s * 1e3:.2f} "
                f"| {t_l * 1e3:.2f} | {t_l / t_s:.2f} | {s_sec:.2f}, {l_sec:.2f} |"
            )
            print(rows[-1], file=sys.stderr)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
