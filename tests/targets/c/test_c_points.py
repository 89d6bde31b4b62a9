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

import functools
import shutil
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from test_c_target import _outcome, _same, _same_outcome

import difgen
import scenarios
from conftest import SUPPORT, import_file
from difgen.operators import OPERATORS, seed_shape
from scenario_cases import operators_for

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
    shutil.copy(SUPPORT / "scenarios.py", directory)
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


def _rows_are_one_point_calls(
    compiled: ModuleType,
    op: str,
    counts: tuple[int, ...],
    arguments: Callable[..., tuple[list[Any], list[bool]]],
) -> None:
    """``<op>_points`` at k points (each count, regular and special values) is the
    stack of the compiled one-point operator's results, bit for bit."""
    for k in counts:
        for special in (False, True):
            args, per_point = arguments(k=k, special=special)
            with np.errstate(all="ignore"):
                got = getattr(compiled, f"{op}_points")(*args)
                rows = [
                    getattr(compiled, op)(*_at(args, per_point, i)) for i in range(k)
                ]
            _same(got, _stacked(rows, got))


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
        _rows_are_one_point_calls(
            compiled,
            op,
            COUNTS,
            functools.partial(_arguments, name, op, rng=rng),
        )


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
            assert _outcome(fast, *args, None, 1.0)[0] is TypeError  # out, one more
            _same_outcome(_outcome(fast, *args, 1.0), _outcome(slow, *args, 1.0))
            assert _outcome(fast, *args, bogus=1.0)[0] is TypeError


def test_loop_releases_the_gil(built: Built) -> None:
    """Threads computing many points at once give the results one thread gives
    (the loop runs without the GIL from GIL_FREE_POINTS points on)."""
    compiled = built.get("vs", compiled=True)
    X = np.random.default_rng(0).normal(size=(4, 20_000, 4))
    _threads_agree(compiled.gradient_points, [[x] for x in X])


def _threads_agree(fn: Callable[..., Any], calls: list[list[Any]]) -> None:
    """``fn`` on each argument list, one thread each at once, gives what it gives
    called alone."""
    expected = [fn(*args) for args in calls]
    got: list[Any] = [None] * len(calls)

    def work(i: int) -> None:
        got[i] = fn(*calls[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(got, expected):
        _same(a, b)


# ------------------------------------------------- operators compiled as C loops
LOOP_FUNCTIONS = '''
import numpy as np


def rosen(x, a, s):
    """Rosenbrock with shared weights and a per-point shift: C loops with no
    NumPy call, and a workspace over 32 KB (the heap buffer)."""
    return np.sum(a * (x[1:] - x[:-1] ** 2) ** 2 + (s - x[:-1]) ** 2)


def layer(x, W, b):
    """A product for NumPy's dot (BLAS) and an exp for NumPy's own loop."""
    return np.sum(np.tanh(W @ x + b) ** 2) + np.sum(np.exp(0.1 * x))


def peak(x, c):
    """A small graph the scalar emission refuses (a max over 24 elements)."""
    return np.max(x * x - c) + np.sum(np.sin(x) * c)
'''

# module: (function, input shape, contexts as (name, shape, per point), operators)
LOOP_CASES: dict[str, tuple[str, tuple[int, ...], list[Any], list[str]]] = {
    "lr": (
        "rosen",
        (2500,),
        [("a", (2499,), False), ("s", (), True)],
        ["gradient", "value_and_gradient", "hvp"],
    ),
    "ll": (
        "layer",
        (600,),
        [("W", (8, 600), False), ("b", (8,), True)],
        ["gradient", "value_and_gradient", "hvp"],
    ),
    "lp": ("peak", (24,), [("c", (), True)], ["gradient", "hvp"]),
}
CALLS_NUMPY = {"lr": False, "ll": True, "lp": False}
"""Whether the module's loop code calls NumPy (then its points loop keeps the GIL)."""

LOOP_COUNTS = (0, 1, 2, 65)
"""None, one, two, and past GIL_FREE_POINTS."""


def _loop_module_text(name: str) -> str:
    function, xs, contexts, ops = LOOP_CASES[name]
    ctx = ", ".join(
        f'{{ name = "{c}", shape = {list(s)}'
        + (", per_point = true" if p else "")
        + " }"
        for c, s, p in contexts
    )
    quoted = ", ".join(f'"{op}"' for op in ops)
    return (
        f'[[module]]\nname = "{name}"\nfunction = "loop_functions.py:{function}"\n'
        f'backend = "trace"\nemit = "c"\npoints = true\noperators = [{quoted}]\n'
        f"input = {{ shape = {list(xs)} }}\ncontexts = [{ctx}]\n"
    )


@pytest.fixture(scope="module")
def loops(tmp_path_factory: pytest.TempPathFactory) -> Built:
    directory = tmp_path_factory.mktemp("c_points_loops")
    (directory / "loop_functions.py").write_text(LOOP_FUNCTIONS)
    config = directory / "difgen.toml"
    modules = [_loop_module_text(name) for name in LOOP_CASES]
    config.write_text("\n".join(['[difgen]\noutput_dir = "out"\n', *modules]))
    built = Built.__new__(Built)
    built.directory = directory
    built.result = difgen.build(config, compile=True)
    built.modules = {}
    return built


def _loop_arguments(
    name: str, op: str, k: int, rng: np.random.Generator, special: bool
) -> tuple[list[Any], list[bool]]:
    """``<op>_points`` arguments at ``k`` points and which carry the points axis;
    with ``special``, row 0 is all NaN, row 1 all inf and other rows get NaN,
    infinities, signed zeros and huge values scattered."""
    _, xs, contexts, _ = LOOP_CASES[name]
    x = rng.uniform(-1.0, 1.0, (k, *xs))
    if special and k:
        x[0] = np.nan
        x[1:2] = np.inf
        where = rng.random(x.shape) < 0.05
        where[:2] = False
        x[where] = rng.choice(SPECIAL, size=int(where.sum()))
    args: list[Any] = [x]
    per_point = [True]
    for s in OPERATORS[op].seeds:
        args.append(rng.normal(size=(k, *seed_shape(s, xs, (), 1))))
        per_point.append(True)
    for _, shape, flag in contexts:
        value = rng.uniform(0.5, 1.5, ((k,) if flag else ()) + tuple(shape))
        args.append(value if value.ndim else float(value))
        per_point.append(flag)
    return args, per_point


def _functions(source: str) -> dict[str, str]:
    """The C file's operator functions by name (the text up to the next one)."""
    parts = source.split("static PyObject *\ndg_op_")[1:]
    return {part.split("(", 1)[0]: part for part in parts}


@pytest.mark.parametrize("name", list(LOOP_CASES))
def test_loop_operators_have_points_in_c(loops: Built, name: str) -> None:
    """Every points variant of an operator compiled as C loops is compiled too,
    the build notes no NumPy fallback, and the loop releases the GIL exactly
    when the loop code calls no NumPy."""
    compiled = loops.get(name, compiled=True)
    built = next(m for m in loops.result.modules if m.name == name)
    assert not [n for n in built.notes if "kept in Python" in n], built.notes
    source = (loops.directory / "out" / f"{name}__c.c").read_text()
    functions = _functions(source)
    for op in LOOP_CASES[name][3]:
        assert f"/* {op}: C loops over" in source
        points = getattr(compiled, f"{op}_points")
        assert type(points).__name__ == "builtin_function_or_method"
        releases = "PyEval_SaveThread" in functions[f"{op}_points"]
        assert releases is not CALLS_NUMPY[name], op
        assert (
            'dg_numpy_attr("' in functions[op] or "MatrixProduct" in functions[op]
        ) is (CALLS_NUMPY[name])


@pytest.mark.parametrize("name", list(LOOP_CASES))
def test_loop_rows_equal_the_one_point_operator_bit_for_bit(
    loops: Built, name: str
) -> None:
    """Row i is the compiled one-point operator at point i, bit for bit: the same
    loop code runs, NaN and inf rows included."""
    compiled = loops.get(name, compiled=True)
    rng = np.random.default_rng(11)
    for op in ["f", *LOOP_CASES[name][3]]:
        _rows_are_one_point_calls(
            compiled,
            op,
            LOOP_COUNTS,
            functools.partial(_loop_arguments, name, op, rng=rng),
        )


def _near_rows(a: Any, b: Any) -> None:
    """Row by row: NaN and inf where the NumPy variant has them, finite values
    within 1e-10 of the row's largest finite magnitude.

    Two roundings compose here: the loops against the one-point vector emission
    (docs/design.md: 1e-12 of the result's scale; ``ll``'s hvp measures 1.8e-12,
    a cancellation after libm's tanh where NumPy uses its own) and the batched
    NumPy variant against the one-point one (docs/points.md: ``rtol = 1e-10``)."""
    if isinstance(b, tuple):
        assert isinstance(a, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _near_rows(x, y)
        return
    assert type(a) is np.ndarray and a.dtype == np.float64 and a.flags.c_contiguous
    assert a.shape == b.shape
    finite = np.isfinite(b)
    np.testing.assert_array_equal(a[~finite], b[~finite])
    for row_a, row_b, ok in zip(a, b, finite):
        scale = float(np.max(np.abs(row_b[ok]), initial=0.0))
        np.testing.assert_allclose(row_a[ok], row_b[ok], rtol=0, atol=1e-10 * scale)


@pytest.mark.parametrize("name", list(LOOP_CASES))
def test_loop_points_equal_the_numpy_variant(loops: Built, name: str) -> None:
    """The compiled variants agree with the module's vectorized NumPy fallback
    to the loops' tolerance, NaN and inf rows included."""
    compiled, python = loops.get(name, True), loops.get(name, False)
    rng = np.random.default_rng(5)
    for op in ["f", *LOOP_CASES[name][3]]:
        for k in LOOP_COUNTS:
            for special in (False, True):
                args, _ = _loop_arguments(name, op, k, rng, special)
                with np.errstate(all="ignore"):
                    got = getattr(compiled, f"{op}_points")(*args)
                    expected = getattr(python, f"{op}_points")(*args)
                _near_rows(got, expected)


@pytest.mark.parametrize("name", ["lr", "ll"])
def test_loop_points_same_argument_checks(loops: Built, name: str) -> None:
    """Conversions and refusals (wrong trailing shape, wrong number of points,
    complex, strings...) are the Python variant's own, with its messages."""
    compiled, python = loops.get(name, True), loops.get(name, False)
    rng = np.random.default_rng(9)
    for op in ("gradient", "hvp"):
        fast, slow = getattr(compiled, f"{op}_points"), getattr(python, f"{op}_points")
        for k in (0, 2):
            args, per_point = _loop_arguments(name, op, k, rng, special=False)
            for variant in _variants(args, per_point):
                got, expected = _outcome(fast, *variant), _outcome(slow, *variant)
                assert got[0] == expected[0], (op, k, got, expected)
                if got[0] == "ok":
                    _near_rows(got[1], expected[1])
                else:
                    assert got[1] == expected[1]
            assert _outcome(fast, *args[:-1])[0] is TypeError  # a missing argument


@pytest.mark.parametrize("name", ["lr", "ll"])
def test_loop_points_in_threads(loops: Built, name: str) -> None:
    """Threads calling one points variant at once (the loop without the GIL and
    the kept heap workspace busy in ``lr``; NumPy calls holding it in ``ll``)
    give the results one thread gives."""
    compiled = loops.get(name, compiled=True)
    rng = np.random.default_rng(1)
    calls = [_loop_arguments(name, "gradient", 300, rng, False)[0] for _ in range(4)]
    _threads_agree(compiled.gradient_points, calls)
