"""Functions that index, select and sort with data known only at run time.

Each is plain NumPy, as a user writes it; ``tests/frontend/test_runtime_data.py`` builds
them and checks against JAX (the ones JAX can run) or central differences.
"""

import numpy as np


def cross_entropy(x, labels):
    """Mean negative log-likelihood of integer labels (an int64 context)."""
    logp = x - np.log(np.sum(np.exp(x), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(4), labels])


def springs(x, c):
    """A spring network whose edge list is a float context cast to int."""
    i = c[:, 0].astype(int)
    j = c[:, 1].astype(int)
    d = x[i] - x[j]
    r = np.sqrt(np.sum(d * d, axis=1))
    return np.sum((r - c[:, 2]) ** 2)


def springs_int(x, edges, rest):
    """The same with an int64 edge list (repeated nodes: the gathers' transposes
    accumulate)."""
    d = x[edges[:, 0]] - x[edges[:, 1]]
    return np.sum((np.sqrt(np.sum(d * d, axis=1)) - rest) ** 2)


def masked_sums(x, c):
    """Sums and means over a selection by a run-time mask."""
    mask = c > 0.0
    return np.sum(x[mask] ** 2) + np.mean(np.exp(x[mask])) + x[mask].sum() * 0.5


def masked_where(x, m):
    """A bool context in np.where and as a factor."""
    return np.sum(np.where(m, x * x, np.sin(x))) + np.sum(x * m) * 3.0


def clamp(x):
    """Assignment through a mask computed from the input."""
    z = x * 2.0
    z[z > 1.0] = 1.0
    z[z < -1.0] = z[z < -1.0] * 0.5
    return z


def sort_stats(x):
    """Order statistics: sort, median, percentile, quantile."""
    s = np.sort(x)
    w = np.arange(1.0, 8.0)
    return (
        np.sum(s * w)
        + np.median(x) * 2.0
        + np.percentile(x, 30.0)
        + np.quantile(x, 0.8)
    )


def sort_stats_even(x):
    """The even-length median averages two elements; ndarray.sort sorts in place."""
    y = x * 1.0
    y.sort()
    return np.median(x) + np.percentile(x, 50.0) * 0.5 + y[-1] - y[1] * 2.0


def argmax_gather(x):
    """The largest element read through its run-time position, and the ordering."""
    k = np.argmax(x)
    order = np.argsort(x)
    return x[k] ** 2 + np.sum(x[order] * np.arange(7.0)) + x.min() * x[np.argmin(x)]


def running_max(x):
    """np.maximum.accumulate: the derivative follows the running argmax."""
    return np.maximum.accumulate(x) * 2.0 + np.minimum.accumulate(x)


def scatter(x, idx):
    """np.add.at accumulates repeated positions; out[idx] += v applies them once."""
    out = np.zeros(4)
    np.add.at(out, idx, x)
    out[idx] += x * x
    return out


def index_arithmetic(x, labels):
    """Run-time indices computed from run-time integers."""
    nxt = (labels + 1) % 5
    return x[nxt] * x[labels] + np.take(x, labels * 2 % 5) + x[labels - 5]


def take_along(x, c):
    """np.take_along_axis with a run-time order, and a count of a run-time mask."""
    order = np.argsort(c, axis=1)
    picked = np.take_along_axis(x, order, axis=1)
    count = np.count_nonzero(c > 0.0)
    return picked[:, 0] * 2.0 + picked[:, -1] / (count + 1.0)


def float_to_int(x):
    """astype(int) of the differentiated input: piecewise constant, zero derivative."""
    return x * x.astype(int) + x.astype(bool) * x


def returns_selection(x, c):
    """Refused: the result's shape depends on the data."""
    return x[c > 0.0]


def selection_elementwise(x, c):
    """Refused: a selection used as an array of its run-time length."""
    return np.exp(x[c > 0.0]) + x


def partition(x):
    """Refused: np.partition's order beyond kth is unspecified."""
    return np.partition(x, 2)[2]
