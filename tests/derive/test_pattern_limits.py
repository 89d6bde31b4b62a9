"""A sparse result whose pattern is too large to detect is refused with the config
line at fault, for every sparse result kind (a sparse hessian asked its layout before
its jacobian, and stopped at an internal assertion)."""

from __future__ import annotations

from pathlib import Path

import pytest

import difgen
from difgen.errors import ConfigError
from difgen.primitives import patterns

CONFIG = """\
[difgen]
output_dir = "out"

[[module]]
name = "m"
function = "f.py:arrow"
backend = "trace"
operators = [{operators}]
input = {{ shape = [40] }}
sparse = true
"""


@pytest.mark.parametrize(
    "operators", ['"hessian"', '"jacobian"', '"gradient", "hessian"']
)
def test_a_pattern_over_the_limit_names_the_sparse_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operators: str
) -> None:
    (tmp_path / "f.py").write_text(
        "import numpy as np\n\n\ndef arrow(x):\n"
        "    return np.sum(x[0] * x[1:] ** 2) + np.sum(x**4) + x * 0.0\n"
        if "jacobian" in operators
        else "import numpy as np\n\n\ndef arrow(x):\n"
        "    return np.sum(x[0] * x[1:] ** 2) + np.sum(x**4)\n"
    )
    (tmp_path / "difgen.toml").write_text(CONFIG.format(operators=operators))
    monkeypatch.setattr(patterns, "MAX_PATTERN_NONZEROS", 30)
    with pytest.raises(
        ConfigError, match=r"difgen\.toml:10.*too large to detect \(\d+ nonzeros"
    ):
        difgen.build(tmp_path / "difgen.toml")
    assert not (tmp_path / "out").exists()  # nothing written
