"""Line numbers of TOML tables and keys, recovered from the raw text.

``tomllib`` returns plain dicts without positions; config errors still have to name
the line at fault. The scan is deliberately small: it reads only lines that start
outside any value (so multi-line arrays and strings are skipped), resolves table
headers, including arrays of tables, to paths into the parsed document, and records
the line of each key and of each ``{ ... }`` element of an inline array.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

Key = tuple[str | int, ...]
"""A path into the parsed TOML document, e.g. ``("module", 0, "input", "shape")``."""

_BARE_OR_QUOTED = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_DOTTED = rf"{_BARE_OR_QUOTED}(?:\s*\.\s*{_BARE_OR_QUOTED})*"
_HEADER_RE = re.compile(rf"^\s*(\[\[?)\s*({_DOTTED})\s*\]\]?\s*(?:#.*)?$")
_KEY_RE = re.compile(rf"^\s*({_DOTTED})\s*=")
_PART_RE = re.compile(_BARE_OR_QUOTED)


def _key_parts(dotted: str) -> list[str]:
    return [part.strip("\"'") for part in _PART_RE.findall(dotted)]


def _brackets(
    lines: list[str], row: int = 0, col: int = 0
) -> Iterator[tuple[int, str]]:
    """Yield ``(row, char)`` for each bracket outside strings and comments.

    ``char`` is ``""`` at the start of each line that does not begin inside a
    multi-line string, so callers can tell where a statement may start.
    """
    quote = ""
    for r in range(row, len(lines)):
        line, i = lines[r], (col if r == row else 0)
        if not quote and i == 0:
            yield r, ""
        while i < len(line):
            if quote:
                end = line.find(quote, i)
                i, quote = (len(line), quote) if end < 0 else (end + 3, "")
                continue
            c = line[i]
            if c == "#":
                break
            if line.startswith(('"""', "'''"), i):
                quote, i = line[i : i + 3], i + 3
            elif c == '"':
                i += 1
                while i < len(line) and line[i] != '"':
                    i += 2 if line[i] == "\\" else 1
                i += 1
            elif c == "'":
                end = line.find("'", i + 1)
                i = len(line) if end < 0 else end + 1
            else:
                if c in "[]{}":
                    yield r, c
                i += 1


class Locator:
    """Line numbers of tables and keys, recovered from the raw TOML text.

    Only lines that start outside any value are read as headers or keys, so
    multi-line arrays and strings cannot be mistaken for them. A key not written
    on a line of its own (inside an inline table) falls back to the line of its
    nearest written parent.

    >>> loc = Locator('[[module]]\\nname = "a"\\ninput = { shape = [] }\\n')
    >>> loc.line(("module", 0, "name")), loc.line(("module", 0, "input", "shape"))
    (2, 3)
    """

    def __init__(self, text: str) -> None:
        self.lines: dict[Key, int] = {}
        rows = text.splitlines()
        depth, top_level = 0, set[int]()
        for row, char in _brackets(rows):
            if char == "":
                if depth == 0:
                    top_level.add(row)
            else:
                depth = max(0, depth + (1 if char in "[{" else -1))
        table: Key = ()
        arrays: dict[Key, int] = {}
        for row in sorted(top_level):
            header = _HEADER_RE.match(rows[row])
            if header:
                table = self._header(header, arrays)
                for end in range(1, len(table) + 1):
                    self.lines.setdefault(table[:end], row + 1)
                continue
            key = _KEY_RE.match(rows[row])
            if key:
                path = table + tuple(_key_parts(key.group(1)))
                for end in range(len(table) + 1, len(path) + 1):
                    self.lines.setdefault(path[:end], row + 1)  # dotted keys
                self._inline_array(rows, row, key.end(), path)

    @staticmethod
    def _header(match: re.Match[str], arrays: dict[Key, int]) -> Key:
        """Resolve a header like ``[[module.contexts]]`` to ``("module", 2, ...)``."""
        *parents, last = _key_parts(match.group(2))
        path: Key = ()
        for part in parents:
            path += (part,)
            if path in arrays:
                path += (arrays[path] - 1,)
        path += (last,)
        if match.group(1) == "[[":
            arrays[path] = arrays.get(path, 0) + 1
            path += (arrays[path] - 1,)
        return path

    def _inline_array(self, rows: list[str], row: int, col: int, path: Key) -> None:
        """Record the line of each ``{ ... }`` element of an inline array value."""
        if not rows[row][col:].lstrip().startswith("["):
            return
        depth, index = 0, 0
        for r, char in _brackets(rows, row, col):
            if not char:
                continue
            if char in "[{":
                depth += 1
                if char == "{" and depth == 2:
                    self.lines.setdefault(path + (index,), r + 1)
                    index += 1
            else:
                depth -= 1
                if depth == 0:
                    return

    def line(self, key: Key) -> int | None:
        """Line of ``key``, else of its nearest located parent, else None."""
        for end in range(len(key), 0, -1):
            if key[:end] in self.lines:
                return self.lines[key[:end]]
        return None
