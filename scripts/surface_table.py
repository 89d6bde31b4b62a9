"""The supported NumPy surface, generated from difgen's registries into the docs
(``docs/reference/numpy.md``).

Every NumPy name difgen's tracer follows is found by reading the registries, never
from a list kept here: the ufunc and function tables of
``difgen.frontend.numpy_api`` (``UFUNCS``, ``FUNCTIONS``, the ufunc methods) and
of ``difgen.frontend.special_api`` (SciPy's ufuncs and functions), the
creation functions of ``difgen.frontend.namespace.OVERRIDES``, the operators and
methods of ``difgen.core.tracer.Tracer``, and any other table in ``difgen.frontend``
keyed by NumPy, ``math`` or builtin functions. Each row names the primitive behind
the name (read off the handler: the primitive names it binds), or "compound" with
the primitives it is written on, and reads the primitive declarations
(``difgen.core.primitive.PRIMITIVES``) for what each mode supports, the SymPy
lowering and the sparsity rule. A function added to any of these tables appears
on the next run.

    python scripts/surface_table.py            # rewrite the page's table
    python scripts/surface_table.py --check    # exit 1 if the page is stale

The table goes between ``<!-- surface-table:start -->`` and
``<!-- surface-table:end -->``; ``tests/frontend/test_surface_table.py`` fails when it is
out of date.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import difgen.frontend
from difgen.core.primitive import PRIMITIVES, Absent, Missing, Primitive
from difgen.core.tracer import Tracer
from difgen.frontend import (
    array_api,
    array_methods,
    namespace,
    numpy_api,
    reduction_api,
    selection_api,
    shape_api,
    special_api,
)

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reference" / "numpy.md"
START = "<!-- surface-table:start -->"
END = "<!-- surface-table:end -->"

OPERATOR_SYMBOLS = {
    "__add__": "a + b",
    "__sub__": "a - b",
    "__mul__": "a * b",
    "__truediv__": "a / b",
    "__floordiv__": "a // b",
    "__mod__": "a % b",
    "__pow__": "a ** b",
    "__matmul__": "a @ b",
    "__neg__": "-a",
    "__pos__": "+a",
    "__abs__": "abs(a)",
    "__lt__": "a < b",
    "__le__": "a <= b",
    "__gt__": "a > b",
    "__ge__": "a >= b",
    "__eq__": "a == b",
    "__ne__": "a != b",
    "__and__": "a & b",
    "__or__": "a | b",
    "__xor__": "a ^ b",
    "__invert__": "~a",
    "__getitem__": "a[index]",
    "__setitem__": "a[index] = b",
    "__iadd__": "a += b",
    "__isub__": "a -= b",
    "__imul__": "a *= b",
    "__itruediv__": "a /= b",
    "__ipow__": "a **= b",
    "__imatmul__": "a @= b",
    "__len__": "len(a)",
    "__iter__": "iter(a)",
}
"""How each special method reads in user code (reflected forms share a row)."""


@dataclass(frozen=True)
class Row:
    """One NumPy name and what difgen does with it."""

    kind: str
    name: str
    primitives: tuple[str, ...]
    direct: bool

    def cells(self) -> list[str]:
        """The markdown cells of this row."""
        prims = [PRIMITIVES[p] for p in self.primitives]
        name = f"`{self.name}`"
        if self.direct:
            (prim,) = prims
            return [
                name,
                f"`{prim.name}`",
                *_modes(prim),
                _sympy(prim),
                _sparsity(prim),
            ]
        if not prims:
            return [name, "compound", *["as written"] * 4, "as written"]
        listed = ", ".join(f"`{p.name}`" for p in prims)
        if any(p.differentiable for p in prims):
            modes = ["yes"] * 3
        else:
            modes = ["zero (selector)"] * 3
        sympies = {_sympy(p) for p in prims}
        sympy = sympies.pop() if len(sympies) == 1 else "partly"
        return [name, f"compound ({listed})", *modes, sympy, "from its primitives"]


def _modes(prim: Primitive) -> list[str]:
    """Forward, reverse and second-order support, read off the declaration."""
    if not prim.differentiable:
        return ["zero (selector)"] * 3
    reverse = "yes (transpose rule)" if prim.linear else "yes (JVP transposed)"
    second = "no (no batching rule)" if isinstance(prim.batch, Absent) else "yes"
    return ["yes", reverse, second]


def _sympy(prim: Primitive) -> str:
    """Whether the primitive lowers to SymPy (the sympy backend)."""
    if isinstance(prim.sympy, (Absent, Missing)) or prim.sympy is None:
        return "no"
    return "yes" if prim.scalarizable else "yes (small matrices)"


def _sparsity(prim: Primitive) -> str:
    """The name of the primitive's sparsity rule."""
    rule = prim.sparsity
    name = getattr(rule, "__qualname__", type(rule).__name__)
    return name.split(".")[0].replace("_", " ")


# ------------------------------------------------------------ finding primitives
_STRING = re.compile(r"""["']([a-z_0-9]+)["']""")
_NP_REF = re.compile(r"\b(?:np|xp)\.((?:linalg\.)?[a-z_0-9]+)")
_CALL = re.compile(r"\b([a-z_][a-z_0-9]*)\(")
FRONTEND_MODULES = (
    selection_api,
    shape_api,
    reduction_api,
    array_api,
    numpy_api,
    special_api,
)
"""The modules whose helpers a handler may call (numpy_api's entry points are
written in the first four)."""


def _source(fn: Any) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


def _closure_strings(fn: Any) -> list[str]:
    cells = getattr(fn, "__closure__", None) or ()
    values = []
    for cell in cells:
        try:
            values.append(cell.cell_contents)
        except ValueError:
            continue
    return [v for v in values if isinstance(v, str)]


def _closure_functions(fn: Any) -> list[Any]:
    """Functions a handler holds in its closure (the reduction a wrapper adds a
    conversion to, ``reduce_list``'s reducer): what it computes is theirs too."""
    cells = getattr(fn, "__closure__", None) or ()
    found = []
    for cell in cells:
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if inspect.isfunction(value):
            found.append(value)
    return found


def primitives_of(fn: Any, depth: int = 2) -> tuple[tuple[str, ...], bool]:
    """The primitives a handler binds, and whether it is a thin wrapper of one.

    Read from the handler: primitive names held in its closure (``_unary("sin")``,
    ``_reducer("reduce_max")``) or written as string literals in its source; the
    NumPy functions and module helpers it calls, and the functions its closure
    holds, are followed ``depth`` levels. A handler declared an ndarray method
    (``numpy_api.Method``) is its handler; an ndarray method forwarded to its NumPy
    function (``__wrapped__``) binds what that function's handler binds.
    """
    if isinstance(fn, numpy_api.Method):
        return primitives_of(fn.handler, depth)
    wrapped = getattr(fn, "__wrapped__", None)
    if wrapped is not None and fn in array_methods.FORWARDED.values():
        handler = _handler_for_np(wrapped.__name__)
        return (
            ((), False)
            if handler is None
            else (primitives_of(handler, depth)[0], False)
        )
    found = [s for s in _closure_strings(fn) if s in PRIMITIVES]
    source = _source(fn)
    if isinstance(fn, type(lambda: 0)) and fn.__name__ == "<lambda>":
        source = _lambda_text(source)
    literal = [s for s in _STRING.findall(source) if s in PRIMITIVES]
    followed = _followed(source) + _closure_functions(fn)
    direct = len(set(found + literal)) == 1 and not followed
    names = list(dict.fromkeys(found + literal))
    if depth > 0:
        for target in followed:
            inner, _ = primitives_of(target, depth - 1)
            names += [n for n in inner if n not in names]
    if names and len(names) == 1 and direct:
        return tuple(names), True
    return tuple(names), False


def _lambda_text(source: str) -> str:
    """The lambda's own text when ``getsource`` returned its whole dict entry."""
    start = source.find("lambda")
    return source[start:] if start >= 0 else source


def _followed(source: str) -> list[Any]:
    """NumPy functions (via the tables) and frontend helpers a source calls."""
    targets: list[Any] = []
    for ref in _NP_REF.findall(source):
        handler = _handler_for_np(ref)
        if handler is not None:
            targets.append(handler)
    for name in _CALL.findall(source):
        for module in FRONTEND_MODULES:
            helper = getattr(module, name, None)
            if (
                inspect.isfunction(helper)
                and helper.__module__ == module.__name__
                and name not in ("_where", "_axes", "_keep", "_no_out", "_count")
            ):
                targets.append(helper)
    return targets


def _handler_for_np(ref: str) -> Any:
    if ref in numpy_api.UFUNCS:
        return numpy_api.UFUNCS[ref]
    obj: Any = np
    for part in ref.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    try:
        return numpy_api.FUNCTIONS.get(obj)
    except TypeError:
        return None


# ------------------------------------------------------------ the registries
def numpy_name(func: Any) -> str:
    """``np.linalg.norm`` for NumPy's function object (its public name)."""
    name = getattr(func, "__name__", repr(func))
    for prefix, module in (("np", np), ("np.linalg", np.linalg), ("np.fft", np.fft)):
        if getattr(module, name, None) is func:
            return f"{prefix}.{name}"
    module_name = getattr(func, "__module__", "") or ""
    if module_name == "builtins":
        return f"{name}()"
    if module_name in ("math", "cmath"):
        return f"{module_name}.{name}"
    module_name = re.sub(r"^numpy", "np", module_name)
    return f"{module_name}.{name}"


def rows() -> list[Row]:
    """Every NumPy name difgen traces, in table order."""
    out: list[Row] = []
    seen: set[str] = set()

    def add(kind: str, name: str, handler: Any) -> None:
        if name in seen:
            return
        seen.add(name)
        prims, direct = primitives_of(handler)
        out.append(Row(kind, name, prims, direct))

    for name in sorted(numpy_api.UFUNCS):
        add("ufunc", f"np.{name}", numpy_api.UFUNCS[name])
    for (ufunc, method), handler in sorted(numpy_api._UFUNC_METHODS.items()):
        add("ufunc method", f"np.{ufunc}.{method}", handler)
    for func, handler in sorted(
        numpy_api.FUNCTIONS.items(), key=lambda kv: numpy_name(kv[0])
    ):
        add("function", numpy_name(func), handler)
    for name, handler in sorted(namespace.OVERRIDES.items()):
        add("creation", f"np.{name}", handler)
    for table, func, handler in _other_tables():
        add(f"function ({table})", numpy_name(func), handler)
    for name, handler in sorted(special_api.UFUNC_NAMES.items()):
        add("scipy.special ufunc", f"scipy.special.{name}", handler)
    for name, handler in sorted(special_api.FUNCTIONS.items()):
        add("scipy.special function", f"scipy.special.{name}", handler)
    members = list(_tracer_members())
    for attr, member in members:
        if attr in OPERATOR_SYMBOLS:
            add("operator", OPERATOR_SYMBOLS[attr], member)
    for attr, member in members:
        if attr not in OPERATOR_SYMBOLS:
            add("array method or attribute", f"ndarray.{attr}", member)
    return out


def _other_tables() -> Iterator[tuple[str, Any, Any]]:
    """Tables of ``difgen.frontend`` modules other than the known ones, keyed by
    NumPy, ``math`` or builtin functions (so a new table is picked up)."""
    known = {id(numpy_api.FUNCTIONS), id(numpy_api.UFUNCS), id(namespace.OVERRIDES)}
    known.add(id(numpy_api._UFUNC_METHODS))
    for info in pkgutil.iter_modules(difgen.frontend.__path__):
        module = importlib.import_module(f"difgen.frontend.{info.name}")
        for attr, table in sorted(vars(module).items()):
            if not isinstance(table, dict) or id(table) in known or not table:
                continue
            for key, handler in table.items():
                module_name = getattr(key, "__module__", None) or ""
                if (
                    callable(key)
                    and callable(handler)
                    and _is_numeric_module(module_name)
                ):
                    yield f"{info.name}.{attr}", key, handler


def _is_numeric_module(name: str) -> bool:
    return name.split(".")[0] in ("numpy", "math", "builtins", "cmath")


def _tracer_members() -> Iterator[tuple[str, Any]]:
    """Public methods, properties and operators of the tracer, by name."""
    reflected = {f"__r{op[2:]}": op for op in OPERATOR_SYMBOLS}
    members: dict[str, Any] = {}
    for klass in reversed(Tracer.__mro__[:-1]):
        members.update(vars(klass))
    for attr in sorted(members):
        member = members[attr]
        if attr in reflected or (attr.startswith("_") and attr not in OPERATOR_SYMBOLS):
            continue
        if attr in ("atom", "write", "is_var") or attr.startswith("__array"):
            continue
        if isinstance(member, property):
            member = member.fget
        if "_branch_error" in getattr(member, "__qualname__", ""):
            continue  # a conversion (float(), .item()): refused when traced
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if callable(member):
            yield attr, member


# ------------------------------------------------------------ output
HEADER = (
    "| NumPy | primitive(s) | forward | reverse | second order | sympy backend "
    "| sparsity rule |\n|---|---|---|---|---|---|---|"
)


LEGEND = """\
Generated by `python scripts/surface_table.py` from difgen's registries (do not edit
by hand; `tests/frontend/test_surface_table.py` fails when this table is stale). *primitive*:
the one primitive a name binds; *compound*: written on the primitives listed (or, when
none is listed, on tracer operators and constants, so that its derivatives are those of
the operations it is written with: *as written*). *zero (selector)*: comparisons and
the like carry no derivative. *sympy backend*: the primitive lowers to SymPy
(*small matrices*: matrix factorizations, kept out of scalar code above small sizes).
*sparsity rule*: the jacobian-pattern rule of `primitives/patterns.py`.
"""


def table() -> str:
    """The whole generated section (between the markers)."""
    lines = [LEGEND]
    current = None
    for row in rows():
        if row.kind != current:
            if current is not None:
                lines.append("")
            lines += [f"**{row.kind}**", "", HEADER]
            current = row.kind
        lines.append("| " + " | ".join(row.cells()) + " |")
    return "\n".join(lines) + "\n"


def splice(readme: str, section: str) -> str:
    """The page with ``section`` between the markers (which must be present)."""
    start = readme.index(START) + len(START)
    end = readme.index(END)
    return readme[:start] + "\n" + section + readme[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if stale")
    args = parser.parse_args(argv)
    text = PAGE.read_text()
    updated = splice(text, table())
    if args.check:
        if updated != text:
            print(
                "docs/reference/numpy.md: the supported-surface table is out of date; run "
                "python scripts/surface_table.py"
            )
            return 1
        return 0
    PAGE.write_text(updated)
    print(f"wrote the supported-surface table ({len(rows())} names) into {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
