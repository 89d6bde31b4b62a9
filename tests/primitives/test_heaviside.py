"""np.heaviside, a primitive added by its declaration, its NumPy entry point and its
row: every emission returns NumPy's value bit for bit at the special points (both
zeros, NaN, the infinities, the smallest subnormal, a NaN or infinite value at 0),
and every derivative is the exact one: 0 in the argument (the step is flat wherever
it has a derivative), 1 in the value at 0 where the argument is 0 (either zero),
else 0. The row in primitive_cases checks the derivatives against central
differences away from these points."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from compiled import Built
from conftest import SUPPORT
from difgen.targets.c import loops as c_loops

INF, NAN = np.inf, np.nan
ARGUMENT = np.array(
    [-INF, -1.0, -0.0, 0.0, 5e-324, 1.0, INF, NAN, 0.0, -0.0, 0.0, 0.0, 2.0]
)
AT_ZERO = np.array([0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, NAN, 2.0, INF, -0.0, 0.5])
X = np.concatenate([ARGUMENT, AT_ZERO])
N = ARGUMENT.size
OPS = ["f", "jacobian"]

CONFIGS = [
    ("sympy", "auto", "scalar"),
    ("trace", "forward", "vector"),
    ("trace", "reverse", "vector"),
    ("trace", "forward", "scalar"),
    ("trace", "reverse", "scalar"),
]


def _check(module: Any) -> None:
    y = module.f(X)
    expected = np.heaviside(ARGUMENT, AT_ZERO)
    np.testing.assert_array_equal(y, expected)  # NaN where NaN
    assert np.array_equal(np.signbit(y), np.signbit(expected))  # -0.0 where NumPy's
    J = np.asarray(module.jacobian(X))
    assert J.shape == (N, 2 * N)
    np.testing.assert_array_equal(J[:, :N], np.zeros((N, N)))
    np.testing.assert_array_equal(J[:, N:], np.diag((ARGUMENT == 0.0).astype(float)))


@pytest.mark.parametrize("backend,mode,emit", CONFIGS)
def test_every_python_emission_is_numpys(
    module_cache: Any, backend: str, mode: str, emit: str
) -> None:
    module, text = module_cache(
        SUPPORT / "heaviside_cases.py",
        "step",
        X.shape,
        OPS,
        backend=backend,
        mode=mode,
        emit=emit,
    )
    assert ("np.heaviside(" in text) == (emit == "vector")
    _check(module)


def _built(directory: Path, straight_line: bool) -> Built:
    (directory / "heaviside_cases.py").write_text(
        (SUPPORT / "heaviside_cases.py").read_text()
    )
    quoted = ", ".join(f'"{op}"' for op in OPS)
    (directory / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "out"\n\n[[module]]\nname = "step"\n'
        'function = "heaviside_cases.py:step"\nbackend = "trace"\nemit = "c"\n'
        f"operators = [{quoted}]\ninput = {{ shape = [{X.size}] }}\n"
    )
    with pytest.MonkeyPatch.context() as patch:
        if not straight_line:
            patch.setattr(c_loops, "STRAIGHT_LINE_WORK", 0)
        return Built(directory)


@pytest.mark.parametrize("straight_line", [True, False], ids=["straight", "loops"])
def test_the_compiled_emissions_are_numpys(tmp_path: Path, straight_line: bool) -> None:
    built = _built(tmp_path, straight_line)
    compiled = built.compiled("step")
    assert compiled.PYTHON_OPERATORS == ()
    source = (tmp_path / "out" / "step__c.c").read_text()
    # f's own C: straight-line where allowed, else loops (the jacobian, all zeros,
    # takes one reverse row color, whose graph is printed as loops either way)
    f_code = source.split("dg_op_f(")[1].split("dg_op_jacobian(")[0]
    assert ("fused over" in f_code) == (not straight_line)
    _check(compiled)
