"""Libraries written in NumPy trace: SciPy's Rosenbrock family goes through SciPy's
array-API shims (``array_namespace``, ``xp_promote``, ``np.result_type``,
``xp.zeros``...), and difgen's derivatives of it agree with SciPy's own
``rosen_der``, ``rosen_hess`` and ``rosen_hess_prod``, on both backends."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.optimize

import library_functions as lib
from conftest import SUPPORT
from difgen.frontend import trace

SOURCE = SUPPORT / "library_functions.py"
BACKENDS = [("sympy", "auto"), ("trace", "forward"), ("trace", "reverse")]
POINTS = [
    np.array([0.3, -1.2, 0.8, 1.5, -0.4]),
    np.array([1.0, 1.0, 1.0, 1.0, 1.0]),
]


def close(actual: Any, expected: Any) -> None:
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), 1e-12, 1e-10)


@pytest.mark.parametrize(
    "name", ["rosen", "rosen_der", "rosen_hess_prod", "rosen_hess"]
)
def test_the_traced_value_is_scipys_bit_for_bit(name: str) -> None:
    fn = getattr(lib, name)
    g = trace(fn, [((5,), "float64")])
    for x in POINTS:
        np.testing.assert_array_equal(g.evaluate(x)[0], fn(x))


@pytest.mark.parametrize("backend,mode", BACKENDS)
def test_rosen_derivatives_are_scipys(
    module_cache: Any, backend: str, mode: str
) -> None:
    mod, _ = module_cache(
        SOURCE,
        "rosen",
        (5,),
        ["gradient", "hessian", "hvp"],
        backend=backend,
        mode=mode,
    )
    for x in POINTS:
        assert mod.f(x) == scipy.optimize.rosen(x)
        close(mod.gradient(x), scipy.optimize.rosen_der(x))
        close(mod.hessian(x), scipy.optimize.rosen_hess(x))
        close(mod.hvp(x, lib.P), scipy.optimize.rosen_hess_prod(x, lib.P))


@pytest.mark.parametrize("backend,mode", BACKENDS)
def test_rosen_der_and_hess_prod_jacobians_are_scipys_hessian(
    module_cache: Any, backend: str, mode: str
) -> None:
    der, _ = module_cache(
        SOURCE, "rosen_der", (5,), ["jacobian"], backend=backend, mode=mode
    )
    prod, _ = module_cache(
        SOURCE, "rosen_hess_prod", (5,), ["jacobian"], backend=backend, mode=mode
    )
    for x in POINTS:
        np.testing.assert_array_equal(der.f(x), scipy.optimize.rosen_der(x))
        close(der.jacobian(x), scipy.optimize.rosen_hess(x))
        # d/dx (H(x) p): only the diagonal of H depends on x (1200 x_i^2 - 400
        # x_{i+1} + 202...), so compare with differences of SciPy's own product
        h = 1e-6
        fd = np.stack(
            [
                (
                    scipy.optimize.rosen_hess_prod(x + h * e, lib.P)
                    - scipy.optimize.rosen_hess_prod(x - h * e, lib.P)
                )
                / (2 * h)
                for e in np.eye(5)
            ],
            axis=1,
        )
        np.testing.assert_allclose(prod.jacobian(x), fd, 1e-6, 1e-5)


def test_a_library_computing_constants_keeps_numpys_arrays() -> None:
    """``roots_legendre`` builds its nodes with NumPy and LAPACK inside the traced
    function: it gets NumPy's own arrays, and the trace equals the function."""
    g = trace(lib.gauss_legendre, [((2,), "float64")])
    x = np.array([0.7, -0.2])
    np.testing.assert_array_equal(g.evaluate(x)[0], lib.gauss_legendre(x))


def test_a_module_imported_while_tracing_keeps_numpy_constants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Module-level code run by an import inside the traced function makes NumPy
    arrays (they outlive the trace); a local ``import numpy`` in the function
    itself makes traced arrays, as the module-level ``np`` does."""
    (tmp_path / "lazy_table_module.py").write_text(
        "import numpy as np\nTABLE = np.zeros(3) + 1.0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazy_table_module", raising=False)

    def f(x: Any) -> Any:
        import lazy_table_module
        import numpy

        z = numpy.zeros(3)
        z[0] = x[0] * x[1]
        return (x * lazy_table_module.TABLE + z).sum()

    g = trace(f, [((3,), "float64")])
    import lazy_table_module

    assert type(lazy_table_module.TABLE) is np.ndarray
    x = np.array([0.5, 2.0, -1.0])
    np.testing.assert_array_equal(g.evaluate(x)[0], f(x))
