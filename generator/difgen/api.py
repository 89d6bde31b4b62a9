"""difgen from Python: :func:`build`, :func:`check` and :func:`verify`.

The ``difgen`` command is a thin layer over these functions: it prints their
results. Each takes a config as a path (``difgen.toml``, or a ``pyproject.toml``
with a ``[tool.difgen]`` table), an already loaded :class:`~difgen.config.Config`,
or None to find one in the current directory (:func:`difgen.config.find_config`).
Bad input raises a :class:`~difgen.errors.DifgenError` subclass whose message names
the file and line at fault; nothing is printed.

Importing this module is cheap: the pipeline (SymPy, the tracer, the backends) is
imported on the first call that needs it, like the command line does.

>>> result = build("difgen.toml")  # doctest: +SKIP
>>> [(m.name, m.action.value) for m in result.modules]  # doctest: +SKIP
[('seed', 'written'), ('rosenbrock', 'unchanged')]
>>> check("difgen.toml").ok  # doctest: +SKIP
True
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import multiprocessing
import os
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    as_completed,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Union

from difgen import budget, incremental, verification
from difgen.budget import (
    COMPILE,
    COMPILED,
    SKIPPED,
    Progress,
    ProgressCallback,
    reporting,
    stage,
    time_limit,
)
from difgen.config import Config, ModuleSpec, find_config, load_config
from difgen.errors import ConfigError, DifgenError, MissingDependencyError, UsageError
from difgen.hashing import source_hash
from difgen.load import load_function, load_object
from difgen.naming import C_SUFFIX

if TYPE_CHECKING:
    from difgen.targets.c import compiling
else:

    class _Compiling:
        """:mod:`difgen.targets.c.compiling`, imported on first use: only the
        builds, checks and compiles of ``emit = "c"`` modules reach it."""

        def __getattr__(self, name: str) -> Any:
            from difgen.targets.c import compiling

            return getattr(compiling, name)

    compiling = _Compiling()

from difgen.verification import ModuleVerification
from difgen.write import State, WriteTransaction, inspect_file, remove_leftovers

ConfigLike = Union[str, "os.PathLike[str]", Config, None]
"""What the API accepts as a config: a path, a loaded Config, or None (find it)."""


class Action(enum.Enum):
    """What a build did to a module's file."""

    WRITTEN = "written"
    UNCHANGED = "unchanged"
    SKIPPED = "skipped"
    """Not generated: its inputs are as when it was built (``--force`` builds it)."""


class Status(enum.Enum):
    """What :func:`check` found at a module's path."""

    UP_TO_DATE = "up to date"
    STALE = "stale"
    MISSING = "missing"
    EDITED = "edited"
    TRUNCATED = "truncated"
    FOREIGN = "foreign"
    NOT_CHECKED = "not checked"
    """The function's module imports a package missing where difgen runs."""
    BUILDS = "not in the tree; it builds"
    """``check(missing_ok=True)``: absent (a layout that gitignores its generated
    modules), and generated into a temporary folder without error."""


@dataclass(frozen=True)
class BuiltModule:
    """One module of a build: where it went, what happened, why, how long."""

    name: str
    path: Path
    action: Action
    reason: str
    """``"new file"``, ``"contents changed"``, ``"identical bytes"`` or (skipped)
    ``"up to date"``."""
    seconds: float
    """Time to generate the module's text (load, trace, derivatives, emit); for a
    skipped module, to find its inputs unchanged."""
    stages: tuple[tuple[str, float], ...]
    """Seconds per stage, in the order the stages ran."""
    notes: tuple[str, ...] = ()
    """What the build did differently because a step went over its budget
    (:func:`difgen.budget.note`), e.g. vector code instead of scalar code."""


@dataclass(frozen=True)
class BuildResult:
    """What :func:`build` did, module by module, in config order."""

    config: Path
    modules: tuple[BuiltModule, ...]
    removed_leftovers: tuple[Path, ...] = ()
    """Temporary files of an interrupted earlier build, removed by this one."""
    compiled: tuple[compiling.Compiled, ...] = ()
    """Extensions compiled by ``build(compile=True)`` (emit = "c")."""

    @property
    def written(self) -> tuple[BuiltModule, ...]:
        """The modules whose file changed."""
        return tuple(m for m in self.modules if m.action is Action.WRITTEN)


@dataclass(frozen=True)
class ModuleCheck:
    """The state of one generated module, and why."""

    name: str
    path: Path
    status: Status
    reason: str = ""
    uncompiled: bool = False
    """An ``emit = "c"`` module whose extension is not built here: it runs its
    Python operators (up to date all the same; ``check --compiled`` fails it)."""

    @property
    def ok(self) -> bool:
        """True when the module is up to date (and unedited), or absent but
        buildable under ``check(missing_ok=True)``."""
        return self.status in (Status.UP_TO_DATE, Status.BUILDS)

    def describe(self) -> str:
        """The state as ``difgen check`` prints it.

        >>> ModuleCheck("m", Path("m.py"), Status.STALE, "it changed").describe()
        'stale (it changed)'
        """
        if self.status is Status.STALE:
            return f"stale ({self.reason})"
        if self.status is Status.FOREIGN:
            return f"foreign file (not written by difgen: {self.reason})"
        if self.status is Status.EDITED:
            return "edited by hand"
        if self.status is Status.NOT_CHECKED:
            return f"not checked: {self.reason}"
        if self.uncompiled:
            return (
                "up to date, but its extension is not compiled (the module runs "
                "its Python operators; run: difgen build --compile)"
            )
        return str(self.status.value)


@dataclass(frozen=True)
class CheckResult:
    """What :func:`check` found, module by module, in config order."""

    config: Path
    modules: tuple[ModuleCheck, ...]

    @property
    def ok(self) -> bool:
        """True when every module is up to date."""
        return all(m.ok for m in self.modules)

    @property
    def problems(self) -> tuple[ModuleCheck, ...]:
        """The modules that are not up to date."""
        return tuple(m for m in self.modules if not m.ok)


@dataclass(frozen=True)
class VerifyResult:
    """What :func:`verify` measured, module by module, in config order."""

    config: Path
    modules: tuple[ModuleVerification, ...]
    points: int
    seed: int

    @property
    def ok(self) -> bool:
        """True when every operator of every module is within its tolerance."""
        return all(m.passed for m in self.modules)


def build(
    config: ConfigLike = None,
    modules: Sequence[str] | None = None,
    *,
    timeout: float | None = None,
    jobs: int = 1,
    progress: ProgressCallback | None = None,
    compile: bool = False,
    force: bool = False,
) -> BuildResult:
    """Generate the modules (all, or those named), then write them all or none.

    A module whose inputs are unchanged since the build that wrote it (its
    function's source and the project's modules it uses, the data files it read,
    its config entry, difgen and its templates: :mod:`difgen.incremental`) is
    skipped without loading its function (:attr:`Action.SKIPPED`); ``force``
    generates every module regardless.

    ``timeout`` bounds each module's generation in seconds (a module's own
    ``timeout`` key wins; None: :data:`difgen.budget.DEFAULT_TIMEOUT`, half an
    hour; ``math.inf``: no limit). ``jobs > 1`` generates modules in that many worker
    processes; the files are still written once, by this process, all or none, and
    their bytes are the same as with ``jobs=1``. The workers are spawned, so a
    script that calls ``build(jobs=N)`` needs the usual ``if __name__ ==
    "__main__":`` guard of multiprocessing. ``progress`` is called with a
    :class:`~difgen.budget.Progress` as each module enters each stage (in this
    process and thread, whatever ``jobs`` is).

    ``compile`` then compiles the C source of every ``emit = "c"`` module into
    its extension, next to the module, unless the extension is newer than the
    source (:mod:`difgen.targets.c.compiling`).

    Raises :class:`~difgen.errors.DifgenError` (nothing written) on a bad config,
    a function that cannot be loaded or traced, a timeout, or a file difgen did
    not write in the way; :class:`~difgen.targets.c.compiling.CompileError` if the compiler
    fails (the sources are written by then).
    """
    cfg = _config(config)
    specs = select_modules(cfg, modules)
    if type(jobs) is not int or jobs < 1:
        raise UsageError(f"jobs must be a positive integer; got {jobs!r}")
    _check_timeout(timeout)
    if timeout is None:
        timeout = budget.DEFAULT_TIMEOUT
    start = time.perf_counter()
    skipped: dict[str, float] = {}
    if not force:
        for spec in specs:
            began = time.perf_counter()
            if incremental.up_to_date(cfg, spec, module_files(cfg, spec)):
                skipped[spec.name] = time.perf_counter() - began
                if progress is not None:
                    progress(Progress(spec.name, SKIPPED, skipped[spec.name]))
    todo = [spec for spec in specs if spec.name not in skipped]
    generated: list[_Generated] = []
    if todo:
        load_pipeline()  # import errors surface here, before any worker starts
        for spec in todo:  # generated again: its record no longer holds
            incremental.forget(cfg, spec)
    if len(todo) == 1 or (todo and jobs == 1):
        generated = [_generate(spec, cfg, timeout, progress) for spec in todo]
    elif todo:
        generated = _generate_in_parallel(todo, cfg, timeout, jobs, progress)
    outputs = [(output_path(cfg, spec), g.text) for spec, g in zip(todo, generated)]
    existed = [path.exists() for path, _ in outputs]
    if progress is not None and todo:
        progress(Progress(None, "write", time.perf_counter() - start))
    extra = [  # C sources (emit = "c"): written with the modules, all or none
        (Path(cfg.output_dir, spec.name + suffix), text)
        for spec, g in zip(todo, generated)
        for suffix, text in g.extra
    ]
    transaction = WriteTransaction(outputs + extra)  # refuses foreign files first
    changed_all = transaction.commit()
    changed = changed_all[: len(outputs)]
    extra_changed = iter(changed_all[len(outputs) :])
    for index, g in enumerate(generated):
        for _ in g.extra:  # a changed C source counts as a change of its module
            if next(extra_changed):
                changed[index] = True
    done: dict[str, BuiltModule] = {}
    for spec, (path, text), g, wrote, was in zip(
        todo, outputs, generated, changed, existed
    ):
        reason = "identical bytes"
        if wrote:
            reason = "contents changed" if was else "new file"
        action = Action.WRITTEN if wrote else Action.UNCHANGED
        done[spec.name] = BuiltModule(
            spec.name, path, action, reason, g.seconds, g.stages, g.notes
        )
        files = [(path, text)]
        files += [(Path(cfg.output_dir, spec.name + sfx), t) for sfx, t in g.extra]
        incremental.save(cfg, spec, files, g.sources, g.environ)
    built = [
        done.get(spec.name)
        or BuiltModule(
            spec.name,
            output_path(cfg, spec),
            Action.SKIPPED,
            "up to date",
            skipped[spec.name],
            (),
        )
        for spec in specs
    ]
    removed = list(transaction.removed_leftovers)
    written_dirs = {path.parent for path, _ in outputs + extra}
    removed += remove_leftovers(
        [
            p.parent
            for s in specs
            for p in module_files(cfg, s)
            if p.parent not in written_dirs
        ]
    )
    if any(spec.emit == "c" for spec in specs):  # of a compiler killed earlier
        removed += compiling.remove_leftovers(Path(cfg.output_dir))
    compiled: tuple[compiling.Compiled, ...] = ()
    if compile:
        compiled = compile_extensions(cfg, [s.name for s in specs], progress=progress)
    return BuildResult(cfg.path, tuple(built), tuple(removed), compiled)


def compile_extensions(
    config: ConfigLike = None,
    modules: Sequence[str] | None = None,
    force: bool = False,
    *,
    progress: ProgressCallback | None = None,
) -> tuple[compiling.Compiled, ...]:
    """Compile the extension of each ``emit = "c"`` module (all, or those named)
    whose extension is missing or older than its C source; the others are left.
    ``force`` compiles every one (a wheel build: an extension already in the tree
    may have come from another machine, in an sdist or a copy).

    Raises :class:`~difgen.targets.c.compiling.CompileError` when a C source is missing
    (build first) or the compiler fails.
    """
    cfg = _config(config)
    specs = [s for s in select_modules(cfg, modules) if s.emit == "c"]
    names = [s.name for s in specs if force or _needs_compiling(cfg, s)]
    if progress is None or not names:
        return tuple(compiling.compile_modules(cfg.output_dir, names))
    if len(names) == 1:  # in this thread, as compile_modules does: Ctrl-C ends it
        progress(Progress(names[0], COMPILE, 0.0))
        done = compiling.compile_module(cfg.output_dir, names[0])
        progress(Progress(done.name, COMPILED, done.seconds))
        return (done,)
    # as compile_modules does (a compiler process per core), reporting each
    # extension's compiler time from this thread as it ends
    workers = min(len(names), os.cpu_count() or 1)
    results: dict[str, compiling.Compiled] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {
            pool.submit(compiling.compile_module, cfg.output_dir, name): name
            for name in names
        }
        for name in names:
            progress(Progress(name, COMPILE, 0.0))
        for future in as_completed(futures):
            done = future.result()
            results[futures[future]] = done
            progress(Progress(done.name, COMPILED, done.seconds))
    return tuple(results[name] for name in names)


def _needs_compiling(config: Config, spec: ModuleSpec) -> bool:
    """Whether the module's extension is missing, older than its C source, or not
    the one compiled from it (another ``C_HASH``, truncated; whatever the mtimes
    say). Not a regular file: True, and the compile refuses it naming the path."""
    source = c_source_path(config, spec)
    target = compiling.extension_path(config.output_dir, spec.name)
    if not source.is_file():
        raise compiling.CompileError(f"{source}: no C source; run difgen build first")
    if not target.is_file():
        return True
    if target.stat().st_mtime < source.stat().st_mtime:
        return True
    c_hash = inspect_file(output_path(config, spec)).c_hash
    return compiling.extension_problem(target, c_hash) is not None


def module_files(config: Config, spec: ModuleSpec) -> list[Path]:
    """The files a build writes for ``spec``: its module, and (emit = "c") its C
    source."""
    files = [output_path(config, spec)]
    if spec.emit == "c":
        files.append(c_source_path(config, spec))
    return files


def c_source_path(config: Config, spec: ModuleSpec) -> Path:
    """Where an ``emit = "c"`` module's C source goes: ``OUTPUT_DIR/NAME__c.c``."""
    return Path(config.output_dir, f"{spec.name}{C_SUFFIX}.c")


def check(
    config: ConfigLike = None,
    modules: Sequence[str] | None = None,
    *,
    missing_ok: bool = False,
) -> CheckResult:
    """The state of each generated module (all, or those named); writes nothing.

    The file is read first: only an intact module is worth re-tracing the function
    for (tracing runs no backend, so it is cheap). Raises
    :class:`~difgen.errors.DifgenError` on a bad config or a function that cannot
    be loaded or traced.

    ``missing_ok`` is for a project that gitignores its generated modules (a build
    backend generates them): a missing module is generated into a temporary
    folder instead, and is :attr:`Status.BUILDS` when that succeeds, or
    :attr:`Status.STALE` with the error when it does not.
    """
    cfg = _config(config)
    found = [_check_module(cfg, spec) for spec in select_modules(cfg, modules)]
    if missing_ok:
        found = [
            _build_elsewhere(cfg, m) if m.status is Status.MISSING else m for m in found
        ]
    return CheckResult(cfg.path, tuple(found))


def _build_elsewhere(cfg: Config, module: ModuleCheck) -> ModuleCheck:
    """A missing module generated into a temporary folder: does it build?"""
    with tempfile.TemporaryDirectory(prefix="difgen-check-") as folder:
        try:
            build(dataclasses.replace(cfg, output_dir=Path(folder)), [module.name])
        except DifgenError as exc:
            return dataclasses.replace(
                module,
                status=Status.STALE,
                reason=f"missing, and it does not build: {exc}",
            )
    return dataclasses.replace(module, status=Status.BUILDS, reason="")


def verify(
    config: ConfigLike = None,
    modules: Sequence[str] | None = None,
    *,
    points: int = 3,
    seed: int = 0,
    tolerance_factor: float = 1.0,
    timeout: float | None = None,
) -> VerifyResult:
    """Check each generated module numerically against the traced function.

    Imports each module from its file (in this process) and calls every operator
    at ``points`` random points, drawn in the module's ``verify_domain`` (or
    given by its ``verify_points`` function); values are compared with the traced
    graph run by the reference interpreter, derivatives with central differences
    of it. See :mod:`difgen.verification` for the points, seeds, errors and
    tolerances (``tolerance_factor`` multiplies every tolerance). A module that is
    missing, not difgen's, fails to import, or takes longer than its time limit
    (its ``timeout`` key, else ``timeout``, else
    :data:`difgen.verification.TIMEOUT`) is reported as failed, not raised.
    """

    cfg = _config(config)
    specs = select_modules(cfg, modules)
    if type(points) is not int or points < 1:
        raise UsageError(f"points must be a positive integer; got {points!r}")
    if type(seed) is not int or seed < 0:
        raise UsageError(f"seed must be a non-negative integer; got {seed!r}")
    if not tolerance_factor > 0:
        raise UsageError(f"tolerance_factor must be positive; got {tolerance_factor!r}")
    _check_timeout(timeout)
    pipeline = load_pipeline()
    results = []
    for spec in specs:
        path = output_path(cfg, spec)
        graph = _trace(spec, pipeline)
        sampler = _sampler(spec)
        limit = spec.timeout or timeout or verification.TIMEOUT
        try:
            with time_limit(limit, spec.name):
                found = verification.verify_module(
                    spec,
                    path,
                    graph,
                    points=points,
                    seed=seed,
                    factor=tolerance_factor,
                    sampler=sampler,
                )
        except budget.BuildTimeout:
            found = ModuleVerification(
                spec.name, path, problem=_verify_timeout(spec, limit)
            )
        except verification.SamplerError as exc:
            found = ModuleVerification(spec.name, path, problem=str(exc))
        results.append(found)
    return VerifyResult(cfg.path, tuple(results), points, seed)


def _sampler(spec: ModuleSpec) -> verification.Sampler | None:
    """The module's ``verify_points`` function, loaded as ``function`` is."""
    ref = spec.verify.points
    if ref is None:
        return None

    def fail(message: str) -> ConfigError:
        return ConfigError(
            spec.config_path,
            spec.line_of("verify_points"),
            f"cannot load verify_points '{ref}': {message}",
        )

    value = load_object(spec, ref, fail)[0]
    if not callable(value):
        raise fail(f"it is not a function (it has type {type(value).__name__})")
    sampler: verification.Sampler = value
    return sampler


def _verify_timeout(spec: ModuleSpec, limit: float) -> str:
    """Why a module's verification stopped: an operator that never returned."""
    text = (
        f"stopped after {limit:g} s (verify's time limit per module; raise it with "
        "--timeout or the module's timeout key): an operator did not return, "
        "most likely a loop that never meets its exit test"
    )
    if spec.input.dtype == "float32":
        text += (
            " (a float32 module: a convergence tolerance below float32's "
            "resolution, about 1.2e-7 relative, is never met; loosen it)"
        )
    return text


def _check_timeout(timeout: object) -> None:
    """A build's ``timeout``: None, or a positive number of seconds (inf: none)."""
    if timeout is None:
        return
    number = isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
    if not number or not timeout > 0:  # type: ignore[operator]
        raise UsageError(
            f"timeout must be a positive number of seconds or None; got {timeout!r}"
        )


def _trace(spec: ModuleSpec, pipeline: ModuleType | None = None) -> Any:
    """Load and trace the module's function, under the module's time limit (its
    ``timeout`` key, else :data:`difgen.budget.DEFAULT_TIMEOUT`): the user's code
    runs, and ``while True`` in it must not hang check or verify."""
    pipeline = pipeline or load_pipeline()
    limit = spec.timeout if spec.timeout is not None else budget.DEFAULT_TIMEOUT
    with time_limit(limit, spec.name):
        return pipeline.trace_spec(spec, load_function(spec))


def output_path(config: Config, spec: ModuleSpec) -> Path:
    """Where a module's file goes: ``OUTPUT_DIR/NAME.py``."""
    return Path(config.output_dir, f"{spec.name}.py")


def _config(config: ConfigLike) -> Config:
    """A loaded Config from whatever the caller passed."""
    if isinstance(config, Config):
        return config
    if config is None:
        return load_config(find_config())
    return load_config(Path(os.fspath(config)))


def select_modules(config: Config, names: Sequence[str] | None) -> list[ModuleSpec]:
    """The modules named, in config order (all if none); ConfigError for a name
    the config does not have."""
    if names is None or len(names) == 0:
        return list(config.modules)
    if isinstance(names, str):
        raise UsageError(f"modules must be a list of names, not the string {names!r}")
    available = [spec.name for spec in config.modules]
    for name in names:
        if name not in available:
            raise ConfigError(
                config.path,
                None,
                f"no module named '{name}'; available: {', '.join(available)}",
            )
    return [spec for spec in config.modules if spec.name in names]


def load_pipeline() -> ModuleType:
    """:mod:`difgen.pipeline`, imported on first use: it pulls in SymPy and the
    tracer, which ``import difgen``, the config and the CLI's parser never need.
    The one import of a difgen module inside a function (docs/design.md, §2)."""
    return importlib.import_module("difgen.pipeline")


@dataclass(frozen=True)
class _Generated:
    """A module's text, and how long generating it took."""

    text: str
    seconds: float
    stages: tuple[tuple[str, float], ...]
    notes: tuple[str, ...] = ()
    extra: tuple[tuple[str, str], ...] = ()
    """Other files of the module, ``(suffix, text)``: its C source (emit = "c")."""
    sources: tuple[Path, ...] = ()
    """The project's files it was made from (:mod:`difgen.incremental`)."""
    environ: dict[str, str | None] | None = None
    """The environment variables its function looked up, and their values."""


def _generate(
    spec: ModuleSpec,
    config: Config,
    timeout: float | None,
    progress: ProgressCallback | None,
) -> _Generated:
    """Load, trace, differentiate and render one module, timing each stage."""
    limit = spec.timeout if spec.timeout is not None else timeout
    pipeline = (
        load_pipeline()
    )  # imported before the clock starts: not the module's time
    with incremental.watching() as watched:
        with reporting(spec.name, progress) as tracker, time_limit(limit, spec.name):
            with stage("load"):
                fn = load_function(spec)
            files: list[tuple[str, str]] = pipeline.generate_files(spec, config, fn)
        sources = incremental.project_files(fn, spec)
        sources += incremental.data_files(watched.files, spec, config)
    return _Generated(
        files[0][1],
        tracker.elapsed,
        tracker.stage_times(),
        tuple(tracker.notes),
        tuple(files[1:]),
        tuple(sources),
        dict(watched.environ),
    )


_WORKER_QUEUE: Any = None
"""In a worker process of ``build(jobs=N)``: where its progress reports go."""


def _start_worker(queue: Any) -> None:
    """Initializer of each worker process: remember the progress queue, and import
    the pipeline now, so that no module's time limit pays for it."""
    global _WORKER_QUEUE  # noqa: PLW0603  (per-process state of a pool worker)
    _WORKER_QUEUE = queue
    load_pipeline()


def _generate_in_worker(
    spec: ModuleSpec, config: Config, timeout: float | None
) -> _Generated:
    """One module, in a worker process; progress goes to the parent's queue."""
    callback = None if _WORKER_QUEUE is None else _WORKER_QUEUE.put
    return _generate(spec, config, timeout, callback)


def _generate_in_parallel(
    specs: list[ModuleSpec],
    config: Config,
    timeout: float | None,
    jobs: int,
    progress: ProgressCallback | None,
) -> list[_Generated]:
    """Generate in ``jobs`` worker processes; the texts come back in config order.

    Workers are started with ``spawn`` (a fresh interpreter, the same on every
    platform, safe with threads). Progress reports come back through a queue and
    are passed to ``progress`` in this thread. The first failure stops the other
    workers and is raised here: nothing has been written yet.
    """
    context = multiprocessing.get_context("spawn")
    queue = context.SimpleQueue() if progress is not None else None
    pool = ProcessPoolExecutor(
        max_workers=min(jobs, len(specs)),
        mp_context=context,
        initializer=_start_worker,
        initargs=(queue,),
    )
    results: list[_Generated | None] = [None] * len(specs)
    try:
        futures: dict[Future[_Generated], int] = {
            pool.submit(_generate_in_worker, spec, config, timeout): index
            for index, spec in enumerate(specs)
        }
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
            _relay(queue, progress)
            for future in done:
                try:
                    results[futures[future]] = future.result()
                except BrokenProcessPool:
                    raise _worker_died(specs, futures, results) from None
        _relay(queue, progress)
    except BaseException:
        _stop_workers(pool)
        raise
    pool.shutdown(wait=True)
    return [r for r in results if r is not None]


def _worker_died(
    specs: list[ModuleSpec],
    futures: dict[Future[_Generated], int],
    results: list[_Generated | None],
) -> DifgenError:
    """The error of a worker process that ended abruptly (killed by a signal,
    crashed in C code, out of memory): it names the modules not generated."""
    unfinished = [specs[i].name for i in sorted(futures.values()) if results[i] is None]
    names = ", ".join(repr(name) for name in unfinished)
    return DifgenError(
        f"a worker process ended abruptly (killed, or crashed in native code) while "
        f"generating {names}; nothing was written. Run without --jobs to see which "
        "module and why"
    )


def _relay(queue: Any, progress: ProgressCallback | None) -> None:
    """Pass the progress reports the workers have sent so far to ``progress``."""
    if queue is None or progress is None:
        return
    while not queue.empty():
        progress(queue.get())


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers still generating.

    ``ProcessPoolExecutor`` has no public way to end running tasks before Python
    3.14 (``terminate_workers``); its ``_processes`` is the fallback.
    """
    terminate = getattr(pool, "terminate_workers", None)
    if terminate is not None:
        terminate()
    else:
        for process in list(getattr(pool, "_processes", {}).values()):
            process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


def _check_module(config: Config, spec: ModuleSpec) -> ModuleCheck:
    """What :func:`check` says about one module: first what is at its path; then,
    as :func:`build` decides to skip it, whether its inputs are unchanged since it
    was built (:func:`difgen.incremental.up_to_date`); else, re-tracing the
    function, whether its ``SOURCE_HASH`` is the traced graph's."""
    path = output_path(config, spec)
    found = inspect_file(path)

    def result(status: Status, reason: str = "") -> ModuleCheck:
        return ModuleCheck(spec.name, path, status, reason)

    if found.state is State.MISSING:
        return result(Status.MISSING, "there is no file")
    if not found.state.ours:
        return result(Status.FOREIGN, found.detail)
    if found.state is State.EDITED:
        return result(Status.EDITED, found.detail)
    if found.state is State.TRUNCATED:
        return result(Status.TRUNCATED, found.detail)
    if found.state is State.LEGACY:
        return result(Status.STALE, "written by an older difgen, without BODY_HASH")

    if spec.emit == "c":
        problem = _check_c_files(spec, path, found.c_hash)
        if problem is not None:
            return ModuleCheck(spec.name, problem[0], problem[1], problem[2])
    uncompiled = spec.emit == "c" and not os.path.lexists(
        compiling.extension_path(path.parent, spec.name)
    )
    if incremental.up_to_date(config, spec, module_files(config, spec)):
        return ModuleCheck(spec.name, path, Status.UP_TO_DATE, uncompiled=uncompiled)
    try:
        graph = _trace(spec)
    except MissingDependencyError as exc:  # not the module's fault: the environment's
        return result(
            Status.NOT_CHECKED,
            f"the function's code imports '{exc.module}', which is neither in the "
            f"project nor installed where difgen runs ({exc})",
        )
    except DifgenError as exc:  # the config or the function changed beyond building
        return result(Status.STALE, f"and the function no longer builds: {exc}")
    if found.source_hash == source_hash(spec, graph):
        return ModuleCheck(spec.name, path, Status.UP_TO_DATE, uncompiled=uncompiled)
    return result(Status.STALE, "the function or its config changed")


def _check_c_files(
    spec: ModuleSpec, path: Path, c_hash: str | None
) -> tuple[Path, Status, str] | None:
    """What is wrong with an ``emit = "c"`` module's C source or extension, if
    anything: the source must be intact and be the one the module names
    (``C_HASH``), and a built extension must have been compiled from it."""
    source = path.with_name(f"{spec.name}{C_SUFFIX}.c")
    found = inspect_file(source)
    if found.state is State.MISSING:
        return source, Status.MISSING, "the C source is missing"
    if not found.state.ours:
        return source, Status.FOREIGN, found.detail
    if found.state is State.EDITED:
        return source, Status.EDITED, found.detail
    if found.state is State.TRUNCATED:
        return source, Status.TRUNCATED, found.detail
    if found.body_hash != c_hash:
        return source, Status.STALE, "the C source is not the one the module names"
    extension = compiling.extension_path(path.parent, spec.name)
    if not os.path.lexists(extension):
        return None  # not built: the module runs its Python operators
    problem = compiling.extension_problem(extension, c_hash)
    if problem is None and extension.stat().st_mtime < source.stat().st_mtime:
        problem = "the extension is older than its C source"
    if problem is not None:
        return extension, Status.STALE, f"{problem}; run: difgen build --compile"
    return None
