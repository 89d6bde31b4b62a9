"""``points = true`` with structured arguments: every leaf of ``inputs`` carries a
leading axis of points unless it (or its input) says ``per_point = false``, and
each ``<op>_points`` returns the operator's structure with a leading axis of points
on every leaf, as ``jax.vmap(op, in_axes=...)`` does; in C too. Mistakes name the
operator, the argument and the leaf. And the sparse jacobian of a structured
function: one CSR array over the flat vectors (``flat = true``), equal to the
dense jacobian's blocks."""

from __future__ import annotations

import shutil
import subprocess
import sys
import types
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import difgen
import structured_points_functions as functions
from conftest import SUPPORT, import_file
from difgen.errors import ConfigError

SOURCE = SUPPORT / "structured_points_functions.py"
TOLERANCE = 1e-12
LAYER = 'type = "structured_points_functions.py:Layer"'
MODULES = {
    "logistic": (
        "logistic",
        '["gradient", "value_and_gradient", "hvp"]',
        (
            'inputs = [{ name = "params", tree = { W = { shape = [3] }, b = { shape = [] } }, '
            "per_point = false }]\n"
            'contexts = [{ name = "X", shape = [3], per_point = true }, '
            '{ name = "y", shape = [], per_point = true }]'
        ),
    ),
    "mixed": (
        "mixed",
        '["gradient", "jacobian", "hvp"]',
        (
            'inputs = [{ name = "theta", tree = { a = { shape = [2], per_point = false }, '
            's = { shape = [] } } }, { name = "data", tree = { u = { shape = [2] } } }]'
        ),
    ),
    "weighted": (
        "weighted",
        '["gradient"]',
        (
            'inputs = [{ name = "theta", tree = { a = { shape = [2], per_point = false }, '
            "s = { shape = [] } } }]\n"
            'contexts = [{ name = "w", shape = [2], per_point = true }]'
        ),
    ),
    "layer": (
        "layer",
        '["jacobian", "pushforward", "pullback"]',
        (
            'inputs = [{ name = "p", tree = { W = { shape = [3, 2] }, b = { shape = [2] } }, '
            f"{LAYER}, per_point = false }}]\n"
            'contexts = [{ name = "X", shape = [3], per_point = true }]'
        ),
    ),
    "pair": (
        "pair",
        '["jacobian", "pullback"]',
        (
            'inputs = [{ name = "ws", tree = [{ shape = [3] }, { shape = [3] }], '
            'kind = "tuple" }]'
        ),
    ),
}
CONFIG = """
[[module]]
name = "{name}{suffix}"
function = "structured_points_functions.py:{function}"
backend = "trace"
emit = "{emit}"
operators = {operators}
{body}
points = true
"""


class Built:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        text = '[difgen]\noutput_dir = "out"\n'
        for name, (function, operators, body) in MODULES.items():
            for suffix, emit in (("", "auto"), ("_c", "c")):
                text += CONFIG.format(
                    name=name,
                    suffix=suffix,
                    function=function,
                    operators=operators,
                    body=body,
                    emit=emit,
                )
        shutil.copy(SOURCE, directory / SOURCE.name)
        config = directory / "difgen.toml"
        config.write_text(text)
        difgen.build(config, compile=True)
        self.modules: dict[str, ModuleType] = {}

    def get(self, name: str) -> ModuleType:
        if name not in self.modules:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                self.modules[name] = import_file(self.directory / "out" / f"{name}.py")
        return self.modules[name]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return Built(tmp_path_factory.mktemp("structured_points"))


def _jax() -> Any:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


def _under_jax(name: str) -> Any:
    import jax.numpy as jnp

    fn = getattr(functions, name)
    return types.FunctionType(fn.__code__, {**fn.__globals__, "np": jnp})


def _close(got: Any, want: Any) -> None:
    jax = _jax()
    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    assert got_tree == want_tree
    for a, b in zip(got_leaves, want_leaves):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(a, b, rtol=TOLERANCE, atol=TOLERANCE)


def _hvp(f: Any, primal: Any, tangent: Any, *data: Any) -> Any:
    jax = _jax()
    return jax.jvp(jax.grad(lambda p: f(p, *data)), (primal,), (tangent,))[1]


@pytest.mark.parametrize("emit", ["", "_c"])
@pytest.mark.parametrize("k", [0, 1, 60])
def test_shared_dict_parameters_equal_jax_vmap(built: Built, emit: str, k: int) -> None:
    jax = _jax()
    mod = built.get("logistic" + emit)
    rng = np.random.default_rng(k)
    params = {"W": rng.normal(size=3), "b": 0.4}
    X, y = rng.normal(size=(k, 3)), rng.normal(size=k)
    f = _under_jax("logistic")
    _close(
        mod.gradient_points(params, X, y),
        jax.vmap(jax.grad(f), (None, 0, 0))(params, X, y),
    )
    value, gradient = mod.value_and_gradient_points(params, X, y)
    _close(value, jax.vmap(f, (None, 0, 0))(params, X, y))
    assert gradient["W"].shape == (k, 3) and gradient["b"].shape == (k,)
    v = {"W": rng.normal(size=(k, 3)), "b": rng.normal(size=k)}
    want = jax.vmap(lambda t, a, b: _hvp(f, params, t, a, b))(v, X, y)
    _close(mod.hvp_points(params, v, X, y), want)


@pytest.mark.parametrize("emit", ["", "_c"])
def test_a_shared_leaf_among_per_point_ones_equals_jax_in_axes(
    built: Built, emit: str
) -> None:
    jax = _jax()
    mod = built.get("mixed" + emit)
    rng = np.random.default_rng(1)
    k = 40
    theta = {"a": rng.normal(size=2), "s": rng.normal(size=k)}
    data = {"u": rng.normal(size=(k, 2))}
    axes = ({"a": None, "s": 0}, {"u": 0})
    f = _under_jax("mixed")
    want = jax.vmap(jax.grad(f, argnums=(0, 1)), in_axes=axes)(theta, data)
    _close(mod.gradient_points(theta, data), want)
    _close(mod.jacobian_points(theta, data), want)  # a scalar output's jacobian
    v = (
        {"a": rng.normal(size=(k, 2)), "s": rng.normal(size=k)},
        {"u": rng.normal(size=(k, 2))},
    )

    def hvp(t: Any, s: Any, u: Any) -> Any:
        point = ({"a": theta["a"], "s": s}, {"u": u})
        return jax.jvp(jax.grad(lambda p: f(*p)), (point,), (t,))[1]

    _close(mod.hvp_points(theta, data, v), jax.vmap(hvp)(v, theta["s"], data["u"]))


@pytest.mark.parametrize("emit", ["", "_c"])
def test_namedtuple_parameters_equal_jax_vmap(built: Built, emit: str) -> None:
    jax = _jax()
    import jax.numpy as jnp

    mod = built.get("layer" + emit)
    rng = np.random.default_rng(2)
    k = 25
    p = mod.Layer(W=rng.normal(size=(3, 2)), b=rng.normal(size=2))
    X = rng.normal(size=(k, 3))
    f = _under_jax("layer")
    theirs = functions.Layer(jnp.asarray(p.W), jnp.asarray(p.b))
    jacobian = mod.jacobian_points(p, X)
    assert type(jacobian).__name__ == "Layer" and jacobian.W.shape == (k, 2, 3, 2)
    _close(tuple(jacobian), tuple(jax.vmap(jax.jacobian(f), (None, 0))(theirs, X)))
    dx = mod.Layer(W=rng.normal(size=(k, 3, 2)), b=rng.normal(size=(k, 2)))
    want = jax.vmap(
        lambda t, x: jax.jvp(lambda q: f(q, x), (theirs,), (functions.Layer(*t),))[1]
    )(tuple(dx), X)
    _close(mod.pushforward_points(p, dx, X), want)
    dy = rng.normal(size=(k, 2))
    back = jax.vmap(lambda c, x: jax.vjp(lambda q: f(q, x), theirs)[1](c)[0])(dy, X)
    _close(tuple(mod.pullback_points(p, dy, X)), tuple(back))


@pytest.mark.parametrize("emit", ["", "_c"])
def test_tuple_inputs_and_outputs_all_per_point(built: Built, emit: str) -> None:
    jax = _jax()
    mod = built.get("pair" + emit)
    rng = np.random.default_rng(3)
    k = 30
    ws = (rng.normal(size=(k, 3)), rng.normal(size=(k, 3)))
    f = _under_jax("pair")
    jacobian = mod.jacobian_points(ws)
    _close(jacobian, jax.vmap(jax.jacobian(f))(ws))
    dy = (rng.normal(size=(k, 3)), rng.normal(size=(k, 3)))
    _close(
        mod.pullback_points(ws, dy),
        jax.vmap(lambda w, c: jax.vjp(f, w)[1](c)[0])(ws, dy),
    )


@pytest.mark.parametrize("emit", ["", "_c"])
def test_per_point_leaves_with_a_per_point_context(built: Built, emit: str) -> None:
    jax = _jax()
    rng = np.random.default_rng(6)
    theta = {"a": rng.normal(size=2), "s": rng.normal(size=9)}
    w = rng.normal(size=(9, 2))
    f = _under_jax("weighted")
    want = jax.vmap(jax.grad(f), in_axes=({"a": None, "s": 0}, 0))(theta, w)
    _close(built.get("weighted" + emit).gradient_points(theta, w), want)


def test_the_rows_are_the_one_point_operators(built: Built) -> None:
    mod = built.get("mixed_c")
    assert mod.COMPILED and mod.PYTHON_OPERATORS == ()
    rng = np.random.default_rng(4)
    theta = {"a": rng.normal(size=2), "s": rng.normal(size=5)}
    data = {"u": rng.normal(size=(5, 2))}
    rows = mod.gradient_points(theta, data)
    one = mod.gradient({"a": theta["a"], "s": theta["s"][2]}, {"u": data["u"][2]})
    np.testing.assert_array_equal(rows[0]["a"][2], one[0]["a"])
    np.testing.assert_array_equal(rows[1]["u"][2], one[1]["u"])


@pytest.mark.parametrize("emit", ["", "_c"])
def test_mistakes_name_the_argument_and_the_leaf(built: Built, emit: str) -> None:
    mod = built.get("mixed" + emit)
    theta = {"a": np.ones(2), "s": np.ones(4)}
    data = {"u": np.ones((4, 2))}
    cases = [
        (
            ({"a": np.ones(2)}, data),
            r"gradient_points: theta: expected a dict .*missing 's'",
        ),
        (
            ({**theta, "c": 1.0}, data),
            r"gradient_points: theta: expected a dict .*unexpected 'c'",
        ),
        (
            ({"a": np.ones((4, 2)), "s": theta["s"]}, data),
            r"gradient_points: theta\['a'\]: expected shape \(2,\), got shape \(4, 2\)",
        ),
        (
            (theta, {"u": np.ones((4, 3))}),
            r"gradient_points: data\['u'\]: expected shape \(k, 2\) for k points",
        ),
        (
            (theta, {"u": np.ones((5, 2))}),
            r"gradient_points: data\['u'\]: has 5 points .*but theta\['s'\] has 4",
        ),
        (
            ({"a": np.ones(2), "s": 1.0}, data),
            r"gradient_points: theta\['s'\]: expected shape \(k,\) for k points",
        ),
    ]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            mod.gradient_points(*args)
    with pytest.raises(TypeError, match=r"gradient_points: theta: expected a dict"):
        mod.gradient_points([1.0, 2.0], data)
    with pytest.raises(ValueError, match=r"hvp_points: v\[1\]\['u'\]: has 3 points"):
        v = ({"a": np.ones((4, 2)), "s": np.ones(4)}, {"u": np.ones((3, 2))})
        mod.hvp_points(theta, data, v)
    weighted = built.get("weighted" + emit)
    with pytest.raises(
        ValueError, match=r"gradient_points: w: has 3 points .*but theta\['s'\] has 4"
    ):
        weighted.gradient_points(theta, np.ones((3, 2)))
    layer = built.get("layer" + emit)
    with pytest.raises(TypeError, match=r"jacobian_points: p: expected a Layer"):
        layer.jacobian_points({"W": np.ones((3, 2)), "b": np.ones(2)}, np.ones((2, 3)))
    pair = built.get("pair" + emit)
    with pytest.raises(ValueError, match=r"jacobian_points: ws: expected a tuple of 2"):
        pair.jacobian_points((np.ones((2, 3)),))


def test_structured_points_modules_pass_mypy_strict(built: Built) -> None:
    paths = [str(built.directory / "out" / f"{name}.py") for name in MODULES]
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *paths],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def _build_one(tmp_path: Path, body: str, operators: str = '["jacobian"]') -> Any:
    tmp_path.mkdir(parents=True, exist_ok=True)
    shutil.copy(SOURCE, tmp_path / SOURCE.name)
    config = tmp_path / "difgen.toml"
    config.write_text(
        '[difgen]\noutput_dir = "out"\n'
        + CONFIG.format(
            name="one",
            suffix="",
            function="residuals",
            operators=operators,
            body=body,
            emit="auto",
        ).replace("points = true\n", "")
    )
    difgen.build(config)
    return import_file(tmp_path / "out" / "one.py")


INPUTS = (
    'inputs = [{ name = "p", tree = { a = { shape = [4] }, b = { shape = [2] } } }, '
    '{ name = "q", shape = [4] }]'
)


def test_the_sparse_jacobian_is_one_csr_array_over_the_flat_vectors(
    tmp_path: Path,
) -> None:
    sparse = _build_one(tmp_path / "sparse", INPUTS + "\nsparse = true\nflat = true")
    dense = _build_one(tmp_path / "dense", INPUTS)
    rng = np.random.default_rng(5)
    p, q = {"a": rng.normal(size=4), "b": rng.normal(size=2)}, rng.normal(size=4)
    x = np.concatenate([p["a"], p["b"], q])  # the layout the docstring lists
    csr = sparse.jacobian(x)
    assert type(csr).__name__ == "csr_array" and csr.shape == (6, 10)
    assert csr.nnz == 4 + 4 + 2 + 2  # a**2 - q, and sin(b) * q[:2]
    nested = dense.jacobian(p, q)  # by output, then input (jax.jacobian)
    full = np.hstack([nested[0]["a"], nested[0]["b"], nested[1]])
    np.testing.assert_array_equal(csr.toarray(), full)
    assert "x[0:4]: p['a'] (4,)" in sparse.__doc__


def test_a_nested_sparse_jacobian_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'sparse' with 'inputs' needs flat = true"):
        _build_one(tmp_path, INPUTS + "\nsparse = true")
