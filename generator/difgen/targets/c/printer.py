"""The printer: a planned :class:`~difgen.targets.c.program.Program` as the C
statements of one operator (docs/design.md, section 10).

:class:`Printer` visits the program's loop groups and steps in order and writes
each as C: fused elementwise loops with scalar temporaries (stored where the
program says a value needs memory), structural equations that are not views,
reductions, matmul, NumPy's own ufunc loops and BLAS (:mod:`difgen.targets.c.calls`),
the results computed on demand with their finite-constant path, and the copies of
results not computed in place. Names (temporaries, arrays, tables) are given
out in the order the C reads them; an array lives in a result buffer or at the
workspace offset (``dg_w``) the planner laid out, a scalar in a local double.
What is computed, where and how is the program's; the printer only picks how
to write it (index arithmetic or a table for an index map, ``memcpy``,
``memset`` or nothing before a structural equation's loops).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from difgen import precision
from difgen.core.ir import Lit, Var
from difgen.core.primitive import INDEXED, LoopForm
from difgen.targets.c import calls, indexed, statements
from difgen.targets.c.demand import Demand, DemandGroup
from difgen.targets.c.extension import PREFIX
from difgen.targets.c.finite import DemandPlan, FinitePlan, Layout
from difgen.targets.c.glue import Used
from difgen.targets.c.moves import SEPARABLE_FROM, broadcast_positions
from difgen.targets.c.nest import LoopNest, Tables, c_number, element_text, eqn_text
from difgen.targets.c.program import (
    Fused,
    Group,
    NoLoopForm,
    Program,
    Step,
    Store,
    Value,
    View,
    store_size,
)
from difgen.targets.c.rows import resolved, tail_slot


def reduction_form(prim: Any) -> tuple[str, str]:
    """A reduction's C accumulator, as its declaration gives it: the start and the
    update of ``{acc}`` by ``{v}`` (NaN-propagating extrema)."""
    form = prim.c_loop
    assert isinstance(form, LoopForm) and form.kind == "reduction", prim
    return form.start, form.update


EXPONENT = "0x7ff0000000000000ULL"
"""The exponent bits of a double: all set for inf and NaN only."""

EXPONENT32 = "0x7f800000U"
"""The exponent bits of a float (a float32 module's values)."""


WIDE = frozenset(["reduce_sum", "reduce_prod"])
"""The reductions a float32 module with ``accumulate = "float64"`` accumulates in
double, as its NumPy emission's ``np.add.reduce(..., dtype=np.float64)`` and
``np.multiply.reduce`` do (matmul's register is double too; cumsum and einsum
have no loop form)."""

WIDE_ELEMENTS = 4096
"""The most elements of a double accumulator (on the C stack, 32 KiB): a larger
reduction keeps its operator in Python, which accumulates in float64 too."""


def widening(eqn: Any) -> bool:
    """Whether ``eqn`` accumulates in double and rounds its result to float once."""
    return precision.accumulating() and eqn.primitive.name in WIDE


def wide_accumulator(name: str, store: Store, start: str) -> tuple[Store, list[str]]:
    """The double accumulator standing for ``store`` in a widened reduction, and
    its declaration set to ``start``. ``npy_double`` is the one spelling of double
    a float32 module's C keeps (:mod:`difgen.targets.c.real`)."""
    acc = Store(name, store.shape)
    if store.shape == ():
        return acc, [f"npy_double {name} = {start};"]
    size = store_size(store)
    if size > WIDE_ELEMENTS:
        raise NoLoopForm(
            f'a float64 accumulator of {size} elements (accumulate = "float64")'
        )
    loop = f"for (npy_intp {PREFIX}j = 0; {PREFIX}j < {size}; {PREFIX}j++)"
    return acc, [f"npy_double {name}[{size}];", f"{loop} {name}[{PREFIX}j] = {start};"]


def wide_result(acc: Store, store: Store) -> list[str]:
    """``store`` set to the double accumulator ``acc``, each element rounded once."""
    if store.shape == ():
        return [f"{store.name} = (double){acc.name};"]
    loop = f"for (npy_intp {PREFIX}j = 0; {PREFIX}j < {store_size(store)}; {PREFIX}j++)"
    return [f"{loop} {store.name}[{PREFIX}j] = (double){acc.name}[{PREFIX}j];"]


class Printer:
    """One planned operator graph as the body of a C function."""

    def __init__(
        self, program: Program, inputs: list[tuple[str, tuple[int, ...]]], stem: str
    ) -> None:
        self.program = program
        self.outputs = program.outputs
        self.original_eqns = program.original_eqns
        self.producer = {e.out: e for e in program.original_eqns}
        self.tables = Tables(stem)
        self.moves = program.moves
        self.view_of = program.view_of
        self.result_of = program.result_of
        self.in_place = program.in_place
        self.consts = program.consts
        self.values: dict[Var, Value] = {}
        self.work = program.work  # doubles of workspace
        self.calls_numpy = False  # NumPy's ufunc loops or dot: the GIL is needed
        self.use = Used()  # the runtime names the statements use
        self.lines: list[str] = []
        self.counter = 0
        self.loops: dict[Any, list[Store]] = {}  # equal loops run once (statements)
        self.tapes: dict[Any, tuple[str, str, str]] = {}  # sweeps' recorded tapes
        for var, (name, shape) in zip(program.graph.inputs, inputs):
            self.values[var] = Store(name, shape)
        self._arguments = {name for name, _ in inputs}
        self.reads: set[str] = set()  # the arguments' names the statements read
        self.statics_of = {v for vs in program.cached.values() for v in vs}
        self.statics: list[str] = []  # their arrays' declarations

    def reading(self, value: Value) -> Value:
        """``value``, about to be read: an argument's (or a view of it) is
        recorded in :attr:`reads`."""
        base = value.base if isinstance(value, View) else value
        if isinstance(base, Store) and base.name in self._arguments:
            self.reads.add(base.name)
        return value

    def _accumulator(self, prim: Any) -> tuple[str, str]:
        """A reduction's declared accumulator, the runtime helpers its update
        calls recorded (``_maximum``)."""
        self.use.add(prim.c_loop.calls)
        return reduction_form(prim)

    # ---------------------------------------------------------------- storage
    def _fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{PREFIX}{stem}{self.counter}"

    def _array(self, var: Var) -> Store:
        """Storage for ``var``: a result buffer, a local double or its planned
        place in the workspace (:func:`~difgen.targets.c.plan.workspace`)."""
        if var in self.result_of:
            return self.result_of[var]
        if var.shape == ():
            name = self._fresh("v")
            self.lines.append(f"double {name};")
            return Store(name, ())
        name = self._fresh("a")
        if var in self.statics_of:  # computed once, at the first call
            self.statics.append(f"static double {name}[{var.size}];")
            return Store(name, tuple(var.shape))
        offset = self.program.offsets[var]  # the workspace's layout is planned
        self.lines.append(f"double *const {name} = {PREFIX}w + {offset};")
        return Store(name, tuple(var.shape))

    # ----------------------------------------------------------------- reads
    def read(self, nest: LoopNest, atom: Any, positions: np.ndarray) -> str:
        """C text of ``atom``'s elements at ``positions`` (flat, atom's layout)."""
        if isinstance(atom, Lit):
            if atom.value.size == 1:
                return c_number(atom.value.ravel()[0])
            base = Store(self.tables.doubles(atom.value), tuple(atom.shape))
            return nest.at(base, positions)
        if atom in self.consts:
            value = self.consts[atom]
            if value.size == 1:
                return c_number(value.ravel()[0])
            return nest.at(Store(self.tables.doubles(value), value.shape), positions)
        v = self.reading(self.values[atom])
        if isinstance(v, Fused):
            return v.name
        if isinstance(v, View):
            return nest.at(v.base, v.table.reshape(-1)[positions])
        return nest.at(v, positions)

    # ----------------------------------------------------------------- emit
    def compile(self) -> list[str]:
        """The statements computing the program into its result buffers."""
        views_done: set[Var] = set()
        ready = f"{PREFIX}ready"
        for k, item in enumerate(self.program.items):
            self._views_before(views_done)
            start = len(self.lines)
            if isinstance(item, Group):
                self._group(item, self.program.needs)
            else:
                self._step(item)
            if k in self.program.cached:  # the same at every call
                code = self.lines[start:]
                self.lines[start:] = [
                    f"if (!{ready}) {{ /* reads no argument: computed once */",
                    *(f"    {line}" for line in code),
                    "}",
                ]
        self._views_before(views_done)
        if self.program.cached:
            # the static arrays are written at the first call with the GIL held
            # (a points loop running these statements keeps it)
            self.calls_numpy = True
            self.lines[0:0] = [f"static int {ready} = 0;", *self.statics]
            self.lines.append(f"{ready} = 1;")
        for planned in self.program.demands:
            self._demand_loops(planned)
        return self.lines

    def _demand_loops(self, planned: DemandPlan) -> None:
        """The result's groups of elements, each element evaluated as the
        equations would have computed it (the same operations on the same
        doubles, in the same order); per-element constants are tables of the
        group's length, constants the same for all its elements literals.

        Elements that are one constant whenever the values they read are finite
        (:func:`~difgen.targets.c.finite.finite_constant`: a sparse jacobian's
        ``10.0 + a * 0.0``) are written as that constant after one vectorized
        test that those values are finite; otherwise the loops compute them, NaN
        and inf as NumPy does."""
        demand, store = planned.demand, planned.store
        count = len({len(g.targets) for g in demand.groups})
        self.lines.append(
            f"/* {eqn_text(self.producer[demand.out])}: computed at its "
            f"{demand.out.size} elements only, in {count} loop"
            f"{'s' if count != 1 else ''} */"
        )
        if planned.finite is None or planned.when_finite is None:
            self.lines += self._groups_code(demand, planned.everywhere, store)
        else:  # names and tables are given out in the order the C reads
            flag, test = self._finite_test(planned.finite)
            first = []
            if not planned.finite.filled:  # one table of the constants first
                table = self.tables.doubles(planned.finite.template)
                size = store_size(store)
                first.append(f"memcpy({store.name}, {table}, sizeof(double) * {size});")
            when_finite = self._groups_code(demand, planned.when_finite, store)
            everywhere = self._groups_code(demand, planned.everywhere, store)
            self.lines += [
                *test,
                f"if ({flag} == 0) {{ /* every value read is finite */",
                *(f"    {line}" for line in first),
                *(f"    {line}" for line in when_finite),
                "} else {",
                *(f"    {line}" for line in everywhere),
                "}",
            ]
        self.values[demand.out] = store

    def _finite_test(self, finite: FinitePlan) -> tuple[str, list[str]]:
        """A flag and the C that sets it when a value read is not finite (an
        integer OR over the bits of all of each array they are read from)."""
        bases: dict[str, tuple[int, bool]] = {}  # name: (doubles, a scalar)
        for var in finite.tested:
            base = self.reading(self.values[var])
            assert isinstance(base, Store)  # every value read has memory
            bases[base.name] = (store_size(base), base.shape == ())
        flag = self._fresh("nonfinite")
        word, exponent, top = (
            ("npy_uint32", EXPONENT32, 31)
            if precision.is_float32()
            else ("npy_uint64", EXPONENT, 63)
        )
        test = [f"{word} {flag} = 0;"]
        for name, (n, scalar) in sorted(bases.items()):
            words = f"((const {word} *){'&' if scalar else ''}{name})"
            test.append(
                f"for (npy_intp {PREFIX}j = 0; {PREFIX}j < {n}; {PREFIX}j++) "
                f"{flag} |= ((({words}[{PREFIX}j] & {exponent}) ^ "
                f"{exponent}) - 1) >> {top};"
            )
        return flag, test

    def _groups_code(self, demand: Demand, layout: Layout, store: Store) -> list[str]:
        """The C writing groups into ``store`` as ``layout`` plans: a constant
        of more than half the elements first (``memset`` for zeros), then one
        loop per group length."""
        lines: list[str] = []
        if layout.fill is not None:  # most elements are one constant: first
            lines.append(_fill_line(store, layout.fill, self.use))
        for together in layout.loops:
            n = len(together[0].targets)
            nest = LoopNest((n,), self.tables)
            body: list[str] = []
            for group in together:
                body += self._group_body(nest, demand, group, store)
            stored = sum(g.targets.size for g in together)
            comment = f"{n} iterations, {stored} elements"
            if len(together) > 1:
                comment += f" of {len(together)} expression shapes"
            lines += nest.render(comment, [], body, [])
        return lines

    def _group_body(
        self, nest: LoopNest, demand: Demand, group: DemandGroup, store: Store
    ) -> list[str]:
        """One group's statements at the loop index: its skeleton's nodes in
        order (reads and constants inlined, each operation a temporary), then
        the stores of the value into each of its targets."""
        n = len(group.targets)
        texts: list[str] = []
        body: list[str] = []
        for k, item in enumerate(group.skeleton):
            if item[0] == "v":
                leaf = demand.leaves[item[1]]
                texts.append(self.read(nest, leaf, group.reads[k]))
            elif item[0] == "c" and item[1] is not None:
                texts.append(c_number(np.frombuffer(item[1], np.float64)[0]))
            elif item[0] == "c":
                values = group.reads[k]
                bits = np.ascontiguousarray(values, np.float64).view(np.int64)
                if bits.size and bool(np.all(bits == bits[0])):  # one constant
                    texts.append(c_number(values[0]))
                else:
                    table = Store(self.tables.doubles(values), (n,))
                    texts.append(nest.at(table, np.arange(n, dtype=np.int64)))
            else:
                if item[0] == "e":
                    eqn = self.original_eqns[item[1]]
                    text = element_text(eqn, [texts[c] for c in item[2]], self.use)
                    note = eqn_text(eqn)
                else:
                    text = " + ".join(f"({texts[c]})" for c in item[1])
                    note = "moved terms added"
                temp = self._fresh("e")
                body.append(f"const double {temp} = {text}; /* {note} */")
                texts.append(temp)
        return body + [
            f"{nest.at(store, group.targets[:, j])} = {texts[-1]};"
            for j in range(group.targets.shape[1])
        ]

    def _views_before(self, done: set[Var]) -> None:
        """Resolve views whose sources are known (views of views compose)."""
        for out, (src, table) in self.view_of.items():
            if out in done or src not in self.values:
                continue
            v = self.values[src]
            if isinstance(v, Store):
                self.values[out] = View(v, table)
            else:
                continue
            done.add(out)
        # a view that is a result is copied into the result by the caller

    def _group(self, group: Group, needs: set[Var]) -> None:
        shape = group.shape
        nest = LoopNest(shape, self.tables)
        here = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
        before: list[str] = []
        body: list[str] = []
        after: list[str] = []
        stored: dict[Var, Store] = {}
        for eqn in group.eqns:
            if eqn.primitive.elementwise:
                operands = [
                    self.read(nest, a, broadcast_positions(a, shape))
                    for a in eqn.inputs
                ]
                text = element_text(eqn, operands, self.use)
                temp = self._fresh("e")
                body.append(f"const double {temp} = {text}; /* {eqn_text(eqn)} */")
                self.values[eqn.out] = Fused(temp, group.index)
                if eqn.out in needs:
                    store = self._array(eqn.out)
                    body.append(f"{nest.at(store, here.reshape(shape))} = {temp};")
                    stored[eqn.out] = store
                continue
            if group.rows is not None and eqn.primitive.c_loop.kind == "matmul":
                if eqn.out in group.pending:
                    stored[eqn.out] = self._row_tail(nest, eqn, group, before, body)
                    continue
                temp = self._row_head(nest, eqn, group, body)
                self.values[eqn.out] = Fused(temp, group.index)
                if eqn.out in needs:
                    store = self._array(eqn.out)
                    body.append(f"{nest.at(store, here.reshape(shape))} = {temp};")
                    stored[eqn.out] = store
                continue
            # a reduction of a value of this loop
            (a,) = eqn.inputs
            start, update = self._accumulator(eqn.primitive)
            store = self._array(eqn.out)
            out_pos = _reduced_positions(shape, eqn.params.as_dict()["axes"])
            value = self.read(nest, a, here.reshape(shape))
            if widening(eqn):
                acc, declared = wide_accumulator(self._fresh("w"), store, start)
                before += declared
                after += wide_result(acc, store)
                target = nest.at(acc, out_pos)
                body.append(
                    f"{target} = {update.format(acc=target, v=f'(npy_double){value}')}; "
                    f"/* {eqn_text(eqn)} */"
                )
                stored[eqn.out] = store
                continue
            target = nest.at(store, out_pos)
            if store.shape == ():
                before.append(f"{store.name} = {start};")
            else:
                before.append(
                    f"for (npy_intp {PREFIX}j = 0; {PREFIX}j < {store_size(store)}; "
                    f"{PREFIX}j++) {store.name}[{PREFIX}j] = {start};"
                )
            body.append(
                f"{target} = {update.format(acc=target, v=value)}; "
                f"/* {eqn_text(eqn)} */"
            )
            stored[eqn.out] = store
        count = len(group.eqns)
        comment = f"{count} equation{'s' if count > 1 else ''} fused over {shape}"
        self.lines += nest.render(comment, before, body, after)
        self.values.update(stored)  # read from memory after the loop

    def _step(self, step: Step) -> None:
        eqn = step.eqn
        if statements.has_form(eqn):  # control flow: C statements
            statements.print_statement(self, eqn)
            return
        kind = eqn.primitive.c_loop.kind  # planned: a declared loop form
        if kind == "elementwise":
            calls.ufunc_call(self, eqn)
        elif kind == "structural":
            self._structural(eqn)
        elif kind == "reduction":
            self._reduction(eqn)
        elif kind == "scan":
            self._scan(eqn)
        elif kind in INDEXED:
            indexed.print_indexed(self, eqn)
        else:
            self._matmul(eqn, step.blas)

    def _row_head(self, nest: LoopNest, eqn: Any, group: Group, body: list[str]) -> str:
        """A row pass's ``u = X @ w`` at the loop's element ``(i, j)``: the dot
        of X's row ``i`` with ``w``'s column ``j``, in index order from 0.0 as
        :meth:`_matmul`'s loop (:mod:`difgen.targets.c.rows`)."""
        a, b = eqn.inputs
        rows = group.rows
        assert rows is not None
        n, k = rows.n, rows.k
        starts = np.arange(n, dtype=np.int64) * k  # a's element (i, 0)
        columns = np.arange(b.size // k, dtype=np.int64)  # b's element (0, j)
        if len(group.shape) == 2:
            starts, columns = np.broadcast_arrays(starts[:, None], columns[None, :])
        else:
            columns = np.zeros(n, dtype=np.int64)
        found = resolved(b, self.view_of)
        assert found is not None  # planned (rows.head_rows)
        x = self.read(nest, a, starts)
        w = self.read(nest, b, columns)
        temp, q = self._fresh("h"), f"{PREFIX}q"
        body += [
            f"double {temp} = 0.0; /* {eqn_text(eqn)}: row pass, a row's dot */",
            (
                f"for (npy_intp {q} = 0; {q} < {k}; {q}++) "
                f"{temp} += (&{x})[{_times(rows.col, q)}] * "
                f"(&{w})[{_times(found[2][0], q)}];"
            ),
        ]
        return temp

    def _row_tail(
        self,
        nest: LoopNest,
        eqn: Any,
        group: Group,
        before: list[str],
        body: list[str],
    ) -> Store:
        """A row pass's ``X.T @ r`` (or ``r @ X``) at the loop's element ``(i,
        j)``: X's row ``i`` times ``r[i, j]`` added into the result's column
        ``j``, so that each result element sums its terms in row order, as
        :meth:`_matmul`'s loop does. Returns the result's zeroing (before the
        loop)."""
        rows = group.rows
        assert rows is not None
        n, k = rows.n, rows.k
        slot = tail_slot(eqn, rows, group.shape, self.view_of)
        assert slot is not None  # planned (Planner._row_tail)
        r_atom, matrix = eqn.inputs[slot], eqn.inputs[1 - slot]
        store = self._array(eqn.out)
        self.values[eqn.out] = store
        here = np.arange(n, dtype=np.int64)
        if slot == 0:  # r @ X: X's element (i, 0)
            starts = here * k
        else:  # X.T @ r: X.T's element (0, i)
            starts = here
        columns = np.zeros(n, dtype=np.int64)  # the result's element (0, j)
        r_at = np.arange(n, dtype=np.int64)
        if len(group.shape) == 2:
            c = group.shape[1]
            width = np.arange(c, dtype=np.int64)
            starts = np.broadcast_to(starts[:, None], group.shape)
            columns = np.broadcast_to(width[None, :], group.shape)
            r_at = r_at[:, None] * c + width[None, :]
            step = c
        else:
            step = 1
        x = self.read(nest, matrix, starts)
        r = self.read(nest, r_atom, r_at)
        g = nest.at(store, columns) if store.shape != () else store.name
        q = f"{PREFIX}q"
        term = f"({r}) * (&{x})[{_times(rows.col, q)}]"
        if slot == 1:
            term = f"(&{x})[{_times(rows.col, q)}] * ({r})"
        body.append(
            f"for (npy_intp {q} = 0; {q} < {k}; {q}++) "
            f"(&{g})[{_times(step, q)}] += {term}; /* {eqn_text(eqn)}: row pass */"
        )
        if store.shape == ():
            before.append(f"{store.name} = 0.0;")
        else:
            size = store_size(store)
            before.append(f"memset({store.name}, 0, sizeof(double) * {size});")
        return store

    def _structural(self, eqn: Any) -> None:
        """Zeros (or the constant elements), then one loop per term rank and input,
        assigning first writes and adding later ones, in NumPy's order."""
        moves = self.moves[eqn.out]
        store = self._array(eqn.out)
        size = eqn.out.size
        comment = eqn_text(eqn)
        if store.shape == ():
            first = moves.terms[0]
            parts = (
                [c_number(moves.constants[0])]
                if moves.constants[0] or not first
                else []
            )
            nest = LoopNest((), self.tables)
            for slot, index in first:
                parts.append(self.read(nest, eqn.inputs[slot], np.array(index)))
            self.lines += [f"{store.name} = {' + '.join(parts)}; /* {comment} */"]
            return
        if np.any(moves.constants):
            table = self.tables.doubles(moves.constants)
            init = [f"memcpy({store.name}, {table}, sizeof(double) * {size});"]
        elif np.all(moves.slots[:, 0] >= 0):  # every element is assigned below
            init = []
        else:
            init = [f"memset({store.name}, 0, sizeof(double) * {size});"]
        self.lines += [f"/* {comment} */", *init]
        for rank in range(moves.slots.shape[1]):
            column = moves.slots[:, rank]
            present = np.unique(column[column >= 0]).tolist()
            if not present:
                break
            for slot in present:
                outs = np.flatnonzero(column == slot)
                ins = moves.where[outs, rank]
                src_atom = eqn.inputs[slot]
                if np.array_equal(ins, np.arange(src_atom.size)):
                    # every element of the input once, in order: loop over its
                    # shape, where concatenation and padding are affine
                    outs = outs.reshape(src_atom.shape)
                    ins = ins.reshape(src_atom.shape)
                elif outs.size >= SEPARABLE_FROM and np.array_equal(
                    outs, np.arange(size)
                ):  # every output in order: its shape's loops, where a large
                    # gather (a seed's colors) is a small table per dimension
                    outs = outs.reshape(eqn.out.shape)
                    ins = ins.reshape(eqn.out.shape)
                nest = LoopNest(outs.shape, self.tables)
                src = self.read(nest, eqn.inputs[slot], ins)
                dst = nest.at(store, outs)
                assign = "=" if rank == 0 and not np.any(moves.constants) else "+="
                self.lines += nest.render(
                    f"input {slot}, term {rank}", [], [f"{dst} {assign} {src};"], []
                )
        self.values[eqn.out] = store

    def _reduction(self, eqn: Any) -> None:
        (a,) = eqn.inputs
        shape = tuple(a.shape)
        start, update = self._accumulator(eqn.primitive)
        store = self._array(eqn.out)
        nest = LoopNest(shape, self.tables)
        here = np.arange(a.size, dtype=np.int64).reshape(shape)
        value = self.read(nest, a, here)
        positions = _reduced_positions(shape, eqn.params.as_dict()["axes"])
        if widening(eqn):
            acc, before = wide_accumulator(self._fresh("w"), store, start)
            target = nest.at(acc, positions)
            body = [
                f"{target} = {update.format(acc=target, v=f'(npy_double){value}')};"
            ]
            self.lines += nest.render(
                eqn_text(eqn), before, body, wide_result(acc, store)
            )
            self.values[eqn.out] = store
            return
        target = nest.at(store, positions)
        if store.shape == ():
            before = [f"{store.name} = {start};"]
        else:
            before = [
                (
                    f"for (npy_intp {PREFIX}j = 0; {PREFIX}j < {store_size(store)}; "
                    f"{PREFIX}j++) {store.name}[{PREFIX}j] = {start};"
                )
            ]
        body = [f"{target} = {update.format(acc=target, v=value)};"]
        self.lines += nest.render(eqn_text(eqn), before, body, [])
        self.values[eqn.out] = store

    def _scan(self, eqn: Any) -> None:
        """A cumulative operation along one axis (``cumsum``, an acyclic
        hessian's substitution): the elements copied, then along the axis each
        one updated from the one before it, in order (the loops run in C order,
        so the one before is final), as NumPy's ``accumulate`` computes it."""
        (a,) = eqn.inputs
        shape = tuple(a.shape)
        axis = int(eqn.params.as_dict()["axis"])
        update = eqn.primitive.c_loop.update
        store = self._array(eqn.out)
        here = np.arange(a.size, dtype=np.int64).reshape(shape)
        nest = LoopNest(shape, self.tables)
        value = self.read(nest, a, here)
        comment = eqn_text(eqn)
        body = [f"{nest.at(store, here)} = {value};"]
        self.lines += nest.render(f"{comment}: the elements", [], body, [])
        if shape[axis] > 1:
            later = np.take(here, np.arange(1, shape[axis]), axis=axis)
            stride = int(np.prod(shape[axis + 1 :], dtype=np.int64))
            nest = LoopNest(later.shape, self.tables)
            target, before = nest.at(store, later), nest.at(store, later - stride)
            body = [f"{target} = {update.format(acc=before, v=target)};"]
            self.lines += nest.render(f"{comment}: along axis {axis}", [], body, [])
        self.values[eqn.out] = store

    def _matmul(self, eqn: Any, blas: bool) -> None:
        """``a @ b`` with NumPy's 1-D and broadcast rules: a loop over the result
        and an inner loop over the contracted axis, accumulated in a register (or
        NumPy's BLAS for large products, :func:`~difgen.targets.c.calls.blas`)."""
        a, b = eqn.inputs
        if eqn.out.shape != ():
            store = self._array(eqn.out)
            if blas:  # planned (plan.Planner._blas)
                calls.blas(self, eqn, store)
                self.values[eqn.out] = store
                return
            self.values[eqn.out] = store
        ia = np.arange(a.size, dtype=np.int64).reshape(a.shape)
        ib = np.arange(b.size, dtype=np.int64).reshape(b.shape)
        a2 = ia if ia.ndim > 1 else ia[None, :]
        b2 = ib if ib.ndim > 1 else ib[:, None]
        k = a2.shape[-1]
        ma = a2[..., :, None, :]
        mb = np.swapaxes(b2, -1, -2)[..., None, :, :]
        ma, mb = np.broadcast_arrays(ma, mb)
        out_shape = tuple(eqn.out.shape)
        ma = ma.reshape(out_shape + (k,))
        mb = mb.reshape(out_shape + (k,))
        found = self.values.get(eqn.out)
        store = found if isinstance(found, Store) else self._array(eqn.out)
        wide = precision.accumulating()  # a double register, rounded once
        nest = LoopNest(out_shape + (k,), self.tables)
        ra = self.read(nest, a, ma)
        rb = self.read(nest, b, mb)
        here = np.arange(eqn.out.size, dtype=np.int64).reshape(out_shape)
        dst = nest.at(store, here)
        self.lines += nest.render(
            eqn_text(eqn),
            [],
            [f"{PREFIX}acc += {'(npy_double)' if wide else ''}{ra} * {rb};"],
            [],
            inner=k,
            inner_pre=[f"{'npy_double' if wide else 'double'} {PREFIX}acc = 0.0;"],
            inner_post=[f"{dst} = {PREFIX}acc;"],
        )
        self.values[eqn.out] = store

    def compile_all(self, results: list[Store | None]) -> list[str]:
        """Compute the graph, then copy the results not computed in place
        (repeated outputs, arguments, constants, views, literals)."""
        lines = self.compile()
        for k, (out, store) in enumerate(zip(self.outputs, results)):
            if self._computed_into(out, store):
                continue
            shape = tuple(np.shape(out.value)) if isinstance(out, Lit) else out.shape
            self.copy_into(out, Store(f"{PREFIX}r{k}", tuple(shape)))
        return lines

    def _computed_into(self, out: Any, store: Store | None) -> bool:
        """Whether output ``out`` was computed in its result buffer."""
        if not isinstance(out, Var) or store is None:
            return False
        return self.values.get(out) is store or out in self.in_place

    def copy_into(self, atom: Any, store: Store) -> None:
        """A result that is not computed into its buffer (a view, a constant, an
        argument, a repeated output): copied."""
        shape = store.shape
        nest = LoopNest(shape, self.tables)
        here = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
        src = self.read(nest, atom, here.reshape(shape))
        if shape == ():
            self.lines.append(f"{store.name} = {src};")
            return
        dst = nest.at(store, here.reshape(shape))
        self.lines += nest.render("a result copied", [], [f"{dst} = {src};"], [])


def _times(stride: int, var: str) -> str:
    """``stride * var`` as C index arithmetic."""
    return var if stride == 1 else f"{stride} * {var}"


def _fill_line(store: Store, value: bytes, use: Used) -> str:
    """The C writing the float64 ``value`` to every element of ``store``."""
    size = store_size(store)
    if value == np.float64(0.0).tobytes():
        return f"memset({store.name}, 0, sizeof(double) * {size});"
    literal = c_number(np.frombuffer(value, np.float64)[0])
    return f"{use('fill')}({store.name}, {size}, {literal});"


def _reduced_positions(shape: tuple[int, ...], axes: Any) -> np.ndarray:
    """The output position each input element of a reduction over ``axes`` adds to."""
    axes = tuple(int(a) % len(shape) for a in axes) if shape else ()
    kept = tuple(1 if d in axes else n for d, n in enumerate(shape))
    size = int(np.prod(kept, dtype=np.int64))
    return np.broadcast_to(np.arange(size, dtype=np.int64).reshape(kept), shape)
