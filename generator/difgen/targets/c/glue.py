"""C glue shared by every compiled operator: names, the record of the runtime a
printed function uses, the lines that return results, and the module helpers the
C calls for sparse results.

It sits beneath :mod:`difgen.targets.c.extension` (straight-line operators),
:mod:`difgen.targets.c.loops` (loop operators) and
:mod:`difgen.targets.c.points` (points variants), which ``c_code`` imports: the
points variants could not use ``c_code``'s own copy without an import cycle, and
two copies of the same C glue would drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from difgen.targets.numpy.printer import CsrFormat
from difgen.targets.parts import NOTHING, Function, Uses

PREFIX = "dg_"
"""Every name the C code defines itself starts with this (arguments' element
names, temporaries and helpers never do: ``c_code.check_names``)."""


class Used:
    """The names of the C runtime (``templates/c/*.c``) one printed function uses,
    as the printing calls that wrote them report them: each call that writes
    ``dg_new(...)`` writes it as ``use("new")``, and the straight-line printer adds
    the helpers its SymPy printer names (``_sin``). The C file carries the
    runtime sections of these names and only these
    (:func:`difgen.targets.c.runtime.source`), without reading its own text
    back; a test checks that no printer uses a name it does not report."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def __call__(self, stem: str) -> str:
        """The runtime's ``dg_<stem>``, recorded as used."""
        name = PREFIX + stem
        self.names.add(name)
        return name

    def add(self, names: Iterable[str]) -> None:
        """Record runtime names a printer reported (helpers such as ``_sin``)."""
        self.names.update(names)

    def frozen(self) -> frozenset[str]:
        return frozenset(self.names)


def dims(shape: Sequence[int | str]) -> str:
    """A C initializer of a shape's dimensions (``{0}`` for a scalar: C has no
    empty initializer list)."""
    return "{" + ", ".join(str(n) for n in shape) + "}" if shape else "{0}"


def nulls(n: int) -> str:
    """``n`` NULLs, comma-separated (an array of references, all empty)."""
    return ", ".join(["NULL"] * n)


def return_lines(nres: int, use: Used) -> list[str]:
    """Return the one result ``dg_res[0]``, or the tuple of the ``nres`` results
    (which steals them; on failure the caller's cleanup follows these lines)."""
    if nres == 1:
        return [f"return {PREFIX}res[0];"]
    return [
        f"PyObject *{PREFIX}t = {use('tuple')}({nres}, {PREFIX}res);",
        f"if ({PREFIX}t != NULL) return {PREFIX}t;",
    ]


def csr_helpers(
    kinds: Sequence[str], formats: dict[int, CsrFormat], in_place: bool
) -> tuple[tuple[tuple[str, str], ...], Uses]:
    """The module's helpers the C calls for sparse results, as (key, lambda
    source): ``kind`` wraps the data into a CSR array, ``kind.out`` (with
    ``in_place``, for the last result) checks a CSR ``out`` and returns its data;
    and what those lambdas name (for the Function that carries them)."""
    helpers = []
    uses = NOTHING
    for i, fmt in sorted(formats.items()):
        helpers.append((kinds[i], "lambda data: " + fmt.format("data")))
        uses |= fmt.FORMAT_USES
        if in_place and i == len(kinds) - 1:
            helpers.append((f"{kinds[i]}.out", f"lambda out: {fmt.out_check('out')}"))
            uses |= fmt.OUT_CHECK_USES
    return tuple(helpers), uses


def renamed(function: Function, old: str) -> Function:
    """``function`` (printed as the operator ``old``, since renamed) with its C
    twin renamed after it, so that it shares one extension with the operator
    ``old`` itself: an ipopt module's private ``_lagrangian_hessian`` beside
    its ``hessian`` over z (:func:`difgen.pipeline.ipopt_parts`).

    A printed operator names its file-scope C symbols ``dg_op_<old>`` (the
    function) and ``dg_<old>_*`` (its tables, patterns, selections), its error
    labels ``"<old>"`` and ``"<old>: <argument>"``, and the helpers it asks the
    module for (its sparse result's wrapper and ``out`` check) by its result
    kind; each becomes the new name's. A helper keyed by a kind other than the
    operator's name would be ambiguous, and is refused."""
    new = function.name
    if not function.native or new == old:
        return function
    for key, _ in function.wrappers:
        if key not in (old, f"{old}.out"):
            raise ValueError(f"{new}: the C helper {key!r} is not named after {old}")
    text = re.sub(
        rf"\b{PREFIX}op_{re.escape(old)}\b", f"{PREFIX}op_{new}", function.native
    )
    text = re.sub(rf"\b{PREFIX}{re.escape(old)}_", f"{PREFIX}{new}_", text)
    text = re.sub(rf'"{re.escape(old)}(\.out)?"', rf'"{new}\1"', text)
    text = re.sub(rf'"{re.escape(old)}: ', f'"{new}: ', text)
    doc = function.native_doc
    if doc.startswith(f"{old}("):
        doc = new + doc[len(old) :]
    wrappers = tuple(
        (new + key[len(old) :], source) for key, source in function.wrappers
    )
    return replace(function, native=text, native_doc=doc, wrappers=wrappers)
