"""``triangle`` with ``emit = "c"``: the compiled hessian gathers only its
triangle's nonzeros (the loops fill the whole pattern into a buffer of their
own), equal bit for bit to the NumPy emission's selected entries and to the
dense hessian's triangle, and refills a CSR ``out`` of the triangle's pattern."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
import scipy.sparse

from compiled import BuiltConfig

MODULES = {
    # name: (function, input shape, contexts, operators, extra)
    "chained": ("chained", 40, '[{ name = "a", shape = [] }]'),
    "tiny": ("tiny", 3, "[]"),
}
OPERATORS = '["hessian", "value_gradient_and_hessian"]'


def _entry(name: str, suffix: str, emit: str, triangle: str | None) -> str:
    function, n, contexts = MODULES[name]
    return f"""
[[module]]
name = "{name}_{suffix}"
function = "c_triangle_functions:{function}"
backend = "trace"
operators = {OPERATORS}
input = {{ shape = [{n}] }}
contexts = {contexts}
sparse = true
emit = "{emit}"
""" + (f'triangle = "{triangle}"\n' if triangle else "")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    entries = ['[difgen]\noutput_dir = "out"\n']
    for name in MODULES:
        for triangle in ("lower", "upper"):
            entries.append(_entry(name, f"{triangle}_c", "c", triangle))
            entries.append(_entry(name, f"{triangle}_py", "vector", triangle))
        entries.append(_entry(name, "full_c", "c", None))
    return BuiltConfig(tmp_path_factory.mktemp("c_triangle"), "".join(entries))


def _args(name: str) -> tuple[object, ...]:
    n = MODULES[name][1]
    x = np.random.default_rng(7).uniform(-1.0, 2.0, n)
    return (x, 0.7) if name == "chained" else (x,)


def _cut(dense: np.ndarray, triangle: str) -> np.ndarray:
    return np.tril(dense) if triangle == "lower" else np.triu(dense)


@pytest.mark.parametrize("triangle", ["lower", "upper"])
@pytest.mark.parametrize("name", list(MODULES))
def test_the_compiled_triangle_is_the_numpy_one(
    built: BuiltConfig, name: str, triangle: str
) -> None:
    compiled: ModuleType = built.get(f"{name}_{triangle}_c")
    python = built.get(f"{name}_{triangle}_py")
    full = built.get(f"{name}_full_c")
    args = _args(name)
    ours, theirs = compiled.hessian(*args), python.hessian(*args)
    assert isinstance(ours, scipy.sparse.csr_array)
    np.testing.assert_array_equal(ours.indices, theirs.indices)
    np.testing.assert_array_equal(ours.indptr, theirs.indptr)
    assert ours.data.tobytes() == theirs.data.tobytes()  # bit for bit
    # the whole hessian compiled (straight-line C for tiny: its own rounding)
    whole = full.hessian(*args)
    dense = whole.toarray()
    np.testing.assert_allclose(ours.toarray(), _cut(dense, triangle), rtol=1e-14)
    mask = np.zeros(whole.shape, dtype=bool)
    mask[whole.nonzero()] = True
    assert ours.nnz == np.count_nonzero(_cut(mask, triangle))  # the triangle's entries
    rows, cols = compiled.hessian_structure()
    np.testing.assert_array_equal(ours.toarray()[rows, cols], ours.data)
    # the last result of a several-result operator too
    *_, last = compiled.value_gradient_and_hessian(*args)
    assert last.data.tobytes() == theirs.data.tobytes()


@pytest.mark.parametrize("name", list(MODULES))
def test_out_refills_the_triangle(built: BuiltConfig, name: str) -> None:
    compiled = built.get(f"{name}_lower_c")
    args = _args(name)
    x, rest = args[0], args[1:]
    out = compiled.hessian(np.asarray(x) + 0.5, *rest)
    data = out.data
    again = compiled.hessian(*args, out=out)
    assert again is out and out.data is data  # refilled in place
    assert out.data.tobytes() == compiled.hessian(*args).data.tobytes()
    whole = built.get(f"{name}_full_c").hessian(*args)
    with pytest.raises(ValueError, match="out"):
        compiled.hessian(*args, out=whole)  # the whole pattern is not the triangle's


def test_the_c_source_gathers_the_triangle(built: BuiltConfig) -> None:
    source = (built.directory / "out" / "chained_lower_c__c.c").read_text()
    assert "dg_hessian_select" in source and "dg_full" in source
    full = (built.directory / "out" / "chained_full_c__c.c").read_text()
    assert "dg_full" not in full
