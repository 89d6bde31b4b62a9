"""Right-hand sides of ODE systems, as one would pass them to an integrator.

The state is ``x``; parameters come as contexts where an integrator would pass them
through ``args=``. Each returns dx/dt with the shape of the state.
"""

import numpy as np


def lorenz(x, params):
    sigma, rho, beta = params
    return np.array(
        [sigma * (x[1] - x[0]), x[0] * (rho - x[2]) - x[1], x[0] * x[1] - beta * x[2]]
    )


def van_der_pol(x, mu):
    y, v = x
    return np.array([v, mu * (1 - y**2) * v - y])


def robertson(y):
    k1, k2, k3 = 0.04, 3e7, 1e4
    y1, y2, y3 = y
    r1 = k1 * y1
    r2 = k2 * y2 * y2
    r3 = k3 * y2 * y3
    return np.array([-r1 + r3, r1 - r2 - r3, r2])


def brusselator_1d(u, alpha):
    n = u.size // 2
    a, b = u[:n], u[n:]
    A, B = 1.0, 3.0
    lap_a = np.concatenate(
        ([a[1] - a[0]], a[2:] - 2 * a[1:-1] + a[:-2], [a[-2] - a[-1]])
    )
    lap_b = np.concatenate(
        ([b[1] - b[0]], b[2:] - 2 * b[1:-1] + b[:-2], [b[-2] - b[-1]])
    )
    da = A + a * a * b - (B + 1) * a + alpha * lap_a
    db = B * a - a * a * b + alpha * lap_b
    return np.concatenate([da, db])


def pendulum_chain(state, k):
    n = state.shape[0] // 2
    theta, omega = state[:n], state[n:]
    dtheta = omega
    domega = np.zeros(n)
    for i in range(n):
        domega[i] = -9.81 * np.sin(theta[i])
        if i > 0:
            domega[i] -= k * (theta[i] - theta[i - 1])
        if i < n - 1:
            domega[i] -= k * (theta[i] - theta[i + 1])
    return np.concatenate([dtheta, domega])


def sir(y, beta, gamma):
    s, i, r = y
    n = s + i + r
    return np.array([-beta * s * i / n, beta * s * i / n - gamma * i, gamma * i])


def lotka_volterra(z, p):
    prey, pred = z[0], z[1]
    a, b, c, d = p
    return np.stack([a * prey - b * prey * pred, d * prey * pred - c * pred])


def heat_equation(u, kappa):
    dx = 1.0 / (u.size + 1)
    du = np.zeros_like(u)
    du[1:-1] = kappa * (u[2:] - 2 * u[1:-1] + u[:-2]) / dx**2
    du[0] = kappa * (u[1] - 2 * u[0]) / dx**2
    du[-1] = kappa * (u[-2] - 2 * u[-1]) / dx**2
    return du


def fitzhugh_nagumo(x, current):
    v, w = x[0], x[1]
    dv = v - v**3 / 3 - w + current
    dw = 0.08 * (v + 0.7 - 0.8 * w)
    return np.array([dv, dw])


def rossler(x):
    a, b, c = 0.2, 0.2, 5.7
    return np.array([-x[1] - x[2], x[0] + a * x[1], b + x[2] * (x[0] - c)])


def kepler(state):
    q, p = state[:2], state[2:]
    r = np.linalg.norm(q)
    return np.concatenate([p, -q / r**3])


def mass_action(c, S, k):
    rates = k * np.array([c[0] * c[1], c[2], c[1] * c[2]])
    return S @ rates


def double_pendulum(y):
    t1, t2, w1, w2 = y
    d = t1 - t2
    den = 2 - np.cos(2 * d)
    a1 = (
        -3 * np.sin(t1)
        - np.sin(t1 - 2 * t2)
        - 2 * np.sin(d) * (w2**2 + w1**2 * np.cos(d))
    ) / den
    a2 = 2 * np.sin(d) * (2 * w1**2 + 2 * np.cos(t1) + w2**2 * np.cos(d)) / den
    return np.array([w1, w2, a1, a2])


CASES = {
    "lorenz": {"x": (3,), "ctx": [("params", (3,), "float64", "lorenz")]},
    "van_der_pol": {"x": (2,), "ctx": [("mu", ())]},
    "robertson": {"x": (3,), "xlim": (0.1, 1.0)},
    "brusselator_1d": {"x": (8,), "ctx": [("alpha", ())], "xlim": (0.5, 2.0)},
    "pendulum_chain": {"x": (6,), "ctx": [("k", ())]},
    "sir": {"x": (3,), "ctx": [("beta", ()), ("gamma", ())], "xlim": (0.2, 1.0)},
    "lotka_volterra": {"x": (2,), "ctx": [("p", (4,))], "xlim": (0.2, 2.0)},
    "heat_equation": {"x": (6,), "ctx": [("kappa", ())]},
    "fitzhugh_nagumo": {"x": (2,), "ctx": [("current", ())]},
    "rossler": {"x": (3,)},
    "kepler": {"x": (4,), "xlim": (0.5, 1.5)},
    "mass_action": {"x": (3,), "ctx": [("S", (3, 3)), ("k", (3,))], "xlim": (0.1, 1.0)},
    "double_pendulum": {"x": (4,)},
}
