"""Functions for tests/targets/c/test_c_sparse.py: sparse results and gathered results."""

import numpy as np

N = 300
WEIGHTS = np.where(
    np.arange(N) % 3 == 0, 0.0, np.where(np.arange(N) % 3 == 1, 1.0, 2.5)
)
"""Zeros, ones and another value: elements computed on demand are grouped by
which constants are 0 or 1."""

PICKED = np.concatenate(
    [np.arange(0, 2 * N, 7), np.arange(5, 2 * N, 11), [3, 3, 3, 598, 0]]
)
"""Elements of the concatenation the result gathers, some of them repeated."""


def gathered(x):
    """A result gathered by an index table out of a concatenation of elementwise
    values (the shape of a colored jacobian's CSR data)."""
    a = np.sin(x) * WEIGHTS + np.sqrt(x)
    b = x * x - 1.0 / x
    return np.concatenate([a, b])[PICKED]


def stencil(u):
    """The Brusselator on a periodic grid (the benchmark's), for a sparse jacobian."""
    n = int(np.sqrt(u.size // 2))
    a, b = u[: n * n].reshape(n, n), u[n * n :].reshape(n, n)

    def lap(z):
        return (
            np.roll(z, 1, 0) + np.roll(z, -1, 0) + np.roll(z, 1, 1) + np.roll(z, -1, 1)
        ) - 4 * z

    du = 10.0 * lap(a) + 1.0 + a * a * b - 4.4 * a
    dv = 10.0 * lap(b) + 3.4 * a - a * a * b
    return np.concatenate([du.ravel(), dv.ravel()])


def anisotropic(u):
    """A reaction-diffusion stencil whose constant couplings take three values
    (10.0 across, 7.5 along, 2.0 for the second field), none of them most
    nonzeros, though together they are."""
    n = int(np.sqrt(u.size // 2))
    a, b = u[: n * n].reshape(n, n), u[n * n :].reshape(n, n)
    across = np.roll(a, 1, 0) + np.roll(a, -1, 0)
    along = np.roll(a, 1, 1) + np.roll(a, -1, 1)
    du = 10.0 * across + 7.5 * along + a * a * b - 4.4 * a + 1.25 * b
    dv = 1.25 * a - a * a * b - 3.0 * b + 2.0 * np.roll(b, 1, 0)
    return np.concatenate([du.ravel(), dv.ravel()])


def chain(x):
    """Neighbours multiplied: a tiny sparse jacobian, printed as straight-line C."""
    return np.concatenate([x[1:] * x[:-1], np.sin(x[:1])])


def banded(x):
    """Rosenbrock's function: a dense hessian that is mostly structural zeros."""
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)
