"""Points variants in C (``emit = "c"`` with ``points = true``).

Each compiled ``<op>_points`` is one C loop running the one-point C operator's
statements at every point, so its rows must equal the compiled one-point operator
applied point by point BIT FOR BIT (NaN and inf included), and the module's
Python fallback (the vectorized NumPy variant) up to rounding (``rtol = 1e-10``,
as docs/points.md states). It must accept and refuse exactly the arguments the
Python variant accepts and refuses, with the same errors, for any number of points
(0 and 1 included). One config holds every case; it is built and compiled once.
"""

from __future__ import annotations

import shutil
import threading
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import difgen
import scenarios
from conftest import TESTS, import_file
from difgen.operators import OPERATORS, seed_shape
from test_c_target import _outcome, _same, _same_outcome
from test_scenarios import operators_for

# module name: (scenario, backend, per-point flags of its contexts)
CASES = {
    "ss": ("scalar_scalar", "sympy", ()),
    "sm": ("scalar_matrix", "trace", ()),
    "vs": ("vector_scalar", "sympy", ()),
    "mm": ("matrix_matrix", "trace", ()),
    "vsc": ("vector_scalar_ctx", "sympy", (True,)),
    "vvc_pp": ("vector_vector_ctx", "trace", (True, False)),
    "vvc_sp": ("vector_vector_ctx", "sympy", (False, True)),
    "vv_batch": ("vector_vector", "sympy", ()),
}
BATCH = {"vv_batch": 2}
"""Modules whose seeds carry a batch axis (``batch = 2``): ``(k, 2, ...)`` seeds."""

COUNTS = (0, 1, 5, 100)
"""Numbers of points: none, one, a few, and enough for the loop to release the GIL."""

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e300]


def _module_text(name: str) -> str:
    scenario, backend, flags = CASES[name]
    xs, ctx_shapes = scenarios.SCENARIOS[scenario]
    ops = ", ".join(f'"{op}"' for op in operators_for(scenario))
    ctx = ", ".join(
        f'{{ name = "c{i}", shape = {list(s)}'
        + (", per_point = true" if p else "")
        + " }"
        for i, (s, p) in enumerate(zip(ctx_shapes, flags))
    )
    return (
        f'[[module]]\nname = "{name}"\nfunction = "scenarios.py:{scenario}"\n'
        f'backend = "{backend}"\nemit = "c"\npoints = true\n'
        f"operators = [{ops}]\ninput = {{ shape = {list(xs)} }}\n"
        + (f"contexts = [{ctx}]\n" if ctx else "")
        + (f"batch = {BATCH[name]}\n" if name in BATCH else "")
    )


class Built:
    """The session's build: each module with its extension, and its fallback."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        config = directory / "difgen.toml"
        parts = ['[difgen]\noutput_dir = "out"\n', *map(_module_text, CASES)]
        config.write_text("\n".join(parts))
        self.result = difgen.build(config, compile=True)
        self.modules: dict[tuple[str, bool], ModuleType] = {}

    def get(self, name: str, compiled: bool) -> ModuleType:
        """The module with its extension, or alone in a directory (fallback)."""
        if (name, compiled) not in self.modules:
            path = self.directory / "out" / f"{name}.py"
            if not compiled:
                lone = self.directory / "python" / name
                lone.mkdir(parents=True)
                path = Path(shutil.copy(path, lone))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                module = import_file(path)
            assert module.COMPILED is compiled, module.C_FALLBACK_REASON
            self.modules[name, compiled] = module
        return self.modules[name, compiled]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    directory = tmp_path_factory.mktemp("c_points")
    shutil.copy(TESTS / "scenarios.py", directory)
    return Built(directory)


def _arguments(
    name: str, op: str, k: int, rng: np.random.Generator, special: bool
) -> tuple[list[Any], list[bool]]:
    """Arguments of ``<op>_points`` at ``k`` points (x, seeds, contexts in order)
    and which of them carry the points axis; with ``special``, NaN, inf, signed
    zeros and huge values are spread over ``x``."""
    scenario, _, flags = CASES[name]
    xs, ctx_shapes = scenarios.SCENARIOS[scenario]
    ys = np.shape(getattr(scenarios, scenario)(np.ones(xs), *map(np.ones, ctx_shapes)))
    x = rng.uniform(0.2, 1.0, (k, *xs))
    if special and x.size:
        where = rng.random(x.shape) < 0.4
        x[where] = rng.choice(SPECIAL, size=int(where.sum()))
    args: list[Any] = [x]
    per_point = [True]
    for s in OPERATORS[op].seeds if op != "f" else ():
        shape = seed_shape(s, xs, ys, BATCH.get(name, 1))
        args.append(rng.normal(size=(k, *shape)))
        per_point.append(True)
    for shape, flag in zip(ctx_shapes, flags):
        value = rng.uniform(-1.0, 1.0, ((k,) if flag else ()) + tuple(shape))
        args.append(value if value.ndim else float(value))
        per_point.append(flag)
    return args, per_point


def _at(args: list[Any], per_point: list[bool], i: int) -> list[Any]:
    """The one-point operator's arguments at point ``i``."""
    return [
        (float(a[i]) if np.ndim(a[i]) == 0 else a[i]) if p else a
        for a, p in zip(args, per_point)
    ]


def _stacked(results: list[Any], like: Any) -> Any:
    """One-point results stacked along a leading axis, shaped as ``like``."""
    if isinstance(like, tuple):
        return tuple(
            _stacked([r[j] for r in results], like[j]) for j in range(len(like))
        )
    return np.reshape(np.array(results, dtype=np.float64), np.shape(like))


def _public(module: ModuleType) -> list[str]:
    return [n[: -len("_points")] for n in module.__all__ if n.endswith("_points")]


@pytest.mark.parametrize("name", list(CASES))
def test_rows_equal_the_one_point_operator_bit_for_bit(built: Built, name: str) -> None:
    """Row i of every compiled points variant is the compiled one-point operator
    at point i, bit for bit, at regular points and at NaN/inf/zeros/huge ones."""
    compiled = built.get(name, compiled=True)
    rng = np.random.default_rng(len(name))
    for op in _public(compiled):
        assert type(getattr(compiled, f"{op}_points")).__name__ == (
            "builtin_function_or_method"
        )  # the extension's, not the fallback's
        for k in COUNTS:
            for special in (False, True):
                args, per_point = _arguments(name, op, k, rng, special)
                with np.errstate(all="ignore"):
                    got = getattr(compiled, f"{op}_points")(*args)
                    rows = [
                        getattr(compiled, op)(*_at(args, per_point, i))
                        for i in range(k)
                    ]
                _same(got, _stacked(rows, got))


@pytest.mark.parametrize("name", list(CASES))
def test_equal_the_numpy_points_variant(built: Built, name: str) -> None:
    """The compiled variants agree with the module's Python fallback (vectorized
    NumPy) up to rounding, with the same shapes and result types."""
    compiled, python = built.get(name, True), built.get(name, False)
    rng = np.random.default_rng(7)
    for op in _public(compiled):
        for k in COUNTS:
            args, _ = _arguments(name, op, k, rng, special=False)
            got = getattr(compiled, f"{op}_points")(*args)
            expected = getattr(python, f"{op}_points")(*args)
            pairs = zip(got, expected) if isinstance(got, tuple) else [(got, expected)]
            assert isinstance(got, tuple) == isinstance(expected, tuple)
            for a, b in pairs:
                assert type(a) is np.ndarray and a.dtype == np.float64
                assert a.shape == b.shape and a.flags.c_contiguous
                np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def _variants(args: list[Any], per_point: list[bool]) -> list[list[Any]]:
    """The arguments, then each one changed to something the checks must convert
    or refuse: a list, integers, a non-contiguous or Fortran-ordered or
    byte-swapped copy, a wrong number of points, a wrong trailing shape, complex
    values, a string, None, a bare scalar."""
    out = [args]
    for j, a in enumerate(args):
        array = np.asarray(a)
        changes: list[Any] = [
            array.tolist(),
            np.round(array * 10).astype(np.int64),
            array.astype(">f8"),
            np.asfortranarray(array),
            np.repeat(array, 2, axis=-1)[..., ::2] if array.ndim else array,
            array + 0j,
            "x",
            None,
            1.5,
        ]
        if array.ndim:
            changes += [array[..., :-1], array[None], array.reshape(-1)]
        if per_point[j]:
            changes += [array[:-1] if len(array) else np.zeros((1, *array.shape[1:]))]
        out += ([*args[:j], change, *args[j + 1 :]] for change in changes)
    return out


@pytest.mark.parametrize("name", ["ss", "vvc_pp", "vvc_sp", "mm"])
def test_same_argument_checks(built: Built, name: str) -> None:
    """Conversions and refusals are the Python variant's own, with its messages;
    keyword calls and wrong calls behave as the Python function's."""
    compiled, python = built.get(name, True), built.get(name, False)
    rng = np.random.default_rng(3)
    for op in _public(compiled):
        fast, slow = getattr(compiled, f"{op}_points"), getattr(python, f"{op}_points")
        for k in (0, 1, 4):
            args, per_point = _arguments(name, op, k, rng, special=False)
            for variant in _variants(args, per_point):
                got, expected = _outcome(fast, *variant), _outcome(slow, *variant)
                assert got[0] == expected[0], (op, k, variant, got, expected)
                if got[0] != "ok":
                    assert got[1] == expected[1]
            names = list(slow.__code__.co_varnames[: slow.__code__.co_argcount])
            keywords = dict(zip(names, args))
            _same_outcome(_outcome(fast, **keywords), _outcome(fast, *args))
            _same_outcome(
                _outcome(fast, *args[:-1]), _outcome(slow, *args[:-1])
            )  # a missing argument
            assert _outcome(fast, *args, 1.0)[0] is TypeError  # one too many
            assert _outcome(fast, *args, bogus=1.0)[0] is TypeError


def test_loop_releases_the_gil(built: Built) -> None:
    """Threads computing many points at once give the results one thread gives
    (the loop runs without the GIL from GIL_FREE_POINTS points on)."""
    compiled = built.get("vs", compiled=True)
    X = np.random.default_rng(0).normal(size=(4, 20_000, 4))
    expected = [compiled.gradient_points(x) for x in X]
    got: list[Any] = [None] * len(X)

    def work(i: int) -> None:
        got[i] = compiled.gradient_points(X[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(X))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(got, expected):
        _same(a, b)
