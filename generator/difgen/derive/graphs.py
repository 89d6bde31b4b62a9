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
model (:mod:`difgen.targets.cost`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from difgen.ad import build_graph, eval_graph, jvp, jvp_eval, vjp, vjp_eval, vmap_eval
from difgen.ad.custom import inline_calls
from difgen.budget import note, notes
from difgen.config import ModuleSpec
from difgen.core.batching import batched_to
from difgen.core.builder import current_builder
from difgen.core.ir import FrozenArray, Graph
from difgen.core.tracer import Tracer
from difgen.derive.sparsity import (
    Coloring,
    PatternTooLarge,
    coloring_of,
    hessian_coloring_of,
    jacobian_coloring_of,
)
from difgen.errors import ConfigError
from difgen.operators import (
    OPERATORS,
    Operator,
    is_sparse,
    result_shape,
    seed_shape,
    sparse_shape,
)
from difgen.passes import optimize
from difgen.primitives.indexing import scatter_add
from difgen.primitives.structural import basis_p

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
        self._too_large: dict[int, str] = {}  # why a graph's pattern was refused
        self.colorings_used: dict[str, str] = {}  # result kind -> its coloring

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
    def coloring(
        self, g: Graph, mode: str, symmetric: bool = False, choose: bool = False
    ) -> Coloring | None:
        """Pattern and coloring of ``g``'s jacobian (None when too large to detect);
        ``symmetric`` for a hessian (``g`` a gradient graph), which may be star
        or acyclic colored; ``choose`` to take the mode needing the fewest
        colors (``mode`` the natural one, kept on a tie)."""
        kind = "-symmetric" if symmetric else "-choose" if choose else ""
        key = (f"coloring-{mode}{kind}", id(g))
        if key not in self._colorings:
            try:
                if symmetric:
                    acyclic = self.spec.emit != "c" or ACYCLIC_IN_C
                    found = hessian_coloring_of(g, mode == "reverse", acyclic)
                elif choose:
                    found = jacobian_coloring_of(g, mode)
                else:
                    found = coloring_of(g, by_rows=mode == "reverse")
                self._colorings[key] = found
            except PatternTooLarge as exc:
                self._colorings[key] = None
                self._too_large[id(g)] = str(exc)
            self._sources.append(g)
        return self._colorings[key]

    def jacobian(
        self,
        g: Graph,
        x: Any,
        ctx: Sequence[Any],
        mode: str,
        sparse: bool = False,
        symmetric: bool = False,
        label: str | None = None,
    ) -> Any:
        """d out / d x of a one-output graph ``(x, *ctx)``, shaped ``zs + xs``.

        With ``sparse``, the structural nonzeros in CSR order instead. A jacobian
        whose pattern needs few colors is computed compressed: one batched
        pushforward (pullback) per color of columns (rows), not per column (row);
        with ``symmetric`` (a hessian), per star or acyclic color when that needs
        fewer. A result ``label`` (``jacobian``) takes the mode, or both, whose
        coloring needs the fewest products when the module's mode is auto, and
        records the coloring it used in :attr:`colorings_used`.
        """
        xs, zs = g.inputs[0].shape, g.outputs[0].shape
        n, m = _size(xs), _size(zs)
        colored = sparse or (n > 1 and m > 1)
        choose = label == "jacobian" and self.spec.mode == "auto"
        coloring = self.coloring(g, mode, symmetric, choose) if colored else None
        if sparse and coloring is None:
            raise self._pattern_too_large(g, m, n)
        batch = n if mode == "forward" else m  # uncompressed, in the natural mode
        if coloring is not None and coloring.ncolors * COLORING_GAIN <= batch:
            if label is not None:
                self.colorings_used[label] = coloring.describe()
            if coloring.mode == "both":
                data = self._bidirectional(g, [x, *ctx], coloring)
            else:
                cmode = mode if symmetric else coloring.mode
                data = self._compressed(g, [x, *ctx], coloring, cmode)
        elif sparse:
            assert coloring is not None
            if label is not None:
                self.colorings_used[label] = (
                    f"uncompressed, {batch} products ({coloring.describe()} "
                    "would not halve them)"
                )
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
        flat = np.reshape(compressed, (c * size,))
        if coloring.acyclic is not None:
            return _substituted(flat, coloring)
        return flat[coloring.compressed_positions(size)]

    def _products(
        self, g: Graph, args: list[Any], colors: np.ndarray, forward: bool
    ) -> Any:
        """One batched JVP (VJP) per color, seeded by the basis vectors of that
        color (``-1``: in no seed), flattened ``(colors, results)``."""
        xs, zs = g.inputs[0].shape, g.outputs[0].shape
        seeds_of, results_of = (xs, zs) if forward else (zs, xs)
        c = int(colors.max()) + 1
        spread = np.where(colors < 0, c, colors)  # -1: the dropped extra color
        rows = _basis((c + 1,))[spread][:, :c]
        seed = np.reshape(np.transpose(rows), (c, *seeds_of))
        transformed = self._cached("jvp" if forward else "vjp", g)
        flags = [False] * len(args) + [True]
        (_, d), (_, b) = vmap_eval(transformed, [*args, seed], flags, c)
        compressed = batched_to(_or_zeros(d, results_of), b, c)
        return np.reshape(compressed, (c * _size(results_of),))

    def _bidirectional(self, g: Graph, args: list[Any], coloring: Coloring) -> Any:
        """The nonzeros of a bidirectionally colored jacobian: the forward
        products of the column colors and the reverse products of the row
        colors, gathered."""
        b = coloring.bicoloring
        assert b is not None
        products = [
            self._products(g, args, colors, forward)
            for colors, forward in ((b.column_colors, True), (b.row_colors, False))
            if (colors >= 0).any()
        ]
        flat = products[0] if len(products) == 1 else np.concatenate(products)
        return flat[coloring.bidirectional_positions()]

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
            return self.jacobian(self.f, x, ctx, mode, sparse, label="jacobian")
        if kind == "second_derivative":
            return self.jacobian(self.derivative_graph(), x, ctx, self.mode("forward"))
        if kind == "hvp":
            return self.hvp(x, ctx, seeds["v"])
        if kind == "hessian":
            outer = "reverse" if self.spec.mode == "reverse" else "forward"
            return self.jacobian(
                self.gradient_graph(), x, ctx, outer, sparse, True, label="hessian"
            )
        raise ValueError(f"unknown result kind {kind!r}")

    def sparse_layout(self, kind: str) -> tuple[Coloring, tuple[int, int]] | None:
        """The CSR pattern of a sparse result kind (None for dense results)."""
        if not is_sparse(kind, self.spec):
            return None
        choose = kind == "jacobian" and self.spec.mode == "auto"
        if kind == "jacobian":
            g, mode = self.f, self.jacobian_mode(self.xs, self.ys)
        else:
            g = self.gradient_graph()
            mode = "reverse" if self.spec.mode == "reverse" else "forward"
        coloring = self.coloring(g, mode, kind == "hessian", choose)
        if coloring is None:
            raise self._pattern_too_large(g, _size(g.outputs[0].shape), _size(self.xs))
        return coloring, sparse_shape(kind, self.xs, self.ys)

    def _pattern_too_large(self, g: Graph, m: int, n: int) -> ConfigError:
        return ConfigError(
            self.spec.config_path,
            self.spec.line_of("sparse"),
            f"the sparsity pattern of a {m} x {n} jacobian is too large to "
            f"detect ({self._too_large.get(id(g), '?')}); use sparse = false",
        )

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

        # every derivative is taken: user rules' calls become their functions
        graph = inline_calls(build_graph(fn, avals))
        return optimize(graph) if passes else graph


ACYCLIC_IN_C = False
"""Whether ``emit = "c"`` hessians take an acyclic coloring where it needs fewer
colors. The C loops compute its substitution (a scan, ``cumsum``'s loop form),
but measured slower than the star or distance-1 coloring with more colors: a
star recovery reads each nonzero from one compressed product and the C
computes it at the nonzeros only (on demand), where the substitution runs over
the whole compressed products, gathers and scans them (n = 2000, emit = "c",
hessian into ``out=``: a tridiagonal 180 us with 2 acyclic colors against 152 us
with 3, a 50 x 40 grid 554 us with 4 against 156 us with 6, on a loaded
machine). Tests set it to compile acyclic hessians."""


def _substituted(flat: Any, coloring: Coloring) -> Any:
    """The nonzeros of an acyclically colored hessian from its compressed
    products ``flat`` (``(colors, n)`` flattened), by substitution in the
    two-colored trees: alternating subtree sums, as one cumulative sum over the
    trees' nodes in preorder (:class:`~difgen.derive.coloring.AcyclicTables`)."""
    t = coloring.acyclic
    assert t is not None
    b = np.concatenate([flat, np.zeros(1)])
    sums = np.concatenate([np.zeros(1), np.cumsum(b[t.gather] * t.signs, axis=0)])
    edges = (sums[t.ends] - sums[t.starts]) * t.signs
    return np.concatenate([b, edges])[t.positions]


Layouts = dict[int, tuple[Coloring, tuple[int, int]]]
"""The CSR pattern (coloring, matrix shape) of each sparse result, by its index."""


@dataclass(frozen=True)
class OperatorGraph:
    """One operator derived: ``(x, *seeds, *contexts) -> results``, optimized, and
    the pattern of each of its sparse results."""

    op: Operator
    graph: Graph
    layouts: Layouts


@dataclass(frozen=True)
class GraphDerivation:
    """The trace backend's derivation of a module: ``f`` and every requested
    operator as graphs, in table order, and the traced function's output shape."""

    operators: tuple[OperatorGraph, ...]
    output_shape: Shape
    derivatives: Derivatives


def derive(spec: ModuleSpec, graph: Graph) -> GraphDerivation:
    """The graph of ``f`` and of every operator the module asks for."""
    derivs = Derivatives(spec, graph)
    operators = []
    for name in ("f", *spec.operators):
        op = OPERATORS[name]
        layouts = {
            i: layout
            for i, kind in enumerate(op.results)
            if (layout := derivs.sparse_layout(kind)) is not None
        }
        operators.append(OperatorGraph(op, derivs.operator_graph(op), layouts))
    used = "; ".join(f"{k}: {text}" for k, text in derivs.colorings_used.items())
    if used and used not in notes():  # derived again after a fallback
        note(used)
    return GraphDerivation(tuple(operators), derivs.ys, derivs)


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
