"""benchmarks/calibration.py: the figures that the constants' docstrings cite exist,
and the table names the constant each figure sets."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # benchmarks/ is a top-level package, not installed
    sys.path.insert(0, str(ROOT))

from benchmarks import calibration  # noqa: E402

CITED = re.compile(r"benchmarks\.calibration\.(\w+)")


def test_every_cited_figure_is_a_function_of_the_calibration() -> None:
    cited = {
        name
        for path in (ROOT / "generator" / "difgen").rglob("*.py")
        for name in CITED.findall(path.read_text())
    }
    assert {"ufunc_call_ns", "float_op_ns", "sum_wrapper_ns"} <= cited
    for name in cited:
        assert callable(getattr(calibration, name, None)), name


def test_the_break_even_follows_from_the_prices() -> None:
    # one 700 ns call against 40 ns float operations on 1.5 ns elements
    assert round(calibration.break_even_ops(700.0, 40.0, 1.5), 1) == 18.2


def test_the_table_names_each_constant() -> None:
    rows = [calibration.Row("a NumPy call", "700 ns", "cost.CALL_NS")]
    assert calibration.table(rows).splitlines() == [
        "| figure | measured | justifies |",
        "|---|---|---|",
        "| a NumPy call | 700 ns | cost.CALL_NS |",
    ]


def test_the_l2_size_is_read_or_unknown() -> None:
    size = calibration.l2_cache_bytes()
    assert size is None or size >= 64 * 1024
