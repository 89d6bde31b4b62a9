"""The C runtime's sections (``templates/c/*.c``, :mod:`difgen.targets.c.runtime`):
declared dependencies match the code, and a C file carries what it calls."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any

import pytest

import difgen
from difgen import floats, naming, pipeline
from difgen.config import load_config
from difgen.load import load_function
from difgen.targets.c import compiling, runtime
from difgen.targets.c import extension as c_extension
from difgen.targets.parts import Function

ROOT = Path(__file__).resolve().parents[3]


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
    alone = runtime.source([])
    assert alone == runtime.closure([runtime.PROLOGUE])[0].text + "\n"
    text = runtime.source(["dg_result", "_sin"])
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
    assert runtime.source(["_sin", "dg_result", "_sin"]) == text  # same bytes
    assert runtime.source(["dg_slots"]) == runtime.source(["dg_recycled"])
    with pytest.raises(KeyError, match="nothing defines dg_nothing"):
        runtime.source(["dg_nothing"])


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


def _reported_and_printed(
    config: Path, points: bool, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[str, frozenset[str], frozenset[str]]]:
    """(module, sections of the names the printers reported, sections the printed
    functions' text uses) of every ``emit = "c"`` module of ``config``."""
    seen: list[list[Function]] = []
    render = c_extension.render_c_module

    def recording(spec: Any, functions: list[Function], *args: Any) -> str:
        seen.append(functions)
        return render(spec, functions, *args)

    # the pipeline imports the C target when a build emits C, and calls it there
    monkeypatch.setattr(c_extension, "render_c_module", recording)
    cfg = load_config(config)
    found = []
    for spec in cfg.modules:
        if spec.emit != "c":
            continue
        if points and spec.sparse:
            continue  # refused by the config: a CSR result has no points axis
        spec = dataclasses.replace(spec, points=points)
        seen.clear()
        pipeline.generate_files(spec, cfg, load_function(spec))
        (functions,) = seen
        reported = {"dg_bind"}.union(*(f.native_runtime for f in functions))
        printed = "\n".join(f.native for f in functions)
        found.append(
            (
                spec.name,
                runtime.providers(reported),
                runtime.uses(printed) | runtime.providers({"dg_bind"}),
            )
        )
    return found


_MORE = """
import numpy as np

def scalar(x, c):
    return np.sum(np.maximum(x, 0.5) ** 2 * c) + np.max(np.sin(x) / x)

def vector(x):
    return np.concatenate([x[1:] * x[:-1], [np.exp(x[0])]])
"""


def _more_config(tmp_path: Path) -> Path:
    """Modules the benchmarks lack: tuples of results, scalar contexts, extrema
    and helpers in loops, sparse tuples, on both printers."""
    (tmp_path / "more.py").write_text(_MORE)
    modules = ""
    for backend, n in (("sympy", 3), ("trace", 3), ("trace", 300)):
        common = f'backend = "{backend}"\nemit = "c"\ninput = {{ shape = [{n}] }}\n'
        modules += (
            f'[[module]]\nname = "scalar_{backend}_{n}"\n'
            f'function = "more.py:scalar"\n{common}'
            'operators = ["value_and_gradient", "hessian", "hvp"]\n'
            'contexts = [{ name = "c", shape = [] }]\n'
            f'[[module]]\nname = "vector_{backend}_{n}"\n'
            f'function = "more.py:vector"\n{common}'
            'operators = ["value_and_jacobian", "jacobian"]\nsparse = true\n'
        )
    (tmp_path / "difgen.toml").write_text('[difgen]\noutput_dir = "out"\n' + modules)
    return tmp_path / "difgen.toml"


@pytest.mark.parametrize("points", [False, True])
def test_printers_report_every_runtime_name_they_print(
    points: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The C file's runtime is chosen from what the printers report, never from
    its text: so for every compiled module of the benchmarks (straight-line,
    loops, sparse with a CSR ``out``; tuples of results and scalar contexts
    besides; and each again with points variants) the
    runtime names its printed functions use (read here, in a test, off the text)
    are exactly the names reported. A name printed and not reported would be a
    missing definition; one reported and not printed, dead code."""
    found = _reported_and_printed(
        ROOT / "benchmarks" / "difgen.toml", points, monkeypatch
    )
    assert len(found) >= 9  # 10, less the sparse one with points
    found += _reported_and_printed(_more_config(tmp_path), points, monkeypatch)
    for name, reported, printed in found:
        assert reported == printed, (name, sorted(reported ^ printed))
