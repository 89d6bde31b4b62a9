"""difgen in a package's build: a hatchling build hook and a setuptools command.

Both call :func:`regenerate` at the start of every build (sdist and wheel, editable
installs included): modules that are missing, stale, edited or cut short are
generated again, up-to-date ones are left alone (checking costs a trace, not a
build), and a file difgen did not write stops the build. The generated modules are
then ordinary files of the package, so they go into the sdist and the wheel.

- hatchling: ``[tool.hatch.build.hooks.difgen]`` in ``pyproject.toml``
  (:mod:`difgen.integrations.hatch_hook`, registered by difgen's ``hatch`` entry
  point);
- setuptools: ``[tool.setuptools.cmdclass] build_py =
  "difgen.integrations.setuptools.build_py"``
  (:mod:`difgen.integrations.setuptools`).

Either way ``difgen`` must be in ``[build-system] requires``.

Modules with ``emit = "c"`` also have a C source (``NAME__c.c``) and an extension:
the hatchling hook compiles it (:func:`regenerate` with ``compile=True``) and ships
it in a platform wheel; with setuptools, declare it with
:func:`difgen.integrations.setuptools.extensions` in ``setup.py`` and setuptools'
``build_ext`` compiles it. Either way the generated module loads the extension at
import and falls back to its Python operators where it is absent.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from difgen.api import (
    Status,
    build,
    c_source_path,
    check,
    compile_extensions,
    output_path,
)
from difgen.config import find_config, load_config
from difgen.targets.c.compiling import extension_path


def regenerate(
    root: str | Path,
    config: str | Path | None = None,
    log: Callable[[str], object] = print,
    compile: bool = False,
    force_compile: bool = False,
) -> list[Path]:
    """Bring the project's generated modules up to date; return all their paths
    (with ``emit = "c"``: the module, its C source, and with ``compile`` its
    extension, compiled when missing or older than the source, or always with
    ``force_compile``).

    ``config`` is the config file relative to ``root``; by default
    :func:`difgen.config.find_config` looks in ``root`` (``difgen.toml``, else
    ``pyproject.toml`` with ``[tool.difgen]``). Raises
    :class:`~difgen.errors.DifgenError` (and writes nothing) when a module cannot
    be built or a foreign file is in the way.
    """
    base = Path(root)
    path = base / config if config is not None else find_config(base)
    cfg = load_config(path)
    report = check(cfg)
    outdated = [m for m in report.modules if m.status is not Status.UP_TO_DATE]
    if not outdated:
        count = len(report.modules)
        plural = "s" if count != 1 else ""
        log(f"difgen: {count} generated module{plural} up to date ({path.name})")
    for module in outdated:
        log(f"difgen: {module.name}: {module.describe()}; generating it")
    if outdated:
        result = build(cfg, [m.name for m in outdated])
        for built in result.modules:
            log(f"difgen: {built.action.value} {built.path} ({built.seconds:.1f} s)")
    if compile:  # the up-to-date ones too, if their extension is missing or old
        for done in compile_extensions(cfg, force=force_compile):
            log(f"difgen: compiled {done.path} ({done.seconds:.1f} s)")
    paths = []
    for spec in cfg.modules:
        paths.append(output_path(cfg, spec))
        if spec.emit == "c":
            paths.append(c_source_path(cfg, spec))
            if compile:
                paths.append(extension_path(cfg.output_dir, spec.name))
    return paths


def dotted_name(path: Path) -> str:
    """``pkg.sub.name`` for the module file ``path`` below packages (directories
    with ``__init__.py``)."""
    parts = [path.name.split(".")[0]]
    directory = path.parent
    while (directory / "__init__.py").is_file():
        parts.insert(0, directory.name)
        directory = directory.parent
    return ".".join(parts)
