"""Render a module from printed parts through ``templates/module.py.j2`` and black.

Printers produce :class:`~difgen.targets.parts.Function` values (signature, body
lines, return, and what their code names: :mod:`difgen.targets.parts`); this module
adds the header, the imports and helpers those reports ask for (it never reads the
printed text back to find them) and the constants the generated module contract
asks for (docs/design.md, section 10), and formats with black, so the bytes are
deterministic.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import jinja2

from difgen import floats, naming, precision
from difgen.config import Config, ModuleSpec
from difgen.errors import InternalError
from difgen.hashing import BODY_HASH_PLACEHOLDER, stamp_body_hash
from difgen.operators import OPERATORS
from difgen.render import blackfast, solvers, structured
from difgen.render.structured import AUX, StructuredParts, private
from difgen.targets.parts import (
    BASE64,
    MATH,
    NOTHING,
    SCIPY_SPARSE,
    SCIPY_SPECIAL,
    TYPING,
    ZLIB,
    Function,
    ModuleParts,
    Uses,
)
from difgen.targets.signatures import (
    argument_checks,
    data_helpers,
    float_arguments,
    float_name,
    index_checks,
    points_argument_checks,
    points_index_checks,
)
from difgen.version import VERSION


def _checks(f: Function, spec: ModuleSpec, parts: ModuleParts) -> list[str]:
    """The argument checks ``f`` starts with, then the run-time index checks."""
    ys = parts.output_shape
    if f.block_of is not None:
        return []
    if f.points_of is not None:
        lines = points_argument_checks(OPERATORS[f.points_of], spec, ys)
        return lines + points_index_checks(parts.index_checks, spec)
    lines = argument_checks(
        OPERATORS[f.name], spec, ys, skip=f.checked, numpy_floats=f.numpy_floats
    )
    return lines + index_checks(parts.index_checks)


def _numpy_floats(
    functions: Sequence[Function], spec: ModuleSpec, parts: ModuleParts
) -> bool:
    """Whether the vector code of an operator takes a float argument (its check
    then calls the module's float64 helper)."""
    return any(
        f.numpy_floats
        and f.points_of is None
        and f.block_of is None
        and float_arguments(OPERATORS[f.name], spec, parts.output_shape)
        for f in functions
    )


def docstring_text(text: str) -> str:
    r"""``text`` made safe inside the module's docstring, on one line.

    Config strings and paths (a function reference, the config's path) may hold
    backslashes, quotes, newlines or other characters that would end or bend the
    docstring; they are written as escapes, so the file always parses and its
    first line is always the header line.

    >>> print(docstring_text('a\\b"c\nd'))
    a\\b\"c\nd
    """
    return text.encode("unicode_escape").decode("ascii").replace('"', '\\"')


@functools.cache
def _environment() -> jinja2.Environment:
    """The templates' one environment: it compiles a template once per process,
    not once per module rendered."""
    loader = jinja2.FunctionLoader(
        lambda name: resources.files("difgen.templates")
        .joinpath(name)
        .read_text("utf-8")
    )
    environment = jinja2.Environment(
        loader=loader,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    environment.filters["docstring"] = docstring_text
    return environment


IMPORTS = {
    MATH: "import math",
    TYPING: "from typing import Any",
    SCIPY_SPARSE: "import scipy.sparse as sp  # type: ignore[import-untyped]",
    SCIPY_SPECIAL: "import scipy.special  # type: ignore[import-untyped]",
    BASE64: "import base64",
    ZLIB: "import zlib",
}
"""The import of each module a printer may report (:class:`~difgen.targets.parts.Uses`)."""

TEMPLATE_HELPERS = frozenset({naming.CHECK_CSR_OUT})
"""The template's helpers that a module defines only when a printer reports them."""


def module_uses(functions: Sequence[Function], constants: Uses = NOTHING) -> Uses:
    """What the functions' code and the module ``constants`` name, as their
    printers reported it; a module or helper render does not know is a printer's
    bug (the module would not run)."""
    uses = constants
    for f in functions:
        uses |= f.uses
    unknown = sorted(
        (uses.modules - IMPORTS.keys())
        | (uses.helpers - TEMPLATE_HELPERS - set(floats.NAMES))
    )
    if unknown:
        raise InternalError(
            f"a printer reported {', '.join(unknown)}, which no generated module "
            "imports or defines; this is a difgen bug"
        )
    return uses


POINTS_IMPORTS = (
    "import os",
    "from collections.abc import Callable",
    "from concurrent.futures import ThreadPoolExecutor",
)
"""What a module with points variants imports for its thread pool (the
environment's ``DIFGEN_THREADS``, the blocks' work, the pool)."""


def imports_of(uses: Uses, compiled: bool = False, points: bool = False) -> list[str]:
    """The imports of a module whose code names ``uses``: NumPy always (the
    argument checks use it); ``math`` when a printer reported it or the module
    defines any helper of :mod:`difgen.floats` (most are written with it); with
    ``compiled`` (emit = "c") those of the extension's loader; with ``points``
    those of the points variants' thread pool."""
    lines = []
    if BASE64 in uses.modules:  # a compressed index table, decoded at import
        lines.append(IMPORTS[BASE64])
    if compiled:
        lines += ["import importlib.machinery", "import importlib.util"]
    if MATH in uses.modules or uses.helpers & set(floats.NAMES):
        lines.append(IMPORTS[MATH])
    if compiled:
        lines += ["import os", "import warnings"]
    if points and not compiled:
        lines.append("import os")
    if ZLIB in uses.modules:
        lines.append(IMPORTS[ZLIB])
    if TYPING in uses.modules:  # the state stack of a loop's adjoint
        lines.append(IMPORTS[TYPING])
    if points:
        lines += POINTS_IMPORTS[1:]
    lines += ["", "import numpy as np", "from numpy.typing import NDArray"]
    if SCIPY_SPARSE in uses.modules:
        lines.append(IMPORTS[SCIPY_SPARSE])
    if SCIPY_SPECIAL in uses.modules:  # a special function only SciPy computes
        lines.append(IMPORTS[SCIPY_SPECIAL])
    return lines


def _shape_desc(shape: Sequence[int], dtype: str = "float64") -> str:
    if dtype != "float64":  # run-time integer or boolean data
        return (
            f"{dtype} scalar" if not shape else f"{dtype} array of shape {tuple(shape)}"
        )
    return "scalar (float)" if not shape else f"array of shape {tuple(shape)}"


def _structure_context(
    spec: ModuleSpec,
    parts: ModuleParts,
    structure: StructuredParts | None,
    public: list[str],
) -> dict[str, object]:
    """What the template's structured parts need (nothing for a flat module)."""
    if structure is None:
        return {"structured": False, "c_target": "name"}
    ys = parts.output_shape
    inputs, output, layout = structured.docstring_parts(spec, structure, ys)
    wrapped = structure.interface.wrapped
    return {
        "structured": True,
        "wrapped": wrapped,
        "flat": spec.flat,
        "structure_inputs": inputs,
        "structure_output": output,
        "layout": layout,
        "classes": structured.classes(spec, structure, ys) if wrapped else [],
        "trees": structured.tree_constants(spec, structure, ys) if wrapped else [],
        "public_operators": (
            structured.wrappers(spec, structure, public, ys) if wrapped else []
        ),
        "c_target": '"_" + name + "_flat"' if wrapped else "name",
        # the float type the flat vector is laid out in (a float32 module's
        # leaves are float32 arrays, its scalars np.float32)
        "real": precision.module_float(),
        "real_array": precision.array_type(),
        "real_dtype": naming.F32 if precision.is_float32() else naming.F64,
        "real_scalar": "np.float32" if precision.is_float32() else "float",
        "points_structured": wrapped and (spec.points or spec.batch > 1),
    }


def _structure_imports(
    lines: list[str],
    structure: StructuredParts | None,
    spec: ModuleSpec,
    parts: ModuleParts,
) -> list[str]:
    """The imports of the public operators' helpers added to ``lines``."""
    if structure is None or not structure.interface.wrapped:
        return lines
    kinds = {k for k, _, _ in structured.classes(spec, structure, parts.output_shape)}
    stdlib = ["import dataclasses"] if "dataclass" in kinds else []
    stdlib.append("from collections.abc import Callable, Mapping")
    names = "Any, NamedTuple, NoReturn" if "namedtuple" in kinds else "Any, NoReturn"
    typing = f"from typing import {names}"
    rest = [line for line in lines if line not in (IMPORTS[TYPING], POINTS_IMPORTS[1])]
    cut = rest.index("")
    head = sorted(rest[:cut] + stdlib, key=lambda line: line.startswith("from"))
    return [*head, typing, *rest[cut:]]


def _lagrangian_note(spec: ModuleSpec) -> str:
    """The docstring's line on an ipopt module's stacked input (or "")."""
    if spec.constraints is None:
        return ""
    n = 1
    for size in spec.constraints.variables:
        n *= size
    return (
        f"x is z = (x of {n} variables, obj_factor, lagrange of "
        f"{spec.constraints.size}): the operators differentiate IPOPT's Lagrangian "
        f"obj_factor * f(x) + lagrange @ g(x), g = {spec.constraints.function}; "
        f"{naming.IPOPT_CLASS} gives cyipopt its callbacks from them."
    )


def _private_compiled(spec: ModuleSpec, functions: list[Function]) -> str:
    """The source of the list of an ipopt module's private functions that its
    extension computes (their names are no operator's, so that the extension
    replaces them too), or "" for any other module."""
    if spec.constraints is None:
        return ""
    names = sorted(f.name for f in functions if f.block_of is not None and f.native)
    return repr(names) if names else ""


def config_reference(spec: ModuleSpec, config: Config) -> str:
    """The config path as seen from the output directory (no absolute paths)."""
    rel = os.path.relpath(config.path.resolve(), config.output_dir.resolve())
    return Path(rel).as_posix()


def render_module(
    spec: ModuleSpec,
    config: Config | None,
    parts: ModuleParts,
    source_hash: str,
    c_hash: str | None = None,
    structure: StructuredParts | None = None,
) -> str:
    """The complete, black-formatted text of a generated module.

    ``config`` None: the module is made in-process by :func:`difgen.generate`,
    and its docstring says so instead of naming a config file to rebuild it from.
    ``BODY_HASH`` is filled in last, over the formatted text, so that ``difgen
    check`` can recompute it from the file and spot hand edits.

    With ``structure`` (several inputs, trees, several outputs, aux, ``flat``) the
    docstring says the structure and the flat layout, and when the public
    operators wrap the flat ones (:mod:`difgen.render.structured`) the flat ones
    are renamed privately and the wrappers follow them.
    """
    functions = [
        dataclasses.replace(
            f,
            body=(*_checks(f, spec, parts), *f.body),
        )
        for f in parts.functions
    ]
    wrapped = structure is not None and structure.interface.wrapped
    public = sorted(f.name for f in functions if f.block_of is None)
    aux_fn = [] if structure is None or structure.aux is None else [structure.aux]
    aux_points = [] if structure is None else list(structure.aux_points)
    numpy_floats = _numpy_floats([*functions, *aux_fn, *aux_points], spec, parts)
    if structure is not None and structure.aux is not None:
        aux = structure.aux
        functions.append(
            dataclasses.replace(
                aux, name=AUX, body=(*_checks(aux, spec, parts), *aux.body)
            )
        )
        functions += [
            dataclasses.replace(f, body=(*_checks(f, spec, parts), *f.body))
            for f in aux_points
        ]
    if wrapped:
        functions = [
            (
                f
                if f.name.startswith(AUX) or f.block_of is not None  # private already
                else dataclasses.replace(f, name=private(f.name))
            )
            for f in functions
        ]
    uses = module_uses(functions, parts.uses)
    points = any(f.points_of is not None for f in functions)
    solver = solvers.solver_parts(
        spec, parts.patterns, parts.functions, parts.output_shape
    )
    solver_names = [name for name, _ in solver]
    contexts = ", ".join(
        f"{c.name} {_shape_desc(c.shape, c.dtype)}" for c in spec.contexts
    )
    # Long runs of simple statements are formatted apart (see render/blackfast.py):
    # black on the whole of a large module is most of its build time.
    bodies, runs = blackfast.extract_runs([f.body for f in functions])
    render = functools.partial(
        _environment().get_template("module.py.j2").render,
        version=VERSION,
        function=spec.function,
        backend=spec.backend,
        mode=spec.mode,
        emission=(
            parts.emission
            if c_hash is None
            else f"c (extension {spec.name}{naming.C_SUFFIX}; "
            f"fallback {parts.emission})"
        ),
        input_desc=_shape_desc(spec.input.shape, spec.input.dtype),
        output_desc=_shape_desc(parts.output_shape, spec.input.dtype),
        float_dtype=spec.input.dtype,
        float_name=float_name(),
        **_structure_context(spec, parts, structure, public),
        contexts=contexts,
        coloring=parts.coloring,
        config=None if config is None else config_reference(spec, config),
        name=spec.name,
        imports=_structure_imports(
            imports_of(uses, c_hash is not None, points), structure, spec, parts
        ),
        scipy=SCIPY_SPARSE in uses.modules,
        scipy_special=SCIPY_SPECIAL in uses.modules,
        c_hash=c_hash,
        csr_out=naming.CHECK_CSR_OUT in uses.helpers,
        c_module=spec.name + naming.C_SUFFIX,
        wrappers=list(dict(w for f in functions for w in f.wrappers).items()),
        source_hash=source_hash,
        body_hash=BODY_HASH_PLACEHOLDER,
        input_shape=repr(tuple(spec.input.shape)),
        output_shape=repr(tuple(parts.output_shape)),
        constants=parts.constants,
        setup=parts.setup,
        all_names=repr(sorted(public + solver_names)),
        python_operators=repr(public) if solver_names else "__all__",
        private_compiled=_private_compiled(spec, functions),
        solver_parts=solver,
        lagrangian=_lagrangian_note(spec),
        helpers=naming,
        points=points,
        thread_points=_thread_points() if points else None,
        float_helpers=floats.definitions(uses.helpers)
        + data_helpers(spec, parts.index_checks, numpy_floats),
    )
    skeleton = [dataclasses.replace(f, body=b) for f, b in zip(functions, bodies)]
    text = blackfast.format_with_runs(
        render(functions=skeleton),
        runs,
        lambda: render(functions=functions),
    )
    # The name check parses the module without its runs (parsing is most of its
    # cost) and takes the runs' assigned names from their simple form.
    elsewhere = {f.name: blackfast.assigned_names(runs, f.body) for f in skeleton}
    try:
        if any(names is None for names in elsewhere.values()):
            naming.check_module(text)
        else:
            naming.check_module(
                render(functions=skeleton),
                {name: names or set() for name, names in elsewhere.items()},
            )
    except naming.NameClash as exc:
        raise InternalError(
            f"module {spec.name!r}: the generated code would use one name for two "
            f"things ({exc}); this is a difgen bug, nothing was written"
        ) from None
    return stamp_body_hash(text)


def _thread_points() -> int:
    """The NumPy emission's points-per-thread threshold, from its printer: imported
    only for modules with points variants (that printer imports SymPy's)."""
    from difgen.targets.numpy.points import THREAD_POINTS

    return THREAD_POINTS
