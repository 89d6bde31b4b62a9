"""The CPython argument prologue every compiled operator starts with, written once
(docs/design.md, section 10).

A ``METH_FASTCALL`` operator parses its call with ``dg_parse`` (positional calls
skip the keyword parser), then converts each argument: an exact float64 array of
the argument's shape (or a float) on the fast path, anything else through the
module's own ``_as_array``/``_as_scalar`` (``dg_array``/``dg_scalar`` of the C
runtime), so that the C accepts and refuses what the Python operator does. The
straight-line operators (:mod:`difgen.targets.c.extension`), the loop operators
(:mod:`difgen.targets.c.abi`) and the points variants
(:mod:`difgen.targets.c.points`, whose shared arguments convert this way) print
their prologues with these functions; they differ only in what they declare
around them and where a converted argument is kept.
"""

from __future__ import annotations

from collections.abc import Sequence

from difgen.targets.c.glue import PREFIX, Used, dims, nulls


def parse_lines(
    function: str,
    names: Sequence[str],
    positional: int,
    use: Used,
    declare: Sequence[str] = (),
    before_parse: Sequence[str] = (),
) -> list[str]:
    """The arguments' slots ``dg_argv``, the operator's own declarations
    (``declare``), the table of parameter names, ``before_parse`` and the call of
    ``dg_parse`` for ``function`` (``positional`` of the ``names`` may come by
    position; the rest are keywords), which returns NULL on a wrong call
    (``use`` records the runtime call)."""
    n = len(names)
    quoted = ", ".join(f'"{name}"' for name in names)
    return [
        f"PyObject *{PREFIX}argv[{n}] = {{{nulls(n)}}};",
        *declare,
        f"static const char *const {PREFIX}names[] = {{{quoted}}};",
        *before_parse,
        (
            f'if ({use("parse")}("{function}", {PREFIX}args, {PREFIX}nargs, '
            f"{PREFIX}kwnames, {PREFIX}names, {n}, {positional}, "
            f"{PREFIX}argv) < 0) return NULL;"
        ),
    ]


def c_label(function: str, name: str) -> str:
    """The C string literal naming an argument in the errors, as the Python
    operator's checks name it (:func:`difgen.targets.signatures.label`)."""
    return f'"{function}: {name}"'


def convert_lines(
    argv: str,
    name: str,
    shape: tuple[int, ...],
    into: str,
    use: Used,
    *,
    declared: bool = True,
    cast: str = "",
    initial: str | None = None,
    function: str = "",
    ints: bool = False,
) -> list[str]:
    """Convert the call's argument ``argv`` (parameter ``name``) and check it.

    A scalar becomes the double ``into`` (declared here, set to ``initial``
    first when given). An array becomes ``into``, a new reference to a
    C-contiguous float64 array of ``shape`` (``cast`` before the call's result;
    declared here as a ``PyArrayObject *`` unless ``declared`` is False, when the
    caller declared it). Either jumps to ``dg_fail`` when the argument is
    refused (the Python exception set), with an error naming ``function`` (the
    operator) and ``name`` as the Python operator's does. The runtime calls are
    recorded in ``use``. With ``ints`` the argument is an int64 one that the
    operator only casts to float64 (:mod:`difgen.targets.c.ints`): checked as
    int64 data, converted to doubles all the same."""
    said = c_label(function, name)
    if not shape:
        start = f" = {initial}" if initial is not None else ""
        convert = use("int_scalar" if ints else "scalar")
        return [
            f"double {into}{start};",
            f"if ({convert}({argv}, {said}, &{into}) < 0) goto {PREFIX}fail;",
        ]
    table = f"{PREFIX}dims_{name}"
    convert = use("ints" if ints else "array")
    target = f"PyArrayObject *{into}" if declared else into
    return [
        f"static const npy_intp {table}[] = {dims(shape)};",
        f"{target} = {cast}{convert}({argv}, {said}, {len(shape)}, {table});",
        f"if ({into} == NULL) goto {PREFIX}fail;",
    ]
