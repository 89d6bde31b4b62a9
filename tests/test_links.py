"""The README's and the documentation's links (``scripts/check_links.py``):
internal paths and anchors exist, external URLs are well formed; fetching them is
opt-in (``--network``), never done here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "check_links", ROOT / "scripts" / "check_links.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_links"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_repositorys_links_hold(script: ModuleType) -> None:
    found = script.problems(ROOT)
    assert found == [], "run: python scripts/check_links.py\n" + "\n".join(found)
    checked = [link for p in script.documents(ROOT) for link in script.links(p)]
    assert len(checked) >= 30  # the README's and the site's links are seen
    assert {link.path.name for link in checked} >= {"README.md", "index.md"}


PAGE = """\
# A page

See [the guide](guide.md#the-solvers-sparse-structure) and
[a link over
two lines](guide.md#missing-section), [nothing](nowhere.md),
[up](../../outside.md), [here](#a-page), [there](#not-here),
[a script](tools/run.py), [into a script](tools/run.py#top),
<https://example.org/docs>, [bad](https://exa mple.org), [no host](https:///x),
[mail](mailto:someone@example.org), [ftp](ftp://example.org/file).

`[in code](missing-in-code.md)` is text, and so is:

```md
[in a block](missing-in-block.md)
```

[ref]: guide.md#repeated_1
"""

GUIDE = """\
# The solvers: sparse structure

## Repeated

## Repeated

<a id="custom"></a>
"""


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "docs" / "tools").mkdir(parents=True)
    (root / "README.md").write_text(
        "[page](docs/page.md#a-page) [id](docs/guide.md#custom)\n"
    )
    (root / "docs" / "page.md").write_text(PAGE)
    (root / "docs" / "guide.md").write_text(GUIDE)
    (root / "docs" / "tools" / "run.py").write_text("")
    (tmp_path / "outside.md").write_text("")
    return root


def test_each_kind_of_broken_link_is_reported(
    script: ModuleType, tmp_path: Path
) -> None:
    found = script.problems(_tree(tmp_path))
    assert found == [
        (
            "docs/page.md:4: guide.md#missing-section: no heading or id "
            "'missing-section' in guide.md"
        ),
        "docs/page.md:5: nowhere.md: no such file",
        "docs/page.md:6: ../../outside.md: outside the repository",
        "docs/page.md:6: #not-here: no heading or id 'not-here' in page.md",
        (
            "docs/page.md:7: tools/run.py#top: an anchor into run.py, which is not "
            "Markdown"
        ),
        "docs/page.md:8: https:///x: no host",
        "docs/page.md:9: ftp://example.org/file: a scheme this does not check (ftp:)",
    ], found
    # a URL with a space is not a Markdown link at all: its text stays prose


def test_url_syntax(script: ModuleType) -> None:
    assert script.url_problem("https://cyipopt.readthedocs.io") is None
    assert script.url_problem("http://localhost:8000/x?y=1#z") is None
    assert script.url_problem("https://exa_mple.org") == "bad host 'exa_mple.org'"
    assert script.url_problem("https://example.org:port/") == "bad port"
    assert script.url_problem("mailto:nobody") == "bad address"


def test_headings_slugs_as_mkdocs_makes_them(script: ModuleType) -> None:
    assert script.slug("10. Printing (`targets/`) and rendering") == (
        "10-printing-targets-and-rendering"
    )
    assert script.slug("**Bold** [link](x.md) — dash") == "bold-link-dash"


def test_the_network_is_asked_only_when_opted_in(
    script: ModuleType, tmp_path: Path
) -> None:
    root = _tree(tmp_path)
    asked: list[str] = []

    def fetch(url: str) -> str | None:
        asked.append(url)
        return "HTTP 404" if "docs" in url else None

    assert not [p for p in script.problems(root, fetch=fetch) if "HTTP" in p]
    assert asked == []
    found = script.problems(root, network=True, fetch=fetch)
    assert asked == ["https://example.org/docs"]  # mailto: is not fetched
    assert "docs/page.md:8: https://example.org/docs: HTTP 404" in found


def test_the_command_exits_1_on_a_broken_link(
    script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _tree(tmp_path)
    assert script.main(["--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "docs/page.md:5: nowhere.md: no such file" in out
    assert "7 broken (external URLs by syntax; --network fetches)" in out
    assert script.main([]) == 0  # the repository itself
