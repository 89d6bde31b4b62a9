"""The C function around the loops: the CPython calling convention (parsing the
fast-call arguments, converting and checking them, the result arrays, ``out=``),
the workspace taken and given back, and the results returned (docs/design.md,
section 10). :class:`Signature` is what this glue knows of the operator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from difgen import naming
from difgen.config import ModuleSpec
from difgen.core.ir import Graph, Var
from difgen.operators import Operator, is_sparse, result_shape, seed_shape
from difgen.targets.c import extension as c_code
from difgen.targets.c import glue
from difgen.targets.c.arguments import c_label, convert_lines, parse_lines
from difgen.targets.c.extension import PREFIX
from difgen.targets.c.glue import Used
from difgen.targets.c.program import Store
from difgen.targets.signatures import sparse_out

STACK_DOUBLES = 4096
"""Workspaces up to this many doubles (32 KB) live on the stack."""


@dataclass(frozen=True)
class Signature:
    """What the C function's glue needs to know of the operator."""

    op: Operator
    args: list[tuple[str, tuple[int, ...]]]  # (name, shape), in call order
    shapes: list[tuple[int, ...]]  # of the graph's outputs (sparse: (nnz,))
    sparse: list[bool]
    takes_out: bool  # a dense last result written into out=
    csr_out: bool  # a sparse last result written into a CSR out='s data
    ints: frozenset[str] = frozenset()  # int64 arguments read as doubles (c.ints)
    triangle: str | None = None
    """``triangle``: the last result is a sparse hessian's triangle, the loops
    writing the whole pattern's nonzeros into a buffer of their own
    (:data:`FULL`) that :func:`finish_lines` gathers the triangle's from."""

    @property
    def out(self) -> str | None:
        with_out = self.takes_out or self.csr_out
        return f"{PREFIX}argv[{len(self.args)}]" if with_out else None

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.args] + ([naming.OUT] if self.out else [])

    @property
    def arrays(self) -> list[str]:
        return [n for n, s in self.args if s]


def signature(
    op: Operator,
    spec: ModuleSpec,
    ys: tuple[int, ...],
    graph: Graph,
    ints: tuple[int, ...] = (),
) -> Signature:
    """The glue's view of ``op``; ``ints`` are the positions of the int64
    arguments the graph reads as doubles (:func:`difgen.targets.c.ints.as_doubles`)."""
    xs, batch = tuple(spec.input.shape), spec.batch
    args = [(naming.INPUT, xs)]
    args += [(s, tuple(seed_shape(s, xs, ys, batch))) for s in op.seeds]
    args += [(c.name, tuple(c.shape)) for c in spec.contexts]
    sparse = [is_sparse(k, spec) for k in op.results]
    dense_last = result_shape(op.results[-1], xs, ys, batch)
    triangle = spec.triangle if sparse[-1] and op.results[-1] == "hessian" else None
    return Signature(
        op,
        args,
        [tuple(o.shape) for o in graph.outputs],
        sparse,
        op.takes_out and dense_last != () and not sparse[-1],
        sparse_out(op, spec),
        frozenset(args[i][0] for i in ints),
        triangle,
    )


FULL = f"{PREFIX}full"
"""With a triangle: the buffer of the whole pattern's nonzeros the loops write."""


@dataclass(frozen=True)
class Select:
    """With a triangle: the C table of the triangle's positions among the whole
    pattern's nonzeros (``name``, ``size`` of them) and the whole pattern's
    ``nnz``."""

    name: str
    size: int
    nnz: int


def argument_lines(sig: Signature, use: Used) -> list[str]:
    """Parse the call, convert and check every argument (as the Python module)."""
    nres = len(sig.shapes)
    declare = [
        f"PyObject *{PREFIX}res[{nres}] = {{{glue.nulls(nres)}}};",
        f"PyObject *{PREFIX}sdata = NULL;",
        f"double *{PREFIX}w = NULL;",
        f"int {PREFIX}heap = 0;",
    ]
    if sig.triangle is not None:
        declare.append(f"double *{FULL} = NULL;")
    arrays = [f"PyArrayObject *{PREFIX}a_{a} = NULL;" for a in sig.arrays]
    lines = parse_lines(sig.op.name, sig.names, len(sig.args), use, declare, arrays)
    for i, (name, shape) in enumerate(sig.args):
        argv = f"{PREFIX}argv[{i}]"
        ints = name in sig.ints
        if not shape:
            lines += convert_lines(
                argv, name, (), name, use, function=sig.op.name, ints=ints
            )
            continue
        a = f"{PREFIX}a_{name}"
        lines += convert_lines(
            argv, name, shape, a, use, declared=False, function=sig.op.name, ints=ints
        )
        lines.append(
            f"const double *{PREFIX}p_{name} = (const double *)PyArray_DATA({a});"
        )
    return lines


def buffer_lines(
    sig: Signature, pattern: str | None, use: Used, select: Select | None = None
) -> list[str]:
    """The result arrays, made before the loops write into them: new arrays, or
    ``out`` (its CSR data, checked against ``pattern``) when it can be written
    directly and shares no memory with an argument. With ``select`` (a
    triangle), the last result holds the triangle's nonzeros and the loops
    write the whole pattern's into :data:`FULL`, ``dg_r<k>`` then pointing
    there and ``dg_t<k>`` at the result's data."""
    lines: list[str] = []
    last_k, out = len(sig.shapes) - 1, sig.out
    for k, kind in enumerate(sig.op.results):
        shape, res, r = sig.shapes[k], f"{PREFIX}res[{k}]", f"{PREFIX}r{k}"
        if shape == () and not sig.sparse[k]:
            lines.append(f"double {r} = 0.0;")
            continue
        if k == last_k and select is not None:
            lines += _triangle_buffer(k, kind, sig, pattern, use, select)
            continue
        nd, dims = len(shape), f"{PREFIX}rdims_{k}"
        lines += [
            f"double *{r} = NULL;",
            f"static const npy_intp {dims}[] = {glue.dims(shape)};",
        ]
        fresh = f"{res} = {use('new')}({nd}, {dims}, &{r});"
        if k == last_k and sig.csr_out:
            lines += [
                f"if ({out} != NULL && {out} != Py_None) {{",
                (
                    f"    {PREFIX}sdata = {use('csr_data')}({out}, "
                    f'"{kind}.out", &{pattern});'
                ),
                f"    if ({PREFIX}sdata == NULL) goto {PREFIX}fail;",
                "}",
                (
                    f"{res} = {use('result')}(NULL, {PREFIX}sdata == NULL ? Py_None : "
                    f"{PREFIX}sdata, {nd}, {dims}, &{r});"
                ),
            ]
        elif sig.sparse[k]:  # the CSR array keeps it: nothing to recycle
            lines.append(fresh)
        else:
            taken = out if k == last_k and sig.takes_out else None
            lines += c_code.recycle_lines(k, shape, use)
            fresh_array = c_code.fresh_array(k, shape, "&" + r, use, taken)
            lines.append(f"{res} = {fresh_array};")
        lines.append(f"if ({res} == NULL) goto {PREFIX}fail;")
        if k == last_k and sig.out and sig.arrays:
            overlap = " || ".join(
                f"{use('overlap')}({r}, {int(np.prod(shape))}, "
                f"{PREFIX}p_{n}, {int(np.prod(s))})"
                for n, s in sig.args
                if s
            )
            lines += [
                f"if ({overlap}) {{",
                f"    Py_DECREF({res});",
                f"    {fresh}",
                f"    if ({res} == NULL) goto {PREFIX}fail;",
                "}",
            ]
    return lines


def _triangle_buffer(
    k: int, kind: str, sig: Signature, pattern: str | None, use: Used, select: Select
) -> list[str]:
    """The triangle's result (``out``'s CSR data when given, checked against
    the triangle's ``pattern``) and the whole pattern's buffer the loops write."""
    res, t, dims = f"{PREFIX}res[{k}]", f"{PREFIX}t{k}", f"{PREFIX}rdims_{k}"
    lines = [
        f"double *{t} = NULL;",
        f"static const npy_intp {dims}[] = {{{select.size}}};",
    ]
    if sig.csr_out:
        out = sig.out
        lines += [
            f"if ({out} != NULL && {out} != Py_None) {{",
            f'    {PREFIX}sdata = {use("csr_data")}({out}, "{kind}.out", &{pattern});',
            f"    if ({PREFIX}sdata == NULL) goto {PREFIX}fail;",
            "}",
            (
                f"{res} = {use('result')}(NULL, {PREFIX}sdata == NULL ? Py_None : "
                f"{PREFIX}sdata, 1, {dims}, &{t});"
            ),
        ]
    else:
        lines.append(f"{res} = {use('new')}(1, {dims}, &{t});")
    return lines + [
        f"if ({res} == NULL) goto {PREFIX}fail;",
        f"{FULL} = (double *)malloc(sizeof(double) * {max(select.nnz, 1)});",
        f"if ({FULL} == NULL) {{ PyErr_NoMemory(); goto {PREFIX}fail; }}",
        f"double *{PREFIX}r{k} = {FULL};",
    ]


def gather_lines(k: int, select: Select) -> list[str]:
    """The triangle's nonzeros from the whole pattern's (see :func:`buffer_lines`)."""
    i = f"{PREFIX}i"
    loop = f"for (npy_intp {i} = 0; {i} < {select.size}; {i}++)"
    return [f"{loop} {PREFIX}t{k}[{i}] = {FULL}[{select.name}[{i}]];"]


def workspace_lines(work: int) -> list[str]:
    """The intermediate arrays' memory (see the module docstring)."""
    if not work:
        return []
    if work <= STACK_DOUBLES:
        return [f"double {PREFIX}stack[{work}];", f"{PREFIX}w = {PREFIX}stack;"]
    return [  # the operator's own buffer, unless a call is already using it
        f"static double *{PREFIX}cache = NULL;",
        f"static int {PREFIX}busy = 0;",
        f"if (!{PREFIX}busy) {{",
        (
            f"    if ({PREFIX}cache == NULL) "
            f"{PREFIX}cache = (double *)malloc(sizeof(double) * {work});"
        ),
        f"    {PREFIX}w = {PREFIX}cache;",
        f"    {PREFIX}heap = 2;",
        f"    {PREFIX}busy = 1;",
        "} else {",
        f"    {PREFIX}w = (double *)malloc(sizeof(double) * {work});",
        f"    {PREFIX}heap = 1;",
        "}",
        f"if ({PREFIX}w == NULL) {{ PyErr_NoMemory(); goto {PREFIX}fail; }}",
    ]


def workspace_cleanup(work: int) -> list[str]:
    """Give the workspace back: free a buffer of this call's own, or mark the
    operator's kept buffer free again."""
    cleanup = [f"if ({PREFIX}heap == 1) free({PREFIX}w);"]
    if work > STACK_DOUBLES:
        cleanup.append(f"if ({PREFIX}heap == 2) {PREFIX}busy = 0;")
    return cleanup


def finish_lines(sig: Signature, use: Used) -> list[str]:
    """The results as Python objects: floats, arrays (copied into a given ``out``
    that was not written directly), CSR arrays (or the caller's CSR ``out``)."""
    lines: list[str] = []
    last_k, out = len(sig.shapes) - 1, sig.out
    said = c_label(sig.op.name, naming.OUT)
    for k, kind in enumerate(sig.op.results):
        shape, res = sig.shapes[k], f"{PREFIX}res[{k}]"
        fail = f"if ({res} == NULL) goto {PREFIX}fail;"
        nd, dims = len(shape), f"{PREFIX}rdims_{k}"
        if shape == () and not sig.sparse[k]:
            lines += [f"{res} = PyFloat_FromDouble({PREFIX}r{k});", fail]
        elif k == last_k and sig.sparse[k] and sig.csr_out:
            lines += [
                f"if ({PREFIX}sdata != NULL) {{",
                (
                    f"    {res} = {use('into_out')}({res}, {PREFIX}sdata, {nd}, "
                    f"{dims}, {said});"
                ),
                f"    {fail}",
                f"    Py_DECREF({res});",
                f"    Py_INCREF({out});",
                f"    {res} = {out};",
                "} else {",
                f'    {res} = {use("wrap")}({res}, "{kind}");',
                f"    {fail}",
                "}",
            ]
        elif sig.sparse[k]:
            lines += [f'{res} = {use("wrap")}({res}, "{kind}");', fail]
        elif k == last_k and sig.takes_out:
            lines += [
                (
                    f"{res} = {use('into_out')}({res}, {out} == NULL ? Py_None : {out}, "
                    f"{nd}, {dims}, {said});"
                ),
                fail,
            ]
    return lines


def return_lines(sig: Signature, work: int, use: Used) -> list[str]:
    """Release what the call holds; return the result(s), or NULL on failure."""
    nres = len(sig.shapes)
    cleanup = workspace_cleanup(work)
    cleanup.append(f"Py_XDECREF({PREFIX}sdata);")
    if sig.triangle is not None:
        cleanup.append(f"free({FULL});")
    cleanup += [f"Py_XDECREF({PREFIX}a_{n});" for n in sig.arrays]
    lines = list(cleanup)
    lines += c_code.return_lines(nres, use)
    if nres > 1:
        lines.append(f"goto {PREFIX}failed;")
    lines += [f"{PREFIX}fail:", *cleanup]
    if nres != 1:
        lines.append(f"{PREFIX}failed:")
    lines += [
        (
            f"for (int {PREFIX}k = 0; {PREFIX}k < {nres}; {PREFIX}k++) "
            f"Py_XDECREF({PREFIX}res[{PREFIX}k]);"
        ),
        "return NULL;",
    ]
    return lines


def result_stores(graph: Graph, shapes: list[tuple[int, ...]]) -> list[Store | None]:
    """Each output's result buffer, where the loops may compute it directly
    (None: a repeated output or an argument, copied at the end)."""
    results: list[Store | None] = []
    seen: set[Any] = set()
    for k, atom in enumerate(graph.outputs):
        ok = isinstance(atom, Var) and atom not in seen and atom not in graph.inputs
        results.append(Store(f"{PREFIX}r{k}", shapes[k]) if ok else None)
        seen.add(atom)
    return results


Pattern = tuple[np.ndarray, np.ndarray, tuple[int, int]]
"""A sparse result's CSR ``indices``, ``indptr`` and shape."""
