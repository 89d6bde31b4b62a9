"""Implicit differentiation of converged loops (issue 22, item 6).

Modules built with ``implicit = true`` differentiate a ``while`` loop whose exit test
is a tolerance on a residual by the implicit-function theorem at its final state.
Oracles: Kepler's analytic derivatives (``dE/dM = 1 / (1 - e cos E)``,
``d2E/dM2 = -e sin E / (1 - e cos E)^3``), ``sqrt``'s, the fixed point's
``(I - D W)^-1 D`` with ``D = diag(1 - x^2)``, and central differences.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import difgen
import implicit_cases as cases
from conftest import (
    SUPPORT,
    build_and_import,
    import_file,
    operators_source,
    write_config,
)
from difgen import api
from difgen.errors import ConfigError, DifgenError, TraceError

SOURCE = SUPPORT / "implicit_cases.py"
M5 = np.array([0.1, 1.0, 2.5, 4.0, 6.0])
W4 = 0.4 * np.array(
    [
        [0.2, -0.5, 0.1, 0.3],
        [0.4, 0.1, -0.2, 0.2],
        [-0.3, 0.2, 0.3, -0.1],
        [0.1, 0.3, -0.4, 0.2],
    ]
)
B4 = np.array([0.3, -0.7, 1.1, 0.2])
H = 1e-6


def _build(
    tmp_path: Path,
    function: str,
    shape: Any,
    operators: list[str],
    contexts: Any = (),
    **options: Any,
) -> tuple[Any, str]:
    options.setdefault("backend", "trace")
    options.setdefault("implicit", True)
    cfg = write_config(
        tmp_path, SOURCE, function, shape, operators, contexts, **options
    )
    return build_and_import(cfg)


def _central(fn: Any, x: np.ndarray, dx: np.ndarray) -> np.ndarray:
    return (np.asarray(fn(x + H * dx)) - np.asarray(fn(x - H * dx))) / (2 * H)


def _anomalies(M: np.ndarray, e: float) -> np.ndarray:
    return np.asarray(cases.kepler(M, e))


def test_kepler_jacobian_is_one_over_one_minus_e_cos_e(tmp_path: Path) -> None:
    ops = ["jacobian", "value_and_jacobian", "pushforward", "pullback"]
    mod, _ = _build(tmp_path, "kepler", [5], ops, contexts=[()])
    e = 0.6
    E = _anomalies(M5, e)
    expected = np.diag(1.0 / (1.0 - e * np.cos(E)))
    np.testing.assert_allclose(mod.jacobian(M5, e), expected, rtol=1e-12, atol=1e-12)
    value, J = mod.value_and_jacobian(M5, e)
    np.testing.assert_allclose(value, E, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(J, expected, rtol=1e-12, atol=1e-12)
    dx = np.linspace(-1.0, 1.0, 5)
    np.testing.assert_allclose(mod.pushforward(M5, dx, e), expected @ dx, 1e-12, 1e-12)
    np.testing.assert_allclose(mod.pullback(M5, dx, e), expected.T @ dx, 1e-12, 1e-12)
    body = operators_source(mod)
    assert "reversed(" not in body and ": list[Any] = []" not in body  # no tape
    assert body.count("while ") == len(ops) + 1  # the primal loop of each, and f


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_kepler_gradient_hessian_hvp_match_the_analytic_ones(
    tmp_path: Path, mode: str
) -> None:
    ops = ["gradient", "value_and_gradient", "hessian", "hvp", "jacobian"]
    mod, _ = _build(tmp_path, "kepler_energy", [5], ops, mode=mode)
    e = cases.E_KEPLER
    E = _anomalies(M5, e)
    w = 1.0 / (1.0 - e * np.cos(E))
    d1, d2 = 2.0 * E + np.cos(E), 2.0 - np.sin(E)  # g'(E), g''(E)
    grad = d1 * w
    hess = np.diag(d2 * w**2 + d1 * (-e * np.sin(E) * w**3))
    np.testing.assert_allclose(mod.gradient(M5), grad, rtol=1e-12, atol=1e-12)
    value, g = mod.value_and_gradient(M5)
    np.testing.assert_allclose(value, cases.kepler_energy(M5), rtol=1e-15)
    np.testing.assert_allclose(g, grad, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mod.jacobian(M5), grad, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mod.hessian(M5), hess, rtol=1e-11, atol=1e-11)
    v = np.array([0.5, -1.0, 2.0, 0.3, -0.2])
    np.testing.assert_allclose(mod.hvp(M5, v), hess @ v, rtol=1e-11, atol=1e-11)


def test_eccentricity_differentiated_with_the_anomalies(tmp_path: Path) -> None:
    """e reaches the loop as a constant computed from the input: its tangent goes
    through the implicit derivative too (dE/de = sin E / (1 - e cos E))."""
    mod, _ = _build(tmp_path, "kepler_me", [4], ["gradient", "hessian"])
    x = np.array([0.4, 1.7, 3.3, 0.6])
    M, e = x[:-1], x[-1]
    E = _anomalies(M, e)
    w = 1.0 / (1.0 - e * np.cos(E))
    df = np.cos(E) - E * np.sin(E) + e  # d f / d E
    expected = np.append(df * w, np.sum(df * np.sin(E) * w) + np.sum(E))
    np.testing.assert_allclose(mod.gradient(x), expected, rtol=1e-12, atol=1e-12)
    fd = np.stack([_central(mod.gradient, x, row) for row in np.eye(4)])
    np.testing.assert_allclose(mod.hessian(x), fd, rtol=1e-6, atol=1e-6)


def test_a_residual_exit_test_is_a_root_solve(tmp_path: Path) -> None:
    mod, _ = _build(tmp_path, "newton_sqrt", [], ["derivative", "second_derivative"])
    for a in (0.3, 2.0, 50.0):
        np.testing.assert_allclose(mod.derivative(a), 0.5 / np.sqrt(a), rtol=1e-12)
        np.testing.assert_allclose(
            mod.second_derivative(a), -0.25 * a**-1.5, rtol=1e-10
        )


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_a_vector_fixed_point_solves_its_dense_jacobian(
    tmp_path: Path, mode: str
) -> None:
    ops = ["jacobian", "pushforward", "pullback"]
    mod, _ = _build(tmp_path, "tanh_fixed_point", [4], ops, [(4, 4)], mode=mode)
    x = np.asarray(cases.tanh_fixed_point(B4, W4))
    D = np.diag(1.0 - x**2)
    expected = np.linalg.solve(np.eye(4) - D @ W4, D)
    np.testing.assert_allclose(mod.jacobian(B4, W4), expected, rtol=1e-12, atol=1e-12)
    fd = np.stack(
        [_central(lambda b: cases.tanh_fixed_point(b, W4), B4, r) for r in np.eye(4)]
    ).T
    np.testing.assert_allclose(mod.jacobian(B4, W4), fd, rtol=1e-7, atol=1e-8)
    u = np.array([1.0, -2.0, 0.5, 0.25])
    np.testing.assert_allclose(mod.pullback(B4, u, W4), expected.T @ u, 1e-12, 1e-12)
    assert "np.linalg.solve(" in operators_source(mod)


def test_a_vector_fixed_point_hessian_matches_differences(tmp_path: Path) -> None:
    ops = ["gradient", "hessian", "hvp"]
    mod, _ = _build(tmp_path, "tanh_fixed_point_energy", [4], ops, [(4, 4)])
    fd = np.stack([_central(lambda b: mod.gradient(b, W4), B4, r) for r in np.eye(4)])
    np.testing.assert_allclose(mod.hessian(B4, W4), fd, rtol=1e-6, atol=1e-7)
    v = np.array([0.2, 1.0, -0.4, 0.7])
    np.testing.assert_allclose(mod.hvp(B4, v, W4), fd @ v, rtol=1e-6, atol=1e-7)
    grad_fd = [
        _central(lambda b: cases.tanh_fixed_point_energy(b, W4), B4, r)
        for r in np.eye(4)
    ]
    np.testing.assert_allclose(mod.gradient(B4, W4), grad_fd, rtol=1e-7, atol=1e-8)


def test_a_loop_stopped_by_its_cap_gets_the_formula_where_it_stopped(
    tmp_path: Path,
) -> None:
    """Two Newton steps do not converge; the derivative is the implicit one at the
    state reached (as JAX's custom_root gives), not that of the two steps."""
    mod, _ = _build(tmp_path, "kepler_capped", [5], ["jacobian"])
    E = np.asarray(cases.kepler_capped(M5))
    assert np.max(np.abs(E - _anomalies(M5, cases.E_KEPLER))) > 1e-8  # not converged
    expected = np.diag(1.0 / (1.0 - cases.E_KEPLER * np.cos(E)))
    np.testing.assert_allclose(mod.jacobian(M5), expected, rtol=1e-12, atol=1e-12)


def test_nan_inputs_give_nan_derivatives_there(tmp_path: Path) -> None:
    mod, _ = _build(tmp_path, "kepler", [5], ["jacobian", "pullback"], [()])
    M = M5.copy()
    M[2] = np.nan
    J = mod.jacobian(M, 0.6)
    assert np.isnan(J[2, 2]) and np.isnan(mod.pullback(M, np.ones(5), 0.6)[2])
    E = np.asarray(cases.kepler(M, 0.6))  # NaN stops the loop: the test is False
    ok = [0, 1, 3, 4]
    np.testing.assert_allclose(np.diag(J)[ok], 1.0 / (1.0 - 0.6 * np.cos(E[ok])))


def test_emit_c_gives_the_same_derivatives(tmp_path: Path) -> None:
    ops = ["gradient", "hessian"]
    cfg = write_config(
        tmp_path / "c",
        SOURCE,
        "kepler_energy",
        [5],
        ops,
        backend="trace",
        implicit=True,
        emit="c",
    )
    difgen.build(cfg, compile=True)
    mod = import_file(tmp_path / "c" / "out" / "mod.py")
    assert mod.COMPILED, mod.C_FALLBACK_REASON
    ref, _ = _build(tmp_path / "py", "kepler_energy", [5], ops)
    np.testing.assert_allclose(mod.gradient(M5), ref.gradient(M5), 1e-14, 1e-14)
    np.testing.assert_allclose(mod.hessian(M5), ref.hessian(M5), 1e-13, 1e-13)


def test_a_loop_not_on_a_tolerance_is_refused_naming_its_line(tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path,
        SOURCE,
        "counter_loop",
        [3],
        ["jacobian"],
        backend="trace",
        implicit=True,
    )
    with pytest.raises(TraceError) as info:
        api.build(cfg)
    text = str(info.value)
    line = _line("while np.sum(y) < 10.0:")
    assert f"implicit_cases.py:{line}" in text and "tolerance on a residual" in text


def test_auto_differentiates_the_recognised_loops_and_notes_them(
    tmp_path: Path,
) -> None:
    cfg = write_config(
        tmp_path,
        SOURCE,
        "two_loops",
        [3],
        ["jacobian"],
        backend="trace",
        implicit="auto",
    )
    (built,) = api.build(cfg).modules
    notes = [n for n in built.notes if "differentiated implicitly" in n]
    assert (
        len(notes) == 1
        and f"implicit_cases.py:{_line('np.max(np.abs(step))')}" in notes[0]
    )
    text = built.path.read_text()
    assert "reversed(" not in text  # jacobian: forward mode through the other loop
    mod = import_file(built.path)
    x = np.array([0.3, 0.5, 1.0])
    fd = np.stack([_central(cases.two_loops, x, r) for r in np.eye(3)]).T
    np.testing.assert_allclose(mod.jacobian(x), fd, rtol=1e-7, atol=1e-8)


def test_too_many_coupled_unknowns_are_refused(tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path,
        SOURCE,
        "big_fixed_point",
        [70],
        ["jacobian"],
        backend="trace",
        implicit=True,
    )
    with pytest.raises(DifgenError, match="at most 64 unknowns"):
        api.build(cfg)


def test_the_key_takes_true_false_or_auto(tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path,
        SOURCE,
        "kepler_energy",
        [5],
        ["gradient"],
        backend="trace",
        implicit="always",
    )
    with pytest.raises(ConfigError, match="'implicit' must be true"):
        api.build(cfg)


def test_implicit_false_is_the_module_without_the_key(tmp_path: Path) -> None:
    _build(tmp_path / "off", "kepler_energy", [5], ["gradient"], implicit=False)
    cfg = write_config(
        tmp_path / "none", SOURCE, "kepler_energy", [5], ["gradient"], backend="trace"
    )
    _, plain = build_and_import(cfg)
    assert (tmp_path / "off" / "out" / "mod.py").read_text() == plain
    assert "reversed(" in plain  # the derivative of the iterations taken


def _line(needle: str) -> int:
    lines = SOURCE.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if needle in line)


@pytest.mark.parametrize(
    "function", ["kepler_brentq", "kepler_newton", "kepler_secant"]
)
@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_scipy_root_finders_are_loops_with_implicit_derivatives(
    tmp_path: Path, function: str, mode: str
) -> None:
    """No option needed: a root finder's derivative is the implicit one."""
    ops = ["derivative", "second_derivative", "value_and_derivative"]
    cfg = write_config(tmp_path, SOURCE, function, [], ops, backend="trace", mode=mode)
    mod, _ = build_and_import(cfg)
    assert "scipy" not in operators_source(mod)  # the loop is emitted
    e = cases.E_KEPLER
    for M in (0.2, 2.0, 5.5):
        E = float(cases.kepler(np.array(M), e))
        w = 1.0 / (1.0 - e * np.cos(E))
        value, d = mod.value_and_derivative(M)
        np.testing.assert_allclose(value, getattr(cases, function)(M), rtol=1e-14)
        np.testing.assert_allclose(value, E, rtol=1e-13)
        np.testing.assert_allclose(d, w, rtol=1e-12)
        np.testing.assert_allclose(mod.derivative(M), w, rtol=1e-12)
        np.testing.assert_allclose(
            mod.second_derivative(M), -e * np.sin(E) * w**3, rtol=1e-10, atol=1e-12
        )


def test_scipy_fixed_point_del2_elementwise(tmp_path: Path) -> None:
    ops = ["jacobian", "pullback"]
    mod, _ = _build(tmp_path, "tanh_scipy_fixed_point", [3], ops, implicit=False)
    b = np.array([0.1, -0.5, 1.0])
    x = mod.f(b)
    np.testing.assert_allclose(x, cases.tanh_scipy_fixed_point(b), rtol=1e-13)
    s = 1.0 - x**2
    expected = np.diag(s / (1.0 - 0.5 * s))
    np.testing.assert_allclose(mod.jacobian(b), expected, rtol=1e-12, atol=1e-12)
    u = np.array([1.0, 2.0, -1.0])
    np.testing.assert_allclose(mod.pullback(b, u), expected @ u, rtol=1e-12)


@pytest.mark.parametrize(
    ("function", "needle"),
    [
        ("brentq_full_output", "scipy.optimize.brentq(..., full_output=True)"),
    ],
)
def test_unsupported_solver_calls_name_the_call_and_argument(
    tmp_path: Path, function: str, needle: str
) -> None:
    cfg = write_config(tmp_path, SOURCE, function, [], ["derivative"], backend="trace")
    with pytest.raises(TraceError) as info:
        api.build(cfg)
    assert needle in str(info.value) and "implicit_cases.py:" in str(info.value)


def test_the_sympy_backend_builds_the_loop_from_the_graph(tmp_path: Path) -> None:
    """The sympy backend has no loop form: the module is built from the graph (a
    build note says so), with the same implicit derivative."""
    mod, _ = _build(tmp_path, "kepler_energy", [5], ["gradient"], backend="sympy")
    assert "reversed(" not in operators_source(mod)
    E = _anomalies(M5, cases.E_KEPLER)
    w = 1.0 / (1.0 - cases.E_KEPLER * np.cos(E))
    np.testing.assert_allclose(mod.gradient(M5), (2.0 * E + np.cos(E)) * w, 1e-12)


def test_the_checked_in_example_is_kepler_implicit() -> None:
    path = Path(__file__).resolve().parents[2] / "generated" / "kepler_implicit.py"
    mod = import_file(path)
    M, e = np.array([0.3, 1.2, 3.0, 5.0]), 0.7
    E = _anomalies(M, e)
    expected = np.diag(1.0 / (1.0 - e * np.cos(E)))
    np.testing.assert_allclose(mod.jacobian(M, e), expected, rtol=1e-12, atol=1e-12)
    assert "reversed(" not in operators_source(mod)


@pytest.mark.parametrize("function", ["dottie_all", "dottie_any"])
def test_any_and_all_exit_tests_are_tolerances(tmp_path: Path, function: str) -> None:
    """A root of cos(x) - x - b: dx/db = -1 / (sin x + 1)."""
    mod, _ = _build(tmp_path, function, [3], ["jacobian", "pullback"])
    b = np.array([-0.3, 0.2, 1.0])
    x = mod.f(b)
    expected = np.diag(-1.0 / (np.sin(x) + 1.0))
    np.testing.assert_allclose(mod.jacobian(b), expected, rtol=1e-12, atol=1e-12)
    assert "reversed(" not in operators_source(mod)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_an_error_kept_in_a_loop_variable_is_a_tolerance(
    tmp_path: Path, mode: str
) -> None:
    """x = cos(x) / 2 + b: dx/db = (I + diag(sin x) / 2)^-1, coupled through the
    norm only in the test, so the update is elementwise: a division."""
    mod, _ = _build(tmp_path, "half_cos_error_state", [3], ["jacobian"], mode=mode)
    b = np.array([-0.3, 0.2, 1.0])
    x = mod.f(b)
    expected = np.diag(1.0 / (1.0 + 0.5 * np.sin(x)))
    np.testing.assert_allclose(mod.jacobian(b), expected, rtol=1e-12, atol=1e-12)
    assert "np.linalg.solve" not in operators_source(mod)


def test_solver_loops_stay_quiet_at_exact_roots(tmp_path: Path) -> None:
    """Both sides of a select are computed: the emitted secant never divides by
    zero, even when it starts on a root (the module raises and warns nothing)."""
    mod, _ = _build(tmp_path, "secant_exact_start", [], ["derivative"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mod.f(0.0) == 0.0
        np.testing.assert_allclose(mod.derivative(0.0), 1.0 / (1.0 - cases.E_KEPLER))
        np.testing.assert_allclose(
            mod.derivative(2.0), 1.0 / (1.0 - 0.6 * np.cos(mod.f(2.0)))
        )
