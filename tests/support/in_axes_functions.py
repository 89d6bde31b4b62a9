"""Functions of shared parameters and per-example data, for the points variants
with ``input.per_point = false`` (JAX's ``in_axes=(None, 0, 0)``): the tests bind
their ``np`` to ``jax.numpy`` for the oracle."""

import numpy as np


def logistic(theta, X, y):
    """The logistic-regression loss of one example (X: features, y: 0 or 1)."""
    z = X @ theta
    return np.logaddexp(0.0, z) - y * z


def mlp(theta, X, y):
    """A 3-4-1 tanh network's squared error on one example."""
    W1 = theta[:12].reshape(4, 3)
    b1 = theta[12:16]
    w2 = theta[16:20]
    out = w2 @ np.tanh(W1 @ X + b1) + theta[20]
    return 0.5 * (out - y) ** 2


def residuals(theta, X, y):
    """Two residuals of one example: a vector output, for jacobians and
    pushforwards with shared parameters."""
    return np.tanh(theta.reshape(2, 3) @ X) - y


def cross_entropy(theta, X, y):
    """Softmax cross-entropy of one example with an int64 label ``y``."""
    logits = theta.reshape(3, 4) @ X
    m = np.max(logits)
    return m + np.log(np.sum(np.exp(logits - m))) - logits[y]


def masked(theta, X, mask):
    """A squared error over the features a bool mask per example keeps."""
    r = X * theta - 1.0
    return np.sum(np.where(mask, r * r, 0.0))


def weighted(theta, w):
    """Shared x, one float weight per point (the only per-point argument)."""
    return w * np.sum(np.sin(theta) ** 2)


def embedding(theta, idx, w):
    """Rows of a shared table picked by int64 indices per point (x[idx])."""
    return np.sum(np.tanh(theta.reshape(5, 3)[idx] @ w))


def columns(theta, idx, w):
    """Columns picked per point (x[:, idx]: the index after a slice)."""
    return np.sum(np.sin(theta.reshape(3, 5)[:, idx]) * w[:, None])
