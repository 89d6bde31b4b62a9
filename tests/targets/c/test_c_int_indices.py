"""``emit = "c"`` with int64 contexts used as run-time indices (``x[idx]``, a
label's ``logits[y]``): the gather and its scatter-add run in the C loops
(difgen/targets/c/indexed.py), in both modes and in the points loops, equal to
the NumPy fallback bit for bit and to JAX, with NumPy's semantics: negative
indices wrap, repeated ones accumulate, one out of bounds raises the module's
own ``IndexError``, a float index array is refused as the Python operator
refuses it."""

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
import int_index_functions
from conftest import SUPPORT, import_file

TOLERANCE = 1e-12
OPERATORS = ["gradient", "jacobian", "hvp", "hessian"]
VECTOR_OPERATORS = ["jacobian", "pushforward", "pullback"]

CONFIG = """
[[module]]
name = "{name}"
function = "{source}:{function}"
backend = "trace"
emit = "c"
mode = "{mode}"
operators = {operators}
input = {{ shape = {shape} }}
contexts = [{contexts}]
"""
POINTS = """
[[module]]
name = "cross_entropy"
function = "int_context_functions.py:cross_entropy"
backend = "trace"
emit = "c"
operators = ["gradient", "hvp"]
input = { shape = [12], per_point = false }
contexts = [{ name = "X", shape = [4], per_point = true }, \
{ name = "y", shape = [], dtype = "int64", per_point = true }]
points = true

[[module]]
name = "shifted"
function = "int_index_functions.py:shifted"
backend = "trace"
emit = "c"
operators = ["gradient"]
input = { shape = [5] }
contexts = [{ name = "idx", shape = [3], dtype = "int64" }]
"""
FUNCTIONS: dict[str, tuple[list[int], str, list[str]]] = {
    "gather_sq": (
        [5],
        '{ name = "idx", shape = [6], dtype = "int64" }',
        OPERATORS,
    ),
    "columns": (
        [3, 4],
        '{ name = "idx", shape = [5], dtype = "int64" }',
        VECTOR_OPERATORS,
    ),
    "label": ([4], '{ name = "y", shape = [], dtype = "int64" }', OPERATORS),
}
MODES = ("forward", "reverse")


def _name(function: str, mode: str) -> str:
    return f"{function}_{mode}"


class Built:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        text = '[difgen]\noutput_dir = "out"\n' + POINTS
        for function, (shape, contexts, ops) in FUNCTIONS.items():
            for mode in MODES:
                text += CONFIG.format(
                    name=_name(function, mode),
                    source="int_index_functions.py",
                    function=function,
                    mode=mode,
                    operators="[" + ", ".join(f'"{o}"' for o in ops) + "]",
                    shape=shape,
                    contexts=contexts,
                )
        for support in ("int_index_functions.py", "int_context_functions.py"):
            shutil.copy(SUPPORT / support, directory / support)
        config = directory / "difgen.toml"
        config.write_text(text)
        result = difgen.build(config, compile=True)
        self.notes = {m.name: m.notes for m in result.modules}
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
    return Built(tmp_path_factory.mktemp("c_int_indices"))


def _index(function: str, seed: int) -> Any:
    """Indices with repeats and negative ones (each in bounds)."""
    if function == "gather_sq":
        return np.array([0, 3, -1, 3, -5, 2], dtype=np.int64)
    if function == "columns":
        return np.array([1, -1, 1, 0, -4], dtype=np.int64)
    return np.int64([-2, 1, 3, -4][seed % 4])


def _point(function: str, seed: int) -> Any:
    shape = FUNCTIONS[function][0]
    return np.random.default_rng(seed).normal(size=shape) * 0.7


def _call(module: ModuleType, operator: str, x: Any, idx: Any) -> Any:
    if operator == "hvp":
        return module.hvp(x, np.linspace(-1.0, 1.0, x.size).reshape(x.shape), idx)
    if operator == "pushforward":
        return module.pushforward(
            x, np.linspace(-1.0, 1.0, x.size).reshape(x.shape), idx
        )
    if operator == "pullback":
        return module.pullback(x, np.linspace(0.5, 1.5, 5), idx)
    return getattr(module, operator)(x, idx)


def _jax(function: str, operator: str, x: Any, idx: Any) -> Any:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    fn = getattr(int_index_functions, function)
    f = types.FunctionType(fn.__code__, {**fn.__globals__, "np": jnp})

    def g(t: Any) -> Any:
        return f(t, idx)

    if operator == "gradient":
        return jax.grad(g)(x)
    if operator == "jacobian":
        return jax.jacobian(g)(x)
    if operator == "hessian":
        return jax.hessian(g)(x)
    v = np.linspace(-1.0, 1.0, x.size).reshape(x.shape)
    if operator == "hvp":
        return jax.jvp(jax.grad(g), (x,), (v,))[1]
    if operator == "pushforward":
        return jax.jvp(g, (x,), (v,))[1]
    return jax.vjp(g, x)[1](np.linspace(0.5, 1.5, 5))[0]


CASES = [
    (function, mode, op)
    for function, (_, _, ops) in FUNCTIONS.items()
    for mode in MODES
    for op in ops
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("function", list(FUNCTIONS))
def test_every_operator_is_compiled(built: Built, function: str, mode: str) -> None:
    loaded = built.get(_name(function, mode))
    assert loaded.PYTHON_OPERATORS == ()
    for op in FUNCTIONS[function][2]:
        assert type(getattr(loaded, op)).__name__ == "builtin_function_or_method"
    assert not [n for n in built.notes[_name(function, mode)] if "kept in Python" in n]


@pytest.mark.parametrize(("function", "mode", "operator"), CASES)
def test_equal_the_numpy_fallback_and_jax(
    built: Built, function: str, mode: str, operator: str
) -> None:
    name = _name(function, mode)
    for seed in range(4):
        x, idx = _point(function, seed), _index(function, seed)
        got = _call(built.get(name), operator, x, idx)
        python = _call(built.get(name, False), operator, x, idx)
        if function == "columns":
            # a matmul contracts the dense jacobian with the seed (reverse
            # mode's pushforward): NumPy's dot adds in its own order
            np.testing.assert_allclose(got, python, rtol=1e-14, atol=1e-15)
        else:
            np.testing.assert_array_equal(got, python)
        want = _jax(function, operator, x, idx)
        np.testing.assert_allclose(got, want, rtol=TOLERANCE, atol=TOLERANCE)


def test_repeated_indices_accumulate(built: Built) -> None:
    """x[[3, 3]] ** 3 counts x[3] twice in the gradient (np.add.at, not +=)."""
    x = np.arange(5.0)
    idx = np.array([3, 3, 3, 0, 0, -2], dtype=np.int64)
    for mode in MODES:
        got = built.get(_name("gather_sq", mode)).gradient(x, idx)
        # 3 three times and -2 (3 again); 0 twice
        want = x + 3 * x**2 * np.array([2.0, 0.0, 0.0, 4.0, 0.0])
        np.testing.assert_allclose(got, want, rtol=1e-15)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("operator", ["f", "gradient", "hvp"])
def test_out_of_bounds_raises_as_numpy(built: Built, mode: str, operator: str) -> None:
    x = _point("gather_sq", 0)
    messages = []
    for compiled in (True, False):
        loaded = built.get(_name("gather_sq", mode), compiled)
        for bad in ([0, 1, 5, 2, 7, 0], [0, -6, 1, 9, 0, 0]):
            with pytest.raises(IndexError) as caught:
                _call(loaded, operator, x, np.array(bad, dtype=np.int64))
            messages.append(str(caught.value))
        with pytest.raises(IndexError) as caught:
            _call(built.get(_name("label", mode), compiled), operator, x[:4], 4)
        messages.append(str(caught.value))
    assert messages[:3] == messages[3:]
    assert messages[:3] == [
        "idx: index 5 is out of bounds for axis 0 with size 5",
        "idx: index -6 is out of bounds for axis 0 with size 5",
        "y: index 4 is out of bounds for axis 0 with size 4",
    ]


@pytest.mark.parametrize("compiled", [True, False])
def test_a_float_index_is_refused_as_in_python(built: Built, compiled: bool) -> None:
    loaded = built.get(_name("gather_sq", "reverse"), compiled)
    x, idx = _point("gather_sq", 1), _index("gather_sq", 1)
    with pytest.raises(TypeError, match="gradient: idx: expected int64 values"):
        loaded.gradient(x, idx.astype(float))
    with pytest.raises(ValueError, match=r"gradient: idx: expected shape \(6,\)"):
        loaded.gradient(x, idx[:3])
    label = built.get(_name("label", "forward"), compiled)
    with pytest.raises(TypeError, match="gradient: y: expected int64 values"):
        label.gradient(x[:4], 1.0)
    # other integer types and Python ints are int64 data, as in Python
    want = loaded.gradient(x, idx)
    np.testing.assert_array_equal(loaded.gradient(x, idx.astype(np.int32)), want)
    np.testing.assert_array_equal(loaded.gradient(x, list(idx)), want)


def _vmap(operator: str, args: list[Any], v: Any = None) -> Any:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    fn = int_context_functions.cross_entropy
    f = types.FunctionType(fn.__code__, {**fn.__globals__, "np": jnp})
    if operator == "gradient":
        return jax.vmap(jax.grad(f), in_axes=(None, 0, 0))(*args)

    def hvp(s: Any, X: Any, y: Any) -> Any:
        return jax.jvp(jax.grad(lambda t: f(t, X, y)), (args[0],), (s,))[1]

    return jax.vmap(hvp)(v, *args[1:])


@pytest.mark.parametrize("k", [0, 1, 257])
def test_cross_entropy_points_equal_jax_vmap(built: Built, k: int) -> None:
    rng = np.random.default_rng(k)
    theta, X = rng.normal(size=12) * 0.5, rng.normal(size=(k, 4))
    y = rng.integers(-3, 3, k)  # negative labels wrap
    v = rng.normal(size=(k, 12))
    compiled, python = built.get("cross_entropy"), built.get("cross_entropy", False)
    # the hvp does not read the labels (the second derivative of -logits[y] is
    # zero), so it cannot check them as every operator must: it stays in Python
    assert set(compiled.PYTHON_OPERATORS) <= {"hvp", "hvp_points"}
    assert type(compiled.gradient_points).__name__ == "builtin_function_or_method"
    # exp and log: the C library's and NumPy's may differ in the last bit
    got = compiled.gradient_points(theta, X, y)
    np.testing.assert_allclose(
        got, python.gradient_points(theta, X, y), rtol=1e-13, atol=1e-15
    )
    np.testing.assert_allclose(
        got, _vmap("gradient", [theta, X, y]), rtol=TOLERANCE, atol=TOLERANCE
    )
    hv = compiled.hvp_points(theta, v, X, y)
    np.testing.assert_allclose(
        hv, python.hvp_points(theta, v, X, y), rtol=1e-13, atol=1e-15
    )
    np.testing.assert_allclose(
        hv, _vmap("hvp", [theta, X, y], v), rtol=TOLERANCE, atol=TOLERANCE
    )


@pytest.mark.parametrize("compiled", [True, False])
def test_cross_entropy_points_refuse_a_bad_label(built: Built, compiled: bool) -> None:
    loaded = built.get("cross_entropy", compiled)
    rng = np.random.default_rng(1)
    theta, X = rng.normal(size=12), rng.normal(size=(6, 4))
    y = np.array([0, 1, 2, 3, -1, 0], dtype=np.int64)
    with pytest.raises(IndexError, match=r"^y: index 3 is out of bounds for axis 0"):
        loaded.gradient_points(theta, X, y)
    with pytest.raises(TypeError, match="gradient_points: y: expected int64 values"):
        loaded.gradient_points(theta, X, y * 1.0)


def test_a_computed_index_stays_in_python_and_says_so(built: Built) -> None:
    """``x[idx + 1]``: int64 arithmetic, which the loops do not compute."""
    loaded = built.get("shifted")
    assert loaded.PYTHON_OPERATORS == ("f", "gradient")
    assert any(
        "gradient: kept in Python" in n and "int64" in n for n in built.notes["shifted"]
    ), built.notes["shifted"]
    x = np.arange(5.0)
    idx = np.array([0, 0, -3], dtype=np.int64)
    np.testing.assert_array_equal(loaded.gradient(x, idx), [0.0, 4.0, 0.0, 6.0, 0.0])
