"""Libraries written in NumPy trace: SciPy's Rosenbrock family goes through SciPy's
array-API shims (``array_namespace``, ``xp_promote``, ``np.result_type``,
``xp.zeros``...), and difgen's derivatives of it agree with SciPy's own
``rosen_der``, ``rosen_hess`` and ``rosen_hess_prod``, on both backends."""

from __future__ import annotations

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


@pytest.mark.parametrize("name", ["rosen", "rosen_der", "rosen_hess_prod"])
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
