"""``emit = "c"`` for float32 modules: C loops computing in float.

One config of float32 modules (tests/support/c_float32_functions.py), in forward
and reverse mode, is built and compiled once. Each compiled module is checked
against its own Python fallback (the float32 NumPy module: the same operations,
sums in index order where NumPy sums pairwise, the C library's float functions
where NumPy has its own loops, so within a few float32 roundings) and against
JAX in float32. Its results are float32 (``np.float32`` scalars), float64
arguments and ``out=`` buffers are refused as the NumPy module refuses them, and
NaN and inf follow NumPy. The C text itself has no ``double`` and no double
literal outside its comments and strings.
"""

from __future__ import annotations

import re
import shutil
import warnings
from typing import Any

import numpy as np
import pytest

import c_float32_functions as F
from compiled import Built
from conftest import SUPPORT, import_file

RTOL_C = 2e-5
"""The compiled module against its float32 NumPy twin, relative to the scale."""

RTOL_JAX = 2e-4
"""Against JAX in float32 (another order of float32 operations)."""

SCALAR_OPS = ["derivative", "second_derivative", "value_and_derivative"]
GRADIENT_OPS = ["gradient", "value_and_gradient", "hessian", "hvp"]
JACOBIAN_OPS = ["jacobian", "value_and_jacobian", "pushforward", "pullback"]
MLP_CONTEXTS = (
    'contexts = [{ name = "X", shape = [64, 14], dtype = "float32" }, '
    '{ name = "t", shape = [64], dtype = "float32" }]'
)

MODULES: dict[str, tuple[str, list[int], list[str], str]] = {}
for _mode in ("forward", "reverse"):
    MODULES |= {
        f"scalar_{_mode}": ("scalar", [], SCALAR_OPS, ""),
        f"vector_{_mode}": ("vector", [6], GRADIENT_OPS, ""),
        f"field_{_mode}": ("field", [5], JACOBIAN_OPS, ""),
        f"matrix_{_mode}": ("matrix", [3, 3], GRADIENT_OPS, ""),
        f"edges_{_mode}": ("edges", [8], ["f", "gradient"], ""),
    }
MODULES["mlp"] = ("mlp", [14 * 64 + 129], ["gradient", "value_and_gradient"], "")
PARAMS_TREE = (
    '{ W1 = { shape = [14, 64], dtype = "float32" }, b1 = { shape = [64], dtype = '
    '"float32" }, W2 = { shape = [64], dtype = "float32" }, b2 = { shape = [], '
    'dtype = "float32" } }'
)
PARAMS_OPS = ["gradient", "value_and_gradient", "hvp"]


def _config() -> str:
    parts = ['[difgen]\noutput_dir = "out"\n']
    for name, (function, shape, ops, extra) in MODULES.items():
        mode = name.rsplit("_", 1)[-1] if name != "mlp" else "auto"
        quoted = ", ".join(f'"{op}"' for op in ops)
        context = MLP_CONTEXTS if name == "mlp" else extra
        parts.append(
            f'[[module]]\nname = "{name}"\n'
            f'function = "c_float32_functions.py:{function}"\n'
            f'backend = "trace"\nemit = "c"\nmode = "{mode}"\n'
            f"operators = [{quoted}]\n"
            f'input = {{ shape = {shape}, dtype = "float32" }}\n{context}\n'
        )
    for name, emit in (("params", "c"), ("params_vector", "vector")):
        parts.append(
            f'[[module]]\nname = "{name}"\n'
            'function = "c_float32_functions.py:params_loss"\n'
            f'backend = "trace"\nemit = "{emit}"\n'
            f"operators = {PARAMS_OPS!r}\n".replace("'", '"')
            + f'inputs = [{{ name = "params", tree = {PARAMS_TREE} }}]\n'
            + MLP_CONTEXTS
            + "\n"
        )
    return "\n".join(parts)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    directory = tmp_path_factory.mktemp("c_float32")
    shutil.copy(SUPPORT / "c_float32_functions.py", directory)
    (directory / "difgen.toml").write_text(_config())
    return Built(directory)


def _point(name: str, seed: int = 3) -> tuple[np.ndarray, ...]:
    """The module's arguments (x, then its contexts), float32."""
    rng = np.random.default_rng(seed)
    shape = tuple(MODULES[name][1])
    x = rng.uniform(0.2, 0.9, shape)
    if MODULES[name][0] == "mlp":
        x = rng.standard_normal(shape) * 0.3
        X = rng.standard_normal((64, 14))
        t = np.sin(X[:, 0])
        return tuple(a.astype(np.float32) for a in (x, X, t))
    return (np.asarray(x, dtype=np.float32),)


def _calls(name: str) -> list[tuple[str, tuple[Any, ...]]]:
    """Each operator of the module with its float32 arguments."""
    x, *contexts = _point(name)
    rng = np.random.default_rng(11)
    calls = []
    for op in MODULES[name][2]:
        if op in ("hvp", "pushforward"):
            v = rng.uniform(-1, 1, x.shape).astype(np.float32)
            calls.append((op, (x, v, *contexts)))
        elif op == "pullback":
            ys = np.shape(getattr(F, MODULES[name][0])(x.astype(np.float64)))
            w = rng.uniform(-1, 1, ys).astype(np.float32)
            calls.append((op, (x, w, *contexts)))
        else:
            calls.append((op, (x, *contexts)))
    return calls


def _results(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)


def _close(got: Any, expected: Any, rtol: float) -> None:
    got = np.asarray(got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert got.shape == expected.shape
    finite = np.isfinite(expected)
    assert np.array_equal(np.isnan(got), np.isnan(expected))
    assert np.array_equal(
        got[~finite & ~np.isnan(expected)], expected[~finite & ~np.isnan(expected)]
    )
    scale = max(1.0, float(np.max(np.abs(expected[finite]), initial=0.0)))
    error = np.max(np.abs(got[finite] - expected[finite]), initial=0.0)
    assert float(error) <= rtol * scale, (float(error), scale)


def _float32(value: Any) -> None:
    for item in _results(value):
        assert isinstance(item, (np.ndarray, np.float32)), type(item)
        assert np.asarray(item).dtype == np.float32


@pytest.mark.parametrize("name", sorted(MODULES))
def test_compiled_float32_matches_the_float32_numpy_module(
    built: Built, name: str
) -> None:
    compiled, python = built.compiled(name), built.python(name)
    for op, args in _calls(name):
        assert getattr(compiled, op) is not getattr(python, op)
        got, expected = getattr(compiled, op)(*args), getattr(python, op)(*args)
        _float32(got)
        for g, e in zip(_results(got), _results(expected), strict=True):
            _close(g, e, RTOL_C)


def _jax(name: str) -> Any:
    jnp = pytest.importorskip("jax.numpy")

    def scalar(x: Any) -> Any:
        return jnp.sin(x) * jnp.exp(-0.5 * x * x) + jnp.log1p(x * x) / (1.0 + x)

    def vector(x: Any) -> Any:
        return jnp.sum(jnp.tanh(x) ** 2) + jnp.log(jnp.sum(jnp.exp(x))) + x[0] * x[-1]

    def field(x: Any) -> Any:
        return jnp.tanh(x) * x[::-1] + jnp.exp(-x) + jnp.sqrt(x * x + 1.0)

    def matrix(X: Any) -> Any:
        return jnp.sum(jnp.tanh(X @ X.T)) + jnp.sum(jnp.cos(X) * X.T) / 3.0

    def mlp(p: Any, X: Any, t: Any) -> Any:
        W1 = p[: 14 * 64].reshape(14, 64)
        h = jnp.tanh(X @ W1 + p[14 * 64 : 14 * 64 + 64])
        r = h @ p[14 * 64 + 64 : 14 * 64 + 128] + p[-1] - t
        return jnp.mean(r * r)

    return {"scalar": scalar, "vector": vector, "field": field, "matrix": matrix}.get(
        name, mlp
    )


def _jax_reference(function: str, op: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    import jax

    fn = _jax(function)
    x, rest = args[0], args[1:]
    if op in ("hvp", "pushforward", "pullback"):
        v, contexts = rest[0], rest[1:]
    else:
        contexts = rest

    def at(z: Any) -> Any:
        return fn(z, *contexts)

    value = at(x)
    if op in ("derivative", "gradient"):
        return (jax.grad(at)(x),)
    if op in ("value_and_derivative", "value_and_gradient"):
        return (value, jax.grad(at)(x))
    if op == "second_derivative":
        return (jax.grad(jax.grad(at))(x),)
    if op == "hessian":
        return (jax.hessian(at)(x),)
    if op == "hvp":
        return (jax.jvp(jax.grad(at), (x,), (v,))[1],)
    if op == "jacobian":
        return (jax.jacfwd(at)(x),)
    if op == "value_and_jacobian":
        return (value, jax.jacfwd(at)(x))
    if op == "pushforward":
        return (jax.jvp(at, (x,), (v,))[1],)
    if op == "pullback":
        return (jax.vjp(at, x)[1](v)[0],)
    raise AssertionError(op)


@pytest.mark.parametrize("name", sorted(n for n in MODULES if "edges" not in n))
def test_compiled_float32_matches_jax_in_float32(built: Built, name: str) -> None:
    compiled = built.compiled(name)
    for op, args in _calls(name):
        reference = _jax_reference(MODULES[name][0], op, args)
        assert all(np.asarray(r).dtype == np.float32 for r in reference)
        got = getattr(compiled, op)(*args)
        _float32(got)
        for g, e in zip(_results(got), reference, strict=True):
            _close(g, np.asarray(e), RTOL_JAX)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_inputs_as_the_numpy_module(
    built: Built, mode: str, special: float
) -> None:
    for function in ("edges", "vector", "field"):
        name = f"{function}_{mode}"
        compiled, python = built.compiled(name), built.python(name)
        for op, args in _calls(name):
            x = args[0].copy()
            x[1] = special
            args = (x, *args[1:])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                got = getattr(compiled, op)(*args)
                expected = getattr(python, op)(*args)
            _float32(got)
            for g, e in zip(_results(got), _results(expected), strict=True):
                _close(g, e, RTOL_C)


def _message(call: Any, *args: Any, **kwargs: Any) -> tuple[type, str]:
    try:
        call(*args, **kwargs)
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)
    raise AssertionError("not refused")


@pytest.mark.parametrize("name", ["vector_reverse", "mlp"])
def test_float64_arguments_are_refused_as_the_numpy_module_refuses_them(
    built: Built, name: str
) -> None:
    compiled, python = built.compiled(name), built.python(name)
    args = _point(name)
    for k in range(len(args)):
        wrong = tuple(a.astype(np.float64) if j == k else a for j, a in enumerate(args))
        kind, text = _message(compiled.gradient, *wrong)
        assert (kind, text) == _message(python.gradient, *wrong)
        assert kind is TypeError and "float32" in text, text
    x = args[0].astype(np.float64)
    kind, text = _message(
        lambda: compiled.gradient(x[:-1].astype(np.float32), *args[1:])
    )
    assert kind is ValueError and "shape" in text


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_scalar_arguments_as_the_numpy_module(built: Built, mode: str) -> None:
    """A Python float is rounded to float32, an np.float32 taken as it is, and an
    np.float64 (a float subclass) refused, as the NumPy float32 module does."""
    compiled, python = built.compiled(f"scalar_{mode}"), built.python(f"scalar_{mode}")
    for x in (0.3, np.float32(0.3), np.array(0.3, dtype=np.float32)):
        got = compiled.derivative(x)
        assert type(got) is np.float32
        assert got == python.derivative(x)
    kind, text = _message(compiled.derivative, np.float64(0.3))
    assert (kind, text) == _message(python.derivative, np.float64(0.3))
    assert kind is TypeError and "expected float32 values" in text


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int64])
def test_out_of_another_dtype_is_refused(built: Built, dtype: Any) -> None:
    compiled, python = built.compiled("vector_reverse"), built.python("vector_reverse")
    (x,) = _point("vector_reverse")
    out = np.zeros(x.shape, dtype=dtype)
    kind, text = _message(compiled.gradient, x, out=out)
    assert (kind, text) == _message(python.gradient, x, out=out)
    assert kind is ValueError and "float32" in text, text
    assert not out.any()


def test_out_of_float32_is_written_in_place(built: Built) -> None:
    compiled = built.compiled("mlp")
    args = _point("mlp")
    out = np.zeros(args[0].shape, dtype=np.float32)
    assert compiled.gradient(*args, out=out) is out
    _close(out, built.python("mlp").gradient(*args), RTOL_C)


_COMMENTS_AND_STRINGS = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"', re.DOTALL)
_DOUBLE_LITERAL = re.compile(
    r"(?<![\w.])(?:\d+\.\d*|\.\d+|\d+[eE][+-]?\d+)(?:[eE][+-]?\d+)?(?![\w.])"
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("matrix_reverse", r"\b(tanhf|cosf)\("),
        ("edges_forward", r"#define _exp expf\n"),
        ("mlp", r"PyArray_MatrixProduct2\("),  # NumPy's dot: sgemm on float32
    ],
)
def test_the_c_computes_in_float_only(built: Built, name: str, expected: str) -> None:
    """No double, double literal or double libm call in the code: each C
    operation is one float operation (no promotion and second rounding)."""
    text = (built.directory / "out" / f"{name}__c.c").read_text()
    code = _COMMENTS_AND_STRINGS.sub(" ", text)
    assert not re.search(r"\bdouble\b|NPY_DOUBLE|PyFloat_FromDouble", code)
    assert not _DOUBLE_LITERAL.findall(code)
    assert not re.search(r"\b(exp|tanh|log|sin|cos|sqrt|pow|fabs)\(", code)
    assert re.search(expected, code)
    assert "NPY_FLOAT" in code


def _vector(built: Built) -> Any:
    """The structured float32 module in NumPy (emit = "vector")."""
    return import_file(built.directory / "out" / "params_vector.py")


def _params(seed: int = 5) -> dict[str, Any]:
    p = _point("mlp", seed)[0]
    return {
        "W1": p[: 14 * 64].reshape(14, 64).copy(),
        "b1": p[14 * 64 : 14 * 64 + 64].copy(),
        "W2": p[14 * 64 + 64 : 14 * 64 + 128].copy(),
        "b2": p[-1],
    }


def test_a_dict_of_float32_arrays_in_c(built: Built) -> None:
    """``inputs = [{ tree = ... dtype = "float32" }]``: the gradient of a dict of
    four float32 arrays is a dict of float32 arrays (``b2`` an np.float32), the
    same as the structured float32 NumPy module's and JAX's."""
    import jax

    compiled, vector = built.compiled("params"), _vector(built)
    params = _params()
    _, X, t = _point("mlp")
    assert isinstance(params["b2"], np.float32)
    v = {k: np.full_like(a, 0.5) for k, a in params.items()}
    v["b2"] = np.float32(0.5)
    fn = F.params_loss

    def jax_loss(p: Any, X: Any, t: Any) -> Any:
        import jax.numpy as jnp

        h = jnp.tanh(X @ p["W1"] + p["b1"])
        return jnp.mean((h @ p["W2"] + p["b2"] - t) ** 2)

    grad = jax.grad(jax_loss)(params, X, t)
    hvp = jax.jvp(lambda p: jax.grad(jax_loss)(p, X, t), (params,), (v,))[1]
    value, g = compiled.value_and_gradient(params, X, t)
    _float32((value,))
    _close(value, fn(params, X, t), RTOL_C)
    for got, ours, theirs in (
        (g, vector.gradient(params, X, t), grad),
        (compiled.gradient(params, X, t), vector.gradient(params, X, t), grad),
        (compiled.hvp(params, v, X, t), vector.hvp(params, v, X, t), hvp),
    ):
        assert sorted(got) == ["W1", "W2", "b1", "b2"]
        for key in got:
            _float32((got[key],))
            assert np.shape(got[key]) == np.shape(params[key])
            _close(got[key], ours[key], RTOL_C)
            _close(got[key], np.asarray(theirs[key]), RTOL_JAX)
    assert isinstance(g["b2"], np.float32)


def test_a_float64_leaf_is_refused_naming_it(built: Built) -> None:
    compiled, vector = built.compiled("params"), _vector(built)
    _, X, t = _point("mlp")
    params = _params()
    params["b1"] = params["b1"].astype(np.float64)
    for module in (compiled, vector):
        kind, text = _message(module.gradient, params, X, t)
        assert kind is TypeError
        assert text.startswith("gradient: params['b1']: expected float32 values")
    params = _params()
    params["b2"] = float(params["b2"])  # a Python float is rounded, as NumPy does
    got = compiled.gradient(params, X, t)
    _close(got["b2"], vector.gradient(_params(), X, t)["b2"], RTOL_C)
