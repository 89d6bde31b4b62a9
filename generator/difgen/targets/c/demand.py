"""Demand analysis: a structural result (a colored sparse jacobian's CSR data)
computed at its own elements only (docs/design.md, section 10).

Each element of the result becomes an expression DAG over values in memory and
constants, found by following the equations backwards; elements are grouped by
expression shape (:class:`DemandGroup`, one loop each), equal elements computed
once. The output is values (:class:`Demand`); whether to use it is the planner's
choice (:func:`difgen.targets.c.plan.Planner.on_demand`) and the C is the
printer's. The budgets below bound the build-time cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from difgen.core.ir import Graph, Lit, Var
from difgen.core.primitive import Statements
from difgen.targets.c.moves import (
    broadcast_positions,
    moves_of,
    structural,
)

PUSH_ELEMENTS = 1 << 22
"""Results of at most this many elements are considered for evaluation on demand
(a 256 x 256 Brusselator's sparse jacobian has 786,432): the analysis works on
arrays of positions, one pass per equation, so its time and memory grow with
the elements (``python -m benchmarks.calibration_c`` measures its time per
element on a 512-state Brusselator's sparse jacobian)."""

PUSH_NODES = 1 << 16
"""Distinct (value, element) nodes the demand analysis may visit, besides
:data:`PUSH_NODES_PER_ELEMENT` per element of the result (build time)."""

PUSH_NODES_PER_ELEMENT = 64
"""Distinct nodes the demand analysis may visit per element of the result."""

DEPTH = 200
"""The longest chain of elementwise and structural equations the analysis follows
to a result. Its walk recurses along the chain, a few Python frames per equation,
so a longer chain (an unrolled loop of a thousand steps) is left to the planner's
other loop forms, as a result past the other budgets is, instead of overflowing
Python's stack."""

FOLD_ELEMENTS = 1 << 24
"""Values of constants only up to this many elements are evaluated at build time
by the analysis (:meth:`DemandAnalysis.folded`: 128 MB of float64)."""

PUSH_GROUPS = 64
"""At most this many loops (element shapes) for one result computed on demand."""

PUSH_TEMPLATE = 512
"""Most nodes of one element's expression written out as a tree (its repeated
operands repeated): past it the result is computed as usual."""

SPECIAL_CONSTANTS = frozenset(np.float64(v).tobytes() for v in (0.0, 1.0, -1.0))
"""Constants whose value splits the elements into loops of their own: there the
constant is a literal, and the C compiler drops ``x * 1.0`` (exact in IEEE) and
multiplies by a literal ``0.0`` instead of loading a seed table (``x * 0.0`` is
kept: it is NaN for a non-finite ``x``, as in NumPy)."""

_SPECIAL = np.array([np.float64(v) for v in (0.0, 1.0, -1.0)]).view(np.int64)

V, C, E, S = 0, 1, 2, 3
"""The kinds of node: a value read from memory at a position, a constant, an
elementwise equation of its children, a sum of moved terms."""


def _unique_ints(key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(key, return_index=True, return_inverse=True)`` of int64 keys
    without a sort where none is needed: keys already in order (the nodes of
    consecutive positions, made in order) in one pass, and keys within a small
    range (expression shapes, packed patterns) by counting."""
    n = len(key)
    if n == 0:
        return key.copy(), np.zeros(0, np.int64), np.zeros(0, np.int64)
    if n > 1 and bool(np.all(key[1:] >= key[:-1])):
        step = np.empty(n, dtype=bool)
        step[0] = True
        np.not_equal(key[1:], key[:-1], out=step[1:])
        first = np.flatnonzero(step)
        return key[first], first, np.cumsum(step) - 1
    low = int(key.min())
    span = int(key.max()) - low + 1
    if span <= 4 * n + 1024:
        shifted = key - low
        earliest = np.full(span, n, dtype=np.int64)
        np.minimum.at(earliest, shifted, np.arange(n, dtype=np.int64))
        present = earliest < n
        rank = np.cumsum(present) - 1
        first = earliest[present]
        return key[first], first, rank[shifted]
    distinct, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return distinct, first, inverse.reshape(-1)


def _row_keys(rows: np.ndarray) -> np.ndarray | None:
    """One int64 key per row, in the rows' lexicographic order, where the
    columns' ranges pack into 63 bits (None otherwise, or with no rows or no
    columns)."""
    if rows.shape[1] == 0 or len(rows) == 0:
        return None
    columns = [rows[:, c] for c in range(rows.shape[1])]
    low = [int(c.min()) for c in columns]
    bits = [(int(c.max()) - lo).bit_length() for c, lo in zip(columns, low)]
    if sum(bits) > 63:
        return None
    key = np.zeros(len(rows), dtype=np.int64)
    for c, width in enumerate(bits):
        if width:
            key = (key << width) | (columns[c] - low[c])
    return key


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(rows, axis=0, return_inverse=True)``, by int64 keys where
    the rows' columns pack into 63 bits (else NumPy's row sort)."""
    key = _row_keys(rows)
    if key is None:
        distinct, inverse = np.unique(rows, axis=0, return_inverse=True)
        return distinct, inverse.reshape(-1)
    _, first, inverse = _unique_ints(key)
    return rows[first], inverse


class TooLarge(Exception):
    """The demand analysis went past one of its budgets: compute as usual."""


@dataclass
class DemandGroup:
    """Elements of a result sharing one expression shape: one loop.

    ``skeleton`` lists the expression's nodes in evaluation order: ``("v", k)``
    reads value ``k`` of :attr:`Demand.leaves`, ``("c", value)`` a constant the
    same for all elements (``("c", None)``: one per element), ``("e", eqn,
    children)`` an elementwise equation, ``("s", children)`` a sum of moved terms
    in NumPy's order. ``reads`` holds, per ``v`` or per-element ``c`` node, the
    positions read or the constants, one per element; ``targets`` the result's
    flat positions written: one row per element computed, one column per
    result element that equals it (the same expression of the same operands:
    computed once, stored in each)."""

    skeleton: tuple[Any, ...]
    targets: np.ndarray  # (elements computed, copies of each)
    reads: dict[int, np.ndarray]

    @property
    def operations(self) -> int:
        return len(self.targets) * sum(n[0] in "es" for n in self.skeleton)


@dataclass
class Demand:
    """A result computed element by element at its own elements only: the
    elementwise equations it depends on are evaluated where the result reads
    them (through structural moves: gathers, concatenations, reshapes...), not
    over their whole shapes. ``leaves`` are the values read from memory
    (arguments, or values the other code computes)."""

    out: Var
    groups: list[DemandGroup]
    leaves: list[Var]
    recomputed: bool = False  # a value read twice is computed again, not kept

    @property
    def operations(self) -> int:
        return sum(g.operations for g in self.groups)


COLUMN_RESERVE = 1 << 24
"""Rows each of the analysis's columns reserves up front (up to its node budget):
``np.empty`` maps memory only where it is written, so a large analysis fills
its columns without copying them as they grow (a copy touches fresh memory,
and the page faults were a third of a million-element analysis's time)."""


class _Column:
    """A growable int64 (or float64) array."""

    def __init__(
        self, dtype: Any = np.int64, width: int = 0, capacity: int = 1024
    ) -> None:
        self.width = width
        shape = (capacity, width) if width else (capacity,)
        self.data = np.empty(shape, dtype=dtype)
        self.size = 0

    def extend(self, values: np.ndarray) -> None:
        n = len(values)
        if self.size + n > len(self.data):  # one new buffer, twice as large
            capacity = len(self.data)  # as often as it takes: one copy
            while self.size + n > capacity:
                capacity *= 2
            grown = np.empty((capacity, *self.data.shape[1:]), self.data.dtype)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size : self.size + n] = values
        self.size += n

    def view(self) -> np.ndarray:
        return self.data[: self.size]


class DemandAnalysis:
    """Each element of a result as an expression DAG over values in memory and
    constants, built by following the equations backwards from the result's
    elements (docs/design.md, section 10), one equation at a time over arrays of
    the positions read. Nodes are interned (a value's element, a constant, an
    equation of the same children is one node), so an element's DAG shares its
    repeated operands and a value read by many elements is one node. Each node
    also gets the id of its expression shape (with the constants 0, 1 and -1
    apart, and without), so that elements group by shape without a walk per
    element; an equation of constants is folded (its ``impl``, as the planner
    folds constants)."""

    def __init__(
        self,
        graph: Graph,
        consts: dict[Var, np.ndarray],
        kept: frozenset[Var],
        limit: int = PUSH_NODES,
    ) -> None:
        self.consts = dict(consts)  # and the values folded here (:meth:`folded`)
        self.kept = kept  # values read from memory even where they could be pushed
        self.limit = limit
        self.unfoldable: set[Var] = set()
        self.eqns = graph.eqns
        self.producer = {e.out: e for e in graph.eqns}
        self.eqn_index = {id(e): i for i, e in enumerate(graph.eqns)}
        reserve = self.reserve = max(min(limit, COLUMN_RESERVE), 1024)
        self.kind = _Column(capacity=reserve)
        self.arg = _Column(capacity=reserve)  # leaf, constant or equation index
        self.pos = _Column(capacity=reserve)  # position read (v nodes)
        self.shape_special = _Column(capacity=reserve)
        self.shape_plain = _Column(capacity=reserve)
        self.children: dict[int, _Column] = {}  # per arity: (node, children) rows
        self.child_row = _Column(capacity=reserve)  # in children[arity], or -1
        self.arity = _Column(capacity=reserve)
        self.shapes: list[tuple[Any, ...]] = []
        self.shape_ids: dict[tuple[Any, ...], int] = {}
        self.constant_ids: dict[bytes, int] = {}
        self.constant_values: list[float] = []
        self.rows: dict[tuple[int, int, int], dict[bytes, int]] = {}
        self.sorted_rows: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray]] = {}
        self.memo: dict[Var, np.ndarray] = {}
        self.leaves: dict[Var, int] = {}
        self.leaf_nodes: dict[Var, np.ndarray] = {}
        self.moves: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.spread: dict[tuple[int, int], np.ndarray] = {}
        self.order: dict[int, int] = {}  # leaves in the order first read

    # ------------------------------------------------------------- the nodes
    @property
    def size(self) -> int:
        return self.kind.size

    def _shape(self, key: tuple[Any, ...]) -> int:
        found = self.shape_ids.get(key)
        if found is None:
            found = self.shape_ids[key] = len(self.shapes)
            self.shapes.append(key)
        return found

    def _new(
        self,
        kind: int,
        arg: np.ndarray,
        pos: np.ndarray,
        special: np.ndarray,
        plain: np.ndarray,
        children: np.ndarray | None = None,
    ) -> np.ndarray:
        """Append nodes; their ids."""
        n = len(arg)
        if self.size + n > self.limit:
            raise TooLarge
        ids = np.arange(self.size, self.size + n, dtype=np.int64)
        self.kind.extend(np.full(n, kind, dtype=np.int64))
        self.arg.extend(arg)
        self.pos.extend(pos)
        self.shape_special.extend(special)
        self.shape_plain.extend(plain)
        if children is None:
            self.child_row.extend(np.full(n, -1, dtype=np.int64))
            self.arity.extend(np.zeros(n, dtype=np.int64))
        else:
            width = children.shape[1]
            table = self.children.get(width)
            if table is None:
                rows = max(1024, 2 * self.reserve // max(width, 2))  # wide: fewer
                table = self.children[width] = _Column(width=width, capacity=rows)
            self.child_row.extend(np.arange(table.size, table.size + n))
            self.arity.extend(np.full(n, width, dtype=np.int64))
            table.extend(children)
        return ids

    def _constants(self, values: np.ndarray) -> np.ndarray:
        """The nodes of float64 constants (interned by their bits)."""
        bits = np.ascontiguousarray(values, dtype=np.float64).view(np.int64)
        if len(bits) and bool((bits == bits[0]).all()):
            distinct, inverse = bits[:1], np.zeros(len(bits), dtype=np.int64)
        else:
            distinct, _, inverse = _unique_ints(bits)
        ids = np.empty(len(distinct), dtype=np.int64)
        for k, b in enumerate(distinct.tolist()):
            key = np.int64(b).tobytes()
            found = self.constant_ids.get(key)
            if found is None:
                fixed = key if b in _SPECIAL else None
                found = int(
                    self._new(
                        C,
                        np.array([len(self.constant_values)]),
                        np.array([-1]),
                        np.array([self._shape(("c", fixed))]),
                        np.array([self._shape(("c", None))]),
                    )[0]
                )
                self.constant_ids[key] = found
                self.constant_values.append(float(np.frombuffer(key, np.float64)[0]))
            ids[k] = found
        return ids[inverse.reshape(-1)]

    def _interned(self, kind: int, arg: int, rows: np.ndarray) -> np.ndarray:
        """The nodes of ``kind`` (E or S) with ``arg`` and each row of children."""
        width = rows.shape[1]
        if width <= 2:  # node ids are below 2 ** 31 (the budget): one int64 key
            return self._interned_by_key(kind, arg, rows)
        distinct, inverse = _unique_rows(rows)
        table = self.rows.setdefault((kind, arg, width), {})
        packed = np.ascontiguousarray(distinct).view(np.dtype((np.void, 8 * width)))
        keys = [bytes(k) for k in packed.reshape(-1).tolist()]
        ids = np.array([table.get(k, -1) for k in keys], dtype=np.int64)
        fresh = np.flatnonzero(ids < 0)
        if fresh.size:
            ids[fresh] = new = self._made(kind, arg, distinct[fresh])
            for k, node in zip(fresh.tolist(), new.tolist()):
                table[keys[k]] = node
        return ids[inverse.reshape(-1)]

    def _interned_by_key(self, kind: int, arg: int, rows: np.ndarray) -> np.ndarray:
        """:meth:`_interned` for rows of one or two children: each row one
        int64 key, looked up in the sorted keys of the nodes made before."""
        key = rows[:, 0] if rows.shape[1] == 1 else (rows[:, 0] << 31) | rows[:, 1]
        keys, first, inverse = _unique_ints(key)
        ids = np.full(len(keys), -1, dtype=np.int64)
        known = self.sorted_rows.get((kind, arg, rows.shape[1]))
        if known is not None and len(known[0]):
            at = np.minimum(np.searchsorted(known[0], keys), len(known[0]) - 1)
            hit = known[0][at] == keys
            ids[hit] = known[1][at[hit]]
        fresh = np.flatnonzero(ids < 0)
        if fresh.size:
            ids[fresh] = new = self._made(kind, arg, rows[first[fresh]])
            if known is None:
                all_keys, all_ids = keys[fresh], new
            else:
                # both sorted and apart (fresh keys were not found): merged
                at = np.searchsorted(known[0], keys[fresh])
                all_keys = np.insert(known[0], at, keys[fresh])
                all_ids = np.insert(known[1], at, new)
            self.sorted_rows[(kind, arg, rows.shape[1])] = (all_keys, all_ids)
        return ids[inverse]

    def _made(self, kind: int, arg: int, made: np.ndarray) -> np.ndarray:
        """New nodes of ``kind`` with ``arg`` and the children rows ``made``,
        with their expression shapes."""
        shapes = []
        for column in (self.shape_special, self.shape_plain):
            unique, back = _unique_rows(column.view()[made])
            head: tuple[Any, ...] = ("e", arg) if kind == E else ("s",)
            sid = np.array(
                [self._shape((*head, tuple(u))) for u in unique.tolist()],
                dtype=np.int64,
            )
            shapes.append(sid[back.reshape(-1)])
        n = len(made)
        return self._new(
            kind,
            np.full(n, arg, dtype=np.int64),
            np.full(n, -1, dtype=np.int64),
            shapes[0],
            shapes[1],
            made,
        )

    def _is_constant(self, ids: np.ndarray) -> np.ndarray:
        return self.kind.view()[ids] == C

    def _all_constant(self, children: np.ndarray) -> np.ndarray:
        """Per row of child nodes, whether all are constants (column by column:
        NumPy reduces a short row slowly)."""
        kind = self.kind.view()
        found = kind[children[:, 0]] == C
        for c in range(1, children.shape[1]):
            found &= kind[children[:, c]] == C
        return found

    def _values(self, ids: np.ndarray) -> np.ndarray:
        """The float64 values of constant nodes."""
        table = np.array(self.constant_values, dtype=np.float64)
        return table[self.arg.view()[ids]]

    def again(self, kept: frozenset[Var]) -> None:
        """Ready the walk once more, with ``kept`` read from memory: the nodes
        of the values that read none of them stay (a new analysis would make the
        same ones: nodes are interned), those of the others are forgotten."""
        stale: set[Var] = set(kept)
        for eqn in self.eqns:
            if any(isinstance(a, Var) and a in stale for a in eqn.inputs):
                stale.add(eqn.out)
        for var in stale:
            self.memo.pop(var, None)
        self.kept = kept

    # ------------------------------------------------------------- the walk
    def node(self, atom: Any, positions: np.ndarray) -> np.ndarray:
        """The nodes of ``atom``'s flat elements at ``positions``."""
        positions = np.asarray(positions, dtype=np.int64)
        if isinstance(atom, Lit) or self.folded(atom):
            value = atom.value if isinstance(atom, Lit) else self.consts[atom]
            flat = np.asarray(value, dtype=np.float64).reshape(-1)
            if flat.size == 1:  # one node for every position
                return np.full(len(positions), self._constants(flat)[0])
            return self._constants(flat[positions])
        memo = self.memo.get(atom)
        if memo is None:
            memo = self.memo[atom] = np.full(atom.size, -1, dtype=np.int64)
        ids = memo[positions]
        missing = ids < 0
        if missing.any():
            mark = np.zeros(atom.size, dtype=bool)
            mark[positions[missing]] = True
            wanted = np.flatnonzero(mark)
            memo[wanted] = self._computed(atom, wanted)
            ids = memo[positions]
        return ids

    def folded(self, atom: Var) -> bool:
        """Whether ``atom`` is a constant: one of the planner's, or a value of
        constants only that the planner leaves to the loops as too large for a
        table (a sparse jacobian's seed and what follows from it alone), here
        evaluated by the primitives' ``impl`` as the planner folds constants
        (up to :data:`FOLD_ELEMENTS` elements)."""
        if atom in self.consts:
            return True
        if atom in self.unfoldable:
            return False
        eqn = self.producer.get(atom)
        if (
            eqn is None
            or atom.size > FOLD_ELEMENTS
            or isinstance(eqn.primitive.numpy, Statements)
            or not pushable(eqn)
            or not all(isinstance(a, Lit) or self.folded(a) for a in eqn.inputs)
        ):
            self.unfoldable.add(atom)
            return False
        args = [a.value if isinstance(a, Lit) else self.consts[a] for a in eqn.inputs]
        with np.errstate(all="ignore"):
            value = np.asarray(eqn.primitive.impl(*args, **eqn.params.as_dict()))
        if value.dtype.kind not in "fb" or value.shape != tuple(atom.shape):
            self.unfoldable.add(atom)
            return False
        self.consts[atom] = value.astype(np.float64)
        return True

    def _computed(self, atom: Var, positions: np.ndarray) -> np.ndarray:
        eqn = self.producer.get(atom)
        if eqn is None or atom in self.kept or not pushable(eqn):
            leaf = self.leaves.setdefault(atom, len(self.leaves))
            n = len(positions)
            sid = self._shape(("v", leaf))
            return self._new(
                V,
                np.full(n, leaf, dtype=np.int64),
                positions,
                np.full(n, sid, dtype=np.int64),
                np.full(n, sid, dtype=np.int64),
            )
        if eqn.primitive.elementwise:
            children = np.stack(
                [
                    self.node(a, self._spread(eqn, slot)[positions])
                    for slot, a in enumerate(eqn.inputs)
                ],
                axis=1,
            )
            return self._elementwise(eqn, children)
        return self._moved(eqn, positions)

    def _elementwise(self, eqn: Any, children: np.ndarray) -> np.ndarray:
        """Nodes of an elementwise equation; where every operand is a constant,
        the constant it computes (float64 equations, by the primitive's
        ``impl``)."""
        ids = np.empty(len(children), dtype=np.int64)
        folded = self._all_constant(children)
        if not all(a.dtype == "float64" for a in (*eqn.inputs, eqn.out)):
            folded[:] = False
        if folded.any():
            args = [self._values(children[folded, k]) for k in range(children.shape[1])]
            with np.errstate(all="ignore"):
                value = eqn.primitive.impl(*args, **eqn.params.as_dict())
            value = np.broadcast_to(
                np.asarray(value, dtype=np.float64), (int(folded.sum()),)
            )
            ids[folded] = self._constants(value)
        rest = ~folded
        if rest.any():
            ids[rest] = self._interned(E, self.eqn_index[id(eqn)], children[rest])
        return ids

    def _spread(self, eqn: Any, slot: int) -> np.ndarray:
        """Flat positions of input ``slot`` read at each flat output element."""
        key = (self.eqn_index[id(eqn)], slot)
        if key not in self.spread:
            shape = tuple(eqn.out.shape)
            self.spread[key] = broadcast_positions(eqn.inputs[slot], shape).reshape(-1)
        return self.spread[key]

    def _moves(self, eqn: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A structural equation's moves as arrays: per flat output element its
        constant, and its terms' slots and positions (slot -1: no term), one
        column per term rank."""
        index = self.eqn_index[id(eqn)]
        if index not in self.moves:
            const = {
                i: (a.value if isinstance(a, Lit) else self.consts[a])
                for i, a in enumerate(eqn.inputs)
                if isinstance(a, Lit) or a in self.consts
            }
            moves = moves_of(eqn, const)
            self.moves[index] = (
                np.asarray(moves.constants, np.float64),
                moves.slots,
                moves.where,
            )
        return self.moves[index]

    def _moved(self, eqn: Any, positions: np.ndarray) -> np.ndarray:
        """Structural elements: each the element it moves, or the sum of its
        terms (after its constant) in the order the printer's loops add them
        (``Printer._structural``)."""
        constants, slots, where = self._moves(eqn)
        constant = constants[positions]
        slot = slots[positions]
        at = where[positions]
        count = (slot >= 0).sum(axis=1)
        if eqn.out.shape == ():  # the printer's scalar form of a move
            with_constant = (constant != 0) | (count == 0)
        else:
            with_constant = np.full(len(positions), bool(np.any(constants))) | (
                count == 0
            )
        pattern = np.concatenate(
            [with_constant[:, None].astype(np.int64), slot], axis=1
        )
        kinds, which = _unique_rows(pattern)
        ids = np.empty(len(positions), dtype=np.int64)
        for k, row in enumerate(kinds.tolist()):
            chosen = np.flatnonzero(which == k)
            parts = []
            if row[0]:
                parts.append(self._constants(constant[chosen]))
            for r, s in enumerate(row[1:]):
                if s >= 0:
                    parts.append(self.node(eqn.inputs[s], at[chosen, r]))
            if len(parts) == 1:
                ids[chosen] = parts[0]
                continue
            children = np.stack(parts, axis=1)
            folded = self._all_constant(children)
            got = np.empty(len(chosen), dtype=np.int64)
            if folded.any():  # constants added in the loops' order
                total = self._values(children[folded, 0])
                for c in range(1, children.shape[1]):
                    total = total + self._values(children[folded, c])
                got[folded] = self._constants(total)
            if (~folded).any():
                got[~folded] = self._interned(S, 0, children[~folded])
            ids[chosen] = got
        return ids

    def distinct(self, var: Var) -> int:
        """Distinct elements of ``var`` the walk reached."""
        memo = self.memo.get(var)
        return 0 if memo is None else int((memo >= 0).sum())

    # ------------------------------------------------------------- the groups
    def template(self, sid: int) -> list[tuple[int, list[int]]]:
        """Shape ``sid`` as a tree in evaluation order (children first, in
        order; a repeated operand repeated): per node its shape and its
        children's places."""
        out: list[tuple[int, list[int]]] = []

        def visit(s: int) -> int:
            key = self.shapes[s]
            kids = (
                list(key[2]) if key[0] == "e" else list(key[1]) if key[0] == "s" else []
            )
            places = [visit(k) for k in kids]
            if len(out) >= PUSH_TEMPLATE:
                raise TooLarge
            out.append((s, places))
            return len(out) - 1

        visit(sid)
        return out

    def operations(self, var: Var) -> int:
        """The most equations (elementwise and sums of moved terms) one element
        of ``var`` the walk reached is computed by, written out as a tree; past
        :data:`PUSH_TEMPLATE`, that budget."""
        memo = self.memo.get(var)
        if memo is None:
            return 0
        ids = memo[memo >= 0]
        most = 0
        for sid in np.unique(self.shape_plain.view()[ids]).tolist():
            try:
                tree = self.template(int(sid))
            except TooLarge:
                return PUSH_TEMPLATE
            most = max(most, sum(self.shapes[s][0] in "es" for s, _ in tree))
        return most

    def child_ids(self, ids: np.ndarray, slot: int) -> np.ndarray:
        """The ``slot``-th children of nodes ``ids`` (all of one arity)."""
        width = int(self.arity.view()[ids[0]])
        return self.children[width].view()[self.child_row.view()[ids], slot]

    def groups(self, roots: np.ndarray, special: bool) -> list[tuple[Any, ...]] | None:
        """The result's elements grouped by expression shape and by which of
        their operands are one node: per group its skeleton (leaves by this
        analysis's numbering), its elements (in order) and what each skeleton
        node reads. None past :data:`PUSH_GROUPS`."""
        shape = (self.shape_special if special else self.shape_plain).view()
        classes, _, which = _unique_ints(shape[roots])
        if len(classes) > PUSH_GROUPS:
            return None
        found: list[tuple[Any, ...]] = []
        for k, sid in enumerate(classes.tolist()):
            members = np.flatnonzero(which == k)
            tree = self.template(sid)
            # one row per tree node (contiguous per node: the walk reads and
            # writes whole nodes), one column per element
            ids = np.empty((len(tree), len(members)), dtype=np.int64)
            ids[-1] = roots[members]
            for t in range(len(tree) - 1, -1, -1):
                for slot, c in enumerate(tree[t][1]):
                    ids[c] = self.child_ids(ids[t], slot)
            # per node that may repeat an earlier one of its shape, the earliest
            # it is (itself when none); the other nodes are always themselves
            same: dict[int, np.ndarray] = {}
            earlier: dict[int, list[int]] = {}
            for t, (s, _) in enumerate(tree):
                for u in earlier.get(s, []):
                    column = same.setdefault(t, np.full(len(members), t, np.int64))
                    hit = (ids[u] == ids[t]) & (column == t)
                    column[hit] = u
                earlier.setdefault(s, []).append(t)
            varying = sorted(same)
            if varying:
                rows = np.stack([same[t] for t in varying], axis=1)
                distinct, inverse = _unique_rows(rows)
            else:
                distinct = np.zeros((1, 0), dtype=np.int64)
                inverse = np.zeros(len(members), dtype=np.int64)
            if len(found) + len(distinct) > PUSH_GROUPS:
                return None
            for p, row in enumerate(distinct.tolist()):
                pattern = list(range(len(tree)))
                for t, u in zip(varying, row):
                    pattern[t] = u
                if len(distinct) == 1:
                    found.append(self._skeleton(tree, pattern, ids.T, members))
                    continue
                chosen = np.flatnonzero(inverse == p)
                found.append(
                    self._skeleton(tree, pattern, ids[:, chosen].T, members[chosen])
                )
        found.sort(key=lambda g: int(g[1][0]))
        return found

    def _skeleton(
        self,
        tree: list[tuple[int, list[int]]],
        pattern: list[int],
        ids: np.ndarray,
        targets: np.ndarray,
    ) -> tuple[Any, ...]:
        local: dict[int, int] = {}
        skeleton: list[Any] = []
        reads: dict[int, np.ndarray] = {}
        for t, (s, places) in enumerate(tree):
            if pattern[t] != t:
                local[t] = local[pattern[t]]
                continue
            key = self.shapes[s]
            k = len(skeleton)
            if key[0] == "v":
                skeleton.append(("v", key[1]))
                reads[k] = self.pos.view()[ids[:, t]]
            elif key[0] == "c":
                skeleton.append(("c", key[1]))
                if key[1] is None:
                    reads[k] = self._values(ids[:, t])
            elif key[0] == "e":
                skeleton.append(("e", key[1], tuple(local[c] for c in places)))
            else:
                skeleton.append(("s", tuple(local[c] for c in places)))
            local[t] = k
        return tuple(skeleton), targets, reads


def _groups(
    analysis: DemandAnalysis, roots: np.ndarray, special: bool
) -> list[DemandGroup] | None:
    """The result's elements grouped by skeleton (None: too many loops), the
    leaves numbered in the order the elements first read them."""
    found = analysis.groups(roots, special)
    if found is None:
        return None
    order: dict[int, int] = {}
    for skeleton, _, _ in found:
        for item in skeleton:
            if item[0] == "v":
                order.setdefault(item[1], len(order))
    groups = []
    for skeleton, targets, reads in found:
        renamed = tuple(
            ("v", order[item[1]]) if item[0] == "v" else item for item in skeleton
        )
        groups += _computed_once(renamed, targets, reads)
    if len(groups) > PUSH_GROUPS:
        return None
    analysis.order = order
    return groups


RECOMPUTE_OPERATIONS = 3
"""Operations per element a result computed on demand may spend computing an
elementwise value of at least :data:`RECOMPUTE_ELEMENTS` elements again at its
extra reads instead of keeping it in memory (a store, the loads and a loop of
its own that reads the operands once more: at 10^6 elements, 16 bytes or more
of memory traffic per element, which costs more than a few arithmetic
operations)."""

RECOMPUTE_ELEMENTS = 4096
"""Values of fewer elements (32 KB of float64, about a first-level data cache)
are kept in memory wherever they are read more often than they have elements:
there the store and the loads cost about what computing again does (a 16 x 16
Brusselator's ``u * u * v``, a Rosenbrock gradient at n = 1000: the same times
within noise). Beyond, the array is a pass over the second-level cache or
memory, and a value cheap to compute again (:data:`RECOMPUTE_OPERATIONS`) is:
the Rosenbrock gradient at n = 10^4 takes 6.1 us instead of 7.1 us."""

COPIES = 8
"""Equal elements computed once and stored up to this many times (unrolled)."""


def _computed_once(
    skeleton: tuple[Any, ...], targets: np.ndarray, reads: dict[int, np.ndarray]
) -> list[DemandGroup]:
    """The group's elements that read the same operands (and constants) are
    equal: each distinct one is computed once and stored to all of them (the
    four neighbours of a stencil row share one jacobian value). One group per
    number of copies, elements in their first target's order."""
    keys = [reads[k].view(np.int64) for k in sorted(reads)]
    if not keys:
        return [DemandGroup(skeleton, targets[:, None], reads)]
    rows = np.stack(keys, axis=1)
    key = _row_keys(rows)
    if key is None:
        _, first, inverse, counts = np.unique(
            rows, axis=0, return_index=True, return_inverse=True, return_counts=True
        )
        inverse = inverse.reshape(-1)
    else:  # the same distinct rows in the same order, without NumPy's row sort
        _, first, inverse = _unique_ints(key)
        counts = np.bincount(inverse)
    if counts.max() == 1 or counts.max() > COPIES:
        return [DemandGroup(skeleton, targets[:, None], reads)]
    groups = []
    members = np.argsort(inverse, kind="stable")  # each distinct's elements
    starts = np.concatenate([[0], np.cumsum(counts)])
    for copies in sorted(set(counts.tolist())):
        chosen = np.flatnonzero(counts == copies)
        chosen = chosen[np.argsort(first[chosen], kind="stable")]
        table = np.stack([members[starts[u] : starts[u] + copies] for u in chosen])
        picked = first[chosen]
        groups.append(
            DemandGroup(
                skeleton,
                targets[table],
                {k: v[picked] for k, v in reads.items()},
            )
        )
    return groups


def pushable(eqn: Any) -> bool:
    """Elementwise float64/bool equations and structural moves: what the analysis
    follows (anything else is a leaf, read from memory)."""
    return not any(a.dtype == "int64" for a in (*eqn.inputs, eqn.out)) and (
        bool(eqn.primitive.elementwise) or structural(eqn.primitive)
    )


_DEPTHS: list[tuple[Graph, dict[Var, int]]] = []
"""The chain depths of the last graph asked about (the planner asks of one graph
many times)."""


def chain_depth(graph: Graph, out: Var) -> int:
    """The longest chain of :func:`pushable` equations ending at ``out``."""
    if not _DEPTHS or _DEPTHS[0][0] is not graph:
        depths: dict[Var, int] = {}
        for eqn in graph.eqns:
            if pushable(eqn):
                depths[eqn.out] = 1 + max(
                    (depths.get(a, 0) for a in eqn.inputs if isinstance(a, Var)),
                    default=0,
                )
        _DEPTHS[:] = [(graph, depths)]
    return _DEPTHS[0][1].get(out, 0)


def demand_of(
    graph: Graph, out: Var, consts: dict[Var, np.ndarray], recompute: bool = True
) -> Demand | None:
    """``out`` as a :class:`Demand`, or None past the budgets. With
    ``recompute``, a shared value cheap to compute again is (see
    :func:`_shared`); without, every shared value is kept in memory."""
    if out.size > PUSH_ELEMENTS or chain_depth(graph, out) > DEPTH:
        return None
    kept: frozenset[Var] = frozenset()
    earlier: DemandAnalysis | None = None
    recomputed = False
    for _ in range(2):  # once more with the shared values kept in memory
        found = _analysed(graph, out, consts, kept, earlier)
        if found is None:
            return None
        analysis, groups = found
        shared = _shared(graph, analysis, groups, recompute)
        recomputed |= bool(_shared(graph, analysis, groups, False) - shared)
        if not shared:
            break
        kept |= shared
        earlier = analysis
    by_number = {number: var for var, number in analysis.leaves.items()}
    leaves = [
        by_number[n] for n in sorted(analysis.order, key=analysis.order.__getitem__)
    ]
    return Demand(out, groups, leaves, recomputed)


def _analysed(
    graph: Graph,
    out: Var,
    consts: dict[Var, np.ndarray],
    kept: frozenset[Var],
    earlier: DemandAnalysis | None = None,
) -> tuple[DemandAnalysis, list[DemandGroup]] | None:
    """Every element of ``out`` analysed and grouped (constants 0, 1, -1 apart
    when that stays within :data:`PUSH_GROUPS` loops). With ``earlier`` (the
    analysis without ``kept``), its nodes that read no kept value are reused;
    past the budget with those counted, the analysis is made afresh, so the
    budget is the same as a new analysis's."""
    if earlier is not None:
        earlier.again(kept)
        try:
            return _walked(earlier, out)
        except TooLarge:
            pass
    limit = min(PUSH_NODES + PUSH_NODES_PER_ELEMENT * out.size, 2**31 - 1)
    try:
        return _walked(DemandAnalysis(graph, consts, kept, limit), out)
    except TooLarge:
        return None


def _walked(
    analysis: DemandAnalysis, out: Var
) -> tuple[DemandAnalysis, list[DemandGroup]] | None:
    roots = analysis.node(out, np.arange(out.size, dtype=np.int64))
    groups = _groups(analysis, roots, special=True)
    if groups is None:
        groups = _groups(analysis, roots, special=False)
    return None if groups is None else (analysis, groups)


def _shared(
    graph: Graph,
    analysis: DemandAnalysis,
    groups: list[DemandGroup],
    recompute: bool = True,
) -> frozenset[Var]:
    """Elementwise values the result reads all of, more often than they have
    elements (``x * x`` of a stencil, read by each of a row's nonzeros), where
    computing them again at each extra read costs more than
    :data:`RECOMPUTE_OPERATIONS` per element: cheaper computed once into memory
    by the usual loop than once per read. A value read twice per element
    through a shifted slice (the Rosenbrock gradient's ``x[1:] - x[:-1]**2``, at
    ``i`` and ``i - 1``) is computed again instead: the same operations on the
    same operands, so the same bits, in the one loop and with no array.
    Without ``recompute``, every such value is kept."""
    uses: dict[int, int] = {}
    for g in groups:
        for item in g.skeleton:
            if item[0] == "e":
                uses[item[1]] = uses.get(item[1], 0) + len(g.targets)
    shared = set()
    for index, count in uses.items():
        out = graph.eqns[index].out
        if analysis.distinct(out) != out.size or count <= out.size:
            continue
        recomputed = (count - out.size) * analysis.operations(out)
        if (
            not recompute
            or out.size < RECOMPUTE_ELEMENTS
            or recomputed > RECOMPUTE_OPERATIONS * out.size
        ):
            shared.add(out)
    return frozenset(shared)
