"""The ipopt adapter: a sample NLP of 80 variables and 81 constraints solved by
IPOPT through the generated cyipopt problem class, against CasADi's nlpsol.

The model is :mod:`nlp_functions` (the chained Rosenbrock function with Lukšan and
Vlček's 78 trigonometric-exponential constraints, and three inequalities). cyipopt
is an optional test dependency (Debian's coinor-libipopt-dev, then pip's cyipopt:
.ci/run installs both when it can); CasADi (pip's casadi, IPOPT inside) only for the
comparison. The callbacks are checked against finite differences without either.
Every test of the sample NLP runs on its NumPy module and, where a C compiler is
found, on its ``emit = "c"`` module, whose callbacks call the compiled private
functions of x.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import difgen
import nlp_functions as nlp
from conftest import import_file
from difgen.targets.c.compiling import compiler

CONFIG = """
[difgen]
output_dir = "out"

[[module]]
name = "sample_nlp"
function = "nlp_functions:objective"
constraints = { function = "nlp_functions:constraints", size = 81 }
backend = "trace"
operators = ["gradient", "hessian"]
input = { shape = [80] }
adapters = ["ipopt"]
emit = "EMIT"
"""

NO_COMPILER = shutil.which(compiler()[0]) is None
NEEDS_COMPILER = pytest.mark.skipif(NO_COMPILER, reason="no C compiler found")


@pytest.fixture(
    scope="module",
    params=[
        "vector",
        pytest.param("c", marks=NEEDS_COMPILER),
    ],
)
def module(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> ModuleType:
    emit = str(request.param)
    project = tmp_path_factory.mktemp(f"ipopt_{emit}")
    (project / "difgen.toml").write_text(CONFIG.replace("EMIT", emit))
    difgen.build(project / "difgen.toml", compile=emit == "c")
    built = import_file(project / "out" / "sample_nlp.py")
    assert emit == "vector" or built.COMPILED, built.C_FALLBACK_REASON
    return built


def test_the_c_module_computes_every_callback_in_c(module: ModuleType) -> None:
    # the private functions of x are the extension's, beside its operators over z
    if not getattr(module, "COMPILED", False):
        assert not hasattr(module, "C_MODULE")  # the NumPy module has no C
        return
    private = ("_objective", "_objective_gradient", "_constraints")
    private += ("_constraints_jacobian", "_lagrangian_hessian")
    for name in (*private, "gradient", "hessian"):
        assert type(getattr(module, name)).__name__ == "builtin_function_or_method"
    assert module.PYTHON_OPERATORS == ()


def _differences(fn: Any, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    columns = []
    for i in range(x.size):
        step = np.zeros_like(x)
        step[i] = h
        columns.append((np.asarray(fn(x + step)) - np.asarray(fn(x - step))) / (2 * h))
    return np.stack(columns, axis=-1)


def test_the_callbacks_are_the_models_derivatives(module: ModuleType) -> None:
    problem = module.IpoptProblem()
    x = nlp.START + np.linspace(0.0, 0.3, nlp.N)
    assert problem.objective(x) == pytest.approx(float(nlp.objective(x)), rel=1e-14)
    np.testing.assert_allclose(problem.constraints(x), nlp.constraints(x), rtol=1e-14)
    np.testing.assert_allclose(
        problem.gradient(x), _differences(nlp.objective, x), rtol=1e-6, atol=1e-6
    )
    rows, cols = problem.jacobianstructure()
    jacobian = np.zeros((nlp.M, nlp.N))
    jacobian[rows, cols] = problem.jacobian(x)
    np.testing.assert_allclose(
        jacobian, _differences(nlp.constraints, x), rtol=1e-6, atol=1e-5
    )
    lagrange, obj_factor = np.linspace(-1.0, 1.0, nlp.M), 0.5

    def lagrangian_gradient(y: np.ndarray) -> np.ndarray:
        return obj_factor * problem.gradient(y) + lagrange @ _jacobian(problem, y)

    rows, cols = problem.hessianstructure()
    assert (rows >= cols).all() and rows.size == len(set(zip(rows, cols)))
    lower = np.zeros((nlp.N, nlp.N))
    lower[rows, cols] = problem.hessian(x, lagrange, obj_factor)
    expected = _differences(lagrangian_gradient, x)
    np.testing.assert_allclose(lower, np.tril(expected), rtol=1e-5, atol=1e-4)
    assert np.count_nonzero(np.tril(expected)) <= rows.size


def _jacobian(problem: Any, x: np.ndarray) -> np.ndarray:
    rows, cols = problem.jacobianstructure()
    dense = np.zeros((nlp.M, nlp.N))
    dense[rows, cols] = problem.jacobian(x)
    return dense


class _Timed:
    """The generated problem, counting IPOPT's iterations and timing callbacks."""

    def __init__(self, problem: Any) -> None:
        self.problem = problem
        self.iterations = -1
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.problem, name)
        if name not in ("gradient", "jacobian", "hessian"):
            return method

        def timed(*args: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*args)
            finally:
                self.seconds += time.perf_counter() - start

        return timed

    def intermediate(self, *args: Any) -> None:
        self.iterations = int(args[1])


def _solve_with_cyipopt(
    module: ModuleType,
) -> tuple[np.ndarray, dict[str, Any], _Timed]:
    cyipopt = pytest.importorskip(
        "cyipopt",
        reason="cyipopt is not installed (apt-get install coinor-libipopt-dev, then "
        "pip install cyipopt; .ci/run does both as root)",
    )
    timed = _Timed(module.IpoptProblem())
    problem = cyipopt.Problem(
        n=nlp.N, m=nlp.M, problem_obj=timed, cl=nlp.LOWER, cu=nlp.UPPER
    )
    problem.add_option("print_level", 0)
    problem.add_option("tol", 1e-8)
    x, info = problem.solve(nlp.START)
    return x, info, timed


def test_ipopt_solves_the_sample_nlp(module: ModuleType) -> None:
    x, info, timed = _solve_with_cyipopt(module)
    assert info["status"] == 0, info["status_msg"]
    g = nlp.constraints(x)
    np.testing.assert_allclose(g[:78], 0.0, atol=1e-7)
    assert (g[78:] <= nlp.UPPER[78:] + 1e-7).all()
    assert (g[78:] >= nlp.LOWER[78:] - 1e-7).all()
    assert 0 < timed.iterations <= 30


def test_no_more_iterations_than_casadi(module: ModuleType) -> None:
    x, _, timed = _solve_with_cyipopt(module)
    casadi = pytest.importorskip("casadi", reason="casadi is not installed")

    class Ops:
        sum = staticmethod(casadi.sum1)
        sin = staticmethod(casadi.sin)
        exp = staticmethod(casadi.exp)
        concatenate = staticmethod(lambda parts: casadi.vertcat(*parts))

    symbols = casadi.SX.sym("x", nlp.N)
    model = {
        "x": symbols,
        "f": nlp.objective_of(symbols, Ops),
        "g": nlp.constraints_of(symbols, Ops),
    }
    options = {"ipopt.print_level": 0, "print_time": 0, "ipopt.tol": 1e-8}
    solver = casadi.nlpsol("sample", "ipopt", model, options)
    found = solver(x0=nlp.START, lbg=nlp.LOWER, ubg=nlp.UPPER)
    stats = solver.stats()
    assert stats["success"]
    np.testing.assert_allclose(x, np.asarray(found["x"]).ravel(), atol=1e-7)
    assert timed.iterations <= stats["iter_count"]


def test_the_module_keeps_its_lagrangian_in_the_docstring(module: ModuleType) -> None:
    assert "obj_factor * f(x) + lagrange @ g(x)" in " ".join(module.__doc__.split())
    assert module.INPUT_SHAPE == (nlp.N + 1 + nlp.M,)
    assert Path(module.__file__).read_text().count("class IpoptProblem") == 1
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental"]
        + ["--no-warn-unused-ignores", module.__file__],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr  # the class is typed


def test_verify_checks_the_lagrangian(module: ModuleType) -> None:
    result = difgen.verify(Path(str(module.__file__)).parents[1] / "difgen.toml")
    assert result.ok
    (checked,) = result.modules
    assert {op.operator for op in checked.operators} >= {"gradient", "hessian"}


def test_the_jacobian_callback_is_the_lagrangians_constraint_rows(
    module: ModuleType,
) -> None:
    # the jacobian callback computes g's own sparse jacobian; the Lagrangian's
    # hessian (what it computed before) holds the same in its multipliers' rows
    problem = module.IpoptProblem()
    x = nlp.START + np.linspace(0.0, 0.3, nlp.N)
    z = np.concatenate([x, [0.0], np.zeros(nlp.M)])
    rows, cols = module.hessian_structure()
    block = (rows > nlp.N) & (cols < nlp.N)
    old = np.zeros((nlp.M, nlp.N))
    old[rows[block] - nlp.N - 1, cols[block]] = module.hessian(z).data[block]
    jac_rows, jac_cols = problem.jacobianstructure()
    assert list(zip(jac_rows, jac_cols)) == list(
        zip(rows[block] - nlp.N - 1, cols[block])
    )  # the same entries, in the same order
    new = np.zeros((nlp.M, nlp.N))
    new[jac_rows, jac_cols] = problem.jacobian(x)
    np.testing.assert_allclose(new, old, rtol=1e-14, atol=1e-14)
    first = problem.jacobian(x)
    again = problem.jacobian(x + 0.1)  # refilled in place: earlier results stay
    np.testing.assert_array_equal(problem.jacobian(x), first)
    assert not np.array_equal(first, again)


def test_the_hessian_callback_is_the_lagrangians_x_block(module: ModuleType) -> None:
    # the hessian callback differentiates the Lagrangian in x alone (3 colors on
    # the sample NLP, against 81 for the module's hessian over z)
    problem = module.IpoptProblem()
    x = nlp.START + np.linspace(0.0, 0.3, nlp.N)
    lagrange, obj_factor = np.linspace(-1.0, 1.0, nlp.M), 0.5
    z = np.concatenate([x, [obj_factor], lagrange])
    rows, cols = module.hessian_structure()
    block = rows < nlp.N
    hess_rows, hess_cols = problem.hessianstructure()
    assert list(zip(hess_rows, hess_cols)) == list(zip(rows[block], cols[block]))
    np.testing.assert_allclose(
        problem.hessian(x, lagrange, obj_factor),
        module.hessian(z).data[block],
        rtol=1e-13,
        atol=1e-13,
    )
    first = problem.hessian(x, lagrange, obj_factor)
    problem.hessian(x, -lagrange, 2.0)  # refilled in place: earlier results stay
    np.testing.assert_array_equal(problem.hessian(x, lagrange, obj_factor), first)


def test_no_callback_computes_the_lagrangian_over_z(
    module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a callback computed the Lagrangian over z")

    problem = module.IpoptProblem()
    monkeypatch.setattr(module, "hessian", refused)
    monkeypatch.setattr(module, "gradient", refused)
    x = nlp.START
    assert problem.objective(x) == pytest.approx(float(nlp.objective(x)), rel=1e-14)
    np.testing.assert_allclose(problem.constraints(x), nlp.constraints(x), rtol=1e-14)
    assert problem.gradient(x).shape == (nlp.N,)
    assert problem.jacobian(x).shape == problem.jacobianstructure()[0].shape
    values = problem.hessian(x, np.ones(nlp.M), 1.0)
    assert values.shape == problem.hessianstructure()[0].shape


CONTEXT_NLP = """
import numpy as np

def f(x, lagrange):
    return lagrange * np.sum(x**4)

def g(x, lagrange):
    return np.concatenate([np.reshape(x[0] * x[1] * lagrange, (1,)), x[1:] ** 2])
"""

CONTEXT_CONFIG = """
[difgen]
output_dir = "out"

[[module]]
name = "context_nlp"
function = "context_nlp.py:f"
constraints = { function = "context_nlp.py:g", size = 3 }
backend = "trace"
operators = ["gradient", "hessian"]
input = { shape = [3] }
contexts = [{ name = "lagrange", shape = [] }]
adapters = ["ipopt"]
"""


@pytest.mark.parametrize(
    ("backend", "emit"),
    [
        ("trace", "vector"),
        pytest.param("trace", "c", marks=NEEDS_COMPILER),  # C loops
        pytest.param("sympy", "c", marks=NEEDS_COMPILER),  # straight-line C
    ],
)
def test_a_context_named_like_the_multipliers(
    tmp_path: Path, backend: str, emit: str
) -> None:
    # the Lagrangian-in-x part takes the multipliers after the module's contexts,
    # renamed away from a context of the same name
    (tmp_path / "context_nlp.py").write_text(CONTEXT_NLP)
    config = CONTEXT_CONFIG.replace('"trace"', f'"{backend}"')
    (tmp_path / "difgen.toml").write_text(config + f'emit = "{emit}"\n')
    difgen.build(tmp_path / "difgen.toml", compile=emit == "c")
    module = import_file(tmp_path / "out" / "context_nlp.py")
    assert emit == "vector" or module.COMPILED, module.C_FALLBACK_REASON
    problem = module.IpoptProblem(2.0)
    x, lam, sigma = np.array([0.5, -1.0, 2.0]), np.array([1.0, -2.0, 3.0]), 0.25
    assert problem.objective(x) == pytest.approx(2.0 * np.sum(x**4))
    np.testing.assert_allclose(problem.gradient(x), 8.0 * x**3)
    np.testing.assert_allclose(problem.constraints(x), [-1.0, 1.0, 4.0])
    jacobian = np.zeros((3, 3))
    jacobian[problem.jacobianstructure()] = problem.jacobian(x)
    expected = [[2.0 * x[1], 2.0 * x[0], 0.0], [0.0, 2 * x[1], 0.0], [0, 0, 2 * x[2]]]
    np.testing.assert_allclose(jacobian, expected)
    lower = np.zeros((3, 3))
    lower[problem.hessianstructure()] = problem.hessian(x, lam, sigma)
    hessian = np.diag(sigma * 24.0 * x**2 + [0.0, 2.0 * lam[1], 2.0 * lam[2]])
    hessian[1, 0] = 2.0 * lam[0]
    np.testing.assert_allclose(lower, np.tril(hessian))
