"""``emit = "c"``: the scalar emission's straight-line code, printed as C.

A module built with ``emit = "c"`` is two files: the usual Python module (scalar
emission, the fallback) and ``NAME__c.c``, a CPython extension computing the same
operators. Both print ONE reduction of the same SymPy expressions
(:func:`difgen.targets.python.printer.reduce`), term for term in the same order and
grouping, so the C code performs the same IEEE operations on the same doubles as
the Python code on Python floats: results are bit-identical wherever both call the
same libm (``math.sin`` is the C library's ``sin``), and differ by at most the last
bits of a libm function otherwise. The compiler is told not to contract or reorder
(``-ffp-contract=off``, no ``-ffast-math``: :data:`difgen.targets.c.compiling.CFLAGS`).
The expressions are printed by :mod:`difgen.targets.c.expressions`; this module
writes the CPython function around them.

NumPy's NaN/inf semantics: Python's scalar code goes through the helpers of
:mod:`difgen.floats` only where Python would *raise*; C's IEEE arithmetic and libm
already return NumPy's NaN or inf there (``1.0 / 0.0``, ``log(0.0)``,
``pow(0.0, -1.0)``, ``exp(1000.0)``, ``sin(inf)``), so the same helper names are
defined as the plain C operations. ``_maximum``, ``_minimum`` and ``_sign`` keep
their NaN propagation as written in :mod:`difgen.floats`.

Arguments are checked as the Python module checks them: the fast path accepts an
exact, aligned, C-contiguous, native float64 ``ndarray`` of the configured shape (or
a ``float`` for a scalar); anything else goes through the Python module's own
``_as_array``/``_as_scalar`` (bound at import), which convert it or raise the same
TypeError/ValueError. ``out`` is written directly when it is an exact writeable
float64 C-contiguous array of the result's shape, else through ``_check_out`` and
``out[...] = result`` exactly as the Python code does.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from difgen import (
    naming,
    precision,
    primitives,  # noqa: F401 (registers every declaration)
)
from difgen.config import ModuleSpec
from difgen.derive.lowering import SparseResult
from difgen.errors import ConfigError
from difgen.operators import Operator, is_sparse, result_shape, seed_shape
from difgen.targets.c import glue as c_glue
from difgen.targets.c import points as c_points
from difgen.targets.c import real as c_real
from difgen.targets.c import runtime as c_runtime
from difgen.targets.c.arguments import c_label, convert_lines, parse_lines
from difgen.targets.c.expressions import (  # noqa: F401 (re-exported)
    C_HELPERS,
    C_LIBRARY,
    CPrinter,
    Unsupported,
    c_expr,
)
from difgen.targets.c.glue import Used
from difgen.targets.c.nest import COMPACT_FROM, compact_table
from difgen.targets.numpy.printer import CsrFormat, csr_format, index_itemsize
from difgen.targets.parts import Function
from difgen.targets.python.printer import (
    Reduced,
    ScalarCode,
    reduce,
    used_symbols,
)
from difgen.targets.python.printer import (
    print_operator as print_python,
)
from difgen.targets.signatures import sparse_out

SUFFIX = naming.C_SUFFIX
"""The extension module of ``NAME.py`` is ``NAME__c`` (its C file ``NAME__c.c``)."""

ZERO_FILL = 16
"""A result with more zero entries than this is zeroed by one memset first."""

PREFIX = c_glue.PREFIX
"""Every name the C code defines itself starts with this (arguments' element
names, temporaries and helpers never do: :func:`check_names`)."""

_dims, _nulls, return_lines = c_glue.dims, c_glue.nulls, c_glue.return_lines
"""Shared with the loop and points operators (:mod:`difgen.targets.c.glue`)."""

C_KEYWORDS = frozenset(
    [
        "auto",
        "break",
        "case",
        "char",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extern",
        "float",
        "for",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "register",
        "restrict",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "struct",
        "switch",
        "typedef",
        "union",
        "unsigned",
        "void",
        "volatile",
        "while",
        "_Bool",
        "_Complex",
        "_Imaginary",
        "NULL",
        "self",
        "args",
        "nargs",
        "kwnames",
    ]
)


class NoCForm(ConfigError):
    """An operator's straight-line code has no C form (``reason`` says which
    function): the sympy backend's module is then built from the graph."""

    def __init__(self, path: Any, line: int | None, message: str, reason: str) -> None:
        super().__init__(path, line, message)
        self.reason = reason

    def __reduce__(self) -> Any:
        return (NoCForm, (self.path, self.line, self.message, self.reason))


def check_names(spec: ModuleSpec) -> None:
    """Argument names must not be C keywords, C library names or ``dg_*``."""
    for c in spec.contexts:
        name = c.name
        if name in C_KEYWORDS or name in C_LIBRARY or name.startswith(PREFIX):
            raise ConfigError(
                spec.config_path,
                spec.line_of("contexts"),
                f'emit = "c": the context name {name!r} is a C keyword or a C '
                f"library name (or starts with {PREFIX!r}); rename it",
            )


@dataclass(frozen=True)
class Argument:
    """One parameter of a C operator: its name, shape and position."""

    name: str
    shape: tuple[int, ...]


def _arguments(op: Operator, spec: ModuleSpec, ys: tuple[int, ...]) -> list[Argument]:
    xs, batch = tuple(spec.input.shape), spec.batch
    args = [Argument(naming.INPUT, xs)]
    args += [Argument(s, tuple(seed_shape(s, xs, ys, batch))) for s in op.seeds]
    args += [Argument(c.name, tuple(c.shape)) for c in spec.contexts]
    return args


def _unpack(
    function: str,
    arg: Argument,
    argv: str,
    symbols: np.ndarray,
    used: set[sp.Symbol],
    use: Used,
) -> list[str]:
    """Convert one argument and read the elements the code uses into doubles."""
    if arg.shape == ():
        return convert_lines(argv, arg.name, (), arg.name, use, function=function)
    lines = convert_lines(
        argv, arg.name, arg.shape, f"{PREFIX}a_{arg.name}", use, function=function
    )
    reads = [
        (i, str(s)) for i, s in enumerate(symbols.ravel()) if s in used
    ]  # flat C order, as ``ravel().tolist()`` reads them
    if reads:
        lines.append(
            f"const double *{PREFIX}p_{arg.name} = "
            f"(const double *)PyArray_DATA({PREFIX}a_{arg.name});"
        )
        lines += [f"const double {n} = {PREFIX}p_{arg.name}[{i}];" for i, n in reads]
    lines.append(f"Py_DECREF({PREFIX}a_{arg.name});")
    return lines


@dataclass(frozen=True)
class CFunction:
    """One operator in C: its source, and what the method table says of it."""

    name: str
    source: str
    doc: str
    runtime: frozenset[str]  # the runtime names it uses (glue.Used)


def csr_pattern(
    stem: str,
    indices: np.ndarray,
    indptr: np.ndarray,
    shape: tuple[int, int],
    use: Used,
    compact: bool = False,
) -> tuple[str, str, list[str]]:
    """The C definition of an operator's sparsity pattern (``dg_pattern``: tables
    in the dtype of the module's own index constants, which SciPy keeps in the CSR
    arrays the operator returns; see ``vector_code.index_itemsize``), and its name:
    what ``dg_csr_data`` compares a CSR ``out`` with, in C, instead of calling the
    module's ``_check_csr_out`` (two ``np.array_equal``) on every call
    (``python -m benchmarks.calibration_c`` times that check against the whole
    compiled call). With ``compact``, a large table is decoded from its runs
    by the statements returned last (:func:`~difgen.targets.c.nest.compact_table`),
    which must run before the check."""
    name = f"{PREFIX}{stem}_pattern"
    nnz = int(np.asarray(indices).size)
    itemsize = index_itemsize(shape, nnz)
    ctype = "npy_int32" if itemsize == 4 else "npy_int64"
    tables = []
    init: list[str] = []
    for part, values in (("indices", indices), ("indptr", indptr)):
        flat = np.asarray(values, dtype=np.int64).ravel()
        if compact and flat.size >= COMPACT_FROM:
            lines, fill = compact_table(f"{name}_{part}", flat, ctype)
            tables += lines
            init += fill
            continue
        items = [str(int(v)) for v in flat] or ["0"]
        rows = ",\n    ".join(
            ", ".join(items[i : i + 16]) for i in range(0, len(items), 16)
        )
        tables.append(
            f"static const {ctype} {name}_{part}[{len(items)}] = "
            f"{{\n    {rows}\n}};"
        )
    source = "\n".join(tables) + (
        f"\nstatic const {use('pattern')} {name} = {{{int(shape[0])}, "
        f"{int(shape[1])}, {nnz}, {itemsize}, {name}_indices, {name}_indptr}};\n"
    )
    return source, name, init


def _csr_out_lines(
    k: int,
    kind: str,
    exprs: list[str],
    out: str,
    pattern: str,
    use: Used,
    said: str,
) -> list[str]:
    """A sparse last result: into ``out.data`` when ``out`` is given (checked
    against ``pattern``, as the module's ``_check_csr_out`` checks it), else a new
    CSR array."""
    res, data = f"{PREFIX}res[{k}]", f"{PREFIX}sdata"
    return [
        f"static const npy_intp {PREFIX}rdims_{k}[] = {{{len(exprs)}}};",
        f"PyObject *{data} = NULL;",
        f"if ({out} != NULL && {out} != Py_None) {{",
        f'    {data} = {use("csr_data")}({out}, "{kind}.out", &{pattern});',
        f"    if ({data} == NULL) goto {PREFIX}fail;",
        "}",
        f"{res} = {use('result')}(NULL, {data}, 1, {PREFIX}rdims_{k}, &{PREFIX}d);",
        f"if ({res} == NULL) {{ Py_XDECREF({data}); goto {PREFIX}fail; }}",
        *(f"{PREFIX}d[{i}] = {e};" for i, e in enumerate(exprs)),
        f"{res} = {use('into_out')}({res}, {data}, 1, {PREFIX}rdims_{k}, {said});",
        f"if ({res} == NULL) {{ Py_XDECREF({data}); goto {PREFIX}fail; }}",
        f"if ({data} != NULL) {{",
        f"    Py_DECREF({res});",
        f"    Py_DECREF({data});",
        f"    Py_INCREF({out});",
        f"    {res} = {out};",
        "} else {",
        f'    {res} = {use("wrap")}({res}, "{kind}");',
        f"    if ({res} == NULL) goto {PREFIX}fail;",
        "}",
    ]


RECYCLE_MAX = 1024
"""Dense results of at most this many elements are recycled (``dg_recycled``):
allocating a small NumPy array is most of a small operator's call, while keeping
two larger ones alive per result would cost memory for no visible gain."""


def recycle_lines(k: int, shape: tuple[int, ...], use: Used) -> list[str]:
    """The slots of result ``k`` when :func:`fresh_array` recycles it."""
    if math.prod(shape) > RECYCLE_MAX:
        return []
    return [f"static {use('slots')} {PREFIX}slots_{k};"]


def fresh_array(
    k: int, shape: tuple[int, ...], data: str, use: Used, out: str | None = None
) -> str:
    """The array dense result ``k`` is written to (its dims are ``dg_rdims_<k>``):
    ``out`` when the operator takes one and it can be written directly, else a new
    one, recycled when small (see :data:`RECYCLE_MAX`)."""
    dims = f"{len(shape)}, {PREFIX}rdims_{k}, {data}"
    slots = "NULL" if math.prod(shape) > RECYCLE_MAX else f"&{PREFIX}slots_{k}"
    if out is not None:
        return f"{use('result')}({slots}, {out}, {dims})"
    if slots == "NULL":
        return f"{use('new')}({dims})"
    return f"{use('recycled')}({slots}, {dims})"


def _result_lines(
    k: int,
    kind: str,
    exprs: list[str],
    shape: tuple[int, ...],
    out: str | None,
    sparse: bool,
    use: Used,
    pattern: str | None = None,
    said: str = '""',
) -> list[str]:
    """Build result ``k`` into ``dg_res[k]`` (a float, an array, or a CSR array);
    ``said`` names ``out`` in its errors (:func:`c_label`)."""
    res = f"{PREFIX}res[{k}]"
    if sparse and out is not None:
        assert pattern is not None  # a CSR out= has its pattern baked
        return _csr_out_lines(k, kind, exprs, out, pattern, use, said)
    if sparse or shape != ():
        dims = shape if not sparse else (len(exprs),)
        lines = [f"static const npy_intp {PREFIX}rdims_{k}[] = {_dims(dims)};"]
        if sparse:  # the CSR array keeps it: nothing to recycle
            target = f"{use('new')}({len(dims)}, {PREFIX}rdims_{k}, &{PREFIX}d)"
        else:
            lines += recycle_lines(k, dims, use)
            target = fresh_array(k, dims, f"&{PREFIX}d", use, out)
        lines += [f"{res} = {target};", f"if ({res} == NULL) goto {PREFIX}fail;"]
        zeros = sum(e == "0.0" for e in exprs)
        if zeros > ZERO_FILL:  # one memset (+0.0 is all zero bits) for many zeros
            lines.append(f"memset({PREFIX}d, 0, sizeof(double) * {len(exprs)});")
            exprs_kept = [(i, e) for i, e in enumerate(exprs) if e != "0.0"]
        else:
            exprs_kept = list(enumerate(exprs))
        lines += [f"{PREFIX}d[{i}] = {e};" for i, e in exprs_kept]
        if out is not None:
            lines += [
                (
                    f"{res} = {use('into_out')}({res}, {out}, {len(dims)}, "
                    f"{PREFIX}rdims_{k}, {said});"
                ),
                f"if ({res} == NULL) goto {PREFIX}fail;",
            ]
        if sparse:
            lines += [
                f'{res} = {use("wrap")}({res}, "{kind}");',
                f"if ({res} == NULL) goto {PREFIX}fail;",
            ]
        return lines
    (e,) = exprs
    return [
        f"{res} = PyFloat_FromDouble({e});",
        f"if ({res} == NULL) goto {PREFIX}fail;",
    ]


def c_function(
    op: Operator,
    spec: ModuleSpec,
    ys: tuple[int, ...],
    code: ScalarCode,
    reduction: Reduced,
) -> CFunction:
    """One operator as a METH_FASTCALL C function over the same reduction."""
    temps, reduced = reduction
    used = used_symbols(reduction)
    args = _arguments(op, spec, ys)
    xs, batch = tuple(spec.input.shape), spec.batch
    shapes = [result_shape(k, xs, ys, batch) for k in op.results]
    sparse = [is_sparse(k, spec) for k in op.results]
    takes_out = op.takes_out and shapes[-1] != () and not sparse[-1]
    csr_out = sparse_out(op, spec)
    names = [a.name for a in args] + ([naming.OUT] if takes_out or csr_out else [])
    nres = len(op.results)
    declare = [
        f"PyObject *{PREFIX}res[{nres}] = {{{_nulls(nres)}}};",
        f"double *{PREFIX}d = NULL;",
        f"(void){PREFIX}d;",
    ]
    use = Used()
    body = parse_lines(op.name, names, len(args), use, declare)
    for i, arg in enumerate(args):
        body += _unpack(
            op.name, arg, f"{PREFIX}argv[{i}]", code.arrays[arg.name], used, use
        )
    body += [f"const double {t} = {c_expr(e, use)};" for t, e in temps]
    it = iter(reduced)
    out = f"{PREFIX}argv[{len(args)}]" if takes_out or csr_out else None
    pattern_source, pattern = "", None
    for k, (kind, r) in enumerate(zip(op.results, code.results)):
        size = r.size if isinstance(r, SparseResult) else int(np.prod(r.shape))
        exprs = [c_expr(next(it), use) for _ in range(size)]
        last = k == nres - 1
        if last and csr_out and isinstance(r, SparseResult):
            pattern_source, pattern, _ = csr_pattern(
                op.name, r.indices, r.indptr, r.shape, use
            )  # small tables: literals
        body += _result_lines(
            k,
            kind,
            exprs,
            shapes[k],
            out if last else None,
            sparse[k],
            use,
            pattern,
            c_label(op.name, naming.OUT),
        )
    body += return_lines(nres, use)
    body += [
        f"{PREFIX}fail:",
        (
            f"for (int {PREFIX}k = 0; {PREFIX}k < {nres}; {PREFIX}k++) "
            f"Py_XDECREF({PREFIX}res[{PREFIX}k]);"
        ),
        "return NULL;",
    ]
    head = (
        f"static PyObject *\n{PREFIX}op_{op.name}(PyObject *{PREFIX}self, "
        f"PyObject *const *{PREFIX}args, Py_ssize_t {PREFIX}nargs, "
        f"PyObject *{PREFIX}kwnames)\n{{\n"
    )
    source = pattern_source + head + "".join(f"    {line}\n" for line in body) + "}\n"
    with_out = takes_out or csr_out
    params = ", ".join(names[:-1] + [f"{naming.OUT}=None"] if with_out else names)
    doc = f"{op.name}({params})\\n--\\n\\n"
    return CFunction(op.name, source, doc, use.frozen())


def print_operator(
    op: Operator, spec: ModuleSpec, ys: tuple[int, ...], code: ScalarCode
) -> Function:
    """The scalar emission's :class:`Function`, carrying its C twin in ``native``."""
    check_names(spec)
    reduction = reduce(code)
    function = print_python(op, spec, ys, code, reduction)
    try:
        native = c_function(op, spec, ys, code, reduction)
    except Unsupported as exc:
        raise NoCForm(
            spec.config_path,
            spec.line_of("emit"),
            f'emit = "c" cannot print {op.name} as C ({exc}); use "scalar"',
            f"no C form of {op.name} ({exc})",
        ) from None
    native_points = (
        _points_native(op, spec, ys, code, reduction) if spec.points else None
    )
    formats: dict[int, CsrFormat] = {
        i: csr_format(kind, r.indices, r.indptr, r.shape, code.constants)
        for i, (kind, r) in enumerate(zip(op.results, code.results))
        if isinstance(r, SparseResult)
    }
    wrappers, uses = c_glue.csr_helpers(op.results, formats, sparse_out(op, spec))
    return dataclasses.replace(
        function.using(uses),
        native=native.source,
        native_doc=native.doc + function.doc,
        native_runtime=native.runtime,
        wrappers=wrappers,
        native_points=native_points,
    )


def _points_native(
    op: Operator,
    spec: ModuleSpec,
    ys: tuple[int, ...],
    code: ScalarCode,
    reduction: Reduced,
) -> tuple[str, str, frozenset[str]]:
    """(C source, text signature, runtime names used) of the operator's points
    variant: one loop over the points running this operator's statements, printed
    by the same printer (:mod:`difgen.targets.c.points`)."""
    temps, reduced = reduction
    it = iter(reduced)
    use = Used()
    results = [
        [c_expr(next(it), use) for _ in range(int(np.prod(r.shape)))]
        for r in code.results
    ]
    printed = c_points.points_function(
        op,
        spec,
        ys,
        lambda args, shapes: c_points.straight_line_body(
            args,
            shapes,
            code.arrays,
            used_symbols(reduction),
            [(str(t), c_expr(e, use)) for t, e in temps],
            results,
        ),
    )
    return printed.source, printed.doc, printed.runtime | use.frozen()


END_MARKER = naming.C_END_MARKER


def render_c_module(
    spec: ModuleSpec,
    functions: list[Function],
    version: str,
    source_hash: str,
    body_hash_placeholder: str,
) -> str:
    """The complete C file of a module (its ``BODY_HASH`` still a placeholder)."""
    module = spec.name + SUFFIX
    methods = [
        f'    {{"{f.name}", (PyCFunction)(void (*)(void)){PREFIX}op_{f.name}, '
        f'METH_FASTCALL | METH_KEYWORDS, "{_c_string(f.native_doc)}"}},'
        for f in functions
        if f.native  # an operator without a C form stays in Python
    ]
    use = Used()
    for f in functions:
        use.add(f.native_runtime)
    methods.append(
        f'    {{"_bind", (PyCFunction){use("bind")}, METH_O, '
        '"Bind the Python module\'s argument checks and wrappers."},'
    )
    parts = [
        f"/* Generated by difgen {version}: derivatives of `{_comment(spec.function)}`.",
        f'SOURCE_HASH = "{source_hash}"',
        "",
        f'The compiled operators of {spec.name}.py (emit = "c"): the same',
        "operations as its Python code, in the same order. Built by",
        "`difgen build --compile` or the package build. DO NOT EDIT.",
        "*/",
        "",
        "/* C_HASH is this file's BODY_HASH: the Python module loads the extension",
        "   only when it names the same C source. */",
        "#define BODY_HASH static const char C_HASH[]",
        f'BODY_HASH = "{body_hash_placeholder}"',
        ";",
        "",
    ]
    code = [
        *(f.native for f in functions if f.native),
        f"static PyMethodDef {PREFIX}methods[] = {{",
        *methods,
        "    {NULL, NULL, 0, NULL}",
        "};",
        "",
        f"static struct PyModuleDef {PREFIX}module = {{",
        f'    PyModuleDef_HEAD_INIT, "{module}", NULL, -1, {PREFIX}methods,',
        "    NULL, NULL, NULL, NULL",
        "};",
        "",
        f"PyMODINIT_FUNC PyInit_{module}(void)",
        "{",
        "    import_array();",
        f"    PyObject *m = PyModule_Create(&{PREFIX}module);",
        "    if (m == NULL) return NULL;",
        '    if (PyModule_AddStringConstant(m, "C_HASH", C_HASH) < 0) {',
        "        Py_DECREF(m);",
        "        return NULL;",
        "    }",
        "    return m;",
        "}",
        END_MARKER,
        "",
    ]
    body = "\n".join(code)
    # The runtime sections its printers reported using, and what they require.
    runtime = c_runtime.source(use.names)
    code_text = runtime + "\n" + body
    if precision.is_float32():  # the same C, in float (difgen.targets.c.real)
        code_text = c_real.to_float32(code_text)
    return "\n".join(parts) + "\n" + code_text


def _c_string(text: str) -> str:
    """``text`` inside a C string literal (the docstring's ``\\n`` kept as escapes)."""
    return text.replace('"', '\\"').replace("\n", "\\n")


def _comment(text: str) -> str:
    """``text`` safe inside a C block comment, on one line."""
    return text.replace("*/", "* /").replace("\n", " ")
