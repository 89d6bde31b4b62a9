"""``python scripts/check_links.py``: the links of the README and of ``docs/``.

``mkdocs build --strict`` checks the links between the site's pages; this checks
every Markdown file the repository shows a reader, the README included (which the
site does not build), and the external URLs too:

- an internal link (``guide/solvers.md``, ``../README.md#set-up``, ``#section``,
  ``../benchmarks/ipopt_iteration.py``) must name a file or directory of the
  repository, relative to the file holding the link, and its ``#anchor`` must be
  a heading of that Markdown file (as Python-Markdown's ``toc`` extension makes
  its ids, which MkDocs uses: lowercase, punctuation dropped, runs of spaces and
  hyphens one hyphen, ``_1`` after a repeated one) or an HTML ``id``/``name``;
- an external URL (``https://...``, ``http://...``, ``mailto:``) must be well
  formed: a scheme this checks, a host name, no spaces;
- with ``--network`` (opt-in: CI has no guaranteed network) each external URL is
  also fetched (``HEAD``, then ``GET`` where a server refuses ``HEAD``), and one
  that fails or answers 400 or more is reported.

Links inside code (fenced blocks and inline ``code``) are text, not links. Prints
each problem as ``file:line: message`` and exits 1 if there is any; ``.ci/run``
runs it and ``tests/test_links.py`` calls :func:`problems` on the repository.
"""

from __future__ import annotations

import argparse
import re
import sys
import unicodedata
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1)(?!\n\s*\n)[\s\S])+?\1")
LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)"
)
REFERENCE = re.compile(
    r"^ {0,3}\[[^\]]+\]:[ \t]*<?(\S+?)>?(?:[ \t]+.*)?$", re.MULTILINE
)
AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ID = re.compile(r"<[a-zA-Z][^>]*\s(?:id|name)=[\"']([^\"']+)[\"']")
HOST = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}$"
    r"|^localhost$|^\d{1,3}(?:\.\d{1,3}){3}$"
)
EXTERNAL = ("http", "https", "mailto")


@dataclass(frozen=True)
class Link:
    """A link's target as written, and where: ``path`` line ``line``."""

    path: Path
    line: int
    target: str


def documents(root: Path = ROOT) -> list[Path]:
    """The Markdown files checked: the README and every page under ``docs/``."""
    found = [root / "README.md"] if (root / "README.md").is_file() else []
    return found + sorted((root / "docs").rglob("*.md"))


def _prose(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)[0] * len(opened.group(1))
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None:
            yield number, line


def _prose_text(text: str) -> str:
    """``text`` with its fenced blocks and inline code blanked, lines kept (so a
    match's offset still gives its line)."""
    kept = dict(_prose(text))
    lines = text.splitlines()
    blanked = "\n".join(kept.get(n, "") for n in range(1, len(lines) + 1))
    return INLINE_CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), blanked)


def links(path: Path) -> list[Link]:
    """Every link of the Markdown file ``path`` outside code (a link's text may
    run over lines)."""
    prose = _prose_text(path.read_text(encoding="utf-8"))
    found = []
    for pattern in (LINK, AUTOLINK, REFERENCE):
        for m in pattern.finditer(prose):
            line = prose.count("\n", 0, m.start()) + 1
            found.append(Link(path, line, m.group(1)))
    return sorted(found, key=lambda link: link.line)


def slug(heading: str) -> str:
    """The id Python-Markdown's ``toc`` extension gives a heading (its default
    ``slugify``), after its inline markup is dropped as rendering drops it."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = re.sub(r"(\*\*|__|\*|_)(\S.*?\S|\S)\1", r"\2", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    """The ids a reader can link to in the Markdown file ``path``: its headings'
    (a repeated one numbered ``_1``, ``_2``, ... as ``toc`` does) and HTML ids."""
    found: set[str] = set()
    for _, line in _prose(path.read_text(encoding="utf-8")):
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            name, n = base, 0
            while name in found:
                n += 1
                name = f"{base}_{n}"
            found.add(name)
        found.update(HTML_ID.findall(line))
    return found


def url_problem(target: str) -> str | None:
    """What is wrong with an external URL's syntax, if anything."""
    parts = urllib.parse.urlsplit(target)
    if parts.scheme == "mailto":
        return None if re.fullmatch(r"[^@\s]+@[^@\s]+", parts.path) else "bad address"
    if not parts.netloc:
        return "no host"
    host = parts.hostname or ""
    if not HOST.match(host):
        return f"bad host {host!r}"
    try:
        port = parts.port  # a ValueError for a port that is no number
    except ValueError:
        return "bad port"
    if port == 0:
        return "bad port"
    if any(c.isspace() for c in target):
        return "a space in the URL"
    return None


def internal_problem(link: Link, root: Path) -> str | None:
    """What is wrong with an internal link (a path and/or an anchor), if anything."""
    path, _, anchor = link.target.partition("#")
    path = urllib.parse.unquote(path)
    if path.startswith("/"):
        return "an absolute path (link relative to the page)"
    target = (link.path.parent / path).resolve() if path else link.path
    if not target.is_relative_to(root.resolve()):
        return "outside the repository"
    if not target.exists():
        return "no such file"
    if anchor:
        if target.suffix != ".md":
            return f"an anchor into {target.name}, which is not Markdown"
        if anchor not in anchors(target):
            return f"no heading or id {anchor!r} in {target.name}"
    return None


def fetch_problem(target: str, timeout: float = 15.0) -> str | None:
    """What fetching an external URL answered, when it is a failure."""
    headers = {"User-Agent": "difgen-link-check"}
    for method in ("HEAD", "GET"):
        request = urllib.request.Request(target, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout):
                return None
        except urllib.error.HTTPError as exc:
            if method == "HEAD" and exc.code in (403, 404, 405, 501):
                continue  # some servers refuse HEAD only
            return f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            return f"unreachable ({getattr(exc, 'reason', exc)})"
    return "refused"


def problems(
    root: Path = ROOT,
    network: bool = False,
    fetch: Callable[[str], str | None] = fetch_problem,
) -> list[str]:
    """``file:line: message`` of every broken link of the checked files."""
    found = []
    fetched: dict[str, str | None] = {}
    for path in documents(root):
        for link in links(path):
            scheme = urllib.parse.urlsplit(link.target).scheme
            if scheme in EXTERNAL:
                problem = url_problem(link.target)
                if problem is None and network and scheme != "mailto":
                    if link.target not in fetched:
                        fetched[link.target] = fetch(link.target)
                    problem = fetched[link.target]
            elif scheme and len(scheme) > 1:  # a drive letter is no scheme
                problem = f"a scheme this does not check ({scheme}:)"
            else:
                problem = internal_problem(link, root)
            if problem is not None:
                where = path.relative_to(root).as_posix()
                found.append(f"{where}:{link.line}: {link.target}: {problem}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python scripts/check_links.py",
        description=(__doc__ or "").split("\n\n")[0],
    )
    parser.add_argument(
        "--network",
        action="store_true",
        help="also fetch each external URL (off by default: CI has no network)",
    )
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the repository (default: this one)"
    )
    args = parser.parse_args(argv)
    found = problems(args.root, network=args.network)
    for line in found:
        print(line)
    files = documents(args.root)
    checked = sum(len(links(p)) for p in files)
    print(
        f"{checked} links in {len(files)} files: "
        + (f"{len(found)} broken" if found else "all good")
        + ("" if args.network else " (external URLs by syntax; --network fetches)")
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
