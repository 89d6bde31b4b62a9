"""The C file of a float32 module: the float64 C file's tokens, in float.

The C printers and the runtime (``templates/c/*.c``) write one real type,
``double``, in about 110 places. A float32 module (``input.dtype = "float32"``)
computes in ``float`` instead, and rather than thread a type name through every
printer, its C file is the float64 one with its C *tokens* translated, once, by
:func:`to_float32` (comments and string literals are left as they are):

- ``double`` is ``float`` (declarations, casts, ``sizeof(double)``, tables),
  ``NPY_DOUBLE`` is ``NPY_FLOAT``: arguments are read, and results made, as
  float32 arrays; an argument that is not one goes through the Python module's
  own ``_as_array``, which refuses a float64 array as the NumPy float32 module
  does, and ``out=`` through its ``_check_out``;
- every floating literal gets the ``f`` suffix (``0.5f``): a ``double`` literal
  would promote its float operand to double (C's usual arithmetic conversions),
  and the operation would round once in double and again in float;
- every libm function is its float form (``exp`` is ``expf``, ``pow`` is
  ``powf``...): a double function would compute in double; type-generic
  ``<tgmath.h>`` is not used because an integer argument makes it pick double;
- a scalar result is an ``np.float32`` (``PyFloat_FromDouble`` is
  ``dg_float32_scalar``), as the NumPy float32 module returns it, and a scalar
  argument's fast path takes a Python float only (``PyFloat_CheckExact``: an
  ``np.float64``, a float subclass, is refused by the module's ``_as_scalar``);
- ``npy_double`` is the one spelling of double the translation keeps: a
  printer writes it where a float32 module must hold a double
  (``accumulate = "float64"``), and only then.

So each C operation of a float32 module is one IEEE float operation, as NumPy's
float32 loops do; with ``-ffp-contract=off`` (:data:`~difgen.targets.c.compiling.CFLAGS`)
none is fused. A float64 module's C file never passes through here.
"""

from __future__ import annotations

import re

LIBM = frozenset(
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
        "exp2",
        "log",
        "log1p",
        "log2",
        "log10",
        "sqrt",
        "cbrt",
        "pow",
        "fabs",
        "floor",
        "ceil",
        "trunc",
        "round",
        "rint",
        "nearbyint",
        "fmod",
        "remainder",
        "fmax",
        "fmin",
        "copysign",
        "hypot",
        "erf",
        "erfc",
        "lgamma",
        "tgamma",
    ]
)
"""The C99 math functions with a float form (``name`` + ``f``)."""

RENAMED = {
    "double": "float",
    "NPY_DOUBLE": "NPY_FLOAT",
    "dg_float64": "dg_float32",
    "PyFloat_FromDouble": "dg_float32_scalar",
    # np.float64 is a float subclass: only a Python float takes the fast path,
    # an np.float64 goes to the module's _as_scalar, which refuses it
    "PyFloat_Check": "PyFloat_CheckExact",
    **{name: name + "f" for name in LIBM},
}
"""The identifiers a float32 module's C spells differently."""

_TOKEN = re.compile(
    r"""
    (?P<keep>"(?:\\.|[^"\\\n])*"          # a string literal
      | '(?:\\.|[^'\\\n])*'               # a character literal
      | /\*.*?\*/                         # a block comment
      | //[^\n]*                          # a line comment
      | ^\#[ \t]*include[^\n]*)           # an #include line
    | (?P<number>(?<![\w.])
        (?:\d+\.\d*(?:[eE][+-]?\d+)? | \.\d+(?:[eE][+-]?\d+)? | \d+[eE][+-]?\d+)
        (?![\w.]))
    | (?P<name>\b[A-Za-z_]\w*\b)
    """,
    re.VERBOSE | re.DOTALL | re.MULTILINE,
)

SCALAR = """#include <numpy/arrayscalars.h>

/* A float32 module's scalar result: an np.float32, as its Python code returns. */
static PyObject *
dg_float32_scalar(float value)
{
    PyObject *s = PyArrayScalar_New(Float);
    if (s != NULL) PyArrayScalar_ASSIGN(s, Float, value);
    return s;
}
"""

_PROLOGUE = "#include <string.h>\n"


def to_float32(source: str) -> str:
    """The C file ``source`` (a float64 module's) computing in float."""

    def token(match: re.Match[str]) -> str:
        if match.group("keep") is not None:
            return match.group(0)
        if match.group("number") is not None:
            return match.group(0) + "f"
        name = match.group(0)
        return RENAMED.get(name, name)

    text = _TOKEN.sub(token, source)
    if "dg_float32_scalar" in text:
        if _PROLOGUE not in text:
            raise ValueError("a C file without the runtime's prologue")
        text = text.replace(_PROLOGUE, _PROLOGUE + SCALAR, 1)
    return text
