"""Sparse structure as an API, hessian triangles, reserved names only where used,
and the scipy adapter driving SciPy's solvers (issue 23).

Each module is built once (module-scoped fixture) from the sources below; the
solvers run on the generated functions as SciPy calls them, with no lambda.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import scipy.sparse
from scipy.integrate import solve_ivp
from scipy.optimize import NonlinearConstraint, least_squares, minimize

import difgen
from conftest import import_file
from difgen.config import load_config
from difgen.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "functions.py"

SOURCE = """
import numpy as np


def chain(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def field(x):
    return x[1:] * x[:-1] - np.cos(x[1:])


def rhs(y, k, t):
    return -k * y**3 + np.roll(y, 1) - y + np.sin(t)


def residuals(x):
    return np.concatenate([10.0 * (x[1:] - x[:-1] ** 2), 1.0 - x[:-1]])


def products(x, v):
    return v @ (x[1:] * x[:-1])
"""


def _module(name: str, function: str, size: int, extra: str) -> str:
    return (
        f'[[module]]\nname = "{name}"\nfunction = "fn.py:{function}"\n'
        f"input = {{ shape = [{size}] }}\n{extra}\n"
    )


MODULES = {
    "h_trace": (
        "chain",
        8,
        'backend = "trace"\noperators = ["hessian"]\nsparse = true',
    ),
    "h_sympy": (
        "chain",
        8,
        'backend = "sympy"\noperators = ["hessian"]\nsparse = true',
    ),
    "h_lower": (
        "chain",
        8,
        (
            'backend = "trace"\noperators = ["gradient", "hessian", "hvp"]\n'
            'sparse = true\ntriangle = "lower"\nadapters = ["scipy"]'
        ),
    ),
    "h_upper": (
        "chain",
        8,
        'backend = "sympy"\noperators = ["hessian"]\nsparse = true\ntriangle = "upper"',
    ),
    "j_field": (
        "field",
        8,
        'backend = "trace"\noperators = ["jacobian"]\nsparse = true',
    ),
    "ode": (
        "rhs",
        12,
        (
            'backend = "trace"\noperators = ["jacobian"]\nsparse = true\n'
            'adapters = ["scipy"]\ntime = "t"\n'
            'contexts = [{ name = "k", shape = [] }, { name = "t", shape = [] }]'
        ),
    ),
    "lsq": (
        "residuals",
        10,
        (
            'backend = "trace"\noperators = ["jacobian"]\nsparse = true\n'
            'adapters = ["scipy"]'
        ),
    ),
    "rosen": (
        "chain",
        10,
        (
            'backend = "trace"\noperators = ["gradient", "hessian", "hvp"]\n'
            'adapters = ["scipy"]'
        ),
    ),
    # trust-constr calls a constraint's hess(x, v): v (the multipliers) is a
    # context of a module without hvp, which no longer reserves the name
    "vcon": (
        "products",
        10,
        (
            'backend = "trace"\noperators = ["hessian"]\nsparse = true\n'
            'adapters = ["scipy"]\ncontexts = [{ name = "v", shape = [9] }]'
        ),
    ),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModuleType]:
    project = tmp_path_factory.mktemp("solvers")
    (project / "fn.py").write_text(SOURCE)
    parts = ['[difgen]\noutput_dir = "out"\n']
    parts += [_module(name, *entry) for name, entry in MODULES.items()]
    parts.append(
        '[[module]]\nname = "brusselator"\n'
        f'function = "{EXAMPLES.as_posix()}:brusselator_2d"\n'
        'backend = "trace"\noperators = ["jacobian"]\n'
        'input = { shape = [2, 16, 16] }\nsparse = true\nadapters = ["scipy"]\n'
    )
    (project / "difgen.toml").write_text("\n".join(parts))
    difgen.build(project / "difgen.toml")
    return {p.stem: import_file(p) for p in sorted((project / "out").glob("*.py"))}


X8 = np.linspace(0.3, 1.4, 8)


@pytest.mark.parametrize("name", ["h_trace", "h_sympy", "j_field"])
def test_structure_lists_the_entries_in_the_order_of_data(
    built: dict[str, ModuleType], name: str
) -> None:
    module = built[name]
    kind = "hessian" if name.startswith("h") else "jacobian"
    result = getattr(module, kind)(X8)
    rows, cols = getattr(module, f"{kind}_structure")()
    assert rows.dtype == cols.dtype == np.int64
    np.testing.assert_array_equal(result.toarray()[rows, cols], result.data)
    assert len(set(zip(rows.tolist(), cols.tolist()))) == result.nnz
    pattern = getattr(module, f"{kind}_sparsity")()
    assert scipy.sparse.issparse(pattern) and pattern.format == "csr"
    assert pattern.dtype == np.bool_ and pattern.shape == result.shape
    np.testing.assert_array_equal(pattern.toarray(), result.toarray() != 0)
    assert kind + "_structure" in module.__all__


@pytest.mark.parametrize(("name", "keep"), [("h_lower", np.tril), ("h_upper", np.triu)])
def test_a_triangle_is_that_of_the_whole_hessian(
    built: dict[str, ModuleType], name: str, keep: object
) -> None:
    whole = built["h_trace"].hessian(X8).toarray()
    module = built[name]
    part = module.hessian(X8)
    np.testing.assert_allclose(part.toarray(), keep(whole), rtol=1e-13)  # type: ignore[operator]
    rows, cols = module.hessian_structure()
    assert (rows >= cols).all() if name == "h_lower" else (rows <= cols).all()
    np.testing.assert_array_equal(part.toarray()[rows, cols], part.data)
    again = module.hessian(X8 + 0.5)
    assert module.hessian(X8, out=again) is again
    np.testing.assert_array_equal(again.toarray(), part.toarray())


def test_out_is_checked_against_the_pattern(built: dict[str, ModuleType]) -> None:
    module = built["h_lower"]
    whole = built["h_trace"].hessian(X8)  # the whole pattern, not the triangle
    with pytest.raises(ValueError, match="sparsity pattern"):
        module.hessian(X8, out=whole)
    wrong = module.hessian(X8)
    wrong.data = wrong.data.astype(np.float32)
    with pytest.raises(ValueError, match="float64"):
        module.hessian(X8, out=wrong)


def test_the_scipy_adapter_has_scipys_signatures(built: dict[str, ModuleType]) -> None:
    module = built["rosen"]
    found = minimize(
        module.fun, np.full(10, -1.0), jac=module.jac, hess=module.hess,
        method="trust-exact",
    )  # fmt: skip
    assert found.success
    np.testing.assert_allclose(found.x, np.ones(10), atol=1e-6)
    newton = minimize(
        module.fun, np.full(10, -1.0), jac=module.jac, hessp=module.hessp,
        method="Newton-CG", options={"xtol": 1e-12},
    )  # fmt: skip
    np.testing.assert_allclose(newton.x, np.ones(10), atol=1e-4)
    # a triangle module's hess is the whole symmetric matrix again
    lower = built["h_lower"]
    np.testing.assert_allclose(
        lower.hess(X8).toarray(), built["h_trace"].hessian(X8).toarray(), rtol=1e-13
    )
    assert set(lower.__all__) >= {"fun", "jac", "hess", "hessp", "hessian_structure"}


def test_trust_constr_calls_a_constraint_hess_with_its_multipliers(
    built: dict[str, ModuleType],
) -> None:
    vcon, rosen = built["vcon"], built["rosen"]

    def products(x: np.ndarray) -> np.ndarray:
        return x[1:] * x[:-1]

    def jac(x: np.ndarray) -> np.ndarray:
        rows = np.arange(9)
        j = np.zeros((9, 10))
        j[rows, rows], j[rows, rows + 1] = x[1:], x[:-1]
        return j

    constraint = NonlinearConstraint(products, 0.5, 2.0, jac=jac, hess=vcon.hess)
    found = minimize(
        rosen.fun, np.full(10, 0.9), jac=rosen.jac, hess=rosen.hess,
        constraints=[constraint], method="trust-constr",
    )  # fmt: skip
    assert found.success, found.message
    v = np.linspace(1.0, 2.0, 9)
    dense = np.zeros((10, 10))
    for i in range(9):
        dense[i, i + 1] = dense[i + 1, i] = v[i]
    np.testing.assert_array_equal(vcon.hess(X8[:1].repeat(10), v).toarray(), dense)


def test_least_squares_with_the_module_jac_sparsity(
    built: dict[str, ModuleType],
) -> None:
    module = built["lsq"]
    sparsity = module.jacobian_sparsity()
    by_differences = least_squares(module.fun, np.zeros(10), jac_sparsity=sparsity)
    exact = least_squares(module.fun, np.zeros(10), jac=module.jac)
    assert by_differences.success and exact.success
    np.testing.assert_allclose(exact.x, np.ones(10), atol=1e-6)
    np.testing.assert_allclose(by_differences.x, np.ones(10), atol=1e-5)


def test_ode_jac_takes_solve_ivps_time_first(built: dict[str, ModuleType]) -> None:
    module = built["ode"]
    y = np.linspace(0.1, 1.2, 12)
    np.testing.assert_array_equal(
        module.ode_jac(0.3, y, 2.0).toarray(), module.jacobian(y, 2.0, 0.3).toarray()
    )
    solved = solve_ivp(
        lambda t, y, k: module.f(y, k, t), (0.0, 2.0), y, method="BDF",
        jac=module.ode_jac, args=(2.0,), rtol=1e-8, atol=1e-10,
    )  # fmt: skip
    reference = solve_ivp(
        lambda t, y, k: module.f(y, k, t), (0.0, 2.0), y, method="BDF",
        jac_sparsity=module.jacobian_sparsity(), args=(2.0,), rtol=1e-8, atol=1e-10,
    )  # fmt: skip
    assert solved.success and reference.success
    np.testing.assert_allclose(solved.y[:, -1], reference.y[:, -1], rtol=1e-5)


def test_the_brusselator_with_bdf(built: dict[str, ModuleType]) -> None:
    module = built["brusselator"]
    n = 16
    xy = np.linspace(0.0, 1.0, n)
    u0 = np.stack(
        [
            22.0 * (xy[None, :] * (1.0 - xy[None, :])) ** 1.5 * np.ones((n, 1)),
            27.0 * (xy[:, None] * (1.0 - xy[:, None])) ** 1.5 * np.ones((1, n)),
        ]
    ).ravel()

    def rhs(t: float, u: np.ndarray) -> np.ndarray:
        return module.fun(u)  # type: ignore[no-any-return]

    sparsity = module.jacobian_sparsity()
    assert sparsity.shape == (2 * n * n, 2 * n * n)
    by_pattern = solve_ivp(rhs, (0.0, 0.2), u0, method="BDF", jac_sparsity=sparsity)
    exact = solve_ivp(rhs, (0.0, 0.2), u0, method="BDF", jac=module.ode_jac)
    assert by_pattern.success and exact.success
    np.testing.assert_allclose(exact.y[:, -1], by_pattern.y[:, -1], rtol=1e-2)
    assert exact.njev <= by_pattern.njev + 2


RESERVED = """
[[module]]
name = "m"
function = "fn.py:products"
backend = "trace"
input = { shape = [4] }
contexts = [{ name = "v", shape = [3] }]
"""


def test_v_is_refused_only_with_an_operator_taking_v(tmp_path: Path) -> None:
    (tmp_path / "fn.py").write_text(SOURCE)
    config = tmp_path / "difgen.toml"
    config.write_text(RESERVED + 'operators = ["gradient", "hessian"]\n')
    assert load_config(config).modules[0].contexts[0].name == "v"
    config.write_text(RESERVED + 'operators = ["gradient", "hvp"]\n')
    with pytest.raises(ConfigError, match="'v' is a name the generated code uses"):
        load_config(config)


def test_adapter_names_are_reserved_only_with_the_adapter(tmp_path: Path) -> None:
    (tmp_path / "fn.py").write_text(SOURCE)
    config = tmp_path / "difgen.toml"
    base = RESERVED.replace('"v"', '"jac"') + 'operators = ["gradient"]\n'
    config.write_text(base)
    assert load_config(config).modules[0].contexts[0].name == "jac"
    config.write_text(base + 'adapters = ["scipy"]\n')
    with pytest.raises(ConfigError, match="'jac' is a name the generated code uses"):
        load_config(config)


def test_t_is_reserved_only_for_ode_jacs_unused_time(tmp_path: Path) -> None:
    (tmp_path / "fn.py").write_text(SOURCE)
    config = tmp_path / "difgen.toml"
    base = RESERVED.replace('"v"', '"t"').replace("[3] }", "[] }")
    config.write_text(base + 'operators = ["jacobian"]\n')
    assert load_config(config).modules[0].contexts[0].name == "t"
    config.write_text(base + 'operators = ["jacobian"]\nadapters = ["scipy"]\n')
    with pytest.raises(ConfigError, match="'t' is a name the generated code uses"):
        load_config(config)
    config.write_text(
        base + 'operators = ["jacobian"]\nadapters = ["scipy"]\ntime = "t"\n'
    )
    assert load_config(config).modules[0].time == "t"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('triangle = "lower"\n', "'triangle' applies to a sparse hessian"),
        ('adapters = ["pandas"]\n', "'adapters' must list"),
        ('adapters = ["ipopt"]\n', "the ipopt adapter is built from an objective"),
        ('adapters = ["scipy"]\ntime = "v"\n', "'time' names the scalar context"),
    ],
)
def test_solver_keys_are_checked(tmp_path: Path, extra: str, message: str) -> None:
    (tmp_path / "fn.py").write_text(SOURCE)
    config = tmp_path / "difgen.toml"
    config.write_text(RESERVED + 'operators = ["gradient", "hessian"]\n' + extra)
    with pytest.raises(ConfigError, match=message):
        load_config(config)


def test_structure_and_adapters_pass_mypy_strict(built: dict[str, ModuleType]) -> None:
    """The structure functions and the adapters are typed like the operators.
    (The project's mypy settings ignore SciPy's missing stubs, so the modules'
    own ignore of that import would count as unused.)"""
    paths = [str(m.__file__) for m in built.values()]
    flags = ["--strict", "--no-incremental", "--no-warn-unused-ignores"]
    run = subprocess.run(
        [sys.executable, "-m", "mypy", *flags, *paths],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_verify_checks_a_triangle_through_the_whole_hessian(
    built: dict[str, ModuleType],
) -> None:
    config = Path(str(built["h_lower"].__file__)).parents[1] / "difgen.toml"
    result = difgen.verify(config, ["h_lower", "h_upper", "vcon", "ode"])
    assert result.ok, [
        (m.name, op.operator, op.worst)
        for m in result.modules
        for op in m.operators
        if not op.passed
    ]
    assert {m.name for m in result.modules} == {"h_lower", "h_upper", "vcon", "ode"}


def _chain(x: np.ndarray) -> np.ndarray:
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)  # type: ignore[no-any-return]


def test_generate_in_process_takes_the_solver_keywords(tmp_path: Path) -> None:
    module = difgen.generate(
        _chain, np.zeros(6), operators=["gradient", "hessian"], backend="trace",
        sparse=True, triangle="lower", adapters=["scipy"], output_dir=tmp_path,
    )  # fmt: skip
    x = np.linspace(0.3, 1.4, 6)
    rows, cols = module.hessian_structure()
    assert (rows >= cols).all()
    np.testing.assert_array_equal(
        module.hessian(x).toarray()[rows, cols], module.hessian(x).data
    )
    assert (module.hess(x) != module.hess(x).T).nnz == 0
    with pytest.raises(ConfigError, match="unknown key 'constraints'"):
        difgen.generate(
            _chain, np.zeros(6), operators=["gradient", "hessian"],
            constraints={"function": "fn.py:g", "size": 2}, output_dir=tmp_path,
        )  # fmt: skip
    with pytest.raises(ConfigError, match="build it with difgen build"):
        difgen.generate(
            _chain, np.zeros(6), operators=["gradient", "hessian"],
            adapters=["ipopt"], output_dir=tmp_path,
        )  # fmt: skip
