"""Issue 20, item 6: ``<op>_points`` rows with NaN and inf differ from the loop of
the one-point operator (k = 300).

The contract (docs/points.md): row ``i`` of ``<op>_points(X)`` is ``<op>(X[i])``,
with NaN and inf in the same places (signs included) and the finite values to a
few ulps, for every operator with a points variant, on both backends and in every
emission: vector code, straight-line scalar code (the sympy backend, ``emit =
"scalar"``), compiled C and the C module's Python fallback.

The rows differed wherever the one-point operator is straight-line code: its
points variant was the operator's batched graph, another computation than the
SymPy expressions the one-point code prints, which puts NaN and inf elsewhere at
0, at the infinities and at overflowing points (forward mode's ``0 * inf`` in a
column the simplified expression no longer has, a product's ``prod(x) / x_i``
where SymPy keeps the product of the others). Such a variant now evaluates the
operator's own expressions on columns of points
(``difgen.targets.numpy.columns``).

The points hold NaN, +-inf, +-0, +-1e308, 1e154 (whose square overflows),
subnormals and negatives, in random places and numbers; seeds and per-point
contexts too. k = 300 is one block; two blocks and 7 points take the loop over
blocks.
"""

from __future__ import annotations

import inspect
import re
import shutil
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import points_rows_functions as prf
from compiled import BuiltConfig
from conftest import SUPPORT, import_file
from difgen.operators import OPERATORS

CONFIGS = [
    ("sympy", "auto", "auto"),
    ("trace", "forward", "vector"),
    ("trace", "reverse", "vector"),
    ("trace", "forward", "scalar"),
    ("trace", "reverse", "scalar"),
    ("trace", "forward", "c"),
    ("trace", "reverse", "c"),
]

SPECIAL = np.array(
    [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e308, -1e308, 1e154, 1e-310, 5e-324,
     -1.0, 1.0, 2.0]
)  # fmt: skip

RTOL = 1e-10
"""Finite entries of a row against the one-point operator's: NumPy's
transcendentals on columns against ``math``'s on floats, and the batched graph's
reductions against the one-point graph's, differ in the last bits, which a
derivative's cancellations magnify (docs/points.md holds rows to 1e-10)."""


def _name(function: str, backend: str, mode: str, emit: str) -> str:
    return f"{function}_{backend}_{mode}_{emit}"


def _module(function: str, spec: dict[str, Any], config: tuple[str, ...]) -> str:
    backend, mode, emit = config
    contexts = "".join(
        f'{{ name = "{n}", shape = {list(s)!r}'
        + (", per_point = true }, " if per_point else " }, ")
        for n, s, per_point in spec.get("contexts", [])
    )
    return (
        "[[module]]\n"
        f'name = "{_name(function, *config)}"\n'
        f'function = "points_rows_functions.py:{function}"\n'
        f"operators = {spec['operators']!r}\n".replace("'", '"')
        + f"input = {{ shape = {spec['shape']!r} }}\n"
        + (f"contexts = [{contexts.rstrip(', ')}]\n" if contexts else "")
        + f'backend = "{backend}"\nmode = "{mode}"\nemit = "{emit}"\n'
        "points = true\n"
    )


class Modules(BuiltConfig):
    """Every (function, configuration) module, built in one build (C compiled),
    and the Python fallback of each C module."""

    def __init__(self, directory: Path) -> None:
        shutil.copy(SUPPORT / "points_rows_functions.py", directory)
        parts = ['[difgen]\noutput_dir = "out"\n']
        parts += [
            _module(function, spec, config)
            for function, spec in prf.MODULES.items()
            for config in CONFIGS
        ]
        super().__init__(directory, "\n".join(parts))
        self._fallbacks: dict[str, ModuleType] = {}

    def fallback(self, name: str) -> ModuleType:
        """The C module alone in a directory: it runs its Python operators."""
        if name not in self._fallbacks:
            lone = self.directory / "python" / name
            lone.mkdir(parents=True)
            shutil.copy(self.directory / "out" / f"{name}.py", lone)
            with warnings.catch_warnings(record=True):
                warnings.simplefilter("always")
                module = import_file(lone / f"{name}.py")
            assert not module.COMPILED
            self._fallbacks[name] = module
        return self._fallbacks[name]


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> Modules:
    return Modules(tmp_path_factory.mktemp("points_rows"))


def hostile(rng: np.random.Generator, k: int, shape: tuple[int, ...]) -> np.ndarray:
    """k points of ``shape``: ordinary values in (-0.5, 3), each point with a
    random number of its entries replaced by special values."""
    points = rng.uniform(-0.5, 3.0, size=(k, *shape))
    flat = points.reshape(k, -1)
    n = flat.shape[1]
    for row in flat:
        m = int(rng.integers(0, n + 1))
        row[rng.choice(n, m, replace=False)] = rng.choice(SPECIAL, m)
    return points


def assert_same_rows(got: Any, want: Any, what: str) -> None:
    """NaN and inf (with their signs) in the same places, finite entries within
    :data:`RTOL` of each other."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    assert got.shape == want.shape, what
    nan = np.isnan(got) != np.isnan(want)
    assert not nan.any(), f"{what}: NaN differs at {np.argwhere(nan)[:5].tolist()}"
    infinite = np.isinf(got) | np.isinf(want)
    inf = infinite & (got != want)
    assert not inf.any(), f"{what}: inf differs at {np.argwhere(inf)[:5].tolist()}"
    finite = np.isfinite(got) & np.isfinite(want)
    scale = np.maximum(np.abs(got), np.abs(want))
    with np.errstate(invalid="ignore"):  # inf - inf where both are infinite
        bad = finite & (np.abs(got - want) > RTOL * scale)
    assert not bad.any(), f"{what}: values differ at {np.argwhere(bad)[:5].tolist()}"


def arguments(
    mod: ModuleType, op: str, spec: dict[str, Any], k: int, seed: int
) -> tuple[list[np.ndarray], list[list[Any]]]:
    """(arguments of ``op_points``, the one-point operator's at each point)."""
    rng = np.random.default_rng(seed)
    shape = tuple(spec["shape"])
    seeds = {
        "dx": shape,
        "v": shape,
        "dy": tuple(mod.OUTPUT_SHAPE),
    }
    stacked = [hostile(rng, k, shape)]
    per_point = [True]
    for name in OPERATORS[op].seeds:
        stacked.append(hostile(rng, k, seeds[name]))
        per_point.append(True)
    for _, cshape, point in spec.get("contexts", []):
        if point:
            stacked.append(hostile(rng, k, tuple(cshape)))
        else:
            stacked.append(np.float64(0.5) if not cshape else np.full(cshape, 0.5))
        per_point.append(point)
    rows = [[a[i] if p else a for a, p in zip(stacked, per_point)] for i in range(k)]
    return stacked, rows


CASES = [
    pytest.param(function, op, *config, id=f"{_name(function, *config)}-{op}")
    for function, spec in prf.MODULES.items()
    for config in CONFIGS
    for op in ["f", *spec["operators"]]
]


def _check(
    mod: ModuleType, function: str, op: str, k: int, seed: int, rows: Any = None
) -> None:
    """Rows ``rows`` (all by default) of ``op_points`` over k hostile points
    against the one-point operator, called on each point as a loop over the
    stacked arguments gives it (``X[i]``: a NumPy scalar for a scalar input)."""
    spec = prf.MODULES[function]
    stacked, per_row = arguments(mod, op, spec, k, seed)
    single, points = getattr(mod, op), getattr(mod, f"{op}_points")
    picked = list(range(k)) if rows is None else list(rows)
    with np.errstate(all="ignore"):
        got = points(*stacked)
        want = [single(*(a.copy() for a in per_row[i])) for i in picked]
    results = got if isinstance(got, tuple) else (got,)
    for j, result in enumerate(results):
        expected = [w[j] if isinstance(w, tuple) else w for w in want]
        assert_same_rows(
            np.asarray(result)[picked], np.array(expected), f"{op} result {j}"
        )


@pytest.mark.parametrize(("function", "op", "backend", "mode", "emit"), CASES)
def test_rows_are_the_one_point_operator(
    modules: Modules, function: str, op: str, backend: str, mode: str, emit: str
) -> None:
    """Every row of 300 hostile points is the one-point operator at that point."""
    mod = modules.get(_name(function, backend, mode, emit))
    if emit == "c":
        assert mod.COMPILED, mod.C_FALLBACK_REASON
    _check(mod, function, op, 300, seed=len(function) + len(op))


def block_of(mod: ModuleType, op: str) -> int:
    """The block size the NumPy points variant of ``op`` was built with."""
    source = inspect.getsource(getattr(mod, f"{op}_points"))
    found = re.search(r"_run_blocks\(rows, npoints, (\d+)\)", source)
    assert found is not None, source
    return int(found.group(1))


@pytest.mark.parametrize(("function", "op", "backend", "mode", "emit"), CASES)
def test_rows_over_several_blocks(
    modules: Modules, function: str, op: str, backend: str, mode: str, emit: str
) -> None:
    """Two blocks and 7 points (the loop over blocks) in the NumPy variant, a C
    module's Python fallback included: the rows at either side of each block's
    edge, the first and last, and 200 others are the one-point operator's."""
    name = _name(function, backend, mode, emit)
    mod = modules.fallback(name) if emit == "c" else modules.get(name)
    block = block_of(mod, op)
    k = 2 * block + 7
    edges = [i for b in (0, block, 2 * block) for i in range(b - 3, b + 3)]
    rng = np.random.default_rng(len(name))
    rows = sorted({i % k for i in edges} | {k - 1} | set(rng.choice(k, 200).tolist()))
    _check(mod, function, op, k, seed=7 * len(function) + len(op), rows=rows)
