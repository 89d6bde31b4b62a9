"""Fixed-length loops: time steppers, fixed-iteration solvers, recurrences and
cumulative loops with item assignment, as simulation and fitting code writes them.
"""

import numpy as np


def euler_oscillator(x0):
    pos, vel = x0[0], x0[1]
    dt = 0.05
    state = np.array([pos, vel])
    for _ in range(10):
        acc = -4 * state[0] - 0.3 * state[1] + 0.5 * np.sin(state[0])
        state = np.array([state[0] + dt * state[1], state[1] + dt * acc])
    return state


def rk4_lorenz(x0):
    def rhs(s):
        return np.array(
            [
                10.0 * (s[1] - s[0]),
                s[0] * (28.0 - s[2]) - s[1],
                s[0] * s[1] - 8.0 / 3.0 * s[2],
            ]
        )

    h = 0.01
    s = x0
    for _ in range(4):
        k1 = rhs(s)
        k2 = rhs(s + h / 2 * k1)
        k3 = rhs(s + h / 2 * k2)
        k4 = rhs(s + h * k3)
        s = s + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return s


def leapfrog(q0, p0):
    q = q0.copy()
    p = p0.copy()
    dt = 0.1
    for _ in range(5):
        p = p - 0.5 * dt * np.sin(q)
        q = q + dt * p
        p = p - 0.5 * dt * np.sin(q)
    return 0.5 * np.sum(p**2) - np.sum(np.cos(q))


def newton_sqrt(a):
    x = np.ones_like(a)
    for _ in range(6):
        x = 0.5 * (x + a / x)
    return x


def newton_kepler(M, e):
    E = M.copy()
    for _ in range(5):
        E = E - (E - e * np.sin(E) - M) / (1 - e * np.cos(E))
    return E


def cumulative_sum_loop(x):
    out = np.zeros(len(x))
    out[0] = x[0]
    for i in range(1, len(x)):
        out[i] = out[i - 1] + x[i] ** 2
    return out


def discounted_return(rewards):
    gamma = 0.9
    G = np.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        G[t] = running
    return G


def horner(coeffs, t):
    acc = 0.0
    for c in coeffs:
        acc = acc * t + c
    return np.sum(acc**2)


def fixed_point_cos(x):
    y = x
    for _ in range(8):
        y = np.cos(y)
    return y


def unrolled_gradient_descent(w0, A, b):
    w = w0
    for _ in range(5):
        w = w - 0.1 * (A @ w - b)
    return 0.5 * w @ A @ w - b @ w


def rnn(h0, W, inputs):
    h = h0
    for t in range(inputs.shape[0]):
        h = np.tanh(W @ h + inputs[t])
    return np.sum(h**2)


def logistic_map(r):
    x = 0.3 * np.ones_like(r)
    for _ in range(6):
        x = r * x * (1 - x)
    return x


def explicit_heat(u0):
    u = u0.copy()
    for _ in range(5):
        u = u + 0.2 * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
    return u


def running_max_drawdown(prices):
    peak = np.maximum.accumulate(prices)
    return np.sum((peak - prices) ** 2)


def exponential_smoothing(x):
    s = np.empty_like(x)
    s[0] = x[0]
    for t in range(1, x.size):
        s[t] = 0.3 * x[t] + 0.7 * s[t - 1]
    return np.sum((s - x) ** 2)


CASES = {
    "euler_oscillator": {"x": (2,)},
    "rk4_lorenz": {"x": (3,)},
    "leapfrog": {"x": (3,), "ctx": [("p0", (3,))]},
    "newton_sqrt": {"x": (3,), "xlim": (0.5, 3.0)},
    "newton_kepler": {
        "x": (3,),
        "ctx": [("e", ())],
        "xlim": (0.2, 2.5),
        "ctxlim": (0.1, 0.5),
    },
    "cumulative_sum_loop": {"x": (5,)},
    "discounted_return": {"x": (5,)},
    "horner": {"x": (4,), "ctx": [("t", (3,))]},
    "fixed_point_cos": {"x": (3,)},
    "unrolled_gradient_descent": {
        "x": (3,),
        "ctx": [("A", (3, 3), "float64", "spd3"), ("b", (3,))],
    },
    "rnn": {"x": (3,), "ctx": [("W", (3, 3)), ("inputs", (4, 3))]},
    "logistic_map": {"x": (3,), "xlim": (2.5, 3.5)},
    "explicit_heat": {"x": (6,)},
    "running_max_drawdown": {"x": (6,)},
    "exponential_smoothing": {"x": (5,)},
}
