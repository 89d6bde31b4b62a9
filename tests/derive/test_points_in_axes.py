"""Points over some arguments only (``input.per_point = false``, JAX's ``in_axes``).

``gradient_points(theta, X, y)`` with ``theta`` shared and ``X``, ``y`` per point is
the per-example gradient: it must equal ``jax.vmap(jax.grad(f), in_axes=(None, 0,
0))`` at 1e-12, on both backends, without tiling ``theta``; the jacobian,
pushforward and hvp variants likewise; int64 labels and bool masks per point are
taken in their dtype; and the checks refuse mismatched numbers of points naming
both arguments, take zero points, and a config in which no argument carries the
points is refused at the config file.
"""

from __future__ import annotations

import inspect
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import difgen
from conftest import build_and_import
from difgen.config import load_config
from difgen.errors import ConfigError
from in_axes_cases import (
    CASES,
    SOURCE,
    SYMPY,
    TOLERANCE,
    arguments,
    jax_module,
    jax_reference,
    under_jax,
    write_config,
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Any]:
    cache: dict[tuple[str, str], tuple[ModuleType, str]] = {}

    def get(name: str, backend: str) -> tuple[ModuleType, str]:
        if (name, backend) not in cache:
            xs, contexts, operators = CASES[name]
            path = write_config(
                tmp_path_factory.mktemp(f"{name}_{backend}"),
                name,
                xs,
                contexts,
                operators,
                backend,
            )
            cache[name, backend] = build_and_import(path)
        return cache[name, backend]

    return get


def _backends(name: str) -> list[str]:
    return ["sympy", "trace"] if name in SYMPY else ["trace"]


PAIRS = [(n, b, op) for n in CASES for b in _backends(n) for op in CASES[n][2]]


@pytest.mark.parametrize(("name", "backend", "operator"), PAIRS)
@pytest.mark.parametrize("k", [1, 7, 5000])
def test_per_example_operators_equal_jax_vmap(
    built: Any, name: str, backend: str, operator: str, k: int
) -> None:
    module, _ = built(name, backend)
    args = arguments(name, k)
    theta, *data = args
    rng = np.random.default_rng(1)
    seed = None
    if operator in ("hvp", "pushforward"):
        seed = rng.normal(size=(k, *theta.shape))
    elif operator == "pullback":
        seed = rng.normal(size=(k, 2))
    if operator == "value_and_gradient":
        value, got = module.value_and_gradient_points(*args)
        value_ref = jax_module().vmap(under_jax(name), in_axes=(None, 0, 0))(*args)
        np.testing.assert_allclose(value, value_ref, rtol=TOLERANCE, atol=TOLERANCE)
        want = jax_reference(name, "gradient", args, None)
    else:
        variant = getattr(module, f"{operator}_points")
        got = variant(theta, seed, *data) if seed is not None else variant(*args)
        want = jax_reference(name, operator, args, seed)
    assert got.shape == (k, *np.shape(want)[1:])
    np.testing.assert_allclose(got, want, rtol=TOLERANCE, atol=TOLERANCE)


@pytest.mark.parametrize("name", list(CASES))
def test_rows_equal_the_one_point_operator(built: Any, name: str) -> None:
    """Row i is the one-point operator at the shared theta and point i's data."""
    module, _ = built(name, "trace")
    args = arguments(name, 6, seed=3)
    theta, *data = args
    rows = module.gradient_points(*args) if hasattr(module, "gradient") else None
    if rows is None:
        rows = module.jacobian_points(*args)
        one = module.jacobian
    else:
        one = module.gradient
    for i in range(6):
        point = [d[i] if d[i].ndim else d[i].item() for d in data]
        np.testing.assert_allclose(rows[i], one(theta, *point), rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("name", ["logistic", "cross_entropy"])
def test_theta_is_not_tiled(built: Any, name: str) -> None:
    """The points variant takes theta of its one-point shape, and no Python loop
    runs over the points: its code is one vectorized block."""
    module, _ = built(name, "trace")
    params = inspect.signature(module.gradient_points).parameters
    assert list(params) == ["x", *(c for c, _, _ in CASES[name][1]), "out"]
    assert params["out"].default is None
    assert "Shared by every point: x." in module.gradient_points.__doc__
    block = inspect.getsource(module._gradient_points_block)
    assert "for " not in block
    k = 3
    args = arguments(name, k)
    with pytest.raises(ValueError, match="gradient_points: x: expected shape"):
        module.gradient_points(np.tile(args[0], (k, 1)), *args[1:])


@pytest.mark.parametrize("name", list(CASES))
def test_zero_points(built: Any, name: str) -> None:
    module, _ = built(name, "trace")
    args = arguments(name, 0)
    op = CASES[name][2][0]
    if op == "jacobian":
        assert module.jacobian_points(*args).shape == (0, 2, 6)
    else:
        assert module.gradient_points(*args).shape == (0, *args[0].shape)


@pytest.mark.parametrize("name", ["logistic", "cross_entropy", "masked"])
def test_mismatched_points_name_both_arguments(built: Any, name: str) -> None:
    module, _ = built(name, "trace")
    theta, first, second = arguments(name, 5)
    a, b = (c for c, _, _ in CASES[name][1])
    with pytest.raises(ValueError) as info:
        module.gradient_points(theta, first, second[:3])
    message = str(info.value)
    assert f"gradient_points: {b}:" in message and f"but {a} has 5" in message
    assert "3 points" in message


def test_hvp_seed_sets_the_number_of_points(built: Any) -> None:
    """With x shared, the seed is the first per-point argument of hvp_points: a
    context with another number of points is named against it."""
    module, _ = built("logistic", "trace")
    theta, X, y = arguments("logistic", 5)
    with pytest.raises(ValueError, match=r"hvp_points: X: has 4 points .*but v has 5"):
        module.hvp_points(theta, np.ones((5, 3)), X[:4], y)


def test_labels_are_checked_per_point(built: Any) -> None:
    module, _ = built("cross_entropy", "trace")
    theta, X, y = arguments("cross_entropy", 5)
    bad = y.copy()
    bad[3] = 3
    with pytest.raises(IndexError, match="index 3 is out of bounds"):
        module.gradient_points(theta, X, bad)
    with pytest.raises(TypeError, match="gradient_points: y: expected int64"):
        module.gradient_points(theta, X, y.astype(np.float64))
    # other integer types convert, as for a shared int context
    np.testing.assert_array_equal(
        module.gradient_points(theta, X, y.astype(np.int32)),
        module.gradient_points(theta, X, y),
    )


def test_masks_are_bool_per_point(built: Any) -> None:
    module, _ = built("masked", "trace")
    theta, X, mask = arguments("masked", 4)
    with pytest.raises(TypeError, match="gradient_points: mask: expected bool"):
        module.gradient_points(theta, X, mask.astype(np.int64))


def test_x_shared_and_one_float_per_point(tmp_path: Path) -> None:
    """A scalar weight is the only per-point argument: it sets the points."""
    path = write_config(tmp_path, "weighted", [3], [("w", [], "float64")], ["gradient"])
    module, _ = build_and_import(path)
    theta = np.array([0.3, -1.2, 2.0])
    w = np.array([1.0, -2.0, 0.5, 0.0])
    want = w[:, None] * 2.0 * np.sin(theta) * np.cos(theta)
    np.testing.assert_allclose(module.gradient_points(theta, w), want, rtol=1e-15)


def test_no_argument_with_points_is_refused(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        "logistic",
        *CASES["logistic"][:2],
        ["gradient"],
        context_per_point=False,
    )
    with pytest.raises(ConfigError, match="no argument carries the points axis"):
        load_config(path)


def test_input_per_point_needs_points(tmp_path: Path) -> None:
    path = write_config(
        tmp_path, "logistic", *CASES["logistic"][:2], ["gradient"], points=False
    )
    with pytest.raises(ConfigError, match="applies to the points variants only"):
        load_config(path)


def test_input_per_point_must_be_a_bool(tmp_path: Path) -> None:
    path = write_config(tmp_path, "logistic", *CASES["logistic"][:2], ["gradient"])
    path.write_text(
        path.read_text().replace("per_point = false }", 'per_point = "no" }', 1)
    )
    with pytest.raises(ConfigError, match=r"'input\.per_point' must be true or false"):
        load_config(path)


def test_default_keeps_x_per_point(tmp_path: Path) -> None:
    """``per_point = true`` on the input is the default: the same module."""
    path = write_config(
        tmp_path / "a", "logistic", *CASES["logistic"][:2], ["gradient"],
        input_per_point=True,
    )  # fmt: skip
    text = path.read_text().replace(", per_point = true }", " }", 1)
    other = tmp_path / "b"
    other.mkdir()
    shutil.copy(SOURCE, other / SOURCE.name)
    (other / "difgen.toml").write_text(text)
    assert build_and_import(path)[1] == build_and_import(other / "difgen.toml")[1]


@pytest.mark.parametrize("name", ["logistic", "cross_entropy", "masked"])
def test_difgen_verify_checks_the_variants(tmp_path: Path, name: str) -> None:
    """``difgen verify`` calls each variant with x shared and data per point in
    its dtype (a scalar int64 label as an int), against the one-point loop."""
    xs, contexts, operators = CASES[name]
    path = write_config(tmp_path, name, xs, contexts, operators)
    difgen.build(path)
    result = difgen.verify(path)
    checked = {op.operator for m in result.modules for op in m.operators}
    assert {f"{op}_points" for op in operators} <= checked
    assert result.ok, [
        (op.operator, op.worst)
        for m in result.modules
        for op in m.operators
        if not op.passed
    ]


def test_fingerprint_keeps_the_default_and_tells_shared_x() -> None:
    """A module at the default (x per point) keeps its fingerprint, so its
    SOURCE_HASH and text stay; sharing x changes it, so a build redoes it."""
    from difgen.config import ArraySpec, ModuleSpec
    from difgen.hashing import spec_fingerprint

    spec = ModuleSpec("m", "f:f", "trace", "auto", ("gradient",), ArraySpec((3,)))
    shared = ModuleSpec(
        "m", "f:f", "trace", "auto", ("gradient",), ArraySpec((3,), per_point=False)
    )
    assert "per_point" not in spec_fingerprint(spec)
    assert '"per_point":false' in spec_fingerprint(shared)


def test_generated_modules_pass_mypy_strict(built: Any, tmp_path: Path) -> None:
    """The points variants over some arguments are typed as the rest: int64 and
    bool data per point, an index after a slice, the sympy backend's columns."""
    paths = []
    for name, backend in [
        ("cross_entropy", "trace"),
        ("masked", "trace"),
        ("columns", "trace"),
        ("embedding", "trace"),
        ("logistic", "sympy"),
        ("residuals", "trace"),
    ]:
        path = tmp_path / f"{name}_{backend}.py"
        path.write_text(built(name, backend)[1])
        paths.append(str(path))
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *paths],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
