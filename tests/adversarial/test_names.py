"""Class 1: name hygiene.

A context becomes a parameter of every generated function and a module name becomes
``NAME.py`` in output_dir, so a name that the generated code uses for something
else (a temporary, a hoisted constant, an element of an argument, an imported
module, a builtin) would silently change what the module computes, and a module
named like a library would shadow it. Such names are refused when the config is
loaded, at ``difgen.toml:LINE``, with nothing written; names that do not clash
build and give exact derivatives.
"""

from __future__ import annotations

import numpy as np
import pytest

from difgen import naming

from .adversarial_support import (
    Builder,
    Project,
    assert_refused,
    line_of,
    module_block,
    rows,
)

SOURCE = """
import numpy as np


def f(x, c):
    return np.sum(c * x * x) + np.sum(c * np.sin(x))


def g(x, c, d):
    return np.sum(c * x * x + d * x)
"""

# (context name, phrase of the reason): every row must be refused at config load.
CONTEXT_NAMES = [
    ("K0", "computed at import"),
    ("K1", "computed at import"),
    ("K12", "computed at import"),
    ("C0", "module constants"),
    ("C7", "module constants"),
    ("C0_1", "module constants"),
    ("t0", "temporaries"),
    ("t3", "temporaries"),
    ("t15", "temporaries"),
    ("x_0", "element of the argument 'x'"),
    ("x_2", "element of the argument 'x'"),
    ("x_10", "element of the argument 'x'"),
    ("x_0_1", "element of the argument 'x'"),
    ("dx_0", "element of the argument 'dx'"),
    ("dx_1_2", "element of the argument 'dx'"),
    ("dy_0", "element of the argument 'dy'"),
    ("v_1", "element of the argument 'v'"),
    ("out_0", "element of the argument 'out'"),
    ("x_flat", "elements of the argument 'x'"),
    ("dx_flat", "elements of the argument 'dx'"),
    ("dy_flat", "elements of the argument 'dy'"),
    ("v_flat", "elements of the argument 'v'"),
    ("x", "uses itself"),
    ("dx", "uses itself"),
    ("dy", "uses itself"),
    ("v", "uses itself"),
    ("out", "uses itself"),
    ("value", "uses itself"),
    ("result", "uses itself"),
    ("np", "uses itself"),
    ("math", "uses itself"),
    ("sp", "uses itself"),
    ("INPUT_SHAPE", "uses itself"),
    ("OUTPUT_SHAPE", "uses itself"),
    ("SOURCE_HASH", "uses itself"),
    ("DIFGEN_VERSION", "uses itself"),
    ("NDArray", "uses itself"),
    ("annotations", "uses itself"),
    ("JACOBIAN_INDICES", "sparse index constants"),
    ("JACOBIAN_INDPTR", "sparse index constants"),
    ("HESSIAN_INDICES", "sparse index constants"),
    ("HESSIAN_INDPTR_1", "sparse index constants"),
    ("sum", "builtin"),
    ("abs", "builtin"),
    ("float", "builtin"),
    ("len", "builtin"),
    ("range", "builtin"),
    ("tuple", "builtin"),
    ("print", "builtin"),
    ("max", "builtin"),
    ("lambda", "identifier"),
    ("class", "identifier"),
    ("None", "identifier"),
    ("True", "identifier"),
    ("match", "identifier"),
    ("_", "identifier"),
    ("é", "identifier"),
    ("αβ", "identifier"),
    ("x\u0301", "identifier"),
    ("1x", "identifier"),
    ("a-b", "identifier"),
    ("a b", "identifier"),
    ("a.b", "identifier"),
    ("", "identifier"),
    ("__x", "two underscores"),
    ("__name__", "two underscores"),
    ("__builtins__", "two underscores"),
    # Every operator's name is refused, built or not: a later build that adds the
    # operator must not turn a working config into a broken one.
    ("f", "f"),
    ("hessian", "hessian"),
    ("value_and_gradient", "value_and_gradient"),
    ("gradient", "gradient"),
]


@pytest.mark.parametrize(
    ("name", "phrase"), rows(CONTEXT_NAMES, id_of=lambda r: repr(r[0]))
)
def test_context_name_refused_at_config_line(
    project: Project, name: str, phrase: str
) -> None:
    """``contexts = [{ name = NAME, ... }]`` is refused at the line of the contexts
    (in a module whose operators take every seed and ``out``)."""
    project.source(SOURCE)
    text = project.config(
        module_block(
            operators=[
                "value_and_gradient",
                "hessian",
                "hvp",
                "pushforward",
                "pullback",
            ],
            contexts=[(name, (3,))],
        )
    )
    before = project.snapshot()
    result = project.build()
    line = line_of(text, "contexts = ")
    assert_refused(
        result, f"difgen.toml:{line}:", phrase, before=before, after=project.snapshot()
    )
    assert "this is a difgen bug" not in result.err


@pytest.mark.parametrize(
    ("name", "operators"),
    [
        ("v", ["gradient", "hessian"]),  # trust-constr's hess(x, v)
        ("dx", ["gradient", "hvp"]),
        ("dy", ["gradient", "pushforward"]),
        ("out", ["pushforward", "pullback"]),
    ],
)
def test_seed_names_are_free_where_no_operator_takes_them(
    project: Project, name: str, operators: list[str]
) -> None:
    """A seed's or ``out``'s name is reserved only in a module with an operator
    taking it (issue 23): the module builds, and its operators take the context."""
    project.source(SOURCE)
    project.config(module_block(operators=operators, contexts=[(name, (3,))]))
    result = project.build()
    assert result.status == 0, result.err
    assert "wrote" in result.out


def test_context_element_of_another_context_refused(project: Project) -> None:
    """``c_0`` is the name of the first element of context ``c``."""
    project.source(SOURCE)
    text = project.config(
        module_block(function="fn.py:g", contexts=[("c", (3,)), ("c_0", (3,))])
    )
    before = project.snapshot()
    result = project.build()
    assert_refused(
        result,
        f"difgen.toml:{line_of(text, 'contexts = ')}:",
        "element of the argument 'c'",
        before=before,
        after=project.snapshot(),
    )


def test_context_flat_list_of_another_context_refused(project: Project) -> None:
    """``p_flat`` names the element list of context ``p``."""
    project.source(SOURCE)
    text = project.config(
        module_block(function="fn.py:g", contexts=[("p", (3,)), ("p_flat", (3,))])
    )
    before = project.snapshot()
    result = project.build()
    assert_refused(
        result,
        f"difgen.toml:{line_of(text, 'contexts = ')}:",
        "elements of the argument 'p'",
        before=before,
        after=project.snapshot(),
    )


def test_duplicate_context_refused(project: Project) -> None:
    project.source(SOURCE)
    text = project.config(
        module_block(function="fn.py:g", contexts=[("p", (3,)), ("p", (3,))])
    )
    result = project.build()
    assert_refused(result, f"difgen.toml:{line_of(text, 'contexts = ')}:", "duplicate")


# (module name, phrase): ``NAME.py`` would shadow an import or is no identifier.
MODULE_NAMES = [
    ("os", "standard-library"),
    ("sys", "standard-library"),
    ("math", "standard-library"),
    ("json", "standard-library"),
    ("typing", "standard-library"),
    ("collections", "standard-library"),
    ("re", "standard-library"),
    ("types", "standard-library"),
    ("random", "standard-library"),
    ("abc", "standard-library"),
    ("enum", "standard-library"),
    ("__future__", "standard-library"),
    ("numpy", "imports"),
    ("scipy", "imports"),
    ("sympy", "imports"),
    ("difgen", "imports"),
    ("jinja2", "imports"),
    ("black", "imports"),
    ("my-mod", "identifier"),
    ("class", "identifier"),
    ("1mod", "identifier"),
    ("mod.sub", "identifier"),
    ("módulo", "identifier"),
    ("", "identifier"),
    ("mod py", "identifier"),
]


@pytest.mark.parametrize(
    ("name", "phrase"), rows(MODULE_NAMES, id_of=lambda r: repr(r[0]))
)
def test_module_name_refused_at_config_line(
    project: Project, name: str, phrase: str
) -> None:
    """``name = NAME`` is refused at its own line before anything is traced."""
    project.source(SOURCE)
    text = project.config(module_block(name=name, contexts=[("c", (3,))]))
    before = project.snapshot()
    result = project.build()
    line = line_of(text, "name = ")
    assert_refused(
        result, f"difgen.toml:{line}:", phrase, before=before, after=project.snapshot()
    )


def test_second_module_name_refused_at_its_line(project: Project) -> None:
    """The line is that of the offending module, not of the first one."""
    project.source(SOURCE)
    text = project.config(
        module_block(name="good", contexts=[("c", (3,))]),
        module_block(name="numpy", contexts=[("c", (3,))]),
    )
    before = project.snapshot()
    result = project.build()
    line = line_of(text, 'name = "numpy"')
    assert_refused(
        result,
        f"difgen.toml:{line}:",
        "imports",
        before=before,
        after=project.snapshot(),
    )


# Names that look dangerous but clash with nothing: they build, and the derivatives
# are exact (the names really are passed through as the user's contexts).
ACCEPTED = [
    ("K", "sympy"),
    ("k0", "trace"),
    ("T0", "sympy"),
    ("t_0", "trace"),
    ("x0", "sympy"),
    ("xflat", "trace"),
    ("C", "sympy"),
    ("values", "trace"),
    ("numpy", "sympy"),
    ("scipy", "trace"),
    ("_c", "sympy"),
    ("Jacobian_indices", "sympy"),
    ("x_a", "trace"),
]


@pytest.mark.parametrize(("name", "backend"), rows(ACCEPTED))
def test_harmless_context_name_builds_exact_derivatives(
    build: Builder, name: str, backend: str
) -> None:
    """value_and_gradient, hessian and hvp of ``sum(c x^2) + sum(c sin(x))`` with
    the context named NAME equal the hand-computed derivatives."""
    source = SOURCE.replace("(x, c)", f"(x, {name})").replace("(c * ", f"({name} * ")
    built = build(
        source,
        "f",
        (3,),
        ("value_and_gradient", "hessian", "hvp"),
        contexts=[(name, (3,))],
        backend=backend,
    )
    x = np.array([0.3, -1.2, 2.0])
    c = np.array([1.5, -0.5, 2.0])
    gradient = 2 * c * x + c * np.cos(x)
    hessian = np.diag(2 * c - c * np.sin(x))
    module = built.module
    value, got = module.value_and_gradient(x, **{name: c})
    np.testing.assert_allclose(
        value, np.sum(c * x * x) + np.sum(c * np.sin(x)), rtol=1e-14
    )
    np.testing.assert_allclose(got, gradient, rtol=1e-13)
    np.testing.assert_allclose(
        module.hessian(x, **{name: c}), hessian, rtol=1e-13, atol=1e-15
    )
    v = np.array([1.0, 2.0, -1.0])
    np.testing.assert_allclose(
        module.hvp(x, v, **{name: c}), hessian @ v, rtol=1e-13, atol=1e-15
    )


# (id, text of a rendered module, phrase of the clash or None): the re-check every
# rendered module goes through, so a clash the config check missed is an internal
# error, never a silently wrong module.
RENDERED = [
    (
        "param_is_constant",
        "K0 = 1\n\n\ndef f(x, K0):\n    return x + K0\n",
        "module-level",
    ),
    (
        "param_is_function",
        "def f(x):\n    return x\n\n\ndef g(x, f):\n    return f\n",
        "module-level",
    ),
    (
        "param_is_import",
        "import numpy as np\n\n\ndef f(x, np):\n    return x\n",
        "module-level",
    ),
    ("param_assigned", "def f(x, t0):\n    t0 = x * 2\n    return t0\n", "assigned"),
    (
        "param_is_keyword_only",
        "C0 = 2.0\n\n\ndef f(x, *, C0):\n    return x\n",
        "module-level",
    ),
    ("clean", "C0 = 2.0\n\n\ndef f(x, p):\n    t0 = x * C0\n    return t0 + p\n", None),
]


@pytest.mark.parametrize(("name", "text", "phrase"), rows(RENDERED))
def test_rendered_module_recheck(name: str, text: str, phrase: str | None) -> None:
    if phrase is None:
        naming.check_module(text)
        return
    with pytest.raises(naming.NameClash, match=phrase):
        naming.check_module(text)
