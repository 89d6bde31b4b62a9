"""Functions with user VJPs (``difgen.custom_vjp`` and autograd's ``difgen.defvjp``
spelling), for tests/derive/test_custom_vjp.py: each traced by difgen and, written
again with ``jax.custom_vjp``, the oracle (``jax_twins`` builds the twins)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import difgen
from custom_rules_functions import _digamma, _stirling


# ------------------------------------------ softplus, residual: the value
@difgen.custom_vjp
def logexp(x):
    return np.log1p(np.exp(x))


def logexp_fwd(x):
    y = logexp(x)
    return y, (y,)


def logexp_bwd(residuals, g):
    (y,) = residuals
    return (g * (1.0 - np.exp(-y)),)


logexp.defvjp(logexp_fwd, logexp_bwd)


def softplus_sum(x):
    return np.sum(logexp(x) * x)


def softplus_matrix(x):
    # a (2, 3) input, a (3, 2) output
    return logexp(x).T @ x + logexp(x[0])


# ----------------------- a reduction, residuals in a dict, value in fwd
@difgen.custom_vjp
def safe_norm(x):
    return np.sqrt(np.sum(x * x))


def safe_norm_fwd(x):
    y = np.sqrt(np.sum(x * x))
    return y, {"x": x, "y": y}


def safe_norm_bwd(residuals, g):
    return (g * residuals["x"] / residuals["y"],)


safe_norm.defvjp(safe_norm_fwd, safe_norm_bwd)


def norm_of_sines(x):
    return safe_norm(np.sin(x)) * x


# --------------------------------- two arguments, a cotangent left None
@difgen.custom_vjp
def scaled_sin(a, b):
    return a * np.sin(b)


def scaled_sin_fwd(a, b):
    return a * np.sin(b), (a, b)


def scaled_sin_bwd(residuals, g):
    a, b = residuals
    return g * np.sin(b), np.sum(g * a * np.cos(b), axis=0)


scaled_sin.defvjp(scaled_sin_fwd, scaled_sin_bwd)


@difgen.custom_vjp
def half_constant(a, b):
    # b's derivative is zero (a step function): declared None
    return a * np.floor(b)


def half_constant_fwd(a, b):
    step = np.floor(b)
    return a * step, step


def half_constant_bwd(step, g):
    return g * step, None


half_constant.defvjp(half_constant_fwd, half_constant_bwd)


def two_arguments(x):
    # scaled_sin(a: (3, 4), b: (4,)) -> (3, 4)
    a = np.outer(x[:3], x[3:] + 1.0)
    return np.sum(scaled_sin(a, x[3:] * 2.0) ** 2, axis=1) + half_constant(x, 3.5)[:3]


# ------------------------------ autograd's spelling: difgen.defvjp(f, ...)
@difgen.custom_vjp
def logsumexp(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


difgen.defvjp(logsumexp, lambda ans, x: lambda g: g * np.exp(x - ans))


@difgen.custom_vjp
def weighted(w, x):
    return np.sum(w * x * x)


difgen.defvjp(
    weighted,
    lambda ans, w, x: lambda g: g * x * x,
    lambda ans, w, x: lambda g: 2.0 * g * w * x,
)


def autograd_spelling(x):
    return logsumexp(x * x) + weighted(np.cos(x), x)


# ------------- backward passes through solve, slices, joins and matmul
A3 = np.array([[2.0, 0.3, 0.1], [0.2, 1.5, 0.4], [0.1, 0.2, 1.8]])


@difgen.custom_vjp
def solved(b):
    return np.linalg.solve(A3, b)


solved.defvjp(
    lambda b: (np.linalg.solve(A3, b), None),
    lambda residuals, g: (np.linalg.solve(A3.T, g),),
)


@difgen.custom_vjp
def rotated(x):
    return np.concatenate([x[1:], x[:1] * 2.0]) @ np.ones((3, 2))


def rotated_bwd(residuals, g):
    s = np.ones((3, 2)) @ g
    return (np.concatenate([s[2:] * 2.0, s[:2]]),)


rotated.defvjp(lambda x: (rotated(x), None), rotated_bwd)


def linear_passes(x):
    return np.sum(np.sin(solved(x * x))) + np.sum(rotated(x) ** 3)


# -------------------------------- a function difgen cannot trace: lgamma
@difgen.custom_vjp
def lgamma(x):
    flat = np.asarray(x, dtype=float).ravel()
    return np.array([math.lgamma(float(v)) for v in flat]).reshape(np.shape(x))


def lgamma_fwd(x):
    return _stirling(x), x


def lgamma_bwd(x, g):
    return (g * _digamma(x),)


lgamma.defvjp(lgamma_fwd, lgamma_bwd)

COUNTS = np.array([1.0, 3.0, 0.0, 2.0])


def poisson_nll(x):
    rate = np.exp(x) + 0.5
    return np.sum(rate - COUNTS * np.log(rate) + lgamma(COUNTS + rate))


# ------------------------------------------------------ inside a while loop
def in_while_loop(x):
    y = x
    k = 0.0
    while np.sum(y * y) < 4.0 and k < 20.0:
        y = y + 0.25 * logexp(y)
        k = k + 1.0
    return np.sum(logexp(y))


# ---------------------------------------------------------- wrong rules
@difgen.custom_vjp
def wrong_sin(x):
    return np.sin(x)


def wrong_sin_fwd(x):
    return np.sin(x), x


def wrong_sin_bwd(x, g):
    return (-g * np.cos(x),)  # the sign is wrong


wrong_sin.defvjp(wrong_sin_fwd, wrong_sin_bwd)


def uses_wrong_vjp(x):
    return np.sum(wrong_sin(x))


@difgen.custom_vjp
def square(x):
    return x * x


def square_fwd(x):
    return x * x, x


def square_bwd(x, g):
    return (2.0 * x * g * g,)  # quadratic in the cotangent


square.defvjp(square_fwd, square_bwd)


def uses_nonlinear_vjp(x):
    return np.sum(square(x))


@difgen.custom_vjp
def shifted(x):
    return 2.0 * x


def shifted_fwd(x):
    return 2.0 * x, None


def shifted_bwd(residuals, g):
    return (2.0 * g + 1.0,)  # affine in the cotangent


shifted.defvjp(shifted_fwd, shifted_bwd)


def uses_affine_vjp(x):
    return np.sum(shifted(x))


@difgen.custom_vjp
def no_vjp(x):
    return np.sin(x)


def uses_no_vjp(x):
    return np.sum(no_vjp(x))


def jax_twins() -> dict[str, Any]:
    """The functions above under JAX, each custom function a ``jax.custom_vjp``
    with the same passes (the oracle), by name."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)

    @jax.custom_vjp
    def j_logexp(x):
        return jnp.log1p(jnp.exp(x))

    def _lf(x):
        y = j_logexp(x)
        return y, (y,)

    j_logexp.defvjp(_lf, lambda r, g: (g * (1.0 - jnp.exp(-r[0])),))

    @jax.custom_vjp
    def j_safe_norm(x):
        return jnp.sqrt(jnp.sum(x * x))

    def _nf(x):
        y = jnp.sqrt(jnp.sum(x * x))
        return y, {"x": x, "y": y}

    j_safe_norm.defvjp(_nf, lambda r, g: (g * r["x"] / r["y"],))

    @jax.custom_vjp
    def j_scaled_sin(a, b):
        return a * jnp.sin(b)

    j_scaled_sin.defvjp(
        lambda a, b: (a * jnp.sin(b), (a, b)),
        lambda r, g: (g * jnp.sin(r[1]), jnp.sum(g * r[0] * jnp.cos(r[1]), axis=0)),
    )

    @jax.custom_vjp
    def j_half_constant(a, b):
        return a * jnp.floor(b)

    j_half_constant.defvjp(
        lambda a, b: (a * jnp.floor(b), jnp.floor(b)),
        lambda s, g: (g * s, jnp.zeros_like(s)),
    )

    @jax.custom_vjp
    def j_logsumexp(x):
        m = jnp.max(x)
        return m + jnp.log(jnp.sum(jnp.exp(x - m)))

    def _sf(x):
        ans = j_logsumexp(x)
        return ans, (ans, x)

    j_logsumexp.defvjp(_sf, lambda r, g: (g * jnp.exp(r[1] - r[0]),))

    @jax.custom_vjp
    def j_weighted(w, x):
        return jnp.sum(w * x * x)

    j_weighted.defvjp(
        lambda w, x: (j_weighted(w, x), (w, x)),
        lambda r, g: (g * r[1] * r[1], 2.0 * g * r[0] * r[1]),
    )

    @jax.custom_vjp
    def j_lgamma(x):
        return _stirling(x, jnp)

    j_lgamma.defvjp(
        lambda x: (_stirling(x, jnp), x), lambda x, g: (g * _digamma(x, jnp),)
    )

    @jax.custom_vjp
    def j_solved(b):
        return jnp.linalg.solve(A3, b)

    j_solved.defvjp(
        lambda b: (jnp.linalg.solve(A3, b), None),
        lambda r, g: (jnp.linalg.solve(A3.T, g),),
    )

    @jax.custom_vjp
    def j_rotated(x):
        return jnp.concatenate([x[1:], x[:1] * 2.0]) @ jnp.ones((3, 2))

    def _rb(r, g):
        s = jnp.ones((3, 2)) @ g
        return (jnp.concatenate([s[2:] * 2.0, s[:2]]),)

    j_rotated.defvjp(lambda x: (j_rotated(x), None), _rb)

    return {
        "linear_passes": lambda x: jnp.sum(jnp.sin(j_solved(x * x)))
        + jnp.sum(j_rotated(x) ** 3),
        "softplus_sum": lambda x: jnp.sum(j_logexp(x) * x),
        "softplus_matrix": lambda x: j_logexp(x).T @ x + j_logexp(x[0]),
        "norm_of_sines": lambda x: j_safe_norm(jnp.sin(x)) * x,
        "two_arguments": lambda x: jnp.sum(
            j_scaled_sin(jnp.outer(x[:3], x[3:] + 1.0), x[3:] * 2.0) ** 2, axis=1
        )
        + j_half_constant(x, 3.5)[:3],
        "autograd_spelling": lambda x: j_logsumexp(x * x) + j_weighted(jnp.cos(x), x),
        "poisson_nll": lambda x: jnp.sum(
            (jnp.exp(x) + 0.5)
            - COUNTS * jnp.log(jnp.exp(x) + 0.5)
            + j_lgamma(COUNTS + jnp.exp(x) + 0.5)
        ),
    }
