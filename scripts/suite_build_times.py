"""How long every module the test suite builds takes to generate, slowest first.

Issue 9 asks that every function in the test suite build in under 10 s on either
backend. This runs pytest (all of ``tests/``, or the paths given) with a plugin that
wraps :func:`difgen.pipeline.generate_module`, the one entry point every build
goes through (the CLI, the API, the fixtures of ``tests/conftest.py``), and
records the CPU and wall seconds of each call with the module's function,
backend and input shape. It prints the slowest builds and exits 1 when one took
over the bar (CPU seconds: the machine may be shared) or when pytest failed.

    python scripts/suite_build_times.py                      # the whole suite
    python scripts/suite_build_times.py tests/derive/test_build_time.py --top 10
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BAR_SECONDS = 10.0
RECORD = "DIFGEN_BUILD_TIMES"
"""Environment variable: the file the plugin appends one JSON line per build to."""


def install(target: str) -> None:
    """Wrap the build entry point so each call appends its times to ``target``.

    Runs when pytest loads this file as a plugin (``-p``), before any conftest or
    test module imports ``generate_module`` by name.
    """
    from difgen import pipeline

    original = pipeline.generate_module

    def timed(spec: Any, cfg: Any, fn: Any) -> str:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return original(spec, cfg, fn)
        finally:
            row = {
                "function": spec.function,
                "backend": spec.backend,
                "emit": getattr(spec, "emit", ""),
                "shape": list(spec.input.shape),
                "operators": list(spec.operators),
                "cpu": time.process_time() - cpu,
                "wall": time.perf_counter() - wall,
            }
            with open(target, "a", encoding="utf-8") as out:
                out.write(json.dumps(row) + "\n")

    pipeline.generate_module = timed


if os.environ.get(RECORD) and __name__ != "__main__":
    install(os.environ[RECORD])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("paths", nargs="*", default=["tests"], help="pytest paths")
    parser.add_argument("--top", type=int, default=15, help="rows to print")
    args, extra = parser.parse_known_args(argv)  # the rest goes to pytest
    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "builds.jsonl"
        record.touch()
        env = dict(os.environ, **{RECORD: str(record)})
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).resolve().parent), env.get("PYTHONPATH", "")]
        )
        command = [sys.executable, "-m", "pytest", "-q", "-p", "suite_build_times"]
        status = subprocess.call([*command, *extra, *args.paths], cwd=ROOT, env=env)
        rows = [json.loads(line) for line in record.read_text().splitlines()]
    rows.sort(key=lambda r: r["cpu"], reverse=True)
    print(f"\n{len(rows)} builds; slowest by CPU seconds:")
    for r in rows[: args.top]:
        shape = "x".join(map(str, r["shape"])) or "scalar"
        print(
            f"  {r['cpu']:6.2f} s CPU {r['wall']:6.2f} s wall  {r['backend']:5}  "
            f"{r['function']} ({shape}) {','.join(r['operators'])}"
        )
    slow = [r for r in rows if r["cpu"] > BAR_SECONDS]
    if slow:
        print(f"{len(slow)} builds over {BAR_SECONDS:g} s of CPU")
    return 1 if slow or status != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
