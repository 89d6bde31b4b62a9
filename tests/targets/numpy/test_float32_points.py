"""float32 modules with ``points = true``: the points variants compute in float32.

Vector (NumPy) and C modules of a float32 input, of a float32 matrix input and of
a dict of float32 leaves (one per point, one shared) are built with a shared
float32 context and a per-point int64 label. Each points variant must be float32,
equal ``jax.vmap`` of the operator computed in float64 at the same float32 points
(within float32's rounding), and equal the one-point operator called point by
point; a NaN or an inf at one point stays in its row; float64 points, wrong
shapes and mismatched numbers of points are refused naming the argument.
"""

from __future__ import annotations

import types
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from compiled import BuiltConfig
from conftest import import_file

SOURCE = """
import numpy as np


def loss(x, A, y):
    r = np.tanh(A @ x) - y
    return np.sum(r * r) + np.log1p(x @ x)


def field(x, A, y):
    return np.sin(A @ x) * (1.0 + y)


def matrix(M):
    return np.sum(np.sin(M) @ M) + np.sum(M * M.T)


def params_loss(params, X):
    return np.sum(np.tanh(X * params["W"] + params["b"]) ** 2)
"""

CONTEXTS = (
    'contexts = [{ name = "A", shape = [4, 3], dtype = "float32", per_point = false }, '
    '{ name = "y", shape = [], dtype = "int64", per_point = true }]'
)
SCALAR_OPS = ["f", "gradient", "value_and_gradient", "hessian", "hvp"]
FIELD_OPS = ["f", "jacobian", "pushforward", "pullback"]
TREE = (
    '[{ name = "params", tree = { W = { shape = [3], dtype = "float32" }, '
    'b = { shape = [], dtype = "float32", per_point = false } } }]'
)
X_CONTEXT = (
    'contexts = [{ name = "X", shape = [3], dtype = "float32", per_point = true }]'
)

MODULES = {
    "loss": (SCALAR_OPS, 'input = { shape = [3], dtype = "float32" }\n' + CONTEXTS),
    "field": (FIELD_OPS, 'input = { shape = [3], dtype = "float32" }\n' + CONTEXTS),
    "matrix": (SCALAR_OPS, 'input = { shape = [2, 2], dtype = "float32" }'),
    "params_loss": (
        ["f", "gradient", "value_and_gradient", "hvp"],
        f"inputs = {TREE}\n{X_CONTEXT}",
    ),
}
EMITS = ("vector", "c")
K = 7


def _config() -> str:
    parts = ['[difgen]\noutput_dir = "out"\n']
    for emit in EMITS:
        for name, (ops, extra) in MODULES.items():
            quoted = ", ".join(f'"{op}"' for op in ops)
            parts.append(
                f'[[module]]\nname = "{name}_{emit}"\n'
                f'function = "functions.py:{name}"\nbackend = "trace"\n'
                f'emit = "{emit}"\npoints = true\noperators = [{quoted}]\n{extra}\n'
            )
    return "\n".join(parts)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    directory = tmp_path_factory.mktemp("float32_points")
    (directory / "functions.py").write_text(SOURCE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return BuiltConfig(directory, _config())


def _module(built: BuiltConfig, name: str, emit: str) -> Any:
    module = built.get(f"{name}_{emit}")
    if emit == "c":
        assert module.COMPILED, module.C_FALLBACK_REASON
    return module


def _jax() -> Any:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


def _under_jax(built: BuiltConfig, name: str) -> Any:
    """The function ``name`` of the built functions file, its ``np`` jax.numpy."""
    import jax.numpy as jnp

    fn = getattr(import_file(built.directory / "functions.py"), name)
    return types.FunctionType(fn.__code__, {**fn.__globals__, "np": jnp})


def _points(name: str, seed: int = 5) -> tuple[Any, ...]:
    """(per-point x, then the contexts) for K points, float32."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    if name in ("loss", "field"):
        X = rng.uniform(-1, 1, (K, 3)).astype(f32)
        A = rng.uniform(-1, 1, (4, 3)).astype(f32)
        y = rng.integers(-2, 3, K).astype(np.int64)
        return X, A, y
    if name == "matrix":
        return (rng.uniform(-1, 1, (K, 2, 2)).astype(f32),)
    params = {"W": rng.uniform(-1, 1, (K, 3)).astype(f32), "b": f32(0.25)}
    return params, rng.uniform(-1, 1, (K, 3)).astype(f32)


def _seed(shape: tuple[int, ...], seed: int = 9) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (K, *shape)).astype(np.float32)


def _close(got: Any, want: Any, rtol: float) -> None:
    got = np.asarray(got)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    scale = max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=0, atol=rtol * scale)


def _float32(value: Any) -> None:
    for leaf in value.values() if isinstance(value, dict) else (value,):
        assert isinstance(leaf, np.ndarray) and leaf.dtype == np.float32, leaf


CALLS = [(name, op) for name, (ops, _) in MODULES.items() for op in ops]


@pytest.mark.parametrize("emit", EMITS)
@pytest.mark.parametrize(("name", "op"), CALLS)
def test_points_variant_is_float32_and_equals_vmap_and_the_loop(
    built: BuiltConfig, emit: str, name: str, op: str
) -> None:
    jax = _jax()
    module = _module(built, name, emit)
    args = _points(name)
    fn = _under_jax(built, name)
    if name == "params_loss":
        args64 = (
            {k: np.asarray(v, np.float64) for k, v in args[0].items()},
            np.asarray(args[1], np.float64),
        )
        axes: tuple[Any, ...] = ({"W": 0, "b": None}, 0)
    else:
        args64 = tuple(np.asarray(a, np.float64) for a in args)
        axes = (0, None, 0) if len(args) == 3 else (0,)
    shape = (3,) if name != "matrix" else (2, 2)
    seed: tuple[Any, ...] = ()
    if op == "hvp" and name == "params_loss":
        seed = ({"W": _seed((3,)), "b": _seed(())},)
    elif op in ("hvp", "pushforward"):
        seed = (_seed(shape),)
    elif op == "pullback":
        seed = (_seed((4,)),)
    got = getattr(module, f"{op}_points")(args[0], *seed, *args[1:])

    def seed64(s: Any) -> Any:
        if isinstance(s, dict):
            return {k: np.asarray(v, np.float64) for k, v in s.items()}
        return np.asarray(s, np.float64)

    def one(*a: Any) -> Any:
        if op == "f":
            return fn(*a)
        if op == "gradient":
            return jax.grad(fn)(*a)
        if op == "value_and_gradient":
            return jax.value_and_grad(fn)(*a)
        if op == "hessian":
            return jax.hessian(fn)(*a)
        if op == "jacobian":
            return jax.jacobian(fn)(*a)
        if op == "hvp":
            v, rest = a[0], a[1:]
            return jax.jvp(lambda p: jax.grad(fn)(p, *rest[1:]), (rest[0],), (v,))[1]
        if op == "pushforward":
            v, rest = a[0], a[1:]
            return jax.jvp(lambda p: fn(p, *rest[1:]), (rest[0],), (v,))[1]
        w, rest = a[0], a[1:]
        return jax.vjp(lambda p: fn(p, *rest[1:]), rest[0])[1](w)[0]

    seed_axes = (
        ({"W": 0, "b": 0},) if seed and isinstance(seed[0], dict) else (0,) * len(seed)
    )
    call_args = (*(seed64(s) for s in seed), *args64)
    want = jax.vmap(one, in_axes=(*seed_axes, *axes))(*call_args)
    loop = [
        getattr(module, op)(
            _point(args[0], i, ("b",)),
            *(_point(s, i) for s in seed),
            *(
                _point(a, i) if j in _per_point(name) else a
                for j, a in enumerate(args[1:], 1)
            ),
        )
        for i in range(K)
    ]
    pairs = [(got, want, loop)]
    if op == "value_and_gradient":
        pairs = [
            (got[0], want[0], [v for v, _ in loop]),
            (got[1], want[1], [g for _, g in loop]),
        ]
    for g, w, per in pairs:
        if isinstance(w, dict):
            assert isinstance(g, dict) and sorted(g) == sorted(w)
            for key in w:
                _float32(g[key])
                _close(g[key], w[key], 2e-5 * 8)
                _close(g[key], np.stack([p[key] for p in per]), 2e-6 * 8)
        else:
            _float32(g)
            _close(g, w, 2e-5 * 8)
            _close(g, np.stack([np.asarray(p) for p in per]), 2e-6 * 8)


def _per_point(name: str) -> set[int]:
    """Which arguments after the first carry the points axis."""
    return {2} if name in ("loss", "field") else {1} if name == "params_loss" else set()


def _point(value: Any, i: int, shared: tuple[str, ...] = ()) -> Any:
    """Point ``i`` of a per-point argument (its ``shared`` leaves stay)."""
    if isinstance(value, dict):
        return {k: v if k in shared else v[i] for k, v in value.items()}
    return value[i]


@pytest.mark.parametrize("emit", EMITS)
def test_nan_and_inf_stay_in_their_row(built: BuiltConfig, emit: str) -> None:
    module = _module(built, "loss", emit)
    X, A, y = _points("loss")
    X[2, 1] = np.nan
    X[4, 0] = np.inf
    with np.errstate(invalid="ignore"):
        got = module.gradient_points(X, A, y)
        ones = [module.gradient(X[i], A, y[i]) for i in range(K)]
    _float32(got)
    for i, one in enumerate(ones):
        np.testing.assert_array_equal(np.isnan(got[i]), np.isnan(one))
        finite = np.isfinite(one)
        np.testing.assert_allclose(got[i][finite], one[finite], rtol=2e-6, atol=1e-6)
    assert np.isnan(got[2]).any() and not np.isnan(got[[0, 1, 3, 5, 6]]).any()


@pytest.mark.parametrize("emit", EMITS)
def test_zero_points(built: BuiltConfig, emit: str) -> None:
    module = _module(built, "loss", emit)
    _, A, _ = _points("loss")
    got = module.gradient_points(np.zeros((0, 3), np.float32), A, np.zeros(0, np.int64))
    assert got.shape == (0, 3) and got.dtype == np.float32


@pytest.mark.parametrize("emit", EMITS)
def test_arguments_are_checked_in_float32(built: BuiltConfig, emit: str) -> None:
    module = _module(built, "loss", emit)
    X, A, y = _points("loss")
    with pytest.raises(TypeError, match=r"gradient_points: x: expected float32"):
        module.gradient_points(X.astype(np.float64), A, y)
    with pytest.raises(TypeError, match=r"gradient_points: A: expected float32"):
        module.gradient_points(X, A.astype(np.float64), y)
    with pytest.raises(ValueError, match=r"gradient_points: x: expected shape"):
        module.gradient_points(X[:, :2], A, y)
    with pytest.raises(ValueError, match=r"gradient_points: y"):
        module.gradient_points(X, A, y[:3])
    with pytest.raises(TypeError, match=r"gradient_points: y"):
        module.gradient_points(X, A, y.astype(np.float32))
    # a Python list of numbers has no dtype: it is converted to float32
    got = module.gradient_points(X.tolist(), A, y)
    _float32(got)
    np.testing.assert_array_equal(got, module.gradient_points(X, A, y))


@pytest.mark.parametrize("emit", EMITS)
def test_tree_points_are_checked(built: BuiltConfig, emit: str) -> None:
    module = _module(built, "params_loss", emit)
    params, X = _points("params_loss")
    wide = {"W": params["W"].astype(np.float64), "b": params["b"]}
    with pytest.raises(TypeError, match=r"gradient_points.*W.*float32"):
        module.gradient_points(wide, X)
    with pytest.raises(ValueError, match=r"gradient_points"):
        module.gradient_points({"W": params["W"][:, :2], "b": params["b"]}, X)
    with pytest.raises(ValueError, match=r"gradient_points"):
        module.gradient_points(params, X[:3])


@pytest.mark.parametrize(("name", "op"), CALLS)
def test_every_c_points_variant_is_compiled(
    built: BuiltConfig, name: str, op: str
) -> None:
    module = _module(built, name, "c")
    assert module.PYTHON_OPERATORS == ()
    flat = f"_{op}_points_flat" if name == "params_loss" else f"{op}_points"
    assert type(getattr(module, flat)).__name__ == "builtin_function_or_method"
    c_source = Path(module.__file__).with_name(f"{name}_c__c.c").read_text()
    assert "NPY_FLOAT" in c_source and "NPY_DOUBLE" not in c_source
