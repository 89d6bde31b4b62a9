"""Algebraic identities applied as equations are recorded (and so after each transform).

Each rule sees the input atoms of a would-be equation and returns an existing value
instead (a Var or a constant array), a simpler equation's result (recorded through
``bind``, so rules compose), or None to record the equation as it is. Constant folding
itself happens in ``bind``: an equation whose inputs are all constants is evaluated.

The identities: ``x + 0``, ``x * 1``, ``x * 0``, ``x / 1``, ``x ** 1``, ``x ** 0``,
``-(-x)``, ``0 - x``, ``x + (-y)``, ``c1 * (c2 * x)``, ``-(c * x)``, ``x + x``,
``sum(-x)``, ``(p * T) * u`` with small p and u (reassociated to ``(p * u) * T``),
reshape of reshape, transpose of transpose, broadcast of broadcast, sums over
size-1 axes, ``where`` with equal branches or a constant condition, operands of
elementwise primitives that are only broadcasts (or uniform constants) of something
smaller, ``x * ones`` of a smaller ``x`` as a broadcast, an elementwise operation
of one broadcast and scalar literals as the broadcast of the operation, scatters
into zeros added one by one (``(x + s1) + s2``, derivative code) as one scatter,
and commutative operands in either order (CSE modulo commutativity).

Each primitive names its rule in its declaration (``Primitive.simplify``, or
``NO_IDENTITIES``) and says whether it commutes (``Primitive.commutative``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from difgen.core.ir import Atom, Lit, Params, Var
from difgen.core.primitive import PRIMITIVES, Absent

Result = Var | np.ndarray | None
# What recording an equation gives back: a Var, or an array when it folded.
Bound = Var | np.ndarray


def _is_const(atom: Atom, value: float) -> bool:
    if not isinstance(atom, Lit) or atom.dtype == "bool":
        return False
    if atom.value.ndim == 0:  # the common case, without np.all's overhead
        return bool(atom.value == value)
    return bool(np.all(atom.value == value))


def _scalar_lit(atom: Atom) -> float | None:
    if isinstance(atom, Lit) and atom.dtype != "bool" and atom.value.ndim == 0:
        return float(atom.value)
    return None


def _out_shape(atoms: Sequence[Atom]) -> tuple[int, ...]:
    """The broadcast shape of ``atoms`` (ValueError if they do not broadcast)."""
    shapes = [a.shape for a in atoms]
    if shapes and shapes.count(shapes[0]) == len(shapes):  # NumPy's call is slow
        return tuple(shapes[0])
    return tuple(np.broadcast_shapes(*shapes))


def _keep(atom: Atom, atoms: list[Atom]) -> Result:
    """``atom`` itself, if it already has the output's shape and is a float64 value
    (``mask * 1.0`` is the float array of the mask, not the boolean mask)."""
    if (
        isinstance(atom, Var)
        and atom.shape == _out_shape(atoms)
        and atom.dtype == "float64"
    ):
        return atom
    return None


def _spread(atom: Atom, atoms: list[Atom], cx: Context) -> Result:
    """``atom`` broadcast to the output's shape, if it is a smaller float64 value:
    ``x * ones(n)`` (how a scalar meets a vector's tangent) is a broadcast, a view
    that the elementwise operations reading it narrow away again (no temporary of
    the full size, no multiplication)."""
    out = _out_shape(atoms)
    if isinstance(atom, Var) and atom.shape != out and atom.dtype == "float64":
        return cx.bind("broadcast_to", atom, shape=out)
    return None


def _zeros(atoms: list[Atom]) -> np.ndarray:
    return np.zeros(_out_shape(atoms))


BindAtoms = Callable[[Any, str, Sequence[Atom | np.ndarray], dict[str, Any]], Bound]


class Context:
    """What a rule may look at: the producers of Vars, and a way to record.

    ``bind_atoms`` is the tracer's ``bind`` over atoms, handed in by the tracer that
    calls :func:`simplify` (this module sits below it and does not import it).
    """

    def __init__(self, builder: Any, bind_atoms: BindAtoms, relaxed: bool) -> None:
        self.builder = builder
        self._bind_atoms = bind_atoms
        self.relaxed = relaxed

    def producer(self, atom: Atom) -> Any:
        return self.builder.producer.get(atom) if isinstance(atom, Var) else None

    def made_by(self, atom: Atom, name: str) -> Any:
        """The equation producing ``atom`` when its primitive is the one registered
        as ``name`` (the object itself, not a primitive of the same name)."""
        eqn = self.producer(atom)
        return (
            eqn if eqn is not None and eqn.primitive is PRIMITIVES.get(name) else None
        )

    def bind(self, name: str, *atoms: Atom | np.ndarray, **params: Any) -> Bound:
        """Record (or simplify, or fold) ``name(*atoms, **params)``."""
        return self._bind_atoms(self.builder, name, atoms, params)


Rule = Callable[[list[Atom], dict[str, Any], Context], Result]


# ------------------------------------------------------------------ arithmetic
def add_identities(atoms: list[Atom], params: dict[str, Any], cx: Context) -> Result:
    """``x + 0``, ``x + (-y)``, ``x + x``, added scatters into zeros, ``x + c*y``
    with c < 0."""
    a, b = atoms
    # x + 0 is x only up to the sign of zero (-0.0 + 0.0 is 0.0): relaxed only.
    if _is_const(b, 0.0) and cx.relaxed:
        return _keep(a, atoms)
    if _is_const(a, 0.0) and cx.relaxed:
        return _keep(b, atoms)
    if (neg := cx.made_by(b, "neg")) is not None:
        return cx.bind("sub", a, neg.inputs[0])
    if (neg := cx.made_by(a, "neg")) is not None:
        return cx.bind("sub", b, neg.inputs[0])
    if a is b and isinstance(a, Var):
        return cx.bind("mul", a, Lit(np.asarray(2.0)))
    if (scatters := _scatters(a, b, cx)) is not None:
        return scatters
    if cx.relaxed and (gathered := _scatters_gathered(a, b, cx)) is not None:
        return gathered
    for x, y in ((a, b), (b, a)):
        if (neg := _negative_multiple(y, cx)) is not None:
            return cx.bind("sub", x, neg)
    return None


def _negative_multiple(atom: Atom, cx: Context) -> Result:
    """``c * x`` with a negative constant c, as ``(-c) * x``; else None."""
    eqn = cx.made_by(atom, "mul")
    if eqn is None:
        return None
    for i, x in enumerate(eqn.inputs):
        c = _scalar_lit(x)
        if c is not None and c < 0:
            return cx.bind("mul", Lit(np.asarray(-c)), eqn.inputs[1 - i])
    return None


Placed = Callable[[Any], tuple[list[Atom], list[Any]]]
"""How to read an equation that places values into zeros: (values, their indices)."""

PLACED: dict[Any, Placed] = {}
"""The primitives whose result is values placed into zeros (``out = zeros(shape);
out[index_i] += value_i``), by primitive object, each with how to read its
equations: the sum of two such results is one ``scatter_sum`` of all their
values. Each primitive declares it with :func:`places_into_zeros`."""


def places_into_zeros(prim: Any, read: Placed) -> None:
    """Declare that ``prim``'s result is values placed into zeros, read by ``read``."""
    PLACED[prim] = read


EYES: set[Any] = set()
"""The primitives whose result of a one-axis ``shape`` param is the identity matrix
(the basis seed, which is not registered: it is never bound by name): a product
with it is the other factor. Each declares it with :func:`makes_the_identity`."""


def makes_the_identity(prim: Any) -> None:
    """Declare that ``prim`` of a one-axis ``shape`` makes the identity matrix."""
    EYES.add(prim)


def _scatters(a: Atom, b: Atom, cx: Context) -> Result:
    """Two scatters into zeros of the same shape, added: one scatter_sum."""
    parts = []
    for atom in (a, b):
        eqn = cx.producer(atom)
        if eqn is None or eqn.out.shape != _out_shape([a, b]):
            return None
        read = PLACED.get(eqn.primitive)
        if read is None:
            return None
        parts.append(read(eqn))
    values = parts[0][0] + parts[1][0]
    indices = tuple(parts[0][1] + parts[1][1])
    return cx.bind("scatter_sum", *values, indices=indices, shape=a.shape)


def _scatters_gathered(a: Atom, b: Atom, cx: Context) -> Result:
    """``(x + s1) + s2`` with ``s1`` and ``s2`` scatters into zeros of the sum's
    shape: ``x + (s1 + s2)``, one scatter of both (up to rounding where they
    overlap: relaxed only). The cotangents a transposition adds one by one (a
    Hessian's compressed products: the diagonal, then each slice) then cost one
    buffer of zeros and one full-size addition, not one each."""
    for inner, s2 in ((a, b), (b, a)):
        eqn = cx.made_by(inner, "add")
        if eqn is None or eqn.out.shape != _out_shape([a, b]):
            continue
        x, s1 = eqn.inputs
        if cx.producer(s1) is None or cx.producer(s1).primitive not in PLACED:
            x, s1 = s1, x
        if (both := _scatters(s1, s2, cx)) is not None:
            return cx.bind("add", x, both)
    return None


def sub_identities(atoms: list[Atom], params: dict[str, Any], cx: Context) -> Result:
    """``x - 0``, ``0 - x``, ``x - (-y)``, ``x - x``."""
    a, b = atoms
    if _is_const(b, 0.0):
        return _keep(a, atoms)
    # 0 - x is -x only up to the sign of zero (0.0 - 0.0 is 0.0): relaxed only.
    if _is_const(a, 0.0) and b.shape == _out_shape(atoms) and cx.relaxed:
        return cx.bind("neg", b)
    if (neg := cx.made_by(b, "neg")) is not None:
        return cx.bind("add", a, neg.inputs[0])
    if a is b and isinstance(a, Var) and cx.relaxed:  # finite only: inf - inf
        return _zeros(atoms)
    return None


def mul_identities(atoms: list[Atom], params: dict[str, Any], cx: Context) -> Result:
    """``x * 0``, ``x * 1``, ``-1 * x``, constants gathered, reciprocals cancelled."""
    a, b = atoms
    if (_is_const(a, 0.0) or _is_const(b, 0.0)) and (cx.relaxed or _finite(a, b)):
        return _zeros(atoms)  # finite only: inf * 0 is NaN
    if _is_const(b, 1.0):
        return _keep(a, atoms) or _spread(a, atoms, cx)
    if _is_const(a, 1.0):
        return _keep(b, atoms) or _spread(b, atoms, cx)
    if cx.relaxed and (selected := _into_where(a, b, "mul", cx)) is not None:
        return selected
    if cx.relaxed and (cancelled := _cancel_reciprocal(a, b, cx)) is not None:
        return cancelled
    # Rounding differs from the user's order in these three: relaxed only.
    if cx.relaxed and (quotient := _divide_instead(a, b, cx)) is not None:
        return quotient
    if cx.relaxed and (small_first := _small_factors_first(a, b, cx)) is not None:
        return small_first
    if isinstance(b, Lit) and not isinstance(a, Lit):
        a, b = b, a  # the constant first
    c = _scalar_lit(a)
    if c is None:
        return None
    if c == -1.0 and b.shape == _out_shape(atoms):
        return cx.bind("neg", b)
    inner = cx.made_by(b, "mul") if cx.relaxed else None
    if inner is not None:  # c1 * (c2 * x) = (c1 c2) * x, up to rounding
        consts = [_scalar_lit(x) for x in inner.inputs]
        for i, c2 in enumerate(consts):
            if c2 is not None:
                return cx.bind("mul", Lit(np.asarray(c * c2)), inner.inputs[1 - i])
    if (neg := cx.made_by(b, "neg")) is not None:
        return cx.bind("mul", Lit(np.asarray(-c)), neg.inputs[0])
    return None


def _into_where(a: Atom, b: Atom, name: str, cx: Context) -> Result:
    """``k * where(c, y, 0)`` is ``where(c, k * y, 0)`` (and likewise ``/ k`` and the
    zero on the other side): the unselected positions stay exact zeros even where
    ``k`` is NaN or inf. That is the point: the branch ``np.where`` leaves out is
    often undefined there (``where(x > 0, sqrt(x), 0)``), and its derivative factor
    would turn the zero cotangent into NaN, where the function is smooth.
    Finite-only, like every rewrite that drops ``0 * k``.
    """
    pairs = [(a, b)] if name == "div" else [(a, b), (b, a)]  # div: where / k
    out = _out_shape([a, b])
    for selected, factor in pairs:
        eqn = cx.made_by(selected, "where")
        if eqn is None or factor is selected:
            continue
        cond, yes, no = eqn.inputs
        if _is_const(no, 0.0) and not _is_const(yes, 0.0):
            args = (factor, yes) if name == "mul" else (yes, factor)
            return _broadcast(cx.bind("where", cond, cx.bind(name, *args), no), out, cx)
        if _is_const(yes, 0.0) and not _is_const(no, 0.0):
            args = (factor, no) if name == "mul" else (no, factor)
            return _broadcast(
                cx.bind("where", cond, yes, cx.bind(name, *args)), out, cx
            )
    return None


def _broadcast(value: Result, shape: tuple[int, ...], cx: Context) -> Result:
    """``value`` broadcast to ``shape`` (a where of smaller operands may be smaller)."""
    if value is None or tuple(np.shape(value)) == shape:
        return value
    return cx.bind("broadcast_to", value, shape=shape)


def _finite(*atoms: Atom) -> bool:
    """Whether every atom is a constant with finite values (never NaN or inf)."""
    return all(isinstance(a, Lit) and bool(np.all(np.isfinite(a.value))) for a in atoms)


def _divide_instead(a: Atom, b: Atom, cx: Context) -> Result:
    """``y * (1 / s)`` is ``y / s``: one operation over y instead of two."""
    for y, r in ((a, b), (b, a)):
        div = cx.made_by(r, "div")
        if (
            div is not None
            and _is_const(div.inputs[0], 1.0)
            and r.size < y.size
            and div.inputs[0].shape == ()
            and y.shape == _out_shape([a, b])
        ):
            return cx.bind("div", y, div.inputs[1])
    return None


def _cancel_reciprocal(a: Atom, b: Atom, cx: Context) -> Result:
    """``x * (c / x)`` is ``c``. Like x / x = 1, this assumes x != 0: where x is 0
    the product is NaN anyway (softmax's ``sum * (1 / sum)`` is the case in point)."""
    out = _out_shape([a, b])
    for x, y in ((a, b), (b, a)):
        div = cx.made_by(y, "div")
        if div is not None and div.inputs[1] is x and isinstance(div.inputs[0], Lit):
            return np.broadcast_to(div.inputs[0].value, out).copy()
    return None


def _small_factors_first(a: Atom, b: Atom, cx: Context) -> Result:
    """``(p * T) * u`` with p and u smaller than T (say a batch of tangents) is
    ``(p * u) * T``: one product over the large array instead of two."""
    out = _out_shape([a, b])
    size = int(np.prod(out, dtype=np.int64))
    for x, u in ((a, b), (b, a)):
        eqn = cx.made_by(x, "mul")
        if eqn is None or u.size >= size:
            continue
        for p, big in (eqn.inputs, eqn.inputs[::-1]):
            if p.size < size and big.shape == out and isinstance(big, Var):
                small = _out_shape([p, u])
                if int(np.prod(small, dtype=np.int64)) < size:
                    return cx.bind("mul", cx.bind("mul", p, u), big)
    return None


def div_identities(atoms: list[Atom], params: dict[str, Any], cx: Context) -> Result:
    """``0 / x``, ``x / x``, ``x / 1``."""
    a, b = atoms
    if cx.relaxed and (selected := _into_where(a, b, "div", cx)) is not None:
        return selected
    if _is_const(a, 0.0) and cx.relaxed:  # finite only: 0 / 0 is NaN
        return _zeros(atoms)
    if a is b and isinstance(a, Var) and cx.relaxed:  # finite, nonzero x only
        return np.ones(a.shape)
    return _keep(a, atoms) if _is_const(b, 1.0) else None


def pow_identities(atoms: list[Atom], params: dict[str, Any], cx: Context) -> Result:
    """``x ** 1``, ``x ** 0``."""
    a, b = atoms
    if _is_const(b, 1.0):
        return _keep(a, atoms)
    if _is_const(b, 0.0):
        return np.ones(_out_shape(atoms))
    return None


def neg_identities(atoms: list[Atom], params: dict[str, Any], cx: Context) -> Result:
    """``-(-x)``, ``-(c * x)``, ``-(a - b)``, ``-where(c, y, 0)``."""
    (x,) = atoms
    if (eqn := cx.made_by(x, "neg")) is not None:
        return eqn.inputs[0]
    if (eqn := cx.made_by(x, "mul")) is not None:
        for i, atom in enumerate(eqn.inputs):
            c = _scalar_lit(atom)
            if c is not None:
                return cx.bind("mul", Lit(np.asarray(-c)), eqn.inputs[1 - i])
    if cx.relaxed and (eqn := cx.made_by(x, "sub")) is not None:
        # -(a - b) is b - a up to the sign of zero (-(0.0 - 0.0) is -0.0)
        return cx.bind("sub", eqn.inputs[1], eqn.inputs[0])
    if cx.relaxed and (eqn := cx.made_by(x, "where")) is not None:
        # -where(c, y, 0) is where(c, -y, 0) up to the sign of zero: the selection
        # stays outermost, so a factor applied next is selected too (_into_where)
        cond, yes, no = eqn.inputs
        if _is_const(no, 0.0) and not _is_const(yes, 0.0) and yes.shape == x.shape:
            return cx.bind("where", cond, cx.bind("neg", yes), no)
        if _is_const(yes, 0.0) and not _is_const(no, 0.0) and no.shape == x.shape:
            return cx.bind("where", cond, yes, cx.bind("neg", no))
    return None


def where_identities(atoms: list[Atom], params: dict[str, Any], cx: Context) -> Result:
    """Equal branches, a constant condition, or a selection by the same constant
    condition in a branch (``where(c, where(c, x, y), z)`` is ``where(c, x, z)``)."""
    cond, a, b = atoms
    if a is b or (isinstance(a, Lit) and a == b):
        return _keep(a, atoms) if isinstance(a, Var) else None
    if isinstance(cond, Lit) and cond.value.all():
        return _keep(a, atoms)
    if isinstance(cond, Lit) and not cond.value.any():
        return _keep(b, atoms)
    if isinstance(cond, Lit):  # a selection by the same constant mask inside one
        inner_a, inner_b = cx.made_by(a, "where"), cx.made_by(b, "where")
        shape = _out_shape(atoms)
        if inner_a is not None and inner_a.inputs[0] == cond:
            picked = [cond, inner_a.inputs[1], b]
            if _out_shape(picked) == shape:
                return cx.bind("where", *picked)
        if inner_b is not None and inner_b.inputs[0] == cond:
            picked = [cond, a, inner_b.inputs[2]]
            if _out_shape(picked) == shape:
                return cx.bind("where", *picked)
    return None


# ------------------------------------------------------------------- structure
def reshape_identities(
    atoms: list[Atom], params: dict[str, Any], cx: Context
) -> Result:
    """Reshape to the same shape, of a reshape, or of an elementwise result."""
    (x,) = atoms
    shape = tuple(params["shape"])
    if x.shape == shape:
        return x if isinstance(x, Var) else None
    eqn = cx.made_by(x, "reshape")
    if eqn is not None:  # reshape of reshape
        return cx.bind("reshape", eqn.inputs[0], shape=shape)
    eqn = cx.producer(x)
    if (
        eqn is not None
        and eqn.primitive.elementwise
        and _strip_ones(shape) == _strip_ones(x.shape)
        and any(a.ndim > 0 for a in eqn.inputs)
        and all(
            a.ndim == 0 or (a.shape == x.shape and cx.made_by(a, "reshape"))
            for a in eqn.inputs
        )
    ):  # only size-1 axes change: reshape the operands instead (their reshapes fold)
        ops = [
            a if a.ndim == 0 else cx.bind("reshape", a, shape=shape) for a in eqn.inputs
        ]
        return cx.bind(eqn.primitive.name, *ops, **eqn.params.as_dict())
    return None


def transpose_identities(
    atoms: list[Atom], params: dict[str, Any], cx: Context
) -> Result:
    """The identity permutation, transpose of transpose, size-1 axes only."""
    (x,) = atoms
    axes = tuple(params["axes"])
    if axes == tuple(range(len(axes))):
        return x if isinstance(x, Var) else None
    eqn = cx.made_by(x, "transpose")
    if eqn is not None:  # transpose of transpose
        inner = eqn.params.as_dict()["axes"]
        return cx.bind("transpose", eqn.inputs[0], axes=tuple(inner[i] for i in axes))
    if sum(n != 1 for n in x.shape) <= 1:  # moving size-1 axes only: a reshape
        shape = tuple(x.shape[i] for i in axes)
        return cx.bind("reshape", x, shape=shape)
    return None


def broadcast_to_identities(
    atoms: list[Atom], params: dict[str, Any], cx: Context
) -> Result:
    """Broadcast to the same shape, or of a broadcast."""
    (x,) = atoms
    shape = tuple(params["shape"])
    if isinstance(x, Var) and x.shape == shape:
        return x
    eqn = cx.made_by(x, "broadcast_to")
    if eqn is not None:
        return cx.bind("broadcast_to", eqn.inputs[0], shape=shape)
    return None


def reduce_sum_identities(
    atoms: list[Atom], params: dict[str, Any], cx: Context
) -> Result:
    """Sums over size-1 axes, of a negation, of a scalar multiple or quotient."""
    (x,) = atoms
    axes = tuple(params["axes"])
    if all(x.shape[a] == 1 for a in axes):
        shape = tuple(n for i, n in enumerate(x.shape) if i not in axes)
        return cx.bind("reshape", x, shape=shape)
    if (neg := cx.made_by(x, "neg")) is not None:  # sum(-x) = -sum(x), exactly
        return cx.bind("neg", cx.bind("reduce_sum", neg.inputs[0], axes=axes))
    if not cx.relaxed:
        return None  # the two below are finite only: sum([inf * 1, inf * 0]) is NaN
    if (mul := cx.made_by(x, "mul")) is not None:  # sum(s * y) = s * sum(y), s 0-d
        for s, y in (mul.inputs, mul.inputs[::-1]):  # traced s: lets s cancel later
            if isinstance(s, Var) and s.shape == () and y.shape == x.shape:
                return cx.bind("mul", cx.bind("reduce_sum", y, axes=axes), s)
    if (div := cx.made_by(x, "div")) is not None:  # sum(y / s) = sum(y) / s, s 0-d
        y, s = div.inputs
        if isinstance(s, Var) and s.shape == () and y.shape == x.shape:
            return cx.bind("div", cx.bind("reduce_sum", y, axes=axes), s)
    return None


def getitem_identities(
    atoms: list[Atom], params: dict[str, Any], cx: Context
) -> Result:
    """Indexing with full slices only."""
    (x,) = atoms
    full = ("slice", None, None, None)
    if all(item == full for item in params["index"]) and isinstance(x, Var):
        return x
    return None


def matmul_identities(atoms: list[Atom], params: dict[str, Any], cx: Context) -> Result:
    """A product with the identity (a basis seed) is the other factor; a contraction
    over a dimension of size 1 is a broadcast product."""
    a, b = atoms
    out_shape = _matmul_shape(a.shape, b.shape)
    for eye, other in ((a, b), (b, a)):
        eqn = cx.producer(eye)
        if (
            eqn is not None
            and eqn.primitive in EYES
            and len(eqn.params.as_dict()["shape"]) == 1
            and other.shape == out_shape
            and isinstance(other, Var)
        ):
            return other
    if a.shape[-1] != 1:
        return None
    if a.ndim >= 2 and b.ndim >= 2:
        return cx.bind("mul", a, b)
    if a.ndim == 1 and b.ndim == 1:
        return cx.bind("reshape", cx.bind("mul", a, b), shape=())
    if a.ndim == 1:
        rest = cx.bind("reshape", b, shape=b.shape[:-2] + b.shape[-1:])
        return cx.bind("mul", cx.bind("reshape", a, shape=()), rest)
    rest = cx.bind("reshape", a, shape=a.shape[:-1])
    return cx.bind("mul", rest, cx.bind("reshape", b, shape=()))


def _matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    avals = [(a, "float64"), (b, "float64")]
    return tuple(PRIMITIVES["matmul"].out_aval(avals, {})[0])


def concatenate_identities(
    atoms: list[Atom], params: dict[str, Any], cx: Context
) -> Result:
    """A single piece."""
    return atoms[0] if len(atoms) == 1 and isinstance(atoms[0], Var) else None


# ----------------------------------------------------------------- elementwise
def _smaller_source(atom: Atom, cx: Context) -> Atom | None:
    """What ``atom`` broadcasts: the input of a broadcast_to (or of a reshape that
    only adds or drops leading size-1 axes), or the scalar of a uniform constant."""
    if isinstance(atom, Lit):
        flat = atom.value.ravel()
        uniform = atom.value.ndim and flat.size and atom.dtype != "bool"
        if uniform and np.all(flat == flat[0]):
            return Lit(np.asarray(flat[0]))
        return None
    eqn = cx.producer(atom)
    if eqn is None:
        return None
    name = eqn.primitive.name
    if name == "broadcast_to":
        return eqn.inputs[0]
    if name == "reshape":
        src = eqn.inputs[0]
        if _strip_ones(src.shape) == _strip_ones(atom.shape):
            return src
    return None


def _strip_ones(shape: tuple[int, ...]) -> tuple[int, ...]:
    i = 0
    while i < len(shape) and shape[i] == 1:
        i += 1
    return shape[i:]


def _narrow_operands(prim: Any, atoms: list[Atom], cx: Context) -> list[Atom] | None:
    """Operands with broadcasts replaced by their sources, if the output is unchanged."""
    out_shape = _out_shape(atoms)
    changed = False
    atoms = list(atoms)
    for i, atom in enumerate(atoms):
        src = _smaller_source(atom, cx)
        while src is not None:
            trial = atoms[:i] + [src] + atoms[i + 1 :]
            if _out_shape(trial) != out_shape:
                break
            atoms[i], changed = src, True
            src = _smaller_source(src, cx)
    return atoms if changed else None


def _broadcast_after(
    prim: Any, atoms: list[Atom], params: dict[str, Any], cx: Context
) -> Result:
    """An elementwise operation of one broadcast value and scalar literals, as the
    broadcast of the operation on the value before it (``2 * broadcast_to(x, s)``
    is ``broadcast_to(2 * x, s)``: the same numbers, computed once per element of
    ``x``), so that the operations downstream narrow the broadcast away."""
    spread = [a for a in atoms if not (isinstance(a, Lit) and a.value.ndim == 0)]
    if len(spread) != 1 or not isinstance(spread[0], Var):
        return None
    eqn = cx.made_by(spread[0], "broadcast_to")
    if eqn is None or not isinstance(src := eqn.inputs[0], Var):
        return None
    if src.dtype != "float64":
        return None
    inner = cx.bind(prim.name, *(src if a is spread[0] else a for a in atoms), **params)
    if not isinstance(inner, Var) or inner.dtype != "float64":
        return None
    return cx.bind("broadcast_to", inner, shape=_out_shape(atoms))


def simplify(
    prim: Any,
    atoms: list[Atom],
    params: dict[str, Any],
    builder: Any,
    bind_atoms: BindAtoms,
    relaxed: bool = False,
) -> Result:
    """An existing value equal to ``prim(*atoms, **params)``, if an identity gives one.

    ``relaxed`` allows the identities marked *finite only* below, which a NaN or an
    infinity would break (``inf * 0`` is NaN, not 0): derivative rules may use
    them, the user's own computation may not.
    """
    cx = Context(builder, bind_atoms, relaxed)
    if prim.elementwise:
        try:
            _out_shape(atoms)
        except ValueError:
            return None  # the shape rule reports it, at the user's line
        narrowed = _narrow_operands(prim, atoms, cx)
        if narrowed is not None and any(isinstance(a, Var) for a in narrowed):
            return cx.bind(prim.name, *narrowed, **params)
        if (hoisted := _broadcast_after(prim, atoms, params, cx)) is not None:
            return hoisted
    if prim.commutative and all(isinstance(a, Var) for a in atoms):
        swapped = builder.cache.get(
            (prim.name, tuple(reversed(atoms)), Params.of(params))
        )
        if swapped is not None:
            return swapped
    if isinstance(prim.simplify, Absent):
        return None
    result = prim.simplify(atoms, params, cx)
    if isinstance(result, Lit):
        return np.asarray(result.value)
    return result
