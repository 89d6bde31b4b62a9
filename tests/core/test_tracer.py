"""The tracer: unmodified NumPy code traces into a graph that evaluates like the code."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import tracer_cases as cases
from difgen.core.builder import current_builder, tracing
from difgen.core.tracer import Tracer, tracing_branch, use_array_methods
from difgen.errors import TraceError
from difgen.frontend import trace
from difgen.frontend.array_methods import METHODS
from difgen.primitives import PRIMITIVES

# function, input shape
PATTERNS = [
    (cases.uses_helper, (5,)),
    (cases.array_of_scalars, (3,)),
    (cases.zeros_then_assign, (3,)),
    (cases.loop_fixed_trip, (4,)),
    (cases.slicing_and_fancy, (3, 4)),
    (cases.boolean_mask, (4,)),
    (cases.structure, (3,)),
    (cases.reductions, (3, 4)),
    (cases.linear_algebra, (9,)),
    (cases.selection, (6,)),
    (cases.elementwise_surface, (5,)),
    (cases.derivative_rules, (5,)),
    (cases.more_elementwise, (5,)),
    (cases.special_functions, (5,)),
    (cases.rounding_and_modulo, (5,)),
    (cases.padding_and_products, (4,)),
    (cases.comparisons, (6,)),
    (cases.matrix_functions, (9,)),
    (cases.decompositions, (9,)),
    (cases.integer_index_array, (3,)),
    (cases.control_flow, (3,)),
    (cases.runtime_data, (5,)),
]


@pytest.mark.parametrize("fn,shape", PATTERNS, ids=[f.__name__ for f, _ in PATTERNS])
def test_graph_evaluates_like_the_code(fn, shape) -> None:
    graph = trace(fn, [(shape, "float64")])
    x = np.random.default_rng(0).uniform(0.1, 0.9, shape)
    (got,) = graph.evaluate(x)
    np.testing.assert_allclose(got, fn(x), rtol=1e-12)
    assert np.shape(got) == graph.outputs[0].shape


def test_np_array_of_traced_scalars_is_one_node() -> None:
    """The seed's pattern: np.array([[x + 1, ...]]) becomes a single pack."""
    graph = trace(cases.array_of_scalars, [((3,), "float64")])
    names = [e.primitive.name for e in graph.eqns]
    assert names.count("pack") == 1


def test_constants_fold_and_equal_equations_are_shared() -> None:
    graph = trace(lambda x: np.sin(x) * (2.0 * 3.0) + np.sin(x), [((2,), "float64")])
    names = [e.primitive.name for e in graph.eqns]
    assert names == ["sin", "mul", "add"]


def test_graph_prints_like_a_jaxpr() -> None:
    text = str(trace(lambda x: (x * 2.0).sum(), [((3,), "float64")]))
    assert text.splitlines()[0] == "{ lambda a:f64[3] ."
    assert "reduce_sum[axes=(0,)] b" in text


def _line_of(fn, needle: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if needle in line)


@pytest.mark.parametrize(
    "fn,needle,message",
    [
        (cases.branch_on_value, "if x > i", "returns from inside a loop"),
        (cases.math_on_value, "math.erf", "math.erf"),
        (cases.unsupported, "np.unique", "np.unique is not supported"),
    ],
)
def test_errors_name_the_users_file_and_line(fn, needle: str, message: str) -> None:
    with pytest.raises(TraceError) as info:
        trace(
            fn,
            [((), "float64")] if fn is not cases.unsupported else [((3,), "float64")],
        )
    text = str(info.value)
    assert f"tracer_cases.py:{_line_of(fn, needle)}:" in text
    assert message in text


def test_np_is_restored_after_tracing() -> None:
    trace(cases.zeros_then_assign, [((3,), "float64")])
    assert cases.np is np


def test_every_primitive_is_reached_by_a_pattern() -> None:
    """Coverage: each registered primitive is traced by at least one pattern above."""
    seen: set[str] = set()
    for fn, shape in PATTERNS:
        seen.update(e.primitive.name for e in trace(fn, [(shape, "float64")]).eqns)
    missing = set(PRIMITIVES) - seen
    assert not missing, f"primitives no tracer pattern reaches: {sorted(missing)}"


def test_array_methods_are_the_frontends_and_cannot_replace_the_tracers_own() -> None:
    """The frontend installs the ndarray methods on the core's Tracer; an attribute
    of the tracer itself (write, copy, an operator) is not an array method."""
    assert all(getattr(Tracer, name) is METHODS[name] for name in METHODS)
    for own in ("write", "copy", "astype", "__add__"):
        with pytest.raises(ValueError, match=f"Tracer.{own} is the tracer's own"):
            use_array_methods({own: METHODS["sum"]})
    use_array_methods({"sum": METHODS["sum"]})  # installing again is harmless


def test_a_branch_trace_ends_closed_and_restored_however_it_ends() -> None:
    """tracing_branch: the branch leaves the trace stack, its values may no longer
    be used outside it, and an enclosing array it wrote gets its old value back,
    also when the branch's code raises."""
    with tracing([((3,), "float64")]) as (builder, (var,)):
        x = Tracer(builder, var)
        before = x.atom
        with pytest.raises(ArithmeticError), tracing_branch("f.py:7") as branch:
            assert current_builder() is branch
            x[0] = 1.0  # journaled: x is an array of the enclosing trace
            inner = x * 2.0
            raise ArithmeticError("the branch's code fails")
        assert current_builder() is builder
        assert branch.closed
        assert x.atom is before
        with pytest.raises(TraceError, match=r"the branch at f\.py:7"):
            inner + 1.0
