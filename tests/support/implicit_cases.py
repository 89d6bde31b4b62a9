"""Converged loops for implicit differentiation (issue 22, item 6).

Each function solves an equation by iterating until a tolerance test fails; the
tests build them with ``implicit = true`` and compare with the analytic derivative
of the solution (Kepler's ``1 / (1 - e cos E)``) or with finite differences.
"""

import numpy as np

E_KEPLER = 0.6


def kepler(M, e):
    """Eccentric anomalies: E - e sin E = M, Newton's step as the state."""
    E = M + e * np.sin(M)
    step = np.ones(M.shape)
    while np.max(np.abs(step)) > 1e-13:
        step = (E - e * np.sin(E) - M) / (1.0 - e * np.cos(E))
        E = E - step
    return E


def kepler_energy(M):
    """A scalar of the anomalies (gradient, hessian, hvp)."""
    E = kepler(M, E_KEPLER)
    return np.sum(E**2) + np.sum(np.sin(E))


def kepler_me(x):
    """Mean anomalies and the eccentricity differentiated together (x = [M, e])."""
    M, e = x[:-1], x[-1]
    E = kepler(M, e)
    return np.sum(E * np.cos(E)) + e * np.sum(E)


def newton_sqrt(a):
    """sqrt(a) by Newton on the residual x*x - a: the exit test is that residual."""
    x = a + 1.0
    while abs(x * x - a) > 1e-14 * a:
        x = x - (x * x - a) / (2.0 * x)
    return x


def kepler_capped(M):
    """Two Newton steps at most: stops before converging (max iterations)."""
    E = M + E_KEPLER * np.sin(M)
    step = np.ones(M.shape)
    i = 0.0
    while np.max(np.abs(step)) > 1e-13 and i < 2.0:
        step = (E - E_KEPLER * np.sin(E) - M) / (1.0 - E_KEPLER * np.cos(E))
        E = E - step
        i = i + 1.0
    return E


def tanh_fixed_point(b, W):
    """x = tanh(W x + b), a contraction (|W| < 1): a vector fixed point whose exit
    test is the norm of the change."""
    x = np.zeros(b.shape)
    change = np.ones(b.shape)
    while np.linalg.norm(change) > 1e-14:
        new = np.tanh(W @ x + b)
        change = new - x
        x = new
    return x


def tanh_fixed_point_energy(b, W):
    x = tanh_fixed_point(b, W)
    return np.sum(x**2) + np.sum(x * b)


def counter_loop(x):
    """A loop on a traced condition that is not a tolerance on a residual."""
    y = x * 1.0
    while np.sum(y) < 10.0:
        y = y * 2.0
    return y


def two_loops(x):
    """One converged loop and one that is not a tolerance test ("auto")."""
    y = x * 1.0
    while np.sum(y) < 10.0:
        y = y * 2.0
    return kepler(y, E_KEPLER)


def big_fixed_point(b):
    """70 unknowns coupled by a matrix: more than the dense solve takes."""
    W = 0.1 * np.ones((70, 70)) / 70.0
    x = np.zeros(b.shape)
    change = np.ones(b.shape)
    while np.max(np.abs(change)) > 1e-12:
        new = np.tanh(W @ x + b)
        change = new - x
        x = new
    return x


def kepler_brentq(M):
    """Kepler's equation by scipy.optimize.brentq on [M - 1, M + 1]."""
    from scipy.optimize import brentq

    return brentq(
        lambda E, m: E - E_KEPLER * np.sin(E) - m, M - 1.0, M + 1.0, args=(M,)
    )


def kepler_newton(M):
    """By scipy.optimize.newton with the derivative."""
    import scipy.optimize

    return scipy.optimize.newton(
        lambda E: E - E_KEPLER * np.sin(E) - M,
        M,
        fprime=lambda E: 1.0 - E_KEPLER * np.cos(E),
        tol=1e-14,
    )


def kepler_secant(M):
    """By scipy.optimize.newton without a derivative: the secant method."""
    import scipy.optimize

    return scipy.optimize.newton(lambda E: E - E_KEPLER * np.sin(E) - M, M, tol=1e-14)


def tanh_scipy_fixed_point(b):
    """x = tanh(0.5 x + b) elementwise, by scipy.optimize.fixed_point (del2)."""
    from scipy.optimize import fixed_point

    return fixed_point(lambda x: np.tanh(0.5 * x + b), np.zeros(b.shape), xtol=1e-14)


def brentq_full_output(M):
    from scipy.optimize import brentq

    return brentq(
        lambda E: E - E_KEPLER * np.sin(E) - M, M - 1.0, M + 1.0, full_output=True
    )


def dottie_all(b):
    """cos(x) - x = b elementwise by Newton, until np.all(|r| < tol)."""
    x = b * 0.0
    while not np.all(np.abs(np.cos(x) - x - b) < 1e-14):
        x = x - (np.cos(x) - x - b) / (-np.sin(x) - 1.0)
    return x


def dottie_any(b):
    """The same until no np.any(|r| > tol)."""
    x = b * 0.0
    while np.any(np.abs(np.cos(x) - x - b) > 1e-14):
        x = x - (np.cos(x) - x - b) / (-np.sin(x) - 1.0)
    return x


def half_cos_error_state(b):
    """x = cos(x) / 2 + b, the change's norm kept in a variable of the loop."""
    x = b * 0.0
    err = 1.0
    while err > 1e-15:
        new = 0.5 * np.cos(x) + b
        err = np.linalg.norm(new - x)
        x = new
    return x


def secant_exact_start(M):
    """The secant method started at an exact root (M = 0 solves E - e sin E = 0)."""
    import scipy.optimize

    return scipy.optimize.newton(lambda E: E - E_KEPLER * np.sin(E) - M, M * 0.0)
