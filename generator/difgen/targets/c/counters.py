"""A rerolled loop's counter read as an integer, in the C loops (issue 21, item 5).

A Python ``for i in range(start, stop, step)`` that becomes a loop carries its
counter as a float64 state slot; a body that computes with ``i`` reads it through
``to_int64`` (``0.01 * i``, ``float(i) * dt``, ``i % 3``), integer arithmetic
(``int_arith``) and ``to_float64``, none of which the C loops compute (they
compute in doubles: :func:`difgen.targets.c.plan.loop_kind`). When the build
counts the loop's trips (a static ``range``: :func:`difgen.ad.loops.counted_trips`)
it knows every value the counter takes, and from there an interval for every
integer the body computes from it. Where each interval holds integers of at most
2**53 in magnitude (a double holds them exactly) and no divisor's interval holds
zero, the integers are computed as doubles with the same results as NumPy's int64:
``to_int64`` of the counter and ``to_float64`` are the counter itself, ``+ - *``
the float operations (exact), ``%`` the float ``remainder`` (Python's sign rule,
exact on integers) and ``//`` ``(a - a % b) / b`` (an exact multiple divided:
exact). :func:`as_doubles` rewrites a loop's sub-graph so; any other use of an
int64 value (an index, a comparison the rewrite does not reach, an interval it
cannot prove) is left as it is, and the planner refuses it with its reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from difgen.core.ir import Eqn, Graph, Lit, Params, Var
from difgen.core.primitive import PRIMITIVES
from difgen.targets.c.indexed import one_axis

EXACT = 2.0**53
"""Integers of at most this magnitude are exact in a double."""

Interval = tuple[float, float]


def counter_ranges(
    cond: Graph, body: Graph, starts: Sequence[Any]
) -> dict[int, Interval]:
    """The state slot counting a static ``range`` (``index < stop``,
    ``index = index + step``, a build-time start: the loops
    :func:`~difgen.ad.loops.counted_trips` counts), with the interval of the
    integers the body sees, from its start to its value at the last trip (the
    condition sees one more: it is given no interval); empty for any other loop,
    one that never runs or a counter that is no integer."""
    from difgen.ad.loops import counted_trips

    trips = counted_trips(cond, body, starts)
    if not trips:
        return {}
    counter, _ = cond.eqns[0].inputs
    k = cond.inputs.index(counter)
    step = next(e for e in body.eqns if e.out == body.outputs[k])
    increment = step.inputs[1]
    assert isinstance(increment, Lit)  # counted_trips counts no other loop
    start, dx = float(np.asarray(starts[k])), float(increment.value)
    end = start + (trips - 1) * dx
    lo, hi = min(start, end), max(start, end)
    if not (_integral(start) and _integral(dx) and _fits((lo, hi))):
        return {}
    return {k: (lo, hi)}


def _integral(x: float) -> bool:
    return bool(np.isfinite(x)) and float(x) == float(np.trunc(x))


def _fits(iv: Interval) -> bool:
    # strict: an inexact end (a product's) rounds to 2**53 or beyond
    return iv[0] > -EXACT and iv[1] < EXACT


def _combine(op: str, a: Interval, b: Interval) -> Interval | None:
    """The interval of ``a op b`` on integers, or None where it cannot be proved
    exact (too large, a divisor interval holding zero, an unknown operation)."""
    if op in ("add", "sub", "mul", "maximum", "minimum"):
        if op == "add":
            ends = [a[0] + b[0], a[1] + b[1]]
        elif op == "sub":
            ends = [a[0] - b[1], a[1] - b[0]]
        elif op == "mul":
            ends = [x * y for x in a for y in b]
        elif op == "maximum":
            ends = [max(a[0], b[0]), max(a[1], b[1])]
        else:
            ends = [min(a[0], b[0]), min(a[1], b[1])]
        out = (min(ends), max(ends))
        return out if _fits(out) else None
    if b[0] <= 0.0 <= b[1]:
        return None
    if op == "mod":  # the sign of the divisor, below its magnitude
        m = max(abs(b[0]), abs(b[1])) - 1.0
        return (0.0, m) if b[0] > 0 else (-m, 0.0)
    if op == "floordiv":
        ends = [np.floor(x / y) for x in a for y in b]
        return (float(min(ends)) - 1.0, float(max(ends)) + 1.0)
    return None


def as_doubles(
    graph: Graph, ranges: dict[int, Interval]
) -> tuple[Graph, frozenset[Var]]:
    """``graph`` (a loop's condition, body or body's VJP) with the integers
    computed from the counters ``ranges`` (input position: the interval of the
    integers it holds) computed as doubles (see the module docstring), and the
    scalar run-time indices of its gathers and scatter-adds along one axis
    (``x[i % 3]``, ``y[i - 1]``) so computed whose interval lies in the axis's
    bounds (``[-size, size)``: NumPy's negative indices count from the end), which
    the C loops read without a check (none could fail: no IndexError to raise);
    the graph itself where there is nothing to rewrite."""
    if not ranges or not any(
        a.dtype == "int64" for e in graph.eqns for a in (*e.inputs, e.out)
    ):
        return graph, frozenset()
    known: dict[Var, Interval] = {graph.inputs[k]: iv for k, iv in ranges.items()}
    alias: dict[Var, Var] = {}  # an int64 value: the double holding it

    def read(a: Any) -> Any:
        return alias.get(a, a) if isinstance(a, Var) else a

    def interval(a: Any) -> Interval | None:
        if isinstance(a, Lit):
            v = np.asarray(a.value)
            if v.shape != () or not _integral(float(v)):
                return None
            x = float(v)
            return (x, x) if abs(x) < EXACT else None
        return known.get(alias.get(a, a)) if isinstance(a, Var) else None

    in_range: set[Var] = set()
    eqns: list[Eqn] = []
    for eqn in graph.eqns:
        name, out = eqn.primitive.name, eqn.out
        if name in ("to_int64", "to_float64") and out.shape == ():
            (a,) = eqn.inputs
            iv = interval(a)
            if iv is not None and isinstance(read(a), Var):
                alias[out] = read(a)
                continue
        if name == "int_arith" and out.shape == ():
            made = _arith(eqn, read, interval)
            if made is not None:
                new, iv = made
                eqns += new
                alias[out] = new[-1].out
                known[new[-1].out] = iv
                continue
        inputs = tuple(read(a) for a in eqn.inputs)
        if inputs != eqn.inputs:
            eqn = Eqn(eqn.primitive, inputs, eqn.params, eqn.out, eqn.relaxed)
            found = one_axis(eqn)
            iv = interval(inputs[found.slot]) if found is not None else None
            if (
                found is not None
                and iv is not None
                and found.count == 1
                and -found.size <= iv[0]
                and iv[1] < found.size
            ):
                in_range.add(inputs[found.slot])
        eqns.append(eqn)
    outputs = tuple(read(o) for o in graph.outputs)
    return Graph(graph.inputs, outputs, tuple(eqns)), frozenset(in_range)


def _arith(eqn: Eqn, read: Any, interval: Any) -> tuple[list[Eqn], Interval] | None:
    """An ``int_arith`` on proved integers as float equations and the interval of
    its result, or None."""
    params = eqn.params.as_dict()
    op = params["op"]
    if len(eqn.inputs) == 2:
        a, b = eqn.inputs
    else:
        const = params["const"]
        if not isinstance(const, int):
            return None
        lit = Lit(np.asarray(float(const)))
        a, b = (lit, eqn.inputs[0]) if params["swap"] else (eqn.inputs[0], lit)
    ia, ib = interval(a), interval(b)
    if ia is None or ib is None:
        return None
    iv = _combine(op, ia, ib)
    if iv is None:
        return None
    x, y = read(a), read(b)
    if op in ("add", "sub", "mul", "maximum", "minimum"):
        out = Var((), "float64")
        return [Eqn(PRIMITIVES[op], (x, y), Params.of({}), out)], iv
    rem = Var((), "float64")
    eqns = [Eqn(PRIMITIVES["remainder"], (x, y), Params.of({}), rem)]
    if op == "mod":
        return eqns, iv
    diff, quot = Var((), "float64"), Var((), "float64")
    eqns.append(Eqn(PRIMITIVES["sub"], (x, rem), Params.of({}), diff))
    eqns.append(Eqn(PRIMITIVES["div"], (diff, y), Params.of({}), quot))
    return eqns, iv
