"""Potential energies of particle systems, with pair loops, vectorized pair sums and
neighbour (edge) lists.

Positions ``x`` are ``(n_atoms, dim)``; topology (edges, angles, neighbour pairs)
comes as integer contexts, as a molecular-dynamics code keeps it.
"""

import numpy as np


def lennard_jones_loop(x):
    energy = 0.0
    n = x.shape[0]
    for i in range(n):
        for j in range(i + 1, n):
            r2 = np.sum((x[i] - x[j]) ** 2)
            inv6 = 1.0 / r2**3
            energy += 4.0 * (inv6 * inv6 - inv6)
    return energy


def lennard_jones_vectorized(x):
    diff = x[:, None, :] - x[None, :, :]
    r2 = np.sum(diff**2, axis=-1)
    i, j = np.triu_indices(x.shape[0], k=1)
    inv6 = r2[i, j] ** -3
    return np.sum(4 * (inv6**2 - inv6))


def springs_edge_list(x, edges, rest):
    i, j = edges[:, 0], edges[:, 1]
    d = np.linalg.norm(x[i] - x[j], axis=1)
    return 0.5 * np.sum((d - rest) ** 2)


def springs_float_edges(x, edges, rest):
    i = edges[:, 0].astype(int)
    j = edges[:, 1].astype(int)
    d = np.sqrt(np.sum((x[i] - x[j]) ** 2, axis=1))
    return 0.5 * np.sum((d - rest) ** 2)


RING = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]])


def springs_fixed_topology(x):
    d = x[RING[:, 0]] - x[RING[:, 1]]
    return np.sum((np.sqrt(np.sum(d * d, axis=1)) - 1.0) ** 2)


def coulomb(x, q):
    e = 0.0
    for i in range(len(q)):
        for j in range(i):
            e = e + q[i] * q[j] / np.linalg.norm(x[i] - x[j])
    return e


def coulomb_vectorized(x, q):
    d = np.sqrt(((x[:, np.newaxis] - x[np.newaxis]) ** 2).sum(-1) + np.eye(len(q)))
    qq = np.outer(q, q)
    return 0.5 * np.sum((qq / d) * (1 - np.eye(len(q))))


def harmonic_chain(x, k):
    return 0.5 * k * np.sum(np.diff(x) ** 2)


def harmonic_chain_slices(x, k):
    bonds = x[1:] - x[:-1]
    return 0.5 * k * np.sum((bonds - 1.0) ** 2) + 0.5 * k * (x[0] ** 2)


def bond_angles(x, triples, theta0):
    a, b, c = triples[:, 0], triples[:, 1], triples[:, 2]
    u = x[a] - x[b]
    v = x[c] - x[b]
    cos = np.sum(u * v, axis=1) / (
        np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1)
    )
    return np.sum((np.arccos(cos) - theta0) ** 2)


def bond_angle_fixed(x):
    u = x[0] - x[1]
    v = x[2] - x[1]
    cos = u @ v / np.sqrt((u @ u) * (v @ v))
    return (np.arccos(cos) - 1.9) ** 2


def neighbour_list_energy(x, pairs):
    r = np.linalg.norm(x[pairs[:, 0]] - x[pairs[:, 1]], axis=-1)
    return np.sum(np.exp(-r) / r)


def cutoff_pair_energy(x):
    diff = x[:, None, :] - x[None, :, :]
    r = np.sqrt(np.sum(diff**2, axis=2) + np.eye(len(x)))
    rc = 1.5
    smooth = np.where(r < rc, (1 - r / rc) ** 2, 0.0)
    return np.sum(np.triu(smooth, 1))


def morse(x):
    D, a, r0 = 1.0, 1.5, 1.0
    e = 0.0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            r = np.sqrt(np.dot(x[i] - x[j], x[i] - x[j]))
            e += D * (1 - np.exp(-a * (r - r0))) ** 2
    return e


def gravity(x, m):
    n = m.shape[0]
    U = 0.0
    for i in range(n - 1):
        r = np.linalg.norm(x[i + 1 :] - x[i], axis=1)
        U -= m[i] * np.sum(m[i + 1 :] / r)
    return U


def fene_chain(x):
    k, R0 = 30.0, 1.5
    b = np.linalg.norm(np.diff(x, axis=0), axis=1)
    return -0.5 * k * R0**2 * np.sum(np.log(1 - (b / R0) ** 2))


def dihedral(x):
    b1, b2, b3 = x[1] - x[0], x[2] - x[1], x[3] - x[2]
    n1 = np.cross(b1, b2)
    n2 = np.cross(b2, b3)
    cos_phi = n1 @ n2 / (np.linalg.norm(n1) * np.linalg.norm(n2))
    return 1 + cos_phi


CASES = {
    "lennard_jones_loop": {"x": (3, 2), "ctx": [], "xsample": "atoms3"},
    "lennard_jones_vectorized": {"x": (3, 2), "xsample": "atoms3"},
    "springs_edge_list": {
        "x": (4, 2),
        "ctx": [
            ("edges", (5, 2), "int64", "edges4"),
            ("rest", (5,), "float64", "ones"),
        ],
    },
    "springs_float_edges": {
        "x": (4, 2),
        "ctx": [
            ("edges", (5, 2), "float64", "edges4"),
            ("rest", (5,), "float64", "ones"),
        ],
    },
    "springs_fixed_topology": {"x": (4, 2)},
    "coulomb": {"x": (3, 3), "ctx": [("q", (3,))], "xsample": "atoms3"},
    "coulomb_vectorized": {"x": (3, 3), "ctx": [("q", (3,))], "xsample": "atoms3"},
    "harmonic_chain": {"x": (5,), "ctx": [("k", ())]},
    "harmonic_chain_slices": {"x": (5,), "ctx": [("k", ())]},
    "bond_angles": {
        "x": (4, 3),
        "ctx": [("triples", (2, 3), "int64", "triples4"), ("theta0", (2,))],
        "xsample": "atoms4",
    },
    "bond_angle_fixed": {"x": (3, 3), "xsample": "atoms3"},
    "neighbour_list_energy": {
        "x": (3, 2),
        "ctx": [("pairs", (3, 2), "int64", "pairs3")],
        "xsample": "atoms3",
    },
    "cutoff_pair_energy": {"x": (3, 2), "xsample": "atoms3"},
    "morse": {"x": (3, 2), "xsample": "atoms3"},
    "gravity": {
        "x": (3, 3),
        "ctx": [("m", (3,), "float64", "positive")],
        "xsample": "atoms3",
    },
    "fene_chain": {"x": (4, 2), "xlim": (0.0, 0.3)},
    "dihedral": {"x": (4, 3), "xsample": "atoms4"},
}
