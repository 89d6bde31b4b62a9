"""``python -m benchmarks.points_threads``: points variants on 1 and 2 threads.

Builds the Rosenbrock n=10 gradient with ``points = true`` twice into a
temporary directory, with ``emit = "c"`` (the compiled points loop) and with
``emit = "vector"`` (the NumPy emission, whose blocks run over a thread pool),
and times ``gradient_points(X)`` on 10^6 points with ``DIFGEN_THREADS=1`` and
``=2`` (read at each call), into a fresh result and into ``out=``, each run in
turn, interleaved, the garbage collector off. With numba installed, a ``@njit``
loop of the hand-written gradient over the same points (one core, into a fresh
result and into a given one) is timed in the same rounds. A shared machine's
load moves wall times, so both wall time and the process's CPU time are printed
(medians), with the load average before and after.

The bars (issue 24), judged on the medians: two threads at least
:data:`SPEEDUP_BAR` times faster than one in wall time, for C and for NumPy,
into ``out=`` (the speedup is what the caller waits for: wall time); the C loop
on one thread at most :data:`NUMBA_BAR` times numba's in CPU time (the work
each does, which other processes' load inflates less), fresh against fresh and
``out=`` against numba's given result. The exit status is 1 when a bar fails:
a speedup bar under a load average above the CPUs measures the load, and is
reported as measured. Results are checked against one thread (bit for bit) and
numba (``rtol = 1e-12``, and 1e-14 of the largest magnitude where sums cancel)
before anything is timed.
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
SPEEDUP_BAR = 1.7
"""Two threads at least this many times faster than one (wall time)."""
NUMBA_BAR = 1.2
"""The C loop on one thread at most this many times numba's (CPU time)."""
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

[[module]]
name = "rosenbrock_points_numpy"
function = "problems.py:rosenbrock"
backend = "trace"
emit = "vector"
operators = ["gradient"]
input = {{ shape = [{N}] }}
points = true
"""


def build(directory: Path) -> tuple[ModuleType, ModuleType]:
    """The compiled module and the NumPy one, imported from ``directory``."""
    import difgen

    shutil.copy(PROBLEMS, directory / PROBLEMS.name)
    (directory / "difgen.toml").write_text(CONFIG)
    difgen.build(directory / "difgen.toml", compile=True)
    sys.path.insert(0, str(directory / "out"))
    compiled = importlib.import_module("rosenbrock_points_c")
    assert compiled.COMPILED, compiled.C_FALLBACK_REASON
    return compiled, importlib.import_module("rosenbrock_points_numpy")


def numba_gradient() -> Callable[[np.ndarray, np.ndarray], None] | None:
    """A ``@njit`` loop over the points of the hand-written gradient, writing
    into its second argument, or None without numba."""
    try:
        import numba
    except ImportError:
        return None

    @numba.njit(cache=False)  # type: ignore[misc]
    def gradient_points(X: np.ndarray, G: np.ndarray) -> None:
        k, n = X.shape
        for p in range(k):
            x = X[p]
            g = G[p]
            for i in range(n):
                g[i] = 0.0
            for i in range(n - 1):
                t = 200.0 * (x[i + 1] - x[i] * x[i])
                g[i] += -2.0 * x[i] * t - 2.0 * (1.0 - x[i])
                g[i + 1] += t

    return gradient_points  # type: ignore[no-any-return]


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """(wall, CPU) seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def with_threads(
    module: ModuleType, X: np.ndarray, threads: int, out: np.ndarray | None = None
) -> Callable[[], Any]:
    def run() -> Any:
        os.environ["DIFGEN_THREADS"] = str(threads)
        return module.gradient_points(X, out=out)

    return run


def runs_of(
    compiled: ModuleType,
    vector: ModuleType,
    X: np.ndarray,
    jit: Callable[[np.ndarray, np.ndarray], None] | None,
) -> dict[str, Callable[[], Any]]:
    """The timed calls by row name, their results checked first."""
    out = np.empty_like(X)
    runs: dict[str, Callable[[], Any]] = {
        "difgen C, 1 thread": with_threads(compiled, X, 1),
        "difgen C, 2 threads": with_threads(compiled, X, 2),
        "difgen C, 1 thread, out=": with_threads(compiled, X, 1, out),
        "difgen C, 2 threads, out=": with_threads(compiled, X, 2, out),
        "difgen NumPy, 1 thread, out=": with_threads(vector, X, 1, out),
        "difgen NumPy, 2 threads, out=": with_threads(vector, X, 2, out),
    }
    one = runs["difgen C, 1 thread"]()
    bits = one.view(np.int64).tobytes()
    assert runs["difgen C, 2 threads"]().view(np.int64).tobytes() == bits
    vector_one = np.array(runs["difgen NumPy, 1 thread, out="]())
    vector_two = runs["difgen NumPy, 2 threads, out="]()
    assert vector_two.view(np.int64).tobytes() == vector_one.view(np.int64).tobytes()
    scale = float(np.abs(one).max())  # sums cancel: relative to the scale
    np.testing.assert_allclose(vector_one, one, rtol=1e-12, atol=1e-14 * scale)
    if jit is not None:

        def fresh() -> np.ndarray:
            G = np.empty_like(X)
            jit(X, G)
            return G

        np.testing.assert_allclose(fresh(), one, rtol=1e-12, atol=1e-14 * scale)
        runs["numba @njit loop, 1 core"] = fresh
        runs["numba @njit loop, 1 core, into out"] = lambda: jit(X, out)
    return runs


def bars(medians: dict[str, tuple[float, float]]) -> list[tuple[str, float, bool]]:
    """(what, measured, met) of each bar, from the (wall, CPU) medians."""
    found = []
    for emission in ("C", "NumPy"):
        one = medians[f"difgen {emission}, 1 thread, out="][0]
        two = medians[f"difgen {emission}, 2 threads, out="][0]
        found.append(
            (
                f"{emission}: 2 threads >= {SPEEDUP_BAR}x faster than 1 (wall)",
                one / two,
                one / two >= SPEEDUP_BAR,
            )
        )
    pairs = (
        ("difgen C, 1 thread", "numba @njit loop, 1 core", "fresh results"),
        ("difgen C, 1 thread, out=", "numba @njit loop, 1 core, into out", "out="),
    )
    for ours, theirs, what in pairs:
        if theirs in medians:
            ratio = medians[ours][1] / medians[theirs][1]
            found.append(
                (
                    f"C, 1 thread <= {NUMBA_BAR}x numba (CPU, {what})",
                    ratio,
                    ratio <= NUMBA_BAR,
                )
            )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--points", type=int, default=10**6)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    X = np.random.default_rng(0).normal(size=(args.points, N))
    jit = numba_gradient()
    with tempfile.TemporaryDirectory() as tmp:
        compiled, vector = build(Path(tmp))
        runs = runs_of(compiled, vector, X, jit)
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
    medians = {
        name: (
            statistics.median(w for w, _ in samples),
            statistics.median(c for _, c in samples),
        )
        for name, samples in times.items()
    }
    for name, (wall, cpu) in medians.items():
        emission = "NumPy" if "NumPy" in name else "C"
        base = medians[
            f"difgen {emission}, 1 thread{', out=' if 'out' in name else ''}"
        ][0]
        print(f"| {name} | {wall * 1e3:.1f} | {cpu * 1e3:.1f} | {wall / base:.2f} |")
    if jit is None:
        print("\nnumba is not installed: no numba rows, no numba bars")
    print()
    found = bars(medians)
    for what, measured, met in found:
        print(f"{'met' if met else 'FAILS'}: {what}: {measured:.2f}")
    return 0 if all(met for _, _, met in found) else 1


if __name__ == "__main__":
    raise SystemExit(main())
