"""Constants when finite: elements of a result computed on demand that are one
constant whenever the values they read are finite (docs/design.md, section 10).

:func:`finite_constant` evaluates a group's expression over abstract values by
IEEE rules that hold for every sign of every zero; :func:`finite_split` decides,
for one :class:`~difgen.targets.c.demand.Demand`, whether a test of the arrays
read for inf/NaN and the constants written first pay (:class:`FinitePlan`);
:func:`fill_of` which constant, if any, fills most of a result first, and
:func:`demand_plan` puts these together for one result (:class:`DemandPlan`,
with the :class:`Layout` of each way of writing it). Values only: the test's C
is the printer's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from difgen.core.ir import Var
from difgen.targets.c.demand import Demand, DemandGroup
from difgen.targets.c.program import Store, store_size

ZERO = "zero"
"""An abstract value of :func:`finite_constant`: +0.0 or -0.0, sign unknown."""

OTHER = "other"
"""An abstract value of :func:`finite_constant`: anything, inf and NaN included."""

FINITE = "finite"
"""An abstract value of :func:`finite_constant`: a value read from memory, finite."""


def finite_constant(group: DemandGroup, eqns: Sequence[Any]) -> np.ndarray | None:
    """The values the elements of ``group`` take whenever the values they read
    are finite (float64, one per element computed, or one for all), or None
    when they are not constants then.

    A colored sparse jacobian multiplies the values it reads by seeds 0.0
    (``x * 0.0``: +-0.0 for a finite ``x``, NaN for inf or NaN, as in NumPy), so
    many of its nonzeros are ``10.0 + (a * 0.0 + b * 0.0)``: exactly 10.0 unless
    ``a`` or ``b`` is not finite. This evaluates the skeleton over abstract
    values: float64 constants (an array: per element, or one), :data:`ZERO`,
    :data:`FINITE` (a value read) and :data:`OTHER`, by IEEE rules that hold for
    every sign of every zero (``c + +-0.0 == c`` for ``c != 0``, ``+0.0 + +-0.0
    == +0.0``...), so a constant is the exact double the loop computes.

    >>> from difgen.targets.c.demand import DemandGroup
    >>> ten, zero = np.float64(10.0).tobytes(), np.float64(0.0).tobytes()
    >>> class E:  # an elementwise equation: only the primitive's name is read
    ...     def __init__(self, name):
    ...         self.primitive, self.params = type("P", (), {"name": name}), ()
    >>> eqns = [E("mul"), E("add"), E("sub")]
    >>> def constant(*skeleton):
    ...     return finite_constant(DemandGroup(skeleton, np.zeros((1, 1)), {}), eqns)
    >>> constant(("v", 0), ("c", zero), ("e", 0, (0, 1)), ("c", ten),
    ...          ("e", 2, (3, 2)))  # 10.0 - a * 0.0
    array([10.])
    >>> constant(("v", 0), ("c", zero), ("e", 0, (0, 1)), ("c", zero),
    ...          ("e", 2, (3, 2)))  # 0.0 - a * 0.0: +0.0 for every finite a
    array([0.])
    >>> print(constant(("v", 0), ("c", zero), ("e", 0, (0, 1)), ("c", zero),
    ...                ("e", 2, (2, 3))))  # a * 0.0 - 0.0: -0.0 for a < 0
    None
    """
    values: list[Any] = []
    for k, item in enumerate(group.skeleton):
        if item[0] == "v":
            values.append(FINITE)
        elif item[0] == "c":
            if item[1] is not None:
                values.append(np.frombuffer(item[1], np.float64))
            else:
                values.append(np.asarray(group.reads[k], dtype=np.float64))
        elif item[0] == "s":
            total = values[item[1][0]]
            for c in item[1][1:]:
                total = _abstract("add", [total, values[c]])
            values.append(total)
        else:
            eqn = eqns[item[1]]
            operands = [values[c] for c in item[2]]
            plain = not (eqn.params.as_dict() if eqn.params else {})
            name = eqn.primitive.name if plain else ""
            values.append(_abstract(name, operands))
    last = values[-1]
    return last if isinstance(last, np.ndarray) else None


_FOLDED: dict[str, Any] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "neg": np.negative,
}
"""The operations :func:`finite_constant` folds over constants (the loops' C
operators, which round as these NumPy ufuncs do)."""


def _abstract(name: str, operands: list[Any]) -> Any:
    """One operation of :func:`finite_constant` over abstract values: constants
    (float64 arrays), :data:`ZERO`, :data:`FINITE`, :data:`OTHER`."""
    if name in _FOLDED and all(isinstance(v, np.ndarray) for v in operands):
        with np.errstate(all="ignore"):
            return np.asarray(_FOLDED[name](*operands), dtype=np.float64)
    if name == "neg":
        return ZERO if operands[0] is ZERO else OTHER
    if name == "sub":  # a - b is a + (-b), exactly; -ZERO is ZERO, -FINITE FINITE
        b = operands[1]
        return _abstract("add", [operands[0], -b if isinstance(b, np.ndarray) else b])
    a, b = operands if len(operands) == 2 else (operands[0], OTHER)
    if name == "add":
        if isinstance(a, np.ndarray):
            a, b = b, a
        if a is ZERO and isinstance(b, np.ndarray):
            if np.isnan(b).any():
                return OTHER
            if ((b != 0.0) | ~np.signbit(b)).all():  # c + +-0.0 is c, +0.0 too
                return b
            return ZERO if (np.signbit(b) & (b == 0.0)).all() else OTHER  # -0.0 + z
        return ZERO if a is ZERO and b is ZERO else OTHER
    if name in ("mul", "div"):
        if name == "mul" and isinstance(a, np.ndarray):
            a, b = b, a
        if isinstance(b, np.ndarray):
            finite = bool(np.isfinite(b).all())
            if a is ZERO and finite and (name == "mul" or bool((b != 0.0).all())):
                return ZERO  # +-0 * finite, +-0 / nonzero finite
            if name == "mul" and a is FINITE and bool((b == 0.0).all()):
                return ZERO  # finite * +-0.0
            return OTHER
        if name == "mul" and {a, b} <= {ZERO, FINITE} and ZERO in (a, b):
            return ZERO  # +-0 * +-0, +-0 * finite
    return OTHER


@dataclass(frozen=True)
class FinitePlan:
    """The path taken when every value read is finite: the arrays to test for
    inf/NaN (``tested``, the variables whose memory holds the values read, in
    the order first read), the groups to compute then (``groups``) and, unless
    one constant is most of the result (``filled``: it is one of ``groups``,
    filled first), the whole result's constants (``template``) copied first."""

    tested: list[Var]
    groups: list[DemandGroup]
    template: np.ndarray
    filled: bool


def finite_split(
    demand: Demand,
    size: int,
    eqns: Sequence[Any],
    view_of: dict[Var, tuple[Var, np.ndarray]],
) -> FinitePlan | None:
    """The constant elements -- those of :func:`finite_constant` included --
    as one group per value, so that a value that is most of the result is filled
    first as :func:`fill_of` decides; when none is, one table of them all is
    copied first instead. None unless the constants are most of the result and
    the test reads fewer doubles than the elements it turns into constants (a
    value read is tested over all of the array it is read from: ``view_of``)."""
    template = np.zeros(size)
    covered = np.zeros(size, dtype=bool)
    left: list[DemandGroup] = []
    bases: dict[Var, int] = {}  # the arrays tested, their doubles
    made = 0
    for group in demand.groups:
        computed = any(item[0] == "e" for item in group.skeleton)
        value = finite_constant(group, eqns)
        if value is None:
            left.append(group)
            continue
        values = np.broadcast_to(value, (len(group.targets),))
        for column in group.targets.T:
            template[column] = values
            covered[column] = True
        if not computed:
            continue
        made += group.targets.size
        for item in group.skeleton:
            if item[0] != "v":
                continue
            leaf = demand.leaves[item[1]]
            base = view_of[leaf][0] if leaf in view_of else leaf
            bases[base] = base.size
    tested = sum(bases.values())
    if not made or tested > made or 2 * int(covered.sum()) <= size:
        return None
    bits = template.view(np.int64)  # -0.0 apart from +0.0
    constants = [
        DemandGroup(
            (("c", value.tobytes()),),
            np.flatnonzero(covered & (bits == value))[:, None],
            {},
        )
        for value in np.unique(bits[covered])
    ]
    if fill_of(constants, size) is not None:
        return FinitePlan(list(bases), left + constants, template, True)
    return FinitePlan(list(bases), left, template, False)


def fill_of(groups: list[DemandGroup], size: int) -> tuple[DemandGroup, bytes] | None:
    """The group of more than half the result's elements that are one constant
    (a dense hessian's structural zeros), if any: the result is filled with it
    (``memset`` for zeros) before the other groups write theirs, instead of a
    store through an index table per element."""
    for group in groups:
        if len(group.skeleton) != 1 or 2 * group.targets.size <= size:
            continue
        (item,) = group.skeleton
        if item[0] != "c":
            continue
        if item[1] is not None:
            return group, item[1]
        values = group.reads[0]
        if len({v.tobytes() for v in values}) == 1:
            return group, values[0].tobytes()
    return None


@dataclass(frozen=True)
class Layout:
    """How groups of a result computed on demand are written: the constant of
    more than half the elements filled first (``fill``, its float64 bytes; None:
    none is) and then one loop per group length, groups of one length sharing
    it (``loops``, in the order their lengths first occur)."""

    fill: bytes | None
    loops: list[list[DemandGroup]]


def layout(groups: Sequence[DemandGroup], size: int) -> Layout:
    """The :class:`Layout` of ``groups`` over a result of ``size`` elements.
    Groups of one length share one loop (the Brusselator's six shapes of
    nonzeros: one loop over the 256 grid points, whose loads and ``x * 0.0``
    products the C compiler then shares)."""
    rest = list(groups)
    fill = fill_of(rest, size)
    if fill is not None:
        rest.remove(fill[0])
    by_length: dict[int, list[DemandGroup]] = {}
    for group in rest:
        by_length.setdefault(len(group.targets), []).append(group)
    return Layout(None if fill is None else fill[1], list(by_length.values()))


@dataclass(frozen=True)
class DemandPlan:
    """A result computed on demand, planned: every element computed
    (``everywhere``) and, when :func:`finite_split` finds it pays, the path taken
    when every value read is finite (``finite``, written as ``when_finite``)."""

    demand: Demand
    store: Store
    everywhere: Layout
    finite: FinitePlan | None
    when_finite: Layout | None


def demand_plan(
    demand: Demand,
    store: Store,
    eqns: Sequence[Any],
    view_of: dict[Var, tuple[Var, np.ndarray]],
) -> DemandPlan:
    """``demand`` computed into ``store`` (see :class:`DemandPlan`)."""
    size = store_size(store)
    finite = finite_split(demand, size, eqns, view_of)
    when_finite = None if finite is None else layout(finite.groups, size)
    return DemandPlan(demand, store, layout(demand.groups, size), finite, when_finite)
