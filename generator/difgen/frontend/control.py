"""Branches on traced values: the user's ``if`` becomes a ``cond`` in the graph.

A branch on a value difgen knows at build time is plain Python and traces as
always. Only when a traced value reaches ``bool()`` (the tracer raises
:class:`~difgen.core.tracer.TracedBranch`) does :func:`difgen.frontend.trace`
rewrite the function where that happened, and trace again:

- ``if``/``elif``/``else`` statements become two nested functions (one per branch)
  taking the variables either branch assigns, and a call of :func:`if_`;
- an ``if`` containing a ``return`` takes the statements after it into its
  branches (both then end in a ``return``), so an early return is one ``cond`` of
  the returned values;
- ``a if c else b`` becomes :func:`ifexp`, ``and``/``or`` :func:`and_`/:func:`or_`
  (Python's short-circuit values: ``a and b`` is ``b if a else a``), ``not`` :func:`not_`,
  and a chained comparison ``a < b < c`` the ``and`` of its pairs.

At run time each helper calls the branch that is taken when the predicate is known
(so the rewritten function computes exactly what the original does) and, when it is
traced, traces both branches as sub-graphs (:class:`~difgen.core.tracer.
BranchBuilder`) and binds one ``cond`` per value they give. The rewritten code keeps
the user's file and line numbers, so every message still names the user's line.

What is not rewritten keeps the ``bool()`` error, with the reason: loops on a traced
condition (``while``, ``break``/``continue``), a ``return`` inside a loop, branches
that change a Python container, an attribute or a global.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import inspect
import textwrap
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from difgen.core.ir import Atom, Graph, Lit, SubGraph, Var, dce
from difgen.core.primitive import PRIMITIVES
from difgen.core.tracer import (
    BranchBuilder,
    Builder,
    TracedBranch,
    Tracer,
    as_constant,
    bind,
    bind_name,
    current_builder,
    tracing_branch,
)
from difgen.errors import TraceError

HELPERS = "__difgen_control__"  # the global name rewritten code calls through
MUTATORS = frozenset(
    ("append", "extend", "insert", "pop", "remove", "clear", "update")
    + ("setdefault", "add", "discard", "popitem", "sort", "reverse")
)


# =================================================================== run time
class Undefined:
    """The value of a variable one branch assigns and the other leaves unbound."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name} unbound on one branch>"


def value(getter: Callable[[], Any], name: str) -> Any:
    """The current value of a variable, or :class:`Undefined` if it is unbound."""
    try:
        return getter()
    except NameError:
        return Undefined(name)


def _predicate(test: Any, where: str) -> Any:
    """``bool(test)``: a Python bool, or a traced bool scalar (NumPy's truth).

    A float is true when nonzero, so NaN is true, as ``bool(np.nan)`` is.
    """
    if not isinstance(test, Tracer) or isinstance(test.atom, Lit):
        return bool(test)
    if test.size != 1:
        raise TraceError(
            f"{where}: the truth value of an array with more than one element is "
            "ambiguous (NumPy raises ValueError); use .any() or .all()"
        )
    if test.shape != ():
        test = bind_name("reshape", test, shape=())
    if test.dtype != np.bool_:
        test = bind_name("ne", test, 0.0)
    return test


def if_(
    test: Any,
    if_true: Callable[..., Any],
    if_false: Callable[..., Any],
    values: tuple[Any, ...],
    written: tuple[Any, ...],
    where: str,
) -> Any:
    """An ``if`` statement: the taken branch, or a ``cond`` of both when traced.

    ``values`` are the current values of the variables the branches assign (each
    branch takes and returns them, or returns the function's result); ``written``
    the arrays the branches write into by item assignment, which must be traced
    arrays (difgen cannot undo a write into a plain Python or NumPy object).
    """
    pred = _predicate(test, where)
    if not isinstance(pred, Tracer):
        return (if_true if pred else if_false)(*values)
    for array in written:
        if not isinstance(array, Tracer):
            raise TraceError(
                f"{where}: a branch on a traced value writes into a "
                f"{type(array).__name__} by item assignment; difgen can branch only "
                "over writes into arrays it traces (create it with np.zeros or "
                "np.array inside the function)"
            )
    return _cond(pred, lambda: if_true(*values), lambda: if_false(*values), where)


def ifexp(
    test: Any, if_true: Callable[[], Any], if_false: Callable[[], Any], where: str
) -> Any:
    """``a if c else b``."""
    pred = _predicate(test, where)
    if not isinstance(pred, Tracer):
        return if_true() if pred else if_false()
    return _cond(pred, if_true, if_false, where)


def and_(where: str, *operands: Callable[[], Any]) -> Any:
    """``a and b and ...``: the first falsy operand, or the last."""
    result = operands[0]()
    for operand in operands[1:]:
        pred = _predicate(result, where)
        if not isinstance(pred, Tracer):
            if not pred:
                return result
            result = operand()
            continue
        result = _logical("logical_and", result, pred, operand, where)
    return result


def or_(where: str, *operands: Callable[[], Any]) -> Any:
    """``a or b or ...``: the first truthy operand, or the last."""
    result = operands[0]()
    for operand in operands[1:]:
        pred = _predicate(result, where)
        if not isinstance(pred, Tracer):
            if pred:
                return result
            result = operand()
            continue
        result = _logical("logical_or", result, pred, operand, where)
    return result


def _logical(
    name: str, before: Any, pred: Tracer, operand: Callable[[], Any], where: str
) -> Any:
    """``before and operand()`` (or ``or``) on a traced truth value ``before``.

    Between truth values it is ``logical_and``/``logical_or`` with no branch: tracing
    evaluates both sides either way, and a boolean operand has no derivative. Other
    values keep Python's semantics: the ``cond`` of the operand and ``before``.
    """
    if isinstance(before, Tracer) and before.dtype == np.bool_:
        value = operand()
        if isinstance(value, (bool, np.bool_)) or (
            isinstance(value, Tracer) and value.dtype == np.bool_ and value.size == 1
        ):
            other = _predicate(value, where)
            return bind_name(name, pred, other)
    keep = _constant_thunk(before)
    if name == "logical_and":
        return _cond(pred, operand, keep, where)
    return _cond(pred, keep, operand, where)


def _constant_thunk(result: Any) -> Callable[[], Any]:
    """A branch giving ``result``, a value from before the branch."""
    return lambda: result


def not_(operand: Any, where: str) -> Any:
    """``not a``: a traced bool for a traced ``a``."""
    pred = _predicate(operand, where)
    if not isinstance(pred, Tracer):
        return not pred
    return bind_name("logical_not", pred)


def while_(
    test: Callable[..., Any],
    body: Callable[..., Any],
    values: tuple[Any, ...],
    written: tuple[int, ...],
    where: str,
    names: tuple[str, ...],
) -> tuple[Any, ...]:
    """A ``while`` loop: Python's loop while the condition is known at build time;
    from the first traced condition on, one ``while_loop`` per loop variable.

    ``values`` are the loop variables (what the body assigns or writes into);
    ``written`` the positions of those it writes into by item assignment: the array
    objects from before the loop receive the loop's result, as NumPy writes in place.
    """
    state = values
    while True:
        pred = _predicate(test(*state), where)
        if isinstance(pred, Tracer):
            break
        if not pred:
            return state
        state = tuple(body(*state))
    final = _loop(test, body, state, where, names)
    result = list(final)
    for i in written:
        before = values[i]
        if isinstance(before, Tracer) and isinstance(result[i], Tracer):
            before.write(result[i])
            result[i] = before
    return tuple(result)


def _loop(
    test: Callable[..., Any],
    body: Callable[..., Any],
    state: tuple[Any, ...],
    where: str,
    names: tuple[str, ...],
) -> tuple[Any, ...]:
    """Trace the condition and the body on symbolic loop variables; bind the loop."""
    if "while_loop" not in PRIMITIVES:
        raise TraceError(f"{where}: while_loop is not registered (import difgen.ad)")
    leaves, tree = _flatten(state)
    slots: list[int] = []
    inits: list[Atom] = []
    for i, leaf in enumerate(leaves):
        atom = _as_atom(leaf.atom if isinstance(leaf, Tracer) else leaf)
        if atom is not None:
            slots.append(i)
            inits.append(atom)
    label = [
        names[i] if i < len(names) and tree is not None else f"#{i}"
        for i in range(len(leaves))
    ]
    cond_trace = _trace_step(test, leaves, tree, slots, inits, where, True)
    body_trace = _trace_step(body, leaves, tree, slots, inits, where, False)
    if body_trace.tree != tree:
        raise TraceError(
            f"{where}: the body of a loop on a traced condition changes the structure "
            "of its variables (a tuple's length, a list into a tuple...)"
        )
    (pred,) = cond_trace.leaves
    pred_atom = _as_atom(pred)
    if pred_atom is None or pred_atom.shape != () or pred_atom.dtype != "bool":
        raise TraceError(f"{where}: the loop condition must be a scalar truth value")
    outs: list[Atom] = []
    for slot, init in zip(slots, inits):
        out = _as_atom(body_trace.leaves[slot])
        if out is None or (out.shape, out.dtype) != (init.shape, init.dtype):
            got = "a non-array" if out is None else f"{out.dtype}{list(out.shape)}"
            raise TraceError(
                f"{where}: the loop on a traced condition changes `{label[slot]}` "
                f"from {init.dtype}{list(init.shape)} to {got}; a loop variable "
                "keeps its shape and dtype"
            )
        outs.append(out)
    for i, (a, b) in enumerate(zip(leaves, body_trace.objects)):
        if i not in slots and a is not b and not isinstance(a, Undefined):
            raise TraceError(
                f"{where}: the loop on a traced condition changes `{label[i]}`, a "
                f"{type(a).__name__}; difgen can loop over arrays and numbers only"
            )
    for trace in (cond_trace, body_trace):
        if trace.builder.journal:
            raise TraceError(
                f"{where}: the loop on a traced condition writes into an array from "
                "before the loop through another name; write into the loop's own "
                "variable"
            )
    consts: dict[Var, Builder] = {}
    for trace in (cond_trace, body_trace):
        for outer, owner in trace.builder.owners.items():
            consts.setdefault(outer, owner)
    cond_graph = _step_graph(cond_trace, [pred_atom], list(consts))
    body_graph = _step_graph(body_trace, outs, list(consts))
    operands = [
        (
            Tracer(current_builder(), a)
            if isinstance(a, Lit)
            else _outer_tracer(a, leaves, slots, inits)
        )
        for a in inits
    ]
    const_args = [Tracer(owner, var) for var, owner in consts.items()]
    results = list(leaves)
    for j, slot in enumerate(slots):
        results[slot] = bind(
            PRIMITIVES["while_loop"],
            *operands,
            *const_args,
            cond=SubGraph(cond_graph, where),
            body=SubGraph(body_graph, where),
            n_state=len(slots),
            index=j,
        )
    return tuple(_unflatten(tree, iter(results))) if tree is not None else (results[0],)


def _outer_tracer(
    atom: Atom, leaves: list[Any], slots: list[int], inits: list[Atom]
) -> Any:
    """The tracer holding loop variable ``atom`` before the loop."""
    for slot, init in zip(slots, inits):
        if init is atom and isinstance(leaves[slot], Tracer):
            return leaves[slot]
    raise TraceError("internal: a loop variable lost its tracer")


@dataclass
class _Step:
    builder: BranchBuilder
    inputs: list[Var]
    leaves: list[Any]
    tree: Any
    objects: list[Any]


def _trace_step(
    fn: Callable[..., Any],
    leaves: list[Any],
    tree: Any,
    slots: list[int],
    inits: list[Atom],
    where: str,
    is_test: bool,
) -> _Step:
    """Run ``fn`` (the loop's condition or body) on symbolic loop variables."""
    inputs = [Var(a.shape, a.dtype) for a in inits]
    with tracing_branch(where) as builder:
        args = list(leaves)
        for slot, var in zip(slots, inputs):
            args[slot] = Tracer(builder, var)
        state = _unflatten(tree, iter(args)) if tree is not None else (args[0],)
        result = fn(*state)
        if is_test:
            result = _predicate(result, where)
        objects, out_tree = _flatten(result)
        out = [_leaf(builder, v) for v in objects]
    return _Step(builder, inputs, out, out_tree, objects)


def _step_graph(step: _Step, outs: list[Atom], consts: list[Var]) -> Graph:
    """The condition or body as a graph of (loop variables, constants)."""
    extra = [step.builder.captures.get(v) or Var(v.shape, v.dtype) for v in consts]
    return dce(Graph((*step.inputs, *extra), tuple(outs), tuple(step.builder.eqns)))


# ------------------------------------------------------------- tracing branches
@dataclass
class _Branch:
    """One traced branch: its result's leaves (atoms of the branch, or Python
    values), their structure, and the final atoms of the arrays it wrote."""

    builder: BranchBuilder
    leaves: list[Any]
    tree: Any
    objects: list[Any]
    written: dict[int, tuple[Tracer, Atom]] = field(default_factory=dict)


def _flatten(value: Any) -> tuple[list[Any], Any]:
    """Leaves and structure of nested tuples and lists."""
    if isinstance(value, (tuple, list)) and not isinstance(value, Tracer):
        leaves: list[Any] = []
        trees = []
        for item in value:
            sub, tree = _flatten(item)
            leaves += sub
            trees.append(tree)
        return leaves, (type(value), tuple(trees))
    return [value], None


def _unflatten(tree: Any, leaves: Iterator[Any]) -> Any:
    if tree is None:
        return next(leaves)
    kind, subtrees = tree
    return kind(_unflatten(t, leaves) for t in subtrees)


def _trace_branch(run: Callable[[], Any], where: str) -> _Branch:
    """Run one branch in its own trace; restore what it wrote from outside."""
    with tracing_branch(where) as builder:
        result = run()
        objects, tree = _flatten(result)
        leaves = [_leaf(builder, v) for v in objects]
        written = {
            key: (tracer, builder.adopt(tracer).atom)
            for key, (tracer, _, _) in builder.journal.items()
        }
    return _Branch(builder, leaves, tree, objects, written)


def _leaf(builder: BranchBuilder, value: Any) -> Any:
    """A branch result as an atom of the branch (tracers), else as it is."""
    if isinstance(value, Tracer):
        return builder.adopt(value).atom
    return value


def _number(value: Any) -> bool:
    return isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating))


def _as_atom(value: Any) -> Atom | None:
    """A Python number or float/bool NumPy array as a constant atom (else None)."""
    if isinstance(value, (Var, Lit)):
        return value
    if _number(value) or (isinstance(value, np.ndarray) and value.dtype.kind in "fb"):
        return Lit(as_constant(value))
    return None


def _cond(
    pred: Tracer, if_true: Callable[[], Any], if_false: Callable[[], Any], where: str
) -> Any:
    """Trace both branches and merge their results with one ``cond`` per value."""
    if "cond" not in PRIMITIVES:
        raise TraceError(f"{where}: cond is not registered (import difgen.ad)")
    true = _trace_branch(if_true, where)
    false = _trace_branch(if_false, where)
    if true.tree != false.tree:
        raise TraceError(
            f"{where}: the two branches of a branch on a traced value give results "
            "of different structure (a tuple of different length, a list and a "
            "tuple...); difgen needs the same structure from both"
        )
    merged = [
        _merge(pred, true, false, t, f, where, i)
        for i, (t, f) in enumerate(zip(true.leaves, false.leaves))
    ]
    _write_back(pred, true, false, where)
    for i, (a, b) in enumerate(zip(true.objects, false.objects)):
        if a is b and isinstance(a, Tracer):
            merged[i] = a  # the same array object in both: it stays that object
        elif isinstance(merged[i], Tracer):
            _mark_views(merged[i], (a, b), where)
    return _unflatten(true.tree, iter(merged))


def _mark_views(result: Tracer, chosen: tuple[Any, Any], where: str) -> None:
    """A result chosen among views of arrays from before the branch (``a if c else
    x[1]``, a row...) is a copy in difgen but a view in NumPy: mark it, so that a
    write that NumPy would see through the view is refused (Tracer.chosen)."""
    bases = [
        (v.view.base, v.view.base.version)
        for v in chosen
        if isinstance(v, Tracer) and v.view is not None
    ]
    if bases:
        result.chosen = (where, bases)


def _merge(
    pred: Tracer,
    true: _Branch,
    false: _Branch,
    t: Any,
    f: Any,
    where: str,
    index: int,
) -> Any:
    """The value after the branch of one result the branches give as ``t``, ``f``."""
    if isinstance(t, Undefined) and isinstance(f, Undefined):
        return t
    if isinstance(t, Undefined) or isinstance(f, Undefined):
        # Bound on one side only: Python could not read it after the branch on the
        # other (NameError), so that side's placeholder is never a result of valid
        # code (``for ... else`` and flags assign it on every path that reads it).
        known = _as_atom(f if isinstance(t, Undefined) else t)
        if known is None:
            return t if isinstance(t, Undefined) else f
        hole = Lit(
            np.zeros(known.shape, dtype=np.bool_ if known.dtype == "bool" else None)
        )
        t, f = (hole, f) if isinstance(t, Undefined) else (t, hole)
    if not isinstance(t, (Var, Lit)) and not isinstance(f, (Var, Lit)):
        if t is f:
            return t
        if _number(t) and _number(f) and type(t) is type(f) and t == f:
            return t
    ta, fa = _as_atom(t), _as_atom(f)
    if ta is None or fa is None:
        raise TraceError(
            f"{where}: the two branches of a branch on a traced value give "
            f"different {type(t if ta is None else f).__name__} values (result "
            f"{index}); difgen can choose between arrays and numbers only"
        )
    return _select(pred, true, false, ta, fa, where)


def _select(
    pred: Tracer, true: _Branch, false: _Branch, ta: Atom, fa: Atom, where: str
) -> Any:
    """One ``cond`` choosing between atom ``ta`` of one branch and ``fa`` of the
    other (no ``cond`` when both are the same value from before the branch)."""
    if (ta.shape, ta.dtype) != (fa.shape, fa.dtype):
        raise TraceError(
            f"{where}: the two branches of a branch on a traced value give a value "
            f"of {ta.dtype}{list(ta.shape)} and one of {fa.dtype}{list(fa.shape)}; "
            "difgen needs the same shape and dtype from both"
        )
    if isinstance(ta, Lit) and ta == fa:
        return Tracer(current_builder(), ta)
    outer_t = _outer(true.builder, ta)
    if outer_t is not None and outer_t == _outer(false.builder, fa):
        return Tracer(outer_t[1], outer_t[0])
    operands: dict[Var, Builder] = {}
    for b in (true.builder, false.builder):
        for outer, owner in b.owners.items():
            operands.setdefault(outer, owner)
    graphs = [
        _branch_graph(b, atom, list(operands))
        for b, atom in ((false.builder, fa), (true.builder, ta))
    ]
    used = [
        i for i in range(len(operands)) if any(_uses(g, g.inputs[i]) for g in graphs)
    ]
    pairs = list(operands.items())
    graphs = [
        Graph(tuple(g.inputs[i] for i in used), g.outputs, g.eqns) for g in graphs
    ]
    args = [Tracer(pairs[i][1], pairs[i][0]) for i in used]
    return bind(
        PRIMITIVES["cond"],
        pred,
        *args,
        branches=tuple(SubGraph(g, where) for g in graphs),
    )


def _outer(builder: BranchBuilder, atom: Atom) -> tuple[Var, Builder] | None:
    """The enclosing value a branch's input atom stands for (None: computed here)."""
    for outer, inner in builder.captures.items():
        if inner is atom:
            return outer, builder.owners[outer]
    return None


def _branch_graph(builder: BranchBuilder, out: Atom, operands: list[Var]) -> Graph:
    """The branch as a graph of all operands (captured or not) to ``out``."""
    inputs = tuple(builder.captures.get(v) or Var(v.shape, v.dtype) for v in operands)
    return dce(Graph(inputs, (out,), tuple(builder.eqns)))


def _uses(graph: Graph, var: Var) -> bool:
    return var in graph.outputs or any(var in e.inputs for e in graph.eqns)


def _write_back(pred: Tracer, true: _Branch, false: _Branch, where: str) -> None:
    """Arrays from before the branch that a branch wrote get the chosen value."""
    keys = list(true.written) + [k for k in false.written if k not in true.written]
    for key in keys:
        tracer = (true.written.get(key) or false.written[key])[0]
        ta = (
            true.written[key][1]
            if key in true.written
            else true.builder.adopt(tracer).atom
        )
        fa = (
            false.written[key][1]
            if key in false.written
            else false.builder.adopt(tracer).atom
        )
        tracer.write(_select(pred, true, false, ta, fa, where))


# =================================================================== rewriting
@dataclass
class Rewrite:
    """A function's rewritten code and why some branches were left as they are."""

    code: types.CodeType
    refused: dict[int, str]


_REWRITES: dict[types.CodeType, Rewrite] = {}
_REWRITTEN: set[types.CodeType] = set()  # rewritten code and the code nested in it


def _nested_codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _nested_codes(const)


def is_rewritten(code: Any) -> bool:
    """Whether ``code`` comes from a rewrite (a second rewrite cannot help)."""
    return code in _REWRITTEN


def refusal(filename: str, line: int) -> str | None:
    """Why the branch at ``filename:line`` could not become a cond (None: unknown)."""
    for rewrite in _REWRITES.values():
        if rewrite.code.co_filename == filename and line in rewrite.refused:
            return rewrite.refused[line]
    return None


def function_of(code: Any) -> types.FunctionType | None:
    """The function object running ``code`` (the one to rewrite)."""
    for obj in gc.get_referrers(code):
        if isinstance(obj, types.FunctionType) and obj.__code__ is code:
            return obj
    return None


@contextlib.contextmanager
def rewritten(functions: list[types.FunctionType]) -> Iterator[None]:
    """Run with each function's code swapped for its rewrite, restored afterwards."""
    saved: list[tuple[types.FunctionType, types.CodeType, bool]] = []
    try:
        for fn in functions:
            rewrite = rewrite_function(fn)
            had = HELPERS in fn.__globals__
            saved.append((fn, fn.__code__, had))
            fn.__globals__[HELPERS] = _HELPERS_MODULE
            fn.__code__ = rewrite.code
        yield
    finally:
        for fn, code, had in reversed(saved):
            fn.__code__ = code
            if not had:
                fn.__globals__.pop(HELPERS, None)


def rewrite_function(fn: types.FunctionType) -> Rewrite:
    """The rewrite of ``fn`` (cached by its code object)."""
    code = fn.__code__
    if code in _REWRITES:
        return _REWRITES[code]
    where = f"{code.co_filename}:{code.co_firstlineno}"
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise TraceError(
            f"{where}: the function branches on a traced value, and difgen cannot "
            "read its source to turn the branch into a conditional"
        ) from None
    tree = ast.parse(source)
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise TraceError(
            f"{where}: only a `def` function (not a lambda) can branch on a traced "
            "value"
        )
    ast.increment_lineno(tree, code.co_firstlineno - node.lineno)
    node.decorator_list = []
    rewriter = _Rewriter(code.co_filename)
    node.body = rewriter.block(node.body, tail=True) or [ast.Pass()]
    freevars = list(code.co_freevars)
    factory = ast.FunctionDef(
        name="__difgen_factory",
        args=ast.arguments(
            posonlyargs=[],
            args=[ast.arg(arg=n) for n in freevars],
            kwonlyargs=[],
            kw_defaults=[],
            defaults=[],
        ),
        body=[node, ast.Return(ast.Name(node.name, ast.Load()))],
        decorator_list=[],
    )
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    _locate(module, code.co_firstlineno)
    namespace: dict[str, Any] = {}
    compiled = compile(module, code.co_filename, "exec")
    exec(compiled, fn.__globals__.copy(), namespace)  # noqa: S102  (the user's code)
    new = namespace["__difgen_factory"](*([None] * len(freevars))).__code__
    if new.co_freevars != code.co_freevars:
        raise TraceError(
            f"{where}: the function branches on a traced value, and difgen cannot "
            "rewrite a closure whose rewrite changes the variables it closes over"
        )
    rewrite = Rewrite(new, rewriter.refused)
    _REWRITES[code] = rewrite
    _REWRITTEN.update(_nested_codes(new))
    return rewrite


def _locate(module: ast.Module, line: int) -> None:
    """Nodes made by the rewrite without a location get the function's line."""
    for node in ast.walk(module):
        if "lineno" in node._attributes and not hasattr(node, "lineno"):
            node.lineno = line  # type: ignore[attr-defined]


def _helper(name: str) -> ast.expr:
    return ast.Attribute(ast.Name(HELPERS, ast.Load()), name, ast.Load())


def _thunk(expr: ast.expr) -> ast.Lambda:
    return ast.Lambda(
        ast.arguments(
            posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]
        ),
        expr,
    )


class _Names(ast.NodeVisitor):
    """What a branch's statements assign and write, and what stops a rewrite."""

    def __init__(self) -> None:
        self.assigned: list[str] = []
        self.written: list[str] = []
        self.reason: str | None = None
        self.returns = False
        self.loops = 0

    def _name(self, name: str) -> None:
        if name not in self.assigned:
            self.assigned.append(name)

    def target(self, node: ast.expr) -> None:
        if isinstance(node, ast.Name):
            self._name(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                self.target(elt)
        elif isinstance(node, ast.Starred):
            self.target(node.value)
        elif isinstance(node, ast.Subscript):
            base = node.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name):
                if base.id not in self.written:
                    self.written.append(base.id)
            else:
                self.reason = "it writes into an item of an expression"
        elif isinstance(node, ast.Attribute):
            self.reason = "it assigns an attribute"

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self.target(t)
        self.visit(node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.target(node.target)
        self.visit(node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.target(node.target)
        if node.value is not None:
            self.visit(node.value)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.target(node.target)
        self.visit(node.value)

    def _loop(self, node: ast.For | ast.While) -> None:
        if isinstance(node, ast.For):
            self.target(node.target)
        self.loops += 1
        for stmt in [*node.body, *node.orelse]:
            self.visit(stmt)
        self.loops -= 1

    def visit_For(self, node: ast.For) -> None:
        self._loop(node)

    def visit_While(self, node: ast.While) -> None:
        self._loop(node)

    def visit_Break(self, node: ast.Break) -> None:
        if not self.loops:
            self.reason = "a `break` or `continue` in it leaves a loop"

    def visit_Continue(self, node: ast.Continue) -> None:
        if not self.loops:
            self.reason = "a `break` or `continue` in it leaves a loop"

    def visit_Return(self, node: ast.Return) -> None:
        if self.loops:
            self.reason = "it returns from inside a loop"
        self.returns = True

    def visit_Yield(self, node: ast.AST) -> None:
        self.reason = "it yields"

    visit_YieldFrom = visit_Yield
    visit_Await = visit_Yield

    def visit_Global(self, node: ast.AST) -> None:
        self.reason = "it declares a global or nonlocal variable"

    visit_Nonlocal = visit_Global

    def visit_Delete(self, node: ast.AST) -> None:
        self.reason = "it deletes a variable"

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            if item.optional_vars is not None:
                self.target(item.optional_vars)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            self._name((alias.asname or alias.name).split(".")[0])

    visit_ImportFrom = visit_Import

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._name(node.name)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._name(node.name)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._name(node.name)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        return

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
            self.reason = f"it calls .{func.attr}(), which may change a Python object"
        self.generic_visit(node)


def _scan(stmts: list[ast.stmt]) -> _Names:
    names = _Names()
    for stmt in stmts:
        names.visit(stmt)
    return names


class _Rewriter(ast.NodeTransformer):
    """Rewrites a function body: branches to helper calls (see the module doc)."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.refused: dict[int, str] = {}
        self.count = 0

    def where(self, node: ast.AST) -> ast.Constant:
        return ast.Constant(f"{self.filename}:{getattr(node, 'lineno', 0)}")

    # -- expressions
    def visit_IfExp(self, node: ast.IfExp) -> ast.expr:
        self.generic_visit(node)
        call = ast.Call(
            _helper("ifexp"),
            [node.test, _thunk(node.body), _thunk(node.orelse), self.where(node)],
            [],
        )
        return ast.copy_location(call, node)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        self.generic_visit(node)
        name = "and_" if isinstance(node.op, ast.And) else "or_"
        args = [self.where(node), *(_thunk(v) for v in node.values)]
        return ast.copy_location(ast.Call(_helper(name), args, []), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:
        self.generic_visit(node)
        if not isinstance(node.op, ast.Not):
            return node
        call = ast.Call(_helper("not_"), [node.operand, self.where(node)], [])
        return ast.copy_location(call, node)

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        operands = [node.left, *node.comparators]
        pairs: list[ast.expr] = [
            ast.copy_location(ast.Compare(a, [op], [b]), node)
            for a, op, b in zip(operands, node.ops, operands[1:])
        ]
        args = [self.where(node), *(_thunk(p) for p in pairs)]
        return ast.copy_location(ast.Call(_helper("and_"), args, []), node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        return node  # a nested function is its own code: not rewritten here

    def visit_Lambda(self, node: ast.Lambda) -> ast.Lambda:
        return node

    # -- statements
    def block(self, stmts: list[ast.stmt], tail: bool) -> list[ast.stmt]:
        """Rewrite a block; ``tail``: falling off its end returns from the function."""
        out: list[ast.stmt] = []
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, ast.Return):
                out.append(self.visit(stmt))
                return out  # what follows a return never runs
            if not isinstance(stmt, ast.If):
                done = self.statement(stmt)
                out += done if isinstance(done, list) else [done]
                continue
            names = _scan([stmt])
            if names.reason is not None or (names.returns and not tail):
                why = names.reason or "it returns from inside a loop or a `with`"
                self.refused[stmt.lineno] = why
                done = self.statement(stmt)
                out += done if isinstance(done, list) else [done]
                continue
            if names.returns:
                out += self.returning_if(stmt, stmts[i + 1 :])
                return out
            out += self.assigning_if(stmt, names)
        return out

    def statement(self, stmt: ast.stmt) -> ast.stmt | list[ast.stmt]:
        """A statement other than a rewritten ``if``: its expressions are rewritten,
        and its blocks too (loops, ``with`` and ``try`` bodies are never tails)."""
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return stmt
        if isinstance(stmt, (ast.For, ast.While)) and _has_exit(stmt.body):
            lowered = self.lower_exits(stmt)
            if lowered is not None:
                return self.block(lowered, tail=False)
            self.refused[stmt.lineno] = (
                "a `break` or `continue` inside a `with` or `try` block of a loop is "
                "not supported"
            )
        if isinstance(stmt, ast.While):
            names = _scan(stmt.body)
            if names.reason is None and not names.returns and not stmt.orelse:
                return self.while_loop(stmt, names)
            self.refused[stmt.lineno] = (
                "a loop on a traced condition with "
                + ("an `else` clause" if stmt.orelse else names.reason or "a `return`")
                + " is not supported yet"
            )
        if isinstance(stmt, (ast.For, ast.While)):
            self.refuse_loop(stmt)
        for name in ("body", "orelse", "finalbody"):
            block = getattr(stmt, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                setattr(stmt, name, self.block(block, tail=False) or [ast.Pass()])
        if isinstance(stmt, ast.Try):
            for handler in stmt.handlers:
                handler.body = self.block(handler.body, tail=False) or [ast.Pass()]
        for name, value in ast.iter_fields(stmt):
            if isinstance(value, ast.expr):
                setattr(stmt, name, self.visit(value))
            elif isinstance(value, list) and value and isinstance(value[0], ast.expr):
                setattr(stmt, name, [self.visit(v) for v in value])
        return stmt

    def lower_exits(self, stmt: ast.For | ast.While) -> list[ast.stmt] | None:
        """A loop's ``break`` and ``continue`` as flags that guard the rest of the
        body (AutoGraph's lowering), so a traced exit is a ``cond`` of the flag:

        - ``for``: each iteration runs under ``if not broke:`` (the trip count stays
          the iterable's, unrolled as before), the target assigned inside it;
        - ``while``: the condition becomes ``not broke and <test>``;
        - statements after an ``if`` that may exit run under ``if not (broke or
          skipped):``; an ``else`` clause runs under ``if not broke:``.
        """
        self.count += 1
        broke = f"__difgen_break_{self.count}"
        skipped = f"__difgen_continue_{self.count}"
        body = _lower_exits(stmt.body, broke, skipped)
        if body is None:
            return None
        reset = _assign(skipped, False)
        not_broke = ast.UnaryOp(ast.Not(), ast.Name(broke, ast.Load()))
        loop: ast.stmt
        if isinstance(stmt, ast.For):
            item = f"__difgen_item_{self.count}"
            bind = ast.Assign([stmt.target], ast.Name(item, ast.Load()))
            guarded = ast.If(not_broke, [bind, *body], [])
            loop = ast.For(ast.Name(item, ast.Store()), stmt.iter, [reset, guarded], [])
        else:
            test = ast.BoolOp(ast.And(), [not_broke, stmt.test])
            loop = ast.While(test, [reset, *body], [])
        out: list[ast.stmt] = [_assign(broke, False), _assign(skipped, False), loop]
        if stmt.orelse:
            not_broke = ast.UnaryOp(ast.Not(), ast.Name(broke, ast.Load()))
            out.append(ast.If(not_broke, stmt.orelse, []))
        for made in out:
            ast.copy_location(made, stmt)
        ast.fix_missing_locations(ast.Module(body=out, type_ignores=[]))
        return out

    def while_loop(self, stmt: ast.While, names: _Names) -> list[ast.stmt]:
        """``while test: body`` as a condition function, a body function returning
        the loop variables, and a call of :func:`while_`."""
        params = names.assigned + [w for w in names.written if w not in names.assigned]
        self.count += 1
        result = ast.Tuple([ast.Name(p, ast.Load()) for p in params], ast.Load())
        args = ast.arguments(
            posonlyargs=[],
            args=[ast.arg(arg=p) for p in params],
            kwonlyargs=[],
            kw_defaults=[],
            defaults=[],
        )
        test = ast.FunctionDef(
            name=f"__difgen_cond_{stmt.lineno}_{self.count}",
            args=args,
            body=[ast.Return(self.visit(stmt.test))],
            decorator_list=[],
        )
        body = ast.FunctionDef(
            name=f"__difgen_body_{stmt.lineno}_{self.count}",
            args=args,
            body=[*self.block(stmt.body, tail=False), ast.Return(result)],
            decorator_list=[],
        )
        values: list[ast.expr] = [
            ast.Call(
                _helper("value"),
                [_thunk(ast.Name(p, ast.Load())), ast.Constant(p)],
                [],
            )
            for p in params
        ]
        written = [params.index(w) for w in names.written]
        call = ast.Call(
            _helper("while_"),
            [
                ast.Name(test.name, ast.Load()),
                ast.Name(body.name, ast.Load()),
                ast.Tuple(values, ast.Load()),
                ast.Tuple([ast.Constant(i) for i in written], ast.Load()),
                self.where(stmt),
                ast.Tuple([ast.Constant(p) for p in params], ast.Load()),
            ],
            [],
        )
        target = ast.Tuple([ast.Name(p, ast.Store()) for p in params], ast.Store())
        assign = ast.Assign([target], call) if params else ast.Expr(call)
        return [
            ast.copy_location(test, stmt),
            ast.copy_location(body, stmt),
            ast.copy_location(assign, stmt),
        ]

    def refuse_loop(self, stmt: ast.For | ast.While) -> None:
        """Loops stay loops: a traced condition in one keeps the bool() error."""
        if isinstance(stmt, ast.While):
            self.refused.setdefault(
                stmt.lineno,
                "a `while` loop on a traced condition is not supported yet (its "
                "trip count would depend on the input)",
            )
        for node in ast.walk(stmt):
            if isinstance(node, ast.If) and _scan([node]).reason is None:
                continue
            if isinstance(node, ast.If):
                self.refused.setdefault(node.lineno, str(_scan([node]).reason))

    def functions(
        self, stmt: ast.If, bodies: list[list[ast.stmt]], params: list[str]
    ) -> list[ast.stmt]:
        """The two branch functions (taking ``params``)."""
        self.count += 1
        defs: list[ast.stmt] = []
        for kind, body in zip(("true", "false"), bodies):
            fn = ast.FunctionDef(
                name=f"__difgen_{kind}_{stmt.lineno}_{self.count}",
                args=ast.arguments(
                    posonlyargs=[],
                    args=[ast.arg(arg=p) for p in params],
                    kwonlyargs=[],
                    kw_defaults=[],
                    defaults=[],
                ),
                body=body or [ast.Pass()],
                decorator_list=[],
            )
            defs.append(ast.copy_location(fn, stmt))
        return defs

    def call(
        self, stmt: ast.If, defs: list[ast.stmt], params: list[str], written: list[str]
    ) -> ast.Call:
        values: list[ast.expr] = [
            ast.Call(
                _helper("value"),
                [_thunk(ast.Name(p, ast.Load())), ast.Constant(p)],
                [],
            )
            for p in params
        ]
        writes: list[ast.expr] = [
            ast.Call(
                _helper("value"),
                [_thunk(ast.Name(w, ast.Load())), ast.Constant(w)],
                [],
            )
            for w in written
            if w not in params
        ]
        return ast.Call(
            _helper("if_"),
            [
                self.visit(stmt.test),
                ast.Name(defs[0].name, ast.Load()),  # type: ignore[attr-defined]
                ast.Name(defs[1].name, ast.Load()),  # type: ignore[attr-defined]
                ast.Tuple(values, ast.Load()),
                ast.Tuple(writes, ast.Load()),
                self.where(stmt),
            ],
            [],
        )

    def assigning_if(self, stmt: ast.If, names: _Names) -> list[ast.stmt]:
        """``if`` without ``return``: branches return what they assign."""
        params = names.assigned
        result = ast.Tuple([ast.Name(p, ast.Load()) for p in params], ast.Load())
        bodies = [
            [*self.block(body, tail=False), ast.Return(result)]
            for body in (stmt.body, stmt.orelse)
        ]
        defs = self.functions(stmt, bodies, params)
        call = self.call(stmt, defs, params, names.written)
        if params:
            target = ast.Tuple([ast.Name(p, ast.Store()) for p in params], ast.Store())
            assign: ast.stmt = ast.Assign([target], call)
        else:
            assign = ast.Expr(call)
        return [*defs, ast.copy_location(assign, stmt)]

    def returning_if(self, stmt: ast.If, rest: list[ast.stmt]) -> list[ast.stmt]:
        """``if`` with a ``return``: the rest of the block goes into the branches
        that may fall through, and the ``if`` returns the ``cond`` of the results."""
        bodies = []
        for body in (stmt.body, stmt.orelse):
            full = body if _always_returns(body) else [*body, *rest]
            block = self.block(full, tail=True)
            if not _always_returns(block):
                block.append(ast.Return(ast.Constant(None)))
            bodies.append(block)
        names = _scan([stmt, *rest])
        params = names.assigned
        defs = self.functions(stmt, bodies, params)
        call = self.call(stmt, defs, params, names.written)
        return [*defs, ast.copy_location(ast.Return(call), stmt)]


def _assign(name: str, value: bool) -> ast.Assign:
    return ast.Assign([ast.Name(name, ast.Store())], ast.Constant(value))


def _has_exit(stmts: list[ast.stmt]) -> bool:
    """Whether a ``break``/``continue`` of this loop level is among ``stmts``."""
    todo: list[ast.AST] = list(stmts)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Break, ast.Continue)):
            return True
        skip = (ast.For, ast.While, ast.FunctionDef, ast.Lambda, ast.ClassDef)
        if not isinstance(node, skip):
            todo.extend(ast.iter_child_nodes(node))
        elif isinstance(node, (ast.For, ast.While)):
            todo.extend(node.orelse)  # a loop's else belongs to the outer level
    return False


def _lower_exits(
    stmts: list[ast.stmt], broke: str, skipped: str
) -> list[ast.stmt] | None:
    """``stmts`` with this loop's exits set as flags (None: an exit sits where the
    lowering cannot reach it, inside a ``with`` or ``try``)."""
    out: list[ast.stmt] = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ast.Break):
            out.append(ast.copy_location(_assign(broke, True), stmt))
            return out
        if isinstance(stmt, ast.Continue):
            out.append(ast.copy_location(_assign(skipped, True), stmt))
            return out
        if not _has_exit([stmt]):
            out.append(stmt)
            continue
        if not isinstance(stmt, ast.If):
            return None
        body = _lower_exits(stmt.body, broke, skipped)
        orelse = _lower_exits(stmt.orelse, broke, skipped)
        if body is None or orelse is None:
            return None
        out.append(ast.copy_location(ast.If(stmt.test, body, orelse), stmt))
        rest = stmts[i + 1 :]
        if rest:
            lowered = _lower_exits(rest, broke, skipped)
            if lowered is None:
                return None
            flags: list[ast.expr] = [
                ast.Name(broke, ast.Load()),
                ast.Name(skipped, ast.Load()),
            ]
            go_on = ast.UnaryOp(ast.Not(), ast.BoolOp(ast.Or(), flags))
            out.append(ast.copy_location(ast.If(go_on, lowered, []), rest[0]))
        return out
    return out


def _always_returns(block: list[ast.stmt]) -> bool:
    return bool(block) and isinstance(block[-1], ast.Return)


_HELPERS_MODULE = types.SimpleNamespace(
    value=value, if_=if_, ifexp=ifexp, and_=and_, or_=or_, not_=not_, while_=while_
)


def explain(exc: TracedBranch) -> str:
    """The refusal message for a branch the rewrite could not turn into a cond."""
    filename = getattr(exc.code, "co_filename", "<unknown>")
    why = refusal(filename, exc.line)
    if why is None and exc.code in _REWRITES and not is_rewritten(exc.code):
        why = "it is in a nested function (or lambda), which difgen does not rewrite"
    if why:
        return (
            f"{filename}:{exc.line}: a branch on a traced value (bool() of a value "
            f"that depends on the input) cannot become a conditional: {why}. Use "
            "np.where(cond, a, b) for an elementwise choice."
        )
    return str(exc)
