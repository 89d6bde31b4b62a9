"""A build imports only what its target needs (issue 24, "Build cost").

Each build runs ``difgen build`` in a fresh interpreter (what a user's build
costs) and reports which modules it imported: a trace build that emits vector
code must not load the C target, whose printers and planners are a fifth of a
tiny build's imports; nor SymPy (with mpmath, about 430 modules and 0.4 s of
CPU), which only the sympy backend and straight-line scalar code use. An
``emit = "c"`` build of the same function is the control of the first, an
``emit = "auto"`` one (straight-line scalar code: SymPy's folding of the graph)
of the second, so the check is of the build, not of the probe.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FUNCTION = """\
import numpy as np


def f(x):
    return np.array([x[0] * x[1], np.sin(x[2]), x[0] + x[2] ** 2])
"""

CONFIG = """\
[difgen]
output_dir = "out"

[[module]]
name = "tiny"
function = "f.py:f"
backend = "trace"
operators = ["jacobian"]
input = {{ shape = [3] }}
emit = "{emit}"
"""

PROBE = """\
import json, sys
from difgen import api
result = api.build("difgen.toml")
assert [m.name for m in result.modules] == ["tiny"], result
print(json.dumps(sorted(sys.modules)))
"""


def _imported(tmp_path: Path, emit: str) -> tuple[set[str], str]:
    """The modules a build of the tiny jacobian leaves imported, and the module."""
    (tmp_path / "f.py").write_text(FUNCTION)
    (tmp_path / "difgen.toml").write_text(CONFIG.format(emit=emit))
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    names: list[str] = json.loads(done.stdout.splitlines()[-1])
    return set(names), (tmp_path / "out" / "tiny.py").read_text()


def _c_target(names: set[str]) -> set[str]:
    return {
        n for n in names if n == "difgen.targets.c" or n.startswith("difgen.targets.c.")
    }


def test_vector_build_does_not_import_the_c_target(tmp_path: Path) -> None:
    names, text = _imported(tmp_path, "vector")
    assert "emission vector." in text
    assert "difgen.pipeline" in names  # the build ran in the probe
    assert _c_target(names) == set()


def test_c_build_imports_the_c_target(tmp_path: Path) -> None:
    names, _ = _imported(tmp_path, "c")
    assert {"difgen.targets.c.extension", "difgen.targets.c.loops"} <= names


SYMPY = {"sympy", "mpmath"}


def test_vector_build_does_not_import_sympy(tmp_path: Path) -> None:
    names, text = _imported(tmp_path, "vector")
    assert "emission vector." in text
    assert "difgen.pipeline" in names
    assert names & SYMPY == set()
    assert not any(n.startswith("difgen.primitives.heads") for n in names)


def test_scalar_build_imports_sympy(tmp_path: Path) -> None:
    names, text = _imported(tmp_path, "auto")
    assert "emission scalar." in text
    assert names >= SYMPY
