"""The loop program: what planning decides for one operator graph, as values.

Planning (:mod:`difgen.targets.c.plan`, :mod:`difgen.targets.c.demand`,
:mod:`difgen.targets.c.finite`) produces these; the printer
(:mod:`difgen.targets.c.printer`) is the only code that turns them into C text.
Nothing here holds C: a :class:`Program` says which equations fuse into which
loop (:class:`Group`), which take a loop form of their own (:class:`Step`), which
values are build-time constants, which structural equations are views (an index
map over another value's memory), which values need an array, which results are
computed at their own elements only (:class:`~difgen.targets.c.finite.DemandPlan`)
and which are computed in place of a reshape (docs/design.md, section 10).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from difgen.core.ir import Graph, Var

if TYPE_CHECKING:
    from difgen.targets.c.finite import DemandPlan
    from difgen.targets.c.rows import Rows


CONST_LIMIT = 1 << 16
"""Constants computed at build time up to this many elements (512 KB of C
initializers): a larger one (an identity basis of 1000 columns) is refused, so
that the C file and its compile time stay small; the operator stays in Python."""


class NoLoopForm(Exception):
    """The graph uses something this module cannot print as loops (named)."""


@dataclass(frozen=True)
class Store:
    """A C-contiguous array (``name`` points at it) or, for shape (), a double."""

    name: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class View:
    """Elements of a store read through a table of flat positions (var's shape)."""

    base: Store
    table: np.ndarray


@dataclass(frozen=True)
class Fused:
    """A scalar temporary of the loop group ``group`` (element at the loop index)."""

    name: str
    group: int


Value = Store | View | Fused


def store_size(store: Store) -> int:
    return int(np.prod(store.shape, dtype=np.int64))


@dataclass(frozen=True)
class Moves:
    """A structural equation's output: per flat element a constant and its terms
    in the order NumPy adds them, as arrays (no object per element): term ``r``
    of element ``o`` reads flat position ``where[o, r]`` of input ``slots[o, r]``;
    an element's terms come first in its row, ``-1`` slots after them."""

    constants: np.ndarray  # float64, flat
    slots: np.ndarray  # int64, (elements, rank >= 1)
    where: np.ndarray  # int64, (elements, rank >= 1)

    @property
    def terms(self) -> list[tuple[tuple[int, int], ...]]:
        """Per flat element its ``(slot, position)`` terms (a tuple per element:
        for small maps only)."""
        return [
            tuple((s, i) for s, i in zip(row, at) if s >= 0)
            for row, at in zip(self.slots.tolist(), self.where.tolist())
        ]

    @staticmethod
    def of_terms(
        constants: np.ndarray, terms: list[tuple[tuple[int, int], ...]]
    ) -> Moves:
        """The arrays of per-element ``(slot, position)`` terms."""
        rank = max(max((len(t) for t in terms), default=0), 1)
        slots = np.full((len(terms), rank), -1, dtype=np.int64)
        where = np.zeros_like(slots)
        for o, row in enumerate(terms):
            for r, (slot, i) in enumerate(row):
                slots[o, r] = slot
                where[o, r] = i
        return Moves(constants, slots, where)


@dataclass
class Group:
    """Consecutive elementwise equations (and reductions of their values) over one
    shape: one loop nest."""

    index: int
    shape: tuple[int, ...]
    eqns: list[Any] = field(default_factory=list)
    pending: set[Var] = field(default_factory=set)  # reductions done after the loop
    # a row pass (difgen.targets.c.rows): its first equation is X @ w, computed
    # one element at a time, and products X.T @ r of its values are pending
    rows: Rows | None = None


@dataclass
class Step:
    """One equation with a loop form of its own (``blas``: a matmul computed by
    NumPy's ``dot`` on the operands' memory instead of loops)."""

    eqn: Any
    blas: bool = False


@dataclass
class Program:
    """One operator graph planned as loops (no C text; see the module docstring).

    ``items`` are the loop nests and steps in order over ``graph`` (the graph
    left once the results computed on demand are taken out); ``consts`` the
    values evaluated at build time; ``moves`` each structural step's element
    map (a view's is its table); ``view_of`` the views, each as its source and
    the source's flat positions per element; ``result_of`` the values computed directly into a
    result buffer; ``in_place`` the results that are such a value's reshape;
    ``needs`` the values that get memory (read outside their loop, results,
    sources of views); ``demands`` the results computed at their own elements;
    ``offsets`` where in the workspace each array that is no result buffer
    starts, ``work`` the workspace's doubles; ``cached`` the items (by index)
    that read no argument, computed at the first call into static arrays (the
    values each stores)."""

    graph: Graph
    outputs: tuple[Any, ...]
    original_eqns: tuple[Any, ...]
    items: list[Group | Step]
    consts: dict[Var, np.ndarray]
    moves: dict[Var, Moves]
    view_of: dict[Var, tuple[Var, np.ndarray]]
    result_of: dict[Var, Store]
    in_place: set[Var]
    needs: set[Var]
    demands: list[DemandPlan]
    offsets: dict[Var, int]
    work: int
    cached: dict[int, set[Var]] = field(default_factory=dict)
    in_range: frozenset[Var] = frozenset()  # loop indices proved in bounds

    @property
    def loops(self) -> list[Group]:
        """The fused loop nests."""
        return [item for item in self.items if isinstance(item, Group)]

    @property
    def steps(self) -> list[Step]:
        """The equations with a loop form of their own."""
        return [item for item in self.items if isinstance(item, Step)]
