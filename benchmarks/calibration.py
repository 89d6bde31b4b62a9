"""``python -m benchmarks.calibration``: the figures behind the NumPy and Python
target's constants, measured on this machine (under 30 s).

A constant's docstring says what the constant is for; the figure that sets its
value is measured here, one function per figure, and ``main`` prints them as a
Markdown table: the figure, its value on this machine, and the constant it
justifies. Rerun it on a new machine class before retuning a constant:

- the cost model (``generator/difgen/targets/cost.py``): ``CALL_NS``,
  ``ELEMENT_NS``, ``SCALAR_OP_NS``, ``ELEMENT_NS_SCALAR``, and where scalar code
  stops paying;
- the reductions' NumPy form (``primitives/reductions.py``, ``_reduce_form``):
  ``np.add.reduce`` rather than ``np.sum``;
- scalar code's argument check (``targets/python/printer.py``,
  ``_checked_unpack``): what checking while unpacking saves;
- the points variants' blocks (``targets/numpy/points.py``): ``BLOCK_BYTES`` (the
  cache a block's temporaries must fit) and ``MIN_BLOCK`` (the fewest points a
  block is worth), from the Rosenbrock gradient's points variant timed at block
  sizes 64 to 8192; and their layout (``targets/signatures.py``,
  ``PointsArguments.layout``): Fortran order against C order.

Times are the best of a few repeats (the least disturbed by other work on a shared
machine), in nanoseconds. The C target's figures are ``benchmarks/calibration_c.py``'s.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile
import timeit
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

PROBLEMS = Path(__file__).resolve().parent / "problems.py"
REPEAT = 5
SMALL = 8  # elements of a "small array": the operands of one scalar-sized equation
BLOCKS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)
POINTS = 1 << 14  # points evaluated per block size (every block size divides it)


def best_ns(fn: Callable[[], Any], number: int, repeat: int = REPEAT) -> float:
    """The least nanoseconds one ``fn()`` took, over ``repeat`` runs of ``number``
    calls (``timeit``: the garbage collector off)."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e9


def _define(source: str, **names: Any) -> dict[str, Any]:
    """The names ``source`` defines, run with ``names`` as its globals."""
    namespace = dict(names)
    exec(source, namespace)  # noqa: S102  (code as the printers write it, ours)
    return namespace


# ---------------------------------------------------------------- the cost model
def ufunc_call_ns() -> float:
    """A NumPy ufunc call on small arrays (``np.multiply`` of 8 elements each,
    result allocated): the fixed price of one vector-code equation."""
    a, b = np.linspace(0.5, 1.5, SMALL), np.linspace(1.5, 2.5, SMALL)
    return best_ns(lambda: np.multiply(a, b), 20_000)


def ufunc_element_ns() -> float:
    """A NumPy arithmetic ufunc per element (``np.multiply`` and ``np.add``, the
    difference between 2^16 and 2^10 elements, in cache): the price of an element
    of work in vector code."""
    per = []
    for ufunc in (np.multiply, np.add):
        times = {}
        for n in (1 << 10, 1 << 16):
            a, b = np.linspace(0.5, 1.5, n), np.linspace(1.5, 2.5, n)
            times[n] = best_ns(lambda u=ufunc, a=a, b=b: u(a, b), 2_000)
        per.append((times[1 << 16] - times[1 << 10]) / ((1 << 16) - (1 << 10)))
    return float(np.mean(per))


def float_op_ns() -> float:
    """One Python float operation in straight-line code (``t5 = t3 * t4 - x_1``,
    each temporary a local name), as the scalar printer writes it."""
    ops = 200
    lines = ["def f(x_0, x_1):", "    t0 = x_0 * x_1"]
    lines += [f"    t{i} = t{i - 1} {'*+-'[i % 3]} x_{i % 2}" for i in range(1, ops)]
    lines.append(f"    return t{ops - 1}")
    f = _define("\n".join(lines))["f"]
    call = best_ns(lambda: f(1.0000001, 0.9999999), 2_000)
    empty = best_ns(lambda: _two(1.0, 1.0), 20_000)  # the call itself
    return (call - empty) / ops


def _two(a: float, b: float) -> float:
    return a


def unpack_element_ns() -> float:
    """Unpacking an argument into floats (``x.tolist()`` and one name per
    element), per element, for 100 elements."""
    n = 100
    x = np.linspace(0.5, 1.5, n)
    names = ", ".join(f"x_{i}" for i in range(n))
    f = _define(f"def f(x):\n    {names} = x.tolist()\n    return x_0")["f"]
    return best_ns(lambda: f(x), 20_000) / n


def pack_element_ns() -> float:
    """Packing floats into an array result (``np.array([...])`` of a list
    literal), per element, for 100 elements."""
    n = 100
    items = ", ".join(f"t{i % 4}" for i in range(n))
    f = _define(f"def f(t0, t1, t2, t3):\n    return np.array([{items}])", np=np)["f"]
    return best_ns(lambda: f(0.5, 1.5, 2.5, 3.5), 20_000) / n


def checked_unpack_saving_ns() -> float:
    """What scalar code's check-while-unpacking saves per argument over the
    vector code's check (type, shape and dtype compared, then ``tolist``): a
    10-element float64 array, the fast path of both."""
    x = np.linspace(0.5, 1.5, 10)
    names = ", ".join(f"x_{i}" for i in range(10))
    namespace = _define(
        f"""
def checked(x):
    if type(x) is not NDARRAY or x.shape != (10,) or x.dtype is not F64:
        raise TypeError
    {names} = x.tolist()
    return x_0

def unpacked(x):
    try:
        flat = x.tolist()
        {names} = flat
    except (AttributeError, TypeError, ValueError):
        raise TypeError from None
    if type(x_0) is not float:
        raise TypeError
    return x_0
""",
        NDARRAY=np.ndarray,
        F64=np.dtype(np.float64),
    )
    checked, unpacked = namespace["checked"], namespace["unpacked"]
    return best_ns(lambda: checked(x), 20_000) - best_ns(lambda: unpacked(x), 20_000)


def break_even_ops(call: float, op: float, element: float) -> float:
    """The element operations of one equation at which scalar code (an ``op`` per
    element) costs what one vector call does (``call`` + ``element`` per element):
    derived from the figures above, not timed itself."""
    return call / (op - element)


# ------------------------------------------------------------------ reductions
def sum_wrapper_ns() -> float:
    """What ``np.sum`` costs on top of ``np.add.reduce`` (its Python wrapper), on
    a small array."""
    a = np.linspace(0.5, 1.5, SMALL)
    wrapped = best_ns(lambda: np.sum(a), 20_000)
    ufunc = best_ns(lambda: np.add.reduce(a), 20_000)
    return wrapped - ufunc


# -------------------------------------------------------------- points variants
def l2_cache_bytes() -> int | None:
    """The L2 cache of one core, as the kernel reports it (None where it does not
    say): the cache a block's temporaries are sized to stay within."""
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(base.glob("index*")):
        try:
            if (index / "level").read_text().strip() != "2":
                continue
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        units = {"K": 1 << 10, "M": 1 << 20}
        return int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
    return None


def build_points(directory: Path, dims: tuple[int, ...]) -> dict[int, ModuleType]:
    """The Rosenbrock gradient's points variant (trace backend) at each dimension,
    built into ``directory`` and imported."""
    from difgen import build as difgen_build

    shutil.copy(PROBLEMS, directory / PROBLEMS.name)
    modules = "".join(
        f'\n[[module]]\nname = "rosenbrock_points_{n}"\n'
        'function = "problems.py:rosenbrock"\nbackend = "trace"\n'
        f'operators = ["gradient"]\ninput = {{ shape = [{n}] }}\npoints = true\n'
        for n in dims
    )
    config = directory / "difgen.toml"
    config.write_text(f'[difgen]\noutput_dir = "out"\n{modules}')
    difgen_build(config)
    built = {}
    for n in dims:
        path = directory / "out" / f"rosenbrock_points_{n}.py"
        spec = importlib.util.spec_from_file_location(f"rosenbrock_points_{n}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        built[n] = module
    return built


@dataclass(frozen=True)
class Blocks:
    """Per-point nanoseconds of a points variant evaluated block by block."""

    n: int
    per_point: dict[int, float]  # block size: ns per point
    own: float  # ns per point of gradient_points itself (its own block size)
    c_order: float  # one block of 2048 points in C order over Fortran order

    @property
    def fastest(self) -> int:
        return min(self.per_point, key=self.per_point.__getitem__)


def points_blocks(module: ModuleType, n: int, repeat: int = REPEAT) -> Blocks:
    """``POINTS`` points of the gradient in blocks of each size of ``BLOCKS``, as
    the variant runs them (each block laid out in Fortran order, then its block
    function), and the variant's own call on the same points."""
    x = np.random.default_rng(0).uniform(0.5, 1.5, (POINTS, n))
    block_fn = module._gradient_points_block
    layout = module._points_layout

    def blocked(size: int) -> None:
        for start in range(0, POINTS, size):
            block_fn(layout(x[start : start + size]))

    per_point = {
        size: best_ns(lambda s=size: blocked(s), 1, repeat) / POINTS for size in BLOCKS
    }
    own = best_ns(lambda: module.gradient_points(x), 1, repeat) / POINTS
    block = x[:2048]  # one block, as the variant runs up to 4095 points
    fortran = layout(block)
    c_order = best_ns(lambda: block_fn(block), 10, repeat) / best_ns(
        lambda: block_fn(fortran), 10, repeat
    )
    return Blocks(n, per_point, own, c_order)


# ----------------------------------------------------------------------- report
@dataclass(frozen=True)
class Row:
    figure: str
    measured: str
    justifies: str


def rows(points: bool = True) -> list[Row]:
    """Every figure, measured now."""
    call, element = ufunc_call_ns(), ufunc_element_ns()
    op, unpack, pack = float_op_ns(), unpack_element_ns(), pack_element_ns()
    found = [
        Row("NumPy ufunc call, 8-element arrays", f"{call:.0f} ns", "cost.CALL_NS"),
        Row(
            "NumPy multiply/add per element (in cache)",
            f"{element:.2f} ns",
            "cost.ELEMENT_NS",
        ),
        Row(
            "Python float operation, straight-line code",
            f"{op:.0f} ns",
            "cost.SCALAR_OP_NS",
        ),
        Row(
            "unpack x.tolist() per element (100)",
            f"{unpack:.0f} ns",
            "cost.ELEMENT_NS_SCALAR",
        ),
        Row(
            "pack np.array([...]) per element (100)",
            f"{pack:.0f} ns",
            "cost.ELEMENT_NS_SCALAR",
        ),
        Row(
            "break-even: element operations per equation",
            f"{break_even_ops(call, op, element):.0f}",
            "cost: scalar code below it (derived from the rows above)",
        ),
        Row(
            "argument check saved by unpacking (10 elements)",
            f"{checked_unpack_saving_ns():.0f} ns",
            "python.printer._checked_unpack",
        ),
        Row(
            "np.sum over np.add.reduce, 8 elements",
            f"{sum_wrapper_ns():.0f} ns",
            "reductions._reduce_form: np.add.reduce",
        ),
    ]
    l2 = l2_cache_bytes()
    found.append(
        Row(
            "L2 cache per core (sysfs)",
            "unknown" if l2 is None else f"{l2 // 1024} KiB",
            "points.BLOCK_BYTES (within it)",
        )
    )
    if points:
        with tempfile.TemporaryDirectory() as tmp:
            modules = build_points(Path(tmp), (10, 100))
            for n, module in modules.items():
                blocks = points_blocks(module, n)
                times = ", ".join(
                    f"{size}: {ns:.0f}" for size, ns in blocks.per_point.items()
                )
                found.append(
                    Row(
                        f"Rosenbrock n={n} gradient_points, ns per point by block",
                        times,
                        "points.BLOCK_BYTES, points.MIN_BLOCK",
                    )
                )
                found.append(
                    Row(
                        f"n={n}: fastest block; gradient_points' own blocks",
                        f"{blocks.fastest} ({blocks.per_point[blocks.fastest]:.0f}"
                        f" ns); {blocks.own:.0f} ns per point",
                        "points.block_size",
                    )
                )
                if n == 10:
                    found.append(
                        Row(
                            "n=10: a block of 2048 points in C order over Fortran order",
                            f"{blocks.c_order:.1f}x",
                            "signatures.PointsArguments.layout",
                        )
                    )
                if n == 100:
                    ratio = blocks.per_point[128] / blocks.per_point[256]
                    found.append(
                        Row(
                            "n=100: blocks of 128 over blocks of 256",
                            f"{ratio:.2f}x",
                            "points.MIN_BLOCK = 256",
                        )
                    )
            sys.modules.pop("problems", None)
    return found


def table(found: list[Row]) -> str:
    lines = ["| figure | measured | justifies |", "|---|---|---|"]
    lines += [f"| {r.figure} | {r.measured} | {r.justifies} |" for r in found]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.calibration", description=__doc__
    )
    parser.add_argument(
        "--no-points",
        action="store_true",
        help="skip the points variants (no difgen build)",
    )
    args = parser.parse_args(argv)
    print(table(rows(points=not args.no_points)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
