"""The benchmark problems: plain NumPy functions and hand-written derivatives.

Written the way users write NumPy (``np.`` calls, no difgen), because difgen traces
exactly this file (see ``difgen.toml``) and the peers rebind its ``np`` global to
``jax.numpy``, ``autograd.numpy`` or a small torch shim: so each problem function is
self-contained and calls no helper of its own.

Each ``*_<operator>`` function is the derivative a careful human writes by hand for
that exact function: the correctness reference and the "limit" every tool is timed
against. ``make_*`` functions return fixed seeded data.
"""

import numpy as np

# --- the seed ---------------------------------------------------------------------


def seed(x):
    A = np.array([[x + 1, x + 2, x + 3], [x + 4, x + 5, x + 6], [x + 7, x + 8, x + 9]])
    B = np.array([[x - 1, x - 2, x - 3], [x - 4, x - 5, x - 6], [x - 7, x - 8, x - 9]])
    return np.sum(A.T @ (B * 1.5))


def seed_derivative(x):
    # A float literal: with ``81 * x`` every call converts the int, which makes the
    # reference slower and the ratios against it flatter difgen.
    return 81.0 * x


# --- Rosenbrock -------------------------------------------------------------------


def rosenbrock(x):
    return np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def rosenbrock_gradient(x):
    head, tail = x[:-1], x[1:]
    t = 200 * (tail - head**2)
    g = np.zeros_like(x)
    g[:-1] = -2 * head * t - 2 * (1 - head)
    g[1:] += t
    return g


def rosenbrock2_gradient(x):
    """Straight-line n = 2: unpack to floats, float arithmetic, one np.array."""
    x0, x1 = x.tolist()
    t = 200.0 * (x1 - x0 * x0)
    return np.array([-2.0 * x0 * t - 2.0 * (1.0 - x0), t])


def _rosenbrock_hessian_bands(x):
    diag = np.zeros_like(x)
    diag[:-1] = 1200 * x[:-1] ** 2 - 400 * x[1:] + 2
    diag[1:] += 200
    return diag, -400 * x[:-1]


def rosenbrock_hessian(x):
    n = x.size
    diag, off = _rosenbrock_hessian_bands(x)
    H = np.zeros((n, n))
    H.flat[:: n + 1] = diag
    H.flat[1 :: n + 1] = off
    H.flat[n :: n + 1] = off
    return H


def rosenbrock_hvp(x, v):
    diag, off = _rosenbrock_hessian_bands(x)
    out = diag * v
    out[:-1] += off * v[1:]
    out[1:] += off * v[:-1]
    return out


def make_rosenbrock(n):
    rng = np.random.default_rng(0)
    return rng.uniform(-1.5, 1.5, n), rng.standard_normal(n)


# --- logistic regression ------------------------------------------------------------


def logistic_nll(w, X, y):
    z = X @ w
    return np.sum(np.log1p(np.exp(z)) - y * z)


def logistic_nll_gradient(w, X, y):
    return X.T @ (1 / (1 + np.exp(-(X @ w))) - y)


def make_logistic(n_samples=1000, n_features=20):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_samples, n_features))
    w_true = rng.standard_normal(n_features) * 0.3
    y = (rng.uniform(size=n_samples) < 1 / (1 + np.exp(-(X @ w_true)))).astype(float)
    w = rng.standard_normal(n_features) * 0.3
    return w, X, y


# --- two-layer tanh MLP, parameters flattened into one vector -----------------------

N_IN, N_HIDDEN, BATCH = 14, 64, 64
N_PARAMS = N_IN * N_HIDDEN + N_HIDDEN + N_HIDDEN + 1  # 1025


def mlp_loss(p, X, t):
    W1 = p[: N_IN * N_HIDDEN].reshape(N_IN, N_HIDDEN)
    b1 = p[N_IN * N_HIDDEN : N_IN * N_HIDDEN + N_HIDDEN]
    W2 = p[N_IN * N_HIDDEN + N_HIDDEN : N_PARAMS - 1]
    b2 = p[N_PARAMS - 1]
    h = np.tanh(X @ W1 + b1)
    r = h @ W2 + b2 - t
    return np.mean(r * r)


def mlp_loss_gradient(p, X, t):
    k = N_IN * N_HIDDEN
    W1 = p[:k].reshape(N_IN, N_HIDDEN)
    W2 = p[k + N_HIDDEN : N_PARAMS - 1]
    h = np.tanh(X @ W1 + p[k : k + N_HIDDEN])
    dr = (2.0 / t.size) * (h @ W2 + p[N_PARAMS - 1] - t)
    dz = np.outer(dr, W2) * (1 - h * h)
    g = np.empty(N_PARAMS)
    g[:k] = (X.T @ dz).ravel()
    g[k : k + N_HIDDEN] = dz.sum(axis=0)
    g[k + N_HIDDEN : N_PARAMS - 1] = h.T @ dr
    g[N_PARAMS - 1] = dr.sum()
    return g


def make_mlp():
    rng = np.random.default_rng(0)
    p = rng.standard_normal(N_PARAMS) * 0.3
    X = rng.standard_normal((BATCH, N_IN))
    t = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(BATCH)
    return p, X, t


# --- the same MLP written the natural way: a dict of four float32 arrays -----------


def mlp_params_loss(params, X, t):
    """The loss above on its parameters as a dict, float32 data and parameters."""
    h = np.tanh(X @ params["W1"] + params["b1"])
    r = h @ params["W2"] + params["b2"] - t
    return np.mean(r * r)


def mlp_params_loss_gradient(params, X, t):
    """Hand-written gradient of :func:`mlp_params_loss`, a dict, in float32."""
    h = np.tanh(X @ params["W1"] + params["b1"])
    dr = (np.float32(2.0) / t.size) * (h @ params["W2"] + params["b2"] - t)
    dz = np.outer(dr, params["W2"]) * (1 - h * h)
    return {"W1": X.T @ dz, "b1": dz.sum(axis=0), "W2": h.T @ dr, "b2": dr.sum()}


def make_mlp_params():
    """:func:`make_mlp`'s point as a dict of float32 arrays, float32 data."""
    p, X, t = (np.asarray(a, dtype=np.float32) for a in make_mlp())
    k = N_IN * N_HIDDEN
    params = {
        "W1": p[:k].reshape(N_IN, N_HIDDEN).copy(),
        "b1": p[k : k + N_HIDDEN].copy(),
        "W2": p[k + N_HIDDEN : N_PARAMS - 1].copy(),
        "b2": p[N_PARAMS - 1],
    }
    return params, X, t


def logistic_example(w, x, y):
    """One example's logistic loss: per-example gradients (benchmarks.points)."""
    z = x @ w
    return np.log1p(np.exp(z)) - y * z


def mlp_example(p, x, t):
    """One example's squared error of the MLP above (benchmarks.points)."""
    W1 = p[: N_IN * N_HIDDEN].reshape(N_IN, N_HIDDEN)
    b1 = p[N_IN * N_HIDDEN : N_IN * N_HIDDEN + N_HIDDEN]
    W2 = p[N_IN * N_HIDDEN + N_HIDDEN : N_PARAMS - 1]
    b2 = p[N_PARAMS - 1]
    r = np.tanh(x @ W1 + b1) @ W2 + b2 - t
    return r * r


# --- Lorenz -----------------------------------------------------------------------


def lorenz(u, params):
    sigma, rho, beta = params
    return np.array(
        [sigma * (u[1] - u[0]), u[0] * (rho - u[2]) - u[1], u[0] * u[1] - beta * u[2]]
    )


def lorenz_jacobian(u, params):
    """The fastest by hand: unpack floats, build one np.array."""
    x, y, z = u.tolist()
    sigma, rho, beta = params.tolist()
    return np.array([[-sigma, sigma, 0.0], [rho - z, -1.0, -x], [y, x, -beta]])


def make_lorenz():
    return np.array([1.2, -0.7, 24.0]), np.array([10.0, 28.0, 8.0 / 3.0])


# --- Brusselator 2D, periodic, on a 16 x 16 grid ----------------------------------

GRID = 16


def brusselator(s):
    u = s[: GRID * GRID].reshape(GRID, GRID)
    v = s[GRID * GRID :].reshape(GRID, GRID)
    lap_u = (
        np.roll(u, 1, 0) + np.roll(u, -1, 0) + np.roll(u, 1, 1) + np.roll(u, -1, 1)
    ) - 4 * u
    lap_v = (
        np.roll(v, 1, 0) + np.roll(v, -1, 0) + np.roll(v, 1, 1) + np.roll(v, -1, 1)
    ) - 4 * v
    uuv = u * u * v
    du = 10.0 * lap_u + 1.0 + uuv - 4.4 * u
    dv = 10.0 * lap_v + 3.4 * u - uuv
    return np.concatenate([du.ravel(), dv.ravel()])


def make_brusselator_jacobian(dense=False):
    """The hand-written jacobian: pattern and layout fixed once, sparse CSR or dense.

    Each call fills the four state-dependent diagonals into a copy of the constant
    data (the 10.0 coupling to the four neighbours) and wraps it as a CSR array, or
    scatters it into a dense (512, 512) array.
    """
    m = GRID * GRID
    k = np.arange(m)
    i, j = np.divmod(k, GRID)
    neighbours = [
        ((i + di) % GRID) * GRID + (j + dj) % GRID
        for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1))
    ]
    # (rows, cols, kind): kind 0 = constant 10.0, 1..4 = the diagonals below
    blocks = [(k, k, 1), (k, k + m, 2), (k + m, k, 3), (k + m, k + m, 4)]
    blocks += [(k, nb, 0) for nb in neighbours]
    blocks += [(k + m, nb + m, 0) for nb in neighbours]
    rows = np.concatenate([b[0] for b in blocks])
    cols = np.concatenate([b[1] for b in blocks])
    kind = np.concatenate([np.full(m, b[2]) for b in blocks])
    order = np.lexsort((cols, rows))
    rows, indices, kind = rows[order], cols[order], kind[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=2 * m))])
    base = np.where(kind == 0, 10.0, 0.0)
    at = [np.flatnonzero(kind == c) for c in (1, 2, 3, 4)]  # row order = k order
    flat = rows * (2 * m) + indices

    def values(s):
        u, v = s[:m], s[m:]
        uv2, uu = 2 * u * v, u * u
        data = base.copy()
        data[at[0]] = uv2 - 44.4
        data[at[1]] = uu
        data[at[2]] = 3.4 - uv2
        data[at[3]] = -40.0 - uu
        return data

    if dense:

        def brusselator_jacobian_dense(s):
            J = np.zeros((2 * m, 2 * m))
            J.flat[flat] = values(s)
            return J

        return brusselator_jacobian_dense

    from scipy import sparse

    def brusselator_jacobian(s):
        return sparse.csr_array((values(s), indices, indptr), shape=(2 * m, 2 * m))

    return brusselator_jacobian


def make_brusselator():
    rng = np.random.default_rng(0)
    return rng.uniform(0.5, 2.0, 2 * GRID * GRID)


# --- logsumexp --------------------------------------------------------------------


def logsumexp(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def logsumexp_gradient(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def make_logsumexp(n=1000):
    return np.random.default_rng(0).standard_normal(n) * 3


# --- Newton's iteration: a loop on a traced condition ------------------------------

KEPLER_E = 0.6


def kepler_newton(M):
    # sum of squares of the eccentric anomalies E solving E - e sin E = M, by
    # Newton's iteration to a tolerance (a trip count that depends on M)
    E = M + KEPLER_E * np.sin(M)
    step = np.ones(M.shape)
    while np.max(np.abs(step)) > 1e-12:
        step = (E - KEPLER_E * np.sin(E) - M) / (1.0 - KEPLER_E * np.cos(E))
        E = E - step
    return np.sum(E**2)


def kepler_newton_gradient(M):
    # the same solve, then the implicit-function derivative dE/dM = 1 / (1 - e cos E)
    E = M + KEPLER_E * np.sin(M)
    step = np.ones(M.shape)
    while np.max(np.abs(step)) > 1e-12:
        step = (E - KEPLER_E * np.sin(E) - M) / (1.0 - KEPLER_E * np.cos(E))
        E = E - step
    return 2.0 * E / (1.0 - KEPLER_E * np.cos(E))


def make_kepler(n=1000):
    return np.random.default_rng(0).uniform(0.0, 2 * np.pi, n)
