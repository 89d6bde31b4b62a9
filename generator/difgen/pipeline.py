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
from typing import Any

from difgen import precision
from difgen.ad.loops import ReverseOverReverse
from difgen.budget import note, stage
from difgen.config import Config, ModuleSpec, check_output_fit
from difgen.core.ir import Graph
from difgen.derive import graphs, points, symbolic
from difgen.derive.checks import IndexCheck, index_checks
from difgen.derive.graphs import GraphDerivation
from difgen.derive.lowering import ExpressionTooLarge
from difgen.derive.points import PointsGraphs
from difgen.derive.symbolic import SymbolicDerivation
from difgen.errors import ConfigError, TraceError
from difgen.frontend import control, trace
from difgen.frontend.tracing import definition
from difgen.hashing import (
    BODY_HASH_PLACEHOLDER,
    body_hash,
    source_hash,
    stamp_body_hash,
)
from difgen.passes import fingerprint
from difgen.primitives import runtime as runtime_rows
from difgen.render.module import render_module
from difgen.targets import choose
from difgen.targets.c import extension as c_code
from difgen.targets.numpy import points as numpy_points
from difgen.targets.parts import Constants, ModuleParts
from difgen.version import VERSION


def trace_spec(spec: ModuleSpec, fn: Callable[..., Any]) -> Graph:
    """Trace the user's function at the configured shapes and check the output fits.

    The function is traced twice: a function that computes different constants on
    two calls (random draws, a clock, state kept between calls) would have one
    call's values baked into the generated module, so it is refused.
    """
    check_arity(spec, fn)
    # The IR has one float type: a float32 module is traced like a float64 one and
    # computes in float32 in the code printed for it (difgen.precision).
    avals = [(tuple(spec.input.shape), _traced_dtype(spec.input.dtype))]
    avals += [(tuple(c.shape), _traced_dtype(c.dtype)) for c in spec.contexts]
    # the sympy backend has no loop form: its static loops unroll, as they always did
    unrolled = control.unrolling() if spec.backend == "sympy" else nullcontext()
    try:
        with unrolled, precision.computing_in(spec.input.dtype):
            graph = trace(fn, avals)
            again = trace(fn, avals)
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
    if len(graph.outputs) != 1:
        raise ConfigError(
            spec.config_path,
            spec.line_of("function"),
            f"{spec.function} returns {len(graph.outputs)} values; expected one array",
        )
    out = graph.outputs[0]
    if out.dtype != "float64":
        raise ConfigError(
            spec.config_path,
            spec.line_of("function"),
            f"{spec.function} returns a {out.dtype} value; expected "
            f"{spec.input.dtype}",
        )
    check_output_fit(spec, tuple(out.shape))
    return graph


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
    names = ["x", *(c.name for c in spec.contexts)]
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # no signature to check: calling it says what is wrong
    try:
        signature.bind(*names)
    except TypeError as exc:
        key = "contexts" if spec.contexts else "function"
        given = ", ".join(f"{n} (context)" for n in names[1:])
        raise ConfigError(
            spec.config_path,
            spec.line_of(key),
            f"{spec.function} takes {signature}, but difgen calls it with the input"
            f"{' and ' + given if given else ' alone'} ({exc}); list one context "
            "per parameter after the input, in order",
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
    points variants' graphs.

    When the sympy backend's expressions go over their size budget, the module is
    derived from the graph instead, as the trace backend derives it, and printed as
    vector code (C loops with ``emit = "c"``): time linear in the graph; the
    module's docstring and the build's notes say so.
    """
    module: SymbolicDerivation | GraphDerivation
    fallback = False
    if spec.backend == "sympy":
        _refuse_runtime_data(spec, graph)
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
    return Derivation(spec, module, points_graphs, fallback, checks)


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


def print_parts(derivation: Derivation) -> ModuleParts:
    """Every operator printed in the emission chosen for it, then the points
    variants, all sharing one pool of module constants."""
    spec, module, pool = derivation.spec, derivation.module, Constants()
    if isinstance(module, SymbolicDerivation):
        parts = choose.print_symbolic(spec, module, pool)
    else:
        parts = choose.print_graphs(spec, module, pool)
    if derivation.fallback:
        emission = f"{parts.emission} (from the graph: {derivation.why})"
        parts = dataclasses.replace(parts, emission=emission)
    parts.index_checks = derivation.index_checks
    if derivation.points:
        parts.functions += numpy_points.build(
            spec, derivation.points, module.output_shape, pool, parts.functions
        )
        parts = dataclasses.replace(parts, constants=pool.items, setup=pool.setup)
    return parts


def build_parts(spec: ModuleSpec, graph: Graph) -> ModuleParts:
    """The module's printed parts from its traced graph (derive, then print)."""
    with precision.computing_in(spec.input.dtype, spec.accumulate):
        return print_parts(derive(spec, graph))


def generate_module(spec: ModuleSpec, config: Config, fn: Callable[..., Any]) -> str:
    """The complete text of the generated module for one config entry."""
    return _generate(spec, config, fn)[0][1]


def generate_files(
    spec: ModuleSpec, config: Config, fn: Callable[..., Any]
) -> list[tuple[str, str]]:
    """``(file suffix, text)`` of every file of one config entry: the module
    (``".py"``), and with ``emit = "c"`` also its C source (``"__c.c"``), whose
    ``BODY_HASH`` the module records as ``C_HASH``."""
    if spec.emit != "c":
        return [(".py", generate_module(spec, config, fn))]
    return _generate(spec, config, fn)


def _generate(
    spec: ModuleSpec, config: Config, fn: Callable[..., Any]
) -> list[tuple[str, str]]:
    """The stages of one module's build (see :func:`generate_files`), the print
    and render stages in the module's float type."""
    with precision.computing_in(spec.input.dtype, spec.accumulate):
        return _stages(spec, config, fn)


def _stages(
    spec: ModuleSpec, config: Config, fn: Callable[..., Any]
) -> list[tuple[str, str]]:
    with stage("trace"):
        graph = trace_spec(spec, fn)
        digest = source_hash(spec, graph)  # of the graph as traced, before any backend
    # Derivation may mark finer stages inside this one (progress names the innermost).
    with stage("derive"):
        try:
            derivation = derive(spec, graph)
        except ReverseOverReverse:
            with control.unrolling():
                again = trace_spec(spec, fn)
            if fingerprint(again) == fingerprint(graph):
                raise  # no static loop to unroll: a loop on a traced condition
            note(
                f"{spec.function}: reverse mode over reverse cannot go through a "
                "loop's adjoint, so every static `for` loop is unrolled"
            )
            graph, digest = again, source_hash(spec, again)
            derivation = derive(spec, graph)
    with stage("print"):
        try:
            parts = print_parts(derivation)
        except c_code.NoCForm as exc:
            if not isinstance(derivation.module, SymbolicDerivation):
                raise
            # a function only Python computes (SciPy's digamma): as over budget,
            # the graph's C loops, with the operators they cannot hold in Python
            note(
                f"sympy backend: {exc.reason}; built from the graph instead "
                '(C loops, as backend = "trace" builds it)'
            )
            derivation = dataclasses.replace(
                derivation,
                module=graphs.derive(derivation.spec, graph),
                fallback=True,
                why="no C form",
            )
            parts = print_parts(derivation)
    with stage("render"):
        if spec.emit != "c":
            return [(".py", render_module(spec, config, parts, digest))]
        c_text = stamp_body_hash(
            c_code.render_c_module(
                spec, parts.functions, VERSION, digest, BODY_HASH_PLACEHOLDER
            )
        )
        c_hash = body_hash(c_text)
        py_text = render_module(spec, config, parts, digest, c_hash=c_hash)
        return [(".py", py_text), (c_code.SUFFIX + ".c", c_text)]


def ir_text(spec: ModuleSpec, fn: Callable[..., Any], stage: str = "traced") -> str:
    """The IR of a module at one stage, printed like a jaxpr."""
    graph = trace_spec(spec, fn)
    if stage == "traced":
        return str(graph)
    return graphs.ir_stage(spec, graph, stage)
