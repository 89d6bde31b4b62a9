"""The dependency floors of pyproject.toml against the names difgen uses.

Installing old releases costs too much CI time; instead, each name below is one
that difgen's source uses and that appeared in a known release of its library.
The floor must be at least that release (``sympy>=1.12`` was declared while
``PrintMethodNotImplementedError``, new in 1.13, was imported at start-up), and
the name must still be where difgen looks for it. When difgen starts using a name
newer than a floor, add it here and raise the floor. Measured by installing the
floors into a scratch virtualenv: numpy 2.0.0, sympy 1.13.0, jinja2 3.1.0 and
black 24.1.0 build ``examples/`` byte for byte and pass the API, check, NumPy
semantics and fidelity tests; numpy 1.26 and sympy 1.12 fail at import.
"""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = "\n".join(
    path.read_text() for path in sorted((ROOT / "generator" / "difgen").rglob("*.py"))
)

INTRODUCED = [  # (library, the version that added the name, module, name, as used)
    (
        "sympy",
        "1.13",
        "sympy.printing.codeprinter",
        "PrintMethodNotImplementedError",
        "PrintMethodNotImplementedError",
    ),
    ("numpy", "2.0", "numpy.linalg", "tensordot", "np.linalg.tensordot"),
    ("numpy", "2.0", "numpy.linalg", "cross", "np.linalg.cross"),
    ("numpy", "2.0", "numpy.linalg", "matmul", "np.linalg.matmul"),
    ("numpy", "2.0", "numpy.linalg", "matrix_norm", "np.linalg.matrix_norm"),
    ("numpy", "2.0", "numpy.linalg", "vector_norm", "np.linalg.vector_norm"),
    ("numpy", "2.0", "numpy.linalg", "svdvals", "np.linalg.svdvals"),
]


def _floors() -> dict[str, tuple[int, ...]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    floors = {}
    for requirement in project["dependencies"]:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+)", requirement)
        assert match, f"{requirement!r}: every dependency has a >= floor"
        floors[match[1].lower()] = tuple(int(p) for p in match[2].split("."))
    return floors


def test_every_dependency_has_a_floor() -> None:
    assert sorted(_floors()) == ["black", "jinja2", "numpy", "sympy"]


@pytest.mark.parametrize(
    ("library", "version", "module", "name", "used"),
    INTRODUCED,
    ids=[row[4] for row in INTRODUCED],
)
def test_the_floor_has_the_names_difgen_uses(
    library: str, version: str, module: str, name: str, used: str
) -> None:
    assert used in SOURCES, f"difgen no longer uses {used}: drop the row"
    assert hasattr(importlib.import_module(module), name)
    floor = _floors()[library]
    needed = tuple(int(p) for p in version.split("."))
    assert floor >= needed, f"{library}>={version} at least: {used} is new in {version}"
