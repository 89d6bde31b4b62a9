"""Read ``difgen.toml`` (or ``[tool.difgen]`` in ``pyproject.toml``) into frozen,
validated values.

Every mistake in the file is a :class:`~difgen.errors.ConfigError` naming the file,
the line of the offending key and what was expected. ``tomllib`` reports no line
numbers for values, so :class:`~difgen.toml_lines.Locator` recovers them from the
raw text.

In ``pyproject.toml`` the schema is the same, one level down: the keys of
``[difgen]`` go in ``[tool.difgen]`` and each ``[[module]]`` is a
``[[tool.difgen.module]]``; errors point at the lines of ``pyproject.toml``.
:func:`find_config` finds either in a directory.

>>> spec = load_config("examples/difgen.toml").modules[0]  # doctest: +SKIP
>>> spec.name, spec.operators, spec.input.shape  # doctest: +SKIP
('seed', ('pullback', 'derivative', ...), ())
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import tomllib
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from difgen import naming, structure
from difgen.errors import ConfigError
from difgen.operators import OPERATORS, REQUESTABLE, TABLE, result_shape
from difgen.schema import (
    ADAPTERS,
    BACKENDS,
    CONTEXT_DTYPES,
    DTYPES,
    EMITS,
    MODES,
    TRIANGLES,
    names,
)
from difgen.toml_lines import Key, Locator

CONFIG_NAME = "difgen.toml"
PYPROJECT_NAME = "pyproject.toml"
PYPROJECT_TABLE: tuple[str, ...] = ("tool", "difgen")
"""Where difgen's settings live in ``pyproject.toml``: ``[tool.difgen]``."""

_TOP_KEYS = ("difgen", "module")
_DIFGEN_KEYS = names("difgen")
_MODULE_KEYS = names("module")
_CONSTRAINT_KEYS = names("constraints")
_ARRAY_KEYS = names("input")
_CONTEXT_KEYS = names("contexts")
_INPUT_KEYS = names("inputs")
_FUNCTION_FORMS = '"package.module:attr" or "path/to/file.py:attr"'


@dataclass(frozen=True)
class ArraySpec:
    """Shape and dtype of the differentiated input ``x``."""

    shape: tuple[int, ...]
    dtype: str = "float64"
    per_point: bool = True
    """With ``points = true``: whether the points variants take ``x`` with a
    leading axis of points (the default), or one ``x`` shared by every point
    (``per_point = false``: JAX's ``in_axes=None``), the points then carried by
    the per-point contexts (per-example gradients of shared parameters)."""


@dataclass(frozen=True)
class ContextSpec:
    """A non-differentiated argument passed after ``x``, in config order."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float64"
    per_point: bool = False
    """With ``points = true``: the points variants take this context with a leading
    axis, one value per point (a parameter sweep, data per example, labels, masks;
    any dtype); otherwise one value shared by all points."""


@dataclass(frozen=True)
class VerifySpec:
    """Where ``difgen verify`` draws its points (it changes no generated text).

    ``domain``: ``verify_domain = [low, high]``, the interval of ``x``'s entries
    and of the float contexts' (instead of [-1, 1]); ``points``:
    ``verify_points = "file.py:sampler"``, a function of the user's called as
    ``sampler(count, rng)`` that returns ``count`` points, each ``x`` or a tuple
    ``(x, *contexts)``; ``contexts``: a context's own ``verify_domain`` (floats)
    or ``range`` (int64 contexts, both ends included), by name.
    """

    domain: tuple[float, float] | None = None
    points: str | None = None
    contexts: tuple[tuple[str, tuple[float, float]], ...] = ()

    def context_domain(self, name: str) -> tuple[float, float] | None:
        """The interval declared for context ``name`` (None: none declared)."""
        return dict(self.contexts).get(name)


@dataclass(frozen=True)
class InputSpec:
    """One differentiated argument of ``inputs``: its parameter name and its tree
    (a bare :class:`~difgen.structure.Leaf` for ``{ name = "y0", shape = [3] }``)."""

    name: str
    tree: structure.Tree
    shared: tuple[structure.Path, ...] = ()
    """With ``points = true``: the paths of the leaves that every point shares
    (``per_point = false`` on the input or on a leaf of its tree: JAX's
    ``in_axes=None`` for that part); the other leaves carry the points axis."""

    def carries_points(self) -> tuple[bool, ...]:
        """Per leaf, in flatten order: whether it carries the points axis."""
        return tuple(p not in self.shared for p, _ in structure.leaves(self.tree))


@dataclass(frozen=True)
class Constraints:
    """``constraints = { function = "nlp.py:g", size = 81 }``: the constraint
    function of an ``adapters = ["ipopt"]`` module, g(x, *contexts) of shape
    ``(size,)``. The module then differentiates the Lagrangian over
    ``z = (x, obj_factor, lagrange)`` (:func:`difgen.load.lagrangian`), whose
    ``input`` is that stacked vector; ``variables`` is the shape of x."""

    function: str
    size: int
    variables: tuple[int, ...]


@dataclass(frozen=True)
class ModuleSpec:
    """One ``[[module]]`` table: what to differentiate and which operators to emit.

    ``line`` is the line of the ``[[module]]`` header and ``key_lines`` the line of
    each key inside it (dotted for nested keys: ``"input.shape"``,
    ``"contexts.0.name"``), so later stages can point at the config file too.
    """

    name: str
    function: str
    backend: str
    mode: str
    operators: tuple[str, ...]
    input: ArraySpec
    contexts: tuple[ContextSpec, ...] = ()
    batch: int = 1
    sparse: bool = False
    emit: str = "auto"
    timeout: float | None = None
    points: bool = False
    """Also emit ``<operator>_points`` variants over a leading axis of points."""
    implicit: str = "off"
    """How ``while`` loops on a traced condition are differentiated: ``"off"``
    through the iterations taken, ``"on"`` (``implicit = true``) by the
    implicit-function theorem at the final state, every loop's exit test being a
    tolerance on a residual, ``"auto"`` implicitly where the exit test is one."""
    checkpoint: int | str | None = None
    """The reverse mode of loops: ``None`` tapes every state; ``N`` (``checkpoint =
    N``) keeps a snapshot every ``N`` steps and recomputes each segment on the way
    back; ``"sqrt"`` the same every ``ceil(sqrt(steps))`` steps of a static loop;
    ``"revolve"`` binomial checkpointing, keeping ``snapshots`` states."""
    snapshots: int | None = None
    """With ``checkpoint = "revolve"``: the states kept (at least 2; by default
    ``ceil(log2(steps))`` for a static loop, else 16)."""
    inputs: tuple[InputSpec, ...] = ()
    """The differentiated arguments (``inputs = [...]``), in order; empty for the
    one array ``input``. ``input`` is then the shape of their flat vector
    (:func:`difgen.structure.flat_shape` of :meth:`input_tree`)."""
    has_aux: bool = False
    """The function returns ``(out, aux)``: aux is returned, not differentiated."""
    flat: bool = False
    """The operators take and return the flat vectors (for optimizers)."""
    accumulate: str | None = None
    """``"float64"``: a float32 module's sums, matrix products and contractions
    accumulate in float64, each result rounded to float32 (``accumulate``)."""
    triangle: str | None = None
    """``"lower"`` or ``"upper"``: a sparse hessian returns that triangle only
    (diagonal included), as IPOPT and CasADi's ``tril`` take it."""
    adapters: tuple[str, ...] = ()
    """Solver adapters emitted besides the operators (:data:`ADAPTERS`)."""
    constraints: Constraints | None = None
    """The constraint function of an IPOPT adapter module."""
    time: str | None = None
    """The scalar context that is ``solve_ivp``'s time ``t`` (``ode_jac``)."""
    verify: VerifySpec = VerifySpec()
    """Where ``difgen verify`` samples (``verify_domain``, ``verify_points``, a
    context's ``verify_domain`` or ``range``); not part of ``SOURCE_HASH``."""
    config_path: Path = Path("difgen.toml")
    line: int = 0
    key_lines: tuple[tuple[str, int], ...] = ()

    def input_tree(self) -> structure.Tree:
        """The tree of the differentiated arguments: the one input's own tree, a
        tuple of several (``jax.grad(argnums=(0, 1))``), a bare leaf for ``input``."""
        if not self.inputs:
            return structure.Leaf(tuple(self.input.shape), self.input.dtype)
        return structure.tuple_of([i.tree for i in self.inputs])

    @property
    def input_names(self) -> tuple[str, ...]:
        """The parameter names of the differentiated arguments (``x`` for ``input``)."""
        return tuple(i.name for i in self.inputs) or (naming.INPUT,)

    def line_of(self, key: str) -> int:
        """Line of ``key`` in the config file, or of the ``[[module]]`` header.

        >>> ModuleSpec("m", "f:f", "sympy", "auto", (), ArraySpec(()), line=4,
        ...            key_lines=(("batch", 7),)).line_of("batch")
        7
        """
        for name, line in self.key_lines:
            if name == key:
                return line
        return self.line


@dataclass(frozen=True)
class Config:
    """A whole config file: where to write and the modules to generate."""

    path: Path
    output_dir: Path
    modules: tuple[ModuleSpec, ...]


def load_config(path: str | Path) -> Config:
    """Read and validate a difgen config file.

    A file named ``pyproject.toml`` is read from its ``[tool.difgen]`` table; any
    other name as a whole ``difgen.toml``. ``output_dir`` is resolved against the
    config file's directory; each module's ``operators`` are deduplicated and put
    in the order of :data:`difgen.operators.TABLE`.
    """
    path = Path(path)
    text, data = _read_toml(path)
    if path.name != PYPROJECT_NAME:
        return _Reader(path, Locator(text)).config(data)
    table = _pyproject_table(data)
    if table is None:
        raise ConfigError(
            path, None, "no [tool.difgen] table: difgen is not configured here"
        )
    return _Reader(path, Locator(text), PYPROJECT_TABLE).config(table)


def find_config(directory: str | Path | None = None) -> Path:
    """The config file of the project in ``directory`` (default: the current one).

    ``difgen.toml`` if it exists, else ``pyproject.toml`` if it has a
    ``[tool.difgen]`` table. Both at once is an error (which one would be meant?);
    neither is an error that says what was looked for.
    """
    base = Path.cwd() if directory is None else Path(directory)
    toml = base / CONFIG_NAME
    pyproject = base / PYPROJECT_NAME
    if toml.is_file():
        if _configures_difgen(pyproject, strict=False):
            raise ConfigError(
                pyproject,
                Locator(pyproject.read_text(encoding="utf-8")).line(PYPROJECT_TABLE),
                f"both {CONFIG_NAME} and this [tool.difgen] table configure difgen "
                f"in {base}; keep one, or name the file to use",
            )
        return toml
    if _configures_difgen(pyproject, strict=True):
        return pyproject
    raise ConfigError(
        base,
        None,
        f"no {CONFIG_NAME} and no {PYPROJECT_NAME} with a [tool.difgen] table here; "
        "create one, or name the config file",
    )


def _configures_difgen(pyproject: Path, strict: bool) -> bool:
    """True if ``pyproject`` exists and has a ``[tool.difgen]`` table.

    With ``strict`` a file that cannot be read or parsed is a ConfigError (it may
    be the config meant); otherwise it counts as not configuring difgen.
    """
    if not pyproject.is_file():
        return False
    try:
        return _pyproject_table(_read_toml(pyproject)[1]) is not None
    except ConfigError:
        if strict:
            raise
        return False


def _read_toml(path: Path) -> tuple[str, dict[str, Any]]:
    """The text and the parsed document of a TOML file; ConfigError if unreadable."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(path, None, "config file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, None, f"cannot read config file: {exc}") from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, _toml_error_line(exc, text), str(exc)) from None


def _pyproject_table(data: dict[str, Any]) -> dict[str, Any] | None:
    """The ``[tool.difgen]`` table of a parsed ``pyproject.toml`` (None if absent).

    A ``tool.difgen`` that is not a table is returned as is: the reader reports it.
    """
    tool = data.get("tool")
    if not isinstance(tool, dict) or "difgen" not in tool:
        return None
    table: dict[str, Any] = tool["difgen"]
    return table


def check_output_fit(spec: ModuleSpec, output_shape: tuple[int, ...]) -> None:
    """Reject operators that need a scalar output when ``f`` returns an array.

    Called once tracing has found the output shape.

    >>> spec = ModuleSpec("m", "f:f", "trace", "auto", ("gradient",), ArraySpec((3,)))
    >>> check_output_fit(spec, ())
    """
    _check_dense_budget(spec, output_shape)
    if output_shape == ():
        return
    bad = [op for op in spec.operators if OPERATORS[op].scalar_output]
    if bad:
        names = ", ".join(repr(op) for op in bad)
        raise ConfigError(
            spec.config_path,
            spec.line_of("operators"),
            f"operator {names} needs a scalar output, but {spec.function} returns "
            f"an array of shape {output_shape}; use 'jacobian' (or 'pullback') "
            "for array outputs",
        )


MAX_ELEMENTS = 1 << 27
"""The most elements one array may have (2**27, 1 GiB of float64): inputs, contexts
and every dense result a generated operator allocates on each call."""


def _check_dense_budget(spec: ModuleSpec, output_shape: tuple[int, ...]) -> None:
    """Refuse a dense jacobian or hessian too large to allocate on every call."""
    if spec.sparse:
        return
    xs = tuple(spec.input.shape)
    for op in spec.operators:
        for kind in OPERATORS[op].results:
            shape = result_shape(kind, xs, tuple(output_shape), spec.batch)
            size = math.prod(shape)
            if size > MAX_ELEMENTS:
                raise ConfigError(
                    spec.config_path,
                    spec.line_of("operators"),
                    f"operator '{op}' would allocate a dense {kind} of shape {shape} "
                    f"({size:,} float64, {size * 8 / 2**30:,.1f} GiB) on every call, "
                    f"over difgen's limit of {MAX_ELEMENTS:,} elements per array; "
                    f"use sparse = true, or {_CHEAPER.get(kind, 'fewer elements')}",
                )


_CHEAPER = {"hessian": "hvp", "jacobian": "pushforward or pullback"}


def split_function_ref(ref: str) -> tuple[str, str] | None:
    """Split ``"pkg.mod:attr"`` or ``"path/file.py:attr"``; None when malformed.

    >>> split_function_ref("models/seed.py:f")
    ('models/seed.py', 'f')
    >>> split_function_ref("seed") is None
    True
    """
    module, sep, attr = ref.rpartition(":")
    if not sep or not module or not _is_dotted_name(attr):
        return None
    if module.endswith(".py") or _is_dotted_name(module):
        return module, attr
    return None


def _is_dotted_name(text: str) -> bool:
    return all(part.isidentifier() for part in text.split("."))


def _toml_error_line(exc: tomllib.TOMLDecodeError, text: str) -> int | None:
    match = re.search(r"at line (\d+)", str(exc))
    if match:
        return int(match.group(1))
    if "end of document" in str(exc):
        return max(1, text.count("\n") + (not text.endswith("\n")))
    return None


def _show(value: Any) -> str:
    """A value as it would be written in TOML, with its type."""
    if isinstance(value, dict):
        return "a table"
    kinds = {bool: "boolean", int: "integer", float: "float", str: "string"}
    kind = {**kinds, list: "array"}.get(type(value), type(value).__name__)
    try:
        shown = json.dumps(value)
    except (TypeError, ValueError):
        shown = str(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return f"{shown} ({kind})"


def _suggest(word: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f"did you mean '{close[0]}'? " if close else ""


def _dotted(key: Key) -> str:
    """``("contexts", 1, "name")`` -> ``"contexts[1].name"``."""
    out = ""
    for part in key:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out.lstrip(".")


class _Reader:
    """Validates the parsed document, locating each error with the locator.

    Keys are paths into the document as ``difgen.toml`` lays it out
    (``("difgen", "output_dir")``, ``("module", 0, "name")``). For
    ``pyproject.toml``, ``prefix`` is ``("tool", "difgen")``: the settings sit in
    that table itself and the modules in its ``module`` array, and :meth:`line`
    maps each key to where it is written there.
    """

    def __init__(self, path: Path, locator: Locator, prefix: Key = ()) -> None:
        self.path = path
        self.locator = locator
        self.prefix = prefix
        table = ".".join(str(part) for part in prefix)
        self.settings_table = f"[{table}]" if prefix else "[difgen]"
        self.module_table = f"[[{table}.module]]" if prefix else "[[module]]"
        self.leaf_dtypes: list[tuple[Key, str]] = []  # of the module's inputs

    def line(self, key: Key) -> int | None:
        """Line of ``key`` (a ``difgen.toml`` path) in this file."""
        if self.prefix and key[:1] == ("difgen",):
            key = key[1:]
        return self.locator.line(self.prefix + key)

    def error(self, key: Key, message: str) -> ConfigError:
        return ConfigError(self.path, self.line(key), message)

    def check_keys(
        self, table: dict[str, Any], key: Key, allowed: tuple[str, ...]
    ) -> None:
        places: dict[Key, str] = {
            (): "at top level",
            ("difgen",): f"in {self.settings_table}",
        }
        where = places.get(key)
        if where is None:
            where = (
                f"in {self.module_table}" if len(key) == 2 else f"in {_dotted(key[2:])}"
            )
        for name in table:
            if name not in allowed:
                raise self.error(
                    key + (name,),
                    f"unknown key '{name}' {where}; {_suggest(name, allowed)}"
                    f"expected one of: {', '.join(sorted(allowed))}",
                )

    def get(self, table: dict[str, Any], key: Key, kind: type, expected: str) -> Any:
        value = table[str(key[-1])]
        if type(value) is not kind:  # bool is an int subclass: compare exactly
            raise self.error(
                key, f"'{_dotted(key[2:])}' must be {expected}; got {_show(value)}"
            )
        return value

    def choice(
        self, table: dict[str, Any], key: Key, choices: tuple[str, ...], default: str
    ) -> str:
        if key[-1] not in table:
            return default
        expected = " or ".join(f'"{c}"' for c in choices)
        value: str = self.get(table, key, str, expected)
        if value not in choices:
            hint = _suggest(value, choices).rstrip()
            raise self.error(
                key,
                f"'{_dotted(key[2:])}' must be {expected}; got {_show(value)}"
                + (f"; {hint}" if hint else ""),
            )
        return value

    def config(self, data: dict[str, Any]) -> Config:
        if self.prefix:
            data = self.unprefixed(data)
        else:
            self.check_keys(data, (), _TOP_KEYS)
        settings = data.get("difgen", {})
        if not isinstance(settings, dict):
            raise self.error(("difgen",), "'difgen' must be a table: [difgen]")
        self.check_keys(settings, ("difgen",), _DIFGEN_KEYS)
        output_dir = settings.get("output_dir", "generated")
        if type(output_dir) is not str or not output_dir:
            raise self.error(
                ("difgen", "output_dir"),
                f"'output_dir' must be a non-empty string (a directory relative "
                f"to this file); got {_show(output_dir)}",
            )
        if "module" not in data:
            raise ConfigError(
                self.path, None, f"no {self.module_table} tables: nothing to build"
            )
        tables = data["module"]
        if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
            raise self.error(
                ("module",), f"'module' must be an array of tables: {self.module_table}"
            )
        if not tables:
            raise self.error(("module",), "'module' must not be empty")
        modules: list[ModuleSpec] = []
        for index, table in enumerate(tables):
            spec = self.module(table, index)
            for other in modules:
                if other.name == spec.name:
                    raise self.error(
                        ("module", index, "name"),
                        f"duplicate module name '{spec.name}' (first defined in "
                        f"the {self.module_table} at line {other.line})",
                    )
            modules.append(spec)
        output = Path(os.path.normpath(self.path.parent / output_dir))
        return Config(path=self.path, output_dir=output, modules=tuple(modules))

    def unprefixed(self, table: Any) -> dict[str, Any]:
        """``[tool.difgen]`` laid out as a ``difgen.toml`` document.

        Its keys other than ``module`` are the ``[difgen]`` settings.
        """
        if not isinstance(table, dict):
            raise ConfigError(
                self.path,
                self.locator.line(self.prefix),
                f"'tool.difgen' must be a table: {self.settings_table}; "
                f"got {_show(table)}",
            )
        settings = {name: value for name, value in table.items() if name != "module"}
        self.check_keys(settings, ("difgen",), _DIFGEN_KEYS + ("module",))
        document: dict[str, Any] = {"difgen": settings}
        if "module" in table:
            document["module"] = table["module"]
        return document

    def module(self, table: dict[str, Any], index: int) -> ModuleSpec:
        at: Key = ("module", index)
        self.check_keys(table, at, _MODULE_KEYS)
        if "input" in table and "inputs" in table:
            raise self.error(
                at + ("inputs",),
                "'input' and 'inputs' are both given; use 'input' for one array, "
                "'inputs' for several arguments or trees, not both",
            )
        for required in ("name", "function", "operators"):
            if required not in table:
                raise self.error(
                    at, f"{self.module_table} is missing the required key '{required}'"
                )
        name = self.get(table, at + ("name",), str, "a string")
        problem = naming.module_name_problem(name)
        if problem is not None:
            raise self.error(
                at + ("name",),
                f"'name' names the generated module NAME.py, and {problem}; "
                f"got {_show(name)}",
            )
        function = self.get(table, at + ("function",), str, _FUNCTION_FORMS)
        if split_function_ref(function) is None:
            raise self.error(
                at + ("function",),
                f"'function' must be {_FUNCTION_FORMS}; got {_show(function)}",
            )
        if "input" not in table and "inputs" not in table:
            raise self.error(
                at,
                f"{self.module_table} is missing the required key 'input' (or "
                "'inputs', for several differentiated arguments)",
            )
        inputs: tuple[InputSpec, ...] = ()
        if "inputs" in table:
            self.leaf_dtypes = []
            inputs = self.inputs(table, at + ("inputs",))
            tree = structure.tuple_of([i.tree for i in inputs])
            carries = [c for i in inputs for c in i.carries_points()]
            array = ArraySpec(
                structure.flat_shape(tree),
                dtype=self.inputs_dtype(),
                per_point=any(carries),
            )
        else:
            array = self.array(table, at + ("input",))
        operators = self.operators(table, at + ("operators",), array.shape, inputs)
        batch = table.get("batch", 1)
        if type(batch) is not int or batch < 1:
            raise self.error(
                at + ("batch",), f"'batch' must be an integer >= 1; got {_show(batch)}"
            )
        sparse = False
        if "sparse" in table:
            sparse = self.get(table, at + ("sparse",), bool, "true or false")
            if sparse and not any(OPERATORS[op].sparse for op in operators):
                sparse_ops = sorted(op.name for op in TABLE if op.sparse)
                raise self.error(
                    at + ("sparse",),
                    "sparse = true applies to the jacobian and hessian operators; "
                    f"expected one of {', '.join(sparse_ops)} in operators",
                )
        points = False
        if "points" in table:
            points = self.get(table, at + ("points",), bool, "true or false")
            if points and sparse:
                raise self.error(
                    at + ("points",),
                    "points = true cannot be combined with sparse = true: a CSR "
                    "result has no leading axis of points; build the sparse "
                    "operators in a module of their own",
                )
        implicit = self.implicit(table, at + ("implicit",))
        checkpoint = self.checkpoint(table, at + ("checkpoint",))
        snapshots = None
        if "snapshots" in table:
            snapshots = table["snapshots"]
            if type(snapshots) is not int or snapshots < 2:
                raise self.error(
                    at + ("snapshots",),
                    "'snapshots' must be a number of states of at least 2; got "
                    f"{_show(snapshots)}",
                )
            if checkpoint != "revolve":
                raise self.error(
                    at + ("snapshots",),
                    'snapshots applies to checkpoint = "revolve" (binomial '
                    "checkpointing); add it, or drop snapshots",
                )
        timeout = table.get("timeout")
        if timeout is not None and (
            type(timeout) not in (int, float) or not 0 < timeout < 1e9
        ):
            raise self.error(
                at + ("timeout",),
                f"'timeout' must be a positive number of seconds; got {_show(timeout)}",
            )
        has_aux = flat = False
        if "has_aux" in table:
            has_aux = self.get(table, at + ("has_aux",), bool, "true or false")
        if "flat" in table:
            flat = self.get(table, at + ("flat",), bool, "true or false")
        if inputs or has_aux or flat:
            self.refuse_with_structure(table, at, inputs, has_aux, flat)
        backend = self.choice(table, at + ("backend",), BACKENDS, "sympy")
        given = table.get("adapters")
        adapters_named = given if isinstance(given, list) else []
        emitted = naming.module_names(
            operators,
            table.get("sparse") is True or "constraints" in table,
            adapters_named,
            "time" in table,
        )
        if table.get("points") is True:  # every points variant takes out=
            emitted.add(naming.OUT)
        contexts = self.contexts(table, at + ("contexts",), operators, emitted)
        taken = {i.name for i in inputs}
        if has_aux:
            for index, item in enumerate(inputs):
                if item.name == "aux":
                    raise self.error(
                        at + ("inputs", index, "name"),
                        "with has_aux = true the generated operators name the aux "
                        "value 'aux'; give this input another name",
                    )
            taken.add("aux")
        for index, context in enumerate(contexts):
            if context.name in taken:
                raise self.error(
                    at + ("contexts", index, "name"),
                    f"context '{context.name}' has the name of a differentiated "
                    "input (or of the aux value); every argument needs a name of "
                    "its own",
                )
        if array.dtype == "float64":  # NumPy promotes float32 data to float64
            contexts = tuple(
                replace(c, dtype="float64") if c.dtype == "float32" else c
                for c in contexts
            )
        for index, context in enumerate(contexts):
            if context.per_point and not points:
                raise self.error(
                    at + ("contexts", index, "per_point"),
                    f"context '{context.name}' has per_point = true, which applies "
                    "to the points variants only; add points = true to the module",
                )
            if context.dtype in ("int64", "bool") and backend == "sympy":
                raise self.error(
                    at + ("contexts", index, "dtype"),
                    f"context '{context.name}' has dtype {context.dtype}: run-time "
                    "integer or boolean data (indices, masks) cannot be lowered to "
                    'scalar code; use backend = "trace"',
                )
        for index, item in enumerate(inputs):
            if item.shared and not points:
                raise self.error(
                    at + ("inputs", index),
                    f"inputs[{index}] ('{item.name}') has per_point = false, which "
                    "applies to the points variants only; add points = true to the "
                    "module",
                )
        if not array.per_point and not points and not inputs:
            raise self.error(
                at + ("input", "per_point"),
                "input.per_point = false applies to the points variants only; add "
                "points = true to the module",
            )
        if (
            points
            and inputs
            and not array.per_point
            and not any(c.per_point for c in contexts)
        ):
            raise self.error(
                at + ("inputs",),
                "every leaf of 'inputs' has per_point = false and no context has "
                "per_point = true: no argument carries the points axis, so the "
                "points variants would have no number of points; give a context "
                "per_point = true, or a leaf per_point = true",
            )
        if points and not array.per_point and not any(c.per_point for c in contexts):
            raise self.error(
                at + ("input", "per_point"),
                "input.per_point = false and no context has per_point = true: no "
                "argument carries the points axis, so the points variants would "
                "have no number of points; give a context per_point = true, or "
                "drop input.per_point = false",
            )
        if array.dtype == "float32":
            self.check_float32(table, at, backend, sparse, contexts)
        accumulate = None
        if "accumulate" in table:
            accumulate = self.choice(table, at + ("accumulate",), ("float64",), "")
            if array.dtype != "float32":
                raise self.error(
                    at + ("accumulate",),
                    'accumulate = "float64" applies to float32 modules (input.dtype '
                    '= "float32"); a float64 module accumulates in float64 already',
                )
        triangle, adapters, constraints, time = self.solver_keys(
            table,
            at,
            operators,
            array,
            sparse,
            contexts,
            bool(inputs) or has_aux or flat,
        )
        if constraints is not None:
            sparse = True
            array = ArraySpec((math.prod(array.shape) + 1 + constraints.size,))
        return ModuleSpec(
            name=name,
            function=function,
            backend=backend,
            mode=self.choice(table, at + ("mode",), MODES, "auto"),
            operators=operators,
            input=array,
            contexts=contexts,
            batch=batch,
            sparse=sparse,
            emit=self.choice(table, at + ("emit",), EMITS, "auto"),
            timeout=None if timeout is None else float(timeout),
            points=points,
            implicit=implicit,
            checkpoint=checkpoint,
            snapshots=snapshots,
            inputs=inputs,
            has_aux=has_aux,
            flat=flat,
            accumulate=accumulate,
            triangle=triangle,
            adapters=adapters,
            constraints=constraints,
            time=time,
            verify=self.verify(table, at),
            config_path=self.path,
            line=self.line(at) or 0,
            key_lines=self.key_lines(table, at),
        )

    def checkpoint(self, table: dict[str, Any], key: Key) -> int | str | None:
        """``checkpoint = N`` (a positive int), ``"sqrt"`` or ``"revolve"``; None
        when absent."""
        if "checkpoint" not in table:
            return None
        value = table["checkpoint"]
        if type(value) is int and value >= 1:
            return int(value)
        if value in ("sqrt", "revolve"):
            return str(value)
        raise self.error(
            key,
            "'checkpoint' must be a positive number of steps (the reverse mode of "
            "a loop keeps a snapshot of its state every that many steps and "
            'recomputes the rest), "sqrt" (every ceil(sqrt(steps)) steps) or '
            '"revolve" (binomial checkpointing, keeping `snapshots` states); got '
            f"{_show(value)}",
        )

    def verify(self, table: dict[str, Any], at: Key) -> VerifySpec:
        """``verify_domain``, ``verify_points`` and the contexts' intervals."""
        domain = None
        if "verify_domain" in table:
            domain = self.interval(table, at + ("verify_domain",), integers=False)
        points = None
        if "verify_points" in table:
            points = self.get(table, at + ("verify_points",), str, _FUNCTION_FORMS)
            if split_function_ref(points) is None:
                raise self.error(
                    at + ("verify_points",),
                    f"'verify_points' must be {_FUNCTION_FORMS}; got {_show(points)}",
                )
        contexts: list[tuple[str, tuple[float, float]]] = []
        for index, context in enumerate(table.get("contexts", ())):
            key = at + ("contexts", index)
            dtype = context.get("dtype", "float64")
            if "range" in context:
                if dtype != "int64":
                    raise self.error(
                        key + ("range",),
                        f"'range' applies to int64 contexts (the integers verify "
                        f"draws); context '{context['name']}' is {dtype}: give it "
                        "verify_domain = [low, high] instead",
                    )
                contexts.append(
                    (context["name"], self.interval(context, key + ("range",), True))
                )
            elif "verify_domain" in context:
                if dtype == "bool":
                    raise self.error(
                        key + ("verify_domain",),
                        f"context '{context['name']}' is bool: verify draws both "
                        "values; it has no domain",
                    )
                interval = self.interval(
                    context, key + ("verify_domain",), dtype == "int64"
                )
                contexts.append((context["name"], interval))
        return VerifySpec(domain, points, tuple(contexts))

    def interval(
        self, table: dict[str, Any], key: Key, integers: bool
    ) -> tuple[float, float]:
        """``[low, high]``: two finite numbers (integers for ``integers``), low
        below high (or equal, for integers)."""
        value = table[str(key[-1])]
        kinds: tuple[type, ...] = (int,) if integers else (int, float)
        what = "integers" if integers else "numbers"
        ok = (
            type(value) in (list, tuple)
            and len(value) == 2
            and all(type(v) in kinds and math.isfinite(v) for v in value)
        )
        if ok and (value[0] > value[1] or (not integers and value[0] == value[1])):
            ok = False
        if not ok:
            order = "low <= high" if integers else "low < high"
            raise self.error(
                key,
                f"'{_dotted(key[2:])}' must be [low, high], two finite {what} with "
                f"{order}; got {_show(value)}",
            )
        return float(value[0]), float(value[1])

    def implicit(self, table: dict[str, Any], key: Key) -> str:
        """``implicit = true | false | "auto"`` as ``"on"``, ``"off"``, ``"auto"``."""
        if "implicit" not in table:
            return "off"
        value = table["implicit"]
        if value is True or value is False:
            return "on" if value else "off"
        if value == "auto":
            return "auto"
        raise self.error(
            key,
            "'implicit' must be true (every `while` loop on a traced condition is "
            'differentiated implicitly), false, or "auto" (those whose exit test is '
            f"a tolerance on a residual); got {_show(value)}",
        )

    def check_float32(
        self,
        table: dict[str, Any],
        at: Key,
        backend: str,
        sparse: bool,
        contexts: tuple[ContextSpec, ...],
    ) -> None:
        """What a float32 module (``input.dtype = "float32"``) cannot be combined
        with, refused at the key that asks for it, saying why. ``points = true``
        is offered: its variants compute in float32 as the operators do."""
        dtype_key = at + (("inputs",) if "inputs" in table else ("input", "dtype"))
        if backend != "trace":
            where = at + ("backend",) if "backend" in table else dtype_key
            raise self.error(
                where,
                'input.dtype = "float32" needs backend = "trace": the sympy '
                "backend prints Python floats (float64) and C doubles; the trace "
                "backend's vector code computes in float32",
            )
        emit = table.get("emit", "auto")
        if emit == "scalar":
            raise self.error(
                at + ("emit",),
                'emit = "scalar" cannot compute a float32 module: straight-line '
                "scalar code computes with Python floats, which are float64; use "
                'emit = "vector" (or "auto") or "c", which compute in float32',
            )
        if sparse:
            raise self.error(
                at + ("sparse",),
                "sparse = true is float64 only in this version (its CSR results "
                "are float64); drop it or declare input.dtype float64",
            )
        for index, context in enumerate(contexts):
            if context.dtype != "float64":
                continue  # float32 data, and int64 or bool data (indices, masks)
            raise self.error(
                at + ("contexts", index, "dtype"),
                f"context '{context.name}' is float64 in a float32 module: NumPy "
                "would promote the float32 input to float64 when it meets a float64 "
                "array, so the module would not compute in float32; declare it "
                'dtype = "float32" (it is converted exactly if your data is '
                "float32) or the input float64",
            )

    def operators(
        self,
        table: dict[str, Any],
        key: Key,
        shape: tuple[int, ...],
        inputs: tuple[InputSpec, ...] = (),
    ) -> tuple[str, ...]:
        names = table[str(key[-1])]
        if type(names) is not list or not names:
            raise self.error(
                key,
                f"'operators' must be a non-empty array of operator names; "
                f"got {_show(names)}",
            )
        for op in names:
            if type(op) is not str:
                raise self.error(
                    key, f"'operators' must contain strings; got {_show(op)}"
                )
            if op not in OPERATORS:
                raise self.error(
                    key,
                    f"unknown operator '{op}'; {_suggest(op, REQUESTABLE)}"
                    f"expected one of: {', '.join(REQUESTABLE)}",
                )
            if OPERATORS[op].scalar_input and shape != () and inputs:
                raise self.error(
                    key,
                    f"operator '{op}' needs one scalar input, but 'inputs' "
                    f"differentiates {structure.size(structure.tuple_of([i.tree for i in inputs]))} "
                    "numbers; use 'jacobian' or 'pushforward' (or 'gradient' for a "
                    "scalar output), which take every input",
                )
            if OPERATORS[op].scalar_input and shape != ():
                raise self.error(
                    key,
                    f"operator '{op}' needs a scalar input (input.shape = []), but "
                    f"input.shape is {list(shape)}; use 'jacobian' or "
                    "'pushforward' for array inputs",
                )
        return tuple(op for op in REQUESTABLE if op in names)

    def array(self, table: dict[str, Any], key: Key) -> ArraySpec:
        value = self.get(table, key, dict, "a table like { shape = [3] }")
        shape, dtype = self.shape_and_dtype(value, key, _ARRAY_KEYS)
        per_point = True
        if "per_point" in value:
            per_point = self.get(value, key + ("per_point",), bool, "true or false")
        return ArraySpec(shape=shape, dtype=dtype, per_point=per_point)

    def shape_and_dtype(
        self,
        value: dict[str, Any],
        key: Key,
        allowed: tuple[str, ...],
        dtypes: tuple[str, ...] = DTYPES,
    ) -> tuple[tuple[int, ...], str]:
        """Check a table holding ``shape`` and ``dtype`` (and maybe ``name``)."""
        label = _dotted(key[2:])
        self.check_keys(value, key, allowed)
        if "shape" not in value:
            raise self.error(key, f"{label} is missing the required key 'shape'")
        shape = value["shape"]
        if type(shape) is not list or any(type(n) is not int or n < 0 for n in shape):
            raise self.error(
                key + ("shape",),
                f"'{label}.shape' must be an array of non-negative integers "
                f"([] for a scalar); got {_show(shape)}",
            )
        size = math.prod(shape)
        if size > MAX_ELEMENTS:
            raise self.error(
                key + ("shape",),
                f"'{label}.shape' {list(shape)} has {size:,} elements, over "
                f"difgen's limit of {MAX_ELEMENTS:,} (1 GiB of float64) per array",
            )
        dtype = value.get("dtype", "float64")
        if dtype not in dtypes:
            what = f"expected one of {', '.join(dtypes)}"
            raise self.error(
                key + ("dtype",), f"'{label}.dtype' is {_show(dtype)}, but {what}"
            )
        return tuple(shape), dtype

    def solver_keys(
        self,
        table: dict[str, Any],
        at: Key,
        operators: tuple[str, ...],
        array: ArraySpec,
        sparse: bool,
        contexts: tuple[ContextSpec, ...],
        structured: bool,
    ) -> tuple[str | None, tuple[str, ...], Constraints | None, str | None]:
        """``triangle``, ``adapters``, ``constraints`` and ``time``, checked
        against the rest of the entry."""
        triangle = None
        if "triangle" in table:
            triangle = self.choice(table, at + ("triangle",), TRIANGLES, "")
            if not sparse or "hessian" not in operators:
                raise self.error(
                    at + ("triangle",),
                    "'triangle' applies to a sparse hessian; add sparse = true and "
                    '"hessian" to operators',
                )
        adapters: tuple[str, ...] = ()
        if "adapters" in table:
            given = self.get(table, at + ("adapters",), list, '["scipy", "ipopt"]')
            for item in given:
                if item not in ADAPTERS:
                    raise self.error(
                        at + ("adapters",),
                        '\'adapters\' must list "scipy" or "ipopt"; got '
                        f"{_show(item)}",
                    )
            adapters = tuple(a for a in ADAPTERS if a in given)
            if adapters and structured:
                raise self.error(
                    at + ("adapters",),
                    "'adapters' take one array input and output (the solvers' "
                    "flat vectors); use flat = false and one 'input'",
                )
        constraints = None
        if "constraints" in table:
            constraints = self.constraints(table, at + ("constraints",), array)
        if ("ipopt" in adapters) != (constraints is not None):
            raise self.error(
                at + ("constraints" if constraints is not None else "adapters",),
                "the ipopt adapter is built from an objective ('function') and "
                'a constraint function: give both adapters = ["ipopt"] and '
                'constraints = { function = "file.py:g", size = M }',
            )
        if constraints is not None:
            needed = {"gradient", "hessian"} - set(operators)
            if needed or ("sparse" in table and not sparse):
                raise self.error(
                    at + ("constraints",),
                    "an ipopt module differentiates its Lagrangian with the "
                    'operators "gradient" and "hessian" and sparse = true; add '
                    + (", ".join(f'"{n}"' for n in sorted(needed)) or "sparse = true"),
                )
            if triangle not in (None, "lower"):
                raise self.error(
                    at + ("constraints",),
                    "an ipopt module's hessian is IPOPT's lower triangle: drop "
                    'triangle = "upper"',
                )
            triangle = "lower"
        time = None
        if "time" in table:
            time = self.get(table, at + ("time",), str, "the name of a context")
            found = [c for c in contexts if c.name == time]
            if "scipy" not in adapters or not found or found[0].shape:
                raise self.error(
                    at + ("time",),
                    "'time' names the scalar context that is solve_ivp's t in the "
                    'scipy adapter\'s ode_jac(t, y, *args): add "scipy" to adapters '
                    "and a context of that name with shape = []",
                )
        return triangle, adapters, constraints, time

    def constraints(
        self, table: dict[str, Any], key: Key, array: ArraySpec
    ) -> Constraints:
        """``constraints = { function = "file.py:g", size = M }``."""
        entry = self.get(
            table, key, dict, '{ function = "file.py:g", size = M } (a table)'
        )
        self.check_keys(entry, key, _CONSTRAINT_KEYS)
        for required in _CONSTRAINT_KEYS:
            if required not in entry:
                raise self.error(key, f"'constraints' is missing the key '{required}'")
        function = self.get(entry, key + ("function",), str, _FUNCTION_FORMS)
        if split_function_ref(function) is None:
            raise self.error(
                key + ("function",),
                f"'constraints.function' must be {_FUNCTION_FORMS}; got "
                f"{_show(function)}",
            )
        size = entry["size"]
        if type(size) is not int or size < 1:
            raise self.error(
                key + ("size",),
                "'constraints.size' must be the number of constraints (an integer "
                f">= 1); got {_show(size)}",
            )
        if array.dtype != "float64":
            raise self.error(key, "an ipopt module computes in float64")
        return Constraints(function, size, tuple(array.shape))

    def refuse_with_structure(
        self,
        table: dict[str, Any],
        at: Key,
        inputs: tuple[InputSpec, ...],
        has_aux: bool,
        flat: bool,
    ) -> None:
        """What structured arguments are not combined with, refused at the key
        that asks for it, saying why (docs/design.md, "Structured arguments").

        ``points`` is offered (each leaf carries the points axis unless it says
        ``per_point = false``), with ``has_aux`` too: each point's aux value,
        stacked on the points axis. ``sparse`` is offered with ``flat =
        true``: the flat operators return the jacobian of the flat vectors as one
        CSR array; its blocks by output and input leaf would be CSR arrays of
        their own, cut out of it at every call, which a solver or a coloring does
        not want. ``batch`` stacks the seeds of every leaf (and the jvp or vjp
        results), except in a points module."""
        why = "inputs" if inputs else "has_aux" if has_aux else "flat"
        if table.get("sparse", False) and (not flat or has_aux):
            raise self.error(
                at + ("sparse",),
                f"'sparse' with '{why}' needs flat = true (and no has_aux): the "
                "sparse jacobian of a structured function is one CSR array over "
                "the flat vectors (the module docstring lists which slice is which "
                "leaf), not blocks nested by output and input; add flat = true",
            )
        if table.get("batch", 1) != 1 and table.get("points", False):
            raise self.error(
                at + ("batch",),
                f"module '{table.get('name', '?')}': 'batch' with 'points' is not "
                f"offered with '{why}' in this version: the structured points "
                "variants take one seed per point; build the batched operators in "
                "a module without points",
            )

    def inputs(self, table: dict[str, Any], key: Key) -> tuple[InputSpec, ...]:
        """The ``inputs`` array: each a name and a shape or a tree."""
        tables = self.get(
            table,
            key,
            list,
            'an array of tables like [{ name = "params", tree = { W = { shape = '
            "[3] } } }]",
        )
        if not tables:
            raise self.error(key, "'inputs' must not be empty")
        specs: list[InputSpec] = []
        for index, entry in enumerate(tables):
            at = key + (index,)
            label = _dotted(at[2:])
            if not isinstance(entry, dict):
                raise self.error(at, f"'{label}' must be a table; got {_show(entry)}")
            self.check_keys(entry, at, _INPUT_KEYS)
            if "name" not in entry:
                raise self.error(at, f"{label} is missing the required key 'name'")
            name = self.get(entry, at + ("name",), str, "a string")
            problem = naming.context_name_problem(name, [name])
            if problem is not None and name != naming.INPUT:  # x is the input
                raise self.error(
                    at + ("name",),
                    f"'{label}.name' becomes a parameter of every generated "
                    f"function, and {problem}; got {_show(name)}",
                )
            if any(other.name == name for other in specs):
                raise self.error(at + ("name",), f"duplicate input name '{name}'")
            if ("shape" in entry) == ("tree" in entry):
                raise self.error(
                    at,
                    f"{label} needs exactly one of 'shape' (one array) and 'tree' "
                    "(a dict, list or class of arrays)",
                )
            tree: structure.Tree
            if "shape" in entry:
                for extra in ("kind", "type"):
                    if extra in entry:
                        raise self.error(
                            at + (extra,), f"'{label}.{extra}' applies to a 'tree' only"
                        )
                tree = self.leaf({k: v for k, v in entry.items() if k != "name"}, at)
            else:
                tree = self.tree(entry["tree"], at + ("tree",), top=True)
                tree = self.tree_kind(entry, at, tree)
            specs.append(InputSpec(name, tree, self.shared_leaves(entry, at, tree)))
        return tuple(specs)

    def shared_leaves(
        self, entry: dict[str, Any], at: Key, tree: structure.Tree
    ) -> tuple[structure.Path, ...]:
        """The paths of the leaves without the points axis: ``per_point = false``
        on the input (every leaf), or on a leaf of its tree (a leaf's own
        ``per_point`` wins over the input's)."""
        whole = True
        if "per_point" in entry:
            whole = self.get(entry, at + ("per_point",), bool, "true or false")
        if "shape" in entry:
            return () if whole else ((),)
        found: list[structure.Path] = []

        def walk(
            raw: Any, node: structure.Tree, path: structure.Path, key: Key
        ) -> None:
            if isinstance(node, structure.Leaf):
                flag = whole
                if isinstance(raw, dict) and "per_point" in raw:
                    flag = self.get(raw, key + ("per_point",), bool, "true or false")
                if not flag:
                    found.append(path)
                return
            for name, child in zip(node.keys, node.children):
                walk(raw[name], child, path + (name,), key + (name,))

        walk(entry["tree"], tree, (), at + ("tree",))
        return tuple(found)

    def leaf(self, value: dict[str, Any], key: Key) -> structure.Leaf:
        """A leaf of ``inputs``. Its dtype is recorded (:meth:`inputs_dtype`):
        the structured operators lay the leaves end to end in one vector of the
        module's float type, so a float32 leaf makes a float32 module, traced
        as any float32 input is, in the IR's float type (the Leaf's float64)."""
        shape, dtype = self.shape_and_dtype(value, key, _ARRAY_KEYS)
        self.leaf_dtypes.append((key, dtype))
        return structure.Leaf(shape)

    def inputs_dtype(self) -> str:
        """The float type of the leaves just read: one for all of them (the
        flat vector has one dtype), refused at the first leaf that differs."""
        first_key, first = self.leaf_dtypes[0]
        for key, dtype in self.leaf_dtypes[1:]:
            if dtype != first:
                raise self.error(
                    key + ("dtype",),
                    f"'{_dotted(key[2:])}' is {dtype} but "
                    f"'{_dotted(first_key[2:])}' is {first}: the leaves of "
                    "'inputs' are laid end to end in one vector of the module's "
                    "float type, so they are all float64 or all float32 (mixed "
                    "precision is not offered)",
                )
        return first

    def tree(self, value: Any, key: Key, top: bool = False) -> structure.Tree:
        """A tree of the TOML spelling: a table with an array ``shape`` (and maybe
        ``dtype``) is a leaf, another table a dict, an array a list."""
        label = _dotted(key[2:])
        if isinstance(value, dict) and isinstance(value.get("shape"), list):
            return self.leaf(value, key)
        if isinstance(value, dict):
            names = sorted(value)
            kind = "dict"
        elif isinstance(value, list):
            names = list(range(len(value)))
            kind = "list"
        else:
            raise self.error(
                key,
                f"'{label}' must be a leaf {{ shape = [...] }}, a table of trees or "
                f"an array of trees; got {_show(value)}",
            )
        if not names:
            raise self.error(
                key, f"'{label}' is an empty {kind}: it has nothing to differentiate"
            )
        children = tuple(self.tree(value[n], key + (n,)) for n in names)
        return structure.Node(kind, tuple(names), children)

    def tree_kind(
        self, entry: dict[str, Any], at: Key, tree: structure.Tree
    ) -> structure.Tree:
        """``kind = "tuple"`` makes an array tree a tuple; ``type = "file.py:Cls"``
        makes a table tree a NamedTuple or a dataclass (which one, and its field
        order, are known when the pipeline imports the class)."""
        label = _dotted(at[2:])
        if "kind" in entry:
            kind = self.choice(entry, at + ("kind",), ("tuple", "list"), "list")
            if not isinstance(tree, structure.Node) or tree.kind != "list":
                raise self.error(
                    at + ("kind",),
                    f"'{label}.kind' applies to an array tree (tree = [...])",
                )
            tree = structure.Node(kind, tree.keys, tree.children)
        if "type" in entry:
            ref = self.get(entry, at + ("type",), str, _FUNCTION_FORMS)
            parts = split_function_ref(ref)
            if parts is None:
                raise self.error(
                    at + ("type",),
                    f"'{label}.type' must be {_FUNCTION_FORMS}; got {_show(ref)}",
                )
            if not isinstance(tree, structure.Node) or tree.kind != "dict":
                raise self.error(
                    at + ("type",),
                    f"'{label}.type' names a NamedTuple or dataclass, whose fields "
                    "are a table tree (tree = { field = { shape = [...] } })",
                )
            tree = structure.Node(
                "dataclass",
                tree.keys,
                tree.children,
                type_name=parts[1].rpartition(".")[2],
                type_ref=ref,
            )
        return tree

    def contexts(
        self,
        table: dict[str, Any],
        key: Key,
        operators: tuple[str, ...] | None = None,
        emitted: AbstractSet[str] = frozenset(),
    ) -> tuple[ContextSpec, ...]:
        if key[-1] not in table:
            return ()
        tables = self.get(
            table, key, list, 'an array of tables like [{ name = "data", shape = [3] }]'
        )
        specs: list[ContextSpec] = []
        for index, context in enumerate(tables):
            at = key + (index,)
            if not isinstance(context, dict):
                raise self.error(
                    at, f"'{_dotted(at[2:])}' must be a table; got {_show(context)}"
                )
            if "name" not in context:
                raise self.error(
                    at, f"{_dotted(at[2:])} is missing the required key 'name'"
                )
            name = self.get(context, at + ("name",), str, "a string")
            if any(other.name == name for other in specs):
                raise self.error(at + ("name",), f"duplicate context name '{name}'")
            shape, dtype = self.shape_and_dtype(
                context, at, _CONTEXT_KEYS, CONTEXT_DTYPES
            )
            per_point = False
            if "per_point" in context:
                per_point = self.get(
                    context, at + ("per_point",), bool, "true or false"
                )
            specs.append(
                ContextSpec(name=name, shape=shape, dtype=dtype, per_point=per_point)
            )
        names = [c.name for c in specs]
        for index, spec in enumerate(specs):
            problem = naming.context_name_problem(spec.name, names, operators, emitted)
            if problem is not None:
                raise self.error(
                    key + (index, "name"),
                    f"'{_dotted(key[2:] + (index,))}.name' becomes a parameter of "
                    f"every generated function, and {problem}; got {_show(spec.name)}",
                )
        return tuple(specs)

    def key_lines(self, table: dict[str, Any], at: Key) -> tuple[tuple[str, int], ...]:
        keys: list[Key] = [(name,) for name in table]
        keys += [("input", name) for name in table.get("input", ())]
        for index, entry in enumerate(table.get("inputs", ())):
            keys += [("inputs", index)]
            keys += [("inputs", index, name) for name in entry]
        for index, context in enumerate(table.get("contexts", ())):
            keys += [("contexts", index)]
            keys += [("contexts", index, name) for name in context]
        found = []
        for key in keys:
            line = self.line(at + key)
            if line is not None:
                found.append((".".join(str(part) for part in key), line))
        return tuple(found)
