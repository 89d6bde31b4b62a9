"""Functions whose builds used to run for minutes (issue 9, section 1).

Each is ordinary NumPy a user would write: a loop that rebuilds its state with
``np.array``, a vectorized pair potential, a small network, a max reduction, a
matrix inverse. ``tests/derive/test_build_time.py`` builds them on both backends and checks
the numbers against autograd; ``benchmarks/build_time.py`` times them at growing
sizes.
"""

from __future__ import annotations

import numpy as np


def euler(x, steps=20):
    """Explicit Euler on a damped, slightly nonlinear oscillator: ``steps`` steps
    of h = 0.05, the state rebuilt with ``np.array`` each step."""
    h = 0.05
    state = np.array([x[0], x[1]])
    for _ in range(steps):
        pos, vel = state[0], state[1]
        acc = -4 * pos - 0.3 * vel + 0.5 * np.sin(pos)
        state = np.array([pos + h * vel, vel + h * acc])
    return np.sum(state**2)


def rk4(x, steps=10):
    """Classical RK4 on a damped pendulum."""

    def rhs(y):
        return np.array([y[1], -np.sin(y[0]) - 0.1 * y[1]])

    h = 0.1
    y = x
    for _ in range(steps):
        k1 = rhs(y)
        k2 = rhs(y + h / 2 * k1)
        k3 = rhs(y + h / 2 * k2)
        k4 = rhs(y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return np.sum(y**2)


def fixed_point(x):
    """Ten sweeps of z = tanh(x + z / 2)."""
    z = np.zeros_like(x)
    for _ in range(10):
        z = np.tanh(x + 0.5 * z)
    return np.sum(z)


def lennard_jones(x):
    """The Lennard-Jones energy of the atoms at the rows of x, vectorized."""
    d = x[:, None, :] - x[None, :, :]
    r2 = (d**2).sum(-1)
    i, j = np.triu_indices(x.shape[0], 1)
    inv6 = r2[i, j] ** -3
    return np.sum(4.0 * (inv6**2 - inv6))


def mlp(x, data):
    """Mean squared error of a 2-3-1 tanh network on 8 samples (weights in x)."""
    w = x[:6].reshape(2, 3)
    b = x[6:9]
    v = x[9:12]
    hidden = np.tanh(data @ w + b)
    return np.mean((hidden @ v - 1.0) ** 2)


def largest(x):
    """The largest element, plus a smooth term so the gradient is not one-hot."""
    return np.max(x) + 0.1 * np.sum(x**2)


def smallest(x):
    """The smallest element, plus a smooth term."""
    return np.min(x) + 0.1 * np.sum(x**2)


def inverse_sum(x):
    """The sum of the entries of the inverse."""
    return np.sum(np.linalg.inv(x))


def rosenbrock(x):
    """The extended Rosenbrock function."""
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)
