"""The C runtime of a generated extension, read from ``templates/c/*.c`` and
included on demand (docs/design.md §10).

The runtime is C source, not Python strings: ``templates/c/runtime.c`` (argument
parsing and checks, result arrays, sparse results, the helpers of
:mod:`difgen.floats` with NumPy's semantics), ``points.c`` (the points variants')
and ``loops.c`` (the trace backend's loops'). Each file is cut into sections by
marker comments::

    /*@ dg_result requires dg_out_direct dg_new dg_recycled */

A section *defines* its own name when that is a C identifier, and every name
listed after ``defines``; it *requires* the sections listed after ``requires``
(a hyphenated name is a shared comment, defining nothing). A generated C file
carries exactly the sections whose names its printers report using
(:class:`difgen.targets.c.glue.Used`), closed over ``requires``, in the files'
order (:func:`source`): the same code always gives the same bytes, and a
three-element gradient no longer carries the sparse-result or recycling code it
never calls. As CasADi's ``add_auxiliary``: what is not called is not emitted.
The printed C is never read back; :func:`uses` reads the runtime's own sections
(their ``requires`` are checked against it) and, in the tests, printed files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources

FILES = ("runtime.c", "points.c", "loops.c")
"""The runtime's files under ``templates/c/``, in the order their sections are
emitted (a section's requirements come before it)."""

PROLOGUE = "module-prologue"
"""The section every file carries: the includes and the bound Python helpers."""

_MARKER = re.compile(r"^/\*@ ([\w-]+)((?: [\w-]+)*) \*/$", re.MULTILINE)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_NOT_CODE = re.compile(
    r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.DOTALL
)
"""Comments and string or character literals: a name there is no use of it."""


@dataclass(frozen=True)
class Section:
    """One named piece of the runtime: its C text and what it needs before it."""

    name: str
    defines: frozenset[str]
    requires: tuple[str, ...]
    text: str


def parse(text: str, where: str = "<runtime>") -> list[Section]:
    """The sections of one runtime file (the text before the first marker is its
    own documentation and is dropped)."""
    markers = list(_MARKER.finditer(text))
    sections: list[Section] = []
    for k, m in enumerate(markers):
        name, words = m.group(1), m.group(2).split()
        defines: list[str] = [name] if _IDENTIFIER.fullmatch(name) else []
        requires: list[str] = []
        into: list[str] | None = None
        for word in words:
            if word == "defines":
                into = defines
            elif word == "requires":
                into = requires
            elif into is None:
                raise ValueError(f"{where}: {name}: {word!r} before defines/requires")
            else:
                into.append(word)
        end = markers[k + 1].start() if k + 1 < len(markers) else len(text)
        body = text[m.end() : end].strip("\n")
        sections.append(Section(name, frozenset(defines), tuple(requires), body))
    return sections


@cache
def sections() -> tuple[Section, ...]:
    """Every section of :data:`FILES`, in order (read once, as package data)."""
    folder = resources.files("difgen.templates").joinpath("c")
    found: list[Section] = []
    for name in FILES:
        found += parse(folder.joinpath(name).read_text("utf-8"), f"templates/c/{name}")
    seen: dict[str, int] = {}
    for i, s in enumerate(found):
        if s.name in seen:
            raise ValueError(f"C runtime: section {s.name!r} is defined twice")
        for r in s.requires:
            if seen.get(r) is None:
                raise ValueError(
                    f"C runtime: {s.name!r} requires {r!r}, which is not an "
                    "earlier section"
                )
        seen[s.name] = i
    return tuple(found)


@cache
def _providers() -> dict[str, str]:
    """Each defined C name -> the section defining it."""
    return {name: s.name for s in sections() for name in s.defines}


def defined() -> frozenset[str]:
    """Every C name some section defines (what a generated file may call)."""
    return frozenset(_providers())


def helpers() -> frozenset[str]:
    """The helpers of :mod:`difgen.floats` the runtime defines with NumPy's
    semantics (``_div``, ``_sin``, ``_maximum``, ...)."""
    return frozenset(n for n in _providers() if n.startswith("_"))


def uses(text: str) -> frozenset[str]:
    """The sections whose names the C ``text`` uses outside comments and string
    literals (before closing over ``requires``): for the runtime's own sources
    and the tests; a generated file's sections are what its printers report."""
    providers = _providers()
    words = set(_IDENTIFIER.findall(_NOT_CODE.sub(" ", text)))
    return frozenset(providers[word] for word in words if word in providers)


def closure(names: Iterable[str]) -> list[Section]:
    """The sections ``names`` and everything they require, in the files' order."""
    by_name = {s.name: s for s in sections()}
    wanted: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name in wanted:
            continue
        if name not in by_name:
            raise KeyError(f"C runtime: no section {name!r}")
        wanted.add(name)
        stack += by_name[name].requires
    return [s for s in sections() if s.name in wanted]


def providers(names: Iterable[str]) -> frozenset[str]:
    """The sections defining ``names``, runtime names a printer reported (a name
    the runtime does not define is a printer's error: KeyError)."""
    found = _providers()
    unknown = sorted(set(names) - set(found))
    if unknown:
        raise KeyError(f"C runtime: nothing defines {', '.join(unknown)}")
    return frozenset(found[name] for name in names)


def source(names: Iterable[str]) -> str:
    """The runtime a C file whose printers used the runtime ``names`` needs: the
    prologue and the sections defining them, closed over their requirements, in
    order.

    A section follows the one before it on the next line when that one is a
    shared comment or both are one line (a run of ``#define``s); else after a
    blank line."""
    chosen = closure({PROLOGUE} | providers(names))
    out: list[str] = []
    previous: Section | None = None
    for s in chosen:
        if previous is not None:
            note = not previous.defines
            lines = "\n" not in previous.text and "\n" not in s.text
            out.append("\n" if note or lines else "\n\n")
        out.append(s.text)
        previous = s
    return "".join(out) + "\n"
