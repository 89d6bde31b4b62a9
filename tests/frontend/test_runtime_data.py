"""Integer and boolean data known only at run time (issue 9, section 3, and the sort
family of section 2): int64 and bool contexts, gathers and scatter-adds through
run-time indices, run-time masks, and sort/median/percentile/argmax/accumulate.

Each function of ``tests/support/runtime_functions.py`` is built with the trace backend in
both modes (forward: jacobian from pushforwards; reverse: gradient and jacobian from
pullbacks) and checked against JAX (x64) where JAX runs the same NumPy code, and
against central differences where the function assigns in place. Values must equal
NumPy's exactly.
"""

from __future__ import annotations

import importlib
import json
import shutil
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import runtime_functions as F
from conftest import SUPPORT, build_and_import
from difgen.errors import ConfigError, TraceError
from oracle import central_jacobian, hessian, jacobian

SOURCE = SUPPORT / "runtime_functions.py"
Context = tuple[str, Sequence[int], str]


def write(
    directory: Path,
    function: str,
    shape: Sequence[int],
    operators: Sequence[str],
    contexts: Sequence[Context] = (),
    **options: str,
) -> Path:
    """A one-module config with typed contexts, next to a copy of the functions."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(SOURCE, directory / SOURCE.name)
    ctx = ", ".join(
        f'{{ name = "{n}", shape = {list(s)}, dtype = "{d}" }}' for n, s, d in contexts
    )
    lines = [
        "[difgen]",
        'output_dir = "out"',
        "[[module]]",
        'name = "mod"',
        f'function = "{SOURCE.name}:{function}"',
        f"operators = {json.dumps(list(operators))}",
        f"input = {{ shape = {list(shape)} }}",
        f"contexts = [{ctx}]",
    ]
    lines += [f"{k} = {json.dumps(v)}" for k, v in options.items()]
    path = directory / "difgen.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


_BUILT: dict[Any, types.ModuleType] = {}


def built(
    tmp_path_factory: pytest.TempPathFactory,
    function: str,
    shape: Sequence[int],
    operators: Sequence[str],
    contexts: Sequence[Context] = (),
    **options: str,
) -> types.ModuleType:
    """Build once per session (several tests share a module)."""
    key = (function, tuple(operators), tuple(sorted(options.items())))
    if key not in _BUILT:
        directory = tmp_path_factory.mktemp(function)
        config = write(directory, function, shape, operators, contexts, **options)
        _BUILT[key] = build_and_import(config)[0]
    return _BUILT[key]


def jax_version(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The same function with ``np`` bound to ``jax.numpy`` (x64)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    jnp = importlib.import_module("jax.numpy")
    globals_ = dict(fn.__globals__)
    globals_["np"] = jnp
    return types.FunctionType(fn.__code__, globals_, fn.__name__, fn.__defaults__)


def jax_jacobian(fn: Callable[..., Any], x: np.ndarray, *ctx: Any) -> np.ndarray:
    import jax

    g = jax_version(fn)
    return np.asarray(jax.jacfwd(lambda z: g(z, *ctx))(x))


# ------------------------------------------------------------------ the cases
RNG = np.random.default_rng(9)
EDGES = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]])

# name: (input shape, contexts (name, shape, dtype) and their values, x, oracle)
CASES: dict[str, Any] = {
    "cross_entropy": (
        (4, 5),
        [("labels", (4,), "int64", np.array([0, 4, 2, 4]))],
        RNG.normal(size=(4, 5)),
        "autograd",
    ),
    "springs": (
        (4, 2),
        [
            (
                "c",
                (5, 3),
                "float64",
                np.column_stack([EDGES + 0.25, np.linspace(0.5, 1.5, 5)]),
            )
        ],
        RNG.normal(size=(4, 2)),
        "autograd",
    ),
    "springs_int": (
        (4, 2),
        [
            ("edges", (5, 2), "int64", EDGES),
            ("rest", (5,), "float64", np.linspace(0.5, 1.5, 5)),
        ],
        RNG.normal(size=(4, 2)),
        "autograd",
    ),
    "masked_sums": (
        (6,),
        [("c", (6,), "float64", np.array([1.0, -1.0, 2.0, 0.0, 3.0, -2.0]))],
        RNG.normal(size=6),
        "autograd",
    ),
    "masked_where": (
        (6,),
        [("m", (6,), "bool", np.array([True, False, True, True, False, False]))],
        RNG.normal(size=6),
        "autograd",
    ),
    "clamp": ((6,), [], np.array([0.2, 0.7, -0.9, 0.45, -0.1, 2.0]), "central"),
    "sort_stats": ((7,), [], RNG.normal(size=7), "jax"),
    "sort_stats_even": ((6,), [], RNG.normal(size=6), "central"),
    "argmax_gather": ((7,), [], RNG.normal(size=7), "autograd"),
    "running_max": ((6,), [], np.array([0.3, -0.2, 0.9, 0.5, 1.4, -3.0]), "central"),
    "scatter": (
        (5,),
        [("idx", (5,), "int64", np.array([0, 2, 2, -1, 0]))],
        RNG.normal(size=5),
        "central",
    ),
    "index_arithmetic": (
        (5,),
        [("labels", (3,), "int64", np.array([4, 0, 2]))],
        RNG.normal(size=5),
        "central",
    ),
    "take_along": (
        (3, 4),
        [("c", (3, 4), "float64", RNG.normal(size=(3, 4)))],
        RNG.normal(size=(3, 4)),
        "central",
    ),
    "float_to_int": ((4,), [], np.array([1.5, -2.25, 0.5, 3.75]), "central"),
}


def _case(name: str) -> tuple[Any, list[Context], np.ndarray, list[Any], str]:
    shape, contexts, x, oracle = CASES[name]
    specs = [(n, s, d) for n, s, d, _ in contexts]
    return shape, specs, x, [v for *_, v in contexts], oracle


_ORACLES: dict[tuple[str, str], np.ndarray] = {}


def _expected(name: str, x: np.ndarray, ctx: list[Any], oracle: str, kind: str) -> Any:
    """The oracle's jacobian (or hessian), computed once per case."""
    key = (name, kind)
    if key not in _ORACLES:
        fn = getattr(F, name)
        if kind == "hessian":
            _ORACLES[key] = hessian(fn, x, *ctx)
        elif oracle == "jax":
            _ORACLES[key] = jax_jacobian(fn, x, *ctx)
        elif oracle == "autograd":
            _ORACLES[key] = jacobian(fn, x, *ctx)
        else:
            _ORACLES[key] = central_jacobian(fn, x, *ctx)
    return _ORACLES[key]


SCALAR_OPS = ["value_and_gradient", "pullback", "pushforward", "hvp", "hessian"]


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_derivatives(
    tmp_path_factory: pytest.TempPathFactory, name: str, mode: str
) -> None:
    """Values exactly NumPy's; gradient, jacobian, pushforward and pullback against
    the oracle; hvp and hessian against autograd where it runs the function."""
    shape, specs, x, ctx, oracle = _case(name)
    fn = getattr(F, name)
    scalar = np.ndim(fn(x.copy(), *ctx)) == 0
    ops = SCALAR_OPS if scalar else ["value_and_jacobian"]
    # clamp: scalar emission of nested np.where recurses in SymPy (a bug on main,
    # not about run-time data), so it is built as vector code
    emit = "vector" if name == "clamp" else "auto"
    module = built(
        tmp_path_factory, name, shape, ops, specs, mode=mode, backend="trace", emit=emit
    )
    expected = _expected(name, x, ctx, oracle, "jacobian")
    tol = {"rtol": 1e-6, "atol": 1e-7} if oracle == "central" else {"rtol": 1e-10}
    if not scalar:
        value, jacobian_ = module.value_and_jacobian(x.copy(), *ctx)
        np.testing.assert_allclose(jacobian_, expected, **tol)
        np.testing.assert_array_equal(value, fn(x.copy(), *ctx))
        return
    value, gradient = module.value_and_gradient(x.copy(), *ctx)
    np.testing.assert_array_equal(value, fn(x.copy(), *ctx))
    np.testing.assert_allclose(gradient, expected, **tol)
    v = RNG.normal(size=x.shape)
    np.testing.assert_allclose(
        module.pushforward(x.copy(), v, *ctx), np.sum(expected * v), **tol
    )
    np.testing.assert_allclose(
        module.pullback(x.copy(), 2.0, *ctx), 2 * expected, **tol
    )
    if oracle != "autograd":  # piecewise linear here: the hessian is zero
        np.testing.assert_array_equal(module.hessian(x.copy(), *ctx), 0.0)
        return
    hess = _expected(name, x, ctx, oracle, "hessian")
    np.testing.assert_allclose(
        module.hessian(x.copy(), *ctx), hess, rtol=1e-9, atol=1e-12
    )
    n = x.size
    np.testing.assert_allclose(
        module.hvp(x.copy(), v, *ctx),
        (hess.reshape(n, n) @ v.ravel()).reshape(x.shape),
        rtol=1e-9,
        atol=1e-12,
    )


# ----------------------------------------------------------- NumPy semantics
def test_scatter_semantics(tmp_path_factory: pytest.TempPathFactory) -> None:
    """np.add.at accumulates a repeated index; out[idx] += v adds it once (the last
    write wins), and the derivative follows the same rule."""
    shape, specs, x, ctx, _ = _case("scatter")
    module = built(
        tmp_path_factory,
        "scatter",
        shape,
        ["value_and_jacobian"],
        specs,
        mode="reverse",
        backend="trace",
    )
    value, jacobian = module.value_and_jacobian(x.copy(), *ctx)
    np.testing.assert_array_equal(value, F.scatter(x.copy(), *ctx))
    # out[0] gets x0 + x4 from add.at, then += x4**2 (the last write through 0)
    np.testing.assert_allclose(jacobian[0], [1.0, 0, 0, 0, 1.0 + 2 * x[4]])


def test_sort_ties_follow_the_stable_order(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """At ties, the derivative is the one of the permutation a stable argsort picks:
    the earlier element is the smaller."""
    shape, specs, *_ = _case("sort_stats")
    module = built(
        tmp_path_factory,
        "sort_stats",
        shape,
        ["value_and_gradient"],
        specs,
        mode="reverse",
        backend="trace",
    )
    x = np.array([1.0, 0.5, 1.0, -2.0, 0.5, 3.0, 0.0])
    _, gradient = module.value_and_gradient(x.copy())
    order = np.argsort(x, kind="stable")
    weights = np.empty(7)
    weights[order] = np.arange(1.0, 8.0)
    # stable order [3, 6, 1, 4, 0, 2, 5]: the median is sorted[3] (x[4], the second
    # 0.5); the 30th percentile is 0.2 * sorted[1] + 0.8 * sorted[2] (x[6], x[1]);
    # the 0.8 quantile is 0.2 * sorted[4] + 0.8 * sorted[5] (x[0], x[2]: the tied
    # 1.0s, the earlier one first)
    expected = weights.copy()
    expected[order[3]] += 2.0
    expected[order[1]] += 0.2
    expected[order[2]] += 0.8
    expected[order[4]] += 0.2
    expected[order[5]] += 0.8
    np.testing.assert_allclose(gradient, expected, rtol=1e-12)


def test_nan_and_ties_in_values(tmp_path_factory: pytest.TempPathFactory) -> None:
    """With a NaN, median and percentile are NaN (NumPy's own call computes them);
    np.maximum.accumulate carries the NaN."""
    for name in ("sort_stats", "running_max"):
        shape, specs, x, _, _ = _case(name)
        ops = ["value_and_gradient"] if name == "sort_stats" else ["value_and_jacobian"]
        module = built(
            tmp_path_factory,
            name,
            shape,
            ops,
            specs,
            mode="reverse",
            backend="trace",
        )
        x = x.copy()
        x[2] = np.nan
        with np.errstate(invalid="ignore"):
            expected = getattr(F, name)(x.copy())
            value = getattr(module, ops[0])(x.copy())[0]
        np.testing.assert_array_equal(value, expected)


# --------------------------------------------------------- run-time errors
def test_wrong_context_dtype_and_out_of_bounds(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """An int64 context given floats is refused (not rounded); a bool one given
    numbers too; an index out of bounds raises IndexError, a negative one wraps."""
    shape, specs, x, ctx, _ = _case("cross_entropy")
    module = built(
        tmp_path_factory,
        "cross_entropy",
        shape,
        ["value_and_gradient", "pullback"],
        specs,
        mode="forward",
        backend="trace",
    )
    with pytest.raises(TypeError, match="labels: expected int64 values, got float64"):
        module.value_and_gradient(x, ctx[0].astype(float))
    with pytest.raises(ValueError, match=r"labels: expected shape \(4,\)"):
        module.value_and_gradient(x, ctx[0][:3])
    with pytest.raises(IndexError, match="out of bounds"):
        module.value_and_gradient(x, np.array([0, 5, 1, 1]))
    wrapped = module.value_and_gradient(x, [0, -1, 2, 4])  # a list converts
    np.testing.assert_allclose(
        wrapped[1], module.value_and_gradient(x, np.array([0, 4, 2, 4]))[1]
    )
    shape, specs, x, ctx, _ = _case("masked_where")
    module = built(
        tmp_path_factory,
        "masked_where",
        shape,
        ["value_and_gradient", "pullback"],
        specs,
        mode="forward",
        backend="trace",
    )
    with pytest.raises(TypeError, match="m: expected bool values, got int64"):
        module.value_and_gradient(x, ctx[0].astype(int))


# ---------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    "name, contexts, message",
    [
        (
            "returns_selection",
            [("c", (4,), "float64")],
            r"runtime_functions.py:\d+: .*np.where\(mask, x, 0.0\)",
        ),
        (
            "selection_elementwise",
            [("c", (4,), "float64")],
            r"runtime_functions.py:\d+: combining a selection with an array",
        ),
        ("partition", [], r"runtime_functions.py:\d+: np.partition: .*np.sort\(x\)"),
    ],
)
def test_refusals(tmp_path: Path, name: str, contexts: Any, message: str) -> None:
    config = write(tmp_path, name, (4,), ["gradient"], contexts, backend="trace")
    with pytest.raises(TraceError, match=message):
        build_and_import(config)


def test_sympy_backend_refuses_runtime_indices(tmp_path: Path) -> None:
    """Scalar code cannot index at run time: the sympy backend points to trace."""
    config = write(tmp_path, "float_to_int", (4,), ["jacobian"], backend="sympy")
    with pytest.raises(ConfigError, match=r'to_int64: .*use backend = "trace"'):
        build_and_import(config)


def test_scalar_emission_falls_back_to_vector(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Automatic emission of a graph with run-time indices is vector code."""
    shape, specs, *_ = _case("index_arithmetic")
    module = built(
        tmp_path_factory,
        "index_arithmetic",
        shape,
        ["jacobian"],
        specs,
        backend="trace",
        emit="auto",
    )
    assert "emission vector" in (module.__doc__ or "")
    shape, specs, *_ = _case("masked_where")  # a bool context, no indexing
    module = built(
        tmp_path_factory,
        "masked_where",
        shape,
        ["gradient"],
        specs,
        backend="trace",
        emit="auto",
    )
    assert "emission vector" in (module.__doc__ or "")
