"""The wheel carries every package of the source tree.

pyproject.toml lists difgen's packages by name (the templates are mapped from the
top-level templates/ folder, which rules out automatic discovery), so a new
subpackage that is not added there installs in an editable checkout and is missing
from every wheel: ``import difgen`` then fails for users only.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_source_package_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    source = ROOT / "generator"
    found = {  # regular and namespace packages: every folder of modules
        ".".join(module.parent.relative_to(source).parts)
        for module in source.rglob("*.py")
        if "__pycache__" not in module.parts
    }
    listed = set(config["packages"]) - {"difgen.templates", "difgen.templates.c"}
    assert found == listed
    assert config["package-dir"]["difgen.templates"] == "templates"
