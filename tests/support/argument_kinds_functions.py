"""Functions of test_argument_kinds.py: one per kind of argument position (array
input with a float context, vector output, scalar input, int64 and bool contexts,
points)."""

import numpy as np


def energy(x, p):
    return np.sum(p * np.sin(x)) ** 2 + np.sum(x * x)


def field(x, p):
    return p * x**2 + np.cos(x)


def curve(x):
    return np.sin(x) * x


def gather(x, idx):
    return np.sum(x[idx] ** 2) + np.sum(np.sin(x))


def masked(x, m):
    return np.sum(np.where(m, x**2, x))
