"""The checks shared by tests/frontend/test_surface_elementwise.py and test_surface_structural.py.

A NumPy function is checked at three levels:

- ``check_trace``: traced, its graph's value equals NumPy's bit for bit (NaN where
  NumPy has NaN, the sign of zeros included); the JVP matches central differences,
  the VJP is its transpose (<u, J v> = <J^T u, v>), and second order
  (forward-over-forward) matches differences of the JVP;
- ``check_module``: the generated module (both backends) against an oracle
  (JAX where it runs the function, else central differences), in both modes:
  jacobian, pushforward, pullback (and gradient and hvp for scalar outputs);
- ``check_values``: a generated module's value on NaN, inf and signed zeros equals
  NumPy's exactly.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import oracle
from conftest import SUPPORT
from difgen.ad import jvp, vjp
from difgen.frontend import trace

H = 1e-6


def normal(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape)


def same(actual: Any, expected: Any) -> None:
    """Equal as NumPy computes them: same shape, NaN where NaN, same sign of zero."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_array_equal(actual, expected)
    assert np.array_equal(np.signbit(actual), np.signbit(expected)), (actual, expected)


def close(actual: Any, expected: Any, rtol: float = 1e-6, atol: float = 1e-8) -> None:
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol, atol)


def central(fn: Callable[..., Any], x: np.ndarray, dx: np.ndarray) -> np.ndarray:
    return (np.asarray(fn(x + H * dx)) - np.asarray(fn(x - H * dx))) / (2 * H)


def inner(a: Any, b: Any) -> float:
    return float(np.sum(np.asarray(a) * np.asarray(b)))


def check_trace(fn: Callable[..., Any], x: np.ndarray, second: bool = True) -> None:
    """Value exactly NumPy's; first order both modes; second order by differences."""
    x = np.asarray(x, dtype=float)
    g = trace(fn, [(x.shape, "float64")])
    same(g.evaluate(x)[0], np.asarray(fn(x), dtype=float))
    v = normal(x.shape, 1)
    u = normal(g.outputs[0].shape, 2)
    _, jv = jvp(g).evaluate(x, v)
    close(jv, central(fn, x, v), rtol=1e-5, atol=1e-7)
    jtu = vjp(g).evaluate(x, u)[1]
    assert np.isclose(inner(u, jv), inner(jtu, v), rtol=1e-10, atol=1e-11)
    if second:
        first = jvp(g)
        w = normal(x.shape, 3)
        d2 = jvp(first, (True, False)).evaluate(x, v, w)[-1]
        close(d2, central(lambda z: first.evaluate(z, v)[1], x, w), 1e-4, 1e-6)


def under_jax(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its global ``np`` bound to ``jax.numpy`` (float64 enabled)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    globals_ = dict(fn.__globals__)
    globals_["np"] = jnp
    return types.FunctionType(fn.__code__, globals_, fn.__name__, fn.__defaults__)


def jax_jacobian(fn: Callable[..., Any], x: np.ndarray) -> np.ndarray:
    import jax

    return np.asarray(jax.jacfwd(under_jax(fn))(np.asarray(x, float)))


def jax_hessian(fn: Callable[..., Any], x: np.ndarray) -> np.ndarray:
    import jax

    return np.asarray(jax.hessian(under_jax(fn))(np.asarray(x, float)))


BACKENDS = [("sympy", "auto"), ("trace", "forward"), ("trace", "reverse")]


def check_module(
    module_cache: Any,
    source: str,
    fn: Callable[..., Any],
    x: np.ndarray,
    backend: str,
    mode: str,
    use_jax: bool = True,
    exact_value: bool = True,
    **options: Any,
) -> None:
    """The generated operators against the oracle, on one backend and mode.

    ``exact_value=False`` compares ``f`` to 4 ulp instead of bit for bit: scalar
    code lets cse turn divisions by one constant into products by its reciprocal
    (a defect of scalar emission, reported, that this surface does not cause)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(fn(x))
    ops = ["jacobian", "pushforward", "pullback"]
    if y.shape == ():
        ops += ["gradient", "hvp"]
    mod, _ = module_cache(
        SUPPORT / source,
        fn.__name__,
        x.shape,
        ops,
        backend=backend,
        mode=mode,
        **options,
    )
    J = jax_jacobian(fn, x) if use_jax else oracle.central_jacobian(fn, x)
    rtol = 1e-9 if use_jax else 1e-6
    if exact_value:
        same(mod.f(x), y)
    else:
        close(mod.f(x), y, rtol=1e-15, atol=0.0)
    close(mod.jacobian(x), J, rtol=rtol, atol=rtol)
    flat = J.reshape(y.size, x.size)
    v, u = normal(x.shape, 4), normal(y.shape, 5)
    close(mod.pushforward(x, v), (flat @ v.ravel()).reshape(y.shape), rtol, rtol)
    close(mod.pullback(x, u), (u.ravel() @ flat).reshape(x.shape), rtol, rtol)
    if y.shape == ():
        close(mod.gradient(x), J, rtol=rtol, atol=rtol)
        if use_jax:
            Hv = jax_hessian(fn, x).reshape(x.size, x.size) @ v.ravel()
            close(mod.hvp(x, v), Hv.reshape(x.shape), 1e-8, 1e-8)
        else:  # the gradient is checked above: differences of it are the oracle
            close(mod.hvp(x, v), central(mod.gradient, x, v), 1e-5, 1e-7)


def check_values(
    module_cache: Any,
    source: str,
    fn: Callable[..., Any],
    points: Sequence[np.ndarray],
    backend: str,
    **options: Any,
) -> None:
    """The generated module's value equals NumPy's exactly at every point."""
    shape = np.shape(points[0])
    mod, _ = module_cache(
        SUPPORT / source, fn.__name__, shape, ["pullback"], backend=backend, **options
    )
    with np.errstate(all="ignore"):
        for x in points:
            same(mod.f(np.asarray(x, float)), np.asarray(fn(np.asarray(x, float))))
