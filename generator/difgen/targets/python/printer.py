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

from difgen import floats, naming
from difgen.config import ModuleSpec
from difgen.core.ir import Graph
from difgen.core.primitive import scalar_helpers
from difgen.derive.graphs import Layouts
from difgen.derive.lowering import (
    SparseResult,
    is_div,
    lower,
    original,
    plain,
    simplest_all,
    symbols,
)
from difgen.operators import Operator
from difgen.targets import cost as cost_model
from difgen.targets.numpy.epilogue import LastResult, returns
from difgen.targets.numpy.printer import CsrFormat, csr_format, csr_out_returns
from difgen.targets.parts import NOTHING, Constants, Function, Uses
from difgen.targets.signatures import (
    docstring,
    label,
    signature,
    signature_uses,
    sparse_out,
)


def _negated(term: Any) -> Any:
    """``y`` for an exact ``-1 * y`` or a negative number (printed as a
    subtraction), else None."""
    if term.is_Number and term.is_negative:
        return -term
    stands_for = original(term)
    if stands_for is not None and stands_for.func is sp.Mul and not is_div(term):
        args = term.args
        if len(args) >= 2 and args[0] == -1:
            return args[1] if len(args) == 2 else term.func(*args[1:])
    return None


def _denominators(factors: Any) -> bool:
    """Whether an exact product divides (a factor is a negative power)."""
    for factor in factors:
        if is_div(factor):
            return True
        stands_for = original(factor)
        if stands_for is not None and stands_for.func is sp.Pow:
            exp = factor.args[1]
            if exp.is_Rational and exp.is_negative:
                return True
    return False


CHEAP_BASE = 3
"""A power's base with at most this many operations is repeated in a product."""


class FloatPrinter(PythonCodePrinter):
    """Python source on floats: every number is a float literal, and every operation
    that Python would raise on (division, powers, ``math`` domain and overflow
    errors) goes through a helper of :mod:`difgen.floats`, which returns NumPy's
    NaN or inf instead.

    The printer reports what it printed: :attr:`helpers` collects the helpers and
    constants of :mod:`difgen.floats` it named, and SymPy's own ``module_imports``
    the modules (``math``), so a generated module defines and imports exactly
    these without reading its text back."""

    def __init__(self) -> None:
        functions = {  # each unary's helper, as its declaration says (scalar)
            name: h.fast if h.family == "safe" else floats.helper(name)
            for name, h in scalar_helpers().items()
        }
        super().__init__(
            {
                "fully_qualified_modules": True,
                "standard": "python3",
                "user_functions": functions,
            }
        )
        self.helpers: set[str] = set()

    def _note(self, name: str) -> None:
        """Record ``name`` if it is a helper or constant of :mod:`difgen.floats`."""
        if name in floats.HELPERS:
            self.helpers.add(name)

    def _call(self, helper: str, *args: str) -> str:
        """``helper(args...)``, recorded in :attr:`helpers`."""
        self._note(helper)
        return f"{helper}({', '.join(args)})"

    def _scipy_special(self, name: str, *args: str) -> str:
        """SciPy's ufunc ``scipy.special.<name>`` on floats, as a float (the
        special functions only SciPy computes: the module imports it, as the
        printer reports it)."""
        self.module_imports["scipy.special"].add(name)
        return f"float(scipy.special.{name}({', '.join(args)}))"

    def _module_format(self, fqn: str, register: bool = True) -> str:
        self._note(fqn)  # a known function mapped to a helper (sin -> _sin)
        return str(super()._module_format(fqn, register))

    def _print_Symbol(self, expr: Any) -> str:
        self._note(expr.name)  # a named non-finite constant (_INF, _NINF, _NAN)
        return str(super()._print_Symbol(expr))

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
        stands_for = original(item)
        if stands_for is not None:  # an inert node binds like its operation
            own = precedence(stands_for)
            text = self._print(item)
            wrap = own < level or (strict and own <= level)
            return f"({text})" if wrap else text
        return str(super().parenthesize(item, level, strict))

    def _print_Function(self, expr: Any) -> str:
        if is_div(expr):
            a, b = (self._print(arg) for arg in expr.args)
            return self._call("_div", a, b)
        stands_for = original(expr)
        if stands_for is None:
            known = self.known_functions.get(expr.func.__name__)
            if isinstance(known, str):  # a user function printed without lookup
                self._note(known)
            return str(super()._print_Function(expr))
        if stands_for.func is sp.Add:
            return self._print_in_order(expr.args)
        if stands_for.func is sp.Mul and not _denominators(expr.args):
            return self._print_product_in_order(expr)
        return str(self._print(stands_for))

    def _print_in_order(self, terms: Any) -> str:
        """An exact sum, its terms in the order and grouping of the user's code
        (SymPy would sort them; on floats the order decides the rounding)."""
        add = precedence(sp.Add(sp.Symbol("a"), sp.Symbol("b"), evaluate=False))
        text = self.parenthesize(terms[0], add)
        for term in terms[1:]:
            negated = _negated(term)
            if negated is not None:
                text += " - " + self.parenthesize(negated, add, strict=True)
            else:
                text += " + " + self.parenthesize(term, add, strict=True)
        return text

    def _print_product_in_order(self, expr: Any) -> str:
        """An exact product without denominators, in the user's order."""
        factors = expr.args
        if len(factors) >= 2 and factors[0] == -1:
            rest = factors[1] if len(factors) == 2 else expr.func(*factors[1:])
            unary = precedence(sp.Mul(-1, sp.Symbol("a"), evaluate=False))
            return "-" + self.parenthesize(rest, unary, strict=True)
        mul = precedence(sp.Mul(sp.Symbol("a"), sp.Symbol("b"), evaluate=False))
        text = self.parenthesize(factors[0], mul)
        for factor in factors[1:]:
            text += " * " + self.parenthesize(factor, mul, strict=True)
        return text

    def _print_Pow(self, expr: sp.Pow, rational: bool = False) -> str:
        base, exp = expr.base, expr.exp
        if exp.is_negative and exp.is_Rational:
            return self._call(
                "_div", "1.0", self._print(sp.Pow(base, -exp, evaluate=False))
            )
        cheap = sp.count_ops(plain(base)) <= CHEAP_BASE
        if exp.is_Integer and 2 <= exp <= 3 and cheap:
            # A product never raises (x ** 2 overflows into an OverflowError), and
            # repeating a cheap base is faster than a call
            b = self.parenthesize(base, precedence(sp.Mul(2, base, evaluate=False)))
            return "(" + " * ".join([b] * int(exp)) + ")"
        if exp == sp.Rational(1, 2):
            return self._call(floats.helper("sqrt"), self._print(base))
        return self._call("_pow", self._print(base), self._print(exp))

    def _print_Mul(self, expr: sp.Mul) -> str:
        """A product with a denominator is ``_div(numerator, denominator)``."""
        num, den = [], []
        for factor in sp.Mul.make_args(expr):
            factor = original(factor) or factor
            if factor.is_Pow and factor.exp.is_Rational and factor.exp.is_negative:
                den.append(sp.Pow(factor.base, -factor.exp, evaluate=False))
            else:
                num.append(factor)
        if not den:
            return str(super()._print_Mul(expr))
        top = sp.Mul(*num, evaluate=False) if len(num) > 1 else (num or [sp.S.One])[0]
        bottom = sp.Mul(*den, evaluate=False) if len(den) > 1 else den[0]
        return self._call("_div", self._print(top), self._print(bottom))

    def _print_SymbolicPower(self, expr: Any) -> str:
        return self._call("_pow", self._print(expr.args[0]), self._print(expr.args[1]))

    def _print_sign(self, expr: Any) -> str:
        return self._call("_sign", self._print(expr.args[0]))

    def _print_Heaviside(self, expr: Any) -> str:
        """Step of a max/min/abs derivative; ties split evenly, as SymPy's H(0) = 1/2."""
        z = self._print(expr.args[0])
        return f"(1.0 if {z} > 0.0 else 0.0 if {z} < 0.0 else 0.5)"

    def _print_DiracDelta(self, expr: Any) -> str:
        return "0.0"  # derivative of a step: zero almost everywhere

    def _print_Max(self, expr: Any) -> str:
        return self._fold("_maximum", expr.args)

    def _print_Min(self, expr: Any) -> str:
        return self._fold("_minimum", expr.args)

    def _fold(self, helper: str, args: Any) -> str:
        """NumPy's NaN-propagating maximum/minimum of several arguments, nested.

        Up to three arguments nest from the left (``f(f(a, b), c)``); more are
        split in halves, so the nesting is logarithmic: a left fold of n arguments
        nests n deep, and black indents each level, which makes the text grow
        with n^2 (either order gives NaN if any argument is NaN).
        """
        if len(args) > 3:
            half = len(args) // 2
            left, right = self._fold(helper, args[:half]), self._fold(
                helper, args[half:]
            )
            return self._call(helper, left, right)
        text = self._print(args[0])
        for arg in args[1:]:
            text = self._call(helper, text, self._print(arg))
        return text


PRINTER = FloatPrinter()


@dataclass
class ScalarCode:
    """Arguments (as object arrays of symbols) and result expressions of one operator."""

    arrays: dict[str, np.ndarray]
    order: list[str]
    results: list[Any]  # object arrays, or SparseResult
    constants: Constants


def _unpack(
    function: str, name: str, symbols: np.ndarray, used: set[sp.Symbol]
) -> list[str]:
    if symbols.shape == ():
        return []  # a scalar argument is its own symbol
    names = [str(s) if s in used else "_" for s in symbols.ravel()]
    if all(n == "_" for n in names):
        return []
    flat = naming.flat(name)  # annotated, so the unpacked elements are typed as floats
    targets = f"({names[0]},)" if len(names) == 1 else ", ".join(names)
    if symbols.ndim != 1:  # checked by render before the body
        return [f"{flat}: list[float] = {name}.ravel().tolist()", f"{targets} = {flat}"]
    first = next(n for n in names if n != "_")
    return _checked_unpack(
        name, flat, targets, first, tuple(symbols.shape), label(function, name)
    )


def _checked_unpack(
    name: str,
    flat: str,
    targets: str,
    first: str,
    shape: tuple[int, ...],
    said: str,
) -> list[str]:
    """Unpack a 1-D argument, checking it on the way at little cost.

    An exact float64 ndarray of the right length unpacks into floats; anything
    else fails the unpacking (no ``tolist``, another length, a 0-d array) or one
    of three identity tests, and goes through ``_as_array``, which converts it or
    raises naming the argument as ``said`` (the operator's name first). The
    tests: the type (a masked array's ``tolist`` has None for masked entries), the
    first element a float (not the nested list of a 2-D array), the dtype float64
    (an object array may hold anything after a float). This is the argument check
    of scalar code: no shape comparison (the unpacking checks the length; what
    that saves per argument: ``benchmarks.calibration.checked_unpack_saving_ns``).
    """
    convert = f"{naming.AS_ARRAY}({said}, {name}, {shape!r}).tolist()"
    tests = (
        f"type({name}) is not {naming.NDARRAY} or type({first}) is not float "
        f"or {name}.dtype is not {naming.F64}"
    )
    return [
        "try:",
        f"    {flat}: list[float] = {name}.tolist()",
        f"    {targets} = {flat}",
        f"    if {tests}:",
        "        raise TypeError",
        "except (AttributeError, TypeError, ValueError):",
        f"    {flat} = {convert}",
        f"    {targets} = {flat}",
    ]


def _literal(exprs: np.ndarray, printer: FloatPrinter) -> str:
    """A nested list literal of printed expressions (an empty array: np.zeros, since
    a nested empty list loses the shape, ``np.array([])`` being of shape (0,))."""
    if exprs.size == 0:
        return f"np.zeros({exprs.shape!r})"
    if exprs.ndim == 0:
        return str(printer.doprint(exprs.item()))
    items = (_literal(exprs[i, ...], printer) for i in range(len(exprs)))
    return "[" + ", ".join(items) + "]"


Reduced = tuple[list[tuple[sp.Symbol, Any]], list[Any]]
"""Temporaries ``(t_i, expression)`` in order, and the results in terms of them."""


def reduce(code: ScalarCode) -> Reduced:
    """One ``cse`` over every result of an operator, in a fixed order.

    Python and C code print the same reduction (:mod:`difgen.targets.c.extension`), so
    both compute the same operations in the same order.
    """
    flat = [e for r in code.results for e in r.ravel()]
    temps, reduced = sp.cse(
        flat, symbols=sp.numbered_symbols(naming.TEMP_PREFIX), order="canonical"
    )
    return list(temps), list(reduced)


def used_symbols(reduction: Reduced) -> set[sp.Symbol]:
    """The symbols (arguments' elements and temporaries) a reduction reads."""
    temps, reduced = reduction
    used: set[sp.Symbol] = set()
    for _, e in temps:
        used |= e.free_symbols
    for e in reduced:
        used |= sp.sympify(e).free_symbols
    return used


def print_operator(
    op: Operator,
    spec: ModuleSpec,
    ys: tuple[int, ...],
    code: ScalarCode,
    reduction: Reduced | None = None,
) -> Function:
    """One operator as a :class:`Function` of straight-line scalar code, with the
    helpers and modules its printer used."""
    printer = FloatPrinter()  # collects what this operator's code uses
    temps, reduced = reduce(code) if reduction is None else reduction
    used = used_symbols((temps, reduced))
    unpacks = {n: _unpack(op.name, n, code.arrays[n], used) for n in code.order}
    body = [line for n in code.order for line in unpacks[n]]
    checked = frozenset(n for n, lines in unpacks.items() if lines[:1] == ["try:"])
    body += [f"{t} = {printer.doprint(e)}" for t, e in temps]
    it = iter(reduced)
    results: list[Any] = []  # object arrays, or SparseResult (as ScalarCode's)
    sources: list[str] = []
    in_place = sparse_out(op, spec)
    uses = NOTHING  # what the code of sparse results names
    for kind, r in zip(op.results, code.results):
        if isinstance(r, SparseResult):
            data = ", ".join(printer.doprint(next(it)) for _ in range(r.size))
            wrap = csr_format(
                kind, r.indices, r.indptr, r.shape, code.constants, spec.triangle
            )
            sources.append(wrap.format(f"np.array([{data}])"))
            uses |= CsrFormat.FORMAT_USES
            results.append(r)
            if in_place and len(sources) == len(op.results):
                body += csr_out_returns(op, sources, f"np.array([{data}])", wrap)
                uses |= CsrFormat.OUT_CHECK_USES
                return _function(op, spec, ys, body, checked, printer, uses, None)
            continue
        arr = np.empty(r.shape, dtype=object)
        arr.ravel()[:] = [next(it) for _ in range(r.size)] if r.size else []
        results.append(arr)
        literal = _literal(arr, printer)
        array = arr.ndim == 0 or arr.size == 0  # a float, or np.zeros(shape)
        sources.append(literal if array else f"np.array({literal})")
    into_out = isinstance(results[-1], np.ndarray) and results[-1].ndim > 0
    last = None
    if op.takes_out and into_out:  # a nested list, written into out as it is
        last = LastResult(
            f" = {_literal(results[-1], printer)}", f"np.array({naming.RESULT})"
        )
    body += returns(
        op.results, sources, last, last is not None, results[-1].shape, op.name
    )
    expressions = (code, (temps, reduced))
    return _function(op, spec, ys, body, checked, printer, uses, expressions)


def _function(
    op: Operator,
    spec: ModuleSpec,
    ys: tuple[int, ...],
    body: list[str],
    checked: frozenset[str],
    printer: FloatPrinter,
    uses: Uses,
    expressions: tuple[ScalarCode, Reduced] | None,
) -> Function:
    """The :class:`Function`, reporting what its printer, its signature and
    ``uses`` (the code of its sparse results) name."""
    params, annotation = signature(op, spec, ys)
    return Function(
        op.name,
        params,
        annotation,
        docstring(op, spec, ys),
        tuple(body),
        checked,
        helpers=frozenset(printer.helpers),
        modules=frozenset(printer.module_imports),
        expressions=expressions,
    ).using(uses | signature_uses(op, spec))


def scalar_code(
    op: Operator,
    spec: ModuleSpec,
    graph: Graph,
    pool: Constants,
    layouts: Layouts,
) -> tuple[ScalarCode, float]:
    """A graph as straight-line code's expressions (for the Python or the C
    printer), and the cost model's estimate of the Python code's run time: the
    graph lowered to SymPy (no diff), then cse.

    Values (``f``, the value of ``value_and_*``) are lowered exactly (unevaluated):
    SymPy's simplifications hold for finite values only and would change NumPy's
    NaN or inf. Derivative results take the simpler of SymPy's forms.
    """
    data = [c.name for c in spec.contexts if c.dtype != "float64"]
    if data:  # scalar code unpacks arguments into floats
        raise NotImplementedError(
            f"int64 and bool contexts ({', '.join(data)}) are checked and used as "
            "arrays of their dtype, which only vector code does"
        )
    names = [naming.INPUT, *op.seeds, *(c.name for c in spec.contexts)]
    arrays = {name: symbols(name, v.shape) for name, v in zip(names, graph.inputs)}
    args = [arrays[n] for n in names]
    exact = lower(graph, args, exact=True) if "value" in op.results else []
    results: list[Any] = [  # object arrays; the sparse ones become SparseResult
        exact[i] if kind == "value" else simplest_all(r)
        for i, (kind, r) in enumerate(zip(op.results, lower(graph, args)))
    ]
    flat = [e for r in results for e in r.ravel()]
    temps, reduced = sp.cse(flat, order="canonical")
    ops = sum(sp.count_ops(e) for _, e in temps) + sum(sp.count_ops(e) for e in reduced)
    used = set().union(
        *(sp.sympify(e).free_symbols for _, e in temps),
        *(sp.sympify(e).free_symbols for e in reduced),
    )
    read = [a for a in arrays.values() if a.ndim and any(s in used for s in a.ravel())]
    elements = sum(a.size for a in read)
    cost = cost_model.scalar_cost(
        int(ops), elements, len(read), [r.shape for r in results]
    )
    for i, (coloring, shape) in layouts.items():
        indices, indptr = coloring.csr_indices()
        results[i] = SparseResult(results[i].ravel(), indices, indptr, shape)
    code = ScalarCode(arrays=arrays, order=names, results=results, constants=pool)
    return code, cost
