"""A module imports and defines what its printers report their code names, never
what a read of the printed text finds (targets/parts.py, ``Uses``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from conftest import write_config
from difgen import floats, naming
from difgen.config import load_config
from difgen.errors import InternalError
from difgen.load import load_function
from difgen.pipeline import build_parts, trace_spec
from difgen.render.module import imports_of, module_uses
from difgen.targets.parts import MATH, SCIPY_SPARSE, TYPING, Function, Uses

ROOT = Path(__file__).resolve().parents[2]
SPARSE = ROOT / "tests" / "support" / "c_sparse_functions.py"
FUNCTIONS = ROOT / "tests" / "support" / "uses_functions.py"

CASES = {
    # name: (source, function, input shape, operators, contexts, options)
    "scalar_sparse": (
        FUNCTIONS,
        "coupled",
        [5],
        ["jacobian"],
        [],
        {"sparse": True, "backend": "sympy"},
    ),
    "sympy_sparse_c": (
        SPARSE,
        "chain",
        [5],
        ["jacobian", "value_and_jacobian"],
        [],
        {"sparse": True, "backend": "sympy", "emit": "c"},
    ),
    "vector_sparse": (
        SPARSE,
        "stencil",
        [50],
        ["jacobian", "value_and_jacobian"],
        [],
        {"sparse": True, "backend": "trace", "emit": "vector"},
    ),
    "loops_sparse_c": (
        SPARSE,
        "stencil",
        [50],
        ["jacobian", "value_and_jacobian"],
        [],
        {"sparse": True, "backend": "trace", "emit": "c"},
    ),
    "loop_adjoint_points": (
        FUNCTIONS,
        "halving",
        [4],
        ["jacobian", "pullback"],
        [[]],
        {"points": True, "backend": "trace"},
    ),
}


def _function(**uses: Any) -> Function:
    """A function whose body names SciPy, a loop's stack type and the CSR check."""
    body = (
        "t0: list[Any] = []",
        f"data = {naming.CHECK_CSR_OUT}(out, I, P, (2, 2))",
        "return sp.csr_array((math.sin(x), I, P), shape=(2, 2))",
    )
    return Function("jacobian", "x: float", "sp.csr_array", "doc", body, **uses)


def test_the_imports_are_those_reported_not_those_the_text_names() -> None:
    silent = module_uses([_function()])
    assert silent == Uses()
    assert imports_of(silent) == [
        "",
        "import numpy as np",
        "from numpy.typing import NDArray",
    ]
    reported = module_uses(
        [
            _function(
                modules=frozenset({MATH, TYPING, SCIPY_SPARSE}),
                helpers=frozenset({naming.CHECK_CSR_OUT}),
            )
        ]
    )
    assert imports_of(reported) == [
        "import math",
        "from typing import Any",
        "",
        "import numpy as np",
        "from numpy.typing import NDArray",
        "import scipy.sparse as sp  # type: ignore[import-untyped]",
    ]


def test_a_float_helper_brings_math_and_the_csr_check_does_not() -> None:
    helper = floats.NAMES[0]
    assert "import math" in imports_of(Uses(helpers=frozenset({helper})))
    assert "import math" not in imports_of(
        Uses(helpers=frozenset({naming.CHECK_CSR_OUT}))
    )


@pytest.mark.parametrize(
    "uses",
    [{"modules": frozenset({"mpmath"})}, {"helpers": frozenset({"_nowhere"})}],
)
def test_a_report_no_module_can_satisfy_is_a_difgen_bug(uses: Any) -> None:
    with pytest.raises(InternalError, match=r"mpmath|_nowhere"):
        module_uses([_function(**uses)])


def _named(f: Function) -> Uses:
    """What ``f``'s printed code (signature, body, C wrappers) names, read from
    its text: the oracle the printers' reports are checked against."""
    text = "\n".join(
        [f.signature, f.returns, *f.body, *(source for _, source in f.wrappers)]
    )
    modules = {
        module
        for module, pattern in (
            (SCIPY_SPARSE, r"\bsp\."),
            (TYPING, r"\bAny\b"),
            (MATH, r"(?<![\w.])math\."),
        )
        if re.search(pattern, text)
    }
    helpers = {
        name
        for name in (naming.CHECK_CSR_OUT, *floats.NAMES)
        if re.search(rf"(?<![\w.]){re.escape(name)}\b", text)
    }
    return Uses(frozenset(helpers), frozenset(modules))


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Function]]:
    found = {}
    for name, (source, function, shape, operators, contexts, options) in CASES.items():
        directory = tmp_path_factory.mktemp(name)
        config = load_config(
            write_config(
                directory, source, function, shape, operators, contexts, **options
            )
        )
        (spec,) = config.modules
        parts = build_parts(spec, trace_spec(spec, load_function(spec)))
        found[name] = parts.functions
    return found


@pytest.mark.parametrize("case", CASES)
def test_every_printer_reports_what_its_code_names(
    printed: dict[str, list[Function]], case: str
) -> None:
    """A printer that writes ``sp.``, ``Any``, ``math.``, the CSR check or a float
    helper without reporting it (or reports what it did not write) fails here."""
    for f in printed[case]:
        assert f.uses == _named(f), f.name


def test_the_cases_exercise_every_reported_module_and_the_csr_check(
    printed: dict[str, list[Function]],
) -> None:
    everything = module_uses([f for fs in printed.values() for f in fs])
    assert {SCIPY_SPARSE, TYPING, MATH} <= everything.modules
    assert naming.CHECK_CSR_OUT in everything.helpers
    assert any(
        f.wrappers and SCIPY_SPARSE in f.modules for f in printed["loops_sparse_c"]
    )
    assert any(
        f.block_of and TYPING in f.modules for f in printed["loop_adjoint_points"]
    )
