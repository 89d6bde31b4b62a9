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

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp
from sympy.printing.codeprinter import PrintMethodNotImplementedError

from difgen import floats, naming
from difgen.config import ModuleSpec
from difgen.errors import ConfigError
from difgen.operators import Operator, result_shape, seed_shape
from difgen.render.module import Function
from difgen.targets.c import glue as c_glue
from difgen.targets.c import points as c_points
from difgen.targets.numpy.printer import CsrFormat, csr_format, index_itemsize
from difgen.targets.python.printer import (
    FloatPrinter,
    Reduced,
    ScalarCode,
    SparseResult,
    reduce,
    used_symbols,
)
from difgen.targets.python.printer import (
    emit_operator as emit_python,
)
from difgen.targets.signatures import is_sparse, sparse_out

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
C_LIBRARY = frozenset(
    [
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "atan2",
        "sinh",
        "cosh",
        "tanh",
        "asinh",
        "acosh",
        "atanh",
        "exp",
        "expm1",
        "log",
        "log1p",
        "log2",
        "log10",
        "sqrt",
        "pow",
        "fabs",
        "floor",
        "ceil",
        "fmod",
        "fmax",
        "fmin",
        "copysign",
        "hypot",
        "cbrt",
        "INFINITY",
        "NAN",
        "HUGE_VAL",
    ]
)
"""Names C or its math library define: an argument may not be called one of them."""

_C_FUNCTIONS = {name: floats.helper(name) for name in floats.FAST_UNARY}
_C_FUNCTIONS.update({name: floats.helper(name) for name in floats.NUMPY_UNARY})
_C_FUNCTIONS.update({"atan": "atan", "tanh": "tanh", "asinh": "asinh"})
_C_FUNCTIONS["atan2"] = "atan2"  # math.atan2 is C99's atan2, special values included

_PYTHON_ONLY = re.compile(r"\b(if|else|and|or|not|True|False|None|math|lambda)\b|\*\*")
"""Python syntax that must never reach the C file (it would mean the printer
missed a construct; better refuse than compile something else)."""


class CPrinter(FloatPrinter):
    """The scalar emission's printer with C spellings where Python's differ."""

    def __init__(self) -> None:
        super().__init__()
        self._settings["user_functions"] = dict(_C_FUNCTIONS)
        self.known_functions = dict(_C_FUNCTIONS)

    def _module_format(self, fqn: str, register: bool = True) -> str:
        return fqn.split(".")[-1]  # math.atan2 -> atan2

    def _print_known_func(self, expr: Any) -> str:
        if type(expr).__name__ not in self.known_functions:  # Python's, not C's
            raise Unsupported(f"no C form of {type(expr).__name__}")
        return str(super()._print_known_func(expr))

    def _print_Heaviside(self, expr: Any) -> str:
        z = self._print(expr.args[0])
        return f"(({z}) > 0.0 ? 1.0 : ({z}) < 0.0 ? 0.0 : 0.5)"

    def _print_Piecewise(self, expr: Any) -> str:
        text = ""
        closing = ""
        for value, cond in expr.args:
            if cond in (True, sp.true):
                return text + f"({self._print(value)})" + closing
            text += f"(({self._print(cond)}) ? ({self._print(value)}) : "
            closing += ")"
        return text + "NAN" + closing  # no branch taken: SymPy's undefined value

    def _print_And(self, expr: Any) -> str:
        return "(" + " && ".join(f"({self._print(a)})" for a in expr.args) + ")"

    def _print_Or(self, expr: Any) -> str:
        return "(" + " || ".join(f"({self._print(a)})" for a in expr.args) + ")"

    def _print_Not(self, expr: Any) -> str:
        return f"(!({self._print(expr.args[0])}))"

    def _print_BooleanTrue(self, expr: Any) -> str:
        return "1"

    def _print_BooleanFalse(self, expr: Any) -> str:
        return "0"

    def _print_Abs(self, expr: Any) -> str:
        return f"fabs({self._print(expr.args[0])})"

    def _print_Pi(self, expr: Any) -> str:
        return repr(math.pi)

    def _print_Exp1(self, expr: Any) -> str:
        return repr(math.e)


PRINTER = CPrinter()


class Unsupported(Exception):
    """An expression the C printer cannot print faithfully."""


def c_expr(expr: Any) -> str:
    """One expression as C; :class:`Unsupported` rather than a doubtful print."""
    try:
        text = PRINTER.doprint(expr)
    except PrintMethodNotImplementedError as exc:  # a function C has no print for
        raise Unsupported(str(exc).splitlines()[0]) from None
    found = _PYTHON_ONLY.search(text)
    if found:
        raise Unsupported(f"{found.group(0)!r} in {text[:120]}")
    symbols = {str(s) for s in getattr(expr, "free_symbols", ())}
    undefined = set(_HELPER_USE.findall(text)) - C_HELPERS - symbols
    if undefined:  # a helper of difgen.floats the C runtime does not define
        raise Unsupported(f"{', '.join(sorted(undefined))} in {text[:120]}")
    return text


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


def _unpack(arg: Argument, symbols: np.ndarray, used: set[sp.Symbol]) -> list[str]:
    """Convert one argument and read the elements the code uses into doubles."""
    if arg.shape == ():
        return [
            f"double {arg.name};",
            (
                f'if ({PREFIX}scalar({{argv}}, "{arg.name}", &{arg.name}) < 0) '
                f"goto {PREFIX}fail;"
            ),
        ]
    lines = [
        f"static const npy_intp {PREFIX}dims_{arg.name}[] = {_dims(arg.shape)};",
        (
            f"PyArrayObject *{PREFIX}a_{arg.name} = {PREFIX}array({{argv}}, "
            f'"{arg.name}", {len(arg.shape)}, {PREFIX}dims_{arg.name});'
        ),
        f"if ({PREFIX}a_{arg.name} == NULL) goto {PREFIX}fail;",
    ]
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


def csr_pattern(
    stem: str, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]
) -> tuple[str, str]:
    """The C definition of an operator's sparsity pattern (``dg_pattern``: tables
    in the dtype of the module's own index constants, which SciPy keeps in the CSR
    arrays the operator returns; see ``vector_code.index_itemsize``), and its name:
    what ``dg_csr_data`` compares a CSR ``out`` with, in C, instead of calling the
    module's ``_check_csr_out`` (two ``np.array_equal``, ~5 us) on every call."""
    name = f"{PREFIX}{stem}_pattern"
    nnz = int(np.asarray(indices).size)
    itemsize = index_itemsize(shape, nnz)
    ctype = "npy_int32" if itemsize == 4 else "npy_int64"
    tables = []
    for part, values in (("indices", indices), ("indptr", indptr)):
        flat = np.asarray(values, dtype=np.int64).ravel()
        items = [str(int(v)) for v in flat] or ["0"]
        rows = ",\n    ".join(
            ", ".join(items[i : i + 16]) for i in range(0, len(items), 16)
        )
        tables.append(
            f"static const {ctype} {name}_{part}[{len(items)}] = "
            f"{{\n    {rows}\n}};"
        )
    source = "\n".join(tables) + (
        f"\nstatic const {PREFIX}pattern {name} = {{{int(shape[0])}, "
        f"{int(shape[1])}, {nnz}, {itemsize}, {name}_indices, {name}_indptr}};\n"
    )
    return source, name


def _csr_out_lines(
    k: int, kind: str, exprs: list[str], out: str, pattern: str
) -> list[str]:
    """A sparse last result: into ``out.data`` when ``out`` is given (checked
    against ``pattern``, as the module's ``_check_csr_out`` checks it), else a new
    CSR array."""
    res, data = f"{PREFIX}res[{k}]", f"{PREFIX}sdata"
    return [
        f"static const npy_intp {PREFIX}rdims_{k}[] = {{{len(exprs)}}};",
        f"PyObject *{data} = NULL;",
        f"if ({out} != NULL && {out} != Py_None) {{",
        f'    {data} = {PREFIX}csr_data({out}, "{kind}.out", &{pattern});',
        f"    if ({data} == NULL) goto {PREFIX}fail;",
        "}",
        f"{res} = {PREFIX}result(NULL, {data}, 1, {PREFIX}rdims_{k}, &{PREFIX}d);",
        f"if ({res} == NULL) {{ Py_XDECREF({data}); goto {PREFIX}fail; }}",
        *(f"{PREFIX}d[{i}] = {e};" for i, e in enumerate(exprs)),
        f"{res} = {PREFIX}into_out({res}, {data}, 1, {PREFIX}rdims_{k});",
        f"if ({res} == NULL) {{ Py_XDECREF({data}); goto {PREFIX}fail; }}",
        f"if ({data} != NULL) {{",
        f"    Py_DECREF({res});",
        f"    Py_DECREF({data});",
        f"    Py_INCREF({out});",
        f"    {res} = {out};",
        "} else {",
        f'    {res} = {PREFIX}wrap({res}, "{kind}");',
        f"    if ({res} == NULL) goto {PREFIX}fail;",
        "}",
    ]


RECYCLE_MAX = 1024
"""Dense results of at most this many elements are recycled (``dg_recycled``):
allocating a small NumPy array is most of a small operator's call, while keeping
two larger ones alive per result would cost memory for no visible gain."""


def recycle_lines(k: int, shape: tuple[int, ...]) -> list[str]:
    """The slots of result ``k`` when :func:`fresh_array` recycles it."""
    if math.prod(shape) > RECYCLE_MAX:
        return []
    return [f"static {PREFIX}slots {PREFIX}slots_{k};"]


def fresh_array(
    k: int, shape: tuple[int, ...], data: str, out: str | None = None
) -> str:
    """The array dense result ``k`` is written to (its dims are ``dg_rdims_<k>``):
    ``out`` when the operator takes one and it can be written directly, else a new
    one, recycled when small (see :data:`RECYCLE_MAX`)."""
    dims = f"{len(shape)}, {PREFIX}rdims_{k}, {data}"
    slots = "NULL" if math.prod(shape) > RECYCLE_MAX else f"&{PREFIX}slots_{k}"
    if out is not None:
        return f"{PREFIX}result({slots}, {out}, {dims})"
    if slots == "NULL":
        return f"{PREFIX}new({dims})"
    return f"{PREFIX}recycled({slots}, {dims})"


def _result_lines(
    k: int,
    kind: str,
    exprs: list[str],
    shape: tuple[int, ...],
    out: str | None,
    sparse: bool,
    pattern: str | None = None,
) -> list[str]:
    """Build result ``k`` into ``dg_res[k]`` (a float, an array, or a CSR array)."""
    res = f"{PREFIX}res[{k}]"
    if sparse and out is not None:
        assert pattern is not None  # a CSR out= has its pattern baked
        return _csr_out_lines(k, kind, exprs, out, pattern)
    if sparse or shape != ():
        dims = shape if not sparse else (len(exprs),)
        lines = [f"static const npy_intp {PREFIX}rdims_{k}[] = {_dims(dims)};"]
        if sparse:  # the CSR array keeps it: nothing to recycle
            target = f"{PREFIX}new({len(dims)}, {PREFIX}rdims_{k}, &{PREFIX}d)"
        else:
            lines += recycle_lines(k, dims)
            target = fresh_array(k, dims, f"&{PREFIX}d", out)
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
                    f"{res} = {PREFIX}into_out({res}, {out}, {len(dims)}, "
                    f"{PREFIX}rdims_{k});"
                ),
                f"if ({res} == NULL) goto {PREFIX}fail;",
            ]
        if sparse:
            lines += [
                f'{res} = {PREFIX}wrap({res}, "{kind}");',
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
    quoted = ", ".join(f'"{n}"' for n in names)
    body = [
        f"PyObject *{PREFIX}argv[{len(names)}] = {{{_nulls(len(names))}}};",
        f"PyObject *{PREFIX}res[{nres}] = {{{_nulls(nres)}}};",
        f"double *{PREFIX}d = NULL;",
        f"(void){PREFIX}d;",
        f"static const char *const {PREFIX}names[] = {{{quoted}}};",
        (
            f'if ({PREFIX}parse("{op.name}", {PREFIX}args, {PREFIX}nargs, '
            f"{PREFIX}kwnames, {PREFIX}names, {len(names)}, {len(args)}, "
            f"{PREFIX}argv) < 0) return NULL;"
        ),
    ]
    for i, arg in enumerate(args):
        lines = _unpack(arg, code.arrays[arg.name], used)
        body += [line.replace("{argv}", f"{PREFIX}argv[{i}]") for line in lines]
    body += [f"const double {t} = {c_expr(e)};" for t, e in temps]
    it = iter(reduced)
    out = f"{PREFIX}argv[{len(args)}]" if takes_out or csr_out else None
    pattern_source, pattern = "", None
    for k, (kind, r) in enumerate(zip(op.results, code.results)):
        size = r.size if isinstance(r, SparseResult) else int(np.prod(r.shape))
        exprs = [c_expr(next(it)) for _ in range(size)]
        last = k == nres - 1
        if last and csr_out and isinstance(r, SparseResult):
            pattern_source, pattern = csr_pattern(op.name, r.indices, r.indptr, r.shape)
        body += _result_lines(
            k, kind, exprs, shapes[k], out if last else None, sparse[k], pattern
        )
    body += return_lines(nres)
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
    return CFunction(op.name, source, f"{op.name}({params})\\n--\\n\\n")


def emit_operator(
    op: Operator, spec: ModuleSpec, ys: tuple[int, ...], code: ScalarCode
) -> Function:
    """The scalar emission's :class:`Function`, carrying its C twin in ``native``."""
    check_names(spec)
    reduction = reduce(code)
    function = emit_python(op, spec, ys, code, reduction)
    try:
        native = c_function(op, spec, ys, code, reduction)
    except Unsupported as exc:
        raise ConfigError(
            spec.config_path,
            spec.line_of("emit"),
            f'emit = "c" cannot print {op.name} as C ({exc}); use "scalar"',
        ) from None
    native_points = (
        _points_native(op, spec, ys, code, reduction) if spec.points else None
    )
    formats: dict[int, CsrFormat] = {
        i: csr_format(kind, r.indices, r.indptr, r.shape, code.constants)
        for i, (kind, r) in enumerate(zip(op.results, code.results))
        if isinstance(r, SparseResult)
    }
    wrappers = c_glue.csr_helpers(op.results, formats, sparse_out(op, spec))
    return Function(
        function.name,
        function.signature,
        function.returns,
        function.doc,
        function.body,
        function.checked,
        native=native.source,
        native_doc=native.doc + function.doc,
        wrappers=wrappers,
        native_points=native_points,
    )


def _points_native(
    op: Operator,
    spec: ModuleSpec,
    ys: tuple[int, ...],
    code: ScalarCode,
    reduction: Reduced,
) -> tuple[str, str]:
    """(C source, text signature) of the operator's points variant: one loop over
    the points running this operator's statements, printed by the same printer
    (:mod:`difgen.targets.c.points`)."""
    temps, reduced = reduction
    it = iter(reduced)
    results = [
        [c_expr(next(it)) for _ in range(int(np.prod(r.shape)))] for r in code.results
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
            [(str(t), c_expr(e)) for t, e in temps],
            results,
        ),
    )
    return printed.source, printed.doc


RUNTIME = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <math.h>
#include <string.h>

/* The Python module's own argument checks and result wrappers (bound by _bind). */
static PyObject *dg_helpers = NULL;
static PyObject *dg_as_array_fn = NULL, *dg_as_scalar_fn = NULL, *dg_check_out_fn = NULL;

/* NumPy's semantics, as the helpers of difgen/floats.py give them to Python: in C
   the IEEE operations and libm already return NumPy's NaN and inf. */
#define _div(a, b) ((a) / (b))
#define _pow(a, b) pow((a), (b))
#define _sin sin
#define _cos cos
#define _tan tan
#define _asin asin
#define _acos acos
#define _sinh sinh
#define _cosh cosh
#define _acosh acosh
#define _atanh atanh
#define _exp exp
#define _expm1 expm1
#define _log log
#define _log1p log1p
#define _log2 log2
#define _log10 log10
#define _sqrt sqrt
#define _INF INFINITY
#define _NINF (-INFINITY)
#define _NAN NAN

/* np.maximum / np.minimum: NaN if either is NaN; of equal values (0.0, -0.0) the
   second, as NumPy (and difgen/floats.py) give it. */
static inline double _maximum(double a, double b) { return (a > b || a != a) ? a : b; }
static inline double _minimum(double a, double b) { return (a < b || a != a) ? a : b; }
static inline double _sign(double a)
{
    return a == a ? (double)((a > 0.0) - (a < 0.0)) : a;
}

/* np.floor, np.ceil, np.trunc, np.rint, np.fmod, np.hypot, np.exp2: libm's (IEEE:
   NaN and inf unchanged, the sign of a zero kept; rint rounds half to even). */
#define _floor floor
#define _ceil ceil
#define _trunc trunc
#define _rint rint
#define _fmod fmod
#define _hypot hypot
#define _exp2 exp2

/* np.remainder: NumPy's npy_remainder (npy_divmod), the sign of the divisor. */
static inline double _remainder(double a, double b)
{
    double mod = fmod(a, b);
    if (!b) return mod;
    if (mod) {
        if ((b < 0) != (mod < 0)) mod += b;
    }
    else {
        mod = copysign(0.0, b);
    }
    return mod;
}

/* np.logaddexp and np.logaddexp2: NumPy's npy_logaddexp(2), the same libm calls. */
static inline double _logaddexp(double a, double b)
{
    if (a == b) return a + 0.6931471805599453;
    double d = a - b;
    if (d > 0.0) return a + log1p(exp(-d));
    if (d <= 0.0) return b + log1p(exp(d));
    return d;
}

static inline double _logaddexp2(double a, double b)
{
    if (a == b) return a + 1.0;
    double d = a - b;
    if (d > 0.0) return a + 1.4426950408889634 * log1p(exp2(-d));
    if (d <= 0.0) return b + 1.4426950408889634 * log1p(exp2(d));
    return d;
}

/* Positional and keyword arguments, as a Python function with these parameters
   (the first `required` without a default, the rest defaulting to None). The
   common call, positional arguments only and all the required ones given, is
   decided first, inline: it needs no name lookup. */
static int dg_parse_slow(const char *fname, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames, const char *const *names, int nparams,
                         int required, PyObject **argv);

static inline int
dg_parse(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
         const char *const *names, int nparams, int required, PyObject **argv)
{
    if (kwnames == NULL && nargs >= required && nargs <= nparams) {
        for (Py_ssize_t i = 0; i < nargs; i++) argv[i] = args[i];
        return 0;
    }
    return dg_parse_slow(fname, args, nargs, kwnames, names, nparams, required, argv);
}

static int
dg_parse_slow(const char *fname, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames, const char *const *names, int nparams, int required,
              PyObject **argv)
{
    if (nargs > nparams) {
        PyErr_Format(PyExc_TypeError,
                     "%s() takes %d positional arguments but %zd were given",
                     fname, nparams, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) argv[i] = args[i];
    if (kwnames != NULL) {
        Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t k = 0; k < nkw; k++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, k);
            int found = -1;
            for (int j = 0; j < nparams; j++) {
                if (PyUnicode_CompareWithASCIIString(key, names[j]) == 0) {
                    found = j;
                    break;
                }
            }
            if (found < 0) {
                PyErr_Format(PyExc_TypeError,
                             "%s() got an unexpected keyword argument '%U'", fname, key);
                return -1;
            }
            if (argv[found] != NULL) {
                PyErr_Format(PyExc_TypeError,
                             "%s() got multiple values for argument '%s'", fname,
                             names[found]);
                return -1;
            }
            argv[found] = args[nargs + k];
        }
    }
    for (int j = 0; j < required; j++) {
        if (argv[j] == NULL) {
            PyErr_Format(PyExc_TypeError,
                         "%s() missing 1 required positional argument: '%s'", fname,
                         names[j]);
            return -1;
        }
    }
    return 0;
}

static PyObject *
dg_shape(int nd, const npy_intp *dims)
{
    PyObject *shape = PyTuple_New(nd);
    if (shape == NULL) return NULL;
    for (int i = 0; i < nd; i++) {
        PyObject *n = PyLong_FromSsize_t((Py_ssize_t)dims[i]);
        if (n == NULL) {
            Py_DECREF(shape);
            return NULL;
        }
        PyTuple_SET_ITEM(shape, i, n);
    }
    return shape;
}

static int
dg_same_shape(PyArrayObject *a, int nd, const npy_intp *dims)
{
    if (PyArray_NDIM(a) != nd) return 0;
    const npy_intp *have = PyArray_DIMS(a);
    for (int i = 0; i < nd; i++) {
        if (have[i] != dims[i]) return 0;
    }
    return 1;
}

/* An array argument as a C-contiguous float64 array of its shape (a new
   reference): as it is on the fast path (inline), else through the module's
   _as_array, which converts it or raises exactly as the Python operators do. */
static PyArrayObject *dg_array_slow(PyObject *obj, const char *name, int nd,
                                    const npy_intp *dims);

static inline PyArrayObject *
dg_array(PyObject *obj, const char *name, int nd, const npy_intp *dims)
{
    if (PyArray_CheckExact(obj)) {
        PyArrayObject *a = (PyArrayObject *)obj;
        if (PyArray_TYPE(a) == NPY_DOUBLE && PyArray_ISCARRAY_RO(a) &&
            PyArray_ISNOTSWAPPED(a) && dg_same_shape(a, nd, dims)) {
            Py_INCREF(obj);
            return a;
        }
    }
    return dg_array_slow(obj, name, nd, dims);
}

/* An argument off the fast path, converted by the module's own check `fn`
   (_as_array, or _as_points with the number of points `count` when count >= 0):
   a C-contiguous float64 array (a new reference), or NULL with the error `fn`
   raised, exactly as the Python operators convert or refuse it. */
static PyArrayObject *
dg_convert(PyObject *fn, const char *name, PyObject *obj, int nd, const npy_intp *dims,
           npy_intp count)
{
    if (fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "difgen extension used before _bind");
        return NULL;
    }
    PyObject *shape = dg_shape(nd, dims);
    if (shape == NULL) return NULL;
    PyObject *conv = count < 0
        ? PyObject_CallFunction(fn, "sOO", name, obj, shape)
        : PyObject_CallFunction(fn, "sOOn", name, obj, shape, (Py_ssize_t)count);
    Py_DECREF(shape);
    if (conv == NULL) return NULL;
    PyObject *arr = PyArray_FROMANY(conv, NPY_DOUBLE, 0, 0, NPY_ARRAY_IN_ARRAY);
    Py_DECREF(conv);
    return (PyArrayObject *)arr;
}

/* The conversion (or the error) when the argument is not on the fast path. */
static PyArrayObject *
dg_array_slow(PyObject *obj, const char *name, int nd, const npy_intp *dims)
{
    return dg_convert(dg_as_array_fn, name, obj, nd, dims, -1);
}

/* A scalar argument: a float as it is, anything else through _as_scalar. */
static int
dg_scalar(PyObject *obj, const char *name, double *value)
{
    if (PyFloat_Check(obj)) {
        *value = PyFloat_AS_DOUBLE(obj);
        return 0;
    }
    if (dg_as_scalar_fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "difgen extension used before _bind");
        return -1;
    }
    PyObject *conv = PyObject_CallFunction(dg_as_scalar_fn, "sO", name, obj);
    if (conv == NULL) return -1;
    *value = PyFloat_AsDouble(conv);
    Py_DECREF(conv);
    return (*value == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

/* NumPy's float64 descriptor, looked up once (PyArray_SimpleNew looks it up on
   every call; a new result array is most of a small operator's cost). */
static PyArray_Descr *dg_float64 = NULL;

/* A new C-contiguous float64 array of `dims` (what PyArray_SimpleNew makes). */
static PyObject *
dg_new(int nd, const npy_intp *dims, double **data)
{
    if (dg_float64 == NULL) {
        dg_float64 = PyArray_DescrFromType(NPY_DOUBLE);
        if (dg_float64 == NULL) return NULL;
    }
    Py_INCREF(dg_float64); /* PyArray_NewFromDescr steals a reference */
    PyObject *a = PyArray_NewFromDescr(&PyArray_Type, dg_float64, nd, (npy_intp *)dims,
                                       NULL, NULL, 0, NULL);
    if (a != NULL) *data = (double *)PyArray_DATA((PyArrayObject *)a);
    return a;
}

/* Small result arrays recycled. Each result of an operator keeps the last two
   arrays it returned (a loop `g = gradient(x)` still holds the newer one during
   the next call) and reuses one when nothing else can reach it: its reference
   count is 1 (ours: no variable, container, view or buffer export holds it), no
   weak reference was taken, and its type, dtype, shape, strides and flags are
   still those it was made with. The array is then indistinguishable from a new
   one, and every element is overwritten, as a new array's would be. Free-threaded
   builds, where a count of 1 proves nothing, always allocate. Only results of
   at most RECYCLE_MAX elements (c_code.py) are made here. */

typedef struct {
    PyObject *array[2];
    int flags[2];
    int next;
} dg_slots;

static int
dg_unreachable(PyObject *obj, int flags, int nd, const npy_intp *dims)
{
#ifdef Py_GIL_DISABLED
    return 0;
#else
    if (obj == NULL || Py_REFCNT(obj) != 1 || Py_TYPE(obj) != &PyArray_Type) return 0;
    PyArrayObject *a = (PyArrayObject *)obj;
    PyArrayObject_fields *fields = (PyArrayObject_fields *)obj;
    if (fields->weakreflist != NULL || PyArray_BASE(a) != NULL ||
        PyArray_DESCR(a) != dg_float64 || PyArray_FLAGS(a) != flags ||
        !dg_same_shape(a, nd, dims)) {
        return 0;
    }
    npy_intp stride = sizeof(double);
    for (int i = nd - 1; i >= 0; i--) {
        if (PyArray_STRIDES(a)[i] != stride) return 0;
        stride *= dims[i];
    }
    return 1;
#endif
}

/* dg_new, or an array of `slots` that nothing else can reach any more. */
static PyObject *
dg_recycled(dg_slots *slots, int nd, const npy_intp *dims, double **data)
{
    for (int i = 0; i < 2; i++) {
        PyObject *a = slots->array[i];
        if (dg_unreachable(a, slots->flags[i], nd, dims)) {
            Py_INCREF(a);
            *data = (double *)PyArray_DATA((PyArrayObject *)a);
            return a;
        }
    }
    PyObject *a = dg_new(nd, dims, data);
#ifndef Py_GIL_DISABLED
    if (a != NULL) {
        int k = slots->next;
        Py_INCREF(a);
        Py_XSETREF(slots->array[k], a);
        slots->flags[k] = PyArray_FLAGS((PyArrayObject *)a);
        slots->next = 1 - k;
    }
#endif
    return a;
}

/* Whether `out` can be written directly: an exact, writeable, aligned,
   C-contiguous native float64 array of the result's shape. */
static int
dg_out_direct(PyObject *out, int nd, const npy_intp *dims)
{
    if (out == NULL || !PyArray_CheckExact(out)) return 0;
    PyArrayObject *a = (PyArrayObject *)out;
    return PyArray_TYPE(a) == NPY_DOUBLE && PyArray_ISCARRAY(a) &&
           PyArray_ISNOTSWAPPED(a) && dg_same_shape(a, nd, dims);
}

/* Where the last result goes: `out` itself when it can be written directly,
   else a fresh array (dg_into_out then checks and copies, as Python does),
   recycled from `slots` unless they are NULL. */
static PyObject *
dg_result(dg_slots *slots, PyObject *out, int nd, const npy_intp *dims, double **data)
{
    if (out != NULL && out != Py_None && dg_out_direct(out, nd, dims)) {
        Py_INCREF(out);
        *data = (double *)PyArray_DATA((PyArrayObject *)out);
        return out;
    }
    return slots == NULL ? dg_new(nd, dims, data) : dg_recycled(slots, nd, dims, data);
}

/* `result` returned as it is when there is no out or it was written in place;
   else `_check_out(out, shape); out[...] = result; return out`. Steals result. */
static PyObject *
dg_into_out(PyObject *result, PyObject *out, int nd, const npy_intp *dims)
{
    if (out == NULL || out == Py_None || result == out) return result;
    PyObject *shape = dg_shape(nd, dims);
    if (shape == NULL) {
        Py_DECREF(result);
        return NULL;
    }
    PyObject *ok = PyObject_CallFunctionObjArgs(dg_check_out_fn, out, shape, NULL);
    Py_DECREF(shape);
    if (ok == NULL || PyObject_SetItem(out, Py_Ellipsis, result) < 0) {
        Py_XDECREF(ok);
        Py_DECREF(result);
        return NULL;
    }
    Py_DECREF(ok);
    Py_DECREF(result);
    Py_INCREF(out);
    return out;
}

/* A sparse result's nonzeros wrapped by the module's CSR constructor. Steals data. */
static PyObject *
dg_wrap(PyObject *data, const char *kind)
{
    PyObject *wrap = dg_helpers == NULL ? NULL : PyDict_GetItemString(dg_helpers, kind);
    if (wrap == NULL) {
        Py_DECREF(data);
        PyErr_Format(PyExc_RuntimeError, "difgen extension: no wrapper for %s", kind);
        return NULL;
    }
    PyObject *result = PyObject_CallOneArg(wrap, data);
    Py_DECREF(data);
    return result;
}

/* The pattern of an operator's sparse result, baked as tables of `itemsize`-byte
   signed integers (the dtype of the module's own <KIND>_INDICES/<KIND>_INDPTR,
   which SciPy keeps in the CSR arrays the operator returns). */
typedef struct {
    long rows, cols;
    npy_intp nnz;
    int itemsize;        /* 4 (int32) or 8 (int64) */
    const void *indices; /* nnz entries */
    const void *indptr;  /* rows + 1 entries */
} dg_pattern;

/* Whether `obj` is an exact, aligned, native, C-contiguous 1-D ndarray of `n`
   int32 or int64 indices equal to `table` (what SciPy stores in a CSR array). An
   array of the table's dtype is compared by memcmp; the other width element by
   element (slower, as the operator never returns it). */
static int
dg_same_indices(PyObject *obj, const void *table, int itemsize, npy_intp n)
{
    if (obj == NULL || !PyArray_CheckExact(obj)) return 0;
    PyArrayObject *a = (PyArrayObject *)obj;
    if (PyArray_NDIM(a) != 1 || PyArray_DIM(a, 0) != n || !PyArray_ISCARRAY_RO(a) ||
        !PyArray_ISNOTSWAPPED(a) || !PyArray_ISSIGNED(a))
        return 0;
    const int size = (int)PyArray_ITEMSIZE(a);
    if (n == 0) return size == 4 || size == 8;
    if (size == itemsize) return memcmp(PyArray_DATA(a), table, (size_t)size * n) == 0;
    npy_int64 diff = 0;
    if (size == 4 && itemsize == 8) {
        const npy_int32 *v = (const npy_int32 *)PyArray_DATA(a);
        const npy_int64 *t = (const npy_int64 *)table;
        for (npy_intp i = 0; i < n; i++) diff |= (npy_int64)v[i] ^ t[i];
        return diff == 0;
    }
    if (size == 8 && itemsize == 4) {
        const npy_int64 *v = (const npy_int64 *)PyArray_DATA(a);
        const npy_int32 *t = (const npy_int32 *)table;
        for (npy_intp i = 0; i < n; i++) diff |= v[i] ^ (npy_int64)t[i];
        return diff == 0;
    }
    return 0;
}

/* out.<name> through an interned attribute name (a new reference, or NULL with
   no error set). */
static PyObject *
dg_attr(PyObject *out, PyObject **interned, const char *name)
{
    if (*interned == NULL) {
        *interned = PyUnicode_InternFromString(name);
        if (*interned == NULL) {
            PyErr_Clear();
            return NULL;
        }
    }
    PyObject *value = PyObject_GetAttr(out, *interned);
    if (value == NULL) PyErr_Clear();
    return value;
}

/* out.data when `out` is a CSR array of this pattern whose attributes are
   exactly what the operator itself returns (a new reference); else NULL, with
   no error set. Every object accepted here is one the module's _check_csr_out
   accepts, and the same data array is returned. */
static PyObject *
dg_csr_fast(PyObject *out, const dg_pattern *p)
{
    static PyObject *s_format = NULL, *s_shape = NULL, *s_data = NULL;
    static PyObject *s_indices = NULL, *s_indptr = NULL;
    int ok = 0;
    PyObject *format = dg_attr(out, &s_format, "format");
    PyObject *shape = format == NULL ? NULL : dg_attr(out, &s_shape, "shape");
    PyObject *data = shape == NULL ? NULL : dg_attr(out, &s_data, "data");
    PyObject *indices = data == NULL ? NULL : dg_attr(out, &s_indices, "indices");
    PyObject *indptr = indices == NULL ? NULL : dg_attr(out, &s_indptr, "indptr");
    if (indptr != NULL && PyUnicode_CheckExact(format) &&
        PyUnicode_CompareWithASCIIString(format, "csr") == 0 &&
        PyTuple_CheckExact(shape) && PyTuple_GET_SIZE(shape) == 2 &&
        PyLong_CheckExact(PyTuple_GET_ITEM(shape, 0)) &&
        PyLong_CheckExact(PyTuple_GET_ITEM(shape, 1)) &&
        PyLong_AsLong(PyTuple_GET_ITEM(shape, 0)) == p->rows &&
        PyLong_AsLong(PyTuple_GET_ITEM(shape, 1)) == p->cols &&
        PyArray_CheckExact(data)) {
        PyArrayObject *d = (PyArrayObject *)data;
        ok = PyArray_TYPE(d) == NPY_DOUBLE && PyArray_NDIM(d) == 1 &&
             PyArray_DIM(d, 0) == p->nnz && PyArray_ISCARRAY(d) &&
             PyArray_ISNOTSWAPPED(d) &&
             dg_same_indices(indptr, p->indptr, p->itemsize, p->rows + 1) &&
             dg_same_indices(indices, p->indices, p->itemsize, p->nnz);
    }
    if (PyErr_Occurred()) { /* an overflowing shape: the Python check decides */
        PyErr_Clear();
        ok = 0;
    }
    Py_XDECREF(format);
    Py_XDECREF(shape);
    Py_XDECREF(indices);
    Py_XDECREF(indptr);
    if (!ok) {
        Py_XDECREF(data);
        return NULL;
    }
    return data;
}

/* The data of a CSR `out` of the operator's pattern (a new reference), or NULL
   with the ValueError of the module's _check_csr_out. The common case (a CSR
   array the operator returned, or SciPy's rebuild of one) is checked here
   against the baked pattern; anything else -- a refusal included -- goes to
   _check_csr_out itself, so that the compiled and Python operators accept and
   refuse the same objects with the same messages. */
static PyObject *
dg_csr_data(PyObject *out, const char *key, const dg_pattern *pattern)
{
    PyObject *data = dg_csr_fast(out, pattern);
    if (data != NULL) return data;
    PyObject *check = dg_helpers == NULL ? NULL : PyDict_GetItemString(dg_helpers, key);
    if (check == NULL) {
        PyErr_Format(PyExc_RuntimeError, "difgen extension: no check for %s", key);
        return NULL;
    }
    return PyObject_CallOneArg(check, out);
}

/* A tuple of the results; steals them (clearing the slots) unless it fails. */
static PyObject *
dg_tuple(int n, PyObject **items)
{
    PyObject *t = PyTuple_New(n);
    if (t == NULL) return NULL;
    for (int i = 0; i < n; i++) {
        PyTuple_SET_ITEM(t, i, items[i]);
        items[i] = NULL;
    }
    return t;
}

static PyObject *
dg_bind(PyObject *self, PyObject *helpers)
{
    if (!PyDict_Check(helpers)) {
        PyErr_SetString(PyExc_TypeError, "_bind expects a dict of helpers");
        return NULL;
    }
    PyObject *as_array = PyDict_GetItemString(helpers, "_as_array");
    PyObject *as_scalar = PyDict_GetItemString(helpers, "_as_scalar");
    PyObject *check_out = PyDict_GetItemString(helpers, "_check_out");
    if (as_array == NULL || as_scalar == NULL || check_out == NULL) {
        PyErr_SetString(PyExc_KeyError, "_bind: a helper is missing");
        return NULL;
    }
    Py_INCREF(helpers);
    Py_XSETREF(dg_helpers, helpers);
    dg_as_array_fn = as_array;
    dg_as_scalar_fn = as_scalar;
    dg_check_out_fn = check_out;
    Py_RETURN_NONE;
}
"""
"""The part of every generated C file that does not depend on the module."""

C_HELPERS = frozenset(
    name
    for pair in re.findall(
        r"^#define (_\w+)|^static inline double (_\w+)", RUNTIME, re.MULTILINE
    )
    for name in pair
    if name
)
"""The helpers of :mod:`difgen.floats` the C runtime defines (NumPy's semantics)."""

_HELPER_USE = re.compile(r"(?<![\w.])(_[A-Za-z]\w*)\b")
"""A helper's name in printed C (an argument's element or a temporary named so is
told apart by the expression's symbols)."""

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
    methods.append(
        f'    {{"_bind", (PyCFunction){PREFIX}bind, METH_O, '
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
        RUNTIME,
        *([c_points.RUNTIME] if any(f.points_of for f in functions) else []),
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
    return "\n".join(parts)


def _c_string(text: str) -> str:
    """``text`` inside a C string literal (the docstring's ``\\n`` kept as escapes)."""
    return text.replace('"', '\\"').replace("\n", "\\n")


def _comment(text: str) -> str:
    """``text`` safe inside a C block comment, on one line."""
    return text.replace("*/", "* /").replace("\n", " ")
