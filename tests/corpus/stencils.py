"""Finite-difference and finite-volume stencils on small grids.

Written with slicing, ``np.roll`` for periodic boundaries, and padded copies, as a
PDE solver's residual or a variational image model writes them.
"""

import numpy as np


def laplacian_1d(u):
    h = 1.0 / (len(u) - 1)
    return (u[:-2] - 2 * u[1:-1] + u[2:]) / h**2


def laplacian_1d_periodic(u):
    return np.roll(u, 1) - 2 * u + np.roll(u, -1)


def laplacian_2d(u):
    return u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]


def laplacian_2d_periodic(u):
    return (
        np.roll(u, 1, axis=0)
        + np.roll(u, -1, axis=0)
        + np.roll(u, 1, axis=1)
        + np.roll(u, -1, axis=1)
        - 4 * u
    )


def poisson_residual_energy(u, rhs):
    lap = np.zeros_like(u)
    lap[1:-1, 1:-1] = (
        u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]
    )
    return 0.5 * np.sum((lap - rhs) ** 2)


def total_variation(img):
    dx = img[1:, :-1] - img[:-1, :-1]
    dy = img[:-1, 1:] - img[:-1, :-1]
    return np.sum(np.sqrt(dx**2 + dy**2 + 1e-6))


def total_variation_anisotropic(img):
    return np.abs(np.diff(img, axis=0)).sum() + np.abs(np.diff(img, axis=1)).sum()


def rof_denoising(u, noisy):
    gx = np.roll(u, -1, axis=1) - u
    gy = np.roll(u, -1, axis=0) - u
    tv = np.sum(np.sqrt(gx**2 + gy**2 + 1e-4))
    return 0.5 * np.sum((u - noisy) ** 2) + 0.2 * tv


def burgers_flux_residual(u):
    fp = np.maximum(u, 0) ** 2 * 0.5
    fm = np.minimum(u, 0) ** 2 * 0.5
    flux = fp[:-1] + fm[1:]
    res = np.zeros_like(u)
    res[1:-1] = -(flux[1:] - flux[:-1])
    return res


def upwind_advection(u, c):
    return -c * (u - np.roll(u, 1))


def dirichlet_energy(u):
    padded = np.pad(u, 1)
    gx = padded[1:-1, 2:] - padded[1:-1, 1:-1]
    gy = padded[2:, 1:-1] - padded[1:-1, 1:-1]
    return 0.5 * np.sum(gx**2 + gy**2)


def smoothing_penalty(u):
    return np.sum(np.gradient(u) ** 2)


def lax_friedrichs_flux(u):
    a = np.max(np.abs(u))
    f = u**2 / 2
    ul, ur = u[:-1], u[1:]
    return 0.5 * (f[:-1] + f[1:]) - 0.5 * a * (ur - ul)


def convolution_blur(u, kernel):
    return np.sum(np.convolve(u, kernel, mode="valid") ** 2)


CASES = {
    "laplacian_1d": {"x": (6,)},
    "laplacian_1d_periodic": {"x": (6,)},
    "laplacian_2d": {"x": (4, 4)},
    "laplacian_2d_periodic": {"x": (3, 4)},
    "poisson_residual_energy": {"x": (4, 4), "ctx": [("rhs", (4, 4))]},
    "total_variation": {"x": (3, 4)},
    "total_variation_anisotropic": {"x": (3, 3)},
    "rof_denoising": {"x": (3, 3), "ctx": [("noisy", (3, 3))]},
    "burgers_flux_residual": {"x": (6,)},
    "upwind_advection": {"x": (6,), "ctx": [("c", ())]},
    "dirichlet_energy": {"x": (3, 3)},
    "smoothing_penalty": {"x": (6,)},
    "lax_friedrichs_flux": {"x": (5,)},
    "convolution_blur": {"x": (6,), "ctx": [("kernel", (3,))]},
}
