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
from difgen.targets.c.moves import broadcast_positions, moves_of, structural
from difgen.targets.c.program import Moves

PUSH_ELEMENTS = 4096
"""Results of at most this many elements are considered for evaluation on demand:
the analysis runs in Python per element, so this bounds its build time
(``python -m benchmarks.calibration_c`` measures its time per element on a
512-state Brusselator's sparse jacobian)."""

PUSH_NODES = 1 << 16
"""Distinct (value, element) nodes the demand analysis may visit (build time)."""

PUSH_GROUPS = 64
"""At most this many loops (element shapes) for one result computed on demand."""

SPECIAL_CONSTANTS = frozenset(np.float64(v).tobytes() for v in (0.0, 1.0, -1.0))
"""Constants whose value splits the elements into loops of their own: there the
constant is a literal, and the C compiler drops ``x * 1.0`` (exact in IEEE) and
multiplies by a literal ``0.0`` instead of loading a seed table (``x * 0.0`` is
kept: it is NaN for a non-finite ``x``, as in NumPy)."""


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

    @property
    def operations(self) -> int:
        return sum(g.operations for g in self.groups)


class DemandAnalysis:
    """Each element of a result as an expression DAG over values in memory and
    constants, built by following the equations backwards from that element
    (docs/design.md, section 10). Nodes are interned, so an element's DAG shares
    its repeated operands, and a value read by many elements is one node."""

    def __init__(
        self, graph: Graph, consts: dict[Var, np.ndarray], kept: frozenset[Var]
    ) -> None:
        self.consts = consts
        self.kept = kept  # values read from memory even where they could be pushed
        self.producer = {e.out: e for e in graph.eqns}
        self.eqn_index = {id(e): i for i, e in enumerate(graph.eqns)}
        self.nodes: list[tuple[Any, ...]] = []
        self.interned: dict[tuple[Any, ...], int] = {}
        self.memo: dict[tuple[Var, int], int] = {}
        self.leaves: dict[Var, int] = {}
        self.moves: dict[int, Moves] = {}
        self.pushable: dict[int, bool] = {}
        self.any_constant: dict[int, bool] = {}
        self.spread: dict[tuple[int, int], np.ndarray] = {}

    def _intern(self, node: tuple[Any, ...]) -> int:
        found = self.interned.get(node)
        if found is None:
            if len(self.nodes) >= PUSH_NODES:
                raise TooLarge
            found = self.interned[node] = len(self.nodes)
            self.nodes.append(node)
        return found

    def _constant(self, value: Any) -> int:
        return self._intern(("c", np.float64(value).tobytes()))

    def _pushable(self, eqn: Any) -> bool:
        """Elementwise float64/bool equations and structural moves."""
        index = self.eqn_index[id(eqn)]
        found = self.pushable.get(index)
        if found is None:
            found = not any(a.dtype == "int64" for a in (*eqn.inputs, eqn.out)) and (
                bool(eqn.primitive.elementwise) or structural(eqn.primitive)
            )
            self.pushable[index] = found
        return found

    def node(self, atom: Any, position: int) -> int:
        """The node of ``atom``'s flat element ``position``."""
        if isinstance(atom, Lit):
            value = atom.value
            return self._constant(value.reshape(-1)[position if value.size > 1 else 0])
        if atom in self.consts:
            return self._constant(self.consts[atom].reshape(-1)[position])
        key = (atom, position)
        found = self.memo.get(key)
        if found is not None:
            return found
        eqn = self.producer.get(atom)
        if eqn is None or atom in self.kept or not self._pushable(eqn):
            leaf = self.leaves.setdefault(atom, len(self.leaves))
            found = self._intern(("v", leaf, position))
        elif eqn.primitive.elementwise:
            children = tuple(
                self.node(a, int(self._spread(eqn, slot)[position]))
                for slot, a in enumerate(eqn.inputs)
            )
            found = self._intern(("e", self.eqn_index[id(eqn)], children))
        else:
            found = self._moved(eqn, position)
        self.memo[key] = found
        return found

    def _spread(self, eqn: Any, slot: int) -> np.ndarray:
        """Flat positions of input ``slot`` read at each flat output element."""
        key = (self.eqn_index[id(eqn)], slot)
        if key not in self.spread:
            shape = tuple(eqn.out.shape)
            self.spread[key] = broadcast_positions(eqn.inputs[slot], shape).reshape(-1)
        return self.spread[key]

    def _moved(self, eqn: Any, position: int) -> int:
        """A structural element: the element it moves, or the sum of its terms
        (after its constant) in the order the printer's loops add them
        (``Printer._structural``)."""
        index = self.eqn_index[id(eqn)]
        if index not in self.moves:
            const = {
                i: (a.value if isinstance(a, Lit) else self.consts[a])
                for i, a in enumerate(eqn.inputs)
                if isinstance(a, Lit) or a in self.consts
            }
            self.moves[index] = moves_of(eqn, const)
            self.any_constant[index] = bool(np.any(self.moves[index].constants))
        moves = self.moves[index]
        terms = moves.terms[position]
        constant = moves.constants[position]
        if eqn.out.shape == ():  # the printer's scalar form of a move
            with_constant = bool(constant) or not terms
        else:
            with_constant = self.any_constant[index] or not terms
        parts = [self._constant(constant)] if with_constant else []
        parts += [self.node(eqn.inputs[slot], i) for slot, i in terms]
        if len(parts) == 1:
            return parts[0]
        return self._intern(("s", tuple(parts)))

    def shape_of(self, root: int, special: bool) -> tuple[tuple[Any, ...], list[Any]]:
        """An element's skeleton (its DAG with positions and per-element constants
        taken out) and what was taken out, in the skeleton's order."""
        local: dict[int, int] = {}
        skeleton: list[Any] = []
        payload: list[Any] = []
        stack: list[tuple[int, bool]] = [(root, False)]
        while stack:
            n, expanded = stack.pop()
            if n in local:
                continue
            node = self.nodes[n]
            kids = node[2] if node[0] == "e" else node[1] if node[0] == "s" else ()
            if not expanded and kids:
                stack.append((n, True))
                stack.extend((k, False) for k in reversed(kids) if k not in local)
                continue
            if node[0] == "v":
                skeleton.append(("v", node[1]))
                payload.append(node[2])
            elif node[0] == "c":
                value = node[1]
                fixed = special and value in SPECIAL_CONSTANTS
                skeleton.append(("c", value if fixed else None))
                payload.append(None if fixed else value)
            elif node[0] == "e":
                skeleton.append(("e", node[1], tuple(local[k] for k in kids)))
                payload.append(None)
            else:
                skeleton.append(("s", tuple(local[k] for k in kids)))
                payload.append(None)
            local[n] = len(skeleton) - 1
        return tuple(skeleton), payload


def _groups(
    analysis: DemandAnalysis, roots: list[int], special: bool
) -> list[DemandGroup] | None:
    """The result's elements grouped by skeleton (None: too many loops)."""
    found: dict[tuple[Any, ...], tuple[list[int], list[list[Any]]]] = {}
    for target, root in enumerate(roots):
        skeleton, payload = analysis.shape_of(root, special)
        targets, payloads = found.setdefault(skeleton, ([], []))
        targets.append(target)
        payloads.append(payload)
        if len(found) > PUSH_GROUPS:
            return None
    groups = []
    for skeleton, (targets, payloads) in found.items():
        reads: dict[int, np.ndarray] = {}
        for k, item in enumerate(skeleton):
            column = [p[k] for p in payloads]
            if item[0] == "v":
                reads[k] = np.array(column, dtype=np.int64)
            elif item[0] == "c" and item[1] is None:
                reads[k] = np.frombuffer(b"".join(column), dtype=np.float64)
        groups += _computed_once(skeleton, np.array(targets, dtype=np.int64), reads)
    return groups if len(groups) <= PUSH_GROUPS else None


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
    _, first, inverse, counts = np.unique(
        rows, axis=0, return_index=True, return_inverse=True, return_counts=True
    )
    inverse = inverse.reshape(-1)
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


def demand_of(graph: Graph, out: Var, consts: dict[Var, np.ndarray]) -> Demand | None:
    """``out`` as a :class:`Demand`, or None past the budgets (or when a value
    nests deeper than Python's recursion allows)."""
    if out.size > PUSH_ELEMENTS:
        return None
    kept: frozenset[Var] = frozenset()
    for _ in range(2):  # once more with the shared values kept in memory
        found = _analysed(graph, out, consts, kept)
        if found is None:
            return None
        analysis, groups = found
        shared = _shared(graph, analysis, groups)
        if not shared:
            break
        kept |= shared
    leaves = sorted(analysis.leaves, key=analysis.leaves.__getitem__)
    return Demand(out, groups, leaves)


def _analysed(
    graph: Graph, out: Var, consts: dict[Var, np.ndarray], kept: frozenset[Var]
) -> tuple[DemandAnalysis, list[DemandGroup]] | None:
    """Every element of ``out`` analysed and grouped (constants 0, 1, -1 apart
    when that stays within :data:`PUSH_GROUPS` loops)."""
    analysis = DemandAnalysis(graph, consts, kept)
    try:
        roots = [analysis.node(out, i) for i in range(out.size)]
    except (TooLarge, RecursionError):
        return None
    groups = _groups(analysis, roots, special=True)
    if groups is None:
        groups = _groups(analysis, roots, special=False)
    return None if groups is None else (analysis, groups)


def _shared(
    graph: Graph, analysis: DemandAnalysis, groups: list[DemandGroup]
) -> frozenset[Var]:
    """Elementwise values the result reads all of, more often than they have
    elements (``x * x`` of a stencil, read by each of a row's nonzeros): cheaper
    computed once into memory by the usual loop than once per read."""
    uses: dict[int, int] = {}
    for g in groups:
        for item in g.skeleton:
            if item[0] == "e":
                uses[item[1]] = uses.get(item[1], 0) + len(g.targets)
    distinct: dict[Var, int] = {}
    for var, _ in analysis.memo:
        distinct[var] = distinct.get(var, 0) + 1
    shared = set()
    for index, count in uses.items():
        out = graph.eqns[index].out
        if distinct.get(out) == out.size and count > out.size:
            shared.add(out)
    return frozenset(shared)
