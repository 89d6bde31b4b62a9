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

A :class:`difgen.custom_vjp` call is the same equation: its ``rule`` is built from
the forward pass ``fwd(*operands) -> (y, residuals)`` and the backward pass
``bwd(residuals, ybar) -> xbar``, both traced here, as ``(operands, tangents) ->
(fwd's y, the transpose of bwd in ybar applied to the tangents)``
(:data:`VJP_RULE`, from :mod:`difgen.ad.custom`, transposes it). Reverse mode
transposes that tangent back: the user's backward pass.
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
from difgen.custom import TRACING, custom_jvp, custom_vjp
from difgen.errors import TraceError

Custom = custom_jvp | custom_vjp
Avals = list[tuple[tuple[int, ...], str]]

FUNCTIONS: dict[tuple[str, SubGraph], Custom] = {}
"""Every custom function a trace called, by the ``name`` and ``rule`` its equations
carry (the build-time check of the rule calls the function itself on NumPy values;
two closures of one ``def`` differ by their rules' constants)."""

CALL: list[Primitive] = []
"""The ``custom_jvp_call`` declaration, which :mod:`difgen.ad.custom` (with the
transforms its rules are) appends when it is imported."""

PASSES: dict[tuple[str, SubGraph], tuple[Graph, Graph]] = {}
"""The traced forward and backward passes of each ``custom_vjp`` call's rule, by
the key of :data:`FUNCTIONS` (the build-time check runs the backward pass)."""

VJP_RULE: list[Callable[[Graph, Graph, Avals, list[bool]], Graph]] = []
"""The builder of a ``custom_vjp`` call's rule from its traced forward and backward
passes (:func:`difgen.ad.custom.vjp_rule`, appended when it is imported)."""

_IN_RULE: list[tuple[Custom, str]] = []
"""The custom functions whose rules are being traced, innermost last, each with why
difgen could not trace the function itself ("" when it could)."""


def name_of(fn: Custom) -> str:
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


def handle(fn: Custom, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The value of ``fn(*args, **kwargs)`` while difgen traces (NotImplemented
    when no trace is open or no argument is traced: the plain call)."""
    if not BUILDERS or not _traced(args):
        return NotImplemented
    for outer, failure in reversed(_IN_RULE):
        if outer is not fn:
            continue
        if failure:
            rule = getattr(_rule_function(fn), "__qualname__", "?")
            raise TraceError(
                f"{user_location()}: the rule {rule} of {name_of(fn)} calls "
                f"{name_of(fn)}, which difgen cannot trace ({failure}); "
                f"{_IN_RULE_REFUSAL}"
            )
        return fn.fun(*args, **kwargs)  # the rule asks for the value: inlined
    kind = _kind(fn)
    if isinstance(fn, custom_jvp) and fn.jvp is None:
        raise TraceError(
            f"{user_location()}: {name_of(fn)} is a difgen.custom_jvp function "
            f"without a rule (defined at {where_of(fn.fun)}); declare one with "
            f"@{fn.fun.__name__}.defjvp"
        )
    if isinstance(fn, custom_vjp) and (fn.fwd is None or fn.bwd is None):
        raise TraceError(
            f"{user_location()}: {name_of(fn)} is a difgen.custom_vjp function "
            f"without a VJP (defined at {where_of(fn.fun)}); declare one with "
            f"{fn.fun.__name__}.defvjp({fn.fun.__name__}_fwd, {fn.fun.__name__}_bwd)"
        )
    if kwargs:
        raise TraceError(
            f"{user_location()}: {name_of(fn)} is called with keyword arguments "
            f"({', '.join(kwargs)}); a {kind} function takes its "
            "arguments by position, as its rule receives them"
        )
    operands = [lift(a) for a in args]
    for i, a in enumerate(operands):
        if not isinstance(a, Tracer) and not _numeric(a):
            raise TraceError(
                f"{user_location()}: argument {i} of {name_of(fn)} is a "
                f"{type(a).__name__}; a {kind} function takes arrays "
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
    passes: tuple[Graph, Graph] | None = None
    if isinstance(fn, custom_vjp):
        rule_graph, *both = _trace_vjp(fn, avals, where, failure)
        passes = both[0], both[1]
    else:
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
            f"comes from its rule {_value_function(fn).__qualname__}"
        )
        if message not in budget.notes():  # the function is traced twice
            budget.note(message)
    name = name_of(fn)
    rule = SubGraph(rule_graph, where_of(_rule_function(fn)))
    FUNCTIONS[name, rule] = fn
    if passes is not None:
        PASSES[name, rule] = passes
    if not CALL:
        raise TraceError(f"{where}: custom_jvp_call is not declared (import difgen.ad)")
    return bind(
        CALL[0],
        *primals,
        fun=SubGraph(fun_graph, where_of(fn.fun)),
        rule=rule,
        name=name,
    )


def _kind(fn: Custom) -> str:
    return "difgen.custom_vjp" if isinstance(fn, custom_vjp) else "difgen.custom_jvp"


def _rule_function(fn: Custom) -> Callable[..., Any]:
    """The user's function that holds the derivative: the JVP rule, or the VJP's
    backward pass (where a rule's messages point)."""
    rule = fn.bwd if isinstance(fn, custom_vjp) else fn.jvp
    assert rule is not None
    return rule


def _value_function(fn: Custom) -> Callable[..., Any]:
    """The user's function whose value stands in when ``fn`` cannot be traced."""
    rule = fn.fwd if isinstance(fn, custom_vjp) else fn.jvp
    assert rule is not None
    return rule


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


def _trace_fun(fn: Custom, avals: Avals, where: str) -> tuple[Graph | None, str]:
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
    fn: Custom,
    avals: list[tuple[tuple[int, ...], str]],
    where: str,
    failure: str,
) -> Graph:
    """The rule traced on (operands, tangents of the float operands) -> (y, dy)."""
    assert isinstance(fn, custom_jvp)
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


def _trace_vjp(
    fn: custom_vjp, avals: Avals, where: str, failure: str
) -> tuple[Graph, Graph, Graph]:
    """A ``custom_vjp`` call's rule, ``(operands, tangents) -> (y, dy)``: the
    forward pass traced on the operands, the backward pass on its residuals and a
    cotangent of ``y``, and ``dy`` the backward pass transposed (:data:`VJP_RULE`)."""
    fwd, bwd = fn.fwd, fn.bwd
    assert fwd is not None and bwd is not None
    floating = [_floating(a) for a in avals]
    layout: list[Any] = []

    def forward(*primals: Any) -> tuple[Any, ...]:
        result = fwd(*primals)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError(
                f"it must return a pair (y, residuals), not {type(result).__name__}"
            )
        y, residuals = result
        leaves: list[Any] = []
        layout.append(_flatten(residuals, leaves))
        return (y, *leaves)

    fwd_graph = _trace_pass(fn, fwd, forward, avals, where, failure)
    y = fwd_graph.outputs[0]
    if y.dtype != "float64":
        raise TraceError(
            f"{where_of(fwd)}: the forward pass {fwd.__qualname__} of {name_of(fn)} "
            f"returns a y of {y.dtype}; it must be a float64 array, the function's "
            "value"
        )
    leaves = fwd_graph.outputs[1:]
    ybar = (tuple(y.shape), "float64")

    def backward(*args: Any) -> tuple[Any, ...]:
        residuals = _unflatten(layout[-1], iter(args[:-1]))
        xbar = bwd(residuals, args[-1])
        if len(avals) == 1 and not isinstance(xbar, (tuple, list)):
            xbar = (xbar,)  # autograd-like: the one cotangent, bare
        if not isinstance(xbar, (tuple, list)) or len(xbar) != len(avals):
            got = len(xbar) if isinstance(xbar, (tuple, list)) else "not a tuple"
            raise TypeError(
                f"it must return a tuple of {len(avals)} cotangents, one per "
                f"argument of {fn.fun.__qualname__} (got {got})"
            )
        out: list[Any] = []
        for i, (ct, (shape, _), f) in enumerate(zip(xbar, avals, floating)):
            if not f:
                continue  # an argument without a derivative: its entry is ignored
            if ct is None:
                out.append(np.zeros(shape))
                continue
            ct_shape = tuple(getattr(ct, "shape", np.shape(ct)))
            if ct_shape != shape:
                raise TypeError(
                    f"its cotangent {i} has shape {list(ct_shape)}, the "
                    f"argument has shape {list(shape)}"
                )
            out.append(ct)
        return tuple(out)

    bwd_avals = [(tuple(v.shape), v.dtype) for v in leaves] + [ybar]
    bwd_graph = _trace_pass(fn, bwd, backward, bwd_avals, where, failure)
    if not VJP_RULE:
        raise TraceError(f"{where}: custom_jvp_call is not declared (import difgen.ad)")
    try:
        rule = VJP_RULE[0](fwd_graph, bwd_graph, avals, floating)
    except Exception as exc:  # noqa: BLE001  (a backward pass not linear in ybar)
        raise TraceError(
            f"{where_of(bwd)}: the backward pass {bwd.__qualname__} of "
            f"{name_of(fn)} is not linear in its cotangent ybar ({_describe(exc)}); "
            "a VJP must be linear in ybar (products with residuals, sums, "
            "slices...)"
        ) from None
    return rule, fwd_graph, bwd_graph


def _trace_pass(
    fn: custom_vjp,
    function: Callable[..., Any],
    run: Callable[..., Any],
    avals: Avals,
    where: str,
    failure: str,
) -> Graph:
    """One pass of a ``custom_vjp`` traced, its errors naming it."""
    try:
        with _in_rule(fn, failure):
            graph, captured = _sub_trace(function, avals, where, run)
    except (TracedBranch, KeyboardInterrupt, budget.BuildTimeout):
        raise
    except TraceError as exc:
        if _IN_RULE_REFUSAL in str(exc):
            raise
        raise _rule_failed(fn, function, exc, failure) from None
    except Exception as exc:  # noqa: BLE001  (anything the user's code raises)
        raise _rule_failed(fn, function, exc, failure) from None
    _refuse_captures(fn, captured, function)
    return graph


def _flatten(tree: Any, leaves: list[Any]) -> Any:
    """The layout of residuals (arrays, numbers, tuples, lists, dicts), their
    leaves appended to ``leaves``."""
    if isinstance(tree, (tuple, list)):
        return (type(tree), [_flatten(t, leaves) for t in tree])
    if isinstance(tree, dict):
        keys = list(tree)
        return (dict, keys, [_flatten(tree[k], leaves) for k in keys])
    if tree is None:
        return None
    leaves.append(tree)
    return "leaf"


def _unflatten(layout: Any, leaves: Iterator[Any]) -> Any:
    if layout is None:
        return None
    if layout == "leaf":
        return next(leaves)
    if layout[0] is dict:
        _, keys, parts = layout
        return {k: _unflatten(p, leaves) for k, p in zip(keys, parts)}
    kind, parts = layout
    values = [_unflatten(p, leaves) for p in parts]
    return tuple(values) if kind is tuple else values


def _rule_failed(
    fn: Custom, rule: Callable[..., Any], exc: BaseException, failure: str
) -> TraceError:
    why = f" (difgen cannot trace {name_of(fn)} itself: {failure})" * bool(failure)
    what = "rule"
    if isinstance(fn, custom_vjp):
        what = "forward pass" if rule is fn.fwd else "backward pass"
    return TraceError(
        f"{where_of(rule)}: the {what} {rule.__qualname__} of {name_of(fn)} "
        f"raised {_describe(exc)} while difgen traced it{why}"
    )


@contextmanager
def _in_rule(fn: Custom, failure: str) -> Iterator[None]:
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
    fn: Custom, captured: list[Var], function: Callable[..., Any]
) -> None:
    if captured:
        raise TraceError(
            f"{where_of(function)}: {function.__qualname__} (of the "
            f"{_kind(fn)} function {name_of(fn)}) reads a traced value of "
            "the enclosing function by closure; the rule could not give its "
            "derivative. Pass it as an argument"
        )


def _one_output(fn: Custom, graph: Graph, function: Callable[..., Any]) -> Graph:
    if len(graph.outputs) != 1 or graph.outputs[0].dtype != "float64":
        raise TraceError(
            f"{where_of(function)}: {name_of(fn)} returns "
            f"{len(graph.outputs)} values; a {_kind(fn)} function returns "
            "one float64 array"
        )
    return graph


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


TRACING.append(handle)
