"""Functions of structured arguments for the points variants (``points = true``
with ``inputs``): dict, tuple and NamedTuple parameters, some leaves shared by
every point; the tests bind their ``np`` to ``jax.numpy`` for the oracle."""

from typing import NamedTuple

import numpy as np


class Layer(NamedTuple):
    W: np.ndarray
    b: np.ndarray


def logistic(params, X, y):
    """One example's logistic loss; params a dict shared by every point."""
    z = X @ params["W"] + params["b"]
    return np.logaddexp(0.0, z) - y * z


def mixed(theta, data):
    """theta['a'] shared, theta['s'] and data per point."""
    return np.sum(np.sin(theta["a"]) * data["u"]) + theta["s"] * np.sum(data["u"] ** 2)


def weighted(theta, w):
    """theta['s'] per point and a per-point context w."""
    return theta["s"] * np.sum(np.cos(theta["a"]) * w)


def layer(p, X):
    """A tanh layer of a NamedTuple of parameters: a vector output."""
    return np.tanh(X @ p.W + p.b)


def pair(ws):
    """A tuple of two arrays, both per point, with a tuple output."""
    a, b = ws
    return (a * b[0], np.sum(np.exp(a)) * b)


def residuals(p, q):
    """Residuals of a dict and an array, for the sparse jacobian (flat = true)."""
    return np.concatenate([p["a"] ** 2 - q, np.sin(p["b"]) * q[:2]])
