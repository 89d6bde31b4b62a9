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


def logistic_nll(w, X, t):
    """Negative log-likelihood of logistic regression: weights w, data X, labels t."""
    z = X @ w
    # log(1 + exp(-s z)) for labels s = 2 t - 1, without overflow for large |z|
    s = 2.0 * t - 1.0
    m = -s * z
    return np.sum(np.maximum(m, 0.0) + np.log1p(np.exp(-np.abs(m))))


MLP_IN, MLP_HIDDEN = 4, 8


def mlp_loss(theta, X, y):
    """Mean squared error of a 2-layer tanh MLP; all parameters in one flat vector."""
    d, h = MLP_IN, MLP_HIDDEN
    W1 = theta[: h * d].reshape(h, d)
    b1 = theta[h * d : h * d + h]
    w2 = theta[h * d + h : h * d + 2 * h]
    b2 = theta[h * d + 2 * h]
    hidden = np.tanh(X @ W1.T + b1)
    residual = hidden @ w2 + b2 - y
    return np.mean(residual**2)


def mlp_params_loss(params, X, y):
    """The same loss written the natural way: a dict of the four parameter arrays
    (W1 (8, 4), b1 (8,), w2 (8,), b2 scalar), differentiated as a dict."""
    hidden = np.tanh(X @ params["W1"].T + params["b1"])
    residual = hidden @ params["w2"] + params["b2"] - y
    return np.mean(residual**2)


BRUSSELATOR_N = 16


def brusselator_2d(u):
    """Right-hand side of the 2-D Brusselator on a periodic 16x16 grid at t = 1.5.

    u has shape (2, N, N): the two species. As in SciML's brusselator_2d_loop, with
    A = 3.4, B = 1, alpha = 10 and the forcing disc switched on (t >= 1.1).
    """
    n = BRUSSELATOR_N
    A, B, alpha = 3.4, 1.0, 10.0
    step = 1.0 / (n - 1)
    xy = np.linspace(0.0, 1.0, n)
    forcing = 5.0 * (((xy[:, None] - 0.3) ** 2 + (xy[None, :] - 0.6) ** 2) <= 0.01)
    a, b = u[0], u[1]

    def laplacian(v):
        rolled = np.roll(v, 1, 0) + np.roll(v, -1, 0) + np.roll(v, 1, 1)
        return (rolled + np.roll(v, -1, 1) - 4.0 * v) * (alpha / step**2)

    da = laplacian(a) + B + a**2 * b - (A + 1.0) * a + forcing
    db = laplacian(b) + A * a - a**2 * b
    return np.stack([da, db])


def kepler(M, e):
    """Eccentric anomalies E of the mean anomalies M: E - e sin(E) = M.

    Kepler's equation has no closed form: Newton's iteration runs until the step is
    below a tolerance, a loop whose trip count depends on M and e. difgen emits the
    loop as a Python while, and its jacobian (diagonal: dE/dM = 1 / (1 - e cos E))
    as the derivative of the iterations taken.
    """
    E = M + e * np.sin(M)
    step = np.ones(M.shape)
    while np.max(np.abs(step)) > 1e-13:
        step = (E - e * np.sin(E) - M) / (1.0 - e * np.cos(E))
        E = E - step
    return E
