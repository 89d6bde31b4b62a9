"""Functions whose C reads a matrix in a product and in a transposed product
(tests/targets/c/test_c_row_pass.py): one pass over the matrix's rows."""

import numpy as np


def logistic(w, X, y):
    """The logistic NLL: its gradient is ``exp(z) / (1 + exp(z)) - y`` times X,
    as ``r @ X``."""
    z = X @ w
    return np.sum(np.log1p(np.exp(z)) - y * z)


def least_squares(w, X, y):
    """A tanh model's squared error: a chain of tanh, sub, mul between the
    products."""
    r = np.tanh(X @ w) - y
    return 0.5 * np.sum(r * r)


def explicit(w, X, y):
    """``X.T @ g(X @ w)`` written out (the function itself, not a derivative)."""
    return X.T @ (np.exp(-np.abs(X @ w)) * y - 0.5)


def batch(W, X, Y):
    """A batch of columns: ``X @ W`` of shape (n, c), its gradient ``X.T @ R``."""
    return np.sum(np.tanh(X @ W) * Y)


def scaled(w, X, y):
    """No product: one wide elementwise loop over X's shape, then a sum."""
    return np.sum(np.tanh(X * w) * y[:, None])
