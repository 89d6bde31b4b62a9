"""Results as data, the issue's bars, and the three outputs: Markdown, JSON, PNG."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Collection
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.cases import Case
from benchmarks.timing import Tool

ENV_PREFIXES = ("OPENBLAS_", "OMP_", "MKL_", "NVPL_", "XLA_", "JAX_", "TORCH_")
PEER_FAMILIES = ("jax", "autograd", "torch")  # "every difgen derivative faster than"


def machine() -> dict[str, Any]:
    """Where the figures come from, including the variables that change BLAS speed."""
    info: dict[str, Any] = {
        "date": datetime.now().isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "env": {
            k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)
        },
    }
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = [
            f"{p.get('internal_api')} {p.get('version')} {p.get('architecture')} "
            f"{p.get('num_threads')} threads"
            for p in threadpool_info()
            if p.get("user_api") == "blas"
        ]
    except ImportError:
        info["blas"] = []
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


# --- results as data -----------------------------------------------------------------


def case_result(case: Case, tools: list[Tool]) -> dict[str, Any]:
    """One case as plain data; ``difgen`` lists the difgen rows the case must have,
    so that a row which went missing on the way is a failure, not an absence."""
    limit = next((t.median_us for t in tools if t.role == "limit"), None)
    f = next((t.median_us for t in tools if t.role == "f"), None)
    rows = []
    for t in tools:
        med = t.median_us
        rows.append(
            {
                "tool": t.name,
                "family": t.family,
                "role": t.role,
                "status": t.status,
                "median_us": med,
                "min_us": t.min_us,
                "converted_median_us": t.converted_median_us,
                "converted_min_us": t.converted_min_us,
                "x_limit": med / limit if med and limit else None,
                "x_f": med / f if med and f else None,
                "first_call_ms": t.first_call_ms,
                "build_s": t.build_s,
                "compile_s": t.compile_s,
                "note": t.note,
            }
        )
    return {
        "name": case.name,
        "title": case.title,
        "operator": case.operator,
        "note": case.note,
        "difgen": [label for label, _ in case.difgen],
        "modules": {label: n.partition(":")[0] for label, n in case.difgen},
        "peers": list(case.peers or PEER_FAMILIES),
        "rows": rows,
    }


# --- the bars of the issue --------------------------------------------------------------

LIMIT, F = "<limit>", "<f>"
PASS, FAIL = "PASS", "FAIL"  # nothing else: a bar that cannot be judged fails
# (what, case, numerator tool, denominator tool, "<=" | ">=" | "<", threshold)
BARS = [
    (
        "seed: difgen sympy derivative / hand-written 81.0*x",
        "seed",
        "difgen sympy",
        LIMIT,
        "<=",
        2.0,
    ),
    (
        "seed: jax.jit(grad) / difgen sympy derivative",
        "seed",
        "jax.jit(grad)",
        "difgen sympy",
        ">=",
        100.0,
    ),
    (
        "seed: difgen trace reverse / trace forward",
        "seed",
        "difgen trace reverse",
        "difgen trace forward",
        "<=",
        1.1,
    ),
    (
        "Rosenbrock n=2: difgen gradient / hand-written straight-line",
        "rosenbrock_n2_gradient",
        "difgen sympy",
        LIMIT,
        "<=",
        1.3,
    ),
    (
        "Rosenbrock n=2: scipy rosen_der / difgen gradient",
        "rosenbrock_n2_gradient",
        "scipy rosen_der",
        "difgen sympy",
        ">=",
        10.0,
    ),
    (
        "Rosenbrock n=100: difgen gradient / jax.jit(grad)",
        "rosenbrock_n100_gradient",
        "difgen trace",
        "jax.jit(grad)",
        "<",
        1.0,
    ),
    (
        "Rosenbrock n=100: difgen gradient / scipy rosen_der",
        "rosenbrock_n100_gradient",
        "difgen trace",
        "scipy rosen_der",
        "<",
        1.0,
    ),
    (
        "Rosenbrock n=10,000: difgen gradient / scipy rosen_der",
        "rosenbrock_n10000_gradient",
        "difgen trace",
        "scipy rosen_der",
        "<=",
        1.2,
    ),
    (
        "Rosenbrock n=10,000: difgen gradient / f",
        "rosenbrock_n10000_gradient",
        "difgen trace",
        F,
        "<=",
        2.5,
    ),
    (
        "Lorenz: difgen jacobian / hand-written (unpacked floats)",
        "lorenz_jacobian",
        "difgen sympy",
        LIMIT,
        "<=",
        1.3,
    ),
    (
        "logistic: difgen gradient / hand-written",
        "logistic_gradient",
        "difgen trace",
        LIMIT,
        "<=",
        1.2,
    ),
    (
        "logsumexp: difgen gradient / hand-written",
        "logsumexp_gradient",
        "difgen trace",
        LIMIT,
        "<=",
        1.2,
    ),
]
# issue 24: the logistic gradient on a 40 MB X within 1.2x the hand-written C
# kernel that reads X once
BARS += [
    (
        "logistic 100000x50: difgen C / hand C kernel (one pass over X)",
        "logistic_100000x50_gradient",
        "difgen C",
        "hand C kernel",
        "<=",
        1.2,
    ),
]
CASADI_C_PREFIX = "casadi SX codegen C"
CASADI_C = f"{CASADI_C_PREFIX} (extension)"
CASADI_C_IN_PLACE = f"{CASADI_C_PREFIX} (CSR data in place)"
DIFGEN_C, DIFGEN_TRACE = "difgen C", "difgen trace"
# issue 12: emit = "c" at most 1.0x CasADi's generated C (both CPython extensions
# compiled with the same compiler and flags), on these cases
BARS += [
    (f"{name}: difgen C / CasADi C", name, DIFGEN_C, CASADI_C, "<=", 1.0)
    for name in (
        "seed",
        "rosenbrock_n2_gradient",
        "rosenbrock_n100_gradient",
        "rosenbrock_n100_hessian",
        "lorenz_jacobian",
        "logsumexp_gradient",
    )
]
BARS += [
    (
        "brusselator_jacobian: difgen C / CasADi C, both filling CSR data in place",
        "brusselator_jacobian",
        "difgen C (CSR data in place, colored)",
        CASADI_C_IN_PLACE,
        "<=",
        1.0,
    ),
]
# ... and never slower than difgen's NumPy emission on the large problems
BARS += [
    (f"{name}: difgen C / difgen trace", name, DIFGEN_C, DIFGEN_TRACE, "<=", 1.0)
    for name in (
        "rosenbrock_n10000_gradient",
        "rosenbrock_n10000_hvp",
        "logistic_gradient",
        "mlp_gradient",
    )
]
# issue 22: the MLP written the natural way (a dict of four float32 arrays, emit =
# "c"), at most JAX's jit(grad) on the same dict in float32
BARS += [
    (
        "mlp_params_float32_gradient: difgen C / jax.jit(grad), a dict of float32 arrays",
        "mlp_params_float32_gradient",
        DIFGEN_C,
        "jax.jit(grad)",
        "<=",
        1.0,
    ),
]
# issue 22: a converged loop differentiated implicitly (implicit = true), at most the
# hand-written implicit derivative (the same solve, then 2 E / (1 - e cos E))
BARS += [
    (
        (
            "kepler_newton_gradient: difgen trace implicit / hand-written implicit "
            "derivative"
        ),
        "kepler_newton_gradient",
        "difgen trace implicit",
        LIMIT,
        "<=",
        1.0,
    ),
]
FLOOR = "empty Python function (same arguments)"  # peers.FLOOR
BARS += [
    (
        "per-call floor: difgen C on a 3-vector / an empty Python function",
        "call_floor",
        DIFGEN_C,
        FLOOR,
        "<=",
        3.0,
    ),
]
# issue 24: the Rosenbrock gradient and hvp in C against the hand-written one-pass
# C kernel (benchmarks/kernels/rosenbrock.c, compiled with difgen's flags), and
# beyond the caches against JAX's jit
HAND_C_KERNEL = "hand C kernel"  # benchmarks.kernels.rosenbrock.LABEL
BARS += [
    (
        f"{name}: difgen C / hand C kernel",
        name,
        DIFGEN_C,
        HAND_C_KERNEL,
        "<=",
        1.5,
    )
    for name in (
        "rosenbrock_n10000_gradient",
        "rosenbrock_n10000_hvp",
        "rosenbrock_n1000000_gradient",
        "rosenbrock_n1000000_hvp",
    )
]
BARS += [
    (
        f"{name}: difgen C / {jax_label}",
        name,
        DIFGEN_C,
        jax_label,
        "<=",
        1.0,
    )
    for name, jax_label in (
        ("rosenbrock_n1000000_gradient", "jax.jit(grad)"),
        ("rosenbrock_n1000000_hvp", "jax.jit(jvp of grad)"),
    )
]
COMPILE_MAX_S = 10.0
"""The issue's build bar: compiling each benchmark module (the C compiler alone,
timed apart from difgen's generation) takes less than this many seconds."""


def tiny_build_bars(best: dict[str, float] | None) -> list[dict[str, Any]]:
    """The issue's tiny-build bar, one per emission: the least CPU seconds of a
    whole build in a fresh process (:mod:`benchmarks.tiny_build`) at most its
    ``BAR_SECONDS``. None: not measured in this run (an ``--only`` run), no bar."""
    if best is None:
        return []
    from benchmarks.tiny_build import BAR_SECONDS

    return [
        _bar(
            f"tiny build (3x3 jacobian, emit = {emit!r}): CPU seconds "
            f"<= {BAR_SECONDS:g}",
            cpu,
            _judge(cpu, "<=", BAR_SECONDS),
        )
        for emit, cpu in best.items()
    ]


def _row(case: dict[str, Any], tool: str) -> tuple[dict[str, Any] | None, str]:
    """The one row named ``tool`` (or the LIMIT / F role), or None and why not."""
    role = {LIMIT: "limit", F: "f"}.get(tool)
    found = [
        r for r in case["rows"] if (r["role"] == role if role else r["tool"] == tool)
    ]
    if len(found) != 1:
        return None, f"{len(found)} rows {tool!r} in {case['name']}"
    return found[0], ""


def _timed(case: dict[str, Any], tool: str) -> tuple[float | None, str]:
    """The median µs of ``tool`` in ``case``, or None and the reason it has none:
    missing, WRONG, SKIPPED, ERROR or never timed all end up here."""
    row, why = _row(case, tool)
    if row is None:
        return None, why
    if row["status"] != "ok":
        return None, f"{row['tool']} is {row['status']}"
    if not row["median_us"]:
        return None, f"{row['tool']} was not timed"
    return row["median_us"], ""


def _judge(ratio: float | None, op: str, threshold: float) -> str:
    """PASS only for a measured ratio on the right side of the threshold (so a
    missing ratio, or NaN, fails)."""
    if ratio is None:
        return FAIL
    ok = {"<=": ratio <= threshold, ">=": ratio >= threshold, "<": ratio < threshold}
    return PASS if ok[op] else FAIL


def _bar(what: str, ratio: float | None, result: str, why: str = "") -> dict[str, Any]:
    return {"bar": what, "ratio": ratio, "result": result, "why": why}


def bars(
    cases: list[dict[str, Any]], selected: Collection[str] | None = None
) -> list[dict[str, Any]]:
    """Each bar of the issue with its measured ratio and PASS or FAIL.

    ``selected`` names the cases a partial run (``--only``) chose; a bar on a case
    outside it is not judged. Every other bar is: one whose case, difgen row or
    peer row is missing, WRONG, SKIPPED or untimed FAILs with the reason in ``why``.
    """
    by_name = {c["name"]: c for c in cases}
    out = []
    for what, name, num, den, op, threshold in BARS:
        label = f"{what} {op} {threshold:g}"
        if selected is not None and name not in selected:
            continue
        if name not in by_name:
            out.append(_bar(label, None, FAIL, f"case {name} has no results"))
            continue
        (a, why_a), (b, why_b) = _timed(by_name[name], num), _timed(by_name[name], den)
        ratio = a / b if a is not None and b is not None else None
        out.append(
            _bar(
                label,
                ratio,
                _judge(ratio, op, threshold),
                "; ".join(filter(None, (why_a, why_b))),
            )
        )
    # every difgen derivative faster than jax, autograd, torch.func
    out.extend(_faster_than_peers(c, label) for c in cases for label in c["difgen"])
    out.extend(_compile_bars(cases))
    return out


def _compile_bars(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Compile time < COMPILE_MAX_S for every difgen C module of the cases, once
    per module; a module whose row has no compile time (not compiled in this run,
    or missing) fails."""
    out, seen = [], set()
    for case in cases:
        modules = case.get("modules", {})
        for label in case["difgen"]:
            if not label.startswith(DIFGEN_C):
                continue
            module = modules.get(label, f"{case['name']}: {label}")
            if module in seen:
                continue
            seen.add(module)
            what = f"compile {module}: seconds < {COMPILE_MAX_S:g}"
            row, why = _row(case, label)
            seconds = row.get("compile_s") if row is not None else None
            if row is not None and seconds is None:
                why = f"{label} was not compiled in this run ({row['status']})"
            result = _judge(seconds, "<", COMPILE_MAX_S)
            out.append(_bar(what, seconds, result, why))
    return out


def _faster_than_peers(case: dict[str, Any], tool: str) -> dict[str, Any]:
    """The difgen row ``tool`` against the fastest ok row of every peer family.

    A family with no ok row fails the bar: "faster than jax, autograd and torch"
    is not shown by beating only those that ran.
    """
    families = case.get("peers") or PEER_FAMILIES
    what = f"{case['name']}: {tool} / fastest of {', '.join(families)} < 1"
    mine, why = _timed(case, tool)
    best: dict[str, float] = {}
    missing = []
    for fam in families:
        times = [
            r["median_us"]
            for r in case["rows"]
            if r["family"] == fam and r["status"] == "ok" and r["median_us"]
        ]
        if times:
            best[fam] = min(times)
        else:
            missing.append(f"no timed {fam} row")
    if mine is None or missing:
        return _bar(what, None, FAIL, "; ".join(filter(None, [why, *missing])))
    worst = max(best, key=lambda fam: mine / best[fam])
    ratio = mine / best[worst]
    return _bar(what + f" (closest: {worst})", ratio, _judge(ratio, "<", 1.0))


def failures(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The bars that did not pass (anything but PASS counts: no third state)."""
    return [b for b in results["bars"] if b["result"] != PASS]


# --- Markdown -----------------------------------------------------------------------------


def _us(v: float | None) -> str:
    if v is None:
        return ""
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.3g}"


def _x(v: float | None) -> str:
    if v is None:
        return ""
    return f"{v:,.0f}×" if v >= 100 else f"{v:.1f}×" if v >= 10 else f"{v:.2f}×"


def _opt(v: float | None, fmt: str) -> str:
    return "" if v is None else format(v, fmt)


COLUMNS = (
    "µs per call: median and min over the repeats (each a `timeit` autorange loop; "
    "the repeats run round-robin over a case's tools). ×hand and ×f divide the "
    "median by that of the hand-written derivative and of `f`. A framework's median "
    "is its own time: JAX's jitted function called on JAX arrays already on the "
    "device, with `block_until_ready`; torch.func on tensors. *with NumPy "
    "conversion* is the same call taking and returning NumPy values (what a caller "
    "holding NumPy arrays pays), shown beside it and used for no ratio; both are "
    "checked against the hand-written derivative. *First call* includes JAX tracing "
    "and compilation. *Build* is `difgen build` (a subprocess, interpreter start "
    "included) or SymPy's diff + lambdify. WRONG = disagrees with the hand-written "
    "derivative, so not timed."
)


def _load(meta: dict[str, Any]) -> str:
    """The 1-minute load average before and after the run, when recorded: a load
    near the CPU count means other work competed with the timings."""
    if "load" not in meta:
        return ""
    before, after = meta["load"]
    return f"; load average (1 min) {before:.2f} before the run, {after:.2f} after"


def _bar_count(results: dict[str, Any]) -> str:
    failed = failures(results)
    text = f"{len(results['bars']) - len(failed)} pass, {len(failed)} fail"
    return f"**{text}**" if failed else text


def markdown(results: dict[str, Any]) -> str:
    m = results["meta"]
    built = [n for n, d in results["difgen"].items() if d["built"]]
    total = len(results["difgen"])
    lines = [
        "# difgen benchmarks",
        "",
        f"- date: {m['date']}; command: `{m['command']}` ({m['repeats']} repeats)",
        f"- machine: {m['platform']}; {m['cpu']}; {m['cpu_count']} CPUs" + _load(m),
        f"- Python {m['python']}; NumPy {m['numpy']}; BLAS: "
        + ("; ".join(m["blas"]) or "unknown (threadpoolctl not installed)"),
        "- environment: "
        + (
            ", ".join(f"`{k}={v}`" for k, v in m["env"].items())
            or "no BLAS/thread variables set"
        ),
        "- peers: " + ", ".join(f"{k} {v}" for k, v in results["peers"].items()),
        f"- difgen: {len(built)} of {total} modules built and imported",
        f"- bars of the issue: {_bar_count(results)} (table at the end)",
    ]
    if len(built) < total:
        lines.append(
            "- **difgen rows were skipped for the modules that did not build, and "
            "their bars fail: regenerate these results (`python -m benchmarks`) once "
            "they do.**"
        )
    lines += ["", COLUMNS]
    for case in results["cases"]:
        lines += ["", f"## {case['name']} ({case['operator']})", "", case["title"], ""]
        if case.get("note"):
            lines += [f"**Note:** {case['note']}", ""]
        lines += [
            (
                "| tool | median µs | min µs | ×hand | ×f | with NumPy conversion "
                "µs (median) | first call ms | build s | compile s | status / note |"
            ),
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in case["rows"]:
            status = "" if r["status"] == "ok" else f"**{r['status']}** "
            lines.append(
                f"| {r['tool']} | {_us(r['median_us'])} | {_us(r['min_us'])} "
                f"| {_x(r['x_limit'])} | {_x(r['x_f'])} "
                f"| {_us(r['converted_median_us'])} "
                f"| {_us(r['first_call_ms'])} | {_opt(r['build_s'], '.2f')} "
                f"| {_opt(r.get('compile_s'), '.2f')} | {status}{r['note']} |"
            )
        present = {r["tool"] for r in case["rows"]}
        for label in case["difgen"]:
            if label not in present:
                lines.append(f"| {label} |  |  |  |  |  |  |  |  | **MISSING** |")
    lines += ["", "## C build times", ""] + c_build_table(results)
    lines += [
        "",
        "## Bars",
        "",
        (
            f"{_bar_count(results)}. A bar whose difgen or peer row is missing, WRONG, "
            "SKIPPED or untimed fails; `python -m benchmarks` exits with status 1 when "
            "any bar fails."
        ),
        "",
        "| bar | ratio | result | why |",
        "|---|---:|---|---|",
    ]
    for b in results["bars"]:
        ratio = "" if b["ratio"] is None else f"{b['ratio']:.3g}"
        result = b["result"] if b["result"] == PASS else f"**{b['result']}**"
        lines.append(f"| {b['bar']} | {ratio} | {result} | {b['why']} |")
    return "\n".join(lines) + "\n"


def c_build_table(results: dict[str, Any]) -> list[str]:
    """Generation and compile seconds of every compiled tool, difgen's C modules
    beside CasADi's generated C, one line per case and tool (the issue: compiling
    every benchmark module takes less than 10 s; report it beside CasADi's)."""
    lines = [
        (
            "*generate s*: difgen's is `difgen build` of the module (a subprocess, "
            "interpreter start included), CasADi's the SX graph, its derivative and "
            "`CodeGenerator`; *compile s*: the C compiler alone (the same compiler "
            "and flags for both), the extension rebuilt in every run."
        ),
        "",
        "| case | tool | generate s | compile s | status |",
        "|---|---|---:|---:|---|",
    ]
    for case in results["cases"]:
        for r in case["rows"]:
            if not (
                r["tool"].startswith(DIFGEN_C) or r["tool"].startswith(CASADI_C_PREFIX)
            ):
                continue
            lines.append(
                f"| {case['name']} | {r['tool']} | {_opt(r['build_s'], '.2f')} "
                f"| {_opt(r.get('compile_s'), '.2f')} | {r['status']} |"
            )
    return lines


def merge(previous: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The results of a partial run (``--only``) merged into an earlier run's.

    A case measured now replaces the earlier one of the same name; the others are
    kept as measured then (each bar's ratio comes from one case, so from one run).
    The header keeps this run's machine and names both commands; the tiny build's
    measurement (a whole run's, never an ``--only`` run's) is the earlier run's.
    """
    names = {c["name"] for c in new["cases"]}
    kept = [c for c in previous.get("cases", []) if c["name"] not in names]
    meta = dict(new["meta"])
    earlier = previous.get("meta", {}).get("command", "")
    meta["command"] = (
        f"{earlier}, then {meta['command']}" if earlier else meta["command"]
    )
    carried = {k: previous[k] for k in ("tiny_build",) if k in previous}
    return {
        **carried,
        **new,
        "meta": meta,
        "peers": {**previous.get("peers", {}), **new["peers"]},
        "difgen": {**previous.get("difgen", {}), **new["difgen"]},
        "cases": kept + new["cases"],
    }


# --- JSON and PNG ----------------------------------------------------------------------------


def write_json(results: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


COLORS = {
    "difgen": "#1f77b4",
    "hand": "#2ca02c",
    "f": "#7f7f7f",
    "scipy": "#bcbd22",
    "jax": "#ff7f0e",
    "torch": "#d62728",
    "autograd": "#9467bd",
    "sympy": "#8c564b",
    "fd": "#e377c2",
    "casadi": "#17becf",
}


def plot(results: dict[str, Any], path: Path) -> None:
    """One panel per case: median µs per call of each tool, log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = results["cases"]
    ncols = 3 if len(cases) > 2 else len(cases)
    nrows = -(-len(cases) // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(7.5 * ncols, 3.6 * nrows), squeeze=False
    )
    for ax, case in zip(axes.flat, cases):
        rows = case["rows"][::-1]  # first tool on top
        times = [r["median_us"] if r["status"] == "ok" else np.nan for r in rows]
        colors = [COLORS.get(r["family"], "black") for r in rows]
        y = np.arange(len(rows))
        ax.barh(y, times, color=colors)
        ax.set_xscale("log")
        ax.set_yticks(y, [r["tool"] for r in rows], fontsize=8)
        ax.set_title(f"{case['name']} ({case['operator']})", fontsize=10)
        ax.set_xlabel("µs per call (median, log scale)", fontsize=8)
        ax.grid(axis="x", which="major", alpha=0.3)
        finite = [t for t in times if np.isfinite(t)]
        if finite:
            ax.set_xlim(min(finite) / 3, max(finite) * 30)
        for yi, t, r in zip(y, times, rows):
            label = _us(t) if np.isfinite(t) else r["status"]
            ax.text(
                t if np.isfinite(t) else ax.get_xlim()[0],
                yi,
                f" {label}",
                va="center",
                fontsize=7,
                color="black" if np.isfinite(t) else "#b00",
            )
    spare = list(axes.flat)[len(cases) :]
    for ax in spare:
        ax.axis("off")
    families = dict.fromkeys(r["family"] for c in cases for r in c["rows"])
    handles = [
        plt.Rectangle((0, 0), 1, 1, color=COLORS.get(f, "black")) for f in families
    ]
    (spare[0] if spare else fig).legend(
        handles, list(families), loc="center", title="family", fontsize=9
    )
    m = results["meta"]
    fig.suptitle(
        f"difgen benchmarks — {m['date']} — {m['cpu']}, {m['cpu_count']} CPUs, "
        f"NumPy {m['numpy']}",
        fontsize=12,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=90)
    plt.close(fig)


# --- README summary ------------------------------------------------------------------

README_START = "<!-- benchmarks:start (python -m benchmarks rewrites this part) -->"
README_END = "<!-- benchmarks:end -->"


def summary(results: dict[str, Any]) -> str:
    """A compact table for the README: each difgen row against the hand-written
    derivative, ``f`` and the fastest JAX row, then the bars.

    Every difgen row a case expects is listed, ok or not: a WRONG, SKIPPED or
    missing row shows its status in place of a time instead of vanishing.
    """
    m = results["meta"]
    lines = [
        (
            f"Measured {m['date'][:10]} on {m['cpu']} ({m['cpu_count']} CPUs), "
            f"Python {m['python']}, NumPy {m['numpy']}, by `{m['command']}`. "
            "Median µs per call; every derivative checked against the hand-written one "
            "first. Full tables: `benchmarks/results/results.md`."
        ),
        "",
        (
            "*jax.jit µs* is JAX's own time: the fastest jitted JAX transform called on "
            "JAX arrays already on the device, with `block_until_ready`, no conversion; "
            "*jax incl. conversion µs* is the same call taking and returning NumPy "
            "values. *jax / difgen* divides the former by the difgen time."
        ),
        "",
        (
            "| problem | difgen variant | difgen µs | hand-written µs | ×hand | ×f "
            "| jax.jit µs | jax incl. conversion µs | jax / difgen |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    notes = []
    for case in results["cases"]:
        ok = [r for r in case["rows"] if r["status"] == "ok" and r["median_us"]]
        hand = next((r for r in ok if r["role"] == "limit"), None)
        jax = min(
            (r for r in ok if r["family"] == "jax"),
            key=lambda r: r["median_us"],
            default=None,
        )
        problem = f"{case['name']} ({case['operator']})"
        if case.get("note"):
            notes.append(case["note"])
            problem += f" [{len(notes)}]"
        for label in case["difgen"]:
            r = next((r for r in case["rows"] if r["tool"] == label), None)
            status = "MISSING" if r is None else r["status"]
            timed = r is not None and status == "ok" and r["median_us"]
            mine = _us(r["median_us"]) if timed else f"**{status}**"
            speedup = jax["median_us"] / r["median_us"] if timed and jax else None
            lines.append(
                f"| {problem} | {label.removeprefix('difgen ')} | {mine} "
                f"| {_us(hand and hand['median_us'])} "
                f"| {_x(r['x_limit'] if timed else None)} "
                f"| {_x(r['x_f'] if timed else None)} "
                f"| {_us(jax and jax['median_us'])} "
                f"| {_us(jax and jax['converted_median_us'])} | {_x(speedup)} |"
            )
    if notes:
        lines += [""] + [f"[{i}] {note}" for i, note in enumerate(notes, 1)]
    failed = failures(results)
    lines += ["", f"Bars of the issue: {_bar_count(results)}."]
    for b in failed:
        ratio = "no ratio" if b["ratio"] is None else f"ratio {b['ratio']:.3g}"
        why = f": {b['why']}" if b["why"] else ""
        lines.append(f"- {b['result']}: {b['bar']} ({ratio}){why}")
    lines += ["", "C build times, difgen's compiled modules beside CasADi's C:", ""]
    lines += c_build_table(results)
    lines += ["", "![benchmarks](benchmarks/results/results.png)"]
    return "\n".join(lines)


def update_readme(path: Path, results: dict[str, Any]) -> bool:
    """Replace the README's benchmark section (between the markers) with the summary."""
    if not path.exists():
        return False
    text = path.read_text(encoding="utf-8")
    if README_START not in text or README_END not in text:
        return False
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    path.write_text(
        f"{head}{README_START}\n{summary(results)}\n{README_END}{tail}",
        encoding="utf-8",
    )
    return True
