"""Planning: one operator graph as a :class:`~difgen.targets.c.program.Program`
(docs/design.md, section 10), without C text.

The passes, in the order :meth:`Planner.program` runs them: constant folding
(equations of constants evaluated at build time by the primitive's ``impl``),
results computed on demand (:meth:`Planner.on_demand`, over
:mod:`difgen.targets.c.demand`), views (structural equations that read each
element from one element of one input: an index map, no code), fusion of
elementwise chains of one shape into loop groups (reductions of their values
accumulating inside; large transcendentals and products to NumPy), results
computed in place of their reshape, which values need memory, the workspace's
layout (:func:`workspace`), and how each result computed on demand is written,
with its constants when finite (:func:`difgen.targets.c.finite.demand_plan`).
The C names are the printer's, given out as it writes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from difgen import precision
from difgen.core.ir import Eqn, Graph, Lit, Params, Var, dce
from difgen.core.primitive import INDEXED, Absent, Statements
from difgen.targets.c import indexed, statements
from difgen.targets.c.demand import Demand, demand_of
from difgen.targets.c.finite import demand_plan
from difgen.targets.c.moves import affine, gathered_arrays, moves_of, structural
from difgen.targets.c.program import (
    CONST_LIMIT,
    Group,
    Moves,
    NoLoopForm,
    Program,
    Step,
    Store,
)
from difgen.targets.c.rows import Rows, head_rows, tail_slot

STORE_LOAD_OPERATIONS = 2
"""What storing an element of an array and loading it again in another loop
counts as, in operations, when :meth:`Planner.on_demand` weighs computing a
result at its own elements against computing it as usual (an underestimate
beyond the caches, where the two memory passes cost far more)."""

UFUNC_SIZE = 512
"""From this many elements, a transcendental calls NumPy's own loop instead of
the C library's per element: the call has a fixed cost that NumPy's faster loop
must win back (``python -m benchmarks.calibration_c`` measures the call, the
saving per element and the size where they cross)."""

REAL = ("float64", "float32")
"""The dtypes of the loops' real values: float32 data is a float32 module's
(config.py makes a float64 module's float32 contexts float64), whose C computes
in float throughout (:mod:`difgen.targets.c.real`)."""

BLAS_WORK = 4096
"""Products of at least this many multiply-adds go to NumPy's dot (BLAS)."""


def loop_kind(eqn: Any) -> str:
    """Which loop form an equation (on argument-dependent values) takes: its
    primitive's declared ``c_loop`` (``targets/c`` keeps no table of names), or
    ``statement`` for control flow printed as C statements (the statement form
    its declaration names, :mod:`difgen.targets.c.statements`)."""
    name = eqn.primitive.name
    form = eqn.primitive.c_loop
    control = statements.has_form(eqn)
    if isinstance(form, Absent) and not control:
        raise NoLoopForm(f"{name} ({form.reason})")
    if any(a.dtype == "int64" for a in (*eqn.inputs, eqn.out)):
        # the loops compute in doubles: int64 arithmetic (overflow, floor
        # division) is NumPy's only in the vector emission
        raise NoLoopForm(f"{name} on int64 values")
    if not control and form.kind == "scan" and precision.is_float32():
        # a float32 module's cumsum accumulates in float64 (precision.widened)
        raise NoLoopForm(f"{name} (a float32 module's scan accumulates in float64)")
    return "statement" if control else str(form.kind)


def gathers_from_sources(graph: Graph, consts: dict[Var, np.ndarray]) -> Graph:
    """A move of one input reading an array that a move of several inputs wrote
    (a sparse jacobian's nonzeros gathered from the colors' columns concatenated,
    through reshapes), that array read nowhere else: one move from those inputs,
    so that the loops write the gathered elements from where they were computed
    and the joined array is never stored. Only where each element is one
    source element or zero (:func:`~difgen.targets.c.moves.gathered`), on
    sources that are no constants."""
    reads: dict[Var, int] = {}
    for e in graph.eqns:
        for a in e.inputs:
            if isinstance(a, Var):
                reads[a] = reads.get(a, 0) + 1
    for o in graph.outputs:
        if isinstance(o, Var):
            reads[o] = reads.get(o, 0) + 2
    producer = {e.out: e for e in graph.eqns}
    rewritten: dict[int, Eqn] = {}
    for e in graph.eqns:
        if not structural(e.primitive) or len(e.inputs) != 1:
            continue
        chain = [e]
        while True:
            (a,) = chain[-1].inputs
            if not isinstance(a, Var) or reads.get(a) != 1:
                break
            made = producer.get(a)
            if made is None or not structural(made.primitive):
                break
            if isinstance(made.primitive.numpy, Statements):
                break
            chain.append(made)
            if len(made.inputs) != 1:
                break
        if len(chain) < 2 or len(chain[-1].inputs) < 2:
            continue
        sources = chain[-1].inputs
        if any(
            not isinstance(a, Var) or a.dtype not in REAL or a in consts
            for a in sources
        ) or any(c.out in consts for c in chain):
            continue
        joined = Eqn(
            dataclasses.replace(
                e.primitive,
                name="_of_".join(c.primitive.name for c in chain),
                impl=_composed(chain),
            ),
            chain[-1].inputs,
            Params.of({}),
            e.out,
        )
        if gathered_arrays(joined) is not None:  # each element one source's, or 0
            rewritten[id(e)] = joined
    if not rewritten:
        return graph
    eqns = tuple(rewritten.get(id(e), e) for e in graph.eqns)
    return dce(Graph(graph.inputs, graph.outputs, eqns))


def _composed(chain: list[Any]) -> Any:
    def impl(*args: Any) -> Any:
        value = chain[-1].primitive.impl(*args, **chain[-1].params.as_dict())
        for c in reversed(chain[:-1]):
            value = c.primitive.impl(value, **c.params.as_dict())
        return value

    return impl


class Planner:
    """The passes over one operator graph (see the module docstring)."""

    def __init__(
        self, graph: Graph, sub: bool = False, in_range: frozenset[Var] = frozenset()
    ) -> None:
        # sub: a loop's or a branch's sub-graph, whose inputs may be flags (bool,
        # held as doubles 0 and 1) and which calls no NumPy (a failed call would
        # leave the loop holding its tape); in_range: the run-time indices of a
        # loop's body the build proved in bounds (difgen.targets.c.counters)
        self.sub = sub
        self.in_range = in_range
        self.graph = graph  # what remains to compile as usual (see on_demand)
        self.outputs = graph.outputs
        self.original_eqns = graph.eqns
        self.producer = {e.out: e for e in graph.eqns}
        self.moves: dict[Var, Moves] = {}
        self.view_of: dict[Var, tuple[Any, np.ndarray]] = {}
        self.view_root: dict[Var, Var] = {}
        self.result_of: dict[Var, Store] = {}
        self.group_of: dict[Var, int] = {}
        self.in_place: set[Var] = set()  # results computed as their reshape
        self.consts: dict[Var, np.ndarray] = {}
        self.unfolded: set[Var] = set()  # constants computed by the loops
        self.fixed: set[Var] = set()  # values that read no argument (not folded)
        self.no_row_pass: set[Var] = set()  # products whose row pass found no tail
        for var in graph.inputs:
            if var.dtype not in REAL and not (sub and var.dtype == "bool"):
                raise NoLoopForm(f"a {var.dtype} argument")

    def program(self, results: list[Store | None]) -> Program:
        """The graph planned to compute into ``results`` (a Store per output
        that is written directly; None: copied at the end)."""
        for eqn in self.graph.eqns:  # constants first: the rewrite skips them
            self._constant(eqn)
        joined = gathers_from_sources(self.graph, self.consts)
        if joined is not self.graph:
            self.graph = joined
            self.original_eqns = joined.eqns
            self.producer = {e.out: e for e in joined.eqns}
        demands = self.on_demand(results)
        pushed = {d.out for d, _ in demands}
        for out, store in zip(self.outputs, results):
            if (
                store is not None
                and isinstance(out, Var)
                and out not in self.result_of
                and out not in pushed
            ):
                self.result_of[out] = store
        items = self.plan()
        self._reshaped_results(results)
        needs = self._needs_store(items)
        cached = self._cached(items, needs)
        offsets, work = workspace(items, needs, self.result_of, cached)
        planned = [
            demand_plan(demand, store, self.original_eqns, self.view_of)
            for demand, store in demands
        ]
        return Program(
            self.graph,
            self.outputs,
            self.original_eqns,
            items,
            self.consts,
            self.moves,
            self.view_of,
            self.result_of,
            self.in_place,
            needs,
            planned,
            offsets,
            work,
            cached,
            self.in_range,
        )

    def _cached(
        self, items: list[Group | Step], needs: set[Var]
    ) -> dict[int, set[Var]]:
        """Loop nests and moves that read no argument (the loops' part of a
        constant too large to fold, :attr:`unfolded`, and what follows from it
        alone): computed at the first call into static arrays, then reused.
        Per item, the values it stores (none is a result or a scalar)."""
        if not self.unfolded:
            return {}
        fixed: set[Var] = set(self.consts) | set(self.unfolded)
        for eqn in self.graph.eqns:
            if eqn.out in self.unfolded or isinstance(eqn.primitive.numpy, Statements):
                continue
            if all(isinstance(a, Lit) or a in fixed for a in eqn.inputs):
                fixed.add(eqn.out)
        cached: dict[int, set[Var]] = {}
        for k, item in enumerate(items):
            if isinstance(item, Step) and (
                item.blas or loop_kind(item.eqn) != "structural"
            ):
                continue  # NumPy's loops (BLAS, ufuncs) keep their own buffers
            eqns = item.eqns if isinstance(item, Group) else [item.eqn]
            outs = [e.out for e in eqns]
            if all(
                o in fixed and o.shape != () and o not in self.result_of for o in outs
            ):
                cached[k] = {o for o in outs if o in needs or isinstance(item, Step)}
        return cached

    def plan(self) -> list[Group | Step]:
        """Equations into loop groups and steps; views and constants need none.

        An elementwise equation joins the current group when it has the group's
        shape and reads no reduction still accumulating in it, nor a view of one of
        its values (the loop has not written all of them yet). A product
        ``X @ w`` of a large X starts a row pass (:mod:`difgen.targets.c.rows`)
        that a later ``X.T @ r`` of a value of the group ends; one that no such
        product joins is planned again as before."""
        while True:
            plan = self._plan()
            lone = [
                g.eqns[0].out
                for g in plan
                if isinstance(g, Group)
                and g.rows is not None
                and not any(
                    e.out in g.pending for e in g.eqns[1:] if loop_kind(e) == "matmul"
                )
            ]
            if not lone:
                return plan
            self.no_row_pass.update(lone)

    def _plan(self) -> list[Group | Step]:
        plan: list[Group | Step] = []
        group: Group | None = None
        self.group_of = {}
        for eqn in self.graph.eqns:
            if self._constant(eqn):
                continue
            if eqn.out in self.unfolded or (
                eqn.inputs
                and all(
                    isinstance(a, Lit) or a in self.consts or a in self.fixed
                    for a in eqn.inputs
                )
            ):
                self.fixed.add(eqn.out)
            kind = loop_kind(eqn)
            if kind in INDEXED:
                self._indexed(eqn)
            if kind == "structural" and self._view(eqn):
                continue
            if (
                kind == "elementwise"
                and self._ufunc(eqn)
                and not self._in_row(eqn, group)
            ):
                group = None
                plan.append(Step(eqn))
                continue
            tail = kind == "matmul" and group is not None and self._row_tail(eqn, group)
            rows = self._row_head(eqn) if kind == "matmul" and not tail else None
            if rows is not None:
                group = Group(len(plan), tuple(eqn.out.shape), rows=rows)
                plan.append(group)
            elif kind == "elementwise":
                shape = tuple(eqn.out.shape)
                if group is None or not self._joins(eqn, group, shape):
                    group = Group(len(plan), shape)
                    plan.append(group)
            elif group is not None and (
                (kind == "reduction" and self._fusable(eqn, group)) or tail
            ):
                group.pending.add(eqn.out)
            else:
                group = None
                plan.append(Step(eqn, kind == "matmul" and self._blas(eqn)))
                continue
            group.eqns.append(eqn)
            self.group_of[eqn.out] = group.index
        return plan

    def _row_head(self, eqn: Any) -> Rows | None:
        """The matrix of ``X @ w`` when it starts a row pass: a large X, outside
        a loop's body, not already found without a tail."""
        if self.sub or eqn.out in self.no_row_pass:
            return None
        return head_rows(eqn, self.view_of, self.consts)

    def _in_row(self, eqn: Any, group: Group | None) -> bool:
        """Whether elementwise ``eqn`` joins a row pass (where a transcendental
        is computed one element at a time, as the row is read)."""
        return (
            group is not None
            and group.rows is not None
            and self._joins(eqn, group, tuple(eqn.out.shape))
        )

    def _row_tail(self, eqn: Any, group: Group) -> bool:
        """Whether ``eqn`` is ``X.T @ r`` (``r @ X``) on the row pass's X and a
        value ``r`` of the group, accumulated in its loop."""
        if group.rows is None:
            return False
        slot = tail_slot(eqn, group.rows, group.shape, self.view_of)
        if slot is None:
            return False
        r, matrix = eqn.inputs[slot], eqn.inputs[1 - slot]
        return (
            isinstance(r, Var)
            and self.group_of.get(r) == group.index
            and r not in group.pending
            and matrix not in self.group_of
        )

    def _indexed(self, eqn: Any) -> None:
        """A gather or scatter-add through a run-time index is a step of the
        loops when the index is one argument along one axis
        (:mod:`difgen.targets.c.indexed`), outside a loop's or a branch's body
        (the step may raise) and in a float64 module (the index is read as
        doubles)."""
        found = indexed.one_axis(eqn)
        if found is None:
            raise NoLoopForm(
                f"{eqn.primitive.name} (a run-time index, not along one axis)"
            )
        proved = eqn.inputs[found.slot] in self.in_range
        if self.sub and not proved:
            raise NoLoopForm(
                f"{eqn.primitive.name} (a run-time index in a loop's body)"
            )
        if precision.is_float32():
            raise NoLoopForm(f"{eqn.primitive.name} (a run-time index in float32)")
        if not proved and eqn.inputs[found.slot] not in self.graph.inputs:
            raise NoLoopForm(
                f"{eqn.primitive.name} (a run-time index that is no argument)"
            )

    def _ufunc(self, eqn: Any) -> bool:
        """A transcendental over many elements is NumPy's own ufunc loop, called
        on the operand's memory: NumPy's SIMD ``exp``/``tanh``/``log`` are several
        times faster than the C library's, and give NumPy's exact results."""
        form = eqn.primitive.c_loop
        if self.sub or isinstance(form, Absent) or not form.ufunc:
            return False
        assert isinstance(eqn.primitive.impl, np.ufunc), eqn.primitive
        (a,) = eqn.inputs
        if eqn.out.size < UFUNC_SIZE or not isinstance(a, Var) or a in self.consts:
            return False
        if a.dtype not in REAL or a.shape != eqn.out.shape:
            return False
        return self._in_memory(a)

    def _blas(self, eqn: Any) -> bool:
        """A large 1-D/2-D ``a @ b`` is NumPy's own ``dot`` (BLAS), on arrays
        that wrap the operands' memory: the loops would be slower than BLAS."""
        a, b = eqn.inputs
        k = a.shape[-1]
        if precision.accumulating():  # sgemm sums in float: the loops, in double
            return False
        if (
            self.sub
            or a.ndim > 2
            or b.ndim > 2
            or eqn.out.size * k < BLAS_WORK
            or k == 0
        ):
            return False
        return eqn.out.shape != () and self._in_memory(a) and self._in_memory(b)

    def _in_memory(self, atom: Any) -> bool:
        """Whether NumPy can be handed ``atom``'s elements where they lie: a
        constant (a table), a value in memory, or a view of one at affine
        positions with non-negative strides."""
        if isinstance(atom, Lit) or atom in self.consts or atom not in self.view_of:
            return True
        found = affine(self.view_of[atom][1])
        return found is not None and all(s >= 0 for s in found[1])

    def _joins(self, eqn: Any, group: Group, shape: tuple[int, ...]) -> bool:
        if group.shape != shape:
            return False
        for a in eqn.inputs:
            if not isinstance(a, Var):
                continue
            if a in group.pending:
                return False
            root = self.view_root.get(a)
            if root is not None and self.group_of.get(root) == group.index:
                return False
        return True

    def _fusable(self, eqn: Any, group: Group) -> bool:
        (a,) = eqn.inputs
        return (
            isinstance(a, Var)
            and self.group_of.get(a) == group.index
            and a not in group.pending
            and tuple(a.shape) == group.shape
        )

    def _constant(self, eqn: Any) -> bool:
        """Evaluate an equation of constants at build time (NumPy, as the vector
        emission hoists it to import time)."""
        if eqn.out in self.consts:
            return True
        if any(isinstance(a, Var) and a not in self.consts for a in eqn.inputs):
            return False
        if isinstance(eqn.primitive.numpy, Statements):  # control flow: not folded
            return False
        if eqn.out.size > CONST_LIMIT:
            if isinstance(eqn.primitive.c_loop, Absent):
                raise NoLoopForm(
                    f"{eqn.primitive.name} (a constant of {eqn.out.size} elements)"
                )
            # too large for a table (a sparse jacobian's seed matrix, the
            # colors' rows of an identity): the loops compute it, and what
            # follows from it, from the smaller constants it is made of
            self.unfolded.add(eqn.out)
            return False
        args = [a.value if isinstance(a, Lit) else self.consts[a] for a in eqn.inputs]
        value = np.asarray(eqn.primitive.impl(*args, **eqn.params.as_dict()))
        if value.dtype.kind not in "fb" and not (
            value.dtype.kind in "iu" and np.all(np.abs(value) < 2**53)
        ):
            return False
        self.consts[eqn.out] = value.astype(np.float64)
        return True

    def _view(self, eqn: Any) -> bool:
        """A structural equation reading each element from one element of one
        stored (or viewed) input: a view, no code."""
        const = {
            i: (a.value if isinstance(a, Lit) else self.consts[a])
            for i, a in enumerate(eqn.inputs)
            if isinstance(a, Lit) or (a in self.consts and eqn.out not in self.unfolded)
        }  # a constant too large to fold moves the elements of its constant inputs
        moves = moves_of(eqn, const)
        self.moves[eqn.out] = moves
        read = moves.slots[:, 0]
        if np.any(moves.constants) or moves.slots.shape[1] != 1 or read.size == 0:
            return False
        slot = int(read[0])
        if slot < 0 or not np.all(read == slot):  # a zero, or several inputs
            return False
        src = eqn.inputs[slot]
        if isinstance(src, Lit) or src in self.consts:
            return False  # a view of a constant is folded already
        table = moves.where[:, 0].copy()
        if src in self.view_of:  # a view of a view reads the first one's source
            src, first = self.view_of[src]
            table = first.reshape(-1)[table]
        if eqn.out in self.fixed and affine(table.reshape(eqn.out.shape)) is not None:
            flat = table.reshape(-1)
            if not np.array_equal(flat, flat[0] + np.arange(flat.size)):
                # a strided view of a value computed once (a seed's transpose):
                # stored contiguous once too, so that every call reads it in order
                return False
        self.view_of[eqn.out] = (src, table.reshape(eqn.out.shape))
        self.view_root[eqn.out] = src
        del self.moves[eqn.out]  # the table is all of it (a tuple per element
        # held for each view of a 256x256 grid's colors was 120 MB)
        return True

    def on_demand(self, results: list[Store | None]) -> list[tuple[Demand, Store]]:
        """Results to compute at their own elements only (:class:`Demand`): a
        structural result (a gather of a sparse jacobian's nonzeros out of the
        colors' compressed columns, say) whose dependencies are elementwise
        equations and moves, when that is fewer operations than computing those
        equations over their whole shapes. The graph left to compile as usual
        becomes the equations the other results and the demands' leaves need."""
        for eqn in self.graph.eqns:  # constants first: the analysis folds them
            self._constant(eqn)
        read = {a for e in self.graph.eqns for a in e.inputs if isinstance(a, Var)}
        constant_only = set(self.consts)  # computed once, not per call
        for eqn in self.graph.eqns:
            if all(isinstance(a, Lit) or a in constant_only for a in eqn.inputs):
                constant_only.add(eqn.out)
        outputs = [o for o in self.outputs if isinstance(o, Var)]
        moved = self._reads_moved_values()
        chosen: list[tuple[Demand, Store]] = []
        for out, store in zip(self.outputs, results):
            if not isinstance(out, Var):
                continue
            made_by = self.producer.get(out)
            if (
                store is None
                or made_by is None
                or not (
                    structural(made_by.primitive)
                    or (made_by.primitive.elementwise and out in moved)
                )
                or out in read
                or out in self.consts
                or outputs.count(out) != 1
            ):
                continue
            # the values it reads twice computed again where cheap (one loop,
            # no array), else kept in memory as the analysis first proposes
            for recompute in (True, False):
                demand = demand_of(self.graph, out, self.consts, recompute)
                if demand is None or not any(
                    item[0] == "e" for g in demand.groups for item in g.skeleton
                ):
                    break
                if self._pays(demand, chosen, constant_only):
                    chosen.append((demand, store))
                    break
                if not demand.recomputed:  # the other way is this same one
                    break
        if chosen:
            self.graph = self._rest_graph([d for d, _ in chosen])
        return chosen

    def _reads_moved_values(self) -> set[Var]:
        """Values whose elementwise equations read, through elementwise
        equations only, a structural move of a value computed here (a roll or
        a shifted slice of an adjoint): computed as usual, the moved value is an
        array of its own and the loop that reads it another pass."""
        moved_computed: set[Var] = set()
        computed: set[Var] = set()
        found: set[Var] = set()
        for eqn in self.graph.eqns:
            ins = [a for a in eqn.inputs if isinstance(a, Var)]
            if structural(eqn.primitive) and any(a in computed for a in ins):
                moved_computed.add(eqn.out)
            elif eqn.primitive.elementwise and any(
                a in moved_computed or a in found for a in ins
            ):
                found.add(eqn.out)
            if eqn.out not in self.consts and (
                eqn.primitive.elementwise or structural(eqn.primitive)
            ):
                computed.add(eqn.out)
        return found

    def _pays(
        self,
        demand: Demand,
        chosen: list[tuple[Demand, Store]],
        constant_only: set[Var],
    ) -> bool:
        """Whether ``demand`` takes fewer operations per call than the
        equations it makes unnecessary, with the memory passes those need."""
        before = self._rest_graph([d for d, _ in chosen]).eqns
        after = {
            e.out for e in self._rest_graph([*(d for d, _ in chosen), demand]).eqns
        }
        gone = [e for e in before if e.out not in after and e.out not in constant_only]
        saved = sum(
            e.out.size for e in gone if e.primitive.elementwise or len(e.inputs) > 1
        )  # moves of one input are mostly views, which compute nothing
        # ... and the memory passes: an elementwise value a move reads (the
        # scatter-add of shifted slices' adjoints, a roll) is stored by its loop
        # and loaded by the move's, or by the loop that reads the view
        computed = {e.out for e in gone if e.primitive.elementwise}
        saved += STORE_LOAD_OPERATIONS * sum(
            a.size
            for e in gone
            if not e.primitive.elementwise
            for a in set(e.inputs)
            if isinstance(a, Var) and a in computed
        )
        return demand.operations < saved

    def _rest_graph(self, demands: list[Demand]) -> Graph:
        """The graph without the demands' results, plus their leaves as outputs."""
        pushed = {d.out for d in demands}
        outputs = [o for o in self.outputs if not (isinstance(o, Var) and o in pushed)]
        inputs = set(self.graph.inputs)
        for d in demands:
            outputs += [v for v in d.leaves if v not in inputs and v not in outputs]
        return dce(Graph(self.graph.inputs, tuple(outputs), self.graph.eqns))

    def _reshaped_results(self, results: list[Store | None]) -> None:
        """A result that is a reshape of a computed value (a dense hessian from
        its flat scatter): that value is computed into the result buffer."""
        for out, store in zip(self.outputs, results):
            if store is None or not isinstance(out, Var) or out not in self.view_of:
                continue
            src, table = self.view_of[out]
            computed = src not in self.graph.inputs and src not in self.consts
            if (
                computed
                and src not in self.result_of
                and src.size == out.size
                and np.array_equal(table.reshape(-1), np.arange(out.size))
                # a scalar value (a double in the loops) is copied into a
                # result of shape (1,), which is an array
                and (src.shape != () or store.shape == ())
            ):
                # a scalar result is a double, not an array: a (1,)-shaped value
                # computed into it is that double too
                shape = () if store.shape == () else tuple(src.shape)
                self.result_of[src] = Store(store.name, shape)
                self.in_place.add(out)

    def _needs_store(self, plan: list[Group | Step]) -> set[Var]:
        """Values of a loop group read outside it (or results) need an array."""
        needs: set[Var] = {v for v in self.graph.outputs if isinstance(v, Var)}
        where: dict[Var, int] = {}
        for k, item in enumerate(plan):
            eqns = item.eqns if isinstance(item, Group) else [item.eqn]
            for eqn in eqns:
                where[eqn.out] = k
        for k, item in enumerate(plan):
            eqns = item.eqns if isinstance(item, Group) else [item.eqn]
            for eqn in eqns:
                for a in eqn.inputs:
                    if isinstance(a, Var) and where.get(a, k) != k:
                        needs.add(a)
        for src, _ in self.view_of.values():
            needs.add(src)
        for item in plan:
            if isinstance(item, Group):
                needs.update(item.pending)
        return needs


def workspace(
    items: list[Group | Step],
    needs: set[Var],
    result_of: dict[Var, Store],
    cached: dict[int, set[Var]] | None = None,
) -> tuple[dict[Var, int], int]:
    """The workspace's layout: each array the program computes that is no result
    buffer (a value of a loop that needs memory, a reduction, a step's result)
    takes the next doubles, in the order the program computes them; scalars are
    local doubles. Returns the offsets and the doubles in all."""
    offsets: dict[Var, int] = {}
    work = 0
    for k, item in enumerate(items):
        if cached and k in cached:
            continue  # static arrays, kept from the first call
        pending = item.pending if isinstance(item, Group) else None
        for eqn in item.eqns if isinstance(item, Group) else [item.eqn]:
            out = eqn.out
            if pending is not None and out not in pending and out not in needs:
                continue  # a scalar temporary of its loop (a row pass's dot too)
            if out in result_of or out.shape == ():
                continue
            offsets[out] = work
            work += out.size
    return offsets, work
