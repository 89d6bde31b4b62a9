"""The config's structured keys: ``inputs`` (shapes and trees), ``has_aux`` and
``flat``; every mistake named with its file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from difgen.config import ArraySpec, load_config
from difgen.errors import ConfigError
from difgen.structure import Leaf, Node

HEAD = '[[module]]\nname = "m"\nfunction = "f.py:f"\noperators = ["gradient"]\n'


def _load(tmp_path: Path, body: str) -> object:
    path = tmp_path / "difgen.toml"
    path.write_text(HEAD + body)
    return load_config(path).modules[0]


def _refused(tmp_path: Path, body: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, body)
    return caught.value


def test_inputs_of_shapes_and_trees(tmp_path: Path) -> None:
    spec = _load(
        tmp_path,
        "inputs = [\n"
        '  { name = "params", tree = { W = { shape = [3, 2] }, b = { shape = [2] } } },\n'
        '  { name = "y0", shape = [3] },\n'
        '  { name = "ws", tree = [{ shape = [3] }, { shape = [] }], kind = "tuple" },\n'
        "]\n"
        'contexts = [{ name = "X", shape = [10, 3] }]\nhas_aux = true\nflat = true\n',
    )
    params, y0, ws = spec.inputs  # type: ignore[attr-defined]
    assert params.tree == Node("dict", ("W", "b"), (Leaf((3, 2)), Leaf((2,))))
    assert y0.tree == Leaf((3,))
    assert ws.tree == Node("tuple", (0, 1), (Leaf((3,)), Leaf(())))
    assert spec.input == ArraySpec((6 + 2 + 3 + 3 + 1,))  # type: ignore[attr-defined]
    assert spec.has_aux and spec.flat  # type: ignore[attr-defined]
    assert spec.input_names == ("params", "y0", "ws")  # type: ignore[attr-defined]


def test_one_array_input_keeps_its_shape(tmp_path: Path) -> None:
    spec = _load(tmp_path, 'inputs = [{ name = "theta", shape = [2, 2] }]\n')
    assert spec.input == ArraySpec((2, 2))  # type: ignore[attr-defined]


def test_a_type_names_a_class(tmp_path: Path) -> None:
    spec = _load(
        tmp_path,
        'inputs = [{ name = "p", tree = { W = { shape = [2] } }, type = "f.py:Params" }]\n',
    )
    (p,) = spec.inputs  # type: ignore[attr-defined]
    assert (p.tree.kind, p.tree.type_name, p.tree.type_ref) == (
        "dataclass",
        "Params",
        "f.py:Params",
    )


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        (
            'input = { shape = [2] }\ninputs = [{ name = "a", shape = [2] }]\n',
            6,
            "'input' and 'inputs' are both given",
        ),
        ("", 1, "missing the required key 'input' (or 'inputs'"),
        ("inputs = []\n", 5, "'inputs' must not be empty"),
        (
            "inputs = [{ shape = [2] }]\n",
            5,
            "inputs[0] is missing the required key 'name'",
        ),
        (
            'inputs = [{ name = "a", shape = [2], tree = { b = { shape = [] } } }]\n',
            5,
            "needs exactly one of 'shape' (one array) and 'tree'",
        ),
        ('inputs = [{ name = "a" }]\n', 5, "needs exactly one of 'shape'"),
        (
            'inputs = [{ name = "a", shape = [2], colour = 1 }]\n',
            5,
            "unknown key 'colour' in inputs[0]",
        ),
        ('inputs = [{ name = "a", tree = {} }]\n', 5, "is an empty dict"),
        ('inputs = [{ name = "a", tree = [] }]\n', 5, "is an empty list"),
        (
            'inputs = [{ name = "a", tree = { W = { shape = [-1] } } }]\n',
            5,
            "'inputs[0].tree.W.shape' must be an array of non-negative integers",
        ),
        (
            'inputs = [{ name = "a", tree = { W = { shape = [2], dtype = "int64" } } }]\n',
            5,
            (
                "'inputs[0].tree.W.dtype' is \"int64\" (string), but expected one "
                "of float64, float32"
            ),
        ),
        (
            (
                'inputs = [{ name = "a", tree = { W = { shape = [2], dtype = '
                '"float32" }, b = { shape = [] } } }]\n'
            ),
            5,
            (
                "'inputs[0].tree.b' is float64 but 'inputs[0].tree.W' is float32: "
                "the leaves of 'inputs' are laid end to end in one vector"
            ),
        ),
        (
            'inputs = [{ name = "a", shape = [2], dtype = "float32" }]\n',
            5,
            'input.dtype = "float32" needs backend = "trace"',
        ),
        (
            'inputs = [{ name = "a", tree = { W = 3 } }]\n',
            5,
            "'inputs[0].tree.W' must be a leaf { shape = [...] }",
        ),
        (
            'inputs = [{ name = "a", shape = [2], kind = "tuple" }]\n',
            5,
            "'inputs[0].kind' applies to a 'tree' only",
        ),
        (
            'inputs = [{ name = "a", tree = { W = { shape = [2] } }, kind = "tuple" }]\n',
            5,
            "'inputs[0].kind' applies to an array tree",
        ),
        (
            'inputs = [{ name = "a", tree = [{ shape = [2] }], type = "f.py:P" }]\n',
            5,
            "'inputs[0].type' names a NamedTuple or dataclass",
        ),
        (
            'inputs = [{ name = "a", shape = [2] }, { name = "a", shape = [1] }]\n',
            5,
            "duplicate input name 'a'",
        ),
        (
            'inputs = [{ name = "dx", shape = [2] }]\n',
            5,
            "'dx' is a name the generated",
        ),
        (
            'inputs = [{ name = "a", shape = [2] }]\ncontexts = [{ name = "a", shape = [] }]\n',
            6,
            "context 'a' has the name of a differentiated input",
        ),
        (
            'inputs = [{ name = "a", shape = [2], per_point = false }]\n',
            5,
            "inputs[0] ('a') has per_point = false, which applies to the points",
        ),
        (
            'inputs = [{ name = "a", shape = [2], per_point = false }]\npoints = true\n',
            5,
            "every leaf of 'inputs' has per_point = false and no context",
        ),
        (
            'inputs = [{ name = "a", tree = { b = { shape = [2], per_point = 0 } } }]\n',
            5,
            "must be true or false",
        ),
        (
            "input = { shape = [2] }\nhas_aux = true\nbatch = 2\npoints = true\n",
            7,
            "'batch' with 'points' is not offered with 'has_aux'",
        ),
        (
            "input = { shape = [2] }\nhas_aux = 1\n",
            6,
            "'has_aux' must be true or false",
        ),
        (
            'inputs = [{ name = "aux", shape = [2] }]\nhas_aux = true\n',
            5,
            "name the aux value 'aux'",
        ),
    ],
)
def test_mistakes_are_named_with_their_line(
    tmp_path: Path, body: str, line: int, message: str
) -> None:
    error = _refused(tmp_path, body)
    assert message in str(error)
    assert f"difgen.toml:{line}:" in str(error)


def test_scalar_input_operators_need_one_scalar(tmp_path: Path) -> None:
    path = tmp_path / "difgen.toml"
    path.write_text(
        '[[module]]\nname = "m"\nfunction = "f.py:f"\noperators = ["derivative"]\n'
        'inputs = [{ name = "a", shape = [] }, { name = "b", shape = [] }]\n'
    )
    with pytest.raises(
        ConfigError,
        match="'derivative' needs one scalar input, but "
        "'inputs' differentiates 2 numbers",
    ):
        load_config(path)
    path.write_text(
        '[[module]]\nname = "m"\nfunction = "f.py:f"\noperators = ["derivative"]\n'
        'inputs = [{ name = "a", shape = [] }]\n'
    )
    assert load_config(path).modules[0].input == ArraySpec(())


def test_per_point_on_an_input_and_on_leaves(tmp_path: Path) -> None:
    """A leaf's own per_point wins over its input's; the flat x carries the points
    axis when any leaf does."""
    spec = _load(
        tmp_path,
        "inputs = [\n"
        '  { name = "p", tree = { W = { shape = [2] }, b = { shape = [], '
        "per_point = false } } },\n"
        '  { name = "q", shape = [3], per_point = false },\n'
        '  { name = "r", tree = [{ shape = [1], per_point = true }, { shape = [2] }], '
        "per_point = false },\n"
        "]\npoints = true\n",
    )
    p, q, r = spec.inputs  # type: ignore[attr-defined]
    assert (p.shared, q.shared, r.shared) == ((("b",),), ((),), ((1,),))
    assert p.carries_points() == (True, False) and r.carries_points() == (True, False)
    assert spec.input.per_point  # type: ignore[attr-defined]
    shared = _load(
        tmp_path,
        'inputs = [{ name = "p", tree = { W = { shape = [2] } }, per_point = false }]\n'
        'contexts = [{ name = "X", shape = [2], per_point = true }]\npoints = true\n',
    )
    assert not shared.input.per_point  # type: ignore[attr-defined]
