"""The config schema: one declaration per key, read by the reader and the docs.

The reader's lists of accepted keys come from ``difgen.schema``, so a key the
schema lacks is refused; these tests check the other direction (every declared key
is one the reader handles, documented) and that the generated reference pages are
current.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from difgen import config, schema
from difgen.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def reference_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "config_reference", ROOT / "scripts" / "config_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["config_reference"] = module
    spec.loader.exec_module(module)
    return module


def test_every_key_is_documented_once() -> None:
    seen = set()
    for key in schema.KEYS:
        assert (key.table, key.name) not in seen, key
        seen.add((key.table, key.name))
        assert key.doc.strip() and key.type.strip() and key.default.strip(), key
        assert key.doc.endswith("."), key  # a sentence


def test_reader_takes_its_keys_from_the_schema() -> None:
    assert schema.names("module") == config._MODULE_KEYS
    assert schema.names("difgen") == config._DIFGEN_KEYS
    assert schema.names("contexts") == config._CONTEXT_KEYS
    assert schema.names("inputs") == config._INPUT_KEYS
    assert schema.names("input") == config._ARRAY_KEYS
    with pytest.raises(KeyError):
        schema.names("nope")


def test_an_undeclared_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "difgen.toml"
    path.write_text(
        '[[module]]\nname = "m"\nfunction = "f.py:f"\noperators = ["gradient"]\n'
        "input = { shape = [2] }\nsparsity = true\n"
    )
    with pytest.raises(ConfigError, match=r"difgen.toml:6: .*'sparsity'.*sparse"):
        config.load_config(path)


def test_reference_pages_are_current() -> None:
    script = reference_script()
    assert script.main(["--check"]) == 0, "run: python scripts/config_reference.py"
