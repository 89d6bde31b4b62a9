"""Emitted source expressions that carry their precedence, and the forms building them.

A primitive's ``numpy`` form puts its operands' source into a form; whether an operand
needs parentheses depends on how its *slot* binds and on the operand's loosest
top-level operator. So every :class:`Expr` carries that precedence along with its
text (as SymPy's printers do), and every form says how each slot binds:

- :func:`argument`: a call argument, list item or assigned value: never wrapped;
- :func:`base`: the base of an attribute, subscript or method call: atoms only;
- :func:`left` / :func:`right`: an operand of an infix operator;
- :func:`prefix`: the operand of a unary minus (atoms only, for readability).

Parentheses are decided from those, never by reading the text back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from string import Formatter
from typing import Any

# Python's operator precedence, loosest first; an atom (a name, call or subscript)
# binds tightest.
CMP, ADD, MUL, UNARY, POW, ATOM = 1, 2, 3, 4, 5, 9

INFIX = {
    "<": CMP,
    "<=": CMP,
    ">": CMP,
    ">=": CMP,
    "==": CMP,
    "!=": CMP,
    "+": ADD,
    "-": ADD,
    "*": MUL,
    "/": MUL,
    "@": MUL,
    "**": POW,
}

# Operators whose left operand may not be a bare operation of the same level:
# ``a ** b ** c`` groups to the right and ``a < b < c`` chains comparisons.
_LEFT_STRICT = frozenset({POW, CMP})


@dataclass(frozen=True)
class Expr:
    """Source text and the precedence of its loosest top-level operator."""

    text: str
    prec: int

    def __str__(self) -> str:
        raise TypeError("place an Expr through a slot (argument, base, left, right)")


def atom(text: str) -> Expr:
    """A name, call, subscript or attribute: binds tightest."""
    return Expr(text, ATOM)


def literal(text: str) -> Expr:
    """A printed constant: an atom, unless it starts with a minus sign."""
    return Expr(text, UNARY if text.startswith("-") else ATOM)


# ----------------------------------------------------------------------- slots
def argument(e: Expr) -> str:
    """A call argument, list item or assigned value: delimited, never wrapped."""
    return e.text


def _wrap(e: Expr, needed: bool) -> str:
    return f"({e.text})" if needed else e.text


def base(e: Expr) -> str:
    """The base of ``.attr``, ``[index]`` or ``.method()``: an atom."""
    return _wrap(e, e.prec != ATOM)


def left(e: Expr, prec: int) -> str:
    """The left operand of an infix operator of precedence ``prec``: equal levels
    group left (``a - b + c``), except ``**`` and comparisons."""
    return _wrap(e, e.prec < prec or (e.prec == prec and prec in _LEFT_STRICT))


def right(e: Expr, prec: int) -> str:
    """The right operand: equal levels need parentheses (``a - (b - c)``)."""
    return _wrap(e, e.prec <= prec)


# ----------------------------------------------------------------------- forms
Aval = tuple[tuple[int, ...], str]
NumpyForm = Callable[[Sequence[Expr], Mapping[str, Any], Sequence[Aval]], Any]


def infix(op: str) -> NumpyForm:
    """``a op b`` for one of Python's binary operators."""
    prec = INFIX[op]

    def form(args: Sequence[Expr], params: Mapping[str, Any], avals: Any) -> Expr:
        a, b = args
        return Expr(f"{left(a, prec)} {op} {right(b, prec)}", prec)

    return form


def negation(args: Sequence[Expr], params: Mapping[str, Any], avals: Any) -> Expr:
    """``-x``; the operand is wrapped unless it is an atom."""
    (x,) = args
    return Expr(f"-{prefix(x)}", UNARY)


def prefix(e: Expr) -> str:
    """The operand of a unary minus: atoms only, for readability (``-(a * b)``)."""
    return _wrap(e, e.prec != ATOM)


@dataclass(frozen=True)
class CallForm:
    """A call form from a format string whose ``{0}``, ``{1}``... are whole call
    arguments (checked on construction), so they are never wrapped; params fill
    ``{name}``. ``modules``: what the call names besides NumPy (``scipy.special``),
    which the printer reports for the module's imports."""

    fmt: str
    modules: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        _check_arguments(self.fmt)

    def __call__(
        self, args: Sequence[Expr], params: Mapping[str, Any], avals: Any
    ) -> Expr:
        return atom(self.fmt.format(*map(argument, args), **params))


def call(fmt: str, modules: Sequence[str] = ()) -> NumpyForm:
    """The :class:`CallForm` of ``fmt`` (naming ``modules`` besides NumPy)."""
    return CallForm(fmt, frozenset(modules))


def _check_arguments(fmt: str) -> None:
    """Every positional field of ``fmt`` stands between ``(``/``,`` and ``,``/``)``."""
    parts = list(Formatter().parse(fmt))
    for i, (before, field, _, _) in enumerate(parts):
        if field is None or not field.isdigit():
            continue
        after = parts[i + 1][0] if i + 1 < len(parts) else ""
        if not (before.rstrip().endswith(("(", ",")) and after.startswith((",", ")"))):
            raise ValueError(f"{{{field}}} is not a call argument in {fmt!r}")
