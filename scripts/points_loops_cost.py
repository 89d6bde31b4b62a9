"""What the C points loop gains for operators compiled as C loops.

``python scripts/points_loops_cost.py [--points 1000]`` builds, into a temporary
directory, two loop-built gradients with ``emit = "c"`` and ``points = true``:
Rosenbrock n=300 (loop code that calls no NumPy: the points loop runs without the
GIL) and the benchmark MLP (1025 parameters, 64 samples: its products go to
NumPy's dot, so the points loop keeps the GIL and calls NumPy at each point).
For each it times, over the same points, one run:

- the compiled ``gradient_points(X)`` (one C loop over the points);
- the module's NumPy points variant (its Python fallback, vectorized by vmap);
- a Python loop over the compiled one-point ``gradient``.

Rows are checked bit for bit against the loop before anything is timed. Each
time is the minimum of ``--repeat`` runs with the garbage collector off. Prints a
Markdown table.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from time import perf_counter
from types import ModuleType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "benchmarks" / "problems.py"
CONFIG = """\
[difgen]
output_dir = "out"

[[module]]
name = "rosenbrock300_points"
function = "problems.py:rosenbrock"
backend = "trace"
emit = "c"
points = true
operators = ["gradient"]
input = { shape = [300] }

[[module]]
name = "mlp_points"
function = "problems.py:mlp_loss"
backend = "trace"
emit = "c"
points = true
operators = ["gradient"]
input = { shape = [1025] }
contexts = [{ name = "inputs", shape = [64, 14] }, { name = "targets", shape = [64] }]
"""


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the fallback's warning
        spec.loader.exec_module(module)
    return module


def best_time(fn: Callable[..., Any], call: tuple[Any, ...], repeat: int) -> float:
    """The fastest of ``repeat`` calls ``fn(*call)``, in seconds, the collector
    off."""
    fn(*call)
    times = []
    gc.disable()
    try:
        for _ in range(repeat):
            start = perf_counter()
            fn(*call)
            times.append(perf_counter() - start)
    finally:
        gc.enable()
    return min(times)


def _loop(gradient: Callable[..., Any], X: np.ndarray, *shared: Any) -> list[Any]:
    """A Python loop over the one-point operator."""
    return [gradient(x, *shared) for x in X]


def _row(
    label: str,
    compiled: ModuleType,
    python: ModuleType,
    call: tuple[Any, ...],
    repeat: int,
) -> str:
    """One table row, after checking the rows against the loop bit for bit."""
    got = compiled.gradient_points(*call)
    assert np.array_equal(got, np.array(_loop(compiled.gradient, *call))), label
    c_time = best_time(compiled.gradient_points, call, repeat)
    numpy_time = best_time(python.gradient_points, call, repeat)
    loop_time = best_time(_loop, (compiled.gradient, *call), repeat)
    return (
        f"| {label}, {len(call[0])} points | {c_time * 1e3:.2f} ms "
        f"| {numpy_time * 1e3:.2f} ms | {loop_time * 1e3:.2f} ms "
        f"| {numpy_time / c_time:.1f}x | {loop_time / c_time:.2f}x |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "generator"))
    from difgen import build

    rng = np.random.default_rng(0)
    k = args.points
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        shutil.copy(PROBLEMS, directory / PROBLEMS.name)
        (directory / "difgen.toml").write_text(CONFIG)
        build(directory / "difgen.toml", compile=True)
        rows = [
            (
                "| gradient over points | C points loop | NumPy points variant "
                "| loop over compiled `gradient` | NumPy / C | loop / C |"
            ),
            "|---|---|---|---|---|---|",
        ]
        cases: list[tuple[str, str, int, list[Any]]] = [
            ("rosenbrock300_points", "Rosenbrock n=300", 300, []),
            (
                "mlp_points",
                "MLP (1025 parameters)",
                1025,
                [rng.normal(size=(64, 14)), rng.normal(size=64)],
            ),
        ]
        for name, label, size, shared in cases:
            out = directory / "out"
            compiled = load_module(out / f"{name}.py", name)
            assert compiled.COMPILED, compiled.C_FALLBACK_REASON
            alone = directory / "alone" / name
            alone.mkdir(parents=True)
            python = load_module(
                Path(shutil.copy(out / f"{name}.py", alone)), name + "_py"
            )
            assert not python.COMPILED
            X = rng.uniform(-1.0, 1.0, (k, size))
            rows.append(_row(label, compiled, python, (X, *shared), args.repeat))
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
