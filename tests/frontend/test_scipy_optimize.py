"""``scipy.optimize``'s ``bisect``, ``root_scalar`` and ``root`` in traced functions
(issue 22, item 6): loops in the generated module, differentiated by the implicit
function theorem with respect to what reaches them through ``args=`` and by
closure. Oracles: SciPy's own converged solution (the functions run natively),
Kepler's analytic derivatives, the fixed point's ``(I - D W)^-1``, and central
differences of SciPy's solution and of the module's gradient (second order).
Non-convergence: where SciPy raises ``RuntimeError`` or reports no success, the
module's root is NaN, and so is its derivative.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.optimize

import difgen
import optimize_cases as cases
from conftest import (
    SUPPORT,
    build_and_import,
    import_file,
    operators_source,
    write_config,
)
from difgen import api
from difgen.errors import TraceError

SOURCE = SUPPORT / "optimize_cases.py"
B3 = np.array([0.3, -0.2, 0.5])
H = 1e-6


def _build(
    tmp_path: Path, function: str, shape: Any, operators: list[str], **options: Any
) -> Any:
    options.setdefault("backend", "trace")
    cfg = write_config(tmp_path, SOURCE, function, shape, operators, **options)
    module, _ = build_and_import(cfg)
    return module


def _central(fn: Any, x: np.ndarray, dx: np.ndarray, h: float = H) -> np.ndarray:
    return (np.asarray(fn(x + h * dx)) - np.asarray(fn(x - h * dx))) / (2 * h)


def _kepler(M: float) -> float:
    return float(scipy.optimize.brentq(cases.kepler_residual, -10.0, 20.0, (M,), 1e-15))


SCALAR = [
    "kepler_bisect",
    "kepler_root_scalar_bracket",
    "kepler_root_scalar_bisect",
    "kepler_root_scalar_newton",
    "kepler_root_scalar_secant",
    "kepler_root",
]


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("function", SCALAR)
def test_scalar_roots_have_the_implicit_derivative(
    tmp_path: Path, function: str, mode: str
) -> None:
    ops = ["derivative", "second_derivative", "value_and_derivative"]
    mod = _build(tmp_path, function, [], ops, mode=mode)
    assert "scipy" not in operators_source(mod)  # the loop is emitted
    for M in (0.2, 2.0, 5.5):
        root = _kepler(M)
        value, d = mod.value_and_derivative(M)
        # SciPy's result, to its tolerance (bisect: the same steps, exactly)
        np.testing.assert_allclose(value, getattr(cases, function)(M), rtol=1e-11)
        np.testing.assert_allclose(value, root, rtol=1e-11)
        w = 1.0 / (1.0 - cases.E * np.cos(value))
        np.testing.assert_allclose(d, w, rtol=1e-12)
        np.testing.assert_allclose(mod.derivative(M), w, rtol=1e-12)
        np.testing.assert_allclose(
            mod.second_derivative(M),
            -cases.E * np.sin(value) * w**3,
            rtol=1e-9,
            atol=1e-12,
        )
    if function == "kepler_bisect":
        assert mod.f(2.0) == cases.kepler_bisect(2.0)


def test_bisection_gradient_hessian_and_hvp(tmp_path: Path) -> None:
    ops = ["gradient", "hessian", "hvp"]
    mod = _build(tmp_path, "kepler_energy_bisect", [4], ops)
    M = np.array([0.1, 1.0, 2.5, 4.0])
    En = np.array([_kepler(m) for m in M])
    w = 1.0 / (1.0 - cases.E * np.cos(En))
    d1, d2 = 2.0 * En - np.sin(En), 2.0 - np.cos(En)
    grad = d1 * w
    hess = np.diag(d2 * w**2 + d1 * (-cases.E * np.sin(En) * w**3))
    np.testing.assert_allclose(mod.gradient(M), grad, rtol=1e-10)
    np.testing.assert_allclose(mod.hessian(M), hess, rtol=1e-8, atol=1e-10)
    v = np.array([0.5, -1.0, 2.0, 0.3])
    np.testing.assert_allclose(mod.hvp(M, v), hess @ v, rtol=1e-8, atol=1e-10)
    # bisection stops within xtol = 2e-12 of the root: a larger step for its noise
    fd = np.stack([_central(mod.gradient, M, r, 1e-4) for r in np.eye(4)])
    np.testing.assert_allclose(mod.hessian(M), fd, rtol=1e-6, atol=1e-7)


def _fixed_point_jacobian(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = scipy.optimize.root(cases.tanh_system, np.zeros(3), args=(b,), tol=1e-14).x
    D = np.diag(1.0 - np.tanh(cases.W @ x) ** 2)
    return x, np.linalg.inv(np.eye(3) - D @ cases.W)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize(
    "function", ["root_vector", "root_vector_jac", "root_vector_jac_true"]
)
def test_a_vector_root_solves_the_implicit_system(
    tmp_path: Path, function: str, mode: str
) -> None:
    ops = ["jacobian", "pushforward", "pullback"]
    mod = _build(tmp_path, function, [3], ops, mode=mode)
    x, expected = _fixed_point_jacobian(B3)
    np.testing.assert_allclose(mod.f(B3), x, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(mod.f(B3), getattr(cases, function)(B3), rtol=1e-9)
    np.testing.assert_allclose(mod.jacobian(B3), expected, rtol=1e-12, atol=1e-13)
    fd = np.stack([_central(cases.root_vector, B3, r) for r in np.eye(3)]).T
    np.testing.assert_allclose(mod.jacobian(B3), fd, rtol=1e-6, atol=1e-8)
    u = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(mod.pushforward(B3, u), expected @ u, 1e-12, 1e-13)
    np.testing.assert_allclose(mod.pullback(B3, u), expected.T @ u, 1e-12, 1e-13)
    assert "np.linalg.solve(" in operators_source(mod)


def test_second_order_through_a_vector_root(tmp_path: Path) -> None:
    """The hessian and hvp of a function of the root: against central differences
    of the module's gradient, which is checked against differences of SciPy's."""
    ops = ["gradient", "hessian", "hvp"]
    mod = _build(tmp_path, "root_vector_energy", [3], ops)
    grad_fd = [_central(cases.root_vector_energy, B3, r) for r in np.eye(3)]
    np.testing.assert_allclose(mod.gradient(B3), grad_fd, rtol=1e-7, atol=1e-8)
    fd = np.stack([_central(mod.gradient, B3, r) for r in np.eye(3)])
    np.testing.assert_allclose(mod.hessian(B3), fd, rtol=1e-6, atol=1e-7)
    v = np.array([0.2, 1.0, -0.4])
    np.testing.assert_allclose(mod.hvp(B3, v), fd @ v, rtol=1e-6, atol=1e-7)
    hessian = _jax_custom_root_hessian(B3)
    np.testing.assert_allclose(mod.hessian(B3), hessian, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mod.hvp(B3, v), hessian @ v, rtol=1e-10, atol=1e-12)


def _jax_custom_root_hessian(b: np.ndarray) -> np.ndarray:
    """JAX's hessian of the same energy, the root by ``lax.custom_root`` (Newton's
    iteration, its tangent solve the implicit function theorem's)."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    W = jnp.asarray(cases.W)

    def energy(b: Any) -> Any:
        def F(x: Any) -> Any:
            return x - jnp.tanh(W @ x) - b

        def newton(F: Any, x: Any) -> Any:
            for _ in range(40):
                x = x - jnp.linalg.solve(jax.jacfwd(F)(x), F(x))
            return x

        def tangent_solve(g: Any, y: Any) -> Any:
            return jnp.linalg.solve(jax.jacfwd(g)(y), y)

        x = jax.lax.custom_root(F, jnp.zeros(3), newton, tangent_solve)
        return jnp.sum(x**2) + x[0] * x[2]

    return np.asarray(jax.hessian(energy)(jnp.asarray(b)))


def test_parameters_read_by_closure_are_differentiated(tmp_path: Path) -> None:
    mod = _build(tmp_path, "root_closure", [3], ["jacobian"])
    p = np.array([0.7, 1.3, -0.4])
    np.testing.assert_allclose(mod.f(p), cases.root_closure(p), rtol=1e-10)
    fd = np.stack([_central(cases.root_closure, p, r) for r in np.eye(3)]).T
    np.testing.assert_allclose(mod.jacobian(p), fd, rtol=1e-7, atol=1e-9)
    x0 = mod.f(p)[0]
    d = 3.0 * x0**2 + p[0]  # x0^3 + p0 x0 - p1 = 0
    np.testing.assert_allclose(mod.jacobian(p)[0], [-x0 / d, 1.0 / d, 0.0], 1e-12)


# ------------------------------------------------------------ non-convergence
@pytest.mark.parametrize(
    "function", ["newton_capped", "bisect_capped", "brentq_capped"]
)
def test_where_scipy_raises_the_root_and_its_derivative_are_nan(
    tmp_path: Path, function: str
) -> None:
    with pytest.raises(RuntimeError):
        getattr(cases, function)(2.0)
    mod = _build(tmp_path, function, [], ["value_and_derivative"])
    value, d = mod.value_and_derivative(2.0)
    assert np.isnan(value) and np.isnan(d)


def test_disp_false_returns_the_last_iterate_as_scipy_does(tmp_path: Path) -> None:
    mod = _build(tmp_path, "newton_capped_quiet", [], ["value_and_derivative"])
    value, d = mod.value_and_derivative(2.0)
    np.testing.assert_allclose(value, cases.newton_capped_quiet(2.0), rtol=1e-14)
    assert abs(value - _kepler(2.0)) > 1e-6  # not converged
    np.testing.assert_allclose(d, 1.0 / (1.0 - cases.E * np.cos(value)), rtol=1e-12)


def test_a_vector_root_that_does_not_converge_is_nan(tmp_path: Path) -> None:
    b = np.array([0.5, 0.2])
    assert not scipy.optimize.root(lambda x: x * x + 1.0 - b, [0.5, 2.0]).success
    mod = _build(tmp_path, "root_capped", [2], ["jacobian"])
    assert np.all(np.isnan(mod.f(b))) and np.all(np.isnan(mod.jacobian(b)))
    np.testing.assert_allclose(mod.f(np.array([2.0, 5.0])), [1.0, 2.0], rtol=1e-12)


def test_nan_parameters_give_nan_roots_and_derivatives(tmp_path: Path) -> None:
    mod = _build(tmp_path, "kepler_root_scalar_bracket", [], ["value_and_derivative"])
    value, d = mod.value_and_derivative(np.nan)
    assert np.isnan(value) and np.isnan(d)
    vec = _build(tmp_path / "vector", "root_vector", [3], ["value_and_jacobian"])
    value, J = vec.value_and_jacobian(np.array([0.3, np.nan, 0.5]))
    assert np.all(np.isnan(value)) and np.all(np.isnan(J))


# ------------------------------------------------------- refusals, backends
@pytest.mark.parametrize(
    ("function", "needle"),
    [
        ("root_other_method", "scipy.optimize.root(..., method='lm')"),
        ("root_scalar_halley", "scipy.optimize.root_scalar(..., fprime2=...)"),
    ],
)
def test_unsupported_calls_name_the_call_and_argument(
    tmp_path: Path, function: str, needle: str
) -> None:
    cfg = write_config(tmp_path, SOURCE, function, [3], ["jacobian"], backend="trace")
    with pytest.raises(TraceError) as info:
        api.build(cfg)
    assert needle in str(info.value) and "optimize_cases.py:" in str(info.value)


def test_the_sympy_backend_builds_the_loops_from_the_graph(tmp_path: Path) -> None:
    mod = _build(tmp_path, "root_vector", [3], ["jacobian"], backend="sympy")
    _, expected = _fixed_point_jacobian(B3)
    np.testing.assert_allclose(mod.jacobian(B3), expected, rtol=1e-12, atol=1e-13)


def test_emit_c_gives_the_same_derivatives(tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path / "c",
        SOURCE,
        "kepler_energy_bisect",
        [4],
        ["gradient", "hessian"],
        backend="trace",
        emit="c",
    )
    difgen.build(cfg, compile=True)
    mod = import_file(tmp_path / "c" / "out" / "mod.py")
    assert mod.COMPILED, mod.C_FALLBACK_REASON
    ref = _build(tmp_path / "py", "kepler_energy_bisect", [4], ["gradient", "hessian"])
    M = np.array([0.1, 1.0, 2.5, 4.0])
    np.testing.assert_allclose(mod.gradient(M), ref.gradient(M), 1e-13, 1e-13)
    np.testing.assert_allclose(mod.hessian(M), ref.hessian(M), 1e-12, 1e-12)


def test_emit_c_keeps_a_vector_root_in_python_and_says_so(tmp_path: Path) -> None:
    """``solve`` has no C loop form: the operators stay vector code, noted."""
    cfg = write_config(
        tmp_path, SOURCE, "root_vector_energy", [3], ["gradient"], emit="c"
    )
    (built,) = difgen.build(cfg, compile=True).modules
    assert any(
        n.startswith("gradient: kept in Python") and "solve" in n for n in built.notes
    ), built.notes
    mod = import_file(built.path)
    grad_fd = [_central(cases.root_vector_energy, B3, r) for r in np.eye(3)]
    np.testing.assert_allclose(mod.gradient(B3), grad_fd, rtol=1e-7, atol=1e-8)


def test_a_system_that_is_not_square_is_refused(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, SOURCE, "root_not_square", [2], ["jacobian"])
    with pytest.raises(TraceError) as info:
        api.build(cfg)
    text = str(info.value)
    assert "scipy.optimize.root(..., fun=...) returns 3 values for 2 unknowns" in text
