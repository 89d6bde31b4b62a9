"""np.heaviside at its special points (tests/primitives/test_heaviside.py): the input
holds the steps' arguments, then their values at 0."""

import numpy as np


def step(x):
    n = x.size // 2
    return np.heaviside(x[:n], x[n:])
