"""Calls of :class:`difgen.custom_jvp` functions while difgen traces.

A call with a traced argument becomes one ``custom_jvp_call`` equation
(:mod:`difgen.ad.custom` declares it, with the transforms) whose params carry two
sub-graphs traced here, in the user's tracing context (the tracing namespace, the
rewrites of branches and loops):

- ``fun``: the function itself on the call's operands, which gives the value;
- ``rule``: the rule on (operands, tangents), giving ``(y, dy)``.

When the function cannot be traced (it calls a library difgen does not know, or
converts a traced value to a float), ``fun`` is the rule's ``y`` part instead: the
value comes from the rule, which then must compute it without calling the function.
That is the one departure from JAX, where the function is always traced; it is what
lets a rule stand in for code difgen cannot read.

Inside the rule, a call of the function whose rule is being traced is the traced
function inlined (its value; its derivative then comes from its own code, which
second order differentiates), as ``y = f(x)`` in a JAX rule computes the value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from difgen import budget
from difgen.core.builder import BUILDERS
from difgen.core.conversions import TracedBranch
from difgen.core.ir import Atom, Graph, Lit, SubGraph, Var, dce
from difgen.core.location import user_location
from difgen.core.primitive import Primitive
from difgen.core.tracer import Tracer, bind, lift, tracing_branch
from difgen.custom import TRACING, custom_jvp
from difgen.errors import TraceError

FUNCTIONS: dict[tuple[str, SubGraph], custom_jvp] = {}
"""Every custom function a trace called, by the ``name`` and ``rule`` its equations
carry (the build-time check of the rule calls the function itself on NumPy values;
two closures of one ``def`` differ by their rules' constants)."""

CALL: list[Primitive] = []
"""The ``custom_jvp_call`` declaration, which :mod:`difgen.ad.custom` (with the
transforms its rules are) appends when it is imported."""

_IN_RULE: list[tuple[custom_jvp, str]] = []
"""The custom functions whose rules are being traced, innermost last, each with why
difgen could not trace the function itself ("" when it could)."""


def name_of(fn: custom_jvp) -> str:
    """``module.qualname`` of the decorated function (its equations' ``name``)."""
    fun = fn.fun
    module = getattr(fun, "__module__", None) or "?"
    return f"{module}.{getattr(fun, '__qualname__', repr(fun))}"


def where_of(function: Callable[..., Any]) -> str:
    """``file:line`` of a function's ``def``."""
    code = getattr(function, "__code__", None)
    if code is None:
        return getattr(function, "__qualname__", repr(function))
    return f"{code.co_filename}:{code.co_firstlineno}"


def _traced(args: tuple[Any, ...]) -> bool:
    return any(isinstance(a, Tracer) and a.is_var for a in args)


def handle(fn: custom_jvp, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The value of ``fn(*args, **kwargs)`` while difgen traces (NotImplemented
    when no trace is open or no argument is traced: the plain call)."""
    if not BUILDERS or not _traced(args):
        return NotImplemented
    for outer, failure in reversed(_IN_RULE):
        if outer is not fn:
            continue
        if failure:
            rule = getattr(fn.jvp, "__qualname__", "?")
            raise TraceError(
                f"{user_location()}: the rule {rule} of {name_of(fn)} calls "
                f"{name_of(fn)}, which difgen cannot trace ({failure}); "
                f"{_IN_RULE_REFUSAL}"
            )
        return fn.fun(*args, **kwargs)  # the rule asks for the value: inlined
    if fn.jvp is None:
        raise TraceError(
            f"{user_location()}: {name_of(fn)} is a difgen.custom_jvp function "
            f"without a rule (defined at {where_of(fn.fun)}); declare one with "
            f"@{fn.fun.__name__}.defjvp"
        )
    if kwargs:
        raise TraceError(
            f"{user_location()}: {name_of(fn)} is called with keyword arguments "
            f"({', '.join(kwargs)}); a difgen.custom_jvp function takes its "
            "arguments by position, as its rule receives them"
        )
    operands = [lift(a) for a in args]
    for i, a in enumerate(operands):
        if not isinstance(a, Tracer) and not _numeric(a):
            raise TraceError(
                f"{user_location()}: argument {i} of {name_of(fn)} is a "
                f"{type(a).__name__}; a difgen.custom_jvp function takes arrays "
                "and numbers (bind other values with functools.partial or a "
                "closure)"
            )
    primals: list[Any] = [
        a if isinstance(a, Tracer) else Tracer(BUILDERS[-1], Lit(_constant(a)))
        for a in operands
    ]
    avals = [(tuple(a.shape), _dtype(a)) for a in primals]
    where = user_location()
    fun_graph, failure = _trace_fun(fn, avals, where)
    rule_graph = _trace_rule(fn, avals, where, failure)
    if fun_graph is None:
        fun_graph = dce(
            Graph(
                rule_graph.inputs[: len(avals)],
                rule_graph.outputs[:1],
                rule_graph.eqns,
            )
        )
        message = (
            f"{where}: difgen cannot trace {name_of(fn)} ({failure}); its value "
            f"comes from its rule {fn.jvp.__qualname__}"
        )
        if message not in budget.notes():  # the function is traced twice
            budget.note(message)
    name = name_of(fn)
    rule = SubGraph(rule_graph, where_of(fn.jvp))
    FUNCTIONS[name, rule] = fn
    if not CALL:
        raise TraceError(f"{where}: custom_jvp_call is not declared (import difgen.ad)")
    return bind(
        CALL[0],
        *primals,
        fun=SubGraph(fun_graph, where_of(fn.fun)),
        rule=rule,
        name=name,
    )


def _numeric(value: Any) -> bool:
    try:
        return np.asarray(value).dtype.kind in "biuf"
    except (TypeError, ValueError):
        return False


def _constant(value: Any) -> np.ndarray:
    arr = np.asarray(value)
    return arr if arr.dtype.kind == "b" else arr.astype(np.float64)


def _dtype(value: Tracer) -> str:
    return value.atom.dtype


def _floating(aval: tuple[tuple[int, ...], str]) -> bool:
    return aval[1] == "float64"


def _trace_fun(
    fn: custom_jvp, avals: list[tuple[tuple[int, ...], str]], where: str
) -> tuple[Graph | None, str]:
    """The function traced on the call's operand types, or (None, why not)."""
    try:
        graph, captured = _sub_trace(fn.fun, avals, where, lambda *a: fn.fun(*a))
    except (TracedBranch, KeyboardInterrupt, budget.BuildTimeout):
        raise
    except Exception as exc:  # noqa: BLE001  (anything the user's code raises)
        return None, _describe(exc)
    _refuse_captures(fn, captured, fn.fun)
    return _one_output(fn, graph, fn.fun), ""


def _trace_rule(
    fn: custom_jvp,
    avals: list[tuple[tuple[int, ...], str]],
    where: str,
    failure: str,
) -> Graph:
    """The rule traced on (operands, tangents of the float operands) -> (y, dy)."""
    rule = fn.jvp
    assert rule is not None
    n = len(avals)
    floating = [_floating(a) for a in avals]
    tangent_avals = [a for a, f in zip(avals, floating) if f]

    def run(*args: Any) -> Any:
        primals, given = args[:n], iter(args[n:])
        tangents = tuple(next(given) if f else None for f in floating)
        return rule(tuple(primals), tangents)

    try:
        with _in_rule(fn, failure):
            graph, captured = _sub_trace(rule, [*avals, *tangent_avals], where, run)
    except (TracedBranch, KeyboardInterrupt, budget.BuildTimeout):
        raise
    except TraceError as exc:
        if _IN_RULE_REFUSAL in str(exc):
            raise  # already says what happened, and where
        raise _rule_failed(fn, rule, exc, failure) from None
    except Exception as exc:  # noqa: BLE001  (anything the user's code raises)
        raise _rule_failed(fn, rule, exc, failure) from None
    _refuse_captures(fn, captured, rule)
    if len(graph.outputs) != 2:
        raise TraceError(
            f"{where_of(rule)}: the rule {rule.__qualname__} of {name_of(fn)} "
            f"returns {len(graph.outputs)} values; it must return (y, dy), the "
            "value and its tangent"
        )
    y, dy = graph.outputs
    if (y.shape, y.dtype) != (dy.shape, "float64") or y.dtype != "float64":
        raise TraceError(
            f"{where_of(rule)}: the rule {rule.__qualname__} of {name_of(fn)} "
            f"returns a value of {y.dtype}{list(y.shape)} and a tangent of "
            f"{dy.dtype}{list(dy.shape)}; they must be float64 arrays of one shape"
        )
    return graph


_IN_RULE_REFUSAL = "compute the value in the rule without calling the function"


def _rule_failed(
    fn: custom_jvp, rule: Callable[..., Any], exc: BaseException, failure: str
) -> TraceError:
    why = f" (difgen cannot trace {name_of(fn)} itself: {failure})" * bool(failure)
    return TraceError(
        f"{where_of(rule)}: the rule {rule.__qualname__} of {name_of(fn)} "
        f"raised {_describe(exc)} while difgen traced it{why}"
    )


@contextmanager
def _in_rule(fn: custom_jvp, failure: str) -> Iterator[None]:
    _IN_RULE.append((fn, failure))
    try:
        yield
    finally:
        _IN_RULE.pop()


def _sub_trace(
    function: Callable[..., Any],
    avals: list[tuple[tuple[int, ...], str]],
    where: str,
    run: Callable[..., Any],
) -> tuple[Graph, list[Var]]:
    """``run`` traced on fresh inputs of ``avals``: the graph (outputs flattened
    from a tuple) and the enclosing values it read by closure."""
    inputs = [Var(shape, dtype) for shape, dtype in avals]
    with tracing_branch(where) as builder:
        result = run(*(Tracer(builder, v) for v in inputs))
        values = result if isinstance(result, tuple) else (result,)
        outputs: list[Atom] = []
        for value in values:
            value = lift(value)
            if isinstance(value, Tracer):
                outputs.append(builder.adopt(value).atom)
            else:
                outputs.append(Lit(_constant(value)))
    graph = dce(Graph(tuple(inputs), tuple(outputs), tuple(builder.eqns)))
    captured = [
        inner
        for inner in builder.captures.values()
        if any(inner in e.inputs for e in graph.eqns) or inner in graph.outputs
    ]
    return graph, captured


def _refuse_captures(
    fn: custom_jvp, captured: list[Var], function: Callable[..., Any]
) -> None:
    if captured:
        raise TraceError(
            f"{where_of(function)}: {function.__qualname__} (of the "
            f"difgen.custom_jvp function {name_of(fn)}) reads a traced value of "
            "the enclosing function by closure; the rule could not give its "
            "derivative. Pass it as an argument"
        )


def _one_output(fn: custom_jvp, graph: Graph, function: Callable[..., Any]) -> Graph:
    if len(graph.outputs) != 1 or graph.outputs[0].dtype != "float64":
        raise TraceError(
            f"{where_of(function)}: {name_of(fn)} returns "
            f"{len(graph.outputs)} values; a difgen.custom_jvp function returns "
            "one float64 array"
        )
    return graph


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


TRACING.append(handle)
