"""``has_aux = true`` with ``points = true``: each point's aux value, stacked.

A dict of parameters (one leaf per point, one shared) with a shared float
context, a per-point float target and a per-point int64 label, and a function of
two arguments returning a tuple aux (one leaf that depends on shared values only),
are built in vector code and in C. Every ``<op>_points`` must return what
``jax.vmap`` of the operator with ``has_aux=True`` returns (aux per point, never
differentiated, its structure kept, each leaf with the points axis in front) and
what the one-point operator returns point by point; NaN at one point stays in its
row of the aux value too; wrong shapes and numbers of points are refused naming
the argument.
"""

from __future__ import annotations

import types
import warnings
from typing import Any

import numpy as np
import pytest

from compiled import BuiltConfig
from conftest import import_file

SOURCE = """
import numpy as np


def fit(params, X, y, label):
    pred = X @ params["W"] + params["b"]
    r = pred - y
    return np.sum(r * r) + params["W"][label] ** 2, {
        "pred": pred,
        "picked": params["W"][label],
        "offset": params["b"] * 2.0,
    }


def pair(a, b, c):
    value = np.sum(np.sin(a) * b) + np.sum(b * b) * c
    return value, (a * b, np.sum(b) * c)
"""

MODULES = {
    "fit": (
        ["f", "gradient", "value_and_gradient", "hvp"],
        (
            '[{ name = "params", tree = { W = { shape = [3] }, '
            "b = { shape = [], per_point = false } } }]"
        ),
        (
            '[{ name = "X", shape = [4, 3], per_point = false }, '
            '{ name = "y", shape = [4], per_point = true }, '
            '{ name = "label", shape = [], dtype = "int64", per_point = true }]'
        ),
    ),
    "pair": (
        ["f", "gradient", "value_and_gradient", "jacobian", "pullback"],
        (
            '[{ name = "a", shape = [2] }, { name = "b", shape = [2, 2], '
            "per_point = false }]"
        ),
        '[{ name = "c", shape = [], per_point = false }]',
    ),
}
EMITS = ("vector", "c")
K = 6


def _config() -> str:
    parts = ['[difgen]\noutput_dir = "out"\n']
    for emit in EMITS:
        for name, (ops, inputs, contexts) in MODULES.items():
            quoted = ", ".join(f'"{op}"' for op in ops)
            parts.append(
                f'[[module]]\nname = "{name}_{emit}"\n'
                f'function = "functions.py:{name}"\nbackend = "trace"\n'
                f'emit = "{emit}"\npoints = true\nhas_aux = true\n'
                f"operators = [{quoted}]\ninputs = {inputs}\ncontexts = {contexts}\n"
            )
    return "\n".join(parts)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    directory = tmp_path_factory.mktemp("aux_points")
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
    import jax.numpy as jnp

    fn = getattr(import_file(built.directory / "functions.py"), name)
    return types.FunctionType(fn.__code__, {**fn.__globals__, "np": jnp})


def _arguments(name: str, seed: int = 4) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """(the points arguments, their jax.vmap in_axes), the inputs first."""
    rng = np.random.default_rng(seed)
    if name == "fit":
        params = {"W": rng.uniform(-1, 1, (K, 3)), "b": 0.3}
        X = rng.uniform(-1, 1, (4, 3))
        y = rng.uniform(-1, 1, (K, 4))
        label = rng.integers(0, 3, K).astype(np.int64)
        return (params, X, y, label), ({"W": 0, "b": None}, None, 0, 0)
    a = rng.uniform(-1, 1, (K, 2))
    b = rng.uniform(-1, 1, (2, 2))
    return (a, b, 0.7), (0, None, None)


def _seed(name: str, op: str, seed: int = 8) -> tuple[Any, tuple[Any, ...]]:
    """(the seed argument, its in_axes), or None."""
    rng = np.random.default_rng(seed)
    if op == "hvp":
        return {"W": rng.uniform(-1, 1, (K, 3)), "b": rng.uniform(-1, 1, K)}, (
            {"W": 0, "b": 0},
        )
    if op == "pullback":
        return rng.uniform(-1, 1, K), (0,)
    return None, ()


def _at(value: Any, axis: Any, i: int) -> Any:
    """Point ``i`` of an argument whose points axis is ``axis`` (a tree of them)."""
    if isinstance(value, dict):
        return {k: _at(v, axis[k], i) for k, v in value.items()}
    return value if axis is None else value[i]


def _reference(jax: Any, fn: Any, name: str, op: str) -> Any:
    """The operator on one point, with has_aux=True, as JAX computes it."""
    n = 1 if name == "fit" else 2
    argnums = 0 if n == 1 else (0, 1)
    if op == "f":
        return fn
    if op == "gradient":
        return jax.grad(fn, argnums=argnums, has_aux=True)
    if op == "value_and_gradient":
        return jax.value_and_grad(fn, argnums=argnums, has_aux=True)
    if op == "jacobian":
        return jax.jacobian(fn, argnums=argnums, has_aux=True)
    if op == "hvp":

        def hvp(v: Any, *args: Any) -> Any:
            grad = lambda p: jax.grad(fn, has_aux=True)(p, *args[1:])[0]
            aux = fn(*args)[1]
            return jax.jvp(grad, (args[0],), (v,))[1], aux

        return hvp

    def pullback(w: Any, *args: Any) -> Any:
        _, vjp, aux = jax.vjp(lambda *p: fn(*p, *args[n:]), *args[:n], has_aux=True)
        return vjp(w), aux

    return pullback


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for k in sorted(value) for leaf in _leaves(value[k])]
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _structure(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _structure(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return tuple(_structure(v) for v in value)
    return "leaf"


CALLS = [(name, op) for name, (ops, _, _) in MODULES.items() for op in ops]


@pytest.mark.parametrize("emit", EMITS)
@pytest.mark.parametrize(("name", "op"), CALLS)
def test_points_with_aux_equal_vmap_and_the_loop(
    built: BuiltConfig, emit: str, name: str, op: str
) -> None:
    jax = _jax()
    module = _module(built, name, emit)
    args, axes = _arguments(name)
    seed, seed_axes = _seed(name, op)
    seeds = () if seed is None else (seed,)
    n = 1 if name == "fit" else 2
    got = getattr(module, f"{op}_points")(*args[:n], *seeds, *args[n:])
    fn = _under_jax(built, name)
    want = jax.vmap(_reference(jax, fn, name, op), in_axes=(*seed_axes, *axes))(
        *seeds, *args
    )
    if op == "pullback":  # JAX's vjp gives a tuple of the primals' cotangents
        want = (want[0], want[1])
    assert _structure(got) == _structure(want)
    for g, w in zip(_leaves(got), _leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.shape[0] == K
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    one = getattr(module, op)
    for i in range(K):
        at = [_at(a, x, i) for a, x in zip(args, axes)]
        point = one(*at[:n], *(_at(s, x, i) for s, x in zip(seeds, seed_axes)), *at[n:])
        assert _structure(point) == _structure(got)
        for g, p in zip(_leaves(got), _leaves(point)):
            np.testing.assert_allclose(np.asarray(g)[i], p, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("emit", EMITS)
def test_aux_of_shared_values_comes_out_with_the_points_axis(
    built: BuiltConfig, emit: str
) -> None:
    """``offset`` depends on the shared ``b`` only; jax.vmap batches it too."""
    module = _module(built, "fit", emit)
    (params, X, y, label), _ = _arguments("fit")
    _, aux = module.gradient_points(params, X, y, label)
    assert aux["offset"].shape == (K,)
    np.testing.assert_array_equal(aux["offset"], np.full(K, 0.6))
    np.testing.assert_array_equal(aux["picked"], params["W"][np.arange(K), label])


@pytest.mark.parametrize("emit", EMITS)
def test_nan_at_one_point_stays_in_its_row(built: BuiltConfig, emit: str) -> None:
    module = _module(built, "fit", emit)
    (params, X, y, label), _ = _arguments("fit")
    params = {"W": params["W"].copy(), "b": params["b"]}
    params["W"][3, 1] = np.nan
    with np.errstate(invalid="ignore"):
        (value, aux), grad = module.value_and_gradient_points(params, X, y, label)
    assert np.isnan(value[3]) and not np.isnan(np.delete(value, 3)).any()
    assert np.isnan(aux["pred"][3]).all() and np.isnan(aux["pred"]).sum() == 4
    assert not np.isnan(aux["offset"]).any()
    assert (
        np.isnan(grad["W"][3]).all() and not np.isnan(np.delete(grad["W"], 3, 0)).any()
    )


@pytest.mark.parametrize("emit", EMITS)
def test_zero_points(built: BuiltConfig, emit: str) -> None:
    module = _module(built, "fit", emit)
    (_, X, y, label), _ = _arguments("fit")
    none = {"W": np.zeros((0, 3)), "b": 0.3}
    grad, aux = module.gradient_points(none, X, y[:0], label[:0])
    assert grad["W"].shape == (0, 3) and aux["pred"].shape == (0, 4)


@pytest.mark.parametrize("emit", EMITS)
def test_wrong_arguments_are_refused_naming_them(built: BuiltConfig, emit: str) -> None:
    module = _module(built, "fit", emit)
    (params, X, y, label), _ = _arguments("fit")
    with pytest.raises(ValueError, match=r"gradient_points: params\['W'\]: expected"):
        module.gradient_points({"W": params["W"][:, :2], "b": 0.3}, X, y, label)
    with pytest.raises(ValueError, match=r"gradient_points: y"):
        module.gradient_points(params, X, y[:2], label)
    with pytest.raises(ValueError, match=r"gradient_points: label"):
        module.gradient_points(params, X, y, label[:2])
    with pytest.raises(TypeError, match=r"gradient_points: label"):
        module.gradient_points(params, X, y, label.astype(float))
    with pytest.raises(ValueError, match=r"gradient_points: X"):
        module.gradient_points(params, X[:2], y, label)


FLOAT32_SOURCE = """
import numpy as np


def fit(params, X):
    pred = np.tanh(X @ params["W"] + params["b"])
    return np.sum(pred * pred), {"pred": pred}
"""


def test_float32_trees_with_aux_and_float64_accumulation(tmp_path: Any) -> None:
    """The three together: float32 points of a tree with aux, in C accumulating
    in double, equal the one-point operators and the NumPy twin."""
    (tmp_path / "functions.py").write_text(FLOAT32_SOURCE)
    tree = (
        '[{ name = "params", tree = { W = { shape = [3], dtype = "float32" }, '
        'b = { shape = [], dtype = "float32", per_point = false } } }]'
    )
    config = ['[difgen]\noutput_dir = "out"\n']
    config += [
        f'[[module]]\nname = "fit_{emit}"\nfunction = "functions.py:fit"\n'
        f'backend = "trace"\nemit = "{emit}"\noperators = ["gradient"]\n'
        f"inputs = {tree}\n"
        'contexts = [{ name = "X", shape = [4, 3], dtype = "float32", '
        "per_point = true }]\n"
        'has_aux = true\npoints = true\naccumulate = "float64"\n'
        for emit in EMITS
    ]
    built = BuiltConfig(tmp_path, "\n".join(config))
    rng = np.random.default_rng(0)
    params = {
        "W": rng.standard_normal((K, 3)).astype(np.float32),
        "b": np.float32(0.1),
    }
    X = rng.standard_normal((K, 4, 3)).astype(np.float32)
    compiled = built.get("fit_c")
    assert compiled.COMPILED and compiled.PYTHON_OPERATORS == ()
    grad, aux = compiled.gradient_points(params, X)
    twin_grad, twin_aux = built.get("fit_vector").gradient_points(params, X)
    for got in (grad["W"], grad["b"], aux["pred"]):
        assert got.dtype == np.float32 and got.shape[0] == K
    for i in range(K):
        one_grad, one_aux = compiled.gradient(
            {"W": params["W"][i], "b": params["b"]}, X[i]
        )
        np.testing.assert_array_equal(grad["W"][i], one_grad["W"])
        np.testing.assert_array_equal(aux["pred"][i], one_aux["pred"])
    np.testing.assert_allclose(grad["W"], twin_grad["W"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(aux["pred"], twin_aux["pred"], rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match=r"gradient_points: params\['W'\]"):
        compiled.gradient_points({"W": params["W"].astype(np.float64), "b": 0.1}, X)
