"""One function per registered primitive, with its domain limits built in.

Each takes ``x`` drawn uniformly from [0.2, 0.8] (shape in ``ROWS``) and maps it
into the primitive's domain, away from kinks and ties, so central differences are a
valid oracle. Written as plain NumPy: the tests trace them, and the pipeline builds
them into generated modules.
"""

import numpy as np
import scipy.special as sc

from difgen.core.tracer import bind_name

M = np.array([[0.3, -1.2, 0.7, 0.1], [1.1, 0.4, -0.5, 0.9], [0.2, 0.6, 1.3, -0.8]])
MASK = np.array([True, False, True, True, False, True])


def r_sin(x):
    return np.sin(x)


def r_cos(x):
    return np.cos(x)


def r_tan(x):
    return np.tan(x)


def r_arcsin(x):
    return np.arcsin(x)


def r_arccos(x):
    return np.arccos(x)


def r_arctan(x):
    return np.arctan(x)


def r_sinh(x):
    return np.sinh(x)


def r_cosh(x):
    return np.cosh(x)


def r_tanh(x):
    return np.tanh(x)


def r_arcsinh(x):
    return np.arcsinh(x)


def r_arccosh(x):
    return np.arccosh(x + 1.5)


def r_arctanh(x):
    return np.arctanh(x)


def r_exp(x):
    return np.exp(x)


def r_expm1(x):
    return np.expm1(x)


def r_log(x):
    return np.log(x) + np.log2(x) + np.log10(x)


def r_sinc(x):
    # x - 0.5 in [-0.3, 0.3]: through 0 and across the switch from series to closed
    # form at |x| = 0.25
    return np.sinc(x - 0.5) + np.sinc(3.0 * x)


def r_log2(x):
    return np.log2(x)


def r_log10(x):
    return np.log10(x)


def r_exp2(x):
    return np.exp2(x)


def r_hypot(x):
    return np.hypot(x, x[::-1] - 0.5)


def r_hypot_unit(x):
    """hypot's internal unit vector (its derivative's rule), reached directly."""
    return bind_name("hypot_unit", x, x[::-1] - 0.5)


def r_hypot_slope(x):
    """a / hypot(a, b)**2, the unit vector's derivative's rule."""
    return bind_name("hypot_slope", x, x[::-1] - 0.5)


def r_hypot_gap(x):
    """(b**2 - a**2) / hypot(a, b)**4, the slope's derivative's rule."""
    return bind_name("hypot_gap", x, x[::-1] - 0.5)


def r_log1p(x):
    return np.log1p(x)


def r_sqrt(x):
    return np.sqrt(x) + np.hypot(x, 0.5)


def r_cbrt(x):
    return np.cbrt(x - 1.0)


def r_abs(x):
    return np.abs(x - 1.0) * x


def r_sign(x):
    return np.sign(x - 1.0) * x**2


def r_neg(x):
    return -x * x


def r_add(x):
    return x + x[::-1] ** 2


def r_sub(x):
    return x - x[::-1] ** 2


def r_mul(x):
    return x * x[::-1] + np.square(x)


def r_div(x):
    return x / (x[::-1] + 1.0) + np.reciprocal(x)


def r_pow(x):
    return x ** x[::-1] + x**3.0 + 2.0**x


def r_arctan2(x):
    return np.arctan2(x, x[::-1] + 0.5)


def r_maximum(x):
    return np.maximum(x, 0.5 * x[::-1] + 0.35) + np.clip(x, 0.0, 0.7)


def r_minimum(x):
    return np.minimum(x**2, 0.5 * x[::-1] + 0.1)


def r_cond(x):
    # a branch on a traced value: both branches are taken at the test points
    if np.sum(x) > 2.0:
        return np.sin(x) * x[0]
    return x**3 - x[1]


def r_while_loop(x):
    # shrink until small: the trip count depends on x
    y = x * 3.0
    while np.sum(y * y) > 0.5:
        y = y * 0.7 + 0.01 * np.sin(y)
    return y


def r_where(x):
    return np.where(x > 0.5, x**2, np.sin(x))


def r_lt(x):
    return np.where(x < 0.5, x, 2.0 * x)


def r_le(x):
    return np.where(x <= 0.5, x**2, x)


def r_gt(x):
    return np.where(x > 0.4, x**3, x)


def r_ge(x):
    return np.where(x >= 0.6, np.exp(x), x)


def r_eq(x):
    return np.where(x == 0.25, 0.0, x * x)


def r_ne(x):
    return np.where(x != 0.25, x * x, 0.0)


def r_logical_and(x):
    return np.where((x > 0.3) & (x < 0.7), x**2, x)


def r_logical_or(x):
    return np.where((x < 0.3) | (x > 0.7), x**2, x)


def r_logical_not(x):
    return np.where(~(x > 0.5), x**2, x)


def r_reduce_sum(x):
    return np.sum(x**2, axis=0) + np.mean(x, axis=1, keepdims=True).ravel()[:1]


def r_reduce_max(x):
    return np.max(x * M[:, :3], axis=1) + np.linalg.norm(x, ord=np.inf, axis=0)


def r_reduce_min(x):
    return np.min(x * M[:, :3], axis=0)


def r_reduce_prod(x):
    return np.prod(x + 0.5, axis=1)


def r_cumsum(x):
    return np.cumsum(x**2, axis=1)


def r_cumprod(x):
    return np.cumprod(x + 0.5, axis=0)


def r_getitem(x):
    return x[1:, ::2] * x[[0, 2], :][:, [1, 0]] ** 2 + x[MASK[:3]][:, 0:1]


def r_scatter_add(x):
    return np.diag(x) @ x + np.diag(x[:2], 1).sum(axis=0)


def r_scatter_sum(x):
    return (np.diag(x) + np.diag(x[:2] ** 2, -1)) @ np.sin(x)


def r_set_index(x):
    out = np.zeros(5)
    out[0] = x[0] * x[1]
    out[1:3] = x[1:3] ** 2
    out[[3, 4]] = np.sin(x[:2])
    return out


def r_reshape(x):
    return x.reshape(3, 2) ** 2 @ x[:2]


def r_transpose(x):
    return (x.T @ x) * np.swapaxes(x, 0, 1)[:, :1]


def r_broadcast_to(x):
    wide = np.broadcast_to(np.sin(x[:, :1]), (3, 2)).sum(axis=0)
    return wide * x + np.tile(x[0], 3).reshape(3, 2)


def r_concatenate(x):
    return np.concatenate([x, x**2, np.stack([x, np.sin(x)]).ravel()])


def r_pad(x):
    return np.pad(x**2, (1, 1)) + np.roll(np.pad(x, 1, mode="edge"), 1) * 2.0


def r_pack(x):
    a, b = x[0], x[1]
    return np.array([[a * b, a + 1.0], [np.sin(b), 3.0]])


def r_matmul(x):
    A = x.reshape(3, 3)
    return (
        A @ A.T @ x[:3] + x[:3] @ A + np.dot(A, x[3:6]) + np.outer(x[:3], x[6:]).sum()
    )


def r_einsum(x):
    A = x.reshape(3, 3)
    return (
        np.einsum("ij,jk->ik", A, A) + np.einsum("i,j->ij", x[:3], x[3:6]) + np.trace(A)
    )


def r_solve(x):
    A = x.reshape(3, 3) + 3.0 * np.eye(3)
    return np.linalg.solve(A, x[:3] ** 2) + np.linalg.solve(A, A.T).sum(axis=0)


def r_inv(x):
    A = x.reshape(3, 3) + 3.0 * np.eye(3)
    return np.linalg.inv(A) @ x[:3]


def r_det(x):
    A = x.reshape(3, 3) + 3.0 * np.eye(3)
    return np.linalg.det(A) * x[:3]


def r_logabsdet(x):
    A = x.reshape(3, 3) - 3.0 * np.eye(3)
    return np.linalg.slogdet(A).logabsdet * x[:3]


def r_detsign(x):
    A = x.reshape(3, 3) - 3.0 * np.eye(3)
    sign, logdet = np.linalg.slogdet(A)
    return sign * logdet * x[:3]


def r_cholesky(x):
    A = x.reshape(3, 3)
    return np.linalg.cholesky(A @ A.T + np.eye(3))


def r_svdvals(x):
    A = x.reshape(4, 3) * np.array([1.0, 2.0, 4.0])
    return np.linalg.svd(A, compute_uv=False) * x[:3] + np.linalg.svdvals(A.T)


def r_svd(x):
    u, s, vh = np.linalg.svd(x.reshape(3, 4) + M, full_matrices=False)
    U, _, Vh = np.linalg.svd(x[:9].reshape(3, 3))  # square: full_matrices=True
    # products of matching columns: independent of LAPACK's sign choice
    return (
        np.concatenate(
            [(u[:, :1] * u[:, 0]).ravel(), (vh[1:2].T * vh[1]).ravel(), s * x[:3]]
        )
        + (u[:, 2:] * vh[2]).sum()
        + (U[:, :1] * Vh[0]).sum()
    )


def r_eigvalsh(x):
    A = x.reshape(3, 3) + np.diag([0.0, 1.0, 2.0])
    return np.linalg.eigvalsh(A) * x[:3] + np.linalg.eigvalsh(A, UPLO="U")


def r_eigh(x):
    w, v = np.linalg.eigh(x.reshape(3, 3) + np.diag([0.0, 1.0, 2.0]), UPLO="U")
    return np.concatenate([(v[:, 1:2] * v[:, 1]).ravel(), w * x[:3]])


def r_pinv(x):
    A = x.reshape(4, 3) * np.array([1.0, 2.0, 4.0])
    return np.linalg.pinv(A).ravel() + np.linalg.pinv(A[:3] + 2.0, hermitian=True)[0, 0]


def r_logaddexp(x):
    return np.logaddexp(x, 2.0 - 3.0 * x) + np.logaddexp(x, x)


def r_logaddexp2(x):
    return np.logaddexp2(x * x, x[::-1]) + np.logaddexp2(2.0 * x, x + x)


def r_heaviside(x):
    """A step in x (flat) and its value at 0 in h: floor(x) is 0 here."""
    step = np.heaviside(x - 0.5, 2.0 * x) * x + np.heaviside(x[::-1] - 0.4, 0.5)
    return step + np.heaviside(np.floor(x), x * x)


def r_floor(x):
    return np.floor(4.0 * x) * x + np.ceil(3.0 * x) * x


def r_ceil(x):
    return np.ceil(3.0 * x - 1.2) * x**2


def r_trunc(x):
    return np.trunc(5.0 * x - 2.3) * x


def r_rint(x):
    return np.rint(7.0 * x) * x + np.round(x, 1) * x


def r_remainder(x):
    # quotients in (2.5, 2.9) and (-2.9, -2.5): away from the jumps on [0.2, 0.8]
    b = 0.1 * x[::-1] + 2.0
    return (x + 5.0) % b + np.mod(x + 5.0, -b) + 0.25 % (x + 1.0) + np.remainder(x, 1.5)


def r_fmod(x):
    b = 0.1 * x[::-1] + 2.0
    return np.fmod(-x - 5.0, b) + np.fmod(x + 5.0, -b)


# run-time integer and boolean data: indices and masks computed from x itself
def r_gather(x):
    return x[np.arange(3), np.argsort(x, axis=1)[:, 0]] * x[:, [2, 0]].sum(axis=1)


def r_scatter_add_dyn(x):
    out = np.zeros(4)
    np.add.at(out, np.argsort(x) % 4, x * x)  # repeated positions accumulate
    return out


def r_set_index_dyn(x):
    out = np.sin(x)
    out[np.argsort(x)[:3] % 2] = x[:3] ** 2  # repeated positions: the last wins
    return out


def r_to_int64(x):
    return x * (x * 10.0).astype(int) + (x > 0.5).astype(np.int64) * x


def r_to_float64(x):
    return x * np.argsort(x).astype(float)


def r_int_arith(x):
    idx = np.argsort(x)
    return x[(idx + 1) % 5] * x[idx * 2 // 2] - x[np.maximum(idx - 1, 0)]


def r_argsort(x):
    return x[np.argsort(x, kind="stable")] * np.arange(1.0, 6.0)


def r_argmax(x):
    return x[np.arange(3), np.argmax(x, axis=1)] ** 2 + x.ravel()[x.argmax()]


def r_argmin(x):
    return x[np.argmin(x, axis=0), np.arange(4)] ** 2 + x.ravel()[x.argmin()]


def r_sort(x):
    return np.sort(x, axis=0) * M + np.sort(x, axis=None)[:4]


def r_median(x):
    return np.median(x, axis=1) + np.median(x) ** 2


def r_quantile(x):
    return np.percentile(x, 30.0, axis=0) + np.quantile(x, [0.25, 0.9]).sum()


def r_cum_extreme(x):
    return np.maximum.accumulate(np.sin(9.0 * x)) + np.minimum.accumulate(x[::-1])


def r_masked_reduce(x):
    mask = x > x.min()
    return np.sum(x[mask] ** 2) + np.mean(np.exp(x[mask])) * x


def r_count_nonzero(x):
    return x * np.count_nonzero(x > 0.5)


def r_erf(x):
    return sc.erf(2.0 * x - 1.0)


def r_erfc(x):
    return sc.erfc(3.0 * x - 1.5)


def r_erfcx(x):
    return sc.erfcx(4.0 * x - 2.0)


def r_gammaln(x):
    # both sides of gammaln's minimum (1.46) and a negative non-integer
    return sc.gammaln(4.0 * x) + sc.gammaln(-0.5 - 0.5 * x)


def r_gamma(x):
    # positive, and between the poles -2 and -1
    return sc.gamma(5.0 * x) + sc.gamma(-1.1 - x)


def r_polygamma(x):
    return sc.psi(3.0 * x) + sc.polygamma(1, x + 0.5) + sc.polygamma(3, x)


def r_log_ndtr(x):
    return sc.log_ndtr(20.0 * x - 14.0)


def r_expit(x):
    return sc.expit(10.0 * x - 5.0)


def r_xlogy(x):
    return sc.xlogy(x - 0.5, x + 1.0)


def r_xlog1py(x):
    return sc.xlog1py(x - 0.5, x)


# primitive name: (function, input shape)
ROWS = {
    "sin": (r_sin, (4,)),
    "cos": (r_cos, (4,)),
    "tan": (r_tan, (4,)),
    "arcsin": (r_arcsin, (4,)),
    "arccos": (r_arccos, (4,)),
    "arctan": (r_arctan, (4,)),
    "sinh": (r_sinh, (4,)),
    "cosh": (r_cosh, (4,)),
    "tanh": (r_tanh, (4,)),
    "arcsinh": (r_arcsinh, (4,)),
    "arccosh": (r_arccosh, (4,)),
    "arctanh": (r_arctanh, (4,)),
    "exp": (r_exp, (4,)),
    "expm1": (r_expm1, (4,)),
    "log": (r_log, (4,)),
    "log1p": (r_log1p, (4,)),
    "log2": (r_log2, (4,)),
    "log10": (r_log10, (4,)),
    "exp2": (r_exp2, (4,)),
    "hypot": (r_hypot, (4,)),
    "hypot_unit": (r_hypot_unit, (4,)),
    "hypot_slope": (r_hypot_slope, (4,)),
    "hypot_gap": (r_hypot_gap, (4,)),
    "sqrt": (r_sqrt, (4,)),
    "cbrt": (r_cbrt, (4,)),
    "abs": (r_abs, (4,)),
    "sign": (r_sign, (4,)),
    "logaddexp": (r_logaddexp, (4,)),
    "logaddexp2": (r_logaddexp2, (4,)),
    "heaviside": (r_heaviside, (4,)),
    "floor": (r_floor, (4,)),
    "ceil": (r_ceil, (4,)),
    "trunc": (r_trunc, (4,)),
    "rint": (r_rint, (4,)),
    "remainder": (r_remainder, (4,)),
    "fmod": (r_fmod, (4,)),
    "sinc": (r_sinc, (4,)),
    "erf": (r_erf, (4,)),
    "erfc": (r_erfc, (4,)),
    "erfcx": (r_erfcx, (4,)),
    "gammaln": (r_gammaln, (4,)),
    "gamma": (r_gamma, (4,)),
    "polygamma": (r_polygamma, (4,)),
    "log_ndtr": (r_log_ndtr, (4,)),
    "expit": (r_expit, (4,)),
    "xlogy": (r_xlogy, (4,)),
    "xlog1py": (r_xlog1py, (4,)),
    "neg": (r_neg, (4,)),
    "add": (r_add, (4,)),
    "sub": (r_sub, (4,)),
    "mul": (r_mul, (4,)),
    "div": (r_div, (4,)),
    "pow": (r_pow, (4,)),
    "arctan2": (r_arctan2, (4,)),
    "maximum": (r_maximum, (4,)),
    "minimum": (r_minimum, (4,)),
    "where": (r_where, (4,)),
    "cond": (r_cond, (4,)),
    "while_loop": (r_while_loop, (4,)),
    "lt": (r_lt, (4,)),
    "le": (r_le, (4,)),
    "gt": (r_gt, (4,)),
    "ge": (r_ge, (4,)),
    "eq": (r_eq, (4,)),
    "ne": (r_ne, (4,)),
    "logical_and": (r_logical_and, (4,)),
    "logical_or": (r_logical_or, (4,)),
    "logical_not": (r_logical_not, (4,)),
    "reduce_sum": (r_reduce_sum, (3, 3)),
    "reduce_max": (r_reduce_max, (3, 3)),
    "reduce_min": (r_reduce_min, (3, 3)),
    "reduce_prod": (r_reduce_prod, (3, 3)),
    "cumsum": (r_cumsum, (3, 3)),
    "cumprod": (r_cumprod, (3, 3)),
    "getitem": (r_getitem, (3, 4)),
    "scatter_add": (r_scatter_add, (3,)),
    "scatter_sum": (r_scatter_sum, (3,)),
    "set_index": (r_set_index, (3,)),
    "reshape": (r_reshape, (6,)),
    "transpose": (r_transpose, (3, 2)),
    "broadcast_to": (r_broadcast_to, (3, 2)),
    "concatenate": (r_concatenate, (3,)),
    "pad": (r_pad, (4,)),
    "pack": (r_pack, (2,)),
    "matmul": (r_matmul, (9,)),
    "einsum": (r_einsum, (9,)),
    "solve": (r_solve, (9,)),
    "inv": (r_inv, (9,)),
    "det": (r_det, (9,)),
    "logabsdet": (r_logabsdet, (9,)),
    "detsign": (r_detsign, (9,)),
    "cholesky": (r_cholesky, (9,)),
    "svdvals": (r_svdvals, (12,)),
    "svd": (r_svd, (12,)),
    "eigvalsh": (r_eigvalsh, (9,)),
    "eigh": (r_eigh, (9,)),
    "pinv": (r_pinv, (12,)),
    "gather": (r_gather, (3, 4)),
    "scatter_add_dyn": (r_scatter_add_dyn, (5,)),
    "set_index_dyn": (r_set_index_dyn, (5,)),
    "to_int64": (r_to_int64, (4,)),
    "to_float64": (r_to_float64, (5,)),
    "int_arith": (r_int_arith, (5,)),
    "argsort": (r_argsort, (5,)),
    "argmax": (r_argmax, (3, 4)),
    "argmin": (r_argmin, (3, 4)),
    "sort": (r_sort, (3, 4)),
    "median": (r_median, (3, 4)),
    "quantile": (r_quantile, (3, 4)),
    "cum_extreme": (r_cum_extreme, (6,)),
    "masked_reduce": (r_masked_reduce, (6,)),
    "count_nonzero": (r_count_nonzero, (6,)),
}


# ---------------------------------------------------------------- NumPy surface
# One line per NumPy function of the supported surface (issue 3), each built from
# the primitives above; input drawn from [0.2, 0.8] with the shape given.
def s_sum(x):
    return np.sum(x**2, axis=1, keepdims=True) * np.sum(x)


def s_mean(x):
    return np.mean(x**2, axis=0) + np.mean(x, keepdims=True).ravel()


def s_prod(x):
    return np.prod(x, axis=0, keepdims=True)


def s_max(x):
    return np.max(x * M[:, :3], axis=1, keepdims=True) + np.amax(x)


def s_min(x):
    return np.min(x * M[:, :3], axis=0) + np.amin(x)


def s_var(x):
    return np.var(x, axis=1) + np.var(x, ddof=1)


def s_std(x):
    return np.std(x, axis=0, keepdims=True) + x.std()


def s_norm(x):
    return np.array(
        [
            np.linalg.norm(x),
            np.linalg.norm(x, 1),
            np.linalg.norm(x, 3),
            np.linalg.norm(x, np.inf),
        ]
    )


def s_dot(x):
    A = x.reshape(3, 3)
    return np.dot(A, x[:3]) + np.dot(x[:3], x[3:6]) + A.dot(x[6:])


def s_vdot(x):
    return np.vdot(x.reshape(3, 3), x.reshape(3, 3).T) * x[:2]


def s_outer(x):
    return np.outer(x[:3], x[3:])


def s_inner(x):
    return np.inner(x[:3], x[3:6]) + np.inner(x.reshape(3, 3), x[:3])


def s_trace(x):
    return np.trace(x.reshape(3, 3)) * x[:2] + np.trace(x.reshape(3, 3), 1)


def s_slicing(x):
    return x[1:, ::2] - x[-1, :2] + x[:0:-1, 1][:, None] * x[:2, 1:3].sum()


def s_fancy(x):
    return x[[0, 2], :][:, [3, 1, 1]] + x[[[0], [1]], [1, 2, 3]]


def s_mask(x):
    return x[MASK] ** 2 + x[x.shape[0] // 2 :][MASK[:3]].sum()


def s_zeros_assign(x):
    out = np.zeros(4)
    out[0] = x[0] * x[1]
    out[1:3] = x[1:] ** 2
    out[3] = 1.0
    return out


def s_empty_assign(x):
    out = np.empty((2, 3))
    out[0] = np.sin(x)
    out[1, :] = x * x[0]
    return out


def s_zeros_like_assign(x):
    out = np.zeros_like(x)
    out[::2] = x[::2] ** 2
    out[1] = x[2]
    return out


def s_array_of_scalars(x):
    return np.array([[x[0] + 1, x[1] * 2], [x[2], 3.0]]) @ x[:2]


def s_structure(x):
    A = x.reshape(2, 3)
    parts = [
        np.ravel(A.T),
        np.swapaxes(A, 0, 1).ravel(),
        np.moveaxis(A[None], 0, 2).ravel(),
        np.expand_dims(x, 1)[:, 0],
        np.squeeze(A[:1]),
        np.broadcast_to(x[0], (2,)),
    ]
    return np.concatenate(parts) * np.concatenate([x, x, x, x, x[:3], x[:2]])


def s_joining(x):
    a, b = x[:3], x[3:] ** 2
    return np.concatenate(
        [np.stack([a, b], axis=1).ravel(), np.hstack([a, b]), np.vstack([a, b]).ravel()]
    )


def s_tile_repeat(x):
    return np.tile(x[:2] ** 2, 3) + np.repeat(x[:3], 2) + np.tile(x[:3], (2, 1)).ravel()


def s_flip_roll(x):
    return (
        np.flip(x**2)
        + np.roll(x, 2)
        + np.flip(np.roll(x.reshape(2, 3), -1, axis=1)).ravel()
    )


def s_pad(x):
    return np.pad(x**2, (2, 1)) + np.pad(x, ((1, 2),), mode="wrap")


def s_diag(x):
    A = x.reshape(3, 3)
    return np.diag(A) + np.diagonal(A, 1).sum() + np.diag(x[:3] ** 2).sum(axis=1)


def s_triangles(x):
    A = x.reshape(3, 3)
    return np.triu(A) @ x[:3] + np.tril(A**2, -1).sum(axis=0)


def s_comparisons(x):
    keep = ((x < 0.5) & (x >= 0.25)) | ~(x == 0.3) & (x != 0.4) | (x <= 0.22)
    return np.where(keep, x**2, 2.0 * x) + (x > 0.6) * x


def s_clip(x):
    return np.clip(x, 0.3, 0.7) * x + np.clip(x**2, None, 0.5)


def s_power(x):
    return np.power(x, 3.0) + np.power(2.0, x) + np.power(x, x) + np.float_power(x, 0.5)


def s_hypot(x):
    return np.hypot(x, x[::-1]) + np.square(x) + np.reciprocal(x)


def s_logs(x):
    return np.log2(x) + np.log10(x) + np.log(x) + np.log1p(x) + np.expm1(x)


def s_solve(x):
    A = x.reshape(3, 3) + 3.0 * np.eye(3)
    return np.linalg.solve(A, x[:3]) + np.linalg.solve(A, A @ A)[0]


def s_slogdet(x):
    sign, logabsdet = np.linalg.slogdet(x.reshape(3, 3) - 2.0 * np.eye(3))
    return (
        sign * logabsdet
        + np.linalg.det(x.reshape(3, 3))
        + np.linalg.inv(x.reshape(3, 3)).sum()
    )


def s_cholesky(x):
    A = x.reshape(3, 3)
    return np.linalg.cholesky(A.T @ A + 0.5 * np.eye(3)) @ x[:3]


SURFACE = {
    "sum": (s_sum, (3, 4)),
    "mean": (s_mean, (3, 4)),
    "prod": (s_prod, (3, 4)),
    "max": (s_max, (3, 3)),
    "min": (s_min, (3, 3)),
    "var": (s_var, (3, 4)),
    "std": (s_std, (3, 4)),
    "linalg.norm": (s_norm, (5,)),
    "dot": (s_dot, (9,)),
    "vdot": (s_vdot, (9,)),
    "outer": (s_outer, (5,)),
    "inner": (s_inner, (9,)),
    "trace": (s_trace, (9,)),
    "slicing": (s_slicing, (3, 4)),
    "fancy indexing": (s_fancy, (3, 4)),
    "boolean mask": (s_mask, (6,)),
    "zeros + assignment": (s_zeros_assign, (3,)),
    "empty + assignment": (s_empty_assign, (3,)),
    "zeros_like + assignment": (s_zeros_like_assign, (5,)),
    "array of traced scalars": (s_array_of_scalars, (3,)),
    "reshape ravel transpose swapaxes moveaxis expand_dims squeeze broadcast_to": (
        s_structure,
        (6,),
    ),
    "stack concatenate hstack vstack": (s_joining, (6,)),
    "tile repeat": (s_tile_repeat, (4,)),
    "flip roll": (s_flip_roll, (6,)),
    "pad": (s_pad, (4,)),
    "diag diagonal": (s_diag, (9,)),
    "triu tril": (s_triangles, (9,)),
    "comparisons where": (s_comparisons, (7,)),
    "clip maximum minimum": (s_clip, (6,)),
    "power": (s_power, (4,)),
    "hypot square reciprocal": (s_hypot, (4,)),
    "log log2 log10 log1p expm1": (s_logs, (4,)),
    "linalg.solve": (s_solve, (9,)),
    "linalg.slogdet det inv": (s_slogdet, (9,)),
    "linalg.cholesky": (s_cholesky, (9,)),
}
