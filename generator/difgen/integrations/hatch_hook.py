"""difgen as a hatchling build hook.

Enable it in the project's ``pyproject.toml``; it finds ``difgen.toml`` or
``[tool.difgen]`` in the project root, or the file named by ``config``::

    [build-system]
    requires = ["hatchling", "difgen"]
    build-backend = "hatchling.build"

    [tool.hatch.build.hooks.difgen]
    # config = "difgen.toml"

Before each target is built, stale modules are regenerated
(:func:`difgen.integrations.regenerate`) and every generated module is added to the
build's ``artifacts``, so it is included even when ``.gitignore`` lists it (commit
the generated modules or not, as you prefer). A module belongs in the wheel when
its ``output_dir`` lies inside one of the package directories the wheel includes.
Modules with ``emit = "c"`` are compiled here for every wheel (always afresh:
an extension already in the tree may come from another machine), and the wheel then
carries the extension and is tagged for this platform (``pure_python = false``);
the sdist carries the C source only.

Hatchling finds this module through difgen's entry point
``[project.entry-points.hatch] difgen = "difgen.integrations.hatch_hook"``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pathspec
from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from hatchling.plugin import hookimpl

from difgen.config import find_config, load_config
from difgen.integrations import editable, regenerate
from difgen.targets.c.compiling import EXTENSION_SUFFIX


class DifgenBuildHook(BuildHookInterface):
    """Regenerates stale difgen modules and ships all of them."""

    PLUGIN_NAME = "difgen"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Called by hatchling before it collects the target's files."""

        config = self.config.get("config")
        if config is not None and not isinstance(config, str):
            raise TypeError(
                "[tool.hatch.build.hooks.difgen] config must be a path (a string)"
            )
        root = Path(self.root).resolve()
        # An sdist carries the C sources, never a compiled extension (it is for
        # one platform and Python); a wheel compiles every extension afresh, so a
        # wheel built from an sdist, or from a tree with an old .so, is right.
        wheel = self.target_name != "sdist"
        paths = regenerate(
            root,
            config,
            log=self.app.display_info,
            compile=wheel,
            force_compile=wheel,
        )
        if any(p.name.endswith(EXTENSION_SUFFIX) for p in paths):
            # a compiled extension (emit = "c"): a wheel for this platform only
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
        if not wheel:
            self._exclude(_extensions_beside(paths), root)
        if version == "editable":
            self._watch(paths, root, build_data)
        artifacts = build_data.setdefault("artifacts", [])
        for path in paths:
            try:
                relative = path.resolve().relative_to(root)
            except ValueError:
                self.app.display_warning(
                    f"difgen: {path} is outside the project; it is not packaged"
                )
                continue
            artifacts.append("/" + relative.as_posix())

    def _watch(self, paths: list[Path], root: Path, build_data: dict[str, Any]) -> None:
        """An editable wheel gets the stale-module watcher
        (:mod:`difgen.integrations.editable`): its ``.pth`` and its module."""
        config = self.config.get("config")
        cfg = load_config(root / config if config else find_config(root))
        files = editable.watcher_files(cfg, paths, self.metadata.core.name)
        folder = Path(tempfile.mkdtemp(prefix="difgen-watch-"))
        self._watch_folder = folder
        forced = build_data.get("force_include_editable") or dict(
            self.build_config.get_force_include()
        )
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
            forced[str(folder / name)] = name
        build_data["force_include_editable"] = forced

    def finalize(
        self, version: str, build_data: dict[str, Any], artifact_path: str
    ) -> None:
        """Called by hatchling after the target is built: drop the watcher's
        temporary folder."""
        folder = getattr(self, "_watch_folder", None)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def _exclude(self, strays: list[Path], root: Path) -> None:
        """Keep compiled extensions in the tree out of the sdist: hatchling has
        no hook field for that, so they join its exclude patterns (its
        ``exclude_spec``, computed once per build and cached on its config)."""
        if not strays:
            return
        lines = ["/" + p.resolve().relative_to(root).as_posix() for p in strays]
        config: Any = self.build_config
        current = config.exclude_spec
        if current is not None:
            lines = [*(str(p.pattern) for p in current.patterns), *lines]
        config.__dict__["exclude_spec"] = pathspec.GitIgnoreSpec.from_lines(lines)
        for stray in strays:
            self.app.display_info(f"difgen: {stray} left out of the sdist")


def _extensions_beside(paths: list[Path]) -> list[Path]:
    """Compiled extensions next to the generated C sources among ``paths``."""
    found = []
    for source in paths:
        if source.suffix == ".c":
            found += sorted(source.parent.glob(source.stem + "*" + EXTENSION_SUFFIX))
    return found


@hookimpl
def hatch_register_build_hook() -> type[DifgenBuildHook]:
    """Hatchling's plugin hook: the build hook class named ``difgen``."""
    return DifgenBuildHook
