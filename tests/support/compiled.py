"""A session's build of compiled (``emit = "c"``) modules and their Python fallbacks,
shared by the C target's tests and every test that compiles modules."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from types import ModuleType

import difgen
from conftest import import_file


class Built:
    """The session's build: each module compiled, and its Python fallback."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.config = directory / "difgen.toml"
        self.result = difgen.build(self.config, compile=True)
        self._compiled: dict[str, ModuleType] = {}
        self._python: dict[str, ModuleType] = {}

    def compiled(self, name: str) -> ModuleType:
        if name not in self._compiled:
            module = import_file(self.directory / "out" / f"{name}.py")
            assert module.COMPILED, module.C_FALLBACK_REASON
            self._compiled[name] = module
        return self._compiled[name]

    def python(self, name: str) -> ModuleType:
        """The module alone in a directory: it runs its Python operators."""
        if name not in self._python:
            lone = self.directory / "python" / name
            lone.mkdir(parents=True)
            shutil.copy(self.directory / "out" / f"{name}.py", lone)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                module = import_file(lone / f"{name}.py")
            assert not module.COMPILED
            assert [w.category for w in caught] == [RuntimeWarning]
            self._python[name] = module
        return self._python[name]


class BuiltConfig:
    """One config of many modules, written into ``directory`` and built (and
    compiled) in one build; each module is imported on first use, and one whose
    name ends in ``_c`` must have loaded its extension."""

    def __init__(self, directory: Path, config: str) -> None:
        (directory / "difgen.toml").write_text(config)
        difgen.build(directory / "difgen.toml", compile=True)
        self.directory = directory
        self._modules: dict[str, ModuleType] = {}

    def get(self, name: str) -> ModuleType:
        if name not in self._modules:
            module = import_file(self.directory / "out" / f"{name}.py")
            if name.endswith("_c"):
                assert module.COMPILED, module.C_FALLBACK_REASON
            self._modules[name] = module
        return self._modules[name]
