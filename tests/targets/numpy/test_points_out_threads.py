"""``out=`` on every ``<op>_points`` and the NumPy emission's thread pool.

Every points variant takes ``out``: one array for one result, a tuple of one per
result, each a writeable C-contiguous float64 array of its result's shape that
shares no memory with an argument or another ``out``; the results are written
into it and it is returned (the same objects, their data where they were). Many
points run their blocks over ``DIFGEN_THREADS`` threads (``_run_blocks``): the
blocks are those of one thread, so the results must be those of one thread BIT
FOR BIT, NaN and inf included. Modules: a Rosenbrock printed as vector code (the
batched graph), a straight-line tanh layer on columns with a per-point and a
shared context, and a logistic loss whose ``x`` every point shares.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import difgen
from conftest import import_file
from difgen.errors import ConfigError
from difgen.operators import OPERATORS

FUNCTIONS = """
import numpy as np


def rosenbrock(x):
    return np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def layer(W, a, s):
    return np.sum(np.tanh(W @ a)) * s


def logistic(theta, X):
    return np.log1p(np.exp(-(X @ theta)))
"""

CONFIG = """
[difgen]
output_dir = "out"

[[module]]
name = "rosen_vector"
function = "functions.py:rosenbrock"
backend = "trace"
emit = "vector"
operators = ["gradient", "value_and_gradient", "hvp", "jacobian"]
input = { shape = [10] }
points = true

[[module]]
name = "layer_lines"
function = "functions.py:layer"
backend = "sympy"
operators = ["gradient", "value_and_gradient", "hvp"]
input = { shape = [2, 3] }
contexts = [
    { name = "a", shape = [3], per_point = true },
    { name = "s", shape = [] },
]
points = true

[[module]]
name = "logistic_shared"
function = "functions.py:logistic"
backend = "trace"
operators = ["gradient", "hvp"]
input = { shape = [3], per_point = false }
contexts = [{ name = "X", shape = [3], per_point = true }]
points = true
"""

NAMES = ("rosen_vector", "layer_lines", "logistic_shared")


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModuleType]:
    directory = tmp_path_factory.mktemp("points_out_threads")
    (directory / "functions.py").write_text(FUNCTIONS)
    config = directory / "difgen.toml"
    config.write_text(CONFIG)
    difgen.build(config)
    return {n: import_file(Path(directory, "out", f"{n}.py")) for n in NAMES}


def _operators(module: ModuleType) -> list[str]:
    return [n.removesuffix("_points") for n in module.__all__ if n.endswith("_points")]


SPECIAL = [np.nan, np.inf, -np.inf, -0.0, 1e300]


def _arguments(name: str, op: str, k: int) -> list[Any]:
    """Arguments of ``op_points`` at ``k`` points, NaN and inf in the first rows."""
    rng = np.random.default_rng(k)
    seeds = OPERATORS[op].seeds
    if name == "logistic_shared":
        X = rng.normal(size=(k, 3))
        X[:5, 0] = SPECIAL[:k]
        return [rng.normal(size=3), *(rng.normal(size=(k, 3)) for _ in seeds), X]
    shape = (10,) if name == "rosen_vector" else (2, 3)
    x = rng.normal(size=(k, *shape))
    x.reshape(k, int(np.prod(shape)))[: min(k, 5), 0] = SPECIAL[: min(k, 5)]
    args = [x, *(rng.normal(size=(k, *shape)) for _ in seeds)]
    if name == "layer_lines":
        args += [rng.normal(size=(k, 3)), 0.75]
    return args


def _as_tuple(result: Any) -> tuple[np.ndarray, ...]:
    return result if isinstance(result, tuple) else (result,)


def _bits(result: Any) -> list[tuple[tuple[int, ...], bytes]]:
    return [(r.shape, np.ascontiguousarray(r).tobytes()) for r in _as_tuple(result)]


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Set ``DIFGEN_THREADS`` for the test (restored after)."""

    def set_threads(value: str | None) -> None:
        if value is None:
            monkeypatch.delenv("DIFGEN_THREADS", raising=False)
        else:
            monkeypatch.setenv("DIFGEN_THREADS", value)

    yield set_threads


COUNTS = (0, 1, 2, 1001, 4097)


@pytest.mark.parametrize("name", NAMES)
def test_out_is_filled_in_place_for_every_points_operator(
    modules: dict[str, ModuleType], name: str
) -> None:
    module = modules[name]
    ops = _operators(module)
    assert "f" in ops and len(ops) >= 3
    for op in ops:
        variant = getattr(module, f"{op}_points")
        for k in COUNTS:
            args = _arguments(name, op, k)
            with np.errstate(all="ignore"):
                fresh = _as_tuple(variant(*args))
                outs = tuple(np.full_like(r, -7.0) for r in fresh)
                pointers = [o.ctypes.data for o in outs]
                given = outs[0] if len(outs) == 1 else outs
                got = variant(*args, out=given)
                again = variant(*args, given)  # out by position too
            assert got is given and again is given, (op, k)
            assert [o.ctypes.data for o in outs] == pointers
            for o, r in zip(outs, fresh):
                assert np.array_equal(o, r, equal_nan=True), (op, k)


def _errors(
    module: ModuleType, name: str, op: str, args: list[Any]
) -> list[tuple[object, str]]:
    """(out, what the error says) for wrong ``out`` of ``op_points(*args)``."""
    with np.errstate(all="ignore"):
        fresh = _as_tuple(getattr(module, f"{op}_points")(*args))
    said = f"{op}_points: out"
    first = f"{said}[0]" if len(fresh) > 1 else said

    def like(first_out: object) -> object:
        return first_out if len(fresh) == 1 else (first_out, *fresh[1:])

    shape = fresh[0].shape
    frozen = np.empty(shape)
    frozen.flags.writeable = False
    per_point = args[-1] if name == "logistic_shared" else args[0]
    cases: list[tuple[object, str]] = [
        (
            like(np.empty((8, *shape[1:]))),
            f"{first}: expected a float64 array of shape",
        ),
        (like(np.empty(shape, np.float32)), f"{first}: expected a float64 array"),
        (like(np.empty((*shape, 2))[..., 0]), f"{first}: expected a C-contiguous"),
        (like(frozen), f"{first}: the array is read-only"),
        (like([[0.0]]), f"{first}: expected a float64 array"),
    ]
    if per_point.shape == shape:
        cases.append((like(per_point), f"{first}: shares memory with the argument"))
    if len(fresh) > 1:
        cases += [
            (fresh[0], f"{said}: expected a tuple of {len(fresh)} arrays"),
            (fresh[:1], f"{said}: expected a tuple of {len(fresh)} arrays"),
        ]
        if fresh[0].shape == fresh[1].shape:
            cases.append(
                ((fresh[0], fresh[0]), f"{said}[1]: shares memory with {said}[0]")
            )
    return cases


@pytest.mark.parametrize("name", NAMES)
def test_wrong_out_is_refused_naming_the_argument(
    modules: dict[str, ModuleType], name: str
) -> None:
    module = modules[name]
    for op in _operators(module):
        args = _arguments(name, op, 7)
        for out, message in _errors(module, name, op, args):
            with (
                pytest.raises((TypeError, ValueError), match=f"^{re.escape(message)}"),
                np.errstate(all="ignore"),
            ):
                getattr(module, f"{op}_points")(*args, out=out)


def test_out_aliasing_any_argument_is_refused(modules: dict[str, ModuleType]) -> None:
    module = modules["layer_lines"]
    x, v, a, s = _arguments("layer_lines", "hvp", 9)
    base = np.zeros((9, 2, 3))
    for alias, argument in ((x, "x"), (v, "v")):
        with pytest.raises(
            ValueError, match=f"out: shares memory with the argument {argument}"
        ):
            module.hvp_points(x, v, a, s, out=alias)
    inside = np.zeros((9, 2, 3))
    with pytest.raises(ValueError, match="shares memory with the argument x"):
        module.hvp_points(inside, v, a, s, out=inside[:])
    assert module.hvp_points(x, v, a, s, out=base) is base


@pytest.mark.parametrize("name", NAMES)
def test_threads_give_one_threads_bits(
    modules: dict[str, ModuleType],
    name: str,
    threads: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """1, 2, 3 and 7 threads at 0, 1, 2, 1001 and 4097 points and more blocks
    than threads: one thread's bits, with and without ``out``; a thread per
    point allowed (``_THREAD_POINTS`` 1) so that small counts split too."""
    module = modules[name]
    monkeypatch.setattr(module, "_THREAD_POINTS", 1)
    for op in _operators(module):
        variant = getattr(module, f"{op}_points")
        for k in (*COUNTS, 40_003):
            args = _arguments(name, op, k)
            with np.errstate(all="ignore"):
                threads("1")
                one = variant(*args)
                for count in ("2", "3", "7"):
                    threads(count)
                    assert _bits(variant(*args)) == _bits(one), (op, k, count)
                    outs = tuple(np.empty_like(r) for r in _as_tuple(one))
                    variant(*args, out=outs[0] if len(outs) == 1 else outs)
                    assert _bits(outs) == _bits(one), (op, k, count)


def test_many_points_run_on_the_pool(
    modules: dict[str, ModuleType], threads: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks run on other threads when there are threads and blocks to split
    over, and only in this one when ``DIFGEN_THREADS`` says one."""
    module = modules["rosen_vector"]
    monkeypatch.setattr(module, "_THREAD_POINTS", 1)
    seen: set[int] = set()
    block = module._gradient_points_block

    def spy(*args: Any) -> Any:
        seen.add(threading.get_ident())
        return block(*args)

    monkeypatch.setattr(module, "_gradient_points_block", spy)
    x = np.random.default_rng(0).normal(size=(20_000, 10))
    threads("1")
    module.gradient_points(x)
    assert seen == {threading.get_ident()}
    threads("3")
    module.gradient_points(x)
    # this thread runs the first run of blocks, the pool the two others (one of
    # its threads may take both when the other is slow to wake)
    assert len(seen) in (2, 3)
    assert module._POOL[0][0] == os.getpid()


def test_a_shut_down_pool_runs_the_blocks_here(
    modules: dict[str, ModuleType], threads: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the interpreter's exit the pool takes no more work (``submit`` raises
    RuntimeError): the blocks run in the calling thread, with the same bits."""
    module = modules["rosen_vector"]
    monkeypatch.setattr(module, "_THREAD_POINTS", 1)
    x = np.random.default_rng(1).normal(size=(9_001, 10))
    threads("1")
    one = module.gradient_points(x)
    closed = module.ThreadPoolExecutor(1)
    closed.shutdown()
    monkeypatch.setattr(module, "_POOL", [(os.getpid(), closed)])
    threads("3")
    assert _bits(module.gradient_points(x)) == _bits(one)
    assert module._POOL[0][1] is closed


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, "cpus"),
        ("", "cpus"),
        ("1", 1),
        ("2", 2),
        ("3", 3),
        ("7", 7),
        ("0", 1),
        ("-3", 1),
        ("many", 1),
        (" 4", 4),
        ("+2", 2),
        ("3x", 3),
        ("99999999999999999999", 16),
        ("64", 16),
    ],
)
def test_difgen_threads_is_read_as_the_extension_reads_it(
    modules: dict[str, ModuleType], threads: Any, value: str | None, expected: Any
) -> None:
    """``strtol``'s reading (blanks, a sign, digits), the online processors when
    unset or empty, at most 16, at least one; at most one thread per block and
    per ``_THREAD_POINTS`` points."""
    module = modules["rosen_vector"]
    threads(value)
    want = min(16, os.cpu_count() or 1) if expected == "cpus" else expected
    many = 10**9
    assert module._point_threads(many, many) == want
    assert module._point_threads(many, 2) == min(want, 2)
    assert module._point_threads(2 * module._THREAD_POINTS - 1, many) == 1
    assert module._point_threads(0, 1) == 1


def test_small_inputs_are_not_split(
    modules: dict[str, ModuleType], threads: Any
) -> None:
    """With the built threshold, fewer than two threads' worth of points stay in
    this thread (its value stated in the module)."""
    module = modules["rosen_vector"]
    threads("8")
    limit = module._THREAD_POINTS
    assert limit >= 1024
    assert module._point_threads(2 * limit - 1, 10**6) == 1
    assert module._point_threads(2 * limit, 10**6) == 2


def test_the_names_of_out_and_the_pool_cannot_name_a_context(tmp_path: Path) -> None:
    """``out`` is every points variant's parameter (hvp's one-point operator has
    none), ``rows`` their local function, the pool's helpers module names."""
    from difgen.config import load_config

    def load(name: str, points: bool) -> None:
        path = tmp_path / "difgen.toml"
        path.write_text(
            '[[module]]\nname = "m"\nfunction = "f.py:f"\noperators = ["hvp"]\n'
            f'input = {{ shape = [3] }}\ncontexts = [{{ name = "{name}", shape = [3] }}]\n'
            + ("points = true\n" if points else "")
        )
        load_config(path)

    load("out", points=False)
    for name in (
        "out",
        "rows",
        "_run_blocks",
        "_point_threads",
        "_points_out",
        "_POOL",
    ):
        with pytest.raises(ConfigError, match="uses itself"):
            load(name, points=True)
