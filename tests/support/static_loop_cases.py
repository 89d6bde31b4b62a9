"""Functions with ``for`` loops over a build-time ``range`` (issue 21, item 4): each
long enough to become one ``while_loop`` on a traced index (``LOOP_MIN_TRIPS``),
checked against the same function unrolled. ``CASES`` maps a name to (function
name, input shape, points); ``UNROLLED`` the loops that must stay unrolled."""

from __future__ import annotations

import numpy as np

STEPS = 60


def euler(p):
    """The scale benchmark's explicit Euler: Python floats as the initial state."""
    h = 0.01
    pos, vel = 1.0, 0.0
    for _ in range(STEPS):
        acc = -p[0] * pos - p[1] * vel + 0.5 * np.sin(pos)
        pos, vel = pos + h * vel, vel + h * acc
    return pos**2 + vel**2


def decay(x):
    """An array state, the index used as a traced number and as a traced index."""
    y = x * 1.0
    total = 0.0
    for i in range(2, 2 + STEPS, 1):
        y = y * (1.0 - 0.001 * i) + 0.01 * np.sin(y[::-1])
        total = total + y[i % 3] * x[0]
    return np.concatenate([y, np.array([total])])


def downwards(x):
    """A negative step."""
    s = x[0]
    for i in range(2 * STEPS, 0, -2):
        s = s + 0.01 * np.cos(s * x[1]) * i
    return s * x[2]


def breaking(x):
    """A ``break`` on a traced condition: the rest of the loop under a flag."""
    s = x[0] * 0.5
    for _ in range(STEPS):
        if s > 3.0:
            break
        s = s + 0.1 * np.exp(-s) * x[1]
    return s * s


def skipping(x):
    """A ``continue`` on the (traced) index and one on a traced value."""
    s = x * 0.5
    for i in range(STEPS):
        if i % 3 == 0:
            continue
        if s[0] > 10.0:
            continue
        s = s + 0.05 * np.tanh(s[::-1] * x)
    return np.sum(s**2)


def nested(x):
    """A loop in a loop."""
    s = x * 1.0
    for _ in range(40):
        t = s * 0.0
        for j in range(35):
            t = t + 0.001 * np.sin(s + 0.01 * j)
        s = s + t * x[0]
    return np.sum(s * s)


def branched(x):
    """A loop inside a branch on a traced value."""
    s = x[0] * 1.0
    if x[1] > 0.0:
        for _ in range(STEPS):
            s = s + 0.01 * np.sin(s) * x[2]
    else:
        s = s * x[2]
    return s


def written(x):
    """An array written in place by the loop."""
    out = np.zeros(3)
    out[:] = x
    for _ in range(STEPS):
        out[1:] = out[1:] * 0.99 + 0.01 * out[:-1] * x[0]
    return out * 1.0


TABLE = [0.5 * k for k in range(100)]


def listed(x):
    """A Python list indexed by the loop's index: stays unrolled."""
    s = x[0] * 1.0
    for i in range(STEPS):
        s = s + TABLE[i] * 0.001 * np.sin(s * x[1])
    return s


def triangular(x):
    """An inner ``range(i % 4)``: a loop on a traced trip count inside the loop."""
    s = x[0] * 1.0
    for i in range(100):
        for _ in range(i % 4):
            s = s * 0.999 + 0.001 * x[1]
    return s


def shaped(x):
    """A shape that depends on the index: stays unrolled."""
    s = x[0] * 1.0
    for i in range(100):
        s = s * 0.999 + 0.001 * x[1] * np.sum(np.ones(i % 3 + 1))
    return s


def short(x):
    """Ten steps: unrolled, as it was."""
    s = x[0] * 1.0
    for _ in range(10):
        s = s + 0.1 * np.sin(s) * x[1]
    return s


def linear(x):
    """A linear recurrence, small enough for SymPy unrolled."""
    s = x[0] * 1.0
    for _ in range(40):
        s = 0.9 * s + 0.1 * x[1]
    return s * x[0]


POINTS3 = [np.array([0.7, 1.3, -0.4]), np.array([1.9, -0.6, 0.8])]
CASES = {
    "euler": ("euler", [2], [np.array([4.0, 0.3]), np.array([1.5, 2.0])]),
    "decay": ("decay", [3], POINTS3),
    "downwards": ("downwards", [3], POINTS3),
    "breaking": ("breaking", [2], [np.array([0.4, 2.0]), np.array([0.2, 0.9])]),
    "skipping": ("skipping", [3], POINTS3),
    "nested": ("nested", [3], POINTS3),
    "branched": ("branched", [3], POINTS3),
    "written": ("written", [3], POINTS3),
    "triangular": ("triangular", [2], [np.array([0.4, 2.0]), np.array([-1.0, 0.5])]),
}
UNROLLED = {"listed": ("listed", [2]), "shaped": ("shaped", [2])}


def counted(x, n):
    """A trip count from an int64 context: a loop whatever its value."""
    s = x * 1.0
    k = 0
    for i in range(n):
        s = s + 0.01 * np.sin(s[::-1]) * x + 0.001 * i
        k = k + 2
    return s * k
