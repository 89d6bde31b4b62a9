"""The ndarray methods of tracers: those forwarded to their NumPy function are
declared with its entry point (numpy_api.Method), the others written out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from difgen.core.tracer import Tracer
from difgen.frontend import array_methods, numpy_api, trace
from difgen.frontend.array_methods import METHODS, OWN, forwarded, forwarding
from surface_harness import same

X = np.array([[0.5, -1.5, 2.0], [3.0, 0.25, -0.75], [1.0, 2.5, -2.0]])

CALLS: dict[str, Callable[[Any], Any]] = {
    # every declared method, called with arguments in their places and by keyword
    "all": lambda x: x.all(0) * 1.0,
    "any": lambda x: x.any(axis=1) * 1.0,
    "argmax": lambda x: x[x.argmax(0), 0],
    "argmin": lambda x: x[x.argmin(axis=1), 1],
    "argsort": lambda x: x[0][x[0].argsort()],
    "conjugate": lambda x: x.conjugate(),
    "cumprod": lambda x: x.cumprod(1),
    "cumsum": lambda x: x.cumsum(axis=0),
    "diagonal": lambda x: x.diagonal(1),
    "dot": lambda x: x.dot(x[0]),
    "max": lambda x: x.max(0, keepdims=True),
    "mean": lambda x: x.mean(axis=(0, 1)),
    "min": lambda x: x.min(1),
    "prod": lambda x: x.prod(0),
    "repeat": lambda x: x.repeat(2, axis=0),
    "round": lambda x: x.round(1),
    "squeeze": lambda x: x[:1].squeeze(0),
    "std": lambda x: x.std(0, ddof=1),
    "sum": lambda x: x.sum(1, keepdims=True),
    "swapaxes": lambda x: x[None].swapaxes(0, 2),
    "take": lambda x: x.take([2, 0], axis=1),
    "trace": lambda x: x.trace(1),
    "var": lambda x: x.var(axis=1),
}


def test_the_declared_methods_are_the_entries_marked_as_methods() -> None:
    declared = forwarded(numpy_api.FUNCTIONS, numpy_api.UFUNCS)
    assert set(declared) == set(CALLS)
    assert not set(declared) & set(OWN)
    assert set(METHODS) == set(declared) | set(OWN)
    assert all(getattr(Tracer, name) is METHODS[name] for name in METHODS)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_declared_method_is_numpys_method(name: str) -> None:
    """Traced, each method computes what NumPy's method computes on the array."""
    fn = CALLS[name]
    graph = trace(fn, [(X.shape, "float64")])
    same(graph.evaluate(X)[0], np.asarray(fn(X), dtype=float))


def test_one_declaration_adds_a_method() -> None:
    """A new entry point declared a Method is a method of the same name; one that
    is not stays a function only."""

    def handler(*args: Any, **kwargs: Any) -> str:
        return "handled"

    declared = forwarded(
        {np.ptp: numpy_api.Method(handler), np.nanmax: handler},
        {"negative": numpy_api.Method(handler), "sin": handler},
    )
    assert set(declared) == {"ptp", "negative"}
    assert declared["ptp"].__name__ == "ptp"


def test_a_forwarding_method_passes_the_array_first() -> None:
    x = np.arange(6.0).reshape(2, 3)
    same(forwarding(np.cumsum)(x, 1), x.cumsum(1))
    same(forwarding(np.take)(x, [2, 0], axis=1), x.take([2, 0], axis=1))
    assert (
        array_methods.METHODS["sum"].__doc__ == "``np.sum(x, ...)``, as NumPy's method."
    )
