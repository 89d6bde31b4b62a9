"""``emit = "c"`` points variants with ``x`` shared between points
(``input.per_point = false``): one C loop over the points reading the shared
parameters once, equal to ``jax.vmap(..., in_axes=(None, 0, 0))`` at 1e-12 and to
the NumPy fallback's rows, with the same argument checks.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import difgen
from conftest import import_file
from in_axes_cases import (
    CASES,
    SOURCE,
    TOLERANCE,
    arguments,
    jax_reference,
    write_config,
)

MODULES = {
    "logistic_trace": ("logistic", "trace"),
    "logistic_sympy": ("logistic", "sympy"),
    "mlp_trace": ("mlp", "trace"),
    "residuals_trace": ("residuals", "trace"),
}


class Built:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        texts = ['[difgen]\noutput_dir = "out"\n']
        for module, (name, backend) in MODULES.items():
            xs, contexts, operators = CASES[name]
            path = write_config(
                directory / module, name, xs, contexts, operators, backend, emit="c"
            )
            body = path.read_text().split("[[module]]\n", 1)[1]
            texts.append(
                "[[module]]\n" + body.replace('name = "mod"', f'name = "{module}"')
            )
        shutil.copy(SOURCE, directory / SOURCE.name)
        config = directory / "difgen.toml"
        config.write_text("\n".join(texts))
        difgen.build(config, compile=True)
        self.modules: dict[tuple[str, bool], ModuleType] = {}

    def get(self, module: str, compiled: bool = True) -> ModuleType:
        if (module, compiled) not in self.modules:
            path = self.directory / "out" / f"{module}.py"
            if not compiled:
                lone = self.directory / "python" / module
                lone.mkdir(parents=True)
                path = Path(shutil.copy(path, lone))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                loaded = import_file(path)
            assert loaded.COMPILED is compiled, loaded.C_FALLBACK_REASON
            self.modules[module, compiled] = loaded
        return self.modules[module, compiled]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return Built(tmp_path_factory.mktemp("c_points_in_axes"))


def _call(module: ModuleType, name: str, operator: str, k: int) -> tuple[Any, Any]:
    """(the points variant's result, JAX's) at ``k`` points."""
    args = arguments(name, k, seed=k)
    theta, *data = args
    rng = np.random.default_rng(7)
    seed = None
    if operator in ("hvp", "pushforward"):
        seed = rng.normal(size=(k, *theta.shape))
    elif operator == "pullback":
        seed = rng.normal(size=(k, 2))
    if operator == "value_and_gradient":
        return module.value_and_gradient_points(*args)[1], jax_reference(
            name, "gradient", args, None
        )
    variant = getattr(module, f"{operator}_points")
    got = variant(theta, seed, *data) if seed is not None else variant(*args)
    return got, jax_reference(name, operator, args, seed)


CASES_C = [(m, op) for m, (n, _) in MODULES.items() for op in CASES[n][2]]


@pytest.mark.parametrize(("module", "operator"), CASES_C)
def test_every_points_variant_is_compiled(
    built: Built, module: str, operator: str
) -> None:
    loaded = built.get(module)
    assert loaded.PYTHON_OPERATORS == ()
    assert type(getattr(loaded, f"{operator}_points")).__name__ == (
        "builtin_function_or_method"
    )


@pytest.mark.parametrize(("module", "operator"), CASES_C)
@pytest.mark.parametrize("k", [0, 1, 100, 3000])
def test_equal_jax_vmap(built: Built, module: str, operator: str, k: int) -> None:
    name = MODULES[module][0]
    got, want = _call(built.get(module), name, operator, k)
    assert got.shape == (k, *np.shape(want)[1:])
    np.testing.assert_allclose(got, want, rtol=TOLERANCE, atol=TOLERANCE)


@pytest.mark.parametrize(("module", "operator"), CASES_C)
def test_equal_the_numpy_fallback(built: Built, module: str, operator: str) -> None:
    name = MODULES[module][0]
    compiled, _ = _call(built.get(module), name, operator, 50)
    python, _ = _call(built.get(module, compiled=False), name, operator, 50)
    np.testing.assert_allclose(compiled, python, rtol=1e-10, atol=1e-13)


def test_shared_x_is_read_once_in_c(built: Built) -> None:
    """Each thread of the C loop reads the parameters before its block of points."""
    source = (built.directory / "out" / "mlp_trace__c.c").read_text()
    work = source.split("dg_work_gradient_points(void", 1)[1].split("\n}\n", 1)[0]
    before, loop = work.split("for (npy_intp dg_i = dg_b->start;", 1)
    assert "dg_p_x" in before and "dg_p_x" not in loop.split("dg_q_")[0]
    body = source.split("dg_op_gradient_points(", 1)[1].split("\n}\n", 1)[0]
    assert "dg_k = PyArray_DIM((PyArrayObject *)dg_in[1], 0);" in body


@pytest.mark.parametrize("compiled", [True, False])
def test_same_refusals(built: Built, compiled: bool) -> None:
    loaded = built.get("logistic_trace", compiled)
    theta, X, y = arguments("logistic", 5)
    with pytest.raises(
        ValueError, match=r"gradient_points: y: has 3 points .*but X has 5"
    ):
        loaded.gradient_points(theta, X, y[:3])
    with pytest.raises(ValueError, match=r"hvp_points: X: has 4 points .*but v has 5"):
        loaded.hvp_points(theta, np.ones((5, 3)), X[:4], y)
    with pytest.raises(ValueError, match="gradient_points: x: expected shape"):
        loaded.gradient_points(np.tile(theta, (5, 1)), X, y)
    with pytest.raises(
        ValueError, match=r"gradient_points: X: expected shape \(k, 3\)"
    ):
        loaded.gradient_points(theta, X[:, :2], y)
