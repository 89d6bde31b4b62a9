"""The benchmark report cannot flatter difgen (issue 7, item 8).

No timing runs here: the report logic is fed synthetic :class:`Tool` times built on
the real case definitions, so the bars are checked against the labels the suite
really produces. Only the JAX tests call a real (tiny) jitted function.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # benchmarks/ is a top-level package, not installed
    sys.path.insert(0, str(ROOT))

from benchmarks import __main__ as bench_main
from benchmarks import peers, report
from benchmarks import problems as P
from benchmarks.cases import Case, all_cases
from benchmarks.timing import Tool, as_dense, check

PEER_ROWS = (
    ("jax.jit(grad)", "jax"),
    ("torch.func.grad", "torch"),
    ("autograd.grad", "autograd"),
)
CASADI_ROWS = (report.CASADI_C, report.CASADI_C_IN_PLACE)
JAX_HVP = "jax.jit(jvp of grad)"  # the JAX row of an hvp case (peers.jax_tools)
MISSING = "missing"  # a status for `synthetic`: the row is not there at all


@pytest.fixture(scope="module")
def cases() -> dict[str, Case]:
    return {c.name: c for c in all_cases()}


def timed(name: str, family: str, us: float | None, **kw: Any) -> Tool:
    """A tool as ``measure`` leaves it: ``us`` µs per call (None: never timed)."""
    tool = Tool(name, family, None, **kw)
    if us is not None and tool.status == "ok":
        tool.times = [us * 1e-6] * 3
    return tool


def synthetic(
    case: Case,
    difgen_us: float = 1.0,
    peer_us: float = 1000.0,
    status: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``report.case_result`` of one case: the hand-written derivative and ``f`` at
    1 µs, difgen at ``difgen_us``, extras and peers (JAX with a 3x slower NumPy
    conversion variant) at ``peer_us``; ``status`` overrides a row's status by tool
    name, and ``MISSING`` drops the row."""
    status = status or {}
    tools = [
        timed(case.limit_name, "hand", 1.0, role="limit"),
        timed("f (NumPy)", "f", 1.0, role="f"),
        *(timed(label, "scipy", peer_us) for label, _ in case.extras),
        *(timed(label, "difgen", difgen_us) for label, _ in case.difgen),
        *(timed(label, "casadi", peer_us) for label in CASADI_ROWS),
        *(
            timed(
                JAX_HVP if family == "jax" and case.operator == "hvp" else label,
                family,
                peer_us,
            )
            for label, family in PEER_ROWS
        ),
    ]
    if case.floor:
        tools.append(timed(peers.FLOOR, "floor", 1.0, role="floor"))
    for tool in tools:  # a difgen C module compiled in a second
        if tool.name.startswith(report.DIFGEN_C):
            tool.compile_s = 1.0
    tools[-3 - case.floor].converted_times = [3 * peer_us * 1e-6]
    kept = []
    for tool in tools:
        wanted = status.get(tool.name, "ok")
        if wanted == MISSING:
            continue
        if wanted != "ok":
            tool.status, tool.times = wanted, []
        kept.append(tool)
    return report.case_result(case, kept)


def results_of(
    case_results: list[dict[str, Any]], selected: list[str] | None = None
) -> dict[str, Any]:
    meta = {
        "date": "2026-01-01T00:00:00",
        "platform": "test",
        "cpu": "test CPU",
        "cpu_count": 2,
        "python": "3.11",
        "numpy": np.__version__,
        "blas": [],
        "env": {},
        "command": "python -m benchmarks",
        "repeats": 3,
    }
    return {
        "meta": meta,
        "peers": {},
        "difgen": {},
        "cases": case_results,
        "bars": report.bars(case_results, selected),
    }


def c_modules(cases: dict[str, Case]) -> set[str]:
    """The difgen C modules of the cases: one compile-time bar each."""
    return {
        module.partition(":")[0]
        for case in cases.values()
        for label, module in case.difgen
        if label.startswith(report.DIFGEN_C)
    }


def full(cases: dict[str, Case], **per_case: dict[str, str]) -> dict[str, Any]:
    """Results of every case, all ok, but for the statuses given per case name."""
    return results_of([synthetic(c, status=per_case.get(n)) for n, c in cases.items()])


# --- item 1: a wrong, skipped or missing difgen row fails, and the run exits 1 -------


def test_every_bar_names_a_real_case_and_real_tools(
    cases: dict[str, Case], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A renamed case or tool label would otherwise turn a bar into a failure
    nobody can fix from the report; here it fails at once, with the name.

    CasADi's C is labelled but not compiled here (seconds per case): its row
    keeps the label ``peers.casadi_c_label`` gives the real one."""

    def casadi_c(case: Case, F: Any, ca: Any, scalar: bool, sparse: bool) -> Tool:
        return Tool(peers.casadi_c_label(sparse), "casadi", None)

    monkeypatch.setattr(peers, "_casadi_c_tool", casadi_c)
    # CasADi is a benchmark extra, not a test one: its rows' labels are checked
    # against the function that makes them, present or not
    assert peers.casadi_c_label(False) == report.CASADI_C
    assert peers.casadi_c_label(True) == report.CASADI_C_IN_PLACE
    assert report.FLOOR == peers.FLOOR
    casadi = {report.CASADI_C, report.CASADI_C_IN_PLACE}
    labels: dict[str, set[str]] = {}
    for what, name, num, den, _, _ in report.BARS:
        assert name in cases, what
        if name not in labels:
            tools = peers.tools_for(cases[name], built={})
            labels[name] = {t.name for t in tools} | casadi
        for tool in (num, den):
            assert tool in (report.LIMIT, report.F) or tool in labels[name], (
                what,
                tool,
            )


def test_all_bars_pass_when_difgen_is_timed_and_fast(cases: dict[str, Case]) -> None:
    results = full(cases)
    n_difgen = sum(len(c.difgen) for c in cases.values())
    assert len(results["bars"]) == len(report.BARS) + n_difgen + len(c_modules(cases))
    assert {b["result"] for b in results["bars"]} == {report.PASS}
    assert report.failures(results) == []
    assert bench_main.exit_status(results) == 0
    assert f"{len(results['bars'])} pass, 0 fail" in report.summary(results)


@pytest.mark.parametrize("status", ["WRONG", "SKIPPED", "ERROR", MISSING])
def test_a_bad_difgen_row_fails_its_bars_everywhere(
    cases: dict[str, Case], status: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """difgen sympy of the seed appears in three bars: each must FAIL, be counted
    in the README summary and results.md, and make the exit status 1."""
    results = full(cases, seed={"difgen sympy": status})
    failed = report.failures(results)
    assert len(failed) == 3
    assert all(b["result"] == report.FAIL for b in failed)
    assert all("difgen sympy" in b["bar"] for b in failed)
    why = "0 rows 'difgen sympy'" if status == MISSING else f"is {status}"
    assert all(why in b["why"] for b in failed), failed
    count = f"**{len(results['bars']) - 3} pass, 3 fail**"

    readme = report.summary(results)
    assert f"Bars of the issue: {count}." in readme
    assert readme.count("- FAIL: ") == 3
    shown = "MISSING" if status == MISSING else status
    assert f"| seed (derivative) | sympy | **{shown}** |" in readme

    md = report.markdown(results)
    assert md.count("| **FAIL** |") == 3
    assert count in md
    if status == MISSING:
        assert "| difgen sympy |  |  |  |  |  |  |  |  | **MISSING** |" in md

    assert bench_main.exit_status(results) == 1
    assert "3 of" in capsys.readouterr().err


def test_an_untimed_difgen_row_fails(cases: dict[str, Case]) -> None:
    """Status ok but no times (never measured) is no measurement: FAIL."""
    result = synthetic(cases["logsumexp_gradient"])
    row = next(r for r in result["rows"] if r["tool"] == "difgen trace")
    row["median_us"] = None
    failed = report.failures(results_of([result], ["logsumexp_gradient"]))
    assert [b["why"] for b in failed] == ["difgen trace was not timed"] * 2


def test_a_missing_case_fails_a_full_run_but_not_an_only_run(
    cases: dict[str, Case],
) -> None:
    rest = [synthetic(c) for n, c in cases.items() if n != "logistic_gradient"]
    failed = report.failures(results_of(rest))
    n_bars = sum(name == "logistic_gradient" for _, name, *_ in report.BARS)
    assert n_bars >= 2  # against the hand-written and difgen C against trace
    assert [b["why"] for b in failed] == ["case logistic_gradient has no results"] * (
        n_bars
    )
    assert report.failures(results_of(rest, [c["name"] for c in rest])) == []


def test_beating_only_the_peers_that_ran_is_not_enough(
    cases: dict[str, Case],
) -> None:
    case = cases["mlp_gradient"]
    result = synthetic(case, status={"torch.func.grad": "ERROR"})
    failed = report.failures(results_of([result], ["mlp_gradient"]))
    assert [b["why"] for b in failed] == ["no timed torch row"] * len(case.difgen)


def test_a_case_judged_against_the_peers_that_can_compute_it(
    cases: dict[str, Case],
) -> None:
    """Kepler's Newton loop: JAX and torch.func cannot differentiate it, so its bar
    is against autograd alone, and a failed autograd row still fails it."""
    case = cases["kepler_newton_gradient"]
    assert case.peers == ("autograd",)
    errors = {"jax.jit(grad)": "ERROR", "torch.func.grad": "ERROR"}
    result = synthetic(case, status=errors)
    assert report.failures(results_of([result], [case.name])) == []
    result = synthetic(case, status={**errors, "autograd.grad": "ERROR"})
    failed = report.failures(results_of([result], [case.name]))
    # one bar per difgen row (through the iterations, and implicit = true)
    assert [b["why"] for b in failed] == ["no timed autograd row"] * len(case.difgen)


def test_a_slow_difgen_row_fails(cases: dict[str, Case]) -> None:
    case = cases["mlp_gradient"]
    result = synthetic(case, difgen_us=2000.0)
    failed = report.failures(results_of([result], ["mlp_gradient"]))
    assert len(failed) == len(case.difgen)  # each difgen row against the peers
    for bar in failed:
        assert bar["ratio"] == pytest.approx(2.0) and "closest: jax" in bar["bar"]


def test_an_ambiguous_tool_name_fails(cases: dict[str, Case]) -> None:
    """Two rows with the bar's tool name: which one was meant is unknown."""
    result = synthetic(cases["logsumexp_gradient"])
    twin = next(r for r in result["rows"] if r["tool"] == "difgen trace")
    result["rows"].append(dict(twin, median_us=0.001))
    failed = report.failures(results_of([result], ["logsumexp_gradient"]))
    assert any("2 rows 'difgen trace'" in b["why"] for b in failed)


def test_nan_ratio_fails() -> None:
    assert report._judge(float("nan"), "<", 1.0) == report.FAIL
    assert report._judge(None, ">=", 10.0) == report.FAIL


def test_main_exits_1_when_difgen_did_not_build(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The whole command, with the build failing and timing stubbed out: results
    are written and the exit status is 1."""
    monkeypatch.setattr(
        bench_main.peers,
        "build_difgen",
        lambda names, build: {n: peers.Built(None, 0.1, "build failed") for n in names},
    )

    def tools_for(case: Case, built: dict[str, peers.Built]) -> list[Tool]:
        good = [Tool(label, fam, case.limit, case.op_args) for label, fam in PEER_ROWS]
        return [
            Tool(case.limit_name, "hand", case.limit, case.op_args, role="limit"),
            *peers.difgen_tools(case, built),
            *good,
        ]

    def measure(tools: list[Tool], repeats: int) -> None:
        for tool in tools:
            if tool.status == "ok":
                tool.times = [1e-6] * repeats

    monkeypatch.setattr(bench_main.peers, "tools_for", tools_for)
    monkeypatch.setattr(bench_main, "measure", measure)
    monkeypatch.setattr(bench_main.report, "plot", lambda results, path: None)
    monkeypatch.setattr(bench_main.peers, "peer_status", dict)
    status = bench_main.main(["--only", "seed", "--quick", "--output", str(tmp_path)])
    assert status == 1
    md = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert "**SKIPPED** build failed" in md and "| **FAIL** |" in md
    seed = next(c for c in all_cases() if c.name == "seed")
    # the seed's bars, each difgen row against the peers, the compile bar of seed_c
    n_bars = sum(name == "seed" for _, name, *_ in report.BARS)
    n_fail = n_bars + len(seed.difgen) + len(c_modules({"seed": seed}))
    assert f"0 pass, {n_fail} fail" in md


def test_only_merges_into_the_folders_results_and_replace_does_not(
    cases: dict[str, Case], tmp_path: Path
) -> None:
    """A partial run replaces its own cases in the earlier results and keeps the
    rest, so ``--only`` never throws away the full table; bars are judged again on
    the merged set."""
    earlier = results_of([synthetic(c) for c in cases.values()])
    earlier["meta"]["command"] = "python -m benchmarks"
    earlier["tiny_build"] = {"auto": 0.3, "vector": 0.2}
    remeasured = synthetic(cases["logistic_gradient"])
    row = next(r for r in remeasured["rows"] if r["tool"] == "difgen trace")
    row["median_us"] = None  # this run's logistic row is untimed: its bars fail
    later = results_of([remeasured], ["logistic_gradient"])
    later["meta"]["command"] = "python -m benchmarks --only logistic_gradient"
    merged = report.merge(earlier, later)
    assert [c["name"] for c in merged["cases"]].count("logistic_gradient") == 1
    assert {c["name"] for c in merged["cases"]} == set(cases)
    assert merged["tiny_build"] == {"auto": 0.3, "vector": 0.2}
    assert merged["meta"]["command"] == (
        "python -m benchmarks, then python -m benchmarks --only logistic_gradient"
    )
    merged["bars"] = report.bars(merged["cases"])
    failed = {b["why"] for b in report.failures(merged)}
    assert failed == {"difgen trace was not timed"}


def test_main_with_only_keeps_the_other_cases_unless_replace(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cases: dict[str, Case]
) -> None:
    earlier = results_of([synthetic(c) for c in cases.values()])
    earlier["meta"]["command"] = "python -m benchmarks"
    report.write_json(earlier, tmp_path / "results.json")
    monkeypatch.setattr(
        bench_main.peers,
        "build_difgen",
        lambda names, build: {n: peers.Built(None, 0.1, "build failed") for n in names},
    )
    monkeypatch.setattr(bench_main, "measure", lambda tools, repeats: None)
    monkeypatch.setattr(bench_main.report, "plot", lambda results, path: None)
    monkeypatch.setattr(bench_main.peers, "peer_status", dict)
    bench_main.main(["--only", "seed", "--quick", "--output", str(tmp_path)])
    names = [c["name"] for c in json_of(tmp_path / "results.json")["cases"]]
    assert sorted(names) == sorted(cases)
    bench_main.main(["--only", "seed", "--replace", "--output", str(tmp_path)])
    names = [c["name"] for c in json_of(tmp_path / "results.json")["cases"]]
    assert names == ["seed"]


def json_of(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text(encoding="utf-8")))


# --- item 2: JAX's headline time is native; the conversion is beside it ----------------


def test_jax_headline_is_the_jitted_call_on_device_arrays(
    cases: dict[str, Case],
) -> None:
    import jax

    case = cases["lorenz_jacobian"]
    tools = peers.jax_tools(case)
    assert [t.name for t in tools] == ["jax.jit(jacfwd)", "jax.jit(jacrev)"]
    reference = case.limit(*case.op_args)
    for tool in tools:
        assert all(isinstance(a, jax.Array) for a in tool.args)
        assert all(isinstance(a, np.ndarray) for a in tool.converted_args)
        assert isinstance(tool.call(*tool.args), jax.Array)  # nothing converted
        assert isinstance(tool.converted(*tool.converted_args), np.ndarray)
        check(tool, reference)
        assert tool.status == "ok", tool.note


def test_check_compares_the_jax_result_in_both_variants() -> None:
    import jax.numpy as jnp

    ref = np.array([1.0, 2.0])
    right, wrong = (lambda: jnp.asarray(ref)), (lambda: jnp.asarray(ref + 1))
    headline_wrong = Tool("jax", "jax", wrong, converted=lambda: ref)
    check(headline_wrong, ref)
    assert headline_wrong.status == "WRONG"
    assert headline_wrong.note.startswith("max abs error 1")
    converted_wrong = Tool("jax", "jax", right, converted=lambda: ref + 1)
    check(converted_wrong, ref)
    assert converted_wrong.status == "WRONG"
    assert converted_wrong.note.startswith("with NumPy conversion: max abs error 1")


def test_the_jax_column_is_the_headline_time(cases: dict[str, Case]) -> None:
    """The summary's jax.jit column and jax / difgen use the native time (1000 µs),
    the conversion-inclusive one (3000 µs) sits in its own column."""
    result = synthetic(cases["logistic_gradient"], difgen_us=10.0)
    jax = next(r for r in result["rows"] if r["family"] == "jax")
    assert (jax["median_us"], jax["converted_median_us"]) == (1000.0, 3000.0)
    readme = report.summary(results_of([result], ["logistic_gradient"]))
    assert "| jax.jit µs | jax incl. conversion µs | jax / difgen |" in readme
    assert "| 1,000 | 3,000 | 100× |" in readme


# --- items 3 and 4: the seed reference and the Brusselator label ---------------------


def test_seed_reference_multiplies_by_a_float_literal() -> None:
    """``81 * x`` converts an int on every call, slowing the reference."""
    eighty_ones = [c for c in P.seed_derivative.__code__.co_consts if c == 81]
    assert [type(c) for c in eighty_ones] == [float]
    assert type(P.seed_derivative(2)) is float


def test_brusselator_rows_say_difgen_colors_and_the_peers_do_not(
    cases: dict[str, Case],
) -> None:
    case = cases["brusselator_jacobian"]
    assert all("colored" in label for label, _ in case.difgen)
    assert "coloring" in case.note and "do not" in case.note
    results = results_of([synthetic(case)], [case.name])
    assert f"**Note:** {case.note}" in report.markdown(results)
    readme = report.summary(results)
    assert "| brusselator_jacobian (jacobian) [1] | trace (dense, colored) |" in readme
    assert f"[1] {case.note}" in readme


# --- issue 12: CasADi's C as a CPython extension, timed doing difgen's job ------------


def _bidiagonal(x: Any) -> Any:
    return x[1:] * x[:-1] + np.exp(x[:-1])


def test_casadi_c_extension_computes_and_refuses_like_difgens(
    cases: dict[str, Case],
) -> None:
    """The CasADi C row is a METH_FASTCALL extension: a float in, a float out
    (seed); a dense jacobian in C order (Lorenz, not square-symmetric); a sparse
    jacobian written into the data of the caller's CSR array. Wrong input raises
    instead of reading memory it was not given. Needs the bench extra (casadi)."""
    ca = pytest.importorskip("casadi")
    for name in ("seed", "lorenz_jacobian"):
        case = cases[name]
        (tool,) = [t for t in peers.casadi_tools(case) if "codegen" in t.name]
        assert tool.name == report.CASADI_C and tool.compile_s is not None
        check(tool, case.limit(*case.op_args))
        assert tool.status == "ok", tool.note
        if name == "seed":
            assert type(tool.call(0.7)) is float
    x = np.linspace(0.1, 1.0, 120)
    case = Case("band", "band", "jacobian", _bidiagonal, lambda x: None, x)
    F = peers._casadi_function(case, ca)
    built = peers.casadi_extension(case, F, ca, sparse_out=True)
    op, csr = built.op, built.csr
    assert op(x, csr) is csr  # filled in place, the same array returned
    expected = np.zeros((119, 120))
    expected[np.arange(119), np.arange(119)] = x[1:] + np.exp(x[:-1])
    expected[np.arange(119), np.arange(1, 120)] = x[:-1]
    np.testing.assert_allclose(csr.toarray(), expected, rtol=1e-14)
    for wrong in (list(x), x[:-1], x.astype(np.float32), x[::-1][::-1][:, None]):
        with pytest.raises(TypeError, match="argument 0"):
            op(wrong, csr)
    with pytest.raises(ValueError, match="CSR array of this pattern"):
        op(x, csr.copy())
    with pytest.raises(TypeError, match="takes 2 arguments"):
        op(x)


def test_a_gradient_of_a_dict_is_checked_leaf_by_leaf_at_float32_tolerance() -> None:
    """The MLP written the natural way: the hand-written float32 dict gradient
    is the reference, and a tool agreeing to float32's rounding passes."""
    params, X, t = P.make_mlp_params()
    reference = P.mlp_params_loss_gradient(params, X, t)
    assert all(np.asarray(v).dtype == np.float32 for v in reference.values())
    assert isinstance(reference["b2"], np.float32)
    autograd = pytest.importorskip("autograd")
    grad = autograd.grad(peers.rebind(P.mlp_params_loss, autograd.numpy))
    as64 = {k: np.asarray(v, np.float64) for k, v in params.items()}
    X64, t64 = X.astype(np.float64), t.astype(np.float64)
    exact = grad(as64, X64, t64)  # float64 at the float32 point
    for key, value in reference.items():
        scale = max(1.0, float(np.max(np.abs(exact[key]))))
        assert np.max(np.abs(value - exact[key])) <= 1e-5 * scale
    near = {
        k: (v * np.float32(1 + 1e-6)).astype(np.float32) for k, v in reference.items()
    }
    cases = [
        ("agrees", lambda *a: near, "ok", ""),
        (
            "float64",
            lambda *a: {k: np.float64(1) * v for k, v in exact.items()},
            "WRONG",
            "dtype float64",
        ),
        ("a leaf off", lambda *a: {**near, "b1": near["b1"] + 1}, "WRONG", "['b1']"),
        ("keys", lambda *a: {k: near[k] for k in ("W1", "b1")}, "WRONG", "keys"),
    ]
    for _, fn, status, said in cases:
        tool = Tool("t", "hand", fn, (params, X, t))
        check(tool, as_dense(reference))
        assert tool.status == status and said in tool.note, (tool.status, tool.note)


def test_the_tiny_build_bar_judges_each_emission() -> None:
    """Issue 24's tiny build: a bar per emission, at most BAR_SECONDS of CPU;
    not measured (an --only run), no bar."""
    from benchmarks.tiny_build import BAR_SECONDS

    bars = report.tiny_build_bars({"auto": BAR_SECONDS + 0.01, "vector": 0.2})
    assert [b["result"] for b in bars] == [report.FAIL, report.PASS]
    assert "emit = 'auto'" in bars[0]["bar"] and bars[1]["ratio"] == 0.2
    assert report.tiny_build_bars(None) == []
