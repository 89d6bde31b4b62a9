"""``emit = "c"`` for array code: C loops over the hard-coded shapes ("vector C").

The straight-line C of :mod:`difgen.targets.c.extension` writes one statement per scalar,
which is right for small graphs and wrong for large ones (a 10^4-element gradient
would be 10^5 statements, and compiling a 512-state Brusselator jacobian that way
took 72 s). This module prints the trace backend's optimized operator graph -- the
graph the vector (NumPy) emission prints, equation for equation, in the same order
-- as C loops. The Python fallback of such an operator is that vector emission.

How each equation becomes C (docs/design.md, section 10):

- **Constants.** An equation whose inputs are all constants is evaluated at build
  time by the primitive's own ``impl`` (NumPy, as the vector emission's import-time
  hoisting does) and printed as a ``static const double`` table.
- **Elementwise** primitives have no C template of their own: the primitive's SymPy
  rule (the one the scalar emission lowers with) is applied to fresh scalar symbols
  and printed by :func:`difgen.targets.c.extension.c_expr`, so the declaration stays
  the one place that knows the primitive. Consecutive elementwise equations of the
  same shape are **fused** into one loop with scalar temporaries; a value gets an
  array only when a consumer outside the loop (or the result) needs it. A full or
  partial reduction of a value of the loop's shape accumulates inside that loop.
- **Structural** primitives (``STRUCTURAL``: getitem, reshape, transpose,
  broadcast_to, concatenate, pack, pad, scatter_add, scatter_sum, set_index) are
  linear maps that move elements. Their ``impl`` is run once at build time on
  object arrays of :class:`Ref` (an input element) and gives, per output element,
  the ordered terms it sums. A map that reads each output element from one element
  of one input is a *view*: no code, its index table composes with whatever reads
  it. Any other map is written into an array (zeros, then one loop per term rank
  and input, in NumPy's order). Index tables that are affine in the loop indices
  are printed as index arithmetic, the others as ``static const int`` tables.
- **Reductions** (``reduce_sum``, ``reduce_max``, ``reduce_min``, ``reduce_prod``)
  and **matmul** have a loop form here (``LOOPS``); ``max``/``min`` propagate NaN
  as NumPy does (the ``_maximum``/``_minimum`` of the C runtime).
- Any other primitive has **no loop form**: :class:`NoLoopForm` names it, and the
  trace backend keeps that operator in Python (the extension does not export it).

Why a table here and not a field on :class:`~difgen.core.primitive.Primitive`: the
loop forms are few and generic (a structural primitive's form is derived from its
``impl``, an elementwise one's from its ``sympy`` rule), so a field would repeat the
same three values across ~70 declarations; the table names the exceptions.

Floating point: the same IEEE operations on the same doubles in the same order as
the vector emission's NumPy calls, except (1) sums and products over an axis are
accumulated in index order where NumPy sums pairwise, and matmul accumulates in
index order where BLAS blocks (and may use FMA); (2) ``exp``, ``log``, ``tanh``...
are the C library's where NumPy may use its own SIMD versions (last-ulp
differences). Results agree to a relative 1e-12 of the result's scale (the tests'
tolerance); NaN and inf propagate identically.

Memory: one workspace per call for the intermediate arrays: on the stack up to
``STACK_DOUBLES``, else the operator's own heap buffer, allocated at its first call
and kept (a ``malloc``/``free`` of a large block per call costs page faults). A
call that finds that buffer in use (a thread entering while NumPy's loop or BLAS
released the GIL, the only points where that can happen) allocates its own and
frees it, so the code is reentrant and thread-safe under the GIL; results are
written directly into the returned arrays (or the caller's ``out`` when it does not
overlap an argument).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from difgen import naming
from difgen.config import ModuleSpec
from difgen.core.ir import Graph, Lit, Var, dce
from difgen.operators import Operator, is_sparse, result_shape, seed_shape
from difgen.targets.c import extension as c_code
from difgen.targets.c import points as c_points
from difgen.targets.c.extension import (
    C_HELPERS,
    C_LIBRARY,
    PREFIX,
    Unsupported,
    c_expr,
)
from difgen.targets.signatures import sparse_out

STRAIGHT_LINE_WORK = 256
"""Graphs with at most this many elements of work (``cost_model.work``) are
printed as straight-line C (:mod:`difgen.targets.c.extension`) when SymPy can reduce
them; larger ones as loops, which then run faster and compile faster."""

STACK_DOUBLES = 4096
"""Workspaces up to this many doubles (32 KB) live on the stack."""

UFUNCS = frozenset(
    {
        "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "sinh",
        "cosh", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arcsinh",
        "arccosh", "arctanh", "cbrt",
    }
)  # fmt: skip
"""Transcendentals whose NumPy loops (SIMD) beat the C library's per element."""

UFUNC_SIZE = 512
"""From this many elements, a transcendental calls NumPy's loop (~1 us a call)."""

BLAS_WORK = 4096
"""Products of at least this many multiply-adds go to NumPy's dot (BLAS)."""

CONST_LIMIT = 1 << 16
"""Constants computed at build time up to this many elements (512 KB of C
initializers): a larger one (an identity basis of 1000 columns) is refused, so
that the C file and its compile time stay small; the operator stays in Python."""

STRUCTURAL = frozenset(
    {
        "getitem",
        "reshape",
        "transpose",
        "broadcast_to",
        "concatenate",
        "pack",
        "pad",
        "scatter_add",
        "scatter_sum",
        "set_index",
    }
)
"""Primitives that only move (and add) elements: their loop form is derived from
their ``impl`` run on :class:`Ref` elements."""

REDUCTIONS = {
    "reduce_sum": ("0.0", "{acc} + {v}"),
    "reduce_prod": ("1.0", "{acc} * {v}"),
    "reduce_max": ("-INFINITY", "_maximum({acc}, {v})"),
    "reduce_min": ("INFINITY", "_minimum({acc}, {v})"),
}
"""Reductions: the accumulator's start and its update (NaN-propagating extrema)."""

LOOPS = frozenset({*REDUCTIONS, "matmul"})
"""Non-elementwise, non-structural primitives with a loop form in this module."""

_KNOWN_CALLS = C_HELPERS | C_LIBRARY
"""Functions the generated C file defines or includes (an elementwise rule that
prints another call has no loop form: refusing beats a compile error)."""


class NoLoopForm(Exception):
    """The graph uses something this module cannot print as loops (named)."""


# ------------------------------------------------------------- structural maps
class Ref:
    """Element ``index`` of input ``slot`` of a structural equation, or a sum of
    such elements in the order NumPy adds them."""

    __slots__ = ("terms",)

    def __init__(self, terms: tuple[tuple[int, int], ...]) -> None:
        self.terms = terms

    def __add__(self, other: Any) -> Any:
        if isinstance(other, Ref):
            return Ref(self.terms + other.terms)
        if isinstance(other, (int, float)) and other == 0:
            return self
        return NotImplemented

    def __radd__(self, other: Any) -> Any:
        if isinstance(other, (int, float)) and other == 0:
            return self  # zeros + v: NumPy's emission assigns the first write
        return NotImplemented


def _refs(slot: int, shape: tuple[int, ...]) -> np.ndarray:
    flat = np.empty(int(np.prod(shape, dtype=np.int64)), dtype=object)
    flat[:] = [Ref(((slot, i),)) for i in range(flat.size)]
    return flat.reshape(shape)


@dataclass(frozen=True)
class Moves:
    """A structural equation's output: per element, a constant and ordered terms."""

    constants: np.ndarray  # float64, flat
    terms: list[tuple[tuple[int, int], ...]]  # per flat output element


def moves_of(eqn: Any, const_inputs: dict[int, np.ndarray]) -> Moves:
    """Run the structural primitive's ``impl`` on element references."""
    args = []
    for slot, a in enumerate(eqn.inputs):
        if slot in const_inputs:  # a constant operand (an index value, a fill)
            args.append(np.asarray(const_inputs[slot], dtype=object))
        else:
            args.append(_refs(slot, tuple(a.shape)))
    params = eqn.params.as_dict()
    try:
        out = eqn.primitive.impl(*args, **params)
    except (TypeError, ValueError):  # an impl that converts to float64 (pack)
        try:  # the rule for object arrays, which moves elements the same way
            out = eqn.primitive.lower_sympy(*args, **params)
        except Exception as exc:  # noqa: BLE001 (a rule doing arithmetic)
            raise NoLoopForm(f"{eqn.primitive.name} ({type(exc).__name__})") from None
    flat = np.asarray(out, dtype=object).reshape(-1)
    constants = np.zeros(flat.size)
    terms: list[tuple[tuple[int, int], ...]] = []
    for i, e in enumerate(flat):
        if isinstance(e, Ref):
            terms.append(e.terms)
        elif isinstance(e, (int, float, np.floating, np.integer, np.bool_)):
            constants[i] = float(e)
            terms.append(())
        else:
            raise NoLoopForm(f"{eqn.primitive.name} (element {type(e).__name__})")
    return Moves(constants, terms)


# ----------------------------------------------------------------- the values
@dataclass(frozen=True)
class Store:
    """A C-contiguous array (``name`` points at it) or, for shape (), a double."""

    name: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class View:
    """Elements of a store read through a table of flat positions (var's shape)."""

    base: Store
    table: np.ndarray


@dataclass(frozen=True)
class Fused:
    """A scalar temporary of the loop group ``group`` (element at the loop index)."""

    name: str
    group: int


Value = Store | View | Fused


def c_number(value: float) -> str:
    """A double as a C literal (``INFINITY``, ``NAN`` for the specials)."""
    value = float(value)
    if np.isnan(value):
        return "NAN"
    if value in (float("inf"), float("-inf")):
        return "INFINITY" if value > 0 else "(-INFINITY)"
    text = repr(value)
    return f"({text})" if text.startswith("-") else text


# ------------------------------------------------------------------ the loops
@dataclass
class Access:
    """One read or write in a loop: a base and its flat positions per iteration."""

    base: Store
    positions: np.ndarray  # int64, the loop's shape


def affine(positions: np.ndarray) -> tuple[int, tuple[int, ...]] | None:
    """``(offset, strides)`` when ``positions`` is affine in the loop indices."""
    shape = positions.shape
    if positions.size == 0:
        return 0, (0,) * len(shape)
    offset = int(positions.flat[0])
    strides = []
    expected = np.full(shape, offset, dtype=np.int64)
    for d, n in enumerate(shape):
        if n == 1:
            strides.append(0)
            continue
        unit = [0] * len(shape)
        unit[d] = 1
        s = int(positions[tuple(unit)]) - offset
        strides.append(s)
        axis = [1] * len(shape)
        axis[d] = n
        expected = expected + s * np.arange(n, dtype=np.int64).reshape(axis)
    if not np.array_equal(expected, positions):
        return None
    return offset, tuple(strides)


class Tables:
    """The ``static const`` tables of one C function (equal tables shared)."""

    def __init__(self, stem: str) -> None:
        self.stem = stem
        self.lines: list[str] = []
        self._names: dict[tuple[str, bytes], str] = {}

    def ints(self, values: np.ndarray) -> str:
        flat = np.ascontiguousarray(values, dtype=np.int64).ravel()
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
    shape: tuple[int, ...], strides: list[tuple[int, ...]]
) -> tuple[list[int], list[list[int]]]:
    """Merge adjacent loop dimensions every affine access walks as one (and drop
    dimensions of length 1): most loops become one flat loop."""
    dims = [d for d, n in enumerate(shape) if n != 1]
    sizes = [shape[d] for d in dims]
    st = [[s[d] for d in dims] for s in strides]
    d = len(sizes) - 2
    while d >= 0:
        if all(s[d] == s[d + 1] * sizes[d + 1] for s in st):
            sizes[d] *= sizes[d + 1]
            for s in st:
                s[d] = s[d + 1]
                del s[d + 1]
            del sizes[d + 1]
        d -= 1
    return sizes, st


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
        for a in self.accesses:
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
            forms.append(split)
            if split is not None:
                strides.append(split[1])
        sizes, merged = _coalesce(outer, strides)
        loop = [f"{PREFIX}i{d}" for d in range(len(sizes))]
        uses_table = any(f is None for f in forms)
        flat = loop[0] if len(sizes) == 1 else f"{PREFIX}n"
        texts = []
        k_iter = 0
        for a, form in zip(self.accesses, forms):
            if form is None:
                table = self.tables.ints(a.positions)
                index = flat if len(sizes) else "0"
                if inner is not None and a.positions.shape == self.shape:
                    index = f"({index}) * {inner} + {PREFIX}k" if inner else index
                texts.append(f"{a.base.name}[{table}[{index}]]")
                continue
            offset, _, kstride = form
            parts = [str(offset)] if offset else []
            for var, s in zip(loop, merged[k_iter]):
                if s:
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


# --------------------------------------------------------------- elementwise
_ELEMENT_CACHE: dict[Any, str] = {}


def element_text(eqn: Any, operands: list[str]) -> str:
    """One element of an elementwise equation as C, from its primitive's SymPy
    rule applied to scalar symbols (booleans are doubles 0.0/1.0 in the loops)."""
    prim = eqn.primitive
    dtypes = tuple(a.dtype for a in eqn.inputs)
    key = (prim.name, eqn.params, dtypes, eqn.out.dtype)
    if key not in _ELEMENT_CACHE:
        syms = [sp.Symbol(f"{PREFIX}s{i}") for i in range(len(eqn.inputs))]
        logical = eqn.out.dtype == "bool" or prim.name == "where"
        args = []
        for s, dtype in zip(syms, dtypes):
            value: Any = sp.Ne(s, 0) if dtype == "bool" and logical else s
            args.append(np.array(value, dtype=object))
        try:
            result = prim.lower_sympy(*args, **eqn.params.as_dict())
            text = c_expr(np.asarray(result, dtype=object)[()])
        except (Unsupported, Exception) as exc:  # noqa: BLE001 (any rule failing)
            raise NoLoopForm(f"{prim.name} ({type(exc).__name__})") from None
        calls = set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", text))
        unknown = sorted(calls - _KNOWN_CALLS)
        if unknown:
            raise NoLoopForm(f"{prim.name} (no C function {', '.join(unknown)})")
        _ELEMENT_CACHE[key] = text
    text = _ELEMENT_CACHE[key]
    if prim.name == "pow" and _is_half(eqn.inputs[1]):
        # NumPy's x ** 0.5 is its sqrt loop: NaN at -inf and -0.0 at -0.0, where
        # pow(x, 0.5) gives inf and 0.0
        text = f"sqrt({PREFIX}s0)"
    return re.sub(
        f"\\b{PREFIX}s(\\d+)\\b", lambda m: f"({operands[int(m.group(1))]})", text
    )


def _is_half(atom: Any) -> bool:
    """A literal exponent of 0.5 (NumPy's power takes its sqrt fast path)."""
    return isinstance(atom, Lit) and atom.value.size == 1 and float(atom.value) == 0.5


# ------------------------------------------------- results computed on demand
PUSH_ELEMENTS = 4096
"""Results of at most this many elements are considered for evaluation on demand:
the analysis runs in Python per element (~30 us each), so that it stays well
under a second (a 512-state Brusselator's 3,072 nonzeros: 0.1 s)."""

PUSH_NODES = 1 << 16
"""Distinct (value, element) nodes the demand analysis may visit (build time)."""

PUSH_GROUPS = 64
"""At most this many loops (element shapes) for one result computed on demand."""

SPECIAL_CONSTANTS = frozenset(np.float64(v).tobytes() for v in (0.0, 1.0, -1.0))
"""Constants whose value splits the elements into loops of their own: there the
constant is a literal, and the C compiler drops ``x * 1.0`` (exact in IEEE) and
multiplies by a literal ``0.0`` instead of loading a seed table (``x * 0.0`` is
kept: it is NaN for a non-finite ``x``, as in NumPy)."""


class TooLarge(Exception):
    """The demand analysis went past one of its budgets: compute as usual."""


@dataclass
class DemandGroup:
    """Elements of a result sharing one expression shape: one loop.

    ``skeleton`` lists the expression's nodes in evaluation order: ``("v", k)``
    reads value ``k`` of :attr:`Demand.leaves`, ``("c", value)`` a constant the
    same for all elements (``("c", None)``: one per element), ``("e", eqn,
    children)`` an elementwise equation, ``("s", children)`` a sum of moved terms
    in NumPy's order. ``reads`` holds, per ``v`` or per-element ``c`` node, the
    positions read or the constants, one per element; ``targets`` the result's
    flat positions written: one row per element computed, one column per
    result element that equals it (the same expression of the same operands:
    computed once, stored in each)."""

    skeleton: tuple[Any, ...]
    targets: np.ndarray  # (elements computed, copies of each)
    reads: dict[int, np.ndarray]

    @property
    def operations(self) -> int:
        return len(self.targets) * sum(n[0] in "es" for n in self.skeleton)


@dataclass
class Demand:
    """A result computed element by element at its own elements only: the
    elementwise equations it depends on are evaluated where the result reads
    them (through structural moves: gathers, concatenations, reshapes...), not
    over their whole shapes. ``leaves`` are the values read from memory
    (arguments, or values the other code computes)."""

    out: Var
    groups: list[DemandGroup]
    leaves: list[Var]

    @property
    def operations(self) -> int:
        return sum(g.operations for g in self.groups)


class DemandAnalysis:
    """Each element of a result as an expression DAG over values in memory and
    constants, built by following the equations backwards from that element
    (docs/design.md, section 10). Nodes are interned, so an element's DAG shares
    its repeated operands, and a value read by many elements is one node."""

    def __init__(
        self, graph: Graph, consts: dict[Var, np.ndarray], kept: frozenset[Var]
    ) -> None:
        self.consts = consts
        self.kept = kept  # values read from memory even where they could be pushed
        self.producer = {e.out: e for e in graph.eqns}
        self.eqn_index = {id(e): i for i, e in enumerate(graph.eqns)}
        self.nodes: list[tuple[Any, ...]] = []
        self.interned: dict[tuple[Any, ...], int] = {}
        self.memo: dict[tuple[Var, int], int] = {}
        self.leaves: dict[Var, int] = {}
        self.moves: dict[int, Moves] = {}
        self.pushable: dict[int, bool] = {}
        self.any_constant: dict[int, bool] = {}
        self.spread: dict[tuple[int, int], np.ndarray] = {}

    def _intern(self, node: tuple[Any, ...]) -> int:
        found = self.interned.get(node)
        if found is None:
            if len(self.nodes) >= PUSH_NODES:
                raise TooLarge
            found = self.interned[node] = len(self.nodes)
            self.nodes.append(node)
        return found

    def _constant(self, value: Any) -> int:
        return self._intern(("c", np.float64(value).tobytes()))

    def _pushable(self, eqn: Any) -> bool:
        """Elementwise float64/bool equations and structural moves."""
        index = self.eqn_index[id(eqn)]
        found = self.pushable.get(index)
        if found is None:
            found = not any(a.dtype == "int64" for a in (*eqn.inputs, eqn.out)) and (
                bool(eqn.primitive.elementwise) or eqn.primitive.name in STRUCTURAL
            )
            self.pushable[index] = found
        return found

    def node(self, atom: Any, position: int) -> int:
        """The node of ``atom``'s flat element ``position``."""
        if isinstance(atom, Lit):
            value = atom.value
            return self._constant(value.reshape(-1)[position if value.size > 1 else 0])
        if atom in self.consts:
            return self._constant(self.consts[atom].reshape(-1)[position])
        key = (atom, position)
        found = self.memo.get(key)
        if found is not None:
            return found
        eqn = self.producer.get(atom)
        if eqn is None or atom in self.kept or not self._pushable(eqn):
            leaf = self.leaves.setdefault(atom, len(self.leaves))
            found = self._intern(("v", leaf, position))
        elif eqn.primitive.elementwise:
            children = tuple(
                self.node(a, int(self._spread(eqn, slot)[position]))
                for slot, a in enumerate(eqn.inputs)
            )
            found = self._intern(("e", self.eqn_index[id(eqn)], children))
        else:
            found = self._moved(eqn, position)
        self.memo[key] = found
        return found

    def _spread(self, eqn: Any, slot: int) -> np.ndarray:
        """Flat positions of input ``slot`` read at each flat output element."""
        key = (self.eqn_index[id(eqn)], slot)
        if key not in self.spread:
            shape = tuple(eqn.out.shape)
            self.spread[key] = _broadcast(eqn.inputs[slot], shape).reshape(-1)
        return self.spread[key]

    def _moved(self, eqn: Any, position: int) -> int:
        """A structural element: the element it moves, or the sum of its terms
        (after its constant) in the order the loops of ``_structural`` add them."""
        index = self.eqn_index[id(eqn)]
        if index not in self.moves:
            const = {
                i: (a.value if isinstance(a, Lit) else self.consts[a])
                for i, a in enumerate(eqn.inputs)
                if isinstance(a, Lit) or a in self.consts
            }
            self.moves[index] = moves_of(eqn, const)
            self.any_constant[index] = bool(np.any(self.moves[index].constants))
        moves = self.moves[index]
        terms = moves.terms[position]
        constant = moves.constants[position]
        if eqn.out.shape == ():  # _structural's scalar form
            with_constant = bool(constant) or not terms
        else:
            with_constant = self.any_constant[index] or not terms
        parts = [self._constant(constant)] if with_constant else []
        parts += [self.node(eqn.inputs[slot], i) for slot, i in terms]
        if len(parts) == 1:
            return parts[0]
        return self._intern(("s", tuple(parts)))

    def shape_of(self, root: int, special: bool) -> tuple[tuple[Any, ...], list[Any]]:
        """An element's skeleton (its DAG with positions and per-element constants
        taken out) and what was taken out, in the skeleton's order."""
        local: dict[int, int] = {}
        skeleton: list[Any] = []
        payload: list[Any] = []
        stack: list[tuple[int, bool]] = [(root, False)]
        while stack:
            n, expanded = stack.pop()
            if n in local:
                continue
            node = self.nodes[n]
            kids = node[2] if node[0] == "e" else node[1] if node[0] == "s" else ()
            if not expanded and kids:
                stack.append((n, True))
                stack.extend((k, False) for k in reversed(kids) if k not in local)
                continue
            if node[0] == "v":
                skeleton.append(("v", node[1]))
                payload.append(node[2])
            elif node[0] == "c":
                value = node[1]
                fixed = special and value in SPECIAL_CONSTANTS
                skeleton.append(("c", value if fixed else None))
                payload.append(None if fixed else value)
            elif node[0] == "e":
                skeleton.append(("e", node[1], tuple(local[k] for k in kids)))
                payload.append(None)
            else:
                skeleton.append(("s", tuple(local[k] for k in kids)))
                payload.append(None)
            local[n] = len(skeleton) - 1
        return tuple(skeleton), payload


def _groups(
    analysis: DemandAnalysis, roots: list[int], special: bool
) -> list[DemandGroup] | None:
    """The result's elements grouped by skeleton (None: too many loops)."""
    found: dict[tuple[Any, ...], tuple[list[int], list[list[Any]]]] = {}
    for target, root in enumerate(roots):
        skeleton, payload = analysis.shape_of(root, special)
        targets, payloads = found.setdefault(skeleton, ([], []))
        targets.append(target)
        payloads.append(payload)
        if len(found) > PUSH_GROUPS:
            return None
    groups = []
    for skeleton, (targets, payloads) in found.items():
        reads: dict[int, np.ndarray] = {}
        for k, item in enumerate(skeleton):
            column = [p[k] for p in payloads]
            if item[0] == "v":
                reads[k] = np.array(column, dtype=np.int64)
            elif item[0] == "c" and item[1] is None:
                reads[k] = np.frombuffer(b"".join(column), dtype=np.float64)
        groups += _computed_once(skeleton, np.array(targets, dtype=np.int64), reads)
    return groups if len(groups) <= PUSH_GROUPS else None


COPIES = 8
"""Equal elements computed once and stored up to this many times (unrolled)."""


def _computed_once(
    skeleton: tuple[Any, ...], targets: np.ndarray, reads: dict[int, np.ndarray]
) -> list[DemandGroup]:
    """The group's elements that read the same operands (and constants) are
    equal: each distinct one is computed once and stored to all of them (the
    four neighbours of a stencil row share one jacobian value). One group per
    number of copies, elements in their first target's order."""
    keys = [reads[k].view(np.int64) for k in sorted(reads)]
    if not keys:
        return [DemandGroup(skeleton, targets[:, None], reads)]
    rows = np.stack(keys, axis=1)
    _, first, inverse, counts = np.unique(
        rows, axis=0, return_index=True, return_inverse=True, return_counts=True
    )
    inverse = inverse.reshape(-1)
    if counts.max() == 1 or counts.max() > COPIES:
        return [DemandGroup(skeleton, targets[:, None], reads)]
    groups = []
    members = np.argsort(inverse, kind="stable")  # each distinct's elements
    starts = np.concatenate([[0], np.cumsum(counts)])
    for copies in sorted(set(counts.tolist())):
        chosen = np.flatnonzero(counts == copies)
        chosen = chosen[np.argsort(first[chosen], kind="stable")]
        table = np.stack([members[starts[u] : starts[u] + copies] for u in chosen])
        picked = first[chosen]
        groups.append(
            DemandGroup(
                skeleton,
                targets[table],
                {k: v[picked] for k, v in reads.items()},
            )
        )
    return groups


def demand_of(graph: Graph, out: Var, consts: dict[Var, np.ndarray]) -> Demand | None:
    """``out`` as a :class:`Demand`, or None past the budgets (or when a value
    nests deeper than Python's recursion allows)."""
    if out.size > PUSH_ELEMENTS:
        return None
    kept: frozenset[Var] = frozenset()
    for _ in range(2):  # once more with the shared values kept in memory
        found = _analysed(graph, out, consts, kept)
        if found is None:
            return None
        analysis, groups = found
        shared = _shared(graph, analysis, groups)
        if not shared:
            break
        kept |= shared
    leaves = sorted(analysis.leaves, key=analysis.leaves.__getitem__)
    return Demand(out, groups, leaves)


def _analysed(
    graph: Graph, out: Var, consts: dict[Var, np.ndarray], kept: frozenset[Var]
) -> tuple[DemandAnalysis, list[DemandGroup]] | None:
    """Every element of ``out`` analysed and grouped (constants 0, 1, -1 apart
    when that stays within :data:`PUSH_GROUPS` loops)."""
    analysis = DemandAnalysis(graph, consts, kept)
    try:
        roots = [analysis.node(out, i) for i in range(out.size)]
    except (TooLarge, RecursionError):
        return None
    groups = _groups(analysis, roots, special=True)
    if groups is None:
        groups = _groups(analysis, roots, special=False)
    return None if groups is None else (analysis, groups)


def _shared(
    graph: Graph, analysis: DemandAnalysis, groups: list[DemandGroup]
) -> frozenset[Var]:
    """Elementwise values the result reads all of, more often than they have
    elements (``x * x`` of a stencil, read by each of a row's nonzeros): cheaper
    computed once into memory by the usual loop than once per read."""
    uses: dict[int, int] = {}
    for g in groups:
        for item in g.skeleton:
            if item[0] == "e":
                uses[item[1]] = uses.get(item[1], 0) + len(g.targets)
    distinct: dict[Var, int] = {}
    for var, _ in analysis.memo:
        distinct[var] = distinct.get(var, 0) + 1
    shared = set()
    for index, count in uses.items():
        out = graph.eqns[index].out
        if distinct.get(out) == out.size and count > out.size:
            shared.add(out)
    return frozenset(shared)


# ------------------------------------------------------------------ planning
@dataclass
class Group:
    """Consecutive elementwise equations (and reductions of their values) over one
    shape: one loop nest."""

    index: int
    shape: tuple[int, ...]
    eqns: list[Any] = field(default_factory=list)
    pending: set[Var] = field(default_factory=set)  # reductions done after the loop


@dataclass
class Step:
    """One equation with a loop form of its own."""

    eqn: Any


def _kind(eqn: Any) -> str:
    """Which loop form an equation (on argument-dependent values) takes."""
    name = eqn.primitive.name
    if any(a.dtype == "int64" for a in (*eqn.inputs, eqn.out)):
        # the loops compute in doubles: int64 arithmetic (overflow, floor
        # division) is NumPy's only in the vector emission
        raise NoLoopForm(f"{name} on int64 values")
    if eqn.primitive.elementwise:
        return "elementwise"
    if name in STRUCTURAL:
        return "structural"
    if name in LOOPS:
        return name if name == "matmul" else "reduction"
    raise NoLoopForm(name)


class Compiler:
    """One operator graph as the body of a C function."""

    def __init__(
        self, graph: Graph, inputs: list[tuple[str, tuple[int, ...]]], stem: str
    ) -> None:
        self.graph = graph  # what remains to compile as usual (see _on_demand)
        self.outputs = graph.outputs
        self.original_eqns = graph.eqns
        self.producer = {e.out: e for e in graph.eqns}
        self.tables = Tables(stem)
        self.moves: dict[Var, Moves] = {}
        self.view_of: dict[Var, tuple[Any, np.ndarray]] = {}
        self.view_root: dict[Var, Var] = {}
        self.result_of: dict[Var, Store] = {}
        self.group_of: dict[Var, int] = {}
        self.in_place: set[Var] = set()  # results computed as their reshape
        self.values: dict[Var, Value] = {}
        self.consts: dict[Var, np.ndarray] = {}
        self.work = 0  # doubles of workspace
        self.calls_numpy = False  # NumPy's ufunc loops or dot: the GIL is needed
        self.lines: list[str] = []
        self.counter = 0
        for var, (name, shape) in zip(graph.inputs, inputs):
            if var.dtype != "float64":
                raise NoLoopForm(f"a {var.dtype} argument")
            self.values[var] = Store(name, shape)

    # ---------------------------------------------------------------- storage
    def _fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{PREFIX}{stem}{self.counter}"

    def _array(self, var: Var) -> Store:
        """Storage for ``var``: a result buffer, a local double or workspace."""
        if var in self.result_of:
            return self.result_of[var]
        if var.shape == ():
            name = self._fresh("v")
            self.lines.append(f"double {name};")
            return Store(name, ())
        name = self._fresh("a")
        self.lines.append(f"double *const {name} = {PREFIX}w + {self.work};")
        self.work += var.size
        return Store(name, tuple(var.shape))

    # ----------------------------------------------------------------- reads
    def read(self, nest: LoopNest, atom: Any, positions: np.ndarray) -> str:
        """C text of ``atom``'s elements at ``positions`` (flat, atom's layout)."""
        if isinstance(atom, Lit):
            if atom.value.size == 1:
                return c_number(atom.value.ravel()[0])
            base = Store(self.tables.doubles(atom.value), tuple(atom.shape))
            return nest.at(base, positions)
        if atom in self.consts:
            value = self.consts[atom]
            if value.size == 1:
                return c_number(value.ravel()[0])
            return nest.at(Store(self.tables.doubles(value), value.shape), positions)
        v = self.values[atom]
        if isinstance(v, Fused):
            return v.name
        if isinstance(v, View):
            return nest.at(v.base, v.table.reshape(-1)[positions])
        return nest.at(v, positions)

    # ------------------------------------------------------------------ plan
    def plan(self) -> list[Group | Step]:
        """Equations into loop groups and steps; views and constants need none.

        An elementwise equation joins the current group when it has the group's
        shape and reads no reduction still accumulating in it, nor a view of one of
        its values (the loop has not written all of them yet)."""
        plan: list[Group | Step] = []
        group: Group | None = None
        for eqn in self.graph.eqns:
            if self._constant(eqn):
                continue
            kind = _kind(eqn)
            if kind == "structural" and self._view(eqn):
                continue
            if kind == "elementwise" and self._ufunc(eqn):
                group = None
                plan.append(Step(eqn))
                continue
            if kind == "elementwise":
                shape = tuple(eqn.out.shape)
                if group is None or not self._joins(eqn, group, shape):
                    group = Group(len(plan), shape)
                    plan.append(group)
            elif (
                kind == "reduction" and group is not None and self._fusable(eqn, group)
            ):
                group.pending.add(eqn.out)
            else:
                group = None
                plan.append(Step(eqn))
                continue
            group.eqns.append(eqn)
            self.group_of[eqn.out] = group.index
        return plan

    def _ufunc(self, eqn: Any) -> bool:
        """A transcendental over many elements is NumPy's own ufunc loop, called
        on the operand's memory: NumPy's SIMD ``exp``/``tanh``/``log`` are several
        times faster than the C library's, and give NumPy's exact results."""
        impl = eqn.primitive.impl
        if not (isinstance(impl, np.ufunc) and impl.__name__ in UFUNCS):
            return False
        (a,) = eqn.inputs
        if eqn.out.size < UFUNC_SIZE or not isinstance(a, Var) or a in self.consts:
            return False
        if a.dtype != "float64" or a.shape != eqn.out.shape:
            return False
        if a in self.view_of:
            found = affine(self.view_of[a][1])
            return found is not None and all(s >= 0 for s in found[1])
        return True

    def _joins(self, eqn: Any, group: Group, shape: tuple[int, ...]) -> bool:
        if group.shape != shape:
            return False
        for a in eqn.inputs:
            if not isinstance(a, Var):
                continue
            if a in group.pending:
                return False
            root = self.view_root.get(a)
            if root is not None and self.group_of.get(root) == group.index:
                return False
        return True

    def _fusable(self, eqn: Any, group: Group) -> bool:
        (a,) = eqn.inputs
        return (
            isinstance(a, Var)
            and self.group_of.get(a) == group.index
            and a not in group.pending
            and tuple(a.shape) == group.shape
        )

    def _constant(self, eqn: Any) -> bool:
        """Evaluate an equation of constants at build time (NumPy, as the vector
        emission hoists it to import time)."""
        if eqn.out in self.consts:
            return True
        if any(isinstance(a, Var) and a not in self.consts for a in eqn.inputs):
            return False
        if eqn.primitive.name in ("cond", "while_loop", "sweep"):
            return False
        if eqn.out.size > CONST_LIMIT:
            raise NoLoopForm(
                f"{eqn.primitive.name} (a constant of {eqn.out.size} elements)"
            )
        args = [a.value if isinstance(a, Lit) else self.consts[a] for a in eqn.inputs]
        value = np.asarray(eqn.primitive.impl(*args, **eqn.params.as_dict()))
        if value.dtype.kind not in "fb" and not (
            value.dtype.kind in "iu" and np.all(np.abs(value) < 2**53)
        ):
            return False
        self.consts[eqn.out] = value.astype(np.float64)
        return True

    def _view(self, eqn: Any) -> bool:
        """A structural equation reading each element from one element of one
        stored (or viewed) input: a view, no code."""
        const = {
            i: (a.value if isinstance(a, Lit) else self.consts[a])
            for i, a in enumerate(eqn.inputs)
            if isinstance(a, Lit) or a in self.consts
        }
        moves = moves_of(eqn, const)
        self.moves[eqn.out] = moves
        if np.any(moves.constants) or any(len(t) != 1 for t in moves.terms):
            return False
        slots = {t[0][0] for t in moves.terms}
        if len(slots) != 1:
            return False
        (slot,) = slots
        src = eqn.inputs[slot]
        if isinstance(src, Lit) or src in self.consts:
            return False  # a view of a constant is folded already
        table = np.array([t[0][1] for t in moves.terms], dtype=np.int64)
        if src in self.view_of:  # a view of a view reads the first one's source
            src, first = self.view_of[src]
            table = first.reshape(-1)[table]
        self.view_of[eqn.out] = (src, table.reshape(eqn.out.shape))
        self.view_root[eqn.out] = src
        return True

    # ----------------------------------------------------------------- emit
    def compile(self, results: list[Store | None]) -> list[str]:
        """The statements computing the graph into ``results`` (a Store per output
        that is written directly; None: copied at the end)."""
        demands = self._on_demand(results)
        pushed = {d.out for d, _ in demands}
        for out, store in zip(self.outputs, results):
            if (
                store is not None
                and isinstance(out, Var)
                and out not in self.result_of
                and out not in pushed
            ):
                self.result_of[out] = store
        plan = self.plan()
        self._reshaped_results(results)
        needs = self._needs_store(plan)
        views_done: set[Var] = set()
        for item in plan:
            self._views_before(views_done)
            if isinstance(item, Group):
                self._group(item, needs)
            else:
                self._step(item.eqn)
        self._views_before(views_done)
        for demand, store in demands:
            self._demand_loops(demand, store)
        return self.lines

    # ------------------------------------------------------ results on demand
    def _on_demand(self, results: list[Store | None]) -> list[tuple[Demand, Store]]:
        """Results to compute at their own elements only (:class:`Demand`): a
        structural result (a gather of a sparse jacobian's nonzeros out of the
        colors' compressed columns, say) whose dependencies are elementwise
        equations and moves, when that is fewer operations than computing those
        equations over their whole shapes. The graph left to compile as usual
        becomes the equations the other results and the demands' leaves need."""
        for eqn in self.graph.eqns:  # constants first: the analysis folds them
            self._constant(eqn)
        read = {a for e in self.graph.eqns for a in e.inputs if isinstance(a, Var)}
        outputs = [o for o in self.outputs if isinstance(o, Var)]
        chosen: list[tuple[Demand, Store]] = []
        for out, store in zip(self.outputs, results):
            if not isinstance(out, Var):
                continue
            made_by = self.producer.get(out)
            if (
                store is None
                or made_by is None
                or made_by.primitive.name not in STRUCTURAL
                or out in read
                or out in self.consts
                or outputs.count(out) != 1
            ):
                continue
            demand = demand_of(self.graph, out, self.consts)
            if demand is None or not any(
                item[0] == "e" for g in demand.groups for item in g.skeleton
            ):
                continue
            before = self._rest_graph([d for d, _ in chosen]).eqns
            after = {
                e.out for e in self._rest_graph([*(d for d, _ in chosen), demand]).eqns
            }
            saved = sum(
                e.out.size
                for e in before
                if e.out not in after and e.out not in self.consts
            )
            if demand.operations < saved:  # elements computed, either way
                chosen.append((demand, store))
        if chosen:
            self.graph = self._rest_graph([d for d, _ in chosen])
        return chosen

    def _rest_graph(self, demands: list[Demand]) -> Graph:
        """The graph without the demands' results, plus their leaves as outputs."""
        pushed = {d.out for d in demands}
        outputs = [o for o in self.outputs if not (isinstance(o, Var) and o in pushed)]
        inputs = set(self.graph.inputs)
        for d in demands:
            outputs += [v for v in d.leaves if v not in inputs and v not in outputs]
        return dce(Graph(self.graph.inputs, tuple(outputs), self.graph.eqns))

    def _demand_loops(self, demand: Demand, store: Store) -> None:
        """The result's groups of elements, each element evaluated as the
        equations would have computed it (the same operations on the same
        doubles, in the same order); per-element constants are tables of the
        group's length, constants the same for all its elements literals.

        Elements that are one constant whenever the values they read are finite
        (:func:`finite_constant`: a sparse jacobian's ``10.0 + a * 0.0``) are
        written as that constant after one vectorized test that those values are
        finite; otherwise the loops compute them, NaN and inf as NumPy does."""
        count = len({len(g.targets) for g in demand.groups})
        self.lines.append(
            f"/* {_eqn_text(self.producer[demand.out])}: computed at its "
            f"{demand.out.size} elements only, in {count} loop"
            f"{'s' if count != 1 else ''} */"
        )
        fast = self._finite_path(demand, store)
        if fast is None:
            self.lines += self._groups_code(demand, demand.groups, store)
        else:
            flag, test, first, groups = fast
            self.lines += [
                *test,
                f"if ({flag} == 0) {{ /* every value read is finite */",
                *(f"    {line}" for line in first),
                *(f"    {line}" for line in self._groups_code(demand, groups, store)),
                "} else {",
                *(
                    f"    {line}"
                    for line in self._groups_code(demand, demand.groups, store)
                ),
                "}",
            ]
        self.values[demand.out] = store

    def _finite_path(
        self, demand: Demand, store: Store
    ) -> tuple[str, list[str], list[str], list[DemandGroup]] | None:
        """The C for when the values read are finite: a flag, the test that sets
        it when one is not (over all of each array they are read from), what
        writes first, and the groups to compute then. The constant elements --
        those of :func:`finite_constant` included -- become one group per value,
        so that a value that is most of the result is filled first as
        :func:`_fill` decides; when none is, one table of them all is copied
        first instead. None unless the constants are most of the result and the
        test reads fewer doubles than the elements it turns into constants."""
        size = store_size(store)
        template = np.zeros(size)
        covered = np.zeros(size, dtype=bool)
        left: list[DemandGroup] = []
        bases: dict[str, tuple[int, bool]] = {}  # name: (doubles, a scalar)
        made = 0
        for group in demand.groups:
            computed = any(item[0] == "e" for item in group.skeleton)
            value = finite_constant(group, self.original_eqns)
            if value is None:
                left.append(group)
                continue
            values = np.broadcast_to(value, (len(group.targets),))
            for column in group.targets.T:
                template[column] = values
                covered[column] = True
            if not computed:
                continue
            made += group.targets.size
            for item in group.skeleton:
                if item[0] != "v":
                    continue
                v = self.values.get(demand.leaves[item[1]])
                base = v.base if isinstance(v, View) else v
                if not isinstance(base, Store):
                    return None  # a loop temporary: no array to test
                bases[base.name] = (store_size(base), base.shape == ())
        tested = sum(n for n, _ in bases.values())
        if not made or tested > made or 2 * int(covered.sum()) <= size:
            return None
        flag = self._fresh("nonfinite")
        test = [f"npy_uint64 {flag} = 0;"]
        for name, (n, scalar) in sorted(bases.items()):
            words = f"((const npy_uint64 *){'&' if scalar else ''}{name})"
            test.append(
                f"for (npy_intp {PREFIX}j = 0; {PREFIX}j < {n}; {PREFIX}j++) "
                f"{flag} |= ((({words}[{PREFIX}j] & {EXPONENT}) ^ "
                f"{EXPONENT}) - 1) >> 63;"
            )
        bits = template.view(np.int64)  # -0.0 apart from +0.0
        constants = [
            DemandGroup(
                (("c", value.tobytes()),),
                np.flatnonzero(covered & (bits == value))[:, None],
                {},
            )
            for value in np.unique(bits[covered])
        ]
        if _fill(constants, size) is not None:
            return flag, test, [], left + constants
        table = self.tables.doubles(template)
        first = f"memcpy({store.name}, {table}, sizeof(double) * {size});"
        return flag, test, [first], left

    def _groups_code(
        self, demand: Demand, groups_in: list[DemandGroup], store: Store
    ) -> list[str]:
        """The C computing ``groups_in`` into ``store``: a constant of more than
        half the elements first (``memset`` for zeros), then one loop per group
        length. Groups of one length share one loop (the Brusselator's six shapes
        of nonzeros: one loop over the 256 grid points, whose loads and
        ``x * 0.0`` products the C compiler then shares)."""
        lines: list[str] = []
        groups = list(groups_in)
        fill = _fill(groups, store_size(store))
        if fill is not None:
            groups.remove(fill[0])
        by_length: dict[int, list[DemandGroup]] = {}
        for group in groups:  # groups of one length share one loop
            by_length.setdefault(len(group.targets), []).append(group)
        if fill is not None:  # most elements are one constant: written first
            lines.append(_fill_line(store, fill[1]))
        for n, together in by_length.items():
            nest = LoopNest((n,), self.tables)
            body: list[str] = []
            for group in together:
                body += self._group_body(nest, demand, group, store)
            stored = sum(g.targets.size for g in together)
            comment = f"{n} iterations, {stored} elements"
            if len(together) > 1:
                comment += f" of {len(together)} expression shapes"
            lines += nest.render(comment, [], body, [])
        return lines

    def _group_body(
        self, nest: LoopNest, demand: Demand, group: DemandGroup, store: Store
    ) -> list[str]:
        """One group's statements at the loop index: its skeleton's nodes in
        order (reads and constants inlined, each operation a temporary), then
        the stores of the value into each of its targets."""
        n = len(group.targets)
        texts: list[str] = []
        body: list[str] = []
        for k, item in enumerate(group.skeleton):
            if item[0] == "v":
                leaf = demand.leaves[item[1]]
                texts.append(self.read(nest, leaf, group.reads[k]))
            elif item[0] == "c" and item[1] is not None:
                texts.append(c_number(np.frombuffer(item[1], np.float64)[0]))
            elif item[0] == "c":
                values = group.reads[k]
                if len({v.tobytes() for v in values}) == 1:
                    texts.append(c_number(values[0]))
                else:
                    table = Store(self.tables.doubles(values), (n,))
                    texts.append(nest.at(table, np.arange(n, dtype=np.int64)))
            else:
                if item[0] == "e":
                    eqn = self.original_eqns[item[1]]
                    text = element_text(eqn, [texts[c] for c in item[2]])
                    note = _eqn_text(eqn)
                else:
                    text = " + ".join(f"({texts[c]})" for c in item[1])
                    note = "moved terms added"
                temp = self._fresh("e")
                body.append(f"const double {temp} = {text}; /* {note} */")
                texts.append(temp)
        return body + [
            f"{nest.at(store, group.targets[:, j])} = {texts[-1]};"
            for j in range(group.targets.shape[1])
        ]

    def _reshaped_results(self, results: list[Store | None]) -> None:
        """A result that is a reshape of a computed value (a dense hessian from
        its flat scatter): that value is computed into the result buffer."""
        for out, store in zip(self.outputs, results):
            if store is None or not isinstance(out, Var) or out not in self.view_of:
                continue
            src, table = self.view_of[out]
            computed = src not in self.graph.inputs and src not in self.consts
            if (
                computed
                and src not in self.result_of
                and src.size == out.size
                and np.array_equal(table.reshape(-1), np.arange(out.size))
            ):
                self.result_of[src] = Store(store.name, tuple(src.shape))
                self.in_place.add(out)

    def _views_before(self, done: set[Var]) -> None:
        """Resolve views whose sources are known (views of views compose)."""
        for out, (src, table) in self.view_of.items():
            if out in done or src not in self.values:
                continue
            v = self.values[src]
            if isinstance(v, Store):
                self.values[out] = View(v, table)
            else:
                continue
            done.add(out)
        # a view that is a result is copied into the result by the caller

    def _needs_store(self, plan: list[Group | Step]) -> set[Var]:
        """Values of a loop group read outside it (or results) need an array."""
        needs: set[Var] = {v for v in self.graph.outputs if isinstance(v, Var)}
        where: dict[Var, int] = {}
        for k, item in enumerate(plan):
            eqns = item.eqns if isinstance(item, Group) else [item.eqn]
            for eqn in eqns:
                where[eqn.out] = k
        for k, item in enumerate(plan):
            eqns = item.eqns if isinstance(item, Group) else [item.eqn]
            for eqn in eqns:
                for a in eqn.inputs:
                    if isinstance(a, Var) and where.get(a, k) != k:
                        needs.add(a)
        for src, _ in self.view_of.values():
            needs.add(src)
        for item in plan:
            if isinstance(item, Group):
                needs.update(item.pending)
        return needs

    def _group(self, group: Group, needs: set[Var]) -> None:
        shape = group.shape
        nest = LoopNest(shape, self.tables)
        here = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
        before: list[str] = []
        body: list[str] = []
        after: list[str] = []
        stored: dict[Var, Store] = {}
        for eqn in group.eqns:
            if eqn.primitive.elementwise:
                operands = [
                    self.read(nest, a, _broadcast(a, shape)) for a in eqn.inputs
                ]
                text = element_text(eqn, operands)
                temp = self._fresh("e")
                body.append(f"const double {temp} = {text}; /* {_eqn_text(eqn)} */")
                self.values[eqn.out] = Fused(temp, group.index)
                if eqn.out in needs:
                    store = self._array(eqn.out)
                    body.append(f"{nest.at(store, here.reshape(shape))} = {temp};")
                    stored[eqn.out] = store
                continue
            # a reduction of a value of this loop
            (a,) = eqn.inputs
            start, update = REDUCTIONS[eqn.primitive.name]
            store = self._array(eqn.out)
            out_pos = _reduced_positions(shape, eqn.params.as_dict()["axes"])
            target = nest.at(store, out_pos)
            value = self.read(nest, a, here.reshape(shape))
            if store.shape == ():
                before.append(f"{store.name} = {start};")
            else:
                before.append(
                    f"for (npy_intp {PREFIX}j = 0; {PREFIX}j < {store_size(store)}; "
                    f"{PREFIX}j++) {store.name}[{PREFIX}j] = {start};"
                )
            body.append(
                f"{target} = {update.format(acc=target, v=value)}; "
                f"/* {_eqn_text(eqn)} */"
            )
            stored[eqn.out] = store
        count = len(group.eqns)
        comment = f"{count} equation{'s' if count > 1 else ''} fused over {shape}"
        self.lines += nest.render(comment, before, body, after)
        self.values.update(stored)  # read from memory after the loop

    def _step(self, eqn: Any) -> None:
        name = eqn.primitive.name
        if eqn.primitive.elementwise:
            self._ufunc_call(eqn)
        elif name in STRUCTURAL:
            self._structural(eqn)
        elif name in REDUCTIONS:
            self._reduction(eqn)
        else:
            self._matmul(eqn)

    def _structural(self, eqn: Any) -> None:
        """Zeros (or the constant elements), then one loop per term rank and input,
        assigning first writes and adding later ones, in NumPy's order."""
        moves = self.moves[eqn.out]
        store = self._array(eqn.out)
        size = eqn.out.size
        comment = _eqn_text(eqn)
        if store.shape == ():
            first = moves.terms[0]
            parts = (
                [c_number(moves.constants[0])]
                if moves.constants[0] or not first
                else []
            )
            nest = LoopNest((), self.tables)
            for slot, index in first:
                parts.append(self.read(nest, eqn.inputs[slot], np.array(index)))
            self.lines += [f"{store.name} = {' + '.join(parts)}; /* {comment} */"]
            return
        if np.any(moves.constants):
            table = self.tables.doubles(moves.constants)
            init = [f"memcpy({store.name}, {table}, sizeof(double) * {size});"]
        elif all(moves.terms):  # every element is assigned below
            init = []
        else:
            init = [f"memset({store.name}, 0, sizeof(double) * {size});"]
        self.lines += [f"/* {comment} */", *init]
        rank = 0
        while True:
            pairs: dict[int, tuple[list[int], list[int]]] = {}
            for o, terms in enumerate(moves.terms):
                if len(terms) > rank:
                    slot, index = terms[rank]
                    pairs.setdefault(slot, ([], []))
                    pairs[slot][0].append(o)
                    pairs[slot][1].append(index)
            if not pairs:
                break
            for slot in sorted(pairs):
                outs, ins = (np.array(p, dtype=np.int64) for p in pairs[slot])
                src_atom = eqn.inputs[slot]
                if np.array_equal(ins, np.arange(src_atom.size)):
                    # every element of the input once, in order: loop over its
                    # shape, where concatenation and padding are affine
                    outs = outs.reshape(src_atom.shape)
                    ins = ins.reshape(src_atom.shape)
                nest = LoopNest(outs.shape, self.tables)
                src = self.read(nest, eqn.inputs[slot], ins)
                dst = nest.at(store, outs)
                assign = "=" if rank == 0 and not np.any(moves.constants) else "+="
                self.lines += nest.render(
                    f"input {slot}, term {rank}", [], [f"{dst} {assign} {src};"], []
                )
            rank += 1
        self.values[eqn.out] = store

    def _reduction(self, eqn: Any) -> None:
        (a,) = eqn.inputs
        shape = tuple(a.shape)
        start, update = REDUCTIONS[eqn.primitive.name]
        store = self._array(eqn.out)
        nest = LoopNest(shape, self.tables)
        here = np.arange(a.size, dtype=np.int64).reshape(shape)
        value = self.read(nest, a, here)
        target = nest.at(store, _reduced_positions(shape, eqn.params.as_dict()["axes"]))
        if store.shape == ():
            before = [f"{store.name} = {start};"]
        else:
            before = [
                (
                    f"for (npy_intp {PREFIX}j = 0; {PREFIX}j < {store_size(store)}; "
                    f"{PREFIX}j++) {store.name}[{PREFIX}j] = {start};"
                )
            ]
        body = [f"{target} = {update.format(acc=target, v=value)};"]
        self.lines += nest.render(_eqn_text(eqn), before, body, [])
        self.values[eqn.out] = store

    def _operand(self, atom: Any) -> tuple[str, tuple[int, ...]] | None:
        """A pointer to ``atom``'s elements and their strides (in elements), when
        they lie in memory at affine positions (an array, a strided view)."""
        shape = tuple(np.shape(atom.value)) if isinstance(atom, Lit) else atom.shape
        c_strides = tuple(int(s) // 8 for s in np.empty(shape).strides)
        if isinstance(atom, Lit) or atom in self.consts:
            value = atom.value if isinstance(atom, Lit) else self.consts[atom]
            return self.tables.doubles(value), c_strides
        v = self.values[atom]
        if isinstance(v, Store) and v.shape == shape:
            return v.name, c_strides
        if isinstance(v, View):
            found = affine(v.table)
            if found is not None and all(s >= 0 for s in found[1]):
                return f"{v.base.name} + {found[0]}", found[1]
        return None

    def _ufunc_call(self, eqn: Any) -> None:
        """``numpy.<ufunc>(a, out=result)`` on arrays wrapping the memory."""
        (a,) = eqn.inputs
        found = self._operand(a)
        assert found is not None  # _ufunc checked the operand's layout
        pointer, strides = found
        store = self._array(eqn.out)
        name = eqn.primitive.impl.__name__
        fn, x, y = self._fresh("u"), self._fresh("m"), self._fresh("m")
        self.calls_numpy = True
        self.lines += [
            f"/* {_eqn_text(eqn)}: NumPy's {name} loop */",
            "{",
            f"    static PyObject *{fn} = NULL;",
            (
                f'    if ({fn} == NULL && ({fn} = {PREFIX}numpy_attr("{name}")) == NULL) '
                f"goto {PREFIX}fail;"
            ),
            *self._wrap(x, tuple(a.shape), pointer, strides, writeable=False),
            *self._wrap(y, tuple(eqn.out.shape), store.name, None, writeable=True),
            (
                f"    PyObject *{y}_r = ({x} == NULL || {y} == NULL) ? NULL : "
                f"PyObject_CallFunctionObjArgs({fn}, {x}, {y}, NULL);"
            ),
            f"    Py_XDECREF({x});",
            f"    Py_XDECREF({y});",
            f"    if ({y}_r == NULL) goto {PREFIX}fail;",
            f"    Py_DECREF({y}_r);",
            "}",
        ]
        self.values[eqn.out] = store

    @staticmethod
    def _wrap(
        name: str,
        shape: tuple[int, ...],
        pointer: str,
        strides: tuple[int, ...] | None,
        writeable: bool,
    ) -> list[str]:
        """Lines making ``name``, an ndarray over existing memory (no copy)."""
        lines = [f"    npy_intp {name}_d[] = {_dims(shape)};"]
        if strides is not None:
            lines.append(
                f"    npy_intp {name}_s[] = {_dims(tuple(8 * s for s in strides))};"
            )
        flags = "NPY_ARRAY_CARRAY" if writeable else "NPY_ARRAY_ALIGNED"
        lines.append(
            f"    PyObject *{name} = PyArray_New(&PyArray_Type, {len(shape)}, "
            f"{name}_d, NPY_DOUBLE, {name + '_s' if strides is not None else 'NULL'}, "
            f"(void *)({pointer}), 0, {flags}, NULL);"
        )
        return lines

    def _blas(self, eqn: Any, store: Store) -> bool:
        """A large 1-D/2-D ``a @ b`` through NumPy's own ``dot`` (BLAS), on arrays
        that wrap the operands' memory: the loops would be slower than BLAS."""
        a, b = eqn.inputs
        k = a.shape[-1]
        if a.ndim > 2 or b.ndim > 2 or eqn.out.size * k < BLAS_WORK or k == 0:
            return False
        operands = [self._operand(a), self._operand(b)]
        if any(o is None for o in operands):
            return False
        lines = [f"/* {_eqn_text(eqn)}: NumPy's dot (BLAS) */", "{"]
        names = []
        for atom, found in zip((a, b), operands):
            assert found is not None
            pointer, strides = found
            name = self._fresh("m")
            names.append(name)
            lines += [
                f"    npy_intp {name}_d[] = {_dims(tuple(atom.shape))};",
                f"    npy_intp {name}_s[] = {_dims(tuple(8 * s for s in strides))};",
                (
                    f"    PyObject *{name} = PyArray_New(&PyArray_Type, {atom.ndim}, "
                    f"{name}_d, NPY_DOUBLE, {name}_s, (void *)({pointer}), 0, "
                    "NPY_ARRAY_ALIGNED, NULL);"
                ),
            ]
        out = self._fresh("m")
        lines += [
            f"    npy_intp {out}_d[] = {_dims(tuple(eqn.out.shape))};",
            (
                f"    PyObject *{out} = PyArray_New(&PyArray_Type, {eqn.out.ndim}, "
                f"{out}_d, NPY_DOUBLE, NULL, (void *){store.name}, 0, "
                "NPY_ARRAY_CARRAY, NULL);"
            ),
            (
                f"    PyObject *{out}_r = ({names[0]} == NULL || {names[1]} == NULL || "
                f"{out} == NULL) ? NULL : PyArray_MatrixProduct2({names[0]}, "
                f"{names[1]}, (PyArrayObject *){out});"
            ),
            f"    Py_XDECREF({names[0]});",
            f"    Py_XDECREF({names[1]});",
            f"    Py_XDECREF({out});",
            f"    if ({out}_r == NULL) goto {PREFIX}fail;",
            f"    Py_DECREF({out}_r);",
            "}",
        ]
        if store.shape == ():
            return False
        self.lines += lines
        self.calls_numpy = True
        return True

    def _matmul(self, eqn: Any) -> None:
        """``a @ b`` with NumPy's 1-D and broadcast rules: a loop over the result
        and an inner loop over the contracted axis, accumulated in a register (or
        NumPy's BLAS for large products, :meth:`_blas`)."""
        a, b = eqn.inputs
        if eqn.out.shape != ():
            store = self._array(eqn.out)
            if self._blas(eqn, store):
                self.values[eqn.out] = store
                return
            self.values[eqn.out] = store
        ia = np.arange(a.size, dtype=np.int64).reshape(a.shape)
        ib = np.arange(b.size, dtype=np.int64).reshape(b.shape)
        a2 = ia if ia.ndim > 1 else ia[None, :]
        b2 = ib if ib.ndim > 1 else ib[:, None]
        k = a2.shape[-1]
        ma = a2[..., :, None, :]
        mb = np.swapaxes(b2, -1, -2)[..., None, :, :]
        ma, mb = np.broadcast_arrays(ma, mb)
        out_shape = tuple(eqn.out.shape)
        ma = ma.reshape(out_shape + (k,))
        mb = mb.reshape(out_shape + (k,))
        found = self.values.get(eqn.out)
        store = found if isinstance(found, Store) else self._array(eqn.out)
        nest = LoopNest(out_shape + (k,), self.tables)
        ra = self.read(nest, a, ma)
        rb = self.read(nest, b, mb)
        here = np.arange(eqn.out.size, dtype=np.int64).reshape(out_shape)
        dst = nest.at(store, here)
        self.lines += nest.render(
            _eqn_text(eqn),
            [],
            [f"{PREFIX}acc += {ra} * {rb};"],
            [],
            inner=k,
            inner_pre=[f"double {PREFIX}acc = 0.0;"],
            inner_post=[f"{dst} = {PREFIX}acc;"],
        )
        self.values[eqn.out] = store

    def compile_all(self, results: list[Store | None]) -> list[str]:
        """Compute the graph, then copy the results not computed in place
        (repeated outputs, arguments, constants, views, literals)."""
        lines = self.compile(results)
        for k, (out, store) in enumerate(zip(self.outputs, results)):
            if self._computed_into(out, store):
                continue
            shape = tuple(np.shape(out.value)) if isinstance(out, Lit) else out.shape
            self.copy_into(out, Store(f"{PREFIX}r{k}", tuple(shape)))
        return lines

    def _computed_into(self, out: Any, store: Store | None) -> bool:
        """Whether output ``out`` was computed in its result buffer."""
        if not isinstance(out, Var) or store is None:
            return False
        return self.values.get(out) is store or out in self.in_place

    def copy_into(self, atom: Any, store: Store) -> None:
        """A result that is not computed into its buffer (a view, a constant, an
        argument, a repeated output): copied."""
        shape = store.shape
        nest = LoopNest(shape, self.tables)
        here = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
        src = self.read(nest, atom, here.reshape(shape))
        if shape == ():
            self.lines.append(f"{store.name} = {src};")
            return
        dst = nest.at(store, here.reshape(shape))
        self.lines += nest.render("a result copied", [], [f"{dst} = {src};"], [])


def store_size(store: Store) -> int:
    return int(np.prod(store.shape, dtype=np.int64))


def _broadcast(atom: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Flat positions of ``atom``'s elements read at each index of ``shape``."""
    own = tuple(atom.shape)
    index = np.arange(int(np.prod(own, dtype=np.int64)), dtype=np.int64).reshape(own)
    return np.broadcast_to(index, shape)


def _fill(groups: list[DemandGroup], size: int) -> tuple[DemandGroup, bytes] | None:
    """The group of more than half the result's elements that are one constant
    (a dense hessian's structural zeros), if any: the result is filled with it
    (``memset`` for zeros) before the other groups write theirs, instead of a
    store through an index table per element."""
    for group in groups:
        if len(group.skeleton) != 1 or 2 * group.targets.size <= size:
            continue
        (item,) = group.skeleton
        if item[0] != "c":
            continue
        if item[1] is not None:
            return group, item[1]
        values = group.reads[0]
        if len({v.tobytes() for v in values}) == 1:
            return group, values[0].tobytes()
    return None


EXPONENT = "0x7ff0000000000000ULL"
"""The exponent bits of a double: all set for inf and NaN only."""

ZERO = "zero"
"""An abstract value of :func:`finite_constant`: +0.0 or -0.0, sign unknown."""

OTHER = "other"
"""An abstract value of :func:`finite_constant`: anything, inf and NaN included."""

FINITE = "finite"
"""An abstract value of :func:`finite_constant`: a value read from memory, finite."""


def finite_constant(group: DemandGroup, eqns: Sequence[Any]) -> np.ndarray | None:
    """The values the elements of ``group`` take whenever the values they read
    are finite (float64, one per element computed, or one for all), or None
    when they are not constants then.

    A colored sparse jacobian multiplies the values it reads by seeds 0.0
    (``x * 0.0``: +-0.0 for a finite ``x``, NaN for inf or NaN, as in NumPy), so
    many of its nonzeros are ``10.0 + (a * 0.0 + b * 0.0)``: exactly 10.0 unless
    ``a`` or ``b`` is not finite. This evaluates the skeleton over abstract
    values: float64 constants (an array: per element, or one), :data:`ZERO`,
    :data:`FINITE` (a value read) and :data:`OTHER`, by IEEE rules that hold for
    every sign of every zero (``c + +-0.0 == c`` for ``c != 0``, ``+0.0 + +-0.0
    == +0.0``...), so a constant is the exact double the loop computes.

    >>> from difgen.targets.c.loops import DemandGroup
    >>> ten, zero = np.float64(10.0).tobytes(), np.float64(0.0).tobytes()
    >>> class E:  # an elementwise equation: only the primitive's name is read
    ...     def __init__(self, name):
    ...         self.primitive, self.params = type("P", (), {"name": name}), ()
    >>> eqns = [E("mul"), E("add"), E("sub")]
    >>> def constant(*skeleton):
    ...     return finite_constant(DemandGroup(skeleton, np.zeros((1, 1)), {}), eqns)
    >>> constant(("v", 0), ("c", zero), ("e", 0, (0, 1)), ("c", ten),
    ...          ("e", 2, (3, 2)))  # 10.0 - a * 0.0
    array([10.])
    >>> constant(("v", 0), ("c", zero), ("e", 0, (0, 1)), ("c", zero),
    ...          ("e", 2, (3, 2)))  # 0.0 - a * 0.0: +0.0 for every finite a
    array([0.])
    >>> print(constant(("v", 0), ("c", zero), ("e", 0, (0, 1)), ("c", zero),
    ...                ("e", 2, (2, 3))))  # a * 0.0 - 0.0: -0.0 for a < 0
    None
    """
    values: list[Any] = []
    for k, item in enumerate(group.skeleton):
        if item[0] == "v":
            values.append(FINITE)
        elif item[0] == "c":
            if item[1] is not None:
                values.append(np.frombuffer(item[1], np.float64))
            else:
                values.append(np.asarray(group.reads[k], dtype=np.float64))
        elif item[0] == "s":
            total = values[item[1][0]]
            for c in item[1][1:]:
                total = _abstract("add", [total, values[c]])
            values.append(total)
        else:
            eqn = eqns[item[1]]
            operands = [values[c] for c in item[2]]
            plain = not (eqn.params.as_dict() if eqn.params else {})
            name = eqn.primitive.name if plain else ""
            values.append(_abstract(name, operands))
    last = values[-1]
    return last if isinstance(last, np.ndarray) else None


_FOLDED: dict[str, Any] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "neg": np.negative,
}
"""The operations :func:`finite_constant` folds over constants (the loops' C
operators, which round as these NumPy ufuncs do)."""


def _abstract(name: str, operands: list[Any]) -> Any:
    """One operation of :func:`finite_constant` over abstract values: constants
    (float64 arrays), :data:`ZERO`, :data:`FINITE`, :data:`OTHER`."""
    if name in _FOLDED and all(isinstance(v, np.ndarray) for v in operands):
        with np.errstate(all="ignore"):
            return np.asarray(_FOLDED[name](*operands), dtype=np.float64)
    if name == "neg":
        return ZERO if operands[0] is ZERO else OTHER
    if name == "sub":  # a - b is a + (-b), exactly; -ZERO is ZERO, -FINITE FINITE
        b = operands[1]
        return _abstract("add", [operands[0], -b if isinstance(b, np.ndarray) else b])
    a, b = operands if len(operands) == 2 else (operands[0], OTHER)
    if name == "add":
        if isinstance(a, np.ndarray):
            a, b = b, a
        if a is ZERO and isinstance(b, np.ndarray):
            if np.isnan(b).any():
                return OTHER
            if ((b != 0.0) | ~np.signbit(b)).all():  # c + +-0.0 is c, +0.0 too
                return b
            return ZERO if (np.signbit(b) & (b == 0.0)).all() else OTHER  # -0.0 + z
        return ZERO if a is ZERO and b is ZERO else OTHER
    if name in ("mul", "div"):
        if name == "mul" and isinstance(a, np.ndarray):
            a, b = b, a
        if isinstance(b, np.ndarray):
            finite = bool(np.isfinite(b).all())
            if a is ZERO and finite and (name == "mul" or bool((b != 0.0).all())):
                return ZERO  # +-0 * finite, +-0 / nonzero finite
            if name == "mul" and a is FINITE and bool((b == 0.0).all()):
                return ZERO  # finite * +-0.0
            return OTHER
        if name == "mul" and {a, b} <= {ZERO, FINITE} and ZERO in (a, b):
            return ZERO  # +-0 * +-0, +-0 * finite
    return OTHER


def _fill_line(store: Store, value: bytes) -> str:
    """The C writing the float64 ``value`` to every element of ``store``."""
    size = store_size(store)
    if value == np.float64(0.0).tobytes():
        return f"memset({store.name}, 0, sizeof(double) * {size});"
    literal = c_number(np.frombuffer(value, np.float64)[0])
    return f"{PREFIX}fill({store.name}, {size}, {literal});"


def _reduced_positions(shape: tuple[int, ...], axes: Any) -> np.ndarray:
    """The output position each input element of a reduction over ``axes`` adds to."""
    axes = tuple(int(a) % len(shape) for a in axes) if shape else ()
    kept = tuple(1 if d in axes else n for d, n in enumerate(shape))
    size = int(np.prod(kept, dtype=np.int64))
    return np.broadcast_to(np.arange(size, dtype=np.int64).reshape(kept), shape)


def _eqn_text(eqn: Any) -> str:
    """The IR equation, short, safe in a C comment."""
    params = ", ".join(f"{k}={_short(v)}" for k, v in eqn.params.as_dict().items())
    head = eqn.primitive.name + (f"[{params}]" if params else "")
    shape = ",".join(str(n) for n in eqn.out.shape)
    text = f"f64[{shape}] = {head}"
    return text.replace("*/", "* /")[:100]


def _short(value: Any) -> str:
    text = repr(value).replace("\n", " ")
    return text if len(text) <= 24 else text[:21] + "..."


# --------------------------------------------------------------- C function
@dataclass(frozen=True)
class Signature:
    """What the C function's glue needs to know of the operator."""

    op: Operator
    args: list[tuple[str, tuple[int, ...]]]  # (name, shape), in call order
    shapes: list[tuple[int, ...]]  # of the graph's outputs (sparse: (nnz,))
    sparse: list[bool]
    takes_out: bool  # a dense last result written into out=
    csr_out: bool  # a sparse last result written into a CSR out='s data

    @property
    def out(self) -> str | None:
        with_out = self.takes_out or self.csr_out
        return f"{PREFIX}argv[{len(self.args)}]" if with_out else None

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.args] + ([naming.OUT] if self.out else [])

    @property
    def arrays(self) -> list[str]:
        return [n for n, s in self.args if s]


def _signature(
    op: Operator, spec: ModuleSpec, ys: tuple[int, ...], graph: Graph
) -> Signature:
    xs, batch = tuple(spec.input.shape), spec.batch
    args = [(naming.INPUT, xs)]
    args += [(s, tuple(seed_shape(s, xs, ys, batch))) for s in op.seeds]
    args += [(c.name, tuple(c.shape)) for c in spec.contexts]
    sparse = [is_sparse(k, spec) for k in op.results]
    dense_last = result_shape(op.results[-1], xs, ys, batch)
    return Signature(
        op,
        args,
        [tuple(o.shape) for o in graph.outputs],
        sparse,
        op.takes_out and dense_last != () and not sparse[-1],
        sparse_out(op, spec),
    )


def _argument_lines(sig: Signature) -> list[str]:
    """Parse the call, convert and check every argument (as the Python module)."""
    names, n = sig.names, len(sig.names)
    quoted = ", ".join(repr_c(name) for name in names)
    lines = [
        f"PyObject *{PREFIX}argv[{n}] = {{{_nulls(n)}}};",
        f"PyObject *{PREFIX}res[{len(sig.shapes)}] = {{{_nulls(len(sig.shapes))}}};",
        f"PyObject *{PREFIX}sdata = NULL;",
        f"double *{PREFIX}w = NULL;",
        f"int {PREFIX}heap = 0;",
        f"static const char *const {PREFIX}names[] = {{{quoted}}};",
        *(f"PyArrayObject *{PREFIX}a_{a} = NULL;" for a in sig.arrays),
        (
            f'if ({PREFIX}parse("{sig.op.name}", {PREFIX}args, {PREFIX}nargs, '
            f"{PREFIX}kwnames, {PREFIX}names, {n}, {len(sig.args)}, "
            f"{PREFIX}argv) < 0) return NULL;"
        ),
    ]
    for i, (name, shape) in enumerate(sig.args):
        if not shape:
            lines += [
                f"double {name};",
                (
                    f'if ({PREFIX}scalar({PREFIX}argv[{i}], "{name}", &{name}) < 0) '
                    f"goto {PREFIX}fail;"
                ),
            ]
            continue
        a = f"{PREFIX}a_{name}"
        lines += [
            f"static const npy_intp {PREFIX}dims_{name}[] = {_dims(shape)};",
            (
                f'{a} = {PREFIX}array({PREFIX}argv[{i}], "{name}", {len(shape)}, '
                f"{PREFIX}dims_{name});"
            ),
            f"if ({a} == NULL) goto {PREFIX}fail;",
            f"const double *{PREFIX}p_{name} = (const double *)PyArray_DATA({a});",
        ]
    return lines


def _buffer_lines(sig: Signature, pattern: str | None) -> list[str]:
    """The result arrays, made before the loops write into them: new arrays, or
    ``out`` (its CSR data, checked against ``pattern``) when it can be written
    directly and shares no memory with an argument."""
    lines: list[str] = []
    last_k, out = len(sig.shapes) - 1, sig.out
    for k, kind in enumerate(sig.op.results):
        shape, res, r = sig.shapes[k], f"{PREFIX}res[{k}]", f"{PREFIX}r{k}"
        if shape == () and not sig.sparse[k]:
            lines.append(f"double {r} = 0.0;")
            continue
        nd, dims = len(shape), f"{PREFIX}rdims_{k}"
        lines += [
            f"double *{r} = NULL;",
            f"static const npy_intp {dims}[] = {_dims(shape)};",
        ]
        fresh = f"{res} = {PREFIX}new({nd}, {dims}, &{r});"
        if k == last_k and sig.csr_out:
            lines += [
                f"if ({out} != NULL && {out} != Py_None) {{",
                (
                    f"    {PREFIX}sdata = {PREFIX}csr_data({out}, "
                    f'"{kind}.out", &{pattern});'
                ),
                f"    if ({PREFIX}sdata == NULL) goto {PREFIX}fail;",
                "}",
                (
                    f"{res} = {PREFIX}result(NULL, {PREFIX}sdata == NULL ? Py_None : "
                    f"{PREFIX}sdata, {nd}, {dims}, &{r});"
                ),
            ]
        elif sig.sparse[k]:  # the CSR array keeps it: nothing to recycle
            lines.append(fresh)
        else:
            taken = out if k == last_k and sig.takes_out else None
            lines += c_code.recycle_lines(k, shape)
            lines.append(f"{res} = {c_code.fresh_array(k, shape, '&' + r, taken)};")
        lines.append(f"if ({res} == NULL) goto {PREFIX}fail;")
        if k == last_k and sig.out and sig.arrays:
            overlap = " || ".join(
                f"{PREFIX}overlap({r}, {int(np.prod(shape))}, "
                f"{PREFIX}p_{n}, {int(np.prod(s))})"
                for n, s in sig.args
                if s
            )
            lines += [
                f"if ({overlap}) {{",
                f"    Py_DECREF({res});",
                f"    {fresh}",
                f"    if ({res} == NULL) goto {PREFIX}fail;",
                "}",
            ]
    return lines


def _workspace_lines(work: int) -> list[str]:
    """The intermediate arrays' memory (see the module docstring)."""
    if not work:
        return []
    if work <= STACK_DOUBLES:
        return [f"double {PREFIX}stack[{work}];", f"{PREFIX}w = {PREFIX}stack;"]
    return [  # the operator's own buffer, unless a call is already using it
        f"static double *{PREFIX}cache = NULL;",
        f"static int {PREFIX}busy = 0;",
        f"if (!{PREFIX}busy) {{",
        (
            f"    if ({PREFIX}cache == NULL) "
            f"{PREFIX}cache = (double *)malloc(sizeof(double) * {work});"
        ),
        f"    {PREFIX}w = {PREFIX}cache;",
        f"    {PREFIX}heap = 2;",
        f"    {PREFIX}busy = 1;",
        "} else {",
        f"    {PREFIX}w = (double *)malloc(sizeof(double) * {work});",
        f"    {PREFIX}heap = 1;",
        "}",
        f"if ({PREFIX}w == NULL) {{ PyErr_NoMemory(); goto {PREFIX}fail; }}",
    ]


def _workspace_cleanup(work: int) -> list[str]:
    """Give the workspace back: free a buffer of this call's own, or mark the
    operator's kept buffer free again."""
    cleanup = [f"if ({PREFIX}heap == 1) free({PREFIX}w);"]
    if work > STACK_DOUBLES:
        cleanup.append(f"if ({PREFIX}heap == 2) {PREFIX}busy = 0;")
    return cleanup


def _finish_lines(sig: Signature) -> list[str]:
    """The results as Python objects: floats, arrays (copied into a given ``out``
    that was not written directly), CSR arrays (or the caller's CSR ``out``)."""
    lines: list[str] = []
    last_k, out = len(sig.shapes) - 1, sig.out
    for k, kind in enumerate(sig.op.results):
        shape, res = sig.shapes[k], f"{PREFIX}res[{k}]"
        fail = f"if ({res} == NULL) goto {PREFIX}fail;"
        nd, dims = len(shape), f"{PREFIX}rdims_{k}"
        if shape == () and not sig.sparse[k]:
            lines += [f"{res} = PyFloat_FromDouble({PREFIX}r{k});", fail]
        elif k == last_k and sig.sparse[k] and sig.csr_out:
            lines += [
                f"if ({PREFIX}sdata != NULL) {{",
                f"    {res} = {PREFIX}into_out({res}, {PREFIX}sdata, {nd}, {dims});",
                f"    {fail}",
                f"    Py_DECREF({res});",
                f"    Py_INCREF({out});",
                f"    {res} = {out};",
                "} else {",
                f'    {res} = {PREFIX}wrap({res}, "{kind}");',
                f"    {fail}",
                "}",
            ]
        elif sig.sparse[k]:
            lines += [f'{res} = {PREFIX}wrap({res}, "{kind}");', fail]
        elif k == last_k and sig.takes_out:
            lines += [
                (
                    f"{res} = {PREFIX}into_out({res}, {out} == NULL ? Py_None : {out}, "
                    f"{nd}, {dims});"
                ),
                fail,
            ]
    return lines


def _return_lines(sig: Signature, work: int) -> list[str]:
    """Release what the call holds; return the result(s), or NULL on failure."""
    nres = len(sig.shapes)
    cleanup = _workspace_cleanup(work)
    cleanup.append(f"Py_XDECREF({PREFIX}sdata);")
    cleanup += [f"Py_XDECREF({PREFIX}a_{n});" for n in sig.arrays]
    lines = list(cleanup)
    lines += c_code.return_lines(nres)
    if nres > 1:
        lines.append(f"goto {PREFIX}failed;")
    lines += [f"{PREFIX}fail:", *cleanup]
    if nres != 1:
        lines.append(f"{PREFIX}failed:")
    lines += [
        (
            f"for (int {PREFIX}k = 0; {PREFIX}k < {nres}; {PREFIX}k++) "
            f"Py_XDECREF({PREFIX}res[{PREFIX}k]);"
        ),
        "return NULL;",
    ]
    return lines


def _result_stores(graph: Graph, shapes: list[tuple[int, ...]]) -> list[Store | None]:
    """Each output's result buffer, where the loops may compute it directly
    (None: a repeated output or an argument, copied at the end)."""
    results: list[Store | None] = []
    seen: set[Any] = set()
    for k, atom in enumerate(graph.outputs):
        ok = isinstance(atom, Var) and atom not in seen and atom not in graph.inputs
        results.append(Store(f"{PREFIX}r{k}", shapes[k]) if ok else None)
        seen.add(atom)
    return results


Pattern = tuple[np.ndarray, np.ndarray, tuple[int, int]]
"""A sparse result's CSR ``indices``, ``indptr`` and shape."""


@dataclass(frozen=True)
class LoopBody:
    """One operator graph compiled to C statements, which the one-point function
    (:func:`c_loops_function`) and the points loop (:func:`points_native`) both
    run, so that a points variant's row is the one-point operator's result.

    The statements read argument ``n`` through the pointer ``dg_p_<n>`` (a
    scalar through the double ``<n>``), write result ``k`` into ``dg_r<k>`` (a
    pointer, or a double for a scalar result), use ``work`` doubles at ``dg_w``
    and ``goto dg_fail`` only where they call NumPy (``calls_numpy``).
    """

    sig: Signature
    tables: tuple[str, ...]  # static const tables the statements read
    lines: tuple[str, ...]
    work: int
    calls_numpy: bool


def loop_body(
    op: Operator, spec: ModuleSpec, ys: tuple[int, ...], graph: Graph
) -> LoopBody:
    """Compile ``op``'s graph to loops once (see :class:`LoopBody`).

    :class:`NoLoopForm` when the graph uses a primitive without a loop form."""
    sig = _signature(op, spec, ys, graph)
    inputs = [(f"{PREFIX}p_{n}" if s else n, s) for n, s in sig.args]
    compiler = Compiler(graph, inputs, op.name)
    lines = compiler.compile_all(_result_stores(graph, sig.shapes))
    return LoopBody(
        sig,
        tuple(compiler.tables.lines),
        tuple(lines),
        compiler.work,
        compiler.calls_numpy,
    )


def c_loops_function(
    body: LoopBody, equations: int, pattern: Pattern | None = None
) -> tuple[str, str]:
    """One operator as a METH_FASTCALL C function of loops: (source, doc).

    ``pattern`` is the last result's sparsity pattern when it takes a CSR ``out``
    (checked against it in C)."""
    sig = body.sig
    op = sig.op
    pattern_source, pattern_name = "", None
    if sig.csr_out:
        if pattern is None:
            raise ValueError(f"{op.name}: a CSR out= needs its sparsity pattern")
        pattern_source, pattern_name = c_code.csr_pattern(op.name, *pattern)
    lines = [
        *_argument_lines(sig),
        *_buffer_lines(sig, pattern_name),
        *_workspace_lines(body.work),
        *body.lines,
        *_finish_lines(sig),
        *_return_lines(sig, body.work),
    ]
    source = (
        f"/* {op.name}: C loops over the trace backend's graph "
        f"({equations} equations) */\n"
        + "".join(f"{t}\n" for t in body.tables)
        + pattern_source
        + f"static PyObject *\n{PREFIX}op_{op.name}(PyObject *{PREFIX}self, "
        f"PyObject *const *{PREFIX}args, Py_ssize_t {PREFIX}nargs, "
        f"PyObject *{PREFIX}kwnames)\n{{\n"
        + "".join(f"    {line}\n" for line in lines)
        + "}\n"
    )
    names = sig.names
    params = ", ".join(names[:-1] + [f"{naming.OUT}=None"] if sig.out else names)
    return OVERLAP + source, f"{op.name}({params})\\n--\\n\\n"


def points_native(
    op: Operator, spec: ModuleSpec, ys: tuple[int, ...], body: LoopBody
) -> tuple[str, str] | None:
    """(C source, text signature) of ``op``'s points variant: the points loop of
    :mod:`difgen.targets.c.points` running ``body`` at each point, or None for a
    sparse result (a CSR array has no points axis).

    The statements are the one-point function's, so they read the ``static
    const`` tables printed with it (the points variants come after every
    operator in the C file). The workspace is taken once per call. NumPy calls
    (large transcendentals, BLAS) stay as they are, so that rows equal the
    one-point operator bit for bit; such a body keeps the GIL.
    """
    if any(body.sig.sparse):
        return None

    def make_body(
        args: list[c_points.PointsArgument], shapes: list[tuple[int, ...]]
    ) -> c_points.PointsBody:
        once, reads = _points_reads(args, "\n".join(body.lines))
        rows, stores = _points_results(shapes)
        return c_points.PointsBody(
            prelude=OVERLAP
            + f"/* {naming.points(op.name)}: {op.name}'s loops at each point */\n",
            declare=(f"double *{PREFIX}w = NULL;", f"int {PREFIX}heap = 0;"),
            before=(*once, *_workspace_lines(body.work)),
            at_point=(*reads, *rows, *body.lines, *stores),
            cleanup=tuple(_workspace_cleanup(body.work)),
            gil_free=not body.calls_numpy,
        )

    printed = c_points.points_function(op, spec, ys, make_body)
    return printed.source, printed.doc


def _points_reads(
    args: list[c_points.PointsArgument], text: str
) -> tuple[list[str], list[str]]:
    """(once per call, at each point) lines giving the loop statements ``text``
    the names they read: ``dg_p_<n>`` at the point's row of a per-point array,
    or at a shared array; ``<n>`` the point's or the shared scalar."""
    once: list[str] = []
    at_point: list[str] = []
    for j, arg in enumerate(args):
        name = f"{PREFIX}p_{arg.name}" if arg.shape else arg.name
        if not re.search(rf"\b{name}\b", text):
            continue  # an argument this operator does not read
        data = c_points.argument_data(j)
        if not arg.per_point:
            shared = c_points.shared_scalar(arg)
            once.append(
                f"const double *const {name} = {data};"
                if arg.shape
                else f"const double {name} = {shared};"
            )
            continue
        base = f"{PREFIX}b_{arg.name}"
        once.append(f"const double *const {base} = {data};")
        at_point.append(
            f"const double *const {name} = {base} + {PREFIX}i * {arg.size};"
            if arg.shape
            else f"const double {name} = {base}[{PREFIX}i];"
        )
    return once, at_point


def _points_results(shapes: list[tuple[int, ...]]) -> tuple[list[str], list[str]]:
    """(before the statements, after them) at each point: ``dg_r<k>`` points at
    the point's row of result ``k``, or is a double stored into it afterwards."""
    before: list[str] = []
    after: list[str] = []
    for r, shape in enumerate(shapes):
        if shape:
            row = c_points.result_row(r, int(np.prod(shape)))
            before.append(f"double *const {PREFIX}r{r} = {row};")
        else:
            before.append(f"double {PREFIX}r{r} = 0.0;")
            after.append(f"{PREFIX}out[{r}][{PREFIX}i] = {PREFIX}r{r};")
    return before, after


OVERLAP = f"""#ifndef {PREFIX.upper()}LOOPS_RUNTIME
#define {PREFIX.upper()}LOOPS_RUNTIME
#if defined(__GNUC__) && !defined(__clang__)
/* GCC vectorizes the elementwise loops at -O3; with -ffp-contract=off and no
   fast-math that changes no result (sums are not reassociated). */
#pragma GCC optimize("O3")
#endif
#endif
"""
"""The loops' optimization level, guarded so every operator can carry it (from the
first loops operator on). Their helpers (``dg_fill``, ``dg_overlap``,
``dg_numpy_attr``) are sections of ``templates/c/loops.c``, which the C file
carries when its code calls them (:mod:`difgen.targets.c.runtime`)."""


def repr_c(name: str) -> str:
    return f'"{name}"'


def _nulls(n: int) -> str:
    return ", ".join(["NULL"] * n)


def _dims(shape: tuple[int, ...]) -> str:
    return "{" + ", ".join(str(n) for n in shape) + "}" if shape else "{0}"
