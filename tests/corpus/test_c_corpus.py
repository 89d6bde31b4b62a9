"""The whole corpus with ``emit = "c"``: compiled operators against the fallback.

Every corpus function is built with ``emit = "c"`` and compiled, once per session
(:mod:`c_harness`: two generating processes, then one parallel batch of
compilers). For each one that builds, every public operator of the compiled module
must give what the same module's Python fallback gives, BIT FOR BIT (the C code
prints the same reduction, in the same order: NaN and inf included, and the same
errors; to 1e-12 where the code calls log2, log10 or exp2, which the fallback takes
from NumPy and C from its C library), at the corpus's two sample points and at a third with NaN, inf, signed
zeros and huge values; the fallback's ``f`` must equal the NumPy function itself.
The functions the C target refuses must be exactly those of
``c_expectations.EXPECTED_C_REFUSALS``, for the reason it gives: a new refusal, or
an entry that now builds, fails; regenerate the table with
``python tests/corpus/c_harness.py > tests/corpus/c_expectations.py``.
"""

from __future__ import annotations

from pathlib import Path

import c_harness
import numpy as np
import pytest
from c_expectations import EXPECTED_C_REFUSALS
from catalog import BY_NAME, CASES
from harness import POINTS, close

BUILT = [c.name for c in CASES if c.name not in EXPECTED_C_REFUSALS]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, c_harness.Outcome]:
    """Every corpus function built with emit = "c" and compiled (once)."""
    return c_harness.build_corpus(Path(tmp_path_factory.mktemp("c_corpus")))


def test_refusals_are_the_expected_ones(
    outcomes: dict[str, c_harness.Outcome],
) -> None:
    refused = {n: o.refusal for n, o in outcomes.items() if o.refusal is not None}
    compiler = {n: r for n, r in refused.items() if r.startswith("compile:")}
    assert not compiler, f"the C compiler failed (a C target bug): {compiler}"
    unexpected = {n: r for n, r in refused.items() if n not in EXPECTED_C_REFUSALS}
    assert not unexpected, f"refused, not in EXPECTED_C_REFUSALS: {unexpected}"
    now_built = sorted(set(EXPECTED_C_REFUSALS) - set(refused))
    assert not now_built, f"built now: remove from EXPECTED_C_REFUSALS: {now_built}"
    for name, fragment in EXPECTED_C_REFUSALS.items():
        message = c_harness.normalized(str(refused[name]))
        assert fragment in message, f"{name}: {message!r} lacks {fragment!r}"


@pytest.mark.parametrize("name", BUILT)
def test_compiled_equals_fallback(
    outcomes: dict[str, c_harness.Outcome], name: str
) -> None:
    built = outcomes[name]
    if built.refusal is not None:
        pytest.fail(f"{name} was refused: {built.refusal}")
    case = BY_NAME[name]
    compiled, python = c_harness.compiled_and_fallback(built)
    assert compiled.COMPILED, compiled.C_FALLBACK_REASON
    assert not python.COMPILED
    for seed in POINTS:
        x, ctx = case.point(seed)
        close(python.f(x, *ctx), case.fn(np.copy(x), *ctx), f"{name}: f", rtol=1e-12)
    loops = c_harness.loop_operators(built)
    for op, args in c_harness.sample_calls(case, python):
        got = c_harness.outcome(getattr(compiled, op), args)
        expected = c_harness.outcome(getattr(python, op), args)
        assert got[0] == expected[0], (op, got, expected)
        if got[0] == "ok" and op in loops:
            c_harness.near_scale(got[1], expected[1], f"{name}.{op}")
        elif got[0] == "ok" and c_harness.libm_differs(built):
            c_harness.near(got[1], expected[1], f"{name}.{op}")
        elif got[0] == "ok":
            c_harness.same(got[1], expected[1], f"{name}.{op}")
        else:
            assert got[1] == expected[1], op
