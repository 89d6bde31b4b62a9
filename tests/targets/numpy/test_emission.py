"""Parentheses in emitted NumPy code come from each form's slots and each operand's
precedence (difgen.core.expr), so the emitted text always parses as the graph."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from conftest import build_and_import, write_config
from difgen.core.expr import (
    ADD,
    ATOM,
    CMP,
    MUL,
    POW,
    UNARY,
    Expr,
    atom,
    call,
    infix,
    literal,
    negation,
)
from difgen.primitives import PRIMITIVES
from difgen.targets.numpy.epilogue import LastResult, returns

A, B = atom("a"), atom("b")


def form(name: str, *args: Expr, **params: object) -> str:
    """The source of one primitive on operands ``args`` (inputs of shape (2, 3))."""
    avals = [((2, 3), "float64")] * len(args)
    return PRIMITIVES[name].numpy(list(args), params, avals).text


@pytest.mark.parametrize(
    "name,a,b,expected",
    [
        ("sub", atom("a"), Expr("b - c", ADD), "a - (b - c)"),
        ("sub", Expr("a - b", ADD), atom("c"), "a - b - c"),
        ("add", Expr("a * b", MUL), Expr("c * d", MUL), "a * b + c * d"),
        ("mul", Expr("a + b", ADD), atom("c"), "(a + b) * c"),
        ("div", atom("a"), Expr("b * c", MUL), "a / (b * c)"),
        ("mul", literal("-2.0"), atom("x"), "-2.0 * x"),
        ("pow", literal("-2.0"), atom("x"), "(-2.0) ** x"),
        ("pow", Expr("a ** b", POW), atom("c"), "(a ** b) ** c"),
        ("pow", atom("a"), Expr("-b", UNARY), "a ** (-b)"),
        ("matmul", Expr("a @ b", MUL), atom("c"), "a @ b @ c"),
        ("lt", Expr("a + b", ADD), atom("c"), "a + b < c"),
        ("eq", Expr("a < b", CMP), Expr("c > d", CMP), "(a < b) == (c > d)"),
        ("ne", atom("a"), Expr("b <= c", CMP), "a != (b <= c)"),
    ],
)
def test_infix_operands_are_wrapped_by_precedence(
    name: str, a: Expr, b: Expr, expected: str
) -> None:
    assert form(name, a, b) == expected


def test_comparisons_of_comparisons_do_not_chain() -> None:
    """``a < b == c`` would be the chain ``a < b and b == c``: both sides wrap."""
    text = form("eq", Expr("a < b", CMP), Expr("c >= d", CMP))
    tree = ast.parse(text, mode="eval").body
    assert isinstance(tree, ast.Compare) and len(tree.ops) == 1


def test_unary_minus_and_atom_slots() -> None:
    assert negation([Expr("a * b", MUL)], {}, []).text == "-(a * b)"
    assert negation([A], {}, []).text == "-a"
    assert form("transpose", Expr("a + b", ADD), axes=(1, 0)) == "(a + b).T"
    index = (("slice", 1, None, None),)
    assert form("getitem", Expr("-a", UNARY), index=index) == "(-a)[1:]"
    assert form("sin", Expr("a + b", ADD)) == "np.sin(a + b)"


def test_each_form_declares_the_precedence_of_its_result() -> None:
    assert infix("**")([A, B], {}, []).prec == POW
    assert form("neg", A) == "-a" and PRIMITIVES["neg"].numpy([A], {}, []).prec == UNARY
    assert PRIMITIVES["where"].numpy([A, A, B], {}, []).prec == ATOM


def test_call_forms_take_their_operands_as_arguments_only() -> None:
    with pytest.raises(ValueError, match="not a call argument"):
        call("{0}.T")
    with pytest.raises(ValueError, match="not a call argument"):
        call("-{0}")
    assert call("np.linalg.slogdet({0})[1]")([Expr("a + b", ADD)], {}, []).text == (
        "np.linalg.slogdet(a + b)[1]"
    )


def test_an_expr_is_placed_through_a_slot_not_formatted() -> None:
    with pytest.raises(TypeError):
        f"{A}"


def test_shape_aware_forms_see_the_input_avals() -> None:
    """Full reductions and rolled reads: what the old peepholes did, in the form."""
    full = PRIMITIVES["reduce_sum"].numpy([A], {"axes": (0, 1)}, [((2, 3), "float64")])
    assert full.text == "np.add.reduce(a, axis=None)"
    part = PRIMITIVES["reduce_max"].numpy([A], {"axes": (1,)}, [((2, 3), "float64")])
    assert part.text == "np.maximum.reduce(a, axis=1)"


def test_emitted_comparison_of_comparisons_runs(tmp_path: Path) -> None:
    """Regression: the text-scanning parenthesizer emitted ``x < 0.5 == x > 0.3``,
    which NumPy refuses (the truth value of an array is ambiguous)."""
    source = tmp_path / "compare.py"
    source.write_text(
        "import numpy as np\n\n\n"
        "def compare(x):\n"
        "    return np.where((x < 0.5) == (x > 0.3), x, 2.0 * x)\n"
    )
    cfg = write_config(
        tmp_path / "build",
        source,
        "compare",
        (3,),
        ["f"],
        backend="trace",
        emit="vector",
    )
    mod, text = build_and_import(cfg)
    assert "(x < 0.5) == (x > 0.3)" in text
    x = np.array([0.2, 0.4, 0.6])
    np.testing.assert_array_equal(mod.f(x), [0.4, 0.4, 1.2])


def test_one_epilogue_for_both_emissions() -> None:
    """value_and_ results first, the last bound to ``result`` and written into out,
    which is checked only when given."""
    last = LastResult(" = [1.0, 2.0]", "np.array(result)")
    lines = returns(["value", "gradient"], ["v", "g"], last, True, out_shape=(2,))
    assert lines == [
        "value = v",
        "result = [1.0, 2.0]",
        "if out is None:",
        "    return value, np.array(result)",
        "_check_out(out, (2,))",
        "out[...] = result",
        "return value, out",
    ]
    named = returns(["gradient"], ["g"], last, True, (2,), "gradient")
    assert "_check_out(out, (2,), 'gradient: out')" in named
    assert returns(["jvp"], ["t0"], LastResult(" = t0", "result"), False) == [
        "result = t0",
        "return result",
    ]
    assert returns(["value", "jvp"], ["1.0", "t0"], None, False) == ["return 1.0, t0"]
