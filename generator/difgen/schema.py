"""The config file's keys, each declared once with its type, default and meaning.

``config.py`` takes its lists of accepted keys from here (a key the reader does not
declare is refused, with a suggestion), and ``scripts/config_reference.py`` writes
the documentation's configuration reference from these declarations, so the
reference cannot drift from what the reader accepts. The checks themselves (a
value's type and range, combinations that are refused) stay in the reader, where
errors are located by file and line.
"""

from __future__ import annotations

from dataclasses import dataclass

BACKENDS = ("sympy", "trace")
MODES = ("auto", "forward", "reverse")
EMITS = ("auto", "scalar", "vector", "c")
DTYPES = ("float64", "float32")
"""The dtypes of the differentiated input: the module computes in that float type
(a float32 module's code computes in float32 end to end; see
:mod:`difgen.precision`)."""
ADAPTERS = ("scipy", "ipopt")
"""Solver adapters a module may ask for (``adapters = ["scipy", "ipopt"]``)."""
TRIANGLES = ("lower", "upper")
"""The triangle a sparse hessian may be returned as (``triangle = "lower"``)."""
CONTEXT_DTYPES = ("float64", "float32", "int64", "bool")
"""The dtypes of contexts: integer and boolean data (labels, edge lists, masks) is
not differentiated, and is known only at run time (the trace backend indexes with it
in the generated code). A float32 context of a float64 module is converted to
float64 at entry, exactly, as NumPy promotes it."""


@dataclass(frozen=True)
class Key:
    """One key of one table of the config file."""

    table: str
    """``"difgen"``, ``"module"``, ``"input"``, ``"inputs"`` or ``"contexts"``."""
    name: str
    type: str
    """The TOML value it takes, as the reference shows it."""
    default: str
    """What an absent key means (``"required"`` when it must be given)."""
    doc: str


def _choices(values: tuple[str, ...]) -> str:
    return " | ".join(f'"{v}"' for v in values)


KEYS: tuple[Key, ...] = (
    Key(
        "difgen",
        "output_dir",
        "string",
        '"generated"',
        "Where the generated modules are written, relative to the config file.",
    ),
    Key("module", "name", "string", "required", "The generated module is NAME.py."),
    Key(
        "module",
        "function",
        "string",
        "required",
        'The function: "package.module:attr" (imported from src/ or the config\'s '
        'directory) or "path/to/file.py:attr".',
    ),
    Key(
        "module",
        "backend",
        _choices(BACKENDS),
        '"sympy"',
        "sympy: scalar symbolic derivatives, simplified (small functions); trace: "
        "array-level tracing and AD on the IR (large arrays, loops, int data).",
    ),
    Key(
        "module",
        "mode",
        _choices(MODES),
        '"auto"',
        "Forward or reverse mode for the operators that can use either; auto "
        "chooses by the input and output sizes.",
    ),
    Key(
        "module",
        "operators",
        "array of strings",
        "required",
        "The operators to generate (pushforward, pullback, derivative, gradient, "
        "jacobian, second_derivative, hvp, hessian and their value_and_ forms).",
    ),
    Key(
        "module",
        "input",
        "table",
        "required (or inputs)",
        "The differentiated argument x: { shape = [...], dtype, per_point }.",
    ),
    Key(
        "module",
        "contexts",
        "array of tables",
        "none",
        "Arguments after the differentiated ones that are not differentiated: "
        "{ name, shape, dtype, per_point }.",
    ),
    Key(
        "module",
        "batch",
        "integer >= 1",
        "1",
        "Tangents (or cotangents) per pushforward/pullback call.",
    ),
    Key(
        "module",
        "sparse",
        "boolean",
        "false",
        "jacobian and hessian as SciPy CSR arrays, with their sparsity detected "
        "at build time and colored.",
    ),
    Key(
        "module",
        "emit",
        _choices(EMITS),
        '"auto"',
        "scalar: straight-line Python floats; vector: NumPy array code; c: a C "
        "extension beside the module (with the Python operators as fallback); "
        "auto chooses by the sizes.",
    ),
    Key(
        "module",
        "timeout",
        "number of seconds",
        "1800",
        "Stop this module's build when it takes longer.",
    ),
    Key(
        "module",
        "points",
        "boolean",
        "false",
        "Also generate <op>_points: the operators at many points per call, along "
        "a leading axis of the arguments that have per_point = true.",
    ),
    Key(
        "module",
        "implicit",
        'boolean | "auto"',
        "false",
        "Converged while loops get the implicit-function derivative (no tape); "
        "auto: where the exit test is a tolerance on a residual.",
    ),
    Key(
        "module",
        "checkpoint",
        'integer >= 1 | "sqrt" | "revolve"',
        "none (the whole tape)",
        "Reverse mode through a loop keeps a snapshot every N steps (sqrt: every "
        "sqrt(T)) or runs binomial checkpointing (revolve), recomputing the rest; "
        "the build states the memory and the recomputation.",
    ),
    Key(
        "module",
        "snapshots",
        "integer >= 2",
        "ceil(log2 T), else 16",
        'With checkpoint = "revolve": the most states held at once.',
    ),
    Key(
        "module",
        "inputs",
        "array of tables",
        "none",
        "Several differentiated arguments, each an array or a tree of arrays "
        "(dict, list, tuple, NamedTuple, dataclass), instead of input.",
    ),
    Key(
        "module",
        "has_aux",
        "boolean",
        "false",
        "The function returns (value, aux); aux is returned, not differentiated.",
    ),
    Key(
        "module",
        "flat",
        "boolean",
        "false",
        "With inputs: also the flat operators, on one concatenated vector (for "
        "optimizers).",
    ),
    Key(
        "module",
        "accumulate",
        '"float64"',
        "none",
        "A float32 module's sums, products and matrix products accumulate in "
        "float64 and round once.",
    ),
    Key(
        "module",
        "triangle",
        _choices(TRIANGLES),
        "none",
        "With sparse = true: the hessian operators return that triangle's CSR "
        "(and hessian_structure() its triplets), as IPOPT wants.",
    ),
    Key(
        "module",
        "adapters",
        'array of "scipy" | "ipopt"',
        "none",
        "scipy: fun, jac, hess, hessp with SciPy's signatures and ode_jac(t, y, "
        "*args) for solve_ivp; ipopt: a cyipopt problem class from the objective and "
        "constraints, with the Lagrangian hessian derived.",
    ),
    Key(
        "module",
        "constraints",
        "table",
        "none (required with ipopt)",
        "The constraint function of an ipopt adapter: { function, size }.",
    ),
    Key(
        "module",
        "time",
        "string",
        "none",
        "Names the scalar context that is solve_ivp's t in ode_jac(t, y); without "
        "it the system is autonomous and t is ignored.",
    ),
    Key(
        "constraints",
        "function",
        "string",
        "required",
        'g(x, *contexts): "file.py:g" or "pkg.mod:g".',
    ),
    Key(
        "constraints",
        "size",
        "integer >= 1",
        "required",
        "The number of constraints, g's output length.",
    ),
    Key(
        "module",
        "verify_domain",
        "[low, high]",
        "[-1, 1]",
        "Where difgen verify draws the input's values (a function defined for x > 0 "
        "needs a positive interval).",
    ),
    Key(
        "module",
        "verify_points",
        "string",
        "none",
        'A sampler "file.py:f", called as f(count, rng), returning the points '
        "difgen verify checks.",
    ),
    Key("input", "shape", "array of integers", "required", "The array's shape."),
    Key("input", "dtype", _choices(DTYPES), '"float64"', "The float type."),
    Key(
        "input",
        "per_point",
        "boolean",
        "true",
        "With points = true: false shares x between the points.",
    ),
    Key("inputs", "name", "string", "required", "The argument's parameter name."),
    Key("inputs", "shape", "array of integers", "shape or tree", "One array."),
    Key("inputs", "dtype", _choices(DTYPES), '"float64"', "The float type."),
    Key(
        "inputs",
        "tree",
        "table or array",
        "shape or tree",
        "A tree: tables are dicts, arrays are lists, { shape = [...] } is a leaf.",
    ),
    Key(
        "inputs",
        "kind",
        '"tuple" | "list"',
        '"list"',
        "An array tree as a tuple or a list.",
    ),
    Key(
        "inputs",
        "type",
        "string",
        "none",
        'A table tree as a NamedTuple or dataclass: "file.py:Cls" or "pkg.mod:Cls".',
    ),
    Key(
        "inputs",
        "per_point",
        "boolean",
        "true",
        "With points = true: false shares this argument between the points (a "
        "tree leaf's own per_point wins).",
    ),
    Key("contexts", "name", "string", "required", "The parameter name."),
    Key("contexts", "shape", "array of integers", "required", "The array's shape."),
    Key(
        "contexts",
        "dtype",
        _choices(CONTEXT_DTYPES),
        '"float64"',
        "int64 and bool: labels, indices, masks (trace backend).",
    ),
    Key(
        "contexts",
        "per_point",
        "boolean",
        "false",
        "With points = true: the context carries the points axis.",
    ),
    Key(
        "contexts",
        "verify_domain",
        "[low, high]",
        "[-1, 1]",
        "Where difgen verify draws a float context's values.",
    ),
    Key(
        "contexts",
        "range",
        "[lo, hi] of integers",
        "zeros",
        "Where difgen verify draws an int64 context's values (labels, indices).",
    ),
)


def names(table: str) -> tuple[str, ...]:
    """The keys of ``table``, in declaration order.

    >>> names("difgen")
    ('output_dir',)
    """
    found = tuple(k.name for k in KEYS if k.table == table)
    if not found:
        raise KeyError(table)
    return found
