"""Functions for tests/targets/test_sparse_tables.py: sparse derivatives whose
index tables (CSR pattern, colors, positions of the nonzeros) are large enough
(over 4,096 entries) to be printed compactly, one per kind of structure."""

import numpy as np


def banded(x):
    """Periodic band: each row on its neighbours at -2, -1, 0 and +2."""
    return x * np.roll(x, 1) + np.sin(np.roll(x, -2)) + np.roll(x, 2) ** 2


def dense_row(x):
    """Elementwise rows, then one row on every element."""
    return np.concatenate([x**2 * np.roll(x, 1), np.reshape(np.sum(x**3), (1,))])


def dense_column(x):
    """Every row on its own element and on the first one."""
    return x * x[0] + x**3


def blocks(x):
    """Dense 4 x 4 blocks on the diagonal."""
    z = x.reshape(-1, 4)
    return (z * np.sum(z**2, axis=1, keepdims=True)).ravel()


def arrowhead(x):
    """A Hessian with a dense first row and column and a diagonal."""
    return np.sum(x[0] * x[1:] ** 2) + np.sum(x**4)


def stencil(u):
    """The 2-D Brusselator on a periodic grid (the benchmark's)."""
    n = int(np.sqrt(u.size // 2))
    a, b = u[: n * n].reshape(n, n), u[n * n :].reshape(n, n)

    def lap(z):
        return (
            np.roll(z, 1, 0) + np.roll(z, -1, 0) + np.roll(z, 1, 1) + np.roll(z, -1, 1)
        ) - 4 * z

    du = 10.0 * lap(a) + 1.0 + a * a * b - 4.4 * a
    dv = 10.0 * lap(b) + 3.4 * a - a * a * b
    return np.concatenate([du.ravel(), dv.ravel()])
