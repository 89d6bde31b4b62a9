"""``emit = "c"`` with ``points = true``: each ``<op>_points`` as one C loop.

The loop runs, at each point, the very code of the compiled one-point operator,
reading the point's elements from the stacked arguments and writing into row
``i`` of each result, so ``gradient_points(X)[i]`` equals ``gradient(X[i])`` bit
for bit. That code is a :class:`PointsBody`, printed by the operator's own
printer: for a straight-line operator (:mod:`difgen.targets.c.extension`) the same
reduction of the same SymPy expressions (:func:`straight_line_body`); for an
operator compiled as loops over arrays (:mod:`difgen.targets.c.loops`) the same
loop statements, with their workspace taken once per call
(``c_loops.points_native``). This module owns the scaffolding around either.
(The Python fallback of a points variant is the vectorized NumPy code of
:mod:`difgen.targets.numpy.points`, which agrees up to the reassociation of its
reductions: ``rtol = 1e-10`` in the tests.)

Arguments are accepted and refused exactly as by the Python points variant: the
fast path takes an exact native float64 ``ndarray`` whose trailing shape is one
point's (any number of points for ``x``, the same number for the seeds and the
per-point contexts); anything else goes through the module's own ``_as_points``,
which converts it or raises the same error. Shared contexts are checked as the
one-point operator checks them, once per call. A body that touches no Python
object runs without the GIL when there are many points (Dask's threads, or any
other, run meanwhile), and from :data:`THREAD_POINTS` points a thread on
splits them into contiguous blocks over ``DIFGEN_THREADS`` threads (else the
online processors, at most :data:`MAX_THREADS`), each thread with its own
workspace, so that the rows are those of one thread bit for bit; loop code that
calls NumPy (BLAS products, NumPy's transcendental loops on large arrays) keeps
the GIL and one thread.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import sympy as sp

from difgen import naming
from difgen.config import ModuleSpec
from difgen.operators import Operator, result_shape, seed_shape
from difgen.targets.c.arguments import c_label, convert_lines, parse_lines
from difgen.targets.c.glue import PREFIX, Used, dims, nulls, return_lines

GIL_FREE_POINTS = 64
"""From this many points on, the loop releases the GIL (a few tens of ns, which
fewer points would notice)."""

THREAD_POINTS = 4096
"""The fewest points a thread of the points loop is given (``DG_THREAD_POINTS``
in ``templates/c/points.c``, whose section ``dg_run_blocks`` splits the points):
starting and joining a thread costs some tens of microseconds, which a block of
fewer points (at tens of nanoseconds each) would not repay."""

MAX_THREADS = 16
"""The most threads one points call starts, ``DIFGEN_THREADS`` included
(``DG_MAX_THREADS`` in ``templates/c/points.c``)."""


@dataclass(frozen=True)
class PointsArgument:
    """One parameter of a points variant: its one-point shape, and whether it
    carries the points axis."""

    name: str
    shape: tuple[int, ...]
    per_point: bool
    ints: bool = False
    """int64 data that the operator reads as doubles (:mod:`difgen.targets.c.ints`)."""

    @property
    def size(self) -> int:
        """Doubles per point (one for a scalar)."""
        return math.prod(self.shape)


def arguments(
    op: Operator,
    spec: ModuleSpec,
    ys: tuple[int, ...],
    ints: frozenset[str] = frozenset(),
) -> list[PointsArgument]:
    """The points variant's parameters in signature order (that of the one-point
    operator): ``x``, the seeds, the contexts (those named in ``ints`` int64 data
    read as doubles)."""
    xs, batch = tuple(spec.input.shape), spec.batch
    args = [PointsArgument(naming.INPUT, xs, spec.input.per_point)]
    args += [
        PointsArgument(s, tuple(seed_shape(s, xs, ys, batch)), True) for s in op.seeds
    ]
    args += [
        PointsArgument(c.name, tuple(c.shape), c.per_point, c.name in ints)
        for c in spec.contexts
    ]
    return args


def _check_lines(function: str, args: list[PointsArgument], use: Used) -> list[str]:
    """Convert and check the arguments in the Python variant's order: the
    per-point ones (the first, ``x`` unless it is shared, sets the number of
    points), then the shared.

    ``dg_in[j]`` holds argument ``j`` as a C-contiguous float64 array (a new
    reference; ``PyObject *`` so that one release frees inputs and results alike)
    unless it is a shared scalar, which is read into its double.
    """
    lines = [f"npy_intp {PREFIX}k = 0;"]
    order = [a for a in args if a.per_point] + [a for a in args if not a.per_point]
    first = args.index(order[0])
    for arg in order:
        j = args.index(arg)
        argv, slot = f"{PREFIX}argv[{j}]", f"{PREFIX}in[{j}]"
        if arg.per_point and arg.ints:
            count = "-1" if j == first else f"{PREFIX}k"
            lines += [
                f"static const npy_intp {PREFIX}dims_{arg.name}[] = {dims(arg.shape)};",
                (
                    f"{slot} = (PyObject *){use('int_points')}({argv}, "
                    f"{c_label(function, arg.name)}, {len(arg.shape)}, "
                    f'{PREFIX}dims_{arg.name}, {count}, "{order[0].name}");'
                ),
                f"if ({slot} == NULL) goto {PREFIX}fail;",
            ]
            if j == first:
                lines.append(f"{PREFIX}k = PyArray_DIM((PyArrayObject *){slot}, 0);")
        elif arg.per_point:
            count = "-1" if j == first else f"{PREFIX}k"
            lines += [
                f"static const npy_intp {PREFIX}dims_{arg.name}[] = {dims(arg.shape)};",
                (
                    f"{slot} = (PyObject *){use('points')}({argv}, "
                    f"{c_label(function, arg.name)}, {len(arg.shape)}, "
                    f"{PREFIX}dims_{arg.name}, {count});"
                ),
                f"if ({slot} == NULL) goto {PREFIX}fail;",
            ]
            if j == first:
                lines.append(f"{PREFIX}k = PyArray_DIM((PyArrayObject *){slot}, 0);")
        elif arg.shape == ():
            into = f"{PREFIX}s_{arg.name}"
            lines += convert_lines(
                argv,
                arg.name,
                (),
                into,
                use,
                initial="0.0",
                function=function,
                ints=arg.ints,
            )
        else:
            lines += convert_lines(
                argv,
                arg.name,
                arg.shape,
                slot,
                use,
                declared=False,
                cast="(PyObject *)",
                function=function,
                ints=arg.ints,
            )
    return lines


def _reads(
    arg: PointsArgument, j: int, symbols: np.ndarray, used: set[sp.Symbol]
) -> tuple[list[str], list[str]]:
    """(before the loop, at each point) lines reading the elements the code uses.

    Shared arrays are read once; a per-point argument's elements are read at
    ``dg_i * size``, in flat C order as the one-point operator reads them.
    """
    flat = np.asarray(symbols, dtype=object).ravel()
    reads = [(i, str(s)) for i, s in enumerate(flat) if s in used]
    if not reads:
        return [], []
    if not arg.per_point and arg.shape == ():
        return [f"const double {reads[0][1]} = {shared_scalar(arg)};"], []
    pointer = f"{PREFIX}p_{arg.name}"
    before = [f"const double *{pointer} = {argument_data(j)};"]
    if not arg.per_point:
        return before + [f"const double {n} = {pointer}[{i}];" for i, n in reads], []
    at_point = [
        f"const double *{PREFIX}q_{arg.name} = {pointer} + {_row(arg.size)};",
        *(f"const double {n} = {PREFIX}q_{arg.name}[{i}];" for i, n in reads),
    ]
    return before, at_point


@dataclass(frozen=True)
class PointsBody:
    """What an operator computes at each point, for the points loop to run.

    Two printers fill it: :func:`straight_line_body` (the statements of a
    straight-line operator) and ``c_loops.points_native`` (the loop code of a
    loop-built operator). Lines name argument ``j``'s data as
    :func:`argument_data` gives it, shared scalars as :func:`shared_scalar`, the
    point as ``dg_i`` and result ``r``'s rows as :func:`result_row`.
    """

    prelude: str = ""  # file-scope C before the function
    declare: tuple[str, ...] = ()  # at the function's top, before any goto
    before: tuple[str, ...] = ()  # once per call, arguments and results made
    at_point: tuple[str, ...] = ()  # the loop's body at point dg_i
    cleanup: tuple[str, ...] = ()  # once per call, on success and on failure
    gil_free: bool = True  # the loop touches no Python object
    per_thread: tuple[str, ...] = ()  # each thread's reads before its block
    work: int = 0  # each thread's workspace dg_w, in doubles
    runtime: frozenset[str] = frozenset()  # the runtime names its lines use


def argument_data(j: int) -> str:
    """C text of argument ``j``'s first double (a converted array)."""
    return f"(const double *)PyArray_DATA((PyArrayObject *){PREFIX}in[{j}])"


def shared_scalar(arg: PointsArgument) -> str:
    """The double holding a shared scalar argument (read once per call)."""
    return f"{PREFIX}s_{arg.name}"


def result_row(r: int, size: int) -> str:
    """C text of the first double of result ``r``'s row at point ``dg_i``."""
    return f"{PREFIX}out[{r}] + {_row(size)}"


def _row(size: int) -> str:
    return f"{PREFIX}i" if size == 1 else f"{PREFIX}i * {size}"


@dataclass(frozen=True)
class PointsSource:
    """The C function of one points variant, its text signature and the runtime
    names it uses (its body's and the scaffolding's)."""

    source: str
    doc: str
    runtime: frozenset[str]


def straight_line_body(
    args: list[PointsArgument],
    shapes: list[tuple[int, ...]],
    symbols: dict[str, np.ndarray],
    used: set[sp.Symbol],
    temps: list[tuple[str, str]],
    results: list[list[str]],
) -> PointsBody:
    """A straight-line operator's statements, per point.

    ``temps`` and ``results`` are the one-point operator's statements already
    printed as C (temporaries in order; each result's elements in flat C order),
    ``symbols`` the object arrays naming each argument's elements.
    """
    before: list[str] = []
    loop: list[str] = []
    for j, arg in enumerate(args):
        once, at_point = _reads(arg, j, symbols[arg.name], used)
        before += once
        loop += at_point
    loop += [f"const double {t} = {e};" for t, e in temps]
    for r, (shape, exprs) in enumerate(zip(shapes, results)):
        loop.append(f"double *{PREFIX}o{r} = {result_row(r, math.prod(shape))};")
        loop += [f"{PREFIX}o{r}[{i}] = {e};" for i, e in enumerate(exprs)]
    return PointsBody(per_thread=tuple(before), at_point=tuple(loop))


def points_function(
    op: Operator,
    spec: ModuleSpec,
    ys: tuple[int, ...],
    make_body: Callable[[list[PointsArgument], list[tuple[int, ...]]], PointsBody],
    ints: frozenset[str] = frozenset(),
) -> PointsSource:
    """``<op>_points`` as one C loop over the points around ``make_body``'s code.

    The scaffolding is the same for every operator: parse the call, convert and
    check the arguments as the Python variant does, make the ``(k, *shape)``
    results, run the body at each point (without the GIL from
    :data:`GIL_FREE_POINTS` points when the body allows it), release everything
    on every path. ``make_body`` is given the arguments and the one-point result
    shapes.
    """
    args = arguments(op, spec, ys, ints)
    name = naming.points(op.name)
    xs, batch = tuple(spec.input.shape), spec.batch
    shapes = [tuple(result_shape(k, xs, ys, batch)) for k in op.results]
    code = make_body(args, shapes)
    nargs, nres = len(args), len(op.results)
    declare = [
        f"PyObject *{PREFIX}in[{nargs}] = {{{nulls(nargs)}}};",
        f"PyObject *{PREFIX}res[{nres}] = {{{nulls(nres)}}};",
        f"double *{PREFIX}out[{nres}] = {{{nulls(nres)}}};",
        *code.declare,
    ]
    use = Used()
    use.add(code.runtime)
    names = [a.name for a in args]
    lines = parse_lines(name, [*names, naming.OUT], nargs, use, declare)
    lines += _check_lines(name, args, use)
    lines += _out_lines(name, names, shapes, use)
    for r, shape in enumerate(shapes):
        lines += [
            f"    npy_intp {PREFIX}rdims_{r}[] = {dims([f'{PREFIX}k', *shape])};",
            (
                f"    {PREFIX}res[{r}] = {use('new')}({len(shape) + 1}, "
                f"{PREFIX}rdims_{r}, &{PREFIX}out[{r}]);"
            ),
            f"    if ({PREFIX}res[{r}] == NULL) goto {PREFIX}fail;",
        ]
    lines.append("}")
    lines += code.before
    prelude = code.prelude
    if code.gil_free:
        assert not any("goto" in line for line in code.at_point)  # no exit without it
        call, worker = _worker(name, args, nargs, nres, code)
        prelude += worker
        threads, run = use("threads"), use("run_blocks")
        ts, failed = f"{PREFIX}ts", f"{PREFIX}failed"
        lines += [
            call,
            (
                f"const int {PREFIX}nt = {PREFIX}k >= {GIL_FREE_POINTS} ? "
                f"{threads}({PREFIX}k) : 1;"
            ),
            (
                f"PyThreadState *{ts} = {PREFIX}k >= {GIL_FREE_POINTS} ? "
                "PyEval_SaveThread() : NULL;"
            ),
            (
                f"const int {failed} = {run}({PREFIX}work_{name}, "
                f"&{PREFIX}c, {PREFIX}k, {PREFIX}nt);"
            ),
            f"if ({ts} != NULL) PyEval_RestoreThread({ts});",
            f"if ({failed}) {{ PyErr_NoMemory(); goto {PREFIX}fail; }}",
        ]
    else:  # the body calls NumPy at each point: it keeps the GIL, in one loop
        lines += [
            f"for (npy_intp {PREFIX}i = 0; {PREFIX}i < {PREFIX}k; {PREFIX}i++) {{",
            *(f"    {line}" for line in code.at_point),
            "}",
        ]
    cleanup = [*code.cleanup, f"{use('release')}({nargs}, {PREFIX}in);"]
    lines += [*cleanup, *return_lines(nres, use)]
    lines += [f"{PREFIX}fail:", *cleanup, f"{use('release')}({nres}, {PREFIX}res);"]
    lines.append("return NULL;")
    head = (
        f"static PyObject *\n{PREFIX}op_{name}(PyObject *{PREFIX}self, "
        f"PyObject *const *{PREFIX}args, Py_ssize_t {PREFIX}nargs, "
        f"PyObject *{PREFIX}kwnames)\n{{\n"
    )
    source = head + "".join(f"    {line}\n" for line in lines) + "}\n"
    params = ", ".join([*(a.name for a in args), f"{naming.OUT}=None"])
    doc = f"{name}({params})\\n--\\n\\n"
    return PointsSource(prelude + source, doc, use.frozen())


def _out_lines(
    function: str, names: list[str], shapes: list[tuple[int, ...]], use: Used
) -> list[str]:
    """With ``out`` given, its arrays become the results (``dg_points_out``
    checks them through the module's ``_points_out``, against the arguments as
    passed, as the Python variant checks them); the lines open the ``else``
    branch that makes fresh results, which the caller closes."""
    out = f"{PREFIX}argv[{len(names)}]"
    shape_format = "".join(f"(n{'i' * len(shape)})" for shape in shapes)
    shape_values = ", ".join(
        ", ".join([f"(Py_ssize_t){PREFIX}k", *(str(n) for n in shape)])
        for shape in shapes
    )
    arg_format = "(sO)" * len(names)
    arg_values = ", ".join(f'"{n}", {PREFIX}argv[{j}]' for j, n in enumerate(names))
    return [
        f"if ({out} != NULL && {out} != Py_None) {{",
        (
            f"    if ({use('points_out')}({out}, {c_label(function, naming.OUT)}, "
            f'{len(shapes)}, Py_BuildValue("({shape_format})", {shape_values}), '
            f'Py_BuildValue("({arg_format})", {arg_values}), {PREFIX}res, '
            f"{PREFIX}out) < 0)"
        ),
        f"        goto {PREFIX}fail;",
        "} else {",
    ]


def _worker(
    name: str, args: list[PointsArgument], nargs: int, nres: int, code: PointsBody
) -> tuple[str, str]:
    """(the line making the call's ``dg_c``, the file-scope C of its struct and
    of the function running the body on one block of points).

    A thread sees the call through ``dg_c``: the converted arguments ``dg_in``,
    the results' data ``dg_out``, the number of points ``dg_k`` and the shared
    scalars, under the names the body's lines use. Its workspace is its own (on
    its stack up to ``abi.STACK_DOUBLES``), so no two threads write one double.
    """
    from difgen.targets.c.abi import STACK_DOUBLES  # abi imports extension, and it us

    scalars = [a.name for a in args if not a.per_point and a.shape == ()]
    ctx, work = f"{PREFIX}ctx_{name}", f"{PREFIX}work_{name}"
    fields = [
        "PyObject *const *in;",
        "double *const *out;",
        "npy_intp k;",
        *(f"double s_{s};" for s in scalars),
    ]
    struct = f"typedef struct {{ {' '.join(fields)} }} {ctx};\n"
    body = [
        f"{PREFIX}block *const {PREFIX}b = ({PREFIX}block *){PREFIX}arg;",
        f"const {ctx} *const {PREFIX}cp = (const {ctx} *){PREFIX}b->call;",
        f"PyObject *const *const {PREFIX}in = {PREFIX}cp->in;",
        f"double *const *const {PREFIX}out = {PREFIX}cp->out;",
        f"const npy_intp {PREFIX}k = {PREFIX}cp->k;",
        *(f"const double {PREFIX}s_{s} = {PREFIX}cp->s_{s};" for s in scalars),
        *code.per_thread,
    ]
    if code.work and code.work <= STACK_DOUBLES:
        body += [
            f"double {PREFIX}stack[{code.work}];",
            f"double *const {PREFIX}w = {PREFIX}stack;",
        ]
    elif code.work:
        body += [
            f"double *const {PREFIX}w = (double *)malloc(sizeof(double) * {code.work});",
            f"if ({PREFIX}w == NULL) {{ {PREFIX}b->failed = 1; return NULL; }}",
        ]
    body += [
        f"(void){PREFIX}k;",
        (
            f"for (npy_intp {PREFIX}i = {PREFIX}b->start; {PREFIX}i < {PREFIX}b->stop; "
            f"{PREFIX}i++) {{"
        ),
        *(f"    {line}" for line in code.at_point),
        "}",
    ]
    if code.work > STACK_DOUBLES:
        body.append(f"free({PREFIX}w);")
    body.append("return NULL;")
    source = (
        struct
        + f"static void *\n{work}(void *{PREFIX}arg)\n{{\n"
        + "".join(f"    {line}\n" for line in body)
        + "}\n"
    )
    values = [f"{PREFIX}in", f"{PREFIX}out", f"{PREFIX}k"]
    values += [f"{PREFIX}s_{s}" for s in scalars]
    call = f"const {ctx} {PREFIX}c = {{{', '.join(values)}}};"
    return call, source


HELPERS = (
    (naming.AS_POINTS, naming.AS_POINTS),
    (naming.POINTS_OUT, naming.POINTS_OUT),
)
"""What the extension's ``_bind`` is given for the points variants: the module's
own ``_as_points`` and ``_points_out``."""
