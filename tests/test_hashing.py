"""SOURCE_HASH and BODY_HASH: deterministic, location-free, sensitive to what shapes
the output (the traced IR), blind to what cannot change it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import difgen
from difgen.config import ModuleSpec, load_config
from difgen.core.ir import Eqn, FrozenArray, Graph, Params
from difgen.hashing import (
    BODY_HASH_PLACEHOLDER,
    _feed_value,
    body_hash,
    graph_digest,
    source_hash,
    spec_fingerprint,
    stamp_body_hash,
)
from difgen.load import load_function
from difgen.pipeline import trace_spec

REPO = Path(__file__).resolve().parent.parent

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


def digest(spec: ModuleSpec) -> str:
    """SOURCE_HASH of the project as it is on disk now."""
    return source_hash(spec, trace_spec(spec, load_function(spec)))


def test_same_project_in_two_places_hashes_the_same(tmp_path: Path) -> None:
    a = make_project(tmp_path / "a")
    b = make_project(tmp_path / "elsewhere" / "b", config="\n\n" + CONFIG)
    assert a.line != b.line and a.config_path != b.config_path
    assert digest(a) == digest(b)


def test_hash_is_short_hex(tmp_path: Path) -> None:
    value = digest(make_project(tmp_path))
    assert len(value) == 16 and int(value, 16) >= 0


def test_crlf_checkout_hashes_the_same(tmp_path: Path) -> None:
    a = make_project(tmp_path / "a")
    b = make_project(tmp_path / "b", source=SOURCE.replace("\n", "\r\n"))
    assert digest(a) == digest(b)


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
    graph = trace_spec(spec, load_function(spec))
    changed = dataclasses.replace(spec, **change)
    assert source_hash(changed, graph) != source_hash(spec, graph)


def test_helper_change_changes_the_hash(tmp_path: Path) -> None:
    spec = make_project(tmp_path)
    before = digest(spec)
    (tmp_path / "fn.py").write_text(SOURCE.replace("2 * x", "3 * x"))
    assert digest(spec) != before


def test_edit_that_cannot_change_the_output_keeps_the_hash(tmp_path: Path) -> None:
    spec = make_project(tmp_path)
    before = digest(spec)
    source = "# a comment\n" + SOURCE + "\n\ndef unused(x):\n    return x\n"
    (tmp_path / "fn.py").write_text(source)
    assert digest(spec) == before


def test_big_constant_changes_the_hash(tmp_path: Path) -> None:
    """``format_graph`` elides constants of more than 6 values; the hash must not."""
    source = "import numpy as np\nW = np.arange(10.0)\n\ndef f(x):\n    return W * x\n"
    spec = make_project(tmp_path, CONFIG.replace("[3]", "[10]"), source)
    before = digest(spec)
    (tmp_path / "fn.py").write_text(source.replace("arange(10.0)", "arange(10.0) + 0"))
    assert digest(spec) == before  # the same values
    (tmp_path / "fn.py").write_text(source.replace("W = ", "W = 1e-12 + "))
    assert digest(spec) != before


def test_every_part_of_the_graph_counts(tmp_path: Path) -> None:
    spec = make_project(tmp_path, source="def f(x):\n    return x.sum() * x\n")
    graph = trace_spec(spec, load_function(spec))
    reduce = next(e for e in graph.eqns if "axes" in e.params.as_dict())
    variants = [
        dataclasses.replace(reduce, params=Params.of({"axes": ()})),
        dataclasses.replace(reduce, primitive=graph.eqns[-1].primitive),
    ]
    digests = {graph_digest(graph)}
    for eqn in variants:
        eqns = tuple(eqn if e is reduce else e for e in graph.eqns)
        digests.add(graph_digest(Graph(graph.inputs, graph.outputs, eqns)))
    digests.add(graph_digest(Graph(graph.inputs, graph.inputs, graph.eqns)))
    assert len(digests) == 4


def test_param_values_of_every_kind_are_told_apart() -> None:
    values = [None, ..., (), (None,), 0, 1, False, True, 0.0, -0.0, 1.5, "0", b"0"]
    values += [("slice", 1, None, None), slice(1, None), np.int64(7), 7.0]
    values += [FrozenArray(np.array([1, 2])), FrozenArray(np.array([1.0, 2.0]))]
    values += [FrozenArray(np.array([[1, 2]])), np.dtype("float64")]

    def feed(value: object) -> str:
        digest = hashlib.sha256()
        _feed_value(digest, value)
        return digest.hexdigest()

    digests = [feed(v) for v in values]
    # slice(1, None) is frozen as ("slice", 1, None, None); np.int64(7) is 7.
    assert digests[13] == digests[14] and feed(7) == digests[15]
    del digests[14]
    assert len(set(digests)) == len(digests)


def test_unknown_param_kind_is_refused(tmp_path: Path) -> None:
    spec = make_project(tmp_path)
    graph = trace_spec(spec, load_function(spec))
    eqn = graph.eqns[0]
    odd = Eqn(eqn.primitive, eqn.inputs, Params([("how", object())]), eqn.out)
    with pytest.raises(TypeError, match="cannot hash a param of type object"):
        graph_digest(Graph(graph.inputs, graph.outputs, (odd, *graph.eqns[1:])))


def test_version_changes_the_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_project(tmp_path)
    graph = trace_spec(spec, load_function(spec))
    before = source_hash(spec, graph)
    monkeypatch.setattr(difgen.hashing, "VERSION", "99.0")
    assert source_hash(spec, graph) != before


def test_fingerprint_leaves_out_locations(tmp_path: Path) -> None:
    spec = make_project(tmp_path)
    text = spec_fingerprint(spec)
    assert str(tmp_path) not in text and "key_lines" not in text
    assert '"operators":["jacobian"]' in text


_PRINT_HASHES = """
import json
from difgen.config import load_config
from difgen.hashing import source_hash
from difgen.load import load_function
from difgen.pipeline import trace_spec
config = load_config("examples/difgen.toml")
print(json.dumps({s.name: source_hash(s, trace_spec(s, load_function(s)))
                  for s in config.modules}))
"""


def test_same_hash_in_every_process_and_hash_seed() -> None:
    """Python's ``hash()`` is salted per process; the hashes must not depend on it."""
    config = load_config(REPO / "examples" / "difgen.toml")
    here = {s.name: digest(s) for s in config.modules}
    for seed in ("0", "4242"):
        result = subprocess.run(
            [sys.executable, "-c", _PRINT_HASHES],
            cwd=REPO,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(result.stdout) == here


# ---- BODY_HASH ------------------------------------------------------------------

MODULE = f'"""Doc."""\n\nSOURCE_HASH = "00"\nBODY_HASH = "{BODY_HASH_PLACEHOLDER}"\n'


def test_body_hash_round_trip() -> None:
    text = stamp_body_hash(MODULE + "x = 1\n")
    (value,) = [line[13:29] for line in text.splitlines() if line[:9] == "BODY_HASH"]
    assert value != BODY_HASH_PLACEHOLDER and body_hash(text) == value
    assert len(text) == len(MODULE + "x = 1\n")  # black's layout is unchanged
    assert stamp_body_hash(text) == text  # independent of the value written
    assert body_hash(text.replace("\n", "\r\n")) == value
    assert body_hash(text.replace("x = 1", "x = 2")) != value
    assert body_hash(text[:-1]) != value


def test_stamp_needs_exactly_one_line() -> None:
    with pytest.raises(ValueError, match="found 0"):
        stamp_body_hash("x = 1\n")
    with pytest.raises(ValueError, match="found 2"):
        stamp_body_hash(MODULE + MODULE)


def test_generated_text_is_deterministic(tmp_path: Path) -> None:
    """Two builds of one module give the same bytes, hashes included."""
    from difgen.pipeline import generate_module

    make_project(tmp_path)
    config = load_config(tmp_path / "difgen.toml")
    (spec,) = config.modules
    first = generate_module(spec, config, load_function(spec))
    assert generate_module(spec, config, load_function(spec)) == first
    assert f'BODY_HASH = "{body_hash(first)}"' in first
    assert first.count("BODY_HASH") == 1
