"""A returned CSR matrix is the caller's: changing it never changes the module.

SciPy keeps the index arrays a CSR array is built from (``indptr`` itself,
``indices`` as a view). When the generated wrappers passed the module's pattern
constants, ``J.eliminate_zeros()`` on one result rewrote the module's ``indptr``
and every later call returned a matrix of the wrong structure. Each variant below
(both backends, and compiled) takes a result, damages it in every way SciPy and
NumPy allow, and checks that the next call is still the right matrix, and that a
returned matrix still serves as ``out=``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import scipy.sparse

import difgen
from conftest import import_file

SOURCE = """
import numpy as np


def chain(x):
    return np.sum(x[1:] * x[:-1] ** 2) + np.sum(np.sin(x))


def field(x):
    return x[1:] * x[:-1] - np.cos(x[1:])
"""

VARIANTS = {
    "sympy": 'backend = "sympy"',
    "trace": 'backend = "trace"',
    "trace-c": 'backend = "trace"\nemit = "c"',
    "sympy-c": 'backend = "sympy"\nemit = "c"',
}


def _table(name: str, function: str, ops: str, extra: str) -> str:
    return (
        f'[[module]]\nname = "{name}"\nfunction = "fn.py:{function}"\n{extra}\n'
        f"operators = {ops}\ninput = {{ shape = [6] }}\nsparse = true\n"
    )


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModuleType]:
    project = tmp_path_factory.mktemp("sparse_results")
    (project / "fn.py").write_text(SOURCE)
    parts = ['[difgen]\noutput_dir = "out"\n']
    for variant, extra in VARIANTS.items():
        tag = variant.replace("-", "_")
        parts.append(_table(f"h_{tag}", "chain", '["hessian"]', extra))
        parts.append(_table(f"j_{tag}", "field", '["jacobian"]', extra))
    (project / "difgen.toml").write_text("\n".join(parts))
    difgen.build(project / "difgen.toml", compile=True)
    out = project / "out"
    return {p.stem: import_file(p) for p in sorted(out.glob("*.py"))}


def _zero_some(m: Any) -> None:
    m.data[::2] = 0.0
    m.eliminate_zeros()


DAMAGE: dict[str, Callable[[Any], None]] = {
    "eliminate_zeros": _zero_some,
    "indices_written": lambda m: m.indices.__setitem__(slice(None), 0),
    "indptr_written": lambda m: m.indptr.__setitem__(slice(1, None), m.indptr[-1]),
    "unsorted_then_sorted": lambda m: (
        m.indices.__setitem__(slice(0, 2), m.indices[1::-1].copy()),
        m.sort_indices(),
    ),
    "resized": lambda m: m.resize((3, 3)),
}


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("kind", ["h", "j"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_damaging_a_result_leaves_the_module_intact(
    modules: dict[str, ModuleType], variant: str, kind: str, damage: str
) -> None:
    module = modules[f"{kind}_{variant.replace('-', '_')}"]
    if variant.endswith("-c"):
        assert module.COMPILED, module.C_FALLBACK_REASON
    op = getattr(module, "hessian" if kind == "h" else "jacobian")
    x = np.linspace(0.3, 1.4, 6)
    expected = op(x).toarray()
    result = op(x)
    DAMAGE[damage](result)
    again = op(x)
    assert scipy.sparse.issparse(again)
    np.testing.assert_array_equal(again.toarray(), expected)
    if "out" not in inspect.signature(op).parameters:
        return
    # A returned matrix still serves as out= (the pattern is checked, not trusted).
    fresh = op(x + 0.1)
    assert op(x, out=fresh) is fresh
    np.testing.assert_array_equal(fresh.toarray(), expected)


def test_a_damaged_matrix_is_refused_as_out(modules: dict[str, ModuleType]) -> None:
    for variant in VARIANTS:  # every emission takes a CSR out=
        op = modules[f"j_{variant.replace('-', '_')}"].jacobian
        x = np.linspace(0.3, 1.4, 6)
        damaged = op(x)
        _zero_some(damaged)
        with pytest.raises(ValueError, match="sparsity pattern"):
            op(x, out=damaged)
