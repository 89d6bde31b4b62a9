"""The ``np`` the user's code sees while tracing.

A ufunc of a list (or tuple) of traced values makes one traced array of it first,
so NumPy never builds an object array of tracers (and tracers need no ``sin``
method: ``x.cos()`` is refused, as NumPy refuses it). ``np.copy`` and ``np.array``
of a module's constant array give a traced array that traced values can be stored
into. Each is checked against NumPy: value bit for bit, JVP against differences,
VJP as its transpose, second order by differences.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import namespace_functions as cases
from difgen.errors import TraceError
from difgen.frontend import trace
from difgen.frontend.namespace import TRACING_NUMPY
from surface_harness import check_trace

FUNCTIONS = [
    cases.ufunc_of_a_list,
    cases.imported_ufunc_of_a_list,
    cases.binary_ufunc_of_lists,
    cases.ufunc_method_of_a_list,
    cases.copy_of_a_constant,
    cases.array_of_a_constant,
]
X = np.array([0.4, -1.3, 0.7, 2.1])


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda fn: fn.__name__)
def test_traced_as_numpy_computes(fn: Any) -> None:
    check_trace(fn, X)


def test_the_constant_is_not_changed_by_the_copy() -> None:
    before = cases.BOUND.copy()
    trace(cases.copy_of_a_constant, [((4,), "float64")])
    trace(cases.array_of_a_constant, [((4,), "float64")])
    np.testing.assert_array_equal(cases.BOUND, before)


def test_no_object_array_is_built() -> None:
    """The list is one traced array before NumPy sees it: the graph packs it."""
    g = trace(cases.ufunc_of_a_list, [((4,), "float64")])
    prims = [e.primitive.name for e in g.eqns]
    assert "pack" in prims and "sin" in prims


def test_the_ufuncs_keep_numpys_attributes() -> None:
    assert TRACING_NUMPY.sin.__name__ == "sin"
    assert TRACING_NUMPY.add.nin == 2 and TRACING_NUMPY.add.identity == 0
    np.testing.assert_array_equal(TRACING_NUMPY.add.reduce([1.0, 2.0]), 3.0)
    np.testing.assert_array_equal(TRACING_NUMPY.sin([0.0, 1.0]), np.sin([0.0, 1.0]))


@pytest.mark.parametrize("method", ["cos", "exp", "sqrt", "arccos", "absolute"])
def test_a_ufunc_is_not_an_array_method(method: str) -> None:
    def f(x: Any) -> Any:
        return getattr(x, method)()

    with pytest.raises(TraceError, match=rf"NumPy arrays have no method {method}: "):
        trace(f, [((3,), "float64")])
    with pytest.raises(AttributeError):
        getattr(np.zeros(3), method)


def test_other_missing_attributes_stay_attribute_errors() -> None:
    """``hasattr`` (which libraries use to probe an array) must keep working."""

    def f(x: Any) -> Any:
        assert not hasattr(x, "flags_of_no_kind")
        assert not hasattr(x, "no_such_thing")
        return x * 2.0

    trace(f, [((3,), "float64")])


def test_an_ndarray_attribute_the_tracer_lacks_says_so() -> None:
    """``x.searchsorted`` is an ndarray method (np.searchsorted is a function too):
    never "NumPy arrays have no method", and still an AttributeError for hasattr."""

    def f(x: Any) -> Any:
        assert not hasattr(x, "device") or x.device == "cpu"
        return x.searchsorted(0.5)

    with pytest.raises(TraceError, match=r"ndarray\.searchsorted is not supported"):
        trace(f, [((3,), "float64")])
