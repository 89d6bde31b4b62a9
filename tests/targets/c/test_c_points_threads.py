"""The compiled points loop split over threads (``emit = "c"``, ``points = true``).

From :data:`difgen.targets.c.points.THREAD_POINTS` points per thread on, a
points call without NumPy calls in its body runs contiguous blocks of points on
``DIFGEN_THREADS`` threads (else the online processors), each with its own
workspace and writing only its own rows: the results must be those of one
thread BIT FOR BIT (NaN and inf included), and equal the one-point operator at
each point (NaN where it is NaN). Modules: a straight-line Rosenbrock (sympy), a Rosenbrock large
enough to be compiled as loops with a workspace (trace), and a per-example
logistic loss with int64 labels read as doubles.
"""

from __future__ import annotations

import os
import shutil
import threading
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import difgen
from conftest import SUPPORT, import_file
from difgen.targets.c.points import THREAD_POINTS

FUNCTIONS = """
import numpy as np


def rosenbrock(x):
    return np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
"""

CONFIG = """
[difgen]
output_dir = "out"

[[module]]
name = "rosen_lines"
function = "functions.py:rosenbrock"
backend = "sympy"
emit = "c"
operators = ["gradient", "value_and_gradient", "hvp"]
input = { shape = [4] }
points = true

[[module]]
name = "rosen_loops"
function = "functions.py:rosenbrock"
backend = "trace"
emit = "c"
operators = ["gradient", "hvp"]
input = { shape = [300] }
points = true

[[module]]
name = "logistic"
function = "int_context_functions.py:logistic"
backend = "trace"
emit = "c"
operators = ["gradient", "hvp"]
input = { shape = [3], per_point = false }
contexts = [
    { name = "X", shape = [3], per_point = true },
    { name = "y", shape = [], dtype = "int64", per_point = true },
]
points = true
"""


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModuleType]:
    directory = tmp_path_factory.mktemp("c_points_threads")
    (directory / "functions.py").write_text(FUNCTIONS)
    shutil.copy(SUPPORT / "int_context_functions.py", directory)
    config = directory / "difgen.toml"
    config.write_text(CONFIG)
    difgen.build(config, compile=True)
    loaded = {}
    for name in ("rosen_lines", "rosen_loops", "logistic"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            module = import_file(Path(directory, "out", f"{name}.py"))
        assert module.COMPILED, module.C_FALLBACK_REASON
        loaded[name] = module
    return loaded


def _arguments(name: str, op: str, k: int) -> list[Any]:
    rng = np.random.default_rng(k)
    if name == "logistic":
        theta = rng.normal(size=3)
        X = rng.normal(size=(k, 3))
        X[:7, 0] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e300, 5e-324]
        y = rng.integers(0, 2, size=k)
        return [theta, *([rng.normal(size=(k, 3))] if op == "hvp" else []), X, y]
    n = 4 if name == "rosen_lines" else 300
    x = rng.normal(size=(k, n))
    x[:6, 0] = [np.nan, np.inf, -np.inf, -0.0, 1e300, 5e-324]
    return [x, *([rng.normal(size=(k, n))] if op == "hvp" else [])]


def _bits(result: Any) -> list[bytes]:
    results = result if isinstance(result, tuple) else (result,)
    return [np.ascontiguousarray(r).view(np.int64).tobytes() for r in results]


def _call(module: ModuleType, op: str, args: list[Any], threads: str) -> Any:
    old = os.environ.get("DIFGEN_THREADS")
    os.environ["DIFGEN_THREADS"] = threads
    try:
        return getattr(module, f"{op}_points")(*args)
    finally:
        if old is None:
            del os.environ["DIFGEN_THREADS"]
        else:
            os.environ["DIFGEN_THREADS"] = old


CASES = [
    ("rosen_lines", "gradient"),
    ("rosen_lines", "value_and_gradient"),
    ("rosen_lines", "hvp"),
    ("rosen_loops", "gradient"),
    ("rosen_loops", "hvp"),
    ("logistic", "gradient"),
    ("logistic", "hvp"),
]


@pytest.mark.parametrize("name, op", CASES)
def test_threads_equal_one_thread_bit_for_bit(
    modules: dict[str, ModuleType], name: str, op: str
) -> None:
    k = 5 * THREAD_POINTS + 3  # blocks of unequal lengths on 2, 3 and 5 threads
    if name == "rosen_loops":
        k = 2 * THREAD_POINTS + 1
    args = _arguments(name, op, k)
    one = _call(modules[name], op, args, "1")
    for threads in ("2", "3", "5", "64"):
        assert _bits(_call(modules[name], op, args, threads)) == _bits(one), threads
    point = getattr(modules[name], op)  # the one-point operator at some rows
    for i in (0, 1, 3, 5, k // 2, k - 1):
        if name == "logistic":
            theta, *rest = args
            row = point(theta, *(a[i] for a in rest))
        else:
            row = point(*(a[i] for a in args))
        got = one if isinstance(one, tuple) else (one,)
        rows = row if isinstance(row, tuple) else (row,)
        for g, r in zip(got, rows):  # NaN's sign may differ (NumPy's logaddexp)
            assert np.array_equal(g[i], r, equal_nan=True), i


def _most_threads(module: ModuleType, x: np.ndarray, threads: str) -> int:
    """The most threads this process had while ``gradient_points(x)`` ran (it
    releases the GIL, so a Python thread watches /proc/self/task meanwhile)."""
    seen = [0]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen[0] = max(seen[0], len(os.listdir("/proc/self/task")))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for _ in range(5):
            _call(module, "gradient", [x], threads)
    finally:
        done.set()
        watcher.join()
    return seen[0]


def test_difgen_threads_sets_the_number_of_threads(
    modules: dict[str, ModuleType],
) -> None:
    assert os.path.isdir("/proc/self/task"), "this test reads Linux's /proc"
    before = len(os.listdir("/proc/self/task"))  # the watcher is one more
    x = np.random.default_rng(0).normal(size=(400 * THREAD_POINTS, 4))
    module = modules["rosen_lines"]
    assert _most_threads(module, x, "1") == before + 1
    # at least: a thread joined may stay listed a moment while the next call's run
    assert _most_threads(module, x, "3") >= before + 3


def test_few_points_take_one_thread_and_bad_values_one(
    modules: dict[str, ModuleType],
) -> None:
    module = modules["rosen_lines"]
    x = _arguments("rosen_lines", "gradient", THREAD_POINTS + 5)[0]
    one = _call(module, "gradient", [x], "1")
    for threads in ("8", "0", "-3", "many", ""):
        assert _bits(_call(module, "gradient", [x], threads)) == _bits(one)


def test_the_runtime_splits_as_documented() -> None:
    """The C runtime's constants are those the Python side documents and tests."""
    from importlib import resources

    from difgen.targets.c import points

    text = resources.files("difgen.templates").joinpath("c", "points.c").read_text()
    assert f"#define DG_THREAD_POINTS {THREAD_POINTS}\n" in text
    assert f"#define DG_MAX_THREADS {points.MAX_THREADS}\n" in text
