"""difgen as a setuptools ``build_py`` command.

Put it in the project's ``pyproject.toml``; it finds ``difgen.toml`` or
``[tool.difgen]`` in the project root::

    [build-system]
    requires = ["setuptools>=64", "difgen"]
    build-backend = "setuptools.build_meta"

    [tool.setuptools.cmdclass]
    build_py = "difgen.integrations.setuptools.build_py"

(or ``cmdclass={"build_py": build_py}`` in ``setup.py``). Modules with
``emit = "c"`` need an extension each: configured in ``pyproject.toml`` as above,
difgen adds them itself (:mod:`difgen.integrations.setuptools_hook`) and the wheel
is tagged for the platform; a ``setup.py`` passes ``ext_modules=extensions()``.
A C module without its extension stops the build with a message saying which.
An editable install (``pip install -e .``, setuptools' ``editable_wheel``) gets
difgen's stale-module watcher (:mod:`difgen.integrations.editable`), as with
hatchling; a normal install does not.

Why ``finalize_options`` and not ``run``: setuptools lists a package's modules from
the files present when the command is finalized, and the sdist asks ``build_py``
for its source files without ever running it. Generating in ``run`` is too late for
both (the wheel or the sdist comes out without the module). So the modules are
regenerated (:func:`difgen.integrations.regenerate`) as soon as ``build_py`` is
finalized, once per process; a generated module in a directory below a package
that setuptools did not discover (no ``__init__.py`` yet) is added as a package.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import Extension
from setuptools.command.build_py import build_py as _build_py
from setuptools.errors import SetupError

from difgen.api import c_source_path
from difgen.config import find_config, load_config
from difgen.integrations import dotted_name, editable, regenerate
from difgen.naming import C_SUFFIX
from difgen.targets.c.compiling import CFLAGS, include_dirs


class build_py(_build_py):
    """setuptools' ``build_py`` that first brings difgen's modules up to date.

    Named in lower case like the command it replaces.
    """

    def finalize_options(self) -> None:
        super().finalize_options()
        if getattr(self, "_difgen_done", False):
            return

        root = Path(self.distribution.src_root or Path.cwd()).resolve()
        paths = regenerate(root, log=self.announce_info)
        for path in paths:
            self._include(path.resolve(), root)
        self._require_extensions(root)
        self._difgen_paths = (root, paths)
        self._difgen_done = True

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            self._watch()

    def _watch(self) -> None:
        """An editable wheel gets the stale-module watcher: its two files are
        written where ``editable_wheel`` unpacks the wheel (the ``install``
        command's ``install_lib``, which it points there), which it then zips."""
        found = getattr(self, "_difgen_paths", None)
        unpacked = self.distribution.get_command_obj("install").install_lib
        if found is None or unpacked is None:
            self.announce(
                "difgen: no editable wheel to add the stale-module watcher to", level=3
            )
            return
        root, paths = found
        cfg = load_config(find_config(root))
        project = self.distribution.get_name()
        for name, text in editable.watcher_files(cfg, paths, project).items():
            Path(unpacked, name).write_text(text, encoding="utf-8")

    def _require_extensions(self, root: Path) -> None:
        """Stop the build, saying what to add, when an ``emit = "c"`` module has
        no extension in this distribution: its wheel would be tagged pure Python
        and run the Python operators, which nothing would tell the user."""
        declared = {e.name for e in self.distribution.ext_modules or []}
        missing = [e.name for e in extensions(root) if e.name not in declared]
        if missing:
            raise SetupError(
                f"difgen: no extension is declared for {', '.join(missing)} "
                '(emit = "c"): configure build_py in pyproject.toml\'s '
                "[tool.setuptools.cmdclass] with difgen in [build-system] requires "
                "(difgen then adds the extensions), or pass "
                "ext_modules=difgen.integrations.setuptools.extensions() to setup() "
                "in setup.py"
            )

    def announce_info(self, message: str) -> None:
        """setuptools' logging at INFO (what ``pip -v`` shows)."""
        self.announce(message, level=2)

    def _include(self, path: Path, root: Path) -> None:
        """Make sure the package holding ``path`` is one setuptools builds."""
        packages = self.packages or []
        for package in list(packages):
            directory = Path(self.get_package_dir(package))
            if not directory.is_absolute():
                directory = root / directory
            directory = directory.resolve()
            if path.parent == directory:
                return
            try:
                relative = path.parent.relative_to(directory)
            except ValueError:
                continue
            if all(part.isidentifier() for part in relative.parts):
                name = ".".join((package, *relative.parts))
                packages.append(name)
                if name not in (self.distribution.packages or []):
                    self.distribution.packages = [
                        *(self.distribution.packages or []),
                        name,
                    ]
                return
        self.announce(
            f"difgen: {path} is in no package of this distribution; it is not "
            "packaged (put output_dir inside a package)",
            level=3,
        )


def extensions(
    root: str | Path | None = None, config: str | Path | None = None
) -> list[Extension]:
    """The extensions of the project's ``emit = "c"`` modules, for ``setup.py``::

        from setuptools import setup
        from difgen.integrations.setuptools import build_py, extensions

        setup(cmdclass={"build_py": build_py}, ext_modules=extensions())

    Each is named after the package directory holding its module (found from
    ``root``, default the current directory, through ``__init__.py`` files) and
    compiled by setuptools' ``build_ext`` with difgen's flags; ``build_py``
    regenerates the C source before ``build_ext`` runs, so the wheel carries an
    extension built from the current source.
    """
    base = Path(root if root is not None else Path.cwd()).resolve()
    path = base / config if config is not None else find_config(base)
    cfg = load_config(path)
    found = []
    for spec in cfg.modules:
        if spec.emit != "c":
            continue
        source = c_source_path(cfg, spec).resolve()
        found.append(
            Extension(
                dotted_name(source.parent / (spec.name + C_SUFFIX)),
                sources=[source.relative_to(base).as_posix()],
                include_dirs=include_dirs()[1:],  # NumPy's (Python's are implied)
                extra_compile_args=list(CFLAGS),
                extra_link_args=list(CFLAGS),  # $CFLAGS reaches the link too
                libraries=["m"],
            )
        )
    return found
