"""The printer's pieces: C literals, ``static const`` tables, loop nests whose
accesses are index maps (affine ones as index arithmetic, the others as tables)
and one element of an elementwise equation as C (docs/design.md, section 10).
Used by :mod:`difgen.targets.c.printer` only."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from difgen.core.ir import Lit
from difgen.core.primitive import LoopForm
from difgen.targets.c.expressions import Unsupported, c_expr
from difgen.targets.c.glue import PREFIX, Used
from difgen.targets.c.moves import SEPARABLE_FROM, affine, separable
from difgen.targets.c.program import CONST_LIMIT, NoLoopForm, Store
from difgen.targets.tables import block_runs_within


def c_number(value: float) -> str:
    """A double as a C literal (``INFINITY``, ``NAN`` for the specials)."""
    value = float(value)
    if np.isnan(value):
        return "NAN"
    if value in (float("inf"), float("-inf")):
        return "INFINITY" if value > 0 else "(-INFINITY)"
    text = repr(value)
    return f"({text})" if text.startswith("-") else text


@dataclass
class Access:
    """One read or write in a loop: a base and its flat positions per iteration."""

    base: Store
    positions: np.ndarray  # int64, the loop's shape


COMPACT_FROM = 4096
"""Integer tables of at least this many entries are printed so that the C
source does not grow with them (:func:`compact_table`); smaller ones are
literals of ``int``."""

COMPACTION = 8
"""A large table is decoded from its block runs when they take at most one
number per this many entries."""

RUN_PERIOD = 32
"""Longest block of a C table's runs (``targets.tables.block_runs_within``)."""


def int_type(flat: np.ndarray) -> str:
    """The narrowest C integer type holding every entry."""
    lo, hi = (int(flat.min()), int(flat.max())) if flat.size else (0, 0)
    for bits in (8, 16, 32):
        if -(1 << (bits - 1)) <= lo and hi < (1 << (bits - 1)):
            return f"npy_int{bits}"
    return "npy_int64"


def compact_table(
    name: str, flat: np.ndarray, ctype: str | None = None
) -> tuple[list[str], list[str]]:
    """A large integer table as C whose text does not grow with it: (the
    declarations, the statements that fill it once, before its first read;
    none for a literal). From its block runs (``targets/tables.py``: blocks of
    ``p`` entries, each the previous plus a shift per place, the affine runs
    and the stencils' rows) when they take at most one number per
    :data:`COMPACTION` entries, decoded by one loop; else a literal of the
    narrowest integer type (``ctype``, when given, is the table's type)."""
    n = int(flat.size)
    kind = ctype or int_type(flat)
    found = block_runs_within(flat, n // COMPACTION, RUN_PERIOD)
    if found is None:
        return [_literal(f"static const {kind}", name, flat)], []
    p, runs = found
    numbers: list[int] = []
    for run in runs:
        numbers += [run.reps, *run.first, *run.shift]
    runs_name = f"{name}_runs"
    lines = [
        f"static {kind} {name}[{max(n, 1)}];",
        _literal(
            f"static const {int_type(np.array(numbers))}", runs_name, np.array(numbers)
        ),
    ]
    step = 1 + 2 * p
    j, q, k, c = (f"{PREFIX}{v}" for v in "jqkc")
    at = f"{runs_name}[{q} + 1 + {c}] + {k} * (npy_int64){runs_name}[{q} + {1 + p} + {c}]"
    loop_q = f"for (npy_intp {q} = 0; {q} < {len(numbers)}; {q} += {step}) {{"
    loop_c = f"for (npy_intp {c} = 0; {c} < {p} && {j} < {n}; {c}++, {j}++)"
    fill = [
        f"{{ /* {name}: {n} entries from {len(runs)} runs of blocks of {p} */",
        f"    npy_intp {j} = 0;",
        f"    {loop_q}",
        f"        const npy_int64 {PREFIX}reps = {runs_name}[{q}];",
        f"        for (npy_int64 {k} = 0; {k} < {PREFIX}reps; {k}++)",
        f"            {loop_c}",
        f"                {name}[{j}] = ({kind})({at});",
        "    }",
        "}",
    ]
    return lines, fill


def _literal(head: str, name: str, flat: np.ndarray) -> str:
    items = [str(int(v)) for v in flat] or ["0"]
    rows = ",\n    ".join(
        ", ".join(items[i : i + 16]) for i in range(0, len(items), 16)
    )
    return f"{head} {name}[{len(items)}] = {{\n    {rows}\n}};"


class Tables:
    """The ``static const`` tables of one C function (equal tables shared);
    ``init``: the statements filling its large tables, once before the
    function's first statement (:func:`compact_table`)."""

    def __init__(self, stem: str) -> None:
        self.stem = stem
        self.lines: list[str] = []
        self.init: list[str] = []
        self._names: dict[tuple[str, bytes], str] = {}

    def ints(self, values: np.ndarray) -> str:
        flat = np.ascontiguousarray(values, dtype=np.int64).ravel()
        if flat.size >= COMPACT_FROM:
            key = ("compact", flat.tobytes())
            if key not in self._names:
                name = f"{PREFIX}{self.stem}_t{len(self._names)}"
                self._names[key] = name
                lines, fill = compact_table(name, flat)
                self.lines += lines
                self.init += fill
            return self._names[key]
        return self._add("int", flat, [str(int(v)) for v in flat])

    def doubles(self, values: np.ndarray) -> str:
        flat = np.ascontiguousarray(values, dtype=np.float64).ravel()
        if flat.size > CONST_LIMIT:
            raise NoLoopForm(f"a constant of {flat.size} elements")
        return self._add("double", flat, [c_number(v) for v in flat])

    def _add(self, ctype: str, flat: np.ndarray, items: list[str]) -> str:
        key = (ctype, flat.tobytes())
        if key not in self._names:
            name = f"{PREFIX}{self.stem}_t{len(self._names)}"
            self._names[key] = name
            rows = [", ".join(items[i : i + 8]) for i in range(0, len(items), 8)]
            body = ",\n    ".join(rows) if rows else "0"
            self.lines.append(
                f"static const {ctype} {name}[{max(len(items), 1)}] = {{\n    {body}\n}};"
            )
        return self._names[key]


def _coalesce(
    shape: tuple[int, ...],
    strides: list[tuple[int, ...]],
    blocked: frozenset[int] = frozenset(),
) -> tuple[list[int], list[list[int]], list[int]]:
    """Merge adjacent loop dimensions every affine access walks as one (and drop
    dimensions of length 1): most loops become one flat loop. A ``blocked``
    dimension (read through a table of its own) is merged with none; the last
    list is each loop's first original dimension."""
    dims = [d for d, n in enumerate(shape) if n != 1]
    sizes = [shape[d] for d in dims]
    st = [[s[d] for d in dims] for s in strides]
    d = len(sizes) - 2
    while d >= 0:
        free = dims[d] not in blocked and dims[d + 1] not in blocked
        if free and all(s[d] == s[d + 1] * sizes[d + 1] for s in st):
            sizes[d] *= sizes[d + 1]
            for s in st:
                s[d] = s[d + 1]
                del s[d + 1]
            del sizes[d + 1]
            del dims[d + 1]
        d -= 1
    return sizes, st, dims


MARK = "\x00"


class LoopNest:
    """A loop nest over ``shape`` whose body refers to accesses by marker."""

    def __init__(self, shape: tuple[int, ...], tables: Tables) -> None:
        self.shape = shape
        self.tables = tables
        self.accesses: list[Access] = []

    def at(self, base: Store, positions: np.ndarray) -> str:
        """A marker standing for ``base[positions at the loop index]``."""
        if base.shape == ():
            return base.name
        self.accesses.append(Access(base, np.asarray(positions, dtype=np.int64)))
        return f"{MARK}{len(self.accesses) - 1}{MARK}"

    def render(
        self,
        comment: str,
        before: list[str],
        body: list[str],
        after: list[str],
        inner: int | None = None,
        inner_pre: Sequence[str] = (),
        inner_post: Sequence[str] = (),
    ) -> list[str]:
        """The nest as C. With ``inner``, the last loop dimension (length
        ``inner``) is a reduction loop: ``inner_pre`` and ``inner_post`` run around it
        (accesses there have positions over the outer dimensions only)."""
        outer = self.shape[:-1] if inner is not None else self.shape
        forms: list[tuple[int, tuple[int, ...], int | None] | None] = []
        strides = []
        tabled: dict[int, dict[int, np.ndarray]] = {}  # access: dimension: table
        for k, a in enumerate(self.accesses):
            pos = a.positions
            full = pos.shape == self.shape
            if inner is not None and full:
                found = affine(pos)
                split = (
                    None if found is None else (found[0], found[1][:-1], found[1][-1])
                )
            else:
                found = affine(pos)
                split = None if found is None else (found[0], found[1], None)  # type: ignore[assignment]
                if split is None and inner is None and pos.size >= SEPARABLE_FROM:
                    apart = separable(pos)
                    if apart is not None:  # a small table per dimension
                        offset, pieces = apart
                        tabled[k] = {
                            d: p for d, p in enumerate(pieces) if not isinstance(p, int)
                        }
                        steps = [p if isinstance(p, int) else 0 for p in pieces]
                        split = (offset, tuple(steps), None)  # type: ignore[assignment]
            forms.append(split)
            if split is not None:
                strides.append(split[1])
        blocked = frozenset(d for t in tabled.values() for d in t)
        sizes, merged, origin = _coalesce(outer, strides, blocked)
        loop = [f"{PREFIX}i{d}" for d in range(len(sizes))]
        uses_table = any(f is None for f in forms)
        flat = loop[0] if len(sizes) == 1 else f"{PREFIX}n"
        texts = []
        k_iter = 0
        for k, (a, form) in enumerate(zip(self.accesses, forms)):
            if form is None:
                table = self.tables.ints(a.positions)
                index = flat if len(sizes) else "0"
                if inner is not None and a.positions.shape == self.shape:
                    index = f"({index}) * {inner} + {PREFIX}k" if inner else index
                texts.append(f"{a.base.name}[{table}[{index}]]")
                continue
            offset, _, kstride = form
            parts = [str(offset)] if offset else []
            for var, s, d in zip(loop, merged[k_iter], origin):
                if d in tabled.get(k, {}):
                    parts.append(f"{self.tables.ints(tabled[k][d])}[{var}]")
                elif s:
                    parts.append(var if s == 1 else f"{s} * {var}")
            k_iter += 1
            if kstride:
                parts.append(f"{PREFIX}k" if kstride == 1 else f"{kstride} * {PREFIX}k")
            texts.append(f"{a.base.name}[{' + '.join(parts) or '0'}]")

        def fill(line: str) -> str:
            return re.sub(f"{MARK}(\\d+){MARK}", lambda m: texts[int(m.group(1))], line)

        core = [fill(line) for line in body]
        if inner is not None:
            core = [
                *(fill(line) for line in inner_pre),
                f"for (npy_intp {PREFIX}k = 0; {PREFIX}k < {inner}; {PREFIX}k++) {{",
                *(f"    {line}" for line in core),
                "}",
                *(fill(line) for line in inner_post),
            ]
        if uses_table and len(sizes) > 1:
            core.append(f"{PREFIX}n++;")
        lines = [f"/* {comment} */", "{"]
        lines += [f"    {fill(line)}" for line in before]
        if uses_table and len(sizes) > 1:
            lines.append(f"    npy_intp {PREFIX}n = 0;")
        depth = 1
        for var, n in zip(loop, sizes):
            pad = "    " * depth
            lines.append(f"{pad}for (npy_intp {var} = 0; {var} < {n}; {var}++) {{")
            depth += 1
        lines += ["    " * depth + line for line in core]
        for _ in sizes:
            depth -= 1
            lines.append("    " * depth + "}")
        lines += [f"    {fill(line)}" for line in after]
        lines.append("}")
        return lines


_ELEMENT_CACHE: dict[Any, tuple[str, frozenset[str]]] = {}


def element_text(eqn: Any, operands: list[str], use: Used) -> str:
    """One element of an elementwise equation as C, from its primitive's SymPy
    rule applied to scalar symbols (booleans are doubles 0.0/1.0 in the loops);
    the runtime helpers it calls are recorded in ``use``. A rule C cannot print
    (a function neither C nor its runtime defines, Python-only syntax) is refused
    by the printer on its SymPy nodes: the primitive then has no loop form."""
    prim = eqn.primitive
    dtypes = tuple(a.dtype for a in eqn.inputs)
    key = (prim.name, eqn.params, dtypes, eqn.out.dtype)
    if key not in _ELEMENT_CACHE:
        syms = [sp.Symbol(f"{PREFIX}s{i}") for i in range(len(eqn.inputs))]
        form = prim.c_loop
        conditions = isinstance(form, LoopForm) and form.conditions
        logical = eqn.out.dtype == "bool" or conditions
        args = []
        for s, dtype in zip(syms, dtypes):
            value: Any = sp.Ne(s, 0) if dtype == "bool" and logical else s
            args.append(np.array(value, dtype=object))
        try:
            result = prim.lower_sympy(*args, **eqn.params.as_dict())
            helpers = Used()
            text = c_expr(np.asarray(result, dtype=object)[()], helpers)
        except (Unsupported, Exception) as exc:  # noqa: BLE001 (any rule failing)
            raise NoLoopForm(f"{prim.name} ({type(exc).__name__})") from None
        _ELEMENT_CACHE[key] = (text, helpers.frozen())
    text, called = _ELEMENT_CACHE[key]
    special = _at_literal(eqn)
    if special is not None:  # the primitive's declared form at this literal
        text, called = special, frozenset()
    use.add(called)
    return re.sub(
        f"\\b{PREFIX}s(\\d+)\\b", lambda m: f"({operands[int(m.group(1))]})", text
    )


def _at_literal(eqn: Any) -> str | None:
    """The element's C as its primitive declares it where an operand is a
    literal NumPy takes a fast path for (``LoopForm.at_literals``), or None."""
    form = eqn.primitive.c_loop
    if not isinstance(form, LoopForm):
        return None
    for operand, value, c_form in form.at_literals:
        atom = eqn.inputs[operand]
        if (
            isinstance(atom, Lit)
            and atom.value.size == 1
            and float(atom.value) == value
        ):
            return c_form.format(*(f"{PREFIX}s{i}" for i in range(len(eqn.inputs))))
    return None


def eqn_text(eqn: Any) -> str:
    """The IR equation, short, safe in a C comment."""
    params = ", ".join(f"{k}={_short(v)}" for k, v in eqn.params.as_dict().items())
    head = eqn.primitive.name + (f"[{params}]" if params else "")
    shape = ",".join(str(n) for n in eqn.out.shape)
    text = f"f64[{shape}] = {head}"
    return text.replace("*/", "* /")[:100]


def _short(value: Any) -> str:
    text = repr(value).replace("\n", " ")
    return text if len(text) <= 24 else text[:21] + "..."
