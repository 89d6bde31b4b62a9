"""Loops that compute with their integer counter (issue 21, item 5): each a static
``range`` long enough to stay a loop, its body reading ``i`` as a number
(``i * dt``), as an index (``x[i % 3]``, ``x[i - 1]``) and through integer arithmetic (``i % 3``, ``(i - 40) // 7`` on
negative values, Python's sign rules). ``CASES`` maps a name to (input shape,
points); ``stopping`` (a ``break``) stays in Python."""

from __future__ import annotations

import numpy as np


def clocked(p):
    """Explicit Euler with a time-dependent forcing: ``t = i * dt``."""
    dt = 0.01
    pos, vel = 1.0, 0.0
    for i in range(300):
        t = i * dt
        acc = -p[0] * pos - p[1] * vel + 0.5 * np.sin(3.0 * t) * p[2]
        pos, vel = pos + dt * vel, vel + dt * acc
    return pos**2 + vel**2


def cyclic(x):
    """Weights from ``i % 3`` and ``(7 - i) // 3`` (negative from i = 8 on), an
    array state."""
    s = x * 1.0
    for i in range(40):
        w = 0.01 * (i % 3 - 1) + 0.0001 * ((7 - i) // 3)
        s = s + 0.01 * np.sin(s[::-1] * x) * (0.01 * i) + w * s
    return np.sum(s**2)


def downwards(x):
    """A negative step; ``//`` and ``%`` of negative integers."""
    s = x[0] * 1.0
    for i in range(60, 0, -1):
        a = (i - 40) // 7  # negative below 40
        b = (3 * i - 50) % 7  # of negative values below 17
        s = s + 0.01 * np.cos(s * x[1]) * a + 0.001 * b * x[2] - 0.0001 * (i * i)
    return s * x[2]


def indexed(x):
    """The counter as an index: ``x[i % 3]`` weights, ``x[i]`` and ``x[i - 1]``
    (``x[-1]`` at ``i = 0``) over an argument of the loop's length, in range at
    every trip."""
    s = x[:3] * 1.0
    for i in range(40):
        s = s + 0.01 * np.sin(s[::-1]) * x[i % 3] + 0.001 * x[i] * x[i - 1]
    return np.sum(s**2)


def stopping(x):
    """A ``break`` on a traced value, the counter in the body: ``i`` is then a
    state of its own (kept at its value once the loop breaks), whose integers the
    build does not bound, and the C keeps the operator in Python."""
    s = x[0] * 0.5
    for i in range(100):
        if s > 3.0:
            break
        s = s + 0.001 * np.exp(-s) * x[1] * (i % 5 + 1)
    return s * s


POINTS = {
    2: [np.array([4.0, 0.3]), np.array([1.5, 2.0])],
    3: [np.array([0.7, 1.3, -0.4]), np.array([1.9, -0.6, 0.8])],
}
CASES = {
    "clocked": ([3], [np.array([4.0, 0.3, 1.1]), np.array([1.5, 2.0, -0.7])]),
    "cyclic": ([3], POINTS[3]),
    "downwards": ([3], POINTS[3]),
    "indexed": ([40], [np.linspace(-1.0, 1.5, 40), np.cos(np.arange(40.0))]),
}
