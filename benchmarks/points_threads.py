"""``python -m benchmarks.points_threads``: the compiled points loop on 1 and 2 threads.

Builds the Rosenbrock n=10 gradient with ``emit = "c"`` and ``points = true``
into a temporary directory and times ``gradient_points(X)`` on 10^6 points with
``DIFGEN_THREADS=1`` and ``=2`` (read by the extension at each call), each
setting in turn, interleaved, the garbage collector off. A shared machine's load
moves wall times, so both wall time and the process's CPU time are printed
(medians), with the load average before and after. With numba installed, a
``@njit`` loop of the hand-written gradient over the same points (one core,
fresh result as ``gradient_points`` makes) is timed in the same rounds.
Results are checked against one thread (bit for bit) and numba (``rtol =
1e-12``, and 1e-14 of the largest magnitude where sums cancel) before anything is timed.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

PROBLEMS = Path(__file__).resolve().parent / "problems.py"
N = 10
CONFIG = f"""\
[difgen]
output_dir = "out"

[[module]]
name = "rosenbrock_points_c"
function = "problems.py:rosenbrock"
backend = "trace"
emit = "c"
operators = ["gradient"]
input = {{ shape = [{N}] }}
points = true
"""


def build(directory: Path) -> ModuleType:
    """The compiled module, imported from ``directory``."""
    import difgen

    shutil.copy(PROBLEMS, directory / PROBLEMS.name)
    (directory / "difgen.toml").write_text(CONFIG)
    difgen.build(directory / "difgen.toml", compile=True)
    sys.path.insert(0, str(directory / "out"))
    module = importlib.import_module("rosenbrock_points_c")
    assert module.COMPILED, module.C_FALLBACK_REASON
    return module


def numba_gradient() -> Callable[[np.ndarray], np.ndarray] | None:
    """A ``@njit`` loop over the points of the hand-written gradient, or None
    without numba."""
    try:
        import numba
    except ImportError:
        return None

    @numba.njit(cache=False)  # type: ignore[misc]
    def gradient_points(X: np.ndarray) -> np.ndarray:
        k, n = X.shape
        G = np.empty((k, n))
        for p in range(k):
            x = X[p]
            g = G[p]
            for i in range(n):
                g[i] = 0.0
            for i in range(n - 1):
                t = 200.0 * (x[i + 1] - x[i] * x[i])
                g[i] += -2.0 * x[i] * t - 2.0 * (1.0 - x[i])
                g[i + 1] += t
        return G

    return gradient_points  # type: ignore[no-any-return]


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """(wall, CPU) seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def with_threads(module: ModuleType, X: np.ndarray, threads: int) -> Callable[[], Any]:
    def run() -> Any:
        os.environ["DIFGEN_THREADS"] = str(threads)
        return module.gradient_points(X)

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--points", type=int, default=10**6)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    X = np.random.default_rng(0).normal(size=(args.points, N))
    with tempfile.TemporaryDirectory() as tmp:
        module = build(Path(tmp))
        runs: dict[str, Callable[[], Any]] = {
            "difgen C, 1 thread": with_threads(module, X, 1),
            "difgen C, 2 threads": with_threads(module, X, 2),
        }
        one = runs["difgen C, 1 thread"]()
        two = runs["difgen C, 2 threads"]()
        assert one.view(np.int64).tobytes() == two.view(np.int64).tobytes()
        jit = numba_gradient()
        if jit is not None:
            scale = float(np.abs(one).max())  # sums cancel: relative to the scale
            np.testing.assert_allclose(jit(X), one, rtol=1e-12, atol=1e-14 * scale)
            runs["numba @njit loop, 1 core"] = lambda: jit(X)
        load = os.getloadavg()
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in runs}
        gc.disable()
        try:
            for _ in range(args.rounds):
                for name, fn in runs.items():
                    times[name].append(timed(fn))
        finally:
            gc.enable()
            os.environ.pop("DIFGEN_THREADS", None)
        after = os.getloadavg()
    print(
        f"Rosenbrock n={N} gradient_points at {args.points} points, "
        f"{args.rounds} rounds, {os.cpu_count()} CPUs, load average "
        f"{load[0]:.2f} before, {after[0]:.2f} after"
    )
    print()
    print("| run | wall ms (median) | CPU ms (median) | wall ÷ 1 thread |")
    print("|---|---:|---:|---:|")
    base = statistics.median(w for w, _ in times["difgen C, 1 thread"])
    for name, samples in times.items():
        wall = statistics.median(w for w, _ in samples)
        cpu = statistics.median(c for _, c in samples)
        print(f"| {name} | {wall * 1e3:.1f} | {cpu * 1e3:.1f} | {wall / base:.2f} |")
    if jit is None:
        print("\nnumba is not installed: no numba row")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
