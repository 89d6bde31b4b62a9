"""Linear algebra functions for tests/frontend/test_surface_linalg.py, written as plain NumPy.

The tests build them into generated modules (so they are module-level functions of an
importable file) and compare with JAX twins written there. Inputs are drawn from
[0.2, 0.8]; each function shifts them to a well-conditioned point (distinct singular
values and eigenvalues, invertible matrices).
"""

import numpy as np

D3 = np.diag([0.0, 1.5, 3.0])
W = np.array([1.0, 2.0, 4.0])


def cross(x):
    a, b = x[:6].reshape(2, 3), x[6:12].reshape(3, 2)
    return np.concatenate(
        [
            np.cross(a, b, axisb=0).ravel(),
            np.cross(a[0], b[:2, 0], axisc=0),
            np.cross(b[:2, 0], a[1]),
            np.cross(x[:4].reshape(2, 2), x[4:8].reshape(2, 2), axis=1) * 3.0,
            np.linalg.cross(a, b.T).ravel(),
        ]
    )


def tensordot(x):
    a, b = x.reshape(2, 3, 4), x[:12].reshape(4, 3)
    return np.concatenate(
        [
            np.tensordot(a, b, axes=([1, 2], [1, 0])),
            np.tensordot(a, x[:4], axes=1).ravel(),
            np.tensordot(x[:3], x[3:6], axes=0).ravel(),
            np.tensordot(a, a, 3).reshape(1),
            np.linalg.tensordot(b, b, axes=2).reshape(1),
            np.linalg.matmul(x[:3], b.T),
        ]
    )


def dot_nd(x):
    a, b = x.reshape(2, 3, 4), x.reshape(3, 4, 2)
    return np.concatenate([np.dot(a, b).ravel(), np.dot(a, x[:4]).ravel()])


def einsum_diagonal(x):
    A = x[:9].reshape(3, 3)
    T = x[:18].reshape(3, 3, 2)
    return np.concatenate(
        [
            np.einsum("ii->i", A) * np.einsum("ii->", A),
            np.einsum("iij->j", T),
            np.einsum("ij,jj->i", A, A * A),
        ]
    )


def einsum_ellipsis(x):
    S = x.reshape(2, 3, 3)
    return np.concatenate(
        [
            np.einsum("...ij,...jk->...ik", S, S).ravel(),
            np.einsum("...i,...i", S, x[:3]).ravel(),
            np.einsum("i...->...", S).ravel(),
            np.einsum("...ii->...i", S).ravel(),
            np.einsum("ij...,j->i...", S[:1], x[:3]).ravel(),
        ]
    )


def einsum_sublist(x):
    A = x[:9].reshape(3, 3)
    return np.concatenate(
        [
            np.einsum(A, [0, 1], A, [1, 2], [0, 2]).ravel(),
            np.einsum(A, [Ellipsis, 1], optimize=True).ravel(),
            np.einsum(A, [0, 0]).reshape(1),
            np.einsum("ij,jk,k->i", A, A, x[:3], optimize="greedy"),
        ]
    )


def matrix_power(x):
    A = x.reshape(3, 3) + 2.0 * np.eye(3)
    powers = [np.linalg.matrix_power(A, n) for n in (0, 1, 2, 3, 5, -1, -2)]
    return np.stack(powers).ravel()


def pinv(x):
    A = x.reshape(4, 3) * W
    return np.concatenate([np.linalg.pinv(A).ravel(), np.linalg.pinv(A.T).ravel()])


def pinv_hermitian(x):
    A = x[:9].reshape(3, 3) + D3
    return np.linalg.pinv(A, hermitian=True).ravel()


def svd_values(x):
    A = x.reshape(4, 3) * W
    return np.concatenate(
        [
            np.linalg.svd(A, compute_uv=False),
            np.linalg.svdvals(A.T.reshape(2, 3, 2)).ravel(),
        ]
    )


def svd_vectors(x):
    u, s, vh = np.linalg.svd(x.reshape(4, 3) * W, full_matrices=False)
    # products of matching columns do not depend on LAPACK's choice of signs
    return np.concatenate(
        [
            np.einsum("ik,jk->kij", u, u).ravel(),
            np.einsum("ki,kj->kij", vh, vh).ravel(),
            ((u * s) @ vh[:, :2]).ravel(),
        ]
    )


def eigh_values(x):
    A = x.reshape(3, 3) + D3
    return np.concatenate(
        [
            np.linalg.eigvalsh(A),
            np.linalg.eigvalsh(A, UPLO="U") * 2.0,
            np.linalg.eigh(A).eigenvalues,
        ]
    )


def eigh_vectors(x):
    w, v = np.linalg.eigh(x.reshape(3, 3) + D3, UPLO="U")
    return np.concatenate([np.einsum("ik,jk->kij", v, v).ravel(), w])


def matrix_norms(x):
    A = x.reshape(3, 4) * np.array([1.0, 2.0, 3.0, 5.0])
    orders = ["nuc", 2, -2, 1, -1, np.inf, -np.inf, "fro", None]
    return np.array([np.linalg.norm(A, o) for o in orders])


def vector_norms(x):
    v = x - 0.5
    orders = [1, 2, np.inf, -np.inf, 3, -1.5, 0, None]
    return np.array([np.linalg.norm(v, o) for o in orders])


def norm_axes(x):
    T = x.reshape(2, 3, 4) - 0.5
    return np.concatenate(
        [
            np.linalg.norm(T, 2, axis=(0, 2), keepdims=True).ravel(),
            np.linalg.norm(T, "nuc", axis=(2, 1)).ravel(),
            np.linalg.norm(T, 1, axis=(1, 0)).ravel(),
            np.linalg.norm(T, axis=1, ord=3).ravel(),
            np.linalg.norm(T, axis=-1, keepdims=True).ravel(),
            np.linalg.norm(T, keepdims=True).ravel(),
            np.linalg.matrix_norm(T, ord=np.inf).ravel(),
            np.linalg.vector_norm(T, axis=(0, 2), ord=1).ravel(),
        ]
    )


def stacked(x):
    S = x.reshape(2, 3, 3) + 3.0 * np.eye(3)
    sign, logdet = np.linalg.slogdet(S)
    return np.concatenate(
        [
            np.linalg.inv(S).ravel(),
            np.linalg.det(S),
            sign * logdet,
            np.linalg.solve(S, x[:3]).ravel(),
            np.linalg.solve(S, S[::-1]).ravel(),
            np.linalg.cholesky(S @ np.swapaxes(S, -1, -2)).ravel(),
        ]
    )


# scalar functions for second order (hvp, hessian)
def cross_energy(x):
    return np.sum(np.cross(x[:3], x[3:6]) ** 2)


def einsum_energy(x):
    A = x.reshape(3, 3)
    return np.einsum("ii->", A @ A) ** 2 + np.einsum("...i,...i->...", A, A).sum()


def nuclear_energy(x):
    A = x.reshape(4, 3) * W
    return np.linalg.norm(A, "nuc") + np.linalg.norm(A, 2) ** 2


def eigh_energy(x):
    w = np.linalg.eigvalsh(x.reshape(3, 3) + D3)
    return np.sum(w**3) + w[0] * w[2]


def pinv_energy(x):
    return np.sum(np.linalg.pinv(x.reshape(4, 3) * W) ** 2)


def power_energy(x):
    return np.sum(np.linalg.matrix_power(x.reshape(3, 3) + np.eye(3), 4) ** 2)


def stacked_small(x):
    """Stacks of 2 x 2 matrices, small enough for the SymPy backend."""
    S = x.reshape(2, 2, 2) + 2.0 * np.eye(2)
    sign, logdet = np.linalg.slogdet(S)
    return (
        np.linalg.inv(S)[:, 0, 1]
        + np.linalg.det(S)
        + sign * logdet
        + np.linalg.solve(S, x[:2])[:, 1]
        + np.linalg.cholesky(S + np.swapaxes(S, -1, -2))[:, 1, 1]
    )


def matrix_power_small(x):
    """Powers of a 2 x 2 matrix, small enough for the SymPy backend."""
    A = x.reshape(2, 2) + 2.0 * np.eye(2)
    powers = [np.linalg.matrix_power(A, n) for n in (0, 1, 3, -1)]
    return np.stack(powers).ravel()
