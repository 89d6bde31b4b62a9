"""Linear-algebra objectives: quadratic forms, log-determinants, solves, Cholesky
and norms, built from parameters as statistics and control code builds them.
"""

import numpy as np


def quadratic_form(x, A, b):
    return 0.5 * x @ A @ x - b @ x


def logdet_slogdet(x, B):
    A = B @ B.T + np.diag(np.exp(x))
    _, logdet = np.linalg.slogdet(A)
    return logdet


def solve_based(x, A, b):
    M = A + np.diag(x**2 + 1.0)
    return np.linalg.solve(M, b)


def gp_nll(theta, X, y):
    lengthscale, variance, noise = np.exp(theta)
    d2 = (X[:, None] - X[None, :]) ** 2
    K = variance * np.exp(-0.5 * d2 / lengthscale**2) + noise * np.eye(len(X))
    L = np.linalg.cholesky(K)
    alpha = np.linalg.solve(L.T, np.linalg.solve(L, y))
    return (
        0.5 * y @ alpha + np.sum(np.log(np.diag(L))) + 0.5 * len(X) * np.log(2 * np.pi)
    )


def trace_of_inverse(x):
    A = np.eye(3) * 2.0 + np.outer(x, x)
    return np.trace(np.linalg.inv(A))


def frobenius_norm(x):
    M = x.reshape(3, 3)
    return np.linalg.norm(M @ M.T - np.eye(3))


def vector_norms(x):
    return np.linalg.norm(x) + np.linalg.norm(x, 1) + np.linalg.norm(x, np.inf)


def determinant(x):
    return np.linalg.det(x.reshape(3, 3) + 2.0 * np.eye(3))


def mahalanobis(x, mean, cov):
    d = x - mean
    return d @ np.linalg.inv(cov) @ d


def rayleigh_quotient(x, A):
    return (x @ A @ x) / (x @ x)


def least_squares_residual(x, A, b):
    return np.sum((A @ x - b) ** 2) / 2


def bilinear_einsum(x, A):
    M = x.reshape(2, 3)
    return np.einsum("ij,jk,ik->", M, A, M)


def gram_logdet(x):
    V = x.reshape(3, 2)
    G = V.T @ V + 1e-3 * np.eye(2)
    return np.log(np.linalg.det(G))


def kron_penalty(x, A):
    return np.sum(np.kron(A, x.reshape(2, 2)) ** 2)


def smallest_eigenvalue(x):
    M = x.reshape(2, 2)
    S = M + M.T
    return np.linalg.eigvalsh(S)[0]


def matrix_power_trace(x):
    M = x.reshape(2, 2)
    return np.trace(np.linalg.matrix_power(M, 3))


CASES = {
    "quadratic_form": {
        "x": (4,),
        "ctx": [("A", (4, 4), "float64", "spd4"), ("b", (4,))],
    },
    "logdet_slogdet": {"x": (3,), "ctx": [("B", (3, 3))]},
    "solve_based": {"x": (3,), "ctx": [("A", (3, 3), "float64", "spd3"), ("b", (3,))]},
    "gp_nll": {"x": (3,), "ctx": [("X", (4,)), ("y", (4,))], "xlim": (-0.5, 0.5)},
    "trace_of_inverse": {"x": (3,)},
    "frobenius_norm": {"x": (9,)},
    "vector_norms": {"x": (4,)},
    "determinant": {"x": (9,)},
    "mahalanobis": {
        "x": (3,),
        "ctx": [("mean", (3,)), ("cov", (3, 3), "float64", "spd3")],
    },
    "rayleigh_quotient": {"x": (3,), "ctx": [("A", (3, 3), "float64", "spd3")]},
    "least_squares_residual": {"x": (3,), "ctx": [("A", (5, 3)), ("b", (5,))]},
    "bilinear_einsum": {"x": (6,), "ctx": [("A", (3, 3))]},
    "gram_logdet": {"x": (6,)},
    "kron_penalty": {"x": (4,), "ctx": [("A", (2, 2))]},
    "smallest_eigenvalue": {"x": (4,)},
    "matrix_power_trace": {"x": (4,)},
}
