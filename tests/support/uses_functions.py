"""Functions for tests/render/test_uses.py: code that names modules besides NumPy."""

import numpy as np


def halving(x, e):
    """A loop on a traced condition that reads a shared context only, so that its
    points variant runs one loop for all the points (and its adjoint, a stack of
    states, in the points variant of ``pullback`` too)."""
    t = e
    y = x
    while t > 0.1:
        t = t * 0.5
        y = np.sin(y) + t * y
    return y


def coupled(x):
    """Neighbours coupled through ``tanh`` (which ``math`` computes as NumPy does,
    so scalar code calls it directly): a small sparse jacobian."""
    return np.concatenate([np.tanh(x[1:] * x[:-1]), np.sin(x[:1])])
