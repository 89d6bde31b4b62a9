"""float32 modules (``input.dtype = "float32"``) compute in float32 end to end.

Every row of tests/support/primitive_cases.py (one per primitive and per NumPy
function of the surface) is built as a float32 module, and its jacobian,
pushforward and pullback are float32 and match central differences of the traced
function computed in float64 at the same (float32) point. A few functions on
scalar, vector and matrix inputs are checked against JAX in float32, operator by
operator. Then the edges: constants, contexts, arguments and ``out=`` of another
dtype, NaN and inf, and overflow that float64 would not have.
"""

from __future__ import annotations

import functools
import shutil
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import difgen
import primitive_cases as cases
from conftest import SUPPORT, import_file
from difgen.config import load_config
from difgen.errors import ConfigError
from difgen.load import load_function
from difgen.pipeline import generate_module, trace_spec

ROWS = {**cases.ROWS, **{f"np.{name}": row for name, row in cases.SURFACE.items()}}

RTOL = 1e-4
"""A float32 result against a float64 reference, relative to max(1, its scale)."""


def _config(name: str, function: str, shape: Any, operators: list[str], **extra: Any):
    lines = [
        "[difgen]",
        'output_dir = "out"',
        "",
        "[[module]]",
        f'name = "{name}"',
        f'function = "{function}"',
        'backend = "trace"',
        f"operators = {operators!r}".replace("'", '"'),
        f'input = {{ shape = {list(shape)!r}, dtype = "float32" }}',
    ]
    lines += [f"{key} = {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def _build(root: Path, source: str, name: str, *args: Any, **extra: Any) -> ModuleType:
    """One float32 module of ``source`` (a function file's text), imported."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "functions.py").write_text(source)
    (root / "difgen.toml").write_text(_config(name, *args, **extra))
    difgen.build(root / "difgen.toml")
    return import_file(root / "out" / f"{name}.py")


def _close(got: Any, expected: Any, rtol: float = RTOL) -> None:
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected)
    assert got.shape == expected.shape
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    assert float(np.max(np.abs(got - expected), initial=0.0)) <= rtol * scale


def _float32(*values: Any) -> None:
    for value in values:
        assert np.asarray(value).dtype == np.float32, type(value)
        assert isinstance(value, (np.ndarray, np.float32)), type(value)


# ------------------------------------------------------------ every primitive
@functools.cache
def _row_module(name: str, root: Path) -> tuple[ModuleType, Any, str]:
    fn, shape = ROWS[name]
    directory = root / name.replace(" ", "_")
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(SUPPORT / "primitive_cases.py", directory / "primitive_cases.py")
    text = _config("mod", f"primitive_cases.py:{fn.__name__}", shape, _ROW_OPS)
    (directory / "difgen.toml").write_text(text)
    config = load_config(directory / "difgen.toml")
    (spec,) = config.modules
    function = load_function(spec)
    source = generate_module(spec, config, function)
    (directory / "mod.py").write_text(source)
    return import_file(directory / "mod.py"), trace_spec(spec, function), source


_ROW_OPS = ["jacobian", "pushforward", "pullback"]


@pytest.fixture(scope="module")
def rows_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("float32-rows")


@pytest.mark.parametrize("name", sorted(ROWS))
def test_every_row_computes_in_float32_and_matches_float64_differences(
    name: str, rows_root: Path
) -> None:
    module, graph, source = _row_module(name, rows_root)
    shape = ROWS[name][1]
    rng = np.random.default_rng(7)
    x = rng.uniform(0.2, 0.8, shape).astype(np.float32)
    x64 = x.astype(np.float64)  # the very point the module gets, exactly

    def f(at: np.ndarray) -> np.ndarray:
        return np.asarray(graph.evaluate(at)[0], dtype=np.float64)

    ys = f(x64).shape
    h, n = 2.0**-17, x.size
    columns = []
    for i in range(n):
        e = np.zeros(n)
        e[i] = h
        e = e.reshape(shape)
        columns.append((f(x64 + e) - f(x64 - e)) / (2 * h))
    reference = np.stack(columns, axis=-1).reshape(ys + shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = module.f(x)
        jac = module.jacobian(x)
        dx = rng.uniform(-1, 1, shape).astype(np.float32)
        dy = rng.uniform(-1, 1, ys).astype(np.float32)
        jvp = module.pushforward(x, dx)
        vjp = module.pullback(x, dy)
    _float32(value, jac, jvp, vjp)
    _close(value, f(x64))
    _close(jac, reference)
    axes = len(shape)
    _close(jvp, np.tensordot(reference, dx.astype(np.float64), axes=axes))
    _close(vjp, np.tensordot(dy.astype(np.float64), reference, axes=len(ys)))
    assert "float64" not in source.split("\ndef f(")[1]  # no float64 in the code


# ------------------------------------------------------------------ against JAX
JAX_FUNCTIONS = """\
import numpy as np


def scalar(x):
    return np.sin(x) * np.exp(-0.5 * x * x) + np.log1p(x * x) / (1.0 + x)


def vector(x):
    return np.sum(np.tanh(x) ** 2) + np.log(np.sum(np.exp(x))) + x[0] * x[-1]


def matrix(X):
    return np.sum(np.tanh(X @ X.T)) + np.trace(np.linalg.inv(X + 3.0 * np.eye(3)))


def layer(x, W):
    return np.tanh(W @ x + 0.5) * np.float32(2.0)
"""


def _jax_functions() -> dict[str, Any]:
    jnp = pytest.importorskip("jax.numpy")

    def scalar(x: Any) -> Any:
        return jnp.sin(x) * jnp.exp(-0.5 * x * x) + jnp.log1p(x * x) / (1.0 + x)

    def vector(x: Any) -> Any:
        return jnp.sum(jnp.tanh(x) ** 2) + jnp.log(jnp.sum(jnp.exp(x))) + x[0] * x[-1]

    def matrix(X: Any) -> Any:
        return jnp.sum(jnp.tanh(X @ X.T)) + jnp.trace(
            jnp.linalg.inv(X + 3.0 * jnp.eye(3, dtype=X.dtype))
        )

    return {"scalar": scalar, "vector": vector, "matrix": matrix}


SCALAR_OPS = ["derivative", "second_derivative", "value_and_derivative"]
ARRAY_OPS = ["gradient", "value_and_gradient", "hessian", "hvp", "jacobian"]


@pytest.fixture(scope="module")
def jax_modules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModuleType]:
    root = tmp_path_factory.mktemp("float32-jax")
    return {
        "scalar": _build(
            root / "s", JAX_FUNCTIONS, "scalar", "functions.py:scalar", [], SCALAR_OPS
        ),
        "vector": _build(
            root / "v", JAX_FUNCTIONS, "vector", "functions.py:vector", [5], ARRAY_OPS
        ),
        "matrix": _build(
            root / "m",
            JAX_FUNCTIONS,
            "matrix",
            "functions.py:matrix",
            [3, 3],
            ARRAY_OPS,
            mode='"reverse"',
        ),
    }


def test_a_scalar_module_matches_jax_in_float32(
    jax_modules: dict[str, ModuleType],
) -> None:
    jax = pytest.importorskip("jax")
    fn = _jax_functions()["scalar"]
    m = jax_modules["scalar"]
    for x in (np.float32(0.3), np.float32(-1.7), np.float32(2.5)):
        d, d2 = m.derivative(x), m.second_derivative(x)
        value, d_again = m.value_and_derivative(x)
        _float32(d, d2, value, d_again)
        assert jax.numpy.asarray(x).dtype == jax.numpy.float32
        _close(value, jax.jit(fn)(x))
        _close(d, jax.jit(jax.grad(fn))(x))
        _close(d2, jax.jit(jax.grad(jax.grad(fn)))(x))
        assert d == d_again


@pytest.mark.parametrize("kind, shape", [("vector", (5,)), ("matrix", (3, 3))])
def test_array_modules_match_jax_in_float32(
    jax_modules: dict[str, ModuleType], kind: str, shape: tuple[int, ...]
) -> None:
    jax = pytest.importorskip("jax")
    fn = _jax_functions()[kind]
    m = jax_modules[kind]
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    v = rng.uniform(-1, 1, shape).astype(np.float32)
    g, hess, hv, jac = m.gradient(x), m.hessian(x), m.hvp(x, v), m.jacobian(x)
    value, g_again = m.value_and_gradient(x)
    _float32(g, hess, hv, jac, value, g_again)
    expected_g = jax.jit(jax.grad(fn))(x)
    expected_h = jax.jit(jax.hessian(fn))(x)
    assert expected_g.dtype == jax.numpy.float32  # JAX keeps float32 too
    _close(value, jax.jit(fn)(x))
    _close(g, expected_g)
    _close(jac, expected_g)
    _close(hess, expected_h, 1e-3)
    _close(hv, np.tensordot(np.asarray(expected_h), v, axes=len(shape)), 1e-3)
    np.testing.assert_array_equal(g, g_again)


def test_a_float32_context_and_a_batch_of_seeds_stay_float32(tmp_path: Path) -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    m = _build(
        tmp_path,
        JAX_FUNCTIONS,
        "layer",
        "functions.py:layer",
        [4],
        ["jacobian", "pushforward", "pullback"],
        contexts='[{ name = "W", shape = [3, 4], dtype = "float32" }]',
        batch=2,
    )
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, 4).astype(np.float32)
    W = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    dx = rng.uniform(-1, 1, (2, 4)).astype(np.float32)
    dy = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    jac, jvp, vjp = m.jacobian(x, W), m.pushforward(x, dx, W), m.pullback(x, dy, W)
    _float32(jac, jvp, vjp)
    expected = jax.jacfwd(lambda x: jnp.tanh(W @ x + 0.5) * jnp.float32(2.0))(x)
    _close(jac, expected)
    _close(jvp, dx @ np.asarray(expected).T)
    _close(vjp, dy @ np.asarray(expected))
    with pytest.raises(TypeError, match="jacobian: W: expected float32 values"):
        m.jacobian(x, W.astype(np.float64))


# ------------------------------------------------------------------- the edges
EDGE_FUNCTIONS = """\
import numpy as np

WEIGHTS = np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)


def weighted(x):
    return np.sum(WEIGHTS * x**2) + np.ones(4, dtype=np.float32) @ x * 0.1


def growth(x):
    return np.exp(x) * 2.0


def ratio(x):
    return np.sum(1.0 / x)


def scale(x, s):
    return x * s


def gathered(x, idx, mask):
    y = np.sum(x[idx] * 2.0) + np.where(mask, x, 0.0)
    return np.sum(y**2) + np.mean(x[mask]) + idx.sum() * x[0] + np.sum(idx * x[:3])
"""


@pytest.fixture(scope="module")
def edges(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModuleType]:
    root = tmp_path_factory.mktemp("float32-edges")
    return {
        "weighted": _build(
            root / "w",
            EDGE_FUNCTIONS,
            "weighted",
            "functions.py:weighted",
            [4],
            ["gradient", "hessian"],
        ),
        "growth": _build(
            root / "g",
            EDGE_FUNCTIONS,
            "growth",
            "functions.py:growth",
            [3],
            ["jacobian", "pushforward"],
        ),
        "ratio": _build(
            root / "r", EDGE_FUNCTIONS, "ratio", "functions.py:ratio", [5], ["gradient"]
        ),
    }


def test_a_float32_constant_does_not_upcast(edges: dict[str, ModuleType]) -> None:
    m = edges["weighted"]
    x = np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)
    g, hess = m.gradient(x), m.hessian(x)
    _float32(g, hess)
    weights = np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)
    np.testing.assert_array_equal(g, weights * 2 * x + np.float32(0.1))
    _close(hess, np.diag(2 * weights.astype(np.float64)))


def test_python_numbers_and_lists_are_converted_float64_arrays_refused(
    edges: dict[str, ModuleType],
) -> None:
    m = edges["weighted"]
    x = np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)
    np.testing.assert_array_equal(m.gradient([1.0, -2.0, 0.5, 3.0]), m.gradient(x))
    np.testing.assert_array_equal(m.gradient([1, -2, 0.5, 3]), m.gradient(x))
    _float32(m.gradient(x.astype(np.float16)))  # float16 widens exactly
    with pytest.raises(TypeError) as caught:
        m.gradient(x.astype(np.float64))
    message = str(caught.value)
    assert "gradient: x: expected float32 values, got float64 values" in message
    assert "convert it with .astype(np.float32)" in message
    with pytest.raises(TypeError, match="expected float32 values, got int64 values"):
        m.gradient(np.arange(4))


def test_out_must_be_float32(edges: dict[str, ModuleType]) -> None:
    m = edges["weighted"]
    x = np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)
    out = np.empty(4, dtype=np.float32)
    assert m.gradient(x, out=out) is out
    np.testing.assert_array_equal(out, m.gradient(x))
    with pytest.raises(ValueError, match="expected a float32 array of shape"):
        m.gradient(x, out=np.empty(4))


def test_nan_and_inf_propagate_as_numpy_float32(edges: dict[str, ModuleType]) -> None:
    m = edges["ratio"]
    x = np.array([np.nan, np.inf, -np.inf, 0.0, 2.0], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        g = m.gradient(x)
        with np.errstate(all="ignore"):
            expected = np.float32(-1.0) / (x * x)
    _float32(g)
    np.testing.assert_array_equal(g, expected)  # nan, -0.0, -0.0, -inf, -0.25
    assert np.signbit(g[1]) and np.signbit(g[2])


def test_float32_overflows_where_float64_would_not(
    edges: dict[str, ModuleType],
) -> None:
    m = edges["growth"]
    x = np.array([1.0, 88.0, 100.0], dtype=np.float32)  # e**100 > float32's max
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value, jac = m.f(x), m.jacobian(x)
        jvp = m.pushforward(x, np.ones(3, dtype=np.float32))
    _float32(value, jac, jvp)
    assert np.isfinite(value[:2]).all() and value[2] == np.inf
    assert jac[2, 2] == np.inf and jvp[2] == np.inf
    assert np.isfinite(np.exp(100.0) * 2.0)  # float64 would hold it
    _close(jac[1, 1] / np.float32(np.exp(88.0) * 2.0), 1.0)


def test_a_float32_context_of_a_float64_module_is_promoted(tmp_path: Path) -> None:
    root = tmp_path
    (root / "functions.py").write_text(EDGE_FUNCTIONS)
    (root / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "out"\n\n[[module]]\nname = "scale"\n'
        'function = "functions.py:scale"\nbackend = "trace"\n'
        'operators = ["jacobian"]\ninput = { shape = [2] }\n'
        'contexts = [{ name = "s", shape = [2], dtype = "float32" }]\n'
    )
    difgen.build(root / "difgen.toml")
    m = import_file(root / "out" / "scale.py")
    s = np.array([0.1, 3.0], dtype=np.float32)
    jac = m.jacobian(np.ones(2), s)
    assert jac.dtype == np.float64  # NumPy promotes float32 data to float64
    np.testing.assert_array_equal(jac, np.diag(s.astype(np.float64)))


def test_int64_and_bool_contexts_index_a_float32_module(tmp_path: Path) -> None:
    """Indices and masks are run-time data; what they turn into floats (a count, an
    index cast) is float32, so the module stays float32. Checked against the same
    function built as a float64 module."""
    ops = ["gradient", "hessian", "value_and_gradient"]
    contexts = (
        '[{ name = "idx", shape = [3], dtype = "int64" }, '
        '{ name = "mask", shape = [5], dtype = "bool" }]'
    )
    m = _build(
        tmp_path / "f32",
        EDGE_FUNCTIONS,
        "gathered",
        "functions.py:gathered",
        [5],
        ops,
        contexts=contexts,
    )
    (tmp_path / "f64").mkdir()
    (tmp_path / "f64" / "functions.py").write_text(EDGE_FUNCTIONS)
    text = _config("gathered", "functions.py:gathered", [5], ops, contexts=contexts)
    (tmp_path / "f64" / "difgen.toml").write_text(
        text.replace(', dtype = "float32" }', " }", 1)
    )
    difgen.build(tmp_path / "f64" / "difgen.toml")
    twin = import_file(tmp_path / "f64" / "out" / "gathered.py")
    x = np.array([0.1, 0.5, -0.3, 0.7, 0.2], dtype=np.float32)
    idx, mask = np.array([0, 3, 3]), np.array([1, 0, 1, 1, 0], dtype=bool)
    value, g = m.value_and_gradient(x, idx, mask)
    hess = m.hessian(x, idx, mask)
    _float32(value, g, hess, m.gradient(x, idx, mask))
    x64 = x.astype(np.float64)
    _close(value, twin.f(x64, idx, mask))
    _close(g, twin.gradient(x64, idx, mask))
    _close(hess, twin.hessian(x64, idx, mask), 1e-3)


ACCUMULATED = """\
import numpy as np


def loss(x, A):
    r = A @ x - 1.0
    return np.sum(r * r) + np.cumsum(x)[-1] + np.einsum("i,i->", x, x)
"""


def test_accumulate_float64_sums_and_multiplies_in_float64(tmp_path: Path) -> None:
    """``accumulate = "float64"``: the matrix products, sums, cumulative sums and
    contractions of a float32 module accumulate in float64 and round once to
    float32; the results are float32 and closer to float64's than the same module
    accumulating in float32."""
    ops = ["value_and_gradient", "hvp"]
    contexts = '[{ name = "A", shape = [50, 2000], dtype = "float32" }]'
    args = ("functions.py:loss", [2000], ops)
    plain = _build(tmp_path / "p", ACCUMULATED, "plain", *args, contexts=contexts)
    wide = _build(
        tmp_path / "w",
        ACCUMULATED,
        "wide",
        *args,
        contexts=contexts,
        accumulate='"float64"',
    )
    text = (tmp_path / "w" / "out" / "wide.py").read_text()
    assert "np.matmul(" in text and "dtype=np.float64).astype(np.float32)" in text
    assert "dtype=np.float64" not in (tmp_path / "p" / "out" / "plain.py").read_text()
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 2000).astype(np.float32)
    A = rng.uniform(-1, 1, (50, 2000)).astype(np.float32)
    x64, A64 = x.astype(np.float64), A.astype(np.float64)
    r = A64 @ x64 - 1.0
    value64 = np.sum(r * r) + np.cumsum(x64)[-1] + x64 @ x64
    gradient64 = 2 * A64.T @ r + 1.0 + 2 * x64
    errors = {}
    for name, m in (("plain", plain), ("wide", wide)):
        value, gradient = m.value_and_gradient(x, A)
        _float32(value, gradient, m.hvp(x, x, A))
        errors[name] = (
            abs(float(value) - value64) / abs(value64),
            float(np.max(np.abs(gradient - gradient64)) / np.max(np.abs(gradient64))),
        )
    assert errors["wide"][0] < errors["plain"][0] / 2, errors
    assert errors["wide"][1] < errors["plain"][1] / 2, errors
    _close(wide.hvp(x, x, A), 2 * A64.T @ (A64 @ x64) + 2 * x64)


def test_a_non_float_output_names_the_module_float_type(tmp_path: Path) -> None:
    (tmp_path / "functions.py").write_text("def positive(x):\n    return x > 0\n")
    (tmp_path / "difgen.toml").write_text(
        _config("positive", "functions.py:positive", [3], ["jacobian"])
    )
    with pytest.raises(ConfigError) as caught:
        difgen.build(tmp_path / "difgen.toml")
    message = str(caught.value)
    assert "difgen.toml:6:" in message
    assert "returns a bool value; expected float32" in message


CONTROL_FLOW = """\
import numpy as np


def kepler(M, e):
    E = M + e * np.sin(M)
    step = np.ones(M.shape, dtype=np.float32)
    while np.max(np.abs(step)) > 1e-6:  # a tolerance float32 resolves
        step = (E - e * np.sin(E) - M) / (1.0 - e * np.cos(E))
        E = E - step
    return E


def euler(x):
    for _ in range(50):
        x = x + 0.01 * np.sin(x) * x
    return np.sum(x**2)


def branch(x):
    if x[0] > 0:
        return np.sum(np.exp(x))
    return np.sum(x**3)
"""

CONTROL_CONFIG = """\
[difgen]
output_dir = "out"

[[module]]
name = "kep"
function = "functions.py:kepler"
backend = "trace"
operators = ["jacobian", "pushforward", "pullback"]
input = { shape = [4], dtype = "float32" }
contexts = [{ name = "e", shape = [], dtype = "float32" }]

[[module]]
name = "eul"
function = "functions.py:euler"
backend = "trace"
operators = ["gradient", "hessian", "hvp"]
mode = "reverse"
input = { shape = [3], dtype = "float32" }

[[module]]
name = "br"
function = "functions.py:branch"
backend = "trace"
operators = ["gradient", "hessian"]
input = { shape = [3], dtype = "float32" }
"""


def test_loops_and_branches_compute_in_float32(tmp_path: Path) -> None:
    """A while loop to a tolerance, a static loop differentiated in reverse (its
    adjoint's accumulators) and a branch on a traced value, checked by difgen
    verify (float64 differences, float32 tolerances, float32 results)."""
    (tmp_path / "functions.py").write_text(CONTROL_FLOW)
    (tmp_path / "difgen.toml").write_text(CONTROL_CONFIG)
    difgen.build(tmp_path / "difgen.toml")
    result = difgen.verify(tmp_path / "difgen.toml")
    assert result.ok, [
        (m.name, op.operator, op.worst) for m in result.modules for op in m.operators
    ]
    kep = import_file(tmp_path / "out" / "kep.py")
    M = np.array([0.1, 1.0, 2.0, 3.0], dtype=np.float32)
    jac = kep.jacobian(M, np.float32(0.3))
    _float32(jac, kep.f(M, np.float32(0.3)))
    E = kep.f(M, np.float32(0.3)).astype(np.float64)
    _close(np.diag(jac), 1.0 / (1.0 - 0.3 * np.cos(E)))
