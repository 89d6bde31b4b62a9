"""The data flow of DESIGN.md, one stage per call: config -> load -> trace -> backend
-> operators -> emit. ``difgen.cli`` drives it; each stage is testable alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from difgen.config import Config, ModuleSpec, check_output_fit
from difgen.emit.render import ModuleParts, render_module
from difgen.errors import ConfigError, TraceError
from difgen.frontend.tracer import trace
from difgen.hashing import source_hash
from difgen.ir import Graph

STAGES = ("traced",)


def trace_spec(spec: ModuleSpec, fn: Callable[..., Any]) -> Graph:
    """Trace the user's function at the configured shapes and check the output fits."""
    avals = [(tuple(spec.input.shape), spec.input.dtype)]
    avals += [(tuple(c.shape), c.dtype) for c in spec.contexts]
    try:
        graph = trace(fn, avals)
    except TraceError as exc:
        raise TraceError(f"module {spec.name!r} ({spec.function}): {exc}") from None
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


def build_parts(spec: ModuleSpec, graph: Graph) -> ModuleParts:
    """Run the configured backend on a traced graph."""
    if spec.backend == "sympy":
        from difgen.backends import sympy_backend

        return sympy_backend.build(spec, graph)
    from difgen.backends import trace_backend

    return trace_backend.build(spec, graph)


def generate_module(spec: ModuleSpec, config: Config, fn: Callable[..., Any]) -> str:
    """The complete text of the generated module for one config entry."""
    graph = trace_spec(spec, fn)
    digest = source_hash(spec, graph)  # of the graph as traced, before any backend
    parts = build_parts(spec, graph)
    return render_module(spec, config, parts, digest)


def ir_text(spec: ModuleSpec, fn: Callable[..., Any], stage: str = "traced") -> str:
    """The IR of a module at one stage, printed like a jaxpr."""
    graph = trace_spec(spec, fn)
    if stage == "traced":
        return str(graph)
    from difgen.backends import trace_backend

    return trace_backend.ir_stage(spec, graph, stage)
