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
from difgen.budget import stage, time_limit
from difgen.config import Config, ModuleSpec, load_config
from difgen.errors import ConfigError, DifgenError
from difgen.hashing import source_hash
from difgen.load import load_function
from difgen.write import State, WriteTransaction, inspect_file

UP_TO_DATE = "up to date"
STALE = "stale (the function or its config changed)"
STALE_BROKEN = "stale, and the function no longer builds"
FOREIGN = "foreign file"
"""The states ``difgen check`` reports that the CLI itself needs to recognise."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (0 ok, 1 error, 2 usage)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else 1
    try:
        status: int = args.run(args)
        sys.stdout.flush()
    except DifgenError as exc:
        print(f"difgen: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("difgen: interrupted; nothing was written", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`difgen ir ... | head`): not an error of ours.
        # Point stdout at devnull so the interpreter's final flush stays quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
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
        "--timeout",
        metavar="SECONDS",
        type=_positive_seconds,
        default=None,
        help="stop a module whose build takes longer (a module's timeout key wins)",
    )
    build.add_argument(
        "--module",
        metavar="NAME",
        action="append",
        help="build only this module (repeatable); default: all",
    )
    build.set_defaults(run=_build)

    check = commands.add_parser(
        "check",
        help="exit 1 unless every generated module is up to date and unedited",
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


def _positive_seconds(text: str) -> float:
    """``--timeout``'s value: a positive number of seconds."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < 1e9:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return seconds


def _build(args: argparse.Namespace) -> int:
    """Generate every selected module first, then write them all or none."""
    config = load_config(args.config)
    specs = _select(config, args.module)
    pipeline = _pipeline()
    outputs: list[tuple[Path, str]] = []
    for spec in specs:
        limit = spec.timeout if spec.timeout is not None else args.timeout
        with time_limit(limit, spec.name):
            with stage("load"):
                fn = load_function(spec)
            text = pipeline.generate_module(spec, config, fn)
        outputs.append((_output_path(config, spec), text))
    transaction = WriteTransaction(outputs)  # refuses foreign files before writing
    changed = transaction.commit()
    for leftover in transaction.removed_leftovers:
        print(f"removed leftover {_display(leftover)}")
    for (path, _), wrote in zip(outputs, changed):
        print(f"{'wrote' if wrote else 'unchanged'} {_display(path)}")
    return 0


def _check(args: argparse.Namespace) -> int:
    """One line per module; exit 1 unless every module is up to date."""
    config = load_config(args.config)
    problems = foreign = 0
    for spec in config.modules:
        path = _output_path(config, spec)
        state = _module_state(spec, path)
        print(f"{_display(path)}: {spec.name}: {state}")
        problems += state != UP_TO_DATE
        foreign += state.startswith(FOREIGN)
    count = len(config.modules)
    if not problems:
        print(f"{count} module{'s' if count != 1 else ''} up to date")
        return 0
    advice = f"run: difgen build {args.config}"
    if foreign:
        advice = (
            "move the foreign files away (difgen never overwrites them), then " + advice
        )
    print(f"{problems} of {count} modules need attention; {advice}")
    return 1


def _module_state(spec: ModuleSpec, path: Path) -> str:
    """What ``difgen check`` says about one module.

    The file is read first: only an intact module is worth re-tracing the function
    for (tracing runs no backend, so it is cheap).
    """
    found = inspect_file(path)
    if found.state is State.MISSING:
        return "missing"
    if not found.state.ours:
        return f"{FOREIGN} (not written by difgen: {found.detail})"
    if found.state is State.EDITED:
        return "edited by hand"
    if found.state is State.TRUNCATED:
        return "truncated"
    if found.state is State.LEGACY:
        return "stale (written by an older difgen, without BODY_HASH)"
    try:
        graph = _pipeline().trace_spec(spec, load_function(spec))
    except DifgenError as exc:  # the config or the function changed beyond building
        return f"{STALE_BROKEN} ({exc})"
    return UP_TO_DATE if found.source_hash == source_hash(spec, graph) else STALE


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
