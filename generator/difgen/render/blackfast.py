"""Black formatting of a generated module in time that does not grow with its body.

Black parses and formats about 40 KB of code a second, so a 600 KB module (a
1,000-step unrolled loop) spent 15 s of CPU in ``black.format_str`` alone. Most of
such a module is long runs of simple assignments to temporaries (``t12 = t9[0]``,
``t13 = np.array([t10 + 0.05 * t11, ...])``), and black formats each of those
statements on its own: a simple statement's layout depends only on its tokens, its
length and its indentation, never on the statements around it (there are no blank
lines or comments between them to manage).

So a long run is taken out of the module before black sees it (a one-line
placeholder stands in for it), and its statements are formatted apart, by shape:
each temporary ``tNNN`` is renamed ``t000`` (same length, so black splits the line
at the same places), equal shapes are formatted once, in one black call for all of
them, and the names are put back in order (black never reorders, adds or drops
names). The result is byte-identical to black on the whole module; anything that
does not fit this pattern (comments, strings, star-arguments, walrus, nested blocks,
multi-line entries) stays in the module that black formats as before, and any
surprise in black's output falls back to formatting the whole module.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import black

MODE = black.Mode(line_length=88)
MIN_RUN = 16  # shorter runs stay in the module: too small to be worth the splice
_TEMP = re.compile(r"\bt(\d+)\b")
_SIMPLE = re.compile(r"t\d+(\[[^\]\n]*\])? = [^\n]+")
_PLACEHOLDER = "DIFGEN_RUN_{} = 0"
_FOUND = re.compile(r"^( *)DIFGEN_RUN_(\d+) = 0$", re.MULTILINE)


def format_module(text: str) -> str:
    """``black.format_str(text)`` with the module's default mode."""
    return black.format_str(text, mode=MODE)


def _simple(line: str) -> bool:
    """Whether ``line`` (one body entry) is a one-line assignment to a temporary
    that black formats the same alone as in its function: no comment, string,
    backslash, star-argument (black's target-version detection looks at those),
    walrus, or unbalanced bracket."""
    if not _SIMPLE.fullmatch(line) or any(c in line for c in "#'\"\\;"):
        return False
    if ":=" in line or re.search(r"[(\[,{]\s*\*", line) or line.endswith(":"):
        return False
    return all(
        line.count(o) == line.count(c) for o, c in (("(", ")"), ("[", "]"), ("{", "}"))
    )


def extract_runs(
    bodies: Sequence[Sequence[str]],
) -> tuple[list[tuple[str, ...]], list[list[str]]]:
    """The bodies with each run of at least ``MIN_RUN`` simple entries replaced by a
    placeholder line, and the runs taken out (placeholder ``k`` is ``runs[k]``)."""
    runs: list[list[str]] = []
    out: list[tuple[str, ...]] = []
    for body in bodies:
        kept: list[str] = []
        i = 0
        while i < len(body):
            j = i
            while j < len(body) and _simple(body[j]):
                j += 1
            if j - i >= MIN_RUN:
                kept.append(_PLACEHOLDER.format(len(runs)))
                runs.append(list(body[i:j]))
                i = j
            else:
                kept.append(body[i])
                i += 1
        out.append(tuple(kept))
    return out, runs


def format_with_runs(
    text: str, runs: list[list[str]], original: Callable[[], str]
) -> str:
    """Black's formatting of ``original()`` (the module with its runs in place),
    made from ``text`` (the module with placeholders) and the runs formatted apart."""
    if not runs:
        return format_module(text)
    skeleton = format_module(text)
    found = list(_FOUND.finditer(skeleton))
    if sorted(int(m.group(2)) for m in found) != list(range(len(runs))):
        return format_module(original())
    pieces: list[str] = []
    end = 0
    for m in found:
        formatted = _format_run(runs[int(m.group(2))], m.group(1))
        if formatted is None:
            return format_module(original())
        pieces += [skeleton[end : m.start()], formatted]
        end = m.end()
    pieces.append(skeleton[end:])
    return "".join(pieces)


def _format_run(lines: list[str], indent: str) -> str | None:
    """The run's statements as black lays them out at ``indent`` (None: black did
    something unexpected; the caller formats the whole module instead)."""
    if len(indent) % 4 or not indent:
        return None
    depth = len(indent) // 4
    shapes: dict[str, int] = {}
    for line in lines:
        shapes.setdefault(_TEMP.sub(lambda m: "t" + "0" * len(m.group(1)), line), 0)
    header = ["def _():"] + ["    " * d + "if _:" for d in range(1, depth)]
    source = "\n".join(header + [indent + s for s in shapes]) + "\n"
    out = format_module(source).splitlines()
    if out[:depth] != header:
        return None
    statements: list[list[str]] = []
    for line in out[depth:]:
        if not line.startswith(indent):
            return None
        rest = line[len(indent) :]
        if rest[:1] not in (" ", ")", "]", "}"):
            statements.append([line])
        elif statements:
            statements[-1].append(line)
        else:
            return None
    if len(statements) != len(shapes):
        return None
    layout = dict(zip(shapes, ("\n".join(s) for s in statements)))
    result = []
    for line in lines:
        names = [m.group(0) for m in _TEMP.finditer(line)]
        canonical = _TEMP.sub(lambda m: "t" + "0" * len(m.group(1)), line)
        formatted = layout[canonical]
        if len(_TEMP.findall(formatted)) != len(names):
            return None
        result.append(_restore(formatted, names))
    return "\n".join(result)


def _restore(formatted: str, names: list[str]) -> str:
    """``formatted`` with its temporaries renamed back to ``names``, in order."""
    it = iter(names)
    return _TEMP.sub(lambda m: next(it), formatted)


def assigned_names(runs: list[list[str]], body: Sequence[str]) -> set[str] | None:
    """The names assigned by the runs whose placeholders are in ``body``: the
    target of each ``tNNN = ...`` (a subscripted target assigns no name); None if
    a run has a comprehension (its loop variables are assignments too)."""
    names: set[str] = set()
    for line in body:
        if (m := _FOUND.fullmatch(line)) is None:
            continue
        for statement in runs[int(m.group(2))]:
            if re.search(r"\bfor\b", statement):
                return None
            target = statement.split(" = ", 1)[0]
            if "[" not in target:
                names.add(target)
    return names
