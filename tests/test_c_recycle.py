"""Small compiled results are recycled (``dg_recycled`` in backends/c_code.py).

A compiled operator keeps the last two arrays each small result was returned in
and writes into one of them again when nothing else can reach it any more. These
tests take the user's side: a result they hold, view, export, weakly reference or
reshape in place must never change under them, and a recycled result must be
indistinguishable from a new one. The straight-line modules come from
test_c_target's session build; the loop-built ones from test_c_loops'.
"""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import numpy as np
import pytest

from test_c_target import Built, built  # noqa: F401 (the session's build)

X = np.linspace(-1.2, 0.9, 10)
"""A point of the session build's Rosenbrock n=10 module."""


def _points(k: int) -> list[np.ndarray]:
    return [X + 0.1 * i for i in range(k)]


def test_a_dropped_result_is_written_again(built: Built) -> None:
    """The recycling is on: a result nobody holds gives its memory to the next."""
    gradient = built.compiled("rosenbrock").gradient
    address = gradient(X).ctypes.data
    again = gradient(X + 1.0)
    assert again.ctypes.data == address
    np.testing.assert_array_equal(again, built.python("rosenbrock").gradient(X + 1.0))


def test_held_results_never_change(built: Built) -> None:
    """``g = gradient(x)`` in a loop, and a list of results: each keeps its values."""
    compiled, python = built.compiled("rosenbrock"), built.python("rosenbrock")
    kept = [compiled.gradient(x) for x in _points(6)]
    for x, g in zip(_points(6), kept):
        np.testing.assert_array_equal(g, python.gradient(x))
    assert len({g.ctypes.data for g in kept}) == 6
    previous: tuple[np.ndarray, np.ndarray] | None = None
    for x in _points(8):
        g = compiled.gradient(x)
        if previous is not None:
            assert g is not previous[1]
            np.testing.assert_array_equal(previous[1], python.gradient(previous[0]))
        previous = (x, g)


@pytest.mark.parametrize("hold", ["view", "memoryview", "weakref", "in_a_tuple"])
def test_what_reaches_a_result_keeps_it(built: Built, hold: str) -> None:
    """A view, a buffer export, a weak reference or a container keeps a dropped
    result from being written again: its values stay, readable through the hold."""
    compiled = built.compiled("rosenbrock")
    expected = compiled.gradient(X).copy()
    result = compiled.gradient(X)
    holder: Any = {
        "view": lambda r: r[2:],
        "memoryview": memoryview,
        "weakref": weakref.ref,
        "in_a_tuple": lambda r: (r,),
    }[hold](result)
    del result
    gc.collect()
    for x in _points(5):
        compiled.gradient(x + 3.0)
    seen = {
        "view": lambda h: np.concatenate([expected[:2], h]),
        "memoryview": lambda h: np.asarray(h),
        "weakref": lambda h: h(),
        "in_a_tuple": lambda h: h[0],
    }[hold](holder)
    assert seen is not None  # the weak reference still reaches the array
    np.testing.assert_array_equal(seen, expected)


@pytest.mark.parametrize("change", ["read_only", "reshaped", "retyped"])
def test_a_result_changed_in_place_is_not_reused(built: Built, change: str) -> None:
    """A dropped result whose flags, shape or dtype the caller changed in place is
    never handed out again: every result comes back writeable, float64, (10,)."""
    compiled = built.compiled("rosenbrock")
    for _ in range(3):  # both slots
        result = compiled.gradient(X)
        if change == "read_only":
            result.flags.writeable = False
        elif change == "reshaped":
            result.shape = (2, 5)
        else:
            result.dtype = np.int64
        del result
    for x in _points(3):
        fresh = compiled.gradient(x)
        assert fresh.shape == (10,) and fresh.dtype == np.float64
        assert fresh.flags.writeable and fresh.flags.c_contiguous and fresh.flags.owndata
        np.testing.assert_array_equal(fresh, built.python("rosenbrock").gradient(x))


def test_tuples_of_results_and_out(built: Built) -> None:
    """Each result of a tuple is recycled on its own; ``out`` is never recycled."""
    compiled, python = built.compiled("rosenbrock"), built.python("rosenbrock")
    held = [compiled.value_and_gradient(x) for x in _points(4)]
    for x, (value, g) in zip(_points(4), held):
        expected_value, expected = python.value_and_gradient(x)
        assert value == expected_value
        np.testing.assert_array_equal(g, expected)
    out = np.zeros(10)
    assert compiled.gradient(X, out=out) is out
    kept = out.copy()
    for x in _points(4):
        compiled.gradient(x)
    np.testing.assert_array_equal(out, kept)


def test_threads_see_their_own_results(built: Built) -> None:
    """Calls from several threads (the GIL held around each) never share a result."""
    compiled, python = built.compiled("rosenbrock"), built.python("rosenbrock")
    errors: list[str] = []

    def work(offset: float) -> None:
        for i in range(300):
            x = X + offset + 1e-3 * i
            g = compiled.gradient(x)
            if not np.array_equal(g, python.gradient(x)):
                errors.append(f"thread {offset}: call {i}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
