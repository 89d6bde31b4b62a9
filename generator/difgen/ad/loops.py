"""Loops on traced conditions: ``while_loop`` and its adjoint, ``sweep``.

``while_loop(*state, *consts, cond=, body=, n_state=, index=)`` runs
``state = body(state, consts)`` while ``cond(state, consts)`` holds and gives
``state[index]`` (one equation per loop variable used afterwards; the emission runs
equal loops once). The trip count depends on the values, so:

- JVP: a ``while_loop`` over (state, tangent of state), the body's JVP, the same
  condition (which reads the primal state only): the derivative of the path taken;
- transpose: the tangent loop is linear in the tangents of the initial state and of
  the constants. Its transpose is a ``sweep``: a forward loop that records the
  primal states on a stack (a Python list in the generated code: memory grows with
  the trip count), then a backward pass over the stack applying the body's VJP, which
  carries the cotangent of the state and accumulates the constants' cotangents. The
  slots read after the loop (one ``while_loop`` equation each) are transposed
  together (``transpose.JOINT``): one sweep carries all their cotangents, so the
  tape is recorded and swept once;
- the JVP of a ``sweep`` is a ``sweep`` of the JVPs (forward over reverse: hvp and
  hessian); a ``sweep`` is not transposed again (reverse over reverse is refused);
- batching: the seeds' batch axis flows through the state (to a fixed point of which
  state slots carry it); a condition that would differ across the batch is refused.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from difgen.ad.batching import vmap_eval
from difgen.ad.implicit import implicit_jvp
from difgen.ad.interpret import build_graph, eval_graph, is_zero
from difgen.ad.jvp import SIBLINGS, jvp
from difgen.ad.transpose import JOINT, vjp_eval
from difgen.budget import note, notes
from difgen.core.batching import batched_to
from difgen.core.expr import Aval
from difgen.core.ir import Eqn, Graph, Lit, SubGraph, dce, evaluate
from difgen.core.primitive import Linear, Statements, register
from difgen.core.tracer import bind
from difgen.errors import DifgenError, InternalError
from difgen.primitives.family import control

LOOP_WORK = 16  # the cost model's guess of a loop's trip count

CHECKPOINT_MODES = ("sqrt", "revolve")
REVOLVE_SNAPSHOTS = 16
"""The states binomial checkpointing keeps when neither ``snapshots`` nor a trip
count the build counts says (with a count ``T``: ``ceil(log2(T))``)."""
_CHECKPOINT: list[tuple[int | str | None, int | None]] = [(None, None)]


@contextlib.contextmanager
def checkpointing(
    every: int | str | None, snapshots: int | None = None
) -> Iterator[None]:
    """Derive with the reverse mode of loops checkpointed (the module's
    ``checkpoint`` key): ``None`` tapes every state; an int ``N`` keeps a snapshot
    of the whole state every ``N`` steps and recomputes each segment's states from
    its snapshot on the way back; ``"sqrt"`` the same with ``N = ceil(sqrt(T))``
    for a loop whose trip count ``T`` the build counts (a static ``range``);
    ``"revolve"`` binomial checkpointing (Griewank's revolve) with ``snapshots``
    states kept (at least 2; by default ``ceil(log2(T))``)."""
    named = every is None or every in CHECKPOINT_MODES
    counted = isinstance(every, int) and not isinstance(every, bool) and every >= 1
    if not (named or counted):
        raise ValueError(f"unknown checkpoint setting {every!r}")
    if snapshots is not None and (every != "revolve" or snapshots < 2):
        raise ValueError(f"snapshots = {snapshots!r} needs revolve and at least 2")
    _CHECKPOINT.append((every, snapshots))
    try:
        yield
    finally:
        _CHECKPOINT.pop()


def binomial_split(steps: int, free: int) -> int:
    """Where binomial checkpointing places its next snapshot in a segment of
    ``steps`` steps with ``free`` snapshots left (``free >= 1``, ``steps >= 2``):
    ``C(free + r - 1, free)`` steps in, ``r`` the least number of repetitions
    with ``C(free + r, free) >= steps``; the rest then needs ``free - 1``."""
    r, b, prev = 0, 1, 1
    while b < steps:
        r += 1
        prev, b = b, b * (free + r) // r
    return prev


def revolve_cost(trips: int, snapshots: int) -> int:
    """The steps binomial checkpointing recomputes reversing ``trips`` steps with
    ``snapshots`` states kept (the schedule the generated code runs)."""
    total, frames = 0, [(trips, snapshots - 1)] if trips else []
    while frames:
        n, s = frames.pop()
        while n > 1:
            m = binomial_split(n, s)
            frames.append((m, s))
            total += m
            n, s = n - m, s - 1
    return total


Avals = list[tuple[tuple[int, ...], str]]


def _avals(graph: Graph) -> Avals:
    return [(v.shape, v.dtype) for v in graph.inputs]


def _run(graph: Graph, args: Sequence[Any]) -> list[Any]:
    return list(evaluate(graph, args))


# ------------------------------------------------------------------ while_loop
def _loop_impl(
    *ops: Any,
    cond: SubGraph,
    body: SubGraph,
    n_state: int,
    index: int,
    implicit: bool = False,
    residual: SubGraph | None = None,
) -> Any:
    state, consts = list(ops[:n_state]), list(ops[n_state:])
    while bool(_run(cond.graph, [*state, *consts])[0]):
        state = _run(body.graph, [*state, *consts])
    return np.asarray(state[index])


def _loop_shape(
    *avals: Aval,
    cond: SubGraph,
    body: SubGraph,
    n_state: int,
    index: int,
    implicit: bool = False,
    residual: SubGraph | None = None,
) -> Aval:
    out = body.graph.outputs[index]
    return out.shape, out.dtype


def _joint(graph: Graph, order: Sequence[int], keep: Sequence[int]) -> Graph:
    """``graph`` with its inputs permuted (input ``i`` of the new graph is input
    ``order[i]`` of ``graph``) and its outputs ``keep`` only."""
    inputs = [graph.inputs[i] for i in order]
    avals = [(v.shape, v.dtype) for v in inputs]
    graph = dce(Graph(graph.inputs, tuple(graph.outputs[i] for i in keep), graph.eqns))

    def fn(*args: Any) -> tuple[Any, ...]:
        given: list[Any] = [None] * len(graph.inputs)  # an input left out is unread
        for pos, i in enumerate(order):
            given[i] = args[pos]
        return tuple(eval_graph(graph, given))

    return build_graph(fn, avals)


def restrict(graph: Graph, order: Sequence[int], keep: Sequence[int]) -> Graph:
    """``graph`` on its inputs ``order`` only, giving its outputs ``keep`` (a
    loop's condition or body on some of its state slots; an input left out must
    be unread). The C target compares a loop with the forward loop of a sweep so."""
    return _joint(graph, order, keep)


def forward_slots(loop: Eqn, sweep: Eqn) -> list[int] | None:
    """The slots of ``loop`` (a ``while_loop``) that ``sweep``'s forward loop is
    ``loop`` on, in the sweep's order, or None: the same constants, the slots
    reading no others, and the condition and body restricted to them equal by
    structure. A target then lets the primal loop record the sweep's tape, and the
    forward pass runs once (the NumPy and the C targets both ask this)."""
    params, other = loop.params.as_dict(), sweep.params.as_dict()
    n = params["n_state"]
    cond, body = params["cond"].graph, params["body"].graph
    consts = list(loop.inputs[n:])
    ns, m = other["n_state"], other["n_carry"]
    nc = len(sweep.inputs) - ns - m
    if nc != len(consts):
        return None
    if not all(_same_atom(a, b) for a, b in zip(sweep.inputs[ns : ns + nc], consts)):
        return None
    for slots in _orderings(sweep.inputs[:ns], loop.inputs[:n]):
        picked = [*slots, *range(n, n + nc)]
        if not (_read_inputs(cond, [0]) | _read_inputs(body, slots)) <= set(picked):
            continue  # the slots read others: not the sweep's loop
        if SubGraph(restrict(cond, picked, [0])) == other["cond"] and (
            SubGraph(restrict(body, picked, slots)) == other["fwd"]
        ):
            return slots
    return None


def _same_atom(a: Any, b: Any) -> bool:
    if isinstance(a, Lit) or isinstance(b, Lit):
        return (
            isinstance(a, Lit)
            and isinstance(b, Lit)
            and a.shape == b.shape
            and np.asarray(a.value).tobytes() == np.asarray(b.value).tobytes()
        )
    return bool(a is b)


def _orderings(
    want: Sequence[Any], have: Sequence[Any], start: int = 0
) -> list[list[int]]:
    """Order-preserving positions in ``have`` holding the atoms of ``want``."""
    if not want:
        return [[]]
    found = []
    for k in range(start, len(have)):
        if _same_atom(want[0], have[k]):
            found += [[k, *rest] for rest in _orderings(want[1:], have, k + 1)]
    return found


def _read_inputs(graph: Graph, outputs: Sequence[int]) -> set[int]:
    """The inputs (by position) that ``outputs`` of ``graph`` depend on."""
    need = {graph.outputs[i] for i in outputs}
    for e in reversed(graph.eqns):
        if e.out in need:
            need.update(e.inputs)
    return {i for i, v in enumerate(graph.inputs) if v in need}


def _float_slots(graph: Graph, n: int) -> list[int]:
    return [i for i in range(n) if graph.inputs[i].dtype == "float64"]


def _loop_jvp(
    out: Any,
    primals: list[Any],
    tangents: list[Any],
    cond: SubGraph,
    body: SubGraph,
    n_state: int,
    index: int,
    implicit: bool = False,
    residual: SubGraph | None = None,
    siblings: Sequence[int] = (),
) -> Any:
    """A ``while_loop`` over (state, tangents): the JVP of the path taken, carrying
    the nonzero tangents of ``siblings`` too (the slots of the loop read elsewhere),
    so that their tangent equations stay one loop; for a loop bound with
    ``implicit=True``, the implicit-function derivative at its final state instead
    (:mod:`difgen.ad.implicit`), with no loop over tangents."""
    if implicit:
        given = {} if residual is None else {"residual": residual}

        def final(j: int) -> Any:
            return bind(
                WHILE_LOOP,
                *primals,
                cond=cond,
                body=body,
                n_state=n_state,
                index=j,
                implicit=True,
                **given,
            )

        return implicit_jvp(
            out, primals, tangents, final, cond, body, n_state, index, residual
        )
    n = n_state
    fs = _float_slots(body.graph, n)
    if index not in fs:
        return None
    nc = len(primals) - n
    dconsts = [i for i in range(nc) if tangents[n + i] is not None]
    if all(tangents[i] is None for i in fs) and not dconsts:
        return None
    wrt = [i in fs for i in range(n)] + [i in dconsts for i in range(nc)]
    jbody = jvp(body.graph, wrt)  # (s, c, ds, dc) -> (s', ds' for every output)
    nf = len(fs)
    # joint inputs: (s, ds, c, dc); jbody's are (s, c, ds, dc)
    order = [*range(n), *range(n + nc, n + nc + nf), *range(n, n + nc)]
    order += list(range(n + nc + nf, n + nc + nf + len(dconsts)))
    keep = [*range(n), *(n + i for i in fs)]
    body2 = _joint(jbody, order, keep)
    cavals = _avals(cond.graph)
    avals = cavals[:n] + [_avals(body.graph)[i] for i in fs] + cavals[n:]
    avals += [cavals[n + i] for i in dconsts]

    def cfn(*args: Any) -> tuple[Any, ...]:
        state, consts = args[:n], args[n + nf : n + nf + nc]
        return tuple(eval_graph(cond.graph, [*state, *consts]))

    cond2 = build_graph(cfn, avals)
    ds0 = [
        np.zeros(body.graph.inputs[i].shape) if tangents[i] is None else tangents[i]
        for i in fs
    ]
    dcs = [tangents[n + i] for i in dconsts]
    live = [False] * n + [tangents[i] is not None for i in fs] + [False] * nc
    live += [True] * len(dconsts)
    flags = _linear_state(body2, live, n + nf)
    if not flags[n + fs.index(index)]:
        return None  # the tangent of this variable stays zero
    # the siblings' nonzero tangents are carried whichever slot this equation
    # gives: one loop's equations stay one loop (run once, transposed together)
    return bind_loop(
        [*primals[:n], *ds0],
        [*primals[n:], *dcs],
        SubGraph(cond2, cond.where),
        SubGraph(body2, body.where),
        n + fs.index(index),
        carried=[
            n + fs.index(i) for i in siblings if i in fs and flags[n + fs.index(i)]
        ],
    )


def _reads(graph: Graph, outputs: Sequence[int]) -> set[int]:
    """The inputs (by position) that ``outputs`` of ``graph`` depend on."""
    need = {graph.outputs[i] for i in outputs}
    for eqn in reversed(graph.eqns):
        if eqn.out in need:
            need.update(eqn.inputs)
    return {i for i, v in enumerate(graph.inputs) if v in need}


def bind_loop(
    state: Sequence[Any],
    consts: Sequence[Any],
    cond: SubGraph,
    body: SubGraph,
    index: int,
    carried: Sequence[int] = (),
) -> Any:
    """Bind ``while_loop`` giving ``state[index]``, keeping only the state slots it
    needs (the condition's, the result's, those ``carried``, and what they read), so
    a tangent loop does not carry the tangents and counters nothing reads."""
    n = len(state)
    keep = {index, *carried} | {i for i in _reads(cond.graph, [0]) if i < n}
    while True:
        grown = keep | {i for i in _reads(body.graph, sorted(keep)) if i < n}
        if grown == keep:
            break
        keep = grown
    slots = sorted(keep)
    if len(slots) < n:
        picked = slots + list(range(n, n + len(consts)))
        cond = SubGraph(_joint(cond.graph, picked, [0]), cond.where)
        body = SubGraph(_joint(body.graph, picked, slots), body.where)
    return bind(
        WHILE_LOOP,
        *(state[i] for i in slots),
        *consts,
        cond=cond,
        body=body,
        n_state=len(slots),
        index=slots.index(index),
    )


def _loop_transpose(
    ct: Any,
    *args: Any,
    cond: SubGraph,
    body: SubGraph,
    n_state: int,
    index: int,
    implicit: bool = False,
    residual: SubGraph | None = None,
) -> list[Any]:
    """The transpose of one state slot of a tangent loop (see :func:`_loops_transpose`,
    which transposes every slot read after the loop at once)."""
    return _loops_transpose({index: ct}, *args, cond=cond, body=body, n_state=n_state)


def _loops_transpose(
    cts: dict[int, Any],
    *args: Any,
    cond: SubGraph,
    body: SubGraph,
    n_state: int,
    implicit: bool = False,
    residual: SubGraph | None = None,
) -> list[Any]:
    """The tangent loop's transpose, for the cotangents ``cts`` of its state slots
    (by index) together: one ``sweep`` (one forward loop recording the tape, one
    backward loop carrying every slot's cotangent), one equation per linear input.
    A loop differentiated implicitly has no tangent loop, so none is transposed."""
    if implicit:
        raise InternalError("an implicitly differentiated loop has no tangent loop")
    n = n_state
    given = [isinstance(a, Linear) for a in args]
    lin = _linear_state(body.graph, given, n)
    for i in range(n):
        if lin[i] and not given[i] and not is_zero(args[i]):
            raise DifgenError("while_loop transposed with an affine state slot")
    # a slot whose tangent is zero whatever the linear inputs are gives nothing
    cts = {i: c for i, c in cts.items() if lin[i] and not is_zero(c)}
    if not cts:
        return [None] * len(args)
    nc = len(args) - n
    ls = [i for i in range(n) if lin[i]]
    ns_ = [i for i in range(n) if not lin[i]]
    lc = [i for i in range(nc) if lin[n + i]]
    nc_ = [i for i in range(nc) if not lin[n + i]]
    graph = body.graph
    fixed_avals = [_avals(graph)[i] for i in ns_] + [_avals(graph)[n + i] for i in nc_]

    def fill(fixed: Sequence[Any]) -> list[Any]:
        it = iter(fixed)
        return [
            np.zeros(v.shape) if flag else next(it)
            for v, flag in zip(graph.inputs, lin)
        ]

    def fwd_cond(*fixed: Any) -> tuple[Any, ...]:
        return tuple(eval_graph(cond.graph, fill(fixed)))

    def fwd_body(*fixed: Any) -> tuple[Any, ...]:
        outs = eval_graph(graph, fill(fixed))
        return tuple(outs[i] for i in ns_)

    carry_avals = [(graph.outputs[i].shape, "float64") for i in ls]

    def back(*args2: Any) -> tuple[Any, ...]:
        fixed, lam = args2[: len(fixed_avals)], args2[len(fixed_avals) :]
        cts: list[Any] = [None] * n
        for i, value in zip(ls, lam):
            cts[i] = value
        _, got = vjp_eval(graph, fill(fixed), cts, lin)
        zeros = [np.zeros(graph.inputs[i].shape) for i in range(len(lin))]
        new = [zeros[i] if got[i] is None else got[i] for i in ls]
        acc = [zeros[n + i] if got[n + i] is None else got[n + i] for i in lc]
        return (*new, *acc)

    fcond = build_graph(fwd_cond, fixed_avals)
    fbody = build_graph(fwd_body, fixed_avals)
    bgraph = build_graph(back, fixed_avals + carry_avals)
    carry0 = [cts.get(i, np.zeros(graph.outputs[i].shape)) for i in ls]
    fixed_args = [args[i] for i in ns_] + [args[n + i] for i in nc_]
    params: dict[str, Any] = {
        "cond": SubGraph(fcond, cond.where),
        "fwd": SubGraph(fbody, body.where),
        "back": SubGraph(bgraph, body.where),
        "n_state": len(ns_),
        "n_carry": len(ls),
    }
    # absent unless asked for: modules without it keep their IR
    params.update(_every(fcond, fbody, fixed_args[: len(ns_)], body.where))
    results: list[Any] = [None] * len(args)
    for j, i in enumerate(ls):
        if given[i]:
            results[i] = bind(SWEEP, *fixed_args, *carry0, out=j, **params)
    for j, i in enumerate(lc):
        results[n + i] = bind(SWEEP, *fixed_args, *carry0, out=len(ls) + j, **params)
    return results


_TESTS = {
    "lt": float.__lt__,
    "le": float.__le__,
    "gt": float.__gt__,
    "ge": float.__ge__,
}
COUNT_LIMIT = 10_000_000


def counted_trips(cond: Graph, body: Graph, starts: Sequence[Any]) -> int | None:
    """The trip count of a loop counted by one scalar state slot against a literal
    bound (``index < stop``, ``index = index + step``: a static ``range``) from a
    start known at build time (``starts``: the initial state, a value, or a traced
    one or None where it is not known), counted with the same float64 additions
    and comparison as the loop (and as the C loop counts it: the C target's
    tape sizes come from here too); None for any other loop."""
    if len(cond.eqns) != 1 or cond.outputs[0] != cond.eqns[0].out:
        return None
    test = cond.eqns[0]
    holds = _TESTS.get(test.primitive.name)
    counter, bound = test.inputs
    n = len(starts)
    if holds is None or not isinstance(bound, Lit) or counter not in cond.inputs[:n]:
        return None
    k = cond.inputs.index(counter)
    step = next((e for e in body.eqns if e.out == body.outputs[k]), None)
    if step is None or step.primitive.name != "add":
        return None
    a, b = step.inputs
    if a is not body.inputs[k] or not isinstance(b, Lit) or b.shape != ():
        return None
    start = starts[k]
    if not isinstance(start, (np.ndarray, np.generic, float, int)):
        return None
    x, stop, dx = float(np.asarray(start)), float(bound.value), float(b.value)
    trips = 0
    while holds(x, stop):
        x, trips = x + dx, trips + 1
        if trips > COUNT_LIMIT:
            return None
    return trips


def _note_once(message: str) -> None:
    """A build note, once per build (each operator transposes the loop again)."""
    if message not in notes():
        note(message)


def _every(
    cond: Graph, body: Graph, starts: Sequence[Any], where: Any
) -> dict[str, int]:
    """The checkpointing params of a loop's sweep under :func:`checkpointing`:
    ``every`` (a snapshot every that many steps), ``snapshots`` (binomial), or
    none (every state taped), with a build note stating the memory kept and the
    recomputation it costs."""
    setting, snapshots = _CHECKPOINT[-1]
    if setting is None:
        return {}
    trips = counted_trips(cond, body, starts)
    if setting == "revolve":
        return _revolve(trips, snapshots, where)
    if setting == "sqrt":
        if trips is None:
            _note_once(
                f'loop at {where}: checkpoint = "sqrt" needs a trip count the '
                "build counts (a static range); every state of this loop is taped"
            )
            return {}
        every = max(1, math.isqrt(max(trips - 1, 0)) + 1)
    else:
        assert isinstance(setting, int)
        every = setting
    if trips is None:
        _note_once(
            f"loop at {where}: reverse mode checkpointed every {every} steps: "
            f"T/{every} snapshots of the state and a segment of at most {every} "
            "states are kept (T the trip count), and each segment is recomputed "
            "from its snapshot: one more forward pass of the loop's body, at most"
        )
    else:
        kept = -(-trips // every)
        _note_once(
            f"loop at {where}: reverse mode checkpointed every {every} steps of "
            f"{trips}: {kept} snapshots of the state and a segment of at most "
            f"{every} states are kept instead of {trips} states, at the cost of "
            f"recomputing {trips - kept} steps (one more forward pass)"
        )
    return {"every": every}


def _revolve(trips: int | None, snapshots: int | None, where: Any) -> dict[str, int]:
    if snapshots is None:
        snapshots = REVOLVE_SNAPSHOTS
        if trips is not None:
            snapshots = max(2, math.ceil(math.log2(max(trips, 2))))
    if trips is None:
        _note_once(
            f"loop at {where}: reverse mode by binomial checkpointing (revolve) "
            f"with {snapshots} states kept whatever the trip count T; it "
            f"recomputes about r*T steps, r the least with C({snapshots - 1} + r, "
            f"r) >= T"
        )
    else:
        cost = revolve_cost(trips, snapshots)
        _note_once(
            f"loop at {where}: reverse mode by binomial checkpointing (revolve): "
            f"{snapshots} states of the {trips} steps are kept, at the cost of "
            f"recomputing {cost} steps ({cost / max(trips, 1):.2f} forward passes "
            "more)"
        )
    return {"snapshots": snapshots}


def _linear_state(graph: Graph, given: Sequence[bool], n: int) -> list[bool]:
    """The inputs the loop is linear in: the linear ones, and every state slot whose
    update reads a linear value (a tangent that starts at zero), to a fixed point."""
    flags = list(given)
    while True:
        dep = {v for v, f in zip(graph.inputs, flags) if f}
        for eqn in graph.eqns:
            if any(a in dep for a in eqn.inputs if not isinstance(a, Lit)):
                dep.add(eqn.out)
        new = [f or (i < n and graph.outputs[i] in dep) for i, f in enumerate(flags)]
        if new == flags:
            return flags
        flags = new


# ------------------------------------------------------------------ batching
def _probe(graph: Graph, flags: Sequence[bool], k: int) -> list[bool]:
    """Which outputs of ``graph`` carry the batch axis when ``flags`` inputs do."""
    found: list[bool] = []
    avals = [
        ((k, *v.shape) if f else v.shape, v.dtype) for v, f in zip(graph.inputs, flags)
    ]

    def fn(*args: Any) -> tuple[Any, ...]:
        outs, out_flags = vmap_eval(graph, args, flags, k)
        found.extend(out_flags)
        return tuple(outs)

    build_graph(fn, avals)
    return found


def _batched(
    graph: Graph, flags: Sequence[bool], k: int, want: Sequence[bool]
) -> Graph:
    """``graph`` on inputs batched as ``flags``, outputs batched as ``want``."""
    avals = [
        ((k, *v.shape) if f else v.shape, v.dtype) for v, f in zip(graph.inputs, flags)
    ]

    def fn(*args: Any) -> tuple[Any, ...]:
        outs, out_flags = vmap_eval(graph, args, flags, k)
        if any(f and not w for f, w in zip(out_flags, want)):
            raise DifgenError("loop batching: a state slot gained the batch axis")
        return tuple(
            batched_to(o, f, k) if w else o for o, f, w in zip(outs, out_flags, want)
        )

    return build_graph(fn, avals)


def _fixed_point(
    graph: Graph, flags: list[bool], slots: int, k: int, offset: int = 0
) -> list[bool]:
    """Grow the batched state flags (inputs ``offset``.. ``offset+slots``) until the
    body's corresponding outputs are batched exactly where its inputs are."""
    while True:
        outs = _probe(graph, flags, k)
        new = list(flags)
        for i in range(slots):
            new[offset + i] = flags[offset + i] or outs[i]
        if new == flags:
            return flags
        flags = new


def _refuse_batched_cond(cond: SubGraph, flags: Sequence[bool], k: int) -> None:
    if _probe(cond.graph, flags, k)[0]:
        raise DifgenError(
            f"the loop on a traced condition at {cond.where} would run a different "
            "number of times for different members of a batch; difgen batches seeds "
            "only and cannot run it as one loop"
        )


def _lift(
    args: Sequence[Any], have: Sequence[bool], want: Sequence[bool], k: int
) -> list[Any]:
    return [batched_to(a, h, k) if w else a for a, h, w in zip(args, have, want)]


def _loop_batch(
    args: list[Any],
    batched: list[bool],
    k: int,
    cond: SubGraph,
    body: SubGraph,
    n_state: int,
    index: int,
    implicit: bool = False,
    residual: SubGraph | None = None,
) -> Any:
    flags = _fixed_point(body.graph, list(batched), n_state, k)
    marked: dict[str, Any] = {"implicit": True} if implicit else {}
    if residual is not None:
        rflags = _probe(residual.graph, flags, k)
        marked["residual"] = SubGraph(
            _batched(residual.graph, flags, k, rflags), residual.where
        )
    _refuse_batched_cond(cond, flags, k)
    want = flags[:n_state]
    return batched_to(
        bind(
            WHILE_LOOP,
            *_lift(args, batched, flags, k),
            cond=SubGraph(_batched(cond.graph, flags, k, [False]), cond.where),
            body=SubGraph(_batched(body.graph, flags, k, want), body.where),
            n_state=n_state,
            index=index,
            **marked,
        ),
        want[index],
        k,
    )


def _work(eqn: Eqn) -> int:
    params = eqn.params.as_dict()
    graphs = [v.graph for v in params.values() if isinstance(v, SubGraph)]
    return LOOP_WORK * (1 + sum(e.primitive.work(e) for g in graphs for e in g.eqns))


def _sympy(*args: Any, **params: Any) -> Any:
    where = next(v.where for v in params.values() if isinstance(v, SubGraph))
    raise NotImplementedError(
        f"the loop on a traced condition at {where} has no SymPy form"
    )


WHILE_LOOP = register(
    control(
        "while_loop",
        impl=_loop_impl,
        shape_rule=_loop_shape,
        numpy=Statements("while"),
        jvp=_loop_jvp,
        transpose=_loop_transpose,
        batch=_loop_batch,
        sympy=_sympy,
        work=_work,
    )
)


SIBLINGS["while_loop"] = "index"
JOINT["while_loop"] = _loops_transpose


# ------------------------------------------------------------------ sweep
def _sweep_impl(
    *ops: Any,
    cond: SubGraph,
    fwd: SubGraph,
    back: SubGraph,
    n_state: int,
    n_carry: int,
    out: int,
    every: int | None = None,
    snapshots: int | None = None,
) -> Any:
    nc = len(ops) - n_state - n_carry
    state = list(ops[:n_state])
    consts = list(ops[n_state : n_state + nc])
    carry = list(ops[n_state + nc :])
    if snapshots is not None:
        return _revolve_impl(state, consts, carry, cond, fwd, back, snapshots, out)
    step = every or 1
    saved_states, trips = [], 0
    while bool(_run(cond.graph, [*state, *consts])[0]):
        if trips % step == 0:
            saved_states.append(state)
        trips += 1
        state = _run(fwd.graph, [*state, *consts])
    acc = [np.zeros(o.shape) for o in back.graph.outputs[n_carry:]]
    for k in reversed(range(len(saved_states))):
        # the segment's states, recomputed from its snapshot (all taken steps)
        segment = [saved_states[k]]
        for _ in range(min(step, trips - k * step) - 1):
            segment.append(_run(fwd.graph, [*segment[-1], *consts]))
        for saved in reversed(segment):
            outs = _run(back.graph, [*saved, *consts, *carry])
            carry = outs[:n_carry]
            acc = [a + b for a, b in zip(acc, outs[n_carry:])]
    return np.asarray([*carry, *acc][out])


def _revolve_impl(
    state: list[Any],
    consts: list[Any],
    carry: list[Any],
    cond: SubGraph,
    fwd: SubGraph,
    back: SubGraph,
    snapshots: int,
    out: int,
) -> Any:
    """A sweep by binomial checkpointing: the forward loop counts the trips; then
    from each snapshot popped, snapshots are placed (:func:`binomial_split`) until
    one step remains, whose VJP runs; at most ``snapshots`` states are held."""
    n_carry = len(carry)
    start, trips = state, 0
    while bool(_run(cond.graph, [*state, *consts])[0]):
        trips += 1
        state = _run(fwd.graph, [*state, *consts])
    acc = [np.zeros(o.shape) for o in back.graph.outputs[n_carry:]]
    frames = [(start, trips, snapshots - 1)] if trips else []
    while frames:
        state, n, s = frames.pop()
        while n > 1:
            m = binomial_split(n, s)
            frames.append((state, m, s))
            for _ in range(m):
                state = _run(fwd.graph, [*state, *consts])
            n, s = n - m, s - 1
        outs = _run(back.graph, [*state, *consts, *carry])
        carry = outs[:n_carry]
        acc = [a + b for a, b in zip(acc, outs[n_carry:])]
    return np.asarray([*carry, *acc][out])


def _sweep_shape(*avals: Aval, back: SubGraph, out: int, **params: Any) -> Aval:
    o = back.graph.outputs[out]
    return o.shape, o.dtype


def _sweep_jvp(
    out_value: Any,
    primals: list[Any],
    tangents: list[Any],
    cond: SubGraph,
    fwd: SubGraph,
    back: SubGraph,
    n_state: int,
    n_carry: int,
    out: int,
    every: int | None = None,
    snapshots: int | None = None,
) -> Any:
    """A ``sweep`` over (state, tangents) forward and (carry, tangents) backward
    (checkpointed as the sweep is: its snapshots hold the tangents too)."""
    n, m = n_state, n_carry
    nc = len(primals) - n - m
    fs = _float_slots(fwd.graph, n)
    dconsts = [i for i in range(nc) if tangents[n + i] is not None]
    nf, nd = len(fs), len(dconsts)
    if all(t is None for t in tangents):
        return None
    # forward: fwd's jvp inputs (s, c, ds, dc) -> joint (s, ds, c, dc)
    wrt_f = [i in fs for i in range(n)] + [i in dconsts for i in range(nc)]
    jf = jvp(fwd.graph, wrt_f)
    order_f = [*range(n), *range(n + nc, n + nc + nf), *range(n, n + nc)]
    order_f += list(range(n + nc + nf, n + nc + nf + nd))
    fwd2 = _joint(jf, order_f, [*range(n), *(n + i for i in fs)])
    cav = _avals(cond.graph)
    jav = (
        cav[:n]
        + [_avals(fwd.graph)[i] for i in fs]
        + cav[n:]
        + [cav[n + i] for i in dconsts]
    )

    def cfn(*args: Any) -> tuple[Any, ...]:
        return tuple(eval_graph(cond.graph, [*args[:n], *args[n + nf : n + nf + nc]]))

    cond2 = build_graph(cfn, jav)
    # backward: back's inputs (s, c, carry); jvp inputs (s, c, carry, ds, dc, dcarry)
    wrt_b = wrt_f + [True] * m
    jb = jvp(back.graph, wrt_b)
    base = n + nc + m
    order_b = [*range(n), *range(base, base + nf), *range(n, n + nc)]
    order_b += list(range(base + nf, base + nf + nd))
    order_b += [*range(n + nc, n + nc + m), *range(base + nf + nd, base + nf + nd + m)]
    na = len(back.graph.outputs) - m
    nb = m + na
    keep = [
        *range(m),
        *range(nb, nb + m),
        *range(m, m + na),
        *range(nb + m, nb + m + na),
    ]
    back2 = _joint(jb, order_b, keep)
    ds0 = [
        np.zeros(fwd.graph.inputs[i].shape) if tangents[i] is None else tangents[i]
        for i in fs
    ]
    dcs = [tangents[n + i] for i in dconsts]
    dcarry = [
        (
            np.zeros(back.graph.outputs[j].shape)
            if tangents[n + nc + j] is None
            else tangents[n + nc + j]
        )
        for j in range(m)
    ]
    new_out = (m + out) if out < m else (2 * m + na + (out - m))
    return bind(
        SWEEP,
        *primals[:n],
        *ds0,
        *primals[n : n + nc],
        *dcs,
        *primals[n + nc :],
        *dcarry,
        cond=SubGraph(cond2, cond.where),
        fwd=SubGraph(fwd2, fwd.where),
        back=SubGraph(back2, back.where),
        n_state=n + nf,
        n_carry=2 * m,
        out=new_out,
        **_checkpoint_params(every, snapshots),
    )


def _sweep_batch(
    args: list[Any],
    batched: list[bool],
    k: int,
    cond: SubGraph,
    fwd: SubGraph,
    back: SubGraph,
    n_state: int,
    n_carry: int,
    out: int,
    every: int | None = None,
    snapshots: int | None = None,
) -> Any:
    n, m = n_state, n_carry
    nc = len(args) - n - m
    sflags = _fixed_point(fwd.graph, list(batched[: n + nc]), n, k)
    _refuse_batched_cond(cond, sflags, k)
    bflags = _fixed_point(
        back.graph, sflags + list(batched[n + nc :]), m, k, offset=n + nc
    )
    outs = _probe(back.graph, bflags, k)
    want = bflags[n + nc :] + outs[m:]
    new_args = _lift(args, batched, bflags, k)
    result = bind(
        SWEEP,
        *new_args,
        cond=SubGraph(_batched(cond.graph, sflags, k, [False]), cond.where),
        fwd=SubGraph(_batched(fwd.graph, sflags, k, sflags[:n]), fwd.where),
        back=SubGraph(_batched(back.graph, bflags, k, want), back.where),
        n_state=n,
        n_carry=m,
        out=out,
        **_checkpoint_params(every, snapshots),
    )
    return batched_to(result, want[out], k)


def _checkpoint_params(every: int | None, snapshots: int | None) -> dict[str, int]:
    """A sweep's checkpointing params, as given (absent when not asked for)."""
    given = {"every": every, "snapshots": snapshots}
    return {k: v for k, v in given.items() if v is not None}


class ReverseOverReverse(DifgenError):
    """A ``sweep`` transposed: the build may trace again with static loops unrolled
    (:func:`difgen.frontend.control.unrolling`), which reverse over reverse takes."""


def _sweep_transpose(ct: Any, *args: Any, **params: Any) -> list[Any]:
    raise ReverseOverReverse(
        "reverse mode over the adjoint of a loop on a traced condition (reverse over "
        "reverse) is not supported; second order uses forward over reverse"
    )


# Not registered: made by the transpose of while_loop only, never traced or bound by
# name (as the basis seed); tests/frontend/test_control_flow.py checks its fields.
SWEEP = control(
    "sweep",
    impl=_sweep_impl,
    shape_rule=_sweep_shape,
    numpy=Statements("for"),
    jvp=_sweep_jvp,
    transpose=_sweep_transpose,
    batch=_sweep_batch,
    sympy=_sympy,
    work=_work,
)
