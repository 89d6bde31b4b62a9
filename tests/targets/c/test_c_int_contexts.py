"""``emit = "c"`` with int64 contexts that the operator only casts to floats
(labels, counts): the C loops read them as doubles (difgen/targets/c/ints.py), so
a per-example gradient with int labels runs entirely in C, equal to
``jax.vmap(jax.grad(f), in_axes=(None, 0, 0))`` and to the NumPy fallback, with
the Python operators' argument checks. An int64 label used as an index
(``logits[y]``) runs in C too (difgen/targets/c/indexed.py)."""

from __future__ import annotations

import shutil
import types
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import difgen
import int_context_functions
from conftest import SUPPORT, import_file

SOURCE = SUPPORT / "int_context_functions.py"
TOLERANCE = 1e-12

CONFIG = """
[[module]]
name = "{name}"
function = "int_context_functions.py:{function}"
backend = "trace"
emit = "c"
operators = {operators}
input = {{ shape = [{p}], per_point = false }}
contexts = [{contexts}]
points = true
"""
MODULES = {
    "logistic": (
        "logistic",
        ["gradient", "value_and_gradient", "hvp"],
        3,
        (
            '{ name = "X", shape = [3], per_point = true }, '
            '{ name = "y", shape = [], dtype = "int64", per_point = true }'
        ),
    ),
    "mlp": (
        "mlp",
        ["gradient"],
        21,
        (
            '{ name = "X", shape = [3], per_point = true }, '
            '{ name = "t", shape = [], dtype = "int64", per_point = true }'
        ),
    ),
    "poisson": (
        "poisson",
        ["gradient", "hvp"],
        3,
        (
            '{ name = "X", shape = [4, 3], per_point = true }, '
            '{ name = "counts", shape = [4], dtype = "int64", per_point = true }, '
            '{ name = "n", shape = [], dtype = "int64" }'
        ),
    ),
    "cross_entropy": (
        "cross_entropy",
        ["gradient"],
        12,
        (
            '{ name = "X", shape = [4], per_point = true }, '
            '{ name = "y", shape = [], dtype = "int64", per_point = true }'
        ),
    ),
}


class Built:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        text = '[difgen]\noutput_dir = "out"\n' + "".join(
            CONFIG.format(
                name=name,
                function=function,
                operators="[" + ", ".join(f'"{o}"' for o in ops) + "]",
                p=p,
                contexts=contexts,
            )
            for name, (function, ops, p, contexts) in MODULES.items()
        )
        shutil.copy(SOURCE, directory / SOURCE.name)
        config = directory / "difgen.toml"
        config.write_text(text)
        difgen.build(config, compile=True)
        self.modules: dict[tuple[str, bool], ModuleType] = {}

    def get(self, module: str, compiled: bool = True) -> ModuleType:
        if (module, compiled) not in self.modules:
            path = self.directory / "out" / f"{module}.py"
            if not compiled:
                lone = self.directory / "python" / module
                lone.mkdir(parents=True)
                path = Path(shutil.copy(path, lone))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                loaded = import_file(path)
            assert loaded.COMPILED is compiled, loaded.C_FALLBACK_REASON
            self.modules[module, compiled] = loaded
        return self.modules[module, compiled]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return Built(tmp_path_factory.mktemp("c_int_contexts"))


def _arguments(module: str, k: int, seed: int = 0) -> list[Any]:
    rng = np.random.default_rng(seed)
    p = MODULES[module][2]
    theta = rng.normal(size=p) * 0.5
    if module == "poisson":
        X = rng.normal(size=(k, 4, 3)) * 0.5
        return [theta, X, rng.integers(0, 6, (k, 4)), np.int64(7)]
    X = rng.normal(size=(k, 3 if module != "cross_entropy" else 4))
    labels = rng.integers(0, 2 if module != "cross_entropy" else 3, k)
    return [theta, X, labels]


def _under_jax(function: str) -> Any:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    fn = getattr(int_context_functions, function)
    return jax, types.FunctionType(fn.__code__, {**fn.__globals__, "np": jnp})


def _jax(module: str, operator: str, args: list[Any], v: Any = None) -> Any:
    jax, f = _under_jax(MODULES[module][0])
    axes = (None, 0, 0) + ((None,) * (len(args) - 3))
    if operator == "gradient":
        return jax.vmap(jax.grad(f), in_axes=axes)(*args)

    def hvp(s: Any, *d: Any) -> Any:
        return jax.jvp(jax.grad(lambda t: f(t, *d)), (args[0],), (s,))[1]

    return jax.vmap(hvp, in_axes=(0, 0, 0) + axes[3:])(v, *args[1:])


COMPILED = [(m, op) for m, (_, ops, _, _) in MODULES.items() for op in ops]


@pytest.mark.parametrize(("module", "operator"), COMPILED)
def test_int_contexts_are_compiled(built: Built, module: str, operator: str) -> None:
    loaded = built.get(module)
    assert loaded.PYTHON_OPERATORS == ()
    for name in (operator, f"{operator}_points"):
        assert type(getattr(loaded, name)).__name__ == "builtin_function_or_method"
    source = (built.directory / "out" / f"{module}__c.c").read_text()
    assert "dg_int_points(" in source


@pytest.mark.parametrize("module", ["logistic", "mlp", "poisson"])
@pytest.mark.parametrize("k", [0, 1, 100, 2000])
def test_gradient_points_equal_jax_vmap(built: Built, module: str, k: int) -> None:
    args = _arguments(module, k, seed=k)
    got = built.get(module).gradient_points(*args)
    want = _jax(module, "gradient", args)
    assert got.shape == (k, MODULES[module][2])
    np.testing.assert_allclose(got, want, rtol=TOLERANCE, atol=TOLERANCE)


@pytest.mark.parametrize("module", ["logistic", "poisson"])
def test_hvp_points_equal_jax_vmap(built: Built, module: str) -> None:
    args = _arguments(module, 300, seed=3)
    v = np.random.default_rng(4).normal(size=(300, MODULES[module][2]))
    theta, *data = args
    got = built.get(module).hvp_points(theta, v, *data)
    np.testing.assert_allclose(
        got, _jax(module, "hvp", args, v), rtol=TOLERANCE, atol=TOLERANCE
    )


@pytest.mark.parametrize(("module", "operator"), COMPILED)
def test_equal_the_numpy_fallback(built: Built, module: str, operator: str) -> None:
    args = _arguments(module, 64, seed=5)
    theta, *data = args
    v = np.random.default_rng(6).normal(size=(64, theta.size))
    results = []
    for compiled in (True, False):
        loaded = built.get(module, compiled)
        variant = getattr(loaded, f"{operator}_points")
        got = variant(theta, v, *data) if operator == "hvp" else variant(*args)
        results.append(got[1] if operator == "value_and_gradient" else got)
        one = getattr(loaded, operator)
        point = [a[3] if i in (1, 2) else a for i, a in enumerate(args)]
        if operator == "hvp":
            point = [point[0], v[3], *point[1:]]
        row = one(*point)
        row = row[1] if operator == "value_and_gradient" else row
        if compiled:  # the points loop runs the one-point operator's statements
            np.testing.assert_array_equal(row, results[-1][3])
        else:
            np.testing.assert_allclose(row, results[-1][3], rtol=1e-12)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-10, atol=1e-13)


def test_labels_beyond_two_to_the_53_round_as_numpy(built: Built) -> None:
    """int64 labels are cast as astype(np.float64) casts, in C as in NumPy."""
    theta, X, _ = _arguments("logistic", 3)
    y = np.array([2**53 + 1, -(2**62) - 3, 5], dtype=np.int64)
    compiled = built.get("logistic").gradient_points(theta, X, y)
    python = built.get("logistic", False).gradient_points(theta, X, y)
    np.testing.assert_array_equal(compiled, python)


@pytest.mark.parametrize("compiled", [True, False])
def test_same_refusals(built: Built, compiled: bool) -> None:
    loaded = built.get("logistic", compiled)
    theta, X, y = _arguments("logistic", 5)
    with pytest.raises(TypeError, match="gradient_points: y: expected int64 values"):
        loaded.gradient_points(theta, X, y.astype(float))
    with pytest.raises(TypeError, match="gradient: y: expected int64 values"):
        loaded.gradient(theta, X[0], 1.0)
    with pytest.raises(
        ValueError, match=r"gradient_points: y: has 3 points .*but X has 5"
    ):
        loaded.gradient_points(theta, X, y[:3])
    with pytest.raises(ValueError, match=r"gradient_points: y: expected shape \(k,\)"):
        loaded.gradient_points(theta, X, y[:, None])
    with pytest.raises(ValueError, match=r"gradient: y: expected shape \(\)"):
        loaded.gradient(theta, X[0], y[:2])
    # other integer types and Python ints are int64 data, as in Python
    want = loaded.gradient_points(theta, X, y)
    np.testing.assert_array_equal(
        loaded.gradient_points(theta, X, y.astype(np.int32)), want
    )
    np.testing.assert_array_equal(loaded.gradient_points(theta, X, list(y)), want)
    np.testing.assert_array_equal(loaded.gradient(theta, X[1], int(y[1])), want[1])
    poisson = built.get("poisson", compiled)
    theta, X, counts, n = _arguments("poisson", 4)
    with pytest.raises(TypeError, match="gradient_points: n: expected int64 values"):
        poisson.gradient_points(theta, X, counts, 7.0)
    with pytest.raises(
        TypeError, match="gradient_points: counts: expected int64 values"
    ):
        poisson.gradient_points(theta, X, counts * 1.0, n)


def test_a_label_used_as_an_index_runs_in_c(built: Built) -> None:
    """A run-time gather (``logits[y]``) and its scatter-add are C loops: the
    operator and its points variant are compiled, and right."""
    loaded = built.get("cross_entropy")
    assert loaded.PYTHON_OPERATORS == ()
    args = _arguments("cross_entropy", 50)
    np.testing.assert_allclose(
        loaded.gradient_points(*args),
        _jax("cross_entropy", "gradient", args),
        rtol=TOLERANCE,
        atol=TOLERANCE,
    )
