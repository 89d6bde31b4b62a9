"""Issue 20, item 1: a singular value in an entry the function throws away.

``sqrt(0)`` on the diagonal of a distance matrix summed through ``np.tril(..., -1)``,
``log(0)``, ``arcsin(1)`` and ``0**0.5`` under a constant mask or a slice: every kept
entry is smooth, so every derivative is finite, and each generated operator must
give it exactly (not NaN, which a ``0 * inf`` tangent or cotangent of a discarded
entry used to spread into all of them). Checked against mpmath at 40 digits, at
first and second order, on both backends, both modes and every emission (scalar,
vector, compiled C); the value must be NumPy's, bit for bit.

A run-time mask, ``where(x > 0, sqrt(x), 0)``, selects its tangents and cotangents
already: it stays exact in both modes.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mpmath as mp
import numpy as np
import pytest

import masked_functions as mf
from compiled import BuiltConfig
from conftest import SUPPORT

POINTS: dict[str, np.ndarray] = {
    "dist_tril": np.array([0.1, 0.2, 1.0, 0.3, 0.4, 1.2]),
    "dist_triu": np.array([0.1, 0.2, 1.0, 0.3, 0.4, 1.2]),
    "dist_where": np.array([0.1, 0.2, 1.0, 0.3, 0.4, 1.2]),
    "dist_rows": np.array([0.1, 0.2, 1.0, 0.3, 0.4, 1.2]),
    "dist_scaled": np.array(1.3),
    "log_masked": np.array([0.3, -0.7, 1.9]),
    "sin_log_masked": np.array([0.3, -0.7, 1.9]),
    "broadcast_quotient": np.array([0.5, 0.0, 2.0]),
    "dist_times_mask": np.array([0.1, 0.2, 1.0, 0.3, 0.4, 1.2]),
    "arcsin_masked": np.array([0.5, 1.5, 2.5]),
    "pow_masked": np.array([0.7, 0.0, 1.3, 2.0]),
    "pow_sliced": np.array([0.0, 0.8, 1.7]),
    "where_runtime": np.array([-1.0, 2.0, -0.5, 0.7]),
}

SCALAR_OUTPUT = ["gradient", "hessian", "hvp", "jacobian", "value_and_gradient"]
OPERATORS: dict[str, list[str]] = {
    name: SCALAR_OUTPUT for name in POINTS if name not in ("dist_rows", "dist_scaled")
}
OPERATORS["dist_rows"] = ["jacobian", "pushforward", "pullback"]
OPERATORS["dist_scaled"] = ["derivative", "second_derivative"]

CONFIGS = [
    ("sympy", "auto", "auto"),
    ("trace", "forward", "vector"),
    ("trace", "reverse", "vector"),
    ("trace", "forward", "scalar"),
    ("trace", "reverse", "scalar"),
    ("trace", "forward", "c"),
    ("trace", "reverse", "c"),
]


def _toml_list(items: list[Any]) -> str:
    return (
        "[" + ", ".join(f'"{i}"' if isinstance(i, str) else str(i) for i in items) + "]"
    )


def _module_name(function: str, backend: str, mode: str, emit: str) -> str:
    return f"{function}_{backend}_{mode}_{emit}"


class Modules(BuiltConfig):
    """Every (function, configuration) module, built in one build (C compiled)."""

    def __init__(self, directory: Path) -> None:
        shutil.copy(SUPPORT / "masked_functions.py", directory)
        parts = ['[difgen]\noutput_dir = "out"\n']
        for function, point in POINTS.items():
            for backend, mode, emit in CONFIGS:
                parts.append(
                    "[[module]]\n"
                    f'name = "{_module_name(function, backend, mode, emit)}"\n'
                    f'function = "masked_functions.py:{function}"\n'
                    f"operators = {_toml_list(OPERATORS[function])}\n"
                    f"input = {{ shape = {_toml_list(list(point.shape))} }}\n"
                    f'backend = "{backend}"\nmode = "{mode}"\nemit = "{emit}"\n'
                )
        super().__init__(directory, "\n".join(parts))


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> Modules:
    return Modules(tmp_path_factory.mktemp("masked"))


# ------------------------------------------------------------------- oracle
def _partial(fn: Callable[..., Any], x: np.ndarray, orders: tuple[int, ...]) -> float:
    with mp.workdps(40):
        point = [mp.mpf(float(v)) for v in x.ravel()]
        return float(mp.diff(fn, point, orders))


@functools.cache
def oracle(function: str) -> dict[str, np.ndarray]:
    """Value, jacobian (out x in, flat) and hessians (out x in x in) by mpmath."""
    x = POINTS[function]
    n = x.size
    exact = mf.MP[function]
    with mp.workdps(40):
        value = [float(v) for v in exact([mp.mpf(float(v)) for v in x.ravel()])]
    m = len(value)

    def component(k: int) -> Callable[..., Any]:
        return lambda *args: exact(list(args))[k]

    unit = np.eye(n, dtype=int)
    jac = np.array(
        [
            [_partial(component(k), x, tuple(unit[i])) for i in range(n)]
            for k in range(m)
        ]
    )
    hess = np.array(
        [
            [
                [_partial(component(k), x, tuple(unit[i] + unit[j])) for j in range(n)]
                for i in range(n)
            ]
            for k in range(m)
        ]
    )
    return {"value": np.array(value), "jacobian": jac, "hessian": hess}


def close(actual: Any, expected: Any) -> None:
    actual = np.asarray(actual, dtype=float)
    assert np.all(np.isfinite(actual)), actual
    np.testing.assert_allclose(actual, expected, rtol=1e-9, atol=1e-9)


CASES = [
    pytest.param(function, *config, id=_module_name(function, *config))
    for function in POINTS
    for config in CONFIGS
]


@pytest.mark.parametrize(("function", "backend", "mode", "emit"), CASES)
def test_discarded_singularity_is_exact(
    modules: Modules, function: str, backend: str, mode: str, emit: str
) -> None:
    mod = modules.get(_module_name(function, backend, mode, emit))
    x = POINTS[function]
    xs, n = x.shape, x.size
    fn = getattr(mf, function)
    with np.errstate(all="ignore"):
        expected_value = np.asarray(fn(x.copy()), dtype=float)
    np.testing.assert_array_equal(mod.f(x.copy()), expected_value)
    want = oracle(function)
    np.testing.assert_allclose(expected_value.ravel(), want["value"], rtol=1e-14)
    J, H = want["jacobian"], want["hessian"]
    v = np.linspace(-1.0, 1.5, n).reshape(xs)
    ops = OPERATORS[function]
    if "gradient" in ops:
        close(mod.gradient(x), J[0].reshape(xs))
        value, grad = mod.value_and_gradient(x)
        np.testing.assert_array_equal(value, expected_value)
        close(grad, J[0].reshape(xs))
        close(mod.hessian(x), H[0].reshape(xs + xs))
        close(mod.hvp(x, v), (H[0] @ v.ravel()).reshape(xs))
        close(mod.jacobian(x), J[0].reshape(xs))
    if function == "dist_rows":
        u = np.array([0.5, -1.0, 2.0])
        close(mod.jacobian(x), J)
        close(mod.pushforward(x, v), J @ v)
        close(mod.pullback(x, u), u @ J)
    if function == "dist_scaled":
        close(mod.derivative(x), J[0, 0])
        close(mod.second_derivative(x), H[0, 0, 0])
