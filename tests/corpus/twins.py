"""Hand-written autograd twins of the corpus functions autograd cannot run as written.

The oracle runs each corpus function's own source with ``np`` re-bound to
``autograd.numpy``. Autograd's arrays cannot be assigned into (``out[i] = ...``), lack
a few methods (``.copy()``, ``.dot()``) and a few derivatives (``np.convolve``,
``np.linalg.norm(x, 1)``, ``np.linalg.matrix_power``, ``np.maximum.accumulate``), so
those functions get a twin here: the same mathematics written another way, without
any code shared with difgen. The twins are checked against the NumPy originals'
values by the harness before they are trusted.
"""

import autograd.numpy as anp


def brusselator_1d(u, alpha):
    n = u.size // 2
    a, b = u[:n], u[n:]

    def lap(v):
        inner = v[2:] - 2 * v[1:-1] + v[:-2]
        return anp.concatenate(
            [anp.reshape(v[1] - v[0], (1,)), inner, anp.reshape(v[-2] - v[-1], (1,))]
        )

    da = 1.0 + a * a * b - 4.0 * a + alpha * lap(a)
    db = 3.0 * a - a * a * b + alpha * lap(b)
    return anp.concatenate([da, db])


def pendulum_chain(state, k):
    n = state.shape[0] // 2
    theta, omega = state[:n], state[n:]
    left = anp.concatenate([anp.zeros(1), theta[1:] - theta[:-1]])
    right = anp.concatenate([theta[:-1] - theta[1:], anp.zeros(1)])
    return anp.concatenate([omega, -9.81 * anp.sin(theta) - k * left - k * right])


def heat_equation(u, kappa):
    dx = 1.0 / (u.size + 1)
    padded = anp.concatenate([anp.zeros(1), u, anp.zeros(1)])
    return kappa * (padded[2:] - 2 * padded[1:-1] + padded[:-2]) / dx**2


def mlp_relu(theta, X, y):
    W1 = anp.reshape(theta[:8], (2, 4))
    h = anp.maximum(anp.dot(X, W1), 0.0)
    return anp.mean((anp.dot(h, theta[8:12]) - y) ** 2)


def multiclass_hinge(W, X, labels):
    scores = anp.dot(X, W)
    onehot = anp.eye(W.shape[1])[labels]
    correct = anp.sum(scores * onehot, axis=1)
    margins = anp.maximum(0, scores - correct[:, None] + 1.0) * (1 - onehot)
    return anp.sum(margins) / X.shape[0]


def clipped_predictions(w, X, y):
    z = anp.dot(X, w)
    return anp.sum((anp.where(z > 1.0, 1.0, z) - y) ** 2)


def poisson_residual_energy(u, rhs):
    inner = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]
    m, n = u.shape
    cols = anp.concatenate(
        [anp.zeros((m - 2, 1)), inner, anp.zeros((m - 2, 1))], axis=1
    )
    lap = anp.concatenate([anp.zeros((1, n)), cols, anp.zeros((1, n))], axis=0)
    return 0.5 * anp.sum((lap - rhs) ** 2)


def burgers_flux_residual(u):
    flux = 0.5 * anp.maximum(u[:-1], 0) ** 2 + 0.5 * anp.minimum(u[1:], 0) ** 2
    return anp.concatenate([anp.zeros(1), flux[:-1] - flux[1:], anp.zeros(1)])


def dirichlet_energy(u):
    m, n = u.shape
    right = anp.concatenate([u[:, 1:], anp.zeros((m, 1))], axis=1)
    down = anp.concatenate([u[1:, :], anp.zeros((1, n))], axis=0)
    return 0.5 * anp.sum((right - u) ** 2 + (down - u) ** 2)


def convolution_blur(u, kernel):
    k = kernel.size
    n = u.size - k + 1
    out = sum(kernel[k - 1 - j] * u[j : j + n] for j in range(k))
    return anp.sum(out**2)


def vector_norms(x):
    return anp.sqrt(anp.sum(x * x)) + anp.sum(anp.abs(x)) + anp.max(anp.abs(x))


def matrix_power_trace(x):
    M = anp.reshape(x, (2, 2))
    return anp.trace(anp.dot(M, anp.dot(M, M)))


def leapfrog(q0, p0):
    q, p = q0, p0
    for _ in range(5):
        p = p - 0.05 * anp.sin(q)
        q = q + 0.1 * p
        p = p - 0.05 * anp.sin(q)
    return 0.5 * anp.sum(p**2) - anp.sum(anp.cos(q))


def newton_kepler(M, e):
    E = M
    for _ in range(5):
        E = E - (E - e * anp.sin(E) - M) / (1 - e * anp.cos(E))
    return E


def cumulative_sum_loop(x):
    return anp.cumsum(anp.concatenate([x[:1], x[1:] ** 2]))


def discounted_return(rewards):
    out = []
    running = 0.0
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = rewards[t] + 0.9 * running
        out.append(running)
    return anp.array(out[::-1])


def explicit_heat(u0):
    u = u0
    for _ in range(5):
        left = anp.concatenate([u[-1:], u[:-1]])
        right = anp.concatenate([u[1:], u[:1]])
        u = u + 0.2 * (left - 2 * u + right)
    return u


def running_max_drawdown(prices):
    peaks = [prices[0]]
    for p in prices[1:]:
        peaks.append(anp.maximum(peaks[-1], p))
    return anp.sum((anp.array(peaks) - prices) ** 2)


def exponential_smoothing(x):
    s = [x[0]]
    for t in range(1, x.shape[0]):
        s.append(0.3 * x[t] + 0.7 * s[-1])
    return anp.sum((anp.array(s) - x) ** 2)


def smallest_eigenvalue(x):
    M = anp.reshape(x, (2, 2))
    S = M + M.T
    return anp.linalg.eigh(S)[0][0]


TWINS = {
    name: fn
    for name, fn in globals().items()
    if callable(fn) and getattr(fn, "__module__", None) == __name__
}
"""Twin by corpus function name (every function of this module is one)."""
