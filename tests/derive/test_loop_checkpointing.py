"""Checkpointed reverse mode of loops (issue 21, item 4): ``checkpoint = N`` keeps a
snapshot of a loop's state every ``N`` steps and recomputes each segment from its
snapshot on the way back; ``checkpoint = "sqrt"`` every ``ceil(sqrt(steps))`` steps.

Each case of ``static_loop_cases`` is built with and without checkpointing (the
vector emission, and C for the cases whose loops run in C), and every operator
must equal the fully taped one to 1e-12 at ordinary points and at NaN and
infinite inputs (the recomputed states are the same operations on the same
doubles, so they are in fact equal). The tape's size is bounded as the build note
states: measured with tracemalloc for the vector emission, read off the C.
"""

from __future__ import annotations

import math
import re
import shutil
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import difgen
import static_loop_cases as cases
from compiled import BuiltConfig
from conftest import SUPPORT, import_file
from difgen.ad import loops
from difgen.frontend.control import helpers

SETTINGS: dict[str, Any] = {
    "full": None,
    "every7": 7,
    "sqrt": "sqrt",
    "revolve": "revolve",
    "revolve2": ("revolve", 2),
}
SCALAR_OPS = {"reverse": ["f", "gradient", "jacobian"], "auto": ["hvp", "hessian"]}
ARRAY_OPS = ["f", "jacobian", "pullback"]
ARRAYS = {"decay", "written"}
C_NAMES = ["euler", "written", "nested"]
C_SETTINGS = {"every7": 7, "revolve3": ("revolve", 3)}


def _module(name: str, mode: str, setting: str, emit: str) -> str:
    fn, shape, _ = cases.CASES[name]
    ops = ARRAY_OPS if name in ARRAYS else SCALAR_OPS[mode]
    quoted = ", ".join(f'"{op}"' for op in ops)
    extra = _setting({**SETTINGS, **C_SETTINGS}[setting])
    suffix = "_c" if emit == "c" else ""
    return (
        f'[[module]]\nname = "{name}_{mode}_{setting}{suffix}"\n'
        f'function = "static_loop_cases.py:{fn}"\nbackend = "trace"\n'
        f'emit = "{emit}"\nmode = "{"reverse" if mode == "reverse" else "auto"}"\n'
        f"operators = [{quoted}]\ninput = {{ shape = {shape} }}\n{extra}"
    )


def _setting(value: Any) -> str:
    """The module's keys for a setting (``(\"revolve\", S)``: with snapshots)."""
    if value is None:
        return ""
    if isinstance(value, tuple):
        return f'checkpoint = "{value[0]}"\nsnapshots = {value[1]}\n'
    return f"checkpoint = {value!r}\n".replace("'", '"')


def _modes(name: str) -> list[str]:
    return ["reverse"] if name in ARRAYS else ["reverse", "auto"]


def _config(emit: str) -> str:
    parts = ['[difgen]\noutput_dir = "out"\n']
    names = C_NAMES if emit == "c" else list(cases.CASES)
    settings = list(C_SETTINGS) if emit == "c" else list(SETTINGS)
    for name in names:
        parts += [
            _module(name, mode, s, emit) for mode in _modes(name) for s in settings
        ]
    return "\n".join(parts)


def _build(directory: Path, emit: str) -> BuiltConfig:
    shutil.copy(SUPPORT / "static_loop_cases.py", directory)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(helpers, "UNROLL_EQUATIONS", 0)  # small loops stay loops
        return BuiltConfig(directory, _config(emit))


@pytest.fixture(scope="module")
def vector(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    return _build(tmp_path_factory.mktemp("checkpoint_vector"), "vector")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    return _build(tmp_path_factory.mktemp("checkpoint_c"), "c")


def _points(name: str) -> list[np.ndarray]:
    _, shape, points = cases.CASES[name]
    odd = [np.full(shape, np.nan), np.array([np.inf] + [0.5] * (shape[0] - 1))]
    odd.append(np.array([-np.inf] * shape[0]))
    return [*points, *odd]


def _close(a: Any, b: Any) -> None:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_array_equal(np.isinf(a), np.isinf(b))
    np.testing.assert_array_equal(a[np.isinf(a)], b[np.isinf(b)])
    finite = np.isfinite(a)
    scale = max(float(np.max(np.abs(b[finite]), initial=0.0)), 1e-300)
    np.testing.assert_allclose(a[finite], b[finite], rtol=1e-12, atol=1e-12 * scale)


def _calls(module: Any, name: str, x: np.ndarray) -> dict[str, Any]:
    rng = np.random.default_rng(4)
    dx = rng.normal(size=cases.CASES[name][1])
    got: dict[str, Any] = {}
    for op in module.__all__:
        if op == "hvp":
            got[op] = module.hvp(x, dx)
        elif op == "pullback":
            got[op] = module.pullback(x, rng.normal(size=np.shape(module.f(x))))
        else:
            got[op] = getattr(module, op)(x)
    return got


def _source(built: BuiltConfig, module: str) -> str:
    return (built.directory / "out" / f"{module}.py").read_text()


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s != "full"])
@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_checkpointed_loops_equal_the_fully_taped_ones(
    vector: BuiltConfig, name: str, setting: str
) -> None:
    for mode in _modes(name):
        full = vector.get(f"{name}_{mode}_full")
        ck = vector.get(f"{name}_{mode}_{setting}")
        with np.errstate(all="ignore"):
            for x in _points(name):
                got, want = _calls(ck, name, x), _calls(full, name, x)
                for op in want:
                    _close(got[op], want[op])


def test_checkpointing_changes_the_sweeps_only(vector: BuiltConfig) -> None:
    """The gradient of a checkpointed module snapshots and recomputes; without
    the key the module is the one built before checkpointing existed."""
    ck = _source(vector, "euler_reverse_every7")
    full = _source(vector, "euler_reverse_full")
    assert "% 7 == 0:" in ck and "reversed(" in ck
    assert "% 7" not in full and "range(len(" not in full


@pytest.mark.parametrize("name", C_NAMES)
def test_checkpointed_loops_in_c_equal_the_fully_taped_python(
    compiled: BuiltConfig, vector: BuiltConfig, name: str
) -> None:
    for mode in _modes(name):
        full = vector.get(f"{name}_{mode}_full")
        for setting in C_SETTINGS:
            ck = compiled.get(f"{name}_{mode}_{setting}_c")
            with np.errstate(all="ignore"):
                for x in _points(name):
                    got, want = _calls(ck, name, x), _calls(full, name, x)
                    for op in want:
                        _close(got[op], want[op])


def test_the_c_tape_holds_the_snapshots_and_one_segment(compiled: BuiltConfig) -> None:
    """euler's 60 steps (59 after the first, run natively) at every 7 steps: 9
    snapshots of the 3 state slots and a segment of 7 records, not 59 records."""
    text = (compiled.directory / "out" / "euler_reverse_every7_c__c.c").read_text()
    found = re.findall(r"(\d+) trips counted at build time: (\d+) snapshots", text)
    assert found and all(t == "59" and k == str(math.ceil(59 / 7)) for t, k in found)
    assert "checkpointed: a snapshot of the state every 7 steps" in text
    assert "the tape pre-sized" not in text  # no full tape beside the snapshots


def test_the_c_revolve_holds_its_snapshots_only(compiled: BuiltConfig) -> None:
    """Binomial checkpointing with 3 states: 2 frames of the 3 state slots in
    workspace, no tape of the trips and no allocation."""
    text = (compiled.directory / "out" / "euler_reverse_revolve3_c__c.c").read_text()
    assert "binomial checkpointing (revolve): at most 3 states held" in text
    assert "/* 2 frames */" in text
    gradient = text[text.index("binomial checkpointing") :]
    assert "malloc" not in gradient.split("dg_fail")[0]


LONG = """\
import numpy as np


def euler(p):
    h = 0.001
    pos, vel = 1.0, 0.0
    for _ in range(4000):
        acc = -p[0] * pos - p[1] * vel + 0.5 * np.sin(pos)
        pos, vel = pos + h * vel, vel + h * acc
    return pos**2 + vel**2
"""


def _long(tmp: Path, setting: Any) -> tuple[Any, tuple[str, ...]]:
    tmp.mkdir()
    (tmp / "long.py").write_text(LONG)
    (tmp / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "out"\n[[module]]\nname = "long"\n'
        'function = "long.py:euler"\nbackend = "trace"\nmode = "reverse"\n'
        'operators = ["gradient"]\ninput = { shape = [2] }\n' + _setting(setting)
    )
    result = difgen.build(tmp / "difgen.toml")
    notes = tuple(n for m in result.modules for n in m.notes)
    return import_file(tmp / "out" / "long.py"), notes


def _peak(fn: Any, x: np.ndarray) -> int:
    fn(x)  # warm: first-call allocations are not the tape's
    tracemalloc.start()
    try:
        fn(x)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_python_tape_is_bounded_as_the_build_says(tmp_path: Path) -> None:
    full, _ = _long(tmp_path / "full", None)
    ck, notes = _long(tmp_path / "sqrt", "sqrt")
    x = np.array([3.0, 0.2])
    np.testing.assert_allclose(ck.gradient(x), full.gradient(x), rtol=1e-12)
    # 3999 steps after the first: every 64 steps, 63 snapshots and a segment of 64
    (said,) = [n for n in notes if "checkpointed" in n]
    assert "every 64 steps of 3999: 63 snapshots" in said
    assert "recomputing 3936 steps" in said
    taped, kept = _peak(full.gradient, x), _peak(ck.gradient, x)
    per_state = taped / 3999  # a tuple of three floats and its list slot
    assert kept < (63 + 64 + 16) * per_state, (taped, kept)
    assert kept * 10 < taped


def test_revolve_holds_its_snapshots_only_in_python(tmp_path: Path) -> None:
    full, _ = _long(tmp_path / "full", None)
    ck, notes = _long(tmp_path / "revolve", ("revolve", 6))
    x = np.array([3.0, 0.2])
    np.testing.assert_allclose(ck.gradient(x), full.gradient(x), rtol=1e-12)
    (said,) = [n for n in notes if "binomial" in n]
    cost = loops.revolve_cost(3999, 6)
    assert (
        f"6 states of the 3999 steps are kept, at the cost of recomputing {cost}"
        in said
    )
    taped, kept = _peak(full.gradient, x), _peak(ck.gradient, x)
    assert kept < 64 * taped / 3999, (taped, kept)  # a few states' worth, not 3999


def test_binomial_schedules_reverse_every_step_once() -> None:
    """The split keeps every segment within what its snapshots can reverse, and
    the cost is the least number of repetitions' bound."""
    for trips in (1, 2, 3, 10, 57, 1000):
        for snapshots in (2, 3, 5, 12):
            order: list[int] = []
            frames = [(0, trips, snapshots - 1)]
            while frames:
                first, n, s = frames.pop()
                while n > 1:
                    m = loops.binomial_split(n, s)
                    assert 1 <= m < n
                    frames.append((first, m, s))
                    first, n, s = first + m, n - m, s - 1
                    assert len(frames) < snapshots
                order.append(first)
            assert order == list(range(trips - 1, -1, -1))
    assert loops.revolve_cost(10, 2) == 45  # one snapshot free: n(n-1)/2
    assert loops.revolve_cost(1000, 10) < 5 * 1000  # C(9 + 5, 9) >= 1000


def test_a_trip_count_from_a_context_checkpoints_at_run_time(tmp_path: Path) -> None:
    """``range(n)`` of an int64 context: every N steps works whatever n is;
    ``"sqrt"`` needs a count the build knows, and says it tapes every state."""
    built: dict[Any, Any] = {}
    for setting in (None, 5, "sqrt", ("revolve", 3)):
        directory = tmp_path / str(len(built))
        directory.mkdir()
        shutil.copy(SUPPORT / "static_loop_cases.py", directory)
        (directory / "difgen.toml").write_text(
            '[difgen]\noutput_dir = "out"\n[[module]]\nname = "counted"\n'
            'function = "static_loop_cases.py:counted"\nbackend = "trace"\n'
            'mode = "reverse"\noperators = ["f", "jacobian"]\n'
            'input = { shape = [3] }\ncontexts = [{ name = "n", shape = [], '
            'dtype = "int64" }]\n' + _setting(setting)
        )
        result = difgen.build(directory / "difgen.toml")
        notes = [n for m in result.modules for n in m.notes]
        built[setting] = (import_file(directory / "out" / "counted.py"), notes)
    assert any("T/5 snapshots" in n for n in built[5][1])
    assert any("needs a trip count the build counts" in n for n in built["sqrt"][1])
    x = np.array([0.7, 1.3, -0.4])
    for n in (0, 1, 4, 5, 6, 23):
        want = built[None][0].jacobian(x, np.int64(n))
        for setting in (5, "sqrt", ("revolve", 3)):
            _close(built[setting][0].jacobian(x, np.int64(n)), want)


def test_the_setting_is_checked() -> None:
    with pytest.raises(ValueError), loops.checkpointing(0):
        pass
    with pytest.raises(ValueError), loops.checkpointing("binomial"):
        pass
    with pytest.raises(ValueError), loops.checkpointing("revolve", 1):
        pass
    with pytest.raises(ValueError), loops.checkpointing(5, 3):
        pass
