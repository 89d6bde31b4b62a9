"""Class 11 of the adversarial suite (issue 20, item 6): trust at the edges.

Every case is one way a build, ``check``, the compiler or the loading of a module
could claim success it did not have, raise a traceback, hang or leave files behind:
each must instead give the right answer, or a ``difgen: error:`` naming the file
and what to do, with nothing half-written.
"""

from __future__ import annotations

import math

import pytest

import difgen
from difgen.errors import UsageError

from .adversarial_support import Project, module_block, rows

F = """
import numpy as np


def f(x):
    return np.sum(np.sin(x) * x)
"""


def _simple(project: Project, **options: object) -> None:
    project.source(F)
    project.config(module_block(**options))  # type: ignore[arg-type]


# ------------------------------------------------- API arguments: timeout and seed

BAD_TIMEOUTS = rows(
    [
        ("minus_one", -1),
        ("minus_half", -0.5),
        ("minus_tiny", -1e-300),
        ("zero", 0),
        ("zero_float", 0.0),
        ("minus_zero", -0.0),
        ("nan", math.nan),
        ("minus_inf", -math.inf),
        ("string", "5"),
        ("true", True),
        ("list", [5]),
        ("complex", 1j),
    ]
)


@pytest.mark.parametrize(("case", "timeout"), BAD_TIMEOUTS)
def test_build_refuses_a_bad_timeout(
    project: Project, case: str, timeout: object
) -> None:
    """Not an ``itimer`` error from deep inside: a UsageError naming the value,
    before anything is generated or written."""
    _simple(project)
    before = project.snapshot()
    with pytest.raises(UsageError, match="timeout must be a positive number"):
        difgen.build(project.root / "difgen.toml", timeout=timeout)  # type: ignore[arg-type]
    assert project.snapshot() == before


@pytest.mark.parametrize("timeout", [1e-3 * 10**4, 60, math.inf, 2.5])
def test_build_accepts_a_good_timeout(project: Project, timeout: float) -> None:
    _simple(project)
    result = difgen.build(project.root / "difgen.toml", timeout=timeout)
    assert [m.action.value for m in result.modules] == ["written"]


BAD_SEEDS = rows(
    [
        ("minus_one", -1),
        ("minus_big", -(2**63)),
        ("minus_huge", -(2**80)),
        ("float", 1.5),
        ("float_whole", 2.0),
        ("string", "3"),
        ("true", True),
        ("none", None),
    ]
)


@pytest.mark.parametrize(("case", "seed"), BAD_SEEDS)
def test_verify_refuses_a_bad_seed(project: Project, case: str, seed: object) -> None:
    _simple(project)
    difgen.build(project.root / "difgen.toml")
    with pytest.raises(UsageError, match="seed must be a non-negative integer"):
        difgen.verify(project.root / "difgen.toml", seed=seed)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["-1", "-0x1", "1.5", "one", "", "-99999999999999"])
def test_cli_verify_refuses_a_bad_seed(project: Project, text: str) -> None:
    """A usage error (exit 2, the option named), not a ValueError traceback."""
    _simple(project)
    project.build()
    result = project.cli("verify", "difgen.toml", f"--seed={text}")
    assert result.status == 2
    assert "--seed" in result.err and "non-negative integer" in result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize("seed", [0, 1, 2**32, 2**63, 2**100])
def test_verify_accepts_any_non_negative_seed(project: Project, seed: int) -> None:
    _simple(project)
    difgen.build(project.root / "difgen.toml")
    result = difgen.verify(project.root / "difgen.toml", seed=seed)
    assert result.ok and result.seed == seed
