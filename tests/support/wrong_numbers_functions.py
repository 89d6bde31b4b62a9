"""Functions of tests/adversarial/test_wrong_numbers.py (issue 20, item 6): each
one where a generated derivative was a silent wrong number (a plausible float that
is not the function's derivative), with its exact derivatives in mpmath.

Each NumPy function ``name`` has ``MP_DIFF[name](x, k)``: the k-th derivative (k = 1,
2) of its elementwise part at the mpmath number ``x``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mpmath as mp
import numpy as np


def tanh_sum(x: Any) -> Any:
    """tanh'(x) = sech(x)**2 was written ``1 - tanh(x)**2``: 0 from |x| = 19.1 on."""
    return np.sum(np.tanh(x))


def _tanh_diff(x: Any, k: int) -> Any:
    """sech(x)**2 and -2 tanh(x) sech(x)**2 (closed forms: mpmath's numerical
    ``diff`` loses the tiny arguments, 1e-200 and 5e-324)."""
    return mp.sech(x) ** 2 if k == 1 else -2 * mp.tanh(x) * mp.sech(x) ** 2


def cbrt_sum(x: Any) -> Any:
    """np.cbrt was printed as sign(x) * |x| ** (1/3) in scalar code."""
    return np.sum(np.cbrt(x))


def cbrt_values(x: Any) -> Any:
    """np.cbrt itself: its value is NumPy's to a few ulps in every emission."""
    return np.cbrt(x)


def _cbrt_diff(x: Any, k: int) -> Any:
    """x**(-2/3) / 3 and -2/9 x**(-5/3), odd in x."""
    r = mp.cbrt(abs(x))
    return 1 / (3 * r * r) if k == 1 else -mp.sign(x) * 2 / (9 * r**5)


def sign_times(x: Any) -> Any:
    """|x| written sign(x) * x: SymPy's derivative 2 x DiracDelta(x) + sign(x) was
    printed 2 x * 0.0 + sign(x), NaN from x = 9e307 on."""
    return np.sum(np.sign(x) * x)


def _sign_times_diff(x: Any, k: int) -> Any:
    """sign(x) and 0 (0 and 0 at x = 0, as both backends' subgradient)."""
    return mp.sign(x) if k == 1 else mp.mpf(0)


MP_DIFF: dict[str, Callable[[Any, int], Any]] = {
    "tanh_sum": _tanh_diff,
    "cbrt_sum": _cbrt_diff,
    "sign_times": _sign_times_diff,
}


def hypot_pair(x: Any) -> Any:
    """d hypot(a, b) / da = a / h was inf at subnormal (a, b): printed a * (1 / h)."""
    return np.hypot(x[0], x[1])


def _hypot_gradient(a: Any, b: Any) -> list[Any]:
    h = mp.hypot(a, b)
    return [a / h, b / h]


def _hypot_hessian(a: Any, b: Any) -> list[list[Any]]:
    h3 = mp.hypot(a, b) ** 3
    return [[b * b / h3, -a * b / h3], [-a * b / h3, a * a / h3]]


MP_PAIR: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "hypot_pair": (_hypot_gradient, _hypot_hessian)
}
"""The exact gradient and hessian of each function of a pair (a, b)."""


# ------------------------------------------------------------ run-time indices
# Each function reads x (or a constant) through an int64 context ``idx`` and is
# linear in x there, so its second derivatives are structurally zero: their
# graphs never read ``idx``, and they returned zeros for an index out of bounds
# where the function raises IndexError.
W = np.array([1.0, 2.0, 3.0])
C4 = np.array([0.5, -1.0, 2.0, 4.0])


def index_sum(x: Any, idx: Any) -> Any:
    """The gather alone."""
    return np.sum(x[idx])


def index_weighted(x: Any, idx: Any) -> Any:
    """The gather times constant weights."""
    return np.sum(x[idx] * W)


def index_dot(x: Any, idx: Any) -> Any:
    """The gather in a product with a constant vector."""
    return x[idx] @ W


def index_take(x: Any, idx: Any) -> Any:
    """np.take, NumPy's other spelling of the gather."""
    return 2.0 * np.sum(np.take(x, idx))


def index_scatter(x: Any, idx: Any) -> Any:
    """A store through the index (``y[idx] = ...``: repeats keep the last write)."""
    y = 2.0 * x
    y[idx] = x[:3] * W
    return np.sum(y * C4)


def index_array_2d(x: Any, idx: Any) -> Any:
    """A 2-D index array (idx of shape (2, 3)): a (2, 3) gather."""
    return np.sum(x[idx] * W)


def index_fancy_2d(x: Any, idx: Any) -> Any:
    """A 2-D fancy index: rows and columns of x as a 2 x 2 matrix, from the columns
    of idx (shape (3, 2)), each bounded by 2."""
    return np.sum(x.reshape(2, 2)[idx[:, 0], idx[:, 1]] * W)


def index_constant(x: Any, idx: Any) -> Any:
    """Only a constant is indexed (``C4[idx]`` of a constant C4 is refused while
    tracing: NumPy indexes it without asking the tracer): no derivative, not even
    the gradient, reads idx."""
    return np.sum(x) + np.sum(np.take(C4, idx))


def index_scalar(x: Any, idx: Any) -> Any:
    """A scalar x spread over four weights and gathered: its derivative and second
    derivative operators (d2f/dx2 = 0 never reads idx)."""
    return np.sum((x * C4)[idx])
