"""Every tutorial runs: its Python blocks in order, in one namespace, in a fresh
directory, after writing the blocks it names as files.

A fenced block right after ``<!-- file: NAME -->`` is written to ``NAME`` (the
tutorial's ``difgen.toml``, its functions); a ``python`` block runs; a ``sh``
block runs only after ``<!-- run -->`` (with this environment's scripts first on
``PATH``); other blocks (output shown, YAML for another tool) are text. A
tutorial that stops running fails here, so what the documentation shows is what
difgen does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("*.md"))
BLOCK = re.compile(r"(?:<!-- (file: [^>]+|run) -->\n)?```(\w*)\n(.*?)```\n", re.DOTALL)


def blocks(path: Path) -> list[tuple[str | None, str, str]]:
    """``(marker, language, text)`` of each fenced block, in order."""
    return [
        (m.group(1), m.group(2), m.group(3))
        for m in BLOCK.finditer(path.read_text(encoding="utf-8"))
    ]


def test_there_is_a_tutorial_per_kind_of_user() -> None:
    names = {p.stem for p in TUTORIALS}
    assert {"optimization", "stiff-odes", "ml", "packaging"} <= names, names


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("DIFGEN_QUIET_FALLBACK", "1")
    scripts = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{scripts}{os.pathsep}{os.environ['PATH']}"}
    namespace: dict[str, object] = {"__name__": f"tutorial_{path.stem}"}
    before = set(sys.modules)
    try:
        ran = _run(path, tmp_path, env, namespace)
    finally:  # the tutorial's own modules (rosen, bruss, ...) leave with it
        for name in set(sys.modules) - before:
            where = getattr(sys.modules[name], "__file__", None) or ""
            if Path(where).is_relative_to(tmp_path):
                del sys.modules[name]
    assert ran, f"{path.name} has nothing that runs"


def _run(
    path: Path, tmp_path: Path, env: dict[str, str], namespace: dict[str, object]
) -> int:
    """Write, run and execute the tutorial's blocks in order; how many ran."""
    ran = 0
    for marker, language, text in blocks(path):
        if marker is not None and marker.startswith("file: "):
            target = tmp_path / marker.removeprefix("file: ").strip()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        elif language == "python":
            code = compile(text, f"{path.name} (block {ran + 1})", "exec")
            exec(code, namespace)  # noqa: S102 (the documentation's own code)
            ran += 1
        elif language == "sh" and marker == "run":
            result = subprocess.run(
                text,
                shell=True,
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            assert result.returncode == 0, f"{text}\n{result.stdout}\n{result.stderr}"
            ran += 1
    return ran
