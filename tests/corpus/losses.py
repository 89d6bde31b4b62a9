"""Machine-learning losses as training scripts write them.

The parameters are ``x`` (flattened where a model has several arrays); data, targets
and labels are contexts. Labels are integer class indices where the model is a
classifier (``int64`` contexts), or floats cast with ``astype(int)`` as code that
reads them from a float matrix does.
"""

import numpy as np


def logistic_regression(w, X, y):
    z = X @ w
    return np.mean(np.log1p(np.exp(-z)) + (1 - y) * z)


def logistic_regression_stable(w, X, y):
    z = X @ w
    return np.sum(np.logaddexp(0.0, z) - y * z) / len(y)


def softmax_cross_entropy(W, X, labels):
    logits = X @ W
    logits = logits - logits.max(axis=1, keepdims=True)
    logp = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(X.shape[0]), labels])


def softmax_cross_entropy_float_labels(W, X, labels):
    logits = X @ W
    z = logits - np.max(logits, axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    idx = labels.astype(int)
    return -logp[np.arange(len(idx)), idx].mean()


def softmax_cross_entropy_onehot(W, X, Y):
    logits = X @ W
    m = np.max(logits, axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.sum(np.exp(logits - m), axis=1))
    return np.mean(lse - np.sum(Y * logits, axis=1))


def mlp_tanh(theta, X, y):
    W1 = theta[:12].reshape(3, 4)
    b1 = theta[12:16]
    w2 = theta[16:20]
    b2 = theta[20]
    h = np.tanh(X @ W1 + b1)
    pred = h @ w2 + b2
    return 0.5 * np.mean((pred - y) ** 2)


def mlp_relu(theta, X, y):
    W1 = np.reshape(theta[:8], (2, 4))
    W2 = theta[8:12]
    h = np.maximum(X @ W1, 0.0)
    out = h.dot(W2)
    return np.mean((out - y) ** 2)


def huber(w, X, y):
    r = X @ w - y
    delta = 1.0
    quad = 0.5 * r**2
    lin = delta * (np.abs(r) - 0.5 * delta)
    return np.sum(np.where(np.abs(r) <= delta, quad, lin))


def hinge(w, X, y):
    margins = y * (X @ w)
    return np.mean(np.maximum(0.0, 1.0 - margins)) + 0.01 * np.sum(w**2)


def squared_hinge(w, X, y):
    return np.sum(np.clip(1 - y * X.dot(w), 0, None) ** 2)


def log_cosh(w, X, y):
    return np.sum(np.log(np.cosh(X @ w - y)))


def ridge(w, X, y, lam):
    r = y - X @ w
    return r @ r + lam * w @ w


def smooth_lasso(w, X, y):
    eps = 1e-3
    return 0.5 * np.sum((X @ w - y) ** 2) + 0.1 * np.sum(np.sqrt(w**2 + eps))


def gaussian_nll(params, y):
    mu, log_sigma = params[:3], params[3:]
    sigma2 = np.exp(2 * log_sigma)
    return 0.5 * np.sum(np.log(2 * np.pi * sigma2) + (y - mu) ** 2 / sigma2)


def poisson_nll(w, X, counts):
    eta = X @ w
    return np.sum(np.exp(eta) - counts * eta)


def attention(q, K, V):
    scores = K @ q / np.sqrt(q.shape[0])
    weights = np.exp(scores - scores.max())
    weights = weights / weights.sum()
    return weights @ V


def self_attention(Wq, X):
    Q = X @ Wq
    S = Q @ X.T
    S = S - np.max(S, axis=-1, keepdims=True)
    A = np.exp(S)
    A /= A.sum(axis=-1, keepdims=True)
    return np.sum((A @ X) ** 2)


def pinball(w, X, y):
    tau = 0.3
    r = y - X @ w
    return np.mean(np.where(r >= 0, tau * r, (tau - 1) * r))


def multiclass_hinge(W, X, labels):
    scores = X @ W
    n = X.shape[0]
    correct = scores[np.arange(n), labels]
    margins = np.maximum(0, scores - correct[:, None] + 1.0)
    margins[np.arange(n), labels] = 0
    return np.sum(margins) / n


def masked_mse(w, X, y, observed):
    r = X @ w - y
    return np.mean(r[observed > 0] ** 2)


def clipped_predictions(w, X, y):
    z = X @ w
    z[z > 1.0] = 1.0
    return np.sum((z - y) ** 2)


def rbf_network(c, X, y):
    d2 = np.sum((X[:, None, :] - c.reshape(2, 2)[None, :, :]) ** 2, axis=-1)
    pred = np.exp(-d2).sum(axis=1)
    return np.mean((pred - y) ** 2)


CASES = {
    "logistic_regression": {
        "x": (3,),
        "ctx": [("X", (6, 3)), ("y", (6,), "float64", "binary")],
    },
    "logistic_regression_stable": {
        "x": (3,),
        "ctx": [("X", (6, 3)), ("y", (6,), "float64", "binary")],
    },
    "softmax_cross_entropy": {
        "x": (3, 3),
        "ctx": [("X", (5, 3)), ("labels", (5,), "int64", "classes3")],
    },
    "softmax_cross_entropy_float_labels": {
        "x": (3, 3),
        "ctx": [("X", (5, 3)), ("labels", (5,), "float64", "classes3")],
    },
    "softmax_cross_entropy_onehot": {
        "x": (3, 3),
        "ctx": [("X", (5, 3)), ("Y", (5, 3), "float64", "onehot3")],
    },
    "mlp_tanh": {"x": (21,), "ctx": [("X", (5, 3)), ("y", (5,))]},
    "mlp_relu": {"x": (12,), "ctx": [("X", (5, 2)), ("y", (5,))]},
    "huber": {"x": (3,), "ctx": [("X", (6, 3)), ("y", (6,), "float64", "wide")]},
    "hinge": {"x": (3,), "ctx": [("X", (6, 3)), ("y", (6,), "float64", "sign")]},
    "squared_hinge": {
        "x": (3,),
        "ctx": [("X", (6, 3)), ("y", (6,), "float64", "sign")],
    },
    "log_cosh": {"x": (3,), "ctx": [("X", (6, 3)), ("y", (6,))]},
    "ridge": {"x": (3,), "ctx": [("X", (6, 3)), ("y", (6,)), ("lam", ())]},
    "smooth_lasso": {"x": (4,), "ctx": [("X", (6, 4)), ("y", (6,))]},
    "gaussian_nll": {"x": (6,), "ctx": [("y", (3,))]},
    "poisson_nll": {
        "x": (3,),
        "ctx": [("X", (6, 3)), ("counts", (6,), "float64", "counts")],
    },
    "attention": {"x": (3,), "ctx": [("K", (4, 3)), ("V", (4, 2))]},
    "self_attention": {"x": (3, 3), "ctx": [("X", (4, 3))]},
    "pinball": {"x": (3,), "ctx": [("X", (6, 3)), ("y", (6,))]},
    "multiclass_hinge": {
        "x": (3, 3),
        "ctx": [("X", (5, 3)), ("labels", (5,), "int64", "classes3")],
    },
    "masked_mse": {
        "x": (3,),
        "ctx": [("X", (6, 3)), ("y", (6,)), ("observed", (6,), "float64", "sign")],
    },
    "clipped_predictions": {"x": (3,), "ctx": [("X", (6, 3)), ("y", (6,))]},
    "rbf_network": {"x": (4,), "ctx": [("X", (5, 2)), ("y", (5,))]},
}
