"""Function multiversioning of operators with large loops (targets/c/loops.py,
``SIMD_CLONES``): an AVX2 and an AVX-512 version beside the baseline, chosen at
load time, each computing the same IEEE operations (no FMA contraction).

Each version is compiled on its own here (the macro defined on the command
line to one ``target``) and run on this CPU: every one gives the baseline's
bits. A version this CPU cannot run is not built (it would fault)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import difgen
from conftest import SUPPORT, import_file
from difgen.targets.c import compiling
from difgen.targets.c.loops import CLONES_FROM

MODULES = {  # name: (function, input, X, y)
    "large_c": ("logistic", [50], [3000, 50], [3000]),
    "wide_c": ("scaled", [4], [20000, 4], [20000]),  # no product: 80000 wide
    "tanh_c": ("least_squares", [20], [5000, 20], [5000]),  # BLAS, then 5000
    "small_c": ("logistic", [5], [40, 5], [40]),
}


def _config() -> str:
    parts = ['[difgen]\noutput_dir = "out"\n']
    for name, (function, shape, xs, ys) in MODULES.items():
        parts.append(
            f'[[module]]\nname = "{name}"\n'
            f'function = "c_row_pass_functions.py:{function}"\n'
            f'backend = "trace"\nemit = "c"\noperators = ["gradient"]\n'
            f"input = {{ shape = {shape} }}\n"
            f'contexts = [{{ name = "X", shape = {xs} }}, '
            f'{{ name = "y", shape = {ys} }}]\n'
        )
    return "\n".join(parts)


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("simd_clones")
    shutil.copy(SUPPORT / "c_row_pass_functions.py", directory)
    (directory / "difgen.toml").write_text(_config())
    difgen.build(directory / "difgen.toml", compile=True)
    return directory / "out"


OPERATOR = {"large_c": "gradient", "wide_c": "f"}  # the multiversioned one


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


TARGETS = [t for t in ("avx2", "avx512f") if t in _cpu_flags()] + ["default"]


def _args(name: str) -> tuple[np.ndarray, ...]:
    _, shape, xs, ys = MODULES[name]
    rng = np.random.default_rng(11)
    return (
        rng.standard_normal(shape) * 0.3,
        rng.standard_normal(xs),
        (rng.uniform(size=ys) < 0.5).astype(float),
    )


def test_only_operators_with_large_loops_are_multiversioned(out: Path) -> None:
    clones = "DG_SIMD_CLONES\nstatic PyObject *\ndg_op_gradient("
    assert 5000 < CLONES_FROM <= 80000 < 3000 * 50  # widest loop nests
    assert clones in (out / "large_c__c.c").read_text()
    # the wide module's C is its f (its gradient's loops: 4 columns)
    assert (
        "DG_SIMD_CLONES\nstatic PyObject *\ndg_op_f("
        in (out / "wide_c__c.c").read_text()
    )
    assert "SIMD_CLONES" not in (out / "tanh_c__c.c").read_text()
    assert "SIMD_CLONES" not in (out / "small_c__c.c").read_text()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["large_c", "wide_c"])
def test_every_simd_version_gives_the_baselines_bits(
    out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, target: str
) -> None:
    """The baseline is the module as built without the clones macro's
    attribute; each version is the same C with one ``target`` only."""
    args = _args(name)
    results = {}
    for label, attribute in (("baseline", ""), (target, f'target("{target}")')):
        directory = tmp_path / label
        directory.mkdir()
        for path in out.glob(f"{name}*"):
            if not path.name.endswith(".so"):
                shutil.copy(path, directory)
        macro = f"-DDG_SIMD_CLONES=__attribute__(({attribute}))" if attribute else ""
        flags = (*compiling.CFLAGS, macro) if macro else compiling.CFLAGS
        monkeypatch.setattr(compiling, "CFLAGS", flags)
        if not macro:
            monkeypatch.setattr(compiling, "CFLAGS", (*flags, "-DDG_SIMD_CLONES="))
        compiling.compile_module(directory, name)
        module = import_file(directory / f"{name}.py")
        assert module.COMPILED, module.C_FALLBACK_REASON
        results[label] = getattr(module, OPERATOR[name])(*args)
    np.testing.assert_array_equal(results[target], results["baseline"])
    built = import_file(out / f"{name}.py")
    np.testing.assert_array_equal(
        results["baseline"], getattr(built, OPERATOR[name])(*args)
    )


SHIFTED = 70000  # one loop over x computed on demand: past CLONES_FROM


@pytest.fixture(scope="module")
def shifted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Rosenbrock gradient and hvp, each a result computed at its own
    elements (its shifted slices' adjoints gathered in the one loop)."""
    directory = tmp_path_factory.mktemp("simd_clones_shifted")
    shutil.copy(SUPPORT / "c_shifted_functions.py", directory)
    (directory / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "out"\n\n[[module]]\nname = "shifted_c"\n'
        'function = "c_shifted_functions.py:rosenbrock"\nbackend = "trace"\n'
        'emit = "c"\noperators = ["gradient", "hvp"]\n'
        f"input = {{ shape = [{SHIFTED}] }}\n"
    )
    difgen.build(directory / "difgen.toml", compile=True)
    return directory / "out"


def _shifted_args() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    x = rng.uniform(-1.5, 1.5, SHIFTED)
    v = rng.standard_normal(SHIFTED)
    x[[0, 1, 7, 8, 1000, SHIFTED - 1]] = [np.nan, np.inf, -np.inf, -0.0, 1e200, 1e-310]
    v[[3, 4, SHIFTED - 2]] = [np.inf, np.nan, -0.0]
    return x, v


def test_results_computed_on_demand_count_as_large_loops(shifted: Path) -> None:
    """Their loops are no fused loop nest of the plan, yet one loop over 70000
    elements: the gradient and the hvp carry the clones too."""
    text = (shifted / "shifted_c__c.c").read_text()
    for op in ("f", "gradient", "hvp"):
        assert f"DG_SIMD_CLONES\nstatic PyObject *\ndg_op_{op}(" in text
    assert "computed at its 70000 elements only" in text  # on demand, not moved


@pytest.mark.parametrize("target", TARGETS)
def test_every_simd_version_of_a_shifted_result_gives_the_baselines_bits(
    shifted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    x, v = _shifted_args()
    results = {}
    for label, attribute in (("baseline", ""), (target, f'target("{target}")')):
        directory = tmp_path / label
        directory.mkdir()
        for path in shifted.glob("shifted_c*"):
            if not path.name.endswith(".so"):
                shutil.copy(path, directory)
        macro = f"-DDG_SIMD_CLONES=__attribute__(({attribute}))"
        monkeypatch.setattr(compiling, "CFLAGS", (*compiling.CFLAGS, macro))
        compiling.compile_module(directory, "shifted_c")
        monkeypatch.undo()
        module = import_file(directory / "shifted_c.py")
        assert module.COMPILED, module.C_FALLBACK_REASON
        results[label] = (module.gradient(x), module.hvp(x, v))
    for got, want in zip(results[target], results["baseline"]):
        assert got.view(np.int64).tolist() == want.view(np.int64).tolist()
    built = import_file(shifted / "shifted_c.py")
    for got, want in zip((built.gradient(x), built.hvp(x, v)), results["baseline"]):
        assert got.view(np.int64).tolist() == want.view(np.int64).tolist()
