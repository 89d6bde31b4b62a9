"""Render a module from printed parts through ``templates/module.py.j2`` and black.

Printers produce :class:`~difgen.targets.parts.Function` values (signature, body
lines, return; :mod:`difgen.targets.parts`); this module adds the header, imports and constants the generated module contract asks for
(docs/design.md, section 10) and formats with black, so the bytes are deterministic.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import jinja2

from difgen import floats, naming
from difgen.config import Config, ModuleSpec
from difgen.errors import InternalError
from difgen.hashing import BODY_HASH_PLACEHOLDER, stamp_body_hash
from difgen.operators import OPERATORS
from difgen.render import blackfast
from difgen.targets.parts import Function, ModuleParts
from difgen.targets.signatures import (
    argument_checks,
    data_helpers,
    points_argument_checks,
)
from difgen.version import VERSION


def _checks(f: Function, spec: ModuleSpec, ys: tuple[int, ...]) -> list[str]:
    """The argument checks ``f`` starts with."""
    if f.block_of is not None:
        return []
    if f.points_of is not None:
        return points_argument_checks(OPERATORS[f.points_of], spec, ys)
    return argument_checks(OPERATORS[f.name], spec, ys, skip=f.checked)


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


def _environment() -> jinja2.Environment:
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


def _imports(
    source: str, functions: list[Function], compiled: bool = False
) -> list[str]:
    """The imports ``source`` needs; NumPy always (the argument checks use it);
    ``math`` when a printer reported it or the module defines any helper of
    :mod:`difgen.floats` (most are written with it); with ``compiled`` (emit =
    "c") those of the extension's loader."""
    lines = []
    if compiled:
        lines += ["import importlib.machinery", "import importlib.util"]
    if any(f.helpers or "math" in f.modules for f in functions):
        lines.append("import math")
    if compiled:
        lines += ["import os", "import warnings"]
    if ": list[Any] = []" in source:  # the state stack of a loop's adjoint
        lines.append("from typing import Any")
    lines += ["", "import numpy as np", "from numpy.typing import NDArray"]
    if "scipy.special." in source:  # a special function only SciPy computes
        lines.append("import scipy.special  # type: ignore[import-untyped]")
    if "sp.csr_array" in source:
        lines.append("import scipy.sparse as sp  # type: ignore[import-untyped]")
    return lines


def _shape_desc(shape: Sequence[int], dtype: str = "float64") -> str:
    if dtype != "float64":  # run-time integer or boolean data
        return (
            f"{dtype} scalar" if not shape else f"{dtype} array of shape {tuple(shape)}"
        )
    return "scalar (float)" if not shape else f"array of shape {tuple(shape)}"


def config_reference(spec: ModuleSpec, config: Config) -> str:
    """The config path as seen from the output directory (no absolute paths)."""
    rel = os.path.relpath(config.path.resolve(), config.output_dir.resolve())
    return Path(rel).as_posix()


def render_module(
    spec: ModuleSpec,
    config: Config,
    parts: ModuleParts,
    source_hash: str,
    c_hash: str | None = None,
) -> str:
    """The complete, black-formatted text of a generated module.

    ``BODY_HASH`` is filled in last, over the formatted text, so that ``difgen
    check`` can recompute it from the file and spot hand edits.
    """
    functions = [
        dataclasses.replace(
            f,
            body=(*_checks(f, spec, parts.output_shape), *f.body),
        )
        for f in parts.functions
    ]
    body_text = "\n".join(
        "\n".join((f.signature, f.returns, *f.body)) for f in functions
    ) + "\n".join([v for _, v in parts.constants] + parts.setup)
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
        input_desc=_shape_desc(spec.input.shape),
        output_desc=_shape_desc(parts.output_shape),
        contexts=contexts,
        config=config_reference(spec, config),
        name=spec.name,
        imports=_imports(body_text, functions, c_hash is not None),
        c_hash=c_hash,
        csr_out=f"{naming.CHECK_CSR_OUT}(" in body_text,
        c_module=spec.name + naming.C_SUFFIX,
        wrappers=list(dict(w for f in functions for w in f.wrappers).items()),
        source_hash=source_hash,
        body_hash=BODY_HASH_PLACEHOLDER,
        input_shape=repr(tuple(spec.input.shape)),
        output_shape=repr(tuple(parts.output_shape)),
        constants=parts.constants,
        setup=parts.setup,
        all_names=repr(sorted(f.name for f in functions if f.block_of is None)),
        helpers=naming,
        points=any(f.points_of is not None for f in functions),
        float_helpers=floats.definitions(
            frozenset().union(*(f.helpers for f in functions))
        )
        + data_helpers(spec),
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
