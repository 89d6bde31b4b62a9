"""Classical optimization test problems, written the way benchmark suites write them.

Each function takes a 1-D design vector ``x`` and returns a float. ``CASES`` says
how the corpus harness calls each one (input shape, contexts, sampling domain).
"""

import numpy as np


def rosenbrock(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosenbrock_loop(x):
    total = 0.0
    for i in range(len(x) - 1):
        total += 100.0 * (x[i + 1] - x[i] * x[i]) ** 2 + (1 - x[i]) ** 2
    return total


def rosenbrock_pairs(x):
    odd, even = x[::2], x[1::2]
    return np.sum(100.0 * (even - odd**2) ** 2 + (1.0 - odd) ** 2)


def beale(x):
    a, b = x
    return (
        (1.5 - a + a * b) ** 2
        + (2.25 - a + a * b**2) ** 2
        + (2.625 - a + a * b**3) ** 2
    )


def booth(x):
    return (x[0] + 2 * x[1] - 7) ** 2 + (2 * x[0] + x[1] - 5) ** 2


def himmelblau(x):
    x0, x1 = x[0], x[1]
    return (x0**2 + x1 - 11) ** 2 + (x0 + x1**2 - 7) ** 2


def rastrigin(x, A=10.0):
    n = x.size
    return A * n + np.sum(x**2 - A * np.cos(2 * np.pi * x))


def ackley(x):
    n = x.shape[0]
    s1 = np.sum(x**2) / n
    s2 = np.sum(np.cos(2.0 * np.pi * x)) / n
    return -20.0 * np.exp(-0.2 * np.sqrt(s1)) - np.exp(s2) + 20.0 + np.e


def styblinski_tang(x):
    return 0.5 * np.sum(x**4 - 16 * x**2 + 5 * x)


def griewank(x):
    i = np.arange(1, len(x) + 1)
    return 1 + np.sum(x**2) / 4000.0 - np.prod(np.cos(x / np.sqrt(i)))


def powell(x):
    x = x.reshape(-1, 4)
    a, b, c, d = x[:, 0], x[:, 1], x[:, 2], x[:, 3]
    return np.sum(
        (a + 10 * b) ** 2 + 5 * (c - d) ** 2 + (b - 2 * c) ** 4 + 10 * (a - d) ** 4
    )


def trid(x):
    return np.sum((x - 1) ** 2) - np.sum(x[1:] * x[:-1])


def dixon_price(x):
    i = np.arange(2, x.size + 1)
    return (x[0] - 1) ** 2 + np.sum(i * (2 * x[1:] ** 2 - x[:-1]) ** 2)


def zakharov(x):
    i = np.arange(1, x.size + 1)
    s = np.sum(0.5 * i * x)
    return np.sum(x**2) + s**2 + s**4


def levy(x):
    w = 1 + (x - 1) / 4
    head = np.sin(np.pi * w[0]) ** 2
    mid = np.sum((w[:-1] - 1) ** 2 * (1 + 10 * np.sin(np.pi * w[:-1] + 1) ** 2))
    tail = (w[-1] - 1) ** 2 * (1 + np.sin(2 * np.pi * w[-1]) ** 2)
    return head + mid + tail


def sum_of_different_powers(x):
    total = 0
    for i, xi in enumerate(x):
        total = total + abs(xi) ** (i + 2)
    return total


def matyas(x):
    return 0.26 * (x[0] ** 2 + x[1] ** 2) - 0.48 * x[0] * x[1]


def three_hump_camel(x):
    a, b = x[0], x[1]
    return 2 * a**2 - 1.05 * a**4 + a**6 / 6 + a * b + b**2


def michalewicz(x, m=10):
    i = np.arange(1, len(x) + 1)
    return -np.sum(np.sin(x) * np.sin(i * x**2 / np.pi) ** (2 * m))


def schwefel(x):
    return 418.9829 * len(x) - np.sum(x * np.sin(np.sqrt(np.abs(x))))


def goldstein_price(x):
    a, b = x
    t1 = 1 + (a + b + 1) ** 2 * (19 - 14 * a + 3 * a**2 - 14 * b + 6 * a * b + 3 * b**2)
    t2 = 30 + (2 * a - 3 * b) ** 2 * (
        18 - 32 * a + 12 * a**2 + 48 * b - 36 * a * b + 27 * b**2
    )
    return t1 * t2


def weighted_sphere(x, w):
    return np.dot(w, x**2)


CASES = {
    "rosenbrock": {"x": (5,)},
    "rosenbrock_loop": {"x": (5,)},
    "rosenbrock_pairs": {"x": (6,)},
    "beale": {"x": (2,)},
    "booth": {"x": (2,)},
    "himmelblau": {"x": (2,)},
    "rastrigin": {"x": (4,)},
    "ackley": {"x": (3,)},
    "styblinski_tang": {"x": (4,)},
    "griewank": {"x": (4,)},
    "powell": {"x": (8,)},
    "trid": {"x": (5,)},
    "dixon_price": {"x": (4,)},
    "zakharov": {"x": (4,)},
    "levy": {"x": (4,)},
    "sum_of_different_powers": {"x": (4,)},
    "matyas": {"x": (2,)},
    "three_hump_camel": {"x": (2,)},
    "michalewicz": {"x": (3,), "xlim": (0.5, 2.5)},
    "schwefel": {"x": (3,), "xlim": (0.5, 4.0)},
    "goldstein_price": {"x": (2,)},
    "weighted_sphere": {"x": (5,), "ctx": [("w", (5,))]},
}
