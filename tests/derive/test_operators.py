"""The operator table is the single source: complete rows, and config follows it."""

from __future__ import annotations

import ast
import dataclasses
import re
import typing
from pathlib import Path

import pytest

import difgen.operators
import documentation
from difgen.config import ArraySpec, ModuleSpec, check_output_fit, load_config
from difgen.errors import ConfigError
from difgen.operators import (
    OPERATORS,
    REQUESTABLE,
    SPARSE_KINDS,
    TABLE,
    Operator,
    result_shape,
    seed_shape,
)

ROOT = Path(__file__).resolve().parents[2]
NAMES = [op.name for op in TABLE]


def _config(
    tmp_path: Path, operators: list[str], shape: str = "[]", extra: str = ""
) -> Path:
    """A one-module config file asking for ``operators``."""
    path = tmp_path / "difgen.toml"
    names = ", ".join(f'"{name}"' for name in operators)
    path.write_text(
        f'[[module]]\nname = "m"\nfunction = "fn.py:f"\noperators = [{names}]\n'
        f"input = {{ shape = {shape} }}\n{extra}"
    )
    return path


def _load_error(path: Path) -> str | None:
    """The config error of ``path``, or None when it loads."""
    try:
        load_config(path)
    except ConfigError as exc:
        return str(exc)
    return None


def test_no_field_has_a_default() -> None:
    """A row that omits a fact must fail at import, not take a silent default."""
    for field in dataclasses.fields(Operator):
        assert field.default is dataclasses.MISSING, field.name
        assert field.default_factory is dataclasses.MISSING, field.name


@pytest.mark.parametrize("op", TABLE, ids=NAMES)
def test_every_row_sets_every_field(op: Operator) -> None:
    hints = typing.get_type_hints(Operator)
    for field in dataclasses.fields(Operator):
        value, kind = getattr(op, field.name), hints[field.name]
        if kind is bool:
            assert type(value) is bool, (field.name, value)
        elif kind is str:
            assert type(value) is str and value, (field.name, value)
        else:
            assert typing.get_origin(kind) is tuple, (field.name, kind)
            assert type(value) is tuple, (field.name, value)
            assert all(type(item) is str for item in value), (field.name, value)
    assert op.name.isidentifier() and op.results
    assert not op.doc.endswith("."), "the docstring adds the period"
    for kind in op.results:
        result_shape(kind, (2,), (3,), 1)  # a KeyError names an unknown kind
    for seed in op.seeds:
        seed_shape(seed, (2,), (3,), 1)


def test_names_are_unique_and_the_index_matches_the_table() -> None:
    assert len(set(NAMES)) == len(NAMES)
    assert list(OPERATORS.values()) == list(TABLE)
    assert tuple(op.name for op in TABLE if not op.always_emitted) == REQUESTABLE
    assert [op.name for op in TABLE if op.always_emitted] == ["f"]


def test_operators_module_imports_nothing_from_difgen() -> None:
    """config imports the table, so the table may not import config (or anything
    that does)."""
    tree = ast.parse(Path(difgen.operators.__file__).read_text())
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    ]
    assert not [name for name in imported if (name or "").startswith("difgen")]


def test_sparse_kinds_are_the_last_result_of_the_sparse_rows() -> None:
    """``is_sparse`` looks at result kinds, config at the ``sparse`` flag: they must
    agree, and only the last result may be sparse (``out=`` and the signature
    assume it)."""
    for op in TABLE:
        sparse = [kind for kind in op.results if kind in SPARSE_KINDS]
        assert sparse == ([op.results[-1]] if op.sparse else []), op.name


def test_config_accepts_exactly_the_table(tmp_path: Path) -> None:
    for name in NAMES:
        assert _load_error(_config(tmp_path, [name])) is None, name
    message = _load_error(_config(tmp_path, ["derivative", "no_such_operator"]))
    assert message is not None
    listed = message.split("expected one of: ")[1].split(", ")
    assert listed == list(REQUESTABLE)
    (spec,) = load_config(_config(tmp_path, ["f", *reversed(NAMES)])).modules
    assert spec.operators == REQUESTABLE


@pytest.mark.parametrize("name", REQUESTABLE)
def test_config_enforces_each_flag(tmp_path: Path, name: str) -> None:
    op = OPERATORS[name]
    vector_input = _load_error(_config(tmp_path, [name], shape="[3]"))
    assert (vector_input is not None) == op.scalar_input, vector_input
    if op.scalar_input:
        assert f"operator '{name}' needs a scalar input" in vector_input

    spec = ModuleSpec("m", "fn.py:f", "trace", "auto", (name,), ArraySpec((3,)))
    if op.scalar_output:
        with pytest.raises(ConfigError, match="needs a scalar output"):
            check_output_fit(spec, (2,))
    else:
        check_output_fit(spec, (2,))

    sparse = _load_error(_config(tmp_path, [name], extra="sparse = true\n"))
    assert (sparse is None) == op.sparse, sparse
    if not op.sparse:
        expected = ", ".join(sorted(o.name for o in TABLE if o.sparse))
        assert f"expected one of {expected} in operators" in sparse


def test_readme_documents_out_exactly_where_the_table_offers_it() -> None:
    """The guide's operator table is written by hand; it must not drift from the
    ``takes_out`` column, and it must cover every operator."""
    section = documentation.page("guide/operators.md")
    rows = re.findall(r"^\| `([a-z_<>]+)` \| (.*?) \|", section, re.MULTILINE)
    signatures = dict(rows)
    for op in TABLE:
        base = op.name.removeprefix("value_and_")
        if op.name in signatures:
            documented = signatures[op.name]
        else:
            assert op.name != base and "value_and_<op>" in signatures, op.name
            documented = signatures[base]
        assert ("out=None" in documented) == op.takes_out, op.name
