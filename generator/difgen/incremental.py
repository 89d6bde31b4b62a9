"""Incremental builds: whether a module's inputs are unchanged since it was built.

A build records, for each module it generated, what the module was made from
(:func:`save`); the next build skips a module whose record still holds
(:func:`up_to_date`) without loading or tracing its function, and ``difgen
check`` asks the same function first, so the two never disagree: a module the
build skips, check calls up to date. (Without a record, check still re-traces and
compares ``SOURCE_HASH``, which survives a fresh clone; the build then generates
the module again, finds the same bytes, and records it.)

The record of a module is its *key* and the digests of the files it came from:

- the key: SHA-256 over the difgen version, the digest of difgen's own code and
  templates (:func:`generator_digest`: an upgrade, a template or printer edited in
  a checkout), the versions of the libraries that shape the text (NumPy, SymPy,
  black) and Python's, the module's config entry (every field that changes the
  output, :func:`difgen.hashing.spec_fingerprint`) and where its files go;
- the source files of the user's project the function comes from
  (:func:`project_files`: its module, and every module of the project it reaches
  through its globals and its ``import`` statements), and the data files of the
  project opened while it was loaded and traced (:func:`watching`), by SHA-256
  of their bytes, so a touched but unchanged file changes nothing; and the
  environment variables it looked up meanwhile, by value;
- the generated files themselves (the module, and with ``emit = "c"`` its C
  source), so a module deleted or edited by hand is generated again.

Installed packages are not followed (a change there comes with a version the
key does not see, except the ones above): ``difgen build --force`` regenerates
every module regardless.

Records live in difgen's user cache (:func:`records_directory`:
``$DIFGEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/difgen``, else ``~/.cache/difgen``;
then ``builds/`` and a digest of the config file's absolute path), one JSON file
per module: never inside the project, where git, an sdist or a wheel would pick
them up (a hatchling sdist takes every file its root ``.gitignore`` does not
exclude). A record that cannot be read is no record; one that cannot be written
only costs the next build its skip.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib.metadata
import inspect
import json
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

from difgen.config import Config, ModuleSpec
from difgen.hashing import spec_fingerprint
from difgen.load import package_roots
from difgen.version import VERSION

CACHE_ENV = "DIFGEN_CACHE_DIR"
"""Where difgen's user cache is, when set (as for :func:`difgen.generate`)."""

FORMAT = 1
"""The records' layout; a record of another layout is ignored."""

LIBRARIES = ("numpy", "sympy", "black")
"""Libraries whose version can change a generated module's text."""

_INSTALLED = frozenset({"site-packages", "dist-packages"})


def records_directory(config: Config) -> Path:
    """The folder of a config's records in difgen's user cache."""
    root = os.environ.get(CACHE_ENV)
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(
            os.path.expanduser("~"), ".cache"
        )
        root = os.path.join(xdg, "difgen")
    where = str(Path(config.path).resolve())
    return Path(root, "builds", hashlib.sha256(where.encode()).hexdigest()[:16])


def record_path(config: Config, spec: ModuleSpec) -> Path:
    """Where the record of ``spec`` goes: ``<records_directory>/<module>.json``."""
    return records_directory(config) / f"{spec.name}.json"


def inputs_key(config: Config, spec: ModuleSpec, outputs: Sequence[Path]) -> str:
    """The key of a module's record (see the module docstring)."""
    digest = hashlib.sha256()
    parts = {
        "format": FORMAT,
        "difgen": VERSION,
        "generator": generator_digest(),
        "libraries": _library_versions(),
        "python": list(sys.version_info[:2]),
        "spec": spec_fingerprint(spec),
        "config": str(Path(config.path).resolve()),
        "outputs": [str(Path(p).resolve()) for p in outputs],
    }
    digest.update(json.dumps(parts, sort_keys=True).encode())
    return digest.hexdigest()


def up_to_date(config: Config, spec: ModuleSpec, outputs: Sequence[Path]) -> bool:
    """Whether ``spec``'s record holds: the same key, every file it came from and
    every file it wrote as they were. Reads files, never the user's code."""
    record = _read(record_path(config, spec))
    if record is None or record.get("key") != inputs_key(config, spec, outputs):
        return False
    files = record.get("files")
    written = record.get("outputs")
    if not isinstance(files, dict) or not isinstance(written, dict):
        return False
    if sorted(written) != sorted(str(Path(p).resolve()) for p in outputs):
        return False
    environ = record.get("environ", {})
    if not isinstance(environ, dict):
        return False
    if any(os.environ.get(key) != value for key, value in environ.items()):
        return False
    return all(file_digest(Path(p)) == d for p, d in {**files, **written}.items())


def recorded_files(config: Config, spec: ModuleSpec) -> list[Path]:
    """The files ``spec``'s record says its module came from (none without a
    record): what a build that skipped the module, never loading its function,
    knows of its inputs."""
    record = _read(record_path(config, spec))
    files = record.get("files") if record is not None else None
    return sorted(Path(p) for p in files) if isinstance(files, dict) else []


def save(
    config: Config,
    spec: ModuleSpec,
    outputs: Sequence[tuple[Path, str]],
    sources: Iterable[Path],
    environ: dict[str, str | None] | None = None,
) -> None:
    """Record that ``spec`` was generated from ``sources`` into ``outputs`` (each
    path with the text now in it). Best effort: a folder that cannot be written
    costs the next build its skip, nothing else."""
    paths = [path for path, _ in outputs]
    record = {
        "format": FORMAT,
        "key": inputs_key(config, spec, paths),
        "files": {
            str(p): d
            for p in sorted({Path(s).resolve() for s in sources})
            if (d := file_digest(p)) is not None
        },
        "outputs": {
            str(Path(p).resolve()): hashlib.sha256(text.encode("utf-8")).hexdigest()
            for p, text in outputs
        },
        "environ": dict(sorted((environ or {}).items())),
    }
    target = record_path(config, spec)
    with contextlib.suppress(OSError):
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        temp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", "utf-8")
        os.replace(temp, target)


def forget(config: Config, spec: ModuleSpec) -> None:
    """Drop ``spec``'s record (its module is being generated again)."""
    with contextlib.suppress(OSError):
        record_path(config, spec).unlink()


def file_digest(path: Path) -> str | None:
    """SHA-256 of a regular file's bytes; None if it is not there or unreadable."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


@functools.lru_cache(maxsize=1)
def generator_digest() -> str:
    """SHA-256 over difgen's own source files and templates (once per process):
    a checkout whose printers or templates changed regenerates every module."""
    digest = hashlib.sha256()
    for name, data in generator_files():
        digest.update(len(name).to_bytes(8, "big") + name.encode())
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def generator_files() -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of every file :func:`generator_digest` covers, sorted."""
    found: dict[str, bytes] = {}
    package = Path(__file__).resolve().parent
    for path in package.rglob("*.py"):
        found["difgen/" + path.relative_to(package).as_posix()] = path.read_bytes()
    templates = resources.files("difgen.templates")
    for item in _walk(templates, "templates"):
        found[item[0]] = item[1]
    return sorted(found.items())


def _walk(folder: Any, prefix: str) -> Iterator[tuple[str, bytes]]:
    for entry in folder.iterdir():
        name = f"{prefix}/{entry.name}"
        if entry.is_dir():
            if entry.name != "__pycache__":
                yield from _walk(entry, name)
        elif not entry.name.endswith(".pyc"):
            yield name, entry.read_bytes()


@functools.lru_cache(maxsize=1)
def _library_versions() -> dict[str, str]:
    versions = {}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = ""
    return versions


def project_roots(spec: ModuleSpec) -> list[Path]:
    """The folders of the user's project: where ``function`` is looked for, and
    the folder of a ``file.py`` function."""
    base = Path(spec.config_path).resolve().parent
    roots = [r.resolve() for r in package_roots(base)]
    module_ref = spec.function.rpartition(":")[0]
    if module_ref.endswith(".py"):
        roots.append((base / module_ref).resolve().parent)
    return roots


def in_project(path: Path, roots: Sequence[Path]) -> bool:
    """Whether ``path`` is a file of the user's project, not an installed one."""
    if _INSTALLED & set(path.parts):
        return False
    return any(path.is_relative_to(root) for root in roots)


def project_files(fn: Callable[..., Any], spec: ModuleSpec) -> list[Path]:
    """The source files of the project's modules that ``fn`` comes from: its own
    module, and every module of the project reachable from it through module
    globals (a module, or a function or class defined in one) and ``import``
    statements (anywhere in a file, so imports inside functions count too)."""
    roots = project_roots(spec)
    start = _module_of(fn)
    seen: dict[str, Path] = {}
    todo = [start] if start is not None else []
    while todo:
        module = todo.pop()
        path = _file_of(module)
        if path is None or module.__name__ in seen or not in_project(path, roots):
            continue
        seen[module.__name__] = path
        todo += _referenced(module, path)
    return sorted(set(seen.values()))


def _module_of(fn: Any) -> ModuleType | None:
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = getattr(fn, "__func__", fn)
    try:
        unwrapped = inspect.unwrap(fn)
    except ValueError:
        unwrapped = fn
    name = getattr(unwrapped, "__module__", None)
    if name is None:
        name = getattr(type(unwrapped), "__module__", None)
    return sys.modules.get(name) if name else None


def _file_of(module: ModuleType) -> Path | None:
    filename = getattr(module, "__file__", None)
    if not filename:
        return None
    path = Path(filename).resolve()
    return path if path.suffix == ".py" and path.is_file() else None


def _referenced(module: ModuleType, path: Path) -> list[ModuleType]:
    """The modules ``module`` names: in its globals, and in its imports."""
    found: list[ModuleType] = []
    for value in list(vars(module).values()):
        if isinstance(value, ModuleType):
            found.append(value)
            continue
        owner = getattr(value, "__module__", None)
        if isinstance(owner, str) and owner in sys.modules:
            found.append(sys.modules[owner])
    package = getattr(module, "__package__", None) or ""
    names = _imported_names(path, package)
    found += [sys.modules[name] for name in names if name in sys.modules]
    return found


def _imported_names(path: Path, package: str) -> list[str]:
    """The module names a file's ``import`` statements name (relative ones
    resolved in ``package``; ``from m import n`` gives ``m`` and ``m.n``)."""
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if package else ""
                base = f"{parent}.{base}" if base else parent
            if base:
                names.append(base)
                names += [f"{base}.{alias.name}" for alias in node.names]
    return names


_WATCHED: list[set[Path]] = []
"""The sets :func:`watching` collects opened files into (innermost last)."""

_READ_ENVIRON: list[tuple[int, dict[str, str | None]]] = []
"""The dicts :func:`watching` collects environment variables read into, each
with the thread it watches (a progress thread's terminal size is no input)."""

_HOOKED = False


@dataclass
class Watched:
    """What the user's code read while :func:`watching`: the files it opened,
    and the environment variables it looked up (their values then, None if
    unset)."""

    files: set[Path]
    environ: dict[str, str | None]


@contextlib.contextmanager
def watching() -> Iterator[Watched]:
    """Collect the regular files opened for reading in the block (Python's audit
    events: ``open``, NumPy's loaders and ``pathlib`` included) and the
    environment variables looked up (``os.environ[...]``, ``os.getenv``, ``in``):
    what a function reads while it is loaded and traced."""
    global _HOOKED  # noqa: PLW0603 (one audit hook per process, never removable)
    if not _HOOKED:
        sys.addaudithook(_audit)
        _HOOKED = True
    watched = Watched(set(), {})
    _WATCHED.append(watched.files)
    entry = (threading.get_ident(), watched.environ)
    _READ_ENVIRON.append(entry)
    environ_class = type(os.environ)
    original = environ_class.__getitem__

    def getitem(self: Any, key: Any) -> Any:
        try:
            value = original(self, key)
        except KeyError:
            _seen(self, key, None)
            raise
        _seen(self, key, value)
        return value

    if len(_READ_ENVIRON) == 1:
        environ_class.__getitem__ = getitem  # type: ignore[method-assign]
    try:
        yield watched
    finally:
        if len(_READ_ENVIRON) == 1:
            environ_class.__getitem__ = original  # type: ignore[method-assign]
        _WATCHED.remove(watched.files)
        _READ_ENVIRON.remove(entry)


def _seen(mapping: Any, key: Any, value: Any) -> None:
    """Record a lookup of ``os.environ`` (not of another mapping of its class)."""
    if mapping is os.environ and isinstance(key, str):
        thread = threading.get_ident()
        for owner, found in _READ_ENVIRON:
            if owner == thread:
                found.setdefault(key, value)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _WATCHED or event != "open" or len(args) < 3:
        return
    path, mode, flags = args[:3]
    if isinstance(path, int):
        return  # an already open descriptor
    if isinstance(mode, str):
        reading = not any(c in mode for c in "wax+")
    else:
        reading = isinstance(flags, int) and flags & os.O_ACCMODE == os.O_RDONLY
    if reading:
        with contextlib.suppress(TypeError, ValueError):
            _WATCHED[-1].add(Path(os.fsdecode(path)))


def data_files(opened: Iterable[Path], spec: ModuleSpec, config: Config) -> list[Path]:
    """The files of ``opened`` that are the project's data: regular files in the
    project, not Python sources (:func:`project_files` follows those), not the
    config file, not the generated files."""
    roots = project_roots(spec)
    skipped = [Path(config.output_dir).resolve()]
    found = set()
    for path in opened:
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError):
            continue
        if resolved.suffix in (".py", ".pyc") or resolved == config.path.resolve():
            continue
        if any(resolved.is_relative_to(s) for s in skipped):
            continue
        if in_project(resolved, roots) and resolved.is_file():
            found.add(resolved)
    return sorted(found)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return None
    return record
