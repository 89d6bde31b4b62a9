"""Import the user's function named by a module's ``function`` key.

Two forms are accepted, both resolved against the config file's directory:

- ``"pkg.mod:attr"`` is imported with :func:`importlib.import_module`, with that
  directory first on ``sys.path`` while importing;
- ``"path/file.py:attr"`` is executed from that file as module
  ``_difgen_user_<stem>``, registered in ``sys.modules`` so that ``inspect`` (and
  therefore error messages naming the user's lines) can find its source.

Every failure is a :class:`~difgen.errors.ConfigError` at the line of ``function``.

>>> fn = load_function(spec)  # doctest: +SKIP
>>> function_source_files(fn)  # doctest: +SKIP
[PosixPath('/home/me/project/seed_fn.py')]
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from difgen import guard
from difgen.config import ModuleSpec, split_function_ref
from difgen.errors import ConfigError

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

    parts = split_function_ref(ref)
    if parts is None:
        raise fail('expected "package.module:attr" or "path/to/file.py:attr"')
    module_ref, attr = parts
    base = Path(spec.config_path).resolve().parent
    if module_ref.endswith(".py"):
        module = _exec_file(base / module_ref, fail)
    else:
        module = _import(module_ref, base, fail)
    value: Any = module
    for name in attr.split("."):
        if not hasattr(value, name):
            raise fail(f"{module_ref} has no attribute '{attr}'")
        value = getattr(value, name)
    if not callable(value):
        raise fail(f"'{attr}' is not a function (it has type {type(value).__name__})")
    problem = _untraceable(value)
    if problem is not None:
        raise fail(f"'{attr}' is {problem}; name a Python function that difgen can trace")
    return cast("Callable[..., Any]", value)


def _untraceable(value: Any) -> str | None:
    """Why difgen cannot trace ``value`` (a class, a builtin), or None if it can."""
    while isinstance(value, partial):
        value = value.func
    if inspect.isclass(value):
        return "a class"
    if inspect.isfunction(inspect.unwrap(value)) or inspect.ismethod(value):
        return None
    call = getattr(type(value), "__call__", None)
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


def _module_name(path: Path) -> str:
    """A deterministic module name for a user file: ``_difgen_user_<stem>``."""
    stem = re.sub(r"\W", "_", path.stem)
    return USER_MODULE_PREFIX + stem


def _exec_file(path: Path, fail: Callable[[str], ConfigError]) -> ModuleType:
    if not path.is_file():
        raise fail(f"file {path} not found")
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
    except BaseException as exc:  # user code may raise anything
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous
        raise fail(f"importing {path} raised {_describe(exc)}") from None
    return module


def _import(module_ref: str, base: Path, fail: Callable[[str], ConfigError]) -> Any:
    try:
        with _on_sys_path(base), guard.no_process_exit():
            return importlib.import_module(module_ref)
    except ModuleNotFoundError as exc:
        if exc.name and (module_ref + ".").startswith(exc.name + "."):
            where = f"looked in {base} and on sys.path"
            raise fail(f"no module named '{exc.name}' ({where})") from None
        raise fail(f"importing {module_ref} raised {_describe(exc)}") from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # user code may raise anything
        raise fail(f"importing {module_ref} raised {_describe(exc)}") from None


def _describe(exc: BaseException) -> str:
    """``"ZeroDivisionError: division by zero (at seed_fn.py:3)"``."""
    if isinstance(exc, guard.ExitCalled):
        return f"a call of {exc.name} at {exc.where}"
    return guard.describe(exc)


@contextmanager
def _on_sys_path(directory: Path) -> Iterator[None]:
    """Put ``directory`` first on ``sys.path`` for the duration of the block."""
    entry = str(directory)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        try:
            sys.path.remove(entry)  # removes the first occurrence: ours
        except ValueError:
            pass
