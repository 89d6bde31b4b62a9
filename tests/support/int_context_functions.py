"""Functions of int64 contexts that the operator only casts to floats (labels,
counts), which the C loops read as doubles, and one that indexes with its label
(a run-time gather, which keeps the operator in vector code); the tests bind their
``np`` to ``jax.numpy`` for the oracle."""

import numpy as np


def logistic(theta, X, y):
    """The logistic loss of one example with an int64 label ``y`` (0 or 1)."""
    z = X @ theta
    return np.logaddexp(0.0, z) - y * z


def mlp(theta, X, t):
    """A 3-4-1 tanh network's squared error against an int64 target ``t``."""
    W1 = theta[:12].reshape(4, 3)
    b1 = theta[12:16]
    w2 = theta[16:20]
    out = w2 @ np.tanh(W1 @ X + b1) + theta[20]
    return 0.5 * (out - t) ** 2


def poisson(theta, X, counts, n):
    """A Poisson log-likelihood of int64 counts per example, over an int64 number
    of trials ``n`` shared by every point (both only cast to floats)."""
    eta = X @ theta
    return np.sum(np.exp(eta) - counts * eta) / n


def cross_entropy(theta, X, y):
    """Softmax cross-entropy with the label as an index: a run-time gather."""
    logits = theta.reshape(3, 4) @ X
    m = np.max(logits)
    return m + np.log(np.sum(np.exp(logits - m))) - logits[y]
