"""Functions whose derivatives move shifted slices, rolls, concatenations, pads
and broadcasts: in C the adjoint of each move is a gather inside the loop that
computes the result (tests/targets/c/test_c_shifted_moves.py)."""

import numpy as np


def rosenbrock(x):
    return np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def stencil(x):
    return np.sum((x[2:] - 2 * x[1:-1] + x[:-2]) ** 2 + 0.5 * x[1:-1] ** 4)


def rolled(x):
    return np.sum(x**2 * np.roll(x, 1) - 0.25 * x * np.roll(x, -2) ** 3)


def concatenated(x):
    y = np.concatenate([x[1:] * x[:-1], x[:1] ** 3])
    return np.sum(y**2 * np.concatenate([2.0 * x, x[:1]])[1:])


def padded(x):
    p = np.pad(x**2, 1)
    return np.sum((p[2:] - p[:-2]) ** 2 * x)


def broadcast(x):
    return np.sum((x - np.mean(x)) ** 2 * x[::-1])


def residual(x):
    return x[1:] - x[:-1] ** 2 + 0.5 * x[1:] * x[:-1]
