"""The ``sympy`` facts name their SymPy functions (``Deferred``): declaring the
primitives imports no SymPy, and every name resolves to what it says."""

from __future__ import annotations

import subprocess
import sys

import pytest
import sympy as sp

from difgen.core.primitive import PRIMITIVES, Deferred, ScalarHelper, resolved
from difgen.primitives.family import objectwise
from difgen.primitives.singular import SINC_D1, SINC_TERMS


def _deferred(rule: object) -> Deferred | None:
    if isinstance(rule, objectwise):
        rule = rule.rule
    return rule if isinstance(rule, Deferred) else None


DEFERRED = {
    name: rule
    for name, prim in sorted(PRIMITIVES.items())
    if (rule := _deferred(prim.sympy)) is not None
}


def test_the_symbolic_families_defer_their_rules() -> None:
    for name in ("sin", "log1p", "cbrt", "hypot", "floor", "lt", "where", "sinc"):
        assert name in DEFERRED
    for name in ("erf", "polygamma", "reduce_max", "inv", "logical_and"):
        assert name in DEFERRED


@pytest.mark.parametrize("name", sorted(DEFERRED))
def test_every_deferred_rule_resolves(name: str) -> None:
    target = DEFERRED[name].resolve()
    assert callable(target)
    assert DEFERRED[name].resolve() is target  # imported once


@pytest.mark.parametrize(
    "name",
    sorted(n for n, p in PRIMITIVES.items() if isinstance(p.scalar, ScalarHelper)),
)
def test_a_scalar_helper_is_named_after_its_sympy_function(name: str) -> None:
    """The scalar printers map a SymPy function by ``__name__``: a deferred rule's
    ``name`` must be what its head calls itself (``NpCbrt`` is ``cbrt``)."""
    prim = PRIMITIVES[name]
    assert isinstance(prim.scalar, ScalarHelper)
    rule = prim.sympy.rule if isinstance(prim.sympy, objectwise) else prim.sympy
    assert prim.scalar.function == resolved(rule).__name__


def test_a_deferred_rule_is_called_as_its_target() -> None:
    rule = Deferred("sympy:sin")
    assert rule.name == "sin"
    assert rule(sp.Symbol("t")) == sp.sin(sp.Symbol("t"))
    with pytest.raises(ValueError, match="module:attribute"):
        Deferred("sympy.sin")


def test_declaring_the_primitives_imports_no_sympy() -> None:
    code = (
        "import sys, difgen.primitives, difgen.frontend; "
        "print(sorted(m for m in ('sympy', 'mpmath') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    )
    assert out.stdout.strip() == "[]"


def test_the_written_out_sinc_coefficients_are_the_nearest_floats() -> None:
    """a_n = (-1)^n pi^(2n) 2n / (2n+1)!, evaluated by SymPy to 40 digits."""
    exact = tuple(
        float(sp.N((-1) ** n * sp.pi ** (2 * n) * 2 * n / sp.factorial(2 * n + 1), 40))
        for n in range(1, SINC_TERMS + 1)
    )
    assert exact == SINC_D1
