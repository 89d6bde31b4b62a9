"""Points variants (``points = true``): each operator at k points in one NumPy call.

``gradient_points(x)`` takes ``x`` of shape ``(k, *input.shape)`` for any ``k`` and
returns what ``gradient`` returns at each point, stacked. For an operator printed
as vector code, the operator's graph from the trace backend
(:meth:`difgen.derive.graphs.Derivatives.operator_graph`) is batched over a
leading axis by the vmap transform (each primitive's ``batch`` rule) and emitted as
vector code, so no Python loop runs over the points. An operator printed as
straight-line code (either backend) evaluates its own expressions on columns of
points instead (:mod:`difgen.targets.numpy.columns`): the batched graph is another
computation than SymPy's simplified derivatives, and put NaN and inf in other
places than the one-point code at 0, the infinities and overflowing points.

The number of points is not known at build time, and shapes in the IR are static.
The batched graph is therefore built at a sentinel size, and the printer is given
it as the points axis (:class:`~difgen.targets.numpy.printer.PointsAxis`): every
shape, size and slice bound equal to it prints as ``npoints`` (read from
``x.shape[0]`` at run time), so no text is rewritten after printing. As a check,
the graph is also batched and printed at a second sentinel size: the two texts,
module constants and import-time values must be equal. Code in which the number
of points enters any other way (a product like ``3 * k`` in a reshape, index
arrays over the stacked points) prints a plain number that differs between the
two, and the build refuses it at the ``points`` key rather than emit code valid
for one ``k``.

Many points are evaluated in blocks (:func:`block_size`): each vectorized NumPy
operation streams its operands' whole length through memory, so on 10^4 points
the temporaries of one call outgrow the CPU's cache and every operation waits for
memory (``python -m benchmarks.calibration`` times a points variant per point by
block size). The variant's body is a
private function of one block (``_gradient_points_block``) that the public one
calls once when the points fit one block, and otherwise on each block in turn,
writing its rows into results allocated once. The points are independent, so
blocks change no arithmetic: the results are those of the single call, bit for bit.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from difgen import naming, precision
from difgen.budget import note
from difgen.config import ModuleSpec
from difgen.core.ir import Graph, Lit, Var
from difgen.derive.points import PointsGraphs
from difgen.errors import ConfigError
from difgen.operators import Operator, Shape
from difgen.targets.numpy import columns
from difgen.targets.numpy.epilogue import LastResult, returns
from difgen.targets.numpy.printer import PointsAxis, is_view, number, print_graph
from difgen.targets.parts import Constants, Function, Uses
from difgen.targets.python.printer import Reduced, ScalarCode
from difgen.targets.signatures import (
    PointsArguments,
    points_arguments,
    points_docstring,
    points_over_some,
    points_signature,
)

BLOCK_BYTES = 512 * 1024
"""The bytes of temporaries one block of points may keep live at once. A block is
the largest power of two of points within it (0.25-0.5 MiB), the last block up to
twice that (it takes the remainder), all within a core's L2 cache, so that a
block's temporaries stay in it. ``python -m benchmarks.calibration`` reads the L2
size and times the Rosenbrock gradient's points variant per point by block size
at n = 10 (440 bytes a point) and n = 100 (4760 bytes a point)."""

MIN_BLOCK = 256
"""The fewest points of a block: each NumPy call has a fixed price, and in the
points layout every inner loop runs along the block's points, so blocks of a few
dozen points would spend their time in overheads. It also keeps every block far
from one point, where NumPy may take other loops. ``python -m
benchmarks.calibration`` measures the call and the n = 100 gradient in blocks of
128 against 256."""

THREAD_POINTS = 16384
"""The fewest points one thread of a points variant is given (``_THREAD_POINTS``
of the module, whose ``_run_blocks`` splits the blocks over ``DIFGEN_THREADS``
threads); fewer than twice as many points run in the calling thread. Measured on
the Rosenbrock n=10 gradient (2 shared cores, load average 13-15 from other
work, so an upper bound): handing a run of blocks to a pool thread and waiting
for it costs 9-13 us, a block of 1024 points 64-76 us (65-75 ns a point), so at
16384 points a thread (16 such blocks) the hand-over is about 1% of its work.
Between a block's NumPy calls the Python holds the GIL, which serializes threads
given few blocks each; under that load the 1-against-2-thread timings from 2048
to 32768 points were noise (one block, never split, "gained" 3.75x), so the
threshold keeps a margin rather than the smallest count that paid once.
``python -m benchmarks.points_threads`` times 1 thread against 2 at 10^6 points."""


def _code(
    graph: Graph,
    out_flags: Sequence[bool],
    names: Sequence[str],
    pool: Constants,
    size: int,
) -> tuple[list[str], list[str], Uses]:
    """(statements, result expressions, what they name) of a batched graph at
    ``size`` points; every result a fresh array with the points in front, the
    points axis printed as ``npoints``."""
    k = PointsAxis(size, naming.NPOINTS)
    code = print_graph(graph, names, pool, lead=k, axis=k)
    results = []
    for out, expr, batched in zip(graph.outputs, code.outputs, out_flags):
        if isinstance(out, Lit) and out.shape == ():
            expr = number(out.value[()])
        if not batched:  # the same at every point
            results.append(f"np.full({(k, *out.shape)!r}, {expr})")
        elif out in graph.inputs or is_view(graph, out, code.hoisted):
            results.append(f"np.array({expr})")
        else:
            results.append(expr)
    return list(code.lines), results, code.uses


def bytes_per_point(graph: Graph, k: int | None = None) -> int:
    """The most bytes per point that the batched values of ``graph`` keep live at
    once, equation by equation: the arguments (the caller holds them throughout)
    and the temporaries until their last reader; a view costs nothing but keeps
    its base alive.

    NumPy frees a temporary when its last reader is done and its allocator hands
    the memory to the next one, so the peak of the live values, not their sum, is
    what one block keeps in the cache. ``k`` is the number of points the graph
    was batched at (by default the leading axis of its first input, ``x``).
    """
    if k is None:
        k = graph.inputs[0].shape[0]
    views = {e.out for e in graph.eqns if e.primitive.view}

    def size(v: Var) -> int:
        if v in views or not v.shape or v.shape[0] != k:
            return 0  # shares memory, or one value for all points
        return math.prod(v.shape[1:]) * np.dtype(v.dtype).itemsize

    end = len(graph.eqns)
    last: dict[Var, int] = {}  # the equation after which a value is freed
    for i, eqn in enumerate(graph.eqns):
        last[eqn.out] = i  # at once if nothing reads it
        last.update((a, i) for a in eqn.inputs if isinstance(a, Var))
    last.update((a, end) for a in (*graph.inputs, *graph.outputs) if isinstance(a, Var))
    for eqn in reversed(graph.eqns):  # a view keeps its base alive
        base = eqn.inputs[0] if eqn.out in views and eqn.inputs else None
        if isinstance(base, Var):
            last[base] = max(last[base], last[eqn.out])
    dies: dict[int, list[Var]] = {}
    for v, i in last.items():
        dies.setdefault(i, []).append(v)
    live = sum(size(v) for v in graph.inputs)
    peak = live
    for i, eqn in enumerate(graph.eqns):
        live += size(eqn.out)
        peak = max(peak, live)
        live -= sum(size(v) for v in dies.get(i, ()))
    return peak


def block_size(graph: Graph, layout_size: int, k: int | None = None) -> int:
    """How many points one block holds: the largest power of two whose
    temporaries fit :data:`BLOCK_BYTES`, at least :data:`MIN_BLOCK`, and a power
    of two above ``layout_size`` (a point's elements) when the arguments are laid
    out with the points innermost: then every block takes the layout that one
    call over all the points takes, which decides the order of NumPy's reductions and whether
    a product goes to BLAS, so the blocks round exactly as that call does. A
    power of two, because blocks start at its multiples (``_point_blocks``)."""
    return _block_points(bytes_per_point(graph, k), layout_size)


def _block_points(per_point: int, layout_size: int) -> int:
    """:func:`block_size` for values keeping ``per_point`` bytes a point live."""
    fits = max(MIN_BLOCK, BLOCK_BYTES // max(1, per_point))
    block = 1 << (fits.bit_length() - 1)
    return max(block, 1 << layout_size.bit_length()) if layout_size else block


def _blocked(
    variant: str,
    name: str,
    params: Sequence[str],
    args: PointsArguments,
    block: int,
    results: Sequence[tuple[Shape, str]],
) -> list[str]:
    """The body of a points variant after its argument checks: ``out`` checked
    when given, then one call of the block function ``name`` (parameters
    ``params``) when the points make one block (fewer than ``2 * block``: the
    last block takes the remainder), else one per block, over the module's
    thread pool (``_run_blocks``), writing into results allocated once or into
    ``out``."""
    per_point = set(args.per_point)
    shapes = _tuple([_points_shape(shape) for shape, _ in results])
    arguments = _tuple([f'("{a}", {a})' for a in params])
    said = f'"{variant}'
    checks = [
        f"if {naming.OUT} is not None:",
        (
            f'    {naming.POINTS_OUT}({said}: {naming.OUT}", {naming.OUT}, '
            f"{shapes}, {arguments})"
        ),
    ]
    layout = [
        f"if {naming.NPOINTS} > {args.layout_size}:",
        *(f"    {a} = {naming.POINTS_LAYOUT}({a})" for a in args.layout),
    ]
    whole = f"{name}({', '.join(params)})"
    if len(results) == 1:
        into = [f"{naming.OUT}[...] = {whole}"]
    else:
        outs = ", ".join(f"{naming.OUT}[{i}][...]" for i in range(len(results)))
        into = [f"{outs} = {whole}"]
    lines = [
        *checks,
        f"if {naming.NPOINTS} < {2 * block}:",  # the last block takes the rest
        *(f"    {line}" for line in (layout if args.layout else [])),
        f"    if {naming.OUT} is None:",
        f"        return {whole}",
        *(f"    {line}" for line in into),
        f"    return {naming.OUT}",
    ]

    def part(a: str) -> str:
        if a not in per_point:
            return a
        rows = f"{a}[{naming.START}:{naming.STOP}]"
        return f"{naming.POINTS_LAYOUT}({rows})" if a in args.layout else rows

    def empty(shape: Shape, dtype: str) -> str:
        dims = ", ".join([naming.NPOINTS, *(str(n) for n in shape)])
        kind = "" if dtype == "float64" else f", np.{dtype}"
        if dtype == "float64" and precision.is_float32():  # the IR's float type
            kind = ", np.float32"
        return f"np.empty(({dims}{',' if not shape else ''}){kind})"

    call = f"{name}({', '.join(part(a) for a in params)})"
    rows = f"[{naming.START}:{naming.STOP}]"
    work = f"def {naming.BLOCK_WORK}({naming.START}: int, {naming.STOP}: int) -> None:"
    run = f"{naming.RUN_BLOCKS}({naming.BLOCK_WORK}, {naming.NPOINTS}, {block})"
    if len(results) == 1:
        return [
            *lines,
            (
                f"{naming.RESULT} = {empty(*results[0])} if {naming.OUT} is None "
                f"else {naming.OUT}"
            ),
            "",
            work,
            f"    {naming.RESULT}{rows} = {call}",
            "",
            run,
            f"return {naming.RESULT}",
        ]
    targets = ", ".join(f"{naming.RESULTS}[{i}]{rows}" for i in range(len(results)))
    return [
        *lines,
        (
            f"{naming.RESULTS} = ({', '.join(empty(*r) for r in results)}) "
            f"if {naming.OUT} is None else {naming.OUT}"
        ),
        "",
        work,
        f"    {targets} = {call}",
        "",
        run,
        f"return {naming.RESULTS}",
    ]


def _tuple(items: Sequence[str]) -> str:
    """Python text of a tuple of ``items`` (no trailing comma but for one)."""
    return f"({', '.join(items)}{',' if len(items) == 1 else ''})"


def _points_shape(shape: Shape) -> str:
    """A result's shape at ``npoints`` points, as Python text."""
    dims = ", ".join([naming.NPOINTS, *(str(n) for n in shape)])
    return f"({dims}{',' if not shape else ''})"


def _columns(
    spec: ModuleSpec,
    op: Operator,
    ys: Shape,
    expressions: tuple[ScalarCode, Reduced] | None,
) -> tuple[list[str], frozenset[str], int, list[tuple[Shape, str]]] | None:
    """(body, helpers, bytes a point, result shapes and dtypes) of a straight-line
    operator's block function
    on columns, or None for an operator that is not straight-line code or whose
    expressions have no column form (then the build says so: its rows may put NaN
    and inf where the one-point code does not)."""
    if expressions is None:
        return None
    code, reduction = expressions
    per_point = frozenset(
        [
            *([naming.INPUT] if spec.input.per_point else []),
            *op.seeds,
            *(c.name for c in spec.contexts if c.per_point),
        ]
    )
    try:
        first = points_arguments(op, spec, ys).per_point[0]
        body, helpers = columns.column_body(code, reduction, per_point, first)
    except columns.NoColumnForm as exc:
        note(
            f"{naming.points(op.name)}: the batched graph, not {op.name}'s "
            f"straight-line code ({exc} has no column form): its rows may put NaN "
            "and inf where the one-point operator does not"
        )
        return None
    shapes: list[tuple[Shape, str]] = [
        (tuple(r.shape), "float64") for r in code.results
    ]
    return body, helpers, columns.bytes_per_point(code, reduction), shapes


def points_function(
    spec: ModuleSpec,
    ys: Shape,
    derived: PointsGraphs,
    pool: Constants,
    expressions: tuple[ScalarCode, Reduced] | None = None,
) -> tuple[Function, Function]:
    """The points variant of one operator, as vector code for any number of points:
    (its function of one block of points, the variant that calls it block by
    block).

    A straight-line operator (``expressions``: what its body prints) computes its
    own expressions on columns (:mod:`difgen.targets.numpy.columns`), so its rows
    are the one-point code's, NaN and inf included; any other is its batched
    graph."""
    op = derived.op
    names = [naming.INPUT, *op.seeds, *(c.name for c in spec.contexts)]
    (g1, f1), (g2, f2) = derived.batched
    params, annotation = points_signature(op, spec, ys)
    block_params = points_signature(op, spec, ys, with_out=False)[0]
    name = naming.points_block(op.name)
    args = points_arguments(op, spec, ys)
    on_columns = _columns(spec, op, ys, expressions)
    if on_columns is not None:
        body, helpers, per_point_bytes, shapes = on_columns
        block = Function(
            name,
            block_params,
            annotation,
            f"{naming.points(op.name)} on one block of points, checked and laid out.",
            tuple(body),
            block_of=op.name,
            helpers=helpers,
        )
        size = _block_points(per_point_bytes, args.layout_size)
        variant = Function(
            naming.points(op.name),
            params,
            annotation,
            points_docstring(op, spec, ys),
            tuple(_blocked(naming.points(op.name), name, names, args, size, shapes)),
            points_of=op.name,
        )
        return block, variant
    trial = copy.deepcopy(pool)
    k1, k2 = derived.sentinels
    body, results, uses = _code(g1, f1, names, pool, k1)
    if (
        (body, results) != _code(g2, f2, names, trial, k2)[:2]
        or pool.items != trial.items
        or pool.setup != trial.setup
    ):
        raise ConfigError(
            spec.config_path,
            spec.line_of("points"),
            f"the points variant of '{op.name}' would be valid for one number of "
            "points only (its batched code uses the number of points other than as "
            "the leading axis); remove points = true, or this operator, from the "
            "module",
        )
    if any(naming.NPOINTS in line for line in (*body, *results)):
        body.insert(0, f"{naming.NPOINTS} = {args.per_point[0]}.shape[0]")
    if len(results) == 1:
        last = LastResult(f": {precision.array_type()} = {results[0]}", naming.RESULT)
        body += returns(op.results, results, last, False)
    else:
        body += returns(op.results, results, None, False)
    block = Function(
        name,
        block_params,
        annotation,
        f"{naming.points(op.name)} on one block of points, checked and laid out.",
        tuple(body),
        block_of=op.name,
    ).using(uses)
    shapes = [
        (out.shape[1:] if batched else out.shape, out.dtype)
        for out, batched in zip(g1.outputs, f1)
    ]
    variant = Function(
        naming.points(op.name),
        params,
        annotation,
        points_docstring(op, spec, ys),
        tuple(
            _blocked(
                naming.points(op.name),
                name,
                names,
                args,
                block_size(g1, args.layout_size, k1),
                shapes,
            )
        ),
        points_of=op.name,
    )
    return block, variant


def build(
    spec: ModuleSpec,
    derived: Sequence[PointsGraphs],
    ys: Shape,
    pool: Constants,
    functions: Sequence[Function],
) -> list[Function]:
    """The points variants of ``f`` and every requested operator, in table order.

    With ``emit = "c"`` each also carries its C loop, printed with the one-point
    operator among ``functions`` (:mod:`difgen.targets.c.points`).
    """
    straight = {f.name: f.expressions for f in functions}
    pairs = [
        points_function(spec, ys, item, pool, straight.get(item.op.name))
        for item in derived
    ]
    native = {f.name: f.native_points for f in functions}
    built: list[Function] = []
    for block, variant in pairs:
        if spec.emit == "c":
            variant = with_native(spec, variant, native.get(variant.points_of or ""))
        built += [block, variant]
    return built


def _c_helpers(spec: ModuleSpec) -> tuple[tuple[str, str], ...]:
    """What the extension's ``_bind`` is given for the points variants: in a
    module whose points variants share ``x`` or take int64 or bool data per
    point, the module's ``_as_points_c`` (its errors name the argument that set
    the number of points, as the Python variant's do), else ``_as_points``."""
    if points_over_some(spec):
        return (
            (naming.AS_POINTS, naming.AS_POINTS_C),
            (naming.POINTS_OUT, naming.POINTS_OUT),
        )
    from difgen.targets.c import points as c_points  # only C modules get here

    return c_points.HELPERS


def with_native(
    spec: ModuleSpec,
    variant: Function,
    native: tuple[str, str, frozenset[str]] | None,
) -> Function:
    """A points variant with its compiled twin (``emit = "c"``): the C loop, its
    docstring, and the module helper the extension's argument checks call."""
    if native is None:  # the one-point operator stayed in Python (no C form)
        note(
            f"{variant.name}: kept in Python (the NumPy points variant): "
            f"{variant.points_of} is not compiled, so the points loop has no C "
            "code to run"
        )
        return variant
    source, signature, runtime = native
    return dataclasses.replace(
        variant,
        native=source,
        native_doc=signature + variant.doc,
        native_runtime=runtime,
        wrappers=_c_helpers(spec),
    )
