"""The SymPy backend: Graph -> SymPy expressions -> diff -> simplify -> cse -> code.

Every array is scalarized: the input, contexts and seeds are unpacked into one
symbol per element, each primitive is evaluated on object arrays of expressions
(``Primitive.lower_sympy``), results are differentiated symbolically, each result
expression takes the cheapest of its plain and expanded forms, and one ``cse`` over all
results of an operator gives straight-line code on Python floats. Best for small
functions, where it reaches the hand-written floor.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp

from difgen import floats, naming
from difgen.backends import c_code
from difgen.backends.scalar_code import (
    ScalarCode,
    SparseResult,
    emit_operator,
    inert,
)
from difgen.config import ModuleSpec
from difgen.core.ir import Graph, Lit, Var
from difgen.emit.render import Constants, Function, ModuleParts
from difgen.emit.signatures import is_sparse
from difgen.operators import OPERATORS, result_shape, seed_shape, sparse_shape

EXPAND_LIMIT = 400  # try the expanded form only below this many operations


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
    graph: Graph, args: list[np.ndarray], exact: bool = False
) -> list[np.ndarray]:
    """Evaluate the graph on object arrays of SymPy expressions.

    ``exact`` builds them unevaluated: SymPy then keeps the graph's own operations
    (``x - x``, ``x / x``, ``log(exp(x))``) instead of simplifying them into a
    value that differs from NumPy's where x is NaN, infinite or zero. Values are
    lowered exactly; only expressions that are differentiated are not.
    """
    if exact:
        with sp.evaluate(False):
            return [np.vectorize(inert, otypes=[object])(r) for r in lower(graph, args)]
    env: dict[Var, np.ndarray] = dict(zip(graph.inputs, args))

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


def simplest(expr: sp.Expr) -> sp.Expr:
    """The cheaper (by operation count) of an expression and its expansion."""
    expr = sp.sympify(expr)
    if expr.is_number or expr.is_Symbol:
        return expr
    best, cost = expr, sp.count_ops(expr)
    if cost <= EXPAND_LIMIT:
        expanded = sp.expand(expr)
        expanded_cost = sp.count_ops(expanded)
        if expanded_cost < cost:
            best = expanded
    return best


def simplest_all(exprs: np.ndarray) -> np.ndarray:
    """:func:`simplest` of each element of an object array."""
    return np.vectorize(simplest, otypes=[object])(exprs) if exprs.size else exprs


class SymbolicFunction:
    """The traced function as expressions, with derivatives computed on demand."""

    def __init__(self, spec: ModuleSpec, graph: Graph) -> None:
        self.spec = spec
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
            rows = [[sp.diff(yi, xj) for xj in self.flat_x] for yi in self.y.ravel()]
            self._jac = np.array(rows, dtype=object).reshape(self.y.size, self.x.size)
        return self._jac

    def gradient(self) -> np.ndarray:
        return self.jacobian()[0].reshape(self.xs)

    def hessian(self) -> np.ndarray:
        grad = self.jacobian()[0]
        rows = [[sp.diff(gi, xj) for xj in self.flat_x] for gi in grad]
        return np.array(rows, dtype=object).reshape(self.xs + self.xs)

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
            out = np.array(
                [sp.diff(e, self.flat_x[0]) for e in self.jacobian()[:, 0]],
                dtype=object,
            )
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


def build(spec: ModuleSpec, graph: Graph) -> ModuleParts:
    """Emit every requested operator (and ``f``) as straight-line scalar code."""
    fn = SymbolicFunction(spec, graph)
    batch = spec.batch
    functions: list[Function] = []
    constants = Constants()
    for name in ("f", *spec.operators):
        op = OPERATORS[name]
        seeds = {s: _seed_symbols(s, fn.xs, fn.ys, batch) for s in op.seeds}
        dense = [
            r if kind == "value" else simplest_all(r)
            for kind, r in zip(op.results, (fn.result(k, seeds) for k in op.results))
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
    )
