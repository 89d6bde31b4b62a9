"""The primitive declaration and the registry every family table adds to.

A primitive is declared once, with every fact each stage needs, and no field has a
silent default: a family helper (:mod:`difgen.primitives.family`) fills its family's
defaults explicitly, a rule a primitive does not have is an explicit :class:`Absent`
value (``NOT_LINEAR``, ``NOT_DIFFERENTIABLE``...), and a field nobody declared holds
:data:`MISSING`, which the coverage test refuses.

- ``impl``: NumPy evaluation (the reference interpreter, and constant folding);
- ``shape_rule``: output (shape, dtype) from input (shape, dtype), called as
  ``shape_rule(*avals, **params)`` (elementwise rows: NumPy broadcasting);
- ``numpy``: its vectorized NumPy source form, ``numpy(args, params, avals)``: the
  operands as :class:`~difgen.core.expr.Expr` (which carry their precedence) and
  the input avals (for forms that depend on the shapes), returning an ``Expr``, or
  a list of statements assigning ``OUT``; for control flow a :class:`Statements`
  value naming the statement the NumPy printer writes (``if``, ``while``, ``for``);
- ``c_loop``: how the C loops (``targets/c``) compute it, a :class:`LoopForm`
  (elementwise from its SymPy rule, optionally NumPy's own ufunc loop over many
  elements; a structural move; a reduction with its C accumulator; matmul), or an
  ``Absent("NO_LOOP_FORM: why")``, which keeps the operator in vector code;
- ``scalar``: the scalar printers' helper of a unary (:class:`ScalarHelper`: the
  ``math`` fast path, or NumPy's own function, a floats helper returns), or
  ``NO_HELPER`` where its SymPy rule prints without one;
- ``cost``: its cost class (:data:`COST_CLASSES`): how many input elements one
  output element combines, for the expression-size estimate of the cost model;
- ``jvp``: ``jvp(out, primals, tangents, **params) -> tangent`` written in plain NumPy
  on tracer values (a tangent of ``None`` is a symbolic zero), or
  ``NOT_DIFFERENTIABLE`` for selectors, whose outputs carry no tangent;
- ``transpose``: linear primitives only, ``transpose(ct, *inputs, **params)`` returns
  one cotangent per input (``None`` where the input is not linear), inputs that are
  linear arrive as :class:`Linear` markers; ``NOT_LINEAR`` otherwise;
- ``batch``: ``batch(args, batched, k, **params)`` evaluates the primitive when the
  inputs flagged in ``batched`` carry an extra leading axis of size ``k``, returning
  the result with that axis in front (the vmap rule);
- ``sympy``: evaluation on object arrays of SymPy expressions; a rule that needs
  SymPy is named, not imported (:class:`Deferred`: ``"sympy:sin"``, or a head of
  :mod:`difgen.primitives.heads`), so declaring the primitives imports no SymPy
  and a trace build that never lowers to SymPy never pays for it;
- ``simplify``: its algebraic identities, ``simplify(atoms, params, context)``
  (:mod:`difgen.core.simplify`), or ``NO_IDENTITIES``;
- ``commutative``: operands in either order are one value (CSE modulo commutativity);
- ``sparsity``: its Jacobian sparsity rule, ``sparsity(eqn, patterns, n)``
  (:mod:`difgen.primitives.patterns`);
- ``work``: elements of work of one equation, ``work(eqn)``, for the cost model;
- ``scalarizable``: False for matrix factorizations, whose closed forms (cofactors,
  nested square roots) grow much faster than LAPACK's cost;
- ``view``: the result may be a NumPy view of the first input (so a result that
  returns it is copied);
- ``elementwise``: NumPy broadcasting applies (the identities narrow such operands).

``linear`` and ``differentiable`` are read off ``transpose`` and ``jvp``, so they
cannot disagree with the rules.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from difgen.core.expr import Aval, NumpyForm
from difgen.core.location import user_location
from difgen.errors import TraceError

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Linear:
    """Marks the input a transpose rule must produce a cotangent for."""

    shape: Shape
    dtype: str = "float64"

    @property
    def ndim(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class Absent:
    """An explicit "this primitive has none" for a rule field, saying why.

    A rule that is absent on purpose reads differently from one nobody declared
    (:data:`MISSING`), so the coverage test can tell the two apart.
    """

    reason: str

    def __repr__(self) -> str:
        return self.reason


NOT_LINEAR = Absent("NOT_LINEAR")
"""``transpose`` of a primitive that is not linear in any input."""
NOT_DIFFERENTIABLE = Absent("NOT_DIFFERENTIABLE")
"""``jvp`` of a selector (comparison, sign of a determinant): no tangent flows."""
NO_INPUTS = Absent("NO_INPUTS")
"""``batch`` of a primitive without inputs, which a batch axis never reaches."""
NO_IDENTITIES = Absent("NO_IDENTITIES")
"""``simplify`` of a primitive that no algebraic identity rewrites."""


def no_loop_form(why: str) -> Absent:
    """``c_loop`` of a primitive the C loops do not compute, saying why."""
    return Absent(f"NO_LOOP_FORM: {why}")


CAST_AT_BOUNDARY = no_loop_form(
    "int64 data cast to float64 (read as doubles when it is an argument)"
)
"""``c_loop`` of the cast of int64 data to float64: the loops compute in doubles
and have no int64 values, but an int64 *argument* only cast so is converted once
at the call's boundary, as NumPy casts it (:mod:`difgen.targets.c.ints`)."""


INDEXED = ("gather", "scatter")
"""The loop forms through a run-time index (:data:`GATHER_LOOP`,
:data:`SCATTER_LOOP`)."""


@dataclass(frozen=True)
class LoopForm:
    """How the C loops compute a primitive (data only: ``targets/c`` reads it).

    ``kind`` is ``"elementwise"`` (the element's C from the SymPy rule, fused into
    loops over one shape), ``"structural"`` (a move of elements, derived from
    ``impl`` run on element references), ``"reduction"`` (``start`` is the C
    accumulator's start, ``update`` its update with ``{acc}`` and ``{v}``) or
    ``"matmul"``, ``"scan"`` (a cumulative operation along one axis: ``update``
    combines the previous element's result ``{acc}`` with the element ``{v}``,
    the first element is itself), or ``"gather"``/``"scatter"`` (a read, or an ``np.add.at`` into
    zeros, through a run-time index along one axis: the index the first operand
    after the array, :mod:`difgen.targets.c.indexed`). ``ufunc``: an elementwise transcendental whose NumPy loop (SIMD)
    beats the C library's per element, called on many elements. ``calls``: the
    helpers of the C runtime a reduction's ``update`` calls (``_maximum``), which
    the C file then carries.

    Two facts of an elementwise element's C: ``conditions``, its boolean operands
    enter the SymPy rule as conditions (``x != 0``) even when the result is a
    double (``where``'s first operand; booleans are doubles 0.0/1.0 in the
    loops); ``at_literals``, ``(operand, value, form)``: where that operand is
    the literal ``value``, the element is the C ``form`` of the operands
    (``{0}``, ``{1}``...) instead of the rule's, as NumPy takes a fast path there
    (``pow``'s ``x ** 0.5`` is NumPy's ``sqrt``).
    """

    kind: str
    start: str = ""
    update: str = ""
    ufunc: bool = False
    calls: tuple[str, ...] = ()
    conditions: bool = False
    at_literals: tuple[tuple[int, float, str], ...] = ()

    def __post_init__(self) -> None:
        kinds = ("elementwise", "structural", "reduction", "scan", "matmul", *INDEXED)
        if self.kind not in kinds:
            raise ValueError(f"unknown loop form {self.kind!r}")
        if self.kind == "scan":
            if self.start or not self.update:
                raise ValueError("a scan's loop form has an update and no start")
        elif (self.kind == "reduction") != bool(self.start and self.update):
            raise ValueError("a reduction's loop form (only) has start and update")
        if self.ufunc and self.kind != "elementwise":
            raise ValueError("only an elementwise loop form calls a NumPy ufunc")
        if (self.conditions or self.at_literals) and self.kind != "elementwise":
            raise ValueError("only an elementwise loop form has element facts")


ELEMENTWISE_LOOP = LoopForm("elementwise")
"""``c_loop`` of an elementwise row: its element's C, fused with its neighbours."""
UFUNC_LOOP = LoopForm("elementwise", ufunc=True)
"""``c_loop`` of a large transcendental: NumPy's own ufunc loop on many elements."""
SELECT_LOOP = LoopForm("elementwise", conditions=True)
"""``c_loop`` of a selection (``where``): elementwise, its boolean operand the
condition."""
MOVES = LoopForm("structural")
"""``c_loop`` of a structural row: the element moves read off its ``impl``."""
MATMUL_LOOP = LoopForm("matmul")
"""``c_loop`` of ``matmul``: a loop of multiply-adds, or NumPy's dot when large."""


GATHER_LOOP = LoopForm("gather")
"""``c_loop`` of a gather through a run-time index: the C loops read an int64
index *argument* (converted at the call's boundary, as a cast is) along one
axis; any other index keeps the operator in vector code."""
SCATTER_LOOP = LoopForm("scatter")
"""``c_loop`` of a scatter-add through a run-time index (a gather's transpose),
under the gather's conditions."""


def reduction_loop(start: str, update: str, calls: tuple[str, ...] = ()) -> LoopForm:
    """``c_loop`` of a reduction: its C accumulator's ``start`` and ``update``
    (which calls the C runtime's ``calls``)."""
    return LoopForm("reduction", start=start, update=update, calls=calls)


def scan_loop(update: str) -> LoopForm:
    """``c_loop`` of a cumulative operation (``cumsum``): each element along the
    axis is ``update`` of the previous result ``{acc}`` and the element ``{v}``,
    in order, as NumPy's ``accumulate`` computes it."""
    return LoopForm("scan", update=update)


COST_CLASSES = (
    "elementwise",
    "moving",
    "reducing",
    "accumulating",
    "by_work",
    "opaque",
)
"""What one output element combines, by class: ``elementwise`` and ``moving`` (moves,
copies or makes elements): one element of each input; ``reducing``: the input size
over the output size of them; ``accumulating``: a whole axis (its last element);
``by_work``: its ``work`` over the output size (contractions, factorizations,
control flow); ``opaque``: run-time data NumPy computes, never written out as an
expression (counted as one node)."""


NO_HELPER = Absent("NO_HELPER")
"""``scalar`` of a primitive the scalar printers print from its SymPy rule alone."""


@dataclass(frozen=True)
class ScalarHelper:
    """How the scalar printers (Python floats, C) call a unary's SymPy function
    (data only: ``targets/python`` and ``targets/c`` read it).

    ``function`` is the SymPy function's name, as the printers meet it (``asin``);
    ``family`` is ``"fast"`` (``math``'s function where it returns, NumPy's value
    where it raises: the helper ``_<function>`` of :mod:`difgen.floats`),
    ``"safe"`` (``math``'s function never raises: called as it is) or ``"numpy"``
    (``math``'s differs from NumPy's in the last bit: the helper calls NumPy, one
    float at a time); ``numpy`` is the NumPy function whose values the helper
    returns (``np.arcsin``).
    """

    function: str
    family: str
    numpy: str

    def __post_init__(self) -> None:
        if self.family not in ("fast", "safe", "numpy"):
            raise ValueError(f"unknown scalar helper family {self.family!r}")

    @property
    def fast(self) -> str:
        """The ``math`` function of the fast path (``fast`` and ``safe``)."""
        return f"math.{self.function}"


@dataclass(frozen=True)
class Statements:
    """The NumPy form of a control-flow primitive: the statement the NumPy printer
    writes for it (``"if"``, ``"while"``, or ``"for"``), its blocks printed from the
    sub-graphs in the params. Data only: the printer holds the builders."""

    statement: str

    def __post_init__(self) -> None:
        if self.statement not in ("if", "while", "for"):
            raise ValueError(f"unknown statement form {self.statement!r}")


class Deferred:
    """A rule named by where it lives, ``"package.module:attribute"``, imported on
    its first call (then called directly). ``name`` is the ``__name__`` of what it
    names (the scalar printers map a SymPy function by it), given where a head
    renames itself (``NpCbrt`` is ``cbrt``); a test resolves every deferred rule
    and checks both."""

    __slots__ = ("_target", "name", "path")

    def __init__(self, path: str, name: str | None = None) -> None:
        module, sep, attribute = path.partition(":")
        if not (sep and module and attribute):
            raise ValueError(f"a deferred rule is 'module:attribute', not {path!r}")
        self.path = path
        self.name = name or attribute
        self._target: Callable[..., Any] | None = None

    def resolve(self) -> Callable[..., Any]:
        """The rule itself (imported once)."""
        if self._target is None:
            module, _, attribute = self.path.partition(":")
            self._target = getattr(importlib.import_module(module), attribute)
        return self._target

    def __call__(self, *args: Any, **params: Any) -> Any:
        return self.resolve()(*args, **params)

    def __repr__(self) -> str:
        return f"Deferred({self.path!r})"


def resolved(rule: Any) -> Any:
    """``rule`` itself, or what it names when it is :class:`Deferred`."""
    return rule.resolve() if isinstance(rule, Deferred) else rule


class Missing:
    """The value of a field no declaration gave (refused by the coverage test)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = Missing()


@dataclass(frozen=True, eq=False)
class Primitive:
    """One operation of the IR; see the module docstring for each field."""

    name: str
    impl: Callable[..., Any]
    shape_rule: Callable[..., Aval]
    numpy: NumpyForm | Statements
    jvp: Callable[..., Any] | Absent
    transpose: Callable[..., Any] | Absent
    batch: Callable[..., Any] | Absent
    sympy: Callable[..., Any]
    simplify: Callable[..., Any] | Absent
    commutative: bool
    sparsity: Callable[..., Any]
    work: Callable[[Any], int]
    scalarizable: bool
    view: bool
    elementwise: bool
    c_loop: LoopForm | Absent
    scalar: ScalarHelper | Absent
    cost: str

    def __post_init__(self) -> None:
        if not isinstance(self.cost, Missing) and self.cost not in COST_CLASSES:
            raise ValueError(f"{self.name}: unknown cost class {self.cost!r}")

    def __repr__(self) -> str:
        return f"{self.name}_p"

    @property
    def linear(self) -> bool:
        """Linear primitives are exactly those with a transpose rule."""
        return not isinstance(self.transpose, Absent)

    @property
    def differentiable(self) -> bool:
        """Selectors (no JVP rule) carry no tangent; everything else does."""
        return not isinstance(self.jvp, Absent)

    def out_aval(self, avals: list[Aval], params: dict[str, Any]) -> Aval:
        """Shape and dtype of the output for inputs of the given shapes and dtypes."""
        return self.shape_rule(*avals, **params)

    def lower_sympy(self, *args: Any, **params: Any) -> Any:
        """Evaluate on object arrays of SymPy expressions."""
        return self.sympy(*args, **params)


def missing_fields(prim: Primitive) -> list[str]:
    """The fields of ``prim`` that no declaration gave."""
    return [f.name for f in fields(prim) if isinstance(getattr(prim, f.name), Missing)]


def broadcasting(name: str, dtype: str) -> Callable[..., Aval]:
    """The shape rule of an elementwise primitive: NumPy broadcasting of the inputs,
    reported at the user's line when the shapes do not broadcast."""

    def rule(*avals: Aval) -> Aval:
        if dtype == "float64" and any(d == "int64" for _, d in avals):
            # a float64 row would record NumPy's int64 result as float64: the
            # frontend converts run-time ints first, so this is a path it missed
            raise TypeError(f"{name} of run-time int64 values is not supported")
        try:
            dims = [tuple(s) for s, _ in avals]
            if dims and dims.count(dims[0]) == len(dims):  # NumPy's call is slow
                shape = dims[0]
            else:
                shape = tuple(np.broadcast_shapes(*dims))
        except ValueError:
            shapes = " ".join(str(tuple(s)) for s, _ in avals)
            raise TraceError(
                f"{user_location()}: operands could not be broadcast together "
                f"with shapes {shapes} (in {name})"
            ) from None
        return shape, dtype

    return rule


def dummy(shape: Shape, dtype: str) -> np.ndarray:
    """A zero-strided stand-in array of this shape and dtype (for shape rules)."""
    value: np.ndarray = np.zeros((), dtype=np.bool_ if dtype == "bool" else np.float64)
    if dtype != "bool":
        value = value + 0.5
    return np.broadcast_to(value, shape)


PRIMITIVES: dict[str, Primitive] = {}


def register(prim: Primitive) -> Primitive:
    """Add ``prim`` to the registry (names are unique)."""
    if prim.name in PRIMITIVES:
        raise ValueError(f"primitive {prim.name!r} declared twice")
    PRIMITIVES[prim.name] = prim
    return prim


def scalar_helpers() -> dict[str, ScalarHelper]:
    """The scalar helper of each registered primitive that has one, by its SymPy
    function's name (what the scalar printers map)."""
    return {
        prim.scalar.function: prim.scalar
        for prim in PRIMITIVES.values()
        if isinstance(prim.scalar, ScalarHelper)
    }


def unbroadcast(value: Any, shape: Shape) -> Any:
    """Sum ``value`` down to ``shape`` (the transpose of NumPy broadcasting)."""
    vshape = tuple(np.shape(value))
    if vshape == tuple(shape):
        return value
    lead = len(vshape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and vshape[lead + i] != 1
    )
    if axes:
        value = np.sum(value, axis=axes)
    return np.reshape(value, shape) if tuple(np.shape(value)) != tuple(shape) else value
