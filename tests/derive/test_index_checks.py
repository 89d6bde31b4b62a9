"""The run-time index checks recorded from a traced graph (difgen.derive.checks)
and the statements that perform them (difgen.targets.signatures.index_checks)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import difgen
import difgen.ad
from conftest import import_file
from difgen.derive.checks import IndexCheck, index_checks
from difgen.frontend import trace
from difgen.targets.signatures import index_checks as check_lines


def _graph(fn: Any, x: tuple[int, ...], *contexts: tuple[int, ...]) -> Any:
    return trace(fn, [(x, "float64"), *((c, "int64") for c in contexts)])


def _checks(fn: Any, x: tuple[int, ...], *contexts: tuple[int, ...]) -> Any:
    names = [f"c{i}" for i in range(len(contexts))]
    return index_checks(_graph(fn, x, *contexts), names)


def test_a_context_read_as_an_index_is_checked_against_its_axis() -> None:
    """x[idx], np.take and a store y[idx] = v: one check each, deduplicated."""

    def fn(x: Any, idx: Any) -> Any:
        y = 2.0 * x
        y[idx] = 1.0
        return np.sum(x[idx]) + np.sum(np.take(x, idx)) + np.sum(y)

    assert _checks(fn, (4,), (3,)) == (IndexCheck("c0", None, 0, 4),)


def test_static_selections_of_a_context_check_the_elements_they_read() -> None:
    """edges[:, 0] and edges.T[1] read alternate elements; each axis of a 2-D fancy
    index has its own length."""

    def fn(x: Any, edges: Any) -> Any:
        m = x.reshape(2, 3)
        return np.sum(m[edges[:, 0], edges.T[1]])

    assert _checks(fn, (6,), (5, 2)) == (
        IndexCheck("c0", (0, 2, 4, 6, 8), 0, 2),
        IndexCheck("c0", (1, 3, 5, 7, 9), 1, 3),
    )


@pytest.mark.parametrize(
    ("index", "axis", "size"),
    [
        (lambda m, i: m[..., i], 2, 4),
        (lambda m, i: m[:, None, i], 1, 3),
        (lambda m, i: m[None, 1, ..., i], 2, 4),
        (lambda m, i: m[i], 0, 2),
    ],
)
def test_the_axis_counts_ellipsis_and_new_axes(
    index: Any, axis: int, size: int
) -> None:
    def fn(x: Any, idx: Any) -> Any:
        return np.sum(index(x.reshape(2, 3, 4), idx))

    assert _checks(fn, (24,), (2,)) == (IndexCheck("c0", None, axis, size),)


def test_integer_arithmetic_on_a_context_is_checked_through_the_arithmetic() -> None:
    """x[idx + 1], x[2 * idx - 1]: the check applies the function's arithmetic (a
    constant on either side) to the context's elements before the bound."""

    def shifted(x: Any, idx: Any) -> Any:
        return np.sum(x[idx + 1]) + np.sum(x[2 * idx - 1]) + np.sum(x[idx[::2] % 3])

    assert _checks(shifted, (4,), (3,)) == (
        IndexCheck("c0", None, 0, 4, (("add", 1, False),)),
        IndexCheck("c0", None, 0, 4, (("mul", 2, True), ("sub", 1, False))),
        IndexCheck("c0", (0, 2), 0, 4, (("mod", 3, False),)),
    )
    assert check_lines(_checks(shifted, (4,), (3,))) == [
        "_check_index('c0', (c0 + 1), 4, 0)",
        "_check_index('c0', ((2 * c0) - 1), 4, 0)",
        "_check_index('c0', (c0.ravel()[0:3:2] % 3), 4, 0)",
    ]


def test_other_computed_indices_and_float_functions_record_no_check() -> None:
    """An index computed from two contexts or from x is checked only where a graph
    reads it; a function without int64 contexts has nothing to check."""

    def summed(x: Any, i: Any, j: Any) -> Any:
        return np.sum(x[i + j])

    assert _checks(summed, (4,), (3,), (3,)) == ()
    assert _checks(lambda x: np.sum(x[np.argsort(x)] ** 2), (4,)) == ()


@pytest.mark.parametrize("backend_mode", ["forward", "reverse"])
def test_a_computed_index_out_of_bounds_raises_in_every_operator(
    tmp_path: Any, backend_mode: str
) -> None:
    """The hessian and hvp of np.sum(x[idx + 1]) never read idx: they returned
    zeros for idx = [3] (x of length 4), where the function raises IndexError."""
    (tmp_path / "f.py").write_text(
        "import numpy as np\n\n\ndef f(x, idx):\n    return np.sum(x[idx + 1] * 2.0)\n"
    )
    (tmp_path / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "out"\n\n[[module]]\nname = "m"\n'
        'function = "f.py:f"\nbackend = "trace"\n'
        f'mode = "{backend_mode}"\n'
        'operators = ["gradient", "hvp", "hessian"]\ninput = { shape = [4] }\n'
        'contexts = [{ name = "idx", shape = [3], dtype = "int64" }]\n'
    )
    difgen.build(tmp_path / "difgen.toml")
    m = import_file(tmp_path / "out" / "m.py")
    x, v = np.arange(4.0), np.ones(4)
    good = np.array([0, 2, -5])  # -5 + 1 = -4 is valid
    np.testing.assert_array_equal(m.hessian(x, good), np.zeros((4, 4)))
    np.testing.assert_array_equal(m.gradient(x, good), [2.0, 2.0, 0.0, 2.0])
    for bad in ([0, 3, 1], [-6, 0, 0]):
        for call in (
            lambda i: m.f(x, i),
            lambda i: m.gradient(x, i),
            lambda i: m.hvp(x, v, i),
            lambda i: m.hessian(x, i),
        ):
            with pytest.raises(
                IndexError, match="out of bounds for axis 0 with size 4"
            ):
                call(np.array(bad))


def test_an_index_read_only_in_a_branch_is_not_checked_at_entry() -> None:
    """A branch runs only when taken: its gather checks its index itself."""

    def fn(x: Any, idx: Any) -> Any:
        if x[0] > 0.0:
            return np.sum(x[idx])
        return np.sum(x)

    assert [e.primitive.name for e in _graph(fn, (4,), (3,)).eqns][-1] == "cond"
    assert _checks(fn, (4,), (3,)) == ()


def test_the_check_statements() -> None:
    """All of a context, a slice of its flat elements where evenly spaced, else a
    list of them."""
    checks = [
        IndexCheck("idx", None, 0, 4),
        IndexCheck("e", (1, 3, 5), 1, 2),
        IndexCheck("e", (4,), 0, 3),
        IndexCheck("e", (0, 1, 5), 0, 3),
    ]
    assert check_lines(checks) == [
        "_check_index('idx', idx, 4, 0)",
        "_check_index('e', e.ravel()[1:6:2], 2, 1)",
        "_check_index('e', e.ravel()[4:5], 3, 0)",
        "_check_index('e', e.ravel()[[0, 1, 5]], 3, 0)",
    ]
