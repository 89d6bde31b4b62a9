"""A straight-line operator's points variant: its own expressions, on columns.

An operator printed as straight-line code (the sympy backend, the trace backend's
scalar emission, and the Python twin of straight-line C) computes the reduction of
SymPy expressions that :func:`difgen.targets.python.printer.reduce` made. Its points
variant evaluates that same reduction with every element of a per-point argument a
column of ``npoints`` values: ``x_0 = x[:, 0]``, each temporary ``t_i`` and each
result element one NumPy operation per operation of the one-point code, on whole
columns.

*Why not the batched graph* (:mod:`difgen.targets.numpy.points`), as for vector
code: the derivatives SymPy simplified are another computation than the graph's.
Where the function is finite they agree to rounding, but at NaN, inf, 0 and
overflowing points they put NaN and inf in different places (forward mode's
``0 * inf`` in a column the simplified expression no longer multiplies, a
product's ``prod(x) / x_i`` where SymPy keeps the product of the others), so the
rows of ``hessian_points`` differed from ``hessian`` at each point (issue 20). On
columns, each element is computed by the operations the one-point code performs
on it, in the same order: IEEE arithmetic and comparisons are NumPy's on floats
bit for bit, and each helper of :mod:`difgen.floats` returns NumPy's value where
``math`` raises, so NaN and inf come out where the one-point code has them; the
values agree to the last bits of ``math`` against NumPy's transcendentals.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp

from difgen import floats, naming
from difgen.core.primitive import scalar_helpers
from difgen.targets.python.printer import FloatPrinter, Reduced, ScalarCode

ELEMENTWISE: dict[str, str] = {
    "_div": "np.divide",
    "_pow": "np.power",
    "_maximum": "np.maximum",
    "_minimum": "np.minimum",
    "_sign": "np.sign",
    "_hypot": "np.hypot",
    "_floor": "np.floor",
    "_ceil": "np.ceil",
    "_trunc": "np.trunc",
    "_rint": "np.rint",
    "_remainder": "np.remainder",
    "_logaddexp": "np.logaddexp",
    "_logaddexp2": "np.logaddexp2",
    "_fmod": "np.fmod",
}
"""The NumPy function whose values each binary (and rounding) helper of
:mod:`difgen.floats` returns on floats; the unary helpers name theirs in their
declaration (:class:`~difgen.core.primitive.ScalarHelper`)."""

MATH: dict[str, str] = {"math.fabs": "np.fabs", "math.atan2": "np.arctan2"}
"""``math`` functions SymPy's printer may name directly, and their ufuncs."""


class NoColumnForm(Exception):
    """The expressions use a function with no elementwise NumPy counterpart known
    here: the points variant stays the batched graph."""


class ColumnPrinter(FloatPrinter):
    """The scalar printer's text with NumPy's elementwise functions for ``math``
    and the helpers, ``np.where`` for conditionals and ``&``/``|``/``~`` for logic:
    the same operations, on columns (float operands stay Python floats)."""

    def __init__(self) -> None:
        super().__init__()
        self.ufuncs = dict(ELEMENTWISE)
        for name, h in scalar_helpers().items():
            self.known_functions[name] = h.numpy
            self.ufuncs[floats.helper(name)] = h.numpy

    def _call(self, helper: str, *args: str) -> str:
        if helper not in self.ufuncs:
            raise NoColumnForm(helper)
        return f"{self.ufuncs[helper]}({', '.join(args)})"

    def _module_format(self, fqn: str, register: bool = True) -> str:
        if fqn.startswith("np."):
            return fqn
        if fqn in MATH:
            return MATH[fqn]
        if fqn.startswith("math."):
            raise NoColumnForm(fqn)
        return str(super()._module_format(fqn, register))

    def _print_Heaviside(self, expr: Any) -> str:
        z = self._print(expr.args[0])
        return f"np.where({z} > 0.0, 1.0, np.where({z} < 0.0, 0.0, 0.5))"

    def _print_Piecewise(self, expr: Any) -> str:
        *pieces, (last, cond) = expr.args
        if cond != sp.true:  # no value where no condition holds: NaN, as lowered
            raise NoColumnForm("Piecewise without an otherwise branch")
        text = self._print(last)
        for value, test in reversed(pieces):
            text = f"np.where({self._print(test)}, {self._print(value)}, {text})"
        return text

    def _print_And(self, expr: Any) -> str:
        return "(" + " & ".join(f"({self._print(a)})" for a in expr.args) + ")"

    def _print_Or(self, expr: Any) -> str:
        return "(" + " | ".join(f"({self._print(a)})" for a in expr.args) + ")"

    def _print_Not(self, expr: Any) -> str:
        return f"(~({self._print(expr.args[0])}))"

    def _print_Abs(self, expr: Any) -> str:
        return f"np.abs({self._print(expr.args[0])})"

    def _print_ITE(self, expr: Any) -> str:
        test, a, b = (self._print(arg) for arg in expr.args)
        return f"np.where({test}, {a}, {b})"


def _columns(
    name: str, symbols: np.ndarray, used: set[sp.Symbol], per_point: bool
) -> list[str]:
    """Bind the used elements of argument ``name``: columns of its points (a view
    each) for a per-point argument, floats for a shared one."""
    if symbols.shape == ():
        return []  # its own symbol: a column of points, or one float
    names = [str(s) if s in used else "_" for s in symbols.ravel()]
    if all(n == "_" for n in names):
        return []
    targets = f"({names[0]},)" if len(names) == 1 else ", ".join(names)
    if per_point:
        source = f"{name}.reshape({naming.NPOINTS}, {symbols.size}).T"
    else:
        source = f"np.asarray({name}, dtype=np.float64).ravel().tolist()"
    return [f"{targets} = {source}"]


def column_body(
    code: ScalarCode,
    reduction: Reduced,
    per_point: frozenset[str],
    first: str = naming.INPUT,
) -> tuple[list[str], frozenset[str]]:
    """The statements of the block function of an operator's points variant,
    computing ``reduction`` on columns and returning every result (in the
    operator's order) with the points in front, and the helpers and constants of
    :mod:`difgen.floats` they name.

    ``first`` is the per-point argument whose leading axis is the number of points.
    Raises :class:`NoColumnForm` when an expression has no column form.
    """
    printer = ColumnPrinter()
    temps, reduced = reduction
    used: set[sp.Symbol] = set()
    for _, e in temps:
        used |= e.free_symbols
    for e in reduced:
        used |= sp.sympify(e).free_symbols
    body = [f"{naming.NPOINTS} = {first}.shape[0]"]
    for n in code.order:
        body += _columns(n, code.arrays[n], used, n in per_point)
    body += [f"{t} = {printer.doprint(e)}" for t, e in temps]
    it = iter(reduced)
    single = len(code.results) == 1
    targets = [naming.RESULT if single else f"{naming.RESULTS}[{i}]"
               for i in range(len(code.results))]  # fmt: skip
    empty = [
        f"np.empty(({naming.NPOINTS}, {r.size}))" if r.shape else
        f"np.empty(({naming.NPOINTS},))"
        for r in code.results
    ]  # fmt: skip
    body.append(
        f"{naming.RESULT} = {empty[0]}"
        if single
        else f"{naming.RESULTS} = ({', '.join(empty)})"
    )
    returned = []
    for target, r in zip(targets, code.results):
        exprs = [printer.doprint(next(it)) for _ in range(r.size)]
        if not r.shape:
            body.append(f"{target}[:] = {exprs[0]}")
        else:
            body += [f"{target}[:, {j}] = {e}" for j, e in enumerate(exprs)]
        dims = ", ".join(str(d) for d in r.shape)
        reshaped = len(r.shape) > 1
        returned.append(
            f"{target}.reshape({naming.NPOINTS}, {dims})" if reshaped else target
        )
    body.append(f"return {', '.join(returned)}")
    return body, frozenset(printer.helpers)


def bytes_per_point(code: ScalarCode, reduction: Reduced) -> int:
    """The bytes per point the column code keeps live: every temporary is a
    column of its own until the block returns, then the results' elements."""
    temps, _ = reduction
    elements = sum(int(np.prod(r.shape)) for r in code.results)
    return 8 * (len(temps) + elements)
