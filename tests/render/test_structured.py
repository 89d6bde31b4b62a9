"""Structured modules: several differentiated arguments, trees of arrays (dict,
tuple, list, NamedTuple, dataclass), several outputs, aux values and ``flat =
true``, against JAX (``jax.grad``, ``jax.jacobian(argnums=...)``,
``jax.hessian``, ``has_aux``) running the very same functions with ``np`` bound
to ``jax.numpy``, and against finite differences."""

from __future__ import annotations

import dataclasses
import shutil
import types
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difgen
import structured_functions as fns
from conftest import SUPPORT, import_file

jax.config.update("jax_enable_x64", True)
jax.tree_util.register_dataclass(fns.Layer, ["w", "scale"], [])

MLP_TREE = (
    "{ W1 = { shape = [3, 4] }, b1 = { shape = [4] }, "
    "W2 = { shape = [4, 1] }, b2 = { shape = [1] } }"
)
SCALAR_OUT = [
    "gradient",
    "value_and_gradient",
    "hessian",
    "hvp",
    "value_gradient_and_hessian",
    "jacobian",
    "value_and_jacobian",
    "pushforward",
    "value_and_pushforward",
    "pullback",
    "value_and_pullback",
]
MODULES = {
    "mlp_trace": ("mlp_loss", "trace", "auto", SCALAR_OUT, "mlp"),
    "mlp_sympy": ("mlp_loss", "sympy", "auto", SCALAR_OUT, "mlp"),
    "mlp_c": ("mlp_loss", "trace", "c", SCALAR_OUT, "mlp"),
    "two_sympy": (
        "two_inputs",
        "sympy",
        "auto",
        ["jacobian", "value_and_jacobian", "pushforward", "pullback"],
        "two",
    ),
    "two_trace": (
        "two_inputs",
        "trace",
        "auto",
        ["jacobian", "pushforward", "value_and_pullback"],
        "two",
    ),
    "lists_trace": ("lists", "trace", "auto", ["jacobian", "pullback"], "lists"),
    "aux_trace": (
        "classes_with_aux",
        "trace",
        "auto",
        ["gradient", "value_and_gradient", "hessian", "jacobian", "hvp"],
        "aux",
    ),
    "aux_sympy_c": (
        "classes_with_aux",
        "sympy",
        "c",
        ["gradient", "value_and_gradient", "hessian"],
        "aux",
    ),
    "scalar_leaf": (
        "scalar_leaf",
        "trace",
        "auto",
        ["derivative", "second_derivative", "value_derivative_and_second_derivative"],
        "scalar",
    ),
    "flat_mlp": ("mlp_loss", "trace", "auto", ["gradient", "hessian"], "flat"),
    "flat_aux": ("classes_with_aux", "trace", "auto", ["gradient"], "flat_aux"),
    "old_tuple": ("old_input_tuple", "trace", "auto", ["jacobian", "pullback"], "old"),
}
SIGNATURES = {
    "mlp": (
        f'inputs = [{{ name = "params", tree = {MLP_TREE} }}]\n'
        'contexts = [{ name = "X", shape = [5, 3] }, { name = "y", shape = [5] }]'
    ),
    "two": (
        'inputs = [{ name = "theta", shape = [2] }, { name = "y0", shape = [3] }]\n'
        'contexts = [{ name = "t", shape = [] }]'
    ),
    "lists": (
        'inputs = [{ name = "ws", tree = [{ shape = [3] }, { shape = [] }] },\n'
        '  { name = "pair", tree = [{ shape = [3] }, { shape = [] }], kind = "tuple" }]\n'
        'contexts = [{ name = "c", shape = [3] }]'
    ),
    "aux": (
        'inputs = [{ name = "p", tree = { b = { shape = [2] }, W = { shape = [3, 2] } },'
        ' type = "structured_functions.py:Params" },\n'
        '  { name = "layer", tree = { w = { shape = [2] }, scale = { shape = [] } },'
        ' type = "structured_functions.py:Layer" }]\n'
        'contexts = [{ name = "X", shape = [4, 3] }]\nhas_aux = true'
    ),
    "scalar": (
        'inputs = [{ name = "s", shape = [] }]\ncontexts = [{ name = "c", shape = [] }]'
    ),
    "flat": "",  # filled below
    "flat_aux": "",
    "old": 'input = { shape = [3] }\ncontexts = [{ name = "c", shape = [3] }]',
}
SIGNATURES["flat"] = SIGNATURES["mlp"] + "\nflat = true"
SIGNATURES["flat_aux"] = SIGNATURES["aux"] + "\nflat = true"


def _config() -> str:
    lines = ["[difgen]", 'output_dir = "out"', ""]
    for name, (function, backend, emit, operators, signature) in MODULES.items():
        lines += [
            "[[module]]",
            f'name = "{name}"',
            f'function = "structured_functions.py:{function}"',
            f'backend = "{backend}"',
            f'emit = "{emit}"',
            "operators = [" + ", ".join(f'"{op}"' for op in operators) + "]",
            SIGNATURES[signature],
            "",
        ]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, types.ModuleType]:
    directory = tmp_path_factory.mktemp("structured")
    shutil.copy(SUPPORT / "structured_functions.py", directory)
    (directory / "difgen.toml").write_text(_config())
    difgen.build(directory / "difgen.toml", compile=True)
    return {name: import_file(directory / "out" / f"{name}.py") for name in MODULES}


def jax_version(fn: Any) -> Any:
    """The support function with ``np`` bound to ``jax.numpy``."""
    return types.FunctionType(fn.__code__, {**fn.__globals__, "np": jnp})


def assert_trees_close(got: Any, want: Any, rtol: float = 1e-9) -> None:
    """Same structure (containers and their keys), leaves equal to rounding."""
    got_leaves, got_def = jax.tree_util.tree_flatten(got)
    want_leaves, want_def = jax.tree_util.tree_flatten(want)
    assert got_def == want_def
    for a, b in zip(got_leaves, want_leaves):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(a, np.asarray(b), rtol=rtol, atol=1e-12)


RNG = np.random.default_rng(7)
MLP_PARAMS = {
    "W1": RNG.normal(size=(3, 4)),
    "b1": RNG.normal(size=4),
    "W2": RNG.normal(size=(4, 1)),
    "b2": RNG.normal(size=1),
}
X5, Y5 = RNG.normal(size=(5, 3)), RNG.normal(size=5)


@pytest.mark.parametrize("name", ["mlp_trace", "mlp_sympy", "mlp_c"])
def test_dict_of_four_arrays_matches_jax(
    built: dict[str, types.ModuleType], name: str
) -> None:
    module = built[name]
    if name == "mlp_c":
        assert module.COMPILED, module.C_FALLBACK_REASON
    loss = jax_version(fns.mlp_loss)
    args = (MLP_PARAMS, X5, Y5)
    grad = jax.grad(loss)(*args)
    hess = jax.hessian(loss)(*args)
    assert_trees_close(module.gradient(*args), grad)
    value, gradient = module.value_and_gradient(*args)
    assert value == pytest.approx(float(loss(*args)), rel=1e-12)
    assert_trees_close(gradient, grad)
    assert_trees_close(module.hessian(*args), hess)
    assert module.hessian(*args)["W1"]["b1"].shape == (3, 4, 4)
    v = jax.tree_util.tree_map(lambda a: RNG.normal(size=np.shape(a)), MLP_PARAMS)
    hvp = jax.jvp(lambda p: jax.grad(loss)(p, X5, Y5), (MLP_PARAMS,), (v,))[1]
    assert_trees_close(module.hvp(MLP_PARAMS, v, X5, Y5), hvp)
    value, gradient, hessian = module.value_gradient_and_hessian(*args)
    assert_trees_close((gradient, hessian), (grad, hess))
    # a scalar output: the jacobian is the gradient, a pushforward a float
    assert_trees_close(module.jacobian(*args), jax.jacobian(loss)(*args))
    tangent = jax.jvp(lambda p: loss(p, X5, Y5), (MLP_PARAMS,), (v,))[1]
    assert module.pushforward(MLP_PARAMS, v, X5, Y5) == pytest.approx(float(tangent))
    assert module.value_and_pushforward(MLP_PARAMS, v, X5, Y5)[1] == pytest.approx(
        float(tangent)
    )
    assert_trees_close(module.pullback(MLP_PARAMS, 2.0, X5, Y5), _scaled(grad, 2.0))
    assert_trees_close(module.value_and_pullback(*args[:1], 1.0, X5, Y5)[1], grad)


def _scaled(tree: Any, factor: float) -> Any:
    return jax.tree_util.tree_map(lambda a: a * factor, tree)


def test_results_are_views_of_one_flat_result(
    built: dict[str, types.ModuleType],
) -> None:
    gradient = built["mlp_trace"].gradient(MLP_PARAMS, X5, Y5)

    def root(array: np.ndarray) -> np.ndarray:
        return array if array.base is None else root(array.base)

    roots = {id(root(leaf)) for leaf in gradient.values()}
    assert len(roots) == 1
    assert all(leaf.base is not None for leaf in gradient.values())


@pytest.mark.parametrize("name", ["two_sympy", "two_trace"])
def test_two_inputs_and_a_tuple_of_outputs_match_jax(
    built: dict[str, types.ModuleType], name: str
) -> None:
    module = built[name]
    f = jax_version(fns.two_inputs)
    theta, y0, t = RNG.normal(size=2), RNG.normal(size=3), 0.7
    jac = jax.jacobian(f, argnums=(0, 1))(theta, y0, t)
    assert_trees_close(module.jacobian(theta, y0, t), jac)
    assert module.jacobian(theta, y0, t)[1]["rate"][1].shape == (2, 3)
    tangents = (RNG.normal(size=2), RNG.normal(size=3))
    jvp = jax.jvp(lambda a, b: f(a, b, t), (theta, y0), tangents)[1]
    assert_trees_close(module.pushforward(theta, y0, tangents, t), jvp)
    out, vjp = jax.vjp(lambda a, b: f(a, b, t), theta, y0)
    cotangent = (RNG.normal(size=3), {"energy": 0.3, "rate": RNG.normal(size=2)})
    if "pullback" in module.__all__:
        assert_trees_close(module.pullback(theta, y0, cotangent, t), vjp(cotangent))
    else:
        value, pulled = module.value_and_pullback(theta, y0, cotangent, t)
        assert_trees_close((value, pulled), (out, vjp(cotangent)))
    assert_trees_close(module.f(theta, y0, t), f(theta, y0, t))


def test_lists_and_tuples_match_jax(built: dict[str, types.ModuleType]) -> None:
    module = built["lists_trace"]
    f = jax_version(fns.lists)
    ws, pair, c = (
        [RNG.normal(size=3), 0.4],
        (RNG.normal(size=3), -0.2),
        RNG.normal(size=3),
    )
    jac = module.jacobian(ws, pair, c)
    assert isinstance(jac[0], list) and isinstance(jac[1], tuple)
    assert_trees_close(jac, jax.jacobian(f, argnums=(0, 1))(ws, pair, c))
    dy = RNG.normal(size=3)
    _, vjp = jax.vjp(lambda a, b: f(a, b, c), ws, pair)
    assert_trees_close(module.pullback(ws, pair, dy, c), vjp(dy))


def _aux_args() -> tuple[Any, Any, Any]:
    p = fns.Params(W=RNG.normal(size=(3, 2)), b=RNG.normal(size=2))
    layer = fns.Layer(w=RNG.normal(size=2), scale=1.3)
    return p, layer, RNG.normal(size=(4, 3))


@pytest.mark.parametrize("name", ["aux_trace", "aux_sympy_c"])
def test_namedtuple_dataclass_and_aux_match_jax(
    built: dict[str, types.ModuleType], name: str
) -> None:
    module = built[name]
    if name == "aux_sympy_c":  # compiled, and aux stays the NumPy _aux_flat
        assert module.COMPILED, module.C_FALLBACK_REASON
        assert type(module._gradient_flat).__name__ == "builtin_function_or_method"
        assert type(module._aux_flat).__name__ == "function"
    p, layer, X = _aux_args()
    f = jax_version(fns.classes_with_aux)
    (value, aux), grad = jax.value_and_grad(f, argnums=(0, 1), has_aux=True)(
        p, layer, X
    )
    got_grad, got_aux = module.gradient(p, layer, X)
    assert (
        type(got_grad[0]).__name__ == "Params" and type(got_grad[1]).__name__ == "Layer"
    )
    assert np.allclose(got_grad[0].W, grad[0].W) and np.allclose(
        got_grad[1].w, grad[1].w
    )
    assert got_grad[1].scale == pytest.approx(float(grad[1].scale))
    assert_trees_close(got_aux, aux)
    (got_value, again), got_grad = module.value_and_gradient(p, layer, X)
    assert got_value == pytest.approx(float(value)) and again["parts"][
        0
    ] == pytest.approx(float(aux["parts"][0]))
    hess, hess_aux = module.hessian(p, layer, X)
    want = jax.hessian(lambda a, b: f(a, b, X)[0], argnums=(0, 1))(p, layer)
    assert np.allclose(hess[0].W[1].w, want[0].W[1].w)
    assert np.allclose(hess[1].scale[0].b, want[1].scale[0].b)
    assert_trees_close(hess_aux, aux)


def test_aux_is_not_differentiated(built: dict[str, types.ModuleType]) -> None:
    """The aux value depends on the inputs, yet the jacobian is the value's alone."""
    module = built["aux_trace"]
    p, layer, X = _aux_args()
    jac, aux = module.jacobian(p, layer, X)
    grad, _ = module.gradient(p, layer, X)
    assert np.allclose(jac[0].W, grad[0].W)
    v = (fns.Params(np.ones((3, 2)), np.ones(2)), fns.Layer(np.ones(2), 1.0))
    hvp, aux = module.hvp(p, layer, v, X)
    assert set(aux) == {"mean", "parts", "z"}
    f = jax_version(fns.classes_with_aux)
    want = jax.jvp(
        lambda a, b: jax.grad(lambda a, b: f(a, b, X)[0], argnums=(0, 1))(a, b),
        (p, layer),
        v,
    )[1]
    assert np.allclose(hvp[0].W, want[0].W) and np.allclose(hvp[1].w, want[1].w)


def test_scalar_leaf_takes_the_scalar_operators(
    built: dict[str, types.ModuleType],
) -> None:
    module = built["scalar_leaf"]
    f = jax_version(fns.scalar_leaf)
    s, c = 0.3, 1.7
    assert module.derivative(s, c) == pytest.approx(float(jax.grad(f)(s, c)))
    assert module.second_derivative(s, c) == pytest.approx(
        float(jax.grad(jax.grad(f))(s, c))
    )
    value, first, second = module.value_derivative_and_second_derivative(s, c)
    assert value == pytest.approx(float(f(s, c)))
    assert first == pytest.approx(module.derivative(s, c), rel=1e-12)
    assert second == pytest.approx(module.second_derivative(s, c), rel=1e-12)


def test_flat_modules_take_the_flat_vectors(
    built: dict[str, types.ModuleType],
) -> None:
    flat = built["flat_mlp"]
    x = np.concatenate([MLP_PARAMS[k].ravel() for k in sorted(MLP_PARAMS)])
    grad = built["mlp_trace"].gradient(MLP_PARAMS, X5, Y5)
    want = np.concatenate([grad[k].ravel() for k in sorted(grad)])
    np.testing.assert_allclose(flat.gradient(x, X5, Y5), want, rtol=1e-12)
    assert flat.hessian(x, X5, Y5).shape == (x.size, x.size)
    assert "x[12:16]: params['W2'] (4, 1)" in (flat.__doc__ or "")
    with_aux = built["flat_aux"]
    p, layer, X = _aux_args()
    x = np.concatenate([p.W.ravel(), p.b, layer.w, [layer.scale]])
    g, aux = with_aux.gradient(x, X)
    structured, _ = built["aux_trace"].gradient(p, layer, X)
    np.testing.assert_allclose(g[:6], structured[0].W.ravel(), rtol=1e-12)
    assert set(aux) == {"mean", "parts", "z"}


def test_the_old_input_with_a_tuple_output(built: dict[str, types.ModuleType]) -> None:
    module = built["old_tuple"]
    f = jax_version(fns.old_input_tuple)
    x, c = RNG.normal(size=3), RNG.normal(size=3)
    assert_trees_close(module.jacobian(x, c), jax.jacobian(f)(x, c))
    _, vjp = jax.vjp(lambda a: f(a, c), x)
    dy = (RNG.normal(size=3), 0.5)
    assert_trees_close(module.pullback(x, dy, c), vjp(dy)[0])


def test_gradient_matches_finite_differences(
    built: dict[str, types.ModuleType],
) -> None:
    module = built["mlp_sympy"]
    grad = module.gradient(MLP_PARAMS, X5, Y5)
    h = 1e-6
    for key in MLP_PARAMS:
        bumped = {k: v.copy() for k, v in MLP_PARAMS.items()}
        bumped[key].flat[0] += h
        down = {k: v.copy() for k, v in MLP_PARAMS.items()}
        down[key].flat[0] -= h
        fd = (module.f(bumped, X5, Y5) - module.f(down, X5, Y5)) / (2 * h)
        assert grad[key].flat[0] == pytest.approx(fd, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize(
    ("params", "error", "message"),
    [
        (
            {"W1": 0, "b1": 0, "W2": 0},
            ValueError,
            (
                r"gradient: params: expected a dict with keys \['W1', 'W2', 'b1', "
                r"'b2'\]; missing 'b2'"
            ),
        ),
        (
            {**MLP_PARAMS, "W3": np.zeros(2)},
            ValueError,
            "unexpected 'W3'",
        ),
        (
            {**MLP_PARAMS, "W1": np.zeros((4, 3))},
            ValueError,
            r"gradient: params\['W1'\]: expected shape \(3, 4\), got shape \(4, 3\)",
        ),
        (
            {**MLP_PARAMS, "b1": np.array(["a"] * 4)},
            TypeError,
            r"gradient: params\['b1'\]: expected real numbers",
        ),
        (
            {**MLP_PARAMS, "b1": np.ones(4, dtype=complex)},
            TypeError,
            r"params\['b1'\]: expected real numbers, got complex128",
        ),
        ([1.0, 2.0], TypeError, "gradient: params: expected a dict"),
    ],
)
def test_wrong_structures_are_refused_by_name(
    built: dict[str, types.ModuleType], params: Any, error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        built["mlp_trace"].gradient(params, X5, Y5)


def test_wrong_class_and_sequence_lengths_are_refused(
    built: dict[str, types.ModuleType],
) -> None:
    p, layer, X = _aux_args()
    module = built["aux_trace"]
    with pytest.raises(TypeError, match=r"gradient: p: expected a Params with fields"):
        module.gradient({"W": p.W, "b": p.b}, layer, X)
    with pytest.raises(TypeError, match=r"gradient: layer: expected a Layer"):
        module.gradient(p, types.SimpleNamespace(w=layer.w), X)
    with pytest.raises(ValueError, match=r"jacobian: ws: expected a list of 2 values"):
        built["lists_trace"].jacobian([np.zeros(3)], (np.zeros(3), 0.0), np.zeros(3))
    with pytest.raises(ValueError, match=r"pushforward: dx: expected a tuple of 2"):
        built["two_trace"].pushforward(np.zeros(2), np.zeros(3), (np.zeros(2),), 0.1)


def test_structured_modules_are_typed_and_documented(
    built: dict[str, types.ModuleType],
) -> None:
    module = built["mlp_trace"]
    text = Path(module.__file__ or "").read_text()
    assert "Inputs: params (dict: W1 (3, 4), W2 (4, 1), b1 (4,), b2 (1,))." in text
    assert "x[0:12]: params['W1'] (3, 4)" in text
    assert module.__all__ == sorted(["f", *SCALAR_OUT])
    assert callable(module._gradient_flat)


def test_the_structure_is_in_the_source_hash(tmp_path: Path) -> None:
    """Editing only the aux value changes SOURCE_HASH (difgen check sees it)."""
    texts = []
    for aux in ("np.sum(x)", "np.sum(x * x)"):
        (tmp_path / "f.py").write_text(
            f"import numpy as np\ndef f(x):\n    return np.sum(np.sin(x)), {aux}\n"
        )
        (tmp_path / "difgen.toml").write_text(
            '[[module]]\nname = "m"\nfunction = "f.py:f"\noperators = ["gradient"]\n'
            'backend = "trace"\ninputs = [{ name = "x", shape = [2] }]\nhas_aux = true\n'
        )
        difgen.build(tmp_path / "difgen.toml")
        texts.append((tmp_path / "generated" / "m.py").read_text())
    hashes = [t.split('SOURCE_HASH = "')[1][:16] for t in texts]
    assert hashes[0] != hashes[1]


def test_dataclass_fields_follow_the_class(built: dict[str, types.ModuleType]) -> None:
    """The tree lists W after b; the flat layout follows the NamedTuple's fields."""
    doc = built["aux_trace"].__doc__ or ""
    assert doc.index("p['W']") < doc.index("p['b']")
    assert dataclasses.is_dataclass(built["aux_trace"].Layer)


def test_verify_and_check_take_structured_modules(
    built: dict[str, types.ModuleType],
) -> None:
    """difgen verify checks the flat operators (aux modules too); difgen check
    finds the modules up to date."""
    config = Path(built["mlp_trace"].__file__ or "").parents[1] / "difgen.toml"
    names = ["mlp_trace", "two_trace", "aux_trace", "flat_aux", "old_tuple"]
    result = difgen.verify(config, names, points=1)
    assert result.ok, result
    assert difgen.check(config, names).ok
