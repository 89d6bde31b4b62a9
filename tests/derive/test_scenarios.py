"""The operator matrix: every operator x scenario x backend x mode against autograd.

Scenarios (tests/support/scenarios.py): scalar->scalar, scalar->vector, scalar->matrix,
vector->scalar, vector->vector, matrix->scalar, matrix->matrix, with contexts, and
batched tangents. Each generated module is built once per session.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest

import oracle
import scenarios
from conftest import SUPPORT
from scenario_cases import operators_for, output_shape, point

BACKENDS = [("sympy", "auto"), ("trace", "forward"), ("trace", "reverse")]


CASES = [
    (name, backend, mode) for name in scenarios.SCENARIOS for backend, mode in BACKENDS
]


def _build(
    module_cache: Any, name: str, backend: str, mode: str, batch: int = 1
) -> ModuleType:
    xs, ctx_shapes = scenarios.SCENARIOS[name]
    options: dict[str, Any] = {"backend": backend, "mode": mode}
    if batch > 1:
        options["batch"] = batch
    module, _ = module_cache(
        SUPPORT / "scenarios.py", name, xs, operators_for(name), ctx_shapes, **options
    )
    return module


def _close(actual: Any, expected: Any) -> None:
    np.testing.assert_allclose(
        np.asarray(actual, float), np.asarray(expected, float), rtol=1e-9, atol=1e-11
    )


def _check_float(value: Any, shape: tuple[int, ...]) -> None:
    """Scalars are Python floats; arrays have the promised shape."""
    if shape == ():
        assert isinstance(value, float), type(value)
    else:
        assert isinstance(value, np.ndarray) and value.shape == shape, np.shape(value)


@pytest.mark.parametrize("name,backend,mode", CASES)
def test_operators_match_oracle(
    module_cache: Any, name: str, backend: str, mode: str
) -> None:
    mod = _build(module_cache, name, backend, mode)
    fn = getattr(scenarios, name)
    x, ctx = point(name, 1)
    rng = np.random.default_rng(2)
    y = np.asarray(fn(x, *ctx))
    xs, ys = np.shape(x), y.shape
    J = oracle.jacobian(fn, x, *ctx)
    dx, dy = rng.normal(size=xs), rng.normal(size=ys)
    dx = float(dx) if xs == () else dx
    dy = float(dy) if ys == () else dy
    ops = operators_for(name)

    _check_float(mod.f(x, *ctx), ys)
    _close(mod.f(x, *ctx), y)
    expected = {
        "pushforward": np.tensordot(J, dx, axes=len(xs)),
        "pullback": np.tensordot(dy, J, axes=len(ys)),
        "jacobian": J,
    }
    if xs == ():
        expected["derivative"] = J
        expected["second_derivative"] = oracle.hessian(fn, x, *ctx)
    if ys == ():
        H = oracle.hessian(fn, x, *ctx)
        v = rng.normal(size=xs)
        expected.update(gradient=J, hessian=H, hvp=np.tensordot(H, v, axes=len(xs)))

    args = {"pushforward": (dx,), "pullback": (dy,), "hvp": (v,) if ys == () else ()}
    for op in ops:
        base = op.removeprefix("value_and_")
        if op == "value_derivative_and_second_derivative":
            value, d1, d2 = mod.value_derivative_and_second_derivative(x, *ctx)
            _close(value, y), _close(d1, expected["derivative"])
            _close(d2, expected["second_derivative"])
            continue
        if op == "value_gradient_and_hessian":
            value, g, h = mod.value_gradient_and_hessian(x, *ctx)
            _close(value, y), _close(g, expected["gradient"]), _close(
                h, expected["hessian"]
            )
            _check_float(value, ())
            continue
        result = getattr(mod, op)(x, *args.get(base, ()), *ctx)
        if op.startswith("value_and_"):
            value, result = result
            _close(value, y)
            _check_float(value, ys)
        _check_float(result, np.shape(expected[base]))
        _close(result, expected[base])


@pytest.mark.parametrize(
    "name,backend,mode", [c for c in CASES if c[0] != "scalar_scalar"]
)
def test_out_argument(module_cache: Any, name: str, backend: str, mode: str) -> None:
    """``out=`` writes into the given array and returns that same object."""
    mod = _build(module_cache, name, backend, mode)
    x, ctx = point(name, 3)
    for op in ("jacobian", "gradient", "hessian", "derivative", "second_derivative"):
        if not hasattr(mod, op):
            continue
        fresh = getattr(mod, op)(x, *ctx)
        if np.ndim(fresh) == 0:
            continue
        buffer = np.full(np.shape(fresh), np.nan)
        assert getattr(mod, op)(x, *ctx, out=buffer) is buffer
        _close(buffer, fresh)


BATCHED = ["scalar_vector", "vector_scalar", "matrix_matrix", "vector_vector_ctx"]


@pytest.mark.parametrize("name,backend,mode", [c for c in CASES if c[0] in BATCHED])
def test_batched_tangents(
    module_cache: Any, name: str, backend: str, mode: str
) -> None:
    """With batch = k, dx is (k, *x.shape) and dy (k, *y.shape)."""
    k = 3
    mod = _build(module_cache, name, backend, mode, batch=k)
    fn = getattr(scenarios, name)
    x, ctx = point(name, 4)
    J = oracle.jacobian(fn, x, *ctx)
    xs, ys = np.shape(x), np.shape(fn(x, *ctx))
    rng = np.random.default_rng(5)
    dx, dy = rng.normal(size=(k, *xs)), rng.normal(size=(k, *ys))
    jvp = mod.pushforward(x, dx, *ctx)
    vjp = mod.pullback(x, dy, *ctx)
    assert jvp.shape == (k, *ys) and vjp.shape == (k, *xs)
    for b in range(k):
        _close(jvp[b], np.tensordot(J, dx[b], axes=len(xs)))
        _close(vjp[b], np.tensordot(dy[b], J, axes=len(ys)))
    _, jvp2 = mod.value_and_pushforward(x, dx, *ctx)
    _close(jvp2, jvp)


SPARSE = ["vector_scalar", "vector_vector", "matrix_matrix", "vector_vector_ctx"]


@pytest.mark.parametrize("name,backend,mode", [c for c in CASES if c[0] in SPARSE])
def test_sparse_jacobian_and_hessian(
    module_cache: Any, name: str, backend: str, mode: str
) -> None:
    """sparse = true: CSR arrays of shape (y.size, x.size) / (x.size, x.size)."""
    import scipy.sparse

    xs, ctx_shapes = scenarios.SCENARIOS[name]
    scalar_out = output_shape(name) == ()
    ops = ["jacobian", "value_and_jacobian"]
    ops += ["hessian", "value_gradient_and_hessian"] if scalar_out else []
    mod, _ = module_cache(
        SUPPORT / "scenarios.py",
        name,
        xs,
        ops,
        ctx_shapes,
        backend=backend,
        mode=mode,
        sparse=True,
    )
    fn = getattr(scenarios, name)
    x, ctx = point(name, 6)
    J = oracle.jacobian(fn, x, *ctx)
    jac = mod.jacobian(x, *ctx)
    assert scipy.sparse.issparse(jac) and jac.format == "csr"
    _close(jac.toarray(), J.reshape(-1, np.size(x)))
    value, jac2 = mod.value_and_jacobian(x, *ctx)
    _close(value, fn(x, *ctx)), _close(jac2.toarray(), jac.toarray())
    if scalar_out:
        H = oracle.hessian(fn, x, *ctx).reshape(np.size(x), np.size(x))
        _close(mod.hessian(x, *ctx).toarray(), H)
        _, _, hess = mod.value_gradient_and_hessian(x, *ctx)
        assert scipy.sparse.issparse(hess)
        _close(hess.toarray(), H)
