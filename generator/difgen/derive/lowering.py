"""The SymPy lowering: a graph evaluated on object arrays of SymPy expressions.

Both the symbolic derivation (:mod:`difgen.derive.symbolic`, which differentiates the
expressions) and the straight-line printers (:mod:`difgen.targets.python.printer`,
:mod:`difgen.targets.c.extension`, which print a trace-backend graph as scalar code)
lower graphs through this module, so it imports nothing that prints.

Values are lowered *exactly* (:func:`lower` with ``exact``): every operation is kept as
an inert node (:func:`inert`) that neither SymPy's evaluation nor ``cse`` can simplify,
so the printed code performs the graph's own operations in its order. Expressions that
are differentiated are lowered plainly and take their simplest form (:func:`simplest`).

Every step runs under a size budget measured before it starts, in nodes (never
seconds), so a config always gives the same bytes: :func:`expression_size` estimates
the largest result tree from the graph alone, and :func:`lower` stops with
:class:`ExpressionTooLarge` as soon as an element outgrows ``EXPRESSION_LIMIT``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp

from difgen import floats, naming
from difgen.core.ir import Graph, Lit, Var
from difgen.derive.sizes import EXPRESSION_LIMIT as EXPRESSION_LIMIT
from difgen.derive.sizes import ExpressionTooLarge as ExpressionTooLarge
from difgen.derive.sizes import expression_size as expression_size
from difgen.derive.sizes import fan_in as fan_in
from difgen.derive.sparsity import csr_layout

EXPAND_LIMIT = 400  # try the expanded form only below this many operations


EXPANDED_TERMS_LIMIT = (
    400  # ... and only when the expansion has at most this many terms
)


class Sizes:
    """Tree sizes of SymPy expressions (nodes, counting a shared subexpression once
    per use), memoized so that measuring a DAG costs time linear in its nodes."""

    def __init__(self) -> None:
        self._memo: dict[Any, int] = {}

    def __call__(self, expr: Any) -> int:
        args = getattr(expr, "args", ())
        if not args:
            return 1
        known = self._memo.get(expr)
        if known is None:
            known = 1 + sum(self(a) for a in args)
            self._memo[expr] = known
        return known


def expanded_terms(expr: Any, memo: dict[Any, int] | None = None) -> int:
    """An upper estimate of the terms ``sp.expand(expr)`` produces, without expanding.

    A product multiplies its factors' term counts, a power ``n`` (or ``-n``, whose
    denominator is expanded, or a fraction above ``n``) of a sum of ``k`` terms has
    ``C(n + k - 1, k - 1)``, and a function keeps one term
    but expands its arguments (the largest of them counts). Expansion is exponential
    in the nesting of products of sums: this is how :func:`simplest` refuses it
    before starting.
    """
    memo = {} if memo is None else memo
    args = getattr(expr, "args", ())
    if not args:
        return 1
    known = memo.get(expr)
    if known is not None:
        return known
    parts = [expanded_terms(a, memo) for a in args]
    if expr.is_Add:
        terms = sum(parts)
    elif expr.is_Mul:
        terms = math.prod(parts)
    elif expr.is_Pow and expr.exp.is_Rational and abs(expr.exp) >= 1:
        # (a + b)**-3 expands its denominator, (a + b)**(5/2) its square
        n, k = int(abs(expr.exp)), parts[0]
        terms = math.comb(n + k - 1, k - 1) if n < 64 else 2**64
    else:
        terms = max(parts)
    terms = min(terms, 2**64)
    memo[expr] = terms
    return terms


def number(value: Any) -> sp.Expr:
    """A constant as an exact SymPy number when it is a short decimal, else a Float."""
    if isinstance(value, (bool, np.bool_)):
        return sp.true if value else sp.false
    value = float(value)
    if not math.isfinite(value):
        return sp.Symbol(floats.constant_name(value), real=True)
    if value.is_integer() and abs(value) < 2**53:
        return sp.Integer(int(value))
    frac = Fraction(repr(value))
    if frac.denominator <= 10**6:
        return sp.Rational(frac.numerator, frac.denominator)
    return sp.Float(value, 17)


def symbols(base: str, shape: tuple[int, ...], batch: int | None = None) -> np.ndarray:
    """An object array of real symbols named like the unpacked elements."""
    if shape == () and batch is None:
        return np.asarray(sp.Symbol(base, real=True), dtype=object)
    flat = [
        sp.Symbol(naming.element(base, i, batch), real=True)
        for i in range(int(np.prod(shape, dtype=np.int64)))
    ]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(shape)


def lower(
    graph: Graph,
    args: list[np.ndarray],
    exact: bool = False,
    limit: int | None = EXPRESSION_LIMIT,
) -> list[np.ndarray]:
    """Evaluate the graph on object arrays of SymPy expressions.

    ``exact`` builds them unevaluated: SymPy then keeps the graph's own operations
    (``x - x``, ``x / x``, ``log(exp(x))``) instead of simplifying them into a
    value that differs from NumPy's where x is NaN, infinite or zero. Values are
    lowered exactly; only expressions that are differentiated are not.

    Raises :class:`ExpressionTooLarge` as soon as an element's tree exceeds
    ``limit`` nodes (None: no limit), before SymPy's quadratic flattening of
    ever larger sums makes the lowering itself the slow step.
    """
    if exact:
        with sp.evaluate(False):
            memo: dict[Any, Any] = {}  # shared: the results share subexpressions
            return [
                np.vectorize(lambda e: inert(e, memo), otypes=[object])(r)
                for r in lower(graph, args, limit=limit)
            ]
    env: dict[Var, np.ndarray] = dict(zip(graph.inputs, args))
    sizes = Sizes()

    def read(atom: Any) -> np.ndarray:
        if isinstance(atom, Lit):
            flat = [number(v) for v in atom.value.ravel()]
            out = np.empty(len(flat), dtype=object)
            out[:] = flat
            return out.reshape(atom.shape)
        return env[atom]

    for eqn in graph.eqns:
        args = [read(a) for a in eqn.inputs]
        if eqn.out.dtype != "bool" and eqn.primitive.name != "where":
            # Booleans in arithmetic ((x > c) * x) count as 1 and 0, as in NumPy.
            args = [
                _as_number(v) if a.dtype == "bool" else v
                for a, v in zip(eqn.inputs, args)
            ]
        value = eqn.primitive.lower_sympy(*args, **eqn.params.as_dict())
        env[eqn.out] = _as_object(value, eqn.out.shape)
        if limit is not None:
            largest = max((sizes(e) for e in env[eqn.out].flat), default=1)
            if largest > limit:
                raise ExpressionTooLarge(
                    f"{eqn.primitive.name} makes an expression of {largest} nodes "
                    f"(limit {limit})"
                )
    return [read(out) for out in graph.outputs]


def _as_number(conditions: np.ndarray) -> np.ndarray:
    """Conditions as the numbers NumPy makes of booleans: 1 where true, else 0."""
    out = np.empty(conditions.shape, dtype=object)
    for index in np.ndindex(*conditions.shape):
        c = conditions[index]
        out[index] = sp.Piecewise((sp.S.One, c), (sp.S.Zero, True))
    return out


def _as_object(value: Any, shape: tuple[int, ...]) -> np.ndarray:
    arr = np.asarray(value, dtype=object)
    if arr.shape != shape:
        arr = np.broadcast_to(arr, shape)
    out = np.empty(shape, dtype=object)
    out[...] = arr
    return out


def simplest(expr: sp.Expr, sizes: Sizes | None = None) -> sp.Expr:
    """The cheaper (by operation count) of an expression and its expansion.

    Both steps are bounded before they start: ``count_ops`` walks the tree, so an
    expression over ``EXPRESSION_LIMIT`` nodes is kept as it is (``cse`` will
    share its repeated parts), and the expansion is tried only when its estimated
    term count (:func:`expanded_terms`) is small.
    """
    expr = sp.sympify(expr)
    if expr.is_number or expr.is_Symbol:
        return expr
    if (sizes or Sizes())(expr) > EXPRESSION_LIMIT:
        return expr
    if expr.has(sp.exp):
        # expand moves exp(-a) into an expanded denominator: exp(-a) / (1 +
        # exp(-a))**2 becomes 1 / (exp(a) + 2 + exp(-a)), which overflows (inf,
        # and inf / inf = NaN in its derivative) where the original is finite
        return expr
    best, cost = expr, sp.count_ops(expr)
    if cost <= EXPAND_LIMIT and expanded_terms(expr) <= EXPANDED_TERMS_LIMIT:
        expanded = sp.expand(expr)
        expanded_cost = sp.count_ops(expanded)
        if expanded_cost < cost:
            best = expanded
    return best


def simplest_all(exprs: np.ndarray) -> np.ndarray:
    """:func:`simplest` of each element of an object array."""
    if not exprs.size:
        return exprs
    sizes = Sizes()  # shared: the elements share subexpressions
    return np.vectorize(lambda e: simplest(e, sizes), otypes=[object])(exprs)


INERT_PREFIX = "Exact__"
"""Name prefix of the inert heads that keep an exactly lowered operation as it is."""


_INERT: dict[str, Any] = {}


def inert(expr: Any, memo: dict[Any, Any] | None = None) -> Any:
    """``expr`` (built unevaluated) with every arithmetic operation and elementary
    function replaced by an inert function of the same name.

    Nothing rebuilds an inert node into a simpler one: ``cse`` and every other
    SymPy step that re-evaluates expressions would otherwise turn ``x - x`` into 0
    and ``log(exp(x))`` into ``x``. The printer prints an inert node as the
    operation it stands for (:data:`INERT_PREFIX`, ``original``).

    ``memo`` maps each subexpression already converted to its result: lowered
    expressions share subexpressions (a loop reuses its state), and without it the
    walk visits each shared node once per path to it, exponentially many times.
    Pass one dict for all the elements of a result to share their common parts too.
    """
    expr = sp.sympify(expr)
    if not expr.args:
        return expr
    if memo is None:
        memo = {}
    done = memo.get(expr)
    if done is not None:
        return done
    if _is_division(expr):  # one head: cse must not share 1/b and multiply by it
        result = sp.Function(DIVISION)(*(inert(a, memo) for a in _operands(expr)))
        memo[expr] = result
        return result
    args = [inert(a, memo) for a in expr.args]
    func = expr.func
    if func in (sp.Add, sp.Mul, sp.Pow) or (
        isinstance(func, sp.FunctionClass)
        and issubclass(func, sp.Function)
        and not func.__name__.startswith(INERT_PREFIX)
        and func not in (sp.Max, sp.Min, sp.Piecewise)
    ):
        name = INERT_PREFIX + func.__name__
        _INERT.setdefault(name, func)
        result = sp.Function(name)(*args)
    else:
        result = func(*args)
    memo[expr] = result
    return result


DIVISION = INERT_PREFIX + "Division"
"""The inert head of ``a / b``, printed ``_div(a, b)``."""


def _is_division(expr: Any) -> bool:
    """Whether ``expr`` is ``a / b`` as SymPy builds it unevaluated: ``a * b**-1``."""
    if expr.func is not sp.Mul or len(expr.args) != 2:
        return False
    reciprocal = expr.args[1]
    return bool(reciprocal.is_Pow and reciprocal.exp == -1)


def _operands(expr: Any) -> tuple[Any, Any]:
    """``(a, b)`` of a division ``a * b**-1``."""
    return expr.args[0], expr.args[1].base


def _divide(a: Any, b: Any, evaluate: bool = False) -> Any:
    """``a / b`` unevaluated: the operation :data:`DIVISION` stands for.

    A division is kept whole rather than as ``a * (1 / b)``: ``cse`` would share
    the reciprocal of divisions by one constant and multiply by it, and
    ``0.9 * (1 / 10)`` is not ``0.9 / 10`` in floats.
    """
    return sp.Mul(a, sp.Pow(b, -1, evaluate=evaluate), evaluate=evaluate)


_INERT[DIVISION] = _divide


def is_div(expr: Any) -> bool:
    """Whether ``expr`` is an inert division (:data:`DIVISION`)."""
    return getattr(expr.func, "__name__", "") == DIVISION


def plain(expr: Any) -> Any:
    """``expr`` with every inert node replaced, recursively, by the unevaluated
    operation it stands for (to count operations, not to print)."""
    if not getattr(expr, "args", ()):
        return expr
    args = [plain(a) for a in expr.args]
    func = _INERT.get(getattr(expr.func, "__name__", ""))
    return func(*args, evaluate=False) if func else expr.func(*args)


def original(expr: Any) -> Any:
    """The unevaluated operation an inert node stands for, or None if not inert."""
    func = _INERT.get(getattr(expr.func, "__name__", ""))
    return None if func is None else func(*expr.args, evaluate=False)


@dataclass(frozen=True)
class SparseResult:
    """A CSR result: expressions of the structural nonzeros, pattern fixed at build."""

    data: np.ndarray  # 1-D object array, row-major order of the nonzeros
    indices: np.ndarray
    indptr: np.ndarray
    shape: tuple[int, int]

    @classmethod
    def from_dense(cls, dense: np.ndarray, shape: tuple[int, int]) -> SparseResult:
        """Keep the entries that are not identically zero."""
        matrix = dense.reshape(shape)
        mask = np.array(
            [[sp.sympify(e).is_zero is not True for e in row] for row in matrix],
            dtype=bool,
        ).reshape(matrix.shape)
        data = np.empty(int(mask.sum()), dtype=object)
        data[:] = list(matrix[mask])  # row-major: the CSR order
        indices, indptr = csr_layout(mask)
        return cls(data, indices, indptr, matrix.shape)

    @property
    def size(self) -> int:
        return int(self.data.size)

    def ravel(self) -> np.ndarray:
        return self.data
