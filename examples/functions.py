"""Example functions for difgen, written as ordinary NumPy code."""

import numpy as np


def seed(x):
    """The function of the DifferentiationInterface.jl issue; its derivative is 81 x."""
    A = np.array([[x + 1, x + 2, x + 3], [x + 4, x + 5, x + 6], [x + 7, x + 8, x + 9]])
    B = np.array([[x - 1, x - 2, x - 3], [x - 4, x - 5, x - 6], [x - 7, x - 8, x - 9]])
    return np.sum(A.T @ (B * 1.5))


def rosenbrock(x):
    """The extended Rosenbrock function."""
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def lorenz(u, p):
    """Right-hand side of the Lorenz system; p = (sigma, rho, beta) is a context."""
    sigma, rho, beta = p[0], p[1], p[2]
    du = np.zeros(3)
    du[0] = sigma * (u[1] - u[0])
    du[1] = u[0] * (rho - u[2]) - u[1]
    du[2] = u[0] * u[1] - beta * u[2]
    return du


def tanh_layer(W, a):
    """A matrix input: sum(tanh(W @ a)) with W 3x4 and a a context."""
    return np.sum(np.tanh(W @ a))
