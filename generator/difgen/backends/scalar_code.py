"""Straight-line scalar code on Python floats from SymPy result expressions.

Array arguments are unpacked once with ``.tolist()`` (the fastest way from NumPy to
floats), common subexpressions become temporaries ``t0, t1, ...``, and array results
are built with one ``np.array`` of a nested list (or written into ``out``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp
from sympy.printing.precedence import precedence
from sympy.printing.pycode import PythonCodePrinter

from difgen.backends.epilogue import LastResult, returns
from difgen.backends.vector_code import csr_format
from difgen.config import ModuleSpec
from difgen.emit import naming
from difgen.emit.render import Constants, Function
from difgen.operators import Operator, docstring, signature
from difgen.sparsity import csr_layout


class FloatPrinter(PythonCodePrinter):
    """Python source on floats: every number is a float literal, math.* functions."""

    def __init__(self) -> None:
        super().__init__({"fully_qualified_modules": True, "standard": "python3"})

    def _print_Integer(self, expr: sp.Integer) -> str:
        return repr(float(expr.p))

    def _print_Rational(self, expr: sp.Rational) -> str:
        return repr(expr.p / expr.q)

    def _print_Float(self, expr: sp.Float) -> str:
        return repr(float(expr))

    def _print_Half(self, expr: Any) -> str:
        return "0.5"

    def _print_One(self, expr: Any) -> str:
        return "1.0"

    def _print_Zero(self, expr: Any) -> str:
        return "0.0"

    def _print_NegativeOne(self, expr: Any) -> str:
        return "-1.0"

    def parenthesize(self, item: Any, level: int, strict: bool = False) -> str:
        if isinstance(item, sp.Rational) and item >= 0:
            return self._print(item)  # printed as one float literal: no parentheses
        return str(super().parenthesize(item, level, strict))

    def _print_Pow(self, expr: sp.Pow, rational: bool = False) -> str:
        base, exp = expr.base, expr.exp
        b = self.parenthesize(base, precedence(expr))
        if exp.is_Integer:
            n = int(exp)
            if n == 2 and base.is_Symbol:
                return f"({b} * {b})"  # parenthesized: Mul prints denominators bare
            if n < 0:
                pos = b if n == -1 else f"{b} ** {-n}"
                return f"1.0 / {pos}" if n == -1 else f"1.0 / ({pos})"
            return f"{b} ** {n}"
        if exp == sp.Rational(1, 2):
            return f"math.sqrt({self._print(base)})"
        if exp == sp.Rational(-1, 2):
            return f"1.0 / math.sqrt({self._print(base)})"
        return f"{b} ** {self.parenthesize(exp, precedence(expr))}"

    def _print_sign(self, expr: Any) -> str:
        a = self._print(expr.args[0])
        return f"(0.0 if {a} == 0.0 else math.copysign(1.0, {a}))"

    def _print_Heaviside(self, expr: Any) -> str:
        """Step of a max/min/abs derivative; ties split evenly, as SymPy's H(0) = 1/2."""
        z = self._print(expr.args[0])
        return f"(1.0 if {z} > 0.0 else 0.0 if {z} < 0.0 else 0.5)"

    def _print_DiracDelta(self, expr: Any) -> str:
        return "0.0"  # derivative of a step: zero almost everywhere

    def _print_Max(self, expr: Any) -> str:
        return "max(" + ", ".join(self._print(a) for a in expr.args) + ")"

    def _print_Min(self, expr: Any) -> str:
        return "min(" + ", ".join(self._print(a) for a in expr.args) + ")"


PRINTER = FloatPrinter()


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
        mask = np.array([[not (sp.sympify(e).is_zero is True) for e in row]
                         for row in matrix], dtype=bool).reshape(matrix.shape)  # fmt: skip
        data = np.empty(int(mask.sum()), dtype=object)
        data[:] = list(matrix[mask])  # row-major: the CSR order
        indices, indptr = csr_layout(mask)
        return cls(data, indices, indptr, matrix.shape)

    @property
    def size(self) -> int:
        return int(self.data.size)

    def ravel(self) -> np.ndarray:
        return self.data


@dataclass
class ScalarCode:
    """Arguments (as object arrays of symbols) and result expressions of one operator."""

    arrays: dict[str, np.ndarray]
    order: list[str]
    results: list[Any]  # object arrays, or SparseResult
    constants: Constants


def _unpack(name: str, symbols: np.ndarray, used: set[sp.Symbol]) -> list[str]:
    if symbols.shape == ():
        return []  # a scalar argument is its own symbol
    names = [str(s) if s in used else "_" for s in symbols.ravel()]
    if all(n == "_" for n in names):
        return []
    source = f"{name}.tolist()" if symbols.ndim == 1 else f"{name}.ravel().tolist()"
    flat = naming.flat(name)  # annotated, so the unpacked elements are typed as floats
    targets = f"({names[0]},)" if len(names) == 1 else ", ".join(names)
    return [f"{flat}: list[float] = {source}", f"{targets} = {flat}"]


def _literal(exprs: np.ndarray) -> str:
    """A nested list literal of printed expressions."""
    if exprs.ndim == 0:
        return PRINTER.doprint(exprs.item())
    return "[" + ", ".join(_literal(exprs[i, ...]) for i in range(len(exprs))) + "]"


def emit_operator(
    op: Operator, spec: ModuleSpec, ys: tuple[int, ...], code: ScalarCode
) -> Function:
    """One operator as a :class:`Function` of straight-line scalar code."""
    flat = [e for r in code.results for e in r.ravel()]
    temps, reduced = sp.cse(
        flat, symbols=sp.numbered_symbols(naming.TEMP_PREFIX), order="canonical"
    )
    used: set[sp.Symbol] = set()
    for _, e in temps:
        used |= e.free_symbols
    for e in reduced:
        used |= sp.sympify(e).free_symbols
    body = [line for n in code.order for line in _unpack(n, code.arrays[n], used)]
    body += [f"{t} = {PRINTER.doprint(e)}" for t, e in temps]
    it = iter(reduced)
    results, sources = [], []
    for kind, r in zip(op.results, code.results):
        if isinstance(r, SparseResult):
            data = ", ".join(PRINTER.doprint(next(it)) for _ in range(r.size))
            wrap = csr_format(kind, r.indices, r.indptr, r.shape, code.constants)
            sources.append(wrap.format(f"np.array([{data}])"))
            results.append(r)
            continue
        arr = np.empty(r.shape, dtype=object)
        arr.ravel()[:] = [next(it) for _ in range(r.size)] if r.size else []
        results.append(arr)
        sources.append(_literal(arr) if arr.ndim == 0 else f"np.array({_literal(arr)})")
    into_out = isinstance(results[-1], np.ndarray) and results[-1].ndim > 0
    last = None
    if op.takes_out and into_out:  # a nested list, written into out as it is
        last = LastResult(f" = {_literal(results[-1])}", f"np.array({naming.RESULT})")
    body += returns(op.results, sources, last, last is not None)
    params, annotation = signature(op, spec, ys)
    return Function(op.name, params, annotation, docstring(op, spec, ys), tuple(body))
