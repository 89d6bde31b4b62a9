"""difgen verify on the user's domain: ``verify_domain``, ``verify_points``, int
context ranges, captured warnings and the time limit per module."""

from __future__ import annotations

import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import difgen
from difgen import verification
from difgen.cli import main
from difgen.errors import ConfigError
from difgen.hashing import stamp_body_hash

SOURCE = """\
import numpy as np


def entropy(x):
    return np.sum(x * np.log(x))


def pick(x, index):
    return np.sum(x[index] ** 2)


def scaled(x, a):
    return np.sum(a * np.log(x))


def sampler(count, rng):
    return [rng.uniform(0.5, 2.0, 3) for _ in range(count)]


def bad_sampler(count, rng):
    return [np.ones(4)] * count
"""


def project(tmp_path: Path, *tables: str) -> Path:
    (tmp_path / "fn.py").write_text(SOURCE)
    body = "\n".join(textwrap.dedent(t) for t in tables)
    (tmp_path / "difgen.toml").write_text('[difgen]\noutput_dir = "out"\n\n' + body)
    return tmp_path / "difgen.toml"


ENTROPY = """\
[[module]]
name = "entropy"
function = "fn.py:entropy"
backend = "trace"
operators = ["gradient", "hvp", "hessian"]
input = {{ shape = [3] }}
{extra}
"""


def test_x_log_x_passes_on_its_domain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project(tmp_path, ENTROPY.format(extra="verify_domain = [0.1, 3]"))
    difgen.build(config)
    result = difgen.verify(config)
    assert result.ok, result.modules
    assert result.modules[0].sampled == "x in [0.1, 3]"
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # verify itself must not warn
        assert main(["verify", str(config)]) == 0
    captured = capsys.readouterr()
    assert "Warning" not in captured.out + captured.err
    assert "hint" not in captured.out


def test_without_the_domain_it_fails_and_suggests_verify_domain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project(tmp_path, ENTROPY.format(extra=""))
    difgen.build(config)
    capsys.readouterr()
    assert main(["verify", str(config)]) == 1
    captured = capsys.readouterr()
    assert "FAIL" in captured.out
    assert "verify_domain = [low, high]" in captured.out
    assert "Warning" not in captured.err  # the reference's logs of x < 0


def test_verify_domain_is_not_part_of_the_source_hash(tmp_path: Path) -> None:
    config = project(tmp_path, ENTROPY.format(extra=""))
    difgen.build(config)
    before = (tmp_path / "out" / "entropy.py").read_text()
    config.write_text(
        config.read_text().replace("[3] }", "[3] }\nverify_domain = [1, 2]")
    )
    assert difgen.check(config).ok
    (result,) = difgen.build(config).modules
    assert result.action is difgen.api.Action.SKIPPED  # no input of its text changed
    difgen.build(config, force=True)
    assert (tmp_path / "out" / "entropy.py").read_text() == before


PICK = """\
[[module]]
name = "pick"
function = "fn.py:pick"
backend = "trace"
operators = ["gradient"]
input = {{ shape = [5] }}
contexts = [{{ name = "index", shape = [4], dtype = "int64"{extra} }}]
"""


def test_int_contexts_are_drawn_within_their_range(tmp_path: Path) -> None:
    config = project(tmp_path, PICK.format(extra=", range = [1, 4]"))
    spec = difgen.config.load_config(config).modules[0]
    rng = np.random.default_rng(0)
    drawn = np.concatenate(
        [
            verification._context(
                (4,), "int64", rng, verification._context_domain(spec, "index", "int64")
            )
            for _ in range(50)
        ]
    )
    assert drawn.min() == 1 and drawn.max() == 4
    difgen.build(config)
    assert difgen.verify(config).ok
    # without a range: zeros, as before
    plain = project(tmp_path, PICK.format(extra=""))
    spec = difgen.config.load_config(plain).modules[0]
    assert not verification._context((4,), "int64", rng, None).any()
    assert verification._context_domain(spec, "index", "int64") is None


def test_a_float_context_takes_the_module_domain_or_its_own(tmp_path: Path) -> None:
    table = """\
    [[module]]
    name = "scaled"
    function = "fn.py:scaled"
    backend = "trace"
    operators = ["gradient", "hessian"]
    input = { shape = [2] }
    contexts = [{ name = "a", shape = [], verify_domain = [5, 6] }]
    verify_domain = [0.5, 2]
    """
    config = project(tmp_path, table)
    spec = difgen.config.load_config(config).modules[0]
    assert verification._context_domain(spec, "a", "float64") == (5.0, 6.0)
    point = verification._Point(spec, difgen.api._trace(spec), np.random.default_rng(1))
    assert 5 <= point.contexts[0] <= 6
    assert np.all((point.x >= 0.5) & (point.x <= 2))
    difgen.build(config)
    assert difgen.verify(config).ok


def test_verify_points_gives_the_points(tmp_path: Path) -> None:
    config = project(tmp_path, ENTROPY.format(extra='verify_points = "fn.py:sampler"'))
    difgen.build(config)
    result = difgen.verify(config, points=4)
    assert result.ok
    assert result.modules[0].sampled == "points from fn.py:sampler"


def test_a_sampler_of_the_wrong_shape_fails_the_module(tmp_path: Path) -> None:
    config = project(
        tmp_path, ENTROPY.format(extra='verify_points = "fn.py:bad_sampler"')
    )
    difgen.build(config)
    (found,) = difgen.verify(config).modules
    assert not found.passed
    assert found.problem is not None and "shape (4,)" in found.problem


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("verify_domain = [3, 1]", "low < high"),
        ("verify_domain = [0, 1, 2]", "two finite numbers"),
        ('verify_domain = "wide"', "[low, high]"),
        ("verify_points = 3", "'verify_points' must be"),
        ('verify_points = "nowhere"', "'verify_points' must be"),
    ],
)
def test_bad_domains_are_config_errors(
    tmp_path: Path, extra: str, message: str
) -> None:
    config = project(tmp_path, ENTROPY.format(extra=extra))
    with pytest.raises(ConfigError, match=message):
        difgen.config.load_config(config)


def test_range_applies_to_int_contexts_only(tmp_path: Path) -> None:
    table = PICK.format(extra="").replace('dtype = "int64"', "range = [0, 2]")
    config = project(tmp_path, table)
    with pytest.raises(ConfigError, match="'range' applies to int64 contexts"):
        difgen.config.load_config(config)


SLOW = """\
import numpy as np


def settle(x):
    return np.sum(x**2)
"""


def test_a_module_that_never_returns_fails_on_the_time_limit(tmp_path: Path) -> None:
    (tmp_path / "fn.py").write_text(SLOW)
    (tmp_path / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "out"\n\n'
        '[[module]]\nname = "settle"\nfunction = "fn.py:settle"\n'
        'backend = "trace"\noperators = ["gradient"]\ninput = { shape = [2] }\n'
    )
    config = tmp_path / "difgen.toml"
    difgen.build(config)
    module = tmp_path / "out" / "settle.py"
    # the generated gradient made to spin, as a loop that never meets its
    # tolerance does, and restamped so that verify takes it as difgen's
    text = (
        module.read_text() + "\n\ndef gradient(*args):\n    while True:\n        pass\n"
    )
    module.write_text(stamp_body_hash(text))
    result = difgen.verify(config, timeout=0.5)
    (found,) = result.modules
    assert not found.passed
    assert found.problem is not None
    assert "stopped after 0.5 s" in found.problem
    assert "a loop that never meets its exit test" in found.problem


def test_an_operators_warnings_are_shown_only_when_it_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "fn.py").write_text(SLOW)
    (tmp_path / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "out"\n\n'
        '[[module]]\nname = "settle"\nfunction = "fn.py:settle"\n'
        'backend = "trace"\noperators = ["gradient"]\ninput = { shape = [2] }\n'
    )
    config = tmp_path / "difgen.toml"
    difgen.build(config)
    module = tmp_path / "out" / "settle.py"
    original = module.read_text()
    wrong = "\n\ndef gradient(x):\n    np.log(-np.ones(2))\n    return np.zeros(2)\n"
    module.write_text(stamp_body_hash(original + wrong))
    capsys.readouterr()
    assert main(["verify", str(config)]) == 1
    captured = capsys.readouterr()
    assert "warned: RuntimeWarning: invalid value encountered in log" in captured.out
    assert "Warning" not in captured.err
    right = "\n\n_gradient = gradient\n\n\ndef gradient(x):\n"
    right += "    np.log(-np.ones(2))\n    return _gradient(x)\n"
    module.write_text(stamp_body_hash(original + right))
    assert main(["verify", str(config)]) == 0
    assert "warned" not in capsys.readouterr().out


KEPLER = """\
import numpy as np


def kepler(M, e):
    E = M + e * np.sin(M)
    step = np.ones(M.shape)
    while np.max(np.abs(step)) > 1e-13:
        step = (E - e * np.sin(E) - M) / (1.0 - e * np.cos(E))
        E = E - step
    return E
"""


def test_a_float32_loop_below_its_resolution_is_noted_and_times_out_in_verify(
    tmp_path: Path,
) -> None:
    (tmp_path / "kepler.py").write_text(KEPLER)
    (tmp_path / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "out"\n\n[[module]]\nname = "kepler32"\n'
        'function = "kepler.py:kepler"\nbackend = "trace"\n'
        'operators = ["jacobian"]\ninput = { shape = [4], dtype = "float32" }\n'
        'contexts = [{ name = "e", shape = [], dtype = "float32", '
        "verify_domain = [0.1, 0.5] }]\n"
    )
    config = tmp_path / "difgen.toml"
    (built,) = difgen.build(config).modules
    assert any(
        "compares with 1e-13, below float32's resolution" in n for n in built.notes
    )
    (found,) = difgen.verify(config, timeout=1.0).modules
    assert found.problem is not None
    assert found.problem.startswith("stopped after 1 s (verify's time limit")
    assert "below float32's resolution" in found.problem
    # a tolerance float32 can meet: no note, and verify passes
    (tmp_path / "kepler.py").write_text(KEPLER.replace("1e-13", "1e-5"))
    (built,) = difgen.build(config).modules
    assert built.notes == ()
    assert difgen.verify(config, timeout=60.0).ok


def test_difgen_generate_takes_verify_domain_as_the_key_means() -> None:
    def entropy(x: np.ndarray) -> np.ndarray:
        return np.sum(x * np.log(x))

    module = difgen.generate(
        entropy, np.ones(3), operators=["gradient"], verify_domain=(0.1, 3)
    )
    assert np.allclose(module.gradient(np.ones(3)), np.ones(3))
    with pytest.raises(ConfigError, match=r"verify_domain.*low < high"):
        difgen.generate(
            entropy, np.ones(3), operators=["gradient"], verify_domain=[3, 1]
        )
