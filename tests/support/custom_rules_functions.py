"""Functions with user derivative rules (``difgen.custom_jvp``), for
tests/derive/test_custom_rules.py: each traced by difgen and, written again with
``jax.custom_jvp``, the oracle (``JAX_TWINS`` builds the twins)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import difgen


# ------------------------------------------------------------- softplus
@difgen.custom_jvp
def logexp(x):
    return np.log1p(np.exp(x))


@logexp.defjvp
def logexp_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    y = logexp(x)
    return y, dx * (1 - np.exp(-y))


def softplus_sum(x):
    return np.sum(logexp(x) * x)


def softplus_scalar(x):
    return logexp(x) * np.sin(x)


def softplus_matrix(x):
    # a (2, 3) input, a (3, 2) output
    return logexp(x).T @ x + logexp(x[0])


# ------------------------------------------- a rule giving the value too
@difgen.custom_jvp
def safe_norm(x):
    return np.sqrt(np.sum(x * x))


@safe_norm.defjvp
def safe_norm_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    y = np.sqrt(np.sum(x * x))
    return y, np.sum(x * dx) / y


def norm_of_sines(x):
    return safe_norm(np.sin(x)) * x


# --------------------------------- a function difgen cannot trace: lgamma
@difgen.custom_jvp
def lgamma(x):
    # math.lgamma element by element: a Python float loop difgen cannot trace
    flat = np.asarray(x, dtype=float).ravel()
    return np.array([math.lgamma(float(v)) for v in flat]).reshape(np.shape(x))


def _stirling(x, xp=None):
    # lgamma(x) = lgamma(x + 6) - log(x (x+1) ... (x+5)); Stirling's series at x + 6
    xp = np if xp is None else xp  # JAX's twin passes jax.numpy
    z = x + 6.0
    series = 1.0 / (12.0 * z) - 1.0 / (360.0 * z**3) + 1.0 / (1260.0 * z**5)
    shift = xp.log(x * (x + 1) * (x + 2) * (x + 3) * (x + 4) * (x + 5))
    return (z - 0.5) * xp.log(z) - z + 0.5 * xp.log(2 * xp.pi) + series - shift


def _digamma(x, xp=None):
    xp = np if xp is None else xp
    z = x + 6.0
    series = xp.log(z) - 1.0 / (2 * z) - 1.0 / (12 * z**2) + 1.0 / (120 * z**4)
    return series - sum(1.0 / (x + k) for k in range(6))


@lgamma.defjvp
def lgamma_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return _stirling(x), _digamma(x) * dx


def poisson_nll(x):
    # positive rates from x in [-1, 1]
    rate = np.exp(x) + 0.5
    counts = np.array([1.0, 3.0, 0.0, 2.0])
    return np.sum(rate - counts * np.log(rate) + lgamma(counts + rate))


# -------------------------------------------------------- a wrong rule
@difgen.custom_jvp
def wrong_sin(x):
    return np.sin(x)


@wrong_sin.defjvp
def wrong_sin_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return np.sin(x), -np.cos(x) * dx  # the sign is wrong


def uses_wrong_rule(x):
    return np.sum(wrong_sin(x))


# ----------------------------------------------- a rule that is not linear
@difgen.custom_jvp
def square(x):
    return x * x


@square.defjvp
def square_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return x * x, 2.0 * x * dx + dx * dx


def uses_nonlinear_rule(x):
    return np.sum(square(x))


@difgen.custom_jvp
def shifted(x):
    return 2.0 * x


@shifted.defjvp
def shifted_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return 2.0 * x, 2.0 * dx + 1.0  # affine, not linear


def uses_affine_rule(x):
    return np.sum(shifted(x))


# ------------------------------------------------------ nested functions
@difgen.custom_jvp
def outer(x):
    return logexp(x) ** 2


@outer.defjvp
def outer_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    s = logexp(x)  # a custom function inside the rule: its own rule applies
    return s**2, 2.0 * s * (1 - np.exp(-s)) * dx


def nested(x):
    return np.sum(outer(x * 0.5) * np.cos(x))


# --------------------------------------------------- two arguments
@difgen.custom_jvp
def scaled_exp(a, b):
    return np.exp(a) * b


@scaled_exp.defjvp
def scaled_exp_jvp(primals, tangents):
    (a, b), (da, db) = primals, tangents
    y = scaled_exp(a, b)
    return y, y * da + np.exp(a) * db


def two_arguments(x):
    return scaled_exp(x[:2], x[2:] ** 2)


# -------------------------------------------------------- in a while loop
def in_while_loop(x):
    y = x * 1.5
    while np.sum(y * y) > 0.5:
        y = 0.5 * logexp(y) - 0.2
    return np.sum(y * x)


# ------------------------------------------------------------- the twins
def jax_twins() -> dict[str, Any]:
    """The functions above under JAX, each custom function a ``jax.custom_jvp``
    with the same rule (the oracle), by name."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)

    @jax.custom_jvp
    def j_logexp(x):
        return jnp.log1p(jnp.exp(x))

    @j_logexp.defjvp
    def _(primals, tangents):
        (x,), (dx,) = primals, tangents
        y = j_logexp(x)
        return y, dx * (1 - jnp.exp(-y))

    @jax.custom_jvp
    def j_safe_norm(x):
        return jnp.sqrt(jnp.sum(x * x))

    @j_safe_norm.defjvp
    def _(primals, tangents):
        (x,), (dx,) = primals, tangents
        y = jnp.sqrt(jnp.sum(x * x))
        return y, jnp.sum(x * dx) / y

    @jax.custom_jvp
    def j_outer(x):
        return j_logexp(x) ** 2

    @j_outer.defjvp
    def _(primals, tangents):
        (x,), (dx,) = primals, tangents
        s = j_logexp(x)
        return s**2, 2.0 * s * (1 - jnp.exp(-s)) * dx

    @jax.custom_jvp
    def j_scaled_exp(a, b):
        return jnp.exp(a) * b

    @j_scaled_exp.defjvp
    def _(primals, tangents):
        (a, b), (da, db) = primals, tangents
        y = j_scaled_exp(a, b)
        return y, y * da + jnp.exp(a) * db

    def j_in_while_loop(x):
        y = x * 1.5

        def cond(y):
            return jnp.sum(y * y) > 0.5

        def body(y):
            return 0.5 * j_logexp(y) - 0.2

        return jnp.sum(jax.lax.while_loop(cond, body, y) * x)

    @jax.custom_jvp
    def j_lgamma(x):
        return _stirling(x, jnp)  # the value difgen's module computes: the rule's

    @j_lgamma.defjvp
    def _(primals, tangents):
        (x,), (dx,) = primals, tangents
        return _stirling(x, jnp), _digamma(x, jnp) * dx

    def j_poisson(x):
        rate = jnp.exp(x) + 0.5
        counts = jnp.array([1.0, 3.0, 0.0, 2.0])
        return jnp.sum(rate - counts * jnp.log(rate) + j_lgamma(counts + rate))

    return {
        "softplus_sum": lambda x: jnp.sum(j_logexp(x) * x),
        "softplus_scalar": lambda x: j_logexp(x) * jnp.sin(x),
        "softplus_matrix": lambda x: j_logexp(x).T @ x + j_logexp(x[0]),
        "norm_of_sines": lambda x: j_safe_norm(jnp.sin(x)) * x,
        "poisson_nll": j_poisson,
        "nested": lambda x: jnp.sum(j_outer(x * 0.5) * jnp.cos(x)),
        "two_arguments": lambda x: j_scaled_exp(x[:2], x[2:] ** 2),
        "in_while_loop": j_in_while_loop,
    }


# ------------------------------------------------- branches on traced values
@difgen.custom_jvp
def ramp(x):
    # a branch on a traced value inside the custom function: rewritten as a cond
    if np.sum(x) > 0.0:
        return x * x
    return -x


@ramp.defjvp
def ramp_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    if np.sum(x) > 0.0:
        return x * x, 2.0 * x * dx
    return -x, -dx


def in_branch(x):
    # the call inside a branch on a traced value, and a branch inside the call
    if x[0] > 0.0:
        return np.sum(ramp(x) * np.cos(x))
    return np.sum(logexp(x))


# ------------------- a rule that calls a function difgen cannot trace
@difgen.custom_jvp
def opaque(x):
    return np.array([math.exp(float(v)) for v in np.ravel(x)])


@opaque.defjvp
def opaque_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    y = opaque(x)  # fine in JAX, where the function is traced; not here
    return y, y * dx


def uses_opaque(x):
    return np.sum(opaque(x))


def wrong_rule_in_loop(x):
    # the wrong rule is called inside a loop on a traced condition only
    y = x * 2.0
    while np.sum(y * y) > 0.1:
        y = 0.5 * wrong_sin(y)
    return np.sum(y)
