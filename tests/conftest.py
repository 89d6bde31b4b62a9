"""Shared fixtures: build a generated module from a function file and import it."""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from difgen.config import load_config
from difgen.load import load_function
from difgen.pipeline import generate_module

TESTS = Path(__file__).parent
SUPPORT = TESTS / "support"
"""Support modules of the tests: case tables (``*_cases.py``), the function files
that configs trace (``*_functions.py``, ``scenarios.py``), oracles and harnesses; on
``sys.path`` through ``pythonpath`` in pyproject.toml."""
_counter = itertools.count()


def _toml_value(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return str(value)


def write_config(
    directory: Path,
    source: Path,
    function: str,
    input_shape: Sequence[int],
    operators: Sequence[str],
    contexts: Sequence[Sequence[int]] = (),
    **options: Any,
) -> Path:
    """A one-module difgen.toml next to a copy of ``source``."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, directory / source.name)
    ctx = ", ".join(
        f'{{ name = "c{i}", shape = {_toml_value(list(s))} }}'
        for i, s in enumerate(contexts)
    )
    lines = [
        "[difgen]",
        'output_dir = "out"',
        "",
        "[[module]]",
        'name = "mod"',
        f'function = "{source.name}:{function}"',
        f"operators = {_toml_value(list(operators))}",
        f"input = {{ shape = {_toml_value(list(input_shape))} }}",
    ]
    if contexts:
        lines.append(f"contexts = [{ctx}]")
    lines += [f"{k} = {_toml_value(v)}" for k, v in options.items()]
    path = directory / "difgen.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def import_file(path: Path) -> ModuleType:
    """Import a generated module from its file under a unique name."""
    name = f"_difgen_generated_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def operators_source(module: ModuleType) -> str:
    """The source of a generated module's operators (``__all__``), without the
    module's argument-check helpers, whose own loops walk a refused list."""
    return "\n".join(
        inspect.getsource(getattr(module, name)) for name in module.__all__
    )


def build_and_import(config_path: Path) -> tuple[ModuleType, str]:
    """Generate the config's single module, write it, import it."""
    config = load_config(config_path)
    (spec,) = config.modules
    text = generate_module(spec, config, load_function(spec))
    config.output_dir.mkdir(parents=True, exist_ok=True)
    path = config.output_dir / f"{spec.name}.py"
    path.write_text(text)
    return import_file(path), text


@pytest.fixture(scope="session")
def module_cache(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Build each (function, options) module once per test session."""
    cache: dict[Any, tuple[ModuleType, str]] = {}

    def get(
        source: Path,
        function: str,
        input_shape: Sequence[int],
        operators: Sequence[str],
        contexts: Sequence[Sequence[int]] = (),
        **options: Any,
    ) -> tuple[ModuleType, str]:
        key = (
            str(source),
            function,
            tuple(input_shape),
            tuple(operators),
            tuple(map(tuple, contexts)),
            tuple(sorted(options.items())),
        )
        if key not in cache:
            directory = tmp_path_factory.mktemp(function)
            cfg = write_config(
                directory, source, function, input_shape, operators, contexts, **options
            )
            cache[key] = build_and_import(cfg)
        return cache[key]

    return get
