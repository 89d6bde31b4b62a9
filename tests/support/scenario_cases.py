"""Which operators each scenario of ``scenarios.py`` is built with, and its sample
points: shared by the operator matrix (tests/derive/test_scenarios.py) and the points
variants' tests (tests/targets/numpy, tests/targets/c)."""

from __future__ import annotations

from typing import Any

import numpy as np

import scenarios

ALWAYS = [
    "pushforward",
    "value_and_pushforward",
    "pullback",
    "value_and_pullback",
    "jacobian",
    "value_and_jacobian",
]


SCALAR_IN = [
    "derivative",
    "value_and_derivative",
    "second_derivative",
    "value_derivative_and_second_derivative",
]


SCALAR_OUT = [
    "gradient",
    "value_and_gradient",
    "hvp",
    "hessian",
    "value_gradient_and_hessian",
]


def output_shape(name: str) -> tuple[int, ...]:
    x, ctx = point(name, 0)
    return np.shape(getattr(scenarios, name)(x, *ctx))


def operators_for(name: str) -> list[str]:
    xs, _ = scenarios.SCENARIOS[name]
    ops = list(ALWAYS)
    if xs == ():
        ops += SCALAR_IN
    if output_shape(name) == ():
        ops += SCALAR_OUT
    return ops


def point(name: str, seed: int) -> tuple[Any, list[Any]]:
    xs, ctx_shapes = scenarios.SCENARIOS[name]
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.2, 1.0, xs)
    x = float(x) if xs == () else x
    ctx = [rng.uniform(-1.0, 1.0, s) for s in ctx_shapes]
    return x, [float(c) if np.ndim(c) == 0 else c for c in ctx]
