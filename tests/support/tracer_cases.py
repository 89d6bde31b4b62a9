"""Functions for the tracer tests: ordinary NumPy code, one per pattern users write."""

import math

import numpy as np
import scipy.special

from difgen.core.tracer import bind_name


def helper(a, b):
    return a * np.sin(b)


def uses_helper(x):
    return helper(x, x[::-1]).sum()


def array_of_scalars(x):
    A = np.array([[x[0] + 1, x[1] * 2], [x[2], 3.0]])
    return A.T @ A


def zeros_then_assign(x):
    out = np.zeros(4)
    out[0] = x[0] * x[1]
    out[1:3] = x[1:] ** 2
    out[3] = 1.0
    return out


def loop_fixed_trip(x):
    acc = x
    for i in range(3):
        acc = np.tanh(acc) + x * i
    return acc


def slicing_and_fancy(x):
    return x[1:, ::2] * 2.0 + x[[0, 2], :][:, [1, 3]].sum() - x[x.shape[0] - 1, :2]


def boolean_mask(x):
    mask = np.array([True, False, True, True])
    return np.sum(x[mask] ** 2)


def structure(x):
    y = np.stack([x, 2 * x], axis=1)
    z = np.concatenate([y.ravel(), np.flip(x), np.roll(x, 1)])
    w = np.vstack([x, x]).T.reshape(-1)
    return np.hstack([z, w, np.tile(x[:2], 2), np.repeat(x[:2], 2)])


def reductions(x):
    return np.array(
        [
            np.mean(x, axis=0).sum(),
            np.var(x),
            np.std(x, axis=1).sum(),
            np.max(x),
            np.min(x, axis=1, keepdims=True).sum(),
            np.prod(x[0]),
            np.cumsum(x, axis=1)[:, -1].sum(),
            np.linalg.norm(x),
        ]
    )


def linear_algebra(x):
    M = x.reshape(3, 3)
    v = x[:3]
    return np.array(
        [
            np.dot(v, v),
            np.vdot(M, M),
            np.outer(v, v).sum(),
            np.inner(v, M[0]),
            np.einsum("ij,jk->ik", M, M).sum(),
            np.trace(M),
            np.triu(M).sum(),
            np.diag(M).sum(),
            np.diag(v).sum(),
            (M @ v).sum(),
        ]
    )


def selection(x):
    return np.where(x > 0.5, x**2, -x) + np.maximum(x, 0.3) + np.clip(x, 0.2, 0.8)


def elementwise_surface(x):
    return (
        np.log2(x)
        + np.log10(x)
        + np.log(x)
        + np.exp2(x)
        + np.square(x)
        + np.reciprocal(x)
        + np.hypot(x, 1.0)
        + np.arctan2(x, 2.0)
        + np.cbrt(x)
        + np.expm1(x)
        + np.log1p(x)
        + np.abs(x - 0.5)
        + np.arcsinh(x)
        + np.arccos(x * 0.5)
    )


def derivative_rules(x):
    """Primitives that only derivative rules bind, never NumPy code: hypot's unit
    vector, slope and gap (a / h, a / h**2, (b**2 - a**2) / h**4)."""
    unit, slope = bind_name("hypot_unit", x, 0.5), bind_name("hypot_slope", 2.0, x)
    return unit + slope + bind_name("hypot_gap", x, 1.5)


def branch_on_value(x):
    # a `return` inside a loop, on a traced value, is refused (an `if`, a `while`
    # and `break` become conds and loops)
    for i in range(3):
        if x > i:
            return x * i
    return x


def control_flow(x):
    # an if and a while on traced values: a cond and a while_loop
    y = x * 2.0 if x[0] > 0.5 else np.sin(x)
    while np.sum(y * y) > 0.1:
        y = y * 0.5
    return y


def math_on_value(x):
    return math.sin(x) + math.erf(x)  # math.sin is traced; math.erf is not


def unsupported(x):
    return np.unique(x)


def rounding_and_modulo(x):
    return (
        np.floor(3.0 * x)
        + np.ceil(3.0 * x)
        + np.trunc(3.0 * x)
        + np.rint(3.0 * x)
        + x % 0.3
        + np.fmod(x, 0.7)
        + np.logaddexp(x, 1.0 - x)
        + np.logaddexp2(x, 2.0 * x)
    )


def more_elementwise(x):
    return (
        np.cos(x)
        + np.tan(x)
        + np.arcsin(x)
        + np.arctan(x)
        + np.sinh(x)
        + np.cosh(x)
        + np.arccosh(x + 1.5)
        + np.arctanh(x * 0.5)
        + np.exp(x)
        + np.sign(x - 0.5) * x
        + np.sinc(x - 0.5)
        + np.heaviside(x - 0.5, x)
    )


def special_functions(x):
    """scipy.special, called through the module, as statistics code does."""
    return (
        scipy.special.gammaln(x + 1.0)
        + scipy.special.gamma(x + 1.0)
        + scipy.special.digamma(x + 0.5)
        + scipy.special.polygamma(1, x + 0.5)
        + scipy.special.erf(x)
        + scipy.special.erfc(x)
        + scipy.special.erfcx(x)
        + scipy.special.log_ndtr(x)
        + scipy.special.expit(x)
        + scipy.special.xlogy(x, x + 1.0)
        + scipy.special.xlog1py(x, x)
    )


def padding_and_products(x):
    return np.pad(x, (1, 2)).sum() + np.cumprod(x)[-1] + np.pad(x, 1, mode="edge").sum()


def comparisons(x):
    keep = ((x < 0.5) & (x >= 0.2)) | ~(x == 0.3) & (x != 0.4) | (x <= 0.1)
    return np.where(keep, x, 2.0 * x)


def matrix_functions(x):
    A = x.reshape(3, 3) + 3.0 * np.eye(3)
    sign, logdet = np.linalg.slogdet(A)
    return (
        np.linalg.solve(A, x[:3]).sum()
        + np.linalg.inv(A).sum()
        + np.linalg.det(A)
        + sign * logdet
        + np.linalg.cholesky(A @ A.T).sum()
        + (np.diag(x[:3]) + np.diag(x[:2], 1)).sum()
    )


def decompositions(x):
    A = x.reshape(3, 3) + np.diag([0.0, 1.5, 3.0])
    u, s, vh = np.linalg.svd(A)
    w, v = np.linalg.eigh(A)
    return (
        np.linalg.svd(A, compute_uv=False).sum()
        + (u[:, 0] * vh[0]).sum() * s[1]
        + np.linalg.eigvalsh(A, UPLO="U").sum()
        + (v[:, 1] * v[:, 1]).sum() * w[2]
        + np.linalg.pinv(A).sum()
    )


def integer_index_array(x):
    idx = np.array([0, 2])
    return x[idx] * 2.0


def runtime_data(x):
    """Indices, masks and orders computed from x at run time."""
    order = np.argsort(x, kind="stable")
    out = np.zeros(4)
    np.add.at(out, order[:4] % 4, x[:4])
    out[(order[:3] + 1) % 4] = np.sort(x)[:3]
    mask = x > np.median(x)
    picked = x[np.argmax(x)] * x[np.argmin(x)] + np.quantile(x, 0.3)
    total = np.sum(x[mask] ** 2) + np.count_nonzero(mask) * x.astype(int).astype(float)
    return out.sum() + picked + total + np.maximum.accumulate(x)
