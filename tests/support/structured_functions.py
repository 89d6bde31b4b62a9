"""Functions of several arguments, trees of arrays and several outputs, traced by
the structured-argument tests (tests/render/test_structured.py); written in
NumPy, and run by JAX as the oracle with ``np`` bound to ``jax.numpy``."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np


class Params(NamedTuple):
    W: Any
    b: Any


@dataclasses.dataclass
class Layer:
    w: Any
    scale: Any


def mlp_loss(params, X, y):
    hidden = np.tanh(X @ params["W1"] + params["b1"])
    out = hidden @ params["W2"] + params["b2"]
    return np.mean((out[:, 0] - y) ** 2)


def two_inputs(theta, y0, t):
    decay = np.exp(-theta[0] * t)
    return (
        y0 * decay + theta[1],
        {"energy": np.sum(y0 * y0) * theta[0], "rate": theta * t},
    )


def lists(ws, pair, c):
    first, second = pair
    return np.sum(np.sin(ws[0] * c) * ws[1]) + first * np.cos(second) + ws[1] ** 2


def classes_with_aux(p, layer, X):
    z = X @ p.W + p.b
    r = np.tanh(z) * layer.scale
    value = np.sum(r * r) + np.sum(layer.w**3)
    return value, {"mean": np.mean(r), "z": z, "parts": (np.sum(z), layer.w * 2.0)}


def scalar_leaf(s, c):
    return np.sin(s * c) * s + np.exp(0.5 * s)


def old_input_tuple(x, c):
    return np.sin(x) * c, np.sum(x * x)


def not_a_pair(x):
    return x * 2.0


def wrong_arity(params):
    return np.sum(params["W"])
