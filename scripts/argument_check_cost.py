"""What the argument checks of generated operators cost per call.

Every generated operator starts by checking its arguments against the hard-coded
shapes (``emit/signatures.argument_checks``). This script times each operator of
the checked-in modules in ``generated/`` twice in one process: as generated, and
from a copy of the module with the check statements removed (an AST rewrite that
drops the leading ``if`` statements calling ``_as_array``, ``_as_scalar`` or
``_check_out``). The difference is the checks' cost on the fast path (arguments of
the right type, shape and dtype).

    python scripts/argument_check_cost.py            # every module and operator
    python scripts/argument_check_cost.py seed lorenz
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import sys
import timeit
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CHECKS = {"_as_array", "_as_scalar", "_check_out"}


def _is_check(node: ast.stmt) -> bool:
    """Whether a statement is one of the generated argument checks."""
    if not isinstance(node, ast.If):
        return False
    calls = [
        n
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    ]
    return any(call.func.id in CHECKS for call in calls)  # type: ignore[attr-defined]


def _raises(node: ast.stmt) -> bool:
    """Whether a statement is an ``if`` test whose body only raises."""
    return isinstance(node, ast.If) and all(isinstance(s, ast.Raise) for s in node.body)


def _unchecked(statements: list[ast.stmt]) -> list[ast.stmt]:
    """Statements without argument checks: the leading ``if`` checks go, and a
    checked unpacking (``try: x_0, ... = x.tolist()`` then type and dtype tests
    that raise, as scalar code checks a 1-D argument) becomes the plain unpacking."""
    kept: list[ast.stmt] = []
    for statement in statements:
        if _is_check(statement) and not isinstance(statement, ast.Try):
            continue
        if isinstance(statement, ast.Try) and any(
            _is_check(ast.If(test=ast.Constant(True), body=h.body, orelse=[]))
            for h in statement.handlers
        ):
            kept.extend(s for s in statement.body if not _raises(s))
            continue
        kept.append(statement)
    return kept


def without_checks(source: str) -> str:
    """``source`` with every operator's argument checks removed."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            node.body = _unchecked(node.body)
    return ast.unparse(tree)


def _load(name: str, source: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_loader(name, loader=None, origin=str(path))
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def argument_shapes(source: str) -> dict[str, dict[str, tuple[int, ...]]]:
    """Each operator's checked arguments and their shapes, read from the checks."""
    shapes: dict[str, dict[str, tuple[int, ...]]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            found = shapes.setdefault(node.name, {})
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                    if call.func.id == "_as_array":
                        name = ast.literal_eval(call.args[0])
                        found[name] = tuple(ast.literal_eval(call.args[2]))
                    elif call.func.id == "_as_scalar":
                        found[ast.literal_eval(call.args[0])] = ()
    return shapes


def arguments(shapes: dict[str, tuple[int, ...]]) -> list[Any]:
    """Values of the right type, shape and dtype, in parameter order."""
    rng = np.random.default_rng(0)
    values: list[Any] = []
    for shape in shapes.values():
        value = rng.uniform(0.5, 1.5, size=shape)
        values.append(float(value) if shape == () else value)
    return values


def time_pair(a: Any, b: Any, args: list[Any], repeat: int = 15) -> tuple[float, float]:
    """Best time per call (ns) of ``a`` and of ``b``, measured alternately so that
    both see the same machine load."""
    timers = [timeit.Timer(lambda fn=fn: fn(*args)) for fn in (a, b)]
    number, _ = timers[0].autorange()
    best = [float("inf"), float("inf")]
    for _ in range(repeat):
        for i, timer in enumerate(timers):
            best[i] = min(best[i], timer.timeit(number) / number * 1e9)
    return best[0], best[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="module names (default: all)")
    args = parser.parse_args(argv)
    paths = sorted((ROOT / "generated").glob("*.py"))
    if args.modules:
        paths = [p for p in paths if p.stem in args.modules]
    print("| module | operator | checked (ns) | unchecked (ns) | checks (ns) |")
    print("|---|---|---:|---:|---:|")
    for path in paths:
        source = path.read_text()
        checked = _load(f"checked_{path.stem}", source, path)
        bare = _load(f"bare_{path.stem}", without_checks(source), path)
        shapes = argument_shapes(source)
        for name in checked.__all__:
            fn = getattr(checked, name)
            call_args = arguments(shapes[name])
            a, b = time_pair(fn, getattr(bare, name), call_args)
            print(f"| {path.stem} | {name} | {a:,.0f} | {b:,.0f} | {a - b:+,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
