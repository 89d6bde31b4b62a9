"""SymPy expressions as C: the straight-line printer's expression printer, shared
by the straight-line operators (:mod:`difgen.targets.c.extension`) and the loops'
elements (:mod:`difgen.targets.c.nest`).

:class:`CPrinter` is the scalar emission's :class:`FloatPrinter` with C's
spellings where Python's differ (conditionals, booleans, ``fabs``, the
constants), the helpers of :mod:`difgen.floats` named as the C runtime defines
them; it refuses, on the SymPy nodes, what only Python spells, and
:func:`c_expr` what the runtime does not define, so that nothing doubtful is
printed into a C file.
"""

from __future__ import annotations

import math
from typing import Any

import sympy as sp
from sympy.printing.codeprinter import PrintMethodNotImplementedError

from difgen import (
    floats,
    primitives,  # noqa: F401 (registers every declaration: their helpers)
)
from difgen.core.primitive import scalar_helpers
from difgen.targets.c import runtime as c_runtime
from difgen.targets.c.glue import Used
from difgen.targets.python.printer import FloatPrinter

C_LIBRARY = frozenset(
    [
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "atan2",
        "sinh",
        "cosh",
        "tanh",
        "asinh",
        "acosh",
        "atanh",
        "exp",
        "expm1",
        "log",
        "log1p",
        "log2",
        "log10",
        "sqrt",
        "pow",
        "fabs",
        "floor",
        "ceil",
        "fmod",
        "fmax",
        "fmin",
        "copysign",
        "hypot",
        "cbrt",
        "erf",
        "erfc",
        "lgamma",
        "tgamma",
        "INFINITY",
        "NAN",
        "HUGE_VAL",
    ]
)
"""Names C or its math library define: an argument may not be called one of them."""

_C_FUNCTIONS = {  # each unary's helper, as its declaration says (scalar)
    name: name if h.family == "safe" else floats.helper(name)
    for name, h in scalar_helpers().items()
}
_C_FUNCTIONS["atan2"] = "atan2"  # math.atan2 is C99's atan2, special values included

_SHARED_FORMS = frozenset(["Add", "Relational", "BooleanFunction"])
"""The print methods of SymPy's own printers whose text is C as well as Python
(a sum, ``(a == b)``, a boolean function rewritten into ``And``/``Or``/``Not``)."""


class CPrinter(FloatPrinter):
    """The scalar emission's printer with C spellings where Python's differ.

    A node prints only by a method that spells C: this class's own, the float
    printer's (whose Python forms are C's: calls, products, float literals), a
    known function of C's table, or one of :data:`_SHARED_FORMS`. Any other node
    (a ``KroneckerDelta`` printed as ``if``/``else``, ``Lambda``, ``Mod``, Python's
    ``None`` or ``True``) would reach the C file as Python: the printer refuses
    it (:class:`Unsupported`) before printing rather than compile something
    else."""

    def __init__(self) -> None:
        super().__init__()
        self._settings["user_functions"] = dict(_C_FUNCTIONS)
        self.known_functions = dict(_C_FUNCTIONS)

    def _print(self, expr: Any, **kwargs: Any) -> str:
        form = _print_form(type(self), type(expr))
        if form is None:
            raise Unsupported(f"no C form of {type(expr).__name__}")
        owner, name = form
        own = owner is CPrinter or owner is FloatPrinter
        if not (own or name in _SHARED_FORMS or name in self.known_functions):
            raise Unsupported(f"no C form of {name} (Python's is {owner.__name__}'s)")
        return str(super()._print(expr, **kwargs))

    def _module_format(self, fqn: str, register: bool = True) -> str:
        self._note(fqn)
        return fqn.split(".")[-1]  # math.atan2 -> atan2

    def _scipy_special(self, name: str, *args: str) -> str:
        raise Unsupported(f"no C form of scipy.special.{name} (SciPy has no C API)")

    def _print_known_func(self, expr: Any) -> str:
        if type(expr).__name__ not in self.known_functions:  # Python's, not C's
            raise Unsupported(f"no C form of {type(expr).__name__}")
        return str(super()._print_known_func(expr))

    def _print_Heaviside(self, expr: Any) -> str:
        z = self._print(expr.args[0])
        return f"(({z}) > 0.0 ? 1.0 : ({z}) < 0.0 ? 0.0 : 0.5)"

    def _print_Piecewise(self, expr: Any) -> str:
        text = ""
        closing = ""
        for value, cond in expr.args:
            if cond in (True, sp.true):
                return text + f"({self._print(value)})" + closing
            text += f"(({self._print(cond)}) ? ({self._print(value)}) : "
            closing += ")"
        return text + "NAN" + closing  # no branch taken: SymPy's undefined value

    def _print_And(self, expr: Any) -> str:
        return "(" + " && ".join(f"({self._print(a)})" for a in expr.args) + ")"

    def _print_Or(self, expr: Any) -> str:
        return "(" + " || ".join(f"({self._print(a)})" for a in expr.args) + ")"

    def _print_Not(self, expr: Any) -> str:
        return f"(!({self._print(expr.args[0])}))"

    def _print_BooleanTrue(self, expr: Any) -> str:
        return "1"

    def _print_BooleanFalse(self, expr: Any) -> str:
        return "0"

    def _print_Pow(self, expr: sp.Pow, rational: bool = False) -> str:
        # a denominator b ** 1 (``_div(a, b)`` of ``a * b ** -1``): b, exactly
        # what pow(b, 1.0) returns, without a libm call per element
        if expr.exp == 1:
            return f"({self._print(expr.base)})"
        return str(super()._print_Pow(expr, rational))

    def _print_Abs(self, expr: Any) -> str:
        return f"fabs({self._print(expr.args[0])})"

    def _print_Pi(self, expr: Any) -> str:
        return repr(math.pi)

    def _print_Exp1(self, expr: Any) -> str:
        return repr(math.e)


_FORMS: dict[tuple[type, type], tuple[type, str] | None] = {}


def _print_form(printer: type, node: type) -> tuple[type, str] | None:
    """(the printer class defining it, the node class it is named for) of the
    method SymPy's ``Printer._print`` calls on a ``node``: the first class of the
    node's MRO that some ``_print_<class>`` is defined for (None: SymPy's
    fallback, ``str``)."""
    key = (printer, node)
    if key not in _FORMS:
        _FORMS[key] = next(
            (
                (owner, cls.__name__)
                for cls in node.__mro__
                for owner in printer.__mro__
                if f"_print_{cls.__name__}" in vars(owner)
            ),
            None,
        )
    return _FORMS[key]


PRINTER = CPrinter()


class Unsupported(Exception):
    """An expression the C printer cannot print faithfully."""


def c_expr(expr: Any, use: Used | None = None) -> str:
    """One expression as C; :class:`Unsupported` rather than a doubtful print.
    The helpers it calls (``_sin``), as the printer reports them, go to ``use``."""
    PRINTER.helpers.clear()
    try:
        text = PRINTER.doprint(expr)
    except PrintMethodNotImplementedError as exc:  # a function C has no print for
        raise Unsupported(str(exc).splitlines()[0]) from None
    undefined = PRINTER.helpers - C_HELPERS  # as the printer reports them
    if undefined:  # a helper of difgen.floats the C runtime does not define
        raise Unsupported(f"{', '.join(sorted(undefined))} in {text[:120]}")
    if use is not None:
        use.add(PRINTER.helpers)
    return text


C_HELPERS = c_runtime.helpers()
"""The helpers of :mod:`difgen.floats` the C runtime defines (NumPy's semantics)."""
