"""One module's build, stage by stage: trace -> backend -> render (docs/design.md §2).

:mod:`difgen.api` drives it for a whole config; each stage is testable alone.
:func:`generate_module` marks the stages of :data:`difgen.budget.STAGES` it runs
(``trace``, ``derivatives``, ``emit``), which time limits and progress reports name.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

from difgen.budget import note, stage
from difgen.config import Config, ModuleSpec, check_output_fit
from difgen.core.ir import Graph
from difgen.derive import graphs as trace_backend
from difgen.derive import symbolic as sympy_backend
from difgen.errors import ConfigError, TraceError
from difgen.frontend import trace
from difgen.frontend.tracing import definition
from difgen.hashing import (
    BODY_HASH_PLACEHOLDER,
    body_hash,
    source_hash,
    stamp_body_hash,
)
from difgen.passes import fingerprint
from difgen.primitives import runtime as runtime_rows
from difgen.render.module import Constants, ModuleParts, render_module
from difgen.targets.c import extension as c_code
from difgen.targets.numpy import points
from difgen.version import VERSION


def trace_spec(spec: ModuleSpec, fn: Callable[..., Any]) -> Graph:
    """Trace the user's function at the configured shapes and check the output fits.

    The function is traced twice: a function that computes different constants on
    two calls (random draws, a clock, state kept between calls) would have one
    call's values baked into the generated module, so it is refused.
    """
    check_arity(spec, fn)
    avals = [(tuple(spec.input.shape), spec.input.dtype)]
    avals += [(tuple(c.shape), c.dtype) for c in spec.contexts]
    try:
        graph = trace(fn, avals)
        again = trace(fn, avals)
    except TraceError as exc:
        raise TraceError(f"module {spec.name!r} ({spec.function}): {exc}") from None
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
            f"{spec.function} returns a {out.dtype} value; expected float64",
        )
    check_output_fit(spec, tuple(out.shape))
    return graph


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


def build_parts(spec: ModuleSpec, graph: Graph) -> ModuleParts:
    """Run the configured backend on a traced graph, then add the points variants
    (``points = true``), which share the module's constants.

    When the sympy backend's expressions go over their size budget, the module is
    built from the graph instead, as the trace backend builds it with vector code
    (time linear in the graph); the module's docstring and the build's notes say so.
    """
    parts, pool = _backend_parts(spec, graph)
    if spec.points:
        with stage("points"):
            parts.functions += points.build(spec, graph, pool, parts.functions)
    return parts


def _backend_parts(spec: ModuleSpec, graph: Graph) -> tuple[ModuleParts, Constants]:
    """The configured backend's module (with the sympy budget's fallback) and the
    pool of module constants it filled (``parts.constants`` is its list)."""
    pool = Constants()
    if spec.backend == "sympy":
        runtime = sorted(
            {e.primitive.name for e in graph.eqns} & runtime_rows.RUNTIME_PRIMITIVES
        )
        if runtime:
            raise ConfigError(
                spec.config_path,
                spec.line_of("backend"),
                f"the function uses {', '.join(runtime)}: "
                + runtime_rows.RUNTIME_INDEX,
            )
        try:
            return sympy_backend.build(spec, graph, pool), pool
        except sympy_backend.ExpressionTooLarge as exc:
            # emit = "c" stays "c": the trace backend compiles the graph as C loops
            fallback = "c" if spec.emit == "c" else "vector"
            code = "C loops" if fallback == "c" else "vector code"
            note(
                f"sympy backend over its budget ({exc}); built from the graph "
                f'instead ({code}, as backend = "trace" builds it)'
            )
        pool = Constants()  # the abandoned attempt may have registered constants
        parts = trace_backend.build(
            dataclasses.replace(spec, emit=fallback), graph, pool
        )
        emission = f"{parts.emission} (from the graph: sympy over budget)"
        return dataclasses.replace(parts, emission=emission), pool
    return trace_backend.build(spec, graph, pool), pool


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
    """The stages of one module's build (see :func:`generate_files`)."""
    with stage("trace"):
        graph = trace_spec(spec, fn)
        digest = source_hash(spec, graph)  # of the graph as traced, before any backend
    # The backend differentiates, runs its passes and emits the operators' code;
    # it may mark finer stages inside this one (progress names the innermost).
    with stage("derivatives"):
        parts = build_parts(spec, graph)
    with stage("emit"):
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
    return trace_backend.ir_stage(spec, graph, stage)
