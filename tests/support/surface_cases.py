"""User functions for the NumPy-surface tests (tests/test_surface_*.py).

Plain NumPy (and ``math``), as a user writes it: the tests trace these, build them
into generated modules, and run them under JAX (``np`` rebound) as the oracle.
Inputs are drawn from [0.2, 0.8]; the constants keep modulo and rounding away
from their jumps there, so central differences are valid.
"""

import math

import numpy as np

# ------------------------------------------------------------------ elementwise


def e_logaddexp(x):
    return np.logaddexp(x, 2.0 - 3.0 * x) + np.logaddexp2(x * x, x)


def e_logaddexp_equal(x):
    # x == y: NumPy's special case; the derivative must be the smooth one (1/2, 1/2)
    return np.logaddexp(x, x) + np.logaddexp2(2.0 * x, x + x)


def e_modulo(x):
    b = 0.1 * np.cos(x) + 2.0  # quotients in (2.48, 2.8): away from the jumps
    return (x + 5.0) % b + np.mod(x + 5.0, -b) + 0.25 % (x + 1.0) + np.fmod(-x - 5.0, b)


def e_rounding(x):
    return (
        np.floor(4.0 * x) * x
        + np.ceil(3.0 * x) * x
        + np.trunc(5.0 * x - 2.3) * x
        + np.rint(7.0 * x) * x
        + np.round(x, 1) * x
        + np.around(10.0 * x, -1) * x
        + np.sign(x - 0.1) * x
    )


def e_angles(x):
    return np.degrees(x) + np.radians(x) * np.deg2rad(x) + np.rad2deg(x) ** 2


def e_real(x):
    return np.real(x) * np.conjugate(x) + np.conj(x) + np.imag(x) + x.conj() * x.real


def e_sinc(x):
    return np.sinc(x - 0.5) + np.sinc(3.0 * x)


def e_nan_to_num(x):
    y = np.log(x - 0.5)  # NaN below 0.5
    return np.nan_to_num(y) + np.nan_to_num(1.0 / (x - x), posinf=2.0) * x


def e_sinc_at_zero(x):
    return np.sinc(x * 0.0) + np.sinc(x - x)


def e_math(x):
    a, b = x[0], x[1]
    return (
        math.exp(a)
        + math.log(b)
        + math.log(a, 3.0)
        + math.sqrt(a) * math.sin(b) * math.cos(a)
        + math.tan(a)
        + math.atan2(a, b)
        + math.hypot(a, b)
        + math.pow(a, b)
        + math.fabs(a - b)
        + math.log1p(a)
        + math.expm1(b)
        + math.tanh(a)
        + math.asin(a)
        + math.floor(5.0 * b)
        + math.pi * a
        + math.prod([a, b, 2.0])
    )


def e_builtins(x):
    a, b, c = x[0], x[1], x[2]
    return (
        max(a, b)
        + min(a, b)
        + max(a, b, c) * min([c, a])
        + max(x)
        + abs(a - b)
        + pow(a, 3)
        + sum([a, b, c])
        + sum(x)
        + round(a * 10.0) * a
    )


def e_scalars(x):
    return e_math(x) + e_builtins(x)


def e_values(x):
    """Every elementwise function of this surface at once, for the NaN/inf tests."""
    y = x[::-1]
    return np.stack(
        [
            np.logaddexp(x, y),
            np.logaddexp2(x, y),
            x % y,
            np.fmod(x, y),
            np.remainder(2.5, x),
            np.floor(x),
            np.ceil(x),
            np.trunc(x),
            np.rint(x),
            np.sign(x),
            np.degrees(x),
            np.sinc(x),
            np.nan_to_num(x, nan=-1.0, posinf=3.0, neginf=-3.0),
            np.nan_to_num(x),
        ]
    )


def e_round_decimals(x):
    return np.stack([np.round(x, 1), np.round(x, -1), np.around(x, 2), x.round(3)])


def e_max_nan(x):
    a, b = x[0], x[1]
    return np.stack([max(a, b), max(b, a), min(a, b), min(b, a)])


# ------------------------------------------------------------------- structural


def s_diff(x):
    return np.concatenate(
        [
            np.diff(x),
            np.diff(x * x, n=2),
            np.diff(x, prepend=0.5, append=x[0]),
            np.ediff1d(x, to_begin=[1.0, 2.0], to_end=x[:1]),
        ]
    )


def s_diff_matrix(x):
    return np.diff(x, axis=0).sum() + np.diff(x, n=2, axis=1, prepend=x[:, :1]).sum()


def s_average(x):
    w = np.array([0.5, 1.0, 2.0, 0.25])
    avg, total = np.average(x, axis=1, weights=w, returned=True)
    return np.average(x) + np.sum(avg * total) + np.average(x, axis=0, weights=x[:, 0])


def s_stack(x):
    v = x[0]
    return (
        np.column_stack([v, v * v, x[1]]) @ np.append(v[:2], [1.0])
        + np.append(x, x[:1], axis=0).sum(axis=0)[:3].sum()
    )


def s_trace(x):
    return (
        np.trace(x, offset=1)
        + np.trace(x, offset=-1) * 2.0
        + np.trace(x[:, :, None] * x[:, None, :], axis1=1, axis2=2).sum()
        + x.trace(offset=2)
    )


def s_gradient(x):
    gy, gx = np.gradient(x * x, 0.5, 2.0)
    return (
        gy.sum()
        + (gx**2).sum()
        + np.gradient(x, axis=1, edge_order=2)[1].sum()
        + (np.gradient(x[0] ** 3, 0.25, edge_order=2) ** 2).sum()
    )


def s_kron(x):
    return np.kron(x[:2, :2], x[1:, 2:]) + np.kron(x[0, :2], np.eye(2)).sum()


def s_select(x):
    return np.select([x < 0.4, x > 0.6], [x * x, np.sin(x)], default=1.0 - x)


def s_flips(x):
    return (
        np.flipud(x) * 2.0
        + np.fliplr(x)
        + np.rot90(x)[:3, :3].sum()
        + np.rot90(x, 2) * x
        + np.rot90(x, -1).T
        + np.rot90(x, 3, axes=(1, 0)).T
    )


def s_rollaxis(x):
    y = x.reshape(2, 3, 2)
    return (
        (np.rollaxis(y, 2).sum(axis=0) * np.rollaxis(y, 0, 3).sum(axis=-1).T).sum()
        + np.atleast_3d(x[0, 0]).sum()
        + np.atleast_2d(x[0]).sum()
        + np.atleast_1d(x[0, 1]) * np.atleast_3d(x).shape[-1]
    )


def s_linspace(x):
    a, b = x[0], x[1]
    y, step = np.linspace(a, b, 5, retstep=True)
    return np.concatenate(
        [y * step, np.linspace(a, b, 4, endpoint=False), np.linspace(0.0, b, 3)]
    )


def s_list_reductions(x):
    return (
        np.mean([x, x + 2.0])
        + np.sum([x[0], x[1] * x[2]])
        + np.max([x, 2.0 * x])
        + np.min([x[0], x[1]])
        + np.std([x, x * x])
        + np.sum(x < 0.5) * x[0]
        + (np.sum(x < 0.5) + 0.0)
        + np.mean(x > 0.3)
    )


def s_methods(x):
    m = x.reshape(2, 3)
    y = m.copy()
    y.fill(0.5)
    return (
        x.std()
        + x.var(ddof=1)
        + m.var(axis=0, ddof=1, keepdims=True).sum()
        + x.clip(0.3, 0.6).sum()
        + x.clip(min=0.4).sum()
        + m.dot(x[:3]).sum()
        + m.sum(axis=1, keepdims=True, dtype=float).sum()
        + m.mean(axis=0).prod()
        + m.max(axis=1).sum()
        + m.min()
        + m.cumsum(axis=1).sum()
        + x.cumprod()[-1]
        + x.round(1).sum() * x[0]
        + m.flatten()[-1]
        + x.take([0, 2, -1]).sum()
        + m.take([1], axis=1).sum()
        + x.repeat(2)[3]
        + np.where((x > 0.5).any(), x[0], x[1])
        + np.where((x > 0.1).all(), x[2], 0.0)
        + y.sum() * x[1]
        + x.conj()[0]
        + m.T.ravel()[1]
        + m.squeeze().swapaxes(0, 1)[0, 1]
    )


def s_linspace_values(x):
    return np.concatenate(
        [np.linspace(x[0], x[1], 5), np.linspace(x[0], x[1], 3, endpoint=False)]
    )


def s_views(x):
    y = x.copy()
    np.real(y)[0] = 5.0  # a view: the write shows in y, as in NumPy
    z = x * 1.0
    z.fill(2.0)
    w = x.copy()
    w[1:].fill(0.25)  # fill through a view writes into its base
    return y + z + w * x
