"""The trace backend: DI's operators as graphs built from the JVP and VJP transforms.

Every operator (docs/design.md, section 9) is one graph ``(x, *seeds, *contexts) ->
results``, traced from the derivative graphs of the user's function:

- derivative: a pushforward with seed 1 (forward), gradient: a pullback with seed 1
  (reverse);
- jacobian: one pushforward batched over the basis of ``x``, or one pullback batched
  over the basis of ``y``, whichever batch is smaller (or as ``mode`` forces);
- hvp: the pushforward of the gradient graph (forward-over-reverse), hessian: that
  pushforward batched over the basis of ``x``; second_derivative: the derivative of
  the derivative graph;
- pushforward / pullback in the other mode: the jacobian from the forced mode,
  contracted with the seed (shapes are static, so ``f`` never runs to learn them).

Results of one operator share one trace, so ``value_and_*`` share the primal pass
(equal equations are one). Each graph is optimized to a fixed point
(:func:`difgen.passes.optimize`) and emitted as scalar or vector code by the cost
model (:mod:`difgen.targets.choose`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import sympy as sp

from difgen import naming
from difgen.ad import build_graph, eval_graph, jvp, jvp_eval, vjp, vjp_eval, vmap_eval
from difgen.budget import note
from difgen.config import ModuleSpec
from difgen.core.batching import batched_to
from difgen.core.ir import FrozenArray, Graph
from difgen.core.tracer import Tracer, current_builder
from difgen.derive.sparsity import Coloring, PatternTooLarge, coloring_of
from difgen.derive.symbolic import (
    ExpressionTooLarge,
    lower,
    simplest_all,
    symbols,
)
from difgen.errors import ConfigError
from difgen.operators import (
    OPERATORS,
    Operator,
    result_shape,
    seed_shape,
    sparse_shape,
)
from difgen.passes import optimize
from difgen.primitives.indexing import scatter_add
from difgen.primitives.structural import basis_p
from difgen.render.module import Constants, Function, ModuleParts
from difgen.targets import choose as cost_model
from difgen.targets.c import extension as c_code
from difgen.targets.c import glue as c_glue
from difgen.targets.c import loops as c_loops
from difgen.targets.numpy import printer as vector_code
from difgen.targets.python.printer import ScalarCode, SparseResult, emit_operator
from difgen.targets.signatures import is_sparse, sparse_out

COLORING_GAIN = 2  # a dense jacobian is compressed when colors <= batch / 2

Shape = tuple[int, ...]


def _size(shape: Shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _basis(shape: Shape) -> Tracer:
    """The stacked standard basis of ``shape``, as a runtime constant (``np.eye``)."""
    builder = current_builder()
    return Tracer(builder, builder.add(basis_p, [], {"shape": tuple(shape)}))


def _or_zeros(value: Any, shape: Shape) -> Any:
    return np.zeros(shape) if value is None else value


class Derivatives:
    """The traced function, its derivative graphs (cached), and DI's results."""

    def __init__(self, spec: ModuleSpec, graph: Graph) -> None:
        self.spec = spec
        self.f = graph
        self.xs: Shape = tuple(spec.input.shape)
        self.ys: Shape = tuple(graph.outputs[0].shape)
        self._graphs: dict[tuple[str, int], Graph] = {}
        self._sources: list[Graph] = []  # keeps the ids used as cache keys alive
        self._colorings: dict[tuple[str, int], Coloring | None] = {}

    # ---------------------------------------------------------------- modes
    def mode(self, natural: str) -> str:
        """The configured mode, or ``natural`` when it is ``auto``."""
        return natural if self.spec.mode == "auto" else self.spec.mode

    def jacobian_mode(self, xs: Shape, zs: Shape) -> str:
        """Forward when the basis of x is no larger than the basis of the output."""
        return self.mode("forward" if _size(xs) <= _size(zs) else "reverse")

    # --------------------------------------------------------------- graphs
    def _cached(self, kind: str, graph: Graph) -> Graph:
        key = (kind, id(graph))
        if key not in self._graphs:
            ctx = (False,) * (len(graph.inputs) - 1)
            transform = jvp if kind == "jvp" else vjp
            self._graphs[key] = optimize(transform(graph, (True, *ctx)))
            self._sources.append(graph)
        return self._graphs[key]

    def _graph_of(self, kind: str, fn: Any) -> Graph:
        key = (kind, 0)
        if key not in self._graphs:
            avals = [(v.shape, v.dtype) for v in self.f.inputs]
            self._graphs[key] = optimize(
                build_graph(lambda *a: (fn(a[0], a[1:]),), avals)
            )
        return self._graphs[key]

    def gradient_graph(self) -> Graph:
        """``(x, *ctx) -> gradient``: the inner function of hvp and hessian."""
        mode = self.mode("reverse")
        return self._graph_of(
            "gradient",
            lambda x, ctx: np.reshape(self.jacobian(self.f, x, ctx, mode), self.xs),
        )

    def derivative_graph(self) -> Graph:
        """``(x, *ctx) -> dy/dx`` for scalar x: the inner function of d2y/dx2."""
        mode = self.mode("forward")
        return self._graph_of(
            "derivative",
            lambda x, ctx: np.reshape(self.jacobian(self.f, x, ctx, mode), self.ys),
        )

    # ----------------------------------------------------------- evaluators
    def coloring(self, g: Graph, mode: str) -> Coloring | None:
        """Pattern and coloring of ``g``'s jacobian (None when too large to detect)."""
        key = (f"coloring-{mode}", id(g))
        if key not in self._colorings:
            try:
                self._colorings[key] = coloring_of(g, by_rows=mode == "reverse")
            except PatternTooLarge:
                self._colorings[key] = None
            self._sources.append(g)
        return self._colorings[key]

    def jacobian(
        self, g: Graph, x: Any, ctx: Sequence[Any], mode: str, sparse: bool = False
    ) -> Any:
        """d out / d x of a one-output graph ``(x, *ctx)``, shaped ``zs + xs``.

        With ``sparse``, the structural nonzeros in CSR order instead. A jacobian
        whose pattern needs few colors is computed compressed: one batched
        pushforward (pullback) per color of columns (rows), not per column (row).
        """
        xs, zs = g.inputs[0].shape, g.outputs[0].shape
        n, m = _size(xs), _size(zs)
        coloring = self.coloring(g, mode) if sparse or (n > 1 and m > 1) else None
        if sparse and coloring is None:
            raise ConfigError(
                self.spec.config_path,
                self.spec.line_of("sparse"),
                f"the sparsity pattern of a {m} x {n} jacobian is too large to "
                "detect; use sparse = false",
            )
        batch = n if mode == "forward" else m
        if coloring is not None and coloring.ncolors * COLORING_GAIN <= batch:
            data = self._compressed(g, [x, *ctx], coloring, mode)
        elif sparse:
            assert coloring is not None
            dense = self._uncompressed(g, x, ctx, mode)
            data = np.reshape(dense, (m * n,))[coloring.flat_positions(n)]
        else:
            return self._uncompressed(g, x, ctx, mode)
        if sparse:
            return data
        positions = FrozenArray(coloring.flat_positions(n))
        return np.reshape(scatter_add(data, (positions,), (m * n,)), zs + xs)

    def _uncompressed(self, g: Graph, x: Any, ctx: Sequence[Any], mode: str) -> Any:
        """The jacobian from one pushforward (pullback) per basis vector, batched."""
        xs, zs = g.inputs[0].shape, g.outputs[0].shape
        n, m = _size(xs), _size(zs)
        args = [x, *ctx]
        rest = [None] * len(ctx)
        if mode == "forward":
            if n == 1:  # derivative: one pushforward with seed 1
                _, (dz,) = jvp_eval(g, args, [np.ones(xs), *rest])
                return np.reshape(_or_zeros(dz, zs), zs + xs)
            flags = [False] * len(args) + [True]
            (_, dz), (_, b) = vmap_eval(
                self._cached("jvp", g), [*args, _basis(xs)], flags, n
            )
            columns = np.reshape(batched_to(dz, b, n), (n, m))
            return np.reshape(np.transpose(columns), zs + xs)
        if m == 1:  # gradient: one pullback with seed 1
            _, (gx, *_) = vjp_eval(g, args, [np.ones(zs)])
            return np.reshape(_or_zeros(gx, xs), zs + xs)
        flags = [False] * len(args) + [True]
        (_, gx), (_, b) = vmap_eval(
            self._cached("vjp", g), [*args, _basis(zs)], flags, m
        )
        return np.reshape(batched_to(gx, b, m), zs + xs)

    def _compressed(
        self, g: Graph, args: list[Any], coloring: Coloring, mode: str
    ) -> Any:
        """The nonzeros of the jacobian from one batched JVP (VJP) per color."""
        xs, zs = g.inputs[0].shape, g.outputs[0].shape
        forward = mode == "forward"
        seeds_of, results_of = (xs, zs) if forward else (zs, xs)
        c, size = coloring.ncolors, _size(results_of)
        # seed row k: the sum of the basis vectors of color k
        seed = np.reshape(np.transpose(_basis((c,))[coloring.colors]), (c, *seeds_of))
        transformed = self._cached("jvp" if forward else "vjp", g)
        flags = [False] * len(args) + [True]
        (_, d), (_, b) = vmap_eval(transformed, [*args, seed], flags, c)
        compressed = batched_to(_or_zeros(d, results_of), b, c)
        return np.reshape(compressed, (c * size,))[coloring.compressed_positions(size)]

    def pushforward(self, x: Any, ctx: Sequence[Any], dx: Any) -> Any:
        """J dx (batched: each row of dx)."""
        return self._seeded(x, ctx, dx, forward=True)

    def pullback(self, x: Any, ctx: Sequence[Any], dy: Any) -> Any:
        """dy J (batched: each row of dy)."""
        return self._seeded(x, ctx, dy, forward=False)

    def _seeded(self, x: Any, ctx: Sequence[Any], seed: Any, forward: bool) -> Any:
        """J seed (forward) or seed J (reverse). In its own mode, one JVP (VJP),
        batched over the seeds' leading axis; in the other mode, the jacobian from
        the mode forced, contracted with the seed (the shapes are static)."""
        k, n, m = self.spec.batch, _size(self.xs), _size(self.ys)
        natural, other = ("forward", "reverse") if forward else ("reverse", "forward")
        size_in, out_shape = (n, self.ys) if forward else (m, self.xs)
        args = [x, *ctx]
        if self.mode(natural) == natural:
            if k == 1 and forward:
                _, (d,) = jvp_eval(self.f, args, [seed, *[None] * len(ctx)])
                return _or_zeros(d, out_shape)
            if k == 1:
                _, (d, *_) = vjp_eval(self.f, args, [seed])
                return _or_zeros(d, out_shape)
            flags = [False] * len(args) + [True]
            transformed = self._cached("jvp" if forward else "vjp", self.f)
            (_, d), (_, b) = vmap_eval(transformed, [*args, seed], flags, k)
            return batched_to(d, b, k)
        J = np.reshape(self.jacobian(self.f, x, ctx, other), (m, n))
        linear = J if forward else np.transpose(J)  # maps the seed to the result
        if k == 1:
            return np.reshape(linear @ np.reshape(seed, (size_in,)), out_shape)
        seeds = np.reshape(seed, (k, size_in))
        return np.reshape(seeds @ np.transpose(linear), (k, *out_shape))

    def hvp(self, x: Any, ctx: Sequence[Any], v: Any) -> Any:
        """H v: forward-over-reverse (reverse-over-reverse when mode is reverse)."""
        grad = self.gradient_graph()
        args = [x, *ctx]
        if self.spec.mode == "reverse":  # H is symmetric: H^T v = H v
            _, (hv, *_) = vjp_eval(grad, args, [v])
        else:
            _, (hv,) = jvp_eval(grad, args, [v, *[None] * len(ctx)])
        return _or_zeros(hv, self.xs)

    def result(
        self, kind: str, x: Any, ctx: Sequence[Any], seeds: dict[str, Any]
    ) -> Any:
        """One result kind of the operator table."""
        if kind == "value":
            return eval_graph(self.f, [x, *ctx])[0]
        if kind == "jvp":
            return self.pushforward(x, ctx, seeds["dx"])
        if kind == "vjp":
            return self.pullback(x, ctx, seeds["dy"])
        if kind == "derivative":
            return self.jacobian(self.f, x, ctx, self.mode("forward"))
        if kind == "gradient":
            return self.jacobian(self.f, x, ctx, self.mode("reverse"))
        sparse = is_sparse(kind, self.spec)
        if kind == "jacobian":
            mode = self.jacobian_mode(self.xs, self.ys)
            return self.jacobian(self.f, x, ctx, mode, sparse)
        if kind == "second_derivative":
            return self.jacobian(self.derivative_graph(), x, ctx, self.mode("forward"))
        if kind == "hvp":
            return self.hvp(x, ctx, seeds["v"])
        if kind == "hessian":
            outer = "reverse" if self.spec.mode == "reverse" else "forward"
            return self.jacobian(self.gradient_graph(), x, ctx, outer, sparse)
        raise ValueError(f"unknown result kind {kind!r}")

    def sparse_layout(self, kind: str) -> tuple[Coloring, tuple[int, int]] | None:
        """The CSR pattern of a sparse result kind (None for dense results)."""
        if not is_sparse(kind, self.spec):
            return None
        if kind == "jacobian":
            g, mode = self.f, self.jacobian_mode(self.xs, self.ys)
        else:
            g = self.gradient_graph()
            mode = "reverse" if self.spec.mode == "reverse" else "forward"
        coloring = self.coloring(g, mode)
        assert coloring is not None  # jacobian() raised a ConfigError otherwise
        return coloring, sparse_shape(kind, self.xs, self.ys)

    def shape_of(self, kind: str) -> Shape:
        """A result's shape in the operator graph: (nnz,) for sparse results."""
        layout = self.sparse_layout(kind)
        if layout is not None:
            return (layout[0].nnz,)
        return result_shape(kind, self.xs, self.ys, self.spec.batch)

    def operator_graph(self, op: Operator, passes: bool = True) -> Graph:
        """``(x, *seeds, *contexts) -> results`` of one operator."""
        spec, k = self.spec, self.spec.batch
        avals = [(self.xs, "float64")]
        avals += [(seed_shape(s, self.xs, self.ys, k), "float64") for s in op.seeds]
        avals += [(tuple(c.shape), c.dtype) for c in spec.contexts]
        nseeds = len(op.seeds)

        def fn(x: Any, *rest: Any) -> tuple[Any, ...]:
            seeds, ctx = dict(zip(op.seeds, rest[:nseeds])), rest[nseeds:]
            return tuple(
                np.reshape(self.result(kind, x, ctx, seeds), self.shape_of(kind))
                for kind in op.results
            )

        graph = build_graph(fn, avals)
        return optimize(graph) if passes else graph


# -------------------------------------------------------------------- emission
Layouts = dict[int, tuple[Coloring, tuple[int, int]]]


def _csr_wrappers(
    op: Operator, layouts: Layouts, pool: Constants
) -> dict[int, vector_code.CsrFormat]:
    """How each sparse result's data becomes a CSR array."""
    return {
        i: vector_code.csr_format(op.results[i], *coloring.csr_indices(), shape, pool)
        for i, (coloring, shape) in layouts.items()
    }


def _scalar_function(
    op: Operator,
    spec: ModuleSpec,
    ys: Shape,
    graph: Graph,
    pool: Constants,
    layouts: Layouts,
) -> tuple[Function, float]:
    """Straight-line float code: the graph lowered to SymPy (no diff), then cse.

    Values (``f``, the value of ``value_and_*``) are lowered exactly (unevaluated):
    SymPy's simplifications hold for finite values only and would change NumPy's
    NaN or inf. Derivative results take the simpler of SymPy's forms.
    """
    data = [c.name for c in spec.contexts if c.dtype != "float64"]
    if data:  # scalar code unpacks arguments into floats
        raise NotImplementedError(
            f"int64 and bool contexts ({', '.join(data)}) are checked and used as "
            "arrays of their dtype, which only vector code does"
        )
    names = [naming.INPUT, *op.seeds, *(c.name for c in spec.contexts)]
    arrays = {name: symbols(name, v.shape) for name, v in zip(names, graph.inputs)}
    args = [arrays[n] for n in names]
    exact = lower(graph, args, exact=True) if "value" in op.results else []
    results: list[Any] = [  # object arrays; the sparse ones become SparseResult
        exact[i] if kind == "value" else simplest_all(r)
        for i, (kind, r) in enumerate(zip(op.results, lower(graph, args)))
    ]
    flat = [e for r in results for e in r.ravel()]
    temps, reduced = sp.cse(flat, order="canonical")
    ops = sum(sp.count_ops(e) for _, e in temps) + sum(sp.count_ops(e) for e in reduced)
    used = set().union(
        *(sp.sympify(e).free_symbols for _, e in temps),
        *(sp.sympify(e).free_symbols for e in reduced),
    )
    read = [a for a in arrays.values() if a.ndim and any(s in used for s in a.ravel())]
    elements = sum(a.size for a in read)
    cost = cost_model.scalar_cost(
        int(ops), elements, len(read), [r.shape for r in results]
    )
    for i, (coloring, shape) in layouts.items():
        indices, indptr = coloring.csr_indices()
        results[i] = SparseResult(results[i].ravel(), indices, indptr, shape)
    code = ScalarCode(arrays=arrays, order=names, results=results, constants=pool)
    emit = c_code.emit_operator if spec.emit == "c" else emit_operator
    return emit(op, spec, ys, code), cost


def _emit(
    op: Operator,
    spec: ModuleSpec,
    ys: Shape,
    graph: Graph,
    pool: Constants,
    layouts: Layouts,
) -> tuple[Function, str]:
    """The operator in the configured emission, or the cheaper by the cost model.

    With ``emit = "auto"``, SymPy is asked only when the graph alone says scalar
    code is worth trying (:func:`cost_model.scalar_reason`), and an expression that
    grows past its budget while being lowered stops the attempt: the operator is
    then vector code, and the build says why (:func:`difgen.budget.note`).
    ``emit = "c"``: see :func:`_emit_c`.
    """
    if spec.emit == "c":
        return _emit_c(op, spec, ys, graph, pool, layouts)
    forced = spec.emit == "scalar"
    reason = cost_model.scalar_reason(graph) if spec.emit == "auto" else None
    if spec.emit == "auto" and reason is not None and _plausible(graph):
        note(f"{op.name}: vector code, not scalar: {reason}")
    if forced or (spec.emit == "auto" and reason is None):
        try:
            function, cost = _scalar_function(op, spec, ys, graph, pool, layouts)
        except (NotImplementedError, ExpressionTooLarge, RecursionError) as exc:
            if isinstance(exc, RecursionError):  # SymPy recurses once per nesting
                exc = NotImplementedError("its expressions nest too deeply for SymPy")
            if forced:
                raise ConfigError(
                    spec.config_path,
                    spec.line_of("emit"),
                    f'emit = "{spec.emit}" cannot scalarize {op.name}: {exc}; '
                    'use "auto"',
                ) from None
            if isinstance(exc, ExpressionTooLarge):
                note(f"{op.name}: vector code, not scalar: {exc}")
        else:
            if forced or cost <= cost_model.vector_cost(graph):
                return function, "scalar"
    wrap = _csr_wrappers(op, layouts, pool)
    return vector_code.emit_operator(op, spec, ys, graph, pool, wrap), "vector"


def _emit_c(
    op: Operator,
    spec: ModuleSpec,
    ys: Shape,
    graph: Graph,
    pool: Constants,
    layouts: Layouts,
) -> tuple[Function, str]:
    """``emit = "c"``: straight-line C for tiny graphs (at most
    :data:`c_loops.STRAIGHT_LINE_WORK` elements of work, within the scalar budgets
    of :func:`cost_model.scalar_reason`), else C loops over the graph
    (:mod:`difgen.targets.c.loops`), whose Python fallback is the vector emission.

    Measured (docs/design.md, section 10): straight-line code wins by tens of
    nanoseconds where SymPy folds the graph (the seed: 0.11 vs 0.14 us); from a
    few hundred elements of work loops are faster (Rosenbrock n=100 gradient 0.50
    vs 0.76 us, hessian 7.0 vs 12.4 us) and compile 4x faster. ``points = true``
    makes the same choice: the points loop runs the one-point operator's code, and
    over 10^4 points the Rosenbrock gradient's loops match or beat straight-line
    code at every size measured (``scripts/points_straight_or_loops.py``: 0.12 vs
    0.15 ms at n=10, 0.25 vs 0.44 at n=20, 1.00 vs 1.66 at n=100), so straight-line
    code is kept only where it serves the one-point call. A graph with a primitive
    that has no loop form keeps the operator in Python (vector code), and the build
    says so."""
    c_code.check_names(spec)
    small = cost_model.work(graph) <= c_loops.STRAIGHT_LINE_WORK
    if small and cost_model.scalar_reason(graph) is None:
        try:
            function, _ = _scalar_function(op, spec, ys, graph, pool, layouts)
            return function, "scalar"
        except (NotImplementedError, ExpressionTooLarge, RecursionError, ConfigError):
            pass  # loops print any graph the scalar emission cannot
    wrap = _csr_wrappers(op, layouts, pool)
    function = vector_code.emit_operator(op, spec, ys, graph, pool, wrap)
    last = layouts.get(len(op.results) - 1)
    pattern = (*last[0].csr_indices(), last[1]) if last is not None else None
    try:
        body = c_loops.loop_body(op, spec, ys, graph)
    except c_loops.NoLoopForm as exc:
        note(f"{op.name}: kept in Python (vector code): no C loop form for {exc}")
        return function, "vector"
    native, doc = c_loops.c_loops_function(body, len(graph.eqns), pattern)
    points = c_loops.points_native(op, spec, ys, body) if spec.points else None
    return (
        Function(
            function.name,
            function.signature,
            function.returns,
            function.doc,
            function.body,
            function.checked,
            native=native,
            native_doc=doc + function.doc,
            wrappers=c_glue.csr_helpers(op.results, wrap, sparse_out(op, spec)),
            native_points=points,
        ),
        "vector",
    )


def _plausible(graph: Graph) -> bool:
    """Whether scalar code would have been tried before its size budget existed
    (small, no factorization): only then is skipping it news worth a note."""
    return cost_model.work(graph) <= cost_model.SCALAR_LIMIT and all(
        e.primitive.scalarizable for e in graph.eqns
    )


def _label(kinds: dict[str, str]) -> str:
    if len(set(kinds.values())) == 1:
        return next(iter(kinds.values()))
    parts = []
    for emission in ("scalar", "vector"):
        names = ", ".join(n for n, e in kinds.items() if e == emission)
        parts.append(f"{emission} ({names})")
    return " and ".join(parts)


def build(spec: ModuleSpec, graph: Graph, pool: Constants | None = None) -> ModuleParts:
    """Emit ``f`` and every requested operator (module constants go to ``pool``)."""
    derivs = Derivatives(spec, graph)
    pool = Constants() if pool is None else pool
    functions: list[Function] = []
    kinds: dict[str, str] = {}
    for name in ("f", *spec.operators):
        op = OPERATORS[name]
        graph_of_op = derivs.operator_graph(op)
        layouts = {
            i: layout
            for i, kind in enumerate(op.results)
            if (layout := derivs.sparse_layout(kind)) is not None
        }
        function, kinds[name] = _emit(op, spec, derivs.ys, graph_of_op, pool, layouts)
        functions.append(function)
    return ModuleParts(
        functions=functions,
        output_shape=derivs.ys,
        emission=_label(kinds),
        constants=pool.items,
        setup=pool.setup,
    )


STAGES = ("jvp", "vjp", "<operator>", "<operator>:unoptimized", "all")


def ir_stage(spec: ModuleSpec, graph: Graph, stage: str) -> str:
    """The IR at one stage: ``jvp`` or ``vjp`` of the traced function, an operator's
    graph after the passes (``gradient``) or before them (``gradient:unoptimized``),
    or ``all`` of these for the module's operators."""
    derivs = Derivatives(spec, graph)
    ctx = (False,) * (len(graph.inputs) - 1)
    if stage == "jvp":
        return str(jvp(graph, (True, *ctx)))
    if stage == "vjp":
        return str(vjp(graph, (True, *ctx)))
    if stage == "all":
        sections = [f"# traced\n{graph}"]
        sections.extend(
            f"# {name}\n{ir_stage(spec, graph, name)}" for name in ("jvp", "vjp")
        )
        for name in ("f", *spec.operators):
            for suffix in (":unoptimized", ""):
                text = ir_stage(spec, graph, name + suffix)
                sections.append(f"# {name}{suffix}\n{text}")
        return "\n\n".join(sections)
    name, _, suffix = stage.partition(":")
    if name in OPERATORS and suffix in ("", "unoptimized"):
        return str(derivs.operator_graph(OPERATORS[name], passes=not suffix))
    raise ConfigError(
        spec.config_path,
        None,
        f"unknown IR stage {stage!r}; expected traced, {', '.join(STAGES)} "
        f"(an operator is one of: f, {', '.join(spec.operators)})",
    )
