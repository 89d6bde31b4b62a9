"""difgen.structure: trees of arrays, their flatten order and flat layout, against
JAX's ravel_pytree."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from difgen import structure
from difgen.structure import Leaf, Node, StructureError

jax.config.update("jax_enable_x64", True)


class Pair(NamedTuple):
    first: Any
    second: Any


@dataclasses.dataclass
class Box:
    z: Any
    a: Any


def _example() -> Any:
    rng = np.random.default_rng(0)
    return {
        "w": rng.normal(size=(2, 3)),
        "a": [rng.normal(size=2), 1.5],
        "pair": Pair(rng.normal(size=()), (rng.normal(size=4), 2)),
    }


def test_describe_sorts_dict_keys_and_keeps_field_order() -> None:
    tree = structure.describe({"b": 1.0, "a": Box(np.zeros(2), 0.0)})
    assert isinstance(tree, Node) and tree.keys == ("a", "b")
    box = tree.children[0]
    assert isinstance(box, Node)
    assert (box.kind, box.keys, box.type_name, box.cls) == (
        "dataclass",
        ("z", "a"),
        "Box",
        Box,
    )
    assert box.children == (Leaf((2,)), Leaf(()))


def test_ravel_lays_leaves_out_as_jax_does() -> None:
    value = _example()
    tree = structure.describe(value)
    want, _ = ravel_pytree(value)
    np.testing.assert_array_equal(structure.ravel(tree, value), np.asarray(want))
    assert structure.size(tree) == want.size


def test_unravel_is_the_inverse_and_gives_views() -> None:
    value = _example()
    tree = structure.describe(value)
    flat = structure.ravel(tree, value)
    back = structure.unravel(tree, flat)
    assert isinstance(back["pair"], Pair) and isinstance(back["a"], list)
    np.testing.assert_array_equal(back["w"], value["w"])
    assert back["w"].base is not None and np.shares_memory(back["w"], flat)
    np.testing.assert_array_equal(structure.ravel(tree, back), flat)


def test_a_bare_leaf_keeps_its_shape() -> None:
    tree = structure.describe(np.zeros((2, 3)))
    assert tree == Leaf((2, 3)) and structure.flat_shape(tree) == (2, 3)
    array = np.ones((2, 3))
    assert structure.ravel(tree, array) is array
    assert structure.flat_shape(structure.describe([np.zeros((2, 3))])) == (6,)


def test_layout_names_each_slice() -> None:
    tree = structure.describe({"W": np.zeros((3, 2)), "b": np.zeros(2)})
    rows = [
        (structure.path_text("p", path), a, b)
        for path, _, a, b in structure.layout(tree)
    ]
    assert rows == [("p['W']", 0, 6), ("p['b']", 6, 8)]


def test_literal_is_what_the_module_walks() -> None:
    tree = structure.describe((1.0, {"k": np.zeros(2)}))
    assert structure.literal(tree) == (
        "('tuple', (0, 1), (('leaf', (), 0, 1), ('dict', ('k',), (('leaf', (2,), 1, 3),))))"
    )
    boxed = structure.describe(Box(np.zeros(2), 1.0))
    assert structure.literal(boxed).endswith(", Box)")
    assert [n.type_name for n in structure.classes(boxed)] == ["Box"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({}, r"value: an empty dict has nothing to differentiate"),
        ({"a": []}, r"value\['a'\]: an empty list"),
        ({"a": "text"}, r"value\['a'\]: expected a float64 array or number, got str"),
        ({"a": True}, r"value\['a'\]: expected a float64 array or number, got bool"),
        ([1j], r"value\[0\]: expected a float64 array or number, got complex"),
        ({1: 2.0}, r"dict keys must be strings"),
        ([None], r"value\[0\]: expected a float64 array or number, got NoneType"),
    ],
)
def test_describe_refuses_what_cannot_be_differentiated(
    value: Any, message: str
) -> None:
    with pytest.raises(StructureError, match=message):
        structure.describe(value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"W": np.zeros((3, 2))},
            r"p: expected a dict with keys \['W', 'b'\]; missing 'b'",
        ),
        (
            {"W": np.zeros((3, 2)), "b": np.zeros(2), "c": 1.0},
            r"p: expected a dict with keys \['W', 'b'\]; unexpected 'c'",
        ),
        (
            {"W": np.zeros((2, 3)), "b": np.zeros(2)},
            r"p\['W'\]: expected shape \(3, 2\), got shape \(2, 3\)",
        ),
        (
            {"W": np.zeros((3, 2)), "b": "ab"},
            r"p\['b'\]: expected a float64 array or number",
        ),
        ([np.zeros((3, 2)), np.zeros(2)], r"p: expected a dict with keys"),
    ],
)
def test_ravel_names_the_argument_key_and_shape(value: Any, message: str) -> None:
    tree = structure.describe({"W": np.zeros((3, 2)), "b": np.zeros(2)})
    with pytest.raises(StructureError, match=message):
        structure.ravel(tree, value, "p")


def test_sequences_and_classes_are_checked() -> None:
    tree = structure.describe((np.zeros(2), Pair(1.0, 2.0)))
    with pytest.raises(
        StructureError,
        match=r"v: expected a tuple of length 2, got a tuple of length 1",
    ):
        structure.ravel(tree, (np.zeros(2),), "v")
    with pytest.raises(
        StructureError,
        match=r"v\[1\]: expected a Pair with fields \['first', 'second'\]",
    ):
        structure.ravel(tree, (np.zeros(2), {"first": 1.0}), "v")
    # any object with the fields will do, as the generated modules take them
    duck = type("Duck", (), {"first": 1.0, "second": 2.0})()
    np.testing.assert_array_equal(
        structure.ravel(tree, (np.zeros(2), duck), "v"), [0, 0, 1, 2]
    )


def test_a_class_unknown_cannot_be_built() -> None:
    node = Node("dataclass", ("a",), (Leaf(()),), type_name="Params")
    with pytest.raises(StructureError, match="the class Params"):
        structure.unravel(node, np.zeros(1))


def test_tuple_of_one_is_the_tree_itself() -> None:
    leaf = Leaf((3,))
    assert structure.tuple_of([leaf]) is leaf
    both = structure.tuple_of([leaf, Leaf(())])
    assert isinstance(both, Node) and both.kind == "tuple" and structure.size(both) == 4
