"""The two digests a generated module carries: ``SOURCE_HASH`` and ``BODY_HASH``.

``SOURCE_HASH`` says what the module was built from: the module's config entry
(every field that changes the output), the difgen version and the *traced IR* of
the user's function. The IR is everything the derivative depends on, wherever it
came from: the function's file, a helper module it imports, a constants file it
reads at import time, a closure. So ``difgen check`` re-traces the function (cheap:
no backend runs) and compares, and an edit that cannot change the derivative (a
comment, an unused helper) does not make the module stale.

``BODY_HASH`` covers the module's own text, so a hand edit or a truncated file is
told apart from a stale one.

Both are SHA-256 based (never Python's ``hash()``, which is salted per process),
so they are the same on every machine, in every process, under every
``PYTHONHASHSEED``.

>>> source_hash(spec, graph)  # doctest: +SKIP
'3f1c9a0b7d2e4c18'
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from typing import Any, Protocol

import numpy as np

from difgen.config import ArraySpec, ModuleSpec
from difgen.core.ir import FrozenArray, Graph, Lit, SubGraph, Var
from difgen.version import VERSION

HASH_LENGTH = 16
_LOCATION_FIELDS = frozenset({"config_path", "line", "key_lines", "timeout", "verify"})
"""Fields that do not change the generated text: where the entry is, how long
its build may take, and where ``difgen verify`` samples it."""

_OPT_IN_DEFAULTS: dict[str, object] = {
    "points": False,
    "per_point": False,
    "implicit": "off",
    "inputs": (),
    "has_aux": False,
    "flat": False,
    "accumulate": None,
    "triangle": None,
    "adapters": (),
    "constraints": None,
    "time": None,
    "shared": (),
    "checkpoint": None,
    "snapshots": None,
}
"""Keys added after modules were first hashed, left out of the fingerprint at their
default: a module that does not use the feature keeps its SOURCE_HASH (its text
does not change either), and turning the feature on changes the hash."""

_INPUT_OPT_IN_DEFAULTS: dict[str, object] = {"per_point": True}
"""The same for the fields of the input (:class:`~difgen.config.ArraySpec`), whose
``per_point`` is true unless the config says otherwise."""

BODY_HASH_PLACEHOLDER = "0" * HASH_LENGTH
"""What the template writes before :func:`stamp_body_hash` fills in the digest:
as long as the digest, so black lays the module out the same either way."""

BODY_HASH_RE = re.compile(r'^BODY_HASH = "([0-9a-f]*)"$', re.MULTILINE)
"""The ``BODY_HASH`` line exactly as the template and black write it."""


class _Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...


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
        and not _at_opt_in_default(field.name, getattr(spec, field.name))
    }
    return json.dumps(_plain(fields), sort_keys=True, separators=(",", ":"))


def source_hash(spec: ModuleSpec, graph: Graph) -> str:
    """The first 16 hex digits of a SHA-256 over version, spec and traced IR."""
    digest = hashlib.sha256()
    _put(digest, b"V", ("difgen " + VERSION).encode())
    _put(digest, b"S", spec_fingerprint(spec).encode())
    feed_graph(digest, graph)
    return digest.hexdigest()[:HASH_LENGTH]


def graph_digest(graph: Graph) -> str:
    """The full SHA-256 hex digest of :func:`feed_graph` alone (for tests, tools)."""
    digest = hashlib.sha256()
    feed_graph(digest, graph)
    return digest.hexdigest()


def feed_graph(digest: _Digest, graph: Graph) -> None:
    """Feed a canonical serialization of ``graph`` to ``digest``.

    Unlike :func:`difgen.core.ir.format_graph`, nothing is elided: every equation in
    order, each by primitive name, input atoms (variables by position of
    definition, literals by dtype, shape and bytes), params and output type; then
    the outputs. Every item is tagged and length-prefixed, so two different graphs
    never produce the same byte stream.
    """
    index: dict[Var, int] = {}

    def define(var: Var) -> None:
        index[var] = len(index)
        _put(digest, b"T", _type_bytes(var.shape, var.dtype))

    def atom(value: Var | Lit) -> None:
        if isinstance(value, Lit):
            _put_array(digest, b"L", value.value)
        elif value in index:
            _put(digest, b"v", str(index[value]).encode())
        else:
            raise ValueError("graph uses a variable before defining it")

    _put(digest, b"G", b"%d %d" % (len(graph.inputs), len(graph.eqns)))
    for var in graph.inputs:
        define(var)
    for eqn in graph.eqns:
        _put(digest, b"E", eqn.primitive.name.encode())
        _put(digest, b"n", str(len(eqn.inputs)).encode())
        for item in eqn.inputs:
            atom(item)
        _put(digest, b"p", str(len(eqn.params)).encode())
        for name, value in eqn.params:
            _put(digest, b"k", str(name).encode())
            _feed_value(digest, value)
        define(eqn.out)
    _put(digest, b"O", str(len(graph.outputs)).encode())
    for item in graph.outputs:
        atom(item)


def stamp_body_hash(text: str) -> str:
    """``text`` with its one ``BODY_HASH = "..."`` line set to the body's digest."""
    matches = list(BODY_HASH_RE.finditer(text))
    if len(matches) != 1:
        raise ValueError(f"expected one BODY_HASH line, found {len(matches)}")
    digest = body_hash(text)
    start, end = matches[0].span(1)
    return text[:start] + digest + text[end:]


def body_hash(text: str) -> str:
    """SHA-256 (16 hex digits) of ``text`` with the ``BODY_HASH`` value blanked.

    Blanking makes the digest independent of the value it is written into, so a
    reader recomputes it from the file alone. CRLF line endings count as LF: a
    checkout that converts line endings is not a hand edit.
    """
    blanked = BODY_HASH_RE.sub('BODY_HASH = ""', text.replace("\r\n", "\n"))
    return hashlib.sha256(blanked.encode("utf-8")).hexdigest()[:HASH_LENGTH]


def _put(digest: _Digest, tag: bytes, payload: bytes) -> None:
    """One tagged, length-prefixed item."""
    digest.update(tag + len(payload).to_bytes(8, "big"))
    digest.update(payload)


def _type_bytes(shape: tuple[int, ...], dtype: str) -> bytes:
    return (str(dtype) + "[" + ",".join(str(int(n)) for n in shape) + "]").encode()


def _put_array(digest: _Digest, tag: bytes, value: np.ndarray) -> None:
    """An array by dtype, shape and little-endian bytes (same on every machine)."""
    array = np.asarray(value)
    array = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    _put(digest, tag, _type_bytes(array.shape, array.dtype.str))
    _put(digest, b"b", array.tobytes())


def _feed_value(digest: _Digest, value: Any) -> None:
    """A param value: the frozen kinds :func:`difgen.core.ir.Params.of` produces.

    Anything else raises TypeError: hashing its ``repr`` could embed a memory
    address and make the hash differ between runs.
    """
    if value is None:
        _put(digest, b"N", b"")
    elif value is Ellipsis:
        _put(digest, b".", b"")
    elif isinstance(value, (bool, np.bool_)):
        _put(digest, b"B", b"1" if value else b"0")
    elif isinstance(value, (int, np.integer)):
        _put(digest, b"I", str(int(value)).encode())
    elif isinstance(value, (float, np.floating)):
        _put(digest, b"F", float(value).hex().encode())
    elif isinstance(value, complex):
        _put(digest, b"C", f"{value.real.hex()},{value.imag.hex()}".encode())
    elif isinstance(value, str):
        _put(digest, b"S", value.encode("utf-8"))
    elif isinstance(value, bytes):
        _put(digest, b"Y", value)
    elif isinstance(value, (tuple, list)):
        _put(digest, b"(", str(len(value)).encode())
        for item in value:
            _feed_value(digest, item)
    elif isinstance(value, slice):
        _feed_value(digest, ("slice", value.start, value.stop, value.step))
    elif isinstance(value, SubGraph):
        feed_graph(digest, value.graph)
    elif isinstance(value, FrozenArray):
        _put_array(digest, b"A", value.value)
    elif isinstance(value, np.ndarray):
        _put_array(digest, b"A", value)
    elif isinstance(value, np.dtype):
        _put(digest, b"D", value.str.encode())
    else:
        raise TypeError(
            f"cannot hash a param of type {type(value).__name__}; "
            "teach difgen.hashing._feed_value about it"
        )


def _at_opt_in_default(
    name: str, value: Any, defaults: dict[str, object] = _OPT_IN_DEFAULTS
) -> bool:
    """Whether a field is an opt-in key at its default (see _OPT_IN_DEFAULTS)."""
    return name in defaults and value == defaults[name]


def _plain(value: Any) -> Any:
    """Dataclasses and tuples as JSON-ready dicts and lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        defaults = (
            _INPUT_OPT_IN_DEFAULTS if isinstance(value, ArraySpec) else _OPT_IN_DEFAULTS
        )
        return {
            f.name: _plain(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not _at_opt_in_default(f.name, getattr(value, f.name), defaults)
        }
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, type):  # a NamedTuple or dataclass of an input's tree
        return f"{value.__module__}.{value.__qualname__}"
    return value
