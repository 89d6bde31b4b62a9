"""Every name that emitted code uses comes from here (Tangent's habit).

Arguments: ``x`` (input), ``dx`` (tangent), ``dy`` (cotangent), ``v`` (hvp direction),
``out`` (result buffer), contexts by their config names. Unpacked scalar elements are
``x_3``, ``dx_3`` (batched: ``dx_1_3``), a whole argument's elements ``x_flat``,
temporaries ``t0, t1, ...``, module constants ``C0, C1, ...`` and named index arrays
such as ``JACOBIAN_INDICES``, values hoisted to import time ``K0, K1, ...``.

Because a context becomes a parameter of every generated function, its name must not
be any name the generated code uses for something else: :func:`context_name_problem`
says why a name is refused (the config reader reports it at the file and line), and
:func:`check_module` re-checks every rendered module, so a clash that this table
missed is an internal error rather than a silently wrong derivative.

>>> context_name_problem("p", ["p"])
>>> context_name_problem("K0", ["K0"])
"'K0' is the form of the names of values computed at import (K0, K1, ...)"
>>> module_name_problem("os")
"'os' is the name of a standard-library module, which the generated file would shadow"
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re
import sys
from collections.abc import Collection, Iterable

from difgen import floats
from difgen.operators import OPERATORS

INPUT = "x"
TANGENT = "dx"
COTANGENT = "dy"
DIRECTION = "v"
OUT = "out"
RESULT = "result"
VALUE = "value"
NPOINTS = "npoints"
"""The number of points, read from ``x.shape[0]`` by every points variant."""
POINTS_SUFFIX = "_points"
"""``gradient_points`` is the points variant of ``gradient`` (``points = true``)."""
BLOCK_SUFFIX = "_block"
"""``_gradient_points_block`` evaluates ``gradient_points`` on one block of points."""
START = "start"
STOP = "stop"
"""A block of points is ``x[start:stop]``."""
RESULTS = "results"
"""The results a points variant of several results fills block by block."""
TEMP_PREFIX = "t"
CONST_PREFIX = "C"
HOISTED_PREFIX = "K"
FLAT_SUFFIX = "_flat"
C_SUFFIX = "__c"
"""``emit = "c"``: the extension of module NAME is NAME__c (source NAME__c.c)."""
C_END_MARKER = "/* end of the difgen C module */"
"""The last line of a generated C source: one without it was cut short."""
MODULES = ("np", "math", "sp")
"""Modules the generated code imports, by the names it imports them as."""

ARGUMENTS = (INPUT, TANGENT, COTANGENT, DIRECTION, OUT)
BLOCK_WORK = "rows"
"""The points variant's local function filling the rows of one block."""
LOCALS = (RESULT, VALUE, NPOINTS, START, STOP, RESULTS, BLOCK_WORK)
F64 = "_F64"
F32 = "_F32"
"""The module's float dtype, as its argument checks compare it (float32 modules)."""
NDARRAY = "_ND"
AS_ARRAY = "_as_array"
VALUES = "_as_values"
ODD_ITEM = "_odd_item"
AS_SCALAR = "_as_scalar"
AS_FLOAT64 = "_as_float64"
AS_FLOAT32 = "_as_float32"
CHECK_OUT = "_check_out"
AS_POINTS = "_as_points"
POINTS_COUNT = "_points_count"
AS_POINTS_C = "_as_points_c"
POINTS_FIRST = "_POINTS_FIRST"
POINTS_LAYOUT = "_points_layout"
POINT_BLOCKS = "_point_blocks"
POINT_THREADS = "_point_threads"
RUN_BLOCKS = "_run_blocks"
POINTS_OUT = "_points_out"
POINTS_POOL = ("_MAX_THREADS", "_THREAD_POINTS", "_POOL")
"""The thread pool's constants in a points module (:data:`RUN_BLOCKS` runs it)."""
AS_INTS = "_as_ints"
AS_BOOLS = "_as_bools"
CHECK_INDEX = "_check_index"
CHECK_CSR_OUT = "_check_csr_out"
HELPERS = (
    F64,
    F32,
    NDARRAY,
    AS_ARRAY,
    VALUES,
    ODD_ITEM,
    AS_SCALAR,
    AS_FLOAT64,
    AS_FLOAT32,
    CHECK_OUT,
    AS_POINTS,
    POINTS_COUNT,
    AS_POINTS_C,
    POINTS_FIRST,
    POINTS_LAYOUT,
    POINT_BLOCKS,
    POINT_THREADS,
    RUN_BLOCKS,
    POINTS_OUT,
    *POINTS_POOL,
    AS_INTS,
    AS_BOOLS,
    CHECK_INDEX,
    CHECK_CSR_OUT,
)
FLOAT_HELPERS = floats.NAMES
"""NumPy-semantics helpers of scalar code (:mod:`difgen.floats`)."""
"""Module-level helpers that check the arguments of every generated operator."""
MODULE_CONSTANTS = (
    "DIFGEN_VERSION",
    "SOURCE_HASH",
    "BODY_HASH",
    "INPUT_SHAPE",
    "OUTPUT_SHAPE",
    "NDArray",
    "annotations",
    "C_HASH",
    "C_MODULE",
    "COMPILED",
    "C_FALLBACK_REASON",
    "QUIET_FALLBACK_ENV",
    "_load_compiled",
    "importlib",
    "os",
    "warnings",
    "Callable",
    "ThreadPoolExecutor",
)
"""Module-level names every generated module defines or imports besides MODULES."""

_GENERATED_FORMS = (
    (re.compile(rf"{TEMP_PREFIX}\d+"), "temporaries (t0, t1, ...)"),
    (re.compile(rf"{CONST_PREFIX}\d+(_\d+)?"), "module constants (C0, C1, ...)"),
    (re.compile(rf"{HOISTED_PREFIX}\d+"), "values computed at import (K0, K1, ...)"),
    (
        re.compile(r"[A-Z][A-Z0-9]*_(INDICES|INDPTR|SELECT)(_\d+)?"),
        "sparse index constants",
    ),
)

THIRD_PARTY = frozenset(
    {"numpy", "scipy", "sympy", "jinja2", "black", "difgen", "typing_extensions"}
)
"""Modules a generated file (or difgen building it) imports, besides the stdlib."""


def element(base: str, flat_index: int, batch: int | None = None) -> str:
    """Name of one scalar element of an unpacked array argument."""
    return f"{base}_{flat_index}" if batch is None else f"{base}_{batch}_{flat_index}"


def flat(base: str) -> str:
    """Name of an array argument's elements as a typed list of floats."""
    return f"{base}{FLAT_SUFFIX}"


def points(operator: str) -> str:
    """Name of the points variant of an operator.

    >>> points("gradient")
    'gradient_points'
    """
    return f"{operator}{POINTS_SUFFIX}"


def points_block(operator: str) -> str:
    """Name of the private function that evaluates a points variant on one block
    of points (module-level, not exported).

    >>> points_block("gradient")
    '_gradient_points_block'
    """
    return f"_{points(operator)}{BLOCK_SUFFIX}"


def temp(i: int) -> str:
    """Name of the i-th temporary."""
    return f"{TEMP_PREFIX}{i}"


def const(i: int) -> str:
    """Name of the i-th module-level constant."""
    return f"{CONST_PREFIX}{i}"


def hoisted(i: int) -> str:
    """Name of the i-th value computed once at import."""
    return f"{HOISTED_PREFIX}{i}"


SPARSITY_SUFFIX = "_sparsity"
STRUCTURE_SUFFIX = "_structure"
"""``jacobian_sparsity()`` and ``jacobian_structure()``: a sparse result's pattern."""
SCIPY_ADAPTERS = ("fun", "jac", "hess", "hessp", "ode_jac")
"""The scipy adapter's functions (``adapters = ["scipy"]``)."""
TIME = "t"
"""ode_jac's first parameter when no context is the time (``time = "..."``)."""
IPOPT_CLASS = "IpoptProblem"
"""The ipopt adapter's cyipopt problem class (``adapters = ["ipopt"]``)."""


def module_names(
    operators: Collection[str], sparse: bool, adapters: Iterable[str], time: bool
) -> set[str]:
    """The module-level names that a module of these operators defines besides
    the operators: the structure functions of its sparse results and its adapters'
    names (``time``: a context is ode_jac's t)."""
    names = {
        kind + suffix
        for kind in ("jacobian", "hessian")
        if sparse and kind in operators
        for suffix in (SPARSITY_SUFFIX, STRUCTURE_SUFFIX)
    }
    if "scipy" in adapters:  # ode_jac(t, ...) when no context is the time
        names |= set(SCIPY_ADAPTERS)
        names |= {TIME} if "jacobian" in operators and not time else set()
    if "ipopt" in adapters:
        names.add(IPOPT_CLASS)
    return names


def reserved(
    operators: Iterable[str] | None = None, extra: Iterable[str] = ()
) -> set[str]:
    """Names a context may not take. With ``operators`` (the module's), the seeds
    and ``out`` are reserved only where an operator of the module takes them (a
    module without ``hvp`` takes a context named ``v``: trust-constr's multipliers),
    and ``extra`` names what else the module defines (:func:`module_names`);
    without, every operator's arguments, as for a module of unknown operators."""
    if operators is None:
        arguments = set(ARGUMENTS)
    else:
        ops = [OPERATORS[name] for name in operators]
        arguments = {INPUT, *(seed for op in ops for seed in op.seeds)}
        arguments |= {OUT} if any(op.takes_out for op in ops) else set()
    return {
        *arguments,
        *extra,
        *LOCALS,
        *MODULES,
        *MODULE_CONSTANTS,
        *HELPERS,
        *FLOAT_HELPERS,
        *OPERATORS,  # the generated functions themselves
        *(points(name) for name in OPERATORS),  # and their points variants
        *(points_block(name) for name in OPERATORS),
    }


def is_identifier(name: str) -> bool:
    """An ASCII Python identifier that is not a keyword (soft keywords included)."""
    return (
        name.isascii()
        and name.isidentifier()
        and not keyword.iskeyword(name)
        and not keyword.issoftkeyword(name)
    )


def context_name_problem(
    name: str,
    arguments: Iterable[str],
    operators: Iterable[str] | None = None,
    extra: Iterable[str] = (),
) -> str | None:
    """Why ``name`` cannot name a context, or None if it can.

    ``arguments`` are the names of every array argument of the module (``x``,
    the seeds and all contexts), whose elements and flat lists get derived names;
    ``operators`` and ``extra`` those the module emits (:func:`reserved`).
    """
    if not is_identifier(name):
        return f"{name!r} is not an ASCII Python identifier that is not a keyword"
    if name.startswith("__"):
        return f"{name!r} starts with two underscores (names Python itself uses)"
    if name in reserved(operators, extra):
        return f"{name!r} is a name the generated code uses itself"
    if hasattr(builtins, name):
        return f"{name!r} is a Python builtin, which the generated code may call"
    for pattern, what in _GENERATED_FORMS:
        if pattern.fullmatch(name):
            return f"{name!r} is the form of the names of {what}"
    for base in {*ARGUMENTS, *arguments} - {name}:
        if re.fullmatch(rf"{re.escape(base)}(_\d+){{1,2}}", name):
            return f"{name!r} is the name of an element of the argument {base!r}"
        if name == flat(base):
            return f"{name!r} is the name of the elements of the argument {base!r}"
    return None


def module_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a generated module (``NAME.py``), or None."""
    if not is_identifier(name):
        return f"{name!r} is not an ASCII Python identifier that is not a keyword"
    if name in sys.stdlib_module_names or name in sys.builtin_module_names:
        return (
            f"{name!r} is the name of a standard-library module, which the "
            "generated file would shadow"
        )
    if name in THIRD_PARTY:
        return f"{name!r} is the name of a module that difgen or its output imports"
    return None


class NameClash(Exception):
    """A rendered module uses one name for two things (a difgen bug, not the user's)."""


def check_module(text: str, elsewhere: dict[str, set[str]] | None = None) -> None:
    """Raise :class:`NameClash` if a parameter of a generated function collides with
    a module-level name or with a name assigned in the function's body.

    ``elsewhere`` maps a function's name to names its body assigns in statements
    left out of ``text`` (render checks the long runs of simple assignments it
    formats apart from their names alone, without parsing them).

    >>> check_module("K0 = 1\\ndef f(x, K0):\\n    return x + K0\\n")
    Traceback (most recent call last):
    ...
    difgen.naming.NameClash: f: parameter 'K0' is also a module-level name
    """
    tree = ast.parse(text)
    module_names = set(MODULES) | {
        target.id
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    module_names |= {
        alias.asname or alias.name.split(".")[0]
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    module_names |= {fn.name for fn in functions}
    for fn in functions:
        params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
        checked: set[int] = set()  # argument checks rebind a parameter to its value
        stored: list[ast.Name] = []
        for node in ast.walk(fn):  # one walk: a long body has many nodes
            if isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Store):
                    stored.append(node)
            elif (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
                and node.value.func.id
                in (
                    AS_ARRAY,
                    AS_SCALAR,
                    AS_FLOAT64,
                    AS_FLOAT32,
                    AS_POINTS,
                    AS_POINTS_C,
                    POINTS_LAYOUT,
                    AS_INTS,
                    AS_BOOLS,
                )
            ):
                checked.add(id(node.targets[0]))
        assigned = {node.id for node in stored if id(node) not in checked}
        assigned |= (elsewhere or {}).get(fn.name, set())
        for name in sorted(params):
            if name in module_names:
                raise NameClash(
                    f"{fn.name}: parameter {name!r} is also a module-level name"
                )
            if name in assigned:
                raise NameClash(
                    f"{fn.name}: parameter {name!r} is assigned in the body"
                )
