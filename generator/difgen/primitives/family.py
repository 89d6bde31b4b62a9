"""Family helpers: one keyword declaration per primitive, its family's defaults filled.

Each helper returns a :class:`~difgen.core.primitive.Primitive` with every field
given: what the family implies (the broadcasting shape rule and batch rule of
elementwise rows, the axis-shifting batch rule of reductions...) is filled here,
explicitly, and a row overrides it by keyword. A keyword the family has no default
for defaults to ``MISSING``, so a row that forgets it fails the coverage test
(``tests/primitives/test_primitives.py``) instead of getting a silent ``None``.

Adding a primitive is one declaration in its family's module and one test row in
``tests/support/primitive_cases.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from difgen.core.batching import axes_batch, elementwise_batch
from difgen.core.expr import Aval
from difgen.core.ir import Eqn
from difgen.core.primitive import (
    ELEMENTWISE_LOOP,
    MISSING,
    MOVES,
    NO_HELPER,
    NO_IDENTITIES,
    NOT_DIFFERENTIABLE,
    NOT_LINEAR,
    Absent,
    Deferred,
    LoopForm,
    Primitive,
    ScalarHelper,
    Statements,
    broadcasting,
    no_loop_form,
    resolved,
)
from difgen.core.tracer import bind_name
from difgen.primitives import patterns

Rule = Callable[..., Any]

PIECEWISE_CONSTANT = Absent("PIECEWISE_CONSTANT")
"""``deriv`` of a unary row whose derivative is zero wherever it exists (``sign``)."""


class RowDefault:
    """A family default that depends on the row (its ``impl`` or its name), named."""

    def __init__(self, meaning: str) -> None:
        self.meaning = meaning

    def __repr__(self) -> str:
        return self.meaning


SAME_AS_IMPL = RowDefault("SAME_AS_IMPL")
"""``sympy`` of a row whose ``impl`` already works on object arrays of SymPy values."""
STACKED = RowDefault("STACKED")
"""``batch`` of a matrix function: the function of the stack (:func:`stack_batch`)."""


class objectwise:
    """A scalar SymPy function applied to each element of object arrays; a
    :class:`~difgen.core.primitive.Deferred` one (``rule``) is imported on the
    first call."""

    def __init__(self, fn: Callable[..., Any], nin: int) -> None:
        self.rule = fn
        self.nin = nin
        self._ufunc: Any = None

    def __call__(self, *args: Any) -> Any:
        if self._ufunc is None:
            self._ufunc = np.frompyfunc(resolved(self.rule), self.nin, 1)
        return np.asarray(self._ufunc(*args), dtype=object)


# ------------------------------------------------------------------------ work
def size_work(eqn: Eqn) -> int:
    """One unit per element of the largest of the output and the inputs: a NumPy
    call touches each element about once."""
    return max(eqn.out.size, max((a.size for a in eqn.inputs), default=1))


def cubic_work(eqn: Eqn) -> int:
    """A factorization of each n x n matrix of the stack: n^3."""
    shape = eqn.inputs[0].shape
    return int(np.prod(shape[:-2], dtype=np.int64)) * shape[-1] ** 3


# ----------------------------------------------------------------- elementwise
def elementwise(
    name: str,
    impl: Rule,
    numpy: Rule,
    *,
    arity: int,
    jvp: Rule | Absent = MISSING,
    transpose: Rule | Absent = NOT_LINEAR,
    sympy: Rule = MISSING,
    simplify: Rule | Absent = NO_IDENTITIES,
    commutative: bool = False,
    sparsity: Rule = patterns.union,
    c_loop: LoopForm | Absent = ELEMENTWISE_LOOP,
    scalar: ScalarHelper | Absent = NO_HELPER,
) -> Primitive:
    """A float-valued elementwise primitive: NumPy broadcasting for its shape and its
    batch rule; ``sympy`` is the scalar SymPy function, applied element by element."""
    return Primitive(
        name=name,
        impl=impl,
        shape_rule=broadcasting(name, "float64"),
        numpy=numpy,
        jvp=jvp,
        transpose=transpose,
        batch=elementwise_batch(name),
        sympy=MISSING if sympy is MISSING else objectwise(sympy, arity),
        simplify=simplify,
        commutative=commutative,
        sparsity=sparsity,
        work=size_work,
        scalarizable=True,
        view=False,
        elementwise=True,
        c_loop=c_loop,
        scalar=scalar,
        cost="elementwise",
    )


def unary_jvp(deriv: Callable[[Any, Any], Any] | Absent) -> Rule:
    """The chain rule for a unary row with derivative ``deriv(x, y)``."""

    def jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
        """Chain rule: the tabulated derivative times the tangent."""
        (x,), (dx,) = primals, tangents
        if isinstance(deriv, Absent) or dx is None:
            return None
        return deriv(x, out) * dx

    return jvp


def _function_name(sympy: Rule) -> str:
    """The ``__name__`` of a SymPy function, without importing a deferred one."""
    return sympy.name if isinstance(sympy, Deferred) else sympy.__name__


def unary(
    name: str,
    impl: Rule,
    numpy: Rule,
    *,
    deriv: Callable[[Any, Any], Any] | Absent = MISSING,
    sympy: Rule = MISSING,
    sparsity: Rule = patterns.union,
    c_loop: LoopForm | Absent = ELEMENTWISE_LOOP,
    scalar: str | Absent = MISSING,
) -> Primitive:
    """A unary function with its derivative dy/dx written as ``deriv(x, y)`` in NumPy
    (``PIECEWISE_CONSTANT``: zero); ``scalar`` is its helper family in scalar code
    (``"fast"``, ``"safe"``, ``"numpy"``: see :class:`ScalarHelper`, named after its
    SymPy function and its NumPy ``impl``), or ``NO_HELPER``."""
    jvp = MISSING if deriv is MISSING else unary_jvp(deriv)
    helper: ScalarHelper | Absent = (
        ScalarHelper(_function_name(sympy), scalar, f"np.{impl.__name__}")
        if isinstance(scalar, str)
        else scalar
    )
    return elementwise(
        name,
        impl,
        numpy,
        arity=1,
        jvp=jvp,
        sympy=sympy,
        sparsity=sparsity,
        c_loop=c_loop,
        scalar=helper,
    )


def binary(
    name: str,
    impl: Rule,
    numpy: Rule,
    *,
    jvp: Rule = MISSING,
    transpose: Rule | Absent = NOT_LINEAR,
    sympy: Rule = MISSING,
    simplify: Rule | Absent = NO_IDENTITIES,
    commutative: bool = False,
    c_loop: LoopForm | Absent = ELEMENTWISE_LOOP,
) -> Primitive:
    """A binary elementwise function with its JVP."""
    return elementwise(
        name,
        impl,
        numpy,
        arity=2,
        jvp=jvp,
        transpose=transpose,
        sympy=sympy,
        simplify=simplify,
        commutative=commutative,
        c_loop=c_loop,
    )


def selector(
    name: str,
    impl: Rule,
    numpy: Rule,
    *,
    sympy: Rule = MISSING,
    arity: int = 2,
    commutative: bool = False,
) -> Primitive:
    """A comparison or logical operation: boolean output, which carries no tangent
    (and so no dependence)."""
    return Primitive(
        name=name,
        impl=impl,
        shape_rule=broadcasting(name, "bool"),
        numpy=numpy,
        jvp=NOT_DIFFERENTIABLE,
        transpose=NOT_LINEAR,
        batch=elementwise_batch(name),
        sympy=MISSING if sympy is MISSING else objectwise(sympy, arity),
        simplify=NO_IDENTITIES,
        commutative=commutative,
        sparsity=patterns.no_dependence,
        work=size_work,
        scalarizable=True,
        view=False,
        elementwise=True,
        c_loop=ELEMENTWISE_LOOP,
        scalar=NO_HELPER,
        cost="elementwise",
    )


# ------------------------------------------------------------------ reductions
def reduced_shape(x: Aval, axes: Any) -> Aval:
    """Shape rule of a reduction: the reduced axes disappear."""
    return tuple(n for i, n in enumerate(x[0]) if i not in axes), x[1]


def reduction(
    name: str,
    impl: Rule,
    numpy: Rule,
    *,
    jvp: Rule = MISSING,
    transpose: Rule | Absent = NOT_LINEAR,
    sympy: Rule = MISSING,
    shape_rule: Rule = reduced_shape,
    simplify: Rule | Absent = NO_IDENTITIES,
    sparsity: Rule = patterns.reduced,
    c_loop: LoopForm | Absent = MISSING,
    cost: str = "reducing",
) -> Primitive:
    """A reduction (or cumulative operation) over static ``axes``/``axis``, whose
    batch rule shifts the axes past the batch axis; ``c_loop`` is the row's own (its
    C accumulator, or why it has none)."""
    return Primitive(
        name=name,
        impl=impl,
        shape_rule=shape_rule,
        numpy=numpy,
        jvp=jvp,
        transpose=transpose,
        batch=axes_batch(name),
        sympy=sympy,
        simplify=simplify,
        commutative=False,
        sparsity=sparsity,
        work=size_work,
        scalarizable=True,
        view=False,
        elementwise=False,
        c_loop=c_loop,
        scalar=NO_HELPER,
        cost=cost,
    )


# ------------------------------------------------------------------ structural
def structural(
    name: str,
    impl: Rule,
    numpy: Rule,
    *,
    jvp: Rule = MISSING,
    transpose: Rule = MISSING,
    shape_rule: Rule = MISSING,
    batch: Rule | Absent = MISSING,
    sympy: Rule | RowDefault = SAME_AS_IMPL,
    sparsity: Rule = MISSING,
    simplify: Rule | Absent = NO_IDENTITIES,
    view: bool = False,
    cost: str = "moving",
) -> Primitive:
    """A linear operation that moves, copies or joins elements without arithmetic
    (moving elements works on object arrays: ``sympy`` is ``impl`` by default)."""
    return Primitive(
        name=name,
        impl=impl,
        shape_rule=shape_rule,
        numpy=numpy,
        jvp=jvp,
        transpose=transpose,
        batch=batch,
        sympy=impl if isinstance(sympy, RowDefault) else sympy,
        simplify=simplify,
        commutative=False,
        sparsity=sparsity,
        work=size_work,
        scalarizable=True,
        view=view,
        elementwise=False,
        c_loop=MOVES,
        scalar=NO_HELPER,
        cost=cost,
    )


# ---------------------------------------------------------------- linear algebra
def stack_batch(name: str) -> Rule:
    """The batch rule of a matrix function: NumPy's take stacks of matrices, so the
    batch is one more stack axis."""

    def rule(args: Any, batched: Any, k: int) -> Any:
        """NumPy's matrix functions take stacks: the batch is one more stack axis."""
        return bind_name(name, args[0])

    return rule


def contraction(
    name: str,
    impl: Rule,
    numpy: Rule,
    *,
    jvp: Rule = MISSING,
    transpose: Rule = MISSING,
    sympy: Rule = MISSING,
    shape_rule: Rule = MISSING,
    batch: Rule = MISSING,
    work: Callable[[Eqn], int] = MISSING,
    simplify: Rule | Absent = NO_IDENTITIES,
    sparsity: Rule = patterns.all_inputs,
    c_loop: LoopForm | Absent = MISSING,
) -> Primitive:
    """A multilinear product (``matmul``, ``einsum``): linear in each operand; its
    ``work`` counts the multiply-adds of the contraction."""
    return Primitive(
        name=name,
        impl=impl,
        shape_rule=shape_rule,
        numpy=numpy,
        jvp=jvp,
        transpose=transpose,
        batch=batch,
        sympy=sympy,
        simplify=simplify,
        commutative=False,
        sparsity=sparsity,
        work=work,
        scalarizable=True,
        view=False,
        elementwise=False,
        c_loop=c_loop,
        scalar=NO_HELPER,
        cost="by_work",
    )


def matrix_function(
    name: str,
    impl: Rule,
    numpy: Rule,
    *,
    jvp: Rule | Absent = MISSING,
    transpose: Rule | Absent = NOT_LINEAR,
    sympy: Rule = MISSING,
    shape_rule: Rule = MISSING,
    batch: Rule | RowDefault = STACKED,
    sparsity: Rule = patterns.all_inputs,
) -> Primitive:
    """A LAPACK-backed function of a (stack of) square matrices: cubic work, and
    never scalarized."""
    return Primitive(
        name=name,
        impl=impl,
        shape_rule=shape_rule,
        numpy=numpy,
        jvp=jvp,
        transpose=transpose,
        batch=stack_batch(name) if isinstance(batch, RowDefault) else batch,
        sympy=sympy,
        simplify=NO_IDENTITIES,
        commutative=False,
        sparsity=sparsity,
        work=cubic_work,
        scalarizable=False,
        view=False,
        elementwise=False,
        c_loop=no_loop_form("a LAPACK factorization (NumPy's own call)"),
        scalar=NO_HELPER,
        cost="by_work",
    )


def control(
    name: str,
    impl: Rule,
    *,
    shape_rule: Rule,
    numpy: Statements,
    jvp: Rule,
    transpose: Rule,
    batch: Rule,
    sympy: Rule,
    work: Rule,
) -> Primitive:
    """A control-flow primitive whose params hold sub-graphs (``cond``,
    ``while_loop``, ``sweep``): its rules are transforms of those graphs, so every
    rule is the row's own; what the family implies is that each output may depend on
    every input, and that it is never simplified, reordered, scalarized or a view."""
    return Primitive(
        name=name,
        impl=impl,
        shape_rule=shape_rule,
        numpy=numpy,
        jvp=jvp,
        transpose=transpose,
        batch=batch,
        sympy=sympy,
        simplify=NO_IDENTITIES,
        commutative=False,
        sparsity=patterns.all_inputs,
        work=work,
        scalarizable=False,
        view=False,
        elementwise=False,
        c_loop=no_loop_form("control flow (its sub-graphs run in Python)"),
        scalar=NO_HELPER,
        cost="by_work",
    )
