"""Vectorized NumPy statements from a Graph: one statement per equation.

Each equation is printed with its primitive's ``emit`` form. A value used once is
inlined into its consumer when it is short (parenthesized unless it is an atom: a
name, a call, a subscript), so the code reads like hand-written NumPy. Constants
are printed compactly and never grow with the number of elements when they have
structure: uniform arrays as ``np.full``/``np.zeros``, integer runs (index arrays,
``np.arange``-like data) as ``np.arange`` pieces; larger ones become module constants
``C0, C1...`` shared by all functions of the module.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from difgen.config import ModuleSpec
from difgen.core.ir import FrozenArray, Graph, Lit, Var
from difgen.emit import naming
from difgen.emit.render import Constants, Function
from difgen.emit.signatures import docstring, signature
from difgen.operators import Operator

INLINE_SIZE = 8  # arrays up to this many elements are written in place
INLINE_LENGTH = 72  # a single-use expression longer than this gets its own line
MAX_RUNS = 4  # integer arrays made of at most this many arange runs print as such


def _constant(pool: Constants, source: str) -> str:
    """A module constant ``C<n>`` with this source (shared when equal)."""
    return pool.add(source, naming.const(len(pool.items)))


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


def _roll_of_arange(flat: np.ndarray) -> int | None:
    """The shift s if ``flat`` is ``np.roll(np.arange(len(flat)), s)``."""
    n = len(flat)
    if n < 2 or flat.dtype.kind not in "iu" or sorted(flat.tolist()) != list(range(n)):
        return None
    shift = (n - int(flat[0])) % n
    return shift if np.array_equal(flat, np.roll(np.arange(n), shift)) else None


def _arange(runs: list[tuple[int, int, int]], as_float: bool) -> str:
    dtype = ", dtype=np.float64" if as_float else ""
    parts = []
    for start, step, length in runs:
        stop = start + step * length
        if step == 1:
            args = f"{start}, {stop}" if start else f"{stop}"
        else:
            args = f"{start}, {stop}, {step}"
        parts.append(f"np.arange({args}{dtype})")
    return parts[0] if len(parts) == 1 else f"np.concatenate(({', '.join(parts)}))"


def array_source(value: np.ndarray) -> str:
    """Compact source text for a constant array (its size does not show)."""
    shape = tuple(value.shape)
    is_bool = value.dtype == np.bool_
    is_int = value.dtype.kind in "iu"
    flat = value.ravel()
    if not flat.size:  # np.array([]) would lose the shape
        dtype = ", dtype=bool" if is_bool else ", dtype=np.int64" if is_int else ""
        return f"np.zeros({shape!r}{dtype})"
    if np.all(flat == flat[0]):
        v = flat[0]
        if is_bool:
            return f"np.full({shape!r}, {number(v)})"
        if is_int:
            return f"np.full({shape!r}, {int(v)})"
        if v == 0 and not np.signbit(v):
            return f"np.zeros({shape!r})"
        return f"np.ones({shape!r})" if v == 1 else f"np.full({shape!r}, {number(v)})"
    reshape = "" if value.ndim == 1 else f".reshape({shape!r})"
    if is_int and value.ndim == 1 and (shift := _roll_of_arange(flat)) is not None:
        return f"np.roll(np.arange({flat.size}), {shift})"
    if not is_bool and flat.size > INLINE_SIZE and (runs := _runs(flat)) is not None:
        return _arange(runs, as_float=not is_int) + reshape
    item = (lambda v: str(int(v))) if is_int else number
    if flat.size <= INLINE_SIZE:
        return f"np.array({_nested(value, item)})"
    if is_int and (periodic := _periodic(flat)) is not None:
        return periodic + reshape
    return _wrapped([item(v) for v in flat], reshape)


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
    parts = _periodic_parts(flat.astype(np.int64), depth=0)
    if parts is None or not any(p.startswith("(") for p in parts):
        return None
    return parts[0] if len(parts) == 1 else f"np.concatenate(({', '.join(parts)}))"


def _periodic_parts(values: np.ndarray, depth: int) -> list[str] | None:
    n = len(values)
    if n == 0:
        return []
    best: tuple[int, int, int, int] | None = None  # covered, period, start, stop
    if n >= MIN_RUN and depth < 16:
        for p in range(1, min(MAX_PERIOD, n // 2, MAX_WORK // n) + 1):
            steps = values[p:] - values[:-p]
            bounds = np.concatenate(([0], np.flatnonzero(np.diff(steps)) + 1,
                                     [len(steps)]))  # fmt: skip
            k = int(np.argmax(np.diff(bounds)))
            start, stop = int(bounds[k]), int(bounds[k + 1])
            covered = stop - start + p
            if stop - start >= p and covered >= MIN_RUN:
                if best is None or covered > best[0]:
                    best = (covered, p, start, stop)
    if best is None:
        if n > MAX_LITERAL:
            return None
        return [f"np.array({values.tolist()!r})"]
    covered, p, start, stop = best
    left = _periodic_parts(values[:start], depth + 1)
    right = _periodic_parts(values[start + covered :], depth + 1)
    if left is None or right is None:
        return None
    shift, block = int(values[start + p] - values[start]), values[start : start + p]
    reps = -(-covered // p)
    run = (f"(np.array({block.tolist()!r}) + {shift} * np.arange({reps})[:, None])"
           f".ravel()[:{covered}]")  # fmt: skip
    return [*left, run, *right]


def _wrapped(items: list[str], suffix: str) -> str:
    """A long flat literal, a few numbers per line, kept so by black (fmt: skip)."""
    lines, line = [], ""
    for item in items:
        if line and len(line) + len(item) + 2 > 84:
            lines.append(line + ",")
            line = ""
        line = f"{line}, {item}" if line else item
    lines.append(line + ",")
    body = "\n".join(f"    {text}" for text in lines)
    return f"np.array([\n{body}\n]){suffix}  # fmt: skip"


def csr_format(
    kind: str,
    indices: np.ndarray,
    indptr: np.ndarray,
    shape: tuple[int, int],
    pool: Constants,
) -> str:
    """A format wrapping a result's nonzeros (``{}``) into a CSR array whose layout
    is a pair of module constants, ``<KIND>_INDICES`` and ``<KIND>_INDPTR``."""
    name_i = pool.add(array_source(indices), f"{kind.upper()}_INDICES")
    name_p = pool.add(array_source(indptr), f"{kind.upper()}_INDPTR")
    return f"sp.csr_array(({{}}, {name_i}, {name_p}), shape={shape!r})"


class _Named(FrozenArray):
    """A constant index array that prints as its source (inline or a constant name)."""

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
        source = array_source(value.value)
        if len(source) <= 40 and "\n" not in source:
            return _Named(value, source)
        return _Named(value, _constant(pool, array_source(value.value)))
    if isinstance(value, tuple):
        return tuple(_index_param(v, pool) for v in value)
    return value


def lit_source(lit: Lit, pool: Constants) -> str:
    """A literal: numbers in place, small arrays in place, the rest as constants."""
    if lit.value.ndim == 0:
        return number(lit.value[()])
    source = array_source(lit.value)
    if lit.value.size <= INLINE_SIZE or (len(source) <= 40 and "\n" not in source):
        return source
    return _constant(pool, source)


# ---------------------------------------------------------------- expressions
# Python's operator precedence, lowest first; an atom (name, call, subscript) binds
# tightest. Binary operators are emitted with spaces around them.
_CMP, _ADD, _MUL, _UNARY, _POW, _ATOM = 1, 2, 3, 4, 5, 9
_BINARY = {
    "<": _CMP, "<=": _CMP, ">": _CMP, ">=": _CMP, "==": _CMP, "!=": _CMP,
    "+": _ADD, "-": _ADD, "*": _MUL, "/": _MUL, "@": _MUL, "%": _MUL, "**": _POW,
}  # fmt: skip
_TOKEN = re.compile(r" (<=|>=|==|!=|\*\*|[-+*/@%<>]) ")


def precedence(expr: str) -> int:
    """Precedence of the loosest top-level operator of ``expr`` (atoms: highest)."""
    depth, level = 0, _ATOM
    masked = []
    for ch in expr:
        depth += ch in "([{"
        depth -= ch in ")]}"
        masked.append(ch if depth == 0 or ch in ")]}" else "x")
    flat = "".join(masked)
    for match in _TOKEN.finditer(flat):
        level = min(level, _BINARY[match.group(1)])
    if flat.startswith("-") and level > _UNARY:
        level = _UNARY
    return level


def is_atom(expr: str) -> bool:
    """Whether ``expr`` needs no parentheses anywhere (a name, call or subscript)."""
    return precedence(expr) == _ATOM


def _operator_before(text: str) -> tuple[int, bool] | None:
    """(precedence, is_unary) of the operator just left of a position, if any."""
    before = text.rstrip()
    if not before or before[-1] in "([,:=":
        return None
    for token, level in sorted(_BINARY.items(), key=lambda t: -len(t[0])):
        if before.endswith(token):
            rest = before[: -len(token)].rstrip()
            unary = token == "-" and (not rest or rest[-1] in "([,:=")
            return (_UNARY, True) if unary else (level, False)
    return (_ATOM, False)  # an attribute or call follows: needs an atom


def _operator_after(text: str) -> int | None:
    after = text.lstrip()
    if not after or after[0] in ")],:":
        return None
    for token, level in sorted(_BINARY.items(), key=lambda t: -len(t[0])):
        if after.startswith(token):
            return level
    return _ATOM  # ".T", "[...]", "(...)": only an atom may stand there


def _needs_parens(expr: str, before: str, after: str) -> bool:
    """Parenthesize unless Python would group ``expr`` the same way without them.

    A left operand keeps equal-precedence grouping (``a - b + c``); a right operand
    does not (``a - (b - c)``), nor does a left operand of ``**``, which groups to
    the right; a unary minus takes atoms only, for readability.
    """
    level = precedence(expr)
    if level == _ATOM:
        return False
    left = _operator_before(before)
    right = _operator_after(after)
    if left is not None:
        left_level, unary = left
        if unary or level <= left_level:
            return True
    return right is not None and (level < right or level == right == _POW)


def _placeholder(i: int) -> str:
    return f"__arg{i}__"


def _fill(template: str, exprs: Sequence[str]) -> str:
    """Put ``exprs`` into a template, parenthesized where Python's grouping needs it."""
    out = template
    for i, expr in enumerate(exprs):
        token = _placeholder(i)
        while token in out:
            start = out.index(token)
            end = start + len(token)
            wrap = _needs_parens(expr, out[:start], out[end:])
            out = out[:start] + (f"({expr})" if wrap else expr) + out[end:]
    return out


def _rolled_axis(
    index: tuple[Any, ...], shape: tuple[int, ...]
) -> tuple[int, int] | None:
    """(axis, shift) if ``index`` is ``roll(arange(n), shift)`` on one whole axis."""
    full = ("slice", None, None, None)
    arrays = [i for i, item in enumerate(index) if isinstance(item, FrozenArray)]
    if len(arrays) != 1 or any(
        item != full for i, item in enumerate(index) if i != arrays[0]
    ):
        return None
    axis = arrays[0]
    values = index[axis].value
    if values.ndim != 1 or axis >= len(shape) or len(values) != shape[axis]:
        return None
    shift = _roll_of_arange(values)
    if shift is None:
        return None
    return axis, shift - len(values) if shift > len(values) // 2 else shift


def _roll_source(shift: int, axis: int, ndim: int) -> str:
    where = "" if ndim == 1 else f", axis={axis}"
    return f"np.roll({_placeholder(0)}, {shift}{where})"


def _roll_getitem(eqn: Any) -> str | None:
    """``x[..., roll(arange(n), s), ...]`` over one whole axis is ``np.roll(x, s)``."""
    shape = eqn.inputs[0].shape
    rolled = _rolled_axis(eqn.params.as_dict()["index"], shape)
    return None if rolled is None else _roll_source(rolled[1], rolled[0], len(shape))


def _roll_scatter(eqn: Any) -> str | None:
    """Its transpose, a scatter through such an index, is ``np.roll(v, -s)``."""
    params = eqn.params.as_dict()
    shape = tuple(params["shape"])
    if eqn.inputs[0].shape != shape:
        return None
    rolled = _rolled_axis(params["index"], shape)
    return None if rolled is None else _roll_source(-rolled[1], rolled[0], len(shape))


def _full_reduction(eqn: Any) -> str | None:
    """A reduction over every axis: the ufunc's reduce, without np.sum's wrapper."""
    if len(eqn.params.as_dict()["axes"]) != eqn.inputs[0].ndim:
        return None
    ufunc = {"reduce_sum": "add", "reduce_max": "maximum", "reduce_min": "minimum"}
    name = ufunc.get(eqn.primitive.name, "multiply")
    axis = "" if eqn.inputs[0].ndim == 1 else ", axis=None"  # 1-D: the default axis
    return f"np.{name}.reduce({_placeholder(0)}{axis})"


PEEPHOLES = {
    "getitem": _roll_getitem,
    "scatter_add": _roll_scatter,
    "reduce_sum": _full_reduction,
    "reduce_max": _full_reduction,
    "reduce_min": _full_reduction,
    "reduce_prod": _full_reduction,
}
"""Source forms that need the input shapes (which ``Primitive.emit`` does not see)."""


@dataclass
class GraphCode:
    """Statements computing a graph, and the expressions of its outputs."""

    lines: list[str]
    outputs: list[str]
    hoisted: set[Var]


def emit_graph(graph: Graph, arg_names: Sequence[str], pool: Constants) -> GraphCode:
    """Statements for ``graph`` with its inputs bound to ``arg_names``."""
    names: dict[Var, str] = dict(zip(graph.inputs, arg_names))
    pending: dict[Var, str] = {}  # single-use values not yet written out
    uses: dict[Var, int] = {}
    for eqn in graph.eqns:
        for a in eqn.inputs:
            if isinstance(a, Var):
                uses[a] = uses.get(a, 0) + 1
    for o in graph.outputs:
        if isinstance(o, Var):
            uses[o] = uses.get(o, 0) + 1
    lines: list[str] = []
    counter = 0
    hoisted: set[Var] = set()

    def source(atom: Any) -> str:
        if isinstance(atom, Lit):
            return lit_source(atom, pool)
        if atom in pending:
            return pending.pop(atom)
        return names[atom]

    for eqn in graph.eqns:
        peephole = PEEPHOLES.get(eqn.primitive.name)
        emitted = peephole(eqn) if peephole is not None else None
        if emitted is None:
            params = {k: _index_param(v, pool) for k, v in eqn.params.as_dict().items()}
            placeholders = [_placeholder(i) for i in range(len(eqn.inputs))]
            emitted = eqn.primitive.emit(placeholders, params)
        if _hoistable(eqn, hoisted):  # depends on no argument: computed at import
            args = [source(a) for a in eqn.inputs]
            block = emitted if isinstance(emitted, list) else [f"OUT = {emitted}"]
            names[eqn.out] = pool.hoist([_fill(line, args) for line in block])
            hoisted.add(eqn.out)
            continue
        args = [source(a) for a in eqn.inputs]
        if isinstance(emitted, list):  # statements that build OUT
            name = naming.temp(counter)
            counter += 1
            lines += [re.sub(r"\bOUT\b", name, _fill(s, args)) for s in emitted]
            names[eqn.out] = name
            continue
        expr = _fill(emitted, args)
        if uses.get(eqn.out, 0) == 1 and len(expr) <= INLINE_LENGTH:
            pending[eqn.out] = expr
            continue
        name = naming.temp(counter)
        counter += 1
        lines.append(f"{name} = {expr}")
        names[eqn.out] = name
    outputs = [source(o) for o in graph.outputs]
    return GraphCode(lines, outputs, hoisted)


HOIST_LIMIT = 1 << 16  # elements (512 KB): larger constant arrays stay per call


def _hoistable(eqn: Any, hoisted: set[Var]) -> bool:
    """An equation whose inputs are constants or hoisted values, of bounded size."""
    return eqn.out.size <= HOIST_LIMIT and all(
        isinstance(a, Lit) or a in hoisted for a in eqn.inputs
    )


def emit_operator(
    op: Operator,
    spec: ModuleSpec,
    ys: tuple[int, ...],
    graph: Graph,
    pool: Constants,
    wrap: dict[int, str] | None = None,
) -> Function:
    """One operator as a :class:`Function` of vectorized NumPy code.

    Scalar results are Python floats; array results are fresh arrays (a constant or
    an argument is copied), written into ``out`` when it is given. ``wrap`` maps a
    result's position to a format that wraps it (a sparse result's data into CSR).
    """
    wrap = wrap or {}
    arg_names = [naming.INPUT, *op.seeds, *(c.name for c in spec.contexts)]
    code = emit_graph(graph, arg_names, pool)
    body = list(code.lines)
    results = []
    for atom, expr in zip(graph.outputs, code.outputs):
        if isinstance(atom, Lit) and atom.shape == ():
            results.append(number(atom.value[()]))
        elif atom.shape == ():
            results.append(f"float({expr})")
        elif (
            isinstance(atom, Lit)
            or atom in graph.inputs
            or atom in code.hoisted
            or _is_view(graph, atom, code.hoisted)
        ):
            results.append(f"np.array({expr})")
        else:
            results.append(expr)
    results = [wrap[i].format(r) if i in wrap else r for i, r in enumerate(results)]
    if op.takes_out and graph.outputs[-1].shape != () and len(results) - 1 not in wrap:
        head = [f"{kind}, " for kind in op.results[:-1]]
        for kind, expr in zip(op.results[:-1], results[:-1]):
            body.append(f"{kind} = {expr}")
        body.append(f"{naming.RESULT}: NDArray[np.float64] = {results[-1]}")
        body.append(f"if {naming.OUT} is None:")
        body.append(f"    return {''.join(head)}{naming.RESULT}")
        body.append(f"{naming.OUT}[...] = {naming.RESULT}")
        body.append(f"return {''.join(head)}{naming.OUT}")
    elif len(results) == 1 and graph.outputs[0].shape != () and 0 not in wrap:
        body.append(f"{naming.RESULT}: NDArray[np.float64] = {results[0]}")
        body.append(f"return {naming.RESULT}")
    else:
        body.append("return " + ", ".join(results))
    params, returns = signature(op, spec, ys)
    return Function(op.name, params, returns, docstring(op, spec, ys), tuple(body))


def _is_view(graph: Graph, atom: Any, hoisted: set[Var] = frozenset()) -> bool:
    """Whether ``atom`` may share memory with an argument or a module constant."""
    producer = {e.out: e for e in graph.eqns}
    while isinstance(atom, Var) and atom in producer and atom not in hoisted:
        eqn = producer[atom]
        if not eqn.primitive.view:
            return False
        atom = eqn.inputs[0]
    return True
