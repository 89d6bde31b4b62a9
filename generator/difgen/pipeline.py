"""One module's build, stage by stage (docs/design.md §2):

trace (:func:`trace_spec`) -> derive (:func:`derive`: the backend's operators, symbolic
or as graphs) -> choose and print (:func:`print_parts`, :mod:`difgen.targets.choose`)
-> render (:func:`difgen.render.module.render_module`) -> write (:mod:`difgen.write`,
driven by :mod:`difgen.api` for a whole config).

Each stage is a function of the previous stage's value and is testable alone.
:func:`generate_module` marks the stages of :data:`difgen.budget.STAGES` it runs
(``trace``, ``derive``, ``print``, ``render``), which time limits and progress
reports name.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from difgen import precision, structure
from difgen.ad import loops
from difgen.ad.custom import uses_rules
from difgen.ad.loops import ReverseOverReverse
from difgen.budget import describe, note, stage
from difgen.config import (
    Config,
    ContextSpec,
    ModuleSpec,
    check_output_fit,
    split_function_ref,
)
from difgen.core.ir import Graph, Lit, SubGraph, dce
from difgen.derive import graphs, points
from difgen.derive.checks import IndexCheck, enforced, index_checks
from difgen.derive.graphs import GraphDerivation
from difgen.derive.points import PointsGraphs
from difgen.derive.sizes import ExpressionTooLarge
from difgen.errors import ConfigError, TraceError
from difgen.frontend import control, trace
from difgen.frontend.tracing import definition
from difgen.hashing import (
    BODY_HASH_PLACEHOLDER,
    body_hash,
    source_hash,
    stamp_body_hash,
)
from difgen.interface import FlatFunction, Interface, resolve_classes
from difgen.load import lagrangian_parts, load_object
from difgen.operators import OPERATORS
from difgen.passes import fingerprint
from difgen.primitives import runtime as runtime_rows
from difgen.render.module import render_module
from difgen.render.structured import AUX, StructuredParts
from difgen.rules import check_rules
from difgen.structure import Leaf
from difgen.targets import choose
from difgen.targets.parts import Constants, Function, ModuleParts, Pattern
from difgen.version import VERSION

if TYPE_CHECKING:  # the sympy backend's, imported where it derives
    from difgen.derive.symbolic import SymbolicDerivation


def trace_spec(spec: ModuleSpec, fn: Callable[..., Any]) -> Graph:
    """Trace the user's function at the configured shapes and check the output fits.

    The function is traced twice: a function that computes different constants on
    two calls (random draws, a clock, state kept between calls) would have one
    call's values baked into the generated module, so it is refused.

    The function is called through :class:`difgen.interface.FlatFunction`, which
    cuts the flat input into its arguments and lays its result end to end; with
    ``has_aux = true`` the graph has a second output, the aux value laid end to
    end (:func:`split_outputs` parts them), so that the module's ``SOURCE_HASH``
    covers both.
    """
    return trace_interface(spec, fn)[0]


def trace_interface(
    spec: ModuleSpec, fn: Callable[..., Any]
) -> tuple[Graph, Interface]:
    """The traced graph (see :func:`trace_spec`) and the structure of the
    function's arguments and results."""
    spec = resolve_classes(spec, lambda ref: _load_class(spec, fn, ref))
    check_arity(spec, fn)
    # The IR has one float type: a float32 module is traced like a float64 one and
    # computes in float32 in the code printed for it (difgen.precision).
    avals = [(tuple(spec.input.shape), _traced_dtype(spec.input.dtype))]
    avals += [(tuple(c.shape), _traced_dtype(c.dtype)) for c in spec.contexts]
    trees = [spec.input_tree()] if not spec.inputs else [i.tree for i in spec.inputs]
    flat_fn = FlatFunction(fn, spec, trees, "both" if spec.has_aux else "output")
    # the sympy backend has no loop form: its static loops unroll, as they always did
    unrolled = control.unrolling() if spec.backend == "sympy" else nullcontext()
    try:
        implicit = control.implicit_loops(spec.implicit)
        with unrolled, implicit, precision.computing_in(spec.input.dtype):
            graph = trace(flat_fn, avals)
            again = trace(flat_fn, avals)
    except TraceError as exc:
        raise TraceError(
            f"module {spec.name!r} ({spec.function}): {exc}{_shape_note(spec, exc)}"
        ) from None
    if fingerprint(graph) != fingerprint(again):
        raise TraceError(
            f"module {spec.name!r} ({spec.function}): {definition(fn)}: two calls "
            "of the function at build time computed different values (random "
            "numbers, the time, or state kept between calls?); difgen would bake "
            "one call's values into the generated module. Pass such values as a "
            "context instead"
        )
    assert flat_fn.found is not None  # the trace called it
    interface = Interface(
        spec.input_names,
        tuple(trees),
        flat_fn.found.output,
        flat_fn.found.aux,
        spec.flat,
    )
    for out, what in zip(graph.outputs, ("value", "aux value")):
        if out.dtype != "float64":
            raise ConfigError(
                spec.config_path,
                spec.line_of("function"),
                f"{spec.function} returns a {out.dtype} {what}; expected "
                f"{spec.input.dtype}",
            )
    out = graph.outputs[0]
    check_structure(spec, interface)
    check_output_fit(spec, tuple(out.shape))
    return graph, interface


def split_outputs(graph: Graph) -> tuple[Graph, Graph | None]:
    """The graph of the differentiated output and, with ``has_aux``, the graph of
    the aux value, each with only the equations it needs."""
    if len(graph.outputs) == 1:
        return graph, None
    main = dce(Graph(graph.inputs, graph.outputs[:1], graph.eqns))
    return main, dce(Graph(graph.inputs, graph.outputs[1:], graph.eqns))


def _load_class(spec: ModuleSpec, fn: Callable[..., Any], ref: str) -> Any:
    """The class named by an input's ``type``: from the function's own module when
    it is defined there (the very class the function's code names), else loaded
    as ``function`` is."""
    found = split_function_ref(ref)
    own = split_function_ref(spec.function)
    own_fn = inspect.unwrap(getattr(fn, "__func__", fn))  # difgen.generate wraps
    globals_ = getattr(own_fn, "__globals__", {})
    if found and own and found[0] == own[0] and found[1] in globals_:
        return globals_[found[1]]

    def fail(message: str) -> ConfigError:
        return ConfigError(
            spec.config_path,
            spec.line_of("inputs"),
            f"cannot load the input type '{ref}': {message}",
        )

    return load_object(spec, ref, fail)[0]


def check_structure(spec: ModuleSpec, interface: Interface) -> None:
    """What a structured result refuses: sparse operators (one array output
    each; a sparse jacobian with flat = true), and the operators of one scalar
    output when the function returns a tuple or a tree."""
    if not isinstance(interface.output, Leaf) and not spec.flat:
        for key, off in (("sparse", False),):
            if getattr(spec, key) != off:
                raise ConfigError(
                    spec.config_path,
                    spec.line_of(key),
                    f"'{key}' is not offered for a function returning several "
                    f"values in this version: {spec.function} returns "
                    f"{_describe_tree(interface.output)}"
                    + (
                        "; with flat = true the sparse jacobian is one CSR array "
                        "over the flat vectors"
                        if key == "sparse"
                        else ""
                    ),
                )
    scalar = isinstance(interface.output, Leaf) and interface.output.shape == ()
    bad = [op for op in spec.operators if OPERATORS[op].scalar_output]
    if bad and not scalar and not isinstance(interface.output, Leaf):
        raise ConfigError(
            spec.config_path,
            spec.line_of("function"),
            f"{spec.function} returns {_describe_tree(interface.output)}, but "
            f"operator {', '.join(map(repr, bad))} needs one scalar output; use "
            "'jacobian' (or 'pullback') for several outputs",
        )


def _describe_tree(tree: structure.Tree) -> str:
    if isinstance(tree, Leaf):
        return f"an array of shape {tree.shape}"
    shown = ", ".join(
        f"{structure.path_text('', path) or 'value'} {leaf.shape}"
        for path, leaf in structure.leaves(tree)
    )
    return f"{len(tree.keys)} values (a {tree.kind}: {shown})"


def _traced_dtype(dtype: str) -> str:
    """The IR's type of an argument of this dtype: float32 is its float type too."""
    return "float64" if dtype == "float32" else dtype


_SHAPE_TROUBLE = re.compile(r"shape|broadcast|out of bounds", re.IGNORECASE)


def _shape_note(spec: ModuleSpec, exc: TraceError) -> str:
    """For an error about shapes, the configured shapes the function was traced
    with, each with its config key and line: a wrong ``input.shape`` shows up as a
    broadcasting or indexing error in the user's code, far from its cause."""
    if not _SHAPE_TROUBLE.search(str(exc)):
        return ""
    keys = [("input.shape", spec.input.shape)]
    if spec.inputs:
        keys = [
            (f"inputs.{i}", structure.flat_shape(item.tree))
            for i, item in enumerate(spec.inputs)
        ]
    keys += [(f"contexts.{i}.shape", c.shape) for i, c in enumerate(spec.contexts)]
    shown = ", ".join(
        f"{key} = {list(shape)} at {spec.config_path}:{spec.line_of(key)}"
        for key, shape in keys
    )
    return (
        f". The function was traced with {shown}: if it expects other shapes, "
        "change them there"
    )


def check_arity(spec: ModuleSpec, fn: Callable[..., Any]) -> None:
    """The function must take the input and exactly the configured contexts."""
    names = [*spec.input_names, *(c.name for c in spec.contexts)]
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # no signature to check: calling it says what is wrong
    try:
        signature.bind(*names)
    except TypeError as exc:
        key = "contexts" if spec.contexts else "function"
        given = ", ".join(f"{c.name} (context)" for c in spec.contexts)
        what = "the input"
        if spec.inputs:
            what = f"the inputs {', '.join(spec.input_names)}"
        raise ConfigError(
            spec.config_path,
            spec.line_of(key),
            f"{spec.function} takes {signature}, but difgen calls it with {what}"
            f"{' and ' + given if given else ' alone'} ({exc}); list one context "
            "per parameter after the inputs, in order",
        ) from None


@dataclass(frozen=True)
class Derivation:
    """What the derive stage hands to printing: the spec printing follows (its
    ``emit`` changed when the sympy backend fell back to the graph), the module's
    operators derived symbolically or as graphs, the points variants' batched
    graphs (``points = true``), and the run-time index checks the traced function
    performs, which every operator performs at entry."""

    spec: ModuleSpec
    module: SymbolicDerivation | GraphDerivation
    points: tuple[PointsGraphs, ...]
    fallback: bool = False
    index_checks: tuple[IndexCheck, ...] = ()
    why: str = "sympy over budget"
    """Why the sympy backend's module was built from the graph (``fallback``)."""


def derive(spec: ModuleSpec, graph: Graph) -> Derivation:
    """Every operator of the module as the configured backend derives it, and the
    points variants' graphs, loops' reverse mode checkpointed as ``checkpoint``
    says (:func:`difgen.ad.loops.checkpointing`); see :func:`_derive`."""
    with loops.checkpointing(spec.checkpoint, spec.snapshots):
        return _derive(spec, graph)


def _derive(spec: ModuleSpec, graph: Graph) -> Derivation:
    """Every operator of the module as the configured backend derives it, and the
    points variants' graphs.

    When the sympy backend's expressions go over their size budget, the module is
    derived from the graph instead, as the trace backend derives it, and printed as
    vector code (C loops with ``emit = "c"``): time linear in the graph; the
    module's docstring and the build's notes say so.
    """
    module: SymbolicDerivation | GraphDerivation
    fallback = False
    rules = uses_rules(graph)
    if spec.backend == "sympy" and rules is not None:
        # SymPy would differentiate the function, not the user's rule
        emit = "c" if spec.emit == "c" else "vector"
        note(
            f"sympy backend: {rules} has a user derivative rule (difgen.custom_jvp or "
            "custom_vjp), "
            f"which SymPy cannot differentiate by; built from the graph instead "
            f'({"C loops" if emit == "c" else "vector code"}, as backend = "trace" '
            "builds it)"
        )
        spec = dataclasses.replace(spec, emit=emit)
        fallback = True
    elif spec.backend == "sympy":
        _refuse_runtime_data(spec, graph)
        from difgen.derive import symbolic  # SymPy: only this backend needs it

        try:
            module = symbolic.derive(spec, graph)
        except ExpressionTooLarge as exc:
            # emit = "c" stays "c": the trace backend compiles the graph as C loops
            emit = "c" if spec.emit == "c" else "vector"
            code = "C loops" if emit == "c" else "vector code"
            note(
                f"sympy backend over its budget ({exc}); built from the graph "
                f'instead ({code}, as backend = "trace" builds it)'
            )
            spec = dataclasses.replace(spec, emit=emit)
            fallback = True
    if spec.backend == "trace" or fallback:
        module = graphs.derive(spec, graph)
    points_graphs: tuple[PointsGraphs, ...] = ()
    if spec.points:  # from the graphs, for either backend
        traced = module if isinstance(module, GraphDerivation) else None
        operators = (traced or graphs.derive(spec, graph)).operators
        with stage("points"):
            points_graphs = points.derive(spec, operators)
    checks = index_checks(graph, [c.name for c in spec.contexts])
    why = "user derivative rules" if rules is not None else "sympy over budget"
    return Derivation(spec, module, points_graphs, fallback, checks, why)


def _graphs(spec: ModuleSpec, graph: Graph) -> GraphDerivation:
    with loops.checkpointing(spec.checkpoint, spec.snapshots):
        return graphs.derive(spec, graph)


def _refuse_runtime_data(spec: ModuleSpec, graph: Graph) -> None:
    """Run-time indices and masks have no symbolic form: refused at ``backend``."""
    runtime = sorted(
        {e.primitive.name for e in graph.eqns} & runtime_rows.RUNTIME_PRIMITIVES
    )
    if runtime:
        raise ConfigError(
            spec.config_path,
            spec.line_of("backend"),
            f"the function uses {', '.join(runtime)}: " + runtime_rows.RUNTIME_INDEX,
        )


def print_parts(derivation: Derivation, pool: Constants | None = None) -> ModuleParts:
    """Every operator printed in the emission chosen for it, then the points
    variants, all sharing one pool of module constants (``pool``: a new one
    unless given)."""
    spec, module = derivation.spec, derivation.module
    pool = Constants() if pool is None else pool
    with enforced(derivation.index_checks):  # compiled operators must keep them
        if isinstance(module, GraphDerivation):
            parts = choose.print_graphs(spec, module, pool)
        else:
            parts = choose.print_symbolic(spec, module, pool)
    if derivation.fallback:
        emission = f"{parts.emission} (from the graph: {derivation.why})"
        parts = dataclasses.replace(parts, emission=emission)
    parts.index_checks = derivation.index_checks
    if derivation.points:
        from difgen.targets.numpy import points as numpy_points  # SymPy's printer

        parts.functions += numpy_points.build(
            spec, derivation.points, module.output_shape, pool, parts.functions
        )
        parts = dataclasses.replace(
            parts, constants=pool.items, setup=pool.setup, uses=pool.uses
        )
    return parts


def print_aux(
    spec: ModuleSpec, graph: Graph, pool: Constants
) -> tuple[Function, tuple[Function, ...]]:
    """The function computing the aux value (``has_aux``) from the flat input and
    the contexts: the aux graph's ``f``, as the trace backend prints it in NumPy
    (it is not differentiated, and it stays Python with ``emit = "c"``); with
    ``points = true`` also its points variant ``_aux_flat_points`` (and the
    function of one block of points it calls), the aux graph batched as every
    operator's is, so each point's aux value is that point's (``jax.vmap`` of the
    function's aux output)."""
    aux_spec = dataclasses.replace(
        spec,
        backend="trace",
        emit="vector",
        mode="auto",
        operators=(),
        inputs=(),
        has_aux=False,
        flat=False,
    )
    derivation = graphs.derive(aux_spec, graph)
    parts = choose.print_graphs(aux_spec, derivation, pool)
    (function,) = [f for f in parts.functions if f.name == "f"]
    if not spec.points:
        return function, ()
    # named after the aux function, so its variant and block are the module's own
    op = dataclasses.replace(OPERATORS["f"], name=AUX)
    item = derivation.operators[0]
    batched = points.derive(aux_spec, [dataclasses.replace(item, op=op)])
    from difgen.targets.numpy import points as numpy_points  # SymPy's printer

    pair = numpy_points.build(
        aux_spec, batched, derivation.output_shape, pool, parts.functions
    )
    # the variant checks its arguments as f_points does (it takes f's arguments)
    return function, tuple(
        dataclasses.replace(f, points_of="f") if f.points_of == AUX else f for f in pair
    )


IPOPT_PARTS = (
    ("objective", ("gradient",), False),
    ("constraints", ("jacobian",), True),
    ("lagrangian", ("hessian",), True),
)
"""What an ipopt module derives apart from its Lagrangian of z: (part, its
operator besides ``f``, sparse), each a function of x (:func:`ipopt_parts`)."""

IPOPT_MULTIPLIERS = ("obj_factor", "lagrange")
"""The contexts the ``lagrangian`` part takes after the module's own."""


def ipopt_parts(
    spec: ModuleSpec, fn: Callable[..., Any], pool: Constants
) -> tuple[list[Function], dict[str, Pattern]]:
    """The private functions of an ipopt module that IPOPT's callbacks call, and
    their patterns (by function name): ``_objective`` and
    ``_objective_gradient`` (f and its gradient), ``_constraints`` and
    ``_constraints_jacobian`` (g and its sparse jacobian, colored on its own
    pattern), ``_lagrangian_hessian`` (the lower triangle of the Lagrangian's
    hessian in x, the multipliers ``obj_factor`` and ``lagrange`` its last
    contexts), each traced from the user's functions of x and printed as NumPy
    code into ``pool``. The module's hessian over z holds the same derivatives,
    but its multipliers' rows (dense where a constraint is) cost a star coloring
    of many more colors."""
    assert spec.constraints is not None
    functions = lagrangian_parts(fn)
    x = dataclasses.replace(spec.input, shape=spec.constraints.variables)
    taken = {c.name for c in spec.contexts}
    multipliers = tuple(
        ContextSpec(_free(name, taken), shape)
        for name, shape in zip(IPOPT_MULTIPLIERS, ((), (spec.constraints.size,)))
    )
    found: list[Function] = []
    patterns: dict[str, Pattern] = {}
    for part, operators, sparse in IPOPT_PARTS:
        part_spec = dataclasses.replace(
            spec,
            input=x,
            operators=operators,
            sparse=sparse,
            emit="c" if spec.emit == "c" else "vector",
            mode="auto",
            points=False,
            triangle="lower" if part == "lagrangian" else None,
            adapters=(),
            constraints=None,
            contexts=spec.contexts + (multipliers if part == "lagrangian" else ()),
        )
        graph = trace_spec(part_spec, functions[part])
        pool.patterns.clear()
        printed = choose.print_graphs(part_spec, graphs.derive(part_spec, graph), pool)
        for f in printed.functions:
            if part == "lagrangian" and f.name == "f":
                continue  # the value is objective's and constraints'
            name = f"_{part}" if f.name == "f" else f"_{part}_{f.name}"
            private = dataclasses.replace(f, name=name, block_of=f.name)
            if private.native:  # its C beside the operator it was printed as
                from difgen.targets.c import glue as c_glue  # loaded: C was printed

                private = c_glue.renamed(private, f.name)
            found.append(private)
            if f.name in pool.patterns:
                patterns[name] = pool.patterns[f.name]
    return found, patterns


def _free(name: str, taken: set[str]) -> str:
    """``name``, or with underscores before it until no context has it."""
    while name in taken:
        name = f"_{name}"
    return name


def _with_ipopt_parts(
    spec: ModuleSpec, fn: Callable[..., Any], parts: ModuleParts, pool: Constants
) -> ModuleParts:
    """``parts`` with the :func:`ipopt_parts` added, its constants those of the
    pool and its patterns only the Lagrangian's (the structure functions
    describe the module's operators)."""
    patterns = dict(parts.patterns)
    found, private = ipopt_parts(spec, fn, pool)
    return dataclasses.replace(
        parts,
        functions=[*parts.functions, *found],
        constants=pool.items,
        setup=pool.setup,
        uses=pool.uses,
        patterns={**patterns, **private},
    )


def build_parts(spec: ModuleSpec, graph: Graph) -> ModuleParts:
    """The module's printed parts from its traced graph (derive, then print)."""
    with precision.computing_in(spec.input.dtype, spec.accumulate):
        return print_parts(derive(spec, graph))


def generate_module(
    spec: ModuleSpec, config: Config | None, fn: Callable[..., Any]
) -> str:
    """The complete text of the generated module for one config entry (``config``
    None: made in-process by :func:`difgen.generate`, from no config file)."""
    return _generate(spec, config, fn)[0][1]


def generate_files(
    spec: ModuleSpec, config: Config | None, fn: Callable[..., Any]
) -> list[tuple[str, str]]:
    """``(file suffix, text)`` of every file of one config entry: the module
    (``".py"``), and with ``emit = "c"`` also its C source (``"__c.c"``), whose
    ``BODY_HASH`` the module records as ``C_HASH``."""
    if spec.emit != "c":
        return [(".py", generate_module(spec, config, fn))]
    return _generate(spec, config, fn)


def _generate(
    spec: ModuleSpec, config: Config | None, fn: Callable[..., Any]
) -> list[tuple[str, str]]:
    """The stages of one module's build (see :func:`generate_files`), the print
    and render stages in the module's float type."""
    with precision.computing_in(spec.input.dtype, spec.accumulate):
        return _stages(spec, config, fn)


def _stages(
    spec: ModuleSpec, config: Config | None, fn: Callable[..., Any]
) -> list[tuple[str, str]]:
    with stage("trace"):
        with control.counting_unrolled() as loops:
            traced, interface = trace_interface(spec, fn)
        describe(graph_size(traced, loops))
        if spec.input.dtype == "float32":
            for tolerance in tolerances_below(traced, FLOAT32_EPS):
                note(
                    f"{spec.function}: a while loop's exit test compares with "
                    f"{tolerance:g}, below float32's resolution ({FLOAT32_EPS:.1e} "
                    "relative): in this float32 module it may never be met and the "
                    "loop never end; loosen the tolerance"
                )
        # of the graph as traced (aux included), before any backend
        digest = source_hash(spec, traced)
        graph, aux_graph = split_outputs(traced)
        check_rules(spec, graph)  # user derivative rules against differences
    # Derivation may mark finer stages inside this one (progress names the innermost).
    with stage("derive"):
        try:
            derivation = derive(spec, graph)
        except ReverseOverReverse:
            with control.unrolling(), control.counting_unrolled() as loops:
                again_traced = trace_spec(spec, fn)
            describe(graph_size(again_traced, loops))
            again = split_outputs(again_traced)[0]
            if fingerprint(again) == fingerprint(graph):
                raise  # no static loop to unroll: a loop on a traced condition
            note(
                f"{spec.function}: reverse mode over reverse cannot go through a "
                "loop's adjoint, so every static `for` loop is unrolled"
            )
            graph, digest = again, source_hash(spec, again_traced)
            derivation = derive(spec, graph)
    pool = Constants()
    with stage("print"):
        try:
            parts = print_parts(derivation, pool)
        except ConfigError as exc:
            if spec.emit != "c" or isinstance(derivation.module, GraphDerivation):
                raise
            from difgen.targets.c.extension import NoCForm  # loaded: C was printed

            if not isinstance(exc, NoCForm):
                raise
            # a function only Python computes (SciPy's digamma): as over budget,
            # the graph's C loops, with the operators they cannot hold in Python
            note(
                f"sympy backend: {exc.reason}; built from the graph instead "
                '(C loops, as backend = "trace" builds it)'
            )
            derivation = dataclasses.replace(
                derivation,
                module=_graphs(derivation.spec, graph),
                fallback=True,
                why="no C form",
            )
            pool = Constants()
            parts = print_parts(derivation, pool)
        aux, aux_points = (
            (None, ()) if aux_graph is None else print_aux(spec, aux_graph, pool)
        )
        if spec.constraints is not None:
            parts = _with_ipopt_parts(spec, fn, parts, pool)
    wrapped = (
        StructuredParts(interface, aux, aux_points)
        if interface.wrapped or spec.flat
        else None
    )
    with stage("render"):
        if spec.emit != "c":
            return [
                (".py", render_module(spec, config, parts, digest, structure=wrapped))
            ]
        # the C target is imported only by the builds that emit C
        from difgen.targets.c import extension as c_code

        c_text = stamp_body_hash(
            c_code.render_c_module(
                spec, parts.functions, VERSION, digest, BODY_HASH_PLACEHOLDER
            )
        )
        c_hash = body_hash(c_text)
        py_text = render_module(
            spec, config, parts, digest, c_hash=c_hash, structure=wrapped
        )
        return [(".py", py_text), (c_code.SUFFIX + ".c", c_text)]


UNROLLED_SHARE = 0.5
"""An unrolled loop that traced at least this share of a graph's equations is
named in progress reports as the cause of its size..."""

UNROLLED_NAMED = 4096
"""... when the graph has at least this many equations (a smaller one is quick
to build, and a short loop unrolls by design: ``UNROLL_EQUATIONS``)."""


def graph_size(graph: Graph, loops: dict[str, tuple[int, int]] | None = None) -> str:
    """The graph's size for progress reports: its equations (those of loop bodies
    and branches counted once each), and the unrolled loop that traced most of
    them when it is at least :data:`UNROLLED_SHARE` of them.

    >>> graph_size(Graph((), (), ()))
    '0 equations'

    A graph of at least :data:`UNROLLED_NAMED` equations names such a loop:
    ``"12,003 equations, 12,000 of them from the loop at model.py:8 unrolled
    over 6,000 iterations"``.
    """
    count = count_equations(graph)
    text = f"{count:,} equation{'s' if count != 1 else ''}"
    if loops:
        where, (trips, made) = max(loops.items(), key=lambda item: item[1][1])
        if count >= UNROLLED_NAMED and made >= UNROLLED_SHARE * count:
            text += (
                f", {min(made, count):,} of them from the loop at {where} unrolled "
                f"over {trips:,} iterations"
            )
    return text


FLOAT32_EPS = float(np.finfo(np.float32).eps)

_COMPARISONS = frozenset({"gt", "lt", "ge", "le"})


def tolerances_below(graph: Graph, eps: float) -> list[float]:
    """The positive constants below ``eps`` that a ``while`` loop's exit test
    compares with (``while err > 1e-13``), in this graph and its sub-graphs."""
    found: list[float] = []
    for eqn in graph.eqns:
        for name, value in eqn.params:
            items = value if isinstance(value, tuple) else (value,)
            for item in items:
                if not isinstance(item, SubGraph):
                    continue
                if eqn.primitive.name == "while_loop" and name == "cond":
                    found += _compared_constants(item.graph, eps)
                found += tolerances_below(item.graph, eps)
    return sorted(set(found))


def _compared_constants(graph: Graph, eps: float) -> list[float]:
    found = []
    for eqn in graph.eqns:
        if eqn.primitive.name not in _COMPARISONS:
            continue
        for atom in eqn.inputs:
            if isinstance(atom, Lit) and np.size(atom.value) == 1:
                number = abs(float(np.asarray(atom.value).reshape(())))
                if 0 < number < eps:
                    found.append(number)
    return found


def count_equations(graph: Graph) -> int:
    """Equations of ``graph``, and of the sub-graphs in their params."""
    total = 0
    for eqn in graph.eqns:
        total += 1
        for _, value in eqn.params:
            items = value if isinstance(value, tuple) else (value,)
            for item in items:
                if isinstance(item, SubGraph):
                    total += count_equations(item.graph)
    return total


def ir_text(spec: ModuleSpec, fn: Callable[..., Any], stage: str = "traced") -> str:
    """The IR of a module at one stage, printed like a jaxpr."""
    graph = trace_spec(spec, fn)
    if stage == "traced":
        return str(graph)
    return graphs.ir_stage(spec, split_outputs(graph)[0], stage)
