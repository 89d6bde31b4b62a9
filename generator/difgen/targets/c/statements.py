"""Control flow as C statements: ``while_loop``, its adjoint ``sweep`` and ``cond``
(issue 21, item 5), so that an operator with loops runs in C from its first
equation to its last: the forward loop, the tape and the backward loop.

Each control-flow equation is a :class:`~difgen.targets.c.program.Step` whose
primitive prints as statements (``Statements`` in its declaration, the form the
vector emission dispatches on: ``while``, ``for``, ``if``). Its sub-graphs (the
condition, the body, the body's VJP, the branches) are planned and printed as
operators of their own (:class:`~difgen.targets.c.plan.Planner` with ``sub``,
:class:`~difgen.targets.c.printer.Printer`), their inputs bound to the loop's
state and constants, their results written into the next state:

- ``while_loop``: the state in doubles and workspace arrays, initialized from the
  operands; ``for (;;)`` computing the condition, ``break`` when it is false, the
  body into the next state, then the next state copied over the state. The
  equations of one loop's slots (equal but for ``index``) run the loop once.
- ``sweep``: the same forward loop pushing each state (the slots the body's VJP
  reads) on a tape before the body runs: workspace of its size when the build
  counts the trips (a static ``range``, :func:`known_trips`; ``TAPE_WORKSPACE``),
  else a buffer of its own doubled when full and freed after the backward loop; then a backward loop popping the states in reverse, applying the
  body's VJP, adding the constants' cotangents and carrying the state's.
- a ``while_loop`` that is a later sweep's forward loop on some of its slots (the
  primal loop of a reverse-mode gradient: the same initial values and constants,
  the condition and body restricted to those slots equal by structure, a trip
  count the build counts) records that sweep's tape itself (:func:`_records_for`),
  and the sweep runs its backward loop only: the forward pass runs once;
- ``cond``: the predicate, then ``if``/``else`` computing the branch taken into the
  result.

A sub-graph's own temporaries continue the operator's numbering and its
workspace follows the operator's (``Printer.work`` grows as loops are printed),
bound to ``dg_w`` inside its block. Sub-graphs call no NumPy (no ufunc loops or
BLAS inside a loop: a failed call would leave the loop with its tape held), and a
tape's failed allocation raises ``MemoryError`` from C, so a function with a tape
keeps the GIL (``calls_numpy``). Floating point is the vector emission's, as for
every loop form: the same operations on the same doubles in the same order, and
NaN and inf go where the NumPy loop sends them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from difgen.core.ir import Graph, Lit, Var
from difgen.core.primitive import Statements
from difgen.targets.c import counters as counters_of
from difgen.targets.c.extension import PREFIX
from difgen.targets.c.nest import LoopNest
from difgen.targets.c.program import Group, Store, store_size

if TYPE_CHECKING:
    from difgen.targets.c.printer import Printer

Shape = tuple[int, ...]


def has_form(eqn: Any) -> bool:
    """Whether the equation is control flow printed as C statements here."""
    form = eqn.primitive.numpy
    return isinstance(form, Statements) and form.statement in STATEMENTS


def print_statement(p: Printer, eqn: Any) -> None:
    """Print a control-flow equation into ``p`` (planned as a statement step)."""
    STATEMENTS[eqn.primitive.numpy.statement](p, eqn)


# ------------------------------------------------------------------ storage
def _new(p: Printer, shape: Shape, stem: str) -> Store:
    """A double, or doubles appended to the workspace, for the loop's own use."""
    name = p._fresh(stem)
    if shape == ():
        p.lines.append(f"double {name};")
        return Store(name, ())
    offset = p.work
    p.work += int(np.prod(shape, dtype=np.int64))
    p.lines.append(f"double *const {name} = {PREFIX}w + {offset};")
    return Store(name, shape)


def _operand(p: Printer, atom: Any) -> Store:
    """A constant operand of the loop as a store: a value in memory is read where
    it is; a literal, a build-time constant or a view is copied once."""
    if isinstance(atom, Var) and atom not in p.consts:
        value = p.values.get(atom)
        if isinstance(value, Store):
            p.reading(value)
            return value
    shape = tuple(np.shape(atom.value)) if isinstance(atom, Lit) else atom.shape
    store = _new(p, shape, "k")
    _copy_in(p, atom, store)
    return store


def _copy_in(p: Printer, atom: Any, store: Store) -> None:
    """``atom`` (a literal, a constant, a value or a view) copied into ``store``."""
    if store.shape != ():
        p.copy_into(atom, store)
        return
    nest = LoopNest((), p.tables)
    src = p.read(nest, atom, np.zeros((), dtype=np.int64))
    p.lines += nest.render("copied", [], [f"{store.name} = {src};"], [])


def _copy(dst: Store, src: Store) -> str:
    if dst.shape == ():
        return f"{dst.name} = {src.name};"
    return f"memcpy({dst.name}, {src.name}, sizeof(double) * {store_size(dst)});"


def _indent(lines: Sequence[str], depth: int = 1) -> list[str]:
    pad = "    " * depth
    return [pad + line for line in lines]


def _give(p: Printer, var: Var, store: Store) -> None:
    """The equation's value: ``store``, copied into its result buffer if it is
    a result."""
    target = p.result_of.get(var)
    if target is None:
        p.values[var] = store
        return
    p.lines.append(_copy(target, store))
    p.values[var] = target


def sub_block(
    p: Printer,
    graph: Graph,
    inputs: Sequence[Store],
    outputs: Sequence[Store],
    counters: dict[int, counters_of.Interval] | None = None,
) -> list[str]:
    """The statements computing ``graph`` on ``inputs`` into ``outputs``: planned
    and printed as an operator of its own, its temporaries numbered after ``p``'s
    and its workspace after ``p``'s (``dg_w`` rebound in its block). ``counters``:
    the inputs that count a static ``range`` with the integers they hold, whose
    integer uses are computed as doubles (:mod:`difgen.targets.c.counters`)."""
    from difgen.targets.c.plan import Planner
    from difgen.targets.c.printer import Printer as SubPrinter

    graph, in_range = counters_of.as_doubles(graph, counters or {})
    results: list[Store | None] = []
    seen: set[Any] = set()
    for atom, store in zip(graph.outputs, outputs):
        ok = isinstance(atom, Var) and atom not in seen and atom not in graph.inputs
        results.append(store if ok else None)
        seen.add(atom)
    program = Planner(graph, sub=True, in_range=in_range).program(results)
    sub = SubPrinter(program, [(s.name, s.shape) for s in inputs], p.tables.stem)
    sub.tables = p.tables  # one set of tables per C function
    sub.counter = p.counter
    sub.loops = {}
    lines = sub.compile()
    for out, store, given in zip(graph.outputs, outputs, results):
        if not sub._computed_into(out, given):
            _copy_in(sub, out, store)
    lines = sub.lines
    p.counter = sub.counter
    p.use.add(sub.use.frozen())
    p.calls_numpy = p.calls_numpy or sub.calls_numpy
    if not sub.work:
        return ["{", *_indent(lines), "}"]
    base = p._fresh("sw")
    head = f"double *const {base} = {PREFIX}w + {p.work};"
    p.work += sub.work
    return [head, "{", f"    double *const {PREFIX}w = {base};", *_indent(lines), "}"]


def _loop_key(eqn: Any, drop: str) -> tuple[Any, ...]:
    params = tuple((k, v) for k, v in eqn.params if k != drop)
    return (eqn.primitive.name, eqn.inputs, params)


def _where(params: dict[str, Any], name: str) -> str:
    return str(params[name].where).replace("*/", "* /")


# ------------------------------------------------------------------ while_loop
def _while(p: Printer, eqn: Any) -> None:
    params = eqn.params.as_dict()
    key = _loop_key(eqn, "index")
    found = p.loops.get(key)
    if found is None:
        n = params["n_state"]
        cond, body = params["cond"].graph, params["body"].graph
        p.lines.append(f"/* while_loop at {_where(params, 'body')} */")
        state = [_new(p, v.shape, "s") for v in body.inputs[:n]]
        for store, a in zip(state, eqn.inputs[:n]):
            _copy_in(p, a, store)
        consts = [_operand(p, a) for a in eqn.inputs[n:]]
        nxt = [_new(p, v.shape, "n") for v in body.inputs[:n]]
        flag = _new(p, (), "c")
        ranges = counters_of.counter_ranges(cond, body, _starts(p, eqn, n))
        test = sub_block(p, cond, [*state, *consts], [flag])
        step = sub_block(p, body, [*state, *consts], nxt, ranges)
        record = _records_for(p, eqn, params)
        pushes: list[str] = []
        if record is not None:  # this loop records a later sweep's tape
            key_s, slots, count, size = record
            tape, top, trips = (p._fresh(s) for s in ("tape", "top", "trips"))
            p.lines += [
                (
                    f"/* the tape of the sweep below, {count} trips counted at "
                    "build time: recorded by this loop */"
                ),
                f"double *const {tape} = {PREFIX}w + {p.work};",
                f"npy_intp {top} = 0, {trips} = 0;",
            ]
            p.work += size
            pushes = [*(_push(tape, top, state[k]) for k in slots), f"{trips}++;"]
            p.tapes[key_s] = (tape, top, trips)
        p.lines += [
            "for (;;) {",
            *_indent(test),
            f"    if (!({flag.name} != 0.0)) break;",
            *_indent(pushes),
            *_indent(step),
            *_indent([_copy(s, t) for s, t in zip(state, nxt)]),
            "}",
        ]
        found = state
        p.loops[key] = found
    _give(p, eqn.out, found[params["index"]])


def _taped(back: Graph, n: int) -> list[int]:
    """The state slots a sweep's backward body reads (the tape holds them)."""
    read = {a for e in back.eqns for a in e.inputs} | set(back.outputs)
    return [j for j, v in enumerate(back.inputs[:n]) if v in read]


def _records_for(
    p: Printer, eqn: Any, params: dict[str, Any]
) -> tuple[Any, list[int], int, int] | None:
    """A later ``sweep`` whose forward loop is this loop on some of its slots
    (the same initial values and constants, the condition and body restricted to
    those slots equal by structure), with a trip count the build counts and a
    tape that fits the workspace: (its key, this loop's slots it tapes, the trip
    count, the tape's doubles). Then this loop records the tape and the sweep
    runs its backward loop only: the forward pass runs once, not twice."""
    from difgen.ad.loops import forward_slots

    for item in p.program.items:
        if isinstance(item, Group):
            continue
        other = item.eqn
        form = other.primitive.numpy
        if not isinstance(form, Statements) or form.statement != "for":
            continue
        sp = other.params.as_dict()
        ns = sp["n_state"]
        key = _loop_key(other, "out")
        if key in p.loops or key in p.tapes:
            continue
        if "every" in sp or "snapshots" in sp:  # checkpointed: its own snapshots
            continue
        back, taped = sp["back"].graph, _taped(sp["back"].graph, ns)
        record = sum(int(np.prod(back.inputs[j].shape, dtype=np.int64)) for j in taped)
        count = known_trips(p, other, ns, sp["cond"].graph, sp["fwd"].graph)
        if not record or not count or count * record > TAPE_WORKSPACE:
            continue
        slots = forward_slots(eqn, other)
        if slots is not None:
            return key, [slots[j] for j in taped], count, count * record
    return None


# ------------------------------------------------------------------ sweep
def _sweep(p: Printer, eqn: Any) -> None:
    params = eqn.params.as_dict()
    key = _loop_key(eqn, "out")
    found = p.loops.get(key)
    if found is None:
        found = _print_sweep(p, eqn, params)
        p.loops[key] = found
    _give(p, eqn.out, found[params["out"]])


def _print_sweep(p: Printer, eqn: Any, params: dict[str, Any]) -> list[Store]:
    n, m = params["n_state"], params["n_carry"]
    cond, fwd, back = params["cond"].graph, params["fwd"].graph, params["back"].graph
    nc = len(eqn.inputs) - n - m
    p.lines.append(f"/* sweep (a loop's adjoint) at {_where(params, 'fwd')} */")
    state = [_new(p, v.shape, "s") for v in fwd.inputs[:n]]
    for store, a in zip(state, eqn.inputs[:n]):
        _copy_in(p, a, store)
    consts = [_operand(p, a) for a in eqn.inputs[n : n + nc]]
    carry = [_new(p, o.shape, "y") for o in back.outputs[:m]]
    for store, a in zip(carry, eqn.inputs[n + nc :]):
        _copy_in(p, a, store)
    accs = [_new(p, o.shape, "g") for o in back.outputs[m:]]
    p.lines += [f"{a.name} = 0.0;" if a.shape == () else _zero(a) for a in accs]
    new_carry = [_new(p, o.shape, "y") for o in back.outputs[:m]]
    added = [_new(p, o.shape, "d") for o in back.outputs[m:]]
    ranges = counters_of.counter_ranges(cond, fwd, _starts(p, eqn, n))
    adjoint = sub_block(
        p, back, [*state, *consts, *carry], [*new_carry, *added], ranges
    )
    # the tape holds the state slots the body's VJP reads (not the counter)
    taped = [state[j] for j in _taped(back, n)]
    recorded = p.tapes.get(_loop_key(eqn, "out"))
    if recorded is not None:  # the primal loop recorded the tape
        tape, top, trips = recorded
        p.lines += [
            f"while ({trips} > 0) {{ /* the tape backwards */",
            f"    {trips}--;",
            *_indent([_pop(tape, top, s) for s in reversed(taped)]),
            *_indent(adjoint),
            *_indent([_add(a, d) for a, d in zip(accs, added)]),
            *_indent([_copy(c, y) for c, y in zip(carry, new_carry)]),
            "}",
        ]
        return [*carry, *accs]
    nxt = [_new(p, v.shape, "n") for v in fwd.inputs[:n]]
    flag = _new(p, (), "c")
    test = sub_block(p, cond, [*state, *consts], [flag])
    step = sub_block(p, fwd, [*state, *consts], nxt, ranges)
    record = sum(store_size(s) for s in taped)
    every, snapshots = params.get("every"), params.get("snapshots")
    if (every is not None or snapshots is not None) and record:
        consts_in = [*state, *consts]
        recompute = sub_block(p, fwd, consts_in, nxt, ranges)
        back_step = [
            *adjoint,
            *(_add(a, d) for a, d in zip(accs, added)),
            *(_copy(c, y) for c, y in zip(carry, new_carry)),
        ]
        blocks = (test, step, recompute, back_step)
        if snapshots is not None:
            _revolved(p, int(snapshots), state, nxt, blocks, flag)
        else:
            _checkpointed(p, eqn, state, nxt, taped, blocks, flag)
        return [*carry, *accs]
    names = ("tape", "top", "cap", "trips", "owned")
    tape, top, cap, trips, owned = (p._fresh(s) for s in names)
    count = known_trips(p, eqn, n, cond, fwd) if record else None
    p.lines += [
        f"double *{tape} = NULL;",
        f"npy_intp {top} = 0, {cap} = 0, {trips} = 0;",
        f"int {owned} = 0; /* the tape is a buffer of its own (else workspace) */",
    ]
    if count and count * record <= TAPE_WORKSPACE:
        # known at build time: the tape is workspace, kept between calls
        p.lines += [
            f"/* {count} trips counted at build time: the tape pre-sized */",
            f"{tape} = {PREFIX}w + {p.work};",
            f"{cap} = {count * record};",
        ]
        p.work += count * record
    p.lines += [
        "for (;;) {",
        *_indent(test),
        f"    if (!({flag.name} != 0.0)) break;",
    ]
    if record:
        grown, more = p._fresh("grown"), p._fresh("more")
        p.calls_numpy = True  # a failed allocation raises: the GIL is held
        p.lines += _indent(
            [
                f"if ({top} + {record} > {cap}) {{ /* the tape is full: grow it */",
                f"    npy_intp {more} = {cap} ? 2 * {cap} : {64 * record};",
                (
                    f"    double *{grown} = (double *)({owned} ? realloc({tape}, "
                    f"sizeof(double) * {more}) : malloc(sizeof(double) * {more}));"
                ),
                f"    if ({grown} == NULL) {{",
                f"        if ({owned}) free({tape});",
                "        PyErr_NoMemory();",
                f"        goto {PREFIX}fail;",
                "    }",
                (
                    f"    if (!{owned} && {top}) memcpy({grown}, {tape}, "
                    f"sizeof(double) * {top});"
                ),
                f"    {tape} = {grown};",
                f"    {cap} = {more};",
                f"    {owned} = 1;",
                "}",
                *(_push(tape, top, s) for s in taped),
            ]
        )
    p.lines += [
        f"    {trips}++;",
        *_indent(step),
        *_indent([_copy(s, t) for s, t in zip(state, nxt)]),
        "}",
        f"while ({trips} > 0) {{ /* the tape backwards */",
        f"    {trips}--;",
        *_indent([_pop(tape, top, s) for s in reversed(taped)]),
        *_indent(adjoint),
        *_indent([_add(a, d) for a, d in zip(accs, added)]),
        *_indent([_copy(c, y) for c, y in zip(carry, new_carry)]),
        "}",
        f"if ({owned}) free({tape});",
    ]
    return [*carry, *accs]


def _checkpointed(
    p: Printer,
    eqn: Any,
    state: Sequence[Store],
    nxt: Sequence[Store],
    taped: Sequence[Store],
    blocks: tuple[list[str], list[str], list[str], list[str]],
    flag: Store,
) -> None:
    """A checkpointed sweep (``every``): the forward loop pushes the whole state
    every ``every`` steps on the snapshot tape (workspace when the build counts
    the trips, else a buffer doubled when full); then, snapshot by snapshot from
    the last, the segment's states are recomputed from it into a segment tape of
    ``every`` records (workspace) and popped through the body's VJP (``blocks``:
    the condition, the body, the body again for the recomputation, the VJP's
    step)."""
    params = eqn.params.as_dict()
    test, step, recompute, back_step = blocks
    every = int(params["every"])
    n = params["n_state"]
    full = sum(store_size(s) for s in state)
    record = sum(store_size(s) for s in taped)
    names = ("tape", "top", "cap", "trips", "owned", "seg", "stop", "len", "r")
    tape, top, cap, trips, owned, seg, stop, size, r = (p._fresh(s) for s in names)
    count = known_trips(p, eqn, n, params["cond"].graph, params["fwd"].graph)
    p.lines += [
        f"/* checkpointed: a snapshot of the state every {every} steps */",
        f"double *{tape} = NULL;",
        f"npy_intp {top} = 0, {cap} = 0, {trips} = 0;",
        f"int {owned} = 0; /* the snapshots' own buffer (else workspace) */",
    ]
    kept = -(-count // every) * full if count else 0
    if count and kept <= TAPE_WORKSPACE:
        p.lines += [
            f"/* {count} trips counted at build time: {kept // full} snapshots */",
            f"{tape} = {PREFIX}w + {p.work};",
            f"{cap} = {kept};",
        ]
        p.work += kept
    p.lines.append(f"double *const {seg} = {PREFIX}w + {p.work}; /* one segment */")
    p.work += every * record
    grown, more = p._fresh("grown"), p._fresh("more")
    p.calls_numpy = True  # a failed allocation raises: the GIL is held
    p.lines += [
        "for (;;) {",
        *_indent(test),
        f"    if (!({flag.name} != 0.0)) break;",
        f"    if ({trips} % {every} == 0) {{",
        *_indent(
            [
                f"if ({top} + {full} > {cap}) {{ /* the tape is full: grow it */",
                f"    npy_intp {more} = {cap} ? 2 * {cap} : {64 * full};",
                (
                    f"    double *{grown} = (double *)({owned} ? realloc({tape}, "
                    f"sizeof(double) * {more}) : malloc(sizeof(double) * {more}));"
                ),
                f"    if ({grown} == NULL) {{",
                f"        if ({owned}) free({tape});",
                "        PyErr_NoMemory();",
                f"        goto {PREFIX}fail;",
                "    }",
                (
                    f"    if (!{owned} && {top}) memcpy({grown}, {tape}, "
                    f"sizeof(double) * {top});"
                ),
                f"    {tape} = {grown};",
                f"    {cap} = {more};",
                f"    {owned} = 1;",
                "}",
                *(_push(tape, top, s) for s in state),
            ],
            2,
        ),
        "    }",
        f"    {trips}++;",
        *_indent(step),
        *_indent([_copy(s, t) for s, t in zip(state, nxt)]),
        "}",
        f"while ({trips} > 0) {{ /* the snapshots backwards, a segment each */",
        f"    npy_intp {size} = ({trips} - 1) % {every} + 1;",
        f"    npy_intp {stop} = 0;",
        f"    {trips} -= {size};",
        *_indent([_pop(tape, top, s) for s in reversed(state)]),
        *_indent([_push(seg, stop, s) for s in taped]),
        f"    for (npy_intp {r} = 1; {r} < {size}; {r}++) {{ /* recomputed */",
        *_indent(recompute, 2),
        *_indent([_copy(s, t) for s, t in zip(state, nxt)], 2),
        *_indent([_push(seg, stop, s) for s in taped], 2),
        "    }",
        f"    while ({stop} > 0) {{ /* the segment backwards */",
        *_indent([_pop(seg, stop, s) for s in reversed(taped)], 2),
        *_indent(back_step, 2),
        "    }",
        "}",
        f"if ({owned}) free({tape});",
    ]


def _frame(base: str, k: str, state: Sequence[Store], load: bool) -> list[str]:
    """The state stored into (or loaded from) frame ``k`` of ``base``."""
    full = sum(store_size(s) for s in state)
    lines, offset = [], 0
    for s in state:
        at = f"{base} + {k} * {full} + {offset}"
        if s.shape == ():
            lines.append(f"{s.name} = *({at});" if load else f"*({at}) = {s.name};")
        else:
            size = f"sizeof(double) * {store_size(s)}"
            pair = f"{s.name}, {at}" if load else f"{at}, {s.name}"
            lines.append(f"memcpy({pair}, {size});")
        offset += store_size(s)
    return lines


def _revolved(
    p: Printer,
    snapshots: int,
    state: Sequence[Store],
    nxt: Sequence[Store],
    blocks: tuple[list[str], list[str], list[str], list[str]],
    flag: Store,
) -> None:
    """A sweep by binomial checkpointing (revolve, ``snapshots`` states): the
    forward loop counts the trips from the initial state, kept as the first
    frame; then from each frame popped (state, steps, free snapshots) a snapshot
    is placed ``C(s + r - 1, s)`` steps in (``r`` the least with ``C(s + r, s)``
    at least the steps), the rest recomputed with one snapshot less, until one
    step remains, whose VJP runs. The frames are workspace: ``snapshots - 1``
    states, whatever the trip count, and no allocation."""
    test, step, recompute, back_step = blocks
    frames = snapshots - 1
    full = sum(store_size(s) for s in state)
    names = ("fr", "fsteps", "ffree", "nf", "trips", "steps", "free", "reps")
    fr, fsteps, ffree, nf, trips, steps, free, reps = (p._fresh(s) for s in names)
    big, at, r = p._fresh("big"), p._fresh("at"), p._fresh("r")
    p.lines += [
        f"/* binomial checkpointing (revolve): at most {snapshots} states held */",
        f"double *const {fr} = {PREFIX}w + {p.work}; /* {frames} frames */",
        f"npy_intp {fsteps}[{frames}], {ffree}[{frames}], {nf} = 0, {trips} = 0;",
        *_frame(fr, "0", state, load=False),
    ]
    p.work += frames * full
    p.lines += [
        "for (;;) {",
        *_indent(test),
        f"    if (!({flag.name} != 0.0)) break;",
        f"    {trips}++;",
        *_indent(step),
        *_indent([_copy(s, t) for s, t in zip(state, nxt)]),
        "}",
        f"if ({trips}) {{ {fsteps}[0] = {trips}; {ffree}[0] = {frames}; {nf} = 1; }}",
        f"while ({nf} > 0) {{",
        f"    {nf}--;",
        f"    npy_intp {steps} = {fsteps}[{nf}], {free} = {ffree}[{nf}];",
        *_indent(_frame(fr, nf, state, load=True)),
        f"    while ({steps} > 1) {{ /* place a snapshot */",
        f"        npy_intp {reps} = 0, {big} = 1, {at} = 1;",
        f"        while ({big} < {steps}) {{",
        f"            {reps}++;",
        f"            {at} = {big};",
        f"            {big} = {big} * ({free} + {reps}) / {reps};",
        "        }",
        *_indent(_frame(fr, nf, state, load=False), 2),
        f"        {fsteps}[{nf}] = {at}; {ffree}[{nf}] = {free}; {nf}++;",
        f"        for (npy_intp {r} = 0; {r} < {at}; {r}++) {{ /* recomputed */",
        *_indent(recompute, 3),
        *_indent([_copy(s, t) for s, t in zip(state, nxt)], 3),
        "        }",
        f"        {steps} -= {at};",
        f"        {free} -= 1;",
        "    }",
        *_indent(back_step),
        "}",
    ]


TAPE_WORKSPACE = 1 << 24
"""A tape of a known size up to this many doubles (128 MB) is workspace, kept
between calls as the workspace is (a fresh ``malloc`` of a large block per call
costs its page faults); a larger one, or one of unknown size, is a buffer of its
own, grown by doubling and freed after the backward loop."""


def known_trips(p: Printer, eqn: Any, n: int, cond: Graph, body: Graph) -> int | None:
    """The trip count of a loop counted by one scalar state slot against a
    literal bound (a static ``range``), from a build-time start (a literal or a
    constant of the printer), counted as the C will count it:
    :func:`difgen.ad.loops.counted_trips`, the count checkpointing uses."""
    from difgen.ad.loops import counted_trips

    return counted_trips(cond, body, _starts(p, eqn, n))


def _starts(p: Printer, eqn: Any, n: int) -> list[Any]:
    """The loop's initial state known at build time (a literal or a constant of
    the printer; None elsewhere)."""
    starts: list[Any] = []
    for start in eqn.inputs[:n]:
        if isinstance(start, Lit):
            starts.append(start.value)
        else:
            starts.append(p.consts.get(start))
    return starts


def _zero(store: Store) -> str:
    return f"memset({store.name}, 0, sizeof(double) * {store_size(store)});"


def _push(tape: str, top: str, s: Store) -> str:
    if s.shape == ():
        return f"{tape}[{top}++] = {s.name};"
    size = store_size(s)
    return (
        f"memcpy({tape} + {top}, {s.name}, sizeof(double) * {size}); {top} += {size};"
    )


def _pop(tape: str, top: str, s: Store) -> str:
    if s.shape == ():
        return f"{s.name} = {tape}[--{top}];"
    size = store_size(s)
    return (
        f"{top} -= {size}; memcpy({s.name}, {tape} + {top}, sizeof(double) * {size});"
    )


def _add(acc: Store, inc: Store) -> str:
    if acc.shape == ():
        return f"{acc.name} = {acc.name} + {inc.name};"
    j = f"{PREFIX}j"
    return (
        f"for (npy_intp {j} = 0; {j} < {store_size(acc)}; {j}++) "
        f"{acc.name}[{j}] = {acc.name}[{j}] + {inc.name}[{j}];"
    )


# ------------------------------------------------------------------ cond
def _if(p: Printer, eqn: Any) -> None:
    """A branch on a traced value: the predicate, then ``if``/``else`` computing
    the branch taken into the value."""
    params = eqn.params.as_dict()
    false, true = params["branches"]
    pred, *operands = eqn.inputs
    flag = _new(p, (), "c")
    _copy_in(p, pred, flag)
    stores = [_operand(p, a) for a in operands]
    target = p.result_of.get(eqn.out) or _new(p, eqn.out.shape, "b")
    taken = sub_block(p, true.graph, stores, [target])
    other = sub_block(p, false.graph, stores, [target])
    p.lines += [
        f"if ({flag.name} != 0.0) {{",
        *_indent(taken),
        "} else {",
        *_indent(other),
        "}",
    ]
    p.values[eqn.out] = target


STATEMENTS: dict[str, Callable[[Printer, Any], None]] = {
    "while": _while,
    "for": _sweep,
    "if": _if,
}
"""The C of each statement form a declaration names (as the vector emission's
``printer.STATEMENTS``)."""
