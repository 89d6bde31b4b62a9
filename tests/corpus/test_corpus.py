"""The real-world corpus (issue 9): every function, on every backend it is meant
for, in every mode, built by difgen and checked against NumPy and autograd.

- ``test_handled``: one module per (function, backend, mode), built with
  ``difgen.build`` from a ``difgen.toml`` in ``tmp_path``; ``f`` must equal the NumPy
  function and every operator must agree with autograd at two random points
  (``harness.check``). A failure here is a WRONG ANSWER or a crash: never acceptable.
- ``test_refused``: the pairs difgen cannot handle today (``EXPECTED_REFUSALS`` in
  ``expectations.py``) must be refused with a DifgenError that names the user's
  file and line (or the config line, or the time limit, as the entry says). When a
  gap is fixed, the build succeeds, this test fails, and the entry must be removed
  from the table: the pair then moves to ``test_handled``.
- ``test_coverage``: counts handled pairs per backend and prints them with the
  slowest builds; ``scripts/corpus_report.py`` writes the full report.
"""

from __future__ import annotations

import re
from pathlib import Path

import harness
import pytest
from catalog import BY_NAME, CASES, MODES
from expectations import EXPECTED_REFUSALS, KNOWN_CRASHES, Refusal
from harness import Key

from difgen.budget import BuildTimeout
from difgen.errors import ConfigError, DifgenError, InternalError

PAIRS = [(case.name, backend) for case in CASES for backend in case.backends]
"""Every (function, backend) the corpus means to build."""


def _refused_modes(name: str, backend: str) -> tuple[str, ...]:
    """The modes an EXPECTED_REFUSALS entry covers (all of the backend's by default)."""
    refusal = EXPECTED_REFUSALS.get((name, backend))
    if refusal is None:
        return ()
    return refusal.modes or MODES[backend]


HANDLED = [
    (name, backend, mode)
    for name, backend in PAIRS
    for mode in MODES[backend]
    if mode not in _refused_modes(name, backend)
    and (name, backend) not in KNOWN_CRASHES
]
CRASHES = [
    (name, backend, mode) for name, backend in KNOWN_CRASHES for mode in MODES[backend]
]
REFUSED = [
    (name, backend, mode)
    for name, backend in PAIRS
    for mode in _refused_modes(name, backend)
]
JOBS = 2
"""Worker processes of the batch build."""
REFUSAL_TIMEOUT = 1.0
"""Seconds a ``"timeout"`` entry is given in test_refused: long enough that a build
difgen makes fast (issue 9 §1) finishes and fails the test, short enough that the
refusals do not dominate the corpus's run time."""
SECONDS: dict[tuple[str, str, str], float] = {}
"""Build time of each handled module in this session (for test_coverage)."""


def _id(name: str, backend: str, mode: str) -> str:
    return f"{name}-{backend}-{mode}"


BATCH_ERRORS: list[str] = []
"""Why the batch build failed, if it did (reported by test_batch_built)."""


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> dict[Key, harness.Built]:
    """Every handled module, built in one ``difgen.build`` on two worker processes
    (the corpus must run in minutes on two cores). Empty if that build fails: each
    test then builds its own module, so the failure is reported where it is, and
    test_batch_built fails with the batch's error."""
    directory = tmp_path_factory.mktemp("corpus")
    try:
        return harness.build_many(HANDLED, directory, jobs=JOBS)
    except DifgenError as exc:
        BATCH_ERRORS.append(f"{type(exc).__name__}: {exc}")
        return {}


@pytest.mark.parametrize(
    "name,backend,mode", HANDLED, ids=[_id(*triple) for triple in HANDLED]
)
def test_handled(
    name: str, backend: str, mode: str, batch: dict[Key, harness.Built], tmp_path: Path
) -> None:
    case = BY_NAME[name]
    key = (name, backend, mode)
    built = batch[key] if key in batch else harness.build(case, backend, mode, tmp_path)
    SECONDS[key] = built.seconds
    harness.check(case, built)


def test_batch_built(batch: dict[Key, harness.Built]) -> None:
    """The handled modules built together (else the corpus builds them one by one,
    twice as slowly, and the error says which module stopped the batch)."""
    assert not BATCH_ERRORS, BATCH_ERRORS
    assert set(batch) == set(HANDLED)


@pytest.mark.parametrize(
    "name,backend,mode", REFUSED, ids=[_id(*triple) for triple in REFUSED]
)
def test_refused(name: str, backend: str, mode: str, tmp_path: Path) -> None:
    """The build refuses, saying where. If it builds, the gap is fixed: remove the
    entry from EXPECTED_REFUSALS (expectations.py) so the pair is checked instead."""
    case = BY_NAME[name]
    refusal = EXPECTED_REFUSALS[(name, backend)]
    limit = REFUSAL_TIMEOUT if refusal.where == "timeout" else harness.TIMEOUT
    with pytest.raises(DifgenError) as info:
        harness.build(case, backend, mode, tmp_path, timeout=limit)
    error = info.value
    message = str(error)
    assert not isinstance(error, InternalError), message
    if refusal.where == "timeout":
        assert isinstance(error, BuildTimeout), message
        return
    assert not isinstance(error, BuildTimeout), message
    if refusal.where == "config":
        assert isinstance(error, ConfigError), message
        assert error.path.endswith("difgen.toml") and error.line is not None, message
        return
    lines = [int(n) for n in re.findall(rf"{re.escape(case.path.name)}:(\d+)", message)]
    assert any(line in case.lines for line in lines), (
        f"the refusal does not name a line of {case.path.name}:{case.name} "
        f"(lines {case.lines.start}-{case.lines.stop - 1}): {message}"
    )
    for fragment in refusal.mentions:
        assert fragment in message, message


@pytest.mark.parametrize(
    "name,backend,mode", CRASHES, ids=[_id(*triple) for triple in CRASHES]
)
def test_known_crash(name: str, backend: str, mode: str, tmp_path: Path) -> None:
    """A BUG kept visible: difgen raises a raw exception, not a DifgenError. When
    this test fails, the bug is fixed: move the pair out of KNOWN_CRASHES."""
    expected, _ = KNOWN_CRASHES[(name, backend)]
    with pytest.raises(Exception) as info:
        harness.build(BY_NAME[name], backend, mode, tmp_path)
    assert type(info.value).__name__ == expected, repr(info.value)
    assert not isinstance(info.value, DifgenError)


def test_expected_refusals_name_real_pairs() -> None:
    """Every entry names a corpus function and a backend it is meant for, gives a
    reason, and refuses in modes the backend has."""
    for (name, backend), refusal in EXPECTED_REFUSALS.items():
        assert (name, backend) in PAIRS, (name, backend)
        assert isinstance(refusal, Refusal) and refusal.reason
        assert refusal.where in ("source", "config", "timeout")
        assert set(refusal.modes or ()) <= set(MODES[backend])


def test_coverage(capsys: pytest.CaptureFixture[str]) -> None:
    """Handled pairs over all pairs, per backend (printed); the corpus is at least
    80 functions in the seven families of issue 9."""
    assert len(CASES) >= 80
    assert {case.family for case in CASES} == {
        "optimization",
        "odes",
        "losses",
        "physics",
        "stencils",
        "linear algebra",
        "loops",
    }
    lines = []
    for backend in MODES:
        total = [p for p in PAIRS if p[1] == backend]
        refused = [p for p in total if p in EXPECTED_REFUSALS or p in KNOWN_CRASHES]
        handled = len(total) - len(refused)
        lines.append(
            f"corpus coverage, {backend}: {handled}/{len(total)} pairs handled "
            f"({100 * handled / len(total):.0f}%), {len(refused)} refused "
            f"(of which {sum(p[1] == backend for p in KNOWN_CRASHES)} crash: a bug)"
        )
    slowest = sorted(SECONDS.items(), key=lambda kv: -kv[1])[:5]
    lines += [f"  slow build: {s:.1f} s {'/'.join(k)}" for k, s in slowest]
    with capsys.disabled():
        print("\n" + "\n".join(lines))
