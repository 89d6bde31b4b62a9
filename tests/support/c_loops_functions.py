"""Functions whose operators ``emit = "c"`` prints as C loops (tests/targets/c/test_c_loops.py).

Each is large enough (over the scalar budget of ``cost_model.scalar_reason``) that
the trace backend's graph goes to loops rather than straight-line C.
"""

import numpy as np


def fused(x, c, s):
    """Elementwise chains over vectors, broadcast constants, a scalar context."""
    y = np.tanh(x) * c + np.exp(-(x**2)) / (1.0 + x**2)
    z = np.where(x > 0.1, np.log1p(np.abs(x)), s * x) - np.maximum(x, 0.2 * c)
    return np.sum(y * z) + s * np.sum(np.sqrt(x * x + 1.0))


def matrix(x):
    """Matrix shapes: broadcasting a row and a column, reductions over each axis."""
    m = x.reshape(20, 30)
    row = np.mean(m, axis=0)
    col = np.max(m, axis=1)
    t = np.sin(m - row) * np.cos(m.T.T + col[:, None])
    return np.sum(t * t) + np.prod(np.min(m, axis=1) * 0.1 + 1.0) + np.sum(m[::2, 1::3])


def structural(x):
    """Slices with steps, integer indices, transposes, concatenation, padding,
    stacking and item assignment (their transposes: scatters, sums of scatters)."""
    m = x.reshape(12, 40)
    a = np.concatenate([m[:, :7], m[:, 30:]], axis=1)
    b = np.pad(m[2:8], 1) * 2.0
    c = m.T[[3, 1, 4, 1, 5, 9, 2, 6]]
    w = m.copy()
    w[1:4] = 3.0 * m[:3] ** 2
    d = np.stack([m[0], m[5], m[-1]])
    e = np.roll(m, 3, axis=1)
    return (
        np.sum(a**2)
        + np.sum(np.tanh(b))
        + np.sum(c * c[::-1])
        + np.sum(w * m)
        + np.sum(d**3)
        + np.sum(e * m)
    )


def products(x, A, B):
    """Small products (loops) and large ones (BLAS), 1-D and 2-D."""
    h = np.tanh(A @ x)  # (200, 30) @ (30,)
    m = x[:12].reshape(3, 4) @ x[12:24].reshape(4, 3)  # small 2-D
    return np.sum(h * h) + h @ B @ h + np.sum(m * m) + x[:5] @ x[5:10]


def brusselator(u):
    """A stencil on a periodic grid (the benchmark's), for its sparse jacobian."""
    n = int(np.sqrt(u.size // 2))
    a, b = u[: n * n].reshape(n, n), u[n * n :].reshape(n, n)

    def lap(z):
        return (
            np.roll(z, 1, 0)
            + np.roll(z, -1, 0)
            + np.roll(z, 1, 1)
            + np.roll(z, -1, 1)
            - 4.0 * z
        )

    du = 1.0 + a * a * b - 4.4 * a + 10.0 * lap(a)
    dv = 3.4 * a - a * a * b + 10.0 * lap(b)
    return np.concatenate([du.ravel(), dv.ravel()])


def nan_semantics(x):
    """max/min with NaN, 0 * inf, log(0): NaN and inf as NumPy gives them."""
    return np.sum(np.log(np.abs(x)) * 0.0 + np.maximum(x, 0.5)) + np.max(x) * np.min(x)


def roots_and_zeros(x):
    """x ** 0.5 is NumPy's sqrt (NaN at -inf, where pow gives inf); maximum of
    0.0 and -0.0 is the second (its sign shows in 1 / m)."""
    m = np.maximum(x, -x)
    return np.sum(np.minimum(x**0.5, 1.0)) + np.sum(1.0 / m) + np.max(m * 0.0)


def sorted_sum(x):
    """np.sort has no C loop form: the operator stays in Python."""
    return np.sum(np.sort(x) * np.arange(x.size))


def rosenbrock(x):
    """A banded hessian: colored, scattered into a dense result it reshapes."""
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)
