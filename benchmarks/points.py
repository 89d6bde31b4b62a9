"""``python -m benchmarks.points``: many points at once, and past one process.

Run from the repository root (needs ``pip install -e '.[dask]'``). Builds the
Rosenbrock n=10 gradient with ``points = true`` on both backends into a temporary
directory and measures, in one run:

1. ``gradient_points(X)`` on 10^4 points against a Python loop over ``gradient``
   (the target: at least 20x faster);
2. throughput (points per second) of ``gradient_points`` over a chunked Dask array
   on a ``dask.distributed.LocalCluster`` of 1 and 2 worker processes (one thread
   each), against the same chunks in this one process. The generated module is
   sent to the workers with ``Client.upload_file``; it imports NumPy only.

Loop and points are warmed up, then timed in alternation with samples of about
equal length and the garbage collector off (:func:`loop_versus_points`); the
speed-up is given as the ratio of the minima and as the median of the paired
ratios. Throughputs are medians. Results are checked against the loop before
anything is timed. Prints a Markdown report.

``python -m benchmarks.points --per-example`` runs only the per-example rows:
``gradient_points(w, X, y)`` with the parameters shared (``input.per_point =
false``) and the examples per point, compiled (``emit = "c"``), against
``jax.jit(jax.vmap(jax.grad(f), in_axes=(None, 0, 0)))`` on the same source; the
bar is a ratio of at most 1.0x (:data:`PER_EXAMPLE_BAR`). ``--int-labels``
declares ``y`` an int64 context (labels 0 and 1, as a classifier's data come),
which the C loops read as doubles; a module whose operators fall back to Python
is timed all the same, its row saying where it ran.

Why one run read 9-11x and a quiet ``timeit`` 30-37x before the points variants
worked in blocks: ``gradient_points`` on 10^4 points of 10 worked on 0.8 MB
arrays (the input in Fortran order, the result, each temporary), several MB live
at once, past a core's L2 cache, at about 2.5x the cost per point of 10^3 points
(the last column of the table). The generated code now evaluates blocks of 1024
points (docs/points.md, "Blocks of points"), so the two columns should be close.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import itertools
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from types import ModuleType
from typing import Any

import numpy as np

PROBLEMS = Path(__file__).resolve().parent / "problems.py"
N = 10  # Rosenbrock dimension
CONFIG = """\
[difgen]
output_dir = "out"
{modules}
"""
MODULE = """
[[module]]
name = "rosenbrock_points_{label}"
function = "problems.py:rosenbrock"
backend = "{backend}"
operators = ["gradient"]
input = {{ shape = [{n}] }}
points = true
{emit}"""
BACKENDS = {"sympy": "sympy", "trace": "trace", "c": "sympy"}
"""Row label: backend. The "c" row is the sympy backend with ``emit = "c"``: one
C loop over the points, against a loop over the compiled ``gradient``."""


def build(directory: Path) -> dict[str, ModuleType]:
    """Build and import the points modules (sympy and trace backends, and the
    compiled one)."""
    from difgen import build as difgen_build

    shutil.copy(PROBLEMS, directory / PROBLEMS.name)
    modules = "".join(
        MODULE.format(
            label=label, backend=b, n=N, emit='emit = "c"\n' if label == "c" else ""
        )
        for label, b in BACKENDS.items()
    )
    config = directory / "difgen.toml"
    config.write_text(CONFIG.format(modules=modules))
    difgen_build(config, compile=True)
    sys.path.insert(0, str(directory / "out"))
    built = {b: importlib.import_module(f"rosenbrock_points_{b}") for b in BACKENDS}
    if not built["c"].COMPILED:
        raise RuntimeError(f"not compiled: {built['c'].C_FALLBACK_REASON}")
    return built


def median_time(fn: Callable[[], Any], repeat: int, number: int = 1) -> float:
    """Median seconds of one ``fn()`` over ``repeat`` runs of ``number`` calls."""
    return statistics.median(_run(fn, number) for _ in range(repeat))


def _run(fn: Callable[[], Any], number: int) -> float:
    """Seconds per call of ``number`` calls of ``fn``, the garbage collector off
    (as ``timeit`` does: a collection inside one side's sample is noise)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        start = perf_counter()
        for _ in range(number):
            fn()
        return (perf_counter() - start) / number
    finally:
        if enabled:
            gc.enable()


@dataclass
class LoopVersusPoints:
    """Seconds per sample of both sides, sample by sample (interleaved)."""

    loop: list[float]  # one Python loop over the k points
    points: list[float]  # one ``gradient_points(X)`` call

    @property
    def ratio_min(self) -> float:
        """Best loop over best call: each side's least disturbed sample."""
        return min(self.loop) / min(self.points)

    @property
    def ratio_median(self) -> float:
        """Median of the ratios of neighbouring samples (the same moment's load)."""
        return statistics.median(a / b for a, b in zip(self.loop, self.points))


def loop_versus_points(mod: ModuleType, k: int, repeat: int) -> LoopVersusPoints:
    """The loop over ``gradient`` and ``gradient_points``, measured alike.

    Both sides are warmed up, then timed in alternation, one loop sample then one
    ``gradient_points`` sample, ``repeat`` times; a ``gradient_points`` sample
    repeats the call so that it lasts about as long as a loop sample, so that
    both see the same stretch of the machine's load. Reported: the ratio of the
    minima and the median of the paired ratios.
    """
    X = np.random.default_rng(0).uniform(-2.0, 2.0, (k, N))
    loop = np.array([mod.gradient(x) for x in X])
    np.testing.assert_allclose(mod.gradient_points(X), loop, rtol=1e-12, atol=1e-9)
    gradient, points = mod.gradient, mod.gradient_points

    def one_by_one() -> None:
        [gradient(x) for x in X]  # the results kept, as gradient_points keeps them

    def at_once() -> None:
        points(X)

    one_by_one(), at_once()  # warm-up: first calls, caches, allocator
    number = max(1, round(_run(one_by_one, 1) / _run(at_once, 1)))
    result = LoopVersusPoints([], [])
    for _ in range(repeat):
        result.loop.append(_run(one_by_one, 1))
        result.points.append(_run(at_once, number))
    return result


def per_point_ns(mod: ModuleType, k: int, repeat: int) -> float:
    """Nanoseconds per point of ``gradient_points`` on ``k`` points (best of)."""
    X = np.random.default_rng(2).uniform(-2.0, 2.0, (k, N))
    number = max(1, 100_000 // k)
    best = min(_run(lambda: mod.gradient_points(X), number) for _ in range(repeat))
    return best / k * 1e9


def dask_throughput(
    mod: ModuleType, total: int, chunk: int, repeat: int
) -> dict[str, float]:
    """Points per second: one process over the chunks, then Dask on 1 and 2
    worker processes (the gradients stay on the workers: ``persist``)."""
    import dask.array as da
    from dask.distributed import Client, LocalCluster, wait

    X = np.random.default_rng(1).uniform(-2.0, 2.0, (total, N))
    points = mod.gradient_points
    # uploading imports the module into the scheduler, here: that reloads it
    # from the scheduler's scratch copy, which the next cluster no longer has
    source = str(mod.__file__)
    rates = {
        "one process, one call": total / median_time(lambda: points(X), repeat),
        "one process, chunk by chunk": total
        / median_time(
            lambda: [points(X[i : i + chunk]) for i in range(0, total, chunk)],
            repeat,
        ),
    }
    runs = itertools.count()
    for workers in (1, 2):
        with (
            LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
            ) as cluster,
            Client(cluster) as client,
        ):
            client.upload_file(source)
            rng = da.random.default_rng(1)
            x = rng.uniform(-2.0, 2.0, (total, N), chunks=(chunk, N)).persist()
            wait(x)
            head = x[:chunk].compute()
            check = da.map_blocks(points, x, dtype=float)[:chunk].compute()
            np.testing.assert_array_equal(check, points(head))

            def run(x: Any = x) -> None:
                """Gradients of every chunk, kept on the workers; a new key name
                each time, so that nothing is reused from the run before."""
                name = f"gradient-points-{next(runs)}"
                wait(da.map_blocks(points, x, dtype=float, name=name).persist())

            run()  # warm up the workers
            rates[f"Dask, {workers} worker(s)"] = total / median_time(run, repeat)
    return rates


TARGET = 20.0  # the issue: 10^4 points at least 20x faster than the loop

PER_EXAMPLE = {
    # row: (function in problems.py, parameters, features per example)
    "logistic, 20 features": ("logistic_example", 20, 20),
    "MLP 14-64-1, 1025 parameters": ("mlp_example", 1025, 14),
}
PER_EXAMPLE_MODULE = """
[[module]]
name = "{name}"
function = "problems.py:{function}"
backend = "trace"
emit = "c"
operators = ["gradient"]
input = {{ shape = [{p}], per_point = false }}
contexts = [{{ name = "X", shape = [{n}], per_point = true }}, \
{{ name = "y", shape = [], dtype = "{label}", per_point = true }}]
points = true
"""
PER_EXAMPLE_BAR = 1.0
"""Issue 22 item 8: the compiled per-example gradient at most 1.0x JAX's."""


def build_per_example(
    directory: Path, int_labels: bool = False
) -> dict[str, ModuleType]:
    """Build, compile and import the per-example gradient modules (``y`` int64
    with ``int_labels``, where a fallback to Python is reported, not refused)."""
    from difgen import build as difgen_build

    shutil.copy(PROBLEMS, directory / PROBLEMS.name)
    names = {row: f"per_example_{i}" for i, row in enumerate(PER_EXAMPLE)}
    modules = "".join(
        PER_EXAMPLE_MODULE.format(
            name=names[row],
            function=f,
            p=p,
            n=n,
            label="int64" if int_labels else "float64",
        )
        for row, (f, p, n) in PER_EXAMPLE.items()
    )
    config = directory / "difgen.toml"
    config.write_text(CONFIG.format(modules=modules))
    difgen_build(config, compile=True)
    sys.path.insert(0, str(directory / "out"))
    built = {row: importlib.import_module(name) for row, name in names.items()}
    for mod in built.values():
        if (not mod.COMPILED or mod.PYTHON_OPERATORS) and not int_labels:
            raise RuntimeError(f"not all compiled: {mod.C_FALLBACK_REASON}")
    return built


def per_example_versus_jax(
    mod: ModuleType,
    function: str,
    p: int,
    n: int,
    k: int,
    repeat: int,
    int_labels: bool = False,
) -> LoopVersusPoints:
    """JAX's jitted vmap of grad (``loop``) and ``gradient_points`` (``points``) on
    ``k`` examples, checked against each other, warmed up and timed in
    alternation as :func:`loop_versus_points` times its two sides."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from benchmarks import problems

    source = getattr(problems, function)
    f = type(source)(source.__code__, {**source.__globals__, "np": jnp})
    rng = np.random.default_rng(0)
    w = rng.standard_normal(p) * 0.3
    X = rng.standard_normal((k, n))
    y = rng.integers(0, 2, k) if int_labels else rng.standard_normal(k)
    jitted = jax.jit(jax.vmap(jax.grad(f), in_axes=(None, 0, 0)))
    np.testing.assert_allclose(
        mod.gradient_points(w, X, y), np.asarray(jitted(w, X, y)), rtol=1e-12,
        atol=1e-12,
    )  # fmt: skip
    points = mod.gradient_points

    def by_jax() -> None:
        jitted(w, X, y).block_until_ready()

    def by_difgen() -> None:
        points(w, X, y)

    by_jax(), by_difgen()
    number = max(1, round(_run(by_jax, 1) / _run(by_difgen, 1)))
    jax_number = max(1, round(_run(by_difgen, number) / _run(by_jax, 1)))
    result = LoopVersusPoints([], [])
    for _ in range(repeat):
        result.loop.append(_run(by_jax, jax_number))
        result.points.append(_run(by_difgen, number))
    return result


def per_example_main(k: int, repeat: int, int_labels: bool = False) -> int:
    """The per-example rows: a Markdown table and the verdict against the bar."""
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        modules = build_per_example(Path(tmp), int_labels)
        labels = ", int64 labels" if int_labels else ""
        print(
            f"# Per-example gradients, {k:,} examples{labels} ({os.cpu_count()} "
            "CPUs)\n"
        )
        print(
            f"{repeat} interleaved samples per side; ratio = difgen / JAX time "
            f"(bar: at most {PER_EXAMPLE_BAR:g}x), of the minima and the median of "
            "the paired ratios.\n"
        )
        print(
            "| problem | jax.jit(vmap(grad)) us (min / median) | gradient_points "
            "us (min / median) | runs in | ratio, min | ratio, median |"
        )
        print("|---|---:|---:|---|---:|---:|")
        verdicts = []
        for row, (function, p, n) in PER_EXAMPLE.items():
            mod = modules[row]
            r = per_example_versus_jax(mod, function, p, n, k, repeat, int_labels)
            where = (
                "C"
                if mod.COMPILED and "gradient_points" not in mod.PYTHON_OPERATORS
                else "Python"
            )
            ratio_min = 1.0 / r.ratio_min
            ratio_median = statistics.median(b / a for a, b in zip(r.loop, r.points))
            print(
                f"| {row} | {min(r.loop) * 1e6:.0f} / "
                f"{statistics.median(r.loop) * 1e6:.0f} "
                f"| {min(r.points) * 1e6:.0f} / {statistics.median(r.points) * 1e6:.0f} "
                f"| {where} | {ratio_min:.2f}x | {ratio_median:.2f}x |"
            )
            ok = ratio_min <= PER_EXAMPLE_BAR and ratio_median <= PER_EXAMPLE_BAR
            verdicts.append(f"{row}: {'PASS' if ok else 'FAIL'}")
        print(
            f"\nBar (both ratios <= {PER_EXAMPLE_BAR:g}x): {', '.join(verdicts)}; "
            f"load average (1 min) {load:.2f} before, {os.getloadavg()[0]:.2f} after."
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.points")
    parser.add_argument("--points", type=int, default=10_000, help="loop test size")
    parser.add_argument("--total", type=int, default=2_000_000, help="Dask size")
    parser.add_argument("--chunk", type=int, default=20_000, help="Dask chunk")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--no-dask", action="store_true", help="the loop part only")
    parser.add_argument(
        "--per-example",
        action="store_true",
        help="only the per-example gradients against jax.jit(vmap(grad))",
    )
    parser.add_argument(
        "--examples", type=int, default=1_000, help="per-example test size"
    )
    parser.add_argument(
        "--int-labels",
        action="store_true",
        help="with --per-example: y an int64 context (labels 0 and 1)",
    )
    args = parser.parse_args(argv)
    if args.per_example:
        return per_example_main(args.examples, args.repeat, args.int_labels)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        modules = build(Path(tmp))
        print(f"# Points: Rosenbrock n={N} gradient ({os.cpu_count()} CPUs)\n")
        print(f"## {args.points:,} points: loop over `gradient` vs `gradient_points`\n")
        print(
            f"{args.repeat} interleaved samples per side, the garbage collector off "
            "in each; speed-up as the ratio of the minima and as the median of the "
            f"paired ratios (target: at least {TARGET:g}x).\n"
        )
        print(
            "| backend | loop ms (min / median) | gradient_points ms (min / median) "
            "| speed-up, min | speed-up, median | ns/point at 10^3 / 10^4 points |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        verdicts = []
        for backend, mod in modules.items():
            r = loop_versus_points(mod, args.points, args.repeat)
            small = per_point_ns(mod, 1_000, args.repeat)
            large = per_point_ns(mod, 10_000, args.repeat)
            print(
                f"| {backend} | {min(r.loop) * 1e3:.2f} / "
                f"{statistics.median(r.loop) * 1e3:.2f} "
                f"| {min(r.points) * 1e3:.3f} / "
                f"{statistics.median(r.points) * 1e3:.3f} "
                f"| {r.ratio_min:.1f}x | {r.ratio_median:.1f}x "
                f"| {small:.0f} / {large:.0f} |"
            )
            ok = r.ratio_median >= TARGET
            verdicts.append(f"{backend}: {'PASS' if ok else 'FAIL'}")
        print(
            f"\nTarget (median paired speed-up >= {TARGET:g}x): {', '.join(verdicts)}; "
            f"load average (1 min) {load:.2f} before, {os.getloadavg()[0]:.2f} after."
        )
        if args.no_dask:
            return 0
        print(
            f"\n## Throughput over {args.total:,} points, chunks of {args.chunk:,} "
            "(trace backend)\n"
        )
        print("| where | points/s | vs one process, one call |")
        print("|---|---:|---:|")
        rates = dask_throughput(modules["trace"], args.total, args.chunk, args.repeat)
        base = rates["one process, one call"]
        for where, rate in rates.items():
            print(f"| {where} | {rate:,.0f} | {rate / base:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
