"""``emit = "c"`` for array code: C loops over the hard-coded shapes ("vector C").

The straight-line C of :mod:`difgen.targets.c.extension` writes one statement per scalar,
which is right for small graphs and wrong for large ones (a 10^4-element gradient
would be 10^5 statements, and compiling a 512-state Brusselator jacobian that way
took 72 s). This module prints the trace backend's optimized operator graph -- the
graph the vector (NumPy) emission prints, equation for equation, in the same order
-- as C loops. The Python fallback of such an operator is that vector emission.

How each equation becomes C (docs/design.md, section 10):

- **Constants.** An equation whose inputs are all constants is evaluated at build
  time by the primitive's own ``impl`` (NumPy, as the vector emission's import-time
  hoisting does) and printed as a ``static const double`` table.
- **Elementwise** primitives have no C template of their own: the primitive's SymPy
  rule (the one the scalar emission lowers with) is applied to fresh scalar symbols
  and printed by :func:`difgen.targets.c.expressions.c_expr`, so the declaration stays
  the one place that knows the primitive. Consecutive elementwise equations of the
  same shape are **fused** into one loop with scalar temporaries; a value gets an
  array only when a consumer outside the loop (or the result) needs it. A full or
  partial reduction of a value of the loop's shape accumulates inside that loop.
- **Structural** primitives (loop form ``MOVES``: getitem, reshape, transpose,
  broadcast_to, concatenate, pack, pad, scatter_add, scatter_sum, set_index) are
  linear maps that move elements. Their ``impl`` is run once at build time on
  object arrays of :class:`Ref` (an input element) and gives, per output element,
  the ordered terms it sums. A map that reads each output element from one element
  of one input is a *view*: no code, its index table composes with whatever reads
  it. Any other map is written into an array (zeros, then one loop per term rank
  and input, in NumPy's order). Index tables that are affine in the loop indices
  are printed as index arithmetic, the others as ``static const int`` tables.
- **Reductions** (``reduce_sum``, ``reduce_max``, ``reduce_min``, ``reduce_prod``)
  declare their C accumulator (``reduction_loop(start, update)``), and **matmul**
  its loop (``MATMUL_LOOP``); ``max``/``min`` propagate NaN as NumPy does (the
  ``_maximum``/``_minimum`` of the C runtime).
- A large X read by ``u = X @ w`` and by ``X.T @ r`` (``r @ X``) of a value of
  the elementwise chain on ``u`` is read in **one pass over its rows**
  (:mod:`~difgen.targets.c.rows`): the dot, the chain, then the row times ``r``
  added into the result, in one loop nest; and an operator with loop nests of
  :data:`CLONES_FROM` elements or more is compiled per SIMD width
  (:data:`SIMD_CLONES`).
- Any other primitive declares **no loop form** (``no_loop_form(why)``):
  :class:`NoLoopForm` names it with that reason, and the trace backend keeps that
  operator in Python (the extension does not export it).

Each of these is the primitive's ``c_loop`` field (:class:`~difgen.core.primitive.
LoopForm`, filled by its family's default: elementwise, structural, LAPACK and
control rows need no word), so this package keeps no table of primitive names:
a large transcendental says ``UFUNC_LOOP`` (NumPy's SIMD loop over many elements).

Floating point: the same IEEE operations on the same doubles in the same order as
the vector emission's NumPy calls, except (1) sums and products over an axis are
accumulated in index order where NumPy sums pairwise, and matmul accumulates in
index order where BLAS blocks (and may use FMA); (2) ``exp``, ``log``, ``tanh``...
are the C library's where NumPy may use its own SIMD versions (last-ulp
differences). Results agree to a relative 1e-12 of the result's scale (the tests'
tolerance); NaN and inf propagate identically.

Memory: one workspace per call for the intermediate arrays: on the stack up to
``STACK_DOUBLES``, else the operator's own heap buffer, allocated at its first call
and kept (a ``malloc``/``free`` of a large block per call costs page faults). A
call that finds that buffer in use (a thread entering while NumPy's loop or BLAS
released the GIL, the only points where that can happen) allocates its own and
frees it, so the code is reentrant and thread-safe under the GIL; results are
written directly into the returned arrays (or the caller's ``out`` when it does not
overlap an argument).

The code is planning passes and one printer: :mod:`~difgen.targets.c.plan`
(constant folding, views, fusion, which values need memory),
:mod:`~difgen.targets.c.demand` (results computed at their own elements),
:mod:`~difgen.targets.c.finite` (constants when finite) produce a
:class:`~difgen.targets.c.program.Program` of values and no C text;
:mod:`~difgen.targets.c.printer` (with :mod:`~difgen.targets.c.nest` and
:mod:`~difgen.targets.c.calls`) writes it as C; :mod:`~difgen.targets.c.abi` is
the CPython function around it. This module composes them (:func:`loop_body`,
:func:`c_loops_function`, :func:`points_native`) and re-exports the names other
modules use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from difgen import naming
from difgen.config import ModuleSpec
from difgen.core.ir import Graph
from difgen.operators import Operator
from difgen.targets.c import abi
from difgen.targets.c import extension as c_code
from difgen.targets.c import ints as c_ints
from difgen.targets.c import points as c_points
from difgen.targets.c.abi import STACK_DOUBLES, Signature
from difgen.targets.c.demand import (
    COPIES,
    PUSH_ELEMENTS,
    PUSH_GROUPS,
    PUSH_NODES,
    SPECIAL_CONSTANTS,
    Demand,
    DemandAnalysis,
    DemandGroup,
    demand_of,
)
from difgen.targets.c.extension import PREFIX
from difgen.targets.c.finite import FINITE, OTHER, ZERO, finite_constant
from difgen.targets.c.glue import Used
from difgen.targets.c.moves import Ref, affine, moves_of, structural
from difgen.targets.c.nest import LoopNest, Tables, c_number, element_text
from difgen.targets.c.plan import BLAS_WORK, UFUNC_SIZE, Planner
from difgen.targets.c.printer import EXPONENT, Printer, reduction_form
from difgen.targets.c.program import (
    CONST_LIMIT,
    Fused,
    Group,
    Moves,
    NoLoopForm,
    Program,
    Step,
    Store,
    View,
)
from difgen.targets.numpy.printer import triangle_of

__all__ = [
    "BLAS_WORK",
    "CONST_LIMIT",
    "COPIES",
    "EXPONENT",
    "FINITE",
    "OTHER",
    "OVERLAP",
    "PUSH_ELEMENTS",
    "PUSH_GROUPS",
    "PUSH_NODES",
    "SPECIAL_CONSTANTS",
    "STACK_DOUBLES",
    "STRAIGHT_LINE_WORK",
    "UFUNC_SIZE",
    "ZERO",
    "Demand",
    "DemandAnalysis",
    "DemandGroup",
    "Fused",
    "Group",
    "LoopBody",
    "LoopNest",
    "Moves",
    "NoLoopForm",
    "Pattern",
    "Planner",
    "Printer",
    "Program",
    "Ref",
    "Signature",
    "Step",
    "Store",
    "Tables",
    "View",
    "affine",
    "c_loops_function",
    "c_number",
    "demand_of",
    "element_text",
    "finite_constant",
    "loop_body",
    "moves_of",
    "points_native",
    "reduction_form",
    "structural",
]

STRAIGHT_LINE_WORK = 256
"""Graphs with at most this many elements of work (``cost_model.work``) are
printed as straight-line C (:mod:`difgen.targets.c.extension`) when SymPy can reduce
them; larger ones as loops, which then run faster and compile faster."""

Pattern = tuple[np.ndarray, np.ndarray, tuple[int, int]]
"""A sparse result's CSR ``indices``, ``indptr`` and shape."""


@dataclass(frozen=True)
class LoopBody:
    """One operator graph compiled to C statements, which the one-point function
    (:func:`c_loops_function`) and the points loop (:func:`points_native`) both
    run, so that a points variant's row is the one-point operator's result.

    The statements read argument ``n`` through the pointer ``dg_p_<n>`` (a
    scalar through the double ``<n>``), write result ``k`` into ``dg_r<k>`` (a
    pointer, or a double for a scalar result), use ``work`` doubles at ``dg_w``
    and ``goto dg_fail`` only where they call NumPy (``calls_numpy``); they use
    the C runtime's ``runtime`` names and read the arguments named in ``reads``
    (as the printer reported them).
    """

    sig: abi.Signature
    tables: tuple[str, ...]  # static const tables the statements read
    lines: tuple[str, ...]
    work: int
    calls_numpy: bool
    runtime: frozenset[str]
    reads: frozenset[str]
    table_init: tuple[str, ...] = ()  # fills the large tables, once (fill_tables)
    widest: int = 0  # the most elements one fused loop nest computes


def loop_body(
    op: Operator, spec: ModuleSpec, ys: tuple[int, ...], graph: Graph
) -> LoopBody:
    """Compile ``op``'s graph to loops once (see :class:`LoopBody`).

    :class:`NoLoopForm` when the graph uses a primitive without a loop form.
    int64 arguments that the graph only casts to float64 are read as doubles
    (:mod:`difgen.targets.c.ints`); any other int64 argument has no loop form."""
    original = graph
    graph, ints = c_ints.as_doubles(graph)
    sig = abi.signature(op, spec, ys, graph, ints)
    c_ints.keeps_index_checks(original, [n for n, _ in sig.args], ints)
    results = abi.result_stores(graph, sig.shapes)
    program = Planner(graph).program(results)
    inputs = [(f"{PREFIX}p_{n}" if s else n, s) for n, s in sig.args]
    printer = Printer(program, inputs, op.name)
    lines = printer.compile_all(results)
    return LoopBody(
        sig,
        tuple(printer.tables.lines),
        tuple(lines),
        printer.work,
        printer.calls_numpy,
        printer.use.frozen(),
        frozenset(printer.reads),
        tuple(printer.tables.init),
        widest_loop(program),
    )


def widest_loop(program: Program) -> int:
    """The most elements one fused loop nest of ``program`` computes (a row
    pass's dot counts each row's ``k`` products; a loop of a result computed on
    demand, the elements it stores: the Rosenbrock gradient's and hvp's one
    loop over ``x``)."""
    widest = 0
    for group in program.loops:
        size = int(np.prod(group.shape, dtype=np.int64))
        if group.rows is not None:
            size *= max(group.rows.k, 1)
        widest = max(widest, size)
    for plan in program.demands:
        layouts = [plan.everywhere] + ([plan.when_finite] if plan.when_finite else [])
        for layout in layouts:
            for together in layout.loops:
                widest = max(widest, sum(g.targets.size for g in together))
    return widest


def fill_tables(name: str, init: Sequence[str]) -> tuple[str, list[str]]:
    """The function filling an operator's large tables (decoded from their runs,
    :func:`~difgen.targets.c.nest.compact_table`) and the statement calling it
    first thing in each function that reads them, while the GIL is held: it
    fills them at the first call only (("", []) when there are none)."""
    if not init:
        return "", []
    function = f"{PREFIX}{name}_fill_tables"
    done = f"{PREFIX}{name}_tables_filled"
    source = (
        f"static int {done} = 0;\n"
        f"static void\n{function}(void)\n{{\n"
        f"    if ({done}) return;\n"
        + "".join(f"    {line}\n" for line in init)
        + f"    {done} = 1;\n}}\n"
    )
    return source, [f"{function}();"]


def c_loops_function(
    body: LoopBody, equations: int, pattern: Pattern | None = None
) -> tuple[str, str, frozenset[str]]:
    """One operator as a METH_FASTCALL C function of loops: (source, doc, the
    runtime names it uses).

    ``pattern`` is the last result's sparsity pattern when it takes a CSR ``out``
    (checked against it in C)."""
    sig = body.sig
    op = sig.op
    pattern_source, pattern_name = "", None
    pattern_init: list[str] = []
    use = Used()
    use.add(body.runtime)
    select, gather = None, []
    if sig.triangle is not None:
        if pattern is None:
            raise ValueError(f"{op.name}: a triangle needs its sparsity pattern")
        pattern, select, select_source = _triangle(op.name, pattern, sig.triangle)
        pattern_source += select_source
        gather = abi.gather_lines(len(sig.shapes) - 1, select)
    if sig.csr_out:
        if pattern is None:
            raise ValueError(f"{op.name}: a CSR out= needs its sparsity pattern")
        more, pattern_name, pattern_init = c_code.csr_pattern(
            op.name, *pattern, use, compact=True
        )
        pattern_source += more
    fill_source, fill = fill_tables(op.name, (*body.table_init, *pattern_init))
    lines = [
        *fill,
        *abi.argument_lines(sig, use),
        *abi.buffer_lines(sig, pattern_name, use, select),
        *abi.workspace_lines(body.work),
        *body.lines,
        *gather,
        *abi.finish_lines(sig, use),
        *abi.return_lines(sig, body.work, use),
    ]
    source = (
        f"/* {op.name}: C loops over the trace backend's graph "
        f"({equations} equations) */\n"
        + "".join(f"{t}\n" for t in body.tables)
        + pattern_source
        + fill_source
        + (SIMD_CLONES if body.widest >= CLONES_FROM else "")
        + f"static PyObject *\n{PREFIX}op_{op.name}(PyObject *{PREFIX}self, "
        f"PyObject *const *{PREFIX}args, Py_ssize_t {PREFIX}nargs, "
        f"PyObject *{PREFIX}kwnames)\n{{\n"
        + "".join(f"    {line}\n" for line in lines)
        + "}\n"
    )
    names = sig.names
    params = ", ".join(names[:-1] + [f"{naming.OUT}=None"] if sig.out else names)
    return OVERLAP + source, f"{op.name}({params})\\n--\\n\\n", use.frozen()


CLONES_FROM = 1 << 16
"""An operator whose widest fused loop nest computes at least this many
elements is compiled once per SIMD width (:data:`SIMD_CLONES`): each version
costs the compiler about as much as the baseline (the MLP module, whose loop
nests are 64x64, took 9.0 s to compile with them against 4.7 s without, for
0.86x the gradient's time), so only loops this large, whose time is the
call's, carry them."""

SIMD_CLONES = f"""#ifndef {PREFIX.upper()}SIMD_CLONES
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) \\
    && defined(__linux__) && defined(__GLIBC__)
/* AVX2 and AVX-512 versions beside the baseline (SSE2), the one this CPU runs
   chosen when the module is loaded; -ffp-contract=off holds in each (no FMA),
   so every version computes the same IEEE operations in the same order. */
#define {PREFIX.upper()}SIMD_CLONES \\
    __attribute__((target_clones("avx2", "avx512f", "default")))
#else
#define {PREFIX.upper()}SIMD_CLONES
#endif
#endif
{PREFIX.upper()}SIMD_CLONES
"""
"""Function multiversioning (issue 24) of an operator with large loops: with
X 100000x50 the logistic gradient's row pass takes 0.77x the baseline's time
on an AVX-512 CPU (-march=native: 0.71x), the MLP gradient (batch 64) 0.86x;
a small operator (the Brusselator jacobian at N = 16, 2 us a call) gains
nothing (0.89x-1.0x). GCC on x86-64 glibc Linux only, where
``target_clones`` has its ifunc dispatch."""


def _triangle(
    name: str, pattern: Pattern, triangle: str
) -> tuple[Pattern, abi.Select, str]:
    """The triangle's pattern (what a CSR ``out`` is checked against), its
    positions among the whole pattern's nonzeros and their C table."""
    indices, indptr, shape = pattern
    kept, kept_ptr, positions = triangle_of(
        np.asarray(indices), np.asarray(indptr), shape, triangle
    )
    nnz = int(np.asarray(indices).size)
    table = f"{PREFIX}{name}_select"
    ctype = "npy_int32" if nnz < 2**31 else "npy_int64"
    items = [str(int(v)) for v in positions] or ["0"]
    rows = ",\n    ".join(
        ", ".join(items[i : i + 16]) for i in range(0, len(items), 16)
    )
    source = f"static const {ctype} {table}[{len(items)}] = {{\n    {rows}\n}};\n"
    select = abi.Select(table, int(positions.size), nnz)
    return (kept, kept_ptr, shape), select, source


def points_native(
    op: Operator, spec: ModuleSpec, ys: tuple[int, ...], body: LoopBody
) -> tuple[str, str, frozenset[str]] | None:
    """(C source, text signature, runtime names used) of ``op``'s points variant: the points loop of
    :mod:`difgen.targets.c.points` running ``body`` at each point, or None for a
    sparse result (a CSR array has no points axis).

    The statements are the one-point function's, so they read the ``static
    const`` tables printed with it (the points variants come after every
    operator in the C file). The workspace is taken once per call. NumPy calls
    (large transcendentals, BLAS) stay as they are, so that rows equal the
    one-point operator bit for bit; such a body keeps the GIL.
    """
    if any(body.sig.sparse):
        return None

    def make_body(
        args: list[c_points.PointsArgument], shapes: list[tuple[int, ...]]
    ) -> c_points.PointsBody:
        once, reads = _points_reads(args, body.reads)
        rows, stores = _points_results(shapes)
        if not body.calls_numpy:  # threads, each reading and working on its own
            return c_points.PointsBody(
                prelude=OVERLAP
                + f"/* {naming.points(op.name)}: {op.name}'s loops at each point */\n",
                before=tuple(fill_tables(op.name, body.table_init)[1]),
                per_thread=tuple(once),
                at_point=(*reads, *rows, *body.lines, *stores),
                work=body.work,
                runtime=body.runtime,
            )
        return c_points.PointsBody(
            prelude=OVERLAP
            + f"/* {naming.points(op.name)}: {op.name}'s loops at each point */\n",
            declare=(f"double *{PREFIX}w = NULL;", f"int {PREFIX}heap = 0;"),
            before=(
                *fill_tables(op.name, body.table_init)[1],
                *once,
                *abi.workspace_lines(body.work),
            ),
            at_point=(*reads, *rows, *body.lines, *stores),
            cleanup=tuple(abi.workspace_cleanup(body.work)),
            gil_free=not body.calls_numpy,
            runtime=body.runtime,
        )

    printed = c_points.points_function(op, spec, ys, make_body, body.sig.ints)
    return printed.source, printed.doc, printed.runtime


def _points_reads(
    args: list[c_points.PointsArgument], read: frozenset[str]
) -> tuple[list[str], list[str]]:
    """(once per call, at each point) lines giving the loop statements the
    argument names they ``read`` (as the printer reported them): ``dg_p_<n>`` at
    the point's row of a per-point array, or at a shared array; ``<n>`` the
    point's or the shared scalar."""
    once: list[str] = []
    at_point: list[str] = []
    for j, arg in enumerate(args):
        name = f"{PREFIX}p_{arg.name}" if arg.shape else arg.name
        if name not in read:
            continue  # an argument this operator does not read
        data = c_points.argument_data(j)
        if not arg.per_point:
            shared = c_points.shared_scalar(arg)
            once.append(
                f"const double *const {name} = {data};"
                if arg.shape
                else f"const double {name} = {shared};"
            )
            continue
        base = f"{PREFIX}b_{arg.name}"
        once.append(f"const double *const {base} = {data};")
        at_point.append(
            f"const double *const {name} = {base} + {PREFIX}i * {arg.size};"
            if arg.shape
            else f"const double {name} = {base}[{PREFIX}i];"
        )
    return once, at_point


def _points_results(shapes: list[tuple[int, ...]]) -> tuple[list[str], list[str]]:
    """(before the statements, after them) at each point: ``dg_r<k>`` points at
    the point's row of result ``k``, or is a double stored into it afterwards."""
    before: list[str] = []
    after: list[str] = []
    for r, shape in enumerate(shapes):
        if shape:
            row = c_points.result_row(r, int(np.prod(shape)))
            before.append(f"double *const {PREFIX}r{r} = {row};")
        else:
            before.append(f"double {PREFIX}r{r} = 0.0;")
            after.append(f"{PREFIX}out[{r}][{PREFIX}i] = {PREFIX}r{r};")
    return before, after


OVERLAP = f"""#ifndef {PREFIX.upper()}LOOPS_RUNTIME
#define {PREFIX.upper()}LOOPS_RUNTIME
#if defined(__GNUC__) && !defined(__clang__)
/* GCC vectorizes the elementwise loops at -O3; with -ffp-contract=off and no
   fast-math that changes no result (sums are not reassociated). */
#pragma GCC optimize("O3")
#endif
#endif
"""
"""The loops' optimization level, guarded so every operator can carry it (from the
first loops operator on). Their helpers (``dg_fill``, ``dg_overlap``,
``dg_numpy_attr``) are sections of ``templates/c/loops.c``, which the C file
carries when its code calls them (:mod:`difgen.targets.c.runtime`)."""
