"""Import the user's function named by a module's ``function`` key.

The two forms of ``function`` are resolved against the config file's directory:

- ``"pkg.mod:attr"`` is imported with :func:`importlib.import_module`, with the
  project's package roots first on ``sys.path`` while importing: ``src/`` next to
  the config file when it exists (the src layout), then the config file's
  directory. ``pkg.mod`` is an ordinary module of its package, so relative imports
  (``from .helpers import g``) work;
- ``"path/file.py:attr"`` inside a package (its directory has an ``__init__.py``)
  is imported the same way, as ``pkg.file`` from the directory above the
  outermost package, so its relative imports work too;
- any other ``"path/file.py:attr"`` is executed from that file as module
  ``_difgen_user_<stem>``, registered in ``sys.modules`` so that ``inspect`` (and
  therefore error messages naming the user's lines) can find its source.

Modules imported by name are cached in ``sys.modules`` like any import; a
stand-alone file is executed afresh on every load.

Every failure is a :class:`~difgen.errors.ConfigError` at the line of ``function``.

>>> fn = load_function(spec)  # doctest: +SKIP
>>> function_source_files(fn)  # doctest: +SKIP
[PosixPath('/home/me/project/seed_fn.py')]
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import inspect
import math
import re
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from difgen import guard
from difgen.config import ModuleSpec, split_function_ref
from difgen.errors import ConfigError, MissingDependencyError

USER_MODULE_PREFIX = "_difgen_user_"


def load_function(spec: ModuleSpec) -> Callable[..., Any]:
    """Return the callable named by ``spec.function``.

    The file form is executed afresh on every call, so a long-running process sees
    the current source.
    """
    ref = spec.function

    def fail(message: str) -> ConfigError:
        return ConfigError(
            spec.config_path,
            spec.line_of("function"),
            f"cannot load function '{ref}': {message}",
        )

    value, attr = load_object(spec, ref, fail)
    if not callable(value):
        raise fail(f"'{attr}' is not a function (it has type {type(value).__name__})")
    problem = _untraceable(value)
    if problem is not None:
        raise fail(
            f"'{attr}' is {problem}; name a Python function that difgen can trace"
        )
    if spec.constraints is not None:
        return lagrangian(spec, value, _load_constraints(spec))
    return cast("Callable[..., Any]", value)


def _load_constraints(spec: ModuleSpec) -> Callable[..., Any]:
    """The constraint function of an ipopt module (``constraints.function``)."""
    assert spec.constraints is not None
    ref = spec.constraints.function

    def fail(message: str) -> ConfigError:
        return ConfigError(
            spec.config_path,
            spec.line_of("constraints"),
            f"cannot load the constraint function '{ref}': {message}",
        )

    value, attr = load_object(spec, ref, fail)
    problem = "not a function" if not callable(value) else _untraceable(value)
    if problem is not None:
        raise fail(
            f"'{attr}' is {problem}; name a Python function that difgen can trace"
        )
    return cast("Callable[..., Any]", value)


def lagrangian(
    spec: ModuleSpec,
    objective: Callable[..., Any],
    constraints: Callable[..., Any],
) -> Callable[..., Any]:
    """The function an ipopt module differentiates: IPOPT's Lagrangian
    ``obj_factor * f(x) + lagrange @ g(x)`` of ``z = (x, obj_factor, lagrange)``.

    With the multipliers among the differentiated inputs, its one sparse hessian
    holds the Lagrangian's hessian (the x-x block) and, in the rows of the
    multipliers, the objective's gradient and the constraints' jacobian (dL/dx
    dlagrange = dg/dx); its gradient holds f(x) and g(x) (dL/dlagrange = g). One
    derivation thus gives IPOPT every callback, all in one graph's patterns.

    The function's globals are of the user's side and name the user's two
    functions, so tracing binds NumPy in both of their modules (:func:`difgen.frontend.namespace.tracing_numpy`).
    """
    assert spec.constraints is not None
    shape, m = spec.constraints.variables, spec.constraints.size
    ref = spec.constraints.function
    n = math.prod(shape)

    def lagrangian(z: Any, *contexts: Any) -> Any:
        x = z[:n].reshape(shape)
        value = objective(x, *contexts)
        g = constraints(x, *contexts)
        if getattr(g, "shape", None) != (m,):
            got = getattr(g, "shape", type(g).__name__)
            raise ValueError(
                f"the constraint function {ref} returned {got}, but "
                f"constraints.size = {m} asks for shape ({m},)"
            )
        return z[n] * value + z[n + 1 :] @ g

    # The same code with globals of the user's side (difgen's own modules are
    # skipped when tracing binds NumPy), which name both functions.
    scope: dict[str, Any] = {
        "__name__": f"{USER_MODULE_PREFIX}lagrangian_{spec.name}",
        "__builtins__": builtins,
        "objective": objective,
        "constraints": constraints,
    }
    return types.FunctionType(
        lagrangian.__code__, scope, "lagrangian", None, lagrangian.__closure__
    )


def lagrangian_parts(fn: Callable[..., Any]) -> dict[str, Callable[..., Any]]:
    """The functions of x an ipopt module derives besides its :func:`lagrangian`
    ``fn`` (:func:`difgen.pipeline.ipopt_parts`), so that each IPOPT callback
    computes only what it returns: ``objective`` f(x, *contexts),
    ``constraints`` g(x, *contexts), and ``lagrangian`` ``obj_factor * f(x) +
    lagrange @ g(x)`` of (x, *contexts, obj_factor, lagrange), whose hessian in
    x alone is IPOPT's hessian (no multipliers' rows to color)."""
    scope = fn.__globals__
    objective, constraints = scope["objective"], scope["constraints"]

    def lagrangian(x: Any, *args: Any) -> Any:
        contexts, (obj_factor, lagrange) = args[:-2], args[-2:]
        return obj_factor * objective(x, *contexts) + lagrange @ constraints(
            x, *contexts
        )

    # the Lagrangian's globals are the user's side, as :func:`lagrangian`'s are
    made = types.FunctionType(
        lagrangian.__code__, scope, "lagrangian", None, lagrangian.__closure__
    )
    return {"objective": objective, "constraints": constraints, "lagrangian": made}


def load_object(
    spec: ModuleSpec, ref: str, fail: Callable[[str], ConfigError]
) -> tuple[Any, str]:
    """The object named by ``ref`` (``"pkg.mod:attr"`` or ``"file.py:attr"``,
    resolved as ``function`` is) and its attribute path; ``fail`` makes the
    ConfigError of a reference that does not resolve."""

    parts = split_function_ref(ref)
    if parts is None:
        raise fail('expected "package.module:attr" or "path/to/file.py:attr"')
    module_ref, attr = parts
    base = Path(spec.config_path).resolve().parent
    _forget_changed_imports()
    before = set(sys.modules)
    try:
        if module_ref.endswith(".py"):
            module = _load_file(base / module_ref, fail)
        else:
            module = _import(module_ref, package_roots(base), fail)
    finally:
        roots = package_roots(base)
        if module_ref.endswith(".py"):
            roots.append((base / module_ref).resolve().parent)
        _remember_imports(set(sys.modules) - before, roots)
    value: Any = module
    for name in attr.split("."):
        if not hasattr(value, name):
            raise fail(f"{module_ref} has no attribute '{attr}'")
        value = getattr(value, name)
    return value, attr


_USER_IMPORTS: dict[str, tuple[ModuleType, Path, bytes]] = {}
"""Modules of the user's project that loading a function imported (a helper
module, the function's package): name -> (module, file, its bytes then)."""


_PROJECT_NAMES: set[str] = set()
"""Top-level names of every project module a load in this process imported (kept
when :func:`_forget_changed_imports` drops the modules): a later import error
naming one is a deleted project file, not a missing dependency."""


def _remember_imports(names: set[str], roots: list[Path]) -> None:
    """Record the modules just imported whose file is in the user's project (under
    one of ``roots``, not an installed package), with their files' bytes."""
    for name in names:
        module = sys.modules.get(name)
        filename = getattr(module, "__file__", None)
        if module is None or not filename:
            continue
        path = Path(filename).resolve()
        if {"site-packages", "dist-packages"} & set(path.parts):
            continue
        if not any(path.is_relative_to(root.resolve()) for root in roots):
            continue
        with suppress(OSError):
            _USER_IMPORTS[name] = (module, path, path.read_bytes())
            _PROJECT_NAMES.add(name.split(".")[0])


def project_files() -> list[Path]:
    """The files of the user's project that loading functions in this process
    imported (their modules and helpers), sorted: what a generated module's
    derivatives depend on besides its config."""
    return sorted({path for _, path, _ in _USER_IMPORTS.values()})


def _forget_changed_imports() -> None:
    """Drop the user's modules from ``sys.modules`` if any of their files changed
    since a load imported them, so that this load imports them afresh.

    All of them, not only the changed files: a module keeps the names it took from
    another (``from helper import K``), so a changed helper means its importers are
    stale too. A second :func:`difgen.build` in one process then sees an edited
    helper, as a new process would; unchanged, nothing is imported again.
    """
    changed = False
    for _, path, data in _USER_IMPORTS.values():
        try:
            changed = changed or path.read_bytes() != data
        except OSError:
            changed = True
    if not changed:
        return
    for name, (module, _, _) in list(_USER_IMPORTS.items()):
        if sys.modules.get(name) is module:
            del sys.modules[name]
    _USER_IMPORTS.clear()
    importlib.invalidate_caches()


def _untraceable(value: Any) -> str | None:
    """Why difgen cannot trace ``value`` (a class, a builtin), or None if it can."""
    while isinstance(value, partial):
        value = value.func
    if inspect.isclass(value):
        return "a class"
    if inspect.isfunction(inspect.unwrap(value)) or inspect.ismethod(value):
        return None
    call = getattr(type(value), "__call__", None)  # noqa: B004 (its kind, not callable)
    if inspect.isfunction(call):
        return None  # an instance of a Python class with __call__
    return f"a builtin or extension callable ({type(value).__name__})"


def function_source_files(fn: Callable[..., Any]) -> list[Path]:
    """The source file of the module defining ``fn`` (empty if it has none).

    The whole module counts, not just the function: its helpers and constants
    change the generated code too.
    """
    while isinstance(fn, partial):
        fn = fn.func
    fn = inspect.unwrap(fn)
    module = inspect.getmodule(fn)
    filename = getattr(module, "__file__", None)
    if not filename:
        return []
    path = Path(filename)
    return [path] if path.is_file() else []


def package_roots(base: Path) -> list[Path]:
    """Where ``"pkg.mod"`` functions are looked for, in order.

    ``base/src`` when it is a directory (a src-layout project keeps its packages
    there), then ``base``, the config file's directory.
    """
    src = base / "src"
    return [src, base] if src.is_dir() else [base]


def package_of(path: Path) -> tuple[Path, str] | None:
    """``(root, "pkg.sub.mod")`` for a file inside a package, else None.

    The package is the chain of directories holding an ``__init__.py`` above the
    file; ``root`` is the directory that holds the outermost one.

    >>> package_of(Path("/nowhere/at/all.py")) is None
    True
    """
    if not path.stem.isidentifier():
        return None
    names = [path.stem] if path.stem != "__init__" else []
    directory = path.parent
    while (directory / "__init__.py").is_file() and directory.name.isidentifier():
        names.insert(0, directory.name)
        directory = directory.parent
    if directory == path.parent:
        return None
    return directory, ".".join(names)


def _load_file(path: Path, fail: Callable[[str], ConfigError]) -> ModuleType:
    """Import a file inside a package as part of it; execute a lone file."""
    path = path.resolve()
    if not path.is_file():
        raise fail(f"file {path} not found")
    found = package_of(path)
    if found is None:
        return _exec_file(path, fail)
    root, name = found
    module = _import(name, [root], fail)
    loaded = getattr(module, "__file__", None)
    if loaded is None or Path(loaded).resolve() != path:
        raise fail(
            f"{path} is module '{name}' of a package, but importing '{name}' loads "
            f"{loaded or 'something without a file'} (another copy of the package "
            "is imported or installed first?); name the function as "
            f'"{name}:..." or remove the other copy'
        )
    return cast(ModuleType, module)


def _module_name(path: Path) -> str:
    """A deterministic module name for a user file: ``_difgen_user_<stem>``."""
    stem = re.sub(r"\W", "_", path.stem)
    return USER_MODULE_PREFIX + stem


def _exec_file(path: Path, fail: Callable[[str], ConfigError]) -> ModuleType:
    if not path.is_file():
        raise fail(f"file {path} not found")
    if path.stem in sys.stdlib_module_names:
        raise fail(
            f"{path.name} has the name of the standard library's module "
            f"'{path.stem}': while it runs, its directory comes first on sys.path, "
            f"so an 'import {path.stem}' there (yours, NumPy's or difgen's) would "
            "load this file instead; rename the file"
        )
    name = _module_name(path)
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise fail(f"cannot import {path} as a Python module")
    module = importlib.util.module_from_spec(loader_spec)
    previous = sys.modules.get(name)
    sys.modules[name] = module
    try:
        with _on_sys_path(path.parent), guard.no_process_exit():
            loader_spec.loader.exec_module(module)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001  (user code may raise anything)
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous
        message = f"importing {path} raised {_describe(exc)}"
        raise _failure(fail, message, exc) from None
    return module


def _failure(
    fail: Callable[[str], ConfigError], message: str, exc: BaseException
) -> ConfigError:
    """``fail(message)``, as a :class:`MissingDependencyError` when ``exc`` is
    the user's code importing a package that is not installed here (and not a
    module of the project that an earlier load in this process imported: that
    one was deleted, and the module is stale)."""
    error = fail(message)
    if (
        isinstance(exc, ModuleNotFoundError)
        and exc.name
        and exc.name.split(".")[0] not in _PROJECT_NAMES  # not a deleted project file
    ):
        hint = (
            f"; install '{exc.name}' where difgen runs (a pre-commit hook: list "
            "your project's dependencies in its additional_dependencies)"
        )
        return MissingDependencyError(
            error.path, error.line, error.message + hint, exc.name
        )
    return error


def _import(
    module_ref: str, roots: list[Path], fail: Callable[[str], ConfigError]
) -> Any:
    try:
        with _on_sys_path(*roots), guard.no_process_exit():
            return importlib.import_module(module_ref)
    except ModuleNotFoundError as exc:
        if exc.name and (module_ref + ".").startswith(exc.name + "."):
            where = f"looked in {', '.join(map(str, roots))} and on sys.path"
            raise fail(f"no module named '{exc.name}' ({where})") from None
        message = f"importing {module_ref} raised {_describe(exc)}"
        raise _failure(fail, message, exc) from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001  (user code may raise anything)
        raise fail(f"importing {module_ref} raised {_describe(exc)}") from None


def _describe(exc: BaseException) -> str:
    """``"ZeroDivisionError: division by zero (at seed_fn.py:3)"``."""
    if isinstance(exc, guard.ExitCalled):
        return f"a call of {exc.name} at {exc.where}"
    return guard.describe(exc)


@contextmanager
def _on_sys_path(*directories: Path) -> Iterator[None]:
    """Put ``directories`` first on ``sys.path``, in order, for the block."""
    entries = [str(directory) for directory in directories]
    sys.path[:0] = entries
    try:
        yield
    finally:
        for entry in entries:
            with suppress(ValueError):
                sys.path.remove(entry)  # removes the first occurrence: ours
