"""Scale of the trace backend: build time and file size against the input size.

Builds the extended Rosenbrock gradient, value_and_gradient and hvp at n = 100,000
(the figure of issue 3: under 10 s and 20 KB on a 2-core machine), the same at
smaller n to show that time and size do not grow with n, and the dense hessian and
jacobian at n = 1,000. Each build runs in a fresh process, timed from config to
written file, like ``difgen build``. Also runs each generated gradient once and
checks it against the closed form.

Then times ``derivative`` of the checked-in seed modules built in forward and in
reverse mode (generated/seed_forward.py, generated/seed_reverse.py): the issue asks
for a ratio within 10%.

    python scripts/trace_scale.py            # the table
    python scripts/trace_scale.py --quick    # n = 100,000 gradient only
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

FUNCTIONS = '''\
import numpy as np


def rosenbrock(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def chain(x):
    """A vector-valued map, for the jacobian: y_i = sin(x_i) x_{i+1} + x_0."""
    return np.sin(x[:-1]) * x[1:] + x[0]
'''

CONFIG = """\
[difgen]
output_dir = "out"

[[module]]
name = "{name}"
function = "functions.py:{function}"
backend = "trace"
operators = {operators}
input = {{ shape = [{n}] }}
"""

BUILD = """
import json, sys, time
t0 = time.perf_counter()
from difgen.cli import main
t1 = time.perf_counter()
status = main(["build", sys.argv[1]])
t2 = time.perf_counter()
print(json.dumps({"status": status, "import_s": t1 - t0, "build_s": t2 - t1}))
"""

CHECK = """
import importlib.util, json, sys, time
import numpy as np
spec = importlib.util.spec_from_file_location("m", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
n = m.INPUT_SHAPE[0]
x = np.linspace(-1.2, 1.2, n)
out = {}
if hasattr(m, "gradient"):
    g = np.zeros(n)
    g[:-1] = -400.0 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2.0 * (1.0 - x[:-1])
    g[1:] += 200.0 * (x[1:] - x[:-1] ** 2)
    t = time.perf_counter(); got = m.gradient(x); out["gradient_run_s"] = time.perf_counter() - t
    out["gradient_error"] = float(np.max(np.abs(got - g)) / np.max(np.abs(g)))
if hasattr(m, "hessian"):
    t = time.perf_counter(); H = m.hessian(x); out["hessian_run_s"] = time.perf_counter() - t
    v = np.cos(np.arange(n))
    out["hessian_vs_hvp"] = float(np.max(np.abs(H @ v - m.hvp(x, v))))
if hasattr(m, "jacobian"):
    t = time.perf_counter(); J = m.jacobian(x); out["jacobian_run_s"] = time.perf_counter() - t
    out["jacobian_shape"] = list(J.shape)
print(json.dumps(out))
"""

CASES = [
    # name, function, n, operators
    ("rosen_grad_100000", "rosenbrock", 100_000, ["gradient"]),
    ("rosen_100000", "rosenbrock", 100_000, ["gradient", "value_and_gradient", "hvp"]),
    ("rosen_10000", "rosenbrock", 10_000, ["gradient", "value_and_gradient", "hvp"]),
    ("rosen_1000", "rosenbrock", 1_000, ["gradient", "value_and_gradient", "hvp"]),
    ("rosen_hessian_1000", "rosenbrock", 1_000, ["gradient", "hvp", "hessian"]),
    ("chain_jacobian_1000", "chain", 1_000, ["jacobian"]),
]


def run_case(root: Path, name: str, function: str, n: int, ops: list[str]) -> dict:
    """Build one module in a fresh interpreter; measure time, size and correctness."""
    work = root / name
    work.mkdir()
    (work / "functions.py").write_text(FUNCTIONS)
    config = work / "difgen.toml"
    config.write_text(
        CONFIG.format(name=name, function=function, n=n, operators=json.dumps(ops))
    )
    run = subprocess.run(
        [sys.executable, "-c", BUILD, str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0:
        raise SystemExit(run.stderr)
    timing = json.loads(run.stdout.strip().splitlines()[-1])
    path = work / "out" / f"{name}.py"
    check = subprocess.run(
        [sys.executable, "-c", CHECK, str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if check.returncode != 0:
        raise SystemExit(check.stderr)
    text = path.read_text()
    return {
        "module": name,
        "n": n,
        "operators": ",".join(ops),
        "build_s": round(timing["build_s"], 2),
        "import_s": round(timing["import_s"], 2),
        "file_bytes": len(text.encode()),
        "loops": sum(
            line.lstrip().startswith(("for ", "while ")) for line in text.splitlines()
        ),
        **{
            k: (round(v, 4) if isinstance(v, float) else v)
            for k, v in json.loads(check.stdout).items()
        },
    }


ROOT = Path(__file__).resolve().parent.parent

SEED_TIMING = """
import importlib.util, json, sys, timeit
out = {}
for mode in ("forward", "reverse"):
    spec = importlib.util.spec_from_file_location(mode, sys.argv[1] + f"/seed_{mode}.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    timer = timeit.Timer("d(0.37)", globals={"d": m.derivative})
    number = 200_000
    out[mode] = min(timer.repeat(repeat=7, number=number)) / number * 1e9
print(json.dumps(out))
"""


def seed_ratio() -> dict[str, float]:
    """ns per call of the seed derivative, forward and reverse mode modules."""
    run = subprocess.run(
        [sys.executable, "-c", SEED_TIMING, str(ROOT / "generated")],
        capture_output=True,
        text=True,
        check=True,
    )
    times = json.loads(run.stdout)
    times["ratio"] = times["reverse"] / times["forward"]
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="only n = 100,000 gradient"
    )
    parser.add_argument("--json", action="store_true", help="print JSON rows")
    args = parser.parse_args(argv)
    cases = CASES[:1] if args.quick else CASES
    with tempfile.TemporaryDirectory() as tmp:
        rows = [run_case(Path(tmp), *case) for case in cases]
    if args.json:
        print(json.dumps({"builds": rows, "seed": seed_ratio()}, indent=1))
        return 0
    print(textwrap.dedent(f"""\
        trace backend scale (python {sys.version.split()[0]}); build = `difgen build`
        of one module in a fresh process, after imports.
        """))
    header = ["module", "n", "operators", "build_s", "file_bytes", "loops"]
    print(" | ".join(header + ["check"]))
    for row in rows:
        check = {k: v for k, v in row.items() if k not in header and k != "import_s"}
        print(" | ".join(str(row[h]) for h in header) + " | " + json.dumps(check))
    big = rows[0]
    ok = big["build_s"] < 10.0 and big["file_bytes"] < 20_000
    print(
        f"\nn = 100,000 gradient: {big['build_s']} s, {big['file_bytes']} bytes: "
        f"{'within' if ok else 'OUTSIDE'} the 10 s / 20 KB target"
    )
    seed = seed_ratio()
    same = abs(seed["ratio"] - 1.0) <= 0.10
    print(
        f"seed derivative: forward {seed['forward']:.1f} ns, reverse "
        f"{seed['reverse']:.1f} ns per call, ratio {seed['ratio']:.3f}: "
        f"{'within' if same else 'OUTSIDE'} 10%"
    )
    return 0 if ok and same else 1


if __name__ == "__main__":
    raise SystemExit(main())
