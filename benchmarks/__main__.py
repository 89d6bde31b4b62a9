"""``python -m benchmarks [--quick] [--only NAMES]``: run the suite, write the report.

Run from the repository root. Progress goes to stderr; the Markdown report (also
written to ``benchmarks/results/results.md``, with ``results.json`` and
``results.png``) to stdout. ``--only`` re-measures the chosen cases and merges
them into the results already in the output folder (the other cases keep the rows
of the run that measured them, and every bar is judged again on the merged set);
``--replace`` writes the chosen cases alone. The exit status is 1 when any bar of the issue fails
(a difgen row that is WRONG, SKIPPED or missing fails its bars), after the results
are written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from benchmarks import peers, report, tiny_build
from benchmarks.cases import all_cases, select
from benchmarks.timing import as_dense, check, measure

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="3 repeats: a smoke run")
    parser.add_argument("--repeat", type=int, help="repeats per tool (default 7)")
    parser.add_argument(
        "--only", help="comma-separated parts of case names, e.g. seed,rosenbrock_n2"
    )
    parser.add_argument(
        "--no-build", action="store_true", help="import benchmarks/generated as is"
    )
    parser.add_argument("--output", type=Path, default=RESULTS, help="results folder")
    parser.add_argument(
        "--replace",
        action="store_true",
        help="with --only: write the chosen cases alone, not merged into the folder's",
    )
    args = parser.parse_args(argv)
    repeats = args.repeat or (3 if args.quick else 7)

    cases = select(all_cases(), args.only)
    if not cases:
        parser.error(f"no case matches --only {args.only!r}")
    load_before = os.getloadavg()[0]
    names = list(dict.fromkeys(n.partition(":")[0] for c in cases for _, n in c.difgen))
    print(f"building {len(names)} difgen modules", file=sys.stderr)
    built = peers.build_difgen(names, build=not args.no_build)

    results_cases = []
    for i, case in enumerate(cases, 1):
        print(f"[{i}/{len(cases)}] {case.name}", file=sys.stderr)
        tools = peers.tools_for(case, built)
        reference = as_dense(case.limit(*case.op_args))
        for tool in tools:
            check(tool, reference)
        measure(tools, repeats)
        results_cases.append(report.case_result(case, tools))

    # the tiny build's bar is a whole run's: --only runs choose cases, not it
    print("tiny build", file=sys.stderr)
    tiny = None if args.only else tiny_build.measure(min(repeats, 3))

    command = "python -m benchmarks " + " ".join(sys.argv[1:] if argv is None else argv)
    results = {
        "meta": {
            **report.machine(),
            "command": command.strip(),
            "repeats": repeats,
            # other processes on the machine slow some rows more than others
            "load": [load_before, os.getloadavg()[0]],
        },
        "peers": peers.peer_status(),
        "difgen": {
            name: {"built": b.module is not None, "build_s": b.build_s, "note": b.note}
            for name, b in built.items()
        },
        "cases": results_cases,
    }
    if tiny is not None:
        results["tiny_build"] = tiny
    previous = args.output / "results.json"
    merged = bool(args.only) and not args.replace and previous.exists()
    if merged:
        results = report.merge(json.loads(previous.read_text("utf-8")), results)
    # A partial run written alone judges the bars of its own cases; a full or
    # merged run judges them all.
    results["bars"] = report.bars(
        results["cases"], [c.name for c in cases] if args.only and not merged else None
    )
    args.output.mkdir(parents=True, exist_ok=True)
    if "tiny_build" in results:  # this run's, or the merged earlier run's
        results["bars"] += report.tiny_build_bars(results["tiny_build"])
    text = report.markdown(results)
    (args.output / "results.md").write_text(text, encoding="utf-8")
    report.write_json(results, args.output / "results.json")
    try:
        report.plot(results, args.output / "results.png")
    except ImportError as exc:
        print(f"no plot: {exc}", file=sys.stderr)
    print(text)
    print(f"wrote {args.output}/results.{{md,json,png}}", file=sys.stderr)
    if args.output == RESULTS and not args.only and not args.quick:
        readme = RESULTS.parent.parent / "README.md"
        if report.update_readme(readme, results):
            print(f"updated the benchmark section of {readme}", file=sys.stderr)
    return exit_status(results)


def exit_status(results: dict[str, Any]) -> int:
    """1 when any bar failed (each one named on stderr), else 0: a run whose
    difgen rows are wrong or missing must not look like a success to a script."""
    failed = report.failures(results)
    for bar in failed:
        why = f" ({bar['why']})" if bar["why"] else ""
        print(f"{bar['result']}: {bar['bar']}{why}", file=sys.stderr)
    if failed:
        print(f"{len(failed)} of {len(results['bars'])} bars fail", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
