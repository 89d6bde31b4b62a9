"""Formatting long runs of simple statements apart gives black's bytes exactly.

``difgen.render.blackfast`` formats a module's long runs of temporary assignments
by shape instead of handing them to black inside the module (issue 9: black was
most of a large build). These tests compare it with black on the whole module,
on lines black leaves alone, lines it splits (at lengths around the limit, with
temporaries of different digit counts) and lines the fast path must leave to black.
"""

from __future__ import annotations

import black
import pytest

from difgen import naming
from difgen.render import blackfast


def module(body: list[str]) -> str:
    """A module with one function of ``body`` and some code around it."""
    lines = ["import numpy as np", "", "", "def f(x):", '    """Doc."""']
    lines += ["    " + line for line in body]
    lines += ["    return t0", "", "", "def g(y):", "    return y", ""]
    return "\n".join(lines)


def fast(body: list[str]) -> str:
    """The module formatted through the fast path."""
    (kept,), runs = blackfast.extract_runs([body])
    return blackfast.format_with_runs(module(list(kept)), runs, lambda: module(body))


def body_of(n: int) -> list[str]:
    """Lines of every kind: short, long enough to split, subscripted targets,
    temporaries of 1 to 4 digits, a comment and a string (left to black)."""
    body = ["t0 = np.array([x[0], x[1]])"]
    for i in range(1, n):
        a, b, c = (7 * i) % 10_000, (13 * i) % 997, i
        body.append(f"t{c} = t{a}[0]")
        body.append(
            f"t{c} = np.array([t{a} + 0.05 * t{b}, t{b} + 0.05 * (-4.0 * t{a} "
            f"- 0.3 * t{b} + 0.5 * np.sin(t{a}))])"
        )
        body.append(f"t{c}[1] = np.cos(t{a}) * (0.025 * t{b}) - 0.2 * t{b} + t{c}")
        body.append(f"t{c} = t{a}**2 + np.sum(t{b}[1:, None] * t{c}[None, :-1])")
        if i % 25 == 0:
            body.append("# a comment stays with black")
            body.append("t1 = np.asarray('x')")
    return body


def test_fast_path_matches_black_on_the_whole_module() -> None:
    body = body_of(120)
    expected = black.format_str(module(body), mode=black.Mode(line_length=88))
    (kept,), runs = blackfast.extract_runs([body])
    assert runs, "the fast path was not taken"
    assert len(kept) < len(body) / 10
    assert fast(body) == expected


def test_short_runs_and_unusual_lines_stay_in_the_module() -> None:
    body = ["t1 = x[0]"] * (blackfast.MIN_RUN - 1) + [
        "t2 = [t1 for t1 in x]  # comment",
        "t3 = f(*t2)",
        "t4 = (t5 := t1)",
        "t6 = 'a'",
    ]
    (kept,), runs = blackfast.extract_runs([body])
    assert runs == [] and list(kept) == body
    assert fast(body) == black.format_str(module(body), mode=blackfast.MODE)


def test_a_lost_placeholder_falls_back_to_black_on_the_whole_module() -> None:
    body = body_of(10)
    (kept,), runs = blackfast.extract_runs([body])
    skeleton = module([line for line in kept if "DIFGEN_RUN" not in line])
    expected = black.format_str(module(body), mode=blackfast.MODE)
    assert blackfast.format_with_runs(skeleton, runs, lambda: module(body)) == expected


def test_the_name_check_sees_the_names_a_run_assigns() -> None:
    body = [f"t{i} = x[0] + {i}.0" for i in range(20)] + ["t99[0] = 1.0"] * 20
    (kept,), runs = blackfast.extract_runs([body])
    assert blackfast.assigned_names(runs, kept) == {f"t{i}" for i in range(20)}
    with pytest.raises(naming.NameClash, match="'t7' is assigned in the body"):
        naming.check_module("def f(x, t7):\n    pass\n", {"f": {"t7"}})
    comprehension = ["t1 = [t2 for t2 in x]"] * 20
    (kept,), runs = blackfast.extract_runs([comprehension])
    assert blackfast.assigned_names(runs, kept) is None
