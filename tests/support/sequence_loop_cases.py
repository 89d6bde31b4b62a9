"""Functions with ``for`` loops over static sequences (issue 21, item 4): a list of
arrays, a list of floats, an array along its first axis, a traced array's rows,
``enumerate`` and ``zip``, each long enough to become one ``while_loop`` on an index
into the stacked items, checked against the same function unrolled. ``CASES`` maps a
name to (function name, input shape, points); ``UNROLLED`` the loops that must stay
unrolled, with the words of their build note."""

from __future__ import annotations

import numpy as np

N = 80
WEIGHTS = [np.array([0.01 * k, 0.2, -0.005 * k]) for k in range(N)]
GRID = np.linspace(0.0, 1.0, N + 10)
RATES = [0.1 * k for k in range(N)]


def over_list(x):
    """A list of arrays."""
    s = x * 1.0
    for w in WEIGHTS:
        s = s + 0.01 * np.sin(s * w)
    return np.sum(s * s)


def over_array(x):
    """A constant array along its first axis."""
    s = x[0] * 1.0
    for c in GRID:
        s = s + 0.01 * np.cos(s * c) * x[1]
    return s * x[1]


def over_floats(x):
    """A list of Python floats."""
    s = x[0] * 1.0
    for a in RATES:
        s = s + 0.01 * np.sin(s + a) * x[1]
    return s


def enumerated(x):
    """``enumerate``: the count and the item."""
    s = x * 1.0
    for i, w in enumerate(WEIGHTS):
        s = s + 0.001 * i * np.tanh(s * w)
    return np.sum(s)


def zipped(x):
    """``zip`` of an array and a list, the shorter deciding the trip count."""
    s = x[0] * 1.0
    for a, w in zip(GRID, WEIGHTS):
        s = s * (1.0 - 0.001 * a) + 0.01 * np.sum(w) * np.sin(x[1] * s)
    return s


def rows(x):
    """The rows of a traced array (the input reshaped)."""
    s = x[0] * 0.0
    for row in x.reshape(40, 2):
        s = s + 0.1 * np.sin(row[0] * s) + row[1] ** 2
    return s


def breaking(x):
    """A ``break`` on a traced condition in a loop over a list."""
    s = x[0] * 0.5
    for a in RATES:
        if s > 3.0:
            break
        s = s + 0.1 * np.exp(-s) * x[1] * (1.0 + 0.01 * a)
    return s * s


POINTS2 = [np.array([0.7, 1.3]), np.array([1.9, -0.6])]
POINTS3 = [np.array([0.7, 1.3, -0.4]), np.array([1.9, -0.6, 0.8])]
CASES = {
    "over_list": ("over_list", [3], POINTS3),
    "over_array": ("over_array", [2], POINTS2),
    "over_floats": ("over_floats", [2], POINTS2),
    "enumerated": ("enumerated", [3], POINTS3),
    "zipped": ("zipped", [2], POINTS2),
    "rows": ("rows", [80], [np.linspace(-1.0, 1.0, 80), np.cos(np.arange(80.0))]),
    "breaking": ("breaking", [2], [np.array([0.4, 2.0]), np.array([0.2, 0.9])]),
}

RAGGED = [np.ones(k % 3 + 1) for k in range(N)]


def ragged(x):
    """Items of different shapes: cannot be stacked."""
    s = x[0] * 1.0
    for w in RAGGED:
        s = s + 0.01 * np.sum(w) * np.sin(s * x[1])
    return s


def growing(x):
    """A state that grows: its shape changes between iterations."""
    s = x * 1.0
    for c in GRID:
        s = np.concatenate([s, np.sin(s[-1:] * c)])
    return np.sum(s)


UNROLLED = {
    "ragged": ("ragged", [2], "the body differs between iterations"),
    "growing": ("growing", [2], "the state changes shape"),
}
