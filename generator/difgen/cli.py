"""The ``difgen`` command: ``build``, ``check``, ``verify`` and ``ir``.

A thin layer over :mod:`difgen.api`: it finds the config, calls the API and prints
the results. Every :class:`~difgen.errors.DifgenError` is printed as
``difgen: error: <message>`` on stderr, without a traceback, and the command exits
1; Ctrl-C exits 130.

Without a CONFIG argument, ``build``, ``check`` and ``verify`` use ``difgen.toml``
in the current directory, else ``pyproject.toml`` if it has a ``[tool.difgen]``
table, and say on stderr which one.

>>> main(["build", "difgen.toml"])  # doctest: +SKIP
wrote generated/seed.py
0
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from difgen.api import (
    Action,
    Status,
    build,
    check,
    load_pipeline,
    select_modules,
    verify,
)
from difgen.config import find_config, load_config
from difgen.errors import DifgenError
from difgen.load import load_function
from difgen.progress import Reporter
from difgen.version import VERSION


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (0 ok, 1 error, 2 usage)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else 1
    try:
        with _terminate_as_interrupt():
            status: int = args.run(args)
        sys.stdout.flush()
    except DifgenError as exc:
        print(f"difgen: error: {exc}", file=sys.stderr)
        return 1
    except Terminated:
        print("difgen: terminated; nothing was written", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("difgen: interrupted; nothing was written", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`difgen ir ... | head`): not an error of ours.
        # Point stdout at devnull so the interpreter's final flush stays quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return status


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: unwound like Ctrl-C, so that the worker processes of
    ``--jobs`` are ended, a compiler's temporary file removed and nothing is left
    half-written, instead of the process vanishing with its children running."""


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="difgen",
        description="Generate standalone derivative modules for NumPy functions.",
    )
    parser.add_argument("--version", action="version", version=f"difgen {VERSION}")
    commands = parser.add_subparsers(metavar="COMMAND", required=True)

    build = commands.add_parser("build", help="write the generated modules")
    _config_argument(build)
    build.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_timeout,
        default=None,
        help="stop a module whose build takes longer (a module's timeout key "
        "wins; default 1800, 'inf' for none)",
    )
    _module_option(build, "build only this module (repeatable); default: all")
    build.add_argument(
        "-j",
        "--jobs",
        metavar="N",
        type=_positive_int,
        default=1,
        help="generate modules in N processes (default 1); files are still "
        "written all or nothing, with the same bytes",
    )
    build.add_argument(
        "--compile",
        action="store_true",
        help='compile the C source of every emit = "c" module into its extension '
        "(needs a C compiler and the Python and NumPy headers)",
    )
    build.add_argument(
        "--force",
        action="store_true",
        help="generate every module, also those whose inputs are unchanged since "
        "the last build (which are otherwise skipped)",
    )
    build.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 1 when a file was written (for a pre-commit hook: the commit "
        "stops until the written files are added)",
    )
    _verbosity(build)
    build.set_defaults(run=_build)

    check = commands.add_parser(
        "check",
        help="exit 1 unless every generated module is up to date and unedited",
    )
    _config_argument(check)
    check.add_argument(
        "-q", "--quiet", action="store_true", help="print only the modules at fault"
    )
    check.add_argument(
        "--missing-ok",
        action="store_true",
        help="for a project that gitignores its generated modules (its build "
        "backend generates them): build a missing module in a temporary folder "
        "instead, and fail only if it does not build",
    )
    check.add_argument(
        "--compiled",
        action="store_true",
        help='also exit 1 when an emit = "c" module\'s extension is not compiled '
        "(by default that is reported: the module runs its Python operators)",
    )
    check.set_defaults(run=_check)

    verify = commands.add_parser(
        "verify",
        help="check the generated modules numerically against the function",
    )
    _config_argument(verify)
    _module_option(verify, "verify only this module (repeatable); default: all")
    verify.add_argument(
        "--points",
        metavar="N",
        type=_positive_int,
        default=3,
        help="random points per module (default 3)",
    )
    verify.add_argument(
        "--seed",
        type=_seed,
        default=0,
        help="seed of the random points, a non-negative integer (default 0)",
    )
    verify.add_argument(
        "--tolerance-factor",
        metavar="F",
        type=_positive_number,
        default=1.0,
        help="multiply every tolerance by F (default 1)",
    )
    verify.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_timeout,
        default=None,
        help="stop verifying a module after SECONDS (a module's timeout key "
        "wins; default 300, 'inf' for none)",
    )
    verify.add_argument(
        "-q", "--quiet", action="store_true", help="print only the failures"
    )
    verify.set_defaults(run=_verify)

    ir = commands.add_parser("ir", help="print the IR of one module at one stage")
    ir.add_argument("config", metavar="CONFIG", help="path to difgen.toml")
    ir.add_argument("--module", metavar="NAME", required=True)
    ir.add_argument(
        "--stage", default="traced", help="pipeline stage (default: traced)"
    )
    ir.set_defaults(run=_ir)
    return parser


def _config_argument(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "config",
        metavar="CONFIG",
        nargs="?",
        help="difgen.toml, or a pyproject.toml with [tool.difgen] (default: "
        "whichever of the two is in the current directory)",
    )


def _module_option(command: argparse.ArgumentParser, text: str) -> None:
    command.add_argument("--module", metavar="NAME", action="append", help=text)


def _verbosity(command: argparse.ArgumentParser) -> None:
    group = command.add_mutually_exclusive_group()
    group.add_argument(
        "-q", "--quiet", action="store_true", help="print nothing but errors"
    )
    group.add_argument(
        "-v", "--verbose", action="store_true", help="print each stage of each module"
    )


def _positive_number(text: str) -> float:
    """``--timeout``'s and ``--tolerance-factor``'s value: a positive number."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < 1e9:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return seconds


def _timeout(text: str) -> float:
    """``--timeout``'s value: a positive number of seconds, or ``inf`` (no limit)."""
    if text.strip().lower() in ("inf", "none"):
        return math.inf
    return _positive_number(text)


def _positive_int(text: str) -> int:
    """``--jobs``' and ``--points``' value: a positive integer."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _seed(text: str) -> int:
    """``--seed``'s value: a non-negative integer (NumPy's generators take no other)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"expected a non-negative integer, got {text!r}"
        )
    return value


def _config_path(args: argparse.Namespace) -> Path:
    """CONFIG as given, or the one found in the current directory (said on stderr)."""
    if args.config is not None:
        return Path(args.config)
    path = find_config()
    if not getattr(args, "quiet", False):
        table = " [tool.difgen]" if path.name == "pyproject.toml" else ""
        print(f"difgen: using {_display(path)}{table}", file=sys.stderr)
    return path


def _build(args: argparse.Namespace) -> int:
    """Generate every selected module first, then write them all or none."""

    config = load_config(_config_path(args))
    total = len(select_modules(config, args.module))
    reporter = None if args.quiet else Reporter(sys.stderr, total, args.verbose)
    with reporter or contextlib.nullcontext():
        result = build(
            config,
            args.module,
            timeout=args.timeout,
            jobs=args.jobs,
            progress=reporter,
            compile=args.compile,
            force=args.force,
        )
    if not args.quiet:
        for leftover in result.removed_leftovers:
            print(f"removed leftover {_display(leftover)}")
        for module in result.modules:
            if module.action is Action.SKIPPED:
                print(f"skipped {_display(module.path)} (up to date)")
                continue
            verb = "wrote" if module.action is Action.WRITTEN else "unchanged"
            print(f"{verb} {_display(module.path)}")
        for compiled in result.compiled:
            print(f"compiled {_display(compiled.path)} ({compiled.seconds:.2f} s)")
    if args.exit_code and result.written:
        count = len(result.written)
        print(
            f"difgen: {count} module{'s' if count != 1 else ''} written; "
            "add them (git add), then commit again",
            file=sys.stderr,
        )
        return 1
    return 0


def _check(args: argparse.Namespace) -> int:
    """One line per module; exit 1 unless every module is up to date."""

    result = check(_config_path(args), missing_ok=args.missing_ok)
    faults = [m for m in result.modules if not m.ok or (args.compiled and m.uncompiled)]
    for module in result.modules:
        if not (args.quiet and module not in faults and not module.uncompiled):
            print(f"{_display(module.path)}: {module.name}: {module.describe()}")
    count = len(result.modules)
    uncompiled = sum(m.uncompiled for m in result.modules)
    if result.ok and not (args.compiled and uncompiled):
        if not args.quiet:
            notes = [f"{uncompiled} without its extension"] if uncompiled else []
            absent = sum(m.status is Status.BUILDS for m in result.modules)
            if absent:
                notes.append(f"{absent} not in the tree, and it builds")
            extra = f" ({'; '.join(notes)})" if notes else ""
            print(f"{count} module{'s' if count != 1 else ''} up to date{extra}")
        return 0
    if result.ok:
        print(
            f"{uncompiled} of {count} modules have no compiled extension; "
            "run: difgen build --compile" + (f" {args.config}" if args.config else "")
        )
        return 1
    advice = "run: difgen build" + (f" {args.config}" if args.config else "")
    if any(m.status is Status.NOT_CHECKED for m in result.modules):
        advice = (
            "install the project's dependencies where difgen runs (a pre-commit "
            "hook: list them in its additional_dependencies), then check again"
        )
    elif any(m.status is Status.FOREIGN for m in result.modules):
        advice = (
            "move the foreign files away (difgen never overwrites them), then " + advice
        )
    print(f"{len(result.problems)} of {count} modules need attention; {advice}")
    return 1


def _verify(args: argparse.Namespace) -> int:
    """A line per operator of each module; exit 1 if any is past its tolerance."""

    result = verify(
        _config_path(args),
        args.module,
        points=args.points,
        seed=args.seed,
        tolerance_factor=args.tolerance_factor,
        timeout=args.timeout,
    )
    failed = 0
    for module in result.modules:
        failed += not module.passed
        where = f"{_display(module.path)}: {module.name}"
        if module.problem is not None:
            print(f"{where}: FAIL: {module.problem}")
            continue
        stale = " (stale: the function changed since it was built)"
        if not (args.quiet and module.passed):
            print(where + (stale if module.stale else ""))
            if module.emission:
                print(f"  {module.emission}")
        labels = [
            op.operator + (f" [{op.worst.kind}]" if len(op.results) > 1 else "")
            for op in module.operators
        ]
        width = max(map(len, labels), default=0)
        for op, label in zip(module.operators, labels):
            if not (args.quiet and op.passed):
                print(
                    f"  {label:<{width}}  error {op.worst.error:7.1e}  tolerance "
                    f"{op.worst.tolerance:.0e}  {'ok' if op.passed else 'FAIL'}"
                )
                for message in op.warnings:  # only a failed operator's
                    print(f"  {'':<{width}}  warned: {message}")
        if module.hint:
            print(f"  hint: {module.hint}")
    count = len(result.modules)
    points = f"{result.points} random point{'s' if result.points != 1 else ''}"
    if failed:
        print(f"{failed} of {count} modules failed at {points} (seed {result.seed})")
        return 1
    if not args.quiet:
        plural = "s" if count != 1 else ""
        print(f"{count} module{plural} verified at {points} (seed {result.seed})")
    return 0


def _ir(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    (spec,) = select_modules(config, [args.module])
    text = load_pipeline().ir_text(spec, load_function(spec), args.stage)
    print(text, end="" if text.endswith("\n") else "\n")
    return 0


def _display(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it."""
    absolute = Path(os.path.abspath(path))
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)
