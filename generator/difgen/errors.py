"""Errors that difgen reports to the user: each names the file and line at fault."""

from __future__ import annotations

from pathlib import Path


class DifgenError(Exception):
    """Base class: the CLI prints these without a traceback and exits 1."""


class ConfigError(DifgenError):
    """A problem in difgen.toml, located by file and line.

    >>> print(ConfigError("difgen.toml", 3, "unknown key 'foo'"))
    difgen.toml:3: unknown key 'foo'
    """

    def __init__(self, path: str | Path, line: int | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> tuple[type[ConfigError], tuple[str, int | None, str]]:
        """Pickle by the constructor's arguments (``difgen build --jobs`` sends
        errors from worker processes).

        >>> import pickle
        >>> print(pickle.loads(pickle.dumps(ConfigError("a.toml", 2, "bad"))))
        a.toml:2: bad
        """
        return (type(self), (self.path, self.line, self.message))


class MissingDependencyError(ConfigError):
    """The function's module imports a package that is not installed where
    difgen runs (a pre-commit hook's environment without the project's
    dependencies, say): nothing is known about the module's state.

    >>> e = MissingDependencyError("a.toml", 2, "no scipy", "scipy")
    >>> import pickle; pickle.loads(pickle.dumps(e)).module
    'scipy'
    """

    def __init__(
        self, path: str | Path, line: int | None, message: str, module: str
    ) -> None:
        super().__init__(path, line, message)
        self.module = module

    def __reduce__(  # type: ignore[override]
        self,
    ) -> tuple[type[MissingDependencyError], tuple[str, int | None, str, str]]:
        """Pickle by the constructor's arguments, the missing module included."""
        return (type(self), (self.path, self.line, self.message, self.module))


class LoadError(DifgenError):
    """The user's function could not be imported."""


class TraceError(DifgenError):
    """The user's code did something the tracer cannot follow (named by file:line)."""


class WriteError(DifgenError):
    """difgen refused to write a file (for example one it did not write itself)."""


class InternalError(DifgenError):
    """difgen caught itself about to write wrong code: a bug to report, not the user's.

    Raised instead of writing a module that would silently differ from the user's
    function (for example one that uses one name for two things).
    """


class UsageError(DifgenError):
    """A call of difgen's Python API with an argument it cannot use (``jobs=0``)."""
