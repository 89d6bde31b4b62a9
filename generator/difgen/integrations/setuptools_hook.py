"""Extensions for a pyproject-only setuptools project, added before the build.

A project that configures difgen's ``build_py`` in ``pyproject.toml`` alone has no
``setup.py`` to list its ``emit = "c"`` extensions in, and setuptools decides
whether a wheel is pure Python (``py3-none-any``) before any command runs, so
``build_py`` cannot add them in time. difgen registers this function under
setuptools' ``setuptools.finalize_distribution_options`` entry point: setuptools
calls it for every distribution it sets up, and it adds the extensions of the
project's C modules (:func:`difgen.integrations.setuptools.extensions`) when, and
only when, the ``pyproject.toml`` in the directory being built names difgen's
``build_py``. Every other setuptools build is left alone, at the cost of reading
one TOML file; nothing heavier is imported unless the project uses difgen.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

BUILD_PY = "difgen.integrations.setuptools.build_py"
"""The ``[tool.setuptools.cmdclass] build_py`` value that marks a difgen project."""


def uses_difgen(root: Path) -> bool:
    """Whether ``root/pyproject.toml`` configures difgen's ``build_py``."""
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False  # setuptools reports an unreadable pyproject.toml itself
    table = data.get("tool", {}).get("setuptools", {}).get("cmdclass", {})
    return isinstance(table, dict) and table.get("build_py") == BUILD_PY


def add_extensions(dist: Any) -> None:
    """setuptools' hook: add the C modules' extensions to ``dist`` (a
    ``setuptools.Distribution``) for a project that configures difgen's
    ``build_py`` in ``pyproject.toml``; extensions it already lists (from a
    ``setup.py`` calling ``extensions()``) are not added twice."""
    root = Path.cwd()  # setuptools' build backend runs in the project directory
    if not uses_difgen(root):
        return
    from difgen.integrations.setuptools import extensions

    existing = list(dist.ext_modules or [])
    names = {extension.name for extension in existing}
    added = [e for e in extensions(root) if e.name not in names]
    if added:
        dist.ext_modules = [*existing, *added]
