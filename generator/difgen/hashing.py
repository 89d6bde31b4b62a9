"""``SOURCE_HASH``: what a generated module was built from, as one short digest.

The digest covers the module's config entry (every field that changes the output),
the text of the file defining the user's function (the whole file: helpers and
constants matter too) and the difgen version. ``difgen check`` recomputes it to find
stale modules, so it must be the same on every machine: no absolute paths, and line
endings are normalised so a checkout with CRLF endings hashes the same.

>>> source_hash(spec, fn)  # doctest: +SKIP
'3f1c9a0b7d2e4c18'
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from typing import Any

import difgen
from difgen.config import ModuleSpec
from difgen.load import function_source_files

HASH_LENGTH = 16
_LOCATION_FIELDS = frozenset({"config_path", "line", "key_lines"})


def spec_fingerprint(spec: ModuleSpec) -> str:
    """Canonical JSON of the fields of ``spec`` that affect the generated module.

    >>> from difgen.config import ArraySpec
    >>> spec = ModuleSpec("m", "f:f", "sympy", "auto", (), ArraySpec(()))
    >>> spec_fingerprint(spec)  # doctest: +ELLIPSIS
    '{"backend":"sympy","batch":1,...,"sparse":false}'
    """
    fields = {
        field.name: getattr(spec, field.name)
        for field in dataclasses.fields(spec)
        if field.name not in _LOCATION_FIELDS
    }
    return json.dumps(_plain(fields), sort_keys=True, separators=(",", ":"))


def source_hash(spec: ModuleSpec, fn: Callable[..., Any]) -> str:
    """The first 16 hex digits of a SHA-256 over spec, source and difgen version."""
    digest = hashlib.sha256()
    parts = [b"difgen " + difgen.__version__.encode(), spec_fingerprint(spec).encode()]
    for path in function_source_files(fn):
        parts.append(path.read_bytes().replace(b"\r\n", b"\n"))
    for part in parts:  # length-prefixed, so no two inputs share a byte stream
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()[:HASH_LENGTH]


def _plain(value: Any) -> Any:
    """Dataclasses and tuples as JSON-ready dicts and lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
        }
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value
