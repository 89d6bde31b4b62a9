"""The C runtime's sections (``templates/c/*.c``, :mod:`difgen.targets.c.runtime`):
declared dependencies match the code, and a C file carries what it calls."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import difgen
from difgen import floats, naming
from difgen.targets.c import compiling, runtime


def _names(sections: list[runtime.Section]) -> list[str]:
    return [s.name for s in sections]


def test_sections_declare_exactly_what_they_call() -> None:
    """Every section requires the sections whose names its code uses, and
    nothing its code does not use except shared comments: a missing
    requirement would be a compile error in some file, a spare one dead code."""
    for s in runtime.sections():
        used = runtime.uses(s.text) - {s.name}
        named = {r for r in s.requires if any(t.defines for t in runtime.closure([r]))}
        assert used <= set(_names(runtime.closure(s.requires))), s.name
        assert named <= used, s.name


def test_requirements_come_first_and_names_are_unique() -> None:
    order = _names(list(runtime.sections()))
    assert len(order) == len(set(order))
    for s in runtime.sections():
        assert all(order.index(r) < order.index(s.name) for r in s.requires), s.name
    providers = [n for s in runtime.sections() for n in s.defines]
    assert len(providers) == len(set(providers))


def test_the_helpers_of_floats_are_sections() -> None:
    """Each C definition of a floats helper is its own section, so a file that
    calls ``_sin`` carries ``#define _sin sin`` and not the other 33."""
    assert runtime.helpers() <= set(floats.NAMES)
    for name in runtime.helpers():
        (section,) = runtime.closure([name])[-1:]
        assert section.defines == {name}


def test_uses_skips_comments_and_literals() -> None:
    code = '/* dg_new */ // dg_tuple\nx = "dg_shape(" ; c = \'"\'; dg_fill(r, 1, 0.0);'
    assert runtime.uses(code) == {"dg_fill"}


def test_source_is_the_closure_in_file_order() -> None:
    alone = runtime.source("")
    assert alone == runtime.closure([runtime.PROLOGUE])[0].text + "\n"
    text = runtime.source("dg_result(NULL, out, 1, dims, &r); _sin(x);")
    chosen = runtime.closure([runtime.PROLOGUE, "dg_result", "_sin"])
    assert _names(chosen) == [
        "module-prologue",
        "numpy-semantics",
        "_sin",
        "dg_same_shape",
        "dg_new",
        "dg_recycled",
        "dg_out_direct",
        "dg_result",
    ]
    positions = [text.index(s.text) for s in chosen]
    assert positions == sorted(positions)
    assert "dg_csr_fast" not in text and "_cos" not in text
    assert runtime.source("dg_result(); _sin(x);") == text  # deterministic bytes


def test_marker_grammar() -> None:
    text = (
        "header\n/*@ a-note */\n/* shared */\n"
        "/*@ dg_x defines dg_y requires a-note */\nint dg_x, dg_y;\n"
    )
    note, x = runtime.parse(text)
    assert (note.name, note.defines, note.text) == (
        "a-note",
        frozenset(),
        "/* shared */",
    )
    assert x.defines == {"dg_x", "dg_y"} and x.requires == ("a-note",)
    assert x.text == "int dg_x, dg_y;"
    with pytest.raises(ValueError, match="before defines/requires"):
        runtime.parse("/*@ dg_x dg_y */\n")
    with pytest.raises(KeyError, match="no section"):
        runtime.closure(["dg_nothing"])


def test_generated_files_carry_no_unused_runtime(tmp_path: Path) -> None:
    """A small gradient, with and without points variants: every static function
    of the runtime in the file is called (-Werror=unused-function), and the file
    is a fraction of the whole runtime."""
    (tmp_path / "fn.py").write_text(
        "import numpy as np\n\ndef f(x):\n    return np.sum(np.sin(x) * x)\n"
    )
    modules = ""
    for name, points in (("small", "false"), ("small_points", "true")):
        modules += (
            f'[[module]]\nname = "{name}"\nfunction = "fn.py:f"\nbackend = "sympy"\n'
            f'emit = "c"\npoints = {points}\noperators = ["gradient"]\n'
            "input = { shape = [3] }\n"
        )
    (tmp_path / "difgen.toml").write_text('[difgen]\noutput_dir = "out"\n' + modules)
    difgen.build(tmp_path / "difgen.toml")
    whole = sum(len(s.text) for s in runtime.sections())
    for name in ("small", "small_points"):
        source = tmp_path / "out" / f"{name}{naming.C_SUFFIX}.c"
        text = source.read_text()
        assert ("dg_points(" in text) == (name == "small_points")
        assert "dg_csr_fast" not in text and "_logaddexp" not in text
        assert len(text) < whole
        flags = [*compiling.CFLAGS, "-Wall", "-Werror=unused-function"]
        includes = [f"-I{d}" for d in compiling.include_dirs()]
        command = [*compiling.compiler(), *flags, *includes, "-fsyntax-only"]
        result = subprocess.run(
            [*command, str(source)], capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stderr
