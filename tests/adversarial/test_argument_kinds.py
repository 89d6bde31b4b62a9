"""Issue 20, item 6: arguments NumPy would turn silently into other numbers.

A generated operator converts what it is given with ``np.asarray``, which drops a
masked array's mask (its masked entries were used: f = 1e18 where the function
gives NaN), makes an object array of a list holding None (NaN after the float64
conversion) and reads a bool as 0 or 1. Every operator now refuses, with a
TypeError naming the operator and the argument (``gradient: x: expected ...``)
and saying what it was given:

- masked arrays (``np.ma``, with or without a mask) and ``np.matrix`` (its ``*``
  is a matrix product), as inputs, seeds, contexts and ``out``;
- object arrays, and lists or tuples holding None, a string, a bool, a complex
  number, a masked element or an object NumPy keeps as an object (``Decimal``);
- bools, strings, complex numbers and long doubles (which float64 would round)
  where floats go; floats, bools and the above where an int64 context goes.

Other ndarray subclasses are accepted as their ndarray view, and what NumPy
converts exactly is still converted: int lists and arrays, float16 and float32,
tuples, NumPy scalars; each gives bit for bit the numbers of the float64 array.

Every position of every operator of a few modules, on the sympy backend and the
trace backend's vector, scalar and compiled C emissions (the C operators hand
anything off their fast path to the module's own checks).
"""

from __future__ import annotations

import decimal
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from compiled import BuiltConfig
from conftest import SUPPORT

from .adversarial_support import rows

CONFIGS: dict[str, tuple[str, str, str]] = {
    "sympy": ("sympy", "auto", "auto"),
    "vector": ("trace", "reverse", "vector"),
    "scalar": ("trace", "reverse", "scalar"),
    "c": ("trace", "forward", "c"),
}
TRACE = ("vector", "c")
"""int64 and bool contexts: vector code only (and C, which runs it where it must)."""

# name: (function, input shape, output shape, operators, contexts, configs)
MODULES: dict[
    str,
    tuple[
        str,
        tuple[int, ...],
        tuple[int, ...],
        tuple[str, ...],
        tuple[tuple[str, tuple[int, ...], str], ...],
        tuple[str, ...],
    ],
] = {
    "energy": (
        "energy",
        (3,),
        (),
        (
            "gradient",
            "value_and_gradient",
            "hessian",
            "hvp",
            "pushforward",
            "pullback",
        ),
        (("p", (3,), "float64"),),
        tuple(CONFIGS),
    ),
    "field": (
        "field",
        (3,),
        (3,),
        ("jacobian", "pushforward", "pullback"),
        (("p", (3,), "float64"),),
        tuple(CONFIGS),
    ),
    "curve": (
        "curve",
        (),
        (),
        ("derivative", "second_derivative", "pushforward", "pullback"),
        (),
        tuple(CONFIGS),
    ),
    "gather": (
        "gather",
        (4,),
        (),
        ("gradient", "pullback"),
        (("idx", (3,), "int64"),),
        TRACE,
    ),
    "masked": (
        "masked",
        (3,),
        (),
        ("gradient", "pushforward"),
        (("m", (3,), "bool"),),
        TRACE,
    ),
    "swarm": (
        "energy",
        (3,),
        (),
        ("gradient", "hvp"),
        (("p", (3,), "float64"),),
        TRACE,
    ),
}
POINTS = {"swarm": 2}
"""Modules built with ``points = true``, and the number of points the cases pass:
their operators are the ``_points`` variants (``x`` and the seeds with the points
axis in front, through ``_as_points``; the context shared)."""
SEEDS = {"hvp": ("v",), "pushforward": ("dx",), "pullback": ("dy",)}
OUTS = {  # operators taking out=, and the shape of their last result
    ("energy", "gradient"): (3,),
    ("energy", "value_and_gradient"): (3,),
    ("energy", "hessian"): (3, 3),
    ("field", "jacobian"): (3, 3),
    ("gather", "gradient"): (4,),
}
CONTEXT_VALUES = {
    "p": np.array([1.0, -2.0, 0.5]),
    "idx": np.array([0, 2, 2]),
    "m": np.array([True, False, True]),
}


def _name(module: str, config: str) -> str:
    return f"{module}_{config}"


class Modules(BuiltConfig):
    """Every module in each of its configurations, built (and compiled) once."""

    def __init__(self, directory: Path) -> None:
        shutil.copy(SUPPORT / "argument_kinds_functions.py", directory)
        parts = ['[difgen]\noutput_dir = "out"\n']
        for module, (
            function,
            shape,
            _,
            operators,
            contexts,
            configs,
        ) in MODULES.items():
            tables = ", ".join(
                f'{{ name = "{n}", shape = {list(s)}, dtype = "{d}" }}'
                for n, s, d in contexts
            )
            for config in configs:
                backend, mode, emit = CONFIGS[config]
                parts.append(
                    "[[module]]\n"
                    f'name = "{_name(module, config)}"\n'
                    f'function = "argument_kinds_functions.py:{function}"\n'
                    f"operators = {list(operators)!r}\n".replace("'", '"')
                    + f"input = {{ shape = {list(shape)} }}\n"
                    + (f"contexts = [{tables}]\n" if contexts else "")
                    + f'backend = "{backend}"\nmode = "{mode}"\nemit = "{emit}"\n'
                    + ("points = true\n" if module in POINTS else "")
                )
        super().__init__(directory, "\n".join(parts))


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> Modules:
    return Modules(tmp_path_factory.mktemp("argument_kinds"))


def _operator(modules: Modules, module: str, config: str, op: str) -> Any:
    name = f"{op}_points" if module in POINTS else op
    return getattr(modules.get(_name(module, config)), name)


def _parameters(module: str, op: str) -> list[str]:
    return ["x", *SEEDS.get(op, ()), *(c for c, _, _ in MODULES[module][4])]


def _good(module: str, parameter: str) -> Any:
    """A valid argument: a float64 array (a float for a 0-d one), or the context."""
    if parameter in CONTEXT_VALUES:
        return CONTEXT_VALUES[parameter].copy()
    _, xs, ys, _, _, _ = MODULES[module]
    shape = ys if parameter == "dy" else xs
    if module in POINTS:
        shape = (POINTS[module], *shape)
    if shape == ():
        return {"x": 0.7, "dx": 1.5, "dy": -2.0}[parameter]
    start = {"x": 0.3, "dx": 1.0, "v": -1.0, "dy": 0.5}[parameter]
    return np.linspace(start, start + 1.7, int(np.prod(shape))).reshape(shape)


def _arguments(module: str, op: str, **override: Any) -> dict[str, Any]:
    args = {p: _good(module, p) for p in _parameters(module, op)}
    args.update(override)
    return args


def _last_leaf(value: Any, leaf: Any, sequence: type = list) -> Any:
    """``value`` as nested lists (or tuples) with its last entry replaced."""
    items = np.asarray(value).tolist()
    inner = items
    while isinstance(inner[-1], list):
        inner = inner[-1]
    inner[-1] = leaf
    return items if sequence is list else tuple(items)


def _masked_first(value: Any) -> Any:
    mask = np.zeros(np.shape(value), bool)
    mask.flat[0] = True
    return np.ma.array(value, mask=mask)


def _object_none(value: Any) -> Any:
    array = np.array(value, dtype=object)
    array.flat[-1] = None
    return array


def _matrix(value: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return np.matrix(value)


WIDE_LONGDOUBLE = np.finfo(np.longdouble).nmant > np.finfo(np.float64).nmant
"""Whether np.longdouble holds more than float64 here (x86 Linux: 80-bit), so that
converting one would round; where it is float64 itself it converts exactly."""

# (id, make from the good value, a phrase the message must hold)
Kind = tuple[str, Callable[[Any], Any], str]
ARRAY_KINDS: list[Kind] = [
    ("masked", _masked_first, "masked array"),
    ("masked-no-mask", np.ma.array, "masked array"),
    ("matrix", _matrix, "np.matrix"),
    ("object", lambda v: np.array(v, dtype=object), "object array"),
    ("object-holding-none", _object_none, "None"),
    ("list-holding-none", lambda v: _last_leaf(v, None), "None"),
    ("tuple-holding-none", lambda v: _last_leaf(v, None, tuple), "None"),
    ("list-holding-str", lambda v: _last_leaf(v, "1.5"), "str"),
    ("list-holding-bool", lambda v: _last_leaf(v, True), "bool"),
    ("list-holding-complex", lambda v: _last_leaf(v, 1.5 + 0j), "complex"),
    ("list-holding-masked", lambda v: _last_leaf(v, np.ma.masked), "masked"),
    (
        "list-holding-decimal",
        lambda v: _last_leaf(v, decimal.Decimal("1.5")),
        "Decimal",
    ),
    ("bool-array", lambda v: np.ones(np.shape(v), bool), "bool"),
    ("str-array", lambda v: np.asarray(v).astype(str), "<U"),
    ("complex-array", lambda v: np.asarray(v) + 0j, "complex"),
    ("none", lambda v: None, "None"),
]
SCALAR_KINDS: list[Kind] = [
    ("masked", lambda v: np.ma.array(v, mask=True), "masked array"),
    ("masked-no-mask", np.ma.array, "masked array"),
    ("matrix", _matrix, "np.matrix"),
    ("none", lambda v: None, "None"),
    ("bool", lambda v: True, "bool"),
    ("numpy-bool", lambda v: np.True_, "bool"),
    ("str", str, "<U"),
    ("complex", complex, "complex"),
    ("decimal", lambda v: decimal.Decimal(repr(v)), "Decimal"),
    ("object-0d", lambda v: np.array(v, dtype=object), "object array"),
    ("list-holding-none", lambda v: [None], "None"),
]
if WIDE_LONGDOUBLE:
    ARRAY_KINDS.append(
        ("longdouble", lambda v: np.asarray(v, np.longdouble), "would round")
    )
    SCALAR_KINDS.append(("longdouble", np.longdouble, "would round"))
INT_KINDS: list[Kind] = [
    ("masked", _masked_first, "masked array"),
    ("matrix", _matrix, "np.matrix"),
    ("object", lambda v: np.array(v, dtype=object), "object array"),
    ("list-holding-none", lambda v: _last_leaf(v, None), "None"),
    ("list-holding-bool", lambda v: _last_leaf(v, True), "bool"),
    ("list-holding-str", lambda v: _last_leaf(v, "2"), "str"),
    ("float-array", lambda v: np.asarray(v, float), "float64"),
    ("bool-array", lambda v: np.asarray(v, bool), "bool"),
]
BOOL_KINDS: list[Kind] = [
    ("masked", _masked_first, "masked array"),
    ("matrix", _matrix, "np.matrix"),
    ("object", lambda v: np.array(v, dtype=object), "object array"),
    ("list-holding-none", lambda v: _last_leaf(v, None), "None"),
    ("list-holding-str", lambda v: _last_leaf(v, "True"), "str"),
    ("int-array", lambda v: np.asarray(v, int), "int64"),
]


def _kinds(module: str, parameter: str) -> list[Kind]:
    if parameter == "idx":
        return INT_KINDS
    if parameter == "m":
        return BOOL_KINDS
    return SCALAR_KINDS if np.ndim(_good(module, parameter)) == 0 else ARRAY_KINDS


REFUSED = [
    (module, config, op, parameter, kind, make, phrase)
    for module, (_, _, _, operators, _, configs) in MODULES.items()
    for config in configs
    for op in operators
    for parameter in _parameters(module, op)
    for kind, make, phrase in _kinds(module, parameter)
]


@pytest.mark.parametrize(
    ("module", "config", "op", "parameter", "kind", "make", "phrase"),
    rows(REFUSED, id_of=lambda r: f"{r[0]}-{r[1]}-{r[2]}-{r[3]}-{r[4]}"),
)
def test_hostile_argument_is_refused_naming_it(
    modules: Modules,
    module: str,
    config: str,
    op: str,
    parameter: str,
    kind: str,
    make: Callable[[Any], Any],
    phrase: str,
) -> None:
    """A TypeError whose message starts with the operator's and the argument's
    names and says what was given; never a number, never an unnamed error from
    inside the body."""
    operator = _operator(modules, module, config, op)
    bad = make(_good(module, parameter))
    with pytest.raises(TypeError) as caught, warnings.catch_warnings():
        warnings.simplefilter("error")  # "converting a masked element to nan"
        operator(**_arguments(module, op, **{parameter: bad}))
    message = str(caught.value)
    assert message.startswith(f"{operator.__name__}: {parameter}: expected "), message
    assert phrase in message, message


def _masked_out(shape: tuple[int, ...]) -> Any:
    return np.ma.array(np.zeros(shape), mask=np.zeros(shape, bool))


OUT_KINDS: list[tuple[str, Callable[[tuple[int, ...]], Any], str]] = [
    ("masked", _masked_out, "masked array"),
    ("matrix", lambda shape: _matrix(np.zeros(shape)), "np.matrix"),
]
REFUSED_OUT = [
    (module, config, op, shape, kind, make, phrase)
    for (module, op), shape in OUTS.items()
    for config in MODULES[module][5]
    for kind, make, phrase in OUT_KINDS
]


@pytest.mark.parametrize(
    ("module", "config", "op", "shape", "kind", "make", "phrase"),
    rows(REFUSED_OUT, id_of=lambda r: f"{r[0]}-{r[1]}-{r[2]}-out-{r[4]}"),
)
def test_masked_or_matrix_out_is_refused(
    modules: Modules,
    module: str,
    config: str,
    op: str,
    shape: tuple[int, ...],
    kind: str,
    make: Callable[[tuple[int, ...]], Any],
    phrase: str,
) -> None:
    """A masked ``out`` would be filled under its mask and an ``np.matrix`` one of
    the result's shape (the hessian's) was accepted: both raise TypeError naming
    ``out``, which is left as it was."""
    operator = _operator(modules, module, config, op)
    out = make(shape)
    with pytest.raises(TypeError) as caught:
        operator(**_arguments(module, op), out=out)
    message = str(caught.value)
    assert message.startswith(f"{operator.__name__}: out: expected "), message
    assert phrase in message, message
    assert not np.asarray(out).any()


# ------------------------------------------------------------ still converted


class Plain(np.ndarray):
    """An ndarray subclass that adds nothing: taken as its ndarray view."""


def _plain(value: Any) -> Any:
    return np.asarray(value).view(Plain)


def _leaves(items: Any, make: Callable[[Any], Any]) -> Any:
    """Nested lists with ``make`` applied to each number."""
    if isinstance(items, list):
        return [_leaves(item, make) for item in items]
    return make(items)


# (id, make from the good value): NumPy converts each exactly to float64
ARRAY_VALID: list[tuple[str, Callable[[Any], Any]]] = [
    ("int-list", lambda v: np.rint(4 * np.asarray(v)).astype(int).tolist()),
    ("int64-array", lambda v: np.rint(4 * np.asarray(v)).astype(np.int64)),
    ("int32-array", lambda v: np.rint(4 * np.asarray(v)).astype(np.int32)),
    ("uint8-array", lambda v: np.rint(4 * np.abs(v)).astype(np.uint8)),
    ("float32-array", lambda v: np.asarray(v, np.float32)),
    ("float16-array", lambda v: np.asarray(v, np.float16)),
    ("float-list", lambda v: np.asarray(v).tolist()),
    ("float-tuple", lambda v: tuple(np.asarray(v).tolist())),
    ("numpy-scalars-list", lambda v: _leaves(np.asarray(v).tolist(), np.float64)),
    ("plain-subclass", _plain),
]
SCALAR_VALID: list[tuple[str, Callable[[Any], Any]]] = [
    ("int", lambda v: int(4 * v)),
    ("numpy-int", lambda v: np.int64(4 * v)),
    ("numpy-float32", np.float32),
    ("numpy-float64", np.float64),
    ("zero-d-array", np.array),
    ("zero-d-float32-array", lambda v: np.array(v, np.float32)),
    ("plain-subclass-0d", _plain),
]
INT_VALID: list[tuple[str, Callable[[Any], Any]]] = [
    ("int-list", lambda v: np.asarray(v).tolist()),
    ("int32-array", lambda v: np.asarray(v, np.int32)),
    ("uint8-array", lambda v: np.asarray(v, np.uint8)),
    ("plain-subclass", _plain),
]
BOOL_VALID: list[tuple[str, Callable[[Any], Any]]] = [
    ("bool-list", lambda v: np.asarray(v).tolist()),
    ("plain-subclass", _plain),
]


def _valid(module: str, parameter: str) -> list[tuple[str, Callable[[Any], Any]]]:
    if parameter == "idx":
        return INT_VALID
    if parameter == "m":
        return BOOL_VALID
    return SCALAR_VALID if np.ndim(_good(module, parameter)) == 0 else ARRAY_VALID


def _exact(value: Any, parameter: str) -> Any:
    """What the converted value must equal: the float64 array NumPy makes of it
    (int64 and bool contexts keep their dtype)."""
    dtype = {"idx": np.int64, "m": np.bool_}.get(parameter, np.float64)
    array = np.array(value, dtype=dtype)
    return float(array) if array.ndim == 0 and dtype is np.float64 else array


CONVERTED = [
    (module, config, op, parameter, kind, make)
    for module, (_, _, _, operators, _, configs) in MODULES.items()
    for config in configs
    for op in operators[:2]
    for parameter in _parameters(module, op)
    for kind, make in _valid(module, parameter)
]


@pytest.mark.parametrize(
    ("module", "config", "op", "parameter", "kind", "make"),
    rows(CONVERTED, id_of=lambda r: f"{r[0]}-{r[1]}-{r[2]}-{r[3]}-{r[4]}"),
)
def test_exact_conversions_give_the_float64_numbers(
    modules: Modules,
    module: str,
    config: str,
    op: str,
    parameter: str,
    kind: str,
    make: Callable[[Any], Any],
) -> None:
    """Bit for bit the result of the float64 (or int64, bool) array NumPy makes."""
    operator = _operator(modules, module, config, op)
    value = make(_good(module, parameter))
    got = operator(**_arguments(module, op, **{parameter: value}))
    expected = operator(
        **_arguments(module, op, **{parameter: _exact(value, parameter)})
    )
    got, expected = (r if isinstance(r, tuple) else (r,) for r in (got, expected))
    assert len(got) == len(expected)
    for a, b in zip(got, expected):  # (a NumPy float in gives a NumPy float out)
        assert np.asarray(a).dtype == np.asarray(b).dtype == np.float64
        np.testing.assert_array_equal(a, b, strict=True)
