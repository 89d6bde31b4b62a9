"""``batch = B`` with structured arguments and results: B seeds stacked per leaf.

A function of a dict and an array returning a tuple (a vector and a scalar), and
one of a NamedTuple returning a scalar, are built with ``batch = 3`` in vector
code and in C. ``pushforward`` takes each tangent leaf with a leading axis of 3
and returns each output leaf so, ``pullback`` likewise with the cotangents: what
``jax.vmap`` of ``jax.jvp`` and ``jax.vjp`` over the seeds returns (the value of
``value_and_pushforward`` is one, not stacked). Each stacked result must equal
the unbatched module called seed by seed; another number of seeds, or a leaf of
the wrong shape, is refused naming the operator, the seed and the leaf.
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
from typing import NamedTuple

import numpy as np


class Layer(NamedTuple):
    w: np.ndarray
    scale: float


def two(params, b, c):
    u = np.tanh(params["W"] * b[0]) * params["s"] + c
    return u, np.sum(u * u) + b @ b


def layer(p):
    return np.sum(np.sin(p.w) * p.scale) + p.scale**2


def fit(params, X):
    pred = X @ params["W"] + params["b"]
    return pred, {"mean": np.mean(pred)}
"""

INPUTS = {
    "two": (
        '[{ name = "params", tree = { W = { shape = [3] }, s = { shape = [] } } }, '
        '{ name = "b", shape = [2] }]\n'
        'contexts = [{ name = "c", shape = [3] }]'
    ),
    "layer": (
        '[{ name = "p", tree = { w = { shape = [2] }, scale = { shape = [] } }, '
        'type = "functions.py:Layer" }]'
    ),
}
OPERATORS = ["pushforward", "value_and_pushforward", "pullback", "value_and_pullback"]
EMITS = ("vector", "c")
B = 3


def _config() -> str:
    parts = ['[difgen]\noutput_dir = "out"\n']
    quoted = ", ".join(f'"{op}"' for op in OPERATORS)
    parts += [
        f'[[module]]\nname = "{name}_{emit}_{batch}"\n'
        f'function = "functions.py:{name}"\nbackend = "trace"\n'
        f'emit = "{emit}"\nbatch = {batch}\noperators = [{quoted}]\n'
        f"inputs = {inputs}\n"
        for name, inputs in INPUTS.items()
        for emit in EMITS
        for batch in (B, 1)
    ]
    parts += [
        f'[[module]]\nname = "fit_{emit}"\nfunction = "functions.py:fit"\n'
        f'backend = "trace"\nemit = "{emit}"\nbatch = {B}\nhas_aux = true\n'
        'operators = ["pushforward", "value_and_pullback"]\n'
        'inputs = [{ name = "params", tree = { W = { shape = [3] }, b = { shape = [] } } }]\n'
        'contexts = [{ name = "X", shape = [4, 3] }]\n'
        for emit in EMITS
    ]
    return "\n".join(parts)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    directory = tmp_path_factory.mktemp("batch_structured")
    (directory / "functions.py").write_text(SOURCE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return BuiltConfig(directory, _config())


_IMPORTED: dict[Any, Any] = {}


def _functions(built: BuiltConfig) -> Any:
    """The functions file, imported once (its Layer is one class)."""
    if built.directory not in _IMPORTED:
        _IMPORTED[built.directory] = import_file(built.directory / "functions.py")
    return _IMPORTED[built.directory]


def _module(built: BuiltConfig, name: str, emit: str, batch: int) -> Any:
    module = built.get(f"{name}_{emit}_{batch}")
    if emit == "c":
        assert module.COMPILED, module.C_FALLBACK_REASON
    return module


def _primals(built: BuiltConfig, name: str) -> tuple[Any, ...]:
    rng = np.random.default_rng(1)
    if name == "two":
        params = {"W": rng.uniform(-1, 1, 3), "s": 0.7}
        return params, rng.uniform(-1, 1, 2), rng.uniform(-1, 1, 3)
    Layer = _functions(built).Layer
    return (Layer(rng.uniform(-1, 1, 2), 1.3),)


def _seeds(built: BuiltConfig, name: str, op: str) -> Any:
    """B stacked seeds (a leading axis on every leaf), and the number of
    differentiated arguments."""
    rng = np.random.default_rng(6)
    if "pushforward" in op:
        if name == "two":
            tangent = (
                {"W": rng.uniform(-1, 1, (B, 3)), "s": rng.uniform(-1, 1, B)},
                rng.uniform(-1, 1, (B, 2)),
            )
            return tangent
        Layer = _functions(built).Layer
        return Layer(rng.uniform(-1, 1, (B, 2)), rng.uniform(-1, 1, B))
    if name == "two":
        return (rng.uniform(-1, 1, (B, 3)), rng.uniform(-1, 1, B))
    return rng.uniform(-1, 1, B)


def _seed(value: Any, i: int) -> Any:
    """Seed ``i`` of the stacked seeds."""
    if isinstance(value, dict):
        return {k: v[i] for k, v in value.items()}
    if isinstance(value, tuple):
        return (
            type(value)(*(_seed(v, i) for v in value))
            if hasattr(value, "_fields")
            else tuple(_seed(v, i) for v in value)
        )
    return value[i]


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for k in sorted(value) for leaf in _leaves(value[k])]
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _jax(built: BuiltConfig, name: str) -> tuple[Any, Any]:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    fn = getattr(_functions(built), name)
    return jax, types.FunctionType(fn.__code__, {**fn.__globals__, "np": jnp})


def _call(module: Any, name: str, op: str, primals: tuple[Any, ...], seed: Any) -> Any:
    if name == "two":
        params, b, c = primals
        return getattr(module, op)(params, b, seed, c)
    return getattr(module, op)(primals[0], seed)


CASES = [(name, op) for name in INPUTS for op in OPERATORS]


@pytest.mark.parametrize("emit", EMITS)
@pytest.mark.parametrize(("name", "op"), CASES)
def test_stacked_seeds_equal_vmap_and_the_one_seed_module(
    built: BuiltConfig, emit: str, name: str, op: str
) -> None:
    jax, fn = _jax(built, name)
    primals = _primals(built, name)
    seeds = _seeds(built, name, op)
    module = _module(built, name, emit, B)
    got = _call(module, name, op, primals, seeds)
    n = 2 if name == "two" else 1
    diff = primals[:n]
    rest = primals[n:]

    def f(*p: Any) -> Any:
        return fn(*p, *rest)

    if "pushforward" in op:
        tangents = seeds if n > 1 else (seeds,)
        value = f(*diff)
        want = jax.vmap(lambda *t: jax.jvp(f, diff, t)[1])(*tangents)
    else:
        value, vjp = jax.vjp(f, *diff)
        want = jax.vmap(lambda w: vjp(w))(seeds)
        want = want if n > 1 else want[0]
    if op.startswith("value_and"):
        got_value, got = got
        for g, w in zip(_leaves(got_value), _leaves(value), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)
    got_leaves, want_leaves = _leaves(got), _leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        assert np.shape(g) == np.shape(w) and np.shape(g)[0] == B
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)
    one = _module(built, name, emit, 1)
    for i in range(B):
        single = _call(one, name, op, primals, _seed(seeds, i))
        if op.startswith("value_and"):
            single = single[1]
        for g, s in zip(got_leaves, _leaves(single), strict=True):
            np.testing.assert_allclose(np.asarray(g)[i], s, rtol=1e-13, atol=1e-14)
    if op == "pushforward" and name == "two":
        assert type(got) is tuple and isinstance(got[0], np.ndarray)
    if op == "pullback" and name == "layer":
        assert type(got).__name__ == "Layer" and got.w.shape == (B, 2)


@pytest.mark.parametrize("emit", EMITS)
def test_another_number_of_seeds_is_refused(built: BuiltConfig, emit: str) -> None:
    module = _module(built, "two", emit, B)
    params, b, c = _primals(built, "two")
    dx = _seeds(built, "two", "pushforward")
    few = ({"W": dx[0]["W"][:2], "s": dx[0]["s"][:2]}, dx[1][:2])
    with pytest.raises(ValueError, match=r"pushforward: dx: expected 3 stacked seeds"):
        module.pushforward(params, b, few, c)
    mixed = ({"W": dx[0]["W"][:2], "s": dx[0]["s"]}, dx[1])
    with pytest.raises(ValueError, match=r"pushforward: dx\[0\]\['s'\]"):
        module.pushforward(params, b, mixed, c)
    with pytest.raises(ValueError, match=r"pushforward: dx\[1\]"):
        module.pushforward(params, b, (dx[0], dx[1][:, :1]), c)
    dy = _seeds(built, "two", "pullback")
    with pytest.raises(ValueError, match=r"pullback: dy: expected 3 stacked seeds"):
        module.pullback(params, b, (dy[0][:1], dy[1][:1]), c)


@pytest.mark.parametrize("emit", EMITS)
def test_aux_is_returned_once_beside_the_stacked_results(
    built: BuiltConfig, emit: str
) -> None:
    """The aux value depends on the primals only: one, not one per seed."""
    module = built.get(f"fit_{emit}")
    if emit == "c":
        assert module.COMPILED, module.C_FALLBACK_REASON
    params = {"W": np.array([1.0, 2.0, 3.0]), "b": 0.5}
    X = np.arange(12.0).reshape(4, 3)
    dx = {"W": np.eye(3)[:B], "b": np.array([0.0, 1.0, 0.0])}
    jvp, aux = module.pushforward(params, dx, X)
    assert jvp.shape == (B, 4) and aux == {"mean": pytest.approx(35.5)}
    np.testing.assert_allclose(jvp, [X[:, 0], X[:, 1] + 1.0, X[:, 2]], rtol=1e-15)
    dy = np.arange(B * 4.0).reshape(B, 4)
    (value, aux), vjp = module.value_and_pullback(params, dy, X)
    np.testing.assert_allclose(value, X @ params["W"] + 0.5, rtol=1e-15)
    assert aux == {"mean": pytest.approx(35.5)}
    np.testing.assert_allclose(vjp["W"], dy @ X, rtol=1e-15)
    np.testing.assert_allclose(vjp["b"], dy.sum(axis=1), rtol=1e-15)
