"""A chain of elementwise equations longer than the demand analysis follows.

An unrolled loop (its body indexes with the counter, so it is not rerolled) is a
chain of as many equations as steps, or more; a thousand steps made the build
overflow Python's stack, and 150 are past the depth here. The C target's demand
analysis walks chains recursively; past :data:`difgen.targets.c.demand.DEPTH` it
declines, as past its other budgets, and the planner prints the loops it would
have without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from compiled import BuiltConfig
from difgen.core.ir import Var
from difgen.targets.c import demand

FUNCTION = """\
import numpy as np


def f(x):
    s = x[0]
    for i in range(150):
        s = s * x[i % 4] + i * 0.5
    return s


def g(x):
    s = x
    for i in range(120):
        s = np.sin(s) * 0.5 + x[i % 3]
    return s
"""

CONFIG = """\
[difgen]
output_dir = "out"

[[module]]
name = "deep_c"
function = "deep.py:f"
backend = "trace"
emit = "c"
operators = ["value_and_gradient", "hvp"]
input = { shape = [4] }

[[module]]
name = "deep"
function = "deep.py:f"
backend = "trace"
emit = "vector"
operators = ["value_and_gradient", "hvp"]
input = { shape = [4] }

[[module]]
name = "wide_c"
function = "deep.py:g"
backend = "trace"
emit = "c"
operators = ["jacobian"]
input = { shape = [3] }

[[module]]
name = "wide"
function = "deep.py:g"
backend = "trace"
emit = "vector"
operators = ["jacobian"]
input = { shape = [3] }
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    directory: Path = tmp_path_factory.mktemp("deep_chains")
    (directory / "deep.py").write_text(FUNCTION)
    return BuiltConfig(directory, CONFIG)


POINTS = [
    np.array([0.9, 0.99, 1.001, 0.95]),
    np.array([1.0, -1.0, 0.5, np.nan]),
    np.array([np.inf, 1.0, 0.999, 1.0]),
]


@pytest.mark.parametrize("x", POINTS, ids=["plain", "nan", "inf"])
def test_a_long_scalar_chain_builds_in_c_and_agrees(
    built: BuiltConfig, x: np.ndarray
) -> None:
    c, py = built.get("deep_c"), built.get("deep")
    v = np.array([0.3, -0.2, 0.1, 0.4])
    with np.errstate(all="ignore"):
        for got, want in zip(c.value_and_gradient(x), py.value_and_gradient(x)):
            np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
        np.testing.assert_allclose(c.hvp(x, v), py.hvp(x, v), rtol=1e-12)


def test_a_deep_vector_chain_builds_in_c_and_agrees(built: BuiltConfig) -> None:
    x = np.array([0.1, -0.4, 0.7])
    np.testing.assert_allclose(
        built.get("wide_c").jacobian(x), built.get("wide").jacobian(x), rtol=1e-12
    )


def test_the_analysis_declines_past_its_depth() -> None:
    """Just within the depth it analyses the chain; one equation more, it declines
    (and never recurses deeper than it may)."""
    from difgen.frontend.tracing import trace

    def chain(n: int) -> Any:
        def fn(x: Any) -> Any:
            for _ in range(n):
                x = x * 0.5 + 1.0
            return x

        return trace(fn, [((3,), "float64")])

    within, past = chain(demand.DEPTH // 2), chain(demand.DEPTH // 2 + 1)
    for graph, depth in ((within, demand.DEPTH), (past, demand.DEPTH + 2)):
        out = graph.outputs[0]
        assert isinstance(out, Var)
        assert demand.chain_depth(graph, out) == depth
    assert demand.demand_of(within, within.outputs[0], {}) is not None
    assert demand.demand_of(past, past.outputs[0], {}) is None
