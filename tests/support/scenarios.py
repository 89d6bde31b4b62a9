"""Scenario functions for the operator matrix, in the spirit of DifferentiationInterfaceTest.

Written as plain NumPy through the module-global ``np``, so the same code runs under
difgen's tracer and, with ``np`` rebound to ``autograd.numpy``, under the oracle.
Each entry: function, input shape, context shapes, and a safe random input range.
"""

import numpy as np

A = np.array([[0.3, -1.2, 0.7], [1.1, 0.4, -0.5]])


def scalar_scalar(x):
    return np.sin(x) * np.exp(x) + x**3 / (1.0 + x * x) + np.sqrt(x + 3.0)


def scalar_vector(x):
    return np.array([np.sin(x), x * x, np.exp(-x), np.arctan(x) * 2.0])


def scalar_matrix(x):
    return np.array([[x, x * x, np.cos(x)], [np.tanh(x), 1.0, np.log(x + 2.0)]])


def vector_scalar(x):
    return np.sum(x**2 * np.sin(x)) + np.prod(x[:2]) - np.mean(np.cosh(x))


def vector_vector(x):
    return np.tanh(A @ x) * x[:2] + np.cumsum(x)[1:]


def matrix_scalar(W):
    return np.log(np.sum(np.exp(W))) + np.sum(W.T @ W) * 0.25


def matrix_matrix(W):
    return (W.T @ W) * 0.5 + np.sin(W.T) @ W


def vector_scalar_ctx(x, c):
    return np.sum(c * x**2) + np.dot(x, c) ** 2


def vector_vector_ctx(x, M, s):
    return np.sin(M @ x) * s + x[::-1]


def vector_scalar_kinks(x):
    return np.sum(
        np.where(x > 0.5, x**2, -x)
        + np.maximum(x, 0.3)
        + np.abs(x - 0.5)
        + np.clip(x, 0.2, 0.8)
    ) + np.max(x) * np.min(x)


SCENARIOS = {
    # name: (input shape, context shapes)
    "scalar_scalar": ((), ()),
    "scalar_vector": ((), ()),
    "scalar_matrix": ((), ()),
    "vector_scalar": ((4,), ()),
    "vector_vector": ((3,), ()),
    "matrix_scalar": ((2, 3), ()),
    "matrix_matrix": ((3, 2), ()),
    "vector_scalar_ctx": ((3,), ((3,),)),
    "vector_vector_ctx": ((3,), ((3, 3), ())),
    "vector_scalar_kinks": ((4,), ()),
}
