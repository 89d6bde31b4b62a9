"""difgen.interface: the user's function traced through the flat input, the
structure of what it returns found, and what a structured result refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from difgen import pipeline
from difgen.config import load_config
from difgen.errors import ConfigError, TraceError
from difgen.load import load_function
from difgen.structure import Leaf, Node

SOURCE = """
import dataclasses
from typing import NamedTuple
import numpy as np

class P(NamedTuple):
    b: object
    a: object

def pair(x):
    return np.sin(x), {"s": np.sum(x), "t": 2.0 * x}

def scalar(params, y):
    return np.sum(params["w"] * y)

def values(x):
    return x * 2.0

def counted(x):
    return np.sum(x), np.argmax(x)

def branchy(params):
    if params["w"][0] > 0:
        return np.sum(params["w"] ** 2)
    return np.sum(params["w"])

def fields(p):
    return np.sum(p.a) * p.b
"""


def _spec(tmp_path: Path, function: str, body: str, operators: str = '["jacobian"]'):
    (tmp_path / "f.py").write_text(SOURCE)
    (tmp_path / "difgen.toml").write_text(
        f'[[module]]\nname = "m"\nfunction = "f.py:{function}"\nbackend = "trace"\n'
        f"operators = {operators}\n{body}"
    )
    (spec,) = load_config(tmp_path / "difgen.toml").modules
    return spec, load_function(spec)


def test_the_result_structure_is_found(tmp_path: Path) -> None:
    spec, fn = _spec(tmp_path, "pair", "input = { shape = [3] }\n")
    graph, face = pipeline.trace_interface(spec, fn)
    assert face.output == Node(
        "tuple",
        (0, 1),
        (Leaf((3,)), Node("dict", ("s", "t"), (Leaf(()), Leaf((3,))))),
    )
    assert graph.outputs[0].shape == (7,) and face.wrapped


def test_a_plain_module_is_not_wrapped(tmp_path: Path) -> None:
    spec, fn = _spec(tmp_path, "values", "input = { shape = [3] }\n")
    graph, face = pipeline.trace_interface(spec, fn)
    assert not face.wrapped and face.output == Leaf((3,))
    assert str(graph) == str(pipeline.trace_spec(spec, fn))


def test_gradient_needs_one_scalar_output(tmp_path: Path) -> None:
    spec, fn = _spec(tmp_path, "pair", "input = { shape = [3] }\n", '["gradient"]')
    with pytest.raises(
        ConfigError,
        match=r"f.py:pair returns 2 values \(a tuple: \[0\] \(3,\), \[1\]\['s'\] "
        r"\(\), \[1\]\['t'\] \(3,\)\), but operator 'gradient' needs one scalar output",
    ):
        pipeline.trace_interface(spec, fn)


def test_has_aux_needs_a_pair(tmp_path: Path) -> None:
    spec, fn = _spec(tmp_path, "values", "input = { shape = [3] }\nhas_aux = true\n")
    with pytest.raises(
        TraceError,
        match=r"f.py:\d+: the module has has_aux = true, so the function must return a pair \(value, aux\); it returned one array",
    ):
        pipeline.trace_interface(spec, fn)


def test_an_integer_result_is_refused(tmp_path: Path) -> None:
    spec, fn = _spec(tmp_path, "counted", "input = { shape = [3] }\n")
    with pytest.raises(
        TraceError,
        match=r"f.py:\d+: the function returns the value\[1\] of dtype int64",
    ):
        pipeline.trace_interface(spec, fn)


def test_the_arity_counts_every_input(tmp_path: Path) -> None:
    spec, fn = _spec(
        tmp_path,
        "scalar",
        'inputs = [{ name = "params", tree = { w = { shape = [2] } } }]\n',
        '["gradient"]',
    )
    with pytest.raises(
        ConfigError, match=r"difgen calls it with the inputs params alone"
    ):
        pipeline.trace_interface(spec, fn)


def test_branches_on_tree_leaves_are_traced(tmp_path: Path) -> None:
    spec, fn = _spec(
        tmp_path,
        "branchy",
        'inputs = [{ name = "params", tree = { w = { shape = [2] } } }]\n',
        '["gradient"]',
    )
    graph, face = pipeline.trace_interface(spec, fn)
    assert face.output == Leaf(()) and "cond" in str(graph)


def test_namedtuple_fields_follow_the_class(tmp_path: Path) -> None:
    spec, fn = _spec(
        tmp_path,
        "fields",
        'inputs = [{ name = "p", tree = { a = { shape = [2] }, b = { shape = [] } },'
        ' type = "f.py:P" }]\n',
        '["gradient"]',
    )
    _, face = pipeline.trace_interface(spec, fn)
    (tree,) = face.trees
    assert isinstance(tree, Node) and tree.kind == "namedtuple"
    assert tree.keys == ("b", "a") and tree.cls is fn.__globals__["P"]


def test_a_type_that_is_not_a_class_of_fields(tmp_path: Path) -> None:
    spec, fn = _spec(
        tmp_path,
        "fields",
        'inputs = [{ name = "p", tree = { a = { shape = [2] } }, type = "f.py:P" }]\n',
        '["gradient"]',
    )
    with pytest.raises(ConfigError, match=r"its fields are \['b', 'a'\], but the tree"):
        pipeline.trace_interface(spec, fn)
    spec, fn = _spec(
        tmp_path,
        "fields",
        'inputs = [{ name = "p", tree = { a = { shape = [2] } }, type = "f.py:values" }]\n',
        '["gradient"]',
    )
    with pytest.raises(ConfigError, match="expected a NamedTuple or a dataclass"):
        pipeline.trace_interface(spec, fn)


def test_sparse_on_a_tuple_output_is_refused(tmp_path: Path) -> None:
    """The sparse jacobian of several outputs is one CSR array over the flat
    vectors (flat = true), not blocks nested by output."""
    spec, fn = _spec(tmp_path, "pair", "input = { shape = [3] }\nsparse = true\n")
    with pytest.raises(
        ConfigError,
        match=r"'sparse' is not offered for a function returning several values",
    ):
        pipeline.trace_interface(spec, fn)
