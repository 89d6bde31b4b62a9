"""The cases of the points variants over some arguments (``input.per_point =
false``), shared by the NumPy and C tests: the configs, random arguments with
``k`` points, and JAX's ``vmap`` with ``in_axes=(None, 0, ...)`` as the oracle."""

from __future__ import annotations

import shutil
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import in_axes_functions
from conftest import SUPPORT

SOURCE = SUPPORT / "in_axes_functions.py"
TOLERANCE = 1e-12
"""Against JAX, relative and absolute."""

# name: (input shape, contexts as (name, shape, dtype), operators)
CASES: dict[str, tuple[list[int], list[tuple[str, list[int], str]], list[str]]] = {
    "logistic": (
        [3],
        [("X", [3], "float64"), ("y", [], "float64")],
        ["gradient", "value_and_gradient", "hvp", "hessian"],
    ),
    "mlp": ([21], [("X", [3], "float64"), ("y", [], "float64")], ["gradient", "hvp"]),
    "residuals": (
        [6],
        [("X", [3], "float64"), ("y", [2], "float64")],
        ["jacobian", "pushforward", "pullback"],
    ),
    "cross_entropy": (
        [12],
        [("X", [4], "float64"), ("y", [], "int64")],
        ["gradient", "hvp"],
    ),
    "embedding": (
        [15],
        [("idx", [2], "int64"), ("w", [3], "float64")],
        ["gradient", "hvp"],
    ),
    "columns": (
        [15],
        [("idx", [2], "int64"), ("w", [3], "float64")],
        ["gradient", "hvp"],
    ),
    "masked": ([4], [("X", [4], "float64"), ("mask", [4], "bool")], ["gradient"]),
}
SYMPY = ("logistic", "mlp", "residuals")  # no run-time data: both backends


def write_config(
    directory: Path,
    function: str,
    input_shape: Sequence[int],
    contexts: Sequence[tuple[str, Sequence[int], str]],
    operators: Sequence[str],
    backend: str = "trace",
    input_per_point: bool = False,
    context_per_point: bool = True,
    points: bool = True,
    emit: str = "auto",
) -> Path:
    """A one-module config whose contexts are all per point (or all shared)."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(SOURCE, directory / SOURCE.name)
    flag = "true" if context_per_point else "false"
    ctx = ", ".join(
        f'{{ name = "{name}", shape = {list(shape)}, dtype = "{dtype}", '
        f"per_point = {flag} }}"
        for name, shape, dtype in contexts
    )
    lines = [
        "[difgen]",
        'output_dir = "out"',
        "[[module]]",
        'name = "mod"',
        f'function = "{SOURCE.name}:{function}"',
        f'backend = "{backend}"',
        f'emit = "{emit}"',
        "operators = [" + ", ".join(f'"{op}"' for op in operators) + "]",
        (
            f"input = {{ shape = {list(input_shape)}, "
            f"per_point = {'true' if input_per_point else 'false'} }}"
        ),
        f"contexts = [{ctx}]",
    ]
    if points:
        lines.append("points = true")
    path = directory / "difgen.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def jax_module() -> Any:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


def under_jax(name: str) -> Callable[..., Any]:
    """The support function with its ``np`` bound to ``jax.numpy``."""
    import jax.numpy as jnp

    fn = getattr(in_axes_functions, name)
    globals_ = dict(fn.__globals__)
    globals_["np"] = jnp
    return types.FunctionType(fn.__code__, globals_, fn.__name__, fn.__defaults__)


def arguments(name: str, k: int, seed: int = 0) -> list[np.ndarray]:
    """theta (shared), then each context with ``k`` points."""
    rng = np.random.default_rng(seed)
    xs, contexts, _ = CASES[name]
    args = [rng.normal(size=xs)]
    for _, shape, dtype in contexts:
        if dtype == "int64":
            args.append(rng.integers(-3, 3, (k, *shape)))  # negative labels wrap
        elif dtype == "bool":
            args.append(rng.random((k, *shape)) > 0.4)
        else:
            args.append(rng.normal(size=(k, *shape)))
    return args


def jax_reference(name: str, operator: str, args: list[Any], seed: Any) -> Any:
    """The operator at every point by ``jax.vmap`` over the data, theta shared."""
    jax = jax_module()
    f = under_jax(name)
    theta, *data = args
    axes = (None, *(0 for _ in data))
    if operator == "gradient":
        return jax.vmap(jax.grad(f), in_axes=axes)(theta, *data)
    if operator == "hessian":
        return jax.vmap(jax.hessian(f), in_axes=axes)(theta, *data)
    if operator == "jacobian":
        return jax.vmap(jax.jacfwd(f), in_axes=axes)(theta, *data)

    def one(s: Any, *d: Any) -> Any:
        g = (lambda t: f(t, *d)) if operator != "hvp" else jax.grad(lambda t: f(t, *d))
        if operator == "pullback":
            return jax.vjp(g, theta)[1](s)[0]
        return jax.jvp(g, (theta,), (s,))[1]

    return jax.vmap(one)(seed, *data)
