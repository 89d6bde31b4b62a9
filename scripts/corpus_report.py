"""Build the whole corpus (tests/corpus) and write tests/corpus/REPORT.md.

For every corpus function, every backend it is meant for and every mode, the script
builds one module with difgen's Python API, checks it against NumPy and JAX as
``tests/corpus/test_corpus.py`` does, and records the outcome: handled, refused
(with difgen's message), WRONG (a check failed: the worst outcome) or crashed (an
exception that is not a DifgenError: a raw traceback). The report gives, per family
and backend, how many functions are handled and why the rest are refused, and the
build time of every module.

    python scripts/corpus_report.py                  # everything, writes REPORT.md
    python scripts/corpus_report.py --backend trace --json out.json
    python scripts/corpus_report.py --from-json a.json b.json   # merge, no builds
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
sys.path.insert(0, str(CORPUS))

import catalog  # noqa: E402
import harness  # noqa: E402
from expectations import EXPECTED_REFUSALS, KNOWN_CRASHES  # noqa: E402

from difgen.budget import BuildTimeout  # noqa: E402
from difgen.errors import DifgenError  # noqa: E402

TIMEOUT = harness.TIMEOUT
"""Seconds each build may take here (``--timeout``): the corpus tests' own limit, so
that the report and ``test_corpus.py`` agree on what is refused for time (with 20 s,
a loaded machine stopped builds the tests count as handled)."""


def run_one(
    case: catalog.Case, backend: str, mode: str, directory: Path, timeout: float
) -> dict[str, Any]:
    """Build and check one (function, backend, mode); never raises."""
    row: dict[str, Any] = {
        "name": case.name,
        "family": case.family,
        "backend": backend,
        "mode": mode,
    }
    start = time.perf_counter()  # refusals have no BuiltModule: time them here
    try:
        built = harness.build(case, backend, mode, directory, timeout=timeout)
    except BuildTimeout as exc:
        return {
            **row,
            "outcome": "refused",
            "kind": "timeout",
            "message": str(exc),
            "seconds": time.perf_counter() - start,
        }
    except DifgenError as exc:
        kind = type(exc).__name__
        return {
            **row,
            "outcome": "refused",
            "kind": kind,
            "message": str(exc),
            "seconds": time.perf_counter() - start,
        }
    except Exception as exc:  # noqa: BLE001  (a raw traceback is itself a finding)
        return {
            **row,
            "outcome": "crashed",
            "kind": type(exc).__name__,
            "message": _short(exc),
            "seconds": time.perf_counter() - start,
        }
    row["seconds"] = built.seconds
    try:
        harness.check(case, built)
    except AssertionError as exc:
        return {**row, "outcome": "WRONG", "kind": "check", "message": str(exc)[:2000]}
    except Exception as exc:  # noqa: BLE001
        return {
            **row,
            "outcome": "crashed",
            "kind": "generated: " + type(exc).__name__,
            "message": _short(exc),
        }
    return {**row, "outcome": "handled", "kind": "", "message": ""}


def _short(exc: BaseException) -> str:
    """The exception and the last frames of its traceback."""
    frames = traceback.format_exception(exc)
    return "".join(frames[-3:])[-1500:]


def run(
    backends: list[str], names: list[str] | None, timeout: float = TIMEOUT
) -> list[dict[str, Any]]:
    """Every selected pair, in corpus order, printing one line per build."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in catalog.CASES:
            if names and case.name not in names:
                continue
            for backend in case.backends:
                if backend not in backends:
                    continue
                for mode in catalog.MODES[backend]:
                    directory = Path(tmp, f"{case.name}-{backend}-{mode}")
                    row = run_one(case, backend, mode, directory, timeout)
                    print(
                        f"{row['outcome']:8} {row['seconds']:6.2f}s {backend}/{mode} {case.name} {row['kind']}",
                        flush=True,
                    )
                    rows.append(row)
    return rows


def _pair_outcome(rows: list[dict[str, Any]]) -> str:
    """One (function, backend) over its modes: the worst outcome wins."""
    order = ["WRONG", "crashed", "refused", "handled"]
    return min((r["outcome"] for r in rows), key=order.index)


def report(rows: list[dict[str, Any]]) -> str:
    """The markdown report."""
    pairs: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        pairs[(r["name"], r["backend"])].append(r)
    out = [
        "# Corpus report",
        "",
        "Generated by `python scripts/corpus_report.py`: every corpus function",
        "(`tests/corpus/`), built with difgen on each backend it is meant for (the trace",
        "backend in forward and reverse mode) and checked against NumPy (values) and",
        "autograd (derivatives) at two random points. A pair is *handled* when every",
        "mode builds and checks; *refused* when difgen declines with a DifgenError in",
        "some mode; **WRONG** when a built module disagrees with autograd; *crashed* on",
        "a raw traceback (a bug). Times are seconds of generation per module (load,",
        "trace, derivatives, emit), measured on the machine that ran the script: a",
        "refused time near the limit is a build stopped by the time limit.",
        "",
        "## Coverage per backend",
        "",
        "| backend | handled | refused | WRONG | crashed | total |",
        "|---|---|---|---|---|---|",
    ]
    for backend in catalog.BACKENDS:
        counts = Counter(
            _pair_outcome(v) for (n, b), v in pairs.items() if b == backend
        )
        total = sum(counts.values())
        out.append(
            f"| {backend} | {counts['handled']} ({_pct(counts['handled'], total)}) | {counts['refused']} | "
            f"{counts['WRONG']} | {counts['crashed']} | {total} |"
        )
    out += [
        "",
        "## Per family",
        "",
        "| family | backend | handled | refused | other |",
        "|---|---|---|---|---|",
    ]
    for family in catalog.FAMILIES:
        for backend in catalog.BACKENDS:
            counts = Counter(
                _pair_outcome(v)
                for (n, b), v in pairs.items()
                if b == backend and catalog.BY_NAME[n].family == family
            )
            total = sum(counts.values())
            if total:
                other = total - counts["handled"] - counts["refused"]
                out.append(
                    f"| {family} | {backend} | {counts['handled']}/{total} | {counts['refused']} | {other} |"
                )
    out += ["", "## Why pairs are refused", ""]
    reasons: dict[str, list[str]] = defaultdict(list)
    for (name, backend), v in pairs.items():
        if _pair_outcome(v) != "handled":
            expected = EXPECTED_REFUSALS.get((name, backend))
            crash = KNOWN_CRASHES.get((name, backend))
            if expected is not None:
                reason = expected.reason
            elif crash is not None:
                reason = crash[1]
            else:
                reason = f"NOT in EXPECTED_REFUSALS: {v[0]['kind']}"
            reasons[reason].append(f"{name} ({backend})")
    for reason, which in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
        out.append(f"- **{reason}** ({len(which)}): {', '.join(sorted(which))}")
    out += ["", "## Build time per module (seconds)", ""]
    out += [
        "| family | function | sympy | trace forward | trace reverse |",
        "|---|---|---|---|---|",
    ]
    for case in catalog.CASES:
        cells = []
        for backend, mode in (
            ("sympy", "auto"),
            ("trace", "forward"),
            ("trace", "reverse"),
        ):
            match = [
                r for r in pairs.get((case.name, backend), []) if r["mode"] == mode
            ]
            if not match:
                cells.append("—")
                continue
            r = match[0]
            mark = "" if r["outcome"] == "handled" else f" {r['outcome']}"
            cells.append(f"{r['seconds']:.2f}{mark}")
        out.append(f"| {case.family} | `{case.name}` | " + " | ".join(cells) + " |")
    slow = sorted(rows, key=lambda r: -r["seconds"])[:10]
    out += ["", "## Slowest builds", ""]
    out += [
        f"- {r['seconds']:.1f} s: `{r['name']}` {r['backend']}/{r['mode']} ({r['outcome']})"
        for r in slow
    ]
    total_time = sum(r["seconds"] for r in rows)
    out += ["", f"Total build time: {total_time:.0f} s over {len(rows)} builds.", ""]
    return "\n".join(out)


def _pct(part: int, total: int) -> str:
    return f"{100 * part / total:.0f}%" if total else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", action="append", choices=catalog.BACKENDS)
    parser.add_argument("--only", nargs="*", help="corpus function names")
    parser.add_argument("--json", type=Path, help="also write the raw rows here")
    parser.add_argument(
        "--from-json", nargs="*", type=Path, help="report from saved rows"
    )
    parser.add_argument("--timeout", type=float, default=TIMEOUT)
    parser.add_argument("--out", type=Path, default=CORPUS / "REPORT.md")
    args = parser.parse_args()
    if args.from_json:
        merged = {}  # a later file's row replaces an earlier one for the same build
        for path in args.from_json:
            for r in json.loads(path.read_text()):
                merged[(r["name"], r["backend"], r["mode"])] = r
        rows = list(merged.values())
    else:
        rows = run(args.backend or list(catalog.BACKENDS), args.only, args.timeout)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    args.out.write_text(report(rows))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
