"""Functions of the float32 C tests (tests/targets/c/test_c_float32.py), each
also written with ``jax.numpy`` there as the float32 oracle."""

import numpy as np


def scalar(x):
    return np.sin(x) * np.exp(-0.5 * x * x) + np.log1p(x * x) / (1.0 + x)


def vector(x):
    return np.sum(np.tanh(x) ** 2) + np.log(np.sum(np.exp(x))) + x[0] * x[-1]


def field(x):
    return np.tanh(x) * x[::-1] + np.exp(-x) + np.sqrt(x * x + 1.0)


def matrix(X):
    return np.sum(np.tanh(X @ X.T)) + np.sum(np.cos(X) * X.T) / 3.0


def mlp(p, X, t):
    """A two-layer tanh MLP, 14 inputs, 64 hidden units (BLAS-sized products)."""
    W1 = p[: 14 * 64].reshape(14, 64)
    b1 = p[14 * 64 : 14 * 64 + 64]
    W2 = p[14 * 64 + 64 : 14 * 64 + 128]
    h = np.tanh(X @ W1 + b1)
    r = h @ W2 + p[-1] - t
    return np.mean(r * r)


def edges(x):
    """NumPy's NaN and inf semantics: extrema, abs, where, division."""
    m = np.maximum(x, 0.5 * x[::-1]) + np.minimum(x, 0.25)
    return np.sum(np.where(x > 0.0, m / (1.0 + np.abs(x)), np.exp(x)))


def params_loss(params, X, t):
    """The MLP above written the natural way: a dict of its four arrays."""
    h = np.tanh(X @ params["W1"] + params["b1"])
    r = h @ params["W2"] + params["b2"] - t
    return np.mean(r * r)
