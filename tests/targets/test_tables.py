"""Index tables printed compactly (difgen.targets.tables): every kind round-trips
exactly, formulas stay short whatever the table's length, and a table no formula
fits is one compressed block whose text is a function of the table alone."""

from __future__ import annotations

import numpy as np
import pytest

from difgen.targets import tables
from difgen.targets.numpy.printer import LARGE_TABLE, array_source
from difgen.targets.parts import NOTHING, PACKED, Constants


def _grid_indices(n: int) -> np.ndarray:
    """The CSR indices of a periodic 5-point stencil on an n x n grid."""
    k = np.arange(n * n)
    i, j = np.divmod(k, n)
    cols = [k, ((i + 1) % n) * n + j, ((i - 1) % n) * n + j]
    cols += [i * n + (j + 1) % n, i * n + (j - 1) % n]
    return np.sort(np.stack(cols, axis=1), axis=1).ravel()


def _arrow(n: int) -> np.ndarray:
    """An arrowhead's CSR indices: the full first row, then (0, k) per row."""
    rest = np.stack([np.zeros(n - 1, dtype=np.int64), np.arange(1, n)], axis=1)
    return np.concatenate([np.arange(n), rest.ravel()])


RNG = np.random.default_rng(7)
KINDS = {
    "affine": np.arange(3, 3 + 7 * 9000, 7),
    "descending": np.arange(50_000, 0, -3),
    "affine runs": np.concatenate([np.arange(5000), np.arange(100, 9000, 2)]),
    "constant blocks": np.repeat(np.arange(3000), 4),
    "tiled": np.tile([4, 0, 9, 2, 2], 2000),
    "periodic, one shift": (np.array([0, 5, 6]) + 8 * np.arange(3000)[:, None]).ravel(),
    "periodic, a shift per place": _arrow(5000),
    "block runs, ragged end": np.concatenate(
        [(np.array([1, 2, 3]) + 3 * np.arange(2000)[:, None]).ravel(), [7, 7]]
    ),
    "stencil": _grid_indices(40),
    "irregular": RNG.integers(0, 12, 9000),
    "irregular, wide": RNG.integers(-(2**40), 2**40, 5000),
    "irregular, negative": RNG.integers(-300, 5, 6000),
    "coloring": np.argsort(RNG.random(8000)) % 11,
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_round_trips_exactly(kind: str) -> None:
    values = KINDS[kind]
    pool = Constants()
    source = array_source(values, pool=pool)
    got = tables.decode(source)
    assert got.dtype.kind == "i" and got.shape == values.shape
    assert np.array_equal(got, values), kind
    packed = tables.decode(tables.packed(values))
    assert packed.dtype == np.int64 and np.array_equal(packed, values)
    found = tables.formula(values)
    if found is not None:
        assert np.array_equal(tables.decode(found), values)


@pytest.mark.parametrize(
    "kind",
    [
        "affine",
        "affine runs",
        "constant blocks",
        "tiled",
        "periodic, one shift",
        "periodic, a shift per place",
        "block runs, ragged end",
    ],
)
def test_structured_tables_are_formulas(kind: str) -> None:
    pool = Constants()
    source = array_source(KINDS[kind], pool=pool)
    assert "zlib" not in source and pool.uses == NOTHING
    assert len(source) < 400, source


@pytest.mark.parametrize("kind", ["irregular", "coloring", "stencil"])
def test_irregular_tables_are_one_block_reported_to_the_pool(kind: str) -> None:
    pool = Constants()
    source = array_source(KINDS[kind], ".astype(np.int32)", pool=pool)
    assert source.startswith("np.") and "zlib.decompress(base64.b64decode(" in source
    assert pool.uses == PACKED
    got = tables.decode(source)
    assert got.dtype == np.int32 and np.array_equal(got, KINDS[kind])


def test_formulas_do_not_grow_with_the_table() -> None:
    small = [array_source(_arrow(n), pool=Constants()) for n in (5_000, 50_000)]
    big = array_source(_arrow(1_000_000), pool=Constants())
    assert len(big) <= len(small[0]) + 12 and len(small[1]) <= len(small[0]) + 6


def test_a_block_is_a_small_fraction_of_a_literal() -> None:
    """The 2-D stencil's indices (which have a run per grid row) and a coloring:
    a few bytes per hundred entries, not the five or so a literal takes each."""
    for values in (_grid_indices(200), np.arange(200_000) * 7 % 12):
        source = array_source(values, pool=Constants())
        assert len(source) < values.size / 20, len(source)
        assert np.array_equal(tables.decode(source), values)


def test_the_text_is_a_function_of_the_table() -> None:
    values = KINDS["coloring"]
    assert tables.packed(values) == tables.packed(values.copy())
    assert tables.packed(values) == tables.packed(values.astype(np.int32))
    assert tables.formula(KINDS["stencil"]) == tables.formula(KINDS["stencil"].copy())


def test_two_dimensional_tables_keep_their_shape() -> None:
    values = KINDS["irregular"].reshape(90, 100)
    got = tables.decode(array_source(values, pool=Constants()))
    assert got.shape == (90, 100) and np.array_equal(got, values)


def test_small_tables_and_tables_without_a_pool_print_as_before() -> None:
    """Up to LARGE_TABLE elements (and where no pool takes a module constant)
    the printer's literal and periodic forms stand, so modules without large
    tables keep their bytes."""
    small = KINDS["irregular"][:LARGE_TABLE]
    pool = Constants()
    assert array_source(small, pool=pool) == array_source(small)
    assert pool.uses == NOTHING and "zlib" not in array_source(small)


def test_block_runs_pick_the_fewest_numbers() -> None:
    found = tables.block_runs(_arrow(1000)[1000:])
    assert found is not None
    period, runs = found
    assert period == 2 and runs == [tables.Run((0, 1), (0, 1), 999)]
    assert tables.block_runs(KINDS["irregular"]) is None
