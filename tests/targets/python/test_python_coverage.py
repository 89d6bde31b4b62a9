"""Every primitive prints as scalar Python code or declares why not, and the claim is
checked on each row of tests/support/primitive_cases.py: a row whose primitives are
all ``scalarizable`` is lowered by their SymPy rules, printed by the scalar
printer (with the helpers it reports) and run on Python floats, giving what the
graph evaluates to; a primitive that is not is named by the reason the scalar
emission gives for not trying (``cost_model.scalar_reason``)."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import pytest
import scipy.special
import sympy as sp

import primitive_cases as cases
from difgen import floats
from difgen.core.ir import Graph
from difgen.core.primitive import NO_HELPER, ScalarHelper
from difgen.derive.lowering import inert, lower, symbols
from difgen.frontend import trace
from difgen.primitives import PRIMITIVES
from difgen.targets import cost as cost_model
from difgen.targets.python.printer import FloatPrinter


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_a_declared_scalar_helper_is_one_the_printers_have(name: str) -> None:
    """``scalar``: a helper of difgen.floats (``fast``, ``numpy``) or ``math``'s own
    function (``safe``), for the primitive's SymPy function and NumPy ``impl``."""
    prim = PRIMITIVES[name]
    helper = prim.scalar
    if not isinstance(helper, ScalarHelper):
        assert helper is NO_HELPER
        return
    assert getattr(np, helper.numpy.removeprefix("np.")) is prim.impl
    assert prim.sympy(np.array([sp.Symbol("t")], dtype=object))[0].func.__name__ in (
        helper.function,
        "Pow",  # sqrt is a power to SymPy, printed with the helper's name
    )
    if helper.family == "safe":
        assert callable(getattr(math, helper.function))
    else:
        assert floats.helper(helper.function) in floats.HELPERS


SCALAR_ROWS = sorted(n for n in cases.ROWS if PRIMITIVES[n].scalarizable)
VECTOR_ROWS = sorted(n for n in cases.ROWS if not PRIMITIVES[n].scalarizable)


@functools.cache
def _graph(name: str) -> Graph:
    fn, shape = cases.ROWS[name]
    return trace(fn, [(shape, "float64")])


def _printed(graph: Graph, shape: tuple[int, ...]) -> Any:
    """The graph's first output as a Python function of the input's elements."""
    xs = symbols("x", shape)
    (y,) = lower(graph, [xs], exact=True)[:1]
    printer = FloatPrinter()
    texts = [printer.doprint(inert(e)) for e in np.asarray(y).ravel()]
    names = [str(s) for s in xs.ravel()]
    source = "".join(floats.definitions(printer.helpers))
    source += f"def fn({', '.join(names)}):\n    return [{', '.join(texts)}]\n"
    # scipy: the special functions only SciPy computes (the module imports it)
    namespace: dict[str, Any] = {"math": math, "np": np, "scipy": scipy}
    exec(source, namespace)  # noqa: S102 (difgen's own printed code)
    return namespace["fn"]


@pytest.mark.parametrize("name", SCALAR_ROWS)
def test_a_scalarizable_primitive_prints_and_runs_as_python(name: str) -> None:
    graph = _graph(name)
    shape = cases.ROWS[name][1]
    assert name in {e.primitive.name for e in graph.eqns}
    fn = _printed(graph, shape)
    x = np.random.default_rng(4).uniform(0.2, 0.8, shape)
    got = np.array(fn(*(float(v) for v in x.ravel())), dtype=np.float64)
    expected = np.asarray(graph.evaluate(x)[0], dtype=np.float64).ravel()
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("name", VECTOR_ROWS)
def test_a_primitive_that_is_not_scalarizable_is_named_as_the_reason(
    name: str,
) -> None:
    """Matrix factorizations, control flow and run-time indexing stay vector code,
    and the scalar emission says which primitive keeps them there."""
    reason = cost_model.scalar_reason(_graph(name))
    assert reason is not None and name in reason.removeprefix("it uses ").split(", ")
