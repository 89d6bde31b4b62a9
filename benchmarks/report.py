"""Results as data, the issue's bars, and the three outputs: Markdown, JSON, PNG."""

from __future__ import annotations

import json
import os
import platform
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
                "native_median_us": t.native_median_us,
                "native_min_us": t.native_min_us,
                "x_limit": med / limit if med and limit else None,
                "x_f": med / f if med and f else None,
                "first_call_ms": t.first_call_ms,
                "build_s": t.build_s,
                "note": t.note,
            }
        )
    return {
        "name": case.name,
        "title": case.title,
        "operator": case.operator,
        "rows": rows,
    }


# --- the bars of the issue --------------------------------------------------------------

LIMIT, F = "<limit>", "<f>"
# (what, case, numerator tool, denominator tool, "<=" | ">=" | "<", threshold)
BARS = [
    ("seed: difgen sympy derivative / hand-written 81*x", "seed",
     "difgen sympy", LIMIT, "<=", 2.0),
    ("seed: jax.jit(grad) / difgen sympy derivative", "seed",
     "jax.jit(grad)", "difgen sympy", ">=", 100.0),
    ("seed: difgen trace reverse / trace forward", "seed",
     "difgen trace reverse", "difgen trace forward", "<=", 1.1),
    ("Rosenbrock n=2: difgen gradient / hand-written straight-line",
     "rosenbrock_n2_gradient", "difgen sympy", LIMIT, "<=", 1.3),
    ("Rosenbrock n=2: scipy rosen_der / difgen gradient", "rosenbrock_n2_gradient",
     "scipy rosen_der", "difgen sympy", ">=", 10.0),
    ("Rosenbrock n=100: difgen gradient / jax.jit(grad)", "rosenbrock_n100_gradient",
     "difgen trace", "jax.jit(grad)", "<", 1.0),
    ("Rosenbrock n=100: difgen gradient / scipy rosen_der", "rosenbrock_n100_gradient",
     "difgen trace", "scipy rosen_der", "<", 1.0),
    ("Rosenbrock n=10,000: difgen gradient / scipy rosen_der",
     "rosenbrock_n10000_gradient", "difgen trace", "scipy rosen_der", "<=", 1.2),
    ("Rosenbrock n=10,000: difgen gradient / f", "rosenbrock_n10000_gradient",
     "difgen trace", F, "<=", 2.5),
    ("Lorenz: difgen jacobian / hand-written (unpacked floats)", "lorenz_jacobian",
     "difgen sympy", LIMIT, "<=", 1.3),
    ("logistic: difgen gradient / hand-written", "logistic_gradient",
     "difgen trace", LIMIT, "<=", 1.2),
    ("logsumexp: difgen gradient / hand-written", "logsumexp_gradient",
     "difgen trace", LIMIT, "<=", 1.2),
]  # fmt: skip


def _median(case: dict[str, Any], tool: str) -> float | None:
    for row in case["rows"]:
        if tool in (row["tool"], {"limit": LIMIT, "f": F}.get(row["role"])):
            return row["median_us"] if row["status"] == "ok" else None
    return None


def _judge(ratio: float | None, op: str, threshold: float) -> str:
    if ratio is None:
        return "N/A"
    ok = {"<=": ratio <= threshold, ">=": ratio >= threshold, "<": ratio < threshold}
    return "PASS" if ok[op] else "FAIL"


def bars(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each bar of the issue with its measured ratio and PASS / FAIL / N/A."""
    by_name = {c["name"]: c for c in cases}
    out = []
    for what, name, num, den, op, threshold in BARS:
        if name not in by_name:
            continue
        a, b = _median(by_name[name], num), _median(by_name[name], den)
        ratio = a / b if a is not None and b else None
        out.append(
            {"bar": f"{what} {op} {threshold:g}", "ratio": ratio,
             "result": _judge(ratio, op, threshold)}
        )  # fmt: skip
    for case in cases:  # every difgen derivative faster than jax, autograd, torch.func
        for row in case["rows"]:
            if row["family"] == "difgen":
                out.append(_faster_than_peers(case, row))
    return out


def _faster_than_peers(case: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    best = {}
    for fam in PEER_FAMILIES:
        times = [
            r["median_us"]
            for r in case["rows"]
            if r["family"] == fam and r["status"] == "ok" and r["median_us"]
        ]
        if times:
            best[fam] = min(times)
    what = f"{case['name']}: {row['tool']} / fastest of {', '.join(PEER_FAMILIES)} < 1"
    if row["status"] != "ok" or not best:
        return {"bar": what, "ratio": None, "result": "N/A"}
    worst = max(best, key=lambda fam: row["median_us"] / best[fam])
    ratio = row["median_us"] / best[worst]
    return {
        "bar": what + f" (closest: {worst})",
        "ratio": ratio,
        "result": _judge(ratio, "<", 1.0),
    }


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


def markdown(results: dict[str, Any]) -> str:
    m = results["meta"]
    built = [n for n, d in results["difgen"].items() if d["built"]]
    total = len(results["difgen"])
    lines = [
        "# difgen benchmarks",
        "",
        f"- date: {m['date']}; command: `{m['command']}` ({m['repeats']} repeats)",
        f"- machine: {m['platform']}; {m['cpu']}; {m['cpu_count']} CPUs",
        f"- Python {m['python']}; NumPy {m['numpy']}; BLAS: "
        + ("; ".join(m["blas"]) or "unknown (threadpoolctl not installed)"),
        "- environment: "
        + (
            ", ".join(f"`{k}={v}`" for k, v in m["env"].items())
            or "no BLAS/thread variables set"
        ),
        "- peers: " + ", ".join(f"{k} {v}" for k, v in results["peers"].items()),
        f"- difgen: {len(built)} of {total} modules built and imported",
    ]
    if len(built) < total:
        lines.append(
            "- **difgen rows were skipped for the modules that did not build: "
            "regenerate these results (`python -m benchmarks`) once they do.**"
        )
    lines += [
        "",
        (
            "µs per call: median and min over the repeats (each a `timeit` autorange loop; "
            "the repeats run round-robin over a case's tools). ×hand and ×f divide the "
            "median by that of the hand-written derivative and of `f`. Peers take and "
            "return NumPy values (the conversion a NumPy user pays); *no-conv.* is the "
            "same call on framework arrays. *First call* includes JAX tracing and "
            "compilation. *Build* is `difgen build` (a subprocess, interpreter start "
            "included) or SymPy's diff + lambdify. WRONG = disagrees with the "
            "hand-written derivative, so not timed."
        ),
    ]
    for case in results["cases"]:
        lines += ["", f"## {case['name']} ({case['operator']})", "", case["title"], ""]
        lines += [
            (
                "| tool | median µs | min µs | ×hand | ×f | no-conv. µs (median) "
                "| first call ms | build s | status / note |"
            ),
            "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in case["rows"]:
            status = "" if r["status"] == "ok" else f"**{r['status']}** "
            lines.append(
                f"| {r['tool']} | {_us(r['median_us'])} | {_us(r['min_us'])} "
                f"| {_x(r['x_limit'])} | {_x(r['x_f'])} | {_us(r['native_median_us'])} "
                f"| {_us(r['first_call_ms'])} | {_opt(r['build_s'], '.2f')} "
                f"| {status}{r['note']} |"
            )
    lines += ["", "## Bars", "", "| bar | ratio | result |", "|---|---:|---|"]
    for b in results["bars"]:
        ratio = "" if b["ratio"] is None else f"{b['ratio']:.3g}"
        lines.append(f"| {b['bar']} | {ratio} | {b['result']} |")
    return "\n".join(lines) + "\n"


# --- JSON and PNG ----------------------------------------------------------------------------


def write_json(results: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


COLORS = {
    "difgen": "#1f77b4", "hand": "#2ca02c", "f": "#7f7f7f", "scipy": "#bcbd22",
    "jax": "#ff7f0e", "torch": "#d62728", "autograd": "#9467bd", "sympy": "#8c564b",
    "fd": "#e377c2",
}  # fmt: skip


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
    derivative, ``f`` and the fastest JAX row, then the bars."""
    m = results["meta"]
    lines = [
        f"Measured {m['date'][:10]} on {m['cpu']} ({m['cpu_count']} CPUs), "
        f"Python {m['python']}, NumPy {m['numpy']}, by `{m['command']}`. "
        "Median µs per call; every derivative checked against the hand-written one "
        "first. Full tables: `benchmarks/results/results.md`.",
        "",
        "| problem | difgen variant | difgen µs | hand-written µs | ×hand | ×f "
        "| jax.jit µs | jax / difgen |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for case in results["cases"]:
        rows = [r for r in case["rows"] if r["status"] == "ok"]
        hand = next((r for r in rows if r["role"] == "limit"), None)
        jax = min((r["median_us"] for r in rows if r["family"] == "jax"), default=None)
        for r in rows:
            if r["family"] != "difgen":
                continue
            speedup = None if jax is None else jax / r["median_us"]
            lines.append(
                f"| {case['name']} ({case['operator']}) | {r['tool'].removeprefix('difgen ')} "
                f"| {_us(r['median_us'])} | {_us(hand and hand['median_us'])} "
                f"| {_x(r['x_limit'])} | {_x(r['x_f'])} | {_us(jax)} | {_x(speedup)} |"
            )
    passed = sum(b["result"] == "PASS" for b in results["bars"])
    failed = [b for b in results["bars"] if b["result"] == "FAIL"]
    lines += ["", f"Bars of the issue: {passed} pass, {len(failed)} fail."]
    lines += [f"- FAIL: {b['bar']} (ratio {b['ratio']:.3g})" for b in failed]
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
        f"{head}{README_START}\n{summary(results)}\n{README_END}{tail}", encoding="utf-8"
    )
    return True
