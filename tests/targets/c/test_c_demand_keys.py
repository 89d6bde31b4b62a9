"""The demand analysis's unique keys (targets/c/demand.py) without a sort:
:func:`~difgen.targets.c.demand._unique_ints` is ``np.unique`` with the first
occurrences and the inverse, on keys in order, keys in a small range and keys
in neither."""

from __future__ import annotations

import numpy as np
import pytest

from difgen.targets.c.demand import _row_keys, _unique_ints, _unique_rows

RNG = np.random.default_rng(0)

KEYS = {
    "empty": np.zeros(0, dtype=np.int64),
    "one": np.array([7], dtype=np.int64),
    "in order, repeats": np.array([-3, -3, 0, 2, 2, 2, 9], dtype=np.int64),
    "small range": RNG.integers(-50, 50, 1000),
    "small range, negative": RNG.integers(-(2**40), -(2**40) + 20, 500),
    "wide range": RNG.integers(-(2**62), 2**62, 1000),
    "wide range, repeats": np.repeat(RNG.integers(0, 2**50, 30), 7)[::-1].copy(),
    "all equal": np.full(100, 5, dtype=np.int64),
}


@pytest.mark.parametrize("case", sorted(KEYS))
def test_unique_ints_is_numpys_unique(case: str) -> None:
    key = KEYS[case].astype(np.int64)
    distinct, first, inverse = _unique_ints(key)
    want, want_first, want_inverse = np.unique(
        key, return_index=True, return_inverse=True
    )
    assert distinct.tolist() == want.tolist()
    assert first.tolist() == want_first.tolist()  # the first occurrence of each
    assert inverse.tolist() == want_inverse.reshape(-1).tolist()


def test_unique_rows_is_numpys_row_unique() -> None:
    rows = RNG.integers(0, 4, (300, 3))
    distinct, inverse = _unique_rows(rows)
    want, want_inverse = np.unique(rows, axis=0, return_inverse=True)
    assert distinct.tolist() == want.tolist()
    assert inverse.tolist() == want_inverse.reshape(-1).tolist()


def test_row_keys_order_rows_lexicographically_or_decline() -> None:
    rows = RNG.integers(-5, 5, (400, 3))
    key = _row_keys(rows)
    assert key is not None
    by_key = rows[np.argsort(key, kind="stable")]
    assert by_key.tolist() == rows[np.lexsort(rows.T[::-1])].tolist()
    assert np.unique(key).size == np.unique(rows, axis=0).shape[0]
    wide = np.stack([RNG.integers(-(2**62), 2**62, 10)] * 2, axis=1)
    assert _row_keys(wide) is None  # 126 bits: NumPy's row sort instead
