"""Vectorized NumPy statements from a Graph: one statement per equation.

Each equation is printed with its primitive's ``numpy`` form, whose operands are
:class:`~difgen.core.expr.Expr` values carrying their precedence. A value used once
is inlined into its consumer when it is short (parenthesized where its slot needs
it), so the code reads like hand-written NumPy. Constants are printed compactly
and never grow with the number of elements when they have structure: uniform arrays as ``np.full``/``np.zeros``, integer runs (index arrays,
``np.arange``-like data) as ``np.arange`` pieces; larger ones become module constants
``C0, C1...`` shared by all functions of the module.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from difgen import naming, precision
from difgen.config import ModuleSpec
from difgen.core.expr import Expr, atom, literal
from difgen.core.ir import FrozenArray, Graph, Lit, Var
from difgen.core.primitive import Statements
from difgen.operators import Operator
from difgen.primitives.indexing import roll_of_arange
from difgen.targets import tables
from difgen.targets.numpy.epilogue import LastResult, returns
from difgen.targets.parts import (
    NOTHING,
    PACKED,
    SPARSE,
    TYPING,
    Constants,
    Function,
    Pattern,
    Uses,
)
from difgen.targets.signatures import (
    SPARSE_TYPE,
    docstring,
    signature,
    signature_uses,
    sparse_out,
)

INLINE_SIZE = 8  # arrays up to this many elements are written in place
INLINE_LENGTH = 72  # a single-use expression longer than this gets its own line
MAX_RUNS = 4  # integer arrays made of at most this many arange runs print as such
LARGE_TABLE = 4096
"""Integer tables of more elements are module constants printed by
:mod:`difgen.targets.tables` (block runs as a formula, else one compressed block),
so that a module's size does not grow with its sparsity pattern."""


def _constant(pool: Constants, source: str) -> str:
    """A module constant ``C<n>`` with this source (shared when equal)."""
    return pool.add(source, naming.const(len(pool.items)))


class PointsAxis(int):
    """The length of a points variant's points axis in its batched graph (a
    sentinel size), printed as the name of the run-time number of points wherever
    a shape, a size or a slice bound is printed: ``(npoints, 1, 4)``, not
    ``(97, 1, 4)``. Arithmetic on it gives a plain ``int``, printed as a number:
    code in which the number of points enters other than as the points axis (``3
    * k`` in a reshape) then prints differently at the two sentinel sizes, and
    the points variant is refused (:mod:`difgen.targets.numpy.points`)."""

    name: str

    def __new__(cls, value: int, name: str) -> PointsAxis:
        axis = super().__new__(cls, value)
        axis.name = name
        return axis

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return self.name


def symbolic(value: Any, axis: PointsAxis | None) -> Any:
    """``value`` (a parameter, a shape) with every integer equal to the points
    axis's length as ``axis``, in tuples, lists and slices too. The sentinel sizes
    appear as no integer of the operator's own graph (:mod:`difgen.derive.points`),
    so such an integer is the points axis."""
    if axis is None or isinstance(value, (bool, np.bool_)):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, PointsAxis):
        return axis if int(value) == int(axis) else value
    if isinstance(value, tuple):
        return tuple(symbolic(v, axis) for v in value)
    if isinstance(value, list):
        return [symbolic(v, axis) for v in value]
    if isinstance(value, slice):
        return slice(
            *(symbolic(v, axis) for v in (value.start, value.stop, value.step))
        )
    return value


# ------------------------------------------------------------------ constants
def number(value: Any) -> str:
    """A float or bool as Python source (``np.inf`` for infinities)."""
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    value = float(value)
    if np.isnan(value):
        return "np.nan"
    if np.isinf(value):
        return "np.inf" if value > 0 else "-np.inf"
    return repr(value)


def _nested(value: np.ndarray, item: Any) -> str:
    if value.ndim == 0:
        return item(value[()])
    return "[" + ", ".join(_nested(v, item) for v in value) + "]"


def _runs(flat: np.ndarray) -> list[tuple[int, int, int]] | None:
    """``flat`` as at most MAX_RUNS (start, step, length) integer progressions.

    A run has three elements or more, or two consecutive integers.
    """
    if flat.size == 0 or not np.all(flat == np.round(flat)):
        return None
    values = flat.astype(np.int64)
    runs: list[tuple[int, int, int]] = []
    i, n = 0, len(values)
    while i < n:
        step = int(values[i + 1] - values[i]) if i + 1 < n else 1
        j = i + 1
        while step != 0 and j < n and values[j] - values[j - 1] == step:
            j += 1
        if j - i == 2 and abs(step) != 1:
            j = i + 1
        runs.append((int(values[i]), step if j - i > 1 else 1, j - i))
        if len(runs) > MAX_RUNS:
            return None
        i = j
    return runs


def _arange(runs: list[tuple[int, int, int]], as_float: bool) -> str:
    dtype = f", dtype=np.{precision.module_float()}" if as_float else ""
    parts = []
    for start, step, length in runs:
        stop = start + step * length
        if step == 1:
            args = f"{start}, {stop}" if start else f"{stop}"
        else:
            args = f"{start}, {stop}, {step}"
        parts.append(f"np.arange({args}{dtype})")
    return parts[0] if len(parts) == 1 else f"np.concatenate(({', '.join(parts)}))"


def array_source(
    value: np.ndarray,
    cast: str = "",
    axis: PointsAxis | None = None,
    pool: Constants | None = None,
) -> str:
    """Compact source text for a constant array (its size does not show), with
    ``cast`` (such as ``".astype(np.int32)"``) applied to it; its shape names the
    points ``axis`` where it has it. An integer table of more than
    :data:`LARGE_TABLE` elements that is a module constant of ``pool`` is printed
    by :mod:`difgen.targets.tables` (``pool`` records what a compressed block's
    decoding names).

    >>> array_source(np.array([3, 1, 2]), ".astype(np.int32)")
    'np.array([3, 1, 2]).astype(np.int32)'
    """
    shape = symbolic(tuple(value.shape), axis)
    is_bool = value.dtype == np.bool_
    is_int = value.dtype.kind in "iu"
    # a float array in a float32 module is made float32 (else NumPy's float64)
    floats = "" if is_bool or is_int else precision.float_dtype_arg()
    flat = value.ravel()
    if not flat.size:  # np.array([]) would lose the shape
        dtype = ", dtype=bool" if is_bool else ", dtype=np.int64" if is_int else floats
        return f"np.zeros({shape!r}{dtype}){cast}"
    if np.all(flat == flat[0]):
        v = flat[0]
        if is_bool:
            return f"np.full({shape!r}, {number(v)}){cast}"
        if is_int:
            return f"np.full({shape!r}, {int(v)}){cast}"
        if v == 0 and not np.signbit(v):
            return f"np.zeros({shape!r}{floats}){cast}"
        if v == 1:
            return f"np.ones({shape!r}{floats}){cast}"
        return f"np.full({shape!r}, {number(v)}{floats}){cast}"
    reshape = "" if value.ndim == 1 else f".reshape({shape!r})"
    if is_int and value.ndim == 1 and (shift := roll_of_arange(flat)) is not None:
        return f"np.roll(np.arange({flat.size}), {shift}){cast}"
    if not is_bool and flat.size > INLINE_SIZE and (runs := _runs(flat)) is not None:
        return _arange(runs, as_float=not is_int) + reshape + cast
    item: Callable[[Any], str] = (lambda v: str(int(v))) if is_int else number
    if flat.size <= INLINE_SIZE:
        return f"np.array({_nested(value, item)}{floats}){cast}"
    if is_int and pool is not None and flat.size > LARGE_TABLE:
        if (found := tables.formula(flat)) is not None:
            return found + reshape + cast
        pool.uses |= PACKED
        return tables.packed(flat) + reshape + cast
    if is_int and (periodic := _periodic(flat)) is not None:
        return periodic + reshape + cast
    return _wrapped([item(v) for v in flat], reshape + cast, floats)


MAX_PERIOD = 512  # longest period tried by _periodic
MAX_LITERAL = 48  # longest stretch between periodic runs written out
MIN_RUN = 32  # shortest stretch worth writing as a periodic run
MAX_WORK = 50_000_000  # periods x length tried, bounding build time


def _periodic(flat: np.ndarray) -> str | None:
    """Integers made of runs that repeat a block with a constant shift
    (``v[i + p] = v[i] + s``), joined by short literals: the index arrays of banded
    and stencil patterns, whose size then does not show in the source.

    >>> print(_periodic(np.array([9, 0, 1, 1, 2, 2, 3, 3, 4])))
    None
    >>> print(_periodic(np.arange(40) // 2 * 3))
    (np.array([0, 0]) + 3 * np.arange(20)[:, None]).ravel()[:40]
    """
    found = _periodic_parts(flat.astype(np.int64), depth=0)
    if found is None or not any(run for _, run in found):
        return None
    parts = [source for source, _ in found]
    return parts[0] if len(parts) == 1 else f"np.concatenate(({', '.join(parts)}))"


def _periodic_parts(values: np.ndarray, depth: int) -> list[tuple[str, bool]] | None:
    """The sources of ``values`` in order, each with whether it is a periodic run
    (else a literal)."""
    n = len(values)
    if n == 0:
        return []
    best: tuple[int, int, int, int] | None = None  # covered, period, start, stop
    if n >= MIN_RUN and depth < 16:
        for p in range(1, min(MAX_PERIOD, n // 2, MAX_WORK // n) + 1):
            steps = values[p:] - values[:-p]
            bounds = np.concatenate(
                ([0], np.flatnonzero(np.diff(steps)) + 1, [len(steps)])
            )
            k = int(np.argmax(np.diff(bounds)))
            start, stop = int(bounds[k]), int(bounds[k + 1])
            covered = stop - start + p
            longer = best is None or covered > best[0]
            if stop - start >= p and covered >= MIN_RUN and longer:
                best = (covered, p, start, stop)
    if best is None:
        if n > MAX_LITERAL:
            return None
        return [(f"np.array({values.tolist()!r})", False)]
    covered, p, start, stop = best
    left = _periodic_parts(values[:start], depth + 1)
    right = _periodic_parts(values[start + covered :], depth + 1)
    if left is None or right is None:
        return None
    shift, block = int(values[start + p] - values[start]), values[start : start + p]
    reps = -(-covered // p)
    run = (
        f"(np.array({block.tolist()!r}) + {shift} * np.arange({reps})[:, None])"
        f".ravel()[:{covered}]"
    )
    return [*left, (run, True), *right]


def _wrapped(items: list[str], suffix: str, dtype: str = "") -> str:
    """A long flat literal, a few numbers per line, kept so by black (fmt: skip)."""
    lines, line = [], ""
    for item in items:
        if line and len(line) + len(item) + 2 > 84:
            lines.append(line + ",")
            line = ""
        line = f"{line}, {item}" if line else item
    lines.append(line + ",")
    body = "\n".join(f"    {text}" for text in lines)
    return f"np.array([\n{body}\n]{dtype}){suffix}  # fmt: skip"


def index_itemsize(shape: tuple[int, int], nnz: int) -> int:
    """The bytes per index of a sparse result's pattern constants: 4 (int32) when
    every index and count fits, as SciPy itself chooses for the CSR arrays it
    builds (``get_index_dtype``), else 8. Half the bytes halve the comparison of a
    CSR ``out`` with the pattern, which the in-place operators make on every call.

    >>> index_itemsize((512, 512), 3072), index_itemsize((2**31, 1), 1)
    (4, 8)
    """
    return 4 if max(*shape, nnz) <= np.iinfo(np.int32).max else 8


@dataclass(frozen=True)
class CsrFormat:
    """How a sparse result's nonzeros become a CSR array: the module constants of
    its pattern (``<KIND>_INDICES``, ``<KIND>_INDPTR``) and its shape; with
    ``select`` (``triangle = "lower"``), the constant of the positions of the
    triangle's entries among the computed nonzeros, which the result keeps."""

    indices: str
    indptr: str
    shape: tuple[int, int]
    select: str | None = None

    FORMAT_USES: ClassVar[Uses] = SPARSE
    """What the code of :meth:`format` names (its printer reports it)."""
    OUT_CHECK_USES: ClassVar[Uses] = Uses(helpers=frozenset({naming.CHECK_CSR_OUT}))
    """What the code of :meth:`out_check` names (its printer reports it)."""

    def data(self, data: str) -> str:
        """The result's nonzeros from the computed ones ``data`` (the triangle's)."""
        return data if self.select is None else f"{data}[{self.select}]"

    def format(self, data: str) -> str:
        """A CSR array of the nonzeros ``data`` on copies of the pattern: SciPy
        keeps the arrays it is given (``indptr`` itself, ``indices`` as a view), so
        without the copies ``eliminate_zeros``, ``sort_indices`` or any in-place
        edit of a returned matrix rewrote the module's pattern, and every later
        call returned a wrong matrix."""
        layout = f"{self.indices}.copy(), {self.indptr}.copy()"
        return f"{SPARSE_TYPE}(({self.data(data)}, {layout}), shape={self.shape!r})"

    def out_check(self, out: str) -> str:
        """The call of the module's ``_check_csr_out`` on ``out`` against this
        pattern: the data of ``out`` to fill, or ValueError."""
        pattern = f"{self.indices}, {self.indptr}, {self.shape!r}"
        return f"{naming.CHECK_CSR_OUT}({out}, {pattern})"


def triangle_of(
    indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int], triangle: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indices, indptr, positions in the full pattern's data) of the ``"lower"``
    (column <= row) or ``"upper"`` triangle of a CSR pattern, diagonal included,
    row by row as the full pattern orders them.

    >>> i, p, at = triangle_of(np.array([0, 1, 0, 1]), np.array([0, 2, 4]), (2, 2), "lower")
    >>> i.tolist(), p.tolist(), at.tolist()
    ([0, 0, 1], [0, 1, 3], [0, 2, 3])
    """
    rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
    keep = indices <= rows if triangle == "lower" else indices >= rows
    counts = np.bincount(rows[keep], minlength=shape[0])
    kept_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(indptr.dtype)
    return indices[keep], kept_ptr, np.flatnonzero(keep)


def csr_format(
    kind: str,
    indices: np.ndarray,
    indptr: np.ndarray,
    shape: tuple[int, int],
    pool: Constants,
    triangle: str | None = None,
) -> CsrFormat:
    """The :class:`CsrFormat` of a ``kind`` result of this pattern, its index
    constants (int32 or int64: :func:`index_itemsize`) added to ``pool``, which
    also records the pattern (:attr:`Constants.patterns`, for the module's
    structure functions). ``triangle`` keeps a hessian's lower or upper triangle."""
    cast = ".astype(np.int32)" if index_itemsize(shape, len(indices)) == 4 else ""
    select = None
    if triangle is not None and kind == "hessian":
        indices, indptr, positions = triangle_of(indices, indptr, shape, triangle)
        source = array_source(positions, cast, pool=pool)
        select = pool.add(source, f"{kind.upper()}_SELECT")
    name_i = pool.add(array_source(indices, cast, pool=pool), f"{kind.upper()}_INDICES")
    name_p = pool.add(array_source(indptr, cast, pool=pool), f"{kind.upper()}_INDPTR")
    pool.patterns[kind] = Pattern(kind, name_i, name_p, shape, len(indices))
    return CsrFormat(name_i, name_p, shape, select)


class _Named(FrozenArray):
    """A constant index array that prints as its source (inline or a constant name)."""

    source: str  # set in __init__ (the dataclass is frozen); not a dataclass field

    def __init__(self, frozen: FrozenArray, source: str) -> None:
        object.__setattr__(self, "value", frozen.value)
        object.__setattr__(self, "_key", frozen._key)
        object.__setattr__(self, "source", source)

    def __repr__(self) -> str:
        return str(self.source)


def _index_param(value: Any, pool: Constants) -> Any:
    if isinstance(value, FrozenArray):
        if value.value.size <= INLINE_SIZE:
            return _Named(value, _nested(value.value, lambda v: str(int(v))))
        source = array_source(value.value, pool=pool)
        if len(source) <= 40 and "\n" not in source:
            return _Named(value, source)
        return _Named(value, _constant(pool, source))
    if isinstance(value, tuple):
        return tuple(_index_param(v, pool) for v in value)
    return value


def lit_source(lit: Lit, pool: Constants, axis: PointsAxis | None = None) -> Expr:
    """A literal: numbers in place, small arrays in place, the rest as constants
    (the points ``axis`` named in its shape)."""
    if lit.value.ndim == 0 and precision.is_float32() and lit.value.dtype.kind == "f":
        # a Python float is weak next to a float32 array, but not in a call whose
        # float operands are all literals (np.where(m, 1.0, 0.0) is float64)
        return atom(f"np.float32({number(lit.value[()])})")
    if lit.value.ndim == 0:
        return literal(number(lit.value[()]))
    source = array_source(lit.value, axis=axis, pool=pool)
    if lit.value.size <= INLINE_SIZE or (len(source) <= 40 and "\n" not in source):
        return literal(source)
    return atom(_constant(pool, source))


@dataclass
class GraphCode:
    """Statements computing a graph, the expressions of its outputs, and what the
    statements name besides NumPy."""

    lines: list[str]
    outputs: list[str]
    hoisted: set[Var]
    uses: Uses = NOTHING


HOIST_LIMIT = 1 << 18  # elements (2 MB): larger constant arrays stay per call
CONTIGUOUS_HOIST = 1 << 16
"""Hoisted values of more elements are stored C-contiguous: a view (a transpose,
a slice) that every call reads would be strided on every pass. (Smaller ones
are the size every module hoisted before; they keep their text.)"""


@dataclass(frozen=True)
class Inlining:
    """The inlining policy: which values are hoisted to import time (they depend on
    no argument and are of bounded size), and which are written into their single
    use instead of being named (short enough to keep a line readable)."""

    uses: dict[Var, int]
    hoisted: frozenset[Var]

    @classmethod
    def of(cls, graph: Graph, lead: int | None = None) -> Inlining:
        """Count the uses of each value and find the hoistable equations, in order.

        Values whose leading axis has length ``lead`` (a points variant's points,
        :mod:`difgen.targets.numpy.points`) are never hoisted: that length is only
        known per call."""
        uses: dict[Var, int] = {}
        for a in [*(a for e in graph.eqns for a in e.inputs), *graph.outputs]:
            if isinstance(a, Var):
                uses[a] = uses.get(a, 0) + 1
        hoisted: set[Var] = set()
        for eqn in graph.eqns:
            per_call = lead is not None and eqn.out.shape[:1] == (lead,)
            if not per_call and _hoistable(eqn, hoisted):
                hoisted.add(eqn.out)
        return cls(uses, frozenset(hoisted))

    def inlines(self, var: Var, expr: Expr, axis: PointsAxis | None = None) -> bool:
        """A value used once, whose expression is short, goes into its consumer
        (the points ``axis`` measured as its length's digits: the policy reads
        the same text whatever name the points take)."""
        return self.uses.get(var, 0) == 1 and _length(expr.text, axis) <= INLINE_LENGTH


def _length(text: str, axis: PointsAxis | None) -> int:
    """The length of ``text`` with each whole-name occurrence of the points axis
    counted as the digits of its size."""
    if axis is None:
        return len(text)
    name, found, start = axis.name, 0, text.find(axis.name)
    while start >= 0:
        end = start + len(name)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before in "_.") and not (
            after.isalnum() or after in "_."
        ):
            found += 1
        start = text.find(name, end)
    return len(text) - found * (len(name) - len(str(int(axis))))


def _hoistable(eqn: Any, hoisted: set[Var]) -> bool:
    """An equation whose inputs are constants or hoisted values, of bounded size."""
    if isinstance(eqn.primitive.numpy, Statements):  # its blocks run per call
        return False
    return eqn.out.size <= HOIST_LIMIT and all(
        isinstance(a, Lit) or a in hoisted for a in eqn.inputs
    )


class _Statements:
    """Statement building: each value becomes a name, a pending inline expression
    or a hoisted module value, as the policy decides. ``modules`` collects the
    modules the statements name besides NumPy (one set for a block and the blocks
    inside it)."""

    def __init__(
        self,
        pool: Constants,
        names: dict[Var, Expr],
        modules: set[str] | None = None,
        axis: PointsAxis | None = None,
    ) -> None:
        self.pool = pool
        self.names = names
        self.modules: set[str] = set() if modules is None else modules
        self.axis = axis  # a points variant's points axis, printed by its name
        self.pending: dict[Var, Expr] = {}  # single-use values not yet written out
        self.lines: list[str] = []
        self.counter = 0
        self.loops: dict[Any, list[str]] = {}  # equal loops run once
        self.eqns: tuple[Any, ...] = ()  # the graph being printed (a loop looks ahead)
        self.tapes: dict[Any, str] = {}  # sweeps whose tape a primal loop recorded
        # the last if written: (its test, the line of its else, the line after it)
        self.last_if: tuple[str, int, int] | None = None

    def source(self, a: Any) -> Expr:
        """A literal's source, or a value's pending expression (used up) or name."""
        if isinstance(a, Lit):
            return lit_source(a, self.pool, self.axis)
        if a in self.pending:
            return self.pending.pop(a)
        return self.names[a]

    def form(self, eqn: Any) -> Expr | list[str]:
        """The equation's source form (index arrays in params become constants
        first, then the operands, so module constants are numbered in that order)."""
        params = {
            k: _index_param(symbolic(v, self.axis), self.pool)
            for k, v in eqn.params.as_dict().items()
        }
        avals = [(symbolic(a.shape, self.axis), a.dtype) for a in eqn.inputs]
        form = eqn.primitive.numpy
        assert not isinstance(form, Statements)  # printed by STATEMENTS
        self.modules |= getattr(form, "modules", frozenset())  # as declared
        return form([self.source(a) for a in eqn.inputs], params, avals)

    def _temp(self, var: Var) -> str:
        name = naming.temp(self.counter)
        self.counter += 1
        self.names[var] = atom(name)
        return name

    def hoist(self, var: Var, emitted: Expr | list[str]) -> None:
        """Computed once at import, by the module's setup."""
        if isinstance(emitted, list):
            block = emitted
        elif var.size > CONTIGUOUS_HOIST:
            block = [f"OUT = np.ascontiguousarray({emitted.text})"]
        else:
            block = [f"OUT = {emitted.text}"]
        self.names[var] = atom(self.pool.hoist(block))

    def block(self, var: Var, emitted: list[str]) -> None:
        """Statements that build ``OUT``, under a fresh temporary's name."""
        name = self._temp(var)
        self.lines += [re.sub(r"\bOUT\b", name, line) for line in emitted]

    def assign(self, var: Var, emitted: Expr) -> None:
        self.lines.append(f"{self._temp(var)} = {emitted.text}")

    def inline(self, var: Var, emitted: Expr) -> None:
        self.pending[var] = emitted


def print_graph(
    graph: Graph,
    arg_names: Sequence[str],
    pool: Constants,
    lead: int | None = None,
    axis: PointsAxis | None = None,
) -> GraphCode:
    """Statements for ``graph`` with its inputs bound to ``arg_names``: the policy
    decides where each value goes, the statements are built accordingly (``lead``:
    see :meth:`Inlining.of`; ``axis``: the points axis, printed by its name)."""
    names = {v: atom(n) for v, n in zip(graph.inputs, arg_names)}
    out = _Statements(pool, names, axis=axis)
    policy = _print_eqns(graph, out, lead)
    outputs = [out.source(o).text for o in graph.outputs]
    uses = Uses(modules=frozenset(out.modules))
    return GraphCode(out.lines, outputs, set(policy.hoisted), uses)


def _print_eqns(graph: Graph, out: _Statements, lead: int | None = None) -> Inlining:
    """Each equation of ``graph`` into ``out`` as the inlining policy decides."""
    policy = Inlining.of(graph, lead)
    out.eqns = graph.eqns
    for eqn in graph.eqns:
        if isinstance(eqn.primitive.numpy, Statements):
            STATEMENTS[eqn.primitive.numpy.statement](eqn, out)
            continue
        emitted = out.form(eqn)
        if eqn.out in policy.hoisted:  # depends on no argument: computed at import
            out.hoist(eqn.out, emitted)
        elif isinstance(emitted, list):
            out.block(eqn.out, emitted)
        elif policy.inlines(eqn.out, emitted, out.axis):
            out.inline(eqn.out, emitted)
        else:
            out.assign(eqn.out, emitted)
    return policy


def _print_cond(eqn: Any, out: _Statements) -> None:
    """A branch on a traced value as the user wrote it: a Python ``if``/``else``
    whose blocks compute the branch taken into one temporary.

    Operands are named first (an inlined expression would be evaluated in each
    branch), and a branch result that may share memory with an operand or a module
    constant is copied, as any result of an operation is a new array.
    """
    pred, *operands = [_named(out, a) for a in eqn.inputs]
    branches = eqn.params.as_dict()["branches"]
    name = naming.temp(out.counter)
    out.counter += 1
    blocks = []
    for branch in (branches[1], branches[0]):
        graph = branch.graph
        inner = _Statements(
            out.pool, dict(zip(graph.inputs, operands)), out.modules, out.axis
        )
        inner.counter = out.counter
        policy = _print_eqns(graph, inner)
        out.counter = inner.counter
        result = graph.outputs[0]
        text = inner.source(result).text
        copy = result.shape != () and (
            isinstance(result, Lit) or is_view(graph, result, policy.hoisted)
        )
        value = f"np.array({text})" if copy else text
        blocks.append([*inner.lines, f"{name} = {value}"])
    true, false = _indented(blocks[0]), _indented(blocks[1])
    last = out.last_if
    if last is not None and last[0] == pred.text and last[2] == len(out.lines):
        # the same test as the if just written (one per value the user's branch
        # assigns): one if, as in the user's code
        _, at_else, _ = last
        out.lines[at_else:at_else] = true
        out.lines += false
        out.last_if = (pred.text, at_else + len(true), len(out.lines))
    else:
        out.lines += [f"if {pred.text}:", *true]
        at_else = len(out.lines)
        out.lines += ["else:", *false]
        out.last_if = (pred.text, at_else, len(out.lines))
    out.names[eqn.out] = atom(name)


def _fresh(out: _Statements) -> str:
    name = naming.temp(out.counter)
    out.counter += 1
    return name


def _block(
    graph: Graph, inputs: Sequence[Expr], out: _Statements
) -> tuple[list[str], list[str]]:
    """A sub-graph's statements (its inputs bound to ``inputs``) and the expressions
    of its outputs; temporaries continue ``out``'s numbering."""
    inner = _Statements(
        out.pool, dict(zip(graph.inputs, inputs)), out.modules, out.axis
    )
    inner.counter = out.counter
    _print_eqns(graph, inner)
    out.counter = inner.counter
    return inner.lines, [inner.source(o).text for o in graph.outputs]


def _indented(lines: Sequence[str]) -> list[str]:
    return [textwrap.indent(line, "    ") for line in lines]


def _assign_all(names: Sequence[str], values: Sequence[str]) -> str:
    """``a, b = x, y`` (simultaneous, as a loop's state update must be)."""
    if len(names) == 1:
        return f"{names[0]} = {values[0]}"
    return f"{', '.join(names)} = {', '.join(values)}"


def _while_head(
    cond: Graph, state: Sequence[Expr], consts: Sequence[Expr], out: _Statements
) -> list[str]:
    """``while <test>:``, or a ``while True:`` whose test is computed first."""
    lines, (test,) = _block(cond, [*state, *consts], out)
    if not lines:
        return [f"while {test}:"]
    return ["while True:", *_indented(lines), f"    if not {test}:", "        break"]


def _loop_state(
    eqn: Any, n_state: int, out: _Statements
) -> tuple[list[str], list[Expr]]:
    """Fresh names for a loop's state, assigned their initial values."""
    operands = [_named(out, a) for a in eqn.inputs]
    names = [_fresh(out) for _ in range(n_state)]
    out.lines.append(_assign_all(names, [o.text for o in operands[:n_state]]))
    return names, operands[n_state:]


def _result(out: _Statements, var: Var, name: str) -> None:
    """A loop's result: an array is copied (it may still be an argument)."""
    if var.shape == ():
        out.names[var] = atom(name)
        return
    copy = _fresh(out)
    out.lines.append(f"{copy} = np.array({name})")
    out.names[var] = atom(copy)


def _loop_key(eqn: Any, drop: str) -> tuple[Any, ...]:
    params = tuple((k, v) for k, v in eqn.params if k != drop)
    return (eqn.primitive.name, eqn.inputs, params)


def _print_while(eqn: Any, out: _Statements) -> None:
    """``while`` as the user wrote it: the state in temporaries, the condition
    evaluated at the head, the body computing the next state."""
    params = eqn.params.as_dict()
    key = _loop_key(eqn, "index")
    names = out.loops.get(key)
    if names is None:
        n = params["n_state"]
        names, consts = _loop_state(eqn, n, out)
        state = [atom(m) for m in names]
        record = _records_for(out, eqn, params)
        push: list[str] = []
        if record is not None:  # this loop records a later sweep's tape
            key_s, slots = record
            stack = _fresh(out)
            out.lines.append(f"{stack}: list[Any] = []  # the tape of a sweep below")
            out.modules.add(TYPING)
            picked = [names[k] for k in slots]
            pushed = picked[0] if len(picked) == 1 else f"({', '.join(picked)})"
            push = [f"{stack}.append({pushed})"]
            out.tapes[key_s] = stack
        out.lines += _while_head(params["cond"].graph, state, consts, out)
        lines, new = _block(params["body"].graph, [*state, *consts], out)
        out.lines += _indented([*push, *lines, _assign_all(names, new)])
        out.loops[key] = names
    _result(out, eqn.out, names[params["index"]])


def _print_sweep(eqn: Any, out: _Statements) -> None:
    """A loop's adjoint: the forward loop pushes each state on a list (memory grows
    with the trip count), then a ``for`` over the reversed list applies the body's
    VJP, carrying the state's cotangent and summing the constants' cotangents."""
    params = eqn.params.as_dict()
    key = _loop_key(eqn, "out")
    found = out.loops.get(key)
    if found is None:
        n, m = params["n_state"], params["n_carry"]
        back = params["back"].graph
        nc = len(eqn.inputs) - n - m
        recorded = out.tapes.get(key)
        if recorded is not None:  # the primal loop recorded the tape
            operands = [_named(out, a) for a in eqn.inputs]
            names = [_fresh(out) for _ in range(n)]
            rest, stack = operands[n:], recorded
        else:
            names, rest = _loop_state(eqn, n, out)
            stack = _fresh(out)
        consts, carry0 = rest[:nc], rest[nc:]
        state = [atom(v) for v in names]
        pushed = names[0] if n == 1 else f"({', '.join(names)})"
        every, snapshots = params.get("every"), params.get("snapshots")
        if recorded is not None:
            pass
        elif snapshots is None:
            out.lines.append(f"{stack}: list[Any] = []")
            out.modules.add(TYPING)
        else:  # binomial checkpointing: the initial state, and the trips
            out.lines.append(f"{stack} = {pushed}")
        trips = ""
        if every is not None or snapshots is not None:
            trips = _fresh(out)
            out.lines.append(f"{trips} = 0")
        if recorded is None:
            out.lines += _while_head(params["cond"].graph, state, consts, out)
        lines, new = _block(params["fwd"].graph, [*state, *consts], out)
        if recorded is not None:
            lines = new = []
            push = []
        elif snapshots is not None:
            push = [f"{trips} += 1"]
        elif every is None:
            push = [f"{stack}.append({pushed})"]
        else:  # a snapshot every `every` steps, the trips counted
            push = [
                f"if {trips} % {every} == 0:",
                f"    {stack}.append({pushed})",
                f"{trips} += 1",
            ]
        if recorded is None:
            out.lines += _indented([*push, *lines, _assign_all(names, new)])
        carry = [_fresh(out) for _ in range(m)]
        out.lines.append(_assign_all(carry, [c.text for c in carry0]))
        accs = [_fresh(out) for _ in back.outputs[m:]]
        for name, o in zip(accs, back.outputs[m:]):
            shape = symbolic(o.shape, out.axis)
            zeros = f"np.zeros({shape!r}{precision.float_dtype_arg()})"
            out.lines.append(f"{name} = {'0.0' if o.shape == () else zeros}")
        target = names[0] if n == 1 else ", ".join(names)
        inputs = [*state, *consts, *(atom(c) for c in carry)]
        lines, new = _block(back, inputs, out)
        # The sums first: a constant's cotangent may be the carried one itself
        # (``s = ... + x``), which must be this iteration's, not the next's.
        updates = [f"{a} = {a} + {v}" for a, v in zip(accs, new[m:])]
        updates += [_assign_all(carry, new[:m])] if m else []
        if snapshots is not None:
            out.lines += _revolved(
                out, params["fwd"].graph, names, consts, stack, trips, snapshots
            )
            out.lines += _indented([*lines, *updates])
        elif every is None:
            out.lines.append(f"for {target} in reversed({stack}):")
            out.lines += _indented([*lines, *updates])
        else:
            out.lines += _checkpointed(
                out, params["fwd"].graph, names, consts, stack, trips, every
            )
            out.lines += _indented(_indented([*lines, *updates]))
        found = [*carry, *accs]
        out.loops[key] = found
    _result(out, eqn.out, found[params["out"]])


def _records_for(
    out: _Statements, eqn: Any, params: dict[str, Any]
) -> tuple[Any, list[int]] | None:
    """A later fully taped ``sweep`` of the graph whose forward loop is this loop
    on some of its slots (the same initial values and constants, the condition
    and body restricted to those slots equal by structure): (its key, this loop's
    slots in the sweep's order). This loop then pushes the sweep's tape and the
    sweep runs its backward loop only, as the C target does: one forward pass."""
    from difgen.ad.loops import forward_slots

    later = out.eqns[out.eqns.index(eqn) + 1 :] if eqn in out.eqns else ()
    for other in later:
        form = other.primitive.numpy
        if not isinstance(form, Statements) or form.statement != "for":
            continue
        sp = other.params.as_dict()
        key = _loop_key(other, "out")
        if "every" in sp or "snapshots" in sp or key in out.tapes:
            continue
        if key in out.loops:
            continue
        slots = forward_slots(eqn, other)
        if slots is not None:
            return key, slots
    return None


def _checkpointed(
    out: _Statements,
    fwd: Graph,
    names: Sequence[str],
    consts: Sequence[Expr],
    stack: str,
    trips: str,
    every: int,
) -> list[str]:
    """The head of a checkpointed sweep's backward pass: for each snapshot, last
    first, the states of its segment recomputed from it (every step of a segment
    was taken), then a loop over them in reverse, whose body the caller indents
    twice. The snapshots and one segment are all the states held at a time."""
    k, seg, size = _fresh(out), _fresh(out), _fresh(out)
    state = [atom(v) for v in names]
    lines, new = _block(fwd, [*state, *consts], out)
    pushed = names[0] if len(names) == 1 else f"({', '.join(names)})"
    target = names[0] if len(names) == 1 else ", ".join(names)
    return [
        f"for {k} in range(len({stack}) - 1, -1, -1):",
        f"    {target} = {stack}[{k}]",
        f"    {seg} = [{pushed}]",
        f"    {size} = min({every}, {trips} - {k} * {every})",
        f"    for _ in range({size} - 1):",
        *_indented(_indented([*lines, _assign_all(names, new)])),
        f"        {seg}.append({pushed})",
        f"    for {target} in reversed({seg}):",
    ]


def _revolved(
    out: _Statements,
    fwd: Graph,
    names: Sequence[str],
    consts: Sequence[Expr],
    start: str,
    trips: str,
    snapshots: int,
) -> list[str]:
    """The head of a sweep's backward pass by binomial checkpointing (revolve):
    frames of (state, steps, free snapshots) from the initial state; from each
    frame popped, a snapshot is placed ``C(s + r - 1, s)`` steps in (``r`` the
    least with ``C(s + r, s)`` at least the steps) and the rest goes on with one
    snapshot less, until one step remains, whose VJP the caller's block (indented
    once) applies. At most ``snapshots`` states are held."""
    frames, steps, free, reps, big, at = (_fresh(out) for _ in range(6))
    state = [atom(v) for v in names]
    lines, new = _block(fwd, [*state, *consts], out)
    pushed = names[0] if len(names) == 1 else f"({', '.join(names)})"
    target = names[0] if len(names) == 1 else f"({', '.join(names)})"
    return [
        f"{frames} = [({start}, {trips}, {snapshots - 1})] if {trips} else []",
        f"while {frames}:",
        f"    {target}, {steps}, {free} = {frames}.pop()",
        f"    while {steps} > 1:",
        f"        {reps}, {big}, {at} = 0, 1, 1",
        f"        while {big} < {steps}:",
        f"            {reps} += 1",
        f"            {at}, {big} = {big}, {big} * ({free} + {reps}) // {reps}",
        f"        {frames}.append(({pushed}, {at}, {free}))",
        f"        for _ in range({at}):",
        *_indented(_indented(_indented([*lines, _assign_all(names, new)]))),
        f"        {steps}, {free} = {steps} - {at}, {free} - 1",
    ]


STATEMENTS: dict[str, Callable[[Any, _Statements], None]] = {}
"""The builder of each statement form a declaration names (its ``Statements``)."""


def _named(out: _Statements, a: Any) -> Expr:
    """An operand as a name (or a literal): pending expressions are written out."""
    if isinstance(a, Var) and a in out.pending:
        expr = out.pending.pop(a)
        out.assign(a, expr)
    return out.source(a)


def print_operator(
    op: Operator,
    spec: ModuleSpec,
    ys: tuple[int, ...],
    graph: Graph,
    pool: Constants,
    wrap: dict[int, CsrFormat] | None = None,
) -> Function:
    """One operator as a :class:`Function` of vectorized NumPy code.

    Scalar results are Python floats; array results are fresh arrays (a constant or
    an argument is copied), written into ``out`` when it is given. ``wrap`` maps a
    result's position to a format that wraps it (a sparse result's data into CSR).
    """
    wrap = wrap or {}
    arg_names = [naming.INPUT, *op.seeds, *(c.name for c in spec.contexts)]
    code = print_graph(graph, arg_names, pool)
    body = list(code.lines)
    results = []
    for out, expr in zip(graph.outputs, code.outputs):
        if isinstance(out, Lit) and out.shape == () and precision.is_float32():
            results.append(precision.scalar_result(number(out.value[()])))
        elif isinstance(out, Lit) and out.shape == ():
            results.append(number(out.value[()]))
        elif out.shape == ():
            results.append(precision.scalar_result(expr))
        elif (
            isinstance(out, Lit)
            or out in graph.inputs
            or out in code.hoisted
            or is_view(graph, out, code.hoisted)
        ):
            results.append(f"np.array({expr})")
        else:
            results.append(expr)
    last_raw = results[-1]
    results = [wrap[i].format(r) if i in wrap else r for i, r in enumerate(results)]
    uses = code.uses | signature_uses(op, spec)
    uses |= CsrFormat.FORMAT_USES if wrap else NOTHING
    if sparse_out(op, spec) and len(results) - 1 in wrap:  # fills a CSR out= in place
        body += csr_out_returns(op, results, last_raw, wrap[len(results) - 1])
        params, annotation = signature(op, spec, ys)
        doc = docstring(op, spec, ys)
        function = Function(
            op.name, params, annotation, doc, tuple(body), numpy_floats=True
        )
        return function.using(uses | CsrFormat.OUT_CHECK_USES)
    dense_array = graph.outputs[-1].shape != () and len(results) - 1 not in wrap
    into_out = op.takes_out and dense_array
    last = None
    if into_out or (len(results) == 1 and dense_array):  # typed, for the reader
        last = LastResult(f": {precision.array_type()} = {results[-1]}", naming.RESULT)
    body += returns(
        op.results, results, last, into_out, graph.outputs[-1].shape, op.name
    )
    params, annotation = signature(op, spec, ys)
    doc = docstring(op, spec, ys)
    function = Function(
        op.name, params, annotation, doc, tuple(body), numpy_floats=True
    )
    return function.using(uses)


def csr_out_returns(
    op: Operator, sources: list[str], data: str, fmt: CsrFormat
) -> list[str]:
    """A sparse last result written into a caller's CSR ``out`` (its ``data``, the
    pattern checked by ``_check_csr_out``), as the compiled operator does: its
    caller reports ``fmt``'s :attr:`~CsrFormat.FORMAT_USES` and
    :attr:`~CsrFormat.OUT_CHECK_USES`."""
    kinds = op.results
    head = "".join(f"{kind}, " for kind in kinds[:-1])
    lines = [f"{kind} = {source}" for kind, source in zip(kinds[:-1], sources[:-1])]
    return [
        *lines,
        f"{naming.RESULT} = {data}",
        f"if {naming.OUT} is None:",
        f"    return {head}{fmt.format(naming.RESULT)}",
        f"{fmt.out_check(naming.OUT)}[...] = {fmt.data(naming.RESULT)}",
        f"return {head}{naming.OUT}",
    ]


def is_view(graph: Graph, atom: Any, hoisted: AbstractSet[Var] = frozenset()) -> bool:
    """Whether ``atom`` may share memory with an argument or a module constant."""
    producer = {e.out: e for e in graph.eqns}
    while isinstance(atom, Var) and atom in producer and atom not in hoisted:
        eqn = producer[atom]
        if not eqn.primitive.view:
            return False
        atom = eqn.inputs[0]
    return True


STATEMENTS.update({"if": _print_cond, "while": _print_while, "for": _print_sweep})
