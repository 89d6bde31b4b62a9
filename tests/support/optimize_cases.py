"""Calls of ``scipy.optimize``'s root finders in traced functions (issue 22,
item 6), for tests/frontend/test_scipy_optimize.py: each is also a plain SciPy
call at run time, whose converged solution (and its finite differences) is the
oracle."""

import numpy as np
import scipy.optimize
from scipy.optimize import bisect, root, root_scalar

E = 0.6
W = 0.5 * np.array([[0.3, -0.6, 0.2], [0.5, 0.1, -0.4], [-0.2, 0.4, 0.3]])


def kepler_residual(En, M):
    return En - E * np.sin(En) - M


def kepler_slope(En, M):
    return 1.0 - E * np.cos(En)


def kepler_bisect(M):
    """Kepler's equation by bisection on [M - 1, M + 1], M through args=."""
    return bisect(kepler_residual, M - 1.0, M + 1.0, args=(M,))


def kepler_root_scalar_bracket(M):
    """root_scalar with a bracket: SciPy's choice is brentq."""
    return root_scalar(kepler_residual, args=(M,), bracket=[M - 1.0, M + 1.0]).root


def kepler_root_scalar_bisect(M):
    return root_scalar(
        kepler_residual, args=(M,), bracket=(M - 1.0, M + 1.0), method="bisect"
    ).root


def kepler_root_scalar_newton(M):
    """With x0 and fprime: Newton."""
    sol = root_scalar(kepler_residual, args=(M,), x0=M, fprime=kepler_slope)
    return sol.root


def kepler_root_scalar_secant(M):
    sol = root_scalar(
        lambda En: En - E * np.sin(En) - M, x0=M, x1=M + 0.1, method="secant"
    )
    return sol.root


def kepler_root(M):
    """scipy.optimize.root on a scalar: the result's x."""
    return root(lambda En: En - E * np.sin(En) - M, M).x


def kepler_energy_bisect(M):
    """A scalar of the roots, for the gradient, hvp and hessian."""
    En = np.array([bisect(kepler_residual, m - 1.0, m + 1.0, args=(m,)) for m in M])
    return np.sum(En**2 + np.cos(En))


def tanh_system(x, b):
    return x - np.tanh(W @ x) - b


def tanh_jacobian(x, b):
    return np.eye(3) - (1.0 - np.tanh(W @ x) ** 2)[:, None] * W


def root_vector(b):
    """x = tanh(W x) + b, a coupled system, b through args=."""
    return root(tanh_system, np.zeros(3), args=(b,), tol=1e-13).x


def root_vector_jac(b):
    """The same with the jacobian given."""
    return root(tanh_system, np.zeros(3), args=(b,), jac=tanh_jacobian, tol=1e-13).x


def root_vector_jac_true(b):
    """fun returns (f, J): jac=True."""
    sol = root(
        lambda x: (tanh_system(x, b), tanh_jacobian(x, b)),
        np.zeros(3),
        jac=True,
        tol=1e-13,
    )
    return sol["x"]


def root_vector_energy(b):
    x = root(tanh_system, np.zeros(3), args=(b,), tol=1e-13).x
    return np.sum(x**2) + x[0] * x[2]


def root_closure(p):
    """Parameters read by closure: x^3 + p0 x - p1 = 0 and a second unknown."""

    def fun(x):
        return np.array([x[0] ** 3 + p[0] * x[0] - p[1], x[1] - p[2] * x[0]])

    return root(fun, np.array([1.0, 0.0]), tol=1e-13).x


def newton_capped(M):
    """Three Newton steps cannot reach tol = 1e-15 from far away: SciPy raises."""
    return scipy.optimize.newton(
        kepler_residual, M + 3.0, fprime=kepler_slope, args=(M,), tol=1e-15, maxiter=3
    )


def newton_capped_quiet(M):
    """The same with disp=False: SciPy returns the last iterate."""
    return scipy.optimize.newton(
        kepler_residual,
        M + 3.0,
        fprime=kepler_slope,
        args=(M,),
        tol=1e-15,
        maxiter=3,
        disp=False,
    )


def bisect_capped(M):
    return bisect(kepler_residual, M - 1.0, M + 1.0, args=(M,), maxiter=5)


def brentq_capped(M):
    return scipy.optimize.brentq(
        kepler_residual, M - 1.0, M + 1.0, args=(M,), maxiter=2
    )


def root_capped(b):
    """root cannot converge: x^2 + 1 = b has no real root for b < 1."""
    return root(lambda x: x * x + 1.0 - b, np.array([0.5, 2.0])).x


def root_other_method(b):
    return root(tanh_system, np.zeros(3), args=(b,), method="lm").x


def root_scalar_halley(M):
    return root_scalar(
        kepler_residual,
        args=(M,),
        x0=M,
        fprime=kepler_slope,
        fprime2=lambda En, M: E * np.sin(En),
    ).root


def root_not_square(b):
    return root(lambda x: np.array([x[0] - b[0], x[1] - b[1], x[0] * x[1]]), b).x
