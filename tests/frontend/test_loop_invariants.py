"""Loop-invariant code motion (issue 21, item 4): what a loop's body computes from
its constants alone is computed once, before the loop, and passed as a constant
(``frontend/control/invariants.py``), so the body does not re-read ``p[0]`` at
every step and the adjoint accumulates the cotangents of those scalars instead of
building a ``(2,)`` array from zeros per step. The values are unchanged: every case
of ``static_loop_cases`` still equals its unrolling (``test_static_loops``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import static_loop_cases as cases
from conftest import SUPPORT, build_and_import, operators_source, write_config
from difgen.ad.transpose import vjp
from difgen.core.ir import evaluate
from difgen.frontend import trace
from difgen.frontend.control import helpers


def _loop(graph: Any) -> Any:
    return next(e for e in graph.eqns if e.primitive.name == "while_loop")


def test_the_body_reads_the_hoisted_scalars(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(helpers, "UNROLL_EQUATIONS", 0)
    graph = trace(cases.euler, [((2,), "float64")])
    loop = _loop(graph)
    body = loop.params.as_dict()["body"].graph
    n = loop.params.as_dict()["n_state"]
    assert all(v.shape == () for v in body.inputs[n:])  # -p[0] and p[1], not p
    assert not any(e.primitive.name in ("getitem", "neg") for e in body.eqns)
    for x in cases.CASES["euler"][2]:
        np.testing.assert_allclose(evaluate(graph, [x])[0], cases.euler(x), rtol=1e-15)


def test_the_adjoint_accumulates_scalars(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(helpers, "UNROLL_EQUATIONS", 0)
    adjoint = vjp(trace(cases.euler, [((2,), "float64")]))
    sweep = next(e for e in adjoint.eqns if e.primitive.name == "sweep")
    back = sweep.params.as_dict()["back"].graph
    assert all(o.shape == () for o in back.outputs)


def test_the_python_gradient_runs_one_forward_loop_and_allocates_no_array(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(helpers, "UNROLL_EQUATIONS", 0)
    cfg = write_config(
        tmp_path,
        SUPPORT / "static_loop_cases.py",
        "euler",
        [2],
        ["gradient"],
        backend="trace",
        mode="reverse",
    )
    module, _ = build_and_import(cfg)
    source = operators_source(module)
    backward = source[source.index("in reversed(") :].split("\n    t")[0]
    assert "np.zeros" not in backward and "[" not in backward.split(":", 1)[1]
    # the primal loop records the tape: one forward loop, then the backward one
    gradient = source[source.index("def gradient") :]
    assert gradient.count("while ") == 1 and gradient.count("in reversed(") == 1
    assert "# the tape of a sweep below" in gradient
