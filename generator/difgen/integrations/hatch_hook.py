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
Modules with ``emit = "c"`` are compiled here, and the wheel then carries the
extension and is tagged for this platform (``pure_python = false``).

Hatchling finds this module through difgen's entry point
``[project.entry-points.hatch] difgen = "difgen.integrations.hatch_hook"``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from hatchling.plugin import hookimpl

from difgen.integrations import regenerate
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
        paths = regenerate(root, config, log=self.app.display_info, compile=True)
        if any(p.name.endswith(EXTENSION_SUFFIX) for p in paths):
            # a compiled extension (emit = "c"): a wheel for this platform only
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
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


@hookimpl
def hatch_register_build_hook() -> type[DifgenBuildHook]:
    """Hatchling's plugin hook: the build hook class named ``difgen``."""
    return DifgenBuildHook
