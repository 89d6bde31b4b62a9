"""Issue 22's real-code corpus: statistics and ML functions as their users write them,
built by ``difgen.generate`` (trace backend) and compared with JAX at rtol 1e-10.

A function difgen refuses must be refused with a DifgenError (the harness lets any
other exception through, failing the test); refusals may be at most 5% of the
corpus. A wrong value fails its test. ``REPORT.md`` must say what this run says:
``python tests/corpus_ml/ml_report.py`` rewrites it.
"""

from __future__ import annotations

from pathlib import Path

import ml_catalog
import ml_harness
import ml_report
import pytest

NAMES = [case.name for case in ml_catalog.CASES]
BY_NAME = {case.name: case for case in ml_catalog.CASES}


@pytest.fixture(scope="module")
def outcomes() -> dict[str, ml_harness.Outcome]:
    """Each case's outcome, computed once per test session of this module."""
    return {}


def _outcome(outcomes: dict[str, ml_harness.Outcome], name: str) -> ml_harness.Outcome:
    if name not in outcomes:
        outcomes[name] = ml_harness.run(BY_NAME[name])
    return outcomes[name]


def test_the_corpus_is_large_enough_and_names_are_unique() -> None:
    assert len(NAMES) >= 40
    assert len(set(NAMES)) == len(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_builds_and_matches_jax(
    name: str, outcomes: dict[str, ml_harness.Outcome]
) -> None:
    outcome = _outcome(outcomes, name)
    if outcome.refusal is not None:
        assert outcome.refusal.strip(), "a refusal must say why"
        return  # counted in test_refusals_are_few and written in REPORT.md
    assert not outcome.mismatches, outcome.mismatches
    assert set(outcome.errors) >= set(ml_harness.operators(BY_NAME[name]))


def test_refusals_are_few(outcomes: dict[str, ml_harness.Outcome]) -> None:
    refused = [n for n in NAMES if _outcome(outcomes, n).refusal is not None]
    assert len(refused) <= 0.05 * len(NAMES), refused


def test_report_says_what_this_run_says(
    outcomes: dict[str, ml_harness.Outcome],
) -> None:
    """REPORT.md's per-function status and features are this run's (its error
    figures are measured numbers and are not compared)."""
    text = (Path(__file__).parent / "REPORT.md").read_text()
    written = ml_report.statuses(text)
    current = {
        n: (_outcome(outcomes, n).status, ml_report.features(BY_NAME[n])) for n in NAMES
    }
    assert (
        written == current
    ), "REPORT.md is stale: run python tests/corpus_ml/ml_report.py"
