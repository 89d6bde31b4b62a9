"""SOURCE_HASH: deterministic, location-free, sensitive to what shapes the output."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import difgen
import pytest
from difgen.config import ModuleSpec, load_config
from difgen.hashing import source_hash, spec_fingerprint
from difgen.load import load_function

CONFIG = """\
[[module]]
name = "seed"
function = "fn.py:f"
operators = ["jacobian"]
input = { shape = [3] }
"""

SOURCE = "def helper(x):\n    return 2 * x\n\n\ndef f(x):\n    return helper(x)\n"


def make_project(root: Path, config: str = CONFIG, source: str = SOURCE) -> ModuleSpec:
    root.mkdir(parents=True, exist_ok=True)
    (root / "difgen.toml").write_text(config)
    (root / "fn.py").write_bytes(source.encode())
    return load_config(root / "difgen.toml").modules[0]


def test_same_project_in_two_places_hashes_the_same(tmp_path: Path) -> None:
    a = make_project(tmp_path / "a")
    b = make_project(tmp_path / "elsewhere" / "b", config="\n\n" + CONFIG)
    assert a.line != b.line and a.config_path != b.config_path
    assert source_hash(a, load_function(a)) == source_hash(b, load_function(b))


def test_hash_is_short_hex(tmp_path: Path) -> None:
    spec = make_project(tmp_path)
    digest = source_hash(spec, load_function(spec))
    assert len(digest) == 16 and int(digest, 16) >= 0


def test_crlf_checkout_hashes_the_same(tmp_path: Path) -> None:
    a = make_project(tmp_path / "a")
    b = make_project(tmp_path / "b", source=SOURCE.replace("\n", "\r\n"))
    assert source_hash(a, load_function(a)) == source_hash(b, load_function(b))


@pytest.mark.parametrize(
    "change",
    [
        {"batch": 2},
        {"mode": "forward"},
        {"emit": "vector"},
        {"backend": "trace"},
        {"operators": ("jacobian", "hessian")},
    ],
)
def test_spec_changes_change_the_hash(tmp_path: Path, change: dict) -> None:
    spec = make_project(tmp_path)
    fn = load_function(spec)
    assert source_hash(dataclasses.replace(spec, **change), fn) != source_hash(spec, fn)


def test_helper_change_changes_the_hash(tmp_path: Path) -> None:
    spec = make_project(tmp_path)
    before = source_hash(spec, load_function(spec))
    (tmp_path / "fn.py").write_text(SOURCE.replace("2 * x", "3 * x"))
    assert source_hash(spec, load_function(spec)) != before


def test_version_changes_the_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_project(tmp_path)
    fn = load_function(spec)
    before = source_hash(spec, fn)
    monkeypatch.setattr(difgen, "__version__", "99.0")
    assert source_hash(spec, fn) != before


def test_fingerprint_leaves_out_locations(tmp_path: Path) -> None:
    spec = make_project(tmp_path)
    text = spec_fingerprint(spec)
    assert str(tmp_path) not in text and "key_lines" not in text
    assert '"operators":["jacobian"]' in text
