"""The SymPy backend: Graph -> SymPy expressions -> diff -> simplify -> cse -> code.

Every array is scalarized: the input, contexts and seeds are unpacked into one
symbol per element, each primitive is evaluated on object arrays of expressions
(``Primitive.lower_sympy``), results are differentiated symbolically, each result
expression takes the cheapest of its plain and expanded forms, and one ``cse`` over all
results of an operator gives straight-line code on Python floats. Best for small
functions, where it reaches the hand-written floor.

Every symbolic step runs under a size budget, measured before the step (SymPy walks
expressions as trees, so a step's cost follows the tree, not the graph): the graph
is not lowered when its results would be large trees (a loop that reuses its
state), its max/min reductions long or its matrix factorizations larger than 3 x 3
(:func:`symbolic_reason`, from the graph alone); lowering stops when an element
grows past the limit; an operator's derivatives are checked as a whole
(:func:`check_results`); and ``simplest`` counts and expands only small
expressions whose expansion is small (:func:`expanded_terms`). Over a budget,
:class:`ExpressionTooLarge` is raised and the pipeline builds the module from the
graph instead (vector code), saying so. Budgets count nodes, never seconds, so the
same config always gives the same bytes.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp

from difgen import floats, naming
from difgen.ad.control import uses_control_flow
from difgen.config import ModuleSpec
from difgen.core.ir import Graph, Lit, Var
from difgen.errors import ConfigError
from difgen.operators import OPERATORS, result_shape, seed_shape, sparse_shape
from difgen.primitives.linalg import TRACE_ONLY
from difgen.render.module import Constants, Function, ModuleParts
from difgen.targets import choose as cost_model
from difgen.targets.c import extension as c_code
from difgen.targets.python.printer import (
    ScalarCode,
    SparseResult,
    emit_operator,
    inert,
)
from difgen.targets.signatures import is_sparse

EXPAND_LIMIT = 400  # try the expanded form only below this many operations
EXPANDED_TERMS_LIMIT = (
    400  # ... and only when the expansion has at most this many terms
)


RESULT_LIMIT = 40_000
"""Nodes, as trees, of all the derivative expressions of one operator: beyond it,
``simplest``, ``cse`` and printing take minutes and the module hundreds of KB
(gradients of a max over many elements, hessians of long expressions)."""

FACTORIZATION_LIMIT = 3
"""Largest n of an n x n matrix factorization (inv, det, solve, cholesky) written out
in closed form: cofactor expansions grow factorially, and a 6 x 6 inverse does not
finish in minutes."""


EXTREMUM_LIMIT = 16
"""Most elements a max/min reduction may take on the sympy backend: the derivative
with respect to each element compares it with the extremum of all the others, so
the derivative expressions grow with the square of the element count."""


class ExpressionTooLarge(Exception):
    """A lowered expression went over its size budget: the caller falls back to
    code from the graph (vector code), which costs time linear in the graph."""


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
    limit: int | None = cost_model.EXPRESSION_LIMIT,
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
    if (sizes or Sizes())(expr) > cost_model.EXPRESSION_LIMIT:
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


class SymbolicFunction:
    """The traced function as expressions, with derivatives computed on demand."""

    def __init__(self, spec: ModuleSpec, graph: Graph) -> None:
        self.spec = spec
        _refuse_control_flow(spec, graph)
        self.xs = tuple(spec.input.shape)
        self.x = symbols(naming.INPUT, self.xs)
        self.contexts = [symbols(c.name, tuple(c.shape)) for c in spec.contexts]
        (y,) = lower(graph, [self.x, *self.contexts])
        self.y = simplest_all(y)  # to differentiate
        (self.value,) = lower(graph, [self.x, *self.contexts], exact=True)
        self.ys = tuple(graph.outputs[0].shape)
        self._jac: np.ndarray | None = None

    @property
    def flat_x(self) -> list[sp.Symbol]:
        return list(self.x.ravel())

    def jacobian(self) -> np.ndarray:
        """J[i, j] = d y_i / d x_j over the flat input and output."""
        if self._jac is None:
            self._jac = _derivatives(self.y.ravel(), self.flat_x)
        return self._jac

    def gradient(self) -> np.ndarray:
        return self.jacobian()[0].reshape(self.xs)

    def hessian(self) -> np.ndarray:
        return _derivatives(self.jacobian()[0], self.flat_x).reshape(self.xs + self.xs)

    def result(self, kind: str, seeds: dict[str, np.ndarray]) -> np.ndarray:
        """Expressions of one result kind, shaped as the operator table says."""
        batch = self.spec.batch
        # the Jacobian is computed once (cached) and only for derivative kinds
        if kind == "value":
            out = self.value
        elif kind == "jvp":
            dx = _rows(seeds["dx"], self.xs)
            out = np.array([self.jacobian() @ d for d in dx], dtype=object)
        elif kind == "vjp":
            dy = _rows(seeds["dy"], self.ys)
            out = np.array([d @ self.jacobian() for d in dy], dtype=object)
        elif kind == "derivative":
            out = self.jacobian()[:, 0]
        elif kind == "second_derivative":
            out = _derivatives(self.jacobian()[:, 0], self.flat_x[:1])[:, 0]
        elif kind == "gradient":
            out = self.gradient()
        elif kind == "jacobian":
            out = self.jacobian()
        elif kind == "hessian":
            out = self.hessian()
        elif kind == "hvp":
            out = self.hessian().reshape(self.x.size, self.x.size) @ seeds["v"].ravel()
        else:
            raise ValueError(f"unknown result kind {kind!r}")
        shape = result_shape(kind, self.xs, self.ys, batch)
        flat = np.empty(int(np.prod(shape, dtype=np.int64)), dtype=object)
        flat[:] = list(np.asarray(out, dtype=object).ravel())
        return flat.reshape(shape)


def _derivatives(
    exprs: Any, xs: list[sp.Symbol], limit: int = RESULT_LIMIT
) -> np.ndarray:
    """``D[i, j] = d exprs_i / d xs_j``, stopped by :class:`ExpressionTooLarge` as
    soon as the entries computed so far exceed ``limit`` nodes.

    Every operator built on these entries (a jacobian, a product with seeds, an hvp
    from the hessian) is at least as large, so :func:`check_results` would refuse it
    anyway; checking entry by entry stops SymPy's ``diff`` after the first entries
    instead of after all of them (a 3 x 3 softmax cross entropy's hessian: 81
    entries of about 6,600 nodes, 37 s of ``diff`` before the budget said no).
    """
    sizes = Sizes()
    total = 0
    rows = []
    for e in exprs:
        row = []
        for x in xs:
            d = sp.diff(e, x)
            total += sizes(d)
            if total > limit:
                raise ExpressionTooLarge(
                    f"its derivative expressions exceed {limit} nodes"
                )
            row.append(d)
        rows.append(row)
    return np.array(rows, dtype=object).reshape(len(rows), len(xs))


def _refuse_control_flow(spec: ModuleSpec, graph: Graph) -> None:
    """A branch on a traced value has no closed SymPy form difgen can emit exactly
    (a Piecewise would evaluate both sides in the value's cse): refused here."""
    where = uses_control_flow(graph)
    if where is not None:
        raise ConfigError(
            spec.config_path,
            spec.line_of("backend"),
            f"the function branches on a traced value at {where}, which the sympy "
            'backend cannot emit; use backend = "trace" (it emits the branch as '
            "a Python if)",
        )


def _rows(seed: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A (batched) seed of ``shape`` as rows of its flat elements (also when the
    shape has no elements, where ``reshape(-1, 0)`` cannot infer the row count)."""
    lead = seed.shape[: seed.ndim - len(shape)]
    return seed.reshape(int(np.prod(lead, dtype=np.int64)), int(np.prod(shape)))


def _seed_symbols(
    seed: str, xs: tuple[int, ...], ys: tuple[int, ...], batch: int
) -> np.ndarray:
    shape = seed_shape(seed, xs, ys, 1)
    if batch == 1 or seed == "v":
        return symbols(seed, shape)
    return np.stack([symbols(seed, shape, b) for b in range(batch)])


def refuse_decompositions(graph: Graph) -> None:
    """Raise the declared refusal of a decomposition (SVD, eigh, pinv) before any
    budget: whatever its size it has no symbolic form, and the user chose sympy."""
    for eqn in graph.eqns:
        if eqn.primitive.name in TRACE_ONLY:
            eqn.primitive.sympy()


def symbolic_reason(graph: Graph) -> str | None:
    """Why the graph is too large to write out as SymPy expressions (None: it is
    not), judged from the graph alone, before SymPy starts."""
    for eqn in graph.eqns:
        if not eqn.primitive.scalarizable and eqn.inputs:
            n = eqn.inputs[0].shape[-1] if eqn.inputs[0].shape else 1
            if n > FACTORIZATION_LIMIT:
                return (
                    f"{eqn.primitive.name} of a {n} x {n} matrix (closed forms "
                    f"only up to {FACTORIZATION_LIMIT} x {FACTORIZATION_LIMIT})"
                )
        if eqn.primitive.name in ("reduce_max", "reduce_min"):
            fan = cost_model.fan_in(eqn)
            if fan > EXTREMUM_LIMIT:
                return (
                    f"{eqn.primitive.name} over {fan} elements (its derivative "
                    f"grows with their square; limit {EXTREMUM_LIMIT})"
                )
    nodes = cost_model.expression_size(graph)
    if nodes > cost_model.EXPRESSION_LIMIT:
        return (
            f"the function's result would be an expression of about {nodes:.3g} "
            f"nodes (limit {cost_model.EXPRESSION_LIMIT})"
        )
    return None


def check_results(results: list[np.ndarray], limit: int = RESULT_LIMIT) -> None:
    """Raise :class:`ExpressionTooLarge` when an operator's derivative expressions
    together exceed ``limit`` nodes (measured in time linear in their DAG)."""
    sizes = Sizes()
    total = 0
    for result in results:
        for expr in result.flat:
            total += sizes(expr)
            if total > limit:
                raise ExpressionTooLarge(
                    f"its derivative expressions exceed {limit} nodes"
                )


def build(spec: ModuleSpec, graph: Graph, pool: Constants | None = None) -> ModuleParts:
    """Emit every requested operator (and ``f``) as straight-line scalar code.

    Raises :class:`ExpressionTooLarge` when the graph (:func:`symbolic_reason`),
    an expression while it is lowered, or an operator's derivatives
    (:func:`check_results`) go over their size budgets: the caller then builds
    the module from the graph instead (:func:`difgen.pipeline.build_parts`).
    A decomposition with no symbolic form is a ConfigError at ``backend``.
    Module constants go to ``pool``.
    """
    _refuse_control_flow(spec, graph)  # before budgets: no size makes it symbolic
    try:
        refuse_decompositions(graph)
        reason = symbolic_reason(graph)
        if reason is not None:
            raise ExpressionTooLarge(reason)
        fn = SymbolicFunction(spec, graph)
    except NotImplementedError as exc:  # a decomposition has no symbolic form
        raise ConfigError(
            spec.config_path,
            spec.line_of("backend"),
            f'backend = "sympy" cannot lower module {spec.name!r}: {exc}; '
            'use backend = "trace"',
        ) from None
    batch = spec.batch
    functions: list[Function] = []
    constants = Constants() if pool is None else pool
    for name in ("f", *spec.operators):
        op = OPERATORS[name]
        seeds = {s: _seed_symbols(s, fn.xs, fn.ys, batch) for s in op.seeds}
        raw = [fn.result(k, seeds) for k in op.results]
        check_results([r for kind, r in zip(op.results, raw) if kind != "value"])
        dense = [
            r if kind == "value" else simplest_all(r)
            for kind, r in zip(op.results, raw)
        ]
        results = [
            (
                SparseResult.from_dense(r, sparse_shape(kind, fn.xs, fn.ys))
                if is_sparse(kind, spec)
                else r
            )
            for kind, r in zip(op.results, dense)
        ]
        code = ScalarCode(
            arrays={
                naming.INPUT: fn.x,
                **dict(zip(op.seeds, seeds.values())),
                **{c.name: s for c, s in zip(spec.contexts, fn.contexts)},
            },
            order=[naming.INPUT, *op.seeds, *(c.name for c in spec.contexts)],
            results=results,
            constants=constants,
        )
        emit = c_code.emit_operator if spec.emit == "c" else emit_operator
        functions.append(emit(op, spec, fn.ys, code))
    return ModuleParts(
        functions=functions,
        output_shape=fn.ys,
        emission="scalar",
        constants=constants.items,
        setup=constants.setup,
    )
