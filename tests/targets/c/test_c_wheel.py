"""A wheel that carries an ``emit = "c"`` extension, end to end, offline.

The sample package (``tests/integration_package``, configured from the README's
snippets) gets a second module with ``emit = "c"`` and ``points = true``. pip
builds the wheel with the hatchling hook (``--no-build-isolation``, no index);
the wheel must hold the compiled extension and be tagged for this platform.
Installed into a fresh environment that has NumPy but not difgen, the module must
load its extension (``COMPILED is True``) and give what its own Python fallback
gives: bit for bit for the one-point operators, to ``rtol = 1e-10`` for the
points variants (vectorized NumPy in the fallback).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from difgen.targets.c.compiling import EXTENSION_SUFFIX
from test_integrations import (  # noqa: F401 (numpy_only is a fixture)
    build_wheel,
    numpy_only,
    run_installed,
    sample_project,
)

C_MODULE = """
[[tool.difgen.module]]
name = "energy_c"
function = "sampledf.model:energy"
backend = "sympy"
emit = "c"
points = true
operators = ["gradient", "value_and_gradient", "hvp"]
input = { shape = [3] }
"""

CHECK = """\
import importlib.util, os, shutil, sys, tempfile
import numpy as np
import sampledf.energy_c as m

assert "site-packages" in m.__file__, m.__file__
assert importlib.util.find_spec("difgen") is None, "difgen is visible"
assert m.COMPILED is True, m.C_FALLBACK_REASON
assert type(m.gradient).__name__ == "builtin_function_or_method"
lone = tempfile.mkdtemp()
shutil.copy(m.__file__, lone)
os.environ["DIFGEN_QUIET_FALLBACK"] = "1"
spec = importlib.util.spec_from_file_location("energy_c_fallback", lone + "/energy_c.py")
py = importlib.util.module_from_spec(spec)
spec.loader.exec_module(py)
assert py.COMPILED is False
rng = np.random.default_rng(0)
X, V = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
X[0] = [np.nan, np.inf, 0.0]
for x, v in zip(X, V):
    for a, b in [(m.gradient(x), py.gradient(x)), (m.hvp(x, v), py.hvp(x, v)),
                 (m.value_and_gradient(x)[0], py.value_and_gradient(x)[0])]:
        np.testing.assert_array_equal(a, b, strict=True)
for a, b in [(m.gradient_points(X[1:]), py.gradient_points(X[1:])),
             (m.hvp_points(X[1:], V[1:]), py.hvp_points(X[1:], V[1:]))]:
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
np.testing.assert_array_equal(m.gradient_points(X), [m.gradient(x) for x in X])
print("ok")
"""


def test_wheel_carries_the_extension(
    tmp_path: Path, numpy_only: Path  # noqa: F811 (the fixture)
) -> None:
    project = sample_project(tmp_path, "hatchling")
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + C_MODULE)
    wheel = build_wheel(project, tmp_path)
    assert not wheel.name.endswith("-none-any.whl"), wheel.name  # platform-specific
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert f"sampledf/energy_c__c{EXTENSION_SUFFIX}" in names, names
    assert "sampledf/energy_c.py" in names and "sampledf/energy_c__c.c" in names

    assert run_installed(wheel, tmp_path, numpy_only, CHECK) == "ok\n"
