"""A stale-module warning for editable installs.

An editable install (``pip install -e .``) generates the modules once, at install,
and then imports them from the source tree: after an edit of the function they
serve stale derivatives, silently. For an editable wheel the hatchling hook and
setuptools' ``build_py`` (in ``editable_mode``, which setuptools' ``editable_wheel``
sets) add two files to it (:func:`watcher_files`): ``difgen_watch_<project>.pth``, which Python runs at start-up, and
the module it imports, ``_difgen_watch_<project>.py`` (:func:`watcher_source`,
standard library only: the environment need not hold difgen). That module puts a
finder on ``sys.meta_path`` which does nothing but watch: the first time a process
imports one of the generated modules, it hashes the files the derivatives were
built from (the config and the project's modules the function imported, as
recorded at install). Unchanged, nothing more happens. Changed, it asks difgen
(``difgen.api.check``, if difgen is importable here) whether the module is stale,
and otherwise compares modification times; a stale module gets a
``RuntimeWarning`` naming the changed file and ``difgen build``.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from difgen.config import Config

PREFIX = "difgen_watch_"


def names(project: str) -> tuple[str, str]:
    """``(pth file, watcher module)`` names for a project (its distribution
    name, normalized to an identifier)."""
    ident = re.sub(r"\W", "_", project.lower())
    return f"{PREFIX}{ident}.pth", f"_{PREFIX}{ident}"


def watcher_files(cfg: Config, paths: list[Path], project: str) -> dict[str, str]:
    """The two files an editable wheel of ``project`` gets, by name (at the
    wheel's root): the ``.pth`` and the watcher module over the generated
    modules among ``paths`` (what :func:`difgen.integrations.regenerate`
    returned), their inputs the config, the project's files this process
    loaded (:func:`difgen.load.project_files`) and those the modules' build
    records name (:func:`difgen.incremental.recorded_files`: a module found up
    to date was never loaded)."""
    from difgen.incremental import recorded_files
    from difgen.integrations import dotted_name
    from difgen.load import project_files

    modules = {
        dotted_name(p.resolve()): p.resolve() for p in paths if p.suffix == ".py"
    }
    recorded = [p for spec in cfg.modules for p in recorded_files(cfg, spec)]
    inputs = sorted({cfg.path.resolve(), *project_files(), *recorded})
    pth, module = names(project)
    return {
        pth: f"import {module}\n",
        f"{module}.py": watcher_source(cfg, modules, inputs),
    }


def watcher_source(cfg: Config, modules: dict[str, Path], inputs: list[Path]) -> str:
    """The watcher module's text: ``modules`` maps each generated module's dotted
    name to its file, ``inputs`` are the files its derivatives were built from."""
    digests = {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in inputs}
    watched = {name: (str(path), path.stem) for name, path in modules.items()}
    return _TEMPLATE.format(
        config=repr(str(cfg.path)), modules=repr(watched), inputs=repr(digests)
    )


_TEMPLATE = '''\
"""Written by difgen's build hook into an editable install: warns when a
generated module is older than the code it was generated from."""

import hashlib
import importlib.util
import os
import sys
import warnings

CONFIG = {config}
MODULES = {modules}
INPUTS = {inputs}


def _digest(path):
    try:
        with open(path, "rb") as file:
            return hashlib.sha256(file.read()).hexdigest()
    except OSError:
        return None


def _stale(name, path, short):
    changed = [p for p, digest in INPUTS.items() if _digest(p) != digest]
    if not changed:
        return None
    if importlib.util.find_spec("difgen") is not None:
        from difgen.api import check

        (found,) = check(CONFIG, [short]).modules
        return None if found.ok else found.describe()
    try:
        built = os.stat(path).st_mtime
    except OSError:
        return "missing"
    newer = [p for p in changed if os.path.exists(p) and os.stat(p).st_mtime > built]
    return f"{{newer[0]}} changed after it was generated" if newer else None


class _Watch:
    """Finds nothing: notices the first import of each generated module."""

    def find_spec(self, name, path=None, target=None):
        entry = MODULES.pop(name, None)
        if entry is not None:
            problem = _stale(name, *entry)
            if problem is not None:
                warnings.warn(
                    f"{{name}} is stale ({{problem}}); an editable install does not "
                    f"regenerate it: run difgen build {{CONFIG}}",
                    RuntimeWarning,
                    stacklevel=2,
                )
        return None


if not any(isinstance(f, _Watch) for f in sys.meta_path):
    sys.meta_path.insert(0, _Watch())
'''
