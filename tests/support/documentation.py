"""The documentation's text, for tests that hold the docs to the code.

The README keeps what a newcomer needs; the rest lives in ``docs/`` (the site that
``mkdocs.yml`` builds). Snippets marked ``<!-- snippet: NAME -->`` may be on any
page; each name must be on exactly one.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def pages() -> list[Path]:
    """The README and every Markdown page of the site."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def page(relative: str) -> str:
    """One page's text, by its path under ``docs/`` (or ``README.md``)."""
    path = ROOT / relative if relative == "README.md" else DOCS / relative
    return path.read_text(encoding="utf-8")


def snippet(name: str) -> str:
    """The code block after ``<!-- snippet: NAME -->``, wherever it is."""
    pattern = rf"<!-- snippet: {re.escape(name)} -->\n```\w*\n(.*?)```\n"
    found = [
        (path, text)
        for path in pages()
        for text in re.findall(pattern, path.read_text(encoding="utf-8"), re.DOTALL)
    ]
    assert len(found) == 1, f"expected one snippet {name!r}, found {len(found)}"
    return str(found[0][1])
