"""Implicit differentiation of a converged ``while_loop`` (issue 22, item 6).

A loop that runs ``state = T(state, consts)`` until a tolerance test on a residual
fails (``while abs(r) > tol``, ``np.max(np.abs(r)) > tol``,
``np.linalg.norm(r) > tol``, alone or in an ``and`` with other tests such as an
iteration cap) stops at a state ``s*`` that solves ``F(s*, c) = 0``. Its derivative
is the implicit-function theorem's ``ds* = -(dF/ds)^-1 dF/dc dc`` at the final
state: no tape, no iterations in the derivative, and the initial state's tangent
does not matter (a converged loop forgets where it started).

:func:`residual_of` recognises the exit test (the build refuses or notes at trace
time, ``frontend/control/helpers.py``); :func:`implicit_jvp` is the JVP rule of a
``while_loop`` bound with ``implicit=True``. The rule is ordinary traced code (the
final state's other slots are the same loop's other outputs, which the emission
runs once), so reverse mode transposes it (a division, or ``solve`` with ``A^T``)
and second order differentiates it again like any other code.

Which ``F``, over which unknowns:

- the *unknowns* are the loop's float state slots that depend on the differentiated
  constants and that the body reads to update such slots; the others are either
  held at their final values (counters, untouched slots) or *derived* (written from
  the unknowns and never read back, like Newton's ``step``): their tangents follow
  by the chain rule through ``T`` at the final state;
- when the exit test's residual is computed from the unknowns (and the held slots)
  and is as large as them, ``F`` is that residual: a root solve ``r(s*, c) = 0``;
- otherwise the loop is a fixed point ``s = T(s, c)``, ``F = T(s, c) - s``; an
  update ``s - g`` (or ``s + g``) gives ``F = g``, and a Newton step
  ``s - p / q`` elementwise gives ``F = p``: the same root, and exactly the same
  derivative at it (``q`` scales the rows of both sides), with fewer operations;
- the solve: when there is one unknown and ``F`` is elementwise in it (or the
  unknown is a scalar), ``dF/ds`` is diagonal and the solve is a division;
  otherwise ``dF/ds`` is built dense (the JVP batched over the identity) and
  solved with ``np.linalg.solve``, for at most :data:`DENSE_LIMIT` unknowns.

A loop that stopped at its iteration cap without converging gets the same formula
at the state it stopped at (as JAX's ``custom_root`` does): the derivative of the
solution the loop was looking for, evaluated where it stopped, not the derivative
of the iterations taken.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from difgen.ad.batching import vmap_eval
from difgen.ad.interpret import build_graph, eval_graph
from difgen.ad.jvp import jvp, jvp_eval
from difgen.core.ir import Atom, Eqn, Graph, Lit, SubGraph, Var, dce
from difgen.errors import DifgenError

DENSE_LIMIT = 64
"""The most unknowns (state elements) whose dense jacobian the rule builds and
solves; an elementwise update has no limit (its jacobian is diagonal)."""

_TESTS = {"gt": 0, "ge": 0, "lt": 1, "le": 1}
"""Comparisons ``X > tol``: the position of ``X`` (``tol < X`` has it second)."""


def _defs(graph: Graph) -> dict[Var, Eqn]:
    return {eqn.out: eqn for eqn in graph.eqns}


def _inputs_read(graph: Graph, atoms: Sequence[Atom]) -> set[int]:
    """The positions of the inputs of ``graph`` that ``atoms`` depend on."""
    need = {a for a in atoms if isinstance(a, Var)}
    for eqn in reversed(graph.eqns):
        if eqn.out in need:
            need.update(a for a in eqn.inputs if isinstance(a, Var))
    return {i for i, v in enumerate(graph.inputs) if v in need}


def _square_of(defs: dict[Var, Eqn], atom: Atom) -> Atom | None:
    """``v`` when ``atom`` is ``v * v`` or ``v ** 2``."""
    eqn = defs.get(atom) if isinstance(atom, Var) else None
    if eqn is None:
        return None
    a = eqn.inputs
    if eqn.primitive.name == "mul" and a[0] is a[1]:
        return a[0]
    power = a[1] if eqn.primitive.name == "pow" else None
    if isinstance(power, Lit) and np.array_equal(power.value, 2.0):
        return a[0]
    return None


def _squared_norm_of(defs: dict[Var, Eqn], atom: Atom) -> Atom | None:
    """``v`` when ``atom`` is ``v @ v``, ``sum(v * v)`` or a scalar ``v * v``."""
    eqn = defs.get(atom) if isinstance(atom, Var) else None
    if eqn is None:
        return None
    name, a = eqn.primitive.name, eqn.inputs
    if name == "matmul" and a[0] is a[1] and len(a[0].shape) == 1:
        return a[0]
    if name == "reduce_sum":
        return _square_of(defs, a[0])
    if eqn.out.shape == ():
        return _square_of(defs, atom)
    return None


def _magnitude_of(defs: dict[Var, Eqn], atom: Atom) -> Atom | None:
    """``r`` when ``atom`` is a size of ``r``: ``abs(r)``, ``max(abs(r))``,
    ``sum(abs(r))``, ``norm(r)`` (``sqrt(r @ r)``) or its square."""
    eqn = defs.get(atom) if isinstance(atom, Var) else None
    if eqn is None:
        return None
    name, a = eqn.primitive.name, eqn.inputs
    if name == "abs":
        return a[0]
    if name in ("reduce_max", "reduce_sum") and isinstance(a[0], Var):
        inner = defs.get(a[0])
        if inner is not None and inner.primitive.name == "abs":
            return inner.inputs[0]
    if name == "sqrt":
        return _squared_norm_of(defs, a[0])
    return _squared_norm_of(defs, atom)


_WITHIN = {"lt": 0, "le": 0, "gt": 1, "ge": 1}
"""Comparisons ``X < tol`` (converged): the position of ``X``."""


def _is_lit(atom: Atom, value: float) -> bool:
    return isinstance(atom, Lit) and np.array_equal(atom.value, value)


def _indicator(defs: dict[Var, Eqn], atom: Atom) -> Atom | None:
    """``t`` when ``atom`` is ``where(t, 1.0, 0.0)`` (a boolean counted)."""
    eqn = defs.get(atom) if isinstance(atom, Var) else None
    if eqn is None or eqn.primitive.name != "where":
        return None
    t, one, zero = eqn.inputs
    return t if _is_lit(one, 1.0) and _is_lit(zero, 0.0) else None


class _Tests:
    """The tolerance tests of one loop: the condition's graph, and the body's (a
    test may compare a state variable that the body computes as a size)."""

    def __init__(self, cond: Graph, body: Graph | None, n_state: int) -> None:
        self.cond, self.body, self.n = cond, body, n_state
        self.defs = _defs(cond)

    def _eqn(self, atom: Atom, name: str | None = None) -> Eqn | None:
        """The equation defining ``atom`` (if it is a ``name``)."""
        eqn = self.defs.get(atom) if isinstance(atom, Var) else None
        if eqn is None or (name is not None and eqn.primitive.name != name):
            return None
        return eqn

    def _moves(self, atom: Atom) -> bool:
        return any(i < self.n for i in _inputs_read(self.cond, [atom]))

    def _size(self, size: Atom, tol: Atom) -> Var | bool | None:
        """The residual of ``size`` compared with ``tol``: a Var of the condition,
        True for a size the body computed into a state variable, else None."""
        if self._moves(tol):
            return None  # the "tolerance" moves with the state: not a tolerance
        r = _magnitude_of(self.defs, size)
        if isinstance(r, Var) and r.dtype == "float64" and self._moves(r):
            return r
        if self.body is not None and size in self.cond.inputs[: self.n]:
            slot = self.cond.inputs.index(size)
            inner = _magnitude_of(_defs(self.body), self.body.outputs[slot])
            reads = _inputs_read(self.body, [inner]) if isinstance(inner, Var) else ()
            if any(i < self.n for i in reads):
                return True
        return None

    def exceeds(self, atom: Atom) -> Var | bool | None:
        """``atom`` is true while a size exceeds its tolerance (not converged)."""
        eqn = self._eqn(atom)
        if eqn is None:
            return None
        name, a = eqn.primitive.name, eqn.inputs
        if name == "logical_and":  # an iteration cap beside the tolerance
            for part in a:
                found = self.exceeds(part)
                if found is not None:
                    return found
            return None
        if name == "logical_not":
            return self.within(a[0])
        if name in _TESTS:
            pos = _TESTS[name]
            count = self._eqn(a[pos], "reduce_sum")
            if count is not None and _is_lit(a[1 - pos], 0.0) and name in ("gt", "lt"):
                t = _indicator(self.defs, count.inputs[0])  # np.any(t)
                if t is not None:
                    return self.exceeds(t)
            return self._size(a[pos], a[1 - pos])
        return None

    def within(self, atom: Atom) -> Var | bool | None:
        """``atom`` is true once every size is within its tolerance (converged)."""
        eqn = self._eqn(atom)
        if eqn is None:
            return None
        name, a = eqn.primitive.name, eqn.inputs
        if name == "logical_not":
            return self.exceeds(a[0])
        if name == "eq" and _is_lit(a[1], 0.0):  # np.all(t): no element fails
            count = self._eqn(a[0], "reduce_sum")
            fails = None if count is None else self._eqn(count.inputs[0], "sub")
            if fails is not None and _is_lit(fails.inputs[0], 1.0):
                t = _indicator(self.defs, fails.inputs[1])
                if t is not None:
                    return self.within(t)
            return None
        if name in _WITHIN:
            pos = _WITHIN[name]
            return self._size(a[pos], a[1 - pos])
        return None


def recognised(cond: Graph, body: Graph, n_state: int) -> bool:
    """Whether the loop's exit test is a tolerance on a residual: ``abs(r) > tol``,
    ``max(abs(r))``, ``sum(abs(r))``, ``norm(r)`` or its square against a tolerance
    that does not move with the state, ``np.any(abs(r) > tol)``,
    ``not np.all(abs(r) < tol)``, joined by ``and`` with other tests (an iteration
    cap), or a state variable the body computes as such a size (``err > tol``)."""
    return _Tests(cond, body, n_state).exceeds(cond.outputs[0]) is not None


def residual_of(cond: Graph, n_state: int) -> Var | None:
    """The residual ``r`` of the condition whose size its exit test compares with a
    tolerance (a value computed from the state; the tolerance is not), or None."""
    found = _Tests(cond, None, n_state).exceeds(cond.outputs[0])
    return found if isinstance(found, Var) else None


def _linear_state(graph: Graph, given: Sequence[bool], n: int) -> list[bool]:
    """The state slots that depend on the ``given`` inputs, through the body."""
    flags = list(given)
    while True:
        dep = {v for v, f in zip(graph.inputs, flags) if f}
        for eqn in graph.eqns:
            if any(a in dep for a in eqn.inputs if isinstance(a, Var)):
                dep.add(eqn.out)
        new = [f or (i < n and graph.outputs[i] in dep) for i, f in enumerate(flags)]
        if new == flags:
            return flags
        flags = new


def _elementwise_in(graph: Graph, slot: int, shape: tuple[int, ...]) -> bool:
    """Whether every equation on the paths from input ``slot`` to the outputs is
    elementwise at ``shape`` (the jacobian of the outputs in it is diagonal)."""
    on = {graph.inputs[slot]}
    for eqn in graph.eqns:
        if any(isinstance(a, Var) and a in on for a in eqn.inputs):
            if not eqn.primitive.elementwise or eqn.out.shape != shape:
                return False
            on.add(eqn.out)
    return all(o.shape == shape for o in graph.outputs)


def _newton_residual(
    body: Graph, slot: int, elementwise: bool
) -> tuple[Atom, bool] | None:
    """For an update ``s - g`` or ``s + g`` of ``slot``: ``g`` (or the numerator
    ``p`` of ``g = p / q``, elementwise), and whether it is ``p``; else None."""
    defs = _defs(body)
    update = body.outputs[slot]
    eqn = defs.get(update) if isinstance(update, Var) else None
    if eqn is None or eqn.primitive.name not in ("sub", "add"):
        return None
    x = body.inputs[slot]
    if eqn.inputs[0] is x:
        g = eqn.inputs[1]
    elif eqn.primitive.name == "add" and eqn.inputs[1] is x:
        g = eqn.inputs[0]
    else:
        return None
    if not isinstance(g, Var) or g.shape != x.shape:
        return None
    step = defs.get(g)
    if elementwise and step is not None and step.primitive.name == "div":
        p = step.inputs[0]
        if isinstance(p, Var) and p.shape == x.shape:
            return p, True
    return g, False


def _residual_graph(
    cond: Graph, body: Graph, n: int, unknowns: list[int], held: set[int]
) -> tuple[Graph, bool]:
    """``F(state, consts)``, one output per unknown (or the exit test's residual),
    and whether it is elementwise in a single unknown (a diagonal jacobian)."""
    size = sum(int(np.prod(body.inputs[i].shape)) for i in unknowns)
    single = len(unknowns) == 1
    shape = body.inputs[unknowns[0]].shape if single else ()
    r = residual_of(cond, n)
    if r is not None:
        reads = {i for i in _inputs_read(cond, [r]) if i < n}
        if reads & set(unknowns) and reads <= set(unknowns) | held:
            graph = dce(Graph(cond.inputs, (r,), cond.eqns))
            if int(np.prod(r.shape)) == size:
                scalar = single and size == 1
                diagonal = single and r.shape == shape
                return graph, scalar or (
                    diagonal and _elementwise_in(graph, unknowns[0], shape)
                )
    step = dce(Graph(body.inputs, tuple(body.outputs[i] for i in unknowns), body.eqns))
    diagonal = single and (size == 1 or _elementwise_in(step, unknowns[0], shape))
    outs: list[Atom] = []
    minus: list[int | None] = []
    for slot in unknowns:
        found = _newton_residual(body, slot, diagonal)
        if found is None:
            outs.append(body.outputs[slot])
            minus.append(slot)
        else:
            outs.append(found[0])
            minus.append(None)
    graph = dce(Graph(body.inputs, tuple(outs), body.eqns))
    if any(m is not None for m in minus):
        avals = [(v.shape, v.dtype) for v in body.inputs]
        plain = graph

        def fn(*args: Any) -> tuple[Any, ...]:
            values = eval_graph(plain, args)
            return tuple(v if m is None else v - args[m] for v, m in zip(values, minus))

        graph = build_graph(fn, avals)
    if diagonal and size != 1:
        diagonal = _elementwise_in(graph, unknowns[0], shape)
    return graph, diagonal


def implicit_jvp(
    out: Any,
    primals: list[Any],
    tangents: list[Any],
    final: Any,
    cond: SubGraph,
    body: SubGraph,
    n_state: int,
    index: int,
    residual: SubGraph | None = None,
) -> Any:
    """The tangent of ``state[index]`` of a converged loop (see the module doc).

    ``final(j)`` gives the loop's final ``state[j]`` (the same loop, another output).
    A solver's loop gives its ``residual`` (zero at the solution): the unknowns are
    the state it reads, and the solver's other slots (a bracket, counters) have no
    derivative of their own.
    """
    n, graph = n_state, body.graph
    nc = len(primals) - n
    dconsts = list(tangents[n:])
    if all(t is None for t in dconsts):
        return None  # the initial state's tangent does not reach a converged state
    floats = [graph.inputs[i].dtype == "float64" for i in range(n)]
    active = _linear_state(graph, [False] * n + [t is not None for t in dconsts], n)
    act = [i for i in range(n) if active[i] and floats[i]]
    if index not in act:
        return None
    act_outs = [graph.outputs[i] for i in act]
    reads = {i for i in _inputs_read(graph, act_outs) if i < n}
    unknowns = [i for i in act if i in reads]
    held = {i for i in range(n) if i not in act}
    given: tuple[Graph, bool] | None = None
    if residual is not None:
        rgraph = residual.graph
        unknowns = [i for i in act if i in _inputs_read(rgraph, rgraph.outputs)]
        if index not in unknowns:
            return None  # the solver's own slots: only the solution is used
        shape = rgraph.inputs[unknowns[0]].shape
        diagonal = len(unknowns) == 1 and (
            shape == () or _elementwise_in(rgraph, unknowns[0], shape)
        )
        given = rgraph, diagonal
    values: dict[int, Any] = {index: out}

    def state(j: int) -> Any:
        if j not in values:
            values[j] = final(j)
        return values[j]

    consts = list(primals[n:])
    ds: dict[int, Any] = {}
    if unknowns:
        fgraph, diagonal = given or _residual_graph(
            cond.graph, graph, n, unknowns, held
        )
        fread = _inputs_read(fgraph, fgraph.outputs)
        args = [
            state(j) if j in fread and j < n else _zeros(fgraph, j) for j in range(n)
        ]
        args += consts
        _, b = jvp_eval(fgraph, args, [None] * n + dconsts)
        if all(t is None for t in b):
            return None
        b = [np.zeros(o.shape) if t is None else t for o, t in zip(fgraph.outputs, b)]
        if diagonal:
            (u,) = unknowns
            seed: list[Any] = [None] * (n + nc)
            seed[u] = np.ones(graph.inputs[u].shape)
            _, (a,) = jvp_eval(fgraph, args, seed)
            if a is None:
                raise DifgenError(
                    f"the loop at {cond.where} was differentiated implicitly, but "
                    "its residual does not depend on the loop's state"
                )
            ds[u] = (-b[0]) / a
        else:
            ds.update(_dense_solve(fgraph, args, b, unknowns, n, cond.where))
    if index in ds:
        return ds[index]
    # a derived slot: the chain rule through the body at the final state
    bread = _inputs_read(graph, [graph.outputs[index]])
    bargs = [state(j) if j in bread and j < n else _zeros(graph, j) for j in range(n)]
    btan = [ds.get(j) if j in bread else None for j in range(n)] + dconsts
    _, touts = jvp_eval(graph, bargs + consts, btan)
    return touts[index]


def _zeros(graph: Graph, j: int) -> np.ndarray:
    """A stand-in for an input the graph does not read."""
    return np.zeros(graph.inputs[j].shape)


def _dense_solve(
    fgraph: Graph,
    args: list[Any],
    b: list[Any],
    unknowns: list[int],
    n: int,
    where: str,
) -> dict[int, Any]:
    """``ds = -A^-1 b`` with ``A = dF/ds`` built dense: the JVP of ``F`` batched
    over the identity (one column per unknown element)."""
    shapes = [fgraph.inputs[u].shape for u in unknowns]
    sizes = [int(np.prod(s)) for s in shapes]
    size = sum(sizes)
    if size > DENSE_LIMIT:
        raise DifgenError(
            f"the loop at {where} is differentiated implicitly over {size} state "
            f"elements whose jacobian is not diagonal; difgen solves dense systems "
            f"of at most {DENSE_LIMIT} unknowns (differentiate through the "
            "iterations instead: implicit = false)"
        )
    wrt = [i in unknowns for i in range(len(fgraph.inputs))]
    lin = jvp(fgraph, wrt)
    eye = np.eye(size)
    seeds, start = [], 0
    for shape, k in zip(shapes, sizes):
        seeds.append(eye[:, start : start + k].reshape((size, *shape)))
        start += k
    flags = [False] * len(args) + [True] * len(unknowns)
    outs, out_flags = vmap_eval(lin, [*args, *seeds], flags, size)
    nf = len(fgraph.outputs)
    cols = []
    for o, flag in zip(outs[nf:], out_flags[nf:]):
        o = o if flag else np.broadcast_to(o, (size, *np.shape(o)))
        cols.append(np.reshape(o, (size, -1)))
    at = cols[0] if len(cols) == 1 else np.concatenate(cols, axis=1)  # row j: A e_j
    rhs = [np.reshape(t, (-1,)) for t in b]
    flat_b = rhs[0] if len(rhs) == 1 else np.concatenate(rhs)
    from difgen.primitives.linalg import solve

    flat = -solve(np.transpose(at), flat_b)
    result, start = {}, 0
    for u, shape, k in zip(unknowns, shapes, sizes):
        result[u] = np.reshape(flat[start : start + k], shape)
        start += k
    return result
