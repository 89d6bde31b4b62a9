"""The ``difgen`` command: ``build``, ``check`` and ``ir``.

Every :class:`~difgen.errors.DifgenError` is printed as ``difgen: error: <message>``
on stderr, without a traceback, and the command exits 1.

>>> main(["build", "difgen.toml"])  # doctest: +SKIP
wrote generated/seed.py
0
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import difgen
from difgen.config import Config, ModuleSpec, load_config
from difgen.errors import ConfigError, DifgenError
from difgen.hashing import source_hash
from difgen.load import load_function
from difgen.write import check_writable, read_source_hash, write_if_changed


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (0 ok, 1 error, 2 usage)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else 1
    try:
        status: int = args.run(args)
    except DifgenError as exc:
        print(f"difgen: error: {exc}", file=sys.stderr)
        return 1
    return status


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="difgen",
        description="Generate standalone derivative modules for NumPy functions.",
    )
    parser.add_argument(
        "--version", action="version", version=f"difgen {difgen.__version__}"
    )
    commands = parser.add_subparsers(metavar="COMMAND", required=True)

    build = commands.add_parser("build", help="write the generated modules")
    build.add_argument("config", metavar="CONFIG", help="path to difgen.toml")
    build.add_argument(
        "--module",
        metavar="NAME",
        action="append",
        help="build only this module (repeatable); default: all",
    )
    build.set_defaults(run=_build)

    check = commands.add_parser(
        "check", help="exit 1 if a generated module is missing or stale"
    )
    check.add_argument("config", metavar="CONFIG", help="path to difgen.toml")
    check.set_defaults(run=_check)

    ir = commands.add_parser("ir", help="print the IR of one module at one stage")
    ir.add_argument("config", metavar="CONFIG", help="path to difgen.toml")
    ir.add_argument("--module", metavar="NAME", required=True)
    ir.add_argument(
        "--stage", default="traced", help="pipeline stage (default: traced)"
    )
    ir.set_defaults(run=_ir)
    return parser


def _build(args: argparse.Namespace) -> int:
    """Generate every selected module first; write only once all succeeded."""
    config = load_config(args.config)
    specs = _select(config, args.module)
    pipeline = _pipeline()
    outputs: list[tuple[Path, str]] = []
    for spec in specs:
        fn = load_function(spec)
        text = pipeline.generate_module(spec, config, fn)
        outputs.append((_output_path(config, spec), text))
    for path, _ in outputs:
        check_writable(path)  # refuse before writing anything
    for path, text in outputs:
        verb = "wrote" if write_if_changed(path, text) else "unchanged"
        print(f"{verb} {_display(path)}")
    return 0


def _check(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    problems = 0
    for spec in config.modules:
        path = _output_path(config, spec)
        fn = load_function(spec)
        if not path.is_file():
            state = "missing"
        elif read_source_hash(path) != source_hash(
            spec, _pipeline().trace_spec(spec, fn)
        ):
            state = "stale"
        else:
            continue
        problems += 1
        print(
            f"{_display(path)}: {spec.name}: {state} (run: difgen build {args.config})"
        )
    if problems:
        return 1
    count = len(config.modules)
    print(f"{count} module{'s' if count != 1 else ''} up to date")
    return 0


def _ir(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    (spec,) = _select(config, [args.module])
    text = _pipeline().ir_text(spec, load_function(spec), args.stage)
    print(text, end="" if text.endswith("\n") else "\n")
    return 0


def _select(config: Config, names: list[str] | None) -> list[ModuleSpec]:
    """The modules named on the command line, in config order (all if none)."""
    if not names:
        return list(config.modules)
    available = [spec.name for spec in config.modules]
    for name in names:
        if name not in available:
            raise ConfigError(
                config.path,
                None,
                f"no module named '{name}'; available: {', '.join(available)}",
            )
    return [spec for spec in config.modules if spec.name in names]


def _pipeline() -> ModuleType:
    # Imported here: the pipeline pulls in SymPy and the tracer, which the
    # config and check paths never need.
    return importlib.import_module("difgen.pipeline")


def _output_path(config: Config, spec: ModuleSpec) -> Path:
    return Path(config.output_dir, f"{spec.name}.py")


def _display(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it."""
    absolute = Path(os.path.abspath(path))
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)
