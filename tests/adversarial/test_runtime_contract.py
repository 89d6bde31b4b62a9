"""Class 5: the generated module's runtime contract.

A generated operator is called with arrays difgen never saw. Each checks its
arguments against the hard-coded shapes (``x``, ``dx``, ``dy``, ``v``, contexts,
``out``) and raises a ValueError naming the argument, the expected and the actual
shape, instead of returning a wrong number (a 9-atom input to an 8-atom module);
``out=`` of the wrong dtype or shape raises instead of truncating; complex input
raises TypeError; lists are accepted or refused alike by scalar and vector
emission. Arrays of the right shape in any memory layout are accepted and give
NumPy's numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from .adversarial_support import Builder, Built, rows

VARIANTS: dict[str, dict[str, str]] = {
    "sympy": {"backend": "sympy"},
    "trace-scalar": {"backend": "trace", "emit": "scalar"},
    "trace-vector": {"backend": "trace", "emit": "vector"},
}

SOURCE = """
import numpy as np


def energy(x, p):
    return np.sum(p * np.sin(x)) ** 2


def field(x, p):
    return p * x ** 2


def curve(x):
    return np.sin(x) * x
"""

MODULES: dict[str, tuple[str, tuple[int, ...], tuple[str, ...], list[Any]]] = {
    # name: (function, input shape, operators, contexts)
    "energy": (
        "energy",
        (1, 3),
        (
            "gradient",
            "value_and_gradient",
            "hessian",
            "hvp",
            "pushforward",
            "pullback",
            "value_and_pushforward",
            "jacobian",
            "value_gradient_and_hessian",
        ),
        [("p", (3,))],
    ),
    "field": (
        "field",
        (3,),
        ("jacobian", "value_and_jacobian", "pushforward", "pullback"),
        [("p", (3,))],
    ),
    "curve": (
        "curve",
        (),
        ("derivative", "second_derivative", "value_and_derivative", "pushforward"),
        [],
    ),
}

GOOD: dict[str, dict[str, Any]] = {
    "energy": {
        "x": np.array([[0.1, 0.2, 0.3]]),
        "p": np.array([1.0, 2.0, 3.0]),
        "dx": np.ones((1, 3)),
        "dy": 1.0,
        "v": np.arange(3.0).reshape(1, 3),
    },
    "field": {
        "x": np.array([0.5, -1.0, 2.0]),
        "p": np.array([1.0, 2.0, 3.0]),
        "dx": np.ones(3),
        "dy": np.array([1.0, -1.0, 0.5]),
    },
    "curve": {"x": 0.7, "dx": 1.0},
}

PARAMETERS: dict[str, tuple[str, ...]] = {
    "f": ("x",),
    "gradient": ("x",),
    "value_and_gradient": ("x",),
    "hessian": ("x",),
    "hvp": ("x", "v"),
    "pushforward": ("x", "dx"),
    "pullback": ("x", "dy"),
    "value_and_pushforward": ("x", "dx"),
    "jacobian": ("x",),
    "value_and_jacobian": ("x",),
    "value_gradient_and_hessian": ("x",),
    "derivative": ("x",),
    "second_derivative": ("x",),
    "value_and_derivative": ("x",),
}


def _module(build: Builder, name: str, variant: str) -> Built:
    function, shape, operators, contexts = MODULES[name]
    return build(SOURCE, function, shape, operators, contexts, **VARIANTS[variant])


def _args(module: str, op: str, **override: Any) -> dict[str, Any]:
    """The good arguments of ``op`` (contexts included), with some replaced."""
    good = GOOD[module]
    names = list(PARAMETERS[op]) + [c for c, _ in MODULES[module][3]]
    args = {
        name: np.copy(good[name]) if name != "dy" or module != "energy" else good[name]
        for name in names
    }
    args.update(override)
    return args


def _shape_pattern(shape: tuple[int, ...]) -> str:
    """``(2, 3)`` or ``[2, 3]``; ``()``, ``[]`` or "scalar" for a 0-d shape."""
    if shape == ():
        return r"(\(\)|\[\]|scalar)"
    inner = r"\s*,\s*".join(str(n) for n in shape)
    return r"[\(\[]\s*" + inner + r"\s*,?\s*[\)\]]"


# (id, module, operator, argument, bad value, expected shape of that argument)
SHAPES: list[tuple[str, str, str, str, Any, tuple[int, ...]]] = [
    ("f-x-transposed", "energy", "f", "x", np.ones((3, 1)), (1, 3)),
    ("f-x-too-long", "energy", "f", "x", np.ones((1, 4)), (1, 3)),
    ("gradient-x-flat", "energy", "gradient", "x", np.ones(3), (1, 3)),
    ("gradient-x-extra-axis", "energy", "gradient", "x", np.ones((1, 3, 1)), (1, 3)),
    ("gradient-x-9-for-3", "energy", "gradient", "x", np.ones((3, 3)), (1, 3)),
    (
        "value_and_gradient-x-leading-axis",
        "energy",
        "value_and_gradient",
        "x",
        np.ones((1, 1, 3)),
        (1, 3),
    ),
    ("hessian-x-small", "energy", "hessian", "x", np.ones((1, 2)), (1, 3)),
    ("hvp-v-short", "energy", "hvp", "v", np.ones(3), (1, 3)),
    ("hvp-v-extra-axis", "energy", "hvp", "v", np.ones((1, 3, 1)), (1, 3)),
    ("pushforward-dx-flat", "energy", "pushforward", "dx", np.ones(3), (1, 3)),
    (
        "value_and_pushforward-dx-transposed",
        "energy",
        "value_and_pushforward",
        "dx",
        np.ones((3, 1)),
        (1, 3),
    ),
    ("pullback-dy-vector", "energy", "pullback", "dy", np.ones(2), ()),
    ("pullback-dy-one-element", "energy", "pullback", "dy", np.ones(1), ()),
    ("gradient-p-full", "energy", "gradient", "p", np.ones((1, 3)), (3,)),
    ("gradient-p-long", "energy", "gradient", "p", np.ones(4), (3,)),
    ("hvp-p-scalar", "energy", "hvp", "p", np.float64(1.0), (3,)),
    (
        "value_gradient_and_hessian-p-short",
        "energy",
        "value_gradient_and_hessian",
        "p",
        np.ones(2),
        (3,),
    ),
    ("jacobian-x-long", "field", "jacobian", "x", np.ones(4), (3,)),
    ("jacobian-x-column", "field", "jacobian", "x", np.ones((3, 1)), (3,)),
    ("pullback-dy-long", "field", "pullback", "dy", np.ones(4), (3,)),
    ("pushforward-dx-short", "field", "pushforward", "dx", np.ones(2), (3,)),
    ("pushforward-p-short", "field", "pushforward", "p", np.ones(2), (3,)),
    ("value_and_jacobian-p-long", "field", "value_and_jacobian", "p", np.ones(9), (3,)),
    ("derivative-x-vector", "curve", "derivative", "x", np.ones(2), ()),
    (
        "second_derivative-x-one-element",
        "curve",
        "second_derivative",
        "x",
        np.ones(1),
        (),
    ),
    (
        "value_and_derivative-x-matrix",
        "curve",
        "value_and_derivative",
        "x",
        np.ones((1, 1)),
        (),
    ),
    ("pushforward-dx-vector", "curve", "pushforward", "dx", np.ones(2), ()),
]

SHAPE_MATRIX = [(*row, variant) for row in SHAPES for variant in VARIANTS]


def _row_id(row: tuple[Any, ...]) -> str:
    return f"{row[0]}-{row[-1]}"


@pytest.mark.parametrize(
    ("name", "module", "op", "argument", "bad", "expected", "variant"),
    rows(SHAPE_MATRIX, id_of=_row_id),
)
def test_wrong_shape_raises_value_error_naming_it(
    build: Builder,
    name: str,
    module: str,
    op: str,
    argument: str,
    bad: Any,
    expected: tuple[int, ...],
    variant: str,
) -> None:
    built = _module(build, module, variant)
    with pytest.raises(ValueError) as caught:
        getattr(built.module, op)(**_args(module, op, **{argument: bad}))
    message = str(caught.value)
    assert re.search(rf"\b{argument}\b", message), message
    assert re.search(_shape_pattern(expected), message), message
    assert re.search(_shape_pattern(np.shape(bad)), message), message


# (id, module, operator, bad out, expected shape of out)
OUTS: list[tuple[str, str, str, Any, tuple[int, ...]]] = [
    ("gradient-out-transposed", "energy", "gradient", np.zeros((3, 1)), (1, 3)),
    ("gradient-out-broadcastable", "energy", "gradient", np.zeros((1, 1, 3)), (1, 3)),
    (
        "gradient-out-int",
        "energy",
        "gradient",
        np.zeros((1, 3), dtype=np.int64),
        (1, 3),
    ),
    (
        "gradient-out-float32",
        "energy",
        "gradient",
        np.zeros((1, 3), np.float32),
        (1, 3),
    ),
    ("gradient-out-list", "energy", "gradient", [[0.0] * 3], (1, 3)),
    (
        "value_and_gradient-out-int",
        "energy",
        "value_and_gradient",
        np.zeros((1, 3), dtype=np.int32),
        (1, 3),
    ),
    ("hessian-out-flat-matrix", "energy", "hessian", np.zeros((3, 3)), (1, 3, 1, 3)),
    (
        "hessian-out-int",
        "energy",
        "hessian",
        np.zeros((1, 3, 1, 3), dtype=int),
        (1, 3, 1, 3),
    ),
    ("jacobian-out-vector", "field", "jacobian", np.zeros(3), (3, 3)),
    ("jacobian-out-complex", "field", "jacobian", np.zeros((3, 3), complex), (3, 3)),
    ("value_and_jacobian-out-flat", "field", "value_and_jacobian", np.zeros(9), (3, 3)),
]
OUT_MATRIX = [(*row, variant) for row in OUTS for variant in VARIANTS]


@pytest.mark.parametrize(
    ("name", "module", "op", "out", "expected", "variant"),
    rows(OUT_MATRIX, id_of=_row_id),
)
def test_wrong_out_raises(
    build: Builder,
    name: str,
    module: str,
    op: str,
    out: Any,
    expected: tuple[int, ...],
    variant: str,
) -> None:
    """A wrong ``out`` raises (never truncates) and is left untouched."""
    built = _module(build, module, variant)
    before = np.array(out, copy=True)
    with pytest.raises((ValueError, TypeError)) as caught:
        getattr(built.module, op)(**_args(module, op), out=out)
    assert re.search(r"\bout\b", str(caught.value)), caught.value
    np.testing.assert_array_equal(np.asarray(out), before)


# (id, module, operator, complex argument)
COMPLEX = [
    ("f-x", "energy", "f", "x"),
    ("gradient-x", "energy", "gradient", "x"),
    ("hvp-v", "energy", "hvp", "v"),
    ("pushforward-dx", "energy", "pushforward", "dx"),
    ("gradient-p", "energy", "gradient", "p"),
    ("jacobian-x", "field", "jacobian", "x"),
    ("pullback-dy", "field", "pullback", "dy"),
    ("derivative-x", "curve", "derivative", "x"),
]
COMPLEX_MATRIX = [(*row, variant) for row in COMPLEX for variant in VARIANTS]


@pytest.mark.parametrize(
    ("name", "module", "op", "argument", "variant"),
    rows(COMPLEX_MATRIX, id_of=_row_id),
)
def test_complex_argument_raises_type_error(
    build: Builder, name: str, module: str, op: str, argument: str, variant: str
) -> None:
    """Even with a zero imaginary part: difgen's modules are real float64 only."""
    built = _module(build, module, variant)
    value = np.asarray(_args(module, op)[argument]) + 0j
    with pytest.raises(TypeError) as caught:
        getattr(built.module, op)(**_args(module, op, **{argument: value}))
    assert re.search(rf"\b{argument}\b", str(caught.value)), caught.value


# ------------------------------------------------------------- accepted as given


def _reference_gradient(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    s = np.sum(p * np.sin(x))
    return 2 * s * p * np.cos(x)


def _strided(x: np.ndarray) -> np.ndarray:
    wide = np.zeros((x.shape[0], 2 * x.shape[1]))
    wide[:, ::2] = x
    return wide[:, ::2]


def _readonly(x: np.ndarray) -> np.ndarray:
    x = x.copy()
    x.flags.writeable = False
    return x


# (id, how x is laid out): all are float64 arrays of the right shape.
LAYOUTS: list[tuple[str, Callable[[np.ndarray], np.ndarray]]] = [
    ("c-order", np.ascontiguousarray),
    ("fortran-order", np.asfortranarray),
    ("strided", _strided),
    ("read-only", _readonly),
    ("reversed-view", lambda x: x[::-1, ::-1].copy()[::-1, ::-1]),
]
LAYOUT_MATRIX = [
    (name, make, variant) for name, make in LAYOUTS for variant in VARIANTS
]


@pytest.mark.parametrize(
    ("name", "make", "variant"), rows(LAYOUT_MATRIX, id_of=lambda r: f"{r[0]}-{r[2]}")
)
def test_any_memory_layout_gives_numpys_numbers(
    build: Builder, name: str, make: Callable[[np.ndarray], np.ndarray], variant: str
) -> None:
    """x and out in any layout; x is never written; out is filled and returned."""
    built = _module(build, "energy", variant)
    x = make(GOOD["energy"]["x"])
    p = GOOD["energy"]["p"]
    before = x.copy()
    expected = _reference_gradient(before, p)
    out = make(np.zeros((1, 3))) if name != "read-only" else np.zeros((1, 3))
    np.testing.assert_allclose(built.module.gradient(x, p), expected, rtol=1e-13)
    returned = built.module.gradient(x, p, out=out)
    assert returned is out
    np.testing.assert_allclose(out, expected, rtol=1e-13)
    np.testing.assert_allclose(
        built.module.f(x, p), np.sum(p * np.sin(before)) ** 2, rtol=1e-14
    )
    np.testing.assert_array_equal(x, before)


SCALARS: list[tuple[str, Any]] = [
    ("python-float", 0.7),
    ("numpy-float64", np.float64(0.7)),
    ("zero-d-array", np.array(0.7)),
]
SCALAR_MATRIX = [
    (name, value, variant) for name, value in SCALARS for variant in VARIANTS
]


@pytest.mark.parametrize(
    ("name", "value", "variant"), rows(SCALAR_MATRIX, id_of=lambda r: f"{r[0]}-{r[2]}")
)
def test_scalar_input_forms_agree(
    build: Builder, name: str, value: Any, variant: str
) -> None:
    """A scalar input may be a float, a NumPy float or a 0-d array."""
    built = _module(build, "curve", variant)
    x = 0.7
    np.testing.assert_allclose(built.module.f(value), np.sin(x) * x, rtol=1e-15)
    np.testing.assert_allclose(
        built.module.derivative(value), np.cos(x) * x + np.sin(x), rtol=1e-14
    )
    np.testing.assert_allclose(
        built.module.second_derivative(value), 2 * np.cos(x) - x * np.sin(x), rtol=1e-14
    )


# -------------------------------------------------------------------- lists


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "value", np.asarray(call())
    except Exception as exc:  # noqa: BLE001 - the same exception type in both
        return "raises", type(exc)


# (id, module, operator)
LIST_CALLS = [
    ("f", "energy", "f"),
    ("gradient", "energy", "gradient"),
    ("hvp", "energy", "hvp"),
    ("pullback", "field", "pullback"),
    ("jacobian", "field", "jacobian"),
]
PAIRS = [("trace-scalar", "trace-vector"), ("sympy", "trace-vector")]
LIST_MATRIX = [
    (name, module, op, a, b) for name, module, op in LIST_CALLS for a, b in PAIRS
]


@pytest.mark.parametrize(
    ("name", "module", "op", "first", "second"),
    rows(LIST_MATRIX, id_of=lambda r: f"{r[0]}-{r[3]}-vs-{r[4]}"),
)
def test_lists_accepted_or_refused_alike(
    build: Builder, name: str, module: str, op: str, first: str, second: str
) -> None:
    """Nested lists for every array argument: both emissions return the same
    numbers, or both raise the same exception type."""
    args = {
        k: (np.asarray(v).tolist() if np.ndim(v) else v)
        for k, v in _args(module, op).items()
    }
    a = _outcome(lambda: getattr(_module(build, module, first).module, op)(**args))
    b = _outcome(lambda: getattr(_module(build, module, second).module, op)(**args))
    assert a[0] == b[0], (a, b)
    if a[0] == "value":
        np.testing.assert_allclose(a[1], b[1], rtol=1e-13)
    else:
        assert a[1] is b[1], (a, b)
