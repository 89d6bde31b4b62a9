"""``out=`` on the compiled ``<op>_points`` (``emit = "c"``, ``points = true``).

The C loop writes its rows into ``out`` when it is given: one array for one
result, a tuple of one per result, checked by the module's ``_points_out``
exactly as the Python variant checks it (the same errors, word for word, against
the module's Python fallback), returned as given (the same objects, their data
where they were), with the bits of the call without ``out`` on any number of
threads. Modules: a straight-line Rosenbrock (sympy), a Rosenbrock compiled as
loops with a workspace (trace), and a logistic loss sharing ``x`` with int64
labels per point (the module's ``_as_points_c`` path).
"""

from __future__ import annotations

import inspect
import os
import shutil
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
operators = ["gradient", "value_and_gradient"]
input = { shape = [3], per_point = false }
contexts = [
    { name = "X", shape = [3], per_point = true },
    { name = "y", shape = [], dtype = "int64", per_point = true },
]
points = true
"""

NAMES = ("rosen_lines", "rosen_loops", "logistic")


@pytest.fixture(scope="module")
def modules(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[ModuleType, ModuleType]]:
    """(compiled, its Python fallback) per module."""
    directory = tmp_path_factory.mktemp("c_points_out")
    (directory / "functions.py").write_text(FUNCTIONS)
    shutil.copy(SUPPORT / "int_context_functions.py", directory)
    config = directory / "difgen.toml"
    config.write_text(CONFIG)
    difgen.build(config, compile=True)
    fallback = directory / "python"
    fallback.mkdir()
    loaded = {}
    for name in NAMES:
        shutil.copy(directory / "out" / f"{name}.py", fallback)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            compiled = import_file(Path(directory, "out", f"{name}.py"))
            python = import_file(fallback / f"{name}.py")
        assert compiled.COMPILED, compiled.C_FALLBACK_REASON
        assert not python.COMPILED
        loaded[name] = (compiled, python)
    return loaded


def _operators(module: ModuleType) -> list[str]:
    return [n.removesuffix("_points") for n in module.__all__ if n.endswith("_points")]


def _arguments(name: str, op: str, k: int) -> list[Any]:
    rng = np.random.default_rng(k)
    if name == "logistic":
        X = rng.normal(size=(k, 3))
        X[:3, 0] = [np.nan, np.inf, -np.inf][:k]
        return [rng.normal(size=3), X, rng.integers(0, 2, size=k)]
    n = 4 if name == "rosen_lines" else 300
    x = rng.normal(size=(k, n))
    x[:4, 0] = [np.nan, np.inf, -np.inf, -0.0][:k]
    return [x, *([rng.normal(size=(k, n))] if op == "hvp" else [])]


def _as_tuple(result: Any) -> tuple[np.ndarray, ...]:
    return result if isinstance(result, tuple) else (result,)


def _bits(result: Any) -> list[bytes]:
    return [np.ascontiguousarray(r).tobytes() for r in _as_tuple(result)]


def _call(variant: Any, args: list[Any], threads: str, **kwargs: Any) -> Any:
    old = os.environ.get("DIFGEN_THREADS")
    os.environ["DIFGEN_THREADS"] = threads
    try:
        with np.errstate(all="ignore"):
            return variant(*args, **kwargs)
    finally:
        if old is None:
            del os.environ["DIFGEN_THREADS"]
        else:
            os.environ["DIFGEN_THREADS"] = old


@pytest.mark.parametrize("name", NAMES)
def test_compiled_points_fill_out_in_place(
    modules: dict[str, tuple[ModuleType, ModuleType]], name: str
) -> None:
    compiled, _ = modules[name]
    assert any(
        type(getattr(compiled, f"{op}_points")).__name__ == "builtin_function_or_method"
        for op in _operators(compiled)
    )
    for op in _operators(compiled):
        variant = getattr(compiled, f"{op}_points")
        assert inspect.signature(variant).parameters["out"].default is None, op
        for k in (0, 1, 2, 1001):
            args = _arguments(name, op, k)
            fresh = _as_tuple(_call(variant, args, "1"))
            outs = tuple(np.full_like(r, -7.0) for r in fresh)
            pointers = [o.ctypes.data for o in outs]
            given = outs[0] if len(outs) == 1 else outs
            got = _as_tuple(_call(variant, args, "1", out=given))
            assert all(g is o for g, o in zip(got, outs)), (op, k)
            assert [o.ctypes.data for o in outs] == pointers
            assert _bits(outs) == _bits(fresh), (op, k)
            got = _as_tuple(_call(variant, [*args, given], "1"))  # by position
            assert all(g is o for g, o in zip(got, outs)), (op, k)


def _wrong(fresh: tuple[np.ndarray, ...], args: list[Any]) -> list[object]:
    """Wrong ``out`` values for a call returning ``fresh``."""

    def like(first: object) -> object:
        return first if len(fresh) == 1 else (first, *fresh[1:])

    shape = fresh[0].shape
    frozen = np.empty(shape)
    frozen.flags.writeable = False
    wrong: list[object] = [
        like(np.empty((shape[0] + 1, *shape[1:]))),
        like(np.empty(shape, np.float32)),
        like(np.empty((*shape, 2))[..., 0]),
        like(frozen),
        like(3.0),
    ]
    wrong += [like(a) for a in args if isinstance(a, np.ndarray) and a.shape == shape]
    if len(fresh) > 1:
        wrong += [fresh[0], fresh[:1], (fresh[1], fresh[1])]
    return wrong


@pytest.mark.parametrize("name", NAMES)
def test_compiled_points_refuse_out_as_the_python_variant(
    modules: dict[str, tuple[ModuleType, ModuleType]], name: str
) -> None:
    compiled, python = modules[name]
    for op in _operators(compiled):
        args = _arguments(name, op, 5)
        fresh = _as_tuple(_call(getattr(python, f"{op}_points"), args, "1"))
        for out in _wrong(fresh, args):
            errors = []
            for module in (compiled, python):
                with pytest.raises((TypeError, ValueError)) as caught:
                    _call(getattr(module, f"{op}_points"), args, "1", out=out)
                errors.append((caught.type, str(caught.value)))
            assert errors[0] == errors[1], (op, out)
            assert errors[0][1].startswith(f"{op}_points: out"), errors[0]


@pytest.mark.parametrize("name", NAMES)
def test_compiled_points_into_out_on_threads(
    modules: dict[str, tuple[ModuleType, ModuleType]], name: str
) -> None:
    """1, 2, 3 and 7 threads writing into ``out``: one thread's bits."""
    compiled, _ = modules[name]
    k = 3 * THREAD_POINTS + 7 if name != "rosen_loops" else 2 * THREAD_POINTS + 1
    for op in _operators(compiled):
        variant = getattr(compiled, f"{op}_points")
        args = _arguments(name, op, k)
        one = _call(variant, args, "1")
        for threads in ("1", "2", "3", "7"):
            outs = tuple(np.empty_like(r) for r in _as_tuple(one))
            _call(variant, args, threads, out=outs[0] if len(outs) == 1 else outs)
            assert _bits(outs) == _bits(one), (op, threads)
